//! braid lab: scenarios on real network stacks. The link emulator ([`emu`]) applies the
//! simulator's own link model ([`braid_sim::link::Direction`]) to real frames between network
//! namespaces in real time; [`topo`] wires an emulated link between two namespaces.

#![deny(unsafe_code)]

pub mod bed;
pub mod emu;
pub mod packet;
pub mod topo;

pub use emu::{Counters, Emulator, LinkEvent, LinkSpec};
