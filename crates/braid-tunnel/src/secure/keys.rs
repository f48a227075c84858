//! Curve25519 static keys: generation from the caller's random generator, base64 text form
//! (the same 44-character form as WireGuard keys), and zeroization of private keys.

use std::fmt;
use std::str::FromStr;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rand::CryptoRng;
use snow::params::DHChoice;
use snow::resolvers::{CryptoResolver, DefaultResolver};
use thiserror::Error;
use zeroize::Zeroize;

/// Bytes of a Curve25519 key, public or private.
pub const KEY_LEN: usize = 32;
/// Characters of a key in padded base64.
pub const KEY_BASE64_LEN: usize = 44;

/// A key given as text that is not 32 bytes of base64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum KeyError {
    /// Not 44 characters long (after trimming surrounding whitespace).
    #[error("key must be 32 bytes of base64 ({KEY_BASE64_LEN} characters), got {0} characters")]
    Length(usize),
    /// 44 characters, but not valid padded base64 of 32 bytes.
    #[error("key must be 32 bytes of base64 ({KEY_BASE64_LEN} characters): not valid base64")]
    Base64,
}

/// A Curve25519 public key: a gateway's identity, or an entry of its allow list.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PublicKey([u8; KEY_LEN]);

impl PublicKey {
    /// The key of these bytes.
    pub const fn from_bytes(bytes: [u8; KEY_LEN]) -> Self {
        PublicKey(bytes)
    }

    /// The raw bytes.
    pub const fn as_bytes(&self) -> &[u8; KEY_LEN] {
        &self.0
    }

    /// Padded standard base64, 44 characters.
    pub fn to_base64(&self) -> String {
        STANDARD.encode(self.0)
    }

    /// Parses 44 characters of base64 (surrounding whitespace ignored).
    pub fn from_base64(text: &str) -> Result<Self, KeyError> {
        let mut bytes = decode_key(text)?;
        let key = PublicKey(bytes);
        bytes.zeroize();
        Ok(key)
    }
}

impl FromStr for PublicKey {
    type Err = KeyError;
    fn from_str(s: &str) -> Result<Self, KeyError> {
        PublicKey::from_base64(s)
    }
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_base64())
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({})", self.to_base64())
    }
}

/// A Curve25519 private key. Zeroized when dropped; `Debug` does not print it, and there is no
/// `Display`: [`PrivateKey::to_base64`] is the one explicit way out.
#[derive(Clone, PartialEq, Eq)]
pub struct PrivateKey([u8; KEY_LEN]);

impl PrivateKey {
    /// The key of these bytes (used as given; X25519 clamps when it multiplies).
    pub const fn from_bytes(bytes: [u8; KEY_LEN]) -> Self {
        PrivateKey(bytes)
    }

    /// The raw bytes.
    pub const fn as_bytes(&self) -> &[u8; KEY_LEN] {
        &self.0
    }

    /// Padded standard base64, 44 characters. The caller owns the secret it now holds.
    pub fn to_base64(&self) -> String {
        STANDARD.encode(self.0)
    }

    /// Parses 44 characters of base64 (surrounding whitespace ignored).
    pub fn from_base64(text: &str) -> Result<Self, KeyError> {
        let mut bytes = decode_key(text)?;
        let key = PrivateKey(bytes);
        bytes.zeroize();
        Ok(key)
    }

    /// The public key of this private key (X25519 base-point multiplication).
    pub fn public_key(&self) -> PublicKey {
        // The default resolver always provides Curve25519 with the `use-curve25519` feature.
        let Some(mut dh) = DefaultResolver.resolve_dh(&DHChoice::Curve25519) else {
            unreachable!("snow is built with use-curve25519")
        };
        dh.set(&self.0);
        let mut public = [0u8; KEY_LEN];
        public.copy_from_slice(dh.pubkey());
        PublicKey(public)
    }
}

impl Drop for PrivateKey {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl FromStr for PrivateKey {
    type Err = KeyError;
    fn from_str(s: &str) -> Result<Self, KeyError> {
        PrivateKey::from_base64(s)
    }
}

impl fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PrivateKey(<redacted>)")
    }
}

/// A static key pair. The private half is zeroized when the pair is dropped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Keypair {
    /// The secret half.
    pub private: PrivateKey,
    /// The public half, derived from `private`.
    pub public: PublicKey,
}

impl Keypair {
    /// A fresh pair from the caller's cryptographic random generator. The private key is
    /// clamped (RFC 7748 §5), as `wg genkey` does, so the text form is interchangeable.
    pub fn generate<R: CryptoRng + ?Sized>(rng: &mut R) -> Self {
        let mut bytes = [0u8; KEY_LEN];
        rng.fill_bytes(&mut bytes);
        // RFC 7748 §5: clear the three low bits, clear the top bit, set the second-highest.
        bytes[0] &= 248;
        bytes[31] &= 127;
        bytes[31] |= 64;
        let keypair = Keypair::from_private(PrivateKey(bytes));
        bytes.zeroize();
        keypair
    }

    /// The pair of a known private key.
    pub fn from_private(private: PrivateKey) -> Self {
        let public = private.public_key();
        Keypair { private, public }
    }
}

fn decode_key(text: &str) -> Result<[u8; KEY_LEN], KeyError> {
    let text = text.trim();
    let chars = text.chars().count();
    if chars != KEY_BASE64_LEN {
        return Err(KeyError::Length(chars));
    }
    let mut bytes = [0u8; KEY_LEN];
    match STANDARD.decode_slice(text, &mut bytes) {
        Ok(KEY_LEN) => Ok(bytes),
        _ => {
            bytes.zeroize();
            Err(KeyError::Base64)
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;

    #[test]
    fn base64_round_trip_and_public_derivation() {
        let mut rng = StdRng::seed_from_u64(1);
        let pair = Keypair::generate(&mut rng);
        let text = pair.private.to_base64();
        assert_eq!(text.len(), KEY_BASE64_LEN);
        let private: PrivateKey = format!("  {text}\n").parse().unwrap();
        assert_eq!(private, pair.private);
        assert_eq!(private.public_key(), pair.public);
        let public: PublicKey = pair.public.to_string().parse().unwrap();
        assert_eq!(public, pair.public);
        assert!(!format!("{:?}", pair).contains(&text));
    }

    #[test]
    fn bad_text_gives_one_line_errors() {
        let err = "c2hvcnQga2V5IQ==".parse::<PublicKey>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "key must be 32 bytes of base64 (44 characters), got 16 characters"
        );
        let err = "!".repeat(44).parse::<PrivateKey>().unwrap_err();
        assert_eq!(err, KeyError::Base64);
        // 44 characters of valid base64 of 33 bytes would need 45+: a 31-byte key padded to 44.
        let short = STANDARD.encode([7u8; 31]);
        assert_eq!(short.len(), 44);
        assert_eq!(short.parse::<PublicKey>(), Err(KeyError::Base64));
    }

    #[test]
    fn rfc7748_public_key_vector() {
        // RFC 7748 §6.1, Alice.
        let private = hex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a");
        let public = hex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a");
        assert_eq!(
            PrivateKey::from_bytes(private).public_key(),
            PublicKey::from_bytes(public)
        );
    }

    fn hex(s: &str) -> [u8; 32] {
        let mut out = [0u8; 32];
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap();
        }
        out
    }
}
