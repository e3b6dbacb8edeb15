//! The per-P stack cache (`StackCache`): a P takes and returns stacks
//! without the pool's lock, and takes promises for the goroutines it will
//! spawn in batches of `CREDIT_BATCH` ("Reservations" and "Who may write
//! what" in `mod.rs`).

use std::sync::MutexGuard;

use super::*;

/// Bound of one size class in a per-P cache.
pub(super) const CACHE_MAX_STACKS: usize = 32;

pub(super) const CACHE_MAX_BYTES: usize = 8 << 20;

pub(super) const CACHE_MIN_STACKS: usize = 2;

/// How many stack promises a per-P cache takes from the pool at once, and
/// keeps (twice that at most) for the goroutines spawned on its P.
pub(super) const CREDIT_BATCH: usize = 32;

/// Most stacks of stride `stride` one per-P cache holds.
pub(super) fn cache_limit(stride: usize) -> usize {
    (CACHE_MAX_BYTES / stride).clamp(CACHE_MIN_STACKS, CACHE_MAX_STACKS)
}

/// A per-P cache of free stacks and of stack promises (credit). Owned by one
/// `Processor` and used by one thread at a time, so no locking; the pool is
/// the slow path.
pub(crate) struct StackCache {
    pub(super) classes: Vec<CacheClass>,
}

pub(super) struct CacheClass {
    pub(super) size: usize,
    pub(super) limit: usize,
    /// LIFO: the most recently freed stack is reused first.
    pub(super) stacks: Vec<Stack>,
    /// Promises taken from the pool (`StackPool::reserve`) and not yet given
    /// to a goroutine.
    pub(super) credit: usize,
}

impl StackCache {
    pub(crate) fn new() -> Self {
        StackCache {
            classes: Vec::new(),
        }
    }

    fn class(&mut self, size: usize) -> &mut CacheClass {
        let i = match self.classes.iter().position(|c| c.size == size) {
            Some(i) => i,
            None => {
                let limit = cache_limit(size + page_size());
                self.classes.push(CacheClass {
                    size,
                    limit,
                    stacks: Vec::with_capacity(limit + 1),
                    credit: 0,
                });
                self.classes.len() - 1
            }
        };
        &mut self.classes[i]
    }

    /// Promises a stack of `size` usable bytes to a goroutine being spawned:
    /// from this cache's credit, else a batch from the pool. The goroutine
    /// gives the promise back with its stack ([`put`](Self::put)) or, if it
    /// never ran, with [`StackPool::unreserve`].
    pub(crate) fn reserve(&mut self, pool: &StackPool, size: usize) -> Result<(), StackError> {
        let size = round_size(size)?;
        let class = self.class(size);
        if class.credit == 0 {
            class.credit = pool.reserve(size, CREDIT_BATCH)?;
        }
        class.credit -= 1;
        Ok(())
    }

    /// A stack of `size` usable bytes (rounded like [`StackPool::alloc`]):
    /// a cached one of exactly that size, else one from the pool.
    pub(crate) fn get(&mut self, pool: &StackPool, size: usize) -> Result<Stack, StackError> {
        let size = round_size(size)?;
        if let Some(class) = self.classes.iter_mut().find(|c| c.size == size) {
            if let Some(stack) = class.stacks.pop() {
                return Ok(stack);
            }
        }
        pool.alloc(size)
    }

    /// Caches a finished goroutine's stack and takes back its promise; when
    /// the class overflows, the older half of the stacks goes to the pool,
    /// and credit above twice a batch goes back too. True if the caller
    /// should start a scavenger (`StackPool::free_batch`).
    #[must_use = "start a scavenger when asked to"]
    pub(crate) fn put(&mut self, pool: &StackPool, stack: Stack) -> bool {
        debug_assert_eq!(
            stack.pool, pool.id,
            "stack put into the cache of another pool"
        );
        let size = stack.size();
        let class = self.class(size);
        class.stacks.push(stack);
        let mut scavenge = false;
        if class.stacks.len() > class.limit {
            let half = class.stacks.len() / 2;
            scavenge = pool.free_batch(class.stacks.drain(..half));
        }
        class.credit += 1;
        if class.credit > 2 * CREDIT_BATCH {
            pool.unreserve(size, class.credit - CREDIT_BATCH);
            class.credit = CREDIT_BATCH;
        }
        scavenge
    }

    /// Gives every cached stack and all credit back to the pool (shutdown:
    /// no scavenger is started; the caller trims the pool). The caller
    /// holds the pool's `cache_flush` guard, taken before it borrowed the
    /// cache: a scavenger may be flushing idle Ps' caches at the same time
    /// (`flush_idle`), and teardown holds no scheduler lock.
    pub(crate) fn drain(&mut self, pool: &StackPool, _flush: &MutexGuard<'_, ()>) {
        let _ = self.drain_live(pool);
    }

    /// The scavenger, at a quiet step, on the cache of a P that is idle
    /// (the caller holds the scheduler lock, under which an idle P stays
    /// idle, and the guard of [`StackPool::lock_cache_flush`]): every
    /// cached stack goes back to the pool as if freed two periods ago, so
    /// that this step may return its slab (cached stacks pin their slabs),
    /// and the credit goes back too (promises pin capacity).
    /// The P takes new credit and stacks from the pool when it runs again.
    pub(crate) fn flush_idle(&mut self, pool: &StackPool, _flush: &MutexGuard<'_, ()>) {
        for class in &mut self.classes {
            // No scavenger is asked for: one is running (the caller), and
            // `scavenging` stays set until it ends.
            let _ = pool.free_batch_aged(class.stacks.drain(..), true);
            pool.unreserve(class.size, std::mem::take(&mut class.credit));
        }
    }

    /// `drain` on a live runtime (a P that `set_procs` retires): true if the
    /// pool asks for a scavenger (the caller must start one, as `put`'s
    /// callers do, or the pool never asks again).
    pub(crate) fn drain_live(&mut self, pool: &StackPool) -> bool {
        let mut scavenge = false;
        for class in &mut self.classes {
            scavenge |= pool.free_batch(class.stacks.drain(..));
            pool.unreserve(class.size, std::mem::take(&mut class.credit));
        }
        scavenge
    }

    /// Stacks currently cached.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.classes.iter().map(|c| c.stacks.len()).sum()
    }
}

impl Default for StackCache {
    fn default() -> Self {
        Self::new()
    }
}
