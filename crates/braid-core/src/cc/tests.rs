use std::time::Duration;

use super::*;

const MSS: u64 = 1400;

fn ack(now_ms: u64, bytes: u64, srtt_ms: u64) -> Ack {
    Ack {
        now: Instant::from_millis(now_ms),
        bytes,
        srtt: Duration::from_millis(srtt_ms),
        min_rtt: Duration::from_millis(srtt_ms),
        cwnd_limited: true,
        stretch: false,
    }
}

fn all() -> Vec<Box<dyn Controller>> {
    Algorithm::NAMES
        .iter()
        .map(|n| {
            Algorithm::from_name(n)
                .unwrap()
                .factory(10)
                .build(Instant::ZERO, MSS)
        })
        .collect()
}

#[test]
fn slow_start_doubles_per_window() {
    for mut cc in all() {
        let w0 = cc.window();
        assert_eq!(w0, 10 * MSS, "{}", cc.name());
        // One window of ACKs, one ACK per segment.
        for _ in 0..10 {
            cc.on_ack(&ack(10, MSS, 10), &[]);
        }
        assert_eq!(cc.window(), 20 * MSS, "{}", cc.name());
    }
}

#[test]
fn stretch_acks_grow_slow_start_by_every_byte_only_when_asked() {
    for mut limited in all() {
        // One ACK for a whole window of ten segments: RFC 3465 counts two of them.
        limited.on_ack(&ack(10, 10 * MSS, 10), &[]);
        assert_eq!(limited.window(), 12 * MSS, "{}", limited.name());
    }
    for mut linux in all() {
        let mut a = ack(10, 10 * MSS, 10);
        a.stretch = true;
        linux.on_ack(&a, &[]);
        // Linux's tcp_slow_start(): the window doubles per window of data, however thinned
        // the acknowledgements come.
        assert_eq!(linux.window(), 20 * MSS, "{}", linux.name());
    }
}

#[test]
fn application_limited_window_does_not_grow() {
    for mut cc in all() {
        let mut a = ack(10, MSS, 10);
        a.cwnd_limited = false;
        for _ in 0..100 {
            cc.on_ack(&a, &[]);
        }
        assert_eq!(cc.window(), 10 * MSS, "{}", cc.name());
    }
}

#[test]
fn one_reduction_per_recovery_episode() {
    for mut cc in all() {
        for _ in 0..30 {
            cc.on_ack(&ack(10, MSS, 10), &[]);
        }
        let w = cc.window();
        cc.on_loss(Instant::from_millis(100), Instant::from_millis(90), w);
        let reduced = cc.window();
        assert!(reduced < w, "{}", cc.name());
        // A second loss of a packet sent before the episode began changes nothing.
        cc.on_loss(Instant::from_millis(101), Instant::from_millis(95), w);
        assert_eq!(cc.window(), reduced, "{}", cc.name());
        // A loss of a packet sent after it does.
        cc.on_loss(Instant::from_millis(300), Instant::from_millis(200), w);
        assert!(cc.window() < reduced, "{}", cc.name());
    }
}

#[test]
fn rto_collapses_to_one_segment() {
    for mut cc in all() {
        for _ in 0..30 {
            cc.on_ack(&ack(10, MSS, 10), &[]);
        }
        let w = cc.window();
        cc.on_rto(Instant::from_millis(500), w);
        assert_eq!(cc.window(), MSS, "{}", cc.name());
        assert!(
            cc.ssthresh() >= 2 * MSS && cc.ssthresh() < w,
            "{}",
            cc.name()
        );
    }
}

#[test]
fn newreno_congestion_avoidance_adds_one_segment_per_window() {
    let mut cc = NewReno::new(MSS, 10 * MSS);
    cc.on_loss(Instant::from_millis(1), Instant::ZERO, 10 * MSS);
    let w = cc.window();
    let segs = w / MSS;
    for _ in 0..segs {
        cc.on_ack(&ack(50, MSS, 10), &[]);
    }
    assert_eq!(cc.window(), w + MSS);
}

#[test]
fn cubic_reduces_by_beta_and_regrows_to_wmax() {
    let mut cc = Cubic::new(Instant::ZERO, MSS, 100 * MSS);
    cc.on_loss(Instant::from_millis(1), Instant::ZERO, 100 * MSS);
    assert_eq!(cc.window(), 70 * MSS);
    // K = cbrt(30/0.4) ≈ 4.2 s: after ~5 s of ACKs at 100 ms RTT the window is back above
    // W_max (the Reno-friendly estimate has only grown by ~27 segments by then).
    let mut t = 1;
    while t < 5_000 {
        t += 100;
        let w = cc.window();
        cc.on_ack(&ack(t, w, 100), &[]);
    }
    assert!(cc.window() >= 100 * MSS, "window {}", cc.window() / MSS);
    assert!(cc.window() < 140 * MSS, "window {}", cc.window() / MSS);
}

fn path(cwnd_segs: u64, rtt_ms: u64, me: bool) -> PathCc {
    PathCc {
        cwnd: cwnd_segs * MSS,
        srtt: Duration::from_millis(rtt_ms),
        inter_loss_bytes: 0,
        is_self: me,
    }
}

#[test]
fn lia_alpha_for_two_equal_paths_is_half() {
    let c = [path(20, 50, true), path(20, 50, false)];
    assert!((lia::lia_alpha(&c) - 0.5).abs() < 1e-9);
}

#[test]
fn lia_grows_slower_than_reno_with_a_second_path() {
    let start = |c: &mut dyn Controller| c.on_loss(Instant::from_millis(1), Instant::ZERO, 0);
    let mut lia = Lia::new(MSS, 40 * MSS);
    let mut reno = NewReno::new(MSS, 40 * MSS);
    start(&mut lia);
    start(&mut reno);
    for _ in 0..200 {
        let c = [path(lia.window() / MSS, 50, true), path(20, 50, false)];
        lia.on_ack(&ack(100, MSS, 50), &c);
        reno.on_ack(&ack(100, MSS, 50), &[]);
    }
    assert!(lia.window() < reno.window());
    assert!(lia.window() > 20 * MSS);
}

#[test]
fn olia_moves_window_towards_the_best_path() {
    // Path 0 has the largest window but path 1 the best loss/RTT history: path 1 (in B\M)
    // gains faster than a lone path would, path 0 (in M) slower.
    let mut small = Olia::new(MSS, 10 * MSS);
    let mut big = Olia::new(MSS, 40 * MSS);
    for c in [&mut small as &mut dyn Controller, &mut big] {
        c.on_loss(Instant::from_millis(1), Instant::ZERO, 0);
    }
    let (w_small, w_big) = (small.window(), big.window());
    for _ in 0..200 {
        let mk = |me_small: bool, s: &Olia, b: &Olia| {
            [
                PathCc {
                    cwnd: b.window(),
                    srtt: Duration::from_millis(50),
                    inter_loss_bytes: 10_000,
                    is_self: !me_small,
                },
                PathCc {
                    cwnd: s.window(),
                    srtt: Duration::from_millis(50),
                    inter_loss_bytes: 1_000_000,
                    is_self: me_small,
                },
            ]
        };
        let c = mk(true, &small, &big);
        small.on_ack(&ack(100, MSS, 50), &c);
        let c = mk(false, &small, &big);
        big.on_ack(&ack(100, MSS, 50), &c);
    }
    assert!(small.window() - w_small > big.window().saturating_sub(w_big));
}
