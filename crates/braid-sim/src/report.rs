//! Output of `braid sim`: a table (variants × metrics, median [q1–q3]) with the seed paper's
//! published numbers beside ours, stable JSON, and per-run CSV time series.
//!
//! JSON keys (stable; scripts may rely on them):
//! ```text
//! { "scenario", "file", "description", "seed", "repetitions", "duration_s",
//!   "paper": { "source", "note", "values": { variant: { metric: number } } } | null,
//!   "variants": [ { "name", "settings": { key: value },
//!                   "metrics": { metric: { "median", "q1", "q3", "min", "max", "mean", "n",
//!                                          "windows" (event metrics) } },
//!                   "runs": [ { "seed", "events", "metrics": { metric: [values] } } ] } ] }
//! ```
//! Metric keys are those of [`crate::metrics::METRICS`] plus `link.<name>.throughput_mbps` and
//! `link.<name>.mb`. `n` is the number of values a statistic used; for an event metric
//! `windows` is the number of event windows measured over the variant's runs, so `n < windows`
//! shows windows the metric did not apply to.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use serde_json::{Value, json};

use crate::metrics::{METRICS, Per};
use crate::runner::{PlanResult, Summary};

/// Metric columns of the table: those asked for, else every measured one in a fixed order.
fn columns(r: &PlanResult) -> Vec<String> {
    if !r.show.is_empty() {
        return r.show.clone();
    }
    let has = |k: &str| r.variants.iter().any(|v| v.summary.contains_key(k));
    let mut cols: Vec<String> = METRICS
        .iter()
        .map(|m| m.key.to_string())
        .filter(|k| has(k))
        .collect();
    let mut links: Vec<String> = r
        .variants
        .iter()
        .flat_map(|v| v.summary.keys())
        .filter(|k| k.starts_with("link."))
        .cloned()
        .collect();
    links.sort();
    links.dedup();
    cols.extend(links);
    cols
}

fn fmt_num(x: f64) -> String {
    if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

fn cell(key: &str, s: Option<&Summary>) -> String {
    let mean = METRICS
        .iter()
        .any(|m| m.key == key && m.shown == crate::metrics::Shown::Mean);
    match s {
        None => "-".into(),
        Some(s) if mean => format!("{} (n={})", fmt_num(s.mean), s.n),
        Some(s) if s.n == 1 => fmt_num(s.median),
        Some(s) => format!(
            "{} [{}–{}]",
            fmt_num(s.median),
            fmt_num(s.q1),
            fmt_num(s.q3)
        ),
    }
}

/// The human-readable table.
pub fn table(r: &PlanResult) -> String {
    let cols = columns(r);
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut header = vec!["variant".to_string()];
    header.extend(cols.iter().cloned());
    rows.push(header);
    for v in &r.variants {
        let mut row = vec![v.name.clone()];
        row.extend(cols.iter().map(|c| cell(c, v.summary.get(c))));
        rows.push(row);
    }
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| {
            rows.iter()
                .map(|row| row[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    let _ = writeln!(out, "{} — {}", r.scenario, r.description);
    for (i, row) in rows.iter().enumerate() {
        let line: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(c, s)| {
                let pad = widths[c] - s.chars().count();
                if c == 0 {
                    format!("{s}{}", " ".repeat(pad))
                } else {
                    format!("{}{s}", " ".repeat(pad))
                }
            })
            .collect();
        let _ = writeln!(out, "{}", line.join("  "));
        if i == 0 {
            let total: usize = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
            let _ = writeln!(out, "{}", "-".repeat(total));
        }
    }
    let _ = writeln!(
        out,
        "median [q1–q3] (n=: mean over n values) over {} run(s) per variant (seeds {}..{}), event metrics pooled over loss events; {:.0} s simulated per run, {:.1} s wall",
        r.repetitions,
        r.seed,
        r.seed + u64::from(r.repetitions) - 1,
        r.duration.as_secs_f64(),
        r.wall.as_secs_f64()
    );
    if let Some(p) = &r.paper {
        let mut parts = Vec::new();
        for (variant, metrics) in &p.values {
            for (m, v) in metrics {
                parts.push(format!("{variant} {m} {}", fmt_num(*v)));
            }
        }
        let _ = write!(out, "paper ({}):", p.source);
        if !parts.is_empty() {
            let _ = write!(out, " {}", parts.join(", "));
        }
        if !p.note.is_empty() {
            let _ = write!(out, " — {}", p.note);
        }
        let _ = writeln!(out);
    }
    out
}

fn summary_json(s: &Summary) -> Value {
    json!({
        "median": s.median, "q1": s.q1, "q3": s.q3, "min": s.min, "max": s.max, "mean": s.mean,
        "n": s.n,
    })
}

/// The JSON document (keys documented at the top of this module).
pub fn json(r: &PlanResult) -> Value {
    let variants: Vec<Value> = r
        .variants
        .iter()
        .map(|v| {
            let windows: f64 = v
                .runs
                .iter()
                .filter_map(|run| run.metrics.get("event_windows")?.first())
                .sum();
            let metrics: serde_json::Map<String, Value> = v
                .summary
                .iter()
                .map(|(k, s)| {
                    let mut j = summary_json(s);
                    let event = METRICS.iter().any(|m| m.key == k && m.per == Per::Event);
                    if event {
                        j["windows"] = json!(windows as u64);
                    }
                    (k.clone(), j)
                })
                .collect();
            let runs: Vec<Value> = v
                .runs
                .iter()
                .map(
                    |run| json!({ "seed": run.seed, "events": run.events, "metrics": run.metrics }),
                )
                .collect();
            json!({ "name": v.name, "settings": v.settings, "metrics": metrics, "runs": runs })
        })
        .collect();
    json!({
        "scenario": r.scenario,
        "file": r.file,
        "description": r.description,
        "seed": r.seed,
        "repetitions": r.repetitions,
        "duration_s": r.duration.as_secs_f64(),
        "paper": r.paper.as_ref().map(|p| json!({
            "source": p.source, "note": p.note, "values": p.values,
        })),
        "variants": variants,
    })
}

/// Writes per-run CSV time series and a summary under `dir`:
/// `dir/summary.json`, `dir/<variant>/seed<N>/{timeseries,deliveries,cbr}.csv`.
pub fn write_runs(r: &PlanResult, dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(
        dir.join("summary.json"),
        serde_json::to_string_pretty(&json(r)).expect("JSON of plain data"),
    )?;
    for v in &r.variants {
        for run in &v.runs {
            let Some(rec) = &run.record else { continue };
            let d = dir
                .join(sanitize(&v.name))
                .join(format!("seed{}", run.seed));
            std::fs::create_dir_all(&d)?;
            let mut f = std::io::BufWriter::new(std::fs::File::create(d.join("timeseries.csv"))?);
            write!(f, "t_s,throughput_mbps")?;
            for n in &rec.link_names {
                write!(f, ",{n}_rx_mbps,{n}_cwnd_kb,{n}_srtt_ms")?;
            }
            writeln!(f, ",ofo_kb,reinjected,data_packets")?;
            for w in rec.samples.windows(2) {
                let (a, b) = (&w[0], &w[1]);
                let dt = (b.t - a.t).as_secs_f64().max(1e-9);
                write!(
                    f,
                    "{:.3},{:.3}",
                    b.t.as_secs_f64(),
                    (b.delivered - a.delivered) as f64 * 8.0 / dt / 1e6
                )?;
                for i in 0..rec.link_names.len() {
                    write!(
                        f,
                        ",{:.3},{:.1},{:.2}",
                        (b.link_rx[i] - a.link_rx[i]) as f64 * 8.0 / dt / 1e6,
                        b.link_cwnd[i] as f64 / 1e3,
                        b.link_srtt_us[i] as f64 / 1e3
                    )?;
                }
                writeln!(
                    f,
                    ",{:.1},{},{}",
                    b.ofo_bytes as f64 / 1e3,
                    b.reinjected,
                    b.data_packets
                )?;
            }
            f.flush()?;
            let mut f = std::io::BufWriter::new(std::fs::File::create(d.join("deliveries.csv"))?);
            writeln!(f, "t_s,bytes")?;
            for (t, b) in &rec.deliveries {
                writeln!(f, "{:.6},{b}", *t as f64 / 1e6)?;
            }
            f.flush()?;
            if !rec.cbr.is_empty() {
                let mut f = std::io::BufWriter::new(std::fs::File::create(d.join("cbr.csv"))?);
                writeln!(f, "sent_s,delay_ms")?;
                for (g, dl) in &rec.cbr {
                    writeln!(f, "{:.6},{:.3}", *g as f64 / 1e6, f64::from(*dl) / 1e3)?;
                }
                f.flush()?;
            }
            std::fs::write(
                d.join("metrics.json"),
                serde_json::to_string_pretty(&run.metrics).expect("JSON of plain data"),
            )?;
        }
    }
    Ok(())
}

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}
