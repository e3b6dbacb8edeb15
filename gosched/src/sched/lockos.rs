//! `lock_os_thread` (Go's `LockOSThread`): a goroutine that owns its M.
//!
//! Goroutines move between Ms (`machine.rs`). A locked goroutine does not:
//! it runs only on the M it locked on, and that M runs nothing else while
//! the lock is held. Go's protocol, in the same three steps:
//!
//! - *Lock.* During its own poll the goroutine writes its M into its header
//!   (`Header::lockedm`) and the M records it (`MachineCtx::lockedg`). Both
//!   are cleared by the unlock that brings its depth to zero, during its own
//!   poll again, or when it ends: its coroutine's return (a panic included)
//!   and its drop (a cancellation, polled on its M) call `unlock_current`
//!   while it is still the M's running task (`coro`), and `task::complete`
//!   drops the header's M.
//! - *Stop* (`stoplockedm`). Whenever the locked goroutine is not running
//!   (it parked, yielded, or was woken while it ran), its M gives its P away
//!   (`handoffp`: to an M for the P's queue, timers or the global queue, or
//!   idle) and parks on its own parker, on no list, until a P is handed to
//!   it through `nextp`.
//! - *Start* (`startlockedm`). The goroutine, once runnable, is queued like
//!   any other. The M that takes it off a queue (`schedule`) sees its
//!   `lockedm`, puts it in that M's `lockedg_next`, hands that M its own P
//!   (`Machine::start`: the Release swap of `nextp` publishes the slot) and
//!   looks for a P again itself, as Go's `startlockedm` then `stopm`. The
//!   locked M takes the P and the goroutine together (Acquire) and runs it.
//!
//! So at any moment a locked goroutine is running on its M, queued, parked,
//! or in its M's slot, and its M holds a P only while running it (or on its
//! way to give the P away). Nothing hands a locked M a P but `startlockedm`:
//! it is not on the idle list, nor the timer sleeper.
//!
//! Counting: the goroutine's depth (Go's nested `lockedExt`) lives in its
//! goroutine context (`coro`). A goroutine that ends while locked releases
//! its M (Go instead exits the thread, since its state may have been
//! changed; we keep it: the docs say so). At shutdown a locked goroutine is
//! cancelled like any other (teardown, on whichever thread runs it; one
//! handed to its M as the M exits, by that M).

use super::context;
use super::machine::{Machine, MachineCtx};
use super::status;
use super::task::Task;
use std::sync::atomic::Ordering::Relaxed;

use crate::loom::sync::atomic::Ordering::Acquire;
use std::sync::Arc;

/// The calling goroutine (`in_goroutine`, checked by the caller) takes the
/// M lock at depth 1: locks it to this M.
pub(crate) fn lock_current() {
    let Some(ctx) = context::current() else {
        return;
    };
    let Some(g) = ctx.running.get() else {
        return;
    };
    // SAFETY: `running` is the task this M is polling now (`execute`), kept
    // alive by the run-queue reference `execute` holds across the poll; we
    // are that poll.
    let header = unsafe { g.as_ref() };
    debug_assert!(ctx.lockedg.get().is_none_or(|l| l == g));
    // SAFETY: we are the task's running poll (`Header::set_lockedm`).
    unsafe { header.set_lockedm(Some(ctx.m.clone())) };
    ctx.set_lockedg(Some(g));
}

/// The calling goroutine released its last lock, or is cancelled or ends
/// holding one: unlock it from its M. Off its M (a cancellation unwinding
/// it elsewhere) there is nothing to clear: its M has stopped and the
/// header's M goes when the task completes.
pub(crate) fn unlock_current() {
    let Some(ctx) = context::current() else {
        return;
    };
    let Some(g) = ctx.running.get() else {
        return;
    };
    if ctx.lockedg.get() != Some(g) {
        return;
    }
    ctx.set_lockedg(None);
    // SAFETY: as in `lock_current`: `running` is our own live poll.
    unsafe { g.as_ref().set_lockedm(None) };
}

impl MachineCtx {
    /// Record (or clear) the goroutine locked to this M, and its mirror for
    /// other threads (`Machine::locked`, stats).
    fn set_lockedg(&self, g: Option<std::ptr::NonNull<super::task::Header>>) {
        self.lockedg.set(g);
        self.m.locked.store(g.is_some(), Relaxed);
    }

    /// Whether this M is locked to a goroutine.
    #[inline]
    pub(super) fn is_locked(&self) -> bool {
        self.lockedg.get().is_some()
    }

    /// Go's `stoplockedm`, for a locked M whose goroutine is not running:
    /// give the P away and park until `startlockedm` hands us a P with our
    /// goroutine, which is returned to run. `None` at shutdown (the caller
    /// loops and exits).
    pub(super) fn stoplockedm(&self) -> Option<Task> {
        let shared = &*self.shared;
        loop {
            if let Some((pi, _)) = self.m.take_nextp() {
                // (A P of our own too, if the goroutine was queued and
                // handed back before we gave ours away.)
                self.hand_off_own_p();
                self.p.set(Some(pi));
                self.proc(pi).set_owner(&self.m);
                let t = self.m.take_lockedg();
                debug_assert!(
                    t.is_some(),
                    "a P handed to a locked M comes with its goroutine"
                );
                if let Some(t) = t {
                    return Some(t);
                }
                continue;
            }
            if shared.shutdown.load(Acquire) {
                return None;
            }
            self.hand_off_own_p();
            super::preempt::clear(&self.m);
            self.m
                .parker
                .wait(|| shared.shutdown.load(Acquire) || self.m.has_nextp());
        }
    }

    /// Go's `startlockedm`: `task` is locked to `m`, another M, which only
    /// may run it: hand it to `m` with our P, and go on P-less (the caller
    /// loops: an idle P, or park).
    pub(super) fn startlockedm(&self, task: Task, m: &Arc<Machine>) {
        let pi = self.p.take().expect("startlockedm without a P");
        self.stop_spinning();
        m.put_lockedg(task);
        // Stays RUNNING: handed over, as `startm` hands a P.
        self.proc(pi).set_owner(m);
        m.start(pi, false);
    }

    /// Give the P we hold (if any) to whoever should have it (`handoffp`).
    fn hand_off_own_p(&self) {
        if let Some(pi) = self.p.take() {
            self.stop_spinning();
            // We own it (RUNNING): nobody else may change that state.
            self.shared.procs[pi].status.store(status::RETAKEN);
            self.shared.handoffp(pi);
        }
    }
}
