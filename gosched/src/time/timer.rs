//! `Timer`: Go's `time.Timer` (`NewTimer`, `AfterFunc`, `Stop`, `Reset`) with the
//! Go 1.23 guarantee: once `stop` or `reset` has returned, no value from an
//! earlier arming is ever received on the timer's channel.
//!
//! # Protocol
//!
//! A timer is an `Inner` shared by the `Timer` and, weakly, by the task of its
//! current arming. `Inner::state` (a small lock) holds:
//! - `gen`: bumped by every arm and disarm;
//! - `deadline`: `Some` while an arming is pending (armed, not yet fired);
//! - `task`: the `JoinHandle` of the pending arming's task.
//!
//! An *arming* (`new`, `after_func`, `reset`) spawns one async task that does
//! `sleep_until(deadline)` on the runtime's timers, then `Inner::fire(gen)`, with
//! the `gen` it was armed with. `fire` takes the lock and acts only if `gen` is
//! still current and the arming still pending: it clears `deadline` and, under
//! the lock, `try_send`s `Instant::now()` on the cap-1 channel (a channel timer)
//! or, after releasing the lock, starts `f` in its own goroutine (`after_func`).
//!
//! A *disarm* (`stop`, `reset`, drop) takes the lock, bumps `gen`, clears
//! `deadline`, aborts the pending task (its `Sleep` is dropped, which stops its
//! timer entry: nothing lingers until the old deadline), and, still under the
//! lock, drains the channel with `try_recv`. Since values are only sent under
//! the lock and only by the arming whose `gen` is current, after a disarm the
//! channel is empty and no older arming can send any more: the Go 1.23
//! guarantee. `reset` disarms and arms in the same critical section.
//!
//! Return values, as in Go 1.23: `stop`/`reset` return `true` if the timer was
//! pending, *or* it had fired but its value had not been received yet (the
//! drain removed it — from the program's point of view the timer had not
//! expired). `false` means the value was received already (or the timer was
//! stopped already). For an `after_func` timer, `true` means `f` was prevented
//! from starting.
//!
//! Aborting is asynchronous (the task is dropped the next time it would run),
//! so a stale task may still reach `fire`; the `gen` check makes it a no-op.
//! The task holds a `Weak` to `Inner`, so there is no cycle, and a dropped
//! `Timer` can never fire.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use super::sleep_until;
use crate::{Chan, JoinHandle};

type Func = Arc<dyn Fn() + Send + Sync + 'static>;

/// A single-shot timer (Go's `time.Timer`): delivers the time on its channel
/// once, after the duration it was armed with, unless stopped or reset first.
///
/// Go 1.23 semantics: after [`stop`](Timer::stop) or [`reset`](Timer::reset)
/// returns, no value from the earlier arming is received. Dropping the timer
/// stops it.
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

struct Inner {
    ch: Chan<Instant>,
    /// `Some` for an `after_func` timer (its channel never receives).
    func: Option<Func>,
    state: Mutex<State>,
}

struct State {
    gen: u64,
    deadline: Option<Instant>,
    task: Option<JoinHandle<()>>,
}

impl Timer {
    /// A timer that sends the current time on its channel once, after `d`
    /// (Go's `time.NewTimer`).
    pub fn new(d: Duration) -> Timer {
        Timer::build(None, d)
    }

    /// A timer that runs `f` in its own goroutine after `d` (Go's
    /// `time.AfterFunc`). [`stop`](Timer::stop) prevents it; after a
    /// [`reset`](Timer::reset) it runs again. Its channel never receives
    /// anything (Go: its `C` is nil).
    #[must_use = "dropping the Timer stops it: `f` would never run"]
    pub fn after_func<F>(d: Duration, f: F) -> Timer
    where
        F: Fn() + Send + Sync + 'static,
    {
        Timer::build(Some(Arc::new(f)), d)
    }

    fn build(func: Option<Func>, d: Duration) -> Timer {
        let inner = Arc::new(Inner {
            ch: crate::chan(1),
            func,
            state: Mutex::new(State {
                gen: 0,
                deadline: None,
                task: None,
            }),
        });
        {
            let mut st = inner.lock();
            inner.arm(&mut st, d);
        }
        Timer { inner }
    }

    /// The channel the time arrives on (usable in `select!`, with `recv`,
    /// `recv_timeout`, `recv_async`).
    pub fn chan(&self) -> &Chan<Instant> {
        &self.inner.ch
    }

    /// Wait for the timer to fire (blocking the goroutine or thread). Blocks
    /// for ever on a stopped timer, as a receive on Go's `t.C` does.
    pub fn recv(&self) -> Option<Instant> {
        self.inner.ch.recv()
    }

    /// Stop the timer. `true` if this call stopped it: it was pending, or it
    /// had fired but its value had not been received (the value is discarded).
    /// `false` if its value was received already or it was stopped already.
    /// After it returns, nothing from the stopped arming is received.
    pub fn stop(&self) -> bool {
        let mut st = self.inner.lock();
        self.inner.disarm(&mut st)
    }

    /// Re-arm the timer to fire after `d` from now, cancelling the current
    /// arming. Returns what [`stop`](Timer::stop) would have returned. After
    /// it returns, only the new arming's value can be received.
    pub fn reset(&self, d: Duration) -> bool {
        let mut st = self.inner.lock();
        let was_active = self.inner.disarm(&mut st);
        self.inner.arm(&mut st, d);
        was_active
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing under this lock panics halfway through an update.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn arm(self: &Arc<Self>, st: &mut State, d: Duration) {
        st.gen = st.gen.wrapping_add(1);
        let gen = st.gen;
        let deadline = crate::sched::timers::deadline_after(d);
        st.deadline = Some(deadline);
        let weak: Weak<Inner> = Arc::downgrade(self);
        st.task = Some(crate::spawn(async move {
            sleep_until(deadline).await;
            if let Some(inner) = weak.upgrade() {
                inner.fire(gen);
            }
        }));
    }

    /// Cancel the pending arming and drain an unreceived value. Returns
    /// whether either was there.
    fn disarm(&self, st: &mut State) -> bool {
        st.gen = st.gen.wrapping_add(1);
        let pending = st.deadline.take().is_some();
        if let Some(task) = st.task.take() {
            task.abort();
        }
        let drained = self.func.is_none() && self.ch.try_recv().is_ok();
        pending || drained
    }

    fn fire(&self, gen: u64) {
        let mut st = self.lock();
        if st.gen != gen || st.deadline.is_none() {
            return; // stopped or reset since this arming
        }
        st.deadline = None;
        // This very task's handle: dropping it detaches.
        st.task = None;
        match &self.func {
            None => {
                // Under the lock: a disarm either precedes this (then `gen`
                // differs) or follows it (then it drains this value). Full
                // cannot happen (drained at every arming); closed: the user
                // closed the channel, nothing to deliver.
                let _ = self.ch.try_send(Instant::now());
            }
            Some(f) => {
                let f = f.clone();
                drop(st);
                crate::go(move || f());
            }
        }
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        self.stop();
    }
}

impl fmt::Debug for Timer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.inner.lock();
        f.debug_struct("Timer")
            .field(
                "kind",
                &if self.inner.func.is_some() {
                    "after_func"
                } else {
                    "chan"
                },
            )
            .field("deadline", &st.deadline)
            .field("generation", &st.gen)
            .field("unreceived", &self.inner.ch.len())
            .finish()
    }
}
