//! Active queue management of the tunnel's send queue: CoDel (RFC 8289) at the entry of the
//! reliable stream.
//!
//! The stream never loses an inner packet, so when the paths carry less than the inner flows
//! send, the backlog collects in the tunnel's send buffer instead of a router queue, and an
//! inner TCP flow sees no loss: its window grows to the receiver's and the tunnel holds seconds
//! of data (2 MB, 0.8 s, on a 20 Mbit/s link in the link-loss test). Everything else in that
//! direction waits behind it, the other direction's acknowledgements included, which starves
//! the opposite flow and stretches every hand-over. The tunnel is the bottleneck's queue, so it
//! manages it as a router would: the queue's delay is the time the oldest packet not yet sent
//! has waited since it was read from the TUN device; once it has stayed above `target` for
//! `interval`, arriving packets are dropped at CoDel's rate (`interval / sqrt(count)` apart)
//! until it falls below. The drop happens at entry rather than at the head (the stream's bytes
//! cannot be taken back once written), which delays the signal by one queue delay.
//!
//! Off by default (`[connection] queue_target_ms`): on one greedy flow the drops cost a little
//! of the links' use (the README has the figures), and pure TCP acknowledgements already skip
//! the queue on the per-packet carrier (`class::Classes::acks_per_packet`).
//!
//! Sans-IO: time and the queue's state are arguments.

use std::collections::VecDeque;
use std::time::Duration;

use braid_core::Instant;

/// CoDel's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AqmConfig {
    /// Acceptable standing queue delay (RFC 8289: 5 ms). Zero turns the AQM off.
    pub target: Duration,
    /// How long the delay must stay above `target` before drops begin, and the base of the
    /// drop spacing (RFC 8289: 100 ms, a worst-case RTT). The tunnel uses the largest smoothed
    /// RTT of its usable paths instead when that is longer.
    pub interval: Duration,
}

impl Default for AqmConfig {
    fn default() -> Self {
        AqmConfig {
            target: Duration::from_millis(5),
            interval: Duration::from_millis(100),
        }
    }
}

impl AqmConfig {
    /// Whether the AQM drops at all.
    pub fn enabled(&self) -> bool {
        !self.target.is_zero()
    }
}

/// CoDel's control state (RFC 8289 §5).
#[derive(Debug, Clone)]
pub struct Codel {
    cfg: AqmConfig,
    /// When the delay will have been above target for an interval (`None`: below target).
    first_above: Option<Instant>,
    dropping: bool,
    drop_next: Instant,
    count: u32,
    last_count: u32,
    /// Packets dropped.
    pub drops: u64,
}

impl Codel {
    /// CoDel with `cfg`, not dropping.
    pub fn new(cfg: AqmConfig) -> Codel {
        Codel {
            cfg,
            first_above: None,
            dropping: false,
            drop_next: Instant::ZERO,
            count: 0,
            last_count: 0,
            drops: 0,
        }
    }

    /// The configuration.
    pub fn config(&self) -> AqmConfig {
        self.cfg
    }

    /// A packet arrives at `now` while the queue's oldest packet has waited `delay` and
    /// `backlog` bytes wait (less than one packet never counts as a standing queue); `interval`
    /// is the interval in force. Returns whether to drop the arriving packet.
    pub fn on_arrival(
        &mut self,
        now: Instant,
        delay: Duration,
        backlog: u64,
        mtu: u64,
        interval: Duration,
    ) -> bool {
        if !self.cfg.enabled() {
            return false;
        }
        let ok_to_drop = if delay < self.cfg.target || backlog <= mtu {
            self.first_above = None;
            false
        } else {
            match self.first_above {
                None => {
                    self.first_above = Some(now + interval);
                    false
                }
                Some(t) => now >= t,
            }
        };
        if self.dropping {
            if !ok_to_drop {
                self.dropping = false;
                return false;
            }
            if now >= self.drop_next {
                self.count = self.count.saturating_add(1);
                self.drop_next = control_law(self.drop_next, interval, self.count);
                self.drops += 1;
                return true;
            }
            return false;
        }
        if !ok_to_drop {
            return false;
        }
        // Enter the dropping state; a recent episode resumes near its drop rate.
        self.dropping = true;
        let delta = self.count.saturating_sub(self.last_count);
        self.count = if delta > 1 && now.saturating_since(self.drop_next) < interval * 16 {
            delta
        } else {
            1
        };
        self.drop_next = control_law(now, interval, self.count);
        self.last_count = self.count;
        self.drops += 1;
        true
    }
}

/// The next drop time: `t + interval / sqrt(count)`.
fn control_law(t: Instant, interval: Duration, count: u32) -> Instant {
    t + interval.div_f64(f64::from(count.max(1)).sqrt())
}

/// When each packet in the send queue arrived, by the stream offset just past it: the queue's
/// delay is the age of the oldest packet the connection has not sent yet.
#[derive(Debug, Clone, Default)]
pub struct Arrivals {
    q: VecDeque<(u64, Instant)>,
}

impl Arrivals {
    /// A packet ending at stream offset `end` arrived at `now`.
    pub fn push(&mut self, end: u64, now: Instant) {
        self.q.push_back((end, now));
    }

    /// The queue's delay at `now` when the stream was sent up to offset `sent` (forgets the
    /// packets sent by then).
    pub fn delay(&mut self, now: Instant, sent: u64) -> Duration {
        while self.q.front().is_some_and(|&(end, _)| end <= sent) {
            self.q.pop_front();
        }
        self.q
            .front()
            .map_or(Duration::ZERO, |&(_, at)| now.saturating_since(at))
    }

    /// Forgets everything (a new connection).
    pub fn clear(&mut self) {
        self.q.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MTU: u64 = 1400;
    const IV: Duration = Duration::from_millis(100);

    fn ms(n: u64) -> Instant {
        Instant::from_millis(n)
    }

    #[test]
    fn a_queue_below_target_or_a_single_packet_is_never_dropped() {
        let mut c = Codel::new(AqmConfig::default());
        for t in 0..1000 {
            assert!(!c.on_arrival(ms(t), Duration::from_millis(4), 1 << 20, MTU, IV));
            assert!(!c.on_arrival(ms(t), Duration::from_millis(50), MTU, MTU, IV));
        }
        assert_eq!(c.drops, 0);
    }

    #[test]
    fn a_standing_queue_drops_after_an_interval_then_faster() {
        let mut c = Codel::new(AqmConfig::default());
        let delay = Duration::from_millis(30);
        let mut drops = Vec::new();
        for t in 0..600 {
            if c.on_arrival(ms(t), delay, 1 << 20, MTU, IV) {
                drops.push(t);
            }
        }
        // The first drop one interval after the delay went above target, the next ones at
        // interval / sqrt(count): 100 ms, 70.7 ms, 57.7 ms, 50 ms ... apart.
        assert_eq!(drops[0], 100);
        assert_eq!(drops[1], 200);
        assert_eq!(drops[2], 271);
        let gaps: Vec<u64> = drops.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.windows(2).all(|g| g[1] <= g[0]), "{gaps:?}");
        // The queue drains: drops stop at once, and a short spike after it drops nothing.
        assert!(!c.on_arrival(ms(600), Duration::from_millis(1), 1 << 20, MTU, IV));
        for t in 601..690 {
            assert!(!c.on_arrival(ms(t), delay, 1 << 20, MTU, IV));
        }
    }

    #[test]
    fn a_new_episode_soon_after_resumes_near_the_last_rate() {
        let mut c = Codel::new(AqmConfig::default());
        let high = Duration::from_millis(30);
        for t in 0..600 {
            c.on_arrival(ms(t), high, 1 << 20, MTU, IV);
        }
        let before = c.count;
        assert!(before > 3);
        c.on_arrival(ms(600), Duration::ZERO, 1 << 20, MTU, IV);
        let mut first = None;
        for t in 601..1000 {
            if c.on_arrival(ms(t), high, 1 << 20, MTU, IV) && first.is_none() {
                first = Some(t);
            }
        }
        assert_eq!(first, Some(701));
        assert!(c.count > 2, "resumed at count {}", c.count);
    }

    #[test]
    fn a_zero_target_turns_it_off() {
        let mut c = Codel::new(AqmConfig {
            target: Duration::ZERO,
            interval: IV,
        });
        for t in 0..1000 {
            assert!(!c.on_arrival(ms(t), Duration::from_secs(1), 1 << 30, MTU, IV));
        }
    }

    #[test]
    fn the_delay_is_the_age_of_the_oldest_unsent_packet() {
        let mut a = Arrivals::default();
        assert_eq!(a.delay(ms(5), 0), Duration::ZERO);
        a.push(1000, ms(10));
        a.push(2000, ms(20));
        a.push(3000, ms(30));
        assert_eq!(a.delay(ms(40), 0), Duration::from_millis(30));
        assert_eq!(a.delay(ms(40), 999), Duration::from_millis(30));
        assert_eq!(a.delay(ms(40), 1000), Duration::from_millis(20));
        assert_eq!(a.delay(ms(40), 2500), Duration::from_millis(10));
        assert_eq!(a.delay(ms(40), 3000), Duration::ZERO);
    }
}
