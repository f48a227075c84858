//! Datagrams of the kernel's `mptcp_pm_events` group, and bare event attributes, on
//! arbitrary bytes: never panic, and every event that decodes re-encodes to itself
//! (decode → encode → decode is the identity on the value).
#![no_main]

use braid_mptcp::PmEvent;
use libfuzzer_sys::fuzz_target;

/// A family id, as the kernel gives `mptcp_pm` (any value works for the fuzzer).
const FAMILY: u16 = 0x1d;

fn round_trips(ev: PmEvent) {
    assert_eq!(PmEvent::parse(ev.number(), &ev.to_bytes()), Ok(ev));
}

fuzz_target!(|data: &[u8]| {
    for ev in PmEvent::decode_datagram(data, FAMILY).into_iter().flatten() {
        round_trips(ev);
    }
    // The first byte as the event type, the rest as its attributes.
    if let Some((&kind, attrs)) = data.split_first() {
        if let Ok(ev) = PmEvent::parse(kind, attrs) {
            round_trips(ev);
        }
    }
});
