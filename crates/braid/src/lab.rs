//! `braid lab`: a scenario file on real stacks in real time (see `braid_lab::lab`).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::{Context, bail};
use braid_lab::lab;
use braid_sim::{plot, report, runner, scenario};
use clap::Args;

#[derive(Debug, Args)]
pub struct LabArgs {
    /// Scenario file (TOML), the same `braid sim` takes, e.g. scenarios/e3-rtt-below-rtomin.toml.
    file: PathBuf,
    /// Override a scenario value, e.g. --set duration=40s --set schedule.0.count=3.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// The real endpoints: `tunnel` (braid tunnel client and gateway), `mptcp` (kernel MPTCP,
    /// in-kernel path manager; runs the stock/minrtt variants), `pm` (kernel MPTCP, the
    /// client's subflows managed by `braid pm` with the variant's `pm.mode`) or `mptcpd`
    /// (kernel MPTCP, the client's subflow endpoints made by mptcpd's addr_adv plugin; the
    /// stock variants without backup links).
    #[arg(long, default_value = "tunnel", value_name = "KIND")]
    endpoint: String,
    /// Print the results as JSON (the keys of `braid sim --json`) instead of a table.
    #[arg(long)]
    json: bool,
    /// Write SVG figures and an index.html of the results to this directory.
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
    /// Repetitions per variant (overrides the scenario's `repetitions`).
    #[arg(long, value_name = "N")]
    reps: Option<u32>,
    /// Run only this variant (repeat for several), e.g. --variant tmobile-cap; its runs keep
    /// the seeds they have among the others.
    #[arg(long = "variant", value_name = "NAME")]
    variants: Vec<String>,
    /// Base seed (overrides the scenario's `seed`).
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// Also run the simulator on the same file and print, per metric, the simulator's median,
    /// the lab's and their ratio.
    #[arg(long)]
    compare: bool,
    /// How a CBR application reaches the braid tunnel: `udp` (each message one datagram) or
    /// `tcp` (one inner TCP stream, whose own congestion control and retransmissions then add
    /// to the delays). Default: the scenario's `tunnel.cbr_over` (udp without `[tunnel]`), as
    /// the simulator runs it.
    #[arg(long, value_name = "udp|tcp")]
    cbr_over: Option<String>,
    /// Run bulk and file applications with iperf3 (server and client in the namespaces, its
    /// JSON report read at the end) instead of the lab's own sender and receiver.
    #[arg(long)]
    iperf3: bool,
    /// Keep each run's daemon configurations and logs, the endpoints' final status and the
    /// emulator's counters in this directory (one subdirectory per run).
    #[arg(long, value_name = "DIR")]
    keep: Option<PathBuf>,
    /// Write per-run CSV (time series, deliveries, CBR messages) and metrics to this
    /// directory, as `braid sim --out` does.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// No progress output.
    #[arg(long, short)]
    quiet: bool,
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

pub fn run(a: LabArgs) -> anyhow::Result<ExitCode> {
    let endpoint: lab::Endpoint = a.endpoint.parse().map_err(anyhow::Error::msg)?;
    let mut set = a.set.clone();
    if let Some(r) = a.reps {
        set.push(format!("repetitions={r}"));
    }
    if let Some(s) = a.seed {
        set.push(format!("seed={s}"));
    }
    let plan = scenario::load_variants(&a.file, &set, &a.variants)?;
    lab::check(&plan, endpoint).map_err(anyhow::Error::msg)?;
    if !is_root() {
        bail!("braid lab needs root: it creates network namespaces, veth pairs and TUN devices");
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        bail!("braid lab needs /dev/net/tun (the TUN driver) for the tunnel endpoints");
    }
    let interrupted = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, interrupted.clone())
            .context("cannot install the signal handler")?;
    }
    let opts = lab::Options {
        endpoint,
        braid: std::env::current_exe().context("the braid executable")?,
        interrupted,
        cbr_over_tcp: match a.cbr_over.as_deref() {
            None => None,
            Some("udp") => Some(false),
            Some("tcp") => Some(true),
            Some(other) => bail!("--cbr-over: `{other}` is not udp or tcp"),
        },
        iperf3: a.iperf3,
        keep: a.keep.clone(),
        records: a.out.is_some(),
    };
    let quiet = a.quiet;
    if !quiet {
        eprintln!(
            "braid lab: {} — {} variant(s) × {} run(s) in real time, {:.0} s each, endpoint {}",
            plan.name(),
            plan.variants.len(),
            plan.base().repetitions,
            plan.base().duration.0.as_secs_f64(),
            a.endpoint
        );
    }
    let tty = std::io::stderr().is_terminal();
    let progress = move |p: lab::Progress<'_>| {
        if quiet || (!tty && p.elapsed.as_secs() % 10 != 0) {
            return;
        }
        let line = format!(
            "[{}/{}] {} seed {}: {:.0}/{:.0} s, {:.1} MB delivered",
            p.run,
            p.runs,
            p.variant,
            p.seed,
            p.elapsed.as_secs_f64(),
            p.duration.as_secs_f64(),
            p.delivered as f64 / 1e6
        );
        let mut err = std::io::stderr().lock();
        if tty {
            let _ = write!(err, "\r\x1b[2K{line}");
        } else {
            let _ = writeln!(err, "{line}");
        }
    };
    let result = lab::run(&plan, &opts, &progress);
    if tty && !quiet {
        eprintln!();
    }
    let result = result.map_err(anyhow::Error::msg)?;
    if let Some(dir) = &a.out {
        report::write_runs(&result, dir)
            .with_context(|| format!("cannot write results to {}", dir.display()))?;
        if !quiet {
            eprintln!("braid lab: per-run CSV in {}", dir.display());
        }
    }
    if let Some(dir) = &a.report {
        let figs = plot::write_report(&result, dir)
            .with_context(|| format!("cannot write the report to {}", dir.display()))?;
        if !quiet {
            eprintln!(
                "braid lab: {} figure(s), open {}",
                figs.len(),
                dir.join("index.html").display()
            );
        }
    }
    let sim = a.compare.then(|| {
        let mut only = plan.clone();
        only.variants.retain(|v| endpoint.runs(v));
        let jobs = std::thread::available_parallelism().map_or(1, |n| n.get());
        runner::run(
            &only,
            &runner::Options {
                jobs,
                records: runner::Records::None,
                pcap: None,
            },
            &|_| {},
        )
    });
    let note = a
        .compare
        .then(|| not_simulated_alike(&plan, endpoint))
        .flatten();
    let mut out = std::io::stdout().lock();
    if a.json {
        let mut v = report::json(&result);
        if let Some(sim) = &sim {
            v["compare"] = compare_json(sim, &result);
        }
        if let Some(note) = &note {
            v["compare_note"] = (*note).into();
        }
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
    } else {
        write!(out, "{}", report::table(&result))?;
        if let Some(sim) = &sim {
            write!(out, "{}", compare_table(sim, &result))?;
        }
        if let Some(note) = &note {
            writeln!(out, "note: {note}")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Why the simulator beside the lab ran something else, if it did: through the tunnel a bulk
/// or file application is a TCP flow of the hosts, which the simulator models only under
/// `[tunnel]`; without it the simulator's application writes into the connection itself (no
/// TCP of the hosts in between, no head-of-line wait of theirs).
fn not_simulated_alike(plan: &scenario::Plan, endpoint: lab::Endpoint) -> Option<&'static str> {
    use braid_sim::scenario::AppKind;
    let s = plan.base();
    (endpoint == lab::Endpoint::Tunnel
        && s.tunnel.is_none()
        && matches!(s.app.kind, AppKind::Bulk | AppKind::File))
    .then_some(
        "the file has no [tunnel]: the simulator's application wrote into the connection, the \
         lab's went through the tunnel as the hosts' TCP; add [tunnel] for the simulator to \
         carry it through the tunnel too",
    )
}

/// The metrics compared: the scenario's shown ones, throughput always.
fn compared(lab: &runner::PlanResult) -> Vec<String> {
    let mut keys = lab.show.clone();
    if !keys.iter().any(|k| k == "throughput_mbps") {
        keys.push("throughput_mbps".into());
    }
    keys
}

/// (variant, sim median, lab median) for `key`, where both have it.
fn pairs(sim: &runner::PlanResult, lab: &runner::PlanResult, key: &str) -> Vec<(String, f64, f64)> {
    lab.variants
        .iter()
        .filter_map(|lv| {
            let sv = sim.variants.iter().find(|s| s.name == lv.name)?;
            Some((
                lv.name.clone(),
                sv.summary.get(key)?.median,
                lv.summary.get(key)?.median,
            ))
        })
        .collect()
}

fn compare_table(sim: &runner::PlanResult, lab: &runner::PlanResult) -> String {
    let mut t = String::from("\nsimulator vs lab (medians; ratio lab / sim)\n");
    for key in compared(lab) {
        let rows = pairs(sim, lab, &key);
        if rows.is_empty() {
            continue;
        }
        t.push_str(&format!(
            "{key}\n  {:10} {:>10} {:>10} {:>7}\n",
            "variant", "sim", "lab", "ratio"
        ));
        for (name, s, l) in rows {
            let ratio = if s != 0.0 {
                format!("{:.2}", l / s)
            } else {
                "-".into()
            };
            t.push_str(&format!(
                "  {:10} {s:>10.2} {l:>10.2} {ratio:>7}\n",
                if name.is_empty() { "-" } else { &name }
            ));
        }
    }
    t
}

fn compare_json(sim: &runner::PlanResult, lab: &runner::PlanResult) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    for key in compared(lab) {
        let rows: serde_json::Map<String, serde_json::Value> = pairs(sim, lab, &key)
            .into_iter()
            .map(|(name, s, l)| {
                (
                    name,
                    serde_json::json!({ "sim": s, "lab": l, "ratio": if s != 0.0 { Some(l / s) } else { None } }),
                )
            })
            .collect();
        if !rows.is_empty() {
            m.insert(key, rows.into());
        }
    }
    m.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(app: &str, tunnel: &str) -> scenario::Plan {
        let text = format!(
            "name = \"t\"\nduration = \"5s\"\n{tunnel}\n[[link]]\nname = \"a\"\n\
             rate = \"10Mbit\"\ndelay = \"10ms\"\n[app]\n{app}\n"
        );
        scenario::load_str(&text, "t.toml", std::path::Path::new("."), &[]).unwrap()
    }

    #[test]
    fn the_comparison_says_when_the_simulator_ran_the_application_without_the_tunnel() {
        let bulk = "kind = \"bulk\"";
        let file = "kind = \"file\"\nbytes = \"1MB\"";
        let cbr = "kind = \"cbr\"\nbitrate = \"1Mbit\"";
        let tunnel = "[tunnel]\ntransport = \"braid\"";
        for app in [bulk, file] {
            let note = not_simulated_alike(&plan(app, ""), lab::Endpoint::Tunnel);
            assert!(note.is_some_and(|n| n.contains("[tunnel]")), "{app}");
            assert_eq!(
                not_simulated_alike(&plan(app, tunnel), lab::Endpoint::Tunnel),
                None
            );
            assert_eq!(
                not_simulated_alike(&plan(app, ""), lab::Endpoint::Mptcp),
                None
            );
        }
        // A CBR message is one datagram into the tunnel, as the simulator writes it.
        assert_eq!(
            not_simulated_alike(&plan(cbr, ""), lab::Endpoint::Tunnel),
            None
        );
    }
}
