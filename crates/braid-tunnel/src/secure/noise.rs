//! snow's `HandshakeState` built sans-IO: snow's default resolver draws ephemeral keys from the
//! operating system, so it is wrapped in one whose generator hands out exactly the 32 bytes the
//! caller's generator drew for this handshake (its one ephemeral key), and nothing else.

use std::cell::Cell;

use rand::CryptoRng;
use snow::params::{CipherChoice, DHChoice, HashChoice, NoiseParams};
use snow::resolvers::{CryptoResolver, DefaultResolver, RingResolver};
use snow::types::{Cipher, Dh, Hash, Random};
use snow::{Builder, HandshakeState};
use zeroize::Zeroize;

use super::keys::{KEY_LEN, PrivateKey, PublicKey};
use super::wire::NOISE_PARAMS;

/// A Noise IK initiator of `local` towards `remote`, its ephemeral key drawn from `rng`.
pub(crate) fn initiator<R: CryptoRng + ?Sized>(
    local: &PrivateKey,
    remote: &PublicKey,
    prologue: &[u8],
    rng: &mut R,
) -> Result<HandshakeState, snow::Error> {
    builder(rng)?
        .local_private_key(local.as_bytes())?
        .remote_public_key(remote.as_bytes())?
        .prologue(prologue)?
        .build_initiator()
}

/// A Noise IK responder of `local`, its ephemeral key drawn from `rng`.
pub(crate) fn responder<R: CryptoRng + ?Sized>(
    local: &PrivateKey,
    prologue: &[u8],
    rng: &mut R,
) -> Result<HandshakeState, snow::Error> {
    builder(rng)?
        .local_private_key(local.as_bytes())?
        .prologue(prologue)?
        .build_responder()
}

fn builder<R: CryptoRng + ?Sized>(rng: &mut R) -> Result<Builder<'static>, snow::Error> {
    let params: NoiseParams = NOISE_PARAMS.parse()?;
    let mut seed = [0u8; KEY_LEN];
    rng.fill_bytes(&mut seed);
    let resolver = CallerEntropy {
        seed: Cell::new(Some(Entropy(seed))),
    };
    seed.zeroize();
    Ok(Builder::with_resolver(params, Box::new(resolver)))
}

/// Resolves the cipher to ring's (the data path's AEAD: assembly, several times the pure-Rust
/// one's speed), the other primitives to snow's defaults and the generator to [`Entropy`].
struct CallerEntropy {
    seed: Cell<Option<Entropy>>,
}

impl CryptoResolver for CallerEntropy {
    fn resolve_rng(&self) -> Option<Box<dyn Random>> {
        self.seed
            .take()
            .map(|entropy| Box::new(entropy) as Box<dyn Random>)
    }

    fn resolve_dh(&self, choice: &DHChoice) -> Option<Box<dyn Dh>> {
        DefaultResolver.resolve_dh(choice)
    }

    fn resolve_hash(&self, choice: &HashChoice) -> Option<Box<dyn Hash>> {
        DefaultResolver.resolve_hash(choice)
    }

    fn resolve_cipher(&self, choice: &CipherChoice) -> Option<Box<dyn Cipher>> {
        RingResolver
            .resolve_cipher(choice)
            .or_else(|| DefaultResolver.resolve_cipher(choice))
    }
}

/// 32 bytes of the caller's randomness, given out once (the handshake's ephemeral key);
/// any further request fails rather than repeating them.
struct Entropy([u8; KEY_LEN]);

impl Random for Entropy {
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), snow::Error> {
        if dest.len() > KEY_LEN || self.0 == [0; KEY_LEN] {
            return Err(snow::Error::Rng);
        }
        dest.copy_from_slice(&self.0[..dest.len()]);
        self.0.zeroize();
        Ok(())
    }
}

impl Drop for Entropy {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}
