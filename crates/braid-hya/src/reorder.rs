//! A JUGGLER-like reorder buffer (Geng et al., "JUGGLER: a practical reordering resilient
//! network stack for datacenters", EuroSys 2016), as seed 003 §5.2 runs it at the far end of its
//! HYA baseline: out-of-order timeout 10 ms, in-sequence timeout 1 ms.
//!
//! Packets carry a sequence number (one per packet, from 0). The buffer releases them in that
//! order and never asks for a retransmission:
//!
//! - A packet behind a hole (an earlier number missing) is held. When the OLDEST held packet has
//!   waited [`Config::ofo_timeout`], every hole before it is given up (its numbers count as
//!   [`Stats::skipped`]) and what follows is released. So no packet waits behind a hole longer
//!   than the out-of-order timeout, and one loss costs at most that much delay.
//! - Packets in sequence are released in batches: when [`Config::batch`] of them wait, or when
//!   the first has waited [`Config::inseq_timeout`] (JUGGLER holds them to hand the stack
//!   larger batches, as GRO does; zero releases each at once).
//! - A number below the release point whose hole was given up arrived late: it is released at
//!   once, out of order, as JUGGLER passes a late packet up rather than dropping it
//!   ([`Stats::late`]; the stack above, TCP or a jitter buffer, decides what it is worth). A
//!   number seen before is refused ([`Reject::Replayed`]; told apart from a late one over the
//!   last [`HISTORY`] numbers, older ones are refused as [`Reject::OutOfWindow`]), as is one
//!   [`Config::window`] or more ahead. When more than [`Config::capacity`] packets are held,
//!   the first hole is given up ([`Stats::overflows`]).
//!
//! Sans-IO and generic over what it holds: the daemon holds packet bytes, a simulator a packet
//! descriptor. Time is an argument. The caller feeds [`Reorder::push`], runs
//! [`Reorder::handle_timeout`] when [`Reorder::poll_timeout`] passes, and takes released packets
//! with [`Reorder::pop`], each with the time it spent in the buffer.

use std::collections::VecDeque;
use std::time::Duration;

use braid_core::Instant;

/// Sequence numbers below the release point remembered, to tell a replay from a late packet.
pub const HISTORY: u64 = 8192;

/// The buffer's timeouts and bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Longest wait behind a hole before the hole is given up (JUGGLER's `ofo_timeout`).
    pub ofo_timeout: Duration,
    /// Longest wait of in-sequence packets for more to batch with (`inseq_timeout`).
    pub inseq_timeout: Duration,
    /// In-sequence packets released at once when this many wait.
    pub batch: usize,
    /// Sequence numbers accepted ahead of the next expected one.
    pub window: u64,
    /// Packets held behind holes at most.
    pub capacity: usize,
}

impl Default for Config {
    /// Seed 003's values (10 ms, 1 ms); batches of 64 (one TUN write batch); a window of 8192
    /// numbers and 4096 held packets.
    fn default() -> Self {
        Config {
            ofo_timeout: Duration::from_millis(10),
            inseq_timeout: Duration::from_millis(1),
            batch: 64,
            window: 8192,
            capacity: 4096,
        }
    }
}

impl Config {
    /// Checks the bounds; the message names the field.
    pub fn validate(&self) -> Result<(), String> {
        if self.batch == 0 {
            return Err("batch must be at least 1".into());
        }
        if self.window == 0 || self.window > 1 << 20 {
            return Err(format!(
                "window {} out of range: allowed 1..=1048576",
                self.window
            ));
        }
        if self.capacity == 0 {
            return Err("capacity must be at least 1".into());
        }
        Ok(())
    }
}

/// Why a packet was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Reject {
    /// Its number was taken before (held or released).
    #[error("sequence number seen before")]
    Replayed,
    /// Its number is a window or more ahead of the release point, or older than the history.
    #[error("sequence number beyond the window")]
    OutOfWindow,
}

/// Counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Packets taken.
    pub accepted: u64,
    /// Packets released in order.
    pub released: u64,
    /// Sequence numbers given up (lost, or to arrive late).
    pub skipped: u64,
    /// Times the out-of-order timeout gave up holes.
    pub ofo_timeouts: u64,
    /// Times a full buffer gave up a hole.
    pub overflows: u64,
    /// Packets refused as replays.
    pub replayed: u64,
    /// Packets that came after their hole was given up, released out of order.
    pub late: u64,
    /// Packets refused as beyond the window.
    pub out_of_window: u64,
    /// Most packets held behind holes at once.
    pub held_peak: usize,
}

/// The reorder buffer. See the module documentation.
#[derive(Debug)]
pub struct Reorder<T> {
    cfg: Config,
    /// The next sequence number to release.
    next: u64,
    /// `slots[i]` holds number `next + i` (arrival, packet); the front is a hole whenever the
    /// deque is not empty.
    slots: VecDeque<Option<(Instant, T)>>,
    /// Packets in `slots`.
    held: usize,
    /// (arrival, number) of held packets in arrival order; entries below `next` are stale and
    /// never at the front.
    arrivals: VecDeque<(Instant, u64)>,
    /// In sequence, waiting for a batch: (arrival, packet).
    inseq: VecDeque<(Instant, T)>,
    /// The earliest arrival in `inseq` (packets from behind a hole arrived before those
    /// already there).
    inseq_since: Option<Instant>,
    /// Released: (packet, time held).
    ready: VecDeque<(T, Duration)>,
    /// One bit per number in `[next - HISTORY, next)`: released (1) or given up (0).
    history: Vec<u64>,
    stats: Stats,
}

impl<T> Reorder<T> {
    /// An empty buffer expecting number 0 first.
    pub fn new(cfg: Config) -> Self {
        Reorder {
            cfg,
            next: 0,
            slots: VecDeque::new(),
            held: 0,
            arrivals: VecDeque::new(),
            inseq: VecDeque::new(),
            inseq_since: None,
            ready: VecDeque::new(),
            history: vec![0; (HISTORY / 64) as usize],
            stats: Stats::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The next sequence number to be released.
    pub fn next_seq(&self) -> u64 {
        self.next
    }

    /// Packets inside: held behind holes, waiting for a batch, released and not popped.
    pub fn len(&self) -> usize {
        self.held + self.inseq.len() + self.ready.len()
    }

    /// Whether nothing is inside.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// A packet numbered `seq` arrived at `now`.
    pub fn push(&mut self, now: Instant, seq: u64, item: T) -> Result<(), Reject> {
        if seq < self.next {
            if self.next - seq > HISTORY {
                self.stats.out_of_window += 1;
                return Err(Reject::OutOfWindow);
            }
            if self.seen(seq) {
                self.stats.replayed += 1;
                return Err(Reject::Replayed);
            }
            // Late: its hole was given up. Out of order, at once (JUGGLER passes it up).
            self.mark(seq, true);
            self.stats.accepted += 1;
            self.stats.late += 1;
            self.stats.released += 1;
            self.ready.push_back((item, Duration::ZERO));
            return Ok(());
        }
        let off = seq - self.next;
        if off >= self.cfg.window {
            self.stats.out_of_window += 1;
            return Err(Reject::OutOfWindow);
        }
        let off = off as usize;
        if off < self.slots.len() {
            if self.slots[off].is_some() {
                self.stats.replayed += 1;
                return Err(Reject::Replayed);
            }
        } else {
            self.slots.resize_with(off + 1, || None);
        }
        self.slots[off] = Some((now, item));
        self.held += 1;
        self.stats.accepted += 1;
        if off > 0 {
            self.arrivals.push_back((now, seq));
        }
        self.advance();
        while self.held > self.cfg.capacity {
            self.stats.overflows += 1;
            self.skip_hole();
        }
        self.stats.held_peak = self.stats.held_peak.max(self.held);
        self.release(now);
        Ok(())
    }

    /// Gives up the holes whose packets waited the out-of-order timeout and releases batches
    /// that are due.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(&(t, seq)) = self.arrivals.front() {
            if now < t.saturating_add(self.cfg.ofo_timeout) {
                break;
            }
            // The oldest held packet waited long enough: nothing before it is waited for.
            self.stats.ofo_timeouts += 1;
            while self.next <= seq {
                self.skip_hole();
            }
        }
        self.release(now);
    }

    /// When [`Reorder::handle_timeout`] has something to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let ofo = self
            .arrivals
            .front()
            .map(|(t, _)| t.saturating_add(self.cfg.ofo_timeout));
        let inseq = self
            .inseq_since
            .map(|t| t.saturating_add(self.cfg.inseq_timeout));
        match (ofo, inseq) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The next released packet, with the time it spent in the buffer: in sequence order,
    /// but for late ones (released as they come).
    pub fn pop(&mut self) -> Option<(T, Duration)> {
        self.ready.pop_front()
    }

    /// Gives up every hole and releases everything held (the end of a flow).
    pub fn flush(&mut self, now: Instant) {
        while self.held > 0 {
            self.skip_hole();
        }
        self.release_all(now);
    }

    /// Moves the packets in sequence at the front to the batch.
    fn advance(&mut self) {
        while let Some(Some(_)) = self.slots.front() {
            let (t, item) = self
                .slots
                .pop_front()
                .flatten()
                .expect("the front is a packet");
            self.mark(self.next, true);
            self.next += 1;
            self.held -= 1;
            self.inseq_since = Some(self.inseq_since.map_or(t, |s| s.min(t)));
            self.inseq.push_back((t, item));
        }
        while self.arrivals.front().is_some_and(|&(_, s)| s < self.next) {
            self.arrivals.pop_front();
        }
    }

    /// Gives up the hole at the front and moves what follows it to the batch.
    fn skip_hole(&mut self) {
        while let Some(None) = self.slots.front() {
            self.slots.pop_front();
            self.mark(self.next, false);
            self.next += 1;
            self.stats.skipped += 1;
        }
        self.advance();
    }

    fn release(&mut self, now: Instant) {
        let Some(t) = self.inseq_since else {
            return;
        };
        if self.inseq.len() >= self.cfg.batch || now >= t.saturating_add(self.cfg.inseq_timeout) {
            self.release_all(now);
        }
    }

    fn release_all(&mut self, now: Instant) {
        self.inseq_since = None;
        for (t, item) in self.inseq.drain(..) {
            self.ready.push_back((item, now.saturating_since(t)));
            self.stats.released += 1;
        }
    }

    fn mark(&mut self, seq: u64, released: bool) {
        let i = (seq % HISTORY) as usize;
        let (w, b) = (i / 64, i % 64);
        if released {
            self.history[w] |= 1 << b;
        } else {
            self.history[w] &= !(1 << b);
        }
    }

    fn seen(&self, seq: u64) -> bool {
        let i = (seq % HISTORY) as usize;
        self.history[i / 64] & (1 << (i % 64)) != 0
    }
}

#[cfg(test)]
mod tests;
