//! The per-packet carrier of a tunnel connection (`transport = "datagram"` and the classes that
//! pick it): each IP packet alone in one datagram on one path, chosen by braid-hya's
//! proportional scheduler among the connection's usable paths; at the far end braid-hya's
//! reorder buffer, never a retransmission. It rides on the connection: the braid core's paths
//! (opened by the path manager, closed when a link goes) are the links, their ids name them on
//! the wire, their RTTs bound the stall time, and the same session seals every datagram.
//!
//! ```text
//!  push(packet) ─► Sender.send (path, seq) ─► queue [header ‖ packet] ─► poll_transmit
//!  handle(datagram) ─► parse ─► path known? ─► Receiver.on_data ─► reorder ─► pop ─► TUN
//!                                  feedback ◄─ Receiver.poll_feedback (every path, ≤ 1/interval)
//! ```

use std::collections::VecDeque;

use braid_core::{AddrId, Connection, Instant, PathId, Side};
use braid_hya::wire::{self, DATA_HEADER_LEN, Datagram};
use braid_hya::{DropReason, Link, Receiver, ReceiverConfig, Sender, SenderConfig};
use serde_json::{Value, json};

/// Bytes queued at most between two flushes; beyond, packets are dropped (`queue_full`).
const QUEUE_BYTES: usize = 4 << 20;

/// The carrier's settings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PerPacketConfig {
    /// The sending end.
    pub sender: SenderConfig,
    /// The receiving end.
    pub receiver: ReceiverConfig,
}

/// Why a packet did not go per packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushError {
    /// It does not fit one datagram: the caller sends it on the stream.
    TooBig,
}

/// Counters of what the carrier itself dropped or diverted.
#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    /// Packets over one datagram, sent on the stream instead.
    oversize: u64,
    /// Packets dropped with no usable path.
    no_path: u64,
    /// Packets dropped on a full queue.
    queue_full: u64,
    /// Feedback datagrams sent.
    feedback_sent: u64,
}

/// One connection's per-packet carrier, both directions.
#[derive(Debug)]
pub struct PerPacket {
    tx: Sender,
    rx: Receiver<Vec<u8>>,
    side: Side,
    /// Largest payload of one datagram (the core's datagram size).
    max_datagram: usize,
    /// Datagrams to send: (path, local address, range in `buf`).
    queue: VecDeque<(PathId, AddrId, std::ops::Range<usize>)>,
    buf: Vec<u8>,
    /// Packet buffers released to the TUN device, for the next ones received.
    pool: Vec<Vec<u8>>,
    /// Pure TCP acknowledgements received, passed on at once: they need no order, and the
    /// reorder buffer's wait would stretch the flow's ACK clock (an empty placeholder keeps
    /// their number in the buffer, so the packets behind them do not wait for a hole).
    immediate: VecDeque<Vec<u8>>,
    /// Scratch: the usable paths as links, with their local addresses.
    links: Vec<Link>,
    locals: Vec<(PathId, AddrId)>,
    fb: Vec<u8>,
    counts: Counts,
}

impl PerPacket {
    /// The carrier of a connection on `side` whose datagrams carry at most `max_datagram`
    /// bytes.
    pub fn new(cfg: &PerPacketConfig, side: Side, max_datagram: usize) -> PerPacket {
        PerPacket {
            tx: Sender::new(cfg.sender.clone()),
            rx: Receiver::new(cfg.receiver),
            side,
            max_datagram,
            queue: VecDeque::new(),
            buf: Vec::new(),
            pool: Vec::new(),
            immediate: VecDeque::new(),
            links: Vec::new(),
            locals: Vec::new(),
            fb: Vec::new(),
            counts: Counts::default(),
        }
    }

    /// The largest packet that goes per packet.
    pub fn max_packet(&self) -> usize {
        self.max_datagram.saturating_sub(DATA_HEADER_LEN)
    }

    /// Sends `packet` on the path the scheduler picks among `conn`'s usable ones (dropped and
    /// counted when there is none).
    pub fn push(
        &mut self,
        now: Instant,
        conn: &Connection,
        packet: &[u8],
    ) -> Result<(), PushError> {
        if packet.len() > self.max_packet() {
            self.counts.oversize += 1;
            return Err(PushError::TooBig);
        }
        self.usable(conn);
        if self.buf.len() + DATA_HEADER_LEN + packet.len() > QUEUE_BYTES {
            self.counts.queue_full += 1;
            return Ok(());
        }
        let at = self.buf.len();
        let Some(pos) = self.tx.send(now, &self.links, packet.len(), &mut self.buf) else {
            self.counts.no_path += 1;
            return Ok(());
        };
        self.buf.extend_from_slice(packet);
        let (path, local) = self.locals[pos];
        self.queue.push_back((path, local, at..self.buf.len()));
        Ok(())
    }

    /// A datagram of this carrier from the peer; the path it names when that path exists
    /// (the caller learns the path's address from it), `None` when dropped or feedback.
    pub fn handle(&mut self, now: Instant, conn: &Connection, datagram: &[u8]) -> Option<PathId> {
        match wire::parse(datagram) {
            Err(e) => {
                self.rx.count(DropReason::from(e));
                None
            }
            Ok(Datagram::Feedback(f)) => {
                self.tx.on_feedback(now, f.entries());
                None
            }
            Ok(Datagram::Data { header, packet }) => {
                let path = PathId(header.link);
                if conn.path(path).is_none() {
                    self.rx.count(DropReason::UnknownLink);
                    return None;
                }
                let mut item = self.pool.pop().unwrap_or_default();
                item.clear();
                item.extend_from_slice(packet);
                if !crate::class::is_pure_ack(packet) {
                    self.rx.on_data(now, &header, packet.len(), item).ok()?;
                    return Some(path);
                }
                // The buffer keeps an empty placeholder (no allocation); once accepted (not a
                // replay), the acknowledgement is passed on now.
                self.rx
                    .on_data(now, &header, packet.len(), Vec::new())
                    .ok()?;
                self.immediate.push_back(item);
                Some(path)
            }
        }
    }

    /// The next datagram to send: its payload into `out` after what is there, and its path.
    pub fn poll_transmit(
        &mut self,
        now: Instant,
        conn: &Connection,
        out: &mut Vec<u8>,
    ) -> Option<(PathId, AddrId)> {
        if self.queue.is_empty() {
            self.buf.clear();
            self.feedback(now, conn);
        }
        let (path, local, range) = self.queue.pop_front()?;
        out.extend_from_slice(&self.buf[range]);
        Some((path, local))
    }

    /// Packets received, to `emit`: pure acknowledgements at once, then what the reorder buffer
    /// released in order.
    pub fn drain(&mut self, mut emit: impl FnMut(&[u8])) {
        while let Some(p) = self.immediate.pop_front() {
            emit(&p);
            if self.pool.len() < 1024 {
                self.pool.push(p);
            }
        }
        while let Some(p) = self.rx.pop() {
            // An empty item is the placeholder of an acknowledgement passed on already.
            if !p.is_empty() {
                emit(&p);
            }
            if self.pool.len() < 1024 && p.capacity() > 0 {
                self.pool.push(p);
            }
        }
    }

    /// The reorder buffer's and the feedback's next deadline.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.rx.poll_timeout()
    }

    /// Runs the reorder buffer's timers.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.rx.handle_timeout(now);
    }

    /// Whether anything was sent, received or dropped.
    pub fn active(&self) -> bool {
        self.tx.stats().packets > 0
            || self.rx.reorder().stats().accepted > 0
            || self.drops().any(|(_, n)| n > 0)
    }

    /// Drops by reason (`datagram_<reason>`) for the status document's `drops`.
    pub fn drops(&self) -> impl Iterator<Item = (String, u64)> + '_ {
        self.rx
            .drops()
            .iter()
            .chain([
                ("no_path", self.counts.no_path),
                ("queue_full", self.counts.queue_full),
            ])
            .map(|(k, n)| (format!("datagram_{k}"), n))
    }

    /// Counters for the status document.
    pub fn json(&self) -> Value {
        let tx = self.tx.stats();
        let r = self.rx.reorder().stats();
        let h = self.rx.hold();
        let sent: Vec<Value> = self
            .tx
            .links()
            .map(|l| {
                json!({
                    "path": l.id, "link": l.index, "packets": l.packets, "bytes": l.bytes,
                    "delivered": l.delivered, "lost": l.lost, "weight": l.weight,
                    "rate_mbit": l.rate * 8e-6, "stalled": l.stalled, "stalls": l.stalls,
                })
            })
            .collect();
        let received: Vec<Value> = self
            .rx
            .links()
            .map(
                |l| json!({ "path": l.id, "packets": l.packets, "bytes": l.bytes, "lost": l.lost }),
            )
            .collect();
        json!({
            "sent_packets": tx.packets,
            "sent_bytes": tx.bytes,
            "probes": tx.probes,
            "oversize_on_stream": self.counts.oversize,
            "feedback_sent": self.counts.feedback_sent,
            "received_packets": r.accepted,
            "released_packets": r.released,
            "skipped": r.skipped,
            "late": r.late,
            "ofo_timeouts": r.ofo_timeouts,
            "overflows": r.overflows,
            "held_peak": r.held_peak,
            "hold_us": {
                "p50": h.quantile_us(0.5), "p99": h.quantile_us(0.99),
                "max": h.max_us(), "mean": h.mean_us(), "count": h.count(),
            },
            "paths_sent": sent,
            "paths_received": received,
        })
    }

    /// Queues the receiver's feedback on every usable path, when due.
    fn feedback(&mut self, now: Instant, conn: &Connection) {
        self.fb.clear();
        if !self.rx.poll_feedback(now, &mut self.fb) {
            return;
        }
        self.usable(conn);
        for &(path, local) in &self.locals {
            let at = self.buf.len();
            self.buf.extend_from_slice(&self.fb);
            self.queue.push_back((path, local, at..self.buf.len()));
            self.counts.feedback_sent += 1;
        }
    }

    /// The connection's usable paths as the scheduler's links: established, usable, not
    /// backup; backups too when none of those delivers (none usable, or every one stalled by
    /// braid-hya's feedback); when every path is suspected (the stream's
    /// retransmission or reinjection timers marked them all at once, as under a bulk transfer
    /// filling both queues), every established one: braid-hya's own stall detection judges
    /// the links for datagrams, and a packet sent on a suspected path beats one dropped. The
    /// link number is the client's link (the client's local address id; at the gateway, the
    /// path's remote one).
    fn usable(&mut self, conn: &Connection) {
        self.links.clear();
        self.locals.clear();
        for (suspected, backup) in [(false, false), (false, true), (true, false), (true, true)] {
            for p in conn.paths() {
                if !p.established || p.usable == suspected || p.backup != backup {
                    continue;
                }
                let link = match self.side {
                    Side::Client => p.local,
                    Side::Server => p.remote,
                };
                self.links.push(Link {
                    index: usize::from(link.0),
                    id: p.id.0,
                    rtt: p.srtt,
                });
                self.locals.push((p.id, p.local));
            }
            // Enough once one of them delivers. A path the core still counts usable may be
            // one this carrier has found stalled (a side that sends the stream little or
            // nothing on it learns of a dead link only from the per-packet feedback): it
            // stays in the list, for its probes, and the next tier (the backup paths) joins.
            if self.links.iter().any(|l| !self.tx.is_stalled(l.index)) {
                return;
            }
        }
    }
}
