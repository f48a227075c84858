//! Seeded fault schedules for the chaos soak: the faults a vehicle meets, one at a time with
//! quiet time between them so each outage can be attributed to its fault.
//!
//! The same schedule drives the tunnel's namespace soak (real links, daemons, iptables) and, for
//! the faults the core can see, a simulation in virtual time ([`scenario_toml`]), so a seed
//! that fails on real stacks can be replayed deterministically.

use std::fmt;
use std::time::Duration;

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;

/// What goes wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// Every client link loses carrier, then returns (a tunnel, a car park).
    AllLinksDown,
    /// One client link loses carrier, then returns.
    LinkDown(usize),
    /// The network side loses carrier (the gateway's link): the client's links stay up but
    /// nothing gets through.
    GatewaySideDown,
    /// One link drops 30 % of its packets in both directions.
    LossBurst(usize),
    /// One link's address is replaced (a new DHCP lease).
    Readdress(usize),
    /// The NAT in front of one link maps it to a new address and port.
    NatRebind(usize),
    /// The gateway dies (no goodbye) and starts again after the duration.
    GatewayRestart,
    /// The client daemon dies and starts again after the duration.
    ClientRestart,
    /// Random datagrams at the gateway's port for the duration.
    JunkFlood,
}

impl FaultKind {
    /// Whether the core (the simulator) can see this fault; the others need real daemons.
    pub fn in_core(self) -> bool {
        matches!(
            self,
            FaultKind::AllLinksDown
                | FaultKind::LinkDown(_)
                | FaultKind::GatewaySideDown
                | FaultKind::LossBurst(_)
        )
    }

    /// Whether the fault cuts every path, so the tunnel is silent for its whole duration.
    pub fn cuts_everything(self) -> bool {
        matches!(
            self,
            FaultKind::AllLinksDown
                | FaultKind::GatewaySideDown
                | FaultKind::GatewayRestart
                | FaultKind::ClientRestart
        )
    }

    /// A short name for reports.
    pub fn name(self) -> String {
        match self {
            FaultKind::AllLinksDown => "all links down".into(),
            FaultKind::LinkDown(i) => format!("link {i} down"),
            FaultKind::GatewaySideDown => "gateway side down".into(),
            FaultKind::LossBurst(i) => format!("30 % loss on link {i}"),
            FaultKind::Readdress(i) => format!("link {i} re-addressed"),
            FaultKind::NatRebind(i) => format!("NAT rebinding on link {i}"),
            FaultKind::GatewayRestart => "gateway kill + restart".into(),
            FaultKind::ClientRestart => "client kill + restart".into(),
            FaultKind::JunkFlood => "junk datagram flood".into(),
        }
    }

    /// The kind without its link, for grouping outcomes.
    pub fn family(self) -> &'static str {
        match self {
            FaultKind::AllLinksDown => "all links down",
            FaultKind::LinkDown(_) => "one link down",
            FaultKind::GatewaySideDown => "gateway side down",
            FaultKind::LossBurst(_) => "loss burst",
            FaultKind::Readdress(_) => "re-addressing",
            FaultKind::NatRebind(_) => "NAT rebinding",
            FaultKind::GatewayRestart => "gateway restart",
            FaultKind::ClientRestart => "client restart",
            FaultKind::JunkFlood => "junk flood",
        }
    }
}

/// One fault: it starts at `at` (from the start of the run) and lasts `duration` (an
/// instantaneous change such as a re-addressing has a duration of zero).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    pub at: Duration,
    pub kind: FaultKind,
    pub duration: Duration,
}

impl Fault {
    /// When the fault is over.
    pub fn end(&self) -> Duration {
        self.at + self.duration
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:>7.1} s  {:<26} {:>5.1} s",
            self.at.as_secs_f64(),
            self.kind.name(),
            self.duration.as_secs_f64()
        )
    }
}

/// Quiet time after each fault before the next one, so its outage can be measured.
pub const QUIET: (Duration, Duration) = (Duration::from_secs(3), Duration::from_secs(6));

/// A fault schedule over `total` for a client with `links` links, from `seed`: blackouts of
/// 0.2–10 s, loss bursts, re-addressing, NAT rebinding, restarts and floods, each followed by
/// [`QUIET`]. The first fault comes after `warmup`. `core_only` keeps the kinds the simulator
/// can model ([`FaultKind::in_core`]).
pub fn schedule(
    seed: u64,
    total: Duration,
    warmup: Duration,
    links: usize,
    core_only: bool,
) -> Vec<Fault> {
    let mut rng = Pcg64::seed_from_u64(seed ^ 0x6368_616f_735f_7631);
    let links = links.max(1);
    let mut out = Vec::new();
    let mut t = warmup;
    loop {
        let link = rng.random_range(0..links);
        let secs = |rng: &mut Pcg64, lo: f64, hi: f64| {
            // Rounded to 10 ms: schedules print and replay exactly.
            Duration::from_millis((rng.random_range(lo..hi) * 100.0).round() as u64 * 10)
        };
        let kind = match rng.random_range(0..if core_only { 4 } else { 9 }) {
            0 => FaultKind::AllLinksDown,
            1 => FaultKind::LinkDown(link),
            2 => FaultKind::GatewaySideDown,
            3 => FaultKind::LossBurst(link),
            4 => FaultKind::Readdress(link),
            5 => FaultKind::NatRebind(link),
            6 => FaultKind::GatewayRestart,
            7 => FaultKind::ClientRestart,
            _ => FaultKind::JunkFlood,
        };
        let duration = match kind {
            FaultKind::AllLinksDown | FaultKind::LinkDown(_) | FaultKind::GatewaySideDown => {
                // Mostly short, sometimes long: 0.2–10 s.
                if rng.random_bool(0.7) {
                    secs(&mut rng, 0.2, 3.0)
                } else {
                    secs(&mut rng, 3.0, 10.0)
                }
            }
            FaultKind::LossBurst(_) => secs(&mut rng, 1.0, 5.0),
            FaultKind::Readdress(_) | FaultKind::NatRebind(_) => Duration::ZERO,
            FaultKind::GatewayRestart | FaultKind::ClientRestart => secs(&mut rng, 0.2, 3.0),
            FaultKind::JunkFlood => secs(&mut rng, 1.0, 3.0),
        };
        let f = Fault {
            at: t,
            kind,
            duration,
        };
        let quiet = secs(&mut rng, QUIET.0.as_secs_f64(), QUIET.1.as_secs_f64());
        if f.end() + quiet > total {
            break;
        }
        t = f.end() + quiet;
        out.push(f);
    }
    out
}

/// A scenario for `braid sim` that applies the core-visible faults of `faults` to a client with
/// two links (20 and 10 Mbit/s, 10 and 15 ms) carrying a file of `bytes` in `direction` ("up"
/// or "down"). Link loss with the address kept (carrier blocked) models the gateway side and
/// loss bursts (harsher: every packet lost); losing carrier on the client removes the address.
pub fn scenario_toml(faults: &[Fault], total: Duration, bytes: u64, direction: &str) -> String {
    let mut s = format!(
        r#"name = "chaos"
duration = "{}ms"
seed = 1

[connection]
scheduler = "minrtt"
congestion = "cubic"
remove_addr_delay = "50ms"
# As braid tunnel: a liveness probe on every link each keepalive (1 s), answered.
liveness_probe = "1s"

[[link]]
name = "l0"
rate = "20Mbit"
delay = "10ms"
queue = 100

[[link]]
name = "l1"
rate = "10Mbit"
delay = "15ms"
queue = 100

[app]
kind = "file"
direction = "{direction}"
bytes = "{bytes}B"
start = "0.5s"
"#,
        total.as_millis()
    );
    let mut event = |at: Duration, link: usize, action: &str| {
        s.push_str(&format!(
            "\n[[event]]\nat = \"{}ms\"\nlink = \"l{link}\"\naction = \"{action}\"\n",
            at.as_millis()
        ));
    };
    for f in faults {
        let (links, down, up): (Vec<usize>, &str, &str) = match f.kind {
            FaultKind::AllLinksDown => (vec![0, 1], "addr-lost", "addr-back"),
            FaultKind::LinkDown(i) => (vec![i.min(1)], "addr-lost", "addr-back"),
            FaultKind::GatewaySideDown => (vec![0, 1], "down", "up"),
            FaultKind::LossBurst(i) => (vec![i.min(1)], "down", "up"),
            _ => continue,
        };
        for &l in &links {
            event(f.at, l, down);
        }
        for &l in &links {
            event(f.end(), l, up);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_are_seeded_bounded_and_spaced() {
        let total = Duration::from_secs(600);
        let a = schedule(7, total, Duration::from_secs(5), 2, false);
        assert_eq!(a, schedule(7, total, Duration::from_secs(5), 2, false));
        assert_ne!(a, schedule(8, total, Duration::from_secs(5), 2, false));
        assert!(a.len() > 20, "{}", a.len());
        assert!(a[0].at >= Duration::from_secs(5));
        for w in a.windows(2) {
            assert!(w[1].at >= w[0].end() + QUIET.0);
        }
        assert!(a.last().unwrap().end() <= total);
        for f in &a {
            if matches!(
                f.kind,
                FaultKind::AllLinksDown | FaultKind::LinkDown(_) | FaultKind::GatewaySideDown
            ) {
                assert!(
                    (Duration::from_millis(200)..=Duration::from_secs(10)).contains(&f.duration)
                );
            }
            if let FaultKind::LinkDown(i) | FaultKind::LossBurst(i) = f.kind {
                assert!(i < 2);
            }
        }
        // Every kind shows up in a long schedule.
        for family in [
            "all links down",
            "one link down",
            "gateway side down",
            "loss burst",
            "re-addressing",
            "NAT rebinding",
            "gateway restart",
            "client restart",
            "junk flood",
        ] {
            assert!(a.iter().any(|f| f.kind.family() == family), "{family}");
        }
        let core = schedule(7, total, Duration::from_secs(5), 2, true);
        assert!(core.iter().all(|f| f.kind.in_core()));
    }
}
