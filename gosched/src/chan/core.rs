//! The channel itself: its locked state, parked operations, and the send/receive
//! futures. Everything here is also compiled under `--cfg loom` and modelled.
//!
//! # Protocol
//!
//! `Inner::state` is one lock around the closed flag, the two wait queues
//! (`queue.rs`) and `buf`. Two flavors share it:
//!
//! - **Unbuffered** (`cap == 0`, `ring == None`): everything happens under the
//!   lock, as in Go's `chan.go`. A send hands its value straight into a parked
//!   receiver's slot; a receive takes a parked sender's value. `buf` only holds
//!   values put back by cancelled receives.
//! - **Buffered** (`ring == Some`): values live in a lock-free ring (`ring.rs`);
//!   a send or receive that neither parks nor has anyone to wake never takes the
//!   lock. `buf` is a *spill* for values put back when the ring is full (rare:
//!   cancelled receives), drained by receivers once the ring is empty.
//!   Parking and waking follow the Dekker pattern: a parking operation pushes its
//!   waiter and publishes the queue length (`recv_waiting` / `send_waiting`)
//!   under the lock, `fence(SeqCst)`, then re-checks the ring and backs out if it
//!   became ready; a completing operation changes the ring with a SeqCst
//!   read-modify-write, then reads the count with a SeqCst load (no fence: see
//!   `ring_fence`) and, if non-zero, takes the lock to serve a waiter. So
//!   either the parker sees the ring change or the changer sees the waiter.
//!   Serving a parked receiver hands it a value popped from the ring (DONE) and,
//!   in the same critical section, moves a parked sender's value into the slot
//!   that freed (`refill`, as Go's `chanrecv` does on a full buffer: a receiver's
//!   park never looks at `sendq`, so nobody else would); serving a parked sender
//!   pushes its value into the ring (DONE) — Go's direct hand-off; if a lock-free
//!   operation got there first, the waiter is completed NOTIFIED and retries. A
//!   send that sees parked receivers and an empty ring hands its value over
//!   directly under the lock instead of bouncing it through the ring (past
//!   buffered values it would overtake them). Close sets the ring's mark bit
//!   (every later push fails) under the lock.
//!
//! Go's invariants hold up to *stale* select waiters (below) and in-flight
//! lock-free operations: no live parked receiver while values are buffered, no
//! live parked sender while there is room.
//!
//! A parked operation is a `Waiter`:
//! - `state`: `WAITING → DONE | CLOSED | NOTIFIED`, written only under the
//!   channel lock, by whoever claimed it. DONE: the value was handed over/taken.
//!   CLOSED: a sender gets its value back; a receiver re-checks (the buffer may
//!   still hold values). NOTIFIED: try again (buffered channels only);
//! - `slot`: the value — a parked sender's value waiting to be taken, or the value
//!   handed to a parked receiver. While the waiter is queued only lock holders
//!   touch it; once it is unqueued only its owner does (after an Acquire load of
//!   `state` or under the lock), so a plain cell suffices;
//! - `notify`: whom to wake — a single operation's own waker, or the `Park`
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
//! after unlocking, takes the waker and wakes it.
//! - A single operation's waker lives in its `Waiter` and is guarded by the
//!   channel lock: a re-poll that finds the state WAITING takes the channel lock,
//!   looks again, and only if still WAITING stores its waker. So every store
//!   happens-before the completion (the lock's order) and none comes after it,
//!   and the completer reads the waker after unlocking without a lock of its
//!   own. (It used to sit in a `Park` behind a small lock: two atomic
//!   instructions more on every hand-off.)
//! - A select's `Park` is shared by arms on different channels, so its waker is
//!   guarded by the Park's small lock: a re-poll stores its waker there and then
//!   loads the outcome, the completer takes it there; whichever of the two
//!   critical sections comes second sees the other's effect.
//!
//! Either way a wake-up is never lost.
//!
//! A NOTIFIED select arm retries its operation; if that fails (another operation
//! got there first) the select starts over. A waiter that was NOTIFIED but is
//! dropped unobserved passes the notification on (`renotify`), so no parked
//! operation sleeps while the ring could serve it.
//!
//! **Cancel safety.** A dropped send future removes its waiter (the value was never
//! sent). A dropped receive future whose waiter was already filled puts the value
//! back (`put_back`): to another live receiver, else into the buffer (the ring, or
//! at the head of `buf`, which may then exceed `cap` for a moment). Nothing is
//! lost.
//!
//! # Moving values
//!
//! A goroutine's stack is fixed (256 KiB by default), so a `T` must not be
//! copied through a chain of by-value calls: each frame would hold its own copy
//! (one blocking `send` of a `T` used to take 8–12 `size_of::<T>()` of stack in
//! a release build, 42× in a debug build). Go copies an element with
//! `typedmemmove` from the sender's variable (`ep`) to its destination; we do
//! the same. A value in flight sits in one `Option<T>` slot owned by its
//! current holder — the blocking `send`'s frame (`SendRef`), a `SendFut`, a
//! parked waiter's `slot`, a ring slot — and the internal functions take
//! `&mut Option<T>` (`send_locked`, `ring_send`, `Ring::push_from`,
//! `recv_locked`, `ring_recv`, `Ring::pop_into`, `poll_send`, `poll_recv`):
//! the value moves bit for bit from slot to slot (`move_opt`, `ring::move_out`)
//! and stays with the sender when the operation cannot complete. Frames that
//! would need a `T` temporary on rare paths (`pop_buf`, `put_back`) are
//! `#[cold] #[inline(never)]` so that the common paths do not reserve it, and
//! waiters are built in their allocation (`Waiter::empty`: `Arc::new` would
//! build a `Waiter<T>` on the stack first). Measured by painting the stack
//! under a goroutine (tests/chan_large.rs holds the regression): the frames
//! below a blocking `send`/`recv` of a 64 KiB value use under 0.2× its size
//! in a release build (1–3× in a debug build), on top of the caller's own
//! variable. `try_send`/`try_recv`, the `*_async` futures' outputs, `select!`
//! arms and `*_timeout` still pass values by value: a few copies more.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll, Waker};

use super::error::CapacityError;
use super::queue::{Links, WaitQueue};
use super::ring::{Refused, Ring};
use super::{CloseError, SendError};
use crate::loom::cell::UnsafeCell;
use crate::loom::lock;
use crate::loom::sync::atomic::{fence, AtomicU8, AtomicUsize, Ordering::*};
use crate::loom::sync::{Arc, Mutex, MutexGuard};
use crate::sched::timers::TimerEntry;

pub(super) const WAITING: u8 = 0;
pub(super) const DONE: u8 = 1;
pub(super) const CLOSED: u8 = 2;
pub(super) const NOTIFIED: u8 = 3;

/// `Park::sel` while every arm may still win.
pub(super) const SEL_WAITING: usize = 0;
/// Registration found an arm ready: unregister and poll the arms again.
pub(super) const SEL_RETRY: usize = usize::MAX;
/// The select timed out or was dropped: no arm may win any more.
pub(super) const SEL_CANCELLED: usize = usize::MAX - 1;

/// Whom to wake when a parked `select` completes: shared by the waiters of
/// all its arms (a single operation keeps its waker in its `Waiter`).
#[derive(Debug)]
pub struct Park {
    /// `SEL_WAITING`, `arm + 1` of the arm that won, or one of the `SEL_*`
    /// outcomes above.
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
        store_waker(&mut lock(&self.waker), waker);
    }

    pub(super) fn wake(&self) {
        let w = lock(&self.waker).take();
        if let Some(w) = w {
            w.wake();
        }
    }
}

/// Keep `slot`'s waker if it wakes the same task as `waker`, else store a
/// clone of `waker`.
fn store_waker(slot: &mut Option<Waker>, waker: &Waker) {
    match slot {
        Some(old) if old.will_wake(waker) => {}
        _ => *slot = Some(waker.clone()),
    }
}

enum Notify {
    /// A single operation: its task's waker. Written by the owner only under
    /// the channel lock while `state` is WAITING (`poll_state`); taken by the
    /// completer in `wake`, after it completed the waiter under that lock
    /// (no Park lock: see "Waking").
    Single(UnsafeCell<Option<Waker>>),
    Select(Arc<Park>, usize),
}

pub(super) struct Waiter<T> {
    state: AtomicU8,
    slot: UnsafeCell<Option<T>>,
    notify: Notify,
    pub(super) links: UnsafeCell<Links<T>>,
}

// SAFETY: `slot` is accessed by one party at a time (lock holders while queued, the
// owner once unqueued — see the protocol), `links` only under the channel lock, a
// single operation's waker by one party at a time ("Waking"), and `Park` is made of
// a lock and an atomic. Moving `T`s between threads needs `T: Send`.
unsafe impl<T: Send> Send for Waiter<T> {}
// SAFETY: as above; shared references never give out `&T`.
unsafe impl<T: Send> Sync for Waiter<T> {}

impl<T> Waiter<T> {
    /// A single operation's waiter, slot empty (a sender moves its value in
    /// with `with_slot`).
    pub(super) fn single(waker: &Waker) -> Arc<Self> {
        Self::empty(Notify::Single(UnsafeCell::new(Some(waker.clone()))))
    }

    /// A select arm's waiter, slot empty.
    pub(super) fn select(park: &Arc<Park>, arm: usize) -> Arc<Self> {
        Self::empty(Notify::Select(park.clone(), arm))
    }

    /// A waiter with an empty slot, built in its allocation: `Arc::new` of a
    /// `Waiter` would first build it on the stack, a `T`-sized copy
    /// ("Moving values").
    #[cfg(not(loom))]
    fn empty(notify: Notify) -> Arc<Self> {
        let mut w = Arc::<Self>::new_uninit();
        let p = Arc::get_mut(&mut w).expect("fresh Arc").as_mut_ptr();
        // SAFETY: `p` points to the fresh, exclusively owned allocation; every
        // field is written once before `assume_init`. The slot is written as
        // `None` through a pointer to it, not built beside it.
        unsafe {
            std::ptr::addr_of_mut!((*p).state).write(AtomicU8::new(WAITING));
            std::ptr::addr_of_mut!((*p).notify).write(notify);
            std::ptr::addr_of_mut!((*p).links).write(UnsafeCell::new(Links::new()));
            // No reference to the uninitialised field is made: the cell is
            // `repr(transparent)` over `Option<T>` (`crate::loom::cell`).
            std::ptr::addr_of_mut!((*p).slot)
                .cast::<Option<T>>()
                .write(None);
            w.assume_init()
        }
    }

    /// loom's `Arc` and `UnsafeCell` need their constructors (models use
    /// small values).
    #[cfg(loom)]
    fn empty(notify: Notify) -> Arc<Self> {
        Arc::new(Waiter {
            state: AtomicU8::new(WAITING),
            slot: UnsafeCell::new(None),
            notify,
            links: UnsafeCell::new(Links::new()),
        })
    }

    /// A single operation's waiter holding `v` (tests).
    #[cfg(test)]
    pub(super) fn holding(v: T, waker: &Waker) -> Arc<Self> {
        let w = Self::single(waker);
        // SAFETY: `w` is ours alone.
        unsafe { w.put_value(v) };
        w
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

    /// Wake the owner. Only the party that completed this waiter under the
    /// channel lock calls it, after releasing the lock, and at most once.
    pub(super) fn wake(&self) {
        match &self.notify {
            Notify::Single(cell) => {
                // SAFETY: we completed the waiter under the channel lock, so
                // every registration made before it happens-before this read
                // (the lock's order), and none comes after it: `poll_state`
                // writes only under the lock while the state is WAITING. The
                // caller's `Arc` keeps the waiter alive.
                if let Some(w) = cell.with_mut(|p| unsafe { (*p).take() }) {
                    w.wake();
                }
            }
            Notify::Select(park, _) => park.wake(),
        }
    }

    /// Single operations of `inner`: the state, with `waker` registered if
    /// still waiting.
    fn poll_state(&self, inner: &Inner<T>, waker: &Waker) -> u8 {
        // Woken because it completed (the usual case): a final state needs no
        // waker, so skip the lock.
        let s = self.state.load(Acquire);
        if s != WAITING {
            return s;
        }
        let Notify::Single(cell) = &self.notify else {
            unreachable!("a select registers its waker in its Park");
        };
        let _s = inner.lock();
        let s = self.state.load(Acquire);
        if s == WAITING {
            // SAFETY: under the channel lock, still WAITING: nobody completed
            // the waiter, so nobody takes the waker until we unlock.
            cell.with_mut(|p| store_waker(unsafe { &mut *p }, waker));
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
    pub(super) unsafe fn put_value(&self, v: T) {
        // SAFETY: exclusive access per the contract.
        self.slot.with_mut(|p| unsafe { *p = Some(v) });
    }

    /// Runs `f` on the slot (a value moves in or out of it in place).
    ///
    /// # Safety
    /// As for [`take_value`](Self::take_value).
    pub(super) unsafe fn with_slot<R>(&self, f: impl FnOnce(&mut Option<T>) -> R) -> R {
        // SAFETY: exclusive access per the contract.
        self.slot.with_mut(|p| f(unsafe { &mut *p }))
    }
}

/// The rare put-back values (`State::buf`): `VecDeque::pop_front` returns
/// the value by value, so it runs in a frame of its own, which the common
/// paths do not reserve ("Moving values").
#[cold]
#[inline(never)]
fn pop_buf<T>(s: &mut State<T>, out: &mut Option<T>) {
    let v = s.buf.pop_front();
    debug_assert!(out.is_none());
    // SAFETY: `out` holds `None` (nothing to drop).
    unsafe { std::ptr::write(out, v) };
}

/// Moves `src`'s value (if any) into `dst`, which holds none, bit for bit:
/// no copy of the value on the stack ("Moving values" above).
#[inline(always)]
pub(super) fn move_opt<T>(src: &mut Option<T>, dst: &mut Option<T>) {
    debug_assert!(dst.is_none(), "move_opt over a value");
    // SAFETY: two distinct `&mut` (no overlap); `dst` holds `None`, so
    // overwriting it drops nothing; `src`'s value, now at `dst`, is forgotten
    // by overwriting it with `None` without a drop.
    unsafe {
        std::ptr::copy_nonoverlapping(src as *const Option<T>, dst as *mut Option<T>, 1);
        std::ptr::write(src, None);
    }
}

/// A waiter completed under the lock, to be woken once it is released.
pub(super) type ToWake<T> = Option<Arc<Waiter<T>>>;

pub(super) struct State<T> {
    /// Unbuffered: values put back by cancelled receives. Buffered: the spill.
    pub(super) buf: VecDeque<T>,
    pub(super) closed: bool,
    pub(super) recvq: WaitQueue<T>,
    pub(super) sendq: WaitQueue<T>,
    /// A timer channel (`time::after`) whose timer a parked receiver put on a
    /// heap (`Inner::timer`): that heap entry, weakly (the heap owns it: if
    /// the heap drops it unrun, its closure's drop must run, see
    /// `ChanTimer`). It is stopped when the last handle able to receive is
    /// dropped, so an unreferenced timer is freed at once (Go 1.23) instead
    /// of living until it fires. Taken under the lock, stopped after it is
    /// released.
    pub(super) timer: Option<std::sync::Weak<TimerEntry>>,
}

pub(super) struct Inner<T> {
    state: Mutex<State<T>>,
    /// The buffer of a buffered channel (`None`: unbuffered). Boxed: the
    /// ring keeps its two indices 128 bytes apart (`ring.rs`), and inline
    /// that made every channel, unbuffered ones too, hundreds of bytes
    /// larger (W13's 100,000 cap-0 channels per round: 0.49x the time
    /// boxed, when the indices were also 128-aligned).
    ring: Option<Box<Ring<T>>>,
    pub(super) cap: usize,
    /// Handles able to send / to receive (a `Chan` counts as both).
    pub(super) senders: AtomicUsize,
    pub(super) receivers: AtomicUsize,
    /// Buffered: `recvq`/`sendq`/`buf` lengths, published under the lock for the
    /// lock-free paths (see the protocol).
    recv_waiting: AtomicUsize,
    send_waiting: AtomicUsize,
    spilled: AtomicUsize,
    /// `Some` for a timer channel (`time::after`): its timer, which goes on a
    /// heap only once a receiver parks (`ChanTimer`).
    #[cfg(not(loom))]
    timer: Option<Box<ChanTimer<T>>>,
}

/// `ChanTimer::state`: on no heap; nobody has waited for it yet.
#[cfg(not(loom))]
const TIMER_IDLE: u8 = 0;
/// A receiver parked: an entry fires it from a timer heap at `when`.
#[cfg(not(loom))]
const TIMER_HEAPED: u8 = 1;
/// Its value was sent (or nobody can receive it any more): final.
#[cfg(not(loom))]
const TIMER_FIRED: u8 = 2;

/// The timer of a timer channel (`time::after`), Go 1.23's lazy timer
/// channels: it goes on a timer heap only when a receiver is about to park
/// on the channel. Until then nothing but the channel knows about it, and
/// every receive that finds the buffer empty — `try_recv`, a blocking or
/// async receive's first look, a `select!` arm, `len`, `is_closed` — checks
/// the deadline itself and, if it has passed, fires the timer there (Go's
/// `maybeRunChan`). So an `after` dropped before anyone waits on it never
/// touches a heap or a lock (T1: most `after`s in a `select!` loop are
/// dropped unreceived), and one that is waited on costs what it cost before.
///
/// Protocol. `state` goes `IDLE → HEAPED → FIRED` or `IDLE → FIRED`, and
/// `HEAPED → IDLE` when a heap drops the entry unrun:
/// - `IDLE → HEAPED`: a receive about to park (`heap_timer`, before it takes
///   the channel lock: adding to a heap may start an M) wins a CAS and puts
///   the entry (`arm`, holding a `Weak` of the channel) on a heap running on
///   the timer's clock (`DeadlineClock`: the real one, or the virtual
///   runtime that made it — not the parker's), then records it in
///   `State::timer` under the lock. If the deadline has come already it
///   fires the timer instead. Then it parks by the ring's Dekker protocol:
///   a value the entry sends from then on is either seen by the park's
///   re-check or serves the parked waiter. So a parked receiver's timer is
///   on a heap, or has fired — no wake-up is lost.
/// - `→ FIRED` by `swap`: whoever swaps first (a heap entry's run, a
///   receive that found it due, the last receiver's drop) owns the firing;
///   every later one does nothing. Firing sends `value(when)` as a
///   non-blocking send (a full or closed channel drops it, as Go's
///   `sendTime` does) and then releases the timer's own count in `senders`.
///   The count keeps the channel open while the timer may still send, as a
///   `Sender` handle would: `let (_, rx) = after(d).split()` still receives.
/// - `HEAPED → IDLE`: the entry's closure was dropped without firing (its
///   runtime shut down and cleared the heap; or `stop`, when the last
///   receiver went). Its drop guard (`Unheap`) puts the timer back to IDLE
///   and completes the parked receivers NOTIFIED, so they look again and
///   the next one to park heaps it anew on a live heap.
#[cfg(not(loom))]
pub(crate) struct ChanTimer<T> {
    /// The deadline, ns on `clock`.
    when: u64,
    state: AtomicU8,
    /// The value a firing sends (`after`: the deadline as an `Instant`, as
    /// Go's `sendTime` sends `Now() - lateness`).
    value: fn(u64) -> T,
    /// The clock `when` is on, and the heaps that run on it.
    clock: crate::sched::timers::DeadlineClock,
    /// Builds the heap entry that fires the timer.
    arm: fn(&std::sync::Weak<Inner<T>>) -> std::sync::Arc<TimerEntry>,
    /// The channel itself, for the heap entry (weak: the heap must not keep
    /// a dropped channel alive).
    chan: std::sync::Weak<Inner<T>>,
}

/// `ChanTimer::arm` for a channel of `T`.
#[cfg(not(loom))]
fn arm_chan_timer<T: Send + 'static>(
    chan: &std::sync::Weak<Inner<T>>,
) -> std::sync::Arc<TimerEntry> {
    let guard = Unheap(chan.clone());
    TimerEntry::call(
        move || {
            if let Some(inner) = guard.0.upgrade() {
                if let Some(t) = &inner.timer {
                    inner.fire_timer(t);
                }
            }
        },
        None,
    )
}

/// Held by a timer channel's heap entry (its closure): dropped unfired, it
/// takes the timer off the heaps (see `ChanTimer`, `HEAPED → IDLE`).
#[cfg(not(loom))]
struct Unheap<T>(std::sync::Weak<Inner<T>>);

#[cfg(not(loom))]
impl<T> Drop for Unheap<T> {
    fn drop(&mut self) {
        let Some(inner) = self.0.upgrade() else {
            return;
        };
        if let Some(t) = &inner.timer {
            if t.state
                .compare_exchange(TIMER_HEAPED, TIMER_IDLE, AcqRel, Acquire)
                .is_ok()
            {
                inner.notify_receivers();
            }
        }
    }
}

/// The completing side's half of the Dekker pair (see the protocol). The ring
/// update before it was a SeqCst read-modify-write (`Ring::push`/`pop`'s CAS on
/// `tail`/`head`), and the waiter-count load after it is SeqCst too
/// (`waiting_after_ring_update`); the parking side stores the count, then
/// `fence(SeqCst)`, then reads the ring. By C++20's rules for SeqCst operations
/// and fences ([atomics.order] p4) one of the two sees the other, with no fence
/// on this side — and on x86-64 a SeqCst load is a plain load, so this costs
/// nothing (what the old `compiler_fence` shortcut got by the hardware's
/// argument, now by the language's). loom treats SeqCst accesses as AcqRel, so
/// under loom a real fence stands in.
#[inline(always)]
fn ring_fence() {
    #[cfg(loom)]
    fence(SeqCst);
}

/// The waiter count read right after a ring update (the load of the Dekker
/// pair; see `ring_fence`).
#[inline(always)]
fn waiting_after_ring_update(count: &AtomicUsize) -> usize {
    count.load(SeqCst)
}

/// What the lock-free part of a buffered send did (the value stays with the
/// sender unless `Done`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sent {
    Done,
    Full,
    Closed,
}

impl<T> Inner<T> {
    /// A channel of capacity `cap`, or why its buffer cannot be made.
    #[cfg(test)]
    pub(super) fn try_new(cap: usize) -> Result<Self, CapacityError> {
        Ok(Self::with_ring(Self::new_ring(cap)?, cap))
    }

    /// A channel of capacity `cap` in an `Arc`, or why its buffer cannot be
    /// made. Built in place: through `try_new`'s `Result` the 168-byte
    /// channel was copied three times on the stack (`memcpy`s that were 16%
    /// of `time::after`, whose channel is built the same way).
    pub(super) fn try_new_arc(cap: usize) -> Result<Arc<Self>, CapacityError> {
        let ring = Self::new_ring(cap)?;
        Ok(Arc::new(Self::with_ring(ring, cap)))
    }

    /// The buffer of a channel of capacity `cap` (`None`: unbuffered).
    fn new_ring(cap: usize) -> Result<Option<Box<Ring<T>>>, CapacityError> {
        Ok(match cap {
            0 => None,
            _ => Some(Ring::new(cap)?),
        })
    }

    /// A channel around `ring`, to be built in the caller's place.
    #[inline(always)]
    fn with_ring(ring: Option<Box<Ring<T>>>, cap: usize) -> Self {
        Inner {
            state: Mutex::new(State {
                buf: VecDeque::new(),
                closed: false,
                recvq: WaitQueue::new(),
                sendq: WaitQueue::new(),
                timer: None,
            }),
            ring,
            cap,
            senders: AtomicUsize::new(1),
            receivers: AtomicUsize::new(1),
            recv_waiting: AtomicUsize::new(0),
            send_waiting: AtomicUsize::new(0),
            spilled: AtomicUsize::new(0),
            #[cfg(not(loom))]
            timer: None,
        }
    }

    /// A timer channel (cap 1) whose timer sends `value(when)` once `clock`
    /// reaches `when` (ns): see `ChanTimer`.
    #[cfg(not(loom))]
    pub(super) fn new_timer(
        when: u64,
        clock: crate::sched::timers::DeadlineClock,
        value: fn(u64) -> T,
    ) -> Arc<Self>
    where
        T: Send + 'static,
    {
        let ring = Ring::new(1).expect("a ring of one slot");
        // One struct expression, so that the channel is built in place (see
        // `try_new_arc`).
        Arc::new_cyclic(|chan| Inner {
            // The `Chan` handle, and the timer until it fires.
            senders: AtomicUsize::new(2),
            timer: Some(Box::new(ChanTimer {
                when,
                state: AtomicU8::new(TIMER_IDLE),
                value,
                clock,
                arm: arm_chan_timer::<T>,
                chan: chan.clone(),
            })),
            ..Inner::with_ring(Some(ring), 1)
        })
    }

    /// A timer channel's timer, if its deadline has passed and nobody fired
    /// it yet: fire it now (Go's `maybeRunChan`). Whether this call fired it.
    #[inline]
    pub(super) fn fire_timer_if_due(&self) -> bool {
        #[cfg(not(loom))]
        if let Some(t) = &self.timer {
            return t.state.load(Acquire) != TIMER_FIRED
                && t.clock.reached(t.when)
                && self.fire_timer(t);
        }
        false
    }

    /// Fire `t` (see `ChanTimer`): send its value, release its sender count.
    /// Whether this call owned the firing.
    #[cfg(not(loom))]
    #[cold]
    fn fire_timer(&self, t: &ChanTimer<T>) -> bool {
        if !Self::claim_timer(t) {
            return false;
        }
        let mut v = Some((t.value)(t.when));
        if let Some(ring) = &self.ring {
            // Full (the user sent on it) or closed (the user closed it):
            // dropped, as Go's `sendTime` drops it.
            let _ = self.ring_send(ring, &mut v);
        }
        self.release_timer_sender();
        true
    }

    /// Whether the last handle may drop without `disconnect`: nobody is left
    /// to tell (see `drop_quietly` in `mod.rs`), and no heap entry of a
    /// timer channel's needs stopping (one that is `HEAPED` holds a `Weak`
    /// of the channel until its deadline).
    #[inline]
    pub(super) fn nothing_to_stop(&self) -> bool {
        #[cfg(not(loom))]
        if let Some(t) = &self.timer {
            return t.state.load(Acquire) != TIMER_HEAPED;
        }
        true
    }

    /// Take the timer to FIRED: whether this call did (and so owns the
    /// firing, or the retiring, and the release of its sender count).
    #[cfg(not(loom))]
    fn claim_timer(t: &ChanTimer<T>) -> bool {
        t.state.swap(TIMER_FIRED, AcqRel) != TIMER_FIRED
    }

    /// The timer's count in `senders` (see `ChanTimer`) goes.
    #[cfg(not(loom))]
    fn release_timer_sender(&self) {
        if self.senders.fetch_sub(1, AcqRel) == 1 {
            self.disconnect(true);
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State<T>> {
        lock(&self.state)
    }

    /// The lock, for a receive that may park (`poll_recv`, a `select!`
    /// arm's registration): a timer channel's timer goes on a heap first,
    /// outside the lock (`heap_timer`), and its entry is recorded under it.
    #[inline]
    pub(super) fn lock_to_park_recv(&self) -> MutexGuard<'_, State<T>> {
        let heaped = self.heap_timer();
        let mut s = self.lock();
        if heaped.is_some() {
            s.timer = heaped;
        }
        s
    }

    /// A receive about to park (before it takes the channel lock): put a
    /// timer channel's timer on a heap if it is on none yet, or fire it if
    /// it is due (see `ChanTimer`). The entry, to record in `State::timer`
    /// under the lock.
    #[inline]
    fn heap_timer(&self) -> Option<std::sync::Weak<TimerEntry>> {
        #[cfg(not(loom))]
        if let Some(t) = &self.timer {
            if t.state.load(Acquire) == TIMER_IDLE {
                return self.heap_timer_slow(t);
            }
        }
        None
    }

    #[cfg(not(loom))]
    #[cold]
    fn heap_timer_slow(&self, t: &ChanTimer<T>) -> Option<std::sync::Weak<TimerEntry>> {
        if t.clock.reached(t.when) {
            self.fire_timer(t);
            return None;
        }
        t.state
            .compare_exchange(TIMER_IDLE, TIMER_HEAPED, AcqRel, Acquire)
            .ok()?;
        let entry = (t.arm)(&t.chan);
        let weak = std::sync::Arc::downgrade(&entry);
        if !t.clock.add(t.when, entry) {
            // Its virtual runtime is gone (the entry dropped unrun has put
            // the timer back to IDLE): nothing will move that clock again.
            self.fire_timer(t);
            return None;
        }
        Some(weak)
    }

    /// Complete every parked receiver NOTIFIED: look again (a timer
    /// channel's timer came off its heap unfired, `Unheap`).
    #[cfg(not(loom))]
    #[cold]
    fn notify_receivers(&self) {
        let woken = self.complete_all(&mut self.lock(), true, false, NOTIFIED);
        for w in woken {
            w.wake();
        }
    }

    /// Values buffered now.
    pub(super) fn len(&self) -> usize {
        self.fire_timer_if_due();
        match &self.ring {
            Some(r) => r.len() + self.spilled.load(Acquire),
            None => self.lock().buf.len(),
        }
    }

    /// Under the lock, after changing a queue or `buf`: publish the lengths.
    fn publish(&self, s: &State<T>) {
        if self.ring.is_some() {
            self.recv_waiting.store(s.recvq.len(), Relaxed);
            self.send_waiting.store(s.sendq.len(), Relaxed);
            self.spilled.store(s.buf.len(), Release);
        }
    }

    /// Unbuffered sends fail when nobody can receive any more.
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

    // ---- unbuffered: everything under the lock ------------------------------------

    /// Send under the lock: deliver `v` to a parked receiver.
    /// Send `v`'s value under the lock. `Ok(Some(w))`: wake `w` once the lock
    /// is released. `Err(full)`: `full` = it would block, else the channel is
    /// closed; the value stays in `v`.
    fn send_locked(&self, s: &mut State<T>, v: &mut Option<T>) -> Result<ToWake<T>, bool> {
        if self.send_closed(s) {
            return Err(false);
        }
        if let Some(r) = Self::claim_receiver(s) {
            // SAFETY: `r` was queued and we hold the lock: the slot is ours to fill.
            unsafe { r.with_slot(|slot| move_opt(v, slot)) };
            r.complete(DONE);
            return Ok(Some(r));
        }
        Err(true)
    }

    /// Receive under the lock into `out`: `Ok(to_wake)`, or `Err(closed)`.
    fn recv_locked(&self, s: &mut State<T>, out: &mut Option<T>) -> Result<ToWake<T>, bool> {
        if !s.buf.is_empty() {
            pop_buf(s, out);
            return Ok(None);
        }
        if let Some(w) = Self::claim_sender(s) {
            // SAFETY: `w` was queued and we hold the lock.
            unsafe { w.with_slot(|slot| move_opt(slot, out)) };
            debug_assert!(out.is_some(), "parked sender holds its value");
            w.complete(DONE);
            return Ok(Some(w));
        }
        Err(self.recv_closed(s))
    }

    // ---- buffered: the ring, and serving parked waiters ---------------------------------

    fn ring_send(&self, ring: &Ring<T>, v: &mut Option<T>) -> Sent {
        // Go's fast path: a parked receiver gets the value directly — past an
        // empty ring only. For a moment a receiver can be parked beside buffered
        // values (another push before its `after_push`, or a sender's value that
        // `refill` moved in for it), and their pusher will serve it from the
        // ring; handing it our value first would overtake them, and they may be
        // this sender's own earlier values (FIFO broken; found by Miri).
        if self.recv_waiting.load(Relaxed) > 0 {
            let mut s = self.lock();
            if ring.is_empty() {
                if let Some(r) = Self::claim_receiver(&mut s) {
                    // SAFETY: `r` was queued and we hold the lock.
                    unsafe { r.with_slot(|slot| move_opt(v, slot)) };
                    r.complete(DONE);
                    self.publish(&s);
                    drop(s);
                    r.wake();
                    return Sent::Done;
                }
            }
            self.publish(&s);
        }
        match ring.push_from(v) {
            Ok(()) => {
                self.after_push(ring);
                Sent::Done
            }
            Err(Refused::Full) => Sent::Full,
            Err(Refused::Closed) => Sent::Closed,
        }
    }

    /// A value put back beyond the ring, if any (checked once the ring is
    /// empty), into `out`.
    fn pop_spilled(&self, out: &mut Option<T>) -> bool {
        if self.spilled.load(Acquire) == 0 {
            return false;
        }
        let mut s = self.lock();
        pop_buf(&mut s, out);
        self.publish(&s);
        out.is_some()
    }

    /// Receive from the ring into `out`: `Ok(())`, or `Err(closed)`.
    fn ring_recv(&self, ring: &Ring<T>, out: &mut Option<T>) -> Result<(), bool> {
        if ring.pop_into(out) {
            self.after_pop(ring);
            return Ok(());
        }
        if self.pop_spilled(out) {
            return Ok(());
        }
        if self.fire_timer_if_due() && ring.pop_into(out) {
            self.after_pop(ring);
            return Ok(());
        }
        if ring.is_marked() {
            // Closed for sending: a push that won the race with the mark may have
            // landed after our first look.
            if ring.pop_into(out) {
                self.after_pop(ring);
                return Ok(());
            }
            if self.pop_spilled(out) {
                return Ok(());
            }
            return Err(true);
        }
        Err(false)
    }

    /// After a push: serve a parked receiver, if any, with a value from the ring.
    fn after_push(&self, ring: &Ring<T>) {
        ring_fence();
        if waiting_after_ring_update(&self.recv_waiting) > 0 {
            self.serve_receiver(ring);
        }
    }

    /// Serve a parked receiver with a value from the ring. The slot that pop
    /// frees is refilled from a parked sender in the same critical section (Go's
    /// `chanrecv` on a full buffer): a receiver's park never looks at `sendq`, so
    /// without this a sender could stay parked beside an empty ring while the
    /// receivers park too — a lost wake-up (found by Miri on two senders and two
    /// receivers of a cap-1 channel). A value that went in may serve a receiver
    /// that parked meanwhile: loop, as `after_push` would, without recursing.
    fn serve_receiver(&self, ring: &Ring<T>) {
        loop {
            let (r, w, pushed) = {
                let mut s = self.lock();
                let r = if ring.is_empty() {
                    None // a lock-free receive got there first
                } else {
                    Self::claim_receiver(&mut s)
                };
                let (mut w, mut pushed) = (None, false);
                if let Some(r) = &r {
                    // SAFETY: `r` was queued and we hold the lock: its slot
                    // (empty) is ours to fill, straight from the ring.
                    if unsafe { r.with_slot(|slot| ring.pop_into(slot)) } {
                        r.complete(DONE);
                        (w, pushed) = self.refill(ring, &mut s);
                    } else {
                        r.complete(NOTIFIED);
                    }
                }
                self.publish(&s);
                (r, w, pushed)
            };
            if let Some(r) = r {
                r.wake();
            }
            if let Some(w) = w {
                w.wake();
            }
            if !pushed {
                return;
            }
            // `after_push` for the value that went in.
            ring_fence();
            if waiting_after_ring_update(&self.recv_waiting) == 0 {
                return;
            }
        }
    }

    /// After a pop: move a parked sender's value into the freed slot.
    fn after_pop(&self, ring: &Ring<T>) {
        ring_fence();
        if waiting_after_ring_update(&self.send_waiting) > 0 {
            self.serve_sender(ring);
        }
    }

    fn serve_sender(&self, ring: &Ring<T>) {
        let (woken, pushed) = {
            let mut s = self.lock();
            let served = self.refill(ring, &mut s);
            self.publish(&s);
            served
        };
        if let Some(w) = woken {
            w.wake();
        }
        if pushed {
            // The value that went in serves a receiver that parked meanwhile.
            self.after_push(ring);
        }
    }

    /// Under the lock: if the ring has room, move the first claimable parked
    /// sender's value into it (DONE; NOTIFIED if a lock-free send took the room
    /// first; CLOSED if the ring was marked). Returns the sender to wake once the
    /// lock is released, and whether its value went in. The caller publishes.
    fn refill(&self, ring: &Ring<T>, s: &mut State<T>) -> (ToWake<T>, bool) {
        let w = if ring.is_full() {
            None
        } else {
            Self::claim_sender(s)
        };
        let mut pushed = false;
        if let Some(w) = &w {
            // SAFETY: `w` was queued and we hold the lock: its value moves
            // straight from its slot into the ring, or stays there for its
            // retry (NOTIFIED) or its error (CLOSED).
            match unsafe { w.with_slot(|slot| ring.push_from(slot)) } {
                Ok(()) => {
                    pushed = true;
                    w.complete(DONE);
                }
                Err(Refused::Full) => w.complete(NOTIFIED),
                Err(Refused::Closed) => w.complete(CLOSED),
            }
        }
        (w, pushed)
    }

    /// A NOTIFIED receive/send was dropped without retrying: pass the
    /// notification on so that no other waiter sleeps while the ring could serve it.
    pub(super) fn renotify(&self, recv_side: bool) {
        if let Some(ring) = &self.ring {
            if recv_side {
                self.after_push(ring);
            } else {
                self.after_pop(ring);
            }
        }
    }

    // ---- the operations ----------------------------------------------------------------

    /// The blocking `send`'s first step, without a future: a buffered send that
    /// completes at once. `None`: it must wait (or the channel is unbuffered).
    /// `Some(Err(()))`: closed. The value stays in `v` unless sent.
    #[inline]
    pub(super) fn send_now(&self, v: &mut Option<T>) -> Option<Result<(), ()>> {
        match &self.ring {
            Some(ring) => match self.ring_send(ring, v) {
                Sent::Done => Some(Ok(())),
                Sent::Closed => Some(Err(())),
                Sent::Full => None,
            },
            None => None,
        }
    }

    /// The blocking `recv`'s first step: true if a buffered receive completed
    /// at once (`out` holds the value, or `None`: closed and drained).
    #[inline]
    pub(super) fn recv_now(&self, out: &mut Option<T>) -> bool {
        match &self.ring {
            Some(ring) => match self.ring_recv(ring, out) {
                Ok(()) | Err(true) => true,
                Err(false) => false,
            },
            None => false,
        }
    }

    /// Non-blocking send. `Err(v)` with `full = true` when it would block.
    pub(super) fn try_send(&self, v: T) -> Result<(), (T, bool)> {
        let mut v = Some(v);
        let back = |v: &mut Option<T>, full| Err((v.take().expect("unsent value"), full));
        match &self.ring {
            Some(ring) => match self.ring_send(ring, &mut v) {
                Sent::Done => Ok(()),
                Sent::Full => back(&mut v, true),
                Sent::Closed => back(&mut v, false),
            },
            None => {
                let woken = match self.send_locked(&mut self.lock(), &mut v) {
                    Ok(woken) => woken,
                    Err(full) => return back(&mut v, full),
                };
                if let Some(w) = woken {
                    w.wake();
                }
                Ok(())
            }
        }
    }

    /// Non-blocking receive: `Ok(v)`, or `Err(closed)`.
    pub(super) fn try_recv(&self) -> Result<T, bool> {
        let mut out = None;
        match &self.ring {
            Some(ring) => self.ring_recv(ring, &mut out)?,
            None => {
                let woken = self.recv_locked(&mut self.lock(), &mut out)?;
                if let Some(w) = woken {
                    w.wake();
                }
            }
        }
        Ok(out.expect("a receive that completed has a value"))
    }

    /// Under the lock: park `w` as a receiver, unless a receive could complete
    /// now (then `false`, nothing parked). Waiters of `own` (a select) do not count
    /// as counterparts.
    pub(super) fn park_recv(
        &self,
        s: &mut State<T>,
        w: &Arc<Waiter<T>>,
        own: Option<&Arc<Park>>,
    ) -> bool {
        match &self.ring {
            None => {
                if !s.buf.is_empty() || self.recv_closed(s) || s.sendq.any(|x| x.is_live_for(own)) {
                    return false;
                }
                s.recvq.push_back(w.clone());
                true
            }
            Some(ring) => {
                s.recvq.push_back(w.clone());
                self.publish(s);
                fence(SeqCst);
                if !ring.is_empty() || ring.is_marked() || !s.buf.is_empty() {
                    s.recvq.remove(w);
                    self.publish(s);
                    return false;
                }
                true
            }
        }
    }

    /// Under the lock: park `w` (holding its value) as a sender, unless a send
    /// could complete now.
    pub(super) fn park_send(
        &self,
        s: &mut State<T>,
        w: &Arc<Waiter<T>>,
        own: Option<&Arc<Park>>,
    ) -> bool {
        match &self.ring {
            None => {
                if self.send_closed(s) || s.recvq.any(|x| x.is_live_for(own)) {
                    return false;
                }
                s.sendq.push_back(w.clone());
                true
            }
            Some(ring) => {
                s.sendq.push_back(w.clone());
                self.publish(s);
                fence(SeqCst);
                if !ring.is_full() || ring.is_marked() {
                    s.sendq.remove(w);
                    self.publish(s);
                    return false;
                }
                true
            }
        }
    }

    /// Withdraw a parked waiter (if still queued). Returns whether it was.
    pub(super) fn unpark(&self, s: &mut State<T>, w: &Arc<Waiter<T>>, recv_side: bool) -> bool {
        let removed = if recv_side {
            s.recvq.remove(w)
        } else {
            s.sendq.remove(w)
        };
        self.publish(s);
        removed
    }

    /// An abandoned receive's waiter, whatever happened to it: still queued →
    /// unlink; a value handed over → put it back; notified → pass it on.
    pub(super) fn release_recv(&self, w: &Arc<Waiter<T>>) {
        let mut s = self.lock();
        if self.unpark(&mut s, w, true) {
            return;
        }
        match w.state() {
            // SAFETY: DONE, read under the lock: `w` is unqueued and ours.
            DONE if unsafe { w.with_slot(|slot| slot.is_some()) } => self.put_back(s, w),
            NOTIFIED => {
                drop(s);
                self.renotify(true);
            }
            _ => {}
        }
    }

    /// An abandoned send's waiter: still queued → unlink (the value was never
    /// sent); notified → pass it on. A completed send stays sent.
    pub(super) fn release_send(&self, w: &Arc<Waiter<T>>) {
        let mut s = self.lock();
        if !self.unpark(&mut s, w, false) && w.state() == NOTIFIED {
            drop(s);
            self.renotify(false);
        }
    }

    /// A value handed to a receive that was then abandoned: give it to another
    /// live receiver, or put it back into the buffer.
    /// (The value moves from `w`'s slot straight to its new place; this rare
    /// path has a frame of its own, which the receive paths do not reserve:
    /// "Moving values".)
    #[cold]
    #[inline(never)]
    pub(super) fn put_back(&self, mut s: MutexGuard<'_, State<T>>, w: &Waiter<T>) {
        if let Some(r) = Self::claim_receiver(&mut s) {
            // SAFETY: `r` was queued and we hold the lock; `w` is unqueued and
            // ours (the caller's contract).
            unsafe { w.with_slot(|from| r.with_slot(|to| move_opt(from, to))) };
            r.complete(DONE);
            self.publish(&s);
            drop(s);
            r.wake();
            return;
        }
        if let Some(ring) = &self.ring {
            // SAFETY: as above.
            if unsafe { w.with_slot(|from| ring.push_from(from)) }.is_ok() {
                return;
            }
        }
        // SAFETY: as above.
        let v = unsafe { w.take_value() }.expect("a value to put back");
        s.buf.push_front(v);
        self.publish(&s);
    }

    pub(super) fn close(&self) -> Result<(), CloseError> {
        let woken = {
            let mut s = self.lock();
            if s.closed {
                return Err(CloseError);
            }
            s.closed = true;
            if let Some(ring) = &self.ring {
                ring.mark();
            }
            self.complete_all(&mut s, true, true, CLOSED)
        };
        for w in woken {
            w.wake();
        }
        Ok(())
    }

    /// Under the lock: complete every claimable waiter of the chosen queues with
    /// `state` (CLOSED: senders keep their values in their slots; NOTIFIED:
    /// look again). Wake them after unlocking.
    fn complete_all(
        &self,
        s: &mut State<T>,
        recvs: bool,
        sends: bool,
        state: u8,
    ) -> Vec<Arc<Waiter<T>>> {
        let mut woken = Vec::new();
        if recvs {
            while let Some(w) = Self::claim_receiver(s) {
                w.complete(state);
                woken.push(w);
            }
        }
        if sends {
            while let Some(w) = Self::claim_sender(s) {
                w.complete(state);
                woken.push(w);
            }
        }
        self.publish(s);
        woken
    }

    /// The last sender (or receiver) handle is gone: fail the waiters that can no
    /// longer complete.
    pub(super) fn disconnect(&self, side_senders: bool) {
        let (woken, timer) = {
            let mut s = self.lock();
            if side_senders {
                // Receivers drain the buffer, then see "closed".
                s.closed = true;
            }
            // Either way no send can succeed any more.
            if let Some(ring) = &self.ring {
                ring.mark();
            }
            // Nobody can receive what a timer would send: stop it.
            let timer = if side_senders { None } else { s.timer.take() };
            let woken = self.complete_all(&mut s, side_senders, !side_senders, CLOSED);
            (woken, timer)
        };
        if let Some(t) = timer.and_then(|t| t.upgrade()) {
            t.stop();
        }
        #[cfg(not(loom))]
        if !side_senders {
            if let Some(t) = &self.timer {
                // It will never fire: its sender count goes too.
                if Self::claim_timer(t) {
                    self.release_timer_sender();
                }
            }
        }
        for w in woken {
            w.wake();
        }
    }
}

// ---- single-operation futures --------------------------------------------------------

/// Future of [`Chan::send_async`](super::Chan::send_async): completes once
/// the value is in the channel or with a receiver (`Err` with the value back
/// if the channel is closed). Dropping it before then takes the value back
/// out: nothing is sent twice or lost.
///
/// ```
/// use gosched::chan::SendFut;
/// let rt = gosched::Runtime::new().unwrap();
/// let ch = gosched::chan::<u8>(1);
/// let fut: SendFut<'_, u8> = ch.send_async(5);
/// rt.block_on(fut).unwrap();
/// assert_eq!(ch.try_recv(), Ok(5));
/// ```
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
        this.inner.unpark(&mut s, &w, false);
        match w.state() {
            DONE => None,
            // SAFETY: `w` is unqueued (removed, or completed) and we hold the lock.
            _ => unsafe { w.take_value() },
        }
    }
}

impl<T> Future for SendFut<'_, T> {
    type Output = Result<(), SendError<T>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if this.waiter.is_none() {
            // Not parked yet: a long slice asked to yield yields here.
            ready!(crate::sched::preempt::poll_preempted(cx));
        }
        match poll_send(this.inner, &mut this.value, &mut this.waiter, cx) {
            Poll::Pending => {
                crate::sched::wait::pending(crate::sched::wait::WaitReason::ChanSend, cx)
            }
            Poll::Ready(Ok(())) => Poll::Ready(Ok(())),
            Poll::Ready(Err(())) => Poll::Ready(Err(SendError(
                this.value.take().expect("a closed send keeps its value"),
            ))),
        }
    }
}

/// One poll of a send whose value waits in `value` (the sender's own slot:
/// a `SendFut`'s, or the blocking `send`'s frame) and, once parked, in
/// `waiter`'s slot. `Ready(Err(()))`: closed, the value is back in `value`.
/// The value moves at most twice (into a parked waiter's slot, then to its
/// destination), never through a chain of by-value calls ("Moving values").
pub(super) fn poll_send<T>(
    inner: &Inner<T>,
    value: &mut Option<T>,
    waiter: &mut Option<Arc<Waiter<T>>>,
    cx: &mut Context<'_>,
) -> Poll<Result<(), ()>> {
    if let Some(w) = waiter.take() {
        match w.poll_state(inner, cx.waker()) {
            WAITING => {
                *waiter = Some(w);
                return crate::sched::wait::pending(crate::sched::wait::WaitReason::ChanSend, cx);
            }
            DONE => return Poll::Ready(Ok(())),
            // CLOSED (the value comes back for the error) or NOTIFIED (try
            // again).
            state => {
                // SAFETY: a final state observed with Acquire: `w` is
                // unqueued and the slot is ours.
                unsafe { w.with_slot(|slot| move_opt(slot, value)) };
                debug_assert!(value.is_some(), "an undelivered sender keeps its value");
                if state == CLOSED {
                    return Poll::Ready(Err(()));
                }
            }
        }
    }
    debug_assert!(value.is_some(), "send polled after completion");
    loop {
        if let Some(ring) = &inner.ring {
            match inner.ring_send(ring, value) {
                Sent::Done => return Poll::Ready(Ok(())),
                Sent::Closed => return Poll::Ready(Err(())),
                Sent::Full => {}
            }
        }
        let mut s = inner.lock();
        if inner.ring.is_none() {
            // One critical section: complete now, or park.
            match inner.send_locked(&mut s, value) {
                Ok(woken) => {
                    drop(s);
                    if let Some(r) = woken {
                        r.wake();
                    }
                    return Poll::Ready(Ok(()));
                }
                Err(false) => return Poll::Ready(Err(())),
                Err(true) => {}
            }
        }
        // Allocated under the lock, but only on the way to parking.
        let w = Waiter::single(cx.waker());
        // SAFETY: `w` is not queued yet: its slot is ours.
        unsafe { w.with_slot(|slot| move_opt(value, slot)) };
        if inner.park_send(&mut s, &w, None) {
            *waiter = Some(w);
            return crate::sched::wait::pending(crate::sched::wait::WaitReason::ChanSend, cx);
        }
        // The ring made room meanwhile: try again. SAFETY: `w` was not queued.
        unsafe { w.with_slot(|slot| move_opt(slot, value)) };
    }
}

/// The blocking `send`'s future: the value stays in the caller's frame
/// (`value`) until it moves to its destination (see `poll_send`).
pub(super) struct SendRef<'a, T> {
    pub(super) inner: &'a Inner<T>,
    pub(super) value: &'a mut Option<T>,
    pub(super) waiter: Option<Arc<Waiter<T>>>,
}

impl<T> Unpin for SendRef<'_, T> {}

impl<T> Future for SendRef<'_, T> {
    type Output = Result<(), ()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        poll_send(this.inner, this.value, &mut this.waiter, cx)
    }
}

impl<T> Drop for SendRef<'_, T> {
    fn drop(&mut self) {
        if let Some(w) = self.waiter.take() {
            self.inner.release_send(&w);
        }
    }
}

impl<T> Drop for SendFut<'_, T> {
    fn drop(&mut self) {
        if let Some(w) = self.waiter.take() {
            self.inner.release_send(&w);
        }
    }
}

/// Future of [`Chan::recv_async`](super::Chan::recv_async): a value, or
/// `None` once the channel is closed and drained. Dropping it after a value
/// was handed to it puts the value back into the channel.
///
/// ```
/// use gosched::chan::RecvFut;
/// let rt = gosched::Runtime::new().unwrap();
/// let ch = gosched::chan::<&str>(1);
/// ch.try_send("hi").unwrap();
/// let fut: RecvFut<'_, &str> = ch.recv_async();
/// assert_eq!(rt.block_on(fut), Some("hi"));
/// ch.close().unwrap();
/// assert_eq!(rt.block_on(ch.recv_async()), None);
/// ```
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
        if this.waiter.is_none() {
            // Not parked yet: a long slice asked to yield yields here.
            ready!(crate::sched::preempt::poll_preempted(cx));
        }
        let mut out = None;
        match poll_recv(this.inner, &mut this.waiter, &mut out, cx) {
            Poll::Ready(()) => Poll::Ready(out),
            Poll::Pending => {
                crate::sched::wait::pending(crate::sched::wait::WaitReason::ChanReceive, cx)
            }
        }
    }
}

/// One poll of a receive; on `Ready`, `out` (which is `None` on entry) holds
/// the value, or `None` if the channel is closed and drained. The value moves
/// straight from where it is (the ring, a parked sender's slot, our waiter's
/// slot) into `out`.
pub(super) fn poll_recv<T>(
    inner: &Inner<T>,
    waiter: &mut Option<Arc<Waiter<T>>>,
    out: &mut Option<T>,
    cx: &mut Context<'_>,
) -> Poll<()> {
    if let Some(w) = waiter.take() {
        match w.poll_state(inner, cx.waker()) {
            WAITING => {
                *waiter = Some(w);
                return crate::sched::wait::pending(
                    crate::sched::wait::WaitReason::ChanReceive,
                    cx,
                );
            }
            DONE => {
                // SAFETY: DONE is final and was observed with Acquire.
                unsafe { w.with_slot(|slot| move_opt(slot, out)) };
                return Poll::Ready(());
            }
            // CLOSED or NOTIFIED: look again (a closed buffer may hold values).
            _ => {}
        }
    }
    loop {
        if let Some(ring) = &inner.ring {
            match inner.ring_recv(ring, out) {
                Ok(()) | Err(true) => return Poll::Ready(()),
                Err(false) => {}
            }
        }
        let mut s = inner.lock_to_park_recv();
        if inner.ring.is_none() {
            // One critical section: complete now, or park.
            match inner.recv_locked(&mut s, out) {
                Ok(woken) => {
                    drop(s);
                    if let Some(w) = woken {
                        w.wake();
                    }
                    return Poll::Ready(());
                }
                Err(true) => return Poll::Ready(()),
                Err(false) => {}
            }
        }
        let w = Waiter::single(cx.waker());
        if inner.park_recv(&mut s, &w, None) {
            *waiter = Some(w);
            return crate::sched::wait::pending(crate::sched::wait::WaitReason::ChanReceive, cx);
        }
    }
}

/// The blocking `recv`'s future: the value lands in the caller's frame
/// (`out`), see `poll_recv`.
pub(super) struct RecvRef<'a, T> {
    pub(super) inner: &'a Inner<T>,
    pub(super) out: &'a mut Option<T>,
    pub(super) waiter: Option<Arc<Waiter<T>>>,
}

impl<T> Unpin for RecvRef<'_, T> {}

impl<T> Future for RecvRef<'_, T> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        poll_recv(this.inner, &mut this.waiter, this.out, cx)
    }
}

impl<T> Drop for RecvRef<'_, T> {
    fn drop(&mut self) {
        if let Some(w) = self.waiter.take() {
            self.inner.release_recv(&w);
        }
    }
}

impl<T> Drop for RecvFut<'_, T> {
    fn drop(&mut self) {
        if let Some(w) = self.waiter.take() {
            self.inner.release_recv(&w);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Two senders and a receiver on a cap-1 channel, one step at a time (the
    /// lost wake-up Miri found): a receiver parks on the empty ring; sender P's
    /// push lands; sender S, which looked for parked receivers before the
    /// receiver parked, finds the ring full and parks; then P serves the
    /// receiver from the ring. The slot that frees must take S's value — nobody
    /// else would: the receiver's next receive parks beside a parked sender.
    #[test]
    fn serving_a_receiver_refills_from_a_parked_sender() {
        let inner = Inner::<u32>::try_new(1).unwrap();
        let ring = inner.ring.as_ref().unwrap();
        let mut cx = Context::from_waker(Waker::noop());
        let mut recv = RecvFut {
            inner: &inner,
            waiter: None,
        };
        assert!(Pin::new(&mut recv).poll(&mut cx).is_pending());
        assert!(ring.push(1).is_ok()); // P's push, before its `after_push`
        let s = Waiter::holding(2, Waker::noop());
        assert!(inner.park_send(&mut inner.lock(), &s, None), "S parks");
        inner.after_push(ring); // P serves the parked receiver
        assert_eq!(Pin::new(&mut recv).poll(&mut cx), Poll::Ready(Some(1)));
        assert_eq!(s.state(), DONE, "S's value went into the freed slot");
        assert_eq!(inner.try_recv(), Ok(2));
        assert_eq!(inner.try_recv(), Err(false));
    }

    /// A sender's direct hand-off to a parked receiver must not overtake values
    /// in the ring (the FIFO violation Miri found): a receiver is parked beside
    /// the sender's earlier value, which `refill` moved into the ring for it (its
    /// send has returned) and whose `after_push` has not run yet; the next send
    /// goes behind it.
    #[test]
    fn hand_off_does_not_overtake_the_ring() {
        let inner = Inner::<u32>::try_new(1).unwrap();
        let ring = inner.ring.as_ref().unwrap();
        let mut cx = Context::from_waker(Waker::noop());
        let mut recv = RecvFut {
            inner: &inner,
            waiter: None,
        };
        assert!(Pin::new(&mut recv).poll(&mut cx).is_pending());
        // The sender's earlier value, moved in for it and not served yet.
        assert!(ring.push(62).is_ok());
        // Its next value: the ring is full, so it would wait.
        assert_eq!(inner.try_send(63), Err((63, true)));
        inner.after_push(ring); // the mover serves the receiver from the ring
        assert_eq!(Pin::new(&mut recv).poll(&mut cx), Poll::Ready(Some(62)));
        assert_eq!(inner.try_send(63), Ok(()));
        assert_eq!(inner.try_recv(), Ok(63));
    }
}
