//! [`Semaphore`]: a weighted semaphore, like `golang.org/x/sync/semaphore`.
//!
//! # Protocol
//!
//! One small lock around `cur` (permits held) and a FIFO [`WaitList`] of
//! waiters, each with the weight it asks for. A request succeeds at once only if
//! it fits *and nobody is queued*; otherwise it queues at the tail. `release`
//! (and anything else that frees permits) grants permits from the head while the
//! head fits, adding its weight to `cur` *for it* before notifying it — so a
//! notified waiter already holds its permits — and stops at the first waiter that
//! does not fit: a big waiter at the head is never overtaken by small ones.
//!
//! Cancellation (x/sync's `Acquire` with a cancelled context): a queued waiter
//! unlinks itself and re-runs the grant loop (if it was at the head, the ones
//! behind it may fit now); a waiter that was already granted gives its permits
//! back the same way. Permits are never lost or leaked.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use super::waitlist::{Cancelled, Key, WaitList};
use crate::loom::lock;
use crate::loom::sync::Mutex;

struct State {
    /// Permits held.
    cur: usize,
    /// Queued acquirers and their weights.
    waiters: WaitList<usize>,
}

impl State {
    /// Grant permits to the head waiters that fit; returns their wakers.
    fn grant(&mut self, size: usize) -> Vec<Waker> {
        let mut wakers = Vec::new();
        while let Some(&n) = self.waiters.front() {
            if size - self.cur < n {
                break;
            }
            self.cur += n;
            wakers.extend(self.waiters.notify_front());
        }
        wakers
    }
}

/// A weighted, FIFO semaphore — `golang.org/x/sync/semaphore.Weighted`.
///
/// `acquire(n)` parks the goroutine (or plain thread) until `n` permits are
/// free and every earlier waiter has been served; async code uses
/// [`acquire_async`](Semaphore::acquire_async). [`acquire_permit`](Semaphore::acquire_permit)
/// returns an RAII [`SemaphorePermit`] that releases on drop.
///
/// ```
/// let sem = gosched::sync::Semaphore::new(3);
/// sem.acquire(2);
/// assert!(!sem.try_acquire(2));
/// {
///     let _p = sem.acquire_permit(1);
///     assert_eq!(sem.available(), 0);
/// }
/// sem.release(2);
/// assert_eq!(sem.available(), 3);
/// ```
pub struct Semaphore {
    size: usize,
    state: Mutex<State>,
}

/// Future of [`Semaphore::acquire_async`]; cancel-safe.
///
/// Waiters are served in FIFO order: while one is queued, even a request that
/// would fit waits behind it.
///
/// ```
/// # gosched::Runtime::new().unwrap().block_on(async {
/// let sem = gosched::sync::Semaphore::new(2);
/// sem.acquire_async(1).await;
/// let mut big = std::pin::pin!(sem.acquire_async(2));
/// assert!(futures::poll!(big.as_mut()).is_pending()); // queued
/// assert!(!sem.try_acquire(1)); // one is free, but `big` is first
/// sem.release(1);
/// big.await; // granted both
/// assert_eq!(sem.available(), 0);
/// # });
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct SemaphoreAcquireFuture<'a> {
    sem: &'a Semaphore,
    n: usize,
    key: Option<Key>,
}

/// Permits held from a [`Semaphore`]; released when dropped.
///
/// ```
/// let sem = gosched::sync::Semaphore::new(4);
/// {
///     let _permit = sem.acquire_permit(3);
///     assert_eq!(sem.available(), 1);
/// } // released here
/// assert_eq!(sem.available(), 4);
/// ```
#[must_use = "the permits are released at once if the permit is not kept"]
pub struct SemaphorePermit<'a> {
    sem: &'a Semaphore,
    n: usize,
}

impl Semaphore {
    /// A semaphore with `size` permits, all free. `const`, so it can initialise a
    /// `static`.
    ///
    /// ```
    /// use gosched::sync::Semaphore;
    /// static DB_CONNS: Semaphore = Semaphore::new(10);
    /// let _conn = DB_CONNS.acquire_permit(1);
    /// assert_eq!(DB_CONNS.available(), 9);
    /// ```
    pub const fn new(size: usize) -> Self {
        Semaphore {
            size,
            state: Mutex::new(State {
                cur: 0,
                waiters: WaitList::new(),
            }),
        }
    }

    /// Total permits (held or not).
    ///
    /// ```
    /// let sem = gosched::sync::Semaphore::new(3);
    /// sem.acquire(2);
    /// assert_eq!((sem.size(), sem.available()), (3, 1));
    /// ```
    pub fn size(&self) -> usize {
        self.size
    }

    /// Permits free now (a snapshot).
    ///
    /// ```
    /// let sem = gosched::sync::Semaphore::new(3);
    /// assert_eq!(sem.available(), 3);
    /// let p = sem.acquire_permit(2);
    /// assert_eq!(sem.available(), 1);
    /// drop(p);
    /// assert_eq!(sem.available(), 3);
    /// ```
    pub fn available(&self) -> usize {
        self.size - lock(&self.state).cur
    }

    #[track_caller]
    fn check_size(&self, n: usize) {
        if n > self.size {
            panic!(
                "gosched::sync::Semaphore: cannot acquire {n} permits from a semaphore of \
                 size {}; the request could never be granted. Acquire at most size() \
                 permits at once, or create a larger Semaphore",
                self.size
            );
        }
    }

    /// Acquire `n` permits, parking the goroutine (or plain thread) until they
    /// are granted (FIFO).
    ///
    /// # Panics
    /// If `n` exceeds [`size`](Self::size) (it could never succeed; x/sync would
    /// block until its context ends). Inside an async task when it would have to
    /// wait: use [`acquire_async`](Self::acquire_async).
    ///
    /// ```
    /// use std::sync::Arc;
    /// let sem = Arc::new(gosched::sync::Semaphore::new(2));
    /// sem.acquire(2); // all of them
    /// let s = sem.clone();
    /// let h = gosched::go(move || {
    ///     s.acquire(1); // parks until a permit is released
    ///     s.available()
    /// });
    /// sem.release(1);
    /// assert_eq!(h.join().unwrap(), 0);
    /// ```
    #[track_caller]
    pub fn acquire(&self, n: usize) {
        if !self.try_acquire_checked(n) {
            crate::block_on(self.acquire_async(n));
        }
    }

    /// `acquire` for async code.
    ///
    /// # Panics
    /// If `n` exceeds [`size`](Self::size), at once (not when polled).
    ///
    /// ```
    /// # gosched::Runtime::new().unwrap().block_on(async {
    /// use std::sync::Arc;
    /// let sem = Arc::new(gosched::sync::Semaphore::new(1));
    /// sem.acquire_async(1).await;
    /// let s = sem.clone();
    /// let waiter = gosched::spawn(async move { s.acquire_async(1).await });
    /// sem.release(1); // the task gets it, whether it waits already or not
    /// waiter.await.unwrap();
    /// assert_eq!(sem.available(), 0);
    /// # });
    /// ```
    #[track_caller]
    pub fn acquire_async(&self, n: usize) -> SemaphoreAcquireFuture<'_> {
        self.check_size(n);
        SemaphoreAcquireFuture {
            sem: self,
            n,
            key: None,
        }
    }

    /// Acquire `n` permits if they are free and nobody is waiting; never waits.
    /// `false` (not a panic) when `n` exceeds the size.
    ///
    /// ```
    /// let sem = gosched::sync::Semaphore::new(2);
    /// assert!(sem.try_acquire(2));
    /// assert!(!sem.try_acquire(1)); // none left
    /// assert!(!sem.try_acquire(3)); // never possible: false, no panic
    /// sem.release(2);
    /// ```
    pub fn try_acquire(&self, n: usize) -> bool {
        let mut s = lock(&self.state);
        if self.size - s.cur >= n && s.waiters.is_empty() {
            s.cur += n;
            true
        } else {
            false
        }
    }

    #[track_caller]
    fn try_acquire_checked(&self, n: usize) -> bool {
        self.check_size(n);
        self.try_acquire(n)
    }

    /// Release `n` permits, granting them to waiters in FIFO order.
    ///
    /// # Panics
    /// If more permits are released than are held (a release without a matching
    /// acquire).
    ///
    /// ```
    /// let sem = gosched::sync::Semaphore::new(5);
    /// sem.acquire(3);
    /// sem.release(2); // any part of what is held
    /// assert_eq!(sem.available(), 4);
    /// sem.release(1);
    /// assert_eq!(sem.available(), 5);
    /// ```
    #[track_caller]
    pub fn release(&self, n: usize) {
        let mut s = lock(&self.state);
        if n > s.cur {
            let held = s.cur;
            drop(s);
            panic!(
                "gosched::sync::Semaphore: released {n} permits but only {held} are held; \
                 release only permits that were acquired"
            );
        }
        s.cur -= n;
        let wakers = s.grant(self.size);
        drop(s);
        wakers.into_iter().for_each(Waker::wake);
    }

    /// `acquire(n)`, returning a permit that releases them when dropped.
    ///
    /// # Panics
    /// As [`acquire`](Self::acquire).
    ///
    /// ```
    /// let sem = gosched::sync::Semaphore::new(2);
    /// let permit = sem.acquire_permit(2);
    /// assert_eq!(permit.num_permits(), 2);
    /// assert!(!sem.try_acquire(1));
    /// drop(permit);
    /// assert!(sem.try_acquire(1));
    /// ```
    #[track_caller]
    pub fn acquire_permit(&self, n: usize) -> SemaphorePermit<'_> {
        self.acquire(n);
        SemaphorePermit { sem: self, n }
    }

    /// `acquire_async(n)`, returning a permit that releases them when dropped.
    ///
    /// # Panics
    /// As [`acquire_async`](Self::acquire_async).
    ///
    /// ```
    /// # gosched::Runtime::new().unwrap().block_on(async {
    /// let sem = gosched::sync::Semaphore::new(3);
    /// let permit = sem.acquire_permit_async(2).await;
    /// assert_eq!(sem.available(), 1);
    /// drop(permit);
    /// assert_eq!(sem.available(), 3);
    /// # });
    /// ```
    #[track_caller]
    pub fn acquire_permit_async(
        &self,
        n: usize,
    ) -> impl Future<Output = SemaphorePermit<'_>> + Send + '_ {
        let fut = self.acquire_async(n);
        async move {
            fut.await;
            SemaphorePermit { sem: self, n }
        }
    }

    /// `try_acquire(n)` as a permit.
    ///
    /// ```
    /// let sem = gosched::sync::Semaphore::new(1);
    /// let first = sem.try_acquire_permit(1);
    /// assert!(first.is_some());
    /// assert!(sem.try_acquire_permit(1).is_none());
    /// drop(first);
    /// assert!(sem.try_acquire_permit(1).is_some());
    /// ```
    pub fn try_acquire_permit(&self, n: usize) -> Option<SemaphorePermit<'_>> {
        // Not `then_some`: an eagerly built permit would release on drop.
        if self.try_acquire(n) {
            Some(SemaphorePermit { sem: self, n })
        } else {
            None
        }
    }
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = lock(&self.state);
        f.debug_struct("Semaphore")
            .field("size", &self.size)
            .field("held", &s.cur)
            .field("waiters", &s.waiters.len())
            .finish()
    }
}

impl Future for SemaphoreAcquireFuture<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let sem = self.sem;
        let mut s = lock(&sem.state);
        if let Some(key) = self.key {
            return match s.waiters.poll(key, cx.waker()) {
                // `grant` counted our permits in.
                Some(_) => {
                    self.key = None;
                    Poll::Ready(())
                }
                None => crate::sched::wait::pending(crate::sched::wait::WaitReason::Semaphore, cx),
            };
        }
        if sem.size - s.cur >= self.n && s.waiters.is_empty() {
            s.cur += self.n;
            return Poll::Ready(());
        }
        self.key = Some(s.waiters.push_back(self.n, cx.waker()));
        crate::sched::wait::pending(crate::sched::wait::WaitReason::Semaphore, cx)
    }
}

impl Drop for SemaphoreAcquireFuture<'_> {
    fn drop(&mut self) {
        let Some(key) = self.key.take() else {
            return;
        };
        let mut s = lock(&self.sem.state);
        if let Cancelled::Notified(n) = s.waiters.cancel(key) {
            // Granted after all: give the permits back.
            s.cur -= n;
        }
        // Whoever was behind us may fit now.
        let wakers = s.grant(self.sem.size);
        drop(s);
        wakers.into_iter().for_each(Waker::wake);
    }
}

impl fmt::Debug for SemaphoreAcquireFuture<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SemaphoreAcquireFuture")
            .field("n", &self.n)
            .field("queued", &self.key.is_some())
            .finish_non_exhaustive()
    }
}

impl SemaphorePermit<'_> {
    /// Permits held by this guard.
    ///
    /// ```
    /// let sem = gosched::sync::Semaphore::new(8);
    /// assert_eq!(sem.acquire_permit(5).num_permits(), 5);
    /// ```
    pub fn num_permits(&self) -> usize {
        self.n
    }

    /// Keep the permits acquired without releasing them (they can be released
    /// later with [`Semaphore::release`]).
    ///
    /// ```
    /// let sem = gosched::sync::Semaphore::new(2);
    /// sem.acquire_permit(2).forget();
    /// assert_eq!(sem.available(), 0); // still held
    /// sem.release(2);
    /// assert_eq!(sem.available(), 2);
    /// ```
    pub fn forget(self) {
        std::mem::forget(self);
    }
}

impl Drop for SemaphorePermit<'_> {
    fn drop(&mut self) {
        self.sem.release(self.n);
    }
}

impl fmt::Debug for SemaphorePermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SemaphorePermit")
            .field("n", &self.n)
            .finish()
    }
}
