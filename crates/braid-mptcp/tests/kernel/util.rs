//! Namespaces, MPTCP sockets and event expectations shared by the kernel tests.

use std::future::Future;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use braid_mptcp::netns::NetNs;
use braid_mptcp::{Error, PmEvent, PmEvents};
use socket2::{Domain, Protocol, Socket, Type};
use tokio::runtime::Runtime;
use tokio::time::Instant;

/// `IPPROTO_MPTCP` (include/uapi/linux/in.h).
const IPPROTO_MPTCP: i32 = 262;
/// The longest wait for an event that should come.
pub const EVENT_WAIT: Duration = Duration::from_secs(5);
/// How long "no event" is watched for.
pub const QUIET: Duration = Duration::from_millis(300);

/// The tests' runtime: its worker drives the sockets' I/O while a namespace
/// thread opens them (see [`in_ns`]).
pub fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Runs the future `f` makes on a thread inside `ns`, on `rt`: the sockets it
/// opens belong to `ns` and are registered with `rt`, so the test's main future
/// can use sockets of several namespaces.
pub fn in_ns<T, Fut>(ns: &NetNs, rt: &Runtime, f: impl FnOnce() -> Fut + Send + 'static) -> T
where
    T: Send + 'static,
    Fut: Future<Output = T>,
{
    let handle = rt.handle().clone();
    ns.run(move || handle.block_on(f()))
}

/// Selects the userspace path manager in `ns` (`path_manager`, Linux 6.15+, else
/// `pm_type`).
pub fn userspace_pm(ns: &NetNs) {
    if ns
        .exec(&["sysctl", "-q", "-w", "net.mptcp.path_manager=userspace"])
        .is_err()
    {
        ns.exec(&["sysctl", "-q", "-w", "net.mptcp.pm_type=1"])
            .expect("sysctl pm_type");
    }
}

/// An MPTCP listening socket on `addr`, opened in `ns`.
pub fn mptcp_listen(ns: &NetNs, addr: SocketAddr) -> TcpListener {
    ns.run(move || mptcp_listen_here(addr))
}

/// An MPTCP listening socket on `addr`, in the calling thread's namespace.
pub fn mptcp_listen_here(addr: SocketAddr) -> TcpListener {
    let s = mptcp_socket(addr);
    s.set_reuse_address(true).unwrap();
    s.bind(&addr.into())
        .unwrap_or_else(|e| panic!("bind {addr}: {e}"));
    s.listen(8).unwrap();
    s.into()
}

/// An MPTCP connection from `ns` to `to`.
pub fn mptcp_connect(ns: &NetNs, to: SocketAddr) -> TcpStream {
    ns.run(move || {
        let s = mptcp_socket(to);
        s.connect_timeout(&to.into(), EVENT_WAIT)
            .unwrap_or_else(|e| panic!("connect {to}: {e}"));
        s.set_read_timeout(Some(EVENT_WAIT)).unwrap();
        s.into()
    })
}

fn mptcp_socket(addr: SocketAddr) -> Socket {
    Socket::new(
        Domain::for_address(addr),
        Type::STREAM,
        Some(Protocol::from(IPPROTO_MPTCP)),
    )
    .expect("MPTCP socket (is net.mptcp.enabled 1?)")
}

/// Waits (at most [`EVENT_WAIT`]) for the first event `f` accepts, skipping others.
pub async fn expect<T>(
    ev: &mut PmEvents,
    what: &str,
    mut f: impl FnMut(&PmEvent) -> Option<T>,
) -> T {
    let deadline = Instant::now() + EVENT_WAIT;
    let mut skipped = Vec::new();
    loop {
        match tokio::time::timeout_at(deadline, ev.next()).await {
            Err(_) => panic!("no {what} within {EVENT_WAIT:?}; other events: {skipped:?}"),
            Ok(Err(e)) => panic!("event socket: {e}"),
            Ok(Ok(e)) => match f(&e) {
                Some(t) => return t,
                None => skipped.push(e),
            },
        }
    }
}

/// Asserts that no event comes within [`QUIET`].
pub async fn assert_quiet(ev: &mut PmEvents, side: &str) {
    if let Ok(e) = tokio::time::timeout(QUIET, ev.next()).await {
        panic!("{side}: unexpected event {e:?}");
    }
}

/// Asserts `r` is a kernel error for `op` with `errno` and an extended-ACK
/// message containing `text`.
pub fn assert_kernel_error(r: Result<(), Error>, op: &str, errno: i32, text: &str) {
    match r {
        Err(Error::Kernel {
            op: o,
            errno: e,
            msg: Some(m),
        }) if o == op && e == errno && m.contains(text) => {}
        other => {
            panic!("expected {op} errno {errno} with a message containing {text:?}, got {other:?}")
        }
    }
}

/// A counter of `nstat` (absolute, history untouched) in `ns`; 0 when absent.
pub fn nstat(ns: &NetNs, name: &str) -> u64 {
    let out = ns.exec(&["nstat", "-asz", name]).expect("nstat");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some(name)).then(|| w.next().and_then(|n| n.parse().ok()))?
        })
        .unwrap_or(0)
}
