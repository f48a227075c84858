//! One direction of a link: capacity (fixed rate or a Mahimahi trace), propagation delay,
//! jitter (order-preserving unless asked), a drop-tail queue, Bernoulli loss and an up/down
//! state. Departure times are computed when a packet is enqueued, so a packet costs one event
//! (its arrival).

use std::collections::VecDeque;
use std::time::Duration;

use braid_core::Instant;
use rand::RngExt;
use rand_pcg::Pcg64Mcg;

use crate::trace::{OPPORTUNITY_BYTES, Trace};

/// Queue limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueLimit {
    Packets(u32),
    Bytes(u64),
}

/// Capacity of a direction.
#[derive(Debug, Clone, PartialEq)]
pub enum Capacity {
    /// Bits per second.
    Rate(f64),
    Trace(Trace),
}

#[derive(Debug, Clone)]
pub struct DirSpec {
    pub capacity: Capacity,
    pub delay: Duration,
    pub jitter: Duration,
    /// Allow jitter to reorder packets.
    pub reorder: bool,
    pub queue: QueueLimit,
    pub loss: f64,
    /// Bytes added to every datagram on the wire (UDP/IP headers, framing).
    pub overhead: u32,
}

/// Why a packet did not make it onto the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drop {
    Down,
    Queue,
    Loss,
}

/// Counters of a direction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DirStats {
    pub sent: u64,
    pub bytes: u64,
    pub dropped_down: u64,
    pub dropped_queue: u64,
    pub dropped_loss: u64,
    /// Packets lost because the link went down while they were queued or on the wire.
    pub lost_in_flight: u64,
}

#[derive(Debug)]
pub struct Direction {
    spec: DirSpec,
    up: bool,
    /// Incremented when the link goes down: packets sent in an earlier epoch are lost.
    pub epoch: u32,
    /// End of serialisation of the last queued packet, in ns.
    busy_until_ns: u64,
    /// Departure times (ns) and sizes of packets in the queue, for occupancy.
    queue: VecDeque<(u64, u32)>,
    queued_bytes: u64,
    /// Trace cursor: next opportunity index and bytes left in it.
    trace_next: u64,
    trace_left: u32,
    last_arrival: Instant,
    pub stats: DirStats,
}

impl Direction {
    pub fn new(spec: DirSpec) -> Self {
        Direction {
            spec,
            up: true,
            epoch: 0,
            busy_until_ns: 0,
            queue: VecDeque::new(),
            queued_bytes: 0,
            trace_next: 0,
            trace_left: 0,
            last_arrival: Instant::ZERO,
            stats: DirStats::default(),
        }
    }

    pub fn is_up(&self) -> bool {
        self.up
    }

    /// Changes the capacity (a radio's rate follows its signal); packets already queued keep
    /// their departure times.
    pub fn set_rate(&mut self, bps: f64) {
        if bps > 0.0 {
            self.spec.capacity = Capacity::Rate(bps);
        }
    }

    /// Changes the loss probability.
    pub fn set_loss(&mut self, p: f64) {
        self.spec.loss = p.clamp(0.0, 1.0);
    }

    pub fn set_up(&mut self, now: Instant, up: bool) {
        if self.up && !up {
            // Everything queued or on the wire is lost.
            self.stats.lost_in_flight += self.queue.len() as u64;
            self.queue.clear();
            self.queued_bytes = 0;
            self.busy_until_ns = now.micros() * 1000;
            self.epoch = self.epoch.wrapping_add(1);
        }
        self.up = up;
    }

    /// Packets in the queue (waiting or being serialised) at `now`.
    pub fn occupancy(&mut self, now: Instant) -> usize {
        self.expire(now.micros() * 1000);
        self.queue.len()
    }

    fn expire(&mut self, now_ns: u64) {
        while let Some(&(depart, size)) = self.queue.front() {
            if depart > now_ns {
                break;
            }
            self.queue.pop_front();
            self.queued_bytes -= u64::from(size);
        }
    }

    /// Offers a datagram of `size` bytes at `now`; returns its arrival time at the far end.
    pub fn send(&mut self, now: Instant, size: usize, rng: &mut Pcg64Mcg) -> Result<Instant, Drop> {
        if !self.up {
            self.stats.dropped_down += 1;
            return Err(Drop::Down);
        }
        let now_ns = now.micros() * 1000;
        self.expire(now_ns);
        let wire = size as u32 + self.spec.overhead;
        let full = match self.spec.queue {
            QueueLimit::Packets(n) => self.queue.len() >= n as usize,
            QueueLimit::Bytes(b) => self.queued_bytes + u64::from(wire) > b,
        };
        if full {
            self.stats.dropped_queue += 1;
            return Err(Drop::Queue);
        }
        if self.spec.loss > 0.0 && rng.random::<f64>() < self.spec.loss {
            self.stats.dropped_loss += 1;
            return Err(Drop::Loss);
        }
        let start = self.busy_until_ns.max(now_ns);
        let depart = match &self.spec.capacity {
            Capacity::Rate(bps) => start + (f64::from(wire) * 8.0 * 1e9 / bps).ceil() as u64,
            Capacity::Trace(trace) => self.trace_departure(trace.clone(), start, wire),
        };
        self.busy_until_ns = depart;
        self.queue.push_back((depart, wire));
        self.queued_bytes += u64::from(wire);
        self.stats.sent += 1;
        self.stats.bytes += u64::from(wire);
        let mut arrival = Instant::from_micros(depart.div_ceil(1000)) + self.spec.delay;
        if !self.spec.jitter.is_zero() {
            let j = rng.random_range(0..self.spec.jitter.as_micros() as u64);
            arrival += Duration::from_micros(j);
        }
        if !self.spec.reorder {
            arrival = arrival.max(self.last_arrival);
        }
        self.last_arrival = self.last_arrival.max(arrival);
        Ok(arrival)
    }

    /// Mahimahi semantics: the packet leaves with the opportunity that delivers its last byte;
    /// opportunities that pass while the queue is empty are wasted.
    fn trace_departure(&mut self, trace: Trace, start_ns: u64, wire: u32) -> u64 {
        let start_ms = start_ns.div_ceil(1_000_000);
        if self.trace_left == 0 || trace.time_ms(self.trace_next) < start_ms {
            self.trace_next = self.trace_next.max(trace.first_at_or_after(start_ms));
            self.trace_left = OPPORTUNITY_BYTES;
        }
        let mut remaining = wire;
        loop {
            let take = remaining.min(self.trace_left);
            remaining -= take;
            self.trace_left -= take;
            if remaining == 0 {
                let t = trace.time_ms(self.trace_next) * 1_000_000;
                if self.trace_left == 0 {
                    self.trace_next += 1;
                }
                return t.max(start_ns);
            }
            self.trace_next += 1;
            self.trace_left = OPPORTUNITY_BYTES;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn spec(capacity: Capacity) -> DirSpec {
        DirSpec {
            capacity,
            delay: Duration::from_millis(10),
            jitter: Duration::ZERO,
            reorder: false,
            queue: QueueLimit::Packets(3),
            loss: 0.0,
            overhead: 0,
        }
    }

    #[test]
    fn fixed_rate_serialises_and_drops_tail() {
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        // 8 Mbit/s: 1000 bytes take 1 ms.
        let mut d = Direction::new(spec(Capacity::Rate(8e6)));
        let t0 = Instant::ZERO;
        assert_eq!(d.send(t0, 1000, &mut rng), Ok(Instant::from_millis(11)));
        assert_eq!(d.send(t0, 1000, &mut rng), Ok(Instant::from_millis(12)));
        assert_eq!(d.send(t0, 1000, &mut rng), Ok(Instant::from_millis(13)));
        assert_eq!(d.send(t0, 1000, &mut rng), Err(Drop::Queue));
        // After 1 ms one packet left the queue.
        assert_eq!(d.occupancy(Instant::from_millis(1)), 2);
        assert_eq!(
            d.send(Instant::from_millis(1), 1000, &mut rng),
            Ok(Instant::from_millis(14))
        );
    }

    #[test]
    fn going_down_loses_the_queue() {
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        let mut d = Direction::new(spec(Capacity::Rate(8e6)));
        d.send(Instant::ZERO, 1000, &mut rng).unwrap();
        let e = d.epoch;
        d.set_up(Instant::ZERO, false);
        assert_ne!(d.epoch, e);
        assert_eq!(d.send(Instant::ZERO, 1000, &mut rng), Err(Drop::Down));
        assert_eq!(d.stats.lost_in_flight, 1);
    }

    #[test]
    fn trace_capacity_follows_opportunities() {
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        let trace = Trace::parse("2\n2\n7\n10\n").unwrap();
        let mut s = spec(Capacity::Trace(trace));
        s.queue = QueueLimit::Packets(100);
        let mut d = Direction::new(s);
        let at = |d: &mut Direction, rng: &mut Pcg64Mcg, size| {
            d.send(Instant::ZERO, size, rng).unwrap().micros() / 1000 - 10
        };
        assert_eq!(at(&mut d, &mut rng, 1500), 2);
        assert_eq!(at(&mut d, &mut rng, 1500), 2);
        assert_eq!(at(&mut d, &mut rng, 1500), 7);
        // A packet larger than one opportunity spans two.
        assert_eq!(at(&mut d, &mut rng, 3000), 12);
    }

    #[test]
    fn jitter_never_reorders_unless_asked() {
        let mut rng = Pcg64Mcg::seed_from_u64(7);
        let mut s = spec(Capacity::Rate(1e9));
        s.jitter = Duration::from_millis(5);
        s.queue = QueueLimit::Packets(1000);
        let mut d = Direction::new(s);
        let mut last = Instant::ZERO;
        for i in 0..500 {
            let a = d.send(Instant::from_micros(i * 10), 100, &mut rng).unwrap();
            assert!(a >= last);
            last = a;
        }
    }
}
