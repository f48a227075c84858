//! What the links can carry, learned from what they delivered: the estimate behind the
//! capacity-aware cross-layer modes (`cross-cap`, `cross-backup-cap`).
//!
//! Seed 000's Algorithm 1 demotes a link whose signal fades whatever the other links can carry
//! at that moment; with a real cellular link beside it, that hands a stream to a link that
//! cannot take it seconds before it has to. The capacity-aware modes demote only when the
//! links that would carry the stream have been seen carrying it.
//!
//! The runtime reports, every [`CapacityConfig::sample`], the bytes each interface has carried
//! so far (stream bytes sent plus received, all connections, a counter that only grows). From
//! those the estimator keeps:
//! - the **demand**: the median of the total delivery rate (an EWMA with a 1 s time constant)
//!   over the last `demand_window`. The median, not the peak: when a link comes back, the
//!   backlog that built up while the others could not carry the stream drains at several
//!   times the application's rate for a few seconds, which is not what the application
//!   needs;
//! - per interface, what it **carried** while it was the main carrier (at least `main_share`
//!   of the total): an exponentially weighted mean of its rate over such intervals, with the
//!   time it was last updated. Until the time constant has passed it is the plain mean of the
//!   intervals seen, so the first one (which holds a shaper's burst or a handed-over backlog)
//!   does not dominate. Its 20 s time constant covers the whole of a period in which the link
//!   carried the stream, not its last seconds (a cellular trace's delivery gaps and bursts). A link
//!   that carried the stream at the application's rate has shown it can; one that delivered
//!   less while it carried everything has shown it cannot. An estimate older than `horizon` is
//!   forgotten.
//!
//! A link that has not carried anything yet gives no evidence; the modes then act as
//! Algorithm 1 does (see `Manager`). The defaults were chosen on E7/E8 with the real cellular
//! traces (README); `[pm.capacity]` in a scenario changes them.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use braid_core::Instant;

use crate::event::IfaceId;

/// Settings of the capacity estimate (defaults need no tuning for the seeds' rates).
#[derive(Debug, Clone, PartialEq)]
pub struct CapacityConfig {
    /// How often the runtime reports the interfaces' byte counters.
    pub sample: Duration,
    /// The demand is the median delivery rate over this window.
    pub demand_window: Duration,
    /// What an interface carried is forgotten after this long without new evidence.
    pub horizon: Duration,
    /// The other links can carry the stream when what they carried is at least this share of
    /// the demand.
    pub headroom: f64,
    /// An interface is the main carrier of an interval when it carried at least this share of
    /// the total.
    pub main_share: f64,
    /// A fading link kept active because the others cannot carry the demand is demoted anyway
    /// once its smoothed signal falls this far below its threshold T: it is about to fail, and
    /// moving before it does saves the retransmission timeout that would find out.
    pub floor_db: f64,
}

impl Default for CapacityConfig {
    fn default() -> Self {
        CapacityConfig {
            sample: Duration::from_millis(250),
            demand_window: Duration::from_secs(40),
            horizon: Duration::from_secs(120),
            headroom: 0.9,
            main_share: 0.95,
            floor_db: 2.0,
        }
    }
}

impl CapacityConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.sample < Duration::from_millis(1) {
            return Err("capacity sample interval must be at least 1 ms".into());
        }
        if self.demand_window < self.sample {
            return Err("capacity demand_window must be at least one sample interval".into());
        }
        if !(self.headroom > 0.0 && self.headroom.is_finite()) {
            return Err("capacity headroom must be a positive number".into());
        }
        if !(self.main_share > 0.5 && self.main_share <= 1.0) {
            return Err("capacity main_share must be within (0.5, 1]".into());
        }
        if !(self.floor_db >= 0.0 && self.floor_db.is_finite()) {
            return Err("capacity floor_db must be zero or positive (dB)".into());
        }
        Ok(())
    }
}

/// Below this demand a connection is idle: any link can carry it.
const IDLE_BPS: f64 = 64_000.0;
/// Time constant of the total rate's smoothing.
const TOTAL_TAU: f64 = 1.0;
/// Time constant of the smoothing of what a main carrier delivered.
const CARRIED_TAU: f64 = 20.0;
/// Intervals shorter than this are merged into the next one (rates over a few milliseconds
/// are noise).
const MIN_INTERVAL: Duration = Duration::from_millis(50);

#[derive(Debug, Clone, Default)]
struct Link {
    /// The counter at the last sample.
    bytes: u64,
    /// Rate over the last interval, bit/s.
    rate: f64,
    /// What it carried as the main carrier and when that was last seen.
    carried: Option<(Mean, Instant)>,
}

/// An exponentially weighted mean that weighs every sample by its interval, the first ones
/// included: until the time constant has passed it is the plain time-weighted mean of what was
/// seen, not the first sample decayed. A first interval that includes a burst (a shaper's
/// bucket, a backlog handed over at once) therefore counts as one interval among the others.
#[derive(Debug, Clone, Copy)]
struct Mean {
    /// Sum of weighted samples and sum of weights, both decayed with age.
    sum: f64,
    weight: f64,
}

impl Mean {
    /// Adds `value`, measured over `dt`. Only the intervals the mean takes in age it: a link
    /// that carries the stream again after a while resumes its mean where it stood.
    fn add(prev: Option<Mean>, value: f64, dt: Duration, tau: f64) -> Mean {
        let w = 1.0 - (-dt.as_secs_f64() / tau).exp();
        let keep = 1.0 - w;
        let (sum, weight) = prev.map_or((0.0, 0.0), |m| (m.sum * keep, m.weight * keep));
        Mean {
            sum: sum + w * value,
            weight: weight + w,
        }
    }

    fn value(&self) -> f64 {
        if self.weight > 0.0 {
            self.sum / self.weight
        } else {
            0.0
        }
    }
}

/// The estimate; sans-IO (time is an argument).
#[derive(Debug, Clone)]
pub struct Estimator {
    cfg: CapacityConfig,
    last: Option<Instant>,
    /// Start of the last interval measured.
    interval_start: Option<Instant>,
    links: BTreeMap<IfaceId, Link>,
    total: Option<f64>,
    /// (time, smoothed total rate) over the demand window.
    recent: VecDeque<(Instant, f64)>,
    samples: u64,
}

fn ewma(prev: Option<f64>, value: f64, dt: Duration, tau: f64) -> f64 {
    match prev {
        None => value,
        Some(p) => {
            let w = 1.0 - (-dt.as_secs_f64() / tau).exp();
            p + w * (value - p)
        }
    }
}

impl Estimator {
    pub fn new(cfg: CapacityConfig) -> Self {
        Estimator {
            cfg,
            last: None,
            interval_start: None,
            links: BTreeMap::new(),
            total: None,
            recent: VecDeque::new(),
            samples: 0,
        }
    }

    pub fn config(&self) -> &CapacityConfig {
        &self.cfg
    }

    /// Takes the byte counters of every interface at `now`. A counter that went down (a
    /// runtime that replaced its connection) restarts from its new value. Returns whether the
    /// estimate changed.
    pub fn sample(&mut self, now: Instant, bytes: &[(IfaceId, u64)]) -> bool {
        let Some(last) = self.last else {
            self.last = Some(now);
            for &(i, b) in bytes {
                self.links.entry(i).or_default().bytes = b;
            }
            return false;
        };
        let dt = now.saturating_since(last);
        if dt < MIN_INTERVAL {
            return false;
        }
        self.last = Some(now);
        self.interval_start = Some(last);
        self.samples += 1;
        let secs = dt.as_secs_f64();
        let mut total = 0.0;
        for &(i, b) in bytes {
            let l = self.links.entry(i).or_default();
            let delta = b.saturating_sub(l.bytes);
            l.bytes = b;
            l.rate = delta as f64 * 8.0 / secs;
            total += l.rate;
        }
        let (share, horizon) = (self.cfg.main_share, self.cfg.horizon);
        for l in self.links.values_mut() {
            if total > 0.0 && l.rate >= share * total {
                // Evidence older than the horizon is forgotten, not averaged in.
                let prev = l
                    .carried
                    .filter(|&(_, at)| now.saturating_since(at) <= horizon)
                    .map(|(m, _)| m);
                l.carried = Some((Mean::add(prev, l.rate, dt, CARRIED_TAU), now));
            }
        }
        let smoothed = ewma(self.total, total, dt, TOTAL_TAU);
        self.total = Some(smoothed);
        self.recent.push_back((now, smoothed));
        while self
            .recent
            .front()
            .is_some_and(|&(t, _)| now.saturating_since(t) > self.cfg.demand_window)
        {
            self.recent.pop_front();
        }
        true
    }

    /// The demand (bit/s): the median smoothed total rate over the demand window; `None`
    /// before two samples.
    pub fn demand_bps(&self) -> Option<f64> {
        if self.recent.is_empty() {
            return None;
        }
        let mut v: Vec<f64> = self.recent.iter().map(|&(_, v)| v).collect();
        v.sort_by(f64::total_cmp);
        Some(v[v.len() / 2])
    }

    /// Rate of the interface over the last interval (bit/s).
    pub fn rate_bps(&self, iface: IfaceId) -> Option<f64> {
        self.last?;
        self.links.get(&iface).map(|l| l.rate)
    }

    /// What the interface carried as the main carrier, if seen within the horizon.
    pub fn carried_bps(&self, now: Instant, iface: IfaceId) -> Option<f64> {
        let (m, at) = self.links.get(&iface)?.carried?;
        (now.saturating_since(at) <= self.cfg.horizon).then_some(m.value())
    }

    /// Whether the interface carried the demand over the last interval, if that interval began
    /// at or after `since` (`None` until one has): at least `headroom` × the demand, or any
    /// rate while the stream is idle or no demand is known yet.
    pub fn carried_since(&self, iface: IfaceId, since: Instant) -> Option<bool> {
        if self.interval_start? < since {
            return None;
        }
        let Some(demand) = self.demand_bps().filter(|&d| d >= IDLE_BPS) else {
            return Some(true);
        };
        let rate = self.links.get(&iface).map_or(0.0, |l| l.rate);
        Some(rate >= self.cfg.headroom * demand)
    }

    /// Whether the interfaces `others` can carry the demand: `None` when nothing is known (no
    /// demand measured yet, or none of them has carried anything within the horizon), then
    /// `Some(true)` for an idle connection or when what they carried reaches `headroom` × the
    /// demand.
    pub fn can_carry(
        &self,
        now: Instant,
        others: impl IntoIterator<Item = IfaceId>,
    ) -> Option<bool> {
        let demand = self.demand_bps()?;
        if demand < IDLE_BPS {
            return Some(true);
        }
        let mut known = false;
        let mut sum = 0.0;
        for i in others {
            if let Some(v) = self.carried_bps(now, i) {
                known = true;
                sum += v;
            }
        }
        known.then_some(sum >= self.cfg.headroom * demand)
    }

    /// Whether the links `others` have been seen carrying a demand that is there: what they
    /// carried adds up to `headroom` × the demand, and the stream is not idle. Unlike
    /// [`can_carry`](Self::can_carry), no evidence is a no.
    pub fn carried_demand(&self, now: Instant, others: impl IntoIterator<Item = IfaceId>) -> bool {
        let Some(demand) = self.demand_bps().filter(|&d| d >= IDLE_BPS) else {
            return false;
        };
        let carried: f64 = others
            .into_iter()
            .filter_map(|i| self.carried_bps(now, i))
            .sum();
        carried >= self.cfg.headroom * demand
    }

    /// Samples taken (intervals measured).
    pub fn samples(&self) -> u64 {
        self.samples
    }
}

/// Bytes carried per interface, from the counters of paths (subflows) that come and go: each
/// path's counter is read whole every time, and what it gained since the last read is added
/// to its interface. A path that closes keeps what it carried; the totals only grow. `K`
/// names a path (a connection's path id, a socket's four-tuple).
#[derive(Debug, Clone)]
pub struct Carried<K> {
    totals: BTreeMap<IfaceId, u64>,
    seen: BTreeMap<K, u64>,
}

impl<K> Default for Carried<K> {
    fn default() -> Self {
        Carried {
            totals: BTreeMap::new(),
            seen: BTreeMap::new(),
        }
    }
}

impl<K: Ord + Copy> Carried<K> {
    /// Reads the open paths' counters: (path, its interface, bytes over its life). Paths not
    /// listed are forgotten (their bytes stay in the totals).
    pub fn update(&mut self, paths: impl IntoIterator<Item = (K, IfaceId, u64)>) {
        let mut open = Vec::new();
        for (k, iface, bytes) in paths {
            let last = self.seen.entry(k).or_insert(0);
            *self.totals.entry(iface).or_insert(0) += bytes.saturating_sub(*last);
            *last = bytes;
            open.push(k);
        }
        self.seen.retain(|k, _| open.contains(k));
    }

    /// What interface `iface` carried so far.
    pub fn total(&self, iface: IfaceId) -> u64 {
        self.totals.get(&iface).copied().unwrap_or(0)
    }

    /// Every interface that carried anything, with its total.
    pub fn totals(&self) -> Vec<(IfaceId, u64)> {
        self.totals.iter().map(|(&i, &b)| (i, b)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: IfaceId = IfaceId(0);
    const B: IfaceId = IfaceId(1);

    fn ms(v: u64) -> Instant {
        Instant::from_millis(v)
    }

    /// Feeds `secs` seconds of samples at `rates` bit/s per interface from `t0` (ms).
    fn feed(e: &mut Estimator, t0: u64, secs: u64, bytes: &mut [u64; 2], rates: [f64; 2]) -> u64 {
        let step = 250;
        let mut t = t0;
        while t < t0 + secs * 1000 {
            t += step;
            for k in 0..2 {
                bytes[k] += (rates[k] * step as f64 / 8000.0) as u64;
            }
            e.sample(ms(t), &[(A, bytes[0]), (B, bytes[1])]);
        }
        t
    }

    #[test]
    fn a_link_that_carried_the_stream_can_carry_it_again() {
        let mut e = Estimator::new(CapacityConfig::default());
        let mut b = [0, 0];
        e.sample(ms(0), &[(A, 0), (B, 0)]);
        assert_eq!(e.can_carry(ms(0), [B]), None, "nothing measured yet");
        // B alone carries 4 Mbit/s, then A takes the stream.
        let t = feed(&mut e, 0, 20, &mut b, [0.0, 4e6]);
        let t = feed(&mut e, t, 30, &mut b, [4e6, 0.0]);
        assert!((e.demand_bps().unwrap() - 4e6).abs() < 1e5);
        assert!((e.carried_bps(ms(t), B).unwrap() - 4e6).abs() < 1e5);
        assert_eq!(e.can_carry(ms(t), [B]), Some(true));
        // The evidence expires.
        assert_eq!(e.can_carry(ms(t + 200_000), [B]), None);
    }

    #[test]
    fn a_link_that_fell_short_cannot() {
        let mut e = Estimator::new(CapacityConfig::default());
        let mut b = [0, 0];
        e.sample(ms(0), &[(A, 0), (B, 0)]);
        // B alone delivers 2 Mbit/s (a 4 Mbit/s stream queueing), then A carries 4 Mbit/s.
        let t = feed(&mut e, 0, 10, &mut b, [0.0, 2e6]);
        let t = feed(&mut e, t, 30, &mut b, [4e6, 0.0]);
        assert_eq!(e.can_carry(ms(t), [B]), Some(false));
        // The demand is remembered while B alone carries the stream again at 2 Mbit/s, so
        // B's shortfall shows within a few seconds.
        let t2 = feed(&mut e, t, 4, &mut b, [0.0, 2e6]);
        assert_eq!(e.can_carry(ms(t2), [B]), Some(false));
        assert!(e.demand_bps().unwrap() > 3.5e6);
    }

    #[test]
    fn a_burst_in_the_first_interval_counts_as_one_interval_among_the_others() {
        let mut e = Estimator::new(CapacityConfig::default());
        let mut b = [0, 0];
        e.sample(ms(0), &[(A, 0), (B, 0)]);
        let t = feed(&mut e, 0, 10, &mut b, [4e6, 0.0]);
        // B takes the stream: its first interval holds a shaper's 32 KB bucket on top of its
        // 2 Mbit/s, then 4 s at 2 Mbit/s. (Seeding a smoothing with the first interval would
        // report 2.9 Mbit/s.)
        b[1] += 32 * 1024;
        let t = feed(&mut e, t, 4, &mut b, [0.0, 2e6]);
        let v = e.carried_bps(ms(t), B).unwrap();
        assert!((2.0e6..2.1e6).contains(&v), "{v}");
        // 60 s later B carries 4 Mbit/s for 2 s: its mean resumes where it stood (2.8 Mbit/s,
        // not the 4 Mbit/s of a fresh start).
        let t = feed(&mut e, t, 60, &mut b, [4e6, 0.0]);
        let t = feed(&mut e, t, 2, &mut b, [0.0, 4e6]);
        let v = e.carried_bps(ms(t), B).unwrap();
        assert!((2.7e6..2.9e6).contains(&v), "{v}");
        // Beyond the horizon, the old evidence is gone: only the new counts.
        let t = feed(&mut e, t, 130, &mut b, [4e6, 0.0]);
        let t = feed(&mut e, t, 1, &mut b, [0.0, 1e6]);
        assert!((e.carried_bps(ms(t), B).unwrap() - 1e6).abs() < 1e3);
    }

    #[test]
    fn carried_since_counts_only_whole_intervals_after_the_time_given() {
        let mut e = Estimator::new(CapacityConfig::default());
        let mut b = [0, 0];
        e.sample(ms(0), &[(A, 0), (B, 0)]);
        let t = feed(&mut e, 0, 20, &mut b, [0.0, 4e6]);
        // A returns at t + 100: the interval that began at t does not count.
        let t = feed(&mut e, t, 1, &mut b, [0.0, 4e6]);
        assert_eq!(e.carried_since(A, ms(t - 150)), None);
        // A carries half the demand, then all of it.
        let t = feed(&mut e, t, 1, &mut b, [2e6, 2e6]);
        assert_eq!(e.carried_since(A, ms(t - 1000)), Some(false));
        let t = feed(&mut e, t, 1, &mut b, [4e6, 0.0]);
        assert_eq!(e.carried_since(A, ms(t - 1000)), Some(true));
        // An idle stream: any link carries it.
        let mut e = Estimator::new(CapacityConfig::default());
        e.sample(ms(0), &[(A, 0), (B, 0)]);
        e.sample(ms(1000), &[(A, 0), (B, 1000)]);
        assert_eq!(e.carried_since(A, ms(0)), Some(true));
    }

    #[test]
    fn idle_connections_and_restarted_counters() {
        let mut e = Estimator::new(CapacityConfig::default());
        e.sample(ms(0), &[(A, 1000), (B, 0)]);
        e.sample(ms(1000), &[(A, 2000), (B, 0)]);
        assert_eq!(e.can_carry(ms(1000), [B]), Some(true), "8 kbit/s is idle");
        // A counter going down (a new connection) restarts without a negative rate.
        e.sample(ms(2000), &[(A, 10), (B, 0)]);
        assert_eq!(e.rate_bps(A), Some(0.0));
        // Samples closer than the minimum interval are merged into the next.
        assert!(!e.sample(ms(2010), &[(A, 1_000_000), (B, 0)]));
        assert!(e.sample(ms(3000), &[(A, 1_000_010), (B, 0)]));
        assert!((e.rate_bps(A).unwrap() - 8e6).abs() < 1.0);
    }

    #[test]
    fn carried_bytes_only_grow_and_keep_closed_paths() {
        let mut c = Carried::<u32>::default();
        c.update([(1, A, 100), (2, A, 50), (3, B, 10)]);
        assert_eq!(c.totals(), vec![(A, 150), (B, 10)]);
        // Path 2 closes, path 1 grows, path 4 opens on B.
        c.update([(1, A, 300), (3, B, 10), (4, B, 5)]);
        assert_eq!((c.total(A), c.total(B)), (350, 15));
        // A path id seen again after it closed counts from zero.
        c.update([(2, A, 7)]);
        assert_eq!(c.total(A), 357);
        assert_eq!(c.total(IfaceId(9)), 0);
    }

    #[test]
    fn config_checked() {
        assert!(CapacityConfig::default().validate().is_ok());
        let bad = |f: fn(&mut CapacityConfig)| {
            let mut c = CapacityConfig::default();
            f(&mut c);
            c.validate().unwrap_err()
        };
        assert!(bad(|c| c.sample = Duration::ZERO).contains("sample"));
        assert!(bad(|c| c.headroom = f64::NAN).contains("headroom"));
        assert!(bad(|c| c.main_share = 0.3).contains("main_share"));
        assert!(bad(|c| c.floor_db = -1.0).contains("floor_db"));
        assert!(bad(|c| c.demand_window = Duration::from_millis(1)).contains("demand_window"));
    }
}
