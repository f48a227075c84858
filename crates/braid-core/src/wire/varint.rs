//! Variable-length integers, QUIC style (RFC 9000 §16): the two high bits of the first byte
//! give the length (1, 2, 4 or 8 bytes), the rest is the value in network byte order.
//! braid accepts only the shortest encoding, so that decode → encode is the identity.

use super::ParseError;

/// Largest value a varint can carry.
pub const MAX: u64 = (1 << 62) - 1;

/// Encoded length of `v` (which must be ≤ [`MAX`]).
pub const fn len(v: u64) -> usize {
    if v < 1 << 6 {
        1
    } else if v < 1 << 14 {
        2
    } else if v < 1 << 30 {
        4
    } else {
        8
    }
}

/// Appends `v` to `out`. Values above [`MAX`] are clamped to it; callers only pass counters
/// that cannot reach 2^62.
pub fn write(out: &mut Vec<u8>, v: u64) {
    let v = v.min(MAX);
    match len(v) {
        1 => out.push(v as u8),
        2 => out.extend_from_slice(&((v as u16) | 0x4000).to_be_bytes()),
        4 => out.extend_from_slice(&((v as u32) | 0x8000_0000).to_be_bytes()),
        _ => out.extend_from_slice(&(v | 0xc000_0000_0000_0000).to_be_bytes()),
    }
}

/// A cursor over untrusted bytes.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn position(&self) -> usize {
        self.pos
    }

    pub fn u8(&mut self) -> Result<u8, ParseError> {
        let b = *self.buf.get(self.pos).ok_or(ParseError::Truncated)?;
        self.pos += 1;
        Ok(b)
    }

    pub fn peek_u8(&self) -> Option<u8> {
        self.buf.get(self.pos).copied()
    }

    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], ParseError> {
        let end = self.pos.checked_add(n).ok_or(ParseError::Truncated)?;
        let s = self.buf.get(self.pos..end).ok_or(ParseError::Truncated)?;
        self.pos = end;
        Ok(s)
    }

    pub fn u16(&mut self) -> Result<u16, ParseError> {
        let b = self.bytes(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    pub fn u32(&mut self) -> Result<u32, ParseError> {
        let b = self.bytes(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Reads a varint, rejecting non-minimal encodings.
    pub fn varint(&mut self) -> Result<u64, ParseError> {
        let first = self.u8()?;
        let len = 1usize << (first >> 6);
        let mut v = u64::from(first & 0x3f);
        for _ in 1..len {
            v = (v << 8) | u64::from(self.u8()?);
        }
        if self::len(v) != len {
            return Err(ParseError::NonCanonicalVarint);
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundaries_round_trip() {
        for v in [0, 63, 64, 16383, 16384, (1 << 30) - 1, 1 << 30, MAX] {
            let mut out = Vec::new();
            write(&mut out, v);
            assert_eq!(out.len(), len(v));
            let mut r = Reader::new(&out);
            assert_eq!(r.varint().unwrap(), v);
            assert!(r.is_empty());
        }
    }

    #[test]
    fn rejects_non_minimal_and_truncated() {
        // 5 encoded on two bytes.
        assert_eq!(
            Reader::new(&[0x40, 0x05]).varint(),
            Err(ParseError::NonCanonicalVarint)
        );
        assert_eq!(
            Reader::new(&[0x80, 0x00]).varint(),
            Err(ParseError::Truncated)
        );
        assert_eq!(Reader::new(&[]).varint(), Err(ParseError::Truncated));
    }
}
