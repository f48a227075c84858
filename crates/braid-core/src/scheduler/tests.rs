use std::time::Duration;

use super::*;
use crate::Instant;

fn view(id: u32, rtt_ms: u64, room: bool, backup: bool, usable: bool) -> PathView {
    PathView {
        id: PathId(id),
        srtt: Duration::from_millis(rtt_ms),
        rttvar: Duration::ZERO,
        min_rtt: Duration::from_millis(rtt_ms),
        delivery_rate: None,
        cwnd: 10_000,
        probed: true,
        in_flight: if room { 0 } else { 10_000 },
        has_room: room,
        backup,
        usable,
        loss_rate: 0.0,
        fast_retransmits: 0,
        rtos: 0,
        acks: 0,
    }
}

/// `s.select` over `paths`, avoiding `exclude`, with no application priority.
fn pick(s: &mut dyn Scheduler, paths: &[PathView], exclude: Option<PathId>) -> Option<PathId> {
    s.select(&Context {
        now: Instant::ZERO,
        paths,
        exclude,
        mss: 1000,
        priority: None,
        queued: 0,
    })
}

#[test]
fn minrtt_prefers_lowest_rtt_with_room() {
    let mut s = MinRtt::default();
    let paths = [
        view(0, 50, true, false, true),
        view(2, 30, true, false, true),
    ];
    assert_eq!(pick(&mut s, &paths, None), Some(PathId(2)));
    let paths = [
        view(0, 50, true, false, true),
        view(2, 30, false, false, true),
    ];
    assert_eq!(pick(&mut s, &paths, None), Some(PathId(0)));
    assert_eq!(pick(&mut s, &paths, Some(PathId(0))), None);
}

#[test]
fn backup_used_only_when_no_primary_is_usable() {
    let mut s = MinRtt::default();
    // The primary is usable but full: wait, do not use the backup.
    let paths = [
        view(0, 50, false, false, true),
        view(2, 10, true, true, true),
    ];
    assert_eq!(pick(&mut s, &paths, None), None);
    // The primary is unusable (timed out): the backup takes over.
    let paths = [
        view(0, 50, true, false, false),
        view(2, 10, true, true, true),
    ];
    assert_eq!(pick(&mut s, &paths, None), Some(PathId(2)));
    // A reinjection from the only primary may use the backup.
    let paths = [
        view(0, 50, true, false, true),
        view(2, 10, true, true, true),
    ];
    assert_eq!(pick(&mut s, &paths, Some(PathId(0))), Some(PathId(2)));
}

#[test]
fn round_robin_rotates_over_ready_paths() {
    let mut s = RoundRobin::default();
    let paths = [
        view(0, 50, true, false, true),
        view(2, 30, true, false, true),
        view(4, 30, false, false, true),
    ];
    let picks: Vec<_> = (0..4)
        .map(|_| pick(&mut s, &paths, None).unwrap().0)
        .collect();
    assert_eq!(picks, vec![0, 2, 0, 2]);
}

#[test]
fn names_round_trip() {
    for n in Kind::NAMES {
        assert_eq!(Kind::from_name(n).unwrap().factory().name(), *n);
    }
}

// ---- QoE / priority scheduler (seed 004 App. B) ----

use qoe::{Band, IfQuality, MAX_QUALITY, scaled_nds};

/// A usable, non-backup path with room.
fn ready(id: u32, rtt_ms: u64) -> PathView {
    view(id, rtt_ms, true, false, true)
}

fn prio(p: u8) -> Priority {
    Priority::new(p).unwrap()
}

#[test]
fn nds_table_for_every_band_and_priority() {
    // SPEC M2, seed 004 App. B send_packet, priorities 1..=6: on NDS = 6400, the table in
    // 64ths of NDS (× 100); on NDS = 1000, which the seed's shifts do not divide, NDS − NDS≫k
    // truncating.
    let tables = [
        (
            6400,
            [
                (Band::Good, [6400, 6400, 6400, 6200, 6000, 5600]),
                (Band::Moderate, [6400, 6300, 6200, 6000, 5600, 4800]),
                (Band::Bad, [6400, 3200, 1600, 800, 800, 800]),
            ],
        ),
        (
            1000,
            [
                (Band::Good, [1000, 1000, 1000, 969, 938, 875]),
                (Band::Moderate, [1000, 985, 969, 938, 875, 750]),
                (Band::Bad, [1000, 500, 250, 125, 125, 125]),
            ],
        ),
    ];
    for (nds, table) in tables {
        for (band, row) in table {
            for (p, want) in (1..=6).zip(row) {
                assert_eq!(scaled_nds(nds, band, prio(p)), want, "{nds} {band:?} p{p}");
            }
        }
    }
}

#[test]
fn quality_bands() {
    let bands = [
        (10_000, Band::Good),
        (8001, Band::Good),
        (8000, Band::Moderate),
    ];
    let more = [(5001, Band::Moderate), (5000, Band::Bad), (0, Band::Bad)];
    for (q, b) in bands.into_iter().chain(more) {
        assert_eq!(Band::of(q), b, "{q}");
    }
}

#[test]
fn if_quality_updates() {
    let mut v = ready(0, 10);
    let mut q = IfQuality::new(&v);
    let mut step = |fr: u64, rto: u64, acks: u64| {
        v.fast_retransmits += fr;
        v.rtos += rto;
        v.acks += acks;
        q.update(&v);
        q.value()
    };
    assert_eq!(step(0, 0, 0), MAX_QUALITY, "starts at 10000");
    assert_eq!(step(0, 0, 5), 10_000, "+1 per ACK, at most 10000");
    assert_eq!(step(1, 0, 0), 9_900, "−100 per fast retransmit");
    assert_eq!(step(0, 1, 0), 8_900, "−1000 per RTO");
    assert_eq!(step(0, 0, 50), 8_950);
    assert_eq!(step(2, 3, 0), 5_750);
    assert_eq!(step(0, 5, 0), 750, "an RTO below 1000 leaves it");
    assert_eq!(step(9, 0, 0), 50, "a loss below 100 leaves it");
    assert_eq!(step(0, 0, 20_000), 10_000);
}

#[test]
fn qoe_tracks_if_quality_per_path_from_the_counters() {
    let mut s = Qoe::new(prio(1));
    let mut paths = [ready(0, 10), ready(2, 20)];
    paths[1].rtos = 7; // events before the scheduler first sees a path do not count
    pick(&mut s, &paths, None);
    assert_eq!(s.if_quality(PathId(2)), Some(10_000));
    paths[0].rtos += 2;
    paths[0].acks += 10;
    paths[1].fast_retransmits += 1;
    pick(&mut s, &paths, None);
    assert_eq!(s.if_quality(PathId(0)), Some(8_010));
    assert_eq!(s.if_quality(PathId(2)), Some(9_900));
    // A path that closed is forgotten.
    pick(&mut s, &paths[..1], None);
    assert_eq!(s.if_quality(PathId(2)), None);
}

#[test]
fn qoe_picks_the_lowest_rtt_then_the_lowest_loss() {
    let mut s = Qoe::new(prio(1));
    let mut paths = [ready(0, 30), ready(2, 20), ready(4, 20)];
    paths[1].loss_rate = 0.02;
    paths[2].loss_rate = 0.01;
    assert_eq!(pick(&mut s, &paths, None), Some(PathId(4)));
    // RTTs equal to the millisecond count as equal.
    paths[2].srtt = Duration::from_micros(20_900);
    assert_eq!(pick(&mut s, &paths, None), Some(PathId(4)));
    paths[2].srtt = Duration::from_millis(21);
    assert_eq!(pick(&mut s, &paths, None), Some(PathId(2)));
    assert_eq!(pick(&mut s, &paths, Some(PathId(2))), Some(PathId(4)));
    // Backups only when no primary is usable, as every scheduler.
    paths[1].backup = true;
    paths[2].usable = false;
    assert_eq!(pick(&mut s, &paths, None), Some(PathId(0)));
}

#[test]
fn qoe_fills_a_degraded_path_only_up_to_the_priority_share() {
    let mut p = ready(0, 10);
    p.cwnd = 64_000;
    let mut s = Qoe::new(prio(6));
    pick(&mut s, &[p], None);
    p.rtos = 6; // 10000 − 6000: bad
    let with = |s: &mut Qoe, p: PathView, priority: Option<Priority>| {
        s.select(&Context {
            now: Instant::ZERO,
            paths: &[p],
            exclude: None,
            mss: 1000,
            priority,
            queued: 0,
        })
    };
    // Bad band, priority 6: NDS/8 = 8000 bytes of the 64 000-byte window.
    p.in_flight = 7_000;
    assert_eq!(with(&mut s, p, None), Some(PathId(0)));
    p.in_flight = 7_001;
    assert_eq!(with(&mut s, p, None), None);
    // The application's priority wins over the scheduler's: p1 has the whole window.
    assert_eq!(with(&mut s, p, Some(prio(1))), Some(PathId(0)));
    p.in_flight = 63_001;
    assert_eq!(
        with(&mut s, p, Some(prio(1))),
        None,
        "the window itself still binds"
    );
    // p3 in the bad band: NDS/4.
    p.in_flight = 15_000;
    assert_eq!(with(&mut s, p, Some(prio(3))), Some(PathId(0)));
    p.in_flight = 15_001;
    assert_eq!(with(&mut s, p, Some(prio(3))), None);
    // A path may always have one segment in flight, however small its share.
    p.cwnd = 4_000;
    p.in_flight = 0;
    assert_eq!(with(&mut s, p, None), Some(PathId(0)));
    p.in_flight = 1_000;
    assert_eq!(with(&mut s, p, None), None);
}

#[test]
fn scheduler_names_with_parameters() {
    assert_eq!(Kind::parse("qoe"), Ok(Kind::Qoe { priority: prio(1) }));
    assert_eq!(
        Kind::parse("qoe:priority=4"),
        Ok(Kind::Qoe { priority: prio(4) })
    );
    assert_eq!(
        Kind::parse("qoe: priority = 6"),
        Ok(Kind::Qoe { priority: prio(6) })
    );
    assert_eq!(Kind::parse("rr"), Ok(Kind::RoundRobin));
    for bad in ["0", "7", "-1", "high", "", "300"] {
        let name = format!("qoe:priority={bad}");
        let e = Kind::parse(&name).unwrap_err().to_string();
        assert!(
            e.contains("priority") && e.contains(&format!("`{bad}`")) && e.contains("1..=6"),
            "{e}"
        );
        assert!(!e.contains('\n'));
        assert_eq!(Kind::from_name(&name), None);
    }
    let cases = [
        ("qoe:speed=2", "unknown parameter `speed`"),
        ("qoe:priority", "`priority` is not key=value"),
        ("minrtt:priority=2", "takes no parameter"),
        (
            "fastest",
            "allowed: minrtt, arrival, roundrobin, redundant, qoe",
        ),
    ];
    for (name, want) in cases {
        let e = Kind::parse(name).unwrap_err().to_string();
        assert!(e.contains(want), "{name}: {e}");
    }
}

/// A path of `rtt_ms` delivering `mbit` Mbit/s with `in_flight` bytes out of a 64 kB window.
fn rated(id: u32, rtt_ms: u64, mbit: u64, in_flight: u64) -> PathView {
    let mut p = view(id, rtt_ms, in_flight + 1000 <= 64_000, false, true);
    p.cwnd = 64_000;
    p.in_flight = in_flight;
    p.delivery_rate = Some(mbit * 125_000);
    p
}

fn arrival_pick(s: &mut Arrival, paths: &[PathView], queued: u64) -> Option<PathId> {
    s.select(&Context {
        now: Instant::ZERO,
        paths,
        exclude: None,
        mss: 1000,
        priority: None,
        queued,
    })
}

#[test]
fn arrival_counts_the_queue_a_slow_path_holds_not_only_its_rtt() {
    let mut s = Arrival::default();
    // A 1 Mbit/s path of 10 ms with 10 kB out: its next segment arrives after 88 ms of queue
    // and 10 ms; the 100 Mbit/s path of 50 ms with room wins, though its RTT is higher.
    let paths = [rated(0, 50, 100, 20_000), rated(1, 10, 1, 10_000)];
    assert_eq!(arrival_pick(&mut s, &paths, 100_000), Some(PathId(0)));
    // Empty, the slow path's segment arrives first (18 ms): it takes it.
    let paths = [rated(0, 50, 100, 20_000), rated(1, 10, 1, 0)];
    assert_eq!(arrival_pick(&mut s, &paths, 100_000), Some(PathId(1)));
    // Equal paths: the one with less queued.
    let paths = [rated(0, 20, 10, 30_000), rated(1, 20, 10, 20_000)];
    assert_eq!(arrival_pick(&mut s, &paths, 100_000), Some(PathId(1)));
}

#[test]
fn arrival_waits_for_a_full_fast_path_unless_the_queue_would_keep_it_busy() {
    // The 100 Mbit/s path of 50 ms has its window full (a segment there would arrive at
    // 50 ms); the 20 Mbit/s path of 60 ms is empty (60 ms).
    let paths = [rated(0, 50, 100, 64_000), rated(1, 60, 20, 0)];
    let mut s = Arrival::default();
    // 50 kB queued drain in 4 ms on the fast path: wait for it.
    assert_eq!(arrival_pick(&mut s, &paths, 50_000), None);
    // 1 MB queued take 80 ms there: the slow path helps.
    assert_eq!(arrival_pick(&mut s, &paths, 1_000_000), Some(PathId(1)));
    // Hysteresis: once waiting, the queue must keep the fast path busy 25 % longer than the
    // slow path takes (75 ms): a queue of 150 kB (62 ms) is not enough.
    let mut s = Arrival::default();
    assert_eq!(arrival_pick(&mut s, &paths, 50_000), None);
    assert_eq!(arrival_pick(&mut s, &paths, 150_000), None);
    assert_eq!(arrival_pick(&mut s, &paths, 1_000_000), Some(PathId(1)));
    // Not waiting any more: 150 kB is enough again.
    assert_eq!(arrival_pick(&mut s, &paths, 150_000), Some(PathId(1)));
}

#[test]
fn arrival_counts_a_long_queue_only_for_a_path_worth_its_late_arrivals() {
    // Both slower paths have 70 ms; 10 MB are queued (0.8 s on the fast path).
    let fast = rated(0, 50, 100, 64_000);
    let mut s = Arrival::default();
    // 20 Mbit/s (a fifth of the fast path): the whole queue counts, it is used.
    assert_eq!(
        arrival_pick(&mut s, &[fast, rated(1, 70, 20, 0)], 10_000_000),
        Some(PathId(1))
    );
    // 1 Mbit/s: the queue counts for two of the fast path's windows (10 ms), and the fast
    // path, 60 ms, is waited for.
    let mut s = Arrival::default();
    assert_eq!(
        arrival_pick(&mut s, &[fast, rated(1, 70, 1, 0)], 10_000_000),
        None
    );
}

#[test]
fn arrival_judges_a_slow_path_beside_the_fastest_path_ahead_of_it() {
    // The earliest path is a 10 Mbit/s one of 2 ms (12 ms with its 14 kB window full), a
    // 50 Mbit/s one of 20 ms comes next, full too; a 2 Mbit/s path of 100 ms has room (it met
    // its capacity), and 4 MB wait. Beside the earliest path alone it is not slow (a fifth of
    // it), so the whole queue used to count and it took segments for seconds of its own
    // queue; beside the 50 Mbit/s path it is a twenty-fifth: the queue counts for two of the
    // earliest path's windows, and that path is waited for.
    let mut slow = rated(2, 100, 2, 0);
    slow.probed = true;
    slow.cwnd = 200_000;
    slow.has_room = true;
    let mut earliest = rated(0, 2, 10, 14_000);
    earliest.cwnd = 14_000;
    earliest.has_room = false;
    let paths = [earliest, rated(1, 20, 50, 64_000), slow];
    let mut s = Arrival::default();
    assert_eq!(arrival_pick(&mut s, &paths, 4_000_000), None);
    // Without the 50 Mbit/s path the earliest is the fastest ahead: as before, the whole
    // queue counts (3.2 s on 10 Mbit/s) and the 2 Mbit/s path is used.
    let mut s = Arrival::default();
    assert_eq!(
        arrival_pick(&mut s, &[paths[0], paths[2]], 4_000_000),
        Some(PathId(2))
    );
    // A 50 Mbit/s path that is not ahead of it (its segments would arrive later) does not
    // count: a 300 ms path with its window full.
    let mut late = rated(1, 300, 50, 64_000);
    late.min_rtt = Duration::from_millis(300);
    let mut s = Arrival::default();
    assert_eq!(
        arrival_pick(&mut s, &[paths[0], late, paths[2]], 4_000_000),
        Some(PathId(2))
    );
}

#[test]
fn arrival_judges_a_path_slow_only_once_its_rate_measures_what_it_can_carry() {
    // LTE of 10 Mbit/s and 50 ms with its window full; a satellite path of 600 ms that has
    // carried only its initial window (15 kB): 0.2 Mbit/s measured, 10 MB queued.
    let lte = rated(0, 50, 10, 64_000);
    let mut geo = rated(1, 600, 0, 0);
    geo.cwnd = 15_000;
    geo.delivery_rate = Some(25_000);
    // Still in its first slow start: its rate is what its window allowed, the whole queue
    // counts (8 s on LTE) and it is used.
    geo.probed = false;
    let mut s = Arrival::default();
    assert_eq!(
        arrival_pick(&mut s, &[lte, geo], 10_000_000),
        Some(PathId(1))
    );
    // A timeout cut its window to two segments: it delivers all of it every base RTT, so
    // the window limits it, not the path; used.
    geo.probed = true;
    geo.cwnd = 3_000;
    geo.delivery_rate = Some(5_000);
    let mut s = Arrival::default();
    assert_eq!(
        arrival_pick(&mut s, &[lte, geo], 10_000_000),
        Some(PathId(1))
    );
    // A window that has met the path's capacity and holds a queue (20 kB against 3 kB a base
    // RTT): the path is slow, the queue counts for two of LTE's windows, LTE is waited for.
    geo.cwnd = 20_000;
    let mut s = Arrival::default();
    assert_eq!(arrival_pick(&mut s, &[lte, geo], 10_000_000), None);
    // Its queue doubled its RTT, without a loss yet: the same.
    geo.probed = false;
    geo.srtt = Duration::from_millis(1300);
    let mut s = Arrival::default();
    assert_eq!(arrival_pick(&mut s, &[lte, geo], 10_000_000), None);
}

#[test]
fn arrival_reinjects_on_the_earliest_path_with_room_and_keeps_backups_back() {
    let mut s = Arrival::default();
    let paths = [
        rated(0, 50, 100, 0),
        rated(1, 50, 1, 30_000),
        rated(2, 80, 50, 0),
    ];
    let cx = |exclude| Context {
        now: Instant::ZERO,
        paths: &paths,
        exclude,
        mss: 1000,
        priority: None,
        queued: 0,
    };
    assert_eq!(s.select(&cx(Some(PathId(0)))), Some(PathId(2)));
    // A backup is used only when no other path is usable.
    let mut b = paths;
    b[0].backup = true;
    b[2].usable = false;
    assert_eq!(arrival_pick(&mut s, &b, 10_000), Some(PathId(1)));
    b[1].usable = false;
    assert_eq!(arrival_pick(&mut s, &b, 10_000), Some(PathId(0)));
    // Before a rate is measured, the window over the smoothed RTT stands in for it.
    let mut fresh = rated(0, 50, 1, 0);
    fresh.delivery_rate = None;
    assert_eq!(arrival_pick(&mut s, &[fresh], 10_000), Some(PathId(0)));
    assert_eq!(Kind::parse("arrival"), Ok(Kind::Arrival));
    assert_eq!(Kind::Arrival.build().name(), "arrival");
}
