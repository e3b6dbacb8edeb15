//! The global run queue (Go's `sched.runq`).
//!
//! It holds Gs readied without a P (foreign threads, P-less Ms, `yield_now`),
//! overflow from full local rings (half a ring per batch), and the tasks of
//! `yield_now` (Go's Gosched). It lives in `Sched`, under the scheduler lock that
//! also guards the idle lists (`idle.rs`): an M dropping its P re-checks this
//! queue under that lock, so a push cannot slip between its check and its
//! `pidleput` (Go's `findRunnable` does the same under `sched.lock`).
//!
//! `Shared::global_len` mirrors the length for lock-free "anything there?"
//! checks; it is written under the lock (Release) and read without it
//! (Acquire). A reader that sees 0 may miss a push in flight: every such reader
//! either re-checks under the lock (dropping a P) or is covered by the pusher's
//! `wakep` (`ready.rs`).
//!
//! After teardown starts the queue is *closed*: a push cancels the task on the
//! spot (nothing will run it), so no task is lost silently.

use std::collections::VecDeque;
use std::ptr::NonNull;

use super::processor::Processor;
use super::runq;
use super::task::{Header, Task};
use super::{Sched, Shared};
use crate::loom::lock;
use crate::loom::sync::atomic::Ordering::*;
use crate::loom::sync::MutexGuard;

/// The queue itself; every access holds the scheduler lock.
pub(crate) struct GlobalQueue {
    tasks: VecDeque<Task>,
    /// Set by teardown: tasks pushed from then on are cancelled by the pusher.
    closed: bool,
}

impl GlobalQueue {
    pub(crate) fn new() -> Self {
        GlobalQueue {
            tasks: VecDeque::new(),
            closed: false,
        }
    }
}

impl Shared {
    /// Length of the global queue, without the lock (a snapshot).
    #[inline]
    pub(crate) fn global_len(&self) -> usize {
        self.global_len.load(Acquire)
    }

    /// Push one task (cancelled at once if the queue is closed).
    pub(crate) fn global_push(&self, task: Task) {
        if let Some(s) = self.push_locked(task) {
            self.global_len.store(s.global.tasks.len(), Release);
        }
    }

    /// Lock and push `task`; the guard for a caller that goes on under the lock.
    /// `None` if the queue is closed: the task was cancelled instead.
    fn push_locked(&self, task: Task) -> Option<MutexGuard<'_, Sched>> {
        let mut s = lock(&self.sched);
        if s.global.closed {
            // Shut down: nothing will run it; complete it as cancelled.
            drop(s);
            task.shutdown();
            return None;
        }
        s.global.tasks.push_back(task);
        Some(s)
    }

    /// `global_push` followed by `globrunqget` into `p`'s ring, under one lock
    /// (the yield path: `p` has nothing queued).
    pub(crate) fn global_push_and_refill(&self, task: Task, p: &Processor) {
        let Some(mut s) = self.push_locked(task) else {
            return;
        };
        // Go's batch, all of it into the ring in queue order; find_runnable pops
        // the first next.
        for _ in 0..self.global_batch(s.global.tasks.len(), 0) {
            let t = s.global.tasks.pop_front().expect("len checked");
            // SAFETY: the caller owns `p` (RUNNING) and its ring is empty, so the
            // at most 128 tasks fit.
            unsafe { p.runqput_tail(t, |_, _| unreachable!("ring had room")) };
            self.note_global_take();
        }
        p.runq.mark_seniors();
        self.global_len.store(s.global.tasks.len(), Release);
    }

    /// Count tasks taken from the global queue (caller holds the lock).
    #[inline]
    fn note_global_take(&self) {
        self.note_global_take_n(1);
    }

    #[inline]
    fn note_global_take_n(&self, n: usize) {
        use std::sync::atomic::Ordering::Relaxed;
        let t = self.global_takes.load(Relaxed);
        self.global_takes.store(t.wrapping_add(n), Relaxed);
    }

    /// Push a batch that overflowed a local ring (raw run-queue references):
    /// its first `seniors` (taken from the head of this queue by a refill, or
    /// of another P's ring by a steal: next in line where they were;
    /// `runq.rs`, "Seniors") back at the head, in order; the rest at the
    /// tail.
    pub(crate) fn global_push_batch(&self, batch: Vec<NonNull<Header>>, seniors: usize) {
        // SAFETY: ring items are owned task references; each is taken once
        // (the front and back halves are disjoint, and the shutdown path
        // returns).
        let task = |p: &NonNull<Header>| unsafe { Task::from_raw(*p) };
        let mut s = lock(&self.sched);
        if s.global.closed {
            drop(s);
            batch.iter().map(task).for_each(Task::shutdown);
            return;
        }
        let (front, back) = batch.split_at(seniors);
        for t in front.iter().rev().map(task) {
            s.global.tasks.push_front(t);
        }
        s.global.tasks.extend(back.iter().map(task));
        self.global_len.store(s.global.tasks.len(), Release);
    }

    /// Take a batch from the global queue for `p` (Go's `globrunqget`): run the
    /// first, put the rest in `p`'s ring. `max` 0 = no limit beyond Go's.
    pub(crate) fn globrunqget(&self, p: &Processor, max: usize) -> Option<Task> {
        if self.global_len() == 0 {
            return None;
        }
        let mut s = lock(&self.sched);
        self.globrunqget_locked(&mut s, p, max)
    }

    /// How many Gs a P takes from a global queue of `len` (Go's `globrunqget`):
    /// its fair share `len/procs + 1`, at most `max` (0: no limit) and half a ring.
    fn global_batch(&self, len: usize, max: usize) -> usize {
        let n = (len / self.nprocs().max(1) + 1).min(len);
        let n = if max > 0 { n.min(max) } else { n };
        n.min(runq::CAPACITY / 2)
    }

    /// `globrunqget` with the scheduler lock held (the M dropping its P).
    pub(crate) fn globrunqget_locked(
        &self,
        s: &mut Sched,
        p: &Processor,
        max: usize,
    ) -> Option<Task> {
        let len = s.global.tasks.len();
        if len == 0 {
            return None;
        }
        let n = self.global_batch(len, max);
        let first = s.global.tasks.pop_front();
        self.note_global_take_n(n);
        let mut spill = Vec::new();
        for _ in 1..n {
            let t = s.global.tasks.pop_front().expect("len checked");
            // SAFETY: the caller owns `p` (RUNNING).
            unsafe { p.runqput_tail(t, |b, _| spill.extend(b)) };
        }
        // What the refill took from the head is older than all the queue
        // holds: an overflow sends it back to the head (`runq.rs`, "Seniors").
        // (Only a refill: the fairness pick's single G leaves the ring's own
        // items unmarked.)
        if n > 1 {
            p.runq.mark_seniors();
        }
        // SAFETY: overflowed items are owned references.
        s.global
            .tasks
            .extend(spill.into_iter().map(|x| unsafe { Task::from_raw(x) }));
        self.global_len.store(s.global.tasks.len(), Release);
        first
    }

    /// Teardown: close the queue and take everything in it.
    pub(crate) fn global_close_and_drain(&self) -> Vec<Task> {
        let mut s = lock(&self.sched);
        s.global.closed = true;
        self.global_len.store(0, Release);
        s.global.tasks.drain(..).collect()
    }
}
