//! Timers: `sleep`, `sleep_async`, and the per-P timer heaps behind them.
//!
//! # Protocol
//!
//! Each Processor owns a `Timers`: a 4-ary heap (`heap.rs`) under a small lock
//! (other Ms take it to run this P's due timers when it is idle or busy) and
//! `when0`, the earliest deadline, readable without the lock (`u64::MAX`: none).
//! A P-less caller (a plain thread inside `Runtime::block_on`, or an M whose P was
//! retaken) uses the runtime's global `Timers`.
//!
//! A timer entry is shared by the heap and the `Sleep` future that armed it:
//! `ARMED → FIRED` (by whoever runs it, then the waker is called) or
//! `ARMED → STOPPED` (the `Sleep` was dropped; the heap discards it lazily when it
//! reaches the top, and compacts when stopped entries pile up).
//!
//! Who runs timers: the M holding the P, at the top of `find_runnable`; spinning
//! Ms, for every P, in the last steal round; and the one M that parks with a
//! timeout (the "timer sleeper", see `sched/machine.rs`), which sleeps exactly
//! until the earliest deadline over all Ps — never a fixed tick. When a new timer
//! becomes some heap's earliest, the sleeper is woken if it would sleep past it,
//! or, if no M sleeps on timers, `wakep` starts one (Go's `wakeNetPoller`).
//!
//! A sleeping goroutine or task is readied like any wake-up: into the running P's
//! `runnext`.

mod heap;
mod timer;

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::loom::lock;
use crate::loom::sync::atomic::{AtomicU64, AtomicU8, Ordering::*};
use crate::loom::sync::{Arc, Mutex};
use heap::Heap;
pub use timer::Timer;

/// No timer pending.
pub(crate) const NEVER: u64 = u64::MAX;

const ARMED: u8 = 0;
const FIRED: u8 = 1;
const STOPPED: u8 = 2;

static EPOCH: OnceLock<Instant> = OnceLock::new();

fn epoch() -> Instant {
    *EPOCH.get_or_init(Instant::now)
}

/// Monotonic nanoseconds since the process's timer epoch.
pub(crate) fn now_ns() -> u64 {
    instant_to_ns(Instant::now())
}

pub(crate) fn instant_to_ns(t: Instant) -> u64 {
    t.saturating_duration_since(epoch()).as_nanos() as u64
}

#[derive(Debug)]
pub(crate) struct TimerEntry {
    state: AtomicU8,
    waker: Mutex<Option<Waker>>,
}

pub(crate) struct Timers {
    heap: Mutex<Heap<Arc<TimerEntry>>>,
    when0: AtomicU64,
}

impl Timers {
    pub(crate) fn new() -> Self {
        Timers {
            heap: Mutex::new(Heap::new()),
            when0: AtomicU64::new(NEVER),
        }
    }

    /// Earliest deadline (ns), `NEVER` if none. Lock-free.
    #[inline]
    pub(crate) fn next_when(&self) -> u64 {
        self.when0.load(SeqCst)
    }

    /// Arm a timer. Returns true if it became the earliest of this heap (the
    /// caller then makes sure some M will wake for it).
    pub(crate) fn add(&self, when: u64, entry: Arc<TimerEntry>) -> bool {
        let mut heap = lock(&self.heap);
        let n = heap.len();
        if n >= 1024 && n.is_power_of_two() {
            heap.retain(|e| e.state.load(Acquire) == ARMED);
        }
        heap.push(when, entry);
        let first = heap.peek_when().unwrap_or(NEVER);
        let earliest = first == when && self.when0.load(Relaxed) != when;
        // SeqCst: pairs with the timer sleeper's SeqCst publish-then-read (see
        // machine.rs): either it sees this deadline or we see it sleeping.
        self.when0.store(first, SeqCst);
        earliest
    }

    /// Run every due timer: mark it FIRED and wake its task. Returns how many fired.
    pub(crate) fn run_due(&self, now: u64) -> usize {
        if self.when0.load(Acquire) > now {
            return 0;
        }
        let mut fired = 0;
        loop {
            let entry = {
                let mut heap = lock(&self.heap);
                let e = heap.pop_if_due(now);
                self.when0.store(heap.peek_when().unwrap_or(NEVER), SeqCst);
                match e {
                    Some((_, e)) => e,
                    None => return fired,
                }
            };
            if entry
                .state
                .compare_exchange(ARMED, FIRED, AcqRel, Acquire)
                .is_ok()
            {
                fired += 1;
                let w = lock(&entry.waker).take();
                if let Some(w) = w {
                    w.wake();
                }
            }
        }
    }

    /// Drop every timer (runtime shutdown); their wakers are dropped unfired.
    pub(crate) fn clear(&self) {
        let drained: Vec<_> = lock(&self.heap).drain().collect();
        self.when0.store(NEVER, SeqCst);
        drop(drained);
    }
}

/// Block the calling goroutine (or, outside the runtime, the calling thread) for
/// at least `d`. Only the goroutine parks: its M runs other goroutines meanwhile.
///
/// # Panics
/// When called from inside an async task: use [`sleep_async`]`(d).await` there.
pub fn sleep(d: Duration) {
    if crate::coro::in_goroutine() {
        crate::block_on(sleep_async(d));
    } else if crate::sched::in_async_task() {
        panic!("gosched::time::sleep called from an async task: use gosched::time::sleep_async(d).await");
    } else {
        std::thread::sleep(d);
    }
}

/// A future that completes once `d` has passed, on the runtime's timers.
pub fn sleep_async(d: Duration) -> Sleep {
    sleep_until(Instant::now() + d)
}

/// A future that completes at `deadline`.
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep {
        deadline,
        entry: None,
    }
}

/// Future returned by [`sleep_async`] and [`sleep_until`]. Dropping it stops the
/// timer.
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct Sleep {
    deadline: Instant,
    entry: Option<Arc<TimerEntry>>,
}

impl Sleep {
    /// When this sleep completes.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match &self.entry {
            Some(e) => {
                if e.state.load(Acquire) == FIRED {
                    return Poll::Ready(());
                }
                let mut w = lock(&e.waker);
                // Re-check under the waker lock: the firing M sets FIRED before
                // taking the waker, so either it sees our waker or we see FIRED.
                if e.state.load(Acquire) == FIRED {
                    return Poll::Ready(());
                }
                match &*w {
                    Some(old) if old.will_wake(cx.waker()) => {}
                    _ => *w = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
            None => {
                let when = instant_to_ns(self.deadline);
                if when <= now_ns() {
                    return Poll::Ready(());
                }
                let entry = Arc::new(TimerEntry {
                    state: AtomicU8::new(ARMED),
                    waker: Mutex::new(Some(cx.waker().clone())),
                });
                self.entry = Some(entry.clone());
                crate::sched::add_timer(when, entry);
                Poll::Pending
            }
        }
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(e) = &self.entry {
            if e.state
                .compare_exchange(ARMED, STOPPED, AcqRel, Acquire)
                .is_ok()
            {
                lock(&e.waker).take();
            }
        }
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
    let ch = crate::chan(1);
    let stopped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (tx, stop) = (ch.clone(), stopped.clone());
    crate::spawn(async move {
        let mut next = Instant::now() + period;
        while !stop.load(Acquire) {
            sleep_until(next).await;
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
    stopped: Arc<std::sync::atomic::AtomicBool>,
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
