//! Translation between the kernel's view (tokens, four-tuples, ifindexes, rtnetlink) and the
//! path manager's (connections, subflow numbers, interfaces, address ids). No I/O: the daemon
//! feeds it what the kernel reports and executes the [`KernelOp`]s it returns, so the policy
//! code is exactly the one the simulator runs.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use braid_mptcp::rtmon::NetEvent;
use braid_mptcp::{PmEvent, Token};
use braid_pm::{AddrId, Command, ConnId, Endpoint, Event, IfaceId, SubflowId};

/// What the daemon asks the kernel's userspace path manager to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelOp {
    Announce {
        token: Token,
        id: u8,
        addr: IpAddr,
    },
    Remove {
        token: Token,
        id: u8,
    },
    SubflowCreate {
        token: Token,
        local_id: u8,
        local: IpAddr,
        ifindex: u32,
        remote: SocketAddr,
        backup: bool,
    },
    SubflowDestroy {
        token: Token,
        local: SocketAddr,
        remote: SocketAddr,
    },
    SetBackup {
        token: Token,
        local: SocketAddr,
        remote: SocketAddr,
        backup: bool,
    },
}

impl KernelOp {
    pub fn name(&self) -> &'static str {
        match self {
            KernelOp::Announce { .. } => "ANNOUNCE",
            KernelOp::Remove { .. } => "REMOVE",
            KernelOp::SubflowCreate { .. } => "SUBFLOW_CREATE",
            KernelOp::SubflowDestroy { .. } => "SUBFLOW_DESTROY",
            KernelOp::SetBackup { .. } => "SET_FLAGS",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Iface {
    pub name: String,
    pub up: bool,
    pub addrs: Vec<IpAddr>,
    pub managed: bool,
}

/// A subflow as the kernel names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelSubflow {
    pub token: Token,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub ifindex: Option<u32>,
    pub backup: bool,
    /// The local address id the kernel gave the subflow (0: the connection's initial one).
    pub local_id: u8,
}

#[derive(Debug, Clone)]
pub struct Conn {
    pub remote: SocketAddr,
    pub local: SocketAddr,
    pub server_side: bool,
    pub established: bool,
}

#[derive(Debug, Default)]
pub struct Bridge {
    /// Interfaces to manage by name (empty: all but loopback).
    managed: Vec<String>,
    pub ifaces: BTreeMap<u32, Iface>,
    addr_ids: BTreeMap<IpAddr, u8>,
    pub conns: BTreeMap<u32, Conn>,
    pub subflows: BTreeMap<SubflowId, KernelSubflow>,
    next_subflow: u64,
    /// Commands that named something the kernel no longer has.
    pub stale_commands: u64,
    /// `SetDuplicate` commands skipped (see [`Bridge::unsupported`]).
    pub duplicates_skipped: u64,
    /// `Reinject` commands done by closing the subflow at both ends (see [`Bridge::reinject`]).
    pub reinjects: u64,
    /// `Reinject` commands skipped (see [`Bridge::reinject`]).
    pub reinjects_skipped: u64,
    /// `SetWatch` commands skipped (see [`Bridge::unsupported`]).
    pub watches_skipped: u64,
    /// Capacity-aware modes: bytes each interface's subflows carried (closed ones included).
    carried: braid_pm::Carried<(SocketAddr, SocketAddr)>,
    /// Subflows created with the backup flag and not established yet, by connection, local
    /// address and remote end: the kernel's SUB_ESTABLISHED reports the peer's flag, not the
    /// one we asked for (MP_JOIN's B bit, the subflow's `request_bkup`).
    backup_requested: Vec<(Token, IpAddr, SocketAddr)>,
}

impl Bridge {
    pub fn new(managed: Vec<String>) -> Bridge {
        Bridge {
            managed,
            next_subflow: 1,
            ..Bridge::default()
        }
    }

    fn is_managed(&self, name: &str) -> bool {
        if self.managed.is_empty() {
            name != "lo"
        } else {
            self.managed.iter().any(|m| m == name)
        }
    }

    /// The interface of a name, for signal samples.
    pub fn iface_by_name(&self, name: &str) -> Option<IfaceId> {
        self.ifaces
            .iter()
            .find(|(_, i)| i.name == name && i.managed)
            .map(|(&k, _)| IfaceId(k))
    }

    /// Whether the link of a local address is gone: its interface down, or the address no
    /// longer on any interface.
    pub fn link_gone(&self, local: SocketAddr) -> bool {
        !self
            .ifaces
            .values()
            .any(|i| i.up && i.addrs.contains(&local.ip()))
    }

    /// The capacity-aware modes' traffic sample: for every subflow socket of a known MPTCP
    /// connection (sock_diag's TCP sockets matched by four-tuple), the bytes acknowledged by
    /// the peer plus the bytes received, summed per interface; a counter per interface that
    /// only grows (a closed subflow's bytes stay counted).
    pub fn traffic(&mut self, sockets: &[braid_mptcp::diag::TcpState]) -> Vec<(IfaceId, u64)> {
        let subflows: Vec<_> = sockets
            .iter()
            .filter_map(|t| {
                let known = self
                    .subflows
                    .values()
                    .find(|s| s.local == t.local && s.remote == t.remote)?;
                let iface = known.ifindex.or_else(|| self.iface_of_addr(t.local.ip()))?;
                Some((
                    (t.local, t.remote),
                    IfaceId(iface),
                    t.bytes_acked + t.bytes_received,
                ))
            })
            .collect();
        self.carried.update(subflows);
        self.ifaces
            .iter()
            .filter(|(_, i)| i.managed)
            .map(|(&k, _)| (IfaceId(k), self.carried.total(IfaceId(k))))
            .collect()
    }

    /// The interface that holds a local address.
    pub fn iface_of_addr(&self, ip: IpAddr) -> Option<u32> {
        self.ifaces
            .iter()
            .find(|(_, i)| i.addrs.contains(&ip))
            .map(|(&k, _)| k)
    }

    /// A new subflow from `local`'s address (any port) to `remote`, active: the replacement
    /// of a subflow (see `revive`). `None` when the address is no longer on an interface, or
    /// when the connection is one the peer opened (subflows are the initiator's to create).
    pub fn replacement(
        &mut self,
        token: Token,
        local: SocketAddr,
        remote: SocketAddr,
    ) -> Option<KernelOp> {
        if self.conns.get(&token.0).is_none_or(|c| c.server_side) {
            return None;
        }
        let ifindex = self.iface_of_addr(local.ip())?;
        Some(KernelOp::SubflowCreate {
            token,
            local_id: self.addr_id(local.ip())?,
            local: local.ip(),
            ifindex,
            remote,
            backup: false,
        })
    }

    /// Address ids are ours to give on the client side; one per address, 1..=255, stable.
    fn addr_id(&mut self, ip: IpAddr) -> Option<u8> {
        if let Some(&id) = self.addr_ids.get(&ip) {
            return Some(id);
        }
        let id = (1..=255u8).find(|id| !self.addr_ids.values().any(|v| v == id))?;
        self.addr_ids.insert(ip, id);
        Some(id)
    }

    fn usable(ip: &IpAddr) -> bool {
        match ip {
            IpAddr::V4(a) => !a.is_loopback() && !a.is_unspecified() && !a.is_link_local(),
            IpAddr::V6(a) => {
                !a.is_loopback() && !a.is_unspecified() && (a.segments()[0] & 0xffc0) != 0xfe80
            }
        }
    }

    /// A network-monitor event, as path-manager events.
    pub fn on_net(&mut self, e: &NetEvent) -> Vec<Event> {
        let mut out = Vec::new();
        match e {
            NetEvent::Link { index, name, up } => {
                let managed = self.is_managed(name);
                match self.ifaces.get_mut(index) {
                    Some(i) => {
                        if i.up != *up && i.managed {
                            out.push(Event::IfaceUpdated {
                                iface: IfaceId(*index),
                                up: *up,
                            });
                        }
                        i.up = *up;
                    }
                    None => {
                        self.ifaces.insert(
                            *index,
                            Iface {
                                name: name.clone(),
                                up: *up,
                                addrs: Vec::new(),
                                managed,
                            },
                        );
                        if managed {
                            out.push(Event::IfaceNew {
                                iface: IfaceId(*index),
                                name: name.clone(),
                                up: *up,
                            });
                        }
                    }
                }
            }
            NetEvent::LinkGone { index } => {
                if let Some(i) = self.ifaces.remove(index)
                    && i.managed
                {
                    out.push(Event::IfaceRemoved {
                        iface: IfaceId(*index),
                    });
                }
            }
            NetEvent::AddrNew { index, addr, .. } => {
                if !Self::usable(addr) {
                    return out;
                }
                let Some(id) = self.addr_id(*addr) else {
                    return out;
                };
                if let Some(i) = self.ifaces.get_mut(index)
                    && !i.addrs.contains(addr)
                {
                    i.addrs.push(*addr);
                    if i.managed {
                        out.push(Event::LocalAddrNew {
                            iface: IfaceId(*index),
                            id: AddrId(id),
                            addr: Some(*addr),
                        });
                    }
                }
            }
            NetEvent::AddrGone { index, addr } => {
                if let Some(i) = self.ifaces.get_mut(index)
                    && let Some(pos) = i.addrs.iter().position(|a| a == addr)
                {
                    i.addrs.remove(pos);
                    if i.managed
                        && let Some(&id) = self.addr_ids.get(addr)
                    {
                        out.push(Event::LocalAddrRemoved {
                            iface: IfaceId(*index),
                            id: AddrId(id),
                        });
                    }
                }
            }
        }
        out
    }

    pub fn subflow_id(
        &self,
        token: Token,
        local: SocketAddr,
        remote: SocketAddr,
    ) -> Option<SubflowId> {
        self.subflows
            .iter()
            .find(|(_, s)| s.token == token && s.local == local && s.remote == remote)
            .map(|(&k, _)| k)
    }

    fn new_subflow(&mut self, s: KernelSubflow) -> SubflowId {
        if let Some(id) = self.subflow_id(s.token, s.local, s.remote) {
            self.subflows.insert(id, s);
            return id;
        }
        let id = SubflowId(self.next_subflow);
        self.next_subflow += 1;
        self.subflows.insert(id, s);
        id
    }

    fn local_endpoint(&mut self, local: SocketAddr) -> Endpoint {
        Endpoint {
            id: AddrId(self.addr_id(local.ip()).unwrap_or(0)),
            addr: Some(local),
        }
    }

    /// A kernel event, as path-manager events.
    /// The connections known here that are not among the kernel's `live` tokens (closed while
    /// their events were lost).
    pub fn gone(&self, live: &[u32]) -> Vec<Token> {
        self.conns
            .keys()
            .filter(|t| !live.contains(t))
            .map(|&t| Token(t))
            .collect()
    }

    pub fn on_kernel(&mut self, e: &PmEvent) -> Vec<Event> {
        let mut out = Vec::new();
        match e {
            PmEvent::Created(c) => {
                self.conns.insert(
                    c.token.0,
                    Conn {
                        remote: c.remote,
                        local: c.local,
                        server_side: c.server_side,
                        established: false,
                    },
                );
                out.push(Event::ConnectionCreated {
                    conn: ConnId(c.token.0.into()),
                    local: self.local_endpoint(c.local),
                    remote: Endpoint {
                        id: AddrId(0),
                        addr: Some(c.remote),
                    },
                    iface: self.iface_of_addr(c.local.ip()).map(IfaceId),
                    initiator: !c.server_side,
                });
            }
            PmEvent::Established(c) => {
                let conn = self.conns.entry(c.token.0).or_insert(Conn {
                    remote: c.remote,
                    local: c.local,
                    server_side: c.server_side,
                    established: false,
                });
                conn.established = true;
                let ifindex = self.iface_of_addr(c.local.ip());
                let sub = self.new_subflow(KernelSubflow {
                    token: c.token,
                    local: c.local,
                    remote: c.remote,
                    ifindex,
                    backup: false,
                    local_id: 0,
                });
                out.push(Event::ConnectionEstablished {
                    conn: ConnId(c.token.0.into()),
                    subflow: Some(sub),
                    local: self.local_endpoint(c.local),
                    remote: Endpoint {
                        id: AddrId(0),
                        addr: Some(c.remote),
                    },
                    iface: ifindex.map(IfaceId),
                });
            }
            PmEvent::Closed { token } => {
                self.conns.remove(&token.0);
                self.subflows.retain(|_, s| s.token != *token);
                self.backup_requested.retain(|k| k.0 != *token);
                out.push(Event::ConnectionClosed {
                    conn: ConnId(token.0.into()),
                });
            }
            PmEvent::Announced {
                token,
                remote_id,
                addr,
                port,
            } => {
                // No port announced: the connection's own.
                let port = port
                    .filter(|&p| p != 0)
                    .or_else(|| self.conns.get(&token.0).map(|c| c.remote.port()))
                    .unwrap_or(0);
                out.push(Event::AddrAnnounced {
                    conn: ConnId(token.0.into()),
                    remote: Endpoint {
                        id: AddrId(*remote_id),
                        addr: Some(SocketAddr::new(*addr, port)),
                    },
                });
            }
            PmEvent::Removed { token, remote_id } => out.push(Event::AddrRemoved {
                conn: ConnId(token.0.into()),
                id: AddrId(*remote_id),
            }),
            PmEvent::SubEstablished(s) => {
                let ifindex = s.ifindex.or_else(|| self.iface_of_addr(s.local.ip()));
                let key = (s.token, s.local.ip(), s.remote);
                let requested = match self.backup_requested.iter().position(|k| *k == key) {
                    Some(i) => {
                        self.backup_requested.remove(i);
                        true
                    }
                    None => false,
                };
                let backup = s.backup || requested;
                let id = self.new_subflow(KernelSubflow {
                    token: s.token,
                    local: s.local,
                    remote: s.remote,
                    ifindex,
                    backup,
                    local_id: s.local_id,
                });
                out.push(Event::SubflowEstablished {
                    conn: ConnId(s.token.0.into()),
                    subflow: id,
                    iface: ifindex.map(IfaceId),
                    local: self.local_endpoint(s.local),
                    remote: Endpoint {
                        id: AddrId(s.remote_id),
                        addr: Some(s.remote),
                    },
                    backup,
                });
            }
            PmEvent::SubClosed(s) => {
                self.backup_requested
                    .retain(|k| *k != (s.token, s.local.ip(), s.remote));
                let id = self.subflow_id(s.token, s.local, s.remote);
                if let Some(id) = id {
                    self.subflows.remove(&id);
                }
                // A subflow that never established (its creation failed) has no id: the
                // manager forgets the request of its interface. One on no interface of ours
                // tells it nothing.
                let ifindex = s.ifindex.or_else(|| self.iface_of_addr(s.local.ip()));
                if id.is_some() || ifindex.is_some() {
                    out.push(Event::SubflowClosed {
                        conn: ConnId(s.token.0.into()),
                        subflow: id,
                        iface: ifindex.map(IfaceId),
                    });
                }
            }
            PmEvent::SubPriority(s) => {
                if let Some(id) = self.subflow_id(s.token, s.local, s.remote) {
                    if let Some(k) = self.subflows.get_mut(&id) {
                        k.backup = s.backup;
                    }
                    out.push(Event::SubflowPriority {
                        conn: ConnId(s.token.0.into()),
                        subflow: id,
                        backup: s.backup,
                    });
                }
            }
            _ => {}
        }
        out
    }

    /// Records what a successful request changed that the kernel reports no event for (the
    /// kernel emits SUB_PRIORITY only for the peer's MP_PRIO, not for its own).
    pub fn applied(&mut self, op: &KernelOp) {
        if let KernelOp::SubflowCreate {
            token,
            local,
            remote,
            backup: true,
            ..
        } = op
        {
            self.backup_requested.push((*token, *local, *remote));
        }
        if let KernelOp::SetBackup {
            token,
            local,
            remote,
            backup,
        } = op
            && let Some(id) = self.subflow_id(*token, *local, *remote)
            && let Some(s) = self.subflows.get_mut(&id)
        {
            s.backup = *backup;
        }
    }

    /// Whether the kernel cannot do what the command asks; such a command is counted and
    /// skipped. Kernel MPTCP has only its own scheduler and no way to have a subflow carry a
    /// copy of the stream: the `…-dup` modes' `SetDuplicate` is skipped, so on the kernel they
    /// act as their capacity-aware counterparts (`cross-cap`, `cross-backup-cap`). Nor has it a
    /// per-subflow stall timer: their `SetWatch` is skipped too (its RTO recovers a silent
    /// drop). `Reinject` is [`Bridge::reinject`]'s.
    pub fn unsupported(&mut self, c: &Command) -> bool {
        match c {
            Command::SetDuplicate { .. } => self.duplicates_skipped += 1,
            Command::SetWatch { .. } => self.watches_skipped += 1,
            _ => return false,
        }
        true
    }

    /// `Reinject` (the capacity-aware modes demoting a fading link: send what its subflow has
    /// in flight over the others at once), as the kernel can do it: by closing the subflow at
    /// both ends, since a subflow close is what makes kernel MPTCP send again on its other
    /// subflows every byte not yet DATA_ACKed (`__mptcp_close_ssk()` →
    /// `__mptcp_retransmit_pending_data()`, net/mptcp/protocol.c). Two requests:
    ///
    /// 1. REMOVE of the subflow's local address id: the kernel sends RM_ADDR on the
    ///    connection's first working subflow, not the fading one, and the peer closes its
    ///    subflows from that address and re-sends its pending data (a download's sender is the
    ///    peer). Skipped when another subflow of the connection shares the address: RM_ADDR
    ///    would close it too.
    /// 2. SUBFLOW_DESTROY of the subflow: this end re-sends its own (an upload's).
    ///
    /// The policy then sees the subflow closed, and creates a new one when the link is good
    /// again. The kernel re-sends more than the subflow had in flight (all that is not
    /// DATA_ACKed, on every subflow: duplicates the receiver drops); the policy asks only when
    /// the other links have been seen carrying the demand. Skipped and counted
    /// (`reinjects_skipped`): `enabled` off (`kernel.reinject`), the connection's initial
    /// subflow, the server side, or no other subflow to carry the data. The kernel would take
    /// the initial subflow's REMOVE too (RM_ADDR of id 0, measured), but a connection that lost
    /// it one second in delivered its stream slower once the link came back (README, *braid pm
    /// on the kernel when the signal flips near the threshold*): it stays a backup.
    pub fn reinject(&mut self, c: &Command, enabled: bool) -> Option<Vec<KernelOp>> {
        let Command::Reinject { subflow, .. } = c else {
            return None;
        };
        let ops = self
            .subflows
            .get(subflow)
            .filter(|_| enabled)
            .and_then(|s| {
                let client = self.conns.get(&s.token.0).is_some_and(|c| !c.server_side);
                let mut others = self
                    .subflows
                    .iter()
                    .filter(|(id, o)| *id != subflow && o.token == s.token)
                    .peekable();
                if !client || s.local_id == 0 || others.peek().is_none() {
                    return None;
                }
                let mut ops = Vec::new();
                if !others.any(|(_, o)| o.local.ip() == s.local.ip()) {
                    ops.push(KernelOp::Remove {
                        token: s.token,
                        id: s.local_id,
                    });
                }
                ops.push(KernelOp::SubflowDestroy {
                    token: s.token,
                    local: s.local,
                    remote: s.remote,
                });
                Some(ops)
            });
        match &ops {
            Some(_) => self.reinjects += 1,
            None => self.reinjects_skipped += 1,
        }
        ops
    }

    /// A path-manager command, as a kernel request (`None`: it names something gone, or the
    /// kernel cannot do it, see [`Bridge::unsupported`]).
    pub fn to_kernel(&self, c: &Command) -> Option<KernelOp> {
        let token = |conn: ConnId| Token(conn.0 as u32);
        let op = match c {
            Command::AnnounceAddr { conn, local } => KernelOp::Announce {
                token: token(*conn),
                id: local.id.0,
                addr: local.addr?.ip(),
            },
            Command::WithdrawAddr { conn, id } => KernelOp::Remove {
                token: token(*conn),
                id: id.0,
            },
            Command::CreateSubflow {
                conn,
                iface,
                local,
                remote,
                backup,
            } => KernelOp::SubflowCreate {
                token: token(*conn),
                local_id: local.id.0,
                local: local.addr?.ip(),
                ifindex: iface.0,
                remote: remote.addr?,
                backup: *backup,
            },
            Command::RemoveSubflow { conn, subflow } => {
                let s = self.subflows.get(subflow)?;
                KernelOp::SubflowDestroy {
                    token: token(*conn),
                    local: s.local,
                    remote: s.remote,
                }
            }
            Command::SetBackup {
                conn,
                subflow,
                backup,
            } => {
                let s = self.subflows.get(subflow)?;
                KernelOp::SetBackup {
                    token: token(*conn),
                    local: s.local,
                    remote: s.remote,
                    backup: *backup,
                }
            }
            Command::SetDuplicate { .. } | Command::Reinject { .. } | Command::SetWatch { .. } => {
                return None;
            }
        };
        Some(op)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_core::Instant;
    use braid_mptcp::{ConnInfo, SubflowInfo};
    use braid_pm::{Manager, PathManager};

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn conn_info(token: u32) -> ConnInfo {
        ConnInfo {
            token: Token(token),
            local: sa("10.0.1.1:40000"),
            remote: sa("10.0.1.2:5201"),
            server_side: false,
            deny_join_id0: false,
        }
    }

    fn sub(token: u32, local: &str, remote: &str, backup: bool) -> SubflowInfo {
        SubflowInfo {
            token: Token(token),
            local: sa(local),
            remote: sa(remote),
            local_id: 1,
            remote_id: 0,
            backup,
            ifindex: None,
            error: None,
            reset: None,
        }
    }

    /// veth1 (ifindex 5, 10.0.1.1/24) and veth2 (6, 10.0.2.1/24), both up.
    fn two_veths() -> Vec<NetEvent> {
        let link = |index: u32, name: &str| NetEvent::Link {
            index,
            name: name.into(),
            up: true,
        };
        let addr = |index: u32, a: &str| NetEvent::AddrNew {
            index,
            addr: a.parse().unwrap(),
            prefix_len: 24,
        };
        vec![
            link(5, "veth1"),
            link(6, "veth2"),
            addr(5, "10.0.1.1"),
            addr(6, "10.0.2.1"),
        ]
    }

    #[test]
    fn a_replacement_is_asked_only_for_connections_this_side_opened() {
        let mut b = Bridge::new(vec!["veth1".into(), "veth2".into()]);
        for e in two_veths() {
            b.on_net(&e);
        }
        b.on_kernel(&PmEvent::Created(conn_info(7)));
        let served = ConnInfo {
            server_side: true,
            ..conn_info(8)
        };
        b.on_kernel(&PmEvent::Created(served));
        let (old, remote) = (sa("10.0.1.1:40000"), sa("10.0.1.2:5201"));
        let Some(KernelOp::SubflowCreate {
            token,
            local,
            ifindex,
            remote: to,
            backup,
            ..
        }) = b.replacement(Token(7), old, remote)
        else {
            panic!("a replacement for the connection this side opened");
        };
        assert_eq!(
            (token, local, ifindex, to, backup),
            (Token(7), old.ip(), 5, remote, false)
        );
        assert_eq!(b.replacement(Token(8), old, remote), None);
        assert_eq!(b.replacement(Token(9), old, remote), None);
        assert_eq!(b.replacement(Token(7), sa("10.0.3.1:40000"), remote), None);
    }

    /// The bridge and a cross-layer manager against a scripted kernel: the commands that reach
    /// the kernel are the ones seed 000's Algorithm 1 calls for.
    #[test]
    fn cross_layer_commands_reach_the_kernel_as_four_tuples() {
        let mut cfg = braid_pm::Config {
            mode: braid_pm::Mode::CrossLayer,
            same_subnet: true,
            ..Default::default()
        };
        let mut wlan = braid_pm::IfaceConfig::new("veth1");
        wlan.threshold_dbm = Some(-75.0);
        wlan.alpha = 1.0;
        cfg.ifaces = vec![wlan, braid_pm::IfaceConfig::new("veth2")];
        let mut pm = Manager::new(cfg).unwrap();
        let mut b = Bridge::new(vec!["veth1".into(), "veth2".into()]);
        let now = Instant::from_millis(1);
        let mut ops = Vec::new();
        let mut feed = |pm: &mut Manager, b: &mut Bridge, evs: Vec<Event>| {
            for e in evs {
                pm.handle_event(now, &e);
            }
            while let Some(c) = pm.poll_command() {
                ops.extend(b.to_kernel(&c));
            }
            std::mem::take(&mut ops)
        };
        let mut net = vec![NetEvent::Link {
            index: 1,
            name: "lo".into(),
            up: true,
        }];
        net.extend(two_veths());
        net.push(NetEvent::AddrNew {
            index: 6,
            addr: "fe80::1".parse().unwrap(),
            prefix_len: 64,
        });
        for n in &net {
            let evs = b.on_net(n);
            assert!(feed(&mut pm, &mut b, evs).is_empty());
        }
        assert_eq!(b.iface_by_name("lo"), None, "loopback is not managed");
        assert_eq!(b.iface_by_name("veth2"), Some(IfaceId(6)));
        // A good signal, then the connection: the initial subflow is on veth1.
        let evs = vec![Event::Signal {
            iface: IfaceId(5),
            rssi_dbm: -60.0,
        }];
        feed(&mut pm, &mut b, evs);
        let evs = b.on_kernel(&PmEvent::Created(conn_info(7)));
        assert!(feed(&mut pm, &mut b, evs).is_empty());
        let evs = b.on_kernel(&PmEvent::Established(conn_info(7)));
        assert!(
            feed(&mut pm, &mut b, evs).is_empty(),
            "no second address yet"
        );
        // The server announces its second address (no port: the connection's own): veth2
        // (no threshold) gets a subflow to that same-subnet address.
        let evs = b.on_kernel(&PmEvent::Announced {
            token: Token(7),
            remote_id: 1,
            addr: "10.0.2.2".parse().unwrap(),
            port: None,
        });
        let ops = feed(&mut pm, &mut b, evs);
        assert_eq!(
            ops,
            vec![KernelOp::SubflowCreate {
                token: Token(7),
                local_id: 2,
                local: "10.0.2.1".parse().unwrap(),
                ifindex: 6,
                remote: sa("10.0.2.2:5201"),
                backup: false,
            }]
        );
        let evs = b.on_kernel(&PmEvent::SubEstablished(sub(
            7,
            "10.0.2.1:41000",
            "10.0.2.2:5201",
            false,
        )));
        assert!(feed(&mut pm, &mut b, evs).is_empty());
        // The signal on veth1 falls below T: its subflow becomes backup (SET_FLAGS with the
        // kernel's four-tuple).
        let ops = feed(
            &mut pm,
            &mut b,
            vec![Event::Signal {
                iface: IfaceId(5),
                rssi_dbm: -90.0,
            }],
        );
        assert_eq!(
            ops,
            vec![KernelOp::SetBackup {
                token: Token(7),
                local: sa("10.0.1.1:40000"),
                remote: sa("10.0.1.2:5201"),
                backup: true,
            }]
        );
        b.applied(&ops[0]);
        assert!(
            b.subflows
                .values()
                .any(|s| s.local == sa("10.0.1.1:40000") && s.backup)
        );
        // veth1 goes down: its subflow is destroyed.
        let evs = b.on_net(&NetEvent::Link {
            index: 5,
            name: "veth1".into(),
            up: false,
        });
        let ops = feed(&mut pm, &mut b, evs);
        assert_eq!(
            ops,
            vec![KernelOp::SubflowDestroy {
                token: Token(7),
                local: sa("10.0.1.1:40000"),
                remote: sa("10.0.1.2:5201"),
            }]
        );
        // A SUB_CLOSED for a subflow the bridge never saw, on no interface of ours, changes
        // nothing.
        let evs = b.on_kernel(&PmEvent::SubClosed(sub(
            7,
            "10.9.9.9:1",
            "10.0.1.2:5201",
            false,
        )));
        assert!(evs.is_empty());
        // One that failed before it was established, on a known interface: the manager hears
        // of it, without an id, so it can forget the request and ask again later.
        let mut failed = sub(7, "10.9.9.9:2", "10.0.1.2:5201", false);
        failed.ifindex = Some(5);
        let evs = b.on_kernel(&PmEvent::SubClosed(failed));
        assert_eq!(
            evs,
            vec![Event::SubflowClosed {
                conn: ConnId(7),
                subflow: None,
                iface: Some(IfaceId(5)),
            }]
        );
        // After an event overrun the kernel's list of connections tells which are gone.
        assert_eq!(b.gone(&[7, 8]), Vec::<Token>::new());
        assert_eq!(b.gone(&[8]), vec![Token(7)]);
        // CLOSED forgets every subflow of the connection.
        b.on_kernel(&PmEvent::Closed { token: Token(7) });
        assert!(b.subflows.is_empty());
        assert!(b.conns.is_empty());
        assert!(b.gone(&[]).is_empty());
    }

    /// The capacity-aware modes' traffic sample: the subflow sockets of known connections,
    /// summed per managed interface; other TCP sockets do not count, and a subflow that closes
    /// keeps what it carried.
    #[test]
    fn traffic_counts_subflow_sockets_per_interface() {
        let mut b = Bridge::new(vec!["veth1".into(), "veth2".into()]);
        for n in two_veths() {
            b.on_net(&n);
        }
        b.on_kernel(&PmEvent::Created(conn_info(7)));
        b.on_kernel(&PmEvent::Established(conn_info(7)));
        b.on_kernel(&PmEvent::SubEstablished(sub(
            7,
            "10.0.2.1:41000",
            "10.0.2.2:5201",
            false,
        )));
        let sock =
            |local: &str, remote: &str, acked: u64, received: u64| braid_mptcp::diag::TcpState {
                local: sa(local),
                remote: sa(remote),
                unacked: 0,
                notsent: 0,
                bytes_acked: acked,
                bytes_received: received,
                backoff: 0,
            };
        let t = b.traffic(&[
            sock("10.0.1.1:40000", "10.0.1.2:5201", 1000, 10),
            sock("10.0.2.1:41000", "10.0.2.2:5201", 0, 500),
            // A plain TCP socket on veth1: not a subflow.
            sock("10.0.1.1:22", "10.0.1.9:50000", 1_000_000, 0),
        ]);
        assert_eq!(t, vec![(IfaceId(5), 1010), (IfaceId(6), 500)]);
        // veth2's subflow closes: its bytes stay counted; veth1's grows.
        let t = b.traffic(&[sock("10.0.1.1:40000", "10.0.1.2:5201", 3000, 10)]);
        assert_eq!(t, vec![(IfaceId(5), 3010), (IfaceId(6), 500)]);
    }

    /// A subflow created with the backup flag is a backup subflow once established, although
    /// the kernel's SUB_ESTABLISHED carries the peer's flag (0 here): seen on kernel 6.18, a
    /// standby subflow of backup mode was otherwise taken for an active one.
    #[test]
    fn a_subflow_created_as_backup_is_known_as_backup() {
        let mut b = Bridge::new(Vec::new());
        b.on_kernel(&PmEvent::Created(conn_info(7)));
        b.on_kernel(&PmEvent::Established(conn_info(7)));
        b.applied(&KernelOp::SubflowCreate {
            token: Token(7),
            local_id: 2,
            local: "10.0.2.1".parse().unwrap(),
            ifindex: 6,
            remote: sa("10.0.1.2:5201"),
            backup: true,
        });
        let evs = b.on_kernel(&PmEvent::SubEstablished(sub(
            7,
            "10.0.2.1:41000",
            "10.0.1.2:5201",
            false,
        )));
        assert!(
            matches!(evs[..], [Event::SubflowEstablished { backup: true, .. }]),
            "{evs:?}"
        );
        assert!(
            b.subflows
                .values()
                .any(|s| s.local == sa("10.0.2.1:41000") && s.backup)
        );
        assert!(b.backup_requested.is_empty());
        // Another subflow from the same address, not requested as backup, is not.
        let evs = b.on_kernel(&PmEvent::SubEstablished(sub(
            7,
            "10.0.2.1:41001",
            "10.0.1.2:5201",
            false,
        )));
        assert!(
            matches!(evs[..], [Event::SubflowEstablished { backup: false, .. }]),
            "{evs:?}"
        );
    }

    #[test]
    fn commands_for_vanished_subflows_are_dropped() {
        let b = Bridge::new(Vec::new());
        let c = Command::SetBackup {
            conn: ConnId(1),
            subflow: SubflowId(99),
            backup: true,
        };
        assert_eq!(b.to_kernel(&c), None);
    }

    /// A demoted subflow's data in flight, sent again over the others: RM_ADDR of its address
    /// (the peer closes its end and re-sends, over another subflow), then its destruction (this
    /// end re-sends). Not for the initial subflow, nor when switched off, nor without another
    /// subflow; an address another subflow still uses is not removed.
    #[test]
    fn a_reinject_closes_the_subflow_at_both_ends() {
        let mut b = Bridge::new(Vec::new());
        b.on_kernel(&PmEvent::Created(conn_info(7)));
        let evs = b.on_kernel(&PmEvent::Established(conn_info(7)));
        let Some(Event::ConnectionEstablished {
            subflow: Some(initial),
            ..
        }) = evs.first()
        else {
            panic!("{evs:?}")
        };
        let reinject = |subflow| Command::Reinject {
            conn: ConnId(7),
            subflow,
        };
        assert_eq!(b.reinject(&reinject(*initial), true), None, "no other");
        let joined = |b: &mut Bridge, local: &str, id: u8| {
            let mut s = sub(7, local, "10.0.1.2:5201", false);
            s.local_id = id;
            match b.on_kernel(&PmEvent::SubEstablished(s))[..] {
                [Event::SubflowEstablished { subflow, .. }] => subflow,
                ref e => panic!("{e:?}"),
            }
        };
        let second = joined(&mut b, "10.0.2.1:41000", 2);
        assert_eq!(
            b.reinject(&reinject(second), true),
            Some(vec![
                KernelOp::Remove {
                    token: Token(7),
                    id: 2
                },
                KernelOp::SubflowDestroy {
                    token: Token(7),
                    local: sa("10.0.2.1:41000"),
                    remote: sa("10.0.1.2:5201"),
                },
            ])
        );
        assert_eq!(b.reinject(&reinject(*initial), true), None, "address id 0");
        assert_eq!(b.reinject(&reinject(second), false), None, "switched off");
        let third = joined(&mut b, "10.0.2.1:41001", 2);
        assert_eq!(
            b.reinject(&reinject(third), true),
            Some(vec![KernelOp::SubflowDestroy {
                token: Token(7),
                local: sa("10.0.2.1:41001"),
                remote: sa("10.0.1.2:5201"),
            }]),
            "the address is still used"
        );
        assert_eq!((b.reinjects, b.reinjects_skipped), (2, 3));
        b.on_kernel(&PmEvent::Created(ConnInfo {
            server_side: true,
            ..conn_info(8)
        }));
        b.on_kernel(&PmEvent::Established(ConnInfo {
            server_side: true,
            ..conn_info(8)
        }));
        let mut s = sub(8, "10.0.2.1:41000", "10.0.1.2:5201", false);
        s.local_id = 2;
        let server = match b.on_kernel(&PmEvent::SubEstablished(s))[..] {
            [Event::SubflowEstablished { subflow, .. }] => subflow,
            ref e => panic!("{e:?}"),
        };
        let c = Command::Reinject {
            conn: ConnId(8),
            subflow: server,
        };
        assert_eq!(b.reinject(&c, true), None, "server side");
    }

    /// The `…-dup` modes on the kernel: the copies they ask for cannot be made; the command is
    /// skipped and counted, the rest of the policy (cross-cap's) reaches the kernel.
    #[test]
    fn duplicate_requests_are_skipped_and_counted() {
        let mut b = Bridge::new(Vec::new());
        let dup = Command::SetDuplicate {
            conn: ConnId(1),
            subflow: SubflowId(3),
            on: true,
        };
        assert!(b.unsupported(&dup));
        assert_eq!(b.to_kernel(&dup), None);
        let backup = Command::SetBackup {
            conn: ConnId(1),
            subflow: SubflowId(3),
            backup: true,
        };
        assert!(!b.unsupported(&backup));
        assert!(b.unsupported(&dup));
        assert_eq!((b.duplicates_skipped, b.stale_commands), (2, 0));
        let reinject = Command::Reinject {
            conn: ConnId(1),
            subflow: SubflowId(3),
        };
        assert!(!b.unsupported(&reinject));
        assert_eq!(b.to_kernel(&reinject), None);
        assert_eq!(b.reinject(&reinject, true), None, "no such subflow");
        assert_eq!((b.reinjects, b.reinjects_skipped), (0, 1));
        let watch = Command::SetWatch {
            conn: ConnId(1),
            subflow: SubflowId(3),
            on: true,
        };
        assert!(b.unsupported(&watch));
        assert_eq!(b.to_kernel(&watch), None);
        assert_eq!(b.watches_skipped, 1);
        assert!(braid_pm::Mode::from_name("cross-dup").is_some());
        assert!(braid_pm::Mode::from_name("cross-backup-dup").is_some());
    }

    #[test]
    fn address_ids_are_stable_and_bounded() {
        let mut b = Bridge::new(Vec::new());
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let first = b.addr_id(a);
        for i in 0..300u32 {
            let ip = IpAddr::from(std::net::Ipv4Addr::from(0x0a01_0000 + i));
            let _ = b.addr_id(ip);
        }
        assert_eq!(b.addr_id(a), first);
        assert_eq!(b.addr_ids.len(), 255, "ids are 1..=255");
    }
}
