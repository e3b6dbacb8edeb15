//! The P status word: the only place where ownership of a Processor changes hands.
//!
//! ```text
//! IDLE ──acquire──▶ RUNNING ──poll starts──▶ USER ──poll ends (CAS)──▶ RUNNING
//!                                            │  ▲
//!                                    runtime │  │ runtime call ends
//!                               call (CAS)   ▼  │
//!                                          RUNNING
//! sysmon: CAS USER→RETAKEN, then hand the P to another M.
//! set_procs shrinking: IDLE → DEAD (under the scheduler lock); growing: DEAD → IDLE.
//! ```
//!
//! A call made in place (`syscall.rs`) leaves the word USER: "in a call"
//! is the M's own flag (`Machine::in_call`), which sysmon reads to choose
//! its policy (`sysmon.rs`), and the M learns whether it still holds the P
//! by loading the word when the call returns. See "Calls in place" below.
//!
//! Each state says who owns the P and who may move it out (Go's `runtime2.go`
//! P-status comments are the model); see the constants. The general rules:
//! - A plain store is allowed only from a state nobody else may change: RUNNING
//!   (its owner) and IDLE/DEAD (under the scheduler lock).
//! - USER is left only by CAS, because two parties race there: the owning M
//!   (the poll ends, or a runtime call from inside the poll) and sysmon
//!   (retake). Exactly one CAS wins.
//! - An M whose CAS fails has lost its P: it finishes what it is doing P-less
//!   (global queue, global timers, global stack pool) and then looks for an idle
//!   P or parks, as Go's `exitsyscall` does.
//!
//! Orderings: a store or successful CAS that hands the P over is Release, and
//! every load/CAS that takes it is Acquire, so the P's `local` state written by
//! the previous owner is visible to the next.
//!
//! # Generations (why the word is 64 bits)
//!
//! The state alone cannot tell *which* M a USER belongs to. Suppose sysmon
//! retakes P from M1 (stuck in a poll) and hands it to M2, which starts a
//! poll of its own: the word reads USER again. If M1 then made a runtime call
//! and CASed USER → RUNNING, it would succeed and both Ms would use the P's
//! local state: a data race. So the word carries a generation above the
//! state byte, and every retake bumps it (`retake`). An M that starts a poll
//! remembers the whole word it stored (`begin_poll`); its CASes compare the
//! whole word, so after a retake they fail however the state has moved on.
//! 56 bits of generation do not wrap in the life of a process. Only a retake
//! changes the generation: every other transition is made by the owner or
//! under the scheduler lock, from a state nobody else may change.
//!
//! # Calls in place (no SYSCALL state)
//!
//! Until 2026-11-29 a call in place moved the P USER → SYSCALL and back, a
//! CAS each way: about 10 of S2's 85-89 ns per `getppid` (Go's 81-82 make
//! two CASes too, `casgstatus` on the goroutine's status). Go 1.26 retired `_Psyscall`
//! (`_Psyscall_unused`) and tells "in a syscall" from the goroutine instead;
//! we tell it from the M (`Machine::in_call`, a plain store each way), and
//! the word stays USER, which sysmon may retake at any time anyway. So:
//! - entering a call writes nothing here; it loads the word and marks the
//!   call only if the P is ours in USER (not inside a runtime call, which
//!   holds it RUNNING, nor after a retake);
//! - sysmon retakes a P in a call as it retakes one in a long poll (CAS
//!   USER → RETAKEN from the word it saw), only sooner (`sysmon.rs`);
//! - the returning M loads the word (`still_ours`): if the generation moved
//!   it lost the P (Go's `exitsyscall` slow path). If it reads as ours, the
//!   M goes on in USER: a retake right after is found, as in any poll, by its
//!   next CAS. Nothing is lost by a load instead of a CAS, because in USER
//!   the M touches the P's local state only after `enter_runtime`'s CAS.
//!
//! Value 3 was SYSCALL's; it is left unused, so the others keep their numbers.

use crate::loom::sync::atomic::{AtomicU64, Ordering::*};

/// On the idle list. Owner: nobody; moved out by whoever takes it off the list
/// under the scheduler lock (`pidleget`: → RUNNING; `set_procs`: → DEAD).
pub(crate) const IDLE: u8 = 0;
/// Held by an M running scheduler code (not inside a poll). Owner: that M, the
/// only one that may change it (plain stores: → USER, IDLE, RETAKEN).
pub(crate) const RUNNING: u8 = 1;
/// Held by an M inside a task's poll (user code, a call made in place
/// included). Owner: that M; moved out by CAS only: by the M (→ RUNNING: poll
/// ends or a runtime call) or by sysmon (→ RETAKEN).
pub(crate) const USER: u8 = 2;
/// Taken from an M stuck in USER (a long poll, a call in place) — by
/// sysmon, or by the M itself before a call known to block
/// (`in_place_blocking`) or when it is locked (`lockos.rs`). Owner: whoever took it, which hands it to another M or the
/// idle list (`Shared::handoffp`). An old M finds out at its next CAS (the
/// generation moved) and goes P-less.
pub(crate) const RETAKEN: u8 = 4;
/// Beyond the current `set_procs` count (Go's `_Pdead`). Owner: nobody; holds no
/// work (its queues and timers were handed to the others before it died); only
/// `set_procs` moves it (→ IDLE), under the scheduler lock.
pub(crate) const DEAD: u8 = 5;

const STATE_MASK: u64 = 0xff;
const GEN_ONE: u64 = 0x100;

/// The state byte of a status word.
#[inline]
pub(crate) fn state_of(word: u64) -> u8 {
    (word & STATE_MASK) as u8
}

/// Held by an M that is running it (scheduler code or a poll): where a thief
/// may find a `runnext` that its owner is about to run.
#[inline]
pub(crate) fn is_held_by_m(status: u8) -> bool {
    matches!(status, USER | RUNNING)
}

pub(crate) struct PStatus(AtomicU64);

/// Result of entering the runtime from inside a poll.
#[derive(Debug, PartialEq, Eq)]
#[must_use]
pub(crate) enum EnterRuntime {
    /// The P was already RUNNING under our generation (a nested runtime call).
    Nested,
    /// USER → RUNNING succeeded; the caller must store USER when its call ends.
    Entered,
    /// The P is not ours in USER any more (retaken).
    Retaken,
}

impl PStatus {
    pub(crate) fn new() -> Self {
        PStatus(AtomicU64::new(IDLE as u64))
    }

    /// The state (Acquire).
    #[inline]
    pub(crate) fn load(&self) -> u8 {
        state_of(self.0.load(Acquire))
    }

    /// The whole word, generation included (Acquire): what sysmon passes to
    /// `retake`.
    #[inline]
    pub(crate) fn load_word(&self) -> u64 {
        self.0.load(Acquire)
    }

    /// A plain store of a new state, keeping the generation; only from a state
    /// nobody else may change: RUNNING → IDLE / USER / RETAKEN (by the owner;
    /// RETAKEN when it hands its own P off: a locked M, `lockos.rs`), IDLE →
    /// RUNNING / DEAD and DEAD → IDLE (under the scheduler lock), RETAKEN →
    /// RUNNING / IDLE / DEAD (by whoever retook it, handing it off).
    #[inline]
    pub(crate) fn store(&self, s: u8) {
        let gen = self.0.load(Relaxed) & !STATE_MASK;
        self.0.store(gen | s as u64, Release)
    }

    /// Owner (RUNNING): a poll starts. Stores USER and returns the word, which
    /// the M keeps for its CASes until the poll ends.
    #[inline]
    pub(crate) fn begin_poll(&self) -> u64 {
        let word = (self.0.load(Relaxed) & !STATE_MASK) | USER as u64;
        self.0.store(word, Release);
        word
    }

    /// Owner: a runtime call made from inside a poll takes the P back. `user`
    /// is the word `begin_poll` returned.
    #[inline]
    pub(crate) fn enter_runtime(&self, user: u64) -> EnterRuntime {
        let running = (user & !STATE_MASK) | RUNNING as u64;
        match self.0.compare_exchange(user, running, AcqRel, Acquire) {
            Ok(_) => EnterRuntime::Entered,
            Err(w) if w == running => EnterRuntime::Nested,
            Err(_) => EnterRuntime::Retaken,
        }
    }

    /// Owner: the poll ends (`user` as `begin_poll` returned it). False:
    /// retaken.
    #[inline]
    #[must_use]
    pub(crate) fn end_poll(&self, user: u64) -> bool {
        let running = (user & !STATE_MASK) | RUNNING as u64;
        self.0
            .compare_exchange(user, running, AcqRel, Acquire)
            .is_ok()
    }

    /// Owner, inside a poll (a call in place has just returned): whether the
    /// P is still ours in USER under `user`'s generation. A load: see "Calls
    /// in place".
    #[inline]
    pub(crate) fn still_ours(&self, user: u64) -> bool {
        self.0.load(Acquire) == user
    }

    /// sysmon: take a P whose word it read as `seen` (state USER), bumping
    /// the generation. True if it now owns the P (RETAKEN).
    pub(crate) fn retake(&self, seen: u64) -> bool {
        debug_assert_eq!(state_of(seen), USER);
        let retaken = ((seen & !STATE_MASK) + GEN_ONE) | RETAKEN as u64;
        self.0
            .compare_exchange(seen, retaken, AcqRel, Acquire)
            .is_ok()
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::atomic::AtomicUsize;
    use loom::sync::Arc;
    use loom::thread;

    /// sysmon's retake races the end of a poll and a runtime call made inside it:
    /// exactly one side owns the P afterwards, never both, never neither.
    #[test]
    fn retake_vs_poll_end() {
        loom::model(|| {
            let st = Arc::new(PStatus::new());
            st.store(RUNNING);
            let user = st.begin_poll(); // the poll starts
            let owners = Arc::new(AtomicUsize::new(0));
            let (s2, o2) = (st.clone(), owners.clone());
            let sysmon = thread::spawn(move || {
                let seen = s2.load_word();
                if state_of(seen) == USER && s2.retake(seen) {
                    o2.fetch_add(1, SeqCst);
                    // Hand it to another M, which starts a poll: the word
                    // reads USER again, under a new generation.
                    s2.store(RUNNING);
                    let _ = s2.begin_poll();
                    true
                } else {
                    false
                }
            });
            // Inside the poll: a runtime call, a call in place (its return
            // checks the word), then the poll ends.
            let mut m_owns = match st.enter_runtime(user) {
                EnterRuntime::Entered => {
                    st.store(USER);
                    true
                }
                EnterRuntime::Nested => unreachable!(),
                EnterRuntime::Retaken => false,
            };
            if m_owns {
                m_owns = st.still_ours(user);
            }
            if m_owns {
                m_owns = st.end_poll(user);
            }
            if m_owns {
                owners.fetch_add(1, SeqCst);
            }
            let sysmon_owns = sysmon.join().unwrap();
            assert_eq!(owners.load(SeqCst), 1);
            assert_ne!(m_owns, sysmon_owns);
            // After a retake, the old M's word never matches again (ABA).
            if sysmon_owns {
                assert!(!st.still_ours(user));
                assert_eq!(st.enter_runtime(user), EnterRuntime::Retaken);
                assert!(!st.end_poll(user));
            } else {
                assert_eq!(st.load(), RUNNING);
            }
        });
    }
}
