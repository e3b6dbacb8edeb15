//! [`RwLock<T>`]: Go's `sync.RWMutex` with the data inside.
//!
//! # Protocol
//!
//! State word:
//!
//! ```text
//!  bit 0     WRITER          a writer owns the lock
//!  bit 1     WRITER_WAITING  writers are queued (new readers must queue too)
//!  bit 2     READER_WAITING  readers are queued
//!  bits 3..  readers         read locks held
//! ```
//!
//! Two FIFO [`WaitList`]s (readers, writers) sit under one small lock. As in
//! `raw_mutex.rs`, a waiter decides to queue under that lock by a CAS that sets
//! its `*_WAITING` bit, in the same critical section as its push; the bits are
//! cleared, under the lock, when their list empties; an unlocker whose atomic
//! step sees a waiting bit takes the lock before deciding whom to wake. So no
//! wake-up is lost, and whoever comes second under the lock sees the other.
//!
//! Fast paths: a reader adds itself by CAS while neither `WRITER` nor
//! `WRITER_WAITING` is set; a writer CASes `0 → WRITER`; a writer's unlock CASes
//! `WRITER → 0`; a reader's unlock is one `fetch_sub`.
//!
//! Hand-off (`dispatch`, under the lock) grants the lock to waiters by updating the
//! state word *for them* before waking them, so a notified waiter already owns
//! it:
//! - when a writer unlocks, **all queued readers** go next (Go: readers that
//!   arrived while the writer held the lock are released by its `Unlock`), even if
//!   writers are queued; otherwise the head writer;
//! - when the last reader leaves and a writer is queued, the **head writer** gets
//!   it.
//!
//! So the lock is writer-preferring — once a writer waits, new readers queue, and
//! the writer gets the lock as soon as the readers already inside leave — and
//! readers are not starved either: writers and batches of readers alternate.
//!
//! Cancellation: a queued waiter unlinks itself (a writer that was the last one
//! queued clears `WRITER_WAITING` and lets the queued readers in); a waiter that
//! was already granted the lock unlocks it, which passes it on.

use std::cell::UnsafeCell;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use super::waitlist::{Cancelled, Key, WaitList};
use crate::loom::lock;
use crate::loom::sync::atomic::{AtomicUsize, Ordering::*};
use crate::loom::sync::Mutex;

const WRITER: usize = 1;
const WRITER_WAITING: usize = 2;
const READER_WAITING: usize = 4;
const READER_SHIFT: u32 = 3;
const ONE_READER: usize = 1 << READER_SHIFT;

fn readers(s: usize) -> usize {
    s >> READER_SHIFT
}

#[derive(Debug)]
struct Queues {
    readers: WaitList<()>,
    writers: WaitList<()>,
}

/// A reader-writer lock protecting a `T` — Go's `sync.RWMutex`.
///
/// Any number of readers or one writer. Writer-preferring: once a writer waits,
/// new readers wait behind it; when a writer unlocks, the readers that queued
/// meanwhile go before the next writer, so neither side starves. The blocking
/// forms park the goroutine (or plain thread); async tasks use
/// [`read_async`](RwLock::read_async) / [`write_async`](RwLock::write_async).
///
/// ```
/// let l = gosched::sync::RwLock::new(vec![1]);
/// assert_eq!(l.read().len(), 1);
/// l.write().push(2);
/// assert_eq!(*l.read(), [1, 2]);
/// ```
pub struct RwLock<T: ?Sized> {
    state: AtomicUsize,
    queues: Mutex<Queues>,
    data: UnsafeCell<T>,
}

// SAFETY: a writer gets `&mut T` (possibly on another thread): `T: Send`.
unsafe impl<T: ?Sized + Send> Send for RwLock<T> {}
// SAFETY: readers on several threads share `&T` (`T: Sync`); a writer gets
// `&mut T` from a shared `&RwLock` (`T: Send`). As `std::sync::RwLock`.
unsafe impl<T: ?Sized + Send + Sync> Sync for RwLock<T> {}

/// Shared access to an [`RwLock`]'s data; releases the read lock when dropped.
///
/// ```
/// let l = gosched::sync::RwLock::new(5);
/// let (r1, r2) = (l.read(), l.read()); // readers share the lock
/// assert_eq!(*r1 + *r2, 10);
/// assert!(l.try_write().is_none());
/// drop((r1, r2));
/// assert!(l.try_write().is_some());
/// ```
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct RwLockReadGuard<'a, T: ?Sized> {
    lock: &'a RwLock<T>,
    _marker: PhantomData<&'a T>,
}

/// Exclusive access to an [`RwLock`]'s data; releases the write lock when dropped.
///
/// ```
/// let l = gosched::sync::RwLock::new(String::from("a"));
/// let mut w = l.write();
/// w.push('b');
/// assert!(l.try_read().is_none()); // nobody else while it lives
/// drop(w);
/// assert_eq!(*l.read(), "ab");
/// ```
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct RwLockWriteGuard<'a, T: ?Sized> {
    lock: &'a RwLock<T>,
    _marker: PhantomData<&'a mut T>,
}

/// Future of [`RwLock::read_async`]; cancel-safe.
///
/// ```
/// use std::time::Duration;
/// use gosched::sync::RwLock;
/// gosched::testing::run_virtual_async(async {
///     let l = RwLock::new(0);
///     let w = l.write_async().await;
///     // A writer holds it: give up reading after a second.
///     let r = gosched::time::timeout(Duration::from_secs(1), l.read_async()).await;
///     assert!(r.is_err());
///     drop(w);
///     assert_eq!(*l.read_async().await, 0);
/// });
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct RwLockReadFuture<'a, T: ?Sized> {
    lock: &'a RwLock<T>,
    key: Option<Key>,
}

/// Future of [`RwLock::write_async`]; cancel-safe.
///
/// ```
/// # gosched::Runtime::new().unwrap().block_on(async {
/// let l = gosched::sync::RwLock::new(0);
/// let r = l.read_async().await;
/// let mut w = std::pin::pin!(l.write_async());
/// assert!(futures::poll!(w.as_mut()).is_pending()); // queued behind the reader
/// assert!(l.try_read().is_none()); // writer-preferring: new readers wait too
/// drop(r); // the last reader leaves: the lock goes to the writer
/// *w.await += 1;
/// assert_eq!(*l.read_async().await, 1);
/// # });
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct RwLockWriteFuture<'a, T: ?Sized> {
    lock: &'a RwLock<T>,
    key: Option<Key>,
}

impl<T> RwLock<T> {
    /// A new unlocked lock. `const`, so it can initialise a `static`.
    ///
    /// ```
    /// use gosched::sync::RwLock;
    /// static ROUTES: RwLock<Vec<&str>> = RwLock::new(Vec::new());
    /// ROUTES.write().push("/");
    /// assert_eq!(ROUTES.read().len(), 1);
    /// ```
    pub const fn new(value: T) -> Self {
        RwLock {
            state: AtomicUsize::new(0),
            queues: Mutex::new(Queues {
                readers: WaitList::new(),
                writers: WaitList::new(),
            }),
            data: UnsafeCell::new(value),
        }
    }

    /// Consume the lock and return its data.
    ///
    /// ```
    /// let l = gosched::sync::RwLock::new(1);
    /// *l.write() += 1;
    /// assert_eq!(l.into_inner(), 2);
    /// ```
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

impl<T: ?Sized> RwLock<T> {
    /// Take a read lock, parking the goroutine (or plain thread) while a writer
    /// holds or waits for the lock.
    ///
    /// # Panics
    /// Inside an async task when it would have to wait: use
    /// [`read_async`](Self::read_async) there.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let l = Arc::new(gosched::sync::RwLock::new(vec![1, 2, 3]));
    /// let hs: Vec<_> = (0..3)
    ///     .map(|i| {
    ///         let l = l.clone();
    ///         gosched::go(move || l.read()[i])
    ///     })
    ///     .collect();
    /// let sum: i32 = hs.into_iter().map(|h| h.join().unwrap()).sum();
    /// assert_eq!(sum, 6);
    /// ```
    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        match self.try_read() {
            Some(g) => g,
            None => crate::block_on(self.read_async()),
        }
    }

    /// Take the write lock, parking the goroutine (or plain thread) until it is
    /// free.
    ///
    /// # Panics
    /// Inside an async task when it would have to wait: use
    /// [`write_async`](Self::write_async) there.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let l = Arc::new(gosched::sync::RwLock::new(0));
    /// let hs: Vec<_> = (0..4)
    ///     .map(|_| {
    ///         let l = l.clone();
    ///         gosched::go(move || *l.write() += 1)
    ///     })
    ///     .collect();
    /// hs.into_iter().for_each(|h| h.join().unwrap());
    /// assert_eq!(*l.read(), 4);
    /// ```
    pub fn write(&self) -> RwLockWriteGuard<'_, T> {
        match self.try_write() {
            Some(g) => g,
            None => crate::block_on(self.write_async()),
        }
    }

    /// `read` for async code.
    ///
    /// ```
    /// # gosched::Runtime::new().unwrap().block_on(async {
    /// let l = gosched::sync::RwLock::new("config");
    /// let (a, b) = (l.read_async().await, l.read_async().await);
    /// assert_eq!((*a, *b), ("config", "config"));
    /// # });
    /// ```
    pub fn read_async(&self) -> RwLockReadFuture<'_, T> {
        RwLockReadFuture {
            lock: self,
            key: None,
        }
    }

    /// `write` for async code.
    ///
    /// ```
    /// # gosched::Runtime::new().unwrap().block_on(async {
    /// use std::sync::Arc;
    /// let l = Arc::new(gosched::sync::RwLock::new(Vec::new()));
    /// let l2 = l.clone();
    /// gosched::spawn(async move { l2.write_async().await.push(1) }).await.unwrap();
    /// l.write_async().await.push(2);
    /// assert_eq!(*l.read_async().await, [1, 2]);
    /// # });
    /// ```
    pub fn write_async(&self) -> RwLockWriteFuture<'_, T> {
        RwLockWriteFuture {
            lock: self,
            key: None,
        }
    }

    /// A read lock if no writer holds or waits for the lock.
    ///
    /// ```
    /// let l = gosched::sync::RwLock::new(1);
    /// let w = l.write();
    /// assert!(l.try_read().is_none());
    /// drop(w);
    /// assert_eq!(*l.try_read().unwrap(), 1);
    /// ```
    pub fn try_read(&self) -> Option<RwLockReadGuard<'_, T>> {
        self.try_read_raw().then(|| self.read_guard())
    }

    /// The write lock if nobody holds or waits for the lock.
    ///
    /// ```
    /// let l = gosched::sync::RwLock::new(1);
    /// let r = l.read();
    /// assert!(l.try_write().is_none()); // a reader is inside
    /// drop(r);
    /// *l.try_write().unwrap() = 2;
    /// assert_eq!(*l.read(), 2);
    /// ```
    pub fn try_write(&self) -> Option<RwLockWriteGuard<'_, T>> {
        self.state
            .compare_exchange(0, WRITER, Acquire, Relaxed)
            .is_ok()
            .then(|| self.write_guard())
    }

    /// Mutable access without locking: `&mut self` proves nobody else holds it.
    ///
    /// ```
    /// let mut l = gosched::sync::RwLock::new(1);
    /// *l.get_mut() = 5;
    /// assert_eq!(*l.read(), 5);
    /// ```
    pub fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
    }

    fn read_guard(&self) -> RwLockReadGuard<'_, T> {
        RwLockReadGuard {
            lock: self,
            _marker: PhantomData,
        }
    }

    fn write_guard(&self) -> RwLockWriteGuard<'_, T> {
        RwLockWriteGuard {
            lock: self,
            _marker: PhantomData,
        }
    }

    fn try_read_raw(&self) -> bool {
        let mut s = self.state.load(Relaxed);
        loop {
            if s & (WRITER | WRITER_WAITING) != 0 {
                return false;
            }
            match self
                .state
                .compare_exchange_weak(s, s + ONE_READER, Acquire, Relaxed)
            {
                Ok(_) => return true,
                Err(cur) => s = cur,
            }
        }
    }

    fn read_unlock(&self) {
        let prev = self.state.fetch_sub(ONE_READER, Release);
        debug_assert!(readers(prev) > 0, "sync: read unlock of unlocked RwLock");
        if readers(prev) == 1 && prev & (WRITER_WAITING | READER_WAITING) != 0 {
            self.dispatch_slow(false);
        }
    }

    fn write_unlock(&self) {
        if self
            .state
            .compare_exchange(WRITER, 0, Release, Relaxed)
            .is_err()
        {
            self.dispatch_slow(true);
        }
    }

    /// Take the queue lock, release the write lock if `writer`, and grant the lock
    /// to whoever is next.
    #[cold]
    fn dispatch_slow(&self, writer: bool) {
        let mut q = lock(&self.queues);
        if writer {
            self.state.fetch_and(!WRITER, AcqRel);
        }
        let wakers = self.dispatch(&mut q, writer);
        drop(q);
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Under the queue lock: grant the lock to queued waiters if they may have it
    /// now (see the module docs). `after_writer`: a writer just unlocked, so the
    /// queued readers go first. Returns the wakers to call after unlocking.
    fn dispatch(&self, q: &mut Queues, after_writer: bool) -> Vec<Waker> {
        let mut wakers = Vec::new();
        let mut s = self.state.load(Acquire);
        loop {
            if s & WRITER != 0 {
                return wakers;
            }
            if !q.readers.is_empty() && (after_writer || q.writers.is_empty()) {
                let n = q.readers.len();
                let new = (s + n * ONE_READER) & !READER_WAITING;
                if let Err(cur) = self.state.compare_exchange(s, new, AcqRel, Acquire) {
                    s = cur;
                    continue;
                }
                wakers.reserve(n);
                while let Some(w) = q.readers.notify_front() {
                    wakers.push(w);
                }
            } else if !q.writers.is_empty() && readers(s) == 0 {
                let mut new = s | WRITER;
                if q.writers.len() == 1 {
                    new &= !WRITER_WAITING;
                }
                if let Err(cur) = self.state.compare_exchange(s, new, AcqRel, Acquire) {
                    s = cur;
                    continue;
                }
                wakers.extend(q.writers.notify_front());
            }
            return wakers;
        }
    }
}

impl<'a, T: ?Sized> Future for RwLockReadFuture<'a, T> {
    type Output = RwLockReadGuard<'a, T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let l = self.lock;
        if let Some(key) = self.key {
            let mut q = lock(&l.queues);
            return match q.readers.poll(key, cx.waker()) {
                // `dispatch` counted us in.
                Some(()) => {
                    drop(q);
                    self.key = None;
                    Poll::Ready(l.read_guard())
                }
                None => crate::sched::wait::pending(crate::sched::wait::WaitReason::RwLock, cx),
            };
        }
        if l.try_read_raw() {
            return Poll::Ready(l.read_guard());
        }
        let mut q = lock(&l.queues);
        let mut s = l.state.load(Relaxed);
        loop {
            let (new, acquired) = if s & (WRITER | WRITER_WAITING) == 0 {
                (s + ONE_READER, true)
            } else {
                (s | READER_WAITING, false)
            };
            match l.state.compare_exchange(s, new, AcqRel, Relaxed) {
                Ok(_) if acquired => return Poll::Ready(l.read_guard()),
                Ok(_) => {
                    self.key = Some(q.readers.push_back((), cx.waker()));
                    return crate::sched::wait::pending(crate::sched::wait::WaitReason::RwLock, cx);
                }
                Err(cur) => s = cur,
            }
        }
    }
}

impl<T: ?Sized> Drop for RwLockReadFuture<'_, T> {
    fn drop(&mut self) {
        let Some(key) = self.key.take() else {
            return;
        };
        let l = self.lock;
        let mut q = lock(&l.queues);
        match q.readers.cancel(key) {
            Cancelled::Queued(()) => {
                if q.readers.is_empty() {
                    l.state.fetch_and(!READER_WAITING, AcqRel);
                }
            }
            Cancelled::Notified(()) => {
                // We were granted a read lock: release it.
                drop(q);
                l.read_unlock();
            }
        }
    }
}

impl<'a, T: ?Sized> Future for RwLockWriteFuture<'a, T> {
    type Output = RwLockWriteGuard<'a, T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let l = self.lock;
        if let Some(key) = self.key {
            let mut q = lock(&l.queues);
            return match q.writers.poll(key, cx.waker()) {
                // `dispatch` set WRITER for us.
                Some(()) => {
                    drop(q);
                    self.key = None;
                    Poll::Ready(l.write_guard())
                }
                None => crate::sched::wait::pending(crate::sched::wait::WaitReason::RwLock, cx),
            };
        }
        if l.state
            .compare_exchange(0, WRITER, Acquire, Relaxed)
            .is_ok()
        {
            return Poll::Ready(l.write_guard());
        }
        let mut q = lock(&l.queues);
        let mut s = l.state.load(Relaxed);
        loop {
            let free =
                s & WRITER == 0 && readers(s) == 0 && q.readers.is_empty() && q.writers.is_empty();
            let new = if free { s | WRITER } else { s | WRITER_WAITING };
            match l.state.compare_exchange(s, new, AcqRel, Relaxed) {
                Ok(_) if free => return Poll::Ready(l.write_guard()),
                Ok(_) => {
                    self.key = Some(q.writers.push_back((), cx.waker()));
                    return crate::sched::wait::pending(crate::sched::wait::WaitReason::RwLock, cx);
                }
                Err(cur) => s = cur,
            }
        }
    }
}

impl<T: ?Sized> Drop for RwLockWriteFuture<'_, T> {
    fn drop(&mut self) {
        let Some(key) = self.key.take() else {
            return;
        };
        let l = self.lock;
        let mut q = lock(&l.queues);
        match q.writers.cancel(key) {
            Cancelled::Queued(()) => {
                if q.writers.is_empty() {
                    l.state.fetch_and(!WRITER_WAITING, AcqRel);
                }
                // Readers that queued behind us may be admitted now.
                let wakers = l.dispatch(&mut q, false);
                drop(q);
                wakers.into_iter().for_each(Waker::wake);
            }
            Cancelled::Notified(()) => {
                // We were granted the write lock: release it (passes it on).
                drop(q);
                l.write_unlock();
            }
        }
    }
}

impl<T: ?Sized> Deref for RwLockReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: a read guard means no writer holds the lock: only shared access
        // to the data exists while it lives.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T: ?Sized> Drop for RwLockReadGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.read_unlock();
    }
}

impl<T: ?Sized> Deref for RwLockWriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the write guard is the only access to the data while it lives.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T: ?Sized> DerefMut for RwLockWriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this the only access through it.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T: ?Sized> Drop for RwLockWriteGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.write_unlock();
    }
}

impl<T: Default> Default for RwLock<T> {
    fn default() -> Self {
        RwLock::new(T::default())
    }
}

impl<T> From<T> for RwLock<T> {
    fn from(value: T) -> Self {
        RwLock::new(value)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("RwLock");
        match self.try_read() {
            Some(g) => d.field("data", &&*g),
            None => d.field("data", &format_args!("<locked>")),
        };
        d.finish_non_exhaustive()
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLockReadGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLockWriteGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized> fmt::Debug for RwLockReadFuture<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RwLockReadFuture")
            .field("queued", &self.key.is_some())
            .finish_non_exhaustive()
    }
}

impl<T: ?Sized> fmt::Debug for RwLockWriteFuture<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RwLockWriteFuture")
            .field("queued", &self.key.is_some())
            .finish_non_exhaustive()
    }
}
