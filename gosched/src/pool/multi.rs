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

use super::core::Core;
use super::{acquire_blocking, plain, Builder, Got, Job, Limits, Owner, PoolError, PoolStats};

/// How a multi-pool picks the sub-pool for a task.
///
/// ```
/// use gosched::pool::{LoadBalancing, MultiPool, PoolError};
///
/// let mp = MultiPool::new(4, 8, LoadBalancing::LeastTasks).unwrap();
/// assert_eq!(mp.len(), 4);
/// // ants' numbering, as read from a configuration:
/// assert_eq!(LoadBalancing::try_from(1u8), Ok(LoadBalancing::RoundRobin));
/// assert_eq!(LoadBalancing::try_from(2u8), Ok(LoadBalancing::LeastTasks));
/// let err = LoadBalancing::try_from(3u8).unwrap_err();
/// assert_eq!(err, PoolError::InvalidLoadBalancingStrategy);
/// ```
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

    /// Acquire from the picked pool, with the task on offer; round-robin
    /// retries an overload once on the least busy pool.
    fn acquire(&self, offer: &mut Option<J>) -> Got<'_, J> {
        let first = self.core(self.pick());
        match acquire_blocking(first, Limits::default(), offer) {
            Err(PoolError::Overload) if self.lb == LoadBalancing::RoundRobin => {
                let second = self.core(self.least_tasks());
                Ok(acquire_blocking(second, Limits::default(), offer)?.map(|s| (second, s)))
            }
            r => Ok(r?.map(|s| (first, s))),
        }
    }

    fn submit(&self, job: J) -> Result<(), PoolError> {
        super::submit_via(job, |offer| self.acquire(offer)).map_err(|(e, _)| e)
    }

    /// `acquire` for async submits, which offer nothing (see
    /// `submit_via_async`).
    async fn acquire_async(&self) -> Got<'_, J> {
        let first = self.core(self.pick());
        match super::acquire(first, Limits::default(), &mut None).await {
            Err(PoolError::Overload) if self.lb == LoadBalancing::RoundRobin => {
                let second = self.core(self.least_tasks());
                let got = super::acquire(second, Limits::default(), &mut None).await;
                Ok(got?.map(|s| (second, s)))
            }
            r => Ok(r?.map(|s| (first, s))),
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
        ///
        /// ```
        /// use gosched::pool::{LoadBalancing, MultiPool};
        ///
        /// let mp = MultiPool::new(2, 4, LoadBalancing::RoundRobin).unwrap();
        /// let gate = gosched::chan::<()>(0);
        /// for _ in 0..3 {
        ///     let g = gate.clone();
        ///     mp.submit(move || { g.recv(); }).unwrap();
        /// }
        /// assert_eq!(mp.running(), 3); // busy until the gate closes
        /// gate.close().unwrap();
        /// ```
        pub fn running(&self) -> usize {
            self.multi.sum(Core::running)
        }

        /// Free slots in all sub-pools; -1 if they are unlimited.
        ///
        /// ```
        /// use gosched::pool::{LoadBalancing, MultiPool};
        ///
        /// let mp = MultiPool::new(2, 4, LoadBalancing::RoundRobin).unwrap();
        /// let gate = gosched::chan::<()>(0);
        /// let g = gate.clone();
        /// mp.submit(move || { g.recv(); }).unwrap();
        /// assert_eq!(mp.free(), 7);
        /// gate.close().unwrap();
        /// let unlimited = MultiPool::new(2, 0, LoadBalancing::RoundRobin).unwrap();
        /// assert_eq!(unlimited.free(), -1);
        /// ```
        pub fn free(&self) -> isize {
            self.multi.free()
        }

        /// Submitters blocked on all sub-pools.
        ///
        /// ```
        /// use gosched::pool::{LoadBalancing, MultiPool};
        /// use std::sync::Arc;
        ///
        /// let mp = Arc::new(MultiPool::new(1, 1, LoadBalancing::RoundRobin).unwrap());
        /// let gate = gosched::chan::<()>(0);
        /// let g = gate.clone();
        /// mp.submit(move || { g.recv(); }).unwrap(); // the only worker is busy
        /// let m = Arc::clone(&mp);
        /// let submitter = gosched::go(move || m.submit(|| {}));
        /// while mp.waiting() == 0 { std::thread::yield_now(); } // it has queued
        /// assert_eq!(mp.waiting(), 1);
        /// gate.close().unwrap();
        /// submitter.join().unwrap().unwrap();
        /// ```
        pub fn waiting(&self) -> usize {
            self.multi.sum(Core::waiting)
        }

        /// Total capacity; -1 if the sub-pools are unlimited.
        ///
        /// ```
        /// use gosched::pool::{LoadBalancing, MultiPool};
        ///
        /// assert_eq!(MultiPool::new(4, 10, LoadBalancing::LeastTasks).unwrap().cap(), 40);
        /// assert_eq!(MultiPool::new(4, 0, LoadBalancing::LeastTasks).unwrap().cap(), -1);
        /// ```
        pub fn cap(&self) -> isize {
            self.multi.cap()
        }

        /// Number of sub-pools.
        ///
        /// ```
        /// use gosched::pool::{LoadBalancing, MultiPool};
        ///
        /// let mp = MultiPool::new(3, 10, LoadBalancing::RoundRobin).unwrap();
        /// assert_eq!(mp.len(), 3);
        /// ```
        pub fn len(&self) -> usize {
            self.multi.pools.len()
        }

        /// Never true: a multi-pool has at least one sub-pool.
        ///
        /// ```
        /// use gosched::pool::{LoadBalancing, MultiPool, PoolError};
        ///
        /// assert!(!MultiPool::new(1, 10, LoadBalancing::RoundRobin).unwrap().is_empty());
        /// let err = MultiPool::new(0, 10, LoadBalancing::RoundRobin).unwrap_err();
        /// assert_eq!(err, PoolError::InvalidMultiPoolSize);
        /// ```
        pub fn is_empty(&self) -> bool {
            self.multi.pools.is_empty()
        }

        /// `running` of sub-pool `i`.
        ///
        /// ```
        /// use gosched::pool::{LoadBalancing, MultiPool, PoolError};
        ///
        /// let mp = MultiPool::new(2, 4, LoadBalancing::RoundRobin).unwrap();
        /// let gate = gosched::chan::<()>(0);
        /// let g = gate.clone();
        /// mp.submit(move || { g.recv(); }).unwrap(); // round-robin starts at sub-pool 0
        /// assert_eq!(mp.running_by_index(0), Ok(1));
        /// assert_eq!(mp.running_by_index(1), Ok(0));
        /// assert_eq!(mp.running_by_index(2), Err(PoolError::InvalidPoolIndex));
        /// gate.close().unwrap();
        /// ```
        pub fn running_by_index(&self, i: usize) -> Result<usize, PoolError> {
            self.multi.index(i).map(|c| c.running())
        }

        /// `free` of sub-pool `i`.
        ///
        /// ```
        /// use gosched::pool::{LoadBalancing, MultiPool, PoolError};
        ///
        /// let mp = MultiPool::new(2, 4, LoadBalancing::RoundRobin).unwrap();
        /// let gate = gosched::chan::<()>(0);
        /// let g = gate.clone();
        /// mp.submit(move || { g.recv(); }).unwrap(); // round-robin starts at sub-pool 0
        /// assert_eq!(mp.free_by_index(0), Ok(3));
        /// assert_eq!(mp.free_by_index(1), Ok(4));
        /// assert_eq!(mp.free_by_index(5), Err(PoolError::InvalidPoolIndex));
        /// gate.close().unwrap();
        /// ```
        pub fn free_by_index(&self, i: usize) -> Result<isize, PoolError> {
            self.multi.index(i).map(|c| c.free())
        }

        /// `waiting` of sub-pool `i`.
        ///
        /// ```
        /// use gosched::pool::{LoadBalancing, MultiPool, PoolError};
        ///
        /// let mp = MultiPool::new(2, 4, LoadBalancing::RoundRobin).unwrap();
        /// assert_eq!(mp.waiting_by_index(1), Ok(0));
        /// assert_eq!(mp.waiting_by_index(2), Err(PoolError::InvalidPoolIndex));
        /// ```
        pub fn waiting_by_index(&self, i: usize) -> Result<usize, PoolError> {
            self.multi.index(i).map(|c| c.waiting())
        }

        /// Whether the sub-pools are released.
        ///
        /// ```
        /// use gosched::pool::{LoadBalancing, MultiPool};
        ///
        /// let mp = MultiPool::new(2, 4, LoadBalancing::RoundRobin).unwrap();
        /// assert!(!mp.is_closed());
        /// mp.release();
        /// assert!(mp.is_closed());
        /// ```
        pub fn is_closed(&self) -> bool {
            self.multi.pools.iter().all(|o| o.core.is_closed())
        }

        /// Set **each** sub-pool's capacity to `n` (as ants does).
        ///
        /// ```
        /// use gosched::pool::{LoadBalancing, MultiPool};
        ///
        /// let mp = MultiPool::new(2, 4, LoadBalancing::RoundRobin).unwrap();
        /// mp.tune(10); // each sub-pool: 10
        /// assert_eq!(mp.free_by_index(0), Ok(10));
        /// assert_eq!(mp.cap(), 20);
        /// ```
        pub fn tune(&self, n: isize) {
            self.multi.pools.iter().for_each(|o| o.core.tune(n));
        }

        /// Release every sub-pool without waiting (ants' multi-pool has only
        /// `ReleaseTimeout`).
        ///
        /// ```
        /// use gosched::pool::{LoadBalancing, MultiPool, PoolError};
        ///
        /// let mp = MultiPool::new(2, 4, LoadBalancing::RoundRobin).unwrap();
        /// mp.release();
        /// assert!(mp.is_closed());
        /// assert_eq!(mp.submit(|| {}), Err(PoolError::Closed));
        /// ```
        pub fn release(&self) {
            self.multi.pools.iter().for_each(|o| {
                o.core.release();
            });
        }

        /// Release every sub-pool and wait up to `d` (in all) for their
        /// workers to exit. A failure names the sub-pools
        /// ([`PoolError::SubPools`]), unless all failed alike.
        ///
        /// ```
        /// use gosched::pool::{LoadBalancing, MultiPool, PoolError};
        /// use std::time::Duration;
        ///
        /// gosched::testing::run_virtual(|| {
        ///     let mp = MultiPool::new(2, 1, LoadBalancing::RoundRobin).unwrap();
        ///     // Sub-pool 0 gets a task that needs 10 s; sub-pool 1 has no worker.
        ///     mp.submit(|| gosched::time::sleep(Duration::from_secs(10))).unwrap();
        ///     let err = mp.release_timeout(Duration::from_secs(1)).unwrap_err();
        ///     assert_eq!(err, PoolError::SubPools(vec![(0, PoolError::Timeout)]));
        ///     mp.wait();
        ///     assert_eq!(mp.release_timeout(Duration::from_secs(1)), Err(PoolError::Closed));
        /// });
        /// ```
        pub fn release_timeout(&self, d: Duration) -> Result<(), PoolError> {
            self.multi.release_timeout(d)
        }

        /// Reopen every sub-pool.
        ///
        /// ```
        /// use gosched::pool::{LoadBalancing, MultiPool};
        ///
        /// let mp = MultiPool::new(2, 4, LoadBalancing::RoundRobin).unwrap();
        /// mp.release();
        /// mp.reboot().unwrap();
        /// assert!(!mp.is_closed());
        /// assert_eq!(mp.submit(|| {}), Ok(()));
        /// ```
        pub fn reboot(&self) -> Result<(), PoolError> {
            self.multi.reboot()
        }

        /// Park until every task submitted so far has finished.
        ///
        /// ```
        /// use gosched::pool::{LoadBalancing, MultiPool};
        /// use std::sync::atomic::{AtomicUsize, Ordering};
        /// use std::sync::Arc;
        ///
        /// let mp = MultiPool::new(2, 2, LoadBalancing::LeastTasks).unwrap();
        /// let done = Arc::new(AtomicUsize::new(0));
        /// for _ in 0..10 {
        ///     let done = Arc::clone(&done);
        ///     mp.submit(move || { done.fetch_add(1, Ordering::Relaxed); }).unwrap();
        /// }
        /// mp.wait();
        /// assert_eq!(done.load(Ordering::Relaxed), 10);
        /// ```
        pub fn wait(&self) {
            self.multi.wait()
        }

        /// The sub-pools' counters added up (percentiles: the worst
        /// sub-pool's).
        ///
        /// ```
        /// use gosched::pool::{LoadBalancing, MultiPool};
        ///
        /// let mp = MultiPool::new(2, 2, LoadBalancing::RoundRobin).unwrap();
        /// for _ in 0..6 {
        ///     mp.submit(|| {}).unwrap();
        /// }
        /// mp.wait();
        /// let s = mp.stats();
        /// assert_eq!((s.submitted, s.completed), (6, 6));
        /// ```
        pub fn stats(&self) -> PoolStats {
            self.multi.stats()
        }
    };
}

/// Several [`Pool`](super::Pool)s behind one submit (ants' `MultiPool`).
///
/// ```
/// use gosched::pool::{LoadBalancing, MultiPool};
///
/// let mp = MultiPool::new(4, 16, LoadBalancing::RoundRobin).unwrap();
/// let out = gosched::chan::<usize>(100);
/// for i in 0..100 {
///     let o = out.clone();
///     mp.submit(move || o.send(i).unwrap()).unwrap();
/// }
/// mp.wait();
/// assert_eq!((0..100).map(|_| out.recv().unwrap()).sum::<usize>(), 4950);
/// assert!(mp.running() <= 64);
/// ```
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
    ///
    /// ```
    /// use gosched::pool::{LoadBalancing, MultiPool};
    ///
    /// let mp = MultiPool::new(4, 10, LoadBalancing::LeastTasks).unwrap();
    /// assert_eq!((mp.len(), mp.cap()), (4, 40));
    /// ```
    pub fn new(n: isize, cap_each: isize, lb: LoadBalancing) -> Result<Self, PoolError> {
        Self::with_builder(n, Builder::new().capacity(cap_each), lb)
    }

    /// `n` sub-pools, each built from `builder`.
    ///
    /// ```
    /// use gosched::pool::{LoadBalancing, MultiPool, Pool, PoolError};
    ///
    /// let b = Pool::builder().capacity(2).nonblocking(true);
    /// let mp = MultiPool::with_builder(3, b, LoadBalancing::RoundRobin).unwrap();
    /// assert_eq!(mp.cap(), 6);
    /// // The builder is checked once, before any sub-pool is built.
    /// let bad = Pool::builder().expiry_secs(-1.0);
    /// let err = MultiPool::with_builder(3, bad, LoadBalancing::RoundRobin).unwrap_err();
    /// assert_eq!(err, PoolError::InvalidExpiry);
    /// ```
    pub fn with_builder(n: isize, builder: Builder, lb: LoadBalancing) -> Result<Self, PoolError> {
        builder.options()?;
        let multi = Multi::new(n, lb, || builder.clone().core())?;
        Ok(MultiPool { multi })
    }

    /// Run `f` on a worker of the chosen sub-pool (see the module docs).
    ///
    /// ```
    /// use gosched::pool::{LoadBalancing, MultiPool};
    ///
    /// let mp = MultiPool::new(2, 4, LoadBalancing::RoundRobin).unwrap();
    /// let ch = gosched::chan::<&str>(1);
    /// let tx = ch.clone();
    /// mp.submit(move || tx.send("ran in a sub-pool").unwrap()).unwrap();
    /// assert_eq!(ch.recv(), Some("ran in a sub-pool"));
    /// ```
    pub fn submit<F>(&self, f: F) -> Result<(), PoolError>
    where
        F: FnOnce() + Send + 'static,
    {
        self.multi.submit(plain(f))
    }

    /// `submit` for async code.
    ///
    /// ```
    /// use gosched::pool::{LoadBalancing, MultiPool};
    ///
    /// gosched::Runtime::new().unwrap().block_on(async {
    ///     let mp = MultiPool::new(2, 2, LoadBalancing::LeastTasks).unwrap();
    ///     let done = gosched::chan::<u32>(5);
    ///     for i in 0..5 {
    ///         let d = done.clone();
    ///         mp.submit_async(move || d.send(i).unwrap()).await.unwrap();
    ///     }
    ///     let mut sum = 0;
    ///     for _ in 0..5 {
    ///         sum += done.recv_async().await.unwrap();
    ///     }
    ///     assert_eq!(sum, 10);
    /// });
    /// ```
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
///
/// ```
/// use gosched::pool::{LoadBalancing, MultiPoolWithFunc};
///
/// let out = gosched::chan::<u32>(10);
/// let o = out.clone();
/// let times_ten = move |n: u32| o.send(n * 10).unwrap();
/// let mp = MultiPoolWithFunc::new(2, 4, times_ten, LoadBalancing::RoundRobin).unwrap();
/// for n in 1..=4 {
///     mp.invoke(n).unwrap();
/// }
/// mp.wait();
/// assert_eq!((0..4).map(|_| out.recv().unwrap()).sum::<u32>(), 100);
/// ```
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
    ///
    /// ```
    /// use gosched::pool::{LoadBalancing, MultiPoolWithFunc};
    ///
    /// let mp = MultiPoolWithFunc::new(4, 8, |_: u64| {}, LoadBalancing::LeastTasks).unwrap();
    /// assert_eq!((mp.len(), mp.cap()), (4, 32));
    /// ```
    pub fn new<F>(n: isize, cap_each: isize, f: F, lb: LoadBalancing) -> Result<Self, PoolError>
    where
        F: Fn(A) + Send + Sync + 'static,
    {
        Self::with_builder(n, Builder::new().capacity(cap_each), f, lb)
    }

    /// `n` sub-pools, each built from `builder`, all running `f`.
    ///
    /// ```
    /// use gosched::pool::{LoadBalancing, MultiPoolWithFunc, Pool, PoolError};
    ///
    /// let b = Pool::builder().capacity(1).nonblocking(true);
    /// let wait_for = |gate: gosched::Chan<()>| { gate.recv(); };
    /// let lb = LoadBalancing::RoundRobin;
    /// let mp = MultiPoolWithFunc::with_builder(2, b, wait_for, lb).unwrap();
    /// let gate = gosched::chan::<()>(0);
    /// mp.invoke(gate.clone()).unwrap(); // sub-pool 0
    /// mp.invoke(gate.clone()).unwrap(); // sub-pool 1
    /// assert_eq!(mp.invoke(gate.clone()), Err(PoolError::Overload)); // both busy, non-blocking
    /// gate.close().unwrap();
    /// ```
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
    ///
    /// ```
    /// use gosched::pool::{LoadBalancing, MultiPoolWithFunc};
    ///
    /// let out = gosched::chan::<u32>(1);
    /// let o = out.clone();
    /// let plus_one = move |n: u32| o.send(n + 1).unwrap();
    /// let mp = MultiPoolWithFunc::new(2, 2, plus_one, LoadBalancing::RoundRobin).unwrap();
    /// mp.invoke(41).unwrap();
    /// assert_eq!(out.recv(), Some(42));
    /// ```
    pub fn invoke(&self, arg: A) -> Result<(), PoolError> {
        self.multi.submit(arg)
    }

    /// `invoke` for async code.
    ///
    /// ```
    /// use gosched::pool::{LoadBalancing, MultiPoolWithFunc};
    ///
    /// gosched::Runtime::new().unwrap().block_on(async {
    ///     let out = gosched::chan::<u32>(1);
    ///     let o = out.clone();
    ///     let double = move |n: u32| o.send(n * 2).unwrap();
    ///     let mp = MultiPoolWithFunc::new(2, 2, double, LoadBalancing::LeastTasks).unwrap();
    ///     mp.invoke_async(21).await.unwrap();
    ///     assert_eq!(out.recv_async().await, Some(42));
    /// });
    /// ```
    pub fn invoke_async(&self, arg: A) -> impl Future<Output = Result<(), PoolError>> + Send + '_ {
        self.multi.submit_async(arg)
    }

    multi_methods!();
}
