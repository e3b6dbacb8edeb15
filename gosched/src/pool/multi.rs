//! ants' `MultiPool` / `MultiPoolWithFunc`: several sub-pools behind one
//! submit, to spread the lock (each sub-pool has its own).
//!
//! Round-robin picks sub-pools in turn (an atomic counter; the first pick is
//! sub-pool 0); least-tasks picks the one with the fewest live workers. A
//! round-robin submit that finds its sub-pool overloaded retries once on the
//! least-tasks choice (ants #306). The waiting happens on the first choice,
//! and the task is only handed over once a worker is secured, so a refused
//! attempt never loses it.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::core::{Core, Slot};
use super::{acquire_blocking, plain, Builder, Job, Limits, Owner, PoolError, PoolStats};

/// How a multi-pool picks the sub-pool for a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadBalancing {
    /// Each sub-pool in turn.
    RoundRobin,
    /// The sub-pool with the fewest live workers.
    LeastTasks,
}

impl TryFrom<u8> for LoadBalancing {
    type Error = PoolError;

    /// ants' numbering: 1 = round-robin, 2 = least-tasks.
    fn try_from(v: u8) -> Result<Self, PoolError> {
        match v {
            1 => Ok(LoadBalancing::RoundRobin),
            2 => Ok(LoadBalancing::LeastTasks),
            _ => Err(PoolError::InvalidLoadBalancingStrategy),
        }
    }
}

struct Multi<J: Send + 'static> {
    pools: Vec<Arc<Owner<J>>>,
    next: AtomicU32,
    lb: LoadBalancing,
}

impl<J: Send + 'static> Multi<J> {
    fn new(
        n: isize,
        lb: LoadBalancing,
        mut build: impl FnMut() -> Result<Arc<Core<J>>, PoolError>,
    ) -> Result<Self, PoolError> {
        if n <= 0 {
            return Err(PoolError::InvalidMultiPoolSize);
        }
        let pools = (0..n)
            .map(|_| build().map(|core| Arc::new(Owner { core })))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Multi {
            pools,
            // The first fetch_add returns MAX, which wraps to 0 below.
            next: AtomicU32::new(u32::MAX),
            lb,
        })
    }

    fn core(&self, i: usize) -> &Arc<Core<J>> {
        &self.pools[i].core
    }

    fn least_tasks(&self) -> usize {
        (0..self.pools.len())
            .min_by_key(|&i| self.core(i).running())
            .unwrap_or(0)
    }

    fn pick(&self) -> usize {
        match self.lb {
            LoadBalancing::RoundRobin => {
                let k = self.next.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
                k as usize % self.pools.len()
            }
            LoadBalancing::LeastTasks => self.least_tasks(),
        }
    }

    fn acquire(&self) -> Result<(&Arc<Core<J>>, Slot<J>), PoolError> {
        let first = self.core(self.pick());
        match acquire_blocking(first, Limits::default()) {
            Err(PoolError::Overload) if self.lb == LoadBalancing::RoundRobin => {
                let second = self.core(self.least_tasks());
                acquire_blocking(second, Limits::default()).map(|s| (second, s))
            }
            r => r.map(|s| (first, s)),
        }
    }

    fn submit(&self, job: J) -> Result<(), PoolError> {
        super::submit_via(job, || self.acquire()).map_err(|(e, _)| e)
    }

    async fn acquire_async(&self) -> Result<(&Arc<Core<J>>, Slot<J>), PoolError> {
        let first = self.core(self.pick());
        match super::acquire(first, Limits::default()).await {
            Err(PoolError::Overload) if self.lb == LoadBalancing::RoundRobin => {
                let second = self.core(self.least_tasks());
                Ok((second, super::acquire(second, Limits::default()).await?))
            }
            r => Ok((first, r?)),
        }
    }

    async fn submit_async(&self, job: J) -> Result<(), PoolError> {
        super::submit_via_async(job, || self.acquire_async()).await
    }

    fn index(&self, i: usize) -> Result<&Arc<Core<J>>, PoolError> {
        self.pools
            .get(i)
            .map(|o| &o.core)
            .ok_or(PoolError::InvalidPoolIndex)
    }

    fn sum(&self, f: impl Fn(&Core<J>) -> usize) -> usize {
        self.pools.iter().map(|o| f(&o.core)).sum()
    }

    /// The sum of `f` over the sub-pools, or -1 if one is unlimited.
    fn sum_or_unlimited(&self, f: impl Fn(&Core<J>) -> isize) -> isize {
        let mut total = 0;
        for o in &self.pools {
            let v = f(&o.core);
            if v < 0 {
                return -1;
            }
            total += v;
        }
        total
    }

    fn cap(&self) -> isize {
        self.sum_or_unlimited(Core::cap)
    }

    fn free(&self) -> isize {
        self.sum_or_unlimited(Core::free)
    }

    fn release_timeout(&self, d: Duration) -> Result<(), PoolError> {
        let deadline = crate::sched::timers::deadline_after(d);
        // Close them all first, so they drain in parallel.
        let released: Vec<bool> = self.pools.iter().map(|o| o.core.release()).collect();
        let mut errs = Vec::new();
        for (i, o) in self.pools.iter().enumerate() {
            if !released[i] {
                errs.push((i, PoolError::Closed));
                continue;
            }
            let left = deadline.saturating_duration_since(crate::time::now());
            if crate::block_on(crate::time::timeout(left, o.core.exited())).is_err() {
                errs.push((i, PoolError::Timeout));
            }
        }
        match errs.len() {
            0 => Ok(()),
            // Every sub-pool failed the same way: say it once, as a pool would.
            n if n == self.pools.len() && errs.iter().all(|(_, e)| *e == errs[0].1) => {
                Err(errs.swap_remove(0).1)
            }
            _ => Err(PoolError::SubPools(errs)),
        }
    }

    fn reboot(&self) -> Result<(), PoolError> {
        for o in &self.pools {
            o.core.reboot()?;
        }
        Ok(())
    }

    fn wait(&self) {
        for o in &self.pools {
            crate::block_on(o.core.idle());
        }
    }

    fn stats(&self) -> PoolStats {
        let mut total = PoolStats::default();
        let mut p50 = Duration::ZERO;
        let mut p99 = Duration::ZERO;
        for o in &self.pools {
            let c = &o.core;
            let s = c.stats.snapshot(c.running(), c.waiting(), c.idle_workers());
            total.submitted += s.submitted;
            total.completed += s.completed;
            total.panicked += s.panicked;
            total.rejected += s.rejected;
            total.cancelled += s.cancelled;
            total.timed_out += s.timed_out;
            total.purged += s.purged;
            total.waited += s.waited;
            total.running += s.running;
            total.waiting += s.waiting;
            total.idle += s.idle;
            p50 = p50.max(s.wait_p50);
            p99 = p99.max(s.wait_p99);
        }
        // The worst sub-pool's: an upper bound on the whole's.
        total.wait_p50 = p50;
        total.wait_p99 = p99;
        total
    }
}

/// What both multi-pool types offer.
macro_rules! multi_methods {
    () => {
        /// Live workers in all sub-pools.
        pub fn running(&self) -> usize {
            self.multi.sum(Core::running)
        }

        /// Free slots in all sub-pools; -1 if they are unlimited.
        pub fn free(&self) -> isize {
            self.multi.free()
        }

        /// Submitters blocked on all sub-pools.
        pub fn waiting(&self) -> usize {
            self.multi.sum(Core::waiting)
        }

        /// Total capacity; -1 if the sub-pools are unlimited.
        pub fn cap(&self) -> isize {
            self.multi.cap()
        }

        /// Number of sub-pools.
        pub fn len(&self) -> usize {
            self.multi.pools.len()
        }

        /// Never true: a multi-pool has at least one sub-pool.
        pub fn is_empty(&self) -> bool {
            self.multi.pools.is_empty()
        }

        /// `running` of sub-pool `i`.
        pub fn running_by_index(&self, i: usize) -> Result<usize, PoolError> {
            self.multi.index(i).map(|c| c.running())
        }

        /// `free` of sub-pool `i`.
        pub fn free_by_index(&self, i: usize) -> Result<isize, PoolError> {
            self.multi.index(i).map(|c| c.free())
        }

        /// `waiting` of sub-pool `i`.
        pub fn waiting_by_index(&self, i: usize) -> Result<usize, PoolError> {
            self.multi.index(i).map(|c| c.waiting())
        }

        /// Whether the sub-pools are released.
        pub fn is_closed(&self) -> bool {
            self.multi.pools.iter().all(|o| o.core.is_closed())
        }

        /// Set **each** sub-pool's capacity to `n` (as ants does).
        pub fn tune(&self, n: isize) {
            self.multi.pools.iter().for_each(|o| o.core.tune(n));
        }

        /// Release every sub-pool without waiting (ants' multi-pool has only
        /// `ReleaseTimeout`).
        pub fn release(&self) {
            self.multi.pools.iter().for_each(|o| {
                o.core.release();
            });
        }

        /// Release every sub-pool and wait up to `d` (in all) for their
        /// workers to exit. A failure names the sub-pools
        /// ([`PoolError::SubPools`]), unless all failed alike.
        pub fn release_timeout(&self, d: Duration) -> Result<(), PoolError> {
            self.multi.release_timeout(d)
        }

        /// Reopen every sub-pool.
        pub fn reboot(&self) -> Result<(), PoolError> {
            self.multi.reboot()
        }

        /// Park until every task submitted so far has finished.
        pub fn wait(&self) {
            self.multi.wait()
        }

        /// The sub-pools' counters added up (percentiles: the worst
        /// sub-pool's).
        pub fn stats(&self) -> PoolStats {
            self.multi.stats()
        }
    };
}

/// Several [`Pool`](super::Pool)s behind one submit (ants' `MultiPool`).
pub struct MultiPool {
    multi: Multi<Job>,
}

impl fmt::Debug for MultiPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MultiPool")
            .field("pools", &self.len())
            .field("strategy", &self.multi.lb)
            .field("running", &self.running())
            .finish()
    }
}

impl MultiPool {
    /// `n` sub-pools of `cap_each` workers each.
    pub fn new(n: isize, cap_each: isize, lb: LoadBalancing) -> Result<Self, PoolError> {
        Self::with_builder(n, Builder::new().capacity(cap_each), lb)
    }

    /// `n` sub-pools, each built from `builder`.
    pub fn with_builder(n: isize, builder: Builder, lb: LoadBalancing) -> Result<Self, PoolError> {
        builder.options()?;
        let multi = Multi::new(n, lb, || builder.clone().core())?;
        Ok(MultiPool { multi })
    }

    /// Run `f` on a worker of the chosen sub-pool (see the module docs).
    pub fn submit<F>(&self, f: F) -> Result<(), PoolError>
    where
        F: FnOnce() + Send + 'static,
    {
        self.multi.submit(plain(f))
    }

    /// `submit` for async code.
    pub fn submit_async<F>(&self, f: F) -> impl Future<Output = Result<(), PoolError>> + Send + '_
    where
        F: FnOnce() + Send + 'static,
    {
        self.multi.submit_async(plain(f))
    }

    multi_methods!();
}

/// Several [`PoolWithFunc`](super::PoolWithFunc)s behind one invoke (ants'
/// `MultiPoolWithFunc`).
pub struct MultiPoolWithFunc<A: Send + 'static> {
    multi: Multi<A>,
}

impl<A: Send + 'static> fmt::Debug for MultiPoolWithFunc<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MultiPoolWithFunc")
            .field("pools", &self.len())
            .field("strategy", &self.multi.lb)
            .field("running", &self.running())
            .finish()
    }
}

impl<A: Send + 'static> MultiPoolWithFunc<A> {
    /// `n` sub-pools of `cap_each` workers, all running `f`.
    pub fn new<F>(n: isize, cap_each: isize, f: F, lb: LoadBalancing) -> Result<Self, PoolError>
    where
        F: Fn(A) + Send + Sync + 'static,
    {
        Self::with_builder(n, Builder::new().capacity(cap_each), f, lb)
    }

    /// `n` sub-pools, each built from `builder`, all running `f`.
    pub fn with_builder<F>(
        n: isize,
        builder: Builder,
        f: F,
        lb: LoadBalancing,
    ) -> Result<Self, PoolError>
    where
        F: Fn(A) + Send + Sync + 'static,
    {
        builder.options()?;
        let f = Arc::new(f);
        let multi = Multi::new(n, lb, || {
            let f = Arc::clone(&f);
            builder.clone().core_with_func(move |a: A| f(a))
        })?;
        Ok(MultiPoolWithFunc { multi })
    }

    /// Run the function on `arg` in the chosen sub-pool.
    pub fn invoke(&self, arg: A) -> Result<(), PoolError> {
        self.multi.submit(arg)
    }

    /// `invoke` for async code.
    pub fn invoke_async(&self, arg: A) -> impl Future<Output = Result<(), PoolError>> + Send + '_ {
        self.multi.submit_async(arg)
    }

    multi_methods!();
}
