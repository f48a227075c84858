//! Netlink attributes (NLAs): a small builder for emitting and checked readers for
//! parsing, on top of `netlink-packet-core`'s `Nla` and `NlasIterator`.
//!
//! Readers never panic: a value of the wrong length is a [`ParseError`], not a slice
//! index out of bounds.

use std::net::{Ipv4Addr, Ipv6Addr};

use netlink_packet_core::{Emitable, NLA_F_NESTED, Nla, NlasIterator};

/// A kernel message that could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    /// The framing (netlink header, generic-netlink header or an attribute header)
    /// is cut short or inconsistent.
    #[error("malformed netlink message: {0}")]
    Framing(String),
    /// An attribute has a value of the wrong size.
    #[error("attribute {name} has {got} bytes, expected {expected}")]
    BadLength {
        /// The attribute's name in the kernel header.
        name: &'static str,
        /// The size the kernel header gives.
        expected: usize,
        /// The size received.
        got: usize,
    },
    /// A required attribute is absent.
    #[error("attribute {0} is missing")]
    Missing(&'static str),
    /// An address family other than `AF_INET` (2) or `AF_INET6` (10).
    #[error("unknown address family {0}")]
    BadFamily(u16),
    /// A generic-netlink command number that is not in `mptcp_pm.h`.
    #[error("unknown mptcp_pm command {0}")]
    UnknownCommand(u8),
}

impl From<netlink_packet_core::DecodeError> for ParseError {
    fn from(e: netlink_packet_core::DecodeError) -> Self {
        ParseError::Framing(e.to_string())
    }
}

/// One attribute to emit. Integers are host order unless the variant says `Be`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Attr {
    U8(u16, u8),
    U16(u16, u16),
    Be16(u16, u16),
    U32(u16, u32),
    I32(u16, i32),
    Bytes(u16, Vec<u8>),
    Nested(u16, Vec<Attr>),
}

impl Attr {
    pub(crate) fn ipv4(kind: u16, a: Ipv4Addr) -> Attr {
        Attr::Bytes(kind, a.octets().to_vec())
    }

    pub(crate) fn ipv6(kind: u16, a: Ipv6Addr) -> Attr {
        Attr::Bytes(kind, a.octets().to_vec())
    }
}

impl Nla for Attr {
    fn value_len(&self) -> usize {
        match self {
            Attr::U8(..) => 1,
            Attr::U16(..) | Attr::Be16(..) => 2,
            Attr::U32(..) | Attr::I32(..) => 4,
            Attr::Bytes(_, v) => v.len(),
            Attr::Nested(_, v) => v.as_slice().buffer_len(),
        }
    }

    fn kind(&self) -> u16 {
        match self {
            Attr::U8(k, _)
            | Attr::U16(k, _)
            | Attr::Be16(k, _)
            | Attr::U32(k, _)
            | Attr::I32(k, _)
            | Attr::Bytes(k, _) => *k,
            Attr::Nested(k, _) => *k | NLA_F_NESTED,
        }
    }

    fn emit_value(&self, buf: &mut [u8]) {
        match self {
            Attr::U8(_, v) => buf.copy_from_slice(&[*v]),
            Attr::U16(_, v) => buf.copy_from_slice(&v.to_ne_bytes()),
            Attr::Be16(_, v) => buf.copy_from_slice(&v.to_be_bytes()),
            Attr::U32(_, v) => buf.copy_from_slice(&v.to_ne_bytes()),
            Attr::I32(_, v) => buf.copy_from_slice(&v.to_ne_bytes()),
            Attr::Bytes(_, v) => buf.copy_from_slice(v),
            Attr::Nested(_, v) => v.as_slice().emit(buf),
        }
    }
}

/// Emits a list of attributes into a fresh buffer.
pub(crate) fn emit_attrs(attrs: &[Attr]) -> Vec<u8> {
    let mut buf = vec![0; attrs.buffer_len()];
    attrs.emit(&mut buf);
    buf
}

/// Walks the attributes of `buf`: `(kind without flags, value)` pairs. A truncated
/// attribute header ends the walk with an error.
pub(crate) fn walk(buf: &[u8]) -> impl Iterator<Item = Result<(u16, &[u8]), ParseError>> {
    NlasIterator::new(buf).map(|r| {
        r.map(|nla| (nla.kind(), nla.into_inner_value()))
            .map_err(ParseError::from)
    })
}

/// The value slice of an `NlaBuffer` with the buffer's own lifetime.
trait IntoInnerValue<'a> {
    fn into_inner_value(self) -> &'a [u8];
}

impl<'a> IntoInnerValue<'a> for netlink_packet_core::NlaBuffer<&'a [u8]> {
    fn into_inner_value(self) -> &'a [u8] {
        let len = self.value_length();
        let inner: &'a [u8] = self.into_inner();
        // `new_checked` (inside `NlasIterator`) guaranteed 4 + len <= inner.len().
        inner.get(4..4 + len).unwrap_or(&[])
    }
}

fn exact<const N: usize>(name: &'static str, v: &[u8]) -> Result<[u8; N], ParseError> {
    v.try_into().map_err(|_| ParseError::BadLength {
        name,
        expected: N,
        got: v.len(),
    })
}

pub(crate) fn get_u8(name: &'static str, v: &[u8]) -> Result<u8, ParseError> {
    Ok(exact::<1>(name, v)?[0])
}

pub(crate) fn get_u16(name: &'static str, v: &[u8]) -> Result<u16, ParseError> {
    Ok(u16::from_ne_bytes(exact(name, v)?))
}

pub(crate) fn get_be16(name: &'static str, v: &[u8]) -> Result<u16, ParseError> {
    Ok(u16::from_be_bytes(exact(name, v)?))
}

pub(crate) fn get_u32(name: &'static str, v: &[u8]) -> Result<u32, ParseError> {
    Ok(u32::from_ne_bytes(exact(name, v)?))
}

pub(crate) fn get_i32(name: &'static str, v: &[u8]) -> Result<i32, ParseError> {
    Ok(i32::from_ne_bytes(exact(name, v)?))
}

pub(crate) fn get_ipv4(name: &'static str, v: &[u8]) -> Result<Ipv4Addr, ParseError> {
    Ok(Ipv4Addr::from(exact::<4>(name, v)?))
}

pub(crate) fn get_ipv6(name: &'static str, v: &[u8]) -> Result<Ipv6Addr, ParseError> {
    Ok(Ipv6Addr::from(exact::<16>(name, v)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emits_padding_and_nested_flag() {
        let buf = emit_attrs(&[Attr::U8(2, 7), Attr::Nested(1, vec![Attr::U16(1, 2)])]);
        // u8 attr: len 5, padded to 8.
        assert_eq!(&buf[..8], &[5, 0, 2, 0, 7, 0, 0, 0]);
        // nested: len 4 + 8, type 1 | NLA_F_NESTED.
        assert_eq!(&buf[8..12], &[12, 0, 1, 0x80]);
        let kinds: Vec<u16> = walk(&buf).map(|r| r.unwrap().0).collect();
        assert_eq!(kinds, vec![2, 1]);
    }

    #[test]
    fn wrong_length_is_an_error() {
        assert!(matches!(
            get_u32("X", &[1, 2, 3]),
            Err(ParseError::BadLength { .. })
        ));
        assert!(get_ipv6("A", &[0; 15]).is_err());
        assert_eq!(get_be16("P", &[0x12, 0x34]).unwrap(), 0x1234);
    }

    #[test]
    fn truncated_header_ends_walk_with_error() {
        let r: Vec<_> = walk(&[8, 0, 1]).collect();
        assert_eq!(r.len(), 1);
        assert!(r[0].is_err());
        // A length field larger than the buffer.
        let r: Vec<_> = walk(&[200, 0, 1, 0, 0, 0, 0, 0]).collect();
        assert!(r[0].is_err());
    }
}
