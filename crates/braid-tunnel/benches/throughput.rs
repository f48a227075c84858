//! Throughput of the encrypted tunnel on unshaped veth links, beside the current wireguard-go in
//! the same namespaces and the same run: `cargo bench -p braid-tunnel --bench throughput` (root;
//! namespaces are created and deleted by the run). One iperf3 TCP flow (CUBIC) each, 10 s after
//! 2 s omitted; the runs of the variants are interleaved (braid one link, wireguard-go one link,
//! braid two links, …) `BRAID_BENCH_ROUNDS` times (default 3), and each variant is reported as
//! min / median / max of Gbit/s and of Gbit/s per core of the tunnel processes (their user and
//! system CPU time over the run; the daemons, not iperf3 or the kernel's softirq work).
//!
//! ```text
//! client (c0 10.0.1.2, c1 10.0.2.2) ═ veth ═ gateway (g0 10.0.1.1, g1 10.0.2.1) ─ server 10.0.9.2
//! ```
//!
//! - braid: iperf3 client → TUN → braid tunnel client → UDP over c0 (and c1) → gateway → server;
//!   the daemons run in this process (their CPU time is this process's);
//! - wireguard-go: the current release from the Go module proxy (`scripts/wireguard-go`, which
//!   builds it once; skipped with a message where Go is absent), one interface in the client
//!   and one in the gateway namespace over c0, configured through its UAPI socket;
//! - for reference, once: kernel MPTCP over both links without encryption, and plain TCP over c0.
//!
//! Unshaped, one link already keeps both cores busy (the daemons, iperf3 and the kernel's
//! forwarding share them), so a second link adds no capacity; the variants with both links
//! shaped at 1 Gbit/s each (tbf) show what two links carry when the CPU allows it.
//!
//! `BRAID_BENCH_ONLY=TEXT` runs only the variants whose name contains TEXT (and no reference);
//! `BRAID_BENCH_STATUS=1` prints the braid client's status table after each braid run.

#[path = "../tests/support/mod.rs"]
mod support;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use braid_mptcp::netns::NetNs;
use serde_json::Value;
use support::*;

const SECS: u32 = 10;

/// One measured run.
#[derive(Clone, Copy)]
struct Run {
    gbit: f64,
    /// Tunnel processes' CPU, in cores (CPU seconds per second).
    cores: f64,
}

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
    let rounds: usize = std::env::var("BRAID_BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let only = std::env::var("BRAID_BENCH_ONLY").ok();
    let topo = Topo::new("bbt", None);
    let keys = Keys::new();
    let wg = wireguard_go();
    sh(&topo.server, "ip route add 10.201.0.0/24 via 10.0.9.1");
    println!(
        "braid tunnel throughput: one TCP flow (iperf3, CUBIC), {SECS} s after 2 s omitted, unshaped veth, {rounds} interleaved rounds"
    );
    type Variant<'a> = (&'a str, Box<dyn Fn() -> Option<Run> + 'a>);
    let mut variants: Vec<Variant> = vec![
        (
            "braid, one link",
            Box::new(|| Some(braid(&topo, &keys, 1, true))),
        ),
        (
            "wireguard-go, one link",
            Box::new(|| wg.as_ref().map(|bin| wireguard(&topo, bin))),
        ),
        (
            "braid, two links",
            Box::new(|| Some(braid(&topo, &keys, 2, true))),
        ),
        (
            "braid, one link, no TUN offload",
            Box::new(|| Some(braid(&topo, &keys, 1, false))),
        ),
        (
            "braid, one 1 Gbit/s link",
            Box::new(|| Some(shaped(&topo, || braid(&topo, &keys, 1, true)))),
        ),
        (
            "braid, two 1 Gbit/s links",
            Box::new(|| Some(shaped(&topo, || braid(&topo, &keys, 2, true)))),
        ),
    ];
    if let Some(o) = &only {
        variants.retain(|(n, _)| n.contains(o.as_str()));
    }
    let mut results: Vec<Vec<Run>> = vec![Vec::new(); variants.len()];
    for round in 0..rounds {
        for (i, (name, f)) in variants.iter().enumerate() {
            if let Some(r) = f() {
                println!(
                    "  round {}: {name:<30} {:>6.2} Gbit/s  {:>5.2} cores  {:>5.2} Gbit/s per core",
                    round + 1,
                    r.gbit,
                    r.cores,
                    r.gbit / r.cores.max(1e-9)
                );
                results[i].push(r);
            }
        }
    }
    println!(
        "\n  {:<30} {:>22} {:>26}",
        "", "Gbit/s min/med/max", "Gbit/s per core min/med/max"
    );
    for ((name, _), runs) in variants.iter().zip(&results) {
        if runs.is_empty() {
            println!("  {name:<30} not run");
            continue;
        }
        let g = stats(runs.iter().map(|r| r.gbit));
        let c = stats(runs.iter().map(|r| r.gbit / r.cores.max(1e-9)));
        println!(
            "  {name:<30} {:>6.2} {:>6.2} {:>6.2}     {:>6.2} {:>6.2} {:>6.2}",
            g[0], g[1], g[2], c[0], c[1], c[2]
        );
    }
    // By name: `BRAID_BENCH_ONLY` may have left either out.
    let runs_of = |name: &str| {
        variants
            .iter()
            .position(|(n, _)| *n == name)
            .map(|i| results[i].as_slice())
    };
    if let (Some(b), Some(w)) = (
        runs_of("braid, one link"),
        runs_of("wireguard-go, one link"),
    ) && !b.is_empty()
        && !w.is_empty()
    {
        let med = |rs: &[Run], f: fn(&Run) -> f64| stats(rs.iter().map(f))[1];
        println!(
            "  braid / wireguard-go, one link (medians): {:.2}× Gbit/s, {:.2}× Gbit/s per core",
            med(b, |r| r.gbit) / med(w, |r| r.gbit),
            med(b, |r| r.gbit / r.cores) / med(w, |r| r.gbit / r.cores)
        );
    }
    if let (Some(one), Some(two)) = (
        runs_of("braid, one 1 Gbit/s link"),
        runs_of("braid, two 1 Gbit/s links"),
    ) && !one.is_empty()
        && !two.is_empty()
    {
        let med = |rs: &[Run]| stats(rs.iter().map(|r| r.gbit))[1];
        println!(
            "  braid, two 1 Gbit/s links / one (medians): {:.2}×",
            med(two) / med(one)
        );
    }
    if only.is_none() {
        references(&topo);
    }
}

/// min, median, max.
fn stats(xs: impl Iterator<Item = f64>) -> [f64; 3] {
    let mut v: Vec<f64> = xs.collect();
    v.sort_by(f64::total_cmp);
    [v[0], v[v.len() / 2], v[v.len() - 1]]
}

/// braid over the first `links` links with the default configuration, or with TUN offload
/// (TSO/GRO, on by default) turned off.
fn braid(topo: &Topo, keys: &Keys, links: usize, offload: bool) -> Run {
    let mut gcfg = gateway_config(topo, keys, "");
    let mut ccfg = client_config(topo, keys, "", "");
    ccfg.links.truncate(links);
    if !offload {
        gcfg.tun.offload = false;
        ccfg.tun.offload = false;
    }
    let _gw = Daemon::gateway(&topo.gw, gcfg);
    let cl = Daemon::client(&topo.client, ccfg);
    wait_paths(&cl, links, Duration::from_secs(10));
    let _srv = iperf3_server(&topo.server);
    let cpu0 = cpu_seconds();
    let t0 = Instant::now();
    let gbit = iperf3(&topo.client, SERVER, false);
    let cores = (cpu_seconds() - cpu0) / t0.elapsed().as_secs_f64();
    if std::env::var_os("BRAID_BENCH_STATUS").is_some() {
        println!("{}", braid_tunnel::daemon::status_table(&cl.status()));
    }
    Run { gbit, cores }
}

/// Capacity of each link in the shaped variants (Mbit/s): two of them are less than one
/// unshaped link carries, so the CPU allows two to carry more than one.
const SHAPED_MBIT: u32 = 1000;

/// `run` with both links shaped by tbf at [`SHAPED_MBIT`] each way (a 20 ms queue; a burst of
/// 1 ms at the rate, as a 1 Gbit/s port sends back to back), unshaped again afterwards.
fn shaped(topo: &Topo, run: impl FnOnce() -> Run) -> Run {
    let devs = [
        (&topo.client, "c0"),
        (&topo.client, "c1"),
        (&topo.gw, "g0"),
        (&topo.gw, "g1"),
    ];
    let burst = (SHAPED_MBIT as usize * 1000 / 8).max(32 * 1024);
    for (ns, dev) in devs {
        sh(
            ns,
            &format!(
                "tc qdisc replace dev {dev} root tbf rate {SHAPED_MBIT}mbit burst {burst} latency 20ms"
            ),
        );
    }
    let r = run();
    for (ns, dev) in devs {
        sh(ns, &format!("tc qdisc del dev {dev} root"));
    }
    r
}

/// The wireguard-go binary, built by `scripts/wireguard-go`; `None` (said) without Go.
fn wireguard_go() -> Option<PathBuf> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/wireguard-go");
    let out = Command::new(&script)
        .stderr(Stdio::inherit())
        .output()
        .expect("scripts/wireguard-go");
    if !out.status.success() {
        println!("wireguard-go: SKIPPED (scripts/wireguard-go failed; see above)");
        return None;
    }
    let bin = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let v = Command::new("/usr/local/go/bin/go")
        .args(["version", "-m"])
        .arg(&bin)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .and_then(|s| s.lines().find(|l| l.contains("mod\t")).map(str::to_string))
        .unwrap_or_default();
    println!("wireguard-go: {} ({})", bin.display(), v.trim());
    Some(bin)
}

/// A wireguard-go process for interface `dev` in `ns`, killed on drop (by its [`Proc`]).
struct Wg {
    _proc: Proc,
    pid: u32,
}

impl Wg {
    fn start(bin: &Path, ns: &NetNs, dev: &str, config: &str, address: &str) -> Wg {
        let sock = PathBuf::from(format!("/var/run/wireguard/{dev}.sock"));
        let _ = std::fs::remove_file(&sock);
        let child = Command::new("ip")
            .args(["netns", "exec", &ns.name])
            .arg(bin)
            .args(["-f", dev])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("wireguard-go");
        // `ip netns exec` enters the namespace and executes wireguard-go in its place; held at
        // once, so a failed setup below kills it too.
        let wg = Wg {
            pid: child.id(),
            _proc: Proc(child),
        };
        let t0 = Instant::now();
        while !sock.exists() {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "wireguard-go did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut s = std::os::unix::net::UnixStream::connect(&sock).expect("UAPI socket");
        s.write_all(format!("set=1\n{config}\n").as_bytes())
            .unwrap();
        let mut answer = [0u8; 64];
        let n = s.read(&mut answer).unwrap();
        let answer = String::from_utf8_lossy(&answer[..n]);
        assert!(answer.starts_with("errno=0"), "wireguard-go UAPI: {answer}");
        sh(ns, &format!("ip address add {address} dev {dev}"));
        sh(ns, &format!("ip link set {dev} up"));
        wg
    }

    /// The process's CPU time so far, seconds.
    fn cpu(&self) -> f64 {
        process_cpu(self.pid)
    }
}

/// wireguard-go over c0: client wgc 10.201.0.2 ⇄ gateway wgg 10.201.0.1.
fn wireguard(topo: &Topo, bin: &Path) -> Run {
    let hex = |b64: &str| {
        base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    let (gk, ck) = (
        braid_tunnel::daemon::keygen(),
        braid_tunnel::daemon::keygen(),
    );
    let gw = Wg::start(
        bin,
        &topo.gw,
        "wgg",
        &format!(
            "private_key={}\nlisten_port=51820\nreplace_peers=true\npublic_key={}\nallowed_ip=10.201.0.2/32\n",
            hex(&gk.0),
            hex(&ck.1)
        ),
        "10.201.0.1/24",
    );
    let cl = Wg::start(
        bin,
        &topo.client,
        "wgc",
        &format!(
            "private_key={}\nreplace_peers=true\npublic_key={}\nendpoint=10.0.1.1:51820\nallowed_ip=0.0.0.0/0\n",
            hex(&ck.0),
            hex(&gk.1)
        ),
        "10.201.0.2/24",
    );
    sh(&topo.client, "ip route replace 10.0.9.0/24 dev wgc");
    let _srv = iperf3_server(&topo.server);
    let cpu0 = gw.cpu() + cl.cpu();
    let t0 = Instant::now();
    let gbit = iperf3(&topo.client, SERVER, false);
    let cores = (gw.cpu() + cl.cpu() - cpu0) / t0.elapsed().as_secs_f64();
    Run { gbit, cores }
}

/// User + system CPU time of process `pid`, seconds.
fn process_cpu(pid: u32) -> f64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = s.rsplit_once(") ").map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// Kernel MPTCP over both links without encryption, and plain TCP over c0: the ceilings.
fn references(topo: &Topo) {
    topo.kernel_mptcp_subflows();
    println!("\n  reference, one run each:");
    {
        let _srv = mptcp_iperf3_server(&topo.gw);
        let gbit = iperf3(&topo.client, "10.0.1.1", true);
        println!(
            "  {:<44} {gbit:>6.2} Gbit/s",
            "kernel MPTCP, no encryption, 2 subflows"
        );
    }
    {
        let _srv = iperf3_server(&topo.gw);
        let gbit = iperf3(&topo.client, "10.0.1.1", false);
        println!("  {:<44} {gbit:>6.2} Gbit/s", "plain TCP over c0");
    }
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
