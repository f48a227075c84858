//! The `braid pm` event loop: kernel MPTCP events, rtnetlink, signal samples and the policy's
//! timers in; userspace-path-manager requests out.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use braid_core::Instant;
use braid_io::signal::{SignalStats, Source};
use braid_mptcp::rtmon::NetMonitor;
use braid_mptcp::{MptcpDiag, PmClient, PmEvent, PmEvents};
use braid_pm::{Command, Event, Manager, PathManager};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::bridge::{Bridge, KernelOp};
use super::config::PmSettings;
use super::drain::{Drain, KernelState};
use super::prio::Prio;
use super::revive::Revive;

/// Kernel requests that failed, kept for `status`.
const ERRORS_KEPT: usize = 20;

/// After an event overrun, the kernel's connections are listed once the socket has been quiet
/// this long (the events queued before the overrun read), and again after each listing that
/// found connections gone…
const RESYNC_QUIET: Duration = Duration::from_millis(100);
/// …or this long after the overrun, whichever comes first.
const RESYNC_LATEST: Duration = Duration::from_secs(2);

#[derive(Default)]
struct Counters {
    kernel_events: u64,
    net_events: u64,
    requests: u64,
    request_errors: u64,
    /// Connections found gone after an event overrun (their CLOSED event was lost).
    closed_in_overrun: u64,
    last_errors: VecDeque<String>,
    refused: Refused,
}

/// Subflows the peer refused before they were established (`ECONNREFUSED`): nothing listens
/// at that address and port. The common cause is a server bound to one of its addresses: a
/// subflow to any other of its addresses finds no listener, whatever it announced. Counted,
/// and said once per remote address.
#[derive(Debug, Default)]
struct Refused {
    count: u64,
    said: std::collections::BTreeSet<std::net::SocketAddr>,
}

/// Remote addresses whose refusals are said in the log; the count goes on beyond them.
const REFUSED_SAID: usize = 16;

impl Refused {
    /// Notes a closed subflow; the warning to log for the first refusal from its remote.
    fn note(&mut self, s: &braid_mptcp::SubflowInfo, established: bool) -> Option<String> {
        if established || !s.refused() {
            return None;
        }
        self.count += 1;
        if self.said.len() >= REFUSED_SAID || !self.said.insert(s.remote) {
            return None;
        }
        Some(format!(
            "subflow {} -> {} refused by the peer (connection refused): nothing listens there; \
             a server bound to one address refuses subflows to its others",
            s.local, s.remote
        ))
    }
}

/// Checks that the kernel can be driven: MPTCP enabled, the userspace path manager selected.
pub fn preflight() -> anyhow::Result<()> {
    let enabled = std::fs::read_to_string("/proc/sys/net/mptcp/enabled").map_err(|e| {
        anyhow::anyhow!("this kernel has no MPTCP (/proc/sys/net/mptcp/enabled: {e})")
    })?;
    if enabled.trim() != "1" {
        bail!("MPTCP is disabled: sysctl -w net.mptcp.enabled=1");
    }
    let mode = braid_mptcp::path_manager_mode()
        .context("cannot read the kernel's MPTCP path manager setting")?;
    if mode != "userspace" {
        bail!(
            "the kernel's MPTCP path manager is `{mode}`; braid pm drives the userspace path \
             manager: sysctl -w net.mptcp.path_manager=userspace"
        );
    }
    Ok(())
}

pub async fn run(settings: PmSettings) -> anyhow::Result<()> {
    preflight()?;
    let start = std::time::Instant::now();
    let now = move || Instant::from_micros(start.elapsed().as_micros() as u64);

    let mut client = PmClient::connect()
        .await
        .context("mptcp_pm generic netlink")?;
    // Subscribe to events before reading the interfaces, so nothing falls between the two.
    let mut events = PmEvents::connect().await.context("mptcp_pm events")?;
    let (mut netmon, snapshot) = NetMonitor::connect().await.context("rtnetlink")?;

    let mut pm = Manager::new(settings.policy.clone()).map_err(anyhow::Error::msg)?;
    let mut bridge = Bridge::new(settings.managed.clone());
    let mut counters = Counters::default();
    let mut drain = Drain::new(settings.drain_max_unacked);
    let mut revive = Revive::default();
    let mut prio = Prio::default();
    // sock_diag serves the drain, the capacity-aware modes' traffic samples, the replacement
    // of subflows stuck in retransmission backoff (`revive`) and the repeat of a backup-flag
    // change the peer missed (`prio`); only the first two cannot do without it.
    let mut diag = if settings.drain_max_unacked.is_some() || settings.policy.mode.capacity_aware()
    {
        Some(MptcpDiag::open().context("sock_diag (MPTCP connection state)")?)
    } else {
        match MptcpDiag::open() {
            Ok(d) => Some(d),
            Err(e) => {
                tracing::warn!(
                    "sock_diag unavailable ({e}): a subflow made active again while its \
                     retransmission timer is backed off waits for that timer, and a change of \
                     a subflow's backup flag is sent once"
                );
                None
            }
        }
    };
    for n in &snapshot {
        for e in bridge.on_net(n) {
            pm.handle_event(now(), &e);
        }
    }
    for name in &settings.managed {
        if bridge.iface_by_name(name).is_none() {
            tracing::warn!("configured interface {name} does not exist (yet)");
        }
    }

    let (tx, mut rx) = mpsc::channel(4096);
    let sig_stats = Arc::new(SignalStats::default());
    let mut tasks = Vec::new();
    for s in &settings.signals {
        let t = match s {
            Source::Socket(p) => braid_io::signal::spawn_socket(p, tx.clone(), sig_stats.clone())?,
            _ => braid_io::signal::spawn_replay(s, tx.clone(), sig_stats.clone())?,
        };
        tasks.push(t);
    }
    if let Some(every) = settings.nl80211 {
        match super::wifi::spawn(every, tx.clone(), sig_stats.clone()).await {
            Ok(t) => tasks.push(t),
            Err(e) => tracing::warn!("nl80211 signal input unavailable: {e}"),
        }
    }
    drop(tx);

    let snapshot_json = Arc::new(Mutex::new(Value::Null));
    let shared = snapshot_json.clone();
    let control = braid_io::control::serve(
        &settings.control,
        Arc::new(move |req| match req {
            "status" | "" => shared.lock().map(|v| v.clone()).unwrap_or(Value::Null),
            other => json!({ "error": format!("unknown request `{other}`: allowed status") }),
        }),
    )
    .await?;
    tracing::info!(
        mode = mode_name(settings.policy.mode),
        control = %settings.control.display(),
        "braid pm running"
    );

    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut signal_open = true;
    let mut drain_at: Option<tokio::time::Instant> = None;
    let mut decisions_logged = 0;
    let mut overruns_seen = 0;
    let mut resync: Option<(tokio::time::Instant, tokio::time::Instant)> = None;
    loop {
        let deadline = pm
            .poll_timeout()
            .map(|t| tokio::time::Instant::from_std(start) + t.since_epoch());
        let mut evs: Vec<Event> = Vec::new();
        let mut ops: Vec<KernelOp> = Vec::new();
        // Draining connections are looked at every `drain_check`, whatever else arrives.
        if drain.parked().is_empty() {
            drain_at = None;
        } else if drain_at.is_none() {
            // A new removal is looked at at once: its link may be gone with data on it.
            drain_at = Some(tokio::time::Instant::now() + settings.drain_check);
        }
        tokio::select! {
            r = events.next() => {
                let e = r.context("mptcp_pm events")?;
                counters.kernel_events += 1;
                tracing::debug!(?e, "kernel event");
                match &e {
                    PmEvent::SubClosed(s) => {
                        revive.closed(s.token, s.local, s.remote);
                        let id = bridge.subflow_id(s.token, s.local, s.remote);
                        if let Some(id) = id
                            && drain.closed(s.token, Some(id))
                        {
                            tracing::info!(subflow = id.0, "a draining subflow was closed by the kernel");
                        }
                        if let Some(msg) = counters.refused.note(s, id.is_some()) {
                            tracing::warn!("{msg}");
                        }
                    }
                    PmEvent::Closed { token } => {
                        drain.closed(*token, None);
                        revive.expire(now(), Some(*token));
                    }
                    PmEvent::SubEstablished(s) => {
                        if let Some(op) = revive.established(s.token, s.local, s.remote) {
                            tracing::info!(?op, "replacement established: the old subflow goes");
                            ops.push(op);
                        }
                    }
                    _ => {}
                }
                evs = bridge.on_kernel(&e);
                // Events were lost: the connections closed meanwhile would stay in the tables
                // for good. Once the events still queued are read (the socket quiet for
                // RESYNC_QUIET, or RESYNC_LATEST after the overrun at the latest), the kernel's
                // list of connections tells which are gone.
                let t = tokio::time::Instant::now();
                if events.overruns() > overruns_seen {
                    overruns_seen = events.overruns();
                    resync = Some((t + RESYNC_QUIET, t + RESYNC_LATEST));
                } else if let Some((_, latest)) = resync {
                    resync = Some(((t + RESYNC_QUIET).min(latest), latest));
                }
            }
            () = async {
                match resync {
                    Some((at, _)) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            } => {
                resync = None;
                match diag.as_mut().map(|d| d.dump()) {
                    Some(dump) => match dump.await {
                        Ok(conns) => {
                            let live: Vec<u32> = conns.iter().map(|c| c.token).collect();
                            let gone = bridge.gone(&live);
                            // Events queued before the overrun may still be coming in (each
                            // can take a kernel request): look again until nothing is found.
                            if !gone.is_empty() {
                                let t = tokio::time::Instant::now();
                                resync = Some((t + RESYNC_QUIET, t + RESYNC_LATEST));
                            }
                            for token in gone {
                                counters.closed_in_overrun += 1;
                                drain.closed(token, None);
                                revive.expire(now(), Some(token));
                                evs.extend(bridge.on_kernel(&PmEvent::Closed { token }));
                            }
                        }
                        Err(e) => tracing::warn!("sock_diag after an event overrun: {e}"),
                    },
                    None => tracing::warn!(
                        "kernel events were lost (receive buffer overrun); without sock_diag \
                         connections closed meanwhile stay in the tables"
                    ),
                }
            }
            () = async {
                match drain_at {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            } => {
                drain_at = None;
                if let Some(d) = diag.as_mut() {
                    match (d.dump().await, d.tcp().await) {
                        (Ok(conns), Ok(sockets)) => {
                            let k = KernelState { conns: &conns, sockets: &sockets };
                            ops.extend(drain.check(now(), &k, |p| bridge.link_gone(p.local)));
                        }
                        (Err(e), _) | (_, Err(e)) => tracing::warn!("sock_diag: {e}"),
                    }
                }
            }
            () = async {
                match prio.due() {
                    Some(at) => tokio::time::sleep_until(tokio::time::Instant::from_std(start) + at.since_epoch()).await,
                    None => std::future::pending().await,
                }
            } => {
                if let Some(d) = diag.as_mut() {
                    match d.tcp().await {
                        Ok(sockets) => {
                            let known: Vec<_> = bridge
                                .subflows
                                .values()
                                .map(|s| (s.token, s.local, s.remote))
                                .collect();
                            let again = prio.check(now(), &sockets, &known);
                            for op in &again {
                                tracing::info!(
                                    ?op,
                                    "the peer missed the MP_PRIO (a backup subflow still \
                                     receives, or an active one receives nothing beside busy \
                                     ones): sending it again"
                                );
                            }
                            ops.extend(again);
                        }
                        Err(e) => {
                            tracing::warn!("sock_diag: {e}");
                            prio.postpone(now());
                        }
                    }
                }
            }
            r = netmon.next() => {
                let e = r.context("rtnetlink monitor")?;
                counters.net_events += 1;
                tracing::debug!(?e, "network event");
                evs = bridge.on_net(&e);
            }
            s = rx.recv(), if signal_open => match s {
                Some(s) => match bridge.iface_by_name(&s.iface) {
                    Some(iface) => evs.push(Event::Signal { iface, rssi_dbm: s.rssi_dbm }),
                    None => {
                        sig_stats.unknown_iface.fetch_add(1, Ordering::Relaxed);
                    }
                },
                None => signal_open = false,
            },
            () = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            } => {
                pm.handle_timeout(now());
                // Capacity-aware modes: what each interface's subflows carried.
                if pm.wants_traffic()
                    && let Some(d) = diag.as_mut()
                {
                    match d.tcp().await {
                        Ok(sockets) => evs.push(Event::Traffic { bytes: bridge.traffic(&sockets) }),
                        Err(e) => tracing::warn!("sock_diag: {e}"),
                    }
                }
            }
            _ = tokio::signal::ctrl_c() => break,
            _ = sigterm.recv() => break,
        }
        for e in &evs {
            pm.handle_event(now(), e);
        }
        // Each decision with its reason, before the kernel requests it makes.
        for d in pm.decisions_since(decisions_logged) {
            let iface = bridge.ifaces.get(&d.iface.0).map(|i| i.name.as_str());
            tracing::info!(
                iface = iface.unwrap_or("?"),
                reason = d.reason.name(),
                rssi_dbm = %d.rssi_dbm.map_or("-".into(), |r| format!("{r:.1}")),
                "decision: {}",
                d.command.describe()
            );
        }
        decisions_logged = pm.decisions_total();
        while let Some(c) = pm.poll_command() {
            if let Command::RemoveSubflow { subflow, .. } = &c
                && let Some(s) = bridge.subflows.get(subflow)
            {
                ops.extend(drain.remove(*subflow, s.token, s.local, s.remote, s.backup, now()));
                drain_at = Some(tokio::time::Instant::now());
                continue;
            }
            // What a demoted subflow has in flight, sent again over the others: the subflow
            // is closed at both ends (see `Bridge::reinject`).
            if matches!(c, Command::Reinject { .. }) {
                match bridge.reinject(&c, settings.reinject) {
                    Some(r) => ops.extend(r),
                    None if bridge.reinjects_skipped == 1 => tracing::info!(
                        "a request to resend what a demoted subflow has in flight was skipped: \
                         `kernel.reinject` off, its connection's initial subflow, a server-side \
                         connection, or no other subflow (status: reinjects_skipped)"
                    ),
                    None => {}
                }
                continue;
            }
            if bridge.unsupported(&c) {
                if matches!(c, Command::SetWatch { .. }) {
                    if bridge.watches_skipped == 1 {
                        tracing::info!(
                            "mode {}: the kernel has no per-subflow stall timer; requests to \
                             watch a subflow are skipped (status: watches_skipped)",
                            mode_name(pm.config().mode)
                        );
                    }
                    continue;
                }
                if bridge.duplicates_skipped == 1 {
                    tracing::warn!(
                        "mode {}: the kernel cannot make a subflow carry a copy of the stream; \
                         copy requests are skipped (counted in status: duplicates_skipped)",
                        mode_name(pm.config().mode)
                    );
                }
                continue;
            }
            match bridge.to_kernel(&c) {
                Some(op) => ops.push(op),
                None => bridge.stale_commands += 1,
            }
        }
        revive.expire(now(), None);
        let mut queue: VecDeque<KernelOp> = ops.into();
        while let Some(op) = queue.pop_front() {
            counters.requests += 1;
            if let Err(e) = execute(&mut client, &op, settings.bind_to_device).await {
                counters.request_errors += 1;
                let msg = format!("{}: {e}", op.name());
                tracing::warn!("{msg}");
                if counters.last_errors.len() == ERRORS_KEPT {
                    counters.last_errors.pop_front();
                }
                counters.last_errors.push_back(msg);
                if let KernelOp::SubflowCreate { token, local, .. } = op {
                    revive.failed(token, local);
                }
                continue;
            }
            tracing::info!(?op, "kernel request done");
            bridge.applied(&op);
            if settings.resend_prio && diag.is_some() {
                prio.applied(&op, now());
            }
            // A subflow made active again while its retransmission timer is backed off:
            // replace it (see `revive`).
            if let KernelOp::SetBackup {
                token,
                local,
                remote,
                backup: false,
            } = op
                && let Some(new) = bridge.replacement(token, local, remote)
                && let Some(d) = diag.as_mut()
            {
                match d.tcp().await {
                    Ok(sockets) => {
                        if revive.activated(&op, &sockets, now()) {
                            tracing::info!(
                                %local, %remote,
                                "subflow made active in retransmission backoff: replacing it"
                            );
                            queue.push_back(new);
                        }
                    }
                    Err(e) => tracing::warn!("sock_diag: {e}"),
                }
            }
        }
        let v = status_json(
            &pm,
            &bridge,
            (&drain, &revive, &prio),
            &counters,
            &sig_stats,
            &events,
            now(),
        );
        if let Ok(mut s) = snapshot_json.lock() {
            *s = v;
        }
    }
    tracing::info!("braid pm stopping");
    control.abort();
    for t in tasks {
        t.abort();
    }
    let _ = std::fs::remove_file(&settings.control);
    Ok(())
}

/// One request to the kernel; a subflow is bound to its interface when `bind` (see
/// `PmSettings::bind_to_device`).
async fn execute(c: &mut PmClient, op: &KernelOp, bind: bool) -> Result<(), braid_mptcp::Error> {
    match *op {
        KernelOp::Announce { token, id, addr } => c.announce(token, id, addr, None).await,
        KernelOp::Remove { token, id } => c.remove(token, id).await,
        KernelOp::SubflowCreate {
            token,
            local_id,
            local,
            ifindex,
            remote,
            backup,
        } => {
            let ifindex = bind.then_some(ifindex);
            c.subflow_create(token, local_id, local, ifindex, remote, backup)
                .await
        }
        KernelOp::SubflowDestroy {
            token,
            local,
            remote,
        } => c.subflow_destroy(token, local, remote).await,
        KernelOp::SetBackup {
            token,
            local,
            remote,
            backup,
        } => c.set_backup(token, local, remote, backup).await,
    }
}

fn status_json(
    pm: &Manager,
    bridge: &Bridge,
    (drain, revive, prio): (&Drain, &Revive, &Prio),
    counters: &Counters,
    sig: &SignalStats,
    events: &PmEvents,
    now: Instant,
) -> Value {
    let mode = mode_name(pm.config().mode);
    let ifaces: Vec<Value> = pm
        .ifaces()
        .map(|i| {
            let addrs: Vec<String> = bridge
                .ifaces
                .get(&i.iface.0)
                .map(|b| b.addrs.iter().map(|a| a.to_string()).collect())
                .unwrap_or_default();
            json!({
                "index": i.iface.0,
                "name": i.name,
                "up": i.up,
                "addrs": addrs,
                "rssi_dbm": i.rssi_dbm,
                "threshold_dbm": i.threshold_dbm,
                "good": i.good,
                "predicted": i.predicted.map(|p| format!("{p:?}").to_lowercase()),
                "flips": i.flips,
                "samples": i.samples,
                "rate_bps": i.rate_bps,
                "carried_bps": i.carried_bps,
            })
        })
        .collect();
    let name_of = |idx: Option<u32>| {
        idx.and_then(|i| bridge.ifaces.get(&i))
            .map(|i| i.name.clone())
    };
    let conns: Vec<Value> = bridge
        .conns
        .iter()
        .map(|(token, c)| {
            let subflows: Vec<Value> = bridge
                .subflows
                .iter()
                .filter(|(_, s)| s.token.0 == *token)
                .map(|(id, s)| {
                    json!({
                        "id": id.0,
                        "local": s.local.to_string(),
                        "remote": s.remote.to_string(),
                        "iface": name_of(s.ifindex),
                        "backup": s.backup,
                        "draining": drain.is_parked(*id),
                    })
                })
                .collect();
            json!({
                "token": token,
                "local": c.local.to_string(),
                "remote": c.remote.to_string(),
                "server_side": c.server_side,
                "established": c.established,
                "subflows": subflows,
            })
        })
        .collect();
    let decisions: Vec<Value> = pm
        .decisions()
        .iter()
        .rev()
        .take(20)
        .map(|d| {
            json!({
                "t_s": d.at.secs_f64(),
                "iface": name_of(Some(d.iface.0)).unwrap_or_else(|| d.iface.to_string()),
                "command": d.command.describe(),
                "reason": d.reason.name(),
                "rssi_dbm": d.rssi_dbm,
            })
        })
        .collect();
    let st = pm.stats();
    json!({
        "uptime_s": now.secs_f64(),
        "mode": mode,
        "demand_bps": pm.demand_bps(),
        "ifaces": ifaces,
        "connections": conns,
        "decisions": decisions,
        "stats": {
            "subflows_created": st.subflows_created,
            "subflows_removed": st.subflows_removed,
            "backup_set": st.backup_set,
            "backup_cleared": st.backup_cleared,
            "signal_samples": st.signal_samples,
            "traffic_samples": st.traffic_samples,
            "demotions_withheld": st.demotions_withheld,
            "backups_held": st.backups_held,
            "kernel_events": counters.kernel_events,
            "malformed_kernel_events": events.malformed(),
            "event_overruns": events.overruns(),
            "closed_in_overrun": counters.closed_in_overrun,
            "net_events": counters.net_events,
            "kernel_requests": counters.requests,
            "kernel_request_errors": counters.request_errors,
            "subflows_refused": counters.refused.count,
            "stale_commands": bridge.stale_commands,
            "duplicates_skipped": bridge.duplicates_skipped,
            "reinjects": bridge.reinjects,
            "reinjects_skipped": bridge.reinjects_skipped,
            "watches_skipped": bridge.watches_skipped,
            "drain_parked": drain.stats.parked,
            "drain_destroyed_dead_idle": drain.stats.destroyed_dead_idle,
            "drain_destroyed_timeout": drain.stats.destroyed_timeout,
            "drain_destroyed": drain.stats.destroyed_drained,
            "drain_destroyed_lost": drain.stats.destroyed_lost,
            "drain_closed_by_kernel": drain.stats.closed_by_kernel,
            "drain_max_unacked_at_destroy": drain.stats.max_unacked_at_destroy,
            "backoff_replacements": revive.stats.started,
            "backoff_replaced": revive.stats.replaced,
            "backoff_replacements_abandoned": revive.stats.abandoned,
            "backoff_replacements_pending": revive.pending(),
            "prio_resent": prio.stats.resent,
            "prio_heard": prio.stats.heard,
            "prio_unheard": prio.stats.unheard,
        },
        "last_errors": counters.last_errors.iter().collect::<Vec<_>>(),
        "signal": sig.to_json(),
    })
}

fn mode_name(m: braid_pm::Mode) -> &'static str {
    braid_pm::Mode::NAMES
        .iter()
        .find(|n| braid_pm::Mode::from_name(n) == Some(m))
        .copied()
        .unwrap_or("?")
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_mptcp::{SubflowInfo, Token};

    fn closed(remote: &str, error: Option<u8>) -> SubflowInfo {
        SubflowInfo {
            token: Token(7),
            local: "10.1.0.8:40000".parse().unwrap(),
            remote: remote.parse().unwrap(),
            local_id: 2,
            remote_id: 1,
            backup: false,
            ifindex: None,
            error,
            reset: None,
        }
    }

    #[test]
    fn refused_subflows_are_counted_and_said_once_per_remote() {
        let mut r = Refused::default();
        let refused = Some(111); // ECONNREFUSED
        let first = r.note(&closed("10.1.0.1:5100", refused), false);
        assert!(
            first
                .unwrap()
                .contains("10.1.0.8:40000 -> 10.1.0.1:5100 refused")
        );
        assert_eq!(r.note(&closed("10.1.0.1:5100", refused), false), None);
        assert!(r.note(&closed("10.2.0.1:5100", refused), false).is_some());
        // Not refusals: another error, no error, or a subflow that had been established.
        assert_eq!(r.note(&closed("10.3.0.1:5100", Some(110)), false), None);
        assert_eq!(r.note(&closed("10.3.0.1:5100", None), false), None);
        assert_eq!(r.note(&closed("10.3.0.1:5100", refused), true), None);
        assert_eq!(r.count, 3);
        // Past REFUSED_SAID remotes the log stays quiet and the count goes on.
        for p in 0..40u16 {
            r.note(&closed(&format!("10.9.0.1:{}", 6000 + p), refused), false);
        }
        assert_eq!(r.said.len(), REFUSED_SAID);
        assert_eq!(r.count, 43);
    }
}
