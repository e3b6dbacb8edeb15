//! The ready path: how a runnable G reaches a P and when an M is woken for it.
//!
//! Read top to bottom: `spawn` (Go's `newproc`) and `ready` (Go's `ready`, the
//! waker's path) put the G into the current P's `runnext`, or, P-less, onto the
//! global queue; then the wake policy decides whether to `wakep`; last, the
//! runnext watcher that makes the lazy policy safe.
//!
//! # Wake policy
//!
//! Go calls `wakep` after every `ready`. We differ for one case, a G put into an
//! *empty* `runnext`: such a G is most often readied by a G that is about to block
//! (a channel hand-off), and the M then runs it at once; the woken M would find
//! nothing, and its futex wake and wasted spin cost the readier ~40% in a
//! ping-pong. So that put wakes nobody while the *runnext watcher* (below) is on
//! duty (`wakep_after_runqput`). tokio makes the same choice for its LIFO slot.
//! A put that displaces a G into the ring, every P-less push and every push while
//! nobody watches is Go's: publish, StoreLoad barrier, `wakep` if Ps are idle and
//! nobody spins (`idle.rs` has the protocol).
//!
//! A P whose `runnext` a thief found stuck behind one long poll goes *eager*
//! (`Processor::eager`, set in `machine.rs`'s steal): its next 64 readies wake an
//! M as Go does, because its Gs evidently keep running after they ready others (a
//! producer feeding a consumer).
//!
//! # The runnext watcher
//!
//! One idle M at a time (while some P runs and some P is idle) parks with a
//! `WATCH_PERIOD` (50 µs) timeout instead of on the idle list, backing off to
//! 1 ms while no running P has anything in `runnext`. Each time it wakes it looks
//! at every running P's (`runnext`, `execs`); if a P shows the same non-null pair
//! twice in a row, a G readied there has waited a whole period behind a poll that
//! goes on: the watcher takes an idle P and becomes a spinning M, whose last steal
//! round takes that G. So a readied G waits about two periods (at most ~1 ms
//! after a quiet spell) even if the readier never blocks (`tests/runtime.rs`,
//! `readied_goroutine_runs_while_its_readier_keeps_the_p`). `wakep` uses the
//! watcher like an idle M when the idle list is empty (no extra thread). The role
//! is a latency bound, not a lost-wake-up protocol: the G is runnable and visible
//! in `runnext` all along, and the readier's M runs it when its poll returns. With
//! every P busy or every P idle nobody watches (nothing to gain, nothing to
//! watch), so an idle runtime still uses no CPU. sysmon (its own issue) takes
//! this duty over with its other P checks.

use std::future::Future;
use std::ptr;
use std::time::Duration;

use super::context::with_current_p;
use super::machine::{Machine, MachineCtx};
use super::processor::{Processor, ID_BATCH};
use super::status;
use super::task::{self, Header, JoinHandle, Task};
use super::Shared;
use crate::loom::lock;
use crate::loom::sync::atomic::{fence, Ordering::*};
use std::sync::Arc;

/// How often the runnext watcher looks at the Ps (a G readied into `runnext`
/// behind a poll that goes on is stolen within two periods).
const WATCH_PERIOD: Duration = Duration::from_micros(50);
/// The watcher's period while no running P has anything in `runnext`.
const WATCH_PERIOD_MAX: Duration = Duration::from_millis(1);

impl Shared {
    // ---- putting the G somewhere -------------------------------------------------

    /// Spawn a task; `make` builds its future from its id. The new G goes to the
    /// current P's `runnext` (Go's `newproc`), then the wake policy. `pinned`: a
    /// goroutine that will stay on the M where it first runs (see `machine.rs`,
    /// "The thread rule"); until then it is queued and stolen like any task.
    pub(crate) fn spawn_with_id<F>(
        self: &Arc<Self>,
        make: impl FnOnce(u64) -> F,
        pinned: bool,
    ) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match self.try_spawn_with_id(make, pinned, |_| Ok::<(), std::convert::Infallible>(())) {
            Ok(handle) => handle,
            Err(never) => match never {},
        }
    }

    /// `spawn_with_id`, first asking `admit` (with the current P, if this
    /// thread holds one of ours) whether the task may be spawned: a goroutine
    /// reserves its stack there. Nothing is spawned when it fails.
    pub(crate) fn try_spawn_with_id<F, E>(
        self: &Arc<Self>,
        make: impl FnOnce(u64) -> F,
        pinned: bool,
        admit: impl FnOnce(Option<&Processor>) -> Result<(), E>,
    ) -> Result<JoinHandle<F::Output>, E>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        // One entry into the P for the admission, the id, the counter and the
        // `runnext` put.
        let on_p = with_current_p(self, |p| match p {
            // SAFETY: `with_current_p` gives us the P in RUNNING on its owner M.
            Some(p) => unsafe {
                admit(Some(p))?;
                // Owner-only counter: a plain load + store.
                p.spawned.store(p.spawned.load(Relaxed) + 1, Relaxed);
                let l = p.local();
                if l.id_next == l.id_end {
                    l.id_next = self.next_id.fetch_add(ID_BATCH, Relaxed);
                    l.id_end = l.id_next + ID_BATCH;
                }
                let id = l.id_next;
                l.id_next += 1;
                let (task, handle) = task::new_task(make(id), id, pinned, self.clone());
                let lazy = p.runqput_next(task, |batch| self.global_push_batch(batch));
                Ok(Ok((handle, lazy)))
            },
            None => {
                admit(None)?;
                self.pless_spawned.fetch_add(1, Relaxed);
                let id = self.next_id.fetch_add(1, Relaxed);
                Ok(Err(task::new_task(make(id), id, pinned, self.clone())))
            }
        })?;
        Ok(match on_p {
            Ok((handle, lazy)) => {
                self.wakep_after_runqput(lazy);
                handle
            }
            Err((task, handle)) => {
                // P-less: the global queue (closed after shutdown: it cancels the
                // task at once).
                self.global_push(task);
                self.wakep_if_idle();
                handle
            }
        })
    }

    /// Make a notified task runnable (Go's `ready`; the waker's and `abort`'s
    /// path): into the current P's `runnext` when called on one of our Ms holding
    /// a P, else onto the global queue; then the wake policy.
    #[inline]
    pub(crate) fn ready(&self, task: Task) {
        if let Some(home) = task.home() {
            // A started goroutine: only its own M may run it ("The thread
            // rule", `machine.rs`).
            let home: *const Machine = Arc::as_ptr(home);
            match super::context::current().filter(|ctx| ptr::eq(Arc::as_ptr(&ctx.m), home)) {
                Some(ctx) => ctx.ready_homed_here(task),
                // SAFETY: every M of this runtime stays in `self.machines`
                // (an `Arc`) for the runtime's life, and `self` is alive.
                None => unsafe { &*home }.push_remote(task),
            }
            return;
        }
        let put = with_current_p(self, |p| match p {
            // SAFETY: owner of `p` (RUNNING).
            Some(p) => Ok(unsafe { p.runqput_next(task, |batch| self.global_push_batch(batch)) }),
            None => Err(task),
        });
        match put {
            Ok(lazy) => self.wakep_after_runqput(lazy),
            Err(t) => {
                self.global_push(t);
                self.wakep_if_idle();
            }
        }
    }

    // ---- the wake policy -------------------------------------------------------------

    /// After a `runqput_next` on the current P. `lazy`: the task went into an
    /// empty `runnext` and the P is not in its eager phase; then, while an M
    /// watches, nobody is woken (see "Wake policy"). Otherwise, Go's `wakep`.
    #[inline]
    fn wakep_after_runqput(&self, lazy: bool) {
        if lazy && self.watching.load(Relaxed) {
            return;
        }
        if lazy && !cfg!(loom) {
            // The task was published by the `runnext` swap, a SeqCst
            // read-modify-write; the two loads below are SeqCst too, and the
            // parking M does its RMW on `nmspinning`, `fence(SeqCst)`, then
            // re-checks the queues (`machine.rs` step 8). By C++20's rules for
            // SeqCst operations and fences one side sees the other, with no
            // fence here (an `mfence` measurably slows every wake-up; on x86-64
            // a SeqCst load is a plain load). loom treats SeqCst accesses as
            // AcqRel, so it takes the fenced path below.
            self.wakep_if_wanted();
        } else {
            self.wakep_if_idle();
        }
    }

    /// The submitter's half of the lost-wake-up protocol (`idle.rs`): work is
    /// published (by the caller), then a StoreLoad barrier, then look at the
    /// idle and spinning counts.
    #[inline]
    pub(crate) fn wakep_if_idle(&self) {
        fence(SeqCst);
        self.wakep_if_wanted();
    }

    /// `wakep_if_idle` for a caller that has already ordered its publication
    /// before these loads.
    #[inline]
    fn wakep_if_wanted(&self) {
        if self.wake_wanted() {
            self.wakep();
        }
    }

    // ---- counting (for `num_goroutine`) -------------------------------------------

    /// Count a completed task.
    pub(crate) fn task_completed(&self) {
        let p = super::context::current()
            .filter(|ctx| ptr::eq(Arc::as_ptr(&ctx.shared), self))
            .and_then(|ctx| ctx.p.get());
        match p {
            Some(p) => self.procs[p].completed.fetch_add(1, Relaxed),
            None => self.pless_completed.fetch_add(1, Relaxed),
        };
    }

    /// Goroutines and tasks spawned and not yet completed (a snapshot).
    pub(crate) fn live_tasks(&self) -> usize {
        let spawned: u64 = self
            .procs
            .iter()
            .map(|p| p.spawned.load(Relaxed))
            .sum::<u64>()
            + self.pless_spawned.load(Relaxed);
        let completed: u64 = self
            .procs
            .iter()
            .map(|p| p.completed.load(Relaxed))
            .sum::<u64>()
            + self.pless_completed.load(Relaxed);
        spawned.saturating_sub(completed) as usize
    }

    // ---- the runnext watcher -------------------------------------------------------

    /// `wakep` found no idle M: take the watcher out of its role, to be handed a P.
    pub(crate) fn take_watcher(&self) -> Option<Arc<Machine>> {
        let mut w = lock(&self.watcher);
        let m = w.take();
        if m.is_some() {
            self.watching.store(false, SeqCst);
        }
        m
    }
}

impl MachineCtx {
    /// Become the runnext watcher, if nobody is, some P runs and some P is idle,
    /// and watch (see "The runnext watcher"). True if we come back holding a P:
    /// one `wakep` handed us, or an idle one we took to go steal a stuck
    /// `runnext` (then we are spinning). False: the caller parks on the idle list.
    pub(super) fn try_watch(&self) -> bool {
        let shared = &*self.shared;
        let n = shared.procs.len();
        let useful = || {
            let idle = shared.idle_ps();
            idle != 0 && idle != n && !shared.shutdown.load(Acquire)
        };
        if n == 1 || !useful() {
            return false;
        }
        {
            let mut w = lock(&shared.watcher);
            if w.is_some() {
                return false;
            }
            *w = Some(self.m.clone());
            shared.watching.store(true, SeqCst);
        }
        // What each P had in `runnext` at the last look, and its poll count.
        let mut seen: Vec<(*mut Header, u32)> = vec![(ptr::null_mut(), 0); n];
        let mut period = WATCH_PERIOD;
        let steal = loop {
            if !self.has_homed_work() {
                self.m.parker.wait_timeout(period);
            }
            if self.m.has_nextp() || !useful() || self.has_homed_work() {
                break false;
            }
            let (mut stuck, mut pending) = (false, false);
            for (q, last) in shared.procs.iter().zip(seen.iter_mut()) {
                let now = (q.runnext.load(Acquire), q.execs.load(Acquire));
                if !now.0.is_null() && status::is_held_by_m(q.status.load()) {
                    pending = true;
                    stuck |= now == *last;
                }
                *last = now;
            }
            if stuck {
                break true;
            }
            // Look often while Gs pass through `runnext`; back off to
            // `WATCH_PERIOD_MAX` while none does (a lone hog costs ~nothing).
            period = if pending {
                WATCH_PERIOD
            } else {
                (period * 2).min(WATCH_PERIOD_MAX)
            };
        };
        // Leave the role, unless `wakep` took us out of it to hand us a P.
        let taken = {
            let mut w = lock(&shared.watcher);
            if w.as_ref().is_some_and(|m| Arc::ptr_eq(m, &self.m)) {
                shared.watching.store(false, SeqCst);
                *w = None;
                false
            } else {
                true
            }
        };
        if taken {
            return self.wait_for_nextp();
        }
        // Nobody but shutdown (re-checked by the caller) owes us a wake: drop a
        // stale token so that it cannot cut a later park short.
        self.m.parker.reset();
        if !steal {
            return false;
        }
        // A G has waited in a running P's `runnext` for a whole period: take an
        // idle P and go steal it as a spinning M (the last steal round takes it,
        // the victim being still in the same poll).
        match shared.acquire_idle_p() {
            Some(p) => {
                self.p.set(Some(p));
                self.spinning.set(true);
                shared.spinning_begin();
                true
            }
            None => false,
        }
    }
}

/// How tasks reach this runtime (see `task/mod.rs`).
impl task::Schedule for Arc<Shared> {
    #[inline]
    fn ready(&self, task: Task) {
        Shared::ready(self, task)
    }

    fn bind(&self, task: Task) -> Result<(), Task> {
        self.owned.insert(task)
    }

    fn unbind(&self, task: std::ptr::NonNull<Header>) -> bool {
        self.owned.remove(task)
    }

    fn completed(&self) {
        self.task_completed()
    }
}
