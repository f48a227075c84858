//! The event stream under load: a receive-buffer overrun is counted, not fatal.

use std::net::SocketAddr;
use std::time::Duration;

use braid_mptcp::netns::NetNs;
use braid_mptcp::{PmEvent, PmEvents};

use crate::util::*;

#[test]
fn events_go_on_after_an_overrun() {
    let ns = NetNs::new("bmo").unwrap();
    let rt = runtime();
    let mut ev = in_ns(&ns, &rt, || async { PmEvents::connect().await.unwrap() });
    // Far more LISTENER_CREATED/CLOSED pairs than the receive buffer holds (each
    // event takes a page-sized buffer in the kernel), without reading.
    const N: u16 = 2000;
    ns.run(|| {
        for i in 0..N {
            drop(mptcp_listen_here(SocketAddr::from((
                [127, 0, 0, 1],
                20000 + i,
            ))));
        }
    });
    rt.block_on(async {
        let mut got = 0;
        while let Ok(e) = tokio::time::timeout(Duration::from_millis(300), ev.next()).await {
            assert!(
                matches!(
                    e,
                    Ok(PmEvent::ListenerCreated { .. } | PmEvent::ListenerClosed { .. })
                ),
                "{e:?}"
            );
            got += 1;
        }
        assert!(ev.overruns() >= 1, "no overrun after {got} events");
        assert!(got < 2 * usize::from(N), "{got}");
        assert_eq!(ev.malformed(), 0);
        // The stream still works.
        let at = SocketAddr::from(([127, 0, 0, 1], 19999));
        let l = ns.run(move || mptcp_listen_here(at));
        let addr = expect(&mut ev, "LISTENER_CREATED", |e| match e {
            PmEvent::ListenerCreated { addr } => Some(*addr),
            _ => None,
        })
        .await;
        assert_eq!(addr, at);
        drop(l);
    });
}
