//! Goroutine pools: ants' `Pool`, `PoolWithFunc` and `MultiPool`, what ants'
//! users asked for and never got, and fasthttp's [`WorkerPool`].
//!
//! A pool runs tasks on **reused goroutines** (workers), at most `cap` of them
//! at once. A submit hands the task to an idle worker (the one that went idle
//! last: its stack and caches are warm), or starts a new worker while fewer than
//! `cap` live, or waits until a worker is free — or, for a non-blocking pool,
//! fails at once with [`PoolError::Overload`]. Workers idle for longer than the
//! expiry (1 s by default) are stopped by a purge goroutine.
//!
//! ```
//! use gosched::pool::Pool;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use std::sync::Arc;
//!
//! let pool = Pool::new(10).unwrap();
//! let sum = Arc::new(AtomicUsize::new(0));
//! for i in 0..1000 {
//!     let sum = Arc::clone(&sum);
//!     pool.submit(move || {
//!         sum.fetch_add(i, Ordering::Relaxed);
//!     })
//!     .unwrap();
//! }
//! pool.wait(); // every submitted task has finished
//! assert_eq!(sum.load(Ordering::Relaxed), 499_500);
//! assert!(pool.running() <= 10);
//! ```
//!
//! # What ants does and so does this
//!
//! Capacity (`cap <= 0`: unlimited, then [`free`](Pool::free) is -1), expiry,
//! `prealloc` (the idle queue is a fixed ring), `nonblocking`, `max_blocking`
//! (how many submitters may wait), a panic handler and a logger,
//! `disable_purge`, [`tune`](Pool::tune), [`release`](Pool::release),
//! [`release_timeout`](Pool::release_timeout), [`reboot`](Pool::reboot),
//! [`PoolWithFunc`], [`MultiPool`] / [`MultiPoolWithFunc`] with round-robin and
//! least-tasks balancing, and every ants error in [`PoolError`].
//! [`running`](Pool::running) means what it means in ants: live workers, idle
//! or busy.
//!
//! # Beyond ants
//!
//! - [`submit_with_result`](Pool::submit_with_result) returns a
//!   [`JoinHandle`] (a panic in the task reaches the handle);
//! - [`wait`](Pool::wait) until every submitted task has finished;
//! - [`CancelToken`]: [`submit_with_cancel`](Pool::submit_with_cancel)'s task
//!   resolves as cancelled if the token fires before a worker starts it, and a
//!   submitter still waiting for a worker returns [`PoolError::Cancelled`];
//! - [`submit_timeout`](Pool::submit_timeout): a blocked submitter gives up;
//! - [`submit_async`](Pool::submit_async) back-pressures async code without
//!   blocking its thread; [`submit_task`](Pool::submit_task) pools futures;
//! - [`stats`](Pool::stats): submitted, completed, panicked, rejected,
//!   cancelled, timed out, and how long submitters waited (p50/p99);
//! - a dropped pool is released (no leaked goroutines); a panicking task does
//!   not kill its worker (ants lets it die), and `running` never exceeds `cap`,
//!   even while `tune` races with submits (ants #374);
//! - blocked submitters are served in FIFO order, each woken only when a worker
//!   or a slot is handed to it (ants broadcasts to all of them).
//!
//! # Where the goroutines run
//!
//! A worker is started with [`Go::try_spawn`](crate::Go::try_spawn) on the
//! runtime current where the submit that needed it runs (as [`crate::go`]);
//! the purge goroutine on the one current where the pool is built.
//!
//! # Blocking and async code
//!
//! `submit`, `invoke`, `wait` and `release_timeout` park the goroutine (or the
//! plain thread) that calls them. In an async task, use the `_async` forms:
//! the blocking forms panic there if they would have to wait.

mod core;
mod mailbox;
mod multi;
mod queue;
mod result;
mod stats;
mod worker_pool;

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use self::core::{Core, Dispatch, Options, Ran, Slot};
use crate::sync::waitlist::WaitList;
use crate::{JoinHandle, SpawnError};

pub use self::multi::{LoadBalancing, MultiPool, MultiPoolWithFunc};
pub use self::stats::PoolStats;
pub use self::worker_pool::{
    WorkerPool, WorkerPoolBuilder, DEFAULT_MAX_IDLE_WORKER_DURATION, DEFAULT_MAX_WORKERS,
};

/// ants' `DefaultCleanIntervalTime`: the default expiry of idle workers.
///
/// ```
/// use gosched::pool::DEFAULT_EXPIRY;
/// use std::time::Duration;
///
/// assert_eq!(DEFAULT_EXPIRY, Duration::from_secs(1));
/// // A zero expiry asks for this default.
/// let pool = gosched::pool::Pool::builder().expiry(Duration::ZERO).build();
/// assert!(pool.is_ok());
/// ```
pub const DEFAULT_EXPIRY: Duration = Duration::from_secs(1);

/// Why a pool call failed. Every ants error, plus what the extras add.
///
/// Errors compare by kind (`==`), and print what to do about them.
///
/// ```
/// use gosched::pool::{Pool, PoolError};
///
/// let pool = Pool::builder().capacity(1).nonblocking(true).build().unwrap();
/// let gate = gosched::chan::<()>(0);
/// let g = gate.clone();
/// pool.submit(move || { g.recv(); }).unwrap(); // the only worker is busy
/// assert_eq!(pool.submit(|| {}), Err(PoolError::Overload));
/// gate.close().unwrap();
/// pool.release();
/// assert_eq!(pool.submit(|| {}), Err(PoolError::Closed));
/// assert!(PoolError::Closed.to_string().contains("reboot()"));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum PoolError {
    /// The pool has been released (ants' `ErrPoolClosed`).
    Closed,
    /// Every worker is busy and the pool is non-blocking, or `max_blocking`
    /// submitters already wait (ants' `ErrPoolOverload`).
    Overload,
    /// `release_timeout` ran out before every worker exited, or a
    /// `submit_timeout` found no worker in time (ants' `ErrTimeout`).
    Timeout,
    /// The submit's [`CancelToken`] fired while it waited for a worker.
    Cancelled,
    /// The expiry is negative (ants' `ErrInvalidPoolExpiry`).
    InvalidExpiry,
    /// A function pool was built without its function (ants' `ErrLackPoolFunc`).
    LackPoolFunc,
    /// `prealloc` was asked of an unlimited pool (ants' `ErrInvalidPreAllocSize`),
    /// or of a capacity whose ring cannot be allocated.
    InvalidPreAllocSize,
    /// A `…_by_index` call named no sub-pool (ants' `ErrInvalidPoolIndex`).
    InvalidPoolIndex,
    /// An unknown balancing strategy (ants' `ErrInvalidLoadBalancingStrategy`).
    InvalidLoadBalancingStrategy,
    /// A multi-pool of zero or fewer sub-pools (ants' `ErrInvalidMultiPoolSize`).
    InvalidMultiPoolSize,
    /// A worker goroutine could not be started (no stack could be reserved).
    Spawn(SpawnError),
    /// Several sub-pools of a multi-pool failed (`release_timeout`): each
    /// sub-pool's index and error.
    SubPools(Vec<(usize, PoolError)>),
}

impl fmt::Display for PoolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolError::Closed => write!(
                f,
                "this pool has been released; call reboot() to use it again"
            ),
            PoolError::Overload => write!(
                f,
                "too many submitters are blocked on this pool, or it is non-blocking \
                 and every worker is busy; retry later, raise the capacity (tune) or \
                 max_blocking, or use a blocking pool"
            ),
            PoolError::Timeout => write!(f, "timed out: the pool operation did not finish in time"),
            PoolError::Cancelled => write!(f, "the submit was cancelled by its CancelToken"),
            PoolError::InvalidExpiry => write!(
                f,
                "invalid expiry: it must not be negative (or disable the purge)"
            ),
            PoolError::LackPoolFunc => write!(f, "a function pool needs its function"),
            PoolError::InvalidPreAllocSize => write!(
                f,
                "cannot preallocate an unlimited pool: give it a capacity > 0"
            ),
            PoolError::InvalidPoolIndex => write!(f, "no sub-pool has this index"),
            PoolError::InvalidLoadBalancingStrategy => write!(
                f,
                "invalid load-balancing strategy: use RoundRobin or LeastTasks"
            ),
            PoolError::InvalidMultiPoolSize => {
                write!(f, "a multi-pool needs at least one sub-pool")
            }
            PoolError::Spawn(e) => write!(f, "the pool could not start a worker: {e}"),
            PoolError::SubPools(errs) => {
                for (i, (idx, e)) in errs.iter().enumerate() {
                    if i > 0 {
                        write!(f, " | ")?;
                    }
                    write!(f, "pool {idx}: {e}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for PoolError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PoolError::Spawn(e) => Some(e),
            _ => None,
        }
    }
}

impl PartialEq for PoolError {
    /// Compares the kind (and the sub-pool errors); two `Spawn` errors are equal.
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (PoolError::SubPools(a), PoolError::SubPools(b)) => a == b,
            _ => std::mem::discriminant(self) == std::mem::discriminant(other),
        }
    }
}

/// Where a pool writes what it must tell someone (ants' `Logger`): a panicking
/// task when no panic handler is set, a panicking panic handler.
///
/// ```
/// use gosched::pool::{Logger, Pool};
/// use std::sync::{Arc, Mutex};
///
/// #[derive(Clone, Default)]
/// struct Collect(Arc<Mutex<Vec<String>>>);
/// impl Logger for Collect {
///     fn log(&self, msg: std::fmt::Arguments<'_>) {
///         self.0.lock().unwrap().push(msg.to_string());
///     }
/// }
///
/// let logs = Collect::default();
/// let pool = Pool::builder().logger(logs.clone()).build().unwrap();
/// pool.submit(|| panic!("boom")).unwrap(); // no panic handler: logged
/// pool.wait();
/// assert!(logs.0.lock().unwrap()[0].contains("boom"));
/// ```
pub trait Logger: Send + Sync + 'static {
    /// One message, without a trailing newline.
    ///
    /// ```
    /// use gosched::pool::Logger;
    /// use std::sync::Mutex;
    ///
    /// struct Last(Mutex<String>);
    /// impl Logger for Last {
    ///     fn log(&self, msg: std::fmt::Arguments<'_>) {
    ///         *self.0.lock().unwrap() = msg.to_string();
    ///     }
    /// }
    /// let l = Last(Mutex::default());
    /// l.log(format_args!("{} workers purged", 3));
    /// assert_eq!(*l.0.lock().unwrap(), "3 workers purged");
    /// ```
    fn log(&self, msg: fmt::Arguments<'_>);
}

/// The default [`Logger`]: standard error, prefixed `[gosched::pool]: `.
///
/// ```
/// use gosched::pool::{Pool, StderrLogger};
///
/// // What every pool uses unless told otherwise.
/// let pool = Pool::builder().logger(StderrLogger).build().unwrap();
/// pool.submit(|| panic!("reported on stderr")).unwrap();
/// pool.wait();
/// assert_eq!(pool.stats().panicked, 1);
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct StderrLogger;

impl Logger for StderrLogger {
    fn log(&self, msg: fmt::Arguments<'_>) {
        eprintln!("[gosched::pool]: {msg}");
    }
}

pub(crate) type PanicHandler = Arc<dyn Fn(Box<dyn Any + Send>) + Send + Sync>;

/// Pool settings (ants' options); [`Pool::builder`].
///
/// ```
/// use gosched::pool::Pool;
/// use std::time::Duration;
///
/// let pool = Pool::builder()
///     .capacity(8)
///     .expiry(Duration::from_secs(10))
///     .max_blocking(100)
///     .build()
///     .unwrap();
/// assert_eq!((pool.cap(), pool.free()), (8, 8));
/// ```
#[derive(Clone)]
pub struct Builder {
    capacity: isize,
    expiry: Option<Duration>,
    expiry_invalid: bool,
    prealloc: bool,
    nonblocking: bool,
    max_blocking: usize,
    panic_handler: Option<PanicHandler>,
    logger: Option<Arc<dyn Logger>>,
    disable_purge: bool,
    stack_size: Option<usize>,
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("capacity", &self.capacity)
            .field("expiry", &self.expiry)
            .field("prealloc", &self.prealloc)
            .field("nonblocking", &self.nonblocking)
            .field("max_blocking", &self.max_blocking)
            .field("panic_handler", &self.panic_handler.is_some())
            .field("disable_purge", &self.disable_purge)
            .field("stack_size", &self.stack_size)
            .finish_non_exhaustive()
    }
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            capacity: -1,
            expiry: None,
            expiry_invalid: false,
            prealloc: false,
            nonblocking: false,
            max_blocking: 0,
            panic_handler: None,
            logger: None,
            disable_purge: false,
            stack_size: None,
        }
    }
}

impl Builder {
    /// Unlimited capacity and ants' defaults.
    ///
    /// ```
    /// let pool = gosched::pool::Builder::new().build().unwrap();
    /// assert_eq!(pool.cap(), -1); // unlimited
    /// assert_eq!(pool.free(), -1);
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// At most `n` workers; `n <= 0` means unlimited (the default).
    ///
    /// ```
    /// use gosched::pool::Builder;
    ///
    /// assert_eq!(Builder::new().capacity(4).build().unwrap().cap(), 4);
    /// assert_eq!(Builder::new().capacity(0).build().unwrap().cap(), -1); // unlimited
    /// ```
    pub fn capacity(mut self, n: isize) -> Self {
        self.capacity = n;
        self
    }

    /// Stop workers idle for longer than `d`; zero means the default, 1 s.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// // Virtual time: the clock jumps to the next timer, so this runs at once.
    /// gosched::testing::run_virtual(|| {
    ///     let pool = gosched::pool::Pool::builder()
    ///         .expiry(Duration::from_secs(5))
    ///         .build()
    ///         .unwrap();
    ///     pool.submit(|| {}).unwrap();
    ///     pool.wait();
    ///     assert_eq!(pool.running(), 1); // idle, kept for the next task
    ///     gosched::time::sleep(Duration::from_secs(12));
    ///     assert_eq!(pool.running(), 0); // stopped by the purge
    ///     assert_eq!(pool.stats().purged, 1);
    /// });
    /// ```
    pub fn expiry(mut self, d: Duration) -> Self {
        self.expiry = Some(d);
        self.expiry_invalid = false;
        self
    }

    /// The expiry in seconds, as read from a configuration: negative (or NaN)
    /// makes `build` fail with [`PoolError::InvalidExpiry`] unless the purge is
    /// disabled (ants' rule); zero means the default.
    ///
    /// ```
    /// use gosched::pool::{Pool, PoolError};
    ///
    /// assert!(Pool::builder().expiry_secs(2.5).build().is_ok());
    /// let err = Pool::builder().expiry_secs(-1.0).build().unwrap_err();
    /// assert_eq!(err, PoolError::InvalidExpiry);
    /// // Without a purge the expiry is never used, so it is not checked.
    /// assert!(Pool::builder().expiry_secs(-1.0).disable_purge(true).build().is_ok());
    /// ```
    pub fn expiry_secs(mut self, secs: f64) -> Self {
        match Duration::try_from_secs_f64(secs) {
            Ok(d) => {
                self.expiry = Some(d);
                self.expiry_invalid = false;
            }
            Err(_) => self.expiry_invalid = true,
        }
        self
    }

    /// Allocate the idle queue for `capacity` workers up front, as a ring
    /// (FIFO reuse). Needs a capacity > 0; a preallocated pool cannot be tuned.
    ///
    /// ```
    /// use gosched::pool::{Pool, PoolError};
    ///
    /// let pool = Pool::builder().capacity(4).prealloc(true).build().unwrap();
    /// pool.tune(8); // ignored: a preallocated pool keeps its capacity
    /// assert_eq!(pool.cap(), 4);
    /// let err = Pool::builder().prealloc(true).build().unwrap_err(); // unlimited
    /// assert_eq!(err, PoolError::InvalidPreAllocSize);
    /// ```
    pub fn prealloc(mut self, yes: bool) -> Self {
        self.prealloc = yes;
        self
    }

    /// Fail with [`PoolError::Overload`] instead of waiting when every worker
    /// is busy (then `max_blocking` does not apply).
    ///
    /// ```
    /// use gosched::pool::{Pool, PoolError};
    ///
    /// let pool = Pool::builder().capacity(1).nonblocking(true).build().unwrap();
    /// let gate = gosched::chan::<()>(0);
    /// let g = gate.clone();
    /// pool.submit(move || { g.recv(); }).unwrap(); // the only worker is busy
    /// assert_eq!(pool.submit(|| {}), Err(PoolError::Overload)); // at once
    /// assert_eq!(pool.stats().rejected, 1);
    /// gate.close().unwrap();
    /// ```
    pub fn nonblocking(mut self, yes: bool) -> Self {
        self.nonblocking = yes;
        self
    }

    /// At most `n` submitters may wait at once; the next one gets
    /// [`PoolError::Overload`]. Zero (the default) means no limit.
    ///
    /// ```
    /// use gosched::pool::{Pool, PoolError};
    ///
    /// let pool = Pool::builder().capacity(1).max_blocking(1).build().unwrap();
    /// let gate = gosched::chan::<()>(0);
    /// let g = gate.clone();
    /// pool.submit(move || { g.recv(); }).unwrap(); // the only worker is busy
    /// let p = pool.clone();
    /// let waiter = gosched::go(move || p.submit(|| {})); // waits for it
    /// while pool.waiting() == 0 { std::thread::yield_now(); }
    /// assert_eq!(pool.submit(|| {}), Err(PoolError::Overload)); // one waits already
    /// gate.close().unwrap();
    /// assert_eq!(waiter.join().unwrap(), Ok(()));
    /// ```
    pub fn max_blocking(mut self, n: usize) -> Self {
        self.max_blocking = n;
        self
    }

    /// Called with the payload of every panicking task (on the worker,
    /// which then goes on serving). Without one, the pool logs the panic.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    ///
    /// let panics = Arc::new(AtomicUsize::new(0));
    /// let p = Arc::clone(&panics);
    /// let pool = gosched::pool::Pool::builder()
    ///     .panic_handler(move |payload| {
    ///         assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom"));
    ///         p.fetch_add(1, Ordering::Relaxed);
    ///     })
    ///     .build()
    ///     .unwrap();
    /// pool.submit(|| panic!("boom")).unwrap();
    /// pool.wait(); // the task counts once its handler has returned
    /// assert_eq!(panics.load(Ordering::Relaxed), 1);
    /// assert_eq!(pool.running(), 1, "the worker goes on");
    /// ```
    pub fn panic_handler(
        mut self,
        f: impl Fn(Box<dyn Any + Send>) + Send + Sync + 'static,
    ) -> Self {
        self.panic_handler = Some(Arc::new(f));
        self
    }

    /// Where the pool logs (default: [`StderrLogger`]).
    ///
    /// Any [`Logger`]; see its example for one that collects the messages.
    ///
    /// ```
    /// use gosched::pool::{Pool, StderrLogger};
    ///
    /// let pool = Pool::builder().logger(StderrLogger).build().unwrap();
    /// pool.submit(|| panic!("logged, and the worker goes on")).unwrap();
    /// pool.wait();
    /// assert_eq!(pool.stats().panicked, 1);
    /// ```
    pub fn logger(mut self, logger: impl Logger) -> Self {
        self.logger = Some(Arc::new(logger));
        self
    }

    /// Keep idle workers forever (no purge goroutine).
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// gosched::testing::run_virtual(|| {
    ///     let pool = gosched::pool::Pool::builder().disable_purge(true).build().unwrap();
    ///     pool.submit(|| {}).unwrap();
    ///     pool.wait();
    ///     gosched::time::sleep(Duration::from_secs(3600)); // virtual: instant
    ///     assert_eq!(pool.running(), 1); // still idle, never purged
    /// });
    /// ```
    pub fn disable_purge(mut self, yes: bool) -> Self {
        self.disable_purge = yes;
        self
    }

    /// Stack size of the worker goroutines (default: the runtime's).
    ///
    /// ```
    /// let pool = gosched::pool::Pool::builder().stack_size(64 * 1024).build().unwrap();
    /// let h = pool.submit_with_result(|| [1u8; 1024].iter().map(|&b| b as u32).sum::<u32>());
    /// assert_eq!(h.unwrap().join().unwrap(), 1024);
    /// ```
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = Some(bytes);
        self
    }

    fn options(&self) -> Result<Options, PoolError> {
        if self.expiry_invalid && !self.disable_purge {
            return Err(PoolError::InvalidExpiry);
        }
        if self.prealloc && self.capacity <= 0 {
            return Err(PoolError::InvalidPreAllocSize);
        }
        let expiry = match self.expiry {
            Some(d) if !d.is_zero() => d,
            _ => DEFAULT_EXPIRY,
        };
        Ok(Options {
            expiry,
            prealloc: self.prealloc,
            nonblocking: self.nonblocking,
            max_blocking: self.max_blocking,
            panic_handler: self.panic_handler.clone(),
            logger: self
                .logger
                .clone()
                .unwrap_or_else(|| Arc::new(StderrLogger)),
            disable_purge: self.disable_purge,
            stack_size: self.stack_size,
        })
    }

    /// Build a [`Pool`].
    ///
    /// ```
    /// use gosched::pool::{Pool, PoolError};
    ///
    /// let pool = Pool::builder().capacity(2).build().unwrap();
    /// assert_eq!((pool.cap(), pool.running()), (2, 0));
    /// let err = Pool::builder().prealloc(true).build().unwrap_err();
    /// assert_eq!(err, PoolError::InvalidPreAllocSize);
    /// ```
    pub fn build(self) -> Result<Pool, PoolError> {
        Ok(Pool {
            inner: Arc::new(Owner { core: self.core()? }),
        })
    }

    /// Build a [`PoolWithFunc`] that runs `f` on each invoked argument.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use std::sync::Arc;
    ///
    /// let total = Arc::new(AtomicU64::new(0));
    /// let t = Arc::clone(&total);
    /// let pool = gosched::pool::Pool::builder()
    ///     .capacity(4)
    ///     .build_with_func(move |n: u64| { t.fetch_add(n, Ordering::Relaxed); })
    ///     .unwrap();
    /// for n in 1..=10 {
    ///     pool.invoke(n).unwrap();
    /// }
    /// pool.wait();
    /// assert_eq!(total.load(Ordering::Relaxed), 55);
    /// ```
    pub fn build_with_func<A, F>(self, f: F) -> Result<PoolWithFunc<A>, PoolError>
    where
        A: Send + 'static,
        F: Fn(A) + Send + Sync + 'static,
    {
        self.build_with_optional_func(Some(f))
    }

    /// [`build_with_func`](Self::build_with_func) with the function
    /// optional, as ants' constructor takes it: `None` fails with
    /// [`PoolError::LackPoolFunc`].
    ///
    /// ```
    /// use gosched::pool::{Pool, PoolError};
    ///
    /// let none: Option<fn(u32)> = None;
    /// let err = Pool::builder().build_with_optional_func(none).unwrap_err();
    /// assert_eq!(err, PoolError::LackPoolFunc);
    /// let pool = Pool::builder().build_with_optional_func(Some(|_: u32| {})).unwrap();
    /// assert_eq!(pool.invoke(1), Ok(()));
    /// ```
    pub fn build_with_optional_func<A, F>(self, f: Option<F>) -> Result<PoolWithFunc<A>, PoolError>
    where
        A: Send + 'static,
        F: Fn(A) + Send + Sync + 'static,
    {
        let f = f.ok_or(PoolError::LackPoolFunc)?;
        Ok(PoolWithFunc {
            inner: Arc::new(Owner {
                core: self.core_with_func(f)?,
            }),
        })
    }

    fn core(self) -> Result<Arc<Core<Job>>, PoolError> {
        let opts = self.options()?;
        Core::new(self.capacity, opts, Box::new(|job: Job| job()), true)
    }

    fn core_with_func<A, F>(self, f: F) -> Result<Arc<Core<A>>, PoolError>
    where
        A: Send + 'static,
        F: Fn(A) + Send + Sync + 'static,
    {
        let opts = self.options()?;
        let run = Box::new(move |a: A| {
            f(a);
            Ran::Completed
        });
        Core::new(self.capacity, opts, run, true)
    }
}

/// A task as [`Pool`] holds it.
type Job = Box<dyn FnOnce() -> Ran + Send>;

/// Owns a pool's engine for its handles: dropping the last handle releases it.
struct Owner<J: Send + 'static> {
    core: Arc<Core<J>>,
}

impl<J: Send + 'static> Drop for Owner<J> {
    fn drop(&mut self) {
        self.core.release();
    }
}

// ---- Waiting for a worker ---------------------------------------------------

/// How long a submit may wait, and what may stop it.
#[derive(Clone, Copy, Default)]
struct Limits<'a> {
    deadline: Option<Instant>,
    token: Option<&'a CancelToken>,
}

impl Limits<'_> {
    /// Waiting at most `d` (`Duration::MAX`: for ever, as in every gosched
    /// API).
    fn timeout(d: Duration) -> Self {
        Limits {
            deadline: Some(crate::sched::timers::deadline_after(d)),
            token: None,
        }
    }
}

/// What an acquire got: where to dispatch the task, or `Ok(None)` when a
/// worker took it from the offer.
type Got<'a, J> = Result<Option<(&'a Arc<Core<J>>, Slot<J>)>, PoolError>;

/// Wait for a worker or a slot, within `limits`, with the task in `offer`
/// on offer (see `Core::acquire`). Cancel-safe. A grant that arrives with the
/// timeout or the cancel wins over them: nothing granted is lost, and a task
/// taken by a worker is not reported as timed out.
async fn acquire<J: Send + 'static>(
    core: &Arc<Core<J>>,
    limits: Limits<'_>,
    offer: &mut Option<J>,
) -> Result<Option<Slot<J>>, PoolError> {
    let mut acq = core.acquire(offer);
    let mut sleep = pin!(limits.deadline.map(crate::sched::timers::sleep_until));
    let mut cancelled = pin!(limits.token.map(CancelToken::cancelled));
    std::future::poll_fn(|cx| {
        if limits.token.is_some_and(CancelToken::is_cancelled) {
            if let Some(r) = acq.withdraw() {
                return Poll::Ready(r);
            }
            core.stats.cancelled.fetch_add(1, Ordering::Relaxed);
            return Poll::Ready(Err(PoolError::Cancelled));
        }
        if let Poll::Ready(r) = std::pin::Pin::new(&mut acq).poll(cx) {
            return Poll::Ready(r);
        }
        if let Some(s) = sleep.as_mut().as_pin_mut() {
            if s.poll(cx).is_ready() {
                if let Some(r) = acq.withdraw() {
                    return Poll::Ready(r);
                }
                core.stats.timed_out.fetch_add(1, Ordering::Relaxed);
                return Poll::Ready(Err(PoolError::Timeout));
            }
        }
        if let Some(c) = cancelled.as_mut().as_pin_mut() {
            if c.poll(cx).is_ready() {
                if let Some(r) = acq.withdraw() {
                    return Poll::Ready(r);
                }
                core.stats.cancelled.fetch_add(1, Ordering::Relaxed);
                return Poll::Ready(Err(PoolError::Cancelled));
            }
        }
        Poll::Pending
    })
    .await
}

/// The blocking form: a worker at hand is taken without parking.
fn acquire_blocking<J: Send + 'static>(
    core: &Arc<Core<J>>,
    limits: Limits<'_>,
    offer: &mut Option<J>,
) -> Result<Option<Slot<J>>, PoolError> {
    if limits.token.is_some_and(CancelToken::is_cancelled) {
        core.stats.cancelled.fetch_add(1, Ordering::Relaxed);
        return Err(PoolError::Cancelled);
    }
    match core.try_acquire() {
        Err(PoolError::Overload) => crate::block_on(acquire(core, limits, offer)),
        r => r.map(Some),
    }
}

/// What follows an acquire.
enum Handed<J> {
    /// Dispatched, or taken by a worker from the offer.
    Done,
    /// The worker was found dead (unwound by its runtime's shutdown after
    /// it was handed out): acquire again.
    Again(J),
    Failed(PoolError, J),
}

/// Hand the task to what an acquire got. The task is in `offer` unless a
/// worker took it — then it is submitted, whatever the acquire said (a
/// timeout or a cancel that came after the take).
fn hand_over<J: Send + 'static>(offer: &mut Option<J>, got: Got<'_, J>) -> Handed<J> {
    let Some(job) = offer.take() else {
        return Handed::Done;
    };
    match got {
        Err(e) => Handed::Failed(e, job),
        Ok(None) => unreachable!("gosched::pool: a task taken by a worker came back"),
        Ok(Some((core, slot))) => match core.dispatch(slot, job) {
            Ok(()) => Handed::Done,
            Err(Dispatch::Failed(e, j)) => Handed::Failed(e, j),
            Err(Dispatch::Dead(j)) => Handed::Again(j),
        },
    }
}

/// Acquire (with the task on offer) and hand over until done.
fn submit_via<'a, J: Send + 'static>(
    job: J,
    mut acquire: impl FnMut(&mut Option<J>) -> Got<'a, J>,
) -> Result<(), (PoolError, J)> {
    let mut offer = Some(job);
    loop {
        let got = acquire(&mut offer);
        match hand_over(&mut offer, got) {
            Handed::Done => return Ok(()),
            Handed::Again(j) => offer = Some(j),
            Handed::Failed(e, j) => return Err((e, j)),
        }
    }
}

fn submit_blocking<J: Send + 'static>(
    core: &Arc<Core<J>>,
    job: J,
    limits: Limits<'_>,
) -> Result<(), PoolError> {
    submit_via(job, |offer| {
        Ok(acquire_blocking(core, limits, offer)?.map(|s| (core, s)))
    })
    .map_err(|(e, _)| e)
}

/// `submit_via` for async submits, which offer nothing: a submit future
/// dropped while it waits must leave its task unrun, and a task taken by a
/// worker could not be called back.
async fn submit_via_async<'a, J, F, Fut>(mut job: J, mut acquire: F) -> Result<(), PoolError>
where
    J: Send + 'static,
    F: FnMut() -> Fut,
    Fut: Future<Output = Got<'a, J>>,
{
    loop {
        let got = acquire().await;
        match hand_over(&mut Some(job), got) {
            Handed::Done => return Ok(()),
            Handed::Again(j) => job = j,
            Handed::Failed(e, _) => return Err(e),
        }
    }
}

async fn submit_async_inner<J: Send + 'static>(
    core: &Arc<Core<J>>,
    job: J,
    limits: Limits<'_>,
) -> Result<(), PoolError> {
    submit_via_async(job, || async move {
        Ok(acquire(core, limits, &mut None).await?.map(|s| (core, s)))
    })
    .await
}

/// Hand `job` over only if a worker is free or can be started now.
fn try_submit_inner<J: Send + 'static>(core: &Arc<Core<J>>, job: J) -> Result<(), (PoolError, J)> {
    submit_via(job, |_| {
        let slot = core.try_acquire().inspect_err(|e| {
            if *e == PoolError::Overload {
                core.stats.rejected.fetch_add(1, Ordering::Relaxed);
            }
        })?;
        Ok(Some((core, slot)))
    })
}

// ---- Cancellation -------------------------------------------------------------

/// Cancels pooled work that has not started (ants #237's context): a submit
/// still waiting for a worker returns [`PoolError::Cancelled`], and a task
/// handed to a worker but not yet started is skipped (its handle, if any,
/// resolves as cancelled). Work already running is not interrupted: it can
/// check [`is_cancelled`](Self::is_cancelled) itself. Clones share the token.
///
/// ```
/// use gosched::pool::{CancelToken, Pool, PoolError};
///
/// let pool = Pool::new(4).unwrap();
/// let token = CancelToken::new();
/// let t = token.clone();
/// let h = pool
///     .submit_with_result(move || {
///         while !t.is_cancelled() {
///             gosched::yield_now(); // a slice of long work
///         }
///         "stopped"
///     })
///     .unwrap();
/// token.cancel();
/// assert_eq!(h.join().unwrap(), "stopped");
/// assert_eq!(pool.submit_with_cancel(|| {}, &token), Err(PoolError::Cancelled));
/// ```
#[derive(Clone, Default)]
pub struct CancelToken {
    inner: Arc<TokenInner>,
}

#[derive(Default)]
struct TokenInner {
    cancelled: AtomicBool,
    waiters: Mutex<WaitList<()>>,
}

impl fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelToken")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

impl CancelToken {
    /// A token that has not fired.
    ///
    /// ```
    /// assert!(!gosched::pool::CancelToken::new().is_cancelled());
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Fire the token (idempotent).
    ///
    /// ```
    /// let token = gosched::pool::CancelToken::new();
    /// let clone = token.clone();
    /// token.cancel();
    /// token.cancel(); // idempotent
    /// assert!(clone.is_cancelled()); // clones share the token
    /// ```
    pub fn cancel(&self) {
        if self.inner.cancelled.swap(true, Ordering::AcqRel) {
            return;
        }
        let wakers = crate::loom::lock(&self.inner.waiters).notify_all();
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Whether it has fired.
    ///
    /// ```
    /// let token = gosched::pool::CancelToken::default();
    /// assert!(!token.is_cancelled());
    /// token.cancel();
    /// assert!(token.is_cancelled());
    /// ```
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::Acquire)
    }

    /// Completes once the token fires.
    ///
    /// ```
    /// let token = gosched::pool::CancelToken::new();
    /// let t = token.clone();
    /// let h = gosched::spawn(async move {
    ///     t.cancelled().await;
    ///     "woken"
    /// });
    /// token.cancel();
    /// assert_eq!(h.join().unwrap(), "woken");
    /// ```
    pub fn cancelled(&self) -> impl Future<Output = ()> + Send + '_ {
        // `cancel` sets the flag, then takes the list's lock to notify.
        self::core::Until::new(
            &self.inner.waiters,
            |list| list,
            crate::sched::wait::WaitReason::None,
            move |_| self.is_cancelled(),
        )
    }
}

// ---- The pools ------------------------------------------------------------------

/// What every pool type offers (ants' `poolCommon`).
macro_rules! common_methods {
    () => {
        /// Live workers, idle or busy (ants' `Running`).
        ///
        /// ```
        /// let pool = gosched::pool::Pool::new(4).unwrap();
        /// assert_eq!(pool.running(), 0);
        /// let gate = gosched::chan::<()>(0);
        /// let g = gate.clone();
        /// pool.submit(move || { g.recv(); }).unwrap();
        /// assert_eq!(pool.running(), 1); // busy until the gate closes
        /// gate.close().unwrap();
        /// ```
        pub fn running(&self) -> usize {
            self.inner.core.running()
        }

        /// `cap() - running()`, or -1 for an unlimited pool (ants' `Free`).
        ///
        /// ```
        /// use gosched::pool::Pool;
        ///
        /// let pool = Pool::new(4).unwrap();
        /// let gate = gosched::chan::<()>(0);
        /// let g = gate.clone();
        /// pool.submit(move || { g.recv(); }).unwrap();
        /// assert_eq!(pool.free(), 3);
        /// gate.close().unwrap();
        /// assert_eq!(Pool::new(0).unwrap().free(), -1); // unlimited
        /// ```
        pub fn free(&self) -> isize {
            self.inner.core.free()
        }

        /// The capacity, or -1 for an unlimited pool.
        ///
        /// ```
        /// use gosched::pool::Pool;
        ///
        /// assert_eq!(Pool::new(10).unwrap().cap(), 10);
        /// assert_eq!(Pool::new(-1).unwrap().cap(), -1); // unlimited
        /// ```
        pub fn cap(&self) -> isize {
            self.inner.core.cap()
        }

        /// Submitters blocked now (ants' `Waiting`).
        ///
        /// ```
        /// let pool = gosched::pool::Pool::new(1).unwrap();
        /// let gate = gosched::chan::<()>(0);
        /// let g = gate.clone();
        /// pool.submit(move || { g.recv(); }).unwrap(); // the only worker is busy
        /// let p = pool.clone();
        /// let submitter = gosched::go(move || p.submit(|| {}));
        /// while pool.waiting() == 0 { std::thread::yield_now(); } // it has queued
        /// assert_eq!(pool.waiting(), 1);
        /// gate.close().unwrap(); // the worker is handed to it
        /// submitter.join().unwrap().unwrap();
        /// assert_eq!(pool.waiting(), 0);
        /// ```
        pub fn waiting(&self) -> usize {
            self.inner.core.waiting()
        }

        /// Whether the pool has been released.
        ///
        /// ```
        /// let pool = gosched::pool::Pool::new(4).unwrap();
        /// assert!(!pool.is_closed());
        /// pool.release();
        /// assert!(pool.is_closed());
        /// pool.reboot().unwrap();
        /// assert!(!pool.is_closed());
        /// ```
        pub fn is_closed(&self) -> bool {
            self.inner.core.is_closed()
        }

        /// Change the capacity (ants' `Tune`). Ignored for unlimited and
        /// preallocated pools and for `n <= 0`. Growing hands the new slots to
        /// blocked submitters at once; shrinking is lazy: busy workers retire
        /// as they finish, and `running()` never exceeds the larger of the old
        /// and the new capacity.
        ///
        /// ```
        /// use gosched::pool::Pool;
        ///
        /// let pool = Pool::new(2).unwrap();
        /// pool.tune(8);
        /// assert_eq!(pool.cap(), 8);
        /// pool.tune(0); // ignored
        /// assert_eq!(pool.cap(), 8);
        /// let unlimited = Pool::new(0).unwrap();
        /// unlimited.tune(4); // ignored
        /// assert_eq!(unlimited.cap(), -1);
        /// ```
        pub fn tune(&self, n: isize) {
            self.inner.core.tune(n)
        }

        /// Close the pool: idle workers exit, blocked submitters get
        /// [`PoolError::Closed`], busy workers exit after their task, later
        /// submits fail with `Closed`. Does not wait (see
        /// [`release_timeout`](Self::release_timeout)).
        ///
        /// ```
        /// use gosched::pool::{Pool, PoolError};
        ///
        /// let pool = Pool::new(4).unwrap();
        /// pool.submit(|| {}).unwrap();
        /// pool.release();
        /// assert!(pool.is_closed());
        /// assert_eq!(pool.submit(|| {}), Err(PoolError::Closed));
        /// ```
        pub fn release(&self) {
            self.inner.core.release();
        }

        /// `release`, then wait up to `d` until every worker (and the purge
        /// goroutine) has exited: [`PoolError::Timeout`] if they have not
        /// ([`PoolError::Closed`] at once if the pool was already released).
        /// Parks the calling goroutine or thread; do not call it from one of
        /// the pool's own tasks (that worker cannot exit while it waits).
        ///
        /// ```
        /// use gosched::pool::{Pool, PoolError};
        /// use std::time::Duration;
        ///
        /// gosched::testing::run_virtual(|| {
        ///     let pool = Pool::new(2).unwrap();
        ///     pool.submit(|| gosched::time::sleep(Duration::from_secs(3))).unwrap();
        ///     // The busy worker exits after its task, 3 s from now: 1 s is not enough.
        ///     let r = pool.release_timeout(Duration::from_secs(1));
        ///     assert_eq!(r, Err(PoolError::Timeout));
        ///     pool.wait(); // the task was not interrupted
        ///     assert_eq!(pool.running(), 0);
        ///     let again = pool.release_timeout(Duration::from_secs(1));
        ///     assert_eq!(again, Err(PoolError::Closed)); // released already
        /// });
        /// ```
        pub fn release_timeout(&self, d: Duration) -> Result<(), PoolError> {
            if !self.inner.core.release() {
                return Err(PoolError::Closed);
            }
            crate::block_on(crate::time::timeout(d, self.inner.core.exited()))
                .map_err(|_| PoolError::Timeout)
        }

        /// Reopen a released pool (ants' `Reboot`); nothing on an open one.
        /// Call [`release_timeout`](Self::release_timeout) first if the old
        /// workers must be gone.
        ///
        /// ```
        /// use gosched::pool::{Pool, PoolError};
        ///
        /// let pool = Pool::new(2).unwrap();
        /// pool.release();
        /// assert_eq!(pool.submit(|| {}), Err(PoolError::Closed));
        /// pool.reboot().unwrap();
        /// assert_eq!(pool.submit(|| {}), Ok(()));
        /// ```
        pub fn reboot(&self) -> Result<(), PoolError> {
            self.inner.core.reboot()
        }

        /// Park until every task submitted so far has finished (a panicking
        /// task counts once its panic handler has returned) and its worker
        /// is back. Not from one of the pool's own tasks: that task is
        /// still in flight, so it would wait for itself.
        ///
        /// ```
        /// use std::sync::atomic::{AtomicUsize, Ordering};
        /// use std::sync::Arc;
        ///
        /// let pool = gosched::pool::Pool::new(2).unwrap();
        /// let done = Arc::new(AtomicUsize::new(0));
        /// for _ in 0..10 {
        ///     let done = Arc::clone(&done);
        ///     pool.submit(move || { done.fetch_add(1, Ordering::Relaxed); }).unwrap();
        /// }
        /// pool.wait();
        /// assert_eq!(done.load(Ordering::Relaxed), 10);
        /// ```
        pub fn wait(&self) {
            crate::block_on(self.inner.core.idle())
        }

        /// [`wait`](Self::wait) for async code.
        ///
        /// ```
        /// gosched::Runtime::new().unwrap().block_on(async {
        ///     let pool = gosched::pool::Pool::new(2).unwrap();
        ///     for _ in 0..4 {
        ///         pool.submit_async(|| {}).await.unwrap();
        ///     }
        ///     pool.wait_async().await;
        ///     assert_eq!(pool.stats().completed, 4);
        /// });
        /// ```
        pub fn wait_async(&self) -> impl Future<Output = ()> + Send + '_ {
            self.inner.core.idle()
        }

        /// Counters and wait-time percentiles.
        ///
        /// ```
        /// let pool = gosched::pool::Pool::new(2).unwrap();
        /// for _ in 0..3 {
        ///     pool.submit(|| {}).unwrap();
        /// }
        /// pool.submit(|| panic!("counted")).unwrap();
        /// pool.wait();
        /// let s = pool.stats();
        /// assert_eq!((s.submitted, s.completed, s.panicked), (4, 4, 1));
        /// ```
        pub fn stats(&self) -> PoolStats {
            let c = &self.inner.core;
            c.stats.snapshot(c.running(), c.waiting(), c.idle_workers())
        }
    };
}

/// A pool of reused goroutines running closures (ants' `Pool`). Cheap to
/// clone (clones are the same pool); dropping the last clone releases it.
///
/// ```
/// let pool = gosched::pool::Pool::new(4).unwrap();
/// let other = pool.clone(); // the same pool
/// let h = other.submit_with_result(|| 6 * 7).unwrap();
/// assert_eq!(h.join().unwrap(), 42);
/// drop(other);
/// assert!(!pool.is_closed()); // released only with the last clone
/// ```
#[derive(Clone)]
pub struct Pool {
    inner: Arc<Owner<Job>>,
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("cap", &self.cap())
            .field("running", &self.running())
            .field("waiting", &self.waiting())
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl Pool {
    /// A pool of at most `cap` workers (`cap <= 0`: unlimited) with ants'
    /// defaults.
    ///
    /// ```
    /// use gosched::pool::Pool;
    ///
    /// let pool = Pool::new(10).unwrap();
    /// assert_eq!(pool.cap(), 10);
    /// assert_eq!(Pool::new(0).unwrap().free(), -1); // unlimited
    /// ```
    pub fn new(cap: isize) -> Result<Pool, PoolError> {
        Builder::new().capacity(cap).build()
    }

    /// Settings beyond the capacity.
    ///
    /// ```
    /// let pool = gosched::pool::Pool::builder().capacity(4).nonblocking(true).build().unwrap();
    /// assert_eq!(pool.cap(), 4);
    /// ```
    pub fn builder() -> Builder {
        Builder::new()
    }

    /// Run `f` on a worker. Waits (parking the goroutine or thread) while the
    /// pool is full, unless it is non-blocking ([`PoolError::Overload`]).
    ///
    /// ```
    /// let pool = gosched::pool::Pool::new(2).unwrap();
    /// let ch = gosched::chan::<&str>(1);
    /// let tx = ch.clone();
    /// pool.submit(move || tx.send("ran on a worker").unwrap()).unwrap();
    /// assert_eq!(ch.recv(), Some("ran on a worker"));
    /// ```
    pub fn submit<F>(&self, f: F) -> Result<(), PoolError>
    where
        F: FnOnce() + Send + 'static,
    {
        submit_blocking(&self.inner.core, plain(f), Limits::default())
    }

    /// Run `f` only if a worker is free or can be started now; never waits.
    ///
    /// ```
    /// use gosched::pool::{Pool, PoolError};
    ///
    /// let pool = Pool::new(1).unwrap(); // a blocking pool
    /// let gate = gosched::chan::<()>(0);
    /// let g = gate.clone();
    /// assert_eq!(pool.try_submit(move || { g.recv(); }), Ok(())); // starts the worker
    /// assert_eq!(pool.try_submit(|| {}), Err(PoolError::Overload)); // does not wait
    /// gate.close().unwrap();
    /// ```
    pub fn try_submit<F>(&self, f: F) -> Result<(), PoolError>
    where
        F: FnOnce() + Send + 'static,
    {
        try_submit_inner(&self.inner.core, plain(f)).map_err(|(e, _)| e)
    }

    /// `submit`, waiting at most `d` for a worker ([`PoolError::Timeout`]).
    ///
    /// ```
    /// use gosched::pool::{Pool, PoolError};
    /// use std::time::Duration;
    ///
    /// gosched::testing::run_virtual(|| {
    ///     let pool = Pool::new(1).unwrap();
    ///     pool.submit(|| gosched::time::sleep(Duration::from_secs(10))).unwrap();
    ///     let r = pool.submit_timeout(|| {}, Duration::from_secs(1));
    ///     assert_eq!(r, Err(PoolError::Timeout)); // the worker is busy 9 s more
    ///     assert_eq!(pool.stats().timed_out, 1);
    ///     assert_eq!(pool.submit_timeout(|| {}, Duration::from_secs(60)), Ok(()));
    /// });
    /// ```
    pub fn submit_timeout<F>(&self, f: F, d: Duration) -> Result<(), PoolError>
    where
        F: FnOnce() + Send + 'static,
    {
        submit_blocking(&self.inner.core, plain(f), Limits::timeout(d))
    }

    /// `submit`, cancellable by `token`: while waiting for a worker
    /// ([`PoolError::Cancelled`]), and after, until a worker starts it (then
    /// it is skipped and counted as cancelled).
    ///
    /// ```
    /// use gosched::pool::{CancelToken, Pool, PoolError};
    ///
    /// let pool = Pool::new(1).unwrap();
    /// let gate = gosched::chan::<()>(0);
    /// let g = gate.clone();
    /// pool.submit(move || { g.recv(); }).unwrap(); // the only worker is busy
    /// let (p, token) = (pool.clone(), CancelToken::new());
    /// let t = token.clone();
    /// let submitter = gosched::go(move || p.submit_with_cancel(|| unreachable!(), &t));
    /// while pool.waiting() == 0 { std::thread::yield_now(); } // it waits for a worker
    /// token.cancel();
    /// assert_eq!(submitter.join().unwrap(), Err(PoolError::Cancelled));
    /// gate.close().unwrap();
    /// ```
    pub fn submit_with_cancel<F>(&self, f: F, token: &CancelToken) -> Result<(), PoolError>
    where
        F: FnOnce() + Send + 'static,
    {
        let t = token.clone();
        let job: Job = Box::new(move || {
            if t.is_cancelled() {
                return Ran::Cancelled;
            }
            f();
            Ran::Completed
        });
        let limits = Limits {
            deadline: None,
            token: Some(token),
        };
        submit_blocking(&self.inner.core, job, limits)
    }

    /// Run `f` on a worker and get its result through a
    /// [`JoinHandle`]: a panic in `f` reaches the handle
    /// (`JoinError::is_panic`, counted in `stats().panicked`, not passed to
    /// the panic handler).
    ///
    /// ```
    /// let pool = gosched::pool::Pool::new(4).unwrap();
    /// let h = pool.submit_with_result(|| 6 * 7).unwrap();
    /// assert_eq!(h.join().unwrap(), 42);
    /// let h = pool.submit_with_result(|| -> u32 { panic!("oops") }).unwrap();
    /// assert!(h.join().unwrap_err().is_panic());
    /// pool.wait();
    /// assert_eq!(pool.stats().panicked, 1);
    /// ```
    pub fn submit_with_result<F, T>(&self, f: F) -> Result<JoinHandle<T>, PoolError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let (job, handle) = with_result(f, None);
        submit_blocking(&self.inner.core, job, Limits::default())?;
        Ok(handle)
    }

    /// [`submit_with_result`](Self::submit_with_result) with a
    /// [`CancelToken`]: the handle resolves as cancelled
    /// (`JoinError::is_cancelled`) if the token fires before a worker starts
    /// the task.
    ///
    /// ```
    /// use gosched::pool::{CancelToken, Pool, PoolError};
    ///
    /// let pool = Pool::new(4).unwrap();
    /// let token = CancelToken::new();
    /// let h = pool.submit_with_result_cancel(|| 42, &token).unwrap();
    /// assert_eq!(h.join().unwrap(), 42); // the token did not fire
    /// token.cancel();
    /// let err = pool.submit_with_result_cancel(|| 0, &token).unwrap_err();
    /// assert_eq!(err, PoolError::Cancelled); // fired before a worker was found
    /// ```
    pub fn submit_with_result_cancel<F, T>(
        &self,
        f: F,
        token: &CancelToken,
    ) -> Result<JoinHandle<T>, PoolError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let (job, handle) = with_result(f, Some(token.clone()));
        let limits = Limits {
            deadline: None,
            token: Some(token),
        };
        submit_blocking(&self.inner.core, job, limits)?;
        Ok(handle)
    }

    /// `submit` for async code: waits for a worker without blocking the
    /// thread (back-pressure for producers that are tasks).
    ///
    /// ```
    /// gosched::Runtime::new().unwrap().block_on(async {
    ///     let pool = gosched::pool::Pool::new(2).unwrap();
    ///     let done = gosched::chan::<u32>(10);
    ///     for i in 0..10 {
    ///         let d = done.clone();
    ///         pool.submit_async(move || d.send(i).unwrap()).await.unwrap();
    ///     }
    ///     pool.wait_async().await;
    ///     assert_eq!(done.len(), 10);
    /// });
    /// ```
    pub async fn submit_async<F>(&self, f: F) -> Result<(), PoolError>
    where
        F: FnOnce() + Send + 'static,
    {
        submit_async_inner(&self.inner.core, plain(f), Limits::default()).await
    }

    /// Pool a future: a worker goroutine drives it to completion (its
    /// blocking calls and `.await`s park that worker), and its output comes
    /// back through the handle. Waits like [`submit`](Self::submit).
    ///
    /// ```
    /// let pool = gosched::pool::Pool::new(2).unwrap();
    /// let h = pool
    ///     .submit_task(async {
    ///         let inner = gosched::spawn(async { 20 });
    ///         inner.await.unwrap() + 22
    ///     })
    ///     .unwrap();
    /// assert_eq!(h.join().unwrap(), 42);
    /// ```
    pub fn submit_task<Fut>(&self, fut: Fut) -> Result<JoinHandle<Fut::Output>, PoolError>
    where
        Fut: Future + Send + 'static,
        Fut::Output: Send + 'static,
    {
        self.submit_with_result(move || crate::block_on(fut))
    }

    /// [`submit_task`](Self::submit_task) for async code.
    ///
    /// ```
    /// gosched::Runtime::new().unwrap().block_on(async {
    ///     let pool = gosched::pool::Pool::new(2).unwrap();
    ///     let h = pool.submit_task_async(async { 6 * 7 }).await.unwrap();
    ///     assert_eq!(h.await.unwrap(), 42);
    /// });
    /// ```
    pub async fn submit_task_async<Fut>(
        &self,
        fut: Fut,
    ) -> Result<JoinHandle<Fut::Output>, PoolError>
    where
        Fut: Future + Send + 'static,
        Fut::Output: Send + 'static,
    {
        let (job, handle) = with_result(move || crate::block_on(fut), None);
        submit_async_inner(&self.inner.core, job, Limits::default()).await?;
        Ok(handle)
    }

    common_methods!();
}

fn plain<F: FnOnce() + Send + 'static>(f: F) -> Job {
    Box::new(move || {
        f();
        Ran::Completed
    })
}

fn with_result<F, T>(f: F, token: Option<CancelToken>) -> (Job, JoinHandle<T>)
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let (completer, handle) = result::pair();
    let job: Job = Box::new(move || {
        if token.as_ref().is_some_and(CancelToken::is_cancelled) {
            // Dropping the completer cancels the handle.
            return Ran::Cancelled;
        }
        match catch_unwind(AssertUnwindSafe(f)) {
            Ok(v) => {
                completer.complete(Ok(v));
                Ran::Completed
            }
            Err(payload) => {
                if crate::coro::force_unwinding() {
                    // The worker is being cancelled: not the task's panic.
                    std::panic::resume_unwind(payload);
                }
                completer.complete(Err(payload));
                Ran::Panicked
            }
        }
    });
    (job, handle)
}

/// A pool whose workers all run one function on the arguments they are given
/// (ants' `PoolWithFunc` / `PoolWithFuncGeneric`): `invoke(arg)` costs no
/// allocation for the task.
///
/// ```
/// use gosched::pool::PoolWithFunc;
///
/// let out = gosched::chan::<u64>(10);
/// let o = out.clone();
/// let pool = PoolWithFunc::new(4, move |n: u64| o.send(n * n).unwrap()).unwrap();
/// for n in 0..10 {
///     pool.invoke(n).unwrap();
/// }
/// pool.wait();
/// let sum: u64 = (0..10).map(|_| out.recv().unwrap()).sum();
/// assert_eq!(sum, 285);
/// ```
pub struct PoolWithFunc<A: Send + 'static> {
    inner: Arc<Owner<A>>,
}

impl<A: Send + 'static> Clone for PoolWithFunc<A> {
    fn clone(&self) -> Self {
        PoolWithFunc {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<A: Send + 'static> fmt::Debug for PoolWithFunc<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolWithFunc")
            .field("cap", &self.cap())
            .field("running", &self.running())
            .field("waiting", &self.waiting())
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl<A: Send + 'static> PoolWithFunc<A> {
    /// A pool of at most `cap` workers (`cap <= 0`: unlimited) running `f`.
    ///
    /// ```
    /// let pool = gosched::pool::PoolWithFunc::new(8, |s: String| assert!(!s.is_empty())).unwrap();
    /// assert_eq!(pool.cap(), 8);
    /// pool.invoke("hello".to_string()).unwrap();
    /// pool.wait();
    /// assert_eq!(pool.stats().completed, 1);
    /// ```
    pub fn new<F>(cap: isize, f: F) -> Result<Self, PoolError>
    where
        F: Fn(A) + Send + Sync + 'static,
    {
        Builder::new().capacity(cap).build_with_func(f)
    }

    /// Run the pool's function on `arg`; waits like [`Pool::submit`].
    ///
    /// ```
    /// use gosched::pool::PoolWithFunc;
    ///
    /// let out = gosched::chan::<u32>(1);
    /// let o = out.clone();
    /// let pool = PoolWithFunc::new(2, move |n: u32| o.send(n + 1).unwrap()).unwrap();
    /// pool.invoke(41).unwrap();
    /// assert_eq!(out.recv(), Some(42));
    /// ```
    pub fn invoke(&self, arg: A) -> Result<(), PoolError> {
        submit_blocking(&self.inner.core, arg, Limits::default())
    }

    /// `invoke` only if a worker is free or can be started now.
    ///
    /// ```
    /// use gosched::pool::{PoolError, PoolWithFunc};
    ///
    /// // Each call waits for the gate it is given to close.
    /// let pool = PoolWithFunc::new(1, |gate: gosched::Chan<()>| { gate.recv(); }).unwrap();
    /// let gate = gosched::chan(0);
    /// assert_eq!(pool.try_invoke(gate.clone()), Ok(())); // starts the only worker
    /// assert_eq!(pool.try_invoke(gosched::chan(0)), Err(PoolError::Overload));
    /// gate.close().unwrap();
    /// ```
    pub fn try_invoke(&self, arg: A) -> Result<(), PoolError> {
        try_submit_inner(&self.inner.core, arg).map_err(|(e, _)| e)
    }

    /// `invoke`, waiting at most `d` for a worker.
    ///
    /// ```
    /// use gosched::pool::{PoolError, PoolWithFunc};
    /// use std::time::Duration;
    ///
    /// gosched::testing::run_virtual(|| {
    ///     let pool = PoolWithFunc::new(1, gosched::time::sleep).unwrap();
    ///     pool.invoke(Duration::from_secs(10)).unwrap(); // the only worker: busy 10 s
    ///     let r = pool.invoke_timeout(Duration::ZERO, Duration::from_secs(1));
    ///     assert_eq!(r, Err(PoolError::Timeout));
    /// });
    /// ```
    pub fn invoke_timeout(&self, arg: A, d: Duration) -> Result<(), PoolError> {
        submit_blocking(&self.inner.core, arg, Limits::timeout(d))
    }

    /// `invoke` for async code.
    ///
    /// ```
    /// use gosched::pool::PoolWithFunc;
    ///
    /// gosched::Runtime::new().unwrap().block_on(async {
    ///     let out = gosched::chan::<u32>(3);
    ///     let o = out.clone();
    ///     let pool = PoolWithFunc::new(2, move |n: u32| o.send(n).unwrap()).unwrap();
    ///     for n in 1..=3 {
    ///         pool.invoke_async(n).await.unwrap();
    ///     }
    ///     pool.wait_async().await;
    ///     assert_eq!(out.len(), 3);
    /// });
    /// ```
    pub async fn invoke_async(&self, arg: A) -> Result<(), PoolError> {
        submit_async_inner(&self.inner.core, arg, Limits::default()).await
    }

    common_methods!();
}
