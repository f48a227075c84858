//! CUBIC (RFC 9438): window growth is a cubic function of the time since the last congestion
//! event, with a Reno-friendly region.

use std::time::Duration;

use super::{Ack, Controller, Coupling, RenoCore};
use crate::Instant;

/// RFC 9438 §4.6: β_cubic.
const BETA: f64 = 0.7;
/// RFC 9438 §5: C.
const C: f64 = 0.4;

#[derive(Debug, Clone)]
pub struct Cubic {
    core: RenoCore,
    /// W_max in segments: the window just before the last reduction.
    w_max: f64,
    /// K in seconds (RFC 9438 §4.2 Eq. 2).
    k: f64,
    /// Start of the current congestion-avoidance epoch.
    epoch_start: Option<Instant>,
    /// Reno-friendly estimate W_est, segments (RFC 9438 §4.3).
    w_est: f64,
    /// Time not spent cwnd-limited is not counted in t (RFC 9438 §5.8).
    idle_shift: Duration,
    last_ack: Option<Instant>,
}

impl Cubic {
    pub fn new(_now: Instant, mss: u64, initial_window: u64) -> Self {
        Cubic {
            core: RenoCore::new(mss, initial_window),
            w_max: 0.0,
            k: 0.0,
            epoch_start: None,
            w_est: 0.0,
            idle_shift: Duration::ZERO,
            last_ack: None,
        }
    }

    fn segments(&self) -> f64 {
        self.core.cwnd as f64 / self.core.mss as f64
    }

    fn reduce(&mut self, now: Instant) {
        let w = self.segments();
        // RFC 9438 §4.7 fast convergence.
        self.w_max = if w < self.w_max {
            w * (1.0 + BETA) / 2.0
        } else {
            w
        };
        self.core.decrease(BETA);
        self.k = ((self.w_max - self.segments()).max(0.0) / C).cbrt();
        self.epoch_start = None;
        self.core.recovery_start = Some(now);
    }
}

impl Controller for Cubic {
    fn on_ack(&mut self, ack: &Ack, _: Coupling<'_>) {
        let gap = self
            .last_ack
            .map(|t| ack.now.saturating_since(t))
            .unwrap_or_default();
        self.last_ack = Some(ack.now);
        if !ack.cwnd_limited {
            // Application-limited: the epoch does not advance (RFC 9438 §5.8).
            self.idle_shift += gap;
            return;
        }
        let mut bytes = ack.bytes;
        if self.core.in_slow_start() {
            bytes = self.core.slow_start(bytes, ack.stretch);
            if bytes == 0 || self.core.in_slow_start() {
                return;
            }
        }
        let mss = self.core.mss as f64;
        let epoch = *self.epoch_start.get_or_insert_with(|| {
            self.idle_shift = Duration::ZERO;
            ack.now
        });
        if self.w_est == 0.0 || self.epoch_start == Some(ack.now) {
            self.w_est = self.segments();
            if self.w_max < self.segments() {
                self.w_max = self.segments();
                self.k = 0.0;
            }
        }
        let t = (ack
            .now
            .saturating_since(epoch)
            .saturating_sub(self.idle_shift))
        .as_secs_f64();
        let rtt = ack.srtt.as_secs_f64();
        // RFC 9438 §4.2 Eq. 1, evaluated one RTT ahead (§4.4).
        let target = C * (t + rtt - self.k).powi(3) + self.w_max;
        // RFC 9438 §4.3 Eq. 4: W_est grows by α·segments_acked/cwnd, α = 3(1−β)/(1+β).
        let alpha = 3.0 * (1.0 - BETA) / (1.0 + BETA);
        let acked_segs = bytes as f64 / mss;
        self.w_est += alpha * acked_segs / self.segments();
        let cwnd = self.segments();
        if self.w_est > target {
            // Reno-friendly region.
            self.core.grow(bytes, (self.w_est - cwnd).max(0.0) / cwnd);
        } else {
            // RFC 9438 §4.4: cwnd += (target − cwnd)/cwnd per segment acknowledged, target
            // capped at 1.5·cwnd.
            let target = target.min(1.5 * cwnd);
            self.core.grow(bytes, (target - cwnd).max(0.0) / cwnd);
        }
    }

    fn on_loss(&mut self, now: Instant, sent: Instant, _in_flight: u64) {
        if self.core.recovery_start.is_some_and(|start| sent <= start) {
            return;
        }
        self.reduce(now);
    }

    fn undo(&mut self) {
        self.core.undo();
        self.epoch_start = None;
    }

    fn on_rto(&mut self, now: Instant, in_flight: u64) {
        self.w_max = self.segments();
        self.core.collapse(now, in_flight, BETA);
        self.k = 0.0;
        self.epoch_start = None;
        self.w_est = 0.0;
    }

    fn penalize(&mut self, now: Instant) {
        self.core.penalize(now);
        self.epoch_start = None;
        self.w_est = 0.0;
    }

    fn window(&self) -> u64 {
        self.core.cwnd
    }

    fn ssthresh(&self) -> u64 {
        self.core.ssthresh
    }

    fn name(&self) -> &'static str {
        "cubic"
    }
}
