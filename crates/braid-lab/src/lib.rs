//! braid lab: scenarios on real network stacks. The link emulator ([`emu`]) applies the
//! simulator's own link model ([`braid_sim::link::Direction`]) to real frames between network
//! namespaces in real time; [`topo`] wires an emulated link between two namespaces; [`lab`]
//! runs a scenario file on real endpoints over emulated links, with [`app`] as its
//! application; [`manet`] builds seed 004's ad-hoc network of namespaces with babeld.

#![deny(unsafe_code)]

pub mod app;
pub mod bed;
pub mod emu;
pub mod lab;
pub mod manet;
pub mod packet;
pub mod topo;

pub use emu::{Counters, Emulator, LinkEvent, LinkSpec};
