//! Async tasks: `spawn`, `yield_now`, and the handle types.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

pub use crate::sched::task::{JoinError, JoinHandle, TaskId};

/// Start an async task on the current runtime (the global one outside any runtime).
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
pub fn yield_now() -> YieldNow {
    YieldNow { yielded: false }
}

/// Future returned by [`yield_now`].
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
