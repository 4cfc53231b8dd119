//! The client connection state machine: login (answering authentication requests), then units
//! of queries ending at ReadyForQuery. See the module documentation of [`crate::pg`].

use super::backend::{Message, MessageDecoder};
use super::frontend;
use super::scram::{ScramClient, SCRAM_SHA_256};
use super::{PgError, ServerError};

/// Longest error message text kept for [`Connection::last_error_message`], in bytes.
pub const MAX_ERROR_MESSAGE_LEN: usize = 1024;
/// Longest command tag kept; longer tags (never seen from PostgreSQL) are cut.
const TAG_CAP: usize = 47;

/// Who logs in, and where.
#[derive(Debug, Clone, Copy)]
pub struct Login<'a> {
    pub user: &'a str,
    /// Sent only if the server asks for it (cleartext, MD5 or SCRAM).
    pub password: &'a str,
    /// `""`: the server takes the user name.
    pub database: &'a str,
    pub application_name: Option<&'a str>,
}

/// How the server had us authenticate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMethod {
    /// AuthenticationOk straight away (`trust`, `peer`, ...).
    Trust,
    /// AuthenticationCleartextPassword.
    Cleartext,
    /// AuthenticationMD5Password.
    Md5,
    /// AuthenticationSASL with SCRAM-SHA-256 (by the time of [`Progress::LoggedIn`], the server
    /// signature has been verified).
    ScramSha256,
}

/// The transaction status a ReadyForQuery reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxStatus {
    /// `I`: not in a transaction block.
    Idle,
    /// `T`: in a transaction block.
    InTransaction,
    /// `E`: in a failed transaction block (queries refused until ROLLBACK).
    Failed,
}

/// The login completed (the first ReadyForQuery).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoginInfo {
    pub auth: AuthMethod,
    /// From BackendKeyData (0 if the server sent none): what a CancelRequest names.
    pub backend_pid: u32,
    pub secret_key: u32,
    pub tx_status: TxStatus,
    /// Backend bytes of the login, from the first authentication request to ReadyForQuery.
    pub bytes: u64,
}

/// A CommandComplete tag (`SELECT 100`, `INSERT 0 1`, `CREATE TABLE`), kept inline.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct CommandTag {
    buf: [u8; TAG_CAP],
    len: u8,
}

impl Default for CommandTag {
    fn default() -> Self {
        CommandTag {
            buf: [0; TAG_CAP],
            len: 0,
        }
    }
}

impl CommandTag {
    pub(super) fn set(&mut self, text: &[u8]) {
        let n = text.len().min(TAG_CAP);
        self.buf[..n].copy_from_slice(&text[..n]);
        self.len = n as u8;
    }

    /// The tag text (`""` if none came, or if it was not UTF-8).
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(self.buf.get(..usize::from(self.len)).unwrap_or_default())
            .unwrap_or_default()
    }

    /// Its first word: `SELECT`, `INSERT`, `UPDATE`, `BEGIN`, ...
    pub fn command(&self) -> &str {
        self.as_str().split(' ').next().unwrap_or_default()
    }

    /// The row count it ends with (`SELECT 100` → 100, `INSERT 0 1` → 1), if any.
    pub fn rows(&self) -> Option<u64> {
        let last = self.as_str().rsplit(' ').next()?;
        if last.is_empty() || !last.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        last.parse().ok()
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl std::fmt::Debug for CommandTag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

/// A completed unit: everything from the end of the previous one up to its ReadyForQuery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryResult {
    /// 1 for the first unit after login, then 2, 3, ... (in the order they were sent).
    pub unit: u64,
    /// DataRow (and CopyData) messages.
    pub rows: u64,
    /// Backend bytes of the unit, ReadyForQuery included.
    pub bytes: u64,
    /// The last CommandComplete tag (empty if none: an error, an empty query, a prepare).
    pub tag: CommandTag,
    /// CommandComplete messages (several for a multi-statement simple query).
    pub commands: u32,
    /// Columns of the last RowDescription (0 if none came).
    pub columns: u16,
    /// The first ErrorResponse of the unit (its text: [`Connection::last_error_message`]).
    pub error: Option<ServerError>,
    /// EmptyQueryResponse came (the query string was empty).
    pub empty_query: bool,
    /// PortalSuspended came (an Execute's row limit was reached).
    pub suspended: bool,
    pub tx_status: TxStatus,
}

/// Progress of one [`Connection::decode`] call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// All input consumed, nothing completed.
    NeedMore,
    /// The server asked us to authenticate this way, and the reply was appended to `out`: send
    /// it. (The final SCRAM step and AuthenticationOk need no reply and report nothing.)
    AuthReply(AuthMethod),
    /// The login completed: queries may be sent.
    LoggedIn(LoginInfo),
    /// A unit completed.
    Complete(QueryResult),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for authentication requests, up to AuthenticationOk.
    Auth,
    /// Authenticated: ParameterStatus, BackendKeyData, up to the first ReadyForQuery.
    Startup,
    /// Logged in: units.
    Ready,
}

/// What is needed until AuthenticationOk, then dropped.
struct Creds {
    user: String,
    password: String,
    nonce: Vec<u8>,
    scram: Option<ScramClient>,
}

/// The facts of the unit in progress.
#[derive(Debug, Clone, Copy, Default)]
struct Unit {
    /// A message of the unit has arrived (ParameterStatus, notices and notifications, which
    /// may come between units, do not count).
    started: bool,
    rows: u64,
    bytes: u64,
    tag: CommandTag,
    commands: u32,
    columns: u16,
    error: Option<ServerError>,
    empty_query: bool,
    suspended: bool,
}

/// Everything but the decoder, so that a message borrowed from the decoder can be handled.
struct State {
    phase: Phase,
    creds: Option<Box<Creds>>,
    auth: Option<AuthMethod>,
    key: Option<(u32, u32)>,
    units: u64,
    cur: Unit,
    err_msg: String,
}

/// One client connection's protocol state. See the module documentation of [`crate::pg`].
pub struct Connection {
    dec: MessageDecoder,
    st: State,
    failed: Option<PgError>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("phase", &self.st.phase)
            .field("auth", &self.st.auth)
            .field("units", &self.st.units)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// A connection about to log in: appends the StartupMessage to `out`. `scram_nonce`: random
    /// bytes for a SCRAM nonce ([`super::scram::NONCE_BYTES`] of them, from the worker's RNG or
    /// the OS), used only if the server asks for SCRAM.
    pub fn new(login: &Login<'_>, scram_nonce: &[u8], out: &mut Vec<u8>) -> Connection {
        frontend::startup(out, login.user, login.database, login.application_name, &[]);
        let mut dec = MessageDecoder::new();
        // Bodies counted, never looked at: rows, COPY data, notices, notifications.
        for tag in [b'D', b'd', b'N', b'A'] {
            dec.set_skip(tag, true);
        }
        Connection {
            dec,
            st: State {
                phase: Phase::Auth,
                creds: Some(Box::new(Creds {
                    user: login.user.to_owned(),
                    password: login.password.to_owned(),
                    nonce: scram_nonce.to_vec(),
                    scram: None,
                })),
                auth: None,
                key: None,
                units: 0,
                cur: Unit::default(),
                err_msg: String::new(),
            },
            failed: None,
        }
    }

    /// Longest kept backend message body (default [`super::DEFAULT_MAX_MESSAGE_LEN`]).
    pub fn set_max_message_len(&mut self, max_len: u32) {
        self.dec.set_max_len(max_len);
    }

    /// Feeds bytes read from the socket; replies the protocol needs (authentication) are
    /// appended to `out`. Returns how many bytes were consumed and what completed; the bytes
    /// after a completed event are not consumed: call again with the rest.
    ///
    /// `NeedMore` comes with all of `input` consumed; any other progress with at least one byte
    /// consumed. After an `Err` the connection is unusable (close it): every later call returns
    /// the same error.
    pub fn decode(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(usize, Progress), PgError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let mut pos = 0usize;
        loop {
            let rest = input.get(pos..).unwrap_or_default();
            if rest.is_empty() {
                return Ok((pos, Progress::NeedMore));
            }
            let step = self.dec.decode(rest).and_then(|(used, msg)| match msg {
                None => Ok((used, None)),
                Some(msg) => self.st.handle(msg, out).map(|p| (used, Some(p))),
            });
            match step {
                Err(e) => {
                    self.failed = Some(e);
                    return Err(e);
                }
                Ok((used, None)) => return Ok((pos + used, Progress::NeedMore)),
                Ok((used, Some(Progress::NeedMore))) => pos += used,
                Ok((used, Some(p))) => return Ok((pos + used, p)),
            }
        }
    }

    /// The server closed the connection. `Ok` if it did so between units (or after an error
    /// already returned); [`PgError::Incomplete`] in the middle of a message, a login or a unit.
    pub fn eof(&self) -> Result<(), PgError> {
        if self.failed.is_some() {
            return Ok(());
        }
        if self.in_progress() {
            Err(PgError::Incomplete)
        } else {
            Ok(())
        }
    }

    /// A message, a login or a unit is partly received.
    pub fn in_progress(&self) -> bool {
        self.dec.in_progress() || self.st.phase != Phase::Ready || self.st.cur.started
    }

    /// The login completed and the connection has not failed.
    pub fn is_ready(&self) -> bool {
        self.st.phase == Phase::Ready && self.failed.is_none()
    }

    /// How the server had us authenticate, once it asked (or said AuthenticationOk).
    pub fn auth_method(&self) -> Option<AuthMethod> {
        self.st.auth
    }

    /// (process id, secret key) from BackendKeyData, for a CancelRequest.
    pub fn backend_key(&self) -> Option<(u32, u32)> {
        self.st.key
    }

    /// Units completed since login.
    pub fn units(&self) -> u64 {
        self.st.units
    }

    /// The message text of the last ErrorResponse (at most [`MAX_ERROR_MESSAGE_LEN`] bytes).
    pub fn last_error_message(&self) -> &str {
        &self.st.err_msg
    }

    /// Capacity of the split-message buffer (0 when none is held), for memory accounting.
    pub fn buffer_capacity(&self) -> usize {
        self.dec.buffer_capacity()
    }
}

impl State {
    /// One message; `Progress::NeedMore` means "nothing to report", go on.
    fn handle(&mut self, msg: Message<'_>, out: &mut Vec<u8>) -> Result<Progress, PgError> {
        let body = msg.body;
        self.cur.bytes = self.cur.bytes.saturating_add(msg.wire_len());
        match (self.phase, msg.tag) {
            // Asynchronous, possible at any time: notices, parameter changes, notifications.
            (_, b'N' | b'S' | b'A') => Ok(Progress::NeedMore),
            (Phase::Auth, b'R') => self.auth_request(body, out),
            // NegotiateProtocolVersion: the server speaks an older 3.x minor version, or
            // ignores some startup options. Fine for us.
            (Phase::Auth, b'v') => Ok(Progress::NeedMore),
            (Phase::Auth | Phase::Startup, b'E') => {
                let e = self.server_error(body)?;
                Err(if e.is_auth() {
                    PgError::AuthFailed(e)
                } else {
                    PgError::Server(e)
                })
            }
            (Phase::Startup, b'K') => {
                let pid = be_u32(body, 0).ok_or(PgError::Malformed(b'K'))?;
                let secret = be_u32(body, 4).ok_or(PgError::Malformed(b'K'))?;
                self.key = Some((pid, secret));
                Ok(Progress::NeedMore)
            }
            (Phase::Startup, b'Z') => {
                let tx_status = tx_status(body)?;
                self.phase = Phase::Ready;
                let (backend_pid, secret_key) = self.key.unwrap_or((0, 0));
                let info = LoginInfo {
                    auth: self.auth.unwrap_or(AuthMethod::Trust),
                    backend_pid,
                    secret_key,
                    tx_status,
                    bytes: self.cur.bytes,
                };
                self.cur = Unit::default();
                Ok(Progress::LoggedIn(info))
            }
            (Phase::Ready, tag) => self.unit_message(tag, body),
            (_, tag) => Err(PgError::Unexpected(tag)),
        }
    }

    fn unit_message(&mut self, tag: u8, body: &[u8]) -> Result<Progress, PgError> {
        let cur = &mut self.cur;
        cur.started = true;
        match tag {
            b'D' | b'd' => cur.rows += 1,
            b'T' => {
                let n = be_u16(body, 0).ok_or(PgError::Malformed(b'T'))?;
                cur.columns = n;
            }
            b'C' => {
                let text = body.strip_suffix(&[0]).ok_or(PgError::Malformed(b'C'))?;
                cur.tag.set(text);
                cur.commands = cur.commands.saturating_add(1);
            }
            b'I' => cur.empty_query = true,
            b's' => cur.suspended = true,
            // ParseComplete, BindComplete, CloseComplete, NoData, ParameterDescription,
            // CopyOutResponse, CopyDone: nothing to count.
            b'1' | b'2' | b'3' | b'n' | b't' | b'H' | b'c' => {}
            b'E' => {
                let e = self.server_error(body)?;
                if e.severity.ends_connection() {
                    return Err(if e.is_auth() {
                        PgError::AuthFailed(e)
                    } else {
                        PgError::Server(e)
                    });
                }
                self.cur.error.get_or_insert(e);
            }
            b'Z' => {
                let tx_status = tx_status(body)?;
                self.units += 1;
                let u = std::mem::take(&mut self.cur);
                return Ok(Progress::Complete(QueryResult {
                    unit: self.units,
                    rows: u.rows,
                    bytes: u.bytes,
                    tag: u.tag,
                    commands: u.commands,
                    columns: u.columns,
                    error: u.error,
                    empty_query: u.empty_query,
                    suspended: u.suspended,
                    tx_status,
                }));
            }
            // CopyInResponse / CopyBothResponse (the server would wait for our data), a second
            // login's messages, or not the protocol at all.
            _ => return Err(PgError::Unexpected(tag)),
        }
        Ok(Progress::NeedMore)
    }

    fn auth_request(&mut self, body: &[u8], out: &mut Vec<u8>) -> Result<Progress, PgError> {
        const BAD: PgError = PgError::Malformed(b'R');
        let code = be_u32(body, 0).ok_or(BAD)?;
        let data = body.get(4..).unwrap_or_default();
        let Some(creds) = self.creds.as_deref_mut() else {
            return Err(PgError::Unexpected(b'R'));
        };
        let method = match code {
            0 => {
                if !data.is_empty() {
                    return Err(BAD);
                }
                if let Some(scram) = &creds.scram {
                    if !scram.is_verified() {
                        return Err(PgError::Scram(super::ScramError::Unverified));
                    }
                }
                self.auth.get_or_insert(AuthMethod::Trust);
                self.creds = None;
                self.phase = Phase::Startup;
                return Ok(Progress::NeedMore);
            }
            3 => {
                frontend::password(out, &creds.password);
                AuthMethod::Cleartext
            }
            5 => {
                let salt: [u8; 4] = data.try_into().map_err(|_| BAD)?;
                frontend::md5_password(out, &creds.user, &creds.password, salt);
                AuthMethod::Md5
            }
            10 => {
                // Mechanism names, each NUL-terminated, then an empty one.
                let mut offered = false;
                let mut rest = data;
                loop {
                    let end = rest.iter().position(|&b| b == 0).ok_or(BAD)?;
                    let name = rest.get(..end).unwrap_or_default();
                    if name.is_empty() {
                        break;
                    }
                    offered |= name == SCRAM_SHA_256.as_bytes();
                    rest = rest.get(end + 1..).unwrap_or_default();
                }
                if !offered {
                    return Err(PgError::UnsupportedAuth(code));
                }
                if creds.scram.is_some() {
                    return Err(PgError::Scram(super::ScramError::OutOfOrder));
                }
                let scram = creds.scram.insert(ScramClient::new("", &creds.nonce));
                let mut first = Vec::with_capacity(64);
                scram.client_first(&mut first);
                frontend::sasl_initial_response(out, SCRAM_SHA_256, &first);
                AuthMethod::ScramSha256
            }
            11 => {
                let scram = creds
                    .scram
                    .as_mut()
                    .ok_or(PgError::Scram(super::ScramError::OutOfOrder))?;
                let mut fin = Vec::with_capacity(128);
                scram
                    .client_final(creds.password.as_bytes(), data, &mut fin)
                    .map_err(PgError::Scram)?;
                frontend::sasl_response(out, &fin);
                AuthMethod::ScramSha256
            }
            12 => {
                let scram = creds
                    .scram
                    .as_mut()
                    .ok_or(PgError::Scram(super::ScramError::OutOfOrder))?;
                scram.verify_server_final(data).map_err(PgError::Scram)?;
                return Ok(Progress::NeedMore);
            }
            _ => return Err(PgError::UnsupportedAuth(code)),
        };
        self.auth = Some(method);
        Ok(Progress::AuthReply(method))
    }

    /// Parses an ErrorResponse: severity and SQLSTATE out, message text into `err_msg`.
    fn server_error(&mut self, body: &[u8]) -> Result<ServerError, PgError> {
        let (e, message) = super::parse_error_response(body)?;
        self.err_msg.clear();
        let text = String::from_utf8_lossy(message);
        let mut cut = text.len().min(MAX_ERROR_MESSAGE_LEN);
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        self.err_msg.push_str(text.get(..cut).unwrap_or_default());
        Ok(e)
    }
}

fn tx_status(body: &[u8]) -> Result<TxStatus, PgError> {
    match body {
        b"I" => Ok(TxStatus::Idle),
        b"T" => Ok(TxStatus::InTransaction),
        b"E" => Ok(TxStatus::Failed),
        _ => Err(PgError::Malformed(b'Z')),
    }
}

fn be_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn be_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
