//! Packet schedulers: which subflow carries the next segment.
//!
//! A scheduler sees a read-only snapshot of every path ([`PathView`]), computed once per
//! transmit decision, and returns a path or none. It never touches connection state. Built by a
//! [`SchedulerFactory`] held in the [`Config`](crate::Config).
//!
//! To add a scheduler: implement [`Scheduler`] in a new module here, give it a name in
//! [`Kind`], and it is selectable from scenarios and configuration files.

mod minrtt;
mod redundant;
mod roundrobin;

pub use minrtt::MinRtt;
pub use redundant::Redundant;
pub use roundrobin::RoundRobin;

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use crate::PathId;

/// What a scheduler knows of one path.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathView {
    pub id: PathId,
    pub srtt: Duration,
    pub rttvar: Duration,
    /// Congestion window, bytes.
    pub cwnd: u64,
    /// Bytes in flight.
    pub in_flight: u64,
    /// Whether one more full segment fits the window.
    pub has_room: bool,
    /// Flagged backup (by us or by the peer with PATH_PRIO).
    pub backup: bool,
    /// Established and not suspected dead (no unanswered timeout, not closing).
    pub usable: bool,
    /// Fraction of packets lost recently, 0..1.
    pub loss_rate: f64,
}

/// Chooses subflows for segments.
pub trait Scheduler: Send + Debug {
    /// The path for the next segment, or `None` to wait. `exclude` must not be chosen (the path a
    /// reinjected segment came from).
    fn select(&mut self, paths: &[PathView], exclude: Option<PathId>) -> Option<PathId>;

    /// Every segment goes on every usable path (redundant scheduling); `select` is then used
    /// only for reinjections.
    fn is_redundant(&self) -> bool {
        false
    }

    /// When the peer's receive window blocks new data, retransmit the blocking segment on the
    /// path just chosen and halve the window of the path that holds it: stock MPTCP's
    /// opportunistic retransmission and penalisation (seed 002 §II, seed 004 §IV.A).
    fn opportunistic_retransmission(&self) -> bool {
        false
    }

    fn name(&self) -> &'static str;
}

/// Builds a scheduler for each connection.
pub trait SchedulerFactory: Send + Sync + Debug {
    fn build(&self) -> Box<dyn Scheduler>;
    fn name(&self) -> &'static str;
}

/// The built-in schedulers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Lowest smoothed RTT with room; backups only when no other path is usable (the default).
    MinRtt,
    RoundRobin,
    Redundant,
}

impl Kind {
    pub const NAMES: &'static [&'static str] = &["minrtt", "roundrobin", "redundant"];

    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "minrtt" | "default" => Kind::MinRtt,
            "roundrobin" | "rr" => Kind::RoundRobin,
            "redundant" => Kind::Redundant,
            _ => return None,
        })
    }

    pub fn factory(self) -> Arc<dyn SchedulerFactory> {
        Arc::new(self)
    }
}

impl SchedulerFactory for Kind {
    fn build(&self) -> Box<dyn Scheduler> {
        match self {
            Kind::MinRtt => Box::new(MinRtt::default()),
            Kind::RoundRobin => Box::new(RoundRobin::default()),
            Kind::Redundant => Box::new(Redundant),
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Kind::MinRtt => "minrtt",
            Kind::RoundRobin => "roundrobin",
            Kind::Redundant => "redundant",
        }
    }
}

/// The candidates every scheduler starts from (seed 001, SPEC M2): usable non-backup paths;
/// backup paths only when no non-backup path is usable at all (a full window does not count as
/// unusable).
pub fn candidates<'a>(
    paths: &'a [PathView],
    exclude: Option<PathId>,
) -> impl Iterator<Item = &'a PathView> + 'a {
    let allowed = move |p: &&PathView| p.usable && Some(p.id) != exclude;
    let any_primary = paths.iter().filter(allowed).any(|p| !p.backup);
    paths
        .iter()
        .filter(allowed)
        .filter(move |p| p.backup != any_primary)
}

#[cfg(test)]
mod tests;
