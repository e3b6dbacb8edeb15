//! The channel itself: its locked state, parked operations, and the send/receive
//! futures. Everything here is also compiled under `--cfg loom` and modelled.
//!
//! # Protocol
//!
//! `Inner::state` is one lock around the ring buffer, the closed flag and the two
//! wait queues (`queue.rs`). Go's invariants hold under the lock, up to *stale*
//! select waiters (below): never both queues with live waiters; values in the
//! buffer ⇒ no live parked receiver; free space ⇒ no live parked sender.
//!
//! A parked operation is a `Waiter`:
//! - `state`: `WAITING → DONE | CLOSED`, written only under the channel lock, by
//!   whoever completes it (a counterpart operation, `close`, or a disconnect);
//! - `slot`: the value — a parked sender's value waiting to be taken, or the value
//!   handed to a parked receiver. While the waiter is queued only lock holders
//!   touch it; once it is unqueued only its owner does (after an Acquire load of
//!   `state` or under the lock), so a plain cell suffices;
//! - `notify`: whom to wake — its own `Park` for a single operation, or the `Park`
//!   shared by every arm of one `select` together with the arm's index.
//!
//! **Claiming.** Before completing a waiter, a channel operation *claims* it. A
//! single operation's waiter is always claimable (it is in exactly one queue). A
//! select waiter is claimed by `compare_exchange(0 → arm + 1)` on its select's
//! `Park::sel`: the first channel to claim wins the whole select, and every other
//! arm's waiter becomes stale — a channel that pops a stale waiter drops it and
//! looks at the next one, so no value is ever handed to an arm that did not win.
//! The claim CAS is the single point where a select's outcome is decided (Go's
//! `selectDone`), which is why channels need not be locked together.
//!
//! **Waking.** The completer stores `state` (Release) under the channel lock and,
//! after unlocking, takes the waker out of the `Park` (under the Park's small lock)
//! and wakes it. A re-poll stores its waker under the same small lock and then
//! loads `state`: whichever of the two critical sections comes second sees the
//! other's effect, so a wake-up is never lost.
//!
//! **Cancel safety.** A dropped send future removes its waiter (the value was never
//! sent). A dropped receive future whose waiter was already filled puts the value
//! back (`put_back`): to another live receiver, else at the head of the buffer,
//! which may then hold `cap + 1` values for a moment. Nothing is lost.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use super::queue::{Links, WaitQueue};
use super::{CloseError, SendError};
use crate::loom::cell::UnsafeCell;
use crate::loom::lock;
use crate::loom::sync::atomic::{AtomicU8, AtomicUsize, Ordering::*};
use crate::loom::sync::{Arc, Mutex, MutexGuard};

pub(super) const WAITING: u8 = 0;
pub(super) const DONE: u8 = 1;
pub(super) const CLOSED: u8 = 2;

/// `Park::sel` while every arm may still win.
pub(super) const SEL_WAITING: usize = 0;
/// Registration found an arm ready: unregister and poll the arms again.
pub(super) const SEL_RETRY: usize = usize::MAX;
/// The select timed out or was dropped: no arm may win any more.
pub(super) const SEL_CANCELLED: usize = usize::MAX - 1;

/// Whom to wake when a parked operation completes.
#[derive(Debug)]
pub struct Park {
    /// Select only: `SEL_WAITING`, `arm + 1` of the arm that won, or one of the
    /// `SEL_*` outcomes above. Single operations leave it at 0.
    pub(super) sel: AtomicUsize,
    waker: Mutex<Option<Waker>>,
}

impl Park {
    pub(super) fn new(waker: &Waker) -> Self {
        Park {
            sel: AtomicUsize::new(SEL_WAITING),
            waker: Mutex::new(Some(waker.clone())),
        }
    }

    /// Store the waker of the current poll. Call before reading the outcome.
    pub(super) fn set_waker(&self, waker: &Waker) {
        let mut w = lock(&self.waker);
        match &*w {
            Some(old) if old.will_wake(waker) => {}
            _ => *w = Some(waker.clone()),
        }
    }

    pub(super) fn wake(&self) {
        let w = lock(&self.waker).take();
        if let Some(w) = w {
            w.wake();
        }
    }
}

enum Notify {
    Single(Park),
    Select(Arc<Park>, usize),
}

pub(super) struct Waiter<T> {
    state: AtomicU8,
    slot: UnsafeCell<Option<T>>,
    notify: Notify,
    pub(super) links: UnsafeCell<Links<T>>,
}

// SAFETY: `slot` is accessed by one party at a time (lock holders while queued, the
// owner once unqueued — see the protocol), `links` only under the channel lock, and
// `Park` is made of a lock and an atomic. Moving `T`s between threads needs `T: Send`.
unsafe impl<T: Send> Send for Waiter<T> {}
// SAFETY: as above; shared references never give out `&T`.
unsafe impl<T: Send> Sync for Waiter<T> {}

impl<T> Waiter<T> {
    pub(super) fn single(value: Option<T>, waker: &Waker) -> Arc<Self> {
        Self::with(value, Notify::Single(Park::new(waker)))
    }

    pub(super) fn select(value: Option<T>, park: &Arc<Park>, arm: usize) -> Arc<Self> {
        Self::with(value, Notify::Select(park.clone(), arm))
    }

    fn with(value: Option<T>, notify: Notify) -> Arc<Self> {
        Arc::new(Waiter {
            state: AtomicU8::new(WAITING),
            slot: UnsafeCell::new(value),
            notify,
            links: UnsafeCell::new(Links::new()),
        })
    }

    fn park(&self) -> &Park {
        match &self.notify {
            Notify::Single(p) => p,
            Notify::Select(p, _) => p,
        }
    }

    /// Under the channel lock: take the right to complete this waiter. False for
    /// a stale select waiter (another arm won, or the select gave up).
    fn claim(&self) -> bool {
        match &self.notify {
            Notify::Single(_) => true,
            Notify::Select(p, arm) => p
                .sel
                .compare_exchange(SEL_WAITING, arm + 1, AcqRel, Acquire)
                .is_ok(),
        }
    }

    /// Could a counterpart complete this waiter now (ignoring waiters of the
    /// select `own`, which cannot match itself)?
    fn is_live_for(&self, own: Option<&Arc<Park>>) -> bool {
        match &self.notify {
            Notify::Single(_) => true,
            Notify::Select(p, _) => {
                !own.is_some_and(|o| Arc::ptr_eq(o, p)) && p.sel.load(Acquire) == SEL_WAITING
            }
        }
    }

    /// Under the channel lock, after a successful `claim`.
    fn complete(&self, state: u8) {
        self.state.store(state, Release);
    }

    pub(super) fn state(&self) -> u8 {
        self.state.load(Acquire)
    }

    /// Wake the owner (after the channel lock is released).
    pub(super) fn wake(&self) {
        self.park().wake();
    }

    /// Single operations: the state, with `waker` registered if still waiting.
    fn poll_state(&self, waker: &Waker) -> u8 {
        let park = self.park();
        let mut w = lock(&park.waker);
        let s = self.state.load(Acquire);
        if s == WAITING {
            match &*w {
                Some(old) if old.will_wake(waker) => {}
                _ => *w = Some(waker.clone()),
            }
        }
        s
    }

    /// # Safety
    /// The caller is the one party allowed to touch the slot now: a channel-lock
    /// holder while the waiter is queued, or its owner once it is not (after
    /// observing a final `state` with Acquire, or under the lock).
    pub(super) unsafe fn take_value(&self) -> Option<T> {
        // SAFETY: exclusive access per the contract.
        self.slot.with_mut(|p| unsafe { (*p).take() })
    }

    /// # Safety
    /// As for [`take_value`](Self::take_value).
    unsafe fn put_value(&self, v: T) {
        // SAFETY: exclusive access per the contract.
        self.slot.with_mut(|p| unsafe { *p = Some(v) });
    }
}

/// A waiter completed under the lock, to be woken once it is released.
pub(super) type ToWake<T> = Option<Arc<Waiter<T>>>;

pub(super) struct State<T> {
    pub(super) buf: VecDeque<T>,
    pub(super) closed: bool,
    pub(super) recvq: WaitQueue<T>,
    pub(super) sendq: WaitQueue<T>,
}

pub(super) struct Inner<T> {
    state: Mutex<State<T>>,
    pub(super) cap: usize,
    /// Handles able to send / to receive (a `Chan` counts as both).
    pub(super) senders: AtomicUsize,
    pub(super) receivers: AtomicUsize,
}

impl<T> Inner<T> {
    pub(super) fn new(cap: usize) -> Self {
        Inner {
            state: Mutex::new(State {
                buf: VecDeque::with_capacity(cap.min(4096)),
                closed: false,
                recvq: WaitQueue::new(),
                sendq: WaitQueue::new(),
            }),
            cap,
            senders: AtomicUsize::new(1),
            receivers: AtomicUsize::new(1),
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State<T>> {
        lock(&self.state)
    }

    /// Sends fail when nobody can receive any more.
    fn send_closed(&self, s: &State<T>) -> bool {
        s.closed || self.receivers.load(Acquire) == 0
    }

    fn recv_closed(&self, s: &State<T>) -> bool {
        s.closed || self.senders.load(Acquire) == 0
    }

    /// Pop the first receiver we can claim.
    fn claim_receiver(s: &mut State<T>) -> ToWake<T> {
        while let Some(r) = s.recvq.pop_front() {
            if r.claim() {
                return Some(r);
            }
        }
        None
    }

    fn claim_sender(s: &mut State<T>) -> ToWake<T> {
        while let Some(w) = s.sendq.pop_front() {
            if w.claim() {
                return Some(w);
            }
        }
        None
    }

    /// Send under the lock: deliver `v` to a parked receiver or buffer it.
    /// `Ok(Some(w))`: wake `w` once the lock is released. `Err((v, full))`:
    /// `full` = it would block, else the channel is closed.
    pub(super) fn send_locked(&self, s: &mut State<T>, v: T) -> Result<ToWake<T>, (T, bool)> {
        if self.send_closed(s) {
            return Err((v, false));
        }
        if let Some(r) = Self::claim_receiver(s) {
            // SAFETY: `r` was queued and we hold the lock: the slot is ours to fill.
            unsafe { r.put_value(v) };
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
    pub(super) fn recv_locked(&self, s: &mut State<T>) -> Result<(T, ToWake<T>), bool> {
        if let Some(v) = s.buf.pop_front() {
            // A parked sender refills the freed slot (FIFO kept).
            let w = Self::claim_sender(s);
            if let Some(w) = &w {
                // SAFETY: `w` was queued and we hold the lock.
                let sv = unsafe { w.take_value() }.expect("parked sender holds its value");
                s.buf.push_back(sv);
                w.complete(DONE);
            }
            return Ok((v, w));
        }
        if let Some(w) = Self::claim_sender(s) {
            // SAFETY: `w` was queued and we hold the lock.
            let v = unsafe { w.take_value() }.expect("parked sender holds its value");
            w.complete(DONE);
            return Ok((v, Some(w)));
        }
        Err(self.recv_closed(s))
    }

    /// Could a send complete now without parking? (For select registration;
    /// waiters of the select `own` do not count.)
    pub(super) fn send_ready(&self, s: &State<T>, own: &Arc<Park>) -> bool {
        self.send_closed(s) || s.buf.len() < self.cap || s.recvq.any(|w| w.is_live_for(Some(own)))
    }

    pub(super) fn recv_ready(&self, s: &State<T>, own: &Arc<Park>) -> bool {
        !s.buf.is_empty() || self.recv_closed(s) || s.sendq.any(|w| w.is_live_for(Some(own)))
    }

    /// Non-blocking send. `Err(v)` with `full = true` when it would block.
    pub(super) fn try_send(&self, v: T) -> Result<(), (T, bool)> {
        let woken = self.send_locked(&mut self.lock(), v)?;
        if let Some(w) = woken {
            w.wake();
        }
        Ok(())
    }

    /// Non-blocking receive: `Ok(v)`, or `Err(closed)`.
    pub(super) fn try_recv(&self) -> Result<T, bool> {
        let (v, woken) = self.recv_locked(&mut self.lock())?;
        if let Some(w) = woken {
            w.wake();
        }
        Ok(v)
    }

    /// A value handed to a receive that was then abandoned: give it to another
    /// live receiver, or put it back at the head of the buffer.
    pub(super) fn put_back(&self, mut s: MutexGuard<'_, State<T>>, v: T) {
        if let Some(r) = Self::claim_receiver(&mut s) {
            // SAFETY: `r` was queued and we hold the lock.
            unsafe { r.put_value(v) };
            r.complete(DONE);
            drop(s);
            r.wake();
        } else {
            s.buf.push_front(v);
        }
    }

    pub(super) fn close(&self) -> Result<(), CloseError> {
        let woken = {
            let mut s = self.lock();
            if s.closed {
                return Err(CloseError);
            }
            s.closed = true;
            Self::fail_all(&mut s, true, true)
        };
        for w in woken {
            w.wake();
        }
        Ok(())
    }

    /// Under the lock: complete every claimable waiter of the chosen queues with
    /// CLOSED (senders keep their values in their slots). Wake them after unlocking.
    fn fail_all(s: &mut State<T>, recvs: bool, sends: bool) -> Vec<Arc<Waiter<T>>> {
        let mut woken = Vec::new();
        if recvs {
            while let Some(w) = Self::claim_receiver(s) {
                w.complete(CLOSED);
                woken.push(w);
            }
        }
        if sends {
            while let Some(w) = Self::claim_sender(s) {
                w.complete(CLOSED);
                woken.push(w);
            }
        }
        woken
    }

    /// The last sender (or receiver) handle is gone: fail the waiters that can no
    /// longer complete.
    pub(super) fn disconnect(&self, side_senders: bool) {
        let woken = {
            let mut s = self.lock();
            if side_senders {
                // Receivers drain the buffer, then see "closed".
                s.closed = true;
            }
            Self::fail_all(&mut s, side_senders, !side_senders)
        };
        for w in woken {
            w.wake();
        }
    }
}

// ---- single-operation futures --------------------------------------------------------

/// Future of [`Chan::send_async`](super::Chan::send_async).
#[must_use = "futures do nothing unless polled"]
pub struct SendFut<'a, T> {
    pub(super) inner: &'a Inner<T>,
    pub(super) value: Option<T>,
    pub(super) waiter: Option<Arc<Waiter<T>>>,
}

impl<T> Unpin for SendFut<'_, T> {}

impl<T> SendFut<'_, T> {
    /// Withdraw a pending send: the value if it was not delivered.
    pub(super) fn withdraw(self: Pin<&mut Self>) -> Option<T> {
        let this = self.get_mut();
        if let Some(v) = this.value.take() {
            return Some(v);
        }
        let w = this.waiter.take()?;
        let mut s = this.inner.lock();
        if w.state() == DONE {
            return None;
        }
        s.sendq.remove(&w);
        // SAFETY: `w` is no longer queued (removed, or completed with CLOSED) and we
        // hold the lock: the slot is ours.
        unsafe { w.take_value() }
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
                    // SAFETY: CLOSED is final and was observed with Acquire: the
                    // waiter is unqueued and the slot is ours.
                    let v = unsafe { w.take_value() }.expect("closed sender gets its value back");
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
                let w = Waiter::single(Some(v), cx.waker());
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
            s.sendq.remove(&w);
        }
    }
}

/// Future of [`Chan::recv_async`](super::Chan::recv_async).
#[must_use = "futures do nothing unless polled"]
pub struct RecvFut<'a, T> {
    pub(super) inner: &'a Inner<T>,
    pub(super) waiter: Option<Arc<Waiter<T>>>,
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
                    // SAFETY: DONE is final and was observed with Acquire.
                    let v = unsafe { w.take_value() };
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
                let w = Waiter::single(None, cx.waker());
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
        if s.recvq.remove(&w) {
            return;
        }
        if w.state() == DONE {
            // A value was handed to us but never returned: put it back.
            // SAFETY: DONE (read under the lock) means unqueued: the slot is ours.
            if let Some(v) = unsafe { w.take_value() } {
                self.inner.put_back(s, v);
            }
        }
    }
}
