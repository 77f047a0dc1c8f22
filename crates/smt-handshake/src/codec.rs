//! Big-endian readers and writers for the ticket and message encodings.
//!
//! The reader never panics: every accessor checks the remaining length and
//! returns [`TicketError::Malformed`] with the name of the field that did not
//! fit.

use crate::TicketError;

/// A cursor over untrusted bytes.
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self { rest: bytes }
    }

    /// Bytes read so far are gone; this many are left.
    pub(crate) fn remaining(&self) -> usize {
        self.rest.len()
    }

    pub(crate) fn bytes(
        &mut self,
        len: usize,
        field: &'static str,
    ) -> Result<&'a [u8], TicketError> {
        if self.rest.len() < len {
            return Err(TicketError::Malformed(field));
        }
        let (head, tail) = self.rest.split_at(len);
        self.rest = tail;
        Ok(head)
    }

    pub(crate) fn array<const N: usize>(
        &mut self,
        field: &'static str,
    ) -> Result<[u8; N], TicketError> {
        let mut out = [0; N];
        out.copy_from_slice(self.bytes(N, field)?);
        Ok(out)
    }

    pub(crate) fn u8(&mut self, field: &'static str) -> Result<u8, TicketError> {
        Ok(self.array::<1>(field)?[0])
    }

    pub(crate) fn u16(&mut self, field: &'static str) -> Result<u16, TicketError> {
        Ok(u16::from_be_bytes(self.array(field)?))
    }

    pub(crate) fn u64(&mut self, field: &'static str) -> Result<u64, TicketError> {
        Ok(u64::from_be_bytes(self.array(field)?))
    }

    /// An `opaque<lo..hi>` with a one-byte length.
    pub(crate) fn vec8(&mut self, field: &'static str) -> Result<&'a [u8], TicketError> {
        let len = self.u8(field)?;
        self.bytes(usize::from(len), field)
    }

    /// An `opaque<lo..hi>` with a two-byte length.
    pub(crate) fn vec16(&mut self, field: &'static str) -> Result<&'a [u8], TicketError> {
        let len = self.u16(field)?;
        self.bytes(usize::from(len), field)
    }

    /// Fails unless every byte was consumed.
    pub(crate) fn finish(self, what: &'static str) -> Result<(), TicketError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(TicketError::Malformed(what))
        }
    }
}

/// Appends an `opaque` with a one-byte length. The caller bounded `bytes`.
pub(crate) fn put_vec8(out: &mut Vec<u8>, bytes: &[u8]) {
    debug_assert!(bytes.len() <= usize::from(u8::MAX));
    // NOTE(as): every caller checked the length against u8::MAX.
    out.push(bytes.len() as u8);
    out.extend_from_slice(bytes);
}

/// Appends an `opaque` with a two-byte length. The caller bounded `bytes`.
pub(crate) fn put_vec16(out: &mut Vec<u8>, bytes: &[u8]) {
    debug_assert!(bytes.len() <= usize::from(u16::MAX));
    // NOTE(as): every caller checked the length against u16::MAX.
    out.extend_from_slice(&(bytes.len() as u16).to_be_bytes());
    out.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reader_names_the_field_that_did_not_fit() {
        let mut r = Reader::new(&[0x01, 0x02, 0x03]);
        assert_eq!(r.u16("a").unwrap(), 0x0102);
        assert_eq!(r.u16("b"), Err(TicketError::Malformed("b")));
        assert_eq!(r.remaining(), 1);
        assert_eq!(r.u8("c").unwrap(), 3);
        assert!(r.finish("trailing").is_ok());
    }

    #[test]
    fn vectors_check_their_claimed_length() {
        assert_eq!(
            Reader::new(&[3, 1, 2]).vec8("v"),
            Err(TicketError::Malformed("v"))
        );
        assert_eq!(Reader::new(&[0, 2, 1, 2]).vec16("v").unwrap(), &[1, 2]);
        assert_eq!(
            Reader::new(&[1, 2]).finish("trailing"),
            Err(TicketError::Malformed("trailing"))
        );
    }
}
