//! The per-packet datagrams: data (one IP packet with its sequence numbers) and feedback (what
//! arrived on each link). Integers are big-endian; every layout is checked before anything is
//! read, and bad input is a small [`ParseError`], never a panic.
//!
//! ```text
//! data (17 bytes + the packet)
//!   0  type = 0xd1
//!   1  link id, 4 bytes          (the sender's name of the link it went on; the tunnel's path id)
//!   5  sequence number, 8 bytes  (per direction, from 0, one per packet: the reorder order)
//!  13  link sequence, 4 bytes    (per link, from 0, wrapping: losses per link)
//!  17  the IP packet, unchanged, ≥ 1 byte
//!
//! feedback (2 + 24·n bytes, 1 ≤ n ≤ 16), receiver → sender
//!   0  type = 0xd2
//!   1  n
//!   2  n × { link id 4 ‖ packets received 8 ‖ bytes received 8 ‖ next link sequence 4 }
//!      (cumulative since the link's first packet; next link sequence = one past the highest
//!       link sequence received)
//! ```
//!
//! The type bytes are outside the braid core's (its first byte is the wire version in the high
//! nibble, 2 today), so both kinds of datagram share one plaintext space after the tunnel's
//! connection id.

use thiserror::Error;

/// Type byte of a data datagram.
pub const DATA: u8 = 0xd1;
/// Type byte of a feedback datagram.
pub const FEEDBACK: u8 = 0xd2;
/// Bytes of a data datagram before the packet.
pub const DATA_HEADER_LEN: usize = 17;
/// Bytes of one feedback entry.
pub const FEEDBACK_ENTRY_LEN: usize = 24;
/// Entries one feedback datagram carries at most.
pub const MAX_FEEDBACK_ENTRIES: usize = 16;

/// Whether a datagram starting with `first` is one of this module's.
pub fn is_hya(first: u8) -> bool {
    first == DATA || first == FEEDBACK
}

/// The header of a data datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataHeader {
    /// The link it was sent on (the sender's id).
    pub link: u32,
    /// Its place in the direction's packet order.
    pub seq: u64,
    /// Its place on the link.
    pub link_seq: u32,
}

impl DataHeader {
    /// Appends the header to `out` (the packet follows).
    pub fn emit(&self, out: &mut Vec<u8>) {
        out.push(DATA);
        out.extend_from_slice(&self.link.to_be_bytes());
        out.extend_from_slice(&self.seq.to_be_bytes());
        out.extend_from_slice(&self.link_seq.to_be_bytes());
    }
}

/// What one link delivered, cumulative, as the receiver reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FeedbackEntry {
    /// The link (the sender's id).
    pub link: u32,
    /// Packets received on it.
    pub packets: u64,
    /// Bytes (of packets) received on it.
    pub bytes: u64,
    /// One past the highest link sequence received.
    pub next_link_seq: u32,
}

impl FeedbackEntry {
    fn emit(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.link.to_be_bytes());
        out.extend_from_slice(&self.packets.to_be_bytes());
        out.extend_from_slice(&self.bytes.to_be_bytes());
        out.extend_from_slice(&self.next_link_seq.to_be_bytes());
    }

    fn parse(b: &[u8; FEEDBACK_ENTRY_LEN]) -> FeedbackEntry {
        FeedbackEntry {
            link: u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            packets: u64::from_be_bytes(b[4..12].try_into().expect("8 bytes")),
            bytes: u64::from_be_bytes(b[12..20].try_into().expect("8 bytes")),
            next_link_seq: u32::from_be_bytes([b[20], b[21], b[22], b[23]]),
        }
    }
}

/// Appends a feedback datagram of `entries` (1 to [`MAX_FEEDBACK_ENTRIES`]; more are cut).
pub fn emit_feedback(entries: &[FeedbackEntry], out: &mut Vec<u8>) {
    let n = entries.len().min(MAX_FEEDBACK_ENTRIES);
    out.push(FEEDBACK);
    out.push(n as u8);
    for e in &entries[..n] {
        e.emit(out);
    }
}

/// A parsed datagram, borrowing the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Datagram<'a> {
    /// One packet.
    Data {
        /// Its header.
        header: DataHeader,
        /// The IP packet.
        packet: &'a [u8],
    },
    /// The receiver's report.
    Feedback(Feedback<'a>),
}

/// The entries of a feedback datagram (checked), read on demand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Feedback<'a>(&'a [u8]);

impl<'a> Feedback<'a> {
    /// The entries, in order.
    pub fn entries(&self) -> impl Iterator<Item = FeedbackEntry> + 'a {
        self.0
            .chunks_exact(FEEDBACK_ENTRY_LEN)
            .map(|c| FeedbackEntry::parse(c.try_into().expect("exact chunks")))
    }

    /// How many entries.
    pub fn len(&self) -> usize {
        self.0.len() / FEEDBACK_ENTRY_LEN
    }

    /// Never: a parsed feedback has at least one entry.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Why bytes are not a datagram of this module.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ParseError {
    /// Shorter than its layout.
    #[error("datagram truncated")]
    Truncated,
    /// The first byte is not a type of this module.
    #[error("unknown datagram type {0:#04x}")]
    UnknownType(u8),
    /// A data datagram without a packet.
    #[error("data datagram without a packet")]
    Empty,
    /// A feedback count of 0 or over [`MAX_FEEDBACK_ENTRIES`].
    #[error("feedback with {0} entries")]
    BadCount(u8),
    /// Bytes after the last feedback entry.
    #[error("trailing bytes after the feedback entries")]
    Trailing,
}

/// Parses untrusted bytes.
pub fn parse(b: &[u8]) -> Result<Datagram<'_>, ParseError> {
    let (&kind, rest) = b.split_first().ok_or(ParseError::Truncated)?;
    match kind {
        DATA => {
            let Some((h, packet)) = rest.split_first_chunk::<{ DATA_HEADER_LEN - 1 }>() else {
                return Err(ParseError::Truncated);
            };
            if packet.is_empty() {
                return Err(ParseError::Empty);
            }
            let header = DataHeader {
                link: u32::from_be_bytes([h[0], h[1], h[2], h[3]]),
                seq: u64::from_be_bytes(h[4..12].try_into().expect("8 bytes")),
                link_seq: u32::from_be_bytes([h[12], h[13], h[14], h[15]]),
            };
            Ok(Datagram::Data { header, packet })
        }
        FEEDBACK => {
            let (&n, entries) = rest.split_first().ok_or(ParseError::Truncated)?;
            if n == 0 || usize::from(n) > MAX_FEEDBACK_ENTRIES {
                return Err(ParseError::BadCount(n));
            }
            let want = usize::from(n) * FEEDBACK_ENTRY_LEN;
            match entries.len().cmp(&want) {
                std::cmp::Ordering::Less => Err(ParseError::Truncated),
                std::cmp::Ordering::Greater => Err(ParseError::Trailing),
                std::cmp::Ordering::Equal => Ok(Datagram::Feedback(Feedback(entries))),
            }
        }
        other => Err(ParseError::UnknownType(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn data_round_trips() {
        let h = DataHeader {
            link: 7,
            seq: u64::MAX - 3,
            link_seq: 0x0102_0304,
        };
        let mut b = Vec::new();
        h.emit(&mut b);
        assert_eq!(b.len(), DATA_HEADER_LEN);
        b.extend_from_slice(b"\x45packet");
        assert_eq!(
            parse(&b),
            Ok(Datagram::Data {
                header: h,
                packet: b"\x45packet"
            })
        );
        assert_eq!(parse(&b[..DATA_HEADER_LEN]), Err(ParseError::Empty));
        assert_eq!(parse(&b[..DATA_HEADER_LEN - 1]), Err(ParseError::Truncated));
        assert_eq!(parse(&[]), Err(ParseError::Truncated));
        assert_eq!(parse(&[0x20, 1, 2]), Err(ParseError::UnknownType(0x20)));
    }

    #[test]
    fn feedback_round_trips_and_is_checked() {
        let es: Vec<FeedbackEntry> = (0..3)
            .map(|i| FeedbackEntry {
                link: i,
                packets: 100 + u64::from(i),
                bytes: 1 << 40,
                next_link_seq: u32::MAX - i,
            })
            .collect();
        let mut b = Vec::new();
        emit_feedback(&es, &mut b);
        assert_eq!(b.len(), 2 + 3 * FEEDBACK_ENTRY_LEN);
        let Ok(Datagram::Feedback(f)) = parse(&b) else {
            panic!("{:?}", parse(&b))
        };
        assert_eq!(f.len(), 3);
        assert_eq!(f.entries().collect::<Vec<_>>(), es);
        assert_eq!(parse(&b[..b.len() - 1]), Err(ParseError::Truncated));
        let mut long = b.clone();
        long.push(0);
        assert_eq!(parse(&long), Err(ParseError::Trailing));
        assert_eq!(parse(&[FEEDBACK, 0]), Err(ParseError::BadCount(0)));
        assert_eq!(parse(&[FEEDBACK, 17]), Err(ParseError::BadCount(17)));
        assert_eq!(parse(&[FEEDBACK]), Err(ParseError::Truncated));
    }

    proptest! {
        /// Any bytes: an error or a datagram that emits back to the same bytes.
        #[test]
        fn parse_never_panics_and_round_trips(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            match parse(&b) {
                Err(_) => {}
                Ok(Datagram::Data { header, packet }) => {
                    let mut out = Vec::new();
                    header.emit(&mut out);
                    out.extend_from_slice(packet);
                    prop_assert_eq!(out, b);
                }
                Ok(Datagram::Feedback(f)) => {
                    let mut out = Vec::new();
                    emit_feedback(&f.entries().collect::<Vec<_>>(), &mut out);
                    prop_assert_eq!(out, b);
                }
            }
        }
    }
}
