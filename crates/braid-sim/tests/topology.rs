//! The topology engine: relays forward hop by hop, routes follow failures, and every byte of
//! every connection arrives exactly once and in order whenever a route exists.

use std::fmt::Write as _;
use std::path::Path;

use braid_sim::record::RunOptions;
use braid_sim::{scenario, world};
use proptest::prelude::*;

/// One link: its ends, rate (Mbit/s), one-way delay (ms), loss.
#[derive(Debug, Clone)]
struct L {
    a: (usize, usize),
    b: (usize, usize),
    mbit: u32,
    delay_ms: u32,
    loss: f64,
    /// Blocked from `down` s; back at `up` s when given.
    down: Option<(u32, Option<u32>)>,
}

/// One connection: client and server nodes, bytes, start (s), upload or download.
#[derive(Debug, Clone)]
struct F {
    client: usize,
    server: usize,
    bytes: u32,
    start_ms: u32,
    up: bool,
}

fn scenario_text(ifaces: &[usize], links: &[L], flows: &[F], duration: u32) -> String {
    let mut t = format!("name = \"relay\"\nduration = \"{duration}s\"\n");
    for (n, k) in ifaces.iter().enumerate() {
        let _ = writeln!(t, "[[node]]\nname = \"N{n}\"");
        let list: Vec<String> = (0..*k).map(|i| format!("{{ name = \"e{i}\" }}")).collect();
        let _ = writeln!(t, "iface = [{}]", list.join(", "));
    }
    for (i, l) in links.iter().enumerate() {
        let _ = writeln!(
            t,
            "[[link]]\nname = \"l{i}\"\na = \"N{}.e{}\"\nb = \"N{}.e{}\"\nrate = \"{}Mbit\"\ndelay = \"{}ms\"\nloss = {}",
            l.a.0, l.a.1, l.b.0, l.b.1, l.mbit, l.delay_ms, l.loss
        );
    }
    for (k, f) in flows.iter().enumerate() {
        let head = if k == 0 {
            "[app]".to_string()
        } else {
            format!("[[flow]]\nname = \"f{k}\"")
        };
        let _ = writeln!(
            t,
            "{head}\nkind = \"file\"\nbytes = {}\nclient = \"N{}\"\nserver = \"N{}\"\nstart = \"{}ms\"\ndirection = \"{}\"",
            f.bytes,
            f.client,
            f.server,
            f.start_ms,
            if f.up { "up" } else { "down" }
        );
    }
    for (i, l) in links.iter().enumerate() {
        if let Some((down, up)) = l.down {
            let _ = writeln!(
                t,
                "[[event]]\nat = \"{down}s\"\nlink = \"l{i}\"\naction = \"down\""
            );
            if let Some(up) = up {
                let _ = writeln!(
                    t,
                    "[[event]]\nat = \"{up}s\"\nlink = \"l{i}\"\naction = \"up\""
                );
            }
        }
    }
    t += "[routing]\npolicy = \"shortest\"\n";
    t
}

/// Whether the links that are up at the end join `a` and `b`.
fn connected_at_end(n: usize, links: &[L], a: usize, b: usize) -> bool {
    let mut seen = vec![false; n];
    let mut stack = vec![a];
    seen[a] = true;
    while let Some(x) = stack.pop() {
        for l in links {
            let up = match l.down {
                None => true,
                Some((_, back)) => back.is_some(),
            };
            if !up {
                continue;
            }
            for (p, q) in [(l.a.0, l.b.0), (l.b.0, l.a.0)] {
                if p == x && !seen[q] {
                    seen[q] = true;
                    stack.push(q);
                }
            }
        }
    }
    seen[b]
}

fn topology() -> impl Strategy<Value = (Vec<usize>, Vec<L>, Vec<F>)> {
    (2usize..=12)
        .prop_flat_map(|n| {
            (
                prop::collection::vec(1usize..=2, n),
                // A spanning tree: node i joins a node before it.
                prop::collection::vec((0usize..1000, 0usize..2, 0usize..2), n - 1),
                // Extra links.
                prop::collection::vec((0usize..n, 0usize..n, 0usize..2, 0usize..2), 0..=n),
                // Per link: rate, delay, loss ‰, failure.
                prop::collection::vec(
                    (
                        2u32..=20,
                        1u32..=20,
                        0u32..=20,
                        prop::option::weighted(0.3, (2u32..=12, prop::option::of(14u32..=25))),
                    ),
                    2 * n,
                ),
                prop::collection::vec(
                    (
                        0usize..n,
                        1usize..n,
                        20_000u32..=300_000,
                        500u32..=4000,
                        any::<bool>(),
                    ),
                    1..=3,
                ),
            )
        })
        .prop_map(|(ifaces, tree, extra, props, flows)| {
            let n = ifaces.len();
            let mut ends = Vec::new();
            for (i, (p, x, y)) in tree.into_iter().enumerate() {
                let a = i + 1;
                let b = p % a;
                ends.push(((a, x % ifaces[a]), (b, y % ifaces[b])));
            }
            for (a, b, x, y) in extra {
                let (p, q) = ((a, x % ifaces[a]), (b, y % ifaces[b]));
                if a != b && !ends.contains(&(p, q)) && !ends.contains(&(q, p)) {
                    ends.push((p, q));
                }
            }
            let links = ends
                .into_iter()
                .zip(props.into_iter().cycle())
                .map(|((a, b), (mbit, delay_ms, loss, down))| L {
                    a,
                    b,
                    mbit,
                    delay_ms,
                    loss: f64::from(loss) / 1000.0,
                    down,
                })
                .collect();
            let flows = flows
                .into_iter()
                .map(|(c, d, bytes, start_ms, up)| F {
                    client: c,
                    server: (c + d) % n,
                    bytes,
                    start_ms,
                    up,
                })
                .collect();
            (ifaces, links, flows)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Random topologies of 2–12 nodes with random link failures (some links come back, some
    /// do not): every connection's bytes arrive exactly once and in order, all of them when
    /// the links left at the end still join its nodes.
    #[test]
    fn relays_deliver_every_byte_once_and_in_order((ifaces, links, flows) in topology(), seed in 1u64..1000) {
        let duration = 120;
        let text = scenario_text(&ifaces, &links, &flows, duration);
        let plan = scenario::load_str(&text, "relay.toml", Path::new("."), &[])
            .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        let rec = world::run_with(&plan.variants[0], seed, RunOptions { verify: true, ..RunOptions::default() });
        prop_assert_eq!(rec.flows.len(), flows.len());
        for (k, (f, r)) in flows.iter().zip(&rec.flows).enumerate() {
            prop_assert_eq!(r.corrupt, 0, "flow {} corrupted\n{}", k, text);
            prop_assert!(r.delivered <= r.written, "flow {}: {} delivered of {} written", k, r.delivered, r.written);
            prop_assert!(r.written <= u64::from(f.bytes));
            if connected_at_end(ifaces.len(), &links, f.client, f.server) {
                prop_assert_eq!(
                    r.delivered, u64::from(f.bytes),
                    "flow {} ({:?}) incomplete with a route: {:?}\n{}", k, f, r, text
                );
            }
        }
    }
}

/// A file over a chain of four relays and a bulk transfer the other way: both cross every
/// relay, the file completes, nothing is lost in the network.
#[test]
fn a_chain_of_relays_carries_both_directions() {
    let ifaces = vec![1; 6];
    let links: Vec<L> = (0..5)
        .map(|i| L {
            a: (i, 0),
            b: (i + 1, 0),
            mbit: 10,
            delay_ms: 2,
            loss: 0.0,
            down: None,
        })
        .collect();
    let flows = vec![
        F {
            client: 0,
            server: 5,
            bytes: 2_000_000,
            start_ms: 500,
            up: false,
        },
        F {
            client: 5,
            server: 0,
            bytes: 1_000_000,
            start_ms: 500,
            up: false,
        },
    ];
    let text = scenario_text(&ifaces, &links, &flows, 30);
    let plan = scenario::load_str(&text, "chain.toml", Path::new("."), &[]).unwrap();
    let rec = world::run_with(
        &plan.variants[0],
        1,
        RunOptions {
            verify: true,
            ..RunOptions::default()
        },
    );
    for (f, r) in flows.iter().zip(&rec.flows) {
        assert_eq!(r.delivered, u64::from(f.bytes), "{r:?}");
        assert_eq!(r.corrupt, 0);
    }
    assert_eq!(rec.net_drops, Default::default());
    // Every link carried both connections' data (plus acknowledgements) both ways.
    for (ab, ba) in &rec.link_stats {
        assert!(
            ab.bytes > 1_000_000 && ba.bytes > 1_000_000,
            "{ab:?} {ba:?}"
        );
    }
    // 3 Mbit over 10 Mbit/s shared: a few seconds, not tens.
    let done = rec.flows[0].completed.unwrap().as_secs_f64();
    assert!(done < 5.0, "{done}");
}

/// A relay that goes away: the route moves to the other branch of a ring once the dead
/// neighbour is noticed (4 missed hellos) and the next 2 s recomputation runs, and the
/// transfer goes on.
#[test]
fn routes_move_around_a_failed_relay() {
    // Ring N0–N1–N2 and N0–N3–N2; the shorter ring side is N1 (lower index on ties).
    let ifaces = vec![1; 4];
    let mk = |a: usize, b: usize, down: Option<(u32, Option<u32>)>| L {
        a: (a, 0),
        b: (b, 0),
        mbit: 10,
        delay_ms: 5,
        loss: 0.0,
        down,
    };
    let links = vec![
        mk(0, 1, None),
        mk(1, 2, Some((10, None))),
        mk(0, 3, None),
        mk(3, 2, None),
    ];
    let flows = vec![F {
        client: 2,
        server: 0,
        bytes: 20_000_000,
        start_ms: 1000,
        up: false,
    }];
    let text = scenario_text(&ifaces, &links, &flows, 40);
    let plan = scenario::load_str(&text, "ring.toml", Path::new("."), &[]).unwrap();
    let rec = world::run(&plan.variants[0], 1);
    let r = &rec.flows[0];
    assert_eq!(r.delivered, 20_000_000, "{r:?}");
    // The stall: from the failure to the first delivery after it.
    let resumed = rec
        .deliveries
        .iter()
        .find(|(t, _)| *t > 10_000_000)
        .map(|(t, _)| *t as f64 / 1e6)
        .unwrap();
    assert!(resumed < 10.0 + 4.0 + 2.0 + 1.5, "resumed at {resumed} s");
    // Before the failure N1 carried it, after it N3.
    let (n1, n3) = (&rec.link_stats[0], &rec.link_stats[2]);
    assert!(
        n1.0.bytes > 5_000_000 && n3.0.bytes > 5_000_000,
        "{n1:?} {n3:?}"
    );
}
