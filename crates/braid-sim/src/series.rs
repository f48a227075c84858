//! A run's time series as columns: what `--out` writes as CSV and the Python package hands
//! over as DataFrames, computed in one place so both give the same numbers.
//!
//! Tables (per run):
//! - `timeseries`: one row per sampling interval (`metrics.sample`), ending at `t_s`:
//!   `throughput_mbps` (in-order bytes delivered), per link `<link>_rx_mbps`, `<link>_cwnd_kb`,
//!   `<link>_srtt_ms` (the sender's subflow on that link), `ofo_kb` (receiver's reorder buffer),
//!   `reinjected` and `data_packets` (the sender's cumulative counters);
//! - `deliveries`: every in-order delivery to the application: `t_s`, `bytes`;
//! - `cbr`: every CBR message: `sent_s` (generated), `delay_ms` (one-way, application to
//!   application); absent for other applications;
//! - `decisions`: every decision of the client's path manager: `t_s`, `link` (its index in
//!   the time series' link order, from 0), `demote` (1: made backup or removed; 0: made active
//!   or created), `flip` (1: a backup-flag change); absent when it took none.

use std::io::{self, Write};

use crate::record::RunRecord;

/// One column: its values and the decimals the CSV prints (0: an integer count).
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    pub name: String,
    pub decimals: usize,
    pub values: Vec<f64>,
}

/// Named columns of equal length.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub name: &'static str,
    pub columns: Vec<Column>,
}

impl Table {
    fn new(name: &'static str, columns: &[(String, usize)], rows: usize) -> Table {
        Table {
            name,
            columns: columns
                .iter()
                .map(|(n, d)| Column {
                    name: n.clone(),
                    decimals: *d,
                    values: Vec::with_capacity(rows),
                })
                .collect(),
        }
    }

    fn push(&mut self, row: impl IntoIterator<Item = f64>) {
        for (c, v) in self.columns.iter_mut().zip(row) {
            c.values.push(v);
        }
    }

    pub fn rows(&self) -> usize {
        self.columns.first().map_or(0, |c| c.values.len())
    }

    /// CSV with a header line, each column at its precision.
    pub fn write_csv(&self, mut w: impl Write) -> io::Result<()> {
        let names: Vec<&str> = self.columns.iter().map(|c| c.name.as_str()).collect();
        writeln!(w, "{}", names.join(","))?;
        for i in 0..self.rows() {
            for (j, c) in self.columns.iter().enumerate() {
                if j > 0 {
                    w.write_all(b",")?;
                }
                write!(w, "{:.*}", c.decimals, c.values[i])?;
            }
            writeln!(w)?;
        }
        w.flush()
    }
}

/// Every table a record has (`cbr` only for a CBR application).
pub fn tables(rec: &RunRecord) -> Vec<Table> {
    let mut t = vec![timeseries(rec), deliveries(rec)];
    if !rec.cbr.is_empty() {
        t.push(cbr(rec));
    }
    if !rec.decisions.is_empty() {
        t.push(decisions(rec));
    }
    t
}

pub fn decisions(rec: &RunRecord) -> Table {
    let cols = [
        ("t_s".to_string(), 6),
        ("link".to_string(), 0),
        ("demote".to_string(), 0),
        ("flip".to_string(), 0),
    ];
    let mut t = Table::new("decisions", &cols, rec.decisions.len());
    for d in &rec.decisions {
        t.push([
            d.t.as_secs_f64(),
            d.link as f64,
            f64::from(u8::from(d.demote)),
            f64::from(u8::from(d.flip)),
        ]);
    }
    t
}

pub fn timeseries(rec: &RunRecord) -> Table {
    let mut cols = vec![("t_s".to_string(), 3), ("throughput_mbps".to_string(), 3)];
    let paths = !rec.paths_unread;
    for n in &rec.link_names {
        cols.push((format!("{n}_rx_mbps"), 3));
        if paths {
            cols.push((format!("{n}_cwnd_kb"), 1));
            cols.push((format!("{n}_srtt_ms"), 2));
        }
    }
    if paths {
        cols.push(("ofo_kb".into(), 1));
    }
    cols.push(("reinjected".into(), 0));
    cols.push(("data_packets".into(), 0));
    let mut t = Table::new("timeseries", &cols, rec.samples.len());
    for w in rec.samples.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        let dt = (b.t - a.t).as_secs_f64().max(1e-9);
        let mut row = vec![
            b.t.as_secs_f64(),
            (b.delivered - a.delivered) as f64 * 8.0 / dt / 1e6,
        ];
        for i in 0..rec.link_names.len() {
            row.push(b.link_rx[i].saturating_sub(a.link_rx[i]) as f64 * 8.0 / dt / 1e6);
            if paths {
                row.push(b.link_cwnd[i] as f64 / 1e3);
                row.push(b.link_srtt_us[i] as f64 / 1e3);
            }
        }
        if paths {
            row.push(b.ofo_bytes as f64 / 1e3);
        }
        row.push(b.reinjected as f64);
        row.push(b.data_packets as f64);
        t.push(row);
    }
    t
}

pub fn deliveries(rec: &RunRecord) -> Table {
    let cols = [("t_s".to_string(), 6), ("bytes".to_string(), 0)];
    let mut t = Table::new("deliveries", &cols, rec.deliveries.len());
    for (at, bytes) in &rec.deliveries {
        t.push([*at as f64 / 1e6, f64::from(*bytes)]);
    }
    t
}

/// Delivered CBR messages: generation time, one-way delay and, where the run recorded it, the
/// lower bound on that delay (`bound_ms`, the `delay_p99_event_bound_ms` metric's).
pub fn cbr(rec: &RunRecord) -> Table {
    let bounds = !rec.cbr_bound.is_empty() && rec.cbr_bound.len() == rec.cbr_generated.len();
    let mut cols = vec![("sent_s".to_string(), 6), ("delay_ms".to_string(), 3)];
    if bounds {
        cols.push(("bound_ms".to_string(), 3));
    }
    let mut t = Table::new("cbr", &cols, rec.cbr.len());
    for &(sent, delay) in &rec.cbr {
        let mut row = vec![sent as f64 / 1e6, f64::from(delay) / 1e3];
        if bounds {
            let i = rec.cbr_generated.partition_point(|&g| g < sent);
            let b = rec
                .cbr_bound
                .get(i)
                .filter(|_| rec.cbr_generated[i] == sent);
            row.push(b.map_or(f64::NAN, |&b| f64::from(b) / 1e3));
        }
        t.push(row);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Sample;
    use std::time::Duration;

    fn record(paths_unread: bool) -> RunRecord {
        let sample = |ms: u64, rx: u64| Sample {
            t: Duration::from_millis(ms),
            delivered: rx,
            link_rx: vec![rx],
            link_cwnd: vec![14_480],
            link_srtt_us: vec![20_000],
            ..Sample::default()
        };
        RunRecord {
            paths_unread,
            link_names: vec!["lte".into()],
            samples: vec![sample(0, 0), sample(100, 125_000)],
            ..RunRecord::default()
        }
    }

    fn header(t: &Table) -> String {
        let mut out = Vec::new();
        t.write_csv(&mut out).unwrap();
        String::from_utf8(out)
            .unwrap()
            .lines()
            .next()
            .unwrap()
            .to_string()
    }

    /// A run on real stacks reads no per-link window, RTT or reorder buffer: its time series
    /// leaves those columns out instead of filling them with zeros.
    #[test]
    fn a_record_without_path_state_has_no_window_rtt_or_reorder_columns() {
        assert_eq!(
            header(&timeseries(&record(false))),
            "t_s,throughput_mbps,lte_rx_mbps,lte_cwnd_kb,lte_srtt_ms,ofo_kb,reinjected,data_packets"
        );
        let lab = timeseries(&record(true));
        assert_eq!(
            header(&lab),
            "t_s,throughput_mbps,lte_rx_mbps,reinjected,data_packets"
        );
        let mut out = Vec::new();
        lab.write_csv(&mut out).unwrap();
        let row = String::from_utf8(out)
            .unwrap()
            .lines()
            .nth(1)
            .unwrap()
            .to_string();
        assert_eq!(row, "0.100,10.000,10.000,0,0");
    }

    /// The path manager's decisions are a table of their own, only when there are some.
    #[test]
    fn decisions_are_a_table_when_the_path_manager_took_some() {
        let mut rec = record(false);
        assert!(tables(&rec).iter().all(|t| t.name != "decisions"));
        rec.decisions.push(crate::record::PmDecision {
            t: Duration::from_millis(4_250),
            link: 1,
            demote: true,
            flip: true,
        });
        let all = tables(&rec);
        let t = all
            .iter()
            .find(|t| t.name == "decisions")
            .expect("decisions");
        let mut out = Vec::new();
        t.write_csv(&mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "t_s,link,demote,flip\n4.250000,1,1,1\n"
        );
    }
}
