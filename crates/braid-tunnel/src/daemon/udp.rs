//! The outer UDP sockets: one per client link (bound to its interface), one per gateway listen
//! address; large buffers; readiness over many sockets at once; sends that wait out `EAGAIN`.

use std::future::poll_fn;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::task::Poll;

use nix::sys::socket::{setsockopt, sockopt};
use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::UdpSocket;

/// Socket buffers asked for (the kernel caps them at `net.core.{r,w}mem_max` unless root).
const SOCKET_BUFFER: usize = 4 << 20;

/// A UDP socket for a client link: bound to interface `device` (SO_BINDTODEVICE) and to
/// `source` if given, port chosen by the kernel, of the family of `peer`.
pub fn link_socket(
    device: &str,
    source: Option<IpAddr>,
    peer: SocketAddr,
) -> io::Result<UdpSocket> {
    let local = match (source, peer) {
        (Some(ip), _) => SocketAddr::new(ip, 0),
        (None, SocketAddr::V4(_)) => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        (None, SocketAddr::V6(_)) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0),
    };
    let s = new_socket(local)?;
    s.bind_device(Some(device.as_bytes()))
        .map_err(|e| io::Error::new(e.kind(), format!("bind to interface {device}: {e}")))?;
    s.bind(&local.into())
        .map_err(|e| io::Error::new(e.kind(), format!("bind {local}: {e}")))?;
    UdpSocket::from_std(s.into())
}

/// A UDP socket listening on `addr` (the gateway).
pub fn listen_socket(addr: SocketAddr) -> io::Result<UdpSocket> {
    let s = new_socket(addr)?;
    s.bind(&addr.into())
        .map_err(|e| io::Error::new(e.kind(), format!("bind {addr}: {e}")))?;
    UdpSocket::from_std(s.into())
}

fn new_socket(addr: SocketAddr) -> io::Result<Socket> {
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    s.set_nonblocking(true)?;
    // The FORCE variants pass rmem_max/wmem_max (root); otherwise the capped ones.
    if setsockopt(&s, sockopt::RcvBufForce, &SOCKET_BUFFER).is_err() {
        let _ = s.set_recv_buffer_size(SOCKET_BUFFER);
    }
    if setsockopt(&s, sockopt::SndBufForce, &SOCKET_BUFFER).is_err() {
        let _ = s.set_send_buffer_size(SOCKET_BUFFER);
    }
    if addr.is_ipv6() {
        let _ = s.set_only_v6(false);
    }
    Ok(s)
}

/// Waits until one of `socks` is readable and returns its index; fair by rotating `start`.
pub async fn readable(socks: &[UdpSocket], start: usize) -> usize {
    poll_fn(|cx| {
        let n = socks.len();
        for k in 0..n {
            let i = (start + k) % n;
            if socks[i].poll_recv_ready(cx).is_ready() {
                return Poll::Ready(i);
            }
        }
        Poll::Pending
    })
    .await
}

/// Sends one datagram, waiting while the socket buffer is full. Errors other than a full
/// buffer (an interface down, no route) are returned: the datagram is lost, as on a wire.
pub async fn send(sock: &UdpSocket, buf: &[u8], to: SocketAddr) -> io::Result<()> {
    loop {
        match sock.try_send_to(buf, to) {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => sock.writable().await?,
            Err(e) => return Err(e),
        }
    }
}
