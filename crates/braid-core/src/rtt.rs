//! Per-subflow round-trip time estimation and retransmission timeout (RFC 6298, with the Linux
//! variant of seed 002 Eq. 2).

use std::time::Duration;

/// How the retransmission timeout is derived from the RTT estimate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RtoFormula {
    /// RFC 6298 §2: RTO = max(RTO_min, SRTT + max(G, 4·RTTVAR)); seed 002 Eq. 1.
    Rfc6298,
    /// Linux: RTO = SRTT + max(RTO_min, 4·RTTVAR); seed 002 Eq. 2.
    Linux,
    /// RFC 793 §3.7: RTO = max(RTO_min, β·SRTT) with β = 2, no variance term; seed 004 Eq. 8.
    /// An RTT that jumps above twice its smoothed value fires the timer unless RTO_min covers it.
    Rfc793,
}

/// β of [`RtoFormula::Rfc793`] (seed 004 Eq. 8: "BETA is a delay variance factor, e.g., 2").
pub const RFC793_BETA: u32 = 2;

/// Smoothed RTT and variation of one subflow.
#[derive(Debug, Clone)]
pub struct RttEstimator {
    srtt: Option<Duration>,
    rttvar: Duration,
    latest: Duration,
    min: Duration,
    initial: Duration,
}

/// Clock granularity G of RFC 6298 (the core's clock resolution is 1 µs; braid uses 1 ms as
/// a conservative G for the RFC formula).
pub const GRANULARITY: Duration = Duration::from_millis(1);

impl RttEstimator {
    /// `initial` is used before the first sample (RFC 6298 §2.1 initial RTO comes from it).
    pub fn new(initial: Duration) -> Self {
        RttEstimator {
            srtt: None,
            rttvar: initial / 2,
            latest: initial,
            min: Duration::MAX,
            initial,
        }
    }

    /// Feeds one RTT measurement (RFC 6298 §2.2, §2.3).
    pub fn update(&mut self, sample: Duration) {
        self.latest = sample;
        self.min = self.min.min(sample);
        match self.srtt {
            None => {
                // RFC 6298 §2.2
                self.srtt = Some(sample);
                self.rttvar = sample / 2;
            }
            Some(srtt) => {
                // RFC 6298 §2.3: RTTVAR = 3/4·RTTVAR + 1/4·|SRTT − R'|, SRTT = 7/8·SRTT + 1/8·R'
                let err = srtt.abs_diff(sample);
                self.rttvar = (self.rttvar * 3 + err) / 4;
                self.srtt = Some((srtt * 7 + sample) / 8);
            }
        }
    }

    /// Smoothed RTT, or the initial guess before any sample.
    pub fn srtt(&self) -> Duration {
        self.srtt.unwrap_or(self.initial)
    }

    pub fn has_sample(&self) -> bool {
        self.srtt.is_some()
    }

    pub fn rttvar(&self) -> Duration {
        self.rttvar
    }

    pub fn latest(&self) -> Duration {
        self.latest
    }

    /// Smallest sample seen, or the initial guess.
    pub fn min(&self) -> Duration {
        if self.min == Duration::MAX {
            self.initial
        } else {
            self.min
        }
    }

    /// The retransmission timeout before backoff.
    pub fn rto(&self, formula: RtoFormula, rto_min: Duration, rto_max: Duration) -> Duration {
        let Some(srtt) = self.srtt else {
            // RFC 6298 §2.1: before any sample, RTO = the initial value.
            return self.initial.max(rto_min).min(rto_max);
        };
        let rto = match formula {
            RtoFormula::Rfc6298 => rto_min.max(srtt + GRANULARITY.max(self.rttvar * 4)),
            RtoFormula::Linux => srtt + rto_min.max(self.rttvar * 4),
            RtoFormula::Rfc793 => rto_min.max(srtt * RFC793_BETA),
        };
        rto.min(rto_max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc6298_smoothing() {
        let mut r = RttEstimator::new(Duration::from_secs(1));
        r.update(Duration::from_millis(100));
        assert_eq!(r.srtt(), Duration::from_millis(100));
        assert_eq!(r.rttvar(), Duration::from_millis(50));
        r.update(Duration::from_millis(200));
        // RTTVAR = 3/4·50 + 1/4·100 = 62.5; SRTT = 7/8·100 + 1/8·200 = 112.5
        assert_eq!(r.rttvar(), Duration::from_micros(62_500));
        assert_eq!(r.srtt(), Duration::from_micros(112_500));
    }

    #[test]
    fn rto_formulas_match_seed_002() {
        let mut r = RttEstimator::new(Duration::from_secs(1));
        for _ in 0..50 {
            r.update(Duration::from_millis(30));
        }
        let min = Duration::from_millis(200);
        let max = Duration::from_secs(120);
        // Small, steady RTT: Linux gives SRTT + RTO_min, the RFC gives RTO_min.
        let linux = r.rto(RtoFormula::Linux, min, max);
        let rfc = r.rto(RtoFormula::Rfc6298, min, max);
        assert!(linux >= Duration::from_millis(230) && linux < Duration::from_millis(231));
        assert_eq!(rfc, min);
        // RFC 793 / seed 004: β·SRTT = 60 ms, under RTO_min.
        assert_eq!(r.rto(RtoFormula::Rfc793, min, max), min);
    }

    #[test]
    fn rfc793_is_twice_srtt_above_rto_min_whatever_the_variance() {
        let mut r = RttEstimator::new(Duration::from_secs(1));
        for i in 0..200 {
            // Alternating 100 and 300 ms: large RTTVAR, SRTT near 200 ms.
            r.update(Duration::from_millis(if i % 2 == 0 { 100 } else { 300 }));
        }
        let (min, max) = (Duration::from_millis(100), Duration::from_secs(120));
        let rto = r.rto(RtoFormula::Rfc793, min, max);
        assert_eq!(rto, r.srtt() * 2);
        assert!(
            r.rto(RtoFormula::Linux, min, max)
                > r.srtt() + r.rttvar() * 4 - Duration::from_millis(1)
        );
        assert_eq!(
            r.rto(RtoFormula::Rfc793, min, Duration::from_millis(250)),
            Duration::from_millis(250)
        );
    }
}
