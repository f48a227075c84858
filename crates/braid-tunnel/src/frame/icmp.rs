//! "Too big" answers for packets the tunnel cannot carry: ICMP "fragmentation needed and DF
//! set" (RFC 792, RFC 1191 §4) for IPv4 and ICMPv6 "Packet Too Big" (RFC 4443 §3.2) for IPv6.
//!
//! A packet read from the TUN device that is longer than the tunnel MTU cannot enter the
//! stream (PtoS refuses it, and StoP on the far side would refuse it too). Dropping it
//! silently makes the tunnel a path-MTU black hole (RFC 2923 §2.1): an inner TCP with DF set
//! retransmits the same oversized segment until it gives up, and the connection stalls. A
//! router in that place answers with an ICMP error carrying the MTU it can forward, and the
//! sender's path-MTU discovery lowers its segment size. The daemon does the same: it writes
//! the answer built by [`too_big`] back into the TUN device, so the local stack receives it as
//! if it came from the next hop.
//!
//! The answer's source is the original packet's destination and its destination the
//! original's source: the kernel's reverse-path filter on the TUN interface accepts it, since
//! the routes through the TUN device cover the original destination.
//!
//! No ICMP error answers an ICMP error, a broadcast, a multicast or a packet from the
//! unspecified address (RFC 1122 §3.2.2, RFC 4443 §2.4 (e)), and [`TooBigLimiter`] bounds
//! how many answers a flood of oversized packets can produce (RFC 1812 §4.3.2.8, RFC 4443
//! §2.4 (f)). Sans-IO: time is an argument.

use std::net::{Ipv4Addr, Ipv6Addr};

use braid_core::Instant;

use super::ip::{IPV4_MIN_HEADER, IPV6_HEADER};

/// The longest IPv4 ICMP error built, in all: 576 bytes, the datagram every host accepts
/// (RFC 1812 §4.3.2.3; Linux quotes as much of the original as fits in it).
pub const IPV4_ANSWER_MAX: usize = 576;
/// The IPv6 minimum link MTU (RFC 8200 §5): the longest ICMPv6 error (RFC 4443 §2.4 (c)) and
/// the smallest MTU a "Packet Too Big" may state.
pub const IPV6_MIN_MTU: usize = 1280;

/// ICMP and ICMPv6 headers are both 8 bytes: type, code, checksum, 4 bytes of MTU fields.
const ICMP_HEADER: usize = 8;
/// TTL / hop limit of the answers (Linux's default).
const HOP_LIMIT: u8 = 64;
/// IPv4 type of service of the answers: precedence "internetwork control", as Linux sends
/// ICMP errors (RFC 1812 §4.3.2.5; DSCP CS6).
const TOS_INTERNETWORK_CONTROL: u8 = 0xc0;
/// IPv4 protocol number of ICMP.
const PROTO_ICMP: u8 = 1;
/// IPv6 next header value of ICMPv6.
const NEXT_HEADER_ICMPV6: u8 = 58;
/// ICMP destination unreachable, code "fragmentation needed and DF set".
const ICMP_UNREACHABLE: u8 = 3;
const ICMP_FRAG_NEEDED: u8 = 4;
/// ICMPv6 "Packet Too Big".
const ICMPV6_PACKET_TOO_BIG: u8 = 2;
/// ICMPv6 types below this are errors (RFC 4443 §2.1).
const ICMPV6_INFO_MIN: u8 = 128;

/// Writes into `out` the ICMP "too big" answer to `packet`, an IP packet read from the TUN
/// device that the tunnel cannot carry because it is longer than `mtu`, and returns true; or
/// returns false and leaves `out` empty when no answer must be sent.
///
/// `packet` may be truncated (a TUN read into a short buffer): its length is taken from its
/// IP header, and the answer quotes only the bytes present, which must include at least the
/// IP header and the first 8 bytes of its payload (RFC 792), or the whole packet.
///
/// - IPv4: type 3 code 4 with next-hop MTU `mtu`, quoting the original up to 576 bytes in
///   all. Only for a packet with DF set that is not a later fragment (offset ≠ 0) and not an
///   ICMP error (types 3, 4, 5, 11, 12); without DF the kernel fragments, so no answer.
/// - IPv6: type 2 code 0 with MTU `max(mtu, 1280)` (IPv6 links carry at least 1280 bytes),
///   quoting as much of the original as keeps the answer within 1280 bytes. Not for an
///   ICMPv6 error (type < 128) directly after the fixed header; extension headers are not
///   walked, so an error behind one is answered.
///
/// No answer either when the packet's header is not a plausible IPv4/IPv6 header, when its
/// stated length is at most `mtu`, when its source is unspecified, multicast or broadcast, or
/// when its destination is (the answer's source would be). Never panics.
pub fn too_big(packet: &[u8], mtu: u16, out: &mut Vec<u8>) -> bool {
    out.clear();
    match packet.first().map(|b| b >> 4) {
        Some(4) => too_big_v4(packet, mtu, out),
        Some(6) => too_big_v6(packet, mtu, out),
        _ => false,
    }
}

fn too_big_v4(packet: &[u8], mtu: u16, out: &mut Vec<u8>) -> bool {
    let header = usize::from(packet[0] & 0x0f) * 4;
    // RFC 791 §3.1: the whole header (options included) must be present to be quoted.
    if header < IPV4_MIN_HEADER || packet.len() < header {
        return false;
    }
    let stated = usize::from(u16::from_be_bytes([packet[2], packet[3]]));
    if stated < header || stated <= usize::from(mtu) {
        return false;
    }
    // Flags and fragment offset at bytes 6..8: DF is 0x4000, the offset the low 13 bits.
    let df = packet[6] & 0x40 != 0;
    let offset = u16::from_be_bytes([packet[6] & 0x1f, packet[7]]);
    if !df || offset != 0 {
        return false;
    }
    let src = Ipv4Addr::new(packet[12], packet[13], packet[14], packet[15]);
    let dst = Ipv4Addr::new(packet[16], packet[17], packet[18], packet[19]);
    if !v4_unicast(src) || !v4_unicast(dst) {
        return false;
    }
    let present = packet.len().min(stated);
    if present < stated.min(header + 8) {
        return false;
    }
    // RFC 1122 §3.2.2: no ICMP error about an ICMP error.
    if packet[9] == PROTO_ICMP
        && packet
            .get(header)
            .is_some_and(|&t| matches!(t, 3 | 4 | 5 | 11 | 12))
    {
        return false;
    }
    let quoted = present.min(IPV4_ANSWER_MAX - IPV4_MIN_HEADER - ICMP_HEADER);
    let total = IPV4_MIN_HEADER + ICMP_HEADER + quoted;

    out.reserve(total);
    out.extend_from_slice(&[0x45, TOS_INTERNETWORK_CONTROL]);
    out.extend_from_slice(&(total as u16).to_be_bytes());
    // Identification 0, no flags: the answer only travels from the TUN device to the local
    // stack, never across a link that could fragment it.
    out.extend_from_slice(&[0, 0, 0, 0, HOP_LIMIT, PROTO_ICMP, 0, 0]);
    out.extend_from_slice(&dst.octets());
    out.extend_from_slice(&src.octets());
    let ip_sum = checksum(sum(0, &out[..IPV4_MIN_HEADER]));
    out[10..12].copy_from_slice(&ip_sum.to_be_bytes());

    // RFC 1191 §4: type, code, checksum, 16 unused bits, next-hop MTU.
    out.extend_from_slice(&[ICMP_UNREACHABLE, ICMP_FRAG_NEEDED, 0, 0, 0, 0]);
    out.extend_from_slice(&mtu.to_be_bytes());
    out.extend_from_slice(&packet[..quoted]);
    let icmp_sum = checksum(sum(0, &out[IPV4_MIN_HEADER..]));
    out[IPV4_MIN_HEADER + 2..IPV4_MIN_HEADER + 4].copy_from_slice(&icmp_sum.to_be_bytes());
    true
}

fn too_big_v6(packet: &[u8], mtu: u16, out: &mut Vec<u8>) -> bool {
    if packet.len() < IPV6_HEADER {
        return false;
    }
    let stated = IPV6_HEADER + usize::from(u16::from_be_bytes([packet[4], packet[5]]));
    if stated <= usize::from(mtu) {
        return false;
    }
    let src = v6_addr(&packet[8..24]);
    let dst = v6_addr(&packet[24..40]);
    if !v6_unicast(src) || !v6_unicast(dst) {
        return false;
    }
    let present = packet.len().min(stated);
    if present < stated.min(IPV6_HEADER + 8) {
        return false;
    }
    // RFC 4443 §2.4 (e.1): no ICMPv6 error about an ICMPv6 error.
    if packet[6] == NEXT_HEADER_ICMPV6
        && packet
            .get(IPV6_HEADER)
            .is_some_and(|&t| t < ICMPV6_INFO_MIN)
    {
        return false;
    }
    let quoted = present.min(IPV6_MIN_MTU - IPV6_HEADER - ICMP_HEADER);
    let payload = ICMP_HEADER + quoted;
    let mtu_field = u32::from(mtu).max(IPV6_MIN_MTU as u32);

    out.reserve(IPV6_HEADER + payload);
    // Traffic class 0, flow label 0.
    out.extend_from_slice(&[0x60, 0, 0, 0]);
    out.extend_from_slice(&(payload as u16).to_be_bytes());
    out.extend_from_slice(&[NEXT_HEADER_ICMPV6, HOP_LIMIT]);
    out.extend_from_slice(&dst.octets());
    out.extend_from_slice(&src.octets());

    // RFC 4443 §3.2: type, code, checksum, MTU.
    out.extend_from_slice(&[ICMPV6_PACKET_TOO_BIG, 0, 0, 0]);
    out.extend_from_slice(&mtu_field.to_be_bytes());
    out.extend_from_slice(&packet[..quoted]);
    // RFC 8200 §8.1: the checksum covers a pseudo-header of both addresses (as sent), the
    // upper-layer length and the next header.
    let mut acc = sum(0, &out[8..IPV6_HEADER]);
    acc = sum(acc, &(payload as u32).to_be_bytes());
    acc = sum(acc, &[0, 0, 0, NEXT_HEADER_ICMPV6]);
    acc = sum(acc, &out[IPV6_HEADER..]);
    let icmp_sum = checksum(acc);
    out[IPV6_HEADER + 2..IPV6_HEADER + 4].copy_from_slice(&icmp_sum.to_be_bytes());
    true
}

/// An address an ICMP error may be sent to or from.
fn v4_unicast(a: Ipv4Addr) -> bool {
    !(a.is_unspecified() || a.is_multicast() || a.is_broadcast())
}

/// An address an ICMPv6 error may be sent to or from.
fn v6_unicast(a: Ipv6Addr) -> bool {
    !(a.is_unspecified() || a.is_multicast())
}

fn v6_addr(bytes: &[u8]) -> Ipv6Addr {
    let mut octets = [0u8; 16];
    for (o, b) in octets.iter_mut().zip(bytes) {
        *o = *b;
    }
    Ipv6Addr::from(octets)
}

/// Adds `data` as big-endian 16-bit words to the one's-complement accumulator `acc` (RFC
/// 1071); an odd last byte is padded with a zero. Parts summed one after another must all
/// have even lengths but the last.
fn sum(mut acc: u64, data: &[u8]) -> u64 {
    let mut words = data.chunks_exact(2);
    for w in &mut words {
        acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        acc += u64::from(*last) << 8;
    }
    acc
}

/// The checksum field for the accumulated sum: the one's complement of its 16-bit fold.
fn checksum(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// One token in the bucket of a [`TooBigLimiter`], in micro-tokens: refilling `per_sec`
/// tokens a second is then `per_sec` micro-tokens a microsecond, exactly.
const TOKEN: u64 = 1_000_000;

/// A token bucket bounding how many "too big" answers the daemon sends, so a flood of
/// oversized packets cannot turn into a flood of ICMP (RFC 4443 §2.4 (f)). Sans-IO: time is
/// an argument. Starts full.
#[derive(Debug, Clone)]
pub struct TooBigLimiter {
    per_sec: u32,
    burst: u32,
    /// Micro-tokens available, at most `burst` tokens.
    tokens: u64,
    /// The latest instant seen.
    last: Instant,
    /// Answers refused by [`TooBigLimiter::allow`].
    pub limited: u64,
}

impl Default for TooBigLimiter {
    /// 100 answers a second, bursts of 20.
    fn default() -> Self {
        TooBigLimiter::new(100, 20)
    }
}

impl TooBigLimiter {
    /// A limiter refilling `per_sec` answers a second, holding at most `burst` (and starting
    /// with them). `burst` 0 refuses everything; `per_sec` 0 allows only the first burst.
    pub fn new(per_sec: u32, burst: u32) -> Self {
        TooBigLimiter {
            per_sec,
            burst,
            tokens: u64::from(burst) * TOKEN,
            last: Instant::ZERO,
            limited: 0,
        }
    }

    /// Whether an answer may be sent at `now`, taking a token if so; a refusal is counted in
    /// [`TooBigLimiter::limited`]. A `now` earlier than one already seen refills nothing.
    pub fn allow(&mut self, now: Instant) -> bool {
        let elapsed =
            u64::try_from(now.saturating_since(self.last).as_micros()).unwrap_or(u64::MAX);
        self.last = self.last.max(now);
        let capacity = u64::from(self.burst) * TOKEN;
        self.tokens = self
            .tokens
            .saturating_add(elapsed.saturating_mul(u64::from(self.per_sec)))
            .min(capacity);
        if self.tokens >= TOKEN {
            self.tokens -= TOKEN;
            true
        } else {
            self.limited += 1;
            false
        }
    }
}

#[cfg(test)]
mod tests;
