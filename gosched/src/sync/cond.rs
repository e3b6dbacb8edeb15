//! [`Cond`]: Go's `sync.Cond`, used with this module's [`MutexGuard`].
//!
//! # Protocol (no lost wake-up)
//!
//! Go's `notifyList` gives each waiter a ticket *before* it unlocks the mutex, so
//! a `Signal` between the unlock and the park still finds it. Here the waiter
//! goes one step further: it links itself into the FIFO [`WaitList`] (with its
//! waker) before it drops the guard. Any `signal`/`broadcast` that runs after the
//! unlock therefore finds it queued; one that ran before could not concern it
//! (the caller held the mutex then). `signal` notifies the oldest waiter,
//! `broadcast` all of them — the order tickets would give.
//!
//! Cancellation: a queued waiter just unlinks itself; a waiter that was already
//! notified passes the notification on with another `signal`, so a signal is
//! never swallowed by a dropped future (the receiver may be a waiter that arrived
//! later — waiters must re-check their condition in a loop anyway, as in Go).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use super::mutex::{MutexGuard, MutexLockFuture};
use super::waitlist::{Cancelled, Key, WaitList};
use crate::loom::lock;
use crate::loom::sync::Mutex as StdMutex;

/// A condition variable — Go's `sync.Cond`.
///
/// `wait` takes the guard of a locked [`Mutex`](super::Mutex), releases the
/// mutex while parked (the goroutine, or a plain thread; async code uses
/// [`wait_async`](Cond::wait_async)) and locks it again before returning. There
/// are no spurious wake-ups of our own, but as in Go the condition must be
/// re-checked in a loop: another holder may have changed it before the mutex was
/// re-acquired.
///
/// ```
/// use std::sync::Arc;
/// use gosched::sync::{Cond, Mutex};
/// let pair = Arc::new((Mutex::new(false), Cond::new()));
/// let p = pair.clone();
/// let h = gosched::go(move || {
///     *p.0.lock() = true;
///     p.1.signal();
/// });
/// let mut ready = pair.0.lock();
/// while !*ready {
///     ready = pair.1.wait(ready);
/// }
/// drop(ready);
/// h.join().unwrap();
/// ```
pub struct Cond {
    waiters: StdMutex<WaitList<()>>,
}

/// Future of [`Cond::wait_async`]: resolves to the re-locked guard. Cancel-safe
/// (see the module docs); dropping it after the mutex was released does not give
/// the guard back.
///
/// ```
/// use std::time::Duration;
/// use gosched::sync::{Cond, Mutex};
/// gosched::testing::run_virtual_async(async {
///     let (m, c) = (Mutex::new(false), Cond::new());
///     let guard = m.lock_async().await;
///     // Nobody signals: give up after a second. The mutex was released
///     // while waiting, and the guard is not given back.
///     let r = gosched::time::timeout(Duration::from_secs(1), c.wait_async(guard)).await;
///     assert!(r.is_err());
///     assert!(!m.is_locked());
/// });
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct CondWaitFuture<'c, 'a, T: ?Sized> {
    cond: &'c Cond,
    state: WaitState<'a, T>,
}

enum WaitState<'a, T: ?Sized> {
    /// Not polled yet: still holding the mutex.
    Start(MutexGuard<'a, T>),
    /// Queued, mutex released.
    Waiting(&'a super::Mutex<T>, Key),
    /// Notified: re-locking.
    Relock(MutexLockFuture<'a, T>),
    Done,
}

impl Cond {
    /// A condition variable with no waiters. `const`, so it can initialise a
    /// `static`.
    ///
    /// ```
    /// use gosched::sync::{Cond, Mutex};
    /// static QUEUE: Mutex<Vec<u32>> = Mutex::new(Vec::new());
    /// static NOT_EMPTY: Cond = Cond::new();
    /// QUEUE.lock().push(1);
    /// NOT_EMPTY.signal(); // nobody waits: a no-op
    /// assert_eq!(QUEUE.lock().pop(), Some(1));
    /// ```
    pub const fn new() -> Self {
        Cond {
            waiters: StdMutex::new(WaitList::new()),
        }
    }

    /// Release the mutex of `guard`, park until signalled, lock it again.
    ///
    /// # Panics
    /// Inside an async task: use [`wait_async`](Self::wait_async).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use gosched::sync::{Cond, Mutex};
    /// let state = Arc::new((Mutex::new(Vec::new()), Cond::new()));
    /// let s = state.clone();
    /// gosched::go(move || {
    ///     s.0.lock().push("job");
    ///     s.1.signal();
    /// });
    /// let mut queue = state.0.lock();
    /// while queue.is_empty() {
    ///     queue = state.1.wait(queue); // unlocked while parked
    /// }
    /// assert_eq!(queue.pop(), Some("job"));
    /// ```
    pub fn wait<'a, T: ?Sized>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        crate::block_on(self.wait_async(guard))
    }

    /// `wait` for async code.
    ///
    /// ```
    /// # gosched::Runtime::new().unwrap().block_on(async {
    /// use std::sync::Arc;
    /// use gosched::sync::{Cond, Mutex};
    /// let pair = Arc::new((Mutex::new(0), Cond::new()));
    /// let p = pair.clone();
    /// gosched::spawn(async move {
    ///     *p.0.lock_async().await = 42;
    ///     p.1.signal();
    /// });
    /// let mut n = pair.0.lock_async().await;
    /// while *n == 0 {
    ///     n = pair.1.wait_async(n).await;
    /// }
    /// assert_eq!(*n, 42);
    /// # });
    /// ```
    pub fn wait_async<'c, 'a, T: ?Sized>(
        &'c self,
        guard: MutexGuard<'a, T>,
    ) -> CondWaitFuture<'c, 'a, T> {
        CondWaitFuture {
            cond: self,
            state: WaitState::Start(guard),
        }
    }

    /// Wake the longest-waiting waiter, if any. Holding the mutex is allowed, not
    /// required. A signal with no waiter is not remembered: waiters check their
    /// condition before they wait.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use gosched::sync::{Cond, Mutex};
    /// let pair = Arc::new((Mutex::new(None), Cond::new()));
    /// let p = pair.clone();
    /// let h = gosched::go(move || {
    ///     let mut slot = p.0.lock();
    ///     while slot.is_none() {
    ///         slot = p.1.wait(slot);
    ///     }
    ///     slot.take().unwrap()
    /// });
    /// *pair.0.lock() = Some(7);
    /// pair.1.signal();
    /// assert_eq!(h.join().unwrap(), 7);
    /// ```
    pub fn signal(&self) {
        let w = lock(&self.waiters).notify_front();
        if let Some(w) = w {
            w.wake();
        }
    }

    /// Wake every waiter.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use gosched::sync::{Cond, Mutex};
    /// let gate = Arc::new((Mutex::new(false), Cond::new()));
    /// let pass = |g: Arc<(Mutex<bool>, Cond)>| {
    ///     let mut open = g.0.lock();
    ///     while !*open {
    ///         open = g.1.wait(open);
    ///     }
    /// };
    /// let hs: Vec<_> = (0..3)
    ///     .map(|_| gate.clone())
    ///     .map(|g| gosched::go(move || pass(g)))
    ///     .collect();
    /// *gate.0.lock() = true;
    /// gate.1.broadcast(); // wakes all of them, not just the first
    /// assert!(hs.into_iter().all(|h| h.join().is_ok()));
    /// ```
    pub fn broadcast(&self) {
        let wakers = lock(&self.waiters).notify_all();
        wakers.into_iter().for_each(Waker::wake);
    }
}

impl Default for Cond {
    fn default() -> Self {
        Cond::new()
    }
}

impl fmt::Debug for Cond {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cond")
            .field("waiters", &lock(&self.waiters).len())
            .finish()
    }
}

impl<'a, T: ?Sized> Future for CondWaitFuture<'_, 'a, T> {
    type Output = MutexGuard<'a, T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        loop {
            match std::mem::replace(&mut this.state, WaitState::Done) {
                WaitState::Start(guard) => {
                    let mutex = MutexGuard::mutex(&guard);
                    // Queue first, then unlock: no signal can slip in between.
                    let key = lock(&this.cond.waiters).push_back((), cx.waker());
                    this.state = WaitState::Waiting(mutex, key);
                    drop(guard);
                    return crate::sched::wait::pending(crate::sched::wait::WaitReason::Cond, cx);
                }
                WaitState::Waiting(mutex, key) => {
                    let notified = lock(&this.cond.waiters).poll(key, cx.waker()).is_some();
                    if !notified {
                        this.state = WaitState::Waiting(mutex, key);
                        return crate::sched::wait::pending(
                            crate::sched::wait::WaitReason::Cond,
                            cx,
                        );
                    }
                    this.state = WaitState::Relock(mutex.lock_async());
                }
                WaitState::Relock(mut fut) => match Pin::new(&mut fut).poll(cx) {
                    Poll::Ready(guard) => return Poll::Ready(guard),
                    Poll::Pending => {
                        this.state = WaitState::Relock(fut);
                        return crate::sched::wait::pending(
                            crate::sched::wait::WaitReason::Cond,
                            cx,
                        );
                    }
                },
                WaitState::Done => panic!("CondWaitFuture polled after completion"),
            }
        }
    }
}

impl<T: ?Sized> Drop for CondWaitFuture<'_, '_, T> {
    fn drop(&mut self) {
        if let WaitState::Waiting(_, key) = self.state {
            let c = lock(&self.cond.waiters).cancel(key);
            if let Cancelled::Notified(()) = c {
                // Do not swallow the signal meant for us.
                self.cond.signal();
            }
        }
    }
}

impl<T: ?Sized> fmt::Debug for CondWaitFuture<'_, '_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.state {
            WaitState::Start(_) => "start",
            WaitState::Waiting(..) => "waiting",
            WaitState::Relock(_) => "relocking",
            WaitState::Done => "done",
        };
        f.debug_struct("CondWaitFuture")
            .field("state", &state)
            .finish_non_exhaustive()
    }
}
