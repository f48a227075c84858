//! Support for the namespace tests: a client with two shaped links through a router to a
//! server, MPTCP sender and receiver threads inside the namespaces, and the `braid pm` daemon
//! as a child process. Every namespace is removed when its guard drops, also on panic.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use braid_mptcp::netns::{NetNs, veth};
use sha2::{Digest, Sha256};
use socket2::{Domain, Protocol, Socket, Type};

pub const IPPROTO_MPTCP: i32 = 262;
pub const SERVER: &str = "10.0.9.2";

/// Namespace tests need root; say so instead of failing obscurely. Returns false when the
/// test is to be skipped (`BRAID_SKIP_NETNS` set, said on stderr; refused under `CI=true`,
/// where a namespace test that cannot run fails): the caller returns.
#[must_use]
pub fn require_root() -> bool {
    if std::env::var_os("BRAID_SKIP_NETNS").is_some() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "BRAID_SKIP_NETNS is set under CI=true: namespace tests must run in CI"
        );
        eprintln!("SKIPPED: BRAID_SKIP_NETNS is set, this namespace test does not run");
        return false;
    }
    let uid = unsafe_free_uid();
    assert_eq!(
        uid, 0,
        "namespace tests need root (CAP_NET_ADMIN); run as root or set BRAID_SKIP_NETNS=1"
    );
    true
}

fn unsafe_free_uid() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_string))
        })
        .and_then(|u| u.parse().ok())
        .unwrap_or(u32::MAX)
}

pub fn sh(ns: &NetNs, cmd: &str) {
    let args: Vec<&str> = cmd.split_whitespace().collect();
    let out = ns.exec(&args).unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(
        out.status.success(),
        "{} in {}: {}",
        cmd,
        ns.name,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// client (c1: 10.0.1.1, c2: 10.0.2.1, each shaped by tbf) — router — server (10.0.9.2).
/// Policy routing sends each source address out of its own link, as on a multihomed host.
pub struct Topo {
    pub client: NetNs,
    pub router: NetNs,
    pub server: NetNs,
}

impl Topo {
    /// `rate_mbit`: the tbf rate of each client link (client → router).
    pub fn new(prefix: &str, rate_mbit: [u32; 2], c2_addr: bool) -> Topo {
        let client = NetNs::new(&format!("{prefix}c")).unwrap();
        let router = NetNs::new(&format!("{prefix}r")).unwrap();
        let server = NetNs::new(&format!("{prefix}s")).unwrap();
        veth(&client, "c1", "10.0.1.1/24", &router, "r1", "10.0.1.254/24").unwrap();
        veth(&client, "c2", "10.0.2.1/24", &router, "r2", "10.0.2.254/24").unwrap();
        veth(&router, "r9", "10.0.9.1/24", &server, "s9", "10.0.9.2/24").unwrap();
        if !c2_addr {
            sh(&client, "ip addr del 10.0.2.1/24 dev c2");
        }
        sh(&router, "sysctl -qw net.ipv4.ip_forward=1");
        sh(&server, "ip route add default via 10.0.9.1");
        for (i, rate) in rate_mbit.iter().enumerate() {
            let n = i + 1;
            sh(
                &client,
                &format!("tc qdisc add dev c{n} root tbf rate {rate}mbit burst 32kb latency 40ms"),
            );
            sh(&client, &format!("ip rule add from 10.0.{n}.1 table {n}"));
        }
        let t = Topo {
            client,
            router,
            server,
        };
        t.route_table(1);
        if c2_addr {
            t.route_table(2);
        }
        // The server accepts joins (in-kernel path manager on that side).
        sh(
            &t.server,
            "ip mptcp limits set subflows 8 add_addr_accepted 8",
        );
        t
    }

    /// The per-source routing table of link `n` (needs the link's address).
    pub fn route_table(&self, n: u32) {
        sh(
            &self.client,
            &format!("ip route replace default via 10.0.{n}.254 dev c{n} table {n}"),
        );
        sh(
            &self.client,
            &format!(
                "ip route replace default via 10.0.{n}.254 dev c{n} metric {}",
                n * 10
            ),
        );
    }

    pub fn userspace_pm(&self) {
        sh(&self.client, "sysctl -qw net.mptcp.path_manager=userspace");
    }
}

/// What the receiving application saw.
pub struct Received {
    pub bytes: u64,
    pub sha256: String,
    /// (time since the first byte, bytes) of every read.
    pub reads: Vec<(Duration, usize)>,
    pub start: Instant,
}

impl Received {
    /// The longest time without data between `from` and `to` (times since the first byte),
    /// counting the time from the last read to `to` when data stopped coming.
    pub fn max_gap(&self, from: Duration, to: Duration) -> Duration {
        let mut last = from;
        let mut gap = Duration::ZERO;
        for &(t, _) in &self.reads {
            if t <= from {
                continue;
            }
            if t >= to {
                break;
            }
            gap = gap.max(t - last);
            last = t;
        }
        gap.max(to.saturating_sub(last))
    }
}

/// An IPv4 MPTCP socket, in the namespace of the calling thread.
pub fn mptcp_socket() -> Socket {
    Socket::new(
        Domain::IPV4,
        Type::STREAM,
        Some(Protocol::from(IPPROTO_MPTCP)),
    )
    .expect("MPTCP socket")
}

/// An MPTCP socket of `ns` listening on `port` with `backlog`. The socket belongs to the
/// namespace it was created in, whichever thread uses it.
pub fn mptcp_listener(ns: &NetNs, port: u16, backlog: i32) -> Socket {
    ns.run(move || {
        let s = mptcp_socket();
        s.set_reuse_address(true).unwrap();
        let addr: SocketAddr = format!("0.0.0.0:{port}").parse().unwrap();
        s.bind(&addr.into()).unwrap();
        s.listen(backlog).unwrap();
        s
    })
}

/// An MPTCP listener in the server namespace; returns what it received on one connection.
pub fn receiver(ns: &NetNs, port: u16) -> JoinHandle<Received> {
    let s = mptcp_listener(ns, port, 1);
    std::thread::spawn(move || {
        let (c, _) = s.accept().unwrap();
        read_stream(c.into())
    })
}

/// Reads `c` to its end, then tells the sender everything was read.
fn read_stream(mut c: std::net::TcpStream) -> Received {
    // A connection that died must end the test, not hang it.
    c.set_read_timeout(Some(Duration::from_secs(8))).unwrap();
    let mut buf = vec![0u8; 256 * 1024];
    let mut h = Sha256::new();
    let mut reads = Vec::new();
    let mut bytes = 0u64;
    let mut start = None;
    loop {
        let n = c.read(&mut buf).unwrap_or(0);
        if n == 0 {
            break;
        }
        let now = Instant::now();
        let s0 = *start.get_or_insert(now);
        reads.push((now - s0, n));
        bytes += n as u64;
        h.update(&buf[..n]);
    }
    let _ = c.shutdown(std::net::Shutdown::Write);
    Received {
        bytes,
        sha256: hex(&h.finalize()),
        reads,
        start: start.unwrap_or_else(Instant::now),
    }
}

pub struct Sent {
    pub bytes: u64,
    pub sha256: String,
    /// A write blocked for 8 s: the connection is dead.
    pub aborted: bool,
}

/// How [`sender_with`] writes.
#[derive(Debug, Clone, Copy, Default)]
pub struct SendOpts {
    /// Constant bit rate (bit/s) in messages of this many bytes, instead of as fast as the
    /// connection takes.
    pub cbr: Option<(f64, usize)>,
    /// `SO_SNDBUF` of the socket (the kernel doubles it), instead of autotuning.
    pub send_buffer: Option<usize>,
}

/// An MPTCP sender in the client namespace writing a deterministic byte stream until `stop`.
pub fn sender(ns: &NetNs, to: SocketAddr, stop: Arc<AtomicBool>) -> JoinHandle<Sent> {
    sender_with(ns, to, stop, SendOpts::default())
}

/// [`sender`] with options: a CBR stream, a fixed send buffer.
pub fn sender_with(
    ns: &NetNs,
    to: SocketAddr,
    stop: Arc<AtomicBool>,
    opts: SendOpts,
) -> JoinHandle<Sent> {
    let s = ns.run(mptcp_socket);
    if let Some(b) = opts.send_buffer {
        s.set_send_buffer_size(b).expect("SO_SNDBUF");
    }
    std::thread::spawn(move || {
        s.connect_timeout(&to.into(), Duration::from_secs(5))
            .expect("connect");
        write_stream(s.into(), &stop, opts)
    })
}

/// A download: the client connects to the server's `port` and reads; the server writes with
/// `opts` until `stop`. Returns (the server's sender, the client's receiver).
pub fn download(
    t: &Topo,
    port: u16,
    stop: Arc<AtomicBool>,
    opts: SendOpts,
) -> (JoinHandle<Sent>, JoinHandle<Received>) {
    let l = mptcp_listener(&t.server, port, 1);
    let tx = std::thread::spawn(move || {
        let (c, _) = l.accept().unwrap();
        if let Some(b) = opts.send_buffer {
            c.set_send_buffer_size(b).expect("SO_SNDBUF");
        }
        write_stream(c.into(), &stop, opts)
    });
    let s = t.client.run(mptcp_socket);
    let to: SocketAddr = format!("{SERVER}:{port}").parse().unwrap();
    let rx = std::thread::spawn(move || {
        s.connect_timeout(&to.into(), Duration::from_secs(5))
            .expect("connect");
        read_stream(s.into())
    });
    (tx, rx)
}

/// Writes a deterministic byte stream on `c` until `stop`, then waits for the peer to have
/// read it all.
fn write_stream(mut c: std::net::TcpStream, stop: &AtomicBool, opts: SendOpts) -> Sent {
    let _ = c.set_nodelay(true);
    c.set_write_timeout(Some(Duration::from_secs(8))).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut aborted = false;
    let mut h = Sha256::new();
    let mut bytes = 0u64;
    let size = opts.cbr.map_or(64 * 1024, |(_, size)| size);
    let mut block = vec![0u8; size];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let t0 = Instant::now();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        if let Some((rate, size)) = opts.cbr {
            let at = t0 + Duration::from_secs_f64(n as f64 * size as f64 * 8.0 / rate);
            n += 1;
            if let Some(wait) = at.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
        for b in block.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b.copy_from_slice(&x.to_le_bytes()[..b.len()]);
        }
        if c.write_all(&block).is_err() {
            aborted = true;
            break;
        }
        h.update(&block);
        bytes += block.len() as u64;
    }
    let _ = c.shutdown(std::net::Shutdown::Write);
    // Wait for the peer to finish reading.
    let _ = c.read(&mut [0u8; 1]);
    Sent {
        bytes,
        sha256: hex(&h.finalize()),
        aborted,
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A daemon child process inside a namespace; killed on drop.
pub struct Daemon {
    pub child: Child,
    pub control: PathBuf,
    pub signal: PathBuf,
    pub log: PathBuf,
    pub dir: PathBuf,
}

impl Daemon {
    /// Starts `braid pm` with `config` (TOML text) in `ns` and waits until it answers.
    pub fn braid_pm(ns: &NetNs, config: &str) -> Daemon {
        let dir = std::env::temp_dir().join(format!("braid-test-{}", ns.name));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let control = dir.join("pm.sock");
        let signal = dir.join("signal.sock");
        let cfg = dir.join("pm.toml");
        std::fs::write(&cfg, config).unwrap();
        let log = dir.join("pm.log");
        let child = Command::new("ip")
            .args(["netns", "exec", &ns.name, env!("CARGO_BIN_EXE_braid"), "pm"])
            .arg("--config")
            .arg(&cfg)
            .arg("--control")
            .arg(&control)
            .arg("--signal-socket")
            .arg(&signal)
            .env("RUST_LOG", "info,braid=debug")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start braid pm");
        let mut d = Daemon {
            child,
            control,
            signal,
            log,
            dir,
        };
        let t0 = Instant::now();
        while d.try_status().is_none() {
            if let Ok(Some(st)) = d.child.try_wait() {
                panic!("braid pm exited ({st}): {}", d.log_text());
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "braid pm did not start: {}",
                d.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        d
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn try_status(&self) -> Option<serde_json::Value> {
        let out = Command::new(env!("CARGO_BIN_EXE_braid"))
            .args(["pm", "status", "--json", "--control"])
            .arg(&self.control)
            .output()
            .ok()?;
        if !out.status.success() {
            return None;
        }
        serde_json::from_slice(&out.stdout).ok()
    }

    pub fn status(&self) -> serde_json::Value {
        self.try_status()
            .unwrap_or_else(|| panic!("braid pm status failed: {}", self.log_text()))
    }

    /// Sends one signal line.
    pub fn rssi(&self, iface: &str, dbm: f64) {
        self.raw_signal(&format!("{{\"iface\":\"{iface}\",\"rssi_dbm\":{dbm}}}"));
    }

    pub fn raw_signal(&self, line: &str) {
        let s = UnixDatagram::unbound().unwrap();
        s.send_to(line.as_bytes(), &self.signal)
            .expect("signal socket");
    }

    /// Waits until `pred` holds on the status (at most `within`).
    pub fn wait(
        &self,
        what: &str,
        within: Duration,
        pred: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let t0 = Instant::now();
        loop {
            let s = self.status();
            if pred(&s) {
                return s;
            }
            assert!(
                t0.elapsed() < within,
                "timed out waiting for {what}; status: {s:#}\nlog:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Stops a daemon: SIGTERM first (it removes its socket), up to 2 s, then SIGKILL.
pub fn stop_child(child: &mut Child) {
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(2) {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

impl Drop for Daemon {
    fn drop(&mut self) {
        stop_child(&mut self.child);
        if std::env::var_os("BRAID_TEST_TRACE").is_some() {
            eprintln!("braid pm log:\n{}", self.log_text());
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Subflows of the first connection in a status: (iface, backup).
pub fn subflows(st: &serde_json::Value) -> Vec<(String, bool)> {
    st["connections"][0]["subflows"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            (
                f["iface"].as_str().unwrap_or("?").to_string(),
                f["backup"].as_bool().unwrap_or(false),
            )
        })
        .collect()
}

/// A kernel SNMP/MIB counter of the namespace (nstat, absolute values).
pub fn nstat(ns: &NetNs, counter: &str) -> u64 {
    let out = ns.exec(&["nstat", "-az", "--json", counter]).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v["kernel"][counter].as_u64().unwrap_or(0)
}

/// Bytes sent on a client link since creation.
pub fn tx_bytes(ns: &NetNs, dev: &str) -> u64 {
    link_bytes(ns, dev, "tx_bytes")
}

/// Bytes received on a client link since creation.
pub fn rx_bytes(ns: &NetNs, dev: &str) -> u64 {
    link_bytes(ns, dev, "rx_bytes")
}

fn link_bytes(ns: &NetNs, dev: &str, counter: &str) -> u64 {
    let out = ns
        .exec(&["cat", &format!("/sys/class/net/{dev}/statistics/{counter}")])
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}

pub fn wait_path(p: &Path, within: Duration) {
    let t0 = Instant::now();
    while !p.exists() {
        assert!(t0.elapsed() < within, "{} did not appear", p.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A `braid tunnel` process in a namespace; stopped on drop, its log printed on failure.
pub struct Tunnel {
    pub child: Child,
    pub control: PathBuf,
    pub log: PathBuf,
}

impl Tunnel {
    pub fn start(ns: &NetNs, role: &str, dir: &Path, config: &str) -> Tunnel {
        let cfg = dir.join(format!("{role}.toml"));
        std::fs::write(&cfg, config).unwrap();
        let log = dir.join(format!("{role}.log"));
        let control = dir.join(format!("{role}.sock"));
        let child = Command::new("ip")
            .args([
                "netns",
                "exec",
                &ns.name,
                env!("CARGO_BIN_EXE_braid"),
                "tunnel",
                role,
            ])
            .arg("--config")
            .arg(&cfg)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start braid tunnel");
        let mut t = Tunnel {
            child,
            control,
            log,
        };
        let t0 = Instant::now();
        while t.try_status().is_none() {
            if let Ok(Some(st)) = t.child.try_wait() {
                panic!("braid tunnel {role} exited ({st}): {}", t.log_text());
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "braid tunnel {role} did not start: {}",
                t.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        t
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn try_status(&self) -> Option<serde_json::Value> {
        let out = Command::new(env!("CARGO_BIN_EXE_braid"))
            .args(["status", "--json", "--control"])
            .arg(&self.control)
            .output()
            .ok()?;
        if !out.status.success() {
            return None;
        }
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        (!v.is_null()).then_some(v)
    }

    pub fn wait(
        &self,
        what: &str,
        within: Duration,
        pred: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let t0 = Instant::now();
        loop {
            if let Some(v) = self.try_status()
                && pred(&v)
            {
                return v;
            }
            assert!(
                t0.elapsed() < within,
                "{what}: not within {within:?}: {:?}\n{}",
                self.try_status(),
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tunnel {
    fn drop(&mut self) {
        stop_child(&mut self.child);
        if std::thread::panicking() || std::env::var_os("BRAID_TEST_TRACE").is_some() {
            eprintln!("braid tunnel log:\n{}", self.log_text());
        }
    }
}

/// A process killed on drop.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Removes the test's directory on drop.
pub struct Dir(pub PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
