//! The chaos soak's long mode: `cargo bench -p braid-tunnel --bench chaos` (root). 30 minutes
//! of seeded faults through the tunnel with transfers both ways and a UDP probe (see
//! `tests/chaos/mod.rs`); prints every fault with the outage it caused, the transfers, and the
//! memory at the start and the end. `BRAID_CHAOS_SECS` and `BRAID_CHAOS_SEED` change the
//! length and the schedule. Exits non-zero when a transfer failed or an outage broke its bound.

#[path = "../tests/support/mod.rs"]
mod support;

#[path = "../tests/chaos/mod.rs"]
mod chaos;

use std::time::Duration;

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    if std::env::var_os("BRAID_SKIP_NETNS").is_some() {
        eprintln!("BRAID_SKIP_NETNS set: skipping the chaos soak");
        return;
    }
    if !support::require_root() {
        return;
    }
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(d)
    };
    let secs = env("BRAID_CHAOS_SECS", 1800);
    let seed = env("BRAID_CHAOS_SEED", 1);
    let r = chaos::run("bcl", seed, Duration::from_secs(secs));
    println!("{}", r.text);
    println!(
        "memory: {} kB at the start, {} kB at the end",
        r.rss_start_kb, r.rss_end_kb
    );
    if !r.ok() {
        eprintln!("chaos soak: FAILED");
        std::process::exit(1);
    }
}
