//! A connection fed arbitrary datagrams, in both roles, with its outputs polled after each one:
//! never panics.
#![no_main]

use std::sync::Arc;

use braid_core::{AddrId, Config, Connection, Instant, Side};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let cfg = Arc::new(Config::default());
    let mut client = Connection::new(cfg.clone(), Side::Client, Instant::ZERO);
    let _ = client.open_path(Instant::ZERO, AddrId(0), AddrId(0), false);
    let mut server = Connection::new(cfg, Side::Server, Instant::ZERO);
    let mut buf = Vec::new();
    let mut now = Instant::ZERO;
    // Datagrams are separated by 0xff 0xfe; each advances time by 1 ms.
    for chunk in data.split(|b| *b == 0xfe) {
        now += std::time::Duration::from_millis(1);
        for conn in [&mut client, &mut server] {
            let _ = conn.handle_datagram(now, chunk);
            conn.write(chunk);
            while conn.poll_transmit(now, &mut buf).is_some() {}
            while conn.poll_event().is_some() {}
            if conn.poll_timeout().is_some_and(|t| t <= now) {
                conn.handle_timeout(now);
            }
        }
    }
});
