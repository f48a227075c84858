use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use proptest::prelude::*;

use super::assign::choose_nexthop;
use super::*;

fn at(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

fn ifaces(n: u32) -> Vec<IfaceId> {
    (0..n).map(IfaceId).collect()
}

fn router(me: u32, n_ifaces: u32, policy: &str) -> Router {
    let cfg = RouteConfig::new(&ifaces(n_ifaces), Policy::from_name(policy).unwrap());
    Router::new(NodeId(me), cfg).unwrap()
}

/// `r` hears `nbr` on every interface with quality `q`.
fn hear(r: &mut Router, now: Instant, nbr: u32, q: Quality) {
    for iface in r.config().ifaces.clone() {
        r.observe(now, &Observation::new(NodeId(nbr), iface, q))
            .unwrap();
    }
}

fn via(r: &Router, dest: u32, lane: u32) -> Vec<u32> {
    r.next_hops(NodeId(dest), IfaceId(lane))
        .iter()
        .map(|h| h.neighbour.0)
        .collect()
}

/// M1 with `k` neighbours M2.. that each reach M8 at cost 1 (seed 004 Fig. 4).
fn fan(k: u32, policy: &str) -> Router {
    let mut r = router(1, 4, policy);
    for n in 2..2 + k {
        hear(&mut r, at(0), n, Quality::Delivery(1.0));
        r.advertise(at(0), NodeId(n), &[(NodeId(8), 1)]).unwrap();
    }
    r.recompute(at(0));
    r
}

#[test]
fn app_c_rule_for_one_two_three_next_hops() {
    // seed 004 App. C choose_nexthop, interfaces e1..e3 (index of "first/second/third hop").
    let table = [(1, [0, 0, 0]), (2, [0, 1, 0]), (3, [0, 1, 2])];
    for (num, hops) in table {
        for (no_if, want) in (1..=3).zip(hops) {
            assert_eq!(
                choose_nexthop(num, no_if),
                Some(want),
                "{num} hops, e{no_if}"
            );
        }
        assert_eq!(choose_nexthop(num, 0), None, "the primary keeps them all");
    }
    assert_eq!(choose_nexthop(0, 1), None);
}

#[test]
fn app_c_routes_for_one_two_three_next_hops() {
    // e0 keeps every hop (Table 3, master subpath NoNH ≤ 3); e1..e3 as App. C; each lane
    // leaves on its own interface (eX to the neighbour's eX).
    let want: [(u32, [&[u32]; 4]); 3] = [
        (1, [&[2], &[2], &[2], &[2]]),
        (2, [&[2, 3], &[2], &[3], &[2]]),
        (3, [&[2, 3, 4], &[2], &[3], &[4]]),
    ];
    for (k, lanes) in want {
        let r = fan(k, "mpxm");
        for (lane, hops) in lanes.iter().enumerate() {
            let lane = lane as u32;
            assert_eq!(via(&r, 8, lane), hops.to_vec(), "{k} next hops, e{lane}");
            for h in r.next_hops(NodeId(8), IfaceId(lane)) {
                assert_eq!(h.iface, IfaceId(lane));
            }
        }
    }
}

#[test]
fn without_a_primary_every_lane_follows_app_c() {
    let mut cfg = RouteConfig::new(&ifaces(3), Policy::from_name("part").unwrap());
    cfg.primary_keeps_all = false;
    let mut r = Router::new(NodeId(1), cfg).unwrap();
    for n in [2, 3] {
        hear(&mut r, at(0), n, Quality::Delivery(1.0));
        r.advertise(at(0), NodeId(n), &[(NodeId(8), 1)]).unwrap();
    }
    r.recompute(at(0));
    assert_eq!(
        (via(&r, 8, 0), via(&r, 8, 1), via(&r, 8, 2)),
        (vec![2], vec![3], vec![2])
    );
}

#[test]
fn full_path_puts_every_link_on_every_lane() {
    let r = fan(2, "mfxm");
    for lane in 0..4 {
        let hops = r.next_hops(NodeId(8), IfaceId(lane));
        // Two neighbours × four interfaces, the lane's own interface first for each.
        assert_eq!(hops.len(), 8, "e{lane}");
        assert_eq!(
            hops[0],
            NextHop {
                neighbour: NodeId(2),
                iface: IfaceId(lane)
            }
        );
        assert_eq!(
            hops[4],
            NextHop {
                neighbour: NodeId(3),
                iface: IfaceId(lane)
            }
        );
    }
}

#[test]
fn part_path_falls_back_to_another_interface_to_the_chosen_neighbour() {
    let mut r = router(1, 3, "mpxm");
    // M2 is heard on e0 and e2 only; M3 on every interface, at a higher cost on e0.
    for i in [0, 2] {
        r.observe(
            at(0),
            &Observation::new(NodeId(2), IfaceId(i), Quality::Delivery(1.0)),
        )
        .unwrap();
    }
    hear(&mut r, at(0), 3, Quality::Delivery(1.0));
    r.advertise(at(0), NodeId(2), &[(NodeId(8), 1)]).unwrap();
    r.advertise(at(0), NodeId(3), &[(NodeId(8), 1)]).unwrap();
    r.recompute(at(0));
    // e1 gets the first hop, M2, which has no link on e1: sent on e0, M2's cheapest.
    assert_eq!(
        r.next_hops(NodeId(8), IfaceId(1)),
        &[NextHop {
            neighbour: NodeId(2),
            iface: IfaceId(0)
        }]
    );
    assert_eq!(
        r.next_hops(NodeId(8), IfaceId(2)),
        &[NextHop {
            neighbour: NodeId(3),
            iface: IfaceId(2)
        }]
    );
}

/// A driver like a simulator's: every 100 ms, the observations due (one per second per
/// link, from `quality(neighbour, t_ms)`), then the timer. Returns, per recomputation, the
/// time and the neighbours used on any lane towards M8.
fn drive(
    r: &mut Router,
    until_ms: u64,
    mut quality: impl FnMut(u32, u64) -> Option<Quality>,
) -> Vec<(u64, BTreeSet<u32>)> {
    let mut out = Vec::new();
    for t in (0..=until_ms).step_by(100) {
        if t % 1000 == 0 {
            for n in [2, 3] {
                if let Some(q) = quality(n, t) {
                    hear(r, at(t), n, q);
                }
                r.advertise(at(t), NodeId(n), &[(NodeId(8), 1)]).unwrap();
            }
        }
        if r.poll_timeout().is_some_and(|d| d <= at(t)) {
            r.handle_timeout(at(t));
            let used = (0..4)
                .flat_map(|lane| via(r, 8, lane))
                .collect::<BTreeSet<u32>>();
            out.push((t, used));
        }
    }
    out
}

/// The first recomputation at or after `from_ms` whose routes to M8 avoid M2.
fn gone_at(log: &[(u64, BTreeSet<u32>)], from_ms: u64) -> Option<u64> {
    log.iter()
        .find(|(t, used)| *t >= from_ms && !used.contains(&2))
        .map(|(t, _)| *t)
}

#[test]
fn a_route_through_a_node_that_moved_away_is_gone_within_one_period() {
    // M2 moves out of range at 5.3 s: its links are reported down.
    for policy in ["mpxm", "mfxm", "mmpxm", "mmfxfm"] {
        let mut r = router(1, 4, policy);
        let log = drive(&mut r, 12_000, |n, t| match (n, t) {
            (2, t) if t >= 5_300 => (t < 6_300).then_some(Quality::Down),
            _ => Some(Quality::Delivery(1.0)),
        });
        // The moved node is on a route until then.
        assert!(
            log.iter()
                .filter(|(t, _)| *t < 5_300)
                .all(|(_, u)| u.contains(&2))
        );
        let gone = gone_at(&log, 5_300).expect("withdrawn");
        assert!(gone - 5_300 <= 2_000, "{policy}: gone at {gone} ms");
        // M3 keeps carrying every lane.
        for lane in 0..4 {
            let used: BTreeSet<u32> = via(&r, 8, lane).into_iter().collect();
            assert_eq!(used, BTreeSet::from([3]), "{policy} e{lane}");
        }
    }
}

#[test]
fn a_silent_neighbour_ages_out_and_the_hmm_withdraws_it_within_one_period() {
    // M2 moves away at 5.3 s with nothing reporting it: its hellos are just lost.
    let lost = |n, t| match (n, t) {
        (2, t) if t >= 5_300 => Some(Quality::Delivery(0.0)),
        _ => Some(Quality::Delivery(1.0)),
    };
    let mut plain = router(1, 4, "mpxm");
    let gone = gone_at(&drive(&mut plain, 12_000, lost), 5_300).unwrap();
    // Without prediction: dead_after (2 s) after the last hello heard (5 s), at the next period.
    assert_eq!(gone, 8_000);
    let mut hmm = router(1, 4, "mmpxm");
    let gone = gone_at(&drive(&mut hmm, 12_000, lost), 5_300).unwrap();
    assert!(gone - 5_300 <= 2_000, "gone at {gone} ms");
}

#[test]
fn the_hmm_withdraws_a_fading_link_before_it_breaks() {
    // M2's links fade from 10 s (if_quality −1000 per second) and break at 20 s.
    let fading = |n, t: u64| match n {
        2 if t >= 20_000 => Some(Quality::Down),
        2 if t > 10_000 => Some(Quality::IfQuality(10_000 - (t as u32 - 10_000))),
        _ => Some(Quality::IfQuality(10_000)),
    };
    let mut hmm = router(1, 4, "mmpxm");
    let log = drive(&mut hmm, 24_000, fading);
    let early = gone_at(&log, 0).unwrap();
    eprintln!("fading link: withdrawn at {early} ms, breaks at 20000 ms");
    assert!(
        early < 20_000,
        "withdrawn at {early} ms, the link breaks at 20 000 ms"
    );
    assert!(
        early > 10_000,
        "withdrawn at {early} ms, before the link even fades"
    );
    assert!(hmm.stats().predicted_withdrawals >= 4, "{:?}", hmm.stats());
    // Without prediction the route stays until the break.
    let mut plain = router(1, 4, "mpxm");
    let log = drive(&mut plain, 24_000, fading);
    assert_eq!(gone_at(&log, 0), Some(20_000));
}

#[test]
fn a_withdrawn_link_returns_when_it_recovers() {
    let dip = |n, t: u64| match n {
        2 if (6_000..10_000).contains(&t) => Some(Quality::IfQuality(1_000)),
        _ => Some(Quality::IfQuality(10_000)),
    };
    let mut r = router(1, 4, "mmpxm");
    let log = drive(&mut r, 20_000, dip);
    let out = gone_at(&log, 6_000).unwrap();
    assert!(out <= 8_000, "{out}");
    let back = log
        .iter()
        .find(|(t, u)| *t > out && u.contains(&2))
        .unwrap()
        .0;
    assert!(back <= 14_000, "back at {back}");
    assert_eq!(via(&r, 8, 1), vec![2]);
}

#[test]
fn advertisements_expire() {
    let mut r = fan(1, "mpxm");
    assert_eq!(via(&r, 8, 0), vec![2]);
    // M2 keeps being heard but stops advertising M8.
    hear(&mut r, at(5_000), 2, Quality::Delivery(1.0));
    r.recompute(at(5_000));
    assert_eq!(via(&r, 8, 0), vec![2], "advert 5 s old, max_age 6 s");
    hear(&mut r, at(6_500), 2, Quality::Delivery(1.0));
    r.recompute(at(6_500));
    assert!(via(&r, 8, 0).is_empty());
    assert_eq!(
        via(&r, 2, 0),
        vec![2],
        "the neighbour itself stays reachable"
    );
}

#[test]
fn updates_report_changes_only() {
    let mut r = fan(2, "mpxm");
    let first: Vec<Update> = std::iter::from_fn(|| r.poll_update()).collect();
    // Destinations M2, M3, M8 on four lanes.
    assert_eq!(first.len(), 12);
    assert!(first.iter().all(|u| matches!(u, Update::Set { .. })));
    for n in [2, 3] {
        hear(&mut r, at(1_000), n, Quality::Delivery(1.0));
        r.advertise(at(1_000), NodeId(n), &[(NodeId(8), 1)])
            .unwrap();
    }
    r.recompute(at(2_000));
    assert_eq!(r.poll_update(), None);
    // M3 goes down: M3 is unreachable, M8's lanes e0 and e2 change, e1 and e3 already use M2.
    hear(&mut r, at(3_000), 3, Quality::Down);
    hear(&mut r, at(3_000), 2, Quality::Delivery(1.0));
    r.advertise(at(3_000), NodeId(2), &[(NodeId(8), 1)])
        .unwrap();
    r.recompute(at(4_000));
    let next: Vec<Update> = std::iter::from_fn(|| r.poll_update()).collect();
    let removed = next
        .iter()
        .filter(|u| matches!(u, Update::Remove { .. }))
        .count();
    assert_eq!(removed, 4, "{next:?}");
    let set: Vec<_> = next
        .iter()
        .filter_map(|u| match u {
            Update::Set {
                dest,
                iface,
                next_hops,
            } => Some((dest.0, iface.0, next_hops.len())),
            _ => None,
        })
        .collect();
    assert_eq!(set, vec![(8, 0, 1), (8, 2, 1)]);
    assert_eq!(r.stats().updates, 18);
}

#[test]
fn bad_input_is_refused_with_a_one_line_error() {
    let mut r = router(1, 2, "mmpxm");
    let cases: [(Observation, &str); 5] = [
        (
            Observation::new(NodeId(2), IfaceId(7), Quality::Delivery(1.0)),
            "if7",
        ),
        (
            Observation::new(NodeId(2), IfaceId(0), Quality::IfQuality(10_001)),
            "10001",
        ),
        (
            Observation::new(NodeId(2), IfaceId(0), Quality::Delivery(f64::NAN)),
            "NaN",
        ),
        (
            Observation::new(NodeId(2), IfaceId(0), Quality::Delivery(1.5)),
            "1.5",
        ),
        (
            Observation::new(NodeId(1), IfaceId(0), Quality::Delivery(1.0)),
            "n1",
        ),
    ];
    for (obs, needle) in cases {
        let e = r.observe(at(0), &obs).unwrap_err().to_string();
        assert!(e.contains(needle) && !e.contains('\n'), "{e}");
    }
    let zero = Observation::new(NodeId(2), IfaceId(0), Quality::Delivery(1.0)).with_cost(0);
    assert!(
        r.observe(at(0), &zero)
            .unwrap_err()
            .to_string()
            .contains("cost 0")
    );
    assert!(r.advertise(at(0), NodeId(1), &[]).is_err());
    assert!(r.advertise(at(0), NodeId(3), &[(NodeId(4), 0)]).is_err());
    assert_eq!(r.stats().rejected, 8);
    assert_eq!(r.stats().observations, 0);
    assert_eq!(r.poll_timeout(), None, "refused input starts nothing");
    let mut cfg = RouteConfig::new(
        &[IfaceId(0), IfaceId(0)],
        Policy::from_name("part").unwrap(),
    );
    assert!(Router::new(NodeId(1), cfg.clone()).is_err());
    cfg.ifaces = vec![];
    assert!(
        Router::new(NodeId(1), cfg)
            .unwrap_err()
            .to_string()
            .contains("ifaces")
    );
}

#[test]
fn policy_names_round_trip() {
    for n in Policy::NAMES {
        assert_eq!(Policy::from_name(n).unwrap().name(), *n);
    }
    let seed = [
        ("mfxm", "full"),
        ("mpxm", "part"),
        ("mmfxfm", "hmm-full"),
        ("mmpxm", "hmm-part"),
    ];
    for (variant, name) in seed {
        assert_eq!(Policy::from_name(variant).unwrap().name(), name);
    }
    assert_eq!(Policy::from_name("ospf"), None);
}

#[test]
fn timer_runs_every_period_from_the_first_input() {
    let mut r = router(1, 1, "part");
    assert_eq!(r.poll_timeout(), None);
    hear(&mut r, at(300), 2, Quality::Delivery(1.0));
    assert_eq!(r.poll_timeout(), Some(at(300)));
    r.handle_timeout(at(300));
    assert_eq!(r.poll_timeout(), Some(at(2_300)));
    r.handle_timeout(at(2_000));
    assert_eq!(r.stats().recomputations, 1, "not due yet");
    r.handle_timeout(at(2_300));
    assert_eq!(r.poll_timeout(), Some(at(4_300)));
    assert_eq!(r.config().period, Duration::from_secs(2));
}

// ---------------------------------------------------------------------------------------
// Properties on random topologies.

/// A random topology: `n` nodes, links (a, b, cost, interfaces) both ways with the same cost.
#[derive(Debug, Clone)]
struct Topo {
    n: u32,
    links: Vec<(u32, u32, u32, Vec<u32>)>,
}

fn topo() -> impl Strategy<Value = Topo> {
    (2u32..=10).prop_flat_map(|n| {
        let link = (
            0..n,
            0..n,
            1u32..=4,
            proptest::collection::btree_set(0u32..3, 1..=3),
        );
        proptest::collection::vec(link, 0..(3 * n as usize)).prop_map(move |ls| Topo {
            n,
            links: ls
                .into_iter()
                .filter(|(a, b, _, _)| a != b)
                .map(|(a, b, c, i)| (a, b, c, i.into_iter().collect()))
                .collect(),
        })
    })
}

impl Topo {
    /// Node `me`'s links: (neighbour, interface) → cost.
    fn local(&self, me: u32) -> BTreeMap<(u32, u32), u32> {
        let mut out = BTreeMap::new();
        for (a, b, c, is) in &self.links {
            let other = match me {
                m if m == *a => *b,
                m if m == *b => *a,
                _ => continue,
            };
            for &i in is {
                let e = out.entry((other, i)).or_insert(*c);
                *e = (*e).min(*c);
            }
        }
        out
    }

    /// All-pairs shortest distances (Floyd–Warshall), the reference.
    fn distances(&self) -> Vec<Vec<Option<u64>>> {
        let n = self.n as usize;
        let mut d = vec![vec![None; n]; n];
        for (i, row) in d.iter_mut().enumerate() {
            row[i] = Some(0);
        }
        for (a, b, c, _) in &self.links {
            for (x, y) in [(*a as usize, *b as usize), (*b as usize, *a as usize)] {
                let c = u64::from(*c);
                d[x][y] = Some(d[x][y].map_or(c, |o: u64| o.min(c)));
            }
        }
        for k in 0..n {
            for i in 0..n {
                for j in 0..n {
                    if let (Some(a), Some(b)) = (d[i][k], d[k][j])
                        && d[i][j].is_none_or(|o| a + b < o)
                    {
                        d[i][j] = Some(a + b);
                    }
                }
            }
        }
        d
    }

    /// One router per node, each fed its links and, after a first round, the others'
    /// adjacencies (flooding), then recomputed.
    fn routers(&self, policy: &str, slack: u32) -> Vec<Router> {
        let mut rs: Vec<Router> = (0..self.n)
            .map(|me| {
                let mut cfg = RouteConfig::new(&ifaces(3), Policy::from_name(policy).unwrap());
                cfg.slack = slack;
                let mut r = Router::new(NodeId(me), cfg).unwrap();
                for (&(nb, i), &c) in &self.local(me) {
                    let o = Observation::new(NodeId(nb), IfaceId(i), Quality::Delivery(1.0));
                    r.observe(at(0), &o.with_cost(c)).unwrap();
                }
                r.recompute(at(0));
                r
            })
            .collect();
        let lsas: Vec<Vec<(NodeId, u32)>> = rs.iter().map(Router::adjacencies).collect();
        for r in &mut rs {
            for (origin, lsa) in lsas.iter().enumerate() {
                if origin as u32 != r.id().0 {
                    r.advertise(at(0), NodeId(origin as u32), lsa).unwrap();
                }
            }
            r.recompute(at(0));
        }
        rs
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Every installed next hop is on a shortest path of the graph (slack 0), over a link that
    /// exists; every reachable destination has a route on every lane, no other does.
    #[test]
    fn installed_next_hops_are_on_shortest_paths(t in topo(), part in any::<bool>()) {
        let policy = if part { "part" } else { "full" };
        let d = t.distances();
        let rs = t.routers(policy, 0);
        for r in &rs {
            let me = r.id().0 as usize;
            let local = t.local(me as u32);
            for (dest, &d_me) in d[me].iter().enumerate() {
                for lane in 0..3 {
                    let hops = r.next_hops(NodeId(dest as u32), IfaceId(lane));
                    let reachable = dest != me && d_me.is_some();
                    prop_assert_eq!(!hops.is_empty(), reachable, "{} → {} e{}", me, dest, lane);
                    for h in hops {
                        let n = h.neighbour.0 as usize;
                        let c = local.get(&(h.neighbour.0, h.iface.0));
                        prop_assert!(c.is_some(), "{:?}: no such link", h);
                        let edge = local.iter().filter(|(k, _)| k.0 == n as u32).map(|(_, c)| *c).min().unwrap();
                        prop_assert_eq!(
                            Some(u64::from(edge) + d[n][dest].unwrap()), d_me,
                            "{} → {} via {}", me, dest, n
                        );
                    }
                }
            }
        }
    }

    /// Part path: lanes e1.. take pairwise different neighbours while there are enough, every
    /// one a neighbour of the primary's route; the primary lists each neighbour once.
    #[test]
    fn part_path_lanes_use_disjoint_next_hops(t in topo(), slack in 0u32..3) {
        for r in t.routers("part", slack) {
            for dest in 0..t.n {
                let primary: Vec<NodeId> = r
                    .next_hops(NodeId(dest), IfaceId(0))
                    .iter()
                    .map(|h| h.neighbour)
                    .collect();
                let unique: BTreeSet<_> = primary.iter().collect();
                prop_assert_eq!(unique.len(), primary.len());
                let lanes: Vec<NodeId> = (1..3)
                    .filter_map(|l| {
                        let h = r.next_hops(NodeId(dest), IfaceId(l));
                        (h.len() == 1).then(|| h[0].neighbour)
                    })
                    .collect();
                prop_assert_eq!(lanes.len(), if primary.is_empty() { 0 } else { 2 });
                for n in &lanes {
                    prop_assert!(primary.contains(n));
                }
                let k = primary.len().min(lanes.len());
                let distinct: BTreeSet<_> = lanes[..k].iter().collect();
                prop_assert_eq!(distinct.len(), k, "{:?} of {:?}", lanes, primary);
            }
        }
    }

    /// Following the routers' next hops, hop by hop and whichever next hop is taken, reaches
    /// every reachable destination without a loop, on every lane and with any slack.
    #[test]
    fn forwarding_reaches_the_destination_without_loops(
        t in topo(), slack in 0u32..4, part in any::<bool>(),
    ) {
        let d = t.distances();
        let rs = t.routers(if part { "part" } else { "full" }, slack);
        for (src, row) in d.iter().enumerate() {
            for (dest, dist) in row.iter().enumerate() {
                if src == dest || dist.is_none() {
                    continue;
                }
                for lane in 0..3 {
                    // Every node any forwarding choice can reach, with the hop count.
                    let mut frontier = vec![src];
                    for hop in 0.. {
                        prop_assert!(hop <= t.n, "loop {} → {} e{}", src, dest, lane);
                        frontier.retain(|&x| x != dest);
                        if frontier.is_empty() {
                            break;
                        }
                        let mut next = BTreeSet::new();
                        for &x in &frontier {
                            let hops = rs[x].next_hops(NodeId(dest as u32), IfaceId(lane));
                            prop_assert!(!hops.is_empty(), "dead end at {}", x);
                            next.extend(hops.iter().map(|h| h.neighbour.0 as usize));
                        }
                        frontier = next.into_iter().collect();
                    }
                }
            }
        }
    }
}
