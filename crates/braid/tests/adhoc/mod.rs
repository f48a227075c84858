//! Support for `braid route` on seed 004's ad-hoc testbed (`braid_lab::manet`), shared by the
//! namespace test (`route_netns.rs`) and the E13 benchmark (`benches/e13_kernel.rs`): the
//! daemons on the nodes, their status, convergence, kernel MPTCP between M1 and M8 with
//! `braid pm`, and the applications (iperf3, nc) with the duplicate counters of M8.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use braid_lab::manet::{self, Manet, Process};
use braid_mptcp::netns::NetNs;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::netns;

pub const BRAID: &str = env!("CARGO_BIN_EXE_braid");

pub fn rid(n: u32) -> String {
    manet::router_id(n)
}

/// Node `n`'s `braid route` control socket.
pub fn control(m: &Manet, n: u32) -> PathBuf {
    m.dir.join(format!("route-{n}.sock"))
}

/// `braid route` on every node with `policy` (and the namespace tests' reach window).
pub fn start_routes(m: &Manet, policy: &str) -> Vec<Process> {
    (1..=m.spec.nodes)
        .map(|n| {
            let cfg = m.dir.join(format!("route-{n}.toml"));
            let ifaces: Vec<String> = (0..m.ifaces()).map(|x| format!("\"e{x}\"")).collect();
            std::fs::write(
                &cfg,
                format!(
                    "babeld = \"{}\"\npolicy = \"{policy}\"\nifaces = [{}]\nreach_bits = 6\ncontrol = \"{}\"\n",
                    m.babeld_socket(n).display(),
                    ifaces.join(", "),
                    control(m, n).display()
                ),
            )
            .unwrap();
            m.spawn(
                n,
                &format!("route-{n}"),
                &[BRAID, "route", "--config", cfg.to_str().unwrap()],
            )
            .unwrap()
        })
        .collect()
}

pub fn try_status(m: &Manet, n: u32) -> Option<Value> {
    let out = Command::new(BRAID)
        .args(["route", "status", "--json", "--control"])
        .arg(control(m, n))
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    serde_json::from_slice(&out.stdout)
        .ok()
        .filter(|v: &Value| !v.is_null())
}

pub fn status(m: &Manet, n: u32, routes: &[Process]) -> Value {
    try_status(m, n).unwrap_or_else(|| {
        panic!(
            "braid route status on node {n} failed; its log: {}",
            routes[n as usize - 1].log_tail()
        )
    })
}

/// Polls `f` every 200 ms until it gives a value; panics after `within`.
pub fn wait<T>(what: &str, within: Duration, mut f: impl FnMut() -> Option<T>) -> (T, Duration) {
    let t0 = Instant::now();
    loop {
        if let Some(v) = f() {
            return (v, t0.elapsed());
        }
        assert!(t0.elapsed() < within, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The next hops (`mN@eX`) of `lane`'s route to `dest` in a status.
pub fn hops(st: &Value, dest: u32, lane: &str) -> Vec<String> {
    st["routes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["dest"] == rid(dest) && r["lane"] == lane)
        .map(|r| {
            r["next_hops"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|h| {
                    let n = h["neighbour"].as_str().unwrap_or("?");
                    let node = n
                        .get(n.len().saturating_sub(2)..)
                        .and_then(|s| u32::from_str_radix(s, 16).ok())
                        .unwrap_or(0);
                    format!("m{node}@{}", h["iface"].as_str().unwrap_or("?"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Every lane of node `n` routes to every other node.
pub fn full_table(m: &Manet, st: &Value, n: u32) -> bool {
    (1..=m.spec.nodes)
        .filter(|&d| d != n)
        .all(|d| (0..m.ifaces()).all(|x| !hops(st, d, &format!("e{x}")).is_empty()))
}

/// Every node routes every lane to every node, and M1's lanes to M8 follow App. C (part path:
/// e0 keeps M2, M3, M4; e1, e2, e3 take M2, M3, M4; full path: every lane has all three).
pub fn converged(m: &Manet, part: bool) -> bool {
    let all = (1..=m.spec.nodes).all(|n| try_status(m, n).is_some_and(|st| full_table(m, &st, n)));
    let Some(st) = try_status(m, 1) else {
        return false;
    };
    let nodes = |lane: &str| {
        let mut v: Vec<String> = hops(&st, 8, lane)
            .iter()
            .map(|h| h.split('@').next().unwrap_or("").to_string())
            .collect();
        v.sort();
        v.dedup();
        v
    };
    let three = ["m2", "m3", "m4"];
    let app_c = if part {
        hops(&st, 8, "e1") == ["m2@e1"]
            && hops(&st, 8, "e2") == ["m3@e2"]
            && hops(&st, 8, "e3") == ["m4@e3"]
            && nodes("e0") == three
    } else {
        (0..m.ifaces()).all(|x| nodes(&format!("e{x}")) == three)
    };
    all && app_c
}

/// Both ends keep each other (every link kept).
pub fn kept(m: &Manet, routes: &[Process], a: u32, b: u32) -> bool {
    [(a, b), (b, a)].iter().all(|&(me, peer)| {
        let st = status(m, me, routes);
        let links: Vec<&Value> = st["links"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|l| l["neighbour"] == rid(peer))
            .collect();
        links.len() == m.ifaces() && links.iter().all(|l| l["kept"] == true)
    })
}

/// Panics with the package to install when a tool is missing.
pub fn need(tools: &[&str]) {
    for tool in tools {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(
            found,
            "`{tool}` is missing: run scripts/deps (Debian packages babeld, iperf3, mptcpize, netcat-openbsd, iptables)"
        );
    }
}

/// Kernel MPTCP between M1 (server: the in-kernel path manager announces its e1… addresses)
/// and M8 (client: `braid pm` in full mesh, pairing within subnets when `same_subnet`). The
/// subflows are not bound to their interface: `braid route`'s tables send them, and their
/// replies may come back over any interface (a full-path route spreads flows over every link).
pub fn mptcp(m: &Manet, same_subnet: bool) -> netns::Daemon {
    for x in 1..m.ifaces() {
        netns::sh(
            m.ns(1),
            &format!("ip mptcp endpoint add 10.{x}.0.1 dev e{x} signal"),
        );
    }
    netns::sh(
        m.ns(1),
        "ip mptcp limits set subflows 8 add_addr_accepted 8",
    );
    netns::sh(m.ns(8), "sysctl -qw net.mptcp.path_manager=userspace");
    let mut cfg = format!(
        "mode = \"fullmesh\"\nsame_subnet = {same_subnet}\n[kernel]\nbind_to_device = false\n"
    );
    for x in 0..m.ifaces() {
        cfg.push_str(&format!("[[iface]]\nname = \"e{x}\"\n"));
    }
    netns::Daemon::braid_pm(m.ns(8), &cfg)
}

/// Duplicate data segments M8 has received: TCP segments it already had (each answered by a
/// D-SACK) and MPTCP-level data it already had (a reinjection's second copy).
pub fn duplicates(ns: &NetNs) -> u64 {
    [
        "TcpExtTCPDSACKOldSent",
        "TcpExtTCPDSACKOfoSent",
        "MPTcpExtDuplicateData",
    ]
    .iter()
    .map(|c| netns::nstat(ns, c))
    .sum()
}

/// The kernel's MPTCP counters of `ns` that say a connection did not run MPTCP: SYNs whose
/// MP_CAPABLE was given up after `net.mptcp.syn_retrans_before_tcp_fallback` retransmissions
/// (`MPCapableSYNTXDrop`), blackholes detected (`Blackhole`: active MPTCP then stays off for
/// `net.mptcp.blackhole_timeout`), SYNs sent without MP_CAPABLE while it is off
/// (`MPCapableSYNTXDisabled`), and fallbacks after the handshake.
pub fn fallbacks(ns: &NetNs) -> BTreeMap<String, u64> {
    const COUNTERS: [&str; 8] = [
        "MPCapableSYNTX",
        "MPCapableSYNTXDrop",
        "MPCapableSYNTXDisabled",
        "Blackhole",
        "MPCapableFallbackSYNACK",
        "MPCapableFallbackACK",
        "MPCapableDataFallback",
        "DssFallback",
    ];
    let text = ns
        .exec(&["cat", "/proc/net/netstat"])
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let mut lines = text.lines().filter(|l| l.starts_with("MPTcpExt:"));
    let (Some(names), Some(values)) = (lines.next(), lines.next()) else {
        return BTreeMap::new();
    };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .filter(|(k, _)| COUNTERS.contains(k))
        .filter_map(|(k, v)| Some((k.to_string(), v.parse().ok()?)))
        .collect()
}

/// A deterministic file of `len` bytes in `dir`.
pub fn file(dir: &Path, len: usize) -> (PathBuf, Vec<u8>) {
    let mut data = vec![0u8; len];
    let mut x: u64 = 0x2545_f491_4f6c_dd1d ^ len as u64;
    for b in data.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        b.copy_from_slice(&x.to_le_bytes()[..b.len()]);
    }
    let p = dir.join(format!("file-{len}.bin"));
    std::fs::write(&p, &data).unwrap();
    (p, data)
}

/// What one transfer did.
#[derive(Debug, Clone, Copy)]
pub struct Transfer {
    pub seconds: f64,
    pub intact: bool,
    pub duplicates: u64,
}

/// M8 downloads `file` from M1 with nc (through mptcpize unless `tcp`), as seed 004 did.
pub fn nc(m: &Manet, file: &Path, data: &[u8], tcp: bool, port: u16) -> Transfer {
    let wrap = if tcp { "" } else { "mptcpize run " };
    let out = m.dir.join("received.bin");
    let _ = std::fs::remove_file(&out);
    let dups0 = duplicates(m.ns(8));
    let server = m
        .spawn(
            1,
            "nc-server",
            &[
                "sh",
                "-c",
                // On every address: subflows join at M1's other addresses (the in-kernel
                // PM announces them with this port), and a server bound to 10.0.0.1 alone
                // refuses those joins (ECONNREFUSED), leaving one subflow.
                &format!("exec {wrap}nc -l -N {port} < {}", file.display()),
            ],
        )
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let t0 = Instant::now();
    let ok = Command::new("ip")
        .args(["netns", "exec", &m.ns(8).name, "timeout", "120", "sh", "-c"])
        .arg(format!(
            "{wrap}nc 10.0.0.1 {port} < /dev/null > {}",
            out.display()
        ))
        .status()
        .is_ok_and(|s| s.success());
    let seconds = t0.elapsed().as_secs_f64();
    drop(server);
    let rx = std::fs::read(&out).unwrap_or_default();
    if !ok || rx.len() != data.len() {
        eprintln!(
            "nc download: client {}, {} of {} bytes received",
            if ok { "exited 0" } else { "failed" },
            rx.len(),
            data.len()
        );
    }
    Transfer {
        seconds,
        intact: ok && rx.len() == data.len() && Sha256::digest(&rx) == Sha256::digest(data),
        duplicates: duplicates(m.ns(8)) - dups0,
    }
}

/// M8 downloads from M1 with iperf3 for `seconds` (through mptcpize unless `tcp`): the
/// receiver's goodput in Mbit/s and M8's duplicates; the report's error if iperf3 failed.
pub fn iperf(m: &Manet, seconds: u32, tcp: bool) -> Result<(f64, u64), String> {
    let wrap: &[&str] = if tcp { &[] } else { &["mptcpize", "run"] };
    let server = m
        .spawn(
            1,
            "iperf3-server",
            &[wrap, &["iperf3", "-s", "-1"]].concat(),
        )
        .unwrap();
    m.ns(1)
        .wait_listening(5201, Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("{e}"));
    let report = m.dir.join("iperf3.json");
    let _ = std::fs::remove_file(&report);
    let dups0 = duplicates(m.ns(8));
    let t = seconds.to_string();
    let mut client = m
        .spawn(
            8,
            "iperf3-client",
            &[
                wrap,
                &[
                    "iperf3",
                    "-c",
                    "10.0.0.1",
                    "-R",
                    "-t",
                    &t,
                    "-J",
                    "--logfile",
                    report.to_str().unwrap(),
                ],
            ]
            .concat(),
        )
        .unwrap();
    let (_, _) = wait(
        "iperf3 ends",
        Duration::from_secs(u64::from(seconds) + 30),
        || client.try_wait(),
    );
    drop(server);
    let dups = duplicates(m.ns(8)) - dups0;
    let rep: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap_or_default())
        .map_err(|e| format!("iperf3 report: {e}; {}", client.log_tail()))?;
    match rep["end"]["sum_received"]["bits_per_second"].as_f64() {
        Some(b) => Ok((b / 1e6, dups)),
        None => Err(format!("iperf3: {}", rep["error"])),
    }
}
