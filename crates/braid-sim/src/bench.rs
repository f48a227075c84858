//! `braid sim --bench`: simulation speed on fixed workloads: a 2-path 2×100 Mbit/s bulk
//! transfer (the two-node form), and seed 004's heterogeneous MANET (E13: 8 nodes, 52 links,
//! hellos, routing, three transfers per run) with the memory a run holds per node, on E13 and
//! on a 64-node grid of relays.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::scenario;
use crate::world::{self, RunOptions, World};

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

/// E13 heterogeneous, every variant (the shipped scenario file).
pub const MANET: &str = include_str!("../../../scenarios/e13-manet-heterogeneous.toml");

/// A run of a topology: its speed and the heap it holds per node.
#[derive(Debug, Clone)]
pub struct TopologyResult {
    pub name: String,
    pub nodes: usize,
    pub links: usize,
    pub runs: usize,
    pub events: u64,
    pub simulated: Duration,
    pub wall: Duration,
    /// Heap held by the largest run at its end (connections, buffers, tables), per node.
    pub bytes_per_node: Option<f64>,
}

impl TopologyResult {
    pub fn speedup(&self) -> f64 {
        self.simulated.as_secs_f64() / self.wall.as_secs_f64()
    }
}

/// Runs every variant of `text` once (seed 1) on this thread. `heap` reads the bytes the
/// process has allocated (the caller's instrumented allocator), when there is one.
fn topology(text: &str, name: &str, heap: Option<&dyn Fn() -> usize>) -> TopologyResult {
    let plan = scenario::load_str(text, name, Path::new("."), &[])
        .expect("the benchmark scenario is valid");
    let t = &plan.variants[0].topology;
    let (nodes, links) = (t.nodes.len(), t.links.len());
    let mut r = TopologyResult {
        name: name.into(),
        nodes,
        links,
        runs: plan.variants.len(),
        events: 0,
        simulated: Duration::ZERO,
        wall: Duration::ZERO,
        bytes_per_node: None,
    };
    for v in &plan.variants {
        let before = heap.map(|h| h());
        let t0 = Instant::now();
        let mut w = World::new(v, 1, RunOptions::default());
        w.run();
        r.wall += t0.elapsed();
        if let (Some(h), Some(b)) = (heap, before) {
            let per = h().saturating_sub(b) as f64 / nodes as f64;
            r.bytes_per_node = Some(r.bytes_per_node.map_or(per, |x: f64| x.max(per)));
        }
        let rec = w.finish();
        r.events += rec.events;
        r.simulated += v.scenario.duration.0;
    }
    r
}

/// A `side` × `side` grid of relays (one interface each, 11 Mbit/s links to the neighbours
/// on one channel per row), seed 004's routing, a 3.6 MB file from one corner to the other.
pub fn grid(side: usize) -> String {
    let mut t = format!("name = \"grid-{side}x{side}\"\nduration = \"60s\"\n");
    for y in 0..side {
        for x in 0..side {
            t += &format!("[[node]]\nname = \"n{x}_{y}\"\n");
        }
    }
    let mut link = |a: String, b: String, medium: usize| {
        t += &format!(
            "[[link]]\nname = \"{a}-{b}\"\na = \"{a}.e0\"\nb = \"{b}.e0\"\nrate = \"11Mbit\"\ndelay = \"2ms\"\nmedium = \"row{medium}\"\n"
        );
    };
    for y in 0..side {
        for x in 0..side {
            if x + 1 < side {
                link(format!("n{x}_{y}"), format!("n{}_{y}", x + 1), y);
            }
            if y + 1 < side {
                link(format!("n{x}_{y}"), format!("n{x}_{}", y + 1), y);
            }
        }
    }
    let last = side - 1;
    t += &format!(
        "[app]\nkind = \"file\"\nbytes = \"3.6MB\"\nclient = \"n{last}_{last}\"\nserver = \"n0_0\"\nstart = \"5s\"\n[routing]\npolicy = \"manet\"\ndead = 2\nwindow = 4\n"
    );
    t
}

/// E13 heterogeneous (every variant), grids of 64 and 225 nodes, on this thread.
pub fn topologies(heap: Option<&dyn Fn() -> usize>) -> Vec<TopologyResult> {
    vec![
        topology(MANET, "e13-manet-heterogeneous", heap),
        topology(&grid(8), "grid-8x8", heap),
        topology(&grid(15), "grid-15x15", heap),
    ]
}
