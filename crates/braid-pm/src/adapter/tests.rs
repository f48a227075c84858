use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use braid_core::{Config as CoreConfig, Side};

use super::*;
use crate::config::{Config, IfaceConfig, Mode};
use crate::manager::Manager;

fn addr(i: u8, host: u8) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, i, host)), 0)
}

fn ms(v: u64) -> Instant {
    Instant::from_millis(v)
}

/// Datagrams both ways, instantly, until neither end has anything to send.
fn exchange(now: Instant, c: &mut Connection, s: &mut Connection) {
    let mut buf = Vec::new();
    loop {
        let mut any = false;
        while c.poll_transmit(now, &mut buf).is_some() {
            let _ = s.handle_datagram(now, &buf);
            buf.clear();
            any = true;
        }
        while s.poll_transmit(now, &mut buf).is_some() {
            let _ = c.handle_datagram(now, &buf);
            buf.clear();
            any = true;
        }
        if !any {
            return;
        }
    }
}

/// A client with three interfaces under a full-mesh manager, its first path open on
/// interface 0, the connection established.
fn setup() -> (ConnAdapter, Manager, Connection, Connection) {
    let cfg = Arc::new(CoreConfig::default());
    let mut c = Connection::new(cfg.clone(), Side::Client, ms(0));
    let mut s = Connection::new(cfg, Side::Server, ms(0));
    let names = ["a", "b", "c"];
    let mut pm = Manager::new(Config {
        mode: Mode::FullMesh,
        ifaces: names.iter().map(|n| IfaceConfig::new(n)).collect(),
        ..Config::default()
    })
    .unwrap();
    let mut a = ConnAdapter::new(
        ConnId(1),
        Endpoint {
            id: AddrId(0),
            addr: Some(addr(0, 1)),
        },
    );
    for (i, n) in names.iter().enumerate() {
        let i = i as u8;
        a.set_local(CoreAddr(i), Some(addr(i, 2)));
        pm.handle_event(
            ms(0),
            &Event::IfaceNew {
                iface: IfaceId(u32::from(i)),
                name: n.to_string(),
                up: true,
            },
        );
        pm.handle_event(
            ms(0),
            &Event::LocalAddrNew {
                iface: IfaceId(u32::from(i)),
                id: AddrId(i),
                addr: Some(addr(i, 2).ip()),
            },
        );
    }
    c.open_path(ms(0), CoreAddr(0), CoreAddr(0), false).unwrap();
    let created = a.created(CoreAddr(0));
    assert!(matches!(
        created,
        Event::ConnectionCreated {
            conn: ConnId(1),
            iface: Some(IfaceId(0)),
            initiator: true,
            ..
        }
    ));
    pm.handle_event(ms(0), &created);
    exchange(ms(1), &mut c, &mut s);
    assert!(c.is_established());
    (a, pm, c, s)
}

#[test]
fn full_mesh_opens_a_path_per_interface_through_the_adapter() {
    let (a, mut pm, mut c, mut s) = setup();
    let mut applied = Vec::new();
    assert!(a.pump(ms(2), &mut c, &mut pm, |_| true, |x| applied.push(x)));
    let opened: Vec<_> = applied
        .iter()
        .filter_map(|x| match x {
            Applied::Opened { iface, local, .. } => Some((*iface, *local)),
            _ => None,
        })
        .collect();
    assert_eq!(
        opened,
        [(IfaceId(1), CoreAddr(1)), (IfaceId(2), CoreAddr(2))]
    );
    exchange(ms(3), &mut c, &mut s);
    // The established paths reach the manager; nothing more to do.
    a.pump(ms(4), &mut c, &mut pm, |_| true, |x| applied.push(x));
    assert_eq!(c.paths().filter(|p| p.established).count(), 3);
    assert_eq!(pm.subflows().filter(|s| s.1.is_some()).count(), 3);
}

#[test]
fn a_refused_path_is_reported_and_asked_for_again() {
    let (a, mut pm, mut c, _s) = setup();
    let mut applied = Vec::new();
    // Interface 2 is down as far as the runtime knows.
    a.pump(
        ms(2),
        &mut c,
        &mut pm,
        |l| l != CoreAddr(2),
        |x| applied.push(x),
    );
    assert!(applied.contains(&Applied::Refused { iface: IfaceId(2) }));
    assert_eq!(c.paths().count(), 2);
    // The manager retries after its backoff; now the runtime accepts.
    let t = pm.poll_timeout().expect("a re-evaluation is scheduled");
    pm.handle_timeout(t);
    applied.clear();
    a.pump(t, &mut c, &mut pm, |_| true, |x| applied.push(x));
    assert!(applied.iter().any(|x| matches!(
        x,
        Applied::Opened {
            iface: IfaceId(2),
            ..
        }
    )));
}

#[test]
fn commands_for_other_connections_and_unknown_paths_do_nothing() {
    let (a, mut pm, mut c, _s) = setup();
    let other = Command::RemoveSubflow {
        conn: ConnId(9),
        subflow: SubflowId(0),
    };
    assert_eq!(
        a.execute(ms(2), &mut c, &mut pm, &other, |_| true),
        Applied::Nothing
    );
    assert_eq!(c.paths().count(), 1);
    let unknown = Command::SetBackup {
        conn: ConnId(1),
        subflow: SubflowId(40),
        backup: true,
    };
    assert_eq!(
        a.execute(ms(2), &mut c, &mut pm, &unknown, |_| true),
        Applied::Nothing
    );
    let backup = Command::SetBackup {
        conn: ConnId(1),
        subflow: SubflowId(0),
        backup: true,
    };
    assert_eq!(
        a.execute(ms(2), &mut c, &mut pm, &backup, |_| true),
        Applied::Backup {
            path: PathId(0),
            local: CoreAddr(0),
            backup: true
        }
    );
    // Already a backup: nothing applied (no decision recorded, nothing told to the peer).
    assert_eq!(
        a.execute(ms(2), &mut c, &mut pm, &backup, |_| true),
        Applied::Nothing
    );
    let dup = Command::SetDuplicate {
        conn: ConnId(1),
        subflow: SubflowId(0),
        on: true,
    };
    assert_eq!(
        a.execute(ms(2), &mut c, &mut pm, &dup, |_| true),
        Applied::Duplicate {
            path: PathId(0),
            local: CoreAddr(0),
            on: true
        }
    );
    assert!(c.path(PathId(0)).unwrap().duplicate);
    let watch = Command::SetWatch {
        conn: ConnId(1),
        subflow: SubflowId(0),
        on: true,
    };
    assert_eq!(
        a.execute(ms(2), &mut c, &mut pm, &watch, |_| true),
        Applied::Watch {
            path: PathId(0),
            local: CoreAddr(0),
            on: true
        }
    );
    assert!(c.path(PathId(0)).unwrap().watch);
    let unknown_dup = Command::SetDuplicate {
        conn: ConnId(1),
        subflow: SubflowId(40),
        on: true,
    };
    assert_eq!(
        a.execute(ms(2), &mut c, &mut pm, &unknown_dup, |_| true),
        Applied::Nothing
    );
    let close = Command::RemoveSubflow {
        conn: ConnId(1),
        subflow: SubflowId(0),
    };
    assert_eq!(
        a.execute(ms(2), &mut c, &mut pm, &close, |_| true),
        Applied::Closed {
            path: PathId(0),
            local: CoreAddr(0)
        }
    );
}

#[test]
fn connection_events_carry_the_interface_and_addresses() {
    let mut a = ConnAdapter::new(
        ConnId(3),
        Endpoint {
            id: AddrId(0),
            addr: Some(addr(0, 1)),
        },
    );
    a.set_local(CoreAddr(1), Some(addr(1, 2)));
    a.created(CoreAddr(1));
    match a.translate(&CoreEvent::Connected) {
        Some(Event::ConnectionEstablished {
            conn: ConnId(3),
            local,
            iface: Some(IfaceId(1)),
            remote,
            ..
        }) => {
            assert_eq!(local.addr, Some(addr(1, 2)));
            assert_eq!(remote.addr, Some(addr(0, 1)));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(a.endpoint(CoreAddr(5)).addr, None);
    assert!(a.translate(&CoreEvent::Readable).is_none());
}

/// The traffic sample counts the stream bytes each interface's paths carried, both ways, and
/// keeps a closed path's bytes.
#[test]
fn traffic_counts_stream_bytes_per_interface_and_keeps_closed_paths() {
    let (mut a, mut pm, mut c, mut s) = setup();
    a.pump(ms(2), &mut c, &mut pm, |_| true, |_| {});
    exchange(ms(3), &mut c, &mut s);
    a.pump(ms(4), &mut c, &mut pm, |_| true, |_| {});
    assert_eq!(c.write(&[7u8; 30_000]), 30_000);
    exchange(ms(5), &mut c, &mut s);
    let t = a.traffic(&c);
    let total: u64 = t.iter().map(|(_, b)| b).sum();
    assert_eq!(total, 30_000, "{t:?}");
    assert!(t.iter().all(|(i, _)| i.0 < 3), "{t:?}");
    // The server side counts what it received the same way.
    let mut srv = ConnAdapter::new(
        ConnId(2),
        Endpoint {
            id: AddrId(0),
            addr: None,
        },
    );
    let got: u64 = srv.traffic(&s).iter().map(|(_, b)| b).sum();
    assert_eq!(got, 30_000);
    // A path closes: what it carried stays counted.
    let busy = c
        .paths()
        .filter(|p| p.stats.data_bytes_sent > 0)
        .map(|p| p.id)
        .next()
        .unwrap();
    c.close_path(busy).unwrap();
    exchange(ms(6), &mut c, &mut s);
    let after: u64 = a.traffic(&c).iter().map(|(_, b)| b).sum();
    assert_eq!(after, 30_000);
}
