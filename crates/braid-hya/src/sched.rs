//! The proportional scheduler of HYA (seed 003 §5.2: "proportional scheduling with different
//! ratios"): packets are spread over the usable links so that each link's share of the bytes
//! follows its weight: fixed ratios such as 1:1 or 2:1, or weights the caller sets from
//! measured delivery rates ([`crate::Sender`] does with `Weights::Measured`).
//!
//! Weighted fair queueing by virtual finish times (the byte-by-byte round robin of Demers,
//! Keshav and Shenker, SIGCOMM 1989): each link has a finish tag; a packet of `len` bytes would
//! finish on link i at `tag_i + len / w_i` and goes to the link where it finishes first (the
//! lower number on a tie). A link that was not eligible at the previous packet starts again at
//! the smallest tag of the links that were (no burst to catch up, no penalty). Over any run of
//! packets each link's bytes stay within about one packet of its share. Deterministic: no
//! randomness, no clock.

/// Tags are shifted back when the smallest passes this (bytes / weight), to keep f64 exact.
const RENORMALISE: f64 = 1e12;

/// The scheduler. Links are numbered by the caller (0, 1, …); a link never given a weight has
/// weight 1.
#[derive(Debug, Clone, Default)]
pub struct Proportional {
    weights: Vec<f64>,
    finish: Vec<f64>,
    /// The call in which each link was last eligible (`u64::MAX`: never).
    seen: Vec<u64>,
    calls: u64,
    /// The finish tag of the last packet.
    vnow: f64,
}

impl Proportional {
    /// A scheduler with `weights[i]` for link i (each > 0; others 1).
    pub fn new(weights: &[f64]) -> Self {
        let mut p = Proportional::default();
        for (i, w) in weights.iter().enumerate() {
            p.set_weight(i, *w);
        }
        p
    }

    /// Link `i`'s weight.
    pub fn weight(&self, i: usize) -> f64 {
        self.weights.get(i).copied().unwrap_or(1.0)
    }

    /// Sets link `i`'s weight (not finite or below 1e-9: 1e-9, a link that still gets a
    /// packet now and then rather than none). A change starts every link's tag again at zero:
    /// tags are bytes divided by weights, and old ones would weigh the new weights wrongly.
    pub fn set_weight(&mut self, i: usize, w: f64) {
        self.grow(i);
        let w = if w.is_finite() { w.max(1e-9) } else { 1e-9 };
        if self.weights[i] != w {
            self.weights[i] = w;
            self.finish.iter_mut().for_each(|f| *f = 0.0);
            self.vnow = 0.0;
        }
    }

    /// The link among `eligible` (link numbers) for a packet of `len` bytes; `None` when
    /// `eligible` is empty.
    pub fn pick(&mut self, eligible: &[usize], len: usize) -> Option<usize> {
        if eligible.is_empty() {
            return None;
        }
        for &i in eligible {
            self.grow(i);
        }
        self.calls += 1;
        let before = self.calls - 1;
        let base = eligible
            .iter()
            .filter(|&&i| self.seen[i] == before)
            .map(|&i| self.finish[i])
            .fold(f64::INFINITY, f64::min);
        let base = if base.is_finite() { base } else { self.vnow };
        let len = len.max(1) as f64;
        let mut best: Option<(usize, f64)> = None;
        for &i in eligible {
            if self.seen[i] != before {
                self.finish[i] = self.finish[i].max(base);
            }
            self.seen[i] = self.calls;
            let tag = self.finish[i] + len / self.weights[i];
            if best.is_none_or(|(b, t)| tag < t || (tag == t && i < b)) {
                best = Some((i, tag));
            }
        }
        let (i, tag) = best?;
        self.finish[i] = tag;
        self.vnow = tag;
        if base > RENORMALISE {
            for f in &mut self.finish {
                *f = (*f - base).max(0.0);
            }
            self.vnow -= base;
        }
        Some(i)
    }

    fn grow(&mut self, i: usize) {
        if self.weights.len() <= i {
            self.weights.resize(i + 1, 1.0);
            self.finish.resize(i + 1, 0.0);
            self.seen.resize(i + 1, u64::MAX);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shares(p: &mut Proportional, eligible: &[usize], lens: &[usize], n: usize) -> Vec<usize> {
        let mut bytes = vec![0; 4];
        for k in 0..n {
            let len = lens[k % lens.len()];
            bytes[p.pick(eligible, len).unwrap()] += len;
        }
        bytes
    }

    #[test]
    fn fixed_ratios_split_bytes() {
        let mut p = Proportional::new(&[1.0, 1.0]);
        let b = shares(&mut p, &[0, 1], &[1000], 1000);
        assert_eq!(b[..2], [500_000, 500_000]);
        let mut p = Proportional::new(&[2.0, 1.0]);
        // Equal packets: exactly 0, 0, 1 repeating.
        let order: Vec<usize> = (0..6).map(|_| p.pick(&[0, 1], 100).unwrap()).collect();
        assert_eq!(order, [0, 0, 1, 0, 0, 1]);
        // Mixed sizes: bytes within one packet of 2:1.
        let mut p = Proportional::new(&[2.0, 1.0]);
        let b = shares(&mut p, &[0, 1], &[1400, 60, 576, 1200], 999);
        let total = (b[0] + b[1]) as f64;
        assert!((b[0] as f64 - total * 2.0 / 3.0).abs() <= 1400.0, "{b:?}");
    }

    #[test]
    fn only_eligible_links_and_no_catch_up_burst() {
        let mut p = Proportional::new(&[1.0, 1.0, 1.0]);
        assert_eq!(p.pick(&[], 100), None);
        assert_eq!(shares(&mut p, &[2], &[100], 10)[2], 1000);
        // Link 0 was idle for 10 packets: it gets its share from now on, not 10 in a row.
        let order: Vec<usize> = (0..6).map(|_| p.pick(&[0, 2], 100).unwrap()).collect();
        assert_eq!(order.iter().filter(|&&i| i == 0).count(), 3, "{order:?}");
    }

    #[test]
    fn weights_can_change_and_bad_weights_are_clamped() {
        let mut p = Proportional::new(&[1.0, 1.0]);
        p.set_weight(1, 3.0);
        let b = shares(&mut p, &[0, 1], &[100], 400);
        assert_eq!(b[..2], [10_000, 30_000]);
        p.set_weight(0, f64::NAN);
        p.set_weight(1, -5.0);
        assert!(p.weight(0) > 0.0 && p.weight(1) > 0.0);
        assert!(p.pick(&[0, 1], 100).is_some());
    }

    #[test]
    fn long_runs_renormalise() {
        let mut p = Proportional::new(&[1e-6, 1e-6]);
        for _ in 0..20_000 {
            p.pick(&[0, 1], 65_535).unwrap();
        }
        let b = shares(&mut p, &[0, 1], &[1000], 1000);
        assert_eq!(b[..2], [500_000, 500_000]);
    }
}
