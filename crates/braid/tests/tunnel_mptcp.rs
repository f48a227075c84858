//! `braid tunnel` on transport (b): the packet stream over ONE kernel MPTCP connection whose
//! subflows `braid pm` (the kernel's userspace path manager) opens, the daemons run as the
//! installed commands would (`braid tunnel client|gateway --config`, `braid status`).
//!
//! client (c1 50 Mbit/s, c2 30 Mbit/s, tbf) — router — server 10.0.9.2, which runs the gateway
//! (MPTCP listener on 10.0.9.2:7000, TUN 10.200.0.1) and the iperf3 server on its TUN address;
//! the client's TUN is 10.200.0.2, so iperf3 from the client crosses the tunnel.

mod netns;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use braid_mptcp::netns::NetNs;
use netns::*;
use serde_json::Value;

/// braid pm for the tunnel's links only: the TUN device must never carry a subflow of the
/// connection that carries the tunnel.
const FULLMESH: &str = r#"
mode = "fullmesh"
[[iface]]
name = "c1"
[[iface]]
name = "c2"
"#;

/// One iperf3 TCP flow (CUBIC) for `secs` after 3 omitted seconds: (mean, median second),
/// Mbit/s.
fn iperf3(ns: &NetNs, to: &str, secs: u32) -> (f64, f64) {
    let out = ns
        .exec(&[
            "iperf3",
            "-c",
            to,
            "-t",
            &secs.to_string(),
            "-O",
            "3",
            "-J",
            "-C",
            "cubic",
        ])
        .expect("iperf3");
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("iperf3 JSON: {e}: {}", String::from_utf8_lossy(&out.stdout)));
    let mut per_s: Vec<f64> = v["intervals"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["sum"]["omitted"] != true)
        .filter_map(|i| i["sum"]["bits_per_second"].as_f64())
        .map(|b| b / 1e6)
        .collect();
    eprintln!(
        "iperf3 Mbit/s per second: {}",
        per_s
            .iter()
            .map(|x| format!("{x:.0}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let mean = v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(0.0)
        / 1e6;
    per_s.sort_by(f64::total_cmp);
    let median = per_s.get(per_s.len() / 2).copied().unwrap_or(0.0);
    (mean, median)
}

/// One TCP flow through the tunnel over kernel MPTCP: braid pm opens the second subflow, both
/// links carry the stream, the flow gets more than the faster link alone; a connection that
/// does not complete the handshake is refused and counted.
#[test]
fn mptcp_transport_aggregates_with_braid_pm_subflows() {
    if !require_root() {
        return;
    }
    let t = Topo::new("btm", [50, 30], true);
    t.userspace_pm();
    let pm = Daemon::braid_pm(&t.client, FULLMESH);
    let dir = std::env::temp_dir().join(format!("braid-tunnel-mptcp-{}", t.client.name));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let _dir = Dir(dir.clone());
    let (gw_priv, gw_pub) = braid_tunnel::daemon::keygen();
    let (cl_priv, cl_pub) = braid_tunnel::daemon::keygen();
    let gw = Tunnel::start(
        &t.server,
        "gateway",
        &dir,
        &format!(
            r#"
transport = "mptcp"
private_key = "{gw_priv}"
listen = ["{SERVER}:7000"]
[tun]
name = "braid0"
address = "10.200.0.1/24"
[ops]
control = "{}"
[[client]]
name = "a"
public_key = "{cl_pub}"
allowed_ips = ["10.200.0.2/32"]
"#,
            dir.join("gateway.sock").display()
        ),
    );
    let cl = Tunnel::start(
        &t.client,
        "client",
        &dir,
        &format!(
            r#"
transport = "mptcp"
private_key = "{cl_priv}"
gateway_public_key = "{gw_pub}"
gateway = "{SERVER}:7000"
[tun]
name = "braid0"
address = "10.200.0.2/24"
[ops]
control = "{}"
[[link]]
name = "c1"
[[link]]
name = "c2"
"#,
            dir.join("client.sock").display()
        ),
    );
    cl.wait("client connected", Duration::from_secs(10), |v| {
        v["connected"] == true
    });
    gw.wait("gateway sees the client", Duration::from_secs(5), |v| {
        v["clients"][0]["connected"] == true
    });
    let st = pm.wait("two subflows", Duration::from_secs(10), |s| {
        let f = subflows(s);
        f.iter().any(|(i, _)| i == "c1") && f.iter().any(|(i, _)| i == "c2")
    });
    eprintln!("braid pm subflows: {:?}", subflows(&st));

    let _srv = Proc(
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &t.server.name,
                "iperf3",
                "-s",
                "-B",
                "10.200.0.1",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("iperf3 (scripts/deps installs it)"),
    );
    t.server
        .wait_listening(5201, Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("{e}"));
    let (c1a, c2a) = (tx_bytes(&t.client, "c1"), tx_bytes(&t.client, "c2"));
    let (mean, median) = iperf3(&t.client, "10.200.0.1", 12);
    let (c1, c2) = (
        tx_bytes(&t.client, "c1") - c1a,
        tx_bytes(&t.client, "c2") - c2a,
    );
    eprintln!(
        "mptcp transport: one TCP flow {median:.1} Mbit/s sustained (median second), {mean:.1} \
         Mbit/s mean over 12 s, over 50 + 30 Mbit/s (tbf); c1 {:.0} MB, c2 {:.0} MB",
        c1 as f64 / 1e6,
        c2 as f64 / 1e6
    );
    let total = (c1 + c2) as f64;
    assert!(
        c1 as f64 > 0.2 * total && c2 as f64 > 0.2 * total,
        "both links carry the stream: c1 {c1} B, c2 {c2} B"
    );
    assert!(
        median > 50.0,
        "one TCP flow over the MPTCP transport sustained {median:.1} Mbit/s, no more than the \
         50 Mbit/s link alone"
    );
    let v = cl.try_status().unwrap();
    assert_eq!(v["transport"], "mptcp");
    assert!(
        v["stream"]["records_sent"].as_u64().unwrap_or(0) > 1000,
        "{v}"
    );
    assert_eq!(v["connections_started"], 1, "{v}");

    // Garbage instead of a handshake: refused, counted, nothing kept.
    t.client.run(|| {
        let mut s = std::net::TcpStream::connect(format!("{SERVER}:7000")).unwrap();
        let _ = s.write_all(&[0, 48]);
        let _ = s.write_all(&[7u8; 48]);
        std::thread::sleep(Duration::from_millis(200));
    });
    let v = gw.wait("the bad handshake counted", Duration::from_secs(5), |v| {
        v["drops"]["handshake_failed"].as_u64().unwrap_or(0) >= 1
    });
    assert_eq!(v["clients"][0]["connections"], 1, "{v}");
    assert_eq!(v["clients"][0]["connected"], true, "{v}");
    // The table form of `braid status`.
    let out = Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(["status", "--control"])
        .arg(&gw.control)
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    eprintln!("{table}");
    assert!(
        table.contains("transport mptcp")
            && table.contains("client a")
            && table.contains("connected"),
        "{table}"
    );
}
