//! sysmon: the thread that watches the Ps (Go's `sysmon` and `retake`).
//!
//! One per runtime, started with the first M. It holds no P and runs no
//! task; it reads the Ps' status words and counters and acts on three
//! things:
//!
//! 1. **A P stuck in a system call** (state USER with its M `in_call`,
//!    the same call — `syscalltick` unchanged — for at least one sysmon
//!    tick): if the P has queued work, or nobody spins and no P is idle, or
//!    the call has lasted 10 ms, sysmon retakes it (CAS USER → RETAKEN) and
//!    hands it off (`handoffp`). The M in the call finds out when it returns
//!    (the word's generation moved: `syscall.rs`) and goes P-less.
//! 2. **A long time slice** (state USER, `schedtick` unchanged for
//!    `FORCE_PREEMPT`): sysmon asks the M's task to yield at its next
//!    runtime call (`preempt.rs`). If one poll (`execs` unchanged) has run
//!    for `RETAKE_AFTER`, has not yielded within `RETAKE_GRACE` of the
//!    request, and the P is needed elsewhere (queued work, due
//!    timers, global work with no idle P), sysmon retakes it (CAS USER → RETAKEN) and hands it off: the hog
//!    keeps its OS thread, the OS time-slices it with the others, and the
//!    rest of the queue runs on another M. The hog's M finds out at its next
//!    runtime call or when the poll returns (its CAS compares the generation:
//!    `status.rs`) and behaves as after a syscall.
//! 3. **A G stuck in a running P's `runnext`** (the runnext watcher of
//!    `ready.rs`, folded in here): a P whose `runnext` shows the same G at the
//!    same `execs` at two looks has kept a readied G waiting behind a poll
//!    that goes on: sysmon calls `wakep`, whose spinning M steals it. This is
//!    what lets a `runnext` put wake nobody (the lazy wake policy).
//!
//! # Cadence
//!
//! Go's: sleep 20 µs between looks; after 50 looks in a row with nothing to
//! do, double the sleep up to 10 ms. Two caps keep the `runnext` bound: 1 ms
//! while some P runs and some P is idle (a stuck `runnext` could be stolen:
//! it waits at most about two looks), and 50 µs for 2 ms after a stuck one
//! was found (it tends to happen again). Looking every 50 µs whenever a G
//! merely passes through a `runnext` (the old watcher's rule) cost a busy
//! 2-core box a context switch every 50 µs. When every P has been idle for
//! `DEEP_SLEEP_AFTER` (50 ms) sysmon sleeps until `pidleget` takes one
//! (`Sysmon::wake_if_asleep`): an idle runtime uses no CPU. Until then it
//! looks at least every 1 ms, so the bounds above hold for the burst that
//! ends a quiet spell. (Sleeping at the first idle look woke sysmon at every
//! burst of a server: 7,100 times a second.)
//!
//! # Who writes what
//!
//! sysmon's per-P records (`PRecord`) are its own. It writes a P's status
//! word only by `retake` (a CAS that bumps the generation) and, holding the
//! P in RETAKEN, the plain stores of the hand-off. The preempt flag is a
//! hint (`preempt.rs`).

use std::time::Duration;

use super::machine::Machine;
use super::status::{self, state_of};
use super::timers::{now_ns, NEVER};
use super::Shared;
use crate::loom::lock;
use crate::loom::sync::atomic::Ordering::*;

/// sysmon polls the network when nobody has for this long (Go: 10 ms).
const NETPOLL_EVERY: u64 = 10_000_000;
/// A time slice longer than this gets a preemption request (Go's
/// `forcePreemptNS`).
pub(crate) const FORCE_PREEMPT: u64 = 10_000_000;
/// One poll longer than this loses its P if the P is needed elsewhere.
pub(crate) const RETAKE_AFTER: u64 = 10_000_000;
/// How long a task asked to yield has to do so (at its next runtime call)
/// before its P is retaken: a cooperative yield costs no thread switch.
const RETAKE_GRACE: u64 = 500_000;
/// A syscall that has lasted this long loses its P even if idle Ps or
/// spinning Ms could take the work (Go: 10 ms).
const SYSCALL_RETAKE_ALWAYS: u64 = 10_000_000;
/// sysmon's shortest sleep (Go: 20 µs).
const DELAY_MIN_US: u64 = 20;
/// ... and longest (Go: 10 ms).
const DELAY_MAX_US: u64 = 10_000;
/// Looks with nothing to do before the sleep starts doubling (Go: 50, i.e.
/// 1 ms of 20 µs looks).
const IDLE_LOOKS: u32 = 50;
/// The sleep for a while after a stuck `runnext` was found, while a P is
/// idle: a P whose readied Gs wait behind long polls is likely to do it
/// again (a producer feeding a consumer), so look often then.
const DELAY_RUNNEXT_US: u64 = 50;
/// How long that while lasts.
const RUNNEXT_WATCH_SPELL: u64 = 2_000_000;
/// While every P is idle and a thread waits in `block_on`, sysmon looks for
/// a deadlock again after this long, doubling up to `DEADLOCK_RETRY_MAX`.
#[cfg(not(loom))]
const DEADLOCK_RETRY_MIN: Duration = Duration::from_millis(50);
#[cfg(not(loom))]
const DEADLOCK_RETRY_MAX: Duration = Duration::from_secs(1);
/// How often sysmon re-reads the CPU quota (Go: about once a second).
#[cfg(not(loom))]
const QUOTA_EVERY: u64 = 1_000_000_000;
/// The longest sleep while some P runs and some P is idle.
const DELAY_WATCH_US: u64 = 1_000;
/// How long every P must stay idle before sysmon sleeps until a P is taken
/// (`Sysmon::wake_if_asleep`). A server's Ps all go idle between bursts
/// thousands of times a second; sleeping at once made each burst's first
/// `pidleget` wake sysmon (a futex wake and a thread switch) and restart its
/// cadence at 20 us: 7,100 sysmon wake-ups a second in the HTTP hello
/// server on 2 cores. Until then it looks at least every 1 ms (nobody
/// wakes it when a P is taken).
const DEEP_SLEEP_AFTER: u64 = 50_000_000;

/// What sysmon last saw of one P.
#[derive(Clone, Copy, Default)]
struct PRecord {
    schedtick: u32,
    schedwhen: u64,
    execs: u32,
    execwhen: u64,
    syscalltick: u32,
    syscallwhen: u64,
    /// When sysmon asked the current slice to yield (0: not asked).
    preempted_at: u64,
    runnext: usize,
    runnext_execs: u32,
    /// The P's ring `taken()` and the global queue's takes at the last look:
    /// work that waits is work nobody took since (`p_needed`).
    runq_taken: u32,
    global_taken: usize,
}

/// What one look found.
#[derive(Default)]
struct Look {
    /// Retook a P.
    acted: bool,
    /// A running P kept a G waiting in `runnext` since the last look.
    runnext_stuck: bool,
    /// Some P is held by an M (running or in a syscall).
    any_running: bool,
}

/// sysmon's sleep and wake-up (std primitives: the thread is not part of
/// the loom models, which call `retake_p`/`handoffp` directly).
#[cfg(not(loom))]
pub(crate) struct Sysmon {
    pub(crate) started: std::sync::atomic::AtomicBool,
    /// True while sysmon sleeps because every P is idle; SeqCst, one half of
    /// a Dekker pair with `npidle` (`wake_if_asleep`).
    asleep: std::sync::atomic::AtomicBool,
    woken: std::sync::Mutex<bool>,
    cv: std::sync::Condvar,
    thread: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
}

#[cfg(not(loom))]
impl Sysmon {
    pub(crate) fn new() -> Self {
        Sysmon {
            started: std::sync::atomic::AtomicBool::new(false),
            asleep: std::sync::atomic::AtomicBool::new(false),
            woken: std::sync::Mutex::new(false),
            cv: std::sync::Condvar::new(),
            thread: std::sync::Mutex::new(None),
        }
    }

    /// Sleep up to `d` (0: until woken); true if woken.
    fn sleep(&self, d: Option<Duration>) -> bool {
        let mut w = self.woken.lock().unwrap_or_else(|e| e.into_inner());
        if !*w {
            w = match d {
                Some(d) => {
                    self.cv
                        .wait_timeout(w, d)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
                None => self.cv.wait(w).unwrap_or_else(|e| e.into_inner()),
            };
        }
        std::mem::replace(&mut *w, false)
    }

    pub(crate) fn wake(&self) {
        *self.woken.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.cv.notify_one();
    }

    /// `pidleget` took a P while every P was idle: if sysmon sleeps for
    /// that reason, wake it. (It stores `asleep` and then re-reads `npidle`;
    /// we changed `npidle` and then read `asleep`, all SeqCst: one of us
    /// sees the other.)
    #[inline]
    pub(crate) fn wake_if_asleep(&self) {
        if self.asleep.load(SeqCst) {
            self.wake();
        }
    }
}

impl Shared {
    /// Start sysmon (once; with the first M).
    #[cfg(not(loom))]
    pub(crate) fn start_sysmon(&self) {
        if !self.config.sysmon
            || self.sysmon.started.load(Relaxed)
            || self.sysmon.started.swap(true, AcqRel)
        {
            return;
        }
        let shared = self.arc();
        let res = std::thread::Builder::new()
            .name(format!("{}-sysmon", self.config.name))
            .spawn(move || shared.sysmon_loop());
        match res {
            Ok(h) => *self.sysmon.thread.lock().unwrap_or_else(|e| e.into_inner()) = Some(h),
            Err(e) => {
                // Not running: `runnext` puts must wake Ms again.
                self.sysmon.started.store(false, Release);
                eprintln!(
                    "gosched: cannot start the sysmon thread ({e}); long polls and slow \
                     syscalls will hold their Ps"
                )
            }
        }
    }

    /// Shutdown: wake sysmon and wait for it to exit.
    #[cfg(not(loom))]
    pub(crate) fn stop_sysmon(&self) {
        self.sysmon.wake();
        let h = self
            .sysmon
            .thread
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(h) = h {
            if h.thread().id() != std::thread::current().id() {
                let _ = h.join();
            }
        }
    }

    #[cfg(not(loom))]
    fn sysmon_loop(&self) {
        let mut recs = vec![PRecord::default(); self.procs.len()];
        let mut delay = DELAY_MIN_US;
        let mut idle_looks = 0u32;
        // When a stuck `runnext` was last found (ns; 0: never).
        let mut last_stuck = 0u64;
        // When the CPU quota was last read (ns).
        let mut quota_read = now_ns();
        // `GOSCHED_DEBUG=schedtrace=N`: the next SCHED line is due (ns).
        let trace_every = self.debug.schedtrace_ms.saturating_mul(1_000_000);
        let trace_at = std::cell::Cell::new(now_ns().saturating_add(trace_every));
        let trace = |now: u64| {
            if trace_every != 0 && now >= trace_at.get() {
                trace_at.set(now.saturating_add(trace_every));
                eprint!("{}", self.schedtrace(self.debug.scheddetail));
            }
        };
        // Since when every P has been idle (ns; 0: some P is held).
        let mut all_idle_since = 0u64;
        while !self.shutdown.load(Acquire) {
            self.sysmon.sleep(Some(Duration::from_micros(delay)));
            if self.shutdown.load(Acquire) {
                break;
            }
            let now = now_ns();
            let all_idle = self.all_ps_idle();
            if !all_idle {
                all_idle_since = 0;
            } else if all_idle_since == 0 {
                all_idle_since = now.max(1);
            }
            if all_idle && now.saturating_sub(all_idle_since) >= DEEP_SLEEP_AFTER {
                // Every P idle: sleep until `pidleget` takes a P. While a
                // thread waits in `block_on`, look for a deadlock now and
                // then (exits if there is one): the first look may come a
                // moment too early (an M not yet on the idle list, a woken
                // thread not yet parked again), so retry, backing off.
                let mut retry = DEADLOCK_RETRY_MIN;
                super::wait::clock_unkept();
                loop {
                    trace(now_ns());
                    self.checkdead();
                    self.sysmon.asleep.store(true, SeqCst);
                    if !self.all_ps_idle() || self.shutdown.load(SeqCst) {
                        self.sysmon.asleep.store(false, SeqCst);
                        break;
                    }
                    let watch =
                        self.config.deadlock_detection && self.block_on_threads.load(SeqCst) > 0;
                    // Asleep for good unless a deadlock check or a SCHED
                    // line is due.
                    let mut wake_in = watch.then_some(retry);
                    if trace_every != 0 {
                        let t = Duration::from_nanos(trace_at.get().saturating_sub(now_ns()));
                        wake_in = Some(wake_in.map_or(t, |w| w.min(t)));
                    }
                    let woken = self.sysmon.sleep(wake_in);
                    self.sysmon.asleep.store(false, SeqCst);
                    if woken || !self.all_ps_idle() || self.shutdown.load(SeqCst) {
                        break;
                    }
                    if watch {
                        retry = (retry * 2).min(DEADLOCK_RETRY_MAX);
                    }
                }
                delay = DELAY_MIN_US;
                idle_looks = 0;
                all_idle_since = 0;
                continue;
            }
            super::wait::tick();
            if now.saturating_sub(quota_read) >= QUOTA_EVERY {
                quota_read = now;
                self.follow_cpu_quota();
            }
            trace(now);
            // Nobody polled the network for a while (every M busy): poll
            // for them (Go: 10 ms).
            if self.netpoll.has_waiters()
                && !self.netpoll.someone_blocked()
                && now.saturating_sub(self.netpoll.last_poll()) >= NETPOLL_EVERY
            {
                if let Some(ready) = self.netpoll.poll(Some(Duration::ZERO), now_ns) {
                    self.inject(ready, None);
                }
            }
            let look = self.sysmon_look(&mut recs, now);
            if look.runnext_stuck {
                last_stuck = now;
            }
            if look.acted {
                idle_looks = 0;
                delay = DELAY_MIN_US;
            } else {
                idle_looks = idle_looks.saturating_add(1);
                if idle_looks > IDLE_LOOKS {
                    delay = (delay * 2).min(DELAY_MAX_US);
                }
            }
            let some_idle = self.idle_ps() != 0;
            if all_idle {
                // Dozing (every P idle, not yet `DEEP_SLEEP_AFTER`): nobody
                // wakes us when a P is taken, so look at least every 1 ms —
                // the `runnext` watch's bound and a prompt first retake
                // for the burst that ends the quiet spell.
                delay = delay.min(DELAY_WATCH_US);
            } else if some_idle && last_stuck != 0 && now - last_stuck < RUNNEXT_WATCH_SPELL {
                delay = delay.min(DELAY_RUNNEXT_US);
            } else if some_idle && look.any_running {
                delay = delay.min(DELAY_WATCH_US);
            }
        }
        // Nobody keeps the wait clock once we are gone (`wait.rs`): a frozen
        // time would stamp later waits in other runtimes with it.
        super::wait::clock_unkept();
    }

    /// Unless the user chose the procs, follow the cgroup CPU quota
    /// (`cgroup.rs`): a container whose limit changes gets as many Ps.
    #[cfg(not(loom))]
    fn follow_cpu_quota(&self) {
        if self.procs_set.load(Relaxed) {
            return;
        }
        let want = super::cgroup::quota_procs();
        if want != self.nprocs() {
            self.set_procs(want, false);
        }
    }

    /// One look at every P (Go's `retake`, plus the runnext watch).
    fn sysmon_look(&self, recs: &mut [PRecord], now: u64) -> Look {
        let mut look = Look::default();
        let mut stuck = false;
        for (pi, (p, rec)) in self.procs.iter().zip(recs.iter_mut()).enumerate() {
            let word = p.status.load_word();
            match state_of(word) {
                // `set_procs` shrank below it: take it now, to die (if the
                // CAS fails, the P moved on; the next look sees it again).
                status::USER if self.p_dying(pi) && p.status.retake(word) => {
                    look.acted = true;
                    self.trace_retake(pi, crate::trace::Retake::Dying);
                    self.handoffp(pi);
                }
                // In a call made in place (`syscall.rs`): its M runs
                // nothing else until the call returns.
                status::USER if p.owner_in_call() => {
                    look.any_running = true;
                    let t = p.syscalltick.load(Relaxed);
                    if rec.syscalltick != t {
                        // A new call: give it one tick (Go).
                        rec.syscalltick = t;
                        rec.syscallwhen = now;
                        continue;
                    }
                    // Retake only if there is other work to do, or nobody
                    // else could do it, or the call is really long.
                    if !p.has_work()
                        && self.spinning_ms() + self.idle_ps() > 0
                        && now.saturating_sub(rec.syscallwhen) < SYSCALL_RETAKE_ALWAYS
                    {
                        continue;
                    }
                    if p.status.retake(word) {
                        look.acted = true;
                        p.counters.syscall_retakes.add(1);
                        self.trace_retake(pi, crate::trace::Retake::Syscall);
                        self.handoffp(pi);
                    }
                }
                st @ (status::USER | status::RUNNING) => {
                    look.any_running = true;
                    let tick = p.schedtick.load(Relaxed);
                    let execs = p.execs.load(Acquire);
                    if rec.schedtick != tick {
                        rec.schedtick = tick;
                        rec.schedwhen = now;
                        rec.preempted_at = 0;
                    } else if now.saturating_sub(rec.schedwhen) >= FORCE_PREEMPT {
                        // The slice is over, also for a chain of hand-offs
                        // between Ms caught between two polls (RUNNING):
                        // the chain stops at its next link (`machine.rs`,
                        // "Hand-off to the readied goroutine's M").
                        p.slice_expired.store(true, Relaxed);
                        if st == status::USER {
                            self.request_preempt(pi, rec, now, word);
                        }
                    }
                    if rec.execs != execs || st != status::USER {
                        rec.execs = execs;
                        rec.execwhen = now;
                    } else if now.saturating_sub(rec.execwhen) >= RETAKE_AFTER
                        // A virtual clock moves only while no P is held:
                        // a running poll keeps its P there.
                        && !self.virtual_time()
                        && rec.preempted_at != 0
                        && now.saturating_sub(rec.preempted_at) >= RETAKE_GRACE
                        && self.p_needed(pi, rec)
                        && p.status.retake(word)
                    {
                        let ran = now.saturating_sub(rec.execwhen);
                        rec.execwhen = now;
                        look.acted = true;
                        p.counters.user_retakes.add(1);
                        if self.hogs_on() {
                            self.report_hog(pi, ran, true);
                        }
                        self.trace_retake(pi, crate::trace::Retake::Hog);
                        self.handoffp(pi);
                        continue;
                    }
                    // What `p_needed` compares at the next look.
                    rec.runq_taken = p.runq.taken();
                    rec.global_taken = self.global_takes.load(Relaxed);
                    // The runnext watch.
                    let next = p.runnext.load(Acquire) as usize;
                    if next != 0 {
                        stuck |= (next, execs) == (rec.runnext, rec.runnext_execs);
                    }
                    rec.runnext = next;
                    rec.runnext_execs = execs;
                }
                _ => {}
            }
        }
        look.runnext_stuck = stuck;
        if stuck && self.idle_ps() != 0 {
            // A spinning M's last steal round takes it (the victim being
            // still in the same poll).
            self.wakep();
        }
        look
    }

    /// The timeline's record of a retake (before the P is handed on).
    #[inline]
    fn trace_retake(&self, pi: usize, why: crate::trace::Retake) {
        if crate::trace::on() {
            self.trace(pi, crate::trace::Ev::Retake { why });
        }
    }

    /// `GOSCHED_DEBUG=hogs=1` (never under loom).
    #[inline]
    fn hogs_on(&self) -> bool {
        #[cfg(not(loom))]
        return self.debug.hogs;
        #[cfg(loom)]
        false
    }

    /// The slice of P `pi` (status word `word` at this look) is over: ask
    /// the task polling there to yield at its next runtime call
    /// (`preempt.rs`).
    fn request_preempt(&self, pi: usize, rec: &mut PRecord, now: u64, word: u64) {
        let p = &self.procs[pi];
        if let Some(m) = self.owner_of(pi) {
            p.counters.preempt_requests.add(1);
            if self.hogs_on() {
                self.report_hog(pi, now.saturating_sub(rec.execwhen), false);
            }
            super::preempt::request(m);
            if crate::trace::on() {
                self.trace(pi, crate::trace::Ev::Preempt);
            }
            // The poll may have ended (and its M gone idle)
            // since we read the word: then take it back.
            if p.status.load_word() != word {
                super::preempt::clear(m);
            }
        }
        // Not counted as work for the cadence (Go counts only retakes): a
        // hog that never honours the request must not keep sysmon at 20 µs.
        rec.schedwhen = now;
        if rec.preempted_at == 0 {
            rec.preempted_at = now;
        }
    }

    /// `GOSCHED_DEBUG=hogs=1`: say which task sysmon asked to yield, or
    /// whose P it handed off, and how long its poll has run.
    #[cold]
    fn report_hog(&self, pi: usize, ran_ns: u64, handed_off: bool) {
        let what = if handed_off {
            format!("still running; P{pi} handed to another M")
        } else {
            "asked to yield at its next runtime call".to_string()
        };
        match self.procs[pi].running.get() {
            Some((kind, id, site)) => eprintln!(
                "gosched: hog: {kind} {id} spawned at {site} has run {} ms without a \
                 runtime call; {what}",
                ran_ns / 1_000_000
            ),
            None => eprintln!("gosched: hog on P{pi}: {what}"),
        }
    }

    /// The M that last ran a task on P `pi`.
    fn owner_of(&self, pi: usize) -> Option<&Machine> {
        let m = self.procs[pi].owner.load(Acquire);
        // SAFETY: `owner` points into `Shared::machines`, which keeps every
        // M alive for the runtime's life (`Processor::owner`).
        unsafe { m.as_ref() }
    }

    /// Is P `pi` (held in one long poll) needed elsewhere? Work that waits
    /// for it: queued in its ring with nobody taking from it since the last
    /// look, the same G in its `runnext` as at the last look, due timers,
    /// or global work with no idle P that nobody took from since the last
    /// look. Queued work that other Ms
    /// steal as fast as it comes (a task spawning a million short ones in one
    /// long poll: W1 async) does not need the P; handing it off there only
    /// put a third thread on two cores and sent every later spawn through
    /// the global queue (W1 async 1.09-1.23x slower with sysmon).
    fn p_needed(&self, pi: usize, rec: &PRecord) -> bool {
        let p = &self.procs[pi];
        let ring_waits = !p.runq.is_empty() && p.runq.taken() == rec.runq_taken;
        let next = p.runnext.load(Acquire) as usize;
        let next_waits = next != 0 && next == rec.runnext;
        if ring_waits || next_waits || p.timers.next_when() <= self.clock_ns() {
            return true;
        }
        if self.idle_ps() != 0 {
            return false;
        }
        self.global_len() > 0 && self.global_takes.load(Relaxed) == rec.global_taken
    }

    /// Hand P `pi`, which the caller retook (RETAKEN), to whoever should have
    /// it (Go's `handoffp`): an M to run its queued work, due timers or the global queue's; a spinning
    /// M if nobody spins and no P is idle (work may come); else the idle list.
    pub(crate) fn handoffp(&self, pi: usize) {
        let p = &self.procs[pi];
        debug_assert_eq!(p.status.load(), status::RETAKEN);
        if crate::trace::on() {
            self.trace(pi, crate::trace::Ev::Handoff);
        }
        // We hold it RETAKEN: the one writer (`stats.rs`).
        p.counters.handoffs.add(1);
        let now = self.clock_ns();
        let mut s = lock(&self.sched);
        // Checked under the lock, which `set_procs` changes the count under:
        // a P found live here cannot die before we are done with it.
        if self.p_dying(pi) {
            // `set_procs` shrank below it: it dies instead (`procresize.rs`).
            drop(s);
            self.destroy_p(pi);
            return;
        }
        let work = p.has_work() || self.global_len() > 0 || p.timers.next_when() <= now;
        let spinning = !work && self.spinning_ms() + self.idle_ps() == 0 && self.claim_spinner();
        if !(work || spinning) {
            self.pidleput(&mut s, pi);
            drop(s);
            let when = p.timers.next_when();
            if when != NEVER {
                // Its timers need a sleeper now that nobody holds it.
                self.timer_added(when);
            }
            return;
        }
        p.status.store(status::RUNNING);
        let m = Shared::mget(&mut s);
        drop(s);
        self.startm(pi, m, spinning);
    }
}
