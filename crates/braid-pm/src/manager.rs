//! The policy engine: events in, commands out.

use std::collections::{BTreeMap, VecDeque};
use std::net::IpAddr;

use braid_core::Instant;

use crate::capacity::Estimator;
use crate::config::{Config, IfaceConfig, Mode};
use crate::event::{AddrId, Command, ConnId, Endpoint, Event, IfaceId, SubflowId};
use crate::hmm::{self, Obs, State};

/// A path manager: sans-IO, like the transport core. The backend (the simulator, braid's
/// daemon, the kernel's userspace path manager over netlink) feeds it events and executes its
/// commands; time is an argument.
pub trait PathManager: Send {
    fn handle_event(&mut self, now: Instant, event: &Event);
    /// Runs timers due at `now` (periodic HMM prediction).
    fn handle_timeout(&mut self, now: Instant);
    fn poll_timeout(&self) -> Option<Instant>;
    fn poll_command(&mut self) -> Option<Command>;
    /// Whether the manager wants an [`Event::Traffic`] sample now (capacity-aware modes, once
    /// per sample interval after `handle_timeout`); runtimes that cannot count bytes per
    /// interface may ignore it (the modes then act as Algorithm 1).
    fn wants_traffic(&self) -> bool {
        false
    }
}

/// Why a decision was taken, for logs, `status` and plots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Stock behaviour (full mesh, backup configuration).
    Stock,
    /// The smoothed signal crossed the threshold.
    Signal,
    /// The HMM predicts a disconnection (or a reconnection).
    Prediction,
    /// The interface or its address went away (or came back).
    Interface,
    /// The backup-mode variant hands over between primary and backup.
    Handover,
    /// A subflow closed (broken, closed by the peer, failed to open) while its interface is
    /// still usable: the policy runs again after a backoff.
    Reopen,
    /// The capacity-aware modes: a fading link stays active because the other links have not
    /// been seen carrying the demand (or is demoted once they have).
    Capacity,
    /// A connection's first path went unanswered for the race delay: another interface opens
    /// one too ([`Config::race`]).
    Race,
}

impl Reason {
    /// Its name in logs and `status` (lower case).
    pub fn name(self) -> &'static str {
        match self {
            Reason::Stock => "stock",
            Reason::Signal => "signal",
            Reason::Prediction => "prediction",
            Reason::Interface => "interface",
            Reason::Handover => "handover",
            Reason::Reopen => "reopen",
            Reason::Capacity => "capacity",
            Reason::Race => "race",
        }
    }
}

/// One decision of the manager.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub at: Instant,
    pub iface: IfaceId,
    pub command: Command,
    pub reason: Reason,
    /// The smoothed signal when it was taken.
    pub rssi_dbm: Option<f64>,
}

/// What `status` shows of an interface.
#[derive(Debug, Clone, PartialEq)]
pub struct IfaceStatus {
    pub iface: IfaceId,
    pub name: String,
    pub up: bool,
    pub rssi_dbm: Option<f64>,
    pub threshold_dbm: Option<f64>,
    /// Algorithm 1's verdict (signal and prediction).
    pub good: bool,
    pub predicted: Option<State>,
    /// Backup/active changes on this interface's subflows.
    pub flips: u64,
    pub samples: u64,
    /// Capacity-aware modes: the interface's rate over the last traffic sample (bit/s) ...
    pub rate_bps: Option<f64>,
    /// ... and what it carried as the main carrier, when seen within the horizon.
    pub carried_bps: Option<f64>,
}

#[derive(Debug)]
struct Iface {
    name: String,
    cfg: IfaceConfig,
    up: bool,
    locals: Vec<(AddrId, Option<IpAddr>)>,
    rssi: Option<f64>,
    samples: u64,
    /// The signal verdict with hysteresis.
    signal_good: bool,
    quality: Option<u32>,
    obs: VecDeque<Obs>,
    predicted: Option<State>,
    flips: u64,
    /// Capacity-aware modes: a demotion of this interface is being withheld.
    withheld: bool,
    /// When the interface last turned good (signal, prediction, link or address back), and
    /// whether it was good when last looked at.
    good_since: Option<Instant>,
    was_good: bool,
    /// Capacity-aware backup mode: the backups stay active beside this primary, back from a
    /// loss, until it has carried the demand.
    holding_backups: bool,
}

#[derive(Debug, Clone)]
struct Subflow {
    /// `None` while requested and not established yet.
    id: Option<SubflowId>,
    iface: IfaceId,
    local: Endpoint,
    backup: bool,
    /// The `…-dup` modes: asked to carry a copy of the stream.
    duplicate: bool,
    /// The capacity-aware modes: watched for a stall (see [`Manager::watch_wanted`]).
    watch: bool,
}

#[derive(Debug)]
struct Conn {
    initiator: bool,
    established: bool,
    remote: Endpoint,
    remotes: Vec<Endpoint>,
    subflows: Vec<Subflow>,
    /// With [`Config::race`] set, the first path the runtime opened (its interface and local
    /// address) while it is neither established nor closed: the manager did not request it,
    /// so it is not among `subflows` until the connection is established.
    first: Option<(IfaceId, Endpoint)>,
    /// When the first path is raced over one more interface ([`Config::race`]).
    race_at: Option<Instant>,
}

/// Counters.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Stats {
    pub subflows_created: u64,
    pub subflows_removed: u64,
    pub backup_set: u64,
    pub backup_cleared: u64,
    pub signal_samples: u64,
    /// Samples for interfaces the manager does not know (dropped).
    pub unknown_iface_samples: u64,
    /// Samples with impossible values (dropped).
    pub bad_samples: u64,
    /// Re-evaluations of an interface after one of its subflows closed or failed.
    pub reopen_checks: u64,
    /// New initial paths opened for connections whose paths all went before they were
    /// established.
    pub initial_reopened: u64,
    /// First paths opened over one more interface because the connection's first path went
    /// unanswered for the race delay.
    pub initial_raced: u64,
    /// Capacity-aware modes: traffic samples taken, and times a fading interface was kept
    /// active because the other links had not been seen carrying the demand.
    pub traffic_samples: u64,
    pub demotions_withheld: u64,
    /// Capacity-aware backup mode: times a primary came back and the backups stayed active
    /// beside it until it carried the demand.
    pub backups_held: u64,
    /// The `…-dup` modes: subflows asked to carry a copy of the stream, and asked to stop.
    pub duplicate_set: u64,
    pub duplicate_cleared: u64,
    /// `Reinject` commands (a demoted fading link's data in flight sent over the others).
    pub reinjections: u64,
    /// `SetWatch` commands that set the flag (a radio link's subflow watched for a stall).
    pub watches: u64,
}

/// The configurable path manager (full mesh, backup, cross-layer, cross-layer backup mode,
/// each optionally with HMM prediction and same-subnet pairing).
#[derive(Debug)]
pub struct Manager {
    cfg: Config,
    ifaces: BTreeMap<IfaceId, Iface>,
    conns: BTreeMap<ConnId, Conn>,
    commands: VecDeque<Command>,
    decisions: VecDeque<Decision>,
    /// Decisions taken since the manager was made (the log keeps the last [`DECISION_LOG`]).
    decisions_total: u64,
    next_prediction: Option<Instant>,
    /// Interfaces to evaluate again after a subflow closed, per connection.
    reopen: BTreeMap<(ConnId, IfaceId), Reopen>,
    now: Instant,
    stats: Stats,
    /// Capacity-aware modes: what the links carried.
    capacity: Option<Estimator>,
    /// Capacity-aware modes: when the next traffic sample is due, and whether it is.
    next_traffic: Option<Instant>,
    traffic_due: bool,
}

/// Decisions kept for display: the most recent ones (a daemon runs for days).
const DECISION_LOG: usize = 1024;

/// First wait before an interface whose subflow closed is evaluated again; it doubles with
/// every close that follows without an established subflow, up to [`REOPEN_MAX`].
pub const REOPEN_MIN: std::time::Duration = std::time::Duration::from_millis(100);
/// Longest wait between two re-evaluations of an interface whose subflows keep failing.
pub const REOPEN_MAX: std::time::Duration = std::time::Duration::from_secs(2);

/// A pending re-evaluation of one interface for one connection.
#[derive(Debug, Clone, Copy)]
struct Reopen {
    /// When the policy runs again (`None`: nothing scheduled, only the backoff is kept).
    at: Option<Instant>,
    /// The wait used for the next close.
    delay: std::time::Duration,
}

impl Manager {
    pub fn new(cfg: Config) -> Result<Self, String> {
        cfg.validate()?;
        let capacity = cfg
            .mode
            .capacity_aware()
            .then(|| Estimator::new(cfg.capacity.clone()));
        Ok(Manager {
            capacity,
            next_traffic: None,
            traffic_due: false,
            cfg,
            ifaces: BTreeMap::new(),
            conns: BTreeMap::new(),
            commands: VecDeque::new(),
            decisions: VecDeque::new(),
            decisions_total: 0,
            next_prediction: None,
            reopen: BTreeMap::new(),
            now: Instant::ZERO,
            stats: Stats::default(),
        })
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The most recent decisions (up to 1024), oldest first.
    pub fn decisions(&self) -> &VecDeque<Decision> {
        &self.decisions
    }

    /// How many decisions were taken since the manager was made: a runtime that logs them
    /// remembers this count and logs the ones after it.
    pub fn decisions_total(&self) -> u64 {
        self.decisions_total
    }

    /// The decisions taken after the first `seen` (those still kept), oldest first.
    pub fn decisions_since(&self, seen: u64) -> impl Iterator<Item = &Decision> {
        let new = self.decisions_total.saturating_sub(seen);
        let new = usize::try_from(new).unwrap_or(usize::MAX);
        let skip = self.decisions.len().saturating_sub(new);
        self.decisions.iter().skip(skip)
    }

    pub fn ifaces(&self) -> impl Iterator<Item = IfaceStatus> + '_ {
        self.ifaces.iter().map(|(&id, i)| IfaceStatus {
            iface: id,
            name: i.name.clone(),
            up: i.up,
            rssi_dbm: i.rssi,
            threshold_dbm: i.cfg.threshold_dbm,
            good: self.good(id),
            predicted: i.predicted,
            flips: i.flips,
            samples: i.samples,
            rate_bps: self.capacity.as_ref().and_then(|e| e.rate_bps(id)),
            carried_bps: self
                .capacity
                .as_ref()
                .and_then(|e| e.carried_bps(self.now, id)),
        })
    }

    /// Capacity-aware modes: the demand the estimate measured (bit/s).
    pub fn demand_bps(&self) -> Option<f64> {
        self.capacity.as_ref().and_then(Estimator::demand_bps)
    }

    /// The good interfaces other than `id`: those that would take its traffic.
    fn good_others(&self, id: IfaceId) -> Vec<IfaceId> {
        self.ifaces
            .keys()
            .copied()
            .filter(|&j| j != id && self.good(j))
            .collect()
    }

    /// Capacity-aware modes: whether the interfaces other than `id` that may carry data have
    /// been seen carrying the demand (true when nothing is known: Algorithm 1 then decides).
    fn others_can_carry(&self, id: IfaceId) -> bool {
        let Some(e) = &self.capacity else {
            return true;
        };
        e.can_carry(self.now, self.good_others(id)).unwrap_or(true)
    }

    /// Capacity-aware modes: whether an established subflow should be watched for a stall
    /// (`Command::SetWatch`): it is active on a radio link (one with a signal threshold) whose
    /// signal is good, and the other good links have been seen carrying the demand
    /// ([`Estimator::carried_demand`]: evidence, not the benefit of the doubt
    /// `others_can_carry` gives when nothing is known or the stream is idle; measured: with
    /// it, the watch made E7's Verizon handovers worse than stock more often than better). A
    /// radio link can fall silent
    /// between two signal samples; watched, what it had in flight goes over the others about
    /// one RTT later instead of at its retransmission timeout. Not onto links that have not
    /// shown they can carry it, where the copies would only add to their backlog.
    fn watch_wanted(&self, s: &Subflow) -> bool {
        let Some(e) = &self.capacity else {
            return false;
        };
        let radio = self
            .ifaces
            .get(&s.iface)
            .is_some_and(|i| i.cfg.threshold_dbm.is_some());
        if !radio || s.id.is_none() || s.backup || !self.good(s.iface) {
            return false;
        }
        e.carried_demand(self.now, self.good_others(s.iface))
    }

    /// Capacity-aware modes: sets or clears the watch flag of every subflow whose
    /// [`watch_wanted`](Self::watch_wanted) changed.
    fn sync_watch(&mut self) {
        if self.capacity.is_none() {
            return;
        }
        let mut changes = Vec::new();
        for (&c, conn) in &self.conns {
            for (k, s) in conn.subflows.iter().enumerate() {
                let want = self.watch_wanted(s);
                if want != s.watch {
                    changes.push((c, k, want));
                }
            }
        }
        for (c, k, on) in changes {
            let Some(s) = self.conns.get_mut(&c).and_then(|x| x.subflows.get_mut(k)) else {
                continue;
            };
            s.watch = on;
            let (iface, id) = (s.iface, s.id);
            if let Some(subflow) = id {
                self.push(
                    iface,
                    Command::SetWatch {
                        conn: c,
                        subflow,
                        on,
                    },
                    Reason::Capacity,
                );
            }
        }
    }

    /// Capacity-aware modes: a fading interface (signal below T, or a predicted disconnection)
    /// that keeps carrying data because the others cannot take it, until its signal falls
    /// `floor_db` below T.
    fn keep_fading(&self, id: IfaceId) -> bool {
        let Some(i) = self.ifaces.get(&id) else {
            return false;
        };
        let above_floor = match (i.rssi, i.cfg.threshold_dbm) {
            (Some(r), Some(t)) => r > t - self.cfg.capacity.floor_db,
            _ => true,
        };
        self.capacity.is_some()
            && above_floor
            && self.available(id)
            && !self.good(id)
            && !self.others_can_carry(id)
    }

    /// Capacity-aware modes: whether a primary back from a loss has carried the demand since
    /// its signal turned good (over a whole traffic sample). Until then the backups stay active
    /// beside it: its window restarts small after the loss's timeouts, and a stream handed to
    /// it at once waits for the window to grow (E8's signal replays: 145 ms). True in the other
    /// modes and when nothing is measured.
    fn carries_demand_again(&self, primary: IfaceId) -> bool {
        let (Some(e), Some(since)) = (
            &self.capacity,
            self.ifaces.get(&primary).and_then(|i| i.good_since),
        ) else {
            return true;
        };
        e.carried_since(primary, since).unwrap_or(false)
    }

    /// Records whether a demotion of `id` is withheld; counts each time one starts to be.
    fn withhold(&mut self, id: IfaceId, on: bool) {
        if let Some(i) = self.ifaces.get_mut(&id) {
            if on && !i.withheld {
                self.stats.demotions_withheld += 1;
            }
            i.withheld = on;
        }
    }

    /// Subflows known per connection: (connection, subflow, interface, backup).
    pub fn subflows(
        &self,
    ) -> impl Iterator<Item = (ConnId, Option<SubflowId>, IfaceId, bool)> + '_ {
        self.conns.iter().flat_map(|(&c, conn)| {
            conn.subflows
                .iter()
                .map(move |s| (c, s.id, s.iface, s.backup))
        })
    }

    fn iface_cfg(&self, name: &str) -> IfaceConfig {
        self.cfg
            .ifaces
            .iter()
            .find(|i| i.name == name)
            .cloned()
            .unwrap_or_else(|| IfaceConfig::new(name))
    }

    /// Whether new data should use the interface: up, with an address, and (for cross-layer
    /// modes) a smoothed signal above the threshold and no predicted disconnection.
    fn good(&self, id: IfaceId) -> bool {
        let Some(i) = self.ifaces.get(&id) else {
            return false;
        };
        if !i.up || i.locals.is_empty() {
            return false;
        }
        if !self.cfg.mode.uses_signal() || i.cfg.threshold_dbm.is_none() {
            return true;
        }
        i.signal_good && i.predicted != Some(State::Disconnect)
    }

    fn iface_of(&self, local: AddrId) -> Option<IfaceId> {
        self.ifaces
            .iter()
            .find(|(_, i)| i.locals.iter().any(|(id, _)| *id == local))
            .map(|(&id, _)| id)
    }

    fn available(&self, id: IfaceId) -> bool {
        self.ifaces
            .get(&id)
            .is_some_and(|i| i.up && !i.locals.is_empty())
    }

    fn push(&mut self, iface: IfaceId, command: Command, reason: Reason) {
        let rssi = self.ifaces.get(&iface).and_then(|i| i.rssi);
        match &command {
            Command::CreateSubflow { .. } => self.stats.subflows_created += 1,
            Command::RemoveSubflow { .. } => self.stats.subflows_removed += 1,
            Command::SetBackup { backup: true, .. } => self.stats.backup_set += 1,
            Command::SetBackup { backup: false, .. } => self.stats.backup_cleared += 1,
            Command::SetDuplicate { on: true, .. } => self.stats.duplicate_set += 1,
            Command::SetDuplicate { on: false, .. } => self.stats.duplicate_cleared += 1,
            Command::Reinject { .. } => self.stats.reinjections += 1,
            Command::SetWatch { on: true, .. } => self.stats.watches += 1,
            _ => {}
        }
        if matches!(command, Command::SetBackup { .. })
            && let Some(i) = self.ifaces.get_mut(&iface)
        {
            i.flips += 1;
        }
        if self.decisions.len() == DECISION_LOG {
            self.decisions.pop_front();
        }
        self.decisions.push_back(Decision {
            at: self.now,
            iface,
            command: command.clone(),
            reason,
            rssi_dbm: rssi,
        });
        self.decisions_total += 1;
        self.commands.push_back(command);
    }

    /// The remote end a subflow from `local` should go to.
    fn remote_for(&self, conn: &Conn, local: &Endpoint) -> Option<Endpoint> {
        if !self.cfg.same_subnet {
            return Some(conn.remote);
        }
        // Seed 004 §V.A.3: only a remote address in the same /24 (else the primary subnet).
        let Some(IpAddr::V4(l)) = local.addr.map(|a| a.ip()) else {
            return Some(conn.remote);
        };
        let same = |e: &Endpoint| matches!(e.addr.map(|a| a.ip()), Some(IpAddr::V4(r)) if r.octets()[..3] == l.octets()[..3]);
        conn.remotes
            .iter()
            .chain(std::iter::once(&conn.remote))
            .find(|e| same(e))
            .copied()
    }

    /// The policy for one interface of one connection, then (`…-dup` modes) the copies.
    fn apply(&mut self, c: ConnId, iface: IfaceId, reason: Reason) {
        self.apply_policy(c, iface, reason);
        if self.cfg.mode.duplicates() {
            self.sync_duplicates(c, iface, reason);
        }
    }

    /// The `…-dup` modes: a demoted (backup) subflow of an interface whose signal faded keeps
    /// carrying a copy of the stream while the interface is usable and its smoothed signal is
    /// above the cut-off (T − `capacity.floor_db`), so that a stall of the link that took the
    /// stream over (a cellular link's delivery gap) does not stall the application while the
    /// fading link still works. The copy stops when the signal recovers above T + h (the
    /// subflow carries the stream again) or falls below the cut-off, and goes with the subflow
    /// when the interface breaks (down, address lost). Meanwhile the transport sends a copy
    /// only when the path has window room and is not suspected dead.
    fn sync_duplicates(&mut self, c: ConnId, iface: IfaceId, reason: Reason) {
        let Some(conn) = self.conns.get(&c) else {
            return;
        };
        if !conn.initiator || !conn.established {
            return;
        }
        // Below T, and not yet `floor_db` below it (the cut-off under which the capacity-aware
        // modes stop keeping a fading link active: its losses grow fast from there).
        let floor = self.cfg.capacity.floor_db;
        let fading = self.available(iface)
            && !self.good(iface)
            && self.ifaces.get(&iface).is_some_and(|i| {
                i.cfg
                    .threshold_dbm
                    .is_some_and(|t| i.rssi.is_none_or(|r| r > t - floor))
            });
        let subs: Vec<(SubflowId, bool)> = conn
            .subflows
            .iter()
            .filter(|s| s.iface == iface)
            .filter_map(|s| {
                let want = fading && s.backup;
                s.id.filter(|_| s.duplicate != want).map(|id| (id, want))
            })
            .collect();
        for (id, on) in subs {
            if let Some(x) = self
                .conns
                .get_mut(&c)
                .and_then(|conn| conn.subflows.iter_mut().find(|x| x.id == Some(id)))
            {
                x.duplicate = on;
            }
            self.push(
                iface,
                Command::SetDuplicate {
                    conn: c,
                    subflow: id,
                    on,
                },
                reason,
            );
        }
    }

    /// Algorithm 1 (and its stock and backup-mode counterparts) for one interface of one
    /// connection.
    fn apply_policy(&mut self, c: ConnId, iface: IfaceId, reason: Reason) {
        let Some(conn) = self.conns.get(&c) else {
            return;
        };
        if !conn.initiator || !conn.established {
            return;
        }
        let available = self.available(iface);
        let good = self.good(iface);
        let role_backup = self.ifaces.get(&iface).is_some_and(|i| i.cfg.backup);
        let existing: Vec<Subflow> = conn
            .subflows
            .iter()
            .filter(|s| s.iface == iface)
            .cloned()
            .collect();
        if !available {
            for s in existing {
                self.remove(c, &s, Reason::Interface);
            }
            return;
        }
        match self.cfg.mode {
            Mode::FullMesh => {
                if existing.is_empty() {
                    self.create(c, iface, false, reason);
                }
            }
            Mode::Backup => {
                if existing.is_empty() {
                    self.create(c, iface, role_backup, reason);
                }
                // The connection's first subflow is the application's, opened without the
                // interface's role: a backup interface's is flagged once it is known.
                for s in existing
                    .iter()
                    .filter(|s| s.id.is_some() && s.backup != role_backup)
                {
                    self.set_backup(c, s, role_backup, reason);
                }
            }
            Mode::CrossLayer | Mode::CrossLayerCapacity | Mode::CrossLayerDuplicate => {
                if good {
                    self.withhold(iface, false);
                    // RSSI > T: establish S, or clear its backup flag.
                    if existing.is_empty() {
                        self.create(c, iface, false, reason);
                    }
                    for s in existing.iter().filter(|s| s.backup) {
                        self.set_backup(c, s, false, reason);
                    }
                } else if self.keep_fading(iface) {
                    // Capacity-aware: the other links cannot take the stream; S stays active
                    // (and becomes active again if it was demoted) until it fails.
                    self.withhold(iface, true);
                    for s in existing.iter().filter(|s| s.backup && s.id.is_some()) {
                        self.set_backup(c, s, false, Reason::Capacity);
                    }
                } else {
                    self.withhold(iface, false);
                    // RSSI ≤ T: active S becomes backup; S not active (not established) goes.
                    for s in existing {
                        match s.id {
                            Some(_) if !s.backup => self.set_backup(c, &s, true, reason),
                            Some(_) => {}
                            None => self.remove(c, &s, reason),
                        }
                    }
                }
            }
            Mode::CrossLayerBackup
            | Mode::CrossLayerBackupCapacity
            | Mode::CrossLayerBackupDuplicate => {
                if role_backup {
                    // Backup interfaces follow the primaries (see `handover`).
                    let any_primary_good = self.primaries().any(|p| self.good(p));
                    if !any_primary_good {
                        self.activate(c, iface, Reason::Handover);
                    } else if existing.is_empty() {
                        // A standby subflow, ready before it is needed.
                        self.create(c, iface, true, reason);
                    }
                } else {
                    self.handover(c, iface, good, reason);
                }
            }
        }
    }

    fn primaries(&self) -> impl Iterator<Item = IfaceId> + '_ {
        self.ifaces
            .iter()
            .filter(|(_, i)| !i.cfg.backup && i.cfg.threshold_dbm.is_some())
            .map(|(&id, _)| id)
    }

    fn backups(&self) -> Vec<IfaceId> {
        self.ifaces
            .iter()
            .filter(|(_, i)| i.cfg.backup)
            .map(|(&id, _)| id)
            .collect()
    }

    /// Seed 000 §V.A.2: when the primary weakens, first make the backup active (creating its
    /// subflow if missing), then flag the primary backup (or remove it); the reverse when the
    /// primary recovers.
    fn handover(&mut self, c: ConnId, primary: IfaceId, good: bool, reason: Reason) {
        let subs: Vec<Subflow> = self.conns[&c]
            .subflows
            .iter()
            .filter(|s| s.iface == primary)
            .cloned()
            .collect();
        let backups = self.backups();
        if good {
            self.withhold(primary, false);
            self.activate(c, primary, reason);
            let primary_carries = self.conns[&c]
                .subflows
                .iter()
                .any(|s| s.iface == primary && s.id.is_some() && !s.backup);
            let backups_active = self.conns[&c]
                .subflows
                .iter()
                .any(|s| backups.contains(&s.iface) && !s.backup && s.id.is_some());
            let ready = !backups_active || self.carries_demand_again(primary);
            // Only a connection with a backup to hold decides the flag (the evidence is the
            // interface's, the same for all): one with nothing to hold must not clear another's.
            if backups_active && let Some(i) = self.ifaces.get_mut(&primary) {
                if !ready && !i.holding_backups {
                    self.stats.backups_held += 1;
                }
                i.holding_backups = !ready;
            }
            if primary_carries && ready && self.primaries().all(|p| self.good(p)) {
                for b in backups {
                    let bs: Vec<Subflow> = self.conns[&c]
                        .subflows
                        .iter()
                        .filter(|s| s.iface == b && !s.backup && s.id.is_some())
                        .cloned()
                        .collect();
                    for s in bs {
                        self.set_backup(c, &s, true, Reason::Handover);
                    }
                }
            }
        } else {
            if let Some(i) = self.ifaces.get_mut(&primary) {
                i.holding_backups = false;
            }
            for b in backups {
                if self.available(b) {
                    self.activate(c, b, Reason::Handover);
                }
            }
            if self.keep_fading(primary) {
                // Capacity-aware: the backups carry beside the primary until they have shown
                // they can carry the demand alone.
                self.withhold(primary, true);
                for s in subs.iter().filter(|s| s.backup && s.id.is_some()) {
                    self.set_backup(c, s, false, Reason::Capacity);
                }
                return;
            }
            self.withhold(primary, false);
            for s in subs {
                match s.id {
                    Some(_) if self.cfg.remove_weak => self.remove(c, &s, reason),
                    Some(_) if !s.backup => self.set_backup(c, &s, true, reason),
                    Some(_) => {}
                    None => self.remove(c, &s, reason),
                }
            }
        }
    }

    /// Makes the interface carry data: creates its subflow, or clears its backup flag.
    fn activate(&mut self, c: ConnId, iface: IfaceId, reason: Reason) {
        let subs: Vec<Subflow> = self.conns[&c]
            .subflows
            .iter()
            .filter(|s| s.iface == iface)
            .cloned()
            .collect();
        if subs.is_empty() {
            self.create(c, iface, false, reason);
        }
        for s in subs.iter().filter(|s| s.backup && s.id.is_some()) {
            self.set_backup(c, s, false, reason);
        }
    }

    fn create(&mut self, c: ConnId, iface: IfaceId, backup: bool, reason: Reason) {
        let Some(&(id, addr)) = self.ifaces.get(&iface).and_then(|i| i.locals.first()) else {
            return;
        };
        let local = Endpoint {
            id,
            addr: addr.map(|ip| std::net::SocketAddr::new(ip, 0)),
        };
        let conn = &self.conns[&c];
        let Some(remote) = self.remote_for(conn, &local) else {
            return;
        };
        self.request(c, iface, local, remote, backup, reason);
    }

    /// Records a subflow request (no id until it is established) and asks the runtime for it.
    fn request(
        &mut self,
        c: ConnId,
        iface: IfaceId,
        local: Endpoint,
        remote: Endpoint,
        backup: bool,
        reason: Reason,
    ) {
        self.conns
            .get_mut(&c)
            .expect("known")
            .subflows
            .push(Subflow {
                id: None,
                iface,
                local,
                backup,
                duplicate: false,
                watch: false,
            });
        self.push(
            iface,
            Command::CreateSubflow {
                conn: c,
                iface,
                local,
                remote,
                backup,
            },
            reason,
        );
    }

    /// A new initial path for a connection not established yet whose paths all went
    /// ([`Manager::on_subflow_closed`]): from `preferred` if it is usable, else from the first
    /// usable interface that is not a backup, else from a usable backup, to the peer's
    /// primary address (the one the first path went to). With no usable interface it asks
    /// again after the next backoff.
    fn open_initial(&mut self, c: ConnId, preferred: IfaceId) {
        let Some(conn) = self.conns.get(&c) else {
            return;
        };
        if !conn.subflows.is_empty() {
            return;
        }
        let remote = conn.remote;
        let usable: Vec<(IfaceId, bool)> = self
            .ifaces
            .iter()
            .filter(|&(&id, _)| self.available(id))
            .map(|(&id, i)| (id, i.cfg.backup))
            .collect();
        let pick = usable
            .iter()
            .find(|&&(id, _)| id == preferred)
            .or_else(|| usable.iter().find(|&&(_, backup)| !backup))
            .or_else(|| usable.first())
            .copied();
        let Some((iface, backup)) = pick else {
            let now = self.now;
            let r = self.reopen.entry((c, preferred)).or_insert(Reopen {
                at: None,
                delay: REOPEN_MIN,
            });
            r.at = Some(now + r.delay);
            r.delay = (r.delay * 2).min(REOPEN_MAX);
            return;
        };
        let Some(&(id, addr)) = self.ifaces.get(&iface).and_then(|i| i.locals.first()) else {
            return;
        };
        let local = Endpoint {
            id,
            addr: addr.map(|ip| std::net::SocketAddr::new(ip, 0)),
        };
        self.stats.initial_reopened += 1;
        self.request(c, iface, local, remote, backup, Reason::Reopen);
    }

    /// Happy Eyeballs for the first path ([`Config::race`]): a connection this side opened and
    /// not established yet opens a first path over one more usable interface that has none
    /// (interfaces that are not backups first, in interface order), to the peer's primary
    /// address; the next race follows after the same delay, until the connection is
    /// established. The paths that lose stay and become the connection's subflows when they
    /// answer, as the policy's own would.
    fn race(&mut self, c: ConnId) {
        let now = self.now;
        let delay = self.cfg.race;
        let Some(conn) = self.conns.get_mut(&c) else {
            return;
        };
        if conn.established || delay.is_none() {
            conn.race_at = None;
            return;
        }
        conn.race_at = delay.map(|d| now + d);
        let busy: Vec<IfaceId> = conn
            .subflows
            .iter()
            .map(|s| s.iface)
            .chain(conn.first.map(|f| f.0))
            .collect();
        let remote = conn.remote;
        let pick = self
            .ifaces
            .iter()
            .filter(|&(&id, _)| self.available(id) && !busy.contains(&id))
            .min_by_key(|&(_, i)| i.cfg.backup)
            .and_then(|(&id, i)| i.locals.first().map(|&l| (id, i.cfg.backup, l)));
        let Some((iface, backup, (addr_id, addr))) = pick else {
            return;
        };
        let local = Endpoint {
            id: addr_id,
            addr: addr.map(|ip| std::net::SocketAddr::new(ip, 0)),
        };
        self.stats.initial_raced += 1;
        self.request(c, iface, local, remote, backup, Reason::Race);
    }

    fn remove(&mut self, c: ConnId, s: &Subflow, reason: Reason) {
        let conn = self.conns.get_mut(&c).expect("known");
        conn.subflows
            .retain(|x| !(x.iface == s.iface && x.id == s.id && x.local == s.local));
        if let Some(id) = s.id {
            self.push(
                s.iface,
                Command::RemoveSubflow {
                    conn: c,
                    subflow: id,
                },
                reason,
            );
        }
    }

    fn set_backup(&mut self, c: ConnId, s: &Subflow, backup: bool, reason: Reason) {
        let Some(id) = s.id else { return };
        if let Some(x) = self
            .conns
            .get_mut(&c)
            .and_then(|conn| conn.subflows.iter_mut().find(|x| x.id == Some(id)))
        {
            if x.backup == backup {
                return;
            }
            x.backup = backup;
        }
        self.push(
            s.iface,
            Command::SetBackup {
                conn: c,
                subflow: id,
                backup,
            },
            reason,
        );
        // The capacity-aware modes demoting a fading link onto links seen carrying the demand:
        // what it has in flight goes over them at once (not onto links that cannot carry it,
        // where the copies would only add to their backlog).
        let fading = self
            .ifaces
            .get(&s.iface)
            .is_some_and(|i| i.cfg.threshold_dbm.is_some());
        if backup && fading && self.cfg.mode.capacity_aware() && self.others_can_carry(s.iface) {
            self.push(
                s.iface,
                Command::Reinject {
                    conn: c,
                    subflow: id,
                },
                reason,
            );
        }
    }

    /// Re-runs the policy for one interface on every connection.
    fn apply_iface(&mut self, iface: IfaceId, reason: Reason) {
        // Every change that can turn an interface good ends here: date the turn.
        let good = self.good(iface);
        let now = self.now;
        if let Some(i) = self.ifaces.get_mut(&iface) {
            if good && !i.was_good {
                i.good_since = Some(now);
            }
            i.was_good = good;
        }
        let conns: Vec<ConnId> = self.conns.keys().copied().collect();
        for c in conns {
            self.apply(c, iface, reason);
            // In backup mode a primary's change also moves the backups.
            if self.cfg.mode.base() == Mode::CrossLayerBackup
                && self.ifaces.get(&iface).is_some_and(|i| !i.cfg.backup)
            {
                for b in self.backups() {
                    if self.available(b) && !self.primaries().any(|p| self.good(p)) {
                        self.activate(c, b, Reason::Handover);
                    }
                }
            }
        }
    }

    fn apply_all(&mut self, reason: Reason) {
        let ifaces: Vec<IfaceId> = self.ifaces.keys().copied().collect();
        // Backups first in backup mode: they must be ready before primaries step down.
        let (b, p): (Vec<_>, Vec<_>) = ifaces.into_iter().partition(|i| self.ifaces[i].cfg.backup);
        for i in b.into_iter().chain(p) {
            self.apply_iface(i, reason);
        }
    }

    fn on_signal(&mut self, iface: IfaceId, rssi: f64) {
        if !rssi.is_finite() || !(-200.0..=30.0).contains(&rssi) {
            self.stats.bad_samples += 1;
            return;
        }
        let Some(i) = self.ifaces.get_mut(&iface) else {
            self.stats.unknown_iface_samples += 1;
            return;
        };
        self.stats.signal_samples += 1;
        i.samples += 1;
        // Seed 000 Algorithm 1: RSSI(t) = (1 − α)·RSSI(t − 1) + α·sample.
        let a = i.cfg.alpha;
        let smoothed = match i.rssi {
            Some(prev) => (1.0 - a) * prev + a * rssi,
            None => rssi,
        };
        i.rssi = Some(smoothed);
        let was_good = self.good(iface);
        let i = self.ifaces.get_mut(&iface).expect("present");
        if let Some(t) = i.cfg.threshold_dbm {
            // Hysteresis: a bad interface must climb above T + h to be good again.
            i.signal_good = if i.signal_good {
                smoothed > t
            } else {
                smoothed > t + i.cfg.hysteresis_db
            };
        }
        if self.good(iface) != was_good || self.cfg.mode.uses_signal() {
            self.apply_iface(iface, Reason::Signal);
        }
    }

    /// A subflow closed or a request failed: forget it, and evaluate its interface again after
    /// the backoff, so a connection never stays without the subflows its policy wants (a path
    /// declared broken, closed by the peer, or refused while the link was away). The backoff
    /// keeps a backend whose subflows fail at once (no route yet) from spinning.
    fn on_subflow_closed(
        &mut self,
        conn: ConnId,
        subflow: Option<SubflowId>,
        iface: Option<IfaceId>,
    ) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if c.initiator && !c.established {
            // The connection's initial path went before the connection was established (its
            // address removed or its path declared broken during the handshake, or a new
            // initial path refused): nothing else reaches the peer, and nothing would open
            // another path, since subflows join an established connection. A new initial
            // path goes out after the reopen backoff, from this interface if it is usable
            // then and otherwise from another ([`Manager::open_initial`]).
            let before = c.subflows.len();
            c.subflows.retain(|s| {
                let closed = (subflow.is_some() && s.id == subflow)
                    || (s.id.is_none() && Some(s.iface) == iface);
                !closed
            });
            let Some(iface) = iface else { return };
            if c.subflows.len() == before && c.first.is_some_and(|f| f.0 == iface) {
                c.first = None;
            }
            if c.subflows.is_empty() && c.first.is_none() {
                let now = self.now;
                // One backoff for the connection, whichever interface the last try used.
                let delay = self
                    .reopen
                    .iter()
                    .filter(|((x, _), _)| *x == conn)
                    .map(|(_, r)| r.delay)
                    .max()
                    .unwrap_or(REOPEN_MIN);
                let r = self
                    .reopen
                    .entry((conn, iface))
                    .or_insert(Reopen { at: None, delay });
                r.delay = r.delay.max(delay);
                if r.at.is_none() {
                    r.at = Some(now + r.delay);
                    r.delay = (r.delay * 2).min(REOPEN_MAX);
                }
            }
            return;
        }
        let known = subflow.and_then(|id| c.subflows.iter().position(|s| s.id == Some(id)));
        // The first path, still opening when the connection was established over a raced
        // one, closed: its pending entry goes as a failed request's would.
        let first_closed = known.is_none()
            && subflow.is_some()
            && iface.is_some()
            && c.first.map(|f| f.0) == iface;
        if first_closed {
            c.first = None;
        }
        let iface = match known {
            Some(i) => Some(c.subflows.remove(i).iface),
            // A subflow the policy removed itself (its close confirms the removal): nothing
            // to forget, nothing to reopen.
            None if subflow.is_some() && !first_closed => return,
            None => {
                // A request that never got an id: forget one pending request of the interface.
                if let Some(i) = iface
                    && let Some(p) = c
                        .subflows
                        .iter()
                        .position(|s| s.id.is_none() && s.iface == i)
                {
                    c.subflows.remove(p);
                }
                iface
            }
        };
        let Some(iface) = iface else { return };
        if !c.initiator || !c.established {
            return;
        }
        let now = self.now;
        let r = self.reopen.entry((conn, iface)).or_insert(Reopen {
            at: None,
            delay: REOPEN_MIN,
        });
        if r.at.is_none() {
            r.at = Some(now + r.delay);
            r.delay = (r.delay * 2).min(REOPEN_MAX);
        }
    }

    fn predict(&mut self, now: Instant) {
        let Some(h) = self.cfg.hmm.clone() else {
            return;
        };
        let ids: Vec<IfaceId> = self.ifaces.keys().copied().collect();
        for id in ids {
            let i = self.ifaces.get_mut(&id).expect("present");
            let obs = match (i.quality, i.rssi, i.cfg.threshold_dbm) {
                (Some(q), _, _) => hmm::observe_quality(q),
                (None, Some(r), Some(t)) => {
                    hmm::observe_rss(r, t, h.good_margin_db, h.bad_margin_db)
                }
                _ => continue,
            };
            i.obs.push_back(obs);
            while i.obs.len() > h.window {
                i.obs.pop_front();
            }
            let obs: Vec<Obs> = i.obs.iter().copied().collect();
            let before = self.good(id);
            let i = self.ifaces.get_mut(&id).expect("present");
            i.predicted = h.model.predict(&obs);
            if self.good(id) != before {
                self.apply_iface(id, Reason::Prediction);
            }
        }
        self.next_prediction = Some(now + h.interval);
    }
}

impl Manager {
    fn on_event(&mut self, now: Instant, event: &Event) {
        self.now = self.now.max(now);
        if self.capacity.is_some() && self.next_traffic.is_none() {
            self.next_traffic = Some(now);
        }
        if self.cfg.hmm.is_some() && self.next_prediction.is_none() {
            self.next_prediction = Some(
                now + self
                    .cfg
                    .hmm
                    .as_ref()
                    .map_or_else(Default::default, |h| h.interval),
            );
        }
        match event {
            Event::ConnectionCreated {
                conn,
                remote,
                initiator,
                local,
                iface,
            } => {
                let first = iface
                    .or_else(|| self.iface_of(local.id))
                    .map(|i| (i, *local));
                let race_at = self.cfg.race.filter(|_| *initiator).map(|d| now + d);
                self.conns.entry(*conn).or_insert(Conn {
                    initiator: *initiator,
                    established: false,
                    remote: *remote,
                    remotes: Vec::new(),
                    subflows: Vec::new(),
                    // Tracked for the race only: without it the first path is the
                    // connection's until it closes, as before.
                    first: first.filter(|_| *initiator && self.cfg.race.is_some()),
                    race_at,
                });
            }
            Event::ConnectionEstablished {
                conn,
                subflow,
                local,
                remote,
                iface,
            } => {
                let iface = iface.or_else(|| self.iface_of(local.id));
                let c = self.conns.entry(*conn).or_insert(Conn {
                    initiator: true,
                    established: false,
                    remote: *remote,
                    remotes: Vec::new(),
                    subflows: Vec::new(),
                    first: None,
                    race_at: None,
                });
                c.established = true;
                c.race_at = None;
                if subflow.is_some() && iface.is_some() && c.first.map(|f| f.0) == iface {
                    c.first = None;
                }
                // A first path still opening (the connection was established over a raced
                // one) becomes a pending subflow of its interface: the policy does not ask
                // for another there, and it takes its place once it answers.
                if let Some((fi, fl)) = c.first
                    && !c.subflows.iter().any(|s| s.iface == fi)
                {
                    let backup = self.ifaces.get(&fi).is_some_and(|i| i.cfg.backup);
                    c.subflows.push(Subflow {
                        id: None,
                        iface: fi,
                        local: fl,
                        backup,
                        duplicate: false,
                        watch: false,
                    });
                }
                // The backoff of its initial paths, if one failed, is over.
                self.reopen
                    .retain(|(x, _), r| *x != *conn || r.at.is_some());
                // The initial subflow.
                if let (Some(id), Some(iface)) = (subflow, iface)
                    && !c.subflows.iter().any(|s| s.id == Some(*id))
                {
                    c.subflows.push(Subflow {
                        id: Some(*id),
                        iface,
                        local: *local,
                        backup: false,
                        duplicate: false,
                        watch: false,
                    });
                }
                if self.cfg.announce {
                    let locals: Vec<Endpoint> = self
                        .ifaces
                        .values()
                        .filter(|i| i.up)
                        .flat_map(|i| i.locals.iter())
                        .map(|&(id, addr)| Endpoint {
                            id,
                            addr: addr.map(|ip| std::net::SocketAddr::new(ip, 0)),
                        })
                        .collect();
                    for l in locals {
                        self.commands.push_back(Command::AnnounceAddr {
                            conn: *conn,
                            local: l,
                        });
                    }
                }
                self.apply_all(Reason::Stock);
            }
            Event::ConnectionClosed { conn } => {
                self.conns.remove(conn);
                self.reopen.retain(|(c, _), _| c != conn);
            }
            Event::AddrAnnounced { conn, remote } => {
                if let Some(c) = self.conns.get_mut(conn) {
                    c.remotes.retain(|e| e.id != remote.id);
                    c.remotes.push(*remote);
                    // A new remote address may be the one an interface was waiting for
                    // (same-subnet pairing).
                    let ifaces: Vec<IfaceId> = self.ifaces.keys().copied().collect();
                    for i in ifaces {
                        self.apply(*conn, i, Reason::Stock);
                    }
                }
            }
            Event::AddrRemoved { conn, id } => {
                if let Some(c) = self.conns.get_mut(conn) {
                    c.remotes.retain(|e| e.id != *id);
                }
            }
            Event::SubflowEstablished {
                conn,
                subflow,
                iface,
                local,
                backup,
                ..
            } => {
                let iface = iface.or_else(|| self.iface_of(local.id));
                let Some(c) = self.conns.get_mut(conn) else {
                    return;
                };
                let Some(iface) = iface else { return };
                if c.first.is_some_and(|f| f.0 == iface) {
                    c.first = None;
                }
                // A requested subflow now established, or one the peer (or the kernel) made.
                match c
                    .subflows
                    .iter_mut()
                    .find(|s| s.id.is_none() && s.iface == iface)
                {
                    Some(s) => {
                        s.id = Some(*subflow);
                        s.backup = *backup;
                    }
                    None => c.subflows.push(Subflow {
                        id: Some(*subflow),
                        iface,
                        local: *local,
                        backup: *backup,
                        duplicate: false,
                        watch: false,
                    }),
                }
                // The interface works: the next close waits the shortest time again.
                self.reopen.remove(&(*conn, iface));
                // The interface may have changed since the request.
                self.apply(*conn, iface, Reason::Signal);
            }
            Event::SubflowClosed {
                conn,
                subflow,
                iface,
            } => self.on_subflow_closed(*conn, *subflow, *iface),
            Event::SubflowPriority {
                conn,
                subflow,
                backup,
            } => {
                if let Some(s) = self
                    .conns
                    .get_mut(conn)
                    .and_then(|c| c.subflows.iter_mut().find(|s| s.id == Some(*subflow)))
                {
                    s.backup = *backup;
                }
            }
            Event::IfaceNew { iface, name, up } => {
                let cfg = self.iface_cfg(name);
                let signal_good = cfg.threshold_dbm.is_none();
                self.ifaces.insert(
                    *iface,
                    Iface {
                        name: name.clone(),
                        cfg,
                        up: *up,
                        locals: Vec::new(),
                        rssi: None,
                        samples: 0,
                        signal_good,
                        quality: None,
                        obs: VecDeque::new(),
                        predicted: None,
                        flips: 0,
                        withheld: false,
                        good_since: None,
                        was_good: false,
                        holding_backups: false,
                    },
                );
            }
            Event::IfaceUpdated { iface, up } => {
                if let Some(i) = self.ifaces.get_mut(iface) {
                    i.up = *up;
                }
                self.apply_iface(*iface, Reason::Interface);
            }
            Event::IfaceRemoved { iface } => {
                if let Some(i) = self.ifaces.get_mut(iface) {
                    i.up = false;
                }
                self.apply_iface(*iface, Reason::Interface);
                self.ifaces.remove(iface);
            }
            Event::LocalAddrNew { iface, id, addr } => {
                if let Some(i) = self.ifaces.get_mut(iface) {
                    i.locals.retain(|(x, _)| x != id);
                    i.locals.push((*id, *addr));
                }
                self.apply_iface(*iface, Reason::Interface);
            }
            Event::LocalAddrRemoved { iface, id } => {
                if let Some(i) = self.ifaces.get_mut(iface) {
                    i.locals.retain(|(x, _)| x != id);
                }
                // Subflows on the removed address go; the interface may keep others.
                let conns: Vec<ConnId> = self.conns.keys().copied().collect();
                for c in conns {
                    let gone: Vec<Subflow> = self.conns[&c]
                        .subflows
                        .iter()
                        .filter(|s| s.iface == *iface && s.local.id == *id)
                        .cloned()
                        .collect();
                    for s in gone {
                        self.remove(c, &s, Reason::Interface);
                    }
                }
                self.apply_iface(*iface, Reason::Interface);
            }
            Event::Signal { iface, rssi_dbm } => self.on_signal(*iface, *rssi_dbm),
            Event::Quality { iface, if_quality } => {
                if let Some(i) = self.ifaces.get_mut(iface) {
                    i.quality = Some((*if_quality).min(10_000));
                }
            }
            Event::Traffic { bytes } => {
                self.traffic_due = false;
                if let Some(e) = &mut self.capacity
                    && e.sample(now, bytes)
                {
                    self.stats.traffic_samples += 1;
                    // What the links can carry changed: the fading ones are weighed again.
                    // And primaries holding their backups may release them.
                    let fading: Vec<IfaceId> = self
                        .ifaces
                        .iter()
                        .filter(|&(&i, f)| {
                            self.available(i) && (!self.good(i) || f.holding_backups)
                        })
                        .map(|(&i, _)| i)
                        .collect();
                    for i in fading {
                        self.apply_iface(i, Reason::Capacity);
                    }
                }
            }
        }
    }
}

impl PathManager for Manager {
    fn handle_event(&mut self, now: Instant, event: &Event) {
        self.on_event(now, event);
        self.sync_watch();
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.now = self.now.max(now);
        if self.next_prediction.is_some_and(|t| t <= now) {
            self.predict(now);
        }
        if self.next_traffic.is_some_and(|t| t <= now) {
            self.traffic_due = true;
            self.next_traffic = Some(now + self.cfg.capacity.sample);
        }
        let due: Vec<(ConnId, IfaceId)> = self
            .reopen
            .iter()
            .filter(|(_, r)| r.at.is_some_and(|t| t <= now))
            .map(|(&k, _)| k)
            .collect();
        let racing: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.race_at.is_some_and(|t| t <= now))
            .map(|(&id, _)| id)
            .collect();
        for c in racing {
            self.race(c);
        }
        for (c, iface) in due {
            if let Some(r) = self.reopen.get_mut(&(c, iface)) {
                r.at = None;
            }
            self.stats.reopen_checks += 1;
            if self
                .conns
                .get(&c)
                .is_some_and(|x| x.initiator && !x.established)
            {
                self.open_initial(c, iface);
            } else {
                self.apply(c, iface, Reason::Reopen);
            }
        }
        self.sync_watch();
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let reopen = self.reopen.values().filter_map(|r| r.at).min();
        let race = self.conns.values().filter_map(|c| c.race_at).min();
        [self.next_prediction, reopen, self.next_traffic, race]
            .into_iter()
            .flatten()
            .min()
    }

    fn wants_traffic(&self) -> bool {
        self.traffic_due
    }

    fn poll_command(&mut self) -> Option<Command> {
        self.commands.pop_front()
    }
}

#[cfg(test)]
mod tests;
