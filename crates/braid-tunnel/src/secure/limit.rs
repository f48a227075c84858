//! The gateway's handshake budget, its only state before a peer authenticates: a token
//! bucket of initiations, and under load (bucket empty) WireGuard's cookies (§5.4.7) with a
//! bounded table of per-source buckets.

use std::collections::BTreeMap;
use std::hash::Hash;
use std::time::Duration;

use braid_core::Instant;
use rand::CryptoRng;
use zeroize::Zeroize;

use super::keys::PublicKey;
use super::wire::{
    COOKIE_NONCE_LEN, COOKIE_REPLY_LEN, MAC_LEN, MacHasher, TYPE_COOKIE, cookie_key, seal_cookie,
    verify_mac,
};

/// How long a cookie secret, and so a cookie, is valid (WireGuard's COOKIE_SECRET_MAX_AGE).
pub const COOKIE_LIFETIME: Duration = Duration::from_secs(120);

const MICROS: u64 = 1_000_000;

/// `per_sec` tokens a second, at most `burst` saved up. Integer arithmetic in micro-tokens.
#[derive(Debug, Clone)]
pub(crate) struct TokenBucket {
    per_sec: u64,
    capacity: u64,
    level: u64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket.
    pub(crate) fn new(per_sec: u32, burst: u32, now: Instant) -> Self {
        let capacity = u64::from(burst) * MICROS;
        TokenBucket {
            per_sec: u64::from(per_sec),
            capacity,
            level: capacity,
            last: now,
        }
    }

    /// Takes one token if there is one.
    pub(crate) fn try_take(&mut self, now: Instant) -> bool {
        self.refill(now);
        if self.level < MICROS {
            return false;
        }
        self.level -= MICROS;
        true
    }

    /// Whether the bucket has refilled completely by `now` (its state carries no information).
    pub(crate) fn is_full(&self, now: Instant) -> bool {
        let mut b = self.clone();
        b.refill(now);
        b.level >= b.capacity
    }

    fn refill(&mut self, now: Instant) {
        if now <= self.last {
            return;
        }
        let micros = u64::try_from((now - self.last).as_micros()).unwrap_or(u64::MAX);
        self.level = self
            .level
            .saturating_add(micros.saturating_mul(self.per_sec))
            .min(self.capacity);
        self.last = now;
    }
}

/// One bucket per cookie-proven source, at most `max` of them; full buckets are forgotten
/// (at most once a second, when the table is full).
#[derive(Debug)]
pub(crate) struct SourceLimiter {
    per_sec: u32,
    burst: u32,
    max: usize,
    buckets: BTreeMap<u64, TokenBucket>,
    last_purge: Option<Instant>,
}

impl SourceLimiter {
    pub(crate) fn new(per_sec: u32, burst: u32, max: usize) -> Self {
        SourceLimiter {
            per_sec,
            burst,
            max,
            buckets: BTreeMap::new(),
            last_purge: None,
        }
    }

    pub(crate) fn try_take(&mut self, now: Instant, source: u64) -> bool {
        if let Some(bucket) = self.buckets.get_mut(&source) {
            return bucket.try_take(now);
        }
        if self.buckets.len() >= self.max {
            let due = self
                .last_purge
                .is_none_or(|t| now.saturating_since(t) >= Duration::from_secs(1));
            if !due {
                return false;
            }
            self.last_purge = Some(now);
            self.buckets.retain(|_, b| !b.is_full(now));
            if self.buckets.len() >= self.max {
                return false;
            }
        }
        let mut bucket = TokenBucket::new(self.per_sec, self.burst, now);
        let took = bucket.try_take(now);
        self.buckets.insert(source, bucket);
        took
    }

    pub(crate) fn len(&self) -> usize {
        self.buckets.len()
    }
}

/// The gateway's cookie secret and the key that encrypts cookies for initiators.
pub(crate) struct Cookies {
    secret: [u8; 32],
    born: Option<Instant>,
    key: [u8; 32],
}

impl Cookies {
    pub(crate) fn new(gateway: &PublicKey) -> Self {
        Cookies {
            secret: [0; 32],
            born: None,
            key: cookie_key(gateway),
        }
    }

    /// The cookie of `src` under the current secret, if the secret is still valid.
    pub(crate) fn cookie<S: Hash + ?Sized>(&self, now: Instant, src: &S) -> Option<[u8; MAC_LEN]> {
        let born = self.born?;
        if now.saturating_since(born) >= COOKIE_LIFETIME {
            return None;
        }
        let mut h = MacHasher::new(&self.secret);
        src.hash(&mut h);
        Some(h.finish_mac())
    }

    /// Whether `mac2` = MAC(cookie(src), msg), and the cookie if so.
    pub(crate) fn check_mac2<S: Hash + ?Sized>(
        &self,
        now: Instant,
        src: &S,
        msg: &[u8],
        mac2: &[u8],
    ) -> Option<[u8; MAC_LEN]> {
        let cookie = self.cookie(now, src)?;
        verify_mac(&cookie, msg, mac2).then_some(cookie)
    }

    /// A cookie reply to the initiation of `receiver_index` whose mac1 was `mac1`, rotating
    /// the secret first if it is missing or old.
    pub(crate) fn reply<S: Hash + ?Sized, R: CryptoRng + ?Sized>(
        &mut self,
        now: Instant,
        src: &S,
        receiver_index: u32,
        mac1: &[u8],
        rng: &mut R,
    ) -> Vec<u8> {
        let cookie = match self.cookie(now, src) {
            Some(c) => c,
            None => {
                rng.fill_bytes(&mut self.secret);
                self.born = Some(now);
                let mut h = MacHasher::new(&self.secret);
                src.hash(&mut h);
                h.finish_mac()
            }
        };
        let mut nonce = [0u8; COOKIE_NONCE_LEN];
        rng.fill_bytes(&mut nonce);
        let mut out = Vec::with_capacity(COOKIE_REPLY_LEN);
        out.push(TYPE_COOKIE);
        out.extend_from_slice(&receiver_index.to_be_bytes());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&seal_cookie(&self.key, &nonce, &cookie, mac1));
        out
    }
}

impl Drop for Cookies {
    fn drop(&mut self) {
        self.secret.zeroize();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(m: u64) -> Instant {
        Instant::from_millis(m)
    }

    #[test]
    fn bucket_bursts_then_refills_at_rate() {
        let mut b = TokenBucket::new(100, 20, ms(0));
        assert_eq!((0..50).filter(|_| b.try_take(ms(0))).count(), 20);
        // 100/s: one token every 10 ms.
        assert!(!b.try_take(ms(9)));
        assert!(b.try_take(ms(10)));
        assert!(!b.try_take(ms(10)));
        assert_eq!((0..50).filter(|_| b.try_take(ms(1000))).count(), 20);
        assert!(!b.is_full(ms(1000)));
        assert!(b.is_full(ms(1200)));
        // A clock that goes back takes nothing and gives nothing.
        assert!(!b.try_take(ms(500)));
    }

    #[test]
    fn source_table_is_bounded_and_forgets_full_buckets() {
        let mut l = SourceLimiter::new(1, 2, 3);
        for s in 0..3 {
            assert!(l.try_take(ms(0), s));
        }
        assert!(!l.try_take(ms(0), 99));
        assert_eq!(l.len(), 3);
        assert!(l.try_take(ms(0), 1));
        assert!(!l.try_take(ms(0), 1));
        // After 2 s every bucket is full again: the purge makes room.
        assert!(l.try_take(ms(2000), 99));
        assert_eq!(l.len(), 1);
    }
}
