//! What the scheduler counts, and the snapshot `runtime::stats()` returns;
//! Go's `schedtrace` / `scheddetail` lines (`GOSCHED_DEBUG`), printed by
//! sysmon.
//!
//! # Counters
//!
//! Each P has a `PCounters`. Every counter has **one writer at a time**, who
//! adds with a plain load + store (no read-modify-write on the hot path),
//! and the snapshot reads them with relaxed loads:
//!
//! | counter | writer |
//! |---|---|
//! | `steals_in` | the P's owner (its M stole into its ring) |
//! | `stolen` | a thief — the one exception: an RMW, on the steal path only (the thief has just CASed the victim's ring head anyway) |
//! | `handoffs` | whoever holds the P RETAKEN and calls `handoffp` (sysmon, a locked M, an M entering a slow syscall): the status word passes the P between them |
//! | `preempt_requests`, `user_retakes`, `syscall_retakes` | sysmon |
//!
//! Limits: `steals_in`/`stolen` take the thief's ring length before and
//! after a steal, so a steal from the thief's own ring in between (by a
//! third M) makes both sides count a little less. `running` counts Ps in a
//! poll: a goroutine in an in-place syscall or running P-less after a
//! retake counts as `parked`, and `in_syscall` counts only Ps whose M is
//! in a call (`Machine::in_call`; a call whose P sysmon retook drops out).
//! Schedtrace lines come from sysmon: none with `Builder::sysmon(false)` /
//! `GOSCHED_SYSMON=0`.
//!
//! The counters are std atomics, outside loom's model: statistics, never
//! synchronisation. A snapshot is not atomic: each number is exact when
//! read, but together they are a blur of the moment (as Go's are).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::status;
use super::Shared;
use crate::loom::lock;

/// A single-writer counter (see the module docs).
#[derive(Default)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    /// The writer adds `n` (plain load + store: no other thread writes).
    #[inline]
    pub(crate) fn add(&self, n: u64) {
        self.0.store(self.0.load(Relaxed).wrapping_add(n), Relaxed);
    }

    /// Any thread adds `n` (an RMW: for counters with many writers).
    #[inline]
    pub(crate) fn add_shared(&self, n: u64) {
        self.0.fetch_add(n, Relaxed);
    }

    pub(crate) fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// A P's counters (see the module docs for who writes each).
#[derive(Default)]
pub(crate) struct PCounters {
    pub(crate) steals_in: Counter,
    pub(crate) stolen: Counter,
    pub(crate) handoffs: Counter,
    pub(crate) preempt_requests: Counter,
    pub(crate) user_retakes: Counter,
    pub(crate) syscall_retakes: Counter,
}

/// The task polling on a P, as its owner last recorded it: id and spawn
/// site (a `&'static Location`, so safe to read whenever; never a pointer
/// to the task, which may be freed by the time sysmon looks).
#[derive(Default)]
pub(crate) struct RunningTask {
    id: AtomicU64,
    site: std::sync::atomic::AtomicPtr<std::panic::Location<'static>>,
}

impl RunningTask {
    /// The owner, as a poll begins.
    pub(crate) fn set(
        &self,
        id: u64,
        goroutine: bool,
        site: &'static std::panic::Location<'static>,
    ) {
        self.id.store(id | (u64::from(goroutine) << 63), Relaxed);
        self.site.store(
            (site as *const std::panic::Location<'static>).cast_mut(),
            Relaxed,
        );
    }

    /// ("goroutine" or "task", id, spawn site), if any poll was recorded.
    pub(crate) fn get(
        &self,
    ) -> Option<(&'static str, u64, &'static std::panic::Location<'static>)> {
        let site = self.site.load(Relaxed);
        let id = self.id.load(Relaxed);
        let kind = if id >> 63 == 1 { "goroutine" } else { "task" };
        // SAFETY: only `set` stores here, from a `&'static Location`.
        unsafe { site.as_ref() }.map(|s| (kind, id & !(1 << 63), s))
    }
}

/// What a P is doing (its status word's state).
///
/// ```
/// use gosched::runtime::PState;
/// let rt = gosched::Builder::new().procs(2).max_procs(2).build().unwrap();
/// rt.set_procs(1);
/// let s = rt.stats();
/// assert_eq!(s.per_proc[1].state, PState::Dead); // beyond set_procs
/// assert_ne!(s.per_proc[0].state, PState::Dead);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PState {
    /// On the idle list.
    Idle,
    /// Held by an M running scheduler code.
    Running,
    /// Held by an M inside a goroutine's or task's poll.
    InPoll,
    /// Held by an M inside an in-place `syscall`.
    InSyscall,
    /// Taken from its M by sysmon (or given away before a slow call), on its
    /// way to another M.
    Retaken,
    /// Beyond the current `set_procs` count.
    Dead,
}

impl PState {
    fn of(state: u8) -> PState {
        match state {
            status::IDLE => PState::Idle,
            status::RUNNING => PState::Running,
            status::USER => PState::InPoll,
            status::RETAKEN => PState::Retaken,
            _ => PState::Dead,
        }
    }

    /// Go's `_P*` status numbers, for schedtrace: idle 0, running 1,
    /// syscall 2, gcstop 3 (our RETAKEN: in transit), dead 4.
    fn go_code(self) -> u8 {
        match self {
            PState::Idle => 0,
            PState::Running | PState::InPoll => 1,
            PState::InSyscall => 2,
            PState::Retaken => 3,
            PState::Dead => 4,
        }
    }
}

/// One P in a [`Stats`] snapshot.
///
/// ```
/// let rt = gosched::Builder::new().procs(2).build().unwrap();
/// rt.block_on(rt.go(|| ())).unwrap();
/// let s = rt.stats();
/// let polls: u64 = s.per_proc.iter().map(|p| u64::from(p.polls)).sum();
/// assert!(polls >= 1); // the goroutine ran on some P
/// assert!(s.per_proc.iter().enumerate().all(|(i, p)| p.id == i));
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ProcStats {
    pub id: usize,
    pub state: PState,
    /// Tasks in its run queue (the ring), and whether `runnext` holds one.
    pub runq: usize,
    pub runnext: bool,
    /// Time slices started (Go's `schedtick`), polls started (slices and
    /// `runnext` hand-offs within them), in-place syscalls entered.
    pub schedtick: u32,
    pub polls: u32,
    pub syscalltick: u32,
    /// Tasks its M stole from other Ps, and tasks other Ms stole from it.
    pub steals_in: u64,
    pub stolen: u64,
    /// Times it was handed from one M to another (`handoffp`).
    pub handoffs: u64,
    /// Preemption requests sysmon sent to its long time slices.
    pub preempt_requests: u64,
    /// Times sysmon took it from an M stuck in one poll, or in a syscall.
    pub user_retakes: u64,
    pub syscall_retakes: u64,
    /// Timers pending in its heap.
    pub timers: usize,
    /// Goroutines and tasks spawned on it, and completed on it.
    pub spawned: u64,
    pub completed: u64,
}

/// Goroutine stacks: slabs of address space carved into stacks.
///
/// ```
/// let rt = gosched::Builder::new().procs(1).build().unwrap();
/// rt.block_on(rt.go(|| ())).unwrap();
/// let st = rt.stats().stacks;
/// assert!(st.slabs >= 1 && st.mapped_bytes > 0); // its stack came from a slab
/// ```
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct StackStats {
    pub slabs: usize,
    /// Address space the slabs reserve, in bytes.
    pub mapped_bytes: usize,
    /// Stacks held by goroutines or cached per P.
    pub in_use: usize,
    /// Free stacks whose pages are still resident, and free stacks the
    /// scavenger gave back to the OS.
    pub free_resident: usize,
    pub free_released: usize,
}

/// A snapshot of a runtime's scheduler (`runtime::stats()`, `Runtime::stats()`).
///
/// ```
/// let rt = gosched::Builder::new().procs(2).build().unwrap();
/// let ch = gosched::chan::<()>(0);
/// let rx = ch.clone();
/// let h = rt.go(move || rx.recv());
/// let s = loop {
///     let s = rt.stats(); // each snapshot a blur of the moment: wait until parked
///     if s.parked == 1 {
///         break s;
///     }
///     std::thread::yield_now();
/// };
/// assert_eq!((s.live, s.runnable, s.running), (1, 0, 0));
/// ch.close();
/// rt.block_on(h).unwrap();
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Stats {
    /// Milliseconds since the runtime started.
    pub uptime_ms: u64,
    /// Live Ps (Go's `gomaxprocs`) and how many of them are idle.
    pub procs: usize,
    pub idle_procs: usize,
    /// OS threads running Ms, Ms parked on the idle list, Ms spinning for
    /// work, and Ms locked to a goroutine (`lock_os_thread`).
    pub threads: usize,
    pub idle_threads: usize,
    pub spinning_threads: usize,
    pub locked_threads: usize,
    /// Goroutines and async tasks alive; of those, queued to run (global
    /// queue, run queues and `runnext`s: at most `live`), in a poll now, and
    /// the rest (parked, or on their way to a locked M).
    pub live: usize,
    pub runnable: usize,
    pub running: usize,
    pub parked: usize,
    /// Tasks in the global run queue.
    pub global_queue: usize,
    /// Ps inside an in-place `syscall`, and blocking calls running on the
    /// blocking pool (`syscall` handed off), and that pool's threads.
    pub in_syscall: usize,
    pub blocking_calls: usize,
    pub blocking_threads: usize,
    /// Timers pending over every P and the global heap.
    pub timers: usize,
    pub stacks: StackStats,
    /// Every P allocated (live ones first; see `procs`).
    pub per_proc: Vec<ProcStats>,
}

#[cfg(not(loom))]
impl Shared {
    /// A snapshot of this runtime (`runtime::stats`).
    pub(crate) fn stats(&self) -> Stats {
        let nprocs = self.nprocs();
        let per_proc: Vec<ProcStats> = self
            .procs
            .iter()
            .enumerate()
            .map(|(id, p)| ProcStats {
                id,
                state: match p.status.load() {
                    status::USER if p.owner_in_call() => PState::InSyscall,
                    st => PState::of(st),
                },
                runq: p.runq.len(),
                runnext: !p
                    .runnext
                    .load(std::sync::atomic::Ordering::Acquire)
                    .is_null(),
                schedtick: p.schedtick.load(Relaxed),
                polls: p.execs.load(Relaxed),
                syscalltick: p.syscalltick.load(Relaxed),
                steals_in: p.counters.steals_in.get(),
                stolen: p.counters.stolen.get(),
                handoffs: p.counters.handoffs.get(),
                preempt_requests: p.counters.preempt_requests.get(),
                user_retakes: p.counters.user_retakes.get(),
                syscall_retakes: p.counters.syscall_retakes.get(),
                timers: p.timers.pending(),
                spawned: p.spawned.load(Relaxed),
                completed: p.completed.load(Relaxed),
            })
            .collect();
        let idle_threads = lock(&self.sched).idle_ms();
        let locked_threads = lock(&self.machines)
            .iter()
            .filter(|m| m.locked.load(Relaxed))
            .count();
        let global_queue = self.global_len();
        let live = self.live_tasks();
        let queued = per_proc
            .iter()
            .map(|p| p.runq + usize::from(p.runnext))
            .sum::<usize>()
            + global_queue;
        let runnable = queued.min(live);
        let running = per_proc
            .iter()
            .filter(|p| p.state == PState::InPoll)
            .count()
            .min(live - runnable);
        let (blocking_calls, blocking_threads) = self.blocking.busy_and_threads();
        let st = self.stacks.stats();
        Stats {
            uptime_ms: self.started.elapsed().as_millis() as u64,
            procs: nprocs,
            idle_procs: self.idle_ps(),
            threads: self.nthreads.load(Relaxed),
            idle_threads,
            spinning_threads: self.spinning_ms(),
            locked_threads,
            live,
            runnable,
            running,
            parked: live - runnable - running,
            global_queue,
            in_syscall: per_proc
                .iter()
                .filter(|p| p.state == PState::InSyscall)
                .count(),
            blocking_calls,
            blocking_threads,
            timers: per_proc.iter().map(|p| p.timers).sum::<usize>() + self.global_timers.pending(),
            stacks: StackStats {
                slabs: st.slabs,
                mapped_bytes: st.mapped_bytes,
                in_use: st.outstanding,
                free_resident: st.free_hot,
                free_released: st.free_cold,
            },
            per_proc,
        }
    }

    /// Go's schedtrace line (and with `detail`, scheddetail's P and M lines),
    /// each ending in a newline.
    pub(crate) fn schedtrace(&self, detail: bool) -> String {
        let s = self.stats();
        let live = &s.per_proc[..s.procs.min(s.per_proc.len())];
        let mut out = format!(
            "SCHED {}ms: gomaxprocs={} idleprocs={} threads={} spinningthreads={} \
             needspinning=0 idlethreads={} runqueue={}",
            s.uptime_ms,
            s.procs,
            s.idle_procs,
            s.threads,
            s.spinning_threads,
            s.idle_threads,
            s.global_queue
        );
        if !detail {
            out.push_str(" [ ");
            for p in live {
                let _ = write!(out, "{} ", p.runq + usize::from(p.runnext));
            }
            out.push_str("] schedticks=[ ");
            for p in live {
                let _ = write!(out, "{} ", p.schedtick);
            }
            out.push_str("]\n");
            return out;
        }
        let _ = writeln!(
            out,
            " live={} runnable={} running={} parked={} insyscall={} blockingcalls={} \
             lockedthreads={}",
            s.live,
            s.runnable,
            s.running,
            s.parked,
            s.in_syscall,
            s.blocking_calls,
            s.locked_threads
        );
        let machines = lock(&self.machines).clone();
        let m_index = |m: *const super::machine::Machine| {
            machines
                .iter()
                .position(|x| std::ptr::eq(std::sync::Arc::as_ptr(x), m))
        };
        for p in live {
            let owner = self.procs[p.id]
                .owner
                .load(std::sync::atomic::Ordering::Acquire);
            let m = match p.state {
                PState::Idle | PState::Dead => None,
                _ => m_index(owner),
            };
            let _ = writeln!(
                out,
                "  P{}: status={} schedtick={} syscalltick={} m={} runqsize={} timerslen={} \
                 steals={}/{} handoffs={} preempts={} retakes={}/{}",
                p.id,
                p.state.go_code(),
                p.schedtick,
                p.syscalltick,
                m.map_or("nil".to_string(), |i| i.to_string()),
                p.runq + usize::from(p.runnext),
                p.timers,
                p.steals_in,
                p.stolen,
                p.handoffs,
                p.preempt_requests,
                p.user_retakes,
                p.syscall_retakes
            );
        }
        for (i, m) in machines.iter().enumerate().rev() {
            let held = live.iter().find(|p| {
                !matches!(p.state, PState::Idle | PState::Dead)
                    && std::ptr::eq(
                        self.procs[p.id]
                            .owner
                            .load(std::sync::atomic::Ordering::Acquire),
                        std::sync::Arc::as_ptr(m),
                    )
            });
            let _ = writeln!(
                out,
                "  M{i}: p={} locked={} retired={}",
                held.map_or("nil".to_string(), |p| p.id.to_string()),
                m.locked.load(Relaxed),
                m.is_retired()
            );
        }
        // Go's G lines, for the goroutines and tasks that have parked
        // (`wait.rs`; those that never did are not listed).
        for g in self.parked_snapshot() {
            let (status, reason) = g.go_status();
            let kind = if g.goroutine { "goroutine" } else { "task" };
            let _ = writeln!(out, "  G{}: status={status}({reason}) {kind}", g.id);
        }
        out
    }
}

/// `GOSCHED_DEBUG` (Go's `GODEBUG` for the scheduler): comma-separated
/// `name=value` pairs: `schedtrace=N` (ms), `scheddetail=1`, `sigquit=1`,
/// `hogs=1`.
#[cfg(not(loom))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Debug {
    pub(crate) schedtrace_ms: u64,
    pub(crate) scheddetail: bool,
    /// Dump every goroutine and exit 2 on SIGQUIT (`sigquit.rs`).
    pub(crate) sigquit: bool,
    /// sysmon reports the tasks it asks to yield and whose P it hands off.
    pub(crate) hogs: bool,
}

#[cfg(not(loom))]
impl Debug {
    pub(crate) fn from_env() -> Debug {
        std::env::var("GOSCHED_DEBUG").map_or_else(|_| Debug::default(), |v| Debug::parse(&v))
    }

    /// Unknown names and bad values are ignored (as Go's `GODEBUG`).
    pub(crate) fn parse(s: &str) -> Debug {
        let mut d = Debug::default();
        for kv in s.split(',') {
            let Some((k, v)) = kv.split_once('=') else {
                continue;
            };
            match k.trim() {
                "schedtrace" => d.schedtrace_ms = v.trim().parse().unwrap_or(0),
                "scheddetail" => d.scheddetail = v.trim() == "1",
                "sigquit" => d.sigquit = v.trim() == "1",
                "hogs" => d.hogs = v.trim() == "1",
                _ => {}
            }
        }
        d
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::Debug;

    #[test]
    fn gosched_debug_parses_like_godebug() {
        assert_eq!(Debug::parse(""), Debug::default());
        assert_eq!(
            Debug::parse("schedtrace=1000,scheddetail=1"),
            Debug {
                schedtrace_ms: 1000,
                scheddetail: true,
                sigquit: false,
                hogs: false
            }
        );
        assert_eq!(
            Debug::parse(" schedtrace = 20 , other=3,scheddetail=0,junk"),
            Debug {
                schedtrace_ms: 20,
                scheddetail: false,
                sigquit: false,
                hogs: false
            }
        );
        assert_eq!(Debug::parse("schedtrace=x").schedtrace_ms, 0);
        assert!(Debug::parse("sigquit=1").sigquit);
    }
}
