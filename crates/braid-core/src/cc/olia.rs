//! OLIA, the Opportunistic Linked Increases Algorithm (Khalili, Gast, Popovic, Le Boudec,
//! "MPTCP is not Pareto-optimal", IEEE/ACM ToN 2013; draft-khalili-mptcp-congestion-control).
//!
//! Per ACK on path r, in segments: w_r += (w_r/rtt_r²)/(Σ_p w_p/rtt_p)² + α_r/w_r, where α_r
//! moves window from the paths with the largest windows (M) towards the best paths (B, largest
//! l_r²/rtt_r, l_r the bytes sent between the last two losses) that are not in M.

use super::{Ack, Controller, Coupling, PathCc, RenoCore};
use crate::Instant;

#[derive(Debug, Clone)]
pub struct Olia {
    core: RenoCore,
    /// Bytes acknowledged since the last loss (l1r).
    since_loss: u64,
    /// Bytes acknowledged between the two previous losses (l2r).
    between_losses: u64,
}

impl Olia {
    pub fn new(mss: u64, initial_window: u64) -> Self {
        Olia {
            core: RenoCore::new(mss, initial_window),
            since_loss: 0,
            between_losses: 0,
        }
    }

    fn loss(&mut self) {
        self.between_losses = self.since_loss;
        self.since_loss = 0;
    }
}

/// The draft's α_r for the path marked `is_self`.
fn olia_alpha(coupling: Coupling<'_>) -> f64 {
    let n = coupling.len() as f64;
    if coupling.len() < 2 {
        return 0.0;
    }
    let quality = |p: &PathCc| {
        let l = p.inter_loss_bytes as f64;
        let rtt = p.srtt.as_secs_f64().max(1e-6);
        l * l / rtt
    };
    let max_w = coupling.iter().map(|p| p.cwnd).max().unwrap_or(0);
    let best_q = coupling.iter().map(quality).fold(0.0f64, f64::max);
    let in_m = |p: &PathCc| p.cwnd == max_w;
    let in_b = |p: &PathCc| quality(p) >= best_q;
    let b_not_m = coupling.iter().filter(|p| in_b(p) && !in_m(p)).count() as f64;
    let m = coupling.iter().filter(|p| in_m(p)).count() as f64;
    let Some(me) = coupling.iter().find(|p| p.is_self) else {
        return 0.0;
    };
    if b_not_m == 0.0 {
        0.0
    } else if in_b(me) && !in_m(me) {
        1.0 / (n * b_not_m)
    } else if in_m(me) {
        -1.0 / (n * m)
    } else {
        0.0
    }
}

impl Controller for Olia {
    fn on_ack(&mut self, ack: &Ack, coupling: Coupling<'_>) {
        self.since_loss += ack.bytes;
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
        let mss = self.core.mss as f64;
        let w = self.core.cwnd as f64 / mss;
        let rtt = ack.srtt.as_secs_f64().max(1e-6);
        let sum: f64 = if coupling.is_empty() {
            w / rtt
        } else {
            coupling
                .iter()
                .map(|p| p.cwnd as f64 / mss / p.srtt.as_secs_f64().max(1e-6))
                .sum()
        };
        let alpha = olia_alpha(coupling);
        // Increase in segments per segment acknowledged.
        let inc = (w / (rtt * rtt)) / (sum * sum) + alpha / w;
        if inc > 0.0 {
            self.core.grow(bytes, inc);
        } else if inc < 0.0 {
            // Negative increase: shrink, but never below the minimum window.
            let dec = ((-inc) * bytes as f64) as u64;
            self.core.cwnd = self
                .core
                .cwnd
                .saturating_sub(dec)
                .max(self.core.min_window());
        }
    }

    fn on_loss(&mut self, now: Instant, sent: Instant, _in_flight: u64) {
        if self.core.new_episode(now, sent) {
            self.loss();
            self.core.decrease(0.5);
        }
    }

    fn undo(&mut self) {
        self.core.undo();
    }

    fn on_rto(&mut self, now: Instant, in_flight: u64) {
        self.loss();
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

    fn inter_loss_bytes(&self) -> u64 {
        self.since_loss.max(self.between_losses)
    }

    fn is_coupled(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        "olia"
    }
}
