//! The chaos soak: transfers in both directions and a UDP probe through the tunnel while a
//! seeded schedule (`braid_sim::chaos`) injects the faults a vehicle meets. Shared by the short
//! test (`tests/tunnel_chaos.rs`, in CI) and the long run (`benches/chaos.rs`).
//!
//! ```text
//! client (c0, c1; 20 and 10 Mbit/s) ═ router (r0, r1 | r8: source NAT per link) ═ gateway ═ server
//! ```
//!
//! Faults: carrier loss on the router's side of a client link (the client sees its link go
//! away, as with a radio) or of the gateway's link, 30 % loss (iptables statistic), the client
//! link re-addressed, the router's NAT moved to another address and port range with its
//! mappings flushed, the gateway or the client daemon ended without a word and started again,
//! random datagrams at the gateway's port. Every transfer is sha256-checked; each fault's
//! outage is read from the probe's arrivals.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use braid_mptcp::netns::NetNs;
use braid_sim::chaos::{self, Fault, FaultKind};
use braid_tunnel::daemon::{ClientConfig, GatewayConfig};
use rand::{RngExt, SeedableRng};
use sha2::{Digest, Sha256};

use crate::support::*;

/// Bytes of each transfer, each direction.
const LEN: usize = 4 << 20;
const UP_PORT: u16 = 5010;
const DOWN_PORT: u16 = 5011;
/// The client's inner address (the server connects to it for downloads).
const CLIENT_INNER: &str = "10.200.0.2";

/// How a run went.
pub struct Report {
    pub faults: Vec<(Fault, Duration, Option<Duration>, bool)>,
    pub uploads: Outcome,
    pub downloads: Outcome,
    pub rss_start_kb: u64,
    pub rss_end_kb: u64,
    pub text: String,
}

impl Report {
    /// Every transfer intact and complete, every outage within its bound.
    pub fn ok(&self) -> bool {
        self.uploads.failed == 0
            && self.downloads.failed == 0
            && self.uploads.ok > 0
            && self.downloads.ok > 0
            && self.faults.iter().all(|f| f.3)
    }
}

/// Transfers of one direction.
#[derive(Debug, Default, Clone)]
pub struct Outcome {
    /// Complete and intact.
    pub ok: u64,
    /// Short, corrupted, or ended by an error.
    pub failed: u64,
    pub details: Vec<String>,
}

/// The bound on a fault's outage, as the README states it: `gap` is the longest time without
/// a probe arriving from the fault's start until the next fault, `after` the time from the
/// fault's end to the first probe sent after it that arrived.
pub fn bound(kind: FaultKind) -> (&'static str, Duration) {
    let ms = Duration::from_millis;
    match kind {
        FaultKind::AllLinksDown => ("after", ms(1000)),
        FaultKind::GatewaySideDown => ("after", ms(2000)),
        FaultKind::GatewayRestart => ("after", ms(1500)),
        FaultKind::ClientRestart => ("after", ms(1500)),
        FaultKind::LinkDown(_) | FaultKind::LossBurst(_) => ("gap", ms(1000)),
        FaultKind::Readdress(_) | FaultKind::NatRebind(_) => ("gap", ms(1000)),
        FaultKind::JunkFlood => ("gap", ms(500)),
    }
}

struct Net {
    topo: Topo,
    keys: Keys,
    gcfg: GatewayConfig,
    ccfg: ClientConfig,
    gw: Option<Daemon>,
    cl: Option<Daemon>,
    /// Per link: whether its client address ends in .3 (else .2).
    readdressed: [bool; 2],
    /// Per link: whether its NAT uses the second address (10.0.8.3).
    rebound: [bool; 2],
}

fn router(topo: &Topo) -> &NetNs {
    topo.router.as_ref().expect("routed topology")
}

/// Runs a shell script in `ns`; panics with its output on failure.
fn script(ns: &NetNs, s: &str) {
    let out = ns
        .output(&["sh", "-c", s])
        .unwrap_or_else(|e| panic!("{s} in {}: {e}", ns.name));
    assert!(
        out.status.success(),
        "{s} in {}: {}{}",
        ns.name,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn snat(i: usize, second: bool) -> String {
    let (addr, base) = if second {
        ("10.0.8.3", 30000 + i * 1000)
    } else {
        ("10.0.8.1", 20000 + i * 1000)
    };
    format!(
        "-s 10.0.{}.0/24 -o r8 -p udp -j SNAT --to-source {addr}:{base}-{}",
        i + 1,
        base + 999
    )
}

impl Net {
    fn new(prefix: &str) -> Net {
        let topo = Topo::routed(prefix, Some([20, 10]));
        let r = router(&topo);
        script(r, "ip addr add 10.0.8.3/24 dev r8");
        for i in 0..2 {
            script(
                r,
                &format!("iptables -t nat -A POSTROUTING {}", snat(i, false)),
            );
        }
        let keys = Keys::new();
        let gcfg = gateway_config_with(&topo, &keys, &["0.0.0.0:7000"], &[], &[], "");
        let gw = format!("{ROUTED_GW}:{GW_PORT}");
        let ccfg = client_config_with(&topo, &keys, [&gw, &gw], &[], &["10.0.9.0/24"], "", "");
        let g = Daemon::gateway(&topo.gw, gcfg.clone());
        let c = Daemon::client(&topo.client, ccfg.clone());
        wait_paths(&c, 2, Duration::from_secs(10));
        Net {
            topo,
            keys,
            gcfg,
            ccfg,
            gw: Some(g),
            cl: Some(c),
            readdressed: [false; 2],
            rebound: [false; 2],
        }
    }

    /// Applies the start of a fault; returns what undoes it at its end.
    fn inject(&mut self, f: &Fault, junk_stop: &Arc<AtomicBool>) -> Option<Undo> {
        let r = router(&self.topo);
        match f.kind {
            FaultKind::AllLinksDown => {
                script(r, "ip link set r0 down && ip link set r1 down");
                Some(Undo::Script(
                    "ip link set r0 up && ip link set r1 up".into(),
                ))
            }
            FaultKind::LinkDown(i) => {
                script(r, &format!("ip link set r{i} down"));
                Some(Undo::Script(format!("ip link set r{i} up")))
            }
            FaultKind::GatewaySideDown => {
                script(r, "ip link set r8 down");
                Some(Undo::Script(
                    "ip link set r8 up && ip addr replace 10.0.8.3/24 dev r8".into(),
                ))
            }
            FaultKind::LossBurst(i) => {
                let rule =
                    format!("FORWARD -i r{i} -m statistic --mode random --probability 0.3 -j DROP");
                let back =
                    format!("FORWARD -o r{i} -m statistic --mode random --probability 0.3 -j DROP");
                script(r, &format!("iptables -I {rule} && iptables -I {back}"));
                Some(Undo::Script(format!(
                    "iptables -D {rule} && iptables -D {back}"
                )))
            }
            FaultKind::Readdress(i) => {
                let (old, new) = if self.readdressed[i] { (3, 2) } else { (2, 3) };
                self.readdressed[i] = !self.readdressed[i];
                let n = i + 1;
                let metric = if i == 0 { "" } else { " metric 10" };
                script(
                    &self.topo.client,
                    &format!(
                        "ip addr del 10.0.{n}.{old}/24 dev c{i} && ip addr add 10.0.{n}.{new}/24 dev c{i} && \
                         ip route replace 10.0.8.0/24 via 10.0.{n}.1 dev c{i}{metric}"
                    ),
                );
                None
            }
            FaultKind::NatRebind(i) => {
                let to = !self.rebound[i];
                self.rebound[i] = to;
                let n = i + 1;
                script(
                    r,
                    &format!(
                        "iptables -t nat -D POSTROUTING {} && iptables -t nat -A POSTROUTING {} && \
                         (conntrack -D -p udp -s 10.0.{n}.2 >/dev/null 2>&1; \
                          conntrack -D -p udp -s 10.0.{n}.3 >/dev/null 2>&1; true)",
                        snat(i, !to),
                        snat(i, to)
                    ),
                );
                None
            }
            FaultKind::GatewayRestart => {
                drop(self.gw.take());
                Some(Undo::Gateway)
            }
            FaultKind::ClientRestart => {
                drop(self.cl.take());
                Some(Undo::Client)
            }
            FaultKind::JunkFlood => {
                junk_stop.store(false, Ordering::Relaxed);
                let stop = junk_stop.clone();
                let sock = r.run(|| UdpSocket::bind("10.0.8.1:0").unwrap());
                let seed = f.at.as_millis() as u64;
                let t = std::thread::spawn(move || {
                    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
                    let to: SocketAddr = format!("{ROUTED_GW}:{GW_PORT}").parse().unwrap();
                    let mut buf = [0u8; 1500];
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let len = rng.random_range(1..buf.len());
                        rng.fill(&mut buf[..len]);
                        // Now and then a datagram that looks like a data datagram.
                        if rng.random_bool(0.5) {
                            buf[0] = 4;
                        }
                        let _ = sock.send_to(&buf[..len], to);
                        n += 1;
                        if n % 64 == 0 {
                            // ~20 000 datagrams a second.
                            std::thread::sleep(Duration::from_millis(3));
                        }
                    }
                    n
                });
                Some(Undo::Junk(t))
            }
        }
    }

    fn undo(&mut self, u: Undo, junk_stop: &Arc<AtomicBool>) -> String {
        match u {
            Undo::Script(s) => {
                script(router(&self.topo), &s);
                String::new()
            }
            Undo::Gateway => {
                self.gw = Some(Daemon::gateway(&self.topo.gw, self.gcfg.clone()));
                String::new()
            }
            Undo::Client => {
                self.cl = Some(Daemon::client(&self.topo.client, self.ccfg.clone()));
                String::new()
            }
            Undo::Junk(t) => {
                junk_stop.store(true, Ordering::Relaxed);
                format!("{} junk datagrams", t.join().unwrap_or(0))
            }
        }
    }
}

enum Undo {
    Script(String),
    Gateway,
    Client,
    Junk(JoinHandle<u64>),
}

/// A receiver on `bind` in `ns` that checks every connection's bytes against `want`.
fn checking_receiver(
    ns: &NetNs,
    bind: &str,
    want: [u8; 32],
    stop: Arc<AtomicBool>,
    out: Arc<Mutex<Outcome>>,
) -> JoinHandle<()> {
    let bind: SocketAddr = bind.parse().unwrap();
    let l = ns.run(move || TcpListener::bind(bind).unwrap());
    l.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let mut workers = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            // Join the workers that are done (a finished thread keeps its stack until joined).
            let (done, running): (Vec<_>, Vec<_>) = workers
                .into_iter()
                .partition(|w: &JoinHandle<()>| w.is_finished());
            workers = running;
            for w in done {
                let _ = w.join();
            }
            match l.accept() {
                Ok((mut s, from)) => {
                    s.set_nonblocking(false).unwrap();
                    let out = out.clone();
                    workers.push(std::thread::spawn(move || {
                        let mut h = Sha256::new();
                        let mut buf = vec![0u8; 64 * 1024];
                        let mut total = 0usize;
                        let err = loop {
                            match s.read(&mut buf) {
                                Ok(0) => break None,
                                Ok(n) => {
                                    h.update(&buf[..n]);
                                    total += n;
                                }
                                Err(e) => break Some(e),
                            }
                        };
                        let sum: [u8; 32] = h.finalize().into();
                        let mut o = out.lock().unwrap();
                        if err.is_none() && total == LEN && sum == want {
                            o.ok += 1;
                            // Tell the sender it arrived.
                            let _ = s.write_all(b"ok");
                        } else {
                            o.failed += 1;
                            o.details.push(format!(
                                "from {from}: {total} of {LEN} bytes, sha256 {}, {err:?}",
                                if sum == want { "ok" } else { "wrong" }
                            ));
                        }
                    }));
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => panic!("accept: {e}"),
            }
        }
        for w in workers {
            let _ = w.join();
        }
    })
}

/// Sends transfers from `ns` to `to` one after another until `stop`; a transfer that fails to
/// connect is retried (the tunnel may be down), one that fails after connecting is counted by
/// the receiver.
fn sender_loop(
    ns: &NetNs,
    to: &str,
    data: Arc<Vec<u8>>,
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
) -> JoinHandle<()> {
    let to: SocketAddr = to.parse().unwrap();
    // A thread started from inside the namespace stays in it.
    ns.run(move || {
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let Ok(mut s) = TcpStream::connect_timeout(&to, Duration::from_secs(5)) else {
                    std::thread::sleep(Duration::from_millis(200));
                    continue;
                };
                let _ = socket2::SockRef::from(&s).set_tcp_congestion(b"cubic");
                sent.fetch_add(1, Ordering::Relaxed);
                if s.write_all(&data).is_ok() {
                    let _ = s.shutdown(std::net::Shutdown::Write);
                    let mut ack = Vec::new();
                    let _ = s.read_to_end(&mut ack);
                }
            }
        })
    })
}

/// Runs the soak for `total` with the schedule of `seed`; prints progress as it goes.
pub fn run(prefix: &str, seed: u64, total: Duration) -> Report {
    let warmup = Duration::from_secs(3);
    let faults = chaos::schedule(seed, total, warmup, 2, false);
    let mut net = Net::new(prefix);
    let data = Arc::new(file_bytes(LEN));
    let want = sha256(&data);
    let stop = Arc::new(AtomicBool::new(false));
    let (ups, downs) = (
        Arc::new(Mutex::new(Outcome::default())),
        Arc::new(Mutex::new(Outcome::default())),
    );
    let up_rx = checking_receiver(
        &net.topo.server,
        &format!("0.0.0.0:{UP_PORT}"),
        want,
        stop.clone(),
        ups.clone(),
    );
    let down_rx = checking_receiver(
        &net.topo.client,
        &format!("0.0.0.0:{DOWN_PORT}"),
        want,
        stop.clone(),
        downs.clone(),
    );
    let (up_sent, down_sent) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let up_tx = sender_loop(
        &net.topo.client,
        &format!("{SERVER}:{UP_PORT}"),
        data.clone(),
        stop.clone(),
        up_sent.clone(),
    );
    let down_tx = sender_loop(
        &net.topo.server,
        &format!("{CLIENT_INNER}:{DOWN_PORT}"),
        data.clone(),
        stop.clone(),
        down_sent.clone(),
    );
    let (probe_stop, probe_tx, probe_rx) = udp_probe(&net.topo.client, &net.topo.server);
    let rss_start = rss_kb();
    let t0 = Instant::now();
    // Memory over the run: ten samples (the daemons run in this process).
    let rss_series = Arc::new(Mutex::new(Vec::new()));
    let sampler = {
        let (series, stop) = (rss_series.clone(), stop.clone());
        std::thread::spawn(move || {
            let every = total / 10;
            let mut next = t0 + every;
            while !stop.load(Ordering::Relaxed) {
                if Instant::now() >= next {
                    series
                        .lock()
                        .unwrap()
                        .push((t0.elapsed().as_secs(), rss_kb()));
                    next += every;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        })
    };
    let junk_stop = Arc::new(AtomicBool::new(true));
    let mut marks = Vec::new();
    let mut notes = Vec::new();
    for (k, f) in faults.iter().enumerate() {
        if let Some(d) = (t0 + f.at).checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
        eprintln!(
            "[{:>6.1} s] fault {}/{}: {f}",
            t0.elapsed().as_secs_f64(),
            k + 1,
            faults.len()
        );
        let start = Instant::now();
        let undo = net.inject(f, &junk_stop);
        if let Some(d) = (start + f.duration).checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
        let end = Instant::now();
        let note = undo.map(|u| net.undo(u, &junk_stop)).unwrap_or_default();
        marks.push((start, end));
        notes.push(note);
    }
    if let Some(d) = (t0 + total).checked_duration_since(Instant::now()) {
        std::thread::sleep(d);
    }
    // Stop starting transfers; let the running ones finish.
    stop.store(true, Ordering::Relaxed);
    let _ = sampler.join();
    let _ = up_tx.join();
    let _ = down_tx.join();
    let _ = up_rx.join();
    let _ = down_rx.join();
    probe_stop.store(true, Ordering::Relaxed);
    let _ = probe_tx.join();
    let arrivals = probe_rx.join().unwrap_or_default();
    let rss_end = rss_kb();
    let status = net.cl.as_ref().map(|c| c.status());
    let mut results = Vec::new();
    let mut text = String::new();
    let _ = writeln!(
        text,
        "chaos soak: seed {seed}, {:.0} s, {} faults",
        total.as_secs_f64(),
        faults.len()
    );
    let _ = writeln!(
        text,
        "{:>7}  {:<26} {:>7}  {:>9} {:>9}  {:>7}  note",
        "at s", "fault", "dur s", "gap ms", "after ms", "bound"
    );
    for (k, f) in faults.iter().enumerate() {
        let (start, end) = marks[k];
        let until = marks.get(k + 1).map_or(t0 + total, |m| m.0);
        let mut last = arrivals
            .iter()
            .map(|(_, got)| *got)
            .filter(|g| *g < start)
            .max()
            .unwrap_or(start)
            .max(start);
        let mut gap = Duration::ZERO;
        let mut got: Vec<Instant> = arrivals
            .iter()
            .map(|(_, g)| *g)
            .filter(|g| *g >= start && *g < until)
            .collect();
        got.sort();
        for g in &got {
            gap = gap.max(*g - last);
            last = *g;
        }
        gap = gap.max(until.saturating_duration_since(last).min(
            // A probe missing at the window's end counts only up to the next fault.
            until - start,
        ));
        let after = arrivals
            .iter()
            .filter(|(sent, _)| *sent >= end)
            .map(|(_, g)| *g)
            .min()
            .map(|g| g - end);
        let (what, b) = bound(f.kind);
        let value = if what == "gap" { Some(gap) } else { after };
        let good = value.is_some_and(|v| v <= b);
        let _ = writeln!(
            text,
            "{:>7.1}  {:<26} {:>7.1}  {:>9.0} {:>9}  {:>4} {:<5} {}{}",
            f.at.as_secs_f64(),
            f.kind.name(),
            f.duration.as_secs_f64(),
            gap.as_secs_f64() * 1e3,
            after.map_or("-".into(), |a| format!("{:.0}", a.as_secs_f64() * 1e3)),
            what,
            format!("≤{}", b.as_millis()),
            notes[k],
            if good { "" } else { "  OUT OF BOUND" }
        );
        results.push((*f, gap, after, good));
    }
    // Per kind: count and worst.
    let _ = writeln!(text, "\nper kind: count, worst (bound)");
    let mut families: Vec<&str> = results.iter().map(|r| r.0.kind.family()).collect();
    families.sort();
    families.dedup();
    for fam in families {
        let rs: Vec<_> = results
            .iter()
            .filter(|r| r.0.kind.family() == fam)
            .collect();
        let (what, b) = bound(rs[0].0.kind);
        let worst = rs
            .iter()
            .map(|r| if what == "gap" { Some(r.1) } else { r.2 })
            .max()
            .flatten();
        let _ = writeln!(
            text,
            "  {fam:<18} {:>3}  worst {what} {:>6} ms (≤ {} ms){}",
            rs.len(),
            worst.map_or("-".into(), |w| format!("{:.0}", w.as_secs_f64() * 1e3)),
            b.as_millis(),
            if rs.iter().all(|r| r.3) {
                ""
            } else {
                "  OUT OF BOUND"
            }
        );
    }
    let uploads = ups.lock().unwrap().clone();
    let downloads = downs.lock().unwrap().clone();
    let _ = writeln!(
        text,
        "\ntransfers of {} MiB: uploads {} intact, {} failed (started {}); downloads {} intact, {} failed (started {})",
        LEN >> 20,
        uploads.ok,
        uploads.failed,
        up_sent.load(Ordering::Relaxed),
        downloads.ok,
        downloads.failed,
        down_sent.load(Ordering::Relaxed),
    );
    for d in uploads.details.iter().chain(&downloads.details) {
        let _ = writeln!(text, "  failed: {d}");
    }
    let _ = writeln!(
        text,
        "probe datagrams received: {}; RSS of the test process (both daemons inside): {rss_start} kB at the start, {rss_end} kB at the end",
        arrivals.len()
    );
    let series: Vec<String> = rss_series
        .lock()
        .unwrap()
        .iter()
        .map(|(t, kb)| format!("{t} s: {kb}"))
        .collect();
    let _ = writeln!(text, "RSS during the run (kB): {}", series.join(", "));
    if let Some(v) = status {
        let _ = writeln!(
            text,
            "client: connections started {}, replaced {}",
            v["connections_started"], v["connections_replaced"]
        );
    }
    drop(net.cl.take());
    drop(net.gw.take());
    let _ = &net.keys;
    Report {
        faults: results,
        uploads,
        downloads,
        rss_start_kb: rss_start,
        rss_end_kb: rss_end,
        text,
    }
}
