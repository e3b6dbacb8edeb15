//! `gosched::syscall(f)`: a blocking call from a goroutine that does not hold
//! up the goroutines queued on its P.
//!
//! The call runs in place, on the calling thread, with its M marked as in a
//! call (`sched/syscall.rs`, Go's `entersyscall`: two plain stores and a
//! load). If it blocks, sysmon hands the P, with its queue, to another M
//! after a tick (Go's `retake`); goroutines move between Ms, so nothing else
//! waits for the call.
//!
//! A call site that is known to block gives its P away before the call
//! instead (Go's `entersyscallblock`, `in_place_blocking`), so the queue runs
//! on at once rather than after sysmon's next look. Which sites: a table of
//! [`SITES`] slots, indexed by a hash of the caller's `Location`
//! (`#[track_caller]`), keeps a moving average of how long that site's calls
//! took. A site whose calls take under [`SLOW`] keeps its P (re-measured one
//! call in `SAMPLE`); a slower one, or one never seen (it could block for
//! minutes: a read of stdin), gives it away first. Sites that share a slot
//! share an average (harmless: it only picks between two correct paths).
//!
//! `syscall_local(f)` always runs in place keeping the P: for calls that are
//! not `Send` (they touch the calling thread's state) or are known to be
//! short. `syscall_async(f)` runs `f` on the blocking pool
//! (`sched/blocking.rs`) for async tasks, which must not block their M.

use std::future::Future;
use std::panic::{self, AssertUnwindSafe, Location};
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::sched::context::with_current;
use crate::sched::syscall::{in_place, in_place_blocking, lost_p_in_poll};

/// Run `f`, a call that may block its OS thread (a system call, a blocking
/// library), from a goroutine without holding up the other goroutines of its
/// P: it runs in place with its thread marked as in a system call (Go's
/// `entersyscall`), and if it blocks, sysmon hands the P, with its queue, to
/// another M. A call site whose calls have averaged 10 µs or more, or that
/// was never measured, gives the P away before the call instead (Go's
/// `entersyscallblock`), so the queue runs on at once; a site of fast calls
/// learns that after a call or two. Outside the runtime it just calls `f`.
/// A panic in `f` is raised in the caller.
///
/// [`syscall_local`] is the same without the `Send` bounds and the site's
/// history (it never gives the P away first).
///
/// ```
/// let dir = std::env::temp_dir();
/// let h = gosched::go(move || {
///     // `f` may borrow from the goroutine's stack: no `'static` needed.
///     gosched::syscall(|| std::fs::metadata(&dir).map(|m| m.is_dir()))
/// });
/// assert!(h.join().unwrap().unwrap());
/// // Outside the runtime it just calls `f`.
/// assert_eq!(gosched::syscall(|| 1 + 1), 2);
/// ```
#[track_caller]
pub fn syscall<F, R>(f: F) -> R
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    if super::in_goroutine() {
        let site = site_slot(Location::caller());
        let avg = site.load(Relaxed);
        let slow = avg == UNSEEN || avg >= SLOW_NS;
        // Fast sites are re-measured one call in `SAMPLE` (two clock reads
        // per measure).
        if slow || sample_this_call() {
            let timed = || {
                let t = Instant::now();
                let r = f();
                (r, t.elapsed())
            };
            let (r, took) = run_in_place(timed, slow);
            record(site, took);
            return r;
        }
    }
    run_in_place(f, false)
}

/// One call in this many of a fast site is timed.
const SAMPLE: u32 = 16;

/// Whether to time this call of a fast site (a per-thread countdown).
#[inline(never)]
fn sample_this_call() -> bool {
    std::thread_local! {
        static COUNT: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }
    COUNT.with(|c| {
        let n = c.get().wrapping_add(1);
        c.set(n);
        n % SAMPLE == 0
    })
}

/// `in_place` (or `in_place_blocking`, which gives the P away first), then
/// Go's `exitsyscall` for a goroutine: if sysmon handed our P to another M
/// while `f` blocked and no idle P was to be had, yield, so that the
/// goroutine waits for a P (on the global queue) instead of running beside
/// the procs limit.
fn run_in_place<R>(f: impl FnOnce() -> R, blocking: bool) -> R {
    // A virtual clock stands still while the call runs, and until the
    // goroutine has a P again (or parks).
    let counted = crate::sched::vtime::BusyGuard::syscall();
    let r = if blocking {
        in_place_blocking(f)
    } else {
        in_place(f)
    };
    if lost_p_in_poll() && super::in_goroutine() {
        super::yield_goroutine();
    }
    drop(counted);
    r
}

/// Slots of the call-site table.
pub(crate) const SITES: usize = 1024;
/// A site whose calls average this long or more gives its P away first.
pub(crate) const SLOW: Duration = Duration::from_micros(10);
const SLOW_NS: u32 = SLOW.as_nanos() as u32;
/// A slot no call has been measured in.
const UNSEEN: u32 = 0;

/// Per call-site moving average of call durations, ns (+1, so that 0 is
/// `UNSEEN`), saturating at `u32::MAX`. Relaxed: a stale average only picks
/// the other (correct) path once. Read at every call from every M, written
/// rarely ([`folded`]); aligned so that no other static's writes share its
/// first and last cache lines.
static SITE_NS: SiteTable = SiteTable([const { AtomicU32::new(UNSEEN) }; SITES]);

#[repr(align(128))]
struct SiteTable([AtomicU32; SITES]);

fn site_slot(loc: &'static Location<'static>) -> &'static AtomicU32 {
    let key = (loc as *const Location<'static>) as usize as u64;
    let h = key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SITES.trailing_zeros());
    &SITE_NS.0[h as usize]
}

/// Folds one call's duration into its site's average (weight 1/4).
fn record(site: &AtomicU32, took: Duration) {
    let ns = u32::try_from(took.as_nanos())
        .unwrap_or(u32::MAX)
        .saturating_add(1);
    let old = site.load(Relaxed);
    if let Some(new) = folded(old, ns) {
        site.store(new, Relaxed);
    }
}

/// The site average after a call of `ns` (+1) folded into `old`, or `None`
/// when the move is too small to be worth a store.
///
/// Every goroutine calling from one site shares its slot, so each store
/// takes the slot's cache line from every other core, whose next call's
/// load then misses: with a store at every sampled call, S2 (100
/// goroutines, one site, 2 procs) was 1.19× Go while at procs 1 it was
/// even. Only the side of [`SLOW`] the average is on matters, so a move
/// of at most an eighth of the average's distance to [`SLOW`] is dropped:
/// far from the threshold jitter writes nothing, and near it every move
/// is kept. A call on the other side of the threshold moves the average by
/// at least a quarter of that distance, so it is always stored and the
/// verdict still follows the calls.
fn folded(old: u32, ns: u32) -> Option<u32> {
    if old == UNSEEN {
        return Some(ns.max(1));
    }
    let new = (((u64::from(old) * 3 + u64::from(ns)) / 4) as u32).max(1);
    let moved = u64::from(new.abs_diff(old));
    let margin = u64::from(old.abs_diff(SLOW_NS));
    (moved * 8 > margin).then_some(new)
}

/// Run `f`, a call that may block, on the calling thread, which is marked as
/// in a system call meanwhile (sysmon hands the P to another M if it
/// blocks). `f` need not be `Send`.
///
/// ```
/// use std::rc::Rc;
/// let h = gosched::go(|| {
///     let shared = Rc::new(20); // not `Send`: `syscall` would not take it
///     gosched::syscall_local(|| *shared + 22)
/// });
/// assert_eq!(h.join().unwrap(), 42);
/// ```
pub fn syscall_local<R>(f: impl FnOnce() -> R) -> R {
    run_in_place(f, false)
}

/// Where the pool thread leaves the result for the awaiting task.
struct Done<R> {
    state: Mutex<DoneState<R>>,
}

struct DoneState<R> {
    result: Option<std::thread::Result<R>>,
    finished: bool,
    waker: Option<Waker>,
}

impl<R> Done<R> {
    fn new() -> Arc<Self> {
        Arc::new(Done {
            state: Mutex::new(DoneState {
                result: None,
                finished: false,
                waker: None,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, DoneState<R>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Pool thread: publish the result, then wake the task.
    fn finish(&self, result: std::thread::Result<R>) {
        let waker = {
            let mut st = self.lock();
            st.result = Some(result);
            st.finished = true;
            st.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl<R> Done<R> {
    /// The result once the pool thread finished, else register `cx`'s
    /// waker.
    fn poll_result(&self, cx: &mut Context<'_>) -> Poll<std::thread::Result<R>> {
        let mut st = self.lock();
        if st.finished {
            return Poll::Ready(st.result.take().expect("syscall result taken twice"));
        }
        match &mut st.waker {
            Some(w) => w.clone_from(cx.waker()),
            None => st.waker = Some(cx.waker().clone()),
        }
        crate::sched::wait::pending(crate::sched::wait::WaitReason::Syscall, cx)
    }
}

/// The async form of [`syscall`]: run `f`, a call that may block its OS
/// thread, on the runtime's blocking pool and await its result, so the
/// task's M goes on with other work meanwhile (tokio's `spawn_blocking`).
/// A panic in `f` is raised in the awaiting task. Dropping the future
/// does not stop `f`; its result is dropped when it ends.
///
/// ```
/// let rt = gosched::Builder::new().procs(2).build().unwrap();
/// let n = rt.block_on(rt.spawn(async {
///     gosched::syscall_async(|| std::fs::read_dir(".").map(|d| d.count()).unwrap_or(0)).await
/// }));
/// assert!(n.unwrap() > 0);
/// ```
pub fn syscall_async<F, R>(f: F) -> SyscallFuture<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let done = Done::new();
    let to_pool = done.clone();
    with_current(|shared| {
        shared.blocking.submit(Box::new(move || {
            to_pool.finish(panic::catch_unwind(AssertUnwindSafe(f)));
        }))
    });
    SyscallFuture { done }
}

/// Future of [`syscall_async`].
///
/// ```
/// let rt = gosched::Runtime::new().unwrap();
/// let len = rt.block_on(rt.spawn(async {
///     let call: gosched::SyscallFuture<usize> = gosched::syscall_async(|| "blocking".len());
///     call.await
/// }));
/// assert_eq!(len.unwrap(), 8);
/// ```
#[must_use = "futures do nothing unless polled; the call runs anyway"]
pub struct SyscallFuture<R> {
    done: Arc<Done<R>>,
}

impl<R> std::fmt::Debug for SyscallFuture<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyscallFuture").finish_non_exhaustive()
    }
}

impl<R> Future for SyscallFuture<R> {
    type Output = R;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<R> {
        // Not through `Wait`: its drop waits for the call (it guards
        // borrowed frames, which this 'static call has none of).
        match self.done.poll_result(cx) {
            Poll::Ready(Ok(v)) => Poll::Ready(v),
            Poll::Ready(Err(payload)) => panic::resume_unwind(payload),
            Poll::Pending => {
                crate::sched::wait::pending(crate::sched::wait::WaitReason::Syscall, cx)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{folded, SLOW_NS, UNSEEN};

    /// Feeds `calls` of `ns` into `avg` as `record` does; the stores made.
    fn feed(avg: &mut u32, ns: u32, calls: usize) -> usize {
        let mut stores = 0;
        for _ in 0..calls {
            if let Some(new) = folded(*avg, ns) {
                *avg = new;
                stores += 1;
            }
        }
        stores
    }

    #[test]
    fn a_first_call_is_always_stored() {
        assert_eq!(folded(UNSEEN, 1), Some(1));
        assert_eq!(folded(UNSEEN, 120), Some(120));
        assert_eq!(folded(UNSEEN, 50_000), Some(50_000));
    }

    #[test]
    fn jitter_far_from_the_threshold_writes_nothing() {
        // A fast site at ~100 ns whose sampled calls vary 2x either way.
        let mut avg = 100;
        let mut stores = 0;
        for i in 0..10_000u32 {
            stores += feed(&mut avg, 50 + (i * 37) % 150, 1);
        }
        assert_eq!(stores, 0, "every store bounces the slot between cores");
        // A slow site at ~50 us with the same relative jitter.
        let mut avg = 50_000;
        let mut stores = 0;
        for i in 0..10_000u32 {
            stores += feed(&mut avg, 40_000 + (i * 37) % 20_000, 1);
        }
        assert_eq!(stores, 0);
    }

    #[test]
    fn the_verdict_follows_calls_that_cross_the_threshold() {
        for (from, to) in [
            (100, SLOW_NS + SLOW_NS / 10),
            (100, 1_000_000),
            (SLOW_NS - SLOW_NS / 10, SLOW_NS + SLOW_NS / 10),
            (1_000_000, SLOW_NS - SLOW_NS / 10),
            (SLOW_NS + 1, 100),
            (50_000, 100),
        ] {
            let mut avg = from;
            feed(&mut avg, to, 64);
            assert_eq!(
                avg >= SLOW_NS,
                to >= SLOW_NS,
                "calls of {to} ns after an average of {from}: stuck at {avg}"
            );
        }
    }

    #[test]
    fn one_far_outlier_is_stored() {
        // A 1 ms call at a 100 ns site moves the average by ~250 us.
        assert!(folded(100, 1_000_000).is_some_and(|a| a > 200_000));
    }
}
