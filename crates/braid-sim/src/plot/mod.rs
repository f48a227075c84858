//! `--report DIR`: SVG figures of a plan's results and an `index.html` that shows them.
//!
//! Per variant, from its first repetition: data sequence numbers over time per subflow around
//! the first loss event, with the loss and the path manager's decisions marked (seed 000
//! Fig. 7/8); the application delay of every CBR message (Fig. 9); throughput per link and in
//! total (Fig. 6/10); the smoothed signal per link with its threshold and the decisions. Across
//! variants: box plots of every shown metric over the repetitions (seed 002 Fig. 3) and the bytes
//! each interface carried (seed 000 Fig. 11).
//!
//! Figures are meant for a paper: axis names and units come from the metric table
//! ([`crate::metrics::METRICS`]) or, for time series, from [`SERIES_AXES`]; box-plot whiskers
//! span the data (min–max, said in the caption); every marker line carries the link and event
//! it marks; legends sit beside the plot, never over data; a category without data has no slot.
//! `figures.json` lists each figure with its axes and the statistics its boxes and whiskers
//! were drawn from, so a check can hold the drawing against the data.

use std::fmt::Write as _;
use std::io;
use std::ops::Range;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use serde::Serialize;

use crate::record::RunRecord;
use crate::report::{html_escape, sanitize};
use crate::runner::{PlanResult, VariantResult};

mod summary;

/// At most this many points per series: the SVG stays small enough for a browser.
const MAX_POINTS: usize = 6_000;
const SIZE: (u32, u32) = (1040, 500);
/// Width of the legend column right of the plot.
const LEGEND_W: u32 = 240;
const FONT: &str = "sans-serif";

/// Axis names of the figures whose axis is not one metric: time series, the variants, the bytes
/// per interface (a metric axis's name comes from the metric table).
pub const SERIES_AXES: &[&str] = &[
    "Data received per interface (MB)",
    "Time (s)",
    "Data sequence number (MB)",
    "Message generated at (s)",
    "One-way delay (ms)",
    "Throughput, per bin (Mbit/s)",
    "Smoothed RSS (dBm)",
    "Variant",
];

/// One figure of the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figure {
    /// File name in the report directory.
    pub file: String,
    pub title: String,
    /// What the marks mean (whiskers, bins, markers), under the figure.
    pub caption: String,
    pub x: Axis,
    pub y: Axis,
    /// Boxes, bars and whiskers as drawn, per category (box plots, bars, sweeps).
    pub boxes: Vec<BoxDrawn>,
}

/// An axis: its label and what it measures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Axis {
    pub label: String,
    /// The metric key of a metric axis (its label is the metric table's).
    pub metric: Option<String>,
    /// The scenario key of a swept setting's axis.
    pub setting: Option<String>,
}

impl Axis {
    fn metric(key: &str) -> Axis {
        Axis {
            label: crate::metrics::axis_label(key),
            metric: Some(key.to_string()),
            setting: None,
        }
    }

    /// A time series' or the category axis: one of [`SERIES_AXES`].
    fn series(label: &str) -> Axis {
        debug_assert!(SERIES_AXES.contains(&label), "{label}");
        Axis {
            label: label.to_string(),
            metric: None,
            setting: None,
        }
    }

    fn setting(key: &str, label: String) -> Axis {
        Axis {
            label,
            metric: None,
            setting: Some(key.to_string()),
        }
    }
}

/// One category's statistics as drawn: the box (q1–q3) and median where there is a box, the
/// whisker's ends, and the data it summarises (`n` values from `min` to `max`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BoxDrawn {
    pub category: String,
    pub n: usize,
    pub min: f64,
    pub max: f64,
    pub q1: f64,
    pub median: f64,
    pub q3: f64,
    pub whisker_lo: f64,
    pub whisker_hi: f64,
}

/// Writes the figures, `figures.json` and `index.html` into `dir`; returns the figures in page
/// order.
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
            let f = dsn(rec, &dir.join(format!("{tag}-dsn.svg")), &what).map_err(err)?;
            figs.push(f);
        }
        if !rec.cbr.is_empty() {
            let f = delay(rec, &dir.join(format!("{tag}-delay.svg")), &what).map_err(err)?;
            figs.push(f);
        }
        if rec.samples.len() > 1 {
            let f =
                throughput(rec, &dir.join(format!("{tag}-throughput.svg")), &what).map_err(err)?;
            figs.push(f);
        }
        if !rec.rss.is_empty() {
            let f = rss(rec, &dir.join(format!("{tag}-rss.svg")), &what).map_err(err)?;
            figs.push(f);
        }
    }
    for key in &r.show {
        let values: Vec<(String, Vec<f64>)> = r
            .variants
            .iter()
            .map(|v| (v.name.clone(), pooled(v, key)))
            .filter(|(_, x)| !x.is_empty())
            .collect();
        if values.is_empty() {
            continue;
        }
        let (what, _) = crate::metrics::label(key);
        let reps = r.repetitions;
        if let Some((setting, points)) = &swept {
            // A sweep: the metric against the swept setting (seed 004 Figs. 20-24).
            let file = dir.join(format!("sweep-{}.svg", sanitize(key)));
            let title = format!("{what} against {}", summary::axis_name(setting));
            let f = summary::sweep(r, setting, points, key, &file, &title).map_err(err)?;
            figs.push(f);
            continue;
        }
        let file = dir.join(format!("bars-{}.svg", sanitize(key)));
        let title = format!("{what} per variant, over {reps} run(s)");
        figs.push(summary::bars(r, key, &file, &title).map_err(err)?);
        let file = dir.join(format!("box-{}.svg", sanitize(key)));
        let title = format!("{what} across {reps} repetition(s) per variant");
        figs.push(summary::boxplot(&values, key, &file, &title).map_err(err)?);
    }
    if let Some(names) = link_names(r).filter(|_| swept.is_none())
        && let Some(f) =
            summary::bytes(r, &names, &dir.join("bytes-per-interface.svg")).map_err(err)?
    {
        figs.push(f);
    }
    std::fs::write(
        dir.join("figures.json"),
        serde_json::to_string_pretty(&figs).expect("JSON of plain data"),
    )?;
    std::fs::write(dir.join("index.html"), index(r, &figs))?;
    Ok(figs)
}

fn err(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("cannot draw a figure: {e}"))
}

fn index(r: &PlanResult, figs: &[Figure]) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>braid sim — {name}</title>\
         <style>body{{font-family:sans-serif;max-width:1100px;margin:auto;padding:0 1em}}\
         figure{{margin:1.5em 0}}img{{width:100%;border:1px solid #ddd}}\
         figcaption{{font-size:.9em;color:#333}}\
         table{{border-collapse:collapse;margin:1em 0;font-size:.9em}}\
         th,td{{border:1px solid #ccc;padding:.25em .5em}}td.n{{text-align:right}}\
         tr.paper td{{color:#b22;font-style:italic}}caption{{caption-side:bottom;text-align:left;\
         font-size:.85em;color:#444;padding-top:.4em}}</style></head><body>\n\
         <h1>{name}</h1>\n<p>{desc}</p>\n<p>{file}: {reps} repetition(s) per variant from seed \
         {seed}, {dur:.0} s of scenario time per run.</p>\n",
        name = html_escape(&r.scenario),
        desc = html_escape(&r.description),
        file = html_escape(&r.file),
        reps = r.repetitions,
        seed = r.seed,
        dur = r.duration.as_secs_f64(),
    );
    h.push_str("<h2>Results</h2>\n");
    h.push_str(&crate::report::html_table(r));
    h.push_str("<h2>Metrics</h2>\n");
    h.push_str(&crate::report::html_metrics(r));
    h.push_str("<h2>Figures</h2>\n");
    for f in figs {
        let _ = writeln!(
            h,
            "<figure><img src=\"{}\" alt=\"{t}\"><figcaption><b>{t}.</b> {c}</figcaption></figure>",
            html_escape(&f.file),
            t = html_escape(&f.title),
            c = html_escape(&f.caption),
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

const RED: RGBColor = RGBColor(214, 39, 40);
const GREEN: RGBColor = RGBColor(44, 160, 44);
const GREY: RGBColor = RGBColor(100, 100, 100);

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
type Res<T = ()> = Result<T, Box<dyn std::error::Error>>;

/// A figure's canvas: the title across the top, the plot on the left, the legend column on the
/// right (so that no legend covers data).
struct Canvas<'a> {
    root: Area<'a>,
    plot: Area<'a>,
    legend: Area<'a>,
}

fn canvas<'a>(path: &'a Path, title: &str) -> Res<Canvas<'a>> {
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let body = root.titled(title, (FONT, 17))?;
    let (plot, legend) = body.split_horizontally(SIZE.0 - LEGEND_W);
    Ok(Canvas { root, plot, legend })
}

impl Canvas<'_> {
    /// Draws the legend and writes the file.
    fn finish(self, keys: &[Key]) -> Res {
        draw_legend(&self.legend, keys)?;
        self.root.present()?;
        Ok(())
    }
}

/// How a legend entry is drawn.
#[derive(Debug, Clone, Copy)]
enum Glyph {
    Line(RGBColor),
    Dashed(RGBColor),
    Dot(RGBColor),
    Cross(RGBColor),
    Triangle(RGBColor),
    Bar(RGBColor),
}

/// One legend entry.
struct Key {
    glyph: Glyph,
    label: String,
}

fn key(glyph: Glyph, label: impl Into<String>) -> Key {
    Key {
        glyph,
        label: label.into(),
    }
}

/// Splits `s` into lines of at most `width` characters at spaces.
fn wrap(s: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in s.split(' ') {
        match lines.last_mut() {
            Some(l) if l.chars().count() + 1 + word.chars().count() <= width => {
                l.push(' ');
                l.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines
}

fn draw_legend(area: &Area<'_>, keys: &[Key]) -> Res {
    let mut y = 40;
    for k in keys {
        let (gx, gy) = (12, y);
        match k.glyph {
            Glyph::Line(c) => {
                area.draw(&PathElement::new(
                    vec![(gx, gy), (gx + 22, gy)],
                    c.stroke_width(2),
                ))?;
            }
            Glyph::Dashed(c) => {
                for x in [gx, gx + 9, gx + 18] {
                    area.draw(&PathElement::new(
                        vec![(x, gy), (x + 5, gy)],
                        c.stroke_width(2),
                    ))?;
                }
            }
            Glyph::Dot(c) => area.draw(&Circle::new((gx + 11, gy), 4, c.filled()))?,
            Glyph::Cross(c) => area.draw(&Cross::new((gx + 11, gy), 5, c.stroke_width(2)))?,
            Glyph::Triangle(c) => {
                area.draw(&TriangleMarker::new((gx + 11, gy), 6, c.filled()))?;
            }
            Glyph::Bar(c) => {
                area.draw(&Rectangle::new(
                    [(gx + 4, gy - 6), (gx + 18, gy + 6)],
                    c.filled(),
                ))?;
            }
        }
        for (i, line) in wrap(&k.label, 28).iter().enumerate() {
            area.draw(&Text::new(
                line.clone(),
                (gx + 30, gy - 7 + 16 * i as i32),
                (FONT, 13),
            ))?;
            y += 16;
        }
        y += 8;
    }
    Ok(())
}

type Chart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// The chart builder every figure starts from: the canvas's plot area, its margins and label
/// areas.
fn builder<'a, 'b>(c: &'a Canvas<'b>) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut b = ChartBuilder::on(&c.plot);
    b.margin(12).x_label_area_size(44).y_label_area_size(74);
    b
}

/// A chart on the canvas's plot area with the given ranges and axis labels.
fn chart<'a, 'b>(
    c: &'a Canvas<'b>,
    xs: Range<f64>,
    ys: Range<f64>,
    x: &Axis,
    y: &Axis,
) -> Res<Chart<'a, 'b>> {
    let mut chart = builder(c).build_cartesian_2d(xs, ys)?;
    chart
        .configure_mesh()
        .x_desc(x.label.as_str())
        .y_desc(y.label.as_str())
        .axis_desc_style((FONT, 15))
        .draw()?;
    Ok(chart)
}

/// A vertical marker: when, its colour, and its label (which link, which event).
struct Marker {
    t: f64,
    color: RGBColor,
    label: String,
}

/// Loss events (red) and path-manager decisions (green: promoted, grey: demoted) inside
/// `[x0, x1]`, each labelled with its link.
fn markers(rec: &RunRecord, x0: f64, x1: f64) -> Vec<Marker> {
    let name = |i: usize| {
        rec.link_names
            .get(i)
            .cloned()
            .unwrap_or_else(|| format!("link {i}"))
    };
    let mut m = Vec::new();
    for e in &rec.loss_events {
        m.push(Marker {
            t: e.t.as_secs_f64(),
            color: RED,
            label: format!("{} lost", name(e.link)),
        });
    }
    for d in &rec.decisions {
        let (color, what) = if d.demote {
            (GREY, "demoted")
        } else {
            (GREEN, "promoted")
        };
        m.push(Marker {
            t: d.t.as_secs_f64(),
            color,
            label: format!("{} {what}", name(d.link)),
        });
    }
    m.retain(|k| k.t >= x0 && k.t <= x1);
    m.sort_by(|a, b| a.t.total_cmp(&b.t));
    m
}

/// Draws the markers as vertical lines, each with its label near the top (staggered so that
/// neighbours do not overlap); returns their legend entries.
fn draw_markers(
    chart: &mut Chart<'_, '_>,
    rec: &RunRecord,
    (x0, x1): (f64, f64),
    ys: Range<f64>,
) -> Res<Vec<Key>> {
    let (y0, y1) = (ys.start, ys.end);
    let ms = markers(rec, x0, x1);
    for (i, m) in ms.iter().enumerate() {
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(m.t, y0), (m.t, y1)],
            m.color.stroke_width(1),
        )))?;
        let y = y1 - (y1 - y0) * (0.03 + 0.055 * (i % 4) as f64);
        chart.draw_series(std::iter::once(Text::new(
            format!(" {}", m.label),
            (m.t, y),
            (FONT, 12).into_font().color(&m.color),
        )))?;
    }
    let mut keys = Vec::new();
    for (c, what) in [
        (RED, "link lost (line labelled with the link)"),
        (GREY, "path manager demoted the link"),
        (GREEN, "path manager promoted the link"),
    ] {
        if ms.iter().any(|m| m.color == c) {
            keys.push(key(Glyph::Line(c), what));
        }
    }
    Ok(keys)
}

fn dsn(rec: &RunRecord, path: &Path, what: &str) -> Res<Figure> {
    let title = format!("Data sequence numbers per subflow — {what}");
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
    let (x, y) = (
        Axis::series("Time (s)"),
        Axis::series("Data sequence number (MB)"),
    );
    let ys = range(y0, y1 + (y1 - y0) * 0.25);
    let c = canvas(path, &title)?;
    let mut ch = chart(&c, range(x0, x1), ys.clone(), &x, &y)?;
    let mut keys = Vec::new();
    for (i, name) in rec.link_names.iter().enumerate() {
        let mine: Vec<(f64, f64)> = pts
            .iter()
            .filter(|p| usize::from(p.1) == i)
            .map(|p| (secs(p.0), p.2 as f64 / 1e6))
            .collect();
        let col = color(i);
        ch.draw_series(thin(&mine).map(|p| Circle::new(p, 1, col.filled())))?;
        keys.push(key(
            Glyph::Dot(col),
            format!("segment sent on the subflow over {name}"),
        ));
    }
    keys.extend(draw_markers(&mut ch, rec, (x0, x1), ys)?);
    drop(ch);
    c.finish(&keys)?;
    Ok(Figure {
        file: file_name(path),
        title,
        caption: "Each dot is a data segment sent (its first byte's data sequence number), \
                  coloured by the subflow it went on, from 5 s before to 10 s after the first \
                  loss event; vertical lines mark the events, each labelled with its link."
            .into(),
        x,
        y,
        boxes: Vec::new(),
    })
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn delay(rec: &RunRecord, path: &Path, what: &str) -> Res<Figure> {
    let title = format!("Application delay per message — {what}");
    let (x0, x1) = window(rec);
    let pts: Vec<(f64, f64)> = rec
        .cbr
        .iter()
        .map(|&(g, d)| (secs(g), f64::from(d) / 1e3))
        .filter(|(t, _)| *t >= x0 && *t <= x1)
        .collect();
    let y1 = pts.iter().map(|p| p.1).fold(1.0, f64::max) * 1.25;
    let (x, y) = (
        Axis::series("Message generated at (s)"),
        Axis::series("One-way delay (ms)"),
    );
    let c = canvas(path, &title)?;
    let mut ch = chart(&c, range(x0, x1), range(0.0, y1), &x, &y)?;
    let col = color(0);
    ch.draw_series(thin(&pts).map(|p| Circle::new(p, 1, col.filled())))?;
    let mut keys = vec![key(Glyph::Dot(col), "CBR message")];
    keys.extend(draw_markers(&mut ch, rec, (x0, x1), range(0.0, y1))?);
    drop(ch);
    c.finish(&keys)?;
    Ok(Figure {
        file: file_name(path),
        title,
        caption: "Each dot is one CBR message: its one-way delay from generation to complete \
                  arrival at the receiver, from 5 s before to 10 s after the first loss event; \
                  vertical lines mark the events, each labelled with its link."
            .into(),
        x,
        y,
        boxes: Vec::new(),
    })
}

/// Throughput over 1 s bins (or finer for short runs).
fn throughput(rec: &RunRecord, path: &Path, what: &str) -> Res<Figure> {
    let title = format!("Throughput per link — {what}");
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
        series.push((
            format!("received over {name}"),
            std::mem::take(&mut lines[i]),
        ));
    }
    series.push((
        "total, delivered in order".into(),
        std::mem::take(&mut lines[n]),
    ));
    let y1 = series
        .iter()
        .flat_map(|(_, l)| l.iter().map(|p| p.1))
        .fold(1.0, f64::max)
        * 1.05;
    let (x, y) = (
        Axis::series("Time (s)"),
        Axis::series("Throughput, per bin (Mbit/s)"),
    );
    let c = canvas(path, &title)?;
    let mut ch = chart(&c, range(0.0, end), range(0.0, y1), &x, &y)?;
    let mut keys = Vec::new();
    for (i, (name, line)) in series.iter().enumerate() {
        let col = if i == n { BLACK } else { color(i) };
        ch.draw_series(LineSeries::new(thin(line), col.stroke_width(1)))?;
        keys.push(key(Glyph::Line(col), name.clone()));
    }
    drop(ch);
    c.finish(&keys)?;
    Ok(Figure {
        file: file_name(path),
        title,
        caption: format!(
            "Stream bytes received over each link (duplicates included) and delivered in \
             order in total, per {bin} s bin."
        ),
        x,
        y,
        boxes: Vec::new(),
    })
}

fn rss(rec: &RunRecord, path: &Path, what: &str) -> Res<Figure> {
    let title = format!("Smoothed signal and path-manager decisions — {what}");
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
    let (x, y) = (Axis::series("Time (s)"), Axis::series("Smoothed RSS (dBm)"));
    let c = canvas(path, &title)?;
    let mut ch = chart(&c, range(0.0, end), range(y0, y1), &x, &y)?;
    let mut keys = Vec::new();
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
        let col = color(i);
        ch.draw_series(LineSeries::new(thin(&line), col.stroke_width(1)))?;
        keys.push(key(Glyph::Line(col), format!("{name}: smoothed RSS")));
        if let Some(Some(t)) = rec.thresholds.get(i) {
            let t = *t;
            ch.draw_series(DashedLineSeries::new(
                vec![(0.0, t), (end, t)],
                6,
                4,
                col.stroke_width(1),
            ))?;
            keys.push(key(
                Glyph::Dashed(col),
                format!("{name}: threshold, {t} dBm"),
            ));
        }
        // Decisions on this link, as marks on its threshold line.
        let y = rec.thresholds.get(i).copied().flatten().unwrap_or(y0 + 1.0);
        let at = |demote: bool| -> Vec<(f64, f64)> {
            rec.decisions
                .iter()
                .filter(|d| d.link == i && d.demote == demote)
                .map(|d| (d.t.as_secs_f64(), y))
                .collect()
        };
        let (up, down) = (at(false), at(true));
        if !up.is_empty() {
            ch.draw_series(thin(&up).map(|p| TriangleMarker::new(p, 5, GREEN.filled())))?;
            keys.push(key(
                Glyph::Triangle(GREEN),
                format!("{name}: path manager promotes"),
            ));
        }
        if !down.is_empty() {
            ch.draw_series(thin(&down).map(|p| Cross::new(p, 4, GREY.stroke_width(2))))?;
            keys.push(key(
                Glyph::Cross(GREY),
                format!("{name}: path manager demotes"),
            ));
        }
    }
    drop(ch);
    c.finish(&keys)?;
    Ok(Figure {
        file: file_name(path),
        title,
        caption: "The signal per link as the path manager sees it (after smoothing), its \
                  threshold, and the path manager's decisions on the link, marked on its \
                  threshold line."
            .into(),
        x,
        y,
        boxes: Vec::new(),
    })
}
