//! The `braid` command.

mod sim;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.command {
        Command::Sim(a) => sim::run(a),
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            eprintln!("braid: {e:#}");
            ExitCode::from(2)
        }
    }
}
