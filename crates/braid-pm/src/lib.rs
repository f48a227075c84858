//! braid-pm: path managers as sans-IO components (SPEC M4, seed 000 Tables I–III).
//!
//! A [`PathManager`] consumes [`Event`]s (connections, subflows, addresses, interfaces, signal
//! samples) and emits [`Command`]s (create/remove subflow, set backup, announce/withdraw
//! address). It knows nothing of the transport that executes them: the simulator and braid's
//! daemon apply them to `braid_core::Connection`s, `braid pm` sends them to the Linux kernel's
//! userspace path manager. [`adapter`] is the one binding of a `braid_core::Connection` to a
//! path manager that the simulator and the tunnel daemon share.
//!
//! [`route`] is the routing policy of seed 004's ad-hoc nodes, sans-IO in the same way:
//! neighbour observations and advertisements in, forwarding-table updates out.

#![deny(unsafe_code)]

pub mod adapter;
pub mod capacity;
pub mod config;
pub mod event;
pub mod hmm;
pub mod manager;
pub mod route;
pub mod signal;

pub use adapter::{Applied, ConnAdapter};
pub use capacity::{CapacityConfig, Carried};
pub use config::{CapacitySettings, Config, HmmConfig, HmmSettings, IfaceConfig, Mode, RACE_MIN};
pub use event::{AddrId, Command, ConnId, Endpoint, Event, IfaceId, SubflowId};
pub use manager::{Decision, IfaceStatus, Manager, PathManager, Reason, Stats};
