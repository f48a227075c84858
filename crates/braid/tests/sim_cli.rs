//! `braid sim` as a user runs it.

use std::path::PathBuf;
use std::process::Command;

fn braid() -> Command {
    Command::new(env!("CARGO_BIN_EXE_braid"))
}

fn scenario(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(name)
}

/// `braid sim` on E3 with `args`, `--json --quiet`: the document, after checking success.
fn e3_json(args: &[&str]) -> serde_json::Value {
    let out = braid()
        .arg("sim")
        .arg(scenario("e3-rtt-below-rtomin.toml"))
        .args(["--json", "--quiet"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn json_has_stable_keys_and_variant_names() {
    let j = e3_json(&[
        "--reps",
        "1",
        "--set",
        "duration=30s",
        "--set",
        "schedule.0.count=2",
    ]);
    for key in [
        "scenario",
        "file",
        "description",
        "seed",
        "repetitions",
        "duration_s",
        "paper",
        "variants",
    ] {
        assert!(j.get(key).is_some(), "missing {key}");
    }
    let names: Vec<&str> = j["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["stock", "pto", "rej1", "rej2", "rej4"]);
    let m = &j["variants"][0]["metrics"]["delay_increase_ms"];
    for key in ["median", "q1", "q3", "min", "max", "n"] {
        assert!(m.get(key).is_some(), "missing metrics.{key}");
    }
    assert_eq!(m["n"], 2);
    assert!(j["variants"][0]["runs"][0]["seed"].is_u64());
    assert_eq!(j["paper"]["values"]["stock"]["delay_increase_ms"], 400.0);
}

#[test]
fn table_shows_the_papers_numbers_and_progress_goes_to_stderr() {
    let out = braid()
        .arg("sim")
        .arg(scenario("e1-vlc-throughput.toml"))
        .args(["--reps", "1", "--set", "duration=5s"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("median [q1–q3]"), "{table}");
    assert!(table.contains("paper (seed 001"), "{table}");
    for v in ["minrtt", "redundant", "backup"] {
        assert!(table.lines().any(|l| l.starts_with(v)), "{table}");
    }
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("[3/3]"), "progress: {err}");
}

#[test]
fn bad_scenarios_give_one_line_errors() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--set", "connection.reinjection=rej0"],
            "key `connection.reinjection`",
        ),
        (&["--set", "link.0.rate=-3Mbit"], "key `link[0].rate`"),
        (&["--set", "link.wlan.colour=3"], "unknown field `colour`"),
        (
            &["--set", "link.0.trace=\"x.down\""],
            "give either a rate or a trace",
        ),
    ];
    for (args, want) in cases {
        let out = braid()
            .arg("sim")
            .arg(scenario("e3-rtt-below-rtomin.toml"))
            .args(*args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains("e3-rtt-below-rtomin.toml"), "{err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    // A trace that does not exist.
    let dir = std::env::temp_dir().join(format!("braid-sim-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = std::fs::read_to_string(scenario("e3-rtt-below-rtomin.toml"))
        .unwrap()
        .replacen("rate = \"30Mbit\"", "trace = \"missing.down\"", 1);
    let file = dir.join("trace.toml");
    std::fs::write(&file, text).unwrap();
    let out = braid().arg("sim").arg(&file).output().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("key `link[0].trace`") && err.contains("cannot read trace"),
        "{err}"
    );
    assert!(err.contains("missing.down"), "{err}");

    let out = braid().args(["sim", "/nonexistent.toml"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read the scenario"));
}

#[test]
fn sweep_runs_one_variant_per_grid_point() {
    let j = e3_json(&[
        "--reps",
        "2",
        "--set",
        "duration=20s",
        "--set",
        "schedule.0.count=1",
        "--sweep",
        "connection.reinjection=stock,rej1,rej2",
        "--sweep",
        "link.wlan.delay=10ms,20ms",
    ]);
    let variants = j["variants"].as_array().unwrap();
    assert_eq!(variants.len(), 6);
    assert_eq!(variants[3]["name"], "reinjection=rej1-delay=20ms");
    assert_eq!(variants[3]["settings"]["link.wlan.delay"], "20ms");
    assert_eq!(variants[3]["settings"]["connection.reinjection"], "rej1");
    let runs: usize = variants
        .iter()
        .map(|v| v["runs"].as_array().unwrap().len())
        .sum();
    assert_eq!(runs, 12);
    // A swept key that --set also fixes, and a malformed sweep: one line each.
    for args in [
        &[
            "--sweep",
            "link.0.rate=1Mbit,2Mbit",
            "--set",
            "link.0.rate=3Mbit",
        ][..],
        &["--sweep", "link.0.rate"][..],
        &["--sweep", "link.nope.rate=1Mbit,2Mbit"][..],
    ] {
        let out = braid()
            .arg("sim")
            .arg(scenario("e3-rtt-below-rtomin.toml"))
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn out_writes_csv_time_series() {
    let dir = std::env::temp_dir().join(format!("braid-sim-out-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = braid()
        .arg("sim")
        .arg(scenario("e2-shadowing.toml"))
        .args(["--quiet", "--reps", "1", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success());
    let ts = std::fs::read_to_string(dir.join("backup/seed1/timeseries.csv")).unwrap();
    assert!(ts.starts_with("t_s,throughput_mbps,vlc1_rx_mbps"));
    assert!(ts.lines().count() > 100);
    assert!(dir.join("summary.json").exists());
    assert!(dir.join("redundant/seed1/deliveries.csv").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bench_reports_speed_as_a_multiple_of_real_time() {
    let out = braid()
        .args(["sim", "--bench", "--quiet"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("x real time"), "{s}");
    assert!(s.contains("events/s"), "{s}");
}

/// Every figure index.html shows exists and is a well-formed, non-empty SVG drawing.
#[test]
fn report_figures_exist_and_are_valid_svg() {
    let dir = std::env::temp_dir().join(format!("braid-report-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = braid()
        .arg("sim")
        .arg(scenario("e7-v2i-aggregation.toml"))
        .args(["--quiet", "--reps", "2", "--report"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(dir.join("index.html")).unwrap();
    let figs: Vec<&str> = html
        .split("<img src=\"")
        .skip(1)
        .map(|s| &s[..s.find('"').unwrap()])
        .collect();
    // Per variant (stock, cross, cross-hmm): sequence numbers, delay, throughput, signal;
    // then a box plot per shown metric and the bytes per interface.
    for v in ["stock", "cross", "cross-hmm"] {
        for kind in ["dsn", "delay", "throughput", "rss"] {
            assert!(
                figs.iter()
                    .any(|f| f.ends_with(&format!("-{v}-{kind}.svg"))),
                "no {kind} figure for {v} in {figs:?}"
            );
        }
    }
    assert!(figs.contains(&"bytes-per-interface.svg"), "{figs:?}");
    assert!(figs.iter().any(|f| f.starts_with("box-")), "{figs:?}");
    for f in &figs {
        let text = std::fs::read_to_string(dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        let doc = roxmltree::Document::parse(&text).unwrap_or_else(|e| panic!("{f}: {e}"));
        let root = doc.root_element();
        assert_eq!(root.tag_name().name(), "svg", "{f}");
        let shapes = root
            .descendants()
            .filter(|n| {
                matches!(
                    n.tag_name().name(),
                    "circle" | "polyline" | "path" | "rect" | "line" | "polygon"
                )
            })
            .count();
        let labels = root
            .descendants()
            .filter(|n| n.tag_name().name() == "text")
            .count();
        assert!(
            shapes > 10 && labels > 5,
            "{f}: {shapes} shapes, {labels} labels"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `braid lab` refuses what it cannot emulate with one line naming the key, before it creates
/// anything (so without root too).
#[test]
fn lab_refuses_what_it_cannot_emulate_by_key() {
    let cases: &[(&str, &[&str], &str)] = &[
        ("e7-v2i-aggregation.toml", &[], "mobility"),
        (
            "e3-rtt-below-rtomin.toml",
            &["--set", "connection.ack_frequency=4"],
            "connection.ack_frequency: not applied by the braid tunnel endpoint",
        ),
        (
            "e3-rtt-below-rtomin.toml",
            &["--endpoint", "mptcp", "--set", "connection.congestion=lia"],
            "connection.congestion: kernel MPTCP runs cubic or newreno",
        ),
        (
            "e3-rtt-below-rtomin.toml",
            &["--endpoint", "quic"],
            "unknown endpoint `quic` (allowed: tunnel, mptcp)",
        ),
    ];
    for (file, args, want) in cases {
        let out = braid()
            .arg("lab")
            .arg(scenario(file))
            .args(*args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{file} {args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(want), "{file} {args:?}: {err}");
    }
}
