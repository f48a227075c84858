//! The chaos soak's fault schedule in virtual time (core and path manager only): for any
//! seed, a file transfer under the core-visible faults of the schedule (every link down, one
//! link down, the network side silent, loss bursts) completes, and each fault's outage stays
//! within its bound. The namespace soak (`braid-tunnel/tests/tunnel_chaos.rs`) runs the same
//! schedules on real daemons; a seed that fails there replays here deterministically.

use std::path::Path;
use std::time::Duration;

use braid_sim::chaos::{self, Fault, FaultKind};
use braid_sim::{scenario, world};
use proptest::prelude::*;

const SCHEDULE: Duration = Duration::from_secs(90);
const WARMUP: Duration = Duration::from_secs(3);

/// The longest time without delivery from the fault's start to `until` (the next fault's
/// start), and the time from its end to the first delivery after it.
fn outcome(r: &world::RunRecord, f: &Fault, until: Duration) -> (Duration, Duration) {
    let us = |d: Duration| d.as_micros() as u64;
    let (from, to) = (us(f.at), us(until));
    let mut last = r
        .deliveries
        .iter()
        .take_while(|(t, _)| *t < from)
        .last()
        .map_or(from, |(t, _)| *t)
        .max(from);
    let mut gap = 0;
    let mut after = None;
    for &(t, _) in r.deliveries.iter().filter(|(t, _)| *t >= from && *t <= to) {
        gap = gap.max(t - last);
        last = t;
        if after.is_none() && t >= us(f.end()) {
            after = Some(t - us(f.end()));
        }
    }
    (
        Duration::from_micros(gap),
        Duration::from_micros(after.unwrap_or(to - us(f.end()))),
    )
}

/// The bound on a fault's outcome, as the README states it.
fn within_bound(f: &Fault, gap: Duration, after: Duration) -> bool {
    let s = Duration::from_secs;
    match f.kind {
        // The path manager reopens paths as the addresses return.
        FaultKind::AllLinksDown => after <= s(1),
        // Nothing tells the client's link layer: the next liveness probe (every 1 s) ends the
        // backed-off wait.
        FaultKind::GatewaySideDown => after <= s(2),
        // The other link carries the data: reinjection after the RTO.
        FaultKind::LinkDown(_) | FaultKind::LossBurst(_) => gap <= s(1),
        _ => true,
    }
}

fn run(seed: u64) -> Result<(), TestCaseError> {
    let faults = chaos::schedule(seed, SCHEDULE, WARMUP, 2, true);
    let dir = if seed % 2 == 0 { "up" } else { "down" };
    // Enough to keep the transfer busy through the schedule, and done well before the end.
    let text = chaos::scenario_toml(&faults, SCHEDULE * 3, 300_000_000, dir);
    let plan = scenario::load_str(&text, "chaos.toml", Path::new("."), &[])
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let r = world::run(&plan.variants[0], seed);
    let mut report = String::new();
    let mut ok = true;
    let done = r.completed.unwrap_or(Duration::MAX);
    for (i, f) in faults.iter().enumerate() {
        let until = faults.get(i + 1).map_or(SCHEDULE, |n| n.at).min(done);
        if f.end() >= until {
            break;
        }
        let (gap, after) = outcome(&r, f, until);
        let good = within_bound(f, gap, after);
        ok &= good;
        report.push_str(&format!(
            "{f}  longest gap {:>7.3} s  data {:>6.3} s after the end{}\n",
            gap.as_secs_f64(),
            after.as_secs_f64(),
            if good { "" } else { "  OUT OF BOUND" }
        ));
    }
    prop_assert!(
        r.completed.is_some(),
        "seed {seed} ({dir}): the transfer did not complete\n{report}"
    );
    prop_assert!(ok, "seed {seed} ({dir}): an outage out of bound\n{report}");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_schedule_of_core_faults_completes_within_bounds(seed in any::<u64>()) {
        run(seed)?;
    }
}

/// The schedules the namespace soak uses by default, replayed here.
#[test]
fn the_soak_default_seeds() {
    for seed in [1, 2, 3, 17638211154553113334, 17658776929069400408] {
        run(seed).unwrap();
    }
}
