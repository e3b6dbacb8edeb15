//! fasthttp's `workerpool.go`: a pool that serves items (connections) with
//! one handler, **never blocks the caller** (`serve` returns false when
//! `max_workers` are busy: the server answers 503 and closes), reuses workers
//! in FILO order, and stops workers idle past `max_idle_worker_duration`.
//!
//! It is the same engine as [`Pool`](super::Pool), set up the fasthttp way:
//! non-blocking, the idle queue a stack (FILO), a cleaner that binary-searches
//! it every `max_idle_worker_duration` and stops the stale workers outside the
//! lock, fasthttp's `workerChanCap` rule by procs, built stopped and
//! restartable (`start` / `stop`, any number of times).
//!
//! `workerChanCap`: fasthttp hands a connection over an unbuffered channel on
//! one proc, so that `Serve` switches to the worker at once, and over a
//! one-slot channel otherwise, so that the acceptor never waits for a busy
//! worker. Here a worker's mailbox always has one slot (a hand-off never
//! waits, so `serve` never blocks, in a goroutine, a thread or an async
//! task alike), and on one proc a serving goroutine yields right after the
//! hand-off: the worker runs next, as fasthttp gets from the rendezvous. Unlike fasthttp (which removed its
//! recover), a panicking handler is logged and the worker goes on.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::core::{Core, Ran};
use super::{Builder, Logger, Owner, PoolError, PoolStats};

/// fasthttp's `DefaultConcurrency`.
pub const DEFAULT_MAX_WORKERS: usize = 256 * 1024;
/// fasthttp's default `MaxIdleWorkerDuration`.
pub const DEFAULT_MAX_IDLE_WORKER_DURATION: Duration = Duration::from_secs(10);

/// Settings of a [`WorkerPool`].
pub struct WorkerPoolBuilder<T: Send + 'static> {
    handler: Arc<dyn Fn(T) + Send + Sync>,
    max_workers: usize,
    max_idle: Duration,
    logger: Option<Arc<dyn Logger>>,
}

impl<T: Send + 'static> fmt::Debug for WorkerPoolBuilder<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkerPoolBuilder")
            .field("max_workers", &self.max_workers)
            .field("max_idle_worker_duration", &self.max_idle)
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static> WorkerPoolBuilder<T> {
    /// At most `n` workers (0: the default, 256 Ki).
    pub fn max_workers(mut self, n: usize) -> Self {
        self.max_workers = if n == 0 { DEFAULT_MAX_WORKERS } else { n };
        self
    }

    /// Stop workers idle for longer than `d` (zero: the default, 10 s).
    pub fn max_idle_worker_duration(mut self, d: Duration) -> Self {
        self.max_idle = if d.is_zero() {
            DEFAULT_MAX_IDLE_WORKER_DURATION
        } else {
            d
        };
        self
    }

    /// Where panics of the handler are logged.
    pub fn logger(mut self, logger: impl Logger) -> Self {
        self.logger = Some(Arc::new(logger));
        self
    }

    /// The pool, stopped: call [`WorkerPool::start`].
    pub fn build(self) -> WorkerPool<T> {
        let mut b = Builder::new()
            .capacity(isize::try_from(self.max_workers).unwrap_or(isize::MAX))
            .nonblocking(true)
            .expiry(self.max_idle);
        if let Some(l) = self.logger {
            b.logger = Some(l);
        }
        let opts = b
            .options()
            .expect("a non-negative expiry and no prealloc are valid");
        let handler = self.handler;
        let run = Box::new(move |item: T| {
            handler(item);
            Ran::Completed
        });
        // A stopped pool starts no goroutine, so this cannot fail.
        let core = Core::new(b.capacity, opts, run, false)
            .expect("building a stopped pool starts no goroutine");
        WorkerPool {
            inner: Arc::new(Owner { core }),
            yield_after_serve: crate::runtime::procs() == 1,
        }
    }
}

/// fasthttp's `workerPool`: serve items with one handler on at most
/// `max_workers` reused goroutines, never blocking the caller.
///
/// ```
/// use gosched::pool::WorkerPool;
/// let (tx, rx) = std::sync::mpsc::channel();
/// let wp = WorkerPool::builder(move |n: u32| tx.send(n * 2).unwrap()).max_workers(4).build();
/// wp.start().unwrap();
/// assert!(wp.serve(21));
/// assert_eq!(rx.recv().unwrap(), 42);
/// wp.stop();
/// assert!(!wp.serve(1), "a stopped pool serves nothing");
/// ```
pub struct WorkerPool<T: Send + 'static> {
    inner: Arc<Owner<T>>,
    /// One proc: yield to the worker after a hand-off (`workerChanCap`).
    yield_after_serve: bool,
}

impl<T: Send + 'static> Clone for WorkerPool<T> {
    fn clone(&self) -> Self {
        WorkerPool {
            inner: Arc::clone(&self.inner),
            yield_after_serve: self.yield_after_serve,
        }
    }
}

impl<T: Send + 'static> fmt::Debug for WorkerPool<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkerPool")
            .field("max_workers", &self.max_workers())
            .field("workers", &self.workers_count())
            .field("started", &self.is_started())
            .finish()
    }
}

impl<T: Send + 'static> WorkerPool<T> {
    /// A stopped pool with fasthttp's defaults, serving with `handler`.
    pub fn new(handler: impl Fn(T) + Send + Sync + 'static) -> Self {
        Self::builder(handler).build()
    }

    /// Settings: `max_workers`, `max_idle_worker_duration`, logger.
    pub fn builder(handler: impl Fn(T) + Send + Sync + 'static) -> WorkerPoolBuilder<T> {
        WorkerPoolBuilder {
            handler: Arc::new(handler),
            max_workers: DEFAULT_MAX_WORKERS,
            max_idle: DEFAULT_MAX_IDLE_WORKER_DURATION,
            logger: None,
        }
    }

    /// Start serving (and the cleaner). Nothing if it is already started.
    pub fn start(&self) -> Result<(), PoolError> {
        self.inner.core.reboot()
    }

    /// Stop: idle workers exit now, busy ones after their item; `serve`
    /// returns false until the next `start`. Does not wait.
    pub fn stop(&self) {
        self.inner.core.release();
    }

    /// Whether it is started.
    pub fn is_started(&self) -> bool {
        !self.inner.core.is_closed()
    }

    /// Hand `item` to a worker; false if every one of `max_workers` is busy
    /// or the pool is stopped (then `item` is dropped: use
    /// [`try_serve`](Self::try_serve) to get it back, e.g. to answer 503).
    pub fn serve(&self, item: T) -> bool {
        self.try_serve(item).is_ok()
    }

    /// Hand `item` to a worker, or give it back when saturated or stopped.
    /// Never waits.
    pub fn try_serve(&self, item: T) -> Result<(), T> {
        super::try_submit_inner(&self.inner.core, item).map_err(|(_, item)| item)?;
        if self.yield_after_serve && crate::coro::in_goroutine() {
            // fasthttp's `workerChanCap` on one proc: switch to the worker.
            crate::yield_now();
        }
        Ok(())
    }

    /// The cap on workers.
    pub fn max_workers(&self) -> usize {
        self.inner.core.cap().max(0) as usize
    }

    /// Live workers, idle or busy (fasthttp's `workersCount`).
    pub fn workers_count(&self) -> usize {
        self.inner.core.running()
    }

    /// Workers waiting for an item (fasthttp's `len(ready)`).
    pub fn idle_workers(&self) -> usize {
        self.inner.core.idle_workers()
    }

    /// Counters.
    pub fn stats(&self) -> PoolStats {
        let c = &self.inner.core;
        c.stats.snapshot(c.running(), c.waiting(), c.idle_workers())
    }
}
