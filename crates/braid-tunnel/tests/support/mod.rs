//! Namespace test support: client ⇄ (two links, tbf) ⇄ gateway ⇄ server, the daemons run
//! in-process on threads inside their namespaces, and real peers (iperf3, TCP/UDP threads).
//! Every namespace is deleted when its guard drops, also when a test fails.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use braid_mptcp::netns::{NetNs, veth};
use braid_tunnel::daemon::{
    ClientConfig, DaemonError, GatewayConfig, keygen, run_client_until, run_gateway_until,
};
use serde_json::Value;
use sha2::{Digest, Sha256};

pub const SERVER: &str = "10.0.9.2";
pub const GW_PORT: u16 = 7000;
/// The gateway's address behind the router of [`Topo::routed`].
pub const ROUTED_GW: &str = "10.0.8.2";
/// The server's IPv6 address in [`Topo::ipv6`].
pub const SERVER6: &str = "fd00:9::2";
/// The inner IPv6 prefix of [`Topo::ipv6`] (gateway ::1, client a ::2).
pub const INNER6: &str = "fd00:200::/64";

/// Whether namespace tests are to be skipped (`BRAID_SKIP_NETNS` set); says so.
pub fn skip_netns() -> bool {
    let skip = std::env::var_os("BRAID_SKIP_NETNS").is_some();
    if skip {
        eprintln!("SKIPPED: BRAID_SKIP_NETNS is set, this namespace test does not run");
    }
    skip
}

/// Namespace tests need root; say so clearly instead of failing obscurely. Returns false
/// when the test is to be skipped (`BRAID_SKIP_NETNS` set, said on stderr; refused under
/// `CI=true`, where a namespace test that cannot run fails): the caller returns.
#[must_use]
pub fn require_root() -> bool {
    if skip_netns() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "BRAID_SKIP_NETNS is set under CI=true: namespace tests must run in CI"
        );
        return false;
    }
    let uid = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_string))
        })
        .and_then(|u| u.parse::<u32>().ok());
    assert_eq!(
        uid,
        Some(0),
        "the tunnel namespace tests need root (CAP_NET_ADMIN, /dev/net/tun): run them as root"
    );
    assert!(
        Path::new("/dev/net/tun").exists(),
        "/dev/net/tun is missing: the TUN driver is needed"
    );
    braid_io::init_logging(braid_io::LogFormat::Text);
    true
}

pub fn sh(ns: &NetNs, cmd: &str) {
    let args: Vec<&str> = cmd.split_whitespace().collect();
    let out = ns
        .exec(&args)
        .unwrap_or_else(|e| panic!("{cmd} in {}: {e}", ns.name));
    assert!(out.status.success(), "{cmd} in {}", ns.name);
}

/// client (c0 10.0.1.2, c1 10.0.2.2) ⇄ gateway (g0 10.0.1.1, g1 10.0.2.1, g9 10.0.9.1) ⇄
/// server (s9 10.0.9.2). The client links are shaped by tbf in both directions when `rates`
/// is given (Mbit/s).
pub struct Topo {
    pub client: NetNs,
    pub gw: NetNs,
    pub server: NetNs,
    pub dir: PathBuf,
    /// The router between client and gateway ([`Topo::routed`]); none when they are wired
    /// directly.
    pub router: Option<NetNs>,
}

impl Topo {
    pub fn new(prefix: &str, rates: Option<[u32; 2]>) -> Topo {
        let client = NetNs::new(&format!("{prefix}c")).unwrap();
        let gw = NetNs::new(&format!("{prefix}g")).unwrap();
        let server = NetNs::new(&format!("{prefix}s")).unwrap();
        veth(&client, "c0", "10.0.1.2/24", &gw, "g0", "10.0.1.1/24").unwrap();
        veth(&client, "c1", "10.0.2.2/24", &gw, "g1", "10.0.2.1/24").unwrap();
        veth(&gw, "g9", "10.0.9.1/24", &server, "s9", "10.0.9.2/24").unwrap();
        sh(&gw, "sysctl -qw net.ipv4.ip_forward=1");
        sh(&server, "ip route add 10.200.0.0/24 via 10.0.9.1");
        shape_links(&client, &gw, "g", rates);
        let dir = test_dir(&client);
        Topo {
            client,
            gw,
            server,
            dir,
            router: None,
        }
    }

    /// Kernel MPTCP between client and gateway over both links ([`Topo::new`]'s addressing):
    /// two subflows allowed, the client announces c1 as a subflow endpoint and routes from its
    /// address through c1 to the gateway's c0 network (10.0.1.0/24), so a connection to
    /// 10.0.1.1 gets a second subflow on c1.
    pub fn kernel_mptcp_subflows(&self) {
        for ns in [&self.client, &self.gw] {
            sh(ns, "ip mptcp limits set subflows 2 add_addr_accepted 2");
        }
        sh(
            &self.client,
            "ip mptcp endpoint add 10.0.2.2 dev c1 subflow",
        );
        sh(&self.client, "ip rule add from 10.0.2.2 table 2");
        sh(
            &self.client,
            "ip route add 10.0.1.0/24 via 10.0.2.1 dev c1 table 2",
        );
    }

    /// client (c0 10.0.1.2, c1 10.0.2.2) ⇄ router (r0 10.0.1.1, r1 10.0.2.1, r8 10.0.8.1)
    /// ⇄ gateway (g8 [`ROUTED_GW`] 10.0.8.2, g9 10.0.9.1) ⇄ server (s9 10.0.9.2). Each client
    /// link reaches the gateway through its own route (`10.0.8.0/24 via` the link's router
    /// address, `dev` the link), which a socket bound to the link (SO_BINDTODEVICE) selects.
    /// The client links are shaped by tbf in both directions (client and router side) when
    /// `rates` is given (Mbit/s).
    pub fn routed(prefix: &str, rates: Option<[u32; 2]>) -> Topo {
        let client = NetNs::new(&format!("{prefix}c")).unwrap();
        let router = NetNs::new(&format!("{prefix}r")).unwrap();
        let gw = NetNs::new(&format!("{prefix}g")).unwrap();
        let server = NetNs::new(&format!("{prefix}s")).unwrap();
        veth(&client, "c0", "10.0.1.2/24", &router, "r0", "10.0.1.1/24").unwrap();
        veth(&client, "c1", "10.0.2.2/24", &router, "r1", "10.0.2.1/24").unwrap();
        veth(&router, "r8", "10.0.8.1/24", &gw, "g8", "10.0.8.2/24").unwrap();
        veth(&gw, "g9", "10.0.9.1/24", &server, "s9", "10.0.9.2/24").unwrap();
        sh(&router, "sysctl -qw net.ipv4.ip_forward=1");
        sh(&gw, "sysctl -qw net.ipv4.ip_forward=1");
        sh(&client, "ip route add 10.0.8.0/24 via 10.0.1.1 dev c0");
        sh(
            &client,
            "ip route add 10.0.8.0/24 via 10.0.2.1 dev c1 metric 10",
        );
        sh(&gw, "ip route add 10.0.1.0/24 via 10.0.8.1");
        sh(&gw, "ip route add 10.0.2.0/24 via 10.0.8.1");
        sh(&server, "ip route add 10.200.0.0/24 via 10.0.9.1");
        shape_links(&client, &router, "r", rates);
        let dir = test_dir(&client);
        Topo {
            client,
            gw,
            server,
            dir,
            router: Some(router),
        }
    }

    /// The outer network in IPv6 only: client (c0 fd00:1::2, c1 fd00:2::2) ⇄ gateway
    /// (g0 fd00:1::1, g1 fd00:2::1); behind the gateway a dual-stack server (s9 10.0.9.2 and
    /// [`SERVER6`] fd00:9::2, gateway g9 10.0.9.1 and fd00:9::1) with routes back to the inner
    /// prefixes 10.200.0.0/24 and [`INNER6`]. The client links are shaped by tbf in both
    /// directions when `rates` is given (Mbit/s). Addresses go without duplicate address
    /// detection (usable at once).
    pub fn ipv6(prefix: &str, rates: Option<[u32; 2]>) -> Topo {
        let client = NetNs::new(&format!("{prefix}c")).unwrap();
        let gw = NetNs::new(&format!("{prefix}g")).unwrap();
        let server = NetNs::new(&format!("{prefix}s")).unwrap();
        for ns in [&client, &gw, &server] {
            sh(ns, "sysctl -qw net.ipv6.conf.all.accept_dad=0");
            sh(ns, "sysctl -qw net.ipv6.conf.default.accept_dad=0");
        }
        veth(&client, "c0", "fd00:1::2/64", &gw, "g0", "fd00:1::1/64").unwrap();
        veth(&client, "c1", "fd00:2::2/64", &gw, "g1", "fd00:2::1/64").unwrap();
        veth(&gw, "g9", "10.0.9.1/24", &server, "s9", "10.0.9.2/24").unwrap();
        sh(&gw, "ip -6 addr add fd00:9::1/64 dev g9 nodad");
        sh(&server, "ip -6 addr add fd00:9::2/64 dev s9 nodad");
        sh(&gw, "sysctl -qw net.ipv4.ip_forward=1");
        sh(&gw, "sysctl -qw net.ipv6.conf.all.forwarding=1");
        sh(&server, "ip route add 10.200.0.0/24 via 10.0.9.1");
        sh(&server, &format!("ip -6 route add {INNER6} via fd00:9::1"));
        shape_links(&client, &gw, "g", rates);
        let dir = test_dir(&client);
        Topo {
            client,
            gw,
            server,
            dir,
            router: None,
        }
    }

    /// The router of a [`Topo::routed`] topology.
    pub fn router(&self) -> &NetNs {
        self.router.as_ref().expect("a routed topology")
    }

    pub fn control(&self, who: &str) -> PathBuf {
        self.dir.join(format!("{who}.sock"))
    }
}

impl Drop for Topo {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// tbf at `mbit` with a 20 ms queue (the bottleneck of a link direction).
/// Shapes client links c0 and c1 and their far ends `{far}0`, `{far}1` at `rates` (Mbit/s).
fn shape_links(client: &NetNs, far_ns: &NetNs, far: &str, rates: Option<[u32; 2]>) {
    for (i, rate) in rates.iter().flatten().enumerate() {
        shape(client, &format!("c{i}"), *rate);
        shape(far_ns, &format!("{far}{i}"), *rate);
    }
}

/// The test's directory for control sockets, named after its client namespace.
fn test_dir(client: &NetNs) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("braid-tunnel-{}", client.name));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn shape(ns: &NetNs, dev: &str, mbit: u32) {
    sh(
        ns,
        &format!("tc qdisc replace dev {dev} root tbf rate {mbit}mbit burst 32kb latency 20ms"),
    );
}

/// Key pairs of the gateway and two clients.
pub struct Keys {
    pub gw: (String, String),
    pub a: (String, String),
    pub b: (String, String),
}

impl Keys {
    pub fn new() -> Keys {
        Keys {
            gw: keygen(),
            a: keygen(),
            b: keygen(),
        }
    }
}

/// The gateway's configuration (clients a: 10.200.0.2, b: 10.200.0.3); `extra` is appended
/// to the top level before the tables.
pub fn gateway_config(topo: &Topo, keys: &Keys, connection: &str) -> GatewayConfig {
    let text = format!(
        r#"
private_key = "{gw}"
listen = ["0.0.0.0:{GW_PORT}"]
client_timeout_ms = 30000
[tun]
address = "10.200.0.1/24"
mtu = 1500
[ops]
control = "{control}"
[connection]
{connection}
[[client]]
name = "a"
public_key = "{a}"
allowed_ips = ["10.200.0.2/32"]
[[client]]
name = "b"
public_key = "{b}"
allowed_ips = ["10.200.0.3/32"]
"#,
        gw = keys.gw.0,
        a = keys.a.1,
        b = keys.b.1,
        control = topo.control("gateway").display(),
    );
    GatewayConfig::parse(&text, []).unwrap_or_else(|e| panic!("gateway config: {e}"))
}

/// Client a's configuration over links c0 and c1; `connection` goes into `[connection]`,
/// `top` at the top level.
pub fn client_config(topo: &Topo, keys: &Keys, top: &str, connection: &str) -> ClientConfig {
    let text = format!(
        r#"
private_key = "{a}"
gateway_public_key = "{gw}"
dead_after_ms = 2000
{top}
[tun]
address = "10.200.0.2/24"
mtu = 1500
routes = ["10.0.9.0/24"]
[ops]
control = "{control}"
[connection]
{connection}
[[link]]
name = "c0"
gateway = "10.0.1.1:{GW_PORT}"
[[link]]
name = "c1"
gateway = "10.0.2.1:{GW_PORT}"
"#,
        a = keys.a.0,
        gw = keys.gw.1,
        control = topo.control("client").display(),
    );
    ClientConfig::parse(&text, []).unwrap_or_else(|e| panic!("client config: {e}"))
}

/// A TOML array of strings.
fn toml_list(items: &[&str]) -> String {
    serde_json::to_string(items).expect("strings")
}

/// The gateway's configuration as [`gateway_config`] with the listen addresses given, more
/// TUN addresses (`tun_more`) and more `allowed_ips` of client a (`a_more`).
pub fn gateway_config_with(
    topo: &Topo,
    keys: &Keys,
    listen: &[&str],
    tun_more: &[&str],
    a_more: &[&str],
    connection: &str,
) -> GatewayConfig {
    let mut a_allowed = vec!["10.200.0.2/32"];
    a_allowed.extend_from_slice(a_more);
    let text = format!(
        r#"
private_key = "{gw}"
listen = {listen}
client_timeout_ms = 30000
[tun]
address = "10.200.0.1/24"
addresses = {tun_more}
mtu = 1500
[ops]
control = "{control}"
[connection]
{connection}
[[client]]
name = "a"
public_key = "{a}"
allowed_ips = {a_allowed}
[[client]]
name = "b"
public_key = "{b}"
allowed_ips = ["10.200.0.3/32"]
"#,
        gw = keys.gw.0,
        a = keys.a.1,
        b = keys.b.1,
        listen = toml_list(listen),
        tun_more = toml_list(tun_more),
        a_allowed = toml_list(&a_allowed),
        control = topo.control("gateway").display(),
    );
    GatewayConfig::parse(&text, []).unwrap_or_else(|e| panic!("gateway config: {e}"))
}

/// Client a's configuration as [`client_config`] with each link's gateway address given
/// (links c0 and c1), more TUN addresses (`tun_more`) and the routes into the tunnel.
pub fn client_config_with(
    topo: &Topo,
    keys: &Keys,
    gateways: [&str; 2],
    tun_more: &[&str],
    routes: &[&str],
    top: &str,
    connection: &str,
) -> ClientConfig {
    let text = format!(
        r#"
private_key = "{a}"
gateway_public_key = "{gw}"
dead_after_ms = 2000
{top}
[tun]
address = "10.200.0.2/24"
addresses = {tun_more}
mtu = 1500
routes = {routes}
[ops]
control = "{control}"
[connection]
{connection}
[[link]]
name = "c0"
gateway = "{g0}"
[[link]]
name = "c1"
gateway = "{g1}"
"#,
        a = keys.a.0,
        gw = keys.gw.1,
        g0 = gateways[0],
        g1 = gateways[1],
        tun_more = toml_list(tun_more),
        routes = toml_list(routes),
        control = topo.control("client").display(),
    );
    ClientConfig::parse(&text, []).unwrap_or_else(|e| panic!("client config: {e}"))
}

/// Client a's configuration on a [`Topo::routed`] topology: both links to the gateway behind
/// the router, the server's network routed into the tunnel, `connection` as `[connection]`.
pub fn routed_client_config(topo: &Topo, keys: &Keys, connection: &str) -> ClientConfig {
    let gw_at = format!("{ROUTED_GW}:{GW_PORT}");
    client_config_with(
        topo,
        keys,
        [&gw_at, &gw_at],
        &[],
        &["10.0.9.0/24"],
        "",
        connection,
    )
}

/// A daemon running on a thread inside a namespace; stopped (and joined) on drop.
pub struct Daemon {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<Result<(), DaemonError>>>,
    pub control: PathBuf,
}

impl Daemon {
    pub fn gateway(ns: &NetNs, cfg: GatewayConfig) -> Daemon {
        let control = cfg.ops.control.clone().expect("tests set a control socket");
        Daemon::spawn(ns, control, move |stop| {
            Box::pin(async move {
                run_gateway_until(cfg, async {
                    let _ = stop.await;
                })
                .await
            })
        })
    }

    pub fn client(ns: &NetNs, cfg: ClientConfig) -> Daemon {
        let control = cfg.ops.control.clone().expect("tests set a control socket");
        Daemon::spawn(ns, control, move |stop| {
            Box::pin(async move {
                run_client_until(cfg, async {
                    let _ = stop.await;
                })
                .await
            })
        })
    }

    fn spawn(
        ns: &NetNs,
        control: PathBuf,
        f: impl FnOnce(
            tokio::sync::oneshot::Receiver<()>,
        )
            -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), DaemonError>>>>
        + Send
        + 'static,
    ) -> Daemon {
        let (tx, rx) = tokio::sync::oneshot::channel();
        // A thread started from a thread inside the namespace is inside it too.
        let thread = ns.run(move || {
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                rt.block_on(f(rx))
            })
        });
        let d = Daemon {
            stop: Some(tx),
            thread: Some(thread),
            control,
        };
        // Up once its control socket answers.
        let t0 = Instant::now();
        loop {
            if let Some(v) = d.try_status() {
                if v.is_object() {
                    break;
                }
            }
            if d.thread.as_ref().is_some_and(|t| t.is_finished()) {
                let r = d.stop_now();
                panic!("daemon exited at start: {r:?}");
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "daemon did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        d
    }

    pub fn try_status(&self) -> Option<Value> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .ok()?;
        rt.block_on(braid_io::control::request(&self.control, "status"))
            .ok()
    }

    pub fn status(&self) -> Value {
        self.try_status().expect("status from the control socket")
    }

    /// Stops the daemon and returns how it ended.
    pub fn stop_now(mut self) -> Result<(), DaemonError> {
        self.finish()
    }

    fn finish(&mut self) -> Result<(), DaemonError> {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        match self.thread.take() {
            Some(t) => t
                .join()
                .unwrap_or_else(|_| Err(DaemonError("panicked".into()))),
            None => Ok(()),
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

/// Waits until the status shows a connection whose established paths number `paths`.
pub fn wait_paths(d: &Daemon, paths: usize, within: Duration) -> Value {
    let t0 = Instant::now();
    loop {
        let v = d.status();
        let n = v["connections"][0]["paths"]
            .as_array()
            .map_or(0, |p| p.iter().filter(|p| p["established"] == true).count());
        if n >= paths {
            return v;
        }
        assert!(
            t0.elapsed() < within,
            "no connection with {paths} established paths after {within:?}: {}",
            braid_tunnel::daemon::status_table(&v)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A process in a namespace, killed on drop.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn iperf3_server(ns: &NetNs) -> Proc {
    let child = Command::new("ip")
        .args(["netns", "exec", &ns.name, "iperf3", "-s", "-p", "5201"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("iperf3 (scripts/deps installs it)");
    let proc = Proc(child);
    ns.wait_listening(5201, Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("iperf3: {e}"));
    proc
}

/// One TCP flow for `secs` seconds; the receiver's rate in Mbit/s.
/// One iperf3 TCP flow for `secs` after 3 omitted seconds: (mean over the run, median of the
/// one-second intervals), Mbit/s.
pub fn iperf3_tcp(ns: &NetNs, secs: u32) -> (f64, f64) {
    let out = ns
        .exec(&[
            "iperf3",
            "-c",
            SERVER,
            "-p",
            "5201",
            "-t",
            &secs.to_string(),
            "-J",
            // Steady state: slow start and the first queue build-up are not counted.
            "-O",
            "3",
            // Linux's default congestion control (this machine defaults to BBR, whose
            // inflight cap of 2 x BDP at the fast path's RTT starves the slower path).
            "-C",
            "cubic",
        ])
        .expect("iperf3 client");
    let v: Value = serde_json::from_slice(&out.stdout).expect("iperf3 JSON");
    let per_s: Vec<String> = v["intervals"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|i| {
                    format!(
                        "{:.0}",
                        i["sum"]["bits_per_second"].as_f64().unwrap_or(0.0) / 1e6
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let retr = v["end"]["sum_sent"]["retransmits"].as_u64().unwrap_or(0);
    eprintln!(
        "iperf3 Mbit/s per second: {}; inner TCP retransmits {retr}",
        per_s.join(" ")
    );
    let mut steady: Vec<f64> = v["intervals"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["sum"]["omitted"] != true)
        .filter_map(|i| i["sum"]["bits_per_second"].as_f64())
        .map(|b| b / 1e6)
        .collect();
    steady.sort_by(f64::total_cmp);
    let median = steady.get(steady.len() / 2).copied().unwrap_or(0.0);
    let mean = v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or_else(|| panic!("iperf3 gave no rate: {v}"))
        / 1e6;
    (mean, median)
}

/// Deterministic file contents.
pub fn file_bytes(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// What the receiver of a TCP transfer saw.
pub struct Received {
    pub bytes: usize,
    pub sha256: [u8; 32],
    /// (time since the first byte, bytes so far) at every read.
    pub reads: Vec<(Duration, usize)>,
    /// When the first byte arrived.
    pub first: Option<Instant>,
}

impl Received {
    /// The mean rate over `[from, to]` (since the first byte), Mbit/s.
    pub fn mean_mbit(&self, from: Duration, to: Duration) -> f64 {
        let at = |t: Duration| {
            self.reads
                .iter()
                .take_while(|(r, _)| *r <= t)
                .last()
                .map_or(0, |(_, b)| *b)
        };
        (at(to) - at(from)) as f64 * 8.0 / (to - from).as_secs_f64() / 1e6
    }

    /// The longest interval without new bytes in `[from, to]` (times since the first byte).
    pub fn longest_stall(&self, from: Duration, to: Duration) -> (Duration, Duration) {
        let mut worst = (Duration::ZERO, Duration::ZERO);
        for w in self.reads.windows(2) {
            if w[1].0 < from || w[0].0 > to {
                continue;
            }
            let gap = w[1].0 - w[0].0;
            if gap > worst.0 {
                worst = (gap, w[0].0);
            }
        }
        worst
    }

    /// The `q`-quantile (0 < q ≤ 1) of the intervals between consecutive reads in `[from, to]`
    /// (times since the first byte): how smoothly the receiver was given data.
    pub fn read_gap_quantile(&self, from: Duration, to: Duration, q: f64) -> Duration {
        let mut gaps: Vec<Duration> = self
            .reads
            .windows(2)
            .filter(|w| w[0].0 >= from && w[1].0 <= to)
            .map(|w| w[1].0 - w[0].0)
            .collect();
        if gaps.is_empty() {
            return Duration::MAX;
        }
        gaps.sort();
        let i = ((q * gaps.len() as f64).ceil() as usize).clamp(1, gaps.len()) - 1;
        gaps[i]
    }

    /// The longest interval without new bytes from `before` ahead of the instant `at` to
    /// `after` past it: (gap, its start relative to `at`, negative when before it, in s).
    pub fn longest_stall_around(
        &self,
        at: Instant,
        before: Duration,
        after: Duration,
    ) -> (Duration, f64) {
        let Some(first) = self.first else {
            return (Duration::ZERO, 0.0);
        };
        let rel = at.saturating_duration_since(first);
        let (gap, start) =
            self.longest_stall(rel.saturating_sub(before), rel.saturating_add(after));
        (gap, start.as_secs_f64() - rel.as_secs_f64())
    }
}

/// A TCP receiver in `ns` on port 5001; join it for what it received.
pub fn tcp_receiver(ns: &NetNs) -> JoinHandle<Received> {
    tcp_receiver_at(ns, "0.0.0.0:5001")
}

/// A TCP receiver in `ns` listening on `bind` (e.g. `0.0.0.0:5004`, `[::]:5003`); join it
/// for what it received.
pub fn tcp_receiver_at(ns: &NetNs, bind: &str) -> JoinHandle<Received> {
    let bind: SocketAddr = bind.parse().expect("a socket address");
    receive(ns.run(move || TcpListener::bind(bind).unwrap()))
}

/// What the first connection accepted on `l` receives, read as it arrives.
fn receive(l: TcpListener) -> JoinHandle<Received> {
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut buf = vec![0u8; 256 * 1024];
        let mut h = Sha256::new();
        let mut total = 0;
        let mut reads = Vec::new();
        let mut t0 = None;
        loop {
            let n = s.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            let now = Instant::now();
            let t0 = *t0.get_or_insert(now);
            h.update(&buf[..n]);
            total += n;
            reads.push((now - t0, total));
        }
        Received {
            bytes: total,
            sha256: h.finalize().into(),
            reads,
            first: t0,
        }
    })
}

/// Sends `data` over TCP from `ns` to `to` (e.g. `10.200.0.2:5004`, `[fd00:9::2]:5003`)
/// with CUBIC, as [`iperf3_tcp`] (this machine defaults to BBR, which a namespace may not
/// change); returns when all is written and the peer closed.
pub fn tcp_send_to(ns: &NetNs, to: &str, data: Vec<u8>) -> JoinHandle<Instant> {
    let addr: SocketAddr = to.parse().expect("a socket address");
    let mut s = ns.run(move || TcpStream::connect_timeout(&addr, Duration::from_secs(10)).unwrap());
    socket2::SockRef::from(&s)
        .set_tcp_congestion(b"cubic")
        .expect("TCP_CONGESTION cubic");
    std::thread::spawn(move || {
        let t0 = Instant::now();
        s.write_all(&data).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
        t0
    })
}

/// Sends `data` over TCP from `ns` to the server; returns when all is written and closed.
pub fn tcp_send(ns: &NetNs, data: Vec<u8>) -> JoinHandle<Instant> {
    let addr: SocketAddr = format!("{SERVER}:5001").parse().unwrap();
    let mut s = ns.run(move || TcpStream::connect_timeout(&addr, Duration::from_secs(10)).unwrap());
    std::thread::spawn(move || {
        let t0 = Instant::now();
        s.write_all(&data).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
        t0
    })
}

pub fn sha256(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}

/// A constant-bit-rate UDP flow: `pps` packets of `size` bytes for `dur`, from `from` to the
/// server's port 5002; the receiver returns the arrival time of each sequence number.
pub fn cbr(
    from: &NetNs,
    to: &NetNs,
    pps: u32,
    size: usize,
    dur: Duration,
) -> (JoinHandle<()>, JoinHandle<Vec<(u32, Duration)>>) {
    let rx = to.run(|| UdpSocket::bind("0.0.0.0:5002").unwrap());
    rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let tx = from.run(|| UdpSocket::bind("0.0.0.0:0").unwrap());
    let recv = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let mut out = Vec::new();
        let t0 = Instant::now();
        while let Ok(n) = rx.recv(&mut buf) {
            if n >= 4 {
                let seq = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
                out.push((seq, t0.elapsed()));
            }
        }
        out
    });
    let send = std::thread::spawn(move || {
        let dst: SocketAddr = format!("{SERVER}:5002").parse().unwrap();
        let mut pkt = vec![0u8; size];
        let t0 = Instant::now();
        let gap = Duration::from_secs(1) / pps;
        let n = (dur.as_secs_f64() * f64::from(pps)) as u32;
        for seq in 0..n {
            let at = t0 + gap * seq;
            if let Some(d) = at.checked_duration_since(Instant::now()) {
                std::thread::sleep(d);
            }
            pkt[..4].copy_from_slice(&seq.to_be_bytes());
            let _ = tx.send_to(&pkt, dst);
        }
    });
    (send, recv)
}

/// UDP datagrams every 10 ms from `from` to the server's port 5005, each carrying its send
/// time; returns the stop flag, the sender, and the receiver's (sent, received) instants.
pub type Probe = (
    Arc<AtomicBool>,
    JoinHandle<()>,
    JoinHandle<Vec<(Instant, Instant)>>,
);

pub fn udp_probe(from: &NetNs, to: &NetNs) -> Probe {
    let rx = to.run(|| UdpSocket::bind("0.0.0.0:5005").unwrap());
    rx.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let tx = from.run(|| UdpSocket::bind("0.0.0.0:0").unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();
    let (ready_tx, ready_rx) = mpsc::channel();
    let stop_rx = stop.clone();
    let recv = std::thread::spawn(move || {
        let _ = ready_tx.send(());
        let mut buf = [0u8; 64];
        let mut out = Vec::new();
        loop {
            match rx.recv(&mut buf) {
                Ok(n) if n >= 8 => {
                    let us = u64::from_be_bytes(buf[..8].try_into().unwrap());
                    out.push((t0 + Duration::from_micros(us), Instant::now()));
                }
                Ok(_) => {}
                Err(_) if stop_rx.load(Ordering::Relaxed) => break,
                Err(_) => {}
            }
        }
        out
    });
    let _ = ready_rx.recv();
    let stop_tx = stop.clone();
    let send = std::thread::spawn(move || {
        let dst: SocketAddr = format!("{SERVER}:5005").parse().unwrap();
        while !stop_tx.load(Ordering::Relaxed) {
            let us = t0.elapsed().as_micros() as u64;
            let _ = tx.send_to(&us.to_be_bytes(), dst);
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    (stop, send, recv)
}

/// Resident memory of this process (the daemons run in it), kB.
pub fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_string))
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// CPU time (user + system) of this process so far, seconds.
pub fn cpu_seconds() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = s.rsplit_once(") ").map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // Fields 14 and 15 of stat (utime, stime) are 11 and 12 after the command name.
    (ticks(11) + ticks(12)) / 100.0
}

/// What a [`cbr_between`] receiver saw.
pub struct CbrRecv {
    /// (sequence number, arrival since the flow's start, one-way delay) of each packet.
    pub got: Vec<(u32, Duration, Duration)>,
    /// Packets whose bytes were not the ones sent.
    pub corrupt: u64,
}

impl CbrRecv {
    /// The longest time between two arrivals.
    pub fn longest_gap(&self) -> Duration {
        self.got
            .windows(2)
            .map(|w| w[1].1.saturating_sub(w[0].1))
            .max()
            .unwrap_or_default()
    }

    /// Packets that arrived after one with a higher sequence number.
    pub fn behind(&self) -> u64 {
        let mut max = None;
        let mut n = 0;
        for g in &self.got {
            if max.is_some_and(|m| g.0 < m) {
                n += 1;
            }
            max = max.max(Some(g.0));
        }
        n
    }

    /// Distinct sequence numbers received.
    pub fn distinct(&self) -> usize {
        let mut s: Vec<u32> = self.got.iter().map(|g| g.0).collect();
        s.sort_unstable();
        s.dedup();
        s.len()
    }
}

/// A CBR packet's bytes: its sequence number, then a pattern of it.
fn cbr_packet(seq: u32, size: usize, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&seq.to_be_bytes());
    out.extend((4..size).map(|i| (seq as usize).wrapping_mul(31).wrapping_add(i) as u8));
}

/// A constant-bit-rate UDP flow from namespace `from` to `to_addr` (a socket address inside
/// namespace `to`): `pps` packets of `size` bytes for `dur`, each packet's bytes a function
/// of its sequence number, checked on arrival. The sender returns how many it sent.
pub fn cbr_between(
    from: &NetNs,
    to: &NetNs,
    to_addr: &str,
    pps: u32,
    size: usize,
    dur: Duration,
) -> (JoinHandle<u32>, JoinHandle<CbrRecv>) {
    let dst: SocketAddr = to_addr.parse().expect("a socket address");
    let bind = SocketAddr::new(
        if dst.is_ipv4() {
            std::net::Ipv4Addr::UNSPECIFIED.into()
        } else {
            std::net::Ipv6Addr::UNSPECIFIED.into()
        },
        dst.port(),
    );
    let rx = to.run(move || UdpSocket::bind(bind).unwrap());
    rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    socket2::SockRef::from(&rx)
        .set_recv_buffer_size(4 << 20)
        .unwrap();
    let tx = from.run(move || UdpSocket::bind(SocketAddr::new(bind.ip(), 0)).unwrap());
    let t0 = Instant::now();
    let gap = Duration::from_secs(1) / pps;
    let recv = std::thread::spawn(move || {
        let mut buf = vec![0u8; 65536];
        let mut want = Vec::new();
        let mut out = CbrRecv {
            got: Vec::new(),
            corrupt: 0,
        };
        while let Ok(n) = rx.recv(&mut buf) {
            let now = t0.elapsed();
            if n < 4 {
                out.corrupt += 1;
                continue;
            }
            let seq = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
            cbr_packet(seq, n, &mut want);
            if n != size || buf[..n] != want[..] {
                out.corrupt += 1;
                continue;
            }
            out.got.push((seq, now, now.saturating_sub(gap * seq)));
        }
        out
    });
    let send = std::thread::spawn(move || {
        let n = (dur.as_secs_f64() * f64::from(pps)) as u32;
        let mut pkt = Vec::new();
        for seq in 0..n {
            let at = t0 + gap * seq;
            if let Some(d) = at.checked_duration_since(Instant::now()) {
                std::thread::sleep(d);
            }
            cbr_packet(seq, size, &mut pkt);
            let _ = tx.send_to(&pkt, dst);
        }
        n
    });
    (send, recv)
}

/// A TCP sender (CUBIC) from namespace `from` to `to_addr`, writing for `dur`, then closing.
pub fn tcp_sender_for(from: &NetNs, to_addr: &str, dur: Duration) -> JoinHandle<()> {
    let addr: SocketAddr = to_addr.parse().expect("a socket address");
    send_for(
        from.run(move || TcpStream::connect_timeout(&addr, Duration::from_secs(10)).unwrap()),
        dur,
    )
}

/// Writes on `s` (CUBIC) for `dur`, then closes it.
fn send_for(mut s: TcpStream, dur: Duration) -> JoinHandle<()> {
    socket2::SockRef::from(&s)
        .set_tcp_congestion(b"cubic")
        .expect("TCP_CONGESTION cubic");
    std::thread::spawn(move || {
        let chunk = file_bytes(64 << 10);
        let t0 = Instant::now();
        while t0.elapsed() < dur {
            if s.write_all(&chunk).is_err() {
                break;
            }
        }
        let _ = s.shutdown(std::net::Shutdown::Write);
    })
}

/// One kernel MPTCP flow (IPPROTO_MPTCP sockets both ends, CUBIC on its subflows) from
/// namespace `from` to `to_addr` (a listener bound to `bind` in namespace `to`), sending for
/// `dur`: what the receiver saw. The subflows are the namespaces' MPTCP endpoints'.
pub fn mptcp_flow(from: &NetNs, to: &NetNs, bind: &str, to_addr: &str, dur: Duration) -> Received {
    use socket2::{Domain, Protocol, Socket, Type};
    let bind: SocketAddr = bind.parse().expect("a socket address");
    let addr: SocketAddr = to_addr.parse().expect("a socket address");
    let mptcp = |a: SocketAddr| {
        Socket::new(Domain::for_address(a), Type::STREAM, Some(Protocol::MPTCP))
            .expect("an MPTCP socket (kernel MPTCP enabled)")
    };
    let l = to.run(move || {
        let s = mptcp(bind);
        s.set_reuse_address(true).unwrap();
        s.bind(&bind.into()).unwrap();
        s.listen(8).unwrap();
        TcpListener::from(s)
    });
    let rx = receive(l);
    let s = from.run(move || {
        let s = mptcp(addr);
        s.connect_timeout(&addr.into(), Duration::from_secs(10))
            .unwrap();
        TcpStream::from(s)
    });
    let _ = send_for(s, dur).join();
    rx.join().expect("receiver")
}

/// One TCP flow (CUBIC) from namespace `from` to `to_addr` (a listener bound to `bind` in
/// namespace `to`), sending for `dur`: what the receiver saw.
pub fn tcp_flow(from: &NetNs, to: &NetNs, bind: &str, to_addr: &str, dur: Duration) -> Received {
    let rx = tcp_receiver_at(to, bind);
    let _ = tcp_sender_for(from, to_addr, dur).join();
    rx.join().expect("receiver")
}
