//! Correctness under faults: two endpoints driven through random loss, reordering,
//! duplication, path up/down, backup flips, stall watches and path closes. Whatever happens,
//! every byte is delivered exactly once and in order, nothing panics, and the stream never
//! stalls longer than the broken-path timeout while a usable path exists.
//!
//! Shrunk failures are kept below as named regression tests.

mod util;

use std::time::Duration;

use braid_core::cc::Algorithm;
use braid_core::reinject::Policy;
use braid_core::scheduler::Kind;
use braid_core::{AddrId, Config, Instant};
use proptest::prelude::*;
use util::{Link, Pair, pattern};

#[derive(Debug, Clone)]
struct LinkSpec {
    delay_ms: u64,
    jitter_ms: u64,
    loss: f64,
    duplicate: f64,
    mbit: u64,
}

#[derive(Debug, Clone)]
enum Op {
    Advance(u64),
    Down(usize),
    Up(usize),
    Backup(usize, bool),
    /// Watch the path for a stall (`Connection::set_watch`), or stop.
    Watch(usize, bool),
    Close(usize),
    Write(usize),
}

#[derive(Debug, Clone)]
struct Case {
    links: Vec<LinkSpec>,
    scheduler: usize,
    reinjection: usize,
    congestion: usize,
    ops: Vec<Op>,
    seed: u64,
}

fn link_spec() -> impl Strategy<Value = LinkSpec> {
    (1u64..60, 0u64..15, 0.0f64..0.08, 0.0f64..0.04, 1u64..40).prop_map(
        |(delay_ms, jitter_ms, loss, duplicate, mbit)| LinkSpec {
            delay_ms,
            jitter_ms,
            loss,
            duplicate,
            mbit,
        },
    )
}

fn op(n_links: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (10u64..3000).prop_map(Op::Advance),
        1 => (0..n_links).prop_map(Op::Down),
        1 => (0..n_links).prop_map(Op::Up),
        1 => (0..n_links, any::<bool>()).prop_map(|(i, b)| Op::Backup(i, b)),
        1 => (0..n_links, any::<bool>()).prop_map(|(i, b)| Op::Watch(i, b)),
        1 => (0..n_links).prop_map(Op::Close),
        2 => (1usize..1_000_000).prop_map(Op::Write),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    prop::collection::vec(link_spec(), 1..4).prop_flat_map(|links| {
        let n = links.len();
        (
            Just(links),
            0..Kind::NAMES.len(),
            0..Policy::NAMES.len(),
            0..Algorithm::NAMES.len(),
            prop::collection::vec(op(n), 1..30),
            any::<u64>(),
        )
            .prop_map(
                |(links, scheduler, reinjection, congestion, ops, seed)| Case {
                    links,
                    scheduler,
                    reinjection,
                    congestion,
                    ops,
                    seed,
                },
            )
    })
}

const BROKEN_AFTER: u32 = 4;

fn config(c: &Case) -> Config {
    Config {
        scheduler: Kind::from_name(Kind::NAMES[c.scheduler]).unwrap().factory(),
        reinjection: Policy::from_name(Policy::NAMES[c.reinjection])
            .unwrap()
            .shared(),
        congestion: Algorithm::from_name(Algorithm::NAMES[c.congestion])
            .unwrap()
            .factory(10),
        broken_after_backoffs: BROKEN_AFTER,
        rto_max: Duration::from_secs(4),
        // Half the cases learn their paths' reordering (its DupThresh and time rule).
        adaptive_reordering: c.seed % 2 == 1,
        send_buffer: 256 << 10,
        receive_buffer: 256 << 10,
        ..Config::default()
    }
}

/// Upper bound on the time a path can take to be declared broken: the sum of its backed-off
/// RTOs, each capped at `rto_max`, plus a few RTTs to reopen a path and reinject.
fn broken_timeout(cfg: &Config, c: &Case) -> Duration {
    let max_rtt: u64 = c
        .links
        .iter()
        .map(|l| 2 * (l.delay_ms + l.jitter_ms) + 100)
        .max()
        .unwrap();
    let rto = Duration::from_millis(max_rtt) + cfg.rto_min.max(Duration::from_millis(4 * max_rtt));
    let mut total = Duration::ZERO;
    for i in 0..BROKEN_AFTER {
        total += (rto * (1 << i)).min(cfg.rto_max);
    }
    // Reopening a path waits for an RTO of the new path's handshake (1 s initial) in the worst
    // case, and the first transmission after it.
    total + Duration::from_secs(3)
}

/// Opens a client path on every up link that has none (what a full-mesh path manager does).
fn reopen(p: &mut Pair) {
    for i in 0..p.links.len() {
        let has = p.client.paths().any(|info| info.local == AddrId(i as u8));
        if p.links[i].up && !has && p.client.is_established() {
            let _ = p
                .client
                .open_path(p.now, AddrId(i as u8), AddrId(i as u8), false);
        }
    }
}

fn path_on(p: &Pair, link: usize) -> Option<braid_core::PathId> {
    p.client
        .paths()
        .find(|info| info.local == AddrId(link as u8))
        .map(|info| info.id)
}

struct Outcome {
    delivered: Vec<u8>,
    expected: Vec<u8>,
    /// (time, link up flags) at each change.
    link_timeline: Vec<(Instant, Vec<bool>)>,
    writes: Vec<(Instant, usize)>,
    reads: Vec<(Instant, usize)>,
    end: Instant,
}

fn run(c: &Case) -> Outcome {
    let cfg = config(c);
    let links = c
        .links
        .iter()
        .map(|s| {
            let mut l = Link::new(s.delay_ms).rate_mbit(s.mbit);
            l.jitter = Duration::from_millis(s.jitter_ms);
            l.loss = s.loss;
            l.duplicate = s.duplicate;
            l
        })
        .collect();
    let mut p = Pair::new(cfg, links, c.seed);
    p.open_all(&[]);
    let mut expected = Vec::new();
    let mut pending: Vec<u8> = Vec::new();
    let mut writes = Vec::new();
    let mut link_timeline = vec![(p.now, p.links.iter().map(|l| l.up).collect())];
    let feed = |p: &mut Pair, pending: &mut Vec<u8>, writes: &mut Vec<(Instant, usize)>| {
        if !pending.is_empty() {
            let n = p.client.write(pending);
            if n > 0 {
                writes.push((p.now, n));
                pending.drain(..n);
            }
        }
    };
    for (k, op) in c.ops.iter().enumerate() {
        match *op {
            Op::Advance(ms) => {
                let until = p.now + Duration::from_millis(ms);
                let mut step = p.now;
                while step < until {
                    step = (step + Duration::from_millis(50)).min(until);
                    p.run_until_with(step, |p| feed(p, &mut pending, &mut writes));
                    reopen(&mut p);
                }
            }
            Op::Down(i) => {
                p.links[i].up = false;
                link_timeline.push((p.now, p.links.iter().map(|l| l.up).collect()));
            }
            Op::Up(i) => {
                p.links[i].up = true;
                link_timeline.push((p.now, p.links.iter().map(|l| l.up).collect()));
                reopen(&mut p);
            }
            Op::Backup(i, b) => {
                let id = path_on(&p, i);
                if let Some(id) = id {
                    p.client.set_backup(id, b).unwrap();
                }
            }
            Op::Watch(i, b) => {
                let id = path_on(&p, i);
                if let Some(id) = id {
                    p.client.set_watch(id, b).unwrap();
                }
            }
            Op::Close(i) => {
                let id = path_on(&p, i);
                if let Some(id) = id {
                    p.client.close_path(id).unwrap();
                }
            }
            Op::Write(n) => {
                let data = pattern(n, k as u8);
                expected.extend_from_slice(&data);
                pending.extend_from_slice(&data);
                feed(&mut p, &mut pending, &mut writes);
            }
        }
    }
    // Heal the network and let everything arrive.
    for l in &mut p.links {
        l.up = true;
        l.loss = 0.0;
    }
    link_timeline.push((p.now, p.links.iter().map(|l| l.up).collect()));
    let deadline = p.now + Duration::from_secs(300);
    while p.server_received.len() < expected.len() && p.now < deadline {
        let step = p.now + Duration::from_millis(100);
        p.run_until_with(step, |p| feed(p, &mut pending, &mut writes));
        reopen(&mut p);
    }
    if std::env::var("FAULTS_DEBUG").is_ok() {
        eprintln!(
            "t={:?} recv {} expected {} pending {} timeout {:?}/{:?}",
            p.now,
            p.server_received.len(),
            expected.len(),
            pending.len(),
            p.client.poll_timeout(),
            p.server.poll_timeout()
        );
        for i in p.client.paths() {
            eprintln!(
                "  C {:?} est {} usable {} cwnd {} inflight {} rto {:?} lost {} retx {} rtos {}",
                i.id,
                i.established,
                i.usable,
                i.cwnd,
                i.in_flight,
                i.rto,
                i.stats.lost_packets,
                i.stats.retransmissions,
                i.stats.rto_count
            );
        }
        for i in p.server.paths() {
            eprintln!("  S {:?} est {} usable {}", i.id, i.established, i.usable);
        }
        eprintln!("  client {:?}", p.client.stats());
        eprintln!("  server {:?}", p.server.stats());
        eprintln!(
            "  client send buffered {} all acked {}",
            p.client.send_buffered(),
            p.client.all_acked()
        );
        eprintln!("  client {}", p.client.debug_send_state());
        eprintln!("  server {}", p.server.debug_send_state());
    }
    Outcome {
        delivered: p.server_received.clone(),
        expected,
        link_timeline,
        writes,
        reads: p.server_reads.clone(),
        end: p.now,
    }
}

/// Whether some link was up during all of [from, to].
fn some_link_up_throughout(o: &Outcome, from: Instant, to: Instant) -> bool {
    let n = o.link_timeline[0].1.len();
    (0..n).any(|i| {
        let state_at_from = o
            .link_timeline
            .iter()
            .rev()
            .find(|(t, _)| *t <= from)
            .is_none_or(|(_, s)| s[i]);
        state_at_from
            && o.link_timeline
                .iter()
                .filter(|(t, _)| *t > from && *t <= to)
                .all(|(_, s)| s[i])
    })
}

fn check(c: &Case) -> Result<(), TestCaseError> {
    let o = run(c);
    prop_assert_eq!(o.delivered.len(), o.expected.len(), "every byte delivered");
    prop_assert!(
        o.delivered == o.expected,
        "bytes delivered in order and unchanged"
    );
    // No stall beyond the broken-path timeout while a link stays up and data is pending.
    let limit = broken_timeout(&config(c), c);
    let step = Duration::from_millis(250);
    let mut t = Instant::ZERO;
    while t + limit <= o.end {
        let written: usize = o
            .writes
            .iter()
            .filter(|(w, _)| *w <= t)
            .map(|(_, n)| n)
            .sum();
        let read: usize = o
            .reads
            .iter()
            .filter(|(r, _)| *r <= t)
            .map(|(_, n)| n)
            .sum();
        if written > read && some_link_up_throughout(&o, t, t + limit) {
            let progress = o.reads.iter().any(|(r, _)| *r > t && *r <= t + limit);
            prop_assert!(
                progress,
                "stalled from {:?} for {:?} with a link up ({} bytes pending)",
                t,
                limit,
                written - read
            );
        }
        t += step;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 96,
        max_shrink_iters: 200,
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_byte_once_in_order_under_faults(c in case()) {
        check(&c)?;
    }
}

fn spec(delay_ms: u64, jitter_ms: u64, loss: f64, duplicate: f64, mbit: u64) -> LinkSpec {
    LinkSpec {
        delay_ms,
        jitter_ms,
        loss,
        duplicate,
        mbit,
    }
}

/// Found by the property test: three lossy links with duplication, one write; the transfer
/// stopped after 27 kB.
#[test]
fn regression_lossy_three_links_stall() {
    let c = Case {
        links: vec![
            spec(54, 8, 0.04263549451843835, 0.03200867348777656, 10),
            spec(3, 5, 0.02635157721870131, 0.002466011874045744, 37),
            spec(11, 0, 0.02461448583003447, 0.030326424961968947, 29),
        ],
        scheduler: 0,
        reinjection: 0,
        congestion: 0,
        ops: vec![
            Op::Advance(14),
            Op::Up(0),
            Op::Write(276546),
            Op::Advance(15),
        ],
        seed: 9378243995111644120,
    };
    check(&c).unwrap();
}

/// Found by the property test: one lossy, reordering, duplicating path with CUBIC.
#[test]
fn regression_single_path_cubic_reordering() {
    let c = Case {
        links: vec![spec(1, 5, 0.03789775522393178, 0.0177782642096292, 25)],
        scheduler: 0,
        reinjection: 0,
        congestion: 1,
        ops: vec![
            Op::Write(373709),
            Op::Advance(2514),
            Op::Write(304064),
            Op::Write(938115),
            Op::Advance(51),
            Op::Advance(993),
            Op::Advance(640),
        ],
        seed: 5706846283762909431,
    };
    check(&c).unwrap();
}

/// Found by the property test: three lossy paths with LIA, one goes down mid-transfer.
#[test]
fn regression_lia_path_down_mid_transfer() {
    let c = Case {
        links: vec![
            spec(19, 11, 0.06230029358223381, 0.02621680305874927, 35),
            spec(4, 6, 0.04519100418868025, 0.010669829647543514, 30),
            spec(1, 2, 0.02070674845676254, 0.028482481050261927, 33),
        ],
        scheduler: 0,
        reinjection: 0,
        congestion: 2,
        ops: vec![
            Op::Write(585624),
            Op::Advance(143),
            Op::Down(0),
            Op::Advance(1855),
        ],
        seed: 9026358469510756379,
    };
    check(&c).unwrap();
}
