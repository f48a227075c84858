//! A fixed-bucket histogram of durations: how long packets waited in the reorder buffer.

use std::time::Duration;

/// Bucket width.
const STEP_US: u64 = 100;
/// Buckets: 0–100 µs, …, up to 100 ms; longer ones go to the last.
const BUCKETS: usize = 1000;

/// Durations in 100 µs buckets up to 100 ms, with the exact count, sum and maximum.
#[derive(Debug, Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    n: u64,
    sum_us: u64,
    max_us: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: vec![0; BUCKETS + 1],
            n: 0,
            sum_us: 0,
            max_us: 0,
        }
    }
}

impl Histogram {
    /// Counts one duration.
    pub fn record(&mut self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let b = (us.div_ceil(STEP_US) as usize).min(BUCKETS);
        self.counts[b] += 1;
        self.n += 1;
        self.sum_us = self.sum_us.saturating_add(us);
        self.max_us = self.max_us.max(us);
    }

    /// Durations counted.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// The longest, µs.
    pub fn max_us(&self) -> u64 {
        self.max_us
    }

    /// The mean, µs (0 when empty).
    pub fn mean_us(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum_us as f64 / self.n as f64
        }
    }

    /// An upper bound of the `q` quantile (0 ≤ q ≤ 1), µs: the end of the bucket that holds it
    /// (within 100 µs; above 100 ms, the maximum). 0 when empty.
    pub fn quantile_us(&self, q: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (b, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return if b == BUCKETS {
                    self.max_us
                } else {
                    (b as u64 * STEP_US).min(self.max_us)
                };
            }
        }
        self.max_us
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_bound_the_samples_from_above() {
        let mut h = Histogram::default();
        assert_eq!(h.quantile_us(0.99), 0);
        for us in 1..=1000u64 {
            h.record(Duration::from_micros(us * 10));
        }
        assert_eq!(h.count(), 1000);
        assert_eq!(h.max_us(), 10_000);
        assert_eq!(h.quantile_us(0.5), 5000);
        assert_eq!(h.quantile_us(0.99), 9900);
        assert_eq!(h.quantile_us(1.0), 10_000);
        h.record(Duration::from_secs(3));
        assert_eq!(h.quantile_us(1.0), 3_000_000);
        h.record(Duration::ZERO);
        assert_eq!(h.quantile_us(0.0), 0);
        assert!((h.mean_us() - (5_005_000.0 + 3e6) / 1002.0).abs() < 1.0);
    }
}
