//! Links and addresses of the calling thread's network namespace, from rtnetlink:
//! a snapshot, then the changes.
//!
//! Messages are read directly (`struct ifinfomsg`, `struct ifaddrmsg` and the few
//! attributes needed, include/uapi/linux/rtnetlink.h, if_link.h, if_addr.h), so an
//! attribute this crate does not know never hides a link or an address.

use std::collections::VecDeque;
use std::fmt;
use std::net::IpAddr;

use netlink_sys::protocols::NETLINK_ROUTE;

use crate::Error;
use crate::genl::{ParseError, attr};
use crate::nl::{self, NlSocket, RawPayload, RequestError};

// include/uapi/linux/rtnetlink.h
const RTM_NEWLINK: u16 = 16;
const RTM_DELLINK: u16 = 17;
const RTM_GETLINK: u16 = 18;
const RTM_NEWADDR: u16 = 20;
const RTM_DELADDR: u16 = 21;
const RTM_GETADDR: u16 = 22;
// enum rtnetlink_groups
const RTNLGRP_LINK: u32 = 1;
const RTNLGRP_IPV4_IFADDR: u32 = 5;
const RTNLGRP_IPV6_IFADDR: u32 = 9;
// include/uapi/linux/if_link.h, if_addr.h
const IFLA_IFNAME: u16 = 3;
const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;
const IFA_FLAGS: u16 = 8;
// include/uapi/linux/if.h, if_addr.h
const IFF_UP: u32 = 1 << 0;
const IFF_LOWER_UP: u32 = 1 << 16;
const IFF_DORMANT: u32 = 1 << 17;
const IFA_F_DADFAILED: u32 = 0x08;
const IFA_F_TENTATIVE: u32 = 0x40;
const AF_UNSPEC: u8 = 0;
const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;
const IFINFOMSG_LEN: usize = 16;
const IFADDRMSG_LEN: usize = 8;

/// A change of the namespace's links or addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetEvent {
    /// A link exists or changed (`RTM_NEWLINK`).
    Link {
        /// Interface index.
        index: u32,
        /// Interface name.
        name: String,
        /// Administratively up with a carrier, and not dormant (`IFF_UP` and `IFF_LOWER_UP`,
        /// not `IFF_DORMANT`: for Wi-Fi, associated and authenticated). Not `IFF_RUNNING`:
        /// the kernel derives it from the operational state, which its link-watch work
        /// updates (and announces) up to 1 s after the carrier changes; the carrier and
        /// dormant flags are current in the first notification.
        up: bool,
    },
    /// A link was deleted or left the namespace (`RTM_DELLINK`).
    LinkGone {
        /// Interface index.
        index: u32,
    },
    /// An address is usable (`RTM_NEWADDR`; IPv6 addresses still tentative,
    /// during duplicate address detection, are reported once DAD succeeds).
    AddrNew {
        /// Interface index.
        index: u32,
        /// The local address.
        addr: IpAddr,
        /// Prefix length.
        prefix_len: u8,
    },
    /// An address was removed (`RTM_DELADDR`).
    AddrGone {
        /// Interface index.
        index: u32,
        /// The local address.
        addr: IpAddr,
    },
}

/// A socket subscribed to link and IPv4/IPv6 address changes.
///
/// [`NetMonitor::next`] is cancel-safe. After a receive-buffer overrun the monitor
/// dumps links and addresses again and returns them as events, so a consumer that
/// treats `Link`/`AddrNew` as "is" rather than "became" converges (a deletion missed
/// in the overrun is not replayed).
pub struct NetMonitor {
    sock: NlSocket,
    queue: VecDeque<NetEvent>,
    malformed: u64,
    overruns: u64,
}

impl fmt::Debug for NetMonitor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NetMonitor")
            .field("queued", &self.queue.len())
            .field("malformed", &self.malformed)
            .field("overruns", &self.overruns)
            .finish_non_exhaustive()
    }
}

impl NetMonitor {
    /// Subscribes to `RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR` first,
    /// then dumps links and addresses: the snapshot returned (links first). Changes
    /// made during the dump come from [`next`](Self::next), possibly repeating the
    /// snapshot.
    pub async fn connect() -> Result<(NetMonitor, Vec<NetEvent>), Error> {
        let mut sock = NlSocket::open(NETLINK_ROUTE)?;
        for g in [RTNLGRP_LINK, RTNLGRP_IPV4_IFADDR, RTNLGRP_IPV6_IFADDR] {
            sock.join(g)?;
        }
        let mut mon = NetMonitor {
            sock,
            queue: VecDeque::new(),
            malformed: 0,
            overruns: 0,
        };
        let snapshot = mon.dump().await?;
        Ok((mon, snapshot))
    }

    /// The next change.
    pub async fn next(&mut self) -> Result<NetEvent, Error> {
        loop {
            if let Some(e) = self.queue.pop_front() {
                return Ok(e);
            }
            match self.sock.recv().await {
                Ok(d) => self.decode(&d),
                Err(e) if e.raw_os_error() == Some(nix::errno::Errno::ENOBUFS as i32) => {
                    self.overruns += 1;
                    let snapshot = self.dump().await?;
                    self.queue.extend(snapshot);
                }
                Err(e) => return Err(Error::Io(e)),
            }
        }
    }

    /// Messages skipped because they did not decode.
    pub fn malformed(&self) -> u64 {
        self.malformed
    }

    /// Receive-buffer overruns (each followed by a new dump).
    pub fn overruns(&self) -> u64 {
        self.overruns
    }

    fn decode(&mut self, datagram: &[u8]) {
        for frame in nl::frames(datagram) {
            match frame.and_then(|f| parse(f.kind, f.payload)) {
                Ok(Some(e)) => self.queue.push_back(e),
                Ok(None) => {}
                Err(_) => self.malformed += 1,
            }
        }
    }

    /// Dumps links, then addresses.
    async fn dump(&mut self) -> Result<Vec<NetEvent>, Error> {
        let mut out = Vec::new();
        for (kind, op, len) in [
            (RTM_GETLINK, "RTM_GETLINK", IFINFOMSG_LEN),
            (RTM_GETADDR, "RTM_GETADDR", IFADDRMSG_LEN),
        ] {
            let req = RawPayload {
                kind,
                bytes: vec![0; len], // family AF_UNSPEC: every family
            };
            let replies = self.sock.request(req, true).await.map_err(|e| match e {
                RequestError::Io(e) => Error::Io(e),
                RequestError::Parse(e) => Error::Parse(e),
                RequestError::Kernel { errno, message } => Error::Kernel {
                    op,
                    errno,
                    msg: message,
                },
            })?;
            for msg in replies {
                for frame in nl::frames(&msg) {
                    match frame.and_then(|f| parse(f.kind, f.payload)) {
                        Ok(Some(e)) => out.push(e),
                        Ok(None) => {}
                        Err(_) => self.malformed += 1,
                    }
                }
            }
        }
        Ok(out)
    }
}

/// Decodes one rtnetlink message; `None` for messages that are not events here
/// (other types, bridge-port link messages, tentative addresses).
pub fn parse(kind: u16, payload: &[u8]) -> Result<Option<NetEvent>, ParseError> {
    match kind {
        RTM_NEWLINK | RTM_DELLINK => parse_link(kind, payload),
        RTM_NEWADDR | RTM_DELADDR => parse_addr(kind, payload),
        _ => Ok(None),
    }
}

fn parse_link(kind: u16, payload: &[u8]) -> Result<Option<NetEvent>, ParseError> {
    let (hdr, attrs) = split(payload, IFINFOMSG_LEN, "ifinfomsg")?;
    // struct ifinfomsg { u8 family, pad; u16 type; s32 index; u32 flags, change; }
    if hdr[0] != AF_UNSPEC {
        return Ok(None); // AF_BRIDGE port information, not the link itself
    }
    let index = u32_at(hdr, 4);
    let flags = u32_at(hdr, 8);
    if kind == RTM_DELLINK {
        return Ok(Some(NetEvent::LinkGone { index }));
    }
    let mut name = None;
    for a in attr::walk(attrs) {
        let (k, v) = a?;
        if k == IFLA_IFNAME {
            let text = v.split(|&b| b == 0).next().unwrap_or(&[]);
            name = Some(String::from_utf8_lossy(text).into_owned());
        }
    }
    Ok(Some(NetEvent::Link {
        index,
        name: name.ok_or(ParseError::Missing("IFLA_IFNAME"))?,
        up: flags & (IFF_UP | IFF_LOWER_UP | IFF_DORMANT) == IFF_UP | IFF_LOWER_UP,
    }))
}

fn parse_addr(kind: u16, payload: &[u8]) -> Result<Option<NetEvent>, ParseError> {
    let (hdr, attrs) = split(payload, IFADDRMSG_LEN, "ifaddrmsg")?;
    // struct ifaddrmsg { u8 family, prefixlen, flags, scope; u32 index; }
    let (family, prefix_len) = (hdr[0], hdr[1]);
    let mut flags = u32::from(hdr[2]);
    let index = u32_at(hdr, 4);
    if family != AF_INET && family != AF_INET6 {
        return Ok(None);
    }
    let (mut local, mut address) = (None, None);
    for a in attr::walk(attrs) {
        let (k, v) = a?;
        let ip = || -> Result<IpAddr, ParseError> {
            if family == AF_INET {
                Ok(attr::get_ipv4("IFA_ADDRESS", v)?.into())
            } else {
                Ok(attr::get_ipv6("IFA_ADDRESS", v)?.into())
            }
        };
        match k {
            IFA_LOCAL => local = Some(ip()?),
            IFA_ADDRESS => address = Some(ip()?),
            IFA_FLAGS => flags = attr::get_u32("IFA_FLAGS", v)?,
            _ => {}
        }
    }
    // IFA_LOCAL is the local address; IFA_ADDRESS the peer's on point-to-point
    // links (rtnetlink(7)). IPv6 sends only IFA_ADDRESS.
    let addr = local
        .or(address)
        .ok_or(ParseError::Missing("IFA_ADDRESS"))?;
    Ok(Some(if kind == RTM_DELADDR {
        NetEvent::AddrGone { index, addr }
    } else if flags & (IFA_F_TENTATIVE | IFA_F_DADFAILED) != 0 {
        return Ok(None);
    } else {
        NetEvent::AddrNew {
            index,
            addr,
            prefix_len,
        }
    }))
}

fn split<'a>(
    payload: &'a [u8],
    len: usize,
    name: &str,
) -> Result<(&'a [u8], &'a [u8]), ParseError> {
    if payload.len() < len {
        return Err(ParseError::Framing(format!("{name} cut short")));
    }
    Ok(payload.split_at(len))
}

/// A host-order u32 at `at` of a header already checked to be long enough.
fn u32_at(hdr: &[u8], at: usize) -> u32 {
    let b = hdr
        .get(at..at + 4)
        .and_then(|b| <[u8; 4]>::try_from(b).ok());
    b.map(u32::from_ne_bytes).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::genl::attr::Attr;

    fn link(family: u8, index: u32, flags: u32, name: Option<&str>) -> Vec<u8> {
        let mut p = vec![family, 0, 1, 0];
        p.extend(index.to_ne_bytes());
        p.extend(flags.to_ne_bytes());
        p.extend(0u32.to_ne_bytes());
        if let Some(n) = name {
            let mut v = n.as_bytes().to_vec();
            v.push(0);
            p.extend(attr::emit_attrs(&[
                Attr::U32(4, 1500),
                Attr::Bytes(IFLA_IFNAME, v),
            ]));
        }
        p
    }

    fn addr(family: u8, prefix: u8, flags: u8, index: u32, attrs: &[Attr]) -> Vec<u8> {
        let mut p = vec![family, prefix, flags, 0];
        p.extend(index.to_ne_bytes());
        p.extend(attr::emit_attrs(attrs));
        p
    }

    #[test]
    fn links() {
        // IFF_UP, IFF_LOWER_UP and IFF_MULTICAST; IFF_RUNNING (1 << 6) not yet set, as in the
        // first notification after the carrier comes back.
        let up = IFF_UP | IFF_LOWER_UP | 0x1000;
        let e = parse(RTM_NEWLINK, &link(0, 3, up, Some("wlan0"))).unwrap();
        assert_eq!(
            e,
            Some(NetEvent::Link {
                index: 3,
                name: "wlan0".into(),
                up: true
            })
        );
        // Up without carrier is not up.
        let e = parse(RTM_NEWLINK, &link(0, 3, IFF_UP, Some("wlan0"))).unwrap();
        assert!(matches!(e, Some(NetEvent::Link { up: false, .. })));
        // Dormant (Wi-Fi associated, not yet authenticated) is not up.
        let e = parse(RTM_NEWLINK, &link(0, 3, up | IFF_DORMANT, Some("wlan0"))).unwrap();
        assert!(matches!(e, Some(NetEvent::Link { up: false, .. })));
        assert_eq!(
            parse(RTM_DELLINK, &link(0, 3, 0, None)).unwrap(),
            Some(NetEvent::LinkGone { index: 3 })
        );
        // AF_BRIDGE port messages are not about the link.
        assert_eq!(parse(RTM_DELLINK, &link(7, 3, 0, None)).unwrap(), None);
        assert!(parse(RTM_NEWLINK, &link(0, 3, up, None)).is_err());
        assert!(parse(RTM_NEWLINK, &[0; 15]).is_err());
    }

    #[test]
    fn addresses() {
        let v4 = "10.0.1.2".parse::<std::net::Ipv4Addr>().unwrap();
        let peer = "10.0.1.9".parse::<std::net::Ipv4Addr>().unwrap();
        // Point-to-point: IFA_LOCAL is ours, IFA_ADDRESS the peer's.
        let p = addr(
            2,
            24,
            0,
            5,
            &[Attr::ipv4(IFA_ADDRESS, peer), Attr::ipv4(IFA_LOCAL, v4)],
        );
        assert_eq!(
            parse(RTM_NEWADDR, &p).unwrap(),
            Some(NetEvent::AddrNew {
                index: 5,
                addr: v4.into(),
                prefix_len: 24
            })
        );
        assert_eq!(
            parse(RTM_DELADDR, &p).unwrap(),
            Some(NetEvent::AddrGone {
                index: 5,
                addr: v4.into()
            })
        );
        let v6 = "dead:beef::1".parse::<std::net::Ipv6Addr>().unwrap();
        let p = addr(10, 64, 0, 6, &[Attr::ipv6(IFA_ADDRESS, v6)]);
        assert!(matches!(
            parse(RTM_NEWADDR, &p).unwrap(),
            Some(NetEvent::AddrNew { prefix_len: 64, .. })
        ));
        // Tentative (in the header or in IFA_FLAGS) is not yet new; its deletion is gone.
        let p = addr(10, 64, 0x40, 6, &[Attr::ipv6(IFA_ADDRESS, v6)]);
        assert_eq!(parse(RTM_NEWADDR, &p).unwrap(), None);
        let p = addr(
            10,
            64,
            0,
            6,
            &[Attr::ipv6(IFA_ADDRESS, v6), Attr::U32(IFA_FLAGS, 0x40)],
        );
        assert_eq!(parse(RTM_NEWADDR, &p).unwrap(), None);
        assert!(matches!(
            parse(RTM_DELADDR, &p).unwrap(),
            Some(NetEvent::AddrGone { .. })
        ));
        // A v6 family with a 4-byte address is malformed.
        let p = addr(10, 64, 0, 6, &[Attr::ipv4(IFA_ADDRESS, v4)]);
        assert!(parse(RTM_NEWADDR, &p).is_err());
        // RTM_NEWROUTE is not an event here.
        assert_eq!(parse(24, &p).unwrap(), None);
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(kind in 14u16..26, bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256)) {
            let _ = parse(kind, &bytes);
            for f in nl::frames(&bytes).flatten() {
                let _ = parse(f.kind, f.payload);
            }
        }
    }
}
