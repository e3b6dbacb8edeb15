//! Virtual time: a runtime whose clock moves only when nothing else can
//! (Go 1.25's `testing/synctest`, tokio's `time::pause` with auto-advance).
//! A test of a one-hour timeout runs in microseconds, and the same way
//! every time.
//!
//! # The clock
//!
//! A runtime built with `Builder::virtual_time(true)` (what
//! `testing::run_virtual` and `#[gosched::test(virtual_time)]` build) owns
//! a `VirtualClock`: nanoseconds on the timer clock's scale
//! (`timers::now_ns`), starting at the real time of the build. Every
//! deadline its code computes (`timers::deadline_after`: sleeps, channel
//! and select timeouts, `after`/`tick`/`Timer`, socket deadlines, the
//! pool's expiry) and every comparison its Ms make against the timer heaps
//! read that clock instead of the real one (`Shared::clock_ns`, and
//! `timers::clock_ns` for code that finds its runtime through the thread).
//! `time::now()` reads it as an `Instant`. Everything the scheduler times
//! for itself (sysmon, time slices, keep-alives) stays on the real clock.
//!
//! # When it moves
//!
//! The runtime is *quiescent* when no P is held (every P idle: nothing
//! runs, spins or waits for a P), the global queue is empty, no M has
//! homed goroutines in its inbox, and no call is in flight in a syscall
//! (in place on an M: `SyscallGuard`; or on the blocking pool). Then every
//! goroutine and task is parked, and only a timer, a socket or a thread
//! outside the runtime can wake one. The timer sleeper (the one M that
//! waits for the earliest timer, `machine.rs`) decides:
//!
//! 1. not quiescent: wait for real, until the last P goes idle
//!    (`pidleput` wakes the sleeper of a virtual runtime then) or
//!    `RECHECK` passes (a syscall or pool call ending readies no one
//!    itself);
//! 2. quiescent, and the kernel already has socket events: take them
//!    (a non-blocking poll), no time passes;
//! 3. quiescent with a timer pending: set the clock to the earliest
//!    deadline (it never goes back) and run the due timers;
//! 4. quiescent, no timer: nothing in the runtime can make progress.
//!    Wait for real for a socket or a plain thread; if `STALL_AFTER`
//!    passes with nothing, *report the stall*: one message with the
//!    goroutine dump, on stderr and to whoever watches
//!    (`testing::run_virtual` panics with it, so the test fails instead
//!    of hanging).
//!
//! A stale decision is harmless: the sleeper checks under no lock, but a
//! P taken between its check and its jump means a goroutine runs while
//! the clock has already moved to the next deadline — exactly what would
//! have happened had it gone idle a moment later. What virtual time cannot
//! see is a plain thread about to wake a goroutine (a channel shared with
//! `std::thread`): to the runtime that goroutine is parked, so a pending
//! timeout fires at once. Blocking work belongs in `syscall`, which keeps
//! the clock still while it runs.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex};
use std::task::Waker;
use std::time::Duration;

use super::Shared;

/// Virtual runtimes alive: while 0, a clock read is the real clock, with
/// no thread-local lookup.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// A sleeper that finds the runtime busy looks again this often even if
/// nobody wakes it (a syscall or a blocking-pool call that ends readies
/// nobody by itself).
pub(crate) const RECHECK: Duration = Duration::from_millis(10);

/// Quiescent with no timer this long (real time): the stall is reported.
pub(crate) const STALL_AFTER: Duration = Duration::from_secs(1);

pub(crate) struct VirtualClock {
    /// Now, in ns on `timers::now_ns`'s scale. Only grows.
    now: AtomicU64,
    /// In-place syscalls running on this runtime's Ms, and plain threads
    /// polling a `Runtime::block_on` future of it: the clock stands still
    /// while any runs.
    pub(crate) busy: AtomicUsize,
    /// Real ns (`timers::now_ns`) since which the runtime has been
    /// quiescent with no timer; 0: it is not.
    stalled_since: AtomicU64,
    stall: Mutex<Stall>,
}

#[derive(Default)]
struct Stall {
    /// The report, once made (made once per runtime).
    report: Option<Arc<str>>,
    /// Who to wake with it (`testing::run_virtual`'s watcher).
    watcher: Option<Waker>,
}

impl VirtualClock {
    pub(crate) fn new() -> VirtualClock {
        LIVE.fetch_add(1, Relaxed);
        VirtualClock {
            now: AtomicU64::new(super::timers::now_ns()),
            busy: AtomicUsize::new(0),
            stalled_since: AtomicU64::new(0),
            stall: Mutex::new(Stall::default()),
        }
    }

    #[inline]
    pub(crate) fn now_ns(&self) -> u64 {
        self.now.load(Acquire)
    }

    /// Move the clock to `ns` (never back).
    pub(crate) fn advance_to(&self, ns: u64) {
        self.now.fetch_max(ns, AcqRel);
        self.stalled_since.store(0, Relaxed);
    }

    /// The runtime is busy again (or jumped): a stall starts over.
    pub(crate) fn progressed(&self) {
        self.stalled_since.store(0, Relaxed);
    }

    /// Quiescent with no timer, now (real ns): true once that has lasted
    /// `STALL_AFTER` and no report was made yet.
    pub(crate) fn stalled(&self, now: u64) -> bool {
        let since = match self.stalled_since.load(Relaxed) {
            0 => {
                self.stalled_since.store(now.max(1), Relaxed);
                return false;
            }
            s => s,
        };
        now.saturating_sub(since) >= STALL_AFTER.as_nanos() as u64
            && self
                .stall
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .report
                .is_none()
    }

    /// Make the stall report (once) and wake its watcher.
    pub(crate) fn report_stall(&self, report: String) {
        let mut st = self.stall.lock().unwrap_or_else(|e| e.into_inner());
        if st.report.is_some() {
            return;
        }
        eprintln!("{report}");
        st.report = Some(report.into());
        if let Some(w) = st.watcher.take() {
            drop(st);
            w.wake();
        }
    }

    /// The stall report, if made; else `waker` is woken when it is.
    pub(crate) fn poll_stall(&self, waker: &Waker) -> Option<Arc<str>> {
        let mut st = self.stall.lock().unwrap_or_else(|e| e.into_inner());
        if st.report.is_none() {
            match &st.watcher {
                Some(w) if w.will_wake(waker) => {}
                _ => st.watcher = Some(waker.clone()),
            }
        }
        st.report.clone()
    }
}

impl Drop for VirtualClock {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Relaxed);
    }
}

/// Whether any virtual runtime is alive (the fast path's test).
#[inline]
pub(crate) fn any() -> bool {
    LIVE.load(Relaxed) != 0
}

/// Counts work the scheduler cannot see as busy — an in-place syscall on
/// one of a virtual runtime's Ms, a plain thread polling its `block_on`
/// future — while it runs: the clock stands still meanwhile.
pub(crate) struct BusyGuard(Option<Arc<Shared>>);

impl BusyGuard {
    /// For the calling M's runtime, if it has a virtual clock.
    #[inline]
    pub(crate) fn syscall() -> BusyGuard {
        if !any() {
            return BusyGuard(None);
        }
        BusyGuard::of(super::context::current().map(|ctx| &ctx.shared))
    }

    /// For `shared`, if it has a virtual clock.
    #[inline]
    pub(crate) fn of(shared: Option<&Arc<Shared>>) -> BusyGuard {
        BusyGuard(shared.and_then(|shared| {
            shared.virtual_clock.as_ref()?.busy.fetch_add(1, SeqCst);
            Some(shared.clone())
        }))
    }
}

impl Drop for BusyGuard {
    fn drop(&mut self) {
        if let Some(shared) = &self.0 {
            if let Some(vc) = &shared.virtual_clock {
                vc.busy.fetch_sub(1, SeqCst);
                // Nothing else may be about to make the runtime idle.
                shared.virtual_poke();
            }
        }
    }
}

impl Shared {
    /// Now on this runtime's timer clock (ns): its virtual clock, else the
    /// real one.
    #[inline]
    pub(crate) fn clock_ns(&self) -> u64 {
        match &self.virtual_clock {
            Some(vc) => vc.now_ns(),
            None => super::timers::now_ns(),
        }
    }

    /// A virtual runtime may have just become quiescent: wake its timer
    /// sleeper to decide (the last P going idle, a busy count dropping).
    pub(crate) fn virtual_poke(&self) {
        if self.virtual_clock.is_some() && self.all_ps_idle() {
            if let Some(m) = &*crate::loom::lock(&self.sleeper) {
                m.wake();
            }
        }
    }

    /// The stall report of a virtual runtime's goroutines: what waits, and
    /// the goroutine dump.
    pub(crate) fn stall_report(&self) -> String {
        let mut dump = Vec::new();
        let _ = self.dump_goroutines(&mut dump);
        format!(
            "gosched: virtual time is stuck: for {} ms every goroutine and task of this runtime \
             has been blocked with no timer pending, so only a plain thread or a socket could \
             wake one, and none did. Blocking work belongs in gosched::syscall (it keeps the \
             clock still while it runs); a goroutine waiting for a std::thread cannot be run \
             under virtual time.\n{}",
            STALL_AFTER.as_millis(),
            String::from_utf8_lossy(&dump)
        )
    }
}
