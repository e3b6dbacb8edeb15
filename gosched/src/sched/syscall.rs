//! A blocking call made in place (`gosched::syscall` and
//! `gosched::syscall_local` from a goroutine, `coro/syscall.rs`): run it on
//! the calling M without pretending it is scheduler work.
//!
//! Protocol (Go's `entersyscall` / `exitsyscall`; `status.rs`, "Calls in
//! place"): on entry, if its P is still its own in USER (a load), the M
//! counts the call in its P's `syscalltick` and sets its own `in_call`
//! (plain stores; the P's word stays USER); `f` runs; on return it clears
//! `in_call` and loads the P's word. If the generation
//! moved, sysmon saw the M in the same call for a whole tick and handed the
//! P to another M (`sysmon.rs`, item 1). Then, as Go's `exitsyscall` slow
//! path: the M takes an idle P if there is one and goes on with the poll on
//! it (`MachineCtx::lost_p_in_poll`); else it is P-less for the rest of the
//! poll — a goroutine yields at once (`coro/syscall.rs`), so it waits on the
//! global queue for a P (as Go's `exitsyscall` queues it), and an async task
//! finishes its poll P-less, after which the M looks for an idle P or parks
//! (`machine.rs`).
//!
//! The call's own runtime calls go P-less (`with_current_p` checks
//! `in_syscall`): sysmon may retake the P at any moment, and a call of our
//! own could not tell sysmon it is no longer blocked.

use super::context;
use super::machine::MachineCtx;
use crate::loom::sync::atomic::Ordering::{Relaxed, Release};

/// Run `f`, a call that may block the OS thread, on the calling thread,
/// marking the M as in a system call so the runtime can hand its P to another
/// thread if `f` is slow. Outside the runtime it just calls `f`.
pub(crate) fn in_place<R>(f: impl FnOnce() -> R) -> R {
    let entered = context::current().and_then(|ctx| {
        let pi = ctx.p.get()?;
        if !ctx.in_poll.get() || ctx.in_syscall.get() {
            return None; // scheduler code, or a syscall inside a syscall
        }
        let p = &ctx.shared.procs[pi];
        let user = ctx.pword.get();
        // Only a P that is ours in USER: not one retaken already (the next
        // CAS finds out), nor one held RUNNING by a runtime call that made
        // this call (`with_current_p`'s `entered`; its end stores USER back
        // on a P the return's `still_ours` would take for lost). A load:
        // nobody but us can move the word from RUNNING, and a retake of USER
        // after it is what the return checks for.
        if !p.status.still_ours(user) {
            return None;
        }
        // Owner-only counter, bumped before `in_call` says so (Release,
        // paired with sysmon's Acquire in `owner_in_call`): sysmon must never
        // pair a new call with the previous call's tick.
        p.syscalltick
            .store(p.syscalltick.load(Relaxed).wrapping_add(1), Relaxed);
        ctx.m.in_call.store(true, Release);
        ctx.in_syscall.set(true);
        if crate::trace::on() {
            ctx.shared.trace(pi, crate::trace::Ev::SyscallEnter);
        }
        Some(Entered {
            ctx,
            pi,
            user,
            poll: ctx.poll_seq.get(),
        })
    });
    let _exit = entered;
    f()
}

/// An in-place call in progress: the P it was made on, the word of the
/// poll it was made in, and that poll.
struct Entered {
    ctx: &'static MachineCtx,
    pi: usize,
    user: u64,
    poll: u64,
}

// Leaves the call also when `f` panics (the poll goes on: the panic may be
// caught, or becomes the task's `JoinError`).
impl Drop for Entered {
    fn drop(&mut self) {
        // A goroutine that parked inside `f` may resume on another M (in a
        // migrating runtime): only the M it entered on may look at its own
        // context, and only in the same poll.
        let Some(ctx) = context::current().filter(|c| std::ptr::eq(*c, self.ctx)) else {
            return;
        };
        if ctx.poll_seq.get() != self.poll {
            // `f` parked the goroutine: the poll it entered in has ended,
            // and `execute` cleared `in_call` then.
            return;
        }
        ctx.in_syscall.set(false);
        ctx.m.in_call.store(false, Relaxed);
        if crate::trace::on() {
            ctx.shared.trace(self.pi, crate::trace::Ev::SyscallExit);
        }
        if ctx.p.get() == Some(self.pi) && !ctx.shared.procs[self.pi].status.still_ours(self.user) {
            // Retaken: Go's `exitsyscall` slow path.
            ctx.lost_p_in_poll();
        }
    }
}

/// Run `f`, a call known to block, on the calling thread after handing the
/// P to whoever should have it (Go's `entersyscallblock`): the M takes its
/// own P as sysmon would (USER → RETAKEN, bumping the generation) and calls
/// `handoffp`. When `f` returns, Go's `exitsyscall` slow path: an idle P if
/// there is one, else P-less for the rest of the poll.
pub(crate) fn in_place_blocking<R>(f: impl FnOnce() -> R) -> R {
    let gave = context::current().and_then(|ctx| {
        let pi = ctx.p.get()?;
        let p = &ctx.shared.procs[pi];
        if !ctx.in_poll.get() || ctx.in_syscall.get() || !p.status.retake(ctx.pword.get()) {
            return None;
        }
        ctx.p.set(None);
        ctx.shared.handoffp(pi);
        Some((ctx, ctx.poll_seq.get()))
    });
    struct Back(Option<(&'static MachineCtx, u64)>);
    impl Drop for Back {
        fn drop(&mut self) {
            // Only in the poll that gave the P away: if `f` parked the
            // goroutine, a later poll has its own P.
            if let Some((ctx, poll)) = self.0 {
                // Only on the M it gave the P away on (a goroutine that
                // parked inside `f` may resume on another M).
                let here = context::current().is_some_and(|c| std::ptr::eq(c, ctx));
                if here && ctx.poll_seq.get() == poll && ctx.p.get().is_none() {
                    ctx.lost_p_in_poll();
                }
            }
        }
    }
    let _back = Back(gave);
    f()
}

/// Whether the calling M is inside a poll without a P (sysmon retook it and
/// no idle P was free when the M noticed).
pub(crate) fn lost_p_in_poll() -> bool {
    context::current().is_some_and(|ctx| ctx.in_poll.get() && ctx.p.get().is_none())
}
