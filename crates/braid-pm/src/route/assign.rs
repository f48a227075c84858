//! Next hops to interfaces: seed 004 Appendix C.
//!
//! The seed's improved OSPF-MDR keeps, on the primary interface e0, the route with every next
//! hop (Table 3: the master subpath has up to three), and gives each other interface eX
//! (X = 1, 2, 3) one next hop by `choose_nexthop`:
//!
//! | next hops | e1 | e2 | e3 |
//! |---|---|---|---|
//! | 1 | first | first | first |
//! | 2 | first | second | first |
//! | 3 | first | second | third |
//!
//! which is interface X taking hop `(X − 1) mod n`: the rule this module applies to any number
//! of interfaces and next hops, so that as many interfaces as there are next hops get pairwise
//! different ones, and subflows paired interface to interface (same-subnet subflows, seed 004
//! §V.A.3) go through disjoint neighbours.

use super::{Connectivity, NextHop, NodeId};
use crate::event::IfaceId;

/// Seed 004 App. C `choose_nexthop`: the index (0-based) of the next hop of interface number
/// `no_if` (1-based, e1 = 1) among `num_nexthop` next hops; `None` when there is no next hop
/// or `no_if` is 0 (the primary interface, which keeps them all).
pub fn choose_nexthop(num_nexthop: usize, no_if: usize) -> Option<usize> {
    if num_nexthop == 0 || no_if == 0 {
        return None;
    }
    Some((no_if - 1) % num_nexthop)
}

/// The route of one interface ("lane") towards one destination.
///
/// - `lane_no`: the interface's App. C number (0 for the primary).
/// - `hops`: the candidate next hops, best first.
/// - `links(n)`: the usable links to neighbour `n`, as (local interface, cost).
///
/// Full path (one-to-many): every link to every candidate, on every lane. Part path
/// (one-to-one): the primary lane gets each candidate once, every other lane the one
/// candidate App. C gives it; a candidate is reached over the lane's own interface when that
/// link is usable (interface eX to the neighbour's eX), else over its cheapest usable link.
pub fn lane_route(
    connectivity: Connectivity,
    lane: IfaceId,
    lane_no: usize,
    hops: &[NodeId],
    links: impl Fn(NodeId) -> Vec<(IfaceId, u32)>,
) -> Vec<NextHop> {
    let best_link = |n: NodeId| -> Option<NextHop> {
        let l = links(n);
        let iface = if l.iter().any(|&(i, _)| i == lane) {
            lane
        } else {
            l.iter().min_by_key(|&&(i, c)| (c, i))?.0
        };
        Some(NextHop {
            neighbour: n,
            iface,
        })
    };
    match connectivity {
        Connectivity::Full => {
            let mut out = Vec::new();
            for &n in hops {
                let mut l = links(n);
                // The lane's own interface first, then the cheaper links.
                l.sort_by_key(|&(i, c)| (i != lane, c, i));
                out.extend(l.into_iter().map(|(iface, _)| NextHop {
                    neighbour: n,
                    iface,
                }));
            }
            out
        }
        Connectivity::Part => match choose_nexthop(hops.len(), lane_no) {
            None => hops.iter().filter_map(|&n| best_link(n)).collect(),
            Some(k) => best_link(hops[k]).into_iter().collect(),
        },
    }
}
