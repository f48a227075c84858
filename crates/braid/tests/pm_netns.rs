//! `braid pm` on the real kernel MPTCP, in network namespaces created by each test: RSS-driven
//! backup flags (MP_PRIO), subflow creation and removal, and the stall at a link failure
//! compared with the in-kernel path manager and mptcpd's sspi plugin. E7 and E9 from their
//! scenario files through `braid lab` are in `pm_lab_netns.rs` (they time the link emulator's
//! packets, so they do not run beside other tests).

mod netns;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use braid_mptcp::netns::NetNs;
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

const CROSS_BACKUP: &str = r#"
mode = "cross-backup"
[[iface]]
name = "c1"
threshold_dbm = -75.0
alpha = 1.0
[[iface]]
name = "c2"
backup = true
"#;

/// A transfer from the client to the server's port 5201 under way, for the tests that drive
/// braid pm while it runs. Dropped without [`Transfer::finish`] (a failed assertion), it stops
/// the sender, so no thread goes on writing.
struct Transfer {
    stop: Arc<AtomicBool>,
    ends: Option<(
        std::thread::JoinHandle<Sent>,
        std::thread::JoinHandle<Received>,
    )>,
}

impl Transfer {
    fn start(t: &Topo, opts: SendOpts) -> Transfer {
        let rx = receiver(&t.server, 5201);
        let stop = Arc::new(AtomicBool::new(false));
        let tx = sender_with(
            &t.client,
            format!("{SERVER}:5201").parse().unwrap(),
            stop.clone(),
            opts,
        );
        Transfer {
            stop,
            ends: Some((tx, rx)),
        }
    }

    /// Stops the sender and checks that every byte arrived, in order.
    fn finish(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let (tx, rx) = self.ends.take().expect("finished once");
        let sent = tx.join().expect("sender");
        let got = rx.join().expect("receiver");
        assert_eq!(got.bytes, sent.bytes);
        assert_eq!(got.sha256, sent.sha256, "the stream arrived intact");
    }
}

impl Drop for Transfer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// braid pm on a fresh client — router — server topology with `config`, c1's signal good.
fn braid_pm_on(prefix: &str, rate_mbit: [u32; 2], config: &str) -> (Topo, Daemon) {
    let t = Topo::new(prefix, rate_mbit, true);
    t.userspace_pm();
    let d = Daemon::braid_pm(&t.client, config);
    d.rssi("c1", -60.0);
    (t, d)
}

/// The whole life of a subflow under cross-layer control, during one transfer whose bytes are
/// checked at the end: a new address with good signal gets a subflow; weak signal makes it
/// backup (MP_PRIO on the wire: MPTcpExtMPPrioTx rises) and strong signal clears the flag; the
/// interface going down destroys its subflow.
#[test]
fn rss_drives_kernel_subflows() {
    let Some(_alone) = timing_test() else {
        return;
    };
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

/// The backup flag reaches the peer in one MP_PRIO, on one pure ACK of the subflow it
/// concerns, which the kernel never re-sends; on a fading link that ACK may be lost, and the
/// peer then goes on sending on the demoted subflow. A download (the server sends 8 Mbit/s)
/// over c1 and c2: c1's signal falls below T while everything the client sends on c1 is
/// dropped, so its MP_PRIO is lost (the drop rule's counter and `MPTcpExtMPPrioTx` show it);
/// then c1 carries again. Without `resend_prio` the server goes on using c1 (the loss sticks);
/// with it (the default) braid pm sees c1 still receiving, sends MP_PRIO again, and c2
/// carries the stream. The same for clearing the flag: c1 backup (heard), then its signal
/// recovers while c1's packets are dropped; without the repeat the server leaves c1 unused,
/// with it c1 carries the stream again (the kernel's scheduler picks the first subflow when
/// both are idle). Asserted, in the same test: in the second after the drop the link the
/// lost flag pointed away from carries over half the stream without the repeat, and under a
/// tenth of the other with it; every stream intact.
#[test]
fn a_lost_mp_prio_is_sent_again_while_the_subflow_still_receives() {
    let Some(_alone) = timing_test() else {
        return;
    };
    let mut lines = Vec::new();
    for (i, clear) in [false, true].into_iter().enumerate() {
        let [off, on] = [false, true]
            .map(|resend| lost_prio(&format!("bpp{i}{}", u8::from(resend)), resend, clear));
        let what = if clear { "cleared" } else { "set" };
        lines.push(format!(
            "backup flag {what}: without resend_prio {off:?}, with {on:?}"
        ));
        // (bytes on the link the stream should leave, bytes on the one it should take).
        let split = |(c1, c2, _): (u64, u64, Option<u64>)| if clear { (c2, c1) } else { (c1, c2) };
        let ((off_from, off_to), (on_from, on_to)) = (split(off), split(on));
        assert_eq!(off.2, Some(0), "{lines:?}");
        assert!(
            off_from > off_to,
            "without resend_prio the lost MP_PRIO ({what}) sticks: {lines:?}"
        );
        assert!(
            on.2 >= Some(1) && on_to > 10 * on_from.max(1) && on_to > 500_000,
            "with resend_prio the repeat ({what}) moves the stream: {lines:?}"
        );
    }
    eprintln!(
        "bytes received on (c1, c2) one second after a lost MP_PRIO, MP_PRIO repeats: {lines:?}"
    );
}

/// One run of [`a_lost_mp_prio_is_sent_again_while_the_subflow_still_receives`]: the flag on
/// c1 set (or, with `clear`, set and heard, then cleared) while c1's packets are dropped;
/// (bytes c1 and c2 received in the second after the next, MP_PRIO repeats).
fn lost_prio(prefix: &str, resend: bool, clear: bool) -> (u64, u64, Option<u64>) {
    let t = Topo::new(prefix, [20, 20], true);
    t.userspace_pm();
    let d = Daemon::braid_pm(
        &t.client,
        &format!("{CROSS}\n[kernel]\nresend_prio = {resend}\n"),
    );
    d.rssi("c1", -60.0);
    d.rssi("c2", -60.0);
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = download(
        &t,
        5202,
        stop.clone(),
        SendOpts {
            cbr: Some((8e6, 1200)),
            ..SendOpts::default()
        },
    );
    d.wait("subflows on c1 and c2", Duration::from_secs(5), |s| {
        let f = subflows(s);
        f.contains(&("c1".into(), false)) && f.contains(&("c2".into(), false))
    });
    std::thread::sleep(Duration::from_secs(1));
    let backup = |b: bool| {
        d.rssi("c1", if b { -90.0 } else { -55.0 });
        d.wait("c1's flag", Duration::from_secs(5), |s| {
            subflows(s).contains(&("c1".into(), b))
        });
    };
    if clear {
        backup(true);
        std::thread::sleep(Duration::from_secs(1));
    }
    let drop_rule = "OUTPUT -o c1 -j DROP";
    t.client
        .iptables(&[&format!("-A {drop_rule}")])
        .unwrap_or_else(|e| panic!("{e}"));
    let prio0 = nstat(&t.client, "MPTcpExtMPPrioTx");
    backup(!clear);
    let prio1 = nstat(&t.client, "MPTcpExtMPPrioTx");
    std::thread::sleep(Duration::from_millis(50));
    let dropped = iptables_packets(&t.client, "OUTPUT");
    t.client
        .iptables(&[&format!("-D {drop_rule}")])
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        prio1 > prio0 && dropped > 0,
        "the MP_PRIO went out while c1 dropped: MPTcpExtMPPrioTx {prio0} -> {prio1}, {dropped} packets dropped"
    );
    // What each link carries one second after the drop, for one second.
    std::thread::sleep(Duration::from_secs(1));
    let (a1, a2) = (rx_bytes(&t.client, "c1"), rx_bytes(&t.client, "c2"));
    std::thread::sleep(Duration::from_secs(1));
    let (b1, b2) = (rx_bytes(&t.client, "c1"), rx_bytes(&t.client, "c2"));
    let st = d.status();
    stop.store(true, Ordering::Relaxed);
    let sent = tx.join().expect("sender");
    let got = rx.join().expect("receiver");
    assert!(
        !sent.aborted && got.bytes == sent.bytes && got.sha256 == sent.sha256,
        "the download arrived intact ({prefix})"
    );
    assert_eq!(st["stats"]["kernel_request_errors"], 0, "{st:#}");
    (b1 - a1, b2 - a2, st["stats"]["prio_resent"].as_u64())
}

/// Packets a chain of the namespace's filter table dropped (`iptables -vxn`).
fn iptables_packets(ns: &NetNs, chain: &str) -> u64 {
    let out = ns
        .output(&["iptables", "-L", chain, "-v", "-x", "-n"])
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("DROP"))
        .filter_map(|l| l.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// The capacity-aware cross-layer mode on the kernel: a 4 Mbit/s stream over c1 (20 Mbit/s)
/// and c2 (2 Mbit/s). While c1's signal is weak (Algorithm 1: nothing known yet) c2 carries the
/// stream alone and delivers 2 Mbit/s — braid pm reads that from sock_diag; c1 recovers and
/// carries it. When c1's signal falls below T again, braid pm keeps c1 active (c2 has shown it
/// cannot carry the demand) until the signal is 2 dB below T, then flags it backup. The
/// stream is intact.
#[test]
fn capacity_aware_cross_keeps_a_link_the_other_cannot_replace() {
    let Some(_alone) = timing_test() else {
        return;
    };
    let (t, d) = braid_pm_on(
        "bpc",
        [20, 2],
        r#"
mode = "cross-cap"
[[iface]]
name = "c1"
threshold_dbm = -75.0
alpha = 1.0
[[iface]]
name = "c2"
"#,
    );
    let transfer = Transfer::start(
        &t,
        SendOpts {
            cbr: Some((4e6, 1200)),
            ..SendOpts::default()
        },
    );
    d.wait("two subflows", Duration::from_secs(5), |s| {
        subflows(s).len() == 2
    });
    std::thread::sleep(Duration::from_secs(1));
    // c2 alone, 4 s: it delivers what its 2 Mbit/s allow.
    d.rssi("c1", -90.0);
    d.wait("c1 backup", Duration::from_secs(5), |s| {
        subflows(s).contains(&("c1".to_string(), true))
    });
    std::thread::sleep(Duration::from_secs(4));
    // c1 carries the stream again (and the backlog), 8 s.
    d.rssi("c1", -60.0);
    d.wait("c1 active", Duration::from_secs(5), |s| {
        subflows(s).contains(&("c1".to_string(), false))
    });
    std::thread::sleep(Duration::from_secs(8));
    let st = d.status();
    let c2 = st["ifaces"]
        .as_array()
        .and_then(|a| a.iter().find(|i| i["name"] == "c2"))
        .cloned()
        .unwrap_or_default();
    let (demand, carried) = (
        st["demand_bps"].as_f64().unwrap_or(0.0),
        c2["carried_bps"].as_f64().unwrap_or(0.0),
    );
    eprintln!(
        "demand {demand:.0} bit/s, c2 carried {carried:.0} bit/s alone; subflows closed for a \
         resend: {}; decisions: {}",
        st["stats"]["reinjects"], st["decisions"]
    );
    assert!(
        (3.0e6..6.0e6).contains(&demand),
        "demand {demand} (the stream is 4 Mbit/s)"
    );
    assert!(
        (1.0e6..2.5e6).contains(&carried),
        "c2 carried {carried} alone (2 Mbit/s link)"
    );
    // Below T, above the floor: c1 stays active.
    d.rssi("c1", -76.0);
    std::thread::sleep(Duration::from_secs(2));
    let st = d.status();
    assert!(
        subflows(&st).contains(&("c1".to_string(), false)),
        "c1 kept active: {st:#}"
    );
    assert!(
        st["stats"]["demotions_withheld"].as_u64() > Some(0),
        "{st:#}"
    );
    // Below the floor (T − 2 dB): demoted.
    d.rssi("c1", -78.0);
    d.wait("c1 backup below the floor", Duration::from_secs(5), |s| {
        subflows(s).contains(&("c1".to_string(), true))
    });
    d.rssi("c1", -60.0);
    std::thread::sleep(Duration::from_secs(1));
    transfer.finish();
    let st = d.status();
    assert_eq!(st["stats"]["kernel_request_errors"], 0, "{st:#}");
    assert!(st["stats"]["traffic_samples"].as_u64() > Some(40), "{st:#}");
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
    // Every line sent has been read once the good sample (the last) is in: the counters are
    // only final then (waiting on the counters alone raced with that sample).
    let c1 = |s: &serde_json::Value| {
        s["ifaces"]
            .as_array()
            .and_then(|a| a.iter().find(|i| i["name"] == "c1"))
            .cloned()
            .unwrap_or_default()
    };
    let s = d.wait("the samples", Duration::from_secs(5), |s| {
        c1(s)["samples"] == 1
    });
    assert_eq!(s["signal"]["bad_lines"], 3, "{s:#}");
    assert_eq!(s["signal"]["unknown_iface"], 1, "{s:#}");
    assert_eq!(c1(&s)["rssi_dbm"], -61.0);
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

/// What the application saw around a link failure.
#[derive(Debug, Clone)]
struct Outcome {
    /// Longest interval without data, from 0.5 s before the link went silent to 3 s after
    /// its interface went down.
    gap: Duration,
    /// Every byte arrived, in order, and the sender was never stuck.
    intact: bool,
    /// What the two ends counted, for a failure's message.
    detail: String,
}

/// One transfer over c1 and c2 in which c1 fails: `before_failure` runs 1.5 s into the
/// transfer, then c1 drops everything for `silent` (the radio is gone, nobody has said so
/// yet), then its interface goes down.
fn failure(t: &Topo, opts: SendOpts, silent: Duration, before_failure: impl FnOnce()) -> Outcome {
    let rx = receiver(&t.server, 5201);
    let stop = Arc::new(AtomicBool::new(false));
    let tx = sender_with(
        &t.client,
        format!("{SERVER}:5201").parse().unwrap(),
        stop.clone(),
        opts,
    );
    std::thread::sleep(Duration::from_millis(1500));
    before_failure();
    let silent_at = std::time::Instant::now();
    if !silent.is_zero() {
        silence(&t.client, "-A");
        std::thread::sleep(silent);
    }
    let down_at = std::time::Instant::now();
    sh(&t.client, "ip link set c1 down");
    std::thread::sleep(Duration::from_secs(4));
    stop.store(true, Ordering::Relaxed);
    let sent = tx.join().expect("sender");
    let got = rx.join().expect("receiver");
    let (from, to) = (
        silent_at.saturating_duration_since(got.start),
        down_at.saturating_duration_since(got.start),
    );
    let gap = got.max_gap(
        from.saturating_sub(Duration::from_millis(500)),
        to + Duration::from_secs(3),
    );
    if std::env::var_os("BRAID_TEST_TRACE").is_some() {
        let mut bins = std::collections::BTreeMap::new();
        for &(t, n) in &got.reads {
            *bins.entry(t.as_millis() / 100).or_insert(0usize) += n;
        }
        eprintln!("silent at {from:?}, down at {to:?}; bytes per 100 ms: {bins:?}");
    }
    let last = got.reads.last().map_or(Duration::ZERO, |r| r.0);
    let detail = format!(
        "sent {} bytes{}, received {} (last read {:.2} s after the first, link down at {:.2} s, \
         longest silence over the run {:?})",
        sent.bytes,
        if sent.aborted {
            ", then a write blocked for 8 s"
        } else {
            ""
        },
        got.bytes,
        last.as_secs_f64(),
        to.as_secs_f64(),
        got.max_gap(Duration::ZERO, last),
    );
    Outcome {
        gap,
        intact: !sent.aborted && got.sha256 == sent.sha256 && got.bytes == sent.bytes,
        detail,
    }
}

/// Makes link c1 of the client silent both ways (`op` "-A") or carry again ("-D"), in one
/// transaction, as a radio that stops carrying data before the link layer declares it lost.
fn silence(client: &NetNs, op: &str) {
    let out = format!("{op} OUTPUT -o c1 -j DROP");
    let inbound = format!("{op} INPUT -i c1 -j DROP");
    client
        .iptables(&[&out, &inbound])
        .unwrap_or_else(|e| panic!("{e}"));
}

/// The number of MPTCP subflows (TCP sockets with the mptcp ULP) in the client namespace.
fn subflow_count(t: &Topo) -> usize {
    let out = t.client.output(&["ss", "-tni"]).unwrap();
    String::from_utf8_lossy(&out.stdout)
        .matches("tcp-ulp-mptcp")
        .count()
}

/// [`failure`] with braid pm (cross-layer): with `warned`, c1's signal falls below T 1 s
/// before the link goes silent (seed 000's case: the radio fades before it breaks).
fn braid_pm_failure(
    prefix: &str,
    rate_mbit: [u32; 2],
    opts: SendOpts,
    silent: Duration,
    warned: bool,
) -> (Outcome, Drained) {
    let t = Topo::new(prefix, rate_mbit, true);
    t.userspace_pm();
    let d = Daemon::braid_pm(&t.client, CROSS);
    d.rssi("c1", -60.0);
    d.rssi("c2", -60.0);
    let mut subflows = 0;
    let o = failure(&t, opts, silent, || {
        subflows = subflow_count(&t);
        if warned {
            d.rssi("c1", -90.0);
            std::thread::sleep(Duration::from_secs(1));
        }
    });
    assert_eq!(subflows, 2, "braid pm: two subflows before the failure");
    let st = d.status();
    assert_eq!(st["stats"]["kernel_request_errors"], 0, "{st:#}");
    let n = |k: &str| {
        st["stats"][k]
            .as_u64()
            .unwrap_or_else(|| panic!("{k}: {st:#}"))
    };
    let drained = Drained {
        after_drain: n("drain_destroyed"),
        lost: n("drain_destroyed_lost"),
        max_unacked: n("drain_max_unacked_at_destroy"),
    };
    (o, drained)
}

/// How braid pm took c1's subflow out (its `status` counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Drained {
    /// Destroyed once the connection had drained.
    after_drain: u64,
    /// Destroyed at once: the link was gone with data on the subflow.
    lost: u64,
    /// The most bytes not DATA_ACKed at a drained destroy (what the kernel re-sent).
    max_unacked: u64,
}

/// [`failure`] with the in-kernel path manager (a subflow endpoint on c2). The comparison
/// needs its second subflow: three times in a few dozen runs of this file (twice in CI beside
/// the quiet tests, once locally) the client had one subflow when c1 failed, the second time
/// with both ends counting the join complete (cause not found yet). Such
/// a run measures a path manager with nothing to fail over to, not the in-kernel one's
/// failover: it is said, with every MPTCP counter that moved and the client's sockets, and
/// measured once more; a second such run fails the test.
fn kernel_pm_failure(
    prefix: &str,
    rate_mbit: [u32; 2],
    opts: SendOpts,
    silent: Duration,
) -> Outcome {
    match kernel_pm_attempt(prefix, rate_mbit, opts, silent) {
        Ok(o) => o,
        Err(first) => {
            eprintln!(
                "{prefix}: the in-kernel PM had one subflow when c1 failed; measured again. \
                 {first}"
            );
            let again = format!("{prefix}a");
            kernel_pm_attempt(&again, rate_mbit, opts, silent).unwrap_or_else(|second| {
                panic!("in-kernel PM: one subflow before the failure, twice: {first}\n{second}")
            })
        }
    }
}

fn kernel_pm_attempt(
    prefix: &str,
    rate_mbit: [u32; 2],
    opts: SendOpts,
    silent: Duration,
) -> Result<Outcome, String> {
    let t = Topo::new(prefix, rate_mbit, true);
    sh(&t.client, "sysctl -qw net.mptcp.path_manager=kernel");
    sh(
        &t.client,
        "ip mptcp limits set subflows 8 add_addr_accepted 8",
    );
    sh(&t.client, "ip mptcp endpoint add 10.0.2.1 dev c2 subflow");
    let mut subflows = 0;
    let mut joins = String::new();
    let o = failure(&t, opts, silent, || {
        // The join is usually up long before; on a loaded machine it may take a retransmitted
        // SYN (1 s): the failure waits for it, up to 5 s.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            subflows = subflow_count(&t);
            if subflows >= 2 || std::time::Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if subflows < 2 {
            // What became of the join, for the failure's message: every MPTCP counter that
            // moved on either side, and the client's sockets.
            let moved = |ns: &braid_mptcp::netns::NetNs| {
                let out = ns.exec(&["nstat", "-az"]).unwrap();
                String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .filter(|l| l.starts_with("MPTcpExt"))
                    .filter_map(|l| {
                        let mut f = l.split_whitespace();
                        let (name, v) = (f.next()?, f.next()?);
                        (v != "0").then(|| format!("{name} {v}"))
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let ss = t.client.output(&["ss", "-tnie"]).unwrap();
            joins = format!(
                "client: {}; server: {}; client sockets:\n{}",
                moved(&t.client),
                moved(&t.server),
                String::from_utf8_lossy(&ss.stdout)
            );
        }
    });
    if subflows != 2 {
        return Err(format!("{subflows} subflows before the failure ({joins})"));
    }
    Ok(o)
}

fn median(v: &[Duration]) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    v[v.len() / 2]
}

fn ms_list(v: &[Duration]) -> String {
    v.iter()
        .map(|d| format!("{:.1}", d.as_secs_f64() * 1e3))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The tests of this file that time a transfer run one at a time (the test harness runs
/// tests in parallel): a concurrent transfer would share the cores with the measured one.
static TIMING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// For a timing test: `None` when namespace tests are skipped ([`require_root`]), else the
/// guard that keeps the other timing tests waiting.
fn timing_test() -> Option<std::sync::MutexGuard<'static, ()>> {
    if !require_root() {
        return None;
    }
    Some(TIMING.lock().unwrap_or_else(|e| e.into_inner()))
}

const REPS: usize = 3;
/// The bulk case: its two path managers are closer, five runs each.
const BULK_REPS: usize = 5;

/// Seed 000's case (SPEC E7) on the kernel: a 4 Mbit/s CBR stream over two 15 Mbit/s links;
/// c1's signal fades (braid pm only: the in-kernel path manager has no signal input), 1 s
/// later c1 drops everything for 1 s, then its interface goes down. braid pm moves the
/// stream off c1 (MP_PRIO backup) before it is silent and destroys c1's subflow once nothing
/// is left to re-send; the in-kernel path manager keeps sending on c1 until its
/// retransmissions time out. Asserted per run: braid pm ≤ 100 ms and ≥ 5× below the
/// in-kernel PM, both streams intact.
#[test]
fn e7_shape_cbr_over_a_silent_link_braid_pm_vs_in_kernel_pm() {
    let Some(_alone) = timing_test() else {
        return;
    };
    let cbr = SendOpts {
        cbr: Some((4e6, 1200)),
        ..SendOpts::default()
    };
    let silent = Duration::from_secs(1);
    let (mut braid, mut kernel) = (Vec::new(), Vec::new());
    for rep in 0..REPS {
        let (b, drained) = braid_pm_failure(&format!("bpa{rep}"), [15, 15], cbr, silent, true);
        let k = kernel_pm_failure(&format!("bpk{rep}"), [15, 15], cbr, silent);
        assert!(
            b.intact,
            "rep {rep}: braid pm: the stream did not arrive intact: {}",
            b.detail
        );
        assert!(
            k.intact,
            "rep {rep}: in-kernel PM: the stream did not arrive intact: {}",
            k.detail
        );
        // c1's subflow, backup since the fade, carried nothing when its link went: it was
        // destroyed as drained, with at most the default bound not acknowledged.
        assert_eq!(
            (drained.after_drain, drained.lost),
            (1, 0),
            "rep {rep}: {drained:?}"
        );
        assert!(drained.max_unacked <= 32 * 1024, "rep {rep}: {drained:?}");
        braid.push(b.gap);
        kernel.push(k.gap);
    }
    eprintln!(
        "E7 shape, longest gap (ms): braid pm {}; in-kernel PM {}",
        ms_list(&braid),
        ms_list(&kernel)
    );
    for (rep, (b, k)) in braid.iter().zip(&kernel).enumerate() {
        assert!(
            *b <= Duration::from_millis(100),
            "rep {rep}: braid pm's longest gap {b:?} (bound 100 ms)"
        );
        assert!(
            *k >= *b * 5,
            "rep {rep}: braid pm {b:?} is not 5× below the in-kernel PM's {k:?}"
        );
    }
}

/// Seed 000's backup mode (SPEC E8) on the kernel: c1 the primary (signal threshold), c2 the
/// backup, a 4 Mbit/s CBR stream over two 15 Mbit/s links. c1's signal fades, 1 s later c1
/// drops everything for 1 s, then goes down. braid pm (`cross-backup`) has c2's standby subflow
/// ready, clears its backup flag and flags c1 backup at the fade: the handover is complete
/// before the link breaks (longest gap ≤ 100 ms, both repetitions). The in-kernel path manager
/// with c2 as a backup endpoint, measured in the same test, waits for c1's retransmission
/// timeouts (≥ 5× longer).
#[test]
fn e8_shape_backup_mode_hands_over_before_the_link_breaks() {
    let Some(_alone) = timing_test() else {
        return;
    };
    let cbr = SendOpts {
        cbr: Some((4e6, 1200)),
        ..SendOpts::default()
    };
    let silent = Duration::from_secs(1);
    let mut braid = Vec::new();
    for rep in 0..2 {
        let (t, d) = braid_pm_on(&format!("bpb{rep}"), [15, 15], CROSS_BACKUP);
        let mut before = Vec::new();
        let mut st0 = serde_json::Value::Null;
        let o = failure(&t, cbr, silent, || {
            st0 = d.status();
            before = subflows(&st0);
            d.rssi("c1", -90.0);
            std::thread::sleep(Duration::from_secs(1));
        });
        before.sort();
        assert_eq!(
            before,
            vec![("c1".to_string(), false), ("c2".to_string(), true)],
            "rep {rep}: c1 active, c2's standby subflow ready: {st0:#}"
        );
        assert!(
            o.intact,
            "rep {rep}: the stream did not arrive intact: {}",
            o.detail
        );
        let st = d.status();
        assert_eq!(st["stats"]["kernel_request_errors"], 0, "{st:#}");
        braid.push(o.gap);
    }
    let t = Topo::new("bpbk", [15, 15], true);
    sh(&t.client, "sysctl -qw net.mptcp.path_manager=kernel");
    sh(
        &t.client,
        "ip mptcp limits set subflows 8 add_addr_accepted 8",
    );
    sh(
        &t.client,
        "ip mptcp endpoint add 10.0.2.1 dev c2 subflow backup",
    );
    let k = failure(&t, cbr, silent, || {});
    assert!(
        k.intact,
        "in-kernel PM: the stream did not arrive intact: {}",
        k.detail
    );
    eprintln!(
        "E8 shape, longest gap (ms): braid pm {}; in-kernel PM (backup endpoint) {}",
        ms_list(&braid),
        ms_list(&[k.gap])
    );
    for (rep, b) in braid.iter().enumerate() {
        assert!(
            *b <= Duration::from_millis(100),
            "rep {rep}: braid pm's longest gap {b:?} (bound 100 ms)"
        );
        assert!(
            k.gap >= *b * 5,
            "rep {rep}: braid pm {b:?} is not 5× below the in-kernel PM's {:?}",
            k.gap
        );
    }
}

/// Seed 000's recovery (SPEC E9) on the kernel: c1 leaves coverage (its signal falls below T,
/// braid pm flags it backup; then it drops everything for 3 s) and comes back (the drop ends;
/// at once, or 0.3 s later, its signal rises above T + h). From that signal sample to the
/// first data c1 sends (its transmit counter rising by 3 full segments) takes ≤ 150 ms, three
/// times in one bulk transfer, which arrives intact. c1's socket often holds data on a timer
/// backed off during the silence (200–290 ms more to wait, measured without the fix): braid pm
/// replaces such a subflow instead of waiting for it (README "braid pm", `pm/revive.rs`).
#[test]
fn e9_shape_the_returning_link_carries_data_within_150_ms() {
    let Some(_alone) = timing_test() else {
        return;
    };
    let (t, d) = braid_pm_on(
        "bpe9",
        [15, 15],
        r#"
mode = "cross"
[[iface]]
name = "c1"
threshold_dbm = -75.0
alpha = 1.0
hysteresis_db = 2.0
[[iface]]
name = "c2"
"#,
    );
    let transfer = Transfer::start(&t, SendOpts::default());
    d.wait("two subflows", Duration::from_secs(5), |s| {
        subflows(s).len() == 2
    });
    let mut recoveries = Vec::new();
    let rise_after = [Duration::ZERO, Duration::from_millis(300), Duration::ZERO];
    for (rep, rise) in rise_after.into_iter().enumerate() {
        std::thread::sleep(Duration::from_secs(1));
        d.rssi("c1", -90.0);
        d.wait("c1 backup", Duration::from_secs(5), |s| {
            subflows(s).contains(&("c1".to_string(), true))
        });
        std::thread::sleep(Duration::from_millis(500));
        silence(&t.client, "-A");
        std::thread::sleep(Duration::from_secs(3));
        silence(&t.client, "-D");
        std::thread::sleep(rise);
        let base = tx_bytes(&t.client, "c1");
        let t0 = std::time::Instant::now();
        d.rssi("c1", -70.0);
        let recovered = loop {
            if tx_bytes(&t.client, "c1") >= base + 3 * 1514 {
                break Some(t0.elapsed());
            }
            if t0.elapsed() > Duration::from_secs(3) {
                break None;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        let r = recovered.unwrap_or_else(|| panic!("rep {rep}: c1 carried nothing within 3 s"));
        recoveries.push(r);
    }
    std::thread::sleep(Duration::from_millis(500));
    eprintln!(
        "E9 shape, signal above T + h to data on c1 (ms): {}",
        ms_list(&recoveries)
    );
    transfer.finish();
    let st = d.status();
    eprintln!(
        "E9 shape: {} subflows replaced out of retransmission backoff",
        st["stats"]["backoff_replaced"]
    );
    assert_eq!(st["stats"]["kernel_request_errors"], 0, "{st:#}");
    assert_eq!(st["stats"]["backoff_replacements_abandoned"], 0, "{st:#}");
    for (rep, r) in recoveries.iter().enumerate() {
        assert!(
            *r <= Duration::from_millis(150),
            "rep {rep}: c1 carried data {r:?} after its signal rose (bound 150 ms)"
        );
    }
}

/// A bulk transfer over two 20 Mbit/s links whose c1 goes down at once (no warning): the
/// data on c1 is lost with it. braid pm destroys c1's subflow at once (the kernel then
/// re-sends its MPTCP-level retransmission queue on c2); the in-kernel path manager waits for
/// the kernel's stale detection. Either way the re-sent data waits behind c2's own send
/// queue: with the default (autotuned, megabytes) send buffer that queue sets the stall; with
/// a 256 KB one (SO_SNDBUF 128 KB) it is short. Five runs of each; README "braid pm" gives
/// the kernel code path. mptcpd (sspi) is measured once beside them.
#[test]
fn bulk_link_down_at_once_braid_pm_vs_in_kernel_pm_vs_mptcpd() {
    let Some(_alone) = timing_test() else {
        return;
    };
    let small = SendOpts {
        send_buffer: Some(128 * 1024),
        ..SendOpts::default()
    };
    let mut figures = Vec::new();
    for (what, opts) in [
        ("autotuned send buffer", SendOpts::default()),
        ("SO_SNDBUF 128 KB", small),
    ] {
        let (mut braid, mut kernel) = (Vec::new(), Vec::new());
        for rep in 0..BULK_REPS {
            let tag = if opts.send_buffer.is_some() { "s" } else { "d" };
            let (b, drained) = braid_pm_failure(
                &format!("bb{tag}{rep}"),
                [20, 20],
                opts,
                Duration::ZERO,
                false,
            );
            // c1 went down under load. Usually its socket still holds data and braid pm
            // destroys the subflow at once (lost = 1); when it held nothing at that instant
            // (seen with the 128 KB buffer) the subflow waits as a backup and the kernel or
            // the drain takes it later (lost = 0). Either way it is taken out once, and the
            // stall bound below holds.
            assert!(
                drained.after_drain + drained.lost <= 1,
                "{what} rep {rep}: {drained:?}"
            );
            if drained.lost == 0 {
                eprintln!("{what} rep {rep}: c1 held no data when its link went: {drained:?}");
            }
            assert!(
                b.gap < Duration::from_secs(1),
                "{what} rep {rep}: braid pm's stall {:?} (bound 1 s)",
                b.gap
            );
            let k = kernel_pm_failure(&format!("bk{tag}{rep}"), [20, 20], opts, Duration::ZERO);
            assert!(
                b.intact,
                "{what} rep {rep}: braid pm: the file did not arrive intact: {}",
                b.detail
            );
            assert!(
                k.intact,
                "{what} rep {rep}: in-kernel PM: the file did not arrive intact: {}",
                k.detail
            );
            braid.push(b.gap);
            kernel.push(k.gap);
        }
        eprintln!(
            "bulk, link down at once, {what}, longest stall (ms): braid pm {}; in-kernel PM {}",
            ms_list(&braid),
            ms_list(&kernel)
        );
        figures.push((what, braid, kernel));
    }
    // mptcpd with its sspi plugin (one subflow per interface), c2 addressed once the
    // connection runs: an address appearing is what sspi is written to act on.
    let t = Topo::new("bpm4c", [20, 20], false);
    t.userspace_pm();
    let log = std::env::temp_dir().join(format!("bpm4c-mptcpd-{}.log", std::process::id()));
    let mptcpd = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            &t.client.name,
            "/usr/libexec/mptcpd",
            "--plugin-dir=/usr/lib/x86_64-linux-gnu/mptcpd",
            "--path-manager=sspi",
            "--load-plugins=sspi",
            "--log=stderr",
        ])
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("mptcpd (Debian package mptcpd) must be installed: scripts/deps");
    let mut mptcpd = Proc(mptcpd);
    std::thread::sleep(Duration::from_millis(500));
    // mptcpd exits at once when it finds no path manager plugin (Debian ships them in
    // mptcpd-plugins): measuring then would measure no path manager at all.
    let exited = mptcpd.0.try_wait().unwrap();
    if exited.is_some() {
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        let _ = std::fs::remove_file(&log);
        panic!(
            "mptcpd exited ({exited:?}) before the measurement: {said}(scripts/deps installs mptcpd-plugins)"
        );
    }
    let mut mptcpd_subflows = 0;
    let m = failure(&t, SendOpts::default(), Duration::ZERO, || {
        sh(&t.client, "ip addr add 10.0.2.1/24 dev c2");
        t.route_table(2);
        std::thread::sleep(Duration::from_secs(1));
        mptcpd_subflows = subflow_count(&t);
    });
    drop(mptcpd);
    drop(t);
    let said = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    eprintln!(
        "mptcpd sspi: longest stall {:.1} ms (subflows before the failure: {mptcpd_subflows}, intact: {}); its log: {}",
        m.gap.as_secs_f64() * 1e3,
        m.intact,
        said.trim().replace('\n', " | ")
    );
    // With the autotuned buffer both stalls are c2's send queue (README "braid pm"): they
    // overlap from run to run and are reported, not ordered. With the small buffer braid pm's
    // immediate destroy beats the kernel's stale detection. The 100 ms target is reported, not
    // asserted: c2's queue of up to 256 KB alone takes 105 ms at 20 Mbit/s, and braid pm's
    // median has been on both sides of it (README).
    let (what, braid, kernel) = &figures[1];
    assert!(
        median(braid) <= median(kernel),
        "{what}: braid pm's median stall {:?} is worse than the in-kernel PM's {:?}",
        median(braid),
        median(kernel)
    );
    // mptcpd 0.12's sspi opens no second subflow, neither for the addresses that exist when a
    // connection starts nor for c2's, added during it (its log says only that it started and
    // that connection_established is unimplemented), so it never fails over.
    let braid = median(&figures[0].1);
    assert!(
        braid < m.gap,
        "braid pm {braid:?} vs mptcpd sspi {:?}",
        m.gap
    );
}

/// An MPTCP listener in `ns` on `port` that accepts and closes connections until `stop`.
fn acceptor(ns: &NetNs, port: u16, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    let s = mptcp_listener(ns, port, 4096);
    // Non-blocking, to look at `stop` (an MPTCP listener's accept(2) ignores SO_RCVTIMEO).
    s.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let mut accepted = 0;
        while !stop.load(Ordering::Relaxed) {
            match s.accept() {
                Ok(_) => accepted += 1,
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
        accepted
    })
}

/// `n` MPTCP connections from `ns` to the server's `port`, opened one after the other.
fn connections(ns: &NetNs, port: u16, n: usize) -> Vec<socket2::Socket> {
    ns.run(move || {
        let to: std::net::SocketAddr = format!("{SERVER}:{port}").parse().unwrap();
        (0..n)
            .map(|_| {
                let s = mptcp_socket();
                s.connect(&to.into()).expect("connect");
                s
            })
            .collect()
    })
}

/// Stops a process (SIGSTOP) for the guard's life.
struct Stopped(u32);

impl Stopped {
    fn new(pid: u32) -> Stopped {
        let ok = std::process::Command::new("kill")
            .args(["-STOP", &pid.to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "SIGSTOP to {pid}");
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-CONT", &self.0.to_string()])
            .status();
    }
}

/// Kernel events lost to an overrun of braid pm's event socket: 40 connections it knows of are
/// closed while it is stopped and thousands of others open and close, so their CLOSED events
/// find the socket's buffer full. Once it runs again it reads the overrun, asks the kernel
/// (sock_diag) which connections are left, and forgets the 40 (before, they stayed in its
/// tables for good).
#[test]
fn connections_closed_during_an_event_overrun_leave_the_tables() {
    let Some(_alone) = timing_test() else {
        return;
    };
    let t = Topo::new("bpm9", [20, 20], false);
    t.userspace_pm();
    let d = Daemon::braid_pm(&t.client, CROSS);
    let stop = Arc::new(AtomicBool::new(false));
    let server = acceptor(&t.server, 5301, stop.clone());
    let kept = connections(&t.client, 5301, 40);
    let count = |s: &serde_json::Value| s["connections"].as_array().map_or(0, Vec::len);
    d.wait("the 40 connections", Duration::from_secs(10), |s| {
        count(s) == 40
    });
    {
        let _stopped = Stopped::new(d.child.id());
        for _ in 0..8 {
            drop(connections(&t.client, 5301, 500));
        }
        drop(kept);
        // Their CLOSED events come after the buffer filled.
        std::thread::sleep(Duration::from_millis(500));
    }
    let s = d.wait(
        "the connections closed during the overrun forgotten",
        Duration::from_secs(20),
        |s| s["stats"]["event_overruns"].as_u64() > Some(0) && count(s) == 0,
    );
    stop.store(true, Ordering::Relaxed);
    let accepted = server.join().expect("acceptor");
    eprintln!(
        "{accepted} connections accepted; braid pm: {} overruns, {} connections found closed in them",
        s["stats"]["event_overruns"], s["stats"]["closed_in_overrun"]
    );
    assert!(
        s["stats"]["closed_in_overrun"].as_u64() >= Some(40),
        "{s:#}"
    );
}
