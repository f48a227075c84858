//! `braid tunnel` path migration and IPv6 in network namespaces (root): a client whose NAT
//! rebinds, or whose link is re-addressed, keeps its connection (the gateway follows the
//! path's new source address), under an upload and a download, under a download alone, or
//! while idle; an IPv6 outer network carries IPv4 and IPv6 inner traffic over both links.
//! Every transfer is checked by SHA-256 and its longest stall is reported. The tests share
//! the machine's two cores, so they run one at a time. `BRAID_SKIP_NETNS=1` skips them; the
//! NAT tests need iptables and conntrack (`scripts/deps` installs them).

mod support;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use braid_tunnel::daemon::status_table;
use serde_json::Value;
use support::*;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The longest pause of the application byte stream allowed around a migration.
///
/// A rebinding or a re-addressing loses what was in flight to or from the old address: the
/// gateway re-targets a path with the first datagram that authenticates from the new source
/// (under an upload the client sends on the path every few hundred microseconds; otherwise
/// its per-link liveness probe, every `keepalive_ms`, comes within a second). What was lost
/// is recovered by loss detection within about one round trip (≤ 60 ms here: 20 ms tbf
/// queues each way), or at worst by one retransmission timeout of the path (`rto_min` 200 ms
/// plus the smoothed RTT and variance), which also moves its data to the other path (stock
/// reinjection). A connection that lost the path's data until it reopened or a new
/// connection would stall for seconds. Hence: one RTO plus margin, well under a second.
const STALL_BOUND: Duration = Duration::from_millis(400);

/// Where a migration's stall is looked for: from this long before the change (a gap that
/// spans it) to this long after it (the recovery of what was lost, including one RTO with
/// one backoff: 200 + 400 ms).
const STALL_WINDOW: (Duration, Duration) =
    (Duration::from_millis(200), Duration::from_millis(1500));

/// Data bytes that must pass through the path's new address (≈ 360 datagrams) for the path
/// to count as carrying data again: downloaded data, or under an upload and a download, data
/// of either (the schedulers put on c1 whatever c0's window does not take, which may be
/// mostly one direction).
const CARRIED: u64 = 512 << 10;
/// Bytes each side must also receive on the path through the new address under an upload
/// and a download: datagrams get through both ways (acknowledgements at least, which come
/// every few packets or `max_ack_delay`, so this is a few dozen datagrams).
const REACHED: u64 = 8 << 10;

/// How long the gateway may take to show a path at its new address: the client's liveness
/// probe on each link (every `keepalive_ms`, 1 s by default) names the link's path, so one
/// interval, plus the status refresh (250 ms) and a margin. Without the per-link probes a
/// client that has nothing to send on the path (a download whose datagrams to the old address
/// are lost) leaves the gateway at the old address for seconds, or until the client's
/// scheduler happens to put some of its upstream on that link.
const MOVE_WITHIN: Duration = Duration::from_millis(1500);

/// The same for a re-addressed interface: the client sees the new address at its next link
/// check (`pm.watch_interval_ms`, 50 ms) and probes at once, so the status refresh (250 ms)
/// and a margin.
const READDRESS_MOVE_WITHIN: Duration = Duration::from_millis(500);

/// How long the path has to migrate and carry data again: two liveness-probe intervals
/// (1 s) and the RTO backoff of the gateway's side of the path (its retransmissions to the
/// old address time out 200, 400, 800 ms apart) plus the ramp-up.
const MIGRATE_WITHIN: Duration = Duration::from_secs(5);

/// Client a's connection in the gateway's status.
fn gw_conn(v: &Value) -> &Value {
    v["connections"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["peer"] == "a"))
        .unwrap_or(&Value::Null)
}

/// The IP address of a status `peer_addr`.
fn peer_ip(p: &Value) -> Option<std::net::IpAddr> {
    p["peer_addr"]
        .as_str()
        .and_then(|a| a.parse::<std::net::SocketAddr>().ok())
        .map(|a| a.ip())
}

/// The port of a status `peer_addr`.
fn peer_port(p: &Value) -> Option<u16> {
    p["peer_addr"]
        .as_str()
        .and_then(|a| a.parse::<std::net::SocketAddr>().ok())
        .map(|a| a.port())
}

/// The gateway's path whose peer address is on `ip` (`10.0.8.1`, `fd00:1::2`).
fn gw_path_from<'a>(v: &'a Value, ip: &str) -> Option<&'a Value> {
    gw_conn(v)["paths"]
        .as_array()?
        .iter()
        .find(|p| peer_ip(p).is_some_and(|a| a.to_string() == ip))
}

/// The gateway's path `id`.
fn gw_path(v: &Value, id: &Value) -> Option<Value> {
    gw_conn(v)["paths"]
        .as_array()?
        .iter()
        .find(|p| &p["id"] == id)
        .cloned()
}

/// The client's established path on link `local`.
fn client_path(v: &Value, local: u64) -> Option<Value> {
    v["connections"][0]["paths"]
        .as_array()?
        .iter()
        .find(|p| p["local"] == local && p["established"] == true)
        .cloned()
}

fn num(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or(0)
}

fn mb(b: u64) -> f64 {
    b as f64 / 1e6
}

/// What identifies the connection: (gateway's conn_id, gateway's connection count for
/// client a, client's connection id, connections the client started).
fn identity(gw: &Value, cl: &Value) -> (Value, u64, Value, u64) {
    (
        gw_conn(gw)["conn_id"].clone(),
        num(gw_conn(gw), "connections"),
        cl["connections"][0]["conn_id"].clone(),
        num(cl, "connections_started"),
    )
}

/// The traffic during a migration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Load {
    /// An upload (client → server) and a download (server → client) at once: the client
    /// sends data on every path.
    UpAndDown,
    /// A download alone: the client sends only acknowledgements, on the paths that bring it
    /// data, so a path whose gateway datagrams go to a stale address hears nothing from the
    /// client but its liveness probes.
    DownOnly,
    /// Nothing while the change comes; a download alone right after it: no datagram of the
    /// old address is still on its way to the client to be acknowledged from the new one.
    DownAfterIdle,
}

/// One checksum-verified TCP transfer through the tunnel.
struct Flow {
    dir: &'static str,
    want: [u8; 32],
    rx: std::thread::JoinHandle<Received>,
    tx: std::thread::JoinHandle<Instant>,
}

/// The transfers of a [`Load`], `len` bytes each.
struct Transfers {
    flows: Vec<Flow>,
    len: usize,
    start: Instant,
    /// Started after the change ([`Load::DownAfterIdle`]).
    after_change: bool,
}

impl Transfers {
    fn start(topo: &Topo, load: Load, len: usize) -> Transfers {
        let mut down = file_bytes(len + 1);
        down.remove(0);
        let start = Instant::now();
        let mut flows = vec![Flow {
            dir: "download",
            want: sha256(&down),
            rx: tcp_receiver_at(&topo.client, "0.0.0.0:5004"),
            tx: tcp_send_to(&topo.server, "10.200.0.2:5004", down),
        }];
        if load == Load::UpAndDown {
            let up = file_bytes(len);
            let want = sha256(&up);
            let rx = tcp_receiver_at(&topo.server, "0.0.0.0:5001");
            flows.push(Flow {
                dir: "upload",
                want,
                rx,
                tx: tcp_send_to(&topo.client, &format!("{SERVER}:5001"), up),
            });
        }
        Transfers {
            flows,
            len,
            start,
            after_change: load == Load::DownAfterIdle,
        }
    }

    /// Joins every flow, checks it whole and intact, reports its longest stall around `at`
    /// ([`STALL_WINDOW`]) and over the whole transfer, and returns the largest stall around
    /// `at`.
    fn finish(self, what: &str, at: Instant) -> Duration {
        let mut worst = Duration::ZERO;
        for f in self.flows {
            let _ = f.tx.join().unwrap_or_else(|_| {
                panic!(
                    "{what}: the {}'s sender failed: the inner TCP connection broke",
                    f.dir
                )
            });
            let got = f.rx.join().expect("receiver");
            let (stall, rel) = got.longest_stall_around(at, STALL_WINDOW.0, STALL_WINDOW.1);
            let (overall, _) = got.longest_stall(Duration::ZERO, Duration::from_secs(3600));
            let secs = got.reads.last().map_or(0.0, |r| r.0.as_secs_f64());
            let change = got
                .first
                .map_or(0.0, |t| at.saturating_duration_since(t).as_secs_f64());
            let at_change = got
                .reads
                .iter()
                .take_while(|r| r.0.as_secs_f64() <= change)
                .last()
                .map_or(0, |r| r.1);
            eprintln!(
                "{what}: {} {:.1} MB in {secs:.2} s ({:.1} Mbit/s), {:.1} MB in when the \
                 change came at {change:.2} s; longest stall around it {:.1} ms (starting \
                 {:+.0} ms from it), longest overall {:.1} ms",
                f.dir,
                mb(got.bytes as u64),
                got.bytes as f64 * 8.0 / secs.max(1e-3) / 1e6,
                mb(at_change as u64),
                stall.as_secs_f64() * 1e3,
                rel * 1e3,
                overall.as_secs_f64() * 1e3,
            );
            assert_eq!(got.bytes, self.len, "{what}: the whole {} arrived", f.dir);
            assert_eq!(got.sha256, f.want, "{what}: the {} is intact", f.dir);
            assert!(
                self.after_change || (at_change > 0 && at_change < self.len),
                "{what}: the change did not come in the middle of the {} ({at_change} of {} \
                 bytes in)",
                f.dir,
                self.len
            );
            worst = worst.max(stall);
        }
        worst
    }
}

/// How a migration showed in the statuses (refreshed every 250 ms), from the change on.
struct Migration {
    gw: Value,
    cl: Value,
    /// When the gateway first showed the path at its new address.
    moved: Option<Duration>,
    /// When the path had also carried data again through the new address (see
    /// [`watch_migration`]).
    carried: Option<Duration>,
}

/// Watches the statuses after a change until the gateway shows `gw_path_id` with a peer
/// address on `new_ip` and the path carries data again through it, compared with `before`
/// (gateway's path, client's path on link 1): under [`Load::UpAndDown`] one side received
/// [`CARRIED`] more data bytes on the path and each side [`REACHED`] more bytes; under a
/// download alone the client received [`CARRIED`] more data bytes. Gives up after
/// [`MIGRATE_WITHIN`].
fn watch_migration(
    gw: &Daemon,
    cl: &Daemon,
    gw_path_id: &Value,
    new_ip: &str,
    load: Load,
    before: (&Value, &Value),
) -> Migration {
    let t0 = Instant::now();
    let (gw_before, cl_before) = before;
    let grew = |now: &Option<Value>, then: &Value, key: &str, by: u64| {
        now.as_ref()
            .is_some_and(|p| num(p, key) >= num(then, key) + by)
    };
    let mut moved_at = None;
    loop {
        let (g, c) = (gw.status(), cl.status());
        let gp = gw_path(&g, gw_path_id);
        let cp = client_path(&c, 1);
        let moved = gp
            .as_ref()
            .and_then(peer_ip)
            .is_some_and(|a| a.to_string() == new_ip);
        if moved && moved_at.is_none() {
            moved_at = Some(t0.elapsed());
        }
        let carried = match load {
            Load::UpAndDown => {
                (grew(&gp, gw_before, "data_bytes_received", CARRIED)
                    || grew(&cp, cl_before, "data_bytes_received", CARRIED))
                    && grew(&gp, gw_before, "bytes_received", REACHED)
                    && grew(&cp, cl_before, "bytes_received", REACHED)
            }
            Load::DownOnly | Load::DownAfterIdle => {
                grew(&cp, cl_before, "data_bytes_received", CARRIED)
            }
        };
        if moved && carried {
            return Migration {
                gw: g,
                cl: c,
                moved: moved_at,
                carried: Some(t0.elapsed()),
            };
        }
        if t0.elapsed() > MIGRATE_WITHIN {
            eprintln!(
                "after {MIGRATE_WITHIN:?}: gateway path moved {moved}, carried data again \
                 {carried}"
            );
            return Migration {
                gw: g,
                cl: c,
                moved: moved_at,
                carried: None,
            };
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Prints a path's figures before and after.
fn report_path(what: &str, side: &str, before: &Value, after: &Value) {
    eprintln!(
        "{what}: {side} path {} peer {} → {}; data sent {:.1} → {:.1} MB, received {:.1} → \
         {:.1} MB; retransmissions {} → {}, RTOs {} → {}",
        after["id"],
        before["peer_addr"],
        after["peer_addr"],
        mb(num(before, "data_bytes_sent")),
        mb(num(after, "data_bytes_sent")),
        mb(num(before, "data_bytes_received")),
        mb(num(after, "data_bytes_received")),
        num(before, "retransmissions"),
        num(after, "retransmissions"),
        num(before, "rto_count"),
        num(after, "rto_count"),
    );
}

/// Runs `script` with `sh -c` in `ns` (several commands with the least delay between them).
fn sh_c(ns: &braid_mptcp::netns::NetNs, script: &str) -> String {
    let out = ns
        .output(&["sh", "-c", script])
        .unwrap_or_else(|e| panic!("{script} in {}: {e}", ns.name));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{script} in {}: {text}", ns.name);
    text
}

/// Transfer size of each direction in the migration tests: ~4–8 s at 50 + 30 Mbit/s.
const LEN: usize = 40 << 20;
/// When the change comes, after the transfers started.
const CHANGE_AFTER: Duration = Duration::from_millis(2000);

/// What changes under the client's link c1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    /// The router's source NAT moves c1's datagrams from 10.0.8.1:20000-20999 to
    /// 10.0.8.3:30000-30999 and forgets its UDP mappings.
    NatRebinding,
    /// c1's address 10.0.2.2/24 is replaced by 10.0.2.3/24 (and its route to the gateway,
    /// which removing the link's last address flushed, put back).
    Readdressing,
}

/// A migration under `load`: the routed topology (50 + 30 Mbit/s), the daemons with their
/// defaults, the transfers, `change` at [`CHANGE_AFTER`]; then every assertion of the
/// migration tests (see [`nat_rebinding_under_upload_and_download`]).
fn migration(prefix: &str, change: Change, load: Load) {
    let what = match (change, load) {
        (Change::NatRebinding, Load::UpAndDown) => "NAT rebinding (upload + download)",
        (Change::NatRebinding, Load::DownOnly) => "NAT rebinding (download only)",
        (Change::NatRebinding, Load::DownAfterIdle) => "NAT rebinding (idle, then download)",
        (Change::Readdressing, Load::UpAndDown) => "re-addressing (upload + download)",
        (Change::Readdressing, Load::DownOnly) => "re-addressing (download only)",
        (Change::Readdressing, Load::DownAfterIdle) => "re-addressing (idle, then download)",
    };
    let topo = Topo::routed(prefix, Some([50, 30]));
    let r = topo.router();
    let (old_ip, new_ip) = match change {
        Change::NatRebinding => {
            sh(r, "ip addr add 10.0.8.3/24 dev r8");
            sh_c(
                r,
                "iptables -t nat -A POSTROUTING -s 10.0.2.2/32 -o r8 -p udp \
                 -j SNAT --to-source 10.0.8.1:20000-20999",
            );
            ("10.0.8.1", "10.0.8.3")
        }
        Change::Readdressing => ("10.0.2.2", "10.0.2.3"),
    };
    let keys = Keys::new();
    let gw = Daemon::gateway(
        &topo.gw,
        gateway_config_with(&topo, &keys, &["0.0.0.0:7000"], &[], &[], ""),
    );
    let cl = Daemon::client(&topo.client, routed_client_config(&topo, &keys, ""));
    wait_paths(&cl, 2, Duration::from_secs(10));
    let mut tr = None;
    if load == Load::DownAfterIdle {
        // Fresh status (refreshed every 250 ms) with both paths idle.
        std::thread::sleep(Duration::from_millis(300));
    } else {
        let t = Transfers::start(&topo, load, LEN);
        std::thread::sleep(CHANGE_AFTER.saturating_sub(t.start.elapsed()));
        tr = Some(t);
    }
    let (g0, c0) = (gw.status(), cl.status());
    let id0 = identity(&g0, &c0);
    let gp0 = gw_path_from(&g0, old_ip)
        .cloned()
        .unwrap_or_else(|| panic!("no gateway path from {old_ip}: {}", status_table(&g0)));
    let cp0 = client_path(&c0, 1).expect("client path on c1");
    let at = Instant::now();
    let note = match change {
        Change::NatRebinding => {
            let out = sh_c(
                r,
                "iptables -t nat -R POSTROUTING 1 -s 10.0.2.2/32 -o r8 -p udp \
                 -j SNAT --to-source 10.0.8.3:30000-30999 && conntrack -D -p udp",
            );
            // `conntrack -D` lists the entries and then how many it deleted.
            format!("router: {}", out.lines().last().unwrap_or("").trim())
        }
        Change::Readdressing => {
            sh_c(
                &topo.client,
                "ip addr del 10.0.2.2/24 dev c1 && ip addr add 10.0.2.3/24 dev c1 && \
                 ip route replace 10.0.8.0/24 via 10.0.2.1 dev c1 metric 10",
            );
            format!(
                "c1 without a usable address for {:.1} ms (the three commands)",
                at.elapsed().as_secs_f64() * 1e3
            )
        }
    };
    let tr = tr.unwrap_or_else(|| Transfers::start(&topo, load, LEN));
    let m = watch_migration(&gw, &cl, &gp0["id"], new_ip, load, (&gp0, &cp0));
    let stall = tr.finish(what, at);
    let (g2, c2) = (gw.status(), cl.status());
    eprintln!("{}", status_table(&g2));
    eprintln!("{}", status_table(&c2));
    let gp1 = gw_path(&m.gw, &gp0["id"]).unwrap_or(Value::Null);
    report_path(what, "gateway", &gp0, &gp1);
    report_path(
        what,
        "client c1",
        &cp0,
        &client_path(&m.cl, 1).unwrap_or(Value::Null),
    );
    eprintln!(
        "{what}: {note}; the gateway showed the new address after {:?} and the path carried \
         data again after {:?} (status refreshed every 250 ms); send errors: gateway {}, \
         client {}; connection {} (gateway count {}), client connections started {}; longest \
         stall around the change {:.1} ms (bound {STALL_BOUND:?})",
        m.moved,
        m.carried,
        g2["drops"]["send_errors"],
        c2["drops"]["send_errors"],
        id0.0,
        id0.1,
        id0.3,
        stall.as_secs_f64() * 1e3,
    );
    if change == Change::NatRebinding {
        assert!(
            peer_port(&gp0).is_some_and(|p| (20000..=20999).contains(&p)),
            "{what}: the NAT's first mapping: {}",
            gp0["peer_addr"]
        );
    }
    let move_within = match change {
        Change::NatRebinding => MOVE_WITHIN,
        Change::Readdressing => READDRESS_MOVE_WITHIN,
    };
    assert!(
        m.moved.is_some_and(|t| t <= move_within),
        "{what}: the gateway showed path {} at {new_ip} after {:?}, not within {move_within:?}: \
         {}",
        gp0["id"],
        m.moved,
        status_table(&m.gw)
    );
    assert!(
        m.carried.is_some(),
        "{what}: the gateway's path {} did not move to {new_ip} and carry data again within \
         {MIGRATE_WITHIN:?}: {}",
        gp0["id"],
        status_table(&m.gw)
    );
    match change {
        Change::NatRebinding => assert!(
            peer_port(&gp1).is_some_and(|p| (30000..=30999).contains(&p)),
            "{what}: the NAT's new mapping: {}",
            gp1["peer_addr"]
        ),
        Change::Readdressing => assert_eq!(
            peer_port(&gp1),
            peer_port(&gp0),
            "{what}: the same client socket (port)"
        ),
    }
    assert_eq!(
        identity(&g2, &c2),
        id0,
        "{what}: the connection is the same one (no new connection)"
    );
    assert_eq!(id0.1, 1, "{what}: one connection at the gateway");
    assert_eq!(id0.3, 1, "{what}: one connection started by the client");
    assert!(
        stall <= STALL_BOUND,
        "{what}: longest stall at the change {stall:?} > {STALL_BOUND:?}"
    );
}

/// (1a) NAT rebinding: the router source-NATs link c1's datagrams to 10.0.8.1:20000-20999.
/// Mid-transfer (an upload and a download at once) the rule becomes 10.0.8.3:30000-30999 and
/// the router's UDP conntrack entries are deleted, so c1's next datagram leaves from a new
/// address and port. Both transfers arrive intact, their longest stall stays within
/// [`STALL_BOUND`], the gateway shows the same path (same id) at the new address and port
/// within [`MOVE_WITHIN`], carrying data both ways within [`MIGRATE_WITHIN`], and the
/// connection is the same one (ids and counts unchanged).
#[test]
fn nat_rebinding_under_upload_and_download() {
    if skip_netns() {
        return;
    }
    let _s = serial();
    if !require_root() {
        return;
    }
    migration("btn", Change::NatRebinding, Load::UpAndDown);
}

/// (1b) As (1a) under a download alone: the gateway's datagrams to the old mapping are
/// dropped by the NAT, so the client hears nothing on c1 and has nothing to acknowledge
/// there; only its liveness probes on c1 can tell the gateway the new mapping.
#[test]
fn nat_rebinding_under_download_only() {
    if skip_netns() {
        return;
    }
    let _s = serial();
    if !require_root() {
        return;
    }
    migration("btm", Change::NatRebinding, Load::DownOnly);
}

/// (1c) NAT rebinding while the client is idle (as when a NAT forgets an idle mapping),
/// then a download alone: the gateway's first datagrams on c1 go to the forgotten mapping,
/// and nothing is on its way to the client that it could acknowledge from the new one; only
/// its liveness probes on c1 can tell the gateway. The same assertions as (1a), the stall
/// measured over the download's first 1.5 s.
#[test]
fn nat_rebinding_while_idle_then_download() {
    if skip_netns() {
        return;
    }
    let _s = serial();
    if !require_root() {
        return;
    }
    migration("bti", Change::NatRebinding, Load::DownAfterIdle);
}

/// (2a) Interface re-addressing: mid-transfer (an upload and a download at once), link c1's
/// address 10.0.2.2/24 is removed and 10.0.2.3/24 added, and its route to the gateway put
/// back. Both transfers arrive intact, the longest stall stays within [`STALL_BOUND`], the
/// gateway's path (same id, same port) now has peer 10.0.2.3 and carries data both ways, and
/// the connection is the same one.
#[test]
fn readdressing_under_upload_and_download() {
    if skip_netns() {
        return;
    }
    let _s = serial();
    if !require_root() {
        return;
    }
    migration("btd", Change::Readdressing, Load::UpAndDown);
}

/// (2b) As (2a) under a download alone (see (1b)).
#[test]
fn readdressing_under_download_only() {
    if skip_netns() {
        return;
    }
    let _s = serial();
    if !require_root() {
        return;
    }
    migration("bte", Change::Readdressing, Load::DownOnly);
}

/// One checksum-verified transfer through the tunnel, alone: `from` sends `len` bytes to
/// `to`, where `to_ns` listens on `bind`. Returns the statuses of the client before and after
/// (fresh: read after a status refresh) and the receiver's view.
#[allow(clippy::too_many_arguments)]
fn transfer_alone(
    what: &str,
    cl: &Daemon,
    from: &braid_mptcp::netns::NetNs,
    to_ns: &braid_mptcp::netns::NetNs,
    bind: &str,
    to: &str,
    len: usize,
    seed: usize,
) -> (Value, Value) {
    let before = cl.status();
    let mut data = file_bytes(len + seed);
    data.drain(..seed);
    let want = sha256(&data);
    let rx = tcp_receiver_at(to_ns, bind);
    tcp_send_to(from, to, data).join().expect("sender finished");
    let got = rx.join().expect("receiver");
    // The status is refreshed every 250 ms.
    std::thread::sleep(Duration::from_millis(300));
    let after = cl.status();
    let (stall, _) = got.longest_stall(Duration::ZERO, Duration::from_secs(3600));
    let secs = got.reads.last().map_or(0.0, |x| x.0.as_secs_f64());
    let grew = |l: u64, k: &str| {
        mb(num(&client_path(&after, l).unwrap_or(Value::Null), k)
            .saturating_sub(num(&client_path(&before, l).unwrap_or(Value::Null), k)))
    };
    eprintln!(
        "IPv6 outer: {what} {:.1} MB in {secs:.2} s ({:.1} Mbit/s), longest stall {:.1} ms; \
         data sent on c0 +{:.1} MB, c1 +{:.1} MB; received on c0 +{:.1} MB, c1 +{:.1} MB",
        mb(got.bytes as u64),
        got.bytes as f64 * 8.0 / secs.max(1e-3) / 1e6,
        stall.as_secs_f64() * 1e3,
        grew(0, "data_bytes_sent"),
        grew(1, "data_bytes_sent"),
        grew(0, "data_bytes_received"),
        grew(1, "data_bytes_received"),
    );
    assert_eq!(got.bytes, len, "{what}: all arrived");
    assert_eq!(got.sha256, want, "{what}: intact");
    (before, after)
}

/// Asserts that the client's paths on both links grew `key` by ≥ 2 MB from `before` to
/// `after`: both links carried the transfer.
fn both_links_grew(what: &str, key: &str, before: &Value, after: &Value) {
    for l in 0..2 {
        let b = client_path(before, l).unwrap_or(Value::Null);
        let a = client_path(after, l).unwrap_or(Value::Null);
        assert_eq!(
            a["id"], b["id"],
            "{what}: the path on link c{l} is the same one"
        );
        let grew = num(&a, key).saturating_sub(num(&b, key));
        assert!(
            grew >= 2_000_000,
            "{what}: link c{l} {key} grew by only {grew} bytes: {}",
            status_table(after)
        );
    }
}

/// (3) IPv6 outer network: the client's links and the gateway's listen address are IPv6
/// (`[::]:7000`); the TUN devices have an IPv4 and an IPv6 address each. One after the other,
/// each checked by SHA-256: an inner IPv6 upload, an inner IPv6 download and an inner IPv4
/// upload; each uses both links (the paths' data counters of its direction grow on both),
/// the gateway's paths have IPv6 peer addresses, and it all stays one connection.
#[test]
fn ipv6_outer_carries_ipv4_and_ipv6_inner_over_both_links() {
    if skip_netns() {
        return;
    }
    let _s = serial();
    if !require_root() {
        return;
    }
    let topo = Topo::ipv6("bt6", Some([50, 30]));
    let keys = Keys::new();
    let gw = Daemon::gateway(
        &topo.gw,
        gateway_config_with(
            &topo,
            &keys,
            &["[::]:7000"],
            &["fd00:200::1/64"],
            &["fd00:200::2/128"],
            "",
        ),
    );
    let cl = Daemon::client(
        &topo.client,
        client_config_with(
            &topo,
            &keys,
            ["[fd00:1::1]:7000", "[fd00:2::1]:7000"],
            &["fd00:200::2/64"],
            &["10.0.9.0/24", "fd00:9::/64"],
            "",
            "",
        ),
    );
    wait_paths(&cl, 2, Duration::from_secs(10));
    for (ns, want) in [
        (&topo.client, "fd00:200::2/64"),
        (&topo.gw, "fd00:200::1/64"),
    ] {
        let o = ns
            .exec(&["ip", "-6", "addr", "show", "dev", "braid0"])
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(
            text.contains(want),
            "TUN device in {} lacks {want}: {text}",
            ns.name
        );
    }
    let len = 24 << 20;
    let t0 = Instant::now();
    let (b6u, a6u) = transfer_alone(
        "inner IPv6 upload",
        &cl,
        &topo.client,
        &topo.server,
        "[::]:5003",
        &format!("[{SERVER6}]:5003"),
        len,
        0,
    );
    let (b6d, a6d) = transfer_alone(
        "inner IPv6 download",
        &cl,
        &topo.server,
        &topo.client,
        "[::]:5004",
        "[fd00:200::2]:5004",
        len,
        1,
    );
    let (b4u, a4u) = transfer_alone(
        "inner IPv4 upload",
        &cl,
        &topo.client,
        &topo.server,
        "0.0.0.0:5001",
        &format!("{SERVER}:5001"),
        len,
        2,
    );
    let g = gw.status();
    eprintln!("{}", status_table(&g));
    eprintln!("{}", status_table(&a4u));
    let peers: Vec<String> = gw_conn(&g)["paths"]
        .as_array()
        .map(|p| {
            p.iter()
                .map(|p| p["peer_addr"].as_str().unwrap_or("-").to_string())
                .collect()
        })
        .unwrap_or_default();
    eprintln!(
        "IPv6 outer: three transfers in {:.2} s; gateway's path peers {peers:?}",
        t0.elapsed().as_secs_f64()
    );
    for ip in ["fd00:1::2", "fd00:2::2"] {
        assert!(
            gw_path_from(&g, ip).is_some(),
            "no gateway path from {ip}: {peers:?}"
        );
    }
    both_links_grew("inner IPv6 upload", "data_bytes_sent", &b6u, &a6u);
    both_links_grew("inner IPv6 download", "data_bytes_received", &b6d, &a6d);
    both_links_grew("inner IPv4 upload", "data_bytes_sent", &b4u, &a4u);
    assert_eq!(num(&a4u, "connections_started"), 1, "one connection");
    assert_eq!(num(gw_conn(&g), "connections"), 1, "one connection");
}
