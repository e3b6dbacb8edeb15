//! The wait queue under every primitive of `gosched::sync` (Go's `semaRoot` list
//! of sudogs): a FIFO of parked operations, kept in a slab so that it needs no
//! `unsafe` and no allocation per wait once warm.
//!
//! # Protocol
//!
//! A `WaitList` always lives inside a lock (`crate::loom::sync::Mutex`) owned by
//! its primitive; every method takes `&self`/`&mut self` of the locked list, so
//! all of it happens under that lock. A waiting operation (a future) owns one
//! `Key` while it waits:
//!
//! - `push_back`/`push_front` link a **queued** entry (with the data the waker
//!   side needs: permits, wait start, ...) and the future's `Waker`;
//! - the waking side unlinks an entry with `notify_front`, which turns it into a
//!   **notified** entry (still holding its data, which the waker may have
//!   updated: "you own the lock now", ...) and returns its `Waker` — to be called
//!   *after* the primitive's lock is released;
//! - the owner of the key consumes it exactly once: `poll` (notified → the data,
//!   and the slot is freed; queued → stores the new waker) or `cancel` (the
//!   future is dropped: says whether it was still queued or already notified, so
//!   the primitive can pass on whatever the notification carried).
//!
//! Only the key's owner frees its slot, so a key is never reused while someone
//! still holds it (no ABA). The slab keeps its peak size; freed slots are reused.

use std::task::Waker;

/// Handle of one queued or notified entry, owned by the waiting future.
pub(crate) type Key = usize;

const NIL: usize = usize::MAX;

#[derive(Debug)]
enum Slot<T> {
    Free {
        next_free: usize,
    },
    Queued {
        data: T,
        waker: Option<Waker>,
        prev: usize,
        next: usize,
    },
    Notified {
        data: T,
    },
}

/// What `cancel` found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Cancelled<T> {
    /// Still queued: unlinked, nothing was handed to it.
    Queued(T),
    /// Already notified: whatever the notification carried must be passed on.
    Notified(T),
}

#[derive(Debug)]
pub(crate) struct WaitList<T> {
    slots: Vec<Slot<T>>,
    free: usize,
    head: usize,
    tail: usize,
    len: usize,
}

impl<T> Default for WaitList<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> WaitList<T> {
    pub(crate) const fn new() -> Self {
        WaitList {
            slots: Vec::new(),
            free: NIL,
            head: NIL,
            tail: NIL,
            len: 0,
        }
    }

    /// Entries queued (not counting notified ones not yet consumed).
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn alloc(&mut self, slot: Slot<T>) -> Key {
        if self.free == NIL {
            self.slots.push(slot);
            self.slots.len() - 1
        } else {
            let key = self.free;
            self.free = match self.slots[key] {
                Slot::Free { next_free } => next_free,
                _ => unreachable!("free list points at a used slot"),
            };
            self.slots[key] = slot;
            key
        }
    }

    fn release(&mut self, key: Key) -> Slot<T> {
        std::mem::replace(
            &mut self.slots[key],
            Slot::Free {
                next_free: std::mem::replace(&mut self.free, key),
            },
        )
    }

    fn set_prev(&mut self, key: Key, p: usize) {
        match &mut self.slots[key] {
            Slot::Queued { prev, .. } => *prev = p,
            _ => unreachable!("linked slot not queued"),
        }
    }

    fn set_next(&mut self, key: Key, n: usize) {
        match &mut self.slots[key] {
            Slot::Queued { next, .. } => *next = n,
            _ => unreachable!("linked slot not queued"),
        }
    }

    /// Queue at the tail (a new waiter).
    pub(crate) fn push_back(&mut self, data: T, waker: &Waker) -> Key {
        let tail = self.tail;
        let key = self.alloc(Slot::Queued {
            data,
            waker: Some(waker.clone()),
            prev: tail,
            next: NIL,
        });
        if tail == NIL {
            self.head = key;
        } else {
            self.set_next(tail, key);
        }
        self.tail = key;
        self.len += 1;
        key
    }

    /// Queue at the head (Go's LIFO re-queue of a woken waiter that lost the race).
    pub(crate) fn push_front(&mut self, data: T, waker: &Waker) -> Key {
        let head = self.head;
        let key = self.alloc(Slot::Queued {
            data,
            waker: Some(waker.clone()),
            prev: NIL,
            next: head,
        });
        if head == NIL {
            self.tail = key;
        } else {
            self.set_prev(head, key);
        }
        self.head = key;
        self.len += 1;
        key
    }

    /// The data of the head entry.
    pub(crate) fn front(&self) -> Option<&T> {
        if self.head == NIL {
            return None;
        }
        match &self.slots[self.head] {
            Slot::Queued { data, .. } => Some(data),
            _ => unreachable!("head not queued"),
        }
    }

    /// Unlink the head entry and mark it notified; `f` may update its data first.
    /// Returns its waker, to be woken after the primitive's lock is released.
    pub(crate) fn notify_front_with(&mut self, f: impl FnOnce(&mut T)) -> Option<Waker> {
        let key = self.head;
        if key == NIL {
            return None;
        }
        self.unlink(key);
        let Slot::Queued {
            mut data, waker, ..
        } = std::mem::replace(&mut self.slots[key], Slot::Free { next_free: NIL })
        else {
            unreachable!("head not queued")
        };
        f(&mut data);
        self.slots[key] = Slot::Notified { data };
        waker
    }

    /// `notify_front_with` without changing the data.
    pub(crate) fn notify_front(&mut self) -> Option<Waker> {
        self.notify_front_with(|_| {})
    }

    /// Notify every queued entry, front to back, with `f` applied to each
    /// one's data; their wakers, to call after the primitive's lock is
    /// released.
    pub(crate) fn notify_all_with(&mut self, mut f: impl FnMut(&mut T)) -> Vec<Waker> {
        let mut wakers = Vec::with_capacity(self.len);
        while let Some(w) = self.notify_front_with(&mut f) {
            wakers.push(w);
        }
        wakers
    }

    /// `notify_all_with` without changing the data (a broadcast).
    pub(crate) fn notify_all(&mut self) -> Vec<Waker> {
        self.notify_all_with(|_| {})
    }

    fn unlink(&mut self, key: Key) {
        let (prev, next) = match &self.slots[key] {
            Slot::Queued { prev, next, .. } => (*prev, *next),
            _ => unreachable!("unlinking a slot that is not queued"),
        };
        if prev == NIL {
            self.head = next;
        } else {
            self.set_next(prev, next);
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.set_prev(next, prev);
        }
        self.len -= 1;
    }

    /// The owner of `key` polls: `Some(data)` (and the key is consumed) once
    /// notified; otherwise `None`, with `waker` registered for the notification.
    pub(crate) fn poll(&mut self, key: Key, waker: &Waker) -> Option<T> {
        match &mut self.slots[key] {
            Slot::Queued { waker: w, .. } => {
                match w {
                    Some(old) if old.will_wake(waker) => {}
                    _ => *w = Some(waker.clone()),
                }
                None
            }
            Slot::Notified { .. } => match self.release(key) {
                Slot::Notified { data } => Some(data),
                _ => unreachable!(),
            },
            Slot::Free { .. } => unreachable!("polling a freed wait-list key"),
        }
    }

    /// Is `key` still queued (not yet notified)?
    fn is_queued(&self, key: Key) -> bool {
        matches!(self.slots[key], Slot::Queued { .. })
    }

    /// The owner of `key` gives up (its future is dropped): the key is consumed.
    pub(crate) fn cancel(&mut self, key: Key) -> Cancelled<T> {
        if self.is_queued(key) {
            self.unlink(key);
        }
        match self.release(key) {
            Slot::Queued { data, .. } => Cancelled::Queued(data),
            Slot::Notified { data } => Cancelled::Notified(data),
            Slot::Free { .. } => unreachable!("cancelling a freed wait-list key"),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn fifo_lifo_notify_cancel() {
        let w = Waker::noop();
        let mut l = WaitList::new();
        let a = l.push_back(1, w);
        let b = l.push_back(2, w);
        let c = l.push_front(0, w);
        assert_eq!(l.len(), 3);
        assert_eq!(l.front(), Some(&0));
        assert!(l.notify_front_with(|d| *d += 10).is_some());
        assert_eq!(l.poll(c, w), Some(10));
        assert_eq!(l.poll(a, w), None);
        assert_eq!(l.cancel(a), Cancelled::Queued(1));
        assert_eq!(l.front(), Some(&2));
        l.notify_front();
        assert!(l.is_empty());
        assert_eq!(l.cancel(b), Cancelled::Notified(2));
        // Freed slots are reused.
        let d = l.push_back(3, w);
        assert!(d == a || d == b || d == c);
        assert_eq!(l.len(), 1);
    }
}
