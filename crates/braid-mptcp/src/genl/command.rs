//! Commands of the `mptcp_pm` family (requests and the kernel's replies), as typed
//! values that encode to and decode from the generic-netlink payload.
//!
//! Which attributes each command takes is the `operations` list of
//! Documentation/netlink/specs/mptcp_pm.yaml; which ones the kernel requires is
//! checked by the kernel (`GENL_REQ_ATTR_CHECK` in net/mptcp/pm_*.c), not here.

use netlink_packet_core::{DecodeError, Emitable, ParseableParametrized};
use netlink_packet_generic::{GenlFamily, GenlHeader};

use super::addr::PmAddr;
use super::attr::{self, Attr, ParseError};
use super::consts::*;

/// A connection token (`MPTCP_PM_ATTR_TOKEN`, `MPTCP_ATTR_TOKEN`): the kernel's
/// local identifier of an MPTCP connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Token(pub u32);

impl std::fmt::Display for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// One `mptcp_pm` command with its attributes.
///
/// The same values describe the kernel's replies: `GetAddr` carries the endpoint
/// found, `GetLimits` the limits.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PmCommand {
    /// `MPTCP_PM_CMD_ADD_ADDR`: add an in-kernel endpoint.
    AddAddr(PmAddr),
    /// `MPTCP_PM_CMD_DEL_ADDR`: delete an in-kernel endpoint (by id, or by address
    /// for id 0).
    DelAddr(PmAddr),
    /// `MPTCP_PM_CMD_GET_ADDR`: one endpoint by id, or with `NLM_F_DUMP` all of them;
    /// with a token, the addresses a userspace-managed connection uses.
    GetAddr {
        /// The address (by id) asked for, or the one returned.
        addr: Option<PmAddr>,
        /// A userspace-managed connection.
        token: Option<Token>,
    },
    /// `MPTCP_PM_CMD_FLUSH_ADDRS`: delete every in-kernel endpoint.
    FlushAddrs,
    /// `MPTCP_PM_CMD_SET_LIMITS`.
    SetLimits {
        /// `MPTCP_PM_ATTR_RCV_ADD_ADDRS`: ADD_ADDRs accepted per connection.
        rcv_add_addrs: Option<u32>,
        /// `MPTCP_PM_ATTR_SUBFLOWS`: extra subflows per connection.
        subflows: Option<u32>,
    },
    /// `MPTCP_PM_CMD_GET_LIMITS` (the reply carries both values).
    GetLimits {
        /// `MPTCP_PM_ATTR_RCV_ADD_ADDRS`.
        rcv_add_addrs: Option<u32>,
        /// `MPTCP_PM_ATTR_SUBFLOWS`.
        subflows: Option<u32>,
    },
    /// `MPTCP_PM_CMD_SET_FLAGS`: without a token, change an in-kernel endpoint's
    /// backup/fullmesh flags; with one, send MP_PRIO on the matching subflows.
    SetFlags {
        /// The local address (or endpoint id) and the new flags.
        addr: PmAddr,
        /// A userspace-managed connection.
        token: Option<Token>,
        /// The remote address of the subflows (userspace PM).
        remote: Option<PmAddr>,
    },
    /// `MPTCP_PM_CMD_ANNOUNCE`: send ADD_ADDR on a userspace-managed connection.
    Announce {
        /// The connection.
        token: Token,
        /// The address; needs a non-zero id and the signal flag.
        addr: PmAddr,
    },
    /// `MPTCP_PM_CMD_REMOVE`: send RM_ADDR for a local address id.
    Remove {
        /// The connection.
        token: Token,
        /// `MPTCP_PM_ATTR_LOC_ID`.
        loc_id: u8,
    },
    /// `MPTCP_PM_CMD_SUBFLOW_CREATE`: open a subflow (MP_JOIN).
    SubflowCreate {
        /// The connection.
        token: Token,
        /// Local address with its id (and optionally port, interface, backup flag).
        local: PmAddr,
        /// Remote address and port.
        remote: PmAddr,
    },
    /// `MPTCP_PM_CMD_SUBFLOW_DESTROY`: close a subflow named by its four-tuple.
    SubflowDestroy {
        /// The connection.
        token: Token,
        /// Local address and port.
        local: PmAddr,
        /// Remote address and port.
        remote: PmAddr,
    },
}

impl PmCommand {
    /// The `MPTCP_PM_CMD_*` number.
    pub fn number(&self) -> u8 {
        match self {
            PmCommand::AddAddr(_) => CMD_ADD_ADDR,
            PmCommand::DelAddr(_) => CMD_DEL_ADDR,
            PmCommand::GetAddr { .. } => CMD_GET_ADDR,
            PmCommand::FlushAddrs => CMD_FLUSH_ADDRS,
            PmCommand::SetLimits { .. } => CMD_SET_LIMITS,
            PmCommand::GetLimits { .. } => CMD_GET_LIMITS,
            PmCommand::SetFlags { .. } => CMD_SET_FLAGS,
            PmCommand::Announce { .. } => CMD_ANNOUNCE,
            PmCommand::Remove { .. } => CMD_REMOVE,
            PmCommand::SubflowCreate { .. } => CMD_SUBFLOW_CREATE,
            PmCommand::SubflowDestroy { .. } => CMD_SUBFLOW_DESTROY,
        }
    }

    /// The command's name as in the kernel header, for messages.
    pub fn name(&self) -> &'static str {
        command_name(self.number())
    }

    /// The attributes of this command (the generic-netlink payload after its
    /// header): `PmCommand::parse(c.number(), &c.to_bytes())` gives `c` back.
    pub fn to_bytes(&self) -> Vec<u8> {
        attr::emit_attrs(&self.attrs())
    }

    fn attrs(&self) -> Vec<Attr> {
        let token = |t: &Token| Attr::U32(ATTR_TOKEN, t.0);
        let mut v = Vec::new();
        match self {
            PmCommand::AddAddr(a) | PmCommand::DelAddr(a) => v.push(a.to_attr(ATTR_ADDR)),
            PmCommand::GetAddr { addr, token: t } => {
                v.extend(addr.map(|a| a.to_attr(ATTR_ADDR)));
                v.extend(t.as_ref().map(token));
            }
            PmCommand::FlushAddrs => {}
            PmCommand::SetLimits {
                rcv_add_addrs,
                subflows,
            }
            | PmCommand::GetLimits {
                rcv_add_addrs,
                subflows,
            } => {
                v.extend(rcv_add_addrs.map(|n| Attr::U32(ATTR_RCV_ADD_ADDRS, n)));
                v.extend(subflows.map(|n| Attr::U32(ATTR_SUBFLOWS, n)));
            }
            PmCommand::SetFlags {
                addr,
                token: t,
                remote,
            } => {
                v.push(addr.to_attr(ATTR_ADDR));
                v.extend(t.as_ref().map(token));
                v.extend(remote.map(|r| r.to_attr(ATTR_ADDR_REMOTE)));
            }
            PmCommand::Announce { token: t, addr } => {
                v.push(addr.to_attr(ATTR_ADDR));
                v.push(token(t));
            }
            PmCommand::Remove { token: t, loc_id } => {
                v.push(token(t));
                v.push(Attr::U8(ATTR_LOC_ID, *loc_id));
            }
            PmCommand::SubflowCreate {
                token: t,
                local,
                remote,
            }
            | PmCommand::SubflowDestroy {
                token: t,
                local,
                remote,
            } => {
                v.push(local.to_attr(ATTR_ADDR));
                v.push(token(t));
                v.push(remote.to_attr(ATTR_ADDR_REMOTE));
            }
        }
        v
    }

    /// Decodes the attributes of command `cmd` (the generic-netlink payload after
    /// its 4-byte header). Unknown attributes are skipped.
    pub fn parse(cmd: u8, buf: &[u8]) -> Result<PmCommand, ParseError> {
        let mut a = RawAttrs::default();
        for r in attr::walk(buf) {
            let (kind, v) = r?;
            match kind {
                ATTR_ADDR => a.addr = Some(PmAddr::parse(v)?),
                ATTR_RCV_ADD_ADDRS => {
                    a.rcv = Some(attr::get_u32("MPTCP_PM_ATTR_RCV_ADD_ADDRS", v)?)
                }
                ATTR_SUBFLOWS => a.subflows = Some(attr::get_u32("MPTCP_PM_ATTR_SUBFLOWS", v)?),
                ATTR_TOKEN => a.token = Some(Token(attr::get_u32("MPTCP_PM_ATTR_TOKEN", v)?)),
                ATTR_LOC_ID => a.loc_id = Some(attr::get_u8("MPTCP_PM_ATTR_LOC_ID", v)?),
                ATTR_ADDR_REMOTE => a.remote = Some(PmAddr::parse(v)?),
                _ => {}
            }
        }
        let addr = || a.addr.ok_or(ParseError::Missing("MPTCP_PM_ATTR_ADDR"));
        let token = || a.token.ok_or(ParseError::Missing("MPTCP_PM_ATTR_TOKEN"));
        let remote = || {
            a.remote
                .ok_or(ParseError::Missing("MPTCP_PM_ATTR_ADDR_REMOTE"))
        };
        Ok(match cmd {
            CMD_ADD_ADDR => PmCommand::AddAddr(addr()?),
            CMD_DEL_ADDR => PmCommand::DelAddr(addr()?),
            CMD_GET_ADDR => PmCommand::GetAddr {
                addr: a.addr,
                token: a.token,
            },
            CMD_FLUSH_ADDRS => PmCommand::FlushAddrs,
            CMD_SET_LIMITS => PmCommand::SetLimits {
                rcv_add_addrs: a.rcv,
                subflows: a.subflows,
            },
            CMD_GET_LIMITS => PmCommand::GetLimits {
                rcv_add_addrs: a.rcv,
                subflows: a.subflows,
            },
            CMD_SET_FLAGS => PmCommand::SetFlags {
                addr: addr()?,
                token: a.token,
                remote: a.remote,
            },
            CMD_ANNOUNCE => PmCommand::Announce {
                token: token()?,
                addr: addr()?,
            },
            CMD_REMOVE => PmCommand::Remove {
                token: token()?,
                loc_id: a
                    .loc_id
                    .ok_or(ParseError::Missing("MPTCP_PM_ATTR_LOC_ID"))?,
            },
            CMD_SUBFLOW_CREATE => PmCommand::SubflowCreate {
                token: token()?,
                local: addr()?,
                remote: remote()?,
            },
            CMD_SUBFLOW_DESTROY => PmCommand::SubflowDestroy {
                token: token()?,
                local: addr()?,
                remote: remote()?,
            },
            other => return Err(ParseError::UnknownCommand(other)),
        })
    }
}

#[derive(Default)]
struct RawAttrs {
    addr: Option<PmAddr>,
    rcv: Option<u32>,
    subflows: Option<u32>,
    token: Option<Token>,
    loc_id: Option<u8>,
    remote: Option<PmAddr>,
}

/// The name of an `MPTCP_PM_CMD_*` number.
pub fn command_name(cmd: u8) -> &'static str {
    match cmd {
        CMD_ADD_ADDR => "ADD_ADDR",
        CMD_DEL_ADDR => "DEL_ADDR",
        CMD_GET_ADDR => "GET_ADDR",
        CMD_FLUSH_ADDRS => "FLUSH_ADDRS",
        CMD_SET_LIMITS => "SET_LIMITS",
        CMD_GET_LIMITS => "GET_LIMITS",
        CMD_SET_FLAGS => "SET_FLAGS",
        CMD_ANNOUNCE => "ANNOUNCE",
        CMD_REMOVE => "REMOVE",
        CMD_SUBFLOW_CREATE => "SUBFLOW_CREATE",
        CMD_SUBFLOW_DESTROY => "SUBFLOW_DESTROY",
        _ => "UNKNOWN",
    }
}

impl GenlFamily for PmCommand {
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

impl Emitable for PmCommand {
    fn buffer_len(&self) -> usize {
        self.attrs().as_slice().buffer_len()
    }

    fn emit(&self, buffer: &mut [u8]) {
        self.attrs().as_slice().emit(buffer)
    }
}

impl ParseableParametrized<[u8], GenlHeader> for PmCommand {
    fn parse_with_param(buf: &[u8], header: GenlHeader) -> Result<Self, DecodeError> {
        PmCommand::parse(header.cmd, buf).map_err(|e| DecodeError::from(e.to_string()))
    }
}

#[cfg(test)]
mod tests;
