//! What the kernel holds for an MPTCP connection, from sock_diag (`NETLINK_SOCK_DIAG`, what
//! `ss -M` reads): the connection-level sequence numbers of `struct mptcp_info`.
//!
//! A path manager needs them because closing any subflow makes the kernel re-send the whole
//! MPTCP-level retransmission queue (`__mptcp_close_ssk()` → `__mptcp_retransmit_pending_data()`
//! in net/mptcp/protocol.c): every byte written and not yet DATA_ACKed. [`MptcpInfo::unacked`]
//! is that amount, the cost of a close. [`TcpState`] tells what one subflow (a TCP socket)
//! still holds: data a lost link took with it, which only a close (or the kernel's own stale
//! detection, later) makes the kernel send on another subflow.

use std::io;

use netlink_sys::protocols::NETLINK_SOCK_DIAG;

use crate::Error;
use crate::genl::attr::{self, ParseError};
use crate::nl::{self, NlSocket, RawPayload, RequestError};

/// `SOCK_DIAG_BY_FAMILY`.
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// `IPPROTO_MPTCP`: above 255, so it goes in `INET_DIAG_REQ_PROTOCOL`.
const IPPROTO_MPTCP: u32 = 262;
/// `IPPROTO_TCP`.
const IPPROTO_TCP: u32 = 6;
/// `INET_DIAG_REQ_PROTOCOL` (a request attribute, u32).
const INET_DIAG_REQ_PROTOCOL: u16 = 3;
/// `INET_DIAG_INFO`: the protocol's info structure (`struct mptcp_info` for MPTCP).
const INET_DIAG_INFO: u16 = 2;
/// `sizeof(struct inet_diag_req_v2)`.
const REQ_LEN: usize = 56;
/// `sizeof(struct inet_diag_msg)`: the reply's fixed part before its attributes.
const MSG_LEN: usize = 72;

/// The part of `struct mptcp_info` (include/uapi/linux/mptcp.h) a path manager uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MptcpInfo {
    /// The connection's token (as in the path manager's events).
    pub token: u32,
    /// Subflows beside the initial one.
    pub subflows: u8,
    /// Data sequence number of the next byte the application writes.
    pub write_seq: u64,
    /// First byte not yet DATA_ACKed by the peer.
    pub snd_una: u64,
}

impl MptcpInfo {
    /// Bytes written and not acknowledged at the connection level: what closing a subflow
    /// makes the kernel send again.
    pub fn unacked(&self) -> u64 {
        self.write_seq.wrapping_sub(self.snd_una)
    }

    /// Reads the fixed prefix of `struct mptcp_info`: six u8 counters, u32 flags at 8,
    /// u32 token at 12, u64 write_seq at 16, u64 snd_una at 24 (native byte order).
    pub fn parse(b: &[u8]) -> Result<MptcpInfo, ParseError> {
        let short = || ParseError::Framing(format!("mptcp_info of {} bytes", b.len()));
        let u32_at = |o: usize| {
            b.get(o..o + 4)
                .and_then(|x| <[u8; 4]>::try_from(x).ok())
                .map(u32::from_ne_bytes)
                .ok_or_else(short)
        };
        let u64_at = |o: usize| {
            b.get(o..o + 8)
                .and_then(|x| <[u8; 8]>::try_from(x).ok())
                .map(u64::from_ne_bytes)
                .ok_or_else(short)
        };
        Ok(MptcpInfo {
            subflows: *b.first().ok_or_else(short)?,
            token: u32_at(12)?,
            write_seq: u64_at(16)?,
            snd_una: u64_at(24)?,
        })
    }
}

/// What a TCP socket (an MPTCP subflow) holds, from `struct tcp_info`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpState {
    /// Local address and port.
    pub local: std::net::SocketAddr,
    /// Peer address and port.
    pub remote: std::net::SocketAddr,
    /// Segments sent and not acknowledged (`tcpi_unacked`).
    pub unacked: u32,
    /// Bytes queued and not sent yet (`tcpi_notsent_bytes`).
    pub notsent: u32,
    /// Bytes the peer acknowledged (`tcpi_bytes_acked`) ...
    pub bytes_acked: u64,
    /// ... and bytes received (`tcpi_bytes_received`) over the socket's life.
    pub bytes_received: u64,
    /// Retransmission timeouts in a row without an acknowledgement (`tcpi_backoff`): the
    /// retransmission timer waits `rto << backoff`.
    pub backoff: u8,
}

impl TcpState {
    /// Whether the socket still holds data of its own.
    pub fn holds_data(&self) -> bool {
        self.unacked > 0 || self.notsent > 0
    }

    /// Whether the socket holds data and waits on a backed-off timer: the retransmission
    /// timer (data out, not acknowledged) or the probe timer (data not sent: a transmit that
    /// failed locally, e.g. a firewall drop or no route, is retried by it). Either way it sends
    /// nothing until that timer fires, even once its link works again.
    pub fn in_backoff(&self) -> bool {
        self.holds_data() && self.backoff > 0
    }
}

/// A sock_diag socket of the calling thread's network namespace.
pub struct MptcpDiag {
    sock: NlSocket,
}

impl std::fmt::Debug for MptcpDiag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MptcpDiag").finish_non_exhaustive()
    }
}

impl MptcpDiag {
    /// Opens the socket (inside a tokio runtime with I/O enabled).
    pub fn open() -> io::Result<MptcpDiag> {
        Ok(MptcpDiag {
            sock: NlSocket::open(NETLINK_SOCK_DIAG)?,
        })
    }

    /// Every MPTCP connection of the namespace (IPv4 and IPv6).
    pub async fn dump(&mut self) -> Result<Vec<MptcpInfo>, Error> {
        let mut out = Vec::new();
        for payload in self.replies(IPPROTO_MPTCP).await? {
            if let Some(info) = info_of(&payload)? {
                out.push(MptcpInfo::parse(info)?);
            }
        }
        Ok(out)
    }

    /// Every TCP socket of the namespace (subflows included) with what it holds.
    pub async fn tcp(&mut self) -> Result<Vec<TcpState>, Error> {
        let mut out = Vec::new();
        for payload in self.replies(IPPROTO_TCP).await? {
            if let Some(info) = info_of(&payload)? {
                out.push(tcp_state(&payload, info)?);
            }
        }
        Ok(out)
    }

    /// The `inet_diag_msg` replies (payloads) of a dump of `protocol`, IPv4 and IPv6.
    async fn replies(&mut self, protocol: u32) -> Result<Vec<Vec<u8>>, Error> {
        let mut out = Vec::new();
        for family in [libc_af::INET, libc_af::INET6] {
            let replies = self
                .sock
                .request(
                    RawPayload {
                        kind: SOCK_DIAG_BY_FAMILY,
                        bytes: request(family, protocol),
                    },
                    true,
                )
                .await
                .map_err(|e| match e {
                    RequestError::Io(e) => Error::Io(e),
                    RequestError::Parse(e) => Error::Parse(e),
                    RequestError::Kernel { errno, message } => Error::Kernel {
                        op: "SOCK_DIAG_BY_FAMILY",
                        errno,
                        msg: message,
                    },
                })?;
            for msg in replies {
                for frame in nl::frames(&msg) {
                    let frame = frame?;
                    if frame.kind == SOCK_DIAG_BY_FAMILY {
                        out.push(frame.payload.to_vec());
                    }
                }
            }
        }
        Ok(out)
    }

    /// The connection with this token, if it is still there.
    pub async fn get(&mut self, token: u32) -> Result<Option<MptcpInfo>, Error> {
        Ok(self.dump().await?.into_iter().find(|i| i.token == token))
    }
}

/// Address families (`AF_INET`, `AF_INET6`).
mod libc_af {
    pub const INET: u8 = 2;
    pub const INET6: u8 = 10;
}

/// `struct inet_diag_req_v2` for every socket of `family` and `protocol` with its info,
/// followed by `INET_DIAG_REQ_PROTOCOL` = `protocol`.
fn request(family: u8, protocol: u32) -> Vec<u8> {
    let mut b = vec![0u8; REQ_LEN];
    b[0] = family;
    // sdiag_protocol: the low byte; the attribute carries the real number.
    b[1] = (protocol & 0xff) as u8;
    b[2] = 1 << (INET_DIAG_INFO - 1);
    b[4..8].copy_from_slice(&u32::MAX.to_ne_bytes()); // every TCP state
    // id (sockid) left zero: no filter.
    let attr_len: u16 = 8;
    b.extend(attr_len.to_ne_bytes());
    b.extend(INET_DIAG_REQ_PROTOCOL.to_ne_bytes());
    b.extend(protocol.to_ne_bytes());
    b
}

/// The info attribute of one `inet_diag_msg` reply (`None` if it carries none).
fn info_of(payload: &[u8]) -> Result<Option<&[u8]>, ParseError> {
    let attrs = payload
        .get(MSG_LEN..)
        .ok_or_else(|| ParseError::Framing(format!("inet_diag_msg of {} bytes", payload.len())))?;
    for a in attr::walk(attrs) {
        let (kind, value) = a?;
        if kind == INET_DIAG_INFO {
            return Ok(Some(value));
        }
    }
    Ok(None)
}

/// The four-tuple of an `inet_diag_msg` (`struct inet_diag_sockid` at offset 4: ports and
/// addresses in network order) and the counters of its `struct tcp_info`.
fn tcp_state(msg: &[u8], info: &[u8]) -> Result<TcpState, ParseError> {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
    let short = || ParseError::Framing(format!("tcp_info of {} bytes", info.len()));
    let u32_at = |o: usize| {
        info.get(o..o + 4)
            .and_then(|x| <[u8; 4]>::try_from(x).ok())
            .map(u32::from_ne_bytes)
            .ok_or_else(short)
    };
    let u64_at = |o: usize| {
        info.get(o..o + 8)
            .and_then(|x| <[u8; 8]>::try_from(x).ok())
            .map(u64::from_ne_bytes)
            .ok_or_else(short)
    };
    let port = |o: usize| u16::from_be_bytes([msg[o], msg[o + 1]]);
    let addr = |o: usize| -> IpAddr {
        let b: [u8; 16] = msg[o..o + 16].try_into().expect("16 bytes");
        if msg[0] == libc_af::INET6 {
            IpAddr::V6(Ipv6Addr::from(b))
        } else {
            IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))
        }
    };
    // The caller checked the message is at least MSG_LEN (72) bytes.
    Ok(TcpState {
        local: SocketAddr::new(addr(8), port(4)),
        remote: SocketAddr::new(addr(24), port(6)),
        unacked: u32_at(24)?,
        notsent: u32_at(144)?,
        bytes_acked: u64_at(120)?,
        bytes_received: u64_at(128)?,
        backoff: *info.get(4).ok_or_else(short)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_names_mptcp_and_asks_for_info() {
        let r = request(2, IPPROTO_MPTCP);
        assert_eq!(r.len(), REQ_LEN + 8);
        assert_eq!((r[0], r[1], r[2]), (2, 6, 2));
        assert_eq!(&r[REQ_LEN + 2..REQ_LEN + 4], &3u16.to_ne_bytes());
        assert_eq!(&r[REQ_LEN + 4..], &262u32.to_ne_bytes());
    }

    #[test]
    fn parses_the_info_prefix_and_refuses_short_input() {
        let mut b = vec![0u8; 48];
        b[0] = 1;
        b[12..16].copy_from_slice(&0xdead_beefu32.to_ne_bytes());
        b[16..24].copy_from_slice(&1_000_000u64.to_ne_bytes());
        b[24..32].copy_from_slice(&999_000u64.to_ne_bytes());
        let i = MptcpInfo::parse(&b).unwrap();
        assert_eq!((i.token, i.subflows, i.unacked()), (0xdead_beef, 1, 1000));
        assert!(MptcpInfo::parse(&b[..20]).is_err());
        // A reply whose info attribute is cut: an error, not a panic.
        let mut msg = vec![0u8; MSG_LEN];
        msg.extend(12u16.to_ne_bytes());
        msg.extend(INET_DIAG_INFO.to_ne_bytes());
        msg.extend([0u8; 8]);
        assert!(MptcpInfo::parse(info_of(&msg).unwrap().unwrap()).is_err());
        assert_eq!(info_of(&[0u8; MSG_LEN]).unwrap(), None);
        assert!(info_of(&[0u8; 10]).is_err());
    }

    #[test]
    fn reads_a_subflow_four_tuple_and_what_it_holds() {
        let mut msg = vec![0u8; MSG_LEN];
        msg[0] = 2;
        msg[4..6].copy_from_slice(&40000u16.to_be_bytes());
        msg[6..8].copy_from_slice(&5201u16.to_be_bytes());
        msg[8..12].copy_from_slice(&[10, 0, 1, 1]);
        msg[24..28].copy_from_slice(&[10, 0, 9, 2]);
        let mut info = vec![0u8; 160];
        info[24..28].copy_from_slice(&3u32.to_ne_bytes());
        info[144..148].copy_from_slice(&5000u32.to_ne_bytes());
        info[120..128].copy_from_slice(&7_000_000_000u64.to_ne_bytes());
        info[128..136].copy_from_slice(&42u64.to_ne_bytes());
        info[4] = 3;
        let t = tcp_state(&msg, &info).unwrap();
        assert_eq!(t.local, "10.0.1.1:40000".parse().unwrap());
        assert_eq!(t.remote, "10.0.9.2:5201".parse().unwrap());
        assert_eq!((t.unacked, t.notsent), (3, 5000));
        assert_eq!((t.bytes_acked, t.bytes_received), (7_000_000_000, 42));
        assert!(t.holds_data());
        assert_eq!(t.backoff, 3);
        assert!(t.in_backoff());
        assert!(tcp_state(&msg, &info[..100]).is_err());
    }
}
