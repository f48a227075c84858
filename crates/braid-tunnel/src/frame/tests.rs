//! PtoS and StoP: batching rules, parsing across reads, the poisoning policy, and the
//! round-trip property PtoS → arbitrary chunks → StoP is the identity on packet sequences.

use std::time::Duration;

use braid_core::Instant;
use proptest::prelude::*;

use super::*;

/// An IPv4 packet of `len` bytes (≥ 20) whose payload bytes are `fill`.
fn v4(len: usize, fill: u8) -> Vec<u8> {
    let mut p = vec![fill; len];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p
}

/// An IPv6 packet of `len` bytes (≥ 40).
fn v6(len: usize, fill: u8) -> Vec<u8> {
    let mut p = vec![fill; len];
    p[0] = 0x60;
    p[4..6].copy_from_slice(&((len - 40) as u16).to_be_bytes());
    p
}

fn ms(m: u64) -> Instant {
    Instant::from_millis(m)
}

fn config(threshold: usize, timeout_ms: u64) -> PtoSConfig {
    PtoSConfig {
        threshold,
        timeout: Duration::from_millis(timeout_ms),
        ..PtoSConfig::default()
    }
}

#[test]
fn config_new_is_a_multiple_of_the_segment() {
    let c = PtoSConfig::new(SEGMENT_PAYLOAD_003, 3, Duration::from_millis(2)).unwrap();
    assert_eq!(c.threshold, 3 * 1432);
    assert_eq!(
        PtoSConfig::new(1432, 0, Duration::ZERO),
        Err(ConfigError::ZeroThreshold)
    );
    let tiny = PtoSConfig {
        capacity: 100,
        ..PtoSConfig::default()
    };
    assert!(matches!(tiny.validate(), Err(ConfigError::Capacity { .. })));
    assert!(PtoS::new(tiny).is_err());
}

#[test]
fn ptos_waits_for_the_threshold_then_hands_out_multiples() {
    let mut p = PtoS::new(config(1000, 5)).unwrap();
    p.push(ms(0), &v4(600, 1)).unwrap();
    assert!(p.ready(ms(1)).is_empty());
    p.push(ms(1), &v4(600, 2)).unwrap();
    p.push(ms(1), &v6(900, 3)).unwrap();
    // 2100 bytes buffered: two thresholds are due, the last 100 bytes wait.
    assert_eq!(p.ready(ms(1)).len(), 2000);
    p.consume(2000);
    assert_eq!(p.len(), 100);
    // The oldest remaining byte belongs to the v6 packet, which arrived at 1 ms.
    assert_eq!(p.poll_timeout(), Some(ms(6)));
    assert!(p.ready(ms(5)).is_empty());
    assert_eq!(p.ready(ms(6)).len(), 100);
    p.consume(100);
    assert!(p.is_empty());
    assert_eq!(p.poll_timeout(), None);
}

#[test]
fn ptos_timeout_flushes_everything_and_deadline_follows_the_oldest_byte() {
    let mut p = PtoS::new(config(10_000, 2)).unwrap();
    p.push(ms(10), &v4(100, 0)).unwrap();
    p.push(ms(11), &v4(100, 0)).unwrap();
    assert_eq!(p.poll_timeout(), Some(ms(12)));
    assert_eq!(p.ready(ms(12)).len(), 200);
    // The connection takes only part: the deadline moves to the packet now oldest.
    p.consume(150);
    assert_eq!(p.poll_timeout(), Some(ms(13)));
    assert_eq!(p.ready(ms(12)).len(), 0);
    assert_eq!(p.ready(ms(13)).len(), 50);
}

#[test]
fn ptos_refuses_invalid_and_overflowing_packets() {
    let c = PtoSConfig {
        capacity: 2000,
        ..config(1500, 1)
    };
    let mut p = PtoS::new(c).unwrap();
    let mut bad = v4(100, 0);
    bad[0] = 0x75;
    assert_eq!(
        p.push(ms(0), &bad),
        Err(PushError::Invalid(FrameError::BadVersion { version: 7 }))
    );
    assert!(matches!(
        p.push(ms(0), &v4(100, 0)[..99]),
        Err(PushError::Invalid(FrameError::LengthMismatch { .. }))
    ));
    assert!(matches!(
        p.push(ms(0), &v4(1501, 0)),
        Err(PushError::Invalid(FrameError::TooLong { .. }))
    ));
    p.push(ms(0), &v4(1400, 0)).unwrap();
    assert_eq!(
        p.push(ms(0), &v4(1400, 0)),
        Err(PushError::Full {
            buffered: 1400,
            capacity: 2000
        })
    );
    let s = p.stats();
    assert_eq!((s.packets, s.invalid, s.full), (1, 3, 1));
}

#[test]
fn stop_reassembles_across_reads_byte_by_byte() {
    let packets = [v4(1400, 7), v6(41, 8), v4(20, 9), v6(40, 1)];
    let stream: Vec<u8> = packets.concat();
    let mut s = StoP::new(1500);
    let mut out = Vec::new();
    for b in &stream {
        s.push(std::slice::from_ref(b));
        while let Some(p) = s.next_packet().unwrap() {
            out.push(p.to_vec());
        }
    }
    assert_eq!(out, packets);
    assert_eq!(s.buffered(), 0);
    assert_eq!(s.stats().packets, 4);
}

#[test]
fn stop_emits_several_packets_from_one_read() {
    let packets = [v4(60, 1), v4(70, 2), v6(80, 3)];
    let mut s = StoP::new(1500);
    s.push(&packets.concat()[..200]);
    assert_eq!(s.next_packet().unwrap(), Some(&packets[0][..]));
    assert_eq!(s.next_packet().unwrap(), Some(&packets[1][..]));
    assert_eq!(s.next_packet().unwrap(), None);
    assert_eq!(s.buffered(), 70);
}

#[test]
fn stop_invalid_header_poisons_until_reset() {
    let mut s = StoP::new(1500);
    let mut stream = v4(40, 0);
    stream.extend_from_slice(&[0x95, 0, 0, 0]);
    stream.extend_from_slice(&v4(40, 0));
    s.push(&stream);
    assert!(s.next_packet().unwrap().is_some());
    let e = FrameError::BadVersion { version: 9 };
    assert_eq!(s.next_packet(), Err(e));
    // Sticky: later bytes, even valid ones, are discarded and the error repeats.
    s.push(&v4(40, 0));
    assert_eq!(s.next_packet(), Err(e));
    assert_eq!(s.error(), Some(e));
    assert_eq!(s.stats().invalid, 1);
    assert_eq!(s.stats().discarded, 44 + 40);
    s.reset();
    s.push(&v4(40, 0));
    assert!(s.next_packet().unwrap().is_some());
}

#[test]
fn stop_rejects_lengths_beyond_the_maximum_and_below_the_header() {
    let mut s = StoP::new(1000);
    s.push(&v4(1001, 0)[..4]);
    assert_eq!(
        s.next_packet(),
        Err(FrameError::TooLong {
            len: 1001,
            max: 1000
        })
    );
    let mut s = StoP::new(1000);
    s.push(&[0x45, 0, 0, 19]);
    assert_eq!(
        s.next_packet(),
        Err(FrameError::TooShort { len: 19, min: 20 })
    );
}

/// A valid IP packet: version, length, fill byte.
fn arb_packet() -> impl Strategy<Value = Vec<u8>> {
    (any::<bool>(), 0usize..1460, any::<u8>()).prop_map(|(is_v6, extra, fill)| {
        if is_v6 {
            v6(40 + extra, fill)
        } else {
            v4(20 + extra, fill)
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Packets pushed at arbitrary times, taken by a connection that accepts arbitrary
    /// amounts, then read back in arbitrary chunks, come out byte-identical and in order.
    #[test]
    fn ptos_then_stop_round_trips(
        packets in prop::collection::vec((arb_packet(), 0u64..3000, 0usize..5000), 0..60),
        threshold in 1usize..4000,
        chunks in prop::collection::vec(1usize..3000, 1..50),
    ) {
        let mut ptos = PtoS::new(PtoSConfig { threshold, capacity: 1 << 20, ..config(1, 1) }).unwrap();
        let mut now = 0u64;
        let mut stream = Vec::new();
        for (packet, dt, accept) in &packets {
            now += dt;
            let t = Instant::from_micros(now);
            ptos.push(t, packet).unwrap();
            let ready = ptos.ready(t);
            let n = ready.len().min(*accept);
            stream.extend_from_slice(&ready[..n]);
            ptos.consume(n);
        }
        // The deadline always comes, and then everything is due.
        if let Some(deadline) = ptos.poll_timeout() {
            let all = ptos.ready(deadline).to_vec();
            prop_assert_eq!(all.len(), ptos.len());
            stream.extend_from_slice(&all);
            ptos.consume(all.len());
        }
        prop_assert!(ptos.is_empty());

        let mut stop = StoP::new(1500);
        let mut out = Vec::new();
        let mut rest = &stream[..];
        for &c in chunks.iter().cycle() {
            if rest.is_empty() { break; }
            let (now, later) = rest.split_at(c.min(rest.len()));
            rest = later;
            stop.push(now);
            while let Some(p) = stop.next_packet().unwrap() {
                out.push(p.to_vec());
            }
        }
        let sent: Vec<Vec<u8>> = packets.into_iter().map(|(p, _, _)| p).collect();
        prop_assert_eq!(out, sent);
        prop_assert_eq!(stop.buffered(), 0);
    }

    /// Arbitrary bytes never panic StoP, and what it emits is a prefix of the input.
    #[test]
    fn stop_never_panics_on_arbitrary_bytes(
        bytes in prop::collection::vec(any::<u8>(), 0..4000),
        chunk in 1usize..500,
        max in 0usize..70_000,
    ) {
        let mut stop = StoP::new(max);
        let mut out = Vec::new();
        for c in bytes.chunks(chunk) {
            stop.push(c);
            while let Ok(Some(p)) = stop.next_packet() {
                out.extend_from_slice(p);
            }
        }
        prop_assert!(bytes.starts_with(&out));
    }

    /// Arbitrary bytes pushed into PtoS never panic it; what is accepted is a valid packet.
    #[test]
    fn ptos_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..2000)) {
        let mut ptos = PtoS::new(PtoSConfig::default()).unwrap();
        if ptos.push(Instant::ZERO, &bytes).is_ok() {
            prop_assert_eq!(validate_packet(&bytes, 1500), Ok(()));
            prop_assert_eq!(ptos.buffered(), &bytes[..]);
        }
    }
}
