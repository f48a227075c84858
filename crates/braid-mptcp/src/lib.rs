//! Linux kernel MPTCP over netlink: the client side of the `mptcp_pm` generic-netlink
//! family (a userspace path manager's commands and the kernel's events) and an
//! rtnetlink monitor of links and addresses.
//!
//! ```text
//!  braid pm ──PmClient──► mptcp_pm commands (ANNOUNCE, SUBFLOW_CREATE, SET_FLAGS…)
//!           ◄─PmEvents─── mptcp_pm_events group (CREATED, SUB_ESTABLISHED…)
//!           ◄─NetMonitor─ rtnetlink (links up/down, addresses new/gone)
//! braid route ─RouteClient─► rtnetlink routes and policy rules (per-interface tables)
//! ```
//!
//! Every socket is opened in the network namespace of the calling thread and
//! registered with the tokio runtime it is created in (which must have I/O enabled).
//! [`netns`] creates namespaces and runs code in them, for tests.
//!
//! # Port byte order
//! The kernel reads and writes the port of a command's address attribute
//! (`MPTCP_PM_ADDR_ATTR_PORT`) in host order (`nla_get_u16()` then `htons()`), while
//! the ports of events (`MPTCP_ATTR_SPORT`, `_DPORT`) are in network order
//! (`nla_put_be16()`); `mptcp_pm.yaml` says big-endian for both. This crate follows
//! the kernel's code, and the namespace tests check it.
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod client;
pub mod diag;
pub mod genl;
pub mod netns;
mod nl;
pub mod nl80211;
pub mod route;
pub mod rtmon;

use std::io;

pub use client::{PmClient, PmEvents};
pub use diag::{MptcpDiag, MptcpInfo, TcpState};
pub use genl::{
    AddrFlags, ConnInfo, Endpoint, ParseError, PmAddr, PmCommand, PmEvent, Reset, SubflowInfo,
    Token,
};
pub use rtmon::{NetEvent, NetMonitor};

/// An error of a netlink request or of the event stream.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `mptcp_pm` is not registered: MPTCP is not built or not loaded.
    #[error(
        "the kernel has no mptcp_pm generic-netlink family: is MPTCP enabled (CONFIG_MPTCP, net.mptcp.enabled)?"
    )]
    FamilyMissing,
    /// The kernel refused a request.
    #[error("{op}: {} (errno {errno}){}", strerror(*errno), msg.as_ref().map(|m| format!(": {m}")).unwrap_or_default())]
    Kernel {
        /// The command, as named in the kernel header (`SUBFLOW_CREATE`, `RTM_GETLINK`…).
        op: &'static str,
        /// The errno, positive (22 is `EINVAL`).
        errno: i32,
        /// The kernel's extended-ACK message, if it gave one.
        msg: Option<String>,
    },
    /// A socket error.
    #[error("netlink socket: {0}")]
    Io(#[from] io::Error),
    /// A reply the crate could not decode.
    #[error(transparent)]
    Parse(#[from] ParseError),
}

impl Error {
    /// The kernel's errno, for [`Error::Kernel`] and for socket errors.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Error::Kernel { errno, .. } => Some(*errno),
            Error::Io(e) => e.raw_os_error(),
            Error::FamilyMissing | Error::Parse(_) => None,
        }
    }
}

/// The text of an errno ("Invalid argument"), without the number.
fn strerror(errno: i32) -> &'static str {
    nix::errno::Errno::from_raw(errno).desc()
}

/// The MPTCP path manager of the calling thread's network namespace: `"kernel"` or
/// `"userspace"`. Reads `/proc/sys/net/mptcp/path_manager` (Linux 6.15+), else
/// `pm_type` (0 is `"kernel"`, 1 `"userspace"`; another value is returned as it is).
pub fn path_manager_mode() -> io::Result<String> {
    match std::fs::read_to_string("/proc/sys/net/mptcp/path_manager") {
        Ok(s) => return Ok(s.trim().to_string()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let t = std::fs::read_to_string("/proc/sys/net/mptcp/pm_type")?;
    Ok(match t.trim() {
        "0" => "kernel".to_string(),
        "1" => "userspace".to_string(),
        other => other.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The daemon moves clients and streams into tasks, and awaits them there.
    #[test]
    fn sockets_and_their_futures_are_send() {
        fn send<T: Send>(_: &T) {}
        fn future_of<F: std::future::Future + Send>(_: impl FnOnce() -> F) {}
        fn all(c: &mut PmClient, e: &mut PmEvents, m: &mut NetMonitor) {
            send(c);
            send(e);
            send(m);
            future_of(|| c.get_limits());
            future_of(|| e.next());
            future_of(|| m.next());
        }
        let _ = all;
        future_of(PmClient::connect);
        future_of(NetMonitor::connect);
    }

    #[test]
    fn error_messages_are_one_line() {
        let e = Error::Kernel {
            op: "SUBFLOW_CREATE",
            errno: 22,
            msg: Some("invalid token".into()),
        };
        assert_eq!(
            e.to_string(),
            "SUBFLOW_CREATE: Invalid argument (errno 22): invalid token"
        );
        assert_eq!(e.errno(), Some(22));
        let e = Error::Kernel {
            op: "REMOVE",
            errno: 3,
            msg: None,
        };
        assert_eq!(e.to_string(), "REMOVE: No such process (errno 3)");
        assert!(
            Error::FamilyMissing
                .to_string()
                .starts_with("the kernel has no mptcp_pm")
        );
        let e = Error::Parse(ParseError::Missing("MPTCP_ATTR_TOKEN"));
        assert_eq!(e.to_string(), "attribute MPTCP_ATTR_TOKEN is missing");
        for e in [
            Error::FamilyMissing,
            Error::Io(io::Error::from_raw_os_error(105)),
        ] {
            assert!(!e.to_string().contains('\n'));
        }
    }
}
