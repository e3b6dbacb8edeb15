//! Timer mechanism: per-P timer heaps, the monotonic clock, and the `Sleep`
//! future armed on them. (Their public face is the top-level `time` module.)
//!
//! # Protocol
//!
//! Each Processor owns a `Timers`: a 4-ary heap (`heap.rs`) under a small lock
//! (other Ms take it to run this P's due timers when it is idle or busy) and
//! `when0`, the earliest deadline, readable without the lock (`NEVER`: none).
//! A P-less caller (a plain thread inside `Runtime::block_on`, or an M whose P was
//! retaken) uses the runtime's global `Timers` (`Shared::global_timers`).
//!
//! A timer entry is shared by the heap and the `Sleep` future that armed it:
//! `ARMED → FIRED` (by whoever runs it, then the waker is called) or
//! `ARMED → STOPPED` (the `Sleep` was dropped; the heap discards it lazily when it
//! reaches the top, and compacts when stopped entries pile up).
//!
//! Who runs timers: the M holding the P, at the top of `find_runnable`; spinning
//! Ms, for every P, in the last steal round; and the one M that parks with a
//! timeout (the "timer sleeper", see `machine.rs`), which sleeps exactly until
//! the earliest deadline over all Ps — never a fixed tick. When a new timer
//! becomes some heap's earliest, the sleeper is woken if it would sleep past it,
//! or, if no M sleeps on timers, `wakep` starts one (Go's `wakeNetPoller`):
//! `Shared::timer_added`, below.
//!
//! A sleeping goroutine or task is readied like any wake-up: into the running P's
//! `runnext`.

mod heap;

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use super::context::with_current_and_p;
use super::Shared;
use crate::loom::lock;
use crate::loom::sync::atomic::{AtomicU64, AtomicU8, Ordering::*};
use crate::loom::sync::Mutex;
use heap::Heap;
use std::sync::Arc;

/// No timer pending.
pub(crate) const NEVER: u64 = u64::MAX;

const ARMED: u8 = 0;
const FIRED: u8 = 1;
const STOPPED: u8 = 2;

static EPOCH: OnceLock<Instant> = OnceLock::new();

fn epoch() -> Instant {
    *EPOCH.get_or_init(Instant::now)
}

/// Monotonic nanoseconds since the process's timer epoch (under loom, the
/// model clock: see `crate::loom`).
pub(crate) fn now_ns() -> u64 {
    #[cfg(not(loom))]
    return instant_to_ns(Instant::now());
    #[cfg(loom)]
    return crate::loom::clock::now_ns();
}

pub(crate) fn instant_to_ns(t: Instant) -> u64 {
    t.saturating_duration_since(epoch()).as_nanos() as u64
}

/// The longest wait a deadline stands for (100 years). Longer durations —
/// `Duration::MAX` is Rust's idiom for "no timeout" — saturate to it, so that
/// `now + d` never overflows (Go saturates its maximum duration too) and the
/// deadline stays far inside the nanosecond clock's range (~584 years).
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// The deadline `d` from now, saturated at `MAX_WAIT`: every API that takes a
/// duration (sleep, timeouts, select's `after`, Timer) computes it here.
pub(crate) fn deadline_after(d: Duration) -> Instant {
    Instant::now() + d.min(MAX_WAIT)
}

/// The `Instant` of `ns` on this clock (models arm timers at model-clock times).
#[cfg(loom)]
pub(crate) fn ns_to_instant(ns: u64) -> Instant {
    epoch() + std::time::Duration::from_nanos(ns)
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

/// Arm a timer on the current P (or the global heap when P-less).
pub(crate) fn add_timer(when: u64, entry: Arc<TimerEntry>) {
    with_current_and_p(|shared, p| {
        let earliest = match p {
            Some(p) => p.timers.add(when, entry),
            None => shared.global_timers.add(when, entry),
        };
        if earliest {
            shared.timer_added(when);
        }
    })
}

impl Shared {
    /// Earliest timer over every P and the global heap.
    pub(crate) fn next_timer(&self) -> u64 {
        self.procs
            .iter()
            .map(|p| p.timers.next_when())
            .fold(self.global_timers.next_when(), u64::min)
    }

    /// A timer became some heap's earliest: make sure an M wakes for it (Go's
    /// `wakeNetPoller`).
    pub(crate) fn timer_added(&self, when: u64) {
        match self.sleeper_until.load(SeqCst) {
            0 => self.wakep(),
            until if when < until => {
                if let Some(m) = &*lock(&self.sleeper) {
                    m.parker.wake();
                }
            }
            _ => {}
        }
    }
}

/// A future that completes at `deadline` (at once if it has passed).
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep {
        deadline,
        entry: None,
        must_park: false,
    }
}

/// Like `sleep_until`, but returns `Pending` at least once even if `deadline`
/// has passed by its first poll: a sleep of `d > 0` always parks, as Go's
/// `time.Sleep` does (a G woken by itself goes to the back of its P's queue),
/// so `loop { sleep(1 ns) }` and a ticker faster than its consumer let the rest
/// of their P run.
pub(crate) fn park_until(deadline: Instant) -> Sleep {
    Sleep {
        deadline,
        entry: None,
        must_park: true,
    }
}

/// Future returned by [`sleep_async`] and [`sleep_until`]. Dropping it stops the
/// timer.
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct Sleep {
    deadline: Instant,
    entry: Option<Arc<TimerEntry>>,
    /// Return `Pending` once even if the deadline has passed (`park_until`).
    must_park: bool,
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
                    if std::mem::take(&mut self.must_park) {
                        // Due already: park once anyway, as a yield (woken by
                        // ourselves, we go to the back of the local queue).
                        cx.waker().wake_by_ref();
                        return Poll::Pending;
                    }
                    return Poll::Ready(());
                }
                self.must_park = false;
                let entry = Arc::new(TimerEntry {
                    state: AtomicU8::new(ARMED),
                    waker: Mutex::new(Some(cx.waker().clone())),
                });
                self.entry = Some(entry.clone());
                add_timer(when, entry);
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
