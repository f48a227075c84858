//! The connection-level send stream: bytes written by the application, kept until the peer
//! acknowledges them at the connection level (DATA_ACK).

use std::collections::VecDeque;

use crate::range_set::RangeSet;
use crate::scheduler::Priority;

/// Most disjoint ranges of DATA_ACK's selective acknowledgements kept. They only spare
/// resending what already arrived; a range that would be one more is ignored (its bytes count
/// as unacknowledged until the cumulative point passes them). A receiver's holes are its
/// out-of-order pieces, at most one per 512 bytes of its buffer; a peer acknowledging every
/// other byte would otherwise grow the set, and the scans over it, with all it was sent.
pub(crate) const MAX_PEER_SACKED: usize = 8192;

#[derive(Debug)]
pub(crate) struct SendBuf {
    /// Data sequence number of `data[0]`.
    base: u64,
    data: VecDeque<u8>,
    capacity: u64,
    /// Next new byte for single-copy schedulers.
    pub next: u64,
    /// The application finished the stream: the FIN sits at `end()`.
    pub fin: bool,
    /// The FIN went out at least once.
    pub fin_sent: bool,
    /// Everything below is acknowledged by the peer (the FIN counts as one unit at `end()`).
    pub peer_cum: u64,
    /// Acknowledged above `peer_cum` (DATA_ACK ranges).
    pub peer_sacked: RangeSet,
    /// The peer accepts bytes below this (receive window right edge).
    pub peer_window_end: u64,
}

impl SendBuf {
    pub fn new(capacity: u64, initial_window: u64) -> Self {
        SendBuf {
            base: 0,
            data: VecDeque::new(),
            capacity,
            next: 0,
            fin: false,
            fin_sent: false,
            peer_cum: 0,
            peer_sacked: RangeSet::new(),
            peer_window_end: initial_window,
        }
    }

    /// First stream byte still held (everything below was released).
    pub fn base(&self) -> u64 {
        self.base
    }

    /// End of the written stream (the FIN's position once finished).
    pub fn end(&self) -> u64 {
        self.base + self.data.len() as u64
    }

    /// Bytes the application may still write.
    pub fn space(&self) -> u64 {
        if self.fin {
            return 0;
        }
        self.capacity.saturating_sub(self.data.len() as u64)
    }

    pub fn write(&mut self, bytes: &[u8]) -> usize {
        let n = (self.space() as usize).min(bytes.len());
        self.data.extend(&bytes[..n]);
        n
    }

    /// Bytes held (unacknowledged or not yet sent).
    pub fn buffered(&self) -> u64 {
        self.data.len() as u64
    }

    /// Copies stream bytes `[dsn, dsn + len)` to `out`. The range must be held.
    pub fn copy_to(&self, dsn: u64, len: usize, out: &mut Vec<u8>) {
        debug_assert!(dsn >= self.base && dsn + len as u64 <= self.end());
        let start = (dsn - self.base) as usize;
        let (a, b) = self.data.as_slices();
        if start + len <= a.len() {
            out.extend_from_slice(&a[start..start + len]);
        } else if start >= a.len() {
            let s = start - a.len();
            out.extend_from_slice(&b[s..s + len]);
        } else {
            out.extend_from_slice(&a[start..]);
            out.extend_from_slice(&b[..len - (a.len() - start)]);
        }
    }

    /// Whether `[dsn, dsn + len)` is still held, i.e. not released after acknowledgement.
    pub fn holds(&self, dsn: u64, len: u64) -> bool {
        dsn >= self.base && dsn + len <= self.end()
    }

    /// Whether stream unit `dsn` (the FIN's unit included) is acknowledged by the peer.
    pub fn is_acked(&self, dsn: u64) -> bool {
        dsn < self.peer_cum || self.peer_sacked.contains(dsn)
    }

    /// Whether `[dsn, dsn + len)` (and the FIN at its end if `fin`) is fully acknowledged.
    pub fn range_acked(&self, dsn: u64, len: u64, fin: bool) -> bool {
        let end = dsn + len + u64::from(fin);
        end <= self.peer_cum || self.peer_sacked.contains_range(dsn.max(self.peer_cum), end)
    }

    /// The first unacknowledged sub-range of `[dsn, dsn + len)`, at most `max` bytes.
    pub fn first_unacked(&self, dsn: u64, len: u64, max: u64) -> Option<(u64, u64)> {
        let end = dsn + len;
        let mut start = dsn.max(self.peer_cum);
        for (s, e) in self.peer_sacked.iter() {
            if e <= start {
                continue;
            }
            if s > start {
                break;
            }
            start = e;
        }
        if start >= end {
            return None;
        }
        let mut stop = end.min(start.saturating_add(max));
        if let Some((s, _)) = self.peer_sacked.iter().find(|&(s, _)| s > start) {
            stop = stop.min(s);
        }
        Some((start, stop - start))
    }

    /// Applies a DATA_ACK. Returns `false` if it acknowledges what was never sent.
    pub fn on_data_ack(
        &mut self,
        cum: u64,
        window: u64,
        ranges: impl Iterator<Item = (u64, u64)>,
        sent_end: u64,
    ) -> bool {
        if cum > sent_end {
            return false;
        }
        if cum > self.peer_cum {
            self.peer_cum = cum;
            self.peer_sacked.remove_below(cum);
        }
        for (s, e) in ranges {
            if e > sent_end {
                return false;
            }
            let s = s.max(self.peer_cum);
            let room = self.peer_sacked.len() < MAX_PEER_SACKED
                || self.peer_sacked.touches(s)
                || self.peer_sacked.touches(e.saturating_sub(1));
            if room && !self.peer_sacked.contains_range(s, e) {
                self.peer_sacked.insert(s, e);
            }
        }
        self.peer_window_end = self.peer_window_end.max(cum.saturating_add(window));
        true
    }

    /// Releases bytes below `upto` (acknowledged, and sent on every path that must send them).
    pub fn release(&mut self, upto: u64) {
        let upto = upto.min(self.end());
        if upto > self.base {
            self.data.drain(..(upto - self.base) as usize);
            self.base = upto;
        }
    }

    /// Whether the FIN is acknowledged.
    pub fn fin_acked(&self) -> bool {
        self.fin && self.peer_cum > self.end()
    }
}

/// The application priority of the stream's bytes (seed 004 §III.F), for the scheduler:
/// marks `(offset, priority)`, ascending, each holding until the next one. Empty (no
/// priority anywhere) until the application sets one.
#[derive(Debug, Default)]
pub(crate) struct PriorityMarks {
    marks: VecDeque<(u64, Option<Priority>)>,
    /// The connection's priority, for bytes written without one.
    default: Option<Priority>,
}

impl PriorityMarks {
    /// Bytes written from `end` on have priority `p` unless written with their own.
    pub fn set_default(&mut self, p: Option<Priority>, end: u64) {
        self.default = p;
        self.push(end, p);
    }

    /// Bytes `start..end` have priority `p`; the connection's resumes at `end`.
    pub fn mark(&mut self, start: u64, end: u64, p: Option<Priority>) {
        self.push(start, p);
        self.push(end, self.default);
    }

    /// The priority of the byte at `offset`.
    pub fn at(&self, offset: u64) -> Option<Priority> {
        match self.marks.partition_point(|&(at, _)| at <= offset) {
            0 => None,
            i => self.marks[i - 1].1,
        }
    }

    /// Forgets the marks wholly below `upto` (released bytes).
    pub fn release(&mut self, upto: u64) {
        while self.marks.len() >= 2 && self.marks[1].0 <= upto {
            self.marks.pop_front();
        }
    }

    fn push(&mut self, at: u64, p: Option<Priority>) {
        match self.marks.back_mut() {
            Some(last) if last.0 == at => last.1 = p,
            Some(last) if last.1 == p => {}
            None if p.is_none() => {}
            _ => self.marks.push_back((at, p)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priority_marks_follow_writes() {
        let p = |n| Priority::new(n);
        let mut m = PriorityMarks::default();
        assert_eq!(m.at(0), None);
        m.mark(0, 100, p(4));
        m.set_default(p(2), 150);
        m.mark(200, 300, p(6));
        m.mark(300, 300, p(5)); // nothing written: no range
        let got: Vec<_> = [0, 99, 100, 149, 150, 199, 200, 299, 300, 1000]
            .map(|o| m.at(o).map_or(0, Priority::get))
            .to_vec();
        assert_eq!(got, vec![4, 4, 0, 0, 2, 2, 6, 6, 2, 2]);
        m.release(250);
        assert_eq!((m.at(250), m.at(300)), (p(6), p(2)));
        assert_eq!(m.marks.len(), 2);
    }

    #[test]
    fn copy_across_ring_wrap() {
        let mut b = SendBuf::new(8, 100);
        assert_eq!(b.write(b"abcdefgh"), 8);
        b.release(6);
        assert_eq!(b.write(b"ijklmn"), 6);
        let mut out = Vec::new();
        b.copy_to(6, 6, &mut out);
        assert_eq!(out, b"ghijkl");
    }

    #[test]
    fn first_unacked_skips_sacked_ranges() {
        let mut b = SendBuf::new(1000, 1000);
        b.write(&[0; 100]);
        assert!(b.on_data_ack(10, 100, [(20, 30), (40, 50)].into_iter(), 100));
        assert_eq!(b.first_unacked(0, 60, 100), Some((10, 10)));
        assert_eq!(b.first_unacked(20, 40, 100), Some((30, 10)));
        assert_eq!(b.first_unacked(20, 10, 100), None);
        assert_eq!(b.first_unacked(50, 50, 8), Some((50, 8)));
        assert!(b.range_acked(20, 10, false));
        assert!(!b.range_acked(20, 11, false));
        // Acknowledging unsent data is refused.
        assert!(!b.on_data_ack(101, 0, std::iter::empty(), 100));
    }

    #[test]
    fn selective_acknowledgements_of_every_other_byte_are_kept_to_a_bound() {
        let n = 4 * MAX_PEER_SACKED as u64;
        let mut b = SendBuf::new(n, n);
        b.write(&vec![0; n as usize]);
        let every_other = (1..n / 2).map(|k| (2 * k, 2 * k + 1));
        assert!(b.on_data_ack(0, n, every_other, n));
        assert_eq!(b.peer_sacked.len(), MAX_PEER_SACKED);
        // What extends or joins a kept range is still taken; the rest counts as unacknowledged.
        assert!(b.on_data_ack(0, n, [(n - 2, n - 1), (3, 4)].into_iter(), n));
        assert_eq!(b.peer_sacked.len(), MAX_PEER_SACKED - 1);
        assert!(b.is_acked(3) && !b.is_acked(n - 2));
    }
}
