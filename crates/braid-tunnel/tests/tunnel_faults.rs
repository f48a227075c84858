//! Faults a vehicle meets, end to end in network namespaces (root): every link gone for a few
//! seconds mid-transfer, and the gateway killed and restarted. The tests share the machine's
//! two cores, so they run one at a time.

mod support;

use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use braid_tunnel::daemon::{prometheus, status_table};
use support::*;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The time from `at` to the first read at or after it (`None`: no read after it).
fn resumed_after(got: &Received, at: Instant) -> Option<Duration> {
    let first = got.first?;
    let rel = at.saturating_duration_since(first);
    got.reads
        .iter()
        .find(|(t, _)| *t >= rel)
        .map(|(t, _)| *t - rel)
}

/// Every link of the client down for 1 s, then for 3 s, in the middle of a TCP transfer:
/// the transfer completes intact, data reaches the receiver again within 1 s of each return,
/// and while the links are away the status and the metrics show a connection without a usable
/// path, and for how long.
#[test]
fn every_link_down_for_1_s_and_3_s_mid_transfer() {
    let _s = serial();
    if !require_root() {
        return;
    }
    let topo = Topo::new("bfb", Some([50, 30]));
    let keys = Keys::new();
    let _gw = Daemon::gateway(&topo.gw, gateway_config(&topo, &keys, ""));
    let cl = Daemon::client(&topo.client, client_config(&topo, &keys, "", ""));
    wait_paths(&cl, 2, Duration::from_secs(10));
    let data = file_bytes(60 << 20);
    let want = sha256(&data);
    let rx = tcp_receiver(&topo.server);
    let tx = tcp_send(&topo.client, data);
    std::thread::sleep(Duration::from_secs(2));
    let mut returns = Vec::new();
    for outage in [Duration::from_secs(1), Duration::from_secs(3)] {
        sh(&topo.client, "ip link set c0 down");
        sh(&topo.client, "ip link set c1 down");
        let down = Instant::now();
        if outage >= Duration::from_secs(2) {
            std::thread::sleep(outage - Duration::from_millis(500));
            let v = cl.status();
            let c = &v["connections"][0];
            let pathless = c["pathless_s"].as_f64().unwrap_or(0.0);
            eprintln!(
                "during the {outage:?} blackout: pathless {pathless:.2} s\n{}",
                status_table(&v)
            );
            assert_eq!(c["usable_paths"], 0, "{}", status_table(&v));
            assert!(
                pathless >= 1.0,
                "status shows {pathless} s without a path after {:?}",
                down.elapsed()
            );
            let metrics = prometheus(&v);
            assert!(
                metrics.contains("braid_tunnel_connections_without_path 1"),
                "{metrics}"
            );
            assert!(
                metrics.contains("braid_tunnel_connection_pathless_s{peer=\"gateway\"}"),
                "{metrics}"
            );
            std::thread::sleep(down + outage - Instant::now());
        } else {
            std::thread::sleep(outage);
        }
        sh(&topo.client, "ip link set c0 up");
        sh(&topo.client, "ip link set c1 up");
        returns.push((outage, Instant::now()));
        std::thread::sleep(Duration::from_secs(2));
        let v = cl.status();
        assert_eq!(
            v["connections"][0]["pathless_s"].as_f64(),
            Some(0.0),
            "{}",
            status_table(&v)
        );
    }
    let _ = tx
        .join()
        .expect("the sender finished: the inner TCP connection survived");
    let got = rx.join().expect("receiver");
    eprintln!("{}", status_table(&cl.status()));
    assert_eq!(got.bytes, 60 << 20, "the whole file arrived");
    assert_eq!(got.sha256, want, "the file is intact");
    for (outage, back) in returns {
        let resumed = resumed_after(&got, back).expect("data after the return");
        eprintln!("all links down for {outage:?}: data again {resumed:?} after their return");
        assert!(
            resumed <= Duration::from_secs(1),
            "all links down for {outage:?}: data again only {resumed:?} after their return"
        );
    }
}

/// Every link of the client silent (the router drops everything, both ways; the interfaces
/// stay up, as in a road tunnel or behind a dead access point) for 8 s, then for 20 s, in the
/// middle of a TCP transfer: both are longer than `dead_after_ms` (5 s), so the session
/// expires unanswered. The connection outlives it and keeps what it holds: the transfer
/// completes intact over the one connection it started on (none replaced), and data reaches
/// the receiver again within 2 s of each return. Before, the expiry ended the connection with
/// the data it held, and the inner TCP, backed off, resumed seconds after the links returned.
#[test]
fn every_link_silent_for_8_s_and_20_s_mid_transfer() {
    let _s = serial();
    if !require_root() {
        return;
    }
    let topo = Topo::routed("bsl", Some([50, 30]));
    let keys = Keys::new();
    let _gw = Daemon::gateway(&topo.gw, gateway_config(&topo, &keys, ""));
    let cl = Daemon::client(&topo.client, routed_client_config(&topo, &keys, ""));
    wait_paths(&cl, 2, Duration::from_secs(10));
    let data = file_bytes(40 << 20);
    let want = sha256(&data);
    let rx = tcp_receiver(&topo.server);
    let tx = tcp_send_to(&topo.client, &format!("{SERVER}:5001"), data);
    std::thread::sleep(Duration::from_secs(1));
    let silent = |on: bool| {
        let op = if on { "-I" } else { "-D" };
        let rules: Vec<String> = ["-i r0", "-o r0", "-i r1", "-o r1"]
            .iter()
            .map(|m| format!("{op} FORWARD {m} -j DROP"))
            .collect();
        let rules: Vec<&str> = rules.iter().map(String::as_str).collect();
        topo.router()
            .iptables(&rules)
            .unwrap_or_else(|e| panic!("{e}"));
    };
    let mut returns = Vec::new();
    for outage in [Duration::from_secs(8), Duration::from_secs(20)] {
        silent(true);
        std::thread::sleep(outage);
        silent(false);
        returns.push((outage, Instant::now()));
        std::thread::sleep(Duration::from_secs(2));
    }
    let _ = tx
        .join()
        .expect("the sender finished: the inner TCP connection survived");
    let got = rx.join().expect("receiver");
    let v = cl.status();
    eprintln!(
        "connections started {}, replaced {}\n{}",
        v["connections_started"],
        v["connections_replaced"],
        status_table(&v)
    );
    let mut late = Vec::new();
    for (outage, back) in returns {
        let resumed = resumed_after(&got, back);
        eprintln!("every link silent for {outage:?}: data again {resumed:?} after their return");
        if resumed.is_none_or(|r| r > Duration::from_secs(2)) {
            late.push(format!("{outage:?}: {resumed:?}"));
        }
    }
    assert_eq!(got.bytes, 40 << 20, "the whole file arrived");
    assert_eq!(got.sha256, want, "the file is intact");
    assert_eq!(
        v["connections_started"], 1,
        "the connection outlived the silences"
    );
    assert!(late.is_empty(), "data again only after: {late:?}");
}

/// The gateway dies without a word (its process ends: no close, no goodbye) and comes back
/// 2 s later: the client notices by its probing handshake, which the new gateway answers with
/// another instance, and starts a new connection at once. Traffic through the tunnel flows
/// again within 1.5 s of the gateway's return; the client never waits for `dead_after_ms`.
#[test]
fn a_restarted_gateway_carries_traffic_again_within_1_5_s() {
    let _s = serial();
    if !require_root() {
        return;
    }
    let topo = Topo::new("bfr", None);
    let keys = Keys::new();
    let gcfg = gateway_config(&topo, &keys, "");
    let gw = Daemon::gateway(&topo.gw, gcfg.clone());
    // dead_after_ms = 5000 (the default): a restart found only by the receive timeout would
    // take more than 5 s.
    let cl = Daemon::client(
        &topo.client,
        client_config(&topo, &keys, "", "").tap(|c| c.dead_after_ms = 5000),
    );
    wait_paths(&cl, 2, Duration::from_secs(10));
    let (stop, send, recv) = udp_probe(&topo.client, &topo.server);
    let mut delays = Vec::new();
    let mut gw = Some(gw);
    for round in 0..3 {
        std::thread::sleep(Duration::from_secs(1));
        drop(gw.take());
        std::thread::sleep(Duration::from_secs(2));
        let restarted = Daemon::gateway(&topo.gw, gcfg.clone());
        let back = Instant::now();
        gw = Some(restarted);
        std::thread::sleep(Duration::from_secs(3));
        delays.push((round, back));
    }
    stop.store(true, Ordering::Relaxed);
    send.join().unwrap();
    let arrivals = recv.join().unwrap();
    let v = cl.status();
    eprintln!("{}", status_table(&v));
    for (round, back) in delays {
        let first = arrivals
            .iter()
            .filter(|(sent, _)| *sent >= back)
            .map(|(_, got)| *got)
            .min()
            .unwrap_or_else(|| panic!("round {round}: nothing arrived after the restart"));
        let delay = first - back;
        eprintln!("gateway restart {round}: traffic again {delay:?} after the gateway was back");
        assert!(
            delay <= Duration::from_millis(1500),
            "round {round}: traffic again only {delay:?} after the gateway was back"
        );
    }
    assert!(
        v["connections_replaced"]["gateway_restarted"]
            .as_u64()
            .is_some_and(|n| n >= 3),
        "{v}"
    );
    drop(cl);
    drop(gw);
}

/// Every link away for longer than the gateway keeps a silent client (`client_timeout_ms`,
/// here 3 s): the gateway ends the session and the connection with it. When the links return,
/// the client's probing handshake gets a new session and the gateway answers the old
/// connection's datagrams with a "connection gone" notice, so traffic flows again within 1 s
/// of the return, as after a shorter blackout, and not after `dead_after_ms` (the default
/// 5 s here) of links up without a usable path.
#[test]
fn a_blackout_longer_than_the_gateway_keeps_the_client_costs_no_dead_after() {
    let _s = serial();
    if !require_root() {
        return;
    }
    let topo = Topo::new("bfl", Some([50, 30]));
    let keys = Keys::new();
    let _gw = Daemon::gateway(
        &topo.gw,
        gateway_config(&topo, &keys, "").tap(|g| g.client_timeout_ms = 3000),
    );
    let cl = Daemon::client(
        &topo.client,
        client_config(&topo, &keys, "", "").tap(|c| c.dead_after_ms = 5000),
    );
    wait_paths(&cl, 2, Duration::from_secs(10));
    let (stop, send, recv) = udp_probe(&topo.client, &topo.server);
    std::thread::sleep(Duration::from_secs(2));
    sh(&topo.client, "ip link set c0 down");
    sh(&topo.client, "ip link set c1 down");
    std::thread::sleep(Duration::from_secs(5));
    sh(&topo.client, "ip link set c0 up");
    sh(&topo.client, "ip link set c1 up");
    let back = Instant::now();
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    send.join().unwrap();
    let arrivals = recv.join().unwrap();
    let v = cl.status();
    eprintln!("{}", status_table(&v));
    let first = arrivals
        .iter()
        .filter(|(sent, _)| *sent >= back)
        .map(|(_, got)| *got)
        .min()
        .expect("traffic after the links returned");
    let delay = first - back;
    eprintln!("every link away for 5 s (gateway timeout 3 s): traffic again {delay:?} after");
    assert!(
        delay <= Duration::from_secs(1),
        "traffic again only {delay:?} after the links returned"
    );
    let replaced = &v["connections_replaced"];
    assert_eq!(replaced["gateway_ended_it"], 1, "{v}");
    assert_eq!(replaced["no_usable_path"], 0, "{v}");
}

/// `value.tap(f)`: applies `f` to a value and returns it.
trait Tap: Sized {
    fn tap(mut self, f: impl FnOnce(&mut Self)) -> Self {
        f(&mut self);
        self
    }
}

impl<T> Tap for T {}

/// The client's TUN MTU is raised at runtime (`ip link set braid0 mtu 9000`) while a transfer
/// runs, with a jumbo-frame network behind the gateway so the inner TCP negotiates 8960-byte
/// segments: packets over the tunnel MTU (1500) are answered with ICMP "fragmentation needed",
/// the sender's path-MTU discovery adapts, and both the running transfer and one started after
/// the change complete intact.
#[test]
fn a_tun_mtu_raised_mid_transfer_gets_too_big_answers_and_the_transfers_complete() {
    let _s = serial();
    if !require_root() {
        return;
    }
    let topo = Topo::new("bfm", Some([50, 30]));
    sh(&topo.gw, "ip link set g9 mtu 9000");
    sh(&topo.server, "ip link set s9 mtu 9000");
    let keys = Keys::new();
    let _gw = Daemon::gateway(&topo.gw, gateway_config(&topo, &keys, ""));
    let cl = Daemon::client(&topo.client, client_config(&topo, &keys, "", ""));
    wait_paths(&cl, 2, Duration::from_secs(10));
    let first = file_bytes(30 << 20);
    let first_sum = sha256(&first);
    let rx = tcp_receiver_at(&topo.server, "0.0.0.0:5001");
    let tx = tcp_send(&topo.client, first);
    std::thread::sleep(Duration::from_secs(1));
    sh(&topo.client, "ip link set braid0 mtu 9000");
    // A new connection now negotiates 8960-byte segments.
    let second = file_bytes(8 << 20);
    let second_sum = sha256(&second);
    let rx2 = tcp_receiver_at(&topo.server, "0.0.0.0:5006");
    let t0 = Instant::now();
    let tx2 = tcp_send_to(&topo.client, &format!("{SERVER}:5006"), second);
    let _ = tx2.join().expect("the transfer after the change finished");
    let took = t0.elapsed();
    let got2 = rx2.join().unwrap();
    let _ = tx.join().expect("the running transfer finished");
    let got = rx.join().unwrap();
    let v = cl.status();
    eprintln!(
        "after the MTU change: 8 MiB in {took:?}; too big: {}",
        v["tun"]["too_big"]
    );
    assert_eq!(got.sha256, first_sum, "the running transfer is intact");
    assert_eq!(got2.sha256, second_sum, "the new transfer is intact");
    assert!(
        v["tun"]["too_big"]["answered"]
            .as_u64()
            .is_some_and(|n| n > 0),
        "{}",
        v["tun"]
    );
    assert!(
        took < Duration::from_secs(20),
        "the new transfer took {took:?}"
    );
}

/// Paths narrower than 1500 bytes, with the default configuration. Link c0 and its router end
/// have an MTU of 1400 from the start (an LTE or PPPoE access link), c1 1500: the client
/// measures its links, announces the narrower in its handshake, and both ends send datagrams
/// of at most 1372 bytes on every path (before, none of c0's datagrams fitted and nothing went
/// through). Two seconds into a transfer each way, the router's link to the gateway narrows to
/// 1300 bytes: the router answers the client's larger datagrams with ICMP "fragmentation
/// needed", the client finds the narrower path at its next measurement (`REMEASURE`, 1 s),
/// replaces the connection with one of 1272-byte datagrams (the gateway measures its route
/// back as well), and both transfers complete intact.
#[test]
fn paths_narrower_than_1500_bytes_get_datagrams_that_fit() {
    let _s = serial();
    if !require_root() {
        return;
    }
    let topo = Topo::routed("bfn", Some([20, 10]));
    sh(&topo.client, "ip link set c0 mtu 1400");
    sh(topo.router(), "ip link set r0 mtu 1400");
    let keys = Keys::new();
    let _gw = Daemon::gateway(&topo.gw, gateway_config(&topo, &keys, ""));
    let cl = Daemon::client(&topo.client, routed_client_config(&topo, &keys, ""));
    wait_paths(&cl, 2, Duration::from_secs(10));
    let v = cl.status();
    eprintln!(
        "links: {}; datagrams of {} bytes",
        v["links"], v["datagram_payload"]
    );
    assert_eq!(v["links"][0]["path_payload"], 1372, "{}", v["links"]);
    assert_eq!(v["datagram_payload"], 1372, "{v}");
    let (up, down) = (file_bytes(16 << 20), file_bytes(12 << 20));
    let (up_sum, down_sum) = (sha256(&up), sha256(&down));
    let rx_up = tcp_receiver_at(&topo.server, "0.0.0.0:5001");
    let rx_down = tcp_receiver_at(&topo.client, "0.0.0.0:5004");
    let tx_up = tcp_send(&topo.client, up);
    let tx_down = tcp_send_to(&topo.server, "10.200.0.2:5004", down);
    std::thread::sleep(Duration::from_secs(2));
    sh(topo.router(), "ip link set r8 mtu 1300");
    sh(&topo.gw, "ip link set g8 mtu 1300");
    let _ = tx_up.join().expect("the upload finished");
    let _ = tx_down.join().expect("the download finished");
    let (got_up, got_down) = (rx_up.join().unwrap(), rx_down.join().unwrap());
    let v = cl.status();
    eprintln!(
        "after the narrowing: datagrams of {} bytes; connections replaced {}; links {}",
        v["datagram_payload"], v["connections_replaced"], v["links"]
    );
    assert_eq!(got_up.sha256, up_sum, "the upload is intact");
    assert_eq!(got_down.sha256, down_sum, "the download is intact");
    assert_eq!(v["datagram_payload"], 1272, "{v}");
    assert!(
        v["connections_replaced"]["smaller_path_mtu"]
            .as_u64()
            .is_some_and(|n| n >= 1),
        "{}",
        v["connections_replaced"]
    );
}

/// The gateway's end of a link narrower than the client's (g1 at MTU 1400, c1 at 1500, joined
/// directly: nothing answers with ICMP): the gateway announces in its handshake response the
/// narrowest interface its datagrams arrive on, the client sends datagrams of at most 1372
/// bytes, and an upload is carried intact by both paths, each more than 512 kB of it (c1
/// carried 1.1–4.3 MB of 12 MB in runs with either MTU; before, none of c1's full datagrams
/// arrived: 0.24 MB, its small ones).
#[test]
fn a_narrower_gateway_interface_is_announced_to_the_client() {
    let _s = serial();
    if !require_root() {
        return;
    }
    let topo = Topo::new("bfg", Some([20, 10]));
    sh(&topo.gw, "ip link set g1 mtu 1400");
    let keys = Keys::new();
    let gw = Daemon::gateway(&topo.gw, gateway_config(&topo, &keys, ""));
    let cl = Daemon::client(&topo.client, client_config(&topo, &keys, "", ""));
    wait_paths(&cl, 2, Duration::from_secs(10));
    let up = file_bytes(12 << 20);
    let up_sum = sha256(&up);
    let rx = tcp_receiver_at(&topo.server, "0.0.0.0:5001");
    let _ = tcp_send(&topo.client, up)
        .join()
        .expect("the upload finished");
    let got = rx.join().unwrap();
    let (v, g) = (cl.status(), gw.status());
    let received: Vec<u64> = g["connections"][0]["paths"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| p["data_bytes_received"].as_u64().unwrap_or(0))
        .collect();
    eprintln!(
        "gateway announced {}; datagrams of {} bytes; stream bytes received per path {received:?}",
        v["gateway_datagram_payload"], v["datagram_payload"]
    );
    assert_eq!(got.sha256, up_sum, "the upload is intact");
    assert_eq!(v["gateway_datagram_payload"], 1372, "{v}");
    assert_eq!(v["datagram_payload"], 1372, "{v}");
    assert_eq!(received.len(), 2, "{}", g["connections"]);
    assert!(
        received.iter().all(|&b| b > 1 << 19),
        "each path carries the upload: {received:?}"
    );
}

/// Link c0 is up but carries nothing from the start (the router drops its packets both ways,
/// as behind an access point without an uplink): the handshake goes over the links that are up
/// in turn and the connection's first path over the link the gateway answered on, so the
/// tunnel carries a TCP transfer over c1 within a few seconds of the client's start. Before,
/// the handshake went over c0 alone and the tunnel did not come up while c0 stayed silent.
#[test]
fn a_first_link_up_but_silent_from_the_start_does_not_hold_the_tunnel() {
    let _s = serial();
    if !require_root() {
        return;
    }
    let topo = Topo::routed("bfs", Some([50, 30]));
    let keys = Keys::new();
    topo.router()
        .iptables(&["-I FORWARD -i r0 -j DROP", "-I FORWARD -o r0 -j DROP"])
        .unwrap_or_else(|e| panic!("{e}"));
    let _gw = Daemon::gateway(&topo.gw, gateway_config(&topo, &keys, ""));
    let started = Instant::now();
    let cl = Daemon::client(&topo.client, routed_client_config(&topo, &keys, ""));
    let v = wait_paths(&cl, 1, Duration::from_secs(5));
    let up_after = started.elapsed();
    let rx = tcp_receiver_at(&topo.server, "0.0.0.0:5001");
    let tx = tcp_sender_for(
        &topo.client,
        &format!("{SERVER}:5001"),
        Duration::from_secs(2),
    );
    let _ = tx.join();
    let got = rx.join().expect("receiver");
    eprintln!(
        "c0 silent from the start: a path established {up_after:?} after the client started; {} kB through c1 in 2 s\n{}",
        got.bytes >> 10,
        status_table(&v)
    );
    assert!(
        got.bytes > 1 << 20,
        "the tunnel carried {} bytes in 2 s with c1 working",
        got.bytes
    );
}
