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
//! runs or spins), the global queue is empty, the blocking pool has no
//! call, and the
//! busy count (`VirtualClock::busy`) is 0. That count covers what holds no
//! P: an in-place syscall (`BusyGuard::syscall`, from before the call
//! until the goroutine has a P again; released by the M instead if the
//! goroutine parks inside the call, `SyscallToken`), a plain thread
//! polling a `block_on` future (`BusyGuard::poll`), and a plain thread
//! woken and not yet polling (`WakeCount`). sysmon never takes a P from a
//! running poll in a virtual runtime (it still asks it to yield), so a
//! goroutine that never yields holds its P. Then every goroutine and task
//! is parked, and only a timer, a socket or a thread outside the runtime
//! can wake one. The timer sleeper (the one M that waits for the earliest
//! timer, `machine.rs`; a virtual runtime starts an M at build so that
//! there is one) decides:
//!
//! 1. not quiescent: wait for real, until the last P goes idle
//!    (`pidleput` wakes the sleeper of a virtual runtime then, and so does
//!    the busy count dropping) or `RECHECK` passes (a pool call ending
//!    readies no one itself);
//! 2. quiescent, and the kernel already has socket events: take them
//!    (a non-blocking poll), no time passes;
//! 3. quiescent with a timer pending: set the clock to the earliest
//!    deadline (it never goes back) and run the due timers;
//! 4. quiescent, no timer: nothing in the runtime can make progress.
//!    Wait for real for a socket or a plain thread; if `STALL_AFTER`
//!    passes with no poll run anywhere (`Shared::virtual_polls`: wakes
//!    that ran and parked between two looks are progress), *report the
//!    stall*: one message with the goroutine dump, on stderr and to
//!    whoever watches (`testing::run_virtual` panics with it, so the test
//!    fails instead of hanging).
//!
//! The sleeper reads these conditions one by one, with no lock; work
//! moves between "a P held" and "counted busy" hand over hand, so it reads
//! the busy count before and after the rest (`virtually_quiescent`). A
//! wake from outside the runtime between the check and the jump (a plain
//! thread, a socket) makes a goroutine run with the clock already at the
//! next deadline: what would have happened had it come a moment later.
//!
//! What virtual time cannot
//! see is a plain thread about to wake a goroutine (a channel shared with
//! `std::thread`): to the runtime that goroutine is parked, so a pending
//! timeout fires at once. Blocking work belongs in `syscall`, which keeps
//! the clock still while it runs.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::*};
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
    /// Polls run so far (tasks on the Ps, plus `block_on` futures on
    /// plain threads) when the stall was last looked at: any change is
    /// progress, and the stall's count starts over.
    seen_polls: AtomicU64,
    /// `block_on` polls on plain threads (counted by `BusyGuard::poll`).
    pub(crate) thread_polls: AtomicU64,
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
            seen_polls: AtomicU64::new(0),
            thread_polls: AtomicU64::new(0),
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

    /// Quiescent with no timer, now (real ns), `polls` run so far: true
    /// once that has lasted `STALL_AFTER` with no poll run meanwhile (a
    /// plain thread or a socket may have woken something that ran and
    /// parked again between two looks) and no report was made yet.
    pub(crate) fn stalled(&self, now: u64, polls: u64) -> bool {
        let moved = self.seen_polls.swap(polls, Relaxed) != polls;
        let since = match self.stalled_since.load(Relaxed) {
            s if s == 0 || moved => {
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

/// An in-place syscall of a virtual runtime's goroutine, counted busy
/// while it runs. Released exactly once (`counted` swapped to false): by
/// the guard when the call returns, or by the M when the goroutine parks
/// inside the call (`MachineCtx::end_virtual_syscall`: a parked goroutine
/// is not busy, and may resume on another M if it migrates).
pub(crate) struct SyscallToken {
    shared: Arc<Shared>,
    counted: AtomicBool,
}

impl SyscallToken {
    pub(crate) fn release(&self) {
        if self.counted.swap(false, SeqCst) {
            if let Some(vc) = &self.shared.virtual_clock {
                vc.busy.fetch_sub(1, SeqCst);
            }
            self.shared.virtual_poke();
        }
    }
}

/// Counts work the scheduler cannot see as busy — an in-place syscall on
/// one of a virtual runtime's Ms, a plain thread polling its `block_on`
/// future — while it runs: the clock stands still meanwhile.
pub(crate) enum BusyGuard {
    None,
    Syscall(Arc<SyscallToken>),
    Poll(Arc<Shared>),
}

impl BusyGuard {
    /// An in-place syscall on the calling M, if its runtime has a virtual
    /// clock: counted until it returns or the goroutine parks inside it.
    #[inline]
    pub(crate) fn syscall() -> BusyGuard {
        if !any() {
            return BusyGuard::None;
        }
        let Some(ctx) = super::context::current() else {
            return BusyGuard::None;
        };
        let Some(vc) = &ctx.shared.virtual_clock else {
            return BusyGuard::None;
        };
        vc.busy.fetch_add(1, SeqCst);
        let token = Arc::new(SyscallToken {
            shared: ctx.shared.clone(),
            counted: AtomicBool::new(true),
        });
        ctx.set_virtual_syscall(Some(token.clone()));
        BusyGuard::Syscall(token)
    }

    /// A poll of a `block_on` future on a plain thread, if `shared` has a
    /// virtual clock.
    #[inline]
    pub(crate) fn poll(shared: &Arc<Shared>) -> BusyGuard {
        match &shared.virtual_clock {
            Some(vc) => {
                vc.busy.fetch_add(1, SeqCst);
                BusyGuard::Poll(shared.clone())
            }
            None => BusyGuard::None,
        }
    }
}

impl Drop for BusyGuard {
    fn drop(&mut self) {
        match self {
            BusyGuard::None => {}
            BusyGuard::Syscall(token) => {
                if let Some(ctx) = super::context::current() {
                    ctx.set_virtual_syscall(None);
                }
                token.release();
            }
            BusyGuard::Poll(shared) => {
                if let Some(vc) = &shared.virtual_clock {
                    vc.thread_polls.fetch_add(1, Relaxed);
                    vc.busy.fetch_sub(1, SeqCst);
                }
                shared.virtual_poke();
            }
        }
    }
}

/// The waker a plain thread's `block_on` of a virtual runtime polls with:
/// a wake counts the thread busy until its next poll has begun (a woken
/// thread about to poll is not idle), so the clock does not move in
/// between (`Runtime::block_on`).
pub(crate) struct WakeCount {
    shared: Arc<Shared>,
    /// `IDLE`, `PENDING` (a wake counted, the poll not begun), `DONE`.
    state: std::sync::atomic::AtomicU8,
    inner: Mutex<Waker>,
}

const IDLE: u8 = 0;
const PENDING: u8 = 1;
const DONE: u8 = 2;

impl WakeCount {
    pub(crate) fn new(shared: &Arc<Shared>, inner: &Waker) -> Arc<WakeCount> {
        Arc::new(WakeCount {
            shared: shared.clone(),
            state: std::sync::atomic::AtomicU8::new(IDLE),
            inner: Mutex::new(inner.clone()),
        })
    }

    /// A poll begins with `w` as the thread's waker: a counted wake is
    /// over (the poll itself is counted by `BusyGuard::poll`).
    pub(crate) fn begin_poll(&self, w: &Waker) {
        {
            let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            if !inner.will_wake(w) {
                *inner = w.clone();
            }
        }
        if self
            .state
            .compare_exchange(PENDING, IDLE, SeqCst, SeqCst)
            .is_ok()
        {
            self.uncount();
        }
    }

    /// `block_on` returned: later wakes count nothing.
    pub(crate) fn finish(&self) {
        if self.state.swap(DONE, SeqCst) == PENDING {
            self.uncount();
        }
    }

    fn uncount(&self) {
        if let Some(vc) = &self.shared.virtual_clock {
            vc.busy.fetch_sub(1, SeqCst);
        }
    }
}

impl std::task::Wake for WakeCount {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self
            .state
            .compare_exchange(IDLE, PENDING, SeqCst, SeqCst)
            .is_ok()
        {
            if let Some(vc) = &self.shared.virtual_clock {
                vc.busy.fetch_add(1, SeqCst);
            }
        }
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .wake_by_ref();
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

    /// Polls run so far: every P's, and the `block_on` threads' (a stall's
    /// progress check).
    pub(crate) fn virtual_polls(&self) -> u64 {
        let on_ps: u64 = self
            .procs
            .iter()
            .map(|p| u64::from(p.execs.load(Relaxed)))
            .sum();
        on_ps.wrapping_add(
            self.virtual_clock
                .as_ref()
                .map_or(0, |vc| vc.thread_polls.load(Relaxed)),
        )
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
