//! The gateway's side: the allow list, the sessions by index, and the handshake budget.
//!
//! Driving it: [`Responder::handle`] for every received datagram (send a `Reply` back to its
//! source, pass `Data` up), [`Responder::seal`] to send to a peer, and after either and when
//! [`Responder::poll_timeout`] passes, [`Responder::handle_timeout`], then
//! [`Responder::poll_transmit`] and [`Responder::poll_event`] until `None`.

use std::collections::{BTreeMap, VecDeque};
use std::hash::Hash;
use std::time::Duration;

use braid_core::Instant;
use rand::CryptoRng;

use super::keys::{KEY_LEN, Keypair, PublicKey};
use super::limit::{Cookies, SourceLimiter, TokenBucket};
use super::session::{SealError, Session, data_header};
use super::stats::{DropReason, Stats};
use super::wire::{
    INIT_MIN, INSTANCE_LEN, MAC_LEN, MAX_DATAGRAM_LEN, RESPONSE_MIN, RESPONSE_NOISE_MIN, TYPE_DATA,
    TYPE_INIT, TYPE_RESPONSE, VERSION, mac, mac1_key, prologue, read_max_datagram, read_u32,
    verify_mac,
};
use super::{ConfigError, Event, ExpiryReason, Outcome, PeerId, noise};

/// Unconfirmed sessions kept per peer: a retransmitted initiation that overtakes the first
/// must not make the one the client completes disappear.
const MAX_UNCONFIRMED: usize = 2;

/// How a [`Responder`] budgets handshakes and ages sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponderConfig {
    /// Initiations a second that reach Diffie-Hellman (the token bucket's rate).
    pub handshakes_per_sec: u32,
    /// Initiations that may reach Diffie-Hellman at once (the bucket's size).
    pub handshake_burst: u32,
    /// Under load, initiations a second one source (proven by its cookie) may make.
    pub per_source_per_sec: u32,
    /// Under load, the burst of one source.
    pub per_source_burst: u32,
    /// Most sources tracked under load; a new source beyond them is rate limited.
    pub max_sources: usize,
    /// A current session with nothing authenticated for this long expires.
    pub idle_timeout: Duration,
    /// A session this old expires whatever its traffic (clients re-key before: 120 s).
    pub max_session_age: Duration,
    /// How long a replaced session still opens datagrams.
    pub grace: Duration,
    /// Sent nothing for this long after receiving data: send a keepalive.
    pub keepalive: Duration,
}

impl Default for ResponderConfig {
    /// 100 handshakes/s, burst 20; under load 5/s per source, burst 5, 4096 sources;
    /// idle 180 s, maximum age 240 s, grace 10 s, keepalive 10 s.
    fn default() -> Self {
        ResponderConfig {
            handshakes_per_sec: 100,
            handshake_burst: 20,
            per_source_per_sec: 5,
            per_source_burst: 5,
            max_sources: 4096,
            idle_timeout: Duration::from_secs(180),
            max_session_age: Duration::from_secs(240),
            grace: Duration::from_secs(10),
            keepalive: Duration::from_secs(10),
        }
    }
}

impl ResponderConfig {
    /// Checks that bursts, table sizes and timeouts are positive.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let checks = [
            (self.handshake_burst == 0, "handshake_burst"),
            (self.per_source_burst == 0, "per_source_burst"),
            (self.max_sources == 0, "max_sources"),
            (self.idle_timeout.is_zero(), "idle_timeout"),
            (self.max_session_age.is_zero(), "max_session_age"),
            (self.keepalive.is_zero(), "keepalive"),
        ];
        match checks.iter().find(|(bad, _)| *bad) {
            Some((_, field)) => Err(ConfigError::Zero(field)),
            None => Ok(()),
        }
    }
}

/// A client the gateway accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedPeer {
    /// A name for logs and metrics, unique in the list.
    pub name: String,
    /// Its static public key.
    pub public: PublicKey,
}

/// A datagram the gateway sends of its own accord (a keepalive), to wherever `peer` was last
/// heard from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transmit {
    /// The peer.
    pub peer: PeerId,
    /// The datagram.
    pub datagram: Vec<u8>,
}

/// The gateway's end of the secure layer: see the [module docs](super).
pub struct Responder {
    keypair: Keypair,
    config: ResponderConfig,
    /// This run of the gateway, sent in every handshake response (0: none).
    instance: u64,
    /// The largest datagram the gateway takes, sent in every handshake response (0: none).
    max_datagram: u16,
    mac1_key: [u8; 32],
    peers: BTreeMap<PeerId, PeerState>,
    by_key: BTreeMap<PublicKey, PeerId>,
    next_peer: u32,
    sessions: BTreeMap<u32, Slot>,
    bucket: TokenBucket,
    cookie_bucket: TokenBucket,
    sources: SourceLimiter,
    cookies: Cookies,
    next_timeout: Option<Instant>,
    transmits: VecDeque<Transmit>,
    events: VecDeque<Event>,
    stats: Stats,
}

struct PeerState {
    peer: AllowedPeer,
    current: Option<u32>,
    previous: Option<(u32, Instant)>,
    unconfirmed: Vec<u32>,
}

struct Slot {
    peer: PeerId,
    session: Session,
    /// The largest datagram the client announced in the session's initiation.
    max_datagram: Option<u16>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Current,
    Previous(Instant),
    Unconfirmed,
}

impl Responder {
    /// A gateway with static key `keypair` accepting `peers`.
    pub fn new(
        keypair: Keypair,
        peers: impl IntoIterator<Item = AllowedPeer>,
        config: ResponderConfig,
    ) -> Result<Self, ConfigError> {
        config.validate()?;
        let mut responder = Responder {
            mac1_key: mac1_key(&keypair.public),
            cookies: Cookies::new(&keypair.public),
            keypair,
            config,
            instance: 0,
            max_datagram: 0,
            peers: BTreeMap::new(),
            by_key: BTreeMap::new(),
            next_peer: 0,
            sessions: BTreeMap::new(),
            bucket: TokenBucket::new(
                config.handshakes_per_sec,
                config.handshake_burst,
                Instant::ZERO,
            ),
            cookie_bucket: TokenBucket::new(
                config.handshakes_per_sec,
                config.handshake_burst,
                Instant::ZERO,
            ),
            sources: SourceLimiter::new(
                config.per_source_per_sec,
                config.per_source_burst,
                config.max_sources,
            ),
            next_timeout: None,
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            stats: Stats::default(),
        };
        for peer in peers {
            responder.add_peer(peer)?;
        }
        Ok(responder)
    }

    /// Sets the number that names this run of the gateway (random at start, never 0). Every
    /// handshake response carries it, encrypted and authenticated: a client whose new session
    /// names another instance than its connection's knows the gateway restarted and lost the
    /// connection, and starts a new one at once instead of waiting for its receive timeout.
    pub fn set_instance(&mut self, instance: u64) {
        self.instance = instance;
    }

    /// Announces in every handshake response the largest UDP payload the gateway's links
    /// carry (0: none), so that clients send no larger datagram.
    pub fn set_max_datagram(&mut self, bytes: u16) {
        self.max_datagram = bytes;
    }

    /// The largest UDP payload the client announced in the handshake of session `index`
    /// (ours), if it announced one.
    pub fn peer_max_datagram(&self, index: u32) -> Option<u16> {
        self.sessions.get(&index).and_then(|s| s.max_datagram)
    }

    /// The gateway's static public key (what clients are configured with).
    pub fn public_key(&self) -> PublicKey {
        self.keypair.public
    }

    /// The configuration.
    pub fn config(&self) -> &ResponderConfig {
        &self.config
    }

    /// Allows one more client.
    pub fn add_peer(&mut self, peer: AllowedPeer) -> Result<PeerId, ConfigError> {
        if let Some(existing) = self.by_key.get(&peer.public) {
            return Err(ConfigError::DuplicateKey {
                name: peer.name,
                existing: self.peers[existing].peer.name.clone(),
            });
        }
        if self.peers.values().any(|p| p.peer.name == peer.name) {
            return Err(ConfigError::DuplicateName(peer.name));
        }
        let id = PeerId(self.next_peer);
        self.next_peer += 1;
        self.by_key.insert(peer.public, id);
        self.peers.insert(
            id,
            PeerState {
                peer,
                current: None,
                previous: None,
                unconfirmed: Vec::new(),
            },
        );
        Ok(id)
    }

    /// Removes a client and all its sessions; its datagrams are `unknown_index` from now on.
    /// Returns whether it was there.
    pub fn remove_peer(&mut self, id: PeerId) -> bool {
        let Some(state) = self.peers.remove(&id) else {
            return false;
        };
        self.by_key.remove(&state.peer.public);
        if let Some(index) = state.current {
            self.expire(id, index, ExpiryReason::Removed);
        }
        let others = state.previous.map(|(i, _)| i).into_iter();
        for index in others.chain(state.unconfirmed) {
            self.sessions.remove(&index);
        }
        true
    }

    /// The allowed peer of `id`.
    pub fn peer(&self, id: PeerId) -> Option<&AllowedPeer> {
        self.peers.get(&id).map(|p| &p.peer)
    }

    /// The peer with this public key.
    pub fn find_peer(&self, public: &PublicKey) -> Option<PeerId> {
        self.by_key.get(public).copied()
    }

    /// Our index of the peer's current session, if it has one.
    pub fn current_index(&self, id: PeerId) -> Option<u32> {
        self.peers.get(&id)?.current
    }

    /// The session of our index `index` (current, previous or unconfirmed).
    pub fn session(&self, index: u32) -> Option<&Session> {
        self.sessions.get(&index).map(|s| &s.session)
    }

    /// Sessions held, of every role: at most four per peer (current, previous, two
    /// unconfirmed).
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// Sessions waiting for the client's first datagram: at most two per peer.
    pub fn unconfirmed_count(&self) -> usize {
        self.peers.values().map(|p| p.unconfirmed.len()).sum()
    }

    /// Sources tracked by the under-load limiter: at most `max_sources`.
    pub fn tracked_sources(&self) -> usize {
        self.sources.len()
    }

    /// The counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Handles one received datagram from `src`, an identifier of its source address (any
    /// `Hash`, e.g. the `SocketAddr`): it only binds cookies under load, and sessions are
    /// found by index, never by source.
    pub fn handle<S: Hash + ?Sized, R: CryptoRng + ?Sized>(
        &mut self,
        now: Instant,
        src: &S,
        datagram: &[u8],
        rng: &mut R,
    ) -> Outcome {
        let outcome = match datagram.first() {
            None => Outcome::Drop(DropReason::TooShort),
            Some(&TYPE_INIT) => self.handle_init(now, src, datagram, rng),
            Some(&TYPE_DATA) => match self.handle_data(now, datagram) {
                Ok(outcome) => outcome,
                Err(reason) => Outcome::Drop(reason),
            },
            Some(_) => Outcome::Drop(DropReason::BadType),
        };
        if let Outcome::Drop(reason) = outcome {
            self.stats.count(reason);
        }
        outcome
    }

    /// Seals `plaintext` for `peer` with its current session into `out` (cleared first) and
    /// returns the counter used. An empty plaintext is a keepalive.
    pub fn seal(
        &mut self,
        now: Instant,
        peer: PeerId,
        plaintext: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<u64, SealError> {
        let index = self
            .peers
            .get(&peer)
            .and_then(|p| p.current)
            .ok_or(SealError::NoSession)?;
        if self
            .deadline(index, Role::Current)
            .is_some_and(|d| d <= now)
        {
            return Err(SealError::NoSession);
        }
        let slot = self.sessions.get_mut(&index).ok_or(SealError::NoSession)?;
        let counter = slot.session.seal(plaintext, out)?;
        slot.session.keepalive_due = None;
        self.stats.data_sent += 1;
        if plaintext.is_empty() {
            self.stats.keepalives_sent += 1;
        }
        Ok(counter)
    }

    /// Expires sessions and queues keepalives that are due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        let ids: Vec<PeerId> = self.peers.keys().copied().collect();
        for id in ids {
            self.peer_timeout(now, id);
        }
        self.next_timeout = self
            .sessions
            .keys()
            .filter_map(|index| {
                let role = self.role(*index)?;
                let keepalive = match role {
                    Role::Current => self.sessions.get(index)?.session.keepalive_due,
                    _ => None,
                };
                let end = self.deadline(*index, role)?;
                Some(keepalive.map_or(end, |k| k.min(end)))
            })
            .min();
    }

    /// The earliest time [`Responder::handle_timeout`] has something to do (it may find
    /// nothing: the deadline only moves earlier between calls).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_timeout
    }

    /// The next keepalive to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    fn handle_init<S: Hash + ?Sized, R: CryptoRng + ?Sized>(
        &mut self,
        now: Instant,
        src: &S,
        datagram: &[u8],
        rng: &mut R,
    ) -> Outcome {
        if datagram.len() < INIT_MIN {
            return Outcome::Drop(DropReason::TooShort);
        }
        if datagram[1] != VERSION {
            return Outcome::Drop(DropReason::BadType);
        }
        let mac1_at = datagram.len() - 2 * MAC_LEN;
        let mac2_at = datagram.len() - MAC_LEN;
        let mac1 = &datagram[mac1_at..mac2_at];
        // WireGuard §5.4.4: mac1 before anything costly.
        if !verify_mac(&self.mac1_key, &datagram[..mac1_at], mac1) {
            return Outcome::Drop(DropReason::BadMac);
        }
        let Some(sender_index) = read_u32(datagram, 2) else {
            return Outcome::Drop(DropReason::TooShort);
        };
        if !self.bucket.try_take(now) {
            // Under load (WireGuard §5.4.7): only a source that proves it receives at its
            // address goes on, within its own budget.
            let msg = &datagram[..mac2_at];
            let Some(cookie) = self.cookies.check_mac2(now, src, msg, &datagram[mac2_at..]) else {
                self.stats.cookie_replies += 1;
                let reply = self.cookies.reply(now, src, sender_index, mac1, rng);
                return Outcome::Reply(reply);
            };
            let mut key = [0u8; 8];
            key.copy_from_slice(&cookie[..8]);
            if !self.sources.try_take(now, u64::from_le_bytes(key))
                || !self.cookie_bucket.try_take(now)
            {
                return Outcome::Drop(DropReason::RateLimited);
            }
        }
        match self.accept_init(now, sender_index, &datagram[6..mac1_at], rng) {
            Ok(reply) => Outcome::Reply(reply),
            Err(reason) => Outcome::Drop(reason),
        }
    }

    /// Noise IK message 1 → an unconfirmed session and message 2.
    fn accept_init<R: CryptoRng + ?Sized>(
        &mut self,
        now: Instant,
        sender_index: u32,
        noise_msg: &[u8],
        rng: &mut R,
    ) -> Result<Vec<u8>, DropReason> {
        let failed = |_| DropReason::HandshakeFailed;
        let prologue = prologue(VERSION, sender_index);
        let mut hs = noise::responder(&self.keypair.private, &prologue, rng).map_err(failed)?;
        let mut payload = vec![0u8; noise_msg.len()];
        let len = hs.read_message(noise_msg, &mut payload).map_err(failed)?;
        let client_max = read_max_datagram(&payload[..len], 0);
        let remote = hs
            .get_remote_static()
            .and_then(|k| <[u8; KEY_LEN]>::try_from(k).ok())
            .map(PublicKey::from_bytes)
            .ok_or(DropReason::HandshakeFailed)?;
        let peer = *self.by_key.get(&remote).ok_or(DropReason::UnknownPeer)?;

        let index = self.new_index(rng);
        // Payload: our index, then this run's instance when set (0 when only the size
        // follows), then the largest datagram we take when set.
        let mut payload = [0u8; 4 + INSTANCE_LEN + MAX_DATAGRAM_LEN];
        payload[..4].copy_from_slice(&index.to_be_bytes());
        payload[4..4 + INSTANCE_LEN].copy_from_slice(&self.instance.to_be_bytes());
        payload[4 + INSTANCE_LEN..].copy_from_slice(&self.max_datagram.to_be_bytes());
        let extra = if self.max_datagram != 0 {
            INSTANCE_LEN + MAX_DATAGRAM_LEN
        } else if self.instance != 0 {
            INSTANCE_LEN
        } else {
            0
        };
        let mut reply = vec![0u8; RESPONSE_MIN + extra];
        reply[0] = TYPE_RESPONSE;
        reply[1..5].copy_from_slice(&sender_index.to_be_bytes());
        let noise_end = 5 + RESPONSE_NOISE_MIN + extra;
        hs.write_message(&payload[..4 + extra], &mut reply[5..noise_end])
            .map_err(failed)?;
        let tag = mac(&mac1_key(&remote), &reply[..noise_end]);
        reply[noise_end..].copy_from_slice(&tag);
        let transport = hs.into_stateless_transport_mode().map_err(failed)?;

        let session = Session::new(index, sender_index, remote, transport, now);
        self.sessions.insert(
            index,
            Slot {
                peer,
                session,
                max_datagram: client_max,
            },
        );
        let Some(state) = self.peers.get_mut(&peer) else {
            unreachable!("by_key and peers agree")
        };
        state.unconfirmed.push(index);
        if state.unconfirmed.len() > MAX_UNCONFIRMED {
            let oldest = state.unconfirmed.remove(0);
            self.sessions.remove(&oldest);
        }
        self.schedule(now + self.config.idle_timeout);
        self.stats.handshakes_completed += 1;
        Ok(reply)
    }

    fn handle_data(&mut self, now: Instant, datagram: &[u8]) -> Result<Outcome, DropReason> {
        let (index, _) = data_header(datagram)?;
        let role = self.role(index).ok_or(DropReason::UnknownIndex)?;
        // Expired but not yet swept by handle_timeout: already gone.
        if self.deadline(index, role).is_none_or(|d| d <= now) {
            return Err(DropReason::UnknownIndex);
        }
        let keepalive = self.config.keepalive;
        let slot = self
            .sessions
            .get_mut(&index)
            .ok_or(DropReason::UnknownIndex)?;
        let plaintext = slot.session.open(datagram)?;
        let peer = slot.peer;
        slot.session.last_received = now;
        let mut due = None;
        if !plaintext.is_empty() && slot.session.keepalive_due.is_none() {
            due = Some(now + keepalive);
            slot.session.keepalive_due = due;
        }
        if role == Role::Unconfirmed {
            self.confirm(now, peer, index);
        }
        if let Some(due) = due {
            self.schedule(due);
        }
        self.stats.data_received += 1;
        Ok(Outcome::Data {
            peer,
            index,
            plaintext,
        })
    }

    /// The client's first datagram on an unconfirmed session: it becomes current, the
    /// current one previous (for the grace period), the others go.
    fn confirm(&mut self, now: Instant, peer: PeerId, index: u32) {
        let Some(state) = self.peers.get_mut(&peer) else {
            return;
        };
        let mut gone: Vec<u32> = state
            .unconfirmed
            .drain(..)
            .filter(|i| *i != index)
            .collect();
        gone.extend(state.previous.take().map(|(i, _)| i));
        let until = now + self.config.grace;
        state.previous = state.current.replace(index).map(|i| (i, until));
        let replaced = state.previous.is_some();
        for i in gone {
            self.sessions.remove(&i);
        }
        if replaced {
            self.schedule(until);
        }
        self.schedule(now + self.config.idle_timeout);
        self.stats.sessions_established += 1;
        self.events.push_back(Event::Established { peer, index });
    }

    fn peer_timeout(&mut self, now: Instant, id: PeerId) {
        let Some(state) = self.peers.get(&id) else {
            return;
        };
        let (current, previous, unconfirmed) =
            (state.current, state.previous, state.unconfirmed.clone());
        if let Some((index, _)) = previous.filter(|(_, until)| *until <= now) {
            self.sessions.remove(&index);
            if let Some(s) = self.peers.get_mut(&id) {
                s.previous = None;
            }
        }
        for index in unconfirmed {
            if self
                .deadline(index, Role::Unconfirmed)
                .is_none_or(|d| d <= now)
            {
                self.sessions.remove(&index);
                if let Some(s) = self.peers.get_mut(&id) {
                    s.unconfirmed.retain(|i| *i != index);
                }
            }
        }
        let Some(index) = current else {
            return;
        };
        let Some(slot) = self.sessions.get_mut(&index) else {
            return;
        };
        let s = &slot.session;
        if s.created + self.config.max_session_age <= now {
            self.expire(id, index, ExpiryReason::MaxAge);
        } else if s.last_received + self.config.idle_timeout <= now {
            self.expire(id, index, ExpiryReason::Idle);
        } else if slot.session.keepalive_due.is_some_and(|t| t <= now) {
            let mut datagram = Vec::new();
            slot.session.keepalive_due = None;
            if slot.session.seal(&[], &mut datagram).is_ok() {
                self.stats.data_sent += 1;
                self.stats.keepalives_sent += 1;
                self.transmits.push_back(Transmit { peer: id, datagram });
            }
        }
    }

    /// Ends the peer's current session.
    fn expire(&mut self, peer: PeerId, index: u32, reason: ExpiryReason) {
        self.sessions.remove(&index);
        if let Some(state) = self.peers.get_mut(&peer) {
            state.current = None;
        }
        self.stats.sessions_expired += 1;
        self.events.push_back(Event::Expired {
            peer,
            index,
            reason,
        });
    }

    fn role(&self, index: u32) -> Option<Role> {
        let state = self.peers.get(&self.sessions.get(&index)?.peer)?;
        if state.current == Some(index) {
            return Some(Role::Current);
        }
        if let Some((_, until)) = state.previous.filter(|(i, _)| *i == index) {
            return Some(Role::Previous(until));
        }
        state
            .unconfirmed
            .contains(&index)
            .then_some(Role::Unconfirmed)
    }

    /// When the session of `index` in `role` stops being usable.
    fn deadline(&self, index: u32, role: Role) -> Option<Instant> {
        let s = &self.sessions.get(&index)?.session;
        let aged = s.created + self.config.max_session_age;
        Some(match role {
            Role::Current => aged.min(s.last_received + self.config.idle_timeout),
            Role::Previous(until) => aged.min(until),
            Role::Unconfirmed => aged.min(s.created + self.config.idle_timeout),
        })
    }

    fn schedule(&mut self, at: Instant) {
        self.next_timeout = Some(self.next_timeout.map_or(at, |t| t.min(at)));
    }

    /// A random index no session uses; terminates whatever the generator returns.
    fn new_index<R: CryptoRng + ?Sized>(&self, rng: &mut R) -> u32 {
        for _ in 0..16 {
            let index = rng.next_u32();
            if !self.sessions.contains_key(&index) {
                return index;
            }
        }
        let mut index = rng.next_u32();
        while self.sessions.contains_key(&index) {
            index = index.wrapping_add(1);
        }
        index
    }
}

impl std::fmt::Debug for Responder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Responder")
            .field("public", &self.keypair.public)
            .field("peers", &self.peers.len())
            .field("sessions", &self.sessions.len())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}
