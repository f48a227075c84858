//! The in-kernel path manager's endpoints and limits: every command round-trips
//! through the kernel of a fresh namespace.

use std::net::IpAddr;

use braid_mptcp::netns::NetNs;
use braid_mptcp::{AddrFlags, Endpoint, Error, PmClient};

use crate::util::*;

const EINVAL: i32 = 22;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn endpoints_and_limits_round_trip() {
    let ns = NetNs::new("bme").unwrap();
    ns.ip(&["link", "add", "d0", "type", "veth", "peer", "name", "d1"])
        .unwrap();
    ns.ip(&["link", "set", "d0", "up"]).unwrap();
    // A signal endpoint with a port listens on its address: it must be local.
    ns.ip(&["addr", "add", "10.0.3.2/24", "dev", "d0"]).unwrap();
    let d0 = ns.ifindex("d0").unwrap();
    let rt = runtime();
    let mut pm = in_ns(&ns, &rt, || async { PmClient::connect().await.unwrap() });
    assert!(pm.events_group() > 0);
    assert_eq!(ns.run(braid_mptcp::path_manager_mode).unwrap(), "kernel");

    rt.block_on(async {
        // A new namespace has no endpoints; limits round-trip and are bounded.
        assert_eq!(pm.dump_addrs().await.unwrap(), vec![]);
        pm.set_limits(2, 3).await.unwrap();
        assert_eq!(pm.get_limits().await.unwrap(), (2, 3));
        let r = pm.set_limits(2, 9).await;
        assert_kernel_error(r, "SET_LIMITS", EINVAL, "8");
        assert_eq!(pm.get_limits().await.unwrap(), (2, 3));

        // ADD_ADDR with an id, and with id 0 (the kernel picks the next free one).
        let signal = Endpoint::new(1, ip("10.0.3.1")).with_flags(AddrFlags::SIGNAL);
        pm.add_addr(signal).await.unwrap();
        let subflow = Endpoint::new(0, ip("dead:beef:3::1"))
            .with_flags(AddrFlags::SUBFLOW | AddrFlags::BACKUP)
            .with_ifindex(d0);
        pm.add_addr(subflow).await.unwrap();
        let with_port = Endpoint::new(7, ip("10.0.3.2"))
            .with_flags(AddrFlags::SIGNAL)
            .with_port(20123);
        pm.add_addr(with_port).await.unwrap();
        // The same address again is refused.
        let again = pm.add_addr(Endpoint::new(9, ip("10.0.3.1"))).await;
        assert!(
            matches!(again, Err(Error::Kernel { op: "ADD_ADDR", .. })),
            "{again:?}"
        );

        // GET_ADDR and the dump give them back (the port in host order both ways).
        assert_eq!(pm.get_addr(1).await.unwrap(), signal);
        assert_eq!(pm.get_addr(7).await.unwrap(), with_port);
        let all = pm.dump_addrs().await.unwrap();
        assert_eq!(all, vec![signal, Endpoint { id: 2, ..subflow }, with_port]);
        // The signal endpoint with a port listens there (its TCP subflow listener).
        let ss = ns.exec(&["ss", "-tln"]).unwrap();
        let ss = String::from_utf8_lossy(&ss.stdout);
        assert!(ss.contains("10.0.3.2:20123"), "{ss}");

        // SET_FLAGS without a token changes backup (and fullmesh) only.
        pm.set_endpoint_flags(1, AddrFlags::BACKUP).await.unwrap();
        assert_eq!(
            pm.get_addr(1).await.unwrap().flags,
            AddrFlags::SIGNAL | AddrFlags::BACKUP
        );
        pm.set_endpoint_flags(2, AddrFlags::FULLMESH).await.unwrap();
        assert_eq!(
            pm.get_addr(2).await.unwrap().flags,
            AddrFlags::SUBFLOW | AddrFlags::FULLMESH
        );
        let r = pm.set_endpoint_flags(42, AddrFlags::BACKUP).await;
        assert!(
            matches!(
                r,
                Err(Error::Kernel {
                    op: "SET_FLAGS",
                    msg: Some(_),
                    ..
                })
            ),
            "{r:?}"
        );

        // DEL_ADDR; then the id is unknown.
        pm.del_addr(1).await.unwrap();
        let r = pm.get_addr(1).await;
        assert!(
            matches!(
                r,
                Err(Error::Kernel {
                    op: "GET_ADDR",
                    msg: Some(_),
                    ..
                })
            ),
            "{r:?}"
        );
        let r = pm.del_addr(1).await;
        assert!(
            matches!(
                r,
                Err(Error::Kernel {
                    op: "DEL_ADDR",
                    msg: Some(_),
                    ..
                })
            ),
            "{r:?}"
        );
        assert_eq!(pm.dump_addrs().await.unwrap().len(), 2);

        // FLUSH_ADDRS empties the table.
        pm.flush_addrs().await.unwrap();
        assert_eq!(pm.dump_addrs().await.unwrap(), vec![]);
    });
}

#[test]
fn namespaces_are_independent() {
    // Endpoints and limits are per namespace: a change in one is not seen in the
    // other, and the path-manager mode is the namespace's.
    let a = NetNs::new("bmi").unwrap();
    let b = NetNs::new("bmi").unwrap();
    userspace_pm(&b);
    let rt = runtime();
    let mut pa = in_ns(&a, &rt, || async { PmClient::connect().await.unwrap() });
    let mut pb = in_ns(&b, &rt, || async { PmClient::connect().await.unwrap() });
    assert_eq!(a.run(braid_mptcp::path_manager_mode).unwrap(), "kernel");
    assert_eq!(b.run(braid_mptcp::path_manager_mode).unwrap(), "userspace");
    rt.block_on(async {
        let before = pb.get_limits().await.unwrap();
        pa.set_limits(1, 1).await.unwrap();
        pa.add_addr(Endpoint::new(3, ip("10.0.4.1"))).await.unwrap();
        assert_eq!(pb.get_limits().await.unwrap(), before);
        assert_eq!(pb.dump_addrs().await.unwrap(), vec![]);
        assert_eq!(pa.dump_addrs().await.unwrap().len(), 1);
    });
}
