//! The idle-worker queue of a pool: a stack (the default: the worker that went
//! idle last serves the next task, so its stack and caches are warm) or, for a
//! preallocated pool, a fixed-capacity ring (FIFO), as ants has them.
//!
//! Either way the entries are ordered by the time each worker went idle, oldest
//! first (a worker is stamped when it is inserted, and inserted at the tail), so
//! the purge finds every worker idle since before a cut-off with one binary
//! search and takes that prefix. All of it runs under the pool's lock.

use std::collections::VecDeque;
use std::time::Instant;

/// One idle worker and when it went idle.
#[derive(Debug)]
pub(crate) struct Idle<W> {
    pub(crate) worker: W,
    pub(crate) since: Instant,
}

/// Identity of queue entries (`Arc::ptr_eq` for workers).
pub(crate) trait PtrEq {
    fn ptr_eq(&self, other: &Self) -> bool;
}

impl<T> PtrEq for std::sync::Arc<T> {
    fn ptr_eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(self, other)
    }
}

/// The ring of a preallocated pool is full: more idle workers than its
/// capacity, which the pool's accounting never allows.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct QueueFull;

#[derive(Debug)]
pub(crate) enum WorkerQueue<W> {
    /// LIFO: `detach` takes the newest.
    Stack(Vec<Idle<W>>),
    /// FIFO ring of fixed capacity: `detach` takes the oldest.
    Ring { ring: VecDeque<Idle<W>>, cap: usize },
}

impl<W> WorkerQueue<W> {
    pub(crate) fn stack() -> Self {
        WorkerQueue::Stack(Vec::new())
    }

    /// A ring for `cap` workers, allocated now (ants' `WithPreAlloc`);
    /// `None` if that much memory cannot be had.
    pub(crate) fn ring(cap: usize) -> Option<Self> {
        let mut ring = VecDeque::new();
        ring.try_reserve_exact(cap).ok()?;
        Some(WorkerQueue::Ring { ring, cap })
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            WorkerQueue::Stack(v) => v.len(),
            WorkerQueue::Ring { ring, .. } => ring.len(),
        }
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Add a worker that went idle at `since` (not before the newest entry).
    pub(crate) fn insert(&mut self, worker: W, since: Instant) -> Result<(), QueueFull> {
        let idle = Idle { worker, since };
        match self {
            WorkerQueue::Stack(v) => v.push(idle),
            WorkerQueue::Ring { ring, cap } => {
                if ring.len() == *cap {
                    return Err(QueueFull);
                }
                ring.push_back(idle);
            }
        }
        Ok(())
    }

    /// Remove `worker` wherever it is (a worker that died while idle).
    pub(crate) fn remove(&mut self, worker: &W)
    where
        W: PtrEq,
    {
        match self {
            WorkerQueue::Stack(v) => v.retain(|idle| !idle.worker.ptr_eq(worker)),
            WorkerQueue::Ring { ring, .. } => ring.retain(|idle| !idle.worker.ptr_eq(worker)),
        }
    }

    /// Take an idle worker: the newest from a stack, the oldest from a ring.
    pub(crate) fn detach(&mut self) -> Option<W> {
        match self {
            WorkerQueue::Stack(v) => v.pop(),
            WorkerQueue::Ring { ring, .. } => ring.pop_front(),
        }
        .map(|idle| idle.worker)
    }

    /// How many entries (from the oldest) went idle at or before `cut`: ants'
    /// `binarySearch` plus one (0 when none).
    pub(crate) fn expired_len(&self, cut: Instant) -> usize {
        match self {
            WorkerQueue::Stack(v) => v.partition_point(|idle| idle.since <= cut),
            WorkerQueue::Ring { ring, .. } => ring.partition_point(|idle| idle.since <= cut),
        }
    }

    /// Remove and return every worker idle since `cut` or earlier (ants'
    /// `refresh`), oldest first.
    pub(crate) fn take_expired(&mut self, cut: Instant) -> Vec<W> {
        let n = self.expired_len(cut);
        match self {
            WorkerQueue::Stack(v) => v.drain(..n).map(|idle| idle.worker).collect(),
            WorkerQueue::Ring { ring, .. } => ring.drain(..n).map(|idle| idle.worker).collect(),
        }
    }

    /// Remove and return every idle worker (release).
    pub(crate) fn take_all(&mut self) -> Vec<W> {
        match self {
            WorkerQueue::Stack(v) => v.drain(..).map(|idle| idle.worker).collect(),
            WorkerQueue::Ring { ring, .. } => ring.drain(..).map(|idle| idle.worker).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(base: Instant, ms: u64) -> Instant {
        base + Duration::from_millis(ms)
    }

    // ants TestNewWorkerStack / TestNewLoopQueue.
    #[test]
    fn new_queues_are_empty() {
        let mut s = WorkerQueue::<u32>::stack();
        assert!(s.is_empty());
        assert_eq!(s.detach(), None);
        let mut r = WorkerQueue::<u32>::ring(4).unwrap();
        assert!(r.is_empty());
        assert_eq!(r.detach(), None);
    }

    // ants TestWorkerStack: 6 old workers and 6 newer ones; the purge leaves 6.
    #[test]
    fn stack_purges_the_old_prefix_and_detaches_lifo() {
        let base = Instant::now();
        let mut s = WorkerQueue::stack();
        for i in 0..6 {
            s.insert(i, at(base, 0)).unwrap();
        }
        for i in 6..12 {
            s.insert(i, at(base, 1000)).unwrap();
        }
        assert_eq!(s.len(), 12);
        assert_eq!(s.take_expired(at(base, 500)), vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(s.len(), 6);
        assert_eq!(s.detach(), Some(11), "a stack hands out the newest worker");
    }

    // ants TestLoopQueue: bookkeeping, a full ring refuses, the purge leaves 6.
    #[test]
    fn ring_is_fifo_bounded_and_purges() {
        let base = Instant::now();
        let mut r = WorkerQueue::ring(12).unwrap();
        for i in 0..6 {
            r.insert(i, at(base, 0)).unwrap();
        }
        for i in 6..12 {
            r.insert(i, at(base, 1000)).unwrap();
        }
        assert_eq!(r.insert(99, at(base, 1000)), Err(QueueFull));
        assert_eq!(r.take_expired(at(base, 500)).len(), 6);
        assert_eq!(r.len(), 6);
        assert_eq!(r.detach(), Some(6), "a ring hands out the oldest worker");
    }

    // ants TestSearch: the cut-off lands before, inside and after the entries.
    #[test]
    fn binary_search_finds_the_last_expired() {
        let base = Instant::now();
        let mut s = WorkerQueue::stack();
        assert_eq!(s.expired_len(at(base, 10)), 0);
        for i in 0..10u64 {
            s.insert(i, at(base, i * 10)).unwrap();
        }
        assert_eq!(s.expired_len(base - Duration::from_millis(1)), 0);
        assert_eq!(
            s.expired_len(at(base, 0)),
            1,
            "at the cut-off counts as expired"
        );
        assert_eq!(s.expired_len(at(base, 45)), 5);
        assert_eq!(s.expired_len(at(base, 90)), 10);
        assert_eq!(s.expired_len(at(base, 1000)), 10);
    }

    // ants TestRotatedQueueSearch / TestRetrieveExpiry: a ring whose head has
    // wrapped past the end of its buffer still searches and purges correctly,
    // in three layouts.
    #[test]
    fn wrapped_ring_searches_and_purges() {
        let base = Instant::now();
        for shift in [0usize, 3, 7] {
            let mut r = WorkerQueue::ring(10).unwrap();
            // Fill, then rotate `shift` entries through so the live part wraps.
            let mut t = 0u64;
            for _ in 0..10 {
                r.insert(t, at(base, t)).unwrap();
                t += 1;
            }
            for _ in 0..shift {
                r.detach().unwrap();
                r.insert(t, at(base, t)).unwrap();
                t += 1;
            }
            // Entries are now stamped shift..shift+10 ms, oldest first.
            let cut = at(base, shift as u64 + 4);
            assert_eq!(r.expired_len(cut), 5, "layout shifted by {shift}");
            let taken = r.take_expired(cut);
            assert_eq!(
                taken,
                (shift as u64..shift as u64 + 5).collect::<Vec<_>>(),
                "exactly the expired workers, oldest first (shift {shift})"
            );
            assert_eq!(r.len(), 5);
            assert_eq!(r.detach(), Some(shift as u64 + 5));
        }
    }
}
