//! gosched-bench: the benchmark harness of gosched (see bench/README.md and
//! shared/BENCHMARKS.md).
//!
//! One binary, two roles:
//! - driver: `gosched-bench [all | w1 w2 ... | w11] [--quick] [--procs N,M] ...`
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
mod scaling;
mod workloads;

use std::process::ExitCode;
use std::time::Duration;

use workloads::{Impl, Workload};

const USAGE: &str = "\
usage: gosched-bench [all | w1 w2 w3 w4 w5 w7 w9 w9t w9p w9s ... | w11] [options]   (w5 = both W5 rows; w5-0 = cap 0 only)
       gosched-bench run <workload> <impl> <procs> <size>   (one measurement)

w11 (scaling): W1, W2 and W5 (cap 1024) at each procs of --procs, else at 1, 2, 4, ...
up to the core count; adds the W11 table (speed-up over the smallest procs, efficiency)
and, with --chart, target/bench/charts/w11-<id>.svg. `all` leaves it out: `all w11`.

options:
  --quick          smaller sizes and 3 runs per row (the whole suite in < 2 min)
  --procs N        worker threads of every runtime (GOMAXPROCS for Go); default 2;
                   a list (--procs 1,2,4) runs every selected workload at each (a table
                   per workload and procs, their runs interleaved)
  --runs N         runs per row (default 5, 3 for rows whose first run takes > 2 s)
  --impl A,B       only these implementations: gosched-go,
                   gosched-go-chan (W2 only), gosched-async, gosched-threads,
                   gosched-pool, gosched-pool-func (W9 only), go, ants, ants-multi (W9
                   only), java (Java 25 virtual threads; every workload but T1), may,
                   tokio, smol (async-executor + async-io), crossbeam, flume, kanal
                   (the last three: W5 on plain threads)
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
        runs: None,
        timeout: Duration::from_secs(60),
        chart: false,
        w11: false,
    };
    // Each selected workload, and whether `w11` selected it.
    let mut selected: Vec<(Workload, bool)> = Vec::new();
    let mut procs: Option<Vec<usize>> = None;
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
            "--procs" => procs = Some(scaling::parse_procs(&value("--procs")?)?),
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
            "all" => selected.extend(Workload::ALL.map(|w| (w, false))),
            "w11" | "scaling" => {
                opts.w11 = true;
                selected.extend(scaling::WORKLOADS.map(|w| (w, true)))
            }
            w => {
                let sel = Workload::select(w);
                if sel.is_empty() {
                    return Err(format!("unknown argument {w:?}\n{USAGE}"));
                }
                selected.extend(sel.into_iter().map(|w| (w, false)))
            }
        }
    }
    if selected.is_empty() {
        selected.extend(Workload::ALL.map(|w| (w, false)));
    }
    if opts.runs == Some(0) {
        return Err("--runs must be at least 1".into());
    }
    // W11 runs at --procs when given, else on the default curve; the other
    // workloads at --procs, else 2.
    let w11_procs = procs
        .clone()
        .unwrap_or_else(|| scaling::default_procs(report::cores()));
    let procs = procs.unwrap_or_else(|| vec![2]);
    opts.workloads = driver::plan(&selected, &procs, &w11_procs);
    driver::main(opts).map_err(|e| e.to_string())
}

fn parse_num(s: &str, what: &str) -> Result<u64, String> {
    s.replace(['_', ','], "")
        .parse()
        .map_err(|_| format!("{what}: not a number: {s:?}"))
}
