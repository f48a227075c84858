//! The client's glue between its connection and the path manager (braid-pm): the connection's
//! events become path-manager events and the manager's commands are executed on the connection
//! by `braid_pm::ConnAdapter`, the same binding the simulator uses.

use std::net::SocketAddr;

use braid_core::{AddrId, Connection, Instant};
use braid_pm::{self as pm, ConnAdapter, PathManager};
use tracing::debug;

use super::links::Link;

/// The path manager and the number of the connection it manages.
pub(crate) struct Pm {
    pub manager: pm::Manager,
    /// The current connection's number (a new one for every connection).
    pub conn_no: u64,
    /// The adapter that counts the bytes each link carried on connection number `.0`, for the
    /// capacity-aware modes' traffic samples (a new connection starts a new count).
    pub traffic: Option<(u64, ConnAdapter)>,
}

impl Pm {
    /// The current connection as the manager names it.
    pub fn conn(&self) -> pm::ConnId {
        pm::ConnId(self.conn_no)
    }

    /// An event that does not come from the connection (links, addresses, signal).
    pub fn event(&mut self, now: Instant, e: &pm::Event) {
        self.manager.handle_event(now, e);
    }

    /// The event that tells the manager of a new connection whose first path is on link
    /// `first`.
    pub fn created(&self, links: &[Link], first: u8) -> pm::Event {
        adapter(self.conn(), links, first).created(AddrId(first))
    }

    /// Connection events to the manager, its commands to the connection, until neither has
    /// more (through `braid_pm::ConnAdapter`, the binding the simulator uses too). `first` is
    /// the link of the connection's first path. Without a connection the manager's commands
    /// for it are dropped: it asks again once there is one.
    pub fn run(&mut self, now: Instant, conn: Option<&mut Connection>, links: &[Link], first: u8) {
        let Some(conn) = conn else {
            while let Some(c) = self.manager.poll_command() {
                debug!(?c, "path manager command without a connection");
            }
            return;
        };
        if self.manager.wants_traffic() {
            let no = self.conn_no;
            if self.traffic.as_ref().is_none_or(|(n, _)| *n != no) {
                self.traffic = Some((no, adapter(self.conn(), links, first)));
            }
            if let Some((_, t)) = &mut self.traffic {
                let bytes = t.traffic(conn);
                self.manager
                    .handle_event(now, &pm::Event::Traffic { bytes });
            }
        }
        let a = adapter(self.conn(), links, first);
        a.pump(
            now,
            conn,
            &mut self.manager,
            |l| links.get(usize::from(l.0)).is_some_and(|l| l.up),
            |applied| debug!(?applied, "path manager command"),
        );
    }
}

/// The adapter for connection `conn`: local address i is link i's, the gateway's is id 0.
fn adapter(conn: pm::ConnId, links: &[Link], first: u8) -> ConnAdapter {
    let gateway = pm::Endpoint {
        id: pm::AddrId(0),
        addr: links.first().map(|l| l.gateway),
    };
    let mut a = ConnAdapter::new(conn, gateway);
    for (i, l) in links.iter().enumerate() {
        if let Ok(i) = u8::try_from(i) {
            a.set_local(AddrId(i), Some(SocketAddr::new(l.local_ip(), 0)));
        }
    }
    // Records the first path's address (the manager saw the event when the connection was
    // opened: `Pm::created`).
    let _ = a.created(AddrId(first));
    a
}
