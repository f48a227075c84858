//! How `braid pm` makes sure the peer heard that a subflow became backup, or active again.
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
//! the opposite flag.
//!
//! A peer that has heard the flag but has no other subflow to send on (every subflow backup)
//! keeps using this one: the repeats are then useless, and cost one pure ACK each.
//!
//! Clearing the flag is one MP_PRIO too, and a peer that misses it keeps the subflow as a
//! backup it does not use while another subflow can send. So a cleared flag is watched the
//! other way round: data on the subflow ends the watch (heard); no data on it while the
//! connection's other subflows receive sends SET_FLAGS active again, at most [`MAX_RESENDS`]
//! times; two looks in a row with nothing received anywhere end it (nothing to judge by). A
//! peer whose scheduler simply prefers another subflow gets the same few pure ACKs.

use braid_core::Instant;
use braid_mptcp::{TcpState, Token};
use std::net::SocketAddr;

use super::bridge::KernelOp;

/// How often a watched subflow is looked at.
pub const CHECK: std::time::Duration = std::time::Duration::from_millis(200);

/// MP_PRIO re-sent at most this many times per change of the flag.
pub const MAX_RESENDS: u32 = 4;

/// Looks in a row without data that end a watch: the peer heard the flag.
const QUIET_LOOKS: u32 = 2;

/// A subflow whose flag was set or cleared, watched until the peer is seen to have heard it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Watch {
    token: Token,
    local: SocketAddr,
    remote: SocketAddr,
    /// The flag sent.
    backup: bool,
    /// When it is looked at next.
    next: Instant,
    /// `tcpi_bytes_received` of the subflow and the sum over the connection's other subflows
    /// at the last look (`None`: not looked at yet).
    received: Option<(u64, u64)>,
    quiet: u32,
    resent: u32,
}

/// Counters for `status`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PrioStats {
    /// MP_PRIO sent again: a backup subflow still received data, or an active one received
    /// none while the connection's others did.
    pub resent: u64,
    /// Watches ended with the peer seen to have heard the flag.
    pub heard: u64,
    /// Watches given up after [`MAX_RESENDS`] repeats.
    pub unheard: u64,
}

#[derive(Debug, Default)]
pub struct Prio {
    watches: Vec<Watch>,
    pub stats: PrioStats,
}

impl Prio {
    /// A SET_FLAGS request the kernel carried out at `now` starts a watch of the subflow,
    /// first looked at [`CHECK`] later (what the peer had in flight arrives meanwhile); a
    /// repeat continues it; the opposite flag replaces it.
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
        let same = |w: &Watch| (w.token, w.local, w.remote) == (token, local, remote);
        if let Some(w) = self
            .watches
            .iter_mut()
            .find(|w| same(w) && w.backup == backup)
        {
            // A repeat: the data in flight before it is not the peer's fault.
            (w.next, w.received, w.quiet) = (now + CHECK, None, 0);
            return;
        }
        self.watches.retain(|w| !same(w));
        self.watches.push(Watch {
            token,
            local,
            remote,
            backup,
            next: now + CHECK,
            received: None,
            quiet: 0,
            resent: 0,
        });
    }

    /// Looks at the watched subflows due by `now` in `sockets` (sock_diag's TCP sockets);
    /// `known` lists every subflow (token, local, remote), for a connection's others: the
    /// repeats to send.
    pub fn check(
        &mut self,
        now: Instant,
        sockets: &[TcpState],
        known: &[(Token, SocketAddr, SocketAddr)],
    ) -> Vec<KernelOp> {
        let received = |local: SocketAddr, remote: SocketAddr| {
            sockets
                .iter()
                .find(|s| s.local == local && s.remote == remote)
                .map(|s| s.bytes_received)
        };
        let mut out = Vec::new();
        let stats = &mut self.stats;
        self.watches.retain_mut(|w| {
            if w.next > now {
                return true;
            }
            w.next = now + CHECK;
            // Closed (destroyed by the drain, the kernel or the peer).
            let Some(own) = received(w.local, w.remote) else {
                return false;
            };
            let others: u64 = known
                .iter()
                .filter(|&&(t, l, r)| t == w.token && (l, r) != (w.local, w.remote))
                .filter_map(|&(_, l, r)| received(l, r))
                .sum();
            let Some((own0, others0)) = w.received.replace((own, others)) else {
                return true;
            };
            let (own_grew, others_grew) = (own > own0, others > others0);
            // Whether what was seen says the peer has not heard the flag (`Some(true)`), has
            // heard it (`Some(false)`), or nothing (`None`).
            let unheard = match (w.backup, own_grew, others_grew) {
                (true, true, _) => Some(true),
                (true, false, _) => None,
                (false, true, _) => Some(false),
                (false, false, true) => Some(true),
                (false, false, false) => None,
            };
            match unheard {
                Some(false) => {
                    stats.heard += 1;
                    false
                }
                None => {
                    w.quiet += 1;
                    if w.quiet < QUIET_LOOKS {
                        return true;
                    }
                    // A backup subflow quiet for long enough: heard.
                    stats.heard += u64::from(w.backup);
                    false
                }
                Some(true) if w.resent >= MAX_RESENDS => {
                    stats.unheard += 1;
                    false
                }
                Some(true) => {
                    w.quiet = 0;
                    w.resent += 1;
                    stats.resent += 1;
                    out.push(KernelOp::SetBackup {
                        token: w.token,
                        local: w.local,
                        remote: w.remote,
                        backup: w.backup,
                    });
                    true
                }
            }
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
    const OTHER: &str = "10.0.2.1:40001";
    const REMOTE: &str = "10.0.0.2:5201";

    fn op(backup: bool) -> KernelOp {
        KernelOp::SetBackup {
            token: Token(7),
            local: LOCAL.parse().unwrap(),
            remote: REMOTE.parse().unwrap(),
            backup,
        }
    }

    fn tcp(local: &str, bytes_received: u64) -> TcpState {
        TcpState {
            local: local.parse().unwrap(),
            remote: REMOTE.parse().unwrap(),
            unacked: 0,
            notsent: 0,
            bytes_acked: 0,
            bytes_received,
            backoff: 0,
        }
    }

    /// The watched subflow's socket and the connection's other subflow's.
    fn socks(own: u64, other: u64) -> Vec<TcpState> {
        vec![tcp(LOCAL, own), tcp(OTHER, other)]
    }

    fn known() -> Vec<(Token, SocketAddr, SocketAddr)> {
        [LOCAL, OTHER]
            .iter()
            .map(|l| (Token(7), l.parse().unwrap(), REMOTE.parse().unwrap()))
            .collect()
    }

    fn at(ms: u64) -> Instant {
        Instant::from_micros(ms * 1000)
    }

    /// Looks at `p` at `ms` with the two subflows' counts; the repeats.
    fn look(p: &mut Prio, ms: u64, own: u64, other: u64) -> Vec<KernelOp> {
        let ops = p.check(at(ms), &socks(own, other), &known());
        for o in &ops {
            p.applied(o, at(ms));
        }
        ops
    }

    /// The peer heard the backup flag: what it had in flight arrives before the first look,
    /// then nothing on the subflow; two quiet looks end the watch without a repeat.
    #[test]
    fn a_quiet_backup_subflow_ends_the_watch_without_a_repeat() {
        let mut p = Prio::default();
        p.applied(&op(true), at(0));
        assert!(p.due().is_some());
        assert!(look(&mut p, 200, 50_000, 0).is_empty());
        assert!(look(&mut p, 400, 50_000, 9_000).is_empty());
        assert!(look(&mut p, 600, 50_000, 18_000).is_empty());
        assert_eq!(p.due(), None);
        assert_eq!(
            p.stats,
            PrioStats {
                heard: 1,
                ..PrioStats::default()
            }
        );
    }

    /// The MP_PRIO was lost: data keeps coming on the backup subflow, the flag is sent again;
    /// once the repeat is heard the subflow goes quiet and the watch ends.
    #[test]
    fn data_still_arriving_after_the_backup_flag_sends_it_again() {
        let mut p = Prio::default();
        p.applied(&op(true), at(0));
        assert!(look(&mut p, 200, 10_000, 0).is_empty());
        assert_eq!(look(&mut p, 400, 60_000, 0), vec![op(true)]);
        // The repeat's own in-flight data is a new baseline, not a reason for another.
        assert!(look(&mut p, 600, 90_000, 0).is_empty());
        assert!(look(&mut p, 800, 90_000, 5_000).is_empty());
        assert!(look(&mut p, 1000, 90_000, 9_000).is_empty());
        assert_eq!(p.due(), None);
        assert_eq!((p.stats.resent, p.stats.heard, p.stats.unheard), (1, 1, 0));
    }

    /// A peer that keeps sending (it has no other subflow) gets at most MAX_RESENDS repeats.
    #[test]
    fn repeats_are_bounded() {
        let mut p = Prio::default();
        p.applied(&op(true), at(0));
        let mut sent = 0;
        for i in 1..50 {
            sent += look(&mut p, 200 * i, 10_000 * i, 0).len();
        }
        assert_eq!(sent, MAX_RESENDS as usize);
        assert_eq!(p.due(), None);
        assert_eq!(p.stats.unheard, 1);
    }

    /// A cleared flag the peer heard: the subflow receives again, the watch ends.
    #[test]
    fn data_on_a_subflow_made_active_ends_its_watch() {
        let mut p = Prio::default();
        p.applied(&op(false), at(0));
        assert!(look(&mut p, 200, 0, 100_000).is_empty());
        assert!(look(&mut p, 400, 40_000, 150_000).is_empty());
        assert_eq!(p.due(), None);
        assert_eq!((p.stats.resent, p.stats.heard), (0, 1));
    }

    /// A cleared flag the peer missed: nothing on the subflow while the other receives, the
    /// flag is cleared again; the repeat heard, the subflow receives.
    #[test]
    fn a_subflow_made_active_that_stays_unused_beside_a_busy_one_clears_again() {
        let mut p = Prio::default();
        p.applied(&op(false), at(0));
        assert!(look(&mut p, 200, 0, 100_000).is_empty());
        assert_eq!(look(&mut p, 400, 0, 150_000), vec![op(false)]);
        assert!(look(&mut p, 600, 0, 200_000).is_empty());
        assert!(look(&mut p, 800, 30_000, 230_000).is_empty());
        assert_eq!(p.due(), None);
        assert_eq!((p.stats.resent, p.stats.heard), (1, 1));
    }

    /// A connection that receives nothing at all says nothing about a cleared flag: two such
    /// looks end the watch, with no repeat and nothing counted.
    #[test]
    fn an_idle_connection_ends_a_cleared_flags_watch_without_a_verdict() {
        let mut p = Prio::default();
        p.applied(&op(false), at(0));
        for ms in [200, 400, 600] {
            assert!(look(&mut p, ms, 5, 5).is_empty());
        }
        assert_eq!(p.due(), None);
        assert_eq!(p.stats, PrioStats::default());
    }

    /// The opposite flag replaces a watch; the subflow closing ends it.
    #[test]
    fn the_opposite_flag_replaces_a_watch_and_a_closed_subflow_ends_it() {
        let mut p = Prio::default();
        p.applied(&op(true), at(0));
        p.applied(&op(false), at(100));
        assert_eq!(p.due(), Some(at(300)));
        assert!(look(&mut p, 300, 0, 1).is_empty());
        // Data on it now says the clear was heard, not that a backup flag was missed.
        assert!(look(&mut p, 500, 10_000, 1).is_empty());
        assert_eq!((p.stats.resent, p.stats.heard), (0, 1));
        p.applied(&op(true), at(600));
        assert!(look(&mut p, 800, 10_000, 1).is_empty());
        assert!(p.check(at(1000), &[], &known()).is_empty());
        assert_eq!(p.due(), None);
        assert_eq!(p.stats.resent, 0);
    }

    /// The first look comes CHECK after the flag, the next ones every CHECK; a look before a
    /// watch is due leaves it alone.
    #[test]
    fn looks_are_due_every_check_while_watching() {
        let mut p = Prio::default();
        assert_eq!(p.due(), None);
        p.applied(&op(true), at(5));
        assert_eq!(p.due(), Some(at(205)));
        assert!(look(&mut p, 100, 0, 0).is_empty());
        assert_eq!(p.due(), Some(at(205)));
        look(&mut p, 210, 0, 0);
        assert_eq!(p.due(), Some(at(410)));
        // Data at a look not yet due is not counted against the peer.
        assert!(look(&mut p, 300, 9_000, 0).is_empty());
        assert_eq!(p.due(), Some(at(410)));
    }
}
