//! The tunnel's secure layer fed arbitrary datagrams, at a gateway and at a client that has a
//! session up and a re-key handshake in progress, with both ends' timers run after each one:
//! never panics, and nothing unauthenticated reaches the application.
#![no_main]

use std::time::Duration;

use braid_core::Instant;
use braid_tunnel::secure::{
    AllowedPeer, Initiator, InitiatorConfig, Keypair, Outcome, Responder, ResponderConfig,
};
use libfuzzer_sys::fuzz_target;
use rand::SeedableRng;
use rand::rngs::StdRng;

fn reply(outcome: Outcome) -> Vec<u8> {
    match outcome {
        Outcome::Reply(bytes) => bytes,
        other => panic!("handshake setup failed: {other:?}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let mut rng = StdRng::seed_from_u64(0);
    let gw_keys = Keypair::generate(&mut rng);
    let client_keys = Keypair::generate(&mut rng);
    let gw_public = gw_keys.public;
    let peer = AllowedPeer {
        name: "fuzz".into(),
        public: client_keys.public,
    };
    let mut gw = Responder::new(gw_keys, [peer], ResponderConfig::default()).unwrap();
    let mut client = Initiator::new(client_keys, gw_public, InitiatorConfig::default()).unwrap();
    let mut now = Instant::ZERO;
    let init = client.start(now, &mut rng);
    let response = reply(gw.handle(now, &0u64, &init, &mut rng));
    let keepalive = reply(client.handle(now, &response));
    let _ = gw.handle(now, &0u64, &keepalive, &mut rng);
    let _ = client.start(now, &mut rng);

    // Datagrams are separated by 0xfe; each advances time by 1 ms and comes from a source
    // named by its first byte.
    for chunk in data.split(|b| *b == 0xfe) {
        now += Duration::from_millis(1);
        let src = chunk.first().copied().unwrap_or(0);
        let at_gw = gw.handle(now, &src, chunk, &mut rng);
        let at_client = client.handle(now, chunk);
        for outcome in [at_gw, at_client] {
            assert!(!matches!(outcome, Outcome::Data { .. }), "forgery accepted");
        }
        if gw.poll_timeout().is_some_and(|t| t <= now) {
            gw.handle_timeout(now);
        }
        if client.poll_timeout().is_some_and(|t| t <= now) {
            client.handle_timeout(now, &mut rng);
        }
        while gw.poll_transmit().is_some() {}
        while gw.poll_event().is_some() {}
        while client.poll_transmit().is_some() {}
        while client.poll_event().is_some() {}
    }
});
