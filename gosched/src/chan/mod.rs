//! Go channels: `chan::<T>(cap)`.
//!
//! ```
//! let ch = gosched::chan::<i32>(0); // unbuffered: each send waits for a receiver
//! let tx = ch.clone();
//! let h = gosched::go(move || {
//!     for i in 1..=3 {
//!         tx.send(i).unwrap();
//!     }
//!     tx.close().unwrap();
//! });
//! let got: Vec<i32> = ch.iter().collect(); // until closed and drained
//! assert_eq!(got, [1, 2, 3]);
//! h.join().unwrap();
//! ```
//!
//! # Protocol (Go's `chan.go`, with futures)
//!
//! A channel is one lock around: a ring buffer of at most `cap` values, the
//! closed flag, and two FIFO wait queues of parked senders and receivers
//! (`core.rs` has the details: waiters, claiming, waking; `queue.rs` the
//! intrusive queues; `select.rs` the select protocol). Go's invariants hold under
//! the lock:
//! - never both queues non-empty;
//! - values in the buffer ⇒ no parked receivers;
//! - free space in the buffer ⇒ no parked senders.
//!
//! Every operation is a future; the blocking forms (`send`, `recv`) run it with
//! `crate::block_on`, so a goroutine parks its G, a plain thread parks itself, and
//! async code `.await`s the same future. A parked operation is a `Waiter` in a
//! queue: a slot for the value and a state (`WAITING → DONE | CLOSED`, set only
//! under the channel lock by whoever *claimed* it — for a select waiter, claiming
//! is the CAS that decides which arm of the select wins).
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
//! `select!` (`select.rs`, `macros.rs`) registers one waiter per arm, all sharing
//! one claim word, so exactly one arm completes.
//!
//! Cancel safety: dropping a pending send future withdraws the value (it was
//! never sent). Dropping a receive future that a sender already filled puts the
//! value back: to another parked receiver, or at the head of the buffer (which may
//! then hold `cap + 1` values for a moment). No value is ever lost.
//!
//! Large values: a goroutine's stack is fixed, so the blocking `send`,
//! `recv` and iteration move a value from the caller's variable to its
//! destination (a parked receiver's slot, the ring) and on to the receiver's
//! variable without copies on the stack between (`core.rs`, "Moving values"):
//! Go's largest element, 64 KiB, fits the default 256 KiB stack. The other
//! forms (`try_*`, `*_timeout`, `select!` arms, the futures' outputs) move a
//! value a few times more; send a `Box` for values larger than about 16 KiB
//! there.
//!
//! Handles: `Chan<T>` is both ends (clone it for MPMC); `split()` gives
//! directional `Sender<T>` / `Receiver<T>`. As with crossbeam and flume, when the
//! last handle able to send is dropped the channel closes (receivers drain the
//! buffer, then get `None`), and when the last handle able to receive is dropped,
//! sends fail with `SendError` (parked senders are woken with their values).

use std::fmt;
use std::future::Future;
use std::task::Poll;
use std::time::Duration;

mod core;
mod error;
mod macros;
mod queue;
mod ring;
mod select;
#[cfg(feature = "stream")]
mod stream;
#[cfg(test)]
mod tests;

use self::core::{Inner, RecvRef, SendRef};
pub use self::core::{RecvFut, SendFut};
pub use error::{
    CapacityError, CloseError, RecvTimeoutError, SendError, SendTimeoutError, TryRecvError,
    TrySendError,
};
#[doc(hidden)]
pub use select::{__select_blocking, __select_future};
pub use select::{RecvArm, Select, SelectArm, SelectFut, Selected, SendArm};
#[cfg(feature = "stream")]
pub use stream::{RecvStream, SendSink};

use crate::loom::sync::atomic::Ordering::*;
use crate::loom::sync::Arc;

// ---- handles ------------------------------------------------------------------------

/// A Go channel: both ends in one handle. `Clone` for more senders/receivers.
///
/// Made by [`chan`]. Every clone is a handle on the same channel (MPMC): any of
/// them may send, any may receive, and each value goes to exactly one receiver.
/// [`split`](Chan::split) turns a handle into a [`Sender`] and a [`Receiver`].
///
/// ```
/// let ch = gosched::chan::<u32>(4);
/// let ch2 = ch.clone(); // the same channel
/// ch2.send(1).unwrap();
/// assert_eq!(ch.recv(), Some(1));
/// assert!(ch2.is_empty());
/// ```
pub struct Chan<T> {
    inner: Arc<Inner<T>>,
}

/// The sending end of a channel (from [`Chan::split`]).
///
/// Cloneable; when the last handle able to send (every `Sender` and `Chan`) is
/// dropped, the channel closes: receivers drain the buffer, then get `None`.
///
/// ```
/// let (tx, rx) = gosched::chan::<&str>(1).split();
/// let h = gosched::go(move || tx.send("hi").unwrap()); // `tx` is dropped after
/// assert_eq!(rx.recv(), Some("hi"));
/// h.join().unwrap();
/// assert_eq!(rx.recv(), None); // the last sender is gone
/// ```
pub struct Sender<T> {
    inner: Arc<Inner<T>>,
}

/// The receiving end of a channel (from [`Chan::split`]).
///
/// Cloneable; when the last handle able to receive (every `Receiver` and
/// `Chan`) is dropped, sends fail with [`SendError`] and parked senders get
/// their values back.
///
/// ```
/// use gosched::chan::SendError;
/// let (tx, rx) = gosched::chan::<i32>(1).split();
/// tx.send(1).unwrap();
/// assert_eq!(rx.recv(), Some(1));
/// drop(rx); // nobody can receive any more
/// assert_eq!(tx.send(2), Err(SendError(2)));
/// ```
pub struct Receiver<T> {
    inner: Arc<Inner<T>>,
}

/// Make a channel with room for `cap` values; `cap == 0` is Go's unbuffered
/// channel (a send completes when a receiver takes the value). The buffer is
/// allocated up front (as in Go); a zero-sized `T` needs none, whatever `cap`.
///
/// # Panics
/// If the buffer cannot be made: `cap` is out of range (its bytes would exceed
/// `isize::MAX`; for a zero-sized `T`, `cap > isize::MAX`) or the allocation
/// fails. [`try_chan`] returns the error instead.
///
/// ```
/// let ch = gosched::chan::<String>(2);
/// ch.send("a".to_string()).unwrap(); // room for two: no receiver needed
/// ch.send("b".to_string()).unwrap();
/// assert_eq!((ch.len(), ch.cap()), (2, 2));
/// assert_eq!(ch.recv().as_deref(), Some("a")); // first in, first out
/// ```
#[track_caller]
pub fn chan<T>(cap: usize) -> Chan<T> {
    match try_chan(cap) {
        Ok(ch) => ch,
        // Here, not in a closure: `#[track_caller]` then points at the caller.
        Err(e) => panic!("{e}"),
    }
}

/// Like [`chan`], but returns an error instead of panicking when the buffer
/// cannot be made (out of range, or out of memory).
///
/// ```
/// let e = gosched::chan::try_chan::<u64>(usize::MAX).unwrap_err();
/// assert!(e.is_out_of_range());
/// assert!(gosched::chan::try_chan::<u64>(16).is_ok());
/// ```
pub fn try_chan<T>(cap: usize) -> Result<Chan<T>, CapacityError> {
    Ok(Chan {
        inner: Inner::try_new_arc(cap)?,
    })
}

/// A timer channel (cap 1) that receives `value(when)` once `clock`
/// reaches `when` (ns): `time::after`. Its timer goes on a heap only
/// when a receiver parks (`core::ChanTimer`).
#[cfg(not(loom))]
pub(crate) fn timer_chan<T: Send + 'static>(
    when: u64,
    clock: crate::sched::timers::DeadlineClock,
    value: fn(u64) -> T,
) -> Chan<T> {
    Chan {
        inner: Inner::new_timer(when, clock, value),
    }
}

macro_rules! common_methods {
    () => {
        /// Close the channel: receivers drain what is buffered, then get `None`;
        /// parked and later senders get their value back in an error. Closing
        /// twice returns `Err(CloseError)` (Go panics).
        ///
        /// ```
        /// let ch = gosched::chan::<i32>(2);
        /// ch.send(1).unwrap();
        /// ch.close().unwrap();
        /// assert!(ch.send(2).is_err()); // no more sends
        /// assert_eq!(ch.recv(), Some(1)); // the buffer drains first
        /// assert_eq!(ch.recv(), None);
        /// assert_eq!(ch.close(), Err(gosched::chan::CloseError));
        /// ```
        pub fn close(&self) -> Result<(), CloseError> {
            self.inner.close()
        }

        /// Whether the channel is closed: `close` was called, every sender is
        /// gone, or every receiver is gone (then every send fails with
        /// `Closed`, which is what a `Sender` asking this wants to know).
        ///
        /// ```
        /// let ch = gosched::chan::<i32>(1);
        /// assert!(!ch.is_closed());
        /// ch.close().unwrap();
        /// assert!(ch.is_closed());
        ///
        /// let (tx, rx) = gosched::chan::<i32>(1).split();
        /// drop(tx); // the last handle able to send
        /// assert!(rx.is_closed());
        ///
        /// let (tx, rx) = gosched::chan::<i32>(1).split();
        /// drop(rx); // the last handle able to receive
        /// assert!(tx.is_closed());
        /// assert!(tx.try_send(1).is_err());
        /// ```
        pub fn is_closed(&self) -> bool {
            // A timer channel's timer may be due: then it sends and lets go.
            self.inner.fire_timer_if_due();
            self.inner.lock().closed
                || self
                    .inner
                    .receivers
                    .load(std::sync::atomic::Ordering::Acquire)
                    == 0
        }

        /// Values buffered now (a snapshot). An unbuffered channel holds none,
        /// save a value that a dropped receive future put back (see the
        /// module docs on cancel safety).
        ///
        /// ```
        /// let ch = gosched::chan::<i32>(3);
        /// ch.send(1).unwrap();
        /// ch.send(2).unwrap();
        /// assert_eq!(ch.len(), 2);
        /// ch.recv();
        /// assert_eq!(ch.len(), 1);
        /// ```
        pub fn len(&self) -> usize {
            self.inner.len()
        }

        /// No value buffered now.
        ///
        /// ```
        /// let ch = gosched::chan::<i32>(1);
        /// assert!(ch.is_empty());
        /// ch.send(1).unwrap();
        /// assert!(!ch.is_empty());
        /// ```
        pub fn is_empty(&self) -> bool {
            self.len() == 0
        }

        /// The buffer's capacity (0: unbuffered).
        ///
        /// ```
        /// assert_eq!(gosched::chan::<u8>(16).cap(), 16);
        /// assert_eq!(gosched::chan::<u8>(0).cap(), 0);
        /// ```
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
        /// Inside an async task, if it would have to wait: use
        /// [`send_async`](Self::send_async) there.
        ///
        /// ```
        /// let ch = gosched::chan::<i32>(0);
        /// let rx = ch.clone();
        /// let h = gosched::go(move || rx.recv());
        /// ch.send(5).unwrap(); // unbuffered: returns once the goroutine has it
        /// assert_eq!(h.join().unwrap(), Some(5));
        /// ch.close().unwrap();
        /// assert_eq!(ch.send(6).unwrap_err().into_inner(), 6); // closed: it comes back
        /// ```
        pub fn send(&self, value: T) -> Result<(), SendError<T>> {
            crate::coro::preempt_point();
            // The value stays here until it moves to its destination
            // ("Moving values", `core.rs`).
            let mut value = Some(value);
            let sent = match self.inner.send_now(&mut value) {
                Some(sent) => sent,
                None => crate::block_on(SendRef {
                    inner: &self.inner,
                    value: &mut value,
                    waiter: None,
                }),
            };
            sent.map_err(|()| SendError(value.take().expect("a closed send keeps its value")))
        }

        /// The async form of `send`. Dropping the future before it completes
        /// withdraws the value.
        ///
        /// ```
        /// use std::time::Duration;
        /// gosched::testing::run_virtual_async(async {
        ///     let ch = gosched::chan::<u8>(0);
        ///     let rx = ch.clone();
        ///     let h = gosched::spawn(async move { rx.recv_async().await });
        ///     ch.send_async(7).await.unwrap();
        ///     assert_eq!(h.await.unwrap(), Some(7));
        ///     // Nobody receives now: the timeout drops the send, and its value.
        ///     let late = gosched::time::timeout(Duration::from_secs(1), ch.send_async(8)).await;
        ///     assert!(late.is_err() && ch.is_empty());
        /// });
        /// ```
        pub fn send_async(&self, value: T) -> SendFut<'_, T> {
            SendFut {
                inner: &self.inner,
                value: Some(value),
                waiter: None,
            }
        }

        /// A send case for a [`Select`] (what `select!`'s `send(ch, value)` builds).
        ///
        /// ```
        /// use gosched::chan::{Select, Selected};
        /// let ch = gosched::chan::<i32>(1);
        /// let mut arm = ch.send_arm(3);
        /// let mut sel = Select::new();
        /// sel.arm(&mut arm);
        /// assert_eq!(sel.try_select(), Selected::Arm(0)); // there was room
        /// drop(sel);
        /// assert!(arm.take().is_ok());
        /// assert_eq!(ch.try_recv(), Ok(3));
        /// ```
        pub fn send_arm(&self, value: T) -> SendArm<'_, T> {
            SendArm::new(&self.inner, value)
        }

        /// Send without blocking: `Full` when the buffer has no room (unbuffered:
        /// no receiver is parked), `Closed` when the channel is closed; the value
        /// comes back in either.
        ///
        /// ```
        /// use gosched::chan::TrySendError;
        /// let ch = gosched::chan::<i32>(1);
        /// assert_eq!(ch.try_send(1), Ok(()));
        /// assert_eq!(ch.try_send(2), Err(TrySendError::Full(2)));
        /// ch.close().unwrap();
        /// assert_eq!(ch.try_send(3), Err(TrySendError::Closed(3)));
        /// ```
        pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
            crate::coro::preempt_point();
            self.inner.try_send(value).map_err(|(v, full)| {
                if full {
                    TrySendError::Full(v)
                } else {
                    TrySendError::Closed(v)
                }
            })
        }

        /// Send, giving up after `timeout` (the value comes back in the error).
        ///
        /// ```
        /// use std::time::Duration;
        /// use gosched::chan::SendTimeoutError;
        /// gosched::testing::run_virtual(|| {
        ///     let ch = gosched::chan::<i32>(1);
        ///     ch.send(1).unwrap();
        ///     let t = gosched::time::now();
        ///     // Full, and nobody receives: gives up after one (virtual) second.
        ///     let r = ch.send_timeout(2, Duration::from_secs(1));
        ///     assert_eq!(r, Err(SendTimeoutError::Timeout(2)));
        ///     assert_eq!(gosched::time::since(t), Duration::from_secs(1));
        /// });
        /// ```
        pub fn send_timeout(&self, value: T, timeout: Duration) -> Result<(), SendTimeoutError<T>> {
            let deadline = crate::sched::timers::deadline_after(timeout);
            let mut fut = std::pin::pin!(self.send_async(value));
            let mut sleep = std::pin::pin!(crate::sched::timers::sleep_until(deadline));
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
        /// Inside an async task, if it would have to wait: use
        /// [`recv_async`](Self::recv_async) there.
        ///
        /// ```
        /// let ch = gosched::chan::<i32>(0);
        /// let tx = ch.clone();
        /// gosched::go(move || {
        ///     tx.send(1).unwrap();
        ///     tx.close().unwrap();
        /// });
        /// assert_eq!(ch.recv(), Some(1));
        /// assert_eq!(ch.recv(), None); // closed and drained
        /// ```
        pub fn recv(&self) -> Option<T> {
            crate::coro::preempt_point();
            // The value lands here ("Moving values", `core.rs`).
            let mut out = None;
            if !self.inner.recv_now(&mut out) {
                crate::block_on(RecvRef {
                    inner: &self.inner,
                    out: &mut out,
                    waiter: None,
                });
            }
            out
        }

        /// The async form of `recv`. Cancel-safe: dropping the future never loses
        /// a value.
        ///
        /// ```
        /// let rt = gosched::Runtime::new().unwrap();
        /// rt.block_on(async {
        ///     let ch = gosched::chan::<&str>(0);
        ///     let tx = ch.clone();
        ///     gosched::spawn(async move { tx.send_async("hello").await.unwrap() });
        ///     assert_eq!(ch.recv_async().await, Some("hello"));
        /// });
        /// ```
        pub fn recv_async(&self) -> RecvFut<'_, T> {
            RecvFut {
                inner: &self.inner,
                waiter: None,
            }
        }

        /// A receive case for a [`Select`] (what `select!`'s `recv(ch)` builds).
        ///
        /// ```
        /// use gosched::chan::{chan, Select, Selected};
        /// let (a, b) = (chan::<i32>(1), chan::<i32>(1));
        /// b.send(2).unwrap();
        /// let (mut ra, mut rb) = (a.recv_arm(), b.recv_arm());
        /// let mut sel = Select::new();
        /// sel.arm(&mut ra);
        /// sel.arm(&mut rb);
        /// assert_eq!(sel.select(), Selected::Arm(1));
        /// drop(sel);
        /// assert_eq!(rb.take(), Some(2));
        /// ```
        pub fn recv_arm(&self) -> RecvArm<'_, T> {
            RecvArm::new(&self.inner)
        }

        /// Receive without blocking: `Empty` when nothing is buffered and no
        /// sender is parked, `Closed` once the channel is closed and drained.
        ///
        /// ```
        /// use gosched::chan::TryRecvError;
        /// let ch = gosched::chan::<i32>(1);
        /// assert_eq!(ch.try_recv(), Err(TryRecvError::Empty));
        /// ch.send(1).unwrap();
        /// ch.close().unwrap();
        /// assert_eq!(ch.try_recv(), Ok(1));
        /// assert_eq!(ch.try_recv(), Err(TryRecvError::Closed));
        /// ```
        pub fn try_recv(&self) -> Result<T, TryRecvError> {
            crate::coro::preempt_point();
            self.inner.try_recv().map_err(|closed| {
                if closed {
                    TryRecvError::Closed
                } else {
                    TryRecvError::Empty
                }
            })
        }

        /// Receive, giving up after `timeout`: `Err(Timeout)` then, `Err(Closed)`
        /// once the channel is closed and drained.
        ///
        /// ```
        /// use std::time::Duration;
        /// use gosched::chan::RecvTimeoutError;
        /// gosched::testing::run_virtual(|| {
        ///     let ch = gosched::chan::<i32>(0);
        ///     let tx = ch.clone();
        ///     gosched::go(move || {
        ///         gosched::time::sleep(Duration::from_secs(2));
        ///         tx.send(9).unwrap();
        ///     });
        ///     let early = ch.recv_timeout(Duration::from_secs(1));
        ///     assert_eq!(early, Err(RecvTimeoutError::Timeout));
        ///     assert_eq!(ch.recv_timeout(Duration::from_secs(5)), Ok(9));
        /// });
        /// ```
        pub fn recv_timeout(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
            let deadline = crate::sched::timers::deadline_after(timeout);
            let mut fut = std::pin::pin!(self.recv_async());
            let mut sleep = std::pin::pin!(crate::sched::timers::sleep_until(deadline));
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

        /// Iterate over received values until the channel is closed and drained
        /// (`for v in &ch` does the same).
        ///
        /// ```
        /// let ch = gosched::chan::<i32>(3);
        /// for i in 0..3 {
        ///     ch.send(i).unwrap();
        /// }
        /// ch.close().unwrap();
        /// let got: Vec<i32> = ch.iter().collect();
        /// assert_eq!(got, [0, 1, 2]);
        /// ```
        pub fn iter(&self) -> Iter<'_, T> {
            Iter { inner: &self.inner }
        }
    };
}

impl<T> Chan<T> {
    common_methods!();
    send_methods!();
    recv_methods!();

    /// A new sending handle on this channel (as `split`, without consuming
    /// `self`).
    pub(crate) fn new_sender(&self) -> Sender<T> {
        self.inner.senders.fetch_add(1, Relaxed);
        Sender {
            inner: self.inner.clone(),
        }
    }

    /// Directional views of this channel (the `Chan` itself is consumed).
    ///
    /// ```
    /// let (tx, rx) = gosched::chan::<i32>(1).split();
    /// tx.send(1).unwrap();
    /// assert_eq!(rx.recv(), Some(1));
    /// drop(tx); // the last handle able to send: the channel closes
    /// assert_eq!(rx.recv(), None);
    /// ```
    pub fn split(self) -> (Sender<T>, Receiver<T>) {
        // Two new handles, then `self` drops as usual: the counts never reach
        // zero on the way (and `self`'s own reference is released).
        let tx = self.new_sender();
        self.inner.receivers.fetch_add(1, Relaxed);
        let rx = Receiver {
            inner: self.inner.clone(),
        };
        (tx, rx)
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

/// The last reference to the channel is going: nobody is left to see it
/// disconnect. Every handle holds one reference, and nothing else holds
/// one but a timer channel's heap entry, for the moment it runs (it holds a
/// `Weak`, see `core::ChanTimer`, and only while the timer is `HEAPED`,
/// when this returns false, or after it fired) — so a strong count of one
/// means no other handle exists, none can be made (cloning takes a handle),
/// and no operation can be parked (a parked operation borrows a handle).
/// Skipping the two `disconnect`s (each a lock round trip) halves the cost
/// of dropping a short-lived channel (`time::after` in a `select!` loop, a
/// reply channel).
#[inline]
fn drop_quietly<T>(inner: &Arc<Inner<T>>) -> bool {
    if Arc::strong_count(inner) != 1 {
        return false;
    }
    // `strong_count` is a relaxed load: synchronise with the other handles'
    // releases (as `Arc`'s own drop does) before reading what they did,
    // such as a receive that put the timer on a heap.
    crate::loom::sync::atomic::fence(Acquire);
    inner.nothing_to_stop()
}

impl<T> Drop for Chan<T> {
    fn drop(&mut self) {
        if drop_quietly(&self.inner) {
            return;
        }
        drop_sender(&self.inner);
        drop_receiver(&self.inner);
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        if drop_quietly(&self.inner) {
            return;
        }
        drop_sender(&self.inner);
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        if drop_quietly(&self.inner) {
            return;
        }
        drop_receiver(&self.inner);
    }
}

macro_rules! debug_impl {
    ($t:ident) => {
        impl<T> fmt::Debug for $t<T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let len = self.inner.len();
                let closed = self.inner.lock().closed;
                f.debug_struct(stringify!($t))
                    .field("len", &len)
                    .field("cap", &self.inner.cap)
                    .field("closed", &closed)
                    .finish()
            }
        }
    };
}
debug_impl!(Chan);
debug_impl!(Sender);
debug_impl!(Receiver);

/// Iterator over received values (blocking), from [`Chan::iter`] or
/// [`Receiver::iter`]; it ends when the channel is closed and drained.
///
/// ```
/// let (tx, rx) = gosched::chan::<u32>(0).split();
/// let h = gosched::go(move || (1..=4).for_each(|i| tx.send(i).unwrap()));
/// let sum: u32 = rx.iter().sum(); // ends when the goroutine drops `tx`
/// assert_eq!(sum, 10);
/// h.join().unwrap();
/// ```
pub struct Iter<'a, T> {
    inner: &'a Arc<Inner<T>>,
}

impl<T> Iterator for Iter<'_, T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        let mut out = None;
        if !self.inner.recv_now(&mut out) {
            crate::block_on(RecvRef {
                inner: self.inner,
                out: &mut out,
                waiter: None,
            });
        }
        out
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
