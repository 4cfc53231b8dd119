//! The response decoder: cuts the server's byte stream, split anywhere, into LDAPMessages and
//! reports each as a [`Response`]. See the module documentation of [`crate::ldap`].

use super::ber::{int32, read_len, Len, Reader, ENUMERATED, INTEGER, OCTET_STRING, SEQUENCE};
use super::request::tag as req;
use super::{LdapError, ResultCode};

/// Longest message kept (every response but search entries and references), in bytes on the
/// wire; [`Decoder::set_max_message_len`] changes it.
pub const DEFAULT_MAX_MESSAGE_LEN: u32 = 4 << 20;
/// A split-message buffer whose capacity grew beyond this is freed once its message has been
/// returned, instead of being kept for the next split message.
pub const RETAINED_CAPACITY: usize = 4 * 1024;
/// The head of a message: the SEQUENCE's tag and length (at most 1 + 5 bytes), the messageID
/// (at most 1 + 5 + 4), the protocolOp's tag and length (at most 1 + 5).
const HEAD_CAP: usize = 6 + 10 + 6;

/// What a response is (its protocolOp), RFC 4511 section 4.2 to 4.13.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// BindResponse `[APPLICATION 1]`.
    BindResponse,
    /// SearchResultEntry `[APPLICATION 4]`: one entry of a search, counted (its attributes are
    /// not read unless [`Decoder::keep_entries`]).
    SearchEntry,
    /// SearchResultReference `[APPLICATION 19]`: a continuation reference (URIs of other
    /// servers), counted like entries.
    SearchReference,
    /// SearchResultDone `[APPLICATION 5]`: the end of a search, with its result.
    SearchDone,
    /// ModifyResponse `[APPLICATION 7]`.
    ModifyResponse,
    /// AddResponse `[APPLICATION 9]`.
    AddResponse,
    /// DelResponse `[APPLICATION 11]`.
    DeleteResponse,
    /// ModifyDNResponse `[APPLICATION 13]`.
    ModifyDnResponse,
    /// CompareResponse `[APPLICATION 15]`: the answer is the result code, compareTrue (6) or
    /// compareFalse (5).
    CompareResponse,
    /// ExtendedResponse `[APPLICATION 24]` to an ExtendedRequest (StartTLS, Who am I?, ...).
    ExtendedResponse,
    /// IntermediateResponse `[APPLICATION 25]`: part of an extended operation's or a
    /// control's answer; more follow.
    IntermediateResponse,
    /// An unsolicited notification: an ExtendedResponse with message id 0 (RFC 4511 section
    /// 4.4), e.g. the Notice of Disconnection (1.3.6.1.4.1.1466.20036) a server sends before
    /// closing the connection (shutdown, idle timeout, protocol error on our side).
    Notice,
}

impl Op {
    /// The ASN.1 name of the protocolOp (`"bindResponse"`, `"searchResEntry"`, ...;
    /// `"notice"` for an unsolicited notification), for counting by kind.
    pub fn name(self) -> &'static str {
        match self {
            Op::BindResponse => "bindResponse",
            Op::SearchEntry => "searchResEntry",
            Op::SearchReference => "searchResRef",
            Op::SearchDone => "searchResDone",
            Op::ModifyResponse => "modifyResponse",
            Op::AddResponse => "addResponse",
            Op::DeleteResponse => "delResponse",
            Op::ModifyDnResponse => "modDNResponse",
            Op::CompareResponse => "compareResponse",
            Op::ExtendedResponse => "extendedResp",
            Op::IntermediateResponse => "intermediateResponse",
            Op::Notice => "notice",
        }
    }

    /// This response ends the request it answers (every one but a search's entries and
    /// references, and intermediate responses). A notice answers no request.
    pub fn is_final(self) -> bool {
        !matches!(
            self,
            Op::SearchEntry | Op::SearchReference | Op::IntermediateResponse | Op::Notice
        )
    }

    /// The kept ops carry an LDAPResult.
    fn has_result(self) -> bool {
        !matches!(
            self,
            Op::SearchEntry | Op::SearchReference | Op::IntermediateResponse
        )
    }
}

/// One response message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response<'a> {
    /// The messageID: the id of the request answered (0 for a [`Op::Notice`]).
    pub id: i32,
    pub op: Op,
    /// The LDAPResult's resultCode, for every op that has one (all but entries, references and
    /// intermediate responses).
    pub result: Option<ResultCode>,
    /// LDAPResult.matchedDN (empty when none).
    pub matched_dn: &'a [u8],
    /// LDAPResult.diagnosticMessage: the server's human-readable explanation (empty when none).
    pub diagnostic: &'a [u8],
    /// ExtendedResponse.responseName / IntermediateResponse.responseName (an OID; empty when
    /// absent: OpenLDAP's StartTLS and Who am I? answers have none).
    pub name: &'a [u8],
    /// ExtendedResponse.responseValue / IntermediateResponse.responseValue (Who am I?'s
    /// `dn:...`; empty when absent).
    pub value: &'a [u8],
    /// Bytes the message took on the wire.
    pub len: u64,
    /// The whole LDAPMessage's bytes; empty for entries and references unless
    /// [`Decoder::keep_entries`] (see [`super::parse_entry`]).
    pub message: &'a [u8],
}

impl Response<'_> {
    fn counted(id: i32, op: Op, len: u64) -> Response<'static> {
        Response {
            id,
            op,
            result: None,
            matched_dn: &[],
            diagnostic: &[],
            name: &[],
            value: &[],
            len,
            message: &[],
        }
    }
}

/// The head of a message, known before its body has arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Head {
    /// Bytes of the whole message on the wire.
    total: u64,
    /// Bytes up to the protocolOp's contents.
    head_len: usize,
    id: i32,
    op_tag: u8,
    op_len: u32,
}

enum Step {
    Need(usize),
    Done(Head),
}

/// Reads the head from the start of `b`: `Need(n)` when the first `n` bytes are needed to go
/// on (never more than the message holds, so a head never takes bytes of the next message).
fn parse_head(b: &[u8]) -> Result<Step, LdapError> {
    let Some(&outer) = b.first() else {
        return Ok(Step::Need(1));
    };
    if outer != SEQUENCE {
        return Err(LdapError::Malformed);
    }
    let (len, start) = match read_len(b, 1)? {
        Len::Need(n) => return Ok(Step::Need(n)),
        Len::Done { len, next } => (len, next),
    };
    let end = start as u64 + u64::from(len);
    // A TLV inside the message at `at`: its tag, its contents' length and start; lengths must
    // stay inside the message.
    let inner = |at: usize| -> Result<Result<(u8, u32, usize), usize>, LdapError> {
        if at as u64 >= end {
            return Err(LdapError::Malformed); // a field is missing
        }
        let Some(&tag) = b.get(at) else {
            return Ok(Err(at + 1));
        };
        match read_len(b, at + 1)? {
            Len::Need(n) if n as u64 > end => Err(LdapError::BadBer),
            Len::Need(n) => Ok(Err(n)),
            Len::Done { len, next } if next as u64 + u64::from(len) > end => Err(LdapError::BadBer),
            Len::Done { len, next } => Ok(Ok((tag, len, next))),
        }
    };
    let (tag, id_len, id_at) = match inner(start)? {
        Err(n) => return Ok(Step::Need(n)),
        Ok(t) => t,
    };
    if tag != INTEGER {
        return Err(LdapError::Malformed);
    }
    // MessageID ::= INTEGER (0 .. maxInt): 1 to 4 contents octets (checked before waiting for
    // them, so that a head never needs more than HEAD_CAP bytes).
    match id_len {
        0 => return Err(LdapError::BadBer),
        1..=4 => {}
        _ => return Err(LdapError::Malformed),
    }
    let id_end = id_at + id_len as usize;
    let Some(id) = b.get(id_at..id_end) else {
        return Ok(Step::Need(id_end));
    };
    let id = int32(id)?;
    if id < 0 {
        return Err(LdapError::Malformed);
    }
    let (op_tag, op_len, op_at) = match inner(id_end)? {
        Err(n) => return Ok(Step::Need(n)),
        Ok(t) => t,
    };
    Ok(Step::Done(Head {
        total: end,
        head_len: op_at,
        id,
        op_tag,
        op_len,
    }))
}

/// The op of a protocolOp tag, or why it is refused.
fn classify(tag: u8, id: i32) -> Result<Op, LdapError> {
    let op = match tag {
        0x61 => Op::BindResponse,
        0x64 => Op::SearchEntry,
        0x65 => Op::SearchDone,
        0x67 => Op::ModifyResponse,
        0x69 => Op::AddResponse,
        0x6b => Op::DeleteResponse,
        0x6d => Op::ModifyDnResponse,
        0x6f => Op::CompareResponse,
        0x73 => Op::SearchReference,
        0x78 if id == 0 => Op::Notice,
        0x78 => Op::ExtendedResponse,
        0x79 => Op::IntermediateResponse,
        // Requests, and operations this client does not know (APPLICATION class): not what
        // a server sends a client.
        req::BIND
        | req::UNBIND
        | req::SEARCH
        | req::MODIFY
        | req::ADD
        | req::DELETE
        | req::MODIFY_DN
        | req::COMPARE
        | req::ABANDON
        | req::EXTENDED => return Err(LdapError::Unexpected(tag)),
        0x40..=0x7e => return Err(LdapError::Unexpected(tag)),
        _ => return Err(LdapError::Malformed),
    };
    if id == 0 && op != Op::Notice {
        // Message id 0 is only for unsolicited notifications.
        return Err(LdapError::Unexpected(tag));
    }
    Ok(op)
}

/// Parses a whole kept message (`msg` is exactly its bytes).
fn parse_message(msg: &[u8], h: Head, op: Op) -> Result<Response<'_>, LdapError> {
    let op_end = h.head_len + h.op_len as usize;
    let body = msg.get(h.head_len..op_end).ok_or(LdapError::BadBer)?;
    // After the protocolOp: controls [0] (a SEQUENCE OF Control), then anything the client
    // does not recognize (ignored, RFC 4511 section 4), but well-formed.
    let mut rest = Reader::new(msg.get(op_end..).unwrap_or_default());
    if let Some(controls) = rest.optional(0xa0)? {
        Reader::new(controls).all(SEQUENCE)?;
    }
    rest.skip_rest()?;
    let mut resp = Response {
        message: msg,
        ..Response::counted(h.id, op, msg.len() as u64)
    };
    let mut r = Reader::new(body);
    if op.has_result() {
        let code = int32(r.expect(ENUMERATED)?)?;
        resp.result = Some(ResultCode(
            u32::try_from(code).map_err(|_| LdapError::Malformed)?,
        ));
        resp.matched_dn = r.expect(OCTET_STRING)?;
        resp.diagnostic = r.expect(OCTET_STRING)?;
        if let Some(referral) = r.optional(0xa3)? {
            // Referral ::= SEQUENCE SIZE (1..MAX) OF uri URI
            if referral.is_empty() {
                return Err(LdapError::Malformed);
            }
            Reader::new(referral).all(OCTET_STRING)?;
        }
        match op {
            // serverSaslCreds [7] OCTET STRING OPTIONAL
            Op::BindResponse => {
                r.optional(0x87)?;
            }
            // responseName [10] LDAPOID OPTIONAL, responseValue [11] OCTET STRING OPTIONAL
            Op::ExtendedResponse | Op::Notice => {
                resp.name = r.optional(0x8a)?.unwrap_or_default();
                resp.value = r.optional(0x8b)?.unwrap_or_default();
            }
            _ => {}
        }
    } else {
        match op {
            // objectName LDAPDN, attributes PartialAttributeList (read by parse_entry).
            Op::SearchEntry => {
                r.expect(OCTET_STRING)?;
                r.expect(SEQUENCE)?;
            }
            // SEQUENCE SIZE (1..MAX) OF uri URI
            Op::SearchReference => {
                if r.is_empty() {
                    return Err(LdapError::Malformed);
                }
                r.all(OCTET_STRING)?;
            }
            // responseName [0] LDAPOID OPTIONAL, responseValue [1] OCTET STRING OPTIONAL
            _ => {
                resp.name = r.optional(0x80)?.unwrap_or_default();
                resp.value = r.optional(0x81)?.unwrap_or_default();
            }
        }
    }
    r.skip_rest()?;
    Ok(resp)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Between messages, or inside a message's head (`head_len` bytes of it in `head`).
    Head,
    /// Inside a message's body: `left` bytes still to come; `keep`: copied to `buf` (else
    /// counted down).
    Body {
        head: Head,
        op: Op,
        left: u64,
        keep: bool,
    },
}

/// Incremental LDAP response decoder, one per connection. See the module documentation of
/// [`crate::ldap`] for its memory behaviour.
#[derive(Debug, Clone)]
pub struct Decoder {
    state: State,
    head: [u8; HEAD_CAP],
    head_len: u8,
    /// A kept message that arrived split; parsed and returned from here when complete.
    buf: Vec<u8>,
    /// `buf` holds a message already returned: clear it on the next call.
    buf_returned: bool,
    max_len: u32,
    keep_entries: bool,
    /// The error that stopped the decoder; returned again by every later call.
    failed: Option<LdapError>,
}

impl Default for Decoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Decoder {
    /// A decoder keeping messages up to [`DEFAULT_MAX_MESSAGE_LEN`], counting entries.
    pub fn new() -> Self {
        Decoder {
            state: State::Head,
            head: [0; HEAD_CAP],
            head_len: 0,
            buf: Vec::new(),
            buf_returned: false,
            max_len: DEFAULT_MAX_MESSAGE_LEN,
            keep_entries: false,
            failed: None,
        }
    }

    /// Longest kept message accepted (bytes on the wire); longer is [`LdapError::TooLong`].
    /// Entries and references, when counted rather than kept, have no limit: they cost no
    /// memory, only the time to read them.
    pub fn set_max_message_len(&mut self, max_len: u32) {
        self.max_len = max_len;
    }

    /// Keep search entries and references too (subject to the message limit), so that
    /// [`Response::message`] holds them for [`super::parse_entry`]: for reading a few
    /// entries (a test, the server's cn=Monitor counters), not for a load's searches.
    pub fn keep_entries(&mut self, keep: bool) {
        self.keep_entries = keep;
    }

    /// A message has been started and not finished.
    pub fn in_progress(&self) -> bool {
        self.head_len > 0 || matches!(self.state, State::Body { .. })
    }

    /// The server closed the connection: `Ok` between messages (or after an error already
    /// returned), [`LdapError::Incomplete`] in the middle of one.
    pub fn eof(&self) -> Result<(), LdapError> {
        if self.failed.is_none() && self.in_progress() {
            Err(LdapError::Incomplete)
        } else {
            Ok(())
        }
    }

    /// Capacity of the split-message buffer (0 when none is held), for memory accounting.
    pub fn buffer_capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Feeds bytes; returns how many were consumed and the response they completed, if any.
    /// The bytes after a complete message are not consumed: call again with the rest.
    ///
    /// `None` comes with all of `input` consumed; `Some` with at least one byte consumed. The
    /// response borrows from `input` (when the message arrived whole) or from the decoder
    /// (when split). After an `Err` every later call returns the same error: close the
    /// connection.
    pub fn decode<'a>(
        &'a mut self,
        input: &'a [u8],
    ) -> Result<(usize, Option<Response<'a>>), LdapError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        if self.buf_returned {
            self.buf_returned = false;
            self.buf.clear();
            if self.buf.capacity() > RETAINED_CAPACITY {
                self.buf = Vec::new();
            }
        }
        let mut pos = 0usize;
        if self.state == State::Head {
            let split = self.head_len > 0;
            let head = if split {
                match self.fill_head(input, &mut pos) {
                    Err(e) => return self.fail(e),
                    Ok(None) => return Ok((pos, None)),
                    Ok(Some(h)) => h,
                }
            } else {
                match parse_head(input) {
                    Err(e) => return self.fail(e),
                    Ok(Step::Need(n)) if n > HEAD_CAP => return self.fail(LdapError::BadBer),
                    Ok(Step::Need(_)) => {
                        // Shorter than its head: all of it belongs to this message.
                        let n = input.len().min(HEAD_CAP);
                        self.head[..n].copy_from_slice(&input[..n]);
                        self.head_len = n as u8;
                        return Ok((n, None));
                    }
                    Ok(Step::Done(h)) => h,
                }
            };
            let op = match classify(head.op_tag, head.id) {
                Ok(op) => op,
                Err(e) => return self.fail(e),
            };
            let keep = op.has_result() || op == Op::IntermediateResponse || self.keep_entries;
            if keep && head.total > u64::from(self.max_len) {
                return self.fail(LdapError::TooLong);
            }
            if split {
                if keep {
                    self.buf
                        .extend_from_slice(&self.head[..usize::from(self.head_len)]);
                }
                let left = head.total - u64::from(self.head_len);
                self.head_len = 0;
                self.state = State::Body {
                    head,
                    op,
                    left,
                    keep,
                };
            } else if keep && input.len() as u64 >= head.total {
                // Fast path: the whole message is in this input.
                let msg = &input[..head.total as usize];
                return match parse_message(msg, head, op) {
                    Ok(resp) => Ok((msg.len(), Some(resp))),
                    Err(e) => self.fail(e),
                };
            } else {
                self.state = State::Body {
                    head,
                    op,
                    left: head.total,
                    keep,
                };
            }
        }
        let State::Body {
            head,
            op,
            left,
            keep,
        } = self.state
        else {
            return Ok((pos, None)); // unreachable: the head branch always ends in Body
        };
        let rest = input.get(pos..).unwrap_or_default();
        let take = rest.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let left = left - take as u64;
        pos += take;
        if keep {
            self.buf.extend_from_slice(&rest[..take]);
        }
        if left > 0 {
            self.state = State::Body {
                head,
                op,
                left,
                keep,
            };
            return Ok((pos, None));
        }
        self.state = State::Head;
        if !keep {
            return Ok((pos, Some(Response::counted(head.id, op, head.total))));
        }
        self.buf_returned = true;
        match parse_message(&self.buf, head, op) {
            Ok(resp) => Ok((pos, Some(resp))),
            Err(e) => {
                self.failed = Some(e);
                Err(e)
            }
        }
    }

    /// Adds bytes of `input` (from `*pos`) to the partial head, exactly as many as it needs.
    /// `Ok(None)`: all of `input` taken and still incomplete.
    fn fill_head(&mut self, input: &[u8], pos: &mut usize) -> Result<Option<Head>, LdapError> {
        loop {
            let have = usize::from(self.head_len);
            match parse_head(&self.head[..have])? {
                Step::Done(h) => return Ok(Some(h)),
                Step::Need(n) if n > HEAD_CAP => return Err(LdapError::BadBer),
                Step::Need(n) => {
                    let rest = input.get(*pos..).unwrap_or_default();
                    let take = n.saturating_sub(have).min(rest.len());
                    if take == 0 {
                        return Ok(None);
                    }
                    self.head[have..have + take].copy_from_slice(&rest[..take]);
                    self.head_len = (have + take) as u8;
                    *pos += take;
                }
            }
        }
    }

    fn fail<'a>(&mut self, e: LdapError) -> Result<(usize, Option<Response<'a>>), LdapError> {
        self.failed = Some(e);
        Err(e)
    }
}
