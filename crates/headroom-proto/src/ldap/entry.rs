//! Reading a SearchResultEntry's attributes: off the load's hot path (a load counts entries),
//! for the few entries a client does read: a test's checks, the server's cn=Monitor counters.
//! Borrowing iterators over the message's bytes, no allocation.
//!
//! ```text
//! SearchResultEntry ::= [APPLICATION 4] SEQUENCE {
//!      objectName      LDAPDN,
//!      attributes      PartialAttributeList }
//! PartialAttributeList ::= SEQUENCE OF partialAttribute PartialAttribute
//! PartialAttribute ::= SEQUENCE {
//!      type       AttributeDescription,
//!      vals       SET OF value AttributeValue }
//! ```

use super::ber::{Reader, INTEGER, OCTET_STRING, SEQUENCE, SET};
use super::LdapError;

/// A search entry: its DN and attributes.
#[derive(Debug, Clone, Copy)]
pub struct Entry<'a> {
    pub dn: &'a [u8],
    attrs: &'a [u8],
}

impl<'a> Entry<'a> {
    pub fn attributes(&self) -> Attributes<'a> {
        Attributes {
            r: Reader::new(self.attrs),
        }
    }

    /// The values of the first attribute whose description is `name` (ASCII case-insensitive,
    /// as attribute descriptions compare); none if absent.
    pub fn values(&self, name: &str) -> Values<'a> {
        self.attributes()
            .find(|a| a.name.eq_ignore_ascii_case(name.as_bytes()))
            .map_or(
                Values {
                    r: Reader::new(&[]),
                },
                |a| a.values(),
            )
    }
}

/// The attributes of an [`Entry`].
#[derive(Debug, Clone)]
pub struct Attributes<'a> {
    r: Reader<'a>,
}

/// One attribute of an [`Entry`].
#[derive(Debug, Clone, Copy)]
pub struct Attribute<'a> {
    pub name: &'a [u8],
    vals: &'a [u8],
}

impl<'a> Attribute<'a> {
    pub fn values(&self) -> Values<'a> {
        Values {
            r: Reader::new(self.vals),
        }
    }
}

/// The values of an [`Attribute`].
#[derive(Debug, Clone)]
pub struct Values<'a> {
    r: Reader<'a>,
}

impl<'a> Iterator for Attributes<'a> {
    type Item = Attribute<'a>;
    fn next(&mut self) -> Option<Attribute<'a>> {
        // Checked by parse_entry: these cannot fail.
        let mut a = Reader::new(self.r.expect(SEQUENCE).ok()?);
        let name = a.expect(OCTET_STRING).ok()?;
        let vals = a.expect(SET).ok()?;
        Some(Attribute { name, vals })
    }
}

impl<'a> Iterator for Values<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        self.r.expect(OCTET_STRING).ok()
    }
}

/// The entry in `message`: a whole LDAPMessage holding a SearchResultEntry, as in
/// [`super::Response::message`] when the decoder keeps entries. The whole entry is checked
/// here, so that its iterators need not report errors.
pub fn parse_entry(message: &[u8]) -> Result<Entry<'_>, LdapError> {
    let mut outer = Reader::new(message);
    let mut m = Reader::new(outer.expect(SEQUENCE)?);
    m.expect(INTEGER)?;
    let mut op = Reader::new(m.expect(0x64)?);
    let dn = op.expect(OCTET_STRING)?;
    let attrs = op.expect(SEQUENCE)?;
    let mut list = Reader::new(attrs);
    while !list.is_empty() {
        let mut a = Reader::new(list.expect(SEQUENCE)?);
        a.expect(OCTET_STRING)?;
        Reader::new(a.expect(SET)?).all(OCTET_STRING)?;
        a.skip_rest()?;
    }
    Ok(Entry { dn, attrs })
}
