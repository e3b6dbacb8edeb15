//! [`Mutex<T>`]: Go's `sync.Mutex` with the data inside, guard-based like std's
//! and tokio's.
//!
//! The locking protocol (normal mode with barging and spinning, starvation mode
//! with FIFO hand-off after a waiter waited 1 ms, the state word and who may write
//! it, cancellation) is documented at the top of `raw_mutex.rs`, where it lives.
//!
//! # Guards across parking
//!
//! The lock has no notion of an owning OS thread: a guard may be held across
//! blocking calls in a goroutine (which may resume on another M), moved into
//! another goroutine, task or thread, and dropped there. Hence, as in tokio:
//! `MutexGuard<T>: Send` iff `T: Send` (moving the guard moves `&mut T` access),
//! `MutexGuard<T>: Sync` iff `T: Sync` too (sharing it shares `&T`). Both follow
//! from its fields (`&Mutex<T>` and `PhantomData<&mut T>`), with no `unsafe impl`.
//! `Mutex<T>` is `Send + Sync` iff `T: Send`, like `std::sync::Mutex`.
//!
//! There is no poisoning (as in Go and tokio): a guard dropped by a panic simply
//! unlocks.

use std::cell::UnsafeCell;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::pin::Pin;
use std::task::{Context, Poll};

use super::raw_mutex::{RawLock, RawMutex};

/// A mutual-exclusion lock protecting a `T` — Go's `sync.Mutex`.
///
/// [`lock`](Mutex::lock) parks the calling goroutine (never its OS thread), or the
/// thread when called from a plain thread; async tasks use
/// [`lock_async`](Mutex::lock_async). Fairness is Go's: newcomers may overtake
/// woken waiters, but a waiter kept waiting over 1 ms switches the mutex to
/// starvation mode, where the lock is handed to waiters in FIFO order.
///
/// ```
/// use std::sync::Arc;
/// let m = Arc::new(gosched::sync::Mutex::new(0));
/// let hs: Vec<_> = (0..4)
///     .map(|_| {
///         let m = m.clone();
///         gosched::go(move || *m.lock() += 1)
///     })
///     .collect();
/// for h in hs {
///     h.join().unwrap();
/// }
/// assert_eq!(*m.lock(), 4);
/// ```
pub struct Mutex<T: ?Sized> {
    raw: RawMutex,
    data: UnsafeCell<T>,
}

// SAFETY: the mutex hands out access to `T` to one holder at a time (the lock's
// protocol, see raw_mutex.rs), from any thread: that needs `T: Send`, like
// `std::sync::Mutex`. The raw lock itself is made of atomics and a std mutex.
unsafe impl<T: ?Sized + Send> Send for Mutex<T> {}
// SAFETY: as above: `&Mutex<T>` only gives `&mut T` through a guard, one at a time.
unsafe impl<T: ?Sized + Send> Sync for Mutex<T> {}

/// RAII access to the data of a locked [`Mutex`]; unlocks when dropped. Not tied to
/// an OS thread: it may be held across parking and dropped anywhere.
///
/// ```
/// use gosched::sync::Mutex;
/// static LOG: Mutex<Vec<&str>> = Mutex::new(Vec::new());
/// let mut guard = LOG.lock();
/// guard.push("locked here");
/// // The guard is `Send`: another goroutine finishes the work and unlocks.
/// gosched::go(move || {
///     guard.push("unlocked there");
///     drop(guard);
/// })
/// .join()
/// .unwrap();
/// assert_eq!(*LOG.lock(), ["locked here", "unlocked there"]);
/// ```
#[must_use = "if unused the Mutex will immediately unlock"]
pub struct MutexGuard<'a, T: ?Sized> {
    lock: &'a Mutex<T>,
    /// Makes the guard `Sync` only if `T: Sync` (it derefs to `&T`).
    _marker: PhantomData<&'a mut T>,
}

/// Future of [`Mutex::lock_async`]. Dropping it before it completes gives up the
/// wait; if the lock had already been handed to it, it is passed on.
///
/// ```
/// use std::time::Duration;
/// use gosched::sync::Mutex;
/// gosched::testing::run_virtual_async(async {
///     let m = Mutex::new(0);
///     let held = m.lock_async().await;
///     // Give up after a second: the dropped future leaves the queue.
///     let r = gosched::time::timeout(Duration::from_secs(1), m.lock_async()).await;
///     assert!(r.is_err());
///     drop(held);
///     assert!(m.try_lock().is_some());
/// });
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct MutexLockFuture<'a, T: ?Sized> {
    lock: &'a Mutex<T>,
    raw: RawLock<'a>,
}

impl<T> Mutex<T> {
    /// A new unlocked mutex. `const`, so it can initialise a `static`.
    ///
    /// ```
    /// use gosched::sync::Mutex;
    /// static COUNT: Mutex<u64> = Mutex::new(0);
    /// *COUNT.lock() += 1;
    /// assert_eq!(*COUNT.lock(), 1);
    /// ```
    pub const fn new(value: T) -> Self {
        Mutex {
            raw: RawMutex::new(),
            data: UnsafeCell::new(value),
        }
    }

    /// Consume the mutex and return its data.
    ///
    /// ```
    /// let m = gosched::sync::Mutex::new(vec![1]);
    /// m.lock().push(2);
    /// assert_eq!(m.into_inner(), [1, 2]);
    /// ```
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Lock, parking the goroutine (or the plain thread) until the lock is ours.
    ///
    /// # Panics
    /// Inside an async task when it would have to wait (that would block its M):
    /// use [`lock_async`](Self::lock_async) there.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let m = Arc::new(gosched::sync::Mutex::new(String::new()));
    /// let m2 = m.clone();
    /// gosched::go(move || m2.lock().push_str("hi")).join().unwrap();
    /// let guard = m.lock(); // unlocks when `guard` is dropped
    /// assert_eq!(*guard, "hi");
    /// ```
    pub fn lock(&self) -> MutexGuard<'_, T> {
        crate::coro::preempt_point();
        if self.raw.lock_fast() {
            return self.guard();
        }
        crate::block_on(self.lock_async())
    }

    /// Lock from async code. The future is cancel-safe.
    ///
    /// ```
    /// # gosched::Runtime::new().unwrap().block_on(async {
    /// use std::sync::Arc;
    /// let m = Arc::new(gosched::sync::Mutex::new(0));
    /// let tasks: Vec<_> = (0..4)
    ///     .map(|_| {
    ///         let m = m.clone();
    ///         gosched::spawn(async move { *m.lock_async().await += 1 })
    ///     })
    ///     .collect();
    /// for t in tasks {
    ///     t.await.unwrap();
    /// }
    /// assert_eq!(*m.lock_async().await, 4);
    /// # });
    /// ```
    pub fn lock_async(&self) -> MutexLockFuture<'_, T> {
        MutexLockFuture {
            lock: self,
            raw: self.raw.lock(),
        }
    }

    /// Lock if that needs no waiting (Go's `TryLock`). In starvation mode the lock
    /// belongs to the queued waiters, so this fails even if it is momentarily free.
    ///
    /// ```
    /// let m = gosched::sync::Mutex::new(1);
    /// let guard = m.lock();
    /// assert!(m.try_lock().is_none()); // held: no waiting
    /// drop(guard);
    /// assert_eq!(*m.try_lock().unwrap(), 1);
    /// ```
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        self.raw.try_lock().then(|| self.guard())
    }

    /// Whether some holder has it locked now (a snapshot, for diagnostics).
    ///
    /// ```
    /// let m = gosched::sync::Mutex::new(());
    /// assert!(!m.is_locked());
    /// let guard = m.lock();
    /// assert!(m.is_locked());
    /// drop(guard);
    /// assert!(!m.is_locked());
    /// ```
    pub fn is_locked(&self) -> bool {
        self.raw.is_locked()
    }

    /// Mutable access without locking: `&mut self` proves nobody else holds it.
    ///
    /// ```
    /// let mut m = gosched::sync::Mutex::new(1);
    /// *m.get_mut() += 1;
    /// assert_eq!(*m.lock(), 2);
    /// ```
    pub fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
    }

    fn guard(&self) -> MutexGuard<'_, T> {
        MutexGuard {
            lock: self,
            _marker: PhantomData,
        }
    }
}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Self {
        Mutex::new(T::default())
    }
}

impl<T> From<T> for Mutex<T> {
    fn from(value: T) -> Self {
        Mutex::new(value)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Mutex");
        match self.try_lock() {
            Some(g) => d.field("data", &&*g),
            None => d.field("data", &format_args!("<locked>")),
        };
        d.finish_non_exhaustive()
    }
}

impl<'a, T: ?Sized> MutexGuard<'a, T> {
    /// The mutex this guard locks (used by [`Cond`](super::Cond)).
    pub(super) fn mutex(this: &Self) -> &'a Mutex<T> {
        this.lock
    }
}

impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard proves we hold the lock: no other access to the data
        // exists while it lives.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `&mut self` makes this the only access
        // through the guard.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T: ?Sized> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.raw.unlock();
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Display> fmt::Display for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}

impl<'a, T: ?Sized> Future for MutexLockFuture<'a, T> {
    type Output = MutexGuard<'a, T>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        match Pin::new(&mut this.raw).poll(cx) {
            Poll::Ready(()) => Poll::Ready(this.lock.guard()),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: ?Sized> fmt::Debug for MutexLockFuture<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MutexLockFuture")
            .field("raw", &self.raw)
            .finish_non_exhaustive()
    }
}
