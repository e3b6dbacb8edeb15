//! [`WaitGroup`]: Go's `sync.WaitGroup`, as a cloneable handle.
//!
//! # Protocol
//!
//! `count` is the counter; `waiters` a [`WaitList`] under a small lock. `add`
//! changes the counter with one atomic RMW and, if it reached zero, takes the
//! lock and notifies every queued waiter. A waiter checks the counter, and if it
//! is not zero, re-checks it *under the lock* before queueing: an `add` that
//! reached zero either released the lock before (then the re-check sees zero) or
//! takes it after (then it finds the waiter queued). A notified waiter returns
//! even if the counter has since gone up again (Go's generations).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use super::waitlist::{Key, WaitList};
use std::sync::atomic::{AtomicIsize, Ordering::*};
use std::sync::Arc;

use crate::loom::lock;
use crate::loom::sync::Mutex;
use crate::JoinHandle;

struct Inner {
    count: AtomicIsize,
    waiters: Mutex<WaitList<()>>,
}

/// Waits for a collection of goroutines or tasks to finish — Go's
/// `sync.WaitGroup`.
///
/// **A handle**: clones share one counter, so a clone can move into each
/// goroutine (`'static` closures cannot borrow a `WaitGroup` on the spawner's
/// stack, which is what Go's `*WaitGroup` does). It also works behind an `Arc` or
/// in a `static`-lifetime owner; all methods take `&self`.
///
/// As in Go, `add` with a positive delta must happen before `wait` is called for
/// that batch, and reusing a group for a new batch must wait until every `wait`
/// of the previous batch has returned. A counter below zero panics with
/// `sync: negative WaitGroup counter`.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
/// let wg = gosched::sync::WaitGroup::new();
/// let n = Arc::new(AtomicUsize::new(0));
/// for _ in 0..8 {
///     let n = n.clone();
///     wg.go(move || {
///         n.fetch_add(1, Ordering::Relaxed);
///     });
/// }
/// wg.wait();
/// assert_eq!(n.load(Ordering::Relaxed), 8);
/// ```
#[derive(Clone)]
pub struct WaitGroup {
    inner: Arc<Inner>,
}

/// Future of [`WaitGroup::wait_async`]; cancel-safe.
///
/// ```
/// use std::time::Duration;
/// gosched::testing::run_virtual_async(async {
///     let wg = gosched::sync::WaitGroup::new();
///     wg.add(1); // and nobody calls `done`
///     let r = gosched::time::timeout(Duration::from_secs(5), wg.wait_async()).await;
///     assert!(r.is_err()); // gave up; the future left the wait queue
///     wg.done();
///     wg.wait_async().await; // zero: returns at once
/// });
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct WaitGroupFuture<'a> {
    wg: &'a WaitGroup,
    key: Option<Key>,
}

impl WaitGroup {
    /// A group with counter zero.
    ///
    /// ```
    /// let wg = gosched::sync::WaitGroup::new();
    /// assert_eq!(wg.count(), 0);
    /// wg.wait(); // nothing to wait for: returns at once
    /// ```
    pub fn new() -> Self {
        WaitGroup {
            inner: Arc::new(Inner {
                count: AtomicIsize::new(0),
                waiters: Mutex::new(WaitList::new()),
            }),
        }
    }

    /// Add `delta` (may be negative) to the counter. When it reaches zero, every
    /// waiter is released.
    ///
    /// # Panics
    /// `sync: negative WaitGroup counter` if the counter would go below zero.
    ///
    /// ```
    /// let wg = gosched::sync::WaitGroup::new();
    /// wg.add(3); // before the goroutines start, as in Go
    /// for _ in 0..3 {
    ///     let wg = wg.clone();
    ///     gosched::go(move || wg.done());
    /// }
    /// wg.wait();
    /// assert_eq!(wg.count(), 0);
    /// ```
    pub fn add(&self, delta: isize) {
        let v = self
            .inner
            .count
            .fetch_add(delta, AcqRel)
            .wrapping_add(delta);
        if v < 0 {
            panic!("sync: negative WaitGroup counter");
        }
        if v == 0 && delta != 0 {
            let wakers = lock(&self.inner.waiters).notify_all();
            wakers.into_iter().for_each(Waker::wake);
        }
    }

    /// `add(-1)`.
    ///
    /// # Panics
    /// `sync: negative WaitGroup counter` if the counter was zero.
    ///
    /// ```
    /// let wg = gosched::sync::WaitGroup::new();
    /// wg.add(2);
    /// wg.done();
    /// assert_eq!(wg.count(), 1);
    /// wg.done();
    /// wg.wait(); // zero: returns at once
    /// ```
    pub fn done(&self) {
        self.add(-1);
    }

    /// The counter now (a snapshot).
    ///
    /// ```
    /// let wg = gosched::sync::WaitGroup::new();
    /// wg.add(5);
    /// wg.add(-2);
    /// assert_eq!(wg.count(), 3);
    /// ```
    pub fn count(&self) -> isize {
        self.inner.count.load(Acquire)
    }

    /// Park the goroutine (or plain thread) until the counter is zero.
    ///
    /// # Panics
    /// Inside an async task when it would have to wait: use
    /// [`wait_async`](Self::wait_async).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use gosched::sync::{Mutex, WaitGroup};
    /// let (wg, seen) = (WaitGroup::new(), Arc::new(Mutex::new(Vec::new())));
    /// for i in 0..3 {
    ///     let seen = seen.clone();
    ///     wg.go(move || seen.lock().push(i));
    /// }
    /// wg.wait(); // every goroutine has pushed
    /// assert_eq!(seen.lock().len(), 3);
    /// ```
    pub fn wait(&self) {
        if self.count() != 0 {
            crate::block_on(self.wait_async());
        }
    }

    /// `wait` for async code.
    ///
    /// ```
    /// # gosched::Runtime::new().unwrap().block_on(async {
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use std::sync::Arc;
    /// let (wg, n) = (gosched::sync::WaitGroup::new(), Arc::new(AtomicU32::new(0)));
    /// for _ in 0..4 {
    ///     let n = n.clone();
    ///     wg.spawn(async move { n.fetch_add(1, Ordering::SeqCst) });
    /// }
    /// wg.wait_async().await;
    /// assert_eq!(n.load(Ordering::SeqCst), 4);
    /// # });
    /// ```
    pub fn wait_async(&self) -> WaitGroupFuture<'_> {
        WaitGroupFuture {
            wg: self,
            key: None,
        }
    }

    /// Go 1.25's `WaitGroup.Go`: `add(1)`, run `f` in a new goroutine, and `done()`
    /// when it returns — also if it panics (the panic is reported by the
    /// returned handle, as for any goroutine).
    ///
    /// # Panics
    /// If no goroutine stack can be reserved (the counter is left unchanged).
    ///
    /// ```
    /// let wg = gosched::sync::WaitGroup::new();
    /// let ok = wg.go(|| 1 + 1);
    /// let bad = wg.go(|| -> i32 { panic!("boom") });
    /// wg.wait(); // both count as done, the panicking one too
    /// assert_eq!(ok.join().unwrap(), 2);
    /// assert!(bad.join().unwrap_err().is_panic());
    /// ```
    #[track_caller]
    pub fn go<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.add(1);
        let done = DoneOnDrop(self.clone());
        match crate::try_go(move || {
            let _done = done;
            f()
        }) {
            Ok(h) => h,
            // The closure (and its `DoneOnDrop`) was dropped: the count is back.
            Err(e) => panic!("{e}"),
        }
    }

    /// Like [`go`](Self::go) for an async task: `done()` when the future finishes,
    /// panics, or is cancelled.
    ///
    /// ```
    /// let wg = gosched::sync::WaitGroup::new();
    /// let hs: Vec<_> = (1..=3).map(|i| wg.spawn(async move { i * 10 })).collect();
    /// wg.wait();
    /// let total: i32 = hs.into_iter().map(|h| h.join().unwrap()).sum();
    /// assert_eq!(total, 60);
    /// ```
    #[track_caller]
    pub fn spawn<F>(&self, fut: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.add(1);
        let done = DoneOnDrop(self.clone());
        crate::spawn(async move {
            let _done = done;
            fut.await
        })
    }
}

impl Default for WaitGroup {
    fn default() -> Self {
        WaitGroup::new()
    }
}

impl fmt::Debug for WaitGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaitGroup")
            .field("count", &self.count())
            .finish()
    }
}

struct DoneOnDrop(WaitGroup);

impl Drop for DoneOnDrop {
    fn drop(&mut self) {
        self.0.done();
    }
}

impl Future for WaitGroupFuture<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let inner = &*self.wg.inner;
        if let Some(key) = self.key {
            let mut q = lock(&inner.waiters);
            return match q.poll(key, cx.waker()) {
                Some(()) => {
                    drop(q);
                    self.key = None;
                    Poll::Ready(())
                }
                None => crate::sched::wait::pending(crate::sched::wait::WaitReason::WaitGroup, cx),
            };
        }
        if inner.count.load(Acquire) == 0 {
            return Poll::Ready(());
        }
        let mut q = lock(&inner.waiters);
        if inner.count.load(Acquire) == 0 {
            return Poll::Ready(());
        }
        self.key = Some(q.push_back((), cx.waker()));
        crate::sched::wait::pending(crate::sched::wait::WaitReason::WaitGroup, cx)
    }
}

impl Drop for WaitGroupFuture<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            // Queued or notified, nothing to pass on: a zero releases everyone.
            lock(&self.wg.inner.waiters).cancel(key);
        }
    }
}

impl fmt::Debug for WaitGroupFuture<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaitGroupFuture")
            .field("queued", &self.key.is_some())
            .finish_non_exhaustive()
    }
}
