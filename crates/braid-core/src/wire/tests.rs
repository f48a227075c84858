use super::*;
use proptest::prelude::*;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

fn header() -> Header {
    Header {
        path: PathId(3),
        seq: 70_000,
        timestamp: 0xdead_beef,
    }
}

#[test]
fn packet_with_every_frame_round_trips() {
    let mut ack_storage = Vec::new();
    let ranges = AckRanges::encode(&mut ack_storage, 10, &[(12, 15), (20, 21)]);
    let mut dack_storage = Vec::new();
    let dranges = AckRanges::encode(&mut dack_storage, 1000, &[(2400, 3800)]);
    let frames = vec![
        Frame::Ping,
        Frame::Ack {
            cum: 10,
            ts_echo: 7,
            ranges,
        },
        Frame::DataAck {
            cum: 1000,
            window: 1 << 20,
            ranges: dranges,
        },
        Frame::Data {
            dsn: 5000,
            fin: true,
            payload: b"hello",
        },
        Frame::AddAddr {
            id: AddrId(2),
            backup: true,
            addr: SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), 4433),
        },
        Frame::RemoveAddr {
            id: AddrId(1),
            before: PathId(6),
        },
        Frame::PathOpen {
            local: AddrId(1),
            remote: AddrId(0),
            backup: false,
        },
        Frame::PathPrio {
            path: PathId(2),
            backup: true,
            duplicate: false,
            reinject: false,
            watch: false,
        },
        Frame::PathPrio {
            path: PathId(3),
            backup: true,
            duplicate: true,
            reinject: true,
            watch: true,
        },
        Frame::PathClose {
            path: PathId(4),
            reason: 9,
        },
        Frame::Close { code: 0 },
        Frame::Padding(3),
    ];
    let mut buf = Vec::new();
    emit(&header(), &frames, &mut buf);
    let (h, parsed) = parse(&buf).unwrap();
    assert_eq!(h, header());
    assert_eq!(parsed, frames);
    let r: Vec<_> = match &parsed[1] {
        Frame::Ack { ranges, .. } => ranges.iter().collect(),
        _ => unreachable!(),
    };
    assert_eq!(r, vec![(12, 15), (20, 21)]);
}

#[test]
fn rejects_bad_headers_and_frames() {
    assert_eq!(parse(&[]).unwrap_err(), ParseError::Truncated);
    assert_eq!(
        parse(&[0x30, 0, 0, 0, 0, 0, 0]).unwrap_err(),
        ParseError::Version(3)
    );
    // Version 1 (REMOVE_ADDR without its path bound) is refused, not misread.
    assert_eq!(
        parse(&[0x10, 0, 0, 0, 0, 0, 0]).unwrap_err(),
        ParseError::Version(1)
    );
    assert_eq!(
        parse(&[0x21, 0, 0, 0, 0, 0, 0]).unwrap_err(),
        ParseError::Reserved
    );
    let mut buf = Vec::new();
    header().emit(&mut buf);
    buf.push(0x7f);
    assert_eq!(parse(&buf).unwrap_err(), ParseError::UnknownFrame(0x7f));
    // DATA claiming more payload than there is.
    let mut buf = Vec::new();
    header().emit(&mut buf);
    buf.extend_from_slice(&[frame_type::DATA, 0, 10, 1, 2]);
    assert_eq!(parse(&buf).unwrap_err(), ParseError::Truncated);
    // Too many ACK ranges.
    let mut buf = Vec::new();
    header().emit(&mut buf);
    buf.extend_from_slice(&[frame_type::ACK, 0, 0, 0, 0, 0, 33]);
    assert_eq!(parse(&buf).unwrap_err(), ParseError::BadRanges);
    // Backup flag with reserved bits.
    let mut buf = Vec::new();
    header().emit(&mut buf);
    buf.extend_from_slice(&[frame_type::PATH_OPEN, 0, 0, 0x80]);
    assert_eq!(parse(&buf).unwrap_err(), ParseError::Reserved);
    // The duplicate, reinject and watch flags belong to PATH_PRIO only; PATH_PRIO's other bits
    // stay reserved.
    for flag in [0x02, 0x04, 0x08] {
        let mut buf = Vec::new();
        header().emit(&mut buf);
        buf.extend_from_slice(&[frame_type::PATH_OPEN, 0, 0, flag]);
        assert_eq!(parse(&buf).unwrap_err(), ParseError::Reserved);
    }
    let mut buf = Vec::new();
    header().emit(&mut buf);
    buf.extend_from_slice(&[frame_type::PATH_PRIO, 2, 0x10]);
    assert_eq!(parse(&buf).unwrap_err(), ParseError::Reserved);
}

fn arb_addr() -> impl Strategy<Value = SocketAddr> {
    prop_oneof![
        (any::<[u8; 4]>(), any::<u16>())
            .prop_map(|(ip, port)| SocketAddr::new(IpAddr::V4(Ipv4Addr::from(ip)), port)),
        (any::<[u8; 16]>(), any::<u16>())
            .prop_map(|(ip, port)| SocketAddr::new(IpAddr::V6(Ipv6Addr::from(ip)), port)),
    ]
}

/// A frame description owning its bytes, turned into a borrowed [`Frame`] for emission.
#[derive(Debug, Clone)]
enum OwnedFrame {
    Ping,
    Ack(u64, u32, Vec<(u64, u64)>),
    DataAck(u64, u64, Vec<(u64, u64)>),
    Data(u64, bool, Vec<u8>),
    AddAddr(u8, bool, SocketAddr),
    RemoveAddr(u8, u32),
    PathOpen(u8, u8, bool),
    PathPrio(u32, bool, bool, bool, bool),
    PathClose(u32, u64),
    Close(u64),
}

fn arb_ranges(cum: u64) -> impl Strategy<Value = Vec<(u64, u64)>> {
    prop::collection::vec((0u64..1000, 0u64..1000), 0..MAX_ACK_RANGES).prop_map(move |gl| {
        let mut prev = cum;
        gl.into_iter()
            .map(|(gap, len)| {
                let s = prev + 1 + gap;
                let e = s + 1 + len;
                prev = e;
                (s, e)
            })
            .collect()
    })
}

fn arb_frame() -> impl Strategy<Value = OwnedFrame> {
    let cum = 0u64..(1 << 40);
    prop_oneof![
        Just(OwnedFrame::Ping),
        (cum.clone(), any::<u32>())
            .prop_flat_map(|(c, ts)| arb_ranges(c).prop_map(move |r| OwnedFrame::Ack(c, ts, r))),
        (cum, 0u64..(1 << 40))
            .prop_flat_map(|(c, w)| arb_ranges(c).prop_map(move |r| OwnedFrame::DataAck(c, w, r))),
        (
            0u64..(1 << 50),
            any::<bool>(),
            prop::collection::vec(any::<u8>(), 0..300)
        )
            .prop_map(|(d, f, p)| OwnedFrame::Data(d, f, p)),
        (any::<u8>(), any::<bool>(), arb_addr()).prop_map(|(i, b, a)| OwnedFrame::AddAddr(i, b, a)),
        (any::<u8>(), any::<u32>()).prop_map(|(i, b)| OwnedFrame::RemoveAddr(i, b)),
        (any::<u8>(), any::<u8>(), any::<bool>())
            .prop_map(|(l, r, b)| OwnedFrame::PathOpen(l, r, b)),
        (
            any::<u32>(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>()
        )
            .prop_map(|(p, b, d, r, w)| OwnedFrame::PathPrio(p, b, d, r, w)),
        (any::<u32>(), 0u64..varint::MAX).prop_map(|(p, r)| OwnedFrame::PathClose(p, r)),
        (0u64..varint::MAX).prop_map(OwnedFrame::Close),
    ]
}

fn emit_owned(h: &Header, frames: &[OwnedFrame]) -> Vec<u8> {
    let mut out = Vec::new();
    h.emit(&mut out);
    for f in frames {
        match f {
            OwnedFrame::Ping => Frame::Ping.emit(&mut out),
            OwnedFrame::Ack(c, ts, r) => emit_ack(&mut out, *c, *ts, r.iter().copied()),
            OwnedFrame::DataAck(c, w, r) => emit_data_ack(&mut out, *c, *w, r.iter().copied()),
            OwnedFrame::Data(d, fin, p) => Frame::Data {
                dsn: *d,
                fin: *fin,
                payload: p,
            }
            .emit(&mut out),
            OwnedFrame::AddAddr(i, b, a) => Frame::AddAddr {
                id: AddrId(*i),
                backup: *b,
                addr: *a,
            }
            .emit(&mut out),
            OwnedFrame::RemoveAddr(i, b) => Frame::RemoveAddr {
                id: AddrId(*i),
                before: PathId(*b),
            }
            .emit(&mut out),
            OwnedFrame::PathOpen(l, r, b) => Frame::PathOpen {
                local: AddrId(*l),
                remote: AddrId(*r),
                backup: *b,
            }
            .emit(&mut out),
            OwnedFrame::PathPrio(p, b, d, r, w) => Frame::PathPrio {
                path: PathId(*p),
                backup: *b,
                duplicate: *d,
                reinject: *r,
                watch: *w,
            }
            .emit(&mut out),
            OwnedFrame::PathClose(p, r) => Frame::PathClose {
                path: PathId(*p),
                reason: *r,
            }
            .emit(&mut out),
            OwnedFrame::Close(c) => Frame::Close { code: *c }.emit(&mut out),
        }
    }
    out
}

fn frame_matches(owned: &OwnedFrame, f: &Frame<'_>) -> bool {
    match (owned, f) {
        (OwnedFrame::Ping, Frame::Ping) => true,
        (
            OwnedFrame::Ack(c, ts, r),
            Frame::Ack {
                cum,
                ts_echo,
                ranges,
            },
        ) => c == cum && ts == ts_echo && ranges.iter().eq(r.iter().copied()),
        (
            OwnedFrame::DataAck(c, w, r),
            Frame::DataAck {
                cum,
                window,
                ranges,
            },
        ) => c == cum && w == window && ranges.iter().eq(r.iter().copied()),
        (OwnedFrame::Data(d, fin2, p), Frame::Data { dsn, fin, payload }) => {
            d == dsn && fin2 == fin && p.as_slice() == *payload
        }
        (OwnedFrame::AddAddr(i, b, a), Frame::AddAddr { id, backup, addr }) => {
            *i == id.0 && b == backup && a == addr
        }
        (OwnedFrame::RemoveAddr(i, b), Frame::RemoveAddr { id, before }) => {
            *i == id.0 && *b == before.0
        }
        (
            OwnedFrame::PathOpen(l, r, b),
            Frame::PathOpen {
                local,
                remote,
                backup,
            },
        ) => *l == local.0 && *r == remote.0 && b == backup,
        (
            OwnedFrame::PathPrio(p, b, d, r, w),
            Frame::PathPrio {
                path,
                backup,
                duplicate,
                reinject,
                watch,
            },
        ) => *p == path.0 && b == backup && d == duplicate && r == reinject && w == watch,
        (OwnedFrame::PathClose(p, r), Frame::PathClose { path, reason }) => {
            *p == path.0 && r == reason
        }
        (OwnedFrame::Close(c), Frame::Close { code }) => c == code,
        _ => false,
    }
}

proptest! {
    /// Encode → decode gives back the values.
    #[test]
    fn encode_decode_round_trip(
        path in any::<u32>(),
        seq in 0u64..varint::MAX,
        ts in any::<u32>(),
        frames in prop::collection::vec(arb_frame(), 0..8),
    ) {
        let h = Header { path: PathId(path), seq, timestamp: ts };
        let bytes = emit_owned(&h, &frames);
        let (h2, parsed) = parse(&bytes).expect("valid packet parses");
        prop_assert_eq!(h2, h);
        prop_assert_eq!(parsed.len(), frames.len());
        for (o, f) in frames.iter().zip(&parsed) {
            prop_assert!(frame_matches(o, f), "{:?} != {:?}", o, f);
        }
        // And decode → encode gives back the bytes.
        let mut again = Vec::new();
        emit(&h2, &parsed, &mut again);
        prop_assert_eq!(again, bytes);
    }

    /// Arbitrary bytes never panic the parser, and whatever parses re-encodes to the same bytes.
    #[test]
    fn decode_encode_identity_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        if let Ok((h, frames)) = parse(&bytes) {
            let mut again = Vec::new();
            emit(&h, &frames, &mut again);
            prop_assert_eq!(again, bytes);
        }
    }

    /// Valid packets with bytes flipped or cut never panic the parser.
    #[test]
    fn mutated_packets_never_panic(
        frames in prop::collection::vec(arb_frame(), 1..6),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = emit_owned(&header(), &frames);
        for (i, v) in flips {
            let i = i.index(bytes.len());
            bytes[i] ^= v;
        }
        let cut = cut.index(bytes.len() + 1);
        bytes.truncate(cut);
        if let Ok((h, frames)) = parse(&bytes) {
            let mut again = Vec::new();
            emit(&h, &frames, &mut again);
            prop_assert_eq!(again, bytes);
        }
    }
}
