//! Applications: constant bit rate with timestamped messages (like D-ITG), greedy bulk (like
//! iperf3) and a file transfer (like nc), each over its own connection. The first one is the
//! measured application of the record; every one is accounted in [`FlowRecord`].

use std::collections::VecDeque;
use std::time::Duration;

use braid_core::Instant;
use braid_core::range_set::RangeSet;
use braid_core::wire::{self, Frame};

use super::{Kind, World};
use crate::record::FlowRecord;
use crate::scenario::{AppDef, AppDirection, AppKind};

pub(super) struct App {
    name: String,
    kind: AppKind,
    /// The endpoints that write and read.
    pub sender: usize,
    pub receiver: usize,
    pub start: Instant,
    stop: Option<Instant>,
    /// CBR: message size, interval.
    size: usize,
    interval_ns: u64,
    next_seq: u64,
    /// CBR messages generated but not yet written: (seq, generation time).
    backlog: VecDeque<(u64, Instant)>,
    /// File: bytes still to write.
    remaining: Option<u64>,
    file_total: Option<u64>,
    written: u64,
    // Receiver side.
    msg_offset: usize,
    header: [u8; 16],
    pub delivered: u64,
    corrupt: u64,
    completed: Option<Duration>,
    /// Stream bytes received so far and the data packets that brought none (topologies).
    received: RangeSet,
    redundant: Option<u64>,
}

/// The byte at stream offset `o` of application `flow`, when the stream is verified.
fn pattern(flow: usize, o: u64) -> u8 {
    (o.wrapping_mul(131) ^ (o >> 9) ^ (flow as u64).wrapping_mul(0x9e)) as u8
}

impl App {
    /// `count_redundant`: count redundant packets (topologies).
    pub fn new(def: &AppDef, flow: usize, count_redundant: bool) -> Self {
        let a = &def.spec;
        let size = a.size.0 as usize;
        let rate = match (a.rate, a.bitrate) {
            (Some(r), _) => r,
            (None, Some(b)) => b.0 / (size as f64 * 8.0),
            _ => 0.0,
        };
        let (client, server) = (2 * flow, 2 * flow + 1);
        let (sender, receiver) = match a.direction {
            AppDirection::Down => (server, client),
            AppDirection::Up => (client, server),
        };
        App {
            name: def.name.clone(),
            kind: a.kind,
            sender,
            receiver,
            start: Instant::ZERO + a.start.0,
            stop: a.stop.map(|d| Instant::ZERO + d.0),
            size,
            interval_ns: if rate > 0.0 { (1e9 / rate) as u64 } else { 0 },
            next_seq: 0,
            backlog: Default::default(),
            remaining: a.bytes.map(|b| b.0),
            file_total: a.bytes.map(|b| b.0),
            written: 0,
            msg_offset: 0,
            header: [0; 16],
            delivered: 0,
            corrupt: 0,
            completed: None,
            received: RangeSet::new(),
            redundant: count_redundant.then_some(0),
        }
    }

    pub fn record(&self) -> FlowRecord {
        FlowRecord {
            name: self.name.clone(),
            start: self.start.since_epoch(),
            stopped: self.stop.map(|t| t.since_epoch()),
            written: self.written,
            delivered: self.delivered,
            corrupt: self.corrupt,
            file_bytes: self.file_total.filter(|_| self.kind == AppKind::File),
            completed: self.completed,
            redundant_packets: self.redundant,
        }
    }

    /// Counts a data packet whose payload the receiver already had (seed 004's redundant
    /// packets: what a capture at the receiver shows beyond the necessary).
    pub fn count_redundant(&mut self, data: &[u8]) {
        let Some(count) = &mut self.redundant else {
            return;
        };
        let Ok((_, frames)) = wire::parse_header(data) else {
            return;
        };
        let (mut carried, mut new) = (false, 0);
        for f in frames.map_while(Result::ok) {
            if let Frame::Data { dsn, payload, .. } = f
                && !payload.is_empty()
            {
                carried = true;
                new += self.received.insert(dsn, dsn + payload.len() as u64);
            }
        }
        if carried && new == 0 {
            *count += 1;
        }
    }
}

impl World<'_> {
    pub(super) fn app_write(&mut self, flow: usize) -> bool {
        let app = &mut self.apps[flow];
        if self.now < app.start || app.stop.is_some_and(|t| self.now >= t) {
            return false;
        }
        let mut wrote = false;
        if app.kind == AppKind::Cbr && self.eps[app.sender].cbr_over_udp() {
            // Over UDP: every message goes at once, nothing holds it back.
            let (size, sender) = (app.size, app.sender);
            while let Some((seq, gen_at)) = self.apps[flow].backlog.pop_front() {
                let mut msg = std::mem::take(&mut self.chunk);
                msg[..8].copy_from_slice(&seq.to_le_bytes());
                msg[8..16].copy_from_slice(&gen_at.micros().to_le_bytes());
                self.tunnel_send_udp(sender, &msg[..size]);
                self.chunk = msg;
                self.apps[flow].written += size as u64;
                wrote = true;
            }
            return wrote;
        }
        let conn = self.eps[app.sender].app_conn();
        let verify = self.opts.verify;
        match app.kind {
            AppKind::Cbr => {
                let size = app.size;
                while let Some(&(seq, gen_at)) = app.backlog.front() {
                    if conn.send_space() < size as u64 {
                        break;
                    }
                    let msg = &mut self.chunk[..size];
                    msg[..8].copy_from_slice(&seq.to_le_bytes());
                    msg[8..16].copy_from_slice(&gen_at.micros().to_le_bytes());
                    let n = conn.write(msg);
                    debug_assert_eq!(n, size);
                    app.backlog.pop_front();
                    app.written += n as u64;
                    wrote = true;
                }
            }
            AppKind::Bulk | AppKind::File => loop {
                let space = conn.send_space() as usize;
                let mut n = space.min(self.chunk.len());
                if let Some(r) = app.remaining {
                    n = n.min(r as usize);
                }
                if n == 0 {
                    break;
                }
                if verify {
                    for (j, b) in self.chunk[..n].iter_mut().enumerate() {
                        *b = pattern(flow, app.written + j as u64);
                    }
                }
                let w = conn.write(&self.chunk[..n]);
                if w == 0 {
                    break;
                }
                wrote = true;
                app.written += w as u64;
                if let Some(r) = &mut app.remaining {
                    *r -= w as u64;
                    if *r == 0 {
                        conn.finish();
                        break;
                    }
                }
            },
        }
        wrote
    }

    pub(super) fn app_read(&mut self, flow: usize) -> bool {
        let mut any = false;
        let receiver = self.apps[flow].receiver;
        if self.apps[flow].kind == AppKind::Cbr && self.eps[receiver].cbr_over_udp() {
            // Over UDP: whole messages, in the order they came out of the tunnel.
            while let Some(msg) = self.eps[receiver]
                .tunnel
                .as_mut()
                .and_then(|t| t.udp_in.pop_front())
            {
                any = true;
                let n = msg.len();
                if flow == 0 {
                    self.rec.deliveries.push((self.now.micros(), n as u32));
                }
                if n == self.apps[flow].size {
                    self.scratch[..n].copy_from_slice(&msg);
                    self.parse_messages(flow, n);
                } else {
                    self.apps[flow].corrupt += n as u64;
                }
                self.apps[flow].delivered += n as u64;
            }
            return any;
        }
        let read = self.apps[flow].kind == AppKind::Cbr || self.opts.verify;
        loop {
            let app = &mut self.apps[flow];
            let conn = self.eps[app.receiver].app_conn();
            let n = if read {
                conn.read(&mut self.scratch)
            } else {
                conn.discard(usize::MAX)
            };
            if n == 0 {
                break;
            }
            any = true;
            if flow == 0 {
                self.rec.deliveries.push((self.now.micros(), n as u32));
            }
            match app.kind {
                AppKind::Cbr => self.parse_messages(flow, n),
                _ if read => {
                    let from = app.delivered;
                    let bad = self.scratch[..n]
                        .iter()
                        .enumerate()
                        .filter(|&(j, &b)| b != pattern(flow, from + j as u64))
                        .count();
                    app.corrupt += bad as u64;
                }
                _ => {}
            }
            self.apps[flow].delivered += n as u64;
        }
        let app = &mut self.apps[flow];
        if any
            && let Some(total) = app.file_total
            && app.delivered >= total
            && app.completed.is_none()
        {
            app.completed = Some(self.now.since_epoch());
            if flow == 0 {
                self.rec.completed = app.completed;
            }
        }
        any
    }

    /// Walks CBR messages in freshly read bytes, recording one-way delays from their headers.
    fn parse_messages(&mut self, flow: usize, n: usize) {
        let app = &mut self.apps[flow];
        let size = app.size;
        let mut i = 0;
        while i < n {
            let off = app.msg_offset;
            if off < 16 {
                let take = (16 - off).min(n - i);
                app.header[off..off + take].copy_from_slice(&self.scratch[i..i + take]);
            }
            let take = (size - off).min(n - i);
            i += take;
            app.msg_offset += take;
            if app.msg_offset == size {
                app.msg_offset = 0;
                let gen_us = u64::from_le_bytes(app.header[8..16].try_into().expect("8 bytes"));
                let delay = self.now.micros().saturating_sub(gen_us);
                if flow == 0 {
                    self.rec
                        .cbr
                        .push((gen_us, delay.min(u64::from(u32::MAX)) as u32));
                }
            }
        }
    }

    pub(super) fn app_tick(&mut self, flow: usize) {
        let app = &mut self.apps[flow];
        let s = app.sender;
        if app.stop.is_some_and(|t| self.now >= t) {
            return;
        }
        if app.kind == AppKind::Cbr {
            let seq = app.next_seq;
            app.next_seq += 1;
            app.backlog.push_back((seq, self.now));
            let next = app.start + Duration::from_nanos(app.interval_ns.saturating_mul(seq + 1));
            let size = app.size;
            if flow == 0 {
                self.rec.cbr_generated.push(self.now.micros());
                self.record_bounds(size);
            }
            self.schedule(next, Kind::AppTick { flow: flow as u16 });
        }
        self.pump(s);
    }
}
