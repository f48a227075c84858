//! Mutual authentication and encrypted datagrams between a tunnel client and a gateway.
//!
//! The client ([`Initiator`]) knows the gateway's static public key; the gateway
//! ([`Responder`]) knows the static public keys of the clients it allows, each with a name.
//! They run Noise IK (`Noise_IK_25519_ChaChaPoly_BLAKE2s`, with snow), one round trip, then
//! exchange data datagrams sealed with the transport keys under explicit counters, so
//! datagrams may arrive reordered over several paths. The design follows WireGuard's (receiver
//! indices, mac1/mac2 and cookies, the replay window, the timers), with Noise IK in place of
//! WireGuard's IKpsk2 and no clock in the handshake.
//!
//! Sans-IO: no sockets, no clock, no random generator inside. Time is a [`braid_core::Instant`]
//! and randomness a `&mut impl rand::CryptoRng`, both passed in.
//!
//! # Datagrams
//!
//! Integers are big-endian. The first byte is the type; every layout is checked before any
//! cryptography, and every bad input is dropped with one [`DropReason`].
//!
//! ```text
//! handshake initiation, client → gateway (≥ 134 bytes)
//!   0  type = 1
//!   1  version = 1                      (bound into the Noise prologue)
//!   2  sender index, 4 bytes            (the client's index of the new session; in the prologue)
//!   6  Noise IK message 1, ≥ 96 bytes   (e, encrypted s, encrypted payload: empty, or the
//!                                        largest UDP payload the client's links carry, 2
//!                                        bytes; more is ignored: room for extensions)
//!  -32 mac1, 16 bytes = MAC(HASH("braid-tunnel mac1" ‖ gateway public key), bytes before it)
//!  -16 mac2, 16 bytes = MAC(cookie, bytes before it), or zeros without a cookie
//!
//! handshake response, gateway → client (≥ 73 bytes)
//!   0  type = 2
//!   1  receiver index, 4 bytes          (the client's sender index)
//!   5  Noise IK message 2, ≥ 52 bytes   (e, encrypted payload = the gateway's index, 4 bytes,
//!                                        then optionally its instance, 8 bytes (0: none), and
//!                                        the largest UDP payload it takes, 2 bytes)
//!  -16 mac1, 16 bytes = MAC(HASH("braid-tunnel mac1" ‖ client public key), bytes before it)
//!
//! cookie reply, gateway under load → client (61 bytes)
//!   0  type = 3
//!   1  receiver index, 4 bytes          (the client's sender index)
//!   5  nonce, 24 bytes
//!  29  XChaCha20-Poly1305(HASH("braid-tunnel cookie" ‖ gateway public key), nonce,
//!        cookie = MAC(secret, source address), ad = the initiation's mac1), 16 + 16 bytes
//!
//! data, both ways (≥ 29 bytes)
//!   0  type = 4
//!   1  receiver index, 4 bytes          (the index the receiver chose for this session)
//!   5  counter, 8 bytes                 (the AEAD nonce; per session and direction, from 0)
//!  13  ChaCha20-Poly1305 ciphertext of the plaintext, + 16-byte tag
//!      (an empty plaintext is a keepalive)
//! ```
//!
//! MAC is keyed BLAKE2s with a 16-byte output and HASH is BLAKE2s-256, as in WireGuard §5.4.
//! The data header is not associated data, and need not be: the index selects the key and the
//! counter is the nonce, so changing either fails authentication. A fixed-size type with
//! trailing bytes is `bad_type`; a shorter one `too_short`.
//!
//! # Sessions and indices
//!
//! Each end chooses a random 32-bit index for every session; the peer writes it as the
//! receiver index, and the receiver finds the session by it alone, never by source address.
//! A client that changes address or port, or sends over several paths at once, keeps its
//! session: tracking where a peer can be reached is the runtime's job, with
//! [`Outcome::Data`] naming the authenticated peer and the index.
//!
//! The gateway keeps no state for a peer until its handshake verifies. Its handshake budget
//! is a token bucket of initiations ([`ResponderConfig::handshakes_per_sec`], burst
//! [`ResponderConfig::handshake_burst`]), charged after mac1 and before any Diffie-Hellman,
//! so random bytes cost one BLAKE2s. When the bucket is empty the gateway is under load and
//! answers initiations without a valid mac2 with a cookie reply (WireGuard §5.4.7); those with
//! one are charged to a bucket of their source (at most [`ResponderConfig::max_sources`]
//! sources are tracked) and to a second bucket of the same size as the first, so at most twice
//! the configured rate of handshakes reach Diffie-Hellman.
//!
//! A verified initiation gives the gateway an unconfirmed session (at most two per peer):
//! it becomes the peer's current one when the first data datagram authenticates on it (the
//! client sends a keepalive as soon as the response arrives). The session it replaces stays
//! for [`ResponderConfig::grace`] so datagrams in flight still open. Because of this key
//! confirmation a replayed initiation cannot displace a working session, and no clock is
//! needed in the handshake.
//!
//! # Timers
//!
//! Both ends: `handle_timeout(now, …)` when `poll_timeout()` passes, then `poll_transmit()`
//! until `None` and `poll_event()` until `None`.
//!
//! - Keepalive: a session that received data and sent nothing back for `keepalive` (10 s)
//!   sends an empty data datagram.
//! - Gateway: a current session expires after `idle_timeout` (180 s) without authenticated
//!   data or at `max_session_age` (240 s); an unconfirmed one `idle_timeout` after it was made.
//! - Client: the initiation is retransmitted (a fresh handshake each time) after
//!   `handshake_retry` (1 s), doubling up to `handshake_retry_max` (30 s), plus up to a quarter
//!   of random jitter, until answered. It re-keys after `rekey_after_time` (120 s) or
//!   `rekey_after_messages`, keeping the old session until the new one is established, and
//!   stops using a session at `max_session_age` (180 s).
//! - Client, lost gateway: the gateway cannot tell a client it lost the session (it cannot
//!   authenticate anything for it), so the client decides. When it sent data and received no
//!   authenticated datagram for `rx_timeout` (15 s = keepalive + 5 s) since the first of those
//!   sends, it declares the session dead ([`Event::Expired`] with
//!   [`ExpiryReason::Unanswered`]) and starts a new handshake. A gateway that restarted is
//!   thus found within `rx_timeout` of the client's next data; a live gateway always answers
//!   within `keepalive`, by its data or its keepalive.

mod initiator;
mod keys;
mod limit;
pub(crate) mod noise;
mod replay;
mod responder;
mod session;
mod stats;
pub mod wire;

use std::fmt;

pub use initiator::{Initiator, InitiatorConfig, InitiatorState};
pub use keys::{KEY_BASE64_LEN, KEY_LEN, KeyError, Keypair, PrivateKey, PublicKey};
pub use limit::COOKIE_LIFETIME;
pub use replay::REPLAY_WINDOW;
pub use responder::{AllowedPeer, Responder, ResponderConfig, Transmit};
pub use session::{REJECT_AFTER_MESSAGES, SealError, Session};
pub use stats::{DropReason, Stats};

/// A peer of a [`Responder`], numbered in the order peers were added (never reused). An
/// [`Initiator`] has one peer, [`PeerId::GATEWAY`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PeerId(pub u32);

impl PeerId {
    /// The gateway, as its client names it.
    pub const GATEWAY: PeerId = PeerId(0);
}

impl fmt::Display for PeerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "peer#{}", self.0)
    }
}

/// What became of one received datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Send these bytes back to the datagram's source: a handshake response or cookie reply
    /// (gateway), or the keepalive that confirms a new session, or an initiation resent with
    /// a cookie (client).
    Reply(Vec<u8>),
    /// An authenticated data datagram. An empty `plaintext` is a keepalive: it already
    /// refreshed the session's timers, and there is nothing to pass on.
    Data {
        /// The authenticated sender.
        peer: PeerId,
        /// Our index of the session it arrived on.
        index: u32,
        /// The decrypted payload.
        plaintext: Vec<u8>,
    },
    /// Dropped, and counted in [`Stats`].
    Drop(DropReason),
}

/// Something the runtime may log or act on, from `poll_event()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A session became the peer's current one: its handshake completed (client) or was
    /// confirmed by the client's first datagram (gateway). Replaces any earlier one.
    Established {
        /// The peer.
        peer: PeerId,
        /// Our index of the session.
        index: u32,
    },
    /// The peer's current session ended; until a new one is established there is none.
    Expired {
        /// The peer.
        peer: PeerId,
        /// Our index of the session.
        index: u32,
        /// Why.
        reason: ExpiryReason,
    },
}

/// Why a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpiryReason {
    /// Nothing authenticated arrived for the idle timeout (gateway).
    Idle,
    /// The session reached its maximum age.
    MaxAge,
    /// Data was sent and nothing authenticated came back for the receive timeout (client).
    Unanswered,
    /// The peer was removed from the allow list (gateway).
    Removed,
}

/// A configuration that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Two allowed peers with the same public key.
    #[error("peer {name:?} has the same public key as peer {existing:?}")]
    DuplicateKey {
        /// The peer being added.
        name: String,
        /// The peer that already has the key.
        existing: String,
    },
    /// Two allowed peers with the same name.
    #[error("peer name {0:?} is used twice")]
    DuplicateName(String),
    /// A rate, burst, size or duration that must be positive is zero.
    #[error("{0} must be greater than zero")]
    Zero(&'static str),
}

#[cfg(test)]
mod tests;
