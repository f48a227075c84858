//! The receiving end of one direction: the reorder buffer, what each link delivered (reported
//! back as feedback at most every feedback interval while packets come), the time packets
//! spent in the buffer, and drops by reason.

use std::time::Duration;

use braid_core::Instant;

use crate::hist::Histogram;
use crate::reorder::{self, Reject, Reorder};
use crate::wire::{DataHeader, FeedbackEntry, MAX_FEEDBACK_ENTRIES, ParseError, emit_feedback};

/// The receiver's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceiverConfig {
    /// The reorder buffer.
    pub reorder: reorder::Config,
    /// Feedback goes at most this often, and only after packets arrived.
    pub feedback_interval: Duration,
}

impl Default for ReceiverConfig {
    fn default() -> Self {
        ReceiverConfig {
            reorder: reorder::Config::default(),
            feedback_interval: Duration::from_millis(50),
        }
    }
}

/// Why a per-packet datagram was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// Shorter than its layout.
    Truncated,
    /// Not a valid layout (unknown type, no packet, a bad feedback count, trailing bytes).
    Malformed,
    /// It names a link the receiver does not have.
    UnknownLink,
    /// Its sequence number was seen before.
    Replayed,
    /// Its sequence number is beyond the reorder window (ahead, or too old to tell).
    OutOfWindow,
}

impl DropReason {
    /// Every reason, in counter order.
    pub const ALL: [DropReason; 5] = [
        DropReason::Truncated,
        DropReason::Malformed,
        DropReason::UnknownLink,
        DropReason::Replayed,
        DropReason::OutOfWindow,
    ];

    /// A stable short name, for counters.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Truncated => "truncated",
            DropReason::Malformed => "malformed",
            DropReason::UnknownLink => "unknown_link",
            DropReason::Replayed => "replayed",
            DropReason::OutOfWindow => "out_of_window",
        }
    }
}

impl From<ParseError> for DropReason {
    fn from(e: ParseError) -> Self {
        match e {
            ParseError::Truncated => DropReason::Truncated,
            _ => DropReason::Malformed,
        }
    }
}

impl From<Reject> for DropReason {
    fn from(r: Reject) -> Self {
        match r {
            Reject::Replayed => DropReason::Replayed,
            Reject::OutOfWindow => DropReason::OutOfWindow,
        }
    }
}

/// Drops by reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Drops([u64; 5]);

impl Drops {
    /// Counts one.
    pub fn count(&mut self, r: DropReason) {
        self.0[r as usize] += 1;
    }

    /// The count of one reason.
    pub fn get(&self, r: DropReason) -> u64 {
        self.0[r as usize]
    }

    /// (name, count) of every reason.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        DropReason::ALL.iter().map(|r| (r.name(), self.get(*r)))
    }
}

/// What one link delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkRxStats {
    /// The link's id (the sender's).
    pub id: u32,
    /// Packets received on it.
    pub packets: u64,
    /// Bytes received.
    pub bytes: u64,
    /// Packets missing in its link sequence.
    pub lost: u64,
}

#[derive(Debug, Clone, Copy)]
struct LinkRx {
    entry: FeedbackEntry,
    last: Instant,
}

/// The receiving end. See the module documentation.
#[derive(Debug)]
pub struct Receiver<T> {
    cfg: ReceiverConfig,
    reorder: Reorder<T>,
    links: Vec<LinkRx>,
    /// Packets arrived since the last feedback.
    dirty: bool,
    feedback_at: Instant,
    hold: Histogram,
    drops: Drops,
}

impl<T> Receiver<T> {
    /// A receiver expecting sequence number 0 first.
    pub fn new(cfg: ReceiverConfig) -> Self {
        Receiver {
            cfg,
            reorder: Reorder::new(cfg.reorder),
            links: Vec::new(),
            dirty: false,
            feedback_at: Instant::ZERO,
            hold: Histogram::default(),
            drops: Drops::default(),
        }
    }

    /// A data datagram's packet (`len` bytes, held as `item`) arrived at `now`.
    pub fn on_data(
        &mut self,
        now: Instant,
        h: &DataHeader,
        len: usize,
        item: T,
    ) -> Result<(), DropReason> {
        let r = self.reorder.push(now, h.seq, item);
        if r.is_ok() {
            self.account(now, h, len);
        }
        r.map_err(|e| {
            let e = DropReason::from(e);
            self.drops.count(e);
            e
        })
    }

    /// Counts a drop the caller found (a parse error, an unknown link).
    pub fn count(&mut self, r: DropReason) {
        self.drops.count(r);
    }

    /// Runs the reorder buffer's timers.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.reorder.handle_timeout(now);
    }

    /// The next time to call [`Receiver::handle_timeout`] or [`Receiver::poll_feedback`].
    pub fn poll_timeout(&self) -> Option<Instant> {
        let fb = self.dirty.then_some(self.feedback_at);
        match (self.reorder.poll_timeout(), fb) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The next packet released in order.
    pub fn pop(&mut self) -> Option<T> {
        let (item, held) = self.reorder.pop()?;
        self.hold.record(held);
        Some(item)
    }

    /// Appends a feedback datagram to `out` when one is due; whether it did.
    pub fn poll_feedback(&mut self, now: Instant, out: &mut Vec<u8>) -> bool {
        if !self.dirty || now < self.feedback_at {
            return false;
        }
        let entries: [FeedbackEntry; MAX_FEEDBACK_ENTRIES] =
            std::array::from_fn(|i| self.links.get(i).map(|l| l.entry).unwrap_or_default());
        emit_feedback(&entries[..self.links.len()], out);
        self.dirty = false;
        self.feedback_at = now.saturating_add(self.cfg.feedback_interval);
        true
    }

    /// The reorder buffer (its counters, what it holds).
    pub fn reorder(&self) -> &Reorder<T> {
        &self.reorder
    }

    /// How long released packets waited in the buffer.
    pub fn hold(&self) -> &Histogram {
        &self.hold
    }

    /// Drops by reason.
    pub fn drops(&self) -> &Drops {
        &self.drops
    }

    /// What each link delivered (the last [`MAX_FEEDBACK_ENTRIES`] links heard from).
    pub fn links(&self) -> impl Iterator<Item = LinkRxStats> + '_ {
        self.links.iter().map(|l| LinkRxStats {
            id: l.entry.link,
            packets: l.entry.packets,
            bytes: l.entry.bytes,
            lost: u64::from(l.entry.next_link_seq).saturating_sub(l.entry.packets),
        })
    }

    fn account(&mut self, now: Instant, h: &DataHeader, len: usize) {
        let i = match self.links.iter().position(|l| l.entry.link == h.link) {
            Some(i) => i,
            None => {
                if self.links.len() >= MAX_FEEDBACK_ENTRIES {
                    let oldest = (0..self.links.len())
                        .min_by_key(|&i| self.links[i].last)
                        .expect("not empty");
                    self.links.remove(oldest);
                }
                self.links.push(LinkRx {
                    entry: FeedbackEntry {
                        link: h.link,
                        ..FeedbackEntry::default()
                    },
                    last: now,
                });
                self.links.len() - 1
            }
        };
        let l = &mut self.links[i];
        l.last = now;
        l.entry.packets += 1;
        l.entry.bytes += len as u64;
        // Serial-number order (RFC 1982): a link sequence at or after the next one moves it.
        if h.link_seq.wrapping_sub(l.entry.next_link_seq) < 1 << 31 {
            l.entry.next_link_seq = h.link_seq.wrapping_add(1);
        }
        self.dirty = true;
    }
}

#[cfg(test)]
mod tests;
