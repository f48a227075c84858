//! "Too big" answers: every field of the IPv4 and IPv6 answers for whole and truncated
//! packets, the cases that must not be answered, arbitrary input never panicking and always
//! giving well-formed answers, and the rate limiter.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use braid_core::Instant;
use proptest::prelude::*;

use super::*;

const V4_SRC: [u8; 4] = [10, 0, 0, 2];
const V4_DST: [u8; 4] = [192, 0, 2, 7];
const V6_SRC: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);
const V6_DST: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 7);

/// Independent RFC 1071 verifier: the one's-complement sum of all the 16-bit words (an odd
/// last byte padded with zero), checksum field included, folds to 0xffff.
fn verifies(parts: &[&[u8]]) -> bool {
    let bytes: Vec<u8> = parts.iter().flat_map(|p| p.iter().copied()).collect();
    let mut total: u32 = 0;
    for pair in bytes.chunks(2) {
        let hi = u32::from(pair[0]) << 8;
        let lo = pair.get(1).map_or(0, |&b| u32::from(b));
        total += hi | lo;
        total = (total & 0xffff) + (total >> 16);
    }
    total == 0xffff
}

/// The IPv6 pseudo-header of RFC 8200 §8.1 for an ICMPv6 message of `len` bytes.
fn pseudo_header(src: &[u8], dst: &[u8], len: usize) -> Vec<u8> {
    let mut p = Vec::new();
    p.extend_from_slice(src);
    p.extend_from_slice(dst);
    p.extend_from_slice(&(len as u32).to_be_bytes());
    p.extend_from_slice(&[0, 0, 0, 58]);
    p
}

/// A 20-byte TCP header plus a patterned payload, `len` bytes in all.
fn tcp_segment(len: usize) -> Vec<u8> {
    let mut s: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
    s[..20].copy_from_slice(&[
        0xc3, 0x50, 0x01, 0xbb, 0, 0, 0x10, 0, 0, 0, 0, 0, 0x50, 0x10, 0xff, 0xff, 0, 0, 0, 0,
    ]);
    s
}

/// An IPv4 packet of `len` bytes (header of 20 bytes, valid checksum) carrying `proto`, with
/// DF set; `body` fills the payload.
fn v4_packet(len: usize, proto: u8, body: &[u8]) -> Vec<u8> {
    let mut p = vec![
        0x45, 0x00, 0, 0, 0x12, 0x34, 0x40, 0x00, 55, proto, 0, 0, V4_SRC[0], V4_SRC[1], V4_SRC[2],
        V4_SRC[3], V4_DST[0], V4_DST[1], V4_DST[2], V4_DST[3],
    ];
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p.extend_from_slice(&body[..len - 20]);
    fix_v4_checksum(&mut p);
    p
}

fn fix_v4_checksum(p: &mut [u8]) {
    let header = usize::from(p[0] & 0x0f) * 4;
    p[10..12].fill(0);
    let sum = checksum(sum(0, &p[..header]));
    p[10..12].copy_from_slice(&sum.to_be_bytes());
    assert!(verifies(&[&p[..header]]));
}

fn v4_tcp(len: usize) -> Vec<u8> {
    v4_packet(len, 6, &tcp_segment(len - 20))
}

/// An IPv6 packet of `len` bytes carrying `next` right after the fixed header.
fn v6_packet(len: usize, next: u8, body: &[u8]) -> Vec<u8> {
    let mut p = vec![0x60, 0x00, 0x12, 0x34, 0, 0, next, 55];
    p[4..6].copy_from_slice(&((len - 40) as u16).to_be_bytes());
    p.extend_from_slice(&V6_SRC.octets());
    p.extend_from_slice(&V6_DST.octets());
    p.extend_from_slice(&body[..len - 40]);
    p
}

fn v6_tcp(len: usize) -> Vec<u8> {
    v6_packet(len, 6, &tcp_segment(len - 40))
}

fn answer(packet: &[u8], mtu: u16) -> Option<Vec<u8>> {
    let mut out = vec![0xaa; 7];
    if too_big(packet, mtu, &mut out) {
        assert!(!out.is_empty());
        Some(out)
    } else {
        assert!(out.is_empty(), "out must be left empty when not answering");
        None
    }
}

/// Checks every field of an IPv4 answer to `original` for `mtu`; returns the quoted bytes.
fn check_v4(out: &[u8], original: &[u8], mtu: u16) -> Vec<u8> {
    assert!(out.len() <= IPV4_ANSWER_MAX);
    assert_eq!(out[0], 0x45, "version 4, IHL 5");
    assert_eq!(usize::from(u16::from_be_bytes([out[2], out[3]])), out.len());
    assert_eq!(&out[6..8], &[0, 0], "no flags, offset 0");
    assert_eq!(out[8], 64, "TTL");
    assert_eq!(out[9], 1, "protocol ICMP");
    assert!(verifies(&[&out[..20]]), "IPv4 header checksum");
    assert_eq!(
        &out[12..16],
        &original[16..20],
        "source = original destination"
    );
    assert_eq!(
        &out[16..20],
        &original[12..16],
        "destination = original source"
    );
    let icmp = &out[20..];
    assert_eq!(
        (icmp[0], icmp[1]),
        (3, 4),
        "fragmentation needed and DF set"
    );
    assert!(verifies(&[icmp]), "ICMP checksum");
    assert_eq!(&icmp[4..6], &[0, 0], "unused");
    assert_eq!(u16::from_be_bytes([icmp[6], icmp[7]]), mtu, "next-hop MTU");
    let quoted = &icmp[8..];
    assert_eq!(quoted, &original[..quoted.len()], "quotes the original");
    quoted.to_vec()
}

/// Checks every field of an IPv6 answer to `original` for `mtu`; returns the quoted bytes.
fn check_v6(out: &[u8], original: &[u8], mtu: u16) -> Vec<u8> {
    assert!(out.len() <= 1280);
    assert_eq!(&out[..4], &[0x60, 0, 0, 0], "version 6, class 0, flow 0");
    assert_eq!(
        usize::from(u16::from_be_bytes([out[4], out[5]])) + 40,
        out.len()
    );
    assert_eq!(out[6], 58, "next header ICMPv6");
    assert_eq!(out[7], 64, "hop limit");
    assert_eq!(
        &out[8..24],
        &original[24..40],
        "source = original destination"
    );
    assert_eq!(
        &out[24..40],
        &original[8..24],
        "destination = original source"
    );
    let icmp = &out[40..];
    assert_eq!((icmp[0], icmp[1]), (2, 0), "Packet Too Big");
    let pseudo = pseudo_header(&out[8..24], &out[24..40], icmp.len());
    assert!(verifies(&[&pseudo, icmp]), "ICMPv6 checksum");
    let field = u32::from_be_bytes([icmp[4], icmp[5], icmp[6], icmp[7]]);
    assert_eq!(field, u32::from(mtu).max(1280), "MTU");
    let quoted = &icmp[8..];
    assert_eq!(quoted, &original[..quoted.len()], "quotes the original");
    quoted.to_vec()
}

#[test]
fn the_verifier_is_independent_and_strict() {
    // The RFC 1071 §3 example words, with their checksum appended.
    let mut data = vec![0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
    assert!(!verifies(&[&data]));
    data.extend_from_slice(&0x220du16.to_be_bytes());
    assert!(verifies(&[&data]));
    data[0] ^= 1;
    assert!(!verifies(&[&data]));
}

#[test]
fn ipv4_answer_for_a_9000_byte_tcp_packet() {
    let packet = v4_tcp(9000);
    let out = answer(&packet, 1400).expect("answered");
    assert_eq!(out.len(), 576, "quotes as much as fits in 576 bytes");
    assert_eq!(out[1], 0xc0, "internetwork control precedence");
    let quoted = check_v4(&out, &packet, 1400);
    assert_eq!(quoted.len(), 548);
    // The quoted header still says 9000 bytes, as the sender sent it.
    assert_eq!(&quoted[2..4], &9000u16.to_be_bytes());
}

#[test]
fn ipv4_answer_for_a_truncated_read() {
    let packet = v4_tcp(9000);
    let truncated = &packet[..1500];
    let out = answer(truncated, 1400).expect("answered");
    assert_eq!(out, answer(&packet, 1400).unwrap());
    check_v4(&out, truncated, 1400);

    // Only the header and 8 bytes of TCP read: exactly those are quoted.
    let out = answer(&packet[..28], 1400).expect("answered");
    assert_eq!(check_v4(&out, &packet, 1400).len(), 28);
    assert_eq!(out.len(), 56);
    // Fewer than that: the sender could not match the answer to a connection.
    assert_eq!(answer(&packet[..27], 1400), None);
    assert_eq!(answer(&packet[..20], 1400), None);
}

#[test]
fn ipv4_answer_quotes_a_short_packet_whole_and_keeps_options() {
    let packet = v4_tcp(120);
    let out = answer(&packet, 100).expect("answered");
    assert_eq!(check_v4(&out, &packet, 100).len(), 120);
    assert_eq!(out.len(), 148);

    // IHL 6 (one option word): the header and 8 bytes of payload are needed.
    let mut opt = vec![0x46, 0, 0, 200, 0, 0, 0x40, 0, 64, 17, 0, 0];
    opt.extend_from_slice(&V4_SRC);
    opt.extend_from_slice(&V4_DST);
    opt.extend_from_slice(&[1, 1, 1, 0]);
    opt.resize(200, 9);
    fix_v4_checksum(&mut opt);
    assert_eq!(answer(&opt[..31], 150), None);
    let out = answer(&opt[..32], 150).expect("answered");
    assert_eq!(check_v4(&out, &opt, 150).len(), 32);

    // Whatever the MTU, even 0: the field says it.
    let out = answer(&packet, 0).expect("answered");
    check_v4(&out, &packet, 0);
}

#[test]
fn ipv4_answers_icmp_queries_but_not_icmp_errors() {
    let mut body = vec![0u8; 2000];
    body[0] = 8; // echo request
    let echo = v4_packet(2000, 1, &body);
    check_v4(&answer(&echo, 1500).expect("answered"), &echo, 1500);
    for error in [3u8, 4, 5, 11, 12] {
        body[0] = error;
        assert_eq!(
            answer(&v4_packet(2000, 1, &body), 1500),
            None,
            "type {error}"
        );
    }
    // The same first byte in a non-ICMP packet is just data.
    body[0] = 3;
    assert!(answer(&v4_packet(2000, 17, &body), 1500).is_some());
}

#[test]
fn ipv4_no_answer_without_df_or_for_later_fragments() {
    let packet = v4_tcp(2000);
    let mut no_df = packet.clone();
    no_df[6] = 0;
    fix_v4_checksum(&mut no_df);
    assert_eq!(answer(&no_df, 1500), None);

    // DF | offset 185 (1480 bytes), and offset alone with MF.
    for flags in [[0x40, 185], [0x60, 1], [0x41, 0]] {
        let mut frag = packet.clone();
        frag[6..8].copy_from_slice(&flags);
        fix_v4_checksum(&mut frag);
        assert_eq!(answer(&frag, 1500), None, "flags {flags:?}");
    }
    // A first fragment (MF, offset 0) with DF is answered.
    let mut first = packet.clone();
    first[6] = 0x60;
    fix_v4_checksum(&mut first);
    assert!(answer(&first, 1500).is_some());
}

#[test]
fn ipv4_no_answer_for_bad_addresses() {
    let base = v4_tcp(2000);
    let with = |src: Ipv4Addr, dst: Ipv4Addr| {
        let mut p = base.clone();
        p[12..16].copy_from_slice(&src.octets());
        p[16..20].copy_from_slice(&dst.octets());
        fix_v4_checksum(&mut p);
        p
    };
    let (s, d) = (Ipv4Addr::from(V4_SRC), Ipv4Addr::from(V4_DST));
    assert!(answer(&with(s, d), 1500).is_some());
    for bad in [
        Ipv4Addr::UNSPECIFIED,
        Ipv4Addr::BROADCAST,
        Ipv4Addr::new(224, 0, 0, 5),
        Ipv4Addr::new(239, 1, 2, 3),
    ] {
        assert_eq!(answer(&with(bad, d), 1500), None, "source {bad}");
        assert_eq!(answer(&with(s, bad), 1500), None, "destination {bad}");
    }
}

#[test]
fn ipv4_no_answer_when_it_fits_or_is_malformed() {
    let packet = v4_tcp(1500);
    assert_eq!(answer(&packet, 1500), None);
    assert_eq!(answer(&packet, 1501), None);
    assert!(answer(&packet, 1499).is_some());

    let mut ihl4 = packet.clone();
    ihl4[0] = 0x44;
    assert_eq!(answer(&ihl4, 1000), None);
    // Total length shorter than the header.
    let mut short = packet.clone();
    short[2..4].copy_from_slice(&19u16.to_be_bytes());
    assert_eq!(answer(&short, 0), None);
    // IHL 15 but only 20 bytes present.
    let mut long_header = packet[..20].to_vec();
    long_header[0] = 0x4f;
    assert_eq!(answer(&long_header, 0), None);
    assert_eq!(answer(&packet[..19], 0), None);
}

#[test]
fn ipv6_answer_for_a_9000_byte_tcp_packet() {
    let packet = v6_tcp(9000);
    let out = answer(&packet, 1400).expect("answered");
    assert_eq!(out.len(), 1280, "quotes as much as fits in 1280 bytes");
    let quoted = check_v6(&out, &packet, 1400);
    assert_eq!(quoted.len(), 1232);
    assert_eq!(&quoted[4..6], &8960u16.to_be_bytes());
}

#[test]
fn ipv6_answer_for_a_truncated_read() {
    let packet = v6_tcp(9000);
    let truncated = &packet[..1500];
    let out = answer(truncated, 1400).expect("answered");
    assert_eq!(out, answer(&packet, 1400).unwrap());
    check_v6(&out, truncated, 1400);

    let out = answer(&packet[..600], 1400).expect("answered");
    assert_eq!(check_v6(&out, &packet, 1400).len(), 600);
    assert_eq!(out.len(), 648);
    let out = answer(&packet[..48], 1400).expect("answered");
    assert_eq!(check_v6(&out, &packet, 1400).len(), 48);
    assert_eq!(answer(&packet[..47], 1400), None);
    assert_eq!(answer(&packet[..40], 1400), None);
}

#[test]
fn ipv6_mtu_field_is_at_least_1280_and_answer_at_most_1280() {
    for mtu in [0u16, 576, 1000, 1279, 1280, 1281, 9000] {
        let packet = v6_tcp(9100);
        let out = answer(&packet, mtu).expect("answered");
        assert!(out.len() <= 1280);
        check_v6(&out, &packet, mtu);
        let field = u32::from_be_bytes([out[44], out[45], out[46], out[47]]);
        assert_eq!(field, u32::from(mtu).max(1280));
    }
    // A short packet is quoted whole.
    let packet = v6_tcp(300);
    let out = answer(&packet, 200).expect("answered");
    assert_eq!(check_v6(&out, &packet, 200).len(), 300);
    assert_eq!(out.len(), 348);
    // A header alone (payload length 0) longer than the MTU.
    let bare = v6_packet(40, 59, &[]);
    let out = answer(&bare, 39).expect("answered");
    assert_eq!(check_v6(&out, &bare, 39).len(), 40);
}

#[test]
fn ipv6_answers_icmpv6_informational_but_not_errors() {
    let mut body = vec![0u8; 1960];
    for info in [128u8, 129, 135, 255] {
        body[0] = info;
        let p = v6_packet(2000, 58, &body);
        check_v6(&answer(&p, 1500).expect("answered"), &p, 1500);
    }
    for error in [0u8, 1, 2, 3, 4, 127] {
        body[0] = error;
        assert_eq!(
            answer(&v6_packet(2000, 58, &body), 1500),
            None,
            "type {error}"
        );
    }
    // Extension headers are not walked: behind a destination-options header, answered.
    body[0] = 1;
    assert!(answer(&v6_packet(2000, 60, &body), 1500).is_some());
}

#[test]
fn ipv6_no_answer_for_bad_addresses_fits_or_malformed() {
    let base = v6_tcp(2000);
    let with = |src: Ipv6Addr, dst: Ipv6Addr| {
        let mut p = base.clone();
        p[8..24].copy_from_slice(&src.octets());
        p[24..40].copy_from_slice(&dst.octets());
        p
    };
    assert!(answer(&with(V6_SRC, V6_DST), 1500).is_some());
    // Link-local source is fine: the answer goes back to it.
    let ll = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
    check_v6(
        &answer(&with(ll, V6_DST), 1500).unwrap(),
        &with(ll, V6_DST),
        1500,
    );
    for bad in [
        Ipv6Addr::UNSPECIFIED,
        Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1),
        Ipv6Addr::new(0xff0e, 0, 0, 0, 0, 0, 0, 0x101),
    ] {
        assert_eq!(answer(&with(bad, V6_DST), 1500), None, "source {bad}");
        assert_eq!(answer(&with(V6_SRC, bad), 1500), None, "destination {bad}");
    }

    assert_eq!(answer(&base, 2000), None);
    assert_eq!(answer(&base, u16::MAX), None);
    assert!(answer(&base, 1999).is_some());
    assert_eq!(answer(&base[..39], 0), None);
}

#[test]
fn garbage_and_empty_input_get_no_answer() {
    assert_eq!(answer(&[], 0), None);
    assert_eq!(answer(&[0x45], 0), None);
    assert_eq!(answer(&[0x60; 10], 0), None);
    for version in [0u8, 1, 5, 7, 15] {
        let mut p = v4_tcp(2000);
        p[0] = (version << 4) | 5;
        assert_eq!(answer(&p, 1500), None, "version {version}");
    }
    assert_eq!(answer(&[0xff; 3000], 0), None);
    assert_eq!(answer(&[0u8; 3000], 0), None);
}

#[test]
fn limiter_bursts_then_refuses_then_refills() {
    let ms = Instant::from_millis;
    let mut l = TooBigLimiter::new(10, 3);
    assert!((0..3).all(|_| l.allow(ms(0))));
    assert!(!l.allow(ms(0)));
    assert!(!l.allow(ms(99)));
    assert_eq!(l.limited, 2);
    // 10 a second: one token every 100 ms.
    assert!(l.allow(ms(100)));
    assert!(!l.allow(ms(100)));
    assert!(!l.allow(ms(150)));
    assert!(l.allow(ms(200)));
    assert_eq!(l.limited, 4);
    // A long pause refills only up to the burst.
    let t = ms(60_000);
    assert!((0..3).all(|_| l.allow(t)));
    assert!(!l.allow(t));
    assert_eq!(l.limited, 5);
    // Time going backwards refills nothing and does not panic.
    assert!(!l.allow(ms(10)));
    assert!(!l.allow(t + Duration::from_millis(50)));
    assert!(l.allow(t + Duration::from_millis(100)));
    assert_eq!(l.limited, 7);
}

#[test]
fn limiter_default_and_edge_cases() {
    let mut l = TooBigLimiter::default();
    let t0 = Instant::from_millis(5_000);
    assert_eq!((0..100).filter(|_| l.allow(t0)).count(), 20);
    assert_eq!(l.limited, 80);
    // 100 a second: one every 10 ms; a second later, capped at the burst of 20.
    assert!(l.allow(t0 + Duration::from_millis(10)));
    let t1 = t0 + Duration::from_secs(1);
    assert_eq!((0..100).filter(|_| l.allow(t1)).count(), 20);

    let mut none = TooBigLimiter::new(1000, 0);
    assert!(!none.allow(Instant::ZERO));
    assert!(!none.allow(Instant::FAR_FUTURE));
    assert_eq!(none.limited, 2);

    let mut once = TooBigLimiter::new(0, 2);
    assert!(once.allow(Instant::ZERO));
    assert!(once.allow(Instant::FAR_FUTURE));
    assert!(!once.allow(Instant::FAR_FUTURE));

    let mut huge = TooBigLimiter::new(u32::MAX, u32::MAX);
    assert!(huge.allow(Instant::FAR_FUTURE));
    assert!(huge.allow(Instant::FAR_FUTURE));
    assert_eq!(huge.limited, 0);
}

/// Checks that an answer to `packet` is a well-formed IPv4 or IPv6 ICMP error.
fn check_any(out: &[u8], packet: &[u8], mtu: u16) -> Result<(), TestCaseError> {
    match out[0] >> 4 {
        4 => {
            prop_assert_eq!(packet[0] >> 4, 4);
            prop_assert!(out.len() >= 28 && out.len() <= IPV4_ANSWER_MAX);
            prop_assert_eq!(out[0], 0x45);
            prop_assert_eq!(usize::from(u16::from_be_bytes([out[2], out[3]])), out.len());
            prop_assert_eq!(out[9], 1);
            prop_assert!(verifies(&[&out[..20]]));
            prop_assert!(verifies(&[&out[20..]]));
            prop_assert_eq!((out[20], out[21]), (3, 4));
            prop_assert_eq!(u16::from_be_bytes([out[26], out[27]]), mtu);
            prop_assert_eq!(&out[28..], &packet[..out.len() - 28]);
            prop_assert!(
                usize::from(u16::from_be_bytes([packet[2], packet[3]])) > usize::from(mtu)
            );
        }
        6 => {
            prop_assert_eq!(packet[0] >> 4, 6);
            prop_assert!(out.len() >= 48 && out.len() <= 1280);
            prop_assert_eq!(
                usize::from(u16::from_be_bytes([out[4], out[5]])) + 40,
                out.len()
            );
            prop_assert_eq!(out[6], 58);
            let pseudo = pseudo_header(&out[8..24], &out[24..40], out.len() - 40);
            prop_assert!(verifies(&[&pseudo, &out[40..]]));
            prop_assert_eq!((out[40], out[41]), (2, 0));
            let field = u32::from_be_bytes([out[44], out[45], out[46], out[47]]);
            prop_assert!(field >= 1280);
            prop_assert_eq!(field, u32::from(mtu).max(1280));
            prop_assert_eq!(&out[48..], &packet[..out.len() - 48]);
            prop_assert!(
                40 + usize::from(u16::from_be_bytes([packet[4], packet[5]])) > usize::from(mtu)
            );
        }
        v => prop_assert!(false, "answer of IP version {}", v),
    }
    Ok(())
}

/// Bytes that often look like an IPv4 or IPv6 header with DF set and a stated length above
/// the MTU, so that the answering paths are exercised, not only the refusals.
fn plausible() -> impl Strategy<Value = (Vec<u8>, u16)> {
    (
        prop::collection::vec(any::<u8>(), 0..2000),
        any::<bool>(),
        0u8..16,
        any::<u16>(),
        any::<u16>(),
    )
        .prop_map(|(mut p, v6, ihl, stated, mtu)| {
            if let Some(b0) = p.first_mut() {
                *b0 = if v6 { 0x60 | (*b0 & 0x0f) } else { 0x40 | ihl };
            }
            if !v6 && p.len() >= 8 {
                p[2..4].copy_from_slice(&stated.to_be_bytes());
                p[6] = 0x40;
                p[7] = 0;
            } else if v6 && p.len() >= 6 {
                p[4..6].copy_from_slice(&stated.to_be_bytes());
            }
            (p, mtu)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any bytes, any MTU: no panic; an answer is a well-formed ICMP error, and no answer
    /// leaves `out` empty.
    #[test]
    fn arbitrary_bytes_never_panic(packet in prop::collection::vec(any::<u8>(), 0..3000), mtu in any::<u16>()) {
        let mut out = vec![1, 2, 3];
        if too_big(&packet, mtu, &mut out) {
            check_any(&out, &packet, mtu)?;
        } else {
            prop_assert!(out.is_empty());
        }
    }

    /// Header-shaped bytes: the same, and mostly answered.
    #[test]
    fn plausible_headers_give_well_formed_answers((packet, mtu) in plausible()) {
        let mut out = Vec::new();
        if too_big(&packet, mtu, &mut out) {
            check_any(&out, &packet, mtu)?;
        } else {
            prop_assert!(out.is_empty());
        }
    }

    /// Real TCP packets of any length above the MTU and any truncation that keeps the header
    /// and 8 bytes are always answered.
    #[test]
    fn real_oversized_packets_are_always_answered(
        len in 60usize..9000,
        v6 in any::<bool>(),
        mtu_below in 1usize..9000,
        cut in 48usize..9000,
    ) {
        let packet = if v6 { v6_tcp(len) } else { v4_tcp(len) };
        let mtu = len.saturating_sub(mtu_below) as u16;
        let present = &packet[..cut.min(len)];
        let mut out = Vec::new();
        prop_assert!(too_big(present, mtu, &mut out));
        check_any(&out, present, mtu)?;
    }
}
