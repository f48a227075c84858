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

/// The run's first in-order delivery.
fn first_data(r: &world::RunRecord) -> Option<Duration> {
    first_delivery_after(r, Duration::ZERO)
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

/// The client's first link loses its address while the connection's first path is opening
/// (5 ms into the run, before any answer; the first path opens at the start): the path
/// manager opens a new first path over the other link, or over the same one once its address
/// is back. Before, the connection had no path left and nothing opened one: nothing was
/// delivered in the 40 s.
#[test]
fn a_first_path_lost_during_the_handshake_is_opened_again() {
    let file = "kind = \"file\"\ndirection = \"down\"\nbytes = \"10MB\"";
    for (case, events, first_data_by) in [
        // Link b stays: data over it within a few backoffs of the loss.
        (
            "a lost, b up",
            "[[event]]\nat = \"5ms\"\nlink = \"a\"\naction = \"addr-lost\"\n",
            1.5,
        ),
        // Both links' addresses go, a's comes back at 3 s.
        (
            "a and b lost, a back at 3 s",
            "[[event]]\nat = \"5ms\"\nlink = \"a\"\naction = \"addr-lost\"\n\
             [[event]]\nat = \"5ms\"\nlink = \"b\"\naction = \"addr-lost\"\n\
             [[event]]\nat = \"3s\"\nlink = \"a\"\naction = \"addr-back\"\n",
            4.0,
        ),
    ] {
        let text = scenario_text(1.0, file);
        let base = &text[..text.find("[[event]]").expect("events")];
        let text = format!("{base}{events}");
        let plan = scenario::load_str(&text, "handshake.toml", Path::new("."), &[]).unwrap();
        let r = world::run(&plan.variants[0], 1);
        let first = first_data(&r);
        eprintln!(
            "{case}: first data at {first:?}, completed at {:?}",
            r.completed
        );
        assert!(
            first.is_some_and(|t| t <= Duration::from_secs_f64(first_data_by)),
            "{case}: first data at {first:?} (bound {first_data_by} s)"
        );
        assert!(
            r.completed.is_some(),
            "{case}: the transfer did not complete"
        );
    }
}

/// The client's first link carries nothing from the start (out of coverage: its address
/// stays, nothing answers) while the second works. The connection's first path goes over the
/// first link; after `pm.race` (1 s by default) the path manager opens a first path over the
/// second link as well (Happy Eyeballs): data flows from then on, and the first link's path
/// joins once it answers. With the race off the connection waits for the first link (its
/// opening retried with the path's backoff: 1, 2, 4, 8 s).
#[test]
fn a_silent_first_link_does_not_hold_the_connection() {
    for silent in [2.0, 10.0] {
        let text = format!(
            r#"
name = "silent-first"
duration = "30s"
seed = 3

[connection]
scheduler = "minrtt"
congestion = "cubic"

[[link]]
name = "a"
rate = "30Mbit"
delay = "10ms"
queue = 100

[[link]]
name = "b"
rate = "30Mbit"
delay = "10ms"
queue = 100

[app]
kind = "bulk"
start = "0.5s"

[[event]]
at = "0s"
link = "a"
action = "down"

[[event]]
at = "{silent}s"
link = "a"
action = "up"
"#
        );
        for race in ["1s", "off"] {
            let set = [format!("pm.race={race}")];
            let plan = scenario::load_str(&text, "silent.toml", Path::new("."), &set).unwrap();
            let r = world::run(&plan.variants[0], 1);
            let first = first_data(&r);
            eprintln!(
                "first link silent for {silent} s, race {race}: first data at {first:?}, \
                 link a {} MB, link b {} MB",
                r.link_bytes[0] as f64 / 1e6,
                r.link_bytes[1] as f64 / 1e6
            );
            let first = first.expect("data delivered");
            if race == "off" {
                assert!(
                    first >= Duration::from_secs_f64(silent),
                    "race off: data before the first link answered ({first:?})"
                );
                continue;
            }
            // The race at 1 s, the handshake and the first data over b: one RTT each.
            assert!(
                first <= Duration::from_millis(1100),
                "first link silent for {silent} s: first data at {first:?}"
            );
            assert!(
                r.link_bytes[0] > 0,
                "first link silent for {silent} s: its path never joined once it answered"
            );
        }
    }
}
