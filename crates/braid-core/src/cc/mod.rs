//! Congestion control, one controller per subflow.
//!
//! A controller is built per path by a [`ControllerFactory`] held in the
//! [`Config`](crate::Config). Uncoupled controllers (NewReno, CUBIC) see only their own path;
//! coupled ones (LIA, OLIA) also read the other paths of the connection through a read-only
//! [`Coupling`] snapshot computed by the connection before each call, never through shared
//! mutable state. Windows are in bytes.

mod cubic;
mod lia;
mod newreno;
mod olia;

pub use cubic::Cubic;
pub use lia::Lia;
pub use newreno::NewReno;
pub use olia::Olia;

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use crate::Instant;

/// What a coupled controller may know of one path of its connection.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathCc {
    /// Congestion window, bytes.
    pub cwnd: u64,
    /// Smoothed RTT.
    pub srtt: Duration,
    /// OLIA's l_r: bytes acknowledged between the last two losses (or since the last one if
    /// that is more), see [`Controller::inter_loss_bytes`].
    pub inter_loss_bytes: u64,
    /// Whether this entry is the path the call is about.
    pub is_self: bool,
}

/// The paths of a connection that take part in coupling (established and usable).
pub type Coupling<'a> = &'a [PathCc];

/// An acknowledgement of new data on a path.
#[derive(Debug, Clone, Copy)]
pub struct Ack {
    pub now: Instant,
    /// Bytes newly acknowledged.
    pub bytes: u64,
    /// Smoothed RTT of the path after this acknowledgement.
    pub srtt: Duration,
    /// Smallest RTT seen on the path.
    pub min_rtt: Duration,
    /// Whether the sender used the window fully lately (RFC 7661); windows do not grow when
    /// the application, not the window, limited the sending.
    pub cwnd_limited: bool,
    /// Slow start takes every byte of this acknowledgement, not at most two segments
    /// ([`crate::Config::stretch_acks`]).
    pub stretch: bool,
}

/// A per-path congestion controller.
pub trait Controller: Send + Debug {
    /// New data acknowledged.
    fn on_ack(&mut self, ack: &Ack, coupling: Coupling<'_>);

    /// Loss detected by SACK / duplicate ACKs (fast retransmit) of a packet sent at `sent`.
    /// Controllers react once per recovery episode: losses of packets sent before the episode
    /// began are ignored.
    fn on_loss(&mut self, now: Instant, sent: Instant, in_flight: u64);

    /// The retransmission timer expired (RFC 5681 §3.1: the window falls to one segment).
    fn on_rto(&mut self, now: Instant, in_flight: u64);

    /// The reduction of the current recovery episode was for losses that proved spurious (every
    /// packet declared lost in it was acknowledged in its first transmission): the window and
    /// threshold return to what they were before it (Linux's `tcp_undo_cwnd_reduction`).
    /// Nothing after a timeout or penalisation.
    fn undo(&mut self) {}

    /// Halve the window: penalisation of a subflow that blocks the receive window (stock
    /// MPTCP's opportunistic retransmission, seed 002 §II).
    fn penalize(&mut self, now: Instant);

    /// Current congestion window, bytes.
    fn window(&self) -> u64;

    /// Slow-start threshold, bytes (`u64::MAX` before the first loss).
    fn ssthresh(&self) -> u64;

    /// OLIA's bookkeeping; zero for other controllers.
    fn inter_loss_bytes(&self) -> u64 {
        0
    }

    /// Whether `on_ack` reads the other paths (the connection then builds the snapshot).
    fn is_coupled(&self) -> bool {
        false
    }

    fn name(&self) -> &'static str;
}

/// Builds a controller for each new path.
pub trait ControllerFactory: Send + Sync + Debug {
    fn build(&self, now: Instant, mss: u64) -> Box<dyn Controller>;
    fn name(&self) -> &'static str;
}

/// The built-in algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    NewReno,
    Cubic,
    Lia,
    Olia,
}

impl Algorithm {
    pub const NAMES: &'static [&'static str] = &["newreno", "cubic", "lia", "olia"];

    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "newreno" | "reno" => Algorithm::NewReno,
            "cubic" => Algorithm::Cubic,
            "lia" => Algorithm::Lia,
            "olia" => Algorithm::Olia,
            _ => return None,
        })
    }

    /// A factory for this algorithm with `initial_window` segments.
    pub fn factory(self, initial_window: u64) -> Arc<dyn ControllerFactory> {
        Arc::new(BuiltinFactory {
            algorithm: self,
            initial_window,
        })
    }
}

#[derive(Debug)]
struct BuiltinFactory {
    algorithm: Algorithm,
    initial_window: u64,
}

impl ControllerFactory for BuiltinFactory {
    fn build(&self, now: Instant, mss: u64) -> Box<dyn Controller> {
        let iw = self.initial_window * mss;
        match self.algorithm {
            Algorithm::NewReno => Box::new(NewReno::new(mss, iw)),
            Algorithm::Cubic => Box::new(Cubic::new(now, mss, iw)),
            Algorithm::Lia => Box::new(Lia::new(mss, iw)),
            Algorithm::Olia => Box::new(Olia::new(mss, iw)),
        }
    }

    fn name(&self) -> &'static str {
        match self.algorithm {
            Algorithm::NewReno => "newreno",
            Algorithm::Cubic => "cubic",
            Algorithm::Lia => "lia",
            Algorithm::Olia => "olia",
        }
    }
}

/// Window state shared by the Reno-like controllers: slow start, recovery episodes, the
/// multiplicative decrease and the RTO collapse (RFC 5681).
#[derive(Debug, Clone)]
pub(crate) struct RenoCore {
    pub mss: u64,
    pub cwnd: u64,
    pub ssthresh: u64,
    /// Bytes acknowledged in congestion avoidance since the window last grew by one segment.
    pub ca_acked: u64,
    /// Start of the current recovery episode.
    pub recovery_start: Option<Instant>,
    /// Window and threshold before the last multiplicative decrease, while it may be undone.
    pub prior: Option<(u64, u64)>,
}

impl RenoCore {
    pub fn new(mss: u64, initial_window: u64) -> Self {
        RenoCore {
            mss,
            cwnd: initial_window,
            ssthresh: u64::MAX,
            ca_acked: 0,
            recovery_start: None,
            prior: None,
        }
    }

    pub fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    pub fn min_window(&self) -> u64 {
        2 * self.mss
    }

    /// Slow start growth (RFC 5681 §3.1, with appropriate byte counting limited to 2 MSS per
    /// ACK, RFC 3465, unless `stretch`: every byte, as Linux's `tcp_slow_start()`). Returns the
    /// bytes left over for congestion avoidance.
    pub fn slow_start(&mut self, bytes: u64, stretch: bool) -> u64 {
        let room = self.ssthresh - self.cwnd;
        let limit = if stretch { bytes } else { 2 * self.mss };
        let grow = bytes.min(limit).min(room);
        self.cwnd += grow;
        bytes - grow.min(bytes)
    }

    /// Whether a loss of a packet sent at `sent` starts a new recovery episode.
    pub fn new_episode(&mut self, now: Instant, sent: Instant) -> bool {
        if self.recovery_start.is_some_and(|start| sent <= start) {
            return false;
        }
        self.recovery_start = Some(now);
        true
    }

    /// Multiplicative decrease with factor `beta` (RFC 5681 §3.1: ssthresh = max(flight/2, 2 MSS)).
    pub fn decrease(&mut self, beta: f64) {
        self.prior = Some((self.cwnd, self.ssthresh));
        self.ssthresh = ((self.cwnd as f64 * beta) as u64).max(self.min_window());
        self.cwnd = self.ssthresh;
        self.ca_acked = 0;
    }

    /// RFC 5681 §3.1 / RFC 6298 §5: on RTO, ssthresh = max(flight/2, 2·MSS), cwnd = 1 MSS.
    pub fn collapse(&mut self, now: Instant, in_flight: u64, beta: f64) {
        self.ssthresh = ((in_flight as f64 * beta) as u64).max(self.min_window());
        self.cwnd = self.mss;
        self.ca_acked = 0;
        self.recovery_start = Some(now);
        self.prior = None;
    }

    pub fn penalize(&mut self, now: Instant) {
        self.prior = None;
        self.ssthresh = (self.cwnd / 2).max(self.min_window());
        self.cwnd = self.ssthresh;
        self.ca_acked = 0;
        self.recovery_start = Some(now);
    }

    /// Undoes the last decrease (see [`Controller::undo`]); the recovery episode is over.
    pub fn undo(&mut self) {
        if let Some((cwnd, ssthresh)) = self.prior.take() {
            self.cwnd = self.cwnd.max(cwnd);
            self.ssthresh = self.ssthresh.max(ssthresh);
            self.recovery_start = None;
        }
    }

    /// Congestion avoidance: grow by `increase_per_byte`·bytes, in whole segments.
    pub fn grow(&mut self, bytes: u64, increase_num: f64) {
        // increase_num: segments of growth per segment acknowledged.
        let inc = (bytes as f64 * increase_num).max(0.0);
        self.ca_acked += inc as u64;
        if self.ca_acked >= self.mss {
            let segs = self.ca_acked / self.mss;
            self.cwnd += segs * self.mss;
            self.ca_acked -= segs * self.mss;
        }
    }
}

#[cfg(test)]
mod tests;
