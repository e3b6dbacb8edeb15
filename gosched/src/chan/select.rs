//! Go's `select`: wait on several channel operations, complete exactly one.
//!
//! # Protocol
//!
//! A select is a future over a slice of arms (`RecvArm` / `SendArm`, one per
//! case), plus optional `default` and `after(d)`. Its poll runs Go's `selectgo`
//! in three passes:
//!
//! 1. **Poll** every arm once, in a fresh uniformly random order, with the
//!    non-blocking operation (`try_recv` / `try_send`). The first that completes
//!    wins. A random permutation makes every ready arm equally likely.
//! 2. Nothing ready: **`default`** wins if there is one.
//! 3. **Register** a waiter on every arm's channel, all sharing one `Park` whose
//!    `sel` word decides the outcome (`core.rs`): a channel that wants to complete
//!    an arm's waiter must first CAS `sel` from `SEL_WAITING` to `arm + 1`.
//!    Registration on a channel happens under that channel's lock; if the arm is
//!    ready by then (the channel changed since pass 1), we do not complete it from
//!    here — that would need our own claim and the counterpart's at once — but
//!    CAS our own `sel` to `SEL_RETRY`, unregister everything and go back to
//!    pass 1. Then park.
//!
//! On wake-up, `sel` names the winning arm: its waiter was completed (value
//! handed over, value taken, or CLOSED) in the same critical section as the
//! claim, so locking that channel once makes the result visible. Every other arm
//! is unregistered (O(1) unlink; a waiter a channel already popped as stale is
//! simply gone). Since one CAS decides, no channel ever hands a value to an arm
//! that did not win, and no value is taken from a channel whose arm lost.
//!
//! `after(d)` is a timer polled by the select itself: when it fires, the select
//! CASes `sel` to `SEL_CANCELLED`; if that fails an arm won first and wins.
//! Dropping a pending select does the same CAS; if an arm had already won, a
//! received value is put back into its channel (`Inner::put_back`), so an
//! abandoned async select loses nothing.
//!
//! On a buffered channel an arm can also win by *notification* (`NOTIFIED`, see
//! `core.rs`): the ring changed, and the arm retries its operation; if another
//! operation got there first, the select starts over from pass 1. Values of send arms that did not win are
//! dropped with their arm, as Go discards the evaluated operands of losing cases.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
#[cfg(not(loom))]
use std::time::{Duration, Instant};

use crate::sched::timers::deadline_after;

use super::core::{
    Inner, Park, Waiter, CLOSED, DONE, SEL_CANCELLED, SEL_RETRY, SEL_WAITING, WAITING,
};
use super::SendError;
use crate::loom::sync::atomic::Ordering::*;
use crate::loom::sync::Arc;

/// Which case a select took.
///
/// ```
/// use gosched::chan::{chan, Select, Selected};
/// let ch = chan::<i32>(1);
/// let mut arm = ch.recv_arm();
/// let mut sel = Select::new();
/// sel.arm(&mut arm);
/// assert_eq!(sel.try_select(), Selected::Default); // nothing to receive yet
/// ch.send(1).unwrap();
/// assert_eq!(sel.try_select(), Selected::Arm(0));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selected {
    /// The arm with this index (in the order the arms were given).
    Arm(usize),
    /// Nothing was ready and the select had a `default` case.
    Default,
    /// The `after` duration passed first.
    Timeout,
}

mod sealed {
    use super::Park;
    use crate::loom::sync::Arc;

    /// The operations of a select case (private: only this crate implements and
    /// calls them).
    pub trait Arm {
        /// Pass 1: complete now without blocking, if possible.
        fn try_complete(&mut self) -> bool;
        /// Pass 3: under the channel lock, park a waiter as `arm` of `park`. False
        /// when the arm turned out to be ready (then `park.sel` was set to
        /// `SEL_RETRY`) or the select was already decided.
        fn register(&mut self, park: &Arc<Park>, arm: usize) -> bool;
        /// This arm lost (or the select is being retried): withdraw its waiter.
        fn unregister(&mut self);
        /// This arm won while parked: collect the result. False if it was only
        /// notified and the retried operation could not complete (the select
        /// starts over).
        fn finish(&mut self) -> bool;
        /// The arm won but the select is dropped before returning: undo what can
        /// be undone (a received value goes back into the channel; a mere
        /// notification is passed on, not acted upon).
        fn drop_won(&mut self);
    }
}

/// One case of a select: [`RecvArm`] or [`SendArm`] (sealed: implemented only by
/// this crate).
///
/// It lets receive and send cases of different element types sit in one list
/// of `&mut dyn SelectArm`, as [`Select`] and [`SelectFut`] take them.
///
/// ```
/// use gosched::chan::{chan, SelectArm, SelectFut, Selected};
/// let (nums, words) = (chan::<i32>(0), chan::<&str>(1));
/// let (mut r, mut s) = (nums.recv_arm(), words.send_arm("hi"));
/// let mut arms: [&mut dyn SelectArm; 2] = [&mut r, &mut s];
/// let got = gosched::block_on(SelectFut::new(&mut arms, false));
/// assert_eq!(got, Selected::Arm(1)); // only the send could proceed
/// assert_eq!(words.try_recv(), Ok("hi"));
/// ```
pub trait SelectArm: sealed::Arm + Send {}

impl<T: Send> SelectArm for RecvArm<'_, T> {}
impl<T: Send> SelectArm for SendArm<'_, T> {}

// ---- arms --------------------------------------------------------------------------------

/// A receive case: `recv(ch) -> v`. Get the result with [`take`](Self::take)
/// after the select chose this arm. Made by `recv_arm` on a [`Chan`](super::Chan)
/// or [`Receiver`](super::Receiver).
///
/// ```
/// use gosched::chan::{chan, Select};
/// let ch = chan::<u8>(1);
/// ch.send(9).unwrap();
/// let mut arm = ch.recv_arm();
/// let mut sel = Select::new();
/// sel.arm(&mut arm);
/// sel.select();
/// drop(sel);
/// assert_eq!(arm.take(), Some(9));
/// ```
pub struct RecvArm<'c, T> {
    inner: &'c Inner<T>,
    waiter: Option<Arc<Waiter<T>>>,
    output: Option<Option<T>>,
}

/// A send case: `send(ch, value) -> res`. If another arm wins, the value is
/// dropped with the arm (Go evaluates and discards it too). Made by
/// `send_arm` on a [`Chan`](super::Chan) or [`Sender`](super::Sender).
///
/// ```
/// use gosched::chan::{chan, Select, Selected};
/// let (full, free) = (chan::<i32>(1), chan::<i32>(1));
/// full.send(0).unwrap();
/// let (mut a, mut b) = (full.send_arm(1), free.send_arm(2));
/// let mut sel = Select::new();
/// sel.arm(&mut a);
/// sel.arm(&mut b);
/// assert_eq!(sel.select(), Selected::Arm(1));
/// drop(sel);
/// assert!(!a.is_selected() && b.take().is_ok());
/// assert_eq!((full.len(), free.try_recv()), (1, Ok(2))); // `1` was never sent
/// ```
pub struct SendArm<'c, T> {
    inner: &'c Inner<T>,
    value: Option<T>,
    waiter: Option<Arc<Waiter<T>>>,
    output: Option<Result<(), SendError<T>>>,
}

impl<'c, T> RecvArm<'c, T> {
    pub(super) fn new(inner: &'c Inner<T>) -> Self {
        RecvArm {
            inner,
            waiter: None,
            output: None,
        }
    }

    /// Whether the select chose this arm (and its result is not taken yet).
    ///
    /// ```
    /// use gosched::chan::{chan, Select};
    /// let (a, b) = (chan::<i32>(1), chan::<i32>(1));
    /// a.send(1).unwrap();
    /// let (mut ra, mut rb) = (a.recv_arm(), b.recv_arm());
    /// let mut sel = Select::new();
    /// sel.arm(&mut ra);
    /// sel.arm(&mut rb);
    /// sel.select();
    /// drop(sel);
    /// assert!(ra.is_selected() && !rb.is_selected());
    /// ra.take();
    /// assert!(!ra.is_selected()); // taken
    /// ```
    pub fn is_selected(&self) -> bool {
        self.output.is_some()
    }

    /// The received value (`None`: the channel is closed and drained).
    ///
    /// # Panics
    /// If the select did not choose this arm, or the result was taken already.
    ///
    /// ```
    /// use gosched::chan::{chan, Select};
    /// let ch = chan::<i32>(1);
    /// ch.close().unwrap();
    /// let mut arm = ch.recv_arm();
    /// let mut sel = Select::new();
    /// sel.arm(&mut arm);
    /// sel.select(); // a closed channel is always ready
    /// drop(sel);
    /// assert_eq!(arm.take(), None);
    /// ```
    pub fn take(&mut self) -> Option<T> {
        self.output
            .take()
            .expect("RecvArm::take: this arm was not selected (or its result was already taken)")
    }
}

impl<'c, T> SendArm<'c, T> {
    pub(super) fn new(inner: &'c Inner<T>, value: T) -> Self {
        SendArm {
            inner,
            value: Some(value),
            waiter: None,
            output: None,
        }
    }

    /// Whether the select chose this arm (and its result is not taken yet).
    ///
    /// ```
    /// use gosched::chan::{chan, Select};
    /// let ch = chan::<i32>(0); // unbuffered, and nobody receives
    /// let mut arm = ch.send_arm(1);
    /// let mut sel = Select::new();
    /// sel.arm(&mut arm);
    /// sel.try_select(); // `default`: nothing was ready
    /// drop(sel);
    /// assert!(!arm.is_selected());
    /// ```
    pub fn is_selected(&self) -> bool {
        self.output.is_some()
    }

    /// `Ok(())` if the value was sent; `Err` with the value if the channel is
    /// closed (a send case on a closed channel is ready, as in Go — where it
    /// panics; here it reports).
    ///
    /// # Panics
    /// If the select did not choose this arm, or the result was taken already.
    ///
    /// ```
    /// use gosched::chan::{chan, Select, SendError};
    /// let ch = chan::<i32>(1);
    /// ch.close().unwrap();
    /// let mut arm = ch.send_arm(5);
    /// let mut sel = Select::new();
    /// sel.arm(&mut arm);
    /// sel.select(); // a send on a closed channel is ready: it fails
    /// drop(sel);
    /// assert_eq!(arm.take(), Err(SendError(5)));
    /// ```
    pub fn take(&mut self) -> Result<(), SendError<T>> {
        self.output
            .take()
            .expect("SendArm::take: this arm was not selected (or its result was already taken)")
    }
}

impl<T: Send> sealed::Arm for RecvArm<'_, T> {
    fn try_complete(&mut self) -> bool {
        match self.inner.try_recv() {
            Ok(v) => self.output = Some(Some(v)),
            Err(true) => self.output = Some(None),
            Err(false) => return false,
        }
        true
    }

    fn register(&mut self, park: &Arc<Park>, arm: usize) -> bool {
        let w = Waiter::select(park, arm);
        let mut s = self.inner.lock_to_park_recv();
        if park.sel.load(Acquire) != SEL_WAITING {
            return false;
        }
        if !self.inner.park_recv(&mut s, &w, Some(park)) {
            let _ = park
                .sel
                .compare_exchange(SEL_WAITING, SEL_RETRY, AcqRel, Acquire);
            return false;
        }
        self.waiter = Some(w);
        true
    }

    fn unregister(&mut self) {
        if let Some(w) = self.waiter.take() {
            let mut s = self.inner.lock();
            self.inner.unpark(&mut s, &w, true);
            debug_assert_eq!(w.state(), WAITING, "a losing arm was completed");
        }
    }

    fn finish(&mut self) -> bool {
        let w = self.waiter.take().expect("the winning arm was registered");
        // The claimer completed `w` in the critical section that claimed it:
        // taking the lock once makes that visible.
        let s = self.inner.lock();
        let state = w.state();
        debug_assert_ne!(
            state, WAITING,
            "a claimed waiter is completed under the claimer's lock"
        );
        if state == DONE {
            // SAFETY: DONE, read under the lock: `w` is unqueued and ours.
            self.output = Some(unsafe { w.take_value() });
            return true;
        }
        drop(s);
        // CLOSED or NOTIFIED: look again (a closed buffer may still hold values).
        self.try_complete()
    }

    fn drop_won(&mut self) {
        self.release();
    }
}

impl<T: Send> sealed::Arm for SendArm<'_, T> {
    fn try_complete(&mut self) -> bool {
        let v = self.value.take().expect("SendArm polled after completion");
        match self.inner.try_send(v) {
            Ok(()) => self.output = Some(Ok(())),
            Err((v, false)) => self.output = Some(Err(SendError(v))),
            Err((v, true)) => {
                self.value = Some(v);
                return false;
            }
        }
        true
    }

    fn register(&mut self, park: &Arc<Park>, arm: usize) -> bool {
        let w = Waiter::select(park, arm);
        let mut s = self.inner.lock();
        if park.sel.load(Acquire) != SEL_WAITING {
            return false;
        }
        // SAFETY: `w` is not published yet: only we can touch its slot.
        unsafe { w.put_value(self.value.take().expect("SendArm registered twice")) };
        if !self.inner.park_send(&mut s, &w, Some(park)) {
            // SAFETY: `w` was not queued.
            self.value = unsafe { w.take_value() };
            let _ = park
                .sel
                .compare_exchange(SEL_WAITING, SEL_RETRY, AcqRel, Acquire);
            return false;
        }
        self.waiter = Some(w);
        true
    }

    fn unregister(&mut self) {
        if let Some(w) = self.waiter.take() {
            let mut s = self.inner.lock();
            self.inner.unpark(&mut s, &w, false);
            debug_assert_eq!(w.state(), WAITING, "a losing arm was completed");
            // SAFETY: `w` is unqueued (removed now, or popped as stale) and we hold
            // the lock: the slot is ours. The value goes back into the arm.
            self.value = unsafe { w.take_value() };
        }
    }

    fn finish(&mut self) -> bool {
        let w = self.waiter.take().expect("the winning arm was registered");
        let s = self.inner.lock();
        let state = w.state();
        debug_assert_ne!(
            state, WAITING,
            "a claimed waiter is completed under the claimer's lock"
        );
        // SAFETY: a final state read under the lock: `w` is unqueued and ours.
        let back = unsafe { w.take_value() };
        drop(s);
        match state {
            DONE => {
                self.output = Some(Ok(()));
                true
            }
            CLOSED => {
                let v = back.expect("closed sender gets its value back");
                self.output = Some(Err(SendError(v)));
                true
            }
            _ => {
                // NOTIFIED: room was made; try again.
                self.value = back;
                self.try_complete()
            }
        }
    }

    fn drop_won(&mut self) {
        self.release();
    }
}

impl<T> RecvArm<'_, T> {
    /// Withdraw the waiter, whatever happened to it (see `Inner::release_recv`).
    fn release(&mut self) {
        if let Some(w) = self.waiter.take() {
            self.inner.release_recv(&w);
        }
    }
}

impl<T> Drop for RecvArm<'_, T> {
    fn drop(&mut self) {
        // Only finds a waiter if the select future was leaked.
        self.release();
    }
}

impl<T> SendArm<'_, T> {
    /// Withdraw the waiter (see `Inner::release_send`); a failed send's value is
    /// dropped with the arm.
    fn release(&mut self) {
        if let Some(w) = self.waiter.take() {
            self.inner.release_send(&w);
        }
    }
}

impl<T> Drop for SendArm<'_, T> {
    fn drop(&mut self) {
        self.release();
    }
}

impl<T> fmt::Debug for RecvArm<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecvArm")
            .field("selected", &self.output.is_some())
            .finish()
    }
}

impl<T> fmt::Debug for SendArm<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendArm")
            .field("selected", &self.output.is_some())
            .finish()
    }
}

// ---- the select future -------------------------------------------------------------------

/// The future behind `select!` / `select_async!` and [`Select`].
///
/// Cancel-safe: dropping it while it waits unregisters every arm, and a value
/// a receive arm had already been handed goes back into its channel.
///
/// ```
/// use std::time::Duration;
/// use gosched::chan::{chan, Select};
/// gosched::testing::run_virtual_async(async {
///     let ch = chan::<u8>(1);
///     let mut arm = ch.recv_arm();
///     let mut sel = Select::new();
///     sel.arm(&mut arm);
///     // Nothing comes within a second: the timeout drops the select.
///     let r = gosched::time::timeout(Duration::from_secs(1), sel.select_async()).await;
///     assert!(r.is_err());
///     drop(sel);
///     assert!(!arm.is_selected());
///     ch.send_async(1).await.unwrap();
///     assert_eq!(ch.len(), 1); // buffered: no stale waiter of the select took it
/// });
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct SelectFut<'s, 'a> {
    arms: &'s mut [&'a mut dyn SelectArm],
    default: bool,
    #[cfg(not(loom))]
    sleep: Option<crate::sched::timers::Sleep>,
    park: Option<Arc<Park>>,
}

impl<'s, 'a> SelectFut<'s, 'a> {
    /// A select over `arms`; with `default`, it never parks.
    ///
    /// ```
    /// use gosched::chan::{chan, SelectArm, SelectFut, Selected};
    /// let ch = chan::<u8>(1);
    /// let mut arm = ch.recv_arm();
    /// let mut arms: [&mut dyn SelectArm; 1] = [&mut arm];
    /// let now = gosched::block_on(SelectFut::new(&mut arms, true));
    /// assert_eq!(now, Selected::Default); // empty, and `default` was given
    /// ch.send(1).unwrap();
    /// let got = gosched::block_on(SelectFut::new(&mut arms, false));
    /// assert_eq!(got, Selected::Arm(0));
    /// assert_eq!(arm.take(), Some(1));
    /// ```
    pub fn new(arms: &'s mut [&'a mut dyn SelectArm], default: bool) -> Self {
        SelectFut {
            arms,
            default,
            #[cfg(not(loom))]
            sleep: None,
            park: None,
        }
    }

    /// Give up at `deadline` with [`Selected::Timeout`] (the `after` case).
    /// The deadline is on the runtime's clock: compute it from
    /// `gosched::time::now`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use gosched::chan::{chan, SelectArm, SelectFut, Selected};
    /// gosched::testing::run_virtual(|| {
    ///     let ch = chan::<u8>(0); // nobody sends
    ///     let mut arm = ch.recv_arm();
    ///     let mut arms: [&mut dyn SelectArm; 1] = [&mut arm];
    ///     let deadline = gosched::time::now() + Duration::from_secs(5);
    ///     let fut = SelectFut::new(&mut arms, false).deadline(deadline);
    ///     assert_eq!(gosched::block_on(fut), Selected::Timeout);
    ///     assert_eq!(gosched::time::now(), deadline);
    /// });
    /// ```
    #[cfg(not(loom))]
    pub fn deadline(mut self, deadline: Instant) -> Self {
        self.sleep = Some(crate::sched::timers::sleep_until(deadline));
        self
    }

    fn unregister_all(&mut self) {
        for arm in self.arms.iter_mut() {
            arm.unregister();
        }
    }

    /// Pass 1 in a random order. The index of the arm that completed.
    fn poll_arms(&mut self) -> Option<usize> {
        let mut order = Order::new(self.arms.len());
        order
            .as_slice()
            .iter()
            .map(|&i| i as usize)
            .find(|&i| self.arms[i].try_complete())
    }

    /// Pass 3: register a waiter on every arm, in a fresh random order, so that
    /// arms on the same channel sit in its wait queue in random order (Go
    /// registers in its poll order for the same reason). False if an arm turned
    /// ready meanwhile (it set `SEL_RETRY`).
    fn register_all(&mut self, park: &Arc<Park>) -> bool {
        let mut order = Order::new(self.arms.len());
        for &i in order.as_slice().iter() {
            if !self.arms[i as usize].register(park, i as usize) {
                return false;
            }
        }
        true
    }
}

impl Future for SelectFut<'_, '_> {
    type Output = Selected;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Selected> {
        let this = self.get_mut();
        if this.park.is_none() && !this.default {
            // Not parked yet: a long slice asked to yield yields here.
            std::task::ready!(crate::sched::preempt::poll_preempted(cx));
        }
        loop {
            if let Some(park) = this.park.clone() {
                park.set_waker(cx.waker());
                match park.sel.load(Acquire) {
                    SEL_WAITING => {
                        #[cfg(not(loom))]
                        if let Some(sleep) = &mut this.sleep {
                            if Pin::new(sleep).poll(cx).is_ready() {
                                if park
                                    .sel
                                    .compare_exchange(SEL_WAITING, SEL_CANCELLED, AcqRel, Acquire)
                                    .is_ok()
                                {
                                    this.unregister_all();
                                    this.park = None;
                                    return Poll::Ready(Selected::Timeout);
                                }
                                continue; // an arm won meanwhile
                            }
                        }
                        return crate::sched::wait::pending(
                            crate::sched::wait::WaitReason::Select,
                            cx,
                        );
                    }
                    SEL_RETRY => {
                        this.unregister_all();
                        this.park = None;
                    }
                    won => {
                        let k = won - 1;
                        let done = this.arms[k].finish();
                        this.unregister_all();
                        this.park = None;
                        if done {
                            return Poll::Ready(Selected::Arm(k));
                        }
                        // Notified, but another operation took the value (or the
                        // room) first: start over.
                    }
                }
            }
            if let Some(k) = this.poll_arms() {
                return Poll::Ready(Selected::Arm(k));
            }
            if this.default {
                return Poll::Ready(Selected::Default);
            }
            let park = Arc::new(Park::new(cx.waker()));
            // On `false` the select's own word says RETRY: the loop above
            // unregisters and starts over.
            let _ = this.register_all(&park);
            this.park = Some(park);
        }
    }
}

impl Drop for SelectFut<'_, '_> {
    fn drop(&mut self) {
        let Some(park) = self.park.take() else { return };
        match park
            .sel
            .compare_exchange(SEL_WAITING, SEL_CANCELLED, AcqRel, Acquire)
        {
            Ok(_) | Err(SEL_RETRY) | Err(SEL_CANCELLED) => {}
            Err(won) => {
                // Won, but nobody will look: undo a received value; pass a mere
                // notification on without acting on it.
                let arm = &mut self.arms[won - 1];
                arm.drop_won();
            }
        }
        self.unregister_all();
    }
}

impl fmt::Debug for SelectFut<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SelectFut")
            .field("arms", &self.arms.len())
            .field("default", &self.default)
            .field("parked", &self.park.is_some())
            .finish()
    }
}

/// A uniformly random permutation of `0..n` (inside-out Fisher–Yates), on the
/// stack for up to 64 arms.
struct Order {
    small: [u32; 64],
    big: Vec<u32>,
    n: usize,
}

impl Order {
    fn new(n: usize) -> Order {
        let mut o = Order {
            small: [0; 64],
            big: Vec::new(),
            n,
        };
        let order = o.as_slice();
        for i in 0..n {
            let j = (rand() % (i as u64 + 1)) as usize;
            order[i] = order[j];
            order[j] = i as u32;
        }
        o
    }

    fn as_slice(&mut self) -> &mut [u32] {
        if self.n <= self.small.len() {
            &mut self.small[..self.n]
        } else {
            self.big.resize(self.n, 0);
            &mut self.big
        }
    }
}

/// loom needs a deterministic model: a fixed poll order.
#[cfg(loom)]
fn rand() -> u64 {
    0
}

/// Per-thread xorshift state for the poll order (any thread will do: the
/// goroutine may migrate between calls, which only changes the random stream).
#[cfg(not(loom))]
fn rand() -> u64 {
    use std::cell::Cell;
    thread_local! {
        static STATE: Cell<u64> = const { Cell::new(0) };
    }
    STATE.with(|s| {
        let mut x = s.get();
        if x == 0 {
            // Seed from std's per-thread random hash keys and the address of the
            // state: distinct per thread, without reading the clock (which Miri's
            // isolation forbids; there the seed follows `-Zmiri-seed`).
            use std::hash::{BuildHasher, Hasher};
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_usize(s as *const Cell<u64> as usize);
            x = h.finish() | 1;
        }
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        s.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 16
    })
}

// ---- the dynamic builder ------------------------------------------------------------------

/// A select over a number of arms known only at run time (Go's
/// `reflect.Select`); `select!` covers the static case.
///
/// ```
/// use gosched::chan::{chan, Select, Selected};
/// let chans: Vec<_> = (0..8).map(|_| chan::<usize>(1)).collect();
/// chans[5].send(5).unwrap();
/// let mut arms: Vec<_> = chans.iter().map(|c| c.recv_arm()).collect();
/// let mut sel = Select::new();
/// for a in arms.iter_mut() {
///     sel.arm(a);
/// }
/// let Selected::Arm(i) = sel.select() else { unreachable!() };
/// drop(sel);
/// assert_eq!((i, arms[i].take()), (5, Some(5)));
/// ```
#[cfg(not(loom))]
#[derive(Default)]
pub struct Select<'a> {
    arms: Vec<&'a mut dyn SelectArm>,
}

#[cfg(not(loom))]
impl<'a> Select<'a> {
    /// An empty select (with no arms, `select` blocks forever, like Go's
    /// `select {}`).
    ///
    /// ```
    /// use gosched::chan::{Select, Selected};
    /// let mut sel = Select::new();
    /// assert_eq!(sel.try_select(), Selected::Default); // no arm can be ready
    /// ```
    pub fn new() -> Self {
        Select { arms: Vec::new() }
    }

    /// Add an arm; returns its index in [`Selected::Arm`].
    ///
    /// ```
    /// use gosched::chan::{chan, Select, Selected};
    /// let chans: Vec<_> = (0..3).map(|_| chan::<u8>(1)).collect();
    /// chans[2].send(7).unwrap();
    /// let mut arms: Vec<_> = chans.iter().map(|c| c.recv_arm()).collect();
    /// let mut sel = Select::new();
    /// let idx: Vec<usize> = arms.iter_mut().map(|a| sel.arm(a)).collect();
    /// assert_eq!(idx, [0, 1, 2]);
    /// assert_eq!(sel.select(), Selected::Arm(2));
    /// ```
    pub fn arm(&mut self, arm: &'a mut dyn SelectArm) -> usize {
        self.arms.push(arm);
        self.arms.len() - 1
    }

    /// Block the goroutine (or thread) until one arm completes.
    ///
    /// # Panics
    /// Inside an async task: use [`select_async`](Self::select_async).
    ///
    /// ```
    /// use gosched::chan::{chan, Select, Selected};
    /// let ch = chan::<String>(0);
    /// let tx = ch.clone();
    /// gosched::go(move || tx.send("ping".to_string()).unwrap());
    /// let mut arm = ch.recv_arm();
    /// let mut sel = Select::new();
    /// sel.arm(&mut arm);
    /// assert_eq!(sel.select(), Selected::Arm(0)); // parks until the send
    /// drop(sel);
    /// assert_eq!(arm.take().as_deref(), Some("ping"));
    /// ```
    pub fn select(&mut self) -> Selected {
        crate::coro::preempt_point();
        crate::block_on(SelectFut::new(&mut self.arms, false))
    }

    /// Complete a ready arm, or return [`Selected::Default`] at once.
    ///
    /// ```
    /// use gosched::chan::{chan, Select, Selected};
    /// let ch = chan::<i32>(1);
    /// let (mut recv, mut send) = (ch.recv_arm(), ch.send_arm(1));
    /// let mut sel = Select::new();
    /// sel.arm(&mut recv);
    /// sel.arm(&mut send);
    /// // Only the send can proceed (the buffer is empty and has room).
    /// assert_eq!(sel.try_select(), Selected::Arm(1));
    /// ```
    pub fn try_select(&mut self) -> Selected {
        crate::coro::preempt_point();
        crate::block_on(SelectFut::new(&mut self.arms, true))
    }

    /// Like `select`, giving up with [`Selected::Timeout`] after `timeout`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use gosched::chan::{chan, Select, Selected};
    /// gosched::testing::run_virtual(|| {
    ///     let ch = chan::<i32>(0); // nobody sends
    ///     let mut arm = ch.recv_arm();
    ///     let mut sel = Select::new();
    ///     sel.arm(&mut arm);
    ///     let t = gosched::time::now();
    ///     assert_eq!(sel.select_timeout(Duration::from_secs(3)), Selected::Timeout);
    ///     assert_eq!(gosched::time::since(t), Duration::from_secs(3));
    /// });
    /// ```
    pub fn select_timeout(&mut self, timeout: Duration) -> Selected {
        crate::block_on(SelectFut::new(&mut self.arms, false).deadline(deadline_after(timeout)))
    }

    /// The async form of `select`; dropping it loses nothing.
    ///
    /// ```
    /// # gosched::Runtime::new().unwrap().block_on(async {
    /// use gosched::chan::{chan, Select, Selected};
    /// let ch = chan::<i32>(0);
    /// let tx = ch.clone();
    /// gosched::spawn(async move { tx.send_async(4).await.unwrap() });
    /// let mut arm = ch.recv_arm();
    /// let mut sel = Select::new();
    /// sel.arm(&mut arm);
    /// assert_eq!(sel.select_async().await, Selected::Arm(0));
    /// drop(sel);
    /// assert_eq!(arm.take(), Some(4));
    /// # });
    /// ```
    pub fn select_async(&mut self) -> SelectFut<'_, 'a> {
        SelectFut::new(&mut self.arms, false)
    }
}

#[cfg(not(loom))]
impl fmt::Debug for Select<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Select")
            .field("arms", &self.arms.len())
            .finish()
    }
}

/// Run a select to completion: the blocking form used by `select!`.
#[cfg(not(loom))]
#[doc(hidden)]
pub fn __select_blocking(
    arms: &mut [&mut dyn SelectArm],
    default: bool,
    after: Option<Duration>,
) -> Selected {
    let fut = SelectFut::new(arms, default);
    match after {
        Some(d) => crate::block_on(fut.deadline(deadline_after(d))),
        None => crate::block_on(fut),
    }
}

/// The future used by `select_async!`.
#[cfg(not(loom))]
#[doc(hidden)]
pub fn __select_future<'s, 'a>(
    arms: &'s mut [&'a mut dyn SelectArm],
    default: bool,
    after: Option<Duration>,
) -> SelectFut<'s, 'a> {
    let fut = SelectFut::new(arms, default);
    match after {
        Some(d) => fut.deadline(deadline_after(d)),
        None => fut,
    }
}
