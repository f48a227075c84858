//! How `braid pm` gets a returning link's subflow carrying data at once.
//!
//! A subflow whose link went silent while it had data out backs off its retransmission timer:
//! each timeout doubles the wait (`rto << backoff`, `tcpi_backoff`). One whose transmits failed
//! locally meanwhile (a firewall drop, no route: nothing leaves, nothing is out) retries on the
//! probe timer, backed off the same way. When the link works again the socket still sends
//! nothing, new data included, until that timer fires: after a 3 s silence from a 200 ms RTO
//! that is up to 3.2 s later, measured 200–290 ms after the signal came back in `pm_netns`'s
//! E9 test. Clearing the subflow's backup flag (MP_PRIO) does not touch the timer.
//!
//! So when the policy makes a subflow active again and sock_diag shows its socket in backoff
//! holding data ([`braid_mptcp::TcpState::in_backoff`]), `braid pm` replaces it:
//!
//! 1. SUBFLOW_CREATE from the same local address (a new port) to the same remote: a fresh
//!    socket with no backoff, which the kernel's scheduler uses as soon as it is established
//!    (one round trip);
//! 2. once the kernel reports it established (SUB_ESTABLISHED), SUBFLOW_DESTROY of the old
//!    one. The kernel re-sends what was not DATA_ACKed yet on the working subflows
//!    (`__mptcp_retransmit_pending_data()`): nothing is lost.
//!
//! The policy sees a new subflow of the same interface and the old one closed; it keeps
//! the new one as the interface's subflow. A replacement that is not established within
//! [`REPLACE_WAIT`] is forgotten (the old subflow stays; its own timer still runs), and so is
//! one whose old subflow the kernel closed meanwhile.

use braid_core::Instant;
use braid_mptcp::{TcpState, Token};
use std::net::SocketAddr;

use super::bridge::KernelOp;

/// How long a replacement may take to establish before it is forgotten: the kernel's SYN
/// retries (1, 2, 4 s) fit in it.
pub const REPLACE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// A subflow being replaced, waiting for its replacement to establish.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pending {
    token: Token,
    old_local: SocketAddr,
    remote: SocketAddr,
    since: Instant,
}

/// Counters for `status`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ReviveStats {
    /// Subflows made active again while in retransmission backoff: a replacement was asked.
    pub started: u64,
    /// Old subflows destroyed once their replacement was established.
    pub replaced: u64,
    /// Replacements not established within [`REPLACE_WAIT`] (or whose connection closed).
    pub abandoned: u64,
}

#[derive(Debug, Default)]
pub struct Revive {
    pending: Vec<Pending>,
    pub stats: ReviveStats,
}

impl Revive {
    /// After `op` made a subflow active (SET_FLAGS, backup off): whether its socket, among
    /// `sockets`, waits on a backed-off retransmission timer. If so the replacement is
    /// recorded and `true` returned: the caller asks the kernel for it.
    pub fn activated(&mut self, op: &KernelOp, sockets: &[TcpState], now: Instant) -> bool {
        let KernelOp::SetBackup {
            token,
            local,
            remote,
            backup: false,
        } = *op
        else {
            return false;
        };
        let stuck = sockets
            .iter()
            .any(|t| t.local == local && t.remote == remote && t.in_backoff());
        if !stuck
            || self
                .pending
                .iter()
                .any(|p| p.token == token && p.old_local == local)
        {
            return false;
        }
        self.pending.push(Pending {
            token,
            old_local: local,
            remote,
            since: now,
        });
        self.stats.started += 1;
        true
    }

    /// The request for a replacement failed: forget it.
    pub fn failed(&mut self, token: Token, local: std::net::IpAddr) {
        let before = self.pending.len();
        self.pending
            .retain(|p| !(p.token == token && p.old_local.ip() == local));
        self.stats.abandoned += (before - self.pending.len()) as u64;
    }

    /// A subflow was established: when it replaces one (same connection, local address and
    /// remote, another port), the old one's destroy.
    pub fn established(
        &mut self,
        token: Token,
        local: SocketAddr,
        remote: SocketAddr,
    ) -> Option<KernelOp> {
        let i = self.pending.iter().position(|p| {
            p.token == token
                && p.remote == remote
                && p.old_local.ip() == local.ip()
                && p.old_local != local
        })?;
        let p = self.pending.remove(i);
        self.stats.replaced += 1;
        Some(KernelOp::SubflowDestroy {
            token,
            local: p.old_local,
            remote: p.remote,
        })
    }

    /// A subflow closed: if it is one being replaced, nothing is left to destroy.
    pub fn closed(&mut self, token: Token, local: SocketAddr, remote: SocketAddr) {
        self.pending
            .retain(|p| !(p.token == token && p.old_local == local && p.remote == remote));
    }

    /// The connection closed, or `now` is past a replacement's wait: forget what is pending.
    pub fn expire(&mut self, now: Instant, closed: Option<Token>) {
        let before = self.pending.len();
        self.pending
            .retain(|p| Some(p.token) != closed && now.saturating_since(p.since) < REPLACE_WAIT);
        self.stats.abandoned += (before - self.pending.len()) as u64;
    }

    pub fn pending(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn sock(local: &str, unacked: u32, backoff: u8) -> TcpState {
        sock_notsent(local, unacked, 0, backoff)
    }

    fn sock_notsent(local: &str, unacked: u32, notsent: u32, backoff: u8) -> TcpState {
        TcpState {
            local: sa(local),
            remote: sa("10.0.9.2:5201"),
            unacked,
            notsent,
            bytes_acked: 0,
            bytes_received: 0,
            backoff,
        }
    }

    fn activate(local: &str) -> KernelOp {
        KernelOp::SetBackup {
            token: Token(7),
            local: sa(local),
            remote: sa("10.0.9.2:5201"),
            backup: false,
        }
    }

    #[test]
    fn a_subflow_in_backoff_is_replaced_once_the_new_one_is_established() {
        let mut r = Revive::default();
        let t0 = Instant::from_micros(0);
        let socks = [sock("10.0.1.1:40000", 12, 3), sock("10.0.2.1:40001", 40, 0)];
        assert!(r.activated(&activate("10.0.1.1:40000"), &socks, t0));
        // Asked twice (a flapping signal): one replacement.
        assert!(!r.activated(&activate("10.0.1.1:40000"), &socks, t0));
        // Another connection's subflow, or the other interface: nothing to do.
        assert_eq!(
            r.established(Token(8), sa("10.0.1.1:40002"), sa("10.0.9.2:5201")),
            None
        );
        assert_eq!(
            r.established(Token(7), sa("10.0.2.1:40003"), sa("10.0.9.2:5201")),
            None
        );
        assert_eq!(
            r.established(Token(7), sa("10.0.1.1:40002"), sa("10.0.9.2:5201")),
            Some(KernelOp::SubflowDestroy {
                token: Token(7),
                local: sa("10.0.1.1:40000"),
                remote: sa("10.0.9.2:5201"),
            })
        );
        assert_eq!(r.pending(), 0);
        assert_eq!((r.stats.started, r.stats.replaced), (1, 1));
        // Nothing out but data waiting on the probe timer (its transmits failed locally while
        // the link was away): replaced too.
        let socks = [sock_notsent("10.0.1.1:40004", 0, 230_000, 3)];
        assert!(r.activated(&activate("10.0.1.1:40004"), &socks, t0));
    }

    #[test]
    fn a_subflow_without_backoff_or_without_data_out_stays() {
        let mut r = Revive::default();
        let t0 = Instant::from_micros(0);
        // Data out, timer not backed off: it sends as soon as its window allows.
        assert!(!r.activated(
            &activate("10.0.1.1:40000"),
            &[sock("10.0.1.1:40000", 12, 0)],
            t0
        ));
        // Backed off with nothing held: the next write goes out at once.
        assert!(!r.activated(
            &activate("10.0.1.1:40000"),
            &[sock("10.0.1.1:40000", 0, 2)],
            t0
        ));
        // Its socket not found (closed meanwhile).
        assert!(!r.activated(&activate("10.0.1.1:40000"), &[], t0));
        // Made backup, not active.
        let backup = KernelOp::SetBackup {
            token: Token(7),
            local: sa("10.0.1.1:40000"),
            remote: sa("10.0.9.2:5201"),
            backup: true,
        };
        assert!(!r.activated(&backup, &[sock("10.0.1.1:40000", 12, 3)], t0));
        assert_eq!(r.stats, ReviveStats::default());
    }

    #[test]
    fn a_replacement_that_never_establishes_is_forgotten() {
        let mut r = Revive::default();
        let t0 = Instant::from_micros(0);
        let socks = [sock("10.0.1.1:40000", 12, 3)];
        assert!(r.activated(&activate("10.0.1.1:40000"), &socks, t0));
        r.expire(t0 + std::time::Duration::from_secs(1), None);
        assert_eq!(r.pending(), 1);
        r.expire(t0 + REPLACE_WAIT, None);
        assert_eq!(r.pending(), 0);
        assert_eq!(r.stats.abandoned, 1);
        // A failed request, and a closed connection, forget theirs too.
        assert!(r.activated(&activate("10.0.1.1:40000"), &socks, t0));
        r.failed(Token(7), sa("10.0.1.1:40000").ip());
        assert!(r.activated(&activate("10.0.1.1:40000"), &socks, t0));
        r.expire(t0, Some(Token(7)));
        assert_eq!((r.pending(), r.stats.abandoned), (0, 3));
        // The old subflow closed by the kernel meanwhile: nothing left to destroy.
        assert!(r.activated(&activate("10.0.1.1:40000"), &socks, t0));
        r.closed(Token(7), sa("10.0.1.1:40000"), sa("10.0.9.2:5201"));
        assert_eq!(r.pending(), 0);
        assert_eq!(
            r.established(Token(7), sa("10.0.1.1:40002"), sa("10.0.9.2:5201")),
            None
        );
    }
}
