//! NewReno (RFC 5681, RFC 6582): the window grows by one segment per window of data
//! acknowledged and halves on loss.

use super::{Ack, Controller, Coupling, RenoCore};
use crate::Instant;

#[derive(Debug, Clone)]
pub struct NewReno {
    core: RenoCore,
}

impl NewReno {
    pub fn new(mss: u64, initial_window: u64) -> Self {
        NewReno {
            core: RenoCore::new(mss, initial_window),
        }
    }
}

impl Controller for NewReno {
    fn on_ack(&mut self, ack: &Ack, _: Coupling<'_>) {
        if !ack.cwnd_limited {
            return;
        }
        let mut bytes = ack.bytes;
        if self.core.in_slow_start() {
            bytes = self.core.slow_start(bytes, ack.stretch);
        }
        if bytes > 0 && !self.core.in_slow_start() {
            // RFC 5681 §3.1 Eq. 3: cwnd += MSS·MSS/cwnd per ACK, here per byte acknowledged.
            let inc = self.core.mss as f64 / self.core.cwnd as f64;
            self.core.grow(bytes, inc);
        }
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

    fn name(&self) -> &'static str {
        "newreno"
    }
}
