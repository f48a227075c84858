//! Just enough of the IPv4 and IPv6 headers to know where a packet ends.
//!
//! IPv4 (RFC 791 §3.1): version in the high nibble of byte 0, IHL (header length in 32-bit
//! words) in its low nibble, total length (header included) at bytes 2..4, big-endian.
//! IPv6 (RFC 8200 §3): version in the high nibble of byte 0, payload length (bytes after the
//! 40-byte fixed header, extension headers included) at bytes 4..6, big-endian.
//!
//! IPv6 jumbograms (RFC 2675: payload length 0, real length in a hop-by-hop option) are not
//! supported: a payload length of 0 is read as a 40-byte packet. The tunnel's MTU is far below
//! 65 575 bytes, so no jumbogram can come from the TUN device, and [`validate_packet`] refuses
//! one (its header length differs from its real length).

use thiserror::Error;

/// Bytes of the smallest IPv4 header (IHL = 5).
pub const IPV4_MIN_HEADER: usize = 20;
/// Bytes of the fixed IPv6 header.
pub const IPV6_HEADER: usize = 40;
/// The largest length an IP header can state (IPv4 total length, IPv6 40 + payload length
/// are both capped here by the tunnel).
pub const MAX_IP_PACKET: usize = 65_535;

/// Why a packet, or the header at the start of the stream, is not a valid IP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum FrameError {
    /// The version nibble is neither 4 nor 6.
    #[error("IP version {version} is neither 4 nor 6")]
    BadVersion {
        /// The version nibble found.
        version: u8,
    },
    /// The length the header states is shorter than the header itself (IPv4 IHL < 5, or total
    /// length < IHL·4).
    #[error("IP packet length {len} is shorter than its header ({min} bytes)")]
    TooShort {
        /// The length found.
        len: usize,
        /// The header's length.
        min: usize,
    },
    /// The length the header states exceeds the configured maximum packet size.
    #[error("IP packet length {len} exceeds the maximum of {max} bytes")]
    TooLong {
        /// The length found.
        len: usize,
        /// The configured maximum.
        max: usize,
    },
    /// A packet handed to PtoS has fewer bytes than the fixed part of its header.
    #[error("packet of {len} bytes is too short to hold an IP header")]
    Truncated {
        /// The packet's length.
        len: usize,
    },
    /// A packet handed to PtoS is not as long as its header says (truncated read, trailing
    /// bytes, or an IPv6 jumbogram).
    #[error("packet of {actual} bytes but its IP header says {stated}")]
    LengthMismatch {
        /// The length in the header.
        stated: usize,
        /// The packet's real length.
        actual: usize,
    },
}

/// The length of the IP packet that starts at `head`, read from its header.
///
/// `Ok(None)` means more bytes are needed to tell (at most 6: IPv6 keeps its length at
/// bytes 4..6). `max_len` is the largest packet accepted.
pub fn packet_len(head: &[u8], max_len: usize) -> Result<Option<usize>, FrameError> {
    let Some(&b0) = head.first() else {
        return Ok(None);
    };
    let len = match b0 >> 4 {
        4 => {
            // RFC 791 §3.1: IHL counts 32-bit words; 5 is the smallest valid value.
            let header = usize::from(b0 & 0x0f) * 4;
            if header < IPV4_MIN_HEADER {
                return Err(FrameError::TooShort {
                    len: header,
                    min: IPV4_MIN_HEADER,
                });
            }
            let Some(total) = be16(head, 2) else {
                return Ok(None);
            };
            if total < header {
                return Err(FrameError::TooShort {
                    len: total,
                    min: header,
                });
            }
            total
        }
        // RFC 8200 §3: the payload length excludes the 40-byte fixed header.
        6 => match be16(head, 4) {
            Some(payload) => IPV6_HEADER + payload,
            None => return Ok(None),
        },
        version => return Err(FrameError::BadVersion { version }),
    };
    if len > max_len {
        return Err(FrameError::TooLong { len, max: max_len });
    }
    Ok(Some(len))
}

/// Checks that `packet` is exactly one whole IP packet of at most `max_len` bytes, as StoP
/// on the far side will read it.
pub fn validate_packet(packet: &[u8], max_len: usize) -> Result<(), FrameError> {
    match packet_len(packet, max_len)? {
        None => Err(FrameError::Truncated { len: packet.len() }),
        Some(stated) if stated != packet.len() => Err(FrameError::LengthMismatch {
            stated,
            actual: packet.len(),
        }),
        Some(_) => Ok(()),
    }
}

/// The source address of an IP packet (`None`: too short or not IPv4/IPv6).
pub fn source(p: &[u8]) -> Option<std::net::IpAddr> {
    address(p, 12, 8)
}

/// The destination address of an IP packet (`None`: too short or not IPv4/IPv6).
pub fn destination(p: &[u8]) -> Option<std::net::IpAddr> {
    address(p, 16, 24)
}

/// The address at byte `v4` of an IPv4 header or `v6` of an IPv6 one.
fn address(p: &[u8], v4: usize, v6: usize) -> Option<std::net::IpAddr> {
    match p.first()? >> 4 {
        4 => Some(<[u8; 4]>::try_from(p.get(v4..v4 + 4)?).ok()?.into()),
        6 => Some(<[u8; 16]>::try_from(p.get(v6..v6 + 16)?).ok()?.into()),
        _ => None,
    }
}

fn be16(bytes: &[u8], at: usize) -> Option<usize> {
    let b = bytes.get(at..at + 2)?;
    Some(usize::from(u16::from_be_bytes([b[0], b[1]])))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_length_needs_four_bytes() {
        assert_eq!(packet_len(&[0x45, 0, 0], 1500), Ok(None));
        assert_eq!(packet_len(&[0x45, 0, 0, 60], 1500), Ok(Some(60)));
    }

    #[test]
    fn ipv6_length_is_header_plus_payload() {
        assert_eq!(packet_len(&[0x60, 0, 0, 0, 0], 1500), Ok(None));
        assert_eq!(packet_len(&[0x60, 0, 0, 0, 0, 8], 1500), Ok(Some(48)));
        // Payload length 0 is a bare header (jumbograms are not supported).
        assert_eq!(packet_len(&[0x60, 0, 0, 0, 0, 0], 1500), Ok(Some(40)));
    }

    #[test]
    fn invalid_headers_are_errors() {
        assert_eq!(
            packet_len(&[0x55], 1500),
            Err(FrameError::BadVersion { version: 5 })
        );
        assert_eq!(
            packet_len(&[0x44], 1500),
            Err(FrameError::TooShort { len: 16, min: 20 })
        );
        assert_eq!(
            packet_len(&[0x46, 0, 0, 20], 1500),
            Err(FrameError::TooShort { len: 20, min: 24 })
        );
        assert_eq!(
            packet_len(&[0x45, 0, 0x05, 0xdd], 1500),
            Err(FrameError::TooLong {
                len: 1501,
                max: 1500
            })
        );
    }

    #[test]
    fn source_and_destination_of_both_families() {
        let mut v4 = vec![0u8; 20];
        v4[0] = 0x45;
        v4[12..16].copy_from_slice(&[10, 0, 0, 1]);
        v4[16..20].copy_from_slice(&[10, 0, 0, 2]);
        assert_eq!(source(&v4), Some("10.0.0.1".parse().unwrap()));
        assert_eq!(destination(&v4), Some("10.0.0.2".parse().unwrap()));
        assert_eq!(destination(&v4[..19]), None);
        let mut v6 = vec![0u8; 40];
        v6[0] = 0x60;
        v6[23] = 1;
        v6[39] = 2;
        assert_eq!(source(&v6), Some("::1".parse().unwrap()));
        assert_eq!(destination(&v6), Some("::2".parse().unwrap()));
        assert_eq!(source(&[0x50; 40]), None);
        assert_eq!(source(&[]), None);
    }

    #[test]
    fn validate_requires_exact_length() {
        let mut p = vec![0u8; 28];
        p[0] = 0x45;
        p[3] = 28;
        assert_eq!(validate_packet(&p, 1500), Ok(()));
        assert_eq!(
            validate_packet(&p[..27], 1500),
            Err(FrameError::LengthMismatch {
                stated: 28,
                actual: 27
            })
        );
        assert_eq!(
            validate_packet(&p[..3], 1500),
            Err(FrameError::Truncated { len: 3 })
        );
    }
}
