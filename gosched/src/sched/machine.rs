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
//! # Spinning and the lost-wake-up protocol (Go's proc.go, "Worker thread
//! parking/unparking")
//!
//! A *spinning* M has a P and is looking for work to steal. `nmspinning` counts
//! them; at most half of the busy Ps' worth may spin. A submitter (spawn, wake,
//! timer) (1) publishes the work on a queue, (2) issues a StoreLoad barrier
//! (`fence(SeqCst)`), (3) if Ps are idle and `nmspinning == 0`, calls `wakep`,
//! which starts one spinning M. A spinning M that finds work stops spinning and,
//! if it was the last one, wakes another (`resetspinning`), so a burst of work
//! fans out one M at a time. A spinning M that finds nothing (1) releases its P,
//! (2) decrements `nmspinning` (an RMW: the StoreLoad barrier), (3) re-checks the
//! global queue and every P's queue; if anything is there it takes an idle P back
//! and spins again. Either the submitter sees `nmspinning == 0` and wakes an M, or
//! the M's re-check sees the work: no wake-up is lost.
//!
//! **Where we differ from Go: `runnext` readies.** Go calls `wakep` after every
//! `ready`. But a G readied into `runnext` is most often readied by a G that is
//! about to block (a channel hand-off), and the M then runs it at once: the woken
//! M finds nothing, and its futex wake and wasted spin cost the readier ~40% in a
//! ping-pong. So a put into an *empty* `runnext` wakes nobody while the *runnext
//! watcher* (below) is on duty (`Shared::wakep_after_runqput`); a put that
//! displaces a G into the ring, and every other submission, is Go's.
//!
//! A thief takes a running P's `runnext` only if, after the 3 µs wait, `runnext`
//! still holds the G it saw *and* the victim's `execs` (polls started) did not
//! move, i.e. the victim has been in one poll the whole time. Go re-checks only
//! the pointer, which in a ping-pong steals the partner readied a moment later.
//! Such a steal also puts the victim in its *eager* phase (`Processor::eager`):
//! its next 64 readies wake an M as Go does, because its Gs evidently keep running
//! after they ready others (a producer feeding a consumer).
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
//! `readied_goroutine_runs_while_its_readier_keeps_the_p`). `startm` uses the
//! watcher like an idle M when the idle list is empty (no extra thread). The role
//! is a latency bound, not a lost-wake-up protocol: the G is runnable and visible
//! in `runnext` all along, and the readier's M runs it when its poll returns. With
//! every P busy or every P idle nobody watches (nothing to gain, nothing to
//! watch), so an idle runtime still uses no CPU. sysmon (its own issue) takes
//! this duty over with its other P checks.
//!
//! # Parking and timers
//!
//! Idle Ms park on their `Parker` (`park.rs`) in the idle-M list; `startm` pops
//! one, hands it a P through `nextp`, and wakes it. One idle M at a time is the
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
//! USER→RUNNING; if that fails, sysmon retook the P (next issue) and the M is
//! P-less: it looks for an idle P and otherwise parks, as Go's `exitsyscall`.

use std::cell::Cell;
use std::ptr;
use std::time::{Duration, Instant};

use super::park::Parker;
use super::processor::{fastrand, Processor};
use super::status;
use super::task::{Polled, Task};
use super::Shared;
use crate::loom::lock;
use crate::loom::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering::*};
use crate::loom::sync::Arc;
use crate::time::{now_ns, NEVER};

/// One G from the global queue every this many schedule ticks (Go: 61).
const GLOBAL_FAIRNESS_TICK: u32 = 61;
/// Steal rounds over all Ps (Go: 4).
const STEAL_ROUNDS: usize = 4;
/// How long a thief waits before taking a running victim's `runnext` (Go: ~3 µs):
/// the victim most likely just readied that G and is about to block.
const RUNNEXT_STEAL_DELAY: Duration = Duration::from_micros(3);
/// How often the runnext watcher looks at the Ps (a G readied into `runnext`
/// behind a poll that goes on is stolen within two periods).
const WATCH_PERIOD: Duration = Duration::from_micros(50);
/// The watcher's period while no running P has anything in `runnext`.
const WATCH_PERIOD_MAX: Duration = Duration::from_millis(1);
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
        self.nextp.store(p, Release);
        self.parker.wake();
    }
}

/// The calling M's per-thread context.
pub(crate) struct MachineCtx {
    pub(crate) shared: Arc<Shared>,
    m: Arc<Machine>,
    /// The P this M holds, if any.
    pub(crate) p: Cell<Option<usize>>,
    spinning: Cell<bool>,
    /// Set by `yield_now` during a poll.
    pub(crate) yielded: Cell<bool>,
    /// True while a task's poll runs.
    pub(crate) in_poll: Cell<bool>,
}

thread_local! {
    static MACHINE: Cell<*const MachineCtx> = const { Cell::new(ptr::null()) };
}

/// The calling thread's M context, if it is an M. Never inlined: a goroutine may
/// resume on another thread, so the thread-local address must be recomputed on
/// every call rather than cached across a suspension point.
#[inline(never)]
pub(crate) fn current() -> Option<&'static MachineCtx> {
    let p = MACHINE.with(|m| m.get());
    // SAFETY: the context lives on the M's thread stack for the whole time the
    // pointer is installed (`mstart`), and is only used on that thread.
    unsafe { p.as_ref() }
}

/// Start a new M (OS thread) running P `p`.
pub(crate) fn newm(shared: Arc<Shared>, p: usize, spinning: bool) {
    let n = shared.nthreads.fetch_add(1, AcqRel);
    let giveback = |shared: &Shared| {
        shared.nthreads.fetch_sub(1, AcqRel);
        let mut s = shared.lock_sched();
        shared.pidleput(&mut s, p);
        drop(s);
        if spinning {
            shared.nmspinning.fetch_sub(1, SeqCst);
        }
    };
    if n >= shared.config.max_threads {
        // Go aborts the process here; we keep running on the Ms we have (the work
        // stays queued and the existing Ms find it) and say so once.
        static WARNED: AtomicBool = AtomicBool::new(false);
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
    *shared.live_ms.lock().unwrap_or_else(|e| e.into_inner()) += 1;
    let s2 = shared.clone();
    let res = std::thread::Builder::new()
        .name(format!("{}-m{n}", shared.config.name))
        .spawn(move || mstart(s2, p, spinning));
    match res {
        Ok(h) => shared
            .threads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(h),
        Err(e) => {
            eprintln!("gosched: cannot start an M thread: {e}");
            *shared.live_ms.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
            giveback(&shared);
        }
    }
}

fn mstart(shared: Arc<Shared>, p: usize, spinning: bool) {
    crate::coro::overflow::ensure_thread_altstack();
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
    MACHINE.with(|m| m.set(&ctx));
    ctx.schedule();
    MACHINE.with(|m| m.set(ptr::null()));
    drop(ctx);
    let mut live = shared.live_ms.lock().unwrap_or_else(|e| e.into_inner());
    *live -= 1;
    shared.ms_exited.notify_all();
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
        let prev = self.shared.nmspinning.fetch_sub(1, SeqCst);
        debug_assert!(prev > 0);
        if self.shared.npidle.load(SeqCst) != 0 {
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
        let (polled, again) = task.run();
        self.in_poll.set(false);
        // The poll is over: take the P back, unless sysmon retook it.
        let still_own = self.p.get().is_some() && p.status.exit_to_running(status::USER);
        if !still_own {
            self.p.set(None);
        }
        let yielded = self.yielded.replace(false);
        if polled == Polled::Notified {
            let t = again.expect("notified task comes back");
            if still_own && !yielded {
                // Woken while it ran: back of the local queue (Go's goyield).
                // SAFETY: we own `p` (RUNNING).
                unsafe { p.runqput(t, false, |b| self.shared.global_push_batch(b)) };
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
                let got = {
                    let mut s = shared.lock_sched();
                    shared.pidleget(&mut s)
                };
                match got {
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
            let busy = shared.procs.len() - shared.npidle.load(SeqCst);
            if self.spinning.get() || 2 * shared.nmspinning.load(SeqCst) < busy {
                if !self.spinning.get() {
                    self.spinning.set(true);
                    shared.nmspinning.fetch_add(1, SeqCst);
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
                let mut s = shared.lock_sched();
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
                shared.nmspinning.fetch_sub(1, SeqCst);
                // StoreLoad: pairs with the submitter's fence in `wakep_if_idle`.
                fence(SeqCst);
                let work = shared.global_len() > 0
                    || shared
                        .procs
                        .iter()
                        .any(|q| q.status.load() != status::IDLE && q.has_work())
                    || shared.next_timer() <= now_ns();
                if work {
                    let got = {
                        let mut s = shared.lock_sched();
                        shared.pidleget(&mut s)
                    };
                    if let Some(p) = got {
                        self.p.set(Some(p));
                        self.spinning.set(true);
                        shared.nmspinning.fetch_add(1, SeqCst);
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
                    if matches!(v.status.load(), status::USER | status::RUNNING) {
                        // The victim most likely readied that G and is about to
                        // block: let it run it. Steal only if the victim stayed in
                        // one poll for the whole wait and `runnext` still holds the
                        // G we saw. (Go re-checks only the pointer, so in a
                        // ping-pong it steals the partner readied a moment later.)
                        let execs = v.execs.load(Acquire);
                        let until = Instant::now() + RUNNEXT_STEAL_DELAY;
                        while Instant::now() < until {
                            std::hint::spin_loop();
                        }
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
            let _s = self.shared.lock_sched();
            self.proc(pi).status.store(status::IDLE);
        }
        if self.spinning.replace(false) {
            self.shared.nmspinning.fetch_sub(1, SeqCst);
        }
    }

    /// P-less and idle: be the timer sleeper if timers are pending and nobody else
    /// is, otherwise park on the idle-M list until `startm` hands us a P.
    fn park_idle(&self) {
        let shared = &*self.shared;
        let next = shared.next_timer();
        if next != NEVER {
            if next <= now_ns() {
                // Due already: run it on an idle P. If every P is busy, their Ms
                // run their own timers at their next schedule.
                let got = {
                    let mut s = shared.lock_sched();
                    shared.pidleget(&mut s)
                };
                if let Some(p) = got {
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
        // We are on the idle list until `startm` pops us and hands us a P through
        // `nextp`; only that (or shutdown) ends the wait. Returning without a P
        // would let us push ourselves onto the list a second time.
        loop {
            self.m.parker.wait(|| shared.shutdown.load(Acquire));
            let p = self.m.nextp.swap(NO_P, Acquire);
            if p != NO_P {
                self.p.set(Some(p));
                self.spinning.set(self.m.next_spinning.load(Relaxed));
                return;
            }
            if shared.shutdown.load(Acquire) {
                return;
            }
        }
    }

    /// Become the runnext watcher, if nobody is, some P runs and some P is idle,
    /// and watch (see "The runnext watcher"). True if we come back holding a P:
    /// one `startm` handed us, or an idle one we took to go steal a stuck
    /// `runnext` (then we are spinning). False: the caller parks on the idle list.
    fn try_watch(&self) -> bool {
        let shared = &*self.shared;
        let n = shared.procs.len();
        let useful = || {
            let idle = shared.npidle.load(SeqCst);
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
        let mut seen: Vec<(*mut super::task::Header, u32)> = vec![(ptr::null_mut(), 0); n];
        let mut period = WATCH_PERIOD;
        let steal = loop {
            self.m.parker.wait_timeout(period);
            if self.m.nextp.load(Acquire) != NO_P || !useful() {
                break false;
            }
            let (mut stuck, mut pending) = (false, false);
            for (q, last) in shared.procs.iter().zip(seen.iter_mut()) {
                let now = (q.runnext.load(Acquire), q.execs.load(Acquire));
                if !now.0.is_null() && matches!(q.status.load(), status::USER | status::RUNNING) {
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
        // Leave the role, unless `startm` took us out of it to hand us a P.
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
            loop {
                let p = self.m.nextp.swap(NO_P, Acquire);
                if p != NO_P {
                    self.p.set(Some(p));
                    self.spinning.set(self.m.next_spinning.load(Relaxed));
                    return true;
                }
                if !self.m.parker.wait(|| shared.shutdown.load(Acquire)) {
                    return false;
                }
            }
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
        let got = {
            let mut s = shared.lock_sched();
            shared.pidleget(&mut s)
        };
        match got {
            Some(p) => {
                self.p.set(Some(p));
                self.spinning.set(true);
                shared.nmspinning.fetch_add(1, SeqCst);
                true
            }
            None => false,
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
