//! Output of `braid sim`: a table (variants × metrics, median [q1–q3]) with the seed paper's
//! published numbers beside ours, stable JSON, and per-run CSV time series.
//!
//! JSON keys (stable; scripts may rely on them):
//! ```text
//! { "scenario", "file", "description", "seed", "repetitions", "duration_s",
//!   "paper": { "source", "note", "values": { variant: { metric: number } } } | null,
//!   "variants": [ { "name", "settings": { key: value },
//!                   "metrics": { metric: { "median", "q1", "q3", "min", "max", "mean", "std", "n",
//!                                          "windows" (event metrics) } },
//!                   "runs": [ { "seed", "events", "metrics": { metric: [values] } } ] } ] }
//! ```
//! Metric keys are those of [`crate::metrics::METRICS`] plus `link.<name>.throughput_mbps` and
//! `link.<name>.mb`. `n` is the number of values a statistic used; for an event metric
//! `windows` is the number of event windows measured over the variant's runs, so `n < windows`
//! shows windows the metric did not apply to.

use std::fmt::Write as _;
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

/// One row of the results table: a variant's cells, or the seed paper's numbers under it.
struct Row {
    name: String,
    cells: Vec<String>,
    paper: bool,
}

/// The results table's columns and rows (shared by the text and the HTML table).
fn rows(r: &PlanResult) -> (Vec<String>, Vec<Row>) {
    let cols = columns(r);
    let paper = |variant: &str, metric: &str| {
        r.paper
            .as_ref()
            .and_then(|p| p.values.get(variant))
            .and_then(|m| m.get(metric))
            .copied()
    };
    let mut rows = Vec::new();
    for v in &r.variants {
        rows.push(Row {
            name: v.name.clone(),
            cells: cols.iter().map(|c| cell(c, v.summary.get(c))).collect(),
            paper: false,
        });
        // The seed paper's numbers right below ours.
        if cols.iter().any(|c| paper(&v.name, c).is_some()) {
            rows.push(Row {
                name: "paper".into(),
                cells: cols
                    .iter()
                    .map(|c| paper(&v.name, c).map_or_else(String::new, fmt_num))
                    .collect(),
                paper: true,
            });
        }
    }
    (cols, rows)
}

/// The statistics line under the table.
fn footnote(r: &PlanResult) -> String {
    format!(
        "median [q1–q3] (n=: mean over n values) over {} run(s) per variant (seeds {}..{}), event metrics pooled over loss events; {:.0} s of scenario time per run, {:.1} s wall",
        r.repetitions,
        r.seed,
        r.seed + u64::from(r.repetitions) - 1,
        r.duration.as_secs_f64(),
        r.wall.as_secs_f64()
    )
}

/// The published numbers that have no cell in the table, and the paper's note.
fn paper_line(r: &PlanResult, cols: &[String]) -> Option<String> {
    let p = r.paper.as_ref()?;
    let mut parts = Vec::new();
    for (variant, metrics) in &p.values {
        let shown = r.variants.iter().any(|v| v.name == *variant);
        for (m, v) in metrics {
            if !(shown && cols.contains(m)) {
                parts.push(format!("{variant} {m} {}", fmt_num(*v)));
            }
        }
    }
    let mut out = format!("paper ({}):", p.source);
    if !parts.is_empty() {
        let _ = write!(out, " {}", parts.join(", "));
    }
    if !p.note.is_empty() {
        let sep = if parts.is_empty() { " " } else { " — " };
        let _ = write!(out, "{sep}{}", p.note);
    }
    Some(out)
}

/// `s` with HTML's special characters escaped.
pub(crate) fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The results table as an HTML `<table>`: a column per metric, headed by its name and unit
/// (the key in the header's tooltip), a row per variant and the paper's numbers under it.
pub fn html_table(r: &PlanResult) -> String {
    let (cols, rows) = rows(r);
    let mut h = String::from("<table>\n<thead><tr><th>variant</th>");
    for c in &cols {
        let _ = write!(
            h,
            "<th title=\"{}\">{}</th>",
            html_escape(c),
            html_escape(&crate::metrics::axis_label(c))
        );
    }
    h.push_str("</tr></thead>\n<tbody>\n");
    for row in &rows {
        let _ = write!(
            h,
            "<tr{}><td>{}</td>",
            if row.paper { " class=\"paper\"" } else { "" },
            html_escape(&row.name)
        );
        for c in &row.cells {
            let _ = write!(h, "<td class=\"n\">{}</td>", html_escape(c));
        }
        h.push_str("</tr>\n");
    }
    let _ = write!(h, "</tbody>\n<caption>{}", html_escape(&footnote(r)));
    if let Some(p) = paper_line(r, &cols) {
        let _ = write!(h, "<br>{}", html_escape(&p));
    }
    h.push_str("</caption>\n</table>\n");
    h
}

/// The metric table's rows for the metrics in the results table, as HTML.
pub fn html_metrics(r: &PlanResult) -> String {
    let (cols, _) = rows(r);
    let mut h = String::from(
        "<table>\n<thead><tr><th>metric</th><th>key</th><th>unit</th><th>definition</th></tr></thead>\n<tbody>\n",
    );
    for c in &cols {
        let (label, unit) = crate::metrics::label(c);
        let about = crate::metrics::about(c).unwrap_or("");
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
            html_escape(&label),
            html_escape(c),
            html_escape(if unit.is_empty() { "—" } else { unit }),
            html_escape(about)
        );
    }
    h.push_str("</tbody>\n</table>\n");
    h
}

/// The human-readable table.
pub fn table(r: &PlanResult) -> String {
    let (cols, body) = rows(r);
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut header = vec!["variant".to_string()];
    header.extend(cols.iter().cloned());
    rows.push(header);
    for row in body {
        let name = if row.paper {
            "  paper".to_string()
        } else {
            row.name
        };
        let mut line = vec![name];
        line.extend(row.cells);
        rows.push(line);
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
    let _ = writeln!(out, "{}", footnote(r));
    if let Some(p) = paper_line(r, &cols) {
        let _ = writeln!(out, "{p}");
    }
    out
}

fn summary_json(s: &Summary) -> Value {
    json!({
        "median": s.median, "q1": s.q1, "q3": s.q3, "min": s.min, "max": s.max, "mean": s.mean,
        "std": s.std,
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
            for table in crate::series::tables(rec) {
                let file = std::fs::File::create(d.join(format!("{}.csv", table.name)))?;
                table.write_csv(std::io::BufWriter::new(file))?;
            }
            std::fs::write(
                d.join("metrics.json"),
                serde_json::to_string_pretty(&run.metrics).expect("JSON of plain data"),
            )?;
        }
    }
    Ok(())
}

/// A name safe in a file name (letters, digits, `-`, `_`, `.`; anything else `_`).
pub(crate) fn sanitize(name: &str) -> String {
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
