//! Async tasks: `spawn`, `yield_now`, and the handle types.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

pub use crate::sched::task::{JoinError, JoinHandle, TaskId};

/// Start an async task on the current runtime (the global one outside any runtime).
///
/// ```
/// let rt = gosched::Runtime::new().unwrap();
/// let sum = rt.block_on(async {
///     let parts: Vec<_> = (1..=4).map(|i| gosched::task::spawn(async move { i * 10 })).collect();
///     let mut sum = 0;
///     for p in parts {
///         sum += p.await.unwrap();
///     }
///     sum
/// });
/// assert_eq!(sum, 100);
/// ```
#[track_caller]
pub fn spawn<F>(fut: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let info = crate::sched::task::SpawnInfo::task(std::panic::Location::caller());
    crate::sched::context::with_current(|shared| shared.spawn_with_id(|_| fut, info))
}

/// Let other tasks run: the task goes to the global run queue (Go's `Gosched`)
/// and is polled again later.
///
/// ```
/// let rt = gosched::Runtime::new().unwrap();
/// let h = rt.spawn(async {
///     let mut steps = 0;
///     for _ in 0..3 {
///         steps += 1;
///         gosched::task::yield_now().await; // a long loop lets others run
///     }
///     steps
/// });
/// assert_eq!(rt.block_on(h).unwrap(), 3);
/// ```
pub fn yield_now() -> YieldNow {
    YieldNow { yielded: false }
}

/// Future returned by [`yield_now`].
///
/// ```
/// let rt = gosched::Runtime::new().unwrap();
/// let h = rt.spawn(async {
///     let y: gosched::task::YieldNow = gosched::task::yield_now();
///     y.await; // pending once, then ready
///     "resumed"
/// });
/// assert_eq!(rt.block_on(h).unwrap(), "resumed");
/// ```
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct YieldNow {
    yielded: bool,
}

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        crate::sched::context::mark_yield();
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}
