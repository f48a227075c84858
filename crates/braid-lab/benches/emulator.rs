//! The link emulator's accuracy and capacity on this machine (root; `cargo bench -p braid-lab
//! --bench emulator`), the figures of the README's "braid lab" section:
//! 1. delay error: one-way delay of 100-byte probes every 2 ms minus the configured 20 ms and
//!    the probe's own serialisation, p50/p99, at 10 and 100 Mbit/s, with the link idle and with
//!    the opposite direction loaded at 90 % of its rate (iperf3 UDP);
//! 2. capacity: the highest rate R at which a link configured at R carries 0.9 R of iperf3 UDP
//!    without loss the emulator adds (loss at the iperf3 receiver, frames the kernel dropped
//!    before the emulator read them);
//! 3. a Mahimahi trace (`../shared/traces/cellular/TMobile-LTE-short.down` when present) under
//!    saturation: bytes per 100 ms window against the trace's.

use std::net::UdpSocket;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use braid_lab::bed::{Bed, CLIENT, SERVER, mbit, probes, require_root, spec};
use braid_sim::link::{Capacity, QueueLimit};
use braid_sim::trace::{OPPORTUNITY_BYTES, Trace};

/// A child process killed and reaped on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn iperf3_server(bed: &Bed) -> Proc {
    let p = Command::new("ip")
        .args([
            "netns",
            "exec",
            &bed.server.name,
            "iperf3",
            "-s",
            "-1",
            "-J",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("iperf3 (scripts/deps installs it)");
    std::thread::sleep(Duration::from_millis(300));
    Proc(p)
}

/// iperf3 UDP client → server at `mbps` for `secs`; with `reverse`, server → client.
fn iperf3_udp(bed: &Bed, mbps: f64, secs: u32, reverse: bool) -> Child {
    let mut args = vec![
        "netns".to_string(),
        "exec".into(),
        bed.client.name.clone(),
        "iperf3".into(),
        "-c".into(),
        SERVER.into(),
        "-u".into(),
        "-l".into(),
        "1400".into(),
        "-b".into(),
        format!("{}", (mbps * 1e6) as u64),
        "-t".into(),
        secs.to_string(),
        "-J".into(),
    ];
    if reverse {
        args.push("-R".into());
    }
    Command::new("ip")
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("iperf3")
}

/// Waits for an iperf3 UDP client; the loss its server reported.
fn lost_percent(client: Child) -> f64 {
    let out = client.wait_with_output().expect("iperf3 output");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v["end"]["sum"]["lost_percent"].as_f64().unwrap_or(100.0)
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn delay_error(rate_mbps: f64, load: bool) -> (f64, f64, f64) {
    let bed = Bed::new("ebd");
    let emu = bed.start(
        spec(mbit(rate_mbps), 20),
        spec(mbit(rate_mbps), 20),
        Vec::new(),
    );
    let _srv = load.then(|| iperf3_server(&bed));
    let _load = load.then(|| Proc(iperf3_udp(&bed, 0.9 * rate_mbps, 8, true)));
    if load {
        std::thread::sleep(Duration::from_millis(500));
    }
    let res = probes(&bed, Duration::from_millis(2), 2500);
    let late_max = emu.links[0].1.1.late_us_max.load(Ordering::Relaxed);
    emu.stop().expect("emulator");
    let serial_ms = 128.0 * 8.0 / (rate_mbps * 1e6) * 1e3;
    let mut err: Vec<f64> = res
        .iter()
        .filter_map(|(s, r)| r.map(|r| (r - *s).as_secs_f64() * 1e3 - 20.0 - serial_ms))
        .collect();
    err.sort_by(f64::total_cmp);
    (pct(&err, 0.5), pct(&err, 0.99), late_max as f64 / 1e3)
}

/// Whether a link at `rate` carries 0.9 × rate of UDP without added loss: iperf3's loss %,
/// and the emulator's counters of the direction (frames the kernel dropped before the
/// emulator read them, queue drops, refused writes).
fn capacity(rate_mbps: f64) -> (f64, [u64; 3]) {
    let bed = Bed::new("ebc");
    let mut s = spec(mbit(rate_mbps), 5);
    s.queue = QueueLimit::Packets(1000);
    let emu = bed.start(s.clone(), s, Vec::new());
    let _srv = iperf3_server(&bed);
    let lost = lost_percent(iperf3_udp(&bed, 0.9 * rate_mbps, 4, false));
    let c = emu.links[0].1.1.clone();
    // Stopping publishes the final counts.
    emu.stop().expect("emulator");
    let counts = [
        c.kernel_drops.load(Ordering::Relaxed),
        c.dropped_queue.load(Ordering::Relaxed),
        c.send_errors.load(Ordering::Relaxed),
    ];
    (lost, counts)
}

fn trace_following(path: &Path) -> Option<(f64, f64, f64)> {
    let trace = Trace::load(path).ok()?;
    let bed = Bed::new("ebt");
    let mut s = spec(Capacity::Trace(trace.clone()), 5);
    s.queue = QueueLimit::Packets(1000);
    let emu = bed.start(s.clone(), s, Vec::new());
    let started = emu.started();
    let rx = bed
        .server
        .run(|| UdpSocket::bind(format!("{SERVER}:9003")).unwrap());
    rx.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let receiver = std::thread::spawn(move || {
        let mut got = Vec::new();
        let mut buf = [0u8; 2048];
        while let Ok(n) = rx.recv(&mut buf) {
            got.push((Instant::now(), n));
        }
        got
    });
    // Offered: 1.5 × the trace's peak over 1 s windows, at least 20 Mbit/s.
    let secs = 20u64;
    let peak = (0..secs)
        .map(|s| {
            ops_in(&trace, s * 1000, (s + 1) * 1000) as f64 * f64::from(OPPORTUNITY_BYTES) * 8.0
        })
        .fold(20e6, f64::max);
    let every = Duration::from_secs_f64(1428.0 * 8.0 / (1.5 * peak));
    let tx = bed
        .client
        .run(|| UdpSocket::bind(format!("{CLIENT}:0")).unwrap());
    let t0 = Instant::now();
    let mut k = 0u32;
    while t0.elapsed() < Duration::from_secs(secs + 1) {
        let at = t0 + every * k;
        if let Some(d) = at.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
        let _ = tx.send_to(&[0u8; 1400], format!("{SERVER}:9003"));
        k += 1;
    }
    let got = receiver.join().unwrap();
    emu.stop().expect("emulator");
    // 100 ms windows from 1 s to `secs`, shifted by the 5 ms delay.
    let mut errs = Vec::new();
    let (mut got_total, mut want_total) = (0.0, 0.0);
    for w in 10..secs * 10 {
        let (from_ms, to_ms) = (w * 100, (w + 1) * 100);
        let (from, to) = (
            started + Duration::from_millis(from_ms + 5),
            started + Duration::from_millis(to_ms + 5),
        );
        let bytes: usize = got
            .iter()
            .filter(|(t, _)| *t >= from && *t < to)
            .map(|(_, n)| n + 28)
            .sum();
        let want = ops_in(&trace, from_ms, to_ms) as f64 * f64::from(OPPORTUNITY_BYTES);
        got_total += bytes as f64;
        want_total += want;
        if want > 0.0 {
            errs.push(((bytes as f64 - want) / want).abs() * 100.0);
        }
    }
    errs.sort_by(f64::total_cmp);
    Some((
        pct(&errs, 0.5),
        pct(&errs, 0.95),
        (got_total - want_total) / want_total * 100.0,
    ))
}

/// Opportunities of the (repeating) trace in [from, to) ms.
fn ops_in(trace: &Trace, from: u64, to: u64) -> usize {
    let reps = to / trace.period_ms + 1;
    (0..reps)
        .flat_map(|r| {
            trace
                .opportunities
                .iter()
                .map(move |ms| ms + r * trace.period_ms)
        })
        .filter(|ms| (from..to).contains(ms))
        .count()
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    if !require_root() {
        return;
    }
    println!(
        "braid lab link emulator, this machine ({} cores)",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!("\n1. delay error: probe one-way delay − 20 ms − serialisation (ms)");
    println!("| link | opposite direction | p50 | p99 | emulator's latest send |");
    println!("|---|---|---|---|---|");
    for rate in [10.0, 100.0] {
        for load in [false, true] {
            let (p50, p99, late) = delay_error(rate, load);
            println!(
                "| {rate:.0} Mbit/s | {} | {p50:.3} | {p99:.3} | {late:.3} |",
                if load { "90 % loaded" } else { "idle" }
            );
        }
    }
    println!("\n2. capacity: a link at R carrying 0.9 R of UDP (iperf3, 1400-byte datagrams)");
    println!(
        "| R | loss at the receiver | dropped before the emulator read them | queue drops | refused writes |"
    );
    println!("|---|---|---|---|---|");
    let mut sustained = 0.0;
    for rate in [50.0, 100.0, 200.0, 400.0, 600.0, 800.0, 1000.0] {
        let (lost, [kernel, queue, refused]) = capacity(rate);
        println!("| {rate:.0} Mbit/s | {lost:.3} % | {kernel} | {queue} | {refused} |");
        if lost == 0.0 {
            sustained = rate;
        } else {
            break;
        }
    }
    println!("highest rate without added loss: {sustained:.0} Mbit/s per link");
    let trace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/traces/cellular/TMobile-LTE-short.down");
    println!("\n3. trace {}", trace.display());
    match trace_following(&trace) {
        Some((p50, p95, total)) => println!(
            "bytes per 100 ms window vs the trace: |error| p50 {p50:.1} %, p95 {p95:.1} %; over 19 s {total:+.2} %"
        ),
        None => println!("SKIPPED: trace not present"),
    }
}
