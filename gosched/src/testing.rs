//! Helpers for tests: virtual time (Go 1.25's `testing/synctest`, tokio's
//! `time::pause`).
//!
//! [`run_virtual`] runs a closure as the main goroutine of a fresh runtime
//! whose clock moves only when every goroutine and task in it is parked,
//! and then straight to the earliest timer. A test of a one-hour timeout
//! takes microseconds of real time, and what it observes does not depend on
//! how loaded the machine is. `#[gosched::test(virtual_time)]` does the same
//! for a test function.
//!
//! ```
//! use std::time::Duration;
//! use gosched::time;
//!
//! let timed_out = gosched::testing::run_virtual(|| {
//!     let reply = gosched::chan::<u32>(0);
//!     let r = reply.clone();
//!     gosched::go(move || {
//!         time::sleep(Duration::from_secs(30)); // a slow server
//!         let _ = r.send(7);
//!     });
//!     let start = time::now();
//!     let got = reply.recv_timeout(Duration::from_secs(10));
//!     (got.is_err(), time::since(start))
//! });
//! assert_eq!(timed_out, (true, Duration::from_secs(10)));
//! ```
//!
//! # What moves the clock, and what it cannot see
//!
//! Every gosched timer follows it: [`time::sleep`](crate::time::sleep) and
//! `sleep_async`, channel and `select!` timeouts, `after`, `tick`, `Timer`,
//! socket deadlines and timeouts, the pool's expiry. Read it with
//! [`time::now`](crate::time::now) and [`time::since`](crate::time::since);
//! `std::time::Instant::now()` keeps telling real time.
//!
//! The clock stands still while anything runs: a goroutine or task, a
//! [`syscall`](crate::syscall) (on the M or on the blocking pool), a
//! socket event the kernel already has. It cannot see a plain
//! `std::thread` that is about to wake a goroutine: to the runtime that
//! goroutine is parked, and a timeout pending beside it fires at once. Run
//! blocking work through `syscall` instead. A runtime in which everything
//! stays blocked with no timer pending for a second of real time is
//! reported: `run_virtual` panics with the goroutine dump, so the test
//! fails instead of hanging. A pending timer always moves the clock, so
//! goroutines blocked for good beside a periodic timer (a `tick`, a pool's
//! expiry purge) make the clock run on through virtual years instead (as
//! in Go's `synctest`): release the pool, stop the ticker.
//!
//! Goroutines run on one P unless the test asks for more
//! (`#[gosched::test(virtual_time, procs = 4)]`, or a runtime built with
//! [`Builder::virtual_time`](crate::Builder::virtual_time)): with one P,
//! the order in which they run is also the same from run to run.

use std::future::Future;
use std::time::Duration;

use crate::{Builder, JoinError, Runtime};

/// A test's runtime gets this long to shut down; a goroutine that never
/// blocks keeps its M, and then the runtime is left running detached.
const SHUTDOWN: Duration = Duration::from_secs(10);

/// The runtime `run_virtual` builds: virtual time on one P.
fn virtual_runtime() -> Runtime {
    Builder::new()
        .procs(1)
        .virtual_time(true)
        .thread_name("gosched-virtual")
        .build()
        .expect("gosched::testing: cannot build a virtual-time runtime")
}

/// Run `f` as the main goroutine of a new runtime with virtual time (see
/// the [module docs](self)) and return what it returns; the runtime shuts
/// down after.
///
/// # Panics
/// With `f`'s own panic, if it panics; and with the stall report (what every
/// goroutine waits on) if the runtime stays blocked with no timer pending.
///
/// ```
/// use std::time::{Duration, Instant};
/// let real = Instant::now();
/// let waited = gosched::testing::run_virtual(|| {
///     let t = gosched::time::now();
///     gosched::time::sleep(Duration::from_secs(3600));
///     gosched::time::since(t)
/// });
/// assert_eq!(waited, Duration::from_secs(3600)); // on the virtual clock
/// assert!(real.elapsed() < Duration::from_secs(3600)); // in real time: far less
/// ```
pub fn run_virtual<F, T>(f: F) -> T
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let rt = virtual_runtime();
    let h = rt.go(f);
    finish(rt, |rt| rt.block_on_watched(h))
}

/// [`run_virtual`] for a future: `fut` runs as a task of a new runtime
/// with virtual time.
///
/// ```
/// use std::time::Duration;
/// let waited = gosched::testing::run_virtual_async(async {
///     let t = gosched::time::now();
///     gosched::time::sleep_async(Duration::from_secs(24 * 3600)).await;
///     gosched::time::since(t)
/// });
/// assert_eq!(waited, Duration::from_secs(24 * 3600));
/// ```
pub fn run_virtual_async<F>(fut: F) -> F::Output
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let rt = virtual_runtime();
    let h = rt.spawn(fut);
    finish(rt, |rt| rt.block_on_watched(h))
}

/// Wait for the test's goroutine or task (or the stall report), shut the
/// runtime down, and hand back its result or raise its panic.
pub(crate) fn finish<T>(
    rt: Runtime,
    wait: impl FnOnce(&Runtime) -> Result<Result<T, JoinError>, std::sync::Arc<str>>,
) -> T {
    let out = wait(&rt);
    rt.shutdown_timeout(SHUTDOWN);
    match out {
        Ok(out) => unwrap_join("the test's goroutine was cancelled", out),
        Err(report) => panic!("{report}"),
    }
}

/// The value of a joined main or test goroutine: its own panic raised
/// again, a cancellation as a panic that says `what`.
pub(crate) fn unwrap_join<T>(what: &str, r: Result<T, JoinError>) -> T {
    match r {
        Ok(v) => v,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => panic!("{what}: {e}"),
    }
}
