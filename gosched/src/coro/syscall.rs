//! `gosched::syscall(f)`: a blocking call from a goroutine that does not hold
//! up the goroutines sharing its M.
//!
//! Under the thread rule (`sched/machine.rs`: where goroutines cannot be
//! virtual threads, or `Builder::pin_goroutines`) a started goroutine never
//! leaves its M, and neither do the others homed there. A blocking call
//! made in place would stop all of them for its whole length; sysmon handing
//! the P to another M frees only the P's movable work. So:
//!
//! * **Hand-off** — `f` runs on a thread of the runtime's blocking pool
//!   (`sched/blocking.rs`) while the goroutine parks; the M runs the others
//!   meanwhile, and the pool thread wakes the goroutine with the result (or
//!   re-raises `f`'s panic in it). Costs two thread wake-ups (S2 below).
//! * **In place** — `f` runs on the calling thread with its M marked as in
//!   a call (`sched/syscall.rs`), Go's `entersyscall`: two plain stores and
//!   a load; sysmon hands the P off if the call is slow.
//!
//! Which one: in place when nothing else is homed on the calling M (the
//! goroutine is alone there, or all goroutines migrate, Go's mode), on a
//! plain thread and in an async task; otherwise it depends on the **call
//! site**'s history (`#[track_caller]`): a table of [`SITES`] slots, indexed
//! by a hash of the caller's `Location`, keeps a moving average of how long
//! that site's calls took (measured in place, or on the pool thread). A
//! site whose calls take under [`SLOW`] runs in place; a slower one, or one
//! never seen (it could block for minutes: a read of stdin), is handed off.
//! So a site of fast calls pays the hand-off once or twice, and a site that
//! turns slow holds up its M's other goroutines for one call, then hands off.
//! Sites that share a slot share an average (harmless: it only picks
//! between two correct paths).
//!
//! Measured on the 2-core box (`gosched-bench s1 s2 --impl
//! gosched-go,gosched-go-migrate,go`, 100 goroutines, medians of 5):
//!
//! | ns per call | S1 `nanosleep(50 µs)` | S2 `getppid` |
//! |---|--:|--:|
//! | always hand off | 9,603 | 3,486 (38× Go) |
//! | by call site (this) | 7,924 | 109 |
//! | in place (migrating goroutines; no sysmon yet) | 66,179 | 96 |
//! | Go 1.27 (sysmon hands the P off after 20 µs) | 22,324 | 93 (a raw call) |
//!
//! Go's S2 figure there made `syscall.Getppid`, a raw call that skips
//! `entersyscall`; through `syscall.Syscall`, as its blocking calls go, Go
//! makes 81-87 ns and this 89-98 (2026-11-28, after [`folded`] stopped
//! writing the shared table at every sampled call). Since 2026-11-29 a call
//! in place makes no CAS on the P's status word (`sched/status.rs`, "Calls
//! in place"): 89.1 -> 79.9 ns (ab.py, 15 interleaved runs each).
//!
//! `f` may borrow from the goroutine's stack (no `'static` bound): the
//! goroutine is parked until `f` has returned, and if it is cancelled
//! meanwhile (runtime shutdown), its unwinding blocks in `Wait::drop` until
//! `f` has returned, so the borrowed frames outlive every use. That is the
//! invariant the lifetime erasure in `hand_off` relies on; `Done` also makes
//! sure the result, which may borrow too, is dropped on the goroutine's side.
//!
//! `syscall_local(f)` always runs in place: for calls that are not `Send`
//! (they touch the calling thread's state) or are known to be short.

use std::future::Future;
use std::mem;
use std::panic::{self, AssertUnwindSafe, Location};
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use super::{block_on_goroutine, current_pinned};
use crate::sched::blocking::Job;
use crate::sched::context::with_current;
use crate::sched::syscall::{homed_on_this_m, in_place, in_place_blocking, lost_p_in_poll};

/// Run `f`, a call that may block its OS thread (a system call, a blocking
/// library), from a goroutine without holding up the other goroutines of its
/// M. When others are homed there and this call site's calls have been slow
/// (10 µs or more on average) or never measured, `f` runs on a pool thread
/// while only this goroutine parks; otherwise it runs in place with its
/// thread marked as in a system call (a site of fast calls learns that
/// after a call or two). Outside the runtime it just calls `f`. A panic in
/// `f` is raised in the caller.
///
/// `f` and its result must be `Send` (they may cross to the pool thread);
/// [`syscall_local`] takes any `f` and always runs it in place.
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
    if let Some(pinned) = current_pinned() {
        let site = site_slot(Location::caller());
        let avg = site.load(Relaxed);
        let slow = avg == UNSEEN || avg >= SLOW_NS;
        // The calling goroutine itself counts in `homed` when pinned.
        if slow && homed_on_this_m() > usize::from(pinned) {
            return hand_off(f, site);
        }
        // In place. A site whose calls are slow gives its P away first
        // (Go's `entersyscallblock`), so the P's queue runs on at once
        // instead of after sysmon's next look; a fast site keeps it (and
        // sysmon retakes it if a call turns out slow). Fast sites are
        // re-measured one call in `SAMPLE` (two clock reads per measure).
        // A slow call gives the P away and blocks this M: no goroutine may
        // be placed here meanwhile (and if one was, a moment ago, hand off).
        let _alone = if slow {
            let Some(guard) = crate::sched::syscall::block_alone(usize::from(pinned)) else {
                return hand_off(f, site);
            };
            Some(guard)
        } else {
            None
        };
        if slow || sample_this_call() {
            // Time `f` alone: a hand-off's own cost must not make a fast
            // site look slow.
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
/// goroutine waits for a P (its M on the want-P list) instead of running
/// beside the procs limit.
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
/// A site whose calls average this long or more is handed off.
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
/// in a system call meanwhile. Unlike [`syscall`] it never hands `f` to
/// another thread, so `f` need not be `Send`, but while it blocks, the other
/// goroutines homed on the calling M wait too.
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

/// Where the pool thread leaves the result for the parked goroutine.
struct Done<R> {
    state: Mutex<DoneState<R>>,
    /// Signalled when `finished` is set (for a cancelled waiter).
    finished_cv: Condvar,
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
            finished_cv: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, DoneState<R>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Pool thread: publish the result, then wake the goroutine. After the
    /// unlock the waiter may return and free its frames; nothing here
    /// touches them (the waker is owned, `self` is in an `Arc`).
    fn finish(&self, result: std::thread::Result<R>) {
        let waker = {
            let mut st = self.lock();
            st.result = Some(result);
            st.finished = true;
            st.waker.take()
        };
        self.finished_cv.notify_all();
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// The goroutine's side: ready once the pool thread finished.
struct Wait<'a, R> {
    done: &'a Done<R>,
}

impl<R> Future for Wait<'_, R> {
    type Output = std::thread::Result<R>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.done.poll_result(cx)
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

impl<R> Drop for Wait<'_, R> {
    /// Cancelled while `f` runs (the goroutine's stack is being unwound):
    /// block this thread until `f` has returned, because `f` may borrow the
    /// frames about to be freed. Then drop the result here, on this side.
    fn drop(&mut self) {
        let mut st = self.done.lock();
        while !st.finished {
            st = self
                .done
                .finished_cv
                .wait(st)
                .unwrap_or_else(|e| e.into_inner());
        }
        let result = st.result.take();
        drop(st);
        drop(result);
    }
}

fn hand_off<F, R>(f: F, site: &'static AtomicU32) -> R
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    let done = Done::new();
    let to_pool = done.clone();
    let job: Box<dyn FnOnce() + Send + '_> = Box::new(move || {
        let t = Instant::now();
        let result = panic::catch_unwind(AssertUnwindSafe(f));
        record(site, t.elapsed());
        to_pool.finish(result);
    });
    // SAFETY: only the lifetime changes. The job may borrow from this
    // goroutine's frames (through `f`, and `R` in `Done`); this function does
    // not return, and its frames are not freed, before `finish` ran: the
    // goroutine waits in `block_on_goroutine(Wait)` and a cancellation's
    // unwinding blocks in `Wait::drop` until `finished`. After `finish` the
    // job holds only the `Arc<Done<R>>` with the result already taken (by
    // `Wait::poll` or `Wait::drop`), so dropping it later touches no borrowed
    // data. If `submit` panics, the job is dropped inside it, before we
    // return.
    let job: Job = unsafe { mem::transmute::<Box<dyn FnOnce() + Send + '_>, Job>(job) };
    with_current(|shared| shared.blocking.submit(job));
    match block_on_goroutine(Wait { done: &done }) {
        Ok(r) => r,
        Err(payload) => panic::resume_unwind(payload),
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
