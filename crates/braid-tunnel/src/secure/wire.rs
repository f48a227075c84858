//! Datagram layouts and the cheap MACs around the handshake (see the module docs of
//! [`secure`](super) for the format). Everything here is pure and cannot panic on any input.

use std::hash::Hasher;

use blake2::digest::consts::U16;
use blake2::digest::{Digest, KeyInit, Mac};
use blake2::{Blake2s256, Blake2sMac};
use chacha20poly1305::aead::AeadInPlace;
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

use super::keys::PublicKey;

/// Type byte of a handshake initiation (client → gateway).
pub const TYPE_INIT: u8 = 1;
/// Type byte of a handshake response (gateway → client).
pub const TYPE_RESPONSE: u8 = 2;
/// Type byte of a cookie reply (gateway under load → client).
pub const TYPE_COOKIE: u8 = 3;
/// Type byte of a transport data datagram (both ways; empty plaintext = keepalive).
pub const TYPE_DATA: u8 = 4;
/// Protocol version carried by initiations and bound into the Noise prologue.
pub const VERSION: u8 = 1;

/// The Noise protocol name.
pub const NOISE_PARAMS: &str = "Noise_IK_25519_ChaChaPoly_BLAKE2s";
/// Bytes of an AEAD tag (ChaCha20-Poly1305) and of mac1, mac2 and a cookie.
pub const TAG_LEN: usize = 16;
/// Bytes of mac1, mac2 and a cookie.
pub const MAC_LEN: usize = 16;

/// Noise IK message 1 with an empty payload: e (32), encrypted s (32 + 16), payload tag (16).
pub const INIT_NOISE_MIN: usize = 32 + 32 + TAG_LEN + TAG_LEN;
/// Smallest initiation: type, version, sender index, Noise message, mac1, mac2.
pub const INIT_MIN: usize = 1 + 1 + 4 + INIT_NOISE_MIN + 2 * MAC_LEN;
/// Noise IK message 2 carrying the gateway's index: e (32), payload (4) and its tag (16).
pub const RESPONSE_NOISE_MIN: usize = 32 + 4 + TAG_LEN;
/// Smallest response: type, receiver index, Noise message, mac1.
pub const RESPONSE_MIN: usize = 1 + 4 + RESPONSE_NOISE_MIN + MAC_LEN;
/// Bytes of the gateway instance that may follow the index in a response's payload.
pub const INSTANCE_LEN: usize = 8;
/// Bytes of the largest datagram an end takes ([`read_max_datagram`]): an initiation's payload,
/// and a response's after the instance.
pub const MAX_DATAGRAM_LEN: usize = 2;

/// The largest UDP payload the sender's links carry, announced at `at` in a handshake
/// payload (big-endian u16); `None` when absent or 0 (not announced).
pub fn read_max_datagram(payload: &[u8], at: usize) -> Option<u16> {
    payload
        .get(at..at + MAX_DATAGRAM_LEN)
        .map(|b| u16::from_be_bytes([b[0], b[1]]))
        .filter(|&n| n != 0)
}
/// Bytes of an XChaCha20-Poly1305 nonce.
pub const COOKIE_NONCE_LEN: usize = 24;
/// A cookie reply: type, receiver index, nonce, encrypted cookie and its tag.
pub const COOKIE_REPLY_LEN: usize = 1 + 4 + COOKIE_NONCE_LEN + MAC_LEN + TAG_LEN;
/// Bytes before a data datagram's ciphertext: type, receiver index, counter.
pub const DATA_HEADER_LEN: usize = 1 + 4 + 8;
/// Smallest data datagram: the header and the tag of an empty plaintext (a keepalive).
pub const DATA_MIN: usize = DATA_HEADER_LEN + TAG_LEN;
/// Largest plaintext of one data datagram (Noise messages are at most 65 535 bytes).
pub const MAX_PLAINTEXT: usize = 65_535 - TAG_LEN;

const PROLOGUE_LABEL: &[u8] = b"braid-tunnel";
const LABEL_MAC1: &[u8] = b"braid-tunnel mac1";
const LABEL_COOKIE: &[u8] = b"braid-tunnel cookie";

/// The Noise prologue of a handshake: label, version and the initiator's index, so neither
/// can be changed in flight without the handshake failing.
pub(crate) fn prologue(version: u8, initiator_index: u32) -> [u8; PROLOGUE_LABEL.len() + 5] {
    let mut p = [0u8; PROLOGUE_LABEL.len() + 5];
    p[..PROLOGUE_LABEL.len()].copy_from_slice(PROLOGUE_LABEL);
    p[PROLOGUE_LABEL.len()] = version;
    p[PROLOGUE_LABEL.len() + 1..].copy_from_slice(&initiator_index.to_be_bytes());
    p
}

/// The mac1 key of messages sent to the owner of `public` (WireGuard §5.4.4:
/// HASH(LABEL_MAC1 ‖ S_pub)).
pub(crate) fn mac1_key(public: &PublicKey) -> [u8; 32] {
    labelled_hash(LABEL_MAC1, public)
}

/// The key that encrypts cookies sent to initiators of `public` (WireGuard §5.4.7).
pub(crate) fn cookie_key(public: &PublicKey) -> [u8; 32] {
    labelled_hash(LABEL_COOKIE, public)
}

/// Keyed BLAKE2s with a 16-byte output (WireGuard's MAC).
pub(crate) fn mac(key: &[u8], msg: &[u8]) -> [u8; MAC_LEN] {
    let mut m = new_mac(key);
    Mac::update(&mut m, msg);
    m.finalize().into_bytes().into()
}

/// Constant-time check of `tag` = MAC(key, msg).
pub(crate) fn verify_mac(key: &[u8], msg: &[u8], tag: &[u8]) -> bool {
    let mut m = new_mac(key);
    Mac::update(&mut m, msg);
    m.verify_slice(tag).is_ok()
}

/// A keyed BLAKE2s fed through [`Hasher`], so any `Hash` source address can be MACed.
pub(crate) struct MacHasher(Blake2sMac<U16>);

impl MacHasher {
    pub(crate) fn new(key: &[u8]) -> Self {
        MacHasher(new_mac(key))
    }

    pub(crate) fn finish_mac(self) -> [u8; MAC_LEN] {
        self.0.finalize().into_bytes().into()
    }
}

impl Hasher for MacHasher {
    fn write(&mut self, bytes: &[u8]) {
        Mac::update(&mut self.0, bytes);
    }

    /// Unused: [`MacHasher::finish_mac`] gives the whole MAC.
    fn finish(&self) -> u64 {
        0
    }
}

/// Encrypts a cookie for the initiator (WireGuard §5.4.7: XAEAD(key, nonce, cookie, mac1)).
pub(crate) fn seal_cookie(
    key: &[u8; 32],
    nonce: &[u8; COOKIE_NONCE_LEN],
    cookie: &[u8; MAC_LEN],
    mac1: &[u8],
) -> [u8; MAC_LEN + TAG_LEN] {
    let aead = XChaCha20Poly1305::new(key.into());
    let mut out = [0u8; MAC_LEN + TAG_LEN];
    out[..MAC_LEN].copy_from_slice(cookie);
    // Encryption of a 16-byte buffer cannot fail (the only error is a too-long message).
    if let Ok(tag) =
        aead.encrypt_in_place_detached(XNonce::from_slice(nonce), mac1, &mut out[..MAC_LEN])
    {
        out[MAC_LEN..].copy_from_slice(&tag);
    }
    out
}

/// Decrypts a cookie reply's cookie, or `None` if its tag does not verify.
pub(crate) fn open_cookie(
    key: &[u8; 32],
    nonce: &[u8],
    sealed: &[u8],
    mac1: &[u8],
) -> Option<[u8; MAC_LEN]> {
    if nonce.len() != COOKIE_NONCE_LEN || sealed.len() != MAC_LEN + TAG_LEN {
        return None;
    }
    let aead = XChaCha20Poly1305::new(key.into());
    let mut cookie = [0u8; MAC_LEN];
    cookie.copy_from_slice(&sealed[..MAC_LEN]);
    aead.decrypt_in_place_detached(
        XNonce::from_slice(nonce),
        mac1,
        &mut cookie,
        sealed[MAC_LEN..].into(),
    )
    .ok()?;
    Some(cookie)
}

/// The big-endian u32 at `at`, if the slice is long enough.
pub(crate) fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes(b.try_into().ok()?))
}

/// The big-endian u64 at `at`, if the slice is long enough.
pub(crate) fn read_u64(bytes: &[u8], at: usize) -> Option<u64> {
    let b = bytes.get(at..at.checked_add(8)?)?;
    Some(u64::from_be_bytes(b.try_into().ok()?))
}

fn labelled_hash(label: &[u8], public: &PublicKey) -> [u8; 32] {
    let mut h = Blake2s256::new();
    Digest::update(&mut h, label);
    Digest::update(&mut h, public.as_bytes());
    h.finalize().into()
}

fn new_mac(key: &[u8]) -> Blake2sMac<U16> {
    // Keys here are 16 or 32 bytes; BLAKE2s accepts keys up to 32 bytes.
    match <Blake2sMac<U16> as KeyInit>::new_from_slice(key) {
        Ok(m) => m,
        Err(_) => unreachable!("MAC keys are at most 32 bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(INIT_MIN, 134);
        assert_eq!(RESPONSE_MIN, 73);
        assert_eq!(COOKIE_REPLY_LEN, 61);
        assert_eq!(DATA_MIN, 29);
    }

    #[test]
    fn mac_verifies_and_cookie_round_trips() {
        let key = [3u8; 32];
        let tag = mac(&key, b"hello");
        assert!(verify_mac(&key, b"hello", &tag));
        assert!(!verify_mac(&key, b"hellp", &tag));
        assert!(!verify_mac(&key, b"hello", &tag[..15]));
        let nonce = [9u8; 24];
        let sealed = seal_cookie(&key, &nonce, &[1; 16], b"mac1");
        assert_eq!(open_cookie(&key, &nonce, &sealed, b"mac1"), Some([1; 16]));
        assert_eq!(open_cookie(&key, &nonce, &sealed, b"mac2"), None);
        assert_eq!(read_u32(&[0, 0, 1], 0), None);
        assert_eq!(read_u64(&[0; 8], 1), None);
        assert_eq!(read_u32(&[1, 2, 3, 4], usize::MAX), None);
    }
}
