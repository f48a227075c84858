//! The shapes of the seed papers' results (SPEC E1–E14), on the shipped scenarios shortened to
//! fewer loss cycles and repetitions. The full runs and their figures are in the README.

use std::collections::BTreeMap;
use std::path::Path;

use braid_sim::runner::Summary;
use braid_sim::{runner, scenario};

/// variant → metric → summary over the runs (event values pooled).
fn run_full(file: &str, overrides: &[&str]) -> BTreeMap<String, BTreeMap<String, Summary>> {
    run_only(file, overrides, &[])
}

/// As [`run_full`], only the variants named (all when none).
fn run_only(
    file: &str,
    overrides: &[&str],
    variants: &[&str],
) -> BTreeMap<String, BTreeMap<String, Summary>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(file);
    let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    let names: Vec<String> = variants.iter().map(|s| s.to_string()).collect();
    let plan = scenario::load_variants(&path, &o, &names).unwrap();
    let r = runner::run(
        &plan,
        &runner::Options {
            jobs: 2,
            records: runner::Records::None,
            pcap: None,
        },
        &|_| {},
    );
    r.variants
        .iter()
        .map(|v| (v.name.clone(), v.summary.clone()))
        .collect()
}

/// variant → metric → median.
fn run(file: &str, overrides: &[&str]) -> BTreeMap<String, BTreeMap<String, f64>> {
    run_full(file, overrides)
        .into_iter()
        .map(|(v, m)| (v, m.into_iter().map(|(k, s)| (k, s.median)).collect()))
        .collect()
}

/// The file's reinjection policies and the tunnel's default, guarded REJ (`rejg1`).
const WITH_DEFAULT: &str =
    r#"sweep."connection.reinjection"=["stock","pto","rej1","rej2","rej4","rejg1"]"#;

#[test]
fn e3_rej_cuts_the_delay_increase_without_more_reinjections() {
    let r = run(
        "e3-rtt-below-rtomin.toml",
        &[
            "repetitions=1",
            "schedule.0.count=10",
            "duration=110s",
            WITH_DEFAULT,
        ],
    );
    let d = |v: &str| r[v]["delay_increase_ms"];
    let rate = |v: &str| r[v]["reinjection_rate_pct"];
    assert!(d("rej1") <= 0.4 * d("stock"), "{r:?}");
    assert!(
        d("rej1") <= d("rej2") && d("rej2") <= d("rej4") && d("rej4") <= d("stock"),
        "{r:?}"
    );
    assert!(rate("rej1") <= rate("stock") + 1.0, "{r:?}");
    // RTT ≪ RTO_min: the stock delay is dominated by PTO + RTO (≥ 200 ms).
    assert!(d("stock") > 250.0, "{r:?}");
    // The default keeps REJ's shape.
    assert!(d("rejg1") <= 0.4 * d("stock"), "{r:?}");
    assert!(rate("rejg1") <= rate("stock") + 1.0, "{r:?}");
}

#[test]
fn e4_rej_halves_the_delay_increase_and_pto_does_not_help() {
    let r = run(
        "e4-rtt-above-rtomin.toml",
        &[
            "repetitions=1",
            "schedule.0.count=6",
            "duration=80s",
            WITH_DEFAULT,
        ],
    );
    let d = |v: &str| r[v]["delay_increase_ms"];
    assert!(d("rej1") <= 0.6 * d("stock"), "{r:?}");
    assert!(d("rejg1") <= 0.6 * d("stock"), "{r:?}");
    // The paper: PTO no better than the RTO when 2·RTT > RTO and REMOVE_ADDR arrives as soon.
    assert!(d("pto") >= 0.9 * d("stock"), "{r:?}");
}

#[test]
fn e5_rej_cuts_the_largest_gap_of_a_greedy_stream() {
    let r = run(
        "e5-greedy.toml",
        &[
            "repetitions=1",
            "schedule.0.count=8",
            "duration=90s",
            WITH_DEFAULT,
        ],
    );
    let g = |v: &str| r[v]["max_gap_ms"];
    let rate = |v: &str| r[v]["reinjection_rate_pct"];
    assert!(g("rej1") <= 0.3 * g("stock"), "{r:?}");
    // The default cuts the gap as REJ does, without reinjecting on the queue's own growth as
    // often as K = 1.
    assert!(g("rejg1") <= 0.3 * g("stock"), "{r:?}");
    assert!(rate("rejg1") < rate("rej1"), "{r:?}");
}

#[test]
fn e1_minrtt_aggregates_redundant_follows_the_slower_link() {
    let r = run("e1-vlc-throughput.toml", &["repetitions=1", "duration=15s"]);
    let t = |v: &str| r[v]["throughput_mbps"];
    assert!(t("minrtt") >= 0.9 * 200.0, "{r:?}");
    assert!(t("redundant") <= 90.0, "{r:?}");
    assert!((t("backup") - 110.0).abs() <= 11.0, "{r:?}");
}

#[test]
fn e2_redundant_has_no_outage_backup_the_longest() {
    for file in ["e2-blockage.toml", "e2-shadowing.toml"] {
        let r = run(file, &["repetitions=3"]);
        let o = |v: &str| r[v]["outage_ms"];
        assert!(o("redundant") < 10.0, "{file}: {r:?}");
        assert!(
            o("redundant") < o("minrtt") && o("minrtt") < o("backup"),
            "{file}: {r:?}"
        );
    }
}

/// Regression: on this drive-by (independent jitter, REJ K = 4, seed 1) REJ queued data of the
/// cellular path for the Wi-Fi path just before the Wi-Fi address went; those entries then
/// blocked the reinjection queue and the Wi-Fi path's lost data behind them, and the stream
/// stalled until the receive window closed (a 3.8 s gap at 1811 s, then minutes).
#[test]
fn e6_reinjection_queue_never_blocks_the_stream() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/e6-drive-by.toml");
    let o: Vec<String> = [
        "duration=\"1830s\"",
        "link.0.jitter_period=\"0s\"",
        "link.1.jitter_period=\"0s\"",
        "sweep.\"connection.reinjection\"=[\"rej4\"]",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let plan = scenario::load(&path, &o).unwrap();
    let v = &plan.variants[0];
    let rec = braid_sim::world::run(v, 1);
    let m = braid_sim::metrics::compute(&rec, &v.scenario.metrics);
    let worst = m["max_gap_ms"].iter().copied().fold(0.0, f64::max);
    assert!(
        worst < 1000.0,
        "largest gap around a loss event: {worst} ms"
    );
}

#[test]
fn e6_reinjection_delay_increase_is_ordered_k1_k2_k4_stock() {
    // Four laps of the loop instead of ten.
    let r = run(
        "e6-drive-by.toml",
        &["repetitions=2", "duration=\"970s\"", WITH_DEFAULT],
    );
    let d = |v: &str| r[v]["delay_increase_ms"];
    let rate = |v: &str| r[v]["reinjection_rate_pct"];
    assert!(
        d("rej1") < d("rej2") && d("rej2") < d("rej4") && d("rej4") < d("stock"),
        "{r:?}"
    );
    assert!(d("rej1") <= 0.4 * d("stock"), "{r:?}");
    // The default sits between REJ and stock here: a fading Wi-Fi path still acknowledges now
    // and then, and the guard waits for that progress to stop; it reinjects a fraction of
    // what REJ does.
    assert!(d("rejg1") < d("stock"), "{r:?}");
    assert!(rate("rejg1") < rate("rej4"), "{r:?}");
}

#[test]
fn e7_cross_layer_keeps_the_handover_delay_low() {
    let r = run_full("e7-v2i-aggregation.toml", &[]);
    let p99 = |v: &str| r[v]["delay_p99_event_ms"].median;
    assert!(p99("cross") <= 100.0, "{r:?}");
    assert!(p99("stock") >= 5.0 * p99("cross"), "{r:?}");
    let ofo = |v: &str| r[v]["ofo_peak_kb"].median;
    assert!(ofo("cross") < ofo("stock"), "{r:?}");
    // The stock path manager never acts before the break; the cross-layer ones always do on
    // this fading link, the HMM in ≥ 90 % of the handovers.
    let acted = |v: &str| r[v]["acted_before_break_pct"].mean;
    assert_eq!(acted("stock"), 0.0, "{r:?}");
    assert!(acted("cross") >= 90.0, "{r:?}");
    assert!(acted("cross-hmm") >= 90.0, "{r:?}");
    // The capacity-aware mode acts as Algorithm 1 when LTE carries the stream.
    assert!(p99("cross-cap") <= 100.0, "{r:?}");
    assert!(acted("cross-cap") >= 90.0, "{r:?}");
    // And with the demoted link as a redundant carrier.
    assert!(p99("cross-dup") <= p99("cross-cap"), "{r:?}");
    assert!(acted("cross-dup") >= 90.0, "{r:?}");
}

#[test]
fn e8_cross_layer_hands_over_before_the_link_breaks() {
    let r = run("e8-v2i-backup.toml", &[]);
    let gap = |v: &str| r[v]["max_gap_ms"];
    assert!(gap("cross") <= 100.0, "{r:?}");
    assert!(gap("stock") >= 2.0 * gap("cross"), "{r:?}");
    assert!(gap("cross-cap") <= 100.0, "{r:?}");
    assert!(gap("cross-dup") <= 100.0, "{r:?}");
}

/// variant → one value per run and event window of each of `metrics`, runs in seed order.
fn windows(file: &str, metrics: &[&str]) -> BTreeMap<String, BTreeMap<String, Vec<f64>>> {
    windows_with(file, &[], metrics)
}

/// [`windows`] with scenario overrides.
fn windows_with(
    file: &str,
    overrides: &[&str],
    metrics: &[&str],
) -> BTreeMap<String, BTreeMap<String, Vec<f64>>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(file);
    let overrides: Vec<String> = overrides.iter().map(|o| o.to_string()).collect();
    let plan = scenario::load(&path, &overrides).unwrap();
    let opts = runner::Options {
        jobs: 2,
        records: runner::Records::None,
        pcap: None,
    };
    runner::run(&plan, &opts, &|_| {})
        .variants
        .iter()
        .map(|v| {
            let per_metric = metrics
                .iter()
                .map(|m| {
                    let w = v
                        .runs
                        .iter()
                        .flat_map(|r| r.metrics.get(*m).cloned().unwrap_or_default())
                        .collect();
                    (m.to_string(), w)
                })
                .collect();
            (v.name.clone(), per_metric)
        })
        .collect()
}

/// E7 and E8 with LTE from each real cellular trace: per trace, the capacity-aware mode's
/// median p99 delay around the handover is no worse than stock's and Algorithm 1's, and window
/// by window (the same handovers: same seeds and route) it is better than Algorithm 1
/// (`cross`) at least as often as it is worse, and better than stock more often than worse
/// ("better": more than 5 % lower). The full files (10 runs, 56 handovers per trace). The mode
/// with the demoted link kept as a redundant carrier (`dup`) is no worse than stock nor than
/// Algorithm 1 per trace (medians); on TMobile LTE, whose capacity exceeds the stream's, it is
/// ≤ 100 ms in more handovers than `cap`.
///
/// Where LTE could carry the stream: in the windows where the stream alone on one link would
/// have had a p99 delay ≤ 100 ms (`delay_p99_event_alone_ms`; after the break that link is
/// LTE), `cap` and `dup` are ≤ 100 ms in at least the counts below, as measured. And no
/// window's p99 delay is below its lower bound (`delay_p99_event_bound_ms`), whatever the
/// path manager.
///
/// (E7, E8) × (ATT, TMobile): windows where one link alone could carry the stream within
/// 100 ms, and of those the ones `cap` and `dup` kept ≤ 100 ms, as measured. E7 ATT's were 27
/// and 27 before a retransmission lost again went over an idle path as well (seed 7's first
/// window: 191 → 51 ms); E8 ATT's 27 and 26 before such a copy could go over an idle backup
/// when the path is the connection's only active one (LTE is a backup until the handover;
/// seed 7's first window: 191 → 60 ms).
const CARRIED: [[(usize, usize, usize); 2]; 2] =
    [[(28, 28, 28), (16, 15, 15)], [(28, 28, 27), (16, 15, 15)]];
/// TMobile LTE handovers (of 56) in which `dup` kept the p99 delay ≤ 100 ms, as measured (E7,
/// E8; `cap` 20 and 20). E7's was 22 before the capacity-aware modes watched the active radio
/// link for a stall (`SetWatch`), 21 after, 22 again since a retransmission lost again goes
/// over an idle path as well; E8's was 22 before the backup stayed active beside a returning
/// primary until it carried the demand (one window, 73 → 133 ms, not traced; `cap` went from
/// 17 to 19), 21 after, 22 again since such a copy can go over an idle backup (`cap` 19 → 20).
const DUP_TMOBILE_WITHIN: [usize; 2] = [22, 22];

#[test]
fn capacity_aware_cross_layer_on_real_cellular_traces() {
    let traces = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces/cellular");
    if !traces.is_dir() {
        eprintln!(
            "skipped: the cellular-trace runs need {} (absent)",
            traces.display()
        );
        return;
    }
    const P99: &str = "delay_p99_event_ms";
    const BOUND: &str = "delay_p99_event_bound_ms";
    const ALONE: &str = "delay_p99_event_alone_ms";
    for (k, file) in ["e7-v2i-cellular.toml", "e8-v2i-cellular.toml"]
        .into_iter()
        .enumerate()
    {
        let w = windows(file, &[P99, BOUND, ALONE]);
        for t in ["att", "tmobile", "umts", "verizon"] {
            let v = |p: &str| &w[&format!("{t}-{p}")][P99];
            let (cap, cross, stock, dup) = (v("cap"), v("cross"), v("stock"), v("dup"));
            assert_eq!(cap.len(), cross.len(), "{file} {t}: the same windows");
            assert_eq!(cap.len(), stock.len(), "{file} {t}: the same windows");
            assert_eq!(cap.len(), dup.len(), "{file} {t}: the same windows");
            // The bound holds for every path manager, window by window.
            for p in ["stock", "cross", "cap", "dup"] {
                let m = &w[&format!("{t}-{p}")];
                assert_eq!(m[BOUND].len(), m[P99].len(), "{file} {t}-{p}");
                assert_eq!(m[ALONE].len(), m[P99].len(), "{file} {t}-{p}");
                for (i, (d, b)) in m[P99].iter().zip(&m[BOUND]).enumerate() {
                    assert!(
                        d >= b,
                        "{file} {t}-{p} window {i}: p99 {d} ms below its bound {b}"
                    );
                }
            }
            let median = |x: &[f64]| {
                let mut x = x.to_vec();
                x.sort_by(f64::total_cmp);
                (x[(x.len() - 1) / 2] + x[x.len() / 2]) / 2.0
            };
            let tally = |other: &[f64]| {
                let better = cap
                    .iter()
                    .zip(other)
                    .filter(|(a, b)| **a < 0.95 * **b)
                    .count();
                let worse = cap
                    .iter()
                    .zip(other)
                    .filter(|(a, b)| **a > 1.05 * **b)
                    .count();
                (better, worse)
            };
            let (bc, wc) = tally(cross);
            let (bs, ws) = tally(stock);
            let within = |x: &[f64]| x.iter().filter(|&&d| d <= 100.0).count();
            // Windows one link alone could have carried within 100 ms (the same for every
            // path manager: they depend on the links only).
            let alone = &w[&format!("{t}-stock")][ALONE];
            let carried: Vec<bool> = alone.iter().map(|&a| a <= 100.0).collect();
            let within_carried = |x: &[f64]| {
                x.iter()
                    .zip(&carried)
                    .filter(|(d, c)| **c && **d <= 100.0)
                    .count()
            };
            let n_carried = carried.iter().filter(|&&c| c).count();
            eprintln!(
                "{file} {t}: median p99 stock {:.0} cross {:.0} cap {:.0} dup {:.0} ms; cap vs \
                 cross +{bc} -{wc}, vs stock +{bs} -{ws} of {} windows; ≤ 100 ms: stock {} \
                 cross {} cap {} dup {}; one link alone could carry {n_carried}, of those \
                 ≤ 100 ms: cross {} cap {} dup {}",
                median(stock),
                median(cross),
                median(cap),
                median(dup),
                cap.len(),
                within(stock),
                within(cross),
                within(cap),
                within(dup),
                within_carried(cross),
                within_carried(cap),
                within_carried(dup),
            );
            assert!(median(dup) <= median(stock), "{file} {t}");
            assert!(median(dup) <= median(cross), "{file} {t}");
            if t == "tmobile" {
                assert!(
                    within(dup) >= DUP_TMOBILE_WITHIN[k] && within(dup) > within(cap),
                    "{file}: dup ≤ 100 ms in {} of {} windows, cap in {}",
                    within(dup),
                    dup.len(),
                    within(cap)
                );
            }
            if let Some(j) = ["att", "tmobile"].iter().position(|&x| x == t) {
                let (n, c, d) = CARRIED[k][j];
                assert_eq!(
                    n_carried, n,
                    "{file} {t}: windows one link alone could carry"
                );
                assert!(
                    within_carried(cap) >= c && within_carried(dup) >= d,
                    "{file} {t}: of {n} windows one link could carry, ≤ 100 ms: cap {}, dup {}",
                    within_carried(cap),
                    within_carried(dup)
                );
            } else {
                // UMTS (2 Mbit/s) and Verizon (5 Mbit/s with dips): no window LTE could carry.
                assert_eq!(n_carried, 0, "{file} {t}");
            }
            assert!(median(cap) <= median(stock), "{file} {t}");
            assert!(median(cap) <= median(cross), "{file} {t}");
            assert!(
                bc >= wc,
                "{file} {t}: better than cross in {bc}, worse in {wc}"
            );
            assert!(
                bs > ws,
                "{file} {t}: better than stock in {bs}, worse in {ws}"
            );
        }
    }
}

/// E7 and E8 with 802.11p's signal replayed from the five drives (LTE a steady 20 Mbit/s),
/// one repetition: the replay steps once a second, so the link can fall silent between two
/// samples with no warning. The capacity-aware modes watch an active radio link once LTE has
/// been seen carrying the stream (`SetWatch`): what it had in flight goes over LTE about one
/// RTT after its acknowledgements stop, not at its RTO. Per drive, `cap`'s worst handover
/// window is no worse than `cross`'s and stock's, and `cap` keeps the p99 delay ≤ 100 ms in
/// every window but the counts below, as measured (none: E8 drive 4 had one, 145 ms, until the
/// backup stayed active beside a returning 802.11p whose window restarted small).
const REPLAY_CAP_OVER_100: [[usize; 5]; 2] = [[0, 0, 0, 0, 0], [0, 0, 0, 0, 0]];

#[test]
fn capacity_aware_modes_ride_out_drops_the_signal_replay_does_not_announce() {
    let traces = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces/signal");
    assert!(
        traces.is_dir(),
        "the signal-replay runs need {} (absent)",
        traces.display()
    );
    const P99: &str = "delay_p99_event_ms";
    for (k, file) in ["e7-v2i-signal-replay.toml", "e8-v2i-signal-replay.toml"]
        .into_iter()
        .enumerate()
    {
        let w = windows_with(file, &["repetitions=1"], &[P99]);
        for d in 1..=5 {
            let worst = |p: &str| {
                w[&format!("r{d}-{p}")][P99]
                    .iter()
                    .copied()
                    .fold(0.0, f64::max)
            };
            let cap = &w[&format!("r{d}-cap")][P99];
            let over = cap.iter().filter(|&&x| x > 100.0).count();
            eprintln!(
                "{file} drive {d}: worst window stock {:.0} cross {:.0} cap {:.0} dup {:.0} ms; \
                 cap > 100 ms in {over} of {}",
                worst("stock"),
                worst("cross"),
                worst("cap"),
                worst("dup"),
                cap.len()
            );
            assert!(worst("cap") <= worst("cross"), "{file} drive {d}");
            assert!(worst("cap") <= worst("stock"), "{file} drive {d}");
            assert!(
                over <= REPLAY_CAP_OVER_100[k][d - 1],
                "{file} drive {d}: cap > 100 ms in {over} windows"
            );
        }
    }
}

#[test]
fn e9_cross_layer_uses_the_recovered_path_within_a_sample_and_two_rtts() {
    let r = run("e9-v2i-recovery.toml", &[]);
    let rec = |v: &str| r[v]["recovery_ms"];
    // One beacon period (100 ms) + 2 RTT of the 802.11p path (2 × 16 ms).
    assert!(rec("cross") <= 132.0, "{r:?}");
    assert!(rec("stock") >= 3.0 * rec("cross"), "{r:?}");
}

#[test]
fn e10_cross_layer_moves_more_bytes_on_the_grid() {
    let traces = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces/cellular");
    if !traces.is_dir() {
        eprintln!(
            "skipped: E10 runs on a real cellular trace and {} is absent",
            traces.display()
        );
        return;
    }
    let r = run("e10-grid.toml", &["repetitions=1", "duration=\"600s\""]);
    let mb = |v: &str, k: &str| r[v][k];
    assert!(
        mb("cross", "delivered_mb") > mb("stock", "delivered_mb"),
        "{r:?}"
    );
    assert!(
        mb("cross", "link.its.mb") > mb("stock", "link.its.mb"),
        "{r:?}"
    );
}

#[test]
fn smoothing_trades_flips_for_a_later_reaction() {
    let r = run_full(
        "pingpong.toml",
        &[
            "sweep.\"link.1.alpha\"=[1.0, 0.1]",
            "sweep.\"link.1.hysteresis_db\"=[0.0]",
        ],
    );
    let fast = &r["alpha=1.0-hysteresis_db=0.0"];
    let slow = &r["alpha=0.1-hysteresis_db=0.0"];
    assert!(
        fast["flips"].mean >= 2.0 * slow["flips"].mean,
        "{fast:?} {slow:?}"
    );
    assert!(
        slow["max_gap_ms"].median > fast["max_gap_ms"].median,
        "{fast:?} {slow:?}"
    );
}

/// E13, shortened: 60 s of iperf instead of 180, six runs per variant.
fn e13(file: &str) -> BTreeMap<String, BTreeMap<String, Summary>> {
    run_full(
        file,
        &[
            "repetitions=6",
            "duration=\"150s\"",
            "app.stop=\"80s\"",
            "flow.0.start=\"85s\"",
            "flow.1.start=\"110s\"",
        ],
    )
}

const MULTI: [&str; 4] = ["mfxm", "mpxm", "mmfxfm", "mmpxm"];

#[test]
fn e13_homogeneous_multi_interface_carries_two_to_three_times_and_hmm_part_path_least_redundant() {
    let r = e13("e13-manet-homogeneous.toml");
    let m = |v: &str, k: &str| r[v][k].median;
    let single = (m("tm", "throughput_mbps") + m("mfm", "throughput_mbps")) / 2.0;
    for v in MULTI {
        let ratio = m(v, "throughput_mbps") / single;
        assert!(
            (2.0..=3.0).contains(&ratio),
            "{v}: {ratio:.2}× the single-interface mean; {r:?}"
        );
        // The 1.8 MB file: at most half TM's time (the seed: a third to a quarter).
        let t = m(v, "flow.file1_8MB.completion_s") / m("tm", "flow.file1_8MB.completion_s");
        assert!(t <= 0.5, "{v}: {t:.2} of TM's transfer time");
    }
    let least = r
        .iter()
        .min_by(|a, b| {
            a.1["redundant_per_mb"]
                .median
                .total_cmp(&b.1["redundant_per_mb"].median)
        })
        .unwrap()
        .0;
    assert_eq!(least, "mmpxm", "{r:?}");
}

#[test]
fn e13_heterogeneous_multi_interface_still_beats_one_interface() {
    let r = e13("e13-manet-heterogeneous.toml");
    let m = |v: &str, k: &str| r[v][k].median;
    for v in MULTI {
        let ratio = m(v, "throughput_mbps") / m("tm", "throughput_mbps");
        assert!(ratio >= 1.3, "{v}: {ratio:.2}× TM; {r:?}");
    }
}

#[test]
fn e14_transfer_time_rises_steeply_below_six_rb() {
    let r = run(
        "e14-manet-buffer.toml",
        &[
            "repetitions=3",
            "sweep.\"connection.receive_buffer\"=[\"6144B\", \"18432B\", \"153600B\", \"614400B\"]",
        ],
    );
    // RB = 3072 B: 2, 6, 50 and 200 · RB.
    for v in ["mmfxm", "mmpxm", "pmmfxm", "pmmpxm"] {
        let t = |rb: &str| r[&format!("{v}-{rb}")]["completion_s"];
        let (t2, t6) = (t("6144B"), t("18432B"));
        let large = (t("153600B") + t("614400B")) / 2.0;
        assert!(t2 >= 1.4 * t6, "{v}: 2·RB {t2:.1} s, 6·RB {t6:.1} s");
        assert!(
            t6 <= 1.35 * large,
            "{v}: 6·RB {t6:.1} s, 50–200·RB {large:.1} s"
        );
    }
}

/// E11 (seed 003 Fig. 8): the tunnel carries about the sum of the two links, each alone what
/// its rate allows. The tunnel's own headers (the host's IPv4/TCP header and the end-to-end
/// connection's inside each tunnel packet) take about 6 % of the sum.
#[test]
fn e11_the_tunnel_carries_about_the_sum_of_both_links() {
    let r = run("e11-tunnel-aggregation.toml", &["repetitions=2"]);
    let t = |v: &str| r[v]["transfer_mbps"];
    assert!(t("fixed") >= 0.9 * 10.0 && t("fixed") <= 10.0, "{r:?}");
    assert!(t("cellular") >= 0.9 * 5.0 && t("cellular") <= 5.0, "{r:?}");
    let sum = t("fixed") + t("cellular");
    assert!(t("tunnel") >= 0.9 * sum && t("tunnel") <= sum, "{r:?}");
}

/// E12, RTT (seed 003 Fig. 9): the tunnel stays near the sum at every cellular RTT; HYA 1:1
/// stays below it at every RTT, and HYA 2:1 matches it only while the RTTs are close enough
/// for its reorder buffer (falling far below once they differ by more than its out-of-order
/// timeout).
#[test]
fn e12_the_tunnel_beats_hya_as_the_cellular_rtt_grows() {
    let r = run(
        "e12-tunnel-vs-hya-rtt.toml",
        &[
            "repetitions=2",
            r#"sweep."link.1.delay"=["15ms","25ms","40ms"]"#,
        ],
    );
    let t = |v: &str, d: &str| r[&format!("{v}-{d}")]["transfer_mbps"];
    for d in ["15ms", "25ms", "40ms"] {
        assert!(t("tunnel", d) >= 12.5, "{d}: {r:?}");
        assert!(t("hya11", d) < 0.8 * t("tunnel", d), "{d}: {r:?}");
    }
    // Slightly, if at all, lower at the longest RTT.
    assert!(t("tunnel", "40ms") >= 0.95 * t("tunnel", "15ms"), "{r:?}");
    assert!(t("hya21", "15ms") >= 0.95 * t("tunnel", "15ms"), "{r:?}");
    assert!(t("hya21", "40ms") < 0.5 * t("tunnel", "40ms"), "{r:?}");
}

/// E12, loss (seed 003 Fig. 10): from 0.01 % to 5 % loss on the fixed link HYA 1:1 loses far
/// more of its throughput than the tunnel (paper: 82.6 % against 59.3 %), HYA 2:1 too; under
/// heavy loss the tunnel keeps about the better link's rate (cellular alone, E11's variant,
/// less the tunnel's headers), HYA far below it.
#[test]
fn e12_hya_loses_far_more_than_the_tunnel_as_the_fixed_link_loses_packets() {
    let r = run(
        "e12-tunnel-vs-hya-loss.toml",
        &["repetitions=2", r#"sweep."link.0.loss"=[0.0001,0.05,0.2]"#],
    );
    let t = |v: &str, l: &str| r[&format!("{v}-{l}")]["transfer_mbps"];
    let drop = |v: &str| 1.0 - t(v, "0.05") / t(v, "0.0001");
    assert!(drop("tunnel") <= 0.7, "{r:?}");
    assert!(drop("hya11") >= 0.75, "{r:?}");
    assert!(drop("hya11") >= drop("tunnel") + 0.15, "{r:?}");
    assert!(drop("hya21") >= drop("tunnel") + 0.15, "{r:?}");
    let alone = run("e11-tunnel-aggregation.toml", &["repetitions=1"])["cellular"]["transfer_mbps"];
    assert!(
        t("tunnel", "0.2") >= 0.9 * alone,
        "tunnel {r:?}, cellular alone {alone}"
    );
    for v in ["hya11", "hya21"] {
        assert!(t(v, "0.2") <= 0.2 * alone, "{v}: {r:?}");
    }
}

/// E11's tunnel over a 100 Mbit/s fixed link and a 1 Mbit/s cellular one (RTT 50 ms each),
/// 200 MB, 3 runs: with minRTT the slow link's queue holds the in-order stream back and the
/// tunnel carries less than a third of what the fixed link alone does; the earliest-arrival
/// scheduler (`arrival`) carries at least 0.8 × the fixed link alone and at least 2 × minRTT.
#[test]
fn arrival_scheduler_keeps_a_slow_link_from_holding_the_tunnel_back() {
    let common = [
        "link.0.rate=100Mbit",
        "app.bytes=200MB",
        "duration=120s",
        "repetitions=3",
    ];
    let mut tunnel_set = common.to_vec();
    tunnel_set.extend([
        "link.1.rate=1Mbit",
        r#"sweep."connection.scheduler"=["minrtt","arrival"]"#,
    ]);
    let t = run_only(
        "e11-tunnel-aggregation.toml",
        &tunnel_set,
        &["tunnel-minrtt", "tunnel-arrival"],
    );
    let alone = run_only("e11-tunnel-aggregation.toml", &common, &["fixed"]);
    let mbps =
        |m: &BTreeMap<String, BTreeMap<String, Summary>>, v: &str| m[v]["transfer_mbps"].median;
    let (minrtt, arrival, fixed) = (
        mbps(&t, "tunnel-minrtt"),
        mbps(&t, "tunnel-arrival"),
        mbps(&alone, "fixed"),
    );
    eprintln!(
        "100 + 1 Mbit/s: minrtt {minrtt:.1}, arrival {arrival:.1}; fixed alone {fixed:.1} Mbit/s"
    );
    assert!(
        minrtt < fixed / 2.0,
        "minRTT {minrtt} against {fixed} alone: the case no longer shows the problem"
    );
    assert!(
        arrival >= 0.8 * fixed,
        "arrival {arrival} against {fixed} alone"
    );
    assert!(
        arrival >= 2.0 * minrtt,
        "arrival {arrival} against minRTT {minrtt}"
    );
}
