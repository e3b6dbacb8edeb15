//! Which runtime, M and P the calling code belongs to.
//!
//! Three thread-locals answer it:
//! - `MACHINE`: on one of our M threads, its `MachineCtx` (the runtime, the P it
//!   holds, whether a poll is running). Installed by `mstart` for the thread's
//!   life.
//! - `ENTERED`: on a plain thread inside `Runtime::block_on` (or teardown), the
//!   runtime it entered (`EnterGuard`).
//! - otherwise the lazily built global runtime (`global`).
//!
//! Every accessor that reads a thread-local is `#[inline(never)]`: a goroutine may
//! resume on another OS thread (the opt-in migrating mode, and today's default),
//! so a thread-local address must be recomputed on every call rather than cached
//! by the optimiser across a suspension point.
//!
//! A runtime call made from inside a poll needs the P in RUNNING: `with_current_p`
//! CASes USER→RUNNING around the call (see `status.rs`), and hands the caller
//! `None` when sysmon retook the P, so every runtime call has a P-less path.

use std::cell::Cell;
use std::ptr;

#[cfg(not(loom))]
use super::config::Config;
use super::machine::MachineCtx;
use super::processor::Processor;
use super::status::{self, EnterRuntime};
use super::Shared;
use std::sync::Arc;

#[cfg(not(loom))]
std::thread_local! {
    /// The M context of the calling thread, if it is one of our Ms.
    static MACHINE: Cell<*const MachineCtx> = const { Cell::new(ptr::null()) };
    /// The runtime entered by `Runtime::block_on` on a plain thread.
    static ENTERED: Cell<*const Shared> = const { Cell::new(ptr::null()) };
}

// loom runs every model thread on one OS thread: its own thread-locals keep them
// apart.
#[cfg(loom)]
loom::thread_local! {
    static MACHINE: Cell<*const MachineCtx> = Cell::new(ptr::null());
    static ENTERED: Cell<*const Shared> = Cell::new(ptr::null());
}

/// The calling thread's M context, if it is an M.
#[inline(never)]
pub(crate) fn current() -> Option<&'static MachineCtx> {
    // A goroutine's code runs on its own thread pointer (`vthread`): the M's
    // context is in the OS thread's own TLS.
    #[cfg(not(loom))]
    // SAFETY: the host's slot lives as long as the OS thread running us.
    let p = unsafe {
        &*crate::vthread::host_addr(MACHINE.with(|m| m as *const Cell<*const MachineCtx>))
    }
    .get();
    #[cfg(loom)]
    let p = MACHINE.with(|m| m.get());
    // SAFETY: the context lives on the M's thread stack for the whole time the
    // pointer is installed (`set_machine` in `mstart`), and is only used on that
    // thread.
    unsafe { p.as_ref() }
}

/// `mstart`: install the calling M's context until the guard is dropped.
pub(crate) fn install_machine(ctx: &MachineCtx) -> MachineGuard {
    MACHINE.with(|m| m.set(ctx));
    MachineGuard(())
}

/// Removes the M context installed by `install_machine` (also on unwinding).
pub(crate) struct MachineGuard(());

impl Drop for MachineGuard {
    fn drop(&mut self) {
        // The slot is the OS thread's own: leave a goroutine's area first (also
        // when a panic ends the schedule loop with one installed). The M then
        // exits on its own thread pointer (glibc's exit path reads its TCB).
        #[cfg(not(loom))]
        crate::vthread::to_host();
        MACHINE.with(|m| m.set(ptr::null()));
    }
}

/// The global runtime (started on first use, never torn down).
#[cfg(not(loom))]
pub(crate) fn global() -> &'static Arc<Shared> {
    static GLOBAL: std::sync::OnceLock<Arc<Shared>> = std::sync::OnceLock::new();
    GLOBAL.get_or_init(|| Shared::new(Config::global()))
}

/// Every runtime built in this process, by stack-pool id: a goroutine's stack
/// goes back to the pool that allocated it even when the goroutine ends (or is
/// cancelled) on a thread of another runtime — dropping runtime A inside a
/// goroutine of runtime B cancels A's goroutines on B's M. Consulted only then.
#[cfg(not(loom))]
static RUNTIMES: std::sync::Mutex<Vec<(u32, std::sync::Weak<Shared>)>> =
    std::sync::Mutex::new(Vec::new());

/// `Shared::new`: make the runtime findable by its stack pool's id.
#[cfg(not(loom))]
pub(crate) fn register_runtime(shared: &Arc<Shared>) {
    let mut all = RUNTIMES.lock().unwrap_or_else(|e| e.into_inner());
    all.retain(|(_, w)| w.strong_count() > 0);
    all.push((shared.stacks.id(), Arc::downgrade(shared)));
}

/// Every live runtime (the `SIGQUIT` dump).
#[cfg(not(loom))]
pub(crate) fn all_runtimes() -> Vec<Arc<Shared>> {
    let all = RUNTIMES.lock().unwrap_or_else(|e| e.into_inner());
    all.iter().filter_map(|(_, w)| w.upgrade()).collect()
}

/// The live runtime whose stack pool has id `pool`.
#[cfg(not(loom))]
pub(crate) fn runtime_of_pool(pool: u32) -> Option<Arc<Shared>> {
    let all = RUNTIMES.lock().unwrap_or_else(|e| e.into_inner());
    all.iter()
        .find(|(id, _)| *id == pool)
        .and_then(|(_, w)| w.upgrade())
}

/// Run `f` with the runtime the calling code belongs to: the M's, else the one
/// entered by `Runtime::block_on`, else the global runtime.
#[inline(never)]
pub(crate) fn with_current<R>(f: impl FnOnce(&Arc<Shared>) -> R) -> R {
    if let Some(ctx) = current() {
        return f(&ctx.shared);
    }
    let entered = ENTERED.with(|e| e.get());
    if !entered.is_null() {
        // SAFETY: `EnterGuard` keeps the runtime alive while it is entered, and
        // `arc()` gives an owned handle for the call.
        let shared = unsafe { &*entered }.arc();
        return f(&shared);
    }
    #[cfg(not(loom))]
    return f(global());
    #[cfg(loom)]
    panic!("a loom model must enter its runtime (EnterGuard) before using it");
}

/// `f` with the runtime the calling code belongs to (the M's, else the one
/// entered by `Runtime::block_on`), or `None` outside every runtime: unlike
/// `with_current`, this never starts the global runtime.
#[cfg(not(loom))]
pub(crate) fn with_current_opt<R>(f: impl FnOnce(&Shared) -> R) -> Option<R> {
    if let Some(ctx) = current() {
        return Some(f(&ctx.shared));
    }
    let entered = ENTERED.with(|e| e.get());
    // SAFETY: `EnterGuard` keeps the runtime alive while it is entered.
    (!entered.is_null()).then(|| f(unsafe { &*entered }))
}

/// Marks the calling plain thread as inside a runtime until dropped.
pub(crate) struct EnterGuard {
    prev: *const Shared,
    _rt: Arc<Shared>,
}

impl EnterGuard {
    pub(crate) fn new(shared: &Arc<Shared>) -> Self {
        let prev = ENTERED.with(|e| e.replace(Arc::as_ptr(shared)));
        EnterGuard {
            prev,
            _rt: shared.clone(),
        }
    }
}

impl Drop for EnterGuard {
    fn drop(&mut self) {
        ENTERED.with(|e| e.set(self.prev));
    }
}

/// Run `f` with the P this thread holds, if it is one of `shared`'s Ms and holds
/// one. Inside a poll (status USER) this CASes USER→RUNNING first and restores
/// USER after; if sysmon retook the P, the M is P-less from then on and `f` gets
/// `None` (every runtime call has a P-less path).
#[inline]
pub(crate) fn with_current_p<R>(shared: &Shared, f: impl FnOnce(Option<&Processor>) -> R) -> R {
    let Some(ctx) = current() else {
        return f(None);
    };
    if !ptr::eq(Arc::as_ptr(&ctx.shared), shared) {
        return f(None);
    }
    let Some(pi) = ctx.p.get() else {
        return f(None);
    };
    let p = &shared.procs[pi];
    if !ctx.in_poll.get() {
        // Scheduler code: the P is ours in RUNNING.
        return f(Some(p));
    }
    if ctx.in_syscall.get() {
        // A runtime call made by an in-place syscall's `f`: sysmon may take
        // the P any moment (`syscall.rs`), so go P-less.
        return f(None);
    }
    match p.status.enter_runtime(ctx.pword.get()) {
        EnterRuntime::Nested => f(Some(p)),
        EnterRuntime::Entered => entered(p, f),
        EnterRuntime::Retaken => {
            // Go's `exitsyscall`: an idle P if there is one, else P-less.
            ctx.lost_p_in_poll();
            let Some(pi) = ctx.p.get() else {
                return f(None);
            };
            let p = &shared.procs[pi];
            match p.status.enter_runtime(ctx.pword.get()) {
                EnterRuntime::Entered => entered(p, f),
                EnterRuntime::Nested => f(Some(p)),
                // Retaken again already (sysmon, or `set_procs`): P-less.
                EnterRuntime::Retaken => {
                    ctx.p.set(None);
                    f(None)
                }
            }
        }
    }
}

/// `f` with P `p`, entered (USER → RUNNING) by the caller; USER again after,
/// also if `f` panics (a poll may catch the panic and go on).
#[inline]
fn entered<R>(p: &Processor, f: impl FnOnce(Option<&Processor>) -> R) -> R {
    struct Leave<'a>(&'a Processor);
    impl Drop for Leave<'_> {
        fn drop(&mut self) {
            self.0.status.store(status::USER);
        }
    }
    let _leave = Leave(p);
    f(Some(p))
}

/// `with_current` and `with_current_p` with one thread-local lookup: `f` gets
/// the current runtime and, if this thread is one of its Ms holding a P, the P.
#[inline(never)]
pub(crate) fn with_current_and_p<R>(f: impl FnOnce(&Arc<Shared>, Option<&Processor>) -> R) -> R {
    match current() {
        Some(ctx) => {
            let shared = &ctx.shared;
            with_current_p(shared, |p| f(shared, p))
        }
        None => with_current(|shared| f(shared, None)),
    }
}

/// True while a task's poll runs on the calling M (goroutine or async task).
pub(crate) fn in_poll() -> bool {
    current().is_some_and(|c| c.in_poll.get())
}

/// `yield_now`: the current task goes to the back of a queue after this
/// poll (`execute`; a goroutine's is requeued by `task::poll`, which reads
/// the mark). False off any M: nothing recorded it.
pub(crate) fn mark_yield() -> bool {
    match current() {
        Some(ctx) => {
            ctx.yielded.set(true);
            true
        }
        None => false,
    }
}

/// Whether the poll running on this M yielded (`mark_yield`): its task is
/// requeued by the transition that ends the poll (`task::poll`).
#[inline]
pub(crate) fn yield_marked() -> bool {
    current().is_some_and(|ctx| ctx.yielded.get())
}
