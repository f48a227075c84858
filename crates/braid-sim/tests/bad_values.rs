//! Every shipped scenario with values a user could mistype or push to the edge: one to three
//! leaves of the file replaced by an extreme value (zero, negative, huge, NaN, infinite, a
//! sub-microsecond or multi-year duration, a 1 bit/s or 9 Tbit/s rate, a 1 GB size, a value of
//! the wrong type). Each either loads, runs one repetition of its first variant without a
//! panic and gives finite metrics, or is refused with one line naming the key. Found this way
//! (each now a unit test where it was fixed): a jitter under a microsecond drew from an empty
//! range, a CBR bitrate above a million messages a second stalled the clock, a 100 GB send
//! buffer took the machine's memory, a 1 bit/s link's backlog overflowed the clock.

use std::path::{Path, PathBuf};

use braid_sim::{runner, scenario};
use proptest::prelude::*;
use toml::Value;

fn scenarios() -> (PathBuf, Vec<PathBuf>) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("scenarios/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 20, "{} scenario files", files.len());
    (dir, files)
}

/// The path of every value in `v` (array elements as `#i`), arrays and tables included.
fn leaves(v: &Value, path: Vec<String>, out: &mut Vec<Vec<String>>) {
    match v {
        Value::Table(t) => {
            for (k, v) in t {
                let mut p = path.clone();
                p.push(k.clone());
                leaves(v, p, out);
            }
        }
        Value::Array(a) => {
            out.push(path.clone());
            for (i, v) in a.iter().enumerate() {
                let mut p = path.clone();
                p.push(format!("#{i}"));
                leaves(v, p, out);
            }
        }
        _ => out.push(path),
    }
}

fn get_mut<'a>(v: &'a mut Value, p: &[String]) -> Option<&'a mut Value> {
    let mut cur = v;
    for k in p {
        cur = match k.strip_prefix('#') {
            Some(i) => cur.as_array_mut()?.get_mut(i.parse::<usize>().ok()?)?,
            None => cur.as_table_mut()?.get_mut(k)?,
        };
    }
    Some(cur)
}

const STRINGS: &[&str] = &[
    "",
    "0s",
    "-1ms",
    "1e9s",
    "1e20Mbit",
    "99999999999h",
    "abc",
    "nan",
    "inf",
    "0.5us",
    "1bit",
    "0B",
    "100GB",
    "-3Mbit",
    "18446744073709551616",
    "1e-9s",
];
const DURATIONS: &[&str] = &["0s", "1us", "0.4us", "3ms", "1s", "600s", "0.001ms", "5min"];
const RATES: &[&str] = &["1bit", "100bit", "64kbit", "1Gbit", "9000Gbit", "2.5Mbit"];
const SIZES: &[&str] = &["0B", "1B", "16B", "1500B", "1GB", "64KiB"];
const INTEGERS: &[i64] = &[
    0,
    -1,
    1,
    2,
    15,
    255,
    65_535,
    1 << 31,
    1 << 40,
    i64::MAX,
    i64::MIN,
];
const FLOATS: &[f64] = &[
    0.0,
    -0.5,
    1e-12,
    0.999_999,
    1.0,
    1.5,
    -160.0,
    1e18,
    f64::NAN,
    f64::INFINITY,
];

fn pick<T: Copy>(list: &[T], r: u64) -> T {
    list[(r % list.len() as u64) as usize]
}

/// An extreme value for a leaf whose value was `orig`: of the same kind (a duration for a
/// duration, a rate for a rate…) when `same`, else of any type.
fn extreme(orig: &Value, r: u64, same: bool) -> Value {
    if same {
        match orig {
            Value::String(s) => {
                let t = s.trim();
                let starts_digit = t.chars().next().is_some_and(|c| c.is_ascii_digit());
                let list = if starts_digit && t.ends_with('s') {
                    DURATIONS
                } else if t.ends_with("bit") {
                    RATES
                } else if starts_digit && t.ends_with('B') {
                    SIZES
                } else {
                    STRINGS
                };
                return Value::String(pick(list, r).to_string());
            }
            Value::Integer(_) => return Value::Integer(pick(INTEGERS, r)),
            Value::Float(_) => return Value::Float(pick(FLOATS, r)),
            Value::Boolean(b) => return Value::Boolean(!b),
            _ => {}
        }
    }
    match r % 6 {
        0 | 1 => Value::String(pick(STRINGS, r / 6).to_string()),
        2 => Value::Integer(pick(INTEGERS, r / 6)),
        3 => Value::Float(pick(FLOATS, r / 6)),
        4 => Value::Array(vec![]),
        _ => Value::Table(Default::default()),
    }
}

/// 96 cases from a fixed seed, the same in every run; `PROPTEST_RNG_SEED=N` explores others.
fn config() -> ProptestConfig {
    let mut c = ProptestConfig {
        cases: 96,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        c.rng_seed = proptest::test_runner::RngSeed::Fixed(0x6261_645f_7661_6c73);
    }
    c
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn extreme_values_are_one_line_errors_or_run_to_finite_metrics(
        file in any::<u64>(),
        edits in prop::collection::vec((any::<u64>(), any::<u64>(), any::<bool>()), 1..=3),
    ) {
        let (dir, files) = scenarios();
        let path = &files[(file % files.len() as u64) as usize];
        let text = std::fs::read_to_string(path).expect("scenario");
        let mut doc: Value = toml::from_str(&text).expect("shipped scenario");
        let mut paths = Vec::new();
        leaves(&doc, vec![], &mut paths);
        let mut what = Vec::new();
        for (leaf, r, same) in edits {
            let p = &paths[(leaf % paths.len() as u64) as usize];
            // An earlier edit may have replaced a table above this leaf.
            let Some(slot) = get_mut(&mut doc, p) else {
                continue;
            };
            let v = extreme(slot, r, same);
            what.push(format!("{}={v}", p.join(".")));
            *slot = v;
        }
        let name = path.file_name().expect("name").to_string_lossy().to_string();
        let edited = toml::to_string(&doc).expect("serialise");
        let case = format!("{name} with {}", what.join(" "));
        match scenario::load_str(&edited, &name, &dir, &["repetitions=1".to_string()]) {
            Err(e) => {
                let e = e.to_string();
                prop_assert!(!e.contains('\n'), "{case}: error of several lines: {e}");
                prop_assert!(e.starts_with(&name), "{case}: error without the file: {e}");
            }
            Ok(plan) => {
                // Hours of virtual time are allowed and run; here they only need to load.
                if plan.base().duration.0 <= std::time::Duration::from_secs(900) {
                    let r = runner::run_one(&plan, 0, 0, runner::Records::None);
                    for (k, vals) in &r.metrics {
                        prop_assert!(vals.iter().all(|v| v.is_finite()), "{case}: {k} = {vals:?}");
                    }
                }
            }
        }
    }
}
