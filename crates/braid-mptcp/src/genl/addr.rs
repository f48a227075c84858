//! The nested address attribute (`MPTCP_PM_ATTR_ADDR`, `MPTCP_PM_ATTR_ADDR_REMOTE`,
//! `MPTCP_PM_ENDPOINT_ADDR`) and the typed [`Endpoint`] built from it.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use super::attr::{self, Attr, ParseError};
use super::consts::*;

bitflags::bitflags! {
    /// Endpoint flags, `MPTCP_PM_ADDR_FLAG_*` in include/uapi/linux/mptcp.h.
    /// Unknown bits from a newer kernel are kept as they are.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct AddrFlags: u32 {
        /// Announce the address to the peer (ADD_ADDR).
        const SIGNAL = 1 << 0;
        /// Open subflows from this address.
        const SUBFLOW = 1 << 1;
        /// Subflows from this address are backup subflows.
        const BACKUP = 1 << 2;
        /// One subflow from this address to every address of the peer.
        const FULLMESH = 1 << 3;
        /// Set by the kernel on an address it added by itself.
        const IMPLICIT = 1 << 4;
        /// Subflows to additional peer addresses (Linux 6.18).
        const LAMINAR = 1 << 5;
        const _ = !0;
    }
}

/// One nested address attribute exactly as on the wire: every field is optional,
/// because each command asks for a different subset (the kernel's
/// `mptcp_pm_parse_entry()` in net/mptcp/pm_netlink.c).
///
/// The family attribute is written when `addr` is set and read to pick `ADDR4` or
/// `ADDR6`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PmAddr {
    /// `MPTCP_PM_ADDR_ATTR_ID`: the address id (0 lets the kernel choose, where it can).
    pub id: Option<u8>,
    /// `MPTCP_PM_ADDR_ATTR_FAMILY` plus `ADDR4` or `ADDR6`.
    pub addr: Option<IpAddr>,
    /// `MPTCP_PM_ADDR_ATTR_PORT`.
    pub port: Option<u16>,
    /// `MPTCP_PM_ADDR_ATTR_FLAGS`.
    pub flags: Option<AddrFlags>,
    /// `MPTCP_PM_ADDR_ATTR_IF_IDX` (a signed 32-bit value on the wire).
    pub ifindex: Option<i32>,
}

impl PmAddr {
    /// An address attribute naming only an id.
    pub fn with_id(id: u8) -> PmAddr {
        PmAddr {
            id: Some(id),
            ..PmAddr::default()
        }
    }

    /// An address attribute naming an address and a port (0 is written as is).
    pub fn socket(sa: SocketAddr) -> PmAddr {
        PmAddr {
            addr: Some(sa.ip()),
            port: Some(sa.port()),
            ..PmAddr::default()
        }
    }

    pub(crate) fn to_attr(self, kind: u16) -> Attr {
        let mut v = Vec::new();
        if let Some(addr) = self.addr {
            match addr {
                IpAddr::V4(a) => {
                    v.push(Attr::U16(ADDR_ATTR_FAMILY, AF_INET));
                    v.push(Attr::ipv4(ADDR_ATTR_ADDR4, a));
                }
                IpAddr::V6(a) => {
                    v.push(Attr::U16(ADDR_ATTR_FAMILY, AF_INET6));
                    v.push(Attr::ipv6(ADDR_ATTR_ADDR6, a));
                }
            }
        }
        if let Some(id) = self.id {
            v.push(Attr::U8(ADDR_ATTR_ID, id));
        }
        // The kernel reads the port with nla_get_u16() and then htons(): host order,
        // although mptcp_pm.yaml declares it big-endian (see the crate docs).
        if let Some(port) = self.port {
            v.push(Attr::U16(ADDR_ATTR_PORT, port));
        }
        if let Some(flags) = self.flags {
            v.push(Attr::U32(ADDR_ATTR_FLAGS, flags.bits()));
        }
        if let Some(ifindex) = self.ifindex {
            v.push(Attr::I32(ADDR_ATTR_IF_IDX, ifindex));
        }
        Attr::Nested(kind, v)
    }

    /// Parses the value of a nested address attribute. Unknown attributes are
    /// skipped; an address without a family is ignored, as the kernel does.
    pub fn parse(buf: &[u8]) -> Result<PmAddr, ParseError> {
        let mut out = PmAddr::default();
        let mut family = None;
        let (mut v4, mut v6) = (None, None);
        for a in attr::walk(buf) {
            let (kind, v) = a?;
            match kind {
                ADDR_ATTR_FAMILY => family = Some(attr::get_u16("MPTCP_PM_ADDR_ATTR_FAMILY", v)?),
                ADDR_ATTR_ID => out.id = Some(attr::get_u8("MPTCP_PM_ADDR_ATTR_ID", v)?),
                ADDR_ATTR_ADDR4 => v4 = Some(attr::get_ipv4("MPTCP_PM_ADDR_ATTR_ADDR4", v)?),
                ADDR_ATTR_ADDR6 => v6 = Some(attr::get_ipv6("MPTCP_PM_ADDR_ATTR_ADDR6", v)?),
                ADDR_ATTR_PORT => out.port = Some(attr::get_u16("MPTCP_PM_ADDR_ATTR_PORT", v)?),
                ADDR_ATTR_FLAGS => {
                    let bits = attr::get_u32("MPTCP_PM_ADDR_ATTR_FLAGS", v)?;
                    out.flags = Some(AddrFlags::from_bits_retain(bits));
                }
                ADDR_ATTR_IF_IDX => {
                    out.ifindex = Some(attr::get_i32("MPTCP_PM_ADDR_ATTR_IF_IDX", v)?)
                }
                _ => {}
            }
        }
        out.addr = match family {
            None => None,
            Some(AF_INET) => Some(
                v4.ok_or(ParseError::Missing("MPTCP_PM_ADDR_ATTR_ADDR4"))?
                    .into(),
            ),
            Some(AF_INET6) => Some(
                v6.ok_or(ParseError::Missing("MPTCP_PM_ADDR_ATTR_ADDR6"))?
                    .into(),
            ),
            Some(f) => return Err(ParseError::BadFamily(f)),
        };
        Ok(out)
    }
}

/// An MPTCP endpoint: a local address with its id and flags, as the in-kernel path
/// manager stores it and as the userspace path manager announces it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// Address id; 0 asks the kernel to pick one (ADD_ADDR only).
    pub id: u8,
    /// The address.
    pub addr: IpAddr,
    /// A port, or 0 for none (announce: reuse the connection's port).
    pub port: u16,
    /// Signal, subflow, backup, fullmesh...
    pub flags: AddrFlags,
    /// The interface the address belongs to, if bound to one.
    pub ifindex: Option<u32>,
}

impl Endpoint {
    /// An endpoint with no port, no flags and no interface.
    pub fn new(id: u8, addr: IpAddr) -> Endpoint {
        Endpoint {
            id,
            addr,
            port: 0,
            flags: AddrFlags::empty(),
            ifindex: None,
        }
    }

    /// The same endpoint with these flags.
    pub fn with_flags(mut self, flags: AddrFlags) -> Endpoint {
        self.flags = flags;
        self
    }

    /// The same endpoint with this port.
    pub fn with_port(mut self, port: u16) -> Endpoint {
        self.port = port;
        self
    }

    /// The same endpoint bound to this interface index.
    pub fn with_ifindex(mut self, ifindex: u32) -> Endpoint {
        self.ifindex = Some(ifindex);
        self
    }

    /// The wire form: a port of 0 and no interface are left out.
    pub fn to_pm_addr(&self) -> PmAddr {
        PmAddr {
            id: Some(self.id),
            addr: Some(self.addr),
            port: (self.port != 0).then_some(self.port),
            flags: Some(self.flags),
            ifindex: self.ifindex.and_then(|i| i32::try_from(i).ok()),
        }
    }
}

impl TryFrom<PmAddr> for Endpoint {
    type Error = ParseError;

    fn try_from(a: PmAddr) -> Result<Endpoint, ParseError> {
        Ok(Endpoint {
            id: a.id.unwrap_or(0),
            addr: a
                .addr
                .ok_or(ParseError::Missing("MPTCP_PM_ADDR_ATTR_FAMILY"))?,
            port: a.port.unwrap_or(0),
            flags: a.flags.unwrap_or_default(),
            ifindex: a
                .ifindex
                .and_then(|i| u32::try_from(i).ok())
                .filter(|&i| i != 0),
        })
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "id {} {}", self.id, self.addr)?;
        if self.port != 0 {
            write!(f, " port {}", self.port)?;
        }
        if !self.flags.is_empty() {
            write!(f, " flags {:?}", self.flags)?;
        }
        if let Some(i) = self.ifindex {
            write!(f, " dev #{i}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value_of(a: Attr) -> Vec<u8> {
        let buf = attr::emit_attrs(&[a]);
        buf[4..].to_vec()
    }

    #[test]
    fn v4_round_trip_and_layout() {
        let a = PmAddr {
            id: Some(3),
            addr: Some("10.0.2.1".parse().unwrap()),
            port: Some(0x1234),
            flags: Some(AddrFlags::SIGNAL | AddrFlags::BACKUP),
            ifindex: Some(4),
        };
        let v = value_of(a.to_attr(ATTR_ADDR));
        // family first, host-order u16 2.
        assert_eq!(&v[..8], &[6, 0, 1, 0, 2, 0, 0, 0]);
        // ADDR4 in network order.
        assert_eq!(&v[8..16], &[8, 0, 3, 0, 10, 0, 2, 1]);
        assert_eq!(PmAddr::parse(&v).unwrap(), a);
    }

    #[test]
    fn v6_and_id_only() {
        let a = PmAddr::socket("[dead:beef:2::1]:0".parse().unwrap());
        assert_eq!(PmAddr::parse(&value_of(a.to_attr(ATTR_ADDR))).unwrap(), a);
        let b = PmAddr::with_id(9);
        assert_eq!(PmAddr::parse(&value_of(b.to_attr(ATTR_ADDR))).unwrap(), b);
    }

    #[test]
    fn family_without_address_is_an_error() {
        let v = attr::emit_attrs(&[Attr::U16(ADDR_ATTR_FAMILY, AF_INET6)]);
        assert_eq!(
            PmAddr::parse(&v),
            Err(ParseError::Missing("MPTCP_PM_ADDR_ATTR_ADDR6"))
        );
        let v = attr::emit_attrs(&[Attr::U16(ADDR_ATTR_FAMILY, 7)]);
        assert_eq!(PmAddr::parse(&v), Err(ParseError::BadFamily(7)));
    }

    #[test]
    fn unknown_attributes_are_skipped() {
        let v = attr::emit_attrs(&[Attr::U32(99, 1), Attr::U8(ADDR_ATTR_ID, 4)]);
        assert_eq!(PmAddr::parse(&v).unwrap(), PmAddr::with_id(4));
    }

    #[test]
    fn endpoint_conversion() {
        let e = Endpoint::new(5, "10.0.3.1".parse().unwrap())
            .with_flags(AddrFlags::SUBFLOW)
            .with_ifindex(2);
        assert_eq!(Endpoint::try_from(e.to_pm_addr()).unwrap(), e);
        assert!(Endpoint::try_from(PmAddr::with_id(1)).is_err());
        assert_eq!(
            e.to_string(),
            "id 5 10.0.3.1 flags AddrFlags(SUBFLOW) dev #2"
        );
    }
}
