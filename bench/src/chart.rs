//! `--chart`: one SVG per workload under `target/bench/charts/<id>.svg`.
//!
//! Each row is a horizontal bar to its median, with a line from its fastest
//! to its slowest run; gosched's rows are blue, the peers grey. The axis is
//! logarithmic where the rows spread more than 20× (W6's starved peers,
//! W7's async tasks beside goroutines), linear otherwise. The caption says
//! what is measured, which way is better, the machine and the date; the
//! README shows the charts with the command that made them.

use std::path::{Path, PathBuf};

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;

use crate::driver::{Meta, WorkloadResult};
use crate::report::{fmt_num, row_name};
use crate::workloads::Workload;

const GOSCHED: RGBColor = RGBColor(31, 119, 180);
const PEER: RGBColor = RGBColor(150, 150, 150);
/// Rows spread wider than this get a log axis.
const LOG_SPREAD: f64 = 20.0;

/// Which way is better for a workload's primary figure.
fn higher_is_better(w: Workload) -> bool {
    matches!(w, Workload::W10Syscall)
}

/// Write a chart per workload that has at least one row with a result;
/// returns the files written.
pub fn write_all(
    meta: &Meta,
    results: &[WorkloadResult],
    dir: &Path,
) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let date = crate::report::date_utc(meta.started_unix);
    let mut written = Vec::new();
    for r in results {
        let bars: Vec<Bar> = r
            .rows
            .iter()
            .filter_map(|row| {
                Some(Bar {
                    name: row_name(r, row),
                    median: row.median()?,
                    min: row.min(),
                    max: row.max(),
                    ours: row.imp.is_gosched(),
                })
            })
            .collect();
        if bars.is_empty() {
            continue;
        }
        let w = r.workload;
        let title = format!(
            "{} {}: {} ({} is better)",
            w.id().to_uppercase(),
            w.name(),
            w.unit(),
            if higher_is_better(w) {
                "higher"
            } else {
                "lower"
            }
        );
        let caption = format!(
            "procs {}, {} cores, {} sizes, medians of each row's runs (line: fastest to slowest), {date}",
            meta.procs,
            crate::report::cores(),
            if meta.quick { "quick" } else { "full" },
        );
        let path = dir.join(format!("{}.svg", w.id()));
        draw(&path, &title, &caption, w.unit(), &bars)?;
        written.push(path);
    }
    Ok(written)
}

struct Bar {
    name: String,
    median: f64,
    min: f64,
    max: f64,
    ours: bool,
}

fn draw(path: &Path, title: &str, caption: &str, unit: &str, bars: &[Bar]) -> Result<(), String> {
    let height = 110 + 34 * bars.len() as u32;
    let root = SVGBackend::new(path, (860, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (top, bottom) = root.split_vertically(height - 28);
    bottom
        .draw(&Text::new(
            caption.to_string(),
            (10, 6),
            ("sans-serif", 13).into_font().color(&BLACK.mix(0.7)),
        ))
        .map_err(|e| e.to_string())?;
    let lo = bars.iter().map(|b| b.min).fold(f64::INFINITY, f64::min);
    let hi = bars.iter().map(|b| b.max).fold(0.0, f64::max);
    let n = bars.len() as f64;
    // Room on the right for each bar's label.
    if lo > 0.0 && hi / lo > LOG_SPREAD {
        let x = (lo / 2.0)..(hi * 40.0);
        plot(&top, title, unit, bars, x.log_scale(), lo / 2.0, n)
    } else {
        plot(&top, title, unit, bars, 0.0..hi * 1.7, 0.0, n)
    }?;
    root.present().map_err(|e| e.to_string())
}

/// The bars on an x axis of either kind; `base` is where a bar starts.
fn plot<X>(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    title: &str,
    unit: &str,
    bars: &[Bar],
    x: X,
    base: f64,
    n: f64,
) -> Result<(), String>
where
    X: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(0)
        .build_cartesian_2d(x, 0.0..n)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .disable_y_axis()
        .x_desc(unit)
        .x_label_formatter(&|v| fmt_num(*v))
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, b) in bars.iter().enumerate() {
        // The first row at the top.
        let y = n - i as f64 - 1.0;
        let colour = if b.ours { GOSCHED } else { PEER };
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(base, y + 0.2), (b.median, y + 0.8)],
                colour.filled(),
            )))
            .map_err(|e| e.to_string())?;
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(b.min, y + 0.5), (b.max, y + 0.5)],
                BLACK.stroke_width(2),
            )))
            .map_err(|e| e.to_string())?;
        chart
            .draw_series(std::iter::once(
                EmptyElement::at((b.max, y + 0.5))
                    + Text::new(
                        format!("{}  {}", b.name, fmt_num(b.median)),
                        (6, -8),
                        ("sans-serif", 14).into_font().color(&BLACK),
                    ),
            ))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}
