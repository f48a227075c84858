//! Packet schedulers: which subflow carries the next segment.
//!
//! A scheduler gets a [`Context`]: the time, a read-only snapshot of every path
//! ([`PathView`]: RTT, window, flight, flags, loss rate and cumulative loss/RTO/ACK counters),
//! computed once per transmit decision, the path to avoid, the segment size and the
//! application priority of the data to send; it returns a path or none. It never touches
//! connection state. Built by a [`SchedulerFactory`] held in the [`Config`](crate::Config).
//!
//! Names select schedulers in scenario files and the tunnel's configuration, both through
//! [`Kind::parse`]: a name, optionally followed by `:key=value` parameters separated by
//! commas (`qoe:priority=4`).
//!
//! To add a scheduler: implement [`Scheduler`] in a new module here, give it a name in
//! [`Kind`] (with its parameters in [`Kind::parse`]), and it is selectable from scenarios and
//! configuration files.

mod arrival;
mod minrtt;
pub mod qoe;
mod redundant;
mod roundrobin;

pub use arrival::Arrival;
pub use minrtt::MinRtt;
pub use qoe::{Priority, Qoe};
pub use redundant::Redundant;
pub use roundrobin::RoundRobin;

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use crate::{Instant, PathId};

/// What a scheduler knows of one path.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathView {
    pub id: PathId,
    pub srtt: Duration,
    pub rttvar: Duration,
    /// The lowest RTT seen (the initial RTT before a sample).
    pub min_rtt: Duration,
    /// What the path delivered recently, bytes/s: the largest rate over its last few
    /// RTT-long intervals; `None` before one was measured.
    pub delivery_rate: Option<u64>,
    /// Congestion window, bytes.
    pub cwnd: u64,
    /// A loss or timeout has ended the path's first slow start: its window has met what the
    /// path can carry at least once.
    pub probed: bool,
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
    /// Losses detected by fast retransmit (recovery episodes) since the path opened.
    pub fast_retransmits: u64,
    /// Retransmission timeouts since the path opened.
    pub rtos: u64,
    /// ACK frames that acknowledged new packets of this path since it opened.
    pub acks: u64,
}

/// What a scheduler decides from.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    pub now: Instant,
    /// Every path of the connection.
    pub paths: &'a [PathView],
    /// Must not be chosen (the path a reinjected segment came from).
    pub exclude: Option<PathId>,
    /// The size of a full segment, bytes.
    pub mss: u64,
    /// The application priority of the data to send, when the application set one (per
    /// connection or per write: [`Connection::set_priority`](crate::Connection::set_priority),
    /// [`Connection::write_with_priority`](crate::Connection::write_with_priority)).
    pub priority: Option<Priority>,
    /// Stream bytes waiting to be sent for the first time (within the peer's window), the
    /// segment to place included; 0 for a reinjection.
    pub queued: u64,
}

/// Chooses subflows for segments.
pub trait Scheduler: Send + Debug {
    /// The path for the next segment, or `None` to wait.
    fn select(&mut self, cx: &Context<'_>) -> Option<PathId>;

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
    /// The path on which the next segment is estimated to arrive first.
    Arrival,
    RoundRobin,
    Redundant,
    /// Seed 004's QoE / priority scheduler; `priority` applies to data the application wrote
    /// without one.
    Qoe {
        priority: Priority,
    },
}

/// A scheduler name that does not parse: one line naming the part at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("unknown scheduler `{0}`; allowed: {names}", names = Kind::NAMES.join(", "))]
    Unknown(String),
    #[error("scheduler `{name}` takes no parameter, got `{param}`")]
    NoParameters { name: String, param: String },
    #[error("scheduler `{name}`: unknown parameter `{key}`; allowed: {allowed}")]
    UnknownKey {
        name: String,
        key: String,
        allowed: &'static str,
    },
    #[error("scheduler `{name}`: `{param}` is not key=value")]
    Malformed { name: String, param: String },
    #[error("scheduler `{name}`: {key} = `{value}` out of range: allowed {allowed}")]
    Value {
        name: String,
        key: String,
        value: String,
        allowed: &'static str,
    },
}

impl Kind {
    pub const NAMES: &'static [&'static str] =
        &["minrtt", "arrival", "roundrobin", "redundant", "qoe"];

    /// The scheduler of `name`, `None` if it does not parse ([`Kind::parse`] says why).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::parse(name).ok()
    }

    /// Parses `name[:key=value,...]`: `minrtt` (alias `default`), `arrival`, `roundrobin` (`rr`),
    /// `redundant`, `qoe` with `priority=1..6` (default 1).
    pub fn parse(name: &str) -> Result<Self, NameError> {
        let (base, params) = match name.split_once(':') {
            Some((b, p)) => (b, Some(p)),
            None => (name, None),
        };
        let kind = match base {
            "minrtt" | "default" => Kind::MinRtt,
            "arrival" => Kind::Arrival,
            "roundrobin" | "rr" => Kind::RoundRobin,
            "redundant" => Kind::Redundant,
            "qoe" => Kind::Qoe {
                priority: Priority::default(),
            },
            _ => return Err(NameError::Unknown(name.to_string())),
        };
        let Some(params) = params else {
            return Ok(kind);
        };
        let Kind::Qoe { mut priority } = kind else {
            return Err(NameError::NoParameters {
                name: base.to_string(),
                param: params.to_string(),
            });
        };
        for param in params.split(',') {
            let Some((key, value)) = param.split_once('=') else {
                return Err(NameError::Malformed {
                    name: base.to_string(),
                    param: param.to_string(),
                });
            };
            match key.trim() {
                "priority" => {
                    priority = value
                        .trim()
                        .parse()
                        .ok()
                        .and_then(Priority::new)
                        .ok_or_else(|| NameError::Value {
                            name: base.to_string(),
                            key: "priority".to_string(),
                            value: value.to_string(),
                            allowed: "1..=6",
                        })?;
                }
                other => {
                    return Err(NameError::UnknownKey {
                        name: base.to_string(),
                        key: other.to_string(),
                        allowed: "priority",
                    });
                }
            }
        }
        Ok(Kind::Qoe { priority })
    }

    pub fn factory(self) -> Arc<dyn SchedulerFactory> {
        Arc::new(self)
    }
}

impl SchedulerFactory for Kind {
    fn build(&self) -> Box<dyn Scheduler> {
        match *self {
            Kind::MinRtt => Box::new(MinRtt::default()),
            Kind::Arrival => Box::new(Arrival::default()),
            Kind::RoundRobin => Box::new(RoundRobin::default()),
            Kind::Redundant => Box::new(Redundant),
            Kind::Qoe { priority } => Box::new(Qoe::new(priority)),
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Kind::MinRtt => "minrtt",
            Kind::Arrival => "arrival",
            Kind::RoundRobin => "roundrobin",
            Kind::Redundant => "redundant",
            Kind::Qoe { .. } => "qoe",
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
