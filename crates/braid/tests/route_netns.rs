//! `braid route` on seed 004's E13 topology of namespaces (`braid_lab::manet`): 8 nodes with
//! four interfaces, babeld on every node, `braid route` (HMM, part path) on every node, kernel
//! MPTCP from M1 to M8 with `braid pm` pairing subflows within a subnet, unmodified
//! applications (iperf3 and nc through mptcpize).
//!
//! One test, in phases (about 3 minutes):
//! 1. routes converge: every node routes every lane to every node; M1's lanes to M8 follow
//!    App. C (e0: M2, M3, M4; e1: M2; e2: M3; e3: M4), in `braid route status` and in the
//!    kernel's tables;
//! 2. subflows follow: during an iperf3 download M8 ← M1, the M1–M3 link fades and is cut; M1's
//!    lane e2 moves from M3 to M4 before the cut, its subflow's data with it, the download
//!    goes on with its four same-subnet subflows;
//! 3. the HMM acts early: links fade (loss 30 % and 60 % for 4 s, 85 % for 6 s) and are cut,
//!    two at a time; at the cut each end's links to the other (one next hop per interface)
//!    must already be withdrawn by the HMM (verdict *disconnect*) in ≥ 90 % of the cases, and
//!    no kernel route may go through the fading neighbour in ≥ 90 % of the ends;
//! 4. a 3.6 MB file M1 → M8 (nc) arrives intact;
//! 5. babeld restarts on a relay: its routes stay while it is away and are resynchronised when
//!    it is back;
//! 6. everything is gone afterwards (namespaces, babeld, braid processes).

mod netns;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use braid_lab::manet::{self, Manet, Process, Spec};
use netns::require_root;
use serde_json::Value;
use sha2::{Digest, Sha256};

const BRAID: &str = env!("CARGO_BIN_EXE_braid");
/// The fade before a cut: (duration, loss) steps.
const RAMP: [(u64, f64); 3] = [(4, 0.30), (4, 0.60), (6, 0.85)];
/// How long a link stays cut.
const CUT: Duration = Duration::from_secs(2);

fn rid(n: u32) -> String {
    manet::router_id(n)
}

fn control(m: &Manet, n: u32) -> PathBuf {
    m.dir.join(format!("route-{n}.sock"))
}

/// `braid route` on every node with `policy`.
fn start_routes(m: &Manet, policy: &str) -> Vec<Process> {
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
            m
                .spawn(
                    n,
                    &format!("route-{n}"),
                    &[BRAID, "route", "--config", cfg.to_str().unwrap()],
                )
                .unwrap()
        })
        .collect()
}

fn try_status(m: &Manet, n: u32) -> Option<Value> {
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

fn status(m: &Manet, n: u32, routes: &[Process]) -> Value {
    try_status(m, n).unwrap_or_else(|| {
        panic!(
            "braid route status on node {n} failed; its log: {}",
            routes[n as usize - 1].log_tail()
        )
    })
}

fn wait<T>(what: &str, within: Duration, mut f: impl FnMut() -> Option<T>) -> (T, Duration) {
    let t0 = Instant::now();
    loop {
        if let Some(v) = f() {
            return (v, t0.elapsed());
        }
        assert!(t0.elapsed() < within, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The next hops (neighbour@iface) of `lane`'s route to `dest` in a status.
fn hops(st: &Value, dest: u32, lane: &str) -> Vec<String> {
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
                    format!(
                        "m{}@{}",
                        u32::from_str_radix(&n[n.len() - 2..], 16).unwrap_or(0),
                        h["iface"].as_str().unwrap_or("?")
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Every lane of node `n` routes to every other node.
fn full_table(m: &Manet, st: &Value, n: u32) -> bool {
    (1..=m.spec.nodes)
        .filter(|&d| d != n)
        .all(|d| (0..m.ifaces()).all(|x| !hops(st, d, &format!("e{x}")).is_empty()))
}

/// Node `me`'s view of `peer` as a next hop: of its links to `peer` (one per interface), how
/// many the HMM has withdrawn (predicted *disconnect*, not kept) and how many there are
/// (a link babeld no longer reports counts as not withdrawn by the HMM); and whether no
/// installed route goes through `peer` any more.
fn withdrawn(m: &Manet, st: &Value, peer: u32) -> (usize, usize, bool, Vec<f64>) {
    let links: Vec<&Value> = st["links"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|l| l["neighbour"] == rid(peer))
        .collect();
    let by_hmm = links
        .iter()
        .filter(|l| l["kept"] == false && l["predicted"] == "disconnect")
        .count();

    let addrs: BTreeSet<String> = (0..m.ifaces())
        .map(|x| manet::link_local(peer, x))
        .collect();
    let routed = st["installed"].as_array().into_iter().flatten().any(|r| {
        r["via"].as_array().into_iter().flatten().any(|v| {
            let v = v.as_str().unwrap_or("");
            addrs.contains(v.split('%').next().unwrap_or(""))
        })
    });
    // How long before now each link was withdrawn (its latest verdict).
    let now = st["uptime_s"].as_f64().unwrap_or(0.0);
    let leads = links
        .iter()
        .filter(|l| l["kept"] == false)
        .filter_map(|l| {
            st["verdicts"].as_array()?.iter().find(|v| {
                v["neighbour"] == l["neighbour"] && v["iface"] == l["iface"] && v["kept"] == false
            })
        })
        .filter_map(|v| v["t_s"].as_f64().map(|t| now - t))
        .collect();
    (by_hmm, m.ifaces(), !routed, leads)
}

/// Both ends keep each other (every link kept).
fn kept(m: &Manet, routes: &[Process], a: u32, b: u32) -> bool {
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

/// One end's view of the other just before the cut: (me, peer, links withdrawn by the HMM,
/// links, no route through the peer, how long before the cut each link was withdrawn).
type View = (u32, u32, usize, usize, bool, Vec<f64>);

/// Fades the links `pairs` together along [`RAMP`]; just before cutting them, returns each
/// end's [`View`]; cuts them for [`CUT`], restores them.
fn fade_and_cut(m: &Manet, routes: &[Process], pairs: &[(u32, u32)]) -> Vec<View> {
    for &(loss_s, loss) in &RAMP {
        for &(a, b) in pairs {
            m.set_loss(a, b, loss).unwrap();
        }
        std::thread::sleep(Duration::from_secs(loss_s));
    }
    let mut seen = Vec::new();
    for &(a, b) in pairs {
        for (me, peer) in [(a, b), (b, a)] {
            let (hmm, links, unrouted, leads) = withdrawn(m, &status(m, me, routes), peer);
            seen.push((me, peer, hmm, links, unrouted, leads));
        }
    }
    for &(a, b) in pairs {
        m.set_up(a, b, false).unwrap();
    }
    std::thread::sleep(CUT);
    for &(a, b) in pairs {
        m.set_up(a, b, true).unwrap();
        m.set_loss(a, b, 0.0).unwrap();
    }
    seen
}

fn need(tool: &str) {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "`{tool}` is missing: run scripts/deps (Debian packages babeld, iperf3, mptcpize, netcat-openbsd, iptables)"
    );
}

fn nstat(ns: &braid_mptcp::netns::NetNs, counter: &str) -> u64 {
    netns::nstat(ns, counter)
}

#[test]
fn e13_topology_babeld_braid_route_and_kernel_mptcp() {
    if !require_root() {
        return;
    }
    for t in [
        "babeld",
        "iperf3",
        "mptcpize",
        "nc",
        "iptables",
        "ip6tables",
        "tc",
    ] {
        need(t);
    }
    manet::cleanup_on_interrupt().unwrap();
    let t_start = Instant::now();
    let mut m = Manet::build(Spec::e13("brt", Spec::HOMOGENEOUS)).unwrap();
    let names: Vec<String> = (1..=8).map(|n| m.ns(n).name.clone()).collect();
    m.start_all_babeld().unwrap();
    let routes = start_routes(&m, "hmm-part");
    let mut pids: Vec<u32> = routes.iter().map(Process::pid).collect();
    pids.extend(m.babeld_pids());

    // 1. Convergence.
    let (_, took) = wait("routes converge", Duration::from_secs(60), || {
        let all = (1..=8).all(|n| try_status(&m, n).is_some_and(|st| full_table(&m, &st, n)));
        let st = try_status(&m, 1)?;
        let app_c = hops(&st, 8, "e1") == ["m2@e1"]
            && hops(&st, 8, "e2") == ["m3@e2"]
            && hops(&st, 8, "e3") == ["m4@e3"]
            && {
                let mut e0 = hops(&st, 8, "e0");
                e0.sort();
                e0 == ["m2@e0", "m3@e0", "m4@e0"]
            };
        (all && app_c).then_some(())
    });
    eprintln!("routes converged in {:.1} s", took.as_secs_f64());
    // The kernel has them: M1's table of lane e2 sends M8's e2 address to M3's e2 neighbour.
    let t = m.ns(1).ip(&["route", "show", "table", "1002"]).unwrap();
    let t = String::from_utf8_lossy(&t.stdout);
    assert!(
        t.contains(&format!(
            "10.2.0.8 via inet6 {} dev e2 proto 199 src 10.2.0.1",
            manet::link_local(3, 2)
        )),
        "{t}"
    );
    let r = m
        .ns(1)
        .ip(&["route", "get", "10.2.0.8", "from", "10.2.0.1"])
        .unwrap();
    assert!(String::from_utf8_lossy(&r.stdout).contains("table 1002"));
    let table = Command::new(BRAID)
        .args(["route", "status", "--control"])
        .arg(control(&m, 1))
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(
        table.contains("policy hmm-part") && table.contains("connected"),
        "{table}"
    );

    // 2. Kernel MPTCP M1 → M8, braid pm pairing subflows within subnets; M1–M3 fades.
    for x in 1..4 {
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
    let pm = netns::Daemon::braid_pm(
        m.ns(8),
        "mode = \"fullmesh\"\nsame_subnet = true\n[[iface]]\nname = \"e0\"\n[[iface]]\nname = \"e1\"\n[[iface]]\nname = \"e2\"\n[[iface]]\nname = \"e3\"\n",
    );
    pids.push(pm.child.id());
    let server = m
        .spawn(1, "iperf3-s", &["mptcpize", "run", "iperf3", "-s", "-1"])
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let report = m.dir.join("iperf3.json");
    let mut client = m
        .spawn(
            8,
            "iperf3-c",
            &[
                "mptcpize",
                "run",
                "iperf3",
                "-c",
                "10.0.0.1",
                "-R",
                "-t",
                "25",
                "-J",
                "--logfile",
                report.to_str().unwrap(),
            ],
        )
        .unwrap();
    // iperf3 opens two connections (control, data): each gets its four subflows.
    let t0 = Instant::now();
    let subflows = loop {
        let st = pm.status();
        let conns = st["connections"].as_array().cloned().unwrap_or_default();
        let f: Vec<Vec<(String, String)>> = conns
            .iter()
            .map(|c| {
                c["subflows"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|f| {
                        let a = |k: &str| f[k].as_str().unwrap_or("").to_string();
                        (a("local"), a("remote"))
                    })
                    .collect()
            })
            .collect();
        if f.len() == 2 && f.iter().all(|s| s.len() == 4) {
            break f.concat();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(8),
            "four same-subnet subflows per connection expected: {st:#}\nbraid pm: {}\niperf3: {}",
            pm.log_text(),
            client.log_tail()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    for (l, r) in &subflows {
        let subnet = |a: &str| a.split('.').take(3).collect::<Vec<_>>().join(".");
        assert_eq!(subnet(l), subnet(r), "subflow {l} -> {r} crosses subnets");
    }
    std::thread::sleep(Duration::from_secs(2));
    let rate = |a: u32, x: usize, b: u32| {
        let b0 = m.tx_bytes(a, x, b);
        std::thread::sleep(Duration::from_secs(1));
        m.tx_bytes(a, x, b) - b0
    };
    let via_m3_before = rate(1, 2, 3);
    assert!(
        via_m3_before > 50_000,
        "lane e2's subflow goes through M3: {via_m3_before} B/s"
    );
    // The fade: M1's lane e2 must move to M4 before the cut, and its data with it.
    for &(s, loss) in &RAMP[..2] {
        m.set_loss(1, 3, loss).unwrap();
        std::thread::sleep(Duration::from_secs(s));
    }
    m.set_loss(1, 3, RAMP[2].1).unwrap();
    std::thread::sleep(Duration::from_secs(RAMP[2].0 - 1));
    let (via_m3, via_m4) = {
        let (a3, a4) = (m.tx_bytes(1, 2, 3), m.tx_bytes(1, 2, 4));
        std::thread::sleep(Duration::from_secs(1));
        (m.tx_bytes(1, 2, 3) - a3, m.tx_bytes(1, 2, 4) - a4)
    };
    let st1 = status(&m, 1, &routes);
    let follow = withdrawn(&m, &st1, 3);
    let follow3 = withdrawn(&m, &status(&m, 3, &routes), 1);
    let lane2 = hops(&st1, 8, "e2");
    m.set_up(1, 3, false).unwrap();
    std::thread::sleep(CUT);
    m.set_up(1, 3, true).unwrap();
    m.set_loss(1, 3, 0.0).unwrap();
    // While the download still runs: the lane-e2 subflow is the one from before the fade.
    let after = pm.status();
    let lane2_subflows: Vec<String> = after["connections"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| c["subflows"].as_array().cloned().unwrap_or_default())
        .filter(|f| {
            f["local"]
                .as_str()
                .is_some_and(|l| l.starts_with("10.2.0.8:"))
        })
        .map(|f| {
            format!(
                "{} -> {}",
                f["local"].as_str().unwrap_or(""),
                f["remote"].as_str().unwrap_or("")
            )
        })
        .collect();
    let before_lane2: Vec<String> = subflows
        .iter()
        .filter(|(l, _)| l.starts_with("10.2.0.8:"))
        .map(|(l, r)| format!("{l} -> {r}"))
        .collect();
    let (_, _) = wait("iperf3 ends", Duration::from_secs(30), || client.try_wait());
    drop(server);
    let rep: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap_or_default())
        .unwrap_or_else(|e| panic!("iperf3 report: {e}; {}", client.log()));
    let mbit = rep["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(0.0)
        / 1e6;
    eprintln!(
        "subflows follow: lane e2 to M8 before the cut {lane2:?}; M1 e2 → M3 {via_m3_before} B/s before the fade, {via_m3} B/s in the last second before the cut, → M4 {via_m4} B/s; iperf3 {mbit:.1} Mbit/s over 25 s; lane-e2 subflows after the cut {lane2_subflows:?}"
    );
    assert_eq!(
        lane2,
        ["m4@e2"],
        "App. C with M2 and M4 left: lane e2 takes the second, M4"
    );
    assert!(
        via_m4 > 50_000 && via_m3 < via_m4 / 10,
        "lane e2's subflow should now go through M4: M3 {via_m3} B/s, M4 {via_m4} B/s"
    );
    assert!(
        mbit > 5.0,
        "the download went on: {mbit:.1} Mbit/s; {}",
        client.log_tail()
    );
    assert_eq!(
        lane2_subflows, before_lane2,
        "the lane-e2 subflows of before the fade carry on after the cut"
    );

    // 3. Fades and cuts: the HMM withdraws the next hop before the link is cut.
    let cycles: [[(u32, u32); 2]; 5] = [
        [(1, 2), (6, 8)],
        [(1, 4), (5, 8)],
        [(2, 5), (4, 7)],
        [(3, 5), (7, 8)],
        [(2, 6), (3, 7)],
    ];
    let mut seen: Vec<View> = vec![
        (1, 3, follow.0, follow.1, follow.2, follow.3),
        (3, 1, follow3.0, follow3.1, follow3.2, follow3.3),
    ];
    for pairs in cycles {
        for &(a, b) in &pairs {
            wait(
                &format!("M{a}–M{b} trusted again"),
                Duration::from_secs(40),
                || kept(&m, &routes, a, b).then_some(()),
            );
        }
        seen.extend(fade_and_cut(&m, &routes, &pairs));
    }
    let links: usize = seen.iter().map(|s| s.3).sum();
    let early: usize = seen.iter().map(|s| s.2).sum();
    let unrouted = seen.iter().filter(|s| s.4).count();
    let mut leads: Vec<f64> = seen.iter().flat_map(|s| s.5.iter().copied()).collect();
    leads.sort_by(f64::total_cmp);
    for s in &seen {
        eprintln!(
            "  M{} about M{}: {} of {} links withdrawn by the HMM before the cut, no route through it: {}",
            s.0, s.1, s.2, s.3, s.4
        );
    }
    eprintln!(
        "next-hop links withdrawn by the HMM before the cut: {early} of {links} ({:.0} %), {:.1} s before it (median; {:.1}–{:.1} s); no route through the fading neighbour at the cut: {unrouted} of {} ends",
        100.0 * early as f64 / links as f64,
        leads.get(leads.len() / 2).copied().unwrap_or(f64::NAN),
        leads.first().copied().unwrap_or(f64::NAN),
        leads.last().copied().unwrap_or(f64::NAN),
        seen.len()
    );
    assert!(
        early * 10 >= links * 9,
        "the HMM should withdraw a fading next hop before the cut in ≥ 90 % of cases: {early} of {links}"
    );
    assert!(
        unrouted * 10 >= seen.len() * 9,
        "no kernel route should go through a fading neighbour at the cut in ≥ 90 % of cases: {unrouted} of {}",
        seen.len()
    );

    // 4. A 3.6 MB file M1 → M8 through nc, intact.
    wait("every link trusted again", Duration::from_secs(60), || {
        m.spec
            .links
            .iter()
            .all(|&(a, b)| kept(&m, &routes, a, b))
            .then_some(())
    });
    let file = m.dir.join("file.bin");
    let mut data = vec![0u8; 3_600_000];
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for b in data.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        b.copy_from_slice(&x.to_le_bytes()[..b.len()]);
    }
    std::fs::write(&file, &data).unwrap();
    let out = m.dir.join("received.bin");
    let dups0 = nstat(m.ns(8), "MPTcpExtDuplicateData") + nstat(m.ns(8), "TcpExtTCPDSACKOldSent");
    let nc_server = m
        .spawn(
            1,
            "nc-s",
            &[
                "sh",
                "-c",
                &format!(
                    "exec mptcpize run nc -l -N 10.0.0.1 5001 < {}",
                    file.display()
                ),
            ],
        )
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    let got = Command::new("ip")
        .args(["netns", "exec", &m.ns(8).name, "sh", "-c"])
        .arg(format!(
            "mptcpize run nc 10.0.0.1 5001 < /dev/null > {}",
            out.display()
        ))
        .status()
        .unwrap();
    let took = t0.elapsed();
    drop(nc_server);
    let dups =
        nstat(m.ns(8), "MPTcpExtDuplicateData") + nstat(m.ns(8), "TcpExtTCPDSACKOldSent") - dups0;
    let rx = std::fs::read(&out).unwrap_or_default();
    eprintln!(
        "3.6 MB M1 → M8: {:.2} s, {} bytes, {dups} duplicate segments at M8",
        took.as_secs_f64(),
        rx.len()
    );
    assert!(got.success(), "nc client failed");
    assert_eq!(rx.len(), data.len());
    assert_eq!(
        Sha256::digest(&rx),
        Sha256::digest(&data),
        "the file is not intact"
    );

    // 5. babeld restarts on M6: routes kept while it is away, resynchronised after.
    let before = status(&m, 6, &routes);
    let installed = before["installed"].as_array().map_or(0, Vec::len);
    assert!(installed > 0);
    m.stop_babeld(6);
    wait("M6's braid route notices", Duration::from_secs(5), || {
        (status(&m, 6, &routes)["babeld"]["connected"] == false).then_some(())
    });
    std::thread::sleep(Duration::from_secs(3));
    let away = status(&m, 6, &routes);
    let kernel = m
        .ns(6)
        .ip(&["route", "show", "table", "1000", "proto", "199"])
        .unwrap();
    assert_eq!(
        away["installed"].as_array().map_or(0, Vec::len),
        installed,
        "routes are kept while babeld is away"
    );
    assert!(!kernel.stdout.is_empty(), "the kernel still has the routes");
    let t = status(&m, 6, &routes);
    let text = Command::new(BRAID)
        .args(["route", "status", "--control"])
        .arg(control(&m, 6))
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("AWAY (routes kept)"),
        "{t:#}"
    );
    m.start_babeld(6).unwrap();
    let (_, back) = wait("M6 resynchronised", Duration::from_secs(15), || {
        let st = status(&m, 6, &routes);
        (st["babeld"]["synced"] == true && st["babeld"]["connects"].as_u64() >= Some(2))
            .then_some(())
    });
    let (_, full) = wait(
        "M6's routes complete again",
        Duration::from_secs(60),
        || full_table(&m, &status(&m, 6, &routes), 6).then_some(()),
    );
    eprintln!(
        "babeld restart on M6: resynchronised {:.1} s after it started, full table after {:.1} s more",
        back.as_secs_f64(),
        full.as_secs_f64()
    );
    for n in 1..=8 {
        let st = status(&m, n, &routes);
        assert_eq!(
            st["babeld"]["malformed_lines"], 0,
            "node {n}: babeld's lines all parse"
        );
        assert_eq!(
            st["stats"]["kernel_request_errors"], 0,
            "node {n}: {:#}",
            st["last_errors"]
        );
    }

    // 6. Clean-up: braid route removes its rules when stopped; nothing is left afterwards.
    drop(pm);
    let r1 = routes.into_iter().next().unwrap();
    r1.stop();
    let rules = m.ns(1).ip(&["rule", "show"]).unwrap();
    assert!(!String::from_utf8_lossy(&rules.stdout).contains("proto 199"));
    drop(m);
    let left = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let left = String::from_utf8_lossy(&left.stdout);
    for n in &names {
        assert!(!left.contains(n.as_str()), "namespace {n} left behind");
    }
    for pid in pids {
        assert!(
            !PathBuf::from(format!("/proc/{pid}")).exists(),
            "process {pid} left behind"
        );
    }
    eprintln!("whole test: {:.0} s", t_start.elapsed().as_secs_f64());
}
