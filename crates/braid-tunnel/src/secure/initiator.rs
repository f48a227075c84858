//! The client's side: one gateway, one handshake at a time, the current session and the one
//! it replaced (for the grace period).
//!
//! Driving it: [`Initiator::start`] once (send what it returns), [`Initiator::handle`] for
//! every received datagram (send a `Reply` back, pass `Data` up), [`Initiator::seal`] to send,
//! and after any of them and when [`Initiator::poll_timeout`] passes,
//! [`Initiator::handle_timeout`], then [`Initiator::poll_transmit`] and
//! [`Initiator::poll_event`] until `None`.

use std::collections::VecDeque;
use std::time::Duration;

use braid_core::Instant;
use rand::CryptoRng;
use snow::HandshakeState;

use super::keys::{Keypair, PublicKey};
use super::limit::COOKIE_LIFETIME;
use super::session::{SealError, Session, data_header};
use super::stats::{DropReason, Stats};
use super::wire::{
    COOKIE_NONCE_LEN, COOKIE_REPLY_LEN, INIT_MIN, INIT_NOISE_MIN, INSTANCE_LEN, MAC_LEN,
    RESPONSE_MIN, TYPE_COOKIE, TYPE_DATA, TYPE_INIT, TYPE_RESPONSE, VERSION, cookie_key, mac,
    mac1_key, open_cookie, prologue, read_max_datagram, read_u32, verify_mac,
};
use super::{ConfigError, Event, ExpiryReason, Outcome, PeerId, noise};

/// How an [`Initiator`] retries, re-keys and watches its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitiatorConfig {
    /// First wait for a handshake response before a new initiation.
    pub handshake_retry: Duration,
    /// The wait doubles after each unanswered initiation, up to this.
    pub handshake_retry_max: Duration,
    /// A session this old is replaced by a new handshake (when used, or always if
    /// `always_on`); it stays in use until the new one is established.
    pub rekey_after_time: Duration,
    /// A session that sealed this many datagrams is replaced by a new handshake.
    pub rekey_after_messages: u64,
    /// A session this old is no longer used (below the gateway's maximum age).
    pub max_session_age: Duration,
    /// Sent nothing for this long after receiving data: send a keepalive.
    pub keepalive: Duration,
    /// Data sent and nothing authenticated received for this long: the session is dead
    /// (gateway restarted, or every path down) and a new handshake starts.
    pub rx_timeout: Duration,
    /// How long a replaced session still opens datagrams.
    pub grace: Duration,
    /// Data sent and nothing authenticated received for this long: start a handshake beside
    /// the current session (which stays in use). A live gateway answers it (an early re-key);
    /// one that restarted answers with another instance ([`Initiator::gateway_instance`]), so
    /// the client learns of the restart well before `rx_timeout`. `None`: no such probe.
    pub probe_after: Option<Duration>,
    /// Keep a session at all times once started: re-key on age even when idle, and
    /// re-handshake as soon as a session ends. Otherwise a handshake starts only when
    /// [`Initiator::seal`] finds no session.
    pub always_on: bool,
}

impl Default for InitiatorConfig {
    /// Retry 1 s doubling to 30 s; re-key after 120 s or 2^60 datagrams; maximum age 180 s;
    /// keepalive 10 s; receive timeout 15 s; grace 10 s; always on.
    fn default() -> Self {
        InitiatorConfig {
            handshake_retry: Duration::from_secs(1),
            handshake_retry_max: Duration::from_secs(30),
            rekey_after_time: Duration::from_secs(120),
            rekey_after_messages: 1 << 60,
            max_session_age: Duration::from_secs(180),
            keepalive: Duration::from_secs(10),
            rx_timeout: Duration::from_secs(15),
            grace: Duration::from_secs(10),
            probe_after: None,
            always_on: true,
        }
    }
}

impl InitiatorConfig {
    /// Checks that every duration and limit is positive.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let checks = [
            (self.handshake_retry.is_zero(), "handshake_retry"),
            (self.handshake_retry_max.is_zero(), "handshake_retry_max"),
            (self.rekey_after_time.is_zero(), "rekey_after_time"),
            (self.rekey_after_messages == 0, "rekey_after_messages"),
            (self.max_session_age.is_zero(), "max_session_age"),
            (self.keepalive.is_zero(), "keepalive"),
            (self.rx_timeout.is_zero(), "rx_timeout"),
            (self.probe_after.is_some_and(|d| d.is_zero()), "probe_after"),
        ];
        match checks.iter().find(|(bad, _)| *bad) {
            Some((_, field)) => Err(ConfigError::Zero(field)),
            None => Ok(()),
        }
    }
}

/// Where the client stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitiatorState {
    /// Not started, or (not `always_on`) its session ended and nothing was sent since.
    Idle,
    /// No session; a handshake is under way or about to start.
    Handshaking,
    /// A session is up (a re-key may be under way).
    Established,
}

/// The client's end of the secure layer: see the [module docs](super).
pub struct Initiator {
    keypair: Keypair,
    gateway: PublicKey,
    config: InitiatorConfig,
    mac1_key: [u8; 32],
    response_mac1_key: [u8; 32],
    cookie_key: [u8; 32],
    current: Option<Session>,
    previous: Option<(Session, Instant)>,
    pending: Option<Pending>,
    handshake_wanted: Option<Instant>,
    active: bool,
    cookie: Option<([u8; MAC_LEN], Instant)>,
    unanswered_since: Option<Instant>,
    /// The gateway instance named by the last handshake response (`None`: it named none).
    gateway_instance: Option<u64>,
    /// The largest datagram our links carry, announced in initiations (0: not announced).
    max_datagram: u16,
    /// The largest datagram the gateway takes, from the last handshake response.
    gateway_max_datagram: Option<u16>,
    transmits: VecDeque<Vec<u8>>,
    events: VecDeque<Event>,
    stats: Stats,
}

struct Pending {
    hs: HandshakeState,
    index: u32,
    message: Vec<u8>,
    attempt: u32,
    retry_at: Instant,
    cookie_resent: bool,
}

impl Initiator {
    /// A client with static key `keypair` for the gateway whose static key is `gateway`.
    pub fn new(
        keypair: Keypair,
        gateway: PublicKey,
        config: InitiatorConfig,
    ) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Initiator {
            mac1_key: mac1_key(&gateway),
            response_mac1_key: mac1_key(&keypair.public),
            cookie_key: cookie_key(&gateway),
            keypair,
            gateway,
            config,
            current: None,
            previous: None,
            pending: None,
            handshake_wanted: None,
            active: false,
            cookie: None,
            unanswered_since: None,
            gateway_instance: None,
            max_datagram: 0,
            gateway_max_datagram: None,
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            stats: Stats::default(),
        })
    }

    /// Starts a handshake (or restarts it, resetting the retry backoff) and returns the
    /// initiation to send.
    pub fn start<R: CryptoRng + ?Sized>(&mut self, now: Instant, rng: &mut R) -> Vec<u8> {
        self.active = true;
        self.handshake_wanted = None;
        self.initiate(now, 0, rng)
    }

    /// Handles one datagram received from the gateway, over any path.
    pub fn handle(&mut self, now: Instant, datagram: &[u8]) -> Outcome {
        let result = match datagram.first() {
            None => Err(DropReason::TooShort),
            Some(&TYPE_RESPONSE) => self.handle_response(now, datagram),
            Some(&TYPE_COOKIE) => self.handle_cookie(now, datagram),
            Some(&TYPE_DATA) => self.handle_data(now, datagram),
            // A client is never sent initiations.
            Some(_) => Err(DropReason::BadType),
        };
        result.unwrap_or_else(|reason| {
            self.stats.count(reason);
            Outcome::Drop(reason)
        })
    }

    /// Seals `plaintext` with the current session into `out` (cleared first) and returns the
    /// counter used. An empty plaintext is a keepalive. Without a session, a handshake is
    /// requested (from the next [`Initiator::handle_timeout`]) and `NoSession` returned.
    pub fn seal(
        &mut self,
        now: Instant,
        plaintext: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<u64, SealError> {
        self.active = true;
        let max_age = self.config.max_session_age;
        let Some(session) = self.current.as_mut().filter(|s| s.created + max_age > now) else {
            self.want_handshake(now);
            return Err(SealError::NoSession);
        };
        let counter = match session.seal(plaintext, out) {
            Ok(counter) => counter,
            Err(e) => {
                self.want_handshake(now);
                return Err(e);
            }
        };
        session.keepalive_due = None;
        let rekey = session.created + self.config.rekey_after_time <= now
            || counter.saturating_add(1) >= self.config.rekey_after_messages;
        if !plaintext.is_empty() {
            self.unanswered_since.get_or_insert(now);
        }
        if rekey {
            self.want_handshake(now);
        }
        self.stats.data_sent += 1;
        if plaintext.is_empty() {
            self.stats.keepalives_sent += 1;
        }
        Ok(counter)
    }

    /// Runs the timers due at `now`: session expiry, the receive timeout, keepalives,
    /// re-keying and handshake retransmission. Queues datagrams for
    /// [`Initiator::poll_transmit`].
    pub fn handle_timeout<R: CryptoRng + ?Sized>(&mut self, now: Instant, rng: &mut R) {
        if self
            .previous
            .as_ref()
            .is_some_and(|(_, until)| *until <= now)
        {
            self.previous = None;
        }
        if let Some(s) = &self.current {
            let index = s.local_index();
            if s.created + self.config.max_session_age <= now {
                self.current = None;
                self.expired(index, ExpiryReason::MaxAge);
            } else if self
                .unanswered_since
                .is_some_and(|t| t + self.config.rx_timeout <= now)
            {
                // The gateway lost the session, or no path works: the module docs' rule.
                let dead = self.current.take();
                self.previous = dead.map(|s| (s, now + self.config.grace));
                self.expired(index, ExpiryReason::Unanswered);
                self.want_handshake(now);
            } else if self.probe_due().is_some_and(|t| t <= now) {
                // Silence: ask the gateway for a new session beside the current one.
                self.stats.probe_handshakes += 1;
                self.want_handshake(now);
            }
        }
        let always_on = self.config.always_on && self.active;
        if let Some(s) = self.current.as_mut() {
            if s.keepalive_due.is_some_and(|t| t <= now) {
                let mut datagram = Vec::new();
                s.keepalive_due = None;
                if s.seal(&[], &mut datagram).is_ok() {
                    self.stats.data_sent += 1;
                    self.stats.keepalives_sent += 1;
                    self.transmits.push_back(datagram);
                }
            }
            if always_on && s.created + self.config.rekey_after_time <= now {
                self.want_handshake(now);
            }
        } else if always_on {
            self.want_handshake(now);
        }
        if let Some(p) = &self.pending {
            if p.retry_at <= now {
                let attempt = p.attempt.saturating_add(1);
                let message = self.initiate(now, attempt, rng);
                self.transmits.push_back(message);
            }
        } else if self.handshake_wanted.is_some_and(|t| t <= now) {
            self.handshake_wanted = None;
            let message = self.initiate(now, 0, rng);
            self.transmits.push_back(message);
        }
    }

    /// The earliest time [`Initiator::handle_timeout`] has something to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut t = [
            self.handshake_wanted,
            self.pending.as_ref().map(|p| p.retry_at),
            self.previous.as_ref().map(|(_, until)| *until),
        ]
        .into_iter()
        .flatten()
        .min();
        if let Some(s) = &self.current {
            let mut times = vec![s.created + self.config.max_session_age];
            times.extend(s.keepalive_due);
            times.extend(self.unanswered_since.map(|u| u + self.config.rx_timeout));
            times.extend(self.probe_due());
            let rekeying = self.pending.is_some() || self.handshake_wanted.is_some();
            if self.config.always_on && self.active && !rekeying {
                times.push(s.created + self.config.rekey_after_time);
            }
            t = times.into_iter().chain(t).min();
        }
        t
    }

    /// The next datagram to send (retransmitted initiations, keepalives).
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        self.transmits.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Where the client stands.
    pub fn state(&self) -> InitiatorState {
        if self.current.is_some() {
            InitiatorState::Established
        } else if self.pending.is_some() || self.handshake_wanted.is_some() {
            InitiatorState::Handshaking
        } else {
            InitiatorState::Idle
        }
    }

    /// Whether a session is up to seal with.
    pub fn has_session(&self) -> bool {
        self.current.is_some()
    }

    /// Our index of the current session (what the gateway writes in datagrams to us).
    pub fn index(&self) -> Option<u32> {
        self.current.as_ref().map(Session::local_index)
    }

    /// The current session.
    pub fn session(&self) -> Option<&Session> {
        self.current.as_ref()
    }

    /// The gateway's static key.
    pub fn gateway(&self) -> PublicKey {
        self.gateway
    }

    /// Our static public key (what the gateway's allow list must hold).
    pub fn public_key(&self) -> PublicKey {
        self.keypair.public
    }

    /// The counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// No link can reach the gateway now (the runtime knows it from the link layer): its
    /// silence says nothing about the gateway, so the receive timeout and the probe start over
    /// from the next data sealed. Without this, every link down for `rx_timeout` would end a
    /// session, and the connection with it, that the gateway still holds.
    pub fn links_down(&mut self) {
        self.unanswered_since = None;
    }

    /// The gateway instance named in the last handshake response, if it named one (see
    /// [`crate::secure::Responder::set_instance`]).
    pub fn gateway_instance(&self) -> Option<u64> {
        self.gateway_instance
    }

    /// Announces in the next initiations the largest UDP payload our links carry (0: none),
    /// so that the gateway sends no larger datagram.
    pub fn set_max_datagram(&mut self, bytes: u16) {
        self.max_datagram = bytes;
    }

    /// The largest UDP payload the gateway announced in the last handshake response
    /// (`None`: it announced none).
    pub fn gateway_max_datagram(&self) -> Option<u16> {
        self.gateway_max_datagram
    }

    /// When a silent gateway gets a probing handshake: only with a session, unanswered data,
    /// and no handshake under way.
    fn probe_due(&self) -> Option<Instant> {
        let after = self.config.probe_after?;
        if self.current.is_none() || self.pending.is_some() || self.handshake_wanted.is_some() {
            return None;
        }
        self.unanswered_since.map(|t| t + after)
    }

    fn want_handshake(&mut self, now: Instant) {
        if self.pending.is_none() && self.handshake_wanted.is_none() {
            self.handshake_wanted = Some(now);
        }
    }

    fn expired(&mut self, index: u32, reason: ExpiryReason) {
        self.unanswered_since = None;
        self.stats.sessions_expired += 1;
        self.events.push_back(Event::Expired {
            peer: PeerId::GATEWAY,
            index,
            reason,
        });
    }

    /// A fresh initiation (new ephemeral key and index), replacing any pending one.
    fn initiate<R: CryptoRng + ?Sized>(
        &mut self,
        now: Instant,
        attempt: u32,
        rng: &mut R,
    ) -> Vec<u8> {
        let in_use = |i: u32| {
            self.current.as_ref().is_some_and(|s| s.local_index() == i)
                || self
                    .previous
                    .as_ref()
                    .is_some_and(|(s, _)| s.local_index() == i)
        };
        let mut index = rng.next_u32();
        while in_use(index) {
            index = index.wrapping_add(1);
        }
        let retry_at = now + self.backoff(attempt, rng);
        let prologue = prologue(VERSION, index);
        // Payload: the largest datagram our links carry, when known.
        let announce = self.max_datagram.to_be_bytes();
        let payload: &[u8] = if self.max_datagram == 0 {
            &[]
        } else {
            &announce
        };
        let mut message = vec![0u8; INIT_MIN + payload.len()];
        message[0] = TYPE_INIT;
        message[1] = VERSION;
        message[2..6].copy_from_slice(&index.to_be_bytes());
        let noise_end = 6 + INIT_NOISE_MIN + payload.len();
        let written = noise::initiator(&self.keypair.private, &self.gateway, &prologue, rng)
            .and_then(|mut hs| {
                hs.write_message(payload, &mut message[6..noise_end])?;
                Ok(hs)
            });
        let Ok(hs) = written else {
            // Cannot happen with valid keys; try again at the retry time.
            self.pending = None;
            self.handshake_wanted = Some(retry_at);
            return Vec::new();
        };
        let tag = mac(&self.mac1_key, &message[..noise_end]);
        message[noise_end..noise_end + MAC_LEN].copy_from_slice(&tag);
        self.write_mac2(now, &mut message);
        self.pending = Some(Pending {
            hs,
            index,
            message: message.clone(),
            attempt,
            retry_at,
            cookie_resent: false,
        });
        self.stats.handshake_initiations_sent += 1;
        message
    }

    /// mac2 from a cookie younger than its lifetime, else zeros (WireGuard §5.4.4).
    fn write_mac2(&self, now: Instant, message: &mut [u8]) {
        let at = message.len() - MAC_LEN;
        let tag = match self.cookie {
            Some((cookie, received)) if now.saturating_since(received) < COOKIE_LIFETIME => {
                mac(&cookie, &message[..at])
            }
            _ => [0; MAC_LEN],
        };
        message[at..].copy_from_slice(&tag);
    }

    /// `handshake_retry` · 2^attempt, capped, plus up to a quarter of jitter.
    fn backoff<R: CryptoRng + ?Sized>(&self, attempt: u32, rng: &mut R) -> Duration {
        let base = self
            .config
            .handshake_retry
            .saturating_mul(1u32 << attempt.min(20))
            .min(self.config.handshake_retry_max);
        let jitter = (base.as_micros() / 4 * u128::from(rng.next_u32())) >> 32;
        base + Duration::from_micros(u64::try_from(jitter).unwrap_or(u64::MAX))
    }

    fn handle_response(&mut self, now: Instant, datagram: &[u8]) -> Result<Outcome, DropReason> {
        if datagram.len() < RESPONSE_MIN {
            return Err(DropReason::TooShort);
        }
        let receiver = read_u32(datagram, 1).ok_or(DropReason::TooShort)?;
        let pending = self
            .pending
            .as_mut()
            .filter(|p| p.index == receiver)
            .ok_or(DropReason::UnknownIndex)?;
        let mac_at = datagram.len() - MAC_LEN;
        if !verify_mac(
            &self.response_mac1_key,
            &datagram[..mac_at],
            &datagram[mac_at..],
        ) {
            return Err(DropReason::BadMac);
        }
        let noise_msg = &datagram[5..mac_at];
        let mut payload = vec![0u8; noise_msg.len()];
        let len = pending
            .hs
            .read_message(noise_msg, &mut payload)
            .map_err(|_| DropReason::HandshakeFailed)?;
        let remote_index = read_u32(&payload[..len], 0).ok_or(DropReason::HandshakeFailed)?;
        // The gateway's instance, when it sends one (older gateways send the index alone).
        let instance = payload[..len]
            .get(4..4 + INSTANCE_LEN)
            .and_then(|b| <[u8; INSTANCE_LEN]>::try_from(b).ok())
            .map(u64::from_be_bytes)
            .filter(|&i| i != 0);
        let gateway_max = read_max_datagram(&payload[..len], 4 + INSTANCE_LEN);
        let Some(pending) = self.pending.take() else {
            return Err(DropReason::UnknownIndex);
        };
        let transport = match pending.hs.into_stateless_transport_mode() {
            Ok(t) => t,
            Err(_) => {
                self.want_handshake(now);
                return Err(DropReason::HandshakeFailed);
            }
        };
        let mut session = Session::new(pending.index, remote_index, self.gateway, transport, now);
        // The keepalive that confirms the session at the gateway.
        let mut keepalive = Vec::new();
        let sealed = session.seal(&[], &mut keepalive).is_ok();
        if let Some(old) = self.current.replace(session) {
            self.previous = Some((old, now + self.config.grace));
        }
        self.unanswered_since = None;
        self.handshake_wanted = None;
        self.gateway_instance = instance;
        self.gateway_max_datagram = gateway_max;
        self.stats.handshakes_completed += 1;
        self.stats.sessions_established += 1;
        self.events.push_back(Event::Established {
            peer: PeerId::GATEWAY,
            index: pending.index,
        });
        if !sealed {
            return Err(DropReason::HandshakeFailed);
        }
        self.stats.data_sent += 1;
        self.stats.keepalives_sent += 1;
        Ok(Outcome::Reply(keepalive))
    }

    fn handle_cookie(&mut self, now: Instant, datagram: &[u8]) -> Result<Outcome, DropReason> {
        if datagram.len() < COOKIE_REPLY_LEN {
            return Err(DropReason::TooShort);
        }
        if datagram.len() > COOKIE_REPLY_LEN {
            return Err(DropReason::BadType);
        }
        let receiver = read_u32(datagram, 1).ok_or(DropReason::TooShort)?;
        let pending = self
            .pending
            .as_ref()
            .filter(|p| p.index == receiver)
            .ok_or(DropReason::UnknownIndex)?;
        let mac1_at = pending.message.len() - 2 * MAC_LEN;
        let mac1 = &pending.message[mac1_at..mac1_at + MAC_LEN];
        let nonce_end = 5 + COOKIE_NONCE_LEN;
        let cookie = open_cookie(
            &self.cookie_key,
            &datagram[5..nonce_end],
            &datagram[nonce_end..],
            mac1,
        )
        .ok_or(DropReason::BadMac)?;
        // One resend per initiation: a replayed cookie reply must not make us send more.
        if pending.cookie_resent {
            return Err(DropReason::Replayed);
        }
        self.cookie = Some((cookie, now));
        self.stats.cookie_replies += 1;
        let mut message = pending.message.clone();
        self.write_mac2(now, &mut message);
        if let Some(p) = self.pending.as_mut() {
            p.message.clone_from(&message);
            p.cookie_resent = true;
        }
        self.stats.handshake_initiations_sent += 1;
        Ok(Outcome::Reply(message))
    }

    fn handle_data(&mut self, now: Instant, datagram: &[u8]) -> Result<Outcome, DropReason> {
        let (index, _) = data_header(datagram)?;
        let max_age = self.config.max_session_age;
        let session = match (&mut self.current, &mut self.previous) {
            (Some(s), _) if s.local_index() == index && s.created + max_age > now => s,
            (_, Some((s, until))) if s.local_index() == index && *until > now => s,
            _ => return Err(DropReason::UnknownIndex),
        };
        let plaintext = session.open(datagram)?;
        session.last_received = now;
        if !plaintext.is_empty() && session.keepalive_due.is_none() {
            session.keepalive_due = Some(now + self.config.keepalive);
        }
        self.unanswered_since = None;
        self.stats.data_received += 1;
        Ok(Outcome::Data {
            peer: PeerId::GATEWAY,
            index,
            plaintext,
        })
    }
}

impl std::fmt::Debug for Initiator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Initiator")
            .field("gateway", &self.gateway)
            .field("state", &self.state())
            .field("index", &self.index())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}
