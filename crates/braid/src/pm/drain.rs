//! How `braid pm` removes a kernel subflow without making the kernel re-send what the other
//! subflows already carry.
//!
//! On every subflow close (SUBFLOW_DESTROY, REMOVE, or TCP closing it) the kernel re-injects
//! the connection's whole MPTCP-level retransmission queue, every byte written and not yet
//! DATA_ACKed, whichever subflow carried it (`__mptcp_close_ssk()` →
//! `__mptcp_retransmit_pending_data()`, net/mptcp/protocol.c). Those copies queue on the
//! remaining subflows ahead of new data: a bulk sender whose send buffer holds a megabyte
//! stalls for that megabyte's transmission time. So a removal the policy asks for is done in
//! two steps:
//!
//! 1. at once, SET_FLAGS backup (MP_PRIO) if the subflow is not backup yet: the kernel's
//!    scheduler puts no new data on it, and what it carries drains;
//! 2. SUBFLOW_DESTROY later, when the connection has at most `max_unacked` bytes not
//!    acknowledged (read from sock_diag, [`braid_mptcp::MptcpInfo::unacked`]): the re-sent
//!    copies then cost little. Until then the subflow stays as a backup the scheduler does not
//!    use, or until the kernel closes it itself (its own timeouts, or the peer).
//!
//! One exception: a subflow whose link is gone while its TCP socket still holds data
//! ([`braid_mptcp::TcpState::holds_data`]: sent and not acknowledged, or not sent yet) is
//! destroyed at once. That data is lost with the link; the close makes the kernel send it on
//! the other subflows now, where waiting would leave it to the kernel's stale detection (a
//! few retransmission timeouts, `mptcp_pm_subflow_chk_stale()`), which re-sends the same
//! queue later. A subflow whose link is gone and that holds nothing waits for the drain at most
//! [`DEAD_IDLE_WAIT`]: nothing will ever close it (no data, no timer), and a bulk sender may
//! never let the connection drain, so without a bound it would stay for good, taking a place
//! of the kernel's subflow limit that the link needs when it comes back.
//!
//! Any parked subflow is destroyed after [`DRAIN_MAX_WAIT`] at the latest, drained or not: a
//! bulk sender that never lets the connection drain would otherwise keep it parked for good,
//! holding a place of the kernel's subflow limit that the policy may need for the subflow it
//! moved to; the re-send is then the price of that place.
//!
//! The policy (`braid_pm::Manager`) has forgotten the subflow at step 1: the kernel's later
//! events for it (SUB_PRIORITY after the flag, SUB_CLOSED after the destroy) name a subflow
//! the policy no longer holds, and it ignores them.

use braid_core::Instant;
use braid_mptcp::{MptcpInfo, TcpState, Token};
use braid_pm::SubflowId;

use super::bridge::KernelOp;

/// How long a parked subflow whose link is gone and that holds no data waits for its
/// connection to drain before it is destroyed anyway.
pub const DEAD_IDLE_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// How long any parked subflow waits for its connection to drain before it is destroyed
/// anyway.
pub const DRAIN_MAX_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// A subflow the policy removed, waiting for its connection to drain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parked {
    pub id: SubflowId,
    pub token: Token,
    pub local: std::net::SocketAddr,
    pub remote: std::net::SocketAddr,
    pub since: Instant,
}

/// What the kernel holds, for [`Drain::check`].
#[derive(Debug, Default)]
pub struct KernelState<'a> {
    pub conns: &'a [MptcpInfo],
    pub sockets: &'a [TcpState],
}

/// Counters for `status`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DrainStats {
    /// Removals that went through the drain (set backup first when needed).
    pub parked: u64,
    /// Destroys issued once the connection had drained.
    pub destroyed_drained: u64,
    /// Destroys issued at once because the subflow's link was gone with data on it.
    pub destroyed_lost: u64,
    /// Destroys of subflows whose link was gone, idle, after [`DEAD_IDLE_WAIT`] undrained.
    pub destroyed_dead_idle: u64,
    /// Destroys of subflows still undrained after [`DRAIN_MAX_WAIT`] (link working).
    pub destroyed_timeout: u64,
    /// Parked subflows the kernel closed itself.
    pub closed_by_kernel: u64,
    /// Largest unacknowledged amount a destroy was issued with.
    pub max_unacked_at_destroy: u64,
}

#[derive(Debug)]
pub struct Drain {
    /// `None`: destroy at once (no drain).
    max_unacked: Option<u64>,
    parked: Vec<Parked>,
    pub stats: DrainStats,
}

impl Drain {
    pub fn new(max_unacked: Option<u64>) -> Drain {
        Drain {
            max_unacked,
            parked: Vec::new(),
            stats: DrainStats::default(),
        }
    }

    pub fn parked(&self) -> &[Parked] {
        &self.parked
    }

    pub fn is_parked(&self, id: SubflowId) -> bool {
        self.parked.iter().any(|p| p.id == id)
    }

    /// The policy removes subflow `id` (`backup`: its current flag): the requests to make
    /// now. With draining, the subflow is flagged backup (if it is not) and parked.
    pub fn remove(
        &mut self,
        id: SubflowId,
        token: Token,
        local: std::net::SocketAddr,
        remote: std::net::SocketAddr,
        backup: bool,
        now: Instant,
    ) -> Vec<KernelOp> {
        if self.max_unacked.is_none() {
            return vec![KernelOp::SubflowDestroy {
                token,
                local,
                remote,
            }];
        }
        if self.is_parked(id) {
            return Vec::new();
        }
        self.stats.parked += 1;
        self.parked.push(Parked {
            id,
            token,
            local,
            remote,
            since: now,
        });
        if backup {
            Vec::new()
        } else {
            vec![KernelOp::SetBackup {
                token,
                local,
                remote,
                backup: true,
            }]
        }
    }

    /// Looks at the parked subflows against what the kernel holds at `now` (`dead`: whether a
    /// subflow's link is gone): the destroys to make now.
    pub fn check(
        &mut self,
        now: Instant,
        k: &KernelState<'_>,
        dead: impl Fn(&Parked) -> bool,
    ) -> Vec<KernelOp> {
        let Some(max) = self.max_unacked else {
            return Vec::new();
        };
        let mut ops = Vec::new();
        let stats = &mut self.stats;
        self.parked.retain(|p| {
            let Some(conn) = k.conns.iter().find(|c| c.token == p.token.0) else {
                // The connection is gone.
                return false;
            };
            let sock = k
                .sockets
                .iter()
                .find(|t| t.local == p.local && t.remote == p.remote);
            let dead = dead(p);
            let lost = dead && sock.is_some_and(|t| t.holds_data());
            let waited = now.saturating_since(p.since);
            let dead_idle = dead && !lost && waited >= DEAD_IDLE_WAIT;
            let timeout = waited >= DRAIN_MAX_WAIT;
            let unacked = conn.unacked();
            if !lost && !dead_idle && !timeout && unacked > max {
                return true;
            }
            if lost {
                stats.destroyed_lost += 1;
            } else if dead_idle && unacked > max {
                stats.destroyed_dead_idle += 1;
            } else if unacked > max {
                stats.destroyed_timeout += 1;
            } else {
                stats.destroyed_drained += 1;
                stats.max_unacked_at_destroy = stats.max_unacked_at_destroy.max(unacked);
            }
            ops.push(KernelOp::SubflowDestroy {
                token: p.token,
                local: p.local,
                remote: p.remote,
            });
            false
        });
        ops
    }

    /// The kernel closed a subflow (or the whole connection, `id` `None`): forget it.
    /// Returns whether it was parked.
    pub fn closed(&mut self, token: Token, id: Option<SubflowId>) -> bool {
        let before = self.parked.len();
        self.parked
            .retain(|p| !(p.token == token && (id.is_none() || Some(p.id) == id)));
        let gone = before - self.parked.len();
        if id.is_some() {
            self.stats.closed_by_kernel += gone as u64;
        }
        gone > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(s: &str) -> std::net::SocketAddr {
        s.parse().unwrap()
    }

    fn info(token: u32, unacked: u64) -> MptcpInfo {
        MptcpInfo {
            token,
            subflows: 1,
            write_seq: 10_000_000 + unacked,
            snd_una: 10_000_000,
        }
    }

    fn sock(unacked: u32, notsent: u32) -> TcpState {
        TcpState {
            local: sa("10.0.1.1:40000"),
            remote: sa("10.0.9.2:5201"),
            unacked,
            notsent,
            bytes_acked: 0,
            bytes_received: 0,
            backoff: 0,
        }
    }

    #[test]
    fn a_removal_flags_backup_then_destroys_once_drained() {
        let mut d = Drain::new(Some(32_768));
        let (l, r) = (sa("10.0.1.1:40000"), sa("10.0.9.2:5201"));
        let t = Token(7);
        let ops = d.remove(SubflowId(3), t, l, r, false, Instant::ZERO);
        assert_eq!(
            ops,
            vec![KernelOp::SetBackup {
                token: t,
                local: l,
                remote: r,
                backup: true
            }]
        );
        // Asked again while parked: nothing new.
        assert!(
            d.remove(SubflowId(3), t, l, r, true, Instant::ZERO)
                .is_empty()
        );
        // A megabyte not acknowledged: a destroy now would re-send it. The subflow's link
        // works (it drains), or it holds nothing: it stays.
        for (s, dead) in [(sock(5, 0), false), (sock(0, 0), true)] {
            let k = KernelState {
                conns: &[info(7, 1 << 20)],
                sockets: &[s],
            };
            assert!(d.check(Instant::ZERO, &k, |_| dead).is_empty());
            assert!(d.is_parked(SubflowId(3)));
        }
        let k = KernelState {
            conns: &[info(7, 20_000)],
            sockets: &[sock(0, 0)],
        };
        let ops = d.check(Instant::ZERO, &k, |_| false);
        assert_eq!(
            ops,
            vec![KernelOp::SubflowDestroy {
                token: t,
                local: l,
                remote: r
            }]
        );
        assert!(!d.is_parked(SubflowId(3)));
        assert_eq!(d.stats.destroyed_drained, 1);
        assert_eq!(d.stats.max_unacked_at_destroy, 20_000);
    }

    #[test]
    fn an_idle_subflow_whose_link_went_is_destroyed_after_the_bounded_wait() {
        let mut d = Drain::new(Some(32_768));
        let (l, r) = (sa("10.0.1.1:40000"), sa("10.0.9.2:5201"));
        d.remove(SubflowId(3), Token(7), l, r, false, Instant::ZERO);
        // A bulk sender keeps a megabyte unacknowledged: the connection never drains.
        let k = KernelState {
            conns: &[info(7, 1 << 20)],
            sockets: &[sock(0, 0)],
        };
        let just_before = Instant::ZERO + DEAD_IDLE_WAIT - std::time::Duration::from_millis(1);
        assert!(d.check(just_before, &k, |_| true).is_empty());
        // Its link works: it may still drain, it stays.
        assert!(
            d.check(Instant::ZERO + DEAD_IDLE_WAIT, &k, |_| false)
                .is_empty()
        );
        assert_eq!(
            d.check(Instant::ZERO + DEAD_IDLE_WAIT, &k, |_| true),
            vec![KernelOp::SubflowDestroy {
                token: Token(7),
                local: l,
                remote: r
            }]
        );
        assert_eq!(d.stats.destroyed_dead_idle, 1);
        assert!(d.parked().is_empty());
    }

    #[test]
    fn a_subflow_that_never_drains_is_destroyed_after_the_longest_wait() {
        let mut d = Drain::new(Some(32_768));
        let (l, r) = (sa("10.0.1.1:40000"), sa("10.0.9.2:5201"));
        d.remove(SubflowId(3), Token(7), l, r, false, Instant::ZERO);
        // Its link works and carries data, a bulk sender keeps a megabyte unacknowledged.
        let k = KernelState {
            conns: &[info(7, 1 << 20)],
            sockets: &[sock(5, 0)],
        };
        let just_before = Instant::ZERO + DRAIN_MAX_WAIT - std::time::Duration::from_millis(1);
        assert!(d.check(just_before, &k, |_| false).is_empty());
        assert!(d.is_parked(SubflowId(3)));
        assert_eq!(
            d.check(Instant::ZERO + DRAIN_MAX_WAIT, &k, |_| false),
            vec![KernelOp::SubflowDestroy {
                token: Token(7),
                local: l,
                remote: r
            }]
        );
        assert_eq!(d.stats.destroyed_timeout, 1);
        assert_eq!(d.stats.destroyed_drained, 0);
        assert!(d.parked().is_empty());
    }

    #[test]
    fn a_subflow_whose_link_went_with_data_on_it_is_destroyed_at_once() {
        let mut d = Drain::new(Some(32_768));
        let (l, r) = (sa("10.0.1.1:40000"), sa("10.0.9.2:5201"));
        d.remove(SubflowId(3), Token(7), l, r, false, Instant::ZERO);
        let k = KernelState {
            conns: &[info(7, 1 << 20)],
            sockets: &[sock(0, 64_000)],
        };
        assert_eq!(d.check(Instant::ZERO, &k, |_| true).len(), 1);
        assert_eq!(d.stats.destroyed_lost, 1);
        assert!(d.parked().is_empty());
    }

    #[test]
    fn an_already_backup_subflow_is_only_parked_and_the_kernel_may_close_it() {
        let mut d = Drain::new(Some(0));
        let (l, r) = (sa("10.0.1.1:40000"), sa("10.0.9.2:5201"));
        assert!(
            d.remove(SubflowId(1), Token(1), l, r, true, Instant::ZERO)
                .is_empty()
        );
        assert!(d.closed(Token(1), Some(SubflowId(1))));
        assert!(!d.closed(Token(1), Some(SubflowId(1))));
        assert_eq!(d.stats.closed_by_kernel, 1);
        // A connection gone: its parked subflows are forgotten.
        d.remove(SubflowId(2), Token(2), l, r, true, Instant::ZERO);
        assert!(
            d.check(Instant::ZERO, &KernelState::default(), |_| false)
                .is_empty()
        );
        assert!(d.parked().is_empty());
    }

    #[test]
    fn each_connection_drains_on_its_own_and_a_vanished_socket_is_not_lost_data() {
        let mut d = Drain::new(Some(32_768));
        let (l, r) = (sa("10.0.1.1:40000"), sa("10.0.9.2:5201"));
        let l2 = sa("10.0.1.1:40002");
        d.remove(SubflowId(1), Token(1), l, r, false, Instant::ZERO);
        d.remove(SubflowId(2), Token(2), l2, r, false, Instant::ZERO);
        // Connection 1 drained, connection 2 not; the link is gone but no socket is listed
        // (the kernel already dropped it): nothing known lost, connection 2 waits.
        let k = KernelState {
            conns: &[info(1, 100), info(2, 1 << 20)],
            sockets: &[],
        };
        let ops = d.check(Instant::ZERO, &k, |_| true);
        assert_eq!(
            ops,
            vec![KernelOp::SubflowDestroy {
                token: Token(1),
                local: l,
                remote: r
            }]
        );
        assert_eq!(d.parked().len(), 1);
        assert!(d.is_parked(SubflowId(2)));
        assert_eq!((d.stats.destroyed_drained, d.stats.destroyed_lost), (1, 0));
        // The connection closing forgets its parked subflows without counting them as
        // closed by the kernel one by one.
        assert!(d.closed(Token(2), None));
        assert!(d.parked().is_empty());
        assert_eq!(d.stats.closed_by_kernel, 0);
    }

    #[test]
    fn without_draining_a_removal_destroys_at_once() {
        let mut d = Drain::new(None);
        let (l, r) = (sa("10.0.1.1:40000"), sa("10.0.9.2:5201"));
        let ops = d.remove(SubflowId(1), Token(1), l, r, false, Instant::ZERO);
        assert!(matches!(ops[..], [KernelOp::SubflowDestroy { .. }]));
        assert!(d.parked().is_empty());
    }
}
