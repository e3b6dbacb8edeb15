//! Runtime configuration, fixed when the runtime is built (`runtime::Builder`
//! fills it in; the global runtime uses `Config::global`).

#[cfg(not(loom))]
use crate::stack::DEFAULT_STACK_SIZE;

/// Go's default thread limit.
pub const DEFAULT_MAX_THREADS: usize = 10_000;

pub(crate) struct Config {
    /// Number of Ps (Go's GOMAXPROCS).
    pub(crate) procs: usize,
    /// Default goroutine stack size in bytes (already validated by `round_size`).
    pub(crate) stack_size: usize,
    /// Most M threads; at least `procs + 1`.
    pub(crate) max_threads: usize,
    /// Prefix of the M threads' names.
    pub(crate) name: String,
    /// Goroutines may change M after they started (Go's scheduler, exactly);
    /// set only through `unsafe fn Builder::migrate_goroutines`. Default false:
    /// the thread rule (`machine.rs`).
    pub(crate) migrate_goroutines: bool,
    /// Start sysmon (`sysmon.rs`). Off only for measuring its cost
    /// (`GOSCHED_SYSMON=0`, `Builder::sysmon(false)`): without it a slow
    /// syscall or a long poll holds its P, and nothing preempts.
    pub(crate) sysmon: bool,
}

impl Config {
    /// The global runtime's configuration: `GOSCHED_MAXPROCS` Ps (else the
    /// available parallelism), default stacks and thread limit.
    #[cfg(not(loom))]
    pub(crate) fn global() -> Config {
        let procs = default_procs();
        Config {
            procs,
            stack_size: DEFAULT_STACK_SIZE,
            max_threads: DEFAULT_MAX_THREADS.max(procs + 1),
            name: "gosched-global".into(),
            migrate_goroutines: false,
            sysmon: default_sysmon(),
        }
    }
}

/// sysmon runs unless `GOSCHED_SYSMON=0`.
pub(crate) fn default_sysmon() -> bool {
    std::env::var("GOSCHED_SYSMON").map_or(true, |v| v.trim() != "0")
}

/// Procs when none is configured: `GOSCHED_MAXPROCS`, else the available
/// parallelism.
pub(crate) fn default_procs() -> usize {
    std::env::var("GOSCHED_MAXPROCS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}
