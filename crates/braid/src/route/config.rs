//! `braid route --config FILE`: the TOML configuration of the routing daemon.
//!
//! ```toml
//! babeld = "/run/babeld.sock"   # babeld's local interface: a socket path, a port, or [::1]:33123
//! policy = "hmm-part"           # full | part | hmm-full | hmm-part (seed 004: mfxm, mpxm, mmfxfm, mmpxm)
//! ifaces = ["e0", "e1", "e2", "e3"]   # the lanes, in App. C order (e0 keeps every next hop)
//! table = 1000                  # lane k's routes go to table table + k
//! rule_priority = 1000          # lane k: `from ADDR` at rule_priority + k, `to SUBNET` at + 100 + k
//! slack = 128                   # next hops whose path costs at most this much more (babeld metric)
//! window = 5                    # HMM observations (one per period) in the Viterbi window
//! period_ms = 2000              # recomputation period (seed 004: 2 s)
//! sample_ms = 500               # how often each neighbour's hello history is observed
//! reach_bits = 16               # the newest hellos of babeld's 16-hello history that count
//! dead_after_ms = 2000          # a neighbour babeld has not reported for this long is gone
//! max_age_ms = 6000             # a neighbour's routes not refreshed for this long are dropped
//! control = "/run/braid/route.sock"
//! metrics = "127.0.0.1:9102"    # Prometheus endpoint (off unless set)
//! ```

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use braid_io::babel::Endpoint;
use braid_pm::IfaceId;
use braid_pm::route::{Policy, RouteConfig};
use serde::Deserialize;

/// Where the daemon puts its control socket unless told otherwise.
pub const DEFAULT_CONTROL: &str = "/run/braid/route.sock";
/// The `rtm_protocol` of the routes and rules `braid route` installs (`ip route show proto
/// 199`): how it finds its own after a crash.
pub const PROTOCOL: u8 = 199;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    babeld: Option<String>,
    policy: Option<String>,
    #[serde(default)]
    ifaces: Vec<String>,
    table: Option<u32>,
    rule_priority: Option<u32>,
    slack: Option<u32>,
    window: Option<usize>,
    period_ms: Option<u64>,
    sample_ms: Option<u64>,
    reach_bits: Option<u32>,
    dead_after_ms: Option<u64>,
    max_age_ms: Option<u64>,
    control: Option<PathBuf>,
    metrics: Option<SocketAddr>,
}

/// The daemon's settings.
#[derive(Debug, Clone)]
pub struct RouteSettings {
    pub babeld: Endpoint,
    pub policy: Policy,
    /// The lanes, in App. C order.
    pub ifaces: Vec<String>,
    pub table: u32,
    pub rule_priority: u32,
    /// The router's settings (`ifaces` are `IfaceId(0..n)`, the lanes' positions).
    pub router: RouteConfig,
    pub sample: Duration,
    pub reach_bits: u32,
    pub control: PathBuf,
    pub metrics: Option<SocketAddr>,
}

/// Command-line values that override the file's.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub babeld: Option<String>,
    pub policy: Option<String>,
    pub ifaces: Vec<String>,
    pub control: Option<PathBuf>,
    pub metrics: Option<SocketAddr>,
}

/// Reads and checks a configuration file (or none: `path` `None`) with the command line's
/// overrides; the error is one line naming the file and the key.
pub fn load(path: Option<&Path>, o: &Overrides) -> Result<RouteSettings, String> {
    let f = match path {
        None => File::default(),
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
            crate::toml_file::parse(&text).map_err(|e| format!("{}: {e}", p.display()))?
        }
    };
    settings(f, o)
}

/// Parses a configuration text (tests).
#[cfg(test)]
fn parse(text: &str, o: &Overrides) -> Result<RouteSettings, String> {
    settings(crate::toml_file::parse(text)?, o)
}

fn settings(f: File, o: &Overrides) -> Result<RouteSettings, String> {
    let babeld = o.babeld.clone().or(f.babeld).ok_or(
        "key `babeld`: where babeld's local interface listens is needed (its `local-path` or `local-port`)",
    )?;
    let babeld: Endpoint = babeld.parse().map_err(|e| format!("key `babeld`: {e}"))?;
    let name = o
        .policy
        .clone()
        .or(f.policy)
        .unwrap_or_else(|| "hmm-part".into());
    let policy = Policy::from_name(&name).ok_or_else(|| {
        format!(
            "key `policy`: unknown policy `{name}`; allowed: {} (or seed 004's mfxm, mpxm, mmfxfm, mmpxm)",
            Policy::NAMES.join(", ")
        )
    })?;
    let ifaces = if o.ifaces.is_empty() {
        f.ifaces
    } else {
        o.ifaces.clone()
    };
    if ifaces.is_empty() {
        return Err(
            "key `ifaces`: list the interfaces babeld runs on, in App. C order (e.g. [\"e0\", \"e1\"])"
                .into(),
        );
    }
    for (n, i) in ifaces.iter().enumerate() {
        if i.is_empty() || i.len() > 15 {
            return Err(format!(
                "key `ifaces[{n}]`: an interface name has 1 to 15 characters"
            ));
        }
        if ifaces[..n].contains(i) {
            return Err(format!("key `ifaces[{n}]`: `{i}` is listed twice"));
        }
    }
    let table = f.table.unwrap_or(1000);
    let lanes = ifaces.len() as u32;
    // Tables 253–255 are the kernel's default, main and local; 0 is unspecified.
    if table == 0
        || table > u32::MAX - lanes
        || (table..table + lanes).any(|t| (253..=255).contains(&t))
    {
        return Err(format!(
            "key `table`: tables {table}..{} would include 0 or the kernel's 253 (default), 254 (main) or 255 (local)",
            table.saturating_add(lanes)
        ));
    }
    let rule_priority = f.rule_priority.unwrap_or(1000);
    // The kernel's own rules: 0 (local), 32766 (main), 32767 (default).
    let last_priority = rule_priority.saturating_add(100 + lanes);
    if rule_priority == 0 || last_priority > 32766 {
        return Err(format!(
            "key `rule_priority`: {rule_priority}..{last_priority} must stay within 1..32765, between the kernel's local (0) and main (32766) rules"
        ));
    }
    let ms = |key: &str, v: Option<u64>, default: u64| -> Result<Duration, String> {
        match v.unwrap_or(default) {
            0 => Err(format!("key `{key}`: must be at least 1 ms")),
            x => Ok(Duration::from_millis(x)),
        }
    };
    let ids: Vec<IfaceId> = (0..lanes).map(IfaceId).collect();
    let mut router = RouteConfig::new(&ids, policy);
    router.slack = f.slack.unwrap_or(128);
    router.window = f.window.unwrap_or(router.window);
    router.period = ms("period_ms", f.period_ms, 2000)?;
    router.dead_after = ms("dead_after_ms", f.dead_after_ms, 2000)?;
    router.max_age = ms("max_age_ms", f.max_age_ms, 6000)?;
    if !(1..=64).contains(&router.window) {
        return Err(format!(
            "key `window`: {} observations; allowed 1..=64",
            router.window
        ));
    }
    router.validate().map_err(|e| e.to_string())?;
    let sample = ms("sample_ms", f.sample_ms, 500)?;
    if sample > router.period {
        return Err(format!(
            "key `sample_ms`: {} ms is longer than the period ({} ms): every period needs a sample",
            sample.as_millis(),
            router.period.as_millis()
        ));
    }
    let reach_bits = f.reach_bits.unwrap_or(16);
    if !(1..=16).contains(&reach_bits) {
        return Err(format!(
            "key `reach_bits`: {reach_bits} is outside 1..=16 (babeld keeps 16 hellos)"
        ));
    }
    Ok(RouteSettings {
        babeld,
        policy,
        ifaces,
        table,
        rule_priority,
        router,
        sample,
        reach_bits,
        control: o
            .control
            .clone()
            .or(f.control)
            .unwrap_or_else(|| PathBuf::from(DEFAULT_CONTROL)),
        metrics: o.metrics.or(f.metrics),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<RouteSettings, String> {
        parse(s, &Overrides::default())
    }

    #[test]
    fn full_example_parses_and_defaults_apply() {
        let s = p(r#"
            babeld = "/run/babeld.sock"
            policy = "mmpxm"
            ifaces = ["e0", "e1", "e2", "e3"]
            table = 2000
            rule_priority = 500
            slack = 64
            window = 7
            period_ms = 1000
            sample_ms = 250
            reach_bits = 8
            control = "/tmp/r.sock"
            metrics = "127.0.0.1:9102"
        "#)
        .unwrap();
        assert_eq!(s.babeld, Endpoint::Unix("/run/babeld.sock".into()));
        assert_eq!(s.policy, Policy::from_name("hmm-part").unwrap());
        assert_eq!((s.table, s.rule_priority, s.reach_bits), (2000, 500, 8));
        assert_eq!(s.router.ifaces.len(), 4);
        assert_eq!(
            (s.router.slack, s.router.window, s.router.period),
            (64, 7, Duration::from_secs(1))
        );
        assert_eq!(s.sample, Duration::from_millis(250));
        assert!(s.metrics.is_some());
        let d = p("babeld = \"33123\"\nifaces = [\"wlan0\"]").unwrap();
        assert_eq!(d.policy.name(), "hmm-part");
        assert_eq!(
            (d.table, d.rule_priority, d.router.slack),
            (1000, 1000, 128)
        );
        assert_eq!(d.control, PathBuf::from(DEFAULT_CONTROL));
        assert!(d.router.hmm.is_some());
    }

    #[test]
    fn the_command_line_wins() {
        let o = Overrides {
            babeld: Some("[::1]:4000".into()),
            policy: Some("full".into()),
            ifaces: vec!["a".into(), "b".into()],
            control: Some("/tmp/c.sock".into()),
            metrics: None,
        };
        let s = parse(
            "babeld = \"/x/y\"\npolicy = \"part\"\nifaces = [\"e0\"]",
            &o,
        )
        .unwrap();
        assert_eq!(s.babeld, Endpoint::Tcp("[::1]:4000".parse().unwrap()));
        assert_eq!(s.policy.name(), "full");
        assert_eq!(s.ifaces, vec!["a", "b"]);
        assert!(s.router.hmm.is_none());
    }

    #[test]
    fn bad_values_name_their_key() {
        let cases = [
            ("ifaces = [\"e0\"]", "key `babeld`"),
            (
                "babeld = \"x\"\nifaces = [\"e0\"]",
                "key `babeld`: babeld endpoint `x`",
            ),
            ("babeld = \"1\"", "key `ifaces`"),
            (
                "babeld = \"1\"\nifaces = [\"e0\", \"e0\"]",
                "key `ifaces[1]`: `e0` is listed twice",
            ),
            (
                "babeld = \"1\"\nifaces = [\"abcdefghijklmnop\"]",
                "key `ifaces[0]`",
            ),
            (
                "babeld = \"1\"\nifaces = [\"e0\"]\npolicy = \"ospf\"",
                "key `policy`: unknown policy `ospf`",
            ),
            (
                "babeld = \"1\"\nifaces = [\"e0\", \"e1\"]\ntable = 253",
                "key `table`",
            ),
            (
                "babeld = \"1\"\nifaces = [\"e0\"]\ntable = 0",
                "key `table`",
            ),
            (
                "babeld = \"1\"\nifaces = [\"e0\"]\nrule_priority = 32700",
                "key `rule_priority`",
            ),
            // At the top of their range (the sums once overflowed).
            (
                "babeld = \"1\"\nifaces = [\"e0\"]\ntable = 4294967295",
                "key `table`",
            ),
            (
                "babeld = \"1\"\nifaces = [\"e0\"]\nrule_priority = 4294967295",
                "key `rule_priority`",
            ),
            (
                "babeld = \"1\"\nifaces = [\"e0\"]\nperiod_ms = 0",
                "key `period_ms`: must be at least 1 ms",
            ),
            (
                "babeld = \"1\"\nifaces = [\"e0\"]\nsample_ms = 3000",
                "key `sample_ms`",
            ),
            (
                "babeld = \"1\"\nifaces = [\"e0\"]\nreach_bits = 17",
                "key `reach_bits`",
            ),
            (
                "babeld = \"1\"\nifaces = [\"e0\"]\nwindow = 0",
                "key `window`",
            ),
            (
                "babeld = \"1\"\nifaces = [\"e0\"]\nhello = 1",
                "unknown field `hello`",
            ),
            (
                "babeld = \"1\"\nifaces = [\"e0\"]\nslack = -1",
                "key `slack`",
            ),
        ];
        for (text, want) in cases {
            let e = p(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }
}
