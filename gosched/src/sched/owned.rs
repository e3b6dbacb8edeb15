//! The runtime's list of parked tasks (Go's `allgs`, for the Gs that can be out of
//! every queue): lets shutdown find and cancel goroutines and tasks that are
//! parked and referenced by nobody else, so their stacks and memory are freed.
//!
//! A task is linked at its first park (see `task.rs`) and unlinks itself when it
//! completes; the list holds one reference meanwhile. Sharded by task id so that
//! Ps rarely share a lock. Links live in the task header and are only touched
//! under the shard lock. Once `close` has run, `insert` refuses new tasks: the
//! caller cancels them.

use std::ptr::NonNull;

use super::task::{Header, Task};
use crate::loom::lock;
use crate::loom::sync::atomic::{AtomicBool, Ordering::*};
use crate::loom::sync::Mutex;

pub(crate) struct OwnedTasks {
    shards: Box<[Mutex<List>]>,
    mask: u64,
    closed: AtomicBool,
}

struct List {
    head: Option<NonNull<Header>>,
    len: usize,
}

// SAFETY: the raw pointers are task references, only followed under the lock.
unsafe impl Send for List {}

impl List {
    /// Unlink `ptr` from this list; false if it is not linked here.
    ///
    /// # Safety
    /// The caller holds this list's shard lock and a reference to `ptr`'s task.
    unsafe fn unlink(&mut self, ptr: NonNull<Header>) -> bool {
        // SAFETY: links are guarded by the shard lock the caller holds, and
        // every linked task is alive (the list holds a reference).
        unsafe {
            let h = ptr.as_ref();
            let prev = h.owned_prev.with(|p| *p);
            let next = h.owned_next.with(|n| *n);
            match prev {
                Some(p) => p.as_ref().owned_next.with_mut(|n| *n = next),
                None => {
                    if self.head != Some(ptr) {
                        return false; // not linked
                    }
                    self.head = next;
                }
            }
            if let Some(n) = next {
                n.as_ref().owned_prev.with_mut(|p| *p = prev);
            }
            h.owned_prev.with_mut(|p| *p = None);
            h.owned_next.with_mut(|n| *n = None);
        }
        self.len -= 1;
        true
    }
}

impl OwnedTasks {
    pub(crate) fn new(procs: usize) -> Self {
        let n = (procs * 4).next_power_of_two();
        OwnedTasks {
            shards: (0..n)
                .map(|_| Mutex::new(List { head: None, len: 0 }))
                .collect(),
            mask: n as u64 - 1,
            closed: AtomicBool::new(false),
        }
    }

    fn shard(&self, id: u64) -> &Mutex<List> {
        &self.shards[(id & self.mask) as usize]
    }

    /// Link a task (taking over the reference in `task`). Gives it back if the
    /// list is closed (the runtime shut down).
    pub(crate) fn insert(&self, task: Task) -> Result<(), Task> {
        let id = task.header().id;
        let mut list = lock(self.shard(id));
        // Checked under the shard lock: `close` sets the flag, then takes every
        // shard lock, so no insert can slip in behind the drain.
        if self.closed.load(Acquire) {
            return Err(task);
        }
        let ptr = task.into_raw();
        // SAFETY: we hold the shard lock; the links of `ptr` and of the old head
        // are guarded by it; the caller holds RUNNING, which covers the flag.
        unsafe {
            let h = ptr.as_ref();
            h.owned_linked.with_mut(|l| *l = true);
            h.owned_next.with_mut(|n| *n = list.head);
            h.owned_prev.with_mut(|p| *p = None);
            if let Some(old) = list.head {
                old.as_ref().owned_prev.with_mut(|p| *p = Some(ptr));
            }
        }
        list.head = Some(ptr);
        list.len += 1;
        Ok(())
    }

    /// Unlink a completed task. False if it was not linked (shutdown took it);
    /// on true the caller now owns the list's reference.
    pub(crate) fn remove(&self, ptr: NonNull<Header>) -> bool {
        // SAFETY: the caller holds a reference, so the header is alive.
        let id = unsafe { ptr.as_ref() }.id;
        // SAFETY: we hold the shard lock and a reference to the task.
        unsafe { lock(self.shard(id)).unlink(ptr) }
    }

    /// Refuse new tasks from now on.
    pub(crate) fn close(&self) {
        self.closed.store(true, Release);
        // Taking each lock once orders every later insert after the flag.
        for s in self.shards.iter() {
            drop(lock(s));
        }
    }

    /// Call `f` on every linked task, shard by shard under the shard lock
    /// (the goroutine dump: `f` only reads the header).
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn for_each(&self, mut f: impl FnMut(&Header)) {
        for s in self.shards.iter() {
            let list = lock(s);
            let mut cur = list.head;
            while let Some(ptr) = cur {
                // SAFETY: under the shard lock; every linked task is alive
                // (the list holds a reference) and its links are guarded by
                // this lock.
                let h = unsafe { ptr.as_ref() };
                f(h);
                // SAFETY: the link is guarded by the shard lock we hold.
                cur = h.owned_next.with(|n| unsafe { *n });
            }
        }
    }

    /// Unlink one task, handing over the list's reference.
    pub(crate) fn pop(&self) -> Option<Task> {
        for s in self.shards.iter() {
            let mut list = lock(s);
            if let Some(ptr) = list.head {
                // SAFETY: under the lock; `ptr` is linked and alive (the list
                // holds its reference, which moves to the returned Task).
                unsafe {
                    list.unlink(ptr);
                    // No M runs any more (shutdown): nobody else reads the flag.
                    ptr.as_ref().owned_linked.with_mut(|l| *l = false);
                    return Some(Task::from_raw(ptr));
                }
            }
        }
        None
    }
}
