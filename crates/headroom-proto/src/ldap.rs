//! LDAP version 3 (RFC 4511), client side, sans I/O: the BER messages of a directory client,
//! encoded into a caller's buffer and decoded from whatever bytes the socket returned.
//!
//! What a load generator needs to play a directory's clients (Tsung's `<ldap>` requests): bind
//! (simple), search with RFC 4515 string filters, add, modify, delete, compare, rename,
//! StartTLS, abandon, unbind; and count what comes back: responses by message id, search
//! entries, and result codes by their RFC 4511 names ([`ResultCode::name`]). Three parts:
//!
//! - encoders ([`bind_simple`], [`search`], [`add`], [`modify`], [`delete`], [`modify_dn`],
//!   [`compare`], [`extended`], [`start_tls`], [`who_am_i`], [`abandon`], [`unbind`]): each
//!   *appends* one LDAPMessage with the caller's message id, lengths in definite form, patched
//!   in place, so the connection's write buffer is reused from request to request;
//! - filters ([`encode_filter`], [`Filter`]): RFC 4515 strings parsed straight into BER, with a
//!   [`FilterError`] that says what and where;
//! - [`Decoder`]: splits the server's stream into messages, fed whatever the socket returned,
//!   split anywhere, and reports each as a [`Response`] (message id, [`Op`], result code,
//!   borrowed diagnostic text).
//!
//! # How the engine uses it
//!
//! One [`Decoder`] per connection. Requests are matched to responses by message id (the
//! engine numbers them; a server answers out of order when several are outstanding). A
//! request is done at the response whose [`Op::is_final`] is true; a search's entries come
//! before its SearchResultDone, one [`Response`] each:
//!
//! ```
//! use headroom_proto::ldap::{self, Decoder, Op, Scope, Search};
//!
//! let mut out = Vec::new(); // the connection's write buffer, reused
//! ldap::bind_simple(&mut out, 1, "cn=admin,dc=headroom,dc=test", "headroom");
//! let filter = format!("(&(objectClass=inetOrgPerson)(uid={}))", "user42"); // substituted
//! ldap::search(&mut out, 2, &Search {
//!     base: "ou=people,dc=headroom,dc=test",
//!     scope: Scope::Sub,
//!     filter: filter.as_str().into(),
//!     attrs: &["cn", "mail"],
//!     ..Search::default()
//! }).expect("a filter that parses (validate scenario filters when loading them)");
//! // ... send `out`, clear it; then for every chunk read from the socket:
//! # let chunk: &[u8] = b"\x30\x0c\x02\x01\x01\x61\x07\x0a\x01\x00\x04\x00\x04\x00";
//! let mut dec = Decoder::new();
//! let mut rest = chunk;
//! while !rest.is_empty() {
//!     let (used, resp) = dec.decode(rest).expect("count the error by kind, close");
//!     rest = &rest[used..];
//!     let Some(resp) = resp else { break }; // all of `rest` consumed: read more
//!     match resp.op {
//!         Op::SearchEntry => { /* count an entry (resp.len bytes) for request resp.id */ }
//!         Op::Notice => { /* the server is about to close: count it, close */ }
//!         _ if resp.op.is_final() => {
//!             // request resp.id is done: record latency, count resp.result's name
//!             let code = resp.result.expect("final responses carry a result");
//!             assert_eq!(code.name(), "success");
//!         }
//!         _ => {}
//!     }
//! }
//! ```
//!
//! **Errors.** An operation that fails (wrong password, no such entry, entry exists, size
//! limit exceeded, busy) is an ordinary response whose [`ResultCode`] says so: the connection
//! goes on. Anything that ends the connection is an `Err(`[`LdapError`]`)`, a fixed-size `Copy`
//! value counted by kind without allocating: bytes that are not BER ([`LdapError::BadBer`]:
//! indefinite lengths, which LDAP forbids, lengths of more than 4 octets, an element running
//! past its container), a message above the limit ([`LdapError::TooLong`]), BER that is not an
//! LDAP response ([`LdapError::Malformed`]: wrong tags, missing fields), a message a server
//! does not send a client ([`LdapError::Unexpected`]: a request, an unknown operation, message
//! id 0 on anything but a notification), or a connection closed in the middle of a message
//! ([`LdapError::Incomplete`], from [`Decoder::eof`]).
//!
//! # Memory
//!
//! The decoder owns no read buffer: a message that arrives whole inside one chunk is decoded in
//! place from the caller's slice. Only a message split across reads is copied into a per
//! connection `Vec`, allocated at the first split and freed again after a message larger than
//! [`RETAINED_CAPACITY`]. Search entries and references are never copied: their head (message
//! id, operation) is read, the rest counted down as it arrives, so a search returning
//! thousands of entries costs no memory however it is split (and entries have no size limit;
//! [`Decoder::keep_entries`] keeps them instead, for reading a few with [`parse_entry`]). Every
//! other message is refused above [`DEFAULT_MAX_MESSAGE_LEN`] (4 MiB; settable per decoder).
//! An idle [`Decoder`] is 104 bytes (on 64-bit targets) plus its split-message buffer (none until
//! a message arrives split, then at most [`RETAINED_CAPACITY`] kept).
//!
//! # Robustness
//!
//! No input panics the decoder or the filter parser (the `fuzz/` target `ldap_messages` checks
//! both, and that any split of a stream gives the same responses as the stream in one piece): lengths are checked before use and all slicing of input goes through
//! checked bounds; filters are bounded in length ([`MAX_FILTER_LEN`]) and nesting
//! ([`MAX_FILTER_DEPTH`], which also bounds the parser's recursion). The decoder does not
//! recurse at all. After an `Err` the connection must be closed: its framing is lost.
//!
//! # Not supported
//!
//! SASL binds (only simple binds; a SASL mechanism would need its own exchange), controls on
//! requests (paged results, server-side sorting: the responses' controls are checked and
//! skipped), LDAPv2, referral chasing (a referral is a result code, `referral` (10), counted
//! like any other), and the TLS layer itself (the engine's: [`start_tls`] only asks for it).

mod ber;
mod decoder;
mod entry;
mod filter;
mod request;
#[cfg(test)]
mod tests;

pub use ber::MAX_LEN_OCTETS;
pub use decoder::{Decoder, Op, Response, DEFAULT_MAX_MESSAGE_LEN, RETAINED_CAPACITY};
pub use entry::{parse_entry, Attribute, Attributes, Entry, Values};
pub use filter::{
    encode_filter, Filter, FilterError, FilterErrorKind, MAX_FILTER_DEPTH, MAX_FILTER_LEN,
};
pub use request::{
    abandon, add, bind_simple, compare, delete, extended, modify, modify_dn, search, start_tls,
    unbind, who_am_i, Deref, ModOp, Scope, Search, SearchFilter, LDAP_VERSION, START_TLS_OID,
    WHO_AM_I_OID,
};

/// The OID of the Notice of Disconnection (RFC 4511 section 4.4.1), the [`Op::Notice`] a
/// server sends before it closes a connection on its own.
pub const NOTICE_OF_DISCONNECTION_OID: &[u8] = b"1.3.6.1.4.1.1466.20036";

/// Why a connection cannot go on. Fixed size and `Copy`: counted by kind without allocating.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LdapError {
    /// Not valid BER as LDAP allows it: an indefinite length, a length of more than
    /// [`MAX_LEN_OCTETS`] octets, an empty integer, an element longer than what contains it.
    #[error("invalid BER encoding")]
    BadBer,
    /// A message longer than the decoder's limit.
    #[error("LDAP message longer than the limit")]
    TooLong,
    /// Valid BER, but not an LDAP response: a wrong tag, a missing field, a negative message
    /// id or result code.
    #[error("malformed LDAP message")]
    Malformed,
    /// A protocolOp (its tag) a server does not send a client: a request, an operation this
    /// client does not know, or message id 0 on anything but an unsolicited notification.
    #[error("unexpected LDAP operation (tag 0x{0:02x})")]
    Unexpected(u8),
    /// The connection ended in the middle of a message.
    #[error("connection closed in the middle of a message")]
    Incomplete,
}

/// An LDAPResult's resultCode (RFC 4511 section 4.1.9 and appendix A; the IANA registry's later
/// codes too).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResultCode(pub u32);

impl ResultCode {
    pub const SUCCESS: ResultCode = ResultCode(0);
    pub const OPERATIONS_ERROR: ResultCode = ResultCode(1);
    pub const PROTOCOL_ERROR: ResultCode = ResultCode(2);
    pub const TIME_LIMIT_EXCEEDED: ResultCode = ResultCode(3);
    pub const SIZE_LIMIT_EXCEEDED: ResultCode = ResultCode(4);
    pub const COMPARE_FALSE: ResultCode = ResultCode(5);
    pub const COMPARE_TRUE: ResultCode = ResultCode(6);
    pub const REFERRAL: ResultCode = ResultCode(10);
    pub const NO_SUCH_OBJECT: ResultCode = ResultCode(32);
    pub const INVALID_CREDENTIALS: ResultCode = ResultCode(49);
    pub const INSUFFICIENT_ACCESS_RIGHTS: ResultCode = ResultCode(50);
    pub const BUSY: ResultCode = ResultCode(51);
    pub const UNAVAILABLE: ResultCode = ResultCode(52);
    pub const UNWILLING_TO_PERFORM: ResultCode = ResultCode(53);
    pub const ENTRY_ALREADY_EXISTS: ResultCode = ResultCode(68);

    /// The code's name as RFC 4511 spells it (`"success"`, `"invalidCredentials"`, ...), or
    /// as the IANA registry does for codes defined later (`"cancelled"`, `"assertionFailed"`,
    /// ...); `"unknown"` for any other number (then count [`ResultCode::0`]).
    pub fn name(self) -> &'static str {
        match self.0 {
            0 => "success",
            1 => "operationsError",
            2 => "protocolError",
            3 => "timeLimitExceeded",
            4 => "sizeLimitExceeded",
            5 => "compareFalse",
            6 => "compareTrue",
            7 => "authMethodNotSupported",
            8 => "strongerAuthRequired",
            10 => "referral",
            11 => "adminLimitExceeded",
            12 => "unavailableCriticalExtension",
            13 => "confidentialityRequired",
            14 => "saslBindInProgress",
            16 => "noSuchAttribute",
            17 => "undefinedAttributeType",
            18 => "inappropriateMatching",
            19 => "constraintViolation",
            20 => "attributeOrValueExists",
            21 => "invalidAttributeSyntax",
            32 => "noSuchObject",
            33 => "aliasProblem",
            34 => "invalidDNSyntax",
            36 => "aliasDereferencingProblem",
            48 => "inappropriateAuthentication",
            49 => "invalidCredentials",
            50 => "insufficientAccessRights",
            51 => "busy",
            52 => "unavailable",
            53 => "unwillingToPerform",
            54 => "loopDetect",
            64 => "namingViolation",
            65 => "objectClassViolation",
            66 => "notAllowedOnNonLeaf",
            67 => "notAllowedOnRDN",
            68 => "entryAlreadyExists",
            69 => "objectClassModsProhibited",
            71 => "affectsMultipleDSAs",
            80 => "other",
            // RFC 3909 (Cancel), RFC 4528 (Assertion), RFC 4370 (Proxied Authorization),
            // RFC 4533 (Content Synchronization).
            118 => "canceled",
            119 => "noSuchOperation",
            120 => "tooLate",
            121 => "cannotCancel",
            122 => "assertionFailed",
            123 => "authorizationDenied",
            4096 => "e-syncRefreshRequired",
            _ => "unknown",
        }
    }

    /// `success` (0), and the two answers of a successful compare: `compareFalse` (5) and
    /// `compareTrue` (6).
    pub fn is_success(self) -> bool {
        matches!(self.0, 0 | 5 | 6)
    }
}

impl std::fmt::Display for ResultCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name(), self.0)
    }
}
