//! Processor (P): a scheduling context. An M runs Gs only while it holds a P.
//!
//! A P owns: its status word (`status.rs`), a 256-slot run queue (`runq.rs`),
//! `runnext` (the G readied most recently, run next, inheriting the time slice),
//! its timers, and P-local caches (goroutine stacks, task ids, the steal RNG).
//!
//! Access rules:
//! - `runq` tail and everything in `local` belong to the M holding the P with status
//!   RUNNING. Code running inside a poll (status USER) must first CAS USER→RUNNING
//!   (`sched::with_current_p` does this).
//! - `runq` head and `runnext` may be taken by any M (stealing), by CAS.
//! - `timers` has its own lock; any M may run a P's due timers.
//! - `schedtick` (time slices started) and `syscalltick` (in-place syscalls
//!   entered) are written by the owner, read by anyone (sysmon, schedtrace);
//!   whether the owner is inside such a call now is its M's `in_call`.
//! - `execs` (polls started, runnext ones included) is written by the owner and
//!   read by thieves: a thief takes a running P's `runnext` only if `execs` did
//!   not move during its wait, i.e. the victim has been stuck in one poll.
//! - `eager` is set by a thief that found `runnext` stuck that way, and counted
//!   down by the owner (see `ready.rs`, "Wake policy"); a lost update only
//!   changes how soon the P goes back to not waking anyone for `runnext`.

use std::ptr::{self, NonNull};

use super::runq::RunQueue;
use super::status::PStatus;
use super::task::{Header, Task};
use super::timers::Timers;
use crate::loom::cell::UnsafeCell;
use crate::loom::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering::*};
#[cfg(not(loom))]
use crate::stack::StackCache;

pub(crate) struct Processor {
    pub(crate) id: usize,
    pub(crate) status: PStatus,
    pub(crate) runq: RunQueue<Header>,
    pub(crate) runnext: AtomicPtr<Header>,
    pub(crate) schedtick: AtomicU32,
    pub(crate) execs: AtomicU32,
    /// sysmon asked this P's time slice to end (`schedtick` unmoved for
    /// `FORCE_PREEMPT`); cleared by the next new slice (`execute`). A
    /// chain of hand-offs between Ms (`machine.rs`, "Hand-off to the
    /// readied goroutine's M") stops at it, as Go's `runnext` chain stops
    /// when sysmon preempts the G that inherited the slice. A hint: std
    /// atomic, outside loom's model.
    pub(crate) slice_expired: std::sync::atomic::AtomicBool,
    /// In-place syscalls entered on this P (owner-written; sysmon tells one
    /// long call from many short ones).
    pub(crate) syscalltick: AtomicU32,
    pub(crate) eager: AtomicU32,
    /// A netpoll batch is being made runnable on this P (`Shared::inject`):
    /// 0 when not, else 1 + the tasks queued so far on this P. Owner only
    /// (Relaxed).
    pub(crate) inject: AtomicU32,
    /// The M that last ran a task on this P (written by that M; read by
    /// sysmon, thieves and stats). Points into
    /// `Shared::machines`, which keeps every `Machine` alive for the
    /// runtime's life (a retired M's is reused by a later thread: "Idle Ms
    /// exit"), so it is always safe to read, if perhaps stale.
    pub(crate) owner: std::sync::atomic::AtomicPtr<super::machine::Machine>,
    /// Tasks spawned on this P (written by the owner only) and completed on it
    /// (any M that held it): `num_goroutine` is the difference of the sums.
    pub(crate) spawned: AtomicU64,
    pub(crate) completed: AtomicU64,
    pub(crate) timers: std::sync::Arc<Timers>,
    /// Steals, hand-offs, preemptions (`stats.rs`).
    pub(crate) counters: super::stats::PCounters,
    /// The task whose poll runs on this P, for sysmon's hog report
    /// (`GOSCHED_DEBUG=hogs=1` only; owner-written at each poll then).
    pub(crate) running: super::stats::RunningTask,
    local: UnsafeCell<Local>,
}

/// State only the owning M touches (status RUNNING).
pub(crate) struct Local {
    #[cfg(not(loom))]
    pub(crate) stacks: StackCache,
    pub(crate) rng: u64,
    pub(crate) id_next: u64,
    pub(crate) id_end: u64,
}

// SAFETY: `local` is only accessed by the M that owns the P (status RUNNING),
// which the status protocol makes exclusive; everything else is atomics or locks.
unsafe impl Sync for Processor {}
// SAFETY: as above; the contents are `Send`.
unsafe impl Send for Processor {}

/// How many readies after a stuck `runnext` was stolen wake an M at once.
const EAGER_READIES: u32 = 64;

/// Task ids are handed to Ps in batches, as Go's goidcache (16 per refill).
pub(crate) const ID_BATCH: u64 = 16;

impl Processor {
    /// Whether the M holding this P is inside a call made in place
    /// (`Machine::in_call`): the P reads USER but nothing runs on it until
    /// the call returns. A hint, as `owner` is.
    #[inline]
    pub(crate) fn owner_in_call(&self) -> bool {
        let m = self.owner.load(Acquire);
        // SAFETY: `owner` is null or points into `Shared::machines`, which
        // keeps every `Machine` for the runtime's life (see `owner`).
        !m.is_null() && unsafe { &*m }.in_call.load(Acquire)
    }

    /// Record the M that holds (or is about to hold) this P, for placement.
    #[inline]
    pub(crate) fn set_owner(&self, m: &std::sync::Arc<super::machine::Machine>) {
        let m = std::sync::Arc::as_ptr(m).cast_mut();
        if self.owner.load(Relaxed) != m {
            self.owner.store(m, Release);
        }
    }

    pub(crate) fn new(id: usize) -> Self {
        Processor {
            id,
            status: PStatus::new(),
            runq: RunQueue::new(),
            runnext: AtomicPtr::new(ptr::null_mut()),
            schedtick: AtomicU32::new(0),
            execs: AtomicU32::new(0),
            slice_expired: std::sync::atomic::AtomicBool::new(false),
            syscalltick: AtomicU32::new(0),
            owner: std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()),
            eager: AtomicU32::new(0),
            inject: AtomicU32::new(0),
            spawned: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            timers: Timers::new(),
            counters: Default::default(),
            running: Default::default(),
            local: UnsafeCell::new(Local {
                #[cfg(not(loom))]
                stacks: StackCache::new(),
                rng: 0x9E37_79B9_7F4A_7C15 ^ (id as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03),
                id_next: 0,
                id_end: 0,
            }),
        }
    }

    /// P-local state.
    ///
    /// # Safety
    /// The caller is the M holding this P with status RUNNING, and does not let the
    /// reference outlive that (no reentrant call may take it again).
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn local(&self) -> &mut Local {
        // SAFETY: exclusivity is the caller's obligation (see above).
        self.local.with_mut(|l| unsafe { &mut *l })
    }

    /// Owner: put a readied task in `runnext` (Go's `runqput(next=true)`); the task
    /// it displaces goes to the ring's tail, and a full ring's overflow to
    /// `global`.
    ///
    /// Returns true if the task went into an empty `runnext` (so the publication
    /// was the `swap` alone, a read-modify-write) and this P is not in its eager
    /// phase: the wake-up may be skipped (`ready.rs`, "Wake policy").
    ///
    /// # Safety
    /// Owner only (status RUNNING, on the owning M).
    pub(crate) unsafe fn runqput_next(
        &self,
        task: Task,
        global: impl FnOnce(Vec<NonNull<Header>>, usize),
    ) -> bool {
        // SeqCst: one half of the wake-up Dekker pair (`ready.rs`,
        // `wakep_after_runqput`); on x86-64 the same `xchg` as AcqRel.
        let old = self.runnext.swap(task.into_raw().as_ptr(), SeqCst);
        match NonNull::new(old) {
            None => self.lazy_wake(),
            Some(old) => {
                // SAFETY: owner.
                unsafe { self.runq.push_back(old, global) };
                false
            }
        }
    }

    /// Owner: put a task at the ring's tail (Go's `runqput(next=false)`); a full
    /// ring's overflow goes to `global`.
    ///
    /// # Safety
    /// Owner only (status RUNNING, on the owning M).
    pub(crate) unsafe fn runqput_tail(
        &self,
        task: Task,
        global: impl FnOnce(Vec<NonNull<Header>>, usize),
    ) {
        // SAFETY: owner.
        unsafe { self.runq.push_back(task.into_raw(), global) };
    }

    /// Owner: whether a netpoll batch is being made runnable here
    /// (`Shared::inject`): readied tasks then go to the tail, in order.
    #[inline]
    pub(crate) fn injecting(&self) -> bool {
        self.inject.load(Relaxed) != 0
    }

    /// Owner, injecting: one more task of the batch was queued.
    #[inline]
    pub(crate) fn count_injected(&self) {
        self.inject.store(self.inject.load(Relaxed) + 1, Relaxed);
    }

    /// Owner, after a put into an empty `runnext`: may the wake-up be skipped
    /// (true), or has a thief lately found this P's `runnext` stuck behind a long
    /// poll, so that readied Gs should get an M at once for a while (false)?
    #[inline]
    fn lazy_wake(&self) -> bool {
        let e = self.eager.load(Relaxed);
        if e == 0 {
            return true;
        }
        self.eager.store(e - 1, Relaxed);
        false
    }

    /// A thief took this P's `runnext` after finding it stuck behind a poll:
    /// wake an M at once for the next `EAGER_READIES` readies.
    pub(crate) fn runnext_was_stuck(&self) {
        self.eager.store(EAGER_READIES, Relaxed);
    }

    /// Owner: next task to run and whether it inherits the time slice (it came
    /// from `runnext`).
    ///
    /// # Safety
    /// Owner only.
    pub(crate) unsafe fn runqget(&self) -> Option<(Task, bool)> {
        let next = self.runnext.load(Acquire);
        if !next.is_null()
            && self
                .runnext
                .compare_exchange(next, ptr::null_mut(), AcqRel, Relaxed)
                .is_ok()
        {
            // SAFETY: runnext held an owned reference, now ours.
            return Some((
                unsafe { Task::from_raw(NonNull::new_unchecked(next)) },
                true,
            ));
        }
        // SAFETY: owner; ring items are owned references.
        unsafe { self.runq.pop() }.map(|p| (unsafe { Task::from_raw(p) }, false))
    }

    /// Any M: take this P's `runnext` if it still holds `next` (a thief that
    /// waited passes what it saw before waiting; `drain` passes the current value).
    pub(crate) fn steal_runnext(&self, next: *mut Header) -> Option<Task> {
        if next.is_null() {
            return None;
        }
        self.runnext
            .compare_exchange(next, ptr::null_mut(), AcqRel, Relaxed)
            .ok()
            // SAFETY: we won the CAS: the reference is ours.
            .map(|_| unsafe { Task::from_raw(NonNull::new_unchecked(next)) })
    }

    /// Owner: this P's M stole `n` tasks from `victim` (`stats.rs`).
    #[inline]
    pub(crate) fn count_steal_from(&self, victim: &Processor, n: u64) {
        self.counters.steals_in.add(n);
        victim.counters.stolen.add_shared(n);
    }

    /// Queued work (ring + runnext), a racy snapshot.
    pub(crate) fn has_work(&self) -> bool {
        !self.runq.is_empty() || !self.runnext.load(Acquire).is_null()
    }

    /// Take every queued task: at shutdown (no M runs any more), or by the
    /// owner of a P that `set_procs` retires (`procresize.rs`).
    pub(crate) fn drain(&self) -> Vec<Task> {
        let mut out = Vec::new();
        if let Some(t) = self.steal_runnext(self.runnext.load(Acquire)) {
            out.push(t);
        }
        // SAFETY: the caller owns the P (every M has exited, or it holds the
        // P in RUNNING or RETAKEN): the ring's consumer side is ours;
        // thieves may still take from it meanwhile.
        while let Some(p) = unsafe { self.runq.pop() } {
            // SAFETY: ring items are owned references.
            out.push(unsafe { Task::from_raw(p) });
        }
        out
    }
}

/// xorshift64*: the steal-order RNG (Go uses a cheap per-M RNG too).
pub(crate) fn fastrand(state: &mut u64) -> u64 {
    let mut x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    x.wrapping_mul(0x2545_F491_4F6C_DD1D)
}
