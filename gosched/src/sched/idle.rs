//! Idle Ps, idle Ms and the spinning count: who sleeps, and who gets woken.
//!
//! # State
//!
//! - `Sched::idle.ps`: Ps nobody holds (status IDLE), LIFO. `Shared::npidle`
//!   mirrors its length for lock-free reads.
//! - `Sched::idle.ms`: parked Ms waiting for `wakep` to hand them a P through
//!   `Machine::nextp`.
//! - `Shared::nmspinning`: Ms that hold a P and look for work to steal.
//!
//! Both lists live under the scheduler lock (`Shared::sched`, shared with the
//! global queue, see `global.rs`); `npidle` and `nmspinning` are atomics whose
//! every change goes through a method below, so the transitions can be read in
//! one place:
//!
//! | transition | method | who |
//! |---|---|---|
//! | P idle → held | `pidleget` (npidle −1, status RUNNING; wakes sysmon if every P was idle) | `wakep`, an M re-acquiring |
//! | P held → idle | `pidleput` (npidle +1, status IDLE) | an M with nothing to do, `newm` failing |
//! | M not spinning → spinning | `spinning_begin` / `claim_spinner` (0→1) | `find_runnable` step 6, `wakep`, `handoffp` |
//! | M spinning → not spinning | `spinning_end` | found work (`resetspinning`), gave up, exit |
//!
//! # The lost-wake-up protocol (Go's proc.go, "Worker thread parking/unparking")
//!
//! A submitter (spawn, wake, timer) (1) publishes the work on a queue, (2)
//! issues a StoreLoad barrier, (3) if Ps are idle and `nmspinning == 0`, calls
//! `wakep` (`Shared::wake_wanted`, below). A spinning M that finds nothing
//! (1) releases its P, (2) decrements `nmspinning` (an RMW: the StoreLoad
//! barrier), (3) re-checks the global queue and every P's queue; if anything is
//! there it takes an idle P back and spins again (`machine.rs`, steps 7–8).
//! Either the submitter sees `nmspinning == 0` and wakes an M, or the M's
//! re-check sees the work: no wake-up is lost. All counter operations are SeqCst
//! and the two sides' barriers are explicit `fence(SeqCst)`s (loom treats SeqCst
//! loads and stores as AcqRel, so the fences are what the models check).
//!
//! `wakep` starts at most one spinning M at a time: it claims `nmspinning` 0 → 1
//! by CAS, then, under one scheduler lock, takes an idle P and an idle M (Go's
//! `startm` does `pidleget` and `mget` together); with no idle M it starts a
//! new thread (`newm`). A spinning M that finds work stops spinning and, if it was the last spinner, calls `wakep`
//! again (`resetspinning`), so a burst of work fans out one M at a time.

use super::machine::{newm, Machine};
use super::status;
use super::{Sched, Shared};
use crate::loom::lock;
use crate::loom::sync::atomic::Ordering::*;
use std::sync::Arc;

/// Idle Ps and Ms; every access holds the scheduler lock.
pub(crate) struct IdleLists {
    ps: Vec<usize>,
    ms: Vec<Arc<Machine>>,
    /// Ms whose thread exited (`machine.rs`, "Idle Ms exit"): `newm` gives
    /// the next new thread one of these instead of a new `Machine`.
    retired: Vec<Arc<Machine>>,
}

impl super::Sched {
    /// Ms parked on the idle list (deadlock detection).
    #[cfg(not(loom))]
    pub(crate) fn idle_ms(&self) -> usize {
        self.idle.ms.len()
    }
}

impl IdleLists {
    /// Every P starts idle; the last one is taken first (LIFO).
    pub(crate) fn new(procs: usize) -> Self {
        IdleLists {
            ps: (0..procs).rev().collect(),
            ms: Vec::new(),
            retired: Vec::new(),
        }
    }
}

impl Shared {
    // ---- Ps ----------------------------------------------------------------------

    /// Take an idle P (caller holds the scheduler lock). The P is ours: RUNNING.
    pub(crate) fn pidleget(&self, s: &mut Sched) -> Option<usize> {
        let p = s.idle.ps.pop()?;
        let was = self.npidle.fetch_sub(1, SeqCst);
        self.procs[p].status.store(status::RUNNING);
        #[cfg(not(loom))]
        if was == self.nprocs() {
            // The runtime was idle: sysmon may be asleep for that reason.
            self.sysmon.wake_if_asleep();
        }
        #[cfg(loom)]
        let _ = was;
        Some(p)
    }

    /// `pidleget` under its own lock.
    pub(crate) fn acquire_idle_p(&self) -> Option<usize> {
        let mut s = lock(&self.sched);
        self.pidleget(&mut s)
    }

    /// A socket was registered, or a thread that is not one of our Ms
    /// waits on one (`net`): make sure some M polls the network. An M asleep
    /// on its parker until the next timer (it went to sleep before any
    /// socket existed) comes back and blocks in the poller; with no sleeper,
    /// an idle P gets an M, which ends up there when it finds nothing to do.
    /// (Busy Ms poll at their schedule, sysmon every 10 ms; an M that parks
    /// a goroutine on a socket goes through `park_idle` itself.)
    #[cfg(not(loom))]
    pub(crate) fn ensure_poller(&self) {
        if self.netpoll.someone_blocked() {
            return;
        }
        if let Some(m) = &*lock(&self.sleeper) {
            m.wake();
            return;
        }
        self.wakep_if_idle();
    }

    /// Put a P on the idle list (caller holds the lock and owns the P).
    pub(crate) fn pidleput(&self, s: &mut Sched, p: usize) {
        if crate::trace::on() {
            self.trace(p, crate::trace::Ev::ProcIdle);
        }
        if self.p_dying(p) {
            // Beyond `set_procs`'s count: it dies instead (`procresize.rs`).
            self.kill_p(s, p);
            return;
        }
        debug_assert!(!self.procs[p].has_work(), "idle P with queued work");
        self.procs[p].status.store(status::IDLE);
        s.idle.ps.push(p);
        self.npidle.fetch_add(1, SeqCst);
        // The last P idle in a virtual-time runtime: its timer sleeper
        // decides whether the clock moves (`vtime.rs`).
        #[cfg(not(loom))]
        self.virtual_poke();
    }

    /// `set_procs` shrinking: take every idle P numbered `n` or more off the
    /// idle list (caller holds the lock; they are the caller's now).
    pub(crate) fn pidle_take_from(&self, s: &mut Sched, n: usize) -> Vec<usize> {
        let taken: Vec<usize> = s.idle.ps.iter().copied().filter(|&p| p >= n).collect();
        s.idle.ps.retain(|&p| p < n);
        self.npidle.fetch_sub(taken.len(), SeqCst);
        taken
    }

    /// `pidleput` under its own lock.
    pub(crate) fn release_p(&self, p: usize) {
        let mut s = lock(&self.sched);
        self.pidleput(&mut s, p);
    }

    /// Idle Ps (a snapshot).
    #[inline]
    pub(crate) fn idle_ps(&self) -> usize {
        self.npidle.load(SeqCst)
    }

    // ---- spinning ----------------------------------------------------------------

    /// Spinning Ms (a snapshot).
    #[inline]
    pub(crate) fn spinning_ms(&self) -> usize {
        self.nmspinning.load(SeqCst)
    }

    /// An M holding a P starts spinning.
    #[inline]
    pub(crate) fn spinning_begin(&self) {
        self.nmspinning.fetch_add(1, SeqCst);
    }

    /// An M stops spinning; returns how many spun before (this M included).
    #[inline]
    pub(crate) fn spinning_end(&self) -> usize {
        let prev = self.nmspinning.fetch_sub(1, SeqCst);
        debug_assert!(prev > 0, "nmspinning underflow");
        prev
    }

    /// May one more M spin? At most half of the busy Ps' worth do (Go's rule:
    /// spinning Ms burn CPU that busy Ps could use).
    #[inline]
    pub(crate) fn may_spin(&self) -> bool {
        let busy = self.nprocs().saturating_sub(self.idle_ps());
        2 * self.spinning_ms() < busy
    }

    /// Claim the one spinner that `wakep` (or `handoffp`) may start:
    /// nmspinning 0 → 1. False if somebody spins already.
    #[inline]
    pub(crate) fn claim_spinner(&self) -> bool {
        self.nmspinning.load(SeqCst) == 0
            && self
                .nmspinning
                .compare_exchange(0, 1, SeqCst, SeqCst)
                .is_ok()
    }

    /// The submitter's test, after its StoreLoad barrier: an idle P and nobody
    /// spinning means nobody will look at the new work unless we wake an M.
    #[inline]
    pub(crate) fn wake_wanted(&self) -> bool {
        // SeqCst loads: the lazy `runnext` put relies on them instead of a
        // fence (`ready.rs`, `wakep_after_runqput`); on x86-64 they are plain
        // loads, elsewhere cheaper than the fence they save.
        self.npidle.load(SeqCst) != 0 && self.nmspinning.load(SeqCst) == 0
    }

    // ---- Ms ------------------------------------------------------------------------

    /// Take an idle M (caller holds the scheduler lock; Go's `mget`).
    pub(crate) fn mget(s: &mut Sched) -> Option<Arc<Machine>> {
        s.idle.ms.pop()
    }

    /// Put an M on the idle list unless the runtime is shutting down.
    pub(crate) fn midleput(&self, m: Arc<Machine>) -> bool {
        let mut s = lock(&self.sched);
        if self.shutdown.load(Acquire) {
            return false;
        }
        debug_assert!(
            !s.idle.ms.iter().any(|x| Arc::ptr_eq(x, &m)),
            "M put on the idle list twice"
        );
        s.idle.ms.push(m);
        true
    }

    /// Wake every M on the idle list and the timer sleeper; each re-checks
    /// what it waits for and parks again (`blocking.rs`, `ask_ms_to_trim`).
    #[cfg(not(loom))]
    pub(crate) fn wake_idle_ms(&self) {
        let idle: Vec<Arc<Machine>> = lock(&self.sched).idle.ms.clone();
        for m in idle {
            m.wake();
        }
        if let Some(m) = &*lock(&self.sleeper) {
            m.wake();
        }
    }

    /// A retiring M's `Machine`, for a later `newm` (caller holds the lock).
    pub(crate) fn retire_m(&self, s: &mut Sched, m: Arc<Machine>) {
        s.idle.retired.push(m);
    }

    /// The `Machine` of a retired M, if any, for a new thread.
    pub(crate) fn reuse_retired_m(&self) -> Option<Arc<Machine>> {
        lock(&self.sched).idle.retired.pop()
    }

    /// Take `m` off the idle list; false if it is not there (`wakep` popped it:
    /// a P is on its way to it).
    pub(crate) fn leave_idle_ms(&self, s: &mut Sched, m: &Arc<Machine>) -> bool {
        match s.idle.ms.iter().position(|x| Arc::ptr_eq(x, m)) {
            Some(i) => {
                s.idle.ms.remove(i);
                true
            }
            None => false,
        }
    }

    /// Shutdown: take every idle M (to wake them for exit).
    pub(crate) fn drain_idle_ms(&self) -> Vec<Arc<Machine>> {
        lock(&self.sched).idle.ms.drain(..).collect()
    }

    /// Go's `wakep`: if nobody spins, start a spinning M on an idle P. The P and
    /// the M are taken under one lock (Go's `startm`).
    pub(crate) fn wakep(&self) {
        if self.shutdown.load(Relaxed) {
            return;
        }
        if !self.claim_spinner() {
            return;
        }
        let (p, m) = {
            let mut s = lock(&self.sched);
            match self.pidleget(&mut s) {
                Some(p) => (p, s.idle.ms.pop()),
                None => {
                    drop(s);
                    self.spinning_end();
                    return;
                }
            }
        };
        self.startm(p, m, true);
    }

    /// Go's `startm`'s tail: run P `p` (taken for this, RUNNING) on `m`, an
    /// M popped off the idle list; with none, on the timer sleeper (idle
    /// too: it waits for a timer, not for work); with none either, on a new
    /// thread.
    pub(crate) fn startm(&self, p: usize, m: Option<Arc<Machine>>, spinning: bool) {
        match m {
            Some(m) => {
                self.procs[p].set_owner(&m);
                m.start(p, spinning)
            }
            None => {
                if !self.start_sleeper(p, spinning) {
                    newm(self.arc(), p, spinning);
                }
            }
        }
    }

    /// Hand P `p` (taken for this) to the timer sleeper. False if no M
    /// sleeps on the timers, or one was handed a P already. Under the
    /// sleeper lock: while registered it has not looked for a P yet, and the
    /// first thing it does when it wakes is take the one handed to it.
    fn start_sleeper(&self, p: usize, spinning: bool) -> bool {
        let sl = lock(&self.sleeper);
        let Some(m) = sl.as_ref().filter(|m| !m.has_nextp()) else {
            return false;
        };
        self.procs[p].set_owner(m);
        m.start(p, spinning);
        true
    }
}
