//! The client's links: each configured interface, whether it is usable, its addresses.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// One client interface, with the gateway it reaches.
pub(crate) struct Link {
    pub name: String,
    pub gateway: SocketAddr,
    pub source: Option<IpAddr>,
    pub backup: bool,
    pub up: bool,
    /// The interface's addresses at the last look (sorted).
    pub addrs: Vec<IpAddr>,
    /// The largest UDP payload its path to the gateway carries, measured when it was last
    /// seen up or re-addressed (`udp::path_payload`; `None`: not known).
    pub payload: Option<usize>,
}

impl Link {
    /// The link's local address as the path manager sees it: the configured source, else the
    /// interface's first address of the gateway's family (global before link-local), else the
    /// family's unspecified address.
    pub fn local_ip(&self) -> IpAddr {
        if let Some(ip) = self.source {
            return ip;
        }
        let v6 = self.gateway.is_ipv6();
        let link_local = |ip: &IpAddr| match ip {
            IpAddr::V6(a) => a.is_unicast_link_local(),
            IpAddr::V4(a) => a.is_link_local(),
        };
        let same: Vec<IpAddr> = self
            .addrs
            .iter()
            .copied()
            .filter(|a| a.is_ipv6() == v6)
            .collect();
        same.iter()
            .find(|a| !link_local(a))
            .or(same.first())
            .copied()
            .unwrap_or(if v6 {
                IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED)
            } else {
                IpAddr::V4(Ipv4Addr::UNSPECIFIED)
            })
    }
}

/// Each interface's state: whether it is usable (IFF_UP and IFF_LOWER_UP, not IFF_DORMANT: up,
/// with a carrier, and for Wi-Fi authenticated) and its addresses (sorted). Not IFF_RUNNING: the
/// kernel derives it from the operational state, which its link-watch work updates up to 1 s
/// after the carrier changes when several links change at once; the carrier and dormant flags
/// are current at once. One getifaddrs dump over netlink, in the calling
/// thread's network namespace (not /sys, which shows the namespace it was mounted in). A
/// missing interface is down without addresses.
pub(crate) fn link_states(names: &[&str]) -> Vec<(bool, Vec<IpAddr>)> {
    use nix::net::if_::InterfaceFlags;
    let mut st = vec![(false, Vec::new()); names.len()];
    for a in nix::ifaddrs::getifaddrs().into_iter().flatten() {
        let Some(i) = names.iter().position(|n| *n == a.interface_name) else {
            continue;
        };
        st[i].0 |= a
            .flags
            .contains(InterfaceFlags::IFF_UP | InterfaceFlags::IFF_LOWER_UP)
            && !a.flags.contains(InterfaceFlags::IFF_DORMANT);
        st[i].1.extend(a.address.as_ref().and_then(ip_of));
    }
    for (_, addrs) in &mut st {
        addrs.sort();
    }
    st
}

/// The IP address of an interface address entry, if it is one.
fn ip_of(a: &nix::sys::socket::SockaddrStorage) -> Option<IpAddr> {
    a.as_sockaddr_in()
        .map(|s| IpAddr::V4(s.ip()))
        .or_else(|| a.as_sockaddr_in6().map(|s| IpAddr::V6(s.ip())))
}

/// The interfaces that are up, not loopback, with an address of `ip`'s family when `ip` is
/// unspecified, or the one holding `ip`: where datagrams to a socket bound to `ip` arrive. One
/// getifaddrs dump, in the calling thread's namespace.
pub(crate) fn receiving_interfaces(ip: IpAddr) -> Vec<String> {
    use nix::net::if_::InterfaceFlags;
    let mut out: Vec<String> = Vec::new();
    for a in nix::ifaddrs::getifaddrs().into_iter().flatten() {
        if !a.flags.contains(InterfaceFlags::IFF_UP)
            || a.flags.contains(InterfaceFlags::IFF_LOOPBACK)
        {
            continue;
        }
        let Some(addr) = a.address.as_ref().and_then(ip_of) else {
            continue;
        };
        let fits = if ip.is_unspecified() {
            addr.is_ipv4() == ip.is_ipv4()
        } else {
            addr == ip
        };
        if fits && !out.contains(&a.interface_name) {
            out.push(a.interface_name);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(gateway: &str, source: Option<&str>, addrs: &[&str]) -> Link {
        Link {
            name: "c0".into(),
            gateway: gateway.parse().unwrap(),
            source: source.map(|s| s.parse().unwrap()),
            backup: false,
            up: true,
            addrs: addrs.iter().map(|a| a.parse().unwrap()).collect(),
            payload: None,
        }
    }

    #[test]
    fn local_ip_follows_the_gateway_family_and_prefers_global() {
        let addrs = ["10.0.1.2", "fd00:1::2", "fe80::1"];
        assert_eq!(
            link("10.0.8.2:7000", None, &addrs).local_ip().to_string(),
            "10.0.1.2"
        );
        assert_eq!(
            link("[fd00:9::1]:7000", None, &["fe80::1", "fd00:1::2"])
                .local_ip()
                .to_string(),
            "fd00:1::2"
        );
        assert_eq!(
            link("[fd00:9::1]:7000", None, &["fe80::1"])
                .local_ip()
                .to_string(),
            "fe80::1"
        );
        assert_eq!(
            link("[fd00:9::1]:7000", None, &["10.0.1.2"])
                .local_ip()
                .to_string(),
            "::"
        );
        assert_eq!(
            link("10.0.8.2:7000", Some("10.0.1.9"), &addrs)
                .local_ip()
                .to_string(),
            "10.0.1.9"
        );
    }
}
