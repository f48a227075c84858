//! Mahimahi packet-delivery traces (Netravali et al., "Mahimahi", USENIX ATC 2015): each line
//! is a time in milliseconds and stands for one opportunity to deliver one MTU-sized packet;
//! the trace repeats when it ends (`../shared/traces/README.md`).

use std::path::Path;
use std::sync::Arc;

/// Bytes one delivery opportunity carries (Mahimahi counts 1504).
pub const OPPORTUNITY_BYTES: u32 = 1504;

/// The latest opportunity a trace may give, in ms (about 115 days; its times are counted in
/// nanoseconds across repetitions).
pub const MAX_TRACE_MS: u64 = 10_000_000_000;

/// A parsed trace: sorted opportunity times in ms, and the period after which it repeats.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    pub opportunities: Arc<Vec<u64>>,
    pub period_ms: u64,
}

impl Trace {
    /// Reads a trace file; the error names the file and the line.
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read trace `{}`: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("trace `{}`: {e}", path.display()))
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        let mut ops = Vec::new();
        let mut last = 0u64;
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let t: u64 = line.parse().map_err(|_| {
                format!(
                    "line {}: `{line}` is not a time in milliseconds (a whole number)",
                    i + 1
                )
            })?;
            if t > MAX_TRACE_MS {
                return Err(format!(
                    "line {}: time {t} ms beyond the longest trace ({MAX_TRACE_MS} ms)",
                    i + 1
                ));
            }
            if t < last {
                return Err(format!(
                    "line {}: time {t} ms goes backwards (previous {last} ms)",
                    i + 1
                ));
            }
            last = t;
            ops.push(t);
        }
        if ops.is_empty() {
            return Err("no delivery opportunities".into());
        }
        let period_ms = last.max(1);
        Ok(Trace {
            opportunities: Arc::new(ops),
            period_ms,
        })
    }

    /// Time in ms of opportunity `k` counting across repetitions.
    pub fn time_ms(&self, k: u64) -> u64 {
        let n = self.opportunities.len() as u64;
        // Saturating: "never" for a backlog that would outlast the clock.
        (k / n)
            .saturating_mul(self.period_ms)
            .saturating_add(self.opportunities[(k % n) as usize])
    }

    /// Mean capacity in bit/s.
    pub fn mean_rate(&self) -> f64 {
        self.opportunities.len() as f64 * f64::from(OPPORTUNITY_BYTES) * 8.0
            / (self.period_ms as f64 / 1e3)
    }

    /// Index of the first opportunity at or after `t_ms`.
    pub fn first_at_or_after(&self, t_ms: u64) -> u64 {
        let n = self.opportunities.len() as u64;
        let rep = t_ms / self.period_ms;
        let within = t_ms % self.period_ms;
        // An opportunity at time `period` belongs to the end of its repetition: at an exact
        // multiple of the period the previous repetition's last ones are at `t_ms`.
        if within == 0 && rep > 0 {
            let j = self.opportunities.partition_point(|&o| o < self.period_ms) as u64;
            if j < n {
                return (rep - 1).saturating_mul(n).saturating_add(j);
            }
        }
        let i = self.opportunities.partition_point(|&o| o < within) as u64;
        rep.saturating_mul(n).saturating_add(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_repeats() {
        let t = Trace::parse("1\n1\n5\n10\n").unwrap();
        assert_eq!(t.period_ms, 10);
        assert_eq!(t.time_ms(0), 1);
        assert_eq!(t.time_ms(3), 10);
        assert_eq!(t.time_ms(4), 11);
        assert_eq!(t.first_at_or_after(2), 2);
        assert_eq!(t.first_at_or_after(12), 6);
        // The opportunity at the period's end is the first at that time (it was skipped).
        assert_eq!(t.first_at_or_after(10), 3);
        assert_eq!(t.first_at_or_after(20), 7);
        assert_eq!(t.first_at_or_after(11), 4);
        // 4 × 1504 B per 10 ms.
        assert!((t.mean_rate() - 4.0 * 1504.0 * 8.0 / 0.01).abs() < 1e-6);
    }

    #[test]
    fn bad_traces_name_the_line() {
        assert!(Trace::parse("1\nx\n").unwrap_err().contains("line 2"));
        assert!(Trace::parse("5\n3\n").unwrap_err().contains("backwards"));
        assert!(Trace::parse("\n").unwrap_err().contains("no delivery"));
        // Times whose nanoseconds would overflow the clock across repetitions.
        let e = Trace::parse("1\n18446744073709551615\n").unwrap_err();
        assert!(e.starts_with("line 2:") && e.contains("beyond"), "{e}");
    }

    use proptest::strategy::Strategy as _;

    proptest::proptest! {
        /// Any text: a one-line error or a trace whose every opportunity time, across many
        /// repetitions, is computed without overflow and in order.
        #[test]
        fn arbitrary_text_is_a_trace_or_a_one_line_error(
            lines in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::prelude::any::<u64>().prop_map(|v| v.to_string()),
                    (0u64..100_000).prop_map(|v| v.to_string()),
                    "\\PC{0,12}",
                ],
                0..20,
            ),
            k in 0u64..1_000_000,
        ) {
            match Trace::parse(&lines.join("\n")) {
                Ok(t) => {
                    let ns = t.time_ms(k).checked_mul(1_000_000);
                    proptest::prop_assert!(ns.is_some());
                    proptest::prop_assert!(t.time_ms(k) <= t.time_ms(k + 1));
                    // The first opportunity at or after a time: at or after it, and the one
                    // before it earlier.
                    for at in [t.time_ms(k), t.time_ms(k) + 1, k] {
                        let i = t.first_at_or_after(at);
                        proptest::prop_assert!(t.time_ms(i) >= at);
                        proptest::prop_assert!(i == 0 || t.time_ms(i - 1) < at, "{} at {}", i, at);
                    }
                }
                Err(e) => proptest::prop_assert!(!e.contains('\n'), "{}", e),
            }
        }
    }

    #[test]
    fn shipped_traces_parse_when_present() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/traces/cellular");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            eprintln!("skipped: {} is absent", dir.display());
            return;
        };
        let mut n = 0;
        for e in entries.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "up" || x == "down") {
                let t = Trace::load(&p).unwrap();
                assert!(t.mean_rate() > 100e3, "{}", p.display());
                n += 1;
            }
        }
        assert!(n >= 8);
    }
}
