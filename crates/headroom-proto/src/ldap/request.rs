//! Request encoders. Each appends exactly one LDAPMessage (RFC 4511 section 4.2 to 4.12) with
//! the caller's message id to `out`, and allocates nothing beyond growing `out`: lengths are
//! patched in place (see [`super::ber`]), so a connection's write buffer is reused from request
//! to request.
//!
//! ```text
//! LDAPMessage ::= SEQUENCE {
//!      messageID       MessageID,          -- INTEGER (0 .. maxInt)
//!      protocolOp      CHOICE { bindRequest BindRequest, ... },
//!      controls        [0] Controls OPTIONAL }   -- never sent here
//! ```
//!
//! Message ids: 1 to 2^31 - 1, chosen by the caller, unique among the requests outstanding on a
//! connection (0 is reserved for the server's unsolicited notifications). Strings (DNs,
//! attribute descriptions, values) are sent as their UTF-8 bytes, unchecked: a DN the server
//! cannot parse is its `invalidDNSyntax` (34) answer, which a load test may want to provoke.

use super::ber::{
    begin, end, put, put_bool, put_int, BOOLEAN, ENUMERATED, INTEGER, OCTET_STRING, SEQUENCE, SET,
};
use super::filter::{encode_filter, Filter, FilterError};

/// The protocol version a BindRequest announces.
pub const LDAP_VERSION: i64 = 3;
/// The StartTLS extended operation (RFC 4511 section 4.14).
pub const START_TLS_OID: &str = "1.3.6.1.4.1.1466.20037";
/// "Who am I?" (RFC 4532): the server answers with the authorization identity of the
/// connection (`dn:...`, `u:...` or empty for anonymous). A cheap authenticated round trip.
pub const WHO_AM_I_OID: &str = "1.3.6.1.4.1.4203.1.11.3";

/// protocolOp tags of the requests (APPLICATION class; constructed unless noted).
pub(super) mod tag {
    pub const BIND: u8 = 0x60;
    /// UnbindRequest: [APPLICATION 2] NULL, primitive.
    pub const UNBIND: u8 = 0x42;
    pub const SEARCH: u8 = 0x63;
    pub const MODIFY: u8 = 0x66;
    pub const ADD: u8 = 0x68;
    /// DelRequest: [APPLICATION 10] LDAPDN, primitive.
    pub const DELETE: u8 = 0x4a;
    pub const MODIFY_DN: u8 = 0x6c;
    pub const COMPARE: u8 = 0x6e;
    /// AbandonRequest: [APPLICATION 16] MessageID, primitive.
    pub const ABANDON: u8 = 0x50;
    pub const EXTENDED: u8 = 0x77;
}

/// Search scope (SearchRequest.scope).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scope {
    /// `baseObject` (0): the base entry only.
    Base,
    /// `singleLevel` (1): the base's immediate children.
    One,
    /// `wholeSubtree` (2): the base and everything under it.
    #[default]
    Sub,
}

/// Alias dereferencing (SearchRequest.derefAliases).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Deref {
    /// `neverDerefAliases` (0).
    #[default]
    Never,
    /// `derefInSearching` (1).
    InSearching,
    /// `derefFindingBaseObj` (2).
    FindingBase,
    /// `derefAlways` (3).
    Always,
}

/// The filter of a search: a string parsed on the way (RFC 4515, written straight into the
/// message), or a [`Filter`] compiled once and copied.
#[derive(Debug, Clone, Copy)]
pub enum SearchFilter<'a> {
    Text(&'a str),
    Compiled(&'a Filter),
}

impl<'a> From<&'a str> for SearchFilter<'a> {
    fn from(s: &'a str) -> Self {
        SearchFilter::Text(s)
    }
}

impl<'a> From<&'a Filter> for SearchFilter<'a> {
    fn from(f: &'a Filter) -> Self {
        SearchFilter::Compiled(f)
    }
}

/// A SearchRequest's fields (RFC 4511 section 4.5.1).
#[derive(Debug, Clone, Copy)]
pub struct Search<'a> {
    pub base: &'a str,
    pub scope: Scope,
    pub deref: Deref,
    /// Most entries the server should return (0: no client limit; the server's own applies).
    /// Values above 2^31 - 1 are sent as 2^31 - 1.
    pub size_limit: u32,
    /// Most seconds the server should spend (0: no client limit).
    pub time_limit: u32,
    /// Attribute descriptions only, no values.
    pub types_only: bool,
    pub filter: SearchFilter<'a>,
    /// Attributes to return: empty for all user attributes, `["1.1"]` for none (RFC 4511
    /// 4.5.1.8), `["*", "+"]` for all user and operational ones.
    pub attrs: &'a [&'a str],
}

impl Default for Search<'_> {
    /// A subtree search from the root DSE with `(objectClass=*)`, no limits, all attributes.
    fn default() -> Self {
        Search {
            base: "",
            scope: Scope::Sub,
            deref: Deref::Never,
            size_limit: 0,
            time_limit: 0,
            types_only: false,
            filter: SearchFilter::Text("(objectClass=*)"),
            attrs: &[],
        }
    }
}

/// A Modify change's operation (RFC 4511 section 4.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModOp {
    /// `add` (0): add the values (creating the attribute if needed).
    Add,
    /// `delete` (1): delete the values given, or the whole attribute when none are.
    Delete,
    /// `replace` (2): replace all values with the ones given (none: remove the attribute).
    Replace,
    /// `increment` (3, RFC 4525): add the single value given to the attribute's integer value.
    Increment,
}

impl ModOp {
    fn code(self) -> i64 {
        match self {
            ModOp::Add => 0,
            ModOp::Delete => 1,
            ModOp::Replace => 2,
            ModOp::Increment => 3,
        }
    }
}

/// Starts an LDAPMessage: the SEQUENCE and the message id. Returns the argument of
/// [`end`].
fn message(out: &mut Vec<u8>, id: i32) -> usize {
    let m = begin(out, SEQUENCE);
    put_int(out, INTEGER, i64::from(id));
    m
}

/// BindRequest with simple authentication (RFC 4511 section 4.2; RFC 4513 section 5.1):
/// version 3, `dn`, `password`. An empty `dn` and `password` bind anonymously; a `dn` with an
/// empty password is an "unauthenticated" bind, which servers refuse by default
/// (`unwillingToPerform`).
///
/// ```text
/// BindRequest ::= [APPLICATION 0] SEQUENCE {
///      version                 INTEGER (1 ..  127),
///      name                    LDAPDN,
///      authentication          AuthenticationChoice }
/// AuthenticationChoice ::= CHOICE { simple [0] OCTET STRING, ... }
/// ```
pub fn bind_simple(out: &mut Vec<u8>, id: i32, dn: &str, password: &str) {
    let m = message(out, id);
    let op = begin(out, tag::BIND);
    put_int(out, INTEGER, LDAP_VERSION);
    put(out, OCTET_STRING, dn.as_bytes());
    put(out, 0x80, password.as_bytes());
    end(out, op);
    end(out, m);
}

/// UnbindRequest (RFC 4511 section 4.3): the client is done; the server closes the connection
/// without answering.
pub fn unbind(out: &mut Vec<u8>, id: i32) {
    let m = message(out, id);
    put(out, tag::UNBIND, &[]);
    end(out, m);
}

/// SearchRequest (RFC 4511 section 4.5.1). The server answers with any number of
/// SearchResultEntry and SearchResultReference messages, then one SearchResultDone.
///
/// A text filter is parsed into the message on the way; if it does not parse, nothing is
/// appended (`out` is as before) and the error says where. A [`Filter`] parsed once is only
/// copied.
///
/// ```text
/// SearchRequest ::= [APPLICATION 3] SEQUENCE {
///      baseObject      LDAPDN,
///      scope           ENUMERATED { baseObject (0), singleLevel (1), wholeSubtree (2) },
///      derefAliases    ENUMERATED { neverDerefAliases (0), derefInSearching (1),
///                                   derefFindingBaseObj (2), derefAlways (3) },
///      sizeLimit       INTEGER (0 ..  maxInt),
///      timeLimit       INTEGER (0 ..  maxInt),
///      typesOnly       BOOLEAN,
///      filter          Filter,
///      attributes      AttributeSelection }   -- SEQUENCE OF selector LDAPString
/// ```
pub fn search(out: &mut Vec<u8>, id: i32, s: &Search<'_>) -> Result<(), FilterError> {
    let at = out.len();
    let m = message(out, id);
    let op = begin(out, tag::SEARCH);
    put(out, OCTET_STRING, s.base.as_bytes());
    let scope = match s.scope {
        Scope::Base => 0,
        Scope::One => 1,
        Scope::Sub => 2,
    };
    put_int(out, ENUMERATED, scope);
    let deref = match s.deref {
        Deref::Never => 0,
        Deref::InSearching => 1,
        Deref::FindingBase => 2,
        Deref::Always => 3,
    };
    put_int(out, ENUMERATED, deref);
    put_int(out, INTEGER, i64::from(s.size_limit.min(i32::MAX as u32)));
    put_int(out, INTEGER, i64::from(s.time_limit.min(i32::MAX as u32)));
    put_bool(out, BOOLEAN, s.types_only);
    match s.filter {
        SearchFilter::Text(text) => {
            if let Err(e) = encode_filter(out, text) {
                out.truncate(at);
                return Err(e);
            }
        }
        SearchFilter::Compiled(f) => out.extend_from_slice(f.as_ber()),
    }
    let attrs = begin(out, SEQUENCE);
    for a in s.attrs {
        put(out, OCTET_STRING, a.as_bytes());
    }
    end(out, attrs);
    end(out, op);
    end(out, m);
    Ok(())
}

/// Appends a PartialAttribute: `SEQUENCE { type AttributeDescription, vals SET OF value }`.
fn partial_attribute(out: &mut Vec<u8>, name: &str, values: &[&str]) {
    let a = begin(out, SEQUENCE);
    put(out, OCTET_STRING, name.as_bytes());
    let vals = begin(out, SET);
    for v in values {
        put(out, OCTET_STRING, v.as_bytes());
    }
    end(out, vals);
    end(out, a);
}

/// AddRequest (RFC 4511 section 4.7): a new entry `dn` with these attributes (each with at
/// least one value, objectClass among them, for the server to accept it).
///
/// ```text
/// AddRequest ::= [APPLICATION 8] SEQUENCE {
///      entry           LDAPDN,
///      attributes      AttributeList }   -- SEQUENCE OF attribute Attribute
/// ```
pub fn add(out: &mut Vec<u8>, id: i32, dn: &str, attrs: &[(&str, &[&str])]) {
    let m = message(out, id);
    let op = begin(out, tag::ADD);
    put(out, OCTET_STRING, dn.as_bytes());
    let list = begin(out, SEQUENCE);
    for (name, values) in attrs {
        partial_attribute(out, name, values);
    }
    end(out, list);
    end(out, op);
    end(out, m);
}

/// ModifyRequest (RFC 4511 section 4.6): the changes, applied in order, atomically.
///
/// ```text
/// ModifyRequest ::= [APPLICATION 6] SEQUENCE {
///      object          LDAPDN,
///      changes         SEQUENCE OF change SEQUENCE {
///           operation       ENUMERATED { add (0), delete (1), replace (2), ... },
///           modification    PartialAttribute } }
/// ```
pub fn modify(out: &mut Vec<u8>, id: i32, dn: &str, changes: &[(ModOp, &str, &[&str])]) {
    let m = message(out, id);
    let op = begin(out, tag::MODIFY);
    put(out, OCTET_STRING, dn.as_bytes());
    let list = begin(out, SEQUENCE);
    for (mod_op, name, values) in changes {
        let change = begin(out, SEQUENCE);
        put_int(out, ENUMERATED, mod_op.code());
        partial_attribute(out, name, values);
        end(out, change);
    }
    end(out, list);
    end(out, op);
    end(out, m);
}

/// DelRequest (RFC 4511 section 4.8): `[APPLICATION 10] LDAPDN`, a leaf entry.
pub fn delete(out: &mut Vec<u8>, id: i32, dn: &str) {
    let m = message(out, id);
    put(out, tag::DELETE, dn.as_bytes());
    end(out, m);
}

/// ModifyDNRequest (RFC 4511 section 4.9): renames `dn` to `new_rdn`, removing the old RDN's
/// values if `delete_old_rdn`, and moves it under `new_superior` if given.
///
/// ```text
/// ModifyDNRequest ::= [APPLICATION 12] SEQUENCE {
///      entry           LDAPDN,
///      newrdn          RelativeLDAPDN,
///      deleteoldrdn    BOOLEAN,
///      newSuperior     [0] LDAPDN OPTIONAL }
/// ```
pub fn modify_dn(
    out: &mut Vec<u8>,
    id: i32,
    dn: &str,
    new_rdn: &str,
    delete_old_rdn: bool,
    new_superior: Option<&str>,
) {
    let m = message(out, id);
    let op = begin(out, tag::MODIFY_DN);
    put(out, OCTET_STRING, dn.as_bytes());
    put(out, OCTET_STRING, new_rdn.as_bytes());
    put_bool(out, BOOLEAN, delete_old_rdn);
    if let Some(sup) = new_superior {
        put(out, 0x80, sup.as_bytes());
    }
    end(out, op);
    end(out, m);
}

/// CompareRequest (RFC 4511 section 4.10): does entry `dn` hold `value` in `attr`? The answer
/// is the result code: `compareTrue` (6) or `compareFalse` (5).
///
/// ```text
/// CompareRequest ::= [APPLICATION 14] SEQUENCE {
///      entry           LDAPDN,
///      ava             AttributeValueAssertion }   -- SEQUENCE { desc, assertionValue }
/// ```
pub fn compare(out: &mut Vec<u8>, id: i32, dn: &str, attr: &str, value: &str) {
    let m = message(out, id);
    let op = begin(out, tag::COMPARE);
    put(out, OCTET_STRING, dn.as_bytes());
    let ava = begin(out, SEQUENCE);
    put(out, OCTET_STRING, attr.as_bytes());
    put(out, OCTET_STRING, value.as_bytes());
    end(out, ava);
    end(out, op);
    end(out, m);
}

/// AbandonRequest (RFC 4511 section 4.11): `[APPLICATION 16] MessageID` of the operation to
/// abandon. No answer comes, for it or for the abandoned operation.
pub fn abandon(out: &mut Vec<u8>, id: i32, abandoned: i32) {
    let m = message(out, id);
    put_int(out, tag::ABANDON, i64::from(abandoned));
    end(out, m);
}

/// ExtendedRequest (RFC 4511 section 4.12): the operation `oid`, with `value` if given.
///
/// ```text
/// ExtendedRequest ::= [APPLICATION 23] SEQUENCE {
///      requestName      [0] LDAPOID,
///      requestValue     [1] OCTET STRING OPTIONAL }
/// ```
pub fn extended(out: &mut Vec<u8>, id: i32, oid: &str, value: Option<&[u8]>) {
    let m = message(out, id);
    let op = begin(out, tag::EXTENDED);
    put(out, 0x80, oid.as_bytes());
    if let Some(v) = value {
        put(out, 0x81, v);
    }
    end(out, op);
    end(out, m);
}

/// The StartTLS ExtendedRequest (RFC 4511 section 4.14). After its ExtendedResponse with
/// `success` (OpenLDAP sends it without a responseName), the next bytes either way are the TLS
/// handshake: the caller must have no other request outstanding, and must treat any byte that
/// came after the response in the same read as an error (it would be plain text injected ahead
/// of TLS).
pub fn start_tls(out: &mut Vec<u8>, id: i32) {
    extended(out, id, START_TLS_OID, None);
}

/// The "Who am I?" ExtendedRequest (RFC 4532).
pub fn who_am_i(out: &mut Vec<u8>, id: i32) {
    extended(out, id, WHO_AM_I_OID, None);
}
