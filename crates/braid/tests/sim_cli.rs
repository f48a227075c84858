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

/// The variants' names in a `--json` document, in its order.
fn variant_names(j: &serde_json::Value) -> Vec<&str> {
    j["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect()
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
    assert_eq!(variant_names(&j), ["stock", "pto", "rej1", "rej2", "rej4"]);
    let m = &j["variants"][0]["metrics"]["delay_increase_ms"];
    for key in ["median", "q1", "q3", "min", "max", "n"] {
        assert!(m.get(key).is_some(), "missing metrics.{key}");
    }
    assert_eq!(m["n"], 2);
    assert!(j["variants"][0]["runs"][0]["seed"].is_u64());
    assert_eq!(j["paper"]["values"]["stock"]["delay_increase_ms"], 400.0);
}

#[test]
fn variant_runs_only_the_named_variants_and_names_an_unknown_one() {
    let short = [
        "--reps",
        "1",
        "--set",
        "duration=30s",
        "--set",
        "schedule.0.count=2",
    ];
    let j = e3_json(&[&short[..], &["--variant", "rej2", "--variant", "pto"]].concat());
    assert_eq!(variant_names(&j), ["pto", "rej2"], "the file's order");
    let out = braid()
        .arg("sim")
        .arg(scenario("e3-rtt-below-rtomin.toml"))
        .args(["--quiet", "--variant", "rej3"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("no variant named `rej3` (the file's variants: stock, pto, rej1, rej2, rej4)"),
        "{err}"
    );
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
    // A seed a scenario file cannot hold (its integers end at 2^63 − 1): refused by the
    // argument parser, naming the option, before any file is read.
    let out = braid()
        .arg("sim")
        .arg(scenario("e3-rtt-below-rtomin.toml"))
        .args(["--seed", "18446744073709551615"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.lines().next().is_some_and(|l| l.contains("--seed")),
        "{err}"
    );
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

    // Topologies: a link naming a missing node or interface (keys count the file's entries), an
    // interface or server address a node lacks, a priority outside 1–6. (A disconnected
    // application: scenario::tests.)
    let cases: &[(&[&str], &str)] = &[
        (
            &["--set", "link.m5m8.a=\"M9.*\""],
            "key `link[10].a`: no node `M9`",
        ),
        (
            &[
                "--set",
                "link.m5m8.b=\"M8.e9\"",
                "--set",
                "link.m5m8.a=\"M5.e0\"",
            ],
            "key `link[10].b`: node `M8` has no interface `e9`",
        ),
        (
            &["--set", "app.interfaces=[\"e5\"]"],
            "key `app.interfaces`",
        ),
        (&["--set", "app.server=\"M1.e7\""], "key `app.server`"),
        (
            &["--set", "app.priority=9"],
            "key `app.priority`: 9 out of range",
        ),
    ];
    for (args, want) in cases {
        let out = braid()
            .arg("sim")
            .arg(scenario("e13-manet-homogeneous.toml"))
            .args(*args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }

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
    // Seed 004's MANET and the grids: speed and heap per node.
    for t in [
        "e13-manet-heterogeneous: 8 nodes, 52 links",
        "grid-8x8: 64 nodes",
    ] {
        assert!(s.contains(t), "{s}");
    }
    assert!(s.contains("heap held per node"), "{s}");
}

/// Runs `braid sim FILE ARGS --report DIR`; returns the figures index.html shows, each checked
/// to be a well-formed, non-empty SVG drawing, with their text.
fn report(dir: &std::path::Path, file: &str, args: &[&str]) -> Vec<(String, String)> {
    report_json(dir, file, args).0
}

/// [`report`], and the run's `--json` document.
fn report_json(
    dir: &std::path::Path,
    file: &str,
    args: &[&str],
) -> (Vec<(String, String)>, serde_json::Value) {
    let _ = std::fs::remove_dir_all(dir);
    let out = braid()
        .arg("sim")
        .arg(scenario(file))
        .args(["--quiet", "--json", "--report"])
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let html = std::fs::read_to_string(dir.join("index.html")).unwrap();
    let figs: Vec<String> = html
        .split("<img src=\"")
        .skip(1)
        .map(|s| s[..s.find('"').unwrap()].to_string())
        .collect();
    let figs = figs
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(dir.join(&f)).unwrap_or_else(|e| panic!("{f}: {e}"));
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
            let labels: Vec<String> = root
                .descendants()
                .filter(|n| n.tag_name().name() == "text")
                .filter_map(|n| n.text().map(str::to_string))
                .collect();
            assert!(
                shapes > 10 && labels.len() > 5,
                "{f}: {shapes} shapes, {} labels",
                labels.len()
            );
            (f, labels.join("\n"))
        })
        .collect();
    (figs, json)
}

/// Width of a figure and of its legend column (`braid_sim::plot`).
const FIG_W: f64 = 1040.0;
const LEGEND_W: f64 = 240.0;

/// The report of `file` is fit for a paper (issue: figures fit for a paper): every axis label
/// comes from the metric table (metric axes) or the fixed series axes, never a raw key; every
/// box plot's whiskers span exactly its data's range (min–max, as its caption says) and every
/// other whisker lies within it, with the values counted from the run's `--json`; no category
/// without data; every data mark lies left of the legend column; the results are an HTML
/// table headed by the metrics' names; marker lines carry their link and event.
fn check_fit_for_a_paper(dir: &std::path::Path, json: &serde_json::Value) -> Vec<String> {
    use braid_sim::metrics::{METRICS, axis_label};
    use braid_sim::plot::SERIES_AXES;
    let figs: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("figures.json")).unwrap()).unwrap();
    let html = std::fs::read_to_string(dir.join("index.html")).unwrap();
    assert!(!html.contains("<pre>"), "the results are a table, not text");
    let known_metric = |k: &str| {
        METRICS.iter().any(|m| m.key == k) || k.starts_with("link.") || k.starts_with("flow.")
    };
    // Raw values per (variant, metric), pooled over runs.
    let values = |variant: &str, key: &str| -> Vec<f64> {
        json["variants"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|v| v["name"] == variant)
            .flat_map(|v| v["runs"].as_array().unwrap().iter())
            .flat_map(|r| r["metrics"][key].as_array().cloned().unwrap_or_default())
            .filter_map(|x| x.as_f64())
            .collect()
    };
    let mut seen_labels = Vec::new();
    for f in &figs {
        let file = f["file"].as_str().unwrap();
        assert!(
            html.contains(&format!("src=\"{file}\"")),
            "{file} not in index.html"
        );
        let svg = std::fs::read_to_string(dir.join(file)).unwrap();
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let texts: Vec<&str> = doc
            .descendants()
            .filter(|n| n.tag_name().name() == "text")
            .filter_map(|n| n.text())
            .map(str::trim)
            .collect();
        for axis in ["x", "y"] {
            let a = &f[axis];
            let label = a["label"].as_str().unwrap();
            assert!(
                texts.contains(&label),
                "{file}: axis label {label:?} not drawn"
            );
            if let Some(key) = a["metric"].as_str() {
                assert!(
                    known_metric(key),
                    "{file}: {key} is not in the metric table"
                );
                assert_eq!(label, axis_label(key), "{file}: the metric table's label");
                assert_ne!(label, key, "{file}: a raw key as label");
            } else if a["setting"].is_string() {
                assert!(
                    !label.contains('.') && !label.contains('"'),
                    "{file}: {label}"
                );
            } else {
                assert!(
                    SERIES_AXES.contains(&label),
                    "{file}: {label:?} is no known axis"
                );
            }
            seen_labels.push(label.to_string());
        }
        // Boxes and whiskers against the data they summarise.
        let key = f["y"]["metric"].as_str().unwrap_or_default();
        let boxes = f["boxes"].as_array().unwrap();
        if file.starts_with("box-") || file.starts_with("bars-") {
            let with_data: Vec<&str> = json["variants"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v["name"].as_str().unwrap())
                .filter(|v| !values(v, key).is_empty())
                .collect();
            let cats: Vec<&str> = boxes
                .iter()
                .map(|b| b["category"].as_str().unwrap())
                .collect();
            assert_eq!(
                cats, with_data,
                "{file}: a slot per variant with data, no empty one"
            );
        }
        for b in boxes {
            let cat = b["category"].as_str().unwrap();
            let v = values(cat, key);
            assert!(!v.is_empty(), "{file}: {cat} has no {key} values");
            let (lo, hi) = v
                .iter()
                .fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(*x), b.max(*x)));
            let (wl, wh) = (
                b["whisker_lo"].as_f64().unwrap(),
                b["whisker_hi"].as_f64().unwrap(),
            );
            let eps = 1e-9 * hi.abs().max(1.0);
            assert!(
                wl >= lo - eps && wh <= hi + eps && wl <= wh,
                "{file}: {cat} whiskers {wl}..{wh} outside the data {lo}..{hi}"
            );
            assert_eq!(b["n"].as_u64(), Some(v.len() as u64), "{file}: {cat}");
            if file.starts_with("box-") {
                assert!(
                    (wl - lo).abs() <= eps && (wh - hi).abs() <= eps,
                    "{file}: min–max"
                );
                assert!(f["caption"].as_str().unwrap().contains("min–max"), "{file}");
            }
        }
        // Data marks left of the legend column; legend text right of it.
        for n in doc
            .descendants()
            .filter(|n| n.tag_name().name() == "circle")
        {
            let cx: f64 = n.attribute("cx").unwrap().parse().unwrap();
            let r: f64 = n.attribute("r").unwrap_or("0").parse().unwrap();
            let legend = cx > FIG_W - LEGEND_W;
            // The legend's own glyphs are the only circles in its column.
            if legend {
                assert!(
                    cx < FIG_W - LEGEND_W + 40.0 && r <= 4.0,
                    "{file}: a mark at x {cx}"
                );
            }
        }
    }
    // The results table: a column per shown metric, headed by its name and unit.
    let table = &html[html.find("<table>").unwrap()..];
    for v in json["variants"].as_array().unwrap() {
        assert!(table.contains(&format!("<td>{}</td>", v["name"].as_str().unwrap())));
    }
    figs.iter()
        .map(|f| f["file"].as_str().unwrap().to_string())
        .collect()
}

/// Every figure index.html shows exists and is a well-formed, non-empty SVG drawing.
#[test]
fn report_figures_exist_and_are_valid_svg() {
    let dir = std::env::temp_dir().join(format!("braid-report-test-{}", std::process::id()));
    let figs: Vec<String> = report(&dir, "e7-v2i-aggregation.toml", &["--reps", "2"])
        .into_iter()
        .map(|(f, _)| f)
        .collect();
    // Per variant (stock, cross, cross-hmm): sequence numbers, delay, throughput, signal;
    // then bars and a box plot per shown metric and the bytes per interface.
    for v in ["stock", "cross", "cross-hmm"] {
        for kind in ["dsn", "delay", "throughput", "rss"] {
            assert!(
                figs.iter()
                    .any(|f| f.ends_with(&format!("-{v}-{kind}.svg"))),
                "no {kind} figure for {v} in {figs:?}"
            );
        }
    }
    assert!(
        figs.contains(&"bytes-per-interface.svg".to_string()),
        "{figs:?}"
    );
    assert!(figs.iter().any(|f| f.starts_with("box-")), "{figs:?}");
    assert!(figs.iter().any(|f| f.starts_with("bars-")), "{figs:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// E2, E3 and E7's reports pass the paper checks ([`check_fit_for_a_paper`]); the loss lines
/// name their link, and E7's path-manager decisions theirs.
#[test]
fn reports_of_e2_e3_e7_are_fit_for_a_paper() {
    // File, arguments, and (figure, label) pairs: a marker label the figure must show.
    type Marks<'a> = &'a [(&'a str, &'a str)];
    let runs: [(&str, &[&str], Marks); 3] = [
        (
            "e2-blockage.toml",
            &["--reps", "2"],
            &[("v0-minrtt-dsn.svg", "vlc2 lost")],
        ),
        (
            "e3-rtt-below-rtomin.toml",
            &[
                "--reps",
                "2",
                "--set",
                "duration=40s",
                "--set",
                "schedule.0.count=3",
            ],
            &[("v0-stock-delay.svg", "wlan lost")],
        ),
        (
            "e7-v2i-aggregation.toml",
            &["--reps", "2"],
            &[
                ("v0-stock-dsn.svg", "its lost"),
                ("v1-cross-dsn.svg", "its demoted"),
            ],
        ),
    ];
    for (file, args, marks) in runs {
        let dir = std::env::temp_dir().join(format!("braid-report-paper-{}", std::process::id()));
        let (figs, json) = report_json(&dir, file, args);
        let checked = check_fit_for_a_paper(&dir, &json);
        assert_eq!(
            checked.len(),
            figs.len(),
            "{file}: figures.json lists every figure"
        );
        for (fig, m) in marks.iter() {
            let text = &figs
                .iter()
                .find(|(f, _)| f == fig)
                .unwrap_or_else(|| panic!("{file}: no {fig}"))
                .1;
            assert!(text.contains(m), "{file}: no marker {m:?} in {fig}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// E13 as the seed draws it: per-variant bars with their spread and the paper's values, labelled
/// with units; E14: transfer time against the receive buffer, one line per variant.
#[test]
fn manet_reports_draw_bars_and_the_buffer_sweep() {
    let dir = std::env::temp_dir().join(format!("braid-report-e13-{}", std::process::id()));
    let figs = report(
        &dir,
        "e13-manet-homogeneous.toml",
        &[
            "--reps",
            "2",
            "--set",
            "duration=60s",
            "--set",
            "app.stop=40s",
            "--set",
            "flow.0.start=42s",
            "--set",
            "flow.1.start=50s",
        ],
    );
    let bars = &figs
        .iter()
        .find(|(f, _)| f == "bars-throughput_mbps.svg")
        .unwrap_or_else(|| panic!("{figs:?}"))
        .1;
    for label in ["Throughput (Mbit/s)", "paper", "tm", "mmpxm"] {
        assert!(bars.contains(label), "{label}: {bars}");
    }
    assert!(
        figs.iter()
            .any(|(f, t)| f == "bars-flow.file1_8MB.completion_s.svg"
                && t.contains("Transfer time, file1_8MB (s)")),
        "{figs:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    let figs = report(
        &dir,
        "e14-manet-buffer.toml",
        &[
            "--reps",
            "1",
            "--set",
            "sweep.\"connection.receive_buffer\"=[\"6144B\", \"18432B\", \"614400B\"]",
        ],
    );
    let sweep = &figs
        .iter()
        .find(|(f, _)| f == "sweep-completion_s.svg")
        .unwrap_or_else(|| panic!("{figs:?}"))
        .1;
    for label in [
        "Receive buffer (kB)",
        "Transfer time (s)",
        "pmmfxm300",
        "mmfxm",
    ] {
        assert!(sweep.contains(label), "{label}: {sweep}");
    }
    // A sweep's points are summarised, not drawn one by one.
    assert!(
        !figs.iter().any(|(f, _)| f.ends_with("-dsn.svg")),
        "{figs:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `braid lab` refuses what it cannot emulate with one line naming the key, before it creates
/// anything (so without root too).
#[test]
fn lab_refuses_what_it_cannot_emulate_by_key() {
    let cases: &[(&str, &[&str], &str)] = &[
        (
            "e13-manet-homogeneous.toml",
            &[],
            "variant tm: node (M2): the lab joins the application's two nodes by their links",
        ),
        (
            "e7-v2i-aggregation.toml",
            &["--variant", "cross-hmm", "--set", "pm.hmm.interval=1500us"],
            "variant cross-hmm: pm.hmm.interval: the path managers take whole milliseconds",
        ),
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
            "unknown endpoint `quic` (allowed: tunnel, mptcp, pm, mptcpd)",
        ),
        (
            "e3-rtt-below-rtomin.toml",
            &["--endpoint", "pm", "--set", "connection.rto_min=100ms"],
            "connection.rto_min: kernel MPTCP keeps its own 200 ms",
        ),
        (
            "e11-tunnel-aggregation.toml",
            &["--endpoint", "pm"],
            "tunnel: the kernel MPTCP endpoint runs no tunnel",
        ),
        (
            "e3-rtt-below-rtomin.toml",
            &["--set", "connection.liveness_probe=1500us"],
            "connection.liveness_probe: braid tunnel's keepalive_ms takes whole milliseconds from 10",
        ),
        (
            "e3-rtt-below-rtomin.toml",
            &[
                "--endpoint",
                "mptcp",
                "--set",
                "connection.liveness_probe=1s",
            ],
            "connection.liveness_probe: kernel MPTCP sends no liveness probes",
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
