//! An AF_PACKET socket bound to one interface: whole Ethernet frames in and out, so the
//! emulator is transparent to everything above L2 (ARP, IPv6 neighbour discovery, any
//! protocol). The frames the socket itself sends are not read back (`PACKET_IGNORE_OUTGOING`).
//!
//! The only unsafe code of the crate: `sockaddr_ll` and the `PACKET_*` options have no safe
//! constructor in socket2 or nix (nor `SO_RCVBUFFORCE` and `SIOCOUTQNSD`, see
//! [`force_receive_buffer`] and [`unsent_bytes`]); nor has std a thread's nice value
//! ([`set_nice`]).

#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// `ETH_P_ALL` in network byte order, as `socket(2)` and `sockaddr_ll` take it.
const ALL: u16 = (libc::ETH_P_ALL as u16).to_be();
/// Receive and send buffers: a burst at 1 Gbit/s for ~30 ms.
const BUFFER: libc::c_int = 4 << 20;

/// A packet socket on one interface of the namespace it was opened in.
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
    /// Frames the kernel dropped because the receive buffer was full, summed over reads of
    /// `PACKET_STATISTICS` (which resets it).
    kernel_drops: u64,
}

impl PacketSocket {
    /// Opens a non-blocking packet socket bound to `ifname` (all protocols).
    pub fn open(ifname: &str) -> io::Result<PacketSocket> {
        let name = CString::new(ifname)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name has NUL"))?;
        // SAFETY: a NUL-terminated string that outlives the call.
        let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if index == 0 {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no interface `{ifname}` in this namespace"),
            ));
        }
        // SAFETY: plain system call; the result is checked before use.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                i32::from(ALL),
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: sockaddr_ll is plain data; all-zero is a valid value before the fields set.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ALL;
        sll.sll_ifindex = index as i32;
        // SAFETY: the address points to a live sockaddr_ll of the length given.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        let s = PacketSocket {
            fd,
            kernel_drops: 0,
        };
        s.set(libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, 1)?;
        // The forced variants pass the system limits (we run as root); plain ones otherwise.
        s.set(libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, BUFFER)
            .or_else(|_| s.set(libc::SOL_SOCKET, libc::SO_RCVBUF, BUFFER))?;
        s.set(libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, BUFFER)
            .or_else(|_| s.set(libc::SOL_SOCKET, libc::SO_SNDBUF, BUFFER))?;
        Ok(s)
    }

    fn set(&self, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
        set_int(&self.fd, level, name, value)
    }

    /// Reads one frame without waiting: `Ok(None)` when none is queued. A frame longer than
    /// `buf` is cut to it; the returned length is the frame's full length.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        // SAFETY: the buffer is live and writable for its length.
        let n = unsafe {
            libc::recv(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            // ENETDOWN/ENXIO: the interface lost its carrier (an endpoint set its side of the
            // link down); reading it clears the error, frames resume when the link returns.
            return match e.raw_os_error() {
                Some(libc::EAGAIN | libc::EINTR | libc::ENETDOWN | libc::ENXIO) => Ok(None),
                _ => Err(e),
            };
        }
        Ok(Some(n as usize))
    }

    /// Sends one frame on the bound interface.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        // SAFETY: the frame is live and readable for its length.
        let n = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                frame.as_ptr().cast(),
                frame.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// Waits until a frame (or an error) can be read or `timeout` passes (nanosecond
    /// resolution); whether one can be read.
    pub fn wait(&self, timeout: Duration) -> io::Result<bool> {
        let mut p = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
        };
        // SAFETY: one live pollfd and a live timespec; no signal mask.
        let r = unsafe { libc::ppoll(&mut p, 1, &ts, std::ptr::null()) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(e)
            };
        }
        // POLLERR too: the pending error is read (and cleared) by the next `recv`.
        Ok(r > 0 && p.revents & (libc::POLLIN | libc::POLLERR) != 0)
    }

    /// Frames dropped by the kernel for want of receive buffer since the socket opened.
    pub fn kernel_drops(&mut self) -> u64 {
        let mut st = libc::tpacket_stats {
            tp_packets: 0,
            tp_drops: 0,
        };
        let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
        // SAFETY: the value points to a live tpacket_stats and `len` holds its size.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut st as *mut libc::tpacket_stats).cast(),
                &mut len,
            )
        };
        if r == 0 {
            self.kernel_drops += u64::from(st.tp_drops);
        }
        self.kernel_drops
    }
}

/// Sets a socket's receive buffer past `net.core.rmem_max` (`SO_RCVBUFFORCE`, root).
pub fn force_receive_buffer(sock: &impl AsRawFd, bytes: usize) -> io::Result<()> {
    let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    set_int(sock, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, value)
}

/// `setsockopt` of an integer option.
fn set_int(
    sock: &impl AsRawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: the option value points to a live c_int of the length given.
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Bytes a TCP (or MPTCP) socket holds that it has not sent yet (`SIOCOUTQNSD`): what the
/// application wrote minus this is what went onto the network.
pub fn unsent_bytes(sock: &impl AsRawFd) -> io::Result<u64> {
    const SIOCOUTQNSD: libc::c_ulong = 0x894B;
    let mut n: libc::c_int = 0;
    // SAFETY: the ioctl writes one c_int to the live `n`.
    let r = unsafe {
        libc::ioctl(
            sock.as_raw_fd(),
            SIOCOUTQNSD as _,
            &mut n as *mut libc::c_int,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(u64::try_from(n).unwrap_or(0))
    }
}

/// Sets the calling thread's nice value (per thread on Linux, `setpriority(2)`): at -20 it
/// takes a CPU from ordinary threads as soon as it wakes, instead of waiting for a busy CPU's
/// time slice (milliseconds), yet stays in the ordinary class, so a busy emulator cannot
/// starve the endpoints outright as a real-time thread could. Lowering it needs
/// `CAP_SYS_NICE`.
pub fn set_nice(nice: i32) -> io::Result<()> {
    // SAFETY: plain integer arguments; `who` 0 is the calling thread.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Whether an Ethernet frame is a TCP segment with payload (IPv4 or IPv6 without extension
/// headers): data or its retransmission, not a bare acknowledgement or handshake. Anything
/// malformed or shorter than its headers is not.
pub fn carries_tcp_payload(frame: &[u8]) -> bool {
    const ETH: usize = 14;
    const TCP: u8 = 6;
    let Some(&[t0, t1]) = frame.get(12..ETH) else {
        return false;
    };
    let ip = &frame[ETH..];
    // (header length, IP payload length) of the IP packet.
    let (hdr, payload) = match u16::from_be_bytes([t0, t1]) {
        0x0800 => {
            let (Some(&vihl), Some(&[l0, l1]), Some(&proto)) =
                (ip.first(), ip.get(2..4), ip.get(9))
            else {
                return false;
            };
            let ihl = usize::from(vihl & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([l0, l1]));
            if proto != TCP || ihl < 20 || total < ihl {
                return false;
            }
            (ihl, total - ihl)
        }
        0x86dd => {
            let (Some(&[l0, l1]), Some(&next)) = (ip.get(4..6), ip.get(6)) else {
                return false;
            };
            if next != TCP {
                return false;
            }
            (40, usize::from(u16::from_be_bytes([l0, l1])))
        }
        _ => return false,
    };
    let Some(&off) = ip.get(hdr + 12) else {
        return false;
    };
    let tcp_hdr = usize::from(off >> 4) * 4;
    tcp_hdr >= 20 && payload > tcp_hdr
}

#[cfg(test)]
mod tests {
    use super::carries_tcp_payload;
    use proptest::prelude::*;

    /// Ethernet + IPv4 + TCP with `payload` bytes (TCP header with 12 bytes of options).
    fn v4(proto: u8, payload: usize) -> Vec<u8> {
        let mut f = vec![0u8; 14];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        let total = 20 + 32 + payload;
        let mut ip = vec![0u8; 20];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        ip[9] = proto;
        f.extend(ip);
        let mut tcp = vec![0u8; 32];
        tcp[12] = 8 << 4;
        f.extend(tcp);
        f.extend(vec![0xab; payload]);
        f
    }

    fn v6(payload: usize) -> Vec<u8> {
        let mut f = vec![0u8; 14];
        f[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
        let mut ip = vec![0u8; 40];
        ip[0] = 0x60;
        ip[4..6].copy_from_slice(&((20 + payload) as u16).to_be_bytes());
        ip[6] = 6;
        f.extend(ip);
        let mut tcp = vec![0u8; 20];
        tcp[12] = 5 << 4;
        f.extend(tcp);
        f.extend(vec![0xab; payload]);
        f
    }

    #[test]
    fn data_segments_are_told_from_acknowledgements() {
        assert!(carries_tcp_payload(&v4(6, 1))); // data
        assert!(carries_tcp_payload(&v4(6, 1400)));
        assert!(!carries_tcp_payload(&v4(6, 0))); // a bare ACK (options: DSS, SACK, timestamps)
        assert!(!carries_tcp_payload(&v4(17, 100))); // UDP
        assert!(carries_tcp_payload(&v6(1200)));
        assert!(!carries_tcp_payload(&v6(0)));
        // Ethernet padding of a short frame is not payload: the IP length says so.
        let mut ack = v4(6, 0);
        ack.extend([0; 6]);
        assert!(!carries_tcp_payload(&ack));
        // Truncated frames are not data.
        let f = v4(6, 100);
        for n in 0..40 {
            assert!(!carries_tcp_payload(&f[..n]), "{n} bytes");
        }
    }

    proptest! {
        #[test]
        fn any_bytes_are_classified_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
            let _ = carries_tcp_payload(&bytes);
        }
    }
}
