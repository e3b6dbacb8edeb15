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

/// fasthttp's `DefaultConcurrency`: a [`WorkerPool`]'s default limit on
/// live workers.
///
/// ```
/// assert_eq!(gosched::pool::DEFAULT_MAX_WORKERS, 256 * 1024);
/// ```
pub const DEFAULT_MAX_WORKERS: usize = 256 * 1024;
/// fasthttp's default `MaxIdleWorkerDuration`: how long a [`WorkerPool`]'s
/// idle worker waits for work before its goroutine ends.
///
/// ```
/// use std::time::Duration;
/// assert_eq!(gosched::pool::DEFAULT_MAX_IDLE_WORKER_DURATION, Duration::from_secs(10));
/// ```
pub const DEFAULT_MAX_IDLE_WORKER_DURATION: Duration = Duration::from_secs(10);

/// Settings of a [`WorkerPool`].
///
/// ```
/// use gosched::pool::WorkerPool;
/// use std::time::Duration;
///
/// let wp = WorkerPool::builder(|conn: u64| drop(conn))
///     .max_workers(1000)
///     .max_idle_worker_duration(Duration::from_secs(30))
///     .build();
/// assert_eq!(wp.max_workers(), 1000);
/// assert!(!wp.is_started()); // built stopped
/// ```
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
    ///
    /// ```
    /// use gosched::pool::WorkerPool;
    ///
    /// assert_eq!(WorkerPool::builder(|_: u8| {}).max_workers(8).build().max_workers(), 8);
    /// let default = WorkerPool::builder(|_: u8| {}).max_workers(0).build();
    /// assert_eq!(default.max_workers(), 256 * 1024);
    /// ```
    pub fn max_workers(mut self, n: usize) -> Self {
        self.max_workers = if n == 0 { DEFAULT_MAX_WORKERS } else { n };
        self
    }

    /// Stop workers idle for longer than `d` (zero: the default, 10 s).
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// gosched::testing::run_virtual(|| {
    ///     let wp = gosched::pool::WorkerPool::builder(|_: u32| {})
    ///         .max_idle_worker_duration(Duration::from_secs(2))
    ///         .build();
    ///     wp.start().unwrap();
    ///     assert!(wp.serve(1));
    ///     gosched::time::sleep(Duration::from_secs(1)); // virtual: instant
    ///     assert_eq!(wp.idle_workers(), 1);
    ///     gosched::time::sleep(Duration::from_secs(5));
    ///     assert_eq!(wp.workers_count(), 0); // stopped by the cleaner
    /// });
    /// ```
    pub fn max_idle_worker_duration(mut self, d: Duration) -> Self {
        self.max_idle = if d.is_zero() {
            DEFAULT_MAX_IDLE_WORKER_DURATION
        } else {
            d
        };
        self
    }

    /// Where panics of the handler are logged.
    ///
    /// ```
    /// use gosched::pool::{Logger, WorkerPool};
    /// use std::sync::mpsc;
    ///
    /// struct ToChannel(mpsc::Sender<String>);
    /// impl Logger for ToChannel {
    ///     fn log(&self, msg: std::fmt::Arguments<'_>) {
    ///         let _ = self.0.send(msg.to_string());
    ///     }
    /// }
    /// let (tx, rx) = mpsc::channel();
    /// let wp = WorkerPool::builder(|n: u32| assert!(n < 10, "too big: {n}"))
    ///     .logger(ToChannel(tx))
    ///     .build();
    /// wp.start().unwrap();
    /// assert!(wp.serve(99));
    /// assert!(rx.recv().unwrap().contains("too big: 99"));
    /// ```
    pub fn logger(mut self, logger: impl Logger) -> Self {
        self.logger = Some(Arc::new(logger));
        self
    }

    /// The pool, stopped: call [`WorkerPool::start`].
    ///
    /// ```
    /// let wp = gosched::pool::WorkerPool::builder(|_: u32| {}).max_workers(4).build();
    /// assert!(!wp.serve(1), "not started yet");
    /// wp.start().unwrap();
    /// assert!(wp.serve(1));
    /// ```
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
    ///
    /// ```
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let wp = gosched::pool::WorkerPool::new(move |s: &'static str| tx.send(s.len()).unwrap());
    /// wp.start().unwrap();
    /// assert!(wp.serve("hello"));
    /// assert_eq!(rx.recv().unwrap(), 5);
    /// ```
    pub fn new(handler: impl Fn(T) + Send + Sync + 'static) -> Self {
        Self::builder(handler).build()
    }

    /// Settings: `max_workers`, `max_idle_worker_duration`, logger.
    ///
    /// ```
    /// let wp = gosched::pool::WorkerPool::builder(|_: u32| {}).max_workers(16).build();
    /// assert_eq!(wp.max_workers(), 16);
    /// ```
    pub fn builder(handler: impl Fn(T) + Send + Sync + 'static) -> WorkerPoolBuilder<T> {
        WorkerPoolBuilder {
            handler: Arc::new(handler),
            max_workers: DEFAULT_MAX_WORKERS,
            max_idle: DEFAULT_MAX_IDLE_WORKER_DURATION,
            logger: None,
        }
    }

    /// Start serving (and the cleaner). Nothing if it is already started.
    ///
    /// ```
    /// let wp = gosched::pool::WorkerPool::new(|_: u32| {});
    /// wp.start().unwrap();
    /// assert!(wp.is_started());
    /// wp.start().unwrap(); // nothing: started already
    /// assert!(wp.serve(1));
    /// ```
    pub fn start(&self) -> Result<(), PoolError> {
        self.inner.core.reboot()
    }

    /// Stop: idle workers exit now, busy ones after their item; `serve`
    /// returns false until the next `start`. Does not wait.
    ///
    /// ```
    /// let wp = gosched::pool::WorkerPool::new(|_: u32| {});
    /// wp.start().unwrap();
    /// wp.stop();
    /// assert!(!wp.serve(1));
    /// wp.start().unwrap(); // restartable
    /// assert!(wp.serve(2));
    /// ```
    pub fn stop(&self) {
        self.inner.core.release();
    }

    /// Whether it is started.
    ///
    /// ```
    /// let wp = gosched::pool::WorkerPool::new(|_: u32| {});
    /// assert!(!wp.is_started());
    /// wp.start().unwrap();
    /// assert!(wp.is_started());
    /// wp.stop();
    /// assert!(!wp.is_started());
    /// ```
    pub fn is_started(&self) -> bool {
        !self.inner.core.is_closed()
    }

    /// Hand `item` to a worker; false if every one of `max_workers` is busy
    /// or the pool is stopped (then `item` is dropped: use
    /// [`try_serve`](Self::try_serve) to get it back, e.g. to answer 503).
    ///
    /// ```
    /// use gosched::pool::WorkerPool;
    ///
    /// // Each item is a gate the handler waits on: the worker stays busy until it closes.
    /// let wp = WorkerPool::builder(|gate: gosched::Chan<()>| { gate.recv(); })
    ///     .max_workers(1)
    ///     .build();
    /// wp.start().unwrap();
    /// let gate = gosched::chan(0);
    /// assert!(wp.serve(gate.clone()));
    /// assert!(!wp.serve(gosched::chan(0)), "saturated: the caller answers 503");
    /// gate.close().unwrap();
    /// ```
    pub fn serve(&self, item: T) -> bool {
        self.try_serve(item).is_ok()
    }

    /// Hand `item` to a worker, or give it back when saturated or stopped.
    /// Never waits.
    ///
    /// ```
    /// let wp = gosched::pool::WorkerPool::new(|_: &'static str| {});
    /// wp.start().unwrap();
    /// assert_eq!(wp.try_serve("first"), Ok(()));
    /// wp.stop();
    /// assert_eq!(wp.try_serve("late"), Err("late")); // the item comes back
    /// ```
    pub fn try_serve(&self, item: T) -> Result<(), T> {
        super::try_submit_inner(&self.inner.core, item).map_err(|(_, item)| item)?;
        if self.yield_after_serve && crate::coro::in_goroutine() {
            // fasthttp's `workerChanCap` on one proc: switch to the worker.
            crate::yield_now();
        }
        Ok(())
    }

    /// The cap on workers.
    ///
    /// ```
    /// let wp = gosched::pool::WorkerPool::builder(|_: u32| {}).max_workers(64).build();
    /// assert_eq!(wp.max_workers(), 64);
    /// ```
    pub fn max_workers(&self) -> usize {
        self.inner.core.cap().max(0) as usize
    }

    /// Live workers, idle or busy (fasthttp's `workersCount`).
    ///
    /// ```
    /// let wp = gosched::pool::WorkerPool::new(|gate: gosched::Chan<()>| { gate.recv(); });
    /// wp.start().unwrap();
    /// assert_eq!(wp.workers_count(), 0);
    /// let gate = gosched::chan(0);
    /// assert!(wp.serve(gate.clone()));
    /// assert_eq!(wp.workers_count(), 1);
    /// gate.close().unwrap();
    /// ```
    pub fn workers_count(&self) -> usize {
        self.inner.core.running()
    }

    /// Workers waiting for an item (fasthttp's `len(ready)`).
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// gosched::testing::run_virtual(|| {
    ///     let wp = gosched::pool::WorkerPool::new(|_: u32| {});
    ///     wp.start().unwrap();
    ///     assert!(wp.serve(1));
    ///     gosched::time::sleep(Duration::from_millis(1)); // let the worker finish
    ///     assert_eq!(wp.idle_workers(), 1); // ready for the next item
    /// });
    /// ```
    pub fn idle_workers(&self) -> usize {
        self.inner.core.idle_workers()
    }

    /// Counters.
    ///
    /// ```
    /// let wp = gosched::pool::WorkerPool::new(|_: u32| {});
    /// wp.start().unwrap();
    /// assert!(wp.serve(1));
    /// wp.stop();
    /// assert!(!wp.serve(2));
    /// let s = wp.stats();
    /// assert_eq!((s.submitted, s.rejected), (1, 1));
    /// ```
    pub fn stats(&self) -> PoolStats {
        let c = &self.inner.core;
        c.stats.snapshot(c.running(), c.waiting(), c.idle_workers())
    }
}
