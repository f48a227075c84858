//! Whole IP packets over one byte stream (SPEC M5, seed 003 §4): [`PtoS`] batches packets
//! read from the TUN device into stream bytes for the multipath connection; [`StoP`] cuts the
//! received stream back into the same packets by the length in their IP headers.
//!
//! No framing is added: the stream is the packets back to back, exactly as 003 does, so the
//! overhead is zero and the IP header is the only length field. Both ends must use the same
//! maximum packet length (the TUN MTU). IPv6 jumbograms are not supported (see [`ip`]).

pub mod icmp;
pub mod ip;
mod ptos;
mod stop;

pub use ip::{FrameError, destination, packet_len, source, validate_packet};
pub use ptos::{ConfigError, PtoS, PtoSConfig, PtoSStats, PushError, SEGMENT_PAYLOAD_003};
pub use stop::{StoP, StoPStats};

#[cfg(test)]
mod tests;
