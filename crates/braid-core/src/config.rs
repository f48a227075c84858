//! Connection configuration: parameters and the pluggable decisions (congestion control,
//! scheduler, reinjection policy), each held as a factory or shared policy object.

use std::sync::Arc;
use std::time::Duration;

use crate::cc::{self, ControllerFactory};
use crate::reinject::{self, ReinjectPolicy};
use crate::rtt::RtoFormula;
use crate::scheduler::{self, SchedulerFactory};

/// Parameters of a connection. `Config::default()` follows Linux MPTCP where the seeds describe
/// it (RTO_min 200 ms, tail-loss probe on, minRTT scheduler, stock reinjection).
#[derive(Debug, Clone)]
pub struct Config {
    /// Largest datagram the core emits (braid header and frames, not UDP/IP).
    pub max_datagram_size: usize,
    /// Bytes the application may have written but not yet acknowledged by the peer.
    pub send_buffer: u64,
    /// The receive buffer shared by all subflows: in-order bytes not yet read plus reordered
    /// bytes held for in-order delivery (SPEC M1, M6).
    pub receive_buffer: u64,
    /// RTT assumed before the first sample; the initial RTO is derived from it (RFC 6298 §2.1).
    pub initial_rtt: Duration,
    /// Lower bound of the RTO (200 ms in Linux, 1 s in RFC 6298).
    pub rto_min: Duration,
    /// Upper bound of the RTO after backoff.
    pub rto_max: Duration,
    pub rto_formula: RtoFormula,
    /// A path is declared broken and closed after this many consecutive RTO backoffs
    /// (15 in Linux, seed 000 §V.C).
    pub broken_after_backoffs: u32,
    /// Tail-loss probe (on in Linux).
    pub tail_loss_probe: bool,
    /// δ of PTO = min(RTO, 2·SRTT + δ) (SPEC M3).
    pub tlp_delta: Duration,
    /// δ when a single packet is in flight (covers the peer's delayed ACK).
    pub tlp_single_delta: Duration,
    /// Longest the receiver delays an acknowledgement.
    pub max_ack_delay: Duration,
    /// Acknowledge at least every this many ack-eliciting packets.
    pub ack_frequency: u32,
    /// Initial congestion window, segments.
    pub initial_window: u64,
    /// Link-layer detection delay: time between an address being lost locally and the
    /// REMOVE_ADDR notice to the peer.
    pub remove_addr_delay: Duration,
    /// Most paths a connection keeps at once.
    pub max_paths: usize,
    /// Close the connection after this long without receiving anything.
    pub idle_timeout: Option<Duration>,
    /// Opportunistic retransmission and penalisation when the receive window blocks, for
    /// schedulers that support it (stock minRTT does).
    pub opportunistic_retransmission: bool,
    /// Loss recovery as current Linux runs it: a retransmission found lost again that no
    /// other path takes a copy of is sent again on its own path (RFC 8985, RACK) instead of
    /// waiting for the path's RTO, and a path's window is reduced once per recovery episode
    /// (RFC 6675 §5: until everything sent before it is acknowledged), not again for packets
    /// lost during it. Off by default: the experiments' figures were measured without it.
    pub linux_recovery: bool,
    /// A path that reorders raises its DupThresh to the reordering it shows, declares losses
    /// by time as well (RFC 8985's reordering window) and undoes the window cut of a recovery
    /// episode whose losses all proved spurious, as Linux does (`tp->reordering`, RACK, undo):
    /// a loss found spurious (the first transmission of a packet declared lost is
    /// acknowledged) is the evidence. Off by default: the experiments' figures were measured
    /// without it (`braid tunnel` turns it on).
    pub adaptive_reordering: bool,
    /// Slow start counts every byte an acknowledgement covers, as Linux does
    /// (`tcp_slow_start()`: a stretch acknowledgement for many segments grows the window by
    /// all of them). Off: RFC 3465's limit of two segments per acknowledgement, with which a
    /// sender whose acknowledgements come thinned or in bursts (behind a tunnel's reorder
    /// buffer, a receiver that coalesces) grows a fraction as fast. Off by default: the
    /// experiments' figures were measured with the limit; the simulator's model of the hosts'
    /// TCP behind a tunnel has it on.
    pub stretch_acks: bool,
    pub congestion: Arc<dyn ControllerFactory>,
    pub scheduler: Arc<dyn SchedulerFactory>,
    pub reinjection: Arc<dyn ReinjectPolicy>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_datagram_size: 1452,
            send_buffer: 4 << 20,
            receive_buffer: 4 << 20,
            initial_rtt: Duration::from_millis(500),
            rto_min: Duration::from_millis(200),
            rto_max: Duration::from_secs(120),
            rto_formula: RtoFormula::Linux,
            broken_after_backoffs: 15,
            tail_loss_probe: true,
            tlp_delta: Duration::from_millis(8),
            tlp_single_delta: Duration::from_millis(200),
            max_ack_delay: Duration::from_millis(25),
            ack_frequency: 2,
            initial_window: 10,
            remove_addr_delay: Duration::ZERO,
            max_paths: 8,
            idle_timeout: None,
            opportunistic_retransmission: true,
            linux_recovery: false,
            adaptive_reordering: false,
            stretch_acks: false,
            congestion: cc::Algorithm::Cubic.factory(10),
            scheduler: scheduler::Kind::MinRtt.factory(),
            reinjection: reinject::Policy::Stock.shared(),
        }
    }
}

/// The largest initial window [`Config::validate`] accepts, in segments (times a segment
/// it must stay far from overflowing).
pub const MAX_INITIAL_WINDOW: u64 = 1 << 20;

/// The largest send or receive buffer [`Config::validate`] accepts.
pub const MAX_BUFFER: u64 = 1 << 30;

impl Config {
    /// Checks the parameters; the message names the field and what is allowed.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_datagram_size < 200 || self.max_datagram_size > 65_000 {
            return Err(format!(
                "max_datagram_size {} out of range: allowed 200..=65000",
                self.max_datagram_size
            ));
        }
        if self.send_buffer < self.max_datagram_size as u64 {
            return Err("send_buffer must hold at least one datagram".into());
        }
        if self.receive_buffer < self.max_datagram_size as u64 {
            return Err("receive_buffer must hold at least one datagram".into());
        }
        // The buffers are held in memory: a mistyped size must not take the machine's.
        for (name, size) in [
            ("send_buffer", self.send_buffer),
            ("receive_buffer", self.receive_buffer),
        ] {
            if size > MAX_BUFFER {
                return Err(format!(
                    "{name} {size} bytes out of range: allowed up to {MAX_BUFFER} (1 GiB)"
                ));
            }
        }
        if self.rto_min > self.rto_max {
            return Err("rto_min must not exceed rto_max".into());
        }
        if self.broken_after_backoffs == 0 {
            return Err("broken_after_backoffs must be at least 1".into());
        }
        if self.ack_frequency == 0 {
            return Err("ack_frequency must be at least 1".into());
        }
        if !(1..=MAX_INITIAL_WINDOW).contains(&self.initial_window) {
            return Err(format!(
                "initial_window {} out of range: allowed 1..={MAX_INITIAL_WINDOW} segments",
                self.initial_window
            ));
        }
        if self.max_paths == 0 || self.max_paths > 64 {
            return Err("max_paths must be within 1..=64".into());
        }
        Ok(())
    }
}
