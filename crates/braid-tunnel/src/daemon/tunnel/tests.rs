//! Two tunnel connections wired back to back in memory (no sockets, no crypto): the carriers,
//! the classes and the per-packet carrier's handling of bad input.

use std::time::Duration;

use braid_hya::wire::{DataHeader, FEEDBACK};

use super::*;
use crate::daemon::config::ClientConfig;

fn config(top: &str, mtu: u16) -> TunnelConfig {
    let text = format!(
        r#"
private_key = "yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk="
gateway_public_key = "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg="
gateway = "192.0.2.1:7000"
{top}
[datagram]
inseq_timeout_us = 0
[tun]
address = "10.200.0.2/24"
mtu = {mtu}
[[link]]
name = "eth0"
[[link]]
name = "wwan0"
"#
    );
    ClientConfig::parse(&text, [])
        .unwrap()
        .tunnel_config()
        .unwrap()
}

/// An IPv4 UDP packet of `len` bytes to `port`, its payload `seq` repeated.
fn udp(port: u16, seq: u8, len: usize) -> Vec<u8> {
    let mut p = vec![seq; len];
    p[0] = 0x45;
    p[1] = 0;
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p[6] = 0;
    p[7] = 0;
    p[9] = 17;
    p[20..22].copy_from_slice(&40000u16.to_be_bytes());
    p[22..24].copy_from_slice(&port.to_be_bytes());
    p
}

struct Pair {
    c: Tunnel,
    s: Tunnel,
    now: Instant,
    /// Packets each side emitted to its TUN device.
    at_s: Vec<Vec<u8>>,
    at_c: Vec<Vec<u8>>,
    /// Datagram payloads the client sent, in order (after the connection id).
    sent: Vec<Vec<u8>>,
    /// Every datagram is lost, both ways, while set.
    blackhole: bool,
}

impl Pair {
    fn new(cfg: &TunnelConfig) -> Pair {
        let now = Instant::ZERO;
        let mut c = Tunnel::new(cfg, Side::Client, now, 7);
        let s = Tunnel::new(cfg, Side::Server, now, 7);
        c.conn.open_path(now, AddrId(0), AddrId(0), false).unwrap();
        let mut p = Pair {
            c,
            s,
            now,
            at_s: Vec::new(),
            at_c: Vec::new(),
            sent: Vec::new(),
            blackhole: false,
        };
        p.run(Duration::from_millis(50));
        p.c.conn
            .open_path(p.now, AddrId(1), AddrId(0), false)
            .unwrap();
        p.run(Duration::from_millis(50));
        assert_eq!(p.c.conn.paths().filter(|x| x.established).count(), 2);
        p
    }

    /// Moves datagrams both ways (1 ms apart) for `d`.
    fn run(&mut self, d: Duration) {
        let end = self.now + d;
        let mut buf = Vec::new();
        while self.now < end {
            for (from, to, sent) in [(0, 1, true), (1, 0, false)] {
                let (a, b) = if from == 0 {
                    (&mut self.c, &mut self.s)
                } else {
                    (&mut self.s, &mut self.c)
                };
                let _ = to;
                while a.poll_transmit(self.now, &mut buf).is_some() {
                    let (id, payload) = split(&buf).unwrap();
                    assert_eq!(id, 7);
                    if sent {
                        self.sent.push(payload.to_vec());
                    }
                    if !self.blackhole {
                        b.handle(self.now, payload);
                    }
                }
            }
            for t in [&mut self.c, &mut self.s] {
                if t.poll_timeout().is_some_and(|x| x <= self.now) {
                    t.handle_timeout(self.now);
                }
            }
            let (at_s, at_c) = (&mut self.at_s, &mut self.at_c);
            self.s.drain(|p| at_s.push(p.to_vec())).unwrap();
            self.c.drain(|p| at_c.push(p.to_vec())).unwrap();
            self.c.feed(self.now);
            self.s.feed(self.now);
            self.now += Duration::from_millis(1);
        }
    }
}

#[test]
fn datagram_transport_sends_each_packet_alone_and_delivers_in_order() {
    let cfg = config("transport = \"datagram\"", 1400);
    let mut p = Pair::new(&cfg);
    let before = p.c.conn.stats().data_packets_sent;
    let sent_before = p.sent.len();
    for i in 0..100u8 {
        p.c.push(p.now, &udp(9, i, 200 + usize::from(i))).unwrap();
    }
    p.run(Duration::from_millis(100));
    let want: Vec<Vec<u8>> = (0..100u8)
        .map(|i| udp(9, i, 200 + usize::from(i)))
        .collect();
    assert_eq!(p.at_s, want);
    assert_eq!(
        p.c.conn.stats().data_packets_sent,
        before,
        "nothing on the stream"
    );
    // One datagram per packet, over both paths (1:1), and feedback came back.
    let per_packet: Vec<&Vec<u8>> = p.sent[sent_before..]
        .iter()
        .filter(|d| d[0] == braid_hya::wire::DATA)
        .collect();
    assert_eq!(per_packet.len(), 100);
    let on_path0 = per_packet
        .iter()
        .filter(|d| d[1..5] == [0, 0, 0, 0])
        .count();
    assert_eq!(on_path0, 50);
    let j = p.s.per_packet.json();
    assert_eq!(j["released_packets"], 100);
    assert!(p.s.per_packet.json()["feedback_sent"].as_u64().unwrap() > 0);
    let st = p.c.per_packet.json();
    assert_eq!(st["paths_sent"][0]["delivered"], 50, "{st}");
}

/// The configuration whose class sends UDP port 5004 per packet, the rest on the stream.
fn config_5004() -> TunnelConfig {
    let cfg = config("", 1500);
    TunnelConfig {
        classes: Arc::new({
            let mut c = (*cfg.classes).clone();
            c.rules = vec![crate::class::Rule {
                carrier: Carrier::PerPacket,
                protocol: Some(17),
                ports: Some(5004..=5004),
                dscp: None,
            }];
            c
        }),
        ..cfg
    }
}

#[test]
fn a_class_rule_picks_the_carrier_per_packet() {
    let mut p = Pair::new(&config_5004());
    let stream_before = p.c.conn.stats().data_packets_sent;
    for i in 0..20u8 {
        p.c.push(p.now, &udp(5004, i, 300)).unwrap();
        p.c.push(p.now, &udp(5005, i, 300)).unwrap();
    }
    p.run(Duration::from_millis(100));
    assert_eq!(p.at_s.len(), 40);
    let rtp: Vec<_> = p
        .at_s
        .iter()
        .filter(|x| x[22..24] == 5004u16.to_be_bytes())
        .collect();
    assert_eq!(
        rtp,
        (0..20u8)
            .map(|i| udp(5004, i, 300))
            .collect::<Vec<_>>()
            .iter()
            .collect::<Vec<_>>()
    );
    assert_eq!(p.c.per_packet.json()["sent_packets"], 20);
    assert!(
        p.c.conn.stats().data_packets_sent > stream_before,
        "port 5005 on the stream"
    );
    // A packet of the class too big for one datagram goes on the stream.
    p.c.push(p.now, &udp(5004, 99, 1450)).unwrap();
    p.run(Duration::from_millis(50));
    assert_eq!(p.at_s.last().unwrap(), &udp(5004, 99, 1450));
    assert_eq!(p.c.per_packet.json()["oversize_on_stream"], 1);
}

#[test]
fn bad_per_packet_datagrams_are_dropped_and_counted_by_reason() {
    let cfg = config("transport = \"datagram\"", 1400);
    let mut p = Pair::new(&cfg);
    for i in 0..5u8 {
        p.c.push(p.now, &udp(9, i, 100)).unwrap();
    }
    p.run(Duration::from_millis(20));
    assert_eq!(p.at_s.len(), 5);
    let captured: Vec<Vec<u8>> = p
        .sent
        .iter()
        .filter(|d| d[0] == braid_hya::wire::DATA)
        .cloned()
        .collect();
    let path = PathId(u32::from_be_bytes(captured[0][1..5].try_into().unwrap()));
    let forged = |seq: u64, link: u32| {
        let mut d = Vec::new();
        DataHeader {
            link,
            seq,
            link_seq: 0,
        }
        .emit(&mut d);
        d.extend_from_slice(&udp(9, 0, 60));
        d
    };
    let now = p.now;
    // Replayed (each captured datagram again), truncated, malformed, beyond the window,
    // naming a path that does not exist.
    for d in &captured {
        assert_eq!(p.s.handle(now, d), None);
    }
    assert_eq!(p.s.handle(now, &captured[0][..10]), None);
    assert_eq!(p.s.handle(now, &[FEEDBACK, 0]), None);
    assert_eq!(p.s.handle(now, &[braid_hya::wire::DATA]), None);
    assert_eq!(p.s.handle(now, &forged(1 << 40, path.0)), None);
    assert_eq!(p.s.handle(now, &forged(5, 999)), None);
    let drops: std::collections::HashMap<String, u64> = p.s.per_packet_drops().collect();
    assert_eq!(drops["datagram_replayed"], 5, "{drops:?}");
    assert_eq!(drops["datagram_truncated"], 2, "{drops:?}");
    assert_eq!(drops["datagram_malformed"], 1, "{drops:?}");
    assert_eq!(drops["datagram_out_of_window"], 1, "{drops:?}");
    assert_eq!(drops["datagram_unknown_link"], 1, "{drops:?}");
    // Nothing reached the TUN device, and the tunnel still works.
    p.run(Duration::from_millis(20));
    assert_eq!(p.at_s.len(), 5);
    p.c.push(p.now, &udp(9, 42, 100)).unwrap();
    p.run(Duration::from_millis(20));
    assert_eq!(p.at_s.last().unwrap(), &udp(9, 42, 100));
}

/// The stream's timers can suspect every path at once (a bulk transfer filling every queue):
/// the per-packet carrier then still sends on the established paths rather than dropping.
#[test]
fn per_packet_sends_on_suspected_paths_when_every_path_is_suspected() {
    let mut p = Pair::new(&config_5004());
    for i in 0..60u8 {
        p.c.push(p.now, &udp(5005, i, 1200)).unwrap();
    }
    p.run(Duration::from_millis(1));
    p.blackhole = true;
    let mut waited = Duration::ZERO;
    while p.c.conn.paths().any(|x| x.usable) {
        assert!(waited < Duration::from_secs(5), "a path stayed usable");
        p.run(Duration::from_millis(5));
        waited += Duration::from_millis(5);
    }
    assert_eq!(p.c.conn.paths().filter(|x| x.established).count(), 2);
    p.blackhole = false;
    let before = p.at_s.len();
    for i in 0..10u8 {
        p.c.push(p.now, &udp(5004, i, 300)).unwrap();
    }
    let drops: std::collections::HashMap<String, u64> = p.c.per_packet_drops().collect();
    assert_eq!(drops["datagram_no_path"], 0, "{drops:?}");
    assert_eq!(p.c.per_packet.json()["sent_packets"], 10);
    p.run(Duration::from_millis(500));
    let rtp: Vec<_> = p.at_s[before..]
        .iter()
        .filter(|x| x[22..24] == 5004u16.to_be_bytes())
        .cloned()
        .collect();
    assert_eq!(
        rtp,
        (0..10u8).map(|i| udp(5004, i, 300)).collect::<Vec<_>>()
    );
}

/// An IPv4 TCP segment of 40 bytes with `flags` and no payload.
fn tcp_segment(flags: u8) -> Vec<u8> {
    let mut p = vec![0u8; 40];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&40u16.to_be_bytes());
    p[6] = 0x40;
    p[9] = 6;
    p[32] = 5 << 4;
    p[33] = flags;
    p
}

#[test]
fn pure_acks_go_per_packet_and_are_passed_on_at_once() {
    let cfg = config("", 1400);
    assert!(cfg.classes.acks_per_packet);
    let mut p = Pair::new(&cfg);
    let stream_before = p.c.conn.stats().data_packets_sent;
    let ack = tcp_segment(0x10);
    p.c.push(p.now, &ack).unwrap();
    // One step: sent, received and drained in the same millisecond, without the reorder
    // buffer's in-sequence wait.
    p.run(Duration::from_millis(1));
    assert_eq!(p.at_s, vec![ack.clone()]);
    assert_eq!(p.c.per_packet.json()["sent_packets"], 1);
    assert_eq!(p.c.conn.stats().data_packets_sent, stream_before);
    // A SYN, and the packets of a class behind the acknowledgement, keep their carriers and
    // order; the placeholder of the acknowledgement is never emitted.
    let syn = tcp_segment(0x02);
    p.c.push(p.now, &syn).unwrap();
    p.c.push(p.now, &ack).unwrap();
    p.run(Duration::from_millis(50));
    assert_eq!(p.at_s.len(), 3, "{:?}", p.at_s);
    assert!(p.at_s.contains(&syn));
    assert!(p.at_s.iter().all(|x| !x.is_empty()));
    assert_eq!(p.c.per_packet.json()["sent_packets"], 2);
    assert!(
        p.c.conn.stats().data_packets_sent > stream_before,
        "the SYN on the stream"
    );
}

/// A connection sized to a narrower path (`for_udp_payload`): every datagram fits it, a batch
/// still fills one datagram, the stream's packets arrive whole and in order, and a packet too
/// large for the per-packet carrier at the new size goes on the stream instead. A size below
/// the core's minimum leaves the configuration as it was.
#[test]
fn a_connection_sized_to_a_narrower_path_sends_only_datagrams_that_fit() {
    let wide = config("", 1400);
    assert_eq!(wide.udp_payload(), 1472);
    let narrow = wide.for_udp_payload(1272);
    assert_eq!(narrow.udp_payload(), 1272);
    assert_eq!(narrow.core.max_datagram_size, 1272 - DATAGRAM_OVERHEAD);
    assert_eq!(
        narrow.ptos.threshold,
        narrow.core.max_datagram_size - SEGMENT_HEADERS
    );
    let tiny = wide.for_udp_payload(100);
    assert_eq!(
        tiny.udp_payload(),
        1472,
        "below the core's minimum: unchanged"
    );
    let mut p = Pair::new(&narrow);
    let sent_before = p.sent.len();
    let want: Vec<Vec<u8>> = (0..200u8).map(|i| udp(9, i, 1400)).collect();
    for pkt in &want {
        p.c.push(p.now, pkt).unwrap();
    }
    p.run(Duration::from_millis(200));
    assert_eq!(p.at_s, want);
    let largest = p.sent[sent_before..].iter().map(Vec::len).max().unwrap();
    assert!(
        largest + CONN_ID_LEN + crate::secure::wire::DATA_MIN <= 1272,
        "a datagram of {largest} bytes of payload"
    );
    // Per packet: 1400 bytes no longer fit one 1272-byte datagram, so they take the stream.
    let narrow_pp = config("transport = \"datagram\"", 1400).for_udp_payload(1272);
    let mut p = Pair::new(&narrow_pp);
    for i in 0..10u8 {
        p.c.push(p.now, &udp(9, i, 1400)).unwrap();
        p.c.push(p.now, &udp(9, i, 600)).unwrap();
    }
    p.run(Duration::from_millis(100));
    assert_eq!(p.at_s.len(), 20);
    assert_eq!(p.c.per_packet.json()["oversize_on_stream"], 10);
}

/// A "connection gone" notice is neither a liveness probe nor a core datagram: `split` gives
/// the id and [`GONE`], `probe` does not take it, and a tunnel handed one (by a client that
/// does not know the notice) drops it and keeps working.
#[test]
fn a_connection_gone_notice_is_told_apart_and_harmless_to_a_tunnel() {
    let mut buf = Vec::new();
    gone_plaintext(7, &mut buf);
    let (id, core) = split(&buf).unwrap();
    assert_eq!((id, core), (7, &GONE[..]));
    assert_eq!(probe(core), None);
    let mut p = Pair::new(&config("", 1400));
    let now = p.now;
    assert_eq!(p.c.handle(now, core), None);
    p.s.push(p.now, &udp(9, 1, 100)).unwrap();
    p.run(Duration::from_millis(20));
    assert_eq!(p.at_c, vec![udp(9, 1, 100)]);
}

/// The status counts stream bytes per address over the connection's life: what a path carried
/// stays counted after it closes (`braid lab`'s per-link figures read it), and the receiver's
/// addresses and the sender's view of them agree.
#[test]
fn per_address_counts_keep_what_a_closed_path_carried() {
    let mut p = Pair::new(&config("", 1400));
    for i in 0..200u8 {
        p.s.push(p.now, &udp(9, i, 1000)).unwrap();
    }
    p.run(Duration::from_millis(200));
    assert_eq!(p.at_c.len(), 200);
    let count = |t: &Tunnel, key: &str, addr: u64, what: &str| {
        t.status_json(Instant::ZERO, |_| None)[key]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["addr"] == addr)
            .map_or(0, |a| a[what].as_u64().unwrap())
    };
    let before: Vec<u64> = (0..2)
        .map(|a| count(&p.c, "addrs", a, "data_bytes_received"))
        .collect();
    assert!(
        before.iter().all(|&b| b > 0),
        "both links carried data: {before:?}"
    );
    let second = p.c.conn.paths().find(|x| x.local.0 == 1).unwrap().id;
    p.c.conn.close_path(second).unwrap();
    p.run(Duration::from_millis(100));
    assert!(p.c.conn.paths().all(|x| x.local.0 != 1));
    for i in 0..50u8 {
        p.s.push(p.now, &udp(9, i, 1000)).unwrap();
    }
    p.run(Duration::from_millis(200));
    let after: Vec<u64> = (0..2)
        .map(|a| count(&p.c, "addrs", a, "data_bytes_received"))
        .collect();
    assert_eq!(after[1], before[1], "the closed path's bytes stay counted");
    assert!(after[0] > before[0]);
    // The sender names the client's addresses as its peer's.
    let sent: Vec<u64> = (0..2)
        .map(|a| count(&p.s, "peer_addrs", a, "data_bytes_sent"))
        .collect();
    assert!(
        sent[0] >= after[0] && sent[1] >= after[1],
        "{sent:?} {after:?}"
    );
}
