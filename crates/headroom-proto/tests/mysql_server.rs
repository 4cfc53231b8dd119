//! The MySQL client codec (`headroom_proto::mysql`) against a real server: the private MariaDB
//! of `scripts/mariadb.sh`, whose URL is in `HEADROOM_MYSQL_URL`
//! (`export HEADROOM_MYSQL_URL=$(scripts/mariadb.sh start)`; `scripts/test` does it). The script
//! also creates the users `headroom_tls` (REQUIRE SSL), `headroom_ed` (ed25519) and `test`
//! (Tsung's example database `test` with tables `gens` and `te`).
//!
//! The client here is test code: a blocking `TcpStream` on 127.0.0.1 driving the sans-I/O
//! `Connection` exactly as the engine's event loop will (read whatever arrived, feed it, send
//! what it wrote to `out`). Every read has a timeout and every loop a bound. TLS is not driven
//! here (headroom-proto has no TLS dev-dependency): the test stops at the SSLRequest and checks
//! that no plain byte is taken after it; the engine's tests log in over TLS.
//!
//! Run alone: `HEADROOM_MYSQL_URL=$(scripts/mariadb.sh start) cargo test --release -p
//! headroom-proto --test mysql_server`.

use headroom_proto::mysql::{
    caps, AuthPlugin, Connection, Keep, Login, LoginInfo, MysqlError, Options, PacketDecoder,
    Progress, QueryResult,
};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

// ---- allocation counting (per thread, so parallel tests do not disturb each other) ----

use headroom_testkit::thread_allocs as allocs;

#[global_allocator]
static GLOBAL: headroom_testkit::CountingAlloc = headroom_testkit::CountingAlloc;

// ---- the server ----

/// (host:port, user, password, database) of `HEADROOM_MYSQL_URL`.
struct Server {
    addr: String,
    user: String,
    password: String,
    database: String,
}

fn server() -> Server {
    let url = match std::env::var("HEADROOM_MYSQL_URL") {
        Ok(u) if !u.is_empty() => u,
        _ => panic!(
            "HEADROOM_MYSQL_URL is not set: these tests need a real MariaDB (or MySQL). Run \
             `export HEADROOM_MYSQL_URL=$(scripts/mariadb.sh start)` (it installs Debian's \
             mariadb-server if missing, starts a private server on 127.0.0.1:25306 with TLS and \
             creates the test users and tables), then run the tests again; scripts/test does both"
        ),
    };
    let rest = url
        .strip_prefix("mysql://")
        .expect("HEADROOM_MYSQL_URL starts with mysql://");
    let (userinfo, hostpart) = rest.split_once('@').expect("URL has user@host");
    let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
    let (addr, database) = hostpart.split_once('/').unwrap_or((hostpart, ""));
    let database = database.split('?').next().unwrap_or_default();
    assert!(
        addr.starts_with("127.0.0.1:"),
        "the tests only talk to 127.0.0.1, not {addr}"
    );
    Server {
        addr: addr.to_owned(),
        user: user.to_owned(),
        password: password.to_owned(),
        database: database.to_owned(),
    }
}

/// Bound on any one wait for the server.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

// ---- the blocking test client ----

struct Client {
    sock: TcpStream,
    conn: Connection,
    out: Vec<u8>,
    /// Received and not yet consumed by `conn`.
    pending: Vec<u8>,
    /// Every byte the server sent, in order (for replays).
    recorded: Vec<u8>,
    /// The server bytes of the last completed event (for reading values).
    event_start: usize,
    last_event: std::ops::Range<usize>,
    /// Every event, in order.
    events: Vec<Progress>,
    /// Every byte we sent, in order.
    sent: Vec<u8>,
}

type LoginFailure = (MysqlError, Vec<Progress>, String);

impl Client {
    fn connect(srv: &Server, login: &Login<'_>, opts: Options) -> Client {
        let sock = TcpStream::connect(&srv.addr).expect("connect to the MariaDB server");
        sock.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        sock.set_nodelay(true).unwrap();
        Client {
            sock,
            conn: Connection::new(login, opts),
            out: Vec::new(),
            pending: Vec::new(),
            recorded: Vec::new(),
            event_start: 0,
            last_event: 0..0,
            events: Vec::new(),
            sent: Vec::new(),
        }
    }

    /// Connects and logs in; `Err` if the login fails (with the events so far and the server's
    /// message).
    fn login_with(
        srv: &Server,
        login: &Login<'_>,
        opts: Options,
    ) -> Result<(Client, LoginInfo), LoginFailure> {
        let mut c = Client::connect(srv, login, opts);
        for _ in 0..10 {
            match c.next() {
                Ok(Progress::LoggedIn(info)) => return Ok((c, info)),
                Ok(Progress::AuthReply(_)) => c.flush(),
                Ok(other) => panic!("unexpected {other:?} during login"),
                Err(e) => {
                    let msg = c.conn.last_error_message().to_owned();
                    return Err((e, c.events, msg));
                }
            }
        }
        panic!("no login after 10 exchanges");
    }

    fn login(srv: &Server, user: &str, password: &str, database: Option<&str>) -> Client {
        let login = Login {
            user,
            password,
            database,
        };
        match Client::login_with(srv, &login, Options::default()) {
            Ok((c, _)) => c,
            Err((e, _, msg)) => panic!("login of {user} failed: {e} ({msg})"),
        }
    }

    fn flush(&mut self) {
        if !self.out.is_empty() {
            self.sock.write_all(&self.out).expect("send");
            self.sent.extend_from_slice(&self.out);
            self.out.clear();
        }
    }

    /// Reads once (bounded by the timeout); false when the server closed the connection.
    fn read_some(&mut self) -> bool {
        let mut buf = [0u8; 64 * 1024];
        let n = match self.sock.read(&mut buf) {
            Ok(n) => n,
            Err(e) => panic!("reading from the server: {e}"),
        };
        self.recorded.extend_from_slice(&buf[..n]);
        self.pending.extend_from_slice(&buf[..n]);
        n > 0
    }

    /// The next event, reading as needed (bounded by the read timeout).
    fn next(&mut self) -> Result<Progress, MysqlError> {
        for _ in 0..100_000 {
            if !self.pending.is_empty() {
                let (used, p) = self.conn.decode(&self.pending, &mut self.out)?;
                self.pending.drain(..used);
                if p != Progress::NeedMore {
                    self.events.push(p);
                    let end = self.recorded.len() - self.pending.len();
                    self.last_event = self.event_start..end;
                    self.event_start = end;
                    return Ok(p);
                }
            }
            if !self.read_some() {
                self.conn.eof()?;
                panic!("the server closed the connection between commands");
            }
        }
        panic!("no event after 100,000 reads");
    }

    fn complete(&mut self) -> QueryResult {
        match self.next() {
            Ok(Progress::Complete(r)) => r,
            other => panic!("expected a completion, got {other:?}"),
        }
    }

    fn query(&mut self, sql: &str) -> QueryResult {
        self.conn.com_query(&mut self.out, sql);
        self.flush();
        self.complete()
    }

    fn prepare(&mut self, sql: &str) -> (u32, u16, u16) {
        self.conn.com_stmt_prepare(&mut self.out, sql);
        self.flush();
        match self.next() {
            Ok(Progress::Prepared {
                statement_id,
                params,
                columns,
            }) => (statement_id, params, columns),
            other => panic!(
                "expected Prepared, got {other:?} ({})",
                self.conn.last_error_message()
            ),
        }
    }

    fn execute(&mut self, id: u32, params: &[Option<&str>]) -> QueryResult {
        self.conn
            .com_stmt_execute(&mut self.out, id, params.iter().copied());
        self.flush();
        self.complete()
    }

    /// The text values of the last event's result set, read again from the recorded bytes
    /// with a plain packet decoder (the connection only counts rows).
    fn values(&self) -> Vec<Vec<Option<String>>> {
        text_rows(&self.recorded[self.last_event.clone()], self.conn.caps())
    }

    /// `SHOW scope STATUS` values of `names`, in their order.
    fn statuses(&mut self, scope: &str, names: &[&str]) -> Vec<u64> {
        let list: Vec<String> = names.iter().map(|n| format!("'{n}'")).collect();
        let sql = format!(
            "SHOW {scope} STATUS WHERE Variable_name IN ({})",
            list.join(", ")
        );
        let r = self.query(&sql);
        assert_eq!(r.rows, names.len() as u64, "{sql}");
        let rows = self.values();
        names
            .iter()
            .map(|n| {
                let row = rows.iter().find(|r| r[0].as_deref() == Some(n)).unwrap();
                row[1].as_deref().unwrap().parse().unwrap()
            })
            .collect()
    }

    fn quit(mut self) {
        self.conn.com_quit(&mut self.out);
        self.flush();
        // The server closes without a reply.
        let t = Instant::now();
        while self.read_some() {
            assert!(t.elapsed() < READ_TIMEOUT, "the server did not close");
        }
        assert!(
            self.pending.is_empty(),
            "bytes after COM_QUIT: {:?}",
            self.pending
        );
        assert_eq!(self.conn.eof(), Ok(()));
    }
}

/// The text rows of one result set in `stream` (column count, definitions, optional EOF, rows,
/// EOF/OK), as strings (`None`: NULL).
fn text_rows(stream: &[u8], caps_sent: u32) -> Vec<Vec<Option<String>>> {
    let mut dec = PacketDecoder::new();
    dec.set_keep(Keep::All);
    let mut packets = Vec::new();
    let mut rest = stream;
    while !rest.is_empty() {
        let (used, p) = dec.decode(rest).expect("recorded stream decodes");
        rest = &rest[used..];
        if let Some(p) = p {
            packets.push(p.body.to_vec());
        }
    }
    let columns = usize::from(packets[0][0]);
    let mut i = 1 + columns;
    if caps_sent & caps::DEPRECATE_EOF == 0 {
        i += 1;
    }
    let mut rows = Vec::new();
    while !(packets[i][0] == 0xfe && packets[i].len() < 0xff_ffff) {
        let p = &packets[i];
        let mut at = 0;
        let mut row = Vec::new();
        for _ in 0..columns {
            if p[at] == 0xfb {
                row.push(None);
                at += 1;
                continue;
            }
            let (len, n) = headroom_proto::mysql::lenenc_int(&p[at..]).unwrap();
            at += n;
            row.push(Some(
                String::from_utf8_lossy(&p[at..at + len as usize]).into_owned(),
            ));
            at += len as usize;
        }
        rows.push(row);
        i += 1;
    }
    rows
}

fn main_login(srv: &Server) -> Client {
    Client::login(srv, &srv.user, &srv.password, Some(&srv.database))
}

// ---- the login ----

#[test]
fn native_password_login() {
    let srv = server();
    let login = Login {
        user: &srv.user,
        password: &srv.password,
        database: Some(&srv.database),
    };
    let (mut c, info) = Client::login_with(&srv, &login, Options::default())
        .unwrap_or_else(|(e, _, m)| panic!("login failed: {e} ({m})"));
    assert_eq!(
        c.events[..1],
        [Progress::AuthReply(AuthPlugin::NativePassword)]
    );
    assert_eq!(info.plugin, AuthPlugin::NativePassword);
    assert!(!info.tls);
    assert!(info.version.as_str().contains("MariaDB"), "{info:?}");
    assert_ne!(info.connection_id, 0);
    // MariaDB 10.2+ offers DEPRECATE_EOF, and we took it.
    assert_ne!(info.server_caps & caps::DEPRECATE_EOF, 0);
    assert_ne!(info.caps & caps::DEPRECATE_EOF, 0);
    assert_eq!(info.caps & caps::MULTI_STATEMENTS, 0);
    assert_eq!(info.bytes, c.recorded.len() as u64);
    // The HandshakeResponse41: sequence id 1, our user, a 20-byte scramble, the database and
    // the plugin name.
    assert_eq!(c.sent[3], 1);
    let sent = &c.sent[4..];
    assert_eq!(
        &sent[32..32 + srv.user.len() + 1],
        format!("{}\0", srv.user).as_bytes()
    );
    assert_eq!(sent[32 + srv.user.len() + 1], 20);
    assert!(sent.ends_with(format!("{}\0mysql_native_password\0", srv.database).as_bytes()));

    let r = c.query("SELECT CONNECTION_ID(), CURRENT_USER(), DATABASE(), @@character_set_client");
    assert_eq!((r.rows, r.columns, r.error), (1, 4, None));
    let v = &c.values()[0];
    assert_eq!(
        v[0].as_deref(),
        Some(info.connection_id.to_string().as_str())
    );
    assert_eq!(v[1].as_deref(), Some(format!("{}@%", srv.user).as_str()));
    assert_eq!(v[2].as_deref(), Some(srv.database.as_str()));
    assert_eq!(v[3].as_deref(), Some("utf8mb4"));
    println!("login: {info:?}");
    c.quit();
}

#[test]
fn wrong_password_is_refused_with_1045() {
    let srv = server();
    let login = Login {
        user: &srv.user,
        password: "not-the-password",
        database: Some(&srv.database),
    };
    let Err((e, events, msg)) = Client::login_with(&srv, &login, Options::default()) else {
        panic!("a wrong password logged in");
    };
    assert_eq!(e, MysqlError::AuthFailed(1045));
    assert!(e.is_auth());
    assert_eq!(events, [Progress::AuthReply(AuthPlugin::NativePassword)]);
    assert!(msg.starts_with("Access denied for user"), "{msg}");
    // No database the user may see: 1044, also a refusal. No password at all: 1045.
    let login = Login {
        user: &srv.user,
        password: &srv.password,
        database: Some("mysql"),
    };
    let Err((e, _, msg)) = Client::login_with(&srv, &login, Options::default()) else {
        panic!("logged in to a database without grants");
    };
    assert_eq!(e, MysqlError::AuthFailed(1044), "{msg}");
    let login = Login {
        user: &srv.user,
        password: "",
        database: None,
    };
    let Err((e, _, _)) = Client::login_with(&srv, &login, Options::default()) else {
        panic!("logged in without a password");
    };
    assert_eq!(e, MysqlError::AuthFailed(1045));
}

#[test]
fn ed25519_user_is_an_unsupported_plugin() {
    let srv = server();
    let login = Login {
        user: "headroom_ed",
        password: "headroom",
        database: None,
    };
    let Err((e, events, _)) = Client::login_with(&srv, &login, Options::default()) else {
        panic!("the ed25519 user logged in");
    };
    // We answered as mysql_native_password; the server switched to client_ed25519.
    assert_eq!(e, MysqlError::UnsupportedAuth(AuthPlugin::Ed25519));
    assert_eq!(events, [Progress::AuthReply(AuthPlugin::NativePassword)]);
}

#[test]
fn tls_user_is_refused_without_tls() {
    // headroom_tls is REQUIRE SSL: what the engine's TLS test logs in as, to prove TLS.
    let srv = server();
    let login = Login {
        user: "headroom_tls",
        password: "headroom",
        database: Some(&srv.database),
    };
    let Err((e, _, _)) = Client::login_with(&srv, &login, Options::default()) else {
        panic!("a REQUIRE SSL user logged in without TLS");
    };
    assert_eq!(e, MysqlError::AuthFailed(1045));
}

#[test]
fn tls_option_sends_an_ssl_request_and_takes_no_plain_byte_after_it() {
    let srv = server();
    let login = Login {
        user: "headroom_tls",
        password: "headroom",
        database: Some(&srv.database),
    };
    let opts = Options {
        tls: true,
        ..Options::default()
    };
    let mut c = Client::connect(&srv, &login, opts);
    assert_eq!(c.next(), Ok(Progress::StartTls));
    // The SSLRequest: 32 bytes, sequence id 1, CLIENT_SSL among the capabilities.
    assert_eq!(&c.out[..4], &[32, 0, 0, 1]);
    let sent_caps = u32::from_le_bytes(c.out[4..8].try_into().unwrap());
    assert_ne!(sent_caps & caps::SSL, 0);
    assert_eq!(sent_caps, c.conn.caps());
    c.flush();
    // The server now waits for a TLS ClientHello; a plain byte fed to the connection (as an
    // attacker in the path could inject) is refused.
    assert_eq!(
        c.conn.decode(b"\x07\0\0\x02\0\0\0\x02\0\0\0", &mut c.out),
        Err(MysqlError::Unexpected(7))
    );
    assert!(!c.conn.tls_started(&mut c.out));
    assert!(c.out.is_empty());
}

// ---- queries ----

#[test]
fn select_counts_100_rows() {
    let srv = server();
    let mut c = main_login(&srv);
    let r = c.query("SELECT id, name FROM items ORDER BY id");
    assert_eq!((r.rows, r.columns, r.error, r.more), (100, 2, None, false));
    assert_eq!(r.bytes, c.last_event.len() as u64);
    let v = c.values();
    assert_eq!(v.len(), 100);
    assert_eq!(v[0], [Some("1".into()), Some("item-1".into())]);
    assert_eq!(v[99], [Some("100".into()), Some("item-100".into())]);
    // An empty result set: columns, no rows.
    let r = c.query("SELECT id FROM items WHERE id > 1000");
    assert_eq!((r.rows, r.columns), (0, 1));
    // NULLs and a wide row.
    let r = c.query("SELECT NULL, REPEAT('y', 70000), 3");
    assert_eq!((r.rows, r.columns), (1, 3));
    assert_eq!(c.values()[0][0], None);
    c.quit();
}

#[test]
fn insert_update_delete_report_affected_rows() {
    let srv = server();
    let mut c = main_login(&srv);
    let r = c.query(
        "CREATE TEMPORARY TABLE w (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(32) NOT NULL)",
    );
    assert_eq!((r.error, r.rows, r.columns), (None, 0, 0));
    let r = c.query("INSERT INTO w (v) VALUES ('a')");
    assert_eq!((r.affected, r.last_insert_id, r.error), (1, 1, None));
    let r = c.query("INSERT INTO w (v) VALUES ('b'), ('c'), ('d')");
    assert_eq!((r.affected, r.last_insert_id), (3, 2));
    let r = c.query("UPDATE w SET v = 'z' WHERE id >= 2");
    assert_eq!((r.affected, r.rows), (3, 0));
    let r = c.query("DELETE FROM w");
    assert_eq!(r.affected, 4);
    // A warning: a value cut to fit (not strict mode for this session).
    c.query("SET SESSION sql_mode = ''");
    let r = c.query("INSERT INTO w (v) VALUES (REPEAT('x', 40))");
    assert_eq!((r.affected, r.warnings), (1, 1));
    c.quit();
}

#[test]
fn error_1146_completes_and_the_connection_goes_on() {
    let srv = server();
    let mut c = main_login(&srv);
    let r = c.query("SELECT * FROM no_such_table");
    let e = r.error.expect("an error");
    assert_eq!((e.code, e.state_str()), (1146, "42S02"));
    assert_eq!((r.rows, r.more), (0, false));
    assert!(
        c.conn.last_error_message().contains("no_such_table"),
        "{}",
        c.conn.last_error_message()
    );
    let r = c.query("SELECT 1");
    assert_eq!((r.rows, r.error), (1, None));
    // A syntax error, a duplicate key, an error in the middle of the rows.
    assert_eq!(c.query("SELEC 1").error.map(|e| e.code), Some(1064));
    c.query("CREATE TEMPORARY TABLE k (id INT PRIMARY KEY)");
    c.query("INSERT INTO k VALUES (1)");
    let e = c.query("INSERT INTO k VALUES (1)").error.unwrap();
    assert_eq!((e.code, e.state_str()), (1062, "23000"));
    c.query("SET SESSION max_statement_time = 0");
    let r = c.query("SELECT id, 1 / (id - 50) FROM items ORDER BY id");
    assert_eq!(r.error, None, "division by zero is NULL here");
    assert_eq!(r.rows, 100);
    c.quit();
}

#[test]
fn prepared_statement_prepare_and_execute_100_times() {
    let srv = server();
    let mut c = main_login(&srv);
    let before = c.statuses("SESSION", &["Com_stmt_execute"])[0];
    let (id, params, columns) = c.prepare("SELECT id, name FROM items WHERE id = ?");
    assert_eq!((params, columns), (1, 2));
    let t = Instant::now();
    let mut rows = 0;
    for i in 1..=100u32 {
        let key = i.to_string();
        let r = c.execute(id, &[Some(&key)]);
        assert_eq!((r.error, r.columns), (None, 2));
        rows += r.rows;
    }
    let took = t.elapsed();
    assert_eq!(rows, 100);
    println!(
        "100 prepared executions: {:.1} ms ({:.0} µs per round trip)",
        took.as_secs_f64() * 1e3,
        took.as_secs_f64() * 1e6 / 100.0
    );
    assert_eq!(
        c.statuses("SESSION", &["Com_stmt_execute"])[0] - before,
        100
    );
    // A NULL parameter matches nothing; a range with two parameters.
    assert_eq!(c.execute(id, &[None]).rows, 0);
    let (range, params, _) = c.prepare("SELECT name FROM items WHERE id BETWEEN ? AND ?");
    assert_eq!(params, 2);
    assert_eq!(c.execute(range, &[Some("11"), Some("20")]).rows, 10);
    // Nine parameters (two bytes of NULL bitmap), some NULL.
    let (nine, params, columns) =
        c.prepare("SELECT COALESCE(?, ?, ?, ?, ?, ?, ?, ?, ?) AS first_non_null");
    assert_eq!((params, columns), (9, 1));
    let mut p: Vec<Option<&str>> = vec![None; 9];
    p[8] = Some("ninth");
    let r = c.execute(nine, &p);
    assert_eq!((r.rows, r.error), (1, None));
    // A statement without parameters or result: INSERT, affected rows.
    c.query("CREATE TEMPORARY TABLE pw (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(8))");
    let (ins, params, columns) = c.prepare("INSERT INTO pw (v) VALUES (?)");
    assert_eq!((params, columns), (1, 0));
    let r = c.execute(ins, &[Some("x")]);
    assert_eq!((r.affected, r.last_insert_id, r.rows), (1, 1, 0));
    let (noargs, params, columns) = c.prepare("SELECT COUNT(*) FROM pw");
    assert_eq!((params, columns), (0, 1));
    assert_eq!(c.execute(noargs, &[]).rows, 1);
    // Errors: a bad statement, a wrong parameter count, an unknown (closed) statement.
    c.conn.com_stmt_prepare(&mut c.out, "SELEC ?");
    c.flush();
    let r = c.complete();
    assert_eq!(r.error.map(|e| e.code), Some(1064));
    assert_eq!(
        c.execute(range, &[Some("1")]).error.map(|e| e.code),
        Some(1210)
    );
    c.conn.com_stmt_close(&mut c.out, id);
    assert_eq!(
        c.execute(id, &[Some("1")]).error.map(|e| e.code),
        Some(1243)
    );
    assert_eq!(c.conn.pending(), 0);
    c.quit();
}

#[test]
fn pipelined_commands_complete_in_order() {
    let srv = server();
    let mut c = main_login(&srv);
    let (id, _, _) = c.prepare("SELECT name FROM items WHERE id <= ?");
    for i in 1..=50u32 {
        let n = i.to_string();
        c.conn
            .com_query(&mut c.out, format!("SELECT id FROM items WHERE id <= {i}"));
        c.conn.com_stmt_execute(&mut c.out, id, [Some(n.as_str())]);
    }
    c.conn.com_query(&mut c.out, "SELECT * FROM no_such_table");
    c.conn.com_ping(&mut c.out);
    c.conn.com_init_db(&mut c.out, "no_such_db");
    c.conn.com_init_db(&mut c.out, &srv.database);
    c.conn.com_stmt_prepare(&mut c.out, "SELECT ?");
    c.conn.com_reset_connection(&mut c.out);
    assert_eq!(c.conn.pending(), 106);
    c.flush();
    for i in 1..=50u64 {
        assert_eq!(c.complete().rows, i, "query {i}");
        assert_eq!(c.complete().rows, i, "execute {i}");
    }
    assert_eq!(c.complete().error.map(|e| e.code), Some(1146));
    let r = c.complete();
    assert_eq!((r.error, r.rows, r.columns), (None, 0, 0));
    // no_such_db: not allowed (1044) for this user, whether or not it exists.
    assert_eq!(c.complete().error.map(|e| e.code), Some(1044));
    assert_eq!(c.complete().error, None);
    assert!(matches!(
        c.next(),
        Ok(Progress::Prepared {
            params: 1,
            columns: 1,
            ..
        })
    ));
    assert_eq!(c.complete().error, None);
    assert_eq!(c.conn.pending(), 0);
    // After the reset, the prepared statement is gone.
    assert_eq!(
        c.execute(id, &[Some("1")]).error.map(|e| e.code),
        Some(1243)
    );
    c.quit();
}

#[test]
fn multi_statements_report_one_completion_per_result() {
    let srv = server();
    let login = Login {
        user: &srv.user,
        password: &srv.password,
        database: Some(&srv.database),
    };
    let opts = Options {
        multi_statements: true,
        ..Options::default()
    };
    let (mut c, info) = Client::login_with(&srv, &login, opts).unwrap_or_else(|e| panic!("{e:?}"));
    assert_ne!(info.caps & caps::MULTI_STATEMENTS, 0);
    c.conn.com_query(
        &mut c.out,
        "SELECT id FROM items WHERE id <= 3; CREATE TEMPORARY TABLE m (a INT); \
         INSERT INTO m VALUES (1), (2); SELECT 1, 2",
    );
    c.flush();
    let rs: Vec<QueryResult> = (0..4).map(|_| c.complete()).collect();
    let brief: Vec<_> = rs
        .iter()
        .map(|r| (r.rows, r.columns, r.affected, r.more))
        .collect();
    assert_eq!(
        brief,
        [
            (3, 1, 0, true),
            (0, 0, 0, true),
            (0, 0, 2, true),
            (1, 2, 0, false)
        ]
    );
    assert_eq!(c.conn.pending(), 0);
    // An error stops the statements: it is the last completion.
    c.conn.com_query(
        &mut c.out,
        "SELECT 1; SELECT * FROM no_such_table; SELECT 2",
    );
    c.flush();
    let r = c.complete();
    assert_eq!((r.rows, r.more), (1, true));
    let r = c.complete();
    assert_eq!((r.error.map(|e| e.code), r.more), (Some(1146), false));
    assert_eq!(c.conn.pending(), 0);
    assert_eq!(c.query("SELECT 3").rows, 1);
    // A stored procedure's results come the same way (PS_MULTI_RESULTS for CALL).
    c.query("CREATE OR REPLACE PROCEDURE headroom_p() BEGIN SELECT 1; SELECT 2, 3; END");
    c.conn.com_query(&mut c.out, "CALL headroom_p()");
    c.flush();
    let rs: Vec<_> = (0..3).map(|_| c.complete()).collect();
    let brief: Vec<_> = rs.iter().map(|r| (r.rows, r.columns, r.more)).collect();
    assert_eq!(brief, [(1, 1, true), (1, 2, true), (0, 0, false)]);
    c.quit();
}

#[test]
fn a_row_of_20_mib_comes_in_two_fragments_and_is_counted_not_kept() {
    let srv = server();
    let mut c = main_login(&srv);
    let r = c.query("SELECT REPEAT('x', 20000000), 7");
    assert_eq!((r.rows, r.columns, r.error), (1, 2, None));
    assert!(r.bytes > 20_000_000);
    assert!(c.conn.buffer_capacity() <= headroom_proto::mysql::RETAINED_CAPACITY);
    // Also through the binary protocol.
    let (id, _, _) = c.prepare("SELECT REPEAT('x', ?)");
    let r = c.execute(id, &[Some("17000000")]);
    assert_eq!((r.rows, r.error), (1, None));
    assert!(c.conn.buffer_capacity() <= headroom_proto::mysql::RETAINED_CAPACITY);
    assert_eq!(c.query("SELECT 1").rows, 1);
    c.quit();
}

#[test]
fn tsung_example_session_runs_as_it_is() {
    // Tsung's examples/mysql.xml: log in to test as test/test, SHOW TABLES, SELECT * FROM gens,
    // SELECT * FROM te, close.
    let srv = server();
    let mut c = Client::login(&srv, "test", "test", Some("test"));
    let r = c.query("SHOW TABLES");
    assert_eq!(r.rows, 2);
    let mut tables: Vec<_> = c
        .values()
        .into_iter()
        .map(|r| r[0].clone().unwrap())
        .collect();
    tables.sort();
    assert_eq!(tables, ["gens", "te"]);
    assert_eq!(c.query("SELECT * FROM gens").rows, 10);
    assert_eq!(c.query("SELECT * FROM te").rows, 10);
    c.quit();
}

#[test]
fn server_counters_show_what_a_load_did() {
    // How the engine's test reads the server's own counts: SHOW GLOBAL STATUS (no privilege
    // needed). Global counters include concurrent tests' commands, so only lower bounds there;
    // a session's own are exact.
    let srv = server();
    let mut c = main_login(&srv);
    let names = [
        "Questions",
        "Com_select",
        "Com_stmt_prepare",
        "Com_stmt_execute",
        "Com_stmt_close",
        "Connections",
    ];
    let global_before = c.statuses("GLOBAL", &names);
    let mut other = main_login(&srv);
    let session_before = other.statuses("SESSION", &names);
    for _ in 0..20 {
        other.query("SELECT 1");
    }
    let (id, _, _) = other.prepare("SELECT ?");
    for _ in 0..30 {
        other.execute(id, &[Some("1")]);
    }
    other.conn.com_stmt_close(&mut other.out, id);
    let session_after = other.statuses("SESSION", &names);
    other.quit();
    let global_after = c.statuses("GLOBAL", &names);
    let delta =
        |a: &[u64], b: &[u64]| -> Vec<u64> { a.iter().zip(b).map(|(a, b)| a - b).collect() };
    let session = delta(&session_after, &session_before);
    let global = delta(&global_after, &global_before);
    println!(
        "session deltas: {:?}",
        names.iter().zip(&session).collect::<Vec<_>>()
    );
    println!(
        "global deltas: {:?}",
        names.iter().zip(&global).collect::<Vec<_>>()
    );
    // MariaDB counts an executed prepared SELECT in Com_select too; Questions counts queries
    // and executions (the second SHOW STATUS included), not COM_STMT_PREPARE, COM_STMT_CLOSE
    // or COM_PING. (Connections is server-wide even in SESSION STATUS.)
    assert_eq!(session[1..5], [20 + 30, 1, 30, 1]);
    assert_eq!(session[0], 20 + 30 + 1);
    for i in 0..5 {
        assert!(
            global[i] >= session[i],
            "{}: {} < {}",
            names[i],
            global[i],
            session[i]
        );
    }
    assert!(global[5] >= 1, "Connections");
    c.quit();
}

#[test]
fn a_thousand_connections_at_once() {
    // What a 1,000-user test needs of the server (scripts/mariadb.sh: max_connections 1500).
    let srv = server();
    let t = Instant::now();
    let mut clients: Vec<Client> = (0..1000).map(|_| main_login(&srv)).collect();
    let logins = t.elapsed();
    let threads = clients[0].statuses("GLOBAL", &["Threads_connected"])[0];
    assert!(threads >= 1000, "Threads_connected {threads}");
    for c in clients.iter_mut().step_by(97) {
        assert_eq!(c.query("SELECT 1").rows, 1);
    }
    println!(
        "1000 logins in {:.0} ms; Threads_connected {threads}",
        logins.as_secs_f64() * 1e3
    );
    for c in clients {
        c.quit();
    }
}

// ---- chunking: a recorded stream at every split point ----

/// What a session writes after an event: the recorded session's commands, so that a replay
/// expects the same replies.
type Script = dyn Fn(&Progress, &mut Connection, &mut Vec<u8>);

/// Replays `stream` into a fresh connection in the given pieces, writing the commands of
/// `script` as the recorded session did; returns the events, the bytes it wrote during the
/// login, and the ending.
fn replay(
    login: &Login<'_>,
    script: &Script,
    pieces: &mut dyn Iterator<Item = &[u8]>,
) -> (Vec<Progress>, Vec<u8>, Result<(), MysqlError>) {
    let mut out = Vec::new();
    let mut conn = Connection::new(login, Options::default());
    let mut events = Vec::new();
    let mut login_out = Vec::new();
    for piece in pieces {
        let mut p = piece;
        loop {
            match conn.decode(p, &mut out) {
                Err(e) => return (events, login_out, Err(e)),
                Ok((n, Progress::NeedMore)) => {
                    assert_eq!(n, p.len());
                    break;
                }
                Ok((n, ev)) => {
                    assert!(n > 0 && n <= p.len());
                    events.push(ev);
                    p = &p[n..];
                    if let Progress::LoggedIn(_) = ev {
                        login_out = std::mem::take(&mut out);
                    }
                    script(&ev, &mut conn, &mut out);
                }
            }
        }
    }
    let end = conn.eof();
    (events, login_out, end)
}

/// The commands of the recorded session: pipelined in two batches, before and after the
/// prepare (MariaDB's statement ids are server-wide: the execute needs the real one).
fn session_script(ev: &Progress, conn: &mut Connection, out: &mut Vec<u8>) {
    match *ev {
        Progress::LoggedIn(_) => {
            conn.com_query(out, "SELECT id, name FROM items ORDER BY id");
            conn.com_query(out, "SELECT * FROM no_such_table");
            conn.com_stmt_prepare(out, "SELECT id, name FROM items WHERE id BETWEEN ? AND ?");
        }
        Progress::Prepared { statement_id, .. } => {
            conn.com_stmt_execute(out, statement_id, [Some("1"), Some("5")]);
            conn.com_query(
                out,
                "CREATE TEMPORARY TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, v TEXT)",
            );
            conn.com_query(out, "INSERT INTO t (v) VALUES ('a'), ('b')");
            conn.com_ping(out);
            conn.com_query(out, "SELECT REPEAT('z', 100000)");
        }
        _ => {}
    }
}

#[test]
fn recorded_session_replays_identically_at_every_split_point() {
    let srv = server();
    let login = Login {
        user: &srv.user,
        password: &srv.password,
        database: Some(&srv.database),
    };
    let mut c = Client::connect(&srv, &login, Options::default());
    for _ in 0..20 {
        let ev = c.next().unwrap();
        session_script(&ev, &mut c.conn, &mut c.out);
        c.flush();
        if c.conn.is_ready() && c.conn.pending() == 0 {
            break;
        }
    }
    assert_eq!(c.conn.pending(), 0);
    let stream = c.recorded.clone();
    let live = c.events.clone();
    let small = stream.len() - 100_010;
    println!(
        "recorded {} server bytes, {} events",
        stream.len(),
        live.len()
    );
    assert_eq!(live.len(), 2 + 8);

    // The scramble depends on the greeting's nonce: the replayed login writes what the live
    // one sent.
    let whole = replay(&login, &session_script, &mut std::iter::once(&stream[..]));
    assert_eq!(whole.0, live);
    assert_eq!(whole.2, Ok(()));
    assert!(c.sent.starts_with(&whole.1));
    let t = Instant::now();
    let mut points = 0;
    for split in 0..=stream.len() {
        if split > small && split < stream.len() - 64 && split % 997 != 0 {
            continue;
        }
        points += 1;
        let (a, b) = stream.split_at(split);
        let got = replay(&login, &session_script, &mut [a, b].into_iter());
        assert_eq!(got, whole, "split at {split}");
    }
    println!(
        "{points} split points in {:.0} ms",
        t.elapsed().as_secs_f64() * 1e3
    );
    let bytewise = replay(&login, &session_script, &mut stream.chunks(1));
    assert_eq!(bytewise, whole, "one byte at a time");
    // Cut short anywhere inside the login or a reply: Incomplete, never a panic.
    for cut in [1, 4, 50, stream.len() / 2, stream.len() - 1] {
        let got = replay(
            &login,
            &session_script,
            &mut std::iter::once(&stream[..cut]),
        );
        assert_eq!(got.2, Err(MysqlError::Incomplete), "cut at {cut}");
    }
    c.quit();
}

/// Re-records the streams the unit tests replay (`src/mysql/testdata/`):
/// `HEADROOM_MYSQL_RECORD_DIR=crates/headroom-proto/src/mysql/testdata cargo test --release -p
/// headroom-proto --test mysql_server -- --ignored record_testdata`. The unit tests pin figures
/// of these exact recordings (MariaDB 10.11), so update them together.
#[test]
#[ignore = "re-records src/mysql/testdata; needs HEADROOM_MYSQL_RECORD_DIR"]
fn record_testdata() {
    let dir = std::env::var("HEADROOM_MYSQL_RECORD_DIR").expect("HEADROOM_MYSQL_RECORD_DIR");
    let srv = server();
    let save = |name: &str, c: &Client| {
        std::fs::write(format!("{dir}/{name}.server.bin"), &c.recorded).unwrap();
        std::fs::write(format!("{dir}/{name}.client.bin"), &c.sent).unwrap();
    };
    let login = Login {
        user: "headroom",
        password: "headroom",
        database: Some("headroom"),
    };
    // DEPRECATE_EOF (MariaDB offers it, we take it): one command of every kind, one at a time.
    let (mut c, _) = Client::login_with(&srv, &login, Options::default()).unwrap();
    unit_test_session(&mut c);
    save("session", &c);
    c.quit();
    // The same without DEPRECATE_EOF: result sets and prepares with their EOF packets.
    let opts = Options {
        deprecate_eof: false,
        ..Options::default()
    };
    let (mut c, info) = Client::login_with(&srv, &login, opts).unwrap();
    assert_eq!(info.caps & caps::DEPRECATE_EOF, 0);
    unit_test_session(&mut c);
    save("session_eof", &c);
    c.quit();

    // A wrong password.
    let bad = Login {
        password: "wrong",
        ..login
    };
    let Err(_) = Client::login_with(&srv, &bad, Options::default()) else {
        panic!("logged in with a wrong password")
    };
    let mut c = Client::connect(&srv, &bad, Options::default());
    assert!(matches!(c.next(), Ok(Progress::AuthReply(_))));
    c.flush();
    assert_eq!(c.next(), Err(MysqlError::AuthFailed(1045)));
    save("wrong_password", &c);

    // The ed25519 user: an AuthSwitchRequest to client_ed25519.
    let ed = Login {
        user: "headroom_ed",
        ..login
    };
    let mut c = Client::connect(&srv, &ed, Options::default());
    assert!(matches!(c.next(), Ok(Progress::AuthReply(_))));
    c.flush();
    assert_eq!(
        c.next(),
        Err(MysqlError::UnsupportedAuth(AuthPlugin::Ed25519))
    );
    save("ed25519_switch", &c);
}

/// The commands the unit tests' recording holds, one after the other.
fn unit_test_session(c: &mut Client) {
    assert_eq!(c.query("SELECT id, name FROM items ORDER BY id").rows, 100);
    assert_eq!(
        c.query("SELECT * FROM no_such_table").error.unwrap().code,
        1146
    );
    let (id, _, _) = c.prepare("SELECT id, name FROM items WHERE id BETWEEN ? AND ?");
    assert_eq!(c.execute(id, &[Some("1"), Some("5")]).rows, 5);
    c.query("CREATE TEMPORARY TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, v TEXT)");
    assert_eq!(c.query("INSERT INTO t (v) VALUES ('a'), ('b')").affected, 2);
    c.conn.com_ping(&mut c.out);
    c.flush();
    c.complete();
    assert_eq!(c.query("SELECT id FROM items WHERE id < 0").rows, 0);
    c.conn.com_stmt_close(&mut c.out, id);
    c.flush();
}

// ---- steady state allocates nothing ----

#[test]
fn steady_state_commands_allocate_nothing() {
    let srv = server();
    let mut c = main_login(&srv);
    let (id, _, _) = c.prepare("SELECT id, name, REPEAT('y', ?) FROM items WHERE id <= 3");
    // Record the server bytes of a few executions (different row sizes), to feed them again
    // without the socket in the way.
    let mut units = Vec::new();
    for n in ["10", "1000", "20000"] {
        c.execute(id, &[Some(n)]);
        units.push(c.recorded[c.last_event.clone()].to_vec());
    }
    let mut out = Vec::with_capacity(256);
    let mut conn = c.conn;
    // Each unit whole, then split in three (the pieces' boundaries go through the split
    // buffer); 1000 rounds to warm up, then 1000 counted.
    let round = |conn: &mut Connection, out: &mut Vec<u8>| {
        let mut rows = 0;
        for i in 0..3000 {
            let u = &units[i % 3];
            let (a, rest) = u.split_at(u.len() / 3);
            let (b, d) = rest.split_at(rest.len() / 2);
            for pieces in [&[&u[..]][..], &[a, b, d][..]] {
                out.clear();
                conn.com_stmt_execute(out, id, [Some("20000")]);
                for piece in pieces {
                    let mut p = *piece;
                    while !p.is_empty() {
                        let (n, ev) = conn.decode(p, out).unwrap();
                        if let Progress::Complete(r) = ev {
                            rows += r.rows;
                        }
                        p = &p[n..];
                    }
                }
            }
        }
        rows
    };
    round(&mut conn, &mut out);
    let before = allocs();
    let rows = round(&mut conn, &mut out);
    let spent = allocs() - before;
    assert_eq!(rows, 3000 * 2 * 3);
    assert_eq!(spent, 0, "allocations in 6000 steady-state commands");
    assert!(conn.buffer_capacity() <= headroom_proto::mysql::RETAINED_CAPACITY);
    println!(
        "size_of::<Connection>() = {} bytes",
        std::mem::size_of::<Connection>()
    );
}
