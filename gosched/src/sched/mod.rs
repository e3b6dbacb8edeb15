//! The G-P-M core. Nothing outside this module touches run queues.
//!
//! One file per protocol; each opens with its rules:
//!
//! | file | what |
//! |---|---|
//! | `task/` | G: the task allocation, its state word, wakers, `JoinHandle`; reaches the scheduler only through `Schedule` |
//! | `runq.rs` | a P's lock-free 256-slot ring (loom-modelled) |
//! | `processor.rs` | P: runq + `runnext` + timers + caches |
//! | `status.rs` | the P status word: who owns a P, who may move it |
//! | `machine/` | M: the schedule loop and one poll (`mod.rs`), `find_runnable` and stealing (`findrunnable.rs`), parking, the timer sleeper, idle Ms exiting (`stopm.rs`) |
//! | `ready.rs` | the ready path: `spawn`/`ready` into `runnext`, the wake policy |
//! | `sysmon.rs` | sysmon: retakes Ps from slow syscalls and long polls, asks long slices to yield, watches `runnext` |
//! | `preempt.rs` | preemption requests: how a long slice is asked to yield, and where it does |
//! | `idle.rs` | idle Ps and Ms, `npidle`/`nmspinning`, `wakep`, the lost-wake-up protocol |
//! | `global.rs` | the global run queue |
//! | `timers/` | per-P timer heaps, the clock, the `Sleep` future, the timer sleeper's glue |
//! | `context.rs` | which runtime/M/P the calling thread belongs to; the global runtime |
//! | `fault.rs` | a panic in user code the scheduler calls (wakers): caught and reported |
//! | `syscall.rs` | a blocking call made in place: the M's `in_call`, the P stays USER |
//! | `lockos.rs` | `lock_os_thread`: a locked goroutine runs only on its M, which runs nothing else (`stoplockedm`/`startlockedm`) |
//! | `procresize.rs` | `set_procs`: Ps made live or DEAD on a running runtime |
//! | `cgroup.rs` | the default procs from the cgroup CPU quota |
//! | `checkdead.rs` | deadlock detection: "all goroutines are asleep", only when certain |
//! | `blocking.rs` | the threads that run blocking calls goroutines hand off |
//! | `owned.rs` | the tasks that have parked (for shutdown) |
//! | `shutdown.rs` | stopping the Ms, cancelling what is left |
//! | `alloc.rs` | task memory from per-thread size-class caches |
//! | `config.rs` | the runtime's fixed configuration |
//! | `loom_runtime.rs` | loom models of the whole scheduler (`--cfg loom`) |
//!
//! `Shared` is held in a std `Arc` also under loom (loom's has no `Weak` and no
//! `self: &Arc<Self>` receivers); everything inside it uses the `crate::loom`
//! shim, so loom models every atomic, lock, thread and park of the scheduler.

pub(crate) mod alloc;
#[cfg(not(loom))]
pub(crate) mod blocking;
#[cfg(not(loom))]
pub(crate) mod cgroup;
#[cfg(not(loom))]
pub(crate) mod checkdead;
pub(crate) mod config;
pub(crate) mod context;
pub(crate) mod fault;
pub(crate) mod global;
pub(crate) mod idle;
pub(crate) mod lockos;
pub(crate) mod machine;
pub(crate) mod owned;
pub(crate) mod preempt;
pub(crate) mod processor;
pub(crate) mod procresize;
pub(crate) mod ready;
pub(crate) mod runq;
pub(crate) mod shutdown;
#[cfg(not(loom))]
pub(crate) mod sigquit;
pub(crate) mod stats;
pub(crate) mod status;
pub(crate) mod syscall;
pub(crate) mod sysmon;
pub(crate) mod task;
pub(crate) mod timers;
#[cfg(not(loom))]
pub(crate) mod vtime;
pub(crate) mod wait;

use std::sync::Weak;

use crossbeam_utils::CachePadded;

use crate::loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Acquire};
use crate::loom::sync::{Condvar, Mutex};
use crate::loom::thread::JoinHandle;
#[cfg(not(loom))]
use crate::stack::StackPool;
use config::Config;
use global::GlobalQueue;
use idle::IdleLists;
use machine::Machine;
use owned::OwnedTasks;
use processor::Processor;
use std::sync::Arc;
use timers::Timers;

/// One runtime: everything its Ms share.
pub(crate) struct Shared {
    /// Fixed at build time.
    pub(crate) config: Config,
    /// The Ps, indexed by id: `config.max_procs` of them, of which the first
    /// `nprocs` are live and the rest DEAD (`procresize.rs`). Ownership of
    /// each is its status word (`status.rs`).
    pub(crate) procs: Box<[CachePadded<Processor>]>,
    /// Live Ps (Go's `gomaxprocs`): changed only by `set_procs`, under the
    /// scheduler lock; read anywhere.
    nprocs: AtomicUsize,
    /// The user chose the procs (Builder, env, `set_procs`): sysmon does not
    /// follow the CPU quota.
    pub(crate) procs_set: AtomicBool,
    /// Plain threads waiting in `block_on` on this runtime (deadlock
    /// detection, `checkdead.rs`).
    pub(crate) block_on_threads: AtomicUsize,
    /// The scheduler lock (Go's `sched.lock`): the global queue (`global.rs`) and
    /// the idle P and M lists (`idle.rs`), one lock so that an M dropping its P
    /// re-checks the global queue atomically with going idle.
    sched: Mutex<Sched>,
    /// Length of the global queue: written under `sched` (Release), read without
    /// it (Acquire) for "anything there?" checks.
    global_len: AtomicUsize,
    /// Tasks ever taken from the global queue (written under `sched`):
    /// sysmon tells a global queue that is being served from one that waits.
    /// (A statistic: std atomic, outside loom's model.)
    pub(crate) global_takes: std::sync::atomic::AtomicUsize,
    /// Ps on the idle list: changed only under `sched` by `pidleget`/`pidleput`
    /// (SeqCst), read by submitters and spinners without the lock.
    npidle: AtomicUsize,
    /// Ms that hold a P and look for work; changed only through `idle.rs`'s
    /// methods (SeqCst RMWs: half of the lost-wake-up protocol).
    nmspinning: AtomicUsize,
    /// Tasks that have parked at least once (shutdown cancels them).
    pub(crate) owned: OwnedTasks,
    /// This runtime's goroutine stacks (P caches refill from it). Not under
    /// loom: the models run async tasks only.
    #[cfg(not(loom))]
    pub(crate) stacks: StackPool,
    /// Threads for the blocking calls goroutines hand off (`blocking.rs`).
    #[cfg(not(loom))]
    pub(crate) blocking: blocking::BlockingPool,
    /// The timer heap of P-less callers (plain threads, Ms whose P was retaken).
    pub(crate) global_timers: Arc<Timers>,
    /// The timer sleeper's wake-up time (ns): 0 = no M sleeps on timers, `NEVER`
    /// while it is computing it. SeqCst, one side of the Dekker pair with the
    /// heaps' `when0` (`machine.rs`, "Parking and timers").
    pub(crate) sleeper_until: AtomicU64,
    /// The timer sleeper M, set and cleared under this lock; adders wake it
    /// under the same lock (`Shared::timer_added`).
    pub(crate) sleeper: Mutex<Option<Arc<Machine>>>,
    /// Runs of the stack scavenger that ended after a burst: each M, when
    /// it next parks or wakes idle, gives back what its thread keeps of
    /// the burst (`MachineCtx::trim_if_asked`). A hint: std atomic.
    #[cfg(not(loom))]
    pub(crate) heap_trims: std::sync::atomic::AtomicU32,
    /// The sysmon thread's sleep and wake-up (`sysmon.rs`).
    #[cfg(not(loom))]
    pub(crate) sysmon: sysmon::Sysmon,
    /// Set once by `begin_shutdown` (SeqCst); Ms exit when they see it.
    pub(crate) shutdown: AtomicBool,
    /// Task ids: P-less spawns take one, Ps take `ID_BATCH` at a time.
    next_id: AtomicU64,
    /// Spawns and completions counted without a P (for `num_goroutine`; the
    /// per-P counts are in `Processor`). Relaxed: a snapshot is all anyone reads.
    pless_spawned: AtomicU64,
    pless_completed: AtomicU64,
    /// Numbers coprime to the P count: strides for a random steal order.
    pub(crate) coprimes: Box<[usize]>,
    /// Live M threads, under this lock; `runtime::shutdown` waits on `ms_exited`
    /// until it is 0. Every M decrements it on exit (`mstart`).
    pub(crate) live_ms: Mutex<usize>,
    pub(crate) ms_exited: Condvar,
    /// M threads live (started, not retired): the `max_threads` cap.
    pub(crate) nthreads: AtomicUsize,
    /// M threads ever started (their names).
    pub(crate) mseq: AtomicUsize,
    /// Join handles of the M threads, joined by `runtime::shutdown`.
    pub(crate) threads: Mutex<Vec<JoinHandle<()>>>,
    /// Every `Machine` ever made (`Processor::owner` points into it);
    /// retired ones are reused, so this is as long as the most Ms ever live
    /// at once.
    pub(crate) machines: Mutex<Vec<Arc<Machine>>>,
    /// Names of the live named goroutines, by id (the dump; a side table so
    /// that unnamed tasks' headers stay small).
    #[cfg(not(loom))]
    pub(crate) names: std::sync::Mutex<std::collections::HashMap<u64, std::sync::Arc<str>>>,
    /// When the runtime was built (schedtrace's clock).
    #[cfg(not(loom))]
    pub(crate) started: std::time::Instant,
    /// `GOSCHED_DEBUG` (`stats.rs`).
    #[cfg(not(loom))]
    pub(crate) debug: stats::Debug,
    /// The netpoller (`crate::netpoll`): its epoll instance is made at the
    /// first socket registration.
    #[cfg(not(loom))]
    pub(crate) netpoll: crate::netpoll::Poller,
    /// This runtime's id in the timeline (`crate::trace`).
    pub(crate) trace_rt: u32,
    /// The clock of a virtual-time runtime (`vtime.rs`); `None`: real time.
    #[cfg(not(loom))]
    pub(crate) virtual_clock: Option<vtime::VirtualClock>,
    /// Ourselves, for the `Arc` a new M or a task needs.
    me: Weak<Shared>,
}

/// What the scheduler lock guards.
pub(crate) struct Sched {
    global: GlobalQueue,
    idle: IdleLists,
}

impl Shared {
    /// Whether this runtime runs on a virtual clock (`vtime.rs`).
    #[inline]
    pub(crate) fn virtual_time(&self) -> bool {
        #[cfg(not(loom))]
        return self.virtual_clock.is_some();
        #[cfg(loom)]
        return false;
    }

    pub(crate) fn new(config: Config) -> Arc<Shared> {
        #[cfg(not(loom))]
        crate::stack::overflow::install_overflow_handler();
        let n = config.procs;
        let cap = config.max_procs.max(n);
        let shared = Arc::new_cyclic(|me| Shared {
            procs: (0..cap)
                .map(|i| {
                    let p = Processor::new(i);
                    if i >= n {
                        p.status.store(status::DEAD);
                    }
                    CachePadded::new(p)
                })
                .collect(),
            nprocs: AtomicUsize::new(n),
            procs_set: AtomicBool::new(config.procs_set),
            block_on_threads: AtomicUsize::new(0),
            sched: Mutex::new(Sched {
                global: GlobalQueue::new(),
                idle: IdleLists::new(n),
            }),
            global_len: AtomicUsize::new(0),
            global_takes: std::sync::atomic::AtomicUsize::new(0),
            npidle: AtomicUsize::new(n),
            nmspinning: AtomicUsize::new(0),
            owned: OwnedTasks::new(cap),
            #[cfg(not(loom))]
            stacks: {
                let pool = StackPool::new();
                pool.set_caches(cap);
                pool
            },
            #[cfg(not(loom))]
            blocking: blocking::BlockingPool::new(&config.name, config.thread_keep_alive),
            global_timers: Timers::new(),
            sleeper_until: AtomicU64::new(0),
            sleeper: Mutex::new(None),
            #[cfg(not(loom))]
            heap_trims: std::sync::atomic::AtomicU32::new(0),
            #[cfg(not(loom))]
            sysmon: sysmon::Sysmon::new(),
            shutdown: AtomicBool::new(false),
            next_id: AtomicU64::new(1),
            pless_spawned: AtomicU64::new(0),
            pless_completed: AtomicU64::new(0),
            coprimes: (1..=cap).filter(|&c| gcd(c, cap) == 1).collect(),
            live_ms: Mutex::new(0),
            ms_exited: Condvar::new(),
            nthreads: AtomicUsize::new(0),
            mseq: AtomicUsize::new(0),
            threads: Mutex::new(Vec::new()),
            machines: Mutex::new(Vec::new()),
            #[cfg(not(loom))]
            names: std::sync::Mutex::new(std::collections::HashMap::new()),
            #[cfg(not(loom))]
            started: std::time::Instant::now(),
            #[cfg(not(loom))]
            debug: stats::Debug::from_env(),
            #[cfg(not(loom))]
            netpoll: crate::netpoll::Poller::new(),
            trace_rt: crate::trace::new_runtime(&config.name),
            #[cfg(not(loom))]
            virtual_clock: config.virtual_time.then(vtime::VirtualClock::new),
            me: me.clone(),
            config,
        });
        #[cfg(not(loom))]
        context::register_runtime(&shared);
        #[cfg(not(loom))]
        crate::trace::start_from_env();
        #[cfg(not(loom))]
        if shared.debug.sigquit {
            sigquit::install();
        }
        shared
    }

    /// Live Ps (Go's `gomaxprocs`).
    #[inline]
    pub(crate) fn nprocs(&self) -> usize {
        self.nprocs.load(Acquire)
    }

    /// Record a timeline event about P `p` (`trace::NO_P`: none) from this
    /// thread. Call only under `if trace::on()`.
    #[cold]
    pub(crate) fn trace(&self, p: usize, ev: crate::trace::Ev) {
        let p = if p == usize::MAX {
            crate::trace::NO_P
        } else {
            p as u32
        };
        crate::trace::record(self.trace_rt, p, ev);
    }

    pub(crate) fn arc(&self) -> Arc<Shared> {
        self.me.upgrade().expect("runtime is alive while used")
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

// Last in the file: `modcycles.py` stops reading a file at its first test module.
#[cfg(all(test, loom))]
mod loom_runtime;
