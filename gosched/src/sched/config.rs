//! Runtime configuration, fixed when the runtime is built (`runtime::Builder`
//! fills it in; the global runtime uses `Config::global`).

#[cfg(not(loom))]
use crate::stack::DEFAULT_STACK_SIZE;

/// Go's default thread limit: the most OS threads (Ms) a runtime starts
/// unless [`Builder::max_threads`](crate::Builder::max_threads) says
/// otherwise.
///
/// ```
/// assert_eq!(gosched::runtime::DEFAULT_MAX_THREADS, 10_000);
/// ```
pub const DEFAULT_MAX_THREADS: usize = 10_000;

pub(crate) struct Config {
    /// Number of Ps at start (Go's GOMAXPROCS); `set_procs` changes the live
    /// count (`Shared::nprocs`).
    pub(crate) procs: usize,
    /// Ps allocated: the most `set_procs` can reach.
    pub(crate) max_procs: usize,
    /// The user chose `procs` (Builder, `GOSCHED_MAXPROCS`): sysmon does not
    /// follow the CPU quota then.
    pub(crate) procs_set: bool,
    /// Default goroutine stack size in bytes (already validated by `round_size`).
    pub(crate) stack_size: usize,
    /// Most M threads; at least `procs + 1`.
    pub(crate) max_threads: usize,
    /// Prefix of the M threads' names.
    pub(crate) name: String,
    /// Start sysmon (`sysmon.rs`). Off only for measuring its cost
    /// (`GOSCHED_SYSMON=0`, `Builder::sysmon(false)`): without it a slow
    /// syscall or a long poll holds its P, and nothing preempts.
    pub(crate) sysmon: bool,
    /// Report "all goroutines are asleep" and exit (`checkdead.rs`).
    pub(crate) deadlock_detection: bool,
    /// An M idle this long exits if more Ms live than Ps (`machine.rs`,
    /// "Idle Ms exit"); `None`: Ms never exit (Go's behaviour).
    pub(crate) thread_keep_alive: Option<std::time::Duration>,
    /// The runtime's timers run on a virtual clock that moves only when
    /// every goroutine and task is parked (`vtime.rs`).
    pub(crate) virtual_time: bool,
}

/// How long an idle M waits for work before its thread exits (tokio's
/// blocking pool keeps threads 10 s too); see
/// [`Builder::thread_keep_alive`](crate::Builder::thread_keep_alive).
///
/// ```
/// use std::time::Duration;
/// assert_eq!(gosched::runtime::DEFAULT_THREAD_KEEP_ALIVE, Duration::from_secs(10));
/// ```
pub const DEFAULT_THREAD_KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(10);

impl Config {
    /// The global runtime's configuration: `GOSCHED_MAXPROCS` Ps (else the
    /// available parallelism), default stacks and thread limit.
    #[cfg(not(loom))]
    pub(crate) fn global() -> Config {
        let (procs, procs_set) = default_procs();
        Config {
            procs,
            max_procs: default_max_procs(procs),
            procs_set,
            stack_size: DEFAULT_STACK_SIZE,
            max_threads: DEFAULT_MAX_THREADS.max(procs + 1),
            name: "gosched-global".into(),
            sysmon: default_sysmon(),
            deadlock_detection: true,
            thread_keep_alive: Some(DEFAULT_THREAD_KEEP_ALIVE),
            virtual_time: false,
        }
    }
}

/// sysmon runs unless `GOSCHED_SYSMON=0`.
pub(crate) fn default_sysmon() -> bool {
    std::env::var("GOSCHED_SYSMON").map_or(true, |v| v.trim() != "0")
}

/// Procs when none is configured, and whether the user chose them:
/// `GOSCHED_MAXPROCS` (chosen), else the CPU quota of our cgroups, else the
/// available parallelism (`cgroup.rs`).
#[cfg(not(loom))]
pub(crate) fn default_procs() -> (usize, bool) {
    match std::env::var("GOSCHED_MAXPROCS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
    {
        Some(n) => (n, true),
        None => (super::cgroup::quota_procs(), false),
    }
}

/// Ps to allocate when the user gives no bound: enough for every CPU this
/// process may run on (so a quota that grows can be followed), and for
/// `procs`.
#[cfg(not(loom))]
pub(crate) fn default_max_procs(procs: usize) -> usize {
    procs.max(super::cgroup::cpu_count())
}
