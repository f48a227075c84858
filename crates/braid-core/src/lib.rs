//! braid-core: the sans-IO multipath transport of braid.
//!
//! A [`Connection`] is one byte stream carried by several subflows ("paths") over datagrams,
//! with connection-level data sequence numbers and per-path packet sequence numbers,
//! acknowledgements at both levels, a receive buffer shared by all paths, and pluggable
//! congestion control ([`cc`]), scheduling ([`scheduler`]) and reinjection ([`reinject`]).
//!
//! The core performs no I/O: it never reads a clock, sleeps, opens a socket or seeds a random
//! generator. The driver (the simulator or the daemon) passes time in and moves datagrams.

#![deny(unsafe_code)]

pub mod cc;
pub mod config;
pub mod connection;
pub mod range_set;
pub mod reinject;
pub mod rtt;
pub mod scheduler;
pub mod stats;
pub mod time;
pub mod wire;

pub use config::Config;
pub use connection::{
    CloseReason, Connection, Error, Event, PathCloseReason, PathInfo, Side, Transmit,
};
pub use stats::{AddrStats, ConnectionStats, DropReason, Drops, PathStats};
pub use time::Instant;
pub use wire::{AddrId, PathId};
