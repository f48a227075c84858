//! `--report DIR`: SVG figures of a plan's results and an `index.html` that shows them.
//!
//! Per variant, from its first repetition: data sequence numbers over time per subflow around
//! the first loss event, with the loss and the path manager's decisions marked (seed 000
//! Fig. 7/8); the application delay of every CBR message (Fig. 9); throughput per link and in
//! total (Fig. 6/10); the smoothed signal per link with its threshold and the decisions. Across
//! variants: box plots of every shown metric over the repetitions (seed 002 Fig. 3) and the bytes
//! each interface carried (seed 000 Fig. 11).

use std::fmt::Write as _;
use std::io;
use std::ops::Range;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::record::RunRecord;
use crate::runner::{PlanResult, VariantResult};

mod summary;

/// At most this many points per series: the SVG stays small enough for a browser.
const MAX_POINTS: usize = 6_000;
const SIZE: (u32, u32) = (960, 480);

/// One figure of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Figure {
    /// File name in the report directory.
    pub file: String,
    pub title: String,
}

/// Writes the figures and `index.html` into `dir`; returns the figures in page order.
pub fn write_report(r: &PlanResult, dir: &Path) -> io::Result<Vec<Figure>> {
    std::fs::create_dir_all(dir)?;
    let mut figs = Vec::new();
    let swept = summary::swept(r);
    // A sweep's variants are its points: their runs are summarised against the setting.
    let per_variant = if swept.is_some() {
        &[][..]
    } else {
        &r.variants[..]
    };
    for (vi, v) in per_variant.iter().enumerate() {
        let Some(run) = v.runs.first() else { continue };
        let Some(rec) = &run.record else { continue };
        let tag = format!("v{vi}-{}", sanitize(&v.name));
        let what = format!("{} (seed {})", v.name, run.seed);
        if !rec.dsn.is_empty() {
            let f = fig(
                &tag,
                "dsn",
                format!("Data sequence numbers per subflow — {what}"),
            );
            dsn(rec, &dir.join(&f.file), &f.title).map_err(err)?;
            figs.push(f);
        }
        if !rec.cbr.is_empty() {
            let f = fig(
                &tag,
                "delay",
                format!("Application delay per message — {what}"),
            );
            delay(rec, &dir.join(&f.file), &f.title).map_err(err)?;
            figs.push(f);
        }
        if rec.samples.len() > 1 {
            let f = fig(&tag, "throughput", format!("Throughput per link — {what}"));
            throughput(rec, &dir.join(&f.file), &f.title).map_err(err)?;
            figs.push(f);
        }
        if !rec.rss.is_empty() {
            let f = fig(
                &tag,
                "rss",
                format!("Smoothed signal and path-manager decisions — {what}"),
            );
            rss(rec, &dir.join(&f.file), &f.title).map_err(err)?;
            figs.push(f);
        }
    }
    for key in &r.show {
        let values: Vec<(String, Vec<f64>)> = r
            .variants
            .iter()
            .map(|v| (v.name.clone(), pooled(v, key)))
            .collect();
        if values.iter().all(|(_, x)| x.is_empty()) {
            continue;
        }
        let (what, _) = crate::metrics::label(key);
        let reps = r.repetitions;
        if let Some((setting, points)) = &swept {
            // A sweep: the metric against the swept setting (seed 004 Figs. 20-24).
            let f = Figure {
                file: format!("sweep-{}.svg", sanitize(key)),
                title: format!(
                    "{what} against {} — median, q1–q3 over {reps} run(s)",
                    summary::axis_name(setting)
                ),
            };
            summary::sweep(r, setting, points, key, &dir.join(&f.file), &f.title).map_err(err)?;
            figs.push(f);
            continue;
        }
        let f = Figure {
            file: format!("bars-{}.svg", sanitize(key)),
            title: format!("{what} per variant — median, q1–q3 over {reps} run(s)"),
        };
        summary::bars(r, key, &dir.join(&f.file), &f.title).map_err(err)?;
        figs.push(f);
        let f = Figure {
            file: format!("box-{}.svg", sanitize(key)),
            title: format!("{what} across {reps} repetition(s) per variant"),
        };
        summary::boxplot(&values, key, &dir.join(&f.file), &f.title).map_err(err)?;
        figs.push(f);
    }
    if let Some(names) = link_names(r).filter(|_| swept.is_none()) {
        let f = Figure {
            file: "bytes-per-interface.svg".into(),
            title: "Bytes received per interface (mean over repetitions)".into(),
        };
        summary::bytes(r, &names, &dir.join(&f.file), &f.title).map_err(err)?;
        figs.push(f);
    }
    std::fs::write(dir.join("index.html"), index(r, &figs))?;
    Ok(figs)
}

fn fig(tag: &str, kind: &str, title: String) -> Figure {
    Figure {
        file: format!("{tag}-{kind}.svg"),
        title,
    }
}

fn err(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("cannot draw a figure: {e}"))
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn index(r: &PlanResult, figs: &[Figure]) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>braid sim — {name}</title>\
         <style>body{{font-family:sans-serif;max-width:1000px;margin:auto}}\
         figure{{margin:1.5em 0}}img{{width:100%;border:1px solid #ddd}}\
         pre{{background:#f6f6f6;padding:.5em;overflow-x:auto}}</style></head><body>\n\
         <h1>{name}</h1>\n<p>{desc}</p>\n<p>{file}: {reps} repetition(s) per variant from seed \
         {seed}, {dur:.0} s simulated per run.</p>\n<pre>{table}</pre>\n",
        name = html_escape(&r.scenario),
        desc = html_escape(&r.description),
        file = html_escape(&r.file),
        reps = r.repetitions,
        seed = r.seed,
        dur = r.duration.as_secs_f64(),
        table = html_escape(&crate::report::table(r)),
    );
    for f in figs {
        let _ = writeln!(
            h,
            "<figure><img src=\"{}\" alt=\"{t}\"><figcaption>{t}</figcaption></figure>",
            html_escape(&f.file),
            t = html_escape(&f.title)
        );
    }
    h.push_str("</body></html>\n");
    h
}

/// Every run's values of `key` (event metrics pooled).
fn pooled(v: &VariantResult, key: &str) -> Vec<f64> {
    v.runs
        .iter()
        .flat_map(|r| r.metrics.get(key).into_iter().flatten().copied())
        .filter(|x| x.is_finite())
        .collect()
}

fn link_names(r: &PlanResult) -> Option<Vec<String>> {
    r.variants
        .iter()
        .flat_map(|v| &v.runs)
        .find_map(|run| run.record.as_ref())
        .map(|rec| rec.link_names.clone())
        .filter(|n| !n.is_empty())
}

fn secs(us: u64) -> f64 {
    us as f64 / 1e6
}

/// Keeps every k-th item so that at most `MAX_POINTS` remain.
fn thin<T: Copy>(v: &[T]) -> impl Iterator<Item = T> + '_ {
    let k = v.len().div_ceil(MAX_POINTS).max(1);
    v.iter().step_by(k).copied()
}

fn color(i: usize) -> RGBColor {
    const C: [RGBColor; 6] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
    ];
    C[i % C.len()]
}

fn range(lo: f64, hi: f64) -> Range<f64> {
    if hi > lo { lo..hi } else { lo..lo + 1.0 }
}

/// The window the sequence-number and delay plots show: around the first loss event, or the
/// whole run.
fn window(rec: &RunRecord) -> (f64, f64) {
    let end = rec.duration.as_secs_f64();
    match rec.loss_events.first() {
        Some(e) => {
            let t = e.t.as_secs_f64();
            ((t - 5.0).max(0.0), (t + 10.0).min(end))
        }
        None => (rec.app_start.as_secs_f64(), end),
    }
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

fn area<'a>(path: &'a Path) -> Result<Area<'a>, Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    Ok(root)
}

/// Vertical lines for loss events (red) and path-manager decisions (green: promote, grey:
/// demote) inside `[x0, x1]`.
fn markers(rec: &RunRecord, x0: f64, x1: f64) -> Vec<(f64, RGBColor, &'static str)> {
    let mut m = Vec::new();
    for e in &rec.loss_events {
        m.push((e.t.as_secs_f64(), RGBColor(214, 39, 40), "link lost"));
    }
    for d in &rec.decisions {
        let (c, what) = if d.demote {
            (RGBColor(120, 120, 120), "demoted")
        } else {
            (RGBColor(44, 160, 44), "promoted")
        };
        m.push((d.t.as_secs_f64(), c, what));
    }
    m.retain(|(t, _, _)| *t >= x0 && *t <= x1);
    m
}

type Res = Result<(), Box<dyn std::error::Error>>;

fn dsn(rec: &RunRecord, path: &Path, title: &str) -> Res {
    let (x0, x1) = window(rec);
    let pts: Vec<(u64, u8, u64)> = rec
        .dsn
        .iter()
        .copied()
        .filter(|(t, _, _)| secs(*t) >= x0 && secs(*t) <= x1)
        .collect();
    let (lo, hi) = pts
        .iter()
        .fold((u64::MAX, 0), |(lo, hi), p| (lo.min(p.2), hi.max(p.2)));
    let (y0, y1) = if pts.is_empty() {
        (0.0, 1.0)
    } else {
        (lo as f64 / 1e6, hi as f64 / 1e6)
    };
    let root = area(path)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(range(x0, x1), range(y0, y1))?;
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc("data sequence number (MB)")
        .draw()?;
    for (i, name) in rec.link_names.iter().enumerate() {
        let mine: Vec<(f64, f64)> = pts
            .iter()
            .filter(|p| usize::from(p.1) == i)
            .map(|p| (secs(p.0), p.2 as f64 / 1e6))
            .collect();
        let c = color(i);
        chart
            .draw_series(thin(&mine).map(|p| Circle::new(p, 1, c.filled())))?
            .label(format!("subflow over {name}"))
            .legend(move |(x, y)| Circle::new((x + 10, y), 3, c.filled()));
    }
    draw_markers(&mut chart, rec, x0, x1, y0, y1)?;
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    root.present()?;
    Ok(())
}

fn draw_markers(
    chart: &mut ChartContext<
        '_,
        SVGBackend<'_>,
        Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    >,
    rec: &RunRecord,
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
) -> Res {
    let mut seen = Vec::new();
    for (t, c, what) in markers(rec, x0, x1) {
        let s = chart.draw_series(std::iter::once(PathElement::new(
            vec![(t, y0), (t, y1)],
            c.stroke_width(1),
        )))?;
        if !seen.contains(&what) {
            seen.push(what);
            s.label(what)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
        }
    }
    Ok(())
}

fn delay(rec: &RunRecord, path: &Path, title: &str) -> Res {
    let (x0, x1) = window(rec);
    let pts: Vec<(f64, f64)> = rec
        .cbr
        .iter()
        .map(|&(g, d)| (secs(g), f64::from(d) / 1e3))
        .filter(|(t, _)| *t >= x0 && *t <= x1)
        .collect();
    let y1 = pts.iter().map(|p| p.1).fold(1.0, f64::max) * 1.05;
    let root = area(path)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(range(x0, x1), range(0.0, y1))?;
    chart
        .configure_mesh()
        .x_desc("message generated at (s)")
        .y_desc("one-way delay (ms)")
        .draw()?;
    let c = color(0);
    chart
        .draw_series(thin(&pts).map(|p| Circle::new(p, 1, c.filled())))?
        .label("CBR message")
        .legend(move |(x, y)| Circle::new((x + 10, y), 3, c.filled()));
    draw_markers(&mut chart, rec, x0, x1, 0.0, y1)?;
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    root.present()?;
    Ok(())
}

/// Throughput over 1 s bins (or finer for short runs).
fn throughput(rec: &RunRecord, path: &Path, title: &str) -> Res {
    let end = rec.duration.as_secs_f64();
    let bin = if end > 120.0 { 1.0 } else { 0.25 };
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    let n = rec.link_names.len();
    let mut last = &rec.samples[0];
    let mut lines: Vec<Vec<(f64, f64)>> = vec![Vec::new(); n + 1];
    for s in &rec.samples[1..] {
        let dt = (s.t - last.t).as_secs_f64();
        if dt + 1e-9 < bin && s.t != rec.samples[rec.samples.len() - 1].t {
            continue;
        }
        let dt = dt.max(1e-9);
        let t = s.t.as_secs_f64();
        lines[n].push((t, (s.delivered - last.delivered) as f64 * 8.0 / dt / 1e6));
        for (i, line) in lines.iter_mut().take(n).enumerate() {
            let (a, b) = (last.link_rx.get(i), s.link_rx.get(i));
            if let (Some(a), Some(b)) = (a, b) {
                line.push((t, b.saturating_sub(*a) as f64 * 8.0 / dt / 1e6));
            }
        }
        last = s;
    }
    for (i, name) in rec.link_names.iter().enumerate() {
        series.push((name.clone(), std::mem::take(&mut lines[i])));
    }
    series.push((
        "total (delivered in order)".into(),
        std::mem::take(&mut lines[n]),
    ));
    let y1 = series
        .iter()
        .flat_map(|(_, l)| l.iter().map(|p| p.1))
        .fold(1.0, f64::max)
        * 1.05;
    let root = area(path)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(range(0.0, end), range(0.0, y1))?;
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc(format!("Mbit/s ({bin} s bins)"))
        .draw()?;
    for (i, (name, line)) in series.iter().enumerate() {
        let c = if i == n { BLACK } else { color(i) };
        chart
            .draw_series(LineSeries::new(thin(line), c.stroke_width(1)))?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()?;
    root.present()?;
    Ok(())
}

fn rss(rec: &RunRecord, path: &Path, title: &str) -> Res {
    let end = rec.duration.as_secs_f64();
    let (lo, hi) = rec.rss.iter().fold((f64::MAX, f64::MIN), |(lo, hi), s| {
        (lo.min(f64::from(s.3)), hi.max(f64::from(s.3)))
    });
    let (lo, hi) = rec
        .thresholds
        .iter()
        .flatten()
        .fold((lo, hi), |(lo, hi), t| (lo.min(*t), hi.max(*t)));
    let (y0, y1) = ((lo - 3.0).floor(), (hi + 3.0).ceil());
    let root = area(path)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(range(0.0, end), range(y0, y1))?;
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc("smoothed RSS (dBm)")
        .draw()?;
    for (i, name) in rec.link_names.iter().enumerate() {
        let line: Vec<(f64, f64)> = rec
            .rss
            .iter()
            .filter(|s| usize::from(s.1) == i)
            .map(|s| (secs(s.0), f64::from(s.3)))
            .collect();
        if line.is_empty() {
            continue;
        }
        let c = color(i);
        chart
            .draw_series(LineSeries::new(thin(&line), c.stroke_width(1)))?
            .label(format!("{name} RSS"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
        if let Some(Some(t)) = rec.thresholds.get(i) {
            let t = *t;
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(0.0, t), (end, t)],
                    6,
                    4,
                    c.stroke_width(1),
                ))?
                .label(format!("{name} threshold {t} dBm"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.mix(0.6)));
        }
        // Decisions on this link, as triangles on its curve's threshold line.
        let y = rec.thresholds.get(i).copied().flatten().unwrap_or(y0 + 1.0);
        let up: Vec<(f64, f64)> = rec
            .decisions
            .iter()
            .filter(|d| d.link == i && !d.demote)
            .map(|d| (d.t.as_secs_f64(), y))
            .collect();
        let down: Vec<(f64, f64)> = rec
            .decisions
            .iter()
            .filter(|d| d.link == i && d.demote)
            .map(|d| (d.t.as_secs_f64(), y))
            .collect();
        let green = RGBColor(44, 160, 44);
        let grey = RGBColor(90, 90, 90);
        chart
            .draw_series(thin(&up).map(move |p| TriangleMarker::new(p, 5, green.filled())))?
            .label(format!("{name}: path manager promotes"))
            .legend(move |(x, y)| TriangleMarker::new((x + 10, y), 4, green.filled()));
        chart
            .draw_series(thin(&down).map(move |p| Cross::new(p, 4, grey.stroke_width(2))))?
            .label(format!("{name}: path manager demotes"))
            .legend(move |(x, y)| Cross::new((x + 10, y), 3, grey));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()?;
    root.present()?;
    Ok(())
}
