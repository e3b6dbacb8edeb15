//! Shutdown: stop the Ms, then cancel everything that is left.
//!
//! `begin_shutdown` sets `Shared::shutdown` and wakes every parked M (idle list,
//! timer sleeper) and sysmon; each M sees the flag at the top of
//! `find_runnable`, gives its P back and exits (`runtime::shutdown` waits for
//! `live_ms` to reach 0; a locked goroutine handed to its M meanwhile is
//! cancelled by that M, or by teardown if the M was gone). Then `teardown`, on the dropping thread, with no M
//! left: it closes the owned list and the global queue, so that from here on a
//! task pushed to the global queue (a wake from a foreign thread, a spawn) is
//! cancelled by whoever pushes it, and a task reaching its first park is
//! cancelled by its poll; then it cancels every queued and every parked task and
//! frees timers and cached stacks.

use std::time::{Duration, Instant};

use super::context::EnterGuard;
use super::task::Task;
use super::Shared;
use crate::loom::lock;
use crate::loom::sync::atomic::Ordering::*;
use std::sync::Arc;

impl Shared {
    /// Stop the runtime: wake the Ms, wait up to `timeout` (`None`: for ever) for
    /// them to finish the polls they are in and exit, then `teardown`. False if
    /// some M was still inside a poll when the time ran out (it is left running
    /// detached, and nothing is torn down). The caller is not one of our Ms.
    pub(crate) fn shutdown_and_wait(self: &Arc<Self>, timeout: Option<Duration>) -> bool {
        self.begin_shutdown();
        // Real time (a virtual clock must not stretch or cut a shutdown).
        let deadline = timeout.map(|t| Instant::now() + t.min(super::timers::MAX_WAIT));
        {
            let mut live = lock(&self.live_ms);
            while *live > 0 {
                live = match deadline {
                    None => self.ms_exited.wait(live).unwrap_or_else(|e| e.into_inner()),
                    Some(d) => {
                        let now = Instant::now();
                        if now >= d {
                            return false;
                        }
                        self.ms_exited
                            .wait_timeout(live, d - now)
                            .unwrap_or_else(|e| e.into_inner())
                            .0
                    }
                };
            }
        }
        let threads: Vec<_> = lock(&self.threads).drain(..).collect();
        for h in threads {
            let _ = h.join();
        }
        #[cfg(not(loom))]
        self.stop_sysmon();
        let _enter = EnterGuard::new(self);
        self.teardown();
        true
    }

    /// Stop scheduling: wake every parked M so it exits.
    pub(crate) fn begin_shutdown(&self) {
        self.shutdown.store(true, SeqCst);
        for m in self.drain_idle_ms() {
            m.parker.wake();
        }
        if let Some(m) = &*lock(&self.sleeper) {
            m.wake();
        }
        // Nobody polls from now on: whoever waits on a socket gets an error.
        #[cfg(not(loom))]
        self.netpoll.shutdown();
        #[cfg(not(loom))]
        self.sysmon.wake();
        // An M locked to a goroutine parks on its own parker, on no list
        // (`lockos.rs`): wake every M.
        let all: Vec<_> = lock(&self.machines).clone();
        for m in all {
            m.parker.wake();
        }
    }

    /// After every M stopped: cancel every task (parked ones from the owned list,
    /// runnable ones from the queues), free timers and cached stacks.
    pub(crate) fn teardown(&self) {
        self.owned.close();
        self.global_close_and_drain()
            .into_iter()
            .for_each(Task::shutdown);
        for p in self.procs.iter() {
            p.drain().into_iter().for_each(Task::shutdown);
        }
        // Locked goroutines handed to their M as it exited.
        let machines: Vec<_> = lock(&self.machines).clone();
        for m in machines {
            m.take_lockedg().into_iter().for_each(Task::shutdown);
        }
        // Cancelling runs destructors (goroutine stacks unwind), which may wake
        // or spawn: those are cancelled on the spot (closed queue), so one pass
        // over the parked tasks finishes the job.
        while let Some(t) = self.owned.pop() {
            t.shutdown();
        }
        // Taken before any P's cache is borrowed: a scavenger flushing idle
        // Ps' caches (`flush_idle_stack_caches`, which holds it throughout)
        // is done, or sees the shutdown flag and touches none.
        #[cfg(not(loom))]
        let flush = self.stacks.lock_cache_flush();
        for p in self.procs.iter() {
            p.timers.clear();
            // SAFETY: no M runs any more: this thread is the only user of every
            // P but a scavenger's flush, which `flush` (above) excludes.
            #[cfg(not(loom))]
            unsafe {
                p.local().stacks.drain(&self.stacks, &flush)
            };
        }
        #[cfg(not(loom))]
        drop(flush);
        // Free the stacks' memory now; the slabs are unmapped when the last
        // handle to the runtime (a JoinHandle, a waker) is gone.
        #[cfg(not(loom))]
        self.stacks.trim();
        #[cfg(not(loom))]
        self.blocking.shutdown();
        self.global_timers.clear();
    }
}
