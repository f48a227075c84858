//! Radio: received signal strength from distance, and what it means for a link.
//!
//! RSS(d) = P_tx − PL(d₀) − 10·n·log₁₀(d/d₀) + X, log-distance path loss with log-normal
//! shadowing X (σ dB) correlated over distance as in Gudmundson's model: X(k) =
//! ρ·X(k−1) + √(1−ρ²)·σ·N(0,1), ρ = exp(−Δd/d_corr). The packet error rate rises steeply
//! around the receiver sensitivity (a logistic curve of 0.5 dB scale: 2 % at 1 dB above the
//! sensitivity, 12 % at the sensitivity, 98 % at 3 dB below it), the link disappears below a
//! cut-off (sensitivity − 3 dB by default), and the rate follows a table of RSS thresholds
//! (802.11p's modulation schemes, 3–27 Mbit/s).

use std::time::Duration;

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;

/// Radio parameters of a link (documented defaults for 802.11p at 5.9 GHz).
#[derive(Debug, Clone, PartialEq)]
pub struct RadioSpec {
    pub tx_power_dbm: f64,
    /// Path loss at the reference distance d₀ = 1 m (free space at 5.9 GHz: 47.9 dB).
    pub ref_loss_db: f64,
    pub exponent: f64,
    pub shadowing_db: f64,
    pub decorrelation_m: f64,
    /// Beacon (CAM) period: one RSS sample each.
    pub beacon: Duration,
    pub sensitivity_dbm: f64,
    /// Below this the link is gone.
    pub cutoff_dbm: f64,
    /// (minimum RSS dBm, rate bit/s), best first.
    pub rates: Vec<(f64, f64)>,
    /// Whether the signal sets the link's rate (else only its losses and availability).
    pub adapt_rate: bool,
    /// Time over which the shadowing decorrelates without movement (fixed nodes in a changing
    /// environment); `None`: only distance moved decorrelates it.
    pub coherence: Option<Duration>,
}

impl Default for RadioSpec {
    fn default() -> Self {
        RadioSpec {
            tx_power_dbm: 23.0,
            ref_loss_db: 47.9,
            exponent: 2.7,
            shadowing_db: 4.0,
            decorrelation_m: 20.0,
            beacon: Duration::from_millis(100),
            sensitivity_dbm: -85.0,
            cutoff_dbm: -88.0,
            rates: vec![
                (-65.0, 27e6),
                (-68.0, 24e6),
                (-73.0, 18e6),
                (-77.0, 12e6),
                (-80.0, 9e6),
                (-82.0, 6e6),
                (-85.0, 4.5e6),
                (-88.0, 3e6),
            ],
            adapt_rate: true,
            coherence: None,
        }
    }
}

impl RadioSpec {
    /// Mean RSS at distance `d` (no shadowing).
    pub fn mean_rss(&self, d_m: f64) -> f64 {
        self.tx_power_dbm - self.ref_loss_db - 10.0 * self.exponent * d_m.max(1.0).log10()
    }

    /// Packet error rate at `rss`.
    pub fn per(&self, rss: f64) -> f64 {
        1.0 / (1.0 + ((rss - (self.sensitivity_dbm - 1.0)) / 0.5).exp())
    }

    /// PHY rate at `rss` (0 below the cut-off).
    pub fn rate(&self, rss: f64) -> f64 {
        if rss < self.cutoff_dbm {
            return 0.0;
        }
        self.rates
            .iter()
            .find(|(min, _)| rss >= *min)
            .map_or(self.rates.last().map_or(0.0, |r| r.1), |r| r.1)
    }

    pub fn validate(&self) -> Result<(), String> {
        if !(self.exponent > 0.0 && self.exponent < 10.0) {
            return Err("path-loss exponent must be within 0..10".into());
        }
        if self.shadowing_db < 0.0 || self.decorrelation_m <= 0.0 {
            return Err("shadowing must be ≥ 0 dB with a positive decorrelation distance".into());
        }
        if self.beacon < std::time::Duration::from_millis(1) {
            return Err("beacon period must be at least 1 ms".into());
        }
        if self.cutoff_dbm > self.sensitivity_dbm {
            return Err("cutoff must not exceed the sensitivity".into());
        }
        if [
            self.tx_power_dbm,
            self.ref_loss_db,
            self.shadowing_db,
            self.decorrelation_m,
            self.sensitivity_dbm,
            self.cutoff_dbm,
        ]
        .iter()
        .any(|v| !v.is_finite())
        {
            return Err("radio parameters must be finite numbers".into());
        }
        if self.rates.is_empty()
            || self
                .rates
                .iter()
                .any(|r| !(r.1 >= 1.0 && r.1 <= 1e13 && r.0.is_finite()))
        {
            return Err("rates need at least one entry, each within 1 bit/s to 10 Tbit/s".into());
        }
        if self.coherence.is_some_and(|c| c.is_zero()) {
            return Err("coherence must be positive".into());
        }
        Ok(())
    }
}

/// What one signal sample does to a link: whether packets get through at all (above the
/// cut-off), the PHY rate (never below the table's slowest entry) and the packet error rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Effect {
    pub audible: bool,
    pub rate: f64,
    pub per: f64,
}

impl RadioSpec {
    pub fn effect(&self, rss: f64) -> Effect {
        let audible = rss >= self.cutoff_dbm;
        Effect {
            audible,
            rate: self.rate(rss).max(self.rates.last().map_or(1e6, |x| x.1)),
            per: if audible { self.per(rss) } else { 1.0 },
        }
    }
}

/// Beacons below (above) the cut-off before a link counts as out of (back in) coverage: 1 s
/// at 10 Hz, a beacon-loss timeout.
pub const LOSS_BEACONS: u32 = 10;
pub const BACK_BEACONS: u32 = 10;

/// A link's coverage from its beacons: lost after [`LOSS_BEACONS`] inaudible ones in a row,
/// back after [`BACK_BEACONS`] audible ones (the simulator's and the lab's).
#[derive(Debug, Clone, Copy, Default)]
pub struct Coverage {
    below: u32,
    above_run: u32,
}

/// What a beacon did to a link's coverage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoverageChange {
    None,
    Lost,
    Back,
}

impl Coverage {
    /// Counts a beacon heard (`audible`) or not on a link that is `covered` now: whether it
    /// starts a run below the cut-off (a loss is dated from there), and the change it makes.
    pub fn count(&mut self, audible: bool, covered: bool) -> (bool, CoverageChange) {
        let mut first_below = false;
        if audible {
            self.below = 0;
            self.above_run += 1;
        } else {
            self.above_run = 0;
            self.below += 1;
            first_below = self.below == 1;
        }
        let change = if covered && self.below >= LOSS_BEACONS {
            CoverageChange::Lost
        } else if !covered && self.above_run >= BACK_BEACONS {
            CoverageChange::Back
        } else {
            CoverageChange::None
        };
        (first_below, change)
    }
}

/// A link's smoothed signal (the link's α) against its threshold T, for the recovery metric:
/// it crosses upwards when it rises above T plus the hysteresis, downwards when it falls below
/// T (the simulator's and the lab's).
#[derive(Debug, Clone, Copy, Default)]
pub struct SignalWatch {
    smoothed: Option<f64>,
    above: bool,
}

/// A crossing of [`SignalWatch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Crossing {
    /// Above T + h: the path manager may use the link again.
    Up,
    /// Below T again.
    Down,
}

impl SignalWatch {
    /// Smooths a heard sample: the smoothed value and, against `threshold` when the link has
    /// one, the crossing it makes.
    pub fn sample(
        &mut self,
        rss: f64,
        alpha: f64,
        threshold: Option<f64>,
        hysteresis: f64,
    ) -> (f64, Option<Crossing>) {
        let s = self
            .smoothed
            .map_or(rss, |p| (1.0 - alpha) * p + alpha * rss);
        self.smoothed = Some(s);
        let Some(th) = threshold else {
            return (s, None);
        };
        let crossing = if !self.above && s > th + hysteresis {
            self.above = true;
            Some(Crossing::Up)
        } else if self.above && s < th {
            self.above = false;
            Some(Crossing::Down)
        } else {
            None
        };
        (s, crossing)
    }
}

/// Correlated shadowing along a trajectory.
#[derive(Debug)]
pub struct Shadowing {
    value: f64,
    last_pos: Option<(f64, f64)>,
    rng: Pcg64Mcg,
    sigma: f64,
    decorrelation: f64,
}

impl Shadowing {
    pub fn new(seed: u64, sigma: f64, decorrelation: f64) -> Self {
        let mut rng = Pcg64Mcg::seed_from_u64(seed);
        let value = sigma * normal(&mut rng);
        Shadowing {
            value,
            last_pos: None,
            rng,
            sigma,
            decorrelation,
        }
    }

    /// The shadowing at a new position.
    pub fn at(&mut self, x: f64, y: f64) -> f64 {
        if let Some((px, py)) = self.last_pos {
            let moved = ((x - px).powi(2) + (y - py).powi(2)).sqrt();
            let rho = (-moved / self.decorrelation).exp();
            self.value =
                rho * self.value + (1.0 - rho * rho).sqrt() * self.sigma * normal(&mut self.rng);
        }
        self.last_pos = Some((x, y));
        self.value
    }

    /// The shadowing after its ends moved `moved_m` metres in all (a link between two nodes,
    /// whose positions both count).
    pub fn advance(&mut self, moved_m: f64) -> f64 {
        if moved_m > 0.0 {
            let rho = (-moved_m / self.decorrelation).exp();
            self.value =
                rho * self.value + (1.0 - rho * rho).sqrt() * self.sigma * normal(&mut self.rng);
        }
        self.value
    }
}

/// A standard normal draw (Box–Muller).
fn normal(rng: &mut Pcg64Mcg) -> f64 {
    let u1: f64 = rng.random::<f64>().max(1e-12);
    let u2: f64 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_loss_and_link_quality() {
        let r = RadioSpec::default();
        // 23 − 47.9 − 27·log10(100) = −78.9 dBm
        assert!((r.mean_rss(100.0) + 78.9).abs() < 1e-9);
        assert!(r.per(-70.0) < 1e-4);
        assert!((r.per(-86.0) - 0.5).abs() < 1e-9);
        assert!(r.per(-84.0) < 0.02);
        assert!((r.per(-85.0) - 0.119).abs() < 0.001);
        assert!(r.per(-88.0) > 0.98);
        assert_eq!(r.rate(-60.0), 27e6);
        assert_eq!(r.rate(-81.0), 6e6);
        assert_eq!(r.rate(-90.0), 0.0);
    }

    #[test]
    fn shadowing_is_correlated_over_short_distances() {
        let mut s = Shadowing::new(3, 4.0, 20.0);
        let mut near = Vec::new();
        let mut prev = s.at(0.0, 0.0);
        for k in 1..2000 {
            let v = s.at(k as f64 * 0.5, 0.0);
            near.push((v - prev).abs());
            prev = v;
        }
        let mean_step = near.iter().sum::<f64>() / near.len() as f64;
        // Half a metre apart: ρ ≈ 0.975, steps ≈ 0.9 dB on average, far below σ = 4 dB.
        assert!(mean_step < 1.5, "{mean_step}");
    }
}
