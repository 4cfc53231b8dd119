//! The `/db/*` backend (`headroom_serve::db`) against real databases: SQLite files in a
//! temporary directory, and a real PostgreSQL server whose URL is in `HEADROOM_PG_URL`
//! (`scripts/postgres.sh start` runs one and prints its URL; `scripts/test` does both).
//!
//! The figures of the module doc come from the ignored `measure` test:
//! `HEADROOM_PG_URL=$(scripts/postgres.sh start) cargo test --release -p headroom-serve
//! --test db -- --ignored --nocapture measure`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use headroom_serve::db::{self, Db, DbError, SEED_ROWS};

// ---------------------------------------------------------------------------------------------
// Helpers

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "headroom-db-test-{}-{tag}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    fn db(&self) -> PathBuf {
        self.0.join("headroom.db")
    }

    fn url(&self) -> String {
        format!("sqlite:{}", self.db().display())
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn sqlite_count(path: &Path) -> i64 {
    let c = rusqlite::Connection::open(path).unwrap();
    c.query_row("SELECT count(*) FROM subscriber", [], |r| r.get(0))
        .unwrap()
}

fn open_err(url: &str, pool: usize) -> String {
    match db::open(url, pool) {
        Ok(_) => panic!("{url} opened"),
        Err(DbError(msg)) => msg,
    }
}

/// `threads` threads x `calls` calls each, alternating read(5) and write(2), all released at
/// once; returns the rows written.
fn hammer(db: &Arc<dyn Db>, threads: usize, calls: usize) -> u64 {
    let start = Arc::new(Barrier::new(threads));
    let hs: Vec<_> = (0..threads)
        .map(|t| {
            let (db, start) = (Arc::clone(db), Arc::clone(&start));
            std::thread::spawn(move || {
                start.wait();
                let mut written = 0;
                for i in 0..calls {
                    if (t + i) % 2 == 0 {
                        let r = db.read(5).unwrap_or_else(|e| panic!("read: {e}"));
                        assert_eq!(r, 5, "read(5) found {r} rows");
                    } else {
                        written += db.write(2).unwrap_or_else(|e| panic!("write: {e}"));
                    }
                }
                written
            })
        })
        .collect();
    hs.into_iter()
        .map(|h| h.join().expect("caller thread"))
        .sum()
}

fn check_concurrency(db: &Arc<dyn Db>, written: u64) {
    let s = db.stats();
    assert_eq!(s.pool, 2);
    assert_eq!(s.calls, 400, "{s:?}");
    assert_eq!(s.errors, 0, "{s:?}");
    assert_eq!(s.in_use, 0, "{s:?}");
    assert!(
        (1..=2).contains(&s.peak_in_use),
        "at most 2 calls may run at once through a pool of 2: {s:?}"
    );
    // Whether a caller had to wait depends on scheduling (calls are short); the pool's waiting
    // and hand-over are checked deterministically by the unit tests of `db`.
    assert_eq!(written, 8 * 25 * 2);
}

// ---------------------------------------------------------------------------------------------
// SQLite

#[test]
fn sqlite_creates_and_fills_the_subscriber_table() {
    let dir = TempDir::new("fill");
    let db = db::open(&dir.url(), 2).expect("open");
    assert_eq!(db.pool_size(), 2);
    assert_eq!(sqlite_count(&dir.db()), i64::from(SEED_ROWS));

    let c = rusqlite::Connection::open(dir.db()).unwrap();
    let mut st = c
        .prepare("SELECT name FROM pragma_table_info('subscriber')")
        .unwrap();
    let cols: Vec<String> = st
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        cols,
        [
            "id",
            "msisdn",
            "imsi",
            "imei",
            "device",
            "services",
            "updated_at"
        ]
    );
    let mode: String = c
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let (msisdn, imsi): (String, String) = c
        .query_row(
            "SELECT msisdn, imsi FROM subscriber WHERE id = 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(
        (msisdn.as_str(), imsi.as_str()),
        ("46700000001", "240010000000001")
    );
}

#[test]
fn sqlite_read_returns_the_rows_read() {
    let dir = TempDir::new("read");
    let db = db::open(&dir.url(), 1).expect("open");
    assert_eq!(db.read(5).unwrap(), 5);
    assert_eq!(db.read(0).unwrap(), 0);
    assert_eq!(db.read(500).unwrap(), 500);
    assert_eq!(sqlite_count(&dir.db()), i64::from(SEED_ROWS));
}

#[test]
fn sqlite_write_adds_rows_and_a_reopen_does_not_refill() {
    let dir = TempDir::new("write");
    let db = db::open(&dir.url(), 1).expect("open");
    assert_eq!(db.write(3).unwrap(), 3);
    assert_eq!(sqlite_count(&dir.db()), i64::from(SEED_ROWS) + 3);
    drop(db);
    let db = db::open(&dir.url(), 3).expect("reopen");
    assert_eq!(sqlite_count(&dir.db()), i64::from(SEED_ROWS) + 3);
    // The new rows are in the id range that reads draw from.
    assert_eq!(db.read(1000).unwrap(), 1000);
}

#[test]
fn sqlite_eight_callers_share_a_pool_of_two() {
    let dir = TempDir::new("pool");
    let db = db::open(&dir.url(), 2).expect("open");
    let written = hammer(&db, 8, 50);
    check_concurrency(&db, written);
    assert_eq!(
        sqlite_count(&dir.db()),
        i64::from(SEED_ROWS) + written as i64
    );
}

#[test]
fn sqlite_servers_opening_one_new_file_at_once_fill_it_once() {
    let dir = TempDir::new("race");
    let url = dir.url();
    let start = Arc::new(Barrier::new(4));
    let hs: Vec<_> = (0..4)
        .map(|_| {
            let (url, start) = (url.clone(), Arc::clone(&start));
            std::thread::spawn(move || {
                start.wait();
                db::open(&url, 2).map(|_| ())
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap().expect("open");
    }
    assert_eq!(sqlite_count(&dir.db()), i64::from(SEED_ROWS));
}

#[test]
fn sqlite_with_another_subscriber_table_is_refused() {
    let dir = TempDir::new("schema");
    let c = rusqlite::Connection::open(dir.db()).unwrap();
    c.execute_batch("CREATE TABLE subscriber (id INTEGER PRIMARY KEY, name TEXT)")
        .unwrap();
    drop(c);
    let msg = open_err(&dir.url(), 1);
    assert!(msg.contains("does not have the expected columns"), "{msg}");
    assert!(msg.contains("msisdn"), "{msg}");
}

#[test]
fn bad_urls_and_arguments_are_explained() {
    let msg = open_err("mysql://root:hunter2@127.0.0.1/db", 4);
    assert!(msg.contains("unsupported database URL"), "{msg}");
    assert!(
        msg.contains("sqlite:PATH") && msg.contains("postgres://"),
        "{msg}"
    );
    assert!(!msg.contains("hunter2"), "the password leaked: {msg}");

    for url in ["sqlite::memory:", "sqlite:"] {
        let msg = open_err(url, 1);
        assert!(msg.contains("path of a database file"), "{url}: {msg}");
    }

    let msg = open_err("sqlite:/nonexistent-dir-of-headroom/x.db", 1);
    assert!(msg.contains("does not exist"), "{msg}");

    let dir = TempDir::new("args");
    let msg = open_err(&dir.url(), 0);
    assert!(msg.contains("at least 1 connection"), "{msg}");

    let msg = open_err("postgres://u:pw@127.0.0.1:notaport/db", 1);
    assert!(msg.contains("invalid PostgreSQL URL"), "{msg}");
    assert!(!msg.contains(":pw@"), "the password leaked: {msg}");

    let db = db::open(&dir.url(), 1).unwrap();
    let e = db.read(db::MAX_OPS_PER_CALL + 1).unwrap_err().0;
    assert!(e.contains("allowed"), "{e}");
    assert_eq!(db.stats().calls, 0);
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL

fn pg_url() -> String {
    match std::env::var("HEADROOM_PG_URL") {
        Ok(u) if !u.is_empty() => u,
        _ => panic!(
            "HEADROOM_PG_URL is not set: the /db tests need a real PostgreSQL. Run \
             `export HEADROOM_PG_URL=$(scripts/postgres.sh start)` (it installs Debian's \
             postgresql if missing and starts a private server on 127.0.0.1:25432), then run \
             the tests again; scripts/test does both"
        ),
    }
}

/// A schema of its own for one test (dropped at the end), and the URL that makes it the
/// search path, so tests running at once do not share a `subscriber` table.
struct PgSchema {
    admin: postgres::Client,
    name: String,
    url: String,
}

impl PgSchema {
    fn new(tag: &str) -> PgSchema {
        let base = pg_url();
        let mut admin = postgres::Client::connect(&base, postgres::NoTls).unwrap_or_else(|e| {
            panic!("cannot connect to HEADROOM_PG_URL (is `scripts/postgres.sh start` running?): {e:?}")
        });
        let name = format!("headroom_test_{tag}_{}", std::process::id());
        admin
            .batch_execute(&format!(
                "DROP SCHEMA IF EXISTS {name} CASCADE; CREATE SCHEMA {name}"
            ))
            .expect("create schema");
        // Add to the URL's own `options` (a second `options=` would replace the first).
        let search_path = format!("-c%20search_path%3D{name}");
        let url = if let Some(i) = base.find("options=") {
            let end = base[i..].find('&').map_or(base.len(), |j| i + j);
            format!(
                "{}%20{search_path}{}&application_name={name}",
                &base[..end],
                &base[end..]
            )
        } else {
            let sep = if base.contains('?') { '&' } else { '?' };
            format!("{base}{sep}options={search_path}&application_name={name}")
        };
        PgSchema { admin, name, url }
    }

    fn count(&mut self) -> i64 {
        self.admin
            .query_one(
                &format!("SELECT count(*) FROM {}.subscriber", self.name),
                &[],
            )
            .unwrap()
            .get(0)
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        let _ = self
            .admin
            .batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name));
    }
}

#[test]
fn postgres_creates_fills_reads_and_writes() {
    let mut s = PgSchema::new("basic");
    let db = db::open(&s.url, 2).expect("open");
    assert_eq!(db.pool_size(), 2);
    assert_eq!(s.count(), i64::from(SEED_ROWS));
    let cols: Vec<String> = s
        .admin
        .query(
            "SELECT column_name::text FROM information_schema.columns \
             WHERE table_schema = $1 AND table_name = 'subscriber' ORDER BY ordinal_position",
            &[&s.name],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        cols,
        [
            "id",
            "msisdn",
            "imsi",
            "imei",
            "device",
            "services",
            "updated_at"
        ]
    );

    assert_eq!(db.read(5).unwrap(), 5);
    assert_eq!(db.write(3).unwrap(), 3);
    assert_eq!(s.count(), i64::from(SEED_ROWS) + 3);
    drop(db);
    let db = db::open(&s.url, 1).expect("reopen");
    assert_eq!(
        s.count(),
        i64::from(SEED_ROWS) + 3,
        "a reopen refilled the table"
    );
    assert_eq!(db.read(1000).unwrap(), 1000);
}

#[test]
fn postgres_eight_callers_share_a_pool_of_two() {
    let mut s = PgSchema::new("pool");
    let db = db::open(&s.url, 2).expect("open");
    let backends: i64 = s
        .admin
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
            &[&s.name],
        )
        .unwrap()
        .get(0);
    assert_eq!(backends, 2, "a pool of 2 holds 2 server connections");
    let written = hammer(&db, 8, 50);
    check_concurrency(&db, written);
    assert_eq!(s.count(), i64::from(SEED_ROWS) + written as i64);
}

#[test]
fn postgres_replaces_connections_the_server_closed() {
    let mut s = PgSchema::new("reconnect");
    let db = db::open(&s.url, 2).expect("open");
    let killed: Vec<bool> = s
        .admin
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
            &[&s.name],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(killed, [true, true]);
    std::thread::sleep(Duration::from_millis(100));
    for _ in 0..4 {
        assert_eq!(
            db.read(5)
                .expect("read after the server closed the connections"),
            5
        );
        assert_eq!(db.write(1).expect("write after the server closed them"), 1);
    }
    assert_eq!(db.stats().errors, 0);
}

#[test]
fn postgres_with_another_subscriber_table_is_refused() {
    let mut s = PgSchema::new("schema");
    s.admin
        .batch_execute(&format!(
            "CREATE TABLE {}.subscriber (id INTEGER PRIMARY KEY, name TEXT)",
            s.name
        ))
        .unwrap();
    let msg = open_err(&s.url, 1);
    assert!(msg.contains("does not have the expected columns"), "{msg}");
    assert!(msg.contains("msisdn"), "{msg}");
}

#[test]
fn postgres_errors_say_what_to_do() {
    // Nothing listens on a port just released.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let msg = open_err(
        &format!("postgres://headroom:pw@127.0.0.1:{port}/headroom"),
        2,
    );
    assert!(
        msg.contains(&format!(
            "cannot connect to PostgreSQL at 127.0.0.1:{port}: connection refused"
        )),
        "{msg}"
    );
    assert!(msg.contains("scripts/postgres.sh start"), "{msg}");

    // The real server, a wrong password.
    let base = pg_url();
    let cfg: postgres::Config = base.parse().expect("HEADROOM_PG_URL parses");
    let user = cfg
        .get_user()
        .expect("HEADROOM_PG_URL names a user")
        .to_string();
    let host = match &cfg.get_hosts()[0] {
        postgres::config::Host::Tcp(h) => h.clone(),
        other => panic!("HEADROOM_PG_URL should name a TCP host, not {other:?}"),
    };
    let port = cfg.get_ports().first().copied().unwrap_or(5432);
    let db = cfg.get_dbname().unwrap_or(&user).to_string();
    let msg = open_err(
        &format!("postgres://{user}:wrong-Pa55@{host}:{port}/{db}"),
        1,
    );
    assert!(msg.contains("password authentication failed"), "{msg}");
    assert!(msg.contains("check the user and password"), "{msg}");
    assert!(!msg.contains("wrong-Pa55"), "the password leaked: {msg}");

    // A database that does not exist (with the right password).
    let pass = String::from_utf8(cfg.get_password().unwrap_or_default().to_vec()).unwrap();
    let msg = open_err(
        &format!("postgres://{user}:{pass}@{host}:{port}/no_such_db_of_headroom"),
        1,
    );
    assert!(msg.contains("does not exist"), "{msg}");
}

// ---------------------------------------------------------------------------------------------
// Figures (not a check; run by hand, see the top of this file)

struct Timing {
    median: Duration,
    max: Duration,
    ops_per_s: f64,
}

fn time_calls(db: &Arc<dyn Db>, callers: usize, calls: usize, write: bool) -> Timing {
    let start = Arc::new(Barrier::new(callers + 1));
    let hs: Vec<_> = (0..callers)
        .map(|_| {
            let (db, start) = (Arc::clone(db), Arc::clone(&start));
            std::thread::spawn(move || {
                start.wait();
                let mut per_call = Vec::with_capacity(calls);
                for _ in 0..calls {
                    let t = Instant::now();
                    let r = if write { db.write(500) } else { db.read(500) };
                    r.unwrap_or_else(|e| panic!("{e}"));
                    per_call.push(t.elapsed());
                }
                per_call
            })
        })
        .collect();
    start.wait();
    let t0 = Instant::now();
    let mut all: Vec<Duration> = hs.into_iter().flat_map(|h| h.join().unwrap()).collect();
    let wall = t0.elapsed();
    all.sort();
    Timing {
        median: all[all.len() / 2],
        max: all[all.len() - 1],
        ops_per_s: (callers * calls * 500) as f64 / wall.as_secs_f64(),
    }
}

#[test]
#[ignore = "measurement: run with --ignored --nocapture"]
fn measure() {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let dir = TempDir::new("measure");
    let mut backends = vec![("sqlite", dir.url(), None)];
    if std::env::var("HEADROOM_PG_URL").is_ok() {
        let s = PgSchema::new("measure");
        backends.push(("postgres", s.url.clone(), Some(s)));
    }
    println!("backend  call        callers  median ms  max ms    ops/s");
    for (name, url, _schema) in &backends {
        let one = db::open(url, 1).unwrap();
        let t = Instant::now();
        let pool = db::open(url, 50).unwrap();
        println!("{name:8} open with a pool of 50: {:.1} ms", ms(t.elapsed()));
        one.read(500).unwrap();
        for (op, write) in [("read(500)", false), ("write(500)", true)] {
            for (db, callers, calls) in [(&one, 1, 20), (&pool, 50, 4)] {
                let t = time_calls(db, callers, calls, write);
                println!(
                    "{name:8} {op:10}  {callers:7}  {:9.1}  {:6.1}  {:7.0}",
                    ms(t.median),
                    ms(t.max),
                    t.ops_per_s
                );
            }
        }
    }
}
