//! A registered socket's readiness (Go's `pollDesc`): one `Direction` for reads
//! and one for writes.
//!
//! # The handshake (why no readiness is lost)
//!
//! Sockets are registered edge-triggered: the poller reports a direction when it
//! *becomes* ready, and not again while it stays ready. So a reader must never
//! wait for an event that already happened. Each direction keeps a sequence
//! number, `seq`, that the poller bumps on every event:
//!
//! 1. the reader loads `seq` (Acquire) *before* its non-blocking syscall;
//! 2. the syscall says `WouldBlock`;
//! 3. it waits until `seq` differs from what it loaded: it checks `seq`, stores
//!    its waker in the slot (under the slot's lock), and checks `seq` again;
//!    unchanged, it parks.
//!
//! The poller bumps `seq` (SeqCst) and *then* takes the waker out of the slot
//! (same lock) and wakes it. Either the reader's second check sees the bump, or
//! the bump came after it, and then the waker was in the slot before the poller
//! looked (the lock orders the two), so the poller wakes it. An event between
//! steps 1 and 2 (data arriving just after the syscall failed) moved `seq`, so
//! the reader does not wait at all. `sched/../netpoll/desc.rs`'s loom models
//! check this, and that dropping the recheck loses the wake-up.
//!
//! A wake-up may be spurious (an event for data another reader took): the
//! reader retries its syscall and waits again, as with any edge-triggered
//! poller. Several goroutines may wait on one direction (a shared listener's
//! acceptors, a reader and a `peek`): an event wakes them all, and those
//! that find nothing wait again.
//!
//! Closing: `close` sets `closed` and wakes both directions; a waiter that sees
//! it returns an error instead of parking again.

use std::sync::atomic::AtomicUsize as StdAtomicUsize;
use std::task::{Context, Poll, Waker};

use crate::loom::lock;
use crate::loom::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use crate::loom::sync::Mutex;

/// One direction (read or write) of a registered socket.
pub(crate) struct Direction {
    /// Events seen for this direction (bumped by the poller).
    seq: AtomicU64,
    /// The waiters' wakers (one per waiter: a new poll of the same future
    /// finds its own and keeps it).
    wakers: Mutex<Vec<Waker>>,
    /// The poller's count of directions with waiters (a hint for "should an
    /// M poll": std atomic, outside loom's model).
    waiting: std::sync::Arc<StdAtomicUsize>,
}

impl Direction {
    pub(crate) fn new(waiting: std::sync::Arc<StdAtomicUsize>) -> Self {
        Direction {
            seq: AtomicU64::new(0),
            wakers: Mutex::new(Vec::new()),
            waiting,
        }
    }

    /// Step 1: the sequence before a non-blocking attempt.
    #[inline]
    pub(crate) fn seq(&self) -> u64 {
        self.seq.load(Acquire)
    }

    /// Step 3: ready if an event came since `seen`; else register `cx`'s
    /// waker and check again.
    pub(crate) fn poll_event(&self, seen: u64, cx: &Context<'_>) -> Poll<()> {
        if self.seq.load(Acquire) != seen {
            return Poll::Ready(());
        }
        {
            let mut list = lock(&self.wakers);
            if !list.iter().any(|w| w.will_wake(cx.waker())) {
                if list.is_empty() {
                    self.waiting
                        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
                list.push(cx.waker().clone());
            }
        }
        if self.seq.load(SeqCst) != seen {
            return Poll::Ready(());
        }
        Poll::Pending
    }

    /// The poller's side: an event; returns the wakers to wake (outside any
    /// lock the caller holds).
    pub(crate) fn event(&self) -> Vec<Waker> {
        self.seq.fetch_add(1, SeqCst);
        let taken = std::mem::take(&mut *lock(&self.wakers));
        if !taken.is_empty() {
            self.waiting
                .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        }
        taken
    }
}

/// A registered socket's readiness state.
pub(crate) struct PollDesc {
    pub(crate) read: Direction,
    pub(crate) write: Direction,
    closed: AtomicBool,
}

impl PollDesc {
    pub(crate) fn new(waiting: std::sync::Arc<StdAtomicUsize>) -> Self {
        PollDesc {
            read: Direction::new(waiting.clone()),
            write: Direction::new(waiting),
            closed: AtomicBool::new(false),
        }
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Acquire)
    }

    /// The socket is going away: wake every waiter (they see `is_closed`).
    pub(crate) fn close(&self) -> Vec<Waker> {
        self.closed.store(true, Release);
        let mut w = self.read.event();
        w.extend(self.write.event());
        w
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::loom::sync::atomic::AtomicBool as LAtomicBool;
    use crate::loom::sync::Arc;
    use std::task::{RawWaker, RawWakerVTable};

    /// A waker that sets a flag (loom's atomics, so the model sees it).
    fn flag_waker(flag: Arc<LAtomicBool>) -> Waker {
        fn clone(p: *const ()) -> RawWaker {
            // SAFETY: `p` came from `Arc::into_raw` below; the clone takes a
            // reference of its own.
            unsafe { Arc::increment_strong_count(p as *const LAtomicBool) };
            RawWaker::new(p, &VTABLE)
        }
        fn wake(p: *const ()) {
            wake_by_ref(p);
            drop_w(p);
        }
        fn wake_by_ref(p: *const ()) {
            // SAFETY: a live `Arc<LAtomicBool>` (the waker holds a reference).
            unsafe { &*(p as *const LAtomicBool) }.store(true, SeqCst);
        }
        fn drop_w(p: *const ()) {
            // SAFETY: releases the reference this waker held.
            drop(unsafe { Arc::from_raw(p as *const LAtomicBool) });
        }
        static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, wake, wake_by_ref, drop_w);
        // SAFETY: the vtable above keeps the reference count right.
        unsafe { Waker::from_raw(RawWaker::new(Arc::into_raw(flag) as *const (), &VTABLE)) }
    }

    /// A reader whose syscall failed races the event that makes the socket
    /// ready: it either sees the event or is woken by it, never neither.
    #[test]
    fn no_lost_wakeup_between_would_block_and_park() {
        loom::model(|| {
            let d = Arc::new(Direction::new(Default::default()));
            let ready = Arc::new(LAtomicBool::new(false)); // "data arrived"
            let seen = d.seq(); // step 1, before the syscall
            let (d2, r2) = (d.clone(), ready.clone());
            let poller = loom::thread::spawn(move || {
                r2.store(true, SeqCst);
                for w in d2.event() {
                    w.wake();
                }
            });
            // Step 2: the syscall, which fails unless the data is there.
            if !ready.load(SeqCst) {
                let woken = Arc::new(LAtomicBool::new(false));
                let waker = flag_waker(woken.clone());
                let cx = Context::from_waker(&waker);
                if d.poll_event(seen, &cx).is_pending() {
                    poller.join().unwrap();
                    assert!(woken.load(SeqCst), "parked and never woken");
                    return;
                }
            }
            poller.join().unwrap();
        });
    }

    /// The same race with the recheck after registering dropped: loom finds
    /// the lost wake-up (the check is load-bearing).
    #[test]
    #[should_panic(expected = "parked and never woken")]
    fn without_the_recheck_a_wakeup_is_lost() {
        loom::model(|| {
            let d = Arc::new(Direction::new(Default::default()));
            let seen = d.seq();
            let d2 = d.clone();
            let poller = loom::thread::spawn(move || {
                for w in d2.event() {
                    w.wake();
                }
            });
            let woken = Arc::new(LAtomicBool::new(false));
            let waker = flag_waker(woken.clone());
            // The mutated step 3: check, then register, no second check.
            let pending = if d.seq.load(Acquire) != seen {
                false
            } else {
                lock(&d.wakers).push(waker.clone());
                true
            };
            poller.join().unwrap();
            if pending {
                assert!(woken.load(SeqCst), "parked and never woken");
            }
        });
    }
}
