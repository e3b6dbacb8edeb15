//! A Processor's local run queue: a fixed ring of 256 slots plus nothing else
//! (`runnext` lives in `Processor`).
//!
//! # Protocol (Go's `runqput` / `runqget` / `runqgrab`)
//!
//! `head` and `tail` are free-running `u32` counters; slot `i` is `buf[i % CAP]`.
//! The queue holds the items in `head..tail`.
//!
//! - Only the **owner** (the M holding the P) writes `tail`. It writes the slot
//!   first, then publishes it with a store-release of `tail`.
//! - **Anyone** may advance `head`, by CAS, after reading the slots it takes.
//!   The owner pops one item (`pop`), a thief takes half (`steal_into`).
//! - Slots are `AtomicPtr`s accessed with relaxed loads/stores. A thief may read a
//!   slot that the owner is concurrently overwriting (after the item there was
//!   consumed and the ring wrapped); that read is then discarded because the
//!   thief's CAS on `head` fails. With plain memory this would be a data race;
//!   atomics make it a benign stale read.
//! - The owner can only overwrite slot `t % CAP` when `t - head < CAP` for a
//!   `head` it loaded with acquire, i.e. after every consumer of that slot has
//!   published its CAS; so an item is never overwritten before it was taken.
//!
//! Items are owned raw pointers (`NonNull<T>`): putting one in transfers
//! ownership to the queue, taking one out transfers it back. Each item leaves the
//! queue exactly once: either the owner's CAS or one thief's CAS covers it.
//!
//! Overflow (`runqputslow`): when the ring is full, the owner moves exactly half
//! of it (128 items, from the head) plus the new item to the global queue in one
//! batch. If a thief moved `head` meanwhile, the CAS fails and the put retries on
//! the fast path, which now has room.
//!
//! Seniors: the items a refill took from the global queue's head
//! (`mark_seniors`) or a steal from a victim's head (`steal_into`) were next
//! in line where they came from. `senior_end` (owner only) is the tail after
//! the refill or steal. An overflow reports how many of its batch are still
//! such items, and the caller puts those back at the global queue's *head*:
//! sent to the tail, as Go does, they would lose their turn behind everything
//! queued since (W9p: submitter goroutines not yet started, taken in a refill
//! by a P whose running goroutine kept spawning, went back behind 250,000 new
//! goroutines and started half a second late). Counts are wrapping ring
//! indices: a mark 2^31 pushes stale could read as current, which only
//! reorders the global queue.

use std::ptr::{self, NonNull};

use crate::loom::sync::atomic::{AtomicPtr, AtomicU32, Ordering::*};

/// Slots in a local run queue (Go and tokio use 256). Smaller under loom so the
/// models can reach the wrap-around and overflow paths.
#[cfg(not(loom))]
pub(crate) const CAPACITY: usize = 256;
#[cfg(loom)]
pub(crate) const CAPACITY: usize = 4;

const MASK: u32 = CAPACITY as u32 - 1;

pub(crate) struct RunQueue<T> {
    head: AtomicU32,
    tail: AtomicU32,
    /// Owner only (relaxed): the ring index up to which the items came from
    /// the head of another queue, in a refill or a steal ("Seniors" above).
    senior_end: AtomicU32,
    buf: Box<[AtomicPtr<T>]>,
}

// SAFETY: the queue only moves owned `NonNull<T>` between threads; items are `Send`
// because the caller only stores `Send` tasks in it.
unsafe impl<T: Send> Send for RunQueue<T> {}
// SAFETY: every shared access goes through atomics, per the protocol above.
unsafe impl<T: Send> Sync for RunQueue<T> {}

impl<T> RunQueue<T> {
    pub(crate) fn new() -> Self {
        RunQueue {
            head: AtomicU32::new(0),
            tail: AtomicU32::new(0),
            senior_end: AtomicU32::new(0),
            buf: (0..CAPACITY)
                .map(|_| AtomicPtr::new(ptr::null_mut()))
                .collect(),
        }
    }

    #[inline]
    fn slot(&self, i: u32) -> &AtomicPtr<T> {
        &self.buf[(i & MASK) as usize]
    }

    /// Number of items (a racy snapshot when called by non-owners).
    pub(crate) fn len(&self) -> usize {
        loop {
            let h = self.head.load(Acquire);
            let t = self.tail.load(Acquire);
            // Re-read head: a consistent (h, t) pair has h unchanged across the tail read.
            if self.head.load(Acquire) == h {
                return t.wrapping_sub(h) as usize;
            }
        }
    }

    /// Items ever taken from the head (wrapping): sysmon tells a queue that
    /// is being served (stolen from) from one whose items wait.
    pub(crate) fn taken(&self) -> u32 {
        self.head.load(Relaxed)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Owner only: the items queued so far came from the global queue's head
    /// (a refill): an overflow that moves them reports them as seniors.
    pub(crate) fn mark_seniors(&self) {
        self.senior_end.store(self.tail.load(Relaxed), Relaxed);
    }

    /// Owner only. Put `item` at the tail. When the ring is full, `overflow` is
    /// handed half of the ring (oldest first) followed by `item`, and must move
    /// them all to the global queue; with it, how many of the batch's first
    /// items are seniors (from a refill or a steal: they go back to the global
    /// queue's head).
    ///
    /// # Safety
    /// Must be called only by the queue's owner (one thread at a time).
    pub(crate) unsafe fn push_back(
        &self,
        item: NonNull<T>,
        overflow: impl FnOnce(Vec<NonNull<T>>, usize),
    ) {
        let mut overflow = Some(overflow);
        loop {
            let h = self.head.load(Acquire);
            // Only the owner writes tail: a relaxed load of our own store suffices.
            let t = self.tail.load(Relaxed);
            if t.wrapping_sub(h) < CAPACITY as u32 {
                self.slot(t).store(item.as_ptr(), Relaxed);
                self.tail.store(t.wrapping_add(1), Release);
                return;
            }
            // Full: move half to the global queue (`runqputslow`).
            let n = (CAPACITY / 2) as u32;
            let mut batch = Vec::with_capacity(n as usize + 1);
            for i in 0..n {
                batch.push(self.slot(h.wrapping_add(i)).load(Relaxed));
            }
            if self
                .head
                .compare_exchange(h, h.wrapping_add(n), AcqRel, Relaxed)
                .is_err()
            {
                // A thief took some: the fast path has room now.
                continue;
            }
            let mut batch: Vec<NonNull<T>> = batch
                .into_iter()
                // SAFETY: slots in head..tail always hold non-null items.
                .map(|p| unsafe { NonNull::new_unchecked(p) })
                .collect();
            batch.push(item);
            // Seniors still at the head: those below `senior_end` (a stale
            // mark lies behind `h`, and counts none).
            let seniors = (self.senior_end.load(Relaxed).wrapping_sub(h) as i32).clamp(0, n as i32);
            (overflow.take().expect("overflow runs once"))(batch, seniors as usize);
            return;
        }
    }

    /// Owner only. Take the item at the head.
    ///
    /// # Safety
    /// Must be called only by the queue's owner.
    pub(crate) unsafe fn pop(&self) -> Option<NonNull<T>> {
        loop {
            let h = self.head.load(Acquire);
            let t = self.tail.load(Relaxed);
            if h == t {
                return None;
            }
            let item = self.slot(h).load(Relaxed);
            if self
                .head
                .compare_exchange(h, h.wrapping_add(1), AcqRel, Relaxed)
                .is_ok()
            {
                return NonNull::new(item);
            }
        }
    }

    /// Steal `min(max, ceil(n/2))` items, the oldest, from `self` (the
    /// victim) into `dst` (the thief's own, empty-ish queue); `max` ≥ 1,
    /// `u32::MAX` for Go's half. Returns one stolen item to run now; the rest
    /// are in `dst`. Go's `runqsteal`/`runqgrab`.
    ///
    /// # Safety
    /// Must be called by the owner of `dst`, and `dst` must not be `self`.
    pub(crate) unsafe fn steal_into(&self, dst: &RunQueue<T>, max: u32) -> Option<NonNull<T>> {
        debug_assert!(max >= 1);
        let dst_tail = dst.tail.load(Relaxed);
        let dst_head = dst.head.load(Acquire);
        // Room in dst for at most half a ring; a thief only steals when its own
        // queue is empty, so this holds in practice; bail out if not.
        if dst_tail.wrapping_sub(dst_head) > (CAPACITY / 2) as u32 {
            return None;
        }
        loop {
            let h = self.head.load(Acquire);
            let t = self.tail.load(Acquire);
            let n = t.wrapping_sub(h);
            if n == 0 {
                return None;
            }
            if n > CAPACITY as u32 {
                // Torn snapshot (head moved between the two loads): retry.
                continue;
            }
            let n = (n - n / 2).min(max);
            for i in 0..n {
                let item = self.slot(h.wrapping_add(i)).load(Relaxed);
                dst.slot(dst_tail.wrapping_add(i)).store(item, Relaxed);
            }
            if self
                .head
                .compare_exchange(h, h.wrapping_add(n), AcqRel, Relaxed)
                .is_ok()
            {
                // Keep the last one to run now; publish the others.
                let last = dst.slot(dst_tail.wrapping_add(n - 1)).load(Relaxed);
                if n > 1 {
                    dst.tail.store(dst_tail.wrapping_add(n - 1), Release);
                }
                // They were next in line on the victim: seniors here.
                dst.senior_end.store(dst_tail.wrapping_add(n - 1), Relaxed);
                return NonNull::new(last);
            }
            // Lost the race: the copies in dst's free slots are discarded.
        }
    }
}

impl<T> Drop for RunQueue<T> {
    fn drop(&mut self) {
        // The scheduler drains every queue before dropping it (items are owned
        // task references that need their own release). A leftover item here is a
        // scheduler bug, not a user error.
        if !std::thread::panicking() {
            debug_assert!(self.is_empty(), "run queue dropped with items in it");
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    fn item(v: usize) -> NonNull<usize> {
        NonNull::new(Box::into_raw(Box::new(v))).unwrap()
    }
    fn take(p: NonNull<usize>) -> usize {
        // SAFETY: every item was made by `item` and leaves the queue exactly once.
        *unsafe { Box::from_raw(p.as_ptr()) }
    }

    #[test]
    fn fifo_and_overflow_moves_half_plus_one() {
        let q = RunQueue::new();
        let mut spilled = Vec::new();
        for i in 0..CAPACITY + 1 {
            // SAFETY: this thread is the owner.
            unsafe { q.push_back(item(i), |b, _| spilled.extend(b.into_iter().map(take))) };
        }
        assert_eq!(spilled.len(), CAPACITY / 2 + 1);
        assert_eq!(
            spilled[..CAPACITY / 2],
            (0..CAPACITY / 2).collect::<Vec<_>>()[..]
        );
        assert_eq!(*spilled.last().unwrap(), CAPACITY);
        assert_eq!(q.len(), CAPACITY / 2);
        let mut rest = Vec::new();
        // SAFETY: owner.
        while let Some(p) = unsafe { q.pop() } {
            rest.push(take(p));
        }
        assert_eq!(rest, (CAPACITY / 2..CAPACITY).collect::<Vec<_>>());
    }

    /// Owner: push `items` into `q`, recording the seniors count of each
    /// overflow in `reports` and the overflowed items in `spilled`.
    fn push_all(
        q: &RunQueue<usize>,
        items: std::ops::Range<usize>,
        reports: &mut Vec<usize>,
        spilled: &mut Vec<usize>,
    ) {
        for i in items {
            // SAFETY: the caller's thread owns `q`.
            unsafe {
                q.push_back(item(i), |b, k| {
                    reports.push(k);
                    spilled.extend(b.into_iter().map(take));
                })
            };
        }
    }

    /// Owner: push `items` into `q`, which has room for them all.
    fn push_quiet(q: &RunQueue<usize>, items: std::ops::Range<usize>) {
        push_all(q, items, &mut Vec::new(), &mut Vec::new());
    }

    /// Owner: empty `q`, freeing its items; returns them, oldest first.
    fn drain(q: &RunQueue<usize>) -> Vec<usize> {
        let mut out = Vec::new();
        // SAFETY: the caller's thread owns `q`.
        while let Some(p) = unsafe { q.pop() } {
            out.push(take(p));
        }
        out
    }

    /// An overflow counts as seniors the items queued before `mark_seniors`
    /// that are still at the head; none once they are gone.
    #[test]
    fn overflow_reports_the_refilled_items_as_seniors() {
        let q = RunQueue::new();
        let (mut reports, mut spilled) = (Vec::new(), Vec::new());
        // A refill of 10, then local pushes until the ring overflows.
        push_all(&q, 0..10, &mut reports, &mut spilled);
        q.mark_seniors();
        push_all(&q, 10..CAPACITY + 1, &mut reports, &mut spilled);
        assert_eq!(reports, [10]);
        assert_eq!(spilled[..10], (0..10).collect::<Vec<_>>()[..]);
        // A refill of the whole ring (a new mark), 3 of it popped before the
        // next overflow.
        q.mark_seniors();
        for _ in 0..3 {
            // SAFETY: owner.
            take(unsafe { q.pop() }.unwrap());
        }
        let room = CAPACITY - q.len();
        push_all(&q, 1000..1000 + room + 1, &mut reports, &mut spilled);
        // The mark covered the CAPACITY/2 items then queued; 3 were popped.
        assert_eq!(reports, [10, CAPACITY / 2 - 3]);
        // A stale mark (every marked item gone) counts none.
        drain(&q);
        q.mark_seniors();
        push_all(&q, 5000..5000 + CAPACITY + 1, &mut reports, &mut spilled);
        assert_eq!(reports, [10, CAPACITY / 2 - 3, 0]);
        drain(&q);
    }

    /// What a thief stole (but the one it runs) counts as seniors in its own
    /// ring's next overflow.
    #[test]
    fn stolen_items_are_seniors_of_the_thief() {
        let victim = RunQueue::new();
        let thief = RunQueue::new();
        let (mut reports, mut spilled) = (Vec::new(), Vec::new());
        push_quiet(&victim, 0..8);
        // SAFETY: this thread owns `thief`.
        let first = unsafe { victim.steal_into(&thief, u32::MAX) }.unwrap();
        take(first);
        assert_eq!(thief.len(), 3);
        push_all(
            &thief,
            100..100 + CAPACITY - 3 + 1,
            &mut reports,
            &mut spilled,
        );
        assert_eq!(reports, [3]);
        drain(&thief);
        drain(&victim);
    }

    #[test]
    fn steal_takes_ceil_half() {
        let victim = RunQueue::new();
        let thief = RunQueue::new();
        push_quiet(&victim, 0..7);
        // SAFETY: this thread owns `thief`.
        let first = unsafe { victim.steal_into(&thief, u32::MAX) }.unwrap();
        assert_eq!(take(first), 3);
        assert_eq!(drain(&thief).len(), 3);
        assert_eq!(drain(&victim).len(), 3);
    }

    #[test]
    fn steal_at_most_takes_the_oldest() {
        let victim = RunQueue::new();
        let thief = RunQueue::new();
        push_quiet(&victim, 0..40);
        // SAFETY: this thread owns `thief`.
        let first = unsafe { victim.steal_into(&thief, 8) }.unwrap();
        // The eighth oldest runs now; the seven before it wait in order.
        assert_eq!(take(first), 7);
        assert_eq!(drain(&thief), (0..7).collect::<Vec<_>>());
        assert_eq!(drain(&victim), (8..40).collect::<Vec<_>>());
        // Fewer than twice `max` queued: half, as without a bound.
        push_quiet(&victim, 0..5);
        // SAFETY: as above.
        let first = unsafe { victim.steal_into(&thief, 8) }.unwrap();
        assert_eq!(take(first), 2);
        assert_eq!(drain(&thief), [0, 1]);
        assert_eq!(drain(&victim), [3, 4]);
    }

    /// Stress: an owner pushing and popping while two thieves steal; every item is
    /// taken exactly once.
    #[test]
    fn stress_no_item_lost_or_duplicated() {
        const N: usize = if cfg!(miri) { 2_000 } else { 200_000 };
        struct Shared {
            victim: RunQueue<usize>,
            done: AtomicBool,
        }
        let shared = Arc::new(Shared {
            victim: RunQueue::new(),
            done: AtomicBool::new(false),
        });
        let thieves: Vec<_> = (0..2)
            .map(|_| {
                let s = shared.clone();
                std::thread::spawn(move || {
                    let mine = RunQueue::new();
                    let mut got = Vec::new();
                    loop {
                        let done = s.done.load(Acquire);
                        // SAFETY: this thread owns `mine`.
                        if let Some(p) = unsafe { s.victim.steal_into(&mine, u32::MAX) } {
                            got.push(take(p));
                            // SAFETY: owner of `mine`.
                            while let Some(p) = unsafe { mine.pop() } {
                                got.push(take(p));
                            }
                        } else if done {
                            return got;
                        }
                    }
                })
            })
            .collect();
        let mut got = Vec::new();
        for i in 0..N {
            // SAFETY: this thread owns `victim`.
            unsafe {
                shared
                    .victim
                    .push_back(item(i), |b, _| got.extend(b.into_iter().map(take)));
                if i % 3 == 0 {
                    if let Some(p) = shared.victim.pop() {
                        got.push(take(p));
                    }
                }
            }
        }
        shared.done.store(true, Release);
        // SAFETY: owner.
        while let Some(p) = unsafe { shared.victim.pop() } {
            got.push(take(p));
        }
        for t in thieves {
            got.extend(t.join().unwrap());
        }
        assert_eq!(got.len(), N);
        let set: HashSet<_> = got.into_iter().collect();
        assert_eq!(set.len(), N);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    fn item(v: usize) -> NonNull<usize> {
        NonNull::new(Box::into_raw(Box::new(v))).unwrap()
    }
    fn take(p: NonNull<usize>) -> usize {
        // SAFETY: every item was made by `item` and leaves the queue exactly once.
        *unsafe { Box::from_raw(p.as_ptr()) }
    }

    /// The owner pushes past capacity (overflow to "global") and pops while a thief
    /// steals: every item comes out exactly once.
    #[test]
    fn put_get_steal_no_loss_no_dup() {
        loom::model(|| {
            let victim = Arc::new(RunQueue::new());
            let v2 = victim.clone();
            let thief = thread::spawn(move || {
                let mine = RunQueue::new();
                let mut got = Vec::new();
                // SAFETY: this thread owns `mine`.
                unsafe {
                    if let Some(p) = v2.steal_into(&mine, u32::MAX) {
                        got.push(take(p));
                    }
                    while let Some(p) = mine.pop() {
                        got.push(take(p));
                    }
                }
                got
            });
            let mut got = Vec::new();
            // SAFETY: this thread owns `victim`.
            unsafe {
                for i in 0..CAPACITY + 1 {
                    victim.push_back(item(i), |b, _| got.extend(b.into_iter().map(take)));
                }
                if let Some(p) = victim.pop() {
                    got.push(take(p));
                }
            }
            got.extend(thief.join().unwrap());
            // SAFETY: the thief has finished; this thread owns `victim`.
            unsafe {
                while let Some(p) = victim.pop() {
                    got.push(take(p));
                }
            }
            got.sort_unstable();
            assert_eq!(got, (0..CAPACITY + 1).collect::<Vec<_>>());
        });
    }

    /// Two thieves against one owner that pops: exactly-once delivery. One
    /// takes half, the other at most one (`steal_queued`'s bounded steal).
    #[test]
    fn two_thieves() {
        loom::model(|| {
            let victim = Arc::new(RunQueue::new());
            // SAFETY: this thread owns `victim`.
            unsafe {
                for i in 0..3 {
                    victim.push_back(item(i), |_, _| unreachable!());
                }
            }
            let thieves: Vec<_> = [u32::MAX, 1]
                .into_iter()
                .map(|max| {
                    let v = victim.clone();
                    thread::spawn(move || {
                        let mine = RunQueue::new();
                        let mut got = Vec::new();
                        // SAFETY: this thread owns `mine`.
                        unsafe {
                            if let Some(p) = v.steal_into(&mine, max) {
                                got.push(take(p));
                            }
                            while let Some(p) = mine.pop() {
                                got.push(take(p));
                            }
                        }
                        got
                    })
                })
                .collect();
            let mut got = Vec::new();
            // SAFETY: owner.
            if let Some(p) = unsafe { victim.pop() } {
                got.push(take(p));
            }
            for t in thieves {
                got.extend(t.join().unwrap());
            }
            // SAFETY: owner, thieves done.
            while let Some(p) = unsafe { victim.pop() } {
                got.push(take(p));
            }
            got.sort_unstable();
            assert_eq!(got, vec![0, 1, 2]);
        });
    }

    /// A steal publishes what it moved into the thief's own ring with a
    /// store-release of that ring's `tail`: a second thief stealing from that ring
    /// reads the slots the first one wrote, never stale (empty) ones. Catches a
    /// relaxed `dst.tail` store in `steal_into`: the second thief's CAS would then
    /// take a null slot and the item would be lost.
    #[test]
    fn steal_from_a_thief_sees_the_stolen_items() {
        loom::model(|| {
            let victim = Arc::new(RunQueue::new());
            // SAFETY: this thread owns `victim`; it touches it again only after the
            // thief has finished.
            unsafe {
                for i in 0..3 {
                    victim.push_back(item(i), |_, _| unreachable!());
                }
            }
            // Thief 1 owns `middle` and fills it from `victim`; thief 2 steals
            // from `middle`.
            let middle = Arc::new(RunQueue::new());
            let (v1, m1) = (victim.clone(), middle.clone());
            let thief1 = thread::spawn(move || {
                // ceil(3/2) = 2 items: it runs one and publishes the other in `m1`.
                // SAFETY: this thread owns `m1`.
                unsafe { v1.steal_into(&m1, u32::MAX) }.map(take)
            });
            let m2 = middle.clone();
            let thief2 = thread::spawn(move || {
                let mine = RunQueue::new();
                let mut got = Vec::new();
                // SAFETY: this thread owns `mine`.
                unsafe {
                    if let Some(p) = m2.steal_into(&mine, u32::MAX) {
                        got.push(take(p));
                    }
                    while let Some(p) = mine.pop() {
                        got.push(take(p));
                    }
                }
                got
            });
            let mut got: Vec<usize> = thief1.join().unwrap().into_iter().collect();
            got.extend(thief2.join().unwrap());
            // SAFETY: both thieves have finished: this thread owns both queues now.
            unsafe {
                for q in [&victim, &middle] {
                    while let Some(p) = q.pop() {
                        got.push(take(p));
                    }
                }
            }
            got.sort_unstable();
            assert_eq!(got, vec![0, 1, 2], "an item was lost or duplicated");
        });
    }
}
