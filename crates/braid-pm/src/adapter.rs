//! The one adapter between a `braid_core::Connection` and a [`PathManager`]: the connection's
//! events become path-manager [`Event`]s (seed 000 Table I) and the manager's [`Command`]s are
//! executed on the connection. The simulator and the tunnel daemon both drive their
//! connections through it, so a policy behaves the same in virtual time and on real links.
//!
//! Conventions (the ones the simulator and the daemon share):
//! - a local address id is the index of the interface it belongs to: address `i` is on
//!   interface `IfaceId(i)`;
//! - the peer's primary address (the one the first path goes to) has id 0.
//!
//! Adopting it in a runtime that owns one connection at a time:
//! ```text
//! let mut a = ConnAdapter::new(ConnId(n), peer_endpoint);
//! for each interface i: a.set_local(AddrId(i), Some(local socket address));
//! conn.open_path(now, first, AddrId(0), backup)?;  pm.handle_event(now, &a.created(first));
//! after every input to the connection:  a.pump(now, &mut conn, &mut pm, |addr| link_up(addr), |_| {});
//! ```
//! A runtime with several connections per path manager (the simulator's nodes) calls
//! [`ConnAdapter::translate`] for each connection's events and routes each command to the
//! adapter of [`Command::conn`], whose [`ConnAdapter::execute`] applies it.

use std::net::SocketAddr;

use braid_core::{AddrId as CoreAddr, Connection, Event as CoreEvent, Instant, PathId};

use crate::capacity::Carried;
use crate::event::{AddrId, Command, ConnId, Endpoint, Event, IfaceId, SubflowId};
use crate::manager::PathManager;

/// What executing one command did to the connection (for the runtime's records and logs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// A path was opened from local address `local` (interface `iface`).
    Opened {
        iface: IfaceId,
        local: CoreAddr,
        backup: bool,
    },
    /// The connection (or the runtime, through `usable`) refused to open a path; the manager
    /// was told (a `SubflowClosed` without id) and asks again later.
    Refused {
        iface: IfaceId,
    },
    /// A path was closed; `local` is the address it used.
    Closed {
        path: PathId,
        local: CoreAddr,
    },
    /// A path's backup flag was set or cleared.
    Backup {
        path: PathId,
        local: CoreAddr,
        backup: bool,
    },
    /// A path's duplicate flag was set or cleared (it carries a copy of the stream, or stops).
    Duplicate {
        path: PathId,
        local: CoreAddr,
        on: bool,
    },
    /// What was in flight on a path was sent again over the others, and the peer asked to
    /// do the same.
    Reinjected {
        path: PathId,
        local: CoreAddr,
    },
    /// A path's watch flag was set or cleared.
    Watch {
        path: PathId,
        local: CoreAddr,
        on: bool,
    },
    /// An address was announced to the peer or withdrawn.
    Announced(CoreAddr),
    Withdrawn(CoreAddr),
    /// Nothing changed: an unknown path, or a command for another connection.
    Nothing,
}

/// Binds one connection to the path manager's identifiers.
#[derive(Debug, Clone)]
pub struct ConnAdapter {
    conn: ConnId,
    peer: Endpoint,
    /// Local socket addresses by local address id.
    locals: Vec<Option<SocketAddr>>,
    /// The local address of the first path.
    first: CoreAddr,
    /// Stream bytes carried per local address (interface), paths closed since included.
    carried: Carried<PathId>,
}

impl ConnAdapter {
    /// `peer` is the peer's primary endpoint (id 0), as the manager should know it.
    pub fn new(conn: ConnId, peer: Endpoint) -> Self {
        ConnAdapter {
            conn,
            peer,
            locals: Vec::new(),
            first: CoreAddr(0),
            carried: Carried::default(),
        }
    }

    /// Stream bytes (sent and received) each local interface has carried on this connection so
    /// far, closed paths included: a counter per interface that only grows. A runtime sums
    /// them over its connections for [`Event::Traffic`] when the manager
    /// [wants one](PathManager::wants_traffic).
    pub fn traffic(&mut self, conn: &Connection) -> Vec<(IfaceId, u64)> {
        self.carried.update(conn.paths().map(|p| {
            let bytes = p.stats.data_bytes_sent + p.stats.data_bytes_received;
            (p.id, iface_of(p.local), bytes)
        }));
        self.carried.totals()
    }

    pub fn conn(&self) -> ConnId {
        self.conn
    }

    /// Sets (or clears) the socket address of local address `id`.
    pub fn set_local(&mut self, id: CoreAddr, addr: Option<SocketAddr>) {
        let i = usize::from(id.0);
        if self.locals.len() <= i {
            self.locals.resize(i + 1, None);
        }
        self.locals[i] = addr;
    }

    /// Local address `id` as the manager knows it.
    pub fn endpoint(&self, id: CoreAddr) -> Endpoint {
        Endpoint {
            id: AddrId(id.0),
            addr: self.locals.get(usize::from(id.0)).copied().flatten(),
        }
    }

    /// The event that tells the manager about the connection, whose first path the runtime
    /// opened from local address `first`.
    pub fn created(&mut self, first: CoreAddr) -> Event {
        self.first = first;
        Event::ConnectionCreated {
            conn: self.conn,
            local: self.endpoint(first),
            remote: self.peer,
            iface: Some(iface_of(first)),
            initiator: true,
        }
    }

    /// A connection event as the manager sees it, if it cares.
    pub fn translate(&self, e: &CoreEvent) -> Option<Event> {
        let conn = self.conn;
        Some(match *e {
            // The path that established the connection was reported just before
            // (`PathEstablished` comes first): it is not always path 0, whose open may have
            // failed and been replaced.
            CoreEvent::Connected => Event::ConnectionEstablished {
                conn,
                subflow: None,
                local: self.endpoint(self.first),
                remote: self.peer,
                iface: Some(iface_of(self.first)),
            },
            CoreEvent::PathEstablished {
                path,
                local,
                remote,
                backup,
            } => Event::SubflowEstablished {
                conn,
                subflow: SubflowId(u64::from(path.0)),
                iface: Some(iface_of(local)),
                local: self.endpoint(local),
                remote: Endpoint {
                    id: AddrId(remote.0),
                    addr: None,
                },
                backup,
            },
            CoreEvent::PathClosed { path, local, .. } => Event::SubflowClosed {
                conn,
                subflow: Some(SubflowId(u64::from(path.0))),
                iface: Some(iface_of(local)),
            },
            CoreEvent::PathPriority { path, backup, .. } => Event::SubflowPriority {
                conn,
                subflow: SubflowId(u64::from(path.0)),
                backup,
            },
            CoreEvent::PeerAddrAnnounced { id, addr, .. } => Event::AddrAnnounced {
                conn,
                remote: Endpoint {
                    id: AddrId(id.0),
                    addr: Some(addr),
                },
            },
            CoreEvent::PeerAddrRemoved { id } => Event::AddrRemoved {
                conn,
                id: AddrId(id.0),
            },
            CoreEvent::Closed { .. } => Event::ConnectionClosed { conn },
            _ => return None,
        })
    }

    /// Executes one command on `conn`. `usable(local)` lets the runtime refuse a path from an
    /// address it knows is down; a refusal is reported to `pm` so that it asks again later.
    /// Commands for another connection do nothing.
    pub fn execute<P: PathManager + ?Sized>(
        &self,
        now: Instant,
        conn: &mut Connection,
        pm: &mut P,
        c: &Command,
        usable: impl Fn(CoreAddr) -> bool,
    ) -> Applied {
        if c.conn() != self.conn {
            return Applied::Nothing;
        }
        let local_of = |conn: &Connection, id: PathId| conn.path(id).map(|p| p.local);
        match *c {
            Command::CreateSubflow {
                iface,
                local,
                remote,
                backup,
                ..
            } => {
                let l = CoreAddr(local.id.0);
                if usable(l)
                    && conn
                        .open_path(now, l, CoreAddr(remote.id.0), backup)
                        .is_ok()
                {
                    Applied::Opened {
                        iface,
                        local: l,
                        backup,
                    }
                } else {
                    let e = Event::SubflowClosed {
                        conn: self.conn,
                        subflow: None,
                        iface: Some(iface),
                    };
                    pm.handle_event(now, &e);
                    Applied::Refused { iface }
                }
            }
            Command::RemoveSubflow { subflow, .. } => {
                let id = PathId(subflow.0 as u32);
                match local_of(conn, id) {
                    Some(local) if conn.close_path(id).is_ok() => {
                        Applied::Closed { path: id, local }
                    }
                    _ => Applied::Nothing,
                }
            }
            Command::SetBackup {
                subflow, backup, ..
            } => {
                let id = PathId(subflow.0 as u32);
                // A path that already has the flag (the connection's first path, opened on a
                // backup link by the endpoint itself) is left as it is: nothing is applied.
                match conn.path(id).map(|p| (p.local, p.backup)) {
                    Some((_, b)) if b == backup => Applied::Nothing,
                    Some((local, _)) if conn.set_backup(id, backup).is_ok() => Applied::Backup {
                        path: id,
                        local,
                        backup,
                    },
                    _ => Applied::Nothing,
                }
            }
            Command::SetDuplicate { subflow, on, .. } => {
                let id = PathId(subflow.0 as u32);
                match local_of(conn, id) {
                    Some(local) if conn.set_duplicate(id, on).is_ok() => Applied::Duplicate {
                        path: id,
                        local,
                        on,
                    },
                    _ => Applied::Nothing,
                }
            }
            Command::Reinject { subflow, .. } => {
                let id = PathId(subflow.0 as u32);
                match local_of(conn, id) {
                    Some(local) if conn.reinject_path(id).is_ok() => {
                        Applied::Reinjected { path: id, local }
                    }
                    _ => Applied::Nothing,
                }
            }
            Command::SetWatch { subflow, on, .. } => {
                let id = PathId(subflow.0 as u32);
                match local_of(conn, id) {
                    Some(local) if conn.set_watch(id, on).is_ok() => Applied::Watch {
                        path: id,
                        local,
                        on,
                    },
                    _ => Applied::Nothing,
                }
            }
            Command::AnnounceAddr { local, .. } => match local.addr {
                Some(addr) => {
                    conn.announce_addr(CoreAddr(local.id.0), addr, false);
                    Applied::Announced(CoreAddr(local.id.0))
                }
                None => Applied::Nothing,
            },
            Command::WithdrawAddr { id, .. } => {
                conn.remove_local_addr(CoreAddr(id.0));
                Applied::Withdrawn(CoreAddr(id.0))
            }
        }
    }

    /// Feeds the connection's events to `pm` and executes its commands until neither has
    /// anything left; `on` sees every executed command's outcome. Commands for other
    /// connections are dropped (a runtime with one connection per manager). Returns whether
    /// anything happened.
    pub fn pump<P: PathManager + ?Sized>(
        &self,
        now: Instant,
        conn: &mut Connection,
        pm: &mut P,
        usable: impl Fn(CoreAddr) -> bool,
        mut on: impl FnMut(Applied),
    ) -> bool {
        let mut any = false;
        loop {
            let mut progress = false;
            while let Some(e) = conn.poll_event() {
                progress = true;
                if let Some(pe) = self.translate(&e) {
                    pm.handle_event(now, &pe);
                }
            }
            while let Some(c) = pm.poll_command() {
                progress = true;
                on(self.execute(now, conn, pm, &c, &usable));
            }
            if !progress {
                return any;
            }
            any = true;
        }
    }
}

/// The interface of a local address (the shared convention: address `i` is on interface `i`).
pub fn iface_of(local: CoreAddr) -> IfaceId {
    IfaceId(u32::from(local.0))
}

#[cfg(test)]
mod tests;
