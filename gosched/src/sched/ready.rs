//! The ready path: how a runnable G reaches a P and when an M is woken for it.
//!
//! Read top to bottom: `spawn` (Go's `newproc`) and `ready` (Go's `ready`, the
//! waker's path) put the G into the current P's `runnext`, or, P-less, onto the
//! global queue; then the wake policy decides whether to `wakep`.
//!
//! # Wake policy
//!
//! Go calls `wakep` after every `ready`. We differ for one case, a G put into an
//! *empty* `runnext`: such a G is most often readied by a G that is about to block
//! (a channel hand-off), and the M then runs it at once; the woken M would find
//! nothing, and its futex wake and wasted spin cost the readier ~40% in a
//! ping-pong. So that put wakes nobody while sysmon runs (`wakep_after_runqput`):
//! sysmon looks at every running P's `runnext` (every 50 µs while one is
//! occupied and a P is idle, at most 1 ms apart while some P runs and some P is
//! idle) and calls `wakep` for a G it finds at the same place twice
//! (`sysmon.rs`, item 3), so a readied G waits about two periods even if its
//! readier never blocks (`tests/runtime.rs`,
//! `readied_goroutine_runs_while_its_readier_keeps_the_p`). tokio makes the same
//! choice for its LIFO slot. That is a latency bound, not a lost-wake-up
//! protocol: the G is runnable and visible in `runnext` all along, and the
//! readier's M runs it when its poll returns. A put that displaces a G into the
//! ring, every P-less push and every push before sysmon has started (and under
//! loom, which does not run sysmon) is Go's: publish, StoreLoad barrier, `wakep`
//! if Ps are idle and nobody spins (`idle.rs` has the protocol).
//!
//! A P whose `runnext` a thief found stuck behind one long poll goes *eager*
//! (`Processor::eager`, set in `machine.rs`'s steal): its next 64 readies wake an
//! M as Go does, because its Gs evidently keep running after they ready others (a
//! producer feeding a consumer).

use std::future::Future;
use std::ptr;

use super::context::with_current_p;
use super::processor::{Processor, ID_BATCH};
use super::task::{self, Header, JoinHandle, Task};
use super::Shared;
use crate::loom::sync::atomic::{fence, Ordering::*};
use std::sync::Arc;

impl Shared {
    // ---- putting the G somewhere -------------------------------------------------

    /// Spawn a task; `make` builds its future from its id. The new G goes to the
    /// current P's `runnext` (Go's `newproc`), then the wake policy.
    pub(crate) fn spawn_with_id<F>(
        self: &Arc<Self>,
        make: impl FnOnce(u64) -> F,
        info: task::SpawnInfo,
    ) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match self.try_spawn_with_id(make, info, |_| Ok::<(), std::convert::Infallible>(())) {
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
        info: task::SpawnInfo,
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
                if crate::trace::on() {
                    self.trace_create(id, &info);
                }
                let (task, handle) = task::new_task(make(id), id, info, self.clone());
                let lazy = p.runqput_next(task, |batch, seniors| {
                    self.global_push_batch(batch, seniors)
                });
                Ok(Ok((handle, lazy)))
            },
            None => {
                admit(None)?;
                self.pless_spawned.fetch_add(1, Relaxed);
                let id = self.next_id.fetch_add(1, Relaxed);
                if crate::trace::on() {
                    self.trace_create(id, &info);
                }
                Ok(Err(task::new_task(make(id), id, info, self.clone())))
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
        if crate::trace::on() {
            self.trace_unblock(&task);
        }
        let put = with_current_p(self, |p| match p {
            Some(p) if p.injecting() => {
                // SAFETY: owner of `p` (RUNNING).
                unsafe {
                    p.runqput_tail(task, |batch, seniors| {
                        self.global_push_batch(batch, seniors)
                    })
                };
                p.count_injected();
                Ok(None)
            }
            // SAFETY: owner of `p` (RUNNING).
            Some(p) => Ok(Some(unsafe {
                p.runqput_next(task, |batch, seniors| {
                    self.global_push_batch(batch, seniors)
                })
            })),
            None => Err(task),
        });
        match put {
            Ok(Some(lazy)) => self.wakep_after_runqput(lazy),
            Ok(None) => {} // `inject` wakes once for the batch
            Err(t) => {
                self.global_push(t);
                self.wakep_if_idle();
            }
        }
    }

    /// Go's `injectglist`: wake what one netpoll made ready, as one batch.
    /// With `p` (the polling M's P, owned): the tasks readied onto it go to
    /// its run queue's tail in the order the events came, with no `runnext`
    /// displacement and no wake-up each; then, if more than the one this M
    /// runs next landed here and the P's queue has some, one `wakep` — the spinning M steals half and, as it
    /// finds work, wakes the next (`resetspinning`), so idle Ps fan out one
    /// M at a time as in Go. Without a P (the timer sleeper, sysmon) each
    /// goes to the global queue, with Go's wake each (after
    /// the first, a spinner exists and the wake is a few loads).
    pub(crate) fn inject(&self, ready: Vec<std::task::Waker>, p: Option<&Processor>) {
        match p {
            Some(p) if !ready.is_empty() => {
                /// Ends the batch even if a waker panics.
                struct Batch<'a>(&'a Processor);
                impl Drop for Batch<'_> {
                    fn drop(&mut self) {
                        self.0.inject.store(0, Relaxed);
                    }
                }
                p.inject.store(1, Relaxed);
                let batch = Batch(p);
                for w in ready {
                    w.wake();
                }
                let put = p.inject.load(Relaxed) - 1;
                drop(batch);
                // More than this M runs next, and some of it stealable.
                if put > 1 && !p.runq.is_empty() {
                    self.wakep_if_idle();
                }
            }
            _ => {
                for w in ready {
                    w.wake();
                }
            }
        }
    }

    // ---- the timeline (`crate::trace`) ----------------------------------------------

    /// The G the calling thread runs, if it is one of our Ms in a poll.
    fn current_g(&self) -> u64 {
        super::context::current()
            .filter(|ctx| ptr::eq(Arc::as_ptr(&ctx.shared), self))
            .map_or(0, |ctx| ctx.running_g().0)
    }

    #[cold]
    fn trace_create(&self, g: u64, info: &task::SpawnInfo) {
        let ev = crate::trace::Ev::Create {
            g,
            parent: self.current_g(),
            goroutine: info.goroutine,
            site: info.site,
        };
        self.trace(usize::MAX, ev);
    }

    #[cold]
    fn trace_unblock(&self, task: &Task) {
        let ev = crate::trace::Ev::Unblock {
            g: task.header().id,
            by: self.current_g(),
        };
        self.trace(usize::MAX, ev);
    }

    // ---- the wake policy -------------------------------------------------------------

    /// After a `runqput_next` on the current P. `lazy`: the task went into an
    /// empty `runnext` and the P is not in its eager phase; then, while sysmon
    /// runs, nobody is woken (see "Wake policy"). Otherwise, Go's `wakep`.
    #[inline]
    fn wakep_after_runqput(&self, lazy: bool) {
        if lazy && self.sysmon_runs() {
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

    /// Whether sysmon watches the `runnext`s (it starts with the first M and
    /// runs until shutdown; never under loom).
    #[inline]
    fn sysmon_runs(&self) -> bool {
        #[cfg(not(loom))]
        return self.sysmon.started.load(Relaxed);
        #[cfg(loom)]
        false
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

    fn completed(&self, header: &Header) {
        self.task_completed();
        #[cfg(not(loom))]
        if header.named {
            self.names
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&header.id);
        }
        #[cfg(loom)]
        let _ = header;
    }
}
