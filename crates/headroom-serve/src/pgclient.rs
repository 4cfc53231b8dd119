//! A blocking PostgreSQL client for the `/db` endpoints: exactly what they need (log in, simple
//! queries, named prepared statements with text parameters and text results, `COPY FROM STDIN`)
//! over headroom-proto's sans-I/O codec, the one the load generator speaks and the fuzzer
//! checks. Login (trust, cleartext, MD5, SCRAM-SHA-256) is proto's [`Connection`]; after it,
//! messages are read with its [`MessageDecoder`] and written with its `frontend` encoders.
//!
//! It replaced the `postgres` crate (and tokio-postgres, postgres-protocol, postgres-types,
//! stringprep and their own rand and getrandom), whose async state machines, compiled at full
//! optimization for the server under test, were 30 CPU-seconds of every cold build (issue 27).
//!
//! Memory is bounded by the decoder's message limit (1 MiB) and by
//! the rows a statement returns (the `/db` statements return at most one).
//!
//! No TLS: a URL that requires it (`sslmode=require`, `verify-ca`, `verify-full`) is refused;
//! `disable`, `allow` and `prefer` connect in the clear, as the `postgres` crate did without a
//! TLS connector.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use headroom_proto::pg::{
    frontend, Connection, Login, MessageDecoder, PgError, Progress, SqlState,
};

/// Type OIDs the `/db` statements use.
pub const INT8: u32 = 20;
pub const TEXT: u32 = 25;

/// A type OID as PostgreSQL names it (`int8`), for messages.
pub fn type_name(oid: u32) -> String {
    match oid {
        16 => "bool".into(),
        20 => "int8".into(),
        21 => "int2".into(),
        23 => "int4".into(),
        25 => "text".into(),
        700 => "float4".into(),
        701 => "float8".into(),
        1043 => "varchar".into(),
        1042 => "bpchar".into(),
        1700 => "numeric".into(),
        _ => format!("type {oid}"),
    }
}

/// Where to connect and as whom: a `postgres://` (or `postgresql://`) URL, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub user: String,
    pub password: String,
    /// A host name or address, or a directory holding the server's Unix socket (starts with `/`).
    pub host: String,
    pub port: u16,
    /// Empty: the server takes the user name.
    pub dbname: String,
    pub application_name: Option<String>,
    /// The `options` startup parameter (`-c synchronous_commit=on -c search_path=x`).
    pub options: Option<String>,
    pub connect_timeout: Option<Duration>,
}

fn pct_decode(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("bad percent escape at byte {i}"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "percent escapes that are not UTF-8".to_string())
}

impl Config {
    /// Parses `postgres://[USER[:PASSWORD]@][HOST][:PORT][/DATABASE][?PARAM=VALUE&...]`. Known
    /// parameters: `host` (a socket directory), `port`, `user`, `password`, `dbname`,
    /// `application_name`, `options`, `connect_timeout` (seconds), `sslmode` (`disable`,
    /// `allow`, `prefer`). The error never holds the password.
    pub fn parse(url: &str) -> Result<Config, String> {
        let rest = url
            .strip_prefix("postgres://")
            .or_else(|| url.strip_prefix("postgresql://"))
            .ok_or("it does not start with postgres:// or postgresql://")?;
        let (main, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (authority, path) = main.split_once('/').unwrap_or((main, ""));
        let (userinfo, hostport) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        let mut cfg = Config {
            user: String::new(),
            password: String::new(),
            host: "localhost".into(),
            port: 5432,
            dbname: pct_decode(path)?,
            application_name: None,
            options: None,
            connect_timeout: None,
        };
        if let Some(u) = userinfo {
            let (user, pass) = u.split_once(':').unwrap_or((u, ""));
            cfg.user = pct_decode(user)?;
            cfg.password = pct_decode(pass).map_err(|_| "bad percent escape in the password")?;
        }
        let (host, port) = if let Some(h) = hostport.strip_prefix('[') {
            let (h, after) = h.split_once(']').ok_or("an IPv6 host without its ']'")?;
            (h, after.strip_prefix(':'))
        } else {
            match hostport.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (hostport, None),
            }
        };
        if !host.is_empty() {
            cfg.host = pct_decode(host)?;
        }
        if let Some(p) = port {
            cfg.port = p.parse().map_err(|_| format!("invalid port {p:?}"))?;
        }
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let v = pct_decode(&v.replace('+', " "))?;
            match k {
                "host" => cfg.host = v,
                "port" => cfg.port = v.parse().map_err(|_| format!("invalid port {v:?}"))?,
                "user" => cfg.user = v,
                "password" => cfg.password = v,
                "dbname" => cfg.dbname = v,
                "application_name" => cfg.application_name = Some(v),
                "options" => cfg.options = Some(v),
                "connect_timeout" => {
                    let s: u64 = v
                        .parse()
                        .map_err(|_| format!("invalid connect_timeout {v:?} (seconds)"))?;
                    cfg.connect_timeout = (s > 0).then(|| Duration::from_secs(s));
                }
                "sslmode" => match v.as_str() {
                    "disable" | "allow" | "prefer" => {}
                    _ => {
                        return Err(format!(
                            "sslmode={v}: headroom serve's PostgreSQL client has no TLS \
                             (use sslmode=disable or prefer)"
                        ))
                    }
                },
                _ => return Err(format!("unknown parameter {k:?}")),
            }
        }
        if cfg.user.is_empty() {
            return Err("no user (postgres://USER:PASSWORD@HOST:PORT/DATABASE)".into());
        }
        Ok(cfg)
    }

    /// `host:port`, or the socket's path.
    pub fn addr(&self) -> String {
        if self.host.starts_with('/') {
            format!("{}/.s.PGSQL.{}", self.host, self.port)
        } else if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// Why a call failed.
#[derive(Debug)]
pub enum Error {
    /// Connecting, reading or writing (`UnexpectedEof` when the server closed the connection).
    Io(io::Error),
    /// An ErrorResponse.
    Db {
        code: SqlState,
        message: String,
        /// `FATAL` or `PANIC`: the server ends the connection.
        fatal: bool,
    },
    /// Bytes that are not the protocol, or a login we cannot complete.
    Protocol(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Io(e) => write!(f, "{e}"),
            Error::Db { code, message, .. } => write!(f, "{message} (SQLSTATE {code})"),
            Error::Protocol(m) => f.write_str(m),
        }
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::Io(e)
    }
}

enum Sock {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Sock {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Sock::Tcp(s) => s.read(buf),
            Sock::Unix(s) => s.read(buf),
        }
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Sock::Tcp(s) => s.write_all(buf),
            Sock::Unix(s) => s.write_all(buf),
        }
    }
}

/// One value of a row, in text format (`None`: SQL NULL).
pub type Value = Option<Vec<u8>>;

/// What a prepare learned: the parameter types and the result columns (name, type OID).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    pub name: String,
    pub params: Vec<u32>,
    pub columns: Vec<(String, u32)>,
}

/// What one unit (up to ReadyForQuery) returned.
#[derive(Debug, Default)]
struct Unit {
    rows: Vec<Vec<Value>>,
    params: Vec<u32>,
    columns: Vec<(String, u32)>,
    error: Option<Error>,
}

/// One connection.
pub struct Client {
    sock: Sock,
    dec: MessageDecoder,
    /// Bytes read and not yet decoded: `rbuf[rpos..]`.
    rbuf: Vec<u8>,
    rpos: usize,
    out: Vec<u8>,
    closed: bool,
}

const READ_CHUNK: usize = 16 * 1024;

fn be_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn be_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// An ErrorResponse, through the codec's parser; one it cannot parse is an internal error
/// (`XX000`) that leaves the connection open.
fn parse_error(body: &[u8]) -> Error {
    match headroom_proto::pg::parse_error_response(body) {
        Ok((e, message)) => Error::Db {
            code: e.code,
            message: String::from_utf8_lossy(message).into_owned(),
            fatal: e.severity.ends_connection(),
        },
        Err(e) => Error::Db {
            code: SqlState(*b"XX000"),
            message: e.to_string(),
            fatal: false,
        },
    }
}

fn malformed(tag: u8) -> Error {
    Error::Protocol(format!(
        "malformed {:?} message from the server",
        char::from(tag)
    ))
}

fn cstr_at(b: &[u8], at: usize) -> Option<(&[u8], usize)> {
    let rest = b.get(at..)?;
    let end = rest.iter().position(|&c| c == 0)?;
    Some((&rest[..end], at + end + 1))
}

fn parse_row_description(body: &[u8]) -> Option<Vec<(String, u32)>> {
    let n = be_u16(body, 0)?;
    let mut at = 2;
    let mut cols = Vec::with_capacity(usize::from(n));
    for _ in 0..n {
        let (name, next) = cstr_at(body, at)?;
        // table oid (4), column (2), type oid (4), size (2), modifier (4), format (2)
        let oid = be_u32(body, next + 6)?;
        cols.push((String::from_utf8_lossy(name).into_owned(), oid));
        at = next + 18;
    }
    Some(cols)
}

fn parse_data_row(body: &[u8]) -> Option<Vec<Value>> {
    let n = be_u16(body, 0)?;
    let mut at = 2;
    let mut row = Vec::with_capacity(usize::from(n));
    for _ in 0..n {
        let len = be_u32(body, at)? as i32;
        at += 4;
        if len < 0 {
            row.push(None);
        } else {
            let v = body.get(at..at + len as usize)?;
            row.push(Some(v.to_vec()));
            at += len as usize;
        }
    }
    Some(row)
}

impl Client {
    /// Connects and logs in.
    pub fn connect(cfg: &Config) -> Result<Client, Error> {
        let sock = if cfg.host.starts_with('/') {
            Sock::Unix(UnixStream::connect(cfg.addr())?)
        } else {
            let mut last = None;
            let mut sock = None;
            for a in (cfg.host.as_str(), cfg.port).to_socket_addrs()? {
                let r = match cfg.connect_timeout {
                    Some(t) => TcpStream::connect_timeout(&a, t),
                    None => TcpStream::connect(a),
                };
                match r {
                    Ok(s) => {
                        sock = Some(s);
                        break;
                    }
                    Err(e) => last = Some(e),
                }
            }
            let s = match sock {
                Some(s) => s,
                None => {
                    return Err(Error::Io(last.unwrap_or_else(|| {
                        io::Error::new(io::ErrorKind::NotFound, "no address")
                    })))
                }
            };
            let _ = s.set_nodelay(true);
            Sock::Tcp(s)
        };
        let mut c = Client {
            sock,
            dec: MessageDecoder::new(),
            rbuf: Vec::with_capacity(READ_CHUNK),
            rpos: 0,
            out: Vec::new(),
            closed: false,
        };
        c.login(cfg)?;
        Ok(c)
    }

    fn login(&mut self, cfg: &Config) -> Result<(), Error> {
        let mut nonce = [0u8; headroom_proto::pg::scram::NONCE_BYTES];
        std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut nonce))?;
        let login = Login {
            user: &cfg.user,
            password: &cfg.password,
            database: &cfg.dbname,
            application_name: cfg.application_name.as_deref(),
        };
        // Connection::new writes a StartupMessage without run-time parameters: write it again
        // with the URL's `options`, and UTF-8 text.
        let mut conn = Connection::new(&login, &nonce, &mut self.out);
        self.out.clear();
        let mut params = vec![("client_encoding", "UTF8")];
        if let Some(opts) = &cfg.options {
            params.push(("options", opts.as_str()));
        }
        frontend::startup(
            &mut self.out,
            login.user,
            login.database,
            login.application_name,
            &params,
        );
        self.flush()?;
        let mut buf = vec![0u8; READ_CHUNK];
        loop {
            let n = self.sock.read(&mut buf)?;
            if n == 0 {
                return Err(Error::Io(io::ErrorKind::UnexpectedEof.into()));
            }
            let mut chunk = &buf[..n];
            while !chunk.is_empty() {
                match conn.decode(chunk, &mut self.out) {
                    Ok((used, progress)) => {
                        chunk = &chunk[used..];
                        match progress {
                            Progress::NeedMore => {}
                            Progress::AuthReply(_) => self.flush()?,
                            Progress::LoggedIn(_) => {
                                self.rbuf.extend_from_slice(chunk);
                                return Ok(());
                            }
                            Progress::Complete(_) => {}
                        }
                    }
                    Err(PgError::AuthFailed(e) | PgError::Server(e)) => {
                        return Err(Error::Db {
                            code: e.code,
                            message: conn.last_error_message().to_string(),
                            fatal: true,
                        })
                    }
                    Err(e) => return Err(Error::Protocol(e.to_string())),
                }
            }
        }
    }

    fn flush(&mut self) -> Result<(), Error> {
        if self.out.is_empty() {
            return Ok(());
        }
        let r = self.sock.write_all(&self.out);
        self.out.clear();
        r.map_err(|e| self.fail(e))
    }

    fn fail(&mut self, e: io::Error) -> Error {
        self.closed = true;
        Error::Io(e)
    }

    /// The next message as (tag, body).
    fn next(&mut self) -> Result<(u8, Vec<u8>), Error> {
        loop {
            if self.rpos < self.rbuf.len() {
                match self.dec.decode(&self.rbuf[self.rpos..]) {
                    Ok((used, msg)) => {
                        self.rpos += used;
                        if let Some(m) = msg {
                            return Ok((m.tag, m.body.to_vec()));
                        }
                    }
                    Err(e) => {
                        self.closed = true;
                        return Err(Error::Protocol(e.to_string()));
                    }
                }
                continue;
            }
            self.rbuf.clear();
            self.rpos = 0;
            self.rbuf.resize(READ_CHUNK, 0);
            let n = match self.sock.read(&mut self.rbuf) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => 0,
                Err(e) => {
                    self.rbuf.clear();
                    return Err(self.fail(e));
                }
            };
            self.rbuf.truncate(n);
            if n == 0 {
                return Err(self.fail(io::ErrorKind::UnexpectedEof.into()));
            }
        }
    }

    /// Reads the rest of a unit, up to ReadyForQuery. `copy`: data to send when the server
    /// asks for it (CopyInResponse).
    fn unit(&mut self, mut copy: Option<&[u8]>) -> Result<Unit, Error> {
        let mut u = Unit::default();
        loop {
            let (tag, body) = self.next()?;
            match tag {
                b'Z' => return Ok(u),
                b'E' => {
                    let e = parse_error(&body);
                    if let Error::Db { fatal: true, .. } = e {
                        self.closed = true;
                        return Err(e);
                    }
                    u.error.get_or_insert(e);
                }
                b'D' => u
                    .rows
                    .push(parse_data_row(&body).ok_or_else(|| malformed(tag))?),
                b'T' => u.columns = parse_row_description(&body).ok_or_else(|| malformed(tag))?,
                b't' => {
                    let n = be_u16(&body, 0).ok_or_else(|| malformed(tag))?;
                    u.params = (0..usize::from(n))
                        .map(|i| be_u32(&body, 2 + 4 * i))
                        .collect::<Option<_>>()
                        .ok_or_else(|| malformed(tag))?;
                }
                b'G' => {
                    let data = copy.take().unwrap_or_default();
                    for part in data.chunks(64 * 1024) {
                        let len = u32::try_from(part.len() + 4).unwrap_or(u32::MAX);
                        self.out.push(b'd');
                        self.out.extend_from_slice(&len.to_be_bytes());
                        self.out.extend_from_slice(part);
                        self.flush()?;
                    }
                    self.out.extend_from_slice(&[b'c', 0, 0, 0, 4]);
                    self.flush()?;
                }
                // ParseComplete, BindComplete, CloseComplete, CommandComplete, NoData,
                // EmptyQueryResponse, PortalSuspended, ParameterStatus, notices, notifications.
                _ => {}
            }
        }
    }

    fn finish(&mut self, copy: Option<&[u8]>) -> Result<Unit, Error> {
        if self.closed {
            return Err(Error::Io(io::ErrorKind::NotConnected.into()));
        }
        self.flush()?;
        let mut u = self.unit(copy)?;
        match u.error.take() {
            Some(e) => Err(e),
            None => Ok(u),
        }
    }

    /// A simple query (one or several statements); the rows of the last one that returned any.
    pub fn simple(&mut self, sql: &str) -> Result<Vec<Vec<Value>>, Error> {
        frontend::query(&mut self.out, sql);
        Ok(self.finish(None)?.rows)
    }

    /// `COPY ... FROM STDIN` with `data` (in the COPY's format).
    pub fn copy_in(&mut self, sql: &str, data: &[u8]) -> Result<(), Error> {
        frontend::query(&mut self.out, sql);
        self.finish(Some(data)).map(drop)
    }

    /// Prepares `sql` as the named statement `name` and describes it.
    pub fn prepare(&mut self, name: &str, sql: &str) -> Result<Statement, Error> {
        frontend::parse(&mut self.out, name, sql, &[]);
        frontend::describe(&mut self.out, frontend::Target::Statement, name);
        frontend::sync(&mut self.out);
        let u = self.finish(None)?;
        Ok(Statement {
            name: name.to_string(),
            params: u.params,
            columns: u.columns,
        })
    }

    /// Executes a prepared statement with text parameters; its rows, in text.
    pub fn query(&mut self, st: &Statement, params: &[&[u8]]) -> Result<Vec<Vec<Value>>, Error> {
        frontend::execute_prepared(&mut self.out, &st.name, params.iter().map(Some));
        Ok(self.finish(None)?.rows)
    }

    /// The connection failed (an I/O error, the server closed it, or a fatal error).
    pub fn is_closed(&self) -> bool {
        self.closed
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if !self.closed {
            self.out.clear();
            frontend::terminate(&mut self.out);
            let _ = self.sock.write_all(&self.out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse() {
        let c = Config::parse(
            "postgres://u%40x:p%3Aw@db.example:6543/my%20db?options=-c%20search_path%3Ds&connect_timeout=3&application_name=a",
        )
        .unwrap();
        assert_eq!(
            (
                c.user.as_str(),
                c.password.as_str(),
                c.host.as_str(),
                c.port
            ),
            ("u@x", "p:w", "db.example", 6543)
        );
        assert_eq!(c.dbname, "my db");
        assert_eq!(c.options.as_deref(), Some("-c search_path=s"));
        assert_eq!(c.connect_timeout, Some(Duration::from_secs(3)));
        assert_eq!(c.application_name.as_deref(), Some("a"));
        let c = Config::parse("postgresql://u@[::1]/d").unwrap();
        assert_eq!(
            (c.host.as_str(), c.port, c.addr()),
            ("::1", 5432, "[::1]:5432".into())
        );
        let c = Config::parse("postgres://u@/d?host=/run/postgresql&port=5433").unwrap();
        assert_eq!(c.addr(), "/run/postgresql/.s.PGSQL.5433");
        for bad in [
            "postgres://u:pw@h:notaport/db",
            "mysql://u@h/db",
            "postgres://h/db",
            "postgres://u@h/db?sslmode=require",
            "postgres://u@h/db?bogus=1",
            "postgres://u:%zz@h/db",
        ] {
            let e = Config::parse(bad).unwrap_err();
            assert!(!e.contains("pw"), "{bad}: {e}");
        }
    }

    #[test]
    fn hostile_messages_are_errors_not_panics() {
        assert!(parse_row_description(&[0, 2, b'a', 0]).is_none());
        assert!(parse_data_row(&[0, 1, 0, 0, 0, 9, 1]).is_none());
        assert_eq!(
            parse_data_row(&[0, 1, 255, 255, 255, 255]),
            Some(vec![None])
        );
        match parse_error(b"SERROR\0VFATAL\0C28P01\0Mno\0\0") {
            Error::Db {
                code,
                message,
                fatal,
            } => assert_eq!(
                (code.as_str(), message.as_str(), fatal),
                ("28P01", "no", true)
            ),
            e => panic!("{e:?}"),
        }
        // Truncated: no panic, a code that says internal error.
        assert!(matches!(parse_error(b"C28"), Error::Db { .. }));
    }
}
