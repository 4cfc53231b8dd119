//! The subset of BER (X.690) that LDAP uses (RFC 4511 section 5.1): one-byte tags, definite
//! lengths only, lengths in at most [`MAX_LEN_OCTETS`] octets.
//!
//! Writing: an element whose length is not known in advance is begun with a one-byte length
//! placeholder ([`begin`]) and finished by [`end`], which writes the length in its shortest
//! form and, when it needs more than the placeholder (contents of 128 bytes or more), moves the
//! contents up inside the same buffer. Every length on the wire is thus minimal (as OpenLDAP's
//! liblber writes them) and no message needs a second buffer.
//!
//! Reading: [`Reader`] walks the elements of a contents slice, checking every length against
//! what is left before slicing.

use super::LdapError;

/// Universal tags.
pub(super) const BOOLEAN: u8 = 0x01;
pub(super) const INTEGER: u8 = 0x02;
pub(super) const OCTET_STRING: u8 = 0x04;
pub(super) const ENUMERATED: u8 = 0x0a;
pub(super) const SEQUENCE: u8 = 0x30;
pub(super) const SET: u8 = 0x31;

/// Most length octets accepted after a long-form length byte: 4 (lengths up to 4 GiB - 1).
/// X.690 allows up to 126; no LDAP message needs more than 4, and a peer sending more is not
/// worth the arithmetic.
pub const MAX_LEN_OCTETS: usize = 4;

/// Appends `tag` and a placeholder length byte; returns where the contents start (the
/// argument [`end`] wants).
pub(super) fn begin(out: &mut Vec<u8>, tag: u8) -> usize {
    out.push(tag);
    out.push(0);
    out.len()
}

/// Ends the element whose contents started at `start` (from [`begin`]): writes the length of
/// everything appended since, in its minimal definite form.
pub(super) fn end(out: &mut Vec<u8>, start: usize) {
    let len = out.len().saturating_sub(start);
    if len < 0x80 {
        if let Some(slot) = start.checked_sub(1).and_then(|i| out.get_mut(i)) {
            *slot = len as u8;
        }
        return;
    }
    let be = (len as u64).to_be_bytes();
    let skip = be.iter().take_while(|&&b| b == 0).count();
    let octets = &be[skip..];
    let n = octets.len();
    out.resize(out.len() + n, 0);
    out.copy_within(start..start + len, start + n);
    if let Some(slot) = start.checked_sub(1).and_then(|i| out.get_mut(i)) {
        *slot = 0x80 | n as u8;
    }
    if let Some(slots) = out.get_mut(start..start + n) {
        slots.copy_from_slice(octets);
    }
}

/// Appends a definite length in minimal form.
pub(super) fn put_len(out: &mut Vec<u8>, len: usize) {
    if len < 0x80 {
        out.push(len as u8);
        return;
    }
    let be = (len as u64).to_be_bytes();
    let skip = be.iter().take_while(|&&b| b == 0).count();
    out.push(0x80 | (be.len() - skip) as u8);
    out.extend_from_slice(&be[skip..]);
}

/// Appends a primitive element: `tag`, length, `contents`.
pub(super) fn put(out: &mut Vec<u8>, tag: u8, contents: &[u8]) {
    out.push(tag);
    put_len(out, contents.len());
    out.extend_from_slice(contents);
}

/// Appends an INTEGER-like element (INTEGER, ENUMERATED, or an implicitly tagged one) holding
/// `v` in its minimal two's-complement form.
pub(super) fn put_int(out: &mut Vec<u8>, tag: u8, v: i64) {
    let be = v.to_be_bytes();
    // Drop leading bytes that only repeat the sign of the next one.
    let mut skip = 0;
    while skip < 7 {
        let (a, b) = (be[skip], be[skip + 1]);
        if (a == 0 && b & 0x80 == 0) || (a == 0xff && b & 0x80 != 0) {
            skip += 1;
        } else {
            break;
        }
    }
    put(out, tag, &be[skip..]);
}

/// Appends a BOOLEAN (`tag` for an implicitly tagged one): TRUE is 0xFF (RFC 4511 5.1).
pub(super) fn put_bool(out: &mut Vec<u8>, tag: u8, v: bool) {
    put(out, tag, &[if v { 0xff } else { 0 }]);
}

/// Where a length read from a prefix of the input stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Len {
    /// The length is `len`; its contents start at `next`.
    Done { len: u32, next: usize },
    /// At least this many bytes of input (counted from the start of the slice) are needed.
    Need(usize),
}

/// Reads the length octets at `at` of `b`. Indefinite form (0x80), more than
/// [`MAX_LEN_OCTETS`] octets and the reserved 0xFF are [`LdapError::BadBer`].
pub(super) fn read_len(b: &[u8], at: usize) -> Result<Len, LdapError> {
    let Some(&first) = b.get(at) else {
        return Ok(Len::Need(at + 1));
    };
    if first < 0x80 {
        return Ok(Len::Done {
            len: u32::from(first),
            next: at + 1,
        });
    }
    let n = usize::from(first & 0x7f);
    if n == 0 || n > MAX_LEN_OCTETS {
        return Err(LdapError::BadBer);
    }
    let Some(octets) = b.get(at + 1..at + 1 + n) else {
        return Ok(Len::Need(at + 1 + n));
    };
    let len = octets
        .iter()
        .fold(0u32, |acc, &o| (acc << 8) | u32::from(o));
    Ok(Len::Done {
        len,
        next: at + 1 + n,
    })
}

/// Decodes the contents of an INTEGER or ENUMERATED of at most 4 octets (every LDAP integer:
/// message ids, result codes, limits are 0 .. 2^31 - 1). Empty contents are
/// [`LdapError::BadBer`], longer ones [`LdapError::Malformed`].
pub(super) fn int32(contents: &[u8]) -> Result<i32, LdapError> {
    let (&first, _) = contents.split_first().ok_or(LdapError::BadBer)?;
    if contents.len() > 4 {
        return Err(LdapError::Malformed);
    }
    let init: i32 = if first & 0x80 != 0 { -1 } else { 0 };
    Ok(contents
        .iter()
        .fold(init, |acc, &b| (acc << 8) | i32::from(b)))
}

/// Walks the elements of a contents slice.
#[derive(Debug, Clone, Copy)]
pub(super) struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(super) fn new(b: &'a [u8]) -> Self {
        Reader { b }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.b.is_empty()
    }

    /// The bytes not read yet.
    #[cfg(test)]
    pub(super) fn rest(&self) -> &'a [u8] {
        self.b
    }

    pub(super) fn peek_tag(&self) -> Option<u8> {
        self.b.first().copied()
    }

    /// The next element: its tag and contents. [`LdapError::BadBer`] when its length is bad or
    /// runs past the end, [`LdapError::Malformed`] for a multi-octet tag (LDAP has none).
    pub(super) fn tlv(&mut self) -> Result<(u8, &'a [u8]), LdapError> {
        let &tag = self.b.first().ok_or(LdapError::Malformed)?;
        if tag & 0x1f == 0x1f {
            return Err(LdapError::Malformed);
        }
        let Len::Done { len, next } = read_len(self.b, 1)? else {
            return Err(LdapError::BadBer);
        };
        let end = next
            .checked_add(len as usize)
            .filter(|&e| e <= self.b.len())
            .ok_or(LdapError::BadBer)?;
        let contents = self.b.get(next..end).ok_or(LdapError::BadBer)?;
        self.b = self.b.get(end..).unwrap_or_default();
        Ok((tag, contents))
    }

    /// The next element, which must have tag `tag` ([`LdapError::Malformed`] otherwise, or at
    /// the end).
    pub(super) fn expect(&mut self, tag: u8) -> Result<&'a [u8], LdapError> {
        match self.tlv()? {
            (t, contents) if t == tag => Ok(contents),
            _ => Err(LdapError::Malformed),
        }
    }

    /// The next element if it has tag `tag`.
    pub(super) fn optional(&mut self, tag: u8) -> Result<Option<&'a [u8]>, LdapError> {
        if self.peek_tag() == Some(tag) {
            self.expect(tag).map(Some)
        } else {
            Ok(None)
        }
    }

    /// Checks that what is left is a run of well-formed elements, and skips them: trailing
    /// components an implementation does not recognize are ignored (RFC 4511 section 4).
    pub(super) fn skip_rest(&mut self) -> Result<(), LdapError> {
        while !self.is_empty() {
            self.tlv()?;
        }
        Ok(())
    }

    /// Checks that every element left has tag `tag`, consuming them.
    pub(super) fn all(&mut self, tag: u8) -> Result<(), LdapError> {
        while !self.is_empty() {
            self.expect(tag)?;
        }
        Ok(())
    }
}
