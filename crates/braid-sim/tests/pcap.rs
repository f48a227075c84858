//! Packet captures: a capture holds every datagram each link direction carried, in IPv4/UDP
//! between the endpoints' addresses, a relayed datagram on every link it crosses with its TTL
//! one lower per hop, and capturing leaves the run unchanged.

use std::path::{Path, PathBuf};

use braid_core::wire::{self, Frame};
use braid_sim::pcap::{PcapCapture, UDP_PORT};
use braid_sim::record::RunOptions;
use braid_sim::{scenario, world};
use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use pcap_file::DataLink;
use pcap_file::pcap::PcapReader;

/// N0 — N1 — N2: N2 downloads 300 kB from N0 through the relay N1.
const CHAIN: &str = r#"
name = "chain"
duration = "3s"
[[node]]
name = "N0"
iface = [{ name = "e0" }]
[[node]]
name = "N1"
iface = [{ name = "e0" }, { name = "e1" }]
[[node]]
name = "N2"
iface = [{ name = "e0" }]
[[link]]
name = "a"
a = "N0.e0"
b = "N1.e0"
rate = "20Mbit"
delay = "5ms"
loss = 0.01
[[link]]
name = "b"
a = "N1.e1"
b = "N2.e0"
rate = "20Mbit"
delay = "5ms"
[app]
kind = "file"
bytes = 300000
client = "N2"
server = "N0"
start = "100ms"
direction = "down"
"#;

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn relayed_datagrams_are_captured_on_every_link() {
    let plan = scenario::load_str(CHAIN, "chain.toml", Path::new("."), &[]).unwrap();
    let variant = &plan.variants[0];
    let dir = TempDir(std::env::temp_dir().join(format!("braid-sim-pcap-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let mut sink = PcapCapture::new(&dir.0, &plan, 0, 0);
    let rec = world::run_captured(variant, 7, RunOptions::default(), &mut sink);
    let files = sink.finish(&rec).unwrap();

    // The capture changes nothing.
    let plain = world::run_with(variant, 7, RunOptions::default());
    assert_eq!(rec.link_stats, plain.link_stats);
    assert_eq!(rec.deliveries, plain.deliveries);
    assert_eq!(rec.events, plain.events);
    assert_eq!(rec.flows[0].delivered, 300_000);

    let topo = &variant.topology;
    let addr = |n: usize| topo.nodes[n].ifaces[0].addr;
    let (server, client) = (addr(0), addr(2));
    // <variant>.rep<r>.<link>.<from>-<to>.pcap; a plan without a sweep has one variant.
    let names: Vec<&str> = files.iter().map(|f| f.file.as_str()).collect();
    let v = &variant.name;
    assert_eq!(
        names,
        [
            format!("{v}.rep0.a.N0-N1.pcap"),
            format!("{v}.rep0.a.N1-N0.pcap"),
            format!("{v}.rep0.b.N1-N2.pcap"),
            format!("{v}.rep0.b.N2-N1.pcap"),
        ]
    );
    assert_eq!(
        (files[0].from.as_str(), files[0].to.as_str()),
        ("N0.e0", "N1.e0")
    );
    for (i, f) in files.iter().enumerate() {
        let file = std::fs::File::open(dir.0.join(&f.file)).unwrap();
        let mut reader = PcapReader::new(file).unwrap();
        assert_eq!(reader.header().datalink, DataLink::IPV4);
        let (mut packets, mut data) = (0u64, 0u64);
        // Downstream (N0 → N2) on both links, TTL 64 leaving N0 and 63 leaving the relay.
        let down = i % 2 == 0;
        let ttl = if i < 2 { 64 } else { 63 };
        let (src, dst) = if down {
            (server, client)
        } else {
            (client, server)
        };
        let mut last = std::time::Duration::ZERO;
        while let Some(p) = reader.next_packet() {
            let p = p.unwrap();
            assert!(p.timestamp >= last, "{}: timestamps go back", f.file);
            last = p.timestamp;
            let s = SlicedPacket::from_ip(&p.data).unwrap();
            let Some(NetSlice::Ipv4(ip)) = &s.net else {
                panic!("not IPv4")
            };
            let h = ip.header();
            assert_eq!((h.source_addr(), h.destination_addr()), (src, dst));
            let hop_ttl = if down { ttl } else { 64 + 63 - ttl };
            assert_eq!(h.ttl(), hop_ttl, "{}", f.file);
            let Some(TransportSlice::Udp(udp)) = &s.transport else {
                panic!("not UDP")
            };
            assert_eq!(
                (udp.source_port(), udp.destination_port()),
                (UDP_PORT, UDP_PORT)
            );
            let (_, frames) = wire::parse(udp.payload()).unwrap();
            data += frames
                .iter()
                .filter(|fr| matches!(fr, Frame::Data { .. }))
                .count() as u64;
            packets += 1;
        }
        assert_eq!(packets, f.packets);
        assert_eq!(packets, f.sent, "{}", f.file);
        assert_eq!(data, f.data_sent, "{}", f.file);
        assert!(packets > 0, "{}", f.file);
        if down {
            // 300 kB in DATA frames of at most ~1.4 kB.
            assert!(data > 200, "{}: {data} DATA frames", f.file);
        }
    }
    // A datagram the first link loses (1 %) is in neither capture; the relay forwards the rest.
    let (a, b) = (&rec.link_stats[0].0, &rec.link_stats[1].0);
    assert!(a.dropped_loss > 0, "{a:?}");
    assert_eq!(b.sent, a.sent - a.lost_in_flight, "{a:?} {b:?}");
}
