use std::net::{IpAddr, SocketAddr};

use proptest::prelude::*;

use super::*;

fn sa(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// A datagram of one netlink message of type `family` carrying event `kind`.
fn message(family: u16, kind: u8, attrs: &[u8]) -> Vec<u8> {
    let len = (16 + 4 + attrs.len()) as u32;
    let mut m = Vec::new();
    m.extend(len.to_ne_bytes());
    m.extend(family.to_ne_bytes());
    m.extend(0u16.to_ne_bytes());
    m.extend(0u32.to_ne_bytes());
    m.extend(0u32.to_ne_bytes());
    m.extend([kind, 1, 0, 0]);
    m.extend(attrs);
    m
}

/// SUB_ESTABLISHED as `mptcp_event_add_subflow()` lays it out (6.18), by hand.
fn kernel_sub_established() -> Vec<u8> {
    attr::emit_attrs(&[
        Attr::U32(EV_ATTR_TOKEN, 338_277_916),
        Attr::U16(EV_ATTR_FAMILY, AF_INET),
        Attr::U8(EV_ATTR_LOC_ID, 23),
        Attr::U8(EV_ATTR_REM_ID, 5),
        Attr::Bytes(EV_ATTR_SADDR4, vec![10, 0, 2, 2]),
        Attr::Bytes(EV_ATTR_DADDR4, vec![10, 0, 2, 1]),
        Attr::Bytes(EV_ATTR_SPORT, 50797u16.to_be_bytes().to_vec()),
        Attr::Bytes(EV_ATTR_DPORT, 10100u16.to_be_bytes().to_vec()),
        Attr::U8(EV_ATTR_BACKUP, 1),
        Attr::I32(EV_ATTR_IF_IDX, 3),
        Attr::U32(99, 7), // a newer attribute
    ])
}

#[test]
fn decodes_a_kernel_subflow_event() {
    let e = PmEvent::parse(EVENT_SUB_ESTABLISHED, &kernel_sub_established()).unwrap();
    let want = SubflowInfo {
        token: Token(338_277_916),
        local: sa("10.0.2.2:50797"),
        remote: sa("10.0.2.1:10100"),
        local_id: 23,
        remote_id: 5,
        backup: true,
        ifindex: Some(3),
        error: None,
        reset: None,
    };
    assert_eq!(e, PmEvent::SubEstablished(want));
    assert_eq!(e.token(), Some(Token(338_277_916)));
}

#[test]
fn server_side_from_either_attribute() {
    let base = |extra: Vec<Attr>| {
        let mut v = vec![Attr::U32(EV_ATTR_TOKEN, 1)];
        push_four_tuple(&mut v, sa("10.0.1.1:1"), sa("10.0.1.2:2"));
        v.extend(extra);
        PmEvent::parse(EVENT_CREATED, &attr::emit_attrs(&v)).unwrap()
    };
    let side = |e: PmEvent| match e {
        PmEvent::Created(c) => (c.server_side, c.deny_join_id0),
        other => panic!("{other:?}"),
    };
    assert_eq!(side(base(vec![])), (false, false));
    assert_eq!(
        side(base(vec![Attr::U8(EV_ATTR_SERVER_SIDE, 1)])),
        (true, false)
    );
    assert_eq!(
        side(base(vec![Attr::U16(EV_ATTR_FLAGS, EV_FLAG_SERVER_SIDE)])),
        (true, false)
    );
    assert_eq!(
        side(base(vec![Attr::U16(EV_ATTR_FLAGS, EV_FLAG_DENY_JOIN_ID0)])),
        (false, true)
    );
}

#[test]
fn malformed_and_unknown() {
    // Token of 3 bytes.
    let bad = attr::emit_attrs(&[Attr::Bytes(EV_ATTR_TOKEN, vec![1, 2, 3])]);
    assert!(matches!(
        PmEvent::parse(EVENT_CLOSED, &bad),
        Err(ParseError::BadLength {
            expected: 4,
            got: 3,
            ..
        })
    ));
    assert_eq!(
        PmEvent::parse(EVENT_CLOSED, &[]),
        Err(ParseError::Missing("MPTCP_ATTR_TOKEN"))
    );
    // A newer event type is not an error.
    assert_eq!(PmEvent::parse(42, &[]), Ok(PmEvent::Unknown { kind: 42 }));
}

#[test]
fn decodes_datagrams() {
    let sub = kernel_sub_established();
    let mut d = message(0x1d, EVENT_SUB_ESTABLISHED, &sub);
    d.extend(message(
        0x1d,
        EVENT_CLOSED,
        &attr::emit_attrs(&[Attr::U32(EV_ATTR_TOKEN, 9)]),
    ));
    d.extend(message(0x10, EVENT_CLOSED, &[])); // another family
    d.extend(message(0x1d, EVENT_CLOSED, &[])); // no token
    let r = PmEvent::decode_datagram(&d, 0x1d);
    assert_eq!(r.len(), 4);
    assert!(matches!(r[0], Ok(PmEvent::SubEstablished(_))));
    assert_eq!(r[1], Ok(PmEvent::Closed { token: Token(9) }));
    assert!(r[2].is_err() && r[3].is_err());
    // Cut inside the generic-netlink header, and inside the netlink header.
    let short = message(0x1d, 1, &[]);
    let mut cut = short[..18].to_vec();
    cut[0] = 18;
    assert!(PmEvent::decode_datagram(&cut, 0x1d)[0].is_err());
    assert!(PmEvent::decode_datagram(&short[..10], 0x1d)[0].is_err());
}

fn ip() -> impl Strategy<Value = IpAddr> {
    prop_oneof![
        any::<[u8; 4]>().prop_map(IpAddr::from),
        any::<[u8; 16]>().prop_map(IpAddr::from)
    ]
}

fn sock() -> impl Strategy<Value = SocketAddr> {
    (ip(), any::<u16>()).prop_map(|(a, p)| SocketAddr::new(a, p))
}

fn conn() -> impl Strategy<Value = ConnInfo> {
    (any::<u32>(), sock(), sock(), any::<bool>(), any::<bool>()).prop_map(
        |(t, local, remote, s, d)| ConnInfo {
            token: Token(t),
            local,
            remote,
            server_side: s,
            deny_join_id0: d,
        },
    )
}

fn subflow() -> impl Strategy<Value = SubflowInfo> {
    (
        (
            any::<u32>(),
            sock(),
            sock(),
            any::<u8>(),
            any::<u8>(),
            any::<bool>(),
        ),
        (
            proptest::option::of(1..=i32::MAX as u32),
            any::<Option<u8>>(),
            any::<Option<(u32, u32)>>(),
        ),
    )
        .prop_map(
            |((t, local, remote, l, r, backup), (ifindex, error, reset))| SubflowInfo {
                token: Token(t),
                local,
                remote,
                local_id: l,
                remote_id: r,
                backup,
                ifindex,
                error,
                reset: reset.map(|(reason, flags)| Reset { reason, flags }),
            },
        )
}

fn event() -> impl Strategy<Value = PmEvent> {
    let token = any::<u32>().prop_map(Token);
    let known = [1u8, 2, 3, 6, 7, 10, 11, 13, 15, 16];
    prop_oneof![
        conn().prop_map(PmEvent::Created),
        conn().prop_map(PmEvent::Established),
        token.clone().prop_map(|token| PmEvent::Closed { token }),
        (token.clone(), any::<u8>(), ip(), any::<Option<u16>>()).prop_map(
            |(token, remote_id, addr, port)| {
                PmEvent::Announced {
                    token,
                    remote_id,
                    addr,
                    port,
                }
            }
        ),
        (token, any::<u8>()).prop_map(|(token, remote_id)| PmEvent::Removed { token, remote_id }),
        subflow().prop_map(PmEvent::SubEstablished),
        subflow().prop_map(PmEvent::SubClosed),
        subflow().prop_map(PmEvent::SubPriority),
        sock().prop_map(|addr| PmEvent::ListenerCreated { addr }),
        sock().prop_map(|addr| PmEvent::ListenerClosed { addr }),
        any::<u8>()
            .prop_filter("an unknown type", move |k| !known.contains(k))
            .prop_map(|kind| PmEvent::Unknown { kind }),
    ]
}

proptest! {
    #[test]
    fn events_round_trip(e in event()) {
        let bytes = e.to_bytes();
        prop_assert_eq!(PmEvent::parse(e.number(), &bytes), Ok(e));
        let d = message(0x1d, e.number(), &bytes);
        prop_assert_eq!(PmEvent::decode_datagram(&d, 0x1d), vec![Ok(e)]);
    }

    #[test]
    fn arbitrary_bytes_never_panic(kind: u8, bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = PmEvent::parse(kind, &bytes);
        let _ = PmEvent::decode_datagram(&bytes, 0x1d);
    }

    #[test]
    fn corrupted_events_never_panic(e in event(), at: usize, byte: u8, cut: usize) {
        // Valid framing with one byte changed, then truncated: whatever decodes
        // re-encodes to itself.
        let mut d = message(0x1d, e.number(), &e.to_bytes());
        let i = at % d.len();
        d[i] = byte;
        d.truncate(cut % (d.len() + 1));
        for ev in PmEvent::decode_datagram(&d, 0x1d).into_iter().flatten() {
            prop_assert_eq!(PmEvent::parse(ev.number(), &ev.to_bytes()), Ok(ev));
        }
    }
}
