//! A blocking call made in place (`gosched::syscall` when it does not hand the
//! call off, `coro/syscall.rs`; `gosched::syscall_local` always): run it on
//! the calling M without pretending it is scheduler work.
//!
//! Protocol (Go's `entersyscall` / `exitsyscall`, on the P status word of
//! `status.rs`): on entry the P goes USER → SYSCALL (by CAS: sysmon may have
//! retaken it already) and the M keeps a note of it; `f` runs; on exit the M CASes
//! SYSCALL → USER. If that fails, sysmon retook the P while `f` blocked and handed
//! it to another M: this M is P-less for the rest of the poll, and the schedule
//! loop then looks for an idle P or parks (see `machine.rs`). sysmon's side —
//! noticing a P that has sat in SYSCALL for a whole tick and handing it off — is
//! the sysmon issue's; until then a slow `syscall` holds its P, as any blocking
//! poll does.

use super::machine::MachineCtx;
use super::{context, status};

/// Run `f`, a call that may block the OS thread, on the calling thread,
/// marking the P as in a system call so the runtime can hand the P to another
/// thread if `f` is slow. Outside the runtime it just calls `f`.
pub(crate) fn in_place<R>(f: impl FnOnce() -> R) -> R {
    let entered = context::current().and_then(|ctx| {
        let pi = ctx.p.get()?;
        let p = &ctx.shared.procs[pi];
        // From USER (inside a poll). A nested syscall or scheduler code (RUNNING)
        // does not enter.
        p.status.enter_syscall().then_some((ctx, pi))
    });
    // Leaves the syscall state also when `f` panics (the poll goes on: the
    // panic may be caught, or becomes the task's `JoinError`).
    struct Exit(Option<(&'static MachineCtx, usize)>);
    impl Drop for Exit {
        fn drop(&mut self) {
            if let Some((ctx, pi)) = self.0 {
                let p = &ctx.shared.procs[pi];
                if !p.status.exit_syscall() {
                    // Retaken: P-less until the poll ends.
                    ctx.p.set(None);
                }
            }
        }
    }
    let _exit = Exit(entered);
    f()
}

/// Goroutines homed on the calling M (0 off our Ms): what a blocking call
/// made in place would hold up.
pub(crate) fn homed_on_this_m() -> usize {
    context::current().map_or(0, |ctx| ctx.homed_here())
}

impl status::PStatus {
    /// USER → SYSCALL. False if the P is not in USER (retaken, or not in a poll).
    pub(crate) fn enter_syscall(&self) -> bool {
        self.cas(status::USER, status::SYSCALL)
    }

    /// SYSCALL → USER. False if sysmon retook the P meanwhile.
    pub(crate) fn exit_syscall(&self) -> bool {
        self.cas(status::SYSCALL, status::USER)
    }
}
