//! `Timer` and `Ticker`: Go's `time.Timer` (`NewTimer`, `AfterFunc`, `Stop`,
//! `Reset`) and `time.Ticker` (`NewTicker`, `Stop`, `Reset`), with the Go 1.23
//! guarantee: once `stop` or `reset` has returned, no value from an earlier
//! arming is ever received on the channel.
//!
//! # Protocol
//!
//! A timer is an `Inner` shared by the `Timer`/`Ticker` and, weakly, by the
//! heap entry of its current arming. `Inner::state` (a small lock) holds:
//! - `gen`: bumped by every arm and disarm;
//! - `deadline`: `Some` while an arming is pending (a one-shot armed and not
//!   yet fired; a ticker for as long as it runs);
//! - `entry`: the timer-heap entry of the pending arming (`sched/timers`).
//!
//! An *arming* (`new`, `after_func`, `reset`) adds one entry to the runtime's
//! timer heap — no task — whose closure calls `Inner::fire(gen)` with the `gen`
//! it was armed with (every `period` for a ticker). `fire` takes the lock and
//! acts only if `gen` is still current and the arming still pending: a
//! one-shot clears `deadline`; then, under the lock, it `try_send`s
//! `Instant::now()` on the cap-1 channel (a full channel drops the tick: a
//! ticker's slow receiver misses ticks) or, after releasing the lock, starts
//! `f` in its own goroutine (`after_func`).
//!
//! A *disarm* (`stop`, `reset`, drop) takes the lock, bumps `gen`, clears
//! `deadline`, stops the entry (its closure and everything it holds are
//! dropped at once: nothing lingers until the old deadline), and, still under
//! the lock, drains the channel with `try_recv`. Values are only sent under the
//! lock and only by the arming whose `gen` is current, so after a disarm the
//! channel is empty and no older arming can send any more: the Go 1.23
//! guarantee. `reset` disarms and arms in the same critical section.
//!
//! Lock order: `Inner::state`, then the entry's lock (`stop`); the timer
//! runner calls the closure with no timer lock held, so `fire` taking
//! `Inner::state` cannot invert it.
//!
//! Return values, as in Go 1.23: `stop`/`reset` return `true` if the timer was
//! pending, *or* it had fired but its value had not been received yet (the
//! drain removed it — from the program's point of view the timer had not
//! expired). `false` means the value was received already (or the timer was
//! stopped already). For an `after_func` timer, `true` means `f` was prevented
//! from starting.
//!
//! A stop races a runner that has already taken the closure out: the stale
//! call reaches `fire`, and the `gen` check makes it a no-op. The entry holds
//! a `Weak` to `Inner`, so there is no cycle, and a dropped timer never fires.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use crate::sched::timers::{
    add_timer, clock_now, deadline_after, instant_to_ns, TimerEntry, MAX_WAIT,
};
use crate::Chan;

type Func = Arc<dyn Fn() + Send + Sync + 'static>;

/// A single-shot timer (Go's `time.Timer`): delivers the time on its channel
/// once, after the duration it was armed with, unless stopped or reset first.
///
/// Go 1.23 semantics: after [`stop`](Timer::stop) or [`reset`](Timer::reset)
/// returns, no value from the earlier arming is received. Dropping the timer
/// stops it. A pending timer is an entry of the runtime's timer heap, not a
/// task (it does not count in `num_goroutine`).
///
/// ```
/// use std::time::Duration;
/// let t = gosched::time::Timer::new(Duration::from_millis(5));
/// let fired_at = t.recv().unwrap();
/// assert!(!t.stop(), "already fired and received");
/// assert!(!t.reset(Duration::from_secs(60)) && t.stop());
/// # let _ = fired_at;
/// ```
pub struct Timer {
    inner: Arc<Inner>,
}

/// A periodic timer (Go's `time.Ticker`, from [`tick`](super::tick) or
/// [`Ticker::new`]): delivers the time on its channel every period. A tick
/// the receiver is not ready for is dropped (the channel holds one), and a
/// late tick is not followed by a burst of catch-up ticks. Dropping the
/// ticker stops it; after [`stop`](Ticker::stop) or
/// [`reset`](Ticker::reset) returns, no tick of the earlier period is
/// received.
///
/// ```
/// use std::time::Duration;
/// gosched::testing::run_virtual(|| {
///     let start = gosched::time::now();
///     let ticker = gosched::time::Ticker::new(Duration::from_secs(10));
///     assert_eq!(ticker.recv().unwrap() - start, Duration::from_secs(10));
///     ticker.stop();
///     assert!(ticker.chan().recv_timeout(Duration::from_secs(60)).is_err());
/// });
/// ```
pub struct Ticker {
    inner: Arc<Inner>,
}

struct Inner {
    ch: Chan<Instant>,
    /// `Some` for an `after_func` timer (its channel never receives).
    func: Option<Func>,
    state: Mutex<State>,
}

struct State {
    gen: u64,
    deadline: Option<Instant>,
    /// The period of a ticker's current arming (`None`: one-shot).
    period: Option<Duration>,
    entry: Option<Arc<TimerEntry>>,
}

impl Timer {
    /// A timer that sends the current time on its channel once, after `d`
    /// (Go's `time.NewTimer`).
    ///
    /// ```
    /// use std::time::Duration;
    /// gosched::testing::run_virtual(|| {
    ///     let start = gosched::time::now();
    ///     let t = gosched::time::Timer::new(Duration::from_secs(30));
    ///     assert_eq!(t.recv().unwrap() - start, Duration::from_secs(30));
    /// });
    /// ```
    pub fn new(d: Duration) -> Timer {
        Timer {
            inner: Inner::armed(None, d, None),
        }
    }

    /// A timer that runs `f` in its own goroutine after `d` (Go's
    /// `time.AfterFunc`). [`stop`](Timer::stop) prevents it; after a
    /// [`reset`](Timer::reset) it runs again. Its channel never receives
    /// anything (Go: its `C` is nil).
    ///
    /// ```
    /// use std::sync::{atomic::AtomicBool, atomic::Ordering::SeqCst, Arc};
    /// use std::time::Duration;
    /// gosched::testing::run_virtual(|| {
    ///     let start = gosched::time::now();
    ///     let done = gosched::chan::<std::time::Instant>(1);
    ///     let tx = done.clone();
    ///     let _t = gosched::time::Timer::after_func(Duration::from_secs(5), move || {
    ///         let _ = tx.try_send(gosched::time::now());
    ///     });
    ///     assert_eq!(done.recv().unwrap() - start, Duration::from_secs(5));
    ///     // Stopped in time, it never runs.
    ///     let ran = Arc::new(AtomicBool::new(false));
    ///     let r = ran.clone();
    ///     let never = gosched::time::Timer::after_func(Duration::from_secs(5), move || {
    ///         r.store(true, SeqCst);
    ///     });
    ///     assert!(never.stop());
    ///     gosched::time::sleep(Duration::from_secs(10));
    ///     assert!(!ran.load(SeqCst));
    /// });
    /// ```
    #[must_use = "dropping the Timer stops it: `f` would never run"]
    pub fn after_func<F>(d: Duration, f: F) -> Timer
    where
        F: Fn() + Send + Sync + 'static,
    {
        Timer {
            inner: Inner::armed(Some(Arc::new(f)), d, None),
        }
    }

    /// The channel the time arrives on (usable in `select!`, with `recv`,
    /// `recv_timeout`, `recv_async`).
    ///
    /// ```
    /// use std::time::Duration;
    /// gosched::testing::run_virtual(|| {
    ///     let t = gosched::time::Timer::new(Duration::from_secs(2));
    ///     let work = gosched::chan::<u32>(0);
    ///     let timed_out = gosched::select! {
    ///         recv(work) -> _ => false,
    ///         recv(t.chan()) -> _ => true,
    ///     };
    ///     assert!(timed_out);
    /// });
    /// ```
    pub fn chan(&self) -> &Chan<Instant> {
        &self.inner.ch
    }

    /// Wait for the timer to fire (blocking the goroutine or thread). Blocks
    /// for ever on a stopped timer, as a receive on Go's `t.C` does.
    ///
    /// ```
    /// use std::time::Duration;
    /// gosched::testing::run_virtual(|| {
    ///     let t = gosched::time::Timer::new(Duration::from_millis(1500));
    ///     let fired = t.recv().unwrap();
    ///     assert_eq!(fired, gosched::time::now()); // sent when it fired, just now
    /// });
    /// ```
    pub fn recv(&self) -> Option<Instant> {
        self.inner.ch.recv()
    }

    /// Stop the timer. `true` if this call stopped it: it was pending, or it
    /// had fired but its value had not been received (the value is discarded).
    /// `false` if its value was received already or it was stopped already.
    /// After it returns, nothing from the stopped arming is received.
    ///
    /// ```
    /// use std::time::Duration;
    /// gosched::testing::run_virtual(|| {
    ///     let t = gosched::time::Timer::new(Duration::from_secs(1));
    ///     assert!(t.stop()); // it was pending
    ///     assert!(!t.stop()); // stopped already
    ///     gosched::time::sleep(Duration::from_secs(2));
    ///     assert!(t.chan().try_recv().is_err()); // it never fired
    /// });
    /// ```
    pub fn stop(&self) -> bool {
        let mut st = self.inner.lock();
        self.inner.disarm(&mut st)
    }

    /// Re-arm the timer to fire after `d` from now, cancelling the current
    /// arming. Returns what [`stop`](Timer::stop) would have returned. After
    /// it returns, only the new arming's value can be received.
    ///
    /// ```
    /// use std::time::Duration;
    /// gosched::testing::run_virtual(|| {
    ///     let start = gosched::time::now();
    ///     let t = gosched::time::Timer::new(Duration::from_secs(3600));
    ///     assert!(t.reset(Duration::from_secs(1))); // it was pending
    ///     assert_eq!(t.recv().unwrap() - start, Duration::from_secs(1));
    ///     assert!(!t.reset(Duration::from_secs(1))); // fired and received already
    ///     assert_eq!(t.recv().unwrap() - start, Duration::from_secs(2));
    /// });
    /// ```
    pub fn reset(&self, d: Duration) -> bool {
        let mut st = self.inner.lock();
        let was_active = self.inner.disarm(&mut st);
        self.inner.arm(&mut st, d, None);
        was_active
    }
}

impl Ticker {
    /// A ticker that sends the current time every `period` (Go's
    /// `time.NewTicker`). Huge periods saturate at 100 years.
    ///
    /// # Panics
    /// If `period` is zero (Go panics too).
    ///
    /// ```
    /// use std::time::Duration;
    /// gosched::testing::run_virtual(|| {
    ///     let start = gosched::time::now();
    ///     let ticker = gosched::time::Ticker::new(Duration::from_millis(250));
    ///     ticker.recv();
    ///     let second = ticker.recv().unwrap();
    ///     assert_eq!(second - start, Duration::from_millis(500));
    /// });
    /// ```
    pub fn new(period: Duration) -> Ticker {
        assert!(
            !period.is_zero(),
            "gosched::time::tick: period must be non-zero"
        );
        Ticker {
            inner: Inner::armed(None, period, Some(period)),
        }
    }

    /// The channel the ticks arrive on (usable in `select!`).
    ///
    /// ```
    /// use std::time::Duration;
    /// gosched::testing::run_virtual(|| {
    ///     let ticker = gosched::time::tick(Duration::from_secs(1));
    ///     let quit = gosched::time::after(Duration::from_millis(3500));
    ///     let mut ticks = 0;
    ///     loop {
    ///         gosched::select! {
    ///             recv(ticker.chan()) -> _ => ticks += 1,
    ///             recv(quit) -> _ => break,
    ///         }
    ///     }
    ///     assert_eq!(ticks, 3);
    /// });
    /// ```
    pub fn chan(&self) -> &Chan<Instant> {
        &self.inner.ch
    }

    /// Wait for the next tick (blocking the goroutine or thread). Blocks for
    /// ever on a stopped ticker.
    ///
    /// ```
    /// use std::time::Duration;
    /// gosched::testing::run_virtual(|| {
    ///     let ticker = gosched::time::tick(Duration::from_secs(1));
    ///     let (a, b) = (ticker.recv().unwrap(), ticker.recv().unwrap());
    ///     assert_eq!(b - a, Duration::from_secs(1));
    /// });
    /// ```
    pub fn recv(&self) -> Option<Instant> {
        self.inner.ch.recv()
    }

    /// Stop ticking. After it returns, no tick is received (an unreceived
    /// one is discarded) until a [`reset`](Ticker::reset).
    ///
    /// ```
    /// use std::time::Duration;
    /// gosched::testing::run_virtual(|| {
    ///     let ticker = gosched::time::tick(Duration::from_secs(1));
    ///     gosched::time::sleep(Duration::from_secs(2)); // a tick waits unreceived
    ///     ticker.stop(); // and is discarded
    ///     assert!(ticker.chan().recv_timeout(Duration::from_secs(5)).is_err());
    /// });
    /// ```
    pub fn stop(&self) {
        let mut st = self.inner.lock();
        self.inner.disarm(&mut st);
    }

    /// Tick every `period` from now on (Go's `Ticker.Reset`); a stopped
    /// ticker starts again. After it returns, only ticks of the new period
    /// are received.
    ///
    /// # Panics
    /// If `period` is zero.
    ///
    /// ```
    /// use std::time::Duration;
    /// gosched::testing::run_virtual(|| {
    ///     let ticker = gosched::time::tick(Duration::from_secs(1));
    ///     ticker.stop();
    ///     let start = gosched::time::now();
    ///     ticker.reset(Duration::from_secs(5)); // starts again, every 5 s
    ///     assert_eq!(ticker.recv().unwrap() - start, Duration::from_secs(5));
    ///     assert_eq!(ticker.recv().unwrap() - start, Duration::from_secs(10));
    /// });
    /// ```
    pub fn reset(&self, period: Duration) {
        assert!(
            !period.is_zero(),
            "gosched::time::Ticker::reset: period must be non-zero"
        );
        let mut st = self.inner.lock();
        self.inner.disarm(&mut st);
        self.inner.arm(&mut st, period, Some(period));
    }
}

impl Inner {
    fn armed(func: Option<Func>, d: Duration, period: Option<Duration>) -> Arc<Inner> {
        let inner = Arc::new(Inner {
            ch: crate::chan(1),
            func,
            state: Mutex::new(State {
                gen: 0,
                deadline: None,
                period: None,
                entry: None,
            }),
        });
        {
            let mut st = inner.lock();
            inner.arm(&mut st, d, period);
        }
        inner
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing under this lock panics halfway through an update.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn arm(self: &Arc<Self>, st: &mut State, d: Duration, period: Option<Duration>) {
        st.gen = st.gen.wrapping_add(1);
        let gen = st.gen;
        let deadline = deadline_after(d);
        st.deadline = Some(deadline);
        st.period = period.map(|p| p.min(MAX_WAIT));
        let weak: Weak<Inner> = Arc::downgrade(self);
        let entry = TimerEntry::call(
            move || {
                if let Some(inner) = weak.upgrade() {
                    inner.fire(gen);
                }
            },
            period,
        );
        st.entry = Some(entry.clone());
        add_timer(instant_to_ns(deadline), entry);
    }

    /// Cancel the pending arming and drain an unreceived value. Returns
    /// whether either was there.
    fn disarm(&self, st: &mut State) -> bool {
        st.gen = st.gen.wrapping_add(1);
        let pending = st.deadline.take().is_some();
        if let Some(entry) = st.entry.take() {
            entry.stop();
        }
        let drained = self.func.is_none() && self.ch.try_recv().is_ok();
        pending || drained
    }

    /// Called by the timer heap's runner (see the protocol).
    fn fire(&self, gen: u64) {
        let mut st = self.lock();
        if st.gen != gen || st.deadline.is_none() {
            return; // stopped or reset since this arming
        }
        if let Some(period) = st.period {
            // A ticker stays pending; `deadline` tracks its next tick.
            st.deadline = Some(deadline_after(period));
        } else {
            st.deadline = None;
            st.entry = None;
        }
        match &self.func {
            None => {
                // Under the lock: a disarm either precedes this (then `gen`
                // differs) or follows it (then it drains this value). Full:
                // a tick the receiver has not taken yet (the new one is
                // dropped, as Go's ticker drops it); closed: the user closed
                // the channel, nothing to deliver.
                let _ = self.ch.try_send(clock_now());
            }
            Some(f) => {
                let f = f.clone();
                drop(st);
                crate::go(move || f());
            }
        }
    }

    fn debug(&self, f: &mut fmt::Formatter<'_>, name: &str) -> fmt::Result {
        let st = self.lock();
        let kind = match (&self.func, st.period) {
            (Some(_), _) => "after_func",
            (None, Some(_)) => "ticker",
            (None, None) => "chan",
        };
        f.debug_struct(name)
            .field("kind", &kind)
            .field("deadline", &st.deadline)
            .field("period", &st.period)
            .field("generation", &st.gen)
            .field("unreceived", &self.ch.len())
            .finish()
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop();
    }
}

impl fmt::Debug for Timer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.debug(f, "Timer")
    }
}

impl fmt::Debug for Ticker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.debug(f, "Ticker")
    }
}
