//! # gosched — Go's G-P-M scheduler for Rust
//!
//! Stackful goroutines (`go(|| ...)`) and async tasks (`spawn(async { ... })`) run
//! on one work-stealing scheduler built like Go's: Ps with 256-slot run queues and
//! `runnext`, Ms (OS threads) that spin, steal and park, a global queue checked
//! every 61 ticks, per-P timers. Blocking calls inside a goroutine (`block_on`,
//! `JoinHandle::join`, `time::sleep`, `yield_now`) park the goroutine, not the
//! thread; on a plain thread they park the thread; async code `.await`s the same
//! futures.
//!
//! ```
//! let h = gosched::go(|| {
//!     let inner = gosched::spawn(async { 20 });
//!     // Parks this goroutine (not its OS thread) until the task is done.
//!     inner.join().unwrap() + 22
//! });
//! assert_eq!(h.join().unwrap(), 42);
//! ```
//!
//! See `docs/ARCHITECTURE.md` in the repository for the design (module layers,
//! where each protocol lives, the wake-up path).
//!
//! # Goroutines are virtual threads
//!
//! On Linux x86-64 with glibc ([`runtime::virtual_threads`] says whether here)
//! each goroutine runs on a thread pointer of its own, as a Java virtual thread
//! has its own `ThreadLocal`s: its own `thread_local!` values (initialised
//! fresh, dropped when it ends), `std::thread::current()`, panic state, errno
//! and pthread keys. So goroutines may move between OS threads, and they do by
//! default, as in Go: started goroutines are stolen, rebalanced and handed off
//! with their P. What stays per OS thread: the C library's state (malloc's
//! caches, locale), `dlopen`ed libraries' thread-locals, and what an async
//! task sees (it runs on its M's thread). [`runtime::lock_os_thread`] keeps a
//! goroutine on its OS thread, with that thread to itself.
//!
//! # Where goroutines are not virtual threads
//!
//! Elsewhere (other CPUs, musl, `GOSCHED_VTHREAD=0`) goroutines still move
//! between OS threads as in Go, but they share their current thread's
//! thread-locals, and **that is unsound** from safe code:
//! - LLVM assumes a function never changes thread between two of its own
//!   thread-local accesses and caches a thread-local's address across calls
//!   (llvm/llvm-project#98479), so a goroutine that touches a thread-local
//!   before and after a blocking call within one function activation may
//!   read and write another thread's slot;
//! - goroutines that take turns on one thread see each other's values: a
//!   `thread_local!` whose initialiser parks can free a value another
//!   goroutine holds, `scoped-tls` can be left dangling, the panic count
//!   and tracing's current span leak between goroutines (see
//!   `tests/vthread.rs` in the repository).
//!
//! There, keep thread-locals out of goroutines that block (or lock the
//! goroutine to its thread with [`runtime::lock_os_thread`], which gives it
//! a thread of its own). Async tasks are unaffected everywhere: a poll never
//! spans a thread switch, and the compiler checks `Send` across `.await`.
//!
//! # G, P and M
//!
//! As in Go's runtime, a **G** is a goroutine or an async task, and a **P** is
//! a processor: a run queue (256 slots plus `runnext`) and the right to run
//! Gs. There are [`Builder::procs`] of them (Go's `GOMAXPROCS`). An **M** is
//! an OS thread that holds a P while it runs Gs. An M that runs out of work
//! steals half of another P's queue, checks the global queue, polls the
//! netpoller and timers, then parks. A G that blocks in `syscall` hands its P
//! to another M. **sysmon**, a thread of its own, takes Ps back from slow
//! calls and asks long time slices to yield. `docs/ARCHITECTURE.md` in the
//! repository maps every file to these protocols.
//!
//! # Goroutine or async task?
//!
//! A **goroutine** ([`go`]) has its own stack, so plain blocking-style code
//! (`ch.recv()`, `stream.read(..)`, `mutex.lock()`, [`time::sleep`]) parks it
//! without holding its thread. Use one for code written the Go way, for
//! libraries that are not async, and for deep call chains that wait.
//!
//! An **async task** ([`spawn`]) is a future with no stack of its own: it is
//! cheaper (a few hundred bytes parked, against a 4 KiB page) and moves freely
//! between threads. Use one for async libraries (hyper, through the
//! `tokio-io` feature) and for very many small waits.
//!
//! Both run on the same Ps, and each side waits on the other: a goroutine
//! awaits a future with [`block_on`], and an async task awaits a goroutine's
//! [`JoinHandle`] or runs blocking code through [`syscall_async`].
//!
//! # Stack size
//!
//! A goroutine's stack is fixed when it is spawned; Rust cannot move a stack,
//! so it cannot grow the way Go's does. The default,
//! [`coro::DEFAULT_STACK_SIZE`] (256 KiB), is address space reserved without
//! committing memory: a goroutine costs only the pages it touches, one 4 KiB
//! page for a small one. Raise it ([`Go::stack_size`], [`Builder::stack_size`])
//! for deep recursion or large values on the stack; lower it only to fit very
//! many goroutines in a limited address space. Overflowing the stack hits a
//! guard page, and the process aborts with a message naming the goroutine and
//! its size.
//!
//! # Features
//!
//! - `tokio-io`: `tokio::io::{AsyncRead, AsyncWrite}` for `net::TcpStream` and
//!   `net::UnixStream`, so tokio-ecosystem crates (hyper) run on gosched.
//! - `stream`: `futures::Stream` / `futures::Sink` for channels
//!   (`chan::Receiver::into_stream`, `chan::Sender::into_sink`).

#![warn(missing_debug_implementations, rust_2018_idioms)]
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]
// Under loom the crate is a model harness: only the models use the scheduler.
#![cfg_attr(loom, allow(dead_code, unused_imports))]

mod loom;
mod park;
#[cfg(not(loom))]
mod stack;

#[cfg(not(loom))]
pub mod chan;
#[cfg(not(loom))]
pub mod coro;
#[cfg(not(loom))]
pub mod net;
#[cfg(not(loom))]
pub(crate) mod netpoll;
#[cfg(not(loom))]
pub mod pool;
#[cfg(not(loom))]
pub mod runtime;
/// ... and the netpoller's readiness handshake.
#[cfg(loom)]
pub(crate) mod netpoll {
    pub(crate) mod desc;
}
pub(crate) mod sched;
#[cfg(not(loom))]
pub mod sync;
#[cfg(not(loom))]
pub mod task;
#[cfg(not(loom))]
pub mod testing;
#[cfg(not(loom))]
pub mod time;
pub(crate) mod trace;
pub(crate) mod vthread;

/// ... and the channel core (waiters, claiming, select).
#[cfg(loom)]
#[path = "chan/loom_mod.rs"]
pub(crate) mod chan;
/// ... and the core of `sync` (the wait queue and the mutex hand-off protocol).
#[cfg(loom)]
#[path = "sync/loom_mod.rs"]
pub(crate) mod sync;

#[cfg(not(loom))]
pub use chan::{chan, Chan};
#[cfg(not(loom))]
pub use coro::local::GoLocal;
#[cfg(not(loom))]
pub use coro::{block_on, Go, SpawnError};
#[cfg(not(loom))]
pub use coro::{syscall, syscall_async, syscall_local, SyscallFuture};
/// Run `main` as the main goroutine: `#[gosched::main]`, or
/// `#[gosched::main(procs = 4, stack_size = 65536, deadlock_detection = true)]`.
///
/// A plain `fn main` runs as a goroutine (its blocking calls park a
/// goroutine, not the thread); an `async fn main` runs as a future on the
/// runtime. `main` may return a value (`Result<(), E>`, as usual); it must
/// be `Send` (for errors: `Box<dyn Error + Send + Sync>`), since the
/// goroutine hands it to the main thread. As in Go, the program ends when
/// `main` returns: goroutines still running are not waited for.
///
/// ```
/// #[gosched::main(procs = 2)]
/// fn main() {
///     let h = gosched::go(|| 21 * 2);
///     assert_eq!(h.join().unwrap(), 42);
/// }
/// ```
#[cfg(not(loom))]
pub use gosched_macros::main;
/// A test in a fresh runtime: `#[gosched::test]` (with the options of
/// [`macro@main`], and `virtual_time`). A plain `fn` runs as a goroutine, an
/// `async fn` as a future on the runtime; a panic fails the test as usual,
/// and the runtime is shut down when the test ends. With `virtual_time` the
/// runtime's clock moves only when everything in it is parked, straight to
/// the next timer ([`testing`]): the test below takes microseconds, and a
/// test stuck with no timer pending fails with the goroutine dump.
///
/// ```
/// use std::time::Duration;
///
/// #[gosched::test(virtual_time)]
/// fn a_slow_reply_times_out() {
///     let reply = gosched::chan::<u32>(0);
///     let r = reply.clone();
///     gosched::go(move || {
///         gosched::time::sleep(Duration::from_secs(3600));
///         let _ = r.send(1);
///     });
///     assert!(reply.recv_timeout(Duration::from_secs(30)).is_err());
/// }
///
/// #[gosched::test(procs = 1)]
/// async fn sleeps() {
///     gosched::time::sleep_async(Duration::from_millis(1)).await;
/// }
/// # // (rustdoc compiles these here; `cargo test` runs them in your crate:
/// # // gosched's own are in tests/macros.rs and tests/virtual_time.rs.)
/// ```
#[cfg(not(loom))]
pub use gosched_macros::test;
#[cfg(not(loom))]
pub use runtime::{Builder, Runtime};
#[cfg(not(loom))]
pub use sched::task::{JoinError, JoinHandle, TaskId};

/// What the attribute macros expand to. Not public API.
#[cfg(not(loom))]
#[doc(hidden)]
pub mod __private {
    use std::future::Future;

    use crate::Runtime;

    /// `#[gosched::main]` on a plain `fn`: the body is the main goroutine.
    /// The runtime is left running when it returns (the process is ending).
    pub fn main_goroutine<T: Send + 'static>(
        rt: Runtime,
        body: impl FnOnce() -> T + Send + 'static,
    ) -> T {
        let h = rt.go(body);
        let out = rt.block_on(h);
        std::mem::forget(rt);
        crate::testing::unwrap_join("the main goroutine was cancelled", out)
    }

    /// `#[gosched::main]` on an `async fn`.
    pub fn main_future<F: Future>(rt: Runtime, body: F) -> F::Output {
        let out = rt.block_on(body);
        std::mem::forget(rt);
        out
    }

    /// `#[gosched::test]` on a plain `fn` (with `virtual_time`, a stall
    /// fails the test with its report).
    pub fn test_goroutine<T: Send + 'static>(
        rt: Runtime,
        body: impl FnOnce() -> T + Send + 'static,
    ) -> T {
        let h = rt.go(body);
        crate::testing::finish(rt, |rt| rt.block_on_watched(h))
    }

    /// `#[gosched::test]` on an `async fn`.
    pub fn test_future<F: Future>(rt: Runtime, body: F) -> F::Output {
        crate::testing::finish(rt, |rt| rt.block_on_watched(body).map(Ok))
    }
}

/// Start a goroutine on the current runtime (the global one outside any runtime).
///
/// `f` runs on its own stack; blocking calls inside it park only the goroutine.
/// A panic in `f` is caught and returned by the handle as a [`JoinError`].
///
/// # Panics
/// If no stack can be reserved for it; [`try_go`] returns the error instead.
///
/// # Thread-locals
/// The goroutine may move between OS threads. It has thread-locals of its
/// own where goroutines are virtual threads; elsewhere it shares its
/// thread's (see "Where goroutines are not virtual threads" above).
///
/// ```
/// let (tx, rx) = gosched::chan::<u32>(0).split();
/// let producer = gosched::go(move || {
///     for i in 1..=3 {
///         tx.send(i).unwrap(); // parks this goroutine until received
///     }
/// });
/// let sum: u32 = (0..3).map(|_| rx.recv().unwrap()).sum();
/// producer.join().unwrap();
/// assert_eq!(sum, 6);
/// ```
#[cfg(not(loom))]
#[track_caller]
pub fn go<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    Go::new().spawn(f)
}

/// Like [`go`], but returns an error instead of panicking when no stack can be
/// reserved (for example when `vm.max_map_count` is exhausted on kernels without
/// `MADV_GUARD_INSTALL`).
///
/// ```
/// match gosched::try_go(|| 6 * 7) {
///     Ok(h) => assert_eq!(h.join().unwrap(), 42),
///     Err(e) => panic!("out of stacks: {e}"), // or shed load, retry later...
/// }
/// ```
#[cfg(not(loom))]
#[track_caller]
pub fn try_go<F, T>(f: F) -> Result<JoinHandle<T>, SpawnError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    Go::new().try_spawn(f)
}

/// Start an async task on the current runtime.
///
/// Outside any runtime, the global one (started by the first call).
///
/// ```
/// let h = gosched::spawn(async {
///     gosched::time::sleep_async(std::time::Duration::from_millis(1)).await;
///     "slept"
/// });
/// assert_eq!(h.join().unwrap(), "slept"); // from a plain thread: parks it
/// ```
#[cfg(not(loom))]
#[track_caller]
pub fn spawn<F>(fut: F) -> JoinHandle<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    task::spawn(fut)
}

/// Go's `runtime.Gosched`: let the other runnable goroutines run, then go on.
/// The caller goes to the back of its P's run queue, as Go's `goyield` does, so every goroutine queued
/// there runs first; the global queue gets a turn every 61 schedule ticks, and
/// at once when nothing else is queued locally (then the caller goes to the
/// global queue's tail, Go's `Gosched`). On a plain thread,
/// `std::thread::yield_now`.
///
/// # Panics
/// Inside an async task: use `gosched::task::yield_now().await` there.
///
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
/// use std::sync::Arc;
/// let flag = Arc::new(AtomicBool::new(false));
/// let f = flag.clone();
/// let setter = gosched::go(move || f.store(true, SeqCst));
/// let waiter = gosched::go(move || {
///     while !flag.load(SeqCst) {
///         gosched::yield_now(); // lets `setter` run, even on the same P
///     }
/// });
/// waiter.join().unwrap();
/// setter.join().unwrap();
/// ```
#[cfg(not(loom))]
#[inline(always)]
pub fn yield_now() {
    // Inlined into the caller, down to the stack switch
    // (`coro::yield_goroutine`): every frame of ours left between the
    // goroutine's code and the switch costs a mispredicted return when the
    // goroutine resumes, since the CPU's return-stack buffer then holds the
    // M's frames, not the goroutine's (about 6 ns a frame on this box's
    // EPYC: a bare corosensei round trip takes 2.6 ns, with 9 frames between
    // the switches 57 ns). W4: 40 → 24 ns per yield.
    if coro::in_goroutine() {
        coro::yield_goroutine();
    } else {
        yield_not_in_a_goroutine();
    }
}

/// `yield_now` outside a goroutine: the thread yields, or an async task is
/// told what to use instead.
#[cfg(not(loom))]
#[cold]
#[inline(never)]
fn yield_not_in_a_goroutine() {
    if coro::in_async_task() {
        panic!(
            "gosched::yield_now called from an async task: use gosched::task::yield_now().await"
        );
    }
    std::thread::yield_now();
}
