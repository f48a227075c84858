//! LIA, the Linked Increases Algorithm (RFC 6356): coupled congestion avoidance so that a
//! multipath connection takes no more than one TCP flow on its best path, and moves traffic
//! away from congested paths.

use super::{Ack, Controller, Coupling, RenoCore};
use crate::Instant;

#[derive(Debug, Clone)]
pub struct Lia {
    core: RenoCore,
}

impl Lia {
    pub fn new(mss: u64, initial_window: u64) -> Self {
        Lia {
            core: RenoCore::new(mss, initial_window),
        }
    }
}

/// RFC 6356 §3: alpha = cwnd_total · max_i(cwnd_i/rtt_i²) / (Σ_i cwnd_i/rtt_i)².
pub(crate) fn lia_alpha(coupling: Coupling<'_>) -> f64 {
    let total: f64 = coupling.iter().map(|p| p.cwnd as f64).sum();
    let mut best = 0.0f64;
    let mut sum = 0.0f64;
    for p in coupling {
        let rtt = p.srtt.as_secs_f64().max(1e-6);
        best = best.max(p.cwnd as f64 / (rtt * rtt));
        sum += p.cwnd as f64 / rtt;
    }
    if sum == 0.0 {
        return 1.0;
    }
    total * best / (sum * sum)
}

impl Controller for Lia {
    fn on_ack(&mut self, ack: &Ack, coupling: Coupling<'_>) {
        if !ack.cwnd_limited {
            return;
        }
        let mut bytes = ack.bytes;
        if self.core.in_slow_start() {
            bytes = self.core.slow_start(bytes, ack.stretch);
        }
        if bytes == 0 || self.core.in_slow_start() {
            return;
        }
        let cwnd = self.core.cwnd as f64;
        let mss = self.core.mss as f64;
        let total: f64 = coupling
            .iter()
            .map(|p| p.cwnd as f64)
            .sum::<f64>()
            .max(cwnd);
        // RFC 6356 §3: per ACK of bytes_acked on path i, increase cwnd_i by
        // min(alpha·bytes_acked·MSS_i/cwnd_total, bytes_acked·MSS_i/cwnd_i).
        let alpha = if coupling.len() > 1 {
            lia_alpha(coupling)
        } else {
            1.0
        };
        let inc = (alpha * mss / total).min(mss / cwnd);
        self.core.grow(bytes, inc);
    }

    fn on_loss(&mut self, now: Instant, sent: Instant, _in_flight: u64) {
        if self.core.new_episode(now, sent) {
            self.core.decrease(0.5);
        }
    }

    fn undo(&mut self) {
        self.core.undo();
    }

    fn on_rto(&mut self, now: Instant, in_flight: u64) {
        self.core.collapse(now, in_flight, 0.5);
    }

    fn penalize(&mut self, now: Instant) {
        self.core.penalize(now);
    }

    fn window(&self) -> u64 {
        self.core.cwnd
    }

    fn ssthresh(&self) -> u64 {
        self.core.ssthresh
    }

    fn is_coupled(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        "lia"
    }
}
