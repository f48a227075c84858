//! `braid pm`: the cross-layer path manager for Linux kernel MPTCP (seed 000's system). The
//! policies are `braid_pm`'s, the same code the simulator runs; this module connects them to
//! the kernel's userspace path manager, rtnetlink and the signal input.

mod bridge;
pub mod config;
mod daemon;
mod drain;
mod prio;
mod revive;
mod wifi;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use braid_io::LogFormat;
use clap::{Args, Subcommand};
use serde_json::Value;

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct PmArgs {
    #[command(subcommand)]
    command: Option<PmCommand>,
    /// Configuration file (TOML); without one: full mesh on every interface.
    #[arg(long, short, value_name = "FILE", env = "BRAID_PM_CONFIG")]
    config: Option<PathBuf>,
    /// Control socket (overrides the configuration's `control`).
    #[arg(long, value_name = "PATH", env = "BRAID_PM_CONTROL")]
    control: Option<PathBuf>,
    /// Also read signal samples (JSON lines) from this Unix datagram socket.
    #[arg(long, value_name = "PATH", env = "BRAID_PM_SIGNAL")]
    signal_socket: Option<PathBuf>,
    /// Log format: text or json.
    #[arg(
        long,
        value_name = "FORMAT",
        default_value = "text",
        env = "BRAID_LOG_FORMAT"
    )]
    log: LogFormat,
    /// Check the configuration and the kernel, then exit.
    #[arg(long)]
    check: bool,
}

#[derive(Debug, Subcommand)]
enum PmCommand {
    /// Show the running daemon's connections, subflows, signal and last decisions.
    Status {
        /// Control socket of the daemon.
        #[arg(long, value_name = "PATH", env = "BRAID_PM_CONTROL", default_value = config::DEFAULT_CONTROL)]
        control: PathBuf,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(a: PmArgs) -> anyhow::Result<ExitCode> {
    if let Some(PmCommand::Status { control, json }) = a.command {
        return status(&control, json);
    }
    let mut settings = match &a.config {
        Some(p) => config::load(p).map_err(anyhow::Error::msg)?,
        None => config::PmSettings::default(),
    };
    if let Some(c) = a.control {
        settings.control = c;
    }
    if let Some(s) = a.signal_socket {
        settings.signals.push(braid_io::signal::Source::Socket(s));
    }
    if a.check {
        daemon::preflight()?;
        println!("configuration and kernel OK");
        return Ok(ExitCode::SUCCESS);
    }
    braid_io::init_logging(a.log);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("tokio runtime")?;
    rt.block_on(daemon::run(settings))?;
    Ok(ExitCode::SUCCESS)
}

fn status(control: &std::path::Path, json: bool) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let v = rt.block_on(braid_io::control::request(control, "status"))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{}", status_table(&v));
    }
    Ok(ExitCode::SUCCESS)
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

/// The status as a person reads it.
pub fn status_table(v: &Value) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "braid pm: mode {}, up {} s",
        s(&v["mode"]),
        s(&v["uptime_s"])
    );
    let _ = writeln!(
        o,
        "\n{:<12} {:>4} {:>9} {:>9} {:>5} {:>11} {:>6} {:>8}  addresses",
        "interface", "up", "rssi dBm", "T dBm", "good", "predicted", "flips", "samples"
    );
    for i in v["ifaces"].as_array().into_iter().flatten() {
        let addrs: Vec<String> = i["addrs"].as_array().into_iter().flatten().map(s).collect();
        let _ = writeln!(
            o,
            "{:<12} {:>4} {:>9} {:>9} {:>5} {:>11} {:>6} {:>8}  {}",
            s(&i["name"]),
            if i["up"] == true { "yes" } else { "no" },
            s(&i["rssi_dbm"]),
            s(&i["threshold_dbm"]),
            if i["good"] == true { "yes" } else { "no" },
            s(&i["predicted"]),
            s(&i["flips"]),
            s(&i["samples"]),
            addrs.join(" ")
        );
    }
    for c in v["connections"].as_array().into_iter().flatten() {
        let _ = writeln!(
            o,
            "\nconnection token {} {} -> {}{}",
            s(&c["token"]),
            s(&c["local"]),
            s(&c["remote"]),
            if c["server_side"] == true {
                " (accepted)"
            } else {
                ""
            }
        );
        for f in c["subflows"].as_array().into_iter().flatten() {
            let _ = writeln!(
                o,
                "  subflow {:>3} {:<10} {} -> {}{}",
                s(&f["id"]),
                s(&f["iface"]),
                s(&f["local"]),
                s(&f["remote"]),
                if f["backup"] == true { "  backup" } else { "" }
            );
        }
    }
    let decisions = v["decisions"].as_array().cloned().unwrap_or_default();
    if !decisions.is_empty() {
        let _ = writeln!(o, "\nlast decisions (newest first):");
        for d in decisions.iter().take(10) {
            let _ = writeln!(
                o,
                "  {:>9.3} s  {:<10} {:<28} {:<10} rssi {}",
                d["t_s"].as_f64().unwrap_or(0.0),
                s(&d["iface"]),
                s(&d["command"]),
                s(&d["reason"]),
                s(&d["rssi_dbm"])
            );
        }
    }
    let st = &v["stats"];
    let _ = writeln!(
        o,
        "\nkernel: {} events ({} malformed), {} requests ({} failed); signal: {} accepted, {} bad lines, {} unknown interface",
        s(&st["kernel_events"]),
        s(&st["malformed_kernel_events"]),
        s(&st["kernel_requests"]),
        s(&st["kernel_request_errors"]),
        s(&v["signal"]["accepted"]),
        s(&v["signal"]["bad_lines"]),
        s(&v["signal"]["unknown_iface"]),
    );
    for e in v["last_errors"].as_array().into_iter().flatten() {
        let _ = writeln!(o, "  error: {}", s(e));
    }
    o
}
