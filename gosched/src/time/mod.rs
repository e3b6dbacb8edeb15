//! Time: `sleep`, `timeout`, the channel timers `after`, `tick` and `Timer`,
//! and `now` (the runtime's clock, which a virtual-time runtime moves itself:
//! `sched/vtime.rs`).
//!
//! Every timer here sits on the scheduler's per-P timer heaps (`sched/timers`:
//! the protocol, who runs due timers, and how an idle M sleeps exactly until the
//! earliest one). A sleeping goroutine or task is readied like any wake-up: into
//! the running P's `runnext`.

mod timer;

use std::future::Future;
use std::pin::Pin;

use crate::sched::timers::{clock_now, deadline_after, instant_to_ns, ns_to_instant};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

pub use crate::sched::timers::{sleep_until, Sleep};
pub use timer::{Ticker, Timer};

/// The current time on the clock of the calling code's runtime:
/// `Instant::now()`, except inside a runtime with
/// [virtual time](crate::Builder::virtual_time), where it is that runtime's
/// clock (it moves only when every goroutine is parked, to the next timer).
/// Every deadline gosched computes from a duration is `now() + d`: measure
/// with `now`/[`since`], not `Instant::now()`, in code that may run under
/// virtual time.
///
/// ```
/// use std::time::Duration;
/// gosched::testing::run_virtual(|| {
///     let t = gosched::time::now();
///     gosched::time::sleep(Duration::from_secs(90));
///     assert_eq!(gosched::time::now() - t, Duration::from_secs(90));
/// });
/// ```
pub fn now() -> Instant {
    clock_now()
}

/// Time passed since `t` on the runtime's clock (Go's `time.Since`):
/// `now() - t`, or zero if `t` is later.
///
/// ```
/// let t = gosched::time::now();
/// assert!(gosched::time::since(t) < std::time::Duration::from_secs(60));
/// ```
pub fn since(t: Instant) -> Duration {
    clock_now().saturating_duration_since(t)
}

/// Block the calling goroutine (or, outside the runtime, the calling thread) for
/// at least `d`. Only the goroutine parks: its M runs other goroutines meanwhile.
///
/// # Panics
/// When called from inside an async task: use [`sleep_async`]`(d).await` there.
///
/// ```
/// use std::time::Duration;
/// gosched::testing::run_virtual(|| {
///     let t = gosched::time::now();
///     gosched::time::sleep(Duration::from_secs(2)); // instant: the clock is virtual
///     assert_eq!(gosched::time::since(t), Duration::from_secs(2));
/// });
/// ```
pub fn sleep(d: Duration) {
    if crate::coro::in_goroutine() {
        crate::block_on(sleep_async(d));
    } else if crate::coro::in_async_task() {
        panic!("gosched::time::sleep called from an async task: use gosched::time::sleep_async(d).await");
    } else {
        std::thread::sleep(d);
    }
}

/// A future that completes once `d` has passed, on the runtime's timers. For
/// `d > 0` it returns `Pending` at least once (Go: `Sleep(d > 0)` always parks),
/// so a loop of tiny sleeps lets the rest of its P run.
///
/// ```
/// use std::time::Duration;
/// let waited = gosched::testing::run_virtual_async(async {
///     let t = gosched::time::now();
///     let sleep = gosched::time::sleep_async(Duration::from_secs(5));
///     assert_eq!(sleep.deadline(), t + Duration::from_secs(5));
///     sleep.await;
///     gosched::time::since(t)
/// });
/// assert_eq!(waited, Duration::from_secs(5));
/// ```
pub fn sleep_async(d: Duration) -> Sleep {
    let deadline = crate::sched::timers::deadline_after(d);
    if d.is_zero() {
        sleep_until(deadline)
    } else {
        crate::sched::timers::park_until(deadline)
    }
}

// ---- timeout, after, tick ----------------------------------------------------------

/// `timeout` ran out before the future completed.
///
/// ```
/// use std::time::Duration;
/// use gosched::time::{timeout, Elapsed};
/// let r = gosched::testing::run_virtual_async(async {
///     timeout(Duration::from_secs(1), std::future::pending::<()>()).await
/// });
/// assert_eq!(r, Err(Elapsed));
/// assert_eq!(Elapsed.to_string(), "deadline elapsed");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

impl std::fmt::Display for Elapsed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("deadline elapsed")
    }
}

impl std::error::Error for Elapsed {}

/// Run `fut` for at most `d`: `Err(Elapsed)` if it has not completed by then (it
/// is dropped). Works in async code, and through `block_on` in goroutines and
/// threads.
///
/// ```
/// use std::time::Duration;
/// use gosched::time::{sleep_async, timeout};
/// gosched::testing::run_virtual_async(async {
///     let quick = timeout(Duration::from_secs(10), async { 7 }).await;
///     assert_eq!(quick, Ok(7));
///     let slow = timeout(Duration::from_secs(1), sleep_async(Duration::from_secs(3600))).await;
///     assert!(slow.is_err());
/// });
/// ```
pub fn timeout<F: Future>(d: Duration, fut: F) -> Timeout<F> {
    Timeout {
        fut,
        sleep: sleep_async(d),
    }
}

/// Future returned by [`timeout`].
///
/// A goroutine (or a plain thread) waits for it with [`block_on`](crate::block_on):
///
/// ```
/// use std::time::Duration;
/// gosched::testing::run_virtual(|| {
///     let ch = gosched::chan::<u32>(0);
///     let t = gosched::time::timeout(Duration::from_secs(5), ch.recv_async());
///     assert!(gosched::block_on(t).is_err()); // nobody sent within 5 s
/// });
/// ```
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct Timeout<F> {
    fut: F,
    sleep: Sleep,
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: structural pinning of `fut`: it is never moved out of `self`,
        // and `Timeout` has no `Drop` or `Unpin` impl that would move it. `sleep`
        // is `Unpin` and not pinned.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: see above.
        if let Poll::Ready(v) = unsafe { Pin::new_unchecked(&mut this.fut) }.poll(cx) {
            return Poll::Ready(Ok(v));
        }
        match Pin::new(&mut this.sleep).poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(Elapsed)),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// A channel that receives the time once, after `d` (Go's `time.After`).
/// The value is the instant the timer was due, `now() + d` (Go sends the
/// same: the time it fired less its lateness).
///
/// The timer is not a task: it does not count in
/// [`num_goroutine`](crate::runtime::num_goroutine). As in Go 1.23, it goes
/// on the runtime's timer heap only once a receiver waits on the channel;
/// until then a receive (`try_recv`, `len`, a `select!` arm, …) checks the
/// deadline itself. So an `after` dropped unreceived — most of those in a
/// `select!` loop — costs a channel and nothing else, and once every handle
/// able to receive is dropped the timer is stopped and freed at once, long
/// before `d` passes.
///
/// ```
/// use std::time::Duration;
/// gosched::testing::run_virtual(|| {
///     let start = gosched::time::now();
///     let ch = gosched::time::after(Duration::from_secs(3));
///     let fired = ch.recv().unwrap();
///     assert_eq!(fired - start, Duration::from_secs(3));
///     // The usual use: a timeout arm.
///     let work = gosched::chan::<u32>(0);
///     let got = gosched::select! {
///         recv(work) -> v => v,
///         recv(gosched::time::after(Duration::from_secs(1))) -> _ => None,
///     };
///     assert_eq!(got, None);
/// });
/// ```
pub fn after(d: Duration) -> crate::Chan<Instant> {
    if d.is_zero() {
        let ch = crate::chan(1);
        let _ = ch.try_send(clock_now());
        return ch;
    }
    let clock = crate::sched::timers::DeadlineClock::current();
    crate::chan::timer_chan(instant_to_ns(deadline_after(d)), clock, ns_to_instant)
}

/// A [`Ticker`] that delivers the time every `period` (Go's `time.NewTicker`;
/// `time.Tick` too, as the ticker stops when dropped): ticks a slow receiver
/// misses are dropped, not queued (the channel holds one), and a late tick
/// does not cause a burst of catch-up ticks.
///
/// # Panics
/// If `period` is zero.
///
/// ```
/// use std::time::Duration;
/// gosched::testing::run_virtual(|| {
///     let start = gosched::time::now();
///     let ticker = gosched::time::tick(Duration::from_secs(1));
///     for n in 1..=3 {
///         let at = ticker.recv().unwrap();
///         assert_eq!(at - start, Duration::from_secs(n));
///     }
/// });
/// ```
pub fn tick(period: Duration) -> Ticker {
    Ticker::new(period)
}
