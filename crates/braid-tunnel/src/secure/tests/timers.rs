//! Timers in virtual time: retransmission with backoff, re-keying with a grace period,
//! keepalives, expiry, and a gateway restart found by the receive timeout.

use std::time::Duration;

use rand::SeedableRng;

use super::*;

fn secs(s: u64) -> Instant {
    Instant::from_millis(s * 1000)
}

#[test]
fn the_initiation_is_retransmitted_with_backoff_until_answered() {
    let mut p = Pair::new(30);
    let first = p.client.start(p.now, &mut p.rng);
    let mut sent = vec![(p.now, first)];
    while sent.len() < 9 {
        let t = p.client.poll_timeout().unwrap();
        let (up, _) = p.advance(t);
        assert_eq!(up.len(), 1, "one initiation at {t:?}");
        sent.push((t, up[0].clone()));
    }
    let gaps: Vec<u64> = sent
        .windows(2)
        .map(|w| (w[1].0 - w[0].0).as_millis() as u64)
        .collect();
    // 1, 2, 4, 8, 16 s, then capped at 30 s, each plus up to a quarter of jitter.
    let base = [1000u64, 2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000];
    for (gap, base) in gaps.iter().zip(base) {
        assert!(*gap >= base && *gap <= base + base / 4, "{gaps:?}");
    }
    assert_eq!(p.client.state(), InitiatorState::Handshaking);
    assert_eq!(p.client.stats().handshake_initiations_sent, 9);
    // Each retry is a fresh handshake: an answer to an older one is stale.
    let stale = reply(p.at_gw(&sent[3].1));
    assert_eq!(p.at_client(&stale), Outcome::Drop(DropReason::UnknownIndex));
    let fresh = reply(p.at_gw(&sent[8].1));
    let keepalive = reply(p.at_client(&fresh));
    assert!(matches!(p.at_gw(&keepalive), Outcome::Data { .. }));
    // Only the confirmed session survives; the other unconfirmed one is gone.
    assert_eq!(p.gw.session_count(), 1);
    assert_eq!(p.client.state(), InitiatorState::Established);
}

#[test]
fn rekey_after_time_keeps_in_flight_datagrams_through_the_grace_period() {
    let mut p = Pair::new(31);
    p.connect();
    let old_client = p.client.index().unwrap();
    let old_gw = p.gw.current_index(p.peer).unwrap();
    // Keep the session busy so nothing idles out.
    p.now = secs(119);
    let late_up = p.up(b"sent on the old session");
    let (up, _) = p.advance(secs(120));
    assert_eq!(up.len(), 1, "always-on client re-keys at 120 s");
    let response = reply(p.at_gw(&up[0]));
    // The gateway still sends on the old session until the client confirms the new one.
    let late_down = p.down(b"old session, downstream");
    let keepalive = reply(p.at_client(&response));
    assert_ne!(p.client.index(), Some(old_client));
    assert_eq!(data(p.at_client(&late_down)), b"old session, downstream");
    assert!(matches!(p.at_gw(&keepalive), Outcome::Data { .. }));
    let new_gw = p.gw.current_index(p.peer).unwrap();
    assert_ne!(new_gw, old_gw);
    // In flight on the old session: still opens, and says so by its index.
    assert!(matches!(p.at_gw(&late_up), Outcome::Data { index, .. } if index == old_gw));
    let d = p.up(b"new");
    assert!(matches!(p.at_gw(&d), Outcome::Data { index, .. } if index == new_gw));
    // After the grace period the old session is gone at both ends.
    let stale_up = late_up.clone();
    p.advance(p.now + Duration::from_secs(11));
    assert_eq!(p.gw.session_count(), 1);
    assert_eq!(p.at_gw(&stale_up), Outcome::Drop(DropReason::UnknownIndex));
    assert_eq!(
        p.at_client(&late_down),
        Outcome::Drop(DropReason::UnknownIndex)
    );
}

#[test]
fn rekey_after_messages() {
    let config = InitiatorConfig {
        rekey_after_messages: 5,
        ..InitiatorConfig::default()
    };
    let mut p = Pair::with_configs(32, ResponderConfig::default(), config);
    p.connect();
    // The confirming keepalive used counter 0.
    for _ in 0..3 {
        p.up(b"x");
        assert_ne!(p.client.poll_timeout(), Some(p.now));
    }
    p.up(b"x");
    assert_eq!(p.client.poll_timeout(), Some(p.now));
    let (up, _) = p.advance(p.now);
    assert_eq!(up[0][0], wire::TYPE_INIT);
    // Still sealing on the old session meanwhile.
    let d = p.up(b"y");
    assert!(matches!(p.at_gw(&d), Outcome::Data { .. }));
}

#[test]
fn a_live_gateway_keeps_the_client_from_timing_out() {
    let mut p = Pair::new(33);
    p.connect();
    let index = p.client.index();
    let d = p.up(b"request with no answer");
    assert!(matches!(p.at_gw(&d), Outcome::Data { .. }));
    let (_, down) = p.advance(secs(10));
    assert_eq!(down.len(), 1, "gateway keepalive after 10 s");
    assert_eq!(down[0].peer, p.peer);
    assert_eq!(data(p.at_client(&down[0].datagram)), b"");
    p.advance(secs(16));
    assert_eq!(p.client.index(), index);
    assert!(
        p.client
            .poll_event()
            .is_some_and(|e| matches!(e, Event::Established { .. }))
    );
    assert_eq!(p.client.poll_event(), None);
}

#[test]
fn a_restarted_gateway_is_detected_and_the_client_handshakes_again() {
    let mut p = Pair::new(34);
    p.connect();
    let client_public = p.client.public_key();
    // Same keys, same allow list, no sessions.
    let gw_keys = {
        let mut rng = rand::rngs::StdRng::seed_from_u64(34);
        Keypair::generate(&mut rng)
    };
    assert_eq!(gw_keys.public, p.gw.public_key());
    let allowed = AllowedPeer {
        name: "alice".into(),
        public: client_public,
    };
    p.gw = Responder::new(gw_keys, [allowed], ResponderConfig::default()).unwrap();
    p.peer = p.gw.find_peer(&client_public).unwrap();
    p.client.poll_event();

    p.now = secs(1);
    for i in 0..5u64 {
        p.now = secs(1 + i);
        let d = p.up(b"into the void");
        assert_eq!(p.at_gw(&d), Outcome::Drop(DropReason::UnknownIndex));
        let (up, _) = p.advance(p.now);
        assert!(up.is_empty());
    }
    // 15 s after the first unanswered datagram.
    assert_eq!(p.client.poll_timeout(), Some(secs(16)));
    let (up, _) = p.advance(secs(16));
    assert!(matches!(
        p.client.poll_event(),
        Some(Event::Expired {
            reason: ExpiryReason::Unanswered,
            ..
        })
    ));
    assert_eq!(p.client.state(), InitiatorState::Handshaking);
    assert_eq!(up.len(), 1);
    let response = reply(p.at_gw(&up[0]));
    let keepalive = reply(p.at_client(&response));
    assert!(matches!(p.at_gw(&keepalive), Outcome::Data { .. }));
    let d = p.up(b"back");
    assert_eq!(data(p.at_gw(&d)), b"back");
    let d = p.down(b"welcome back");
    assert_eq!(data(p.at_client(&d)), b"welcome back");
}

#[test]
fn an_idle_session_expires_at_the_gateway() {
    let config = InitiatorConfig {
        always_on: false,
        ..InitiatorConfig::default()
    };
    let mut p = Pair::with_configs(35, ResponderConfig::default(), config);
    assert_eq!(p.gw.poll_timeout(), None);
    p.connect();
    let index = p.gw.current_index(p.peer).unwrap();
    p.gw.poll_event();
    assert_eq!(p.gw.poll_timeout(), Some(secs(180)));
    // A keepalive: unlike data, it starts no receive timeout at the client.
    let d = p.up(b"");
    let (up, _) = p.advance(secs(179));
    assert!(up.is_empty(), "not always on: no re-key while idle");
    assert_eq!(p.gw.poll_timeout(), Some(secs(180)));
    p.advance(secs(180));
    assert_eq!(
        p.gw.poll_event(),
        Some(Event::Expired {
            peer: p.peer,
            index,
            reason: ExpiryReason::Idle
        })
    );
    assert_eq!(p.gw.session_count(), 0);
    assert_eq!(p.at_gw(&d), Outcome::Drop(DropReason::UnknownIndex));
    assert_eq!(p.gw.stats().sessions_expired, 1);
    // The client stops using its session at its maximum age, then idles.
    p.advance(secs(180));
    assert_eq!(p.client.state(), InitiatorState::Idle);
    let mut out = Vec::new();
    assert_eq!(
        p.client.seal(p.now, b"x", &mut out),
        Err(SealError::NoSession)
    );
    assert_eq!(p.client.state(), InitiatorState::Handshaking);
}

#[test]
fn a_session_is_dropped_at_its_maximum_age_even_when_busy() {
    let mut p = Pair::new(36);
    p.connect();
    for s in (10..240).step_by(10) {
        p.now = secs(s);
        // Keep the gateway's session busy, never complete a re-key.
        let mut out = Vec::new();
        if p.client.seal(p.now, b"busy", &mut out).is_ok() {
            p.at_gw(&out);
        }
        p.gw.handle_timeout(p.now);
    }
    assert_eq!(p.gw.session_count(), 1);
    p.gw.handle_timeout(secs(240));
    assert_eq!(p.gw.session_count(), 0);
    let reasons: Vec<_> = std::iter::from_fn(|| p.gw.poll_event()).collect();
    assert!(
        reasons.contains(&Event::Expired {
            peer: p.peer,
            index: reasons
                .iter()
                .find_map(|e| match e {
                    Event::Established { index, .. } => Some(*index),
                    _ => None,
                })
                .unwrap(),
            reason: ExpiryReason::MaxAge
        })
    );
}

#[test]
fn a_probing_handshake_finds_a_restarted_gateway_by_its_instance() {
    let config = InitiatorConfig {
        probe_after: Some(Duration::from_millis(500)),
        ..InitiatorConfig::default()
    };
    let mut p = Pair::with_configs(35, ResponderConfig::default(), config);
    p.gw.set_instance(11);
    p.connect();
    assert_eq!(p.client.gateway_instance(), Some(11));
    p.client.poll_event();
    // A live gateway answering within the probe time: no probe.
    p.now = ms(100);
    let d = p.up(b"ping");
    assert_eq!(data(p.at_gw(&d)), b"ping");
    p.now = ms(200);
    let d = p.down(b"pong");
    assert_eq!(data(p.at_client(&d)), b"pong");
    let (up, _) = p.advance(ms(900));
    assert!(up.is_empty());
    assert_eq!(p.client.stats().probe_handshakes, 0);

    // The gateway restarts: same keys, no sessions, another instance.
    let client_public = p.client.public_key();
    let gw_keys = {
        let mut rng = rand::rngs::StdRng::seed_from_u64(35);
        Keypair::generate(&mut rng)
    };
    let allowed = AllowedPeer {
        name: "alice".into(),
        public: client_public,
    };
    p.gw = Responder::new(gw_keys, [allowed], ResponderConfig::default()).unwrap();
    p.gw.set_instance(12);
    p.peer = p.gw.find_peer(&client_public).unwrap();
    p.now = ms(1000);
    let d = p.up(b"into the void");
    assert_eq!(p.at_gw(&d), Outcome::Drop(DropReason::UnknownIndex));
    // 500 ms of silence: an initiation goes out beside the current session.
    assert_eq!(p.client.poll_timeout(), Some(ms(1500)));
    let (up, _) = p.advance(ms(1500));
    assert_eq!(up.len(), 1);
    assert_eq!(p.client.stats().probe_handshakes, 1);
    assert_eq!(p.client.state(), InitiatorState::Established);
    let response = reply(p.at_gw(&up[0]));
    let keepalive = reply(p.at_client(&response));
    assert!(matches!(p.at_gw(&keepalive), Outcome::Data { .. }));
    assert!(matches!(
        p.client.poll_event(),
        Some(Event::Established { .. })
    ));
    // The new session names the new instance, long before the receive timeout (15 s).
    assert_eq!(p.client.gateway_instance(), Some(12));
    let d = p.up(b"back");
    assert_eq!(data(p.at_gw(&d)), b"back");
}

#[test]
fn an_unreachable_gateway_gets_one_probing_handshake_at_a_time() {
    let config = InitiatorConfig {
        probe_after: Some(Duration::from_millis(500)),
        handshake_retry: Duration::from_millis(500),
        handshake_retry_max: Duration::from_secs(1),
        ..InitiatorConfig::default()
    };
    let mut p = Pair::with_configs(36, ResponderConfig::default(), config);
    p.connect();
    p.client.poll_event();
    p.now = ms(100);
    let _ = p.up(b"lost");
    // Every path down for 4 s: initiations at most every 1.25 s after the first probe, and
    // the session is kept (not expired) until the receive timeout.
    let mut sent = 0;
    let mut t = 100;
    while t < 4100 {
        t += 50;
        let (up, _) = p.advance(ms(t));
        sent += up.len();
    }
    assert!((3..=6).contains(&sent), "{sent} initiations in 4 s");
    assert_eq!(p.client.state(), InitiatorState::Established);
    assert_eq!(p.client.stats().probe_handshakes, 1);
}
