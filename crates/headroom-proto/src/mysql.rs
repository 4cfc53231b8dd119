//! MySQL client/server protocol (4.1+, "protocol 41"), client side, sans I/O: what a load
//! generator needs to play a MySQL or MariaDB client.
//!
//! Log in (`mysql_native_password`, `caching_sha2_password`, optionally over TLS), send text
//! queries and prepared statements, and count what comes back (rows, affected rows, errors by
//! code and SQLSTATE) without keeping it. Three layers, each usable alone:
//!
//! - [`command`]: encoders. Every function *appends* one packet (header included) to a caller's
//!   `Vec<u8>`, so a connection's write buffer is reused from command to command.
//! - [`PacketDecoder`]: cuts the server's byte stream (split anywhere) into packets, joins the
//!   fragments of a payload of 16 MiB or more, and counts down the bodies nobody reads.
//! - [`Connection`]: the state machine over the decoder. It answers the handshake itself (writing
//!   the replies into the caller's buffer) and turns the packet stream into the few facts the
//!   engine counts: "logged in", and per command "complete: N rows, M affected, error".
//!
//! # How the engine uses it
//!
//! One [`Connection`] per virtual user's socket, created when the socket is connected. The
//! server speaks first, so there is nothing to send until `decode` says so:
//!
//! ```
//! use headroom_proto::mysql::{Connection, Login, Options, Progress};
//!
//! let mut out = Vec::new(); // the connection's write buffer, reused
//! let login = Login { user: "app", password: "secret", database: Some("app") };
//! let mut conn = Connection::new(&login, Options::default());
//! # let chunk: &[u8] = b"";
//! // for every chunk read from the socket:
//! let mut rest = chunk;
//! loop {
//!     let (used, progress) = conn.decode(rest, &mut out).expect("count the error, close");
//!     rest = &rest[used..];
//!     match progress {
//!         Progress::NeedMore => break, // all of `rest` consumed
//!         Progress::AuthReply(_plugin) => {} // a login packet was appended to `out`: send it
//!         Progress::StartTls => {
//!             // (Options::tls only) send `out`, do the TLS handshake on the socket, then
//!             // conn.tls_started(&mut out): it appends the HandshakeResponse; from now on
//!             // feed the decrypted bytes.
//!         }
//!         Progress::LoggedIn(_info) => {
//!             conn.com_stmt_prepare(&mut out, "SELECT name FROM items WHERE id = ?");
//!         }
//!         Progress::Prepared { statement_id, .. } => {
//!             conn.com_stmt_execute(&mut out, statement_id, [Some("42")]);
//!         }
//!         Progress::Complete(result) => {
//!             // a command (or one result of a multi-result command, `result.more`) is done:
//!             // record latency, result.rows, result.affected, result.error ...
//!             let _ = result;
//!         }
//!     }
//! }
//! // then send `out` if not empty
//! ```
//!
//! **Commands and their completions.** The commands are methods of the [`Connection`]
//! (`com_query`, `com_stmt_prepare`, `com_stmt_execute`, `com_ping`, `com_init_db`,
//! `com_reset_connection`, `com_stmt_close`, `com_quit`): each appends one packet with sequence
//! id 0 and, when the server answers it, notes what kind of reply to expect, since a prepare's
//! reply and a query's both start with a 0x00 byte and only the command tells them apart. The
//! server answers in order, so the engine may pipeline and match completions to commands in
//! order. Every command that has a reply ends in exactly one *final* event:
//! [`Progress::Prepared`] for a successful `com_stmt_prepare`, otherwise
//! [`Progress::Complete`] with [`QueryResult::more`] false. `com_stmt_close` and `com_quit`
//! have no reply and no event.
//!
//! **Multiple results** (a multi-statement query with [`Options::multi_statements`], a `CALL`):
//! each result is its own [`Progress::Complete`], all but the last with `more: true` (the
//! server's `SERVER_MORE_RESULTS_EXISTS`); the command is done at the first `more: false`.
//! Results are reported, not aggregated, so the engine can count rows per statement; an
//! aggregate is a sum over the events up to the final one. An error ends a multi-result reply
//! (the server runs no further statement).
//!
//! **Errors** come in two kinds. A command that fails (syntax, missing table 1146, duplicate key
//! 1062, deadlock 1213) is an ordinary completion with [`QueryResult::error`] set to its code
//! and SQLSTATE: the connection goes on. Anything that ends the connection is an
//! `Err(`[`MysqlError`]`)`: bytes that are not the protocol, a refused login
//! ([`MysqlError::AuthFailed`] with the server's code: 1045 access denied, 1044 no access to the
//! database, ...), an authentication plugin we do not speak, any other error before the login
//! completed or outside a command ([`MysqlError::ServerError`]: 1040 too many connections, 1049
//! unknown database, 1053 shutdown). Both are fixed-size `Copy` values, counted without
//! allocating; the text of the last server error is kept aside
//! ([`Connection::last_error_message`]) for reports.
//!
//! # Memory
//!
//! The decoder owns no read buffer: a packet that arrives whole inside one chunk is decoded in
//! place from the caller's slice. Only a packet split across reads is copied into a per
//! connection `Vec`, allocated at the first split and freed again after a packet larger than
//! [`RETAINED_CAPACITY`]. Rows, column definitions and parameter definitions are never copied,
//! only counted down (also when a row spans several 16 MiB fragments), so a large result set
//! costs no memory however it is split; every packet the connection does read (handshake,
//! OK, ERR, EOF, the column count, a prepare's reply) is refused above
//! [`DEFAULT_MAX_PACKET_LEN`] ([`MysqlError::TooLong`], settable per connection; such packets
//! are tens of bytes from a real server). An idle, logged-in [`Connection`] is 192 bytes (on
//! x86-64) plus its split-packet buffer (none until a packet arrives split, then at most
//! [`RETAINED_CAPACITY`] kept) and its pipeline queue (2 bytes a pending command, kept at its
//! high-water mark); the credentials are dropped once the login succeeds.
//!
//! # Robustness
//!
//! No input panics the decoder or the state machine (the `fuzz/` target `mysql_server` checks
//! this, and that any split of a stream gives the same events as the stream in one piece):
//! lengths are checked before use, all slicing goes through `get`, every packet's sequence id
//! is checked, column counts are capped ([`MAX_COLUMNS`]). After an `Err` the connection must
//! be closed: its framing is lost.
//!
//! # Not supported
//!
//! Authentication plugins other than the two above (`client_ed25519`, `auth_gssapi_client`,
//! `dialog`/PAM, `sha256_password`, `mysql_clear_password`, the pre-4.1 `mysql_old_password`:
//! [`MysqlError::UnsupportedAuth`]), `caching_sha2_password`'s full authentication without TLS
//! (it needs the server's RSA key: [`MysqlError::NeedsTls`]), servers older than 4.1, the
//! compressed protocol, `LOAD DATA LOCAL INFILE` (the capability is not asked for; a server that
//! asks anyway is [`MysqlError::Unexpected`]), cursors (`COM_STMT_FETCH`), typed parameters (all
//! are sent as strings, `MYSQL_TYPE_VAR_STRING`, which the server converts), and reading values
//! (rows are counted, not decoded).

pub mod auth;
pub mod command;
mod conn;
mod packet;
#[cfg(test)]
mod tests;

pub use auth::AuthPlugin;
pub use conn::{
    Connection, Login, LoginInfo, Options, Progress, QueryResult, ServerVersion,
    MAX_ERROR_MESSAGE_LEN,
};
pub use packet::{
    Keep, Packet, PacketDecoder, DEFAULT_MAX_PACKET_LEN, MAX_FRAGMENT, RETAINED_CAPACITY,
};

/// Most columns a result set (or a prepared statement's parameters or columns) may announce;
/// more is [`MysqlError::Malformed`]. MySQL and MariaDB allow 4096 columns in a table and in a
/// select list; this leaves room and fits the `u16` of [`QueryResult::columns`].
pub const MAX_COLUMNS: u64 = u16::MAX as u64;

/// Capability flags (`CLIENT_*`), as the handshake packets carry them.
pub mod caps {
    pub const LONG_PASSWORD: u32 = 1;
    pub const FOUND_ROWS: u32 = 1 << 1;
    pub const LONG_FLAG: u32 = 1 << 2;
    pub const CONNECT_WITH_DB: u32 = 1 << 3;
    pub const PROTOCOL_41: u32 = 1 << 9;
    pub const SSL: u32 = 1 << 11;
    pub const TRANSACTIONS: u32 = 1 << 13;
    pub const SECURE_CONNECTION: u32 = 1 << 15;
    pub const MULTI_STATEMENTS: u32 = 1 << 16;
    pub const MULTI_RESULTS: u32 = 1 << 17;
    pub const PS_MULTI_RESULTS: u32 = 1 << 18;
    pub const PLUGIN_AUTH: u32 = 1 << 19;
    pub const DEPRECATE_EOF: u32 = 1 << 24;
}

/// Server status flags (`SERVER_*`) of OK and EOF packets.
pub mod status {
    pub const IN_TRANS: u16 = 1;
    pub const AUTOCOMMIT: u16 = 1 << 1;
    pub const MORE_RESULTS_EXISTS: u16 = 1 << 3;
}

/// Why a connection cannot go on. Fixed size and `Copy`: counted by kind without allocating.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MysqlError {
    /// An empty packet where a packet must start with a type byte (MySQL's 4-byte header has no
    /// other invalid form).
    #[error("empty packet")]
    BadPacket,
    /// A packet the client reads was longer than the limit.
    #[error("server packet longer than the limit")]
    TooLong,
    /// The body of a packet starting with this byte does not parse.
    #[error("malformed server packet (0x{0:02x})")]
    Malformed(u8),
    /// A packet starting with this byte makes no sense in the connection's state (also: bytes
    /// before the TLS handshake, a reply with no command pending, a `LOCAL INFILE` request).
    #[error("unexpected server packet (0x{0:02x})")]
    Unexpected(u8),
    /// A packet's sequence id is not the next one.
    #[error("packet sequence id {got}, expected {expected}")]
    Sequence { expected: u8, got: u8 },
    /// The server refused the login: its error code (1045 access denied, 1044 no access to the
    /// database, 1130 host not allowed, 1251/1275 client too old, 1698 no password, 1862
    /// password expired, 3118/4151 account locked, or any SQLSTATE of class 28).
    #[error("login refused (error {0})")]
    AuthFailed(u16),
    /// The server wants an authentication plugin we do not speak.
    #[error("unsupported authentication plugin {0:?}")]
    UnsupportedAuth(AuthPlugin),
    /// `caching_sha2_password` wants the full authentication (the password, not cached on the
    /// server yet), which without TLS needs RSA: log in once over TLS (or with another client)
    /// to fill the server's cache, or use TLS.
    #[error("caching_sha2_password full authentication needs TLS")]
    NeedsTls,
    /// [`Options::tls`] is set and the server does not offer TLS (no `CLIENT_SSL`).
    #[error("the server does not offer TLS")]
    TlsUnavailable,
    /// The server does not speak protocol 4.1 (protocol version 10 with `CLIENT_PROTOCOL_41`
    /// and `CLIENT_SECURE_CONNECTION`): MySQL before 4.1.
    #[error("the server does not speak protocol 4.1")]
    UnsupportedServer,
    /// An error from the server outside a command or before the login completed, other than a
    /// refused login: 1040 too many connections, 1049 unknown database, 1129 host blocked,
    /// 1053 shutdown in progress, 1927 connection killed, 4031 idle timeout.
    #[error("server error {0}")]
    ServerError(u16),
    /// The connection ended in the middle of a packet, a login or a command's reply.
    #[error("connection closed before the reply was complete")]
    Incomplete,
}

impl MysqlError {
    /// An authentication failure, whichever side noticed it: refused by the server, or a
    /// plugin or exchange we cannot do.
    pub fn is_auth(&self) -> bool {
        matches!(
            self,
            MysqlError::AuthFailed(_) | MysqlError::UnsupportedAuth(_) | MysqlError::NeedsTls
        )
    }
}

/// A server error's code and SQLSTATE: what the engine counts. The message text is in
/// [`Connection::last_error_message`].
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SqlError {
    /// 1146 no such table, 1062 duplicate entry, 1213 deadlock, 1064 syntax, ...
    pub code: u16,
    /// Five characters, e.g. `42S02`; `HY000` when the server sent none (an error before the
    /// handshake, when protocol 41 is not yet agreed on).
    pub state: [u8; 5],
}

impl SqlError {
    /// The SQLSTATE as text (`"?????"` if the server sent non-ASCII).
    pub fn state_str(&self) -> &str {
        match std::str::from_utf8(&self.state) {
            Ok(s) => s,
            Err(_) => "?????",
        }
    }
}

impl std::fmt::Display for SqlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.code, self.state_str())
    }
}

impl std::fmt::Debug for SqlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SqlError({}, {})", self.code, self.state_str())
    }
}

/// The server refused a login: the codes of [`MysqlError::AuthFailed`].
pub(crate) fn is_login_refusal(e: &SqlError) -> bool {
    e.state[..2] == *b"28"
        || matches!(
            e.code,
            1044 | 1045 | 1130 | 1251 | 1275 | 1698 | 1862 | 3118 | 4151
        )
}

/// An ERR packet's payload (`0xFF`, code, optional `#` + SQLSTATE, message): the error and its
/// message text. [`MysqlError::Malformed`] when shorter than its code.
pub fn parse_err(payload: &[u8]) -> Result<(SqlError, &[u8]), MysqlError> {
    const BAD: MysqlError = MysqlError::Malformed(0xff);
    let code = payload.get(1..3).ok_or(BAD)?;
    let code = u16::from_le_bytes([code[0], code[1]]);
    let rest = payload.get(3..).unwrap_or_default();
    let (state, message) = match rest.split_first() {
        Some((b'#', after)) if after.len() >= 5 => {
            let mut state = [0u8; 5];
            state.copy_from_slice(after.get(..5).unwrap_or_default());
            (state, after.get(5..).unwrap_or_default())
        }
        _ => (*b"HY000", rest),
    };
    Ok((SqlError { code, state }, message))
}

/// A length-encoded integer at the start of `b`: (value, bytes it took). `None` when cut short
/// or when the first byte is 0xFB (NULL) or 0xFF (not an integer).
pub fn lenenc_int(b: &[u8]) -> Option<(u64, usize)> {
    let (&first, rest) = b.split_first()?;
    let le = |n: usize| -> Option<u64> {
        let bytes = rest.get(..n)?;
        Some(
            bytes
                .iter()
                .rev()
                .fold(0u64, |acc, &x| (acc << 8) | u64::from(x)),
        )
    };
    match first {
        0..=0xfa => Some((u64::from(first), 1)),
        0xfc => Some((le(2)?, 3)),
        0xfd => Some((le(3)?, 4)),
        0xfe => Some((le(8)?, 9)),
        _ => None,
    }
}
