//! Why datagrams are dropped, and the counters of one endpoint.

use thiserror::Error;

/// Why a datagram was dropped. Every malformed or unwelcome input maps to exactly one reason;
/// [`DropReason::name`] is stable (metric labels, logs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Error)]
pub enum DropReason {
    /// Shorter than the smallest datagram of its type (or empty).
    #[error("datagram too short for its type")]
    TooShort,
    /// Unknown type byte, unknown protocol version, a type this side never receives (a
    /// gateway is sent no responses, a client no initiations), or a fixed-size type with
    /// trailing bytes.
    #[error("unknown or unexpected datagram type")]
    BadType,
    /// The receiver index names no session (or no handshake in progress).
    #[error("receiver index names no session")]
    UnknownIndex,
    /// The AEAD tag did not verify: tampered, truncated in the ciphertext, or the wrong key.
    #[error("authentication failed")]
    AuthFailed,
    /// Authentic, but its counter was already received.
    #[error("replayed counter")]
    Replayed,
    /// Authentic, but its counter is behind the replay window.
    #[error("counter behind the replay window")]
    TooOld,
    /// The Noise handshake message did not verify (wrong keys, tampered, truncated).
    #[error("Noise handshake failed")]
    HandshakeFailed,
    /// A valid handshake from a static key that is not in the allow list.
    #[error("handshake from a key not in the allow list")]
    UnknownPeer,
    /// Over the handshake budget (token bucket, or the per-source budget under load).
    #[error("handshake rate limited")]
    RateLimited,
    /// A handshake message whose mac1 (or cookie reply whose tag) did not verify: not meant
    /// for this key, or random bytes. Checked before any Diffie-Hellman.
    #[error("bad handshake MAC")]
    BadMac,
}

impl DropReason {
    /// Every reason, in the order of [`Stats::iter`].
    pub const ALL: [DropReason; 10] = [
        DropReason::TooShort,
        DropReason::BadType,
        DropReason::UnknownIndex,
        DropReason::AuthFailed,
        DropReason::Replayed,
        DropReason::TooOld,
        DropReason::HandshakeFailed,
        DropReason::UnknownPeer,
        DropReason::RateLimited,
        DropReason::BadMac,
    ];

    /// The stable snake_case name: `too_short`, `bad_type`, `unknown_index`, `auth_failed`,
    /// `replayed`, `too_old`, `handshake_failed`, `unknown_peer`, `rate_limited`, `bad_mac`.
    pub const fn name(self) -> &'static str {
        match self {
            DropReason::TooShort => "too_short",
            DropReason::BadType => "bad_type",
            DropReason::UnknownIndex => "unknown_index",
            DropReason::AuthFailed => "auth_failed",
            DropReason::Replayed => "replayed",
            DropReason::TooOld => "too_old",
            DropReason::HandshakeFailed => "handshake_failed",
            DropReason::UnknownPeer => "unknown_peer",
            DropReason::RateLimited => "rate_limited",
            DropReason::BadMac => "bad_mac",
        }
    }
}

/// Counters of a [`Responder`](super::Responder) or an [`Initiator`](super::Initiator).
/// The first ten fields count drops and are named like the [`DropReason`]s.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Stats {
    /// Drops: [`DropReason::TooShort`].
    pub too_short: u64,
    /// Drops: [`DropReason::BadType`].
    pub bad_type: u64,
    /// Drops: [`DropReason::UnknownIndex`].
    pub unknown_index: u64,
    /// Drops: [`DropReason::AuthFailed`].
    pub auth_failed: u64,
    /// Drops: [`DropReason::Replayed`].
    pub replayed: u64,
    /// Drops: [`DropReason::TooOld`].
    pub too_old: u64,
    /// Drops: [`DropReason::HandshakeFailed`].
    pub handshake_failed: u64,
    /// Drops: [`DropReason::UnknownPeer`].
    pub unknown_peer: u64,
    /// Drops: [`DropReason::RateLimited`].
    pub rate_limited: u64,
    /// Drops: [`DropReason::BadMac`].
    pub bad_mac: u64,
    /// Handshake initiations sent (client: first sends, retransmissions, cookie resends).
    pub handshake_initiations_sent: u64,
    /// Handshakes completed (gateway: response sent; client: response verified).
    pub handshakes_completed: u64,
    /// Cookie replies sent (gateway under load) or accepted (client).
    pub cookie_replies: u64,
    /// Data datagrams (keepalives included) sealed.
    pub data_sent: u64,
    /// Data datagrams (keepalives included) authenticated and accepted.
    pub data_received: u64,
    /// Keepalives (empty data datagrams) sealed.
    pub keepalives_sent: u64,
    /// Sessions that became current.
    pub sessions_established: u64,
    /// Current sessions that ended: idle, too old, unanswered, or their peer removed.
    pub sessions_expired: u64,
    /// Handshakes started because the gateway fell silent (client, `probe_after`).
    pub probe_handshakes: u64,
}

impl Stats {
    /// Adds one to the counter of `reason`.
    pub fn count(&mut self, reason: DropReason) {
        *self.drop_counter(reason) += 1;
    }

    /// The counter of `reason`.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        match reason {
            DropReason::TooShort => self.too_short,
            DropReason::BadType => self.bad_type,
            DropReason::UnknownIndex => self.unknown_index,
            DropReason::AuthFailed => self.auth_failed,
            DropReason::Replayed => self.replayed,
            DropReason::TooOld => self.too_old,
            DropReason::HandshakeFailed => self.handshake_failed,
            DropReason::UnknownPeer => self.unknown_peer,
            DropReason::RateLimited => self.rate_limited,
            DropReason::BadMac => self.bad_mac,
        }
    }

    /// All drops, whatever the reason.
    pub fn dropped_total(&self) -> u64 {
        DropReason::ALL.iter().map(|r| self.dropped(*r)).sum()
    }

    /// Every counter as (field name, value): the ten drop reasons first (their
    /// [`DropReason::name`]), then the others. Names are stable.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        let drops = DropReason::ALL.map(|r| (r.name(), self.dropped(r)));
        let others = [
            (
                "handshake_initiations_sent",
                self.handshake_initiations_sent,
            ),
            ("handshakes_completed", self.handshakes_completed),
            ("cookie_replies", self.cookie_replies),
            ("data_sent", self.data_sent),
            ("data_received", self.data_received),
            ("keepalives_sent", self.keepalives_sent),
            ("sessions_established", self.sessions_established),
            ("sessions_expired", self.sessions_expired),
            ("probe_handshakes", self.probe_handshakes),
        ];
        drops.into_iter().chain(others)
    }

    fn drop_counter(&mut self, reason: DropReason) -> &mut u64 {
        match reason {
            DropReason::TooShort => &mut self.too_short,
            DropReason::BadType => &mut self.bad_type,
            DropReason::UnknownIndex => &mut self.unknown_index,
            DropReason::AuthFailed => &mut self.auth_failed,
            DropReason::Replayed => &mut self.replayed,
            DropReason::TooOld => &mut self.too_old,
            DropReason::HandshakeFailed => &mut self.handshake_failed,
            DropReason::UnknownPeer => &mut self.unknown_peer,
            DropReason::RateLimited => &mut self.rate_limited,
            DropReason::BadMac => &mut self.bad_mac,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_snake_case_and_counted() {
        let mut stats = Stats::default();
        for (i, r) in DropReason::ALL.iter().enumerate() {
            for _ in 0..=i {
                stats.count(*r);
            }
        }
        let names: Vec<_> = stats.iter().map(|(n, _)| n).collect();
        let mut dedup = names.clone();
        dedup.sort_unstable();
        dedup.dedup();
        assert_eq!(dedup.len(), names.len());
        assert!(
            names
                .iter()
                .all(|n| n.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        );
        for (i, (name, value)) in stats.iter().take(10).enumerate() {
            assert_eq!(name, DropReason::ALL[i].name());
            assert_eq!(value, i as u64 + 1);
        }
        assert_eq!(stats.dropped_total(), 55);
    }
}
