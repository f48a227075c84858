use std::time::Duration;

use super::*;

fn view(id: u32, rtt_ms: u64, room: bool, backup: bool, usable: bool) -> PathView {
    PathView {
        id: PathId(id),
        srtt: Duration::from_millis(rtt_ms),
        rttvar: Duration::ZERO,
        cwnd: 10_000,
        in_flight: if room { 0 } else { 10_000 },
        has_room: room,
        backup,
        usable,
        loss_rate: 0.0,
    }
}

#[test]
fn minrtt_prefers_lowest_rtt_with_room() {
    let mut s = MinRtt::default();
    let paths = [
        view(0, 50, true, false, true),
        view(2, 30, true, false, true),
    ];
    assert_eq!(s.select(&paths, None), Some(PathId(2)));
    let paths = [
        view(0, 50, true, false, true),
        view(2, 30, false, false, true),
    ];
    assert_eq!(s.select(&paths, None), Some(PathId(0)));
    assert_eq!(s.select(&paths, Some(PathId(0))), None);
}

#[test]
fn backup_used_only_when_no_primary_is_usable() {
    let mut s = MinRtt::default();
    // The primary is usable but full: wait, do not use the backup.
    let paths = [
        view(0, 50, false, false, true),
        view(2, 10, true, true, true),
    ];
    assert_eq!(s.select(&paths, None), None);
    // The primary is unusable (timed out): the backup takes over.
    let paths = [
        view(0, 50, true, false, false),
        view(2, 10, true, true, true),
    ];
    assert_eq!(s.select(&paths, None), Some(PathId(2)));
    // A reinjection from the only primary may use the backup.
    let paths = [
        view(0, 50, true, false, true),
        view(2, 10, true, true, true),
    ];
    assert_eq!(s.select(&paths, Some(PathId(0))), Some(PathId(2)));
}

#[test]
fn round_robin_rotates_over_ready_paths() {
    let mut s = RoundRobin::default();
    let paths = [
        view(0, 50, true, false, true),
        view(2, 30, true, false, true),
        view(4, 30, false, false, true),
    ];
    let picks: Vec<_> = (0..4).map(|_| s.select(&paths, None).unwrap().0).collect();
    assert_eq!(picks, vec![0, 2, 0, 2]);
}

#[test]
fn names_round_trip() {
    for n in Kind::NAMES {
        assert_eq!(Kind::from_name(n).unwrap().factory().name(), *n);
    }
}
