//! Preemption requests: sysmon asks the M running a long time slice to let
//! the rest of its P run (Go's `preemptone`, without the signal).
//!
//! # Protocol
//!
//! Each M has one flag, `Machine::preempt` (a std atomic: a hint, outside
//! loom's model). sysmon sets it (`request`) when a P's schedule tick has not
//! moved for `FORCE_PREEMPT` (10 ms, Go's `forcePreemptNS`): one task, or a
//! chain of tasks handing each other the slice through `runnext`, has held
//! the P that long. Nothing interrupts Rust code; the flag is honoured at
//! the task's next runtime call:
//!
//! * a goroutine yields there (`coro::preempt_point`: channel operations,
//!   `go`, locks, sleeps) and goes to the back of its queue;
//! * an async task's next gosched resource (a channel future, a sleep)
//!   returns `Pending` after waking the task (`poll_preempted`), so the
//!   poll returns and the task is requeued: tokio's coop budget, driven by
//!   time instead of a count.
//!
//! The flag is cleared when the poll ends (`execute`: the task yielded,
//! parked or completed), when a goroutine honours it, when the M parks or
//! exits, and by sysmon itself if the P's word moved while it asked. A slice handed on
//! through `runnext` keeps its `schedtick`, so sysmon asks again 10 ms
//! later; a request that lands after its poll ended only makes the next
//! poll yield early: harmless. An M clears its flag before it parks and
//! when it exits, so an idle M never keeps `REQUESTS` up.
//!
//! `REQUESTS` counts the flags set in the whole process, so the check on the
//! hot path is one relaxed load of a read-mostly word; only while some M is
//! asked to yield does a runtime call look at its own M's flag.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use crossbeam_utils::CachePadded;

use super::context;
use super::machine::Machine;

/// Flags set across every runtime of the process.
/// On its own cache line: read by every channel operation, written only by
/// sysmon and by the Ms it asks.
static REQUESTS: CachePadded<AtomicUsize> = CachePadded::new(AtomicUsize::new(0));

/// sysmon: ask the task running on `m` to yield at its next runtime call.
pub(crate) fn request(m: &Machine) {
    if !m.preempt.swap(true, Relaxed) {
        REQUESTS.fetch_add(1, Relaxed);
    }
}

/// The poll running on `m` ended (or a goroutine honoured the request).
#[inline]
pub(crate) fn clear(m: &Machine) {
    if m.preempt.load(Relaxed) && m.preempt.swap(false, Relaxed) {
        REQUESTS.fetch_sub(1, Relaxed);
    }
}

/// Is the task polling on this M asked to yield? One relaxed load unless
/// some M somewhere is.
#[inline]
pub(crate) fn requested() -> bool {
    REQUESTS.load(Relaxed) != 0 && requested_here()
}

#[cold]
#[inline(never)]
fn requested_here() -> bool {
    context::current().is_some_and(|ctx| {
        // Never inside an in-place syscall's `f`: a yield there would park
        // the goroutine in the middle of its call (its M `in_call`).
        ctx.in_poll.get() && !ctx.in_syscall.get() && ctx.m.preempt.load(Relaxed)
    })
}

/// A goroutine is about to yield for a request: clear it, so the yield
/// happens once.
pub(crate) fn honoured() {
    if let Some(ctx) = context::current() {
        clear(&ctx.m);
    }
}

/// For the poll of an async gosched resource: `Pending` (the task woken
/// first, so it is requeued at once) while the M is asked to yield. The
/// request stays set until the poll ends, so every gosched resource the
/// task polls meanwhile says `Pending` too and the poll unwinds.
#[inline]
pub(crate) fn poll_preempted(cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
    if requested() {
        cx.waker().wake_by_ref();
        return std::task::Poll::Pending;
    }
    std::task::Poll::Ready(())
}
