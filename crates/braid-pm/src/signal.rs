//! Signal-strength input: the line format shared by `braid pm` and the tunnel daemon, and
//! replays from files. Bad input gives a one-line error; callers log, count and skip it.
//!
//! * JSON lines: `{"iface":"wlan0","rssi_dbm":-71.5}`, optionally `"t": <seconds>`.
//! * CSV replay: `time_s,iface,rssi_dbm` with a header line.
//! * The driving dataset of `../shared/traces/signal/` (Raca et al., MMSys 2020): one row per
//!   second, `Timestamp` (YYYY.MM.DD_hh.mm.ss) and `RSRP` columns; rows with impossible values
//!   (e.g. −200 sentinels) are skipped and counted.

use std::time::Duration;

use serde::Deserialize;

/// Plausible received signal strength, dBm.
pub const RSS_RANGE: std::ops::RangeInclusive<f64> = -150.0..=0.0;

/// One sample.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub iface: String,
    pub rssi_dbm: f64,
    /// Seconds (the sender's clock or the replay's time base).
    pub t: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignalError {
    #[error("not a signal sample: {0}")]
    Syntax(String),
    #[error("rssi_dbm {0} out of range: allowed -150..=0 dBm")]
    Range(String),
    #[error("interface name must be 1 to 15 characters")]
    Iface,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonSample {
    iface: String,
    rssi_dbm: f64,
    #[serde(default)]
    t: Option<f64>,
}

/// Parses one JSON line.
pub fn parse_json_line(line: &str) -> Result<Sample, SignalError> {
    let j: JsonSample = serde_json::from_str(line.trim()).map_err(|e| {
        // serde quotes the input, which may be any Unicode, a JSON-escaped newline included:
        // escaped as babeld's lines are (the error stays one line), cut on a character boundary.
        SignalError::Syntax(e.to_string().escape_debug().take(120).collect())
    })?;
    check(j.iface, j.rssi_dbm, j.t)
}

fn check(iface: String, rssi: f64, t: Option<f64>) -> Result<Sample, SignalError> {
    if iface.is_empty() || iface.len() > 15 {
        return Err(SignalError::Iface);
    }
    if !rssi.is_finite() || !RSS_RANGE.contains(&rssi) {
        return Err(SignalError::Range(format!("{rssi}")));
    }
    if let Some(t) = t
        && (!t.is_finite() || t < 0.0)
    {
        return Err(SignalError::Syntax(format!(
            "t {t} must be a non-negative number"
        )));
    }
    Ok(Sample {
        iface,
        rssi_dbm: rssi,
        t,
    })
}

/// A replayable signal series, in time order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Replay {
    pub samples: Vec<(Duration, String, f64)>,
    /// Rows skipped because their value was impossible or missing.
    pub skipped: usize,
}

/// The latest time a replay row may give (about 31 years).
pub const MAX_REPLAY_S: f64 = 1e9;

/// Parses `time_s,iface,rssi_dbm` rows (a header line is allowed). A malformed row is an error
/// naming the line; an impossible value is skipped and counted.
pub fn parse_csv(text: &str) -> Result<Replay, String> {
    let mut r = Replay::default();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if n == 0 && f.first().is_some_and(|c| c.parse::<f64>().is_err()) {
            continue; // header
        }
        if f.len() != 3 {
            return Err(format!("line {}: expected time_s,iface,rssi_dbm", n + 1));
        }
        let t: f64 = f[0]
            .parse()
            .map_err(|_| format!("line {}: `{}` is not a time in seconds", n + 1, f[0]))?;
        if !t.is_finite() || t < 0.0 {
            return Err(format!("line {}: time must be zero or positive", n + 1));
        }
        if t > MAX_REPLAY_S {
            return Err(format!(
                "line {}: time {t} s beyond the longest replay ({MAX_REPLAY_S} s)",
                n + 1
            ));
        }
        match f[2].parse::<f64>() {
            Ok(v) if v.is_finite() && RSS_RANGE.contains(&v) && !f[1].is_empty() => {
                r.samples
                    .push((Duration::from_secs_f64(t), f[1].to_string(), v));
            }
            _ => r.skipped += 1,
        }
    }
    r.samples.sort_by_key(|(t, _, _)| *t);
    Ok(r)
}

/// Parses a driving-dataset file (header with `Timestamp` and `column`, e.g. `RSRP`), giving
/// the samples to interface `iface` with times relative to the first row.
pub fn parse_driving(text: &str, iface: &str, column: &str) -> Result<Replay, String> {
    let mut lines = text.lines();
    let header = lines.next().ok_or("empty file")?;
    let cols: Vec<&str> = header.split(',').map(str::trim).collect();
    let ti = cols
        .iter()
        .position(|c| *c == "Timestamp")
        .ok_or("no `Timestamp` column")?;
    let vi = cols
        .iter()
        .position(|c| *c == column)
        .ok_or_else(|| format!("no `{column}` column"))?;
    let mut r = Replay::default();
    let mut first: Option<u64> = None;
    // Rows sharing a second are spread over it.
    let mut same_second = 0u32;
    let mut last_secs = None;
    for (n, line) in lines.enumerate() {
        let f: Vec<&str> = line.split(',').collect();
        if f.len() <= ti.max(vi) {
            r.skipped += 1;
            continue;
        }
        let Some(secs) = parse_timestamp(f[ti].trim()) else {
            return Err(format!("line {}: bad Timestamp `{}`", n + 2, f[ti].trim()));
        };
        let base = *first.get_or_insert(secs);
        if secs < base {
            r.skipped += 1;
            continue;
        }
        if last_secs == Some(secs) {
            same_second += 1;
        } else {
            same_second = 0;
            last_secs = Some(secs);
        }
        let t = Duration::from_secs(secs - base)
            + Duration::from_millis(u64::from(same_second.min(9)) * 100);
        // RSRP is defined over −156..−31 dBm (3GPP TS 36.133); −200 marks a missing value.
        match f[vi].trim().parse::<f64>() {
            Ok(v) if v.is_finite() && (-156.0..=-31.0).contains(&v) => {
                r.samples.push((t, iface.to_string(), v));
            }
            _ => r.skipped += 1,
        }
    }
    Ok(r)
}

/// `YYYY.MM.DD_hh.mm.ss` to seconds since an arbitrary epoch (days counted from year 0).
fn parse_timestamp(s: &str) -> Option<u64> {
    let (date, time) = s.split_once('_')?;
    let d: Vec<u64> = date
        .split('.')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    let t: Vec<u64> = time
        .split('.')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    // Years 1..=9999 keep the day count far from overflowing.
    if d.len() != 3
        || t.len() != 3
        || !(1..=9999).contains(&d[0])
        || d[1] == 0
        || d[1] > 12
        || d[2] == 0
        || d[2] > 31
    {
        return None;
    }
    if t[0] > 23 || t[1] > 59 || t[2] > 60 {
        return None;
    }
    // Days from a civil date (Howard Hinnant's algorithm).
    let (y, m, day) = (d[0] as i64, d[1] as i64, d[2] as i64);
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe;
    if days < 0 {
        return None;
    }
    Some(days as u64 * 86_400 + t[0] * 3600 + t[1] * 60 + t[2])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lines() {
        let s = parse_json_line(r#"{"iface":"wlan0","rssi_dbm":-71.5}"#).unwrap();
        assert_eq!((s.iface.as_str(), s.rssi_dbm, s.t), ("wlan0", -71.5, None));
        let s = parse_json_line(r#" {"iface":"wlan0","rssi_dbm":-60,"t":12.5} "#).unwrap();
        assert_eq!(s.t, Some(12.5));
        for bad in [
            "",
            "{",
            r#"{"iface":"wlan0"}"#,
            r#"{"iface":"wlan0","rssi_dbm":"x"}"#,
            r#"{"iface":"wlan0","rssi_dbm":-71,"colour":1}"#,
            r#"{"iface":"","rssi_dbm":-71}"#,
            r#"{"iface":"averyveryverylongname","rssi_dbm":-71}"#,
            r#"{"iface":"wlan0","rssi_dbm":12}"#,
            r#"{"iface":"wlan0","rssi_dbm":-71,"t":-1}"#,
            // serde names the unknown field, here with a JSON-escaped newline in its name.
            r#"{"t\nx":1}"#,
        ] {
            let e = parse_json_line(bad).unwrap_err().to_string();
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn csv_replay_skips_impossible_values() {
        let r = parse_csv(
            "time_s,iface,rssi_dbm\n0.0,wlan0,-70\n0.1,wlan0,-200\n0.2,wlan0,nan\n0.3,wlan0,-75\n",
        )
        .unwrap();
        assert_eq!(r.samples.len(), 2);
        assert_eq!(r.skipped, 2);
        assert!(parse_csv("0.0,wlan0\n").unwrap_err().contains("line 1"));
        assert!(
            parse_csv("x,wlan0,-70\n1,wlan0,-70\ny,w,-1")
                .unwrap_err()
                .contains("line 3")
        );
    }

    #[test]
    fn timestamps() {
        let a = parse_timestamp("2019.12.16_07.22.43").unwrap();
        let b = parse_timestamp("2019.12.17_07.22.44").unwrap();
        assert_eq!(b - a, 86_401);
        assert!(parse_timestamp("2019.13.16_07.22.43").is_none());
        assert!(parse_timestamp("garbage").is_none());
    }

    /// Times and years past what a clock can hold are errors naming the line, not panics.
    #[test]
    fn times_beyond_a_clock_are_errors() {
        for text in ["1e300,wlan0,-70\n", "0,wlan0,-70\n1.8e19,wlan0,-70\n"] {
            let e = parse_csv(text).unwrap_err();
            assert!(e.contains("beyond the longest replay"), "{e}");
        }
        let e = parse_driving(
            "Timestamp,RSRP\n2019.12.16_07.22.43,-90\n99999999999999.12.16_07.22.43,-90\n",
            "lte0",
            "RSRP",
        )
        .unwrap_err();
        assert!(e.starts_with("line 3: bad Timestamp"), "{e}");
    }

    /// A field: a number of any size or sign, a timestamp-like or arbitrary token.
    fn field() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop_oneof![
            any::<f64>().prop_map(|v| v.to_string()),
            any::<i64>().prop_map(|v| v.to_string()),
            (
                0u64..100_000_000_000,
                0u32..20,
                0u32..40,
                0u32..30,
                0u32..70,
                0u32..70
            )
                .prop_map(|(y, m, d, h, mi, s)| format!("{y}.{m}.{d}_{h}.{mi}.{s}")),
            Just("wlan0".to_string()),
            Just("-200".to_string()),
            "\\PC{0,12}",
        ]
    }

    fn rows(header: &'static str) -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop::collection::vec(prop::collection::vec(field(), 0..5), 0..12).prop_map(move |rows| {
            let body: Vec<String> = rows.iter().map(|r| r.join(",")).collect();
            format!("{header}{}", body.join("\n"))
        })
    }

    proptest::proptest! {
        /// Whatever the feed, replay file or dataset holds: a one-line error or samples, never
        /// a panic; accepted samples are in range (a replay's in time order).
        #[test]
        fn arbitrary_feeds_and_replays_never_panic(
            csv in rows(""),
            driving in rows("Timestamp,RSRP\n"),
            line in "\\PC{0,80}",
            t in proptest::prelude::any::<f64>(),
            rssi in proptest::prelude::any::<f64>(),
        ) {
            match parse_csv(&csv) {
                Ok(r) => {
                    proptest::prop_assert!(r.samples.windows(2).all(|w| w[0].0 <= w[1].0));
                    proptest::prop_assert!(r.samples.iter().all(|(_, _, v)| RSS_RANGE.contains(v)));
                }
                Err(e) => proptest::prop_assert!(!e.contains('\n'), "{}", e),
            }
            match parse_driving(&driving, "lte0", "RSRP") {
                Ok(r) => proptest::prop_assert!(
                    r.samples.iter().all(|(_, _, v)| (-156.0..=-31.0).contains(v))
                ),
                Err(e) => proptest::prop_assert!(!e.contains('\n'), "{}", e),
            }
            for l in [line, format!(r#"{{"iface":"wlan0","rssi_dbm":{rssi},"t":{t}}}"#)] {
                if let Err(e) = parse_json_line(&l) {
                    proptest::prop_assert!(!e.to_string().contains('\n'));
                }
            }
        }
    }

    #[test]
    fn a_long_error_about_non_ascii_input_is_cut_between_characters() {
        // serde_json's message quotes the unknown field; byte 120 fell inside a 'é'.
        let line = format!(r#"{{"{}":1}}"#, "é".repeat(80));
        let e = parse_json_line(&line).unwrap_err().to_string();
        assert!(e.contains("unknown field") && !e.contains('\n'), "{e}");
    }

    #[test]
    fn driving_dataset_when_present() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces/signal");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            eprintln!("skipped: {} is absent", dir.display());
            return;
        };
        let mut files = 0;
        for e in entries.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "csv") {
                let text = std::fs::read_to_string(&p).unwrap();
                let r = parse_driving(&text, "lte0", "RSRP").unwrap();
                assert!(r.samples.len() > 100, "{}", p.display());
                assert!(
                    r.samples
                        .iter()
                        .all(|(_, _, v)| (-156.0..=-31.0).contains(v))
                );
                assert!(r.samples.windows(2).all(|w| w[0].0 <= w[1].0));
                files += 1;
            }
        }
        assert!(files >= 1);
    }
}
