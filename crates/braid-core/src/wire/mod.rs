//! braid's wire format: one braid packet per datagram.
//!
//! ```text
//! packet  = header frame*
//! header  = first:u8 path:varint seq:varint timestamp:u32
//!           first = version (high 4 bits, currently 1) | reserved (low 4 bits, zero)
//! ```
//! `path` is the subflow (path) the packet belongs to, `seq` the packet's number in that
//! subflow's own sequence space (a retransmission on the same subflow reuses it, as TCP does),
//! `timestamp` the sender's clock in µs (low 32 bits), echoed in acknowledgements for RTT
//! samples (like the TCP timestamp option, RFC 7323).
//!
//! Frames are typed values ([`Frame`]); [`parse`] checks untrusted bytes and returns a small
//! error, never panics; `emit` cannot fail. Every integer is encoded in its shortest form, so
//! decoding then encoding a valid packet gives back the same bytes.

pub mod varint;

mod frame;

pub use frame::{
    AckRanges, Frame, FrameIter, RangeIter, data_header_len, emit_ack, emit_data_ack,
    emit_data_header, frame_type,
};

use std::fmt;
use varint::Reader;

/// Current wire version.
/// Version 2: REMOVE_ADDR carries the sender's next path id (stale removals are recognised).
pub const VERSION: u8 = 2;

/// Bytes of the header apart from the two varints.
pub const HEADER_FIXED_LEN: usize = 1 + 4;

/// Most acknowledgement ranges a single ACK or DATA_ACK frame carries.
pub const MAX_ACK_RANGES: usize = 32;

/// A subflow (path) of a connection. The side that opens a path picks its id: the client
/// even ids, the server odd ones, so both can open paths without colliding.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PathId(pub u32);

impl fmt::Debug for PathId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "path{}", self.0)
    }
}

impl fmt::Display for PathId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// An address (interface) of one endpoint, numbered by that endpoint (like MPTCP's address id).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Debug)]
pub struct AddrId(pub u8);

impl fmt::Display for AddrId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The packet header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub path: PathId,
    pub seq: u64,
    pub timestamp: u32,
}

impl Header {
    pub fn encoded_len(&self) -> usize {
        HEADER_FIXED_LEN + varint::len(u64::from(self.path.0)) + varint::len(self.seq)
    }

    /// Appends the header to `out`.
    pub fn emit(&self, out: &mut Vec<u8>) {
        out.push(VERSION << 4);
        varint::write(out, u64::from(self.path.0));
        varint::write(out, self.seq);
        out.extend_from_slice(&self.timestamp.to_be_bytes());
    }
}

/// Why untrusted bytes were rejected. Small and `Copy`: a parse error is counted and the
/// datagram dropped, nothing else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("packet truncated")]
    Truncated,
    #[error("unsupported wire version {0}")]
    Version(u8),
    #[error("reserved header bits set")]
    Reserved,
    #[error("unknown frame type {0:#04x}")]
    UnknownFrame(u8),
    #[error("integer not in its shortest encoding")]
    NonCanonicalVarint,
    #[error("value out of range")]
    OutOfRange,
    #[error("malformed acknowledgement ranges")]
    BadRanges,
    #[error("unknown address family {0}")]
    AddressFamily(u8),
}

impl ParseError {
    /// A stable short name, for counters.
    pub fn name(&self) -> &'static str {
        match self {
            ParseError::Truncated => "truncated",
            ParseError::Version(_) => "version",
            ParseError::Reserved => "reserved",
            ParseError::UnknownFrame(_) => "unknown_frame",
            ParseError::NonCanonicalVarint => "non_canonical",
            ParseError::OutOfRange => "out_of_range",
            ParseError::BadRanges => "bad_ranges",
            ParseError::AddressFamily(_) => "address_family",
        }
    }
}

/// Parses the header of an untrusted datagram and returns it with an iterator over the frames.
/// The iterator yields `Err` once and then stops if a frame is malformed; use [`parse`] to check
/// a whole packet at once.
pub fn parse_header(buf: &[u8]) -> Result<(Header, FrameIter<'_>), ParseError> {
    let mut r = Reader::new(buf);
    let first = r.u8()?;
    if first >> 4 != VERSION {
        return Err(ParseError::Version(first >> 4));
    }
    if first & 0x0f != 0 {
        return Err(ParseError::Reserved);
    }
    let path = u32::try_from(r.varint()?).map_err(|_| ParseError::OutOfRange)?;
    let seq = r.varint()?;
    let timestamp = r.u32()?;
    let header = Header {
        path: PathId(path),
        seq,
        timestamp,
    };
    Ok((header, FrameIter::new(r)))
}

/// Parses and validates a whole packet.
pub fn parse(buf: &[u8]) -> Result<(Header, Vec<Frame<'_>>), ParseError> {
    let (header, frames) = parse_header(buf)?;
    let frames = frames.collect::<Result<Vec<_>, _>>()?;
    Ok((header, frames))
}

/// Encodes a packet: header then frames.
pub fn emit(header: &Header, frames: &[Frame<'_>], out: &mut Vec<u8>) {
    header.emit(out);
    for f in frames {
        f.emit(out);
    }
}

#[cfg(test)]
mod tests;
