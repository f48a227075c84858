//! `braid pm --config FILE`: the TOML configuration of the path-manager daemon.
//!
//! ```toml
//! mode = "cross"              # fullmesh | backup | cross | cross-backup | cross-cap | cross-backup-cap
//!                             # | cross-dup | cross-backup-dup (on the kernel: as the -cap modes,
//!                             #   the copies skipped and counted: `duplicates_skipped`)
//! remove_weak = false         # cross-backup: remove the weak primary's subflow
//! same_subnet = false         # seed 004: pair local and remote addresses of the same /24
//! announce = false            # announce local addresses when a connection is established
//! control = "/run/braid/pm.sock"
//!
//! [signal]
//! socket = "/run/braid/signal.sock"   # JSON lines {"iface":"wlan0","rssi_dbm":-71.5}
//! # csv = "samples.csv"               # or a replay: time_s,iface,rssi_dbm
//! # driving = { file = "…/A_2019.12.01_07.59.52.csv", iface = "wlan0", column = "RSRP" }
//! nl80211 = true                      # station signal of Wi-Fi interfaces, where any exist
//! nl80211_interval_ms = 100
//!
//! [kernel]                    # how subflows the policy removes are taken out of the kernel
//! drain = true                # flag backup at once, destroy once the connection has drained
//! drain_max_unacked = 32768   # … i.e. holds at most this many bytes not DATA_ACKed
//! drain_check_ms = 20         # how often a draining connection is looked at (sock_diag)
//! bind_to_device = true       # bind each subflow to its interface; false: its packets follow
//!                             # the routing tables both ways (a multi-hop network whose
//!                             # replies may come back over another interface: `braid route`)
//! resend_prio = true          # send a subflow's MP_PRIO again while the peer acts as if it
//!                             # missed it (it crossed the fading link; see `prio.rs`)
//! reinject = true             # capacity-aware modes: close a demoted fading link's subflow at
//!                             # both ends, so both ends re-send its data over the others at once
//!
//! [hmm]                       # optional: seed 004 prediction
//! interval_ms = 1000
//! window = 5
//! good_margin_db = 8.0        # smoothed RSS ≥ T + this: a "good" observation
//! bad_margin_db = 3.0         # ≤ T + this: "bad"; between: "moderate"
//!
//! [capacity]                  # optional: the capacity-aware modes' estimate (these defaults)
//! sample_ms = 250             # how often the interfaces' byte counters are read
//! demand_window_ms = 40000    # the demand: the median delivery rate over this window
//! horizon_ms = 120000         # what a link carried is forgotten after this long
//! headroom = 0.9              # the others can carry the stream at this share of the demand
//! main_share = 0.95           # a link is the main carrier at this share of the bytes
//! floor_db = 2.0              # demoted anyway this far below its threshold
//!
//! [[iface]]
//! name = "wlan0"
//! threshold_dbm = -75.0
//! alpha = 0.5
//! hysteresis_db = 2.0
//! backup = false
//! ```
//!
//! Only the interfaces listed are managed; with no `[[iface]]` every interface but loopback is.

use std::path::{Path, PathBuf};
use std::time::Duration;

use braid_io::signal::Source;
use serde::Deserialize;

/// Where the daemon puts its control socket unless told otherwise.
pub const DEFAULT_CONTROL: &str = "/run/braid/pm.sock";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default = "default_mode")]
    mode: String,
    #[serde(default)]
    remove_weak: bool,
    #[serde(default)]
    same_subnet: bool,
    #[serde(default)]
    announce: bool,
    #[serde(default)]
    control: Option<PathBuf>,
    #[serde(default)]
    signal: SignalFile,
    #[serde(default)]
    kernel: KernelFile,
    #[serde(default)]
    hmm: Option<braid_pm::HmmSettings>,
    #[serde(default)]
    capacity: Option<braid_pm::CapacitySettings>,
    #[serde(default)]
    iface: Vec<IfaceFile>,
}

fn default_mode() -> String {
    "fullmesh".into()
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SignalFile {
    socket: Option<PathBuf>,
    csv: Option<PathBuf>,
    driving: Option<DrivingFile>,
    #[serde(default)]
    nl80211: bool,
    nl80211_interval_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DrivingFile {
    file: PathBuf,
    iface: String,
    #[serde(default = "default_column")]
    column: String,
}

fn default_column() -> String {
    "RSRP".into()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KernelFile {
    #[serde(default = "yes")]
    drain: bool,
    drain_max_unacked: Option<u64>,
    drain_check_ms: Option<u64>,
    #[serde(default = "yes")]
    bind_to_device: bool,
    #[serde(default = "yes")]
    resend_prio: bool,
    #[serde(default = "yes")]
    reinject: bool,
}

impl Default for KernelFile {
    fn default() -> Self {
        KernelFile {
            drain: true,
            drain_max_unacked: None,
            drain_check_ms: None,
            bind_to_device: true,
            resend_prio: true,
            reinject: true,
        }
    }
}

fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct IfaceFile {
    name: String,
    threshold_dbm: Option<f64>,
    alpha: Option<f64>,
    #[serde(default)]
    hysteresis_db: f64,
    #[serde(default)]
    backup: bool,
}

/// The daemon's settings.
#[derive(Debug, Clone)]
pub struct PmSettings {
    pub policy: braid_pm::Config,
    pub control: PathBuf,
    pub signals: Vec<Source>,
    /// Poll nl80211 station signal at this interval.
    pub nl80211: Option<Duration>,
    /// Interfaces to manage (empty: all but loopback).
    pub managed: Vec<String>,
    /// A subflow the policy removes is destroyed once its connection holds at most this many
    /// bytes not acknowledged (`None`: at once). See `drain.rs`.
    pub drain_max_unacked: Option<u64>,
    /// How often draining connections are looked at.
    pub drain_check: Duration,
    /// Subflows are bound to their interface (the kernel's `SO_BINDTODEVICE`), so they leave
    /// by it whatever the routing tables say, and take packets only from it. Off: the routing
    /// tables decide both ways, as a multi-hop network needs, where a subflow's replies may
    /// arrive on another interface than it left by (and a bound socket would drop them).
    pub bind_to_device: bool,
    /// A subflow whose flag changed gets it (MP_PRIO) again while the peer acts as if it did
    /// not hear it: flagged backup and still receiving, or made active and receiving nothing
    /// while the connection's other subflows receive. See `prio.rs`.
    pub resend_prio: bool,
    /// The capacity-aware modes' requests to send a demoted fading link's data in flight over
    /// the others are done by closing its subflow at both ends (off: skipped and counted). See
    /// `Bridge::reinject`.
    pub reinject: bool,
}

/// Default of `kernel.drain_max_unacked`: re-sending 32 KB costs 13 ms at 20 Mbit/s.
pub const DRAIN_MAX_UNACKED: u64 = 32 * 1024;

impl Default for PmSettings {
    fn default() -> Self {
        PmSettings {
            policy: braid_pm::Config::default(),
            control: PathBuf::from(DEFAULT_CONTROL),
            signals: Vec::new(),
            nl80211: None,
            managed: Vec::new(),
            drain_max_unacked: Some(DRAIN_MAX_UNACKED),
            drain_check: Duration::from_millis(20),
            bind_to_device: true,
            resend_prio: true,
            reinject: true,
        }
    }
}

/// Reads and checks a configuration file; the error is one line naming the file and the key.
pub fn load(path: &Path) -> Result<PmSettings, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse(&text, path.parent().unwrap_or(Path::new(".")))
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// Parses a configuration; relative file names are taken from `base`.
pub fn parse(text: &str, base: &Path) -> Result<PmSettings, String> {
    let f: File = crate::toml_file::parse(text)?;
    let mode = braid_pm::Mode::from_name(&f.mode).ok_or_else(|| {
        format!(
            "key `mode`: unknown mode `{}`; allowed: {}",
            f.mode,
            braid_pm::Mode::NAMES.join(", ")
        )
    })?;
    let mut ifaces = Vec::new();
    for (n, i) in f.iface.iter().enumerate() {
        if i.name.is_empty() || i.name.len() > 15 {
            return Err(format!(
                "key `iface[{n}].name`: an interface name has 1 to 15 characters"
            ));
        }
        if f.iface[..n].iter().any(|o| o.name == i.name) {
            return Err(format!(
                "key `iface[{n}].name`: interface `{}` is listed twice",
                i.name
            ));
        }
        let mut c = braid_pm::IfaceConfig::new(&i.name);
        c.threshold_dbm = i.threshold_dbm;
        if let Some(a) = i.alpha {
            c.alpha = a;
        }
        c.hysteresis_db = i.hysteresis_db;
        c.backup = i.backup;
        ifaces.push(c);
    }
    let policy = braid_pm::Config {
        mode,
        ifaces,
        remove_weak: f.remove_weak,
        hmm: f.hmm.as_ref().map(braid_pm::HmmSettings::config),
        capacity: f.capacity.clone().unwrap_or_default().config(),
        same_subnet: f.same_subnet,
        announce: f.announce,
        // The kernel opens a connection's first subflow itself.
        race: None,
    };
    policy.validate()?;
    let abs = |p: &PathBuf| {
        if p.is_absolute() {
            p.clone()
        } else {
            base.join(p)
        }
    };
    let mut signals = Vec::new();
    if let Some(s) = &f.signal.socket {
        signals.push(Source::Socket(s.clone()));
    }
    if let Some(c) = &f.signal.csv {
        let p = abs(c);
        if !p.is_file() {
            return Err(format!("key `signal.csv`: no such file {}", p.display()));
        }
        signals.push(Source::Csv(p));
    }
    if let Some(d) = &f.signal.driving {
        let p = abs(&d.file);
        if !p.is_file() {
            return Err(format!(
                "key `signal.driving.file`: no such file {}",
                p.display()
            ));
        }
        signals.push(Source::Driving {
            file: p,
            iface: d.iface.clone(),
            column: d.column.clone(),
        });
    }
    let nl80211 = match (f.signal.nl80211, f.signal.nl80211_interval_ms) {
        (false, Some(_)) => {
            return Err(
                "key `signal.nl80211_interval_ms`: set `signal.nl80211 = true` to poll Wi-Fi"
                    .into(),
            );
        }
        (false, None) => None,
        (true, Some(0)) => {
            return Err("key `signal.nl80211_interval_ms`: must be at least 1 millisecond".into());
        }
        (true, ms) => Some(Duration::from_millis(ms.unwrap_or(100))),
    };
    if !f.kernel.drain && f.kernel.drain_max_unacked.is_some() {
        return Err(
            "key `kernel.drain_max_unacked`: set `kernel.drain = true` to drain removals".into(),
        );
    }
    let drain_check = match f.kernel.drain_check_ms {
        Some(0) => {
            return Err("key `kernel.drain_check_ms`: must be at least 1 millisecond".into());
        }
        ms => Duration::from_millis(ms.unwrap_or(20)),
    };
    Ok(PmSettings {
        drain_max_unacked: f
            .kernel
            .drain
            .then(|| f.kernel.drain_max_unacked.unwrap_or(DRAIN_MAX_UNACKED)),
        drain_check,
        bind_to_device: f.kernel.bind_to_device,
        resend_prio: f.kernel.resend_prio,
        reinject: f.kernel.reinject,
        managed: policy.ifaces.iter().map(|i| i.name.clone()).collect(),
        policy,
        control: f.control.unwrap_or_else(|| PathBuf::from(DEFAULT_CONTROL)),
        signals,
        nl80211,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<PmSettings, String> {
        parse(s, Path::new("/tmp"))
    }

    #[test]
    fn subflows_are_bound_to_their_interface_unless_told() {
        assert!(p("mode = \"fullmesh\"").unwrap().bind_to_device);
        let s = p("mode = \"fullmesh\"\n[kernel]\nbind_to_device = false").unwrap();
        assert!(!s.bind_to_device);
    }

    #[test]
    fn mp_prio_is_resent_unless_told() {
        assert!(p("mode = \"fullmesh\"").unwrap().resend_prio);
        assert!(!p("[kernel]\nresend_prio = false").unwrap().resend_prio);
        assert!(p("mode = \"fullmesh\"").unwrap().reinject);
        assert!(!p("[kernel]\nreinject = false").unwrap().reinject);
    }

    #[test]
    fn full_example_parses() {
        let s = p(r#"
            mode = "cross"
            same_subnet = true
            control = "/tmp/x.sock"
            [signal]
            socket = "/tmp/sig.sock"
            nl80211 = true
            [hmm]
            interval_ms = 2000
            [capacity]
            sample_ms = 100
            headroom = 1.2
            [[iface]]
            name = "wlan0"
            threshold_dbm = -75.0
            alpha = 0.25
            hysteresis_db = 2.0
            [[iface]]
            name = "wwan0"
            backup = true
        "#)
        .unwrap();
        assert_eq!(s.policy.mode, braid_pm::Mode::CrossLayer);
        assert!(s.policy.same_subnet);
        assert_eq!(s.policy.ifaces[0].alpha, 0.25);
        assert_eq!(s.policy.ifaces[0].threshold_dbm, Some(-75.0));
        assert!(s.policy.ifaces[1].backup);
        assert_eq!(
            s.policy.hmm.as_ref().unwrap().interval,
            Duration::from_secs(2)
        );
        assert_eq!(
            s.policy.capacity,
            braid_pm::CapacityConfig {
                sample: Duration::from_millis(100),
                headroom: 1.2,
                ..braid_pm::CapacityConfig::default()
            }
        );
        assert_eq!(s.signals, vec![Source::Socket("/tmp/sig.sock".into())]);
        assert_eq!(s.nl80211, Some(Duration::from_millis(100)));
        assert_eq!(s.managed, vec!["wlan0", "wwan0"]);
    }

    #[test]
    fn defaults_are_full_mesh_everywhere() {
        let s = p("").unwrap();
        assert_eq!(s.policy.mode, braid_pm::Mode::FullMesh);
        assert!(s.managed.is_empty());
        assert_eq!(s.control, PathBuf::from(DEFAULT_CONTROL));
        assert_eq!(s.drain_max_unacked, Some(DRAIN_MAX_UNACKED));
        let s = p("[kernel]\ndrain = false").unwrap();
        assert_eq!(s.drain_max_unacked, None);
        let s = p("[kernel]\ndrain_max_unacked = 0\ndrain_check_ms = 5").unwrap();
        assert_eq!(s.drain_max_unacked, Some(0));
        assert_eq!(s.drain_check, Duration::from_millis(5));
    }

    #[test]
    fn errors_name_the_key_and_what_is_allowed() {
        let cases = [
            (
                "mode = \"magic\"",
                "key `mode`: unknown mode `magic`; allowed:",
            ),
            ("colour = 1", "unknown field `colour`"),
            (
                "[[iface]]\nname = \"w\"\nalpha = \"x\"",
                "key `iface[0].alpha`",
            ),
            (
                "[[iface]]\nname = \"w\"\nalpha = 2.0",
                "alpha 2 out of range: allowed 0 < alpha ≤ 1",
            ),
            (
                "mode = \"cross\"\n[[iface]]\nname = \"w\"",
                "needs at least one interface with a threshold",
            ),
            (
                "[[iface]]\nname = \"w\"\n[[iface]]\nname = \"w\"",
                "listed twice",
            ),
            (
                "[signal]\ncsv = \"/nonexistent.csv\"",
                "key `signal.csv`: no such file",
            ),
            (
                "[signal]\nnl80211_interval_ms = 5",
                "set `signal.nl80211 = true`",
            ),
            ("[hmm]\nwindow = 0", "hmm window must be within 1..=64"),
            ("[capacity]\nsampel_ms = 100", "unknown field `sampel_ms`"),
            (
                "mode = \"cross-cap\"\n[capacity]\nmain_share = 0.3\n[[iface]]\nname = \"w\"\nthreshold_dbm = -80.0",
                "capacity main_share must be within (0.5, 1]",
            ),
            (
                "[kernel]\ndrain = false\ndrain_max_unacked = 10",
                "set `kernel.drain = true`",
            ),
            ("[kernel]\ndrain_check_ms = 0", "at least 1 millisecond"),
        ];
        for (text, want) in cases {
            let e = p(text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
            assert!(!e.contains('\n'), "one line: {e}");
        }
    }
}
