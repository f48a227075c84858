//! `braid sim`.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use braid_sim::{bench, pcap, plot, report, runner, scenario};
use clap::Args;

#[derive(Debug, Args)]
pub struct SimArgs {
    /// Scenario file (TOML), e.g. scenarios/e3-rtt-below-rtomin.toml.
    #[arg(required_unless_present = "bench")]
    file: Option<PathBuf>,
    /// Override a scenario value, e.g. --set connection.reinjection=rej1 --set link.0.rate=50Mbit.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Sweep a scenario key over values: one variant per value (per combination when given
    /// several times, and with the file's own [sweep]), e.g. --sweep link.0.delay=10ms,20ms.
    #[arg(long = "sweep", value_name = "KEY=A,B,C")]
    sweep: Vec<String>,
    /// Print the results as JSON (stable keys) instead of a table.
    #[arg(long, env = "BRAID_SIM_JSON")]
    json: bool,
    /// Write per-run CSV time series and summary.json to this directory.
    #[arg(long, value_name = "DIR", env = "BRAID_SIM_OUT")]
    out: Option<PathBuf>,
    /// Write SVG figures and an index.html of the results to this directory.
    #[arg(long, value_name = "DIR", env = "BRAID_SIM_REPORT")]
    report: Option<PathBuf>,
    /// Write packet captures to this directory: one pcap file per run and link direction
    /// (`<variant>.rep<r>.<link>.<from>-<to>.pcap`, braid datagrams in IPv4/UDP with the
    /// simulated time and addresses) and captures.json listing them; open them with
    /// dist/braid.lua.
    #[arg(long, value_name = "DIR")]
    pcap: Option<PathBuf>,
    /// Parallel runs (default: available cores).
    #[arg(long, value_name = "N", env = "BRAID_SIM_JOBS")]
    jobs: Option<usize>,
    /// Repetitions per variant (overrides the scenario's `repetitions`).
    #[arg(long, value_name = "N")]
    reps: Option<u32>,
    /// Run only this variant (repeat for several), e.g. --variant tmobile-cap; its runs keep
    /// the seeds they have among the others.
    #[arg(long = "variant", value_name = "NAME")]
    variants: Vec<String>,
    /// Base seed (overrides the scenario's `seed`; a scenario file's integers end at 2^63 − 1).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(0..=i64::MAX as u64))]
    seed: Option<u64>,
    /// No progress output.
    #[arg(long, short)]
    quiet: bool,
    /// Measure simulation speed on a 2×100 Mbit/s bulk transfer instead of running a file.
    #[arg(long)]
    bench: bool,
}

pub fn run(a: SimArgs) -> anyhow::Result<ExitCode> {
    if a.bench {
        return run_bench(a.quiet);
    }
    let Some(file) = a.file else {
        bail!("a scenario file is required");
    };
    let mut set = braid_sim::sweep::overrides(&a.sweep, &a.set).map_err(anyhow::Error::msg)?;
    set.extend(a.set.iter().cloned());
    if let Some(r) = a.reps {
        set.push(format!("repetitions={r}"));
    }
    if let Some(s) = a.seed {
        set.push(format!("seed={s}"));
    }
    let plan = scenario::load_variants(&file, &set, &a.variants)?;
    let jobs = a.jobs.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    let total = plan.variants.len() * plan.base().repetitions as usize;
    let quiet = a.quiet;
    if !quiet {
        eprintln!(
            "braid sim: {} — {} variant(s) × {} run(s), {} job(s)",
            plan.name(),
            plan.variants.len(),
            plan.base().repetitions,
            jobs.min(total)
        );
    }
    if let Some(dir) = &a.pcap {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the capture directory {}", dir.display()))?;
    }
    let tty = std::io::stderr().is_terminal();
    let progress = move |p: runner::Progress<'_>| {
        if quiet {
            return;
        }
        let line = format!(
            "[{}/{}] {} seed {}: {:.0} s simulated in {:.1} s",
            p.done,
            p.total,
            p.variant,
            p.seed,
            p.simulated.as_secs_f64(),
            p.wall.as_secs_f64()
        );
        let mut err = std::io::stderr().lock();
        if tty {
            let _ = write!(err, "\r\x1b[2K{line}");
            if p.done == p.total {
                let _ = writeln!(err);
            }
        } else {
            let _ = writeln!(err, "{line}");
        }
    };
    let result = runner::run(
        &plan,
        &runner::Options {
            jobs,
            records: match (a.out.is_some(), a.report.is_some()) {
                (false, false) => runner::Records::None,
                (false, true) => runner::Records::FirstTraced,
                (true, false) => runner::Records::All,
                (true, true) => runner::Records::AllFirstTraced,
            },
            pcap: a.pcap.clone(),
        },
        &progress,
    );
    if let Some(dir) = &a.pcap {
        let failed = result
            .variants
            .iter()
            .flat_map(|v| &v.runs)
            .find_map(|r| r.captures.as_ref()?.as_ref().err());
        if let Some(e) = failed {
            bail!("packet capture failed: {e}");
        }
        pcap::write_index(&result, dir)
            .with_context(|| format!("cannot write the capture index in {}", dir.display()))?;
        if !quiet {
            let n: usize = result
                .variants
                .iter()
                .flat_map(|v| &v.runs)
                .filter_map(|r| r.captures.as_ref()?.as_ref().ok())
                .map(Vec::len)
                .sum();
            eprintln!(
                "braid sim: {n} packet capture(s) in {}, listed in {}",
                dir.display(),
                dir.join(pcap::INDEX).display()
            );
        }
    }
    if let Some(dir) = &a.out {
        report::write_runs(&result, dir)
            .with_context(|| format!("cannot write results to {}", dir.display()))?;
        if !quiet {
            eprintln!("braid sim: per-run CSV in {}", dir.display());
        }
    }
    if let Some(dir) = &a.report {
        let figs = plot::write_report(&result, dir)
            .with_context(|| format!("cannot write the report to {}", dir.display()))?;
        if !quiet {
            eprintln!(
                "braid sim: {} figure(s), open {}",
                figs.len(),
                dir.join("index.html").display()
            );
        }
    }
    let mut out = std::io::stdout().lock();
    if a.json {
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&report::json(&result))?
        )?;
    } else {
        write!(out, "{}", report::table(&result))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn run_bench(quiet: bool) -> anyhow::Result<ExitCode> {
    const RUNS: usize = 5;
    if !quiet {
        eprintln!(
            "braid sim --bench: 2×100 Mbit/s bulk transfer, 20 s simulated, {RUNS} runs on one core"
        );
    }
    let runs = bench::run(RUNS);
    let best = &runs[0];
    let median = &runs[runs.len() / 2];
    println!(
        "events: {}  events/s: {:.0} (median run {:.0})  delivered: {:.0} Mbit ({:.1} Mbit/s)",
        best.events,
        best.events_per_sec(),
        median.events_per_sec(),
        best.delivered_mbit,
        best.delivered_mbit / best.simulated.as_secs_f64()
    );
    println!(
        "simulated {:.1} s in {:.3} s wall: {:.1} x real time (best of {RUNS}; median {:.1} x)",
        best.simulated.as_secs_f64(),
        best.wall.as_secs_f64(),
        best.speedup(),
        median.speedup()
    );
    if !quiet {
        eprintln!(
            "braid sim --bench: seed 004's MANET (E13 heterogeneous, every variant once) and a 64-node grid of relays, on one core"
        );
    }
    let heap: &dyn Fn() -> usize = &crate::heap_bytes;
    for t in bench::topologies(Some(heap)) {
        println!(
            "{}: {} nodes, {} links, {} run(s): simulated {:.0} s in {:.2} s wall: {:.1} x real time, {} events; heap held per node {}",
            t.name,
            t.nodes,
            t.links,
            t.runs,
            t.simulated.as_secs_f64(),
            t.wall.as_secs_f64(),
            t.speedup(),
            t.events,
            t.bytes_per_node
                .map_or("-".to_string(), |b| format!("{:.0} kB", b / 1e3))
        );
    }
    Ok(ExitCode::SUCCESS)
}
