//! A tokio netlink socket that sends one request at a time and collects the replies
//! up to the kernel's ACK, error or end of dump. Shared by the generic-netlink
//! client, the event stream and the rtnetlink monitor.
//!
//! Replies are matched by sequence number and port id, so replies to a request whose
//! future was dropped are skipped by the next request. Notifications of a joined
//! multicast group that arrive while a request waits for its replies are kept, in
//! order, for [`NlSocket::recv`].

use std::collections::VecDeque;
use std::io;

use netlink_packet_core::{
    NLM_F_ACK, NLM_F_ACK_TLVS, NLM_F_CAPPED, NLM_F_DUMP, NLM_F_REQUEST, NLMSG_DONE, NLMSG_ERROR,
    NetlinkBuffer, NetlinkHeader, NetlinkMessage, NetlinkPayload, NetlinkSerializable,
};
use netlink_sys::{AsyncSocket, AsyncSocketExt, SocketAddr, TokioSocket};

use crate::genl::attr::{self, ParseError};

/// `NLMSGERR_ATTR_MSG` (include/uapi/linux/netlink.h): the extended-ACK text.
const NLMSGERR_ATTR_MSG: u16 = 1;
/// `sizeof(struct nlmsghdr)`.
const NLMSG_HDRLEN: usize = 16;
/// Receive buffer of event sockets: room for bursts of events.
const EVENT_RCVBUF: usize = 1 << 20;

/// A request failed.
#[derive(Debug)]
pub(crate) enum RequestError {
    Io(io::Error),
    /// The kernel answered with a negative errno (made positive here).
    Kernel {
        errno: i32,
        message: Option<String>,
    },
    Parse(ParseError),
}

impl From<io::Error> for RequestError {
    fn from(e: io::Error) -> Self {
        RequestError::Io(e)
    }
}

impl From<ParseError> for RequestError {
    fn from(e: ParseError) -> Self {
        RequestError::Parse(e)
    }
}

/// One netlink message of a datagram: its header fields and payload.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Frame<'a> {
    pub(crate) kind: u16,
    pub(crate) flags: u16,
    pub(crate) seq: u32,
    /// `nlmsg_pid`: our port id on replies, 0 or another socket's on notifications.
    pub(crate) pid: u32,
    /// The whole message, header included.
    pub(crate) bytes: &'a [u8],
    /// The payload after the 16-byte header.
    pub(crate) payload: &'a [u8],
}

/// Splits a datagram into its netlink messages. A truncated or inconsistent header
/// ends the walk with an error.
pub(crate) fn frames(buf: &[u8]) -> impl Iterator<Item = Result<Frame<'_>, ParseError>> {
    let mut rest = buf;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let nb = match NetlinkBuffer::new_checked(rest) {
            Ok(nb) => nb,
            Err(e) => {
                rest = &[];
                return Some(Err(ParseError::from(e)));
            }
        };
        // new_checked: NLMSG_HDRLEN <= len <= rest.len().
        let len = nb.length() as usize;
        let bytes = &rest[..len];
        let frame = Frame {
            kind: nb.message_type(),
            flags: nb.flags(),
            seq: nb.sequence_number(),
            pid: nb.port_number(),
            bytes,
            payload: &bytes[NLMSG_HDRLEN..],
        };
        let aligned = (len + 3) & !3;
        rest = rest.get(aligned..).unwrap_or(&[]);
        Some(Ok(frame))
    })
}

/// The errno and extended-ACK message of an `NLMSG_ERROR` or `NLMSG_DONE` frame
/// (`struct nlmsgerr` and `netlink_ack()` in net/netlink/af_netlink.c). The errno is
/// positive; 0 is an ACK.
pub(crate) fn error_of(frame: &Frame<'_>) -> Result<(i32, Option<String>), ParseError> {
    let code = frame
        .payload
        .get(..4)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(i32::from_ne_bytes)
        .ok_or_else(|| {
            ParseError::Framing("NLMSG_ERROR/DONE shorter than its error code".into())
        })?;
    let after = frame.payload.get(4..).unwrap_or(&[]);
    let tlvs = if frame.kind == NLMSG_DONE {
        Some(after)
    } else if frame.flags & NLM_F_CAPPED != 0 {
        after.get(NLMSG_HDRLEN..)
    } else {
        // The whole request is echoed; its own header gives its length.
        let echoed = after
            .get(..4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map(|b| (u32::from_ne_bytes(b) as usize + 3) & !3);
        echoed.and_then(|n| after.get(n..))
    };
    let mut message = None;
    if frame.flags & NLM_F_ACK_TLVS != 0 || frame.kind == NLMSG_DONE {
        for (kind, v) in attr::walk(tlvs.unwrap_or(&[])).flatten() {
            if kind == NLMSGERR_ATTR_MSG {
                let text = v.split(|&b| b == 0).next().unwrap_or(&[]);
                message = Some(String::from_utf8_lossy(text).into_owned());
            }
        }
    }
    Ok((code.saturating_neg(), message))
}

/// A request payload given as bytes, for messages without a typed form here
/// (rtnetlink dumps).
#[derive(Debug)]
pub(crate) struct RawPayload {
    /// `nlmsg_type`.
    pub(crate) kind: u16,
    /// Everything after the netlink header.
    pub(crate) bytes: Vec<u8>,
}

impl NetlinkSerializable for RawPayload {
    fn message_type(&self) -> u16 {
        self.kind
    }

    fn buffer_len(&self) -> usize {
        self.bytes.len()
    }

    fn serialize(&self, buffer: &mut [u8]) {
        buffer.copy_from_slice(&self.bytes)
    }
}

/// A netlink socket registered with the tokio reactor of the current runtime.
pub(crate) struct NlSocket {
    sock: TokioSocket,
    seq: u32,
    /// The port id the kernel gave the socket at bind time.
    port: u32,
    /// Whether the socket joined a multicast group (then notifications received
    /// during a request are kept).
    joined: bool,
    /// Notifications received during a request, one message each.
    kept: VecDeque<Vec<u8>>,
}

impl NlSocket {
    /// Opens a socket of `protocol` (`NETLINK_GENERIC`, `NETLINK_ROUTE`) in the
    /// network namespace of the calling thread, with extended ACKs. Must be called
    /// inside a tokio runtime with I/O enabled.
    pub(crate) fn open(protocol: isize) -> io::Result<NlSocket> {
        let mut sock = TokioSocket::new(protocol)?;
        let s = sock.socket_mut();
        let addr = s.bind_auto()?;
        // Errors carry the kernel's message; the echoed request is capped to its header.
        s.set_ext_ack(true)?;
        s.set_cap_ack(true)?;
        Ok(NlSocket {
            sock,
            seq: 0,
            port: addr.port_number(),
            joined: false,
            kept: VecDeque::new(),
        })
    }

    /// Joins multicast group `group` and enlarges the receive buffer.
    pub(crate) fn join(&mut self, group: u32) -> io::Result<()> {
        let s = self.sock.socket_mut();
        s.add_membership(group)?;
        s.set_rx_buf_sz(EVENT_RCVBUF)?;
        self.joined = true;
        Ok(())
    }

    /// Receives one datagram: first the notifications kept during requests (one
    /// message each), then from the socket. Cancel-safe: a datagram is either
    /// returned or left in the socket.
    pub(crate) async fn recv(&mut self) -> io::Result<Vec<u8>> {
        if let Some(kept) = self.kept.pop_front() {
            return Ok(kept);
        }
        self.recv_socket().await
    }

    async fn recv_socket(&mut self) -> io::Result<Vec<u8>> {
        let (buf, _) = self.sock.recv_from_full().await?;
        Ok(buf)
    }

    /// Sends `payload` as a request (with `NLM_F_DUMP` if `dump`) and returns the
    /// reply messages (whole frames), stopping at the ACK or at `NLMSG_DONE`.
    pub(crate) async fn request<T>(
        &mut self,
        payload: T,
        dump: bool,
    ) -> Result<Vec<Vec<u8>>, RequestError>
    where
        T: NetlinkSerializable,
    {
        self.request_with_flags(payload, 0, dump).await
    }

    /// [`request`](Self::request) with more header flags (`NLM_F_CREATE`, `NLM_F_REPLACE`…).
    pub(crate) async fn request_with_flags<T>(
        &mut self,
        payload: T,
        flags: u16,
        dump: bool,
    ) -> Result<Vec<Vec<u8>>, RequestError>
    where
        T: NetlinkSerializable,
    {
        self.seq = self.seq.wrapping_add(1).max(1);
        let seq = self.seq;
        let mut header = NetlinkHeader::default();
        // Dumps end with NLMSG_DONE; asking an ACK too would add a trailing message.
        header.flags = flags | NLM_F_REQUEST | if dump { NLM_F_DUMP } else { NLM_F_ACK };
        header.sequence_number = seq;
        let mut msg = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(payload));
        msg.finalize();
        let mut buf = vec![0; msg.buffer_len()];
        msg.serialize(&mut buf);
        self.sock.send_to(&buf, &SocketAddr::new(0, 0)).await?;

        let mut replies = Vec::new();
        loop {
            let datagram = self.recv_socket().await?;
            for frame in frames(&datagram) {
                let frame = frame?;
                if frame.pid != self.port || frame.seq != seq {
                    // A notification (its pid is the sender's, 0 for the kernel), or
                    // a late reply to an abandoned request.
                    if self.joined && frame.pid != self.port {
                        self.kept.push_back(frame.bytes.to_vec());
                    }
                    continue;
                }
                match frame.kind {
                    NLMSG_ERROR | NLMSG_DONE => {
                        let (errno, message) = error_of(&frame)?;
                        if errno != 0 {
                            return Err(RequestError::Kernel { errno, message });
                        }
                        return Ok(replies);
                    }
                    k if k < 0x10 => {} // NOOP, OVERRUN and other reserved types
                    _ => replies.push(frame.bytes.to_vec()),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame_bytes(kind: u16, flags: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
        let len = (NLMSG_HDRLEN + payload.len()) as u32;
        let mut v = Vec::new();
        v.extend(len.to_ne_bytes());
        v.extend(kind.to_ne_bytes());
        v.extend(flags.to_ne_bytes());
        v.extend(seq.to_ne_bytes());
        v.extend(7u32.to_ne_bytes());
        v.extend(payload);
        while v.len() % 4 != 0 {
            v.push(0);
        }
        v
    }

    #[test]
    fn splits_datagrams() {
        let mut d = frame_bytes(30, 0, 1, &[1, 2, 3]);
        d.extend(frame_bytes(31, 0, 2, &[]));
        let f: Vec<_> = frames(&d).map(Result::unwrap).collect();
        assert_eq!(f.len(), 2);
        assert_eq!(
            (f[0].kind, f[0].seq, f[0].payload),
            (30, 1, &[1u8, 2, 3][..])
        );
        assert_eq!((f[1].kind, f[1].payload.len()), (31, 0));
        let bad: Vec<_> = frames(&d[..10]).collect();
        assert!(bad[0].is_err());
    }

    #[test]
    fn reads_capped_error_with_extack_message() {
        let mut p = Vec::new();
        p.extend((-22i32).to_ne_bytes());
        p.extend(frame_bytes(0x20, 5, 9, &[])); // echoed header only (capped)
        p.extend([18, 0, 1, 0]);
        p.extend(b"invalid token\0\0\0");
        let d = frame_bytes(NLMSG_ERROR, NLM_F_CAPPED | NLM_F_ACK_TLVS, 9, &p);
        let f = frames(&d).next().unwrap().unwrap();
        assert_eq!(
            error_of(&f).unwrap(),
            (22, Some("invalid token".to_string()))
        );
    }

    #[test]
    fn reads_uncapped_error_and_ack() {
        let mut p = Vec::new();
        p.extend((-2i32).to_ne_bytes());
        p.extend(frame_bytes(0x20, 5, 9, &[1, 2, 3, 4, 5, 6, 7, 8])); // whole request echoed
        let d = frame_bytes(NLMSG_ERROR, 0, 9, &p);
        let f = frames(&d).next().unwrap().unwrap();
        assert_eq!(error_of(&f).unwrap(), (2, None));
        let ack = frame_bytes(NLMSG_ERROR, NLM_F_CAPPED, 9, &[0; 20]);
        let f = frames(&ack).next().unwrap().unwrap();
        assert_eq!(error_of(&f).unwrap(), (0, None));
        let short = frame_bytes(NLMSG_ERROR, 0, 9, &[0; 2]);
        let f = frames(&short).next().unwrap().unwrap();
        assert!(error_of(&f).is_err());
    }
}
