//! A userspace path manager on both ends of a real MPTCP connection: the checks of
//! the kernel selftest userspace_pm.sh (announce, remove, subflow create/destroy,
//! MP_PRIO, listener events, invalid token and id), through this crate.
//!
//! ```text
//!   client ns                      server ns
//!   c1 10.0.1.2/24 ─── veth ─── s1 10.0.1.1/24   (first subflow)
//!   c2 10.0.2.2/24 ─── veth ─── s2 10.0.2.1/24   (second subflow)
//! ```

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr};

use braid_mptcp::netns::{NetNs, veth};
use braid_mptcp::{AddrFlags, ConnInfo, PmClient, PmEvent, PmEvents, SubflowInfo, Token};

use crate::util::*;

/// The server's port.
const PORT: u16 = 10100;
/// The id the server announces its second address with.
const SERVER_ID: u8 = 5;
/// The id the client gives its second address when it creates the subflow.
const CLIENT_ID: u8 = 23;
const EINVAL: i32 = 22;

/// Addresses of one family.
struct Plan {
    c1: &'static str,
    s1: &'static str,
    c2: &'static str,
    s2: &'static str,
    prefix: u8,
    any: &'static str,
}

const V4: Plan = Plan {
    c1: "10.0.1.2",
    s1: "10.0.1.1",
    c2: "10.0.2.2",
    s2: "10.0.2.1",
    prefix: 24,
    any: "0.0.0.0",
};

const V6: Plan = Plan {
    c1: "dead:beef:1::2",
    s1: "dead:beef:1::1",
    c2: "dead:beef:2::2",
    s2: "dead:beef:2::1",
    prefix: 64,
    any: "::",
};

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn sa(s: &str, port: u16) -> SocketAddr {
    SocketAddr::new(ip(s), port)
}

#[test]
fn userspace_pm_ipv4() {
    run(&V4);
}

#[test]
fn userspace_pm_ipv6() {
    run(&V6);
}

fn run(p: &Plan) {
    let client = NetNs::new("bmc").unwrap();
    let server = NetNs::new("bms").unwrap();
    let cidr = |a: &str| format!("{a}/{}", p.prefix);
    veth(&client, "c1", &cidr(p.c1), &server, "s1", &cidr(p.s1)).unwrap();
    veth(&client, "c2", &cidr(p.c2), &server, "s2", &cidr(p.s2)).unwrap();
    userspace_pm(&client);
    userspace_pm(&server);
    let c2_index = client.ifindex("c2").unwrap();

    let rt = runtime();
    let open = || async {
        (
            PmEvents::connect().await.unwrap(),
            PmClient::connect().await.unwrap(),
        )
    };
    let (mut c_ev, mut c_pm) = in_ns(&client, &rt, open);
    let (mut s_ev, mut s_pm) = in_ns(&server, &rt, open);
    assert_eq!(
        client.run(braid_mptcp::path_manager_mode).unwrap(),
        "userspace"
    );

    rt.block_on(async {
        // LISTENER_CREATED when the server listens.
        let listen_at = sa(p.any, PORT);
        let listener = mptcp_listen(&server, listen_at);
        let got = expect(&mut s_ev, "LISTENER_CREATED", |e| match e {
            PmEvent::ListenerCreated { addr } => Some(*addr),
            _ => None,
        })
        .await;
        assert_eq!(got, listen_at);

        // CREATED and ESTABLISHED on both sides, with tokens, addresses, ports and
        // the server-side flag (make_connection in the selftest).
        let mut c_sock = mptcp_connect(&client, sa(p.s1, PORT));
        let (mut s_sock, _) = listener.accept().unwrap();
        c_sock.write_all(b"ping").unwrap();
        let mut buf = [0; 4];
        s_sock.read_exact(&mut buf).unwrap();
        s_sock.write_all(b"pong").unwrap();
        c_sock.read_exact(&mut buf).unwrap();
        let c_local = c_sock.local_addr().unwrap();
        assert_eq!(c_local.ip(), ip(p.c1));
        let c_conn = ConnInfo {
            token: Token(0),
            local: c_local,
            remote: sa(p.s1, PORT),
            server_side: false,
            deny_join_id0: false,
        };
        let s_conn = ConnInfo {
            local: c_conn.remote,
            remote: c_conn.local,
            server_side: true,
            ..c_conn
        };
        let ct = expect(&mut c_ev, "client CREATED", |e| match e {
            PmEvent::Created(c) => Some(*c),
            _ => None,
        })
        .await;
        assert_eq!(
            ConnInfo {
                token: Token(0),
                ..ct
            },
            c_conn
        );
        let ct = ct.token;
        let est = expect(&mut c_ev, "client ESTABLISHED", |e| match e {
            PmEvent::Established(c) => Some(*c),
            _ => None,
        })
        .await;
        assert_eq!(
            est,
            ConnInfo {
                token: ct,
                ..c_conn
            }
        );
        let st = expect(&mut s_ev, "server CREATED", |e| match e {
            PmEvent::Created(c) => Some(*c),
            _ => None,
        })
        .await;
        assert_eq!(
            ConnInfo {
                token: Token(0),
                ..st
            },
            s_conn
        );
        let st = st.token;
        let est = expect(&mut s_ev, "server ESTABLISHED", |e| match e {
            PmEvent::Established(c) => Some(*c),
            _ => None,
        })
        .await;
        assert_eq!(
            est,
            ConnInfo {
                token: st,
                ..s_conn
            }
        );

        // An invalid token or address id is refused with a message and sends nothing
        // (the selftest's "invalid token" and "invalid id" cases).
        let bad = Token(ct.0.wrapping_sub(1));
        let r = c_pm.announce(bad, CLIENT_ID, ip(p.c2), None).await;
        assert_kernel_error(r, "ANNOUNCE", EINVAL, "token");
        let r = c_pm
            .subflow_create(bad, CLIENT_ID, ip(p.c2), None, sa(p.s2, PORT), false)
            .await;
        assert_kernel_error(r, "SUBFLOW_CREATE", EINVAL, "token");
        let r = c_pm.set_backup(bad, c_local, sa(p.s1, PORT), true).await;
        assert_kernel_error(r, "SET_FLAGS", EINVAL, "token");
        let r = c_pm.remove(bad, CLIENT_ID).await;
        assert_kernel_error(r, "REMOVE", EINVAL, "token");
        let r = c_pm.remove(ct, CLIENT_ID + 1).await;
        assert_kernel_error(
            r,
            "REMOVE",
            EINVAL,
            &format!("id {} not found", CLIENT_ID + 1),
        );
        tokio::join!(
            assert_quiet(&mut c_ev, "client"),
            assert_quiet(&mut s_ev, "server")
        );

        // ANNOUNCE from the server: ANNOUNCED on the client, with the connection's
        // port since none was given; the server's connection now knows the address.
        s_pm.announce(st, SERVER_ID, ip(p.s2), None).await.unwrap();
        let got = expect(&mut c_ev, "ANNOUNCED", |e| match e {
            PmEvent::Announced { .. } => Some(*e),
            _ => None,
        })
        .await;
        let want = PmEvent::Announced {
            token: ct,
            remote_id: SERVER_ID,
            addr: ip(p.s2),
            port: Some(PORT),
        };
        assert_eq!(got, want);
        let known = s_pm.conn_addrs(st).await.unwrap();
        assert!(
            known.iter().any(|e| e.id == SERVER_ID
                && e.addr == ip(p.s2)
                && e.flags.contains(AddrFlags::SIGNAL)),
            "{known:?}"
        );

        // SUBFLOW_CREATE on the second path: SUB_ESTABLISHED on both sides with the
        // four-tuple and both ids.
        c_pm.subflow_create(
            ct,
            CLIENT_ID,
            ip(p.c2),
            Some(c2_index),
            sa(p.s2, PORT),
            false,
        )
        .await
        .unwrap();
        let c_sub = expect(&mut c_ev, "client SUB_ESTABLISHED", |e| match e {
            PmEvent::SubEstablished(s) => Some(*s),
            _ => None,
        })
        .await;
        let sport = c_sub.local.port();
        let want = SubflowInfo {
            token: ct,
            local: sa(p.c2, sport),
            remote: sa(p.s2, PORT),
            local_id: CLIENT_ID,
            remote_id: SERVER_ID,
            backup: false,
            ifindex: Some(c2_index),
            error: None,
            reset: None,
        };
        assert_eq!(c_sub, want);
        let s_sub = expect(&mut s_ev, "server SUB_ESTABLISHED", |e| match e {
            PmEvent::SubEstablished(s) => Some(*s),
            _ => None,
        })
        .await;
        let s_want = SubflowInfo {
            token: st,
            local: want.remote,
            remote: want.local,
            local_id: SERVER_ID,
            remote_id: CLIENT_ID,
            ifindex: s_sub.ifindex,
            ..want
        };
        assert_eq!(s_sub, s_want);

        // SET_FLAGS backup with a token: MP_PRIO goes out (MPTcpExtMPPrioTx in the
        // client's namespace, Rx in the server's) and the server sees SUB_PRIORITY.
        let tx0 = nstat(&client, "MPTcpExtMPPrioTx");
        let rx0 = nstat(&server, "MPTcpExtMPPrioRx");
        c_pm.set_backup(ct, want.local, want.remote, true)
            .await
            .unwrap();
        let prio = expect(&mut s_ev, "SUB_PRIORITY", |e| match e {
            PmEvent::SubPriority(s) => Some(*s),
            _ => None,
        })
        .await;
        assert_eq!(
            prio,
            SubflowInfo {
                backup: true,
                ..s_want
            }
        );
        assert_eq!(nstat(&client, "MPTcpExtMPPrioTx"), tx0 + 1);
        assert_eq!(nstat(&server, "MPTcpExtMPPrioRx"), rx0 + 1);

        // SUBFLOW_DESTROY: SUB_CLOSED for that four-tuple, on both sides; a second
        // destroy finds nothing.
        c_pm.subflow_destroy(ct, want.local, want.remote)
            .await
            .unwrap();
        let closed = expect(&mut c_ev, "client SUB_CLOSED", |e| match e {
            PmEvent::SubClosed(s) => Some(*s),
            _ => None,
        })
        .await;
        assert_eq!(
            (closed.token, closed.local, closed.remote),
            (ct, want.local, want.remote)
        );
        assert_eq!((closed.local_id, closed.remote_id), (CLIENT_ID, SERVER_ID));
        let closed = expect(&mut s_ev, "server SUB_CLOSED", |e| match e {
            PmEvent::SubClosed(s) => Some(*s),
            _ => None,
        })
        .await;
        assert_eq!(
            (closed.token, closed.local, closed.remote),
            (st, want.remote, want.local)
        );
        let again = c_pm.subflow_destroy(ct, want.local, want.remote).await;
        assert!(
            matches!(
                again,
                Err(braid_mptcp::Error::Kernel {
                    op: "SUBFLOW_DESTROY",
                    ..
                })
            ),
            "{again:?}"
        );

        // REMOVE from the server: REMOVED on the client with the server's id.
        s_pm.remove(st, SERVER_ID).await.unwrap();
        let got = expect(&mut c_ev, "REMOVED", |e| match e {
            PmEvent::Removed { .. } => Some(*e),
            _ => None,
        })
        .await;
        assert_eq!(
            got,
            PmEvent::Removed {
                token: ct,
                remote_id: SERVER_ID
            }
        );
        let known = s_pm.conn_addrs(st).await.unwrap();
        assert!(known.iter().all(|e| e.id != SERVER_ID), "{known:?}");

        // The first subflow still carries data.
        c_sock.write_all(b"more").unwrap();
        s_sock.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"more");

        // Close: CLOSED on both sides; closing the listener: LISTENER_CLOSED.
        drop(c_sock);
        drop(s_sock);
        let got = expect(&mut c_ev, "client CLOSED", |e| {
            matches!(e, PmEvent::Closed { .. }).then_some(*e)
        })
        .await;
        assert_eq!(got, PmEvent::Closed { token: ct });
        let got = expect(&mut s_ev, "server CLOSED", |e| {
            matches!(e, PmEvent::Closed { .. }).then_some(*e)
        })
        .await;
        assert_eq!(got, PmEvent::Closed { token: st });
        drop(listener);
        let got = expect(&mut s_ev, "LISTENER_CLOSED", |e| match e {
            PmEvent::ListenerClosed { addr } => Some(*addr),
            _ => None,
        })
        .await;
        assert_eq!(got, listen_at);

        for ev in [&c_ev, &s_ev] {
            assert_eq!((ev.malformed(), ev.overruns()), (0, 0));
        }
    });
}
