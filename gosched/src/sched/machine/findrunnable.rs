//! `find_runnable`: where an M with a P looks for its next G, in Go's order.
//!
//! 1. this P's due timers and the global (P-less) heap's;
//! 2. every 61st schedule tick, one G from the global queue (fairness);
//! 3. `runnext`, then the local ring;
//! 4. a batch from the global queue;
//! 5. the netpoller without blocking (unless an M is blocked in it), after
//!    one pass over the other Ps' rings (`steal_queued`);
//! 6. stealing: 4 rounds over the Ps in a random order, half of a victim's
//!    ring; victims' timers and `runnext` only in the last round;
//! 7. drop the P, re-checking the global queue under the scheduler lock;
//! 8. stop spinning, then re-check every queue and the timers;
//! 9. park (`stopm.rs`).
//!
//! A locked M (`lock_os_thread`) skips all of it: it waits for its own
//! goroutine (`lockos.rs`, `stoplockedm`).
//!
//! # Spinning and waking
//!
//! The lost-wake-up protocol between spinning Ms and submitters, and
//! `wakep`, live in `idle.rs`; the wake policy for `runnext` (where we
//! differ from Go) in `ready.rs`, and sysmon's watch over stuck `runnext`s
//! in `sysmon.rs`. This file is the M's side: steps 6–8 (spin, drop the P,
//! stop spinning and re-check).
//!
//! Stealing a running P's `runnext`: a thief takes it only if, after the
//! 3 µs wait, `runnext` still holds the G it saw *and* the victim's `execs`
//! (polls started) did not move, i.e. the victim has been in one poll the
//! whole time. Go re-checks only the pointer, which in a ping-pong steals
//! the partner readied a moment later. Such a steal puts the victim in its
//! eager phase (`ready.rs`).

use std::ptr;
use std::time::Duration;

use super::MachineCtx;
use crate::loom::lock;
use crate::loom::sync::atomic::{fence, Ordering::*};
use crate::sched::processor::{fastrand, Processor};
use crate::sched::status;
use crate::sched::task::Task;
use crate::sched::timers::{now_ns, NEVER};

/// One G from the global queue every this many schedule ticks (Go: 61).
const GLOBAL_FAIRNESS_TICK: u32 = 61;
/// Steal rounds over all Ps (Go: 4).
const STEAL_ROUNDS: usize = 4;
/// How long a thief waits before taking a running victim's `runnext` (Go: ~3 µs):
/// the victim most likely just readied that G and is about to block.
const RUNNEXT_STEAL_DELAY: Duration = Duration::from_micros(3);
/// `steal_queued`: the ring length from which an M about to poll takes the
/// oldest tasks of a P whose M makes progress (W12 async: a threshold of 16
/// lost msgs/s, 24-32 won both msgs/s and p99, 48-64 lost the p99 gain).
#[cfg(not(loom))]
const STEAL_QUEUED_BACKLOG: usize = 32;
/// ... and how many it takes: the few that would otherwise wait longest,
/// after which the thief is soon back at the poller (half of the ring cost
/// 5-10% msgs/s: tasks moved off their cache, and no M polled meanwhile).
#[cfg(not(loom))]
const STEAL_QUEUED_OLDEST: u32 = 8;

/// A thief's pause before taking a running victim's `runnext` (under loom, one
/// yield: the victim gets to run, or not, in every interleaving).
fn runnext_steal_wait() {
    #[cfg(not(loom))]
    {
        let until = std::time::Instant::now() + RUNNEXT_STEAL_DELAY;
        while std::time::Instant::now() < until {
            std::hint::spin_loop();
        }
    }
    #[cfg(loom)]
    crate::loom::thread::yield_now();
}

impl MachineCtx {
    /// Find a G to run, parking as needed. `None` at shutdown.
    pub(super) fn find_runnable(&self) -> Option<(Task, bool)> {
        let shared = &*self.shared;
        'top: loop {
            if self.retired.get() {
                // Idle too long: this thread exits. Checked before shutdown:
                // our `Machine` may already serve a new thread.
                return None;
            }
            if shared.shutdown.load(Acquire) {
                self.drop_p_for_exit();
                return None;
            }
            if let Some(pi) = self.p.get().filter(|&pi| shared.p_dying(pi)) {
                // `set_procs` shrank below our P: give it up (`procresize.rs`).
                self.p.set(None);
                self.stop_spinning();
                shared.destroy_p(pi);
                continue 'top;
            }
            if self.is_locked() {
                // `lock_os_thread`: our goroutine only, handed to us with a
                // P (`lockos.rs`, Go's `stoplockedm`).
                match self.stoplockedm() {
                    Some(t) => return Some((t, false)),
                    None => continue 'top,
                }
            }
            let Some(pi) = self.p.get() else {
                // P-less (woken as the timer sleeper, or our P was retaken):
                // a P handed to us (`startm`), else an idle P, else park.
                if let Some((p, spinning)) = self.m.take_nextp() {
                    self.p.set(Some(p));
                    self.spinning.set(spinning);
                } else {
                    match shared.acquire_idle_p() {
                        Some(p) => self.p.set(Some(p)),
                        None => self.park_idle(),
                    }
                }
                continue 'top;
            };
            let p = self.proc(pi);
            p.set_owner(&self.m);

            // 1. Due timers of this P and the global (P-less) heap, first,
            // as in Go's `schedule`.
            self.run_timers(p);

            // 2. Fairness: every 61st tick, one G from the global queue first.
            let tick = p.schedtick.load(Relaxed);
            if tick % GLOBAL_FAIRNESS_TICK == 0 && shared.global_len() > 0 {
                if let Some(t) = shared.globrunqget(p, 1) {
                    return Some((t, false));
                }
            }

            // 3. Local: `runnext`, then the ring.
            // SAFETY: we own `p`.
            if let Some(r) = unsafe { p.runqget() } {
                return Some(r);
            }

            // 4. A batch from the global queue.
            if let Some(t) = shared.globrunqget(p, 0) {
                return Some((t, false));
            }

            // 5. The netpoller, without blocking, unless an M is blocked in
            // it (it will deliver): what is ready lands on our queue's tail
            // as one batch (`Shared::inject`). Work already queued on another
            // busy P is taken first (`steal_queued`): a poll would find our
            // own sockets ready again and keep us busy with them while that
            // P's queue waits for its M, which the kernel may have preempted
            // for a whole time slice (tokio steals before it polls, too).
            #[cfg(not(loom))]
            if shared.netpoll.has_waiters() && !shared.netpoll.someone_blocked() {
                if let Some(t) = self.steal_queued(p) {
                    return Some((t, false));
                }
                if let Some(ready) = shared.netpoll.poll(Some(Duration::ZERO), now_ns) {
                    shared.inject(ready, Some(p));
                    // SAFETY: we own `p`.
                    if let Some(r) = unsafe { p.runqget() } {
                        return Some(r);
                    }
                }
            }

            // 6. Steal, if this M already spins or fewer than half the busy Ps spin.
            if self.spinning.get() || shared.may_spin() {
                if !self.spinning.get() {
                    self.spinning.set(true);
                    shared.spinning_begin();
                }
                if let Some(t) = self.steal_work(p) {
                    return Some((t, false));
                }
            }

            // Timers of every P, so those of idle or busy Ps are honoured; what
            // fires lands in our runnext.
            self.run_all_timers();
            // SAFETY: we own `p`.
            if let Some(r) = unsafe { p.runqget() } {
                return Some(r);
            }

            // 7. Drop the P, re-checking the global queue under the lock.
            {
                let mut s = lock(&shared.sched);
                if shared.global_len() > 0 {
                    if let Some(t) = shared.globrunqget_locked(&mut s, p, 0) {
                        return Some((t, false));
                    }
                }
                shared.pidleput(&mut s, pi);
                self.p.set(None);
            }

            // 8. Stop spinning, then re-check everything (the barrier is the RMW).
            if self.spinning.get() {
                self.spinning.set(false);
                shared.spinning_end();
                // StoreLoad: pairs with the submitter's fence in `wakep_if_idle`.
                fence(SeqCst);
                let work = shared.global_len() > 0
                    || shared
                        .procs
                        .iter()
                        .any(|q| q.status.load() != status::IDLE && q.has_work())
                    || shared.next_timer() <= shared.clock_ns();
                if work {
                    if let Some(p) = shared.acquire_idle_p() {
                        self.p.set(Some(p));
                        self.spinning.set(true);
                        shared.spinning_begin();
                        continue 'top;
                    }
                }
            }

            // 9./10. Sleep until the next timer, or park until handed a P.
            self.park_idle();
        }
    }

    pub(in crate::sched) fn run_timers(&self, p: &Processor) {
        let shared = &*self.shared;
        let (a, b) = (p.timers.next_when(), shared.global_timers.next_when());
        if a == NEVER && b == NEVER {
            return;
        }
        let now = shared.clock_ns();
        if a <= now {
            shared.run_due_timers(&p.timers, now);
        }
        if b <= now {
            shared.run_due_timers(&shared.global_timers, now);
        }
    }

    fn run_all_timers(&self) {
        let shared = &*self.shared;
        let next = shared.next_timer();
        if next == NEVER {
            return;
        }
        let now = shared.clock_ns();
        if next > now {
            return;
        }
        for q in shared.procs.iter() {
            shared.run_due_timers(&q.timers, now);
        }
        shared.run_due_timers(&shared.global_timers, now);
    }

    /// Go's `stealWork`: 4 rounds over the Ps in a random order.
    fn steal_work(&self, p: &Processor) -> Option<Task> {
        let shared = &*self.shared;
        let n = shared.procs.len();
        if n == 1 {
            return None;
        }
        for round in 0..STEAL_ROUNDS {
            let last = round == STEAL_ROUNDS - 1;
            let now = if last { shared.clock_ns() } else { 0 };
            // SAFETY: we own `p`.
            let r = fastrand(unsafe { &mut p.local().rng }) as usize;
            let start = r % n;
            let stride = shared.coprimes[(r >> 32) % shared.coprimes.len()];
            for k in 0..n {
                let vi = (start + k * stride) % n;
                if vi == p.id {
                    continue;
                }
                let v = self.proc(vi);
                if last && v.timers.next_when() <= now {
                    shared.run_due_timers(&v.timers, now);
                    // SAFETY: we own `p`.
                    if let Some((t, _)) = unsafe { p.runqget() } {
                        return Some(t);
                    }
                }
                if matches!(v.status.load(), status::IDLE | status::DEAD) {
                    continue;
                }
                if let Some(t) = self.steal_ring(p, v) {
                    return Some(t);
                }
                let next = if last {
                    v.runnext.load(Acquire)
                } else {
                    ptr::null_mut()
                };
                if !next.is_null() {
                    if status::is_held_by_m(v.status.load()) && !v.owner_in_call() {
                        // The victim most likely readied that G and is about to
                        // block: let it run it. Steal only if the victim stayed in
                        // one poll for the whole wait and `runnext` still holds the
                        // G we saw. (Go re-checks only the pointer, so in a
                        // ping-pong it steals the partner readied a moment later.)
                        let execs = v.execs.load(Acquire);
                        runnext_steal_wait();
                        if v.execs.load(Acquire) != execs {
                            continue;
                        }
                        if let Some(t) = v.steal_runnext(next) {
                            v.runnext_was_stuck();
                            p.count_steal_from(v, 1);
                            if crate::trace::on() {
                                self.trace_steal(p.id, vi, 1);
                            }
                            return Some(t);
                        }
                        continue;
                    }
                    if let Some(t) = v.steal_runnext(next) {
                        p.count_steal_from(v, 1);
                        if crate::trace::on() {
                            self.trace_steal(p.id, vi, 1);
                        }
                        return Some(t);
                    }
                }
            }
        }
        None
    }

    /// One pass over the other Ps' rings (not their `runnext`, nor their
    /// timers), for an M about to poll the network, which would otherwise
    /// leave those queues waiting while it serves its own sockets, without
    /// spinning. From the first P that holds tasks:
    /// - whose M has not started a poll since our last pass (`execs`
    ///   unmoved: preempted by the kernel, or in a long poll): half its ring;
    /// - whose M makes progress but whose ring holds `STEAL_QUEUED_BACKLOG`
    ///   or more: its `STEAL_QUEUED_OLDEST` oldest tasks.
    ///
    /// The second is the tail's: with none, fresh sockets were served before
    /// the older round trips queued on the busy P, and W12 (async) round
    /// trips spread both ways (p99 1.07-1.10× tokio's). Taking half of every
    /// non-empty ring in passing cost W12 10%, and half of a progressing P's
    /// ring of 64 or more gave tokio's tail at 5-10% fewer msgs/s (with one
    /// message in flight per connection, msgs/s is connections ÷ the mean
    /// round trip). The oldest eight of a ring of 32 or more: more msgs/s
    /// and a p99 about 0.85× tokio's (README, W12).
    #[cfg(not(loom))]
    fn steal_queued(&self, p: &Processor) -> Option<Task> {
        let shared = &*self.shared;
        // Live Ps only: this runs whenever the M's queues run dry, and
        // `procs` has a slot for every CPU of the box (the rest are DEAD,
        // their rings empty).
        let n = shared.nprocs().min(shared.procs.len());
        if n == 1 {
            return None;
        }
        let mut seen = self.execs_seen.borrow_mut();
        if seen.len() != n {
            seen.clear();
            seen.resize(n, u32::MAX);
        }
        // SAFETY: we own `p`.
        let start = fastrand(unsafe { &mut p.local().rng }) as usize % n;
        for k in 0..n {
            let vi = (start + k) % n;
            let v = self.proc(vi);
            if vi == p.id || v.runq.is_empty() {
                continue;
            }
            let execs = v.execs.load(Relaxed);
            let max = if std::mem::replace(&mut seen[vi], execs) == execs {
                // Not moved: half, as any steal.
                u32::MAX
            } else if v.runq.len() >= STEAL_QUEUED_BACKLOG {
                // Moving, but behind: its oldest few.
                STEAL_QUEUED_OLDEST
            } else {
                continue;
            };
            if let Some(t) = self.steal_ring_at_most(p, v, max) {
                return Some(t);
            }
        }
        None
    }

    /// Half of `v`'s ring into ours (`p`, owned); the last of them to run now.
    fn steal_ring(&self, p: &Processor, v: &Processor) -> Option<Task> {
        self.steal_ring_at_most(p, v, u32::MAX)
    }

    /// `steal_ring`, at most `max` tasks (the oldest of `v`'s ring).
    fn steal_ring_at_most(&self, p: &Processor, v: &Processor, max: u32) -> Option<Task> {
        let before = p.runq.len();
        // SAFETY: we own `p`'s ring (the destination); `v` is another P.
        let t = unsafe { v.runq.steal_into(&p.runq, max) }?;
        let n = (p.runq.len() + 1).saturating_sub(before);
        p.count_steal_from(v, n as u64);
        if crate::trace::on() {
            self.trace_steal(p.id, v.id, n);
        }
        // SAFETY: ring items are owned task references.
        Some(unsafe { Task::from_raw(t) })
    }

    #[cold]
    fn trace_steal(&self, p: usize, victim: usize, n: usize) {
        self.shared.trace(
            p,
            crate::trace::Ev::Steal {
                victim: victim as u32,
                n: n as u32,
            },
        );
    }
}
