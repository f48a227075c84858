//! Hostile input: wrong and unknown keys, a flipped byte anywhere, truncation at every length,
//! replays, floods of garbage, cookies under load, and arbitrary bytes.

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, RngExt, SeedableRng};

use super::super::wire::{self, mac, mac1_key};
use super::*;

/// Recomputes an initiation's mac1 for `gateway`, as an attacker who knows its public key can.
fn remac_init(msg: &mut [u8], gateway: &PublicKey) {
    let at = msg.len() - 2 * wire::MAC_LEN;
    let tag = mac(&mac1_key(gateway), &msg[..at]);
    msg[at..at + wire::MAC_LEN].copy_from_slice(&tag);
}

fn remac_response(msg: &mut [u8], client: &PublicKey) {
    let at = msg.len() - wire::MAC_LEN;
    let tag = mac(&mac1_key(client), &msg[..at]);
    msg[at..].copy_from_slice(&tag);
}

fn generous() -> ResponderConfig {
    ResponderConfig {
        handshake_burst: 100_000,
        ..ResponderConfig::default()
    }
}

#[test]
fn wrong_gateway_key_fails_at_mac1_or_in_noise() {
    let mut p = Pair::new(10);
    let mut rng = StdRng::seed_from_u64(11);
    let wrong = Keypair::generate(&mut rng).public;
    let keys = Keypair::from_private(PrivateKey::from_bytes(
        *Keypair::generate(&mut rng).private.as_bytes(),
    ));
    let mut c = Initiator::new(keys.clone(), wrong, InitiatorConfig::default()).unwrap();
    p.gw.add_peer(AllowedPeer {
        name: "bob".into(),
        public: keys.public,
    })
    .unwrap();
    let mut init = c.start(p.now, &mut p.rng);
    assert_eq!(p.at_gw(&init), Outcome::Drop(DropReason::BadMac));
    // With mac1 forged for the real gateway, Noise itself refuses (es, ss use the wrong key).
    remac_init(&mut init, &p.gw.public_key());
    assert_eq!(p.at_gw(&init), Outcome::Drop(DropReason::HandshakeFailed));
    assert_eq!(p.gw.session_count(), 0);
    assert_eq!(p.gw.stats().bad_mac, 1);
    assert_eq!(p.gw.stats().handshake_failed, 1);
}

#[test]
fn unknown_client_key_is_unknown_peer_and_leaves_no_state() {
    let mut p = Pair::new(12);
    let mut rng = StdRng::seed_from_u64(13);
    let stranger = Keypair::generate(&mut rng);
    let mut c = Initiator::new(stranger, p.gw.public_key(), InitiatorConfig::default()).unwrap();
    let init = c.start(p.now, &mut p.rng);
    assert_eq!(p.at_gw(&init), Outcome::Drop(DropReason::UnknownPeer));
    assert_eq!(p.gw.session_count(), 0);
    assert_eq!(p.gw.stats().unknown_peer, 1);
}

#[test]
fn a_flipped_byte_anywhere_in_an_initiation() {
    let mut p = Pair::with_configs(14, generous(), InitiatorConfig::default());
    let init = p.client.start(p.now, &mut p.rng);
    let gw_public = p.gw.public_key();
    let mac2_at = init.len() - wire::MAC_LEN;
    for i in 0..init.len() {
        let mut t = init.clone();
        t[i] ^= 0x20;
        let out = p.at_gw(&t);
        match i {
            0 | 1 => assert_eq!(out, Outcome::Drop(DropReason::BadType), "byte {i}"),
            // mac2 only matters under load (WireGuard §5.4.4).
            _ if i >= mac2_at => assert!(matches!(out, Outcome::Reply(_)), "byte {i}"),
            _ => assert_eq!(out, Outcome::Drop(DropReason::BadMac), "byte {i}"),
        }
        // An attacker who recomputes mac1 reaches Noise, which refuses every change, the
        // sender index included (it is in the prologue).
        if (2..mac2_at - wire::MAC_LEN).contains(&i) {
            remac_init(&mut t, &gw_public);
            assert_eq!(
                p.at_gw(&t),
                Outcome::Drop(DropReason::HandshakeFailed),
                "byte {i}"
            );
        }
    }
    // Unconfirmed sessions from the accepted copies stay bounded.
    assert!(p.gw.unconfirmed_count() <= 2);
}

#[test]
fn a_flipped_byte_anywhere_in_a_response() {
    let mut p = Pair::new(15);
    let init = p.client.start(p.now, &mut p.rng);
    let response = reply(p.at_gw(&init));
    let me = p.client.public_key();
    for i in 0..response.len() {
        let mut t = response.clone();
        t[i] ^= 0x01;
        let expected = match i {
            0 => DropReason::BadType,
            1..=4 => DropReason::UnknownIndex,
            _ => DropReason::BadMac,
        };
        assert_eq!(p.at_client(&t), Outcome::Drop(expected), "byte {i}");
        if (5..response.len() - wire::MAC_LEN).contains(&i) {
            remac_response(&mut t, &me);
            assert_eq!(
                p.at_client(&t),
                Outcome::Drop(DropReason::HandshakeFailed),
                "byte {i}"
            );
        }
    }
    // None of that disturbed the handshake in progress.
    assert!(matches!(p.at_client(&response), Outcome::Reply(_)));
    assert_eq!(p.client.state(), InitiatorState::Established);
}

#[test]
fn a_flipped_byte_anywhere_in_data_both_ways() {
    let mut p = Pair::new(16);
    p.connect();
    let up = p.up(b"some payload bytes");
    let down = p.down(b"and back");
    for i in 0..up.len().max(down.len()) {
        let expected = match i {
            0 => DropReason::BadType,
            1..=4 => DropReason::UnknownIndex,
            _ => DropReason::AuthFailed,
        };
        for bit in [0x01u8, 0x80] {
            if let Some(b) = up.get(i) {
                let mut t = up.clone();
                t[i] = b ^ bit;
                assert_eq!(p.at_gw(&t), Outcome::Drop(expected), "up byte {i}");
            }
            if let Some(b) = down.get(i) {
                let mut t = down.clone();
                t[i] = b ^ bit;
                assert_eq!(p.at_client(&t), Outcome::Drop(expected), "down byte {i}");
            }
        }
    }
    // Forgeries did not move the replay window: the originals still open, once.
    assert_eq!(data(p.at_gw(&up)), b"some payload bytes");
    assert_eq!(data(p.at_client(&down)), b"and back");
}

#[test]
fn truncated_at_every_length() {
    let mut p = Pair::new(17);
    let init = p.client.start(p.now, &mut p.rng);
    let response = reply(p.at_gw(&init));
    for len in 0..init.len() {
        let expected = if len == 0 || len < wire::INIT_MIN {
            DropReason::TooShort
        } else {
            DropReason::BadMac
        };
        assert_eq!(p.at_gw(&init[..len]), Outcome::Drop(expected), "init {len}");
    }
    for len in 0..response.len() {
        assert_eq!(
            p.at_client(&response[..len]),
            Outcome::Drop(DropReason::TooShort),
            "response {len}"
        );
    }
    let keepalive = reply(p.at_client(&response));
    p.at_gw(&keepalive);
    let up = p.up(&[7u8; 64]);
    let down = p.down(&[9u8; 64]);
    for len in 0..up.len() {
        let expected = if len < wire::DATA_MIN {
            DropReason::TooShort
        } else {
            DropReason::AuthFailed
        };
        assert_eq!(p.at_gw(&up[..len]), Outcome::Drop(expected), "up {len}");
        assert_eq!(
            p.at_client(&down[..len]),
            Outcome::Drop(expected),
            "down {len}"
        );
    }
    // Trailing bytes are a different ciphertext.
    let mut long = up.clone();
    long.push(0);
    assert_eq!(p.at_gw(&long), Outcome::Drop(DropReason::AuthFailed));
    assert_eq!(data(p.at_gw(&up)), vec![7u8; 64]);
}

#[test]
fn replayed_reordered_and_too_old() {
    let mut p = Pair::new(18);
    p.connect();
    let d = p.up(b"once");
    assert_eq!(data(p.at_gw(&d)), b"once");
    assert_eq!(p.at_gw(&d), Outcome::Drop(DropReason::Replayed));
    let k = p.down(b"");
    assert!(matches!(p.at_client(&k), Outcome::Data { .. }));
    assert_eq!(p.at_client(&k), Outcome::Drop(DropReason::Replayed));

    // Reordered within the window: every datagram once, then never again.
    let batch: Vec<Vec<u8>> = (0..500u32).map(|i| p.up(&i.to_be_bytes())).collect();
    let mut order: Vec<usize> = (0..batch.len()).collect();
    let mut rng = StdRng::seed_from_u64(19);
    for i in (1..order.len()).rev() {
        order.swap(i, rng.random_range(0..=i));
    }
    for &i in &order {
        assert_eq!(data(p.at_gw(&batch[i])), (i as u32).to_be_bytes());
    }
    for &i in &order {
        assert_eq!(p.at_gw(&batch[i]), Outcome::Drop(DropReason::Replayed));
    }

    // Far too old: the window holds the newest counter and the 2047 before it.
    let old = p.up(b"old");
    let skipped: Vec<Vec<u8>> = (0..REPLAY_WINDOW).map(|_| p.up(b"x")).collect();
    assert!(matches!(
        p.at_gw(skipped.last().unwrap()),
        Outcome::Data { .. }
    ));
    assert_eq!(p.at_gw(&old), Outcome::Drop(DropReason::TooOld));
    assert!(matches!(p.at_gw(&skipped[0]), Outcome::Data { .. }));
    assert_eq!(p.at_gw(&skipped[0]), Outcome::Drop(DropReason::Replayed));
    let s = p.gw.stats();
    assert_eq!((s.replayed, s.too_old), (502, 1));
}

/// 100 000 hostile datagrams from random sources: random bytes, typed garbage, initiations
/// with a valid mac1 (the gateway key is public) and replays of one genuine initiation. All are
/// dropped or answered with a cookie or (within budget) a response, everything is counted,
/// nothing reaches the application, and the gateway's state stays bounded.
#[test]
fn a_handshake_flood_is_dropped_counted_and_bounded() {
    let mut p = Pair::new(20);
    p.connect();
    let index = p.gw.current_index(p.peer).unwrap();
    let genuine = p.client.start(p.now, &mut p.rng);
    let gw_public = p.gw.public_key();
    let mut rng = StdRng::seed_from_u64(21);
    let before = p.gw.stats().clone();
    let (mut replies, mut max_sessions) = (0u64, 0usize);
    const N: u64 = 100_000;
    for i in 0..N {
        p.now += std::time::Duration::from_micros(10);
        let mut bytes: Vec<u8> = match i % 6 {
            0 => random_bytes(&mut rng, 0..300),
            1 => with_type(
                random_bytes(&mut rng, 134..300),
                &[wire::TYPE_INIT, wire::VERSION],
            ),
            2 => with_type(random_bytes(&mut rng, 0..120), &[wire::TYPE_DATA]),
            3 => with_type(random_bytes(&mut rng, 0..120), &[wire::TYPE_RESPONSE]),
            4 => {
                let mut b = with_type(
                    random_bytes(&mut rng, 134..200),
                    &[wire::TYPE_INIT, wire::VERSION],
                );
                remac_init(&mut b, &gw_public);
                b
            }
            _ => genuine.clone(),
        };
        if i % 6 == 2 && bytes.len() >= 5 && i % 12 == 2 {
            // Garbage for the live session's index: an AEAD failure.
            bytes[1..5].copy_from_slice(&index.to_be_bytes());
        }
        let src: u64 = rng.next_u64();
        match p.gw.handle(p.now, &src, &bytes, &mut p.rng) {
            Outcome::Data { .. } => panic!("garbage reached the application"),
            Outcome::Reply(_) => replies += 1,
            Outcome::Drop(_) => {}
        }
        max_sessions = max_sessions.max(p.gw.session_count());
    }
    let s = p.gw.stats();
    let dropped = s.dropped_total() - before.dropped_total();
    let answered = (s.cookie_replies - before.cookie_replies)
        + (s.handshakes_completed - before.handshakes_completed);
    assert_eq!(dropped + answered, N);
    assert_eq!(answered, replies);
    // The budget: ~1 s of flood lets burst + rate ≈ 120 initiations reach Diffie-Hellman.
    let dh = s.handshake_failed + s.handshakes_completed - before.handshakes_completed;
    assert!(dh <= 20 + 100 + 1, "{dh} Diffie-Hellman operations");
    assert!(s.cookie_replies > 10_000);
    assert!(s.bad_mac > 15_000 && s.bad_type > 30_000, "{s:?}");
    // One current session plus at most two unconfirmed from the replays; nothing else.
    assert!(max_sessions <= 3, "{max_sessions}");
    assert!(p.gw.unconfirmed_count() <= 2);
    assert_eq!(p.gw.tracked_sources(), 0);
    assert_eq!(p.gw.current_index(p.peer), Some(index));
    // The genuine session still works.
    let d = p.down(b"still here");
    assert_eq!(data(p.at_client(&d)), b"still here");
}

fn random_bytes(rng: &mut StdRng, len: std::ops::Range<usize>) -> Vec<u8> {
    let mut b = vec![0u8; rng.random_range(len)];
    rng.fill_bytes(&mut b);
    b
}

fn with_type(mut b: Vec<u8>, head: &[u8]) -> Vec<u8> {
    let n = head.len().min(b.len());
    b[..n].copy_from_slice(&head[..n]);
    b
}

fn drain_budget(p: &mut Pair) {
    let mut rng = StdRng::seed_from_u64(99);
    let gw_public = p.gw.public_key();
    for _ in 0..p.gw.config().handshake_burst {
        let mut b = with_type(random_bytes(&mut rng, 134..135), &[1, 1]);
        remac_init(&mut b, &gw_public);
        assert_eq!(p.at_gw(&b), Outcome::Drop(DropReason::HandshakeFailed));
    }
}

#[test]
fn under_load_a_client_gets_a_cookie_and_still_connects() {
    let mut p = Pair::new(22);
    drain_budget(&mut p);
    let init = p.client.start(p.now, &mut p.rng);
    let cookie = reply(p.gw.handle(p.now, &7u64, &init, &mut p.rng));
    assert_eq!(cookie[0], wire::TYPE_COOKIE);
    assert_eq!(cookie.len(), wire::COOKIE_REPLY_LEN);
    // Tampered cookie replies are refused.
    let mut bad = cookie.clone();
    bad[40] ^= 1;
    assert_eq!(p.at_client(&bad), Outcome::Drop(DropReason::BadMac));
    assert_eq!(
        p.at_client(&cookie[..60]),
        Outcome::Drop(DropReason::TooShort)
    );
    let again = reply(p.at_client(&cookie));
    // Once per initiation.
    assert_eq!(p.at_client(&cookie), Outcome::Drop(DropReason::Replayed));
    // The cookie is bound to the source: from elsewhere it is worth another cookie.
    let other = reply(p.gw.handle(p.now, &8u64, &again, &mut p.rng));
    assert_eq!(other[0], wire::TYPE_COOKIE);
    let response = reply(p.gw.handle(p.now, &7u64, &again, &mut p.rng));
    assert_eq!(response[0], wire::TYPE_RESPONSE);
    let keepalive = reply(p.at_client(&response));
    assert!(matches!(p.at_gw(&keepalive), Outcome::Data { .. }));
    assert_eq!(p.gw.tracked_sources(), 1);
    assert_eq!(p.client.stats().cookie_replies, 1);
}

#[test]
fn a_cookie_holder_is_limited_to_its_own_budget() {
    let config = ResponderConfig {
        max_sources: 8,
        ..ResponderConfig::default()
    };
    let mut p = Pair::with_configs(23, config, InitiatorConfig::default());
    drain_budget(&mut p);
    let gw_public = p.gw.public_key();
    let cookie_key = wire::cookie_key(&gw_public);
    let mut rng = StdRng::seed_from_u64(24);
    let mut counts = std::collections::BTreeMap::<&str, u32>::new();
    for round in 0..200u64 {
        let src = round % 16;
        let mut b = with_type(random_bytes(&mut rng, 134..135), &[1, 1]);
        remac_init(&mut b, &gw_public);
        let cookie_reply = reply(p.gw.handle(p.now, &src, &b, &mut p.rng));
        // The attacker receives at its address, so it can read the cookie and set mac2.
        let mac1 = b[b.len() - 32..b.len() - 16].to_vec();
        let cookie = wire::open_cookie(
            &cookie_key,
            &cookie_reply[5..29],
            &cookie_reply[29..],
            &mac1,
        )
        .unwrap();
        let at = b.len() - 16;
        let tag = mac(&cookie, &b[..at]);
        b[at..].copy_from_slice(&tag);
        let name = match p.gw.handle(p.now, &src, &b, &mut p.rng) {
            Outcome::Drop(r) => r.name(),
            other => panic!("{other:?}"),
        };
        *counts.entry(name).or_default() += 1;
    }
    // 8 sources tracked × burst 5 reach Diffie-Hellman, capped by the second bucket (20).
    assert_eq!(counts.get("handshake_failed"), Some(&20));
    assert_eq!(counts.get("rate_limited"), Some(&180));
    assert_eq!(p.gw.tracked_sources(), 8);
    assert_eq!(p.gw.session_count(), 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Arbitrary bytes, raw or with a valid type byte, never panic either end, whatever the
    /// state (a session up and a handshake in progress), and never reach the application.
    #[test]
    fn arbitrary_bytes_never_panic(
        datagrams in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 1..24),
        seed in any::<u64>(),
    ) {
        let mut p = Pair::new(seed);
        p.connect();
        p.client.start(p.now, &mut p.rng);
        for (i, mut d) in datagrams.into_iter().enumerate() {
            if i % 2 == 1 && !d.is_empty() {
                d[0] = (d[0] % 4) + 1;
            }
            let at_gw = matches!(p.at_gw(&d), Outcome::Data { .. });
            let at_client = matches!(p.at_client(&d), Outcome::Data { .. });
            prop_assert!(!at_gw && !at_client, "garbage accepted");
            p.now += std::time::Duration::from_millis(3);
            p.advance(p.now);
        }
    }

    /// A valid datagram with any nonempty set of bytes changed is refused.
    #[test]
    fn mutated_datagrams_are_refused(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..6),
        len in 0usize..100,
        seed in any::<u64>(),
    ) {
        let mut p = Pair::new(seed);
        p.connect();
        let up = p.up(&vec![0x5a; len]);
        let mut t = up.clone();
        for (at, x) in flips {
            let i = at.index(t.len());
            t[i] ^= x;
        }
        if t != up {
            let dropped = matches!(p.at_gw(&t), Outcome::Drop(_));
            prop_assert!(dropped, "mutated datagram accepted");
        }
        prop_assert_eq!(data(p.at_gw(&up)), vec![0x5a; len]);
    }
}
