//! `braid route`: seed 004's multipath routing on a real ad-hoc node. babeld (RFC 8966) keeps
//! discovering neighbours and routes; this daemon reads them from babeld's local interface,
//! runs `braid_pm::route::Router` (the policy the simulator runs: link-state graph, next hops
//! every 2 s, HMM prediction, App. C lanes) and installs each lane's next hops as a routing
//! table selected by policy rules, over rtnetlink.

pub mod config;
mod daemon;
mod driver;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use braid_io::LogFormat;
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use braid_core::Instant;
use driver::Driver;

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct RouteArgs {
    #[command(subcommand)]
    command: Option<RouteCommand>,
    /// Configuration file (TOML).
    #[arg(long, short, value_name = "FILE", env = "BRAID_ROUTE_CONFIG")]
    config: Option<PathBuf>,
    /// babeld's local interface: its `local-path` socket, or `local-port` ([::1]:PORT or PORT).
    #[arg(long, value_name = "ENDPOINT", env = "BRAID_ROUTE_BABELD")]
    babeld: Option<String>,
    /// Routing policy: full, part, hmm-full, hmm-part (seed 004: mfxm, mpxm, mmfxfm, mmpxm).
    #[arg(long, value_name = "NAME")]
    policy: Option<String>,
    /// An interface babeld runs on, in App. C order (repeat: --iface e0 --iface e1 …).
    #[arg(long = "iface", value_name = "NAME")]
    ifaces: Vec<String>,
    /// Control socket (overrides the configuration's `control`).
    #[arg(long, value_name = "PATH", env = "BRAID_ROUTE_CONTROL")]
    control: Option<PathBuf>,
    /// Prometheus endpoint, e.g. 127.0.0.1:9102 (overrides the configuration's `metrics`).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,
    /// Log format: text or json.
    #[arg(
        long,
        value_name = "FORMAT",
        default_value = "text",
        env = "BRAID_LOG_FORMAT"
    )]
    log: LogFormat,
}

#[derive(Debug, Subcommand)]
enum RouteCommand {
    /// Show the running daemon's neighbours, predictions, lanes, routes and recent changes.
    Status {
        /// Control socket of the daemon.
        #[arg(long, value_name = "PATH", env = "BRAID_ROUTE_CONTROL", default_value = config::DEFAULT_CONTROL)]
        control: PathBuf,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(a: RouteArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("tokio runtime")?;
    if let Some(RouteCommand::Status { control, json }) = a.command {
        let v = rt.block_on(braid_io::control::request(&control, "status"))?;
        if json {
            println!("{}", serde_json::to_string_pretty(&v)?);
        } else {
            print!("{}", status_table(&v));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let o = config::Overrides {
        babeld: a.babeld,
        policy: a.policy,
        ifaces: a.ifaces,
        control: a.control,
        metrics: a.metrics,
    };
    let settings = config::load(a.config.as_deref(), &o).map_err(anyhow::Error::msg)?;
    braid_io::init_logging(a.log);
    rt.block_on(daemon::run(settings))?;
    Ok(ExitCode::SUCCESS)
}

fn obs_letter(o: braid_pm::hmm::Obs) -> char {
    match o {
        braid_pm::hmm::Obs::Good => 'G',
        braid_pm::hmm::Obs::Moderate => 'M',
        braid_pm::hmm::Obs::Bad => 'B',
    }
}

/// The status document (`braid route status --json`).
fn status_json(d: &Driver, errors: &std::collections::VecDeque<String>, now: Instant) -> Value {
    let s = d.settings();
    let lane_name = |i: braid_pm::IfaceId| {
        d.lanes
            .get(i.0 as usize)
            .map_or_else(|| i.to_string(), |l| l.name.clone())
    };
    let lanes: Vec<Value> = d
        .lanes
        .iter()
        .enumerate()
        .map(|(k, l)| {
            json!({
                "name": l.name,
                "ifindex": l.ifindex,
                "table": s.table + k as u32,
                "addrs": l.addrs.iter().map(|(a, n)| format!("{a}/{n}")).collect::<Vec<_>>(),
            })
        })
        .collect();
    let mut links = Vec::new();
    let mut routes = Vec::new();
    let mut st = json!({});
    if let Some(r) = d.router() {
        for l in r.links() {
            let n = d.neighbour_entry(l.neighbour, &lane_name(l.iface));
            links.push(json!({
                "neighbour": d.node_name(l.neighbour),
                "iface": lane_name(l.iface),
                "address": n.map(|n| n.address.to_string()),
                "reach": n.map(|n| format!("{:04x}", n.reach)),
                "cost": l.cost,
                "window": l.window.iter().map(|&o| obs_letter(o)).collect::<String>(),
                "predicted": l.predicted.map(|p| format!("{p:?}").to_lowercase()),
                "kept": l.kept,
            }));
        }
        for (dest, lane, hops) in r.table() {
            routes.push(json!({
                "dest": d.node_name(dest),
                "lane": lane_name(lane),
                "next_hops": hops.iter().map(|h| json!({
                    "neighbour": d.node_name(h.neighbour),
                    "iface": lane_name(h.iface),
                })).collect::<Vec<_>>(),
            }));
        }
        let rs = r.stats();
        st = json!({
            "observations": rs.observations,
            "rejected": rs.rejected,
            "recomputations": rs.recomputations,
            "predicted_withdrawals": rs.predicted_withdrawals,
            "links_lost": rs.links_lost,
            "updates": rs.updates,
        });
    }
    let ds = d.stats;
    let prefixes: Vec<Value> = d
        .prefixes()
        .iter()
        .map(|(n, ps)| {
            json!({
                "node": d.node_name(*n),
                "prefixes": ps.iter().map(ToString::to_string).collect::<Vec<_>>(),
            })
        })
        .collect();
    let (installed, rules) = d.installed();
    let installed: Vec<Value> = installed
        .map(|r| {
            json!({
                "table": r.table,
                "dest": r.dest.to_string(),
                "via": r.next_hops.iter().map(|h| format!("{}%{}", h.via, h.ifindex)).collect::<Vec<_>>(),
                "src": r.prefsrc.map(|a| a.to_string()),
            })
        })
        .collect();
    let rules: Vec<Value> = rules
        .map(|r| {
            json!({
                "priority": r.priority,
                "table": r.table,
                "from": r.from.map(|p| p.to_string()),
                "to": r.to.map(|p| p.to_string()),
            })
        })
        .collect();
    json!({
        "uptime_s": now.secs_f64(),
        "policy": s.policy.name(),
        "babeld": {
            "endpoint": s.babeld.to_string(),
            "connected": d.connected(),
            "synced": d.synced(),
            "version": d.babel.version,
            "host": d.babel.host,
            "my_id": d.babel.my_id.map(|i| i.to_string()),
            "neighbours": d.babel.neighbours.len(),
            "routes": d.babel.routes.len(),
            "lines": ds.lines,
            "malformed_lines": ds.malformed,
            "last_malformed": d.last_malformed,
            "connects": ds.connects,
            "disconnects": ds.disconnects,
            "held_ticks": ds.held_ticks,
            "unidentified_neighbours": ds.unidentified,
        },
        "lanes": lanes,
        "links": links,
        "routes": routes,
        "prefixes": prefixes,
        "installed": installed,
        "rules": rules,
        "changes": d.changes.iter().rev().map(|c| json!({
            "t_s": c.at.secs_f64(),
            "dest": d.node_name(c.dest),
            "lane": lane_name(c.lane),
            "next_hops": c.next_hops.iter().map(|&(n, i)| format!("{}@{}", d.node_name(n), lane_name(i))).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "verdicts": d.verdicts.iter().rev().map(|v| json!({
            "t_s": v.at.secs_f64(),
            "neighbour": d.node_name(v.neighbour),
            "iface": lane_name(v.iface),
            "kept": v.kept,
            "predicted": v.predicted,
        })).collect::<Vec<_>>(),
        "stats": {
            "router": st,
            "refused_inputs": ds.refused,
            "kernel_requests": ds.kernel_ops,
            "kernel_request_errors": ds.kernel_errors,
        },
        "last_errors": errors.iter().collect::<Vec<_>>(),
    })
}

fn s(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() => format!("{f:.1}"),
            _ => n.to_string(),
        },
        other => other.to_string(),
    }
}

fn list(v: &Value) -> String {
    v.as_array()
        .into_iter()
        .flatten()
        .map(s)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The status as a person reads it.
pub fn status_table(v: &Value) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let b = &v["babeld"];
    let _ = writeln!(
        o,
        "braid route: policy {}, up {} s; babeld {} {} ({}, host {}, id {})",
        s(&v["policy"]),
        s(&v["uptime_s"]),
        s(&b["endpoint"]),
        match (b["connected"].as_bool(), b["synced"].as_bool()) {
            (Some(true), Some(true)) => "connected",
            (Some(true), _) => "connected, reading its dump",
            _ => "AWAY (routes kept)",
        },
        s(&b["version"]),
        s(&b["host"]),
        s(&b["my_id"]),
    );
    let _ = writeln!(
        o,
        "\n{:<8} {:>7} {:>6}  addresses",
        "lane", "ifindex", "table"
    );
    for l in v["lanes"].as_array().into_iter().flatten() {
        let _ = writeln!(
            o,
            "{:<8} {:>7} {:>6}  {}",
            s(&l["name"]),
            s(&l["ifindex"]),
            s(&l["table"]),
            list(&l["addrs"])
        );
    }
    let _ = writeln!(
        o,
        "\n{:<24} {:<8} {:>5} {:>6} {:<8} {:<11} {:>4}",
        "neighbour", "iface", "reach", "cost", "window", "predicted", "kept"
    );
    for l in v["links"].as_array().into_iter().flatten() {
        let _ = writeln!(
            o,
            "{:<24} {:<8} {:>5} {:>6} {:<8} {:<11} {:>4}",
            s(&l["neighbour"]),
            s(&l["iface"]),
            s(&l["reach"]),
            s(&l["cost"]),
            s(&l["window"]),
            s(&l["predicted"]),
            if l["kept"] == true { "yes" } else { "no" }
        );
    }
    let _ = writeln!(o, "\n{:<24} {:<8} next hops", "destination", "lane");
    for r in v["routes"].as_array().into_iter().flatten() {
        let hops: Vec<String> = r["next_hops"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|h| format!("{}@{}", s(&h["neighbour"]), s(&h["iface"])))
            .collect();
        let _ = writeln!(
            o,
            "{:<24} {:<8} {}",
            s(&r["dest"]),
            s(&r["lane"]),
            hops.join(" ")
        );
    }
    let changes = v["changes"].as_array().cloned().unwrap_or_default();
    if !changes.is_empty() {
        let _ = writeln!(o, "\nlast route changes (newest first):");
        for c in changes.iter().take(10) {
            let hops = list(&c["next_hops"]);
            let _ = writeln!(
                o,
                "  {:>9.3} s  {} on {}: {}",
                c["t_s"].as_f64().unwrap_or(0.0),
                s(&c["dest"]),
                s(&c["lane"]),
                if hops.is_empty() {
                    "removed".into()
                } else {
                    hops
                }
            );
        }
    }
    let st = &v["stats"];
    let _ = writeln!(
        o,
        "\nbabeld: {} lines ({} malformed), {} neighbours, {} routes, {} reconnections; router: {} recomputations, {} HMM withdrawals; kernel: {} requests ({} failed)",
        s(&b["lines"]),
        s(&b["malformed_lines"]),
        s(&b["neighbours"]),
        s(&b["routes"]),
        b["connects"].as_u64().unwrap_or(1).saturating_sub(1),
        s(&st["router"]["recomputations"]),
        s(&st["router"]["predicted_withdrawals"]),
        s(&st["kernel_requests"]),
        s(&st["kernel_request_errors"]),
    );
    for e in v["last_errors"].as_array().into_iter().flatten() {
        let _ = writeln!(o, "  error: {}", s(e));
    }
    o
}

/// The status document in the Prometheus text format.
pub fn prometheus(v: &Value) -> String {
    use braid_io::metrics::label;
    use std::fmt::Write;
    let mut out = String::new();
    let num = |x: &Value| match x {
        Value::Bool(b) => f64::from(u8::from(*b)),
        x => x.as_f64().unwrap_or(0.0),
    };
    let mut metric = |name: &str, kind: &str, help: &str, samples: Vec<(String, f64)>| {
        let _ = writeln!(out, "# HELP braid_route_{name} {help}");
        let _ = writeln!(out, "# TYPE braid_route_{name} {kind}");
        for (labels, x) in samples {
            let _ = writeln!(out, "braid_route_{name}{labels} {x}");
        }
    };
    let b = &v["babeld"];
    let st = &v["stats"];
    let plain = |x: &Value| vec![(String::new(), num(x))];
    metric(
        "up",
        "gauge",
        "The daemon runs.",
        vec![(String::new(), 1.0)],
    );
    metric(
        "babeld_connected",
        "gauge",
        "Connected to babeld's local interface with its state read.",
        plain(&Value::Bool(b["synced"] == true)),
    );
    metric(
        "babeld_lines_total",
        "counter",
        "Lines read from babeld.",
        plain(&b["lines"]),
    );
    metric(
        "babeld_malformed_lines_total",
        "counter",
        "Lines from babeld that are not its protocol, skipped.",
        plain(&b["malformed_lines"]),
    );
    metric(
        "babeld_reconnections_total",
        "counter",
        "Connections to babeld after the first.",
        vec![(String::new(), (num(&b["connects"]) - 1.0).max(0.0))],
    );
    metric(
        "recomputations_total",
        "counter",
        "Route recomputations (every period).",
        plain(&st["router"]["recomputations"]),
    );
    metric(
        "predicted_withdrawals_total",
        "counter",
        "Links withdrawn because the HMM predicted disconnect.",
        plain(&st["router"]["predicted_withdrawals"]),
    );
    metric(
        "links_lost_total",
        "counter",
        "Links gone (reported down or not heard).",
        plain(&st["router"]["links_lost"]),
    );
    metric(
        "kernel_requests_total",
        "counter",
        "Route and rule requests sent to the kernel.",
        plain(&st["kernel_requests"]),
    );
    metric(
        "kernel_request_errors_total",
        "counter",
        "Route and rule requests the kernel refused.",
        plain(&st["kernel_request_errors"]),
    );
    let links = v["links"].as_array().cloned().unwrap_or_default();
    let link_labels = |l: &Value| {
        format!(
            "{{neighbour=\"{}\",iface=\"{}\"}}",
            label(&s(&l["neighbour"])),
            label(&s(&l["iface"]))
        )
    };
    metric(
        "link_kept",
        "gauge",
        "1 if the link is in the routing graph (not withdrawn).",
        links
            .iter()
            .map(|l| (link_labels(l), num(&l["kept"])))
            .collect(),
    );
    metric(
        "link_cost",
        "gauge",
        "babeld's cost of the link.",
        links
            .iter()
            .map(|l| (link_labels(l), num(&l["cost"])))
            .collect(),
    );
    let routes = v["routes"].as_array().cloned().unwrap_or_default();
    metric(
        "route_next_hops",
        "gauge",
        "Next hops of each lane's route to each destination.",
        routes
            .iter()
            .map(|r| {
                (
                    format!(
                        "{{dest=\"{}\",lane=\"{}\"}}",
                        label(&s(&r["dest"])),
                        label(&s(&r["lane"]))
                    ),
                    r["next_hops"].as_array().map_or(0, Vec::len) as f64,
                )
            })
            .collect(),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc() -> Value {
        json!({
            "uptime_s": 12.5, "policy": "hmm-part",
            "babeld": {"endpoint": "/run/babeld.sock", "connected": true, "synced": true,
                "version": "babeld-1.12.1", "host": "m1", "my_id": "02:00:00:00:00:00:00:01",
                "neighbours": 2, "routes": 9, "lines": 40, "malformed_lines": 3, "connects": 2},
            "lanes": [{"name": "e0", "ifindex": 4, "table": 1000, "addrs": ["10.0.0.1/24"]}],
            "links": [{"neighbour": "02:00:00:00:00:00:00:02", "iface": "e0", "reach": "ffff",
                "cost": 256, "window": "GGMB", "predicted": "disconnect", "kept": false}],
            "routes": [{"dest": "02:00:00:00:00:00:00:08", "lane": "e0",
                "next_hops": [{"neighbour": "02:00:00:00:00:00:00:03", "iface": "e0"}]}],
            "changes": [{"t_s": 10.0, "dest": "02:00:00:00:00:00:00:08", "lane": "e0", "next_hops": []}],
            "stats": {"router": {"recomputations": 6, "predicted_withdrawals": 1, "links_lost": 0},
                "kernel_requests": 12, "kernel_request_errors": 0},
            "last_errors": ["RTM_NEWROUTE: Network is unreachable (errno 101)"],
        })
    }

    #[test]
    fn table_and_metrics_show_the_status() {
        let t = status_table(&doc());
        for want in [
            "policy hmm-part",
            "connected (babeld-1.12.1",
            "GGMB",
            "disconnect",
            "02:00:00:00:00:00:00:03@e0",
            "removed",
            "40 lines (3 malformed)",
            "1 reconnections",
            "1 HMM withdrawals",
            "error: RTM_NEWROUTE",
        ] {
            assert!(t.contains(want), "{want} not in\n{t}");
        }
        let m = prometheus(&doc());
        for want in [
            "braid_route_up 1",
            "braid_route_babeld_connected 1",
            "braid_route_babeld_malformed_lines_total 3",
            "braid_route_babeld_reconnections_total 1",
            "braid_route_predicted_withdrawals_total 1",
            "braid_route_link_kept{neighbour=\"02:00:00:00:00:00:00:02\",iface=\"e0\"} 0",
            "braid_route_route_next_hops{dest=\"02:00:00:00:00:00:00:08\",lane=\"e0\"} 1",
        ] {
            assert!(m.contains(want), "{want} not in\n{m}");
        }
        // An empty document (the daemon just started) still renders.
        assert!(status_table(&Value::Null).contains("AWAY"));
        assert!(prometheus(&Value::Null).contains("braid_route_up 1"));
    }
}
