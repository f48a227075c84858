//! The per-packet (HYA) datagram parser on arbitrary bytes: never panics, whatever parses
//! re-encodes to the same bytes, and feeding the parsed datagrams to a receiver (data) and a
//! sender (feedback), with the receiver's timers run after each, keeps their invariants: every
//! packet taken is released exactly once, and feedback never makes the sender panic.
#![no_main]

use std::time::Duration;

use braid_core::Instant;
use braid_hya::wire::{self, Datagram};
use braid_hya::{Link, Receiver, ReceiverConfig, Sender, SenderConfig};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut rx: Receiver<usize> = Receiver::new(ReceiverConfig::default());
    let mut tx = Sender::new(SenderConfig::default());
    let links = [
        Link { index: 0, id: 0, rtt: Duration::from_millis(10) },
        Link { index: 1, id: 1, rtt: Duration::from_millis(30) },
    ];
    let mut now = Instant::ZERO;
    let mut released = 0u64;
    // Datagrams are separated by 0xfe; each advances time by 1 ms.
    for chunk in data.split(|b| *b == 0xfe) {
        now += Duration::from_millis(1);
        match wire::parse(chunk) {
            Err(e) => rx.count(e.into()),
            Ok(Datagram::Data { header, packet }) => {
                let mut out = Vec::new();
                header.emit(&mut out);
                out.extend_from_slice(packet);
                assert_eq!(out, chunk);
                let _ = rx.on_data(now, &header, packet.len(), packet.len());
            }
            Ok(Datagram::Feedback(f)) => {
                let mut out = Vec::new();
                wire::emit_feedback(&f.entries().collect::<Vec<_>>(), &mut out);
                assert_eq!(out, chunk);
                tx.on_feedback(now, f.entries());
            }
        }
        let _ = tx.send(now, &links, chunk.len(), &mut Vec::new());
        if rx.poll_timeout().is_some_and(|t| t <= now) {
            rx.handle_timeout(now);
        }
        while rx.pop().is_some() {
            released += 1;
        }
        let _ = rx.poll_feedback(now, &mut Vec::new());
    }
    rx.handle_timeout(now + Duration::from_secs(60));
    while rx.pop().is_some() {
        released += 1;
    }
    let st = rx.reorder().stats();
    assert_eq!(released, st.released);
    assert_eq!(st.accepted, st.released + rx.reorder().len() as u64);
});
