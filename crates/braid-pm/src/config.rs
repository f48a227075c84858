//! Path-manager configuration.

use std::time::Duration;

use crate::capacity::CapacityConfig;
use crate::hmm::Model;

/// The base policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Stock: a subflow on every interface with an address, at once (SPEC M4 full mesh).
    FullMesh,
    /// Stock backup mode: as full mesh, subflows on `backup` interfaces flagged backup.
    Backup,
    /// Seed 000 Algorithm 1: subflows follow each interface's smoothed signal strength.
    CrossLayer,
    /// Seed 000 §V.A.2: the primary (`primary` interface) hands over to the backup interfaces
    /// when its signal falls below the threshold, and back when it recovers.
    CrossLayerBackup,
    /// `CrossLayer`, capacity-aware: a fading link is demoted only when the links that would
    /// carry its traffic have been seen carrying the demand (`capacity`); otherwise it stays
    /// active until it can no longer carry anything, as in stock MPTCP.
    CrossLayerCapacity,
    /// `CrossLayerBackup`, capacity-aware: the backups are activated when the primary fades,
    /// and the primary is demoted only when they have been seen carrying the demand.
    CrossLayerBackupCapacity,
    /// `CrossLayerCapacity`, and a fading link it demotes keeps carrying a copy of the stream
    /// (`Command::SetDuplicate`) until it recovers or goes: a redundant carrier during the
    /// handover window.
    CrossLayerDuplicate,
    /// `CrossLayerBackupCapacity` with the same redundant carrier.
    CrossLayerBackupDuplicate,
}

impl Mode {
    pub const NAMES: &'static [&'static str] = &[
        "fullmesh",
        "backup",
        "cross",
        "cross-backup",
        "cross-cap",
        "cross-backup-cap",
        "cross-dup",
        "cross-backup-dup",
    ];

    pub fn from_name(s: &str) -> Option<Mode> {
        Some(match s {
            "fullmesh" | "stock" => Mode::FullMesh,
            "backup" => Mode::Backup,
            "cross" | "cross-layer" => Mode::CrossLayer,
            "cross-backup" | "cross-layer-backup" => Mode::CrossLayerBackup,
            "cross-cap" => Mode::CrossLayerCapacity,
            "cross-backup-cap" => Mode::CrossLayerBackupCapacity,
            "cross-dup" => Mode::CrossLayerDuplicate,
            "cross-backup-dup" => Mode::CrossLayerBackupDuplicate,
            _ => return None,
        })
    }

    /// The name `from_name` takes (the first of its spellings).
    pub fn name(self) -> &'static str {
        match self {
            Mode::FullMesh => "fullmesh",
            Mode::Backup => "backup",
            Mode::CrossLayer => "cross",
            Mode::CrossLayerBackup => "cross-backup",
            Mode::CrossLayerCapacity => "cross-cap",
            Mode::CrossLayerBackupCapacity => "cross-backup-cap",
            Mode::CrossLayerDuplicate => "cross-dup",
            Mode::CrossLayerBackupDuplicate => "cross-backup-dup",
        }
    }

    pub fn uses_signal(self) -> bool {
        matches!(self.base(), Mode::CrossLayer | Mode::CrossLayerBackup)
    }

    /// The mode's policy without the capacity check (and without the copies).
    pub fn base(self) -> Mode {
        match self {
            Mode::CrossLayerCapacity | Mode::CrossLayerDuplicate => Mode::CrossLayer,
            Mode::CrossLayerBackupCapacity | Mode::CrossLayerBackupDuplicate => {
                Mode::CrossLayerBackup
            }
            m => m,
        }
    }

    /// Whether the mode weighs what the other links can carry before demoting one.
    pub fn capacity_aware(self) -> bool {
        self != self.base()
    }

    /// Whether a fading link the mode demotes keeps carrying a copy of the stream.
    pub fn duplicates(self) -> bool {
        matches!(
            self,
            Mode::CrossLayerDuplicate | Mode::CrossLayerBackupDuplicate
        )
    }
}

/// Per-interface settings, matched by interface name.
#[derive(Debug, Clone, PartialEq)]
pub struct IfaceConfig {
    pub name: String,
    /// Threshold T of Algorithm 1; `None`: the interface has no signal input and is good
    /// whenever it is up (a cellular modem, a wire).
    pub threshold_dbm: Option<f64>,
    /// Weight of a new sample in RSSI(t) = (1−α)·RSSI(t−1) + α·sample (seed 000 Alg. 1).
    pub alpha: f64,
    /// A bad interface becomes good again only above T + hysteresis (0: Algorithm 1 as is).
    pub hysteresis_db: f64,
    /// Backup role (modes `Backup`, `CrossLayerBackup`).
    pub backup: bool,
}

impl IfaceConfig {
    pub fn new(name: &str) -> Self {
        IfaceConfig {
            name: name.to_string(),
            threshold_dbm: None,
            alpha: 0.5,
            hysteresis_db: 0.0,
            backup: false,
        }
    }
}

/// HMM prediction (seed 004 §III.C).
#[derive(Debug, Clone, PartialEq)]
pub struct HmmConfig {
    pub model: Model,
    /// How often observations are taken and Viterbi runs (1–2 s in seed 004).
    pub interval: Duration,
    /// Observations kept in the sliding window.
    pub window: usize,
    /// Smoothed RSS at least this far above T is a "good" observation ...
    pub good_margin_db: f64,
    /// ... at most this far above T a "bad" one, "moderate" between: the bands sit above the
    /// threshold so that a fading link is seen coming.
    pub bad_margin_db: f64,
}

impl Default for HmmConfig {
    fn default() -> Self {
        HmmConfig {
            model: Model::default(),
            interval: Duration::from_secs(1),
            window: 5,
            good_margin_db: 8.0,
            bad_margin_db: 3.0,
        }
    }
}

/// Shortest race delay for a connection's first path ([`Config::race`]; RFC 8305 allows
/// 10 ms at the least).
pub const RACE_MIN: std::time::Duration = std::time::Duration::from_millis(10);

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub mode: Mode,
    pub ifaces: Vec<IfaceConfig>,
    /// Backup-mode variant: remove the weak primary's subflow instead of only flagging it.
    pub remove_weak: bool,
    pub hmm: Option<HmmConfig>,
    /// Seed 004 §V.A.3: create a subflow only between addresses of the same /24.
    pub same_subnet: bool,
    /// Announce local addresses to the peer when a connection is established (the passive
    /// side's path manager usually does this).
    pub announce: bool,
    /// The capacity estimate of the capacity-aware modes (ignored by the others).
    pub capacity: CapacityConfig,
    /// Happy Eyeballs for the first path (RFC 8305's Connection Attempt Delay): a connection
    /// this side opened and not established this long after it was created opens a first
    /// path over one more interface as well (interfaces that are not backups first), and
    /// another after each further delay, until one answers. `None`: the first path stays on
    /// the interface the runtime chose (braid pm: the kernel makes the first subflow itself).
    pub race: Option<std::time::Duration>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mode: Mode::FullMesh,
            ifaces: Vec::new(),
            remove_weak: false,
            hmm: None,
            same_subnet: false,
            announce: false,
            capacity: CapacityConfig::default(),
            race: None,
        }
    }
}

impl Config {
    /// Checks the settings; the message names the field and what is allowed.
    pub fn validate(&self) -> Result<(), String> {
        for i in &self.ifaces {
            if !(i.alpha > 0.0 && i.alpha <= 1.0) {
                return Err(format!(
                    "interface {}: alpha {} out of range: allowed 0 < alpha ≤ 1",
                    i.name, i.alpha
                ));
            }
            if i.hysteresis_db < 0.0 || !i.hysteresis_db.is_finite() {
                return Err(format!(
                    "interface {}: hysteresis must be zero or positive (dB)",
                    i.name
                ));
            }
            if let Some(t) = i.threshold_dbm
                && !(-150.0..=0.0).contains(&t)
            {
                return Err(format!(
                    "interface {}: threshold {t} dBm out of range: allowed −150..=0",
                    i.name
                ));
            }
        }
        if self.mode.uses_signal() && !self.ifaces.iter().any(|i| i.threshold_dbm.is_some()) {
            return Err("a cross-layer mode needs at least one interface with a threshold".into());
        }
        // Checked in every mode: a value the file gives is wrong whether or not the mode
        // reads it.
        self.capacity.validate()?;
        if let Some(d) = self.race
            && d < RACE_MIN
        {
            return Err(format!(
                "race {d:?} too short: allowed at least {RACE_MIN:?}, or off"
            ));
        }
        if self.mode.base() == Mode::CrossLayerBackup {
            if !self.ifaces.iter().any(|i| i.backup) {
                return Err("mode cross-backup needs an interface with backup = true".into());
            }
            if !self
                .ifaces
                .iter()
                .any(|i| !i.backup && i.threshold_dbm.is_some())
            {
                return Err(
                    "mode cross-backup needs a primary interface (backup = false) with a threshold"
                        .into(),
                );
            }
        }
        if let Some(h) = &self.hmm {
            if h.window == 0 || h.window > 64 {
                return Err("hmm window must be within 1..=64 observations".into());
            }
            if h.interval < std::time::Duration::from_millis(1) {
                return Err("hmm interval must be at least 1 ms".into());
            }
            if h.good_margin_db.partial_cmp(&h.bad_margin_db) != Some(std::cmp::Ordering::Greater) {
                return Err("hmm good_margin_db must exceed bad_margin_db".into());
            }
        }
        Ok(())
    }
}

/// The `[hmm]` table of a daemon's configuration file (braid pm's `pm.toml`, braid tunnel's
/// `[pm.hmm]`): the prediction's settings, each optional (default: [`HmmConfig::default`]).
/// Its presence turns the prediction on. The simulator's `[pm.hmm]` takes the same settings
/// with durations as strings.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HmmSettings {
    pub interval_ms: Option<u64>,
    pub window: Option<usize>,
    pub good_margin_db: Option<f64>,
    pub bad_margin_db: Option<f64>,
}

impl HmmSettings {
    /// The settings over the defaults ([`Config::validate`] checks them).
    pub fn config(&self) -> HmmConfig {
        let d = HmmConfig::default();
        HmmConfig {
            interval: self.interval_ms.map_or(d.interval, Duration::from_millis),
            window: self.window.unwrap_or(d.window),
            good_margin_db: self.good_margin_db.unwrap_or(d.good_margin_db),
            bad_margin_db: self.bad_margin_db.unwrap_or(d.bad_margin_db),
            ..d
        }
    }
}

/// The `[capacity]` table of a daemon's configuration file (braid pm's `pm.toml`, braid
/// tunnel's `[pm.capacity]`): the capacity estimate of the capacity-aware modes, each setting
/// optional (default: [`CapacityConfig::default`]).
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapacitySettings {
    pub sample_ms: Option<u64>,
    pub demand_window_ms: Option<u64>,
    pub horizon_ms: Option<u64>,
    pub headroom: Option<f64>,
    pub main_share: Option<f64>,
    pub floor_db: Option<f64>,
}

impl CapacitySettings {
    /// The settings over the defaults ([`Config::validate`] checks them).
    pub fn config(&self) -> CapacityConfig {
        let d = CapacityConfig::default();
        let ms = |v: Option<u64>, d: Duration| v.map_or(d, Duration::from_millis);
        CapacityConfig {
            sample: ms(self.sample_ms, d.sample),
            demand_window: ms(self.demand_window_ms, d.demand_window),
            horizon: ms(self.horizon_ms, d.horizon),
            headroom: self.headroom.unwrap_or(d.headroom),
            main_share: self.main_share.unwrap_or(d.main_share),
            floor_db: self.floor_db.unwrap_or(d.floor_db),
        }
    }
}
