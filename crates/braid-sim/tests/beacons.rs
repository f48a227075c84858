//! `world::radio_beacons` is the schedule the simulator runs: for E7's radio model (vehicle,
//! shadowing, coverage from beacons) and for a signal replay, the samples the path manager
//! hears, the coverage losses and the recovery metric's starts equal what a simulation of the
//! same variant and seed records.
//! `braid lab` replays this schedule on a real link. A radio link keeps its configured loss
//! beside the signal's.

use std::path::Path;
use std::time::Duration;

use braid_sim::radio::Crossing;
use braid_sim::{scenario, world};

/// Compares every variant of `file` (with `overrides`); the number of recovery starts compared.
fn check(file: &str, overrides: &[&str]) -> usize {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let set: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    let plan = scenario::load(&root.join(file), &set).unwrap();
    let (mut compared, mut crossings) = (0, 0);
    for v in &plan.variants {
        for seed in [1, 5] {
            let beacons = world::radio_beacons(v, seed);
            let rec = world::run(v, seed);
            // The samples the path manager hears (audible beacons, replayed samples).
            let heard: Vec<(u64, u8, f32)> = beacons
                .iter()
                .filter(|b| b.heard())
                .map(|b| (b.t.as_micros() as u64, b.link as u8, b.rss as f32))
                .collect();
            let recorded: Vec<(u64, u8, f32)> =
                rec.rss.iter().map(|&(t, l, rss, _)| (t, l, rss)).collect();
            assert_eq!(heard, recorded, "{file} {} seed {seed}", v.name);
            // Coverage losses, dated from the first beacon below the cut-off.
            let lost: Vec<(Duration, usize)> = beacons
                .iter()
                .filter_map(|b| b.lost_since.map(|t| (t, b.link)))
                .collect();
            let events: Vec<(Duration, usize)> =
                rec.loss_events.iter().map(|e| (e.t, e.link)).collect();
            assert_eq!(lost, events, "{file} {} seed {seed}", v.name);
            // The recovery metric's starts: the smoothed signal crossing T + h upwards.
            let up: Vec<(Duration, usize)> = beacons
                .iter()
                .filter(|b| b.crossing == Some(Crossing::Up))
                .map(|b| (b.t, b.link))
                .collect();
            let starts: Vec<(Duration, usize)> =
                rec.recoveries.iter().map(|r| (r.t, r.link)).collect();
            assert_eq!(up, starts, "{file} {} seed {seed}", v.name);
            crossings += up.len();
            compared += heard.len();
        }
    }
    assert!(compared > 0, "{file}: no beacon compared");
    crossings
}

#[test]
fn radio_model_beacons_are_the_simulators() {
    let _ = check(
        "scenarios/e7-v2i-aggregation.toml",
        &["duration=90s", "repetitions=1"],
    );
}

#[test]
fn recovery_starts_are_the_simulators() {
    // E9: the vehicle leaves and re-enters coverage; every re-entry starts a recovery.
    let starts = check(
        "scenarios/e9-v2i-recovery.toml",
        &["duration=90s", "repetitions=1"],
    );
    assert!(starts >= 2, "E9: {starts} recovery starts compared");
}

#[test]
fn signal_replay_beacons_are_the_simulators() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    if !root.join("../shared/traces/signal").exists() {
        eprintln!("SKIPPED: ../shared/traces/signal is absent (signal replays)");
        return;
    }
    let _ = check(
        "scenarios/e7-v2i-signal-replay.toml",
        &["duration=60s", "repetitions=1"],
    );
}

/// A radio link's configured `loss` stays beside its signal's losses: a frame is lost to
/// either. Before, the first beacon replaced it with the signal's packet error rate.
#[test]
fn a_radio_keeps_the_links_configured_loss() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let lost_share = |loss: &str| {
        let set = vec!["duration=30s".to_string(), format!("link.its.loss={loss}")];
        let plan = scenario::load(&root.join("scenarios/e7-v2i-aggregation.toml"), &set).unwrap();
        let v = plan.variants.iter().find(|v| v.name == "stock").unwrap();
        let rec = world::run(v, 1);
        let its = rec.link_names.iter().position(|n| n == "its").unwrap();
        let (a, b) = &rec.link_stats[its];
        let lost = a.dropped_loss + b.dropped_loss;
        lost as f64 / (lost + a.sent + b.sent) as f64
    };
    let (signal, both) = (lost_share("0"), lost_share("0.25"));
    assert!(
        both >= 0.23 && both > signal + 0.15,
        "lost on the radio link: {both:.3} with loss = 0.25, {signal:.3} with the signal alone"
    );
}
