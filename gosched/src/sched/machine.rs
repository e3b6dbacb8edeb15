//! Machine (M): an OS thread running the schedule loop while it holds a P.
//!
//! # The schedule loop
//!
//! `find_runnable` follows Go's order: this P's due timers; every 61st schedule
//! tick one G from the global queue (fairness); `runnext`, then the local ring;
//! a batch from the global queue; the netpoller (hook for the netpoll issue);
//! stealing (4 rounds over the Ps in a random order, half of a victim's ring;
//! timers and `runnext` of victims only in the last round); then the P is
//! dropped and the M parks.
//!
//! # Spinning, waking, and the runnext watcher
//!
//! The lost-wake-up protocol between spinning Ms and submitters, and `wakep`,
//! live in `idle.rs`; the wake policy for `runnext` (where we differ from Go)
//! and the runnext watcher, in `ready.rs`. This file is the M's side: steps 6–8
//! of `find_runnable` (spin, drop the P, stop spinning and re-check).
//!
//! Stealing a running P's `runnext`: a thief takes it only if, after the 3 µs
//! wait, `runnext` still holds the G it saw *and* the victim's `execs` (polls
//! started) did not move, i.e. the victim has been in one poll the whole time.
//! Go re-checks only the pointer, which in a ping-pong steals the partner readied
//! a moment later. Such a steal puts the victim in its eager phase (`ready.rs`).
//!
//! # Parking and timers
//!
//! Idle Ms park on their `Parker` (`crate::park`) in the idle-M list; `wakep`
//! pops one, hands it a P through `nextp`, and wakes it. One idle M at a time is the
//! *timer sleeper*: instead of parking indefinitely it parks until the earliest
//! timer of any P (`Shared::next_timer`), publishing that time in
//! `sleeper_until`. A timer that becomes earlier than that wakes it
//! (`Shared::timer_added`). Publication is a Dekker pair: the sleeper stores
//! `sleeper_until` then reads the heaps' `when0`; an adder stores `when0` then
//! reads `sleeper_until` (all SeqCst), so one of them sees the other. An idle
//! runtime with no timers has every M parked: no CPU is used.
//!
//! # Retaken Ps
//!
//! The poll of a task runs with the P in USER. When the poll returns, the M CASes
//! USER→RUNNING; if that fails, sysmon retook the P (the sysmon issue) and the M
//! is P-less: it looks for an idle P and otherwise parks, as Go's `exitsyscall`.

use std::cell::Cell;
use std::ptr;
use std::time::Duration;

use super::context;
use super::processor::{fastrand, Processor};
use super::status;
use super::task::{Polled, Task};
use super::timers::{now_ns, NEVER};
use super::Shared;
use crate::loom::lock;
use crate::loom::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering::*};
use crate::loom::thread;
use crate::park::Parker;
use std::sync::Arc;

/// One G from the global queue every this many schedule ticks (Go: 61).
const GLOBAL_FAIRNESS_TICK: u32 = 61;
/// Steal rounds over all Ps (Go: 4).
const STEAL_ROUNDS: usize = 4;
/// How long a thief waits before taking a running victim's `runnext` (Go: ~3 µs):
/// the victim most likely just readied that G and is about to block.
const RUNNEXT_STEAL_DELAY: Duration = Duration::from_micros(3);
const NO_P: usize = usize::MAX;

pub(crate) struct Machine {
    pub(crate) parker: Parker,
    nextp: AtomicUsize,
    next_spinning: AtomicBool,
}

impl Machine {
    /// Hand this idle M the P `p` and wake it.
    pub(crate) fn start(&self, p: usize, spinning: bool) {
        self.next_spinning.store(spinning, Relaxed);
        // A swap, not a store: it also checks that nobody handed this M a P
        // it has not taken yet (and loom orders it as a read-modify-write).
        let prev = self.nextp.swap(p, Release);
        debug_assert_eq!(prev, NO_P, "an idle M was handed two Ps");
        self.parker.wake();
    }

    /// Whether `start` has handed this M a P it has not taken yet.
    pub(super) fn has_nextp(&self) -> bool {
        self.nextp.load(Acquire) != NO_P
    }

    /// Take the P (and spinning flag) handed over by `start`.
    fn take_nextp(&self) -> Option<(usize, bool)> {
        let p = self.nextp.swap(NO_P, Acquire);
        (p != NO_P).then(|| (p, self.next_spinning.load(Relaxed)))
    }
}

/// The calling M's per-thread context.
pub(crate) struct MachineCtx {
    pub(crate) shared: Arc<Shared>,
    pub(super) m: Arc<Machine>,
    /// The P this M holds, if any.
    pub(crate) p: Cell<Option<usize>>,
    pub(super) spinning: Cell<bool>,
    /// Set by `yield_now` during a poll.
    pub(crate) yielded: Cell<bool>,
    /// True while a task's poll runs.
    pub(crate) in_poll: Cell<bool>,
}

/// Start a new M (OS thread) running P `p`.
pub(crate) fn newm(shared: Arc<Shared>, p: usize, spinning: bool) {
    let n = shared.nthreads.fetch_add(1, AcqRel);
    let giveback = |shared: &Shared| {
        shared.nthreads.fetch_sub(1, AcqRel);
        shared.release_p(p);
        if spinning {
            shared.spinning_end();
        }
    };
    if n >= shared.config.max_threads {
        // Go aborts the process here; we keep running on the Ms we have (the work
        // stays queued and the existing Ms find it) and say so once.
        static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        if !WARNED.swap(true, Relaxed) {
            eprintln!(
                "gosched: runtime reached max_threads ({}); not starting another M. \
                 Raise it with Builder::max_threads.",
                shared.config.max_threads
            );
        }
        giveback(&shared);
        return;
    }
    *lock(&shared.live_ms) += 1;
    let s2 = shared.clone();
    let res = thread::Builder::new()
        .name(format!("{}-m{n}", shared.config.name))
        .spawn(move || mstart(s2, p, spinning));
    match res {
        Ok(h) => lock(&shared.threads).push(h),
        Err(e) => {
            eprintln!("gosched: cannot start an M thread: {e}");
            *lock(&shared.live_ms) -= 1;
            giveback(&shared);
        }
    }
}

/// Counts an M's exit however its thread ends (a panic that escapes the
/// schedule loop included), so that shutdown never waits for a dead M.
struct ExitGuard(Arc<Shared>);

impl Drop for ExitGuard {
    fn drop(&mut self) {
        *lock(&self.0.live_ms) -= 1;
        self.0.ms_exited.notify_all();
    }
}

fn mstart(shared: Arc<Shared>, p: usize, spinning: bool) {
    let _exit = ExitGuard(shared.clone());
    #[cfg(not(loom))]
    crate::stack::overflow::ensure_thread_altstack();
    let ctx = MachineCtx {
        shared: shared.clone(),
        m: Arc::new(Machine {
            parker: Parker::new(),
            nextp: AtomicUsize::new(NO_P),
            next_spinning: AtomicBool::new(false),
        }),
        p: Cell::new(Some(p)),
        spinning: Cell::new(spinning),
        yielded: Cell::new(false),
        in_poll: Cell::new(false),
    };
    // Uninstalled before `ctx` is dropped (declared after it).
    let _installed = context::install_machine(&ctx);
    ctx.schedule();
}

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
    thread::yield_now();
}

impl MachineCtx {
    fn proc(&self, p: usize) -> &Processor {
        &self.shared.procs[p]
    }

    /// The schedule loop; returns at shutdown.
    fn schedule(&self) {
        while let Some((task, inherit)) = self.find_runnable() {
            if self.spinning.get() {
                self.resetspinning();
            }
            self.execute(task, inherit);
        }
    }

    /// Go's `resetspinning`: this M found work; if it was the last spinner, start
    /// another one so the next burst of work is noticed.
    fn resetspinning(&self) {
        self.spinning.set(false);
        self.shared.spinning_end();
        if self.shared.idle_ps() != 0 {
            self.shared.wakep();
        }
    }

    fn execute(&self, task: Task, inherit_time: bool) {
        let pi = self.p.get().expect("execute without a P");
        let p = self.proc(pi);
        if !inherit_time {
            // Owner-only write.
            p.schedtick
                .store(p.schedtick.load(Relaxed).wrapping_add(1), Relaxed);
        }
        // Owner-only write; thieves compare it across their `runnext` wait.
        p.execs
            .store(p.execs.load(Relaxed).wrapping_add(1), Release);
        p.status.store(status::USER);
        self.in_poll.set(true);
        let polled = task.run();
        self.in_poll.set(false);
        // The poll is over: take the P back, unless sysmon retook it.
        let still_own = self.p.get().is_some() && p.status.exit_to_running(status::USER);
        if !still_own {
            self.p.set(None);
        }
        let yielded = self.yielded.replace(false);
        if let Polled::Notified(t) = polled {
            if still_own && !yielded {
                // Woken while it ran: back of the local queue (Go's goyield).
                // SAFETY: we own `p` (RUNNING).
                unsafe { p.runqput_tail(t, |b| self.shared.global_push_batch(b)) };
            } else if still_own && !p.has_work() {
                // `yield_now` (Go's Gosched) with nothing local: to the global
                // queue's tail, and refill from its head in the same critical
                // section (what find_runnable would do next with a second lock).
                self.shared.global_push_and_refill(t, p);
            } else {
                // `yield_now`, or no P: the global queue.
                self.shared.global_push(t);
                if !still_own {
                    self.shared.wakep_if_idle();
                }
            }
        }
    }

    /// Find a G to run, parking as needed. `None` at shutdown.
    fn find_runnable(&self) -> Option<(Task, bool)> {
        let shared = &*self.shared;
        'top: loop {
            if shared.shutdown.load(Acquire) {
                self.drop_p_for_exit();
                return None;
            }
            let Some(pi) = self.p.get() else {
                // P-less (woken by the timer, or our P was retaken): take an idle P or park.
                match shared.acquire_idle_p() {
                    Some(p) => self.p.set(Some(p)),
                    None => self.park_idle(),
                }
                continue 'top;
            };
            let p = self.proc(pi);

            // 1. Due timers of this P and the global (P-less) heap.
            self.run_timers(p);

            // 2. Fairness: every 61st tick, one G from the global queue first.
            if p.schedtick.load(Relaxed) % GLOBAL_FAIRNESS_TICK == 0 && shared.global_len() > 0 {
                if let Some(t) = shared.globrunqget(p, 1) {
                    return Some((t, false));
                }
            }

            // 3. Local: runnext, then the ring.
            // SAFETY: we own `p`.
            if let Some(r) = unsafe { p.runqget() } {
                return Some(r);
            }

            // 4. A batch from the global queue.
            if let Some(t) = shared.globrunqget(p, 0) {
                return Some((t, false));
            }

            // 5. Netpoll (non-blocking) goes here with the netpoller issue.

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
                    || shared.next_timer() <= now_ns();
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

    fn run_timers(&self, p: &Processor) {
        let shared = &*self.shared;
        let (a, b) = (p.timers.next_when(), shared.global_timers.next_when());
        if a == NEVER && b == NEVER {
            return;
        }
        let now = now_ns();
        if a <= now {
            p.timers.run_due(now);
        }
        if b <= now {
            shared.global_timers.run_due(now);
        }
    }

    fn run_all_timers(&self) {
        let shared = &*self.shared;
        let next = shared.next_timer();
        if next == NEVER {
            return;
        }
        let now = now_ns();
        if next > now {
            return;
        }
        for q in shared.procs.iter() {
            q.timers.run_due(now);
        }
        shared.global_timers.run_due(now);
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
            let now = if last { now_ns() } else { 0 };
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
                    v.timers.run_due(now);
                    // SAFETY: we own `p`.
                    if let Some((t, _)) = unsafe { p.runqget() } {
                        return Some(t);
                    }
                }
                if v.status.load() == status::IDLE {
                    continue;
                }
                // SAFETY: we own `p`'s ring (the destination); `v` is another P.
                if let Some(t) = unsafe { v.runq.steal_into(&p.runq) } {
                    // SAFETY: ring items are owned task references.
                    return Some(unsafe { Task::from_raw(t) });
                }
                let next = if last {
                    v.runnext.load(Acquire)
                } else {
                    ptr::null_mut()
                };
                if !next.is_null() {
                    if status::is_held_by_m(v.status.load()) {
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
                            return Some(t);
                        }
                        continue;
                    }
                    if let Some(t) = v.steal_runnext(next) {
                        return Some(t);
                    }
                }
            }
        }
        None
    }

    /// Shutdown: give the P back so teardown finds every P idle.
    fn drop_p_for_exit(&self) {
        if let Some(pi) = self.p.take() {
            // Queued work stays queued; teardown drains it.
            let _s = lock(&self.shared.sched);
            self.proc(pi).status.store(status::IDLE);
        }
        if self.spinning.replace(false) {
            self.shared.spinning_end();
        }
    }

    /// P-less and idle: be the timer sleeper if timers are pending and nobody else
    /// is, otherwise park on the idle-M list until `wakep` hands us a P.
    fn park_idle(&self) {
        let shared = &*self.shared;
        let next = shared.next_timer();
        if next != NEVER {
            if next <= now_ns() {
                // Due already: run it on an idle P. If every P is busy, their Ms
                // run their own timers at their next schedule.
                if let Some(p) = shared.acquire_idle_p() {
                    self.p.set(Some(p));
                    return;
                }
            } else if self.try_sleep_on_timers() {
                return;
            }
        }
        if self.try_watch() {
            return;
        }
        if !shared.midleput(self.m.clone()) {
            return; // shutting down
        }
        // We are on the idle list until `wakep` pops us and hands us a P through
        // `nextp`; only that (or shutdown) ends the wait. Returning without a P
        // would let us push ourselves onto the list a second time.
        self.wait_for_nextp();
    }

    /// Park until `wakep` hands us a P (true) or the runtime shuts down (false).
    /// For an M that some `wakep` may pop: on the idle list, or taken out of the
    /// watcher role.
    pub(super) fn wait_for_nextp(&self) -> bool {
        let shared = &*self.shared;
        loop {
            if let Some((p, spinning)) = self.m.take_nextp() {
                self.p.set(Some(p));
                self.spinning.set(spinning);
                return true;
            }
            if !self.m.parker.wait(|| shared.shutdown.load(Acquire)) {
                return false;
            }
        }
    }

    /// Become the timer sleeper and park until the earliest timer. False if
    /// another M already is the sleeper.
    fn try_sleep_on_timers(&self) -> bool {
        let shared = &*self.shared;
        {
            let mut sl = lock(&shared.sleeper);
            if sl.is_some() {
                return false;
            }
            *sl = Some(self.m.clone());
            shared.sleeper_until.store(NEVER, SeqCst);
        }
        let mut next = shared.next_timer();
        loop {
            shared.sleeper_until.store(next.max(1), SeqCst);
            let again = shared.next_timer();
            if again >= next {
                break;
            }
            next = again;
        }
        let now = now_ns();
        if next > now && !shared.shutdown.load(Acquire) {
            self.m.parker.wait_timeout(Duration::from_nanos(next - now));
        }
        {
            let mut sl = lock(&shared.sleeper);
            shared.sleeper_until.store(0, SeqCst);
            *sl = None;
            // A `timer_added` may have woken us after we stopped waiting; now that
            // we are unregistered (under the lock it wakes us under) nobody owes us
            // a wake, so drop that stale token: it must not cut short our next
            // park on the idle list.
            self.m.parker.reset();
        }
        true
    }
}
