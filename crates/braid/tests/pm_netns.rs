//! `braid pm` on the real kernel MPTCP, in network namespaces created by each test: RSS-driven
//! backup flags (MP_PRIO), subflow creation and removal, and the stall at a link failure
//! compared with the in-kernel path manager and mptcpd's sspi plugin.

mod netns;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use netns::*;

const CROSS: &str = r#"
mode = "cross"
[[iface]]
name = "c1"
threshold_dbm = -75.0
alpha = 1.0
[[iface]]
name = "c2"
threshold_dbm = -75.0
alpha = 1.0
"#;

/// The whole life of a subflow under cross-layer control, during one transfer whose bytes are
/// checked at the end: a new address with good signal gets a subflow; weak signal makes it
/// backup (MP_PRIO on the wire: MPTcpExtMPPrioTx rises) and strong signal clears the flag; the
/// interface going down destroys its subflow.
#[test]
fn rss_drives_kernel_subflows() {
    if !require_root() {
        return;
    }
    let t = Topo::new("bpm1", [20, 20], false);
    t.userspace_pm();
    let d = Daemon::braid_pm(&t.client, CROSS);
    d.rssi("c1", -60.0);
    let rx = receiver(&t.server, 5201);
    let stop = Arc::new(AtomicBool::new(false));
    let tx = sender(
        &t.client,
        format!("{SERVER}:5201").parse().unwrap(),
        stop.clone(),
    );
    let s = d.wait("the connection", Duration::from_secs(5), |s| {
        subflows(s).len() == 1
    });
    assert_eq!(subflows(&s), vec![("c1".to_string(), false)]);

    // A new address on c2 with a good signal: a subflow is created on it.
    sh(&t.client, "ip addr add 10.0.2.1/24 dev c2");
    t.route_table(2);
    d.rssi("c2", -60.0);
    d.wait("a subflow on c2", Duration::from_secs(5), |s| {
        subflows(s).contains(&("c2".to_string(), false))
    });

    // c1's signal falls below T: its subflow becomes backup, MP_PRIO is sent.
    let prio0 = nstat(&t.client, "MPTcpExtMPPrioTx");
    d.rssi("c1", -90.0);
    d.wait("c1 backup", Duration::from_secs(5), |s| {
        subflows(s).contains(&("c1".to_string(), true))
    });
    let prio1 = nstat(&t.client, "MPTcpExtMPPrioTx");
    assert!(prio1 > prio0, "MPTcpExtMPPrioTx {prio0} -> {prio1}");
    // The kernel itself reports the flag: `ss -M`-level truth via the subflow's TCP info is
    // not exposed, but the peer's SUB_PRIORITY is; and c2 now carries the data.
    std::thread::sleep(Duration::from_millis(300));
    let (a1, a2) = (tx_bytes(&t.client, "c1"), tx_bytes(&t.client, "c2"));
    std::thread::sleep(Duration::from_secs(1));
    let (b1, b2) = (tx_bytes(&t.client, "c1"), tx_bytes(&t.client, "c2"));
    let (d1, d2) = (b1 - a1, b2 - a2);
    assert!(
        d2 > 10 * d1.max(1) / 2 && d2 > 1_000_000,
        "after the backup flag, c2 should carry the data: c1 {d1} B, c2 {d2} B in 1 s"
    );

    // Strong signal again: the flag is cleared.
    d.rssi("c1", -55.0);
    d.wait("c1 active again", Duration::from_secs(5), |s| {
        subflows(s).contains(&("c1".to_string(), false))
    });
    let prio2 = nstat(&t.client, "MPTcpExtMPPrioTx");
    assert!(prio2 > prio1, "MPTcpExtMPPrioTx {prio1} -> {prio2}");

    // c1 goes down: its subflow is destroyed, c2 goes on.
    sh(&t.client, "ip link set c1 down");
    let s = d.wait("c1's subflow gone", Duration::from_secs(5), |s| {
        subflows(s).iter().all(|(i, _)| i != "c1")
    });
    assert_eq!(subflows(&s), vec![("c2".to_string(), false)]);
    std::thread::sleep(Duration::from_millis(500));

    stop.store(true, Ordering::Relaxed);
    let sent = tx.join().expect("sender");
    let got = rx.join().expect("receiver");
    assert!(sent.bytes > 5_000_000, "sent {} bytes", sent.bytes);
    assert_eq!(got.bytes, sent.bytes);
    assert_eq!(got.sha256, sent.sha256, "the file arrived intact");
    let st = d.status();
    assert_eq!(st["stats"]["kernel_request_errors"], 0, "{st:#}");
}

/// Bad signal lines and samples for unknown interfaces are counted; the daemon keeps running.
#[test]
fn bad_signal_input_is_counted_and_skipped() {
    if !require_root() {
        return;
    }
    let t = Topo::new("bpm2", [20, 20], true);
    t.userspace_pm();
    let d = Daemon::braid_pm(&t.client, CROSS);
    d.raw_signal("not json");
    d.raw_signal("{\"iface\":\"c1\",\"rssi_dbm\":12345}");
    d.raw_signal("{\"iface\":\"c1\"}");
    d.rssi("nosuch0", -60.0);
    d.rssi("c1", -61.0);
    let s = d.wait("the samples", Duration::from_secs(5), |s| {
        s["signal"]["bad_lines"] == 3 && s["signal"]["unknown_iface"] == 1
    });
    let c1 = s["ifaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "c1")
        .unwrap();
    assert_eq!(c1["rssi_dbm"], -61.0);
    assert_eq!(c1["samples"], 1);
    // The table form names the interfaces and counters.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_braid"))
        .args(["pm", "status", "--control"])
        .arg(&d.control)
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("c1") && table.contains("3 bad lines"),
        "{table}"
    );
}

/// A kernel whose userspace path manager is off: braid pm refuses to start and says why.
#[test]
fn refuses_without_the_userspace_path_manager() {
    if !require_root() {
        return;
    }
    let ns = braid_mptcp::netns::NetNs::new("bpm3").unwrap();
    sh(&ns, "sysctl -qw net.mptcp.path_manager=kernel");
    let out = ns
        .output(&[env!("CARGO_BIN_EXE_braid"), "pm", "--check"])
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("sysctl -w net.mptcp.path_manager=userspace"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    sh(&ns, "sysctl -qw net.mptcp.path_manager=userspace");
    let out = ns
        .output(&[env!("CARGO_BIN_EXE_braid"), "pm", "--check"])
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One transfer through a link that fails after `before_failure`; returns the longest stall
/// from 0.5 s before the failure to 3 s after, and whether every byte arrived intact.
fn stall_at_failure(t: &Topo, before_failure: impl FnOnce()) -> (Duration, bool) {
    let rx = receiver(&t.server, 5201);
    let stop = Arc::new(AtomicBool::new(false));
    let tx = sender(
        &t.client,
        format!("{SERVER}:5201").parse().unwrap(),
        stop.clone(),
    );
    std::thread::sleep(Duration::from_millis(1500));
    before_failure();
    let failed_at = std::time::Instant::now();
    sh(&t.client, "ip link set c1 down");
    std::thread::sleep(Duration::from_secs(4));
    stop.store(true, Ordering::Relaxed);
    let sent = tx.join().expect("sender");
    let got = rx.join().expect("receiver");
    let fail = failed_at - got.start;
    let gap = got.max_gap(
        fail.saturating_sub(Duration::from_millis(500)),
        fail + Duration::from_secs(3),
    );
    if std::env::var_os("BRAID_TEST_TRACE").is_some() {
        let mut bins = std::collections::BTreeMap::new();
        for &(t, n) in &got.reads {
            *bins.entry(t.as_millis() / 100).or_insert(0usize) += n;
        }
        eprintln!("failure at {:?}; bytes per 100 ms: {bins:?}", fail);
    }
    let intact = !sent.aborted && got.sha256 == sent.sha256 && got.bytes == sent.bytes;
    (gap, intact)
}

/// The number of MPTCP subflows (TCP sockets with the mptcp ULP) in the client namespace.
fn subflow_count(t: &Topo) -> usize {
    let out = t.client.output(&["ss", "-tni"]).unwrap();
    String::from_utf8_lossy(&out.stdout)
        .matches("tcp-ulp-mptcp")
        .count()
}

/// The longest stall the application sees when the link carrying its data fails: braid pm
/// with the signal falling before the failure, the kernel's in-kernel path manager, and
/// mptcpd's sspi plugin, on the same topology. Each has a second subflow on c2 before c1
/// fails.
#[test]
fn link_failure_stall_braid_pm_vs_kernel_vs_mptcpd() {
    if !require_root() {
        return;
    }
    // braid pm, cross-layer: the signal of c1 fades 1 s before the link fails.
    let t = Topo::new("bpm4a", [20, 20], true);
    t.userspace_pm();
    let d = Daemon::braid_pm(&t.client, CROSS);
    d.rssi("c1", -60.0);
    d.rssi("c2", -60.0);
    let mut braid_subflows = 0;
    let (braid_gap, ok) = stall_at_failure(&t, || {
        braid_subflows = subflow_count(&t);
        d.rssi("c1", -90.0);
        std::thread::sleep(Duration::from_secs(1));
    });
    assert_eq!(
        braid_subflows, 2,
        "braid pm: two subflows before the failure"
    );
    assert!(ok, "braid pm: the file arrived intact");
    drop(d);
    drop(t);

    // The in-kernel path manager with a subflow endpoint on c2.
    let t = Topo::new("bpm4b", [20, 20], true);
    sh(&t.client, "sysctl -qw net.mptcp.path_manager=kernel");
    sh(
        &t.client,
        "ip mptcp limits set subflows 8 add_addr_accepted 8",
    );
    sh(&t.client, "ip mptcp endpoint add 10.0.2.1 dev c2 subflow");
    let mut kernel_subflows = 0;
    let (kernel_gap, kernel_ok) = stall_at_failure(&t, || {
        kernel_subflows = subflow_count(&t);
    });
    assert_eq!(
        kernel_subflows, 2,
        "in-kernel PM: two subflows before the failure"
    );
    drop(t);

    // mptcpd with its sspi plugin (one subflow per interface). sspi opens a subflow when an
    // address appears on an interface the connection does not use yet, so c2 is addressed
    // once the connection runs.
    let t = Topo::new("bpm4c", [20, 20], false);
    t.userspace_pm();
    let mut mptcpd = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            &t.client.name,
            "/usr/libexec/mptcpd",
            "--plugin-dir=/usr/lib/x86_64-linux-gnu/mptcpd",
            "--path-manager=sspi",
            "--log=stderr",
        ])
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("mptcpd (Debian package mptcpd) must be installed: scripts/deps");
    std::thread::sleep(Duration::from_millis(500));
    let mut mptcpd_subflows = 0;
    let (mptcpd_gap, mptcpd_ok) = stall_at_failure(&t, || {
        sh(&t.client, "ip addr add 10.0.2.1/24 dev c2");
        t.route_table(2);
        std::thread::sleep(Duration::from_secs(1));
        mptcpd_subflows = subflow_count(&t);
    });
    let _ = mptcpd.kill();
    let _ = mptcpd.wait();
    drop(t);

    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    eprintln!(
        "longest stall at the link failure: braid pm (cross-layer) {:.1} ms; in-kernel PM {:.1} ms \
         (intact: {kernel_ok}); mptcpd sspi {:.1} ms (subflows before failure: {mptcpd_subflows}, \
         intact: {mptcpd_ok})",
        ms(braid_gap),
        ms(kernel_gap),
        ms(mptcpd_gap),
    );
    // What holds on this kernel (README "braid pm"): braid pm's stall is bounded by the
    // kernel's rewind of the whole MPTCP-level retransmission queue when a subflow is
    // destroyed, the in-kernel PM's by the dead subflow's RTO; sspi opens no second subflow
    // for a connection that exists before the address (mptcpd 0.12), so it never fails over.
    assert!(kernel_ok, "in-kernel PM: the file arrived intact");
    assert!(
        braid_gap < Duration::from_secs(1),
        "braid pm: stall {braid_gap:?} (the backup flag moved the data off c1 1 s before)"
    );
    assert!(
        braid_gap < mptcpd_gap,
        "braid pm {braid_gap:?} vs mptcpd sspi {mptcpd_gap:?}"
    );
}
