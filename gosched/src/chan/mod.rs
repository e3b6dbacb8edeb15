//! Go channels: `chan::<T>(cap)`.
//!
//! # Protocol (Go's `chan.go`, with futures)
//!
//! A channel is one lock around: a ring buffer of at most `cap` values, the
//! closed flag, and two FIFO wait queues of parked senders and receivers. Go's
//! invariants hold under the lock:
//! - never both queues non-empty;
//! - values in the buffer ⇒ no parked receivers;
//! - free space in the buffer ⇒ no parked senders.
//!
//! Every operation is a future; the blocking forms (`send`, `recv`) run it with
//! `crate::block_on`, so a goroutine parks its G, a plain thread parks itself, and
//! async code `.await`s the same future. A parked operation is a `Waiter` in a
//! queue: a slot for the value, a state (`WAITING → DONE | CLOSED`, set only
//! under the channel lock) and the waker (under the waiter's own small lock, so a
//! re-poll that updates it never misses the completion).
//!
//! - **Send**: closed → error with the value back; a parked receiver → the value
//!   goes straight into its slot (no buffer bounce) and it is woken after the
//!   lock is dropped — the wake readies it into the sender's P `runnext`, Go's
//!   fast path; room in the buffer → push; else park.
//! - **Receive**: a value in the buffer → take the head, and if a sender is
//!   parked move its value into the freed tail slot (FIFO kept); no buffer and a
//!   parked sender (cap 0) → take its value directly; closed → `None`; else park.
//!   So cap 0 is a true rendezvous: a send completes only when a receiver has
//!   taken the value.
//! - **Close**: every parked receiver gets `None`; every parked sender gets its
//!   value back in `SendError`; closing twice returns `Err(CloseError)`.
//! - Wakers are always called after the channel lock is released.
//!
//! Cancel safety: dropping a pending send future withdraws the value (it was
//! never sent). Dropping a receive future that a sender already filled puts the
//! value back: to another parked receiver, or at the head of the buffer (which may
//! then hold `cap + 1` values for a moment). No value is ever lost.
//!
//! Handles: `Chan<T>` is both ends (clone it for MPMC); `split()` gives
//! directional `Sender<T>` / `Receiver<T>`. As with crossbeam and flume, when the
//! last handle able to send is dropped the channel closes (receivers drain the
//! buffer, then get `None`), and when the last handle able to receive is dropped,
//! sends fail with `SendError` (parked senders are woken with their values).

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

mod error;
pub use error::{
    CloseError, RecvTimeoutError, SendError, SendTimeoutError, TryRecvError, TrySendError,
};

const WAITING: u8 = 0;
const DONE: u8 = 1;
const CLOSED: u8 = 2;

struct Waiter<T> {
    state: AtomicU8,
    slot: Mutex<Option<T>>,
    waker: Mutex<Option<Waker>>,
}

impl<T> Waiter<T> {
    fn new(value: Option<T>, waker: &Waker) -> Arc<Self> {
        Arc::new(Waiter {
            state: AtomicU8::new(WAITING),
            slot: Mutex::new(value),
            waker: Mutex::new(Some(waker.clone())),
        })
    }

    /// Under the channel lock: finish the wait. The caller wakes it after
    /// unlocking (`wake`).
    fn complete(&self, state: u8) {
        self.state.store(state, Release);
    }

    fn wake(&self) {
        let w = lock(&self.waker).take();
        if let Some(w) = w {
            w.wake();
        }
    }

    /// Re-poll: the current state, registering `waker` if still waiting.
    fn poll_state(&self, waker: &Waker) -> u8 {
        let mut w = lock(&self.waker);
        let s = self.state.load(Acquire);
        if s == WAITING {
            match &*w {
                Some(old) if old.will_wake(waker) => {}
                _ => *w = Some(waker.clone()),
            }
        }
        s
    }
}

/// A waiter completed under the lock, to be woken once it is released.
type ToWake<T> = Option<Arc<Waiter<T>>>;

struct State<T> {
    buf: VecDeque<T>,
    closed: bool,
    recvq: VecDeque<Arc<Waiter<T>>>,
    sendq: VecDeque<Arc<Waiter<T>>>,
}

struct Inner<T> {
    state: Mutex<State<T>>,
    cap: usize,
    /// Handles able to send / to receive (a `Chan` counts as both).
    senders: AtomicUsize,
    receivers: AtomicUsize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<T> Inner<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        lock(&self.state)
    }

    /// Sends fail when nobody can receive any more.
    fn send_closed(&self, s: &State<T>) -> bool {
        s.closed || self.receivers.load(Acquire) == 0
    }

    /// Send under the lock: deliver `v` to a parked receiver or buffer it.
    /// `Ok(Some(w))`: wake `w` once the lock is released. `Err((v, full))`:
    /// `full` = it would block, else the channel is closed.
    fn send_locked(&self, s: &mut State<T>, v: T) -> Result<ToWake<T>, (T, bool)> {
        if self.send_closed(s) {
            return Err((v, false));
        }
        if let Some(r) = s.recvq.pop_front() {
            *lock(&r.slot) = Some(v);
            r.complete(DONE);
            return Ok(Some(r));
        }
        if s.buf.len() < self.cap {
            s.buf.push_back(v);
            return Ok(None);
        }
        Err((v, true))
    }

    /// Receive under the lock: `Ok((v, to_wake))`, or `Err(closed)`.
    fn recv_locked(&self, s: &mut State<T>) -> Result<(T, ToWake<T>), bool> {
        if let Some(v) = s.buf.pop_front() {
            // A parked sender refills the freed slot (FIFO kept).
            let w = s.sendq.pop_front();
            if let Some(w) = &w {
                let sv = lock(&w.slot).take().expect("parked sender holds its value");
                s.buf.push_back(sv);
                w.complete(DONE);
            }
            return Ok((v, w));
        }
        if let Some(w) = s.sendq.pop_front() {
            let v = lock(&w.slot).take().expect("parked sender holds its value");
            w.complete(DONE);
            return Ok((v, Some(w)));
        }
        Err(s.closed || self.senders.load(Acquire) == 0)
    }

    /// Non-blocking send. `Err(v)` with `full = true` when it would block.
    fn try_send(&self, v: T) -> Result<(), (T, bool)> {
        let woken = self.send_locked(&mut self.lock(), v)?;
        if let Some(w) = woken {
            w.wake();
        }
        Ok(())
    }

    /// Non-blocking receive: `Ok(v)`, or `Err(closed)`.
    fn try_recv(&self) -> Result<T, bool> {
        let (v, woken) = self.recv_locked(&mut self.lock())?;
        if let Some(w) = woken {
            w.wake();
        }
        Ok(v)
    }

    fn close(&self) -> Result<(), CloseError> {
        let (rq, sq) = {
            let mut s = self.lock();
            if s.closed {
                return Err(CloseError);
            }
            s.closed = true;
            (std::mem::take(&mut s.recvq), std::mem::take(&mut s.sendq))
        };
        Self::fail_all(rq, sq);
        Ok(())
    }

    /// Wake every parked waiter with CLOSED (their locks are already released).
    fn fail_all(rq: VecDeque<Arc<Waiter<T>>>, sq: VecDeque<Arc<Waiter<T>>>) {
        for w in rq.iter().chain(sq.iter()) {
            w.complete(CLOSED);
        }
        for w in rq.iter().chain(sq.iter()) {
            w.wake();
        }
    }

    /// The last sender or receiver handle is gone: fail the waiters that can no
    /// longer complete.
    fn disconnect(&self, side_senders: bool) {
        let (rq, sq) = {
            let mut s = self.lock();
            if side_senders {
                // Receivers drain the buffer, then see "closed".
                s.closed = true;
                (std::mem::take(&mut s.recvq), VecDeque::new())
            } else {
                (VecDeque::new(), std::mem::take(&mut s.sendq))
            }
        };
        Self::fail_all(rq, sq);
    }
}

// ---- handles ------------------------------------------------------------------------

/// A Go channel: both ends in one handle. `Clone` for more senders/receivers.
pub struct Chan<T> {
    inner: Arc<Inner<T>>,
}

/// The sending end of a channel (from [`Chan::split`]).
pub struct Sender<T> {
    inner: Arc<Inner<T>>,
}

/// The receiving end of a channel (from [`Chan::split`]).
pub struct Receiver<T> {
    inner: Arc<Inner<T>>,
}

/// Make a channel with room for `cap` values; `cap == 0` is Go's unbuffered
/// channel (a send completes when a receiver takes the value).
pub fn chan<T>(cap: usize) -> Chan<T> {
    Chan {
        inner: Arc::new(Inner {
            state: Mutex::new(State {
                buf: VecDeque::with_capacity(cap.min(4096)),
                closed: false,
                recvq: VecDeque::new(),
                sendq: VecDeque::new(),
            }),
            cap,
            senders: AtomicUsize::new(1),
            receivers: AtomicUsize::new(1),
        }),
    }
}

macro_rules! common_methods {
    () => {
        /// Close the channel: receivers drain what is buffered, then get `None`;
        /// parked and later senders get their value back in an error. Closing
        /// twice returns `Err(CloseError)` (Go panics).
        pub fn close(&self) -> Result<(), CloseError> {
            self.inner.close()
        }

        /// Whether `close` was called (or every sender is gone).
        pub fn is_closed(&self) -> bool {
            self.inner.lock().closed
        }

        /// Values buffered now.
        pub fn len(&self) -> usize {
            self.inner.lock().buf.len()
        }

        /// No value buffered now.
        pub fn is_empty(&self) -> bool {
            self.len() == 0
        }

        /// The buffer's capacity (0: unbuffered).
        pub fn cap(&self) -> usize {
            self.inner.cap
        }
    };
}

macro_rules! send_methods {
    () => {
        /// Send, blocking the goroutine (or thread) until the value is buffered or
        /// taken. `Err` with the value if the channel is closed.
        ///
        /// # Panics
        /// Inside an async task: use [`send_async`](Self::send_async).
        pub fn send(&self, value: T) -> Result<(), SendError<T>> {
            crate::block_on(self.send_async(value))
        }

        /// The async form of `send`. Dropping the future before it completes
        /// withdraws the value.
        pub fn send_async(&self, value: T) -> SendFut<'_, T> {
            SendFut {
                inner: &self.inner,
                value: Some(value),
                waiter: None,
            }
        }

        /// Send without blocking.
        pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
            self.inner.try_send(value).map_err(|(v, full)| {
                if full {
                    TrySendError::Full(v)
                } else {
                    TrySendError::Closed(v)
                }
            })
        }

        /// Send, giving up after `timeout` (the value comes back in the error).
        pub fn send_timeout(&self, value: T, timeout: Duration) -> Result<(), SendTimeoutError<T>> {
            let deadline = Instant::now() + timeout;
            let mut fut = std::pin::pin!(self.send_async(value));
            let mut sleep = std::pin::pin!(crate::time::sleep_until(deadline));
            crate::block_on(std::future::poll_fn(|cx| {
                if let Poll::Ready(r) = fut.as_mut().poll(cx) {
                    return Poll::Ready(r.map_err(|SendError(v)| SendTimeoutError::Closed(v)));
                }
                if sleep.as_mut().poll(cx).is_ready() {
                    return match fut.as_mut().withdraw() {
                        Some(v) => Poll::Ready(Err(SendTimeoutError::Timeout(v))),
                        // Delivered after all, between the two polls.
                        None => Poll::Ready(Ok(())),
                    };
                }
                Poll::Pending
            }))
        }
    };
}

macro_rules! recv_methods {
    () => {
        /// Receive, blocking the goroutine (or thread). `None` once the channel is
        /// closed and drained.
        ///
        /// # Panics
        /// Inside an async task: use [`recv_async`](Self::recv_async).
        pub fn recv(&self) -> Option<T> {
            crate::block_on(self.recv_async())
        }

        /// The async form of `recv`. Cancel-safe: dropping the future never loses
        /// a value.
        pub fn recv_async(&self) -> RecvFut<'_, T> {
            RecvFut {
                inner: &self.inner,
                waiter: None,
            }
        }

        /// Receive without blocking.
        pub fn try_recv(&self) -> Result<T, TryRecvError> {
            self.inner.try_recv().map_err(|closed| {
                if closed {
                    TryRecvError::Closed
                } else {
                    TryRecvError::Empty
                }
            })
        }

        /// Receive, giving up after `timeout`.
        pub fn recv_timeout(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
            let deadline = Instant::now() + timeout;
            let mut fut = std::pin::pin!(self.recv_async());
            let mut sleep = std::pin::pin!(crate::time::sleep_until(deadline));
            crate::block_on(std::future::poll_fn(|cx| {
                if let Poll::Ready(r) = fut.as_mut().poll(cx) {
                    return Poll::Ready(r.ok_or(RecvTimeoutError::Closed));
                }
                if sleep.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Err(RecvTimeoutError::Timeout));
                }
                Poll::Pending
            }))
        }

        /// Iterate over received values until the channel is closed and drained.
        pub fn iter(&self) -> Iter<'_, T> {
            Iter { inner: &self.inner }
        }
    };
}

impl<T> Chan<T> {
    common_methods!();
    send_methods!();
    recv_methods!();

    /// Directional views of this channel (the `Chan` itself is consumed).
    pub fn split(self) -> (Sender<T>, Receiver<T>) {
        let inner = self.inner.clone();
        // `self` counted as one sender and one receiver: hand both counts over.
        std::mem::forget(self);
        (
            Sender {
                inner: inner.clone(),
            },
            Receiver { inner },
        )
    }
}

impl<T> Sender<T> {
    common_methods!();
    send_methods!();
}

impl<T> Receiver<T> {
    common_methods!();
    recv_methods!();
}

impl<T> Clone for Chan<T> {
    fn clone(&self) -> Self {
        self.inner.senders.fetch_add(1, Relaxed);
        self.inner.receivers.fetch_add(1, Relaxed);
        Chan {
            inner: self.inner.clone(),
        }
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.inner.senders.fetch_add(1, Relaxed);
        Sender {
            inner: self.inner.clone(),
        }
    }
}

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Self {
        self.inner.receivers.fetch_add(1, Relaxed);
        Receiver {
            inner: self.inner.clone(),
        }
    }
}

fn drop_sender<T>(inner: &Inner<T>) {
    if inner.senders.fetch_sub(1, AcqRel) == 1 {
        inner.disconnect(true);
    }
}

fn drop_receiver<T>(inner: &Inner<T>) {
    if inner.receivers.fetch_sub(1, AcqRel) == 1 {
        inner.disconnect(false);
    }
}

impl<T> Drop for Chan<T> {
    fn drop(&mut self) {
        drop_sender(&self.inner);
        drop_receiver(&self.inner);
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        drop_sender(&self.inner);
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        drop_receiver(&self.inner);
    }
}

macro_rules! debug_impl {
    ($t:ident) => {
        impl<T> fmt::Debug for $t<T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let s = self.inner.lock();
                f.debug_struct(stringify!($t))
                    .field("len", &s.buf.len())
                    .field("cap", &self.inner.cap)
                    .field("closed", &s.closed)
                    .finish()
            }
        }
    };
}
debug_impl!(Chan);
debug_impl!(Sender);
debug_impl!(Receiver);

// ---- futures ---------------------------------------------------------------------------

/// Future of [`Chan::send_async`].
#[must_use = "futures do nothing unless polled"]
pub struct SendFut<'a, T> {
    inner: &'a Arc<Inner<T>>,
    value: Option<T>,
    waiter: Option<Arc<Waiter<T>>>,
}

impl<T> Unpin for SendFut<'_, T> {}

impl<T> SendFut<'_, T> {
    /// Withdraw a pending send: the value if it was not delivered.
    fn withdraw(self: Pin<&mut Self>) -> Option<T> {
        let this = self.get_mut();
        if let Some(v) = this.value.take() {
            return Some(v);
        }
        let w = this.waiter.take()?;
        let mut s = this.inner.lock();
        if w.state.load(Acquire) == DONE {
            return None;
        }
        s.sendq.retain(|x| !Arc::ptr_eq(x, &w));
        drop(s);
        let v = lock(&w.slot).take();
        v
    }
}

impl<T> Future for SendFut<'_, T> {
    type Output = Result<(), SendError<T>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let Some(w) = &this.waiter {
            return match w.poll_state(cx.waker()) {
                WAITING => Poll::Pending,
                DONE => {
                    this.waiter = None;
                    Poll::Ready(Ok(()))
                }
                _ => {
                    let v = lock(&w.slot)
                        .take()
                        .expect("closed sender gets its value back");
                    this.waiter = None;
                    Poll::Ready(Err(SendError(v)))
                }
            };
        }
        let v = this.value.take().expect("SendFut polled after completion");
        // One critical section: complete now, or park.
        let mut s = this.inner.lock();
        match this.inner.send_locked(&mut s, v) {
            Ok(woken) => {
                drop(s);
                if let Some(w) = woken {
                    w.wake();
                }
                Poll::Ready(Ok(()))
            }
            Err((v, false)) => Poll::Ready(Err(SendError(v))),
            Err((v, true)) => {
                let w = Waiter::new(Some(v), cx.waker());
                s.sendq.push_back(w.clone());
                this.waiter = Some(w);
                Poll::Pending
            }
        }
    }
}

impl<T> Drop for SendFut<'_, T> {
    fn drop(&mut self) {
        if let Some(w) = self.waiter.take() {
            let mut s = self.inner.lock();
            if w.state.load(Acquire) == WAITING {
                s.sendq.retain(|x| !Arc::ptr_eq(x, &w));
            }
        }
    }
}

/// Future of [`Chan::recv_async`].
#[must_use = "futures do nothing unless polled"]
pub struct RecvFut<'a, T> {
    inner: &'a Arc<Inner<T>>,
    waiter: Option<Arc<Waiter<T>>>,
}

impl<T> Unpin for RecvFut<'_, T> {}

impl<T> Future for RecvFut<'_, T> {
    type Output = Option<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let this = self.get_mut();
        if let Some(w) = &this.waiter {
            return match w.poll_state(cx.waker()) {
                WAITING => Poll::Pending,
                DONE => {
                    let v = lock(&w.slot).take();
                    this.waiter = None;
                    Poll::Ready(v)
                }
                _ => {
                    this.waiter = None;
                    Poll::Ready(None)
                }
            };
        }
        // One critical section: complete now, or park.
        let mut s = this.inner.lock();
        match this.inner.recv_locked(&mut s) {
            Ok((v, woken)) => {
                drop(s);
                if let Some(w) = woken {
                    w.wake();
                }
                Poll::Ready(Some(v))
            }
            Err(true) => Poll::Ready(None),
            Err(false) => {
                let w = Waiter::new(None, cx.waker());
                s.recvq.push_back(w.clone());
                this.waiter = Some(w);
                Poll::Pending
            }
        }
    }
}

impl<T> Drop for RecvFut<'_, T> {
    fn drop(&mut self) {
        let Some(w) = self.waiter.take() else { return };
        let mut s = self.inner.lock();
        match w.state.load(Acquire) {
            WAITING => s.recvq.retain(|x| !Arc::ptr_eq(x, &w)),
            DONE => {
                // A value was handed to us but never returned: put it back.
                if let Some(v) = lock(&w.slot).take() {
                    if let Some(r) = s.recvq.pop_front() {
                        *lock(&r.slot) = Some(v);
                        r.complete(DONE);
                        drop(s);
                        r.wake();
                    } else {
                        s.buf.push_front(v);
                    }
                }
            }
            _ => {}
        }
    }
}

/// Iterator over received values (blocking), from [`Chan::iter`].
pub struct Iter<'a, T> {
    inner: &'a Arc<Inner<T>>,
}

impl<T> Iterator for Iter<'_, T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        crate::block_on(RecvFut {
            inner: self.inner,
            waiter: None,
        })
    }
}

impl<'a, T> IntoIterator for &'a Chan<T> {
    type Item = T;
    type IntoIter = Iter<'a, T>;
    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}

impl<'a, T> IntoIterator for &'a Receiver<T> {
    type Item = T;
    type IntoIter = Iter<'a, T>;
    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}

impl<T> fmt::Debug for SendFut<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendFut")
            .field("parked", &self.waiter.is_some())
            .finish()
    }
}

impl<T> fmt::Debug for RecvFut<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecvFut")
            .field("parked", &self.waiter.is_some())
            .finish()
    }
}

impl<T> fmt::Debug for Iter<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Iter")
    }
}
