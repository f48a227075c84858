//! One subflow: its own packet sequence space, RTT estimate, congestion window and loss
//! recovery (SPEC M1, M3), and the receive-side state it acknowledges.
//!
//! Sequence numbers count ack-eliciting packets; a retransmission on the same path reuses the
//! number (as TCP does), and the timestamp echoed in ACKs gives unambiguous RTT samples.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use crate::cc::{self, Controller, Coupling};
use crate::config::Config;
use crate::range_set::RangeSet;
use crate::reinject::PathTiming;
use crate::rtt::RttEstimator;
use crate::wire::{AddrId, PathId};
use crate::{Instant, PathStats};

/// RFC 6675 DupThresh: a packet is lost once this many packets sent after it are acknowledged
/// (until the path shows it reorders, see [`Reordering`]).
pub(crate) const DUP_THRESH: u64 = 3;

/// The largest DupThresh a path learns (Linux's `tcp_max_reordering`).
const MAX_REORDERING: u64 = 300;

/// What a path knows of its own reordering (Linux's `tp->reordering` and RACK's reordering
/// window, RFC 8985 §6.2). A link that reorders (jitter that lets packets overtake each other,
/// a route that changes) delivers a packet after DupThresh later ones: it is declared lost,
/// sent again and the window halved although nothing was lost; on 2 × 10 Mbit/s whose packets
/// arrive up to 8 ms out of order the connection made a quarter of what kernel MPTCP made.
/// An acknowledgement that can only be the first transmission's of a packet declared lost (it
/// was not resent yet, or the resend went out less than half a minimum RTT before) proves the
/// loss spurious: DupThresh rises to the distance the packet was overtaken by, packets are
/// also declared lost by time, as RACK does, once a packet sent a reordering window after them
/// was acknowledged (without this a large DupThresh would leave the losses of a small window
/// to the retransmission timer), and once every packet declared lost in a recovery episode
/// proved spurious its window cut is undone. Paths that never reorder keep RFC 6675's rule
/// unchanged. Only with `Config::adaptive_reordering`.
#[derive(Debug, Clone, Copy)]
struct Reordering {
    /// DupThresh in use.
    dup_thresh: u64,
    /// Spurious losses seen: the reordering window is this many quarters of the minimum RTT
    /// (RACK's `reo_wnd_steps`); zero while the path has not reordered.
    steps: u32,
    /// The latest send time of a packet acknowledged unambiguously (RACK's `xmit_ts`).
    latest_sent_acked: Option<Instant>,
    /// Packets declared lost in the current recovery episode not yet found spurious, while
    /// its window reduction may be undone (Linux's `undo_retrans`).
    undo_left: Option<u64>,
    /// An ACK frame with as many ranges as it could carry may have left out lower ones that
    /// the peer had: an acknowledgement of a packet below the lowest range of such a frame
    /// proves nothing (the peer may have had it when it was declared lost).
    unreported_below: u64,
}

impl Default for Reordering {
    fn default() -> Self {
        Reordering {
            dup_thresh: DUP_THRESH,
            steps: 0,
            latest_sent_acked: None,
            undo_left: None,
            unreported_below: 0,
        }
    }
}

impl Reordering {
    /// Learns from one ACK frame; returns whether every loss of the current recovery episode
    /// proved spurious (its window reduction is to be undone).
    fn learn(&mut self, e: &AckEvidence) -> bool {
        if let Some(sent) = e.latest_sent {
            self.latest_sent_acked = Some(self.latest_sent_acked.map_or(sent, |t| t.max(sent)));
        }
        if let Some(distance) = e.overtaken_by {
            self.dup_thresh = self.dup_thresh.max((distance + 1).min(MAX_REORDERING));
            self.steps = self.steps.saturating_add(1);
        }
        match self.undo_left {
            Some(left) if e.spurious > 0 => {
                let left = left.saturating_sub(e.spurious);
                self.undo_left = (left > 0).then_some(left);
                left == 0
            }
            _ => false,
        }
    }
}

/// What the packets one ACK frame acknowledges say of the path's reordering.
struct AckEvidence {
    now: Instant,
    /// See [`Reordering::unreported_below`].
    unreported_below: u64,
    min_rtt: Duration,
    /// The end of the highest selectively acknowledged range before this frame.
    highest_sacked: Option<u64>,
    /// The latest send time of a packet acknowledged unambiguously.
    latest_sent: Option<Instant>,
    /// The most packets above one declared lost in error that were acknowledged before it.
    overtaken_by: Option<u64>,
    /// Packets declared lost from acknowledgements whose first transmission this frame
    /// acknowledges.
    spurious: u64,
}

impl AckEvidence {
    /// Packet `seq`, in the state it had before this frame, is newly acknowledged.
    fn note(&mut self, seq: u64, p: &SentPacket) {
        if p.state == SentState::Sacked {
            return;
        }
        // An acknowledgement less than half a minimum RTT after a resend is the first
        // transmission's (RACK's test, RFC 8985 §6.2 step 2, with a margin: a resend smaller
        // than the first transmission, or a minimum that includes an ACK delay, comes back a
        // little under the minimum); so is one of a packet declared lost and not resent yet.
        let too_soon = p.retransmitted && self.now.saturating_since(p.time) < self.min_rtt / 2;
        let original = p.lost_by_ack
            && seq >= self.unreported_below
            && ((p.state == SentState::Lost && !p.retransmitted) || too_soon);
        if !too_soon {
            self.latest_sent = Some(self.latest_sent.map_or(p.time, |t| t.max(p.time)));
        }
        if original {
            self.spurious += 1;
        }
        if original && let Some(h) = self.highest_sacked.filter(|&h| h > seq) {
            self.overtaken_by = Some(self.overtaken_by.map_or(h - seq, |d| d.max(h - seq)));
        }
    }
}

/// Stream bytes carried by a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DataRef {
    pub dsn: u64,
    pub len: u32,
    pub fin: bool,
}

/// A control frame that must reach the peer; resent when the packet carrying it is lost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ctrl {
    AddAddr {
        id: AddrId,
        backup: bool,
        addr: SocketAddr,
    },
    /// The address, and the next path id when it was removed (see `Frame::RemoveAddr`).
    RemoveAddr(AddrId, PathId),
    /// The current backup and duplicate flags of the path are sent.
    PathPrio(PathId),
    PathClose(PathId, u64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SentState {
    /// Sent, counted in flight.
    Outstanding,
    /// Declared lost, waiting for retransmission on this path.
    Lost,
    /// Selectively acknowledged.
    Sacked,
}

#[derive(Debug)]
pub(crate) struct SentPacket {
    pub time: Instant,
    pub size: u32,
    pub data: Option<DataRef>,
    pub ctrl: Vec<Ctrl>,
    pub path_open: bool,
    pub state: SentState,
    /// Sent again on this path since it first went out: an acknowledgement may be the first
    /// transmission's.
    pub retransmitted: bool,
    /// Its latest loss was declared from the acknowledgements of later packets (not by a
    /// timeout): an acknowledgement of its first transmission then shows reordering.
    pub lost_by_ack: bool,
    /// The data was queued for reinjection on other paths (or never is: a duplicate path's
    /// copy of bytes another path carries, see `Connection::set_duplicate`).
    pub reinjected: bool,
    /// This packet itself carries a reinjected copy.
    pub is_reinjection: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PathState {
    /// We sent PATH_OPEN and wait for its acknowledgement.
    Opening,
    Established,
}

/// Per-path timers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum PathTimer {
    /// Retransmission timeout.
    Rto = 0,
    /// Tail-loss probe timeout.
    Pto = 1,
    /// The reinjection policy's own timer (REJ).
    Reinject = 2,
    /// Delayed acknowledgement.
    Ack = 3,
}

pub(crate) const PATH_TIMERS: [PathTimer; 4] = [
    PathTimer::Rto,
    PathTimer::Pto,
    PathTimer::Reinject,
    PathTimer::Ack,
];

/// A probe to send regardless of the congestion window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Probe {
    /// Tail-loss probe: retransmit the last outstanding packet.
    Tail,
}

/// Receive side: which of the peer's packets on this path we have, and when to acknowledge.
#[derive(Debug, Default)]
pub(crate) struct RxState {
    /// Every packet below was received.
    pub cum: u64,
    /// Received above `cum`.
    pub ranges: RangeSet,
    /// Timestamp to echo.
    pub ts_echo: u32,
    /// Ack-eliciting packets received since the last ACK went out.
    pub unacked: u32,
    /// Acknowledge at the next opportunity.
    pub ack_now: bool,
}

impl RxState {
    /// Whether packet `seq` may be recorded: not too far ahead, and not one hole too many
    /// (see [`MAX_RX_RANGES`](super::MAX_RX_RANGES)). Checked before the datagram is acted on.
    pub fn admits(&self, seq: u64) -> Result<(), crate::stats::DropReason> {
        if seq <= self.cum {
            return Ok(());
        }
        if seq - self.cum > super::MAX_RX_AHEAD {
            return Err(crate::stats::DropReason::Protocol);
        }
        if self.ranges.len() >= super::MAX_RX_RANGES && !self.ranges.touches(seq) {
            return Err(crate::stats::DropReason::TooManyHoles);
        }
        Ok(())
    }

    /// Records a packet; returns whether it was a duplicate.
    fn on_packet(&mut self, seq: u64, ts: u32, cfg: &Config) -> bool {
        // RFC 7323 §4.3: with delayed acknowledgements, echo the timestamp of the earliest
        // packet not yet acknowledged, so that RTT samples include the time the ACK waited.
        if self.unacked == 0 {
            self.ts_echo = ts;
        }
        if seq < self.cum || self.ranges.contains(seq) {
            // RFC 5681 §4.2: acknowledge duplicates at once.
            self.ack_now = true;
            return true;
        }
        if seq == self.cum {
            let filled_gap = !self.ranges.is_empty();
            self.cum += 1;
            if let Some(end) = self.ranges.pop_contiguous_from(self.cum) {
                self.cum = end;
            }
            if filled_gap {
                self.ack_now = true;
            }
        } else {
            // Out of order: acknowledge at once so the sender sees the hole.
            self.ranges.insert(seq, seq + 1);
            self.ack_now = true;
        }
        self.unacked += 1;
        // The first packet of a path (its handshake) is acknowledged at once, so that both ends
        // start with an undelayed RTT sample.
        if self.unacked >= cfg.ack_frequency || seq == 0 {
            self.ack_now = true;
        }
        false
    }

    pub fn ack_sent(&mut self) {
        self.unacked = 0;
        self.ack_now = false;
    }

    /// Whether an ACK frame has something to say.
    pub fn wants_ack(&self) -> bool {
        self.unacked > 0 || self.ack_now
    }
}

/// What processing one ACK frame found.
#[derive(Debug, Default)]
pub(crate) struct AckOutcome {
    /// Bytes newly acknowledged (cumulatively or selectively).
    pub newly_acked: u64,
    /// Packets newly declared lost.
    pub newly_lost: u64,
    /// Whether the peer now has the PATH_OPEN.
    pub open_acked: bool,
    /// Retransmissions found lost again (see [`Path::lost_retransmissions`]).
    pub lost_again: Vec<u64>,
}

/// The rate at which a path delivers, bytes/s: the largest of its last [`DeliveryRate::SAMPLES`]
/// samples, each the bytes acknowledged over at least one smoothed RTT (a maximum, as BBR's
/// bandwidth filter). Two kinds of interval read low without saying anything about the path,
/// and a scheduler that trusted them (`arrival`) gave the path nothing more, so nothing
/// corrected them; through the real tunnel a 40 Mbit/s path read 0.02 Mbit/s and the transfer
/// ran on the 20 Mbit/s one for 40 s:
/// - an interval that spans a pause: a path that sends after it had nothing outstanding for
///   longer than its smoothed RTT starts a new interval at its next acknowledgement;
/// - an interval in which the path had little to send (its window never filled in it or the
///   interval before, whose sends it acknowledges): kept only when it raises the estimate, as
///   BBR keeps application-limited samples, and not at all before a sample of a full window.
#[derive(Debug, Clone, Default)]
pub(crate) struct DeliveryRate {
    /// Start of the current interval and the bytes acknowledged since.
    mark: Option<(Instant, u64)>,
    /// The window was full at a send during the current interval, and during the one before.
    window_full: [bool; 2],
    samples: [u64; DeliveryRate::SAMPLES],
    next: usize,
}

impl DeliveryRate {
    const SAMPLES: usize = 8;
    /// Intervals are at least this long (a path with a tiny RTT).
    const MIN_INTERVAL: Duration = Duration::from_millis(5);

    fn on_ack(&mut self, now: Instant, bytes: u64, srtt: Duration) {
        let Some((start, acked)) = self.mark.as_mut() else {
            self.mark = Some((now, 0));
            return;
        };
        *acked += bytes;
        let elapsed = now.saturating_since(*start);
        if elapsed >= srtt.max(Self::MIN_INTERVAL) {
            let rate = (*acked as f64 / elapsed.as_secs_f64()) as u64;
            let app_limited = !self.window_full.iter().any(|&f| f);
            if !app_limited || self.rate().is_some_and(|r| rate > r) {
                self.samples[self.next] = rate;
                self.next = (self.next + 1) % Self::SAMPLES;
            }
            self.window_full = [false, self.window_full[0]];
            self.mark = Some((now, 0));
        }
    }

    /// A send left no room for another full segment in the window.
    fn on_window_full(&mut self) {
        self.window_full[0] = true;
    }

    /// The path sends after a pause: the next interval starts at the next acknowledgement, not
    /// at the last one before the pause.
    fn restart(&mut self) {
        self.mark = None;
        self.window_full = [false; 2];
    }

    /// Bytes/s; `None` before a whole interval was measured.
    pub fn rate(&self) -> Option<u64> {
        self.samples.iter().copied().max().filter(|&r| r > 0)
    }
}

#[derive(Debug)]
pub(crate) struct Path {
    pub id: PathId,
    pub local: AddrId,
    pub remote: AddrId,
    pub state: PathState,
    /// Send on this path only when no non-backup path is usable.
    pub backup: bool,
    /// Carries a copy of the stream besides the paths the scheduler picks
    /// ([`Connection::set_duplicate`](super::Connection::set_duplicate)); `redundant_next` is
    /// then its cursor.
    pub duplicate: bool,
    /// The peer was asked to resend what it has outstanding on this path over its other
    /// paths ([`Connection::reinject_path`](super::Connection::reinject_path)): every PATH_PRIO
    /// for the path says so until it is made active again.
    pub reinject_asked: bool,
    /// Watched for a stall ([`Connection::set_watch`](super::Connection::set_watch)): besides
    /// the connection's reinjection policy, a guarded REJ timer resends what the path has
    /// outstanding over the others as soon as its acknowledgements stop.
    pub watch: bool,
    /// PATH_OPEN not yet sent (only on the side that opened the path).
    pub open_pending: bool,
    /// The acceptor of a path answers PATH_OPEN with an ack-eliciting packet, so that it too
    /// gets an RTT sample (as the SYN-ACK of TCP's handshake does).
    pub answer_pending: bool,

    pub next_seq: u64,
    base_seq: u64,
    sent: VecDeque<SentPacket>,
    pub in_flight: u64,
    /// Packets in state Outstanding and Lost.
    outstanding_pkts: usize,
    lost_pkts: usize,
    pub rtt: RttEstimator,
    pub cc: Box<dyn Controller>,
    /// Consecutive RTO expirations without progress.
    pub backoff: u32,
    /// Potentially failed: a timeout (RTO or reinjection timer) expired and nothing was heard
    /// since. No new data goes on the path until an acknowledgement arrives.
    pub pf: bool,
    /// Fast recovery lasts until everything sent before it started is acknowledged.
    recovery_point: Option<u64>,
    /// Packets to retransmit on this path, ascending.
    lost: VecDeque<u64>,
    /// Selectively acknowledged packets above the cumulative point.
    sacked: RangeSet,
    /// Packets below were already checked for DupThresh loss.
    loss_floor: u64,
    /// Retransmitted packets still outstanding, in retransmission order, each with the path's
    /// next sequence number when it went out (packets from there on were sent after it) and its
    /// send time (an entry whose packet went out again since is stale); see
    /// `lost_retransmissions`.
    retransmitted: VecDeque<(u64, u64, Instant)>,
    reordering: Reordering,
    pub probe: Option<Probe>,
    /// A recovery episode began: its first lost packet goes out at once, whatever the window
    /// (RFC 6675 §5 step 4.3).
    pub fast_retransmit: bool,
    /// A tail-loss probe is out; no other until everything up to here is acknowledged.
    tlp_high: Option<u64>,
    timers: [Option<Instant>; 4],
    /// RFC 7661 style: the largest flight seen in the current and previous RTT.
    flight_max: [u64; 2],
    flight_window_start: Instant,
    /// Every unacknowledged packet below this sequence number was queued for reinjection: the
    /// reinjection timer's anchor is searched from here.
    reinjected_below: u64,
    /// Redundant scheduling, and a path flagged `duplicate`: the next stream byte this path
    /// sends.
    pub redundant_next: u64,
    /// The path carried every byte of `[carried_from, redundant_next)` the peer has not
    /// acknowledged: when the cursor jumps over bytes the path never sent (flagged duplicate
    /// mid-stream, excused a redundant backlog), the mark jumps with it. The reinjection queue
    /// leaves to this path only what lies in that range.
    pub carried_from: u64,
    /// Exponentially weighted loss fraction.
    pub loss_rate: f64,
    /// The last acknowledgement progress, or the first send after the path was idle.
    progress_at: Instant,
    /// Smoothed time between acknowledgements that made progress (gain 1/8).
    progress_interval: Option<Duration>,
    /// What the path delivers ([`DeliveryRate`]).
    pub delivery: DeliveryRate,

    pub rx: RxState,
    pub stats: PathStats,
}

impl Path {
    pub fn new(
        id: PathId,
        local: AddrId,
        remote: AddrId,
        backup: bool,
        opened_locally: bool,
        now: Instant,
        cfg: &Config,
    ) -> Self {
        let mss = cfg.max_datagram_size as u64;
        Path {
            id,
            local,
            remote,
            state: if opened_locally {
                PathState::Opening
            } else {
                PathState::Established
            },
            backup,
            duplicate: false,
            reinject_asked: false,
            watch: false,
            open_pending: opened_locally,
            answer_pending: !opened_locally,
            next_seq: 0,
            base_seq: 0,
            sent: VecDeque::new(),
            in_flight: 0,
            outstanding_pkts: 0,
            lost_pkts: 0,
            rtt: RttEstimator::new(cfg.initial_rtt),
            cc: cfg.congestion.build(now, mss),
            backoff: 0,
            pf: false,
            recovery_point: None,
            lost: VecDeque::new(),
            sacked: RangeSet::new(),
            loss_floor: 0,
            retransmitted: VecDeque::new(),
            reordering: Reordering::default(),
            probe: None,
            fast_retransmit: false,
            tlp_high: None,
            timers: [None; 4],
            flight_max: [0; 2],
            flight_window_start: now,
            reinjected_below: 0,
            redundant_next: 0,
            carried_from: 0,
            loss_rate: 0.0,
            progress_at: now,
            progress_interval: None,
            delivery: DeliveryRate::default(),
            rx: RxState::default(),
            stats: PathStats::default(),
        }
    }

    pub fn is_established(&self) -> bool {
        self.state == PathState::Established
    }

    /// Established and not suspected dead: the scheduler may give it new data.
    pub fn is_usable(&self) -> bool {
        self.is_established() && !self.pf
    }

    pub fn mss(&self, cfg: &Config) -> u64 {
        cfg.max_datagram_size as u64
    }

    /// Whether a packet of `size` bytes fits the congestion window.
    pub fn has_room(&self, size: u64) -> bool {
        self.in_flight + size <= self.cc.window()
    }

    pub fn timer(&self, t: PathTimer) -> Option<Instant> {
        self.timers[t as usize]
    }

    pub fn set_timer(&mut self, t: PathTimer, at: Option<Instant>) {
        self.timers[t as usize] = at;
    }

    /// The earliest armed timer. The RTO waits behind an armed PTO (seed 002 §II: the RTO
    /// follows the probe).
    pub fn next_timeout(&self) -> Option<(Instant, PathTimer)> {
        PATH_TIMERS
            .iter()
            .filter(|&&t| !(t == PathTimer::Rto && self.timer(PathTimer::Pto).is_some()))
            .filter_map(|&t| self.timer(t).map(|at| (at, t)))
            .min()
    }

    /// Unacknowledged ack-eliciting packets (in flight or waiting for retransmission).
    pub fn has_outstanding(&self) -> bool {
        self.outstanding_pkts + self.lost_pkts > 0
    }

    fn outstanding_count(&self) -> usize {
        self.outstanding_pkts
    }

    pub fn packet(&self, seq: u64) -> Option<&SentPacket> {
        seq.checked_sub(self.base_seq)
            .and_then(|i| self.sent.get(i as usize))
    }

    fn packet_mut(&mut self, seq: u64) -> Option<&mut SentPacket> {
        seq.checked_sub(self.base_seq)
            .and_then(|i| self.sent.get_mut(i as usize))
    }

    /// Unacknowledged packets, oldest first.
    pub fn unacked(&self) -> impl Iterator<Item = (u64, &SentPacket)> {
        self.sent
            .iter()
            .enumerate()
            .map(|(i, p)| (self.base_seq + i as u64, p))
            .filter(|(_, p)| matches!(p.state, SentState::Outstanding | SentState::Lost))
    }

    pub fn unacked_mut(&mut self) -> impl Iterator<Item = &mut SentPacket> {
        self.sent
            .iter_mut()
            .filter(|p| matches!(p.state, SentState::Outstanding | SentState::Lost))
    }

    /// Current RTO including backoff.
    pub fn rto(&self, cfg: &Config) -> Duration {
        let base = self.rtt.rto(cfg.rto_formula, cfg.rto_min, cfg.rto_max);
        base.checked_mul(1u32 << self.backoff.min(16))
            .unwrap_or(cfg.rto_max)
            .min(cfg.rto_max)
    }

    /// PTO = min(RTO, 2·SRTT + δ), δ larger when a single packet is in flight (SPEC M3).
    fn pto(&self, cfg: &Config) -> Duration {
        let delta = if self.outstanding_count() == 1 {
            cfg.tlp_single_delta
        } else {
            cfg.tlp_delta
        };
        self.rto(cfg).min(self.rtt.srtt() * 2 + delta)
    }

    fn tlp_allowed(&self, cfg: &Config) -> bool {
        cfg.tail_loss_probe
            && self.tlp_high.is_none()
            && self.recovery_point.is_none()
            && self.backoff == 0
            && self.rtt.has_sample()
    }

    /// Records a new ack-eliciting packet; returns its sequence number.
    pub fn on_sent(&mut self, now: Instant, pkt: SentPacket, cfg: &Config) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        if self.outstanding_pkts == 0 {
            if now.saturating_since(self.progress_at) > self.rtt.srtt() {
                self.delivery.restart();
            }
            self.progress_at = now;
        }
        self.in_flight += u64::from(pkt.size);
        if !self.has_room(self.mss(cfg)) {
            self.delivery.on_window_full();
        }
        self.outstanding_pkts += 1;
        self.stats.packets_sent += 1;
        self.stats.bytes_sent += u64::from(pkt.size);
        if let Some(d) = pkt.data {
            self.stats.data_bytes_sent += u64::from(d.len);
        }
        self.sent.push_back(pkt);
        self.after_send(now, cfg);
        seq
    }

    /// Records the retransmission of `seq` on this path with a new size and send time.
    pub fn on_retransmitted(&mut self, now: Instant, seq: u64, size: u32, cfg: &Config) {
        let Some(p) = self.packet_mut(seq) else {
            return;
        };
        let was = p.state;
        let old_size = p.size;
        p.state = SentState::Outstanding;
        p.time = now;
        p.size = size;
        p.retransmitted = true;
        match was {
            SentState::Outstanding => self.in_flight -= u64::from(old_size),
            SentState::Lost => {
                self.lost_pkts -= 1;
                self.outstanding_pkts += 1;
            }
            SentState::Sacked => self.outstanding_pkts += 1,
        }
        self.in_flight += u64::from(size);
        self.stats.packets_sent += 1;
        self.stats.bytes_sent += u64::from(size);
        self.stats.retransmissions += 1;
        self.retransmitted.push_back((seq, self.next_seq, now));
        self.after_send(now, cfg);
    }

    fn after_send(&mut self, now: Instant, cfg: &Config) {
        self.note_flight(now);
        // RFC 6298 §5.1: start the RTO when a packet is sent and it is not running.
        if self.timer(PathTimer::Rto).is_none() {
            self.set_timer(PathTimer::Rto, Some(now + self.rto(cfg)));
        }
        // Seed 002 §II: the PTO restarts on every send.
        if self.tlp_allowed(cfg) {
            self.set_timer(PathTimer::Pto, Some(now + self.pto(cfg)));
        }
    }

    fn note_flight(&mut self, now: Instant) {
        if now.saturating_since(self.flight_window_start) > self.rtt.srtt() {
            self.flight_max = [self.in_flight, self.flight_max[0]];
            self.flight_window_start = now;
        } else {
            self.flight_max[0] = self.flight_max[0].max(self.in_flight);
        }
    }

    /// Whether the window limited sending lately (RFC 7661; Linux `tcp_is_cwnd_limited`).
    fn cwnd_limited(&self, mss: u64) -> bool {
        let flight = self.flight_max[0].max(self.flight_max[1]);
        let cwnd = self.cc.window();
        if cwnd < self.cc.ssthresh() {
            // Slow start: grow while at least half the window is used.
            flight * 2 >= cwnd
        } else {
            flight + mss >= cwnd
        }
    }

    /// The next lost packet to retransmit, if the window allows it.
    pub fn next_lost(&mut self) -> Option<u64> {
        while let Some(&seq) = self.lost.front() {
            match self.packet(seq) {
                Some(p) if p.state == SentState::Lost => return Some(seq),
                _ => {
                    self.lost.pop_front();
                }
            }
        }
        None
    }

    /// Marks these outstanding packets lost and queues them for retransmission on this path
    /// (retransmissions lost again, RFC 8985). The window is not reduced again: they belong
    /// to the recovery that retransmitted them.
    pub fn requeue_lost(&mut self, seqs: &[u64]) {
        for &seq in seqs {
            if self.mark_lost(seq, false).is_some() {
                let at = self.lost.partition_point(|&s| s < seq);
                self.lost.insert(at, seq);
            }
        }
    }

    /// An outstanding packet becomes lost (out of the flight, counted); returns when it was
    /// sent, or `None` if it was not outstanding. The caller queues it for retransmission.
    fn mark_lost(&mut self, seq: u64, by_ack: bool) -> Option<Instant> {
        let p = self
            .packet_mut(seq)
            .filter(|p| p.state == SentState::Outstanding)?;
        p.state = SentState::Lost;
        p.lost_by_ack = by_ack;
        let (size, time) = (u64::from(p.size), p.time);
        self.in_flight -= size;
        self.outstanding_pkts -= 1;
        self.lost_pkts += 1;
        Some(time)
    }

    pub fn pop_lost(&mut self, seq: u64) {
        if self.lost.front() == Some(&seq) {
            self.lost.pop_front();
        }
    }

    /// The last outstanding packet (the tail-loss probe retransmits it).
    pub fn last_outstanding(&self) -> Option<u64> {
        self.sent
            .iter()
            .rposition(|p| p.state == SentState::Outstanding)
            .map(|i| self.base_seq + i as u64)
    }

    /// The ACK frame about to be processed carried as many ranges as it could: the peer may
    /// have had packets below its lowest range, `lowest`, that it did not report.
    pub fn ack_truncated_at(&mut self, lowest: u64) {
        let r = &mut self.reordering;
        r.unreported_below = r.unreported_below.max(lowest);
    }

    /// Processes an ACK frame for this path's packets.
    pub fn on_ack(
        &mut self,
        now: Instant,
        cum: u64,
        echo: Option<Instant>,
        ranges: impl Iterator<Item = (u64, u64)>,
        cfg: &Config,
        coupling: Coupling<'_>,
    ) -> AckOutcome {
        let mut out = AckOutcome::default();
        let mut progress = false;
        // What the acknowledged packets say of the path's reordering, if it is to be learnt.
        let learn = cfg.adaptive_reordering;
        let mut evidence = AckEvidence {
            unreported_below: self.reordering.unreported_below,
            now,
            min_rtt: self.rtt.min(),
            highest_sacked: self.sacked.iter().next_back().map(|(_, e)| e),
            latest_sent: None,
            overtaken_by: None,
            spurious: 0,
        };
        // Cumulative part.
        let cum = cum.min(self.next_seq);
        let cum_progress = cum > self.base_seq;
        while self.base_seq < cum {
            let Some(p) = self.sent.pop_front() else {
                break;
            };
            if learn {
                evidence.note(self.base_seq, &p);
            }
            self.base_seq += 1;
            match p.state {
                SentState::Outstanding => {
                    self.in_flight -= u64::from(p.size);
                    self.outstanding_pkts -= 1;
                    out.newly_acked += u64::from(p.size);
                    progress = true;
                }
                SentState::Lost => {
                    self.lost_pkts -= 1;
                    out.newly_acked += u64::from(p.size);
                    progress = true;
                }
                SentState::Sacked => {}
            }
            out.open_acked |= p.path_open;
        }
        self.sacked.remove_below(self.base_seq);
        self.loss_floor = self.loss_floor.max(self.base_seq);
        // Selective part: only the packets not known to be acknowledged yet.
        for (s, e) in ranges {
            let s = s.max(self.base_seq);
            let e = e.min(self.next_seq);
            if s >= e || self.sacked.contains_range(s, e) {
                continue;
            }
            for (gs, ge) in self.sacked.gaps(s, e) {
                for seq in gs..ge {
                    let Some(p) = self.packet_mut(seq) else {
                        continue;
                    };
                    if learn {
                        evidence.note(seq, p);
                    }
                    let size = u64::from(p.size);
                    let was = p.state;
                    p.state = SentState::Sacked;
                    let opened = p.path_open;
                    match was {
                        SentState::Outstanding => {
                            self.in_flight -= size;
                            self.outstanding_pkts -= 1;
                            out.newly_acked += size;
                            progress = true;
                        }
                        SentState::Lost => {
                            self.lost_pkts -= 1;
                            out.newly_acked += size;
                            progress = true;
                        }
                        SentState::Sacked => {}
                    }
                    out.open_acked |= opened;
                }
            }
            self.sacked.insert(s, e);
        }
        if progress {
            self.stats.acks += 1;
            if let Some(sent) = echo {
                self.rtt.update(now.saturating_since(sent));
            }
            let gap = now.saturating_since(self.progress_at);
            self.progress_interval = Some(match self.progress_interval {
                None => gap,
                Some(i) => i.mul_f64(0.875) + gap.mul_f64(0.125),
            });
            self.progress_at = now;
            self.delivery.on_ack(now, out.newly_acked, self.rtt.srtt());
            self.pf = false;
            self.loss_rate *= 1.0 - 1.0 / 64.0;
            let mss = self.mss(cfg);
            let ack = cc::Ack {
                now,
                bytes: out.newly_acked,
                srtt: self.rtt.srtt(),
                min_rtt: self.rtt.min(),
                cwnd_limited: self.cwnd_limited(mss),
                stretch: cfg.stretch_acks,
            };
            self.cc.on_ack(&ack, coupling);
            if self.tlp_high.is_some_and(|h| self.base_seq >= h) {
                self.tlp_high = None;
            }
        } else {
            self.stats.duplicate_acks += 1;
        }
        if learn && self.reordering.learn(&evidence) {
            // The episode was no loss: its reduction is undone and it is over.
            self.cc.undo();
            self.recovery_point = None;
        }
        out.newly_lost = self.detect_losses(now, cfg.linux_recovery);
        out.lost_again = self.lost_retransmissions(now);
        if self.recovery_point.is_some_and(|rp| self.base_seq >= rp) {
            self.recovery_point = None;
        }
        // Timers (RFC 6298 §5.2, §5.3): the RTO restarts when new data is acknowledged
        // cumulatively (not on selective acknowledgements: a lost retransmission below them
        // must still time out), and stops when nothing is outstanding.
        if cum_progress {
            self.backoff = 0;
        }
        if !self.has_outstanding() {
            self.set_timer(PathTimer::Rto, None);
            self.set_timer(PathTimer::Pto, None);
        } else if progress {
            if cum_progress {
                self.set_timer(PathTimer::Rto, Some(now + self.rto(cfg)));
            }
            let pto = self.tlp_allowed(cfg).then(|| now + self.pto(cfg));
            self.set_timer(PathTimer::Pto, pto);
        }
        out
    }

    /// RFC 6675 IsLost(): a packet with DupThresh selectively acknowledged packets above it is
    /// lost. Each packet is examined once (`loss_floor` only moves up). On a path that has
    /// reordered, also RACK's rule ([`Reordering`]).
    fn detect_losses(&mut self, now: Instant, per_episode: bool) -> u64 {
        let mut newly = 0;
        let mut first_lost_sent = None;
        if let Some(threshold) = self.dup_thresh_point() {
            let mut seq = self.loss_floor.max(self.base_seq);
            while seq < threshold {
                if let Some(time) = self.mark_lost(seq, true) {
                    self.lost.push_back(seq);
                    first_lost_sent.get_or_insert(time);
                    newly += 1;
                }
                seq += 1;
            }
            self.loss_floor = self.loss_floor.max(threshold);
        }
        for seq in self.lost_by_time() {
            if let Some(time) = self.mark_lost(seq, true) {
                let at = self.lost.partition_point(|&s| s < seq);
                self.lost.insert(at, seq);
                first_lost_sent = Some(first_lost_sent.map_or(time, |t: Instant| t.min(time)));
                newly += 1;
            }
        }
        if let Some(sent) = first_lost_sent {
            self.stats.lost_packets += newly;
            self.loss_rate = self.loss_rate * (1.0 - 1.0 / 64.0) + 1.0 / 64.0;
            let episode = self.recovery_point.is_none();
            let r = &mut self.reordering;
            r.undo_left = if episode {
                Some(newly)
            } else {
                r.undo_left.map(|left| left + newly)
            };
            if episode {
                self.recovery_point = Some(self.next_seq);
                self.stats.fast_retransmits += 1;
                self.fast_retransmit = true;
            }
            if episode || !per_episode {
                self.cc.on_loss(now, sent, self.in_flight);
            }
            self.set_timer(PathTimer::Pto, None);
        }
        newly
    }

    /// The sequence number with DupThresh selectively acknowledged packets at or above it.
    fn dup_thresh_point(&self) -> Option<u64> {
        let thresh = self.reordering.dup_thresh;
        let mut count = 0;
        for (s, e) in self.sacked.iter().rev() {
            if count + (e - s) >= thresh {
                return Some(e - (thresh - count));
            }
            count += e - s;
        }
        None
    }

    /// RFC 8985 §6.2 on a path that has reordered: the outstanding packets below the highest
    /// acknowledged one, not sent again, that went out at least a reordering window before the
    /// latest packet acknowledged unambiguously (min(steps · min RTT / 4, SRTT)). Packets
    /// below `loss_floor` were declared lost already.
    fn lost_by_time(&self) -> Vec<u64> {
        let r = &self.reordering;
        let mut found = Vec::new();
        let (Some(latest), Some(highest)) = (
            r.latest_sent_acked,
            self.sacked.iter().next_back().map(|(_, e)| e),
        ) else {
            return found;
        };
        if r.steps == 0 {
            return found;
        }
        let window = (self.rtt.min() / 4 * r.steps).min(self.rtt.srtt());
        let from = self.loss_floor.max(self.base_seq);
        'gaps: for (s, e) in self.sacked.gaps(from, highest) {
            for seq in s..e {
                let Some(p) = self.packet(seq) else { continue };
                if p.state != SentState::Outstanding || p.retransmitted {
                    continue;
                }
                // First transmissions go out in sequence order: the rest are later still.
                if p.time + window > latest {
                    break 'gaps;
                }
                found.push(seq);
            }
        }
        found
    }

    /// Retransmissions lost again, found as RFC 8985 (RACK) finds losses: a packet sent after
    /// one was acknowledged selectively, and the retransmission has been out for the round
    /// trip of the latest acknowledged packet plus a reordering window (a quarter of the
    /// minimum RTT) without being acknowledged. DupThresh on sequence numbers cannot see this:
    /// a retransmission keeps its old sequence number. The path's own recovery is left as it
    /// is (its RTO still covers them); the connection may send their data over another path
    /// as well ([`Path::take_for_copy`]).
    fn lost_retransmissions(&mut self, now: Instant) -> Vec<u64> {
        let mut found = Vec::new();
        if self.retransmitted.is_empty() {
            return found;
        }
        let highest_sacked = self.sacked.iter().next_back().map(|(_, e)| e - 1);
        let wait = self.rtt.latest() + self.rtt.min() / 4;
        while let Some(&(seq, fence, sent)) = self.retransmitted.front() {
            if !self
                .packet(seq)
                .is_some_and(|p| p.state == SentState::Outstanding && p.time == sent)
            {
                // Acknowledged, lost and queued again, or sent again since (a later entry
                // watches that send): no longer watched here.
                self.retransmitted.pop_front();
                continue;
            }
            // Retransmissions are queued in send order: if this one is not lost yet, no later
            // one is.
            if highest_sacked.is_none_or(|h| h < fence) || now.saturating_since(sent) < wait {
                break;
            }
            self.retransmitted.pop_front();
            self.stats.lost_retransmissions += 1;
            found.push(seq);
        }
        found
    }

    /// The data of these packets that is not queued for other paths yet, now marked as queued.
    pub fn take_for_copy(&mut self, seqs: &[u64]) -> Vec<DataRef> {
        let mut data = Vec::new();
        for &seq in seqs {
            if let Some(p) = self.packet_mut(seq)
                && !p.reinjected
                && let Some(d) = p.data
            {
                p.reinjected = true;
                data.push(d);
            }
        }
        data
    }

    /// RTO expiry: every outstanding packet is lost, the window collapses, the RTO backs off.
    /// Returns `true` if the path is now broken.
    ///
    /// While the path is still opening the window is left as it is: a lost path open says
    /// nothing of the path's capacity (its link was not there yet), and the transfer that
    /// follows starts in slow start, as Linux's does after a lost SYN (`tcp_init_transfer`
    /// keeps ssthresh infinite). So until the path has its first RTT sample: the timer then
    /// ran on the configured initial RTT, a guess, and on a path longer than it (a satellite
    /// link of 600 ms against 100 ms) the answering end's first packets time out before any
    /// answer could come back; Linux's answering end likewise keeps its initial window after
    /// one retransmitted SYN-ACK.
    pub fn on_rto(&mut self, now: Instant, cfg: &Config) -> bool {
        self.stats.rto_count += 1;
        self.backoff += 1;
        self.pf = true;
        self.reordering.undo_left = None;
        // Linux's `tcp_enter_loss`: a DupThresh that held back losses DupThresh would have
        // found falls back to it.
        if self.reordering.dup_thresh > DUP_THRESH
            && self.sacked.iter().map(|(s, e)| e - s).sum::<u64>() >= DUP_THRESH
        {
            self.reordering.dup_thresh = DUP_THRESH;
        }
        if self.state != PathState::Opening && self.rtt.has_sample() {
            self.cc.on_rto(now, self.in_flight);
        }
        self.lost.clear();
        let base = self.base_seq;
        for (i, p) in self.sent.iter_mut().enumerate() {
            match p.state {
                SentState::Outstanding => {
                    p.state = SentState::Lost;
                    p.lost_by_ack = false;
                    self.lost.push_back(base + i as u64);
                }
                SentState::Lost => {
                    p.lost_by_ack = false;
                    self.lost.push_back(base + i as u64);
                }
                _ => {}
            }
        }
        self.in_flight = 0;
        self.lost_pkts += self.outstanding_pkts;
        self.outstanding_pkts = 0;
        self.loss_floor = self.next_seq;
        self.recovery_point = Some(self.next_seq);
        self.loss_rate = self.loss_rate * (1.0 - 1.0 / 16.0) + 1.0 / 16.0;
        self.set_timer(PathTimer::Pto, None);
        self.set_timer(PathTimer::Rto, Some(now + self.rto(cfg)));
        self.backoff >= cfg.broken_after_backoffs
    }

    /// PTO expiry: a tail-loss probe goes out, then the RTO runs from now (seed 002 Eq. 5).
    pub fn on_pto(&mut self, now: Instant, cfg: &Config) {
        self.stats.tlp_count += 1;
        self.set_timer(PathTimer::Pto, None);
        if self.last_outstanding().is_some() {
            self.probe = Some(Probe::Tail);
            self.tlp_high = Some(self.next_seq);
        }
        self.set_timer(PathTimer::Rto, Some(now + self.rto(cfg)));
    }

    /// When this path counts as stalled for redundant scheduling: packets are in flight and no
    /// acknowledgement made progress for the minimum RTT + 2·RTTVAR + 1 ms (since the last
    /// progress, or the first send after the path was idle). A busy path's acknowledgements
    /// arrive every few packets, so this only triggers when the path is behind or gone; calling
    /// a live path stalled merely lets the others run ahead of it for a moment. `None` if
    /// nothing is in flight.
    pub fn stall_deadline(&self) -> Option<Instant> {
        (self.outstanding_pkts > 0).then(|| {
            self.progress_at + self.rtt.min() + self.rtt.rttvar() * 2 + crate::rtt::GRANULARITY
        })
    }

    /// Timing inputs of the reinjection timer.
    pub fn timing(&self, cfg: &Config) -> PathTiming {
        // The earliest unacknowledged original packet with data not queued for reinjection yet;
        // packets
        // below `reinjected_below` were all queued, selectively acknowledged ones are skipped.
        let mut seq = self.reinjected_below.max(self.base_seq);
        let mut earliest = None;
        let mut ack_delay = Duration::ZERO;
        while seq < self.next_seq {
            if let Some((s, e)) = self.sacked.first_ending_after(seq)
                && s <= seq
            {
                seq = e;
                continue;
            }
            // Exactly the packets a speculative reinjection would take.
            if let Some(p) = self.packet(seq)
                && matches!(p.state, SentState::Outstanding | SentState::Lost)
                && !p.reinjected
                && !p.is_reinjection
                && p.data.is_some()
            {
                earliest = Some(p.time);
                ack_delay = self.ack_hold(seq, p.time, cfg);
                break;
            }
            seq += 1;
        }
        PathTiming {
            earliest_outstanding: earliest,
            srtt: self.rtt.srtt(),
            rttvar: self.rtt.rttvar(),
            has_rtt_sample: self.rtt.has_sample(),
            last_progress: self.progress_at,
            progress_interval: self.progress_interval.unwrap_or_else(|| self.rtt.srtt()),
            ack_delay,
        }
    }

    /// How long the peer may hold its acknowledgement of packet `seq`, sent at `sent`. It
    /// acknowledges an in-order packet once `ack_frequency` have arrived or after its maximum
    /// ACK delay: so until the packet that completes `seq`'s group went out, if that was within
    /// the delay (the group may begin at `seq`: the worst case). A packet it receives after
    /// later ones (they were acknowledged) fills a hole and is acknowledged at once.
    fn ack_hold(&self, seq: u64, sent: Instant, cfg: &Config) -> Duration {
        if self.sacked.first_ending_after(seq).is_some() {
            return Duration::ZERO;
        }
        let last = seq + u64::from(cfg.ack_frequency.saturating_sub(1));
        match self.packet(last) {
            Some(p) if last < self.next_seq => p.time.saturating_since(sent).min(cfg.max_ack_delay),
            _ => cfg.max_ack_delay,
        }
    }

    /// Handles a received packet header for this path. Returns whether it was a duplicate.
    pub fn on_packet_received(
        &mut self,
        now: Instant,
        seq: u64,
        ts: u32,
        size: usize,
        ack_eliciting: bool,
        cfg: &Config,
    ) -> bool {
        self.stats.packets_received += 1;
        self.stats.bytes_received += size as u64;
        if !ack_eliciting {
            return false;
        }
        let dup = self.rx.on_packet(seq, ts, cfg);
        if !self.rx.ack_now && self.timer(PathTimer::Ack).is_none() {
            self.set_timer(PathTimer::Ack, Some(now + cfg.max_ack_delay));
        }
        dup
    }

    /// An ACK frame for the peer's packets went out on this path.
    pub fn on_ack_sent(&mut self) {
        self.rx.ack_sent();
        self.set_timer(PathTimer::Ack, None);
    }

    /// Marks the data of every unacknowledged packet as reinjected and returns it, with the
    /// control frames those packets carried (they must reach the peer another way).
    ///
    /// A `speculative` reinjection (a timer guessing that the path is dead while it may only be
    /// slow) leaves alone the packets that are reinjected copies themselves: copying a copy back
    /// and forth between two slow paths would multiply the traffic.
    pub fn take_for_reinjection(&mut self, speculative: bool) -> (Vec<DataRef>, Vec<Ctrl>) {
        let mut data = Vec::new();
        let mut ctrl = Vec::new();
        if !speculative {
            self.reinjected_below = self.next_seq;
        }
        for p in self.unacked_mut() {
            ctrl.append(&mut p.ctrl);
            if p.reinjected || (speculative && p.is_reinjection) {
                continue;
            }
            p.reinjected = true;
            if let Some(d) = p.data {
                data.push(d);
            }
        }
        (data, ctrl)
    }

    /// All control frames of unacknowledged packets (when the path goes away).
    pub fn drain_ctrl(&mut self) -> Vec<Ctrl> {
        self.unacked_mut()
            .flat_map(|p| std::mem::take(&mut p.ctrl))
            .collect()
    }
}
