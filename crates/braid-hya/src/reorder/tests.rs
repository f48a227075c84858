use super::*;
use proptest::prelude::*;

fn ms(x: u64) -> Instant {
    Instant::from_micros(x * 1000)
}

fn cfg(ofo_ms: u64, inseq_ms: u64) -> Config {
    Config {
        ofo_timeout: Duration::from_millis(ofo_ms),
        inseq_timeout: Duration::from_millis(inseq_ms),
        ..Config::default()
    }
}

fn drain<T>(r: &mut Reorder<T>) -> Vec<(T, Duration)> {
    std::iter::from_fn(|| r.pop()).collect()
}

#[test]
fn in_sequence_packets_pass_at_once_without_an_inseq_timeout() {
    let mut r = Reorder::new(cfg(10, 0));
    for s in 0..5 {
        r.push(ms(s), s, s).unwrap();
        assert_eq!(drain(&mut r), vec![(s, Duration::ZERO)]);
    }
    assert_eq!(r.poll_timeout(), None);
}

#[test]
fn in_sequence_packets_wait_the_inseq_timeout_or_a_full_batch() {
    let mut r = Reorder::new(Config {
        batch: 3,
        ..cfg(10, 1)
    });
    r.push(ms(0), 0, 'a').unwrap();
    assert!(r.pop().is_none());
    assert_eq!(r.poll_timeout(), Some(ms(1)));
    r.handle_timeout(ms(1));
    assert_eq!(drain(&mut r), vec![('a', Duration::from_millis(1))]);
    // A batch of three goes at once.
    for (s, c) in [(1, 'b'), (2, 'c'), (3, 'd')] {
        r.push(ms(5), s, c).unwrap();
    }
    assert_eq!(
        drain(&mut r).into_iter().map(|x| x.0).collect::<String>(),
        "bcd"
    );
}

#[test]
fn a_late_predecessor_releases_what_waited_behind_it() {
    let mut r = Reorder::new(cfg(10, 0));
    r.push(ms(0), 1, 1).unwrap();
    r.push(ms(1), 2, 2).unwrap();
    assert!(r.pop().is_none());
    assert_eq!(r.poll_timeout(), Some(ms(10)));
    r.push(ms(3), 0, 0).unwrap();
    assert_eq!(
        drain(&mut r),
        vec![
            (0, Duration::ZERO),
            (1, Duration::from_millis(3)),
            (2, Duration::from_millis(2)),
        ]
    );
    assert_eq!(r.stats().skipped, 0);
    assert_eq!(r.poll_timeout(), None);
}

#[test]
fn a_lost_packet_costs_at_most_the_ofo_timeout_and_is_counted() {
    let mut r = Reorder::new(cfg(10, 0));
    r.push(ms(0), 0, 0).unwrap();
    r.push(ms(1), 2, 2).unwrap();
    r.push(ms(4), 3, 3).unwrap();
    r.push(ms(6), 5, 5).unwrap();
    drain(&mut r);
    r.handle_timeout(ms(10));
    assert!(r.pop().is_none(), "nothing waited 10 ms yet");
    r.handle_timeout(ms(11));
    // 1 given up; 2 and 3 released; 5 still waits for 4 (it came at 6 ms).
    assert_eq!(
        drain(&mut r),
        vec![
            (2, Duration::from_millis(10)),
            (3, Duration::from_millis(7))
        ]
    );
    assert_eq!(r.stats().skipped, 1);
    assert_eq!(r.poll_timeout(), Some(ms(16)));
    r.handle_timeout(ms(16));
    assert_eq!(drain(&mut r), vec![(5, Duration::from_millis(10))]);
    assert_eq!(r.stats().skipped, 2);
    assert_eq!(r.stats().ofo_timeouts, 2);
    // The given-up ones arriving now are late: out at once, out of order. A released one
    // again, or a late one again, is a replay.
    r.push(ms(20), 4, 4).unwrap();
    r.push(ms(20), 1, 1).unwrap();
    assert_eq!(
        drain(&mut r),
        vec![(4, Duration::ZERO), (1, Duration::ZERO)]
    );
    assert_eq!(r.push(ms(20), 3, 3), Err(Reject::Replayed));
    assert_eq!(r.push(ms(20), 1, 1), Err(Reject::Replayed));
    assert_eq!(r.stats().late, 2);
    assert_eq!(r.stats().replayed, 2);
    assert_eq!(r.stats().accepted, r.stats().released);
}

#[test]
fn the_oldest_arrival_sets_the_timeout_not_the_lowest_number() {
    let mut r = Reorder::new(cfg(10, 0));
    r.push(ms(0), 3, 3).unwrap();
    r.push(ms(5), 1, 1).unwrap();
    // At 10 ms, 3 waited 10 ms: holes 0 and 2 are given up, 1 and 3 go.
    r.handle_timeout(ms(10));
    assert_eq!(
        drain(&mut r).into_iter().map(|x| x.0).collect::<Vec<_>>(),
        vec![1, 3]
    );
    assert_eq!(r.stats().skipped, 2);
    assert_eq!(r.next_seq(), 4);
}

#[test]
fn duplicates_and_numbers_beyond_the_window_are_refused() {
    let mut r = Reorder::new(Config {
        window: 100,
        ..cfg(10, 0)
    });
    r.push(ms(0), 5, 5).unwrap();
    assert_eq!(r.push(ms(0), 5, 5), Err(Reject::Replayed));
    assert_eq!(r.push(ms(0), 100, 0), Err(Reject::OutOfWindow));
    assert_eq!(r.push(ms(0), u64::MAX, 0), Err(Reject::OutOfWindow));
    r.push(ms(0), 99, 99).unwrap();
    assert_eq!(r.stats().out_of_window, 2);
    assert_eq!(r.len(), 2);
    // Older than the history: cannot be told from a replay, refused.
    r.flush(ms(1));
    let mut r2 = Reorder::new(Config {
        window: 2 * HISTORY,
        ..cfg(0, 0)
    });
    r2.push(ms(0), HISTORY + 10, 0).unwrap();
    r2.handle_timeout(ms(0));
    assert_eq!(r2.push(ms(1), 5, 0), Err(Reject::OutOfWindow));
    assert_eq!(r2.push(ms(1), 15, 0), Ok(()), "late, within the history");
}

#[test]
fn a_full_buffer_gives_up_the_first_hole() {
    let mut r = Reorder::new(Config {
        capacity: 3,
        ..cfg(10, 0)
    });
    for s in [1, 2, 4, 5] {
        r.push(ms(0), s, s).unwrap();
    }
    // Four held > 3: hole 0 given up, 1 and 2 released; 4 and 5 wait for 3.
    assert_eq!(
        drain(&mut r).into_iter().map(|x| x.0).collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert_eq!(r.stats().overflows, 1);
    assert_eq!(r.stats().skipped, 1);
    r.flush(ms(1));
    assert_eq!(
        drain(&mut r).into_iter().map(|x| x.0).collect::<Vec<_>>(),
        vec![4, 5]
    );
    assert_eq!(r.stats().skipped, 2);
    assert!(r.is_empty());
}

proptest! {
    /// Packets sent every 100 µs over two paths of different random delays, some lost: the
    /// buffer, woken exactly when it asks, releases numbers in order but for those it counts
    /// late, each accepted packet exactly once, none held longer than the larger timeout, and
    /// every number is released in order, given up, or given up and then released late.
    #[test]
    fn releases_in_order_once_within_the_timeouts(
        ofo_ms in 1u64..20,
        inseq_us in 0u64..2000,
        plan in proptest::collection::vec((any::<bool>(), 0u64..30_000, 0u8..100), 1..400),
    ) {
        let cfg = Config {
            ofo_timeout: Duration::from_millis(ofo_ms),
            inseq_timeout: Duration::from_micros(inseq_us),
            batch: 16,
            ..Config::default()
        };
        let bound = cfg.ofo_timeout.max(cfg.inseq_timeout);
        let mut arrivals: Vec<(Instant, u64)> = plan
            .iter()
            .enumerate()
            .filter(|(_, (_, _, loss))| *loss >= 10)
            .map(|(i, (slow, jitter, _))| {
                let sent = 100 * i as u64;
                let delay = if *slow { 20_000 } else { 5_000 } + jitter;
                (Instant::from_micros(sent + delay), i as u64)
            })
            .collect();
        arrivals.sort();
        let mut r = Reorder::new(cfg);
        let mut got = Vec::new();
        let step = |r: &mut Reorder<u64>, got: &mut Vec<u64>| -> Result<(), TestCaseError> {
            while let Some((s, held)) = r.pop() {
                prop_assert!(held <= bound, "held {held:?} > {bound:?}");
                got.push(s);
            }
            Ok(())
        };
        for (t, s) in arrivals.iter().copied() {
            while let Some(d) = r.poll_timeout().filter(|d| *d <= t) {
                r.handle_timeout(d);
                step(&mut r, &mut got)?;
            }
            let _ = r.push(t, s, s);
            step(&mut r, &mut got)?;
        }
        while let Some(d) = r.poll_timeout() {
            r.handle_timeout(d);
            step(&mut r, &mut got)?;
        }
        // In order but for the late ones: the longest increasing run leaves out at most those.
        let mut tails: Vec<u64> = Vec::new();
        for &s in &got {
            match tails.binary_search(&s) {
                Ok(_) => {}
                Err(i) if i == tails.len() => tails.push(s),
                Err(i) => tails[i] = s,
            }
        }
        let st = *r.stats();
        prop_assert!(
            got.len() - tails.len() <= st.late as usize,
            "{} out of order, {} late: {:?}", got.len() - tails.len(), st.late, got
        );
        let mut once = got.clone();
        once.sort_unstable();
        once.dedup();
        prop_assert_eq!(once.len(), got.len());
        prop_assert_eq!(st.released, got.len() as u64);
        prop_assert_eq!(st.accepted, st.released);
        prop_assert_eq!(st.released - st.late + st.skipped, r.next_seq());
        prop_assert!(r.is_empty());
    }
}
