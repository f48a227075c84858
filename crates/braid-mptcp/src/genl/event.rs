//! Events the kernel multicasts on the `mptcp_pm_events` group.
//!
//! Which attributes each event carries is `enum mptcp_event_type`'s documentation
//! in include/uapi/linux/mptcp_pm.h and the `mptcp_event*()` functions of
//! net/mptcp/pm_netlink.c, which this parser follows.

use std::net::{IpAddr, SocketAddr};

use netlink_packet_core::{DecodeError, Emitable, ParseableParametrized};
use netlink_packet_generic::{GenlFamily, GenlHeader};

use super::attr::{self, Attr, ParseError};
use super::command::Token;
use super::consts::*;

/// A connection-level event: CREATED or ESTABLISHED.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnInfo {
    /// The connection.
    pub token: Token,
    /// Local address and port of the first subflow.
    pub local: SocketAddr,
    /// Remote address and port of the first subflow.
    pub remote: SocketAddr,
    /// The connection was accepted (not initiated) here.
    pub server_side: bool,
    /// The peer forbids joins to its address id 0 (`MPTCP_PM_EV_FLAG_DENY_JOIN_ID0`).
    pub deny_join_id0: bool,
}

/// A subflow-level event: SUB_ESTABLISHED, SUB_CLOSED or SUB_PRIORITY.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubflowInfo {
    /// The connection.
    pub token: Token,
    /// Local address and port of the subflow.
    pub local: SocketAddr,
    /// Remote address and port of the subflow.
    pub remote: SocketAddr,
    /// `MPTCP_ATTR_LOC_ID`.
    pub local_id: u8,
    /// `MPTCP_ATTR_REM_ID`.
    pub remote_id: u8,
    /// The subflow is a backup subflow.
    pub backup: bool,
    /// The interface the subflow is bound to, if any.
    pub ifindex: Option<u32>,
    /// `sk_err` of the subflow, if set.
    pub error: Option<u8>,
    /// The MP_TCPRST reason and flags received, if the peer reset the subflow.
    pub reset: Option<Reset>,
}

impl SubflowInfo {
    /// The peer refused the subflow's SYN (`ECONNREFUSED`): nothing listens at the remote
    /// address and port.
    pub fn refused(&self) -> bool {
        self.error == Some(nix::errno::Errno::ECONNREFUSED as u8)
    }
}

/// The reason of an MPTCP subflow reset (`MPTCP_ATTR_RESET_REASON`, `_FLAGS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reset {
    /// RFC 8684 §3.6 reason code.
    pub reason: u32,
    /// The transient bit and any other flags.
    pub flags: u32,
}

/// One event of the `mptcp_pm_events` group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PmEvent {
    /// `MPTCP_EVENT_CREATED`: a connection exists; ADD_ADDR may be sent.
    Created(ConnInfo),
    /// `MPTCP_EVENT_ESTABLISHED`: the connection is fully established; subflows may
    /// be created.
    Established(ConnInfo),
    /// `MPTCP_EVENT_CLOSED`.
    Closed {
        /// The connection.
        token: Token,
    },
    /// `MPTCP_EVENT_ANNOUNCED`: the peer announced an address (ADD_ADDR).
    Announced {
        /// The connection.
        token: Token,
        /// The peer's id for the address.
        remote_id: u8,
        /// The address announced.
        addr: IpAddr,
        /// The port announced, or the connection's port when none was (since 5.19).
        port: Option<u16>,
    },
    /// `MPTCP_EVENT_REMOVED`: the peer withdrew an address (RM_ADDR).
    Removed {
        /// The connection.
        token: Token,
        /// The peer's id of the address.
        remote_id: u8,
    },
    /// `MPTCP_EVENT_SUB_ESTABLISHED`.
    SubEstablished(SubflowInfo),
    /// `MPTCP_EVENT_SUB_CLOSED`.
    SubClosed(SubflowInfo),
    /// `MPTCP_EVENT_SUB_PRIORITY`: the peer changed a subflow's backup flag (MP_PRIO).
    SubPriority(SubflowInfo),
    /// `MPTCP_EVENT_LISTENER_CREATED`: an MPTCP listening socket.
    ListenerCreated {
        /// Its address and port.
        addr: SocketAddr,
    },
    /// `MPTCP_EVENT_LISTENER_CLOSED`.
    ListenerClosed {
        /// Its address and port.
        addr: SocketAddr,
    },
    /// An event type this crate does not know (from a newer kernel).
    Unknown {
        /// The event type number.
        kind: u8,
    },
}

/// Every attribute an event can carry, as read from the wire.
#[derive(Default)]
struct EventAttrs {
    token: Option<u32>,
    loc_id: Option<u8>,
    rem_id: Option<u8>,
    saddr: Option<IpAddr>,
    daddr: Option<IpAddr>,
    sport: Option<u16>,
    dport: Option<u16>,
    backup: Option<u8>,
    error: Option<u8>,
    flags: Option<u16>,
    if_idx: Option<i32>,
    reset_reason: Option<u32>,
    reset_flags: Option<u32>,
    server_side: Option<u8>,
}

impl EventAttrs {
    fn parse(buf: &[u8]) -> Result<EventAttrs, ParseError> {
        let mut a = EventAttrs::default();
        for r in attr::walk(buf) {
            let (kind, v) = r?;
            match kind {
                EV_ATTR_TOKEN => a.token = Some(attr::get_u32("MPTCP_ATTR_TOKEN", v)?),
                EV_ATTR_LOC_ID => a.loc_id = Some(attr::get_u8("MPTCP_ATTR_LOC_ID", v)?),
                EV_ATTR_REM_ID => a.rem_id = Some(attr::get_u8("MPTCP_ATTR_REM_ID", v)?),
                EV_ATTR_SADDR4 => a.saddr = Some(attr::get_ipv4("MPTCP_ATTR_SADDR4", v)?.into()),
                EV_ATTR_SADDR6 => a.saddr = Some(attr::get_ipv6("MPTCP_ATTR_SADDR6", v)?.into()),
                EV_ATTR_DADDR4 => a.daddr = Some(attr::get_ipv4("MPTCP_ATTR_DADDR4", v)?.into()),
                EV_ATTR_DADDR6 => a.daddr = Some(attr::get_ipv6("MPTCP_ATTR_DADDR6", v)?.into()),
                EV_ATTR_SPORT => a.sport = Some(attr::get_be16("MPTCP_ATTR_SPORT", v)?),
                EV_ATTR_DPORT => a.dport = Some(attr::get_be16("MPTCP_ATTR_DPORT", v)?),
                EV_ATTR_BACKUP => a.backup = Some(attr::get_u8("MPTCP_ATTR_BACKUP", v)?),
                EV_ATTR_ERROR => a.error = Some(attr::get_u8("MPTCP_ATTR_ERROR", v)?),
                EV_ATTR_FLAGS => a.flags = Some(attr::get_u16("MPTCP_ATTR_FLAGS", v)?),
                EV_ATTR_IF_IDX => a.if_idx = Some(attr::get_i32("MPTCP_ATTR_IF_IDX", v)?),
                EV_ATTR_RESET_REASON => {
                    a.reset_reason = Some(attr::get_u32("MPTCP_ATTR_RESET_REASON", v)?)
                }
                EV_ATTR_RESET_FLAGS => {
                    a.reset_flags = Some(attr::get_u32("MPTCP_ATTR_RESET_FLAGS", v)?)
                }
                EV_ATTR_SERVER_SIDE => {
                    a.server_side = Some(attr::get_u8("MPTCP_ATTR_SERVER_SIDE", v)?)
                }
                // MPTCP_ATTR_FAMILY is implied by which address attribute is present;
                // MPTCP_ATTR_TIMEOUT is not sent by any event; others are newer.
                _ => {}
            }
        }
        Ok(a)
    }

    fn token(&self) -> Result<Token, ParseError> {
        self.token
            .map(Token)
            .ok_or(ParseError::Missing("MPTCP_ATTR_TOKEN"))
    }

    fn local(&self) -> Result<SocketAddr, ParseError> {
        let ip = self
            .saddr
            .ok_or(ParseError::Missing("MPTCP_ATTR_SADDR4/6"))?;
        Ok(SocketAddr::new(
            ip,
            self.sport.ok_or(ParseError::Missing("MPTCP_ATTR_SPORT"))?,
        ))
    }

    fn remote(&self) -> Result<SocketAddr, ParseError> {
        let ip = self
            .daddr
            .ok_or(ParseError::Missing("MPTCP_ATTR_DADDR4/6"))?;
        Ok(SocketAddr::new(
            ip,
            self.dport.ok_or(ParseError::Missing("MPTCP_ATTR_DPORT"))?,
        ))
    }

    fn conn(&self) -> Result<ConnInfo, ParseError> {
        let flags = self.flags.unwrap_or(0);
        Ok(ConnInfo {
            token: self.token()?,
            local: self.local()?,
            remote: self.remote()?,
            // Linux ≤ 6.17 sends only MPTCP_ATTR_SERVER_SIDE; 6.18 both; later only
            // the flag (commit "mptcp: pm: netlink: announce server-side flag").
            server_side: self.server_side.is_some_and(|s| s != 0)
                || flags & EV_FLAG_SERVER_SIDE != 0,
            deny_join_id0: flags & EV_FLAG_DENY_JOIN_ID0 != 0,
        })
    }

    fn subflow(&self) -> Result<SubflowInfo, ParseError> {
        Ok(SubflowInfo {
            token: self.token()?,
            local: self.local()?,
            remote: self.remote()?,
            local_id: self
                .loc_id
                .ok_or(ParseError::Missing("MPTCP_ATTR_LOC_ID"))?,
            remote_id: self
                .rem_id
                .ok_or(ParseError::Missing("MPTCP_ATTR_REM_ID"))?,
            backup: self.backup.is_some_and(|b| b != 0),
            ifindex: self
                .if_idx
                .and_then(|i| u32::try_from(i).ok())
                .filter(|&i| i != 0),
            error: self.error,
            reset: self.reset_reason.map(|reason| Reset {
                reason,
                flags: self.reset_flags.unwrap_or(0),
            }),
        })
    }
}

impl PmEvent {
    /// The `MPTCP_EVENT_*` number.
    pub fn number(&self) -> u8 {
        match self {
            PmEvent::Created(_) => EVENT_CREATED,
            PmEvent::Established(_) => EVENT_ESTABLISHED,
            PmEvent::Closed { .. } => EVENT_CLOSED,
            PmEvent::Announced { .. } => EVENT_ANNOUNCED,
            PmEvent::Removed { .. } => EVENT_REMOVED,
            PmEvent::SubEstablished(_) => EVENT_SUB_ESTABLISHED,
            PmEvent::SubClosed(_) => EVENT_SUB_CLOSED,
            PmEvent::SubPriority(_) => EVENT_SUB_PRIORITY,
            PmEvent::ListenerCreated { .. } => EVENT_LISTENER_CREATED,
            PmEvent::ListenerClosed { .. } => EVENT_LISTENER_CLOSED,
            PmEvent::Unknown { kind } => *kind,
        }
    }

    /// The connection the event is about (listener events have none).
    pub fn token(&self) -> Option<Token> {
        match self {
            PmEvent::Created(c) | PmEvent::Established(c) => Some(c.token),
            PmEvent::Closed { token }
            | PmEvent::Announced { token, .. }
            | PmEvent::Removed { token, .. } => Some(*token),
            PmEvent::SubEstablished(s) | PmEvent::SubClosed(s) | PmEvent::SubPriority(s) => {
                Some(s.token)
            }
            PmEvent::ListenerCreated { .. }
            | PmEvent::ListenerClosed { .. }
            | PmEvent::Unknown { .. } => None,
        }
    }

    /// Decodes event `kind` from its attributes (the generic-netlink payload after
    /// the 4-byte header). Unknown attributes are skipped, unknown event types give
    /// [`PmEvent::Unknown`], and a missing or malformed attribute is an error.
    pub fn parse(kind: u8, buf: &[u8]) -> Result<PmEvent, ParseError> {
        let a = EventAttrs::parse(buf)?;
        Ok(match kind {
            EVENT_CREATED => PmEvent::Created(a.conn()?),
            EVENT_ESTABLISHED => PmEvent::Established(a.conn()?),
            EVENT_CLOSED => PmEvent::Closed { token: a.token()? },
            EVENT_ANNOUNCED => PmEvent::Announced {
                token: a.token()?,
                remote_id: a.rem_id.ok_or(ParseError::Missing("MPTCP_ATTR_REM_ID"))?,
                addr: a.daddr.ok_or(ParseError::Missing("MPTCP_ATTR_DADDR4/6"))?,
                port: a.dport,
            },
            EVENT_REMOVED => PmEvent::Removed {
                token: a.token()?,
                remote_id: a.rem_id.ok_or(ParseError::Missing("MPTCP_ATTR_REM_ID"))?,
            },
            EVENT_SUB_ESTABLISHED => PmEvent::SubEstablished(a.subflow()?),
            EVENT_SUB_CLOSED => PmEvent::SubClosed(a.subflow()?),
            EVENT_SUB_PRIORITY => PmEvent::SubPriority(a.subflow()?),
            EVENT_LISTENER_CREATED => PmEvent::ListenerCreated { addr: a.local()? },
            EVENT_LISTENER_CLOSED => PmEvent::ListenerClosed { addr: a.local()? },
            kind => PmEvent::Unknown { kind },
        })
    }

    /// Decodes the `mptcp_pm` events of one datagram received on the events group
    /// (`family` is the family id the kernel gave `mptcp_pm`): one result per
    /// message. A message of another family, or one cut short, is an error; a
    /// framing error ends the datagram.
    pub fn decode_datagram(datagram: &[u8], family: u16) -> Vec<Result<PmEvent, ParseError>> {
        let mut out = Vec::new();
        for frame in crate::nl::frames(datagram) {
            let frame = match frame {
                Ok(f) => f,
                Err(e) => {
                    out.push(Err(e));
                    break;
                }
            };
            if frame.kind != family {
                out.push(Err(ParseError::Framing(format!(
                    "message type {} is not the mptcp_pm family ({family})",
                    frame.kind
                ))));
                continue;
            }
            out.push(match frame.payload {
                [cmd, _version, _, _, attrs @ ..] => PmEvent::parse(*cmd, attrs),
                _ => Err(ParseError::Framing(
                    "generic-netlink header cut short".into(),
                )),
            });
        }
        out
    }

    /// The attributes of this event as the kernel sends them (the generic-netlink
    /// payload after its header): `PmEvent::parse(e.number(), &e.to_bytes())`
    /// gives `e` back.
    pub fn to_bytes(&self) -> Vec<u8> {
        attr::emit_attrs(&self.attrs())
    }

    /// The attributes the kernel would send for this event, in its order.
    fn attrs(&self) -> Vec<Attr> {
        let mut v = Vec::new();
        match self {
            PmEvent::Created(c) | PmEvent::Established(c) => {
                v.push(Attr::U32(EV_ATTR_TOKEN, c.token.0));
                let mut flags = 0;
                if c.server_side {
                    flags |= EV_FLAG_SERVER_SIDE;
                    v.push(Attr::U8(EV_ATTR_SERVER_SIDE, 1));
                }
                if c.deny_join_id0 {
                    flags |= EV_FLAG_DENY_JOIN_ID0;
                }
                if flags != 0 {
                    v.push(Attr::U16(EV_ATTR_FLAGS, flags));
                }
                push_four_tuple(&mut v, c.local, c.remote);
            }
            PmEvent::Closed { token } => v.push(Attr::U32(EV_ATTR_TOKEN, token.0)),
            PmEvent::Announced {
                token,
                remote_id,
                addr,
                port,
            } => {
                v.push(Attr::U32(EV_ATTR_TOKEN, token.0));
                v.push(Attr::U8(EV_ATTR_REM_ID, *remote_id));
                v.extend(port.map(|p| Attr::Be16(EV_ATTR_DPORT, p)));
                v.extend(
                    addr_attrs(*addr, EV_ATTR_DADDR4, EV_ATTR_DADDR6)
                        .into_iter()
                        .skip(1),
                );
            }
            PmEvent::Removed { token, remote_id } => {
                v.push(Attr::U32(EV_ATTR_TOKEN, token.0));
                v.push(Attr::U8(EV_ATTR_REM_ID, *remote_id));
            }
            PmEvent::SubEstablished(s) | PmEvent::SubClosed(s) | PmEvent::SubPriority(s) => {
                v.push(Attr::U32(EV_ATTR_TOKEN, s.token.0));
                push_four_tuple(&mut v, s.local, s.remote);
                v.push(Attr::U8(EV_ATTR_LOC_ID, s.local_id));
                v.push(Attr::U8(EV_ATTR_REM_ID, s.remote_id));
                v.push(Attr::U8(EV_ATTR_BACKUP, s.backup.into()));
                v.extend(s.ifindex.map(|i| Attr::I32(EV_ATTR_IF_IDX, i as i32)));
                v.extend(s.error.map(|e| Attr::U8(EV_ATTR_ERROR, e)));
                if let Some(r) = s.reset {
                    v.push(Attr::U32(EV_ATTR_RESET_REASON, r.reason));
                    v.push(Attr::U32(EV_ATTR_RESET_FLAGS, r.flags));
                }
            }
            PmEvent::ListenerCreated { addr } | PmEvent::ListenerClosed { addr } => {
                let fam = addr_attrs(addr.ip(), EV_ATTR_SADDR4, EV_ATTR_SADDR6);
                v.push(fam[0].clone());
                v.push(Attr::Be16(EV_ATTR_SPORT, addr.port()));
                v.push(fam[1].clone());
            }
            PmEvent::Unknown { .. } => {}
        }
        v
    }
}

/// `[FAMILY, ADDR]` for an address, with the v4 or v6 attribute kind.
fn addr_attrs(ip: IpAddr, kind4: u16, kind6: u16) -> [Attr; 2] {
    match ip {
        IpAddr::V4(a) => [Attr::U16(EV_ATTR_FAMILY, AF_INET), Attr::ipv4(kind4, a)],
        IpAddr::V6(a) => [Attr::U16(EV_ATTR_FAMILY, AF_INET6), Attr::ipv6(kind6, a)],
    }
}

/// family, saddr, daddr, sport, dport: `mptcp_event_add_subflow()` in pm_netlink.c.
fn push_four_tuple(v: &mut Vec<Attr>, local: SocketAddr, remote: SocketAddr) {
    let [fam, saddr] = addr_attrs(local.ip(), EV_ATTR_SADDR4, EV_ATTR_SADDR6);
    let [_, daddr] = addr_attrs(remote.ip(), EV_ATTR_DADDR4, EV_ATTR_DADDR6);
    v.extend([fam, saddr, daddr]);
    v.push(Attr::Be16(EV_ATTR_SPORT, local.port()));
    v.push(Attr::Be16(EV_ATTR_DPORT, remote.port()));
}

impl GenlFamily for PmEvent {
    fn family_name() -> &'static str {
        FAMILY_NAME
    }

    fn command(&self) -> u8 {
        self.number()
    }

    fn version(&self) -> u8 {
        FAMILY_VERSION
    }
}

impl Emitable for PmEvent {
    fn buffer_len(&self) -> usize {
        self.attrs().as_slice().buffer_len()
    }

    fn emit(&self, buffer: &mut [u8]) {
        self.attrs().as_slice().emit(buffer)
    }
}

impl ParseableParametrized<[u8], GenlHeader> for PmEvent {
    fn parse_with_param(buf: &[u8], header: GenlHeader) -> Result<Self, DecodeError> {
        PmEvent::parse(header.cmd, buf).map_err(|e| DecodeError::from(e.to_string()))
    }
}

#[cfg(test)]
mod tests;
