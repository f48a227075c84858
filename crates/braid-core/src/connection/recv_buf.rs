//! The connection-level receive buffer, shared by all subflows: reorders by data sequence number
//! and delivers in order (SPEC M1). Its capacity bounds in-order unread bytes plus reordered
//! bytes, and sets the window advertised in DATA_ACK.

use std::collections::{BTreeMap, VecDeque};

use crate::range_set::RangeSet;

#[derive(Debug)]
pub(crate) struct RecvBuf {
    capacity: u64,
    /// Next in-order data sequence number.
    cum: u64,
    /// In-order bytes not yet read by the application.
    ready: VecDeque<u8>,
    /// Out-of-order bytes, keyed by their first data sequence number; disjoint.
    ooo: BTreeMap<u64, Vec<u8>>,
    ooo_ranges: RangeSet,
    ooo_bytes: u64,
    /// Position of the FIN, once received.
    fin_at: Option<u64>,
}

/// What one DATA frame changed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Received {
    /// Bytes never received before.
    pub new: u64,
    /// Bytes received before (redundant copies, reinjections, retransmissions).
    pub duplicate: u64,
    /// Bytes beyond the window, dropped.
    pub beyond_window: u64,
}

impl RecvBuf {
    pub fn new(capacity: u64) -> Self {
        RecvBuf {
            capacity,
            cum: 0,
            ready: VecDeque::new(),
            ooo: BTreeMap::new(),
            ooo_ranges: RangeSet::new(),
            ooo_bytes: 0,
            fin_at: None,
        }
    }

    /// Cumulative acknowledgement: every unit below is received (the FIN counts as one unit).
    pub fn cum_ack(&self) -> u64 {
        match self.fin_at {
            Some(f) if self.cum == f => f + 1,
            _ => self.cum,
        }
    }

    /// Window advertised to the peer, relative to [`RecvBuf::cum_ack`].
    pub fn window(&self) -> u64 {
        self.capacity.saturating_sub(self.ready.len() as u64)
    }

    /// Right edge of the window: bytes at or above are dropped.
    fn window_end(&self) -> u64 {
        self.cum + self.window()
    }

    pub fn ooo_ranges(&self) -> &RangeSet {
        &self.ooo_ranges
    }

    pub fn ooo_bytes(&self) -> u64 {
        self.ooo_bytes
    }

    pub fn readable(&self) -> usize {
        self.ready.len()
    }

    /// The peer's stream ended and everything before the FIN was read.
    pub fn is_finished(&self) -> bool {
        self.fin_at == Some(self.cum) && self.ready.is_empty()
    }

    pub fn fin_received(&self) -> bool {
        self.fin_at == Some(self.cum)
    }

    /// Takes in stream bytes `[dsn, dsn + data.len())`, and the FIN after them if `fin`.
    /// Returns `Err` on a FIN that contradicts an earlier one.
    pub fn insert(&mut self, dsn: u64, data: &[u8], fin: bool) -> Result<Received, ()> {
        let end = dsn + data.len() as u64;
        if fin {
            match self.fin_at {
                Some(f) if f != end => return Err(()),
                Some(_) => {}
                None => {
                    // Nothing may have arrived beyond the end of the stream.
                    if end < self.cum || self.ooo_ranges.last().is_some_and(|(_, e)| e > end) {
                        return Err(());
                    }
                    self.fin_at = Some(end);
                }
            }
        }
        if let Some(f) = self.fin_at
            && end > f
        {
            return Err(());
        }
        let mut r = Received::default();
        let limit = self.window_end();
        // Below cum: already delivered.
        let mut start = dsn;
        if start < self.cum {
            let dup = (self.cum.min(end)) - start;
            r.duplicate += dup;
            start = self.cum.min(end);
        }
        let mut stop = end;
        if stop > limit {
            r.beyond_window = stop - limit.max(start);
            stop = limit.max(start);
        }
        if start >= stop {
            return Ok(r);
        }
        if start == self.cum {
            // In order: deliver what is not already held out of order.
            let upto = match self.ooo_ranges.first() {
                Some((s, _)) if s < stop => s,
                _ => stop,
            };
            let off = (start - dsn) as usize;
            self.ready.extend(&data[off..off + (upto - start) as usize]);
            r.new += upto - start;
            self.cum = upto;
            let rest_from = upto;
            if rest_from < stop {
                // The remainder overlaps held data: count and store only what is missing.
                r = self.store_ooo(dsn, data, rest_from, stop, r);
            }
            self.drain_ooo();
        } else {
            r = self.store_ooo(dsn, data, start, stop, r);
        }
        Ok(r)
    }

    fn store_ooo(
        &mut self,
        dsn: u64,
        data: &[u8],
        start: u64,
        stop: u64,
        mut r: Received,
    ) -> Received {
        // The parts of [start, stop) not held yet.
        let mut gaps = Vec::new();
        let mut cursor = start;
        for (s, e) in self.ooo_ranges.iter() {
            if e <= cursor {
                continue;
            }
            if s >= stop {
                break;
            }
            if s > cursor {
                gaps.push((cursor, s));
            }
            cursor = cursor.max(e);
        }
        if cursor < stop {
            gaps.push((cursor, stop));
        }
        let new: u64 = gaps.iter().map(|(s, e)| e - s).sum();
        r.duplicate += (stop - start) - new;
        r.new += new;
        for (s, e) in gaps {
            let off = (s - dsn) as usize;
            let len = (e - s) as usize;
            if s == self.cum {
                self.ready.extend(&data[off..off + len]);
                self.cum = e;
            } else {
                self.ooo.insert(s, data[off..off + len].to_vec());
                self.ooo_ranges.insert(s, e);
                self.ooo_bytes += e - s;
            }
        }
        r
    }

    /// Moves out-of-order bytes that became in order to the ready queue.
    fn drain_ooo(&mut self) {
        while let Some(entry) = self.ooo.first_entry() {
            let s = *entry.key();
            if s > self.cum {
                break;
            }
            let chunk = entry.remove();
            let e = s + chunk.len() as u64;
            self.ooo_bytes -= chunk.len() as u64;
            if e > self.cum {
                self.ready.extend(&chunk[(self.cum - s) as usize..]);
                self.cum = e;
            }
        }
        self.ooo_ranges.remove_below(self.cum);
    }

    /// Reads in-order bytes into `buf`.
    pub fn read(&mut self, buf: &mut [u8]) -> usize {
        let n = buf.len().min(self.ready.len());
        let (a, b) = self.ready.as_slices();
        if n <= a.len() {
            buf[..n].copy_from_slice(&a[..n]);
        } else {
            buf[..a.len()].copy_from_slice(a);
            buf[a.len()..n].copy_from_slice(&b[..n - a.len()]);
        }
        self.ready.drain(..n);
        n
    }

    /// Discards up to `max` in-order bytes without copying them; returns how many.
    pub fn discard(&mut self, max: usize) -> usize {
        let n = max.min(self.ready.len());
        self.ready.drain(..n);
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reorders_and_counts_duplicates() {
        let mut b = RecvBuf::new(1000);
        let r = b.insert(10, &[1; 10], false).unwrap();
        assert_eq!(r.new, 10);
        assert_eq!(b.readable(), 0);
        assert_eq!(b.ooo_bytes(), 10);
        // Overlapping retransmission covering both the hole and part of the held bytes.
        let r = b.insert(0, &[0; 15], false).unwrap();
        assert_eq!((r.new, r.duplicate), (10, 5));
        assert_eq!(b.readable(), 20);
        assert_eq!(b.ooo_bytes(), 0);
        let r = b.insert(5, &[0; 10], false).unwrap();
        assert_eq!((r.new, r.duplicate), (0, 10));
        let mut out = [9u8; 20];
        assert_eq!(b.read(&mut out), 20);
        assert_eq!(&out[..10], &[0; 10]);
        assert_eq!(&out[10..], &[1; 10]);
    }

    #[test]
    fn window_bounds_buffered_bytes() {
        let mut b = RecvBuf::new(100);
        let r = b.insert(0, &[0; 150], false).unwrap();
        assert_eq!((r.new, r.beyond_window), (100, 50));
        assert_eq!(b.window(), 0);
        let r = b.insert(100, &[0; 10], false).unwrap();
        assert_eq!(r.beyond_window, 10);
        let mut out = [0u8; 60];
        b.read(&mut out);
        assert_eq!(b.window(), 60);
    }

    #[test]
    fn fin_is_one_unit_after_the_data() {
        let mut b = RecvBuf::new(100);
        b.insert(5, &[1; 5], true).unwrap();
        assert_eq!(b.cum_ack(), 0);
        b.insert(0, &[0; 5], false).unwrap();
        assert_eq!(b.cum_ack(), 11);
        assert!(b.fin_received());
        // Data beyond the FIN, or a second FIN elsewhere, is a protocol error.
        assert!(b.insert(10, &[0; 1], false).is_err());
        assert!(b.insert(3, &[], true).is_err());
    }
}
