//! Figures across variants: per-variant bars (median, q1–q3) with the paper's numbers, box
//! plots over the repetitions, bytes per interface, and a metric against a swept setting (seed
//! 004 Figs. 20–24: transfer time against the receive buffer).

use std::path::Path;

use plotters::prelude::*;

use super::{
    Axis, BoxDrawn, Canvas, Chart, Figure, Glyph, RED, Res, builder, canvas, color, file_name, key,
    range,
};
use crate::runner::{PlanResult, Summary};

/// A chart whose x axis is `names`, one slot each, on the canvas's plot area.
fn categories<'a, 'b>(
    c: &'a Canvas<'b>,
    names: &'a [String],
    ys: std::ops::Range<f64>,
    y: &Axis,
) -> Res<Chart<'a, 'b>> {
    let n = names.len();
    let mut chart = builder(c).build_cartesian_2d(-0.5..n as f64 - 0.5, ys)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n.max(2) * 2 + 1)
        .x_desc("Variant")
        .y_desc(y.label.as_str())
        .axis_desc_style((super::FONT, 15))
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() > 1e-6 || i < 0.0 {
                return String::new();
            }
            names.get(i as usize).cloned().unwrap_or_default()
        })
        .draw()?;
    Ok(chart)
}

fn drawn(category: &str, s: &Summary, whiskers: (f64, f64)) -> BoxDrawn {
    BoxDrawn {
        category: category.to_string(),
        n: s.n,
        min: s.min,
        max: s.max,
        q1: s.q1,
        median: s.median,
        q3: s.q3,
        whisker_lo: whiskers.0,
        whisker_hi: whiskers.1,
    }
}

/// Median bars with q1–q3 whiskers per variant that has values; the paper's value as a red
/// mark.
pub(super) fn bars(r: &PlanResult, key_: &str, path: &Path, title: &str) -> Res<Figure> {
    let rows: Vec<(String, Summary, Option<f64>)> = r
        .variants
        .iter()
        .filter_map(|v| {
            let paper = r
                .paper
                .as_ref()
                .and_then(|p| p.values.get(&v.name))
                .and_then(|m| m.get(key_))
                .copied();
            Some((v.name.clone(), *v.summary.get(key_)?, paper))
        })
        .collect();
    let hi = rows
        .iter()
        .flat_map(|(_, s, p)| [Some(s.q3), *p])
        .flatten()
        .fold(0.0, f64::max);
    let names: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
    let y = Axis::metric(key_);
    let c = canvas(path, title)?;
    let mut ch = categories(&c, &names, range(0.0, hi * 1.1), &y)?;
    let mut boxes = Vec::new();
    for (i, (name, s, _)) in rows.iter().enumerate() {
        let x = i as f64;
        ch.draw_series(std::iter::once(Rectangle::new(
            [(x - 0.3, 0.0), (x + 0.3, s.median)],
            color(i).mix(0.7).filled(),
        )))?;
        ch.draw_series(std::iter::once(PathElement::new(
            vec![(x, s.q1), (x, s.q3)],
            BLACK.stroke_width(2),
        )))?;
        for y in [s.q1, s.q3] {
            ch.draw_series(std::iter::once(PathElement::new(
                vec![(x - 0.08, y), (x + 0.08, y)],
                BLACK.stroke_width(2),
            )))?;
        }
        boxes.push(drawn(name, s, (s.q1, s.q3)));
    }
    let marks: Vec<(f64, f64)> = rows
        .iter()
        .enumerate()
        .filter_map(|(i, (_, _, p))| p.map(|p| (i as f64, p)))
        .collect();
    ch.draw_series(
        marks
            .iter()
            .map(|&(x, y)| Cross::new((x + 0.2, y), 6, RED.stroke_width(2))),
    )?;
    let mut keys = vec![
        key(Glyph::Bar(color(0)), "median (bar height)"),
        key(Glyph::Line(BLACK), "whisker: first to third quartile"),
    ];
    if !marks.is_empty() {
        keys.push(key(Glyph::Cross(RED), "the paper's value"));
    }
    drop(ch);
    c.finish(&keys)?;
    let reps = r.repetitions;
    Ok(Figure {
        file: file_name(path),
        title: title.to_string(),
        caption: format!(
            "Bar: median; whisker: first to third quartile of the values over {reps} run(s) \
             (event metrics: every loss event of every run); red cross: the seed paper's value \
             where it gives one."
        ),
        x: Axis::series("Variant"),
        y,
        boxes,
    })
}

/// A setting every variant sweeps over numbers (`[sweep]`): the key, and per variant its base
/// name (the variant name without the value's label) and the value.
pub(super) fn swept(r: &PlanResult) -> Option<(String, Vec<(String, f64)>)> {
    let first = r.variants.first()?;
    for key in first.settings.keys() {
        let mut points = Vec::new();
        for v in &r.variants {
            let raw = v.settings.get(key)?;
            let x = number(raw)?;
            let base = v
                .name
                .strip_suffix(raw.as_str())
                .map(|b| b.trim_end_matches('-').to_string())
                .unwrap_or_default();
            points.push((base, x));
        }
        let mut xs: Vec<f64> = points.iter().map(|p| p.1).collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        if xs.len() >= 3 {
            return Some((key.clone(), points));
        }
    }
    None
}

/// A setting's value as a number: sizes in bytes, durations in ms, rates in bit/s, numbers.
fn number(raw: &str) -> Option<f64> {
    raw.parse::<f64>()
        .ok()
        .or_else(|| crate::units::parse_size(raw).ok().map(|b| b as f64))
        .or_else(|| {
            crate::units::parse_duration(raw)
                .ok()
                .map(|d| d.as_secs_f64() * 1e3)
        })
        .or_else(|| crate::units::parse_rate(raw).ok())
}

/// The metric's median (q1–q3 whiskers) against the swept setting, one line per base variant,
/// on a logarithmic axis.
pub(super) fn sweep(
    r: &PlanResult,
    setting: &str,
    points: &[(String, f64)],
    key_: &str,
    path: &Path,
    title: &str,
) -> Res<Figure> {
    let mut bases: Vec<&str> = Vec::new();
    for (b, _) in points {
        if !bases.contains(&b.as_str()) {
            bases.push(b);
        }
    }
    let series: Vec<Vec<(f64, String, Summary)>> = bases
        .iter()
        .map(|b| {
            let mut s: Vec<(f64, String, Summary)> = r
                .variants
                .iter()
                .zip(points)
                .filter(|(_, (pb, _))| pb == b)
                .filter_map(|(v, (_, x))| v.summary.get(key_).map(|s| (*x, v.name.clone(), *s)))
                .collect();
            s.sort_by(|a, b| a.0.total_cmp(&b.0));
            s
        })
        .collect();
    let all = series.iter().flatten();
    let (x0, x1) = all.clone().fold((f64::MAX, f64::MIN), |(a, b), (x, _, _)| {
        (a.min(*x), b.max(*x))
    });
    let y1 = all.map(|(_, _, s)| s.q3).fold(0.0, f64::max) * 1.1;
    let (xlabel, unit) = sweep_label(setting);
    let x = Axis::setting(setting, xlabel);
    let y = Axis::metric(key_);
    let c = canvas(path, title)?;
    let mut ch =
        builder(&c).build_cartesian_2d((x0 * 0.9..x1 * 1.1).log_scale(), range(0.0, y1))?;
    ch.configure_mesh()
        .x_desc(x.label.as_str())
        .y_desc(y.label.as_str())
        .axis_desc_style((super::FONT, 15))
        .x_label_formatter(&|x| format_x(*x, unit))
        .draw()?;
    let mut keys = Vec::new();
    let mut boxes = Vec::new();
    for (i, (b, s)) in bases.iter().zip(&series).enumerate() {
        if s.is_empty() {
            continue;
        }
        let col = color(i);
        let name = if b.is_empty() {
            crate::metrics::axis_label(key_)
        } else {
            b.to_string()
        };
        ch.draw_series(LineSeries::new(
            s.iter().map(|(x, _, s)| (*x, s.median)),
            col.stroke_width(2),
        ))?;
        ch.draw_series(s.iter().map(|(x, _, s)| {
            PathElement::new(vec![(*x, s.q1), (*x, s.q3)], col.mix(0.6).stroke_width(1))
        }))?;
        ch.draw_series(
            s.iter()
                .map(|(x, _, s)| Circle::new((*x, s.median), 3, col.filled())),
        )?;
        keys.push(key(Glyph::Line(col), format!("{name}: median")));
        boxes.extend(s.iter().map(|(_, v, s)| drawn(v, s, (s.q1, s.q3))));
    }
    keys.push(key(
        Glyph::Line(super::GREY),
        "whisker: first to third quartile",
    ));
    drop(ch);
    c.finish(&keys)?;
    Ok(Figure {
        file: file_name(path),
        title: title.to_string(),
        caption: format!(
            "Median of the {} run(s) per point (dot and line), first to third quartile \
             (whisker), against the setting on a logarithmic axis.",
            r.repetitions
        ),
        x,
        y,
        boxes,
    })
}

/// A swept setting's name for a title.
pub(super) fn axis_name(setting: &str) -> String {
    let l = sweep_label(setting).0;
    let name = l.split(" (").next().unwrap_or(&l);
    format!("the {}", name.to_lowercase())
}

/// The axis name of a swept setting and how its values print.
fn sweep_label(setting: &str) -> (String, &'static str) {
    let last = setting
        .rsplit('.')
        .next()
        .unwrap_or(setting)
        .trim_matches('"');
    match last {
        "receive_buffer" => ("Receive buffer (kB)".into(), "kB"),
        "send_buffer" => ("Send buffer (kB)".into(), "kB"),
        "rto_min" => ("RTO_min (ms)".into(), ""),
        other => (other.replace('_', " "), ""),
    }
}

fn format_x(x: f64, unit: &str) -> String {
    match unit {
        "kB" => format!("{:.0}", x / 1e3),
        _ => format!("{x}"),
    }
}

/// Box plots of `values` per category with values: box from the first to the third quartile,
/// the median across it, whiskers from the smallest to the largest value, every value as a dot.
pub(super) fn boxplot(
    values: &[(String, Vec<f64>)],
    key_: &str,
    path: &Path,
    title: &str,
) -> Res<Figure> {
    let stats: Vec<(String, Summary, &[f64])> = values
        .iter()
        .filter_map(|(n, v)| Some((n.clone(), Summary::of(v)?, v.as_slice())))
        .collect();
    let (lo, hi) = stats
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), (_, s, _)| {
            (lo.min(s.min), hi.max(s.max))
        });
    let pad = ((hi - lo) * 0.05).max(1e-3);
    let names: Vec<String> = stats.iter().map(|s| s.0.clone()).collect();
    let y = Axis::metric(key_);
    let c = canvas(path, title)?;
    let mut ch = categories(&c, &names, range(lo - pad, hi + pad), &y)?;
    let mut boxes = Vec::new();
    for (i, (name, s, v)) in stats.iter().enumerate() {
        let x = i as f64;
        let col = color(i);
        let line = |pts: Vec<(f64, f64)>, w: u32| PathElement::new(pts, BLACK.stroke_width(w));
        ch.draw_series([
            line(vec![(x, s.min), (x, s.q1)], 1),
            line(vec![(x, s.q3), (x, s.max)], 1),
            line(vec![(x - 0.1, s.min), (x + 0.1, s.min)], 1),
            line(vec![(x - 0.1, s.max), (x + 0.1, s.max)], 1),
        ])?;
        ch.draw_series(std::iter::once(Rectangle::new(
            [(x - 0.25, s.q1), (x + 0.25, s.q3)],
            col.mix(0.35).filled(),
        )))?;
        ch.draw_series(std::iter::once(Rectangle::new(
            [(x - 0.25, s.q1), (x + 0.25, s.q3)],
            col.stroke_width(2),
        )))?;
        ch.draw_series(std::iter::once(line(
            vec![(x - 0.25, s.median), (x + 0.25, s.median)],
            3,
        )))?;
        ch.draw_series(
            super::thin(v).map(|y| Circle::new((x + 0.35, y), 2, BLACK.mix(0.5).filled())),
        )?;
        boxes.push(drawn(name, s, (s.min, s.max)));
    }
    drop(ch);
    c.finish(&[
        key(Glyph::Bar(color(0)), "box: first to third quartile"),
        key(Glyph::Line(BLACK), "median (bold line across the box)"),
        key(Glyph::Line(BLACK), "whiskers: smallest to largest value"),
        key(Glyph::Dot(super::GREY), "each value"),
    ])?;
    Ok(Figure {
        file: file_name(path),
        title: title.to_string(),
        caption: "Box: first to third quartile; bold line: median; whiskers: the smallest to \
                  the largest value (min–max, no outlier rule); dots beside each box: every value \
                  (event metrics: one per loss event of every run)."
            .into(),
        x: Axis::series("Variant"),
        y,
        boxes,
    })
}

/// Mean MB received per link and variant, side by side; `None` when no variant has any.
pub(super) fn bytes(r: &PlanResult, names: &[String], path: &Path) -> Res<Option<Figure>> {
    let title = "Bytes received per interface, mean over repetitions";
    let rows: Vec<(String, Vec<f64>)> = r
        .variants
        .iter()
        .map(|v| {
            let mb = names
                .iter()
                .map(|n| {
                    v.summary
                        .get(&crate::metrics::link_mb_key(n))
                        .map(|s| s.mean)
                        .unwrap_or(0.0)
                })
                .collect();
            (v.name.clone(), mb)
        })
        .filter(|(_, mb): &(String, Vec<f64>)| mb.iter().any(|x| *x > 0.0))
        .collect();
    if rows.is_empty() {
        return Ok(None);
    }
    let y1 = rows.iter().flat_map(|r| &r.1).copied().fold(1.0, f64::max) * 1.1;
    let vnames: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
    let y = Axis::series("Data received per interface (MB)");
    let c = canvas(path, title)?;
    let mut ch = categories(&c, &vnames, range(0.0, y1), &y)?;
    // Bars side by side around each variant's position.
    let w = 0.7 / names.len().max(1) as f64;
    let mut keys = Vec::new();
    for (li, name) in names.iter().enumerate() {
        let col = color(li);
        let off = (li as f64 - (names.len() as f64 - 1.0) / 2.0) * w;
        ch.draw_series(rows.iter().enumerate().map(|(vi, (_, v))| {
            let x = vi as f64 + off;
            Rectangle::new([(x - w / 2.0, 0.0), (x + w / 2.0, v[li])], col.filled())
        }))?;
        keys.push(key(Glyph::Bar(col), format!("received over {name}")));
    }
    drop(ch);
    c.finish(&keys)?;
    Ok(Some(Figure {
        file: file_name(path),
        title: title.to_string(),
        caption: format!(
            "Stream bytes received over each interface in the whole run (duplicates \
             included), mean over {} run(s) (seed 000 Fig. 11).",
            r.repetitions
        ),
        x: Axis::series("Variant"),
        y,
        boxes: Vec::new(),
    }))
}
