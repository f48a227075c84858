//! A multipath connection: one byte stream carried by several subflows (paths).
//!
//! The API follows quinn-proto's `Connection`; call its four kinds of methods in this order:
//!
//! 1. inputs: [`Connection::handle_datagram`] for each received datagram and
//!    [`Connection::handle_timeout`] when the instant from `poll_timeout` is reached;
//! 2. application commands: [`write`](Connection::write), [`read`](Connection::read),
//!    [`finish`](Connection::finish), and the path-manager commands
//!    ([`open_path`](Connection::open_path), [`close_path`](Connection::close_path),
//!    [`set_backup`](Connection::set_backup), [`announce_addr`](Connection::announce_addr),
//!    [`remove_local_addr`](Connection::remove_local_addr), …);
//! 3. outputs: [`poll_transmit`](Connection::poll_transmit) until it returns `None`, then
//!    [`poll_event`](Connection::poll_event) until `None`, then
//!    [`poll_timeout`](Connection::poll_timeout);
//! 4. getters ([`stats`](Connection::stats), [`paths`](Connection::paths), …) at any time.
//!
//! Time is always an argument; the connection never reads a clock.

mod path;
mod recv;
mod recv_buf;
mod send_buf;
mod transmit;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::Instant;
use crate::cc::PathCc;
use crate::config::Config;
use crate::reinject::{ReinjectPolicy, Trigger};
use crate::scheduler::{Context, PathView, Priority, Scheduler};
use crate::stats::{AddrStats, ConnectionStats, PathStats};
use crate::wire::{AddrId, PathId};

use path::{Ctrl, DataRef, Path, PathTimer};
use recv_buf::RecvBuf;
use send_buf::{PriorityMarks, SendBuf};

pub use transmit::Transmit;

/// Most disjoint ranges of packet numbers a path keeps as received above its cumulative point.
/// Every hole a sender leaves costs the receiver a range until it is filled: a sender's holes
/// are its losses within a window (a few thousand at most with a window of tens of thousands
/// of packets), while a peer that skipped numbers on purpose could grow the set, and the time
/// to insert into it, without end. A packet that would open one more is dropped and counted
/// ([`DropReason::TooManyHoles`](crate::DropReason::TooManyHoles)); one that fills or extends
/// a range is always taken.
pub const MAX_RX_RANGES: usize = 4096;
/// Farthest above a path's cumulative point a packet number is taken: 2^22 packets, more than
/// the largest window (1 GiB of buffer in segments of 1200 bytes is under 2^20). A packet
/// beyond is a protocol violation, dropped and counted.
pub const MAX_RX_AHEAD: u64 = 1 << 22;

/// Which end of the connection this is. The client opens the first path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Client,
    Server,
}

/// Why a path was closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathCloseReason {
    /// Closed by a local command.
    Local,
    /// The peer sent PATH_CLOSE.
    Peer,
    /// The local address the path uses is gone.
    LocalAddrRemoved,
    /// The peer removed the address the path uses (REMOVE_ADDR).
    PeerAddrRemoved,
    /// Too many RTO backoffs without progress.
    Broken,
}

impl PathCloseReason {
    fn wire_code(self) -> u64 {
        match self {
            PathCloseReason::Local => 0,
            PathCloseReason::Peer => 1,
            PathCloseReason::LocalAddrRemoved => 2,
            PathCloseReason::PeerAddrRemoved => 3,
            PathCloseReason::Broken => 4,
        }
    }
}

/// Why the connection closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// Both streams finished and were acknowledged.
    Finished,
    /// Closed locally with [`Connection::abort`].
    Aborted(u64),
    /// The peer sent CLOSE.
    ByPeer(u64),
    /// Nothing was received for the idle timeout.
    IdleTimeout,
}

/// Something the application or path manager should know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The first path is established.
    Connected,
    PathEstablished {
        path: PathId,
        local: AddrId,
        remote: AddrId,
        backup: bool,
    },
    PathClosed {
        path: PathId,
        reason: PathCloseReason,
        /// The local address the path used.
        local: AddrId,
        /// Whether the path had been established.
        established: bool,
    },
    /// A path's backup flag changed (`by_peer`: through the peer's PATH_PRIO).
    PathPriority {
        path: PathId,
        backup: bool,
        by_peer: bool,
    },
    /// A path timed out (RTO or reinjection timer) and gets no new data until it answers.
    PathPotentiallyFailed {
        path: PathId,
    },
    /// A path that timed out answered again.
    PathRecovered {
        path: PathId,
    },
    PeerAddrAnnounced {
        id: AddrId,
        addr: SocketAddr,
        backup: bool,
    },
    PeerAddrRemoved {
        id: AddrId,
    },
    /// New in-order stream bytes can be read.
    Readable,
    /// The peer finished its stream; everything it sent has been received.
    PeerFinished,
    Closed {
        reason: CloseReason,
    },
}

/// Misuse of the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("no such path")]
    UnknownPath,
    #[error("too many paths")]
    TooManyPaths,
    #[error("connection closed")]
    Closed,
}

/// A snapshot of one path, for status displays and metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct PathInfo {
    pub id: PathId,
    pub local: AddrId,
    pub remote: AddrId,
    pub established: bool,
    pub backup: bool,
    /// Carries a copy of the stream ([`Connection::set_duplicate`]).
    pub duplicate: bool,
    /// Watched for a stall ([`Connection::set_watch`]).
    pub watch: bool,
    /// Established and not potentially failed.
    pub usable: bool,
    pub srtt: Duration,
    pub rttvar: Duration,
    pub rto: Duration,
    /// The lowest RTT seen (the initial RTT before a sample).
    pub min_rtt: Duration,
    /// What the path delivered recently, bytes/s (the schedulers' `PathView::delivery_rate`).
    pub delivery_rate: Option<u64>,
    pub cwnd: u64,
    pub ssthresh: u64,
    pub in_flight: u64,
    pub congestion: &'static str,
    pub stats: PathStats,
}

#[derive(Debug, Clone, Copy)]
struct Reinjection {
    data: DataRef,
    from: PathId,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Client: the first path is not established yet. Server: no path yet.
    Handshake,
    Established,
    Closed,
}

/// A multipath connection endpoint.
#[derive(Debug)]
pub struct Connection {
    cfg: Arc<Config>,
    side: Side,
    state: State,
    paths: Vec<Path>,
    next_path_id: u32,
    /// Recently closed paths: their late packets are dropped, not taken as new paths.
    closed_paths: VecDeque<PathId>,
    send: SendBuf,
    /// The application priority of the stream's bytes, for the scheduler.
    priority: PriorityMarks,
    recv: RecvBuf,
    reinject_queue: VecDeque<Reinjection>,
    ctrl_queue: VecDeque<Ctrl>,
    scheduler: Box<dyn Scheduler>,
    events: VecDeque<Event>,
    peer_addrs: Vec<(AddrId, SocketAddr, bool)>,
    /// Local addresses lost at the link layer, and when their REMOVE_ADDR goes out.
    pending_removals: Vec<(AddrId, Instant)>,
    /// A DATA_ACK should go out soon (new data, or the window opened).
    data_ack_pending: bool,
    readable_pending: bool,
    peer_finished_reported: bool,
    /// The stream unit for which an opportunistic retransmission (or a stalled-segment copy)
    /// was already made.
    opportunistic_done: Option<u64>,
    /// When the peer's cumulative DATA_ACK last moved (the connection's creation before).
    data_ack_at: Instant,
    close_frames_pending: Option<u64>,
    /// Next path to send CLOSE on.
    close_cursor: usize,
    /// Right edge of the receive window last advertised in a DATA_ACK.
    advertised_edge: u64,
    /// Redundant scheduling: the furthest stream byte sent on any path.
    redundant_head: u64,
    /// Redundant scheduling: when a stalled path stops holding the others back.
    redundant_wakeup: Option<Instant>,
    /// The latest time passed in by the driver.
    now: Instant,
    /// Persist timer (RFC 9293 §3.8.6.1): probe a closed receive window when nothing is in
    /// flight, so that a lost window update cannot stall the stream.
    persist: Option<Instant>,
    /// The persist timer expired: send a probe at the next opportunity.
    persist_due: bool,
    last_rx: Instant,
    tx_round_robin: usize,
    stats: ConnectionStats,
    /// Counters per local address, surviving path closes.
    addr_stats: Vec<(AddrId, AddrStats)>,
    /// Counters per peer address, surviving path closes.
    peer_addr_stats: Vec<(AddrId, AddrStats)>,
    coupling_scratch: Vec<PathCc>,
    view_scratch: Vec<PathView>,
}

fn entry(v: &mut Vec<(AddrId, AddrStats)>, a: AddrId) -> &mut AddrStats {
    let i = match v.iter().position(|(x, _)| *x == a) {
        Some(i) => i,
        None => {
            v.push((a, AddrStats::default()));
            v.len() - 1
        }
    };
    &mut v[i].1
}

/// Keep this many closed path ids to recognise their late packets.
const CLOSED_PATH_MEMORY: usize = 256;

impl Connection {
    /// A new endpoint. The configuration must be valid ([`Config::validate`]).
    pub fn new(cfg: Arc<Config>, side: Side, now: Instant) -> Self {
        debug_assert!(cfg.validate().is_ok());
        let scheduler = cfg.scheduler.build();
        Connection {
            send: SendBuf::new(cfg.send_buffer, cfg.receive_buffer),
            priority: PriorityMarks::default(),
            recv: RecvBuf::new(cfg.receive_buffer),
            side,
            state: State::Handshake,
            paths: Vec::new(),
            next_path_id: match side {
                Side::Client => 0,
                Side::Server => 1,
            },
            closed_paths: VecDeque::new(),
            reinject_queue: VecDeque::new(),
            ctrl_queue: VecDeque::new(),
            scheduler,
            events: VecDeque::new(),
            peer_addrs: Vec::new(),
            pending_removals: Vec::new(),
            data_ack_pending: false,
            readable_pending: false,
            peer_finished_reported: false,
            opportunistic_done: None,
            data_ack_at: now,
            close_frames_pending: None,
            close_cursor: 0,
            advertised_edge: 0,
            redundant_head: 0,
            redundant_wakeup: None,
            persist: None,
            persist_due: false,
            now,
            last_rx: now,
            tx_round_robin: 0,
            stats: ConnectionStats::default(),
            addr_stats: Vec::new(),
            peer_addr_stats: Vec::new(),
            coupling_scratch: Vec::new(),
            view_scratch: Vec::new(),
            cfg,
        }
    }

    // ---- getters ----

    pub fn side(&self) -> Side {
        self.side
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// At least one path was established and the connection is not closed.
    pub fn is_established(&self) -> bool {
        self.state == State::Established
    }

    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    pub fn stats(&self) -> &ConnectionStats {
        &self.stats
    }

    /// Counters per local address (interface), including paths closed since.
    pub fn addr_stats(&self) -> impl Iterator<Item = (AddrId, &AddrStats)> + '_ {
        self.addr_stats.iter().map(|(a, s)| (*a, s))
    }

    /// Counters per peer address (the peer's numbering), including paths closed since.
    pub fn peer_addr_stats(&self) -> impl Iterator<Item = (AddrId, &AddrStats)> + '_ {
        self.peer_addr_stats.iter().map(|(a, s)| (*a, s))
    }

    /// The counters of a path's local and peer addresses.
    fn path_addr_stats(&mut self, idx: usize) -> (&mut AddrStats, &mut AddrStats) {
        let (local, remote) = (self.paths[idx].local, self.paths[idx].remote);
        (
            entry(&mut self.addr_stats, local),
            entry(&mut self.peer_addr_stats, remote),
        )
    }

    /// Bytes currently held for reordering at the receiver.
    pub fn reorder_buffer_bytes(&self) -> u64 {
        self.recv.ooo_bytes()
    }

    /// In-order bytes waiting to be read.
    pub fn readable_bytes(&self) -> usize {
        self.recv.readable()
    }

    /// Bytes the application can write now.
    pub fn send_space(&self) -> u64 {
        self.send.space()
    }

    /// Bytes written but not yet acknowledged by the peer.
    pub fn send_buffered(&self) -> u64 {
        self.send.buffered()
    }

    #[doc(hidden)]
    pub fn debug_send_state(&self) -> String {
        format!(
            "next {} end {} peer_cum {} window_end {} fin {} reinjq {} (front {:?}) ctrlq {} state {:?}",
            self.send.next,
            self.send.end(),
            self.send.peer_cum,
            self.send.peer_window_end,
            self.send.fin,
            self.reinject_queue.len(),
            self.reinject_queue.front(),
            self.ctrl_queue.len(),
            self.state
        )
    }

    /// Stream bytes sent at least once, on any path (the send position of the stream).
    pub fn stream_sent(&self) -> u64 {
        self.send.next.max(self.redundant_head).min(self.send.end())
    }

    /// Everything written was acknowledged.
    pub fn all_acked(&self) -> bool {
        self.send.peer_cum >= self.send.end()
    }

    pub fn paths(&self) -> impl Iterator<Item = PathInfo> + '_ {
        self.paths.iter().map(|p| self.info(p))
    }

    pub fn path(&self, id: PathId) -> Option<PathInfo> {
        self.paths.iter().find(|p| p.id == id).map(|p| self.info(p))
    }

    fn info(&self, p: &Path) -> PathInfo {
        PathInfo {
            id: p.id,
            local: p.local,
            remote: p.remote,
            established: p.is_established(),
            backup: p.backup,
            duplicate: p.duplicate,
            watch: p.watch,
            usable: p.is_usable(),
            srtt: p.rtt.srtt(),
            rttvar: p.rtt.rttvar(),
            rto: p.rto(&self.cfg),
            min_rtt: p.rtt.min(),
            delivery_rate: p.delivery.rate(),
            cwnd: p.cc.window(),
            ssthresh: p.cc.ssthresh(),
            in_flight: p.in_flight,
            congestion: p.cc.name(),
            stats: p.stats.clone(),
        }
    }

    /// Addresses the peer announced.
    pub fn peer_addrs(&self) -> impl Iterator<Item = (AddrId, SocketAddr, bool)> + '_ {
        self.peer_addrs.iter().copied()
    }

    // ---- application commands ----

    /// Writes stream bytes; returns how many fit the send buffer.
    pub fn write(&mut self, data: &[u8]) -> usize {
        if self.state == State::Closed {
            return 0;
        }
        self.send.write(data)
    }

    /// Sets the application priority (seed 004 §III.F: 1 highest … 6) of the bytes written
    /// from now on with [`write`](Self::write); `None` leaves it to the scheduler's own
    /// (`qoe:priority=N`). Schedulers that do not use priorities ignore it.
    pub fn set_priority(&mut self, priority: Option<Priority>) {
        self.priority.set_default(priority, self.send.end());
    }

    /// Writes stream bytes with their own application priority (the connection's stays for
    /// later writes); returns how many fit the send buffer.
    pub fn write_with_priority(&mut self, data: &[u8], priority: Priority) -> usize {
        if self.state == State::Closed {
            return 0;
        }
        let start = self.send.end();
        let n = self.send.write(data);
        self.priority.mark(start, start + n as u64, Some(priority));
        n
    }

    /// Ends the stream after what was written (DATA_FIN).
    pub fn finish(&mut self) {
        self.send.fin = true;
    }

    /// Reads in-order stream bytes.
    pub fn read(&mut self, buf: &mut [u8]) -> usize {
        let n = self.recv.read(buf);
        self.after_read(n);
        n
    }

    /// Consumes up to `max` in-order bytes without copying them.
    pub fn discard(&mut self, max: usize) -> usize {
        let n = self.recv.discard(max);
        self.after_read(n);
        n
    }

    /// Whether the peer's stream ended and everything was read.
    pub fn peer_finished(&self) -> bool {
        self.recv.is_finished()
    }

    fn after_read(&mut self, n: usize) {
        if n > 0 {
            self.stats.delivered_bytes += n as u64;
        }
        if self.recv.readable() == 0 {
            // A new `Readable` event fires on the next in-order data.
            self.readable_pending = false;
        }
    }

    /// Closes the connection at once; the peer is told with CLOSE.
    pub fn abort(&mut self, code: u64) {
        if self.state == State::Closed {
            return;
        }
        self.close_frames_pending = Some(code);
        self.enter_closed(CloseReason::Aborted(code));
    }

    // ---- path-manager commands ----

    /// Opens a path from local address `local` to the peer's address `remote` (like creating an
    /// MPTCP subflow). The first path of a client opens the connection.
    pub fn open_path(
        &mut self,
        now: Instant,
        local: AddrId,
        remote: AddrId,
        backup: bool,
    ) -> Result<PathId, Error> {
        if self.state == State::Closed {
            return Err(Error::Closed);
        }
        if self.paths.len() >= self.cfg.max_paths {
            return Err(Error::TooManyPaths);
        }
        let id = PathId(self.next_path_id);
        self.next_path_id = self.next_path_id.wrapping_add(2);
        let mut p = Path::new(id, local, remote, backup, true, now, &self.cfg);
        p.redundant_next = self.send.peer_cum.min(self.send.end());
        self.paths.push(p);
        self.stats.paths_opened += 1;
        Ok(id)
    }

    /// Closes a path; its unacknowledged data is reinjected on the others.
    pub fn close_path(&mut self, id: PathId) -> Result<(), Error> {
        let idx = self.path_index(id).ok_or(Error::UnknownPath)?;
        self.close_path_at(idx, PathCloseReason::Local, true);
        Ok(())
    }

    /// Sets or clears a path's backup flag and tells the peer (PATH_PRIO, like MP_PRIO).
    pub fn set_backup(&mut self, id: PathId, backup: bool) -> Result<(), Error> {
        let idx = self.path_index(id).ok_or(Error::UnknownPath)?;
        if !backup {
            self.paths[idx].reinject_asked = false;
        }
        if self.paths[idx].backup != backup {
            self.paths[idx].backup = backup;
            self.ctrl_queue.push_back(Ctrl::PathPrio(id));
            self.events.push_back(Event::PathPriority {
                path: id,
                backup,
                by_peer: false,
            });
        }
        Ok(())
    }

    /// Sends again over the other paths what is outstanding on path `id` (sent, not yet
    /// acknowledged), and asks the peer to do the same with what it has outstanding there
    /// (PATH_PRIO's reinject bit, on every PATH_PRIO for the path until it is made active
    /// again). A path manager that moves the stream off a fading link (braid_pm's capacity-aware
    /// modes) uses it beside [`set_backup`](Self::set_backup): what was in flight on the link
    /// when it was demoted is not left to its retransmission timer, which a path that gets no
    /// new data only fires after a tail-loss probe or an RTO (200 ms or more). The receiver
    /// keeps whichever copy arrives first.
    pub fn reinject_path(&mut self, id: PathId) -> Result<(), Error> {
        let idx = self.path_index(id).ok_or(Error::UnknownPath)?;
        self.paths[idx].reinject_asked = true;
        self.reinject(idx, false);
        if !self.ctrl_queue.contains(&Ctrl::PathPrio(id)) {
            self.ctrl_queue.push_back(Ctrl::PathPrio(id));
        }
        Ok(())
    }

    /// Sets or clears a path's watch flag and tells the peer (PATH_PRIO's watch bit), so that
    /// both ends apply it: while it is set, what the path has outstanding is sent again over
    /// the other paths as soon as its acknowledgements stop, by a guarded REJ timer
    /// ([`reinject::WATCH`](crate::reinject::WATCH): SRTT + RTTVAR after the earliest
    /// outstanding send, and four of the path's usual intervals between acknowledgements after
    /// the last one), whatever the connection's reinjection policy. The path stays in use; it
    /// gets new data again when it is heard from. A path manager sets it on a link that can
    /// fail without warning while the others have been seen carrying the stream (braid_pm's
    /// capacity-aware modes, on a radio link whose signal is sampled too rarely to announce
    /// every drop): such a drop then costs about one RTT of the path instead of an RTO.
    pub fn set_watch(&mut self, id: PathId, on: bool) -> Result<(), Error> {
        let idx = self.path_index(id).ok_or(Error::UnknownPath)?;
        if self.paths[idx].watch != on {
            self.paths[idx].watch = on;
            self.update_reinject_timer(idx);
            if !self.ctrl_queue.contains(&Ctrl::PathPrio(id)) {
                self.ctrl_queue.push_back(Ctrl::PathPrio(id));
            }
        }
        Ok(())
    }

    /// Sets or clears a path's duplicate flag and tells the peer (PATH_PRIO's duplicate bit), so
    /// that both ends apply it: while it is set, every stream byte the scheduler sends on another
    /// path is sent on this one too (a copy at the same stream offset), and when the scheduler's
    /// paths can take no new data, new data goes on this one first. A copy never delays the
    /// stream: the path sends only with room in its own congestion window (else it skips the
    /// bytes the others carried meanwhile), the send buffer is released on acknowledgement
    /// alone, and the copies are never reinjected (the path that carries the original recovers
    /// it). The receiver keeps whichever copy arrives first. A path manager uses it to keep a
    /// fading link carrying the stream while the stream moves to another (braid_pm's `…-dup`
    /// modes). Under redundant scheduling every path carries everything already and the flag
    /// changes nothing.
    pub fn set_duplicate(&mut self, id: PathId, on: bool) -> Result<(), Error> {
        let idx = self.path_index(id).ok_or(Error::UnknownPath)?;
        if self.paths[idx].duplicate != on {
            self.flag_duplicate(idx, on);
            // A PATH_PRIO already queued carries the path's flags as they are when it is sent.
            if !self.ctrl_queue.contains(&Ctrl::PathPrio(id)) {
                self.ctrl_queue.push_back(Ctrl::PathPrio(id));
            }
        }
        Ok(())
    }

    /// Flags path `idx` duplicate (or not); a flagged path copies what is sent from now on.
    fn flag_duplicate(&mut self, idx: usize, on: bool) {
        let from = self.send.next.max(self.send.peer_cum).min(self.send.end());
        let redundant = self.scheduler.is_redundant();
        let p = &mut self.paths[idx];
        p.duplicate = on;
        if on && !redundant {
            p.redundant_next = from;
            p.carried_from = from;
        }
    }

    /// Announces a local address to the peer (ADD_ADDR).
    pub fn announce_addr(&mut self, id: AddrId, addr: SocketAddr, backup: bool) {
        self.ctrl_queue
            .push_back(Ctrl::AddAddr { id, backup, addr });
    }

    /// The local address `id` is gone now: its paths close and the peer is told (REMOVE_ADDR).
    pub fn remove_local_addr(&mut self, id: AddrId) {
        self.pending_removals.retain(|(a, _)| *a != id);
        while let Some(idx) = self.paths.iter().position(|p| p.local == id) {
            self.close_path_at(idx, PathCloseReason::LocalAddrRemoved, false);
        }
        // The next path id marks which of our paths from `id` the removal covers: a path
        // opened from it later (the address came back) is not touched by this removal, however
        // late it arrives.
        self.ctrl_queue
            .push_back(Ctrl::RemoveAddr(id, PathId(self.next_path_id)));
    }

    /// The link layer lost address `id`: after the configured detection delay
    /// ([`Config::remove_addr_delay`]) it is removed as by [`Connection::remove_local_addr`].
    pub fn local_addr_lost(&mut self, now: Instant, id: AddrId) {
        if self.pending_removals.iter().any(|(a, _)| *a == id) {
            return;
        }
        if self.cfg.remove_addr_delay.is_zero() {
            self.remove_local_addr(id);
        } else {
            self.pending_removals
                .push((id, now + self.cfg.remove_addr_delay));
        }
    }

    /// The address came back before its removal was signalled.
    pub fn local_addr_restored(&mut self, id: AddrId) {
        self.pending_removals.retain(|(a, _)| *a != id);
    }

    /// The runtime heard from the peer by other means (a liveness probe, a re-keyed
    /// session): every path whose retransmission timer has backed off retransmits now instead
    /// of at its backed-off deadline, which after an outage of a few seconds can be seconds
    /// away. The early expiry does not count as a backoff (a path that stays silent is
    /// declared broken no sooner). Only paths silent for two backoffs or more are touched: a
    /// path in ordinary loss recovery keeps its timer.
    pub fn peer_alive(&mut self, now: Instant) {
        self.now = self.now.max(now);
        self.retry_backed_off(now);
    }

    /// Fires the backed-off retransmission timers now (see [`Connection::peer_alive`]).
    fn retry_backed_off(&mut self, now: Instant) {
        for p in &mut self.paths {
            if p.backoff >= 2 && p.timer(PathTimer::Rto).is_some_and(|t| t > now) {
                // `on_rto` counts it again when the timer fires.
                p.backoff -= 1;
                p.set_timer(PathTimer::Rto, Some(now));
                self.stats.peer_alive_retransmits += 1;
            }
        }
    }

    // ---- outputs ----

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When [`Connection::handle_timeout`] must be called next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let paths = self
            .paths
            .iter()
            .filter_map(|p| p.next_timeout().map(|(t, _)| t));
        let removals = self.pending_removals.iter().map(|(_, t)| *t);
        let idle = self
            .cfg
            .idle_timeout
            .filter(|_| self.state != State::Closed)
            .map(|d| self.last_rx + d);
        paths
            .chain(removals)
            .chain(idle)
            .chain(self.redundant_wakeup)
            .chain(self.persist)
            .min()
    }

    /// Processes every timer due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = self.now.max(now);
        if self.redundant_wakeup.is_some_and(|t| t <= now) {
            // Re-evaluated by the next poll_transmit.
            self.redundant_wakeup = None;
        }
        if self.persist.is_some_and(|t| t <= now) {
            self.persist = None;
            self.persist_due = true;
        }
        let due: Vec<_> = self
            .pending_removals
            .iter()
            .filter(|(_, t)| *t <= now)
            .map(|(a, _)| *a)
            .collect();
        for id in due {
            self.remove_local_addr(id);
        }
        if let Some(idle) = self.cfg.idle_timeout
            && self.state != State::Closed
            && now >= self.last_rx + idle
        {
            self.enter_closed(CloseReason::IdleTimeout);
            return;
        }
        let mut i = 0;
        while i < self.paths.len() {
            let mut closed = false;
            while let Some((at, timer)) = self.paths[i].next_timeout() {
                if at > now {
                    break;
                }
                if self.on_path_timer(now, i, timer) {
                    closed = true;
                    break;
                }
            }
            if !closed {
                i += 1;
            }
        }
    }

    /// Whether a path other than `idx` could carry its data.
    fn has_alternative(&self, idx: usize) -> bool {
        self.paths
            .iter()
            .enumerate()
            .any(|(i, p)| i != idx && p.is_established())
    }

    /// Returns `true` if the path was closed (and removed).
    fn on_path_timer(&mut self, now: Instant, idx: usize, timer: PathTimer) -> bool {
        let cfg = self.cfg.clone();
        let p = &mut self.paths[idx];
        p.set_timer(timer, None);
        match timer {
            PathTimer::Ack => p.rx.ack_now = true,
            PathTimer::Pto => {
                p.on_pto(now, &cfg);
                // A speculative reinjection needs somewhere to go.
                if cfg.reinjection.reinject_on(Trigger::Pto) && self.has_alternative(idx) {
                    self.reinject(idx, true);
                    self.mark_pf(idx);
                }
            }
            PathTimer::Rto => {
                let was_pf = p.pf;
                let opening = !p.is_established();
                if p.on_rto(now, &cfg) {
                    self.close_path_at(idx, PathCloseReason::Broken, true);
                    return true;
                }
                if !was_pf && !opening {
                    self.events.push_back(Event::PathPotentiallyFailed {
                        path: self.paths[idx].id,
                    });
                }
                if cfg.reinjection.reinject_on(Trigger::Rto) {
                    self.reinject(idx, false);
                }
                self.update_reinject_timer(idx);
            }
            PathTimer::Reinject => {
                p.stats.reinject_timer_count += 1;
                let on_timer = cfg.reinjection.reinject_on(Trigger::Timer) || self.paths[idx].watch;
                if on_timer && self.has_alternative(idx) {
                    self.reinject(idx, true);
                    self.mark_pf(idx);
                }
                self.update_reinject_timer(idx);
                // A policy whose deadline does not move after an expiry would spin: it waits for
                // the next acknowledgement or send instead.
                if self.paths[idx]
                    .timer(PathTimer::Reinject)
                    .is_some_and(|t| t <= now)
                {
                    self.paths[idx].set_timer(PathTimer::Reinject, None);
                }
            }
        }
        false
    }

    fn mark_pf(&mut self, idx: usize) {
        let p = &mut self.paths[idx];
        if !p.pf && p.is_established() {
            p.pf = true;
            self.events
                .push_back(Event::PathPotentiallyFailed { path: p.id });
        }
    }

    /// Queues the path's unacknowledged data for the other paths (see
    /// [`Path::take_for_reinjection`] for `speculative`).
    fn reinject(&mut self, idx: usize, speculative: bool) {
        let p = &mut self.paths[idx];
        let from = p.id;
        let (data, ctrl) = p.take_for_reinjection(speculative);
        p.stats.reinjected_from += data.len() as u64;
        self.queue_reinjections(data, from);
        self.requeue_ctrl(ctrl, from);
    }

    /// Queues data taken from path `from` for the other paths, unless already acknowledged.
    fn queue_reinjections(&mut self, data: Vec<DataRef>, from: PathId) {
        for d in data {
            if !self.send.range_acked(d.dsn, u64::from(d.len), d.fin) {
                self.reinject_queue.push_back(Reinjection { data: d, from });
            }
        }
    }

    fn requeue_ctrl(&mut self, ctrl: Vec<Ctrl>, gone: PathId) {
        for c in ctrl {
            match c {
                Ctrl::PathPrio(p) if p == gone => {}
                c => self.ctrl_queue.push_back(c),
            }
        }
    }

    /// Recomputes the reinjection policy's timer of a path (on ACKs, sends, expiry). A deadline
    /// already past fires at the next `handle_timeout`, but never twice for the same data: the
    /// expiry marks what it reinjects, which moves the anchor.
    fn update_reinject_timer(&mut self, idx: usize) {
        let p = &mut self.paths[idx];
        let timing = p.timing(&self.cfg);
        let mut deadline = self.cfg.reinjection.deadline(&timing);
        if p.watch
            && let Some(w) = crate::reinject::WATCH.deadline(&timing)
        {
            deadline = Some(deadline.map_or(w, |d| d.min(w)));
        }
        p.set_timer(PathTimer::Reinject, deadline);
    }

    fn close_path_at(&mut self, idx: usize, reason: PathCloseReason, notify_peer: bool) {
        let mut p = self.paths.remove(idx);
        let id = p.id;
        let (data, mut ctrl) = p.take_for_reinjection(false);
        ctrl.extend(p.drain_ctrl());
        // Whatever the policy, data outstanding on a closed path must go elsewhere.
        p.stats.reinjected_from += data.len() as u64;
        self.queue_reinjections(data, id);
        self.requeue_ctrl(ctrl, id);
        if notify_peer && p.is_established() {
            self.ctrl_queue
                .push_back(Ctrl::PathClose(id, reason.wire_code()));
        }
        self.closed_paths.push_back(id);
        if self.closed_paths.len() > CLOSED_PATH_MEMORY {
            self.closed_paths.pop_front();
        }
        self.stats.paths_closed += 1;
        // The last usable path went: a path that backed off during an earlier outage may work
        // again by now and is the only way left, so it retries at once rather than at its
        // backed-off deadline.
        if !self.paths.iter().any(|p| p.is_usable()) {
            let now = self.now;
            self.retry_backed_off(now);
        }
        self.events.push_back(Event::PathClosed {
            path: id,
            reason,
            local: p.local,
            established: p.is_established(),
        });
        if self.tx_round_robin > idx {
            self.tx_round_robin -= 1;
        }
        self.release_send_buffer();
    }

    /// Whether the peer opened the path (client paths have even ids, server paths odd).
    fn opened_by_peer(&self, id: PathId) -> bool {
        let client_opened = id.0 % 2 == 0;
        client_opened == (self.side == Side::Server)
    }

    fn path_index(&self, id: PathId) -> Option<usize> {
        self.paths.iter().position(|p| p.id == id)
    }

    fn enter_closed(&mut self, reason: CloseReason) {
        if self.state == State::Closed {
            return;
        }
        self.state = State::Closed;
        for p in &mut self.paths {
            for t in path::PATH_TIMERS {
                p.set_timer(t, None);
            }
        }
        self.pending_removals.clear();
        self.events.push_back(Event::Closed { reason });
    }

    /// Releases send-buffer bytes acknowledged by the peer and, under redundant scheduling,
    /// sent on every usable path that is not stalled.
    fn release_send_buffer(&mut self) {
        let mut upto = self.send.peer_cum;
        if self.scheduler.is_redundant() {
            for p in self.paths.iter().filter(|p| self.holds_back(p)) {
                upto = upto.min(p.redundant_next);
            }
        }
        self.send.release(upto);
        self.priority.release(self.send.base());
    }

    /// Redundant scheduling: whether this path must send a byte before the stream moves on.
    /// A path stops holding the others back once its acknowledgements are overdue.
    fn holds_back(&self, p: &Path) -> bool {
        p.is_usable() && p.stall_deadline().is_none_or(|t| t > self.now)
    }

    /// Checks whether both streams are finished and acknowledged.
    fn check_finished(&mut self) {
        if self.recv.fin_received() && !self.peer_finished_reported {
            self.peer_finished_reported = true;
            self.events.push_back(Event::PeerFinished);
        }
        if self.state != State::Closed && self.send.fin_acked() && self.recv.fin_received() {
            self.enter_closed(CloseReason::Finished);
        }
    }
}
