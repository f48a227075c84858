use std::net::IpAddr;

use proptest::prelude::*;

use super::*;
use crate::genl::addr::AddrFlags;

fn addr4(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn subflow_create_layout() {
    let cmd = PmCommand::SubflowCreate {
        token: Token(0x0102_0304),
        local: PmAddr {
            id: Some(23),
            addr: Some(addr4("10.0.2.2")),
            ..PmAddr::default()
        },
        remote: PmAddr::socket("10.0.2.1:10100".parse().unwrap()),
    };
    let b = cmd.to_bytes();
    // The nested local address comes first (type 1 | NLA_F_NESTED), then the token.
    assert_eq!(&b[2..4], &[1, 0x80]);
    let local_len = usize::from(u16::from_ne_bytes([b[0], b[1]]));
    let token = &b[(local_len + 3) & !3..];
    assert_eq!(&token[..8], &[8, 0, 4, 0, 4, 3, 2, 1][..]);
    assert_eq!(PmCommand::parse(CMD_SUBFLOW_CREATE, &b), Ok(cmd.clone()));
    assert_eq!(cmd.name(), "SUBFLOW_CREATE");
}

#[test]
fn remote_port_is_host_order() {
    // mptcp_pm_parse_addr(): entry->addr.port = htons(nla_get_u16(tb[PORT])).
    let a = PmAddr::socket("10.0.2.1:10100".parse().unwrap());
    let b = attr::emit_attrs(&[a.to_attr(ATTR_ADDR_REMOTE)]);
    let port = 10100u16.to_ne_bytes();
    assert!(
        b.windows(6).any(|w| w == [6, 0, 5, 0, port[0], port[1]]),
        "{b:?}"
    );
}

#[test]
fn missing_required_attributes() {
    let only_token = attr::emit_attrs(&[Attr::U32(ATTR_TOKEN, 1)]);
    assert_eq!(
        PmCommand::parse(CMD_ANNOUNCE, &only_token),
        Err(ParseError::Missing("MPTCP_PM_ATTR_ADDR"))
    );
    assert_eq!(
        PmCommand::parse(CMD_REMOVE, &only_token),
        Err(ParseError::Missing("MPTCP_PM_ATTR_LOC_ID"))
    );
    assert_eq!(
        PmCommand::parse(CMD_FLUSH_ADDRS, &[]),
        Ok(PmCommand::FlushAddrs)
    );
    assert_eq!(
        PmCommand::parse(200, &[]),
        Err(ParseError::UnknownCommand(200))
    );
    assert_eq!(command_name(200), "UNKNOWN");
}

fn ip() -> impl Strategy<Value = IpAddr> {
    prop_oneof![
        any::<[u8; 4]>().prop_map(IpAddr::from),
        any::<[u8; 16]>().prop_map(IpAddr::from)
    ]
}

pub(crate) fn pm_addr() -> impl Strategy<Value = PmAddr> {
    (
        any::<Option<u8>>(),
        proptest::option::of(ip()),
        any::<Option<u16>>(),
        any::<Option<u32>>(),
        any::<Option<i32>>(),
    )
        .prop_map(|(id, addr, port, flags, ifindex)| PmAddr {
            id,
            addr,
            port,
            flags: flags.map(AddrFlags::from_bits_retain),
            ifindex,
        })
}

fn command() -> impl Strategy<Value = PmCommand> {
    let token = any::<u32>().prop_map(Token);
    prop_oneof![
        pm_addr().prop_map(PmCommand::AddAddr),
        pm_addr().prop_map(PmCommand::DelAddr),
        (
            proptest::option::of(pm_addr()),
            proptest::option::of(token.clone())
        )
            .prop_map(|(addr, token)| PmCommand::GetAddr { addr, token }),
        Just(PmCommand::FlushAddrs),
        (any::<Option<u32>>(), any::<Option<u32>>()).prop_map(|(rcv_add_addrs, subflows)| {
            PmCommand::SetLimits {
                rcv_add_addrs,
                subflows,
            }
        }),
        (any::<Option<u32>>(), any::<Option<u32>>()).prop_map(|(rcv_add_addrs, subflows)| {
            PmCommand::GetLimits {
                rcv_add_addrs,
                subflows,
            }
        }),
        (
            pm_addr(),
            proptest::option::of(token.clone()),
            proptest::option::of(pm_addr())
        )
            .prop_map(|(addr, token, remote)| PmCommand::SetFlags {
                addr,
                token,
                remote
            }),
        (token.clone(), pm_addr()).prop_map(|(token, addr)| PmCommand::Announce { token, addr }),
        (token.clone(), any::<u8>())
            .prop_map(|(token, loc_id)| PmCommand::Remove { token, loc_id }),
        (token.clone(), pm_addr(), pm_addr()).prop_map(|(token, local, remote)| {
            PmCommand::SubflowCreate {
                token,
                local,
                remote,
            }
        }),
        (token, pm_addr(), pm_addr()).prop_map(|(token, local, remote)| {
            PmCommand::SubflowDestroy {
                token,
                local,
                remote,
            }
        }),
    ]
}

proptest! {
    #[test]
    fn commands_round_trip(cmd in command()) {
        let bytes = cmd.to_bytes();
        prop_assert_eq!(bytes.len() % 4, 0);
        prop_assert_eq!(PmCommand::parse(cmd.number(), &bytes), Ok(cmd));
    }

    #[test]
    fn arbitrary_bytes_never_panic(cmd in 0u8..16, bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = PmCommand::parse(cmd, &bytes);
        let _ = PmAddr::parse(&bytes);
    }
}
