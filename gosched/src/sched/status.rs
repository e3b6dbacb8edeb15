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
//! ```
//!
//! `syscall()` is called from inside a poll, so in practice it goes USER → SYSCALL
//! → USER (both by CAS, see `syscall.rs`); the poll's end then CASes USER → RUNNING.
//!
//! Who writes what:
//! - IDLE → RUNNING: whoever takes the P off the idle list (under the scheduler lock).
//! - RUNNING → USER / SYSCALL / IDLE: only the owning M, with a plain store: nobody
//!   else may change a RUNNING P.
//! - USER → RUNNING and SYSCALL → RUNNING: the owning M, by CAS, because sysmon may
//!   race it with USER/SYSCALL → RETAKEN. Exactly one of the two CASes wins.
//! - RETAKEN → RUNNING: the M that sysmon hands the P to (it owns it after the CAS).
//!
//! An M whose CAS fails has lost its P: it finishes what it is doing P-less (global
//! queue, global timers, global stack pool) and then looks for an idle P or parks,
//! as Go's `exitsyscall` does.

use crate::loom::sync::atomic::{AtomicU8, Ordering::*};

pub(crate) const IDLE: u8 = 0;
pub(crate) const RUNNING: u8 = 1;
pub(crate) const USER: u8 = 2;
pub(crate) const SYSCALL: u8 = 3;
pub(crate) const RETAKEN: u8 = 4;

pub(crate) struct PStatus(AtomicU8);

/// Result of entering the runtime from inside a poll.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Enter {
    /// The P was already RUNNING (a nested runtime call, or scheduler code).
    Nested,
    /// USER → RUNNING succeeded; `leave_runtime` must restore USER.
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

    /// Owner only: RUNNING → IDLE / USER / SYSCALL, or IDLE → RUNNING under the
    /// scheduler lock.
    pub(crate) fn store(&self, s: u8) {
        self.0.store(s, Release)
    }

    /// Owner: a runtime call made from inside a poll takes the P back.
    #[inline]
    pub(crate) fn enter_runtime(&self) -> Enter {
        match self.0.compare_exchange(USER, RUNNING, AcqRel, Acquire) {
            Ok(_) => Enter::Entered,
            Err(RUNNING) => Enter::Nested,
            Err(_) => Enter::Retaken,
        }
    }

    /// Owner: poll (or syscall) ends. `from` is USER or SYSCALL. False: retaken.
    #[inline]
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
    #[cfg_attr(not(loom), allow(dead_code))] // sysmon (next issue) is the caller
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
                Enter::Entered => {
                    st.store(USER);
                    true
                }
                Enter::Nested => unreachable!(),
                Enter::Retaken => false,
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
