//! Every link gone at once, then back (a vehicle in a tunnel): the core and the path manager in
//! virtual time. The client's addresses disappear, their REMOVE_ADDR frames wait in the queue
//! with no path to carry them, every path closes, and data stays queued. When the links return,
//! the path manager must open paths again, and the late removals must not close them: data
//! flows within 1 s of the return and the transfer completes.

use std::path::Path;
use std::time::Duration;

use braid_sim::{scenario, world};

fn scenario_text(outage_s: f64, app: &str) -> String {
    let back = 5.0 + outage_s;
    format!(
        r#"
name = "blackout"
duration = "40s"
seed = 7

[connection]
scheduler = "minrtt"
congestion = "cubic"
remove_addr_delay = "50ms"

[[link]]
name = "a"
rate = "20Mbit"
delay = "10ms"
queue = 100

[[link]]
name = "b"
rate = "10Mbit"
delay = "15ms"
queue = 100

[app]
{app}
start = "0.5s"

[[event]]
at = "5s"
link = "a"
action = "addr-lost"

[[event]]
at = "5s"
link = "b"
action = "addr-lost"

[[event]]
at = "{back}s"
link = "a"
action = "addr-back"

[[event]]
at = "{back}s"
link = "b"
action = "addr-back"
"#
    )
}

fn run(outage_s: f64, app: &str, seed: u64) -> world::RunRecord {
    let text = scenario_text(outage_s, app);
    let plan = scenario::load_str(&text, "blackout.toml", Path::new("."), &[]).unwrap();
    world::run(&plan.variants[0], seed)
}

/// First in-order delivery at or after `t`.
fn first_delivery_after(r: &world::RunRecord, t: Duration) -> Option<Duration> {
    let t = t.as_micros() as u64;
    r.deliveries
        .iter()
        .find(|(at, _)| *at >= t)
        .map(|(at, _)| Duration::from_micros(*at))
}

#[test]
fn all_links_down_then_back_the_transfer_resumes_within_a_second_and_completes() {
    for (outage, seed) in [(1.0, 1), (3.0, 2), (0.5, 3), (4.5, 4)] {
        for dir in ["up", "down"] {
            let app = format!("kind = \"file\"\ndirection = \"{dir}\"\nbytes = \"30MB\"");
            let r = run(outage, &app, seed);
            let back = Duration::from_secs_f64(5.0 + outage);
            let resumed = first_delivery_after(&r, back)
                .unwrap_or_else(|| panic!("{outage} s outage, {dir}: nothing delivered after"));
            eprintln!(
                "{outage} s outage, {dir}: data again {:?} after the return; completed at {:?}; \
                 stale removals ignored: {}",
                resumed - back,
                r.completed,
                r.receiver.stale_removals + r.sender.stale_removals
            );
            assert!(
                resumed - back <= Duration::from_secs(1),
                "{outage} s outage, {dir}: data resumed {:?} after the links returned",
                resumed - back
            );
            assert!(
                r.completed.is_some(),
                "{outage} s outage, {dir}: the transfer did not complete"
            );
        }
    }
}
