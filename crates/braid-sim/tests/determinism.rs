//! Same scenario + same seed = identical results, whatever the number of worker threads.

use std::path::Path;

use braid_sim::{report, runner, scenario};

const SCENARIO: &str = r#"
name = "det"
duration = "12s"
repetitions = 2
[connection]
remove_addr_delay = "300ms"
[[link]]
name = "a"
rate = "20Mbit"
delay = "10ms"
jitter = "2ms"
loss = 0.01
[[link]]
name = "b"
rate = "15Mbit"
delay = "25ms"
jitter = "1ms"
[app]
kind = "cbr"
rate = 1000
size = 1200
[[schedule]]
link = "a"
kind = "addr"
first = "3s"
down = "2s"
up = "2s"
count = 2
[sweep]
"connection.reinjection" = ["stock", "rej1"]
"#;

/// Every run of `plan` on `jobs` threads, without records.
fn results(plan: &scenario::Plan, jobs: usize) -> runner::PlanResult {
    runner::run(
        plan,
        &runner::Options {
            jobs,
            records: runner::Records::None,
            pcap: None,
        },
        &|_| {},
    )
}

fn run(jobs: usize) -> String {
    let plan = scenario::load_str(SCENARIO, "det.toml", Path::new("."), &[]).unwrap();
    let mut j = report::json(&results(&plan, jobs));
    // Wall-clock figures are the only thing allowed to differ.
    j.as_object_mut().unwrap().remove("wall_s");
    serde_json::to_string(&j).unwrap()
}

#[test]
fn same_seed_same_results_any_thread_count() {
    let a = run(1);
    let b = run(2);
    let c = run(1);
    assert_eq!(a, b);
    assert_eq!(a, c);
    // And the runs did something: the loss events were measured.
    assert!(a.contains("\"delay_increase_ms\""));
}

#[test]
fn different_seeds_differ() {
    let plan =
        scenario::load_str(SCENARIO, "det.toml", Path::new("."), &["seed=7".into()]).unwrap();
    let r = results(&plan, 2);
    let other = serde_json::to_string(&report::json(&r)).unwrap();
    assert_ne!(run(2), other);
}

/// A variant run alone (`--variant`) gives what it gives among the others.
#[test]
fn a_variant_alone_gives_its_results_among_the_others() {
    let json = |only: Option<usize>| {
        let mut plan = scenario::load_str(SCENARIO, "det.toml", Path::new("."), &[]).unwrap();
        let names: Vec<String> = plan.variants.iter().map(|v| v.name.clone()).collect();
        assert_eq!(names.len(), 2, "{names:?}");
        if let Some(i) = only {
            plan.retain_variants(&names[i..=i]).unwrap();
        }
        (names, report::json(&results(&plan, 2)))
    };
    let (names, all) = json(None);
    let (_, alone) = json(Some(1));
    let variant = |j: &serde_json::Value| {
        j["variants"]
            .as_array()
            .and_then(|a| a.iter().find(|v| v["name"] == names[1].as_str()).cloned())
            .unwrap_or_default()
    };
    assert_eq!(alone["variants"].as_array().map(Vec::len), Some(1));
    assert_eq!(variant(&alone)["runs"].as_array().map(Vec::len), Some(2));
    assert_eq!(variant(&alone), variant(&all));
}

/// Radio, shadowing, mobility, correlated jitter, the path managers (HMM included) and the
/// topology engine (hellos, seed 004's routing, relays, shared media) are deterministic too.
#[test]
fn mobility_scenarios_are_deterministic() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    for (file, set) in [
        ("e7-v2i-aggregation.toml", vec!["repetitions=2".to_string()]),
        (
            "e13-manet-heterogeneous.toml",
            vec![
                "repetitions=2".into(),
                "duration=\"60s\"".into(),
                "app.stop=\"40s\"".into(),
                "flow.0.start=\"42s\"".into(),
                "flow.1.start=\"50s\"".into(),
            ],
        ),
        (
            "e6-drive-by.toml",
            vec![
                "repetitions=2".into(),
                "duration=\"300s\"".into(),
                "sweep.\"connection.reinjection\"=[\"rej1\"]".into(),
            ],
        ),
    ] {
        let plan = scenario::load(&dir.join(file), &set).unwrap();
        let json = |jobs| {
            let mut j = report::json(&results(&plan, jobs));
            j.as_object_mut().unwrap().remove("wall_s");
            serde_json::to_string(&j).unwrap()
        };
        let a = json(1);
        assert_eq!(a, json(2), "{file}");
        let measured = if file.starts_with("e13") {
            "\"redundant_per_mb\""
        } else {
            "\"acted_before_break_pct\""
        };
        assert!(a.contains(measured), "{file}");
    }
}
