//! [`Once`]: Go's `sync.Once`.
//!
//! # Protocol
//!
//! `state` is `INCOMPLETE → RUNNING → COMPLETE` (or back to `INCOMPLETE` when an
//! async initialiser is cancelled). The caller whose CAS `INCOMPLETE → RUNNING`
//! succeeds runs the function; a guard stores the final state and then, under
//! the waiters' lock, notifies every queued waiter. Others queue only after
//! re-checking `state` under that lock (so a finish either happened before and is
//! seen, or happens after and finds them queued), and loop when woken: if the
//! state went back to `INCOMPLETE`, one of them runs its own function.

use std::fmt;
use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicU8, Ordering::*};
use std::task::{Context, Poll, Waker};

use super::waitlist::{Key, WaitList};
use crate::loom::lock;
use crate::loom::sync::Mutex;

const INCOMPLETE: u8 = 0;
const RUNNING: u8 = 1;
const COMPLETE: u8 = 2;

/// Runs a function exactly once — Go's `sync.Once`.
///
/// Callers that arrive while the function runs wait for it (parking their
/// goroutine or thread; async callers `.await`), so after `call_once` returns the
/// function's effects are visible.
///
/// **Panics** (Go semantics): if the function panics, the `Once` counts as
/// completed — the panic propagates to the caller that ran it, waiting callers
/// return, and the function is never run again.
///
/// ```
/// static INIT: gosched::sync::Once = gosched::sync::Once::new();
/// let mut n = 0;
/// INIT.call_once(|| n += 1);
/// INIT.call_once(|| n += 1);
/// assert_eq!(n, 1);
/// assert!(INIT.is_completed());
/// ```
pub struct Once {
    state: AtomicU8,
    waiters: Mutex<WaitList<()>>,
}

impl Once {
    /// A `Once` that has not run. `const`, so it can initialise a `static`.
    ///
    /// ```
    /// use gosched::sync::Once;
    /// static INIT: Once = Once::new();
    /// let local = Once::new(); // or a field of some struct
    /// assert!(!INIT.is_completed() && !local.is_completed());
    /// ```
    pub const fn new() -> Self {
        Once {
            state: AtomicU8::new(INCOMPLETE),
            waiters: Mutex::new(WaitList::new()),
        }
    }

    /// Whether a call has completed (or panicked).
    ///
    /// ```
    /// use std::panic::{catch_unwind, AssertUnwindSafe};
    /// let once = gosched::sync::Once::new();
    /// let r = catch_unwind(AssertUnwindSafe(|| once.call_once(|| panic!("init failed"))));
    /// assert!(r.is_err());
    /// assert!(once.is_completed()); // as in Go: a panicking call counts as done
    /// once.call_once(|| unreachable!()); // and nothing runs again
    /// ```
    pub fn is_completed(&self) -> bool {
        self.state.load(Acquire) == COMPLETE
    }

    /// Run `f` if no call has run yet; if one is running, wait for it.
    ///
    /// # Panics
    /// Propagates a panic of `f`. Inside an async task, panics if it would have to
    /// wait for another caller's `f`: use [`call_once_async`](Self::call_once_async).
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use std::sync::Arc;
    /// use gosched::sync::Once;
    /// static ONCE: Once = Once::new();
    /// let runs = Arc::new(AtomicU32::new(0));
    /// let hs: Vec<_> = (0..4)
    ///     .map(|_| {
    ///         let runs = runs.clone();
    ///         gosched::go(move || ONCE.call_once(|| { runs.fetch_add(1, Ordering::SeqCst); }))
    ///     })
    ///     .collect();
    /// hs.into_iter().for_each(|h| h.join().unwrap());
    /// assert_eq!(runs.load(Ordering::SeqCst), 1);
    /// ```
    pub fn call_once<F: FnOnce()>(&self, f: F) {
        if self.is_completed() {
            return;
        }
        self.call_once_slow(f);
    }

    #[cold]
    fn call_once_slow<F: FnOnce()>(&self, f: F) {
        loop {
            match self
                .state
                .compare_exchange(INCOMPLETE, RUNNING, Acquire, Acquire)
            {
                Ok(_) => {
                    let _finish = Finish {
                        once: self,
                        complete: true,
                    };
                    f();
                    return;
                }
                Err(COMPLETE) => return,
                Err(_) => crate::block_on(self.wait_running()),
            }
        }
    }

    /// `call_once` for async code, with an async initialiser.
    ///
    /// If the returned future is dropped while `f`'s future runs, the `Once` goes
    /// back to not-run and a waiting caller runs its own function instead (the
    /// call did not complete). If `f` or its future panics, the `Once` counts as
    /// completed, as in [`call_once`](Self::call_once).
    ///
    /// ```
    /// # gosched::Runtime::new().unwrap().block_on(async {
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use gosched::sync::Once;
    /// static ONCE: Once = Once::new();
    /// static RUNS: AtomicU32 = AtomicU32::new(0);
    /// for _ in 0..3 {
    ///     ONCE.call_once_async(|| async {
    ///         gosched::task::yield_now().await; // an async initialiser may wait
    ///         RUNS.fetch_add(1, Ordering::Relaxed);
    ///     })
    ///     .await;
    /// }
    /// assert_eq!(RUNS.load(Ordering::Relaxed), 1);
    /// # });
    /// ```
    pub async fn call_once_async<F, Fut>(&self, f: F)
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = ()>,
    {
        if self.is_completed() {
            return;
        }
        let mut f = Some(f);
        loop {
            match self
                .state
                .compare_exchange(INCOMPLETE, RUNNING, Acquire, Acquire)
            {
                Ok(_) => break,
                Err(COMPLETE) => return,
                Err(_) => self.wait_running().await,
            }
        }
        // A panic while this guard says `complete` (inside `f` or a poll of its
        // future) completes the Once; a drop between polls (cancellation) resets it.
        let mut finish = Finish {
            once: self,
            complete: true,
        };
        let mut fut = pin!((f.take().expect("initialiser taken twice"))());
        poll_fn(|cx| {
            finish.complete = true;
            let r = fut.as_mut().poll(cx);
            finish.complete = r.is_ready();
            r
        })
        .await;
        finish.complete = true;
    }

    /// Until the state is not `RUNNING`.
    fn wait_running(&self) -> OnceWait<'_> {
        OnceWait {
            once: self,
            key: None,
        }
    }
}

impl Default for Once {
    fn default() -> Self {
        Once::new()
    }
}

impl fmt::Debug for Once {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.state.load(Relaxed) {
            INCOMPLETE => "incomplete",
            RUNNING => "running",
            _ => "complete",
        };
        f.debug_struct("Once").field("state", &state).finish()
    }
}

/// Ends a run: stores the outcome and releases the waiters.
struct Finish<'a> {
    once: &'a Once,
    /// Complete (normal return, or a panic of the initialiser) or back to
    /// incomplete (an async initialiser cancelled between polls).
    complete: bool,
}

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        let s = if self.complete || std::thread::panicking() {
            COMPLETE
        } else {
            INCOMPLETE
        };
        self.once.state.store(s, Release);
        let wakers = lock(&self.once.waiters).notify_all();
        wakers.into_iter().for_each(Waker::wake);
    }
}

struct OnceWait<'a> {
    once: &'a Once,
    key: Option<Key>,
}

impl Future for OnceWait<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let once = self.once;
        let mut q = lock(&once.waiters);
        if let Some(key) = self.key {
            return match q.poll(key, cx.waker()) {
                Some(()) => {
                    self.key = None;
                    Poll::Ready(())
                }
                None => crate::sched::wait::pending(crate::sched::wait::WaitReason::Once, cx),
            };
        }
        if once.state.load(Acquire) != RUNNING {
            return Poll::Ready(());
        }
        self.key = Some(q.push_back((), cx.waker()));
        crate::sched::wait::pending(crate::sched::wait::WaitReason::Once, cx)
    }
}

impl Drop for OnceWait<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            // Nothing to pass on: a finish releases every waiter.
            lock(&self.once.waiters).cancel(key);
        }
    }
}
