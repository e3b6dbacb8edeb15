//! The `JoinHandle` of a pooled task (`submit_with_result`, `submit_task`).
//!
//! A pooled task runs on a reused worker goroutine, which has a `JoinHandle` of
//! its own that the pool keeps; the caller's handle belongs to a small async
//! task that waits for this one result. The worker fills a one-slot cell
//! (`Completer::complete`) and wakes it: a value completes the task, a panic
//! payload is resumed in it (so the handle reports `JoinError::is_panic` with
//! the original payload, and no panic hook runs a second time), and a completer
//! dropped without a result (the task was cancelled before it started, or its
//! submit failed) cancels it (`JoinError::is_cancelled`).

use std::future::Future;
use std::panic::resume_unwind;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use crate::loom::lock;
use crate::JoinHandle;

type Outcome<T> = std::thread::Result<T>;

struct Slot<T> {
    value: Option<Outcome<T>>,
    /// The completer is gone: no value will come.
    dropped: bool,
    waker: Option<Waker>,
}

/// The worker's side.
pub(crate) struct Completer<T> {
    cell: Arc<Mutex<Slot<T>>>,
}

impl<T> Completer<T> {
    pub(crate) fn complete(self, outcome: Outcome<T>) {
        let mut s = lock(&self.cell);
        s.value = Some(outcome);
        let w = s.waker.take();
        drop(s);
        if let Some(w) = w {
            w.wake();
        }
        // Drop sees the value and does nothing more.
    }
}

impl<T> Drop for Completer<T> {
    fn drop(&mut self) {
        let mut s = lock(&self.cell);
        if s.value.is_some() {
            return;
        }
        s.dropped = true;
        let w = s.waker.take();
        drop(s);
        if let Some(w) = w {
            w.wake();
        }
    }
}

struct Wait<T> {
    cell: Arc<Mutex<Slot<T>>>,
}

impl<T> Future for Wait<T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut s = lock(&self.cell);
        match s.value.take() {
            Some(Ok(v)) => Poll::Ready(v),
            Some(Err(payload)) => {
                drop(s);
                resume_unwind(payload)
            }
            None if s.dropped => {
                drop(s);
                let ours = crate::sched::task::cancel_current(cx);
                debug_assert!(ours, "a pool result is always awaited by its own task");
                Poll::Pending
            }
            None => {
                s.waker = Some(cx.waker().clone());
                crate::sched::wait::pending(crate::sched::wait::WaitReason::Join, cx)
            }
        }
    }
}

/// A completer and the handle it completes.
pub(crate) fn pair<T: Send + 'static>() -> (Completer<T>, JoinHandle<T>) {
    let cell = Arc::new(Mutex::new(Slot {
        value: None,
        dropped: false,
        waker: None,
    }));
    let handle = crate::spawn(Wait {
        cell: Arc::clone(&cell),
    });
    (Completer { cell }, handle)
}
