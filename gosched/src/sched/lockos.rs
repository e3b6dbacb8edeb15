//! `lock_os_thread` (Go's `LockOSThread`): a goroutine that owns its M.
//!
//! Every started goroutine already resumes on the M where it first ran
//! (`machine.rs`, "The thread rule"; a migratable goroutine is homed here
//! when it locks). Locking adds Go's other half: **the M runs nothing else**
//! — no task from a P's queue, the global queue or a steal — while one of
//! its goroutines holds the lock. When its homed goroutines are all parked,
//! the locked M gives its P to another M (`handoffp`, Go's `stoplockedm`)
//! and parks until one of them is readied (its inbox), then takes a P back
//! (an idle one, or through the want-P list) and runs it (Go's
//! `startlockedm`).
//!
//! Movable work that lands on the locked M's P (a goroutine it spawns, a
//! task it readies, due timers aside, which it runs) makes the M hand the P
//! to another M and queue for one itself (the want-P list), so that work
//! runs elsewhere at once.
//!
//! Under the thread rule other goroutines homed on the same M cannot run
//! anywhere else, so the locked M still runs those (they share the thread
//! with the locked goroutine either way); only movable work is refused.
//!
//! Counting: a goroutine's own depth (Go's nested `lockedExt`) lives in its
//! goroutine context (`coro`); the M counts the goroutines that hold a lock
//! (`MachineCtx::locked`), so that two goroutines homed on one M may both
//! lock. A goroutine that ends while locked releases the M's count (Go
//! instead exits the thread, since its state may have been changed; we keep
//! it: say so in the docs).

use super::context;
use super::status;

/// The calling goroutine (`in_goroutine`, checked by the caller) takes the
/// M lock: homes it here if it is a migratable goroutine, and counts it.
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
    if header.home_here().is_none() {
        // A migratable goroutine: home it on this M for the rest of its life
        // (written during its own poll: no waker reads `home` while it runs,
        // and the poll's end orders this write before any later ready).
        ctx.m
            .homed
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Under the task's owned-list shard lock: an exiting M's
        // `cancel_homed` reads `home` of linked tasks under it.
        ctx.shared.owned.under_shard_lock(header.id, || {
            // SAFETY: as above; we are the task's poll, and the shard lock
            // orders this write with `is_homed_on`'s read.
            unsafe { header.set_home_running(ctx.m.clone()) }
        });
    }
    ctx.locked.set(ctx.locked.get() + 1);
    #[cfg(not(loom))]
    ctx.m
        .locked_hint
        .store(true, std::sync::atomic::Ordering::Relaxed);
}

/// The calling goroutine released its last lock (or ended holding one).
pub(crate) fn unlock_current() {
    if let Some(ctx) = context::current() {
        let n = ctx.locked.get();
        debug_assert!(n > 0, "M lock count underflow");
        ctx.locked.set(n.saturating_sub(1));
        #[cfg(not(loom))]
        if n <= 1 {
            ctx.m
                .locked_hint
                .store(false, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

impl super::machine::MachineCtx {
    /// `find_runnable` for a locked M: only homed work. Returns the task to
    /// run, or `None` after giving the P away and parking (the caller loops).
    pub(super) fn find_locked(&self) -> Option<(super::task::Task, bool)> {
        let shared = &*self.shared;
        if self.has_homed_work() {
            let Some(pi) = self.p.get() else {
                self.wait_for_p();
                return None; // loop: with a P (or shutting down)
            };
            self.stop_spinning();
            let p = &shared.procs[pi];
            // sysmon's requests and placement find the M of a P here.
            p.set_owner(&self.m);
            self.run_timers(p);
            if p.has_work() || (shared.global_len() > 0 && shared.idle_ps() == 0) {
                // Movable work waits on our P (a G our goroutine spawned or
                // readied, or the global queue with no idle P to take it):
                // this M may not run it, so the P goes to an M that may, and
                // we queue for a P for our own (Go hands the P over whenever
                // the locked G is not the one running).
                self.hand_off_own_p();
                self.wait_for_p();
                return None;
            }
            return self.take_homed();
        }
        // Nothing of ours to run: the P goes to whoever should have it (Go's
        // `stoplockedm` → `handoffp`), and we wait for our goroutines.
        self.hand_off_own_p();
        super::preempt::clear(&self.m);
        self.m.parker.wait(|| {
            shared.shutdown.load(std::sync::atomic::Ordering::Acquire) || self.has_homed_work()
        });
        None
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

    /// Whether this M is locked to one of its goroutines.
    #[inline]
    pub(super) fn is_locked(&self) -> bool {
        self.locked.get() > 0
    }
}
