//! The client's glue between its connection and the path manager (braid-pm), as the simulator
//! has it: the connection's events become path-manager events, the manager's commands are
//! executed on the connection, until neither has more. The only place the daemon translates
//! between the two.

use std::net::SocketAddr;

use braid_core::{AddrId, Connection, Event, Instant, PathId};
use braid_pm::{self as pm, PathManager};
use tracing::debug;

use super::links::Link;

/// The path manager and the number of the connection it manages.
pub(crate) struct Pm {
    pub manager: pm::Manager,
    /// The current connection's number (a new one for every connection).
    pub conn_no: u64,
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

    /// Connection events to the manager, its commands to the connection (as the simulator's
    /// `run_pm`). `first` is the link of the connection's first path.
    pub fn run(
        &mut self,
        now: Instant,
        mut conn: Option<&mut Connection>,
        links: &[Link],
        first: u8,
    ) {
        let conn_id = self.conn();
        loop {
            let mut progress = false;
            if let Some(conn) = conn.as_deref_mut() {
                while let Some(e) = conn.poll_event() {
                    progress = true;
                    debug!(?e, "connection event");
                    if let Some(pe) = translate(conn_id, &e, links, first) {
                        self.manager.handle_event(now, &pe);
                    }
                }
            }
            while let Some(c) = self.manager.poll_command() {
                progress = true;
                if c.conn() == conn_id
                    && let Some(conn) = conn.as_deref_mut()
                {
                    self.execute(now, conn, links, c);
                }
            }
            if !progress {
                break;
            }
        }
    }

    fn execute(&mut self, now: Instant, conn: &mut Connection, links: &[Link], c: pm::Command) {
        debug!(?c, "path manager command");
        match c {
            pm::Command::CreateSubflow {
                iface,
                local,
                remote,
                backup,
                ..
            } => {
                let l = usize::from(local.id.0);
                let opened = links.get(l).is_some_and(|l| l.up)
                    && conn
                        .open_path(now, AddrId(local.id.0), AddrId(remote.id.0), backup)
                        .is_ok();
                if !opened {
                    // Refused: the manager forgets the request and asks again later.
                    let e = pm::Event::SubflowClosed {
                        conn: self.conn(),
                        subflow: None,
                        iface: Some(iface),
                    };
                    self.manager.handle_event(now, &e);
                }
            }
            pm::Command::RemoveSubflow { subflow, .. } => {
                let _ = conn.close_path(PathId(subflow.0 as u32));
            }
            pm::Command::SetBackup {
                subflow, backup, ..
            } => {
                let _ = conn.set_backup(PathId(subflow.0 as u32), backup);
            }
            pm::Command::AnnounceAddr { local, .. } => {
                if let Some(addr) = local.addr {
                    conn.announce_addr(AddrId(local.id.0), addr, false);
                }
            }
            pm::Command::WithdrawAddr { id, .. } => conn.remove_local_addr(AddrId(id.0)),
        }
    }
}

/// The connection's events as the path manager sees them (seed 000 Table I), as in the
/// simulator.
fn translate(conn: pm::ConnId, e: &Event, links: &[Link], first: u8) -> Option<pm::Event> {
    let endpoint = |i: u8| pm::Endpoint {
        id: pm::AddrId(i),
        addr: links
            .get(usize::from(i))
            .map(|l| SocketAddr::new(l.local_ip(), 0)),
    };
    let gateway = pm::Endpoint {
        id: pm::AddrId(0),
        addr: links.first().map(|l| l.gateway),
    };
    Some(match *e {
        Event::PathEstablished {
            path,
            local,
            remote,
            backup,
        } => pm::Event::SubflowEstablished {
            conn,
            subflow: pm::SubflowId(u64::from(path.0)),
            iface: Some(pm::IfaceId(u32::from(local.0))),
            local: endpoint(local.0),
            remote: pm::Endpoint {
                id: pm::AddrId(remote.0),
                addr: None,
            },
            backup,
        },
        Event::Connected => pm::Event::ConnectionEstablished {
            conn,
            subflow: Some(pm::SubflowId(0)),
            local: endpoint(first),
            remote: gateway,
            iface: Some(pm::IfaceId(u32::from(first))),
        },
        Event::PathClosed { path, local, .. } => pm::Event::SubflowClosed {
            conn,
            subflow: Some(pm::SubflowId(u64::from(path.0))),
            iface: Some(pm::IfaceId(u32::from(local.0))),
        },
        Event::PathPriority { path, backup, .. } => pm::Event::SubflowPriority {
            conn,
            subflow: pm::SubflowId(u64::from(path.0)),
            backup,
        },
        Event::PeerAddrAnnounced { id, addr, .. } => pm::Event::AddrAnnounced {
            conn,
            remote: pm::Endpoint {
                id: pm::AddrId(id.0),
                addr: Some(addr),
            },
        },
        Event::PeerAddrRemoved { id } => pm::Event::AddrRemoved {
            conn,
            id: pm::AddrId(id.0),
        },
        Event::Closed { .. } => pm::Event::ConnectionClosed { conn },
        _ => return None,
    })
}
