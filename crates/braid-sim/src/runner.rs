//! Runs every variant × repetition of a plan, in parallel, with results in a fixed order.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::scenario::{Paper, Plan};
use crate::world::{self, RunRecord};
use crate::{metrics, pcap};

/// Summary of one metric across runs (event values pooled).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub mean: f64,
    /// Sample standard deviation (0 for one value).
    pub std: f64,
    pub median: f64,
    pub q1: f64,
    pub q3: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

impl Summary {
    pub fn of(values: &[f64]) -> Option<Summary> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let var = if v.len() > 1 {
            v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (v.len() - 1) as f64
        } else {
            0.0
        };
        Some(Summary {
            mean,
            std: var.sqrt(),
            median: metrics::quantile(&v, 0.5),
            q1: metrics::quantile(&v, 0.25),
            q3: metrics::quantile(&v, 0.75),
            min: v[0],
            max: v[v.len() - 1],
            n: v.len(),
        })
    }
}

#[derive(Debug, Clone)]
pub struct RunResult {
    pub seed: u64,
    pub metrics: BTreeMap<String, Vec<f64>>,
    /// Kept when the caller asked for per-run output.
    pub record: Option<RunRecord>,
    pub events: u64,
    pub wall: Duration,
    /// With [`Options::pcap`]: the run's capture files, or why they could not be written.
    pub captures: Option<Result<Vec<pcap::CaptureFile>, String>>,
}

#[derive(Debug, Clone)]
pub struct VariantResult {
    pub name: String,
    pub settings: BTreeMap<String, String>,
    pub runs: Vec<RunResult>,
    pub summary: BTreeMap<String, Summary>,
}

#[derive(Debug, Clone)]
pub struct PlanResult {
    pub file: String,
    pub scenario: String,
    pub description: String,
    pub seed: u64,
    pub repetitions: u32,
    pub duration: Duration,
    pub paper: Option<Paper>,
    pub show: Vec<String>,
    pub variants: Vec<VariantResult>,
    pub wall: Duration,
}

#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Worker threads.
    pub jobs: usize,
    /// Which runs keep their record.
    pub records: Records,
    /// Write every run's packet captures to this directory (which must exist).
    pub pcap: Option<PathBuf>,
}

/// Which runs keep their [`RunRecord`] in the result.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Records {
    /// None: metrics only.
    #[default]
    None,
    /// The first repetition of every variant, with every received data sequence number
    /// (for `--report`).
    FirstTraced,
    /// Every run (for `--out`).
    All,
    /// Every run, and the first repetition of every variant traced (`--out` with `--report`).
    AllFirstTraced,
}

/// Progress of one finished run, for display.
#[derive(Debug, Clone)]
pub struct Progress<'a> {
    pub done: usize,
    pub total: usize,
    pub variant: &'a str,
    pub seed: u64,
    pub wall: Duration,
    pub simulated: Duration,
}

pub fn run(plan: &Plan, opts: &Options, progress: &(dyn Fn(Progress<'_>) + Sync)) -> PlanResult {
    let started = std::time::Instant::now();
    let base = plan.base();
    let reps = base.repetitions as usize;
    let jobs: Vec<(usize, u64)> = (0..plan.variants.len())
        .flat_map(|v| (0..reps).map(move |r| (v, r as u64)))
        .collect();
    let results: Mutex<Vec<Option<RunResult>>> = Mutex::new(vec![None; jobs.len()]);
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let workers = opts.jobs.clamp(1, jobs.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(v, r)) = jobs.get(i) else { break };
                    let result = run_task(plan, v, r, opts.records, opts.pcap.as_deref());
                    let (seed, wall) = (result.seed, result.wall);
                    results.lock().expect("no worker panicked")[i] = Some(result);
                    let d = done.fetch_add(1, Ordering::Relaxed) + 1;
                    let variant = &plan.variants[v];
                    progress(Progress {
                        done: d,
                        total: jobs.len(),
                        variant: &variant.name,
                        seed,
                        wall,
                        simulated: variant.scenario.duration.0,
                    });
                }
            });
        }
    });
    let mut results = results
        .into_inner()
        .expect("no worker panicked")
        .into_iter();
    let variants = plan
        .variants
        .iter()
        .map(|v| {
            let runs: Vec<RunResult> = (0..reps)
                .map(|_| results.next().flatten().expect("every run finished"))
                .collect();
            VariantResult::of(v, runs)
        })
        .collect();
    PlanResult::of(plan, variants, started.elapsed())
}

/// Runs repetition `rep` of variant `variant` (index into `plan.variants`): one task, the unit
/// [`run`] spreads over threads and the Python package over processes or machines. Its seed is
/// the variant's seed + `rep`, so the result depends only on (plan, variant, rep).
pub fn run_one(plan: &Plan, variant: usize, rep: u64, records: Records) -> RunResult {
    run_task(plan, variant, rep, records, None)
}

/// [`run_one`], capturing packets into `pcap` when given.
fn run_task(
    plan: &Plan,
    variant: usize,
    rep: u64,
    records: Records,
    pcap: Option<&Path>,
) -> RunResult {
    let v = variant;
    let variant = &plan.variants[v];
    let seed = variant.scenario.seed.wrapping_add(rep);
    let t0 = std::time::Instant::now();
    let traced = rep == 0 && matches!(records, Records::FirstTraced | Records::AllFirstTraced);
    let opts = world::RunOptions {
        trace_dsn: traced,
        verify: false,
    };
    let (record, captures) = match pcap {
        None => (world::run_with(variant, seed, opts), None),
        Some(dir) => {
            let mut sink = pcap::PcapCapture::new(dir, plan, v, rep);
            let record = world::run_captured(variant, seed, opts, &mut sink);
            let files = sink.finish(&record);
            (record, Some(files))
        }
    };
    let keep = match records {
        Records::None => false,
        Records::FirstTraced => rep == 0,
        Records::All | Records::AllFirstTraced => true,
    };
    let wall = t0.elapsed();
    let metrics = metrics::compute(&record, &variant.scenario.metrics);
    let events = record.events;
    RunResult {
        seed,
        metrics,
        record: keep.then_some(record),
        events,
        wall,
        captures,
    }
}

impl VariantResult {
    /// A variant's runs with their metrics pooled and summarised.
    pub fn of(v: &crate::scenario::Variant, runs: Vec<RunResult>) -> VariantResult {
        let mut pooled: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for r in &runs {
            for (k, vals) in &r.metrics {
                pooled.entry(k.clone()).or_default().extend(vals);
            }
        }
        let summary = pooled
            .iter()
            .filter_map(|(k, vals)| Summary::of(vals).map(|s| (k.clone(), s)))
            .collect();
        VariantResult {
            name: v.name.clone(),
            settings: v.settings.clone(),
            runs,
            summary,
        }
    }
}

impl PlanResult {
    /// The result of a plan whose variants ran.
    pub fn of(plan: &Plan, variants: Vec<VariantResult>, wall: Duration) -> PlanResult {
        let base = plan.base();
        PlanResult {
            file: plan.file.clone(),
            scenario: base.name.clone(),
            description: base.description.clone(),
            seed: base.seed,
            repetitions: base.repetitions,
            duration: base.duration.0,
            paper: base.paper.clone(),
            show: base.metrics.show.clone(),
            variants,
            wall,
        }
    }
}
