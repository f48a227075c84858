//! The metric table: the README carries it as the code defines it, and its "shown by" column
//! says which shipped scenarios show each metric.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use braid_sim::metrics::{METRICS, PATTERNS, markdown_table};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The experiment a shipped scenario file reproduces: `e13-manet-…` is E13, `pingpong` ping-pong.
fn experiment(file: &str) -> String {
    let stem = file.trim_end_matches(".toml");
    match stem.split('-').next() {
        Some(e) if e.starts_with('e') && e[1..].chars().all(|c| c.is_ascii_digit()) => {
            format!("E{}", &e[1..])
        }
        _ => "ping-pong".into(),
    }
}

/// "E3, E4, ping-pong": experiments in number order, ping-pong last.
fn list(exps: &BTreeSet<String>) -> String {
    let mut v: Vec<&String> = exps.iter().collect();
    v.sort_by_key(|e| {
        e.strip_prefix('E')
            .and_then(|n| n.parse::<u32>().ok())
            .unwrap_or(u32::MAX)
    });
    v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
}

#[test]
fn the_shown_by_column_matches_the_shipped_scenarios() {
    let mut shown: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for entry in std::fs::read_dir(root().join("scenarios")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.ends_with(".toml") {
            continue;
        }
        let doc: toml::Table = toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let keys = doc
            .get("metrics")
            .and_then(|m| m.get("show"))
            .and_then(|s| s.as_array())
            .cloned()
            .unwrap_or_default();
        for k in keys {
            let k = k.as_str().unwrap();
            let row = if k.starts_with("link.") && k.ends_with(".throughput_mbps") {
                "link.<name>.throughput_mbps".to_string()
            } else if k.starts_with("link.") && k.ends_with(".mb") {
                "link.<name>.mb".to_string()
            } else if let Some(rest) = k.strip_prefix("flow.") {
                // A flow's metric is shown under its pattern and its own metric.
                let metric = rest.rsplit('.').next().unwrap();
                shown
                    .entry(metric.to_string())
                    .or_default()
                    .insert(experiment(&name));
                "flow.<name>.<metric>".to_string()
            } else {
                k.to_string()
            };
            shown.entry(row).or_default().insert(experiment(&name));
        }
    }
    let none = BTreeSet::new();
    for m in METRICS {
        assert_eq!(
            m.experiments,
            list(shown.get(m.key).unwrap_or(&none)),
            "{}: the experiments whose scenario shows it",
            m.key
        );
    }
    for p in PATTERNS {
        assert_eq!(p.4, list(shown.get(p.0).unwrap_or(&none)), "{}", p.0);
    }
    // Every shown key has a row.
    for k in shown.keys() {
        assert!(
            METRICS.iter().any(|m| m.key == k) || PATTERNS.iter().any(|p| p.0 == k),
            "{k} is shown by a scenario but has no row"
        );
    }
}

#[test]
fn the_readme_carries_the_metric_table() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let table = markdown_table();
    assert!(
        readme.contains(&table),
        "README.md's metric table differs from the code's; it should read:\n\n{table}"
    );
}

#[test]
fn every_metric_has_a_name_and_a_unit_or_none() {
    for m in METRICS {
        assert!(
            !m.label.is_empty() && m.label.chars().next().unwrap().is_uppercase(),
            "{}",
            m.key
        );
        assert!(!m.label.contains('_'), "{}: a raw key as its name", m.key);
        assert_ne!(braid_sim::metrics::axis_label(m.key), m.key);
    }
}
