//! `world::radio_beacons` is the schedule the simulator runs: for E7's radio model (vehicle,
//! shadowing, coverage from beacons) and for a signal replay, the samples the path manager
//! hears and the coverage losses equal what a simulation of the same variant and seed records.
//! `braid lab` replays this schedule on a real link.

use std::path::Path;
use std::time::Duration;

use braid_sim::{scenario, world};

fn check(file: &str, overrides: &[&str]) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let set: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    let plan = scenario::load(&root.join(file), &set).unwrap();
    let mut compared = 0;
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
            compared += heard.len();
        }
    }
    assert!(compared > 0, "{file}: no beacon compared");
}

#[test]
fn radio_model_beacons_are_the_simulators() {
    check(
        "scenarios/e7-v2i-aggregation.toml",
        &["duration=90s", "repetitions=1"],
    );
}

#[test]
fn signal_replay_beacons_are_the_simulators() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    if !root.join("../shared/traces/signal").exists() {
        eprintln!("SKIPPED: ../shared/traces/signal is absent (signal replays)");
        return;
    }
    check(
        "scenarios/e7-v2i-signal-replay.toml",
        &["duration=60s", "repetitions=1"],
    );
}
