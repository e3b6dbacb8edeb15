//! A worker's mailbox: one slot for its next task, or its close ("exit").
//!
//! # Protocol
//!
//! One receiver, the worker goroutine itself; senders are the pool's
//! submitters, each of which was handed the worker under the pool's lock, so
//! at most one task is ever on its way: the slot is empty whenever the worker
//! is idle or granted, and a send never finds it full (a full slot is a bug in
//! the pool, reported by `try_send`'s `Full`).
//!
//! Everything is under one small lock: the slot, the closed flag and the
//! receiver's waker. A sender stores the task and takes the waker under the
//! lock and wakes it after; a receiver either finds the task (or the close)
//! or leaves its waker under the same lock, so a wake-up cannot be lost
//! between "nothing yet" and "parked". Closing wakes the receiver too.
//!
//! It replaces a capacity-one channel: the mailbox sits inside the worker's
//! own allocation (one object to touch when a task is dispatched, where a
//! channel is a second allocation with a ring and wait queues), and a
//! receiver that parks allocates nothing (a channel's waiter record is an
//! allocation per park). With 50,000 workers each cold in the cache when it
//! is handed a task, the lines touched per task are what the hand-over costs.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use crate::loom::lock;
use crate::loom::sync::Mutex;
use crate::sched::wait::{pending, WaitReason};

pub(crate) struct Mailbox<J> {
    inner: Mutex<Inner<J>>,
}

struct Inner<J> {
    job: Option<J>,
    closed: bool,
    /// The parked receiver's waker.
    waker: Option<Waker>,
}

/// Why `try_send` did not deliver; the task comes back.
pub(crate) enum SendError<J> {
    Closed(J),
    Full(J),
}

impl<J> Mailbox<J> {
    pub(crate) fn new() -> Self {
        Mailbox {
            inner: Mutex::new(Inner {
                job: None,
                closed: false,
                waker: None,
            }),
        }
    }

    /// Deliver `job`; never waits.
    pub(crate) fn try_send(&self, job: J) -> Result<(), SendError<J>> {
        let waker = {
            let mut m = lock(&self.inner);
            if m.closed {
                return Err(SendError::Closed(job));
            }
            if m.job.is_some() {
                return Err(SendError::Full(job));
            }
            m.job = Some(job);
            m.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
        Ok(())
    }

    /// Close: the receiver's next `recv` (or the one it is parked in) ends
    /// with `None` once the slot is empty. False if it was closed already.
    pub(crate) fn close(&self) -> bool {
        let waker = {
            let mut m = lock(&self.inner);
            if m.closed {
                return false;
            }
            m.closed = true;
            m.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
        true
    }

    pub(crate) fn is_closed(&self) -> bool {
        lock(&self.inner).closed
    }

    /// The task in the slot, if any, without waiting.
    pub(crate) fn try_recv(&self) -> Option<J> {
        lock(&self.inner).job.take()
    }

    /// The next task, or `None` once closed and empty. Parks the calling
    /// goroutine while there is neither.
    pub(crate) fn recv(&self) -> Option<J> {
        crate::block_on(Recv { mailbox: self })
    }
}

struct Recv<'a, J> {
    mailbox: &'a Mailbox<J>,
}

impl<J> Future for Recv<'_, J> {
    type Output = Option<J>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<J>> {
        let mut m = lock(&self.mailbox.inner);
        if let Some(job) = m.job.take() {
            return Poll::Ready(Some(job));
        }
        if m.closed {
            return Poll::Ready(None);
        }
        match &m.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => m.waker = Some(cx.waker().clone()),
        }
        drop(m);
        pending(WaitReason::ChanReceive, cx)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn one_slot_then_close() {
        let m = Mailbox::new();
        assert!(m.try_send(1).is_ok());
        assert!(matches!(m.try_send(2), Err(SendError::Full(2))));
        assert_eq!(m.try_recv(), Some(1));
        assert_eq!(m.try_recv(), None);
        assert!(m.try_send(3).is_ok());
        assert!(m.close());
        assert!(!m.close());
        assert!(m.is_closed());
        assert!(matches!(m.try_send(4), Err(SendError::Closed(4))));
        // A task sent before the close is still received, then the end.
        assert_eq!(m.recv(), Some(3));
        assert_eq!(m.recv(), None);
    }

    #[test]
    fn a_parked_receiver_is_woken_by_a_send_and_by_a_close() {
        // The receiver parks before the send or not, and before the close or
        // not: every order must end the same.
        for _ in 0..200 {
            let m = std::sync::Arc::new(Mailbox::new());
            let r = std::sync::Arc::clone(&m);
            let h = crate::go(move || (r.recv(), r.recv()));
            assert!(m.try_send("task").is_ok());
            m.close();
            assert_eq!(h.join().unwrap(), (Some("task"), None));
        }
    }
}
