//! Checks a deserialized scenario and resolves it into a runnable [`Variant`]: link
//! directions, the timeline of scripted actions, the core's configuration, the path manager's,
//! radios, signal replays, the vehicle's route and the topology. Errors name the key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use braid_core::Config;
use braid_core::cc::Algorithm;
use braid_core::reinject::Policy;
use braid_core::rtt::RtoFormula;
use braid_core::scheduler::Kind;

use super::Variant;
use super::spec::*;
use crate::link::{Capacity, DirSpec, QueueLimit};
use crate::trace::Trace;
use crate::units::Rate;

type CheckError = (Option<String>, String);

/// Link-layer retransmissions a link may make of one frame (802.11's retry limits are 7 and 4).
const MAX_RETRIES: u32 = 31;

pub(super) fn check(
    s: Scenario,
    name: String,
    settings: BTreeMap<String, String>,
    base_dir: &Path,
) -> Result<Variant, CheckError> {
    let (s, origins) = super::topology::expand_links(s)?;
    check_expanded(s, name, settings, base_dir)
        .map_err(|(k, m)| (k.map(|k| super::topology::origin_key(k, &origins)), m))
}

fn check_expanded(
    s: Scenario,
    name: String,
    settings: BTreeMap<String, String>,
    base_dir: &Path,
) -> Result<Variant, CheckError> {
    let k = |key: &str| Some(key.to_string());
    if s.duration.0.is_zero() {
        return Err((k("duration"), "must be positive".into()));
    }
    // A run's trajectories and records grow with its length: ten days of virtual time is
    // already hours of a core.
    if s.duration.0 > MAX_RUN {
        return Err((
            k("duration"),
            format!(
                "{:.0} s out of range: at most {} s (ten days)",
                s.duration.0.as_secs_f64(),
                MAX_RUN.as_secs()
            ),
        ));
    }
    if s.repetitions == 0 {
        return Err((k("repetitions"), "must be at least 1".into()));
    }
    let topo = !s.nodes.is_empty();
    if !topo && (s.links.is_empty() || s.links.len() > 8) {
        return Err((k("link"), "a scenario needs 1 to 8 [[link]] entries".into()));
    }
    if topo && (s.links.is_empty() || s.links.len() > 4096) {
        return Err((
            k("link"),
            "a topology needs 1 to 4096 [[link]] entries".into(),
        ));
    }
    let config = build_config(&s.connection)?;
    let mut links = Vec::new();
    for (i, l) in s.links.iter().enumerate() {
        let key = |f: &str| Some(format!("link[{i}].{f}"));
        if s.links[..i].iter().any(|o| o.name == l.name) {
            return Err((key("name"), format!("duplicate link name `{}`", l.name)));
        }
        if !(0.0..1.0).contains(&l.loss) {
            return Err((
                key("loss"),
                format!("{} out of range: allowed 0 ≤ loss < 1", l.loss),
            ));
        }
        if l.retries > MAX_RETRIES {
            return Err((
                key("retries"),
                format!(
                    "{} out of range: allowed 0 to {MAX_RETRIES} (802.11 uses 7)",
                    l.retries
                ),
            ));
        }
        let queue = match (l.queue, l.queue_bytes) {
            (Some(_), Some(_)) => {
                return Err((
                    key("queue"),
                    "give either `queue` (packets) or `queue_bytes`".into(),
                ));
            }
            (Some(0), _) => return Err((key("queue"), "must be at least 1 packet".into())),
            (Some(n), None) => QueueLimit::Packets(n),
            (None, Some(b)) if b.0 < 1500 => {
                return Err((
                    key("queue_bytes"),
                    "must hold at least one packet (1500 B)".into(),
                ));
            }
            (None, Some(b)) => QueueLimit::Bytes(b.0),
            (None, None) => QueueLimit::Packets(100),
        };
        let field = |trace: &Option<String>, rate: &str, tr: &str| {
            if trace.is_some() { key(tr) } else { key(rate) }
        };
        let down = capacity(l.rate, &l.trace, base_dir)
            .map_err(|m| (field(&l.trace, "rate", "trace"), m))?;
        let up = if l.up_rate.is_some() || l.up_trace.is_some() {
            capacity(l.up_rate, &l.up_trace, base_dir)
                .map_err(|m| (field(&l.up_trace, "up_rate", "up_trace"), m))?
        } else {
            down.clone()
        };
        let dir = |capacity| DirSpec {
            capacity,
            delay: l.delay.0,
            jitter: l.jitter.0,
            jitter_period: l.jitter_period.0,
            reorder: l.reorder,
            queue,
            loss: l.loss,
            overhead: l.overhead,
            frame_time: l.frame_overhead.0,
            retries: l.retries,
            retry_backoff: l.retry_backoff.0,
        };
        links.push((dir(down), dir(up)));
    }
    check_app("app", &s.app, &s)?;
    // The run's metrics are measured after the warmup: one as long as the run measures
    // nothing (throughput 0, no delay).
    if s.metrics.warmup.0 >= s.duration.0 {
        return Err((
            k("metrics.warmup"),
            format!(
                "{:.1} s leaves nothing to measure in a run of {:.1} s",
                s.metrics.warmup.0.as_secs_f64(),
                s.duration.0.as_secs_f64()
            ),
        ));
    }
    for (i, f) in s.flows.iter().enumerate() {
        check_app(&format!("flow[{i}]"), f, &s)?;
    }
    let link_index = |key: String, name: &str| -> Result<usize, CheckError> {
        if let Ok(i) = name.parse::<usize>()
            && i < s.links.len()
        {
            return Ok(i);
        }
        s.links.iter().position(|l| l.name == name).ok_or_else(|| {
            let names: Vec<_> = s.links.iter().map(|l| l.name.as_str()).collect();
            (
                Some(key),
                format!("no link `{name}`; links are {}", names.join(", ")),
            )
        })
    };
    let mut timeline = Vec::new();
    for (i, e) in s.events.iter().enumerate() {
        let li = link_index(format!("event[{i}].link"), &e.link)?;
        if e.at.0 > s.duration.0 {
            return Err((
                Some(format!("event[{i}].at")),
                "after the end of the run".into(),
            ));
        }
        if topo && !matches!(e.action, Action::Down | Action::Up) {
            return Err((
                Some(format!("event[{i}].action")),
                "a topology's links go `down` and come back `up` (addresses, backup flags: two-node form)".into(),
            ));
        }
        timeline.push((e.at.0, li, e.action));
    }
    for (i, sch) in s.schedule.iter().enumerate() {
        let li = link_index(format!("schedule[{i}].link"), &sch.link)?;
        if topo && sch.kind != ScheduleKind::Blockage {
            return Err((
                Some(format!("schedule[{i}].kind")),
                "a topology's links are blocked (`blockage`); addresses are lost in the two-node form".into(),
            ));
        }
        let (lost, back) = match sch.kind {
            ScheduleKind::Addr => (Action::AddrLost, Action::AddrBack),
            ScheduleKind::Blockage => (Action::Down, Action::Up),
        };
        if !(1..=MAX_CYCLES).contains(&sch.count) {
            return Err((
                Some(format!("schedule[{i}].count")),
                format!("{} out of range: allowed 1..={MAX_CYCLES}", sch.count),
            ));
        }
        if sch.count > 1 && (sch.down.is_none() || sch.up.is_none()) {
            return Err((
                Some(format!("schedule[{i}].down")),
                "repeated cycles need both `down` and `up`".into(),
            ));
        }
        let up = sch.up.map_or(Duration::ZERO, |u| u.0);
        let cycle = sch.down.map_or(Duration::ZERO, |d| d.0) + up;
        if sch.count > 1 && cycle.is_zero() {
            return Err((
                Some(format!("schedule[{i}].down")),
                "repeated cycles need `down` + `up` longer than zero".into(),
            ));
        }
        // Where the cycles end, checked before they are written out.
        let end = match sch.down {
            Some(_) => cycle
                .checked_mul(sch.count)
                .and_then(|c| c.checked_add(sch.first.0)),
            None => Some(sch.first.0),
        };
        if end.is_none_or(|t| t > s.duration.0 + up) {
            return Err((
                Some(format!("schedule[{i}].count")),
                format!(
                    "the cycles end at {:.1} s, after the run ({:.1} s)",
                    end.map_or(f64::INFINITY, |t| t.as_secs_f64()),
                    s.duration.0.as_secs_f64()
                ),
            ));
        }
        let mut t = sch.first.0;
        for _ in 0..sch.count {
            timeline.push((t, li, lost));
            let Some(down) = sch.down else { break };
            t += down.0;
            timeline.push((t, li, back));
            t += up;
        }
    }
    timeline.sort_by_key(|(t, l, _)| (*t, *l));
    let route = match &s.mobility {
        None => None,
        Some(m) => Some(build_route(m)?),
    };
    let mut radios = Vec::new();
    let mut signals = Vec::new();
    for (i, l) in s.links.iter().enumerate() {
        let key = |f: &str| Some(format!("link[{i}].{f}"));
        if !(l.alpha > 0.0 && l.alpha <= 1.0) {
            return Err((
                key("alpha"),
                format!("{} out of range: allowed 0 < alpha ≤ 1", l.alpha),
            ));
        }
        if !(l.hysteresis_db >= 0.0 && l.hysteresis_db.is_finite()) {
            return Err((key("hysteresis_db"), "must be zero or positive".into()));
        }
        if let Some(t) = l.threshold_dbm
            && !(-150.0..=0.0).contains(&t)
        {
            return Err((
                key("threshold_dbm"),
                format!("{t} out of range: allowed -150..=0 dBm"),
            ));
        }
        let radio = match &l.radio {
            None => None,
            Some(r) => {
                if !topo && route.is_none() && l.signal.is_none() {
                    return Err((
                        key("radio"),
                        "a radio needs a [mobility] route or a [link.signal] replay".into(),
                    ));
                }
                let d = crate::radio::RadioSpec::default();
                let spec = crate::radio::RadioSpec {
                    tx_power_dbm: r.tx_power_dbm.unwrap_or(d.tx_power_dbm),
                    ref_loss_db: r.ref_loss_db.unwrap_or(d.ref_loss_db),
                    exponent: r.exponent.unwrap_or(d.exponent),
                    shadowing_db: r.shadowing_db.unwrap_or(d.shadowing_db),
                    decorrelation_m: r.decorrelation_m.unwrap_or(d.decorrelation_m),
                    beacon: r.beacon.map_or(d.beacon, |b| b.0),
                    sensitivity_dbm: r.sensitivity_dbm.unwrap_or(d.sensitivity_dbm),
                    cutoff_dbm: r.cutoff_dbm.unwrap_or(d.cutoff_dbm),
                    rates: d
                        .rates
                        .iter()
                        .map(|&(m, rate)| (m, rate * r.rate_scale.unwrap_or(1.0)))
                        .collect(),
                    adapt_rate: r.adapt_rate.unwrap_or(d.adapt_rate),
                    coherence: r.coherence.map(|c| c.0).or(d.coherence),
                };
                spec.validate().map_err(|m| (key("radio"), m))?;
                Some(spec)
            }
        };
        let signal = match &l.signal {
            None => None,
            Some(sc) => {
                let path = base_dir.join(&sc.file);
                let text = std::fs::read_to_string(&path).map_err(|e| {
                    (
                        key("signal.file"),
                        format!("cannot read signal replay `{}`: {e}", path.display()),
                    )
                })?;
                let replay = match sc.format.as_str() {
                    "csv" => braid_pm::signal::parse_csv(&text),
                    "driving" => braid_pm::signal::parse_driving(
                        &text,
                        &l.name,
                        sc.select.as_deref().unwrap_or("RSRP"),
                    ),
                    other => Err(format!("unknown format `{other}`; allowed: csv, driving")),
                }
                .map_err(|m| (key("signal"), format!("{}: {m}", path.display())))?;
                let pick = sc.select.clone().unwrap_or_else(|| l.name.clone());
                let series: Vec<(Duration, f64)> = replay
                    .samples
                    .into_iter()
                    .filter(|(_, iface, _)| sc.format != "csv" || *iface == pick)
                    .filter(|(t, _, _)| *t >= sc.offset.0)
                    .map(|(t, _, v)| (t - sc.offset.0, v))
                    .collect();
                if series.is_empty() {
                    return Err((
                        key("signal"),
                        format!("{}: no usable samples for `{pick}`", path.display()),
                    ));
                }
                Some(Arc::new(series))
            }
        };
        // A radio or signal replay without a threshold is allowed (the stock path manager
        // ignores the signal; cross-layer modes check below); a threshold without one would
        // be ignored without a word.
        if radio.is_none() && signal.is_none() {
            for (set, field) in [
                (l.threshold_dbm.is_some(), "threshold_dbm"),
                (l.hysteresis_db != 0.0, "hysteresis_db"),
            ] {
                if set {
                    return Err((
                        key(field),
                        "the link has no signal: give it a [link.radio] (and a [link.signal] replay or a [mobility] route)".into(),
                    ));
                }
            }
        }
        radios.push(radio);
        signals.push(signal);
    }
    let pm = build_pm(&s)?;
    let topology = if topo {
        super::topology::build(&s, &pm)?
    } else {
        super::topology::two_node(&s, &pm)?
    };
    // An interface's rate caps the links it sends on.
    for (l, def) in topology.links.iter().enumerate() {
        for (d, e) in def.ends.iter().enumerate() {
            let cap = topology.nodes[e.node].ifaces[e.iface].rate;
            let dir = if d == 0 {
                &mut links[l].0
            } else {
                &mut links[l].1
            };
            if let (Some(cap), Capacity::Rate(r)) = (cap, &mut dir.capacity) {
                *r = r.min(cap);
            }
        }
    }
    let tunnel = match &s.tunnel {
        Some(t) => build_tunnel(&s, t, &config)?,
        None => None,
    };
    let v = Variant {
        tunnel,
        name,
        settings,
        scenario: s,
        links,
        timeline,
        config: Arc::new(config),
        pm,
        radios,
        signals,
        route,
        topology,
    };
    check_show(&v)?;
    Ok(v)
}

/// `metrics.show` names metrics the run reports: per link by the names the run gives its
/// links ([`Variant::link_names`]), per named flow, or the run's own.
fn check_show(v: &Variant) -> Result<(), CheckError> {
    let s = &v.scenario;
    let links = v.link_names();
    for m in &s.metrics.show {
        let per_link = links
            .iter()
            .any(|l| *m == crate::metrics::link_key(l) || *m == crate::metrics::link_mb_key(l));
        let per_flow = s.flows.iter().any(|f| {
            crate::metrics::FLOW_METRICS.iter().any(|x| {
                f.name
                    .as_ref()
                    .is_some_and(|n| *m == crate::metrics::flow_key(n, x))
            })
        });
        if !per_link && !per_flow && !crate::metrics::METRICS.iter().any(|d| d.key == m) {
            let mut all: Vec<String> = crate::metrics::METRICS
                .iter()
                .map(|d| d.key.to_string())
                .collect();
            all.extend(links.iter().map(|l| crate::metrics::link_key(l)));
            return Err((
                Some("metrics.show".into()),
                format!("unknown metric `{m}`; allowed: {}", all.join(", ")),
            ));
        }
    }
    Ok(())
}

/// The longest run a scenario may ask for.
const MAX_RUN: Duration = Duration::from_secs(864_000);

/// The most cycles one `[[schedule]]` entry may give (each is two events of the run).
const MAX_CYCLES: u32 = 1_000_000;

/// The most messages a second a CBR application may send, by `rate` or by `bitrate` (the
/// clock ticks in microseconds).
const MAX_MESSAGES_PER_S: f64 = 1e6;

/// The checks of one application (`[app]` or a `[[flow]]`), keys under `key`.
fn check_app(key: &str, app: &AppSpec, s: &Scenario) -> Result<(), CheckError> {
    let k = |f: &str| Some(format!("{key}.{f}"));
    match app.kind {
        AppKind::Cbr => {
            match (app.rate, app.bitrate) {
                (Some(_), Some(_)) => {
                    return Err((
                        k("rate"),
                        "give either `rate` (packets/s) or `bitrate`".into(),
                    ));
                }
                (None, None) => {
                    return Err((
                        k("rate"),
                        "a cbr application needs `rate` (packets/s) or `bitrate`".into(),
                    ));
                }
                (Some(r), None) if !(r > 0.0 && r <= MAX_MESSAGES_PER_S) => {
                    return Err((
                        k("rate"),
                        format!("{r} out of range: allowed 0 < rate ≤ 1000000 packets/s"),
                    ));
                }
                _ => {}
            }
            if app.size.0 < 16 || app.size.0 > 65_000 {
                return Err((k("size"), "a cbr message holds 16..=65000 bytes".into()));
            }
            if let Some(b) = app.bitrate {
                let per_s = b.0 / (app.size.0 as f64 * 8.0);
                if !(per_s > 0.0 && per_s <= MAX_MESSAGES_PER_S) {
                    return Err((
                        k("bitrate"),
                        format!(
                            "{} bit/s is {per_s} messages/s of {} bytes: allowed 0 < messages/s ≤ 1000000",
                            b.0, app.size.0
                        ),
                    ));
                }
            }
        }
        AppKind::File => {
            if app.bytes.is_none_or(|b| b.0 == 0) {
                return Err((k("bytes"), "a file transfer needs `bytes` > 0".into()));
            }
        }
        AppKind::Bulk => {}
    }
    if app.start.0 >= s.duration.0 {
        return Err((
            k("start"),
            "the application must start before the end of the run".into(),
        ));
    }
    if let Some(stop) = app.stop
        && stop.0 <= app.start.0
    {
        return Err((
            k("stop"),
            "the application must stop after it starts".into(),
        ));
    }
    Ok(())
}

fn build_route(m: &MobilitySpec) -> Result<crate::mobility::Route, CheckError> {
    use crate::mobility::Route;
    let k = |f: &str| Some(format!("mobility.{f}"));
    if !(m.speed_kmh > 0.0 && m.speed_kmh < 500.0) {
        return Err((k("speed_kmh"), "allowed 0 < speed_kmh < 500".into()));
    }
    Ok(match m.route.as_str() {
        "straight" => {
            if m.aps_m.is_empty() {
                return Err((
                    k("aps_m"),
                    "a straight route needs access points along it".into(),
                ));
            }
            Route::Straight {
                start_m: m.start_m,
                aps_m: m.aps_m.clone(),
                offset_m: m.offset_m,
            }
        }
        "loop" => {
            let length_m = m
                .length_m
                .ok_or((k("length_m"), "a loop needs its length".to_string()))?;
            if length_m <= 0.0 {
                return Err((k("length_m"), "must be positive".into()));
            }
            Route::Loop {
                length_m,
                ap_at_m: m.ap_at_m.unwrap_or(0.0),
                offset_m: m.offset_m,
            }
        }
        "grid" => {
            let blocks = m.blocks.unwrap_or(5);
            let block_m = m.block_m.unwrap_or(200.0);
            if !(1..=50).contains(&blocks) || block_m <= 0.0 {
                return Err((
                    k("blocks"),
                    "allowed 1..=50 blocks of positive length".into(),
                ));
            }
            Route::Grid {
                blocks,
                block_m,
                rsus: m.rsus.unwrap_or(6),
            }
        }
        other => {
            return Err((
                k("route"),
                format!("unknown route `{other}`; allowed: straight, loop, grid"),
            ));
        }
    })
}

fn build_pm(s: &Scenario) -> Result<braid_pm::Config, CheckError> {
    let k = |f: &str| Some(format!("pm.{f}"));
    let any_backup = s.links.iter().any(|l| l.backup)
        || s.nodes.iter().any(|n| n.iface.iter().any(|f| f.backup));
    let mode = match s.pm.mode.as_str() {
        "auto" if any_backup => braid_pm::Mode::Backup,
        "auto" => braid_pm::Mode::FullMesh,
        m => braid_pm::Mode::from_name(m).ok_or_else(|| {
            (
                k("mode"),
                format!(
                    "unknown mode `{m}`; allowed: auto, {}",
                    braid_pm::Mode::NAMES.join(", ")
                ),
            )
        })?,
    };
    let ifaces = s
        .links
        .iter()
        .map(|l| braid_pm::IfaceConfig {
            name: l.name.clone(),
            threshold_dbm: l.threshold_dbm,
            alpha: l.alpha,
            hysteresis_db: l.hysteresis_db,
            backup: l.backup,
        })
        .collect();
    let cfg = braid_pm::Config {
        mode,
        ifaces,
        remove_weak: s.pm.remove_weak,
        hmm: s.pm.hmm.as_ref().map(|h| braid_pm::HmmConfig {
            interval: h.interval.0,
            window: h.window,
            good_margin_db: h.good_margin_db,
            bad_margin_db: h.bad_margin_db,
            ..braid_pm::HmmConfig::default()
        }),
        same_subnet: s.pm.same_subnet,
        announce: false,
        race: s.pm.race.0,
        capacity: s
            .pm
            .capacity
            .as_ref()
            .map(|c| braid_pm::CapacityConfig {
                sample: c.sample.0,
                demand_window: c.demand_window.0,
                horizon: c.horizon.0,
                headroom: c.headroom,
                main_share: c.main_share,
                floor_db: c.floor_db,
            })
            .unwrap_or_default(),
    };
    if cfg.mode.capacity_aware() {
        cfg.capacity.validate().map_err(|m| (k("capacity"), m))?;
    }
    if let Some(d) = cfg.race
        && d < braid_pm::RACE_MIN
    {
        return Err((
            k("race"),
            format!(
                "{d:?} too short: at least {:?}, or \"off\"",
                braid_pm::RACE_MIN
            ),
        ));
    }
    cfg.validate().map_err(|m| (k("mode"), m))?;
    Ok(cfg)
}

fn capacity(
    rate: Option<Rate>,
    trace: &Option<String>,
    base_dir: &Path,
) -> Result<Capacity, String> {
    match (rate, trace) {
        (Some(_), Some(_)) => Err("give either a rate or a trace, not both".into()),
        (None, None) => Err("a link needs a `rate` (e.g. \"30Mbit\") or a `trace` file".into()),
        (Some(r), None) => Ok(Capacity::Rate(r.0)),
        (None, Some(t)) => {
            let p: PathBuf = base_dir.join(t);
            Trace::load(&p).map(Capacity::Trace)
        }
    }
}

/// `[tunnel]`: the daemon's tunnel configuration with the scenario's core, and the end-to-end
/// connection's (`None` for `transport = "none"`).
fn build_tunnel(
    s: &Scenario,
    t: &TunnelSpec,
    core: &Config,
) -> Result<Option<super::TunnelVariant>, CheckError> {
    use braid_tunnel::daemon::{DatagramConfig, Transport, default_tunnel_config};
    let k = |f: &str| Some(format!("tunnel.{f}"));
    let transport = match t.transport.as_str() {
        "none" => return Ok(None),
        "braid" => Transport::Braid,
        "datagram" => Transport::Datagram,
        other => {
            return Err((
                k("transport"),
                format!("unknown transport `{other}`; allowed: braid, datagram, none"),
            ));
        }
    };
    if !s.nodes.is_empty() || !s.flows.is_empty() {
        return Err((
            k("transport"),
            "a tunnel carries the application of the two-node form: no [[node]] or [[flow]]".into(),
        ));
    }
    let congestion = match t.congestion.as_str() {
        "cubic" | "newreno" => Algorithm::from_name(&t.congestion)
            .ok_or_else(|| (k("congestion"), format!("`{}` is not built", t.congestion)))?,
        other => {
            return Err((
                k("congestion"),
                format!("unknown congestion control `{other}`; allowed: cubic, newreno"),
            ));
        }
    };
    for (key, d, max) in [
        ("ofo_timeout", t.ofo_timeout.0, Duration::from_secs(10)),
        ("inseq_timeout", t.inseq_timeout.0, Duration::from_secs(1)),
    ] {
        if d > max {
            return Err((k(key), format!("{d:?} out of range: allowed up to {max:?}")));
        }
    }
    let datagram = DatagramConfig {
        ratio: t.ratio.clone(),
        ofo_timeout_us: t.ofo_timeout.0.as_micros() as u64,
        inseq_timeout_us: t.inseq_timeout.0.as_micros() as u64,
        ..DatagramConfig::default()
    };
    let tunnel =
        default_tunnel_config(core.clone(), transport, &datagram, s.links.len()).map_err(|e| {
            // The daemon names its own key first: name the scenario's instead.
            let m = e.to_string();
            let (daemon_key, rest) = m.split_once(": ").unwrap_or(("", &m));
            let key = match daemon_key {
                "datagram.ratio" => "ratio",
                "datagram.ofo_timeout_us" => "ofo_timeout",
                "datagram.inseq_timeout_us" => "inseq_timeout",
                _ => return (k("transport"), m.clone()),
            };
            (k(key), rest.to_string())
        })?;
    let mtu = tunnel.ptos.max_packet_len;
    // The hosts' TCP: Linux's largest autotuned buffers (tcp_wmem, tcp_rmem), and Linux's slow
    // start, which counts every byte a stretch acknowledgement covers: the tunnel's reorder
    // buffer hands the receiving host bursts, so its acknowledgements come thinned.
    let inner = Config {
        send_buffer: 4 << 20,
        receive_buffer: 6 << 20,
        stretch_acks: true,
        max_datagram_size: mtu - super::INNER_HEADERS,
        congestion: congestion.factory(core.initial_window),
        max_paths: 1,
        ..core.clone()
    };
    inner
        .validate()
        .map_err(|m| (Some("connection.max_datagram_size".into()), m))?;
    let cbr_udp = match t.cbr_over.as_str() {
        "udp" => s.app.kind == AppKind::Cbr,
        "tcp" => false,
        other => {
            return Err((k("cbr_over"), format!("`{other}` is not udp or tcp")));
        }
    };
    Ok(Some(super::TunnelVariant {
        tunnel,
        inner: Arc::new(inner),
        cbr_udp,
    }))
}

fn build_config(c: &ConnectionSpec) -> Result<Config, CheckError> {
    let k = |f: &str| Some(format!("connection.{f}"));
    let scheduler = Kind::parse(&c.scheduler).map_err(|e| (k("scheduler"), e.to_string()))?;
    let congestion = Algorithm::from_name(&c.congestion).ok_or_else(|| {
        (
            k("congestion"),
            format!(
                "unknown congestion control `{}`; allowed: {}",
                c.congestion,
                Algorithm::NAMES.join(", ")
            ),
        )
    })?;
    let policy = Policy::from_name(&c.reinjection).map_err(|m| {
        (
            k("reinjection"),
            format!(
                "{m}; allowed: stock, pto, rejK or rejgK (guarded) with an integer K ≥ 1 (rej1, rej2, rejg1, …)"
            ),
        )
    })?;
    let reinjection = policy.with_min_rttvar(c.rej_min_rttvar.0);
    if let Some(every) = c.liveness_probe
        && every.0 < Duration::from_millis(1)
    {
        return Err((
            k("liveness_probe"),
            "the probe interval must be at least 1 ms".into(),
        ));
    }
    let rto_formula = match c.rto_formula.as_str() {
        "linux" => RtoFormula::Linux,
        "rfc6298" => RtoFormula::Rfc6298,
        "rfc793" => RtoFormula::Rfc793,
        other => {
            return Err((
                k("rto_formula"),
                format!("unknown formula `{other}`; allowed: linux, rfc6298, rfc793"),
            ));
        }
    };
    let cfg = Config {
        max_datagram_size: c.max_datagram_size as usize,
        send_buffer: c.send_buffer.0,
        receive_buffer: c.receive_buffer.0,
        initial_rtt: c.initial_rtt.0,
        rto_min: c.rto_min.0,
        rto_max: c.rto_max.0,
        rto_formula,
        broken_after_backoffs: c.broken_after_backoffs,
        tail_loss_probe: c.tail_loss_probe,
        tlp_delta: c.tlp_delta.0,
        tlp_single_delta: c.tlp_single_delta.0,
        max_ack_delay: c.max_ack_delay.0,
        ack_frequency: c.ack_frequency,
        initial_window: c.initial_window,
        remove_addr_delay: c.remove_addr_delay.0,
        max_paths: 8,
        idle_timeout: None,
        opportunistic_retransmission: c.opportunistic_retransmission,
        linux_recovery: c.linux_recovery,
        adaptive_reordering: c.adaptive_reordering,
        stretch_acks: false,
        congestion: congestion.factory(c.initial_window),
        scheduler: scheduler.factory(),
        reinjection: reinjection.shared(),
    };
    cfg.validate().map_err(|m| {
        let field = m.split_whitespace().next().unwrap_or("").to_string();
        (k(&field), m)
    })?;
    Ok(cfg)
}
