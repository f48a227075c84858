//! The rtnetlink monitor: the snapshot, then links and addresses appearing,
//! changing and going away in a namespace.

use std::net::IpAddr;
use std::time::Duration;

use braid_mptcp::netns::{NetNs, veth};
use braid_mptcp::{NetEvent, NetMonitor};
use tokio::time::Instant;

use crate::util::*;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Waits (at most [`EVENT_WAIT`]) for `want`, skipping other events.
async fn expect_net(mon: &mut NetMonitor, want: &NetEvent) {
    let deadline = Instant::now() + EVENT_WAIT;
    let mut skipped = Vec::new();
    loop {
        match tokio::time::timeout_at(deadline, mon.next()).await {
            Err(_) => panic!("no {want:?} within {EVENT_WAIT:?}; other events: {skipped:?}"),
            Ok(Err(e)) => panic!("rtnetlink socket: {e}"),
            Ok(Ok(e)) if &e == want => return,
            Ok(Ok(e)) => skipped.push(e),
        }
    }
}

#[test]
fn snapshot_then_link_and_address_changes() {
    let ns = NetNs::new("bmr").unwrap();
    let rt = runtime();
    let (mut mon, snapshot) = in_ns(&ns, &rt, || async { NetMonitor::connect().await.unwrap() });
    // A new namespace: loopback, up (NetNs::new), with its two addresses.
    let lo = NetEvent::Link {
        index: 1,
        name: "lo".into(),
        up: true,
    };
    assert_eq!(snapshot[0], lo, "{snapshot:?}");
    for (addr, prefix_len) in [(ip("127.0.0.1"), 8), (ip("::1"), 128)] {
        let e = NetEvent::AddrNew {
            index: 1,
            addr,
            prefix_len,
        };
        assert!(snapshot.contains(&e), "{e:?} not in {snapshot:?}");
    }
    assert_eq!(snapshot.len(), 3, "{snapshot:?}");

    rt.block_on(async {
        // A veth pair inside the namespace: each end appears down.
        ns.ip(&["link", "add", "v0", "type", "veth", "peer", "name", "v1"])
            .unwrap();
        let v0 = ns.ifindex("v0").unwrap();
        let v1 = ns.ifindex("v1").unwrap();
        let link = |index, name: &str, up| NetEvent::Link {
            index,
            name: name.into(),
            up,
        };
        expect_net(&mut mon, &link(v0, "v0", false)).await;

        ns.ip(&["addr", "add", "10.9.0.1/24", "dev", "v0"]).unwrap();
        let a = ip("10.9.0.1");
        expect_net(
            &mut mon,
            &NetEvent::AddrNew {
                index: v0,
                addr: a,
                prefix_len: 24,
            },
        )
        .await;

        // Up needs both ends up (carrier): v0 alone is not up.
        ns.ip(&["link", "set", "v0", "up"]).unwrap();
        ns.ip(&["link", "set", "v1", "up"]).unwrap();
        expect_net(&mut mon, &link(v0, "v0", true)).await;
        ns.ip(&["link", "set", "v1", "down"]).unwrap();
        expect_net(&mut mon, &link(v0, "v0", false)).await;

        ns.ip(&["addr", "del", "10.9.0.1/24", "dev", "v0"]).unwrap();
        expect_net(&mut mon, &NetEvent::AddrGone { index: v0, addr: a }).await;

        ns.ip(&["link", "set", "v0", "down"]).unwrap();
        ns.ip(&["link", "del", "v0"]).unwrap();
        expect_net(&mut mon, &NetEvent::LinkGone { index: v0 }).await;
        // Deleting one end of a veth deletes the other.
        expect_net(&mut mon, &NetEvent::LinkGone { index: v1 }).await;
        assert_eq!((mon.malformed(), mon.overruns()), (0, 0));
    });
}

#[test]
fn ipv6_address_is_new_once_dad_is_done() {
    let a = NetNs::new("bmd").unwrap();
    let b = NetNs::new("bmd").unwrap();
    veth(&a, "va", "10.8.0.1/24", &b, "vb", "10.8.0.2/24").unwrap();
    let va = a.ifindex("va").unwrap();
    let rt = runtime();
    let (mut mon, snapshot) = in_ns(&a, &rt, || async { NetMonitor::connect().await.unwrap() });
    assert!(
        snapshot.contains(&NetEvent::Link {
            index: va,
            name: "va".into(),
            up: true
        }),
        "{snapshot:?}"
    );
    // Fast duplicate address detection: one probe, 100 ms.
    a.exec(&[
        "sysctl",
        "-q",
        "-w",
        "net.ipv6.neigh.va.retrans_time_ms=100",
    ])
    .unwrap();
    let addr = ip("dead:beef:8::1");
    let started = Instant::now();
    a.ip(&["addr", "add", "dead:beef:8::1/64", "dev", "va"])
        .unwrap();
    let shown = a.ip(&["-6", "addr", "show", "dev", "va"]).unwrap();
    assert!(
        String::from_utf8_lossy(&shown.stdout).contains("tentative"),
        "DAD is not running"
    );
    rt.block_on(async {
        let want = NetEvent::AddrNew {
            index: va,
            addr,
            prefix_len: 64,
        };
        expect_net(&mut mon, &want).await;
    });
    // The event came after DAD: the address is no longer tentative.
    assert!(started.elapsed() >= Duration::from_millis(50));
    let shown = a.ip(&["-6", "addr", "show", "dev", "va"]).unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    let line = shown
        .lines()
        .find(|l| l.contains("dead:beef:8::1"))
        .unwrap();
    assert!(!line.contains("tentative"), "{shown}");
}

#[test]
fn converges_after_an_overrun() {
    // Many more address notifications than the receive buffer holds, unread: the
    // monitor counts the overrun, dumps again, and every address is reported.
    let ns = NetNs::new("bmv").unwrap();
    ns.ip(&["link", "add", "v0", "type", "veth", "peer", "name", "v1"])
        .unwrap();
    let v0 = ns.ifindex("v0").unwrap();
    let rt = runtime();
    let (mut mon, _) = in_ns(&ns, &rt, || async { NetMonitor::connect().await.unwrap() });
    const N: u32 = 3000;
    let batch: String = (0..N)
        .map(|i| format!("addr add 10.{}.{}.1/32 dev v0\n", 100 + i / 256, i % 256))
        .collect();
    let path = std::env::temp_dir().join(format!("{}.batch", ns.name));
    std::fs::write(&path, batch).unwrap();
    let added = ns.ip(&["-batch", path.to_str().unwrap()]);
    let _ = std::fs::remove_file(&path);
    added.unwrap();
    let mut seen = std::collections::BTreeSet::new();
    rt.block_on(async {
        while let Ok(e) = tokio::time::timeout(Duration::from_millis(300), mon.next()).await {
            // The dump after the overrun repeats the loopback addresses too.
            match e.unwrap() {
                NetEvent::AddrNew { index, addr, .. } if index == v0 => {
                    seen.insert(addr);
                }
                _ => {}
            }
        }
    });
    assert!(mon.overruns() >= 1);
    assert_eq!(seen.len(), N as usize);
    assert_eq!(mon.malformed(), 0);
}
