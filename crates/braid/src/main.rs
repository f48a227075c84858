//! The `braid` command.

// `braid pm status`'s JSON (one `json!` of some sixty keys) needs more than the default 128.
#![recursion_limit = "256"]

mod lab;
mod pm;
mod route;
mod sim;
mod toml_file;
mod tunnel;

use std::alloc::System;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

/// The system allocator, counting bytes (two relaxed atomic additions per allocation) for the
/// memory figures of `braid sim --bench`.
#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Heap bytes allocated and not freed so far.
pub(crate) fn heap_bytes() -> usize {
    let s = GLOBAL.stats();
    (s.bytes_allocated as isize - s.bytes_deallocated as isize + s.bytes_reallocated).max(0)
        as usize
}

/// braid: one connection over every link that comes and goes.
#[derive(Debug, Parser)]
#[command(name = "braid", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a scenario in the deterministic simulator and compare its variants.
    Sim(sim::SimArgs),
    /// Run a scenario on real stacks in real time, through the simulator's link model.
    Lab(lab::LabArgs),
    /// Cross-layer path manager for Linux kernel MPTCP (the userspace path manager).
    Pm(pm::PmArgs),
    /// Multipath routing for ad-hoc nodes: babeld's next hops per interface, HMM-filtered.
    Route(route::RouteArgs),
    /// Bond links for unmodified hosts: IP packets over one encrypted multipath connection.
    Tunnel(tunnel::TunnelArgs),
    /// Generate a key pair for `braid tunnel` (base64, like WireGuard's).
    Keygen,
    /// Show a running tunnel daemon's paths, RTT, cwnd, bytes, reinjections and drops.
    Status(tunnel::StatusArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.command {
        Command::Sim(a) => sim::run(a),
        Command::Lab(a) => lab::run(a),
        Command::Pm(a) => pm::run(a),
        Command::Route(a) => route::run(a),
        Command::Tunnel(a) => tunnel::run(a),
        Command::Keygen => tunnel::keygen(),
        Command::Status(a) => tunnel::status(a),
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            eprintln!("braid: {e:#}");
            ExitCode::from(2)
        }
    }
}
