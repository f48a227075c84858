//! `braid lab` as a user runs it (root): scenario E3 shortened with `--set`, on the braid
//! tunnel and on kernel MPTCP, beside `braid sim` on the same file; Ctrl-C in the middle of a
//! run leaves no namespace and no process behind; kernel MPTCP with `braid pm` (`--endpoint
//! pm`) on E2's backup variant. The runs are real time and share the machine's two cores: one
//! at a time.

mod netns;

use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use netns::{Dir, require_root};
use serde_json::Value;

static SERIAL: Mutex<()> = Mutex::new(());

const E3: &str = "scenarios/e3-rtt-below-rtomin.toml";
/// Two address losses (at 8 s and 18 s) in 24 s.
const SHORT: [&str; 6] = [
    "--set",
    "duration=24s",
    "--set",
    "schedule.0.count=2",
    "--reps",
    "1",
];
/// Four losses (8, 18, 28, 38 s) in 42 s: a median over two losses moved by one slow
/// recovery ordered K = 2 above K = 4 in one run (52.7 against 52.1 ms).
const FOUR: [&str; 6] = [
    "--set",
    "duration=42s",
    "--set",
    "schedule.0.count=4",
    "--reps",
    "1",
];

fn root_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn braid(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(args)
        .current_dir(root_dir())
        .output()
        .expect("run braid");
    assert!(
        out.status.success(),
        "braid {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// (variant, median) pairs.
type Medians = Vec<(String, f64)>;

/// Median of `metric` per variant from `--json` output.
fn medians(out: &Output, metric: &str) -> Medians {
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    v["variants"]
        .as_array()
        .expect("variants")
        .iter()
        .map(|x| {
            (
                x["name"].as_str().unwrap_or("").to_string(),
                x["metrics"][metric]["median"].as_f64().unwrap_or(f64::NAN),
            )
        })
        .collect()
}

fn get(m: &Medians, name: &str) -> f64 {
    m.iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| *v)
        .unwrap_or_else(|| panic!("no variant {name} in {m:?}"))
}

fn sim_and_lab(endpoint: &str, run: &[&str]) -> (Medians, Medians) {
    let mut args = vec!["sim", E3, "--json", "-q"];
    args.extend(run);
    let sim = medians(&braid(&args), "delay_increase_ms");
    let mut args = vec!["lab", E3, "--endpoint", endpoint, "--json", "-q"];
    args.extend(run);
    let lab = medians(&braid(&args), "delay_increase_ms");
    eprintln!(
        "E3 shortened ({}), delay increase median, ms: endpoint {endpoint}",
        run.get(3).copied().unwrap_or_default()
    );
    for (name, l) in &lab {
        eprintln!("  {name:6} sim {:7.1}  lab {l:7.1}", get(&sim, name));
    }
    (sim, lab)
}

/// The lab on E3, on the braid tunnel: REJ with K = 1 and with K = 2 both at or below K = 4,
/// and K = 4 below stock. The order of K = 1 and K = 2 (about 2 ms apart in the simulator) is
/// printed, not asserted: the lab's median over four losses swaps them in some runs (two CI
/// runs: 46.3 against 45.0 ms, 44.6 against 44.2 ms).
#[test]
fn e3_on_the_braid_tunnel_keeps_the_rej_ordering() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !require_root() {
        return;
    }
    // The policies of the ordering (PTO, between stock and REJ, is left out to keep CI short).
    let mut run = FOUR.to_vec();
    run.extend([
        "--set",
        r#"sweep."connection.reinjection"=["stock","rej1","rej2","rej4"]"#,
    ]);
    let (_, lab) = sim_and_lab("tunnel", &run);
    let (k1, k2, k4, stock) = (
        get(&lab, "rej1"),
        get(&lab, "rej2"),
        get(&lab, "rej4"),
        get(&lab, "stock"),
    );
    eprintln!(
        "K = 1 {} K = 2 in this run",
        if k1 <= k2 { "≤" } else { "above" }
    );
    assert!(
        k1.max(k2) <= k4 && k4 < stock,
        "REJ ordering in the lab: K=1 {k1:.1}, K=2 {k2:.1}, K=4 {k4:.1}, stock {stock:.1} ms"
    );
}

/// Kernel MPTCP (its own reinjection) runs the same file; its delay increase is measured for
/// both losses and reported beside the simulator's `stock`.
#[test]
fn e3_on_kernel_mptcp_reports_its_delay_increase() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !require_root() {
        return;
    }
    let (sim, lab) = sim_and_lab("mptcp", &SHORT);
    assert_eq!(
        lab.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        ["stock"],
        "kernel MPTCP runs the stock variant only"
    );
    let (k, s) = (get(&lab, "stock"), get(&sim, "stock"));
    assert!(
        k.is_finite() && k > 0.0,
        "kernel MPTCP's delay increase: {k} ms (simulator's stock: {s:.1} ms)"
    );
}

fn netns_with(tag: &str) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        // `NetNs` names are prefix + pid + "-" + counter: match the pid exactly, so another
        // test binary's namespaces (CI runs braid pm's tests beside these) never count.
        .filter(|n| {
            n.rsplit_once('-').is_some_and(|(head, _)| {
                head.trim_start_matches(|c: char| !c.is_ascii_digit()) == tag
            })
        })
        .map(str::to_string)
        .collect()
}

/// Processes whose command line names the run's directory (the tunnel daemons' configs).
fn processes_with(tag: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(tag) {
            found.push(format!("{}: {cmd}", e.file_name().to_string_lossy()));
        }
    }
    found
}

/// A `braid lab` child that, if the test fails before it ends, is interrupted (so it cleans
/// up as a user's Ctrl-C would) and, failing that, killed.
struct Interrupted(std::process::Child);

impl Drop for Interrupted {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = Command::new("kill")
                .args(["-INT", &self.0.id().to_string()])
                .status();
            let t0 = Instant::now();
            while matches!(self.0.try_wait(), Ok(None)) && t0.elapsed() < Duration::from_secs(15) {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

#[test]
fn ctrl_c_mid_run_leaves_no_namespace_and_no_process() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !require_root() {
        return;
    }
    let mut lab = Interrupted(
        Command::new(env!("CARGO_BIN_EXE_braid"))
            .args([
                "lab",
                E3,
                "--set",
                "duration=60s",
                "--set",
                "schedule.0.count=2",
                "--reps",
                "1",
                "-q",
            ])
            .current_dir(root_dir())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start braid lab"),
    );
    let child = &mut lab.0;
    let pid = child.id();
    // Namespaces are named prefix + pid + counter, the run's directory braid-lab-<pid>-<seed>.
    let (ns_tag, dir_tag) = (pid.to_string(), format!("braid-lab-{pid}-"));
    let t0 = Instant::now();
    while processes_with(&dir_tag).len() < 2 {
        if let Some(st) = child.try_wait().unwrap() {
            let mut err = String::new();
            use std::io::Read;
            let _ = child.stderr.take().unwrap().read_to_string(&mut err);
            panic!("braid lab exited before its daemons started ({st}): {err}");
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "braid lab did not start its daemons"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        netns_with(&ns_tag).len(),
        3,
        "client, emulator and server namespaces"
    );
    let _ = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status();
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t0.elapsed() > Duration::from_secs(15) {
            let _ = child.kill();
            panic!("braid lab did not stop within 15 s of SIGINT");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    use std::io::Read;
    let _ = child.stderr.take().unwrap().read_to_string(&mut err);
    eprintln!("braid lab after SIGINT: {status}: {err}");
    assert!(!status.success(), "an interrupted run is not a success");
    assert!(err.contains("interrupted"), "{err}");
    assert_eq!(netns_with(&ns_tag), Vec::<String>::new(), "namespaces left");
    assert_eq!(
        processes_with(&dir_tag),
        Vec::<String>::new(),
        "processes left"
    );
}

/// Seed 003 (E11, E12) through real `braid tunnel` daemons with iperf3 as the hosts' TCP,
/// shortened: on a 30 MB download the tunnel carries at least 0.8 × what TCP gets over the two
/// links alone (E11; the start weighs more than on the paper's 50 MB: the simulator gives
/// 0.90 on 30 MB, 0.92 on 50 MB, where the lab measured 0.91; on 20 MB the lab gave 0.80,
/// too close to the bound); with 5 % loss on the fixed link
/// per-packet hybrid access (the daemon's `transport = "datagram"`, 1:1) gets at most half the
/// tunnel's throughput (E12; the full runs: the tunnel 4.3 × HYA 1:1, README).
#[test]
fn seed_003_through_real_daemons_with_iperf3() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !require_root() {
        return;
    }
    let short = ["--iperf3", "--json", "-q", "--reps", "1"];
    let mut args = vec!["lab", "scenarios/e11-tunnel-aggregation.toml"];
    args.extend(short);
    args.extend(["--set", "app.bytes=30MB", "--set", "duration=80s"]);
    let e11 = medians(&braid(&args), "transfer_mbps");
    let (tunnel, fixed, cellular) = (
        get(&e11, "tunnel"),
        get(&e11, "fixed"),
        get(&e11, "cellular"),
    );
    eprintln!("E11, 30 MB, Mbit/s: tunnel {tunnel:.2}, fixed {fixed:.2}, cellular {cellular:.2}");
    assert!(
        tunnel >= 0.8 * (fixed + cellular),
        "E11 in the lab: tunnel {tunnel:.2} against fixed {fixed:.2} + cellular {cellular:.2} Mbit/s"
    );
    // The tunnel and HYA 1:1 only, 12 s each (the ratio holds from the start).
    let mut args = vec!["lab", "scenarios/e12-tunnel-vs-hya-loss.toml"];
    args.extend(short);
    args.extend([
        "--set",
        "duration=12s",
        "--set",
        r#"sweep."link.0.loss"=[0.05]"#,
        "--set",
        r#"variant=[{name="tunnel"},{name="hya11",set={"tunnel.transport"="datagram","tunnel.ratio"="1:1"}}]"#,
    ]);
    let e12 = medians(&braid(&args), "transfer_mbps");
    let (t, h) = (get(&e12, "tunnel-0.05"), get(&e12, "hya11-0.05"));
    eprintln!("E12, fixed-link loss 5 %, Mbit/s: tunnel {t:.2}, HYA 1:1 {h:.2}");
    assert!(
        h <= 0.5 * t,
        "E12 in the lab at 5 % loss: HYA 1:1 {h:.2} against the tunnel's {t:.2} Mbit/s"
    );
}

/// Seed 004's HMM through braid tunnel: E7's `cross-hmm` variant (`[pm.hmm]`, which the lab
/// writes into the tunnel client's configuration), shortened to 22 s (the 802.11p link's
/// coverage is lost at about 15 s). The tunnel client's path manager demotes the link on a
/// prediction before the break, as the simulator's does on the same file, the p99 delay
/// around the loss stays within seed 000's 100 ms, and the bytes 802.11p carried before its
/// path closed are counted (within 25 % of the simulator's).
#[test]
fn the_hmm_demotes_a_fading_link_through_the_tunnel_before_it_breaks() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !require_root() {
        return;
    }
    let keep = std::env::temp_dir().join(format!("braid-lab-hmm-{}", std::process::id()));
    let _keep = Dir(keep.clone());
    let run = [
        "scenarios/e7-v2i-aggregation.toml",
        "--variant",
        "cross-hmm",
        "--set",
        "duration=22s",
        "--reps",
        "1",
        "--json",
        "-q",
    ];
    let metrics = |out: &Output| -> (Value, Value, f64) {
        let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let m = &v["variants"][0]["runs"][0]["metrics"];
        (
            m["acted_before_break_pct"].clone(),
            m["delay_p99_event_ms"].clone(),
            m["link.its.mb"][0].as_f64().unwrap_or(f64::NAN),
        )
    };
    let sim = metrics(&braid(&[&["sim"][..], &run].concat()));
    let keep_s = keep.to_str().expect("UTF-8 path");
    let lab_out = braid(&[&["lab"][..], &run, &["--keep", keep_s]].concat());
    let lab = metrics(&lab_out);
    let status: Value = serde_json::from_str(
        &std::fs::read_to_string(keep.join("cross-hmm-seed1/status-client.json"))
            .expect("the client's final status"),
    )
    .expect("status JSON");
    let decisions = status["decisions"].as_array().cloned().unwrap_or_default();
    eprintln!(
        "cross-hmm, 22 s: simulator {sim:?}, lab through the tunnel {lab:?}; decisions {decisions:?}"
    );
    assert_eq!(
        sim.0,
        serde_json::json!([100.0]),
        "the simulator acts before the break"
    );
    assert_eq!(
        lab.0,
        serde_json::json!([100.0]),
        "the tunnel acts before the break"
    );
    let p99 = lab.1[0].as_f64().expect("one window");
    assert!(
        p99 <= 100.0,
        "p99 around the loss through the tunnel: {p99} ms"
    );
    // What 802.11p carried before its path closed at the loss counts, as in the simulator.
    assert!(
        (0.75 * sim.2..=1.33 * sim.2).contains(&lab.2),
        "802.11p carried {:.2} MB in the lab, {:.2} in the simulator",
        lab.2,
        sim.2
    );
    let at = |reason: &str| {
        decisions
            .iter()
            .filter(|d| d["iface"] == "c1" && d["reason"] == reason)
            .filter_map(|d| d["t_s"].as_f64())
            .fold(f64::NAN, f64::min)
    };
    let (predicted, lost) = (at("prediction"), at("interface"));
    assert!(
        predicted < lost,
        "a prediction demotes 802.11p ({predicted} s) before its coverage is lost ({lost} s)"
    );
}

/// A topology's link is `rate` from `a` to `b` and `up_rate` back, whichever end the client
/// is: the lab's emulator gives each direction its own (it used to take `rate` as the
/// download's whenever the client was `a`). A two-node topology at 4 Mbit/s one way and 12 the
/// other, bulk each way for 8 s through the tunnel, beside the simulator.
#[test]
fn a_topology_links_two_rates_go_the_way_a_and_b_say() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !require_root() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("braid-lab-asym-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _dir = Dir(dir.clone());
    let file = dir.join("asym.toml");
    for (client_end, direction, want) in [("a", "down", 12.0), ("a", "up", 4.0), ("b", "down", 4.0)]
    {
        let (a, b) = if client_end == "a" {
            ("A", "B")
        } else {
            ("B", "A")
        };
        std::fs::write(
            &file,
            format!(
                r#"
name = "asym"
duration = "8s"
[[node]]
name = "A"
iface = [{{ name = "e0", addr = "10.9.0.1/24" }}]
[[node]]
name = "B"
iface = [{{ name = "e0", addr = "10.9.0.2/24" }}]
[[link]]
name = "l"
a = "{a}.*"
b = "{b}.*"
rate = "4Mbit"
up_rate = "12Mbit"
delay = "5ms"
[app]
kind = "bulk"
client = "A"
server = "B"
direction = "{direction}"
"#
            ),
        )
        .unwrap();
        let f = file.to_str().unwrap();
        let run = [f, "--reps", "1", "--json", "-q"];
        let sim = get(
            &medians(&braid(&[&["sim"][..], &run].concat()), "throughput_mbps"),
            "stock",
        );
        let keep = dir.join(format!("keep-{client_end}-{direction}"));
        let out = dir.join(format!("out-{client_end}-{direction}"));
        let lab_out = braid(
            &[
                &[
                    "lab",
                    "--keep",
                    keep.to_str().unwrap(),
                    "--out",
                    out.to_str().unwrap(),
                ][..],
                &run,
            ]
            .concat(),
        );
        let lab = get(&medians(&lab_out, "throughput_mbps"), "stock");
        // `--out` writes the simulator's per-run tables; the time series has the link's rate
        // by the client's interface and no window, RTT or reorder-buffer column (not read).
        let series = std::fs::read_to_string(out.join("stock/seed1/timeseries.csv"))
            .expect("--out's time series");
        let mut lines = series.lines();
        assert_eq!(
            lines.next(),
            Some("t_s,throughput_mbps,e0_rx_mbps,reinjected,data_packets"),
            "client at {client_end}, {direction}: --out's time series header"
        );
        assert!(
            lines.count() > 100,
            "client at {client_end}, {direction}: a sample every 50 ms for 8 s"
        );
        assert!(out.join("stock/seed1/deliveries.csv").exists());
        // The link's figures are stream bytes, as the simulator's: the receiving tunnel end's
        // count, the inner packets the tunnel's stream carries. On the one link that is what
        // the application got, plus the inner packets' TCP/IP headers (3–4 %) and the inner
        // TCP's retransmissions of what the tunnel's full send buffer refused. They used to
        // be the emulator's IP bytes, the tunnel's own headers and encryption on top.
        let lab_link = get(&medians(&lab_out, "link.e0.throughput_mbps"), "stock");
        let lab_mb = get(&medians(&lab_out, "link.e0.mb"), "stock");
        let read = |f: &str| -> Value {
            serde_json::from_slice(&std::fs::read(keep.join("stock-seed1").join(f)).unwrap())
                .unwrap()
        };
        // The receiving end's connection when the run ended (the kept final status is read
        // later, after the tunnel drained its queues: up to a few hundred kB more).
        let receiver = read("receiver-at-end.json");
        let addrs = if direction == "down" {
            "addrs"
        } else {
            "peer_addrs"
        };
        let stream = receiver[addrs][0]["data_bytes_received"].as_f64().unwrap();
        let ip: f64 = read("emulator.json")
            .as_array()
            .unwrap()
            .iter()
            .map(|l| {
                l[if direction == "down" { "down" } else { "up" }]["bytes_out"]
                    .as_f64()
                    .unwrap()
            })
            .sum();
        eprintln!(
            "client at {client_end}, {direction}: simulator {sim:.2}, lab {lab:.2} Mbit/s, its link {lab_link:.2} (link {want} that way)"
        );
        assert!(
            (0.8 * want..=want).contains(&lab) && (0.8 * want..=want).contains(&sim),
            "client at {client_end}, {direction}: simulator {sim:.2}, lab {lab:.2} Mbit/s on a {want} Mbit/s direction"
        );
        eprintln!(
            "  link.e0.mb {lab_mb:.3}; the receiver's stream bytes {:.3} MB, the emulator's IP bytes {:.3} MB",
            stream / 1e6,
            ip / 1e6
        );
        assert!(
            (lab_mb * 1e6 - stream).abs() <= 0.005 * stream && lab_mb * 1e6 < 0.97 * ip,
            "client at {client_end}, {direction}: link.e0.mb {lab_mb:.3} is not the receiver's stream bytes {:.3} MB (the emulator carried {:.3} MB of IP)",
            stream / 1e6,
            ip / 1e6
        );
        assert!(
            (lab..=1.12 * lab).contains(&lab_link),
            "client at {client_end}, {direction}: the lab's link carried {lab_link:.2} Mbit/s of stream, the application got {lab:.2} (expected 0–12 % more: the inner packets' headers and retransmissions)"
        );
    }
}

/// `--endpoint pm` with `pm.same_subnet = true` on a two-node topology whose links are listed
/// in another order than the interfaces (e1 at 4 Mbit/s first, e0 at 12 Mbit/s second): the
/// server announces its other addresses and listens on all of them, so braid pm opens a
/// subflow within each subnet, and each interface's bytes are reported under its own name.
/// Both links carry at least 80 % of their rate in both worlds.
#[test]
fn same_subnet_subflows_on_kernel_mptcp_fill_each_link_of_a_topology() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !require_root() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("braid-lab-subnet-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _dir = Dir(dir.clone());
    let file = dir.join("subnets.toml");
    std::fs::write(
        &file,
        r#"
name = "subnets"
duration = "8s"
[[node]]
name = "A"
iface = [{ name = "e0", addr = "10.9.0.1/24" }, { name = "e1", addr = "10.9.1.1/24" }]
[[node]]
name = "B"
iface = [{ name = "e0", addr = "10.9.0.2/24" }, { name = "e1", addr = "10.9.1.2/24" }]
[[link]]
name = "x"
a = "B.e1"
b = "A.e1"
rate = "4Mbit"
delay = "5ms"
[[link]]
name = "y"
a = "A.e0"
b = "B.e0"
rate = "12Mbit"
delay = "5ms"
[app]
kind = "bulk"
client = "A"
server = "B"
direction = "down"
[pm]
same_subnet = true
"#,
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let run = [f, "--reps", "1", "--json", "-q"];
    let sim = braid(&[&["sim"][..], &run].concat());
    let lab = braid(&[&["lab"][..], &run, &["--endpoint", "pm"]].concat());
    for (iface, rate) in [("e0", 12.0), ("e1", 4.0)] {
        let key = format!("link.{iface}.throughput_mbps");
        let (s, l) = (
            get(&medians(&sim, &key), "stock"),
            get(&medians(&lab, &key), "stock"),
        );
        eprintln!("{iface} ({rate} Mbit/s): simulator {s:.2}, lab (braid pm) {l:.2} Mbit/s");
        assert!(
            (0.8 * rate..=rate).contains(&s) && (0.8 * rate..=rate).contains(&l),
            "{iface} ({rate} Mbit/s): simulator {s:.2}, lab {l:.2} Mbit/s"
        );
    }
}

/// `--endpoint pm`: kernel MPTCP with `braid pm` managing the client's subflows. E2's backup
/// variant (vlc1 a standby link, vlc2 blocked for good at 10 s), shortened to 14 s: braid pm
/// flags the subflow of the backup link as backup (the connection's first subflow, which the
/// application opens over vlc1, included), so vlc1 carries the upload only after the blockage;
/// the run completes and braid pm reports no failed kernel request.
#[test]
fn braid_pm_endpoint_keeps_the_backup_link_for_the_blockage() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !require_root() {
        return;
    }
    let text = std::fs::read_to_string(root_dir().join("scenarios/e2-blockage.toml")).unwrap();
    let base = &text[..text.find("[[variant]]").expect("variants")];
    let backup = &text[text
        .find("[[variant]]\nname = \"backup\"")
        .expect("backup variant")..];
    let dir = std::env::temp_dir().join(format!("braid-lab-pm-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // Removed when the test ends, a failed assertion included.
    let _dir = Dir(dir.clone());
    let file = dir.join("e2-backup.toml");
    std::fs::write(&file, format!("{base}{backup}")).unwrap();
    let keep = dir.join("keep");
    let out = braid(&[
        "lab",
        file.to_str().unwrap(),
        "--endpoint",
        "pm",
        "--set",
        "duration=14s",
        "--reps",
        "1",
        "--json",
        "-q",
        "--keep",
        keep.to_str().unwrap(),
    ]);
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let m = &v["variants"][0]["metrics"];
    let med = |k: &str| m[k]["median"].as_f64().unwrap_or(f64::NAN);
    let (total, vlc1, outage) = (
        med("throughput_mbps"),
        med("link.vlc1.throughput_mbps"),
        med("outage_ms"),
    );
    let status: Value = serde_json::from_str(
        &std::fs::read_to_string(keep.join("backup-seed1/status-pm.json")).expect("pm status"),
    )
    .unwrap();
    eprintln!(
        "E2 backup through braid pm: throughput {total:.1} Mbit/s, vlc1 {vlc1:.1}, outage {outage:.1} ms; braid pm stats {}",
        status["stats"]
    );
    assert!(
        total > 50.0 && outage.is_finite(),
        "the upload goes on over vlc1 after the blockage: {total:.1} Mbit/s, outage {outage} ms"
    );
    // 3 s warm-up to 14 s: vlc1 idle for 7 s, then carrying everything for 4 s (≈ 0.3 of the
    // bytes); an active vlc1 carries about 0.7 of them.
    assert!(
        vlc1 < 0.5 * total,
        "vlc1 is a backup: it carried {vlc1:.1} of {total:.1} Mbit/s"
    );
    assert!(
        status["stats"]["backup_set"].as_u64() >= Some(1),
        "{status:#}"
    );
    assert_eq!(status["stats"]["kernel_request_errors"], 0, "{status:#}");
}

/// `--endpoint mptcpd`: kernel MPTCP with mptcpd (its packaged `addr_adv` plugin) making the
/// client's subflow endpoints, on E2 (vlc2 blocked for good at 10 s), 14 s: the minrtt variant
/// runs (the others are skipped with a note: redundant is a scheduler the kernel has not, and
/// mptcpd makes no backup), a subflow per interface carries data, the upload goes on.
#[test]
fn mptcpd_endpoint_runs_a_subflow_per_interface() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !require_root() {
        return;
    }
    let out = braid(&[
        "lab",
        root_dir()
            .join("scenarios/e2-blockage.toml")
            .to_str()
            .unwrap(),
        "--endpoint",
        "mptcpd",
        "--set",
        "duration=14s",
        "--reps",
        "1",
        "--json",
        "-q",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let names: Vec<&str> = v["variants"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    assert_eq!(names, ["minrtt"], "{err}");
    assert!(err.contains("so no link is a backup"), "{err}");
    let m = &v["variants"][0]["metrics"];
    let med = |k: &str| m[k]["median"].as_f64().unwrap_or(f64::NAN);
    let (total, vlc1, vlc2, outage) = (
        med("throughput_mbps"),
        med("link.vlc1.throughput_mbps"),
        med("link.vlc2.throughput_mbps"),
        med("outage_ms"),
    );
    eprintln!(
        "E2 minrtt through mptcpd: {total:.1} Mbit/s, vlc1 {vlc1:.1}, vlc2 {vlc2:.1}, outage {outage:.1} ms"
    );
    assert!(
        vlc1 > 1.0 && vlc2 > 1.0,
        "a subflow per interface carries data: vlc1 {vlc1:.1}, vlc2 {vlc2:.1} Mbit/s"
    );
    assert!(total > 20.0, "{total:.1} Mbit/s");
    // The outage ends when data comes again after the blockage (over vlc1).
    assert!(outage.is_finite(), "outage {outage} ms");
}
