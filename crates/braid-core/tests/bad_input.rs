//! Arbitrary bytes never panic the core: random datagrams and corrupted copies of real ones are
//! fed to both endpoints in the middle of a transfer.

mod util;

use braid_core::{Config, Instant};
use proptest::prelude::*;
use util::{Link, Pair, pattern};

/// Real datagrams of a two-path transfer, both directions.
fn captured() -> Vec<Vec<u8>> {
    let links = vec![Link::new(5).rate_mbit(20), Link::new(9).rate_mbit(20)];
    let mut p = Pair::new(Config::default(), links, 3);
    p.capture = Some(Vec::new());
    p.open_all(&[false, true]);
    let data = pattern(300_000, 1);
    let mut pos = 0;
    p.run_until_with(Instant::from_millis(2_000), |p| {
        if pos < data.len() {
            pos += p.client.write(&data[pos..]);
        }
    });
    p.capture.take().unwrap()
}

/// A two-path transfer in progress, with the writer that keeps it going.
fn mid_transfer() -> (Pair, impl FnMut(&mut Pair), Vec<u8>) {
    let links = vec![Link::new(5).rate_mbit(20), Link::new(9).rate_mbit(20)];
    let mut p = Pair::new(Config::default(), links, 5);
    p.open_all(&[]);
    let data = pattern(400_000, 2);
    let expected = data.clone();
    let mut pos = 0;
    let mut feed = move |p: &mut Pair| {
        if pos < data.len() {
            pos += p.client.write(&data[pos..]);
        }
    };
    p.run_until_with(Instant::from_millis(100), &mut feed);
    (p, feed, expected)
}

#[derive(Debug, Clone)]
enum Bad {
    Random(Vec<u8>),
    Mutated {
        index: prop::sample::Index,
        flips: Vec<(prop::sample::Index, u8)>,
        cut: prop::sample::Index,
    },
}

fn bad() -> impl Strategy<Value = Bad> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..1500).prop_map(Bad::Random),
        // Random bytes that pass the version check, to reach the frame parser.
        prop::collection::vec(any::<u8>(), 0..200).prop_map(|mut v| {
            if !v.is_empty() {
                v[0] = braid_core::wire::VERSION << 4;
            }
            Bad::Random(v)
        }),
        (
            any::<prop::sample::Index>(),
            prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4),
            any::<prop::sample::Index>(),
        )
            .prop_map(|(index, flips, cut)| Bad::Mutated { index, flips, cut }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Corrupted and random datagrams never panic either endpoint. When every one of them is
    /// rejected (dropped and counted), the transfer completes exactly as without them.
    #[test]
    fn bad_datagrams_never_panic(inputs in prop::collection::vec(bad(), 1..200), to_server in any::<bool>()) {
        let real = captured();
        let (mut p, mut feed, expected) = mid_transfer();
        let mut all_rejected = true;
        let dropped_before = p.server.stats().dropped.total() + p.client.stats().dropped.total();
        for b in &inputs {
            let d = match b {
                Bad::Random(v) => v.clone(),
                Bad::Mutated { index, flips, cut } => {
                    let mut v = real[index.index(real.len())].clone();
                    for (i, x) in flips {
                        let i = i.index(v.len());
                        v[i] ^= x;
                    }
                    v.truncate(cut.index(v.len() + 1));
                    v
                }
            };
            let conn = if to_server { &mut p.server } else { &mut p.client };
            all_rejected &= conn.handle_datagram(p.now, &d).is_err();
            // Every input is followed by the usual outputs.
            let mut buf = Vec::new();
            while conn.poll_transmit(p.now, &mut buf).is_some() {}
            while conn.poll_event().is_some() {}
        }
        p.run_until_with(Instant::from_millis(30_000), &mut feed);
        if all_rejected {
            let dropped = p.server.stats().dropped.total() + p.client.stats().dropped.total();
            prop_assert_eq!(dropped - dropped_before, inputs.len() as u64);
            prop_assert!(p.server_received == expected);
        }
    }
}

#[test]
fn truncations_of_every_real_datagram_are_rejected() {
    let real = captured();
    let (mut p, _, _) = mid_transfer();
    for d in real.iter().take(400) {
        for cut in 0..d.len() {
            // A prefix either parses (it ended on a frame boundary) or is dropped; never panics.
            let _ = p.server.handle_datagram(p.now, &d[..cut]);
            let _ = p.client.handle_datagram(p.now, &d[..cut]);
        }
    }
    assert!(p.server.stats().dropped.malformed > 0);
}

/// Hands the server a datagram of path 0 with packet number `seq` and one frame, as the peer
/// would; returns whether it was taken.
fn forge(p: &mut Pair, seq: u64, frame: braid_core::wire::Frame<'_>) -> bool {
    use braid_core::wire::{self, Header, PathId};
    let h = Header {
        path: PathId(0),
        seq,
        timestamp: 0,
    };
    let mut d = Vec::new();
    wire::emit(&h, &[frame], &mut d);
    p.server.handle_datagram(p.now, &d).is_ok()
}

/// After `forged` datagrams of which `refused` were not taken: each refusal was counted as a
/// hole too many, and the server kept about `bound` of them (at most, and at most 64 fewer:
/// the transfer's own reordering may hold a few already).
fn kept_to_the_bound(p: &Pair, forged: u64, refused: u64, bound: u64) {
    let holes = p.server.stats().dropped.too_many_holes;
    assert_eq!(holes, refused, "every refusal counted as a hole too many");
    let kept = forged - holes;
    assert!(
        kept <= bound && kept + 64 >= bound,
        "{kept} forged datagrams kept (at most {bound}), {holes} refused"
    );
}

/// A peer that skips packet numbers on purpose leaves a hole per packet: the receiver keeps at
/// most MAX_RX_RANGES of them (the packets that would open more are dropped and counted) and
/// refuses numbers more than MAX_RX_AHEAD above the path's cumulative point; the transfer in
/// progress is unharmed.
#[test]
fn packet_numbers_skipped_on_purpose_cannot_grow_the_receiver_without_end() {
    use braid_core::connection::{MAX_RX_AHEAD, MAX_RX_RANGES};
    use braid_core::wire::Frame;
    let (mut p, mut feed, expected) = mid_transfer();
    // Far above anything the transfer will number, every other number.
    let forged = 6000u64;
    let base = MAX_RX_AHEAD / 2;
    let refused = (0..forged)
        .filter(|k| !forge(&mut p, base + 2 * k, Frame::Ping))
        .count() as u64;
    kept_to_the_bound(&p, forged, refused, MAX_RX_RANGES as u64);
    let protocol = p.server.stats().dropped.protocol;
    assert!(!forge(&mut p, base + MAX_RX_AHEAD, Frame::Ping));
    assert_eq!(p.server.stats().dropped.protocol, protocol + 1);
    p.run_until_with(Instant::from_millis(30_000), &mut feed);
    assert!(
        p.server_received == expected,
        "the transfer completes intact"
    );
}

/// A peer that sends the stream in one-byte pieces a byte apart, out of order: each piece
/// would cost the receiver its own allocation and map entry (50–90 times the window in
/// memory). The receiver holds at most one piece per 512 bytes of its buffer; a datagram with
/// a piece beyond is dropped before it is acknowledged (the sender resends it as a lost one),
/// and the transfer in progress is unharmed.
#[test]
fn stream_pieces_a_byte_apart_cannot_hold_many_times_the_window() {
    use braid_core::wire::Frame;
    let (mut p, mut feed, expected) = mid_transfer();
    let max_pieces = (Config::default().receive_buffer / 512).max(256);
    // Beyond the transfer's 400 kB, within the 4 MB window; path numbers far above the
    // transfer's, in a row.
    let forged = max_pieces + 2000;
    let base = 1 << 20;
    let refused = (0..forged)
        .filter(|k| {
            let piece = Frame::Data {
                dsn: base + 2 * k,
                fin: false,
                payload: &[7],
            };
            !forge(&mut p, (1 << 21) + k, piece)
        })
        .count() as u64;
    kept_to_the_bound(&p, forged, refused, max_pieces);
    p.run_until_with(Instant::from_millis(30_000), &mut feed);
    assert!(
        p.server_received == expected,
        "the transfer completes intact"
    );
}

/// Found by `cargo fuzz run connection_datagram`: a forged DATA_ACK acknowledging bytes that
/// were written but never sent made the sender release them and then read the released range.
#[test]
fn data_ack_beyond_what_was_sent_is_refused() {
    use braid_core::{AddrId, Connection, Side};
    use std::sync::Arc;
    let cfg = Arc::new(Config::default());
    let mut client = Connection::new(cfg, Side::Client, Instant::ZERO);
    client
        .open_path(Instant::ZERO, AddrId(0), AddrId(0), false)
        .unwrap();
    assert_eq!(client.write(&[240, 35]), 2);
    let t = Instant::from_millis(1);
    // Header (path 0, seq 25), DATA_ACK cum=2 window=0, PATH_OPEN.
    let forged = [
        braid_core::wire::VERSION << 4,
        0,
        25,
        0,
        16,
        245,
        37,
        3,
        2,
        0,
        0,
        8,
        0,
        0,
        0,
    ];
    assert!(client.handle_datagram(t, &forged).is_ok());
    assert_eq!(
        client.stats().dropped.protocol,
        1,
        "the DATA_ACK is refused"
    );
    let mut buf = Vec::new();
    while client.poll_transmit(t, &mut buf).is_some() {}
    assert_eq!(client.send_buffered(), 2, "unsent bytes are kept");
}
