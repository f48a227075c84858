//! Counters exposed by a connection, for metrics and `braid status`.

use crate::wire::ParseError;

/// Counters of one path.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PathStats {
    /// Ack-eliciting packets sent (retransmissions included).
    pub packets_sent: u64,
    pub bytes_sent: u64,
    /// Stream bytes sent in DATA frames, first transmissions and reinjections.
    pub data_bytes_sent: u64,
    /// Retransmissions on this path (fast retransmit, RTO, tail-loss probe).
    pub retransmissions: u64,
    pub packets_received: u64,
    pub bytes_received: u64,
    /// Stream bytes received in DATA frames on this path (duplicates included).
    pub data_bytes_received: u64,
    pub rto_count: u64,
    pub tlp_count: u64,
    /// Expirations of the reinjection policy's timer.
    pub reinject_timer_count: u64,
    pub fast_retransmits: u64,
    pub lost_packets: u64,
    /// Retransmissions found lost again (packets sent after them were acknowledged).
    pub lost_retransmissions: u64,
    /// ACK frames that acknowledged new packets (the others count as `duplicate_acks`).
    pub acks: u64,
    pub duplicate_acks: u64,
    /// Packets of this path whose data was queued for reinjection on other paths.
    pub reinjected_from: u64,
    /// Reinjected segments this path carried.
    pub reinjected_to: u64,
}

/// Why a datagram was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DropReason {
    #[error("malformed: {0}")]
    Malformed(ParseError),
    #[error("unknown path")]
    UnknownPath,
    #[error("path already closed")]
    ClosedPath,
    #[error("too many paths")]
    TooManyPaths,
    /// The packet would open one more hole than the receiver keeps, in its path's received
    /// packet numbers ([`MAX_RX_RANGES`](crate::connection::MAX_RX_RANGES)) or in the stream
    /// held out of order (one piece per 512 bytes of the receive buffer); the sender resends it
    /// as it would a lost one.
    #[error("too many holes to keep")]
    TooManyHoles,
    #[error("protocol violation")]
    Protocol,
    #[error("connection closed")]
    Closed,
}

/// Dropped datagrams by reason.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Drops {
    pub malformed: u64,
    pub unknown_path: u64,
    pub closed_path: u64,
    pub too_many_paths: u64,
    pub too_many_holes: u64,
    pub protocol: u64,
    pub closed: u64,
}

impl Drops {
    pub fn count(&mut self, r: DropReason) {
        match r {
            DropReason::Malformed(_) => self.malformed += 1,
            DropReason::UnknownPath => self.unknown_path += 1,
            DropReason::ClosedPath => self.closed_path += 1,
            DropReason::TooManyPaths => self.too_many_paths += 1,
            DropReason::TooManyHoles => self.too_many_holes += 1,
            DropReason::Protocol => self.protocol += 1,
            DropReason::Closed => self.closed += 1,
        }
    }

    pub fn total(&self) -> u64 {
        self.malformed
            + self.unknown_path
            + self.closed_path
            + self.too_many_paths
            + self.too_many_holes
            + self.protocol
            + self.closed
    }
}

/// Counters of a connection.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ConnectionStats {
    pub datagrams_sent: u64,
    pub bytes_sent: u64,
    pub datagrams_received: u64,
    pub bytes_received: u64,
    /// DATA segments sent (first transmissions, reinjections, redundant copies, retransmissions).
    pub data_packets_sent: u64,
    /// Reinjected segments sent on a path other than the original one.
    pub reinjected_packets: u64,
    pub reinjected_bytes: u64,
    /// Of those, opportunistic retransmissions when the receive window blocked, and copies of
    /// a stalled segment ([`crate::reinject::ReinjectPolicy::copies_stalled_segment`]).
    pub opportunistic_retransmissions: u64,
    /// Segments and stream bytes sent on paths flagged duplicate
    /// ([`crate::Connection::set_duplicate`]) besides what the scheduler sent: the copies'
    /// cost.
    pub duplicated_packets: u64,
    pub duplicated_bytes: u64,
    /// Stream bytes received for the first time.
    pub data_bytes_received: u64,
    /// Stream bytes received again (reinjections, redundant copies): SPEC "redundant packets".
    pub duplicate_bytes_received: u64,
    /// Stream bytes dropped beyond the receive window.
    pub beyond_window_bytes: u64,
    /// Largest number of bytes held for reordering.
    pub ofo_peak_bytes: u64,
    /// Stream bytes read by the application.
    pub delivered_bytes: u64,
    pub paths_opened: u64,
    pub paths_closed: u64,
    /// REMOVE_ADDR frames ignored because the peer opened a newer path from the address.
    pub stale_removals: u64,
    /// Backed-off retransmission timers fired early by [`crate::Connection::peer_alive`].
    pub peer_alive_retransmits: u64,
    /// PATH_PRIO frames received that asked for a path's outstanding data to be sent again
    /// over the others ([`crate::Connection::reinject_path`]).
    pub reinject_requests_received: u64,
    pub dropped: Drops,
}

/// Counters of one local address (interface), kept across the paths that used it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct AddrStats {
    /// Stream bytes received in DATA frames on paths of this address (duplicates included).
    pub data_bytes_received: u64,
    /// Stream bytes sent in DATA frames on paths of this address (retransmissions included).
    pub data_bytes_sent: u64,
    pub datagrams_received: u64,
    pub datagrams_sent: u64,
}
