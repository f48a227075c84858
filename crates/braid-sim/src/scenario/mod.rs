//! Scenario files (TOML): links, application, scripted events, metrics windows, and the
//! variants to compare (a `[sweep]` over option values and/or named `[[variant]]`s). Every value
//! can be overridden with `--set key=value` (`connection.reinjection=rej1`, `link.0.rate=50Mbit`,
//! `link.wlan.delay=20ms`). Errors are one line naming the file, the key and what is allowed.
//!
//! [`spec`] holds the file's keys, [`check`] turns one variant's keys into a runnable
//! [`Variant`], [`topology`] resolves its nodes, interfaces, links and applications (the
//! two-node form is a topology of a client and a server).

mod check;
mod spec;
pub mod topology;

pub use crate::metrics::MetricsSpec;
pub use spec::*;
pub use topology::{AppDef, IfaceDef, LinkDef, NodeDef, RoutingPolicyKind, Topology};

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use braid_core::Config;

use crate::link::DirSpec;
use check::check;

/// A scenario error: `file: key `path`: message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    pub file: String,
    pub key: Option<String>,
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.key {
            Some(k) => write!(f, "{}: key `{}`: {}", self.file, k, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for ScenarioError {}

/// A replayed signal: (time, dBm), in time order.
pub type SignalSeries = Arc<Vec<(Duration, f64)>>;

/// A variant ready to run: its name, the settings that define it, and the checked scenario.
#[derive(Debug, Clone)]
pub struct Variant {
    pub name: String,
    pub settings: BTreeMap<String, String>,
    pub scenario: Scenario,
    /// Resolved link directions: (`ends[0]` → `ends[1]`, back) of [`Topology::links`], that is
    /// (server→client, client→server) in the two-node form and (a→b, b→a) in a topology.
    pub links: Vec<(DirSpec, DirSpec)>,
    /// Scripted actions sorted by time: (time, link index, action).
    pub timeline: Vec<(Duration, usize, Action)>,
    pub config: Arc<Config>,
    /// The client's path manager.
    pub pm: braid_pm::Config,
    /// Per link: its radio model, if any.
    pub radios: Vec<Option<crate::radio::RadioSpec>>,
    /// Per link: a signal replay, if any.
    pub signals: Vec<Option<SignalSeries>>,
    pub route: Option<crate::mobility::Route>,
    /// Nodes, links and applications (two nodes in the two-node form).
    pub topology: Topology,
    /// `[tunnel]`, unless absent or `transport = "none"`.
    pub tunnel: Option<TunnelVariant>,
}

impl Variant {
    /// The names the run's per-link figures go by (`link.<name>.mb`): the scenario's links in
    /// the two-node form, the interfaces of the first application's client in a topology
    /// (what its connection's paths leave by).
    pub fn link_names(&self) -> Vec<String> {
        match (&self.topology.routing, self.topology.apps.first()) {
            (Some(_), Some(app)) => self.topology.nodes[app.client]
                .ifaces
                .iter()
                .map(|f| f.name.clone())
                .collect(),
            _ => self.scenario.links.iter().map(|l| l.name.clone()).collect(),
        }
    }
}

/// Bytes of the IPv4 and TCP headers the end-to-end flow's datagrams travel in (`[tunnel]`).
pub const INNER_HEADERS: usize = 40;

/// A checked `[tunnel]`: the tunnel connection's configuration (the daemon's, with the
/// scenario's core) and the end-to-end connection's.
#[derive(Debug, Clone)]
pub struct TunnelVariant {
    pub tunnel: braid_tunnel::daemon::TunnelConfig,
    /// The end-to-end flow's connection (single path; its datagrams fit the tunnel's MTU in
    /// an IPv4 and TCP header).
    pub inner: Arc<Config>,
    /// The application is CBR and its messages go into the tunnel as IPv4/UDP packets, one
    /// each (`cbr_over = "udp"`), not through the end-to-end connection.
    pub cbr_udp: bool,
}

/// A loaded scenario file: the variants to compare.
#[derive(Debug, Clone)]
pub struct Plan {
    pub file: String,
    pub variants: Vec<Variant>,
}

impl Plan {
    pub fn name(&self) -> &str {
        &self.variants[0].scenario.name
    }

    pub fn base(&self) -> &Scenario {
        &self.variants[0].scenario
    }

    /// Keeps only the variants named in `names`, in the file's order (all of them when
    /// `names` is empty); a name the file does not have is an error that lists the file's
    /// variants. A run's seed is its variant's seed + its repetition, so a variant gives the
    /// same results run alone as with the others.
    pub fn retain_variants(&mut self, names: &[String]) -> Result<(), ScenarioError> {
        if names.is_empty() {
            return Ok(());
        }
        let known: Vec<&str> = self.variants.iter().map(|v| v.name.as_str()).collect();
        if let Some(message) = unknown_variant(names, &known) {
            return Err(ScenarioError {
                file: self.file.clone(),
                key: None,
                message,
            });
        }
        self.variants.retain(|v| names.contains(&v.name));
        Ok(())
    }
}

/// The error for the first of `names` that is not among `known`, listing those.
fn unknown_variant(names: &[String], known: &[&str]) -> Option<String> {
    let bad = names.iter().find(|n| !known.contains(&n.as_str()))?;
    Some(format!(
        "no variant named `{bad}` (the file's variants: {})",
        known.join(", ")
    ))
}

/// Loads a scenario file, applies `--set` overrides, and checks every variant.
pub fn load(path: &Path, overrides: &[String]) -> Result<Plan, ScenarioError> {
    load_variants(path, overrides, &[])
}

/// Like [`load`], keeping only the variants named in `names` (all when empty; see
/// [`Plan::retain_variants`]). The others are not built, so an override that does not apply to
/// them (a link index that a variant's own links do not have) is no error.
pub fn load_variants(
    path: &Path,
    overrides: &[String],
    names: &[String],
) -> Result<Plan, ScenarioError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
        file: file.clone(),
        key: None,
        message: format!("cannot read the scenario: {e}"),
    })?;
    let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    load_str_variants(&text, &file, &base_dir, overrides, names)
}

/// Like [`load`], from text; trace paths are resolved against `base_dir`.
pub fn load_str(
    text: &str,
    file: &str,
    base_dir: &Path,
    overrides: &[String],
) -> Result<Plan, ScenarioError> {
    load_str_variants(text, file, base_dir, overrides, &[])
}

/// Like [`load_variants`], from text.
pub fn load_str_variants(
    text: &str,
    file: &str,
    base_dir: &Path,
    overrides: &[String],
    names: &[String],
) -> Result<Plan, ScenarioError> {
    let err = |key: Option<String>, message: String| ScenarioError {
        file: file.to_string(),
        key,
        message,
    };
    let mut root: toml::Table = toml::from_str(text).map_err(|e| {
        let msg = e.message().to_string();
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].lines().count().max(1));
        match line {
            Some(l) => err(None, format!("line {l}: {msg}")),
            None => err(None, msg),
        }
    })?;
    // Command-line overrides win over everything in the file, sweeps and variants included.
    let mut cli: Vec<(String, toml::Value)> = Vec::new();
    for o in overrides {
        let (key, value) = o.split_once('=').ok_or_else(|| {
            err(
                None,
                format!("--set `{o}`: expected key=value, e.g. connection.reinjection=rej1"),
            )
        })?;
        let key = key.trim().to_string();
        let value = parse_value(value.trim());
        // Applied to the base now, to report errors in the key at once.
        set_path(&mut root, &key, value.clone()).map_err(|m| err(Some(key.clone()), m))?;
        // Overrides of the sweep or the variants change the plan itself, not each variant.
        let first = split_key(&key).unwrap_or_default().into_iter().next();
        if !matches!(first.as_deref(), Some("sweep" | "variant")) {
            cli.push((key, value));
        }
    }
    let sweep = match root.remove("sweep") {
        None => Vec::new(),
        Some(toml::Value::Table(t)) => t
            .into_iter()
            .map(|(k, v)| match v {
                toml::Value::Array(a) if !a.is_empty() => Ok((k, a)),
                _ => Err(err(
                    Some(format!("sweep.{k}")),
                    "expected a non-empty list of values".into(),
                )),
            })
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => return Err(err(Some("sweep".into()), "expected a table".into())),
    };
    // A swept key set on the command line is no longer swept.
    let overridden = |k: &str| {
        let k = split_key(k).unwrap_or_default();
        cli.iter()
            .any(|(c, _)| split_key(c).unwrap_or_default() == k)
    };
    let sweep: Vec<_> = sweep.into_iter().filter(|(k, _)| !overridden(k)).collect();
    let named = match root.remove("variant") {
        None => Vec::new(),
        Some(toml::Value::Array(a)) => a
            .into_iter()
            .enumerate()
            .map(|(i, v)| parse_variant(i, v).map_err(|(k, m)| err(Some(k), m)))
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => {
            return Err(err(
                Some("variant".into()),
                "expected [[variant]] entries with `name` and `set`".into(),
            ));
        }
    };
    // Named variants × sweep combinations.
    let mut combos: Vec<Overrides> = vec![(String::new(), Vec::new())];
    if !named.is_empty() {
        combos = named;
    }
    // With several swept keys, a label names its key: `alpha=0.3-hysteresis_db=2`.
    let several = sweep.len() > 1;
    for (key, values) in &sweep {
        let mut next = Vec::new();
        for (name, sets) in &combos {
            for v in values {
                let label = if several {
                    let short = split_key(key)
                        .ok()
                        .and_then(|p| p.last().cloned())
                        .unwrap_or_else(|| key.clone());
                    format!("{short}={}", value_label(v))
                } else {
                    value_label(v)
                };
                let n = if name.is_empty() {
                    label
                } else {
                    format!("{name}-{label}")
                };
                let mut s = sets.clone();
                s.push((key.clone(), v.clone()));
                next.push((n, s));
            }
        }
        combos = next;
    }
    // A variant named on the command line must exist; the others are not built. (A file
    // without variants or sweep has one variant, named after its reinjection once built.)
    let known: Vec<&str> = combos.iter().map(|c| c.0.as_str()).collect();
    if !known.contains(&"")
        && let Some(message) = unknown_variant(names, &known)
    {
        return Err(err(None, message));
    }
    let selected = |n: &str| names.is_empty() || n.is_empty() || names.iter().any(|s| s == n);
    let mut variants = Vec::new();
    for (name, sets) in combos {
        if !selected(&name) {
            continue;
        }
        let mut t = root.clone();
        for (k, v) in &sets {
            set_path(&mut t, k, v.clone()).map_err(|m| err(Some(k.clone()), m))?;
        }
        for (k, v) in &cli {
            set_path(&mut t, k, v.clone()).map_err(|m| {
                let m = if name.is_empty() {
                    m
                } else {
                    format!("{m} in variant `{name}` (--variant NAME runs only the variants named)")
                };
                err(Some(k.clone()), m)
            })?;
        }
        let scenario: Scenario =
            serde_path_to_error::deserialize(toml::Value::Table(t)).map_err(|e| {
                let path = e.path().to_string();
                err(
                    (path != "." && !path.is_empty()).then_some(path),
                    e.into_inner().message().to_string(),
                )
            })?;
        let name = if name.is_empty() {
            scenario.connection.reinjection.clone()
        } else {
            name
        };
        let settings = sets
            .iter()
            .map(|(k, v)| (k.clone(), value_label(v)))
            .collect();
        variants.push(check(scenario, name, settings, base_dir).map_err(|(k, m)| err(k, m))?);
    }
    let mut seen = std::collections::BTreeSet::new();
    for v in &variants {
        if !seen.insert(v.name.clone()) {
            return Err(err(None, format!("two variants are named `{}`", v.name)));
        }
    }
    let mut plan = Plan {
        file: file.to_string(),
        variants,
    };
    plan.retain_variants(names)?;
    Ok(plan)
}

/// A named set of overrides.
type Overrides = (String, Vec<(String, toml::Value)>);

fn parse_variant(i: usize, v: toml::Value) -> Result<Overrides, (String, String)> {
    let key = format!("variant[{i}]");
    let toml::Value::Table(mut t) = v else {
        return Err((key, "expected a table with `name` and `set`".into()));
    };
    let name = match t.remove("name") {
        Some(toml::Value::String(s)) if !s.is_empty() => s,
        _ => return Err((format!("{key}.name"), "expected a non-empty string".into())),
    };
    let sets = match t.remove("set") {
        Some(toml::Value::Table(s)) => s.into_iter().collect(),
        None => Vec::new(),
        Some(_) => {
            return Err((
                format!("{key}.set"),
                "expected a table of key = value, e.g. { \"connection.scheduler\" = \"redundant\" }"
                    .into(),
            ));
        }
    };
    if let Some(k) = t.keys().next() {
        return Err((
            format!("{key}.{k}"),
            "unknown key; allowed: name, set".into(),
        ));
    }
    Ok((name, sets))
}

fn value_label(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A `--set` value: a TOML literal (number, boolean, quoted string, array) or else a bare string.
fn parse_value(raw: &str) -> toml::Value {
    toml::from_str::<toml::Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_string()))
}

/// Splits a key path at dots outside double quotes: `sweep."connection.reinjection"` has two
/// components.
fn split_key(path: &str) -> Result<Vec<String>, String> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in path.chars() {
        match c {
            '"' => quoted = !quoted,
            '.' if !quoted => parts.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    if quoted {
        return Err("unbalanced quote in key".into());
    }
    parts.push(cur);
    if parts.iter().any(|p| p.is_empty()) {
        return Err("empty key component".into());
    }
    Ok(parts)
}

/// Sets `a.b.0.c` (array elements by index or by their `name`) in a TOML tree.
fn set_path(root: &mut toml::Table, path: &str, value: toml::Value) -> Result<(), String> {
    let parts = split_key(path)?;
    set_parts(root, &parts, value)
}

fn set_parts(root: &mut toml::Table, parts: &[String], value: toml::Value) -> Result<(), String> {
    let mut cur = root;
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        if last {
            cur.insert(part.clone(), value);
            return Ok(());
        }
        // `schedule.0.count` on a file without a schedule: a list entry that does not exist,
        // not a table to create.
        if !cur.contains_key(part)
            && let Some(n) = parts.get(i + 1).and_then(|p| p.parse::<usize>().ok())
        {
            return Err(format!("index {n} out of range (no `{part}` entries)"));
        }
        let entry = cur
            .entry(part.clone())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        cur = match entry {
            toml::Value::Table(t) => t,
            toml::Value::Array(a) => {
                let Some(sel) = parts.get(i + 1) else {
                    return Err(format!(
                        "`{part}` is a list: name an entry, e.g. {part}.0.key"
                    ));
                };
                let idx = match sel.parse::<usize>() {
                    Ok(n) if n < a.len() => n,
                    Ok(n) => return Err(format!("index {n} out of range ({} entries)", a.len())),
                    Err(_) => a
                        .iter()
                        .position(|e| e.get("name").and_then(|v| v.as_str()) == Some(sel))
                        .ok_or_else(|| format!("no `{part}` entry named `{sel}`"))?,
                };
                let rest = &parts[i + 2..];
                let toml::Value::Table(t) = &mut a[idx] else {
                    return Err(format!("`{part}` entries are not tables"));
                };
                if rest.is_empty() {
                    return Err("cannot replace a whole list entry; set one of its keys".into());
                }
                return set_parts(t, rest, value);
            }
            _ => return Err(format!("`{part}` is not a table")),
        };
    }
    Ok(())
}

#[cfg(test)]
mod tests;
