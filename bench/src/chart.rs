//! `--chart`: one SVG per workload under `target/bench/charts/<id>.svg`.
//!
//! Each row is a horizontal bar to its median, with a line from its fastest
//! to its slowest run; gosched's rows are blue, the peers grey. The axis is
//! logarithmic where the rows spread more than 20× (W6's starved peers,
//! W7's async tasks beside goroutines), linear otherwise. The caption says
//! what is measured, which way is better, the machine and the date; the
//! README shows the charts with the command that made them. A workload run
//! at several procs gets a chart per procs, `<id>-p<procs>.svg`.
//!
//! W11 (`w11-<id>.svg`, [`write_w11`]): the speed-up of each row over the
//! smallest procs, a line per implementation on a log2 procs axis, gosched's
//! lines thick and in blues, the peers' thin, and the ideal as a dashed line.

use std::path::{Path, PathBuf};

use plotters::coord::ranged1d::{
    AsRangedCoord, KeyPointHint, NoDefaultFormatting, Ranged, ValueFormatter,
};
use plotters::element::DashedPathElement;
use plotters::prelude::*;

use crate::driver::{Meta, WorkloadResult};
use crate::report::{fmt_num, row_name};
use crate::scaling::Scaling;
use crate::workloads::Workload;

const GOSCHED: RGBColor = RGBColor(31, 119, 180);
const PEER: RGBColor = RGBColor(150, 150, 150);
/// Rows spread wider than this get a log axis.
const LOG_SPREAD: f64 = 20.0;

/// Which way is better for a workload's primary figure.
pub fn higher_is_better(w: Workload) -> bool {
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
            r.procs,
            crate::report::cores(),
            if meta.quick { "quick" } else { "full" },
        );
        let several = results
            .iter()
            .any(|o| o.workload == w && o.procs != r.procs);
        let path = if several {
            dir.join(format!("{}-p{}.svg", w.id(), r.procs))
        } else {
            dir.join(format!("{}.svg", w.id()))
        };
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

/// The colours of the gosched lines (blues and teals), then of the peers'.
const GOSCHED_LINES: [RGBColor; 4] = [
    GOSCHED,
    RGBColor(8, 48, 107),
    RGBColor(23, 190, 207),
    RGBColor(65, 105, 225),
];
const PEER_LINES: [RGBColor; 6] = [
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
];

/// A W11 chart per workload (`w11-w1.svg`, ...); returns the files written.
pub fn write_w11(meta: &Meta, scalings: &[Scaling], dir: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let date = crate::report::date_utc(meta.started_unix);
    let mut written = Vec::new();
    for s in scalings {
        let (mut ours, mut peers) = (0, 0);
        let lines: Vec<Line> = s
            .curves
            .iter()
            .filter_map(|c| {
                let points: Vec<(f64, f64)> = (0..s.procs.len())
                    .filter_map(|i| Some((s.procs[i] as f64, s.speedup(c, i)?)))
                    .collect();
                if points.len() < 2 {
                    return None;
                }
                let gosched = c.imp.is_gosched();
                let colour = if gosched {
                    ours += 1;
                    GOSCHED_LINES[(ours - 1) % GOSCHED_LINES.len()]
                } else {
                    peers += 1;
                    PEER_LINES[(peers - 1) % PEER_LINES.len()]
                };
                Some(Line {
                    name: c.name.clone(),
                    points,
                    gosched,
                    colour,
                })
            })
            .collect();
        if lines.is_empty() {
            continue;
        }
        let w = s.workload;
        let title = format!(
            "W11 scaling: {} {}, speed-up over procs {} (higher is better)",
            w.id().to_uppercase(),
            w.name(),
            s.base()
        );
        let ideal = if s.base() == 1 {
            "N".to_string()
        } else {
            format!("N ÷ {}", s.base())
        };
        let caption = format!(
            "speed-up = median {} at procs {} ÷ at procs N; dashed: ideal ({ideal}); {} cores, {} sizes, {date}",
            w.unit(),
            s.base(),
            crate::report::cores(),
            if meta.quick { "quick" } else { "full" },
        );
        let path = dir.join(format!("w11-{}.svg", w.id()));
        draw_w11(&path, &title, &caption, &s.procs, &lines)?;
        written.push(path);
    }
    Ok(written)
}

struct Line {
    name: String,
    /// (procs, speed-up)
    points: Vec<(f64, f64)>,
    gosched: bool,
    colour: RGBColor,
}

fn draw_w11(
    path: &Path,
    title: &str,
    caption: &str,
    procs: &[usize],
    lines: &[Line],
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<_>| e.to_string();
    let (width, height) = (860, 560);
    let root = SVGBackend::new(path, (width, height)).into_drawing_area();
    root.fill(&WHITE).map_err(e)?;
    let (top, bottom) = root.split_vertically(height - 28);
    bottom
        .draw(&Text::new(
            caption.to_string(),
            (10, 6),
            ("sans-serif", 13).into_font().color(&BLACK.mix(0.7)),
        ))
        .map_err(e)?;
    let base = procs[0] as f64;
    let last = *procs.last().expect("W11 has procs") as f64;
    // x is log2(procs) on a linear axis, labelled with the procs
    // themselves at each measured one.
    let lx = |p: f64| p.log2();
    let (x0, x1) = (lx(base), lx(last));
    let pad = ((x1 - x0) * 0.06).max(0.08);
    let ideal_top = last / base;
    let hi = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .fold(ideal_top, f64::max);
    let x_keys: Vec<f64> = procs.iter().map(|&p| lx(p as f64)).collect();
    let mut chart = ChartBuilder::on(&top)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(
            Log2Procs {
                lo: x0 - pad,
                hi: x1 + pad,
                keys: x_keys,
            },
            0.0..hi * 1.12,
        )
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc("procs (log2 scale)")
        .y_desc("speed-up (×)")
        .y_label_formatter(&|v| format!("{v:.1}"))
        .light_line_style(BLACK.mix(0.04))
        .draw()
        .map_err(e)?;
    // The ideal: N ÷ base, dashed.
    let ideal: Vec<(f64, f64)> = (0..=40)
        .map(|i| {
            let x = x0 + (x1 - x0) * i as f64 / 40.0;
            (x, x.exp2() / base)
        })
        .collect();
    chart
        .draw_series(std::iter::once(DashedPathElement::new(
            ideal,
            6,
            5,
            BLACK.mix(0.55).stroke_width(2),
        )))
        .map_err(e)?
        .label("ideal")
        .legend(|(x, y)| DashedPathElement::new(vec![(x, y), (x + 20, y)], 4, 3, BLACK.mix(0.55)));
    // Peers first, gosched's lines on top.
    let mut order: Vec<&Line> = lines.iter().collect();
    order.sort_by_key(|l| l.gosched);
    for l in order {
        let (stroke, radius) = if l.gosched { (4, 5) } else { (2, 3) };
        let style = l.colour.stroke_width(stroke);
        let pts: Vec<(f64, f64)> = l.points.iter().map(|&(p, y)| (lx(p), y)).collect();
        let colour = l.colour;
        chart
            .draw_series(std::iter::once(PathElement::new(pts.clone(), style)))
            .map_err(e)?
            .label(format!(
                "{}  {:.2}× at {}",
                l.name,
                l.points.last().map(|p| p.1).unwrap_or(f64::NAN),
                l.points.last().map(|p| p.0).unwrap_or(f64::NAN)
            ))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(stroke))
            });
        chart
            .draw_series(
                pts.into_iter()
                    .map(move |p| Circle::new(p, radius, colour.filled())),
            )
            .map_err(e)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(e)?;
    root.present().map_err(e)
}

/// W11's x axis: log2(procs), linear, its ticks at the measured procs and
/// labelled with them.
struct Log2Procs {
    lo: f64,
    hi: f64,
    keys: Vec<f64>,
}

impl Ranged for Log2Procs {
    type FormatOption = NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let t = (v - self.lo) / (self.hi - self.lo);
        limit.0 + (t * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.keys.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

impl ValueFormatter<f64> for Log2Procs {
    fn format(v: &f64) -> String {
        format!("{}", v.exp2().round())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scaling::Curve;
    use crate::workloads::Impl;

    /// A W11 chart of 1 to 16 procs draws (the curve a bigger machine gets).
    #[test]
    fn w11_chart() {
        let meta = Meta {
            procs: vec![1, 2, 4, 8, 16],
            w11: true,
            quick: true,
            runs: None,
            go: None,
            java: None,
            gosched_built: true,
            started_unix: 0,
        };
        let curve = |imp: Impl, medians: [f64; 5]| Curve {
            imp,
            name: imp.name().into(),
            medians: medians.into_iter().map(Ok).collect(),
        };
        let s = Scaling {
            workload: Workload::W2Skynet,
            size: 100_000,
            procs: vec![1, 2, 4, 8, 16],
            curves: vec![
                curve(Impl::GoschedGo, [100.0, 52.0, 27.0, 15.0, 9.0]),
                curve(Impl::GoschedAsync, [80.0, 42.0, 23.0, 14.0, 10.0]),
                curve(Impl::Go, [120.0, 65.0, 40.0, 30.0, 28.0]),
                curve(Impl::Tokio, [90.0, 50.0, 30.0, 22.0, 20.0]),
            ],
        };
        let dir = std::env::temp_dir().join(format!("gosched-bench-w11-{}", std::process::id()));
        let written = write_w11(&meta, &[s], &dir).unwrap();
        assert_eq!(written, [dir.join("w11-w2.svg")]);
        let svg = std::fs::read_to_string(&written[0]).unwrap();
        assert!(svg.contains("ideal") && svg.contains("gosched-go"));
        if std::env::var_os("GOSCHED_BENCH_KEEP_CHART").is_none() {
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
}
