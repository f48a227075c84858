//! Routes and policy rules over rtnetlink against the kernel: a multipath IPv4 route via IPv6
//! link-local neighbours in a table above 255, replaced by a single next hop, read back,
//! deleted; rules added, listed, refused twice, deleted; a table flushed. The kernel's own view
//! (`ip route get`) confirms that a rule selects the table.

use std::net::IpAddr;

use braid_mptcp::netns::{NetNs, veth};
use braid_mptcp::route::{NextHop, Prefix, Route, RouteClient, Rule};

use crate::util::*;

fn pfx(s: &str) -> Prefix {
    let (a, l) = s.split_once('/').unwrap();
    Prefix::new(a.parse().unwrap(), l.parse().unwrap()).unwrap()
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn tables_routes_and_rules() {
    let a = NetNs::new("bmrt").unwrap();
    let b = NetNs::new("bmrt").unwrap();
    veth(&a, "r0", "10.7.0.1/24", &b, "s0", "10.7.0.2/24").unwrap();
    veth(&a, "r1", "10.7.1.1/24", &b, "s1", "10.7.1.2/24").unwrap();
    for dev in ["r0", "r1"] {
        a.ip(&["-6", "addr", "flush", "dev", dev, "scope", "link"])
            .unwrap();
    }
    a.ip(&["addr", "add", "fe80::a0/64", "dev", "r0", "nodad"])
        .unwrap();
    a.ip(&["addr", "add", "fe80::a1/64", "dev", "r1", "nodad"])
        .unwrap();
    let (r0, r1) = (a.ifindex("r0").unwrap(), a.ifindex("r1").unwrap());
    let rt = runtime();
    let mut c = in_ns(&a, &rt, || async { RouteClient::connect().unwrap() });
    rt.block_on(async {
        let hops = vec![
            NextHop {
                via: ip("fe80::b0"),
                ifindex: r0,
            },
            NextHop {
                via: ip("fe80::b1"),
                ifindex: r1,
            },
        ];
        let mut route = Route {
            table: 1001,
            dest: pfx("10.9.0.8/32"),
            next_hops: hops.clone(),
            prefsrc: Some(ip("10.7.0.1")),
            protocol: 199,
        };
        c.replace(&route).await.unwrap();
        let got = c.routes(1001).await.unwrap();
        assert_eq!(got, vec![route.clone()]);
        let shown = a.ip(&["route", "show", "table", "1001"]).unwrap();
        let shown = String::from_utf8_lossy(&shown.stdout);
        assert!(
            shown.contains("nexthop via inet6 fe80::b0 dev r0")
                && shown.contains("nexthop via inet6 fe80::b1 dev r1")
                && shown.contains("proto 199"),
            "{shown}"
        );
        // Replace: one next hop now, same destination.
        route.next_hops = vec![hops[1]];
        c.replace(&route).await.unwrap();
        assert_eq!(c.routes(1001).await.unwrap(), vec![route.clone()]);
        // A second destination, then the table flushed.
        let other = Route {
            dest: pfx("10.9.1.8/32"),
            ..route.clone()
        };
        c.replace(&other).await.unwrap();
        assert_eq!(c.routes(1001).await.unwrap().len(), 2);
        c.delete(1001, route.dest).await.unwrap();
        assert_eq!(c.routes(1001).await.unwrap(), vec![other.clone()]);
        let e = c.delete(1001, route.dest).await.unwrap_err();
        assert_eq!(e.errno(), Some(3), "{e}"); // ESRCH
        assert_eq!(c.flush(1001).await.unwrap(), 1);
        assert!(c.routes(1001).await.unwrap().is_empty());
        // A route without next hop is refused before it reaches the kernel.
        let empty = Route {
            next_hops: vec![],
            ..route.clone()
        };
        assert!(c.replace(&empty).await.is_err());

        // Rules: from one address and to one subnet, both to table 1001.
        let from = Rule {
            priority: 1000,
            table: 1001,
            from: Some(pfx("10.7.1.1/32")),
            to: None,
            protocol: 199,
            ipv6: false,
        };
        let to = Rule {
            priority: 1100,
            table: 1001,
            from: None,
            to: Some(pfx("10.9.0.0/24")),
            ..from.clone()
        };
        c.add_rule(&from).await.unwrap();
        c.add_rule(&to).await.unwrap();
        let e = c.add_rule(&to).await.unwrap_err();
        assert_eq!(e.errno(), Some(17), "{e}"); // EEXIST
        let mine: Vec<Rule> = c
            .rules()
            .await
            .unwrap()
            .into_iter()
            .filter(|r| r.protocol == 199)
            .collect();
        assert_eq!(mine, vec![from.clone(), to.clone()]);
        // The kernel now looks 10.9.0.8 up in table 1001.
        c.replace(&route).await.unwrap();
        let got = a.ip(&["route", "get", "10.9.0.8"]).unwrap();
        let got = String::from_utf8_lossy(&got.stdout);
        assert!(
            got.contains("via inet6 fe80::b1 dev r1 table 1001"),
            "{got}"
        );
        c.delete_rule(&from).await.unwrap();
        c.delete_rule(&to).await.unwrap();
        assert!(c.rules().await.unwrap().iter().all(|r| r.protocol != 199));
        let got = a.ip(&["route", "get", "10.9.0.8"]);
        assert!(got.is_err(), "no rule, no route: {got:?}");
    });
    drop(b);
}
