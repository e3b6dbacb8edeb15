//! gosched-bench: the benchmark harness of gosched (see bench/README.md and
//! shared/BENCHMARKS.md).
//!
//! One binary, two roles:
//! - driver: `gosched-bench [all | w1 w2 ...] [--quick] [--procs N] ...`
//!   spawns one process per measurement and prints/writes the tables;
//! - worker: `gosched-bench run <workload> <impl> <procs> <size>` runs one
//!   measurement in-process and prints one JSON line.

mod chart;
mod child;
mod civil;
mod driver;
mod golang;
mod java;
mod json;
mod procfs;
mod report;
mod workloads;

use std::process::ExitCode;
use std::time::Duration;

use workloads::{Impl, Workload};

const USAGE: &str = "\
usage: gosched-bench [all | w1 w2 w3 w4 w5 w7 w9 w9t w9p ...] [options]   (w5 = both W5 rows; w5-0 = cap 0 only)
       gosched-bench run <workload> <impl> <procs> <size>   (one measurement)

options:
  --quick          smaller sizes and 3 runs per row (the whole suite in < 2 min)
  --procs N        worker threads of every runtime (GOMAXPROCS for Go); default 2
  --runs N         runs per row (default 5, 3 for rows whose first run takes > 2 s)
  --impl A,B       only these implementations: gosched-go, gosched-go-migrate (goroutines
                   that may change thread: the unsafe Builder::migrate_goroutines),
                   gosched-go-chan (W2 only), gosched-async, gosched-threads,
                   gosched-pool, gosched-pool-func (W9 only), go, ants, ants-multi (W9
                   only), java (Java 25 virtual threads; every workload but T1), may,
                   tokio, crossbeam, flume, kanal (the last four: W5 on plain threads)
  --timeout SECS   kill a measurement after this long (default 60)
  --chart          also draw an SVG chart per workload (target/bench/charts/<id>.svg)

writes target/bench/results.json and target/bench/results.md";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = if args.first().map(String::as_str) == Some("run") {
        worker(&args[1..])
    } else {
        driver(&args)
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gosched-bench: {e}");
            ExitCode::from(2)
        }
    }
}

fn worker(args: &[String]) -> Result<(), String> {
    let [w, imp, procs, size] = args else {
        return Err(format!("run takes 4 arguments\n{USAGE}"));
    };
    let w = Workload::parse(w).ok_or_else(|| format!("unknown workload {w:?}"))?;
    let imp = Impl::parse(imp).ok_or_else(|| format!("unknown impl {imp:?}"))?;
    let procs = parse_num(procs, "procs")? as usize;
    let size = parse_num(size, "size")?;
    workloads::run_one(w, imp, procs, size)?;
    // Exit right away: runtimes are not torn down (nothing left to measure).
    std::process::exit(0)
}

fn driver(args: &[String]) -> Result<(), String> {
    let mut opts = driver::Options {
        workloads: Vec::new(),
        impls: Impl::ALL.to_vec(),
        quick: false,
        procs: 2,
        runs: None,
        timeout: Duration::from_secs(60),
        chart: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match a.as_str() {
            "-h" | "--help" | "help" => {
                println!("{USAGE}");
                return Ok(());
            }
            "--quick" => opts.quick = true,
            "--chart" => opts.chart = true,
            "--procs" => opts.procs = parse_num(&value("--procs")?, "--procs")? as usize,
            "--runs" => opts.runs = Some(parse_num(&value("--runs")?, "--runs")? as usize),
            "--timeout" => {
                opts.timeout = Duration::from_secs(parse_num(&value("--timeout")?, "--timeout")?)
            }
            "--impl" => {
                opts.impls = value("--impl")?
                    .split(',')
                    .map(|s| Impl::parse(s.trim()).ok_or_else(|| format!("unknown impl {s:?}")))
                    .collect::<Result<_, _>>()?
            }
            "all" => opts.workloads.extend(Workload::ALL),
            w => {
                let sel = Workload::select(w);
                if sel.is_empty() {
                    return Err(format!("unknown argument {w:?}\n{USAGE}"));
                }
                opts.workloads.extend(sel)
            }
        }
    }
    if opts.workloads.is_empty() {
        opts.workloads.extend(Workload::ALL);
    }
    let mut seen = Vec::new();
    opts.workloads.retain(|w| {
        let first = !seen.contains(w);
        seen.push(*w);
        first
    });
    if opts.procs == 0 || opts.runs == Some(0) {
        return Err("--procs and --runs must be at least 1".into());
    }
    driver::main(opts).map_err(|e| e.to_string())
}

fn parse_num(s: &str, what: &str) -> Result<u64, String> {
    s.replace(['_', ','], "")
        .parse()
        .map_err(|_| format!("{what}: not a number: {s:?}"))
}
