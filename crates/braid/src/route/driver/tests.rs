use std::time::Duration;

use super::*;
use crate::route::config::{Overrides, load};

/// M1 with lanes e0 and e1; neighbours M2 and M3 on both; M8 two hops away through either.
fn settings(policy: &str) -> RouteSettings {
    let o = Overrides {
        babeld: Some("/tmp/babeld.sock".into()),
        policy: Some(policy.into()),
        ifaces: vec!["e0".into(), "e1".into()],
        ..Overrides::default()
    };
    load(None, &o).unwrap()
}

fn rid(n: u32) -> String {
    format!("02:00:00:00:00:00:00:{n:02x}")
}

fn header(n: u32) -> Header {
    Header {
        protocol: "1.0".into(),
        version: Some("babeld-1.12.1".into()),
        host: Some(format!("m{n}")),
        my_id: Some(rid(n).parse().unwrap()),
    }
}

/// The link-local address of node `n`'s interface `x`.
fn ll(n: u32, x: u32) -> String {
    let a: IpAddr = format!("fe80::{x}:{n}").parse().unwrap();
    a.to_string()
}

fn neighbour(n: u32, x: u32, reach: u16, cost: u32) -> String {
    format!(
        "add neighbour n{n}x{x} address {} if e{x} reach {reach:04x} ureach 0000 rxcost 256 txcost 256 cost {cost}",
        ll(n, x)
    )
}

/// Node `origin`'s prefix on subnet `x`, heard from neighbour `via` on interface `on`.
fn route(origin: u32, x: u32, via: u32, on: u32, refmetric: u32) -> String {
    format!(
        "add route r{origin}.{x}.{via}.{on} prefix 10.{x}.0.{origin}/32 from 0.0.0.0/0 installed no id {} metric {} refmetric {refmetric} via {} if e{on}",
        rid(origin),
        refmetric + 256,
        ll(via, on)
    )
}

fn dump(reach3: u16) -> Vec<String> {
    let mut l = vec![
        "add interface e0 up true ipv6 fe80::0:1 ipv4 10.0.0.1".to_string(),
        "add interface e1 up true ipv6 fe80::1:1 ipv4 10.1.0.1".to_string(),
    ];
    for x in 0..2 {
        l.push(neighbour(2, x, 0xffff, 256));
        l.push(neighbour(3, x, reach3, 256));
    }
    for via in [2, 3] {
        for on in 0..2 {
            for x in 0..2 {
                l.push(route(via, x, via, on, 0));
                l.push(route(8, x, via, on, 256));
            }
        }
    }
    l.push("ok".into());
    l
}

fn lanes(d: &mut Driver) {
    for (index, name, addr) in [(4, "e0", "10.0.0.1"), (5, "e1", "10.1.0.1")] {
        d.on_net(&NetEvent::Link {
            index,
            name: name.into(),
            up: true,
        });
        d.on_net(&NetEvent::AddrNew {
            index,
            addr: addr.parse().unwrap(),
            prefix_len: 24,
        });
        // Link-local addresses are not the lane's.
        d.on_net(&NetEvent::AddrNew {
            index,
            addr: "fe80::1".parse().unwrap(),
            prefix_len: 64,
        });
    }
}

fn connected(policy: &str, reach3: u16) -> Driver {
    let mut d = Driver::new(settings(policy));
    lanes(&mut d);
    d.babeld_connected(&header(1)).unwrap();
    for l in dump(reach3) {
        d.on_line(&l).unwrap();
    }
    assert!(d.synced());
    d
}

fn t(s: f64) -> Instant {
    Instant::from_secs_f64(s)
}

/// Applies the whole plan as if the kernel accepted it.
fn install(d: &mut Driver) -> Vec<Op> {
    let ops = d.plan();
    for op in &ops {
        d.applied(op, true, false);
    }
    assert!(d.plan().is_empty(), "the plan converges");
    ops
}

fn via(d: &Driver, table: u32, dest: &str) -> Vec<(String, u32)> {
    let p = Prefix::host(dest.parse().unwrap());
    d.installed
        .get(&(table, p))
        .map(|r| {
            r.next_hops
                .iter()
                .map(|h| (h.via.to_string(), h.ifindex))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn app_c_lanes_become_tables_and_rules() {
    let mut d = connected("hmm-part", 0xffff);
    d.tick(t(0.0));
    let ops = install(&mut d);
    // Rules: from each lane address, to each lane subnet.
    let rules: Vec<&Rule> = ops
        .iter()
        .filter_map(|o| match o {
            Op::AddRule(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(rules.len(), 4, "{rules:?}");
    assert!(rules.iter().any(|r| r.priority == 1001
        && r.table == 1001
        && r.from == Some(Prefix::host("10.1.0.1".parse().unwrap()))));
    assert!(rules.iter().any(|r| r.priority == 1100
        && r.table == 1000
        && r.to.map(|p| p.to_string()).as_deref() == Some("10.0.0.0/24")));
    // Towards M8: e0 keeps both next hops over e0; e1 (App. C, two hops) the first, over e1.
    let e0 = via(&d, 1000, "10.1.0.8");
    assert_eq!(
        e0,
        vec![(ll(2, 0), 4), (ll(3, 0), 4)],
        "lane e0 to M8's e1 address"
    );
    assert_eq!(via(&d, 1001, "10.1.0.8"), vec![(ll(2, 1), 5)]);
    assert_eq!(via(&d, 1001, "10.0.0.8"), vec![(ll(2, 1), 5)]);
    // Direct neighbours are their own next hop.
    assert_eq!(via(&d, 1001, "10.1.0.3"), vec![(ll(3, 1), 5)]);
    let r = &d.installed[&(1000, Prefix::host("10.0.0.8".parse().unwrap()))];
    assert_eq!(r.prefsrc, Some("10.0.0.1".parse().unwrap()));
    assert_eq!(r.protocol, PROTOCOL);
    assert_eq!(d.node_name(NodeId(8)), rid(8));
}

/// A neighbour whose hellos thin out is predicted *disconnect* and withdrawn while babeld
/// still lists it; without the HMM it stays until babeld gives it up.
#[test]
fn a_fading_neighbour_is_withdrawn_by_the_hmm_only() {
    for (policy, withdrawn) in [("hmm-part", true), ("part", false)] {
        let mut d = connected(policy, 0xffff);
        d.tick(t(0.0));
        install(&mut d);
        assert_eq!(via(&d, 1000, "10.0.0.8").len(), 2);
        // M3's hellos: 4 of the newest 16 received; babeld still has it, at the same cost
        // (so the graph alone would keep it).
        for x in 0..2 {
            d.on_line(&neighbour(3, x, 0x8421, 256).replacen("add", "change", 1))
                .unwrap();
        }
        for k in 1..=8 {
            d.tick(t(0.5 * f64::from(k)));
        }
        install(&mut d);
        let hops = via(&d, 1000, "10.0.0.8");
        if withdrawn {
            assert_eq!(hops, vec![(ll(2, 0), 4)], "{policy}");
            let v = d
                .verdicts
                .iter()
                .find(|v| v.neighbour == NodeId(3) && !v.kept)
                .unwrap();
            assert!(v.predicted, "{v:?}");
            assert!(d.changes.iter().any(|c| c.dest == NodeId(8)));
        } else {
            assert_eq!(hops.len(), 2, "{policy}: {hops:?}");
        }
        // Direct routes to M3 itself go too under the HMM (its link is not trusted).
        assert_eq!(via(&d, 1001, "10.1.0.3").is_empty(), withdrawn, "{policy}");
    }
}

#[test]
fn babeld_away_keeps_routes_then_resynchronises() {
    let mut d = connected("hmm-part", 0xffff);
    d.tick(t(0.0));
    install(&mut d);
    let before = d.installed.clone();
    d.babeld_lost();
    assert!(!d.connected());
    // Minutes without babeld: nothing moves, no link is declared dead.
    for k in 1..100 {
        d.tick(t(f64::from(k)));
    }
    assert!(d.plan().is_empty());
    assert_eq!(d.installed, before);
    // babeld is back: until the dump's `ok`, routes stay.
    d.babeld_connected(&header(1)).unwrap();
    d.on_line("add interface e0 up true ipv6 fe80::0:1 ipv4 10.0.0.1")
        .unwrap();
    d.tick(t(100.0));
    assert!(d.plan().is_empty());
    // The dump: M3 is gone from babeld while it was away.
    for l in dump(0xffff)
        .iter()
        .filter(|l| !l.contains(&ll(3, 0)) && !l.contains(&ll(3, 1)) && !l.contains(&rid(3)))
    {
        d.on_line(l).unwrap();
    }
    assert!(d.synced());
    d.tick(t(100.5));
    install(&mut d);
    assert_eq!(via(&d, 1000, "10.0.0.8"), vec![(ll(2, 0), 4)]);
    assert!(via(&d, 1000, "10.0.0.3").is_empty());
    assert_eq!(d.stats.connects, 2);
    assert_eq!(d.stats.disconnects, 1);
}

#[test]
fn babeld_exiting_flushes_everything_and_the_routes_stay() {
    let mut d = connected("hmm-part", 0xffff);
    d.tick(t(0.0));
    install(&mut d);
    let before = d.installed.clone();
    assert!(!before.is_empty());
    // babeld exits: it flushes every neighbour and route, then closes its local interface;
    // a tick falls in between.
    for l in dump(0xffff)
        .iter()
        .filter(|l| l.starts_with("add neighbour") || l.starts_with("add route"))
    {
        d.on_line(&l.replacen("add", "flush", 1)).unwrap();
    }
    d.tick(t(0.5));
    assert!(
        d.plan().is_empty(),
        "nothing withdrawn at the tick after the flushes"
    );
    d.babeld_lost();
    for k in 2..20 {
        d.tick(t(0.5 * f64::from(k)));
    }
    assert!(d.plan().is_empty());
    assert_eq!(d.installed, before, "routes kept while babeld is away");
    // babeld is back with the same network: the routes are what they were.
    d.babeld_connected(&header(1)).unwrap();
    for l in dump(0xffff) {
        d.on_line(&l).unwrap();
    }
    for k in 0..4 {
        d.tick(t(10.0 + 0.5 * f64::from(k)));
    }
    install(&mut d);
    assert_eq!(d.installed, before, "resynchronised");
    assert_eq!(d.stats.held_ticks, 1);
}

#[test]
fn malformed_lines_are_counted_and_skipped() {
    let mut d = connected("hmm-full", 0xffff);
    let n = d.stats.malformed;
    for bad in [
        "",
        "add neighbour x",
        "change route 1 prefix nope",
        "\u{0}\u{1}binary",
        "flush neighbour n2x0 address fe80::0:2 if e0 reach zz ureach 0 rxcost 1 txcost 1 cost 1",
    ] {
        assert!(d.on_line(bad).is_err(), "{bad:?}");
    }
    assert_eq!(d.stats.malformed, n + 5);
    // babeld flushing a neighbour takes its link down at the router's next period (the first
    // tick after a flush is held: babeld may be exiting).
    d.tick(t(0.0));
    assert_eq!(d.router().unwrap().links().count(), 4);
    d.on_line("flush neighbour n3x1 address fe80::1:3 if e1 reach 0000 ureach 0000 rxcost 65535 txcost 65535 cost 65535")
        .unwrap();
    d.tick(t(0.5));
    assert_eq!(d.stats.held_ticks, 1);
    d.tick(t(2.0));
    assert_eq!(d.router().unwrap().links().count(), 3);
    assert!(d.last_malformed.is_some());
    install(&mut d);
    assert_eq!(
        via(&d, 1000, "10.0.0.8").len(),
        3,
        "full path: every usable link"
    );
}

#[test]
fn failed_requests_are_planned_again() {
    let mut d = connected("hmm-part", 0xffff);
    d.tick(t(0.0));
    let ops = d.plan();
    for op in &ops {
        d.applied(op, false, false);
    }
    assert_eq!(d.plan(), ops);
    assert_eq!(d.stats.kernel_errors, ops.len() as u64);
    // A lane that disappears takes its rules and routes with it.
    install(&mut d);
    d.on_net(&NetEvent::LinkGone { index: 5 });
    let ops = d.plan();
    assert!(
        ops.iter()
            .any(|o| matches!(o, Op::DeleteRule(r) if r.table == 1001))
    );
    assert!(
        ops.iter()
            .any(|o| matches!(o, Op::Delete { table: 1001, .. })),
        "{ops:?}"
    );
}

#[test]
fn unidentified_neighbours_are_skipped_and_ids_do_not_collide() {
    let mut d = Driver::new(settings("hmm-part"));
    lanes(&mut d);
    d.babeld_connected(&header(1)).unwrap();
    // A neighbour that announces nothing of its own: babeld knows it, the router cannot.
    d.on_line(&neighbour(9, 0, 0xffff, 256)).unwrap();
    d.on_line("ok").unwrap();
    d.tick(t(0.0));
    assert!(d.stats.unidentified > 0);
    assert_eq!(d.router().unwrap().links().count(), 0);
    let mut ids = NodeIds::default();
    let a = ids.node(RouterId(0x0100_0000_0000_0007));
    let b = ids.node(RouterId(0x0200_0000_0000_0007));
    assert_eq!(a, NodeId(7));
    assert_ne!(a, b);
    assert_eq!(ids.node(RouterId(0x0200_0000_0000_0007)), b);
    assert_eq!(delivered(0xffff, 16), 16);
    assert_eq!(delivered(0xf000, 8), 4);
    assert_eq!(delivered(0x00ff, 8), 0);
    let _ = Duration::ZERO;
}
