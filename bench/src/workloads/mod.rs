//! The workloads. One module per workload, every implementation of it side by
//! side, so that their semantics can be compared at a glance.
//!
//! Each function here runs ONE measurement inside the current process (the
//! driver spawns a fresh process per measurement) and returns a [`Sample`].
//! The Go twins live in `bench/go/<module name>.go` and print the same line.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub mod s1_syscall;
pub mod t1_after;
pub mod w10_syscall;
pub mod w12_echo;
pub mod w13_churn;
pub mod w1_spawn;
pub mod w2_skynet;
pub mod w3_pingpong;
pub mod w4_yield;
pub mod w5_mpmc;
pub mod w6_fairness;
pub mod w7_parked;
pub mod w9_pool;

/// W5 cap 0: the message count of the thread + channel-crate rows in full
/// mode (see [`Workload::size_for`]).
pub const W5_CAP0_THREADS: u64 = 1_000_000;

/// One implementation of a workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Impl {
    /// gosched stackful goroutines (`gosched::go`).
    GoschedGo,
    /// gosched goroutines that pass results through `gosched::chan` where the
    /// [`Impl::GoschedGo`] row joins handles (W2 only: Go's canonical skynet).
    GoschedGoChan,
    /// gosched async tasks (`gosched::spawn`).
    GoschedAsync,
    /// Plain OS threads + `gosched::chan` (no runtime; W5 only): the row that
    /// races crossbeam-channel.
    GoschedThreads,
    /// `gosched::pool::Pool` of reused goroutines (W9 only): races ants.
    GoschedPool,
    /// `gosched::pool::PoolWithFunc` (W9 only): races ants.
    GoschedPoolFunc,
    /// tokio multi-thread runtime, `worker_threads = procs`.
    Tokio,
    /// smol: an `async_executor::Executor` run by `procs` OS threads
    /// (`smol::block_on(ex.run(..))`, as smol's own executor threads), with
    /// async-io's timers and I/O and async-channel ([`smol_runtime`]).
    Smol,
    /// may stackful coroutines, `set_workers(procs)`.
    May,
    /// Go goroutines, `GOMAXPROCS = procs` (a separate Go program).
    Go,
    /// Java 25 virtual threads, scheduler parallelism = procs (a separate
    /// Java program, `bench/java`).
    Java,
    /// Go goroutines through an ants v2 `Pool` (W9 only; a separate Go
    /// program built against `bench/third_party/gopath`).
    Ants,
    /// The same through an ants `MultiPool` of 10 × 5,000, round-robin.
    AntsMulti,
    /// Plain OS threads + `crossbeam_channel` (channel workloads only).
    Crossbeam,
    /// Plain OS threads + `flume` (channel workloads only).
    Flume,
    /// Plain OS threads + `kanal` (channel workloads only).
    Kanal,
}

impl Impl {
    pub const ALL: [Impl; 16] = [
        Impl::GoschedGo,
        Impl::GoschedGoChan,
        Impl::GoschedAsync,
        Impl::GoschedThreads,
        Impl::GoschedPool,
        Impl::GoschedPoolFunc,
        Impl::Go,
        Impl::Ants,
        Impl::AntsMulti,
        Impl::Java,
        Impl::May,
        Impl::Tokio,
        Impl::Smol,
        Impl::Crossbeam,
        Impl::Flume,
        Impl::Kanal,
    ];
    /// The peers that gosched rows are divided by (see [`Impl::races`]).
    pub const PEERS: [Impl; 7] = [
        Impl::Go,
        Impl::Ants,
        Impl::Java,
        Impl::May,
        Impl::Tokio,
        Impl::Smol,
        Impl::Crossbeam,
    ];

    /// Whether a ratio `self ÷ peer` is reported: goroutine rows race Go,
    /// Java's virtual threads, may and crossbeam-channel (plain threads);
    /// async rows race tokio and smol; pool rows race ants, plain Go goroutines, Java
    /// virtual threads and tokio (both behind a semaphore in W9).
    pub fn races(self, peer: Impl) -> bool {
        match self {
            Impl::GoschedPool | Impl::GoschedPoolFunc => {
                matches!(peer, Impl::Ants | Impl::Go | Impl::Java | Impl::Tokio)
            }
            Impl::GoschedGo | Impl::GoschedGoChan => {
                matches!(peer, Impl::Go | Impl::Java | Impl::May | Impl::Crossbeam)
            }
            Impl::GoschedAsync => matches!(peer, Impl::Tokio | Impl::Smol),
            Impl::GoschedThreads => peer == Impl::Crossbeam,
            _ => false,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Impl::GoschedGo => "gosched-go",
            Impl::GoschedGoChan => "gosched-go-chan",
            Impl::GoschedAsync => "gosched-async",
            Impl::GoschedThreads => "gosched-threads",
            Impl::GoschedPool => "gosched-pool",
            Impl::GoschedPoolFunc => "gosched-pool-func",
            Impl::Ants => "ants",
            Impl::AntsMulti => "ants-multi",
            Impl::Tokio => "tokio",
            Impl::Smol => "smol",
            Impl::May => "may",
            Impl::Go => "go",
            Impl::Java => "java",
            Impl::Crossbeam => "crossbeam",
            Impl::Flume => "flume",
            Impl::Kanal => "kanal",
        }
    }

    pub fn parse(s: &str) -> Option<Impl> {
        Impl::ALL.into_iter().find(|i| i.name() == s)
    }

    pub fn is_gosched(self) -> bool {
        matches!(
            self,
            Impl::GoschedGo
                | Impl::GoschedGoChan
                | Impl::GoschedAsync
                | Impl::GoschedThreads
                | Impl::GoschedPool
                | Impl::GoschedPoolFunc
        )
    }

    /// A goroutine pool row (W9 only).
    pub fn is_pool(self) -> bool {
        matches!(self, Impl::GoschedPool | Impl::GoschedPoolFunc)
    }

    /// A separate Go program (`bench/go`), not a mode of this binary.
    pub fn is_go(self) -> bool {
        matches!(self, Impl::Go | Impl::Ants | Impl::AntsMulti)
    }

    /// Plain OS threads with a channel crate (no runtime, `procs` unused).
    pub fn is_threads(self) -> bool {
        matches!(
            self,
            Impl::Crossbeam | Impl::Flume | Impl::Kanal | Impl::GoschedThreads
        )
    }
}

/// A workload: what it is called, its sizes, what result proves it ran, and
/// how a sample becomes the reported figure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    W1Spawn,
    W2Skynet,
    W3Pingpong,
    W4Yield,
    /// W5 at cap 1024.
    W5Mpmc,
    /// W5 at cap 0 (rendezvous).
    W5Mpmc0,
    W7Parked,
    /// Timer churn (issue 18): `after(1 h)` created and dropped in a loop.
    T1After,
    /// Blocking calls of 50 µs (`gosched::syscall`), 100 units.
    S1Syscall,
    /// Fast blocking calls (`getppid`), 100 units: the fixed cost.
    S2Getppid,
    /// Timers: units each sleep 10 ms (issue 25).
    W8Sleep,
    /// Churn: units alive at once, all released and joined (issue 25).
    W13Churn,
    /// Fairness: a 1 ms ticker beside 4 hogs (issue 19).
    W6Fairness,
    /// CPU work beside units blocked in 50 ms calls (issue 19).
    W10Syscall,
    /// TCP echo over loopback, 100 connections (issue 21).
    W12Echo,
    /// Pool: tasks that each sleep 10 ms through a pool of 50,000 (ants'
    /// benchmark), against plain goroutines.
    W9Pool,
    /// Pool submit throughput: the submit loop of W9 alone (ants'
    /// `BenchmarkAntsPoolThroughput`).
    W9tSubmit,
    /// Parallel submit throughput: procs × 4 submitters into one pool at
    /// once (ants' `BenchmarkParallelAntsPoolThroughput`).
    W9pParallel,
    /// A saturated pool: procs × 4 submitters keep a pool of procs × 2
    /// workers busy with empty tasks (the pool's own cost per task).
    W9sSaturated,
}

impl Workload {
    pub const ALL: [Workload; 19] = [
        Workload::W1Spawn,
        Workload::W2Skynet,
        Workload::W3Pingpong,
        Workload::W4Yield,
        Workload::W5Mpmc,
        Workload::W5Mpmc0,
        Workload::W7Parked,
        Workload::T1After,
        Workload::S1Syscall,
        Workload::S2Getppid,
        Workload::W8Sleep,
        Workload::W9Pool,
        Workload::W9tSubmit,
        Workload::W9pParallel,
        Workload::W9sSaturated,
        Workload::W13Churn,
        Workload::W6Fairness,
        Workload::W10Syscall,
        Workload::W12Echo,
    ];

    pub fn id(self) -> &'static str {
        match self {
            Workload::W1Spawn => "w1",
            Workload::W2Skynet => "w2",
            Workload::W3Pingpong => "w3",
            Workload::W4Yield => "w4",
            Workload::W5Mpmc => "w5",
            Workload::W5Mpmc0 => "w5-0",
            Workload::W7Parked => "w7",
            Workload::T1After => "t1",
            Workload::S1Syscall => "s1",
            Workload::S2Getppid => "s2",
            Workload::W8Sleep => "w8",
            Workload::W13Churn => "w13",
            Workload::W6Fairness => "w6",
            Workload::W10Syscall => "w10",
            Workload::W12Echo => "w12",
            Workload::W9Pool => "w9",
            Workload::W9tSubmit => "w9t",
            Workload::W9pParallel => "w9p",
            Workload::W9sSaturated => "w9s",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Workload::W1Spawn => "spawn",
            Workload::W2Skynet => "skynet",
            Workload::W3Pingpong => "pingpong",
            Workload::W4Yield => "yield",
            Workload::W5Mpmc => "mpmc",
            Workload::W5Mpmc0 => "mpmc-cap0",
            Workload::W7Parked => "parked",
            Workload::T1After => "after",
            Workload::S1Syscall => "syscall",
            Workload::S2Getppid => "getppid",
            Workload::W8Sleep => "sleep",
            Workload::W13Churn => "churn",
            Workload::W6Fairness => "fairness",
            Workload::W10Syscall => "syscall",
            Workload::W12Echo => "echo",
            Workload::W9Pool => "pool",
            Workload::W9tSubmit => "submit",
            Workload::W9pParallel => "parallel-submit",
            Workload::W9sSaturated => "saturated-pool",
        }
    }

    /// The row family on the command line: `w5` selects both W5 rows.
    fn family(self) -> &'static str {
        match self {
            Workload::W5Mpmc | Workload::W5Mpmc0 => "w5",
            w => w.id(),
        }
    }

    /// The module / Go program name, e.g. `w1_spawn` (both W5 rows run
    /// `w5_mpmc`, with the capacity as an argument).
    pub fn program(self) -> String {
        match self {
            Workload::W5Mpmc | Workload::W5Mpmc0 => "w5_mpmc".into(),
            Workload::W9Pool
            | Workload::W9tSubmit
            | Workload::W9pParallel
            | Workload::W9sSaturated => "w9_pool".into(),
            w => format!("{}_{}", w.id(), w.name()),
        }
    }

    /// The Go program (`bench/go/<name>.go`) of a Go-side `imp`: the ants
    /// rows of W9 run `w9_ants` (it needs the vendored ants), the others
    /// [`Workload::program`].
    pub fn go_program(self, imp: Impl) -> String {
        match imp {
            Impl::Ants | Impl::AntsMulti => "w9_ants".into(),
            _ => self.program(),
        }
    }

    /// Arguments of the Go (and Java) program after the size.
    pub fn go_args(self, imp: Impl) -> Vec<String> {
        let mode = match (self, imp) {
            (Workload::W9Pool, Impl::Ants) => "pool",
            (Workload::W9Pool, Impl::AntsMulti) => "multi",
            (Workload::W9tSubmit, Impl::Ants) => "pool-throughput",
            (Workload::W9tSubmit, Impl::AntsMulti) => "multi-throughput",
            (Workload::W9pParallel, Impl::Ants) => "pool-parallel",
            (Workload::W9sSaturated, Impl::Ants) => "pool-saturated",
            (Workload::W9Pool, _) => "wait",
            (Workload::W9tSubmit, _) => "throughput",
            (Workload::W9pParallel, _) => "parallel",
            (Workload::W9sSaturated, _) => "saturated",
            _ => {
                return match self.cap() {
                    Some(cap) => vec![cap.to_string()],
                    None => Vec::new(),
                }
            }
        };
        vec![mode.into()]
    }

    /// W5's channel capacity.
    pub fn cap(self) -> Option<usize> {
        match self {
            Workload::W5Mpmc => Some(1024),
            Workload::W5Mpmc0 => Some(0),
            _ => None,
        }
    }

    /// One workload by its exact id or name (the worker's argument).
    pub fn parse(s: &str) -> Option<Workload> {
        let s = s.to_ascii_lowercase();
        Workload::ALL
            .into_iter()
            .find(|w| w.id() == s || w.name() == s)
    }

    /// What a driver argument selects: `w5` (or `mpmc`, `w5_mpmc`) is both
    /// W5 rows, `w5-0` only the cap-0 one.
    pub fn select(s: &str) -> Vec<Workload> {
        let s = s.to_ascii_lowercase();
        Workload::ALL
            .into_iter()
            .filter(|w| {
                w.id() == s
                    || w.name() == s
                    || w.family() == s
                    || w.program() == s
                    || (w.family() == "w5" && s == "mpmc")
            })
            .collect()
    }

    /// Whether `imp` has an implementation of this workload (the thread +
    /// channel-crate peers are W5 only; may has no bounded channel for W5;
    /// the goroutines-with-channels variant is W2 only; Java all but T1).
    pub fn runs(self, imp: Impl) -> bool {
        match self {
            _ if imp == Impl::GoschedGoChan => self == Workload::W2Skynet,
            // Java (bench/java): every workload with a Go program but T1
            // (Java has no timer channel, as tokio and may have none) and
            // W9s (a pool's own cost: Java has no goroutine pool).
            _ if imp == Impl::Java => !matches!(self, Workload::T1After | Workload::W9sSaturated),
            // Pools: ants' benchmark rows, and the goroutine and tokio rows
            // that do the same without a pool (W9t: ants' throughput rows;
            // W9p: its parallel one, for the single pool only).
            Workload::W9Pool => matches!(
                imp,
                Impl::GoschedPool
                    | Impl::GoschedPoolFunc
                    | Impl::GoschedGo
                    | Impl::Tokio
                    | Impl::Go
                    | Impl::Ants
                    | Impl::AntsMulti
            ),
            Workload::W9tSubmit => matches!(
                imp,
                Impl::GoschedPool | Impl::GoschedGo | Impl::Go | Impl::Ants | Impl::AntsMulti
            ),
            Workload::W9pParallel => matches!(
                imp,
                Impl::GoschedPool | Impl::GoschedGo | Impl::Go | Impl::Ants
            ),
            // The pools alone: without a pool there is nothing to saturate.
            Workload::W9sSaturated => matches!(imp, Impl::GoschedPool | Impl::Ants),
            _ if matches!(
                imp,
                Impl::GoschedPool | Impl::GoschedPoolFunc | Impl::Ants | Impl::AntsMulti
            ) =>
            {
                false
            }
            Workload::W5Mpmc | Workload::W5Mpmc0 => imp != Impl::May,
            // Spawning from a plain thread (the root outside the runtime).
            Workload::W1Spawn if imp == Impl::GoschedThreads => true,
            // A timer channel: only Go and gosched have one.
            Workload::T1After => matches!(imp, Impl::GoschedGo | Impl::GoschedAsync | Impl::Go),
            // Blocking calls from goroutines: both gosched modes and Go.
            Workload::S1Syscall | Workload::S2Getppid => {
                matches!(imp, Impl::GoschedGo | Impl::Go)
            }
            // Hogs and blocking calls: goroutines (both modes; the async
            // row of W6 is an async ticker beside goroutine hogs), tokio,
            // smol (W6 only: it has no `block_in_place` for W10), may, Go.
            Workload::W6Fairness => matches!(
                imp,
                Impl::GoschedGo
                    | Impl::GoschedAsync
                    | Impl::Go
                    | Impl::Tokio
                    | Impl::Smol
                    | Impl::May
            ),
            Workload::W10Syscall => {
                matches!(imp, Impl::GoschedGo | Impl::Go | Impl::Tokio | Impl::May)
            }
            Workload::W12Echo => matches!(
                imp,
                Impl::GoschedGo | Impl::GoschedAsync | Impl::Go | Impl::Tokio | Impl::Smol
            ),
            Workload::W8Sleep | Workload::W13Churn => matches!(
                imp,
                Impl::GoschedGo
                    | Impl::GoschedAsync
                    | Impl::Go
                    | Impl::Tokio
                    | Impl::Smol
                    | Impl::May
            ),
            _ => !imp.is_threads(),
        }
    }

    /// A short tag shown beside the impl name where its channel is not the
    /// one the row asks for.
    pub fn label(self, imp: Impl) -> Option<&'static str> {
        match (self, imp) {
            (Workload::W3Pingpong | Workload::W5Mpmc0, Impl::Tokio | Impl::Smol) => Some("cap 1"),
            (Workload::W3Pingpong, Impl::May) => Some("unbounded"),
            (
                Workload::W9Pool | Workload::W9tSubmit | Workload::W9pParallel,
                Impl::GoschedGo | Impl::Go,
            ) => Some("no pool"),
            (Workload::W9tSubmit | Workload::W9pParallel, Impl::Java) => Some("no pool"),
            (Workload::W9Pool, Impl::Tokio | Impl::Java) => Some("semaphore"),
            (Workload::W1Spawn, Impl::GoschedThreads) => Some("from a plain thread"),
            (_, i) if i.is_threads() => Some("threads"),
            _ => None,
        }
    }

    /// Why the label: printed under the table.
    fn label_note(self, imp: Impl) -> Option<&'static str> {
        match (self, imp) {
            (Workload::W3Pingpong | Workload::W5Mpmc0, Impl::Tokio) => Some(
                "tokio tasks + async-channel bounded(1): async-channel has no rendezvous (cap 0) channel",
            ),
            (Workload::W3Pingpong | Workload::W5Mpmc0, Impl::Smol) => Some(
                "smol tasks + async-channel bounded(1): async-channel has no rendezvous (cap 0) channel",
            ),
            (Workload::W3Pingpong, Impl::May) => Some(
                "may::sync::mpsc::channel, unbounded: may has no rendezvous (or bounded) channel",
            ),
            (Workload::W9Pool | Workload::W9tSubmit, Impl::GoschedGo | Impl::Go) => {
                Some("one goroutine per task, no pool (ants' BenchmarkGoroutines)")
            }
            (Workload::W9pParallel, Impl::GoschedGo | Impl::Go) => {
                Some("each submitter spawns one goroutine per task, no pool")
            }
            (Workload::W9Pool, Impl::Tokio) => Some(
                "a tokio task per task behind a tokio::sync::Semaphore of 50,000 permits: tokio has no task pool",
            ),
            (Workload::W9Pool, Impl::Java) => Some(
                "a virtual thread per task behind a java.util.concurrent.Semaphore of 50,000 permits: Java has no goroutine pool",
            ),
            (Workload::W9tSubmit, Impl::Java) => {
                Some("one virtual thread per task, no pool (as Go's no-pool row)")
            }
            (Workload::W9pParallel, Impl::Java) => {
                Some("each submitter starts one virtual thread per task, no pool")
            }
            (Workload::W10Syscall | Workload::S1Syscall | Workload::S2Getppid, Impl::Java) => Some(
                "the libc call through java.lang.foreign between jdk.internal.misc.Blocker.begin/end, \
                 as the JDK's own blocking I/O (a carrier may be added while one is blocked)",
            ),
            _ => None,
        }
    }

    /// `size`: units (W1), leaves (W2), round trips (W3), yields per unit
    /// (W4), messages in all (W5, a multiple of 4), parked units (W7).
    pub fn size(self, quick: bool) -> u64 {
        match (self, quick) {
            (Workload::W1Spawn, false) => 1_000_000,
            (Workload::W1Spawn, true) => 200_000,
            (Workload::W2Skynet, false) => 1_000_000,
            (Workload::W2Skynet, true) => 100_000,
            (Workload::W3Pingpong, false) => 1_000_000,
            (Workload::W3Pingpong, true) => 100_000,
            (Workload::W4Yield, false) => 1_000_000,
            (Workload::W4Yield, true) => 100_000,
            (Workload::W5Mpmc | Workload::W5Mpmc0, false) => 10_000_000,
            (Workload::W5Mpmc | Workload::W5Mpmc0, true) => 1_000_000,
            (Workload::W7Parked, false) => 100_000,
            (Workload::W7Parked, true) => 20_000,
            (Workload::T1After, false) => 1_000_000,
            (Workload::T1After, true) => 100_000,
            (Workload::S1Syscall, false) => 100_000,
            (Workload::S1Syscall, true) => 20_000,
            (Workload::S2Getppid, false) => 1_000_000,
            (Workload::S2Getppid, true) => 100_000,
            (Workload::W8Sleep | Workload::W13Churn, false) => 100_000,
            (Workload::W8Sleep | Workload::W13Churn, true) => 20_000,
            // W6: the ticker's window, ms; W10: each phase, ms.
            (Workload::W6Fairness, false) => 2_000,
            (Workload::W6Fairness, true) => 1_000,
            (Workload::W10Syscall, false) => 1_000,
            (Workload::W10Syscall, true) => 500,
            // Messages per connection.
            (Workload::W12Echo, false) => 5_000,
            (Workload::W12Echo, true) => 1_000,
            // Tasks (the pool's capacity stays 50,000).
            (
                Workload::W9Pool
                | Workload::W9tSubmit
                | Workload::W9pParallel
                | Workload::W9sSaturated,
                false,
            ) => 1_000_000,
            (
                Workload::W9Pool
                | Workload::W9tSubmit
                | Workload::W9pParallel
                | Workload::W9sSaturated,
                true,
            ) => 200_000,
        }
    }

    /// The size `imp` runs at: `size`, unless that cannot work on this
    /// machine, then a smaller one and why. Only W7's may row: every may
    /// coroutine stack is 2 memory maps (stack + guard page), so at most
    /// about vm.max_map_count / 2 may coroutines can be alive at once. W7's
    /// figure is per unit, so a smaller run still compares.
    ///
    /// Also W5 cap 0 for the thread peers: a rendezvous handoff between OS
    /// threads costs microseconds (flume ~6 µs/msg, 60 s for 10M), so they
    /// run [`W5_CAP0_THREADS`] messages; the figure is per message.
    ///
    /// The note also explains the row's [`Workload::label`], if any.
    pub fn size_for(self, imp: Impl, size: u64) -> (u64, Option<String>) {
        let (size, why) = self.size_for_inner(imp, size);
        let note = match (why, self.label_note(imp)) {
            (Some(w), Some(l)) => Some(format!("{l}; {w}")),
            (w, l) => w.or(l.map(String::from)),
        };
        (size, note)
    }

    fn size_for_inner(self, imp: Impl, size: u64) -> (u64, Option<String>) {
        if self == Workload::W5Mpmc0 && imp.is_threads() && size > W5_CAP0_THREADS {
            let why = format!(
                "ran {} messages, not {}: a rendezvous between OS threads is slow",
                group(W5_CAP0_THREADS),
                group(size)
            );
            return (W5_CAP0_THREADS, Some(why));
        }
        // may's stacks take two maps each: units alive at once are capped.
        let many_alive = matches!(
            self,
            Workload::W7Parked | Workload::W8Sleep | Workload::W13Churn
        );
        if !many_alive || imp != Impl::May {
            return (size, None);
        }
        let Some(maps) = std::fs::read_to_string("/proc/sys/vm/max_map_count")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
        else {
            return (size, None);
        };
        let cap = maps.saturating_sub(4096) / 2 / 1000 * 1000;
        if size <= cap || cap == 0 {
            return (size, None);
        }
        let why = format!(
            "ran {} units, not {}: 2 maps per may stack, vm.max_map_count = {}",
            group(cap),
            group(size),
            group(maps)
        );
        (cap, Some(why))
    }

    pub fn describe(self, size: u64, procs: usize) -> String {
        match self {
            Workload::W1Spawn => format!(
                "{} units each bump a shared atomic, the last one wakes the waiter; no handles kept",
                group(size)
            ),
            Workload::W2Skynet => format!(
                "10-ary tree, {} leaves, each node sums its children (go, gosched-go-chan: one unbuffered channel per node; others: join handles)",
                group(size)
            ),
            Workload::W3Pingpong => format!(
                "2 units, 2 unbuffered channels, {} round trips",
                group(size)
            ),
            Workload::W5Mpmc | Workload::W5Mpmc0 => format!(
                "4 producers, 4 consumers, one channel of cap {}, {} u64 in all; threads rows: 8 OS threads, no runtime",
                self.cap().unwrap_or(0),
                group(size)
            ),
            Workload::W4Yield => format!(
                "{} units (2 per proc) each yield {} times",
                2 * procs,
                group(size)
            ),
            Workload::W7Parked => format!(
                "{} units each parked on its own oneshot/channel; VmRSS delta per unit",
                group(size)
            ),
            Workload::T1After => format!(
                "one unit creates and drops {} `after(1 h)` timer channels (Go: time.After); see the peak RSS column",
                group(size)
            ),
            Workload::S1Syscall => format!(
                "{} units share {} `syscall(nanosleep 50 µs)` calls (Go: syscall.Nanosleep)",
                s1_syscall::UNITS,
                group(size)
            ),
            Workload::S2Getppid => format!(
                "{} units share {} `syscall(getppid)` calls (Go: syscall.Syscall(SYS_GETPPID), through entersyscall)",
                s1_syscall::UNITS,
                group(size)
            ),
            Workload::W8Sleep => format!(
                "{} units each sleep 10 ms, joined with a WaitGroup; wall time (ideal 10 ms)",
                group(size)
            ),
            Workload::W13Churn => format!(
                "{} units each park on their own channel, all closed, all joined (WaitGroup); ms per round, {} rounds after a warm-up round",
                group(size),
                w13_churn::ROUNDS
            ),
            Workload::W12Echo => format!(
                "{} connections over loopback each send {} messages of {} bytes and wait for each echo (server: a unit per connection); ns per message, round-trip p99",
                w12_echo::CONNS,
                group(size),
                w12_echo::MSG
            ),
            Workload::W6Fairness => format!(
                "{} units spin with no runtime call; one unit sleeps 1 ms at a time for {} ms; ticker lateness p99 (gosched-async: an async ticker beside goroutine hogs)",
                w6_fairness::HOGS,
                group(size)
            ),
            Workload::W9Pool => format!(
                "{} tasks each sleep 10 ms, submitted by one unit through a pool of {} (ants' BenchmarkAntsPool), until all have finished",
                group(size),
                group(w9_pool::CAP as u64)
            ),
            Workload::W9tSubmit => format!(
                "one unit submits {} tasks that each sleep 10 ms to a pool of {}; the submit loop alone, per submit (ants' BenchmarkAntsPoolThroughput; its ns/op is the loop)",
                group(size),
                group(w9_pool::CAP as u64)
            ),
            Workload::W9pParallel => format!(
                "{} units (procs × {}) at once submit {} tasks in all that each sleep 10 ms to one pool of {}; until every submitter has returned, per submit (ants' BenchmarkParallelAntsPoolThroughput)",
                w9_pool::submitters(procs),
                w9_pool::SUBMITTERS_PER_PROC,
                group(size),
                group(w9_pool::CAP as u64)
            ),
            Workload::W9sSaturated => format!(
                "{} units (procs × {}) at once submit {} empty tasks in all to one pool of {} workers (procs × {}); until every task has finished, per task",
                w9_pool::submitters(procs),
                w9_pool::SUBMITTERS_PER_PROC,
                group(size),
                w9_pool::saturated_cap(procs),
                w9_pool::SATURATED_WORKERS_PER_PROC
            ),
            Workload::W10Syscall => format!(
                "{procs} CPU units (20 µs chunks, then a yield) for {} ms alone, then beside {} units looping on a blocking 50 ms call; % of the CPU work kept (higher is better)",
                group(size),
                w10_syscall::CALLERS
            ),
        }
    }

    /// The unit of the reported (primary) figure.
    pub fn unit(self) -> &'static str {
        match self {
            Workload::W1Spawn | Workload::W2Skynet => "ms",
            Workload::W3Pingpong => "ns/round trip",
            Workload::W4Yield => "ns/yield",
            Workload::W5Mpmc | Workload::W5Mpmc0 => "ns/msg",
            Workload::W7Parked => "bytes/unit",
            Workload::T1After => "ns/after",
            Workload::S1Syscall | Workload::S2Getppid => "ns/call",
            Workload::W8Sleep => "ms",
            Workload::W13Churn => "ms/round",
            Workload::W6Fairness => "ms p99 late",
            Workload::W10Syscall => "% kept",
            Workload::W12Echo => "ns/msg",
            Workload::W9Pool => "ms",
            Workload::W9tSubmit | Workload::W9pParallel => "ns/submit",
            Workload::W9sSaturated => "ns/task",
        }
    }

    /// What `Sample::result` must be (`None`: a measurement, not a check).
    pub fn expected(self, size: u64, procs: usize) -> Option<u64> {
        Some(match self {
            Workload::W6Fairness | Workload::W10Syscall => return None,
            Workload::W1Spawn
            | Workload::W7Parked
            | Workload::T1After
            | Workload::W8Sleep
            | Workload::W9Pool
            | Workload::W9tSubmit
            | Workload::W9pParallel
            | Workload::W9sSaturated => size,
            Workload::W13Churn => size * w13_churn::ROUNDS,
            Workload::W12Echo => size * w12_echo::CONNS,
            Workload::S1Syscall | Workload::S2Getppid => {
                size / s1_syscall::UNITS * s1_syscall::UNITS
            }
            Workload::W2Skynet | Workload::W5Mpmc | Workload::W5Mpmc0 => size * (size - 1) / 2,
            // The pinger sends 0..n, the ponger answers each v with v + 1.
            Workload::W3Pingpong => size * (size + 1) / 2,
            Workload::W4Yield => 2 * procs as u64 * size,
        })
    }

    /// The reported figure of one sample, in [`Workload::unit`].
    pub fn primary(self, s: &Sample, size: u64, procs: usize) -> f64 {
        match self {
            Workload::W1Spawn | Workload::W2Skynet | Workload::W8Sleep | Workload::W9Pool => {
                s.elapsed_ns as f64 / 1e6
            }
            Workload::W13Churn => s.elapsed_ns as f64 / 1e6 / w13_churn::ROUNDS as f64,
            Workload::W12Echo => s.elapsed_ns as f64 / (size * w12_echo::CONNS) as f64,
            Workload::W4Yield => s.elapsed_ns as f64 / (2 * procs as u64 * size) as f64,
            Workload::W3Pingpong
            | Workload::W5Mpmc
            | Workload::W5Mpmc0
            | Workload::T1After
            | Workload::S1Syscall
            | Workload::S2Getppid
            | Workload::W9tSubmit
            | Workload::W9pParallel
            | Workload::W9sSaturated => s.elapsed_ns as f64 / size as f64,
            Workload::W7Parked => {
                let delta_kb = s.rss_after_kb.saturating_sub(s.rss_before_kb);
                (delta_kb * 1024) as f64 / size as f64
            }
            Workload::W6Fairness => s.extra[1] as f64 / 1e6,
            Workload::W10Syscall => s.result as f64 / 100.0,
        }
    }

    /// A second figure derived from the median primary one (and the row's
    /// other medians), shown beside it.
    pub fn secondary(self, median_primary: f64, row: &crate::driver::Row) -> String {
        let (median_elapsed_ns, size) = (row.median_elapsed_ns(), row.size);
        match self {
            Workload::W6Fairness => format!(
                "{:.0} ticks, p50 {:.2} ms, max {:.1} ms",
                row.median_result(),
                row.median_extra(0) / 1e6,
                row.median_extra(2) / 1e6
            ),
            Workload::W10Syscall => format!(
                "{:.0} → {:.0} chunks",
                row.median_extra(0),
                row.median_extra(1)
            ),
            Workload::W1Spawn | Workload::W9Pool => {
                format!("{:.0} ns/task", median_primary * 1e6 / size as f64)
            }
            Workload::W2Skynet => {
                let nodes = (size * 10 - 1) / 9; // 1 + 10 + ... + size
                format!("{:.0} ns/node", median_primary * 1e6 / nodes as f64)
            }
            Workload::W3Pingpong
            | Workload::W4Yield
            | Workload::W5Mpmc
            | Workload::W5Mpmc0
            | Workload::T1After
            | Workload::S1Syscall
            | Workload::S2Getppid
            | Workload::W9tSubmit
            | Workload::W9pParallel
            | Workload::W9sSaturated => {
                format!("{:.0} ms", median_elapsed_ns / 1e6)
            }
            Workload::W7Parked => format!("{:.0} ms to park", median_elapsed_ns / 1e6),
            Workload::W8Sleep => format!("{:.1}× ideal", median_primary / 10.0),
            Workload::W13Churn => format!("{:.0} ns/unit", median_primary * 1e6 / size as f64),
            Workload::W12Echo => format!(
                "{:.0}k msgs/s, p50 {:.0} µs, p99 {:.0} µs",
                1e6 / median_primary,
                row.median_extra(0) / 1e3,
                row.median_extra(1) / 1e3
            ),
        }
    }
}

/// What one measurement reports (one JSON line on stdout).
#[derive(Clone, Debug, Default)]
pub struct Sample {
    /// Wall time of the timed part (runtime start-up excluded).
    pub elapsed_ns: u64,
    /// The workload's check value, compared with [`Workload::expected`].
    pub result: u64,
    /// W7 only: VmRSS before spawning and once every unit is parked.
    pub rss_before_kb: u64,
    pub rss_after_kb: u64,
    /// Workload-specific figures (W6: lateness p50, p99, max in ns; W10:
    /// baseline and beside-the-callers chunk counts).
    pub extra: [u64; 3],
}

impl Sample {
    /// W6: `ticks` ticks in `window`, with these latenesses (ns).
    pub fn latencies(window: Duration, ticks: u64, mut late_ns: Vec<u64>) -> Sample {
        late_ns.sort_unstable();
        let at = |q: f64| -> u64 {
            if late_ns.is_empty() {
                return 0;
            }
            let i = ((late_ns.len() - 1) as f64 * q).round() as usize;
            late_ns[i]
        };
        Sample {
            elapsed_ns: window.as_nanos() as u64,
            result: ticks,
            extra: [at(0.5), at(0.99), at(1.0)],
            ..Sample::default()
        }
    }

    /// W10: `beside` as a share of `base`, in hundredths of a percent.
    pub fn ratio(elapsed: Duration, base: u64, beside: u64) -> Sample {
        Sample {
            elapsed_ns: elapsed.as_nanos() as u64,
            result: (beside as f64 * 10_000.0 / base.max(1) as f64).round() as u64,
            extra: [base, beside, 0],
            ..Sample::default()
        }
    }

    pub fn timed(elapsed: Duration, result: u64) -> Sample {
        Sample {
            elapsed_ns: elapsed.as_nanos() as u64,
            result,
            ..Sample::default()
        }
    }
}

/// Worker entry: `gosched-bench run <workload> <impl> <procs> <size>`.
/// Runs one measurement and prints one JSON line.
pub fn run_one(w: Workload, imp: Impl, procs: usize, size: u64) -> Result<(), String> {
    if imp.is_go() {
        return Err(format!(
            "the {} implementation is a separate program (bench/go)",
            imp.name()
        ));
    }
    if imp == Impl::Java {
        return Err("the java implementation is a separate program (bench/java)".into());
    }
    if imp.is_gosched() && !cfg!(feature = "gosched") {
        return Err("built without the `gosched` feature".into());
    }
    let name = imp.name();
    let sample = match w {
        Workload::W1Spawn => w1_spawn::run(imp, procs, size),
        Workload::W2Skynet => w2_skynet::run(imp, procs, size),
        Workload::W3Pingpong => w3_pingpong::run(imp, procs, size),
        Workload::W4Yield => w4_yield::run(imp, procs, size),
        Workload::W5Mpmc | Workload::W5Mpmc0 => {
            w5_mpmc::run(imp, procs, size, w.cap().expect("W5 has a cap"))
        }
        Workload::W7Parked => w7_parked::run(imp, procs, size),
        Workload::T1After => t1_after::run(imp, procs, size),
        Workload::S1Syscall => s1_syscall::run(imp, procs, size, true),
        Workload::S2Getppid => s1_syscall::run(imp, procs, size, false),
        Workload::W8Sleep => w13_churn::run_sleep(imp, procs, size),
        Workload::W13Churn => w13_churn::run(imp, procs, size),
        Workload::W6Fairness => w6_fairness::run(imp, procs, size),
        Workload::W10Syscall => w10_syscall::run(imp, procs, size),
        Workload::W12Echo => w12_echo::run(imp, procs, size),
        Workload::W9Pool => w9_pool::run(imp, procs, size),
        Workload::W9tSubmit => w9_pool::run_throughput(imp, procs, size),
        Workload::W9pParallel => w9_pool::run_parallel(imp, procs, size),
        Workload::W9sSaturated => w9_pool::run_saturated(imp, procs, size),
    };
    let line = crate::json::Obj::new()
        .str("workload", w.id())
        .str("impl", name)
        .num("procs", procs as u64)
        .num("size", size)
        .num("elapsed_ns", sample.elapsed_ns)
        .num("result", sample.result)
        .num("rss_before_kb", sample.rss_before_kb)
        .num("rss_after_kb", sample.rss_after_kb)
        .num("x0", sample.extra[0])
        .num("x1", sample.extra[1])
        .num("x2", sample.extra[2])
        .num("vmhwm_kb", crate::procfs::status_kb("VmHWM").unwrap_or(0))
        .finish();
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")
        .and_then(|_| out.flush())
        .map_err(|e| e.to_string())
}

// ---------------------------------------------------------------------------
// Shared helpers: runtimes built the same way in every workload.
// ---------------------------------------------------------------------------

/// tokio as `#[tokio::main]` builds it, with `worker_threads = procs`, warmed
/// up (one task spawned and joined) before anything is timed.
pub fn tokio_runtime(procs: usize) -> tokio::runtime::Runtime {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(procs)
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(rt.spawn(async {})).expect("tokio warm-up");
    rt
}

/// The executor of the smol rows. One measurement per process, so one
/// executor per process, in a static as smol's own global executor is: a
/// task spawns with `SMOL.spawn(..)` as a tokio task with `tokio::spawn(..)`.
/// Run by the threads of [`smol_runtime`] only.
pub static SMOL: smol::Executor<'static> = smol::Executor::new();

/// smol's multi-threaded executor on exactly `procs` OS threads, built the
/// way smol builds its own executor threads (`smol::spawn`'s): each worker
/// runs `smol::block_on(SMOL.run(..))` (`async_io::block_on`: an idle worker
/// drives async-io's reactor, its timers and I/O, as an idle tokio worker
/// drives tokio's). The main thread is never a worker: [`SmolRuntime::block_on`]
/// only waits (`futures_lite::future::block_on`, which runs no task and
/// polls no reactor) for a root task that was spawned onto [`SMOL`], as
/// `tokio_runtime`'s `rt.block_on(rt.spawn(..))`. async-io also starts its
/// helper thread "async-io" (it polls the reactor only when no worker does,
/// backing off to a 10 ms nap while workers run); it starts during the
/// warm-up. Warmed up like tokio: one task spawned and joined.
pub fn smol_runtime(procs: usize) -> SmolRuntime {
    let (stop, stopped) = async_channel::bounded::<()>(1);
    let workers = (0..procs)
        .map(|i| {
            let stopped = stopped.clone();
            std::thread::Builder::new()
                .name(format!("smol-{i}"))
                .spawn(move || {
                    let run = std::panic::AssertUnwindSafe(|| {
                        smol::block_on(SMOL.run(async move {
                            // Ends when the sender is dropped (Drop below).
                            let _ = stopped.recv().await;
                        }))
                    });
                    // A task that panics unwinds through `run` (async-executor
                    // does not catch it): the message is printed already;
                    // end the process, so that the row fails at once instead
                    // of waiting for a task that will never finish.
                    if std::panic::catch_unwind(run).is_err() {
                        std::process::exit(101);
                    }
                })
                .expect("smol worker thread")
        })
        .collect();
    let rt = SmolRuntime {
        stop: Some(stop),
        workers,
    };
    rt.block_on(rt.spawn(async {}));
    rt
}

/// The `procs` worker threads of [`SMOL`]; dropping it stops and joins them.
pub struct SmolRuntime {
    stop: Option<async_channel::Sender<()>>,
    workers: Vec<std::thread::JoinHandle<()>>,
}

impl SmolRuntime {
    /// Spawns `f` onto [`SMOL`] (a dropped [`smol::Task`] cancels its task:
    /// `.detach()` it to let it run, as a dropped tokio `JoinHandle` does).
    pub fn spawn<T: Send + 'static>(
        &self,
        f: impl std::future::Future<Output = T> + Send + 'static,
    ) -> smol::Task<T> {
        SMOL.spawn(f)
    }

    /// Waits on the calling (main) thread for `f`, running no task.
    pub fn block_on<T>(&self, f: impl std::future::Future<Output = T>) -> T {
        smol::future::block_on(f)
    }
}

impl Drop for SmolRuntime {
    fn drop(&mut self) {
        drop(self.stop.take());
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

/// may with `procs` workers and its other defaults (0x1000-word stacks,
/// workers pinned to cores), warmed up: may starts its scheduler lazily.
pub fn may_init(procs: usize) {
    may::config().set_workers(procs);
    may::go!(|| {}).join().expect("may warm-up");
}

/// gosched with `procs` Ps and its default stack size, warmed up.
#[cfg(feature = "gosched")]
pub fn gosched_runtime(procs: usize) -> gosched::Runtime {
    let rt = gosched::Builder::new()
        .procs(procs)
        .build()
        .expect("gosched runtime");
    rt.block_on(rt.go(|| {})).expect("gosched warm-up");
    rt
}

/// A shared atomic counter that every unit bumps; the unit whose bump makes
/// it reach `n` takes the one-shot `signal` and wakes the waiter. This is how
/// W1 and W7 wait for many units without keeping a handle per unit (Go does
/// the same with `atomic.AddInt64` + `close(done)`). Leaked, so that units
/// capture a plain `&'static` as Go closures capture a pointer: no refcount.
pub struct Countdown<S> {
    count: AtomicU64,
    n: u64,
    signal: Mutex<Option<S>>,
}

impl<S> Countdown<S> {
    pub fn leak(n: u64, signal: S) -> &'static Countdown<S> {
        Box::leak(Box::new(Countdown {
            count: AtomicU64::new(0),
            n,
            signal: Mutex::new(Some(signal)),
        }))
    }

    /// Bump; returns the signal to the unit that completed the count.
    #[inline]
    pub fn bump(&self) -> Option<S> {
        if self.count.fetch_add(1, Ordering::AcqRel) + 1 == self.n {
            self.signal.lock().unwrap().take()
        } else {
            None
        }
    }

    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Acquire)
    }
}

/// A leaked counter (W7's "parked" counter).
pub fn leak_counter() -> &'static AtomicU64 {
    Box::leak(Box::new(AtomicU64::new(0)))
}

/// Polls until `counter` reaches `n`, then waits `settle` more.
pub fn wait_for(counter: &AtomicU64, n: u64, settle: Duration) -> Instant {
    while counter.load(Ordering::Acquire) < n {
        std::thread::sleep(Duration::from_micros(200));
    }
    let reached = Instant::now();
    std::thread::sleep(settle);
    reached
}

/// The message of a panic payload, so that a failed row says why.
pub fn panic_msg(e: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = e.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = e.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".into()
    }
}

/// 1234567 -> "1,234,567".
pub fn group(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection_and_sizes() {
        assert_eq!(
            Workload::select("w5"),
            vec![Workload::W5Mpmc, Workload::W5Mpmc0]
        );
        assert_eq!(Workload::select("w5-0"), vec![Workload::W5Mpmc0]);
        assert_eq!(Workload::select("w3"), vec![Workload::W3Pingpong]);
        for w in Workload::ALL {
            assert_eq!(Workload::parse(w.id()), Some(w));
        }
        assert!(!Workload::W1Spawn.runs(Impl::Crossbeam));
        assert!(!Workload::W5Mpmc.runs(Impl::May));
        assert!(Workload::W2Skynet.runs(Impl::GoschedGoChan));
        assert!(!Workload::W1Spawn.runs(Impl::GoschedGoChan));
        assert_eq!(Impl::parse("gosched-go-chan"), Some(Impl::GoschedGoChan));
        let (n, note) = Workload::W5Mpmc0.size_for(Impl::Flume, 10_000_000);
        assert_eq!((n, note.is_some()), (W5_CAP0_THREADS, true));
        assert_eq!(
            Workload::W5Mpmc.size_for(Impl::Flume, 10_000_000).0,
            10_000_000
        );
        assert_eq!(Workload::W3Pingpong.expected(3, 2), Some(1 + 2 + 3));
        assert_eq!(Workload::W6Fairness.expected(2000, 2), None);
        // W6's figures: p50, p99, max of the latenesses; ticks as the result.
        let s = Sample::latencies(Duration::from_secs(2), 3, vec![30, 10, 20]);
        assert_eq!((s.result, s.extra), (3, [20, 30, 30]));
        // W10's: beside ÷ base in hundredths of a percent.
        assert_eq!(
            Sample::ratio(Duration::from_secs(2), 200, 150).result,
            7_500
        );
        assert!(Impl::GoschedGo.races(Impl::Crossbeam) && !Impl::GoschedAsync.races(Impl::Go));
        assert!(Workload::W12Echo.runs(Impl::Java) && Workload::W1Spawn.runs(Impl::Java));
        assert!(Workload::W9pParallel.runs(Impl::Java) && !Workload::T1After.runs(Impl::Java));
        assert_eq!(Workload::W9Pool.label(Impl::Java), Some("semaphore"));
        assert!(Impl::GoschedPool.races(Impl::Java));
        // W9: the pools and ants run W9 (and W9t) only.
        assert_eq!(Workload::select("w9"), vec![Workload::W9Pool]);
        assert_eq!(Workload::select("w9t"), vec![Workload::W9tSubmit]);
        for imp in [Impl::GoschedPool, Impl::Ants, Impl::AntsMulti] {
            assert!(Workload::W9Pool.runs(imp) && Workload::W9tSubmit.runs(imp));
            assert!(!Workload::W1Spawn.runs(imp) && !Workload::W8Sleep.runs(imp));
            assert_eq!(Impl::parse(imp.name()), Some(imp));
        }
        assert!(Workload::W9Pool.runs(Impl::GoschedPoolFunc));
        assert!(!Workload::W9tSubmit.runs(Impl::GoschedPoolFunc));
        assert!(!Workload::W9Pool.runs(Impl::May) && !Workload::W9tSubmit.runs(Impl::Tokio));
        assert_eq!(Workload::W9Pool.go_program(Impl::Ants), "w9_ants");
        assert_eq!(Workload::W9tSubmit.go_program(Impl::Go), "w9_pool");
        assert_eq!(
            Workload::W9tSubmit.go_args(Impl::AntsMulti),
            ["multi-throughput"]
        );
        // W9p: the single pool and the goroutines, from procs × 4 submitters.
        assert_eq!(Workload::select("w9p"), vec![Workload::W9pParallel]);
        assert_eq!(
            Workload::select("w9_pool"),
            vec![
                Workload::W9Pool,
                Workload::W9tSubmit,
                Workload::W9pParallel,
                Workload::W9sSaturated
            ]
        );
        // W9s: the two pools only.
        assert_eq!(Workload::select("w9s"), vec![Workload::W9sSaturated]);
        for imp in [Impl::GoschedPool, Impl::Ants] {
            assert!(Workload::W9sSaturated.runs(imp));
        }
        for imp in [Impl::GoschedGo, Impl::Go, Impl::Java, Impl::Tokio] {
            assert!(!Workload::W9sSaturated.runs(imp));
        }
        assert_eq!(
            Workload::W9sSaturated.go_args(Impl::Ants),
            ["pool-saturated"]
        );
        assert_eq!(Workload::W9sSaturated.expected(1_000, 2), Some(1_000));
        for imp in [Impl::GoschedPool, Impl::GoschedGo, Impl::Go, Impl::Ants] {
            assert!(Workload::W9pParallel.runs(imp));
        }
        for imp in [
            Impl::GoschedPoolFunc,
            Impl::AntsMulti,
            Impl::Tokio,
            Impl::May,
        ] {
            assert!(!Workload::W9pParallel.runs(imp));
        }
        assert_eq!(Workload::W9pParallel.go_program(Impl::Ants), "w9_ants");
        assert_eq!(Workload::W9pParallel.go_program(Impl::Go), "w9_pool");
        assert_eq!(Workload::W9pParallel.go_args(Impl::Ants), ["pool-parallel"]);
        assert_eq!(Workload::W9pParallel.go_args(Impl::Go), ["parallel"]);
        assert_eq!(Workload::W9pParallel.label(Impl::Go), Some("no pool"));
        assert_eq!(Workload::W9pParallel.unit(), "ns/submit");
        assert_eq!(
            (
                Workload::W9pParallel.size(false),
                Workload::W9pParallel.size(true)
            ),
            (1_000_000, 200_000)
        );
        assert_eq!(Workload::W9pParallel.expected(200_000, 2), Some(200_000));
        assert!(Workload::W9pParallel
            .describe(1_000_000, 2)
            .starts_with("8 units"));
        assert_eq!(Workload::W5Mpmc0.go_args(Impl::Go), ["0"]);
        // smol: a peer of the async rows wherever tokio's row fits it.
        assert_eq!(Impl::parse("smol"), Some(Impl::Smol));
        assert!(Impl::GoschedAsync.races(Impl::Smol) && Impl::GoschedAsync.races(Impl::Tokio));
        assert!(!Impl::GoschedGo.races(Impl::Smol) && !Impl::Smol.is_gosched());
        assert!(Impl::PEERS.contains(&Impl::Smol) && !Impl::Smol.is_threads());
        for w in [
            Workload::W1Spawn,
            Workload::W2Skynet,
            Workload::W3Pingpong,
            Workload::W4Yield,
            Workload::W5Mpmc,
            Workload::W5Mpmc0,
            Workload::W6Fairness,
            Workload::W7Parked,
            Workload::W8Sleep,
            Workload::W12Echo,
            Workload::W13Churn,
        ] {
            assert!(w.runs(Impl::Smol) && w.runs(Impl::Tokio), "{w:?}");
        }
        for w in [
            Workload::T1After,
            Workload::S1Syscall,
            Workload::W9Pool,
            Workload::W9tSubmit,
            Workload::W10Syscall,
        ] {
            assert!(!w.runs(Impl::Smol), "{w:?}");
        }
        assert_eq!(Workload::W5Mpmc0.label(Impl::Smol), Some("cap 1"));
        assert_eq!(Workload::W3Pingpong.label(Impl::Smol), Some("cap 1"));
        assert_eq!(Workload::W5Mpmc.label(Impl::Smol), None);
        assert!(Workload::W3Pingpong
            .size_for(Impl::Smol, 10)
            .1
            .is_some_and(|n| n.starts_with("smol tasks + async-channel bounded(1)")));
        assert!(Impl::GoschedPool.races(Impl::Ants) && !Impl::GoschedGo.races(Impl::Ants));
    }
}
