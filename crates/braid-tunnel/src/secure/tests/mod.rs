//! Two endpoints and a virtual clock, no sockets: handshakes, data both ways, and the
//! bookkeeping of indices and peers. Attacks are in `attacks.rs`, timers in `timers.rs`.

use braid_core::Instant;
use rand::SeedableRng;
use rand::rngs::StdRng;

use super::*;

mod attacks;
mod props;
mod timers;

pub(super) fn ms(m: u64) -> Instant {
    Instant::from_millis(m)
}

/// One gateway allowing one client (peer "alice"), both with default configurations.
pub(super) struct Pair {
    pub gw: Responder,
    pub client: Initiator,
    pub rng: StdRng,
    pub peer: PeerId,
    pub now: Instant,
}

impl Pair {
    pub fn new(seed: u64) -> Pair {
        Pair::with_configs(seed, ResponderConfig::default(), InitiatorConfig::default())
    }

    pub fn with_configs(seed: u64, gw_config: ResponderConfig, config: InitiatorConfig) -> Pair {
        let mut rng = StdRng::seed_from_u64(seed);
        let gw_keys = Keypair::generate(&mut rng);
        let client_keys = Keypair::generate(&mut rng);
        let allowed = AllowedPeer {
            name: "alice".into(),
            public: client_keys.public,
        };
        let gw_public = gw_keys.public;
        let gw = Responder::new(gw_keys, [allowed], gw_config).unwrap();
        let peer = gw.find_peer(&client_keys.public).unwrap();
        let client = Initiator::new(client_keys, gw_public, config).unwrap();
        Pair {
            gw,
            client,
            rng,
            peer,
            now: Instant::ZERO,
        }
    }

    /// Runs a complete handshake: initiation, response, the confirming keepalive.
    pub fn connect(&mut self) {
        let init = self.client.start(self.now, &mut self.rng);
        let response = reply(self.gw.handle(self.now, &1u64, &init, &mut self.rng));
        let keepalive = reply(self.client.handle(self.now, &response));
        let out = self.gw.handle(self.now, &1u64, &keepalive, &mut self.rng);
        assert!(matches!(out, Outcome::Data { ref plaintext, .. } if plaintext.is_empty()));
        assert_eq!(self.client.state(), InitiatorState::Established);
        assert!(self.gw.current_index(self.peer).is_some());
    }

    /// Seals at the client.
    pub fn up(&mut self, plaintext: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        self.client.seal(self.now, plaintext, &mut out).unwrap();
        out
    }

    /// Seals at the gateway.
    pub fn down(&mut self, plaintext: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        self.gw
            .seal(self.now, self.peer, plaintext, &mut out)
            .unwrap();
        out
    }

    pub fn at_gw(&mut self, datagram: &[u8]) -> Outcome {
        self.gw.handle(self.now, &1u64, datagram, &mut self.rng)
    }

    pub fn at_client(&mut self, datagram: &[u8]) -> Outcome {
        self.client.handle(self.now, datagram)
    }

    /// Advances the clock and runs both ends' timers; returns what they queued.
    pub fn advance(&mut self, to: Instant) -> (Vec<Vec<u8>>, Vec<Transmit>) {
        self.now = to;
        self.client.handle_timeout(to, &mut self.rng);
        self.gw.handle_timeout(to);
        // Timers make progress: nothing is left due (a runtime would spin).
        assert!(self.client.poll_timeout().is_none_or(|t| t > to));
        assert!(self.gw.poll_timeout().is_none_or(|t| t > to));
        let up = std::iter::from_fn(|| self.client.poll_transmit()).collect();
        let down = std::iter::from_fn(|| self.gw.poll_transmit()).collect();
        (up, down)
    }
}

pub(super) fn reply(outcome: Outcome) -> Vec<u8> {
    match outcome {
        Outcome::Reply(bytes) => bytes,
        other => panic!("expected a reply, got {other:?}"),
    }
}

pub(super) fn data(outcome: Outcome) -> Vec<u8> {
    match outcome {
        Outcome::Data { plaintext, .. } => plaintext,
        other => panic!("expected data, got {other:?}"),
    }
}

#[test]
fn handshake_completes_and_data_flows_both_ways() {
    let mut p = Pair::new(1);
    assert_eq!(p.client.state(), InitiatorState::Idle);
    p.connect();
    let index = p.gw.current_index(p.peer).unwrap();
    assert_eq!(
        p.gw.poll_event(),
        Some(Event::Established {
            peer: p.peer,
            index
        })
    );
    assert!(matches!(
        p.client.poll_event(),
        Some(Event::Established {
            peer: PeerId::GATEWAY,
            ..
        })
    ));
    let d = p.up(b"hello gateway");
    assert_eq!(
        p.at_gw(&d),
        Outcome::Data {
            peer: p.peer,
            index,
            plaintext: b"hello gateway".to_vec()
        }
    );
    let d = p.down(b"hello client");
    assert_eq!(data(p.at_client(&d)), b"hello client");
    // The session names the peers' keys and the index each end chose.
    let s = p.gw.session(index).unwrap();
    assert_eq!(s.remote_static(), p.client.public_key());
    assert_eq!(s.remote_index(), p.client.index().unwrap());
    assert_eq!(
        p.client.session().unwrap().remote_static(),
        p.gw.public_key()
    );
    assert_eq!(p.gw.stats().handshakes_completed, 1);
    assert_eq!(p.client.stats().data_received, 1);
    assert_eq!(p.gw.stats().dropped_total(), 0);
    assert_eq!(p.gw.peer(p.peer).unwrap().name, "alice");
}

/// Each end announces in its handshake message the largest datagram its links carry, the
/// other reads it; an end that announces nothing leaves it unknown, and the instance still
/// reaches the client when only the size follows it.
#[test]
fn handshakes_carry_the_largest_datagram_each_end_takes() {
    for (client, gateway, instance) in [
        (1372u16, 1472u16, 7u64),
        (0, 1452, 0),
        (1200, 0, 9),
        (0, 0, 0),
    ] {
        let mut p = Pair::new(u64::from(client) + u64::from(gateway));
        p.client.set_max_datagram(client);
        p.gw.set_max_datagram(gateway);
        p.gw.set_instance(instance);
        let init = p.client.start(p.now, &mut p.rng);
        let announced = usize::from(client != 0) * wire::MAX_DATAGRAM_LEN;
        assert_eq!(init.len(), wire::INIT_MIN + announced);
        p.now = ms(1);
        let response = reply(p.at_gw(&init));
        let keepalive = reply(p.at_client(&response));
        let Outcome::Data { index, .. } = p.at_gw(&keepalive) else {
            panic!("the keepalive confirms the session");
        };
        let known = |n: u16| (n != 0).then_some(n);
        assert_eq!(p.gw.peer_max_datagram(index), known(client));
        assert_eq!(p.client.gateway_max_datagram(), known(gateway));
        assert_eq!(
            p.client.gateway_instance(),
            (instance != 0).then_some(instance)
        );
        assert_eq!(p.gw.stats().dropped_total(), 0);
    }
}

#[test]
fn sealing_before_a_session_requests_a_handshake() {
    let mut p = Pair::new(2);
    let mut out = Vec::new();
    assert_eq!(
        p.client.seal(p.now, b"x", &mut out),
        Err(SealError::NoSession)
    );
    assert_eq!(p.client.state(), InitiatorState::Handshaking);
    assert_eq!(p.client.poll_timeout(), Some(p.now));
    let (up, _) = p.advance(p.now);
    assert_eq!(up.len(), 1);
    assert_eq!(up[0][0], wire::TYPE_INIT);
    assert_eq!(
        p.gw.seal(p.now, p.peer, b"x", &mut out),
        Err(SealError::NoSession)
    );
    let big = vec![0u8; wire::MAX_PLAINTEXT + 1];
    p.connect();
    assert_eq!(
        p.client.seal(p.now, &big, &mut out),
        Err(SealError::TooLarge(big.len()))
    );
    assert!(p.client.seal(p.now, &big[1..], &mut out).is_ok());
    assert_eq!(data(p.at_gw(&out)).len(), wire::MAX_PLAINTEXT);
}

#[test]
fn two_clients_at_one_gateway_do_not_interfere() {
    let mut rng = StdRng::seed_from_u64(3);
    let gw_keys = Keypair::generate(&mut rng);
    let (a, b) = (Keypair::generate(&mut rng), Keypair::generate(&mut rng));
    let peers = [
        AllowedPeer {
            name: "a".into(),
            public: a.public,
        },
        AllowedPeer {
            name: "b".into(),
            public: b.public,
        },
    ];
    let gw_public = gw_keys.public;
    let mut gw = Responder::new(gw_keys, peers, ResponderConfig::default()).unwrap();
    let (pa, pb) = (
        gw.find_peer(&a.public).unwrap(),
        gw.find_peer(&b.public).unwrap(),
    );
    let mut ca = Initiator::new(a, gw_public, InitiatorConfig::default()).unwrap();
    let mut cb = Initiator::new(b, gw_public, InitiatorConfig::default()).unwrap();
    let now = ms(0);
    // Interleaved handshakes.
    let ia = ca.start(now, &mut rng);
    let ib = cb.start(now, &mut rng);
    let rb = reply(gw.handle(now, &2u64, &ib, &mut rng));
    let ra = reply(gw.handle(now, &1u64, &ia, &mut rng));
    // Each response is for its own client only.
    assert_eq!(ca.handle(now, &rb), Outcome::Drop(DropReason::UnknownIndex));
    let ka = reply(ca.handle(now, &ra));
    let kb = reply(cb.handle(now, &rb));
    assert!(
        matches!(gw.handle(now, &2u64, &kb, &mut rng), Outcome::Data { peer, .. } if peer == pb)
    );
    assert!(
        matches!(gw.handle(now, &1u64, &ka, &mut rng), Outcome::Data { peer, .. } if peer == pa)
    );
    let mut out = Vec::new();
    for i in 0..10u8 {
        ca.seal(now, &[i, 0xa], &mut out).unwrap();
        assert_eq!(
            gw.handle(now, &1u64, &out, &mut rng),
            Outcome::Data {
                peer: pa,
                index: gw.current_index(pa).unwrap(),
                plaintext: vec![i, 0xa]
            }
        );
        cb.seal(now, &[i, 0xb], &mut out).unwrap();
        assert!(
            matches!(gw.handle(now, &2u64, &out, &mut rng), Outcome::Data { peer, .. } if peer == pb)
        );
    }
    // A datagram of b readdressed to a's session fails authentication, and costs a nothing.
    cb.seal(now, b"b", &mut out).unwrap();
    out[1..5].copy_from_slice(&gw.current_index(pa).unwrap().to_be_bytes());
    assert_eq!(
        gw.handle(now, &2u64, &out, &mut rng),
        Outcome::Drop(DropReason::AuthFailed)
    );
    gw.seal(now, pa, b"to a", &mut out).unwrap();
    assert_eq!(
        cb.handle(now, &out),
        Outcome::Drop(DropReason::UnknownIndex)
    );
    assert_eq!(data(ca.handle(now, &out)), b"to a");
    assert_eq!(gw.session_count(), 2);
}

#[test]
fn the_session_is_found_by_index_whatever_the_source() {
    let mut p = Pair::new(4);
    p.connect();
    let index = p.gw.current_index(p.peer).unwrap();
    for src in [1u64, 2, 77, u64::MAX] {
        let d = p.up(b"moving");
        let out = p.gw.handle(p.now, &src, &d, &mut p.rng);
        assert!(
            matches!(out, Outcome::Data { peer, index: i, .. } if peer == p.peer && i == index)
        );
    }
    // Any Hash works as the source, e.g. a socket address.
    let d = p.up(b"addr");
    let addr: std::net::SocketAddr = "192.0.2.1:4242".parse().unwrap();
    assert!(matches!(
        p.gw.handle(p.now, &addr, &d, &mut p.rng),
        Outcome::Data { .. }
    ));
}

#[test]
fn removing_a_peer_drops_its_sessions() {
    let mut p = Pair::new(5);
    p.connect();
    let d = p.up(b"x");
    let index = p.gw.current_index(p.peer).unwrap();
    assert!(p.gw.remove_peer(p.peer));
    assert!(!p.gw.remove_peer(p.peer));
    assert_eq!(p.gw.session_count(), 0);
    assert_eq!(p.at_gw(&d), Outcome::Drop(DropReason::UnknownIndex));
    p.gw.poll_event();
    assert_eq!(
        p.gw.poll_event(),
        Some(Event::Expired {
            peer: p.peer,
            index,
            reason: ExpiryReason::Removed
        })
    );
    // Its next handshake is from an unknown key.
    let init = p.client.start(p.now, &mut p.rng);
    assert_eq!(p.at_gw(&init), Outcome::Drop(DropReason::UnknownPeer));
}

#[test]
fn configuration_errors() {
    let mut rng = StdRng::seed_from_u64(6);
    let k = Keypair::generate(&mut rng);
    let peer = |name: &str| AllowedPeer {
        name: name.into(),
        public: k.public,
    };
    let gw = Keypair::generate(&mut rng);
    let err = Responder::new(
        gw.clone(),
        [peer("a"), peer("b")],
        ResponderConfig::default(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "peer \"b\" has the same public key as peer \"a\""
    );
    let other = Keypair::generate(&mut rng).public;
    let twice = [
        peer("a"),
        AllowedPeer {
            name: "a".into(),
            public: other,
        },
    ];
    assert_eq!(
        Responder::new(gw.clone(), twice, ResponderConfig::default()).unwrap_err(),
        ConfigError::DuplicateName("a".into())
    );
    let zero = ResponderConfig {
        handshake_burst: 0,
        ..ResponderConfig::default()
    };
    assert_eq!(
        Responder::new(gw.clone(), [], zero)
            .unwrap_err()
            .to_string(),
        "handshake_burst must be greater than zero"
    );
    let zero = InitiatorConfig {
        handshake_retry: std::time::Duration::ZERO,
        ..InitiatorConfig::default()
    };
    assert!(Initiator::new(k, gw.public, zero).is_err());
}
