//! How `braid pm` makes sure the peer heard that a subflow became backup.
//!
//! The backup flag reaches the peer in one MP_PRIO option, written into a single pure ACK on
//! the subflow it concerns: the userspace path manager's SET_FLAGS sets `send_mp_prio` and
//! sends an ACK (`__mptcp_pm_send_ack()`, net/mptcp/pm.c), and `mptcp_write_options()` clears
//! the flag once the option is written. Nothing re-sends it. The cross-layer modes demote a
//! subflow because its link is fading, so that ACK crosses the link most likely to lose it.
//! When it is lost the peer's scheduler never learns: it goes on putting the data it sends on
//! the demoted subflow until the link breaks, and the stream stalls exactly as if nothing had
//! been done (the kernel's own timeouts, about a second).
//!
//! So after every SET_FLAGS backup `braid pm` watches what the subflow's socket receives
//! (sock_diag, `tcpi_bytes_received`). Once the peer has heard the flag it sends nothing new on
//! the subflow: what it had already sent arrives within a round trip or so, then the count
//! stops. A subflow still receiving [`CHECK`] after the first look (and the data it had in
//! flight) gets SET_FLAGS backup again, a new MP_PRIO; at most [`MAX_RESENDS`] times. Two
//! looks in a row without data end the watch, and so does the subflow's socket going away or
//! the flag being cleared.
//!
//! A peer that has heard the flag but has no other subflow to send on (every subflow backup)
//! keeps using this one: the repeats are then useless, and cost one pure ACK each.

use braid_core::Instant;
use braid_mptcp::{TcpState, Token};
use std::net::SocketAddr;

use super::bridge::KernelOp;

/// How often a watched subflow is looked at.
pub const CHECK: std::time::Duration = std::time::Duration::from_millis(200);

/// MP_PRIO re-sent at most this many times per demotion.
pub const MAX_RESENDS: u32 = 4;

/// Looks in a row without data that end a watch: the peer heard the flag.
const QUIET_LOOKS: u32 = 2;

/// A subflow flagged backup, watched until the peer is seen to have heard it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Watch {
    token: Token,
    local: SocketAddr,
    remote: SocketAddr,
    /// When it is looked at next.
    next: Instant,
    /// `tcpi_bytes_received` at the last look (`None`: not looked at yet).
    received: Option<u64>,
    quiet: u32,
    resent: u32,
}

/// Counters for `status`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PrioStats {
    /// MP_PRIO backup sent again because the subflow still received data.
    pub resent: u64,
    /// Watches ended with the subflow quiet: the peer heard the flag.
    pub heard: u64,
    /// Watches given up after [`MAX_RESENDS`] with data still arriving.
    pub unheard: u64,
}

#[derive(Debug, Default)]
pub struct Prio {
    watches: Vec<Watch>,
    pub stats: PrioStats,
}

impl Prio {
    /// A SET_FLAGS request the kernel carried out at `now`: a backup flag starts (or, for a
    /// repeat, continues) a watch, first looked at [`CHECK`] later (what the peer had in
    /// flight arrives meanwhile); a cleared flag ends it.
    pub fn applied(&mut self, op: &KernelOp, now: Instant) {
        let KernelOp::SetBackup {
            token,
            local,
            remote,
            backup,
        } = *op
        else {
            return;
        };
        let at = self
            .watches
            .iter()
            .position(|w| (w.token, w.local, w.remote) == (token, local, remote));
        match (backup, at) {
            (true, Some(i)) => {
                // A repeat: the data in flight before it is not the peer's fault.
                let w = &mut self.watches[i];
                (w.next, w.received, w.quiet) = (now + CHECK, None, 0);
            }
            (true, None) => self.watches.push(Watch {
                token,
                local,
                remote,
                next: now + CHECK,
                received: None,
                quiet: 0,
                resent: 0,
            }),
            (false, Some(i)) => {
                self.watches.remove(i);
            }
            (false, None) => {}
        }
    }

    /// Looks at the watched subflows due by `now` in `sockets` (sock_diag's TCP sockets): the
    /// repeats to send.
    pub fn check(&mut self, now: Instant, sockets: &[TcpState]) -> Vec<KernelOp> {
        let mut out = Vec::new();
        let stats = &mut self.stats;
        self.watches.retain_mut(|w| {
            if w.next > now {
                return true;
            }
            w.next = now + CHECK;
            let Some(s) = sockets
                .iter()
                .find(|s| s.local == w.local && s.remote == w.remote)
            else {
                // Closed (destroyed by the drain, the kernel or the peer).
                return false;
            };
            let Some(before) = w.received.replace(s.bytes_received) else {
                return true;
            };
            if s.bytes_received == before {
                w.quiet += 1;
                if w.quiet >= QUIET_LOOKS {
                    stats.heard += 1;
                    return false;
                }
                return true;
            }
            w.quiet = 0;
            if w.resent >= MAX_RESENDS {
                stats.unheard += 1;
                return false;
            }
            w.resent += 1;
            stats.resent += 1;
            out.push(KernelOp::SetBackup {
                token: w.token,
                local: w.local,
                remote: w.remote,
                backup: true,
            });
            true
        });
        out
    }

    /// The looks due by `now` could not be made (sock_diag failed): they come [`CHECK`] later.
    pub fn postpone(&mut self, now: Instant) {
        for w in self.watches.iter_mut().filter(|w| w.next <= now) {
            w.next = now + CHECK;
        }
    }

    /// When the next look is due (`None`: nothing watched).
    pub fn due(&self) -> Option<Instant> {
        self.watches.iter().map(|w| w.next).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCAL: &str = "10.0.1.1:40000";
    const REMOTE: &str = "10.0.0.2:5201";

    fn op(backup: bool) -> KernelOp {
        KernelOp::SetBackup {
            token: Token(7),
            local: LOCAL.parse().unwrap(),
            remote: REMOTE.parse().unwrap(),
            backup,
        }
    }

    fn socket(bytes_received: u64) -> Vec<TcpState> {
        vec![TcpState {
            local: LOCAL.parse().unwrap(),
            remote: REMOTE.parse().unwrap(),
            unacked: 0,
            notsent: 0,
            bytes_acked: 0,
            bytes_received,
            backoff: 0,
        }]
    }

    fn at(ms: u64) -> Instant {
        Instant::from_micros(ms * 1000)
    }

    /// The peer heard the flag: what it had in flight arrives before the first look, then
    /// nothing; two quiet looks end the watch without a repeat.
    #[test]
    fn a_quiet_subflow_ends_the_watch_without_a_repeat() {
        let mut p = Prio::default();
        p.applied(&op(true), at(0));
        assert!(p.due().is_some());
        assert!(p.check(at(200), &socket(50_000)).is_empty());
        assert!(p.check(at(400), &socket(50_000)).is_empty());
        assert!(p.check(at(600), &socket(50_000)).is_empty());
        assert_eq!(p.due(), None);
        assert_eq!(
            p.stats,
            PrioStats {
                heard: 1,
                ..PrioStats::default()
            }
        );
    }

    /// The MP_PRIO was lost: data keeps coming, the flag is sent again; once the repeat is
    /// heard the subflow goes quiet and the watch ends.
    #[test]
    fn data_still_arriving_after_the_flag_sends_it_again() {
        let mut p = Prio::default();
        p.applied(&op(true), at(0));
        assert!(p.check(at(200), &socket(10_000)).is_empty());
        let ops = p.check(at(400), &socket(60_000));
        assert_eq!(ops, vec![op(true)]);
        // The daemon carries it out and reports it.
        p.applied(&ops[0], at(400));
        // The repeat's own in-flight data is a new baseline, not a reason for another.
        assert!(p.check(at(600), &socket(90_000)).is_empty());
        assert!(p.check(at(800), &socket(90_000)).is_empty());
        assert!(p.check(at(1000), &socket(90_000)).is_empty());
        assert_eq!(p.due(), None);
        assert_eq!((p.stats.resent, p.stats.heard, p.stats.unheard), (1, 1, 0));
    }

    /// A peer that keeps sending (it has no other subflow) gets at most MAX_RESENDS repeats.
    #[test]
    fn repeats_are_bounded() {
        let mut p = Prio::default();
        p.applied(&op(true), at(0));
        let mut sent = 0;
        let mut bytes = 0;
        for i in 1..50 {
            bytes += 10_000;
            let ops = p.check(at(200 * i), &socket(bytes));
            for o in &ops {
                p.applied(o, at(200 * i));
            }
            sent += ops.len();
        }
        assert_eq!(sent, MAX_RESENDS as usize);
        assert_eq!(p.due(), None);
        assert_eq!(p.stats.unheard, 1);
    }

    /// Clearing the flag, or the subflow closing, ends the watch.
    #[test]
    fn a_cleared_flag_or_a_closed_subflow_ends_the_watch() {
        let mut p = Prio::default();
        p.applied(&op(true), at(0));
        p.applied(&op(false), at(0));
        assert_eq!(p.due(), None);
        p.applied(&op(true), at(0));
        assert!(p.check(at(200), &socket(1)).is_empty());
        assert!(p.check(at(400), &[]).is_empty());
        assert_eq!(p.due(), None);
        assert_eq!(p.stats, PrioStats::default());
    }

    /// The first look comes CHECK after the flag, the next ones every CHECK; a look before
    /// a watch is due leaves it alone.
    #[test]
    fn looks_are_due_every_check_while_watching() {
        let mut p = Prio::default();
        assert_eq!(p.due(), None);
        p.applied(&op(true), at(5));
        assert_eq!(p.due(), Some(at(205)));
        assert!(p.check(at(100), &socket(0)).is_empty());
        assert_eq!(p.due(), Some(at(205)));
        p.check(at(210), &socket(0));
        assert_eq!(p.due(), Some(at(410)));
        // Data at a look not yet due is not counted against the peer.
        assert!(p.check(at(300), &socket(9_000)).is_empty());
        assert_eq!(p.due(), Some(at(410)));
    }
}
