//! The catalogue of metrics: every key with its name for people, unit, meaning and the
//! experiments that show it (the README's metric table is generated from it), and the keys of
//! per-link and per-application metrics.

/// Whether a metric has one value per event or per run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Per {
    Event,
    Run,
}

/// Which statistic the table shows (`--json` always has all of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    /// median [q1–q3]
    Median,
    /// the mean: for 0/100 indicators, the percentage of events
    Mean,
}

/// A metric: its stable key (used in `--json` and `metrics.show`), its name for people and
/// unit (figure axes, the report's and the README's metric table), meaning, and the shipped
/// experiments that show it (checked against `scenarios/` by a test).
#[derive(Debug, Clone, Copy)]
pub struct MetricDef {
    pub key: &'static str,
    /// Name for people, capitalised, without the unit.
    pub label: &'static str,
    /// Unit, empty for none.
    pub unit: &'static str,
    /// Experiments whose shipped scenario shows the metric ("E3, E4"), empty for none.
    pub experiments: &'static str,
    pub per: Per,
    pub about: &'static str,
    pub shown: Shown,
}

/// Every metric, in table order.
pub const METRICS: &[MetricDef] = &[
    MetricDef {
        key: "delay_increase_ms",
        label: "Delay increase",
        unit: "ms",
        experiments: "E3, E4, E6",
        per: Per::Event,
        about: "max − min application one-way delay of CBR messages generated in the event window; a message never delivered counts with its delay at the end of the run (seed 002)",
        shown: Shown::Median,
    },
    MetricDef {
        key: "max_gap_ms",
        label: "Largest gap between deliveries",
        unit: "ms",
        experiments: "E3, E4, E5, E6, E7, E8, ping-pong",
        per: Per::Event,
        about: "largest interval between consecutive in-order deliveries in the event window (the run after warmup when there are no events; none when the application is done before the warmup ends), never after the application stopped or its file completed",
        shown: Shown::Median,
    },
    MetricDef {
        key: "outage_ms",
        label: "Outage at the handover",
        unit: "ms",
        experiments: "E2, E8",
        per: Per::Event,
        about: "longest interval without new in-order data during the handover: from the event until every byte sent before it is delivered in order (at most `after`) (seed 001)",
        shown: Shown::Median,
    },
    MetricDef {
        key: "reinjection_rate_pct",
        label: "Reinjection rate",
        unit: "%",
        experiments: "E3, E4, E5, E6",
        per: Per::Event,
        about: "reinjected segments / DATA segments sent from the time the lost link last came back to the end of the window (whole run after warmup when there are no events)",
        shown: Shown::Median,
    },
    MetricDef {
        key: "throughput_mbps",
        label: "Throughput",
        unit: "Mbit/s",
        experiments: "E1, E2, E5, E9, E10, E13",
        per: Per::Run,
        about: "in-order bytes delivered to the application per second after warmup, until the application stops or its file completes (none when it is done before the warmup ends)",
        shown: Shown::Median,
    },
    MetricDef {
        key: "delay_ms",
        label: "One-way delay, median",
        unit: "ms",
        experiments: "E3, E4",
        per: Per::Run,
        about: "median application one-way delay (CBR)",
        shown: Shown::Median,
    },
    MetricDef {
        key: "delay_p99_ms",
        label: "One-way delay, 99th percentile",
        unit: "ms",
        experiments: "",
        per: Per::Run,
        about: "99th percentile application one-way delay (CBR)",
        shown: Shown::Median,
    },
    MetricDef {
        key: "reinjections",
        label: "Reinjected segments",
        unit: "segments",
        experiments: "E2, E3, E4, E5, E6",
        per: Per::Run,
        about: "segments reinjected on another path",
        shown: Shown::Median,
    },
    MetricDef {
        key: "duplicate_mb",
        label: "Duplicate data received",
        unit: "MB",
        experiments: "E1",
        per: Per::Run,
        about: "stream bytes received more than once (redundant packets, seed 004)",
        shown: Shown::Median,
    },
    MetricDef {
        key: "duplicated_mb",
        label: "Copies sent on duplicate paths",
        unit: "MB",
        experiments: "E7, E8",
        per: Per::Run,
        about: "stream bytes the sender copied onto paths flagged duplicate, beside what its scheduler sent (the `…-dup` path managers' redundant carrier; only in runs that made copies)",
        shown: Shown::Median,
    },
    MetricDef {
        key: "ofo_peak_kb",
        label: "Reorder buffer, peak",
        unit: "kB",
        experiments: "E1, E7",
        per: Per::Run,
        about: "largest reorder-buffer occupancy at the receiver",
        shown: Shown::Median,
    },
    MetricDef {
        key: "ofo_mean_kb",
        label: "Reorder buffer, mean",
        unit: "kB",
        experiments: "",
        per: Per::Run,
        about: "mean sampled reorder-buffer occupancy after warmup, until the application stops or its file completes",
        shown: Shown::Median,
    },
    MetricDef {
        key: "delay_p99_event_ms",
        label: "One-way delay around the loss, 99th percentile",
        unit: "ms",
        experiments: "E7, E8",
        per: Per::Event,
        about: "99th percentile one-way delay of CBR messages generated in the event window; a message never delivered counts with its delay at the end of the run, so a window without delivery counts at least its length (seed 000 Fig. 9)",
        shown: Shown::Median,
    },
    MetricDef {
        key: "delay_p99_event_bound_ms",
        label: "Least possible delay around the loss, 99th percentile",
        unit: "ms",
        experiments: "E7, E8",
        per: Per::Event,
        about: "99th percentile, over the CBR messages generated in the event window, of a lower bound on each message's one-way delay from the links joining the two hosts: while several are up, its earliest arrival over any of them with empty queues (next delivery opportunity of a trace, serialisation, per-frame airtime, propagation); while one is, behind the stream's earlier messages on it (an in-order stream goes no faster than that link), unless another link came up first; no path manager gets the window's delay_p99_event_ms below it (simulator only)",
        shown: Shown::Median,
    },
    MetricDef {
        key: "delay_p99_event_alone_ms",
        label: "Delay around the loss on the best link alone, 99th percentile",
        unit: "ms",
        experiments: "E7, E8",
        per: Per::Event,
        about: "the least, over the links joining the two hosts, of the 99th percentile delay the event window's CBR messages would have had on that link alone: the stream by itself on a copy of the link (its capacity over time, trace gaps included, and propagation delay; no loss or other traffic) from the start of the run, messages generated while it is down sent when it returns; at most the target means one link could have carried the stream in that window (simulator only)",
        shown: Shown::Median,
    },
    MetricDef {
        key: "flips",
        label: "Backup/active changes",
        unit: "changes",
        experiments: "E7, E8, E9, ping-pong",
        per: Per::Event,
        about: "backup/active changes the path manager made on the lost link in the event window (ping-pong)",
        shown: Shown::Mean,
    },
    MetricDef {
        key: "acted_before_break_pct",
        label: "Demoted before the link broke",
        unit: "%",
        experiments: "E7, E8, ping-pong",
        per: Per::Event,
        about: "100 when the path manager had demoted the link (backup or removed) when it broke, else 0; the table shows the percentage of events",
        shown: Shown::Mean,
    },
    MetricDef {
        key: "lead_ms",
        label: "Demoted ahead of the break by",
        unit: "ms",
        experiments: "E7, ping-pong",
        per: Per::Event,
        about: "how long before the break the path manager demoted the link (events where it did)",
        shown: Shown::Median,
    },
    MetricDef {
        key: "recovery_ms",
        label: "Time to use the recovered path",
        unit: "ms",
        experiments: "E9, E10, ping-pong",
        per: Per::Event,
        about: "from the link's smoothed signal rising above its threshold (plus hysteresis) to the first data received over it, or to the signal falling below the threshold again (seed 000 §V.C)",
        shown: Shown::Median,
    },
    MetricDef {
        key: "delivered_mb",
        label: "Data delivered",
        unit: "MB",
        experiments: "E10, E13",
        per: Per::Run,
        about: "in-order bytes delivered to the application over the whole run (seed 000 Fig. 11)",
        shown: Shown::Median,
    },
    MetricDef {
        key: "event_windows",
        label: "Loss-event windows measured",
        unit: "windows",
        experiments: "",
        per: Per::Run,
        about: "loss events measured (their window lies after the warmup and within the run): an event metric has at most this many values per run",
        shown: Shown::Median,
    },
    MetricDef {
        key: "windows_undelivered",
        label: "Windows with a message never delivered",
        unit: "windows",
        experiments: "",
        per: Per::Run,
        about: "of the event windows, those with CBR messages generated in them and never delivered (counted in the delay metrics at the delay they had when the run ended)",
        shown: Shown::Median,
    },
    MetricDef {
        key: "completion_s",
        label: "Transfer time",
        unit: "s",
        experiments: "E11, E12, E13, E14",
        per: Per::Run,
        about: "file transfer time from the application start",
        shown: Shown::Median,
    },
    MetricDef {
        key: "transfer_mbps",
        label: "Transfer throughput",
        unit: "Mbit/s",
        experiments: "E11, E12",
        per: Per::Run,
        about: "a file's bytes over its transfer time from the application start (seed 003's iperf figure); a transfer that did not complete: bytes delivered until the run ended",
        shown: Shown::Median,
    },
    MetricDef {
        key: "redundant_packets",
        label: "Redundant packets received",
        unit: "packets",
        experiments: "E13, E14",
        per: Per::Run,
        about: "data packets the receiver got whose payload it already had (seed 004 Fig. 14/18; counted in topologies)",
        shown: Shown::Median,
    },
    MetricDef {
        key: "redundant_per_mb",
        label: "Redundant packets per MB delivered",
        unit: "packets/MB",
        experiments: "E13",
        per: Per::Run,
        about: "redundant packets per MB delivered (a long transfer's count, comparable with a file's)",
        shown: Shown::Median,
    },
];

/// Metrics of every further application (`[[flow]]`), as `flow.<name>.<metric>`.
pub const FLOW_METRICS: &[&str] = &[
    "completion_s",
    "throughput_mbps",
    "delivered_mb",
    "redundant_packets",
    "redundant_per_mb",
];

/// Metrics whose key names a link or an application: the key pattern, name, unit, meaning and
/// the experiments that show them.
pub const PATTERNS: &[(&str, &str, &str, &str, &str)] = &[
    (
        "link.<name>.throughput_mbps",
        "Throughput over the link (its name)",
        "Mbit/s",
        "stream bytes received over the link per second after the warmup, duplicates included",
        "E1, E2",
    ),
    (
        "link.<name>.mb",
        "Data received over the link (its name)",
        "MB",
        "stream bytes received over the link in the whole run, duplicates included (seed 000 Fig. 11)",
        "E7, E8, E9, E10",
    ),
    (
        "flow.<name>.<metric>",
        "The metric's name, the application's",
        "the metric's",
        "a metric of the further application `<name>` (`[[flow]]`): one of completion_s, throughput_mbps, delivered_mb, redundant_packets, redundant_per_mb",
        "E13",
    ),
];

/// A metric's name for people and its unit, for figure axes: `throughput_mbps` is
/// ("Throughput", "Mbit/s"); per-link and per-flow keys name their link or application. An
/// unknown key is returned as it is, without a unit.
pub fn label(key: &str) -> (String, &'static str) {
    if let Some(rest) = key.strip_prefix("link.") {
        if let Some(n) = rest.strip_suffix(".throughput_mbps") {
            return (format!("Throughput over {n}"), "Mbit/s");
        }
        if let Some(n) = rest.strip_suffix(".mb") {
            return (format!("Data received over {n}"), "MB");
        }
    }
    if let Some(rest) = key.strip_prefix("flow.")
        && let Some((name, m)) = rest.rsplit_once('.')
    {
        let (l, u) = label(m);
        return (format!("{l}, {name}"), u);
    }
    match METRICS.iter().find(|m| m.key == key) {
        Some(m) => (m.label.to_string(), m.unit),
        None => (key.to_string(), ""),
    }
}

/// What a metric means (the metric table's definition; per-link and per-flow keys get their
/// pattern's), `None` for an unknown key.
pub fn about(key: &str) -> Option<&'static str> {
    if let Some(m) = METRICS.iter().find(|m| m.key == key) {
        return Some(m.about);
    }
    let pattern = if key.starts_with("link.") && key.ends_with(".throughput_mbps") {
        "link.<name>.throughput_mbps"
    } else if key.starts_with("link.") && key.ends_with(".mb") {
        "link.<name>.mb"
    } else if key.starts_with("flow.") {
        "flow.<name>.<metric>"
    } else {
        return None;
    };
    PATTERNS.iter().find(|p| p.0 == pattern).map(|p| p.3)
}

/// "Name (unit)" of a metric, for an axis or a table header.
pub fn axis_label(key: &str) -> String {
    match label(key) {
        (l, "") => l,
        (l, u) => format!("{l} ({u})"),
    }
}

/// The table of metric definitions in Markdown (the README's "Metrics" table): name, key,
/// unit, definition, the experiments that show it.
pub fn markdown_table() -> String {
    let mut out = String::from(
        "| metric | key | unit | per | definition | shown by |\n|---|---|---|---|---|---|\n",
    );
    let cell = |s: &str| s.replace('|', "\\|");
    for m in METRICS {
        let per = match m.per {
            Per::Event => "loss event",
            Per::Run => "run",
        };
        out.push_str(&format!(
            "| {} | `{}` | {} | {per} | {} | {} |\n",
            m.label,
            m.key,
            if m.unit.is_empty() { "—" } else { m.unit },
            cell(m.about),
            if m.experiments.is_empty() {
                "—"
            } else {
                m.experiments
            },
        ));
    }
    for (key, name, unit, about, exps) in PATTERNS {
        out.push_str(&format!(
            "| {name} | `{key}` | {unit} | run | {} | {exps} |\n",
            cell(about)
        ));
    }
    out
}

/// The key of a further application's metric.
pub fn flow_key(name: &str, metric: &str) -> String {
    format!("flow.{name}.{metric}")
}

/// Per-link throughput keys are `link.<name>.throughput_mbps`.
pub fn link_key(name: &str) -> String {
    format!("link.{name}.throughput_mbps")
}

/// Per-link volume keys are `link.<name>.mb`: stream bytes received over the link in the
/// whole run, duplicates included (seed 000 Fig. 11).
pub fn link_mb_key(name: &str) -> String {
    format!("link.{name}.mb")
}
