//! Seed 004's E13 on real kernels: the ad-hoc testbed of `braid_lab::manet` (8 nodes, 4
//! interfaces, babeld), `braid route` with each variant's policy, kernel MPTCP from M1 to M8
//! with `braid pm`, and unmodified applications: iperf3 (goodput over 60 s) and nc (time to
//! download 1.8 MB and 3.6 MB), with the duplicate data segments M8 receives. Link quality
//! follows the same schedule in every run: one link at a time fades (loss 30 %, 60 %, 85 %)
//! and is cut for 4 s.
//!
//! Root and `scripts/deps` needed. Run (under the machine's heavy lock):
//!
//! ```sh
//! cargo bench -p braid --bench e13_kernel -- --rates homogeneous --reps 2
//! cargo bench -p braid --bench e13_kernel -- --rates heterogeneous --variants tm,mmpxm --seconds 30
//! ```
//!
//! Options: `--rates homogeneous|heterogeneous|both` (both), `--variants LIST` (tm, mfxm,
//! mpxm, mmfxfm, mmpxm), `--reps N` (1), `--seconds S` (60), `--transfers N` per size (3),
//! `--json FILE` (every run).

#[path = "../tests/adhoc/mod.rs"]
mod adhoc;
#[path = "../tests/netns/mod.rs"]
mod netns;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use adhoc::*;
use braid_lab::manet::{self, Manet, Spec};
use serde_json::{Value, json};

/// A variant: its name, `braid route`'s policy (`None`: single-path TCP over babeld's own
/// routes), and whether `braid pm` pairs subflows within subnets.
struct Variant {
    name: &'static str,
    policy: Option<&'static str>,
    same_subnet: bool,
}

const VARIANTS: [Variant; 5] = [
    Variant {
        name: "tm",
        policy: None,
        same_subnet: false,
    },
    Variant {
        name: "mfxm",
        policy: Some("full"),
        same_subnet: false,
    },
    Variant {
        name: "mpxm",
        policy: Some("part"),
        same_subnet: false,
    },
    Variant {
        name: "mmfxfm",
        policy: Some("hmm-full"),
        same_subnet: true,
    },
    Variant {
        name: "mmpxm",
        policy: Some("hmm-part"),
        same_subnet: true,
    },
];

/// The links that fade in turn (middle links on every path, both halves of the topology).
const FADING: [(u32, u32); 6] = [(1, 2), (6, 8), (1, 4), (5, 8), (3, 6), (2, 5)];
const RAMP: [(u64, f64); 3] = [(4, 0.30), (4, 0.60), (6, 0.85)];
const CUT: Duration = Duration::from_secs(4);
const CALM: Duration = Duration::from_secs(6);

struct Opts {
    rates: Vec<(&'static str, [f64; 4])>,
    variants: Vec<&'static Variant>,
    reps: usize,
    seconds: u32,
    transfers: usize,
    json: Option<std::path::PathBuf>,
}

fn opts() -> Opts {
    let mut o = Opts {
        rates: vec![
            ("homogeneous", Spec::HOMOGENEOUS),
            ("heterogeneous", Spec::HETEROGENEOUS),
        ],
        variants: VARIANTS.iter().collect(),
        reps: 1,
        seconds: 60,
        transfers: 3,
        json: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = |what: &str| args.next().unwrap_or_else(|| panic!("{a} needs {what}"));
        match a.as_str() {
            "--bench" => {}
            "--rates" => {
                let v = val("homogeneous, heterogeneous or both");
                o.rates.retain(|(n, _)| v == "both" || *n == v);
                assert!(
                    !o.rates.is_empty(),
                    "--rates {v}: homogeneous, heterogeneous or both"
                );
            }
            "--variants" => {
                let v = val("a list");
                o.variants = v
                    .split(',')
                    .map(|n| {
                        VARIANTS.iter().find(|x| x.name == n).unwrap_or_else(|| {
                            panic!(
                                "--variants: unknown `{n}`; allowed tm, mfxm, mpxm, mmfxfm, mmpxm"
                            )
                        })
                    })
                    .collect();
            }
            "--reps" => o.reps = val("a number").parse().expect("--reps N"),
            "--seconds" => o.seconds = val("a number").parse().expect("--seconds S"),
            "--transfers" => o.transfers = val("a number").parse().expect("--transfers N"),
            "--json" => o.json = Some(val("a file").into()),
            other => panic!("unknown option {other}"),
        }
    }
    o
}

/// Runs the link schedule until `stop`, from the start again on every call.
fn schedule(m: Arc<Manet>, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let sleep = |d: Duration| {
            let t0 = Instant::now();
            while t0.elapsed() < d && !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
            }
        };
        for &(a, b) in FADING.iter().cycle() {
            for &(s, loss) in &RAMP {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let _ = m.set_loss(a, b, loss);
                sleep(Duration::from_secs(s));
            }
            if !stop.load(Ordering::Relaxed) {
                let _ = m.set_up(a, b, false);
                sleep(CUT);
            }
            let _ = m.set_up(a, b, true);
            let _ = m.set_loss(a, b, 0.0);
            if stop.load(Ordering::Relaxed) {
                return;
            }
            sleep(CALM);
        }
    })
}

fn run_variant(
    m: &Arc<Manet>,
    v: &Variant,
    o: &Opts,
    files: &[(std::path::PathBuf, Vec<u8>)],
) -> Value {
    let t0 = Instant::now();
    let routes = v.policy.map(|p| start_routes(m, p));
    if let Some(p) = v.policy {
        let part = p.ends_with("part");
        wait("routes converge", Duration::from_secs(90), || {
            converged(m, part).then_some(())
        });
    }
    let pm = v.policy.map(|_| mptcp(m, v.same_subnet));
    let tcp = v.policy.is_none();
    eprintln!(
        "  {}: ready after {:.1} s",
        v.name,
        t0.elapsed().as_secs_f64()
    );

    let fb0 = fallbacks(m.ns(8));
    let stop = Arc::new(AtomicBool::new(false));
    let sched = schedule(m.clone(), stop.clone());
    let tx0 = tx_bytes(m);
    // Halfway through: the (sub)flows M1 sends iperf3's data on.
    let flows = {
        let m = m.clone();
        let half = Duration::from_secs(u64::from(o.seconds) / 2);
        std::thread::spawn(move || {
            std::thread::sleep(half);
            m.ns(1)
                .exec(&["ss", "-tnH", "state", "established", "( sport = :5201 )"])
                .map(|o| {
                    String::from_utf8_lossy(&o.stdout)
                        .lines()
                        .filter_map(|l| {
                            let f: Vec<&str> = l.split_whitespace().collect();
                            Some(format!("{} → {}", f.get(2)?, f.get(3)?))
                        })
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
        })
    };
    let (mbit, dups60) = match iperf(m, o.seconds, tcp) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("  {}: {e}", v.name);
            (0.0, 0)
        }
    };
    let tx: BTreeMap<String, f64> = tx_bytes(m)
        .into_iter()
        .map(|(k, b)| {
            let mb = b.saturating_sub(tx0.get(&k).copied().unwrap_or(0)) as f64 / 1e6;
            (k, mb)
        })
        .filter(|(_, mb)| *mb >= 1.0)
        .collect();
    eprintln!("  {}: iperf3 {mbit:.2} Mbit/s, {dups60} duplicates", v.name);
    let flows = flows.join().unwrap_or_default();
    eprintln!(
        "  {}: M1's (sub)flows halfway: {}",
        v.name,
        flows.join(", ")
    );
    eprintln!(
        "  {}: MB sent per interface during iperf3 (1 MB or more): {}",
        v.name,
        tx.iter()
            .map(|(k, mb)| format!("{k} {mb:.1}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut transfers = BTreeMap::new();
    for (k, (file, data)) in files.iter().enumerate() {
        let mut runs = Vec::new();
        for i in 0..o.transfers {
            let t = nc(m, file, data, tcp, 5100 + (k * 10 + i) as u16);
            eprintln!(
                "  {}: {} B in {:.2} s, {} duplicates{}",
                v.name,
                data.len(),
                t.seconds,
                t.duplicates,
                if t.intact { "" } else { ", NOT INTACT" }
            );
            runs.push(
                json!({"seconds": t.seconds, "duplicates": t.duplicates, "intact": t.intact}),
            );
        }
        transfers.insert(data.len().to_string(), runs);
    }
    stop.store(true, Ordering::Relaxed);
    let _ = sched.join();
    let fb: BTreeMap<String, u64> = fallbacks(m.ns(8))
        .into_iter()
        .map(|(k, n)| {
            let d = n.saturating_sub(fb0.get(&k).copied().unwrap_or(0));
            (k, d)
        })
        .collect();
    eprintln!(
        "  {}: M8's MPTCP handshakes and fallbacks: {}",
        v.name,
        fb.iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    drop(pm);
    drop(routes);
    netns::sh(m.ns(1), "ip mptcp endpoint flush");
    json!({
        "variant": v.name,
        "iperf3_mbit_s": mbit,
        "iperf3_tx_mb_per_interface": tx,
        "iperf3_flows_halfway": flows,
        "iperf3_duplicates": dups60,
        "transfers": transfers,
        "m8_mptcp_fallbacks": fb,
    })
}

/// Bytes sent so far by every interface of every node, keyed `M<n>.<interface>`.
fn tx_bytes(m: &Manet) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for n in 1..=8 {
        let Ok(o) = m.ns(n).ip(&["-s", "-j", "link", "show"]) else {
            continue;
        };
        let links: Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
        for l in links.as_array().into_iter().flatten() {
            if let (Some(name), Some(b)) =
                (l["ifname"].as_str(), l["stats64"]["tx"]["bytes"].as_u64())
                && name != "lo"
            {
                out.insert(format!("M{n}.{name}"), b);
            }
        }
    }
    out
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

fn main() {
    if !netns::require_root() {
        return;
    }
    need(&[
        "babeld",
        "iperf3",
        "mptcpize",
        "nc",
        "iptables",
        "ip6tables",
        "tc",
    ]);
    manet::cleanup_on_interrupt().unwrap();
    let o = opts();
    let mut all = Vec::new();
    for &(rates_name, rates) in &o.rates {
        eprintln!(
            "E13 {rates_name} ({rates:?} Mbit/s), {} s iperf3, {} transfers per size",
            o.seconds, o.transfers
        );
        let mut m = Manet::build(Spec::e13("be13", rates)).unwrap();
        m.start_all_babeld().unwrap();
        let m = Arc::new(m);
        let files = vec![
            adhoc::file(&m.dir, 1_800_000),
            adhoc::file(&m.dir, 3_600_000),
        ];
        // babeld's own routes first (tm uses them).
        wait("babeld converges", Duration::from_secs(60), || {
            let r = m.ns(8).ip(&["route", "show", "10.0.0.1"]).ok()?;
            String::from_utf8_lossy(&r.stdout)
                .contains("proto babel")
                .then_some(())
        });
        std::thread::sleep(Duration::from_secs(5));
        for rep in 0..o.reps {
            for v in &o.variants {
                let mut r = run_variant(&m, v, &o, &files);
                r["rates"] = json!(rates_name);
                r["rep"] = json!(rep);
                all.push(r);
            }
        }
    }
    // The table: per rates and variant, means over repetitions.
    println!(
        "\n| rates | variant | iperf3 Mbit/s | 1.8 MB s | 3.6 MB s | duplicates per 1.8 MB | per 3.6 MB | per 60 s iperf3 | intact |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for &(rates_name, _) in &o.rates {
        for v in &o.variants {
            let runs: Vec<&Value> = all
                .iter()
                .filter(|r| r["rates"] == rates_name && r["variant"] == v.name)
                .collect();
            let f = |k: &str| -> Vec<f64> { runs.iter().filter_map(|r| r[k].as_f64()).collect() };
            let t = |size: &str, k: &str| -> Vec<f64> {
                runs.iter()
                    .flat_map(|r| r["transfers"][size].as_array().cloned().unwrap_or_default())
                    .filter_map(|x| x[k].as_f64())
                    .collect()
            };
            let intact = runs.iter().all(|r| {
                r["transfers"]
                    .as_object()
                    .into_iter()
                    .flat_map(|m| m.values())
                    .flat_map(|a| a.as_array().cloned().unwrap_or_default())
                    .all(|x| x["intact"] == true)
            });
            println!(
                "| {rates_name} | {} | {:.2} | {:.2} | {:.2} | {:.1} | {:.1} | {:.0} | {} |",
                v.name,
                mean(&f("iperf3_mbit_s")),
                mean(&t("1800000", "seconds")),
                mean(&t("3600000", "seconds")),
                mean(&t("1800000", "duplicates")),
                mean(&t("3600000", "duplicates")),
                mean(&f("iperf3_duplicates")) * 60.0 / f64::from(o.seconds),
                if intact { "yes" } else { "NO" }
            );
        }
    }
    // The seed's shape: multi-interface variants 2–3× single-path TCP; the HMM part-path
    // variant receives the fewest duplicates.
    for &(rates_name, _) in &o.rates {
        let per = |k: &dyn Fn(&Value) -> Vec<f64>, name: &str| -> f64 {
            mean(
                &all.iter()
                    .filter(|r| r["rates"] == rates_name && r["variant"] == name)
                    .flat_map(k)
                    .collect::<Vec<f64>>(),
            )
        };
        let goodput = |r: &Value| r["iperf3_mbit_s"].as_f64().into_iter().collect::<Vec<_>>();
        // Per download, as seed 004 counted them (tcpdump during the nc downloads).
        let dups = |r: &Value| -> Vec<f64> {
            r["transfers"]
                .as_object()
                .into_iter()
                .flat_map(|m| m.values())
                .flat_map(|a| a.as_array().cloned().unwrap_or_default())
                .filter_map(|x| x["duplicates"].as_f64())
                .collect()
        };
        let ratios: Vec<String> = if o.variants.iter().any(|v| v.name == "tm") {
            let tm = per(&goodput, "tm");
            o.variants
                .iter()
                .filter(|v| v.name != "tm")
                .map(|v| format!("{} {:.2}×", v.name, per(&goodput, v.name) / tm))
                .collect()
        } else {
            vec!["tm was not run".into()]
        };
        // Every variant at the minimum: several often receive none at all.
        let mptcp: Vec<(&str, f64)> = o
            .variants
            .iter()
            .filter(|v| v.name != "tm")
            .map(|v| (v.name, per(&dups, v.name)))
            .collect();
        let least = mptcp.iter().map(|x| x.1).fold(f64::INFINITY, f64::min);
        let at_least: Vec<&str> = mptcp.iter().filter(|x| x.1 == least).map(|x| x.0).collect();
        let fewest = match at_least.len() {
            0 => "-".to_string(),
            1 => format!("{} ({least:.1})", at_least[0]),
            _ => format!("{} (tied at {least:.1})", at_least.join(", ")),
        };
        println!(
            "{rates_name}: goodput / tm: {}; fewest duplicates per download among the MPTCP variants: {fewest}",
            ratios.join(", ")
        );
    }
    if let Some(p) = &o.json {
        std::fs::write(p, serde_json::to_string_pretty(&all).unwrap()).unwrap();
        eprintln!("every run: {}", p.display());
    }
}
