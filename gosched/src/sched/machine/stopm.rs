//! An M without work (Go's `stopm`): the idle list, the timer sleeper, and
//! idle Ms that exit.
//!
//! # Parking and timers
//!
//! Idle Ms park on their `Parker` (`crate::park`) in the idle-M list;
//! `wakep` pops one, hands it a P through `nextp`, and wakes it (with none
//! on the list, the timer sleeper: `Shared::startm`). One idle M at a time
//! is the *timer sleeper*: instead of parking indefinitely it parks until
//! the earliest timer of any P (`Shared::next_timer`), publishing that time
//! in `sleeper_until`. A timer that becomes earlier than that wakes it
//! (`Shared::timer_added`). Publication is a Dekker pair: the sleeper
//! stores `sleeper_until` then reads the heaps' `when0`; an adder stores
//! `when0` then reads `sleeper_until` (all SeqCst), so one of them sees the
//! other. With sockets registered and every P idle, the sleeper waits in
//! the netpoller instead (`Machine::in_netpoll`). An idle runtime with no
//! timers has every M parked: no CPU is used.
//!
//! # Idle Ms exit
//!
//! An M that waited on the idle list for `Config::thread_keep_alive`
//! without being handed a P retires (`try_retire`), so the thread count
//! that grew with blocked syscalls shrinks back, unless no more Ms live
//! than Ps. Under the scheduler lock it leaves the idle list (if `wakep`
//! popped it first, a P is coming: it stays) and marks itself retired. The
//! `Machine` goes on a free list; `newm` gives the next new thread a
//! retired `Machine` before it makes one, so every `Processor::owner`
//! pointer stays valid and `Shared::machines` is as long as the most Ms
//! ever live at once. This needs a `Parker` bound to no thread (the futex
//! backend, `park.rs`); elsewhere Ms never exit. A locked M is on no idle
//! list, so it never retires.

use std::time::Duration;

use super::MachineCtx;
use crate::loom::lock;
use crate::loom::sync::atomic::Ordering::*;
use crate::sched::preempt;
use crate::sched::status;
use crate::sched::timers::{now_ns, NEVER};

/// The netpoller's timeouts are whole milliseconds (epoll): a sleeper whose
/// next timer is sooner sleeps on its parker instead.
#[cfg(not(loom))]
const POLLER_MIN_SLEEP_NS: u64 = 1_000_000;

impl MachineCtx {
    /// Shutdown: give the P back so teardown finds every P idle.
    pub(super) fn drop_p_for_exit(&self) {
        if let Some(pi) = self.p.take() {
            // Queued work stays queued; teardown drains it.
            let _s = lock(&self.shared.sched);
            self.proc(pi).status.store(status::IDLE);
        }
        self.stop_spinning();
    }

    /// Stop spinning, if this M spins.
    pub(in crate::sched) fn stop_spinning(&self) {
        if self.spinning.replace(false) {
            self.shared.spinning_end();
        }
    }

    /// P-less and idle: be the timer sleeper if timers are pending and nobody else
    /// is, otherwise park on the idle-M list until `wakep` hands us a P.
    pub(super) fn park_idle(&self) {
        let shared = &*self.shared;
        // A request that raced the end of our last poll dies here: a flag
        // left set would keep every M's runtime calls on the slow path.
        preempt::clear(&self.m);
        #[cfg(not(loom))]
        self.trim_if_asked();
        let next = shared.next_timer();
        #[cfg(not(loom))]
        let netpoll = shared.netpoll.active();
        #[cfg(loom)]
        let netpoll = false;
        #[cfg(not(loom))]
        let virtual_time = shared.virtual_clock.is_some();
        #[cfg(loom)]
        let virtual_time = false;
        if next != NEVER || netpoll || virtual_time {
            if next <= shared.clock_ns() {
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
        if !shared.midleput(self.m.clone()) {
            return; // shutting down
        }
        // We are on the idle list until `wakep` pops us and hands us a P through
        // `nextp`; only that (or shutdown) ends the wait. Returning without a P
        // would let us push ourselves onto the list a second time.
        self.wait_for_nextp();
    }

    /// Park until handed a P (true) or the runtime shuts down (false). For an
    /// M that some `wakep` may pop (on the idle list, or taken out of the
    /// timer sleeper's role).
    pub(in crate::sched) fn wait_for_nextp(&self) -> bool {
        let shared = &*self.shared;
        // An M idle on the list this long may exit ("Idle Ms exit").
        let keep_alive = shared
            .config
            .thread_keep_alive
            .filter(|_| crate::park::REBINDABLE);
        // Real time, also in a virtual-time runtime.
        let mut retire_at =
            keep_alive.map(|d| std::time::Instant::now() + d.min(crate::sched::timers::MAX_WAIT));
        loop {
            if let Some((p, spinning)) = self.m.take_nextp() {
                self.p.set(Some(p));
                self.spinning.set(spinning);
                return true;
            }
            if shared.shutdown.load(Acquire) {
                return false;
            }
            #[cfg(not(loom))]
            self.trim_if_asked();
            let stop = || shared.shutdown.load(Acquire) || self.m.has_nextp();
            match retire_at {
                Some(at) => {
                    if !self.m.parker.wait_until(stop, at) && std::time::Instant::now() >= at {
                        if self.try_retire() {
                            return false;
                        }
                        // Needed (no more Ms than Ps, or `wakep` popped us):
                        // wait without a deadline; the next time we park
                        // idle, a new one starts.
                        retire_at = None;
                    }
                }
                None => {
                    self.m.parker.wait(stop);
                }
            }
        }
    }

    /// The stack scavenger finished a run after a burst and asks every M
    /// to give back what its thread keeps of the burst (`Shared::heap_trims`,
    /// `blocking.rs`): the free top of its thread's glibc arena
    /// (`trim_thread_arena`). Called where an idle M parks or wakes
    /// without work; the scavenger wakes the idle ones for it.
    #[cfg(not(loom))]
    fn trim_if_asked(&self) {
        let asked = self.shared.heap_trims.load(Relaxed);
        if asked == self.heap_trims_seen.get() {
            return;
        }
        self.heap_trims_seen.set(asked);
        crate::sched::blocking::trim_thread_arena();
    }

    /// Idle on the list for `thread_keep_alive`: exit this thread if it is
    /// not needed ("Idle Ms exit"). True if retired: the caller leaves the
    /// schedule loop.
    fn try_retire(&self) -> bool {
        let shared = &*self.shared;
        debug_assert!(!self.is_locked(), "a locked M is on no idle list");
        let mut s = lock(&shared.sched);
        if shared.shutdown.load(Acquire) || shared.nthreads.load(Acquire) <= shared.nprocs() {
            return false;
        }
        if !shared.leave_idle_ms(&mut s, &self.m) {
            return false; // `wakep` popped us: a P is on its way
        }
        self.m.retired.store(true, Relaxed);
        // Nobody may wake us now (we are on no list): a stale token would
        // count as a pending wake-up for ever (`checkdead`), and a request
        // would outlive its poll.
        self.m.parker.reset();
        preempt::clear(&self.m);
        shared.nthreads.fetch_sub(1, AcqRel);
        shared.retire_m(&mut s, self.m.clone());
        self.retired.set(true);
        true
    }

    /// Become the timer sleeper and park until the earliest timer. False if
    /// another M already is the sleeper.
    fn try_sleep_on_timers(&self) -> bool {
        let shared = &*self.shared;
        // With sockets registered, the sleeper waits in the netpoller —
        // once every P is idle. While another P runs, its M polls at its
        // schedule (step 5) and sysmon every 10 ms; a sleeper blocked in
        // epoll meanwhile would take the events one at a time, each a
        // thread wake-up (W12: 175k epoll_waits and 62k context switches
        // for 200k messages, against tokio's 4k and 2k).
        #[cfg(not(loom))]
        let via_poller = shared.netpoll.active() && shared.all_ps_idle();
        {
            let mut sl = lock(&shared.sleeper);
            if let Some(_m) = &*sl {
                // Another M sleeps. If it waits on its parker (it went to
                // sleep before any socket existed) while sockets now need a
                // poller, send it back round to wait in the poller.
                #[cfg(not(loom))]
                if via_poller && !_m.in_netpoll.load(SeqCst) {
                    _m.wake();
                }
                return false;
            }
            *sl = Some(self.m.clone());
            // Before `sleeper_until`: from here on a `timer_added` (which
            // reads `sleeper_until`) wakes the poller too (`Machine::wake`).
            #[cfg(not(loom))]
            self.m.in_netpoll.store(via_poller, SeqCst);
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
        #[cfg(not(loom))]
        let waited_virtually = self.virtual_wait(next, via_poller);
        #[cfg(loom)]
        let waited_virtually = false;
        if !waited_virtually && next > now && !shared.shutdown.load(Acquire) {
            #[cfg(not(loom))]
            if via_poller && next - now >= POLLER_MIN_SLEEP_NS {
                // Until the next timer (forever if none), or a wake.
                let timeout = (next != NEVER).then(|| Duration::from_nanos(next - now));
                if let Some(ready) = shared.netpoll.poll(timeout, now_ns) {
                    shared.inject(ready, None);
                }
            } else {
                // (The poller's timeouts are whole milliseconds: a sooner
                // timer is slept for on the parker, which `Machine::wake`
                // wakes as well; the network waits that long at most.)
                self.m.parker.wait_timeout(Duration::from_nanos(next - now));
            }
            #[cfg(loom)]
            self.m.parker.wait_timeout(Duration::from_nanos(next - now));
        }
        {
            let mut sl = lock(&shared.sleeper);
            shared.sleeper_until.store(0, SeqCst);
            *sl = None;
            #[cfg(not(loom))]
            self.m.in_netpoll.store(false, SeqCst);
            // A `timer_added` may have woken us after we stopped waiting; now that
            // we are unregistered (under the lock it wakes us under) nobody owes us
            // a wake, so drop that stale token: it must not cut short our next
            // park on the idle list.
            self.m.parker.reset();
        }
        true
    }

    /// The timer sleeper of a virtual-time runtime (`vtime.rs`, "When it
    /// moves"): wait while anything runs, take socket events the kernel
    /// has, else move the clock to the earliest timer `next`; report a
    /// stall when nothing can move. False: not a virtual runtime (sleep
    /// as usual).
    #[cfg(not(loom))]
    fn virtual_wait(&self, next: u64, via_poller: bool) -> bool {
        let shared = &*self.shared;
        let Some(vc) = &shared.virtual_clock else {
            return false;
        };
        if shared.shutdown.load(Acquire) {
            return true;
        }
        if !self.virtually_quiescent() {
            // Until the last P goes idle (`pidleput` wakes us), or a call in
            // flight ends (nobody wakes us for that: look again soon).
            vc.progressed();
            self.wait_real(via_poller, crate::sched::vtime::RECHECK);
            return true;
        }
        if shared.netpoll.active() {
            if let Some(ready) = shared.netpoll.poll(Some(Duration::ZERO), now_ns) {
                if !ready.is_empty() {
                    vc.progressed();
                    shared.inject(ready, None);
                    return true;
                }
            }
        }
        if next != NEVER {
            vc.advance_to(next);
            return true;
        }
        // Nothing in the runtime can move; a socket or a plain thread may.
        if vc.stalled(now_ns(), shared.virtual_polls()) {
            vc.report_stall(shared.stall_report());
        }
        self.wait_real(via_poller, crate::sched::vtime::RECHECK * 10);
        true
    }

    /// Every P idle, nothing queued anywhere, no call in flight: only a
    /// timer, a socket or a plain thread can wake anyone. The conditions
    /// are read one by one, without a lock; work moves between "a P held"
    /// and "counted busy" hand over hand (a syscall counts itself while its
    /// goroutine holds the P, and stops counting only once it has a P
    /// again or parked), so the count is read before and after the Ps:
    /// busy → P is caught by the first read, P → busy by the second.
    #[cfg(not(loom))]
    fn virtually_quiescent(&self) -> bool {
        let shared = &*self.shared;
        let Some(vc) = &shared.virtual_clock else {
            return false;
        };
        vc.busy.load(SeqCst) == 0
            && shared.all_ps_idle()
            && shared.global_len() == 0
            && shared.blocking.all_idle().is_some()
            && vc.busy.load(SeqCst) == 0
    }

    /// Wait for real time `d` at most, in the poller if we registered as
    /// waiting there, else on our parker (both woken by `Machine::wake`).
    #[cfg(not(loom))]
    fn wait_real(&self, via_poller: bool, d: Duration) {
        let shared = &*self.shared;
        if via_poller {
            if let Some(ready) = shared.netpoll.poll(Some(d), now_ns) {
                shared.inject(ready, None);
            }
        } else {
            self.m.parker.wait_timeout(d);
        }
    }
}
