//! `braid tunnel client|gateway`, `braid keygen`, `braid status`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use braid_tunnel::daemon::{self, ClientConfig, GatewayConfig};
use clap::{Args, Subcommand};

#[derive(Debug, Args)]
pub struct TunnelArgs {
    #[command(subcommand)]
    role: Role,
}

#[derive(Debug, Subcommand)]
enum Role {
    /// The router/vehicle side: a TUN device whose packets go over every link to the gateway.
    Client {
        /// Configuration file (TOML); every key can be overridden by BRAID_TUNNEL_<KEY>.
        #[arg(long, short, value_name = "FILE", env = "BRAID_TUNNEL_CONFIG")]
        config: PathBuf,
    },
    /// The network side: serves many clients, forwards their packets through its TUN device.
    Gateway {
        /// Configuration file (TOML); every key can be overridden by BRAID_TUNNEL_<KEY>.
        #[arg(long, short, value_name = "FILE", env = "BRAID_TUNNEL_CONFIG")]
        config: PathBuf,
    },
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Control socket of the tunnel daemon.
    #[arg(
        long,
        value_name = "PATH",
        env = "BRAID_TUNNEL_CONTROL",
        default_value = "/run/braid/tunnel.sock"
    )]
    control: PathBuf,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("tokio runtime")
}

fn log_format(s: &str) -> anyhow::Result<braid_io::LogFormat> {
    s.parse().map_err(anyhow::Error::msg)
}

pub fn run(a: TunnelArgs) -> anyhow::Result<ExitCode> {
    match a.role {
        Role::Client { config } => {
            let cfg = ClientConfig::load(&config)?;
            braid_io::init_logging(log_format(&cfg.ops.log_format)?);
            runtime()?.block_on(daemon::run_client(cfg))?;
        }
        Role::Gateway { config } => {
            let cfg = GatewayConfig::load(&config)?;
            braid_io::init_logging(log_format(&cfg.ops.log_format)?);
            runtime()?.block_on(daemon::run_gateway(cfg))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `braid keygen`: a private key on stdout's first line, its public key on the second, in the
/// form a config takes and `private_key_file` reads (`braid keygen > client.key`). A warning
/// when that file can be read by others.
pub fn keygen() -> anyhow::Result<ExitCode> {
    use std::os::unix::fs::PermissionsExt;
    let (private, public) = daemon::keygen();
    if let Ok(m) = std::fs::metadata("/proc/self/fd/1")
        && m.is_file()
        && m.permissions().mode() & 0o077 != 0
    {
        eprintln!(
            "braid keygen: warning: the file receiving the private key can be read by others \
             (mode {:o}; `umask 077` first, or `chmod 600` it)",
            m.permissions().mode() & 0o777
        );
    }
    println!("private_key = \"{private}\"");
    println!("public_key = \"{public}\"");
    Ok(ExitCode::SUCCESS)
}

pub fn status(a: StatusArgs) -> anyhow::Result<ExitCode> {
    let v = runtime()?.block_on(braid_io::control::request(&a.control, "status"))?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{}", daemon::status_table(&v));
    }
    Ok(ExitCode::SUCCESS)
}
