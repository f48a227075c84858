//! `braid lab FILE`: a scenario file (the one `braid sim` takes) on real stacks in real time.
//!
//! Per run: three namespaces (client, emulator, server) and one emulated link per scenario link
//! (client `c{i}` 10.{i+1}.0.1/24 ⇄ emulator ⇄ server `s{i}` 10.{i+1}.0.2/24), the endpoints
//! of the variant (see [`Endpoint`]), the scenario's application over one connection between
//! them, the scenario's schedule applied by the wall clock, and the run recorded as the
//! simulator records it ([`RunRecord`]) so the metrics, their JSON keys and the table are the
//! simulator's own. Everything a run creates (namespaces, daemons) is removed when it ends,
//! fails or is interrupted.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use braid_core::stats::ConnectionStats;
use braid_mptcp::netns::NetNs;
use braid_sim::metrics;
use braid_sim::radio::Crossing;
use braid_sim::runner::{PlanResult, RunResult, VariantResult};
use braid_sim::scenario::{
    Action, AddressPolicy, AppDirection, AppKind, ConnectionSpec, Plan, PmSpec, RoutingPolicyKind,
    Variant,
};
use braid_sim::world::{
    Beacon, FlowRecord, LossEvent, PmDecision, Recovery, RunRecord, Sample, radio_beacons,
};

use crate::app::{self, Clock, SenderState};
use crate::emu::{Emulator, LinkEvent, LinkSpec};
use crate::topo::{End, emulated_link};

/// The real endpoints a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `braid tunnel` (client in the client namespace, gateway in the server namespace) with
    /// the variant's scheduler, reinjection and congestion control; the application runs over
    /// TCP through the tunnel.
    Tunnel,
    /// Kernel MPTCP with the in-kernel path manager (a subflow endpoint per client link), its
    /// own scheduler and reinjection, the variant's congestion control; the application over
    /// MPTCP sockets.
    Mptcp,
    /// Kernel MPTCP as [`Endpoint::Mptcp`], the client's subflows managed by `braid pm` (the
    /// userspace path manager) with the variant's `pm.mode` instead of the in-kernel one.
    Pm,
    /// Kernel MPTCP as [`Endpoint::Mptcp`], the client's subflow endpoints managed by mptcpd
    /// with its `addr_adv` plugin (its packaged default: each address mptcpd sees becomes an
    /// in-kernel endpoint with the `subflow` flag, and goes with its address), the daemon
    /// users deploy today.
    Mptcpd,
}

impl Endpoint {
    /// Metrics this endpoint cannot measure (the kernel does not expose its reinjections per
    /// connection or per event, nor the in-kernel path manager its decisions; the tunnel's
    /// encrypted datagrams do not tell the emulator data from acknowledgements, which the
    /// recovery's first data on a link needs): left out of the results rather than shown as
    /// zero.
    pub fn unmeasured(self) -> &'static [&'static str] {
        const DECISIONS: [&str; 3] = ["acted_before_break_pct", "lead_ms", "flips"];
        match self {
            Endpoint::Tunnel => &["recovery_ms"],
            Endpoint::Mptcp | Endpoint::Mptcpd => &[
                "reinjections",
                "reinjection_rate_pct",
                "duplicate_mb",
                "ofo_peak_kb",
                DECISIONS[0],
                DECISIONS[1],
                DECISIONS[2],
            ],
            // braid pm's decisions are read from its status during the run.
            Endpoint::Pm => &[
                "reinjections",
                "reinjection_rate_pct",
                "duplicate_mb",
                "ofo_peak_kb",
            ],
        }
    }

    /// Whether a variant runs on this endpoint: kernel MPTCP has one reinjection policy and
    /// one scheduler, its own (compared with the simulator's `stock` and `minrtt`).
    pub fn runs(self, v: &Variant) -> bool {
        match self {
            Endpoint::Tunnel => true,
            Endpoint::Mptcp | Endpoint::Pm | Endpoint::Mptcpd => self.skip(v).is_none(),
        }
    }

    /// Why a variant does not run on this endpoint.
    pub fn skip(self, v: &Variant) -> Option<&'static str> {
        let c = &v.scenario.connection;
        match self {
            Endpoint::Tunnel => None,
            Endpoint::Mptcp | Endpoint::Pm | Endpoint::Mptcpd
                if c.reinjection != "stock" || c.scheduler != "minrtt" =>
            {
                Some(
                    "kernel MPTCP has one scheduler and one reinjection policy, its own (compare it with the simulator's stock/minrtt)",
                )
            }
            Endpoint::Mptcp if !in_kernel_mode(v) => Some(
                "the in-kernel path manager has no cross-layer mode (run it with --endpoint pm)",
            ),
            Endpoint::Mptcpd if !in_kernel_mode(v) => {
                Some("mptcpd has no cross-layer mode (run it with --endpoint pm)")
            }
            Endpoint::Mptcpd if (0..v.links.len()).any(|i| client_backup(v, i)) => Some(
                "mptcpd gives every address the same flags, so no link is a backup (run it with --endpoint mptcp or pm)",
            ),
            Endpoint::Mptcp | Endpoint::Pm | Endpoint::Mptcpd => None,
        }
    }

    /// Kernel MPTCP carries the application (with either path manager).
    pub fn kernel(self) -> bool {
        matches!(self, Endpoint::Mptcp | Endpoint::Pm | Endpoint::Mptcpd)
    }
}

impl std::str::FromStr for Endpoint {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "tunnel" => Ok(Endpoint::Tunnel),
            "mptcp" => Ok(Endpoint::Mptcp),
            "pm" => Ok(Endpoint::Pm),
            "mptcpd" => Ok(Endpoint::Mptcpd),
            _ => Err(format!(
                "unknown endpoint `{s}` (allowed: tunnel, mptcp, pm, mptcpd)"
            )),
        }
    }
}

/// How a lab run is made.
#[derive(Debug, Clone)]
pub struct Options {
    pub endpoint: Endpoint,
    /// The `braid` executable that runs the daemons.
    pub braid: PathBuf,
    /// Set (by a signal handler) to stop at once; the run then cleans up and fails.
    pub interrupted: Arc<AtomicBool>,
    /// A CBR application reaches the braid tunnel over one inner TCP stream instead of one
    /// UDP datagram per message; `None`: as the scenario's `tunnel.cbr_over` says (UDP
    /// without `[tunnel]`), as the simulator runs it.
    pub cbr_over_tcp: Option<bool>,
    /// Bulk and file applications run as iperf3 (client and server) instead of the lab's own
    /// sender and receiver.
    pub iperf3: bool,
    /// Keep each run's daemon configurations, logs and final status here
    /// (`<variant>-seed<seed>/`), for evidence when a figure differs from the simulator's.
    pub keep: Option<PathBuf>,
    /// Keep each run's record (for per-run CSV: the simulator's `--out` tables).
    pub records: bool,
}

/// What a run reports while it goes.
#[derive(Debug, Clone)]
pub struct Progress<'a> {
    pub variant: &'a str,
    pub seed: u64,
    /// Run number (from 1) and of how many.
    pub run: usize,
    pub runs: usize,
    pub elapsed: Duration,
    pub duration: Duration,
    pub delivered: u64,
}

/// The scenario's `[pm.hmm]` and `[pm.capacity]` as the daemons take them: braid pm's `[hmm]`
/// and `[capacity]` (`prefix` ""), braid tunnel's `[pm.hmm]` and `[pm.capacity]` ("pm.").
fn pm_tables(pm: &PmSpec, prefix: &str) -> String {
    let mut t = String::new();
    if let Some(h) = &pm.hmm {
        t.push_str(&format!(
            "[{prefix}hmm]\ninterval_ms = {}\nwindow = {}\ngood_margin_db = {:?}\nbad_margin_db = {:?}\n",
            h.interval.0.as_millis(),
            h.window,
            h.good_margin_db,
            h.bad_margin_db
        ));
    }
    if let Some(c) = &pm.capacity {
        t.push_str(&format!(
            "[{prefix}capacity]\nsample_ms = {}\ndemand_window_ms = {}\nhorizon_ms = {}\n\
             headroom = {:?}\nmain_share = {:?}\nfloor_db = {:?}\n",
            c.sample.0.as_millis(),
            c.demand_window.0.as_millis(),
            c.horizon.0.as_millis(),
            c.headroom,
            c.main_share,
            c.floor_db
        ));
    }
    t
}

/// Checks that every variant can be emulated with `endpoint`: a one-line error naming the
/// scenario key otherwise, before anything is created.
pub fn check(plan: &Plan, endpoint: Endpoint) -> Result<(), String> {
    for v in &plan.variants {
        let s = &v.scenario;
        let at = |key: &str, why: &str| {
            Err(format!(
                "{}: variant {}: {key}: {why}",
                plan.file,
                if v.name.is_empty() { "-" } else { &v.name }
            ))
        };
        // A topology: the lab builds one emulated link per scenario link between a client and
        // a server namespace, so it runs two nodes, one application and direct links only.
        let t = &v.topology;
        if let Some(app) = t.apps.first() {
            if let Some(relay) = t
                .nodes
                .iter()
                .enumerate()
                .find(|(n, _)| *n != app.client && *n != app.server)
            {
                return at(
                    &format!("node ({})", relay.1.name),
                    "the lab joins the application's two nodes by their links; nodes that relay \
                     run in the simulator (seed 004's 8-node testbed on real kernels: \
                     `cargo bench -p braid --bench e13_kernel`)",
                );
            }
            let unused = t.links.iter().find(|l| {
                l.ends
                    .iter()
                    .any(|e| e.node == app.client && !app.client_ifaces.contains(&e.iface))
            });
            if let Some(l) = unused {
                return at(
                    "app.interfaces",
                    &format!(
                        "the lab's client uses every link it has, link `{}` included",
                        l.name
                    ),
                );
            }
        }
        if let Some(flow) = t.apps.get(1) {
            return at(
                &format!("flow ({})", flow.name),
                "the lab runs one application, the scenario's [app]",
            );
        }
        if t.routing
            .as_ref()
            .is_some_and(|r| matches!(r.policy, RoutingPolicyKind::Manet { .. }))
        {
            return at(
                "routing.policy",
                "seed 004's routing runs as `braid route` on real nodes, not in braid lab",
            );
        }
        // Radio and signal replays: the simulator's beacons (`radio_beacons`) applied to the
        // emulated link and fed to the client's path manager (braid pm, or braid tunnel's).
        let radio = |i: usize| v.radios[i].is_some() || v.signals[i].is_some();
        for (i, l) in s.links.iter().enumerate() {
            // In a topology the simulator draws a link's signal from its nodes' positions
            // and feeds no path manager; `radio_beacons` replays the two-node form's.
            if radio(i) && v.topology.routing.is_some() {
                return at(
                    &format!("link[{i}].radio ({})", l.name),
                    "a topology's radio links run in the simulator only (the lab replays the \
                     two-node form's radio and signal replays)",
                );
            }
            if radio(i) && v.timeline.iter().any(|(_, t, _)| *t == i) {
                return at(
                    &format!("event (link {})", l.name),
                    "scripted changes of a radio link are not emulated (its beacons drive it)",
                );
            }
        }
        if s.links.len() > 8 {
            return at("link", "the lab builds at most 8 links");
        }
        for (_, l, a) in &v.timeline {
            if matches!(a, Action::Backup | Action::Primary) {
                return at(
                    &format!("event (link {l})"),
                    "`backup`/`primary` at run time is not supported by the lab's endpoints",
                );
            }
        }
        // braid pm and braid tunnel's client take the HMM and the capacity estimate in whole
        // milliseconds (`pm_tables`).
        let durations =
            s.pm.hmm
                .iter()
                .map(|h| ("pm.hmm.interval", h.interval.0))
                .chain(s.pm.capacity.iter().flat_map(|c| {
                    [
                        ("pm.capacity.sample", c.sample.0),
                        ("pm.capacity.demand_window", c.demand_window.0),
                        ("pm.capacity.horizon", c.horizon.0),
                    ]
                }));
        for (key, d) in durations {
            if d.subsec_nanos() % 1_000_000 != 0 {
                return at(key, "the path managers take whole milliseconds");
            }
        }
        if endpoint != Endpoint::Pm && s.pm.same_subnet {
            return at("pm.same_subnet", "applied by braid pm only (--endpoint pm)");
        }
        if !matches!(endpoint, Endpoint::Pm | Endpoint::Tunnel) && s.pm.remove_weak {
            return at(
                "pm.remove_weak",
                "applied by braid pm and braid tunnel only (--endpoint pm or tunnel)",
            );
        }
        if s.tunnel.is_some() && endpoint.kernel() {
            return at(
                "tunnel",
                "the kernel MPTCP endpoint runs no tunnel: use --endpoint tunnel",
            );
        }
        match endpoint {
            Endpoint::Tunnel => {
                if let Some(every) = s.connection.liveness_probe
                    && (every.0 < Duration::from_millis(10)
                        || every.0.subsec_nanos() % 1_000_000 != 0)
                {
                    return at(
                        "connection.liveness_probe",
                        "braid tunnel's keepalive_ms takes whole milliseconds from 10",
                    );
                }
                if let Some(k) = unmapped_connection_key(&s.connection) {
                    return at(
                        &format!("connection.{k}"),
                        "not applied by the braid tunnel endpoint",
                    );
                }
            }
            Endpoint::Mptcp | Endpoint::Pm | Endpoint::Mptcpd => {
                let d = ConnectionSpec::default();
                if s.connection.liveness_probe.is_some() {
                    return at(
                        "connection.liveness_probe",
                        "kernel MPTCP sends no liveness probes (braid tunnel does: --endpoint tunnel)",
                    );
                }
                if !matches!(s.connection.congestion.as_str(), "cubic" | "newreno") {
                    return at(
                        "connection.congestion",
                        "kernel MPTCP runs cubic or newreno (reno) here, not the coupled algorithms",
                    );
                }
                if s.connection.rto_min != d.rto_min {
                    return at("connection.rto_min", "kernel MPTCP keeps its own 200 ms");
                }
            }
        }
    }
    Ok(())
}

/// Stream bytes received per link, duplicates included, over the connection's life (closed
/// paths too), as the simulator counts them, from the receiving tunnel end's status: its counts
/// by its own address (the client's are its links) or by its peer's (the gateway names the
/// client's).
fn stream_bytes_per_link(receiver: &Value, direction: AppDirection, links: usize) -> Vec<u64> {
    let addrs = match direction {
        AppDirection::Down => "addrs",
        AppDirection::Up => "peer_addrs",
    };
    let counts = receiver[addrs].as_array();
    (0..links)
        .map(|i| {
            counts
                .and_then(|a| a.iter().find(|a| a["addr"].as_u64() == Some(i as u64)))
                .and_then(|a| a["data_bytes_received"].as_u64())
                .unwrap_or(0)
        })
        .collect()
}

/// The per-link byte counts as the simulator reports them: per scenario link in the two-node
/// form, per interface of the client in a topology (`link.<interface>.mb`).
fn per_client_interface(v: &Variant, per_link: Vec<u64>) -> (Vec<String>, Vec<u64>) {
    let t = &v.topology;
    let names = v.link_names();
    let Some(app) = t.apps.first().filter(|_| t.routing.is_some()) else {
        return (names, per_link);
    };
    let mut bytes = vec![0; names.len()];
    for (l, b) in t.links.iter().zip(per_link) {
        if let Some(e) = l.ends.iter().find(|e| e.node == app.client) {
            bytes[e.iface] += b;
        }
    }
    (names, bytes)
}

/// Whether link `i`'s client end is a backup interface: the two-node form's `link.backup`, a
/// topology's `iface.backup` of the client's interface on the link.
fn client_backup(v: &Variant, i: usize) -> bool {
    let t = &v.topology;
    let end = t
        .apps
        .first()
        .and_then(|app| t.links.get(i)?.ends.iter().find(|e| e.node == app.client));
    match end {
        Some(e) => t.nodes[e.node].ifaces[e.iface].backup,
        None => v.scenario.links[i].backup,
    }
}

/// The variant's path manager is one the in-kernel path manager (and the tunnel's) can be.
fn in_kernel_mode(v: &Variant) -> bool {
    matches!(v.scenario.pm.mode.as_str(), "auto" | "fullmesh" | "backup")
        && v.scenario.pm.hmm.is_none()
}

/// A `[connection]` key set away from its default that `braid tunnel` has no setting for.
fn unmapped_connection_key(c: &ConnectionSpec) -> Option<&'static str> {
    let d = ConnectionSpec::default();
    [
        ("rto_max", c.rto_max != d.rto_max),
        ("rto_formula", c.rto_formula != d.rto_formula),
        ("tail_loss_probe", c.tail_loss_probe != d.tail_loss_probe),
        ("tlp_delta", c.tlp_delta != d.tlp_delta),
        ("tlp_single_delta", c.tlp_single_delta != d.tlp_single_delta),
        ("ack_frequency", c.ack_frequency != d.ack_frequency),
        (
            "opportunistic_retransmission",
            c.opportunistic_retransmission != d.opportunistic_retransmission,
        ),
    ]
    .into_iter()
    .find(|(_, set)| *set)
    .map(|(k, _)| k)
}

/// Runs every variant × repetition of `plan` one after the other (real time: runs never
/// overlap, they would share the machine's cores).
pub fn run(
    plan: &Plan,
    opts: &Options,
    progress: &dyn Fn(Progress<'_>),
) -> Result<PlanResult, String> {
    check(plan, opts.endpoint)?;
    if opts.iperf3
        && let Some(v) = plan
            .variants
            .iter()
            .find(|v| v.scenario.app.kind == AppKind::Cbr)
    {
        return Err(format!(
            "{}: variant {}: app.kind: --iperf3 runs bulk and file applications; a CBR stream's \
             per-message delay needs the lab's own sender",
            plan.file, v.name
        ));
    }
    let started = Instant::now();
    let reps = plan.base().repetitions as usize;
    let runnable = plan
        .variants
        .iter()
        .filter(|v| opts.endpoint.runs(v))
        .count();
    if runnable == 0 {
        return Err(format!(
            "{}: no variant runs on this endpoint (kernel MPTCP: reinjection stock, scheduler minrtt; the in-kernel path manager: auto, fullmesh or backup)",
            plan.file
        ));
    }
    let total = runnable * reps;
    let mut done = 0;
    let mut variants = Vec::new();
    for v in &plan.variants {
        if let Some(why) = opts.endpoint.skip(v) {
            eprintln!("braid lab: variant {} skipped: {why}", v.name);
            continue;
        }
        let mut runs = Vec::new();
        for r in 0..reps {
            let seed = v.scenario.seed.wrapping_add(r as u64);
            let t0 = Instant::now();
            done += 1;
            let n = done;
            let record = run_once(v, seed, opts, &|elapsed, delivered| {
                progress(Progress {
                    variant: &v.name,
                    seed,
                    run: n,
                    runs: total,
                    elapsed,
                    duration: v.scenario.duration.0,
                    delivered,
                })
            })
            .map_err(|e| format!("variant {} seed {seed}: {e}", v.name))?;
            let m = metrics::compute(&record, &v.scenario.metrics);
            runs.push(RunResult {
                seed,
                metrics: m,
                record: opts.records.then_some(record),
                events: 0,
                wall: t0.elapsed(),
                captures: None,
            });
        }
        variants.push(VariantResult::of(v, runs));
    }
    let mut r = PlanResult::of(plan, variants, started.elapsed());
    let gone = opts.endpoint.unmeasured();
    for v in &mut r.variants {
        v.summary.retain(|k, _| !gone.contains(&k.as_str()));
        for run in &mut v.runs {
            run.metrics.retain(|k, _| !gone.contains(&k.as_str()));
        }
    }
    r.show.retain(|k| !gone.contains(&k.as_str()));
    Ok(r)
}

/// A child process killed and reaped on drop, its log kept for errors.
pub(crate) struct Daemon {
    pub(crate) child: Child,
    pub(crate) log: PathBuf,
}

impl Daemon {
    pub(crate) fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines()
            .rev()
            .take(5)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join(" | ")
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Removes a directory on drop.
pub(crate) struct TempDir(pub(crate) PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The namespaces and emulated links of one run.
struct Net {
    client: NetNs,
    emu: NetNs,
    server: NetNs,
    links: Vec<(String, String)>,
}

fn client_addr(i: usize) -> String {
    format!("10.{}.0.1", i + 1)
}

fn server_addr(i: usize) -> String {
    format!("10.{}.0.2", i + 1)
}

impl Net {
    fn build(n: usize) -> io::Result<Net> {
        let client = NetNs::new("blc")?;
        let emu = NetNs::new("ble")?;
        let server = NetNs::new("bls")?;
        let mut links = Vec::new();
        for i in 0..n {
            links.push(emulated_link(
                End {
                    ns: &client,
                    ifname: &format!("c{i}"),
                    addr: &format!("{}/24", client_addr(i)),
                },
                &emu,
                End {
                    ns: &server,
                    ifname: &format!("s{i}"),
                    addr: &format!("{}/24", server_addr(i)),
                },
                &format!("l{i}"),
            )?);
        }
        Ok(Net {
            client,
            emu,
            server,
            links,
        })
    }

    /// The run's links; with `events`, their timeline and the radio's `beacons` from time zero.
    fn emulate(
        &self,
        v: &Variant,
        seed: u64,
        events: bool,
        beacons: &[Beacon],
    ) -> io::Result<Emulator> {
        // `v.links[i].0` carries the link's `ends[0]` → `ends[1]`: server → client in the
        // two-node form, and in a topology whichever way the file's `a` and `b` say.
        let client = v.topology.apps.first().map(|a| a.client);
        let specs = v
            .links
            .iter()
            .enumerate()
            .map(|(i, (from_a, from_b))| {
                let client_is_a = v
                    .topology
                    .links
                    .get(i)
                    .zip(client)
                    .is_some_and(|(l, c)| l.ends[0].node == c);
                let (down, up) = if client_is_a {
                    (from_b, from_a)
                } else {
                    (from_a, from_b)
                };
                (i, down, up)
            })
            .map(|(i, down, up)| LinkSpec {
                name: v.scenario.links[i].name.clone(),
                a_if: self.links[i].0.clone(),
                b_if: self.links[i].1.clone(),
                down: down.clone(),
                up: up.clone(),
                events: if events {
                    let mut e: Vec<(Duration, LinkEvent)> = v
                        .timeline
                        .iter()
                        .filter(|(_, l, _)| *l == i)
                        .filter_map(|(t, _, a)| match a {
                            Action::Down | Action::AddrLost => Some((*t, LinkEvent::Down)),
                            Action::Up | Action::AddrBack => Some((*t, LinkEvent::Up)),
                            _ => None,
                        })
                        .collect();
                    e.extend(radio_events(v, i, beacons));
                    e.sort_by_key(|(t, _)| *t);
                    e
                } else {
                    Vec::new()
                },
                seed: seed.wrapping_mul(1000).wrapping_add(i as u64),
                // The recovery metric: the first data after each rise of the link's signal.
                marks: beacons
                    .iter()
                    .filter(|b| b.link == i && b.crossing == Some(Crossing::Up))
                    .map(|b| b.t)
                    .collect(),
                medium: v.topology.links.get(i).and_then(|l| l.medium),
            })
            .collect();
        Emulator::start(&self.emu, specs)
    }
}

/// The recovery metric's entries, as the simulator records them: each rise of a link's
/// smoothed signal above T + h, the first data the link delivered at or after it (`first_data`)
/// unless the signal fell below T again before (`lost`).
fn recoveries(
    beacons: &[Beacon],
    first_data: impl Fn(usize, Duration) -> Option<Duration>,
) -> Vec<Recovery> {
    let mut out = Vec::new();
    for (k, b) in beacons.iter().enumerate() {
        if b.crossing != Some(Crossing::Up) {
            continue;
        }
        let lost = beacons[k + 1..]
            .iter()
            .find(|o| o.link == b.link && o.crossing == Some(Crossing::Down))
            .map(|o| o.t);
        let data = first_data(b.link, b.t).filter(|&d| lost.is_none_or(|l| d < l));
        out.push(Recovery {
            t: b.t,
            link: b.link,
            first_data: data,
            lost: if data.is_some() { None } else { lost },
        });
    }
    out
}

/// What the simulator's beacons do to link `i`, as emulator events: its losses and rate follow
/// the signal (an event when they change), it goes down when its coverage is lost and comes
/// back with it.
fn radio_events(v: &Variant, i: usize, beacons: &[Beacon]) -> Vec<(Duration, LinkEvent)> {
    let adapt = v.radios[i].as_ref().is_some_and(|r| r.adapt_rate);
    let (mut loss, mut rate) = (None, None);
    let mut out = Vec::new();
    for b in beacons.iter().filter(|b| b.link == i) {
        let Some(e) = b.effect else { continue };
        if loss != Some(e.per) {
            out.push((b.t, LinkEvent::Loss(e.per)));
            loss = Some(e.per);
        }
        if adapt && rate != Some(e.rate) {
            out.push((b.t, LinkEvent::Rate(e.rate)));
            rate = Some(e.rate);
        }
        if b.lost_since.is_some() {
            out.push((b.t, LinkEvent::Down));
        }
        if b.back {
            out.push((b.t, LinkEvent::Up));
        }
    }
    out
}

/// The endpoints of a run, up and connected.
struct Tunnel {
    gateway: Daemon,
    client: Daemon,
    gateway_control: PathBuf,
    client_control: PathBuf,
    /// The client's signal socket, when the scenario has radio links.
    signal: Option<PathBuf>,
}

const TUN_SERVER: &str = "10.200.0.1";
const TUN_CLIENT: &str = "10.200.0.2";
const APP_PORT: u16 = 5001;

impl Tunnel {
    /// With `radio`, the client's path manager hears the radio links' signal on a socket in
    /// `dir` and each link carries its threshold, smoothing and hysteresis.
    fn start(
        net: &Net,
        v: &Variant,
        opts: &Options,
        dir: &Path,
        radio: bool,
    ) -> io::Result<Tunnel> {
        let (gw_priv, gw_pub) = braid_tunnel::daemon::keygen();
        let (cl_priv, cl_pub) = braid_tunnel::daemon::keygen();
        let c = &v.scenario.connection;
        let ms = |d: Duration| d.as_millis();
        let connection = format!(
            "[connection]\nscheduler = \"{}\"\nreinjection = \"{}\"\ncongestion = \"{}\"\n\
             linux_recovery = {}\nadaptive_reordering = {}\nrto_min_ms = {}\ninitial_rtt_ms = {}\ninitial_window = {}\nmax_ack_delay_ms = {}\n\
             broken_after_backoffs = {}\nrej_min_rttvar_ms = {}\nsend_buffer = {}\n\
             receive_buffer = {}\n",
            c.scheduler,
            c.reinjection,
            c.congestion,
            c.linux_recovery,
            c.adaptive_reordering,
            ms(c.rto_min.0),
            ms(c.initial_rtt.0).max(1),
            c.initial_window,
            ms(c.max_ack_delay.0),
            c.broken_after_backoffs,
            c.rej_min_rttvar.0.as_secs_f64() * 1e3,
            c.send_buffer.0,
            c.receive_buffer.0,
        );
        // `[tunnel]`: its transport and per-packet settings, and the daemon's default MTU (one
        // packet fits one datagram per packet), as the simulator runs it.
        let (transport, datagram, mtu) = match (&v.scenario.tunnel, v.tunnel.is_some()) {
            (Some(t), true) => (
                format!("transport = \"{}\"\n", t.transport),
                format!(
                    "[datagram]\n{}ofo_timeout_us = {}\ninseq_timeout_us = {}\n",
                    t.ratio
                        .as_ref()
                        .map_or(String::new(), |r| format!("ratio = \"{r}\"\n")),
                    t.ofo_timeout.0.as_micros(),
                    t.inseq_timeout.0.as_micros()
                ),
                1400,
            ),
            _ => (String::new(), String::new(), 1500),
        };
        let gw_control = dir.join("gateway.sock");
        let gateway = format!(
            "{transport}private_key = \"{gw_priv}\"\nlisten = [\"0.0.0.0:7000\"]\n[tun]\nname = \"braid0\"\n\
             address = \"{TUN_SERVER}/24\"\nmtu = {mtu}\n[ops]\ncontrol = \"{}\"\n{connection}\n\
             {datagram}[[client]]\nname = \"lab\"\npublic_key = \"{cl_pub}\"\nallowed_ips = [\"10.200.0.2/32\"]\n",
            gw_control.display()
        );
        let client_control = dir.join("client.sock");
        let signal = radio.then(|| dir.join("signal.sock"));
        let signal_line = signal
            .as_ref()
            .map_or(String::new(), |p| format!("signal = \"{}\"\n", p.display()));
        // The simulator's liveness probe is the client's keepalive (its probes on every link,
        // echoed by the gateway); the session's receive timeout stays above it.
        let keepalive = c.liveness_probe.map_or(String::new(), |every| {
            let k = ms(every.0);
            format!(
                "keepalive_ms = {k}\ndead_after_ms = {}\n",
                (5 * k).max(5000)
            )
        });
        let mut client = format!(
            "{transport}{keepalive}private_key = \"{cl_priv}\"\ngateway_public_key = \"{gw_pub}\"\n\
             gateway = \"{}:7000\"\n[tun]\nname = \"braid0\"\naddress = \"{TUN_CLIENT}/24\"\nmtu = {mtu}\n\
             [ops]\ncontrol = \"{}\"\n[pm]\nmode = \"{}\"\nremove_weak = {}\n{signal_line}{}{connection}\n{datagram}",
            server_addr(0),
            client_control.display(),
            v.scenario.pm.mode,
            v.scenario.pm.remove_weak,
            pm_tables(&v.scenario.pm, "pm."),
        );
        for (i, l) in v.scenario.links.iter().enumerate() {
            client.push_str(&format!(
                "[[link]]\nname = \"c{i}\"\ngateway = \"{}:7000\"\nbackup = {}\n",
                server_addr(i),
                client_backup(v, i)
            ));
            if radio && let Some(t) = l.threshold_dbm {
                client.push_str(&format!(
                    "threshold_dbm = {t}\nalpha = {}\nhysteresis_db = {}\n",
                    l.alpha, l.hysteresis_db
                ));
            }
        }
        let gateway = spawn(
            &opts.braid,
            &net.server,
            &["tunnel", "gateway"],
            "gateway",
            dir,
            &gateway,
        )?;
        wait_status(
            "braid tunnel gateway",
            &gw_control,
            &gateway,
            Duration::from_secs(10),
            &opts.interrupted,
            |_| true,
        )?;
        let client = spawn(
            &opts.braid,
            &net.client,
            &["tunnel", "client"],
            "client",
            dir,
            &client,
        )?;
        // Every link carries a path before the run, except those a cross-layer path manager
        // opens only once their signal is good (the samples come with the run).
        let mut n = v.scenario.links.len();
        if radio && v.pm.mode.uses_signal() {
            n = v
                .scenario
                .links
                .iter()
                .filter(|l| l.threshold_dbm.is_none())
                .count()
                .max(1);
        }
        wait_status(
            "braid tunnel client",
            &client_control,
            &client,
            Duration::from_secs(15),
            &opts.interrupted,
            |s| s["connections"][0]["usable_paths"].as_u64() >= Some(n as u64),
        )?;
        Ok(Tunnel {
            gateway,
            client,
            gateway_control: gw_control,
            client_control,
            signal,
        })
    }

    fn alive(&mut self) -> io::Result<()> {
        for (role, d) in [("client", &mut self.client), ("gateway", &mut self.gateway)] {
            if let Ok(Some(st)) = d.child.try_wait() {
                return Err(io::Error::other(format!(
                    "braid tunnel {role} exited ({st}): {}",
                    d.log_tail()
                )));
            }
        }
        Ok(())
    }

    /// The connection's status on the sending and on the receiving side of `direction`.
    fn connections(&self, direction: AppDirection) -> (Option<Value>, Option<Value>) {
        (
            self.connection(direction, true),
            self.connection(direction, false),
        )
    }

    /// The status of the application's sending (`sender`) or receiving end's connection.
    fn connection(&self, direction: AppDirection, sender: bool) -> Option<Value> {
        let gateway_sends = direction == AppDirection::Down;
        let control = if gateway_sends == sender {
            &self.gateway_control
        } else {
            &self.client_control
        };
        status(control).map(|s| s["connections"][0].clone())
    }
}

/// Kernel MPTCP: client links as subflow endpoints of the in-kernel path manager, or managed
/// by `braid pm` (the userspace path manager), each source address routed over its own link
/// (policy routing), the server reachable at its link-0 address.
struct Mptcp {
    links: usize,
    backup: Vec<bool>,
    /// `braid pm` and its control socket, when it manages the client's subflows.
    pm: Option<(Daemon, PathBuf)>,
    /// mptcpd, when it manages the client's path.
    mptcpd: Option<Daemon>,
    /// braid pm's signal socket, when the scenario has radio links.
    signal: Option<PathBuf>,
}

/// The endpoint's table of per-source routes for link `i`.
fn route_table(i: usize) -> String {
    (100 + i).to_string()
}

impl Mptcp {
    /// With `pm` (the run's options and directory, and whether the scenario has radio links),
    /// `braid pm` manages the client's subflows; with `mptcpd` (the run's directory), mptcpd.
    fn start(
        net: &Net,
        v: &Variant,
        pm: Option<(&Options, &Path, bool)>,
        mptcpd: Option<&Path>,
    ) -> io::Result<Mptcp> {
        let userspace = pm.is_some();
        for ns in [&net.client, &net.server] {
            ns.exec(&["sysctl", "-qw", "net.mptcp.enabled=1"])?;
            let (name, number) = if userspace && std::ptr::eq(ns, &net.client) {
                ("userspace", "1")
            } else {
                ("kernel", "0")
            };
            ns.exec(&["sysctl", "-qw", &format!("net.mptcp.path_manager={name}")])
                .or_else(|_| ns.exec(&["sysctl", "-qw", &format!("net.mptcp.pm_type={number}")]))?;
            ns.ip(&[
                "mptcp",
                "limits",
                "set",
                "subflows",
                "8",
                "add_addr_accepted",
                "8",
            ])?;
        }
        let mut m = Mptcp {
            links: v.scenario.links.len(),
            backup: (0..v.links.len()).map(|i| client_backup(v, i)).collect(),
            pm: None,
            mptcpd: None,
            signal: None,
        };
        for i in 0..m.links {
            let table = route_table(i);
            net.client
                .ip(&["rule", "add", "from", &client_addr(i), "table", &table])?;
            net.client.ip(&[
                "route",
                "add",
                "default",
                "dev",
                &format!("c{i}"),
                "table",
                &table,
            ])?;
            if !userspace && mptcpd.is_none() {
                m.endpoint_add(net, i)?;
            }
        }
        if userspace && v.scenario.pm.same_subnet {
            // Subflows only within a subnet: the client's braid pm needs the server's other
            // addresses, which the server announces (as the simulator's and seed 004's do).
            for i in 1..m.links {
                net.server.ip(&[
                    "mptcp",
                    "endpoint",
                    "add",
                    &server_addr(i),
                    "dev",
                    &format!("s{i}"),
                    "signal",
                ])?;
            }
        }
        if let Some(dir) = mptcpd {
            m.mptcpd = Some(m.start_mptcpd(net, dir)?);
        }
        if let Some((opts, dir, radio)) = pm {
            let signal = radio.then(|| dir.join("signal.sock"));
            m.pm = Some(Self::start_pm(net, v, opts, dir, signal.as_deref())?);
            m.signal = signal;
        }
        Ok(m)
    }

    /// `braid pm` in the client's namespace: the variant's path manager (`auto` as in the
    /// simulator: backup mode when a link is a backup, else full mesh), one managed interface
    /// per link with its backup flag and signal settings, signal samples on `signal`.
    fn start_pm(
        net: &Net,
        v: &Variant,
        opts: &Options,
        dir: &Path,
        signal: Option<&Path>,
    ) -> io::Result<(Daemon, PathBuf)> {
        let pm = &v.scenario.pm;
        let links = &v.scenario.links;
        let mode = match pm.mode.as_str() {
            "auto" if (0..links.len()).any(|i| client_backup(v, i)) => "backup",
            "auto" => "fullmesh",
            m => m,
        };
        let control = dir.join("pm.sock");
        let mut config = format!(
            "mode = \"{mode}\"\nremove_weak = {}\nsame_subnet = {}\ncontrol = \"{}\"\n",
            pm.remove_weak,
            pm.same_subnet,
            control.display()
        );
        if let Some(sock) = signal {
            config.push_str(&format!("\n[signal]\nsocket = \"{}\"\n", sock.display()));
        }
        config.push_str(&pm_tables(pm, ""));
        for (i, l) in links.iter().enumerate() {
            config.push_str(&format!(
                "\n[[iface]]\nname = \"c{i}\"\nbackup = {}\nalpha = {}\nhysteresis_db = {}\n",
                client_backup(v, i),
                l.alpha,
                l.hysteresis_db
            ));
            if let Some(t) = l.threshold_dbm {
                config.push_str(&format!("threshold_dbm = {t}\n"));
            }
        }
        let d = spawn(&opts.braid, &net.client, &["pm"], "pm", dir, &config)?;
        wait_status(
            "braid pm",
            &control,
            &d,
            Duration::from_secs(10),
            &opts.interrupted,
            |_| true,
        )?;
        Ok((d, control))
    }

    /// mptcpd with its `addr_adv` plugin in the client's namespace: it makes an in-kernel
    /// subflow endpoint of every address of the links, existing ones included. Ready when the
    /// kernel lists one endpoint per link.
    fn start_mptcpd(&self, net: &Net, dir: &Path) -> io::Result<Daemon> {
        const PLUGINS: &str = "/usr/lib/x86_64-linux-gnu/mptcpd";
        if !Path::new(PLUGINS).join("addr_adv.so").exists() {
            return Err(io::Error::other(format!(
                "mptcpd's addr_adv plugin is not in {PLUGINS} (Debian package mptcpd-plugins; scripts/deps installs it)"
            )));
        }
        let log = dir.join("mptcpd.log");
        let child = Command::new("ip")
            .args(["netns", "exec", &net.client.name, "/usr/libexec/mptcpd"])
            .arg(format!("--plugin-dir={PLUGINS}"))
            .args([
                "--path-manager=addr_adv",
                "--load-plugins=addr_adv",
                "--addr-flags=subflow",
                "--notify-flags=existing,skip_link_local,skip_loopback",
                "--log=stderr",
            ])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .map_err(|e| {
                io::Error::other(format!(
                    "mptcpd (Debian package mptcpd; scripts/deps installs it): {e}"
                ))
            })?;
        let mut d = Daemon { child, log };
        let t0 = Instant::now();
        loop {
            if let Ok(Some(st)) = d.child.try_wait() {
                return Err(io::Error::other(format!(
                    "mptcpd exited ({st}): {}",
                    d.log_tail()
                )));
            }
            let shown = net.client.ip(&["mptcp", "endpoint", "show"])?;
            let shown = String::from_utf8_lossy(&shown.stdout);
            if (0..self.links).all(|i| shown.contains(&format!("{} ", client_addr(i)))) {
                return Ok(d);
            }
            if t0.elapsed() > Duration::from_secs(5) {
                return Err(io::Error::other(format!(
                    "mptcpd made no endpoint of every link's address within 5 s (kernel: {}): {}",
                    shown.trim().replace('\n', "; "),
                    d.log_tail()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn alive(&mut self) -> io::Result<()> {
        if let Some(d) = &mut self.mptcpd
            && let Ok(Some(st)) = d.child.try_wait()
        {
            return Err(io::Error::other(format!(
                "mptcpd exited ({st}): {}",
                d.log_tail()
            )));
        }
        if let Some((d, _)) = &mut self.pm
            && let Ok(Some(st)) = d.child.try_wait()
        {
            return Err(io::Error::other(format!(
                "braid pm exited ({st}): {}",
                d.log_tail()
            )));
        }
        Ok(())
    }

    fn endpoint_add(&self, net: &Net, i: usize) -> io::Result<()> {
        let id = (i + 1).to_string();
        let addr = client_addr(i);
        let dev = format!("c{i}");
        let mut args = vec![
            "mptcp", "endpoint", "add", &addr, "dev", &dev, "id", &id, "subflow",
        ];
        if self.backup[i] {
            args.push("backup");
        }
        net.client.ip(&args).map(|_| ())
    }

    /// The client's address on link `i` goes (a network manager removing it): the in-kernel
    /// path manager closes its subflows and announces the removal.
    /// With `braid pm` or mptcpd, the address alone goes: the daemon hears it from the kernel
    /// (mptcpd then removes its endpoint).
    fn addr_gone(&self, net: &Net, i: usize) -> io::Result<()> {
        if self.pm.is_none() && self.mptcpd.is_none() {
            let id = (i + 1).to_string();
            net.client.ip(&["mptcp", "endpoint", "delete", "id", &id])?;
        }
        client_address(net, i, "del")
    }

    fn addr_back(&self, net: &Net, i: usize) -> io::Result<()> {
        client_address(net, i, "add")?;
        client_route(net, i)?;
        if self.pm.is_some() || self.mptcpd.is_some() {
            return Ok(());
        }
        self.endpoint_add(net, i)
    }
}

/// The client's per-source route of link `i` (gone when its interface or address went).
fn client_route(net: &Net, i: usize) -> io::Result<()> {
    let table = route_table(i);
    net.client
        .ip(&[
            "route",
            "replace",
            "default",
            "dev",
            &format!("c{i}"),
            "table",
            &table,
        ])
        .map(|_| ())
}

/// Signal samples sent to braid pm's signal socket at their times (a thread; stopped and
/// joined on drop).
struct SignalFeed {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SignalFeed {
    fn start(
        sock: PathBuf,
        beacons: &[Beacon],
        zero: Instant,
        abort: Arc<AtomicBool>,
    ) -> io::Result<SignalFeed> {
        let samples: Vec<(Duration, String)> = beacons
            .iter()
            .filter(|b| b.heard())
            .map(|b| {
                (
                    b.t,
                    serde_json::json!({ "iface": format!("c{}", b.link), "rssi_dbm": b.rss })
                        .to_string(),
                )
            })
            .collect();
        let out = std::os::unix::net::UnixDatagram::unbound()?;
        let stop = Arc::new(AtomicBool::new(false));
        let halt = stop.clone();
        let thread = std::thread::spawn(move || {
            for (t, line) in samples {
                loop {
                    if halt.load(Ordering::Relaxed) || abort.load(Ordering::Relaxed) {
                        return;
                    }
                    let left = (zero + t).saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    std::thread::sleep(left.min(Duration::from_millis(50)));
                }
                // braid pm counts what it could not take; a sample it missed is not resent.
                let _ = out.send_to(line.as_bytes(), &sock);
            }
        });
        Ok(SignalFeed {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for SignalFeed {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// braid pm's decisions, read from its status (which keeps its last 20) during the run and
/// dated on the run's clock: the record the simulator keeps of its path manager's.
#[derive(Default)]
struct Decisions {
    seen: std::collections::BTreeSet<(u64, String, String)>,
    list: Vec<PmDecision>,
}

impl Decisions {
    /// Takes the decisions in `status`, read just now; `zero` is the run's time zero.
    fn read(&mut self, status: &Value, zero: Instant) {
        let Some(uptime) = status["uptime_s"].as_f64() else {
            return;
        };
        // The daemon's clock started `uptime` ago.
        let started = Instant::now()
            .checked_sub(Duration::from_secs_f64(uptime.max(0.0)))
            .unwrap_or(zero);
        for d in status["decisions"].as_array().into_iter().flatten() {
            let (Some(t), Some(iface), Some(cmd)) = (
                d["t_s"].as_f64(),
                d["iface"].as_str(),
                d["command"].as_str(),
            ) else {
                continue;
            };
            let Some(link) = iface
                .strip_prefix('c')
                .and_then(|i| i.parse::<usize>().ok())
            else {
                continue;
            };
            // As the simulator records them: demotions (backup, removal, a subflow created as
            // a backup) and promotions; backup-flag changes are flips.
            let (demote, flip) = if cmd.starts_with("create subflow (backup)") {
                (true, false)
            } else if cmd.starts_with("create subflow") {
                (false, false)
            } else if cmd.starts_with("remove subflow") {
                (true, false)
            } else if cmd.starts_with("set backup") {
                (true, true)
            } else if cmd.starts_with("clear backup") {
                (false, true)
            } else {
                continue;
            };
            let key = ((t * 1e6) as u64, iface.to_string(), cmd.to_string());
            if !self.seen.insert(key) {
                continue;
            }
            let at = started + Duration::from_secs_f64(t.max(0.0));
            self.list.push(PmDecision {
                t: at.saturating_duration_since(zero),
                link,
                demote,
                flip,
            });
        }
    }

    fn into_sorted(mut self) -> Vec<PmDecision> {
        self.list.sort_by_key(|d| d.t);
        self.list
    }
}

/// The client's interface of link `i` set `up` or `down`.
fn client_link(net: &Net, i: usize, state: &str) -> io::Result<()> {
    net.client
        .ip(&["link", "set", &format!("c{i}"), state])
        .map(|_| ())
}

/// The client's address of link `i` added or deleted (`op`).
fn client_address(net: &Net, i: usize, op: &str) -> io::Result<()> {
    let (addr, dev) = (format!("{}/24", client_addr(i)), format!("c{i}"));
    net.client.ip(&["addr", op, &addr, "dev", &dev]).map(|_| ())
}

/// A stream socket bound to `local`: MPTCP (IPPROTO_MPTCP) or TCP, with congestion control
/// `cc` set on the socket (the namespaces inherit the host's default, which need not be the
/// scenario's; as root any available algorithm may be set per socket). MPTCP gives its
/// subflows the socket's algorithm.
fn stream_socket(local: SocketAddr, mptcp: bool, cc: &str) -> io::Result<socket2::Socket> {
    let proto = if mptcp {
        IPPROTO_MPTCP
    } else {
        libc::IPPROTO_TCP
    };
    let s = socket2::Socket::new(
        socket2::Domain::IPV4,
        socket2::Type::STREAM,
        Some(socket2::Protocol::from(proto)),
    )?;
    s.set_reuse_address(true)?;
    s.set_tcp_congestion(cc.as_bytes())
        .map_err(|e| io::Error::new(e.kind(), format!("congestion control {cc}: {e}")))?;
    s.bind(&local.into())?;
    Ok(s)
}

const IPPROTO_MPTCP: i32 = 262;

/// The endpoints of a run.
enum Ends {
    Tunnel(Tunnel),
    Mptcp(Mptcp),
    /// `[tunnel]` with `transport = "none"`: plain TCP between the client's and the server's
    /// first link addresses (the single-link references of E11).
    Direct,
}

impl Ends {
    fn alive(&mut self) -> io::Result<()> {
        match self {
            Ends::Tunnel(t) => t.alive(),
            Ends::Mptcp(m) => m.alive(),
            Ends::Direct => Ok(()),
        }
    }

    /// braid pm's control socket, when it runs.
    /// The control socket of the client's path manager whose decisions the run records:
    /// braid pm's, or braid tunnel's client.
    fn pm_control(&self) -> Option<&Path> {
        match self {
            Ends::Mptcp(Mptcp {
                pm: Some((_, control)),
                ..
            }) => Some(control),
            Ends::Tunnel(t) => Some(&t.client_control),
            _ => None,
        }
    }

    fn connections(&self, direction: AppDirection) -> (Option<Value>, Option<Value>) {
        match self {
            Ends::Tunnel(t) => t.connections(direction),
            Ends::Mptcp(_) | Ends::Direct => (None, None),
        }
    }

    fn addr_gone(&self, net: &Net, i: usize) -> io::Result<()> {
        match self {
            // The tunnel client learns it from its interface: down, as a network manager
            // takes a lost link down.
            Ends::Tunnel(_) | Ends::Direct => client_link(net, i, "down"),
            Ends::Mptcp(m) => m.addr_gone(net, i),
        }
    }

    fn addr_back(&self, net: &Net, i: usize) -> io::Result<()> {
        match self {
            Ends::Tunnel(_) | Ends::Direct => client_link(net, i, "up"),
            Ends::Mptcp(m) => m.addr_back(net, i),
        }
    }

    /// Where the receiving application listens and the sender binds, by direction.
    fn app_addrs(&self, direction: AppDirection) -> (SocketAddr, SocketAddr) {
        let (client, server) = match self {
            Ends::Tunnel(_) => (TUN_CLIENT.to_string(), TUN_SERVER.to_string()),
            Ends::Mptcp(_) | Ends::Direct => (client_addr(0), server_addr(0)),
        };
        let a = |ip: &str, port| format!("{ip}:{port}").parse().expect("address");
        match direction {
            AppDirection::Down => (a(&client, APP_PORT), a(&server, 0)),
            AppDirection::Up => (a(&server, APP_PORT), a(&client, 0)),
        }
    }
}

/// Starts `braid ARGS… --config DIR/NAME.toml` in `ns`, its log in `DIR/NAME.log`.
fn spawn(
    braid: &Path,
    ns: &NetNs,
    args: &[&str],
    name: &str,
    dir: &Path,
    config: &str,
) -> io::Result<Daemon> {
    let cfg = dir.join(format!("{name}.toml"));
    std::fs::write(&cfg, config)?;
    let log = dir.join(format!("{name}.log"));
    let child = Command::new("ip")
        .args(["netns", "exec", &ns.name])
        .arg(braid)
        .args(args)
        .arg("--config")
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()?;
    Ok(Daemon { child, log })
}

fn status(control: &Path) -> Option<Value> {
    braid_io::control::request_blocking(control, "status", Duration::from_secs(2)).ok()
}

fn wait_status(
    what: &str,
    control: &Path,
    d: &Daemon,
    within: Duration,
    interrupted: &AtomicBool,
    ready: impl Fn(&Value) -> bool,
) -> io::Result<()> {
    let t0 = Instant::now();
    loop {
        if interrupted.load(Ordering::Relaxed) {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "interrupted"));
        }
        if let Some(s) = status(control)
            && ready(&s)
        {
            return Ok(());
        }
        if t0.elapsed() > within {
            return Err(io::Error::other(format!(
                "{what} not ready within {within:?}: {}",
                d.log_tail()
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Copies a run's daemon files and writes the final status of its endpoints and the
/// emulator's counters to `keep/<variant>-seed<seed>/`.
fn keep_run(
    keep: &Path,
    v: &Variant,
    seed: u64,
    dir: &Path,
    ends: &Ends,
    emu_links: &[(String, crate::emu::LinkCounters)],
    receiver_at_end: Option<&Value>,
) -> io::Result<()> {
    let name = if v.name.is_empty() { "run" } else { &v.name };
    let to = keep.join(format!("{name}-seed{seed}"));
    std::fs::create_dir_all(&to)?;
    if let Some(c) = receiver_at_end {
        std::fs::write(
            to.join("receiver-at-end.json"),
            serde_json::to_string_pretty(c).unwrap_or_default(),
        )?;
    }
    for e in std::fs::read_dir(dir)?.flatten() {
        let p = e.path();
        if matches!(
            p.extension().and_then(|x| x.to_str()),
            Some("log" | "toml" | "json")
        ) {
            std::fs::copy(&p, to.join(e.file_name()))?;
        }
    }
    if let Ends::Mptcp(Mptcp {
        pm: Some((_, control)),
        ..
    }) = ends
        && let Some(st) = status(control)
    {
        std::fs::write(
            to.join("status-pm.json"),
            serde_json::to_string_pretty(&st).unwrap_or_default(),
        )?;
    }
    if let Ends::Tunnel(t) = ends {
        for (role, control) in [
            ("client", &t.client_control),
            ("gateway", &t.gateway_control),
        ] {
            if let Some(st) = status(control) {
                std::fs::write(
                    to.join(format!("status-{role}.json")),
                    serde_json::to_string_pretty(&st).unwrap_or_default(),
                )?;
            }
        }
    }
    let links: Vec<Value> = emu_links
        .iter()
        .map(|(name, (down, up))| {
            let dir = |c: &crate::emu::Counters| {
                let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
                serde_json::json!({
                    "frames_in": g(&c.frames_in), "frames_out": g(&c.frames_out),
                    "bytes_out": g(&c.bytes_out), "dropped_down": g(&c.dropped_down),
                    "dropped_queue": g(&c.dropped_queue), "dropped_loss": g(&c.dropped_loss),
                    "lost_in_flight": g(&c.lost_in_flight), "kernel_drops": g(&c.kernel_drops),
                    "send_errors": g(&c.send_errors), "late_us_max": g(&c.late_us_max),
                    "high_priority": c.high_priority.load(Ordering::Relaxed),
                    "cpus_awake": c.cpus_awake.load(Ordering::Relaxed),
                })
            };
            serde_json::json!({ "link": name, "down": dir(down), "up": dir(up) })
        })
        .collect();
    std::fs::write(
        to.join("emulator.json"),
        serde_json::to_string_pretty(&links).unwrap_or_default(),
    )
}

/// A scheduled change the run makes itself (the emulator applies the link losses).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Step {
    /// The client's address on the link goes: the endpoint learns it (after the scenario's
    /// `remove_addr_delay`, as in the simulator).
    AddrGone(usize),
    AddrBack(usize),
    /// The client's interface on the link goes down (its radio's coverage is lost) and up.
    IfaceDown(usize),
    IfaceUp(usize),
}

/// The address steps of radio links whose address goes with their coverage (`address =
/// "lose"`, `lose(link)`), as the simulator takes them (`link_lost_at`, `link_back`): the
/// network manager removes the client's address `delay` after the coverage is declared lost,
/// unless it is back first (then the address stays), and gives it back with the coverage.
fn radio_addr_steps(
    beacons: &[Beacon],
    delay: Duration,
    lose: impl Fn(usize) -> bool,
) -> Vec<(Duration, Step)> {
    let mut steps = Vec::new();
    // Per link: when its address goes, since its coverage was lost.
    let mut going: std::collections::BTreeMap<usize, Duration> = Default::default();
    for b in beacons.iter().filter(|b| lose(b.link)) {
        if b.lost_since.is_some() {
            going.insert(b.link, b.t + delay);
        }
        if b.back
            && let Some(gone) = going.remove(&b.link)
            && gone <= b.t
        {
            steps.push((gone, Step::AddrGone(b.link)));
            steps.push((b.t, Step::AddrBack(b.link)));
        }
    }
    steps.extend(going.into_iter().map(|(l, t)| (t, Step::AddrGone(l))));
    steps
}

fn run_once(
    v: &Variant,
    seed: u64,
    opts: &Options,
    progress: &dyn Fn(Duration, u64),
) -> io::Result<RunRecord> {
    let s = &v.scenario;
    let n = s.links.len();
    let dir = std::env::temp_dir().join(format!("braid-lab-{}-{seed}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let _dir = TempDir(dir.clone());
    let net = Net::build(n)?;
    // Set-up runs over the links without their schedule; the run's emulation starts after.
    // The radio links' beacons, as the simulator computes them for this seed.
    let beacons = radio_beacons(v, seed);
    let setup = net.emulate(v, seed, false, &[])?;
    let direct = s.tunnel.is_some() && v.tunnel.is_none();
    let mut ends = match opts.endpoint {
        Endpoint::Tunnel if direct => Ends::Direct,
        Endpoint::Tunnel => Ends::Tunnel(Tunnel::start(&net, v, opts, &dir, !beacons.is_empty())?),
        Endpoint::Mptcp => Ends::Mptcp(Mptcp::start(&net, v, None, None)?),
        Endpoint::Pm => Ends::Mptcp(Mptcp::start(
            &net,
            v,
            Some((opts, dir.as_path(), !beacons.is_empty())),
            None,
        )?),
        Endpoint::Mptcpd => Ends::Mptcp(Mptcp::start(&net, v, None, Some(dir.as_path()))?),
    };
    setup.stop()?;
    let stop_us = s
        .app
        .stop
        .map_or(s.duration.0, |d| d.0.min(s.duration.0))
        .as_micros() as u64;
    let end_us = s.duration.0.as_micros() as u64;
    let abort = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(SenderState::default());
    let delivered = Arc::new(AtomicU64::new(0));
    let (send_ns, recv_ns) = match s.app.direction {
        AppDirection::Down => (&net.server, &net.client),
        AppDirection::Up => (&net.client, &net.server),
    };
    let emu;
    // The listener stays open for the run: MPTCP's joins (MP_JOIN SYNs) reach the connection
    // through it.
    let mut _listener = None;
    let mptcp = opts.endpoint.kernel();
    // The application's TCP: the scenario's algorithm on kernel MPTCP; an unmodified host's
    // usual CUBIC through the tunnel (the tunnel's connection runs the scenario's), or
    // `[tunnel]`'s.
    let host_cc = s.tunnel.as_ref().map_or("cubic", |t| t.congestion.as_str());
    let cc = match (mptcp, s.connection.congestion.as_str()) {
        (false, _) if host_cc == "newreno" => "reno",
        (false, _) => host_cc,
        (true, "newreno") => "reno",
        (true, other) => other,
    };
    let (app_sender, receiver) = if opts.iperf3 {
        let (server, _) = ends.app_addrs(AppDirection::Up);
        emu = net.emulate(v, seed, true, &beacons)?;
        let run = app::Iperf3 {
            server_ns: net.server.name.clone(),
            client_ns: net.client.name.clone(),
            server: server.ip(),
            congestion: cc.to_string(),
            reverse: s.app.direction == AppDirection::Down,
            report: dir.join("iperf3.json"),
        };
        let rx = app::iperf3(
            run,
            s.app.clone(),
            Clock(emu.started()),
            stop_us,
            end_us,
            abort.clone(),
            delivered.clone(),
        )?;
        let tx: std::thread::JoinHandle<io::Result<()>> = std::thread::spawn(|| Ok(()));
        (tx, rx)
    } else if s.app.kind == AppKind::Cbr
        && opts.endpoint == Endpoint::Tunnel
        && !opts
            .cbr_over_tcp
            .unwrap_or_else(|| v.tunnel.as_ref().is_some_and(|t| !t.cbr_udp))
        && !direct
    {
        // CBR over UDP: each message one IP packet in the tunnel's stream.
        let (to, from) = ends.app_addrs(s.app.direction);
        // A receive buffer for a burst: after an outage the tunnel delivers at once what it
        // held (1800 messages/s × 0.4 s × 1.4 kB ≈ 1 MB in E3).
        let rx = recv_ns.run(move || -> io::Result<UdpSocket> {
            let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None)?;
            crate::packet::force_receive_buffer(&s, 16 << 20)
                .or_else(|_| s.set_recv_buffer_size(16 << 20))?;
            s.bind(&to.into())?;
            Ok(s.into())
        })?;
        let tx = send_ns.run(move || UdpSocket::bind(from))?;
        emu = net.emulate(v, seed, true, &beacons)?;
        let clock = Clock(emu.started());
        (
            app::udp_sender(
                tx,
                to,
                s.app.clone(),
                clock,
                stop_us,
                abort.clone(),
                sent.clone(),
            ),
            app::udp_receiver(rx, clock, end_us, abort.clone(), delivered.clone()),
        )
    } else {
        // One stream the client opens (the MPTCP initiator, whose path manager adds the
        // subflows), whichever way the data goes.
        let (server, client) = ends.app_addrs(AppDirection::Up);
        let client = SocketAddr::new(client.ip(), 0);
        let cc2 = cc.to_string();
        // An MPTCP listener bound to one address refuses subflows to the server's others.
        let bind = if mptcp {
            SocketAddr::new(std::net::Ipv4Addr::UNSPECIFIED.into(), server.port())
        } else {
            server
        };
        let listener = net.server.run(move || -> io::Result<TcpListener> {
            let s = stream_socket(bind, mptcp, &cc2)?;
            s.listen(4)?;
            Ok(s.into())
        })?;
        emu = net.emulate(v, seed, true, &beacons)?;
        let clock = Clock(emu.started());
        let cc2 = cc.to_string();
        let client_sock = net.client.run(move || -> io::Result<TcpStream> {
            let s = stream_socket(client, mptcp, &cc2)?;
            s.connect_timeout(&server.into(), Duration::from_secs(5))?;
            Ok(s.into())
        })?;
        let (server_sock, _) = listener.accept()?;
        _listener = Some(listener);
        let _ = client_sock.set_nodelay(true);
        let _ = server_sock.set_nodelay(true);
        let (send_sock, recv_sock) = match s.app.direction {
            AppDirection::Down => (server_sock, client_sock),
            AppDirection::Up => (client_sock, server_sock),
        };
        (
            app::sender(
                send_sock,
                s.app.clone(),
                clock,
                stop_us,
                abort.clone(),
                sent.clone(),
            ),
            app::receiver(
                recv_sock,
                s.app.clone(),
                clock,
                end_us,
                abort.clone(),
                delivered.clone(),
            ),
        )
    };
    // braid pm (or braid tunnel's client) hears every sample the simulator's path manager
    // hears, at its time.
    let _feed = match &ends {
        Ends::Mptcp(Mptcp {
            signal: Some(sock), ..
        })
        | Ends::Tunnel(Tunnel {
            signal: Some(sock), ..
        }) => Some(SignalFeed::start(
            sock.clone(),
            &beacons,
            emu.started(),
            abort.clone(),
        )?),
        _ => None,
    };
    // The run's own steps, by time.
    let mut steps: Vec<(Duration, Step)> = Vec::new();
    for (t, l, a) in &v.timeline {
        match a {
            Action::AddrLost => {
                steps.push((*t + s.connection.remove_addr_delay.0, Step::AddrGone(*l)))
            }
            Action::AddrBack => steps.push((*t, Step::AddrBack(*l))),
            _ => {}
        }
    }
    steps.extend(radio_addr_steps(
        &beacons,
        s.connection.remove_addr_delay.0,
        |l| s.links[l].address == AddressPolicy::Lose,
    ));
    // A cross-layer braid pm hears the radio's coverage (as in the simulator, a stock path
    // manager does not): the client's interface goes down and comes back with it.
    if matches!(opts.endpoint, Endpoint::Pm | Endpoint::Tunnel) && v.pm.mode.uses_signal() {
        for b in &beacons {
            if b.lost_since.is_some() {
                steps.push((b.t, Step::IfaceDown(b.link)));
            }
            if b.back {
                steps.push((b.t, Step::IfaceUp(b.link)));
            }
        }
    }
    steps.sort_by_key(|(t, _)| *t);
    let mut losses: Vec<(Duration, usize)> = v
        .timeline
        .iter()
        .filter(|(_, _, a)| matches!(a, Action::Down | Action::AddrLost))
        .map(|(t, l, _)| (*t, *l))
        .chain(
            beacons
                .iter()
                .filter_map(|b| b.lost_since.map(|since| (since, b.link))),
        )
        .collect();
    losses.sort_by_key(|(t, _)| *t);
    let mut backs: Vec<(Duration, usize)> = v
        .timeline
        .iter()
        .filter(|(_, _, a)| matches!(a, Action::Up | Action::AddrBack))
        .map(|(t, l, _)| (*t, *l))
        .chain(beacons.iter().filter(|b| b.back).map(|b| (b.t, b.link)))
        .collect();
    backs.sort_by_key(|(t, _)| *t);
    let (mut next_step, mut next_loss, mut next_back) = (0, 0, 0);
    let mut decisions = Decisions::default();
    let mut since = vec![Duration::ZERO; n];
    let mut rec_losses = Vec::new();
    let mut samples = Vec::new();
    let data_dir = |c: &crate::emu::LinkCounters| match s.app.direction {
        AppDirection::Down => c.0.bytes_out.load(Ordering::Relaxed),
        AppDirection::Up => c.1.bytes_out.load(Ordering::Relaxed),
    };
    let mut last_progress = Instant::now();
    // The sender's reinjected and DATA segments, read from its status every 250 ms.
    let (mut tick, mut counters) = (0u64, (0u64, 0u64));
    // The receiving tunnel end's connection as last read: at the loop's end, its counts when
    // the run ended (the simulator's run stops there; the tunnel drains its queues after).
    let mut receiver_at_end: Option<Value> = None;
    // The run ended with the file's last byte rather than at its duration.
    let mut file_done = false;
    let result = loop {
        let now = emu.started().elapsed();
        if opts.interrupted.load(Ordering::Relaxed) {
            break Err(io::Error::new(io::ErrorKind::Interrupted, "interrupted"));
        }
        if let Err(e) = ends.alive() {
            break Err(e);
        }
        while let Some(&(t, l)) = backs.get(next_back) {
            if t > now {
                break;
            }
            since[l] = t;
            next_back += 1;
        }
        while let Some(&(t, l)) = losses.get(next_loss) {
            if t > now {
                break;
            }
            rec_losses.push(LossEvent {
                t,
                link: l,
                since: since[l],
                sent_before: sent.sent.load(Ordering::Relaxed),
            });
            next_loss += 1;
        }
        while let Some(&(t, step)) = steps.get(next_step) {
            if t > now {
                break;
            }
            match step {
                Step::AddrGone(i) => ends.addr_gone(&net, i)?,
                Step::AddrBack(i) => ends.addr_back(&net, i)?,
                Step::IfaceDown(i) => client_link(&net, i, "down")?,
                Step::IfaceUp(i) => {
                    client_link(&net, i, "up")?;
                    client_route(&net, i)?;
                }
            }
            next_step += 1;
        }
        if tick % 10 == 0
            && let Some(control) = ends.pm_control()
            && let Some(st) = status(control)
        {
            decisions.read(&st, emu.started());
        }
        // Through the tunnel, what each link carried is the receiver's stream bytes per
        // address (the simulator's measure); the emulator's counts would add the tunnel's and
        // the inner packets' headers. The sender's counters every 250 ms.
        let link_rx = if let Ends::Tunnel(t) = &ends {
            if tick % 5 == 0
                && let Some(c) = t.connection(s.app.direction, true)
            {
                counters = (
                    c["reinjected_packets"].as_u64().unwrap_or(counters.0),
                    c["data_packets_sent"].as_u64().unwrap_or(counters.1),
                );
            }
            match t.connection(s.app.direction, false) {
                Some(c) => {
                    let rx = stream_bytes_per_link(&c, s.app.direction, n);
                    receiver_at_end = Some(c);
                    rx
                }
                // A status not read this time: the last one's counts.
                None => samples
                    .last()
                    .map_or(vec![0; n], |p: &Sample| p.link_rx.clone()),
            }
        } else {
            emu.links.iter().map(|(_, c)| data_dir(c)).collect()
        };
        tick += 1;
        samples.push(Sample {
            t: now,
            delivered: delivered.load(Ordering::Relaxed),
            link_rx,
            link_cwnd: vec![0; n],
            link_srtt_us: vec![0; n],
            ofo_bytes: 0,
            reinjected: counters.0,
            data_packets: counters.1,
        });
        if last_progress.elapsed() >= Duration::from_secs(1) {
            // iperf3 reports at its end: meanwhile what the links carried to the receiver.
            let shown = if opts.iperf3 {
                emu.links.iter().map(|(_, c)| data_dir(c)).sum()
            } else {
                delivered.load(Ordering::Relaxed)
            };
            progress(now, shown);
            last_progress = Instant::now();
        }
        if now >= s.duration.0 {
            break Ok(());
        }
        // A file transfer is over once the receiver has it all: nothing more to measure.
        if s.app.kind == AppKind::File && receiver.is_finished() {
            file_done = true;
            break Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // At the end the sender stops by itself (and shuts its stream down) before the receiver
    // is told to: a receiver closing first would reset a sender still writing.
    if result.is_err() {
        abort.store(true, Ordering::Relaxed);
    }
    let sent_result = app_sender.join();
    abort.store(true, Ordering::Relaxed);
    let received = receiver.join();
    let (sender_conn, receiver_conn) = ends.connections(s.app.direction);
    // Once a file is in, nothing more comes that the simulator would not count: the final
    // read. A run that ended at its duration: the last read before it.
    let receiver_conn = if file_done {
        receiver_conn
    } else {
        receiver_at_end.or(receiver_conn)
    };
    if let Some(st) = ends.pm_control().and_then(status) {
        decisions.read(&st, emu.started());
    }
    let emu_links = emu.links.clone();
    // Through the braid tunnel the emulator sees only encrypted datagrams: which carries data
    // it cannot tell, so the recovery metric is left out there.
    let tunnel = matches!(ends, Ends::Tunnel(_));
    let recoveries = recoveries(if tunnel { &[] } else { &beacons[..] }, |link, t| {
        let c = &emu_links[link].1;
        match s.app.direction {
            AppDirection::Down => c.0.first_data_after(t),
            AppDirection::Up => c.1.first_data_after(t),
        }
    });
    // Stopping publishes the emulator's final counts.
    emu.stop()?;
    if let Some(keep) = &opts.keep {
        keep_run(
            keep,
            v,
            seed,
            &dir,
            &ends,
            &emu_links,
            receiver_conn.as_ref(),
        )?;
    }
    result?;
    sent_result
        .map_err(|_| io::Error::other("the sending application panicked"))?
        .map_err(|e| io::Error::new(e.kind(), format!("sending application: {e}")))?;
    let got = received
        .map_err(|_| io::Error::other("the receiving application panicked"))?
        .map_err(|e| io::Error::new(e.kind(), format!("receiving application: {e}")))?;
    if got.missing > 0 {
        eprintln!(
            "braid lab: variant {} seed {seed}: {} CBR datagrams never arrived (sockets or the TUN queue dropped them; the tunnel's stream loses nothing)",
            v.name, got.missing
        );
    }
    // What each link had carried when the run ended, as the simulator counts it (its run
    // stops there): the last sample's counts, not what the queues drained after. Through the
    // tunnel the receiver's stream bytes; the kernel's per-subflow counts are not exposed, so
    // on the kernel endpoints the IP bytes the link carried.
    let link_bytes: Vec<u64> = match (&ends, &receiver_conn, samples.last()) {
        (Ends::Tunnel(_), Some(c), _) => stream_bytes_per_link(c, s.app.direction, n),
        (_, _, Some(p)) if !file_done => p.link_rx.clone(),
        _ => emu_links.iter().map(|(_, c)| data_dir(c)).collect(),
    };
    let (link_names, link_bytes) = per_client_interface(v, link_bytes);
    for sample in &mut samples {
        sample.link_rx = per_client_interface(v, std::mem::take(&mut sample.link_rx)).1;
        sample.link_cwnd = vec![0; link_names.len()];
        sample.link_srtt_us = vec![0; link_names.len()];
    }
    let count = |c: &Option<Value>, k: &str| c.as_ref().and_then(|c| c[k].as_u64()).unwrap_or(0);
    let sender = ConnectionStats {
        data_packets_sent: count(&sender_conn, "data_packets_sent"),
        reinjected_packets: count(&sender_conn, "reinjected_packets"),
        reinjected_bytes: count(&sender_conn, "reinjected_bytes"),
        ..Default::default()
    };
    let receiver = ConnectionStats {
        duplicate_bytes_received: count(&receiver_conn, "duplicate_bytes_received"),
        ofo_peak_bytes: count(&receiver_conn, "ofo_peak_bytes"),
        delivered_bytes: count(&receiver_conn, "delivered_bytes"),
        ..Default::default()
    };
    let got_bytes = got.deliveries.iter().map(|&(_, b)| u64::from(b)).sum();
    Ok(RunRecord {
        duration: s.duration.0,
        app_start: s.app.start.0,
        deliveries: got.deliveries,
        cbr: got.cbr,
        cbr_generated: if s.app.kind == AppKind::Cbr {
            app::cbr_schedule(&s.app, stop_us).collect()
        } else {
            Vec::new()
        },
        samples,
        loss_events: rec_losses,
        recoveries,
        thresholds: vec![None; link_names.len()],
        link_names,
        rss: Vec::new(),
        decisions: decisions.into_sorted(),
        link_bytes,
        dsn: Vec::new(),
        completed: got.completed,
        flows: vec![FlowRecord {
            name: s.app.name.clone().unwrap_or_else(|| "app".into()),
            start: s.app.start.0,
            stopped: s.app.stop.map(|d| d.0),
            written: sent.written.load(Ordering::Relaxed),
            delivered: got_bytes,
            corrupt: 0,
            file_bytes: (s.app.kind == AppKind::File)
                .then(|| s.app.bytes.map(|b| b.0))
                .flatten(),
            completed: got.completed,
            redundant_packets: None,
        }],
        sender,
        receiver,
        sender_paths: Vec::new(),
        link_stats: Vec::new(),
        events: 0,
        paths_unread: true,
        ..RunRecord::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A radio link with `address = "lose"` loses its address `remove_addr_delay` after its
    /// coverage and gets it back with the coverage; coverage back before that keeps it; other
    /// links keep theirs.
    #[test]
    fn a_radio_links_address_goes_and_comes_back_with_its_coverage() {
        let s = |v: u64| Duration::from_secs(v);
        let b = |ms: u64, link: usize, lost: bool, back: bool| Beacon {
            t: Duration::from_millis(ms),
            link,
            rss: -90.0,
            effect: None,
            lost_since: lost.then(|| Duration::from_millis(ms - 900)),
            back,
            crossing: None,
        };
        let beacons = [
            b(10_000, 1, true, false),
            b(20_000, 1, false, true),
            b(30_000, 1, true, false),
            b(30_000, 0, true, false),
            // Back 500 ms after the loss: before the address went.
            b(30_500, 1, false, true),
            b(40_000, 0, false, true),
            // Never back.
            b(50_000, 1, true, false),
        ];
        let steps = radio_addr_steps(&beacons, Duration::from_secs(1), |l| l == 1);
        assert_eq!(
            steps,
            [
                (s(11), Step::AddrGone(1)),
                (s(20), Step::AddrBack(1)),
                (s(51), Step::AddrGone(1)),
            ]
        );
    }

    fn plan(file: &str, variants: &[&str]) -> Plan {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../scenarios")
            .join(file);
        let mut p = braid_sim::scenario::load(&path, &[]).unwrap();
        let names: Vec<String> = variants.iter().map(|v| v.to_string()).collect();
        p.retain_variants(&names).unwrap();
        p
    }

    #[test]
    fn radio_links_cross_layer_modes_and_the_hmm_run_through_the_tunnel_and_braid_pm() {
        let ok = plan(
            "e7-v2i-aggregation.toml",
            &["stock", "cross", "cross-cap", "cross-hmm"],
        );
        assert_eq!(check(&ok, Endpoint::Tunnel), Ok(()));
        assert_eq!(check(&ok, Endpoint::Pm), Ok(()));
        let replay = plan("e8-v2i-signal-replay.toml", &["r1-cap"]);
        assert_eq!(check(&replay, Endpoint::Tunnel), Ok(()));
    }

    /// Nodes A and B with interfaces e0 (10.9.0.0/24) and e1 (10.9.1.0/24), `e1_keys` added to
    /// A's and B's e1, then `rest` (links, application, more tables).
    fn two_nodes(e1_keys: [&str; 2], rest: &str) -> String {
        format!(
            r#"
name = "t"
duration = "10s"
[[node]]
name = "A"
iface = [{{ name = "e0", addr = "10.9.0.1/24" }}, {{ name = "e1", addr = "10.9.1.1/24"{} }}]
[[node]]
name = "B"
iface = [{{ name = "e0", addr = "10.9.0.2/24" }}, {{ name = "e1", addr = "10.9.1.2/24"{} }}]
{rest}
"#,
            e1_keys[0], e1_keys[1]
        )
    }

    fn load(text: &str) -> Plan {
        braid_sim::scenario::load_str(text, "t.toml", Path::new("."), &[])
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// One 10 Mbit/s link per interface between A and B, and a bulk transfer from `server`
    /// to `client`.
    fn link_ab_and_app(client: &str, server: &str) -> String {
        format!(
            "[[link]]\nname = \"ab\"\na = \"A.*\"\nb = \"B.*\"\nrate = \"10Mbit\"\ndelay = \"5ms\"\n\
             [app]\nkind = \"bulk\"\nclient = \"{client}\"\nserver = \"{server}\"\n"
        )
    }

    /// A topology runs in the lab when it is two nodes joined by direct links with one
    /// application on all of them; a relay, a second flow, seed 004's routing, a radio link or
    /// an application held to some of the client's interfaces is refused in one line naming
    /// the key.
    #[test]
    fn topologies_beyond_two_nodes_and_one_application_are_refused_by_key() {
        let text = |before_links: &str, after_app: &str| {
            two_nodes(
                ["", ""],
                &format!("{before_links}\n{}{after_app}", link_ab_and_app("A", "B")),
            )
        };
        let check_text = |t: String| check(&load(&t), Endpoint::Tunnel);
        assert_eq!(check_text(text("", "")), Ok(()));
        let relay = "[[node]]\nname = \"R\"\niface = [{ name = \"e0\", addr = \"10.9.0.3/24\" }]";
        let cases = [
            (text(relay, ""), "node (R): "),
            (text("", "interfaces = [\"e0\"]"), "app.interfaces: "),
            (
                text(
                    "",
                    "[[flow]]\nname = \"f\"\nkind = \"bulk\"\nclient = \"A\"\nserver = \"B\"",
                ),
                "flow (f): ",
            ),
            (
                text("", "[routing]\npolicy = \"manet\""),
                "routing.policy: ",
            ),
            (
                text("", "[link.radio]\nadapt_rate = false")
                    .replace("name = \"A\"\n", "name = \"A\"\nposition = [0.0, 0.0]\n")
                    .replace("name = \"B\"\n", "name = \"B\"\nposition = [50.0, 0.0]\n"),
                "link[0].radio (ab.e0): ",
            ),
        ];
        for (t, want) in cases {
            let e = check_text(t).unwrap_err();
            assert!(e.contains(want) && !e.contains('\n'), "{want}: {e}");
        }
    }

    /// A link is a backup for the lab's endpoints when the client's end of it is: the
    /// two-node form's `link.backup`, a topology's `iface.backup` on the client (not the
    /// server's).
    #[test]
    fn a_backup_is_the_clients_interface_in_either_form() {
        let two_node = plan("e2-blockage.toml", &["backup"]);
        let v = &two_node.variants[0];
        let want: Vec<bool> = v.scenario.links.iter().map(|l| l.backup).collect();
        assert!(want.iter().any(|b| *b), "{want:?}");
        let got: Vec<bool> = (0..v.links.len()).map(|i| client_backup(v, i)).collect();
        assert_eq!(got, want);
        let topo = |client_a: bool, backup_on: &str| {
            let (c, sv) = if client_a { ("A", "B") } else { ("B", "A") };
            let flag = |node| {
                if backup_on == node {
                    ", backup = true"
                } else {
                    ""
                }
            };
            let p = load(&two_nodes([flag("A"), flag("B")], &link_ab_and_app(c, sv)));
            let v = &p.variants[0];
            (0..v.links.len())
                .map(|i| client_backup(v, i))
                .collect::<Vec<_>>()
        };
        assert_eq!(topo(true, "A"), [false, true]);
        assert_eq!(topo(true, "B"), [false, false]);
        assert_eq!(topo(false, "B"), [false, true]);
    }

    /// The lab reports bytes per link under the simulator's names: per scenario link in the
    /// two-node form, per client interface in a topology whatever order its links are in.
    #[test]
    fn per_link_bytes_carry_the_simulators_names() {
        let two_node = plan("e7-v2i-aggregation.toml", &["cross"]);
        assert_eq!(
            per_client_interface(&two_node.variants[0], vec![3, 4]),
            (vec!["lte".to_string(), "its".to_string()], vec![3, 4])
        );
        let reversed = "[[link]]\nname = \"x\"\na = \"B.e1\"\nb = \"A.e1\"\nrate = \"10Mbit\"\n\
                        delay = \"5ms\"\n[[link]]\nname = \"y\"\na = \"A.e0\"\nb = \"B.e0\"\n\
                        rate = \"10Mbit\"\ndelay = \"5ms\"\n\
                        [app]\nkind = \"bulk\"\nclient = \"A\"\nserver = \"B\"\n";
        let p = load(&two_nodes(["", ""], reversed));
        assert_eq!(
            per_client_interface(&p.variants[0], vec![5, 7]),
            (vec!["e0".to_string(), "e1".to_string()], vec![7, 5])
        );
    }

    /// The scenario's HMM and capacity settings reach both daemons' files with every value,
    /// and each daemon's configuration takes them as the simulator does.
    #[test]
    fn the_hmm_and_capacity_settings_reach_the_daemons() {
        let mut p = plan("e7-v2i-aggregation.toml", &["cross-hmm"]);
        let pm = &mut p.variants[0].scenario.pm;
        pm.hmm.as_mut().unwrap().interval = braid_sim::units::Dur(Duration::from_millis(1500));
        pm.capacity = Some(braid_sim::scenario::CapacitySpec {
            sample: braid_sim::units::Dur(Duration::from_millis(100)),
            demand_window: braid_sim::units::Dur(Duration::from_secs(20)),
            horizon: braid_sim::units::Dur(Duration::from_secs(60)),
            headroom: 1.2,
            main_share: 0.9,
            floor_db: 1.5,
        });
        let want_hmm = braid_pm::HmmConfig {
            interval: Duration::from_millis(1500),
            ..braid_pm::HmmConfig::default()
        };
        let want_cap = braid_pm::CapacityConfig {
            sample: Duration::from_millis(100),
            demand_window: Duration::from_secs(20),
            horizon: Duration::from_secs(60),
            headroom: 1.2,
            main_share: 0.9,
            floor_db: 1.5,
        };
        let pm = &p.variants[0].scenario.pm;
        #[derive(serde::Deserialize)]
        struct Tables {
            hmm: braid_pm::HmmSettings,
            capacity: braid_pm::CapacitySettings,
        }
        let t: Tables = toml::from_str(&pm_tables(pm, "")).unwrap();
        assert_eq!(t.hmm.config(), want_hmm);
        assert_eq!(t.capacity.config(), want_cap);
        #[derive(serde::Deserialize)]
        struct Nested {
            pm: Tables,
        }
        let t: Nested = toml::from_str(&pm_tables(pm, "pm.")).unwrap();
        assert_eq!(t.pm.hmm.config(), want_hmm);
        assert_eq!(t.pm.capacity.config(), want_cap);
        let mut sub = p.clone();
        sub.variants[0].scenario.pm.hmm.as_mut().unwrap().interval =
            braid_sim::units::Dur(Duration::from_micros(1500));
        let err = check(&sub, Endpoint::Tunnel).unwrap_err();
        assert!(err.contains("pm.hmm.interval: "), "{err}");
    }
}
