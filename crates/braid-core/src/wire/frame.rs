//! Frames: the typed contents of a braid packet.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use super::varint::{self, Reader};
use super::{AddrId, MAX_ACK_RANGES, ParseError, PathId};

/// Frame type bytes.
pub mod frame_type {
    pub const PADDING: u8 = 0x00;
    pub const PING: u8 = 0x01;
    /// Subflow-level acknowledgement of the path the packet travels on.
    pub const ACK: u8 = 0x02;
    /// Connection-level acknowledgement (data sequence numbers) and receive window.
    pub const DATA_ACK: u8 = 0x03;
    pub const DATA: u8 = 0x04;
    /// DATA carrying the end of the stream (like MPTCP's DATA_FIN).
    pub const DATA_FIN: u8 = 0x05;
    pub const ADD_ADDR: u8 = 0x06;
    pub const REMOVE_ADDR: u8 = 0x07;
    /// Opens the path the packet travels on (like MP_JOIN).
    pub const PATH_OPEN: u8 = 0x08;
    /// Changes the backup and duplicate flags of a path (like MP_PRIO, which has the first).
    pub const PATH_PRIO: u8 = 0x09;
    pub const PATH_CLOSE: u8 = 0x0a;
    pub const CLOSE: u8 = 0x0b;
}

const FLAG_BACKUP: u8 = 0x01;
/// PATH_PRIO only: the path carries a copy of the stream (see [`Frame::PathPrio`]).
const FLAG_DUPLICATE: u8 = 0x02;
/// PATH_PRIO only: resend what is outstanding on the path over the others (see
/// [`Frame::PathPrio`]).
const FLAG_REINJECT: u8 = 0x04;
/// PATH_PRIO only: resend what is outstanding on the path over the others as soon as its
/// acknowledgements stop (see [`Frame::PathPrio`]).
const FLAG_WATCH: u8 = 0x08;

/// One frame, borrowing payload bytes from the datagram it was parsed from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame<'a> {
    /// `len` zero bytes; ignored by the receiver.
    Padding(usize),
    /// Elicits an acknowledgement, carries nothing.
    Ping,
    /// Acknowledges packets of this path: every `seq < cum`, plus `ranges` above `cum`.
    /// `ts_echo` is the timestamp of the packet that triggered this acknowledgement.
    Ack {
        cum: u64,
        ts_echo: u32,
        ranges: AckRanges<'a>,
    },
    /// Acknowledges stream bytes: every `dsn < cum`, plus `ranges` above; the receiver accepts
    /// stream bytes up to `cum + window`.
    DataAck {
        cum: u64,
        window: u64,
        ranges: AckRanges<'a>,
    },
    /// Stream bytes starting at data sequence number `dsn`; `fin` marks the end of the stream
    /// right after them.
    Data {
        dsn: u64,
        fin: bool,
        payload: &'a [u8],
    },
    /// The sender can also be reached at `addr`, which it numbers `id`.
    AddAddr {
        id: AddrId,
        backup: bool,
        addr: SocketAddr,
    },
    /// The sender's address `id` is gone: every path using it is dead, except the paths the
    /// sender opened from it with an id at or above `before` (the sender's next path id when it
    /// lost the address). Such a newer path means the address came back and this removal is
    /// stale: the receiver ignores it (see ARCHITECTURE.md, "Address removals").
    RemoveAddr { id: AddrId, before: PathId },
    /// Opens the path this packet travels on, from the sender's address `local` to the
    /// receiver's address `remote`.
    PathOpen {
        local: AddrId,
        remote: AddrId,
        backup: bool,
    },
    /// The sender asks that `path` be used only as a backup (or no longer), and whether it
    /// carries a copy of the stream besides (`duplicate`: every stream byte sent on another
    /// path is sent on it too, see `Connection::set_duplicate`), and (`reinject`) that what the
    /// receiver has outstanding on it be sent again over its other paths (see
    /// `Connection::reinject_path`), and (`watch`) that the receiver resend what it has
    /// outstanding on it over its other paths as soon as the path's acknowledgements stop (see
    /// `Connection::set_watch`).
    PathPrio {
        path: PathId,
        backup: bool,
        duplicate: bool,
        reinject: bool,
        watch: bool,
    },
    /// The sender closed `path`.
    PathClose { path: PathId, reason: u64 },
    /// The connection is closed immediately.
    Close { code: u64 },
}

impl Frame<'_> {
    /// Whether a packet carrying this frame must be acknowledged (and retransmitted if lost).
    pub fn is_ack_eliciting(&self) -> bool {
        !matches!(
            self,
            Frame::Padding(_) | Frame::Ack { .. } | Frame::DataAck { .. } | Frame::Close { .. }
        )
    }

    /// Appends the frame to `out`.
    pub fn emit(&self, out: &mut Vec<u8>) {
        use frame_type::*;
        match *self {
            Frame::Padding(n) => out.resize(out.len() + n, PADDING),
            Frame::Ping => out.push(PING),
            Frame::Ack {
                cum,
                ts_echo,
                ranges,
            } => {
                out.push(ACK);
                varint::write(out, cum);
                out.extend_from_slice(&ts_echo.to_be_bytes());
                ranges.emit(out);
            }
            Frame::DataAck {
                cum,
                window,
                ranges,
            } => {
                out.push(DATA_ACK);
                varint::write(out, cum);
                varint::write(out, window);
                ranges.emit(out);
            }
            Frame::Data { dsn, fin, payload } => {
                emit_data_header(out, dsn, payload.len(), fin);
                out.extend_from_slice(payload);
            }
            Frame::AddAddr { id, backup, addr } => {
                out.push(ADD_ADDR);
                out.push(id.0);
                out.push(if backup { FLAG_BACKUP } else { 0 });
                match addr.ip() {
                    IpAddr::V4(ip) => {
                        out.push(4);
                        out.extend_from_slice(&ip.octets());
                    }
                    IpAddr::V6(ip) => {
                        out.push(6);
                        out.extend_from_slice(&ip.octets());
                    }
                }
                out.extend_from_slice(&addr.port().to_be_bytes());
            }
            Frame::RemoveAddr { id, before } => {
                out.push(REMOVE_ADDR);
                out.push(id.0);
                varint::write(out, u64::from(before.0));
            }
            Frame::PathOpen {
                local,
                remote,
                backup,
            } => {
                out.push(PATH_OPEN);
                out.push(local.0);
                out.push(remote.0);
                out.push(if backup { FLAG_BACKUP } else { 0 });
            }
            Frame::PathPrio {
                path,
                backup,
                duplicate,
                reinject,
                watch,
            } => {
                out.push(PATH_PRIO);
                varint::write(out, u64::from(path.0));
                let b = if backup { FLAG_BACKUP } else { 0 };
                let d = if duplicate { FLAG_DUPLICATE } else { 0 };
                let r = if reinject { FLAG_REINJECT } else { 0 };
                out.push(b | d | r | if watch { FLAG_WATCH } else { 0 });
            }
            Frame::PathClose { path, reason } => {
                out.push(PATH_CLOSE);
                varint::write(out, u64::from(path.0));
                varint::write(out, reason);
            }
            Frame::Close { code } => {
                out.push(CLOSE);
                varint::write(out, code);
            }
        }
    }

    /// Bytes [`Frame::emit`] writes.
    pub fn encoded_len(&self) -> usize {
        let mut v = Vec::new();
        self.emit(&mut v);
        v.len()
    }
}

/// Writes the DATA frame header for `len` payload bytes that the caller appends next.
pub fn emit_data_header(out: &mut Vec<u8>, dsn: u64, len: usize, fin: bool) {
    out.push(if fin {
        frame_type::DATA_FIN
    } else {
        frame_type::DATA
    });
    varint::write(out, dsn);
    varint::write(out, len as u64);
}

/// Encoded length of a DATA frame header.
pub fn data_header_len(dsn: u64, len: usize) -> usize {
    1 + varint::len(dsn) + varint::len(len as u64)
}

/// Writes an ACK frame whose ranges come from an iterator of half-open `[start, end)` ranges,
/// ascending, disjoint, non-adjacent, all above `cum`. At most [`MAX_ACK_RANGES`] are taken.
pub fn emit_ack<I>(out: &mut Vec<u8>, cum: u64, ts_echo: u32, ranges: I)
where
    I: Iterator<Item = (u64, u64)> + Clone,
{
    out.push(frame_type::ACK);
    varint::write(out, cum);
    out.extend_from_slice(&ts_echo.to_be_bytes());
    emit_ranges(out, cum, ranges);
}

/// Writes a DATA_ACK frame; see [`emit_ack`] for `ranges`.
pub fn emit_data_ack<I>(out: &mut Vec<u8>, cum: u64, window: u64, ranges: I)
where
    I: Iterator<Item = (u64, u64)> + Clone,
{
    out.push(frame_type::DATA_ACK);
    varint::write(out, cum);
    varint::write(out, window);
    emit_ranges(out, cum, ranges);
}

fn emit_ranges<I>(out: &mut Vec<u8>, cum: u64, ranges: I)
where
    I: Iterator<Item = (u64, u64)> + Clone,
{
    let n = ranges.clone().take(MAX_ACK_RANGES).count();
    varint::write(out, n as u64);
    // Each range is (gap, len): start = previous end + 1 + gap (the first: cum + 1 + gap),
    // end = start + len with len ≥ 1. At least one number is missing between two ranges.
    let mut prev_end = cum;
    for (start, end) in ranges.take(n) {
        debug_assert!(start > prev_end && end > start);
        varint::write(out, start - prev_end - 1);
        varint::write(out, end - start - 1);
        prev_end = end;
    }
}

/// Acknowledgement ranges as they were received: validated at parse time, decoded lazily.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AckRanges<'a> {
    cum: u64,
    count: usize,
    raw: &'a [u8],
}

impl<'a> AckRanges<'a> {
    /// No ranges.
    pub fn empty(cum: u64) -> Self {
        AckRanges {
            cum,
            count: 0,
            raw: &[],
        }
    }

    /// Ranges encoded into `storage` (which must outlive the frame); for building frames in
    /// tests and tools.
    pub fn encode(storage: &'a mut Vec<u8>, cum: u64, ranges: &[(u64, u64)]) -> Self {
        storage.clear();
        emit_ranges(storage, cum, ranges.iter().copied());
        let count = ranges.len().min(MAX_ACK_RANGES);
        let header = varint::len(count as u64);
        let storage: &'a Vec<u8> = storage;
        AckRanges {
            cum,
            count,
            raw: &storage[header..],
        }
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The ranges, ascending, as half-open `[start, end)`.
    pub fn iter(&self) -> RangeIter<'a> {
        RangeIter {
            reader: Reader::new(self.raw),
            prev_end: self.cum,
            left: self.count,
        }
    }

    fn parse(r: &mut Reader<'a>, cum: u64) -> Result<Self, ParseError> {
        let count = r.varint()?;
        if count > MAX_ACK_RANGES as u64 {
            return Err(ParseError::BadRanges);
        }
        let start = r.position();
        let mut prev_end = cum;
        let mut probe = r.clone();
        for _ in 0..count {
            let gap = probe.varint()?;
            let len = probe.varint()?;
            let s = prev_end
                .checked_add(1)
                .and_then(|v| v.checked_add(gap))
                .ok_or(ParseError::BadRanges)?;
            let e = s
                .checked_add(1)
                .and_then(|v| v.checked_add(len))
                .ok_or(ParseError::BadRanges)?;
            if e > varint::MAX {
                return Err(ParseError::BadRanges);
            }
            prev_end = e;
        }
        let used = probe.position() - start;
        let raw = r.bytes(used)?;
        Ok(AckRanges {
            cum,
            count: count as usize,
            raw,
        })
    }

    fn emit(&self, out: &mut Vec<u8>) {
        varint::write(out, self.count as u64);
        out.extend_from_slice(self.raw);
    }
}

/// Iterator over [`AckRanges`].
#[derive(Debug, Clone)]
pub struct RangeIter<'a> {
    reader: Reader<'a>,
    prev_end: u64,
    left: usize,
}

impl Iterator for RangeIter<'_> {
    type Item = (u64, u64);

    fn next(&mut self) -> Option<(u64, u64)> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // Validated at parse time, so neither read can fail.
        let gap = self.reader.varint().ok()?;
        let len = self.reader.varint().ok()?;
        let start = self.prev_end + 1 + gap;
        let end = start + 1 + len;
        self.prev_end = end;
        Some((start, end))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

/// Iterator over the frames of a packet. After an error it yields nothing more.
#[derive(Debug, Clone)]
pub struct FrameIter<'a> {
    r: Reader<'a>,
    failed: bool,
}

impl<'a> FrameIter<'a> {
    pub(super) fn new(r: Reader<'a>) -> Self {
        FrameIter { r, failed: false }
    }

    fn frame(&mut self) -> Result<Frame<'a>, ParseError> {
        use frame_type::*;
        let r = &mut self.r;
        let ty = r.u8()?;
        Ok(match ty {
            PADDING => {
                let mut n = 1;
                while r.peek_u8() == Some(PADDING) {
                    r.u8()?;
                    n += 1;
                }
                Frame::Padding(n)
            }
            PING => Frame::Ping,
            ACK => {
                let cum = r.varint()?;
                let ts_echo = r.u32()?;
                let ranges = AckRanges::parse(r, cum)?;
                Frame::Ack {
                    cum,
                    ts_echo,
                    ranges,
                }
            }
            DATA_ACK => {
                let cum = r.varint()?;
                let window = r.varint()?;
                let ranges = AckRanges::parse(r, cum)?;
                Frame::DataAck {
                    cum,
                    window,
                    ranges,
                }
            }
            DATA | DATA_FIN => {
                let dsn = r.varint()?;
                let len = r.varint()?;
                let len = usize::try_from(len).map_err(|_| ParseError::Truncated)?;
                let payload = r.bytes(len)?;
                if dsn
                    .checked_add(len as u64)
                    .is_none_or(|end| end > varint::MAX)
                {
                    return Err(ParseError::OutOfRange);
                }
                Frame::Data {
                    dsn,
                    fin: ty == DATA_FIN,
                    payload,
                }
            }
            ADD_ADDR => {
                let id = AddrId(r.u8()?);
                let backup = flags(r.u8()?)?;
                let ip = match r.u8()? {
                    4 => {
                        let b = r.bytes(4)?;
                        IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))
                    }
                    6 => {
                        let mut o = [0u8; 16];
                        o.copy_from_slice(r.bytes(16)?);
                        IpAddr::V6(Ipv6Addr::from(o))
                    }
                    f => return Err(ParseError::AddressFamily(f)),
                };
                let port = r.u16()?;
                Frame::AddAddr {
                    id,
                    backup,
                    addr: SocketAddr::new(ip, port),
                }
            }
            REMOVE_ADDR => Frame::RemoveAddr {
                id: AddrId(r.u8()?),
                before: path_id(r)?,
            },
            PATH_OPEN => Frame::PathOpen {
                local: AddrId(r.u8()?),
                remote: AddrId(r.u8()?),
                backup: flags(r.u8()?)?,
            },
            PATH_PRIO => {
                let path = path_id(r)?;
                let b = r.u8()?;
                Frame::PathPrio {
                    path,
                    backup: flags(b & !(FLAG_DUPLICATE | FLAG_REINJECT | FLAG_WATCH))?,
                    duplicate: b & FLAG_DUPLICATE != 0,
                    reinject: b & FLAG_REINJECT != 0,
                    watch: b & FLAG_WATCH != 0,
                }
            }
            PATH_CLOSE => Frame::PathClose {
                path: path_id(r)?,
                reason: r.varint()?,
            },
            CLOSE => Frame::Close { code: r.varint()? },
            other => return Err(ParseError::UnknownFrame(other)),
        })
    }
}

impl<'a> Iterator for FrameIter<'a> {
    type Item = Result<Frame<'a>, ParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.r.is_empty() {
            return None;
        }
        let f = self.frame();
        self.failed = f.is_err();
        Some(f)
    }
}

fn flags(b: u8) -> Result<bool, ParseError> {
    if b & !FLAG_BACKUP != 0 {
        return Err(ParseError::Reserved);
    }
    Ok(b & FLAG_BACKUP != 0)
}

fn path_id(r: &mut Reader<'_>) -> Result<PathId, ParseError> {
    u32::try_from(r.varint()?)
        .map(PathId)
        .map_err(|_| ParseError::OutOfRange)
}
