//! `braid._native`: the simulator behind the `braid` Python package.
//!
//! Thin glue over braid-sim's public API: [`Plan`] is a loaded scenario (file text plus `--set`
//! overrides, exactly as `braid sim` loads it); `Plan.run(variant, rep)` runs one task with the
//! GIL released (threads run tasks in parallel; Ray workers each run their share); and
//! `Plan.assemble(runs)` gathers the tasks' results into the document `braid sim --json`
//! prints, with the same summaries and the same table. Time series cross as contiguous
//! little-endian f64 buffers, one per column, that numpy views without a per-value copy.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use braid_sim::metrics::{METRICS, Per, Shown};
use braid_sim::runner::{self, PlanResult, Records, RunResult, VariantResult};
use braid_sim::{report, scenario, series, sweep};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

create_exception!(
    _native,
    BraidError,
    PyException,
    "An error of the braid package: its message is one line that says what to change."
);
create_exception!(
    _native,
    ScenarioError,
    BraidError,
    "A scenario that cannot be loaded: a bad key, value or file. The message names the key."
);

/// A scenario loaded into its variants (the file's own sweep and variants, and the overrides).
#[pyclass(frozen, module = "braid._native")]
struct Plan {
    plan: scenario::Plan,
}

#[pymethods]
impl Plan {
    /// Loads scenario text as `braid sim` loads a file: `file` names it in errors and in the
    /// results, `base_dir` resolves relative trace paths, `overrides` are `--set` strings.
    #[new]
    fn new(text: &str, file: &str, base_dir: &str, overrides: Vec<String>) -> PyResult<Plan> {
        let plan = scenario::load_str(text, file, Path::new(base_dir), &overrides)
            .map_err(|e| ScenarioError::new_err(e.to_string()))?;
        Ok(Plan { plan })
    }

    #[getter]
    fn name(&self) -> &str {
        self.plan.name()
    }

    #[getter]
    fn repetitions(&self) -> u32 {
        self.plan.base().repetitions
    }

    #[getter]
    fn seed(&self) -> u64 {
        self.plan.base().seed
    }

    #[getter]
    fn duration_s(&self) -> f64 {
        self.plan.base().duration.0.as_secs_f64()
    }

    /// `[(name, {swept key: value label})]`, in the order the runner uses.
    fn variants(&self) -> Vec<(String, BTreeMap<String, String>)> {
        self.plan
            .variants
            .iter()
            .map(|v| (v.name.clone(), v.settings.clone()))
            .collect()
    }

    /// Runs repetition `rep` of variant `variant` (the GIL is released meanwhile) and returns
    /// `{variant, rep, seed, events, wall_s, metrics: {key: [values]}, series}`; `series` is
    /// `{table: {columns, decimals, data: [bytes]}}` when asked for, else None.
    #[pyo3(signature = (variant, rep, series=false))]
    fn run<'py>(
        &self,
        py: Python<'py>,
        variant: usize,
        rep: u64,
        series: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        if variant >= self.plan.variants.len() {
            return Err(PyValueError::new_err(format!(
                "variant {variant} out of range ({} variants)",
                self.plan.variants.len()
            )));
        }
        let records = if series { Records::All } else { Records::None };
        let (result, tables) = py.detach(|| {
            let mut r = runner::run_one(&self.plan, variant, rep, records);
            let tables = r.record.take().map(|rec| series::tables(&rec));
            (r, tables)
        });
        let d = PyDict::new(py);
        d.set_item("variant", variant)?;
        d.set_item("rep", rep)?;
        d.set_item("seed", result.seed)?;
        d.set_item("events", result.events)?;
        d.set_item("wall_s", result.wall.as_secs_f64())?;
        d.set_item("metrics", result.metrics)?;
        match tables {
            None => d.set_item("series", py.None())?,
            Some(tables) => {
                let s = PyDict::new(py);
                for t in tables {
                    s.set_item(t.name, table_dict(py, &t)?)?;
                }
                d.set_item("series", s)?;
            }
        }
        Ok(d)
    }

    /// Gathers every task's result (dicts as `run` returns them, in any order) into the
    /// `braid sim --json` document (text) and its table, `wall_s` being the sweep's time.
    fn assemble(&self, runs: &Bound<'_, PyList>, wall_s: f64) -> PyResult<(String, String)> {
        let reps = self.plan.base().repetitions as usize;
        let mut slots: Vec<Vec<Option<RunResult>>> =
            vec![vec![None; reps]; self.plan.variants.len()];
        for item in runs.iter() {
            let d = item.cast::<PyDict>()?;
            let get = |k: &str| {
                d.get_item(k)?
                    .ok_or_else(|| PyValueError::new_err(format!("run result without `{k}`")))
            };
            let v: usize = get("variant")?.extract()?;
            let r: usize = get("rep")?.extract()?;
            let slot = slots
                .get_mut(v)
                .and_then(|s| s.get_mut(r))
                .ok_or_else(|| PyValueError::new_err(format!("no task ({v}, {r}) in this plan")))?;
            if slot.is_some() {
                return Err(PyValueError::new_err(format!(
                    "task ({v}, {r}) given twice"
                )));
            }
            *slot = Some(RunResult {
                seed: get("seed")?.extract()?,
                metrics: get("metrics")?.extract()?,
                record: None,
                events: get("events")?.extract()?,
                wall: Duration::from_secs_f64(get("wall_s")?.extract::<f64>()?.max(0.0)),
                captures: None,
            });
        }
        let mut variants = Vec::new();
        for (v, runs) in self.plan.variants.iter().zip(slots) {
            let runs = runs
                .into_iter()
                .enumerate()
                .map(|(r, run)| {
                    run.ok_or_else(|| {
                        PyValueError::new_err(format!("task ({}, {r}) missing", v.name))
                    })
                })
                .collect::<PyResult<Vec<_>>>()?;
            variants.push(VariantResult::of(v, runs));
        }
        let result = PlanResult::of(
            &self.plan,
            variants,
            Duration::from_secs_f64(wall_s.max(0.0)),
        );
        let json = serde_json::to_string_pretty(&report::json(&result))
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok((json, report::table(&result)))
    }
}

fn table_dict<'py>(py: Python<'py>, t: &series::Table) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let names: Vec<&str> = t.columns.iter().map(|c| c.name.as_str()).collect();
    let decimals: Vec<usize> = t.columns.iter().map(|c| c.decimals).collect();
    d.set_item("columns", names)?;
    d.set_item("decimals", decimals)?;
    let data = PyList::empty(py);
    for c in &t.columns {
        let bytes: Vec<u8> = c.values.iter().flat_map(|v| v.to_le_bytes()).collect();
        data.append(PyBytes::new(py, &bytes))?;
    }
    d.set_item("data", data)?;
    Ok(d)
}

/// A Python value as TOML; `key` names it in errors.
fn to_toml(obj: &Bound<'_, PyAny>, key: &str) -> PyResult<toml::Value> {
    let bad = |what: String| ScenarioError::new_err(format!("key `{key}`: {what}"));
    if obj.is_instance_of::<PyBool>() {
        return Ok(toml::Value::Boolean(obj.extract()?));
    }
    if obj.is_instance_of::<PyInt>() {
        return obj
            .extract::<i64>()
            .map(toml::Value::Integer)
            .map_err(|_| bad("an integer beyond 64 bits".into()));
    }
    if obj.is_instance_of::<PyFloat>() {
        return Ok(toml::Value::Float(obj.extract()?));
    }
    if obj.is_instance_of::<PyString>() {
        return Ok(toml::Value::String(obj.extract()?));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        return Ok(toml::Value::Table(to_table(d, key)?));
    }
    if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        let mut out = Vec::new();
        for (i, item) in obj.try_iter()?.enumerate() {
            out.push(to_toml(&item?, &format!("{key}[{i}]"))?);
        }
        return Ok(toml::Value::Array(out));
    }
    if obj.is_none() {
        return Err(bad("None has no scenario value; leave the key out".into()));
    }
    let ty = obj.get_type().name()?;
    Err(bad(format!(
        "a value of type {ty}; use str, int, float, bool, list or dict"
    )))
}

fn to_table(d: &Bound<'_, PyDict>, prefix: &str) -> PyResult<toml::Table> {
    let mut t = toml::Table::new();
    for (k, v) in d.iter() {
        let k: String = k.extract().map_err(|_| {
            ScenarioError::new_err(format!("keys of `{prefix}` must be strings, not {k}"))
        })?;
        let path = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        t.insert(k, to_toml(&v, &path)?);
    }
    Ok(t)
}

/// A scenario given as a dict, as TOML text for `Plan` (keys are checked when it loads).
#[pyfunction]
fn scenario_toml(d: &Bound<'_, PyDict>) -> PyResult<String> {
    toml::to_string(&to_table(d, "")?).map_err(|e| ScenarioError::new_err(e.to_string()))
}

/// The `--set` string that sets `key` to a Python value.
#[pyfunction]
fn set_override(key: &str, value: &Bound<'_, PyAny>) -> PyResult<String> {
    Ok(sweep::set(key, &to_toml(value, key)?))
}

/// The `--set` string that sweeps `key` over Python values (strings are read as `--sweep`
/// reads them only when given as one "a,b,c" string).
#[pyfunction]
fn sweep_override(key: &str, values: &Bound<'_, PyAny>) -> PyResult<String> {
    let values = match values.extract::<String>() {
        Ok(spec) => {
            sweep::parse(&format!("{key}={spec}"))
                .map_err(ScenarioError::new_err)?
                .1
        }
        Err(_) => match to_toml(values, key)? {
            toml::Value::Array(a) => a,
            one => vec![one],
        },
    };
    sweep::set_sweep(key, &values).map_err(ScenarioError::new_err)
}

/// Every metric: `[(key, per, shown, about, label, unit)]`, per "event" or "run", shown
/// "median" or "mean"; label and unit as the figures' axes name it.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn metric_defs() -> Vec<(
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
)> {
    METRICS
        .iter()
        .map(|m| {
            let per = match m.per {
                Per::Event => "event",
                Per::Run => "run",
            };
            let shown = match m.shown {
                Shown::Median => "median",
                Shown::Mean => "mean",
            };
            (m.key, per, shown, m.about, m.label, m.unit)
        })
        .collect()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Plan>()?;
    m.add_function(wrap_pyfunction!(scenario_toml, m)?)?;
    m.add_function(wrap_pyfunction!(set_override, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_override, m)?)?;
    m.add_function(wrap_pyfunction!(metric_defs, m)?)?;
    m.add("BraidError", m.py().get_type::<BraidError>())?;
    m.add("ScenarioError", m.py().get_type::<ScenarioError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
