//! One established session: the two transport keys of a finished handshake, used with explicit
//! counters (snow's `StatelessTransportState`) so datagrams may arrive in any order over any
//! path, and the replay window of the receive direction.

use braid_core::Instant;
use snow::StatelessTransportState;
use thiserror::Error;

use super::keys::PublicKey;
use super::replay::ReplayWindow;
use super::stats::DropReason;
use super::wire::{
    DATA_HEADER_LEN, DATA_MIN, MAX_PLAINTEXT, TAG_LEN, TYPE_DATA, read_u32, read_u64,
};

/// The sender stops using a session at this counter (WireGuard's REJECT_AFTER_MESSAGES:
/// 2^64 − 2^13 − 1, far from the nonce 2^64 − 1 that Noise reserves).
pub const REJECT_AFTER_MESSAGES: u64 = u64::MAX - (1 << 13);

/// Why a datagram could not be sealed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum SealError {
    /// No session to seal with: the client's handshake is not done (one has been started), or
    /// the gateway has no confirmed session with that peer.
    #[error("no session: handshake not complete")]
    NoSession,
    /// The plaintext exceeds [`MAX_PLAINTEXT`](super::wire::MAX_PLAINTEXT).
    #[error("plaintext of {0} bytes exceeds the maximum of 65519")]
    TooLarge(usize),
    /// The session's counters are used up: it must be replaced by a new handshake.
    #[error("session counters exhausted")]
    Exhausted,
}

/// An established session with one peer.
pub struct Session {
    local_index: u32,
    remote_index: u32,
    remote: PublicKey,
    transport: StatelessTransportState,
    next_counter: u64,
    replay: ReplayWindow,
    /// When the handshake finished.
    pub(crate) created: Instant,
    /// When a datagram last authenticated on this session (`created` before any).
    pub(crate) last_received: Instant,
    /// When a keepalive is owed: data arrived and nothing has been sent back since.
    pub(crate) keepalive_due: Option<Instant>,
}

impl Session {
    pub(crate) fn new(
        local_index: u32,
        remote_index: u32,
        remote: PublicKey,
        transport: StatelessTransportState,
        now: Instant,
    ) -> Self {
        Session {
            local_index,
            remote_index,
            remote,
            transport,
            next_counter: 0,
            replay: ReplayWindow::new(),
            created: now,
            last_received: now,
            keepalive_due: None,
        }
    }

    /// The index the peer puts in datagrams to us: the key of this session at our end.
    pub fn local_index(&self) -> u32 {
        self.local_index
    }

    /// The index we put in datagrams to the peer.
    pub fn remote_index(&self) -> u32 {
        self.remote_index
    }

    /// The peer's authenticated static key.
    pub fn remote_static(&self) -> PublicKey {
        self.remote
    }

    /// Datagrams sealed so far (the next counter).
    pub fn sent(&self) -> u64 {
        self.next_counter
    }

    /// When the handshake that made this session finished.
    pub fn created(&self) -> Instant {
        self.created
    }

    /// Writes one data datagram carrying `plaintext` into `out` (cleared first), with the next
    /// counter, and returns that counter. An empty plaintext makes a keepalive.
    pub fn seal(&mut self, plaintext: &[u8], out: &mut Vec<u8>) -> Result<u64, SealError> {
        if plaintext.len() > MAX_PLAINTEXT {
            return Err(SealError::TooLarge(plaintext.len()));
        }
        let counter = self.next_counter;
        if counter >= REJECT_AFTER_MESSAGES {
            return Err(SealError::Exhausted);
        }
        out.clear();
        out.push(TYPE_DATA);
        out.extend_from_slice(&self.remote_index.to_be_bytes());
        out.extend_from_slice(&counter.to_be_bytes());
        out.resize(DATA_HEADER_LEN + plaintext.len() + TAG_LEN, 0);
        match self
            .transport
            .write_message(counter, plaintext, &mut out[DATA_HEADER_LEN..])
        {
            Ok(_) => {
                self.next_counter += 1;
                Ok(counter)
            }
            Err(_) => {
                out.clear();
                Err(SealError::Exhausted)
            }
        }
    }

    /// Authenticates and decrypts one data datagram addressed to this session, then checks
    /// its counter against the replay window.
    pub fn open(&mut self, datagram: &[u8]) -> Result<Vec<u8>, DropReason> {
        let (index, counter) = data_header(datagram)?;
        if index != self.local_index {
            return Err(DropReason::UnknownIndex);
        }
        let ciphertext = &datagram[DATA_HEADER_LEN..];
        let mut plaintext = vec![0u8; ciphertext.len() - TAG_LEN];
        if self
            .transport
            .read_message(counter, ciphertext, &mut plaintext)
            .is_err()
        {
            return Err(DropReason::AuthFailed);
        }
        // Checked after authentication, so forged counters cannot move the window.
        self.replay.accept(counter)?;
        Ok(plaintext)
    }
}

/// The receiver index and counter of a data datagram, after its length and type checks.
pub(crate) fn data_header(datagram: &[u8]) -> Result<(u32, u64), DropReason> {
    match datagram.first() {
        None => return Err(DropReason::TooShort),
        Some(&TYPE_DATA) => {}
        Some(_) => return Err(DropReason::BadType),
    }
    if datagram.len() < DATA_MIN {
        return Err(DropReason::TooShort);
    }
    match (read_u32(datagram, 1), read_u64(datagram, 5)) {
        (Some(index), Some(counter)) => Ok((index, counter)),
        _ => Err(DropReason::TooShort),
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("local_index", &self.local_index)
            .field("remote_index", &self.remote_index)
            .field("remote", &self.remote)
            .field("sent", &self.next_counter)
            .field("created", &self.created)
            .finish_non_exhaustive()
    }
}
