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
//! A timer entry is shared by the heap and its owner, and has a *target*: a
//! `Waker` (the `Sleep` future) or a closure called by whoever runs the timer
//! (the channel timers of `time`: `tick`, `Timer`, `after_func`, and `after`
//! once a receiver waits on it (`chan::core::ChanTimer`) — heap entries, not
//! tasks; a closure sends on a cap-1 channel or starts a goroutine, and never
//! blocks). Its `state`:
//! - `ARMED → FIRED`: a waker entry run (the waker is taken and called);
//! - `ARMED → RUNNING → FIRED`: a one-shot closure entry run; the runner takes
//!   the closure out under the entry lock and calls it with no lock held (the
//!   closure takes the timer's and the channel's locks, and `stop` is called
//!   under the timer's lock: holding the entry lock across the call would invert
//!   that order);
//! - `ARMED → RUNNING → ARMED`: a periodic entry run; the runner puts the
//!   closure back and re-arms under the entry lock, then pushes the entry again
//!   at `when + period × (1 + lateness / period)` (Go's ticker: a late tick
//!   drops the missed ones, no burst);
//! - `ARMED | RUNNING → STOPPED`: `stop` (the owner dropped it, `Timer::stop`,
//!   the last receiver of an `after` channel went away). The target is dropped
//!   at once — by `stop` if the entry was ARMED, else by the runner when its
//!   re-arm fails — so nothing the closure holds outlives the stop.
//!
//! Removal from the heap is lazy, as Go's: a stopped entry stays in its heap (a
//! *zombie*; 16 bytes of heap slot and the small entry, its target already
//! gone) until it reaches the top and is popped, or the heap is compacted.
//! `stop` counts the zombie in the entry's home heap (`TimerEntry::home`, set
//! when it is added), and whoever pushes the zombie count over a quarter of the
//! heap compacts it at once (Go's `cleantimers`/`adjusttimers` rule), so a
//! million stopped timers never keep a million entries, whatever thread stops
//! them.
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

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{OnceLock, Weak};
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
const RUNNING: u8 = 3;

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

/// The deadline `d` from now on the caller's clock (`clock_now`),
/// saturated at `MAX_WAIT`: every API that takes a duration (sleep,
/// timeouts, select's `after`, Timer) computes it here.
pub(crate) fn deadline_after(d: Duration) -> Instant {
    clock_now() + d.min(MAX_WAIT)
}

/// The `Instant` of `ns` on this clock (models arm timers at model-clock
/// times; a virtual clock's now is one).
pub(crate) fn ns_to_instant(ns: u64) -> Instant {
    epoch() + std::time::Duration::from_nanos(ns)
}

/// Now (ns) on the clock of the calling code's runtime: a virtual-time
/// runtime's own clock (`vtime.rs`), else the real one (also outside every
/// runtime). What a deadline computed here is compared with.
#[inline]
pub(crate) fn clock_ns() -> u64 {
    #[cfg(not(loom))]
    if let Some(ns) = virtual_now() {
        return ns;
    }
    now_ns()
}

/// `clock_ns` as an `Instant` (`time::now`).
#[inline]
pub(crate) fn clock_now() -> Instant {
    #[cfg(not(loom))]
    if let Some(ns) = virtual_now() {
        return ns_to_instant(ns);
    }
    Instant::now()
}

/// The calling code's virtual clock, if it runs in a virtual-time runtime.
#[cfg(not(loom))]
#[inline]
fn virtual_now() -> Option<u64> {
    if !super::vtime::any() {
        return None;
    }
    super::context::with_current_opt(|s| s.virtual_clock.as_ref().map(|vc| vc.now_ns())).flatten()
}

#[cfg(loom)]
impl Shared {
    /// Now on this runtime's timer clock (the model clock).
    pub(crate) fn clock_ns(&self) -> u64 {
        now_ns()
    }
}

/// A timer on a heap: see the protocol above.
pub(crate) struct TimerEntry {
    state: AtomicU8,
    target: Mutex<Target>,
    /// 0: one-shot; else the period in ns (a ticker).
    period: u64,
    /// The target is a closure (`Target::Call`), for good.
    calls: bool,
    /// The heap it was added to, where `stop` counts it as a zombie: a
    /// `Weak<Timers>` as `Weak::into_raw` gives it (null: not added yet).
    /// Set once, by the first `Timers::add` (a periodic entry is re-added to
    /// the same heap); dropped with the entry. (A `OnceLock` here cost its
    /// `Once` state machine at every add: 5% of `time::after`.) A std
    /// atomic: a hint for compaction, outside loom's model.
    home: std::sync::atomic::AtomicPtr<Timers>,
}

/// What a timer does when it fires.
enum Target {
    /// Wake a task (`Sleep`); `None` until its first poll stores the waker, and
    /// after it fired or stopped.
    Wake(Option<Waker>),
    /// Call a closure on the M running the timer. `None` while the runner
    /// calls it, and once dropped (fired one-shot, stopped).
    Call(Option<Box<dyn FnMut() + Send>>),
}

impl fmt::Debug for TimerEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.state.load(Relaxed) {
            ARMED => "armed",
            RUNNING => "running",
            FIRED => "fired",
            _ => "stopped",
        };
        f.debug_struct("TimerEntry")
            .field("state", &state)
            .field("period_ns", &self.period)
            .finish()
    }
}

impl TimerEntry {
    fn with_target(target: Target, period: u64) -> Arc<Self> {
        Arc::new(TimerEntry {
            state: AtomicU8::new(ARMED),
            calls: matches!(target, Target::Call(_)),
            target: Mutex::new(target),
            period,
            home: std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()),
        })
    }

    /// A timer that calls `f` on the M that runs it: once, or every `period`
    /// (saturated at `MAX_WAIT`) until stopped. `f` must not block: it runs
    /// inside the scheduler (send on a channel with room, start a goroutine).
    pub(crate) fn call(f: impl FnMut() + Send + 'static, period: Option<Duration>) -> Arc<Self> {
        let period = period.map_or(0, |p| p.min(MAX_WAIT).as_nanos().max(1) as u64);
        Self::with_target(Target::Call(Some(Box::new(f))), period)
    }

    /// Stop the timer: it will not fire (again), and its waker or closure is
    /// dropped now (a closure being called right now is dropped by its runner
    /// when the call returns). Returns whether it was still armed or running.
    pub(crate) fn stop(&self) -> bool {
        let mut cur = self.state.load(Acquire);
        loop {
            if cur != ARMED && cur != RUNNING {
                return false;
            }
            match self.state.compare_exchange(cur, STOPPED, AcqRel, Acquire) {
                Ok(_) => break,
                Err(now) => cur = now,
            }
        }
        if cur == ARMED {
            // Dropped outside the lock: a closure may hold a channel handle.
            let taken = match &mut *lock(&self.target) {
                Target::Wake(w) => (w.take(), None),
                Target::Call(f) => (None, f.take()),
            };
            drop(taken);
            // Still in its heap: one more zombie there.
            if let Some(home) = self.home_heap() {
                home.zombie_added();
            }
        }
        true
    }
}

impl TimerEntry {
    /// Record `heap` as this entry's home, unless one is recorded already.
    fn set_home(&self, heap: &Arc<Timers>) {
        use std::sync::atomic::Ordering;
        if !self.home.load(Ordering::Acquire).is_null() {
            return;
        }
        let weak = Weak::into_raw(Arc::downgrade(heap)).cast_mut();
        if self
            .home
            .compare_exchange(
                std::ptr::null_mut(),
                weak,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_err()
        {
            // SAFETY: `weak` came from `Weak::into_raw` just above and was
            // not stored: this is its only owner.
            drop(unsafe { Weak::from_raw(weak) });
        }
    }

    /// The heap this entry was added to, if it was and still exists.
    fn home_heap(&self) -> Option<Arc<Timers>> {
        let p = self.home.load(std::sync::atomic::Ordering::Acquire);
        if p.is_null() {
            return None;
        }
        // SAFETY: a non-null `home` is a `Weak` from `Weak::into_raw`, owned
        // by this entry until its drop; `ManuallyDrop` leaves it owned there.
        let weak = std::mem::ManuallyDrop::new(unsafe { Weak::from_raw(p.cast_const()) });
        weak.upgrade()
    }
}

impl Drop for TimerEntry {
    fn drop(&mut self) {
        let p = *self.home.get_mut();
        if !p.is_null() {
            // SAFETY: as in `home_heap`; this is the entry's last use of it.
            drop(unsafe { Weak::from_raw(p.cast_const()) });
        }
    }
}

pub(crate) struct Timers {
    heap: Mutex<Heap<Arc<TimerEntry>>>,
    when0: AtomicU64,
    /// Stopped entries still in the heap, and the heap's length (mirrored under
    /// the lock). Heuristics for when to compact, not synchronisation: std
    /// atomics, outside loom's model. `zombies` may dip below zero for a moment
    /// (an entry popped or compacted before its stopper counted it).
    zombies: std::sync::atomic::AtomicIsize,
    len: std::sync::atomic::AtomicUsize,
}

/// Compact a heap only from this size on (below it, popping zombies at the top
/// is cheap enough).
const COMPACT_MIN: usize = 64;

impl Timers {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Timers {
            heap: Mutex::new(Heap::new()),
            when0: AtomicU64::new(NEVER),
            zombies: std::sync::atomic::AtomicIsize::new(0),
            len: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    /// Timers pending in this heap (stopped ones not counted; a snapshot).
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn pending(&self) -> usize {
        let len = self.len.load(std::sync::atomic::Ordering::Relaxed);
        let zombies = self.zombies.load(std::sync::atomic::Ordering::Relaxed);
        len.saturating_sub(zombies.max(0) as usize)
    }

    /// Earliest deadline (ns), `NEVER` if none. Lock-free.
    #[inline]
    pub(crate) fn next_when(&self) -> u64 {
        self.when0.load(SeqCst)
    }

    fn too_many_zombies(&self, len: usize) -> bool {
        let z = self.zombies.load(Relaxed);
        len >= COMPACT_MIN && z > 0 && z as usize * 4 > len
    }

    /// A stopped entry stays in this heap: count it, and compact once zombies
    /// are over a quarter of the heap (amortised O(1) per stop: each compaction
    /// removes at least a quarter of the entries it scans).
    fn zombie_added(&self) {
        self.zombies.fetch_add(1, Relaxed);
        if self.too_many_zombies(self.len.load(Relaxed)) {
            let mut heap = lock(&self.heap);
            self.compact(&mut heap);
        }
    }

    /// Drop every stopped entry (under the heap lock). The dropped entries'
    /// targets are gone already, so dropping them runs no user code.
    fn compact(&self, heap: &mut Heap<Arc<TimerEntry>>) {
        if !self.too_many_zombies(heap.len()) {
            return; // someone else compacted meanwhile
        }
        let before = heap.len();
        heap.retain(|e| e.state.load(Acquire) != STOPPED);
        self.zombies
            .fetch_sub((before - heap.len()) as isize, Relaxed);
        self.len.store(heap.len(), Relaxed);
        self.when0.store(heap.peek_when().unwrap_or(NEVER), SeqCst);
    }

    /// Arm a timer. Returns true if it became the earliest of this heap (the
    /// caller then makes sure some M will wake for it).
    pub(crate) fn add(self: &Arc<Self>, when: u64, entry: Arc<TimerEntry>) -> bool {
        entry.set_home(self);
        let mut heap = lock(&self.heap);
        heap.push(when, entry);
        self.len.store(heap.len(), Relaxed);
        if self.too_many_zombies(heap.len()) {
            self.compact(&mut heap);
        }
        let first = heap.peek_when().unwrap_or(NEVER);
        let earliest = first == when && self.when0.load(Relaxed) != when;
        // SeqCst: pairs with the timer sleeper's SeqCst publish-then-read (see
        // machine.rs): either it sees this deadline or we see it sleeping.
        self.when0.store(first, SeqCst);
        earliest
    }

    /// Run every due timer (see the protocol). Returns the earliest deadline a
    /// periodic timer was re-armed at, if that made it this heap's earliest:
    /// `Shared::run_due_timers` wakes a timer sleeper sleeping past it.
    pub(crate) fn run_due(self: &Arc<Self>, now: u64) -> Option<u64> {
        if self.when0.load(Acquire) > now {
            return None;
        }
        let mut earliest_rearm: Option<u64> = None;
        loop {
            let (when, entry) = {
                let mut heap = lock(&self.heap);
                let e = heap.pop_if_due(now);
                self.len.store(heap.len(), Relaxed);
                self.when0.store(heap.peek_when().unwrap_or(NEVER), SeqCst);
                match e {
                    Some(e) => e,
                    None => return earliest_rearm,
                }
            };
            if !entry.calls {
                if entry
                    .state
                    .compare_exchange(ARMED, FIRED, AcqRel, Acquire)
                    .is_ok()
                {
                    let w = match &mut *lock(&entry.target) {
                        Target::Wake(w) => w.take(),
                        Target::Call(_) => None,
                    };
                    if let Some(w) = w {
                        super::fault::guarded("a timer fired", || w.wake());
                    }
                } else {
                    self.zombies.fetch_sub(1, Relaxed);
                }
                continue;
            }
            if entry
                .state
                .compare_exchange(ARMED, RUNNING, AcqRel, Acquire)
                .is_err()
            {
                self.zombies.fetch_sub(1, Relaxed);
                continue;
            }
            let f = match &mut *lock(&entry.target) {
                Target::Call(f) => f.take(),
                Target::Wake(_) => None,
            };
            let Some(mut f) = f else { continue };
            // A channel timer's closure wakes the channel's receiver.
            super::fault::guarded("a channel timer fired", &mut f);
            if entry.period == 0 {
                // One-shot: done (a concurrent stop found RUNNING and left the
                // closure to us); dropped here, outside every lock.
                let _ = entry
                    .state
                    .compare_exchange(RUNNING, FIRED, AcqRel, Acquire);
                drop(f);
                continue;
            }
            // Periodic: re-arm unless stopped meanwhile.
            let rearmed = {
                let mut t = lock(&entry.target);
                let ok = entry
                    .state
                    .compare_exchange(RUNNING, ARMED, AcqRel, Acquire)
                    .is_ok();
                if ok {
                    *t = Target::Call(Some(f));
                    None
                } else {
                    Some(f)
                }
            };
            match rearmed {
                None => {
                    let late = now.saturating_sub(when);
                    let next =
                        when.saturating_add(entry.period.saturating_mul(1 + late / entry.period));
                    if self.add(next, entry) {
                        earliest_rearm = Some(earliest_rearm.map_or(next, |r| r.min(next)));
                    }
                }
                Some(f) => drop(f), // stopped while running
            }
        }
    }

    /// Move every pending timer of this heap to `to` (a P dies: only Ms
    /// holding a live P run their own heap, and every such M runs `to`, the
    /// global heap, at each schedule, so a timer left on a dead P would wait
    /// for an idle M that a busy runtime never has). Stopped entries are
    /// dropped instead. The set of deadlines does not change, so no sleeper
    /// needs a wake. A moved entry keeps this heap as its home: a later stop
    /// counts its zombie here (a compaction hint, nothing more).
    pub(crate) fn move_to(&self, to: &Arc<Timers>) {
        let moved: Vec<_> = {
            let mut heap = lock(&self.heap);
            let all = heap.drain().collect();
            self.len.store(0, Relaxed);
            self.zombies.store(0, Relaxed);
            self.when0.store(NEVER, SeqCst);
            all
        };
        for (when, entry) in moved {
            if entry.state.load(Acquire) != STOPPED {
                to.add(when, entry);
            }
        }
    }

    /// Drop every timer (runtime shutdown); their wakers are dropped unfired.
    pub(crate) fn clear(&self) {
        let drained: Vec<_> = lock(&self.heap).drain().collect();
        self.len.store(0, Relaxed);
        self.zombies.store(0, Relaxed);
        self.when0.store(NEVER, SeqCst);
        drop(drained);
    }
}

/// The clock a timer channel's deadline is on (`chan::core::ChanTimer`):
/// the real one, or the virtual clock of the runtime whose code made it.
/// A timer channel goes on a heap only when a receiver parks, and that
/// receiver may be on another runtime or a plain thread: its deadline must
/// still be compared with, and its entry run on, the clock it was made on.
#[cfg(not(loom))]
pub(crate) struct DeadlineClock(Option<Weak<Shared>>);

#[cfg(not(loom))]
impl DeadlineClock {
    /// The calling code's clock (`clock_ns`'s): a virtual-time runtime's,
    /// else the real one. Costs one relaxed load when no virtual runtime
    /// exists in the process.
    pub(crate) fn current() -> Self {
        if !super::vtime::any() {
            return DeadlineClock(None);
        }
        let is_virtual = super::context::with_current_opt(|s| s.virtual_clock.is_some());
        if is_virtual != Some(true) {
            return DeadlineClock(None);
        }
        DeadlineClock(Some(super::context::with_current(Arc::downgrade)))
    }

    /// Whether `when` (ns) has come on this clock. A virtual runtime that is
    /// gone counts as past every deadline: nothing will move its clock any
    /// more, and a receiver waiting on it would wait for ever.
    pub(crate) fn reached(&self, when: u64) -> bool {
        match &self.0 {
            None => now_ns() >= when,
            Some(rt) => rt.upgrade().is_none_or(|s| {
                s.virtual_clock
                    .as_ref()
                    .is_none_or(|vc| vc.now_ns() >= when)
            }),
        }
    }

    /// Put `entry` on a heap that runs on this clock: the calling code's
    /// (real time), or the virtual runtime's global heap, whose timers move
    /// its clock. `false`: that virtual runtime is gone (the deadline has
    /// `reached`).
    pub(crate) fn add(&self, when: u64, entry: Arc<TimerEntry>) -> bool {
        match &self.0 {
            None => {
                add_timer(when, entry);
                true
            }
            Some(rt) => match rt.upgrade() {
                Some(shared) => {
                    if shared.global_timers.add(when, entry) {
                        shared.timer_added(when);
                    }
                    true
                }
                None => false,
            },
        }
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

    /// Run the due timers of `timers` (an M's schedule, a spinning M, the
    /// sleeper). A periodic timer re-armed there at `when`: the running M is
    /// awake and consults the heaps before it parks, so only a timer sleeper
    /// that would sleep past `when` needs a wake.
    pub(crate) fn run_due_timers(&self, timers: &Arc<Timers>, now: u64) {
        let Some(when) = timers.run_due(now) else {
            return;
        };
        let until = self.sleeper_until.load(SeqCst);
        if until != 0 && when < until {
            if let Some(m) = &*lock(&self.sleeper) {
                m.wake();
            }
        }
    }

    /// A timer became some heap's earliest: make sure an M wakes for it (Go's
    /// `wakeNetPoller`).
    pub(crate) fn timer_added(&self, when: u64) {
        match self.sleeper_until.load(SeqCst) {
            0 => self.wakep(),
            until if when < until => {
                if let Some(m) = &*lock(&self.sleeper) {
                    m.wake();
                }
            }
            _ => {}
        }
    }
}

/// A future that completes at `deadline` (at once if it has passed).
///
/// A goroutine waits for it with `gosched::block_on`.
///
/// ```
/// use std::time::Duration;
/// gosched::testing::run_virtual_async(async {
///     let at = gosched::time::now() + Duration::from_secs(60);
///     gosched::time::sleep_until(at).await;
///     assert_eq!(gosched::time::now(), at);
///     gosched::time::sleep_until(at).await; // passed already: at once
///     assert_eq!(gosched::time::now(), at);
/// });
/// ```
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

/// Future returned by `time::sleep_async` and [`sleep_until`]. Dropping it stops the
/// timer.
///
/// ```
/// use std::time::Duration;
/// gosched::testing::run_virtual(|| {
///     let start = gosched::time::now();
///     let sleep = gosched::time::sleep_async(Duration::from_secs(2));
///     gosched::block_on(sleep); // in a goroutine: parks it
///     assert_eq!(gosched::time::since(start), Duration::from_secs(2));
/// });
/// ```
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
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// let at = Instant::now() + Duration::from_secs(1);
    /// assert_eq!(gosched::time::sleep_until(at).deadline(), at);
    /// ```
    pub fn deadline(&self) -> Instant {
        self.deadline
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.entry.is_none() {
            // Not armed yet: a long slice asked to yield yields here.
            std::task::ready!(super::preempt::poll_preempted(cx));
        }
        match &self.entry {
            Some(e) => {
                if e.state.load(Acquire) == FIRED {
                    return Poll::Ready(());
                }
                let mut t = lock(&e.target);
                // Re-check under the target lock: the firing M sets FIRED before
                // taking the waker, so either it sees our waker or we see FIRED.
                if e.state.load(Acquire) == FIRED {
                    return Poll::Ready(());
                }
                if let Target::Wake(w) = &mut *t {
                    match w {
                        Some(old) if old.will_wake(cx.waker()) => {}
                        _ => *w = Some(cx.waker().clone()),
                    }
                }
                crate::sched::wait::pending_unless_noted(crate::sched::wait::WaitReason::Sleep, cx)
            }
            None => {
                let when = instant_to_ns(self.deadline);
                if when <= clock_ns() {
                    if std::mem::take(&mut self.must_park) {
                        // Due already: park once anyway, as a yield (woken by
                        // ourselves, we go to the back of the local queue).
                        cx.waker().wake_by_ref();
                        return crate::sched::wait::pending_unless_noted(
                            crate::sched::wait::WaitReason::Sleep,
                            cx,
                        );
                    }
                    return Poll::Ready(());
                }
                self.must_park = false;
                let entry = TimerEntry::with_target(Target::Wake(Some(cx.waker().clone())), 0);
                self.entry = Some(entry.clone());
                add_timer(when, entry);
                crate::sched::wait::pending_unless_noted(crate::sched::wait::WaitReason::Sleep, cx)
            }
        }
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(e) = &self.entry {
            e.stop();
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! A closure entry stopped while an M runs it: the closure is never started
    //! after `stop` returns, a periodic entry is not re-armed once stopped, and
    //! the closure (which holds a channel handle in `Timer`, and the drop
    //! guard of a timer channel in `time::after`) is dropped
    //! exactly once — by `stop` or by the runner, never by neither.
    use super::*;
    use loom::sync::atomic::AtomicUsize;

    struct CountDrop(std::sync::Arc<AtomicUsize>);
    impl Drop for CountDrop {
        fn drop(&mut self) {
            self.0.fetch_add(1, SeqCst);
        }
    }

    fn stop_races_run(period: Option<Duration>) {
        loom::model(move || {
            let timers = Timers::new();
            let calls = std::sync::Arc::new(AtomicUsize::new(0));
            let drops = std::sync::Arc::new(AtomicUsize::new(0));
            let (c, guard) = (calls.clone(), CountDrop(drops.clone()));
            let entry = TimerEntry::call(
                move || {
                    let _ = &guard;
                    c.fetch_add(1, SeqCst);
                },
                period,
            );
            timers.add(0, entry.clone());
            let t = timers.clone();
            // Due at 0; a period of 1 ns re-arms at 11 > 10: one call at most.
            let runner = loom::thread::spawn(move || t.run_due(10));
            let was_live = entry.stop();
            runner.join().unwrap();
            let state = entry.state.load(SeqCst);
            assert!(calls.load(SeqCst) <= 1);
            assert_eq!(
                drops.load(SeqCst),
                1,
                "the closure must be dropped exactly once"
            );
            match period {
                // Stopped for good, never re-armed.
                Some(_) => assert!(was_live && state == STOPPED),
                // Fired before the stop (which then reports it dead), or stopped.
                None => assert!((state == FIRED && !was_live) || state == STOPPED),
            }
            timers.clear();
        });
    }

    #[test]
    fn one_shot_stop_races_run() {
        stop_races_run(None);
    }

    #[test]
    fn periodic_stop_races_run() {
        stop_races_run(Some(Duration::from_nanos(1)));
    }
}
