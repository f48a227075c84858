//! Reinjection policies: when a subflow's unacknowledged data is sent again on the other
//! subflows (SPEC M3).
//!
//! A policy answers two questions: which events trigger reinjection ([`Trigger`]), and when its
//! own per-path timer, if it has one, expires ([`ReinjectPolicy::deadline`]). The connection
//! does the rest: it queues the path's unacknowledged data for the scheduler (excluding the
//! path it came from) and stops putting new data on that path until it hears from it again.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use crate::Instant;

/// Events after which a path's outstanding data may be reinjected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// The path's retransmission timer expired.
    Rto,
    /// The path's tail-loss probe timer expired.
    Pto,
    /// The policy's own timer ([`ReinjectPolicy::deadline`]) expired.
    Timer,
    /// The peer removed the address the path uses (REMOVE_ADDR).
    PeerRemovedAddr,
    /// The path was closed (by either side, or declared broken).
    PathClosed,
}

/// What a reinjection timer may know of one path.
#[derive(Debug, Clone, Copy)]
pub struct PathTiming {
    /// Send time of the earliest outstanding packet whose data was not reinjected yet.
    pub earliest_outstanding: Option<Instant>,
    pub srtt: Duration,
    pub rttvar: Duration,
    /// Whether `srtt` comes from a measurement.
    pub has_rtt_sample: bool,
    /// When an acknowledgement last made progress (newly acknowledged packets, cumulatively or
    /// selectively), or the first send after the path was idle.
    pub last_progress: Instant,
    /// The smoothed time between acknowledgements that made progress (SRTT before there is
    /// one).
    pub progress_interval: Duration,
    /// How long the peer may hold its acknowledgement of the earliest outstanding packet: until
    /// the packet that completes its ACK-frequency group went out, at most its maximum ACK delay
    /// (the whole delay when no such packet went out yet), zero when later packets were
    /// acknowledged (the earliest then fills a hole and is acknowledged at once).
    pub ack_delay: Duration,
}

/// Decides when data is reinjected.
pub trait ReinjectPolicy: Send + Sync + Debug {
    /// Whether `trigger` reinjects the path's outstanding data.
    fn reinject_on(&self, trigger: Trigger) -> bool;

    /// Expiry of the policy's own timer for a path, recomputed by the connection whenever the
    /// path sends with nothing in flight and on every acknowledgement it receives (duplicates
    /// included); `None` when nothing is outstanding.
    fn deadline(&self, _path: &PathTiming) -> Option<Instant> {
        None
    }

    /// Whether the segment the stream waits on is copied over another path once it is late
    /// there while that path delivers data beyond it (the connection's stalled-segment copy,
    /// see [`Guarded`]).
    fn copies_stalled_segment(&self) -> bool {
        false
    }

    fn name(&self) -> String;
}

/// The built-in policies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Policy {
    /// Linux MPTCP: reinject on RTO, or when the peer removes the address (REMOVE_ADDR).
    Stock,
    /// Reinject when the tail-loss probe timer fires (seed 002's reference [14]).
    Pto,
    /// Seed 002's REJ timer.
    Rej(Rej),
    /// REJ that waits while the path's acknowledgements still make progress ([`Guarded`]).
    Guarded(Rej),
}

impl Policy {
    /// The policies of seed 002's experiments. Guarded REJ (`rejgK`) parses too.
    pub const NAMES: &'static [&'static str] =
        &["stock", "pto", "rej1", "rej2", "rej4", "rejg1", "rejg2"];

    /// `stock`, `pto`, `rejK` or `rejgK` (guarded REJ; `rejg` is `rejg1`) with an integer
    /// K ≥ 1.
    pub fn from_name(name: &str) -> Result<Self, String> {
        match name {
            "stock" | "rto" => Ok(Policy::Stock),
            "pto" => Ok(Policy::Pto),
            "rejg" => Ok(Policy::Guarded(Rej::new(1))),
            _ => {
                let (guarded, k) = match name.strip_prefix("rejg") {
                    Some(k) => (true, k),
                    None => (
                        false,
                        name.strip_prefix("rej")
                            .ok_or_else(|| format!("unknown reinjection policy `{name}`"))?,
                    ),
                };
                let k: u32 = k
                    .parse()
                    .map_err(|_| format!("`{name}`: REJ needs an integer K, e.g. rej1"))?;
                if k < 1 {
                    return Err(format!("`{name}`: REJ needs K ≥ 1"));
                }
                Ok(if guarded {
                    Policy::Guarded(Rej::new(k))
                } else {
                    Policy::Rej(Rej::new(k))
                })
            }
        }
    }

    /// The policy with REJ's RTTVAR floor set to `min_rttvar` (REJ and guarded REJ).
    pub fn with_min_rttvar(self, min_rttvar: Duration) -> Policy {
        match self {
            Policy::Rej(r) => Policy::Rej(Rej { min_rttvar, ..r }),
            Policy::Guarded(r) => Policy::Guarded(Rej { min_rttvar, ..r }),
            p => p,
        }
    }

    pub fn shared(self) -> Arc<dyn ReinjectPolicy> {
        match self {
            Policy::Stock => Arc::new(Stock),
            Policy::Pto => Arc::new(PtoReinject),
            Policy::Rej(r) => Arc::new(r),
            Policy::Guarded(r) => Arc::new(Guarded(r)),
        }
    }
}

/// Linux MPTCP's behaviour.
#[derive(Debug, Clone, Copy)]
pub struct Stock;

impl ReinjectPolicy for Stock {
    fn reinject_on(&self, trigger: Trigger) -> bool {
        matches!(
            trigger,
            Trigger::Rto | Trigger::PeerRemovedAddr | Trigger::PathClosed
        )
    }

    fn name(&self) -> String {
        "stock".into()
    }
}

/// Reinjection on the tail-loss probe timeout, and on everything stock reinjects on.
#[derive(Debug, Clone, Copy)]
pub struct PtoReinject;

impl ReinjectPolicy for PtoReinject {
    fn reinject_on(&self, trigger: Trigger) -> bool {
        trigger == Trigger::Pto || Stock.reinject_on(trigger)
    }

    fn name(&self) -> String {
        "pto".into()
    }
}

/// The timer of a watched path ([`Connection::set_watch`](crate::Connection::set_watch)):
/// guarded REJ with K = 1, whatever the connection's own policy.
pub const WATCH: Guarded = Guarded(Rej {
    k: 1,
    min_rttvar: REJ_MIN_RTTVAR,
});

/// Default floor of RTTVAR in the REJ formula, see [`Rej::min_rttvar`].
pub const REJ_MIN_RTTVAR: Duration = Duration::from_millis(2);

/// Seed 002 §III: REJ = SRTT + K·RTTVAR − Δ, Δ the time since the earliest outstanding packet
/// was sent. The timer therefore expires at `earliest_send + SRTT + K·RTTVAR`; it is set when a
/// packet is sent with nothing in flight, restarted on every ACK (duplicates included) and
/// cancelled when nothing is in flight. Sender-side only; the path's congestion state is left
/// alone.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rej {
    pub k: u32,
    /// Lower bound for RTTVAR in the formula (the clock granularity G of RFC 6298): on a
    /// steady path the variation decays towards zero while the ACK clock keeps a jitter of its
    /// own (delayed ACKs, serialisation). 2 ms by default: on scenario E3, 1 ms let K = 1 fire
    /// spuriously (4.95 % reinjections against 0.63 % for stock), 2 ms brings it to 0.81 %.
    pub min_rttvar: Duration,
}

impl Rej {
    pub fn new(k: u32) -> Self {
        Rej {
            k,
            min_rttvar: REJ_MIN_RTTVAR,
        }
    }
}

impl ReinjectPolicy for Rej {
    fn reinject_on(&self, trigger: Trigger) -> bool {
        trigger == Trigger::Timer || Stock.reinject_on(trigger)
    }

    fn deadline(&self, path: &PathTiming) -> Option<Instant> {
        let earliest = path.earliest_outstanding?;
        if !path.has_rtt_sample {
            // No estimate yet: the RTO covers the path until it has one.
            return None;
        }
        // Seed 002 Eq. 6, referenced to the send time of the earliest outstanding packet.
        let var = path.rttvar.max(self.min_rttvar);
        Some(earliest + path.srtt + var * self.k)
    }

    fn name(&self) -> String {
        format!("rej{}", self.k)
    }
}

/// REJ with a guard against self-inflicted queueing (the default of `braid tunnel`). Plain REJ
/// fires when the earliest outstanding packet is not acknowledged within SRTT + K·RTTVAR of
/// its send; when the path's own queue grows (a greedy flow filling a bottleneck buffer), or
/// when that packet was dropped by the queue and is being recovered by the path itself, the
/// acknowledgements keep coming but that one is late, and REJ reinjects a whole window that
/// was never lost (seed 002's E5 observation; on 40 + 20 Mbit/s one CUBIC flow fell from 54 to
/// 47–49 Mbit/s with K = 1). A path whose acknowledgements still make progress is alive, so the
/// guarded timer also waits until none has for four times the path's usual interval between
/// them, plus K·RTTVAR and 1 ms. Both terms also allow for the time the peer may hold its
/// acknowledgement of the earliest packet (`ack_delay`: until the packet that completes its
/// ACK-frequency group went out, at most the peer's maximum ACK delay):
///
/// `deadline = max(earliest_send + SRTT + K·RTTVAR + ack_delay,
///                 last_progress + 4·progress_interval + K·RTTVAR + G + ack_delay)`
///
/// Without that allowance in both, a burst's odd last packet, acknowledged only when the next
/// burst reached the peer, fired the timer on a lossless path whenever the next burst had gone
/// out (a tunnel carrying TCP's bursts over 2 × 50 Mbit/s with 200 ms round trips reinjected
/// 13 % of what it delivered).
///
/// On a dead path progress stops with the last acknowledgement; a busy path acknowledges every
/// few packets, so the guard adds a few milliseconds to REJ's failover, while on a path whose
/// queue grows or that recovers its own loss it keeps the timer away.
///
/// A path whose link slows to a trickle (a cellular link in a fade, seconds of queue ahead of
/// what it holds) still makes progress, so the guard holds there too. For that case the policy
/// also copies the segment the stream waits on: when the receiver has data beyond it, the
/// segment has been out on its path for longer than that path's smoothed RTT or twice its
/// minimum RTT, whichever is less (a fading path's smoothed RTT grows with its queue), and than
/// two RTTs of the path that would carry the copy, and the stream has not moved for those two
/// RTTs, one copy goes on the earliest other path with room (once per stall). On two real
/// cellular traces the stream had waited ten seconds on one such segment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Guarded(pub Rej);

impl ReinjectPolicy for Guarded {
    fn reinject_on(&self, trigger: Trigger) -> bool {
        self.0.reinject_on(trigger)
    }

    fn copies_stalled_segment(&self) -> bool {
        true
    }

    fn deadline(&self, path: &PathTiming) -> Option<Instant> {
        let rej = self.0.deadline(path)? + path.ack_delay;
        let var = path.rttvar.max(self.0.min_rttvar);
        let live = path.last_progress
            + path.progress_interval * 4
            + var * self.0.k
            + crate::rtt::GRANULARITY
            + path.ack_delay;
        Some(rej.max(live))
    }

    fn name(&self) -> String {
        format!("rejg{}", self.0.k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path whose earliest outstanding packet was sent at 1000 ms (SRTT 30 ms, RTTVAR 5 ms),
    /// acknowledgements making progress every 2 ms, the last at 1034 ms.
    fn timing() -> PathTiming {
        PathTiming {
            earliest_outstanding: Some(Instant::from_millis(1000)),
            srtt: Duration::from_millis(30),
            rttvar: Duration::from_millis(5),
            has_rtt_sample: true,
            last_progress: Instant::from_millis(1034),
            progress_interval: Duration::from_millis(2),
            ack_delay: Duration::ZERO,
        }
    }

    #[test]
    fn names_parse_and_reject_bad_k() {
        assert_eq!(Policy::from_name("stock").unwrap(), Policy::Stock);
        assert_eq!(Policy::from_name("rej2").unwrap(), Policy::Rej(Rej::new(2)));
        assert!(Policy::from_name("rej0").unwrap_err().contains("K ≥ 1"));
        assert_eq!(
            Policy::from_name("rejg").unwrap(),
            Policy::Guarded(Rej::new(1))
        );
        assert_eq!(
            Policy::from_name("rejg4").unwrap(),
            Policy::Guarded(Rej::new(4))
        );
        assert!(Policy::from_name("rejg0").is_err());
        assert!(Policy::from_name("rejx").is_err());
        assert!(Policy::from_name("fast").is_err());
        for n in Policy::NAMES {
            assert_eq!(Policy::from_name(n).unwrap().shared().name(), *n);
        }
    }

    #[test]
    fn rej_deadline_is_anchored_to_the_earliest_send() {
        let rej = Rej::new(2);
        let t = timing();
        assert_eq!(rej.deadline(&t), Some(Instant::from_millis(1040)));
        // A vanishing RTTVAR is floored at G.
        let steady = PathTiming {
            rttvar: Duration::from_micros(10),
            ..t
        };
        assert_eq!(rej.deadline(&steady), Some(Instant::from_millis(1034)));
        let idle = PathTiming {
            earliest_outstanding: None,
            ..t
        };
        assert_eq!(rej.deadline(&idle), None);
    }

    #[test]
    fn guarded_rej_waits_while_acknowledgements_make_progress() {
        let g = Guarded(Rej::new(1));
        // The queue grew: SRTT 30 ms; the earliest outstanding packet was sent at 1000 ms, REJ1
        // would fire at 1035 ms; acknowledgements make progress every 2 ms.
        let t = timing();
        assert_eq!(Rej::new(1).deadline(&t), Some(Instant::from_millis(1035)));
        // The last progress came at 1034 ms: not before 1034 + 4·2 + 5 + 1.
        assert_eq!(g.deadline(&t), Some(Instant::from_millis(1048)));
        // Each new progress moves it; on a dead path the last one stays.
        let later = PathTiming {
            last_progress: Instant::from_millis(1046),
            ..t
        };
        assert_eq!(g.deadline(&later), Some(Instant::from_millis(1060)));
        // Long after the last progress, REJ's own deadline rules.
        let old = PathTiming {
            last_progress: Instant::from_millis(900),
            ..t
        };
        assert_eq!(g.deadline(&old), Some(Instant::from_millis(1035)));
        // Too little outstanding for an immediate ACK: the peer's delay counts.
        let sparse = PathTiming {
            ack_delay: Duration::from_millis(25),
            ..t
        };
        assert_eq!(g.deadline(&sparse), Some(Instant::from_millis(1073)));
        // ... and in REJ's own term: long after the last progress, 1035 + 25.
        let held = PathTiming {
            last_progress: Instant::from_millis(900),
            ..sparse
        };
        assert_eq!(g.deadline(&held), Some(Instant::from_millis(1060)));
        assert_eq!(
            g.deadline(&PathTiming {
                earliest_outstanding: None,
                ..t
            }),
            None
        );
        assert!(g.reinject_on(Trigger::Timer) && g.reinject_on(Trigger::Rto));
    }

    #[test]
    fn guarded_rej_scales_with_k_and_floors_rttvar() {
        let t = timing();
        // K multiplies RTTVAR in both terms: REJ4 at 1000 + 30 + 20, the guard at
        // 1034 + 8 + 20 + 1.
        let g4 = Policy::from_name("rejg4").unwrap().shared();
        assert_eq!(g4.name(), "rejg4");
        assert_eq!(g4.deadline(&t), Some(Instant::from_millis(1063)));
        // A vanishing RTTVAR is floored (2 ms by default, or as configured) in the guard too.
        let flat = PathTiming {
            rttvar: Duration::ZERO,
            ..t
        };
        let g1 = Guarded(Rej::new(1));
        assert_eq!(
            g1.deadline(&flat),
            Some(Instant::from_millis(1034 + 8 + 2 + 1))
        );
        let g1_4ms = Policy::from_name("rejg1")
            .unwrap()
            .with_min_rttvar(Duration::from_millis(4))
            .shared();
        assert_eq!(
            g1_4ms.deadline(&flat),
            Some(Instant::from_millis(1034 + 8 + 4 + 1))
        );
        // A sparse ACK clock (one acknowledgement per 10 ms) stretches the guard accordingly.
        let sparse = PathTiming {
            progress_interval: Duration::from_millis(10),
            ..t
        };
        assert_eq!(
            g1.deadline(&sparse),
            Some(Instant::from_millis(1034 + 40 + 5 + 1))
        );
        // No RTT sample yet: no timer, as plain REJ (the RTO covers the path).
        let fresh = PathTiming {
            has_rtt_sample: false,
            ..t
        };
        assert_eq!(g1.deadline(&fresh), None);
        // Never earlier than plain REJ with the same K.
        for last in [900, 1000, 1020, 1034, 1050] {
            let at = PathTiming {
                last_progress: Instant::from_millis(last),
                ..t
            };
            assert!(g1.deadline(&at) >= Rej::new(1).deadline(&at));
        }
    }

    #[test]
    fn triggers() {
        assert!(Stock.reinject_on(Trigger::Rto));
        assert!(!Stock.reinject_on(Trigger::Pto));
        assert!(PtoReinject.reinject_on(Trigger::Pto));
        assert!(Rej::new(1).reinject_on(Trigger::Timer));
        assert!(!Stock.reinject_on(Trigger::Timer));
    }
}
