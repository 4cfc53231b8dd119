//! PostgreSQL frontend/backend protocol, version 3.0, client side, sans I/O.
//!
//! What a load generator needs to play a database client: log in (trust, cleartext, MD5 or
//! SCRAM-SHA-256), send simple and extended queries, and count what comes back (rows, command
//! tags, errors by SQLSTATE) without keeping it. Three layers, each usable alone:
//!
//! - [`frontend`]: encoders. Every function *appends* one message (or a short fixed sequence) to
//!   a caller's `Vec<u8>` and allocates nothing beyond growing it, so a connection's write buffer
//!   is reused from query to query.
//! - [`MessageDecoder`]: splits the backend byte stream into messages (type byte + body), fed
//!   whatever the socket returned, split anywhere.
//! - [`Connection`]: a state machine over the decoder that answers the authentication requests
//!   itself (writing the replies into the caller's buffer) and turns the message stream into the
//!   few facts the engine counts: "logged in", and per query "complete, N rows, tag, error".
//!
//! # How the engine uses it
//!
//! One [`Connection`] per virtual user's socket, created when the socket is connected:
//!
//! ```
//! use headroom_proto::pg::{frontend, Connection, Login, Progress};
//!
//! let mut out = Vec::new(); // the connection's write buffer, reused
//! let login = Login { user: "app", password: "secret", database: "app", application_name: None };
//! // 18 bytes from the worker's RNG (or the OS); only used if the server asks for SCRAM.
//! let nonce = [7u8; 18];
//! let mut conn = Connection::new(&login, &nonce, &mut out); // appends the StartupMessage
//! // ... send `out`, clear it; then for every chunk read from the socket:
//! # let chunk: &[u8] = b"R\0\0\0\x08\0\0\0\0Z\0\0\0\x05I";
//! let mut rest = chunk;
//! loop {
//!     let (used, progress) = conn.decode(rest, &mut out).expect("count the error, close");
//!     rest = &rest[used..];
//!     match progress {
//!         Progress::NeedMore => break, // all of `rest` consumed
//!         Progress::AuthReply(_method) => {} // a reply was appended to `out`: send it
//!         Progress::LoggedIn(_info) => {
//!             // start the session: e.g. prepare its statements once
//!             frontend::prepare(&mut out, "s1", "SELECT $1::int");
//!         }
//!         Progress::Complete(result) => {
//!             // one unit (a simple Query, or an extended sequence up to Sync) is done:
//!             // record latency, result.rows, result.error (SQLSTATE) ...
//!             let _ = result;
//!         }
//!     }
//! }
//! // then send `out` if not empty
//! ```
//!
//! **Units.** The server ends every simple `Query`, and every extended-protocol sequence up to
//! and including a `Sync`, with one `ReadyForQuery`; that is where a unit *completes* and
//! [`Progress::Complete`] reports it ([`QueryResult`]: rows, bytes, the last command tag, the
//! first error, the transaction status). Units complete in the order they were sent, so the
//! engine may pipeline several and match them by order ([`QueryResult::unit`] numbers them from
//! 1). The helpers [`frontend::query`], [`frontend::query_params`], [`frontend::prepare`] and
//! [`frontend::execute_prepared`] each write exactly one unit. A session prepares its statements
//! once (`prepare`, named), then sends `execute_prepared` with new parameters as often as it
//! likes: one `Bind` + `Execute` + `Sync` per execution, no re-parsing on the server.
//!
//! **Errors** come in two kinds. A query that fails (`ERROR`: syntax, missing table, constraint,
//! serialization failure) is an ordinary completed unit with [`QueryResult::error`] set to its
//! severity and SQLSTATE: the connection goes on, as does the session. Anything that ends the
//! connection is an `Err(`[`PgError`]`)`: bytes that are not the protocol, a server that wants an
//! authentication method we do not speak, a failed SCRAM verification, a refused login
//! ([`PgError::AuthFailed`], SQLSTATE class 28: wrong password, no pg_hba.conf entry) or any
//! `FATAL` error ([`PgError::Server`]: too many connections, database does not exist,
//! administrator shutdown). Both are fixed-size `Copy` values, counted without allocating; the
//! human-readable message of the last server error is kept aside
//! ([`Connection::last_error_message`]) for reports.
//!
//! # Memory
//!
//! The decoder owns no read buffer: a message that arrives whole inside one chunk is decoded in
//! place from the caller's slice. Only a message split across reads is copied into a per
//! connection `Vec`, allocated at the first split and freed again after a message larger than
//! [`RETAINED_CAPACITY`]. Bodies the client never looks at (`DataRow`, `CopyData`,
//! `NoticeResponse`, `NotificationResponse`) are never copied at all, only counted down, so a
//! large result set costs no memory however it is split. Every other message is refused above
//! [`DEFAULT_MAX_MESSAGE_LEN`] ([`PgError::TooLong`]; settable per connection). An idle,
//! logged-in [`Connection`] is 232 bytes (on 64-bit targets) plus its split-message buffer (none
//! until a message arrives split, then at most [`RETAINED_CAPACITY`] kept); the login
//! credentials are dropped once authentication succeeds.
//!
//! # Robustness
//!
//! No input panics the decoder or the state machine (the `fuzz/` target `pg_backend` checks
//! this, and that any split of a stream gives the same events as the stream in one piece):
//! lengths are checked before use, all slicing goes through `get`, and a server's SCRAM
//! iteration count is capped ([`MAX_SCRAM_ITERATIONS`]) so a hostile server cannot make the
//! client burn CPU. After an `Err` the connection must be closed: its framing is lost.
//!
//! # Not supported
//!
//! TLS (`SSLRequest`), GSSAPI/SSPI/Kerberos authentication, SCRAM-SHA-256-PLUS (channel
//! binding: it needs TLS), SASLprep of non-ASCII passwords (passwords are used as their UTF-8
//! bytes, which is what PostgreSQL does for any password SASLprep would leave unchanged — all
//! printable ASCII ones), `COPY FROM STDIN` (the server would wait for data: reported as
//! [`PgError::Unexpected`]), binary-format parameters and results (everything is text).

mod backend;
mod conn;
pub mod frontend;
pub mod scram;
#[cfg(test)]
mod tests;

pub use backend::{Message, MessageDecoder, DEFAULT_MAX_MESSAGE_LEN, RETAINED_CAPACITY};
pub use conn::{
    AuthMethod, CommandTag, Connection, Login, LoginInfo, Progress, QueryResult, TxStatus,
    MAX_ERROR_MESSAGE_LEN,
};
pub use scram::{ScramError, MAX_SCRAM_ITERATIONS};

/// Why a connection cannot go on. Fixed size and `Copy`: counted by kind without allocating.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PgError {
    /// A message length below 4 or above 2^31 - 1: not the PostgreSQL protocol.
    #[error("invalid backend message length")]
    BadLength,
    /// A message the client keeps was longer than the decoder's limit.
    #[error("backend message longer than the limit")]
    TooLong,
    /// The body of a message of this type does not parse.
    #[error("malformed backend message {:?}", char::from(*.0))]
    Malformed(u8),
    /// A message of this type makes no sense in the connection's state.
    #[error("unexpected backend message {:?}", char::from(*.0))]
    Unexpected(u8),
    /// The server asked for an authentication method we do not speak (its request code:
    /// 2 Kerberos, 6 SCM, 7/8 GSSAPI, 9 SSPI, 10 SASL without SCRAM-SHA-256).
    #[error("unsupported authentication method (request code {0})")]
    UnsupportedAuth(u32),
    /// The SCRAM exchange failed on our side (bad server message, or the server could not
    /// prove it knows the password).
    #[error("SCRAM-SHA-256: {0}")]
    Scram(ScramError),
    /// The server refused the login: an error of SQLSTATE class 28 (`28P01` wrong password,
    /// `28000` no pg_hba.conf entry or role cannot log in).
    #[error("authentication failed: {0}")]
    AuthFailed(ServerError),
    /// A server error that ends the connection: any error before the login completed (other
    /// than class 28), or one of severity `FATAL`/`PANIC` afterwards.
    #[error("server error: {0}")]
    Server(ServerError),
    /// The connection ended in the middle of a message, a login or a unit.
    #[error("connection closed before the reply was complete")]
    Incomplete,
}

impl PgError {
    /// An authentication failure, whichever side noticed it: refused by the server, SCRAM
    /// verification failed, or a method we cannot speak.
    pub fn is_auth(&self) -> bool {
        matches!(
            self,
            PgError::AuthFailed(_) | PgError::Scram(_) | PgError::UnsupportedAuth(_)
        )
    }
}

/// An `ErrorResponse`'s severity and SQLSTATE: what the engine counts. The message text is in
/// [`Connection::last_error_message`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerError {
    pub severity: Severity,
    pub code: SqlState,
}

impl ServerError {
    /// SQLSTATE class 28, invalid authorization specification.
    pub fn is_auth(&self) -> bool {
        self.code.class() == *b"28"
    }
}

impl std::fmt::Display for ServerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} {}", self.severity, self.code)
    }
}

/// The non-localized severity of an `ErrorResponse` (field `V`, or `S` from servers before 9.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Error,
    Fatal,
    Panic,
    /// Any other word (`WARNING`, `NOTICE`, ... in an `ErrorResponse` would be a server bug).
    Other,
}

impl Severity {
    fn parse(word: &[u8]) -> Severity {
        match word {
            b"ERROR" => Severity::Error,
            b"FATAL" => Severity::Fatal,
            b"PANIC" => Severity::Panic,
            _ => Severity::Other,
        }
    }

    /// The server ends the connection after an error of this severity.
    pub fn ends_connection(self) -> bool {
        matches!(self, Severity::Fatal | Severity::Panic)
    }
}

/// An ErrorResponse (or NoticeResponse) body: its severity and SQLSTATE, and its message text
/// (empty if it has none). [`PgError::Malformed`] when a field is unterminated or the code or
/// severity is missing.
pub fn parse_error_response(body: &[u8]) -> Result<(ServerError, &[u8]), PgError> {
    const BAD: PgError = PgError::Malformed(b'E');
    let (mut localized, mut severity, mut code, mut message) = (None, None, None, None);
    let mut rest = body;
    loop {
        let (&field, after) = rest.split_first().ok_or(BAD)?;
        if field == 0 {
            break;
        }
        let end = after.iter().position(|&b| b == 0).ok_or(BAD)?;
        let value = after.get(..end).unwrap_or_default();
        match field {
            b'S' => localized = Some(value),
            b'V' => severity = Some(value),
            b'C' => code = Some(value),
            b'M' => message = Some(value),
            _ => {}
        }
        rest = after.get(end + 1..).unwrap_or_default();
    }
    let code: [u8; 5] = code.and_then(|c| c.try_into().ok()).ok_or(BAD)?;
    if !code.iter().all(u8::is_ascii_alphanumeric) {
        return Err(BAD);
    }
    let severity = Severity::parse(severity.or(localized).ok_or(BAD)?);
    Ok((
        ServerError {
            severity,
            code: SqlState(code),
        },
        message.unwrap_or_default(),
    ))
}

/// A five-character SQLSTATE code, e.g. `42P01` (undefined table), `28P01` (invalid password).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SqlState(pub [u8; 5]);

impl SqlState {
    /// The code as text (`"?????"` if the server sent non-ASCII, which it never does).
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).unwrap_or("?????")
    }

    /// Its first two characters: the class (`28` authorization, `42` syntax or access rule,
    /// `40` transaction rollback, `53` insufficient resources, `57` operator intervention).
    pub fn class(&self) -> [u8; 2] {
        [self.0[0], self.0[1]]
    }
}

impl std::fmt::Display for SqlState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Debug for SqlState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SqlState({})", self.as_str())
    }
}
