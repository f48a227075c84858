//! StoP, stream to packets (seed 003 §4.4): the byte stream received from the multipath
//! connection is cut back into the original IP packets by the length in each IP header
//! (IPv4 total length, IPv6 40 + payload length), across arbitrary read boundaries: a packet
//! may span many reads and a read may hold many packets. Packets come out byte-identical.
//!
//! # Resynchronisation policy: none
//!
//! The stream is reliable and in order, so an invalid header (version not 4 or 6, a length
//! shorter than the header or longer than the maximum packet) can only come from a corrupt or
//! hostile peer, never from the network. Guessing where the next packet starts would inject
//! garbage into the TUN device, so StoP does not try: the first invalid header poisons it,
//! every later [`StoP::next_packet`] returns the same error, and further bytes are discarded
//! (and counted). The runtime must close the session (the multipath connection) and start a
//! new one with [`StoP::reset`].

use super::ip::{FrameError, packet_len};

/// Counters of a [`StoP`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoPStats {
    /// Packets emitted.
    pub packets: u64,
    /// Bytes of emitted packets.
    pub bytes: u64,
    /// Invalid headers met (0 or 1 between resets).
    pub invalid: u64,
    /// Bytes discarded because the parser was poisoned.
    pub discarded: u64,
}

/// The stream-to-packets parser.
#[derive(Debug, Clone)]
pub struct StoP {
    max_packet_len: usize,
    buf: Vec<u8>,
    head: usize,
    error: Option<FrameError>,
    stats: StoPStats,
}

impl StoP {
    /// A parser that accepts IP packets of at most `max_packet_len` bytes (the TUN MTU; must
    /// equal the far side's PtoS maximum).
    pub fn new(max_packet_len: usize) -> Self {
        StoP {
            max_packet_len,
            buf: Vec::new(),
            head: 0,
            error: None,
            stats: StoPStats::default(),
        }
    }

    /// Appends bytes read from the connection's stream, in order.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.error.is_some() {
            self.stats.discarded += bytes.len() as u64;
            return;
        }
        if self.head > 0 {
            self.buf.drain(..self.head);
            self.head = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole packet, `Ok(None)` if more bytes are needed, or the sticky error of an
    /// invalid header (see the module's resynchronisation policy).
    pub fn next_packet(&mut self) -> Result<Option<&[u8]>, FrameError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let rest = &self.buf[self.head..];
        let len = match packet_len(rest, self.max_packet_len) {
            Ok(Some(len)) if len <= rest.len() => len,
            Ok(_) => return Ok(None),
            Err(e) => {
                self.error = Some(e);
                self.stats.invalid += 1;
                self.stats.discarded += rest.len() as u64;
                self.buf.clear();
                self.head = 0;
                return Err(e);
            }
        };
        let start = self.head;
        self.head += len;
        self.stats.packets += 1;
        self.stats.bytes += len as u64;
        Ok(Some(&self.buf[start..start + len]))
    }

    /// The error that poisoned the parser, if any.
    pub fn error(&self) -> Option<FrameError> {
        self.error
    }

    /// Forgets buffered bytes and any error, for a new session. Counters are kept.
    pub fn reset(&mut self) {
        self.buf.clear();
        self.head = 0;
        self.error = None;
    }

    /// Bytes buffered: the start of a packet not yet complete.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.head
    }

    /// The counters.
    pub fn stats(&self) -> StoPStats {
        self.stats
    }
}
