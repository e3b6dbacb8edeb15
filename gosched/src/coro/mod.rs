//! Stackful goroutines: a goroutine is a task whose future resumes a corosensei
//! coroutine on its own guarded stack.
//!
//! # How a goroutine runs
//!
//! `go(f)` spawns a `Goroutine` future. Its first poll takes a stack (from the
//! P's cache, else the runtime's pool: `stack/`) and creates the coroutine; every
//! poll resumes it. Inside, blocking calls (`block_on`, `JoinHandle::join`,
//! `sleep`, `yield_now`, and channel/lock operations built on them) poll a future
//! with the goroutine task's own waker; when it is pending they *suspend* the
//! coroutine, so the poll returns `Pending` and the M runs other Gs. A wake-up
//! re-queues the task, and the next poll resumes the coroutine where it stopped.
//!
//! While a goroutine runs, the thread-local `CURRENT` points at its `GoroutineCtx`
//! (the yielder to suspend through, and the `Context` of the poll that resumed
//! it). It is read through `#[inline(never)]` accessors: a goroutine may resume
//! on another OS thread, so a thread-local address must never be reused across a
//! suspension point.
//!
//! A panic in the goroutine unwinds to the coroutine's root, crosses back to the
//! poll (corosensei re-raises it there) and becomes the task's `JoinError`; its M
//! carries on. When a suspended goroutine is dropped (abort, runtime shutdown), the
//! coroutine is force-unwound so the goroutine's destructors run and its stack
//! goes back to the pool. A destructor that blocks during that unwinding blocks
//! its OS thread (there is no coroutine left to suspend): destructors of
//! goroutines that may be cancelled should not wait for other runtime work.
//!
//! # Stack size
//!
//! Go starts a goroutine at 2 KiB and grows it by copying; Rust cannot move a
//! stack (references into it would dangle), so a goroutine's stack is fixed at
//! spawn. Stacks are reserved, not committed (`MAP_NORESERVE`): a goroutine costs
//! the pages it touches — one 4 KiB page for a small goroutine — whatever its
//! size. `DEFAULT_STACK_SIZE` is therefore generous (256 KiB of address space):
//! enough for ordinary Rust code (formatting, std I/O, moderate recursion). A
//! goroutine that recurses deeply or keeps large arrays on its stack needs
//! `Go::new().stack_size(n)` or `Builder::stack_size(n)`; overflowing hits the
//! guard page and the process aborts with `goroutine stack overflow`.
//!
//! # Thread-locals
//!
//! Where goroutines are virtual threads (`vthread`: Linux x86-64 with glibc)
//! each runs on a thread pointer of its own, so its `thread_local!`s are its
//! own wherever it runs, and the code that switches (`resume`, `Drop`)
//! touches thread-locals only through `#[inline(never)]` functions called
//! after the switch. Goroutines move between Ms, as in Go (`sched/machine.rs`),
//! everywhere; where they are not virtual threads they share their M's
//! thread-locals, which the crate docs say is unsound (a goroutine that
//! touches a thread-local before and after a blocking call within one
//! function activation may use another thread's slot).
//!
//! # Stack promises
//!
//! `go`/`try_go` promise the goroutine a stack at spawn (`stack/mod.rs`,
//! "Reservations"): `try_go` returns `SpawnError` when the address space (or
//! the map budget) is spent, and a goroutine it accepted always gets its
//! stack at its first run.

use std::cell::Cell;
use std::future::Future;
use std::marker::PhantomPinned;
use std::pin::{pin, Pin};
use std::ptr;
use std::sync::Arc as StdArc;
use std::task::{Context, Poll, Waker};

use corosensei::{Coroutine, CoroutineResult, Yielder};

use crate::sched::context::{self, with_current, with_current_and_p};
use crate::sched::{task::JoinError, task::JoinHandle, Shared};
use crate::stack::overflow::{self, CurrentGoroutine};
use crate::stack::{self, Stack};
pub use crate::stack::{StackError, DEFAULT_STACK_SIZE};
use std::sync::Arc;

pub(crate) mod local;
mod syscall;
pub use syscall::{syscall, syscall_async, syscall_local, SyscallFuture};

struct GoroutineCtx {
    yielder: Cell<*const Yielder<(), ()>>,
    /// Set while a cancelled goroutine's stack is force-unwound: blocking calls
    /// made by its destructors then block the OS thread instead of suspending
    /// (suspending would re-enter the unwinder from inside a destructor).
    unwinding: Cell<bool>,
    /// The `Context` of the poll that last resumed the coroutine.
    cx: Cell<*mut Context<'static>>,
    /// `lock_os_thread` depth (Go's nested `LockOSThread` count); while
    /// non-zero the goroutine holds its M (`sched/lockos.rs`).
    lock_depth: Cell<u32>,
    /// Times it has suspended (parked or yielded): `suspensions`.
    suspensions: Cell<u32>,
    /// Goroutine-local values (`local.rs`), dropped with the goroutine.
    locals: local::Locals,
    info: CurrentGoroutine,
}

thread_local! {
    static CURRENT: Cell<*const GoroutineCtx> = const { Cell::new(ptr::null()) };
}

#[inline(never)]
fn current() -> *const GoroutineCtx {
    CURRENT.with(|c| c.get())
}

/// True when called from inside a goroutine that can park (not one whose stack
/// is being unwound by cancellation).
#[inline(never)]
pub(crate) fn in_goroutine() -> bool {
    // SAFETY: non-null pointers in CURRENT are live goroutine contexts.
    unsafe { current().as_ref() }.is_some_and(|g| !g.unwinding.get())
}

/// True while the current goroutine's stack is being force-unwound (it was
/// cancelled, or its runtime shut down). Code that catches panics on a
/// goroutine (`pool`'s workers) must re-raise what it caught then: the unwind
/// has to reach the coroutine's root.
#[inline(never)]
pub(crate) fn force_unwinding() -> bool {
    // SAFETY: non-null pointers in CURRENT are live goroutine contexts.
    unsafe { current().as_ref() }.is_some_and(|g| g.unwinding.get())
}

/// True on a goroutine's stack, parking or not (cancellation unwinding included).
#[inline(never)]
pub(crate) fn on_goroutine_stack() -> bool {
    !current().is_null()
}

/// True inside the poll of an async task (not a goroutine) on one of our Ms.
pub(crate) fn in_async_task() -> bool {
    context::in_poll() && !on_goroutine_stack()
}

/// Installs a goroutine as the thread's current one for the duration of a resume.
struct ResumeGuard {
    prev: *const GoroutineCtx,
}

impl ResumeGuard {
    fn new(g: &GoroutineCtx) -> Self {
        overflow::set_current(&g.info);
        ResumeGuard {
            prev: CURRENT.with(|c| c.replace(g)),
        }
    }
}

impl Drop for ResumeGuard {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.prev));
        // SAFETY: `prev` is null or an outer goroutine context still alive below us
        // (a goroutine resumed from inside another one's poll).
        overflow::set_current(match unsafe { self.prev.as_ref() } {
            Some(g) => &g.info,
            None => ptr::null(),
        });
    }
}

/// What a goroutine's coroutine returns: its value, or the panic it caught on
/// its own thread pointer (re-raised by the poll on the M's, so that each
/// thread's panic count stays balanced).
type Outcome<T> = Result<T, Box<dyn std::any::Any + Send>>;

/// A goroutine's stack with its thread pointer's area carved from the top
/// (`vthread`): the coroutine's stack starts below the area.
struct GoStack {
    stack: Stack,
    base: std::num::NonZeroUsize,
}

// SAFETY: `base` lies inside the stack (below its top, above its guard) and is
// 16-byte aligned; the area above it is not used as stack.
unsafe impl corosensei::stack::Stack for GoStack {
    #[inline]
    fn base(&self) -> corosensei::stack::StackPointer {
        self.base
    }
    #[inline]
    fn limit(&self) -> corosensei::stack::StackPointer {
        corosensei::stack::Stack::limit(&self.stack)
    }
}

pub(crate) struct Goroutine<F, T> {
    f: Option<F>,
    co: Option<Coroutine<(), (), Outcome<T>, GoStack>>,
    /// Its thread pointer (None where goroutines keep the M's, `vthread`).
    area: Option<crate::vthread::Area>,
    /// The stack pool holding this goroutine's stack promise (made at spawn,
    /// `stack/mod.rs` "Reservations"), kept until its stack goes back.
    pool: u32,
    ctx: GoroutineCtx,
    _pin: PhantomPinned,
}

// SAFETY: the closure `F` and result `T` are `Send`. The coroutine's stack holds
// only state produced by `F`'s code, which is `Send` except for the documented
// thread-local caveat (see the module docs); the raw pointers in `ctx` are only
// dereferenced by the thread currently polling the task, which the task's
// RUNNING bit makes exclusive.
unsafe impl<F: Send, T: Send> Send for Goroutine<F, T> {}

impl<F, T> Goroutine<F, T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    /// A goroutine whose stack of `stack_size` (rounded) bytes is promised by
    /// the pool with id `pool`.
    pub(crate) fn new(
        f: F,
        id: u64,
        name: Option<StdArc<str>>,
        stack_size: usize,
        pool: u32,
    ) -> Self {
        Goroutine {
            f: Some(f),
            co: None,
            area: None,
            pool,
            ctx: GoroutineCtx {
                yielder: Cell::new(ptr::null()),
                unwinding: Cell::new(false),
                cx: Cell::new(ptr::null_mut()),
                lock_depth: Cell::new(0),
                suspensions: Cell::new(0),
                locals: local::Locals::default(),
                info: CurrentGoroutine {
                    id,
                    name,
                    stack_size,
                },
            },
            _pin: PhantomPinned,
        }
    }
}

impl<F, T> Future for Goroutine<F, T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        // SAFETY: we never move out of `self`; `ctx` stays at this address for as
        // long as the coroutine (which points to it) exists.
        let this = unsafe { self.get_unchecked_mut() };
        if this.co.is_none() {
            this.start();
        }
        this.ctx
            .cx
            .set((cx as *mut Context<'_>).cast::<Context<'static>>());
        let res = this.resume();
        match res {
            CoroutineResult::Yield(()) => Poll::Pending,
            CoroutineResult::Return(out) => {
                // Ended holding `lock_os_thread`: the M is free again.
                if this.ctx.lock_depth.replace(0) > 0 {
                    crate::sched::lockos::unlock_current();
                }
                this.finish();
                match out {
                    Ok(v) => Poll::Ready(v),
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
        }
    }
}

impl<F, T> Goroutine<F, T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    /// First poll: the promised stack, the thread pointer's area at its top,
    /// and the coroutine below it.
    #[cold]
    fn start(&mut self) {
        let stack = acquire_stack(self.ctx.info.stack_size).unwrap_or_else(|e| {
            panic!(
                "gosched: cannot allocate a stack for goroutine {}: {e}",
                self.ctx.info.id
            )
        });
        let top = corosensei::stack::Stack::base(&stack).get();
        let area_bytes = crate::vthread::area_bytes();
        let base = (top - area_bytes) & !15;
        #[cfg(vthread)]
        if area_bytes != 0 {
            // SAFETY: the top `area_bytes` of our own stack, which the coroutine
            // never uses (its stack starts at `base`).
            self.area = Some(unsafe { crate::vthread::Area::init(top) });
        }
        let f = self.f.take().expect("goroutine started twice");
        let ctx: *const GoroutineCtx = &self.ctx;
        self.co = Some(Coroutine::with_stack(
            GoStack {
                stack,
                base: std::num::NonZeroUsize::new(base).expect("stack base"),
            },
            move |y: &Yielder<(), ()>, ()| {
                // SAFETY: `ctx` is pinned inside the task and outlives the coroutine.
                unsafe { (*ctx).yielder.set(y) };
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|panic| {
                    // SAFETY: as above.
                    if unsafe { (*ctx).unwinding.get() } {
                        // The forced unwind of a cancelled goroutine (or a panic
                        // of one of its destructors): it has to reach
                        // corosensei's root, still on our thread pointer.
                        std::panic::resume_unwind(panic)
                    }
                    panic
                })
            },
        ));
    }

    /// Resume the coroutine on the goroutine's thread pointer, and leave its
    /// area before the poll returns: the goroutine may resume on another M,
    /// which installs it there.
    #[inline(always)]
    fn resume(&mut self) -> CoroutineResult<(), Outcome<T>> {
        #[cfg(vthread)]
        let _leave = match &self.area {
            Some(area) => {
                // SAFETY: our area, polled by one M at a time (the task's
                // RUNNING bit) and left below before the poll returns, so no
                // other thread has it installed; every area is left before
                // its stack goes back (`finish`, `Drop`).
                let _ = unsafe { area.install() };
                LeaveArea(true)
            }
            None => LeaveArea(false),
        };
        resume_on(&self.ctx, self.co.as_mut().expect("coroutine"))
    }

    /// The coroutine is done: the goroutine's TLS destructors run on its thread
    /// pointer, then its stack goes back.
    fn finish(&mut self) {
        let co = self.co.take().expect("coroutine");
        #[cfg(vthread)]
        if let Some(area) = self.area.take() {
            // SAFETY: our area; no frame of the goroutine is left. Polled by an
            // M (`execute`), so it ends on the OS thread's own thread pointer.
            unsafe { area.run_dtors(crate::vthread::Installed::host()) };
        }
        release_stack(co.into_stack().stack);
    }
}

/// Puts the OS thread back on its own thread pointer when dropped (if armed),
/// unwinding included.
struct LeaveArea(bool);

impl Drop for LeaveArea {
    #[inline]
    fn drop(&mut self) {
        if self.0 {
            crate::vthread::to_host();
        }
    }
}

/// The resume itself, with `CURRENT` set for its length. Not inlined: every
/// thread-local address it uses is computed after the caller's switch of the
/// thread pointer.
#[inline(never)]
fn resume_on<T>(
    g: &GoroutineCtx,
    co: &mut Coroutine<(), (), Outcome<T>, GoStack>,
) -> CoroutineResult<(), Outcome<T>> {
    let _resume = ResumeGuard::new(g);
    co.resume(())
}

/// `Drop`'s forced unwind, with `CURRENT` set (as `resume_on`). A panic that
/// escapes it (a destructor's) comes back as the error, to be re-raised on the
/// M's thread pointer.
#[inline(never)]
fn force_unwind_on<T>(
    g: &GoroutineCtx,
    co: &mut Coroutine<(), (), Outcome<T>, GoStack>,
) -> Result<(), Box<dyn std::any::Any + Send>> {
    let _resume = ResumeGuard::new(g);
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| co.force_unwind()))
}

impl<F, T> Drop for Goroutine<F, T> {
    fn drop(&mut self) {
        let Some(mut co) = self.co.take() else {
            // Never started (or finished: its stack went back already).
            if self.f.is_some() {
                unreserve_stack(self.pool, self.ctx.info.stack_size);
            }
            return;
        };
        // The unwind and the destructors run on the goroutine's thread pointer;
        // then the one installed before comes back: the M's, or the area of the
        // goroutine whose code drops this one (a runtime dropped inside another
        // runtime's goroutine cancels its goroutines there).
        #[cfg(vthread)]
        // SAFETY: the task is being dropped by its one owner; the area is left
        // below (`run_dtors`), and nothing between unwinds (`force_unwind_on`
        // catches).
        let back = self.area.as_ref().map(|a| unsafe { a.install() });
        let mut escaped = None;
        if !co.done() {
            // Suspended: unwind its stack so its destructors run. Blocking calls
            // made by those destructors block the thread (see `unwinding`).
            let mut noop = Context::from_waker(Waker::noop());
            self.ctx
                .cx
                .set((&mut noop as *mut Context<'_>).cast::<Context<'static>>());
            self.ctx.unwinding.set(true);
            escaped = force_unwind_on(&self.ctx, &mut co).err();
        }
        if self.ctx.lock_depth.replace(0) > 0 {
            // Cancelled while locked (`lockos.rs`: a no-op off its M).
            crate::sched::lockos::unlock_current();
        }
        #[cfg(vthread)]
        if let (Some(area), Some(back)) = (self.area.take(), back) {
            // SAFETY: our area; the unwind left no frame of the goroutine;
            // `back` was installed on this thread before (`install`).
            unsafe { area.run_dtors(back) };
        }
        release_stack(co.into_stack().stack);
        if let Some(panic) = escaped {
            std::panic::resume_unwind(panic);
        }
    }
}

/// The stack promised to this goroutine at spawn: it is in this P's cache,
/// else in the pool (a reservation keeps room there, `stack/reserve.rs`).
fn acquire_stack(size: usize) -> Result<Stack, StackError> {
    with_current_and_p(|shared, p| match p {
        // SAFETY: `with_current_and_p` hands us our own P in RUNNING.
        Some(p) => unsafe { p.local().stacks.get(&shared.stacks, size) },
        None => shared.stacks.alloc(size),
    })
}

/// Give a finished goroutine's stack and its promise back: to this P's
/// cache, or to the pool of the runtime that allocated it when that is not
/// the current one (a runtime dropped inside a goroutine of another cancels
/// its goroutines on a foreign M). A stack whose runtime is gone already is
/// leaked, never reused by another pool.
fn release_stack(stack: Stack) {
    let foreign = with_current_and_p(|shared, p| {
        if stack.pool_id() != shared.stacks.id() {
            return Some(stack);
        }
        match p {
            Some(p) => {
                // SAFETY: as above.
                let scavenge = unsafe { p.local().stacks.put(&shared.stacks, stack) };
                if scavenge {
                    shared.scavenge_stacks_soon();
                }
            }
            None => free_stack(shared, stack),
        }
        None
    });
    if let Some(stack) = foreign {
        if let Some(owner) = context::runtime_of_pool(stack.pool_id()) {
            free_stack(&owner, stack);
        }
    }
}

/// A stack and its promise straight back to `shared`'s pool (no P cache at
/// hand), starting the scavenger if the pool asks for one.
fn free_stack(shared: &Arc<Shared>, stack: Stack) {
    let size = stack.size();
    if shared.stacks.free(stack) {
        shared.scavenge_stacks_soon();
    }
    shared.stacks.unreserve(size, 1);
}

/// A goroutine dropped before it ran gives its stack promise back to the
/// pool that made it (the current runtime's, else found by id).
fn unreserve_stack(pool: u32, size: usize) {
    let here = with_current(|shared| {
        let here = shared.stacks.id() == pool;
        if here {
            shared.stacks.unreserve(size, 1);
        }
        here
    });
    if !here {
        if let Some(owner) = context::runtime_of_pool(pool) {
            owner.stacks.unreserve(size, 1);
        }
    }
}

/// Suspend the current goroutine until its task is polled again. Always
/// inlined: a frame between a goroutine's code and its stack switch costs a
/// mispredicted return at every resume (see `yield_now`).
#[inline(always)]
fn suspend(g: &GoroutineCtx) {
    g.suspensions.set(g.suspensions.get().wrapping_add(1));
    // SAFETY: the yielder was set when the coroutine started and is valid while
    // it runs; we are running on it.
    unsafe { &*g.yielder.get() }.suspend(());
}

/// `block_on` inside a goroutine: poll with the goroutine's waker, suspend while
/// pending. Always inlined, as `suspend` (see `yield_now`).
#[inline(always)]
pub(crate) fn block_on_goroutine<Fut: Future>(fut: Fut) -> Fut::Output {
    let mut fut = pin!(fut);
    loop {
        // Re-read the context each time: after a suspension we may be on another
        // thread, resumed by another poll with another `Context`.
        // SAFETY: non-null (caller checked `in_goroutine`) and valid while we run.
        let g = unsafe { &*current() };
        // SAFETY: the resuming poll's `Context` outlives this resume.
        let cx = unsafe { &mut *g.cx.get() };
        if let Poll::Ready(v) = fut.as_mut().poll(cx) {
            return v;
        }
        suspend(g);
    }
}

/// How many times the calling goroutine has suspended (parked or yielded)
/// so far, wrapping; `None` outside a goroutine. Two readings around a call
/// tell whether it blocked (the pool learns from it whether its tasks park).
pub(crate) fn suspensions() -> Option<u32> {
    // SAFETY: non-null pointers in CURRENT are live goroutine contexts.
    unsafe { current().as_ref() }.map(|g| g.suspensions.get())
}

/// Run `f` with the calling goroutine's local table (`None` outside one).
pub(crate) fn with_goroutine_locals<R>(f: impl FnOnce(&local::Locals) -> R) -> Option<R> {
    // SAFETY: non-null pointers in CURRENT are live goroutine contexts.
    unsafe { current().as_ref() }.map(|g| f(&g.locals))
}

/// `runtime::lock_os_thread` in a goroutine: one level deeper; the first
/// level locks the M. False outside a goroutine.
pub(crate) fn lock_thread() -> bool {
    // SAFETY: non-null pointers in CURRENT are live goroutine contexts.
    let Some(g) = (unsafe { current().as_ref() }).filter(|g| !g.unwinding.get()) else {
        return false;
    };
    let d = g.lock_depth.get();
    g.lock_depth.set(d + 1);
    if d == 0 {
        crate::sched::lockos::lock_current();
    }
    true
}

/// `runtime::unlock_os_thread` in a goroutine: one level out; the last
/// level unlocks the M. A no-op when not locked (as Go's).
pub(crate) fn unlock_thread() {
    // SAFETY: non-null pointers in CURRENT are live goroutine contexts.
    if let Some(g) = unsafe { current().as_ref() } {
        match g.lock_depth.get() {
            0 => {}
            1 => {
                g.lock_depth.set(0);
                crate::sched::lockos::unlock_current();
            }
            d => g.lock_depth.set(d - 1),
        }
    }
}

/// A runtime call from a goroutine (channel operations, `go`, locks): yield
/// here if sysmon asked this M's time slice to end (`sched/preempt.rs`). One
/// relaxed load unless some M is asked.
#[inline]
pub(crate) fn preempt_point() {
    if crate::sched::preempt::requested() {
        preempt_yield();
    }
}

#[cold]
#[inline(never)]
fn preempt_yield() {
    if in_goroutine() {
        crate::sched::preempt::honoured();
        yield_goroutine();
    }
}

/// Go's `Gosched` for a goroutine: requeue on the global queue and let others run.
#[inline(always)]
pub(crate) fn yield_goroutine() {
    // SAFETY: non-null (caller checked) and valid while we run.
    let g = unsafe { &*current() };
    // On an M the poll's end requeues the task (`task::poll` reads the mark:
    // one read-modify-write of the state word less per yield);
    // elsewhere, the task wakes itself.
    if !context::mark_yield() {
        // SAFETY: the resuming poll's `Context` is alive.
        unsafe { &*g.cx.get() }.waker().wake_by_ref();
    }
    suspend(g);
}

// ---- spawning --------------------------------------------------------------------

/// Why a goroutine could not be started.
///
/// ```
/// // A stack over the 1 GiB limit cannot be reserved.
/// let err = gosched::Go::new().stack_size(usize::MAX).try_spawn(|| ()).unwrap_err();
/// assert!(matches!(err, gosched::SpawnError::Stack(_)));
/// assert!(err.to_string().starts_with("cannot spawn goroutine"));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum SpawnError {
    /// No stack could be reserved for it (see [`StackError`]'s message: it names
    /// the limit and how to raise it).
    Stack(StackError),
}

impl std::fmt::Display for SpawnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpawnError::Stack(e) => write!(f, "cannot spawn goroutine: {e}"),
        }
    }
}

impl std::error::Error for SpawnError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SpawnError::Stack(e) => Some(e),
        }
    }
}

/// Builder for a goroutine with a name or a stack size of its own.
///
/// ```
/// let h = gosched::Go::new().name("worker").stack_size(1 << 20).spawn(|| 6 * 7);
/// assert_eq!(h.join().unwrap(), 42);
/// ```
#[derive(Debug, Default, Clone)]
pub struct Go {
    name: Option<StdArc<str>>,
    stack_size: Option<usize>,
}

impl Go {
    /// A builder with no name and the runtime's stack size
    /// (`Builder::stack_size`): `Go::new().spawn(f)` is [`go(f)`](crate::go).
    ///
    /// ```
    /// let h = gosched::Go::new().spawn(|| "plain");
    /// assert_eq!(h.join().unwrap(), "plain");
    /// ```
    pub fn new() -> Self {
        Go::default()
    }

    /// Name shown in the stack-overflow message and in traces.
    ///
    /// Also shown by the goroutine dump (`runtime::dump_goroutines`)
    /// while the goroutine lives.
    ///
    /// ```
    /// let ch = gosched::chan::<()>(0);
    /// let rx = ch.clone();
    /// let h = gosched::Go::new().name("resolver").spawn(move || rx.recv());
    /// let dump = loop {
    ///     let mut out = Vec::new();
    ///     gosched::runtime::dump_goroutines(&mut out).unwrap();
    ///     let text = String::from_utf8(out).unwrap();
    ///     if text.contains("[chan receive") {
    ///         break text; // it has parked
    ///     }
    ///     std::thread::yield_now();
    /// };
    /// assert!(dump.contains("\"resolver\" [chan receive"), "{dump}");
    /// ch.close();
    /// h.join().unwrap();
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(StdArc::from(name.into()));
        self
    }

    /// Usable stack bytes for this goroutine (rounded up to pages; minimum 16 KiB).
    ///
    /// The default is the runtime's, [`DEFAULT_STACK_SIZE`] unless
    /// `Builder::stack_size` says otherwise; over
    /// 1 GiB, [`try_spawn`](Go::try_spawn) fails (and `spawn` panics).
    ///
    /// ```
    /// fn depth(n: u64) -> u64 {
    ///     let pad = std::hint::black_box([0u8; 512]); // a large frame
    ///     if n == 0 { u64::from(pad[0]) } else { 1 + depth(n - 1) }
    /// }
    /// assert_eq!(gosched::coro::DEFAULT_STACK_SIZE, 256 * 1024);
    /// // 2,000 frames of over 512 bytes: more than the default holds.
    /// let h = gosched::Go::new().stack_size(8 << 20).spawn(|| depth(2000));
    /// assert_eq!(h.join().unwrap(), 2000);
    /// ```
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = Some(bytes);
        self
    }

    /// Spawn on the current runtime.
    ///
    /// # Panics
    /// If the stack cannot be reserved; use [`try_spawn`](Go::try_spawn) to get
    /// the error instead.
    ///
    /// ```
    /// let rt = gosched::Runtime::new().unwrap();
    /// // Inside `rt.block_on`, the current runtime is `rt`.
    /// let h = rt.block_on(async { gosched::Go::new().name("child").spawn(|| 2 + 2) });
    /// assert_eq!(rt.block_on(h).unwrap(), 4);
    /// ```
    #[track_caller]
    pub fn spawn<F, T>(self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.try_spawn(f).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Spawn on the current runtime, or say why not.
    ///
    /// ```
    /// let ok = gosched::Go::new().try_spawn(|| 6 * 7).unwrap();
    /// assert_eq!(ok.join().unwrap(), 42);
    /// let too_big = gosched::Go::new().stack_size(2 << 30).try_spawn(|| ());
    /// assert!(too_big.is_err());
    /// ```
    #[track_caller]
    pub fn try_spawn<F, T>(self, f: F) -> Result<JoinHandle<T>, SpawnError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        preempt_point();
        let site = std::panic::Location::caller();
        with_current(|shared| self.spawn_on(shared, f, site))
    }

    pub(crate) fn spawn_on<F, T>(
        self,
        shared: &Arc<Shared>,
        f: F,
        site: &'static std::panic::Location<'static>,
    ) -> Result<JoinHandle<T>, SpawnError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let size = self.stack_size.unwrap_or(shared.config.stack_size);
        let size = stack::round_size(size).map_err(SpawnError::Stack)?;
        let name = self.name;
        let pool = shared.stacks.id();
        // The stack is taken at the first run; promise it now, so that a
        // goroutine accepted here always gets one (`stack/mod.rs`, "Reservations").
        let reserve = |p: Option<&crate::sched::processor::Processor>| match p {
            // SAFETY: `try_spawn_with_id` hands us our own P in RUNNING.
            Some(p) => unsafe { p.local().stacks.reserve(&shared.stacks, size) },
            None => shared.stacks.reserve(size, 1).map(drop),
        };
        let named = name.is_some();
        let names = &shared.names;
        shared
            .try_spawn_with_id(
                move |id| {
                    // Before the task exists: its completion removes it.
                    if let Some(n) = &name {
                        names
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert(id, n.clone());
                        if crate::trace::on() {
                            crate::trace::record_name(shared.trace_rt, id, n);
                        }
                    }
                    Goroutine::new(f, id, name, size, pool)
                },
                crate::sched::task::SpawnInfo {
                    goroutine: true,
                    site,
                    named,
                },
                reserve,
            )
            .map_err(SpawnError::Stack)
    }
}

/// Block on `fut`: inside a goroutine only the goroutine parks (its M runs other
/// work); on a plain thread the thread parks.
///
/// # Panics
/// When called from inside an async task on the runtime (that would block an M):
/// use `.await` there.
///
/// ```
/// // On a plain thread: the thread parks.
/// assert_eq!(gosched::block_on(async { 1 + 1 }), 2);
/// // In a goroutine: only the goroutine parks.
/// let h = gosched::go(|| {
///     let task = gosched::spawn(async { 20 });
///     gosched::block_on(async { task.await.unwrap() + 22 })
/// });
/// assert_eq!(h.join().unwrap(), 42);
/// ```
#[inline(always)]
pub fn block_on<Fut: Future>(fut: Fut) -> Fut::Output {
    // Inlined into the caller down to the stack switch: a frame of ours left
    // between the goroutine's code and the switch costs a mispredicted
    // return at every resume (see `yield_now`).
    if in_goroutine() {
        block_on_goroutine(fut)
    } else {
        block_on_not_in_a_goroutine(fut)
    }
}

/// `block_on` outside a goroutine: the thread parks, or an async task is told
/// to `.await` instead.
#[cold]
#[inline(never)]
fn block_on_not_in_a_goroutine<Fut: Future>(fut: Fut) -> Fut::Output {
    if in_async_task() {
        panic!(
            "gosched::block_on called from inside an async task; that would block the \
             scheduler thread. Use `.await` instead."
        )
    }
    crate::park::block_on_thread(fut)
}

impl<T> JoinHandle<T> {
    /// Wait for the result, blocking the calling goroutine (only the G parks, the
    /// M runs other work) or, outside the runtime, the calling thread.
    ///
    /// # Panics
    /// When called from inside an async task (use `.await` there).
    ///
    /// ```
    /// let h = gosched::go(|| {
    ///     let inner = gosched::go(|| 21);
    ///     inner.join().unwrap() * 2 // parks this goroutine, not its thread
    /// });
    /// assert_eq!(h.join().unwrap(), 42); // parks this thread
    /// ```
    pub fn join(self) -> Result<T, JoinError> {
        block_on(self)
    }
}
