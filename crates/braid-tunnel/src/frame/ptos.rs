//! PtoS, packets to stream (seed 003 §4.2, §5.1): IP packets read from the TUN device are
//! appended to one byte stream and handed to the multipath connection in batches.
//!
//! A batch is ready when the buffer holds at least `threshold` bytes (003's "Threshold B
//! size", an integer multiple of the segment payload, so segments leave full), or when the
//! oldest buffered byte has waited `timeout` (003 §4.2: "all current packets will be directly
//! sent ... without waiting for future packets"). The buffer is bounded: a packet that does
//! not fit while the connection is not taking bytes is refused, and the runtime drops it, as a
//! router drops on a full queue.
//!
//! Driving it, after every [`PtoS::push`] and when [`PtoS::poll_timeout`] passes:
//! `let n = conn.write(ptos.ready(now)); ptos.consume(n);`.

use std::collections::VecDeque;
use std::time::Duration;

use braid_core::Instant;
use thiserror::Error;

use super::ip::{FrameError, IPV4_MIN_HEADER, MAX_IP_PACKET, validate_packet};

/// The MPTCP data payload of seed 003 §4.2: 1500 − 28 (MPTCP option) − 40 (IP + TCP).
pub const SEGMENT_PAYLOAD_003: usize = 1432;

/// How PtoS batches. Build with [`PtoSConfig::new`] (checked) or start from `default()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PtoSConfig {
    /// Bytes that make a batch: `segment_payload × segments`.
    pub threshold: usize,
    /// Longest time a buffered byte waits for the threshold before everything is flushed.
    pub timeout: Duration,
    /// Largest IP packet accepted (the TUN MTU); must equal the far side's StoP maximum.
    pub max_packet_len: usize,
    /// Most bytes buffered while the connection does not take them.
    pub capacity: usize,
}

impl Default for PtoSConfig {
    /// One 003 segment (1432 B), 1 ms timeout (003 gives no value; ours), 1500-byte packets,
    /// 256 KiB of buffer.
    fn default() -> Self {
        PtoSConfig {
            threshold: SEGMENT_PAYLOAD_003,
            timeout: Duration::from_millis(1),
            max_packet_len: 1500,
            capacity: 256 * 1024,
        }
    }
}

/// A [`PtoSConfig`] that cannot work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ConfigError {
    /// The threshold is zero.
    #[error("the batch threshold must be at least one byte (segment payload and count > 0)")]
    ZeroThreshold,
    /// The maximum packet length cannot hold an IP header or exceeds what IP can state.
    #[error("maximum packet length {0} is outside {IPV4_MIN_HEADER}..={MAX_IP_PACKET}")]
    MaxPacketLen(usize),
    /// The buffer cannot hold one batch or one packet.
    #[error("buffer capacity {capacity} is below the threshold or the maximum packet ({needed})")]
    Capacity {
        /// The configured capacity.
        capacity: usize,
        /// The larger of the threshold and the maximum packet length.
        needed: usize,
    },
}

impl PtoSConfig {
    /// A threshold of `segments` segment payloads, the other fields from `default()`.
    pub fn new(
        segment_payload: usize,
        segments: usize,
        timeout: Duration,
    ) -> Result<Self, ConfigError> {
        let config = PtoSConfig {
            threshold: segment_payload.saturating_mul(segments),
            timeout,
            ..PtoSConfig::default()
        };
        config.validate()?;
        Ok(config)
    }

    /// Checks the invariants [`PtoS::new`] relies on.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.threshold == 0 {
            return Err(ConfigError::ZeroThreshold);
        }
        if !(IPV4_MIN_HEADER..=MAX_IP_PACKET).contains(&self.max_packet_len) {
            return Err(ConfigError::MaxPacketLen(self.max_packet_len));
        }
        let needed = self.threshold.max(self.max_packet_len);
        if self.capacity < needed {
            return Err(ConfigError::Capacity {
                capacity: self.capacity,
                needed,
            });
        }
        Ok(())
    }
}

/// Why [`PtoS::push`] refused a packet. The packet is not buffered; the caller drops it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum PushError {
    /// Not one whole valid IP packet: StoP on the far side would have to reset the session.
    #[error("not a valid IP packet: {0}")]
    Invalid(#[from] FrameError),
    /// The buffer is full because the connection is not taking bytes.
    #[error("PtoS buffer full ({buffered} of {capacity} bytes)")]
    Full {
        /// Bytes buffered.
        buffered: usize,
        /// The configured capacity.
        capacity: usize,
    },
}

/// Counters of a [`PtoS`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PtoSStats {
    /// Packets accepted into the stream.
    pub packets: u64,
    /// Bytes accepted into the stream.
    pub bytes: u64,
    /// Packets refused as invalid IP.
    pub invalid: u64,
    /// Packets refused because the buffer was full.
    pub full: u64,
}

/// The packets-to-stream batcher. Sans-IO: time is an argument.
#[derive(Debug, Clone)]
pub struct PtoS {
    config: PtoSConfig,
    buf: Vec<u8>,
    /// Bytes of `buf` before `head` were consumed by the connection.
    head: usize,
    /// Stream offset of `buf[head]` since the start.
    offset: u64,
    /// (stream offset just past a buffered packet, its arrival), oldest first.
    arrivals: VecDeque<(u64, Instant)>,
    stats: PtoSStats,
}

impl PtoS {
    /// A batcher, if `config` passes [`PtoSConfig::validate`].
    pub fn new(config: PtoSConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(PtoS {
            config,
            buf: Vec::with_capacity(config.threshold.max(config.max_packet_len) * 2),
            head: 0,
            offset: 0,
            arrivals: VecDeque::new(),
            stats: PtoSStats::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &PtoSConfig {
        &self.config
    }

    /// Appends one IP packet read from the TUN device at `now`, unchanged.
    pub fn push(&mut self, now: Instant, packet: &[u8]) -> Result<(), PushError> {
        if let Err(e) = validate_packet(packet, self.config.max_packet_len) {
            self.stats.invalid += 1;
            return Err(e.into());
        }
        if self.len() + packet.len() > self.config.capacity {
            self.stats.full += 1;
            return Err(PushError::Full {
                buffered: self.len(),
                capacity: self.config.capacity,
            });
        }
        if self.head > 0 && self.head * 2 >= self.buf.len() {
            self.buf.drain(..self.head);
            self.head = 0;
        }
        self.buf.extend_from_slice(packet);
        self.arrivals
            .push_back((self.offset + self.len() as u64, now));
        self.stats.packets += 1;
        self.stats.bytes += packet.len() as u64;
        Ok(())
    }

    /// The bytes to write into the connection now: the largest multiple of the threshold, or
    /// everything once the oldest byte has waited the timeout. Empty when nothing is due.
    pub fn ready(&self, now: Instant) -> &[u8] {
        let pending = &self.buf[self.head..];
        let due = match self.poll_timeout() {
            Some(deadline) if now >= deadline => pending.len(),
            _ => pending.len() / self.config.threshold * self.config.threshold,
        };
        &pending[..due]
    }

    /// Marks the first `n` bytes of [`PtoS::ready`] as taken by the connection.
    pub fn consume(&mut self, n: usize) {
        let n = n.min(self.len());
        self.head += n;
        self.offset += n as u64;
        while self
            .arrivals
            .front()
            .is_some_and(|&(end, _)| end <= self.offset)
        {
            self.arrivals.pop_front();
        }
        if self.head == self.buf.len() {
            self.buf.clear();
            self.head = 0;
        }
    }

    /// When the oldest buffered byte will have waited the timeout (may be in the past while
    /// the connection is blocked: then wait for it to become writable instead).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.arrivals
            .front()
            .map(|&(_, arrived)| arrived + self.config.timeout)
    }

    /// Everything buffered, due or not (to flush on shutdown; then `consume`).
    pub fn buffered(&self) -> &[u8] {
        &self.buf[self.head..]
    }

    /// Stream offset just past the last buffered byte (the stream's end once all is written).
    pub fn end_offset(&self) -> u64 {
        self.offset + self.len() as u64
    }

    /// Bytes buffered.
    pub fn len(&self) -> usize {
        self.buf.len() - self.head
    }

    /// Nothing buffered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The counters.
    pub fn stats(&self) -> PtoSStats {
        self.stats
    }
}
