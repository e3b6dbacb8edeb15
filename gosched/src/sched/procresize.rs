//! `set_procs`: resizing the Ps of a running runtime (Go's `procresize`,
//! without stopping the world).
//!
//! # States
//!
//! A runtime allocates `config.max_procs` Ps once; `Shared::nprocs` of them
//! are live, the rest DEAD (`status.rs`). `nprocs` changes only under the
//! scheduler lock, and every P that dies does so under it too, so "a P is
//! DEAD" and "a P is on the idle list" are always read consistently there.
//!
//! # Growing
//!
//! Under the lock: `nprocs` first, then each DEAD P in the new range goes
//! through `pidleput` (an M waiting for a P takes it at once, else it joins
//! the idle list). A P in the new range that is not DEAD is still held by
//! an M that was about to give it up after a shrink: it sees that the P is
//! live again and keeps it. Then `wakep`, for queued work.
//!
//! # Shrinking
//!
//! Under the lock: `nprocs` first; idle Ps beyond it leave the idle list and
//! die at once (`kill_p`). A P beyond it that an M holds dies when its owner
//! next looks:
//!
//! * the M in its schedule loop (`find_runnable`'s top: `release_dying_p`);
//! * an M giving its P back (`pidleput` kills instead of idling);
//! * sysmon, which retakes a dying P in USER (a poll or a call) at once, and
//!   `handoffp`, which kills a dying P instead of handing it on.
//!
//! Whoever kills a P owns it (RUNNING or RETAKEN): it moves `runnext` and the
//! ring to the global queue (`destroy_p`), gives the P's cached stacks and
//! stack promises back to the pool, moves its pending timers to the global
//! heap (`Timers::move_to`: every M holding a P runs that one at each
//! schedule; left on the dead P, a timer waited for an idle M, and a
//! runtime whose live Ps were all busy never had one), and stores DEAD
//! under the lock. No new timer lands on a P nobody holds.

use super::status;
use super::{Sched, Shared};
use crate::loom::lock;
use crate::loom::sync::atomic::Ordering::*;

impl Shared {
    /// Go's `GOMAXPROCS(n)`: make `n` Ps live (clamped to `max_procs`);
    /// `n < 1` only reads. Returns the previous count. `by_user`: the user
    /// chose it, so sysmon stops following the CPU quota.
    pub(crate) fn set_procs(&self, n: usize, by_user: bool) -> usize {
        if n < 1 {
            return self.nprocs();
        }
        let n = n.min(self.procs.len());
        let mut s = lock(&self.sched);
        // Under the lock: a quota-following resize (sysmon) never undoes a
        // user's concurrent choice.
        if by_user {
            self.procs_set.store(true, Relaxed);
        } else if self.procs_set.load(Relaxed) {
            return self.nprocs();
        }
        let old = self.nprocs();
        if n > old {
            self.nprocs.store(n, Release);
            for pi in old..n {
                if self.procs[pi].status.load() == status::DEAD {
                    // Nobody holds a DEAD P: under the lock it is ours.
                    self.pidleput(&mut s, pi);
                }
            }
            drop(s);
            self.wakep_if_idle();
        } else if n < old {
            self.nprocs.store(n, Release);
            for pi in self.pidle_take_from(&mut s, n) {
                // An idle P: nobody holds it, and under the lock it is ours.
                self.kill_p(&mut s, pi);
            }
            drop(s);
            // sysmon retakes dying Ps stuck in polls or syscalls.
            #[cfg(not(loom))]
            self.sysmon.wake();
        }
        old
    }

    /// Every live P idle and every P beyond the count dead (none still held
    /// on its way out): sysmon may sleep, deadlock detection may look.
    pub(crate) fn all_ps_idle(&self) -> bool {
        let n = self.nprocs();
        self.idle_ps() == n
            && self.procs[n..]
                .iter()
                .all(|p| p.status.load() == status::DEAD)
    }

    /// Whether P `pi` is beyond the live count (to die at its owner's next
    /// look).
    #[inline]
    pub(crate) fn p_dying(&self, pi: usize) -> bool {
        pi >= self.nprocs()
    }

    /// The owner of dying P `pi` (RUNNING or RETAKEN), not holding the
    /// scheduler lock: move its queued Gs to the global queue and kill it.
    pub(crate) fn destroy_p(&self, pi: usize) {
        let moved: Vec<_> = self.procs[pi]
            .drain()
            .into_iter()
            .map(super::task::Task::into_raw)
            .collect();
        let work = !moved.is_empty();
        if work {
            self.global_push_batch(moved, 0);
        }
        let mut s = lock(&self.sched);
        if !self.p_dying(pi) {
            // Grown back meanwhile: the P lives on, idle (its work went to
            // the global queue, where any M finds it).
            self.pidleput(&mut s, pi);
        } else {
            self.kill_p(&mut s, pi);
        }
        drop(s);
        if work {
            self.wakep_if_idle();
        }
    }

    /// Kill P `pi`, which has no queued work and which the caller owns
    /// (holding the scheduler lock): its stack cache and promises go back
    /// to the pool, and it is DEAD.
    pub(crate) fn kill_p(&self, _s: &mut Sched, pi: usize) {
        let p = &self.procs[pi];
        debug_assert!(!p.has_work(), "a P died with queued work");
        p.timers.move_to(&self.global_timers);
        // SAFETY: the caller owns the P (see above), so its local state is
        // ours; nobody else touches it until it is live again.
        #[cfg(not(loom))]
        if unsafe { p.local().stacks.drain_live(&self.stacks) } {
            self.arc().scavenge_stacks_soon();
        }
        p.status.store(status::DEAD);
    }
}
