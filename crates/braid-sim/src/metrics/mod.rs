//! Metrics of a run (SPEC "Metrics"), computed from its [`RunRecord`].
//!
//! Event metrics give one value per connection-loss event of the scenario (a link blocked or an
//! address lost), measured in the window [t − before, t + after] (starting no earlier than the
//! application); across repetitions their values are pooled. Run metrics give one value per run.
//!
//! No window is dropped for being bad: a CBR message generated in a window and never delivered
//! counts with the delay it had when the run ended (a lower bound), so a window in which nothing
//! was delivered counts at least its whole length. `event_windows` says how many windows a run
//! measured, so an event metric with fewer values (its `n`) shows the windows it did not apply to.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::record::{FlowRecord, RunRecord, Sample};
use crate::units::Dur;

mod catalogue;
pub use catalogue::*;

/// `[metrics]` of a scenario: event windows, sampling, warmup, the table's columns.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsSpec {
    /// Window around each loss event: this long before ...
    pub before: Dur,
    /// ... and this long after.
    pub after: Dur,
    /// Time-series sampling interval.
    pub sample: Dur,
    /// Ignored at the start for throughput and whole-run gaps.
    pub warmup: Dur,
    /// Metrics shown in the table (all measured ones if empty).
    pub show: Vec<String>,
}

impl Default for MetricsSpec {
    fn default() -> Self {
        MetricsSpec {
            before: Dur(Duration::from_millis(500)),
            after: Dur(Duration::from_secs(2)),
            sample: Dur(Duration::from_millis(100)),
            warmup: Dur(Duration::from_secs(2)),
            show: Vec::new(),
        }
    }
}

/// Computes every metric that applies to the run.
pub fn compute(r: &RunRecord, m: &MetricsSpec) -> BTreeMap<String, Vec<f64>> {
    let mut out: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let warm = r.app_start.max(m.warmup.0);
    let us = |d: Duration| d.as_micros() as u64;
    let end = r.duration;
    // Until the application is done, if it is (a 180 s iperf in a longer run, a file that
    // completed): the time after it is neither throughput's time nor a gap.
    let until = r
        .flows
        .first()
        .and_then(finished_at)
        .map_or(end, |s| s.min(end));
    // An application done before the warmup ended (a file shorter than the warmup) leaves no
    // time to measure throughput or a whole-run gap over: those are left out, not zero.
    let measured = until > warm;
    let span = until.saturating_sub(warm).as_secs_f64();

    // Throughput.
    let delivered: u64 = r
        .deliveries
        .iter()
        .filter(|(t, _)| *t >= us(warm))
        .map(|&(_, b)| u64::from(b))
        .sum();
    if measured {
        out.insert(
            "throughput_mbps".into(),
            vec![delivered as f64 * 8.0 / span / 1e6],
        );
    }
    if let (true, Some(first), Some(last)) = (measured, sample_at(r, warm), r.samples.last()) {
        for (i, name) in r.link_names.iter().enumerate() {
            let b = last.link_rx[i].saturating_sub(first.link_rx[i]);
            out.insert(link_key(name), vec![b as f64 * 8.0 / span / 1e6]);
        }
    }
    for (i, name) in r.link_names.iter().enumerate() {
        if let Some(b) = r.link_bytes.get(i) {
            out.insert(link_mb_key(name), vec![*b as f64 / 1e6]);
        }
    }
    let total: u64 = r.deliveries.iter().map(|&(_, b)| u64::from(b)).sum();
    out.insert("delivered_mb".into(), vec![total as f64 / 1e6]);
    for rc in r.recoveries.iter().filter(|rc| rc.t >= warm && rc.t < end) {
        // Not used before the signal fell again (or the run ended): the whole chance was missed.
        let until = rc.first_data.or(rc.lost).unwrap_or(end).min(end);
        let v = until.saturating_sub(rc.t).as_secs_f64() * 1e3;
        out.entry("recovery_ms".into()).or_default().push(v);
    }

    // Delays (CBR).
    if !r.cbr.is_empty() {
        let mut d: Vec<f64> = r
            .cbr
            .iter()
            .filter(|(g, _)| *g >= us(warm))
            .map(|&(_, d)| f64::from(d) / 1e3)
            .collect();
        if !d.is_empty() {
            d.sort_by(f64::total_cmp);
            out.insert("delay_ms".into(), vec![quantile(&d, 0.5)]);
            out.insert("delay_p99_ms".into(), vec![quantile(&d, 0.99)]);
        }
    }

    // Event metrics.
    let events: Vec<_> = r
        .loss_events
        .iter()
        .filter(|e| e.t >= warm && e.t < until && e.t + m.after.0 <= end)
        .collect();
    if events.is_empty() {
        if measured {
            out.insert("max_gap_ms".into(), vec![max_gap(r, warm, until)]);
        }
        out.insert(
            "reinjection_rate_pct".into(),
            vec![reinjection_rate(r, warm, end)],
        );
    }
    out.insert("event_windows".into(), vec![events.len() as f64]);
    let cbr = CbrDelays::new(r);
    let mut undelivered_windows = 0;
    for e in &events {
        // A window opens no earlier than the application: before it, there is nothing to
        // deliver and no gap to measure.
        let from = e.t.saturating_sub(m.before.0).max(r.app_start);
        let to = e.t + m.after.0;
        if let Some(c) = &cbr {
            let (mut d, undelivered) = c.window(us(from), us(to), us(end));
            undelivered_windows += usize::from(undelivered > 0);
            if !d.is_empty() {
                d.sort_by(f64::total_cmp);
                out.entry("delay_increase_ms".into())
                    .or_default()
                    .push(d[d.len() - 1] - d[0]);
                out.entry("delay_p99_event_ms".into())
                    .or_default()
                    .push(quantile(&d, 0.99));
            }
            if let Some(mut b) = c.bounds(us(from), us(to), us(end))
                && !b.is_empty()
            {
                b.sort_by(f64::total_cmp);
                out.entry("delay_p99_event_bound_ms".into())
                    .or_default()
                    .push(quantile(&b, 0.99));
            }
            if let Some(a) = c.alone_p99(us(from), us(to), us(end)) {
                out.entry("delay_p99_event_alone_ms".into())
                    .or_default()
                    .push(a);
            }
        }
        out.entry("max_gap_ms".into())
            .or_default()
            .push(max_gap(r, from, to.min(until)));
        // The outage: the longest gap from the event until the bytes sent before it are in.
        let done = handover_end(r, e.sent_before, e.t).min(to);
        out.entry("outage_ms".into())
            .or_default()
            .push(max_gap(r, e.t, done));
        out.entry("reinjection_rate_pct".into())
            .or_default()
            .push(reinjection_rate(r, e.since.max(warm), to));
        if !r.decisions.is_empty() || !r.rss.is_empty() {
            let flips = r
                .decisions
                .iter()
                .filter(|d| d.link == e.link && d.flip && d.t >= from && d.t <= to)
                .count();
            out.entry("flips".into()).or_default().push(flips as f64);
            // The path manager's last word on the link before it broke.
            let last = r.decisions.iter().rfind(|d| d.link == e.link && d.t <= e.t);
            let acted = last.filter(|d| d.demote);
            out.entry("acted_before_break_pct".into())
                .or_default()
                .push(if acted.is_some() { 100.0 } else { 0.0 });
            if let Some(d) = acted {
                out.entry("lead_ms".into())
                    .or_default()
                    .push(e.t.saturating_sub(d.t).as_secs_f64() * 1e3);
            }
        }
    }

    if cbr.is_some() {
        out.insert(
            "windows_undelivered".into(),
            vec![undelivered_windows as f64],
        );
    }
    out.insert(
        "reinjections".into(),
        vec![r.sender.reinjected_packets as f64],
    );
    out.insert(
        "duplicate_mb".into(),
        vec![r.receiver.duplicate_bytes_received as f64 / 1e6],
    );
    // Only where a path manager asked for copies: every other run's results stay as they were.
    if r.sender.duplicated_bytes > 0 {
        out.insert(
            "duplicated_mb".into(),
            vec![r.sender.duplicated_bytes as f64 / 1e6],
        );
    }
    out.insert(
        "ofo_peak_kb".into(),
        vec![r.receiver.ofo_peak_bytes as f64 / 1e3],
    );
    let ofo: Vec<f64> = r
        .samples
        .iter()
        .filter(|s| s.t >= warm && s.t <= until)
        .map(|s| s.ofo_bytes as f64)
        .collect();
    if !ofo.is_empty() {
        out.insert(
            "ofo_mean_kb".into(),
            vec![ofo.iter().sum::<f64>() / ofo.len() as f64 / 1e3],
        );
    }
    if let Some(c) = r.completed {
        out.insert(
            "completion_s".into(),
            vec![c.saturating_sub(r.app_start).as_secs_f64()],
        );
    }
    if let Some(main) = r.flows.first()
        && main.file_bytes.is_some()
    {
        // A file: its bytes over its transfer time; one that did not complete, what it
        // delivered until the run ended.
        let until = main.completed.unwrap_or(end).min(end);
        let span = until.saturating_sub(main.start).as_secs_f64();
        if span > 0.0 {
            out.insert(
                "transfer_mbps".into(),
                vec![main.delivered as f64 * 8.0 / span / 1e6],
            );
        }
    }
    if let Some(main) = r.flows.first()
        && let Some(n) = main.redundant_packets
    {
        out.insert("redundant_packets".into(), vec![n as f64]);
        if main.delivered > 0 {
            out.insert(
                "redundant_per_mb".into(),
                vec![n as f64 / (main.delivered as f64 / 1e6)],
            );
        }
    }
    for f in r.flows.iter().skip(1) {
        let k = |m: &str| flow_key(&f.name, m);
        if let Some(c) = f.completed {
            out.insert(
                k("completion_s"),
                vec![c.saturating_sub(f.start).as_secs_f64()],
            );
        }
        let until = finished_at(f).unwrap_or(end).min(end);
        let span = until.saturating_sub(f.start).as_secs_f64();
        if span > 0.0 {
            out.insert(
                k("throughput_mbps"),
                vec![f.delivered as f64 * 8.0 / span / 1e6],
            );
        }
        out.insert(k("delivered_mb"), vec![f.delivered as f64 / 1e6]);
        if let Some(n) = f.redundant_packets {
            out.insert(k("redundant_packets"), vec![n as f64]);
            if f.delivered > 0 {
                out.insert(
                    k("redundant_per_mb"),
                    vec![n as f64 / (f.delivered as f64 / 1e6)],
                );
            }
        }
    }
    out
}

/// One-way delays of a run's CBR messages by generation time, those never delivered included.
struct CbrDelays<'a> {
    /// (generation µs, delay µs) of the delivered messages, by generation time.
    delivered: std::borrow::Cow<'a, [(u64, u32)]>,
    /// Generation times of every message, delivered or not (empty when the record has none:
    /// then only delivered messages count).
    generated: &'a [u64],
    /// A lower bound on each generated message's delay (µs), when the run recorded one.
    bound: Option<&'a [u32]>,
    /// Per link, each generated message's delay (µs) on that link alone, when recorded.
    alone: Vec<&'a [u32]>,
}

impl<'a> CbrDelays<'a> {
    fn new(r: &'a RunRecord) -> Option<Self> {
        if r.cbr.is_empty() && r.cbr_generated.is_empty() {
            return None;
        }
        let delivered = if r.cbr.is_sorted_by_key(|&(g, _)| g) {
            std::borrow::Cow::Borrowed(&r.cbr[..])
        } else {
            let mut v = r.cbr.clone();
            v.sort_by_key(|&(g, _)| g);
            std::borrow::Cow::Owned(v)
        };
        Some(CbrDelays {
            delivered,
            generated: &r.cbr_generated,
            bound: (!r.cbr_bound.is_empty() && r.cbr_bound.len() == r.cbr_generated.len())
                .then_some(&r.cbr_bound[..]),
            alone: r
                .cbr_alone
                .iter()
                .filter(|a| !a.is_empty() && a.len() == r.cbr_generated.len())
                .map(|a| &a[..])
                .collect(),
        })
    }

    /// Of the links the stream could have had to itself, the least 99th percentile (ms) of the
    /// delays the window's messages would have had on one alone (none above `end −
    /// generation`), when recorded.
    fn alone_p99(&self, from: u64, to: u64, end: u64) -> Option<f64> {
        let lo = self.generated.partition_point(|&g| g < from);
        let hi = self.generated.partition_point(|&g| g <= to);
        if lo == hi {
            return None;
        }
        self.alone
            .iter()
            .map(|a| {
                let mut d: Vec<f64> = self.generated[lo..hi]
                    .iter()
                    .zip(&a[lo..hi])
                    .map(|(&g, &x)| u64::from(x).min(end.saturating_sub(g)) as f64 / 1e3)
                    .collect();
                d.sort_by(f64::total_cmp);
                quantile(&d, 0.99)
            })
            .min_by(f64::total_cmp)
    }

    /// The lower bounds (ms) on the delays of the messages generated in [from, to], when the
    /// run recorded them; none above `end − generation`, what [`window`](Self::window) counts
    /// for a message never delivered.
    fn bounds(&self, from: u64, to: u64, end: u64) -> Option<Vec<f64>> {
        let bound = self.bound?;
        let lo = self.generated.partition_point(|&g| g < from);
        let hi = self.generated.partition_point(|&g| g <= to);
        let bounds = self.generated[lo..hi].iter().zip(&bound[lo..hi]);
        Some(
            bounds
                .map(|(&g, &b)| u64::from(b).min(end.saturating_sub(g)) as f64 / 1e3)
                .collect(),
        )
    }

    /// Delays (ms) of the messages generated in [from, to]: measured for those delivered,
    /// `end − generation` for those never delivered; and how many were never delivered.
    fn window(&self, from: u64, to: u64, end: u64) -> (Vec<f64>, usize) {
        let lo = self.delivered.partition_point(|&(g, _)| g < from);
        let hi = self.delivered.partition_point(|&(g, _)| g <= to);
        let mut d: Vec<f64> = self.delivered[lo..hi]
            .iter()
            .map(|&(_, d)| f64::from(d) / 1e3)
            .collect();
        // Both lists by generation time: a merge matches each generated message with its
        // delivery (one for one where several share a microsecond).
        let (mut missing, mut j) = (0, lo);
        let glo = self.generated.partition_point(|&g| g < from);
        for &g in self.generated[glo..].iter().take_while(|&&g| g <= to) {
            while j < hi && self.delivered[j].0 < g {
                j += 1;
            }
            if j < hi && self.delivered[j].0 == g {
                j += 1;
            } else {
                missing += 1;
                d.push(end.saturating_sub(g) as f64 / 1e3);
            }
        }
        (d, missing)
    }
}

/// The last sample at or before `t`.
fn sample_at(r: &RunRecord, t: Duration) -> Option<&Sample> {
    let i = r.samples.partition_point(|s| s.t <= t);
    r.samples.get(i.saturating_sub(1))
}

/// When an application is done: it stopped, or its file completed.
fn finished_at(f: &FlowRecord) -> Option<Duration> {
    f.stopped.or(f.completed)
}

/// Largest interval between consecutive deliveries within [from, to]; the last delivery
/// before `from` opens the first interval, and `to` closes the last.
pub fn max_gap(r: &RunRecord, from: Duration, to: Duration) -> f64 {
    let (f, t) = (from.as_micros() as u64, to.as_micros() as u64);
    let start = r.deliveries.partition_point(|(d, _)| *d < f);
    let mut prev = if start > 0 {
        r.deliveries[start - 1].0
    } else {
        f
    };
    let mut gap = 0;
    for &(d, _) in &r.deliveries[start..] {
        if d > t {
            break;
        }
        gap = gap.max(d - prev);
        prev = d;
    }
    gap = gap.max(t.saturating_sub(prev));
    gap as f64 / 1e3
}

/// When the receiver has, in order, the first `bytes` of the stream (the bytes sent before an
/// event at `t`), or the end of the run.
fn handover_end(r: &RunRecord, bytes: u64, t: Duration) -> Duration {
    let mut total = 0u64;
    for &(at, b) in &r.deliveries {
        total += u64::from(b);
        if total >= bytes && at >= t.as_micros() as u64 {
            return Duration::from_micros(at);
        }
    }
    r.duration
}

fn reinjection_rate(r: &RunRecord, from: Duration, to: Duration) -> f64 {
    let (Some(a), Some(b)) = (sample_at(r, from), sample_at(r, to)) else {
        return 0.0;
    };
    let sent = b.data_packets.saturating_sub(a.data_packets);
    if sent == 0 {
        return 0.0;
    }
    100.0 * b.reinjected.saturating_sub(a.reinjected) as f64 / sent as f64
}

/// Quantile of sorted data, linear interpolation between closest ranks.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::LossEvent;

    fn record() -> RunRecord {
        RunRecord {
            duration: Duration::from_secs(10),
            app_start: Duration::from_secs(1),
            // Deliveries every 10 ms from 1 s to 10 s, except a hole from 5.0 s to 5.4 s.
            deliveries: (100..1000)
                .map(|i| i * 10_000u64)
                .filter(|t| !(5_000_000..5_400_000).contains(t))
                .map(|t| (t, 1000))
                .collect(),
            cbr: vec![
                (4_900_000, 20_000),
                (5_000_000, 420_000),
                (5_100_000, 330_000),
                (9_000_000, 20_000),
            ],
            samples: (0..=100)
                .map(|i| Sample {
                    t: Duration::from_millis(i * 100),
                    delivered: 0,
                    link_rx: vec![i * 1000],
                    link_cwnd: vec![0],
                    link_srtt_us: vec![0],
                    ofo_bytes: 0,
                    reinjected: if i >= 51 { 5 } else { 0 },
                    data_packets: i * 10,
                })
                .collect(),
            loss_events: vec![LossEvent {
                t: Duration::from_secs(5),
                link: 0,
                since: Duration::ZERO,
                // 1000 bytes every 10 ms from 1 s to 5 s were sent before the event.
                sent_before: 400_000,
            }],
            link_names: vec!["wlan".into()],
            ..RunRecord::default()
        }
    }

    #[test]
    fn event_metrics_follow_their_definitions() {
        let m = MetricsSpec::default();
        let out = compute(&record(), &m);
        // Delays in [4.5 s, 7 s]: 20, 420, 330 ms → increase 400 ms.
        assert_eq!(out["delay_increase_ms"], vec![400.0]);
        // The hole: last delivery at 4.99 s, next at 5.40 s.
        assert!((out["max_gap_ms"][0] - 410.0).abs() < 1e-9);
        assert!((out["outage_ms"][0] - 410.0).abs() < 1e-9);
        // From the warmup (2 s) to 7 s: 5 reinjections over 500 segments.
        assert!((out["reinjection_rate_pct"][0] - 1.0).abs() < 1e-9);
        let tp = out["throughput_mbps"][0];
        assert!(tp > 0.7 && tp < 0.8, "{tp}");
        assert!(out.contains_key("link.wlan.throughput_mbps"));
    }

    #[test]
    fn the_delay_bound_is_the_p99_of_the_windows_bounds() {
        // CBR every 10 ms from 1 s to 10 s; the bound is 20 ms except for the messages
        // generated in [5 s, 5.5 s), which wait 300 ms for the next delivery opportunity.
        let mut r = record();
        r.cbr_generated = (100..1000).map(|i| i * 10_000).collect();
        r.cbr_bound = r
            .cbr_generated
            .iter()
            .map(|&g| {
                if (5_000_000..5_500_000).contains(&g) {
                    300_000
                } else {
                    20_000
                }
            })
            .collect();
        let m = MetricsSpec {
            before: crate::units::Dur(Duration::from_secs(2)),
            after: crate::units::Dur(Duration::from_secs(2)),
            warmup: crate::units::Dur(Duration::ZERO),
            ..MetricsSpec::default()
        };
        // Window [3 s, 7 s]: 401 messages, 50 of them at 300 ms: the p99 is 300 ms.
        let out = compute(&r, &m);
        assert_eq!(out["delay_p99_event_bound_ms"], vec![300.0]);
        // Alone on two links: one at 20 ms throughout, one at 500 ms: the least is 20 ms.
        r.cbr_alone = vec![vec![500_000; 900], vec![20_000; 900]];
        let out = compute(&r, &m);
        assert_eq!(out["delay_p99_event_alone_ms"], vec![20.0]);
        // A record without bounds (real stacks) or with a mismatched list has no such metric.
        r.cbr_bound.pop();
        assert!(!compute(&r, &m).contains_key("delay_p99_event_bound_ms"));
        r.cbr_bound.clear();
        assert!(!compute(&r, &m).contains_key("delay_p99_event_bound_ms"));
    }

    #[test]
    fn a_window_without_delivery_counts_its_whole_length() {
        // CBR every 100 ms from 1 s; nothing generated after 3 s is ever delivered (the run
        // ends at 10 s). Windows 2 s before to 1 s after events at 3 s and 8 s.
        let mut r = record();
        r.cbr_generated = (10..100).map(|i| i * 100_000).collect();
        r.cbr = (10..=30).map(|i| (i * 100_000, 20_000)).collect();
        let event = |s| LossEvent {
            t: Duration::from_secs(s),
            link: 0,
            since: Duration::ZERO,
            sent_before: 0,
        };
        r.loss_events = vec![event(3), event(8)];
        let m = MetricsSpec {
            before: crate::units::Dur(Duration::from_secs(2)),
            after: crate::units::Dur(Duration::from_secs(1)),
            warmup: crate::units::Dur(Duration::ZERO),
            ..MetricsSpec::default()
        };
        let out = compute(&r, &m);
        assert_eq!(out["event_windows"], vec![2.0]);
        assert_eq!(out["windows_undelivered"], vec![2.0]);
        let p99 = &out["delay_p99_event_ms"];
        assert_eq!(p99.len(), 2, "no window is dropped: {p99:?}");
        // Window 1: from 1 s (the application's start, not 1 s before it) to 4 s; the
        // messages of 3.1 to 4 s waited until the end of the run: 6.0 to 6.9 s.
        assert!(p99[0] > 6800.0, "{p99:?}");
        // Window 2: 6 to 9 s, nothing delivered: at least the window's length.
        assert!(p99[1] >= 3000.0, "{p99:?}");
        assert!(out["delay_increase_ms"][1] > 2900.0);
    }

    #[test]
    fn windows_start_no_earlier_than_the_application() {
        // The application starts at 1 s and delivers every 10 ms; an event at 1.5 s with an
        // 8 s window before it: the gap is not measured from −6.5 s.
        let mut r = record();
        r.loss_events[0].t = Duration::from_millis(1500);
        let m = MetricsSpec {
            before: crate::units::Dur(Duration::from_secs(8)),
            after: crate::units::Dur(Duration::from_secs(1)),
            warmup: crate::units::Dur(Duration::ZERO),
            ..MetricsSpec::default()
        };
        let out = compute(&r, &m);
        assert_eq!(out["max_gap_ms"].len(), 1);
        assert!(
            out["max_gap_ms"][0] <= 10.0 + 1e-9,
            "{:?}",
            out["max_gap_ms"]
        );
    }

    #[test]
    fn the_time_after_the_application_is_done_is_neither_a_gap_nor_throughput_time_nor_sampled() {
        // A 2 MB file from 1 s, delivered every 10 ms until it completes at 3 s, in a 10 s
        // run without events: 8 Mbit/s, gaps of 10 ms (not the 7 s after it completed).
        let mut r = record();
        r.loss_events.clear();
        r.deliveries = (100..=300).map(|i| (i * 10_000u64, 10_000)).collect();
        let file = |name: &str| FlowRecord {
            name: name.into(),
            start: Duration::from_secs(1),
            delivered: 2_000_000,
            file_bytes: Some(2_000_000),
            completed: Some(Duration::from_secs(3)),
            ..FlowRecord::default()
        };
        r.flows = vec![file("main"), file("f")];
        // 2 kB held for reordering while the file is under way, nothing after.
        for s in &mut r.samples {
            s.ofo_bytes = if s.t <= Duration::from_secs(3) {
                2000
            } else {
                0
            };
        }
        let m = MetricsSpec {
            warmup: crate::units::Dur(Duration::ZERO),
            ..MetricsSpec::default()
        };
        let out = compute(&r, &m);
        assert!((out["ofo_mean_kb"][0] - 2.0).abs() < 1e-9, "{out:?}");
        assert!((out["max_gap_ms"][0] - 10.0).abs() < 1e-6, "{out:?}");
        assert!((out["throughput_mbps"][0] - 8.04).abs() < 1e-6, "{out:?}");
        assert!((out[&flow_key("f", "throughput_mbps")][0] - 8.0).abs() < 1e-6);
        // A bulk transfer stopped at 3 s: the same; an event after it is not its event.
        r.flows[0].file_bytes = None;
        r.flows[0].completed = None;
        r.flows[0].stopped = Some(Duration::from_secs(3));
        r.loss_events = record().loss_events;
        let out = compute(&r, &m);
        assert_eq!(out["event_windows"], vec![0.0]);
        assert!((out["max_gap_ms"][0] - 10.0).abs() < 1e-6, "{out:?}");
    }

    #[test]
    fn a_file_done_before_the_warmup_ended_has_no_throughput_and_no_whole_run_gap() {
        // The 2 MB file of the test above, complete at 3 s, with a 4 s warmup: no time after
        // the warmup to measure over (the table shows "-", not 0 Mbit/s); its transfer
        // figures stay.
        let mut r = record();
        r.loss_events.clear();
        r.deliveries = (100..=300).map(|i| (i * 10_000u64, 10_000)).collect();
        r.flows = vec![FlowRecord {
            name: "main".into(),
            start: Duration::from_secs(1),
            delivered: 2_000_000,
            file_bytes: Some(2_000_000),
            completed: Some(Duration::from_secs(3)),
            ..FlowRecord::default()
        }];
        r.completed = Some(Duration::from_secs(3));
        let m = MetricsSpec {
            warmup: crate::units::Dur(Duration::from_secs(4)),
            ..MetricsSpec::default()
        };
        let out = compute(&r, &m);
        for k in ["throughput_mbps", "link.wlan.throughput_mbps", "max_gap_ms"] {
            assert!(!out.contains_key(k), "{k}: {out:?}");
        }
        assert!((out["completion_s"][0] - 2.0).abs() < 1e-9, "{out:?}");
        assert!((out["transfer_mbps"][0] - 8.0).abs() < 1e-6, "{out:?}");
        // Done exactly when the warmup ends: still nothing to measure over.
        r.flows[0].completed = Some(Duration::from_secs(4));
        assert!(!compute(&r, &m).contains_key("throughput_mbps"));
    }

    #[test]
    fn every_metric_has_a_label_and_a_unit() {
        for m in METRICS {
            let (l, u) = label(m.key);
            assert!(l != m.key && !u.is_empty(), "{}", m.key);
        }
        assert_eq!(
            label("flow.file1.completion_s"),
            ("Transfer time, file1".to_string(), "s")
        );
        assert_eq!(label("link.wlan.mb").1, "MB");
    }

    #[test]
    fn quantiles_interpolate() {
        let d = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile(&d, 0.5), 2.5);
        assert_eq!(quantile(&d, 0.0), 1.0);
        assert_eq!(quantile(&d, 1.0), 4.0);
    }
}
