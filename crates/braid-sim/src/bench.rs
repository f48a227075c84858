//! `braid sim --bench`: simulation speed on a fixed workload, a 2-path 2×100 Mbit/s bulk
//! transfer.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::scenario;
use crate::world;

/// The benchmark scenario.
pub const SCENARIO: &str = r#"
name = "bench-2x100"
description = "benchmark: bulk transfer over two 100 Mbit/s paths"
duration = "20s"
[connection]
scheduler = "minrtt"
congestion = "cubic"
# About four bandwidth-delay products: full rate (≈194 Mbit/s after warmup) with a working
# set that stays in cache.
send_buffer = "2MB"
receive_buffer = "2MB"
[[link]]
name = "a"
rate = "100Mbit"
delay = "10ms"
queue = 200
[[link]]
name = "b"
rate = "100Mbit"
delay = "15ms"
queue = 200
[app]
kind = "bulk"
start = "0.1s"
"#;

#[derive(Debug, Clone)]
pub struct BenchResult {
    pub events: u64,
    pub simulated: Duration,
    pub wall: Duration,
    pub delivered_mbit: f64,
}

impl BenchResult {
    pub fn events_per_sec(&self) -> f64 {
        self.events as f64 / self.wall.as_secs_f64()
    }

    pub fn speedup(&self) -> f64 {
        self.simulated.as_secs_f64() / self.wall.as_secs_f64()
    }
}

/// Runs the benchmark `repeats` times on this thread; returns every run, fastest first.
pub fn run(repeats: usize) -> Vec<BenchResult> {
    let plan = scenario::load_str(SCENARIO, "<bench>", Path::new("."), &[])
        .expect("the benchmark scenario is valid");
    let v = &plan.variants[0];
    let mut all = Vec::new();
    for _ in 0..repeats.max(1) {
        let t0 = Instant::now();
        let rec = world::run(v, 1);
        let wall = t0.elapsed();
        let delivered: u64 = rec.deliveries.iter().map(|&(_, b)| u64::from(b)).sum();
        let r = BenchResult {
            events: rec.events,
            simulated: v.scenario.duration.0,
            wall,
            delivered_mbit: delivered as f64 * 8.0 / 1e6,
        };
        all.push(r);
    }
    all.sort_by_key(|r| r.wall);
    all
}
