//! Time: `sleep`, `timeout`, and the channel timers `after`, `tick` and `Timer`.
//!
//! Every timer here sits on the scheduler's per-P timer heaps (`sched/timers`:
//! the protocol, who runs due timers, and how an idle M sleeps exactly until the
//! earliest one). A sleeping goroutine or task is readied like any wake-up: into
//! the running P's `runnext`.

mod timer;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

pub use crate::sched::timers::{sleep_until, Sleep};
pub use timer::Timer;

/// Block the calling goroutine (or, outside the runtime, the calling thread) for
/// at least `d`. Only the goroutine parks: its M runs other goroutines meanwhile.
///
/// # Panics
/// When called from inside an async task: use [`sleep_async`]`(d).await` there.
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
pub fn timeout<F: Future>(d: Duration, fut: F) -> Timeout<F> {
    Timeout {
        fut,
        sleep: sleep_async(d),
    }
}

/// Future returned by [`timeout`].
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
pub fn after(d: Duration) -> crate::Chan<Instant> {
    let ch = crate::chan(1);
    let tx = ch.clone();
    crate::spawn(async move {
        sleep_async(d).await;
        let _ = tx.try_send(Instant::now());
    });
    ch
}

/// Deliver the time on a channel every `period` (Go's `time.Tick`/`NewTicker`):
/// ticks a slow receiver misses are dropped, not queued, and a late tick does
/// not cause a burst of catch-up ticks.
///
/// # Panics
/// If `period` is zero.
pub fn tick(period: Duration) -> Ticker {
    assert!(
        !period.is_zero(),
        "gosched::time::tick: period must be non-zero"
    );
    // `Duration::MAX` and other huge periods saturate (see `deadline_after`), so
    // neither the first deadline nor the catch-up arithmetic below overflows.
    let period = period.min(crate::sched::timers::MAX_WAIT);
    let ch = crate::chan(1);
    let stopped = Arc::new(AtomicBool::new(false));
    let (tx, stop) = (ch.clone(), stopped.clone());
    crate::spawn(async move {
        let mut next = Instant::now() + period;
        while !stop.load(Acquire) {
            // Parks even when `next` has passed (a period shorter than a
            // round of this loop): ticks are then dropped, not spun for.
            crate::sched::timers::park_until(next).await;
            if stop.load(Acquire) {
                break;
            }
            let now = Instant::now();
            let _ = tx.try_send(now);
            // Go: when + period * (1 + lateness / period).
            let late = now.saturating_duration_since(next);
            let skipped = (late.as_nanos() / period.as_nanos()) as u32;
            next += period * (1 + skipped);
        }
    });
    Ticker { ch, stopped }
}

/// A periodic timer from [`tick`]. Stops when dropped.
#[derive(Debug)]
pub struct Ticker {
    ch: crate::Chan<Instant>,
    stopped: Arc<AtomicBool>,
}

impl Ticker {
    /// The channel the ticks arrive on (usable in `select!`).
    pub fn chan(&self) -> &crate::Chan<Instant> {
        &self.ch
    }

    /// Wait for the next tick (blocking the goroutine or thread).
    pub fn recv(&self) -> Option<Instant> {
        self.ch.recv()
    }

    /// Stop ticking (takes effect by the next period at the latest).
    pub fn stop(&self) {
        self.stopped.store(true, Release);
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop();
    }
}
