//! Per-flow classes: which carrier takes an IP packet, by its DSCP, protocol or port.
//!
//! The tunnel has two carriers on the same links and session: the reliable stream (the braid
//! core, PtoS/StoP) and per-packet datagrams (HYA: each packet alone on one link, reordered at
//! the far end, never retransmitted; what real-time UDP such as voice, video calls and games
//! wants). A [`Classes`] is a default carrier and rules tried in order; the first rule whose
//! every condition holds picks the carrier. A port condition holds when the source OR the
//! destination port is in its range, so one rule covers both directions of a flow.
//!
//! Sans-IO: reads only the packet's header. A packet too short to show a field does not match
//! a rule on that field. IPv6 extension headers are not walked: the protocol is the fixed
//! header's next header, and ports are read only when it is a transport protocol. IPv4
//! fragments after the first have no ports.

use std::fmt;
use std::ops::RangeInclusive;

/// What carries a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Carrier {
    /// The reliable stream of the braid core.
    Stream,
    /// One datagram per packet (HYA).
    PerPacket,
}

/// One rule: conditions (all must hold; at least one is set) and the carrier it picks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The carrier of matching packets.
    pub carrier: Carrier,
    /// IP protocol number (IPv4 protocol, IPv6 next header).
    pub protocol: Option<u8>,
    /// Source or destination port range (TCP, UDP, UDP-Lite, SCTP, DCCP).
    pub ports: Option<RangeInclusive<u16>>,
    /// DSCP (the high six bits of the traffic class).
    pub dscp: Option<u8>,
}

/// The default carrier and the rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classes {
    /// The carrier of packets no rule matches.
    pub default: Carrier,
    /// Tried in order.
    pub rules: Vec<Rule>,
    /// Pure TCP acknowledgements (no payload; no SYN, FIN or RST) go per packet, before any
    /// rule: on the stream they would wait behind everything queued in their direction (a bulk
    /// upload's backlog holds a download's acknowledgements back and stalls it), while a lost
    /// one is covered by the next. Connection set-up and teardown stay on the stream.
    pub acks_per_packet: bool,
}

impl Classes {
    /// Every packet on `carrier`.
    pub fn all(carrier: Carrier) -> Classes {
        Classes {
            default: carrier,
            rules: Vec::new(),
            acks_per_packet: false,
        }
    }

    /// The carrier of `packet`.
    pub fn carrier(&self, packet: &[u8]) -> Carrier {
        if self.rules.is_empty() && !self.acks_per_packet {
            return self.default;
        }
        let h = Header::parse(packet);
        if self.acks_per_packet && h.pure_ack {
            return Carrier::PerPacket;
        }
        self.rules
            .iter()
            .find(|r| r.matches(&h))
            .map_or(self.default, |r| r.carrier)
    }

    /// Whether any packet can go on `carrier`.
    pub fn uses(&self, carrier: Carrier) -> bool {
        self.default == carrier
            || self.rules.iter().any(|r| r.carrier == carrier)
            || (self.acks_per_packet && carrier == Carrier::PerPacket)
    }
}

impl Rule {
    fn matches(&self, h: &Header) -> bool {
        let proto = self.protocol.is_none_or(|p| h.protocol == Some(p));
        let dscp = self.dscp.is_none_or(|d| h.dscp == Some(d));
        let ports = self.ports.as_ref().is_none_or(|r| {
            h.ports
                .is_some_and(|(s, d)| r.contains(&s) || r.contains(&d))
        });
        proto && dscp && ports
    }
}

/// Whether `packet` is a pure TCP acknowledgement (see [`Classes::acks_per_packet`]): it
/// needs no order, so the per-packet receiver passes it on at once.
pub fn is_pure_ack(packet: &[u8]) -> bool {
    Header::parse(packet).pure_ack
}

/// The fields a rule reads.
#[derive(Debug, Default)]
struct Header {
    protocol: Option<u8>,
    dscp: Option<u8>,
    ports: Option<(u16, u16)>,
    /// A TCP segment with ACK set, no SYN, FIN or RST, and no payload.
    pure_ack: bool,
}

/// TCP flags (RFC 9293 §3.1).
const TCP_FIN: u8 = 0x01;
const TCP_SYN: u8 = 0x02;
const TCP_RST: u8 = 0x04;
const TCP_ACK: u8 = 0x10;

/// Whether `tcp`, the rest of an IP packet whose payload is `payload_len` bytes long, is a
/// pure acknowledgement.
fn pure_ack(tcp: &[u8], payload_len: usize) -> bool {
    let (Some(&off), Some(&flags)) = (tcp.get(12), tcp.get(13)) else {
        return false;
    };
    let header_len = usize::from(off >> 4) * 4;
    header_len >= 20
        && header_len == payload_len
        && flags & TCP_ACK != 0
        && flags & (TCP_SYN | TCP_FIN | TCP_RST) == 0
}

/// IP protocols whose header starts with 16-bit source and destination ports.
const PORTED: [u8; 5] = [6, 17, 33, 132, 136];

impl Header {
    fn parse(p: &[u8]) -> Header {
        let Some(&b0) = p.first() else {
            return Header::default();
        };
        // (protocol, DSCP, transport header offset, IP payload length).
        let (protocol, dscp, transport, payload_len) = match b0 >> 4 {
            // RFC 791 §3.1; RFC 2474 §3: DSCP is the high six bits of the TOS octet.
            4 if p.len() >= 20 => {
                let ihl = usize::from(b0 & 0x0f) * 4;
                let flags_fragment = u16::from_be_bytes([p[6], p[7]]);
                let whole = flags_fragment & 0x3fff == 0;
                let first_fragment = flags_fragment & 0x1fff == 0;
                let total = usize::from(u16::from_be_bytes([p[2], p[3]]));
                (
                    p[9],
                    p[1] >> 2,
                    (ihl >= 20 && first_fragment).then_some(ihl),
                    (whole && total >= ihl).then(|| total - ihl),
                )
            }
            // RFC 8200 §3: traffic class across bytes 0 and 1, next header at 6, payload length
            // at 4.
            6 if p.len() >= 40 => (
                p[6],
                ((b0 & 0x0f) << 2) | (p[1] >> 6),
                Some(40),
                Some(usize::from(u16::from_be_bytes([p[4], p[5]]))),
            ),
            _ => return Header::default(),
        };
        let pure_ack = protocol == 6
            && transport
                .zip(payload_len)
                .is_some_and(|(at, len)| p.get(at..).is_some_and(|tcp| pure_ack(tcp, len)));
        let ports = transport
            .filter(|_| PORTED.contains(&protocol))
            .and_then(|at| p.get(at..at + 4))
            .map(|b| {
                (
                    u16::from_be_bytes([b[0], b[1]]),
                    u16::from_be_bytes([b[2], b[3]]),
                )
            });
        Header {
            protocol: Some(protocol),
            dscp: Some(dscp),
            ports,
            pure_ack,
        }
    }
}

/// A protocol by name (`udp`, `tcp`, `icmp`, `icmpv6`, `sctp`, `udplite`, `dccp`, `gre`,
/// `esp`) or number 0–255.
pub fn parse_protocol(s: &str) -> Result<u8, String> {
    let names = [
        ("icmp", 1),
        ("tcp", 6),
        ("udp", 17),
        ("dccp", 33),
        ("gre", 47),
        ("esp", 50),
        ("icmpv6", 58),
        ("sctp", 132),
        ("udplite", 136),
    ];
    let t = s.trim().to_ascii_lowercase();
    names
        .iter()
        .find(|(n, _)| *n == t)
        .map(|(_, v)| *v)
        .or_else(|| t.parse().ok())
        .ok_or_else(|| {
            format!(
                "`{s}` is not a protocol: a number 0-255 or one of {}",
                names.map(|(n, _)| n).join(", ")
            )
        })
}

/// A port (`5004`) or an inclusive range (`5000-5010`).
pub fn parse_ports(s: &str) -> Result<RangeInclusive<u16>, String> {
    let bad = || format!("`{s}` is not a port or a range of ports (e.g. 5004 or 5000-5010)");
    let (a, b) = s.split_once('-').unwrap_or((s, s));
    let a: u16 = a.trim().parse().map_err(|_| bad())?;
    let b: u16 = b.trim().parse().map_err(|_| bad())?;
    if a > b {
        return Err(bad());
    }
    Ok(a..=b)
}

/// A DSCP: a number 0–63 or a name (`ef`, `va`, `cs0`–`cs7`, `af11`–`af43`).
pub fn parse_dscp(s: &str) -> Result<u8, String> {
    let t = s.trim().to_ascii_lowercase();
    let bad = || format!("`{s}` is not a DSCP: a number 0-63, ef, va, cs0-cs7 or af11-af43");
    // RFC 3246 (EF 46), RFC 5865 (VOICE-ADMIT 44), RFC 2474 §4.2.2 (CSn = 8n), RFC 2597
    // (AFxy = 8x + 2y).
    let v = match t.as_str() {
        "ef" => Some(46),
        "va" => Some(44),
        _ => {
            if let Some(n) = t.strip_prefix("cs") {
                n.parse::<u8>().ok().filter(|n| *n <= 7).map(|n| 8 * n)
            } else if let Some(xy) = t.strip_prefix("af") {
                let d: Vec<u8> = xy.bytes().map(|b| b.wrapping_sub(b'0')).collect();
                match d[..] {
                    [x @ 1..=4, y @ 1..=3] => Some(8 * x + 2 * y),
                    _ => None,
                }
            } else {
                t.parse::<u8>().ok()
            }
        }
    };
    let v = v.ok_or_else(bad)?;
    if v > 63 {
        return Err(bad());
    }
    Ok(v)
}

impl fmt::Display for Carrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Carrier::Stream => "stream",
            Carrier::PerPacket => "per-packet",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn udp4(sport: u16, dport: u16, tos: u8) -> Vec<u8> {
        let mut p = vec![0u8; 28];
        p[0] = 0x45;
        p[1] = tos;
        p[9] = 17;
        p[20..22].copy_from_slice(&sport.to_be_bytes());
        p[22..24].copy_from_slice(&dport.to_be_bytes());
        p
    }

    fn tcp6(sport: u16, dport: u16, tclass: u8) -> Vec<u8> {
        let mut p = vec![0u8; 60];
        p[0] = 0x60 | (tclass >> 4);
        p[1] = tclass << 4;
        p[6] = 6;
        p[40..42].copy_from_slice(&sport.to_be_bytes());
        p[42..44].copy_from_slice(&dport.to_be_bytes());
        p
    }

    fn rule(protocol: Option<u8>, ports: Option<RangeInclusive<u16>>, dscp: Option<u8>) -> Rule {
        Rule {
            carrier: Carrier::PerPacket,
            protocol,
            ports,
            dscp,
        }
    }

    #[test]
    fn a_udp_port_rule_takes_both_directions_of_the_flow_only() {
        let c = Classes {
            default: Carrier::Stream,
            rules: vec![rule(Some(17), Some(5004..=5004), None)],
            acks_per_packet: false,
        };
        assert_eq!(c.carrier(&udp4(40000, 5004, 0)), Carrier::PerPacket);
        assert_eq!(c.carrier(&udp4(5004, 40000, 0)), Carrier::PerPacket);
        assert_eq!(c.carrier(&udp4(40000, 5005, 0)), Carrier::Stream);
        assert_eq!(c.carrier(&tcp6(40000, 5004, 0)), Carrier::Stream);
        // A later fragment has no ports.
        let mut frag = udp4(40000, 5004, 0);
        frag[7] = 10;
        assert_eq!(c.carrier(&frag), Carrier::Stream);
        assert!(c.uses(Carrier::PerPacket) && c.uses(Carrier::Stream));
    }

    #[test]
    fn dscp_of_both_families_and_rule_order() {
        let c = Classes {
            default: Carrier::PerPacket,
            rules: vec![
                Rule {
                    carrier: Carrier::Stream,
                    ..rule(None, None, Some(46))
                },
                rule(Some(6), None, None),
                Rule {
                    carrier: Carrier::Stream,
                    ..rule(Some(6), None, None)
                },
            ],
            acks_per_packet: false,
        };
        assert_eq!(c.carrier(&udp4(1, 2, 46 << 2)), Carrier::Stream);
        assert_eq!(c.carrier(&tcp6(1, 2, 46 << 2)), Carrier::Stream);
        assert_eq!(c.carrier(&udp4(1, 2, 0)), Carrier::PerPacket);
        // The first rule that holds wins.
        assert_eq!(c.carrier(&tcp6(1, 2, 0)), Carrier::PerPacket);
        assert_eq!(c.carrier(&[]), Carrier::PerPacket);
    }

    /// A TCP segment with `flags` and `payload` bytes after a 20-byte header (options: 12
    /// more), over IPv4 or IPv6.
    fn tcp(v6: bool, flags: u8, payload: usize, options: bool) -> Vec<u8> {
        let th = if options { 32 } else { 20 };
        let ih = if v6 { 40 } else { 20 };
        let mut p = vec![0u8; ih + th + payload];
        if v6 {
            p[0] = 0x60;
            p[4..6].copy_from_slice(&((th + payload) as u16).to_be_bytes());
            p[6] = 6;
        } else {
            p[0] = 0x45;
            let total = p.len() as u16;
            p[2..4].copy_from_slice(&total.to_be_bytes());
            p[6] = 0x40; // don't fragment
            p[9] = 6;
        }
        p[ih + 12] = ((th / 4) as u8) << 4;
        p[ih + 13] = flags;
        p
    }

    #[test]
    fn pure_acks_go_per_packet_and_nothing_else_does() {
        let c = Classes {
            acks_per_packet: true,
            ..Classes::all(Carrier::Stream)
        };
        for v6 in [false, true] {
            for options in [false, true] {
                // ACK, ACK|PSH, ACK|ECE|CWR: pure acknowledgements.
                for flags in [0x10, 0x18, 0xd0] {
                    assert_eq!(c.carrier(&tcp(v6, flags, 0, options)), Carrier::PerPacket);
                }
                // Data, SYN|ACK, FIN|ACK, RST|ACK, no ACK: the stream.
                assert_eq!(c.carrier(&tcp(v6, 0x10, 1, options)), Carrier::Stream);
                for flags in [0x12, 0x11, 0x14, 0x02, 0x00] {
                    assert_eq!(c.carrier(&tcp(v6, flags, 0, options)), Carrier::Stream);
                }
            }
            // A truncated header or a length that does not add up: the stream.
            let p = tcp(v6, 0x10, 0, false);
            assert_eq!(c.carrier(&p[..p.len() - 8]), Carrier::Stream);
        }
        let mut frag = tcp(false, 0x10, 0, false);
        frag[6] = 0x20; // more fragments
        assert_eq!(c.carrier(&frag), Carrier::Stream);
        assert_eq!(c.carrier(&udp4(1, 2, 0)), Carrier::Stream);
        assert!(c.uses(Carrier::PerPacket));
        let off = Classes::all(Carrier::Stream);
        assert_eq!(off.carrier(&tcp(false, 0x10, 0, false)), Carrier::Stream);
        assert!(!off.uses(Carrier::PerPacket));
    }

    #[test]
    fn values_parse_with_clear_errors() {
        assert_eq!(parse_protocol("UDP"), Ok(17));
        assert_eq!(parse_protocol("47"), Ok(47));
        assert!(parse_protocol("udpp").unwrap_err().contains("`udpp`"));
        assert!(parse_protocol("256").is_err());
        assert_eq!(parse_ports("5004"), Ok(5004..=5004));
        assert_eq!(parse_ports("5000-5010"), Ok(5000..=5010));
        assert!(parse_ports("5010-5000").is_err());
        assert!(parse_ports("50x").unwrap_err().contains("5004"));
        assert_eq!(parse_dscp("ef"), Ok(46));
        assert_eq!(parse_dscp("AF41"), Ok(34));
        assert_eq!(parse_dscp("cs6"), Ok(48));
        assert_eq!(parse_dscp("63"), Ok(63));
        assert!(parse_dscp("64").is_err());
        assert!(parse_dscp("af44").is_err());
        assert!(parse_dscp("cs8").is_err());
    }

    proptest! {
        #[test]
        fn any_bytes_get_a_carrier(p in proptest::collection::vec(any::<u8>(), 0..80)) {
            let c = Classes {
                default: Carrier::Stream,
                rules: vec![rule(Some(17), Some(1..=9), Some(0))],
                acks_per_packet: true,
            };
            let _ = c.carrier(&p);
        }
    }
}
