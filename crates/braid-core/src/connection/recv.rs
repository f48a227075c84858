//! Receiving: datagram validation and frame processing.

use super::path::{Path, PathTimer};
use super::*;
use crate::stats::DropReason;
use crate::wire::{self, Frame};

/// Frames of a datagram kept on the stack while it is validated.
const INLINE_FRAMES: usize = 8;

impl Connection {
    /// Processes one received datagram. A bad datagram is dropped whole, counted by reason in
    /// [`ConnectionStats::dropped`], and its reason returned; it never panics and never changes
    /// the connection's state.
    pub fn handle_datagram(&mut self, now: Instant, datagram: &[u8]) -> Result<(), DropReason> {
        let r = self.process_datagram(now, datagram);
        if let Err(reason) = r {
            self.stats.dropped.count(reason);
        }
        r
    }

    fn process_datagram(&mut self, now: Instant, datagram: &[u8]) -> Result<(), DropReason> {
        self.now = self.now.max(now);
        self.stats.datagrams_received += 1;
        self.stats.bytes_received += datagram.len() as u64;
        let (header, frames) = wire::parse_header(datagram).map_err(DropReason::Malformed)?;
        // Validate every frame before acting on any; most packets have a handful of frames,
        // kept on the stack.
        let mut parsed: [Option<Frame<'_>>; INLINE_FRAMES] = Default::default();
        let mut spill: Vec<Frame<'_>> = Vec::new();
        let mut ack_eliciting = false;
        let mut open = None;
        let mut too_many_pieces = false;
        for (count, f) in frames.enumerate() {
            let f = f.map_err(DropReason::Malformed)?;
            ack_eliciting |= f.is_ack_eliciting();
            if let Frame::Data { dsn, payload, .. } = f {
                too_many_pieces |= !self.recv.admits(dsn, payload.len() as u64);
            }
            if let Frame::PathOpen {
                local,
                remote,
                backup,
            } = f
            {
                open = Some((local, remote, backup));
            }
            if count < INLINE_FRAMES {
                parsed[count] = Some(f);
            } else {
                spill.push(f);
            }
        }
        // After a graceful close, keep acknowledging on known paths so that the peer can
        // finish too; after an abort, drop everything.
        if self.state == State::Closed
            && (!self.closed_gracefully() || self.path_index(header.path).is_none())
        {
            return Err(DropReason::Closed);
        }
        if too_many_pieces {
            return Err(DropReason::TooManyHoles);
        }
        let idx = match self.path_index(header.path) {
            Some(i) => {
                self.paths[i].rx.admits(header.seq)?;
                i
            }
            None => {
                // A new path's numbers start at 0.
                if header.seq > MAX_RX_AHEAD {
                    return Err(DropReason::Protocol);
                }
                self.accept_path(now, header.path, open)?
            }
        };
        self.last_rx = now;
        let (local, peer) = self.path_addr_stats(idx);
        local.datagrams_received += 1;
        peer.datagrams_received += 1;
        self.paths[idx].on_packet_received(
            now,
            header.seq,
            header.timestamp,
            datagram.len(),
            ack_eliciting,
            &self.cfg,
        );
        if open.is_some() {
            // Acknowledge PATH_OPEN at once: it gives the opener its first RTT sample.
            self.paths[idx].rx.ack_now = true;
        }
        let mut to_close = Vec::new();
        for f in parsed.into_iter().flatten().chain(spill) {
            self.process_frame(now, idx, f, ack_eliciting, &mut to_close);
        }
        for (id, reason) in to_close {
            if let Some(i) = self.path_index(id) {
                self.close_path_at(i, reason, false);
            }
        }
        self.check_finished();
        Ok(())
    }

    /// A packet on a path we do not know: accept it if it opens one.
    fn accept_path(
        &mut self,
        now: Instant,
        id: PathId,
        open: Option<(AddrId, AddrId, bool)>,
    ) -> Result<usize, DropReason> {
        if self.closed_paths.contains(&id) {
            return Err(DropReason::ClosedPath);
        }
        let Some((peer_local, peer_remote, backup)) = open else {
            return Err(DropReason::UnknownPath);
        };
        // The peer may only open ids of its own parity.
        let peer_parity = match self.side {
            Side::Client => 1,
            Side::Server => 0,
        };
        if id.0 % 2 != peer_parity {
            return Err(DropReason::Protocol);
        }
        if self.state == State::Closed {
            return Err(DropReason::Closed);
        }
        if self.paths.len() >= self.cfg.max_paths {
            return Err(DropReason::TooManyPaths);
        }
        let mut p = Path::new(id, peer_remote, peer_local, backup, false, now, &self.cfg);
        p.redundant_next = self.send.peer_cum.min(self.send.end());
        self.paths.push(p);
        self.stats.paths_opened += 1;
        self.events.push_back(Event::PathEstablished {
            path: id,
            local: peer_remote,
            remote: peer_local,
            backup,
        });
        if self.state == State::Handshake {
            self.state = State::Established;
            self.events.push_back(Event::Connected);
        }
        Ok(self.paths.len() - 1)
    }

    fn process_frame(
        &mut self,
        now: Instant,
        idx: usize,
        frame: Frame<'_>,
        ack_eliciting: bool,
        to_close: &mut Vec<(PathId, PathCloseReason)>,
    ) {
        match frame {
            Frame::Padding(_) | Frame::Ping | Frame::PathOpen { .. } => {}
            Frame::Ack {
                cum,
                ts_echo,
                ranges,
            } => {
                // A frame with as many ranges as the peer puts in such a packet (fewer in one
                // that carries data) may have left lower ones out.
                let limit = if ack_eliciting {
                    super::transmit::DATA_PACKET_RANGES
                } else {
                    crate::wire::MAX_ACK_RANGES
                };
                let unreported_below = if ranges.len() >= limit {
                    ranges.iter().next().map(|(s, _)| s)
                } else {
                    None
                };
                self.on_ack_frame(now, idx, cum, ts_echo, ranges.iter(), unreported_below)
            }
            Frame::DataAck {
                cum,
                window,
                ranges,
            } => {
                // Only what was sent can be acknowledged (the FIN counts as one unit).
                let sent_end = self.stream_sent() + u64::from(self.send.fin_sent);
                let before = self.send.peer_cum;
                if !self.send.on_data_ack(cum, window, ranges.iter(), sent_end) {
                    self.stats.dropped.protocol += 1;
                    return;
                }
                if self.send.peer_cum > before {
                    self.data_ack_at = now;
                }
                self.release_send_buffer();
            }
            Frame::Data { dsn, fin, payload } => {
                self.paths[idx].stats.data_bytes_received += payload.len() as u64;
                let (local, peer) = self.path_addr_stats(idx);
                local.data_bytes_received += payload.len() as u64;
                peer.data_bytes_received += payload.len() as u64;
                match self.recv.insert(dsn, payload, fin) {
                    Ok(r) => {
                        self.stats.data_bytes_received += r.new;
                        self.stats.duplicate_bytes_received += r.duplicate;
                        self.stats.beyond_window_bytes += r.beyond_window;
                        self.stats.ofo_peak_bytes =
                            self.stats.ofo_peak_bytes.max(self.recv.ooo_bytes());
                        self.data_ack_pending = true;
                        if self.recv.readable() > 0 && !self.readable_pending {
                            self.readable_pending = true;
                            self.events.push_back(Event::Readable);
                        }
                    }
                    Err(()) => self.stats.dropped.protocol += 1,
                }
            }
            Frame::AddAddr { id, backup, addr } => {
                match self.peer_addrs.iter_mut().find(|(a, _, _)| *a == id) {
                    Some(e) if e.1 == addr && e.2 == backup => return,
                    Some(e) => *e = (id, addr, backup),
                    None => self.peer_addrs.push((id, addr, backup)),
                }
                self.events
                    .push_back(Event::PeerAddrAnnounced { id, addr, backup });
            }
            Frame::RemoveAddr { id, before } => {
                // Paths the peer opened from `id` after it lost the address (ids from `before`
                // on) are not covered: the address came back, and this removal was queued or
                // delayed while it was gone. Every other path on the address is dead.
                let newer = |p: &Path| self.opened_by_peer(p.id) && p.id.0 >= before.0;
                let back = self.paths.iter().any(|p| p.remote == id && newer(p));
                let mut any = false;
                for p in self.paths.iter().filter(|p| p.remote == id && !newer(p)) {
                    any = true;
                    if !to_close.iter().any(|(c, _)| *c == p.id) {
                        to_close.push((p.id, PathCloseReason::PeerAddrRemoved));
                    }
                }
                if back {
                    self.stats.stale_removals += 1;
                    return;
                }
                let known = self.peer_addrs.iter().any(|(a, _, _)| *a == id);
                self.peer_addrs.retain(|(a, _, _)| *a != id);
                if known || any {
                    self.events.push_back(Event::PeerAddrRemoved { id });
                }
            }
            Frame::PathPrio {
                path,
                backup,
                duplicate,
                reinject,
                watch,
            } => {
                if let Some(i) = self.path_index(path) {
                    if self.paths[i].watch != watch {
                        self.paths[i].watch = watch;
                        self.update_reinject_timer(i);
                    }
                    if reinject {
                        self.stats.reinject_requests_received += 1;
                        self.reinject(i, false);
                    }
                    if self.paths[i].backup != backup {
                        self.paths[i].backup = backup;
                        self.events.push_back(Event::PathPriority {
                            path,
                            backup,
                            by_peer: true,
                        });
                    }
                    if self.paths[i].duplicate != duplicate {
                        self.flag_duplicate(i, duplicate);
                    }
                }
            }
            Frame::PathClose { path, .. } => {
                if self.path_index(path).is_some() && !to_close.iter().any(|(c, _)| *c == path) {
                    to_close.push((path, PathCloseReason::Peer));
                }
            }
            Frame::Close { code } => {
                self.close_frames_pending = None;
                self.enter_closed(CloseReason::ByPeer(code));
            }
        }
    }

    fn on_ack_frame(
        &mut self,
        now: Instant,
        idx: usize,
        cum: u64,
        ts_echo: u32,
        ranges: impl Iterator<Item = (u64, u64)>,
        unreported_below: Option<u64>,
    ) {
        if cum > self.paths[idx].next_seq {
            self.stats.dropped.protocol += 1;
            return;
        }
        // Coupled congestion control reads the other paths through a snapshot.
        self.coupling_scratch.clear();
        if self.paths[idx].cc.is_coupled() {
            for (i, p) in self.paths.iter().enumerate() {
                if p.is_usable() || i == idx {
                    self.coupling_scratch.push(PathCc {
                        cwnd: p.cc.window(),
                        srtt: p.rtt.srtt(),
                        inter_loss_bytes: p.cc.inter_loss_bytes(),
                        is_self: i == idx,
                    });
                }
            }
        }
        let echo = now.from_wire_echo(ts_echo);
        let p = &mut self.paths[idx];
        let was_pf = p.pf;
        if let Some(lowest) = unreported_below {
            p.ack_truncated_at(lowest);
        }
        let out = p.on_ack(now, cum, echo, ranges, &self.cfg, &self.coupling_scratch);
        if was_pf && !p.pf {
            self.events.push_back(Event::PathRecovered { path: p.id });
        }
        if out.open_acked && !p.is_established() {
            self.on_path_established(idx);
        }
        if !out.lost_again.is_empty() {
            if self.idle_path_besides(idx) {
                let p = &mut self.paths[idx];
                let data = p.take_for_copy(&out.lost_again);
                p.stats.reinjected_from += data.len() as u64;
                let from = p.id;
                self.queue_reinjections(data, from);
            } else if self.cfg.linux_recovery {
                self.paths[idx].requeue_lost(&out.lost_again);
            }
        }
        // Seed 002 §III: the reinjection timer restarts on every ACK, duplicates included.
        self.update_reinject_timer(idx);
    }

    /// Whether a path other than `idx` can take a retransmission lost again on `idx`: room in
    /// its window and no standing queue (its smoothed RTT at most twice its minimum), and not a
    /// backup unless `idx` is the connection's only active path (a backup takes the stream's
    /// data only when no active path can, and here the one active path lost the same packet
    /// twice; as the Linux scheduler sends its retransmissions on a backup subflow when the
    /// active ones make no progress). It delivers the bytes in about its round trip, where
    /// `idx` would wait for its RTO. A path with a backlog gets no copy (it would queue behind
    /// it, and on a slow path a copy there delays the stream further); `idx`'s own RTO then
    /// recovers them as before.
    fn idle_path_besides(&self, idx: usize) -> bool {
        let mss = self.cfg.max_datagram_size as u64;
        let from = self.paths[idx].id;
        let lone = !self
            .paths
            .iter()
            .any(|p| p.id != from && p.is_usable() && !p.backup);
        self.paths.iter().any(|p| {
            p.id != from
                && p.is_usable()
                && (!p.backup || lone)
                && p.has_room(mss)
                && p.rtt.srtt() <= p.rtt.min() * 2
        })
    }

    fn on_path_established(&mut self, idx: usize) {
        let p: &mut Path = &mut self.paths[idx];
        p.state = path::PathState::Established;
        p.open_pending = false;
        p.set_timer(PathTimer::Reinject, None);
        p.redundant_next = p
            .redundant_next
            .max(self.send.peer_cum.min(self.send.end()));
        self.events.push_back(Event::PathEstablished {
            path: p.id,
            local: p.local,
            remote: p.remote,
            backup: p.backup,
        });
        if self.state == State::Handshake {
            self.state = State::Established;
            self.events.push_back(Event::Connected);
        }
    }
}
