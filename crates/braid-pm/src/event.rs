//! What a path manager hears and what it asks for (seed 000 Tables I–III, SPEC M4). The
//! types name connections, subflows, interfaces and addresses without any reference to a
//! transport's internals, so the same policies drive braid's own paths and Linux kernel MPTCP.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

/// A connection (an MPTCP token, or braid's connection number).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub u64);

/// A subflow, numbered by the backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SubflowId(pub u64);

/// A network interface (ifindex, or the simulator's link number).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IfaceId(pub u32);

/// An address id as MPTCP numbers them (per side).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AddrId(pub u8);

impl fmt::Display for IfaceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "if{}", self.0)
    }
}

/// One end of a subflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoint {
    pub id: AddrId,
    pub addr: Option<SocketAddr>,
}

/// Events (seed 000 Table I: path-manager events; Table II: network-monitor events; plus the
/// radio's signal samples).
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A connection was created (not yet established). `initiator` is true on the side that
    /// opened it (the side that creates subflows).
    ConnectionCreated {
        conn: ConnId,
        local: Endpoint,
        remote: Endpoint,
        iface: Option<IfaceId>,
        initiator: bool,
    },
    /// The connection is established; `subflow` is its initial subflow (described by `local`,
    /// `remote`, `iface`), when the backend numbers it.
    ConnectionEstablished {
        conn: ConnId,
        subflow: Option<SubflowId>,
        local: Endpoint,
        remote: Endpoint,
        iface: Option<IfaceId>,
    },
    ConnectionClosed {
        conn: ConnId,
    },
    /// The peer announced an address (ADD_ADDR).
    AddrAnnounced {
        conn: ConnId,
        remote: Endpoint,
    },
    /// The peer withdrew an address (REMOVE_ADDR).
    AddrRemoved {
        conn: ConnId,
        id: AddrId,
    },
    SubflowEstablished {
        conn: ConnId,
        subflow: SubflowId,
        iface: Option<IfaceId>,
        local: Endpoint,
        remote: Endpoint,
        backup: bool,
    },
    /// A subflow closed, or a requested one failed before it was established (`subflow`
    /// `None`). `iface`, when the backend knows it, lets the manager forget a request that never
    /// got an id; either way the manager re-evaluates the interface (after a backoff) so that a
    /// connection whose paths all closed opens them again while the interface is usable.
    SubflowClosed {
        conn: ConnId,
        subflow: Option<SubflowId>,
        iface: Option<IfaceId>,
    },
    SubflowPriority {
        conn: ConnId,
        subflow: SubflowId,
        backup: bool,
    },
    IfaceNew {
        iface: IfaceId,
        name: String,
        up: bool,
    },
    IfaceUpdated {
        iface: IfaceId,
        up: bool,
    },
    IfaceRemoved {
        iface: IfaceId,
    },
    LocalAddrNew {
        iface: IfaceId,
        id: AddrId,
        addr: Option<IpAddr>,
    },
    LocalAddrRemoved {
        iface: IfaceId,
        id: AddrId,
    },
    /// A signal-strength sample measured on an interface (e.g. per received CAM beacon).
    Signal {
        iface: IfaceId,
        rssi_dbm: f64,
    },
    /// A link-quality sample in seed 004's `if_quality` scale (0..=10000), for HMM observations.
    Quality {
        iface: IfaceId,
        if_quality: u32,
    },
    /// Stream bytes each interface has carried so far (sent and received, every connection; a
    /// counter that only grows), for the capacity-aware modes: the runtime sends one when
    /// [`crate::PathManager::wants_traffic`] says so.
    Traffic {
        bytes: Vec<(IfaceId, u64)>,
    },
}

/// Commands (seed 000 Table III).
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Advertise a local address to the peer (ADD_ADDR).
    AnnounceAddr {
        conn: ConnId,
        local: Endpoint,
    },
    /// Stop advertising it (REMOVE_ADDR).
    WithdrawAddr {
        conn: ConnId,
        id: AddrId,
    },
    CreateSubflow {
        conn: ConnId,
        iface: IfaceId,
        local: Endpoint,
        remote: Endpoint,
        backup: bool,
    },
    RemoveSubflow {
        conn: ConnId,
        subflow: SubflowId,
    },
    SetBackup {
        conn: ConnId,
        subflow: SubflowId,
        backup: bool,
    },
    /// Have the subflow carry a copy of every byte the connection sends on its other subflows
    /// (`on`), or stop (the `…-dup` modes: a demoted link whose signal faded stays a redundant
    /// carrier while the stream moves away). braid's own connections do it
    /// (`braid_core::Connection::set_duplicate`); kernel MPTCP cannot, and `braid pm` skips the
    /// command.
    SetDuplicate {
        conn: ConnId,
        subflow: SubflowId,
        on: bool,
    },
    /// Send again over the other subflows what is in flight on this one, both ways (the
    /// capacity-aware modes, when they demote a fading link: what it carried when it was
    /// demoted is not left to its retransmission timer). braid's own connections do it
    /// (`braid_core::Connection::reinject_path`); on kernel MPTCP `braid pm` closes the subflow
    /// at both ends, after which the kernel re-sends over the others all that is not DATA_ACKed,
    /// and the interface gets a new subflow when it is good again.
    Reinject {
        conn: ConnId,
        subflow: SubflowId,
    },
    /// Watch the subflow for a stall (`on`), both ways: what it has in flight is sent again
    /// over the other subflows as soon as its acknowledgements stop, about one RTT after, not
    /// at its retransmission timeout (the capacity-aware modes, on an active radio link while
    /// the others have been seen carrying the stream: a drop between two signal samples gives
    /// no warning). braid's own connections do it (`braid_core::Connection::set_watch`);
    /// kernel MPTCP cannot, and `braid pm` skips the command.
    SetWatch {
        conn: ConnId,
        subflow: SubflowId,
        on: bool,
    },
}

impl Command {
    /// What the command does, in a few words (status documents and logs: `braid pm status`,
    /// `braid tunnel status`; `braid lab` reads the decisions back by these words).
    pub fn describe(&self) -> String {
        match self {
            Command::AnnounceAddr { local, .. } => format!("announce id {}", local.id.0),
            Command::WithdrawAddr { id, .. } => format!("withdraw id {}", id.0),
            Command::CreateSubflow { backup: true, .. } => "create subflow (backup)".into(),
            Command::CreateSubflow { .. } => "create subflow".into(),
            Command::RemoveSubflow { subflow, .. } => format!("remove subflow {}", subflow.0),
            Command::Reinject { subflow, .. } => {
                format!("resend what subflow {} has in flight", subflow.0)
            }
            Command::SetWatch {
                subflow, on: true, ..
            } => format!("watch subflow {} for a stall", subflow.0),
            Command::SetWatch { subflow, .. } => format!("stop watching subflow {}", subflow.0),
            Command::SetDuplicate {
                subflow, on: true, ..
            } => {
                format!("copy the stream on subflow {}", subflow.0)
            }
            Command::SetDuplicate { subflow, .. } => {
                format!("stop the copy on subflow {}", subflow.0)
            }
            Command::SetBackup {
                subflow,
                backup: true,
                ..
            } => format!("set backup on subflow {}", subflow.0),
            Command::SetBackup { subflow, .. } => format!("clear backup on subflow {}", subflow.0),
        }
    }

    pub fn conn(&self) -> ConnId {
        match self {
            Command::AnnounceAddr { conn, .. }
            | Command::WithdrawAddr { conn, .. }
            | Command::CreateSubflow { conn, .. }
            | Command::RemoveSubflow { conn, .. }
            | Command::SetBackup { conn, .. }
            | Command::SetDuplicate { conn, .. }
            | Command::Reinject { conn, .. }
            | Command::SetWatch { conn, .. } => *conn,
        }
    }
}
