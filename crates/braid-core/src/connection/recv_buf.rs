//! The connection-level receive buffer, shared by all subflows: reorders by data sequence number
//! and delivers in order (SPEC M1). Its capacity bounds in-order unread bytes plus reordered
//! bytes, and sets the window advertised in DATA_ACK.

use std::collections::{BTreeMap, VecDeque};

use crate::range_set::RangeSet;

/// In-order bytes are kept in chunks so that a reordered segment moves into the in-order queue
/// without being copied again.
const CHUNK: usize = 16 * 1024;
/// Buffers kept for reuse.
const SPARE_BUFFERS: usize = 64;
/// Out-of-order pieces held per byte of capacity (see [`RecvBuf::admits`]): one per 512 bytes,
/// while a sender's segments are about a thousand bytes.
const BYTES_PER_PIECE: u64 = 512;
/// Out-of-order pieces held whatever the capacity.
const MIN_PIECES: usize = 256;

/// In-order bytes not yet read: a queue of chunks, the first one partly consumed.
#[derive(Debug, Default)]
struct Ready {
    chunks: VecDeque<Vec<u8>>,
    /// Bytes of the first chunk already read.
    head: usize,
    len: usize,
}

impl Ready {
    fn len(&self) -> usize {
        self.len
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies bytes to the end, filling the last chunk first.
    fn extend(&mut self, data: &[u8], spare: &mut Vec<Vec<u8>>) {
        if data.is_empty() {
            return;
        }
        self.len += data.len();
        if let Some(last) = self.chunks.back_mut()
            && last.capacity() - last.len() >= data.len()
        {
            last.extend_from_slice(data);
            return;
        }
        let mut v = spare.pop().unwrap_or_default();
        v.clear();
        v.reserve(data.len().max(CHUNK));
        v.extend_from_slice(data);
        self.chunks.push_back(v);
    }

    /// Appends a whole buffer, skipping its first `skip` bytes, without copying.
    fn push_chunk(&mut self, mut v: Vec<u8>, skip: usize, spare: &mut Vec<Vec<u8>>) {
        if skip >= v.len() {
            recycle(spare, v);
            return;
        }
        if skip > 0 {
            v.drain(..skip);
        }
        self.len += v.len();
        self.chunks.push_back(v);
    }

    /// Copies up to `buf.len()` bytes out, or drops them when `buf` is `None`.
    fn take(
        &mut self,
        mut max: usize,
        mut buf: Option<&mut [u8]>,
        spare: &mut Vec<Vec<u8>>,
    ) -> usize {
        let mut n = 0;
        max = max.min(self.len);
        while n < max {
            let Some(front) = self.chunks.front() else {
                break;
            };
            let avail = front.len() - self.head;
            let k = avail.min(max - n);
            if let Some(b) = buf.as_deref_mut() {
                b[n..n + k].copy_from_slice(&front[self.head..self.head + k]);
            }
            n += k;
            self.head += k;
            if self.head == front.len() {
                let v = self.chunks.pop_front().expect("front exists");
                recycle(spare, v);
                self.head = 0;
            }
        }
        self.len -= n;
        n
    }
}

fn recycle(spare: &mut Vec<Vec<u8>>, mut v: Vec<u8>) {
    if spare.len() < SPARE_BUFFERS && v.capacity() <= 4 * CHUNK {
        v.clear();
        spare.push(v);
    }
}

#[derive(Debug)]
pub(crate) struct RecvBuf {
    capacity: u64,
    /// Next in-order data sequence number.
    cum: u64,
    /// In-order bytes not yet read by the application.
    ready: Ready,
    spare: Vec<Vec<u8>>,
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
            ready: Ready::default(),
            spare: Vec::new(),
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

    /// Most out-of-order pieces held: one per [`BYTES_PER_PIECE`] of capacity, at least
    /// [`MIN_PIECES`].
    fn max_pieces(&self) -> usize {
        usize::try_from(self.capacity / BYTES_PER_PIECE)
            .unwrap_or(usize::MAX)
            .max(MIN_PIECES)
    }

    /// Whether stream bytes `[dsn, dsn + len)` can be taken without holding more out-of-order
    /// pieces than [`RecvBuf::max_pieces`]: always below the bound, and at it when they are in
    /// order or already held. Each piece costs its own allocation and map entry, so one-byte
    /// pieces a byte apart could otherwise hold tens of times the window in memory; the
    /// datagram carrying a refused piece is dropped before it is acknowledged, and the sender
    /// resends it as a lost one.
    pub fn admits(&self, dsn: u64, len: u64) -> bool {
        self.ooo.len() < self.max_pieces()
            || dsn <= self.cum
            || self.ooo_ranges.contains_range(dsn, dsn.saturating_add(len))
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
            self.ready
                .extend(&data[off..off + (upto - start) as usize], &mut self.spare);
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
        // Store the parts of [start, stop) not held yet, gap by gap.
        let mut cursor = start;
        let mut new = 0;
        while cursor < stop {
            // The first held range that ends after the cursor.
            let next = self.ooo_ranges.first_ending_after(cursor);
            let (gap_end, resume) = match next {
                Some((s, e)) if s <= cursor => {
                    cursor = e.min(stop);
                    continue;
                }
                Some((s, e)) => (s.min(stop), e),
                None => (stop, stop),
            };
            let (gs, ge) = (cursor, gap_end);
            let off = (gs - dsn) as usize;
            let len = (ge - gs) as usize;
            new += ge - gs;
            if gs == self.cum {
                self.ready.extend(&data[off..off + len], &mut self.spare);
                self.cum = ge;
            } else {
                let mut v = self.spare.pop().unwrap_or_default();
                v.clear();
                v.extend_from_slice(&data[off..off + len]);
                self.ooo.insert(gs, v);
                self.ooo_ranges.insert(gs, ge);
                self.ooo_bytes += ge - gs;
            }
            cursor = resume.min(stop).max(ge);
        }
        r.duplicate += (stop - start) - new;
        r.new += new;
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
                let skip = (self.cum - s) as usize;
                self.cum = e;
                self.ready.push_chunk(chunk, skip, &mut self.spare);
            } else {
                recycle(&mut self.spare, chunk);
            }
        }
        self.ooo_ranges.remove_below(self.cum);
    }

    /// Reads in-order bytes into `buf`.
    pub fn read(&mut self, buf: &mut [u8]) -> usize {
        self.ready.take(buf.len(), Some(buf), &mut self.spare)
    }

    /// Discards up to `max` in-order bytes without copying them; returns how many.
    pub fn discard(&mut self, max: usize) -> usize {
        self.ready.take(max, None, &mut self.spare)
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
