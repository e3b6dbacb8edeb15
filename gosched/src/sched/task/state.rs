//! The task state word: one `AtomicUsize` per task holding lifecycle bits and the
//! reference count.
//!
//! ```text
//!  bit 0  RUNNING        a thread is polling (or cancelling) the future; it has exclusive
//!                        access to the future/output stage
//!  bit 1  COMPLETE       the output (or the JoinError) is stored; the future is gone
//!  bit 2  NOTIFIED       the task is in a run queue, or will be put in one by the thread
//!                        that is running it (woken while RUNNING)
//!  bit 3  CANCELLED      abort() was requested; honoured by the next run
//!  bit 4  JOIN_INTEREST  a JoinHandle exists
//!  bit 5  JOIN_WAKER     the join waker slot is set and owned by the runtime side
//!  bits 6.. REFCOUNT     references: run queue entries, wakers, the JoinHandle
//! ```
//!
//! Rules:
//! - A task is in at most one run queue at a time: only the thread that moves the
//!   word from "not NOTIFIED, not RUNNING" to NOTIFIED submits it. A wake that finds
//!   RUNNING only sets NOTIFIED; the runner then resubmits it after the poll
//!   (`transition_to_idle` reports that). A wake that finds COMPLETE or NOTIFIED
//!   does nothing.
//! - Only the thread that set RUNNING touches the future or writes the output.
//! - After COMPLETE is set the output belongs to the JoinHandle if JOIN_INTEREST
//!   was set at that moment, otherwise the completing thread drops it.
//! - The join waker slot: while JOIN_WAKER is clear the JoinHandle may write it;
//!   once set (by CAS that fails if COMPLETE) only the completing thread reads it.
//!   To replace it the JoinHandle first clears JOIN_WAKER by CAS (fails if
//!   COMPLETE). The waker itself is dropped with the task's memory.
//! - Every reference holder owns one REF_ONE; the last `ref_dec` frees the task.

use crate::loom::sync::atomic::{AtomicUsize, Ordering::*};

use std::fmt;

const RUNNING: usize = 1 << 0;
const COMPLETE: usize = 1 << 1;
const NOTIFIED: usize = 1 << 2;
const CANCELLED: usize = 1 << 3;
const JOIN_INTEREST: usize = 1 << 4;
const JOIN_WAKER: usize = 1 << 5;
const REF_SHIFT: usize = 6;
const REF_ONE: usize = 1 << REF_SHIFT;

pub(crate) struct State(AtomicUsize);

/// One value of the state word, read once (tokio's `Snapshot`): the bits are
/// only looked at through these methods.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Snapshot(usize);

impl Snapshot {
    pub(crate) fn is_running(self) -> bool {
        self.0 & RUNNING != 0
    }
    pub(crate) fn is_complete(self) -> bool {
        self.0 & COMPLETE != 0
    }
    pub(crate) fn is_notified(self) -> bool {
        self.0 & NOTIFIED != 0
    }
    pub(crate) fn is_cancelled(self) -> bool {
        self.0 & CANCELLED != 0
    }
    pub(crate) fn is_join_interested(self) -> bool {
        self.0 & JOIN_INTEREST != 0
    }
    pub(crate) fn has_join_waker(self) -> bool {
        self.0 & JOIN_WAKER != 0
    }
    pub(crate) fn ref_count(self) -> usize {
        self.0 >> REF_SHIFT
    }
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot")
            .field("running", &self.is_running())
            .field("complete", &self.is_complete())
            .field("notified", &self.is_notified())
            .field("cancelled", &self.is_cancelled())
            .field("join_interest", &self.is_join_interested())
            .field("join_waker", &self.has_join_waker())
            .field("refs", &self.ref_count())
            .finish()
    }
}

/// What the scheduler must do after a wake-up attempt.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Notify {
    /// The caller now holds a new run-queue reference and must submit the task.
    Submit,
    /// Nothing to do (already queued, running, or done).
    DoNothing,
}

/// Outcome of `transition_to_running`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Run {
    /// Poll the future.
    Poll,
    /// Cancel it instead (abort was requested).
    Cancel,
}

/// Outcome of `transition_to_idle`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Idle {
    /// Parked; the runner drops its run-queue reference.
    Parked,
    /// Woken during the poll: the runner resubmits (keeping its reference).
    Notified,
    /// Abort requested during the poll: cancel now (the runner keeps RUNNING).
    Cancel,
}

impl State {
    /// A new task: queued (NOTIFIED), with a JoinHandle, two references (the run
    /// queue entry and the JoinHandle).
    pub(crate) fn new() -> State {
        State(AtomicUsize::new(NOTIFIED | JOIN_INTEREST | (2 * REF_ONE)))
    }

    pub(crate) fn load(&self) -> Snapshot {
        Snapshot(self.0.load(Acquire))
    }

    fn update<R>(&self, mut f: impl FnMut(usize) -> (Option<usize>, R)) -> R {
        let mut cur = self.0.load(Acquire);
        loop {
            let (next, res) = f(cur);
            let Some(next) = next else { return res };
            match self.0.compare_exchange_weak(cur, next, AcqRel, Acquire) {
                Ok(_) => return res,
                Err(actual) => cur = actual,
            }
        }
    }

    /// Called by the scheduler with a run-queue reference in hand.
    #[must_use]
    pub(crate) fn transition_to_running(&self) -> Run {
        self.update(|s| {
            debug_assert!(s & NOTIFIED != 0, "running a task that was not notified");
            debug_assert!(s & (RUNNING | COMPLETE) == 0, "task run twice");
            let next = (s & !NOTIFIED) | RUNNING;
            let r = if s & CANCELLED != 0 {
                Run::Cancel
            } else {
                Run::Poll
            };
            (Some(next), r)
        })
    }

    /// After a poll returned `Pending`.
    ///
    /// `requeue`: the poll yielded (a goroutine's `yield_now`), so the task
    /// is NOTIFIED by this same transition, as a wake during the poll would
    /// have made it, without that wake's own read-modify-write.
    #[must_use]
    pub(crate) fn transition_to_idle(&self, requeue: bool) -> Idle {
        let requeue = if requeue { NOTIFIED } else { 0 };
        self.update(|s| {
            debug_assert!(s & RUNNING != 0);
            if s & CANCELLED != 0 {
                return (None, Idle::Cancel);
            }
            let next = (s & !RUNNING) | requeue;
            let r = if next & NOTIFIED != 0 {
                Idle::Notified
            } else {
                Idle::Parked
            };
            (Some(next), r)
        })
    }

    /// After the output is stored: RUNNING → COMPLETE. Returns the new snapshot.
    #[must_use]
    pub(crate) fn transition_to_complete(&self) -> Snapshot {
        let prev = self.0.fetch_xor(RUNNING | COMPLETE, AcqRel);
        debug_assert!(prev & RUNNING != 0 && prev & COMPLETE == 0);
        Snapshot(prev ^ (RUNNING | COMPLETE))
    }

    /// A wake through a reference the caller keeps (`wake_by_ref`).
    #[must_use]
    pub(crate) fn transition_to_notified_by_ref(&self) -> Notify {
        self.update(|s| {
            if s & (COMPLETE | NOTIFIED) != 0 {
                (None, Notify::DoNothing)
            } else if s & RUNNING != 0 {
                (Some(s | NOTIFIED), Notify::DoNothing)
            } else {
                (Some((s | NOTIFIED) + REF_ONE), Notify::Submit)
            }
        })
    }

    /// `abort()`: mark cancelled; if the task is idle, queue it so a scheduler
    /// thread performs the cancellation (returns `Submit` with a new reference).
    #[must_use]
    pub(crate) fn transition_to_notified_and_cancel(&self) -> Notify {
        self.update(|s| {
            if s & (COMPLETE | CANCELLED) != 0 {
                (None, Notify::DoNothing)
            } else if s & (RUNNING | NOTIFIED) != 0 {
                // The runner or the queued run will see CANCELLED.
                (Some(s | CANCELLED | NOTIFIED), Notify::DoNothing)
            } else {
                (Some((s | CANCELLED | NOTIFIED) + REF_ONE), Notify::Submit)
            }
        })
    }

    /// Runtime shutdown: claim an idle task to cancel it (sets RUNNING|CANCELLED).
    /// Fails if it is running or complete.
    #[must_use]
    pub(crate) fn transition_to_shutdown(&self) -> bool {
        self.update(|s| {
            if s & (RUNNING | COMPLETE) != 0 {
                (None, false)
            } else {
                (Some(s | RUNNING | CANCELLED), true)
            }
        })
    }

    /// JoinHandle: publish the waker it just wrote (fails if COMPLETE).
    pub(crate) fn set_join_waker(&self) -> Result<(), Snapshot> {
        self.update(|s| {
            debug_assert!(s & JOIN_INTEREST != 0 && s & JOIN_WAKER == 0);
            if s & COMPLETE != 0 {
                (None, Err(Snapshot(s)))
            } else {
                (Some(s | JOIN_WAKER), Ok(()))
            }
        })
    }

    /// JoinHandle: take back the waker slot to replace it (fails if COMPLETE).
    pub(crate) fn unset_join_waker(&self) -> Result<(), Snapshot> {
        self.update(|s| {
            debug_assert!(s & JOIN_INTEREST != 0 && s & JOIN_WAKER != 0);
            if s & COMPLETE != 0 {
                (None, Err(Snapshot(s)))
            } else {
                (Some(s & !JOIN_WAKER), Ok(()))
            }
        })
    }

    /// JoinHandle dropped: clear JOIN_INTEREST. Returns the snapshot before; if it
    /// was COMPLETE the JoinHandle owns (and must drop) the output.
    #[must_use]
    pub(crate) fn unset_join_interest(&self) -> Snapshot {
        self.update(|s| {
            debug_assert!(s & JOIN_INTEREST != 0);
            (Some(s & !JOIN_INTEREST), Snapshot(s))
        })
    }

    pub(crate) fn ref_inc(&self) {
        let prev = self.0.fetch_add(REF_ONE, Relaxed);
        if prev > isize::MAX as usize {
            std::process::abort();
        }
    }

    /// Drop one reference; true if it was the last (the caller frees the task).
    #[must_use]
    pub(crate) fn ref_dec(&self) -> bool {
        let prev = self.0.fetch_sub(REF_ONE, AcqRel);
        debug_assert!(prev >> REF_SHIFT >= 1);
        prev >> REF_SHIFT == 1
    }

    /// Drop two references at once (run queue + join handle in the common
    /// "complete, handle already gone" path).
    #[must_use]
    pub(crate) fn ref_dec_n(&self, n: usize) -> bool {
        let prev = self.0.fetch_sub(n * REF_ONE, AcqRel);
        debug_assert!(prev >> REF_SHIFT >= n);
        prev >> REF_SHIFT == n
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Models of the state word alone: concurrent wake + complete + JoinHandle drop.
    //! The full task (with its output and waker) is modelled in `mod.rs`.
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;
    use loom::thread;

    /// A poll that yielded ends with `transition_to_idle(true)` instead of
    /// waking itself: the task is requeued exactly once, by the runner,
    /// whether a concurrent wake comes before or after (it finds the task
    /// RUNNING, or NOTIFIED already, and does nothing).
    #[test]
    fn yield_requeue_beside_a_wake_submits_once() {
        loom::model(|| {
            let s = Arc::new(State::new());
            assert_eq!(s.transition_to_running(), Run::Poll);
            let s2 = s.clone();
            let waker = thread::spawn(move || s2.transition_to_notified_by_ref());
            let idle = s.transition_to_idle(true);
            let w = waker.join().unwrap();
            match (idle, w) {
                (Idle::Notified, Notify::DoNothing) => {}
                other => panic!("yield requeue lost or doubled: {other:?}"),
            }
        });
    }

    #[test]
    fn wake_while_running_is_not_lost() {
        loom::model(|| {
            let s = Arc::new(State::new());
            assert_eq!(s.transition_to_running(), Run::Poll);
            let s2 = s.clone();
            let waker = thread::spawn(move || s2.transition_to_notified_by_ref());
            let idle = s.transition_to_idle(false);
            let w = waker.join().unwrap();
            // Exactly one party resubmits: either the runner saw NOTIFIED, or the
            // waker found the task idle and took a new reference.
            match (idle, w) {
                (Idle::Notified, Notify::DoNothing) => {}
                (Idle::Parked, Notify::Submit) => {}
                other => panic!("lost or doubled wake: {other:?}"),
            }
        });
    }

    /// The runner completes while the JoinHandle is dropped and a waker fires:
    /// the output is dropped exactly once, nothing is submitted after completion,
    /// and exactly one party frees the task.
    #[test]
    fn complete_vs_join_drop_vs_wake() {
        use loom::sync::atomic::AtomicUsize;
        loom::model(|| {
            let s = Arc::new(State::new()); // refs: queue + join
            s.ref_inc(); // a waker's reference
            let output_drops = Arc::new(AtomicUsize::new(0));
            let frees = Arc::new(AtomicUsize::new(0));
            assert_eq!(s.transition_to_running(), Run::Poll);

            let (s1, d1, f1) = (s.clone(), output_drops.clone(), frees.clone());
            let join = thread::spawn(move || {
                let prev = s1.unset_join_interest();
                if prev.is_complete() {
                    d1.fetch_add(1, SeqCst);
                }
                if s1.ref_dec() {
                    f1.fetch_add(1, SeqCst);
                }
            });
            let (s2, f2) = (s.clone(), frees.clone());
            let waker = thread::spawn(move || {
                let n = s2.transition_to_notified_by_ref();
                assert_eq!(n, Notify::DoNothing, "running or complete: never submitted");
                if s2.ref_dec() {
                    f2.fetch_add(1, SeqCst);
                }
            });
            // The runner: output stored, publish COMPLETE.
            let snap = s.transition_to_complete();
            if !snap.is_join_interested() {
                output_drops.fetch_add(1, SeqCst);
            }
            if s.ref_dec() {
                frees.fetch_add(1, SeqCst);
            }
            join.join().unwrap();
            waker.join().unwrap();
            assert_eq!(output_drops.load(SeqCst), 1);
            assert_eq!(frees.load(SeqCst), 1);
        });
    }

    /// The parts of a task that the state word guards, as loom cells, so that loom
    /// checks every access against the synchronisation the state word provides
    /// (no other atomics: a SeqCst counter would add synchronisation of its own).
    struct Task {
        state: State,
        /// The stage: `Some` once the output is stored, `None` once consumed.
        output: UnsafeCell<Option<u32>>,
        /// The join waker slot (a stand-in value for the `Waker`).
        join_waker: UnsafeCell<Option<u32>>,
        /// Set when the last reference frees the task (`release`).
        freed: UnsafeCell<bool>,
    }

    const OUTPUT: u32 = 42;
    const WAKER: u32 = 7;

    impl Task {
        /// Queued, with a JoinHandle: two references.
        fn new() -> Task {
            Task {
                state: State::new(),
                output: UnsafeCell::new(None),
                join_waker: UnsafeCell::new(None),
                freed: UnsafeCell::new(false),
            }
        }

        /// Drop one reference; the last one "frees" the task, which writes all of
        /// it (as `drop_in_place` would).
        fn release(&self) {
            if self.state.ref_dec() {
                // SAFETY: the last reference owns the whole task.
                self.output.with_mut(|o| unsafe { *o = None });
                // SAFETY: as above.
                self.join_waker.with_mut(|w| unsafe { *w = None });
                // SAFETY: as above.
                self.freed.with_mut(|f| unsafe {
                    assert!(!*f, "task freed twice");
                    *f = true;
                });
            }
        }

        fn is_freed(&self) -> bool {
            // SAFETY: called once every other holder has been joined.
            self.freed.with(|f| unsafe { *f })
        }
    }

    /// The runner stores the output and publishes COMPLETE while the JoinHandle
    /// polls once (registering its waker) and is dropped. Whichever way the
    /// JoinHandle learns of COMPLETE (its load, the failed `set_join_waker`, or
    /// `unset_join_interest`), it then owns the output and must see it written;
    /// and the runner, when it finds JOIN_WAKER set, must see the waker written.
    /// Catches a `transition_to_complete` without release (the JoinHandle reads
    /// the output concurrently with its write) or without acquire (the runner
    /// reads the waker slot concurrently with its write).
    #[test]
    fn complete_publishes_output_to_join_handle() {
        loom::model(|| {
            let task = Arc::new(Task::new());
            assert_eq!(task.state.transition_to_running(), Run::Poll);

            let t = task.clone();
            let join = thread::spawn(move || {
                // JoinHandle::poll (`can_read_output` + `try_read_output`).
                let complete = t.state.load().is_complete() || {
                    // SAFETY: JOIN_WAKER is clear: the slot is ours.
                    t.join_waker.with_mut(|w| unsafe { *w = Some(WAKER) });
                    t.state.set_join_waker().is_err()
                };
                if complete {
                    // SAFETY: COMPLETE seen: the output is ours.
                    let out = t.output.with_mut(|o| unsafe { (*o).take() });
                    assert_eq!(out, Some(OUTPUT));
                }
                // JoinHandle::drop.
                if t.state.unset_join_interest().is_complete() {
                    // SAFETY: COMPLETE seen: the output is ours.
                    t.output.with_mut(|o| unsafe { *o = None });
                }
                t.release();
            });

            // The runner (`complete`).
            // SAFETY: RUNNING: the stage is ours.
            task.output.with_mut(|o| unsafe { *o = Some(OUTPUT) });
            let snap = task.state.transition_to_complete();
            if !snap.is_join_interested() {
                // SAFETY: no JoinHandle: the output is ours to drop.
                task.output.with_mut(|o| unsafe { *o = None });
            } else if snap.has_join_waker() {
                // SAFETY: JOIN_WAKER was set when COMPLETE was published: the
                // JoinHandle no longer writes the slot.
                let w = task.join_waker.with(|w| unsafe { *w });
                assert_eq!(w, Some(WAKER), "woke a waker that was not written");
            }
            task.release();

            join.join().unwrap();
            assert!(task.is_freed());
        });
    }

    /// Two reference holders each write to the task (the runner its stage, the
    /// JoinHandle its waker slot, with no other synchronisation in between) and
    /// drop their reference; the one that drops the last must see both writes
    /// before it frees the task. Catches a `ref_dec` without acquire (the classic
    /// `Arc` bug: the free races with the other holder's write).
    #[test]
    fn last_ref_dec_sees_every_holders_writes() {
        loom::model(|| {
            let task = Arc::new(Task::new()); // refs: queue + join
            let t = task.clone();
            let join = thread::spawn(move || {
                // SAFETY: JOIN_WAKER is clear: the slot is ours.
                t.join_waker.with_mut(|w| unsafe { *w = Some(WAKER) });
                t.release();
            });
            // SAFETY: the runner owns the stage.
            task.output.with_mut(|o| unsafe { *o = Some(OUTPUT) });
            task.release();
            join.join().unwrap();
            assert!(task.is_freed());
        });
    }
}
