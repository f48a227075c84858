//! Throughput of the encrypted tunnel on unshaped veth links, beside kernel MPTCP without
//! encryption and plain TCP on the same links: `cargo bench -p braid-tunnel --bench throughput`
//! (root; namespaces are created and deleted by the run). One iperf3 TCP flow (CUBIC) each;
//! Gbit/s over the steady state, and the bytes each link carried.
//!
//! ```text
//! client (c0 10.0.1.2, c1 10.0.2.2) ═ veth ═ gateway (g0 10.0.1.1, g1 10.0.2.1) ─ server 10.0.9.2
//! ```
//!
//! - tunnel: iperf3 client → TUN → braid tunnel client → UDP over c0 and c1 → gateway → server;
//! - kernel MPTCP: `mptcpize run iperf3` client → gateway's address 10.0.1.1, a second
//!   subflow from c1 (in-kernel path manager endpoint), no encryption;
//! - TCP: plain TCP over c0 alone, the ceiling of one link on this machine.

#[path = "../tests/support/mod.rs"]
mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use braid_mptcp::netns::NetNs;
use serde_json::Value;
use support::*;

const SECS: u32 = 10;

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    if std::env::var_os("BRAID_SKIP_NETNS").is_some() {
        eprintln!("BRAID_SKIP_NETNS set: skipping the tunnel throughput benchmark");
        return;
    }
    if !require_root() {
        return;
    }
    let topo = Topo::new("bbt", None);
    let keys = Keys::new();
    println!(
        "braid tunnel throughput: one TCP flow (iperf3, CUBIC), {SECS} s after 2 s omitted, unshaped veth"
    );

    // 1. The encrypted tunnel over both links, without and with TUN offload (TSO/GRO).
    for offload in [false, true] {
        let mut gcfg = gateway_config(&topo, &keys, "");
        let mut ccfg = client_config(&topo, &keys, "", "");
        gcfg.tun.offload = offload;
        ccfg.tun.offload = offload;
        let _gw = Daemon::gateway(&topo.gw, gcfg);
        let cl = Daemon::client(&topo.client, ccfg);
        wait_paths(&cl, 2, Duration::from_secs(10));
        let _srv = iperf3_server(&topo.server);
        let before = link_bytes(&topo.client);
        let cpu0 = cpu_seconds();
        let t0 = Instant::now();
        let gbit = iperf3(&topo.client, SERVER, false);
        let cpu = 100.0 * (cpu_seconds() - cpu0) / t0.elapsed().as_secs_f64();
        let after = link_bytes(&topo.client);
        let st = cl.status();
        let udp = &st["udp"];
        let per_call = |d: &str, c: &str| {
            udp[d].as_f64().unwrap_or(0.0) / udp[c].as_f64().unwrap_or(1.0).max(1.0)
        };
        let name = format!(
            "braid tunnel (Noise, braid core, 2 links{})",
            if offload { ", TUN offload" } else { "" }
        );
        report(&name, gbit, before, after);
        println!(
            "    daemons' CPU {cpu:.0} % of one core; client datagrams per send call {:.1}, per \
             receive call {:.1} (GSO max {} segments)",
            per_call("datagrams_sent", "send_calls"),
            per_call("datagrams_received", "recv_calls"),
            udp["gso_segments_max"],
        );
    }

    // 2. Kernel MPTCP over the same links, no encryption.
    for ns in [&topo.client, &topo.gw] {
        sh(ns, "ip mptcp limits set subflows 2 add_addr_accepted 2");
    }
    sh(
        &topo.client,
        "ip mptcp endpoint add 10.0.2.2 dev c1 subflow",
    );
    sh(&topo.client, "ip rule add from 10.0.2.2 table 2");
    sh(
        &topo.client,
        "ip route add 10.0.1.0/24 via 10.0.2.1 dev c1 table 2",
    );
    {
        let _srv = mptcp_iperf3_server(&topo.gw);
        let before = link_bytes(&topo.client);
        let gbit = iperf3(&topo.client, "10.0.1.1", true);
        let after = link_bytes(&topo.client);
        report(
            "kernel MPTCP (in-kernel PM, 2 subflows)",
            gbit,
            before,
            after,
        );
    }

    // 3. Plain TCP over c0.
    {
        let _srv = iperf3_server(&topo.gw);
        let before = link_bytes(&topo.client);
        let gbit = iperf3(&topo.client, "10.0.1.1", false);
        let after = link_bytes(&topo.client);
        report("TCP over c0 alone", gbit, before, after);
    }
}

fn report(name: &str, gbit: f64, before: [u64; 2], after: [u64; 2]) {
    println!(
        "  {name:<54} {gbit:>6.2} Gbit/s   c0 {:>6.0} MB, c1 {:>6.0} MB",
        (after[0] - before[0]) as f64 / 1e6,
        (after[1] - before[1]) as f64 / 1e6,
    );
}

/// TX bytes of c0 and c1 in the client namespace.
fn link_bytes(ns: &NetNs) -> [u64; 2] {
    let out = ns.exec(&["ip", "-j", "-s", "link", "show"]).unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let get = |dev: &str| {
        v.as_array()
            .into_iter()
            .flatten()
            .find(|l| l["ifname"] == dev)
            .and_then(|l| l["stats64"]["tx"]["bytes"].as_u64())
            .unwrap_or(0)
    };
    [get("c0"), get("c1")]
}

fn mptcp_iperf3_server(ns: &NetNs) -> Proc {
    let child = Command::new("ip")
        .args([
            "netns", "exec", &ns.name, "mptcpize", "run", "iperf3", "-s", "-p", "5201",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("mptcpize and iperf3 (scripts/deps installs them)");
    std::thread::sleep(Duration::from_millis(300));
    Proc(child)
}

/// One iperf3 TCP flow to `server` for [`SECS`] after 2 omitted seconds; the receiver's mean
/// rate in Gbit/s.
fn iperf3(ns: &NetNs, server: &str, mptcp: bool) -> f64 {
    let secs = SECS.to_string();
    let mut args = vec![];
    if mptcp {
        args.extend(["mptcpize", "run"]);
    }
    args.extend([
        "iperf3", "-c", server, "-p", "5201", "-t", &secs, "-O", "2", "-J", "-C", "cubic",
    ]);
    let out = ns.exec(&args).expect("iperf3 client");
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("iperf3 JSON: {e}: {}", String::from_utf8_lossy(&out.stderr)));
    v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(0.0)
        / 1e9
}
