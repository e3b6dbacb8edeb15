//! The lock behind [`Mutex`](super::Mutex): Go's `sync.Mutex` algorithm
//! (normal and starvation modes), with a future as the parked waiter. Compiled
//! and modelled under `--cfg loom` too (see `loom_tests` below).
//!
//! # State word (`RawMutex::state`)
//!
//! ```text
//!  bit 0      LOCKED    someone owns the mutex
//!  bit 1      WOKEN     a waiter was woken (or a spinner announced itself) and is
//!                       on its way to compete: unlock need not wake another
//!  bit 2      STARVING  starvation mode: ownership is handed over, FIFO
//!  bits 3..   waiters   number of entries queued in `queue`
//! ```
//!
//! `queue` is a [`WaitList`] under a small lock (Go's `sema` list); each entry
//! holds the time its waiter first queued and, once notified, whether ownership
//! was handed to it.
//!
//! # Who writes what
//!
//! - `LOCKED` is set by a CAS that sees neither `LOCKED` nor `STARVING` (barging,
//!   normal mode only), or — under the queue lock — by a starvation-mode
//!   hand-off, *for* the waiter at the head. It is cleared only by the owner
//!   (`unlock`, one `fetch_sub`).
//! - The waiter count changes only under the queue lock, in the same critical
//!   section as the matching push / pop / remove, so `waiters == queue.len()`
//!   whenever the queue lock is free. A waiter decides to queue *under the queue
//!   lock*, by a CAS that sees `LOCKED` or `STARVING`; an unlocker that sees
//!   waiters in its `fetch_sub` result takes the queue lock before deciding whom
//!   to wake. Whichever of the two critical sections comes second sees the
//!   other's effect, and the waiter's CAS fails if the unlock slipped in between
//!   its load and the CAS — so no wake-up is lost.
//! - `WOKEN` has at most one holder: the waiter notified by a normal-mode unlock
//!   (which set it together with the pop), or a spinning newcomer that set it by
//!   CAS. The holder clears it in its next CAS (acquire or re-queue), or, if its
//!   future is dropped before that, clears it and wakes the next waiter itself.
//! - `STARVING` is set only by a woken waiter that has waited ≥ 1 ms
//!   (`STARVATION_THRESHOLD`) and still finds the mutex locked, in the CAS that
//!   re-queues it at the *head*. It is cleared, under the queue lock, by the
//!   hand-off to the last waiter or to one that waited < 1 ms (Go's exit rule), or
//!   when the last waiter cancels. So `STARVING ⇒ queue non-empty` at every
//!   release of the queue lock.
//!
//! # The two modes (Go's `sync/mutex.go`)
//!
//! - **Normal mode.** `lock` tries a CAS (barging), may spin a few rounds while
//!   the owner runs on another CPU, then queues FIFO. `unlock` clears `LOCKED`
//!   and, if there are waiters and nobody is `WOKEN`, pops the head, sets `WOKEN`
//!   and wakes it. The woken waiter *competes* with newcomers (which already
//!   run on a CPU and usually win); if it loses it re-queues at the head (LIFO).
//! - **Starvation mode.** Entered when a woken waiter that waited ≥ 1 ms loses
//!   again. Newcomers neither barge nor spin: they queue at the tail. `unlock`
//!   clears `LOCKED` and then, under the queue lock, sets it again *for the head
//!   waiter* (removing it from the count) and wakes it: the waiter owns the
//!   mutex as soon as it is notified. Between those two steps the mutex reads
//!   unlocked-but-starving; nobody may take it then. Unlike Go, the hand-off
//!   updates the state word itself (Go leaves it to the woken G), so a
//!   notified-but-cancelled waiter is simply an owner that unlocks.
//!
//! # Cancellation
//!
//! Dropping a pending [`RawLock`]: still queued → unlink, uncount, end starvation
//! mode if it was the last; notified with a hand-off → it owns the mutex →
//! `unlock` (hands it on); notified in normal mode → it holds `WOKEN` → clear it
//! and wake the next waiter if the mutex is free. Nothing is lost or leaked.
//!
//! # Orderings
//!
//! Acquiring CASes are `Acquire`, the unlocking `fetch_sub` is `Release`; a
//! hand-off is ordered by the unlocker's `Release` plus the queue lock, which the
//! notified waiter takes before it sees the notification.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use super::waitlist::{Cancelled, Key, WaitList};
use crate::loom::lock;
use crate::loom::sync::atomic::{AtomicUsize, Ordering::*};
use crate::loom::sync::Mutex;

pub(crate) const LOCKED: usize = 1;
pub(crate) const WOKEN: usize = 2;
pub(crate) const STARVING: usize = 4;
const WAITER_SHIFT: u32 = 3;
const ONE_WAITER: usize = 1 << WAITER_SHIFT;

/// Go's `starvationThresholdNs`.
#[cfg(not(loom))]
pub(crate) const STARVATION_THRESHOLD: std::time::Duration = std::time::Duration::from_millis(1);

/// When a waiter first queued. Under loom time is not modelled: `RawMutex::starve`
/// decides instead.
#[cfg(not(loom))]
type Stamp = std::time::Instant;
#[cfg(loom)]
#[derive(Clone, Copy, Debug)]
struct Stamp;

#[cfg(not(loom))]
fn now() -> Stamp {
    std::time::Instant::now()
}
#[cfg(loom)]
fn now() -> Stamp {
    Stamp
}

#[derive(Debug)]
struct Waiting {
    since: Stamp,
    /// Set by the notifier: ownership was handed over (starvation mode).
    handoff: bool,
}

pub(crate) struct RawMutex {
    state: AtomicUsize,
    queue: Mutex<WaitList<Waiting>>,
    /// loom only: whether every waiter counts as having waited past the
    /// starvation threshold.
    #[cfg(loom)]
    starve: bool,
}

impl std::fmt::Debug for RawMutex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.state.load(Relaxed);
        f.debug_struct("RawMutex")
            .field("locked", &(s & LOCKED != 0))
            .field("starving", &(s & STARVING != 0))
            .field("waiters", &(s >> WAITER_SHIFT))
            .finish()
    }
}

impl RawMutex {
    #[cfg(not(loom))]
    pub(crate) const fn new() -> Self {
        RawMutex {
            state: AtomicUsize::new(0),
            queue: Mutex::new(WaitList::new()),
        }
    }

    /// loom: `starve` says whether waiters count as having waited ≥ 1 ms.
    #[cfg(loom)]
    pub(crate) fn new_model(starve: bool) -> Self {
        RawMutex {
            state: AtomicUsize::new(0),
            queue: Mutex::new(WaitList::new()),
            starve,
        }
    }

    #[cfg(not(loom))]
    fn waited_long(&self, since: Stamp) -> bool {
        since.elapsed() >= STARVATION_THRESHOLD
    }

    #[cfg(loom)]
    fn waited_long(&self, _since: Stamp) -> bool {
        self.starve
    }

    /// Take the lock if that needs no waiting (Go's `TryLock`: not in starvation
    /// mode, where it belongs to the queue).
    pub(crate) fn try_lock(&self) -> bool {
        let mut old = self.state.load(Relaxed);
        loop {
            if old & (LOCKED | STARVING) != 0 {
                return false;
            }
            match self
                .state
                .compare_exchange_weak(old, old | LOCKED, Acquire, Relaxed)
            {
                Ok(_) => return true,
                Err(cur) => old = cur,
            }
        }
    }

    /// The uncontended fast path of `lock`.
    #[inline]
    pub(crate) fn lock_fast(&self) -> bool {
        self.state
            .compare_exchange(0, LOCKED, Acquire, Relaxed)
            .is_ok()
    }

    /// A future that completes once the caller owns the lock.
    pub(crate) fn lock(&self) -> RawLock<'_> {
        RawLock {
            raw: self,
            key: None,
            since: None,
            starving: false,
        }
    }

    pub(crate) fn is_locked(&self) -> bool {
        self.state.load(Relaxed) & LOCKED != 0
    }

    /// Release the lock. Only its owner may call this.
    #[inline]
    pub(crate) fn unlock(&self) {
        let new = self.state.fetch_sub(LOCKED, Release).wrapping_sub(LOCKED);
        debug_assert!(new & LOCKED == 0, "sync: unlock of unlocked mutex");
        if new != 0 {
            self.unlock_slow(new);
        }
    }

    #[cold]
    fn unlock_slow(&self, new: usize) {
        if new & STARVING == 0 && (new >> WAITER_SHIFT == 0 || new & (LOCKED | WOKEN) != 0) {
            // Nobody to wake, or someone else (a new owner, a woken waiter) will.
            return;
        }
        let mut q = lock(&self.queue);
        let waker = self.release_locked(&mut q);
        drop(q);
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Under the queue lock, with the mutex possibly free: do what an unlock owes
    /// the queue. Starvation mode: hand ownership to the head (or leave the mode if
    /// the queue is empty). Normal mode: wake the head unless somebody holds
    /// `WOKEN` already. Nothing if the mutex is owned (its owner will do this).
    /// Returns the waker to call once the queue lock is released.
    fn release_locked(&self, q: &mut WaitList<Waiting>) -> Option<Waker> {
        let mut old = self.state.load(Acquire);
        loop {
            debug_assert_eq!(old >> WAITER_SHIFT, q.len(), "waiter count out of sync");
            if old & LOCKED != 0 {
                return None;
            }
            let (new, handoff) = if old & STARVING != 0 {
                match q.front() {
                    None => (old & !STARVING, None),
                    Some(head) => {
                        let mut new = (old | LOCKED) - ONE_WAITER;
                        if q.len() == 1 || !self.waited_long(head.since) {
                            new &= !STARVING;
                        }
                        (new, Some(true))
                    }
                }
            } else {
                if old >> WAITER_SHIFT == 0 || old & WOKEN != 0 {
                    return None;
                }
                ((old - ONE_WAITER) | WOKEN, Some(false))
            };
            match self.state.compare_exchange(old, new, AcqRel, Acquire) {
                Ok(_) => {
                    return handoff.and_then(|h| q.notify_front_with(|w| w.handoff = h));
                }
                Err(cur) => old = cur,
            }
        }
    }
}

#[cfg(not(loom))]
fn can_spin(iter: u32) -> bool {
    use std::sync::atomic::{AtomicUsize as StdAtomic, Ordering::Relaxed as R};
    // Go's `sync_runtime_canSpin`: a few rounds, and only with more than one CPU
    // (otherwise the owner cannot run while we spin).
    static NCPU: StdAtomic = StdAtomic::new(0);
    const ACTIVE_SPIN: u32 = 4;
    if iter >= ACTIVE_SPIN {
        return false;
    }
    let mut n = NCPU.load(R);
    if n == 0 {
        n = std::thread::available_parallelism().map_or(1, |n| n.get());
        NCPU.store(n, R);
    }
    n > 1
}

#[cfg(not(loom))]
fn spin() {
    // Go's `procyield(active_spin_cnt = 30)`.
    for _ in 0..30 {
        std::hint::spin_loop();
    }
}

/// Under loom a spin would only multiply the interleavings.
#[cfg(loom)]
fn can_spin(_: u32) -> bool {
    false
}
#[cfg(loom)]
fn spin() {}

/// Future of `RawMutex::lock`: Go's `lockSlow` loop, split at the park.
pub(crate) struct RawLock<'a> {
    raw: &'a RawMutex,
    /// Our entry in the queue while parked (or notified and not yet polled).
    key: Option<Key>,
    /// When we first queued (Go's `waitStartTime`).
    since: Option<Stamp>,
    /// Waited ≥ 1 ms: switch the mutex to starvation mode if we lose again.
    starving: bool,
}

impl std::fmt::Debug for RawLock<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawLock")
            .field("queued", &self.key.is_some())
            .field("starving", &self.starving)
            .finish()
    }
}

impl Future for RawLock<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        let raw = this.raw;
        // Do we hold WOKEN (and must clear it in our next CAS)?
        let mut awoke = false;
        if let Some(key) = this.key {
            let mut q = lock(&raw.queue);
            let Some(w) = q.poll(key, cx.waker()) else {
                return crate::sched::wait::pending(crate::sched::wait::WaitReason::Mutex, cx);
            };
            drop(q);
            this.key = None;
            if w.handoff {
                // Starvation mode: the unlocker made us the owner.
                return Poll::Ready(());
            }
            awoke = true;
            if let Some(since) = this.since {
                this.starving = this.starving || raw.waited_long(since);
            }
        }
        let mut iter = 0;
        let mut old = raw.state.load(Relaxed);
        loop {
            // Normal mode and locked: spin a little while the owner runs.
            if old & (LOCKED | STARVING) == LOCKED && can_spin(iter) {
                // Tell unlock not to wake a waiter: we are about to take it.
                if !awoke
                    && old & WOKEN == 0
                    && old >> WAITER_SHIFT != 0
                    && raw
                        .state
                        .compare_exchange(old, old | WOKEN, Relaxed, Relaxed)
                        .is_ok()
                {
                    awoke = true;
                }
                spin();
                iter += 1;
                old = raw.state.load(Relaxed);
                continue;
            }
            if old & (LOCKED | STARVING) == 0 {
                // Free and in normal mode: barge.
                let mut new = old | LOCKED;
                if awoke {
                    debug_assert!(old & WOKEN != 0, "sync: inconsistent mutex state");
                    new &= !WOKEN;
                }
                match raw.state.compare_exchange(old, new, Acquire, Relaxed) {
                    Ok(_) => return Poll::Ready(()),
                    Err(cur) => {
                        old = cur;
                        continue;
                    }
                }
            }
            // Locked, or starvation mode: queue, deciding under the queue lock.
            let mut q = lock(&raw.queue);
            old = raw.state.load(Relaxed);
            while old & (LOCKED | STARVING) != 0 {
                let mut new = old + ONE_WAITER;
                if this.starving && old & LOCKED != 0 {
                    new |= STARVING;
                }
                if awoke {
                    debug_assert!(old & WOKEN != 0, "sync: inconsistent mutex state");
                    new &= !WOKEN;
                }
                match raw.state.compare_exchange(old, new, AcqRel, Relaxed) {
                    Ok(_) => {
                        let requeue = this.since.is_some();
                        let data = Waiting {
                            since: *this.since.get_or_insert_with(now),
                            handoff: false,
                        };
                        // A waiter that was woken and lost goes back to the head
                        // (Go's LIFO `queueLifo`); a new one to the tail.
                        this.key = Some(if requeue {
                            q.push_front(data, cx.waker())
                        } else {
                            q.push_back(data, cx.waker())
                        });
                        return crate::sched::wait::pending(
                            crate::sched::wait::WaitReason::Mutex,
                            cx,
                        );
                    }
                    Err(cur) => old = cur,
                }
            }
            // Freed meanwhile (and not starving): try to barge again.
        }
    }
}

impl Drop for RawLock<'_> {
    fn drop(&mut self) {
        let Some(key) = self.key.take() else {
            return;
        };
        let raw = self.raw;
        let mut q = lock(&raw.queue);
        let waker = match q.cancel(key) {
            Cancelled::Queued(_) => {
                // One waiter fewer; the last one leaving ends starvation mode.
                let empty = q.is_empty();
                let mut old = raw.state.load(Relaxed);
                loop {
                    let mut new = old - ONE_WAITER;
                    if empty {
                        new &= !STARVING;
                    }
                    match raw.state.compare_exchange(old, new, AcqRel, Relaxed) {
                        Ok(_) => break,
                        Err(cur) => old = cur,
                    }
                }
                // If an unlock is between its `fetch_sub` and the queue lock, do
                // its part now (it will then find nothing left to do).
                raw.release_locked(&mut q)
            }
            Cancelled::Notified(w) if w.handoff => {
                // We were made the owner: pass ownership on like an unlock.
                drop(q);
                raw.unlock();
                return;
            }
            Cancelled::Notified(_) => {
                // We hold WOKEN: give it up and wake the next waiter if the mutex is
                // free (if it is owned, its unlock will now wake one).
                raw.state.fetch_and(!WOKEN, AcqRel);
                raw.release_locked(&mut q)
            }
        };
        drop(q);
        if let Some(w) = waker {
            w.wake();
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Models of the hand-off protocol on the real `RawMutex`: exactly one owner at
    //! a time (the protected counter is a loom `UnsafeCell`, so two unordered
    //! critical sections fail the model), and no lost wake-up (a waiter parked
    //! forever makes loom report a deadlock).
    //!
    //! Time is not modelled: `new_model(true)` makes every woken waiter count as
    //! starving. The starting states are built single-threaded with the real code
    //! (lock, queue a future, unlock, barge, re-poll), then the racing threads run.
    use super::*;
    /// Poll to completion on this model thread, parking (loom-visibly) on the
    /// runtime's own `Parker` between polls.
    use crate::park::block_on_thread as block_on;
    use loom::cell::UnsafeCell;
    use loom::thread;
    use std::pin::pin;

    struct Shared {
        raw: RawMutex,
        /// Protected by `raw`.
        count: UnsafeCell<usize>,
    }

    /// `&'static` so that pending futures can move into model threads (loom has no
    /// scoped threads). The leaked value holds no loom `Arc` once the model is done.
    fn shared(starve: bool) -> &'static Shared {
        Box::leak(Box::new(Shared {
            raw: RawMutex::new_model(starve),
            count: UnsafeCell::new(0),
        }))
    }

    fn critical(s: &Shared) {
        // SAFETY: only lock holders touch `count`; loom checks that they are
        // ordered (that is what the model verifies).
        s.count.with_mut(|c| unsafe { *c += 1 });
        s.raw.unlock();
    }

    fn count(s: &Shared) -> usize {
        // SAFETY: every other thread was joined.
        s.count.with(|c| unsafe { *c })
    }

    fn poll_once(f: &mut RawLock<'_>) -> Poll<()> {
        Pin::new(f).poll(&mut Context::from_waker(Waker::noop()))
    }

    fn state(s: &Shared) -> usize {
        s.raw.state.load(SeqCst)
    }

    /// Single-threaded: the caller owns the lock, `f` is queued at the head and the
    /// mutex is in starvation mode.
    fn starving_with_waiter(s: &'static Shared) -> RawLock<'static> {
        assert!(s.raw.try_lock());
        let mut f = s.raw.lock();
        assert!(poll_once(&mut f).is_pending());
        s.raw.unlock(); // normal mode: wakes `f` (WOKEN)
        assert!(s.raw.try_lock()); // a newcomer barges
        assert!(poll_once(&mut f).is_pending()); // `f` lost after "1 ms": starving
        assert_eq!(state(s), LOCKED | STARVING | ONE_WAITER);
        f
    }

    /// Starvation-mode unlock hands the lock to the queued waiter while a newcomer
    /// tries to lock: the newcomer must queue behind, never share ownership.
    #[test]
    fn handoff_vs_newcomer() {
        loom::model(|| {
            let s = shared(true);
            let f = starving_with_waiter(s);
            let waiter = thread::spawn(move || {
                block_on(f);
                // FIFO in starvation mode: the newcomer cannot have gone first.
                assert_eq!(count(s), 1, "a newcomer overtook a starving waiter");
                critical(s);
            });
            let newcomer = thread::spawn(move || {
                if !s.raw.try_lock() {
                    block_on(s.raw.lock());
                }
                critical(s);
            });
            critical(s); // the owner unlocks: hand-off
            waiter.join().unwrap();
            newcomer.join().unwrap();
            assert_eq!(count(s), 3);
            assert_eq!(state(s), 0);
        });
    }

    /// Starvation mode, two waiters; the head one is cancelled while the owner
    /// unlocks. Whether the hand-off reached it or not, the second waiter must get
    /// the lock (passed on, not lost) and the mutex ends free and in normal mode.
    #[test]
    fn handoff_vs_cancelled_waiter() {
        loom::model(|| {
            let s = shared(true);
            let f1 = starving_with_waiter(s);
            let mut f2 = s.raw.lock();
            assert!(poll_once(&mut f2).is_pending());
            assert_eq!(state(s), LOCKED | STARVING | (2 * ONE_WAITER));
            let canceller = thread::spawn(move || drop(f1));
            let waiter = thread::spawn(move || {
                block_on(f2);
                critical(s);
            });
            critical(s);
            canceller.join().unwrap();
            waiter.join().unwrap();
            assert_eq!(count(s), 2);
            assert_eq!(state(s), 0);
        });
    }

    /// Starvation mode, one waiter, cancelled while the owner unlocks and a
    /// newcomer locks: whether the hand-off reached the cancelled waiter or not,
    /// the newcomer gets the lock and the mutex ends free, in normal mode.
    #[test]
    fn last_starving_waiter_cancelled_vs_newcomer() {
        loom::model(|| {
            let s = shared(true);
            let f = starving_with_waiter(s);
            let canceller = thread::spawn(move || drop(f));
            let newcomer = thread::spawn(move || {
                if !s.raw.try_lock() {
                    block_on(s.raw.lock());
                }
                critical(s);
            });
            critical(s);
            canceller.join().unwrap();
            newcomer.join().unwrap();
            assert_eq!(count(s), 2);
            assert_eq!(state(s), 0);
        });
    }

    /// Three lockers from scratch, every waiter counting as starving: the natural
    /// path into starvation mode (woken, loses, re-queues at the head with
    /// STARVING) and out of it, under every interleaving.
    #[test]
    fn three_lockers_through_starvation_mode() {
        loom::model(|| {
            let s = shared(true);
            let ts: Vec<_> = (0..2)
                .map(|_| {
                    thread::spawn(move || {
                        block_on(s.raw.lock());
                        critical(s);
                    })
                })
                .collect();
            block_on(s.raw.lock());
            critical(s);
            for t in ts {
                t.join().unwrap();
            }
            assert_eq!(count(s), 3);
            assert_eq!(state(s), 0);
        });
    }

    /// Normal mode: the woken waiter is cancelled while a newcomer barges. The
    /// WOKEN bit must not be lost with it: the second waiter still gets the lock.
    #[test]
    fn woken_waiter_cancelled_vs_newcomer() {
        loom::model(|| {
            let s = shared(false);
            assert!(s.raw.try_lock());
            let mut f1 = s.raw.lock();
            assert!(poll_once(&mut f1).is_pending());
            let mut f2 = s.raw.lock();
            assert!(poll_once(&mut f2).is_pending());
            let canceller = thread::spawn(move || drop(f1));
            let waiter = thread::spawn(move || {
                block_on(f2);
                critical(s);
            });
            critical(s); // unlock: wakes f1 (maybe already gone)
            if !s.raw.try_lock() {
                block_on(s.raw.lock());
            }
            critical(s);
            canceller.join().unwrap();
            waiter.join().unwrap();
            assert_eq!(count(s), 3);
            assert_eq!(state(s), 0);
        });
    }
}
