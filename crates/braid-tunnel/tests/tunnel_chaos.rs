//! The chaos soak's short mode (see `chaos/mod.rs`): 150 s of seeded faults through the tunnel
//! with transfers in both directions and a UDP probe; every transfer intact, every outage
//! within its bound. The long mode is `cargo bench -p braid-tunnel --bench chaos` (30 min).
//! `BRAID_CHAOS_SEED` picks another schedule; the same seed replays the core-visible faults in
//! virtual time (`braid-sim/tests/chaos.rs`).

mod chaos;
mod support;

use std::time::Duration;

use support::*;

#[test]
fn chaos_soak_short() {
    if !require_root() {
        return;
    }
    let seed = std::env::var("BRAID_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let r = chaos::run("bcs", seed, Duration::from_secs(150));
    eprintln!("{}", r.text);
    assert!(r.ok(), "chaos soak failed:\n{}", r.text);
    assert!(
        r.rss_end_kb < r.rss_start_kb + 32 * 1024,
        "memory grew from {} to {} kB",
        r.rss_start_kb,
        r.rss_end_kb
    );
}
