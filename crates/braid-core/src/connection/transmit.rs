//! Sending: what the next datagram carries, and on which path.
//!
//! Each call to [`Connection::poll_transmit`] builds at most one datagram, in this order:
//! 1. per-path duties, round-robin over paths: PATH_OPEN, a tail-loss probe, a retransmission
//!    of a lost packet (window permitting), an acknowledgement that cannot wait;
//! 2. stream data: queued reinjections first, then new data, on the path the scheduler picks
//!    (under redundant scheduling, every usable path walks the stream itself); when the peer's
//!    receive window blocks new data, opportunistic retransmission of the blocking segment;
//!    then the copies of paths flagged duplicate (`Connection::set_duplicate`);
//! 3. control frames (ADD_ADDR, REMOVE_ADDR, PATH_PRIO, PATH_CLOSE) on the best usable path;
//! 4. a window update when the receive window opened a lot since last advertised.

use super::path::{PathState, SentPacket, SentState};
use super::*;
use crate::wire::{self, Frame, Header, varint};

/// A datagram ready in the caller's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// The path (subflow) it belongs to.
    pub path: PathId,
    /// Local address (interface) to send from.
    pub local: AddrId,
    /// Peer address to send to.
    pub remote: AddrId,
    /// Bytes written to the buffer.
    pub size: usize,
}

/// Ranges per ACK / DATA_ACK frame in packets that carry data (like TCP's few SACK blocks).
pub(crate) const DATA_PACKET_RANGES: usize = 4;
/// Unacknowledged packets per path searched for the segment blocking the receive window.
const OPPORTUNISTIC_SEARCH: usize = 32;
/// Connection-level ranges in a pure acknowledgement: the lowest holes matter for
/// reinjection decisions; more only cost the sender time.
const PURE_ACK_DATA_RANGES: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SegmentKind {
    New,
    Reinjection,
    Redundant,
    /// A duplicate path's copy of bytes another path carries (never reinjected).
    Copy,
}

/// Window a filler retransmission needs (a header, acknowledgements and a PING).
const FILL_ROOM: u64 = 64;

impl Connection {
    /// Writes the next datagram to send into `buf` (cleared first), or returns `None` when
    /// nothing is to be sent now.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        buf.clear();
        // One allocation up front rather than regrowth while frames are appended (a pooled
        // buffer may come back from carrying a small acknowledgement).
        buf.reserve(self.cfg.max_datagram_size);
        self.now = self.now.max(now);
        if let Some(code) = self.close_frames_pending {
            return self.send_close(now, code, buf);
        }
        if self.state == State::Closed && !self.closed_gracefully() {
            return None;
        }
        let n = self.paths.len();
        for k in 0..n {
            let idx = (self.tx_round_robin + k) % n;
            if let Some(t) = self.path_duties(now, idx, buf) {
                self.tx_round_robin = (idx + 1) % n;
                return Some(t);
            }
        }
        if self.state != State::Closed {
            if let Some(t) = self.send_data(now, buf) {
                return Some(t);
            }
            if let Some(t) = self.send_duplicates(now, buf) {
                return Some(t);
            }
            if let Some(t) = self.send_ctrl(now, buf) {
                return Some(t);
            }
        }
        self.send_window_update(now, buf)
    }

    pub(super) fn closed_gracefully(&self) -> bool {
        self.send.fin_acked() && self.recv.fin_received()
    }

    // ---- per-path duties ----

    fn path_duties(&mut self, now: Instant, idx: usize, buf: &mut Vec<u8>) -> Option<Transmit> {
        let p = &self.paths[idx];
        if p.open_pending {
            return Some(self.send_path_open(now, idx, buf));
        }
        if p.answer_pending {
            return Some(self.send_path_answer(now, idx, buf));
        }
        if p.probe.is_some() {
            self.paths[idx].probe = None;
            if let Some(seq) = self.paths[idx].last_outstanding() {
                return Some(self.retransmit(now, idx, seq, buf));
            }
        }
        let mss = self.cfg.max_datagram_size as u64;
        if let Some(seq) = self.paths[idx].next_lost() {
            // A lost packet whose contents all arrived another way (reinjected and
            // acknowledged) goes again as a bare PING of a few bytes, only to fill its number:
            // it needs no full segment of window. Charged a whole segment each, a path with a
            // collapsed window after an outage sent them one per RTT while the stream waited.
            let room = if self.holds_nothing(idx, seq) {
                FILL_ROOM
            } else {
                mss
            };
            let p = &mut self.paths[idx];
            if p.fast_retransmit || p.has_room(room) {
                p.fast_retransmit = false;
                p.pop_lost(seq);
                return Some(self.retransmit(now, idx, seq, buf));
            }
        }
        if self.paths[idx].rx.ack_now {
            return Some(self.send_pure_ack(now, idx, buf));
        }
        None
    }

    fn header(&self, idx: usize, seq: u64, now: Instant) -> Header {
        Header {
            path: self.paths[idx].id,
            seq,
            timestamp: now.wire_timestamp(),
        }
    }

    fn transmit(&mut self, idx: usize, buf: &[u8]) -> Transmit {
        self.stats.datagrams_sent += 1;
        self.stats.bytes_sent += buf.len() as u64;
        let (local, peer) = self.path_addr_stats(idx);
        local.datagrams_sent += 1;
        peer.datagrams_sent += 1;
        let p = &self.paths[idx];
        Transmit {
            path: p.id,
            local: p.local,
            remote: p.remote,
            size: buf.len(),
        }
    }

    fn send_path_open(&mut self, now: Instant, idx: usize, buf: &mut Vec<u8>) -> Transmit {
        let seq = self.paths[idx].next_seq;
        self.header(idx, seq, now).emit(buf);
        let p = &self.paths[idx];
        Frame::PathOpen {
            local: p.local,
            remote: p.remote,
            backup: p.backup,
        }
        .emit(buf);
        self.write_acks(idx, buf, self.cfg.max_datagram_size, DATA_PACKET_RANGES);
        let p = &mut self.paths[idx];
        p.open_pending = false;
        p.on_sent(
            now,
            SentPacket {
                time: now,
                size: buf.len() as u32,
                data: None,
                ctrl: Vec::new(),
                path_open: true,
                state: SentState::Outstanding,
                retransmitted: false,
                lost_by_ack: false,
                reinjected: false,
                is_reinjection: false,
            },
            &self.cfg,
        );
        self.transmit(idx, buf)
    }

    /// The acceptor's first packet on a new path: the acknowledgement of PATH_OPEN plus a PING
    /// that the opener acknowledges, giving the acceptor its first RTT sample.
    fn send_path_answer(&mut self, now: Instant, idx: usize, buf: &mut Vec<u8>) -> Transmit {
        let seq = self.paths[idx].next_seq;
        self.header(idx, seq, now).emit(buf);
        self.write_acks_forced(idx, buf, self.cfg.max_datagram_size, DATA_PACKET_RANGES);
        Frame::Ping.emit(buf);
        let p = &mut self.paths[idx];
        p.answer_pending = false;
        p.on_sent(
            now,
            SentPacket {
                time: now,
                size: buf.len() as u32,
                data: None,
                ctrl: Vec::new(),
                path_open: false,
                state: SentState::Outstanding,
                retransmitted: false,
                lost_by_ack: false,
                reinjected: false,
                is_reinjection: false,
            },
            &self.cfg,
        );
        self.transmit(idx, buf)
    }

    /// Whether packet `seq` of path `idx` carries nothing the peer still needs (no path
    /// open, no control frame, no unacknowledged stream byte).
    fn holds_nothing(&self, idx: usize, seq: u64) -> bool {
        let p = &self.paths[idx];
        p.packet(seq).is_some_and(|pkt| {
            !(pkt.path_open && p.state == PathState::Opening)
                && pkt.ctrl.is_empty()
                && pkt
                    .data
                    .is_none_or(|d| self.send.range_acked(d.dsn, u64::from(d.len), d.fin))
        })
    }

    /// Sends packet `seq` of path `idx` again, with the same number, on the same path.
    fn retransmit(&mut self, now: Instant, idx: usize, seq: u64, buf: &mut Vec<u8>) -> Transmit {
        self.header(idx, seq, now).emit(buf);
        let (path_open, data, ctrl) = {
            let p = &self.paths[idx];
            let pkt = p.packet(seq).expect("retransmitted packet is tracked");
            (
                pkt.path_open && p.state == PathState::Opening,
                pkt.data,
                pkt.ctrl.clone(),
            )
        };
        let mut eliciting = false;
        if path_open {
            let p = &self.paths[idx];
            Frame::PathOpen {
                local: p.local,
                remote: p.remote,
                backup: p.backup,
            }
            .emit(buf);
            eliciting = true;
        }
        for c in &ctrl {
            self.emit_ctrl(c, buf);
            eliciting = true;
        }
        // The part of the data the peer does not have yet (it may have received some of it
        // through a reinjection, and the acknowledged part may be released already).
        let data = data.and_then(|d| {
            let end = d.dsn + u64::from(d.len);
            if self.send.range_acked(d.dsn, u64::from(d.len), d.fin) {
                return None;
            }
            let start = d.dsn.max(self.send.peer_cum).min(end);
            debug_assert!(self.send.holds(start, end - start));
            Some(path::DataRef {
                dsn: start,
                len: (end - start) as u32,
                fin: d.fin,
            })
        });
        let data_len = data.map_or(0, |d| {
            wire::data_header_len(d.dsn, d.len as usize) + d.len as usize
        });
        let room = self.cfg.max_datagram_size.saturating_sub(data_len);
        self.write_acks(idx, buf, room.max(buf.len()), DATA_PACKET_RANGES);
        if let Some(d) = data {
            wire::emit_data_header(buf, d.dsn, d.len as usize, d.fin);
            self.send.copy_to(d.dsn, d.len as usize, buf);
            eliciting = true;
            self.stats.data_packets_sent += 1;
            let (local, peer) = self.path_addr_stats(idx);
            local.data_bytes_sent += u64::from(d.len);
            peer.data_bytes_sent += u64::from(d.len);
        }
        if !eliciting {
            // The sequence number must still be filled.
            Frame::Ping.emit(buf);
        }
        let size = buf.len() as u32;
        self.paths[idx].on_retransmitted(now, seq, size, &self.cfg);
        self.update_reinject_timer(idx);
        self.transmit(idx, buf)
    }

    fn send_pure_ack(&mut self, now: Instant, idx: usize, buf: &mut Vec<u8>) -> Transmit {
        // Not ack-eliciting: carries the next number without consuming it.
        let seq = self.paths[idx].next_seq;
        self.header(idx, seq, now).emit(buf);
        self.write_acks_forced(idx, buf, self.cfg.max_datagram_size, wire::MAX_ACK_RANGES);
        self.transmit(idx, buf)
    }

    /// Writes the path's ACK and the connection's DATA_ACK if they have news, within `limit`.
    fn write_acks(&mut self, idx: usize, buf: &mut Vec<u8>, limit: usize, max_ranges: usize) {
        if self.paths[idx].rx.wants_ack() {
            self.write_path_ack(idx, buf, limit, max_ranges);
        }
        if self.data_ack_pending || self.window_grew() {
            self.write_data_ack(buf, limit, max_ranges);
        }
    }

    /// Same, but always writes the path ACK (and the DATA_ACK once data was received).
    fn write_acks_forced(
        &mut self,
        idx: usize,
        buf: &mut Vec<u8>,
        limit: usize,
        max_ranges: usize,
    ) {
        self.write_path_ack(idx, buf, limit, max_ranges);
        if self.data_ack_pending || self.window_grew() || self.recv.cum_ack() > 0 {
            self.write_data_ack(buf, limit, max_ranges.min(PURE_ACK_DATA_RANGES));
        }
    }

    fn write_path_ack(&mut self, idx: usize, buf: &mut Vec<u8>, limit: usize, max_ranges: usize) {
        let p = &self.paths[idx];
        let cum = p.rx.cum;
        let fixed = 1 + varint::len(cum) + 4 + 1;
        if buf.len() + fixed > limit {
            return;
        }
        // The highest ranges are the freshest news for the sender's loss detection.
        let mut chosen: Vec<(u64, u64)> = Vec::new();
        let mut size = fixed;
        let all: Vec<(u64, u64)> = p.rx.ranges.iter().rev().take(max_ranges).collect();
        for (i, &(s, e)) in all.iter().enumerate() {
            // Gap measured from the next lower chosen range or cum: bounded by varint 8 bytes.
            let cost = 8 + varint::len(e - s);
            if buf.len() + size + cost > limit {
                break;
            }
            size += cost;
            chosen.push(all[i]);
        }
        chosen.reverse();
        wire::emit_ack(buf, cum, p.rx.ts_echo, chosen.into_iter());
        self.paths[idx].on_ack_sent();
    }

    fn write_data_ack(&mut self, buf: &mut Vec<u8>, limit: usize, max_ranges: usize) {
        let cum = self.recv.cum_ack();
        let window = self.recv.window();
        let fixed = 1 + varint::len(cum) + varint::len(window) + 1;
        if buf.len() + fixed > limit {
            return;
        }
        let mut n = 0;
        let mut size = fixed;
        for (s, e) in self.recv.ooo_ranges().iter().take(max_ranges) {
            let cost = 8 + varint::len(e - s);
            if buf.len() + size + cost > limit {
                break;
            }
            size += cost;
            n += 1;
        }
        wire::emit_data_ack(buf, cum, window, self.recv.ooo_ranges().iter().take(n));
        self.data_ack_pending = false;
        self.advertised_edge = cum + window;
    }

    /// Whether the receive window's right edge moved a lot since last advertised.
    fn window_grew(&self) -> bool {
        let edge = self.recv.cum_ack() + self.recv.window();
        edge >= self.advertised_edge + self.cfg.receive_buffer / 4
    }

    fn send_window_update(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        if self.recv.cum_ack() == 0 || !self.window_grew() {
            return None;
        }
        let idx = self.best_path(None)?;
        Some(self.send_pure_ack(now, idx, buf))
    }

    /// The usable path with the lowest RTT, else any established one.
    fn best_path(&self, avoid: Option<AddrId>) -> Option<usize> {
        let ok = |p: &&Path| Some(p.local) != avoid;
        let pick = |usable: bool| {
            self.paths
                .iter()
                .enumerate()
                .filter(|(_, p)| ok(p) && p.is_established() && (!usable || p.is_usable()))
                .min_by_key(|(_, p)| (p.backup, p.rtt.srtt()))
                .map(|(i, _)| i)
        };
        pick(true).or_else(|| pick(false))
    }

    // ---- control frames ----

    fn emit_ctrl(&self, c: &Ctrl, buf: &mut Vec<u8>) {
        match *c {
            Ctrl::AddAddr { id, backup, addr } => Frame::AddAddr { id, backup, addr }.emit(buf),
            Ctrl::RemoveAddr(id, before) => Frame::RemoveAddr { id, before }.emit(buf),
            Ctrl::PathPrio(path) => {
                let p = self.paths.iter().find(|p| p.id == path);
                Frame::PathPrio {
                    path,
                    backup: p.is_some_and(|p| p.backup),
                    duplicate: p.is_some_and(|p| p.duplicate),
                    reinject: p.is_some_and(|p| p.reinject_asked),
                    watch: p.is_some_and(|p| p.watch),
                }
                .emit(buf)
            }
            Ctrl::PathClose(path, reason) => Frame::PathClose { path, reason }.emit(buf),
        }
    }

    fn ctrl_len(&self, c: &Ctrl) -> usize {
        let mut v = Vec::new();
        self.emit_ctrl(c, &mut v);
        v.len()
    }

    /// Moves queued control frames that fit under `limit` into the packet; returns them.
    fn take_ctrl(&mut self, buf: &mut Vec<u8>, limit: usize) -> Vec<Ctrl> {
        let mut taken = Vec::new();
        while let Some(c) = self.ctrl_queue.front() {
            // A PATH_PRIO for a path that no longer exists has nothing to say.
            if let Ctrl::PathPrio(p) = c
                && self.path_index(*p).is_none()
            {
                self.ctrl_queue.pop_front();
                continue;
            }
            if buf.len() + self.ctrl_len(c) > limit {
                break;
            }
            let c = self.ctrl_queue.pop_front().expect("front exists");
            self.emit_ctrl(&c, buf);
            taken.push(c);
        }
        taken
    }

    fn send_ctrl(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        if self.ctrl_queue.is_empty() {
            return None;
        }
        let avoid = match self.ctrl_queue.front() {
            Some(Ctrl::RemoveAddr(id, _)) => Some(*id),
            _ => None,
        };
        let idx = self.best_path(avoid)?;
        let seq = self.paths[idx].next_seq;
        self.header(idx, seq, now).emit(buf);
        let limit = self.cfg.max_datagram_size;
        let ctrl = self.take_ctrl(buf, limit);
        if ctrl.is_empty() {
            buf.clear();
            return None;
        }
        self.write_acks(idx, buf, limit, DATA_PACKET_RANGES);
        let size = buf.len() as u32;
        let was_idle = !self.paths[idx].has_outstanding();
        self.paths[idx].on_sent(
            now,
            SentPacket {
                time: now,
                size,
                data: None,
                ctrl,
                path_open: false,
                state: SentState::Outstanding,
                retransmitted: false,
                lost_by_ack: false,
                reinjected: false,
                is_reinjection: false,
            },
            &self.cfg,
        );
        if was_idle {
            self.update_reinject_timer(idx);
        }
        Some(self.transmit(idx, buf))
    }

    fn send_close(&mut self, now: Instant, code: u64, buf: &mut Vec<u8>) -> Option<Transmit> {
        // One CLOSE per established path, then nothing more.
        while self.close_cursor < self.paths.len() {
            let idx = self.close_cursor;
            self.close_cursor += 1;
            if !self.paths[idx].is_established() {
                continue;
            }
            let seq = self.paths[idx].next_seq;
            self.header(idx, seq, now).emit(buf);
            Frame::Close { code }.emit(buf);
            return Some(self.transmit(idx, buf));
        }
        self.close_frames_pending = None;
        None
    }

    // ---- stream data ----

    fn fill_views(&mut self) {
        let mss = self.cfg.max_datagram_size as u64;
        self.view_scratch.clear();
        for p in &self.paths {
            self.view_scratch.push(PathView {
                id: p.id,
                srtt: p.rtt.srtt(),
                rttvar: p.rtt.rttvar(),
                min_rtt: p.rtt.min(),
                delivery_rate: p.delivery.rate(),
                cwnd: p.cc.window(),
                probed: p.cc.ssthresh() != u64::MAX,
                in_flight: p.in_flight,
                has_room: p.has_room(mss),
                backup: p.backup,
                usable: p.is_usable(),
                loss_rate: p.loss_rate,
                fast_retransmits: p.stats.fast_retransmits,
                rtos: p.stats.rto_count,
                acks: p.stats.acks,
            });
        }
    }

    /// The path for a segment starting at stream offset `dsn`, never `exclude`, with `queued`
    /// new bytes waiting ([`Context::queued`]).
    fn select(
        &mut self,
        now: Instant,
        exclude: Option<PathId>,
        dsn: u64,
        queued: u64,
    ) -> Option<usize> {
        self.fill_views();
        let cx = Context {
            now,
            paths: &self.view_scratch,
            exclude,
            mss: self.cfg.max_datagram_size as u64,
            priority: self.priority.at(dsn),
            queued,
        };
        let id = self.scheduler.select(&cx)?;
        let idx = self.path_index(id)?;
        // A scheduler must not pick a full or unusable path; enforce it.
        let mss = self.cfg.max_datagram_size as u64;
        let p = &self.paths[idx];
        (p.is_established() && p.has_room(mss) && Some(id) != exclude).then_some(idx)
    }

    fn send_data(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        if let Some(t) = self.send_reinjection(now, buf) {
            return Some(t);
        }
        if let Some(t) = self.copy_stalled_segment(now, buf) {
            return Some(t);
        }
        if self.scheduler.is_redundant() {
            if let Some(t) = self.send_redundant(now, buf) {
                return Some(t);
            }
            if self.send.peer_window_end < self.send.end() {
                return self.persist_probe(now, buf);
            }
            return None;
        }
        let end = self.send.end();
        let window_end = self.send.peer_window_end.min(end);
        // Bytes the peer acknowledged already (a duplicate path ran ahead with them, see
        // `send_duplicates`) need not go again. Never the case without duplicate paths.
        self.send.next = self.send.next.max(self.send.peer_cum.min(end));
        let mut next = self.send.next;
        let fin_only = |s: &SendBuf, next: u64| s.fin && !s.fin_sent && next == end;
        if next < window_end || fin_only(&self.send, next) {
            let idx = self.select(now, None, next, window_end.saturating_sub(next))?;
            // A duplicate path that ran ahead of the others carries the bytes up to its cursor
            // already, as packets it recovers like any: they count as sent.
            let p = &self.paths[idx];
            if p.duplicate && p.redundant_next > next {
                next = p.redundant_next.min(end);
                self.send.next = next;
            }
            if next < window_end || fin_only(&self.send, next) {
                let (t, len) = self.send_segment(
                    now,
                    idx,
                    next,
                    window_end.saturating_sub(next),
                    self.send.fin,
                    SegmentKind::New,
                    buf,
                );
                self.send.next += len;
                let p = &mut self.paths[idx];
                if p.duplicate && p.redundant_next == next {
                    p.redundant_next = next + len;
                }
                return Some(t);
            }
        }
        // Nothing new can go out: the peer's window is exhausted, or everything written was
        // sent and the send buffer is full of unacknowledged data (the application blocks).
        let window_blocked = next < self.send.end();
        let buffer_full = self.send.space() == 0 && !self.send.fin && self.send.peer_cum < next;
        if window_blocked || buffer_full {
            if let Some(t) = self.opportunistic_retransmission(now, buf) {
                return Some(t);
            }
        }
        if window_blocked {
            return self.persist_probe(now, buf);
        }
        self.persist = None;
        self.persist_due = false;
        None
    }

    /// The peer's window is closed: if nothing is in flight to bring a window update back,
    /// probe after an RTO (the probe is tracked, so its loss is recovered like any packet's).
    fn persist_probe(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        if self.paths.iter().any(|p| p.has_outstanding()) {
            self.persist = None;
            self.persist_due = false;
            return None;
        }
        let Some(idx) = self.best_path(None) else {
            self.persist = None;
            return None;
        };
        if !self.persist_due {
            if self.persist.is_none() {
                self.persist = Some(now + self.paths[idx].rto(&self.cfg));
            }
            return None;
        }
        self.persist_due = false;
        let seq = self.paths[idx].next_seq;
        self.header(idx, seq, now).emit(buf);
        self.write_acks(idx, buf, self.cfg.max_datagram_size, DATA_PACKET_RANGES);
        Frame::Ping.emit(buf);
        let size = buf.len() as u32;
        self.paths[idx].on_sent(
            now,
            SentPacket {
                time: now,
                size,
                data: None,
                ctrl: Vec::new(),
                path_open: false,
                state: SentState::Outstanding,
                retransmitted: false,
                lost_by_ack: false,
                reinjected: false,
                is_reinjection: false,
            },
            &self.cfg,
        );
        Some(self.transmit(idx, buf))
    }

    /// Sends the first queued reinjection that some path other than its source can take now.
    /// Entries whose only possible path is the one they came from wait (that path's own
    /// retransmissions cover them) without holding up the entries behind them.
    fn send_reinjection(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        let mut i = 0;
        while i < self.reinject_queue.len() {
            let r = self.reinject_queue[i];
            let d = r.data;
            let end = d.dsn + u64::from(d.len);
            let fin_pending = d.fin && !self.send.is_acked(end);
            // Everything the peer has not acknowledged is still held, even when the start of
            // the range was released already.
            let range = self.send.first_unacked(d.dsn, u64::from(d.len), u64::MAX);
            let (dsn, len) = match range {
                Some(r) => r,
                None if fin_pending => (end, 0),
                None => {
                    self.reinject_queue.remove(i);
                    continue;
                }
            };
            let redundant = self.scheduler.is_redundant();
            if self.paths.iter().any(|p| {
                (redundant || p.duplicate)
                    && p.id != r.from
                    && p.is_usable()
                    && p.carried_from <= dsn
                    && p.redundant_next >= end
            }) {
                // Another path already carried these bytes (it recovers them if they are lost).
                self.reinject_queue.remove(i);
                continue;
            }
            let Some(idx) = self.select(now, Some(r.from), dsn, 0) else {
                if self.paths.iter().any(|p| p.id != r.from && p.is_usable()) {
                    // Another path exists but has no room: wait for it, in order.
                    return None;
                }
                i += 1;
                continue;
            };
            let (t, sent) =
                self.send_segment(now, idx, dsn, len, d.fin, SegmentKind::Reinjection, buf);
            let sent_end = dsn + sent;
            let entry = &mut self.reinject_queue[i];
            if sent_end >= end {
                self.reinject_queue.remove(i);
            } else {
                entry.data.len = (end - sent_end) as u32;
                entry.data.dsn = sent_end;
            }
            return Some(t);
        }
        None
    }

    /// Redundant scheduling (seed 001): every segment on every usable path. Each path walks the
    /// stream with its own cursor; a path behind the others sends its backlog, and a new segment
    /// enters the stream only once every usable path that is not stalled has sent everything
    /// before it, so the stream moves at the pace of the slowest responsive path. A path that
    /// was stalled or suspected dead skips what was released meanwhile.
    fn send_redundant(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        let mss = self.cfg.max_datagram_size as u64;
        let n = self.paths.len();
        let base = self.send.base();
        let window_end = self.send.peer_window_end.min(self.send.end());
        let end = self.send.end();
        let fin = self.send.fin;
        self.redundant_head = self.redundant_head.max(base);
        let head = self.redundant_head;
        // A path that does not hold the stream back (its acknowledgements overdue, or not
        // usable) is excused what the others send meanwhile, all but its last window: back
        // from the stall it copies at most one window of their backlog, the part most likely
        // still in flight, and the stream, which waits for it, moves on after that. Copying
        // the whole backlog held the stream for as long as that took at its rate: a 200
        // Mbit/s path ran 2.6 MB ahead while a lossy 10 Mbit/s one was stalled, and the
        // stream stood still for 7.4 s (`braid-sim/tests/redundant.rs`). The bytes skipped
        // are not the path's to recover (`carried_from`): if the path that carried them goes,
        // they are reinjected.
        for i in 0..n {
            if !self.holds_back(&self.paths[i]) {
                let p = &mut self.paths[i];
                let from = head.saturating_sub(p.cc.window());
                if from > p.redundant_next {
                    p.redundant_next = from;
                    p.carried_from = from;
                }
            }
        }
        for k in 0..n {
            let idx = (self.tx_round_robin + k) % n;
            let p = &mut self.paths[idx];
            if !p.is_usable() || !p.has_room(mss) {
                continue;
            }
            let start = p.redundant_next.max(base).min(end + 1);
            p.redundant_next = start;
            let (limit, new) = if start < head {
                // Backlog: what other paths already sent.
                (head.min(window_end), false)
            } else {
                // New data: wait for the paths that still owe bytes before the head.
                let mut wake: Option<Instant> = None;
                let blocked = self.paths.iter().enumerate().any(|(j, q)| {
                    let owes = j != idx && self.holds_back(q) && q.redundant_next.max(base) < head;
                    if owes && let Some(t) = q.stall_deadline() {
                        wake = Some(wake.map_or(t, |w| w.min(t)));
                    }
                    owes
                });
                if blocked {
                    if let Some(t) = wake {
                        self.redundant_wakeup = Some(self.redundant_wakeup.map_or(t, |w| w.min(t)));
                    }
                    continue;
                }
                (window_end, true)
            };
            // Bytes the peer acknowledged through another path while this one was stalled need
            // not be sent; a responsive path sends everything (it paces the stream).
            let mut start = start;
            if !self.holds_back(&self.paths[idx]) {
                start = start.max(self.send.peer_cum.min(end));
            }
            let fin_only = new && fin && start == end;
            if start < limit || fin_only {
                let (t, len) = self.send_segment(
                    now,
                    idx,
                    start,
                    limit.saturating_sub(start),
                    fin,
                    SegmentKind::Redundant,
                    buf,
                );
                let sent_fin = fin && start + len == end;
                let p = &mut self.paths[idx];
                p.redundant_next = start + len + u64::from(sent_fin);
                self.redundant_head = self.redundant_head.max(p.redundant_next);
                self.tx_round_robin = (idx + 1) % n;
                self.release_send_buffer();
                return Some(t);
            }
        }
        None
    }

    /// Paths flagged duplicate ([`Connection::set_duplicate`]) walk the stream with their own
    /// cursor (`redundant_next`), as every path does under redundant scheduling: each sends the
    /// bytes the scheduler's paths sent since it last had room (copies, never reinjected: the
    /// path that carries the original recovers it), and new bytes when those paths can take
    /// none (ordinary packets, recovered like any; the scheduler's path skips them when it picks
    /// this path, and sends them again otherwise). Unlike redundant scheduling nothing waits
    /// for them: the scheduler's new data goes first, the send buffer is released on
    /// acknowledgement alone, a path without window room sends nothing, and bytes acknowledged
    /// meanwhile are skipped.
    fn send_duplicates(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        if self.scheduler.is_redundant() || !self.paths.iter().any(|p| p.duplicate) {
            return None;
        }
        let mss = self.cfg.max_datagram_size as u64;
        let end = self.send.end();
        let window_end = self.send.peer_window_end.min(end);
        let acked = self.send.peer_cum.min(end);
        let sent = self.send.next;
        for idx in 0..self.paths.len() {
            let p = &mut self.paths[idx];
            if !p.duplicate || !p.is_usable() || !p.has_room(mss) {
                continue;
            }
            let start = p.redundant_next.max(acked);
            p.redundant_next = start;
            if start >= window_end {
                continue;
            }
            let (limit, kind) = if start < sent {
                (sent, SegmentKind::Copy)
            } else {
                (window_end, SegmentKind::Redundant)
            };
            let (t, len) =
                self.send_segment(now, idx, start, limit - start, self.send.fin, kind, buf);
            self.paths[idx].redundant_next = start + len;
            self.redundant_head = self.redundant_head.max(start + len);
            self.stats.duplicated_packets += 1;
            self.stats.duplicated_bytes += len;
            return Some(t);
        }
        None
    }

    /// Stock MPTCP's receive-buffer optimisation (seed 002 §II): when no new data can go out
    /// (the peer's window or the send buffer is exhausted), send the segment at the left edge of
    /// the window again on another path, and halve the window of the path that holds it.
    fn opportunistic_retransmission(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
    ) -> Option<Transmit> {
        if !self.cfg.opportunistic_retransmission || !self.scheduler.opportunistic_retransmission()
        {
            return None;
        }
        let blocking = self.send.peer_cum;
        if self.opportunistic_done == Some(blocking) {
            return None;
        }
        // The blocking byte is the oldest unacknowledged one: its packet is among the first
        // unacknowledged ones of its path.
        let (holder, data, _) = self.blocking_packet(blocking, OPPORTUNISTIC_SEARCH)?;
        // The copy goes on the path the scheduler would use now (a backup path stays idle
        // while a primary works), and only if that is not the path holding the segment.
        let idx = self.select(now, None, blocking, 0)?;
        if idx == holder {
            return None;
        }
        let t = self.send_blocking_copy(now, idx, blocking, data, buf)?;
        if self.paths[holder].rtt.srtt() > self.paths[idx].rtt.srtt() {
            self.paths[holder].cc.penalize(now);
        }
        Some(t)
    }

    /// The stream waits on one segment while another path delivers data beyond it: once the
    /// segment is late on its path (out for longer than that path's smoothed RTT or twice its
    /// minimum RTT, whichever is less, and than two RTTs of the path that would carry the copy)
    /// and the stream has not moved for those two RTTs, one copy goes on the earliest other
    /// path with room, once per blocking unit
    /// ([`ReinjectPolicy::copies_stalled_segment`](crate::reinject::ReinjectPolicy::copies_stalled_segment)).
    fn copy_stalled_segment(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        if !self.cfg.reinjection.copies_stalled_segment()
            || self.scheduler.is_redundant()
            || self.send.peer_sacked.is_empty()
        {
            return None;
        }
        let blocking = self.send.peer_cum;
        if self.opportunistic_done == Some(blocking) {
            return None;
        }
        // Cheap test first: this runs whenever the peer holds data beyond a hole.
        let stalled = now.saturating_since(self.data_ack_at);
        let quickest = self.paths.iter().map(|p| p.rtt.srtt()).min()?;
        if stalled < quickest * 2 {
            return None;
        }
        // Not only among a path's first packets: a path in a fade holds a queue of packets
        // already resent elsewhere ahead of the one the stream waits on.
        let (holder, data, sent) = self.blocking_packet(blocking, usize::MAX)?;
        let from = self.paths[holder].id;
        let idx = self.select(now, Some(from), blocking, 0)?;
        let other = self.paths[idx].rtt.srtt() * 2;
        // A path in a fade has a smoothed RTT of seconds, grown with the queue its packets
        // wait behind: the segment is late there once it is older than two base RTTs.
        let h = &self.paths[holder].rtt;
        let late = h.srtt().min(h.min() * 2).max(other);
        if now.saturating_since(sent) < late || stalled < other {
            return None;
        }
        self.send_blocking_copy(now, idx, blocking, data, buf)
    }

    /// The path (index), data and last send time of the packet that carries stream unit
    /// `blocking`, among the first `search` unacknowledged packets of each path.
    fn blocking_packet(
        &self,
        blocking: u64,
        search: usize,
    ) -> Option<(usize, path::DataRef, Instant)> {
        self.paths.iter().enumerate().find_map(|(i, p)| {
            p.unacked().take(search).find_map(|(_, pkt)| {
                pkt.data
                    .filter(|d| d.dsn <= blocking && blocking < d.dsn + u64::from(d.len))
                    .map(|d| (i, d, pkt.time))
            })
        })
    }

    /// Sends what of `data` is still unacknowledged on path `idx` as a reinjection: the one
    /// copy made for the stall at `blocking`.
    fn send_blocking_copy(
        &mut self,
        now: Instant,
        idx: usize,
        blocking: u64,
        data: path::DataRef,
        buf: &mut Vec<u8>,
    ) -> Option<Transmit> {
        let (dsn, len) = self
            .send
            .first_unacked(data.dsn, u64::from(data.len), u64::MAX)?;
        let (t, _) = self.send_segment(now, idx, dsn, len, data.fin, SegmentKind::Reinjection, buf);
        self.opportunistic_done = Some(blocking);
        self.stats.opportunistic_retransmissions += 1;
        Some(t)
    }

    /// Sends stream bytes from `dsn`, at most `max_len` of them and as many as fit, with the FIN
    /// if `fin` and they reach the end of the stream. Returns the transmit and the bytes sent.
    #[allow(clippy::too_many_arguments)]
    fn send_segment(
        &mut self,
        now: Instant,
        idx: usize,
        dsn: u64,
        max_len: u64,
        fin: bool,
        kind: SegmentKind,
        buf: &mut Vec<u8>,
    ) -> (Transmit, u64) {
        let limit = self.cfg.max_datagram_size;
        let seq = self.paths[idx].next_seq;
        self.header(idx, seq, now).emit(buf);
        // Piggyback control frames when they leave room for a useful payload.
        let ctrl = if self.ctrl_queue.is_empty() {
            Vec::new()
        } else {
            self.take_ctrl(buf, limit / 4)
        };
        self.write_acks(idx, buf, limit, DATA_PACKET_RANGES);
        let room = limit.saturating_sub(buf.len() + wire::data_header_len(dsn, limit));
        let len = max_len.min(room as u64);
        let end = self.send.end();
        let fin = fin && dsn + len == end;
        wire::emit_data_header(buf, dsn, len as usize, fin);
        self.send.copy_to(dsn, len as usize, buf);
        if fin {
            self.send.fin_sent = true;
        }
        self.stats.data_packets_sent += 1;
        let (local, peer) = self.path_addr_stats(idx);
        local.data_bytes_sent += len;
        peer.data_bytes_sent += len;
        if kind == SegmentKind::Reinjection {
            self.stats.reinjected_packets += 1;
            self.stats.reinjected_bytes += len;
            self.paths[idx].stats.reinjected_to += 1;
        }
        let was_idle = !self.paths[idx].has_outstanding();
        let size = buf.len() as u32;
        self.paths[idx].on_sent(
            now,
            SentPacket {
                time: now,
                size,
                data: Some(path::DataRef {
                    dsn,
                    len: len as u32,
                    fin,
                }),
                ctrl,
                path_open: false,
                state: SentState::Outstanding,
                retransmitted: false,
                lost_by_ack: false,
                reinjected: kind == SegmentKind::Copy,
                is_reinjection: kind == SegmentKind::Reinjection,
            },
            &self.cfg,
        );
        if was_idle {
            self.update_reinject_timer(idx);
        }
        (self.transmit(idx, buf), len)
    }
}
