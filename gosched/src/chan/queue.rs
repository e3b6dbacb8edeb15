//! The wait queues of a channel: intrusive FIFO lists of parked operations
//! (Go's `waitq` of sudogs).
//!
//! # Protocol
//!
//! A `WaitQueue` lives inside the channel's locked state, and every method takes
//! `&mut self` (or `&self` of the locked state): all link reads and writes happen
//! under the channel lock. A node is an `Arc<Waiter<T>>`; the links live in the
//! waiter itself (`Waiter::links`, an `UnsafeCell`), so push, pop and remove are
//! O(1) and allocate nothing.
//!
//! Invariants, under the channel lock:
//! - **Ownership.** The queue owns one strong count per queued node: taken with
//!   `Arc::into_raw` on `push_back`, given back with `Arc::from_raw` on
//!   `pop_front` / `remove` (so a queued waiter is alive even if its owner
//!   dropped its own `Arc`).
//! - **Provenance.** Every pointer the queue stores or turns back into an `Arc`
//!   (`head`, `tail`, each node's `prev`/`next`, the argument of `unlink`) comes
//!   from `Arc::into_raw` or `Arc::as_ptr` of the node's `Arc` itself, so it may
//!   reach the whole `ArcInner`, reference counts included. A pointer made from a
//!   `&Waiter` may reach only the `Waiter`: rebuilding an `Arc` from it is UB
//!   under Stacked Borrows. That is why `remove` takes `&Arc<Waiter<T>>`.
//! - **Membership.** `links.queued` is true exactly while the node is linked in a
//!   queue, and `prev`/`next` are null whenever it is false. A waiter belongs to
//!   exactly one channel (each select arm has its own) and is only ever pushed
//!   into one of that channel's two queues, so its `links` are only ever touched
//!   under that one channel's lock, and a queued node passed to `remove` is in
//!   the queue it is removed from (callers pass the right side).
//! - `len` is the number of linked nodes; `head`/`tail` are null iff it is 0.
//!
//! `remove` is O(1) — a select that loses on one channel unlinks its waiters from
//! all the others, and a channel with 100,000 parked selectors must not turn that
//! into a quadratic scan. Removing a node that a channel operation already popped
//! (`queued` false) is a no-op.

use std::ptr;

use super::core::Waiter;
use crate::loom::sync::Arc;

pub(super) struct Links<T> {
    prev: *const Waiter<T>,
    next: *const Waiter<T>,
    queued: bool,
}

impl<T> Links<T> {
    pub(super) const fn new() -> Self {
        Links {
            prev: ptr::null(),
            next: ptr::null(),
            queued: false,
        }
    }
}

pub(super) struct WaitQueue<T> {
    head: *const Waiter<T>,
    tail: *const Waiter<T>,
    len: usize,
}

// SAFETY: the queue only holds `Arc<Waiter<T>>`s (as raw pointers); sending it to
// another thread sends those Arcs, which is sound when `Waiter<T>` is `Send + Sync`,
// i.e. when `T: Send`.
unsafe impl<T: Send> Send for WaitQueue<T> {}

impl<T> WaitQueue<T> {
    pub(super) const fn new() -> Self {
        WaitQueue {
            head: ptr::null(),
            tail: ptr::null(),
            len: 0,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn push_back(&mut self, w: Arc<Waiter<T>>) {
        let p = Arc::into_raw(w);
        let tail = self.tail;
        // SAFETY: `p` is a live waiter we now own a count of; its links and the
        // tail's links are only accessed under the channel lock, which `&mut self`
        // proves we hold.
        unsafe {
            (*p).links.with_mut(|l| {
                debug_assert!(!(*l).queued, "waiter queued twice");
                *l = Links {
                    prev: tail,
                    next: ptr::null(),
                    queued: true,
                };
            });
            if tail.is_null() {
                self.head = p;
            } else {
                (*tail).links.with_mut(|l| (*l).next = p);
            }
        }
        self.tail = p;
        self.len += 1;
    }

    /// Walk the queue from the head: `f` returns `true` to stop. Used to look for a
    /// live counterpart without taking it.
    pub(super) fn any(&self, mut f: impl FnMut(&Waiter<T>) -> bool) -> bool {
        let mut p = self.head;
        while !p.is_null() {
            // SAFETY: queued nodes are alive (the queue holds a count) and their
            // links are read under the channel lock (`&self` of the locked state).
            let w = unsafe { &*p };
            if f(w) {
                return true;
            }
            // SAFETY: as above, under the channel lock.
            p = w.links.with(|l| unsafe { (*l).next });
        }
        false
    }

    pub(super) fn pop_front(&mut self) -> Option<Arc<Waiter<T>>> {
        let p = self.head;
        if p.is_null() {
            return None;
        }
        // SAFETY: `p` is queued, hence alive, and we hold the channel lock; it is
        // the `Arc::into_raw` pointer `push_back` stored, so `from_raw` takes back
        // exactly the count the queue owned.
        unsafe {
            self.unlink(p);
            Some(Arc::from_raw(p))
        }
    }

    /// Unlink `w` if it is queued here, giving back the queue's count. Returns
    /// whether it was. Takes the `Arc` (not `&Waiter`) so that the pointer
    /// turned back into an `Arc` has the `Arc`'s own provenance (see the
    /// protocol).
    pub(super) fn remove(&mut self, w: &Arc<Waiter<T>>) -> bool {
        // SAFETY: we hold the channel lock; `w`'s links belong to this channel.
        let queued = w.links.with(|l| unsafe { (*l).queued });
        if !queued {
            return false;
        }
        let p = Arc::as_ptr(w);
        // SAFETY: `w` is queued in this queue (a waiter belongs to one channel and
        // to one of its two queues — callers pass the right one), so unlinking it
        // is sound, and the queue owns one count of it, which we give back: `p`
        // comes from `Arc::as_ptr` of the node's `Arc`, the same allocation and
        // provenance as the `Arc::into_raw` pointer `push_back` stored. This never
        // frees the waiter: the caller's `w` holds another count.
        unsafe {
            self.unlink(p);
            drop(Arc::from_raw(p));
        }
        true
    }

    /// # Safety
    /// `p` must be queued in `self` (a pointer with the provenance of its `Arc`),
    /// and the channel lock held. The queue's count of `p` is left to the caller.
    unsafe fn unlink(&mut self, p: *const Waiter<T>) {
        // SAFETY: per the contract, `p` and its neighbours are queued and alive.
        unsafe {
            let (prev, next) = (*p).links.with_mut(|l| {
                let pn = ((*l).prev, (*l).next);
                *l = Links::new();
                pn
            });
            if prev.is_null() {
                self.head = next;
            } else {
                (*prev).links.with_mut(|l| (*l).next = next);
            }
            if next.is_null() {
                self.tail = prev;
            } else {
                (*next).links.with_mut(|l| (*l).prev = prev);
            }
        }
        self.len -= 1;
    }
}

impl<T> Drop for WaitQueue<T> {
    fn drop(&mut self) {
        while self.pop_front().is_some() {}
    }
}
