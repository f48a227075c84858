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
    /// Time constant of the jitter: zero draws it independently for every packet; otherwise it
    /// is a first-order autoregressive process (same spread) that decorrelates over this time,
    /// like the queueing of a cellular scheduler.
    pub jitter_period: Duration,
    /// Allow jitter to reorder packets.
    pub reorder: bool,
    pub queue: QueueLimit,
    pub loss: f64,
    /// Bytes added to every datagram on the wire (UDP/IP headers, framing).
    pub overhead: u32,
    /// Airtime every frame holds beyond its bytes at the link's rate: a wireless MAC's
    /// inter-frame spaces, mean backoff, preamble and link-layer acknowledgement (802.11b
    /// DSSS with a long preamble: ≈ 866 µs). It costs the same at every rate, so it takes a
    /// larger share of a fast link than of a slow one. Zero on a wire.
    pub frame_time: Duration,
    /// Link-layer retransmissions (a wireless MAC's ARQ): a frame lost on the air is sent
    /// again up to this many times before it is dropped, each attempt holding the medium for
    /// the frame's airtime and, from the second, a backoff that doubles from attempt to attempt
    /// (802.11's contention window, up to 32 × `retry_backoff`). Zero: a lost frame is dropped
    /// before it takes any airtime.
    pub retries: u32,
    /// The mean backoff of the first retransmission (802.11b: CWmin 31 × 20 µs slots, twice
    /// the first attempt's mean: 620 µs).
    pub retry_backoff: Duration,
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
    /// Of `sent`, the packets that carry stream data (a DATA frame): counted by the network
    /// that offers them ([`crate::world`]), which knows what a datagram holds.
    pub data_sent: u64,
}

#[derive(Debug)]
pub struct Direction {
    spec: DirSpec,
    /// The configured loss probability, which a radio's packet error rate adds to.
    base_loss: f64,
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
    /// Correlated jitter: current value (µs) and when it was drawn.
    jitter_us: f64,
    jitter_at: Instant,
    pub stats: DirStats,
}

impl Direction {
    pub fn new(spec: DirSpec) -> Self {
        let jitter_mid = spec.jitter.as_micros() as f64 / 2.0;
        Direction {
            base_loss: spec.loss,
            spec,
            up: true,
            epoch: 0,
            busy_until_ns: 0,
            queue: VecDeque::new(),
            queued_bytes: 0,
            trace_next: 0,
            trace_left: 0,
            last_arrival: Instant::ZERO,
            jitter_us: jitter_mid,
            jitter_at: Instant::ZERO,
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

    /// A radio's packet error rate for the current signal: a frame is lost to it or to the
    /// link's configured loss, independently (`1 − (1 − loss)(1 − per)`).
    pub fn set_radio_per(&mut self, per: f64) {
        let per = per.clamp(0.0, 1.0);
        // p + b(1 − p): exactly `per` when nothing is configured.
        self.spec.loss = per + self.base_loss * (1.0 - per);
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
        self.offer(now, size, rng, None)
    }

    /// As [`send`](Self::send) on a medium other directions share (one radio channel): the
    /// packet is serialised when both this direction and the medium are free, and holds the
    /// medium (`busy_until_ns`) until it has left.
    pub fn send_shared(
        &mut self,
        now: Instant,
        size: usize,
        rng: &mut Pcg64Mcg,
        busy_until_ns: &mut u64,
    ) -> Result<Instant, Drop> {
        self.offer(now, size, rng, Some(busy_until_ns))
    }

    fn offer(
        &mut self,
        now: Instant,
        size: usize,
        rng: &mut Pcg64Mcg,
        medium: Option<&mut u64>,
    ) -> Result<Instant, Drop> {
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
        // Attempts on the air: the first, then a retransmission per loss while retries last.
        let mut attempts = 1u32;
        let mut lost = false;
        while self.spec.loss > 0.0 && rng.random::<f64>() < self.spec.loss {
            if attempts > self.spec.retries {
                lost = true;
                break;
            }
            attempts += 1;
        }
        if lost && self.spec.retries == 0 {
            self.stats.dropped_loss += 1;
            return Err(Drop::Loss);
        }
        let mut start = self.busy_until_ns.max(now_ns);
        if let Some(m) = &medium {
            start = start.max(**m);
        }
        let frame_ns = self.spec.frame_time.as_nanos() as u64;
        // Saturating: a backlog on a very slow link (the bounds' copy of a link has no queue
        // limit) departs "never" rather than overflowing the clock.
        let mut depart = start;
        for k in 0..attempts {
            if k > 0 {
                let backoff = self.spec.retry_backoff.as_nanos() as u64;
                depart = depart.saturating_add(backoff << (k - 1).min(5));
            }
            depart = match &self.spec.capacity {
                Capacity::Rate(bps) => depart
                    .saturating_add(frame_ns)
                    .saturating_add((f64::from(wire) * 8.0 * 1e9 / bps).ceil() as u64),
                Capacity::Trace(trace) => {
                    self.trace_departure(trace.clone(), depart.saturating_add(frame_ns), wire)
                }
            };
        }
        self.busy_until_ns = depart;
        if let Some(m) = medium {
            *m = depart;
        }
        self.queue.push_back((depart, wire));
        self.queued_bytes += u64::from(wire);
        if lost {
            // Every retransmission failed: the airtime is spent (the frame holds its place in
            // the queue until then), the frame is gone.
            self.stats.dropped_loss += 1;
            return Err(Drop::Loss);
        }
        self.stats.sent += 1;
        self.stats.bytes += u64::from(wire);
        let mut arrival = Instant::from_micros(depart.div_ceil(1000)) + self.spec.delay;
        // The jitter is drawn in whole microseconds: a sub-microsecond jitter is none.
        if self.spec.jitter.as_micros() > 0 {
            arrival += Duration::from_micros(self.next_jitter(now, rng));
        }
        if !self.spec.reorder {
            arrival = arrival.max(self.last_arrival);
        }
        self.last_arrival = self.last_arrival.max(arrival);
        Ok(arrival)
    }

    /// A direction with this one's capacity and propagation delay, up, and nothing else: no
    /// loss, jitter, framing, per-frame airtime or queue limit. Offered a stream's bytes in
    /// order, it gives the earliest each could have arrived if the stream had the link to
    /// itself.
    pub fn unloaded(&self) -> Direction {
        Direction::new(DirSpec {
            capacity: self.spec.capacity.clone(),
            delay: self.spec.delay,
            jitter: Duration::ZERO,
            jitter_period: Duration::ZERO,
            reorder: false,
            queue: QueueLimit::Bytes(u64::MAX),
            loss: 0.0,
            overhead: 0,
            frame_time: Duration::ZERO,
            retries: 0,
            retry_backoff: Duration::ZERO,
        })
    }

    /// The current rate, for a direction that has one (not a trace).
    pub fn rate(&self) -> Option<f64> {
        match self.spec.capacity {
            Capacity::Rate(bps) => Some(bps),
            Capacity::Trace(_) => None,
        }
    }

    /// The earliest a datagram of `size` bytes offered at `now` could arrive with the queue
    /// empty and no jitter: a lower bound on its arrival whatever is queued; `None` while the
    /// direction is down. Changes nothing.
    pub fn earliest_arrival(&self, now: Instant, size: usize) -> Option<Instant> {
        if !self.up {
            return None;
        }
        let wire = size as u32 + self.spec.overhead;
        let start_ns = now.micros() * 1000 + self.spec.frame_time.as_nanos() as u64;
        let depart = match &self.spec.capacity {
            Capacity::Rate(bps) => {
                start_ns.saturating_add((f64::from(wire) * 8.0 * 1e9 / bps).ceil() as u64)
            }
            Capacity::Trace(trace) => {
                let first = trace.first_at_or_after(start_ns.div_ceil(1_000_000));
                let more = u64::from(wire.div_ceil(OPPORTUNITY_BYTES).max(1) - 1);
                trace
                    .time_ms(first + more)
                    .saturating_mul(1_000_000)
                    .max(start_ns)
            }
        };
        Some(Instant::from_micros(depart.div_ceil(1000)) + self.spec.delay)
    }

    /// A control packet (a routing hello) of `size` bytes offered at `now`: it goes ahead of
    /// the queue (control traffic has priority) but is lost like any packet when the link is
    /// down or by the link's loss; returns its arrival time. Not counted in [`DirStats`].
    pub fn control(
        &mut self,
        now: Instant,
        size: usize,
        rng: &mut Pcg64Mcg,
    ) -> Result<Instant, Drop> {
        if !self.up {
            return Err(Drop::Down);
        }
        if self.spec.loss > 0.0 && rng.random::<f64>() < self.spec.loss {
            return Err(Drop::Loss);
        }
        let wire = (size as u32 + self.spec.overhead) as f64 * 8.0;
        let serialise = self.spec.frame_time
            + match &self.spec.capacity {
                Capacity::Rate(bps) => Duration::from_secs_f64(wire / bps),
                Capacity::Trace(_) => Duration::ZERO,
            };
        Ok(now + serialise + self.spec.delay)
    }

    /// Extra delay of the next packet, in [0, jitter) µs.
    fn next_jitter(&mut self, now: Instant, rng: &mut Pcg64Mcg) -> u64 {
        let span = self.spec.jitter.as_micros() as u64;
        if self.spec.jitter_period.is_zero() {
            return rng.random_range(0..span);
        }
        // AR(1) around the middle of the span with the spread of a uniform draw:
        // x' = m + ρ(x − m) + √(1−ρ²)(u − m), ρ = exp(−Δt/τ).
        let dt = now.saturating_since(self.jitter_at).as_secs_f64();
        let rho = (-dt / self.spec.jitter_period.as_secs_f64()).exp();
        let mid = span as f64 / 2.0;
        let u = rng.random_range(0..span) as f64;
        let x = mid + rho * (self.jitter_us - mid) + (1.0 - rho * rho).sqrt() * (u - mid);
        self.jitter_us = x.clamp(0.0, (span - 1) as f64);
        self.jitter_at = now;
        self.jitter_us as u64
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
                let t = trace.time_ms(self.trace_next).saturating_mul(1_000_000);
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
            jitter_period: Duration::ZERO,
            reorder: false,
            queue: QueueLimit::Packets(3),
            loss: 0.0,
            overhead: 0,
            frame_time: Duration::ZERO,
            retries: 0,
            retry_backoff: Duration::ZERO,
        }
    }

    /// The share of 4000 frames, spaced so none waits, that `d` loses.
    fn lost_share(d: &mut Direction, rng: &mut Pcg64Mcg, from_ms: u64) -> f64 {
        let lost = (0..4000u64)
            .filter(|i| {
                let now = Instant::from_micros((from_ms + i * 10) * 1000);
                d.send(now, 100, rng) == Err(Drop::Loss)
            })
            .count();
        lost as f64 / 4000.0
    }

    #[test]
    fn a_radio_adds_its_losses_to_the_configured_ones() {
        let mut rng = Pcg64Mcg::seed_from_u64(5);
        let mut d = Direction::new(DirSpec {
            loss: 0.2,
            ..spec(Capacity::Rate(1e8))
        });
        let configured = lost_share(&mut d, &mut rng, 0);
        d.set_radio_per(0.5);
        let both = lost_share(&mut d, &mut rng, 50_000);
        d.set_radio_per(0.0);
        let again = lost_share(&mut d, &mut rng, 100_000);
        // 1 − 0.8 · 0.5 = 0.6; a good signal leaves the configured 0.2, not a lossless link.
        for (what, got, want) in [
            ("configured", configured, 0.2),
            ("both", both, 0.6),
            ("again", again, 0.2),
        ] {
            assert!(
                (got - want).abs() < 0.03,
                "{what}: {got} lost, expected {want}"
            );
        }
    }

    #[test]
    fn the_earliest_arrival_bounds_every_send() {
        let mut rng = Pcg64Mcg::seed_from_u64(3);
        // A trace with a gap from 3 to 900 ms, and a rate link.
        let trace = Trace::parse("1\n2\n3\n900\n901\n1000\n").unwrap();
        for cap in [Capacity::Trace(trace), Capacity::Rate(1e6)] {
            let mut d = Direction::new(DirSpec {
                queue: QueueLimit::Packets(1000),
                ..spec(cap)
            });
            for ms in (0..2500).step_by(7) {
                let now = Instant::from_micros(ms * 1000);
                let bound = d.earliest_arrival(now, 1200).unwrap();
                let at = d.send(now, 1200, &mut rng).unwrap();
                assert!(bound <= at, "{ms} ms: bound {bound:?} after arrival {at:?}");
            }
        }
        let mut d = Direction::new(spec(Capacity::Trace(
            Trace::parse("1\n2\n3\n900\n901\n1000\n").unwrap(),
        )));
        // In the gap: the next opportunity (900 ms) plus the delay; an empty queue meets it.
        let now = Instant::from_micros(10_000);
        assert_eq!(
            d.earliest_arrival(now, 100),
            Some(Instant::from_micros(910_000))
        );
        assert_eq!(
            d.send(now, 100, &mut rng),
            Ok(Instant::from_micros(910_000))
        );
        d.set_up(now, false);
        assert_eq!(d.earliest_arrival(now, 100), None);
    }

    /// A backlog that would outlast the clock (1 bit/s, no queue limit, as the bounds' copy
    /// of a link has): its packets depart "never", in order, without overflow.
    #[test]
    fn a_backlog_beyond_the_clock_saturates() {
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        let slow_trace = Trace::parse(&format!("{}\n", crate::trace::MAX_TRACE_MS)).unwrap();
        for cap in [Capacity::Rate(1.0), Capacity::Trace(slow_trace)] {
            let mut d = Direction::new(DirSpec {
                queue: QueueLimit::Packets(u32::MAX),
                ..spec(cap)
            });
            let mut last = Instant::ZERO;
            for _ in 0..2_000_000 {
                let at = d.send(Instant::ZERO, 1500, &mut rng).unwrap();
                assert!(at >= last);
                last = at;
            }
            assert!(last.micros() > u64::MAX / 1000 / 2, "{last:?}");
            assert!(d.earliest_arrival(Instant::ZERO, 1500).is_some());
        }
    }

    #[test]
    fn a_frame_overhead_costs_the_same_airtime_at_every_rate() {
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        // 1000 bytes at 8 and at 1 Mbit/s: 1 and 8 ms on the wire, plus 0.5 ms per frame.
        for (bps, bits_ms) in [(8e6, 1.0), (1e6, 8.0)] {
            let mut d = Direction::new(DirSpec {
                frame_time: Duration::from_micros(500),
                queue: QueueLimit::Packets(10),
                ..spec(Capacity::Rate(bps))
            });
            let a = d.send(Instant::ZERO, 1000, &mut rng).unwrap();
            let b = d.send(Instant::ZERO, 1000, &mut rng).unwrap();
            let per_frame = bits_ms + 0.5;
            assert_eq!(
                a,
                Instant::from_micros((per_frame * 1000.0) as u64 + 10_000)
            );
            assert_eq!(
                b,
                Instant::from_micros((2.0 * per_frame * 1000.0) as u64 + 10_000)
            );
        }
        // A hello pays it too.
        let mut d = Direction::new(DirSpec {
            frame_time: Duration::from_micros(500),
            ..spec(Capacity::Rate(8e6))
        });
        let h = d.control(Instant::ZERO, 1000, &mut rng).unwrap();
        assert_eq!(h, Instant::from_micros(1500 + 10_000));
    }

    #[test]
    fn link_layer_retransmissions_turn_losses_into_airtime() {
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        // 1000 bytes at 8 Mbit/s (1 ms) + 0.5 ms per attempt; retries wait 1, 2, 4 ms first.
        let arq = |loss| DirSpec {
            loss,
            frame_time: Duration::from_micros(500),
            retries: 3,
            retry_backoff: Duration::from_millis(1),
            queue: QueueLimit::Packets(10),
            ..spec(Capacity::Rate(8e6))
        };
        // Every attempt fails: four attempts' airtime and three backoffs are spent, then the
        // frame is dropped, and the next frame waits for all of it.
        let mut d = Direction::new(arq(1.0));
        assert_eq!(d.send(Instant::ZERO, 1000, &mut rng), Err(Drop::Loss));
        assert_eq!(d.stats.dropped_loss, 1);
        assert_eq!(
            d.occupancy(Instant::ZERO),
            1,
            "it holds its place until then"
        );
        d.set_loss(0.0);
        let spent_us = 4 * 1500 + 1000 + 2000 + 4000;
        assert_eq!(
            d.send(Instant::ZERO, 1000, &mut rng),
            Ok(Instant::from_micros(spent_us + 1500 + 10_000))
        );
        // Lossy: almost every frame arrives (all four attempts fail with 0.3⁴ < 1 %), later
        // than a first attempt would, and never out of order.
        let mut d = Direction::new(DirSpec {
            queue: QueueLimit::Packets(100_000),
            ..arq(0.3)
        });
        let (mut arrived, mut last) = (0, Instant::ZERO);
        for i in 0..10_000u64 {
            let now = Instant::from_micros(i * 20_000);
            if let Ok(at) = d.send(now, 1000, &mut rng) {
                arrived += 1;
                assert!(at >= now + Duration::from_micros(11_500));
                assert!(at >= last);
                last = at;
            }
        }
        assert!((9_900..10_000).contains(&arrived), "{arrived}");
        // No retries: a loss drops the frame before it takes airtime (the next one is not
        // delayed), drawing one random number per frame as before.
        let mut d = Direction::new(DirSpec {
            retries: 0,
            ..arq(1.0)
        });
        assert_eq!(d.send(Instant::ZERO, 1000, &mut rng), Err(Drop::Loss));
        assert_eq!(d.occupancy(Instant::ZERO), 0);
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
    fn a_shared_medium_serialises_both_directions() {
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        // Two directions of 8 Mbit/s on one medium: 1000 bytes take 1 ms each, one at a time.
        let mut a = Direction::new(spec(Capacity::Rate(8e6)));
        let mut b = Direction::new(spec(Capacity::Rate(8e6)));
        let mut air = 0u64;
        let t0 = Instant::ZERO;
        assert_eq!(
            a.send_shared(t0, 1000, &mut rng, &mut air),
            Ok(Instant::from_millis(11))
        );
        assert_eq!(
            b.send_shared(t0, 1000, &mut rng, &mut air),
            Ok(Instant::from_millis(12))
        );
        assert_eq!(
            a.send_shared(t0, 1000, &mut rng, &mut air),
            Ok(Instant::from_millis(13))
        );
        assert_eq!(air, 3_000_000);
        // Alone, b would have sent at once.
        let mut c = Direction::new(spec(Capacity::Rate(8e6)));
        assert_eq!(c.send(t0, 1000, &mut rng), Ok(Instant::from_millis(11)));
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

    /// Mean absolute change of the extra delay between packets 1 ms apart, and its spread.
    fn jitter_profile(period: Duration) -> (f64, f64) {
        let mut rng = Pcg64Mcg::seed_from_u64(3);
        let mut s = spec(Capacity::Rate(1e12));
        s.jitter = Duration::from_millis(10);
        s.jitter_period = period;
        s.reorder = true;
        s.queue = QueueLimit::Packets(100_000);
        let mut d = Direction::new(s);
        let extra: Vec<f64> = (0..20_000)
            .map(|i| {
                let now = Instant::from_millis(i);
                let a = d.send(now, 100, &mut rng).unwrap();
                (a.saturating_since(now).as_micros() as f64 - 10_000.0) / 1e3
            })
            .collect();
        let step = extra.windows(2).map(|w| (w[1] - w[0]).abs()).sum::<f64>() / 19_999.0;
        let mean = extra.iter().sum::<f64>() / extra.len() as f64;
        let sd =
            (extra.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / extra.len() as f64).sqrt();
        assert!(
            extra.iter().all(|&x| (0.0..10.01).contains(&x)),
            "within the span (plus 1 µs of serialisation)"
        );
        (step, sd)
    }

    #[test]
    fn correlated_jitter_keeps_its_spread_but_changes_slowly() {
        let (step_iid, sd_iid) = jitter_profile(Duration::ZERO);
        let (step_ar, sd_ar) = jitter_profile(Duration::from_millis(100));
        // Uniform on [0, 10) ms: sd 2.89 ms, mean |step| 3.33 ms.
        assert!((sd_iid - 2.89).abs() < 0.1, "{sd_iid}");
        assert!((step_iid - 3.33).abs() < 0.15, "{step_iid}");
        assert!(sd_ar > 2.0 && sd_ar < 3.2, "{sd_ar}");
        assert!(step_ar < step_iid / 5.0, "{step_ar} vs {step_iid}");
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
