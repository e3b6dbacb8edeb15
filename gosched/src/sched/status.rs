//! The P status word: the only place where ownership of a Processor changes hands.
//!
//! ```text
//! IDLE ──acquire──▶ RUNNING ──poll starts──▶ USER ──poll ends (CAS)──▶ RUNNING
//!                      │                       │  ▲
//!                      │               runtime │  │ runtime call ends
//!                      │          call (CAS)   ▼  │
//!                      │                     RUNNING
//!                      └──syscall()──▶ SYSCALL ──returns (CAS)──▶ RUNNING
//! sysmon: CAS USER→RETAKEN or SYSCALL→RETAKEN, then hand the P to another M.
//! set_procs shrinking: IDLE → DEAD (under the scheduler lock); growing: DEAD → IDLE.
//! ```
//!
//! `syscall()` is called from inside a poll, so in practice it goes USER → SYSCALL
//! → USER (both by CAS, see `syscall.rs`); the poll's end then CASes USER → RUNNING.
//!
//! Each state says who owns the P and who may move it out (Go's `runtime2.go`
//! P-status comments are the model); see the constants. The general rules:
//! - A plain store is allowed only from a state nobody else may change: RUNNING
//!   (its owner) and IDLE/DEAD (under the scheduler lock).
//! - USER and SYSCALL are left only by CAS, because two parties race there: the
//!   owning M (poll or syscall ends, or a runtime call from inside the poll) and
//!   sysmon (retake). Exactly one CAS wins.
//! - An M whose CAS fails has lost its P: it finishes what it is doing P-less
//!   (global queue, global timers, global stack pool) and then looks for an idle
//!   P or parks, as Go's `exitsyscall` does.
//!
//! Orderings: a store or successful CAS that hands the P over is Release, and
//! every load/CAS that takes it is Acquire, so the P's `local` state written by
//! the previous owner is visible to the next.
//!
//! Note for sysmon: Go 1.26 retired `_Psyscall` (now `_Psyscall_unused`) and tells "in a syscall"
//! from the goroutine's state instead, so that `entersyscall` need not touch the
//! P. We keep SYSCALL in the P word for now: our `syscall(f)` is an explicit
//! call from inside a poll, a CAS on a word the M already owns, and it gives
//! sysmon one word to CAS for both hand-off cases; the sysmon issue re-weighs
//! this when it measures `syscall`'s fast path (docs/ARCHITECTURE.md).

use crate::loom::sync::atomic::{AtomicU8, Ordering::*};

/// On the idle list. Owner: nobody; moved out by whoever takes it off the list
/// under the scheduler lock (`pidleget`: → RUNNING; `set_procs`: → DEAD).
pub(crate) const IDLE: u8 = 0;
/// Held by an M running scheduler code (not inside a poll). Owner: that M, the
/// only one that may change it (plain stores: → USER, SYSCALL, IDLE).
pub(crate) const RUNNING: u8 = 1;
/// Held by an M inside a task's poll (user code). Owner: that M; moved out by
/// CAS only: by the M (→ RUNNING: poll ends or a runtime call; → SYSCALL) or by
/// sysmon (→ RETAKEN).
pub(crate) const USER: u8 = 2;
/// Held by an M inside `syscall(f)`. Owner: that M while `f` runs; moved out by
/// CAS only: the M (→ USER when `f` returns) or sysmon (→ RETAKEN).
pub(crate) const SYSCALL: u8 = 3;
/// Taken by sysmon from an M stuck in USER or SYSCALL. Owner: sysmon, which
/// hands it to another M (that M stores RUNNING). The old M finds out at its
/// next CAS and goes P-less.
pub(crate) const RETAKEN: u8 = 4;
/// Beyond the current `set_procs` count (Go's `_Pdead`). Owner: nobody; holds no
/// work (its queues and timers were handed to the others before it died); only
/// `set_procs` moves it (→ IDLE), under the scheduler lock.
#[allow(dead_code)] // written by `set_procs` (the sysmon issue)
pub(crate) const DEAD: u8 = 5;

/// Held by an M that is running it (scheduler code or a poll): where a thief
/// may find a `runnext` that its owner is about to run.
#[inline]
pub(crate) fn is_held_by_m(status: u8) -> bool {
    matches!(status, USER | RUNNING)
}

pub(crate) struct PStatus(AtomicU8);

/// Result of entering the runtime from inside a poll.
#[derive(Debug, PartialEq, Eq)]
#[must_use]
pub(crate) enum EnterRuntime {
    /// The P was already RUNNING (a nested runtime call, or scheduler code).
    Nested,
    /// USER → RUNNING succeeded; the caller must store USER when its call ends.
    Entered,
    /// sysmon retook the P: the M is P-less now.
    Retaken,
}

impl PStatus {
    pub(crate) fn new() -> Self {
        PStatus(AtomicU8::new(IDLE))
    }

    pub(crate) fn load(&self) -> u8 {
        self.0.load(Acquire)
    }

    /// A plain store, only from a state nobody else may change: RUNNING → IDLE /
    /// USER (by the owner), IDLE → RUNNING (under the scheduler lock).
    pub(crate) fn store(&self, s: u8) {
        self.0.store(s, Release)
    }

    /// Owner: a runtime call made from inside a poll takes the P back.
    #[inline]
    pub(crate) fn enter_runtime(&self) -> EnterRuntime {
        match self.0.compare_exchange(USER, RUNNING, AcqRel, Acquire) {
            Ok(_) => EnterRuntime::Entered,
            Err(RUNNING) => EnterRuntime::Nested,
            Err(_) => EnterRuntime::Retaken,
        }
    }

    /// Owner: poll (or syscall) ends. `from` is USER or SYSCALL. False: retaken.
    #[inline]
    #[must_use]
    pub(crate) fn exit_to_running(&self, from: u8) -> bool {
        self.0
            .compare_exchange(from, RUNNING, AcqRel, Acquire)
            .is_ok()
    }

    /// CAS `from` → `to`; true on success.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn cas(&self, from: u8, to: u8) -> bool {
        self.0.compare_exchange(from, to, AcqRel, Acquire).is_ok()
    }

    /// sysmon: take a P that is in USER or SYSCALL. True if it now owns it.
    #[cfg_attr(not(loom), allow(dead_code))] // sysmon is the caller (its own issue)
    pub(crate) fn retake(&self, from: u8) -> bool {
        debug_assert!(from == USER || from == SYSCALL);
        self.0
            .compare_exchange(from, RETAKEN, AcqRel, Acquire)
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
            st.store(USER); // the poll starts
            let owners = Arc::new(AtomicUsize::new(0));
            let (s2, o2) = (st.clone(), owners.clone());
            let sysmon = thread::spawn(move || {
                if s2.retake(USER) {
                    o2.fetch_add(1, SeqCst);
                    true
                } else {
                    false
                }
            });
            // Inside the poll: a runtime call, then the poll ends.
            let mut m_owns = match st.enter_runtime() {
                EnterRuntime::Entered => {
                    st.store(USER);
                    true
                }
                EnterRuntime::Nested => unreachable!(),
                EnterRuntime::Retaken => false,
            };
            if m_owns {
                m_owns = st.exit_to_running(USER);
            }
            if m_owns {
                owners.fetch_add(1, SeqCst);
            }
            let sysmon_owns = sysmon.join().unwrap();
            assert_eq!(owners.load(SeqCst), 1);
            assert_ne!(m_owns, sysmon_owns);
            assert_eq!(st.load(), if m_owns { RUNNING } else { RETAKEN });
        });
    }
}
