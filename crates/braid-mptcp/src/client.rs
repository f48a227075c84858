//! [`PmClient`] (requests to the `mptcp_pm` family) and [`PmEvents`] (its multicast
//! group), both on generic-netlink sockets that first resolve the family through
//! `nlctrl` (`CTRL_CMD_GETFAMILY`, net/netlink/genetlink.c).

use std::collections::VecDeque;
use std::fmt;
use std::net::{IpAddr, SocketAddr};

use netlink_packet_generic::GenlMessage;
use netlink_packet_generic::ctrl::nlas::GenlCtrlAttrs;
use netlink_packet_generic::ctrl::{GenlCtrl, GenlCtrlCmd};
use netlink_sys::protocols::NETLINK_GENERIC;

use crate::Error;
use crate::genl::consts::*;
use crate::genl::{AddrFlags, Endpoint, ParseError, PmAddr, PmCommand, PmEvent, Token, attr};
use crate::nl::{NlSocket, RequestError};

// include/uapi/linux/genetlink.h
pub(crate) const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_MCAST_GROUPS: u16 = 7;
const CTRL_ATTR_MCAST_GRP_NAME: u16 = 1;
const CTRL_ATTR_MCAST_GRP_ID: u16 = 2;
/// `sizeof(struct nlmsghdr) + sizeof(struct genlmsghdr)`.
const GENL_PAYLOAD_AT: usize = 16 + 4;

/// Requests to the kernel's `mptcp_pm` family on one generic-netlink socket, one
/// at a time. Needs `CAP_NET_ADMIN` in the socket's network namespace.
///
/// The userspace path-manager commands (those taking a [`Token`]) need
/// `net.mptcp.path_manager = userspace` (`pm_type = 1` before 6.15) on the
/// connection's namespace; the endpoint commands configure the in-kernel path
/// manager.
pub struct PmClient {
    sock: NlSocket,
    family: u16,
    events_group: u32,
}

impl fmt::Debug for PmClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PmClient")
            .field("family", &self.family)
            .field("events_group", &self.events_group)
            .finish_non_exhaustive()
    }
}

impl PmClient {
    /// Opens a socket in the calling thread's network namespace and resolves the
    /// `mptcp_pm` family and its `mptcp_pm_events` group.
    pub async fn connect() -> Result<PmClient, Error> {
        let mut sock = NlSocket::open(NETLINK_GENERIC)?;
        let (family, events_group) = resolve(&mut sock).await?;
        Ok(PmClient {
            sock,
            family,
            events_group,
        })
    }

    /// The multicast group id of `mptcp_pm_events`.
    pub fn events_group(&self) -> u32 {
        self.events_group
    }

    /// The generic-netlink family id the kernel gave `mptcp_pm`.
    pub fn family_id(&self) -> u16 {
        self.family
    }

    /// Sends any command and waits for the kernel's ACK; replies are discarded.
    pub async fn execute(&mut self, cmd: PmCommand) -> Result<(), Error> {
        self.request(cmd, false).await.map(drop)
    }

    /// `ANNOUNCE`: sends ADD_ADDR for local address `addr` with id `id` (not 0) on a
    /// userspace-managed connection; `port` None reuses the connection's port.
    pub async fn announce(
        &mut self,
        token: Token,
        id: u8,
        addr: IpAddr,
        port: Option<u16>,
    ) -> Result<(), Error> {
        let addr = PmAddr {
            id: Some(id),
            addr: Some(addr),
            port,
            flags: Some(AddrFlags::SIGNAL),
            ifindex: None,
        };
        self.execute(PmCommand::Announce { token, addr }).await
    }

    /// `REMOVE`: sends RM_ADDR for local address id `loc_id` and closes the
    /// subflows that use it.
    pub async fn remove(&mut self, token: Token, loc_id: u8) -> Result<(), Error> {
        self.execute(PmCommand::Remove { token, loc_id }).await
    }

    /// `SUBFLOW_CREATE`: opens a subflow (MP_JOIN) from `local` (with its address
    /// id `local_id`, not 0, optionally bound to interface `ifindex`) to `remote`.
    /// The kernel ACKs when the SYN is sent; `SUB_ESTABLISHED` follows.
    pub async fn subflow_create(
        &mut self,
        token: Token,
        local_id: u8,
        local: IpAddr,
        ifindex: Option<u32>,
        remote: SocketAddr,
        backup: bool,
    ) -> Result<(), Error> {
        let local = PmAddr {
            id: Some(local_id),
            addr: Some(local),
            port: None,
            flags: Some(if backup {
                AddrFlags::BACKUP
            } else {
                AddrFlags::empty()
            }),
            ifindex: ifindex.map(ifindex_attr),
        };
        let remote = PmAddr::socket(remote);
        self.execute(PmCommand::SubflowCreate {
            token,
            local,
            remote,
        })
        .await
    }

    /// `SUBFLOW_DESTROY`: closes the subflow with this four-tuple.
    pub async fn subflow_destroy(
        &mut self,
        token: Token,
        local: SocketAddr,
        remote: SocketAddr,
    ) -> Result<(), Error> {
        let (local, remote) = (PmAddr::socket(local), PmAddr::socket(remote));
        self.execute(PmCommand::SubflowDestroy {
            token,
            local,
            remote,
        })
        .await
    }

    /// `SET_FLAGS` with a token: sets or clears the backup flag of the subflow with
    /// this four-tuple and tells the peer (MP_PRIO, RFC 8684 §3.3.8).
    pub async fn set_backup(
        &mut self,
        token: Token,
        local: SocketAddr,
        remote: SocketAddr,
        backup: bool,
    ) -> Result<(), Error> {
        let addr = PmAddr {
            flags: Some(if backup {
                AddrFlags::BACKUP
            } else {
                AddrFlags::empty()
            }),
            ..PmAddr::socket(local)
        };
        let cmd = PmCommand::SetFlags {
            addr,
            token: Some(token),
            remote: Some(PmAddr::socket(remote)),
        };
        self.execute(cmd).await
    }

    /// `ADD_ADDR`: adds an in-kernel endpoint (id 0 lets the kernel pick one).
    pub async fn add_addr(&mut self, ep: Endpoint) -> Result<(), Error> {
        self.execute(PmCommand::AddAddr(ep.to_pm_addr())).await
    }

    /// `DEL_ADDR`: deletes the in-kernel endpoint `id`.
    pub async fn del_addr(&mut self, id: u8) -> Result<(), Error> {
        self.execute(PmCommand::DelAddr(PmAddr::with_id(id))).await
    }

    /// `GET_ADDR`: the in-kernel endpoint `id`.
    pub async fn get_addr(&mut self, id: u8) -> Result<Endpoint, Error> {
        let cmd = PmCommand::GetAddr {
            addr: Some(PmAddr::with_id(id)),
            token: None,
        };
        let replies = self.request(cmd, false).await?;
        let msg = replies
            .first()
            .ok_or(ParseError::Missing("GET_ADDR reply"))?;
        Ok(endpoint_of(msg)?)
    }

    /// `GET_ADDR` as a dump: every in-kernel endpoint, in the kernel's order (by id).
    pub async fn dump_addrs(&mut self) -> Result<Vec<Endpoint>, Error> {
        self.dump_endpoints(None).await
    }

    /// `GET_ADDR` dump with a token: the local addresses a userspace-managed
    /// connection knows (announced or used by a subflow it created), by id.
    pub async fn conn_addrs(&mut self, token: Token) -> Result<Vec<Endpoint>, Error> {
        self.dump_endpoints(Some(token)).await
    }

    /// `SET_FLAGS` without a token: sets the backup and fullmesh flags of in-kernel
    /// endpoint `id` (other bits of `flags` are ignored by the kernel).
    pub async fn set_endpoint_flags(&mut self, id: u8, flags: AddrFlags) -> Result<(), Error> {
        let addr = PmAddr {
            flags: Some(flags),
            ..PmAddr::with_id(id)
        };
        let cmd = PmCommand::SetFlags {
            addr,
            token: None,
            remote: None,
        };
        self.execute(cmd).await
    }

    /// `FLUSH_ADDRS`: deletes every in-kernel endpoint.
    pub async fn flush_addrs(&mut self) -> Result<(), Error> {
        self.execute(PmCommand::FlushAddrs).await
    }

    /// `SET_LIMITS`: ADD_ADDRs accepted and extra subflows per connection (each at
    /// most 8, `MPTCP_PM_ADDR_MAX`).
    pub async fn set_limits(&mut self, rcv_add_addrs: u32, subflows: u32) -> Result<(), Error> {
        let cmd = PmCommand::SetLimits {
            rcv_add_addrs: Some(rcv_add_addrs),
            subflows: Some(subflows),
        };
        self.execute(cmd).await
    }

    /// `GET_LIMITS`: `(rcv_add_addrs, subflows)`.
    pub async fn get_limits(&mut self) -> Result<(u32, u32), Error> {
        let cmd = PmCommand::GetLimits {
            rcv_add_addrs: None,
            subflows: None,
        };
        let replies = self.request(cmd, false).await?;
        let msg = replies
            .first()
            .ok_or(ParseError::Missing("GET_LIMITS reply"))?;
        let (mut rcv, mut sub) = (None, None);
        for a in attr::walk(genl_attrs(msg)?) {
            let (kind, v) = a?;
            match kind {
                ATTR_RCV_ADD_ADDRS => rcv = Some(attr::get_u32("MPTCP_PM_ATTR_RCV_ADD_ADDRS", v)?),
                ATTR_SUBFLOWS => sub = Some(attr::get_u32("MPTCP_PM_ATTR_SUBFLOWS", v)?),
                _ => {}
            }
        }
        Ok((
            rcv.ok_or(ParseError::Missing("MPTCP_PM_ATTR_RCV_ADD_ADDRS"))?,
            sub.ok_or(ParseError::Missing("MPTCP_PM_ATTR_SUBFLOWS"))?,
        ))
    }

    async fn dump_endpoints(&mut self, token: Option<Token>) -> Result<Vec<Endpoint>, Error> {
        let replies = self
            .request(PmCommand::GetAddr { addr: None, token }, true)
            .await?;
        Ok(replies
            .iter()
            .map(|m| endpoint_of(m))
            .collect::<Result<_, _>>()?)
    }

    async fn request(&mut self, cmd: PmCommand, dump: bool) -> Result<Vec<Vec<u8>>, Error> {
        let op = cmd.name();
        let mut msg = GenlMessage::from_payload(cmd);
        msg.set_resolved_family_id(self.family);
        self.sock
            .request(msg, dump)
            .await
            .map_err(|e| kernel_error(op, e))
    }
}

/// A socket joined to the `mptcp_pm_events` multicast group.
///
/// [`PmEvents::next`] is cancel-safe: it can be a branch of `tokio::select!`.
pub struct PmEvents {
    sock: NlSocket,
    family: u16,
    group: u32,
    queue: VecDeque<PmEvent>,
    malformed: u64,
    overruns: u64,
}

impl fmt::Debug for PmEvents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PmEvents")
            .field("family", &self.family)
            .field("group", &self.group)
            .field("queued", &self.queue.len())
            .field("malformed", &self.malformed)
            .field("overruns", &self.overruns)
            .finish_non_exhaustive()
    }
}

impl PmEvents {
    /// Opens a socket in the calling thread's network namespace, resolves the
    /// family and joins its events group (needs `CAP_NET_ADMIN`).
    pub async fn connect() -> Result<PmEvents, Error> {
        let mut sock = NlSocket::open(NETLINK_GENERIC)?;
        let (family, group) = resolve(&mut sock).await?;
        sock.join(group)?;
        Ok(PmEvents {
            sock,
            family,
            group,
            queue: VecDeque::new(),
            malformed: 0,
            overruns: 0,
        })
    }

    /// The next event. Messages that do not decode are skipped and counted in
    /// [`malformed`](Self::malformed); a receive-buffer overrun (`ENOBUFS`: events
    /// were lost) is counted in [`overruns`](Self::overruns) and reading goes on.
    pub async fn next(&mut self) -> Result<PmEvent, Error> {
        loop {
            if let Some(e) = self.queue.pop_front() {
                return Ok(e);
            }
            let datagram = match self.sock.recv().await {
                Ok(d) => d,
                Err(e) if e.raw_os_error() == Some(nix::errno::Errno::ENOBUFS as i32) => {
                    self.overruns += 1;
                    continue;
                }
                Err(e) => return Err(Error::Io(e)),
            };
            for r in PmEvent::decode_datagram(&datagram, self.family) {
                match r {
                    Ok(e) => self.queue.push_back(e),
                    Err(_) => self.malformed += 1,
                }
            }
        }
    }

    /// Messages skipped because they did not decode as `mptcp_pm` events.
    pub fn malformed(&self) -> u64 {
        self.malformed
    }

    /// Receive-buffer overruns: each lost an unknown number of events.
    pub fn overruns(&self) -> u64 {
        self.overruns
    }

    /// The multicast group id joined.
    pub fn group(&self) -> u32 {
        self.group
    }
}

/// `CTRL_CMD_GETFAMILY "mptcp_pm"`: the family id and the events group id.
async fn resolve(sock: &mut NlSocket) -> Result<(u16, u32), Error> {
    let ctrl = GenlCtrl {
        cmd: GenlCtrlCmd::GetFamily,
        nlas: vec![GenlCtrlAttrs::FamilyName(FAMILY_NAME.to_string())],
    };
    let replies = match sock.request(GenlMessage::from_payload(ctrl), false).await {
        Ok(r) => r,
        Err(RequestError::Kernel { errno, .. }) if errno == nix::errno::Errno::ENOENT as i32 => {
            return Err(Error::FamilyMissing);
        }
        Err(e) => return Err(kernel_error("CTRL_CMD_GETFAMILY", e)),
    };
    let msg = replies.first().ok_or(Error::FamilyMissing)?;
    Ok(parse_family(genl_attrs(msg)?)?)
}

/// The family id and the id of group `mptcp_pm_events` in a `CTRL_CMD_NEWFAMILY`.
fn parse_family(attrs: &[u8]) -> Result<(u16, u32), ParseError> {
    let (mut family, mut group) = (None, None);
    for a in attr::walk(attrs) {
        let (kind, v) = a?;
        match kind {
            CTRL_ATTR_FAMILY_ID => family = Some(attr::get_u16("CTRL_ATTR_FAMILY_ID", v)?),
            CTRL_ATTR_MCAST_GROUPS => {
                for g in attr::walk(v) {
                    let (_, grp) = g?;
                    let (mut name, mut id) = (None, None);
                    for ga in attr::walk(grp) {
                        let (k, gv) = ga?;
                        match k {
                            CTRL_ATTR_MCAST_GRP_NAME => name = gv.split(|&b| b == 0).next(),
                            CTRL_ATTR_MCAST_GRP_ID => {
                                id = Some(attr::get_u32("CTRL_ATTR_MCAST_GRP_ID", gv)?)
                            }
                            _ => {}
                        }
                    }
                    if name == Some(EVENTS_GROUP.as_bytes()) {
                        group = id;
                    }
                }
            }
            _ => {}
        }
    }
    Ok((
        family.ok_or(ParseError::Missing("CTRL_ATTR_FAMILY_ID"))?,
        group.ok_or(ParseError::Missing(
            "CTRL_ATTR_MCAST_GROUPS mptcp_pm_events",
        ))?,
    ))
}

/// The attributes of a whole generic-netlink message (after both headers).
pub(crate) fn genl_attrs(msg: &[u8]) -> Result<&[u8], ParseError> {
    msg.get(GENL_PAYLOAD_AT..)
        .ok_or_else(|| ParseError::Framing("generic-netlink reply cut short".into()))
}

/// The endpoint in the `MPTCP_PM_ATTR_ADDR` of a `GET_ADDR` reply (dumps label
/// their messages `ADD_ADDR`, so the command number is not checked).
fn endpoint_of(msg: &[u8]) -> Result<Endpoint, ParseError> {
    for a in attr::walk(genl_attrs(msg)?) {
        let (kind, v) = a?;
        if kind == ATTR_ADDR {
            return Endpoint::try_from(PmAddr::parse(v)?);
        }
    }
    Err(ParseError::Missing("MPTCP_PM_ATTR_ADDR"))
}

pub(crate) fn kernel_error(op: &'static str, e: RequestError) -> Error {
    match e {
        RequestError::Io(e) => Error::Io(e),
        RequestError::Parse(e) => Error::Parse(e),
        RequestError::Kernel { errno, message } => Error::Kernel {
            op,
            errno,
            msg: message,
        },
    }
}

/// Interface indexes are `s32` on the wire; one above `i32::MAX` cannot exist.
fn ifindex_attr(i: u32) -> i32 {
    i32::try_from(i).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::genl::attr::Attr;

    #[test]
    fn finds_family_and_events_group() {
        let grp = |i: u16, name: &str, id: u32| {
            let mut n = name.as_bytes().to_vec();
            n.push(0);
            Attr::Nested(
                i,
                vec![
                    Attr::U32(CTRL_ATTR_MCAST_GRP_ID, id),
                    Attr::Bytes(CTRL_ATTR_MCAST_GRP_NAME, n),
                ],
            )
        };
        let attrs = attr::emit_attrs(&[
            Attr::Bytes(2, b"mptcp_pm\0".to_vec()),
            Attr::U16(CTRL_ATTR_FAMILY_ID, 0x1d),
            Attr::Nested(
                CTRL_ATTR_MCAST_GROUPS,
                vec![grp(1, "other", 3), grp(2, "mptcp_pm_events", 9)],
            ),
        ]);
        assert_eq!(parse_family(&attrs), Ok((0x1d, 9)));
        let no_group = attr::emit_attrs(&[Attr::U16(CTRL_ATTR_FAMILY_ID, 0x1d)]);
        assert!(matches!(
            parse_family(&no_group),
            Err(ParseError::Missing(_))
        ));
    }

    #[test]
    fn reads_endpoint_from_a_reply() {
        let ep = Endpoint::new(4, "10.1.2.3".parse().unwrap()).with_flags(AddrFlags::SUBFLOW);
        let mut msg = vec![0u8; GENL_PAYLOAD_AT];
        msg.extend(attr::emit_attrs(&[ep.to_pm_addr().to_attr(ATTR_ADDR)]));
        assert_eq!(endpoint_of(&msg), Ok(ep));
        assert!(endpoint_of(&msg[..10]).is_err());
        assert_eq!(
            endpoint_of(&msg[..GENL_PAYLOAD_AT]),
            Err(ParseError::Missing("MPTCP_PM_ATTR_ADDR"))
        );
    }
}
