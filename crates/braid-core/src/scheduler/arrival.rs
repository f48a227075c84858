//! Earliest estimated arrival: the next segment goes on the path where it would arrive first,
//! counting the queue the connection's own packets make there, and the scheduler waits when
//! that path's window is full.
//!
//! minRTT fills every path's window, fastest first. Beside a much slower path (a weak
//! cellular link beside a fixed one), the slow path's window grows into its bottleneck queue,
//! its segments arrive seconds after those the fast path sends meanwhile, and the in-order
//! stream waits for them: in the simulator, through the tunnel, 100 + 1 Mbit/s gave 23 Mbit/s
//! where the 100 Mbit/s link alone gives 84. Here a path gets a segment only while that
//! segment would arrive no later than on any other path:
//!
//! `arrival(p) = min_rtt(p) + max(0, in_flight(p) + mss − rate(p) · min_rtt(p)) / rate(p)`
//!
//! with `rate` the path's delivery rate (the largest over its last few RTT-long intervals;
//! `cwnd / srtt` before one is measured): the base RTT plus the time the bytes the connection
//! already queued there take to drain. Paths of equal speed are used alike; a slow path
//! carries a few segments at a time. When the path of earliest arrival has no room, the
//! segment waits for it unless that path would not deliver the whole queue of new data
//! (`queued`) before the segment arrived on the earliest path with room (ECF's test, with
//! arrival estimates in place of RTTs): a long queue keeps every path busy, so a path of twice
//! the RTT still adds its capacity. Not for a path that delivers less than an eighth of the
//! fastest path ahead of it (of those a segment would reach the peer over sooner):
//! a tunnel's send queue holds megabytes whenever its links are the bottleneck, and a 1 Mbit/s
//! path then filled its queue with segments that arrived a second late, for 1 % more capacity
//! (through the real tunnel beside 100 Mbit/s: 20–30 Mbit/s instead of 42–50); for such a
//! path the queue counts for two of the earliest path's windows at most. Judged against the
//! earliest path alone, a 2 Mbit/s path with a 1000-packet queue beside a 10 Mbit/s path of
//! 1 ms (the earliest) and two of 50 Mbit/s took segments until it held 1.4 MB (5 s of queue)
//! while the 50 Mbit/s paths idled: the tunnel at 14 Mbit/s against 46 for one of them
//! alone. Reinjections go on the earliest path with room.

use std::time::Duration;

use super::{Context, PathView, Scheduler, candidates};
use crate::PathId;

#[derive(Debug, Default)]
pub struct Arrival {
    /// The last decision was to wait for the earliest path (hysteresis, as ECF's: Lim et al.,
    /// CoNEXT 2017, whose rule this follows with arrival estimates in place of RTTs).
    waiting: bool,
}

/// Hysteresis: once waiting, a slower path is taken only when the earliest one would take
/// this much longer to drain the queue than the slower one takes to deliver.
const BETA: f64 = 0.25;

/// A path that delivers less than 1/SHARE of the earliest path's rate is worth its
/// late arrivals only for the queue the earliest path would send in two windows.
const SHARE: f64 = 8.0;

/// The path's delivery rate, bytes/s (`cwnd / srtt` before one is measured).
fn rate(p: &PathView) -> f64 {
    let r = p.delivery_rate.unwrap_or_else(|| {
        let srtt = p.srtt.max(Duration::from_micros(100)).as_secs_f64();
        (p.cwnd as f64 / srtt) as u64
    });
    r.max(1) as f64
}

/// Whether the path's delivery rate measures what it can carry, not only what it was given.
/// It must have met its capacity (a loss or timeout ended its first slow start, or its own
/// queue doubled its base RTT) and its window must exceed twice what it delivers in a base
/// RTT: a path that delivers about its whole window every base RTT (a window cut by a
/// timeout, say) is limited by that window, and would carry more if given more.
fn rate_is_capacity(p: &PathView) -> bool {
    let met = p.probed || p.srtt > p.min_rtt * 2;
    met && p.cwnd as f64 > 2.0 * rate(p) * p.min_rtt.as_secs_f64()
}

/// Estimated time until a segment of `mss` bytes sent now on `p` arrives, seconds.
fn arrival(p: &PathView, mss: u64) -> f64 {
    let base = p.min_rtt.as_secs_f64();
    let rate = rate(p);
    let queued = ((p.in_flight + mss) as f64 - rate * base).max(0.0);
    base + queued / rate
}

impl Scheduler for Arrival {
    fn select(&mut self, cx: &Context<'_>) -> Option<PathId> {
        let earliest = |a: &&PathView, b: &&PathView| {
            arrival(a, cx.mss)
                .total_cmp(&arrival(b, cx.mss))
                .then(a.srtt.cmp(&b.srtt))
                .then(a.id.cmp(&b.id))
        };
        let with_room = candidates(cx.paths, cx.exclude)
            .filter(|p| p.has_room)
            .min_by(earliest);
        if cx.exclude.is_some() {
            return with_room.map(|p| p.id);
        }
        let best = candidates(cx.paths, None).min_by(earliest)?;
        if best.has_room {
            self.waiting = false;
            return Some(best.id);
        }
        let other = with_room?;
        // The fastest of the paths a segment would reach the peer over sooner than over
        // `other` (the earliest among them; none has room): `other` is slow beside it, not
        // only beside the earliest.
        let by_other = arrival(other, cx.mss);
        let fastest_ahead = candidates(cx.paths, None)
            .filter(|p| p.id == best.id || (p.id != other.id && arrival(p, cx.mss) < by_other))
            .map(rate)
            .fold(0.0, f64::max);
        // Waiting for the earliest path pays only if it delivers the whole queue before the
        // other would deliver this segment.
        let queued = if rate(other) * SHARE >= fastest_ahead || !rate_is_capacity(other) {
            cx.queued
        } else {
            cx.queued.min(2 * best.cwnd)
        };
        let drain = arrival(best, cx.mss) + queued as f64 / rate(best);
        let hysteresis = if self.waiting { 1.0 + BETA } else { 1.0 };
        if drain > hysteresis * arrival(other, cx.mss) {
            self.waiting = false;
            Some(other.id)
        } else {
            self.waiting = true;
            None
        }
    }

    fn opportunistic_retransmission(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        "arrival"
    }
}
