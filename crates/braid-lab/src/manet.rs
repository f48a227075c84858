//! An ad-hoc network of namespaces (seed 004's E13 testbed): nodes with up to four
//! interfaces, one shared subnet per interface number, links that carry each interface's
//! rate and whose quality a schedule changes, babeld on every node.
//!
//! Node `n`'s interface `eX` is a bridge with address `10.X.0.n/24` (`noprefixroute`: no node
//! is on-link with another; babeld's host routes and `braid route`'s tables decide). A link
//! between nodes `a` and `b` is, for every interface number `X`, a veth pair whose ends are
//! ports of `a`'s and `b`'s `eX` bridges (`pX-b` in `a`, `pX-a` in `b`). Ports are
//! *isolated*: a bridge delivers what a port receives to its own node and never to another
//! port, so a node hears exactly its neighbours, as a radio in range does, and relaying is the
//! routers' job.
//!
//! - rate: tbf on each port's egress (per direction of each link and interface);
//! - loss: `iptables`/`ip6tables` in the receiving node drop a share of the frames from the
//!   neighbour's bridge (its MAC on that interface), both directions, every interface;
//! - down/up: the veth pairs' carrier (the port goes down on both ends).
//!
//! Everything is owned here: namespaces (removed on drop, with whatever still runs in them),
//! babeld processes (killed by pid), the directory of configurations and logs. A process that
//! is interrupted does not unwind: [`cleanup_on_interrupt`] makes SIGINT, SIGTERM and SIGHUP
//! remove every namespace and kill every process a `Manet` made, then exit.

use std::collections::BTreeMap;
use std::io;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

use braid_mptcp::netns::NetNs;

use crate::lab::{Daemon, TempDir};
use crate::topo::run;

/// What the live `Manet`s made, for the interrupt handler: process ids, namespaces, directories.
#[derive(Default)]
struct Registry {
    pids: Vec<u32>,
    namespaces: Vec<String>,
    dirs: Vec<PathBuf>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    pids: Vec::new(),
    namespaces: Vec::new(),
    dirs: Vec::new(),
});

fn registry(f: impl FnOnce(&mut Registry)) {
    if let Ok(mut r) = REGISTRY.lock() {
        f(&mut r);
    }
}

/// On SIGINT, SIGTERM or SIGHUP: kills every process and removes every namespace and
/// directory a live [`Manet`] made (processes by pid, SIGTERM then SIGKILL), then exits with
/// status 130. Installed once per process; call it before building a `Manet` in a test or a
/// benchmark.
pub fn cleanup_on_interrupt() -> io::Result<()> {
    static ONCE: Once = Once::new();
    let mut result = Ok(());
    ONCE.call_once(|| {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        match signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) {
            Ok(mut signals) => {
                std::thread::spawn(move || {
                    if let Some(sig) = signals.forever().next() {
                        eprintln!("interrupted (signal {sig}): removing the ad-hoc network");
                        let r = REGISTRY.lock().map(|mut r| std::mem::take(&mut *r));
                        if let Ok(r) = r {
                            for pid in &r.pids {
                                let _ = Command::new("kill")
                                    .args(["-TERM", &pid.to_string()])
                                    .status();
                            }
                            std::thread::sleep(Duration::from_millis(300));
                            for pid in &r.pids {
                                let _ = Command::new("kill")
                                    .args(["-KILL", &pid.to_string()])
                                    .status();
                            }
                            for ns in &r.namespaces {
                                drop(NetNs { name: ns.clone() });
                            }
                            for d in &r.dirs {
                                let _ = std::fs::remove_dir_all(d);
                            }
                        }
                        std::process::exit(130);
                    }
                });
            }
            Err(e) => result = Err(e),
        }
    });
    result
}

/// The topology's shape.
#[derive(Debug, Clone)]
pub struct Spec {
    /// Namespace name prefix (short: names get the pid and a counter).
    pub prefix: String,
    /// Number of nodes, numbered 1..=nodes.
    pub nodes: u32,
    /// Rate of each interface number's links, Mbit/s (its length is the number of interfaces).
    pub rates_mbit: Vec<f64>,
    /// Node pairs in range of each other.
    pub links: Vec<(u32, u32)>,
    /// babeld's hello interval.
    pub hello: Duration,
}

impl Spec {
    /// Seed 004's E13 topology: M1 → {M2, M3, M4} → {M5, M6, M7} → M8 (Fig. 4: M2 reaches M5
    /// and M6, M3 all three, M4 M6 and M7), four interfaces at `rates_mbit`.
    pub fn e13(prefix: &str, rates_mbit: [f64; 4]) -> Spec {
        Spec {
            prefix: prefix.into(),
            nodes: 8,
            rates_mbit: rates_mbit.to_vec(),
            links: vec![
                (1, 2),
                (1, 3),
                (1, 4),
                (2, 5),
                (2, 6),
                (3, 5),
                (3, 6),
                (3, 7),
                (4, 6),
                (4, 7),
                (5, 8),
                (6, 8),
                (7, 8),
            ],
            hello: Duration::from_millis(500),
        }
    }

    /// The homogeneous E13 rates (4 × 11 Mbit/s).
    pub const HOMOGENEOUS: [f64; 4] = [11.0, 11.0, 11.0, 11.0];
    /// The heterogeneous E13 rates (seed 004 Table 4).
    pub const HETEROGENEOUS: [f64; 4] = [11.0, 5.5, 2.0, 1.0];
}

/// Node `n`'s address on interface `x`.
pub fn addr(n: u32, x: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, x as u8, 0, n as u8)
}

/// Node `n`'s bridge MAC on interface `x` (locally administered).
pub fn mac(n: u32, x: usize) -> String {
    format!("02:00:00:00:{x:02x}:{n:02x}")
}

/// Node `n`'s IPv6 link-local address on interface `x` (from its MAC, EUI-64): the address
/// babeld knows it by, and the next hop `braid route` installs.
pub fn link_local(n: u32, x: usize) -> String {
    format!("fe80::ff:fe00:{:x}", (x << 8) | n as usize)
}

/// babeld's router id of node `n`.
pub fn router_id(n: u32) -> String {
    format!("02:00:00:00:00:00:00:{n:02x}")
}

/// The port of node `a` towards node `b` on interface `x`.
pub fn port(x: usize, b: u32) -> String {
    format!("p{x}-{b}")
}

/// The ad-hoc network. See the [module documentation](self).
pub struct Manet {
    pub spec: Spec,
    /// Node `n` is `nodes[n - 1]`.
    nodes: Vec<NetNs>,
    babeld: BTreeMap<u32, Daemon>,
    /// The directory of configurations, sockets and logs.
    pub dir: PathBuf,
    _dir: TempDir,
}

impl Manet {
    /// Creates the namespaces, bridges, ports, rates and loss chains (no loss yet).
    pub fn build(spec: Spec) -> io::Result<Manet> {
        let dir = std::env::temp_dir().join(format!(
            "braid-manet-{}-{}",
            spec.prefix,
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let guard = TempDir(dir.clone());
        registry(|r| r.dirs.push(dir.clone()));
        let mut nodes = Vec::new();
        for n in 1..=spec.nodes {
            let ns = NetNs::new(&format!("{}{n}-", spec.prefix))?;
            registry(|r| r.namespaces.push(ns.name.clone()));
            nodes.push(ns);
        }
        let m = Manet {
            spec,
            nodes,
            babeld: BTreeMap::new(),
            dir,
            _dir: guard,
        };
        for n in 1..=m.spec.nodes {
            m.setup_node(n)?;
        }
        for &(a, b) in &m.spec.links.clone() {
            m.setup_link(a, b)?;
        }
        Ok(m)
    }

    fn setup_node(&self, n: u32) -> io::Result<()> {
        let ns = self.ns(n);
        for kv in [
            "net.ipv4.ip_forward=1",
            "net.ipv6.conf.all.forwarding=1",
            "net.ipv6.conf.default.accept_dad=0",
            "net.ipv6.conf.all.accept_dad=0",
            "net.ipv4.conf.all.rp_filter=0",
            "net.ipv4.conf.default.rp_filter=0",
        ] {
            ns.exec(&["sysctl", "-qw", kv])?;
        }
        for x in 0..self.spec.rates_mbit.len() {
            let e = format!("e{x}");
            ns.ip(&["link", "add", &e, "type", "bridge"])?;
            ns.ip(&["link", "set", &e, "address", &mac(n, x)])?;
            let a = format!("{}/24", addr(n, x));
            ns.ip(&["addr", "add", &a, "dev", &e, "noprefixroute"])?;
            ns.ip(&["link", "set", &e, "up"])?;
        }
        Ok(())
    }

    fn setup_link(&self, a: u32, b: u32) -> io::Result<()> {
        for (x, &rate) in self.spec.rates_mbit.iter().enumerate() {
            let (pa, pb) = (port(x, b), port(x, a));
            run(
                "ip",
                &[
                    "link",
                    "add",
                    &pa,
                    "netns",
                    &self.ns(a).name,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    &pb,
                    "netns",
                    &self.ns(b).name,
                ],
            )?;
            for (n, p) in [(a, &pa), (b, &pb)] {
                let ns = self.ns(n);
                ns.exec(&[
                    "sysctl",
                    "-qw",
                    &format!("net.ipv6.conf.{p}.disable_ipv6=1"),
                ])?;
                ns.ip(&["link", "set", p, "master", &format!("e{x}")])?;
                ns.ip(&["link", "set", p, "type", "bridge_slave", "isolated", "on"])?;
                ns.ip(&["link", "set", p, "up"])?;
                // Burst: 5 ms at the rate, at least four full frames.
                let burst = ((rate * 1e6 / 8.0 * 0.005) as u64).max(4 * 1514);
                ns.exec(&[
                    "tc",
                    "qdisc",
                    "add",
                    "dev",
                    p,
                    "root",
                    "tbf",
                    "rate",
                    &format!("{}kbit", (rate * 1000.0) as u64),
                    "burst",
                    &burst.to_string(),
                    "latency",
                    "100ms",
                ])?;
            }
        }
        // Loss chains: node a drops a share of what b sends it, and the reverse.
        for (me, peer) in [(a, b), (b, a)] {
            let ns = self.ns(me);
            let chain = loss_chain(peer);
            for tool in ["iptables", "ip6tables"] {
                ns.exec(&[tool, "-t", "raw", "-N", &chain])?;
                for x in 0..self.spec.rates_mbit.len() {
                    ns.exec(&[
                        tool,
                        "-t",
                        "raw",
                        "-A",
                        "PREROUTING",
                        "-i",
                        &format!("e{x}"),
                        "-m",
                        "mac",
                        "--mac-source",
                        &mac(peer, x),
                        "-j",
                        &chain,
                    ])?;
                }
            }
        }
        Ok(())
    }

    /// Node `n`'s namespace.
    pub fn ns(&self, n: u32) -> &NetNs {
        &self.nodes[n as usize - 1]
    }

    /// Number of interfaces per node.
    pub fn ifaces(&self) -> usize {
        self.spec.rates_mbit.len()
    }

    /// Whether `a` and `b` are in range.
    pub fn linked(&self, a: u32, b: u32) -> bool {
        self.spec.links.iter().any(|&l| l == (a, b) || l == (b, a))
    }

    /// The share of frames lost between `a` and `b`, both ways, every interface (0: none).
    pub fn set_loss(&self, a: u32, b: u32, loss: f64) -> io::Result<()> {
        if !(0.0..=1.0).contains(&loss) {
            return Err(io::Error::other(format!("loss {loss} outside 0..=1")));
        }
        for (me, peer) in [(a, b), (b, a)] {
            let ns = self.ns(me);
            let chain = loss_chain(peer);
            for tool in ["iptables", "ip6tables"] {
                ns.exec(&[tool, "-t", "raw", "-F", &chain])?;
                if loss > 0.0 {
                    ns.exec(&[
                        tool,
                        "-t",
                        "raw",
                        "-A",
                        &chain,
                        "-m",
                        "statistic",
                        "--mode",
                        "random",
                        "--probability",
                        &format!("{loss:.4}"),
                        "-j",
                        "DROP",
                    ])?;
                }
            }
        }
        Ok(())
    }

    /// Takes the link between `a` and `b` down (every interface) or brings it back.
    pub fn set_up(&self, a: u32, b: u32, up: bool) -> io::Result<()> {
        for x in 0..self.ifaces() {
            self.ns(a)
                .ip(&["link", "set", &port(x, b), if up { "up" } else { "down" }])?;
            if up {
                // The peer end was set down by nobody, but make sure it is up.
                self.ns(b).ip(&["link", "set", &port(x, a), "up"])?;
            }
        }
        Ok(())
    }

    /// Bytes node `a` sent to `b` on interface `x` (its port's counter).
    pub fn tx_bytes(&self, a: u32, x: usize, b: u32) -> u64 {
        self.port_bytes(a, x, b, "tx_bytes")
    }

    /// Bytes node `a` received from `b` on interface `x` (its port's counter).
    pub fn rx_bytes(&self, a: u32, x: usize, b: u32) -> u64 {
        self.port_bytes(a, x, b, "rx_bytes")
    }

    fn port_bytes(&self, a: u32, x: usize, b: u32, counter: &str) -> u64 {
        self.ns(a)
            .exec(&[
                "cat",
                &format!("/sys/class/net/{}/statistics/{counter}", port(x, b)),
            ])
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .unwrap_or(0)
    }

    /// babeld's local-interface socket on node `n`.
    pub fn babeld_socket(&self, n: u32) -> PathBuf {
        self.dir.join(format!("babeld-{n}.sock"))
    }

    /// Starts babeld on node `n` (every interface, wireless type: link-quality estimation,
    /// no split horizon), its local interface on [`Manet::babeld_socket`].
    pub fn start_babeld(&mut self, n: u32) -> io::Result<()> {
        let conf = self.dir.join(format!("babeld-{n}.conf"));
        let mut text = format!(
            "local-path {}\nrouter-id {}\ndefault type wireless hello-interval {}\n",
            self.babeld_socket(n).display(),
            router_id(n),
            self.spec.hello.as_secs_f64()
        );
        for x in 0..self.ifaces() {
            text.push_str(&format!("interface e{x}\n"));
        }
        std::fs::write(&conf, text)?;
        let _ = std::fs::remove_file(self.babeld_socket(n));
        let log = self.dir.join(format!("babeld-{n}.log"));
        let ns = self.ns(n);
        let child = Command::new("ip")
            .args(["netns", "exec", &ns.name, "babeld", "-c"])
            .arg(&conf)
            .arg("-I")
            .arg(self.dir.join(format!("babeld-{n}.pid")))
            .arg("-S")
            .arg(self.dir.join(format!("babeld-{n}.state")))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("babeld (Debian `babeld`, scripts/deps): {e}"),
                )
            })?;
        registry(|r| r.pids.push(child.id()));
        let d = Daemon { child, log };
        wait_for(&self.babeld_socket(n), Duration::from_secs(5))
            .map_err(|e| io::Error::other(format!("babeld on node {n}: {e}: {}", d.log_tail())))?;
        self.babeld.insert(n, d);
        Ok(())
    }

    /// Starts babeld on every node.
    pub fn start_all_babeld(&mut self) -> io::Result<()> {
        for n in 1..=self.spec.nodes {
            self.start_babeld(n)?;
        }
        Ok(())
    }

    /// Stops babeld on node `n` (SIGTERM, as an operator restarting it; SIGKILL after 2 s).
    pub fn stop_babeld(&mut self, n: u32) {
        if let Some(mut d) = self.babeld.remove(&n) {
            stop(&mut d.child);
        }
    }

    /// The process ids of the babeld instances running.
    pub fn babeld_pids(&self) -> Vec<u32> {
        self.babeld.values().map(|d| d.child.id()).collect()
    }

    /// Whether babeld still runs on node `n`.
    pub fn babeld_running(&mut self, n: u32) -> bool {
        self.babeld
            .get_mut(&n)
            .is_some_and(|d| matches!(d.child.try_wait(), Ok(None)))
    }

    /// Starts a process in node `n`'s namespace, its output in `DIR/name.log`; killed (by pid)
    /// when the returned guard drops.
    pub fn spawn(&self, n: u32, name: &str, args: &[&str]) -> io::Result<Process> {
        let log = self.dir.join(format!("{name}.log"));
        let child = Command::new("ip")
            .args(["netns", "exec", &self.ns(n).name])
            .args(args)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", args.join(" "))))?;
        registry(|r| r.pids.push(child.id()));
        Ok(Process {
            daemon: Daemon { child, log },
        })
    }
}

/// A process started by [`Manet::spawn`]: SIGTERM then SIGKILL on drop.
pub struct Process {
    daemon: Daemon,
}

impl Process {
    pub fn pid(&self) -> u32 {
        self.daemon.child.id()
    }

    /// Its exit status if it has ended.
    pub fn try_wait(&mut self) -> Option<std::process::ExitStatus> {
        self.daemon.child.try_wait().ok().flatten()
    }

    /// The last lines of its log.
    pub fn log_tail(&self) -> String {
        self.daemon.log_tail()
    }

    /// Its whole log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.daemon.log).unwrap_or_default()
    }

    /// Stops it now (SIGTERM, then SIGKILL after 2 s).
    pub fn stop(mut self) {
        stop(&mut self.daemon.child);
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        stop(&mut self.daemon.child);
    }
}

/// SIGTERM, up to 2 s for the process to end, then SIGKILL; reaped either way.
fn stop(child: &mut Child) {
    let pid = child.id();
    registry(|r| r.pids.retain(|&p| p != pid));
    if let Ok(None) = child.try_wait() {
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(2) {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}

impl Drop for Manet {
    fn drop(&mut self) {
        // babeld first (by pid), then the namespaces (NetNs kills what is left in them).
        let nodes: Vec<u32> = self.babeld.keys().copied().collect();
        for n in nodes {
            self.stop_babeld(n);
        }
        let names: Vec<String> = self.nodes.iter().map(|n| n.name.clone()).collect();
        let dir = self.dir.clone();
        registry(|r| {
            r.namespaces.retain(|n| !names.contains(n));
            r.dirs.retain(|d| *d != dir);
        });
    }
}

fn loss_chain(peer: u32) -> String {
    format!("loss-{peer}")
}

fn wait_for(p: &Path, within: Duration) -> io::Result<()> {
    let t0 = Instant::now();
    while !p.exists() {
        if t0.elapsed() > within {
            return Err(io::Error::other(format!(
                "{} did not appear within {within:?}",
                p.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}
