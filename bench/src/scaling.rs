//! W11 scaling: W1, W2 and W5 (cap 1024) at several procs, and the speed-up
//! curve of each implementation (`gosched-bench w11 [--procs 1,2,4]`).
//!
//! The measurements are ordinary rows of those workloads (one table per
//! procs); this module only parses the procs list and turns the tables into
//! the W11 table: for each workload and implementation the median at every
//! procs, the speed-up over the smallest procs and the efficiency.

use std::fmt::Write;

use crate::driver::{Row, WorkloadResult};
use crate::json::{self, Obj};
use crate::report::{fmt_num, row_name};
use crate::workloads::{group, Impl, Workload};

/// What `w11` runs: W1, W2 and W5 at cap 1024.
pub const WORKLOADS: [Workload; 3] = [Workload::W1Spawn, Workload::W2Skynet, Workload::W5Mpmc];

/// `--procs`: one number (`2`) or a comma-separated list (`1,2,4,8,16`);
/// sorted, duplicates dropped, each at least 1.
pub fn parse_procs(s: &str) -> Result<Vec<usize>, String> {
    let mut v = s
        .split(',')
        .map(|p| {
            let p = p.trim();
            match p.parse::<usize>() {
                Ok(0) => Err("--procs: each value must be at least 1".to_string()),
                Ok(n) => Ok(n),
                Err(_) => Err(format!("--procs: not a number: {p:?} (in {s:?})")),
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    v.sort_unstable();
    v.dedup();
    Ok(v)
}

/// W11's procs when `--procs` is not given: 1, 2, 4, ... up to the core
/// count, which ends the list when it is not a power of two (12 cores: 1, 2,
/// 4, 8, 12); at least 1 and 2, even on one core.
pub fn default_procs(cores: usize) -> Vec<usize> {
    let cores = cores.max(2);
    let mut v: Vec<usize> = std::iter::successors(Some(1usize), |p| p.checked_mul(2))
        .take_while(|&p| p <= cores)
        .collect();
    if v.last() != Some(&cores) {
        v.push(cores);
    }
    v
}

/// How many times faster the figure `at` is than `base`: `base / at` for a
/// time (lower is better), `at / base` for a rate (higher is better).
pub fn speedup(base: f64, at: f64, higher_is_better: bool) -> Option<f64> {
    let (num, den) = if higher_is_better {
        (at, base)
    } else {
        (base, at)
    };
    (num.is_finite() && den.is_finite() && num > 0.0 && den > 0.0).then(|| num / den)
}

/// Speed-up per added proc: the speed-up ÷ (procs ÷ base procs); 1.0 is
/// linear scaling.
pub fn efficiency(speedup: f64, base_procs: usize, procs: usize) -> f64 {
    speedup * base_procs as f64 / procs as f64
}

/// Whether W11 reports `imp` on `w`: not the plain-thread W5 rows
/// (crossbeam, flume, kanal, gosched-threads), which have no runtime and so
/// do not use procs.
pub fn scales(w: Workload, imp: Impl) -> bool {
    !(matches!(w, Workload::W5Mpmc | Workload::W5Mpmc0) && imp.is_threads())
}

/// One implementation's figures at each procs of its workload.
pub struct Curve {
    pub imp: Impl,
    /// The impl column (`tokio`, `go`; with the workload's tag if any).
    pub name: String,
    /// Per procs of [`Scaling::procs`]: the median, or why there is none.
    pub medians: Vec<Result<f64, String>>,
}

impl Curve {
    /// The speed-up at `procs[i]` over `procs[0]`.
    pub fn speedup(&self, i: usize, higher_is_better: bool) -> Option<f64> {
        let base = *self.medians.first()?.as_ref().ok()?;
        let at = *self.medians.get(i)?.as_ref().ok()?;
        speedup(base, at, higher_is_better)
    }
}

/// One workload of W11: its procs (ascending; the first is the base of the
/// speed-ups) and a curve per implementation.
pub struct Scaling {
    pub workload: Workload,
    pub size: u64,
    pub procs: Vec<usize>,
    pub curves: Vec<Curve>,
}

impl Scaling {
    pub fn base(&self) -> usize {
        self.procs[0]
    }

    pub fn higher_is_better(&self) -> bool {
        crate::chart::higher_is_better(self.workload)
    }

    pub fn speedup(&self, c: &Curve, i: usize) -> Option<f64> {
        c.speedup(i, self.higher_is_better())
    }

    pub fn efficiency(&self, c: &Curve, i: usize) -> Option<f64> {
        Some(efficiency(self.speedup(c, i)?, self.base(), self.procs[i]))
    }

    pub fn title(&self) -> String {
        let w = self.workload;
        format!(
            "{} {} {} ({})",
            w.id().to_uppercase(),
            w.name(),
            group(self.size),
            w.unit()
        )
    }
}

/// The W11 tables out of a run's tables: for each of [`WORKLOADS`] that ran
/// at two procs or more, every implementation's medians.
pub fn collect(results: &[WorkloadResult]) -> Vec<Scaling> {
    let mut out = Vec::new();
    for w in WORKLOADS {
        let mut tables: Vec<&WorkloadResult> = results.iter().filter(|r| r.workload == w).collect();
        tables.sort_by_key(|r| r.procs);
        if tables.len() < 2 {
            continue;
        }
        let procs: Vec<usize> = tables.iter().map(|r| r.procs).collect();
        let mut curves: Vec<Curve> = Vec::new();
        for t in &tables {
            for row in t.rows.iter().filter(|row| scales(w, row.imp)) {
                if !curves.iter().any(|c| c.imp == row.imp) {
                    curves.push(Curve {
                        imp: row.imp,
                        name: row_name(t, row),
                        medians: Vec::new(),
                    });
                }
            }
        }
        for c in curves.iter_mut() {
            c.medians = tables
                .iter()
                .map(|t| match t.rows.iter().find(|row| row.imp == c.imp) {
                    Some(row) => median_or_why(row),
                    None => Err("not run".into()),
                })
                .collect();
        }
        out.push(Scaling {
            workload: w,
            size: tables[0].size,
            procs,
            curves,
        });
    }
    out
}

fn median_or_why(row: &Row) -> Result<f64, String> {
    row.median().ok_or_else(|| match &row.status {
        crate::driver::Status::Failed(why) => format!("failed: {why}"),
        crate::driver::Status::Skipped(why) => format!("skipped: {why}"),
        crate::driver::Status::Ok => "no runs".into(),
    })
}

fn fmt_speedup(s: Option<f64>) -> String {
    s.map(|s| format!("{s:.2}×")).unwrap_or_else(|| "—".into())
}

fn fmt_eff(e: Option<f64>) -> String {
    e.map(|e| format!("{:.0}%", e * 100.0))
        .unwrap_or_else(|| "—".into())
}

/// The column heads after the impl: the median at each procs, then the
/// speed-up and efficiency at each procs above the base.
fn heads(s: &Scaling) -> Vec<String> {
    let mut h: Vec<String> = s.procs.iter().map(|p| format!("procs {p}")).collect();
    for p in &s.procs[1..] {
        h.push(format!("speed-up {p}"));
        h.push(format!("eff. {p}"));
    }
    h
}

fn cells(s: &Scaling, c: &Curve) -> Vec<String> {
    let mut v: Vec<String> = c
        .medians
        .iter()
        .map(|m| match m {
            Ok(m) => fmt_num(*m),
            Err(_) => "—".into(),
        })
        .collect();
    for i in 1..s.procs.len() {
        v.push(fmt_speedup(s.speedup(c, i)));
        v.push(fmt_eff(s.efficiency(c, i)));
    }
    v
}

/// The first line of the W11 tables: how the figures are made.
fn legend(scalings: &[Scaling]) -> String {
    let base = scalings.first().map(|s| s.base()).unwrap_or(1);
    let per = if base == 1 {
        "N".to_string()
    } else {
        format!("(N ÷ {base})")
    };
    format!(
        "W11 scaling — median at each procs; speed-up = median at procs {base} ÷ median at procs N \
         (W1, W2: ms, W5: ns/msg, all lower is better); efficiency = speed-up ÷ {per}"
    )
}

/// Why a curve lacks a point, one line each.
fn failures(s: &Scaling) -> Vec<String> {
    let mut v = Vec::new();
    for c in &s.curves {
        for (p, m) in s.procs.iter().zip(&c.medians) {
            if let Err(why) = m {
                let mut why = why.lines().next().unwrap_or("").to_string();
                if why.chars().count() > 100 {
                    why = why.chars().take(100).collect::<String>() + "…";
                }
                v.push(format!("{} at procs {p}: {why}", c.name));
            }
        }
    }
    v
}

/// The W11 tables for the console.
pub fn text_table(scalings: &[Scaling]) -> String {
    let mut out = String::new();
    if scalings.is_empty() {
        return out;
    }
    let _ = writeln!(out, "\n{}", legend(scalings));
    for s in scalings {
        let _ = writeln!(out, "\n{}", s.title());
        let name_w = s
            .curves
            .iter()
            .map(|c| c.name.chars().count())
            .max()
            .unwrap_or(0)
            .max(19);
        let heads = heads(s);
        let _ = write!(out, "{:<name_w$}", "impl");
        for h in &heads {
            let _ = write!(out, " {h:>11}");
        }
        out.push('\n');
        for c in &s.curves {
            let _ = write!(out, "{:<name_w$}", c.name);
            for cell in cells(s, c) {
                let _ = write!(out, " {cell:>11}");
            }
            out.push('\n');
        }
        for f in failures(s) {
            let _ = writeln!(out, "  {f}");
        }
    }
    out.truncate(out.trim_end().len());
    out
}

/// The W11 tables as one Markdown table (appended to `results.md`).
pub fn markdown(scalings: &[Scaling]) -> String {
    let mut out = String::new();
    if scalings.is_empty() {
        return out;
    }
    let _ = writeln!(out, "\n## W11 scaling\n\n{}\n", legend(scalings));
    // Every workload of one run has the same procs; where not, each
    // workload gets its own head row.
    let mut last_heads: Option<Vec<String>> = None;
    for s in scalings {
        let heads = heads(s);
        if last_heads.as_ref() != Some(&heads) {
            if last_heads.is_some() {
                out.push('\n');
            }
            let _ = writeln!(out, "| workload | impl | {} |", heads.join(" | "));
            let _ = writeln!(out, "|---|---|{}", "--:|".repeat(heads.len()));
            last_heads = Some(heads);
        }
        for c in &s.curves {
            let _ = writeln!(
                out,
                "| {} | {} | {} |",
                s.title(),
                c.name,
                cells(s, c).join(" | ")
            );
        }
    }
    let fails: Vec<String> = scalings.iter().flat_map(failures).collect();
    if !fails.is_empty() {
        out.push('\n');
        for f in fails {
            let _ = writeln!(out, "- {}", f.replace('|', "\\|"));
        }
    }
    out
}

/// The W11 tables for `results.json`.
pub fn json(scalings: &[Scaling]) -> String {
    json::array(scalings.iter().map(|s| {
        let curves = json::array(s.curves.iter().map(|c| {
            let points = json::array(s.procs.iter().enumerate().map(|(i, &p)| {
                let o = Obj::new().num("procs", p as u64);
                match &c.medians[i] {
                    Ok(m) => o
                        .float("median", *m)
                        .opt_float("speedup", s.speedup(c, i))
                        .opt_float("efficiency", s.efficiency(c, i))
                        .finish(),
                    Err(why) => o.str("reason", why).finish(),
                }
            }));
            Obj::new()
                .str("impl", c.imp.name())
                .str("label", s.workload.label(c.imp).unwrap_or(""))
                .raw("points", &points)
                .finish()
        }));
        Obj::new()
            .str("id", s.workload.id())
            .str("name", s.workload.name())
            .num("size", s.size)
            .str("unit", s.workload.unit())
            .num("base_procs", s.base() as u64)
            .raw("procs", &json::array(s.procs.iter().map(|p| p.to_string())))
            .raw("impls", &curves)
            .finish()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn procs_lists() {
        assert_eq!(parse_procs("2"), Ok(vec![2]));
        assert_eq!(parse_procs("1,2,4,8,16"), Ok(vec![1, 2, 4, 8, 16]));
        assert_eq!(parse_procs(" 4, 1 ,2,2"), Ok(vec![1, 2, 4]));
        assert!(parse_procs("0").is_err());
        assert!(parse_procs("1,0").is_err());
        assert!(parse_procs("1,,2").is_err());
        assert!(parse_procs("two").is_err());
        assert!(parse_procs("").is_err());
    }

    #[test]
    fn default_curve() {
        assert_eq!(default_procs(1), vec![1, 2]);
        assert_eq!(default_procs(2), vec![1, 2]);
        assert_eq!(default_procs(4), vec![1, 2, 4]);
        assert_eq!(default_procs(12), vec![1, 2, 4, 8, 12]);
        assert_eq!(default_procs(16), vec![1, 2, 4, 8, 16]);
    }

    #[test]
    fn speedups() {
        // A time: 100 ms at procs 1, 50 ms at procs 2 is twice as fast.
        assert_eq!(speedup(100.0, 50.0, false), Some(2.0));
        assert_eq!(speedup(100.0, 125.0, false), Some(0.8));
        // A rate (% kept, msgs/s): higher at procs N is faster.
        assert_eq!(speedup(50.0, 100.0, true), Some(2.0));
        assert_eq!(speedup(0.0, 1.0, false), None);
        assert_eq!(speedup(1.0, 0.0, false), None);
        assert_eq!(speedup(f64::NAN, 1.0, false), None);
        assert_eq!(efficiency(1.8, 1, 2), 0.9);
        assert_eq!(efficiency(3.0, 1, 4), 0.75);
        // Against a base of 2 procs, 8 procs is 4× the resources.
        assert_eq!(efficiency(2.0, 2, 8), 0.5);
    }

    #[test]
    fn curves() {
        let s = Scaling {
            workload: Workload::W5Mpmc,
            size: 1_000,
            procs: vec![1, 2, 4],
            curves: vec![Curve {
                imp: Impl::Go,
                name: "go".into(),
                medians: vec![Ok(80.0), Ok(50.0), Err("failed: x".into())],
            }],
        };
        let c = &s.curves[0];
        assert_eq!(s.speedup(c, 0), Some(1.0));
        assert_eq!(s.speedup(c, 1), Some(1.6));
        assert_eq!(s.efficiency(c, 1), Some(0.8));
        assert_eq!(s.speedup(c, 2), None);
        assert_eq!(
            cells(&s, c),
            ["80.0", "50.0", "—", "1.60×", "80%", "—", "—"]
        );
        assert_eq!(failures(&s), ["go at procs 4: failed: x"]);
        assert!(!scales(Workload::W5Mpmc, Impl::Crossbeam));
        assert!(!scales(Workload::W5Mpmc, Impl::GoschedThreads));
        assert!(scales(Workload::W1Spawn, Impl::GoschedThreads));
        assert!(scales(Workload::W5Mpmc, Impl::Tokio));
    }
}
