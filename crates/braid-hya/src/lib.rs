//! Per-packet hybrid access (HYA): the baseline braid's tunnel is compared with (seed 003 §2,
//! §5; SPEC M5), and the tunnel's `transport = "datagram"`.
//!
//! Each IP packet travels whole on ONE link chosen by a proportional scheduler and carries a
//! sequence number; the far end puts packets back in order with a JUGGLER-like reorder buffer
//! (an out-of-order timeout after which a hole is given up, an in-sequence timeout for
//! batching) and nothing is ever retransmitted. Seed 003 ran HYA with ratios 1:1 and 2:1 and
//! JUGGLER's timeouts at 10 ms (out of order) and 1 ms (in sequence).
//!
//! Sans-IO like the core: no sockets, no clock, no random generator; time is a
//! [`braid_core::Instant`] argument. The pieces stand alone so the simulator and the daemon run
//! the same code:
//!
//! - [`reorder`]: the reorder buffer, generic over what it holds (bytes in the daemon, a
//!   packet descriptor in a simulator).
//! - [`sched`]: the proportional scheduler (fixed ratios or weights from measured delivery).
//! - [`wire`]: the two datagrams, data and feedback, with a checked parser.
//! - [`Sender`] and [`Receiver`]: one direction's ends, with per-link accounting, liveness
//!   from the receiver's feedback, and the delay the reorder buffer adds ([`Histogram`]).
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod hist;
mod receiver;
pub mod reorder;
pub mod sched;
mod sender;
pub mod wire;

pub use hist::Histogram;
pub use receiver::{DropReason, Drops, LinkRxStats, Receiver, ReceiverConfig};
pub use sender::{Link, LinkTxStats, Sender, SenderConfig, SenderStats, Weights};
