//! The QoE / priority scheduler (seed 004 App. B) in a connection: every byte arrives, and
//! the application priority, per connection or per write, reaches the scheduler.

mod util;

use std::sync::Arc;

use braid_core::scheduler::{Kind, Priority};
use braid_core::{Config, Instant};
use util::{Link, Pair, pattern};

fn ms(v: u64) -> Instant {
    Instant::from_millis(v)
}

/// Two lossy 10 Mbit/s paths (20 and 40 ms RTT, 3 % loss).
fn lossy() -> Vec<Link> {
    let mut links = vec![Link::new(10).rate_mbit(10), Link::new(20).rate_mbit(10)];
    for l in &mut links {
        l.loss = 0.03;
    }
    links
}

fn config(scheduler: &str) -> Config {
    Config {
        scheduler: Kind::parse(scheduler).unwrap().factory(),
        ..Config::default()
    }
}

/// Sends `data` with `scheduler`, each write with `per_write` if set; returns the time the
/// last byte was read and the pair.
fn transfer(scheduler: &str, per_write: Option<u8>, data: &[u8]) -> (Instant, Pair) {
    let mut p = Pair::new(config(scheduler), lossy(), 5);
    p.open_all(&[]);
    let mut pos = 0;
    let data = Arc::new(data.to_vec());
    let feed = {
        let data = data.clone();
        move |p: &mut Pair| {
            if pos < data.len() {
                pos += match per_write.and_then(Priority::new) {
                    Some(pr) => p.client.write_with_priority(&data[pos..], pr),
                    None => p.client.write(&data[pos..]),
                };
                if pos == data.len() {
                    p.client.finish();
                }
            }
        }
    };
    p.run_until_with(ms(120_000), feed);
    assert!(
        p.server_received == *data,
        "{scheduler} {per_write:?}: stream differs"
    );
    (p.server_reads.last().unwrap().0, p)
}

#[test]
fn every_byte_arrives_at_every_priority() {
    let data = pattern(1_500_000, 9);
    for s in ["qoe", "qoe:priority=3", "qoe:priority=6"] {
        let (_, p) = transfer(s, None, &data);
        assert!(p.client.paths().all(|i| i.stats.acks > 0), "{s}");
    }
}

#[test]
fn low_priority_yields_on_lossy_paths_and_per_write_priority_reaches_the_scheduler() {
    let data = pattern(3_000_000, 4);
    let (high, _) = transfer("qoe", None, &data);
    let (low, _) = transfer("qoe:priority=6", None, &data);
    let (minrtt, _) = transfer("minrtt", None, &data);
    eprintln!(
        "3 MB over 2 × 10 Mbit/s, 3 % loss: priority 1 {:.2} s, priority 6 {:.2} s, minRTT {:.2} s",
        high.secs_f64(),
        low.secs_f64(),
        minrtt.secs_f64()
    );
    // 3 % loss drives both paths' if_quality into the bad band (−100 per fast retransmit,
    // +1 per ACK), where priority 6 may fill an eighth of each window and priority 1 all of it.
    assert!(
        low.secs_f64() > 2.0 * high.secs_f64(),
        "priority 6 {:.2} s, priority 1 {:.2} s",
        low.secs_f64(),
        high.secs_f64()
    );
    // The same priority given per write, or per connection, is the same schedule.
    let (per_write, _) = transfer("qoe", Some(6), &data);
    assert_eq!(per_write, low);
    let mut p = Pair::new(config("qoe"), lossy(), 5);
    p.client.set_priority(Priority::new(6));
    p.open_all(&[]);
    let mut pos = 0;
    p.run_until_with(ms(120_000), |p: &mut Pair| {
        if pos < data.len() {
            pos += p.client.write(&data[pos..]);
            if pos == data.len() {
                p.client.finish();
            }
        }
    });
    assert!(p.server_received == data);
    assert_eq!(p.server_reads.last().unwrap().0, low);
    // And an application priority of 1 overrides the scheduler's 6.
    let (overridden, _) = transfer("qoe:priority=6", Some(1), &data);
    assert_eq!(overridden, high);
}
