//! Figures across variants: per-variant bars (median, q1–q3) with the paper's numbers, box
//! plots over the repetitions, bytes per interface, and a metric against a swept setting (seed
//! 004 Figs. 20–24: transfer time against the receive buffer).

use std::path::Path;

use plotters::prelude::*;

use super::{Res, area, color, range};
use crate::metrics;
use crate::runner::{PlanResult, Summary};

/// "Label (unit)" of a metric, for an axis.
pub(super) fn axis(key: &str) -> String {
    match metrics::label(key) {
        (l, "") => l,
        (l, u) => format!("{l} ({u})"),
    }
}

/// Median bars with q1–q3 whiskers per variant; the paper's value as a red mark.
pub(super) fn bars(r: &PlanResult, key: &str, path: &Path, title: &str) -> Res {
    let rows: Vec<(&str, Option<&Summary>, Option<f64>)> = r
        .variants
        .iter()
        .map(|v| {
            let paper = r
                .paper
                .as_ref()
                .and_then(|p| p.values.get(&v.name))
                .and_then(|m| m.get(key))
                .copied();
            (v.name.as_str(), v.summary.get(key), paper)
        })
        .collect();
    let hi = rows
        .iter()
        .flat_map(|(_, s, p)| [s.map(|s| s.q3), *p])
        .flatten()
        .fold(0.0, f64::max);
    let n = rows.len();
    let root = area(path)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5..n as f64 - 0.5, range(0.0, hi * 1.1))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n.max(2))
        .x_desc("variant")
        .y_desc(axis(key))
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() > 1e-6 || i < 0.0 {
                return String::new();
            }
            rows.get(i as usize)
                .map(|r| r.0.to_string())
                .unwrap_or_default()
        })
        .draw()?;
    for (i, (_, s, _)) in rows.iter().enumerate() {
        let Some(s) = s else { continue };
        let x = i as f64;
        chart.draw_series(std::iter::once(Rectangle::new(
            [(x - 0.3, 0.0), (x + 0.3, s.median)],
            color(i).mix(0.7).filled(),
        )))?;
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(x, s.q1), (x, s.q3)],
            BLACK.stroke_width(2),
        )))?;
        for y in [s.q1, s.q3] {
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(x - 0.08, y), (x + 0.08, y)],
                BLACK.stroke_width(2),
            )))?;
        }
    }
    let red = RGBColor(214, 39, 40);
    let marks: Vec<(f64, f64)> = rows
        .iter()
        .enumerate()
        .filter_map(|(i, (_, _, p))| p.map(|p| (i as f64, p)))
        .collect();
    if !marks.is_empty() {
        chart
            .draw_series(
                marks
                    .iter()
                    .map(|&(x, y)| Cross::new((x + 0.2, y), 6, red.stroke_width(2))),
            )?
            .label("paper")
            .legend(move |(x, y)| Cross::new((x + 5, y), 5, red.stroke_width(2)));
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()?;
    }
    root.present()?;
    Ok(())
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
/// on a logarithmic axis when the values span more than a decade.
pub(super) fn sweep(
    r: &PlanResult,
    setting: &str,
    points: &[(String, f64)],
    key: &str,
    path: &Path,
    title: &str,
) -> Res {
    let mut bases: Vec<&str> = Vec::new();
    for (b, _) in points {
        if !bases.contains(&b.as_str()) {
            bases.push(b);
        }
    }
    let series: Vec<Vec<(f64, Summary)>> = bases
        .iter()
        .map(|b| {
            let mut s: Vec<(f64, Summary)> = r
                .variants
                .iter()
                .zip(points)
                .filter(|(_, (pb, _))| pb == b)
                .filter_map(|(v, (_, x))| v.summary.get(key).map(|s| (*x, *s)))
                .collect();
            s.sort_by(|a, b| a.0.total_cmp(&b.0));
            s
        })
        .collect();
    let all = series.iter().flatten();
    let (x0, x1) = all.clone().fold((f64::MAX, f64::MIN), |(a, b), (x, _)| {
        (a.min(*x), b.max(*x))
    });
    let y1 = all.map(|(_, s)| s.q3).fold(0.0, f64::max) * 1.1;
    let xlabel = sweep_label(setting);
    let root = area(path)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((x0 * 0.9..x1 * 1.1).log_scale(), range(0.0, y1))?;
    chart
        .configure_mesh()
        .x_desc(xlabel.0)
        .y_desc(axis(key))
        .x_label_formatter(&|x| format_x(*x, xlabel.1))
        .draw()?;
    for (i, (b, s)) in bases.iter().zip(&series).enumerate() {
        let c = color(i);
        let name = if b.is_empty() {
            key.to_string()
        } else {
            b.to_string()
        };
        chart
            .draw_series(LineSeries::new(
                s.iter().map(|(x, s)| (*x, s.median)),
                c.stroke_width(2),
            ))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], c.stroke_width(2)));
        chart.draw_series(s.iter().map(|(x, s)| {
            PathElement::new(vec![(*x, s.q1), (*x, s.q3)], c.mix(0.6).stroke_width(1))
        }))?;
        chart.draw_series(
            s.iter()
                .map(|(x, s)| Circle::new((*x, s.median), 3, c.filled())),
        )?;
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

pub(super) fn boxplot(values: &[(String, Vec<f64>)], key: &str, path: &Path, title: &str) -> Res {
    let (lo, hi) = values
        .iter()
        .flat_map(|(_, v)| v.iter())
        .fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(*x), hi.max(*x)));
    let pad = ((hi - lo) * 0.05).max(1e-3);
    let (y0, y1) = (lo - pad, hi + pad);
    let n = values.len() as u32;
    let root = area(path)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((0..n).into_segmented(), y0 as f32..y1 as f32)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_desc("variant")
        .y_desc(axis(key))
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => values
                .get(*i as usize)
                .map(|(n, _)| n.clone())
                .unwrap_or_default(),
            SegmentValue::Last => String::new(),
        })
        .draw()?;
    for (i, (_, v)) in values.iter().enumerate() {
        if v.is_empty() {
            continue;
        }
        let q = Quartiles::new(v);
        chart.draw_series(std::iter::once(
            Boxplot::new_vertical(SegmentValue::CenterOf(i as u32), &q)
                .width(30)
                .style(color(i).stroke_width(2)),
        ))?;
    }
    root.present()?;
    Ok(())
}

pub(super) fn bytes(r: &PlanResult, names: &[String], path: &Path, title: &str) -> Res {
    // Mean MB per link and variant.
    let mb: Vec<Vec<f64>> = r
        .variants
        .iter()
        .map(|v| {
            names
                .iter()
                .map(|n| {
                    v.summary
                        .get(&format!("link.{n}.mb"))
                        .map(|s| s.mean)
                        .unwrap_or(0.0)
                })
                .collect()
        })
        .collect();
    let y1 = mb.iter().flatten().copied().fold(1.0, f64::max) * 1.1;
    let nv = r.variants.len();
    let root = area(path)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5..nv as f64 - 0.5, range(0.0, y1))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(nv.max(2))
        .x_desc("variant")
        .y_desc("Data received (MB)")
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() > 1e-6 || i < 0.0 {
                return String::new();
            }
            r.variants
                .get(i as usize)
                .map(|v| v.name.clone())
                .unwrap_or_default()
        })
        .draw()?;
    // Bars side by side around each variant's position.
    let w = 0.7 / names.len().max(1) as f64;
    for (li, name) in names.iter().enumerate() {
        let c = color(li);
        let off = (li as f64 - (names.len() as f64 - 1.0) / 2.0) * w;
        chart
            .draw_series(mb.iter().enumerate().map(|(vi, v)| {
                let x = vi as f64 + off;
                Rectangle::new([(x - w / 2.0, 0.0), (x + w / 2.0, v[li])], c.filled())
            }))?
            .label(name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], c.filled()));
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
