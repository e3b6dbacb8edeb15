//! Runtimes: `Builder`, `Runtime`, the lazily started global runtime, and
//! introspection (`num_goroutine`, `procs`).
//!
//! A runtime starts no thread until there is work: Ms are created on demand by
//! `wakep` (at most one per P plus the ones blocked elsewhere, capped by
//! `max_threads`), and park when idle. Dropping a `Runtime` stops its Ms, cancels
//! every goroutine and task still alive (unwinding parked goroutines' stacks) and
//! returns their stacks.

use std::future::Future;
use std::time::Duration;

use crate::coro::{self, Go, SpawnError};
use crate::sched::config::{default_procs, Config};
use crate::sched::context::{self, EnterGuard};
use crate::sched::{task::JoinHandle, Shared};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

pub use crate::sched::config::{DEFAULT_MAX_THREADS, DEFAULT_THREAD_KEEP_ALIVE};
pub use crate::sched::stats::{PState, ProcStats, StackStats, Stats};
pub use crate::trace::TraceSummary;

/// Configures and builds a [`Runtime`].
///
/// ```
/// let rt = gosched::Builder::new().procs(2).build().unwrap();
/// let h = rt.go(|| 1 + 1);
/// assert_eq!(rt.block_on(h).unwrap(), 2);
/// ```
#[derive(Debug, Clone)]
pub struct Builder {
    procs: Option<usize>,
    max_procs: Option<usize>,
    stack_size: usize,
    max_threads: usize,
    name: String,
    sysmon: bool,
    deadlock_detection: bool,
    thread_keep_alive: Option<Duration>,
    virtual_time: bool,
}

impl Default for Builder {
    fn default() -> Self {
        Builder::new()
    }
}

impl Builder {
    /// A builder with the defaults: Ps from `GOSCHED_MAXPROCS`, the cgroup CPU
    /// quota or the CPU count (see [`procs`](Self::procs)),
    /// [`DEFAULT_STACK_SIZE`](crate::coro::DEFAULT_STACK_SIZE) stacks,
    /// [`DEFAULT_MAX_THREADS`] threads, sysmon and deadlock detection on, the
    /// real clock. Nothing starts until [`build`](Self::build).
    ///
    /// ```
    /// let rt = gosched::Builder::new().build().unwrap();
    /// assert!(rt.procs() >= 1);
    /// assert_eq!(rt.block_on(rt.go(|| 2 + 2)).unwrap(), 4);
    /// ```
    pub fn new() -> Self {
        Builder {
            procs: None,
            max_procs: None,
            stack_size: crate::stack::DEFAULT_STACK_SIZE,
            max_threads: DEFAULT_MAX_THREADS,
            name: "gosched".into(),
            sysmon: crate::sched::config::default_sysmon(),
            deadlock_detection: true,
            thread_keep_alive: Some(DEFAULT_THREAD_KEEP_ALIVE),
            virtual_time: false,
        }
    }

    /// Number of Ps (Go's GOMAXPROCS). Default: `GOSCHED_MAXPROCS`, else the
    /// CPU quota of the process's cgroups rounded up (at least 2, at most the
    /// CPUs it may run on; sysmon re-reads it about once a second and
    /// resizes), else the CPU count. Setting it here (or by the environment,
    /// or [`Runtime::set_procs`]) stops the quota tracking.
    ///
    /// `0` is taken as `1`.
    ///
    /// ```
    /// let rt = gosched::Builder::new().procs(3).build().unwrap();
    /// assert_eq!(rt.procs(), 3);
    /// assert_eq!(gosched::Builder::new().procs(0).build().unwrap().procs(), 1);
    /// ```
    pub fn procs(mut self, n: usize) -> Self {
        self.procs = Some(n.max(1));
        self
    }

    /// Most Ps [`Runtime::set_procs`] may make live (they are allocated at
    /// build, ~2.5 KiB each). Default: the larger of `procs` and the CPU
    /// count.
    ///
    /// ```
    /// let rt = gosched::Builder::new().procs(1).max_procs(4).build().unwrap();
    /// assert_eq!(rt.set_procs(8), 1); // returns the previous count
    /// assert_eq!(rt.procs(), 4); // capped at max_procs
    /// ```
    pub fn max_procs(mut self, n: usize) -> Self {
        self.max_procs = Some(n.max(1));
        self
    }

    /// Default goroutine stack size in bytes (reserved address space; see
    /// [`DEFAULT_STACK_SIZE`](crate::coro::DEFAULT_STACK_SIZE)).
    ///
    /// Checked by [`build`](Self::build): a size over 1 GiB fails it with
    /// `InvalidInput`.
    ///
    /// ```
    /// let rt = gosched::Builder::new().stack_size(4 << 20).build().unwrap();
    /// assert!(4 << 20 > gosched::coro::DEFAULT_STACK_SIZE);
    /// // A 1 MiB array on the stack: too much for the default, fine in 4 MiB.
    /// let h = rt.go(|| {
    ///     let buf = std::hint::black_box([1u8; 1 << 20]);
    ///     buf.iter().map(|&b| usize::from(b)).sum::<usize>()
    /// });
    /// assert_eq!(rt.block_on(h).unwrap(), 1 << 20);
    /// ```
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = bytes;
        self
    }

    /// Most OS threads (Ms) the runtime may start (Go: 10,000).
    ///
    /// The runtime always allows at least one more than
    /// [`max_procs`](Self::max_procs), so a smaller value is raised to that.
    ///
    /// ```
    /// let rt = gosched::Builder::new().procs(2).max_procs(2).max_threads(4).build().unwrap();
    /// let hs: Vec<_> = (0..8).map(|i| rt.go(move || i * 2)).collect();
    /// let sum: i32 = hs.into_iter().map(|h| rt.block_on(h).unwrap()).sum();
    /// assert_eq!(sum, 56);
    /// assert!(rt.threads() <= 4);
    /// ```
    pub fn max_threads(mut self, n: usize) -> Self {
        self.max_threads = n.max(1);
        self
    }

    /// Prefix of the M threads' names.
    ///
    /// Ms are named `{name}-m{n}`; sysmon is `{name}-sysmon`. Default: `gosched`.
    /// An async task runs on its M's thread; a goroutine is a virtual thread of
    /// its own (`std::thread::current()` in it is the goroutine's, unnamed).
    ///
    /// ```
    /// let rt = gosched::Builder::new().thread_name("worker").build().unwrap();
    /// let name = rt.block_on(rt.spawn(async { std::thread::current().name().map(String::from) }));
    /// assert!(name.unwrap().unwrap().starts_with("worker-m"));
    /// ```
    pub fn thread_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Run this runtime's timers on a virtual clock (default: off), for
    /// tests: the clock stands still while anything runs and, once every
    /// goroutine and task is parked, jumps to the earliest timer, so a test
    /// of a one-hour timeout takes microseconds and runs the same way every
    /// time (Go's `testing/synctest`, tokio's `time::pause`). Sleeps,
    /// channel and select timeouts, `after`/`tick`/`Timer`, socket
    /// deadlines and the pool's expiry all follow it; read it with
    /// `gosched::time::now()`. `gosched::testing::run_virtual`
    /// and `#[gosched::test(virtual_time)]` build such a runtime for one
    /// test.
    ///
    /// The clock stays still while a [`syscall`](crate::syscall) runs. It
    /// cannot see a plain thread that is about to wake a goroutine: to the
    /// runtime that goroutine is parked, and a timeout pending beside it
    /// fires at once. A runtime where everything stays blocked with no
    /// timer pending for a second (real time) reports it on stderr with
    /// the goroutine dump (`run_virtual` fails the test with it). Turns
    /// off [`deadlock_detection`](Self::deadlock_detection), which that
    /// report replaces.
    ///
    /// ```
    /// use std::time::Duration;
    /// let rt = gosched::Builder::new().virtual_time(true).build().unwrap();
    /// let took = rt.block_on(rt.go(|| {
    ///     let start = gosched::time::now();
    ///     gosched::time::sleep(Duration::from_secs(3600));
    ///     gosched::time::since(start)
    /// }));
    /// assert_eq!(took.unwrap(), Duration::from_secs(3600)); // in microseconds of real time
    /// ```
    pub fn virtual_time(mut self, on: bool) -> Self {
        self.virtual_time = on;
        self
    }

    /// Go's `checkdead` (default: on): when a thread waits in `block_on` on
    /// this runtime and provably nothing can ever wake it — every goroutine
    /// and task parked, no timer pending, no M in a poll or a syscall, no
    /// blocking call running, and no thread in the process but the
    /// runtime's own and the waiting ones — print "fatal error: all
    /// goroutines are asleep - deadlock!" with the counts and exit with
    /// status 2, instead of hanging. Any other thread in the process (one
    /// that might hold a sender or a waker) turns the report off, so it
    /// never fires when it could be wrong. Needs sysmon.
    ///
    /// ```
    /// // Off: a program whose other threads never hold a sender can still hang
    /// // instead of exiting with status 2 (useful under a debugger).
    /// let rt = gosched::Builder::new().deadlock_detection(false).build().unwrap();
    /// assert_eq!(rt.block_on(rt.go(|| 6 * 7)).unwrap(), 42);
    /// ```
    pub fn deadlock_detection(mut self, on: bool) -> Self {
        self.deadlock_detection = on;
        self
    }

    /// Run sysmon, the thread that hands Ps off from slow syscalls and long
    /// polls and asks long time slices to yield (default: on, unless the
    /// environment says `GOSCHED_SYSMON=0`). Turning it off is for measuring
    /// what it costs: without it one never-yielding goroutine or task holds
    /// its P for good, as in tokio.
    ///
    /// ```
    /// let rt = gosched::Builder::new().procs(1).sysmon(false).build().unwrap();
    /// // Runs as usual, but nothing would preempt a goroutine that never blocks.
    /// let h = rt.go(|| (0..1000u64).sum::<u64>());
    /// assert_eq!(rt.block_on(h).unwrap(), 499_500);
    /// ```
    pub fn sysmon(mut self, on: bool) -> Self {
        self.sysmon = on;
        self
    }

    /// How long an idle M (OS thread) waits for work before it exits
    /// (default [`DEFAULT_THREAD_KEEP_ALIVE`], 10 s): threads started for
    /// goroutines blocked in [`syscall`](crate::syscall) go away once the
    /// calls are over, so the thread count grows with blocked calls and
    /// shrinks back. An M never exits while a goroutine is locked to it
    /// ([`lock_os_thread`]), nor below one M
    /// per P.
    /// The blocking pool's threads (see [`syscall`](crate::syscall)) exit
    /// after the same time without work. `None` keeps every M and pool
    /// thread for the runtime's life (Go keeps its Ms). (Ms exit on Linux
    /// only: elsewhere they never do.)
    ///
    /// ```
    /// use std::time::Duration;
    /// let rt = gosched::Builder::new()
    ///     .thread_keep_alive(Some(Duration::from_secs(1)))
    ///     .build()
    ///     .unwrap();
    /// rt.block_on(rt.go(|| gosched::syscall(|| std::env::temp_dir().exists()))).unwrap();
    /// assert!(rt.threads() >= 1); // the M that ran it, until it idles for 1 s
    /// let keep_all = gosched::Builder::new().thread_keep_alive(None).build().unwrap();
    /// assert_eq!(keep_all.block_on(keep_all.go(|| 1)).unwrap(), 1);
    /// ```
    pub fn thread_keep_alive(mut self, keep: Option<Duration>) -> Self {
        self.thread_keep_alive = keep;
        self
    }

    /// Build the runtime. No thread starts until it gets work.
    ///
    /// # Errors
    /// `InvalidInput` if the [stack size](Self::stack_size) is over 1 GiB.
    ///
    /// ```
    /// let rt = gosched::Builder::new().procs(2).build().unwrap();
    /// assert_eq!(rt.procs(), 2);
    /// let err = gosched::Builder::new().stack_size(usize::MAX).build().unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    /// ```
    pub fn build(self) -> std::io::Result<Runtime> {
        let (procs, procs_set) = match self.procs {
            Some(n) => (n, true),
            None => default_procs(),
        };
        let max_procs = self
            .max_procs
            .unwrap_or_else(|| crate::sched::config::default_max_procs(procs))
            .max(procs);
        crate::stack::round_size(self.stack_size)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        let rt = Runtime {
            shared: Shared::new(Config {
                procs,
                max_procs,
                procs_set,
                stack_size: self.stack_size,
                max_threads: self.max_threads.max(max_procs + 1),
                name: self.name,
                sysmon: self.sysmon,
                deadlock_detection: self.deadlock_detection && !self.virtual_time,
                thread_keep_alive: self.thread_keep_alive,
                virtual_time: self.virtual_time,
            }),
            stopped: false,
        };
        if self.virtual_time {
            // Start an M now: once idle it is the timer sleeper that moves
            // the clock and reports a stall, also for a test whose body
            // never spawns anything (`sched/vtime.rs`).
            drop(rt.spawn(async {}));
        }
        Ok(rt)
    }
}

/// A gosched runtime: Ps, Ms, queues, timers and stacks.
///
/// Goroutines ([`go`](Runtime::go)) and async tasks ([`spawn`](Runtime::spawn))
/// started on it run until they finish or it is dropped or
/// [shut down](Runtime::shutdown_timeout), which cancels what is still alive.
///
/// ```
/// let rt = gosched::Runtime::new().unwrap();
/// let g = rt.go(|| 40); // a goroutine
/// let t = rt.spawn(async { 2 }); // an async task
/// let sum = rt.block_on(async { g.await.unwrap() + t.await.unwrap() });
/// assert_eq!(sum, 42);
/// assert!(rt.shutdown_timeout(std::time::Duration::from_secs(5)));
/// ```
pub struct Runtime {
    shared: Arc<Shared>,
    /// Set once shut down, so that `Drop` does not do it again.
    stopped: bool,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("procs", &self.shared.nprocs())
            .finish()
    }
}

impl Runtime {
    /// A runtime with the default configuration.
    ///
    /// # Errors
    /// As [`Builder::build`] (not with the defaults).
    ///
    /// ```
    /// let rt = gosched::Runtime::new().unwrap();
    /// assert_eq!(rt.block_on(rt.spawn(async { "hi" })).unwrap(), "hi");
    /// ```
    pub fn new() -> std::io::Result<Runtime> {
        Builder::new().build()
    }

    /// Start a goroutine on this runtime.
    ///
    /// # Panics
    /// If no stack can be reserved for it; [`try_go`](Runtime::try_go) returns
    /// the error instead.
    ///
    /// ```
    /// let rt = gosched::Runtime::new().unwrap();
    /// let h = rt.go(|| {
    ///     gosched::time::sleep(std::time::Duration::from_millis(1)); // parks this goroutine only
    ///     "done"
    /// });
    /// assert_eq!(rt.block_on(h).unwrap(), "done");
    /// ```
    #[track_caller]
    pub fn go<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        Go::new()
            .spawn_on(&self.shared, f, std::panic::Location::caller())
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Start a goroutine, or say why not.
    ///
    /// ```
    /// let rt = gosched::Runtime::new().unwrap();
    /// let h = rt.try_go(|| 6 * 7).expect("no stack could be reserved");
    /// assert_eq!(rt.block_on(h).unwrap(), 42);
    /// ```
    #[track_caller]
    pub fn try_go<F, T>(&self, f: F) -> Result<JoinHandle<T>, SpawnError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        Go::new().spawn_on(&self.shared, f, std::panic::Location::caller())
    }

    /// Start an async task on this runtime.
    ///
    /// ```
    /// let rt = gosched::Runtime::new().unwrap();
    /// let h = rt.spawn(async {
    ///     gosched::time::sleep_async(std::time::Duration::from_millis(1)).await;
    ///     1 + 1
    /// });
    /// assert_eq!(rt.block_on(h).unwrap(), 2);
    /// ```
    #[track_caller]
    pub fn spawn<F>(&self, fut: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let info = crate::sched::task::SpawnInfo::task(std::panic::Location::caller());
        self.shared.spawn_with_id(|_| fut, info)
    }

    /// Run `fut` to completion on the calling thread, with this runtime as the
    /// current one (free functions like `go` and `spawn` inside it use it). Inside
    /// a goroutine only the goroutine blocks.
    ///
    /// # Panics
    /// When called from inside an async task (use `.await`), and inside a
    /// goroutine of *another* runtime: the future would run on that one (its
    /// `go`/`spawn` calls included), so spawn it on this runtime instead
    /// (`rt.spawn(fut)` / `rt.go(f)`) and join the handle.
    ///
    /// ```
    /// let rt = gosched::Runtime::new().unwrap();
    /// let out = rt.block_on(async {
    ///     // The free functions start these on `rt`.
    ///     let a = gosched::spawn(async { 20 });
    ///     let b = gosched::go(|| 22);
    ///     a.await.unwrap() + b.await.unwrap()
    /// });
    /// assert_eq!(out, 42);
    /// ```
    pub fn block_on<F: Future>(&self, fut: F) -> F::Output {
        if coro::in_goroutine() {
            let ours = context::current().is_some_and(|c| Arc::ptr_eq(&c.shared, &self.shared));
            assert!(
                ours,
                "gosched: Runtime::block_on called inside a goroutine of another runtime: the \
                 future would run there, not on this runtime; use rt.spawn(fut) or rt.go(f) and \
                 join the handle instead"
            );
            return coro::block_on(fut);
        }
        let _enter = EnterGuard::new(&self.shared);
        // A plain thread waiting on this runtime: counted for deadlock
        // detection (`sched/checkdead.rs`).
        struct Waiting<'a>(&'a Shared);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.block_on_threads.fetch_sub(1, SeqCst);
            }
        }
        self.shared.block_on_threads.fetch_add(1, SeqCst);
        let _waiting = Waiting(&self.shared);
        if self.shared.virtual_clock.is_some() {
            // A virtual clock stands still while this thread polls, and
            // from a wake until its poll begins (`sched/vtime.rs`).
            use crate::sched::vtime::{BusyGuard, WakeCount};
            struct Finish(Option<Arc<WakeCount>>);
            impl Drop for Finish {
                fn drop(&mut self) {
                    if let Some(w) = &self.0 {
                        w.finish();
                    }
                }
            }
            let mut fut = std::pin::pin!(fut);
            let mut counter = Finish(None);
            return coro::block_on(std::future::poll_fn(|cx| {
                let _busy = BusyGuard::poll(&self.shared);
                let wc = counter
                    .0
                    .get_or_insert_with(|| WakeCount::new(&self.shared, cx.waker()));
                wc.begin_poll(cx.waker());
                let waker = std::task::Waker::from(wc.clone());
                fut.as_mut()
                    .poll(&mut std::task::Context::from_waker(&waker))
            }));
        }
        coro::block_on(fut)
    }

    /// `block_on(fut)`, failing with the stall report if this runtime has a
    /// virtual clock and stalls (`sched/vtime.rs`): `Err(report)`.
    pub(crate) fn block_on_watched<F: Future>(&self, fut: F) -> Result<F::Output, Arc<str>> {
        let shared = self.shared.clone();
        let mut fut = std::pin::pin!(fut);
        self.block_on(std::future::poll_fn(move |cx| {
            if let std::task::Poll::Ready(v) = fut.as_mut().poll(cx) {
                return std::task::Poll::Ready(Ok(v));
            }
            match shared
                .virtual_clock
                .as_ref()
                .and_then(|vc| vc.poll_stall(cx.waker()))
            {
                Some(report) => std::task::Poll::Ready(Err(report)),
                None => std::task::Poll::Pending,
            }
        }))
    }

    /// Go's `GOMAXPROCS(n)` for this runtime: make `n` Ps live (at most
    /// [`Builder::max_procs`]); `n < 1` only reads. Returns the previous
    /// count. Ps that go away hand their queued work and their timers to
    /// the others.
    ///
    /// ```
    /// let rt = gosched::Builder::new().procs(2).max_procs(4).build().unwrap();
    /// assert_eq!(rt.set_procs(4), 2);
    /// assert_eq!(rt.procs(), 4);
    /// assert_eq!(rt.set_procs(0), 4); // n < 1 only reads
    /// assert_eq!(rt.set_procs(1), 4);
    /// assert_eq!(rt.procs(), 1);
    /// ```
    pub fn set_procs(&self, n: usize) -> usize {
        self.shared.set_procs(n, true)
    }

    /// The number of live Ps.
    ///
    /// ```
    /// let rt = gosched::Builder::new().procs(2).build().unwrap();
    /// assert_eq!(rt.procs(), 2);
    /// ```
    pub fn procs(&self) -> usize {
        self.shared.nprocs()
    }

    /// The number of OS threads running Ms now (started and not exited;
    /// sysmon and the blocking pool's threads are not counted).
    ///
    /// ```
    /// let rt = gosched::Builder::new().procs(2).build().unwrap();
    /// assert_eq!(rt.threads(), 0); // no work yet, no thread
    /// rt.block_on(rt.go(|| ())).unwrap();
    /// assert!(rt.threads() >= 1);
    /// ```
    pub fn threads(&self) -> usize {
        self.shared.nthreads.load(SeqCst)
    }

    /// A snapshot of the scheduler: every P (queue, status, ticks, steals,
    /// hand-offs, preemptions, timers) and the runtime as a whole (threads,
    /// idle and spinning Ms, goroutines and tasks live / runnable / running /
    /// parked, syscalls, timers, stacks). See [`Stats`].
    ///
    /// Costs a pass over the Ps and two short lock holds; reading it never
    /// slows the scheduler's hot paths (the counters are per-P cells written
    /// by one thread each).
    ///
    /// ```
    /// let rt = gosched::Builder::new().procs(2).build().unwrap();
    /// rt.block_on(rt.go(|| ())).unwrap();
    /// let s = rt.stats();
    /// assert_eq!(s.procs, 2);
    /// assert_eq!(s.live, 0); // the goroutine has finished
    /// assert!(s.per_proc.len() >= s.procs);
    /// ```
    pub fn stats(&self) -> Stats {
        self.shared.stats()
    }

    /// Write every goroutine and task of this runtime that has parked at
    /// least once and is alive, in Go's dump style: `goroutine 7 [chan
    /// receive, 1500 ms]:` with where it was spawned, sorted by id, then how
    /// many more are alive that never parked. See [`dump_goroutines`].
    ///
    /// ```
    /// let rt = gosched::Runtime::new().unwrap();
    /// let ch = gosched::chan::<()>(0);
    /// let rx = ch.clone();
    /// let h = rt.block_on(async { gosched::Go::new().name("waiter").spawn(move || rx.recv()) });
    /// let text = loop {
    ///     let mut out = Vec::new();
    ///     rt.dump_goroutines(&mut out).unwrap();
    ///     let text = String::from_utf8(out).unwrap();
    ///     if text.contains("[chan receive") {
    ///         break text; // it has parked
    ///     }
    ///     std::thread::yield_now();
    /// };
    /// assert!(text.contains("\"waiter\" [chan receive"), "{text}");
    /// ch.close();
    /// assert_eq!(rt.block_on(h).unwrap(), None);
    /// ```
    pub fn dump_goroutines(&self, w: &mut impl std::io::Write) -> std::io::Result<()> {
        self.shared.dump_goroutines(w)
    }

    /// Stop the runtime: wait up to `timeout` for its Ms to finish the polls they
    /// are in, then cancel every goroutine and task still alive. Returns true if
    /// everything stopped in time; false if some M was still inside a poll (a
    /// goroutine that never blocks), in which case that M is left running detached.
    ///
    /// ```
    /// use std::time::Duration;
    /// let rt = gosched::Runtime::new().unwrap();
    /// let ch = gosched::chan::<u32>(0);
    /// let rx = ch.clone();
    /// let h = rt.go(move || rx.recv()); // nobody ever sends
    /// assert!(rt.shutdown_timeout(Duration::from_secs(5)));
    /// assert!(h.join().unwrap_err().is_cancelled());
    /// ```
    pub fn shutdown_timeout(mut self, timeout: Duration) -> bool {
        self.stopped = true;
        shutdown(&self.shared, Some(timeout))
    }
}

impl Drop for Runtime {
    /// Stops the Ms (waiting for polls in progress to return), cancels every
    /// goroutine and task still alive, and frees their stacks.
    fn drop(&mut self) {
        if !self.stopped {
            shutdown(&self.shared, None);
        }
    }
}

fn shutdown(shared: &Arc<Shared>, timeout: Option<Duration>) -> bool {
    if context::current().is_some_and(|c| Arc::ptr_eq(&c.shared, shared)) {
        panic!(
            "a gosched Runtime cannot be dropped or shut down from inside one of its own \
             goroutines or tasks; drop it from the thread that owns it"
        );
    }
    shared.shutdown_and_wait(timeout)
}

// ---- introspection ---------------------------------------------------------------

/// Goroutines and async tasks alive in the current runtime (Go's `NumGoroutine`).
///
/// ```
/// let rt = gosched::Runtime::new().unwrap();
/// let ch = gosched::chan::<()>(0);
/// let rx = ch.clone();
/// let waiter = rt.go(move || rx.recv());
/// let n = rt.block_on(rt.go(gosched::runtime::num_goroutine)).unwrap();
/// assert_eq!(n, 2); // the waiter and the caller itself
/// ch.close();
/// rt.block_on(waiter).unwrap();
/// assert_eq!(rt.block_on(async { gosched::runtime::num_goroutine() }), 0);
/// ```
pub fn num_goroutine() -> usize {
    context::with_current(|s| s.live_tasks())
}

/// A snapshot of the current runtime's scheduler: see [`Runtime::stats`].
///
/// ```
/// let s = gosched::runtime::stats();
/// assert_eq!(s.per_proc.iter().filter(|p| p.state != gosched::runtime::PState::Dead).count(), s.procs);
/// ```
pub fn stats() -> Stats {
    context::with_current(|s| s.stats())
}

/// Go's goroutine dump (`SIGQUIT`, `pprof/goroutine?debug=2`) for the
/// current runtime: every goroutine and task that has parked at least once
/// and is still alive — id, goroutine or task, state (running, runnable, or
/// the wait reason: chan receive, chan send, select, sleep,
/// sync.Mutex.Lock, sync.RWMutex.Lock, sync.WaitGroup.Wait, sync.Cond.Wait,
/// semacquire, sync.Once.Do, join, syscall, or block_on / future for a wait
/// on anything else), how long it has waited, and where it was spawned
/// (file:line of the `go` / `spawn` call). Nothing stops: a busy runtime's
/// listing is a blur of the moment.
///
/// ```
/// let rt = gosched::Runtime::new().unwrap();
/// let ch = gosched::chan::<u32>(0);
/// let rx = ch.clone();
/// let h = rt.go(move || rx.recv());
/// // Once it has parked: "goroutine 1 [chan receive, 0 ms]:
/// //     spawned at src/main.rs:5:14".
/// let text = loop {
///     let mut out = Vec::new();
///     rt.block_on(async { gosched::runtime::dump_goroutines(&mut out) }).unwrap();
///     let text = String::from_utf8(out).unwrap();
///     if text.contains("[chan receive") {
///         break text;
///     }
///     std::thread::yield_now();
/// };
/// assert!(text.contains("spawned at "), "{text}");
/// ch.send(1).unwrap();
/// assert_eq!(rt.block_on(h).unwrap(), Some(1));
/// ```
pub fn dump_goroutines(w: &mut impl std::io::Write) -> std::io::Result<()> {
    context::with_current(|s| s.dump_goroutines(w))
}

// ---- the timeline ----------------------------------------------------------------

/// Start recording a timeline of every runtime in the process into `path`
/// (Chrome trace-event JSON: open it at <https://ui.perfetto.dev> or
/// `chrome://tracing`), written by [`trace_stop`]. Go's `trace.Start`; the
/// `GOSCHED_TRACE=path.json` variable does the same from the first runtime's
/// start to process exit.
///
/// It records goroutine and task creation (with the spawn site), each run
/// (start, and how it ended: parked and why, runnable again, finished),
/// wake-ups (a flow arrow from the waker to the next run), steals, P hand-offs
/// and retakes, preemption requests, system calls made in place, and which M
/// holds each P. One track per thread (M) and one per P. Recording costs
/// about 15–18 ns per event with the flight recorder in steady state and
/// 30–45 ns in a full trace (whose memory is new; a W3 round trip is 6
/// events); when off, one predictable branch per event site.
///
/// Events are kept in memory (at most 512 MiB, about 11 million events; past
/// that recording stops and the file says `"truncated": true`). For long runs
/// use [`flight_recorder_start`], which keeps only the last few seconds.
///
/// # Errors
/// If a trace is already being recorded, or `path` cannot be created.
///
/// ```
/// let path = std::env::temp_dir().join(format!("gosched-trace-{}.json", std::process::id()));
/// gosched::runtime::trace_start(&path).unwrap();
/// assert!(gosched::runtime::trace_start(&path).is_err()); // one at a time
/// gosched::go(|| 1 + 1).join().unwrap();
/// let summary = gosched::runtime::trace_stop().unwrap();
/// assert_eq!(summary.path.as_deref(), Some(path.as_path()));
/// assert!(summary.events > 0 && !summary.truncated);
/// assert!(std::fs::read_to_string(&path).unwrap().contains("\"traceEvents\""));
/// std::fs::remove_file(&path).unwrap();
/// ```
pub fn trace_start(path: impl AsRef<std::path::Path>) -> std::io::Result<()> {
    crate::trace::start_full(path.as_ref())
}

/// Stop recording: a trace started by [`trace_start`] (or `GOSCHED_TRACE`) is
/// written to its file; a flight recorder just stops (its last window is lost
/// unless [`trace_snapshot`] wrote it).
///
/// # Errors
/// If nothing is being recorded (`ErrorKind::NotFound`), or writing fails.
///
/// ```
/// use std::time::Duration;
/// let err = gosched::runtime::trace_stop().unwrap_err();
/// assert_eq!(err.kind(), std::io::ErrorKind::NotFound); // nothing recording
/// gosched::runtime::flight_recorder_start(Duration::from_secs(1)).unwrap();
/// gosched::go(|| ()).join().unwrap();
/// let summary = gosched::runtime::trace_stop().unwrap();
/// assert!(summary.path.is_none()); // a flight recorder writes no file when stopped
/// ```
pub fn trace_stop() -> std::io::Result<TraceSummary> {
    crate::trace::stop()
}

/// Start the flight recorder (Go 1.25's `trace.FlightRecorder`): record as
/// [`trace_start`] does, but keep only the last `window`, to be written by
/// [`trace_snapshot`] when something interesting has just happened.
/// `GOSCHED_TRACE=flight=MS` starts one with an `MS`-millisecond window.
///
/// # Errors
/// If a trace is already being recorded, or `window` is zero.
///
/// ```
/// use std::time::Duration;
/// assert!(gosched::runtime::flight_recorder_start(Duration::ZERO).is_err());
/// gosched::runtime::flight_recorder_start(Duration::from_millis(500)).unwrap();
/// let t = std::time::Instant::now();
/// gosched::go(|| gosched::time::sleep(Duration::from_millis(1))).join().unwrap();
/// if t.elapsed() > Duration::from_millis(100) {
///     // A spike: keep the last 500 ms for later.
///     let spike = std::env::temp_dir().join(format!("spike-{}.json", std::process::id()));
///     gosched::runtime::trace_snapshot(&spike).unwrap();
///     # std::fs::remove_file(&spike).unwrap();
/// }
/// gosched::runtime::trace_stop().unwrap();
/// ```
pub fn flight_recorder_start(window: Duration) -> std::io::Result<()> {
    crate::trace::start_flight(window)
}

/// Write what the flight recorder holds (the last `window`), or what a full
/// trace has recorded so far, to `path`. Recording goes on.
///
/// # Errors
/// If nothing is being recorded (`ErrorKind::NotFound`), or `path` cannot be
/// written.
///
/// ```
/// use std::time::Duration;
/// let path = std::env::temp_dir().join(format!("gosched-snap-{}.json", std::process::id()));
/// gosched::runtime::flight_recorder_start(Duration::from_secs(5)).unwrap();
/// gosched::go(gosched::yield_now).join().unwrap();
/// let summary = gosched::runtime::trace_snapshot(&path).unwrap(); // recording goes on
/// assert!(summary.events > 0);
/// assert!(std::fs::read_to_string(&path).unwrap().contains("traceEvents"));
/// gosched::runtime::trace_stop().unwrap();
/// std::fs::remove_file(&path).unwrap();
/// ```
pub fn trace_snapshot(path: impl AsRef<std::path::Path>) -> std::io::Result<TraceSummary> {
    crate::trace::snapshot(path.as_ref())
}

/// Whether goroutines are virtual threads in this process: each with
/// thread-locals of its own (its own `thread_local!` values, `thread::current()`,
/// panic state and errno; the C library's state stays per OS thread). `Err`
/// says why not: goroutines then share their M's thread-locals, and the thread
/// rule keeps each on one M (see the crate docs). Linux x86-64 with glibc
/// supports them; `GOSCHED_VTHREAD=0` turns them off.
///
/// ```
/// if cfg!(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))
///     && std::env::var_os("GOSCHED_VTHREAD").is_none()
/// {
///     assert_eq!(gosched::runtime::virtual_threads(), Ok(()));
/// }
/// ```
pub fn virtual_threads() -> Result<(), &'static str> {
    match crate::vthread::unsupported_reason() {
        None => Ok(()),
        Some(why) => Err(why),
    }
}

/// Number of Ps of the current runtime (Go's `GOMAXPROCS(0)`).
///
/// ```
/// let rt = gosched::Builder::new().procs(3).build().unwrap();
/// assert_eq!(rt.block_on(async { gosched::runtime::procs() }), 3);
/// ```
pub fn procs() -> usize {
    context::with_current(|s| s.nprocs())
}

/// Go's `LockOSThread`: the calling goroutine stays on its OS thread **and
/// that thread runs nothing else** (no task from the run queues) until as
/// many [`unlock_os_thread`] calls: while the goroutine parks, its P goes to
/// another thread, and the thread waits for it. For code that needs a
/// thread of its own: OS-thread state set up once (an OpenGL context, a
/// namespace change, a C library's thread affinity). A goroutine's own
/// `thread_local!`s need no lock where goroutines are virtual threads
/// ([`virtual_threads`]): they move with it.
///
/// A goroutine that ends while locked frees the thread (Go exits the thread
/// instead; gosched keeps it, so undo thread-wide changes before the end).
///
/// On a plain thread it does nothing (a thread is its own thread).
///
/// # Panics
/// In an async task: a task may change thread between polls; spawn a
/// goroutine for work that needs a thread.
///
/// ```
/// # #[cfg(target_os = "linux")]
/// # fn os_thread() -> i64 {
/// #     // SAFETY: gettid takes no arguments and cannot fail.
/// #     unsafe { libc::syscall(libc::SYS_gettid) }
/// # }
/// # #[cfg(not(target_os = "linux"))]
/// # fn os_thread() -> std::thread::ThreadId { std::thread::current().id() }
/// let rt = gosched::Builder::new().procs(2).build().unwrap();
/// let same = rt.go(|| {
///     gosched::runtime::lock_os_thread();
///     // The OS thread's id (`thread::current()` is the goroutine's own).
///     let t = os_thread();
///     // Parks: the P runs other work elsewhere, this thread waits for us.
///     gosched::time::sleep(std::time::Duration::from_millis(1));
///     let same = os_thread() == t;
///     gosched::runtime::unlock_os_thread();
///     same
/// });
/// assert!(rt.block_on(same).unwrap());
/// ```
pub fn lock_os_thread() {
    if !coro::lock_thread() {
        assert!(
            !coro::in_async_task(),
            "gosched::runtime::lock_os_thread called from an async task: a task may change \
             thread between polls; run thread-bound work in a goroutine (gosched::go)"
        );
    }
}

/// Undo one [`lock_os_thread`]; the last one lets the thread run other work
/// again. Does nothing when the caller holds no lock.
///
/// ```
/// gosched::go(|| {
///     gosched::runtime::lock_os_thread();
///     gosched::runtime::lock_os_thread(); // nested
///     gosched::runtime::unlock_os_thread(); // still locked
///     gosched::runtime::unlock_os_thread(); // the thread runs other work again
///     gosched::runtime::unlock_os_thread(); // not locked: does nothing
/// })
/// .join()
/// .unwrap();
/// ```
pub fn unlock_os_thread() {
    coro::unlock_thread();
}

/// Go's `GOMAXPROCS(n)` for the current runtime: see [`Runtime::set_procs`].
///
/// ```
/// let rt = gosched::Builder::new().procs(2).max_procs(2).build().unwrap();
/// let (prev, now) = rt.block_on(async {
///     let prev = gosched::runtime::set_procs(1);
///     (prev, gosched::runtime::procs())
/// });
/// assert_eq!((prev, now), (2, 1));
/// ```
pub fn set_procs(n: usize) -> usize {
    context::with_current(|s| s.set_procs(n, true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc as StdArc;
    use std::thread;

    /// Waits (up to 5 s) until every P of `rt` is idle; false if one never is.
    fn all_ps_go_idle(rt: &Runtime) -> bool {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while std::time::Instant::now() < deadline {
            let s = &rt.shared;
            if s.idle_ps() == s.nprocs()
                && s.procs[..s.nprocs()]
                    .iter()
                    .all(|p| p.status.load() == crate::sched::status::IDLE)
            {
                return true;
            }
            thread::sleep(Duration::from_millis(5));
        }
        false
    }

    /// Runtime calls and parks made from inside an in-place syscall (its
    /// `f`), and in-place syscalls made from inside a runtime call (a value
    /// dropped while the P is held, as a failed spawn drops its closure),
    /// leave no P behind: once everything is done, every P is idle again.
    /// (A runtime call inside `f` used to take a second P and leave the
    /// first one USER with no owner; a park inside `f` once left it in a
    /// SYSCALL state, retired since; a call marked inside a runtime call
    /// took its RUNNING P for lost on return, and with 1 P hung.)
    #[test]
    fn in_place_syscalls_that_spawn_or_park_leave_no_p_behind() {
        // 2 first: a P left behind fails the check; with 1 it would hang.
        for procs in [2, 1] {
            let rt = Builder::new().procs(procs).build().unwrap();
            rt.block_on(rt.go(|| {
                for _ in 0..20 {
                    crate::syscall_local(|| {
                        crate::go(|| ());
                    });
                }
                for _ in 0..20 {
                    crate::sched::context::with_current_and_p(|_, p| {
                        assert!(p.is_some(), "a goroutine's runtime call holds its P");
                        crate::syscall_local(|| ());
                    });
                }
                let ch = crate::chan::<u32>(0);
                let tx = ch.clone();
                let sender = crate::go(move || {
                    for i in 0..5 {
                        tx.send(i).unwrap();
                    }
                });
                for _ in 0..5 {
                    // Parks inside the call.
                    crate::syscall_local(|| ch.recv().unwrap());
                }
                sender.join().unwrap();
            }))
            .unwrap();
            let idle = all_ps_go_idle(&rt);
            let states: Vec<u64> = rt
                .shared
                .procs
                .iter()
                .map(|p| p.status.load_word())
                .collect();
            assert!(
                idle,
                "a P stayed busy with nobody on it (procs {procs}): {states:x?}"
            );
        }
    }

    /// Dropping a runtime with parked goroutines returns every stack to the pool
    /// and gives their pages back.
    #[test]
    fn drop_frees_stacks() {
        let rt = Builder::new().procs(2).build().unwrap();
        let parked = StdArc::new(AtomicUsize::new(0));
        for _ in 0..500 {
            let p = parked.clone();
            rt.go(move || {
                p.fetch_add(1, Ordering::SeqCst);
                coro::block_on(std::future::pending::<()>());
            });
        }
        while parked.load(Ordering::SeqCst) < 500 {
            thread::yield_now();
        }
        let shared = rt.shared.clone();
        assert!(shared.stacks.stats().outstanding >= 500);
        drop(rt);
        let st = shared.stacks.stats();
        assert_eq!(st.outstanding, 0, "{st:?}");
        assert_eq!(st.free_hot, 0, "pages of free stacks released: {st:?}");
    }
}
