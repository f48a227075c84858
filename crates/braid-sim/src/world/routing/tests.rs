use std::path::Path;

use super::*;
use crate::scenario;

/// A diamond of two planes: A → {B, C} → D, every node with interfaces x (10.0.0.n/24) and y
/// (10.0.1.n/24); the links of plane y skip C.
fn diamond(routing: &str) -> Topology {
    let mut text = String::from("name = \"t\"\nduration = \"10s\"\n");
    for (n, name) in ["A", "B", "C", "D"].iter().enumerate() {
        text += &format!(
            "[[node]]\nname = \"{name}\"\niface = [{{ name = \"x\", addr = \"10.0.0.{h}/24\" }}, {{ name = \"y\", addr = \"10.0.1.{h}/24\" }}]\n",
            h = n + 1
        );
    }
    let mut links = vec![
        ("A.x", "B.x"),
        ("A.x", "C.x"),
        ("B.x", "D.x"),
        ("C.x", "D.x"),
    ];
    links.extend([("A.y", "B.y"), ("B.y", "D.y")]);
    for (i, (a, b)) in links.iter().enumerate() {
        text += &format!(
            "[[link]]\nname = \"l{i}\"\na = \"{a}\"\nb = \"{b}\"\nrate = \"10Mbit\"\ndelay = \"1ms\"\n"
        );
    }
    text += "[app]\nkind = \"bulk\"\nclient = \"D\"\nserver = \"A\"\n";
    text += &format!("[routing]\n{routing}\n");
    let plan = scenario::load_str(&text, "t.toml", Path::new("."), &[]).unwrap();
    plan.variants[0].topology.clone()
}

fn tables(p: &mut dyn RoutingPolicy) -> Vec<Vec<Route>> {
    let mut t = vec![Vec::new(); 4];
    while let Some((n, r)) = p.poll_table() {
        t[n] = r;
    }
    t
}

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

/// The route a node's table gives a packet from `src` to `dst` (most specific source first).
fn via(table: &[Route], src: &str, dst: &str) -> Option<(usize, Ipv4Addr)> {
    let (s, d) = (ip(src), ip(dst));
    let mut m: Vec<&Route> = table
        .iter()
        .filter(|r| r.dst.contains(d) && r.src.is_none_or(|p| p.contains(s)))
        .collect();
    m.sort_by_key(|r| std::cmp::Reverse(r.src.map_or(0, |p| p.len)));
    m.first().map(|r| (r.out, r.via))
}

#[test]
fn part_path_keeps_each_subnet_on_its_own_links() {
    let t = diamond("policy = \"static\"\nconnectivity = \"part\"");
    let mut p = Shortest::new(&t, t.routing.as_ref().unwrap());
    assert_eq!(p.hello_interval(), None);
    assert_eq!(p.poll_timeout(), None);
    let tb = tables(&mut p);
    // From A's y address to D's y address: y links only, through B.
    assert_eq!(
        via(&tb[0], "10.0.1.1", "10.0.1.4"),
        Some((1, ip("10.0.1.2")))
    );
    // From A's x address: x links (B first of the two equal ones).
    assert_eq!(
        via(&tb[0], "10.0.0.1", "10.0.1.4"),
        Some((0, ip("10.0.0.2")))
    );
    // Relay B forwards y traffic on y, x traffic on x.
    assert_eq!(
        via(&tb[1], "10.0.1.1", "10.0.1.4"),
        Some((1, ip("10.0.1.4")))
    );
    assert_eq!(
        via(&tb[1], "10.0.0.1", "10.0.1.4"),
        Some((0, ip("10.0.0.4")))
    );
    // C has no y links: y traffic from A has no route through it, x traffic does.
    assert_eq!(
        via(&tb[2], "10.0.1.1", "10.0.1.4"),
        Some((0, ip("10.0.0.4")))
    );
}

#[test]
fn full_path_changes_interface_only_to_save_hops() {
    let t = diamond("policy = \"static\"\nconnectivity = \"full\"\ninterfaces = [\"x\"]");
    let mut p = Shortest::new(&t, t.routing.as_ref().unwrap());
    let tb = tables(&mut p);
    // Only x links are routed: y traffic leaves by x (routes generated for one interface).
    assert_eq!(
        via(&tb[0], "10.0.1.1", "10.0.1.4"),
        Some((0, ip("10.0.0.2")))
    );
    assert_eq!(
        via(&tb[3], "10.0.1.4", "10.0.1.1"),
        Some((0, ip("10.0.0.2")))
    );
}

/// Hellos of one link direction stop: after `dead` intervals and the next recomputation the
/// route avoids the link.
#[test]
fn a_silent_neighbour_is_routed_around_within_one_period() {
    let t = diamond("policy = \"shortest\"\nconnectivity = \"part\"\ndead = 3");
    let r = t.routing.clone().unwrap();
    let mut p = Shortest::new(&t, &r);
    assert_eq!(p.hello_interval(), Some(Duration::from_secs(1)));
    let tb = tables(&mut p);
    assert_eq!(
        via(&tb[0], "10.0.0.1", "10.0.0.4"),
        Some((0, ip("10.0.0.2")))
    );
    let hello = |p: &mut Shortest, s: u64, dead_link: Option<usize>| {
        for (l, link) in t.links.iter().enumerate() {
            for d in 0..2 {
                let o = Observation {
                    link: l,
                    from: link.ends[d],
                    to: link.ends[1 - d],
                    heard: Some(l) != dead_link,
                    rss_dbm: None,
                };
                p.observe(Instant::from_millis(s * 1000), &o);
            }
        }
    };
    // The x link B–D goes silent from t = 1 s.
    let mut changed = None;
    for s in 1..=12 {
        hello(&mut p, s, Some(2));
        let now = Instant::from_millis(s * 1000);
        if p.poll_timeout().is_some_and(|t| t <= now) {
            p.handle_timeout(now);
        }
        let tb = tables(&mut p);
        if !tb[0].is_empty() && via(&tb[0], "10.0.0.1", "10.0.0.4") == Some((0, ip("10.0.0.3"))) {
            changed = Some(s);
            break;
        }
    }
    // Its cost rises with every missed hello and it is dead after 3 (t = 3 s): routed around
    // at a 2 s recomputation by then at the latest.
    assert!(changed.is_some_and(|s| s <= 4), "{changed:?}");
}

#[test]
fn costs_follow_the_delivery_ratio_of_both_directions() {
    let t = diamond("policy = \"shortest\"\nwindow = 10");
    let r = t.routing.clone().unwrap();
    let mut p = Shortest::new(&t, &r);
    let _ = tables(&mut p);
    // Link 0 (A.x–B.x) hears 5 of 10 hellos one way: ETX 2, twice the cost of a clean link.
    for k in 0..10 {
        for (l, link) in t.links.iter().enumerate() {
            for d in 0..2 {
                p.observe(
                    Instant::ZERO,
                    &Observation {
                        link: l,
                        from: link.ends[d],
                        to: link.ends[1 - d],
                        heard: !(l == 0 && d == 0 && k % 2 == 0),
                        rss_dbm: None,
                    },
                );
            }
        }
    }
    assert_eq!(p.cost(0, 0), Some(2000));
    assert_eq!(p.cost(0, 1), Some(2000));
    assert_eq!(p.cost(1, 0), Some(1000));
    p.handle_timeout(Instant::from_millis(2000));
    let tb = tables(&mut p);
    // A reaches D's x address through C now.
    assert_eq!(
        via(&tb[0], "10.0.0.1", "10.0.0.4"),
        Some((0, ip("10.0.0.3")))
    );
}
