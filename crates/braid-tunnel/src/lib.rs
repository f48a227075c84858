//! braid tunnel: IP packets from a TUN device carried over one multipath connection.
//!
//! Two sans-IO building blocks for the tunnel runtime (no sockets, no clocks, no random
//! generator inside: time and randomness are arguments):
//!
//! - [`frame`]: PtoS and StoP, whole IP packets to a byte stream and back (SPEC M5, seed 003).
//! - [`secure`]: Noise IK mutual authentication between a tunnel client and a gateway, and
//!   the encrypted datagrams that carry the multipath connection's packets.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod aqm;
pub mod class;
pub mod daemon;
pub mod frame;
pub mod secure;
