//! `transport = "datagram"` (per-packet hybrid access, HYA) and per-flow classes, end to end in
//! network namespaces (root): client (links c0 50 Mbit/s and c1 30 Mbit/s, tbf) ⇄ gateway ⇄
//! server, real UDP and TCP peers. The tests share the machine's two cores, so they run one at
//! a time.

mod support;

use std::sync::Mutex;
use std::time::Duration;

use braid_tunnel::daemon::{
    ClassConfig, ClientConfig, GatewayConfig, NameOrNumber, Transport, status_table,
};
use serde_json::Value;
use support::*;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The per-packet counters of the first connection in a status document.
fn per_packet(v: &Value) -> &Value {
    &v["connections"][0]["datagram"]
}

/// client ⇄ 50 + 30 Mbit/s ⇄ gateway ⇄ server with both daemons, their configurations changed
/// by `f` first, and both paths up.
fn start(
    prefix: &str,
    f: impl FnOnce(&mut GatewayConfig, &mut ClientConfig),
) -> (Topo, Daemon, Daemon) {
    let topo = Topo::new(prefix, Some([50, 30]));
    let keys = Keys::new();
    let mut gcfg = gateway_config(&topo, &keys, "");
    let mut ccfg = client_config(&topo, &keys, "", "");
    f(&mut gcfg, &mut ccfg);
    let gw = Daemon::gateway(&topo.gw, gcfg);
    let cl = Daemon::client(&topo.client, ccfg);
    wait_paths(&cl, 2, Duration::from_secs(10));
    (topo, gw, cl)
}

/// Waits until the status of `d` satisfies `f` (the status refreshes every 250 ms).
fn settle(d: &Daemon, f: impl Fn(&Value) -> bool) -> Value {
    let t0 = std::time::Instant::now();
    loop {
        let v = d.status();
        if f(&v) || t0.elapsed() > Duration::from_secs(3) {
            return v;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One direction of a CBR flow through the datagram transport, checked and reported: what
/// arrived is intact and in order but for packets the receiving daemon counted late; what did
/// not arrive it counted as gaps given up; no silence longer than one keepalive interval; the
/// reorder buffer's p99 hold.
fn check_direction(
    name: &str,
    sent: u32,
    got: &CbrRecv,
    receiver: &Value,
    max_lost: u64,
    keepalive: Duration,
) {
    let pp = per_packet(receiver);
    let lost = u64::from(sent) - got.distinct() as u64;
    let skipped = pp["skipped"].as_u64().unwrap_or(0);
    let p99 = pp["hold_us"]["p99"].as_u64().unwrap_or(u64::MAX);
    let late = pp["late"].as_u64().unwrap_or(0);
    let mut delays: Vec<Duration> = got.got.iter().map(|g| g.2).collect();
    delays.sort();
    let pct = |q: f64| {
        delays
            .get(((delays.len() as f64 * q) as usize).min(delays.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    eprintln!(
        "{name}: {sent} sent, {} arrived ({lost} lost; the receiving daemon gave up {skipped} \
         gaps), {} corrupt, {} behind a later one ({late} late); longest silence {:?}; reorder buffer hold p50 {} µs \
         p99 {p99} µs max {} µs; one-way delay p50 {:?} p99 {:?} max {:?}",
        got.got.len(),
        got.corrupt,
        got.behind(),
        got.longest_gap(),
        pp["hold_us"]["p50"],
        pp["hold_us"]["max"],
        pct(0.5),
        pct(0.99),
        delays.last().copied().unwrap_or_default(),
    );
    assert_eq!(got.corrupt, 0, "{name}: corrupt packets");
    assert!(
        got.behind() <= late,
        "{name}: {} packets out of order, {late} counted late",
        got.behind()
    );
    assert_eq!(got.got.len(), got.distinct(), "{name}: duplicates");
    assert!(
        lost <= skipped,
        "{name}: {lost} packets lost but only {skipped} counted"
    );
    assert!(
        lost <= max_lost,
        "{name}: {lost} packets lost, more than were in flight on the link (≤ {max_lost})"
    );
    assert!(
        got.longest_gap() <= keepalive,
        "{name}: silent for {:?}, more than one keepalive interval",
        got.longest_gap()
    );
    assert!(
        p99 <= 10_000,
        "{name}: the reorder buffer held packets {p99} µs at p99, over its 10 ms timeout"
    );
}

/// A CBR flow each way (1000 packets/s of 1000 bytes) over the datagram transport, 1:1 over
/// 50 + 30 Mbit/s; link c1 goes down at 3 s. Each direction loses only what was in flight on
/// c1 (sent before the client saw it go, at most 100 ms of its share: 50 packets, with
/// margin 100), counted by the receiving daemon, never goes silent for a keepalive interval,
/// and the reorder buffer holds packets at most 10 ms at the 99th percentile.
#[test]
fn datagram_cbr_loses_only_what_was_in_flight_on_a_failed_link() {
    let _s = serial();
    if !require_root() {
        return;
    }
    let topo = Topo::new("bdl", Some([50, 30]));
    let keys = Keys::new();
    let mut gcfg = gateway_config(&topo, &keys, "");
    let mut ccfg = client_config(&topo, &keys, "", "");
    for (t, mtu) in [
        (&mut gcfg.transport, &mut gcfg.tun.mtu),
        (&mut ccfg.transport, &mut ccfg.tun.mtu),
    ] {
        *t = Transport::Datagram;
        *mtu = 1400;
    }
    let keepalive = Duration::from_millis(ccfg.keepalive_ms);
    let gw = Daemon::gateway(&topo.gw, gcfg);
    let cl = Daemon::client(&topo.client, ccfg);
    wait_paths(&cl, 2, Duration::from_secs(10));
    let dur = Duration::from_secs(8);
    let (up_tx, up_rx) = cbr_between(&topo.client, &topo.server, "10.0.9.2:5002", 1000, 1000, dur);
    let (down_tx, down_rx) = cbr_between(
        &topo.server,
        &topo.client,
        "10.200.0.2:5003",
        1000,
        1000,
        dur,
    );
    std::thread::sleep(Duration::from_secs(3));
    sh(&topo.client, "ip link set c1 down");
    let (up_sent, down_sent) = (up_tx.join().unwrap(), down_tx.join().unwrap());
    let (up, down) = (up_rx.join().unwrap(), down_rx.join().unwrap());
    let g = settle(&gw, |v| {
        per_packet(v)["received_packets"].as_u64().unwrap_or(0) > 0
    });
    let c = cl.status();
    eprintln!("{}", status_table(&c));
    eprintln!("{}", status_table(&g));
    check_direction("upload", up_sent, &up, &g, 100, keepalive);
    check_direction("download", down_sent, &down, &c, 100, keepalive);
    // Both links carried packets before the loss.
    let paths = per_packet(&c)["paths_sent"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        paths.len() >= 2 && paths.iter().all(|p| p["packets"].as_u64() > Some(1000)),
        "{paths:?}"
    );
}

/// A class sends UDP port 5004 per packet while a TCP transfer takes the reliable stream, on
/// the same links, session and connection, at the same time: the file arrives intact, the
/// UDP packets intact and in order, each counted by the per-packet carrier and the TCP bytes
/// by the stream.
#[test]
fn a_class_sends_udp_5004_per_packet_and_tcp_on_the_stream() {
    let _s = serial();
    if !require_root() {
        return;
    }
    let class = ClassConfig {
        transport: Transport::Datagram,
        protocol: Some(NameOrNumber::Name("udp".into())),
        port: Some(NameOrNumber::Number(5004)),
        dscp: None,
    };
    // Pure TCP acknowledgements go per packet by default (`acks_per_packet`); off here, so
    // the per-packet counters hold the class's packets alone.
    let (topo, gw, cl) = start("bdc", |g, c| {
        g.classes = vec![class.clone()];
        c.classes = vec![class];
        g.connection.acks_per_packet = false;
        c.connection.acks_per_packet = false;
    });
    let data = file_bytes(30 << 20);
    let want = sha256(&data);
    let rx = tcp_receiver(&topo.server);
    let dur = Duration::from_secs(5);
    let (up_tx, up_rx) = cbr_between(&topo.client, &topo.server, "10.0.9.2:5004", 500, 800, dur);
    let (down_tx, down_rx) =
        cbr_between(&topo.server, &topo.client, "10.200.0.2:5004", 500, 800, dur);
    let tx = tcp_send(&topo.client, data);
    let (up_sent, down_sent) = (up_tx.join().unwrap(), down_tx.join().unwrap());
    let (up, down) = (up_rx.join().unwrap(), down_rx.join().unwrap());
    let _ = tx.join().expect("the TCP transfer finished");
    let got = rx.join().unwrap();
    let g = settle(&gw, |v| {
        per_packet(v)["received_packets"].as_u64().unwrap_or(0) >= u64::from(up_sent) * 9 / 10
    });
    let c = settle(&cl, |v| {
        per_packet(v)["received_packets"].as_u64().unwrap_or(0) >= u64::from(down_sent) * 9 / 10
    });
    eprintln!("{}", status_table(&c));
    eprintln!("{}", status_table(&g));
    let (tcp_secs, _) = (got.reads.last().map_or(0.0, |r| r.0.as_secs_f64()), ());
    eprintln!(
        "TCP: {} MB in {tcp_secs:.1} s on the stream; UDP 5004: up {}/{up_sent}, down {}/{down_sent} \
         per packet ({} and {} late, out of order), up longest gap {:?}, down {:?}",
        got.bytes >> 20,
        up.distinct(),
        down.distinct(),
        per_packet(&g)["late"],
        per_packet(&c)["late"],
        up.longest_gap(),
        down.longest_gap()
    );
    assert_eq!(got.sha256, want, "the TCP file is intact");
    for (name, sent, r, sender, receiver) in [
        ("up", up_sent, &up, &c, &g),
        ("down", down_sent, &down, &g, &c),
    ] {
        assert_eq!(r.corrupt, 0, "{name}: corrupt UDP packets");
        let late = per_packet(receiver)["late"].as_u64().unwrap_or(0);
        assert!(
            r.behind() <= late,
            "{name}: {} UDP packets out of order, {late} counted late",
            r.behind()
        );
        let pp_sent = per_packet(sender)["sent_packets"].as_u64().unwrap_or(0);
        let pp_recv = per_packet(receiver)["released_packets"]
            .as_u64()
            .unwrap_or(0);
        // Every UDP packet went per packet, nothing else did (a few packets of the kernel's own
        // on the TUN device at most).
        assert!(
            pp_sent >= u64::from(sent) && pp_sent <= u64::from(sent) + 20,
            "{name}: {pp_sent} per-packet datagrams for {sent} UDP packets"
        );
        assert!(
            r.distinct() as u64 <= pp_recv,
            "{name}: {} UDP packets arrived, {pp_recv} released per packet",
            r.distinct()
        );
        assert!(
            r.distinct() as f64 >= 0.95 * f64::from(sent),
            "{name}: only {} of {sent} UDP packets arrived",
            r.distinct()
        );
    }
    // The TCP bytes went on the stream.
    let delivered = g["connections"][0]["delivered_bytes"].as_u64().unwrap_or(0);
    assert!(
        delivered >= 30 << 20,
        "the stream delivered {delivered} bytes"
    );
}
