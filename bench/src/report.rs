//! Presenting results: the console table, `results.md`, `results.json`.

use std::fmt::Write;
use std::path::Path;

use crate::driver::{Meta, Row, Status, WorkloadResult};
use crate::json::{self, Obj};
use crate::scaling::Scaling;
use crate::workloads::{group, Impl};

/// 1234.5 -> "1,234"; 12.34 -> "12.3"; 1.234 -> "1.23".
pub fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        "—".into()
    } else if v.abs() >= 100.0 {
        let s = group(v.abs().round() as u64);
        if v < 0.0 {
            format!("-{s}")
        } else {
            s
        }
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// KiB -> "12.3 MiB".
pub fn fmt_kb(kb: f64) -> String {
    if kb >= 1024.0 {
        format!("{:.1} MiB", kb / 1024.0)
    } else {
        format!("{kb:.0} KiB")
    }
}

/// A procs list: `2`, `1, 2, 4`.
pub fn fmt_procs(procs: &[usize]) -> String {
    procs
        .iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn fmt_ratio(r: Option<f64>) -> String {
    r.map(|r| format!("{r:.2}×")).unwrap_or_default()
}

fn status_text(row: &Row) -> Option<String> {
    match &row.status {
        Status::Ok if row.runs.is_empty() => Some("no runs".into()),
        Status::Ok => None,
        Status::Failed(why) => Some(format!("failed: {why}")),
        Status::Skipped(why) => Some(format!("skipped: {why}")),
    }
}

fn title(r: &WorkloadResult) -> String {
    let (w, procs) = (r.workload, r.procs);
    format!(
        "{} {} — {} ({}, procs {})",
        w.id().to_uppercase(),
        w.name(),
        w.describe(r.size, procs),
        w.unit(),
        procs
    )
}

/// The impl column: its name, and the workload's label for it if any
/// (`tokio [cap 1]`, `crossbeam [threads]`).
pub fn row_name(r: &WorkloadResult, row: &Row) -> String {
    match r.workload.label(row.imp) {
        Some(l) => format!("{} [{l}]", row.imp.name()),
        None => row.imp.name().to_string(),
    }
}

/// The ratio columns of one workload: the peers it has rows for.
fn peers_of(r: &WorkloadResult) -> Vec<Impl> {
    Impl::PEERS
        .into_iter()
        .filter(|p| r.rows.iter().any(|row| row.imp == *p))
        .collect()
}

/// One workload as a console table.
pub fn text_table(r: &WorkloadResult) -> String {
    let w = r.workload;
    let mut out = String::new();
    let _ = writeln!(out, "\n{}", title(r));
    // The impl column fits the longest name (`gosched-go [no pool]`).
    let name_w = r
        .rows
        .iter()
        .map(|row| row_name(r, row).chars().count())
        .max()
        .unwrap_or(0)
        .max(19);
    let _ = write!(
        out,
        "{:<name_w$} {:>4} {:>10} {:>10} {:>10} {:>16} {:>11}",
        "impl", "runs", "median", "min", "max", "also", "peak RSS"
    );
    let peers = peers_of(r);
    for p in &peers {
        let _ = write!(out, " {:>10}", format!("÷{}", p.name()));
    }
    out.push('\n');
    for row in &r.rows {
        let _ = write!(out, "{:<name_w$} {:>4} ", row_name(r, row), row.runs.len());
        match row.median() {
            Some(m) => {
                let _ = write!(
                    out,
                    "{:>10} {:>10} {:>10} {:>16} {:>11}",
                    fmt_num(m),
                    fmt_num(row.min()),
                    fmt_num(row.max()),
                    w.secondary(m, row),
                    fmt_kb(row.median_peak_rss_kb())
                );
                if row.imp.is_gosched() {
                    for &p in &peers {
                        let _ = write!(out, " {:>10}", fmt_ratio(r.ratio(row, p)));
                    }
                }
            }
            None => out.push_str(&why_or_none(status_text(row))),
        }
        out.push('\n');
    }
    // Rows without ratios end in padding.
    let mut out: String = out.lines().map(|l| format!("{}\n", l.trim_end())).collect();
    for row in &r.rows {
        if let Some(note) = &row.note {
            let _ = writeln!(out, "  {}: {note}", row.imp.name());
        }
    }
    out.truncate(out.trim_end().len());
    out
}

fn why_or_none(s: Option<String>) -> String {
    s.unwrap_or_else(|| "no result".into())
}

fn header_line(meta: &Meta) -> String {
    let mut parts = vec![
        format!("procs {}", fmt_procs(&meta.procs)),
        if meta.quick {
            "quick sizes".into()
        } else {
            "full sizes".into()
        },
        format!("{} cores", cores()),
    ];
    parts.push(meta.go.clone().unwrap_or_else(|| "go: not found".into()));
    if let Some(java) = &meta.java {
        parts.push(java.clone());
    }
    if !meta.gosched_built {
        parts.push("gosched rows not built".into());
    }
    parts.join(" · ")
}

/// All workloads as one Markdown table (what the README embeds), and the
/// W11 table after it when asked for.
pub fn markdown(meta: &Meta, results: &[WorkloadResult], scalings: &[Scaling]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# gosched-bench results\n");
    let _ = writeln!(
        out,
        "{} · {} · each run its own process · ratio = gosched ÷ peer, below 1.00× gosched is faster/smaller\n",
        header_line(meta),
        match (meta.runs, meta.quick) {
            (Some(n), _) => format!("medians of {n} runs"),
            (None, true) => "medians of 3 runs".to_string(),
            (None, false) => "medians of 5 runs (3 where a run takes over 2 s)".to_string(),
        }
    );
    let _ = write!(
        out,
        "| workload | impl | median | min | max | also | peak RSS |"
    );
    for p in Impl::PEERS {
        let _ = write!(out, " ÷ {} |", p.name());
    }
    out.push('\n');
    let _ = writeln!(
        out,
        "|---|---|--:|--:|--:|--:|--:|{}",
        "--:|".repeat(Impl::PEERS.len())
    );
    for r in results {
        let w = r.workload;
        let mut label = format!(
            "{} {} {} ({})",
            w.id().to_uppercase(),
            w.name(),
            group(r.size),
            w.unit()
        );
        // Several procs in the run: each table says its own.
        if meta.procs.len() > 1 {
            let _ = write!(label, " · procs {}", r.procs);
        }
        for row in &r.rows {
            let imp = if row.size != r.size {
                format!("{} ({} units)", row_name(r, row), group(row.size))
            } else {
                row_name(r, row)
            };
            let _ = write!(out, "| {label} | {imp} |");
            match row.median() {
                Some(m) => {
                    let _ = write!(
                        out,
                        " {} | {} | {} | {} | {} |",
                        fmt_num(m),
                        fmt_num(row.min()),
                        fmt_num(row.max()),
                        w.secondary(m, row),
                        fmt_kb(row.median_peak_rss_kb())
                    );
                    for p in Impl::PEERS {
                        let cell = if row.imp.is_gosched() {
                            fmt_ratio(r.ratio(row, p))
                        } else {
                            String::new()
                        };
                        let _ = write!(out, " {cell} |");
                    }
                }
                None => {
                    let why = why_or_none(status_text(row)).replace('|', "\\|");
                    let _ = write!(out, " {why} | | | | |");
                    for _ in Impl::PEERS {
                        out.push_str(" |");
                    }
                }
            }
            out.push('\n');
        }
    }
    out.push_str(&crate::scaling::markdown(scalings));
    out
}

/// Everything, machine-readable.
///
/// `meta.procs` is the run's procs: a number, or an array when the run had
/// several; each workload's table has its own `procs`, and `w11` (with
/// `w11`) the scaling tables.
pub fn json(
    meta: &Meta,
    results: &[WorkloadResult],
    scalings: &[Scaling],
    workspace: &Path,
) -> String {
    let lock = std::fs::read_to_string(workspace.join("Cargo.lock")).unwrap_or_default();
    let versions = Obj::new()
        .str("tokio", &locked_version(&lock, "tokio").unwrap_or_default())
        .str("smol", &locked_version(&lock, "smol").unwrap_or_default())
        .str(
            "async-executor",
            &locked_version(&lock, "async-executor").unwrap_or_default(),
        )
        .str(
            "async-io",
            &locked_version(&lock, "async-io").unwrap_or_default(),
        )
        .str("may", &locked_version(&lock, "may").unwrap_or_default())
        .str(
            "async-channel",
            &locked_version(&lock, "async-channel").unwrap_or_default(),
        )
        .str(
            "crossbeam-channel",
            &locked_version(&lock, "crossbeam-channel").unwrap_or_default(),
        )
        .str("flume", &locked_version(&lock, "flume").unwrap_or_default())
        .str("kanal", &locked_version(&lock, "kanal").unwrap_or_default())
        .str("go", meta.go.as_deref().unwrap_or(""))
        .str("java", meta.java.as_deref().unwrap_or(""))
        .finish();
    let procs = match meta.procs[..] {
        [p] => p.to_string(),
        ref ps => json::array(ps.iter().map(|p| p.to_string())),
    };
    let meta_json = Obj::new()
        .raw("procs", &procs)
        .bool("quick", meta.quick)
        .num("cores", cores() as u64)
        .str("cpu", &cpu_model())
        .str(
            "kernel",
            std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap_or_default()
                .trim(),
        )
        .bool("gosched_built", meta.gosched_built)
        .num("started_unix", meta.started_unix)
        .raw("versions", &versions)
        .finish();
    let workloads = json::array(results.iter().map(|r| {
        let w = r.workload;
        let rows = json::array(r.rows.iter().map(|row| {
            let (status, reason) = match &row.status {
                Status::Ok => ("ok", String::new()),
                Status::Failed(why) => ("failed", why.clone()),
                Status::Skipped(why) => ("skipped", why.clone()),
            };
            let runs = json::array(row.runs.iter().map(|run| {
                Obj::new()
                    .float("value", run.primary)
                    .num("elapsed_ns", run.elapsed_ns)
                    .num("peak_rss_kb", run.peak_rss_kb)
                    .float("process_wall_s", run.wall.as_secs_f64())
                    .finish()
            }));
            let mut ratios = Obj::new();
            if row.imp.is_gosched() {
                for p in Impl::PEERS {
                    ratios = ratios.opt_float(p.name(), r.ratio(row, p));
                }
            }
            let ok = row.median().is_some();
            Obj::new()
                .str("impl", row.imp.name())
                .str("label", r.workload.label(row.imp).unwrap_or(""))
                .num("size", row.size)
                .str("note", row.note.as_deref().unwrap_or(""))
                .str("status", status)
                .str("reason", &reason)
                .opt_float("median", row.median())
                .opt_float("min", ok.then(|| row.min()))
                .opt_float("max", ok.then(|| row.max()))
                .str(
                    "secondary",
                    &row.median()
                        .map(|m| w.secondary(m, row))
                        .unwrap_or_default(),
                )
                .opt_float("peak_rss_kb", ok.then(|| row.median_peak_rss_kb()))
                .raw("ratios", &ratios.finish())
                .raw("runs", &runs)
                .finish()
        }));
        Obj::new()
            .str("id", w.id())
            .str("name", w.name())
            .str("what", &w.describe(r.size, r.procs))
            .num("procs", r.procs as u64)
            .num("size", r.size)
            .str("unit", w.unit())
            .raw("rows", &rows)
            .finish()
    }));
    let mut s = Obj::new()
        .raw("meta", &meta_json)
        .raw("workloads", &workloads);
    if meta.w11 {
        s = s.raw("w11", &crate::scaling::json(scalings));
    }
    let mut s = s.finish();
    s.push('\n');
    s
}

pub fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_default()
}

/// The version of `name` in a Cargo.lock.
fn locked_version(lock: &str, name: &str) -> Option<String> {
    let needle = format!("name = \"{name}\"");
    let mut lines = lock.lines();
    while let Some(l) = lines.next() {
        if l.trim() == needle {
            let v = lines.next()?.trim().strip_prefix("version = \"")?;
            return Some(v.trim_end_matches('"').to_string());
        }
    }
    None
}

/// `YYYY-MM-DD` (UTC) of a Unix time.
pub fn date_utc(unix: u64) -> String {
    let (y, m, d) = crate::civil::civil_from_days((unix / 86_400) as i64);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn dates() {
        assert_eq!(super::date_utc(0), "1970-01-01");
        assert_eq!(super::date_utc(951_782_400), "2000-02-29");
        assert_eq!(super::date_utc(1_795_548_076), "2026-11-24");
    }

    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(fmt_num(1234.5), "1,235");
        assert_eq!(fmt_num(12.34), "12.3");
        assert_eq!(fmt_num(1.234), "1.23");
        assert_eq!(fmt_kb(2048.0), "2.0 MiB");
        assert_eq!(fmt_procs(&[2]), "2");
        assert_eq!(fmt_procs(&[1, 2, 4]), "1, 2, 4");
        assert_eq!(
            locked_version("name = \"may\"\nversion = \"0.3.51\"\n", "may").as_deref(),
            Some("0.3.51")
        );
    }
}
