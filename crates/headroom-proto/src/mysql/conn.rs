//! The client connection state machine: the handshake (answering the server's greeting and
//! authentication requests), then the replies of commands in the order they were sent. See the
//! module documentation of [`crate::mysql`].

use std::collections::VecDeque;

use super::auth::{self, AuthPlugin, NONCE_LEN};
use super::packet::{Keep, Packet, PacketDecoder, DEFAULT_MAX_PACKET_LEN};
use super::{caps, command, is_login_refusal, lenenc_int, parse_err, status};
use super::{MysqlError, SqlError, MAX_COLUMNS};

/// Longest error message text kept for [`Connection::last_error_message`], in bytes.
pub const MAX_ERROR_MESSAGE_LEN: usize = 1024;
/// Longest server version string kept; longer ones are cut.
const VERSION_CAP: usize = 47;

/// Who logs in, and where.
#[derive(Debug, Clone, Copy)]
pub struct Login<'a> {
    pub user: &'a str,
    /// Used only as the plugin needs it (scrambled; in clear only over TLS).
    pub password: &'a str,
    /// The default database (`CLIENT_CONNECT_WITH_DB`); `None`: none.
    pub database: Option<&'a str>,
}

/// How to talk to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Ask for TLS (SSLRequest): [`Progress::StartTls`] comes after the greeting, and a server
    /// without TLS is [`MysqlError::TlsUnavailable`].
    pub tls: bool,
    /// `CLIENT_MULTI_STATEMENTS`: a `com_query` may hold several statements separated by `;`,
    /// each answered by its own result (see [`QueryResult::more`]).
    pub multi_statements: bool,
    /// Take `CLIENT_DEPRECATE_EOF` when the server offers it (default): result sets end with an
    /// OK instead of two EOF packets. Off: the classic EOF-terminated result sets (both are
    /// decoded alike; the option exists for servers and proxies that get the new form wrong).
    pub deprecate_eof: bool,
    /// Longest packet the connection reads (see [`super::DEFAULT_MAX_PACKET_LEN`]).
    pub max_packet_len: u32,
    /// The connection's character set and collation id (default 45, `utf8mb4_general_ci`).
    pub charset: u8,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            tls: false,
            multi_statements: false,
            deprecate_eof: true,
            max_packet_len: DEFAULT_MAX_PACKET_LEN,
            charset: command::UTF8MB4_GENERAL_CI,
        }
    }
}

/// The server version string of the greeting (e.g. `5.5.5-10.11.19-MariaDB-0+deb12u1`: MariaDB
/// puts `5.5.5-` in front for old clients), kept inline.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ServerVersion {
    buf: [u8; VERSION_CAP],
    len: u8,
}

impl Default for ServerVersion {
    fn default() -> Self {
        ServerVersion {
            buf: [0; VERSION_CAP],
            len: 0,
        }
    }
}

impl ServerVersion {
    fn set(&mut self, text: &[u8]) {
        let n = text.len().min(VERSION_CAP);
        self.buf[..n].copy_from_slice(&text[..n]);
        self.len = n as u8;
    }

    /// The version text (`""` if not UTF-8).
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(self.buf.get(..usize::from(self.len)).unwrap_or_default())
            .unwrap_or_default()
    }
}

impl std::fmt::Debug for ServerVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

/// The login completed (the server's OK after authentication).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoginInfo {
    /// The server's thread id for this connection (what `KILL` names).
    pub connection_id: u32,
    /// The plugin that authenticated us (after any AuthSwitchRequest).
    pub plugin: AuthPlugin,
    /// The login went over TLS.
    pub tls: bool,
    /// The capabilities the server offered, and those we asked for (`super::caps`).
    pub server_caps: u32,
    pub caps: u32,
    /// Status flags of the final OK (`super::status`: autocommit...).
    pub status: u16,
    /// Server bytes of the login, greeting to OK.
    pub bytes: u64,
    pub version: ServerVersion,
}

/// A completed command (or one result of a multi-result command).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueryResult {
    /// Rows of the result set (0 for an OK reply).
    pub rows: u64,
    /// From the OK packet: rows an INSERT/UPDATE/DELETE changed (0 for a result set, or as
    /// the server reports it in its final OK).
    pub affected: u64,
    /// From the OK packet: the AUTO_INCREMENT value an INSERT generated.
    pub last_insert_id: u64,
    /// Columns of the result set (0 for an OK reply).
    pub columns: u16,
    pub warnings: u16,
    /// Status flags of the final OK or EOF (`super::status`), 0 after an error.
    pub status: u16,
    /// The ERR reply (its text: [`Connection::last_error_message`]); rows counted before it
    /// (an error in the middle of a result set) stay in `rows`.
    pub error: Option<SqlError>,
    /// More results of the same command follow (`SERVER_MORE_RESULTS_EXISTS`): the command is
    /// done at the first result without it.
    pub more: bool,
    /// Server bytes of this result, headers included.
    pub bytes: u64,
}

/// Progress of one [`Connection::decode`] call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// All input consumed, nothing completed.
    NeedMore,
    /// (With [`Options::tls`]) an SSLRequest was appended to `out`: send it, run the TLS
    /// handshake, then call [`Connection::tls_started`] and feed the decrypted stream.
    StartTls,
    /// A login packet (HandshakeResponse, AuthSwitchResponse, the password) was appended to
    /// `out` for this plugin: send it.
    AuthReply(AuthPlugin),
    /// The login completed: commands may be sent.
    LoggedIn(LoginInfo),
    /// A `com_stmt_prepare` succeeded: `statement_id` is what `com_stmt_execute` and
    /// `com_stmt_close` name; its parameter and column definitions were read (and dropped).
    Prepared {
        statement_id: u32,
        params: u16,
        columns: u16,
    },
    /// A command completed (an OK, an ERR, or a result set read to its end).
    Complete(QueryResult),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the server's greeting.
    Greeting,
    /// SSLRequest written: waiting for [`Connection::tls_started`]; no byte may come.
    TlsWait,
    /// HandshakeResponse written: OK, ERR, AuthSwitchRequest or AuthMoreData.
    Auth,
    /// Logged in: replies to commands.
    Ready,
}

/// What a pending command's reply looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// OK, ERR or a result set (query, execute, ping, init_db, reset).
    Result,
    /// A prepare's OK (statement id and counts) and definitions, or ERR.
    Prepare,
}

/// A command sent and not yet answered: its reply's kind and first sequence id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pending {
    expect: Expect,
    seq: u8,
}

/// Where in the current reply we are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reply {
    /// Before a reply's first packet (or a further result's).
    Start,
    /// Column definitions still to come.
    Columns {
        left: u16,
    },
    /// The EOF after them (without `CLIENT_DEPRECATE_EOF`).
    ColumnsEof,
    /// Rows, up to an EOF/OK (0xFE) or ERR.
    Rows,
    /// A prepare's parameter definitions, then an EOF (without `DEPRECATE_EOF`).
    PrepParams {
        left: u16,
    },
    PrepParamsEof,
    /// A prepare's column definitions, then an EOF (without `DEPRECATE_EOF`).
    PrepColumns {
        left: u16,
    },
    PrepColumnsEof,
}

/// The facts of the reply in progress.
#[derive(Debug, Clone, Copy, Default)]
struct Unit {
    rows: u64,
    bytes: u64,
    columns: u16,
    statement_id: u32,
    params: u16,
}

/// What is needed until the login completes, then dropped.
struct Creds {
    user: String,
    password: String,
    database: Option<String>,
    nonce: [u8; NONCE_LEN],
    /// The plugin our last authentication packet was made for.
    plugin: AuthPlugin,
    switched: bool,
    password_sent: bool,
    server_caps: u32,
    version: ServerVersion,
}

/// Everything but the decoder, so that a packet borrowed from the decoder can be handled.
struct State {
    phase: Phase,
    opts: Options,
    creds: Option<Box<Creds>>,
    /// The capabilities we asked for (0 before the greeting).
    caps: u32,
    connection_id: u32,
    tls: bool,
    /// Sequence id of the next packet (during the login, and inside a reply).
    next_seq: u8,
    pending: VecDeque<Pending>,
    reply: Reply,
    unit: Unit,
    err_msg: String,
}

/// One client connection's protocol state. See the module documentation of [`crate::mysql`].
pub struct Connection {
    dec: PacketDecoder,
    st: State,
    failed: Option<MysqlError>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("phase", &self.st.phase)
            .field("reply", &self.st.reply)
            .field("pending", &self.st.pending.len())
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// A connection about to log in. The server speaks first: feed its greeting to
    /// [`Connection::decode`], which writes the login packets.
    pub fn new(login: &Login<'_>, opts: Options) -> Connection {
        let mut dec = PacketDecoder::new();
        dec.set_max_len(opts.max_packet_len);
        Connection {
            dec,
            st: State {
                phase: Phase::Greeting,
                opts,
                creds: Some(Box::new(Creds {
                    user: login.user.to_owned(),
                    password: login.password.to_owned(),
                    database: login.database.map(str::to_owned),
                    nonce: [0; NONCE_LEN],
                    plugin: AuthPlugin::NativePassword,
                    switched: false,
                    password_sent: false,
                    server_caps: 0,
                    version: ServerVersion::default(),
                })),
                caps: 0,
                connection_id: 0,
                tls: false,
                next_seq: 0,
                pending: VecDeque::new(),
                reply: Reply::Start,
                unit: Unit::default(),
                err_msg: String::new(),
            },
            failed: None,
        }
    }

    /// Longest packet read (default [`super::DEFAULT_MAX_PACKET_LEN`]).
    pub fn set_max_packet_len(&mut self, max_len: u32) {
        self.dec.set_max_len(max_len);
    }

    /// Feeds bytes read from the socket; packets the login needs are appended to `out`.
    /// Returns how many bytes were consumed and what completed; the bytes after a completed
    /// event are not consumed: call again with the rest.
    ///
    /// `NeedMore` comes with all of `input` consumed; any other progress with at least one byte
    /// consumed. After an `Err` the connection is unusable (close it): every later call returns
    /// the same error.
    pub fn decode(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(usize, Progress), MysqlError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let mut pos = 0usize;
        loop {
            let rest = input.get(pos..).unwrap_or_default();
            let Some(&first) = rest.first() else {
                return Ok((pos, Progress::NeedMore));
            };
            if self.st.phase == Phase::TlsWait {
                // Plain-text bytes where the TLS handshake should be: an injection (what
                // CVE-2021-23222 was for libpq), never the server's.
                return self.fail(MysqlError::Unexpected(first));
            }
            self.dec.set_keep(self.st.keep());
            let step = self.dec.decode(rest).and_then(|(used, p)| match p {
                None => Ok((used, None)),
                Some(p) => self.st.handle(p, out).map(|pr| (used, Some(pr))),
            });
            match step {
                Err(e) => return self.fail(e),
                Ok((used, None)) => return Ok((pos + used, Progress::NeedMore)),
                Ok((used, Some(Progress::NeedMore))) => pos += used,
                Ok((used, Some(p))) => return Ok((pos + used, p)),
            }
        }
    }

    fn fail(&mut self, e: MysqlError) -> Result<(usize, Progress), MysqlError> {
        self.failed = Some(e);
        Err(e)
    }

    /// The TLS handshake the last [`Progress::StartTls`] asked for is done: appends the
    /// HandshakeResponse (sequence id 2) to `out`, to be sent over TLS. Does nothing in any
    /// other state (and returns `false`).
    pub fn tls_started(&mut self, out: &mut Vec<u8>) -> bool {
        if self.st.phase != Phase::TlsWait || self.failed.is_some() {
            return false;
        }
        self.st.tls = true;
        self.st.send_response(out);
        true
    }

    /// The server closed the connection. `Ok` if it did so with no command awaiting its reply
    /// (after `com_quit`, or after an error already returned); [`MysqlError::Incomplete`] in the
    /// middle of a packet, the login or a reply.
    pub fn eof(&self) -> Result<(), MysqlError> {
        if self.failed.is_some() || !self.in_progress() {
            Ok(())
        } else {
            Err(MysqlError::Incomplete)
        }
    }

    /// A packet, the login or a reply is partly received, or a command awaits its reply.
    pub fn in_progress(&self) -> bool {
        self.dec.in_progress()
            || self.st.phase != Phase::Ready
            || self.st.reply != Reply::Start
            || !self.st.pending.is_empty()
    }

    /// The login completed and the connection has not failed.
    pub fn is_ready(&self) -> bool {
        self.st.phase == Phase::Ready && self.failed.is_none()
    }

    /// Commands sent whose final reply has not arrived yet.
    pub fn pending(&self) -> usize {
        self.st.pending.len()
    }

    /// The server's id for this connection (from its greeting; 0 before it).
    pub fn connection_id(&self) -> u32 {
        self.st.connection_id
    }

    /// The capabilities we asked for (`super::caps`; 0 before the greeting).
    pub fn caps(&self) -> u32 {
        self.st.caps
    }

    /// The message text of the last ERR (at most [`MAX_ERROR_MESSAGE_LEN`] bytes).
    pub fn last_error_message(&self) -> &str {
        &self.st.err_msg
    }

    /// Capacity of the split-packet buffer (0 when none is held), for memory accounting.
    pub fn buffer_capacity(&self) -> usize {
        self.dec.buffer_capacity()
    }

    // ---- commands: each appends one packet (sequence id 0) and notes its reply ----

    /// `COM_QUERY`: a text-protocol statement (several with [`Options::multi_statements`]).
    /// Completes with [`Progress::Complete`] (one per result).
    pub fn com_query(&mut self, out: &mut Vec<u8>, sql: impl AsRef<[u8]>) {
        let seq = command::query(out, sql.as_ref());
        self.st.expect(Expect::Result, seq);
    }

    /// `COM_STMT_PREPARE`: completes with [`Progress::Prepared`], or with a
    /// [`Progress::Complete`] carrying the error.
    pub fn com_stmt_prepare(&mut self, out: &mut Vec<u8>, sql: impl AsRef<[u8]>) {
        let seq = command::prepare(out, sql.as_ref());
        self.st.expect(Expect::Prepare, seq);
    }

    /// `COM_STMT_EXECUTE` of a prepared statement with its parameters (`None`: NULL), sent as
    /// strings ([`command::execute`]). Completes with [`Progress::Complete`]: rows of its
    /// binary result set, or the OK's affected rows.
    pub fn com_stmt_execute<I, P>(&mut self, out: &mut Vec<u8>, statement_id: u32, params: I)
    where
        I: IntoIterator<Item = Option<P>>,
        I::IntoIter: Clone,
        P: AsRef<[u8]>,
    {
        let seq = command::execute(out, statement_id, params);
        self.st.expect(Expect::Result, seq);
    }

    /// `COM_STMT_CLOSE`: no reply, no event.
    pub fn com_stmt_close(&mut self, out: &mut Vec<u8>, statement_id: u32) {
        command::stmt_close(out, statement_id);
    }

    /// `COM_PING`: completes with an OK.
    pub fn com_ping(&mut self, out: &mut Vec<u8>) {
        let seq = command::ping(out);
        self.st.expect(Expect::Result, seq);
    }

    /// `COM_INIT_DB` (`USE database`): completes with an OK, or an error (1049 unknown database).
    pub fn com_init_db(&mut self, out: &mut Vec<u8>, database: &str) {
        let seq = command::init_db(out, database.as_bytes());
        self.st.expect(Expect::Result, seq);
    }

    /// `COM_RESET_CONNECTION`: completes with an OK.
    pub fn com_reset_connection(&mut self, out: &mut Vec<u8>) {
        let seq = command::reset_connection(out);
        self.st.expect(Expect::Result, seq);
    }

    /// `COM_QUIT`: the server closes the connection without a reply (then [`Connection::eof`]
    /// is `Ok` once the replies to earlier commands have come).
    pub fn com_quit(&mut self, out: &mut Vec<u8>) {
        command::quit(out);
    }
}

impl State {
    fn expect(&mut self, expect: Expect, seq: u8) {
        self.pending.push_back(Pending { expect, seq });
    }

    /// Which packets the decoder keeps next: rows and definitions are only counted.
    fn keep(&self) -> Keep {
        match self.reply {
            Reply::Columns { .. }
            | Reply::Rows
            | Reply::PrepParams { .. }
            | Reply::PrepColumns { .. } => Keep::Terminators,
            _ => Keep::All,
        }
    }

    fn deprecate_eof(&self) -> bool {
        self.caps & caps::DEPRECATE_EOF != 0
    }

    /// One packet; `Progress::NeedMore` means "nothing to report", go on.
    fn handle(&mut self, p: Packet<'_>, out: &mut Vec<u8>) -> Result<Progress, MysqlError> {
        match self.phase {
            Phase::Greeting => {
                self.unit.bytes = p.wire_len();
                if p.seq != 0 {
                    return Err(MysqlError::Sequence {
                        expected: 0,
                        got: p.seq,
                    });
                }
                self.greeting(p.body, out)
            }
            Phase::Auth => {
                self.unit.bytes = self.unit.bytes.saturating_add(p.wire_len());
                self.check_seq(&p)?;
                self.auth_packet(p.body, out)
            }
            Phase::Ready => self.reply_packet(&p),
            Phase::TlsWait => Err(MysqlError::Unexpected(p.body.first().copied().unwrap_or(0))),
        }
    }

    fn check_seq(&mut self, p: &Packet<'_>) -> Result<(), MysqlError> {
        if p.seq != self.next_seq {
            return Err(MysqlError::Sequence {
                expected: self.next_seq,
                got: p.seq,
            });
        }
        self.next_seq = p.next_seq();
        Ok(())
    }

    // ---- the login ----

    fn greeting(&mut self, body: &[u8], out: &mut Vec<u8>) -> Result<Progress, MysqlError> {
        let &first = body.first().ok_or(MysqlError::BadPacket)?;
        if first == 0xff {
            // Refused before the handshake: too many connections, host blocked or not allowed.
            let e = self.server_error(body)?;
            return Err(login_error(e));
        }
        if first != 10 {
            return Err(MysqlError::UnsupportedServer);
        }
        const BAD: MysqlError = MysqlError::Malformed(10);
        let rest = body.get(1..).unwrap_or_default();
        let nul = rest.iter().position(|&b| b == 0).ok_or(BAD)?;
        let version = rest.get(..nul).unwrap_or_default();
        let r = rest.get(nul + 1..).unwrap_or_default();
        // connection id (4), nonce part 1 (8), filler (1), capabilities, low half (2)
        let fixed = r.get(..15).ok_or(BAD)?;
        let connection_id = u32::from_le_bytes([fixed[0], fixed[1], fixed[2], fixed[3]]);
        let nonce1 = &fixed[4..12];
        let caps_lo = u32::from(u16::from_le_bytes([fixed[13], fixed[14]]));
        // character set (1), status (2), capabilities, high half (2), nonce length (1),
        // reserved (10; MariaDB's extended capabilities in the last 4)
        let Some(more) = r.get(15..31) else {
            // A 4.0 server's greeting ends here.
            return Err(MysqlError::UnsupportedServer);
        };
        let server_caps = caps_lo | u32::from(u16::from_le_bytes([more[3], more[4]])) << 16;
        if server_caps & caps::PROTOCOL_41 == 0 || server_caps & caps::SECURE_CONNECTION == 0 {
            return Err(MysqlError::UnsupportedServer);
        }
        let nonce_len = usize::from(more[5]);
        let r = r.get(31..).unwrap_or_default();
        // Nonce part 2: max(13, length - 8) bytes, the last a NUL.
        let part2_len = nonce_len.saturating_sub(8).max(13);
        let part2 = r.get(..part2_len).unwrap_or(r);
        let part2 = part2.get(..NONCE_LEN - 8).ok_or(BAD)?;
        let r = r.get(part2_len..).unwrap_or_default();
        let plugin = if server_caps & caps::PLUGIN_AUTH != 0 {
            // NUL-terminated (MySQL 5.5.7-5.5.9 forgot the NUL: then up to the end).
            let name = r.split(|&b| b == 0).next().unwrap_or_default();
            AuthPlugin::from_name(name)
        } else {
            AuthPlugin::NativePassword
        };

        let opts = self.opts;
        let creds = self
            .creds
            .as_deref_mut()
            .ok_or(MysqlError::Unexpected(10))?;
        let optional = caps::LONG_PASSWORD
            | caps::LONG_FLAG
            | caps::TRANSACTIONS
            | caps::MULTI_RESULTS
            | caps::PS_MULTI_RESULTS
            | caps::PLUGIN_AUTH
            | if opts.deprecate_eof {
                caps::DEPRECATE_EOF
            } else {
                0
            }
            | if opts.multi_statements {
                caps::MULTI_STATEMENTS
            } else {
                0
            };
        let mut ours = caps::PROTOCOL_41 | caps::SECURE_CONNECTION | (optional & server_caps);
        if creds.database.is_some() {
            if server_caps & caps::CONNECT_WITH_DB == 0 {
                return Err(MysqlError::UnsupportedServer);
            }
            ours |= caps::CONNECT_WITH_DB;
        }
        if opts.tls {
            if server_caps & caps::SSL == 0 {
                return Err(MysqlError::TlsUnavailable);
            }
            ours |= caps::SSL;
        }
        creds.nonce[..8].copy_from_slice(nonce1);
        creds.nonce[8..].copy_from_slice(part2);
        // A plugin we cannot speak as the server's default: answer as mysql_native_password
        // (what libmysqlclient does); the server switches if the user needs another.
        creds.plugin = if plugin.is_supported() {
            plugin
        } else {
            AuthPlugin::NativePassword
        };
        creds.server_caps = server_caps;
        creds.version.set(version);
        self.caps = ours;
        self.connection_id = connection_id;
        if opts.tls {
            self.next_seq = command::ssl_request(out, 1, ours, opts.charset);
            self.phase = Phase::TlsWait;
            return Ok(Progress::StartTls);
        }
        self.next_seq = 1;
        Ok(self.send_response(out))
    }

    /// Appends the HandshakeResponse41 (after the greeting, or after TLS started).
    fn send_response(&mut self, out: &mut Vec<u8>) -> Progress {
        let Some(creds) = self.creds.as_deref() else {
            return Progress::NeedMore;
        };
        let mut reply = Vec::with_capacity(32);
        auth::scramble(
            creds.plugin,
            creds.password.as_bytes(),
            &creds.nonce,
            &mut reply,
        );
        self.next_seq = command::handshake_response(
            out,
            self.next_seq,
            self.caps,
            self.opts.charset,
            creds.user.as_bytes(),
            &reply,
            creds.database.as_deref().unwrap_or_default().as_bytes(),
            creds.plugin.name(),
        );
        self.phase = Phase::Auth;
        Progress::AuthReply(creds.plugin)
    }

    fn auth_packet(&mut self, body: &[u8], out: &mut Vec<u8>) -> Result<Progress, MysqlError> {
        let &first = body.first().ok_or(MysqlError::BadPacket)?;
        let tls = self.tls;
        let Some(creds) = self.creds.as_deref_mut() else {
            return Err(MysqlError::Unexpected(first));
        };
        match first {
            0x00 => {
                let ok = parse_ok(body)?;
                let info = LoginInfo {
                    connection_id: self.connection_id,
                    plugin: creds.plugin,
                    tls,
                    server_caps: creds.server_caps,
                    caps: self.caps,
                    status: ok.status,
                    bytes: self.unit.bytes,
                    version: creds.version,
                };
                self.creds = None;
                self.phase = Phase::Ready;
                self.unit = Unit::default();
                Ok(Progress::LoggedIn(info))
            }
            0xff => {
                let e = self.server_error(body)?;
                Err(login_error(e))
            }
            0xfe => {
                // AuthSwitchRequest: plugin name, NUL, its data (a new nonce, NUL-terminated).
                // Bare 0xFE: the pre-4.1 "old password" switch.
                if creds.switched {
                    return Err(MysqlError::Unexpected(first));
                }
                let rest = body.get(1..).unwrap_or_default();
                if rest.is_empty() {
                    return Err(MysqlError::UnsupportedAuth(AuthPlugin::OldPassword));
                }
                let nul = rest
                    .iter()
                    .position(|&b| b == 0)
                    .ok_or(MysqlError::Malformed(first))?;
                let plugin = AuthPlugin::from_name(rest.get(..nul).unwrap_or_default());
                if !plugin.is_supported() {
                    return Err(MysqlError::UnsupportedAuth(plugin));
                }
                let data = rest.get(nul + 1..).unwrap_or_default();
                let nonce = data.get(..NONCE_LEN).ok_or(MysqlError::Malformed(first))?;
                creds.nonce.copy_from_slice(nonce);
                creds.plugin = plugin;
                creds.switched = true;
                let mut reply = Vec::with_capacity(32);
                auth::scramble(plugin, creds.password.as_bytes(), &creds.nonce, &mut reply);
                self.next_seq = command::auth_data(out, self.next_seq, &reply);
                Ok(Progress::AuthReply(plugin))
            }
            0x01 => {
                // AuthMoreData: caching_sha2_password's verdict on the scramble.
                if creds.plugin != AuthPlugin::CachingSha2 {
                    return Err(MysqlError::Unexpected(first));
                }
                match body {
                    // Fast authentication succeeded: the OK follows.
                    [0x01, 0x03] => Ok(Progress::NeedMore),
                    // Full authentication: the password itself, only over TLS.
                    [0x01, 0x04] => {
                        if creds.password_sent {
                            return Err(MysqlError::Unexpected(first));
                        }
                        if !tls {
                            return Err(MysqlError::NeedsTls);
                        }
                        creds.password_sent = true;
                        let mut password = Vec::with_capacity(creds.password.len() + 1);
                        password.extend_from_slice(creds.password.as_bytes());
                        password.push(0);
                        self.next_seq = command::auth_data(out, self.next_seq, &password);
                        Ok(Progress::AuthReply(AuthPlugin::CachingSha2))
                    }
                    _ => Err(MysqlError::Malformed(first)),
                }
            }
            _ => Err(MysqlError::Unexpected(first)),
        }
    }

    // ---- replies ----

    fn reply_packet(&mut self, p: &Packet<'_>) -> Result<Progress, MysqlError> {
        if self.reply == Reply::Start {
            let Some(front) = self.pending.front().copied() else {
                // Nothing asked: an ERR here is the server ending the connection (shutdown,
                // killed, MySQL's idle timeout 4031); anything else is not the protocol.
                let first = p.body.first().copied().ok_or(MysqlError::BadPacket)?;
                if first == 0xff {
                    let e = self.server_error(p.body)?;
                    return Err(MysqlError::ServerError(e.code));
                }
                return Err(MysqlError::Unexpected(first));
            };
            self.next_seq = front.seq;
            self.check_seq(p)?;
            self.unit = Unit {
                bytes: p.wire_len(),
                ..Unit::default()
            };
            return match front.expect {
                Expect::Result => self.first_of_result(p.body),
                Expect::Prepare => self.first_of_prepare(p.body),
            };
        }
        self.check_seq(p)?;
        self.unit.bytes = self.unit.bytes.saturating_add(p.wire_len());
        if !p.kept {
            // A row or a definition, counted and dropped.
            match &mut self.reply {
                Reply::Rows => self.unit.rows += 1,
                Reply::Columns { left }
                | Reply::PrepParams { left }
                | Reply::PrepColumns { left } => {
                    *left = left.saturating_sub(1);
                    if *left == 0 {
                        return Ok(self.definitions_done());
                    }
                }
                _ => return Err(MysqlError::Unexpected(0)),
            }
            return Ok(Progress::NeedMore);
        }
        let body = p.body;
        let &first = body.first().ok_or(MysqlError::BadPacket)?;
        let deprecate_eof = self.deprecate_eof();
        match (self.reply, first) {
            // An error in the middle of the rows (killed, timeout, a value error): the rows
            // before it stay counted.
            (Reply::Rows, 0xff) => {
                let e = self.server_error(body)?;
                Ok(self.complete(End::Err(e)))
            }
            // The end of the rows: an OK with a 0xFE header (`DEPRECATE_EOF`), or an EOF.
            (Reply::Rows, 0xfe) => {
                let ok = if deprecate_eof {
                    parse_ok(body)?
                } else {
                    parse_eof(body)?
                };
                Ok(self.complete(End::Ok(ok)))
            }
            (Reply::ColumnsEof, 0xfe) => {
                parse_eof(body)?;
                self.reply = Reply::Rows;
                Ok(Progress::NeedMore)
            }
            (Reply::PrepParamsEof, 0xfe) => {
                parse_eof(body)?;
                Ok(self.params_done())
            }
            (Reply::PrepColumnsEof, 0xfe) => {
                parse_eof(body)?;
                Ok(self.prepared())
            }
            _ => Err(MysqlError::Unexpected(first)),
        }
    }

    /// The first packet of a reply to a query, an execute or a simple command.
    fn first_of_result(&mut self, body: &[u8]) -> Result<Progress, MysqlError> {
        let &first = body.first().ok_or(MysqlError::BadPacket)?;
        match first {
            0x00 => {
                let ok = parse_ok(body)?;
                Ok(self.complete(End::Ok(ok)))
            }
            0xff => {
                let e = self.server_error(body)?;
                Ok(self.complete(End::Err(e)))
            }
            // 0xFB: LOCAL INFILE request (we did not offer the capability); 0xFE: an EOF no
            // command of ours is answered with.
            0xfb | 0xfe => Err(MysqlError::Unexpected(first)),
            _ => {
                // A result set: its column count.
                let (n, used) = lenenc_int(body).ok_or(MysqlError::Malformed(first))?;
                if used != body.len() || n == 0 || n > MAX_COLUMNS {
                    return Err(MysqlError::Malformed(first));
                }
                let n = n as u16;
                self.unit.columns = n;
                self.reply = Reply::Columns { left: n };
                Ok(Progress::NeedMore)
            }
        }
    }

    /// The first packet of a prepare's reply: `0x00`, statement id (4), columns (2),
    /// parameters (2), filler (1), warnings (2); or an ERR.
    fn first_of_prepare(&mut self, body: &[u8]) -> Result<Progress, MysqlError> {
        let &first = body.first().ok_or(MysqlError::BadPacket)?;
        match first {
            0x00 => {
                let b = body.get(..9).ok_or(MysqlError::Malformed(first))?;
                let statement_id = u32::from_le_bytes([b[1], b[2], b[3], b[4]]);
                let columns = u16::from_le_bytes([b[5], b[6]]);
                let params = u16::from_le_bytes([b[7], b[8]]);
                self.unit.statement_id = statement_id;
                self.unit.columns = columns;
                self.unit.params = params;
                if params > 0 {
                    self.reply = Reply::PrepParams { left: params };
                    Ok(Progress::NeedMore)
                } else {
                    Ok(self.params_done())
                }
            }
            0xff => {
                let e = self.server_error(body)?;
                Ok(self.complete(End::Err(e)))
            }
            _ => Err(MysqlError::Unexpected(first)),
        }
    }

    /// The last definition of a run was counted.
    fn definitions_done(&mut self) -> Progress {
        let eof = !self.deprecate_eof();
        match self.reply {
            Reply::Columns { .. } => {
                self.reply = if eof { Reply::ColumnsEof } else { Reply::Rows };
                Progress::NeedMore
            }
            Reply::PrepParams { .. } if eof => {
                self.reply = Reply::PrepParamsEof;
                Progress::NeedMore
            }
            Reply::PrepParams { .. } => self.params_done(),
            Reply::PrepColumns { .. } if eof => {
                self.reply = Reply::PrepColumnsEof;
                Progress::NeedMore
            }
            _ => self.prepared(),
        }
    }

    /// A prepare's parameters are done: its columns next, if any.
    fn params_done(&mut self) -> Progress {
        if self.unit.columns > 0 {
            self.reply = Reply::PrepColumns {
                left: self.unit.columns,
            };
            Progress::NeedMore
        } else {
            self.prepared()
        }
    }

    fn prepared(&mut self) -> Progress {
        let u = std::mem::take(&mut self.unit);
        self.reply = Reply::Start;
        self.pending.pop_front();
        Progress::Prepared {
            statement_id: u.statement_id,
            params: u.params,
            columns: u.columns,
        }
    }

    /// A result ended (OK, EOF or ERR): the command is done unless more results follow.
    fn complete(&mut self, end: End) -> Progress {
        let u = std::mem::take(&mut self.unit);
        let mut r = QueryResult {
            rows: u.rows,
            columns: u.columns,
            bytes: u.bytes,
            ..QueryResult::default()
        };
        match end {
            End::Ok(ok) => {
                r.affected = ok.affected;
                r.last_insert_id = ok.last_insert_id;
                r.status = ok.status;
                r.warnings = ok.warnings;
                r.more = ok.status & status::MORE_RESULTS_EXISTS != 0;
            }
            End::Err(e) => r.error = Some(e),
        }
        self.reply = Reply::Start;
        if r.more {
            // The next result's first packet continues the reply's sequence ids.
            if let Some(front) = self.pending.front_mut() {
                front.seq = self.next_seq;
                front.expect = Expect::Result;
            }
        } else {
            self.pending.pop_front();
        }
        Progress::Complete(r)
    }

    /// Parses an ERR: code and SQLSTATE out, message text into `err_msg`.
    fn server_error(&mut self, body: &[u8]) -> Result<SqlError, MysqlError> {
        let (e, message) = parse_err(body)?;
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

/// How a result ended.
enum End {
    Ok(OkPacket),
    Err(SqlError),
}

/// The facts of an OK (or EOF) packet.
#[derive(Debug, Clone, Copy, Default)]
struct OkPacket {
    affected: u64,
    last_insert_id: u64,
    status: u16,
    warnings: u16,
}

/// An OK packet (header 0x00, or 0xFE ending rows under `DEPRECATE_EOF`): affected rows and
/// last insert id (length-encoded), status flags (2), warnings (2), then text we ignore.
fn parse_ok(body: &[u8]) -> Result<OkPacket, MysqlError> {
    let bad = MysqlError::Malformed(body.first().copied().unwrap_or(0));
    let rest = body.get(1..).unwrap_or_default();
    let (affected, a) = lenenc_int(rest).ok_or(bad)?;
    let rest = rest.get(a..).unwrap_or_default();
    let (last_insert_id, b) = lenenc_int(rest).ok_or(bad)?;
    let rest = rest.get(b..).unwrap_or_default();
    let tail = rest.get(..4).ok_or(bad)?;
    Ok(OkPacket {
        affected,
        last_insert_id,
        status: u16::from_le_bytes([tail[0], tail[1]]),
        warnings: u16::from_le_bytes([tail[2], tail[3]]),
    })
}

/// An EOF packet: 0xFE, warnings (2), status flags (2); shorter than 9 bytes (a longer 0xFE
/// packet would be a row or an OK).
fn parse_eof(body: &[u8]) -> Result<OkPacket, MysqlError> {
    match body {
        [0xfe, w0, w1, s0, s1] => Ok(OkPacket {
            status: u16::from_le_bytes([*s0, *s1]),
            warnings: u16::from_le_bytes([*w0, *w1]),
            ..OkPacket::default()
        }),
        _ => Err(MysqlError::Malformed(0xfe)),
    }
}

/// An ERR during the login: a refusal, or another server error.
fn login_error(e: SqlError) -> MysqlError {
    if is_login_refusal(&e) {
        MysqlError::AuthFailed(e.code)
    } else {
        MysqlError::ServerError(e.code)
    }
}
