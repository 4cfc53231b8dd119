//! The database behind `/db/read/N` and `/db/write/N`: a fixed pool of connections to SQLite
//! (embedded, the default) or PostgreSQL, over one `subscriber` table.
//!
//! This is the server side of seed 003, where each Tsung request made an Erlang node do 500
//! random reads (or 500 inserts) on a `subscriber` table, through Emysql's pool of 50
//! connections to MySQL (or on Mnesia). A request here is one call of [`Db::read`] or
//! [`Db::write`] with `n` operations.
//!
//! # The pool
//!
//! [`open`] makes `pool` connections up front and never more: the pool size is a factor of the
//! study, so it must be exact. A call takes one connection, runs its `n` operations on it one
//! after another, and gives it back (also when it fails or panics). When every connection is
//! taken, callers block and are served **in arrival order**: each waiter parks on its own
//! condition variable and a returned connection is handed directly to the oldest one (Emysql's
//! `wait_for_con` queue), so a late caller cannot overtake the queue and no wake-up is wasted
//! on a waiter that would find the pool empty again. The pool itself is a `Mutex` held only to
//! push or pop, so its cost is a few hundred nanoseconds against the milliseconds the
//! operations take. [`Db::stats`] counts calls, calls that had to wait, errors, and the most
//! calls that ever ran at once (which can never exceed the pool size).
//!
//! Each pooled connection carries its own random generator, so choosing ids shares nothing.
//!
//! # The table
//!
//! Seed 003's table "stores the same information Synapse stores for their subscribers" —
//! mobile subscribers of an operator whose devices are configured over the air (MMS, WAP). So:
//!
//! | column | SQLite | PostgreSQL | example |
//! |---|---|---|---|
//! | `id` | `INTEGER PRIMARY KEY` | `BIGSERIAL PRIMARY KEY` | 1 |
//! | `msisdn` | `TEXT NOT NULL` | `TEXT NOT NULL` | `46700000001` |
//! | `imsi` | `TEXT NOT NULL` | `TEXT NOT NULL` | `240010000000001` |
//! | `imei` | `TEXT NOT NULL` | `TEXT NOT NULL` | `356938035643809` |
//! | `device` | `TEXT NOT NULL` | `TEXT NOT NULL` | `Nokia N95` |
//! | `services` | `TEXT NOT NULL` | `TEXT NOT NULL` | `mms,wap` |
//! | `updated_at` | `INTEGER NOT NULL` | `BIGINT NOT NULL` | Unix seconds |
//!
//! About 100 bytes a row, keyed by `id` only: no secondary index, so a write is one row plus
//! one primary-key entry, and a read is one primary-key lookup. The table is created
//! when missing and filled with [`SEED_ROWS`] rows when empty (under a lock, so two servers
//! opening one database at once do not both fill it).
//!
//! - **read(n)**: `n` point selects `WHERE id = ?` of ids drawn uniformly from the ids that
//!   exist (from the smallest id at open to the largest id seen so far, so rows this process
//!   inserted are read too). Returns the rows found: `n`, unless ids have gaps (rows deleted by
//!   hand, or PostgreSQL sequence values lost to failed inserts).
//! - **write(n)**: `n` single-row `INSERT`s, **each its own transaction** (autocommit), as the
//!   study did (Emysql sent every insert on its own). Batching them into one transaction would
//!   measure something else: one commit per request instead of one per row.
//!
//! Statements are prepared once per connection (PostgreSQL: at connect; SQLite: rusqlite's
//! per-connection statement cache).
//!
//! # Backends
//!
//! - `sqlite:PATH` — a **file**, created when missing (`sqlite:///abs/path` and
//!   `sqlite://rel/path` are accepted too). Not `:memory:`: every connection would get its own
//!   empty database. Every connection sets `journal_mode=WAL` (readers never block, and are not
//!   blocked by, the one writer), `synchronous=NORMAL` (a commit appends to the WAL without
//!   fsync; the WAL is synced at checkpoints: durable across a process crash, not a power cut),
//!   and a `busy_timeout` of [`SQLITE_BUSY_TIMEOUT`], so that concurrent writers queue for
//!   SQLite's single write lock instead of failing with `SQLITE_BUSY`.
//! - `postgres://USER:PASS@HOST:PORT/DB` (or `postgresql://`) — a blocking client of our own
//!   over headroom-proto's PostgreSQL codec ([`crate::pgclient`]: one socket per connection,
//!   read and written on the calling thread; URL parameters `host` (a socket directory),
//!   `options`, `application_name`, `connect_timeout`, `sslmode=disable|allow|prefer`), no TLS,
//!   a 5 s connect timeout unless the URL sets one, and
//!   `application_name=headroom-serve` unless the URL sets one. The server's settings apply:
//!   PostgreSQL's default makes every commit wait for its WAL fsync (a few ms on a plain
//!   disk), while `scripts/postgres.sh` starts its server with `synchronous_commit=off`, the
//!   counterpart of SQLite's `synchronous=NORMAL`; a URL can choose per connection with
//!   `?options=-c%20synchronous_commit%3Don`. A pooled connection that the
//!   server closed while it sat idle (restart, idle timeout, `pg_terminate_backend`) is
//!   replaced on its next use; one lost in the middle of a call fails that call. For a private
//!   server to test against, see `scripts/postgres.sh`.

use std::collections::VecDeque;
use std::error::Error as StdError;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::pgclient;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// A database behind a connection pool. Calls block until a pooled connection is free.
pub trait Db: Send + Sync {
    /// `n` reads of random rows of `subscriber`; returns the rows read.
    fn read(&self, n: u32) -> Result<u64, DbError>;
    /// `n` inserts into `subscriber`; returns the rows written.
    fn write(&self, n: u32) -> Result<u64, DbError>;
    /// Connections in the pool.
    fn pool_size(&self) -> usize;
    /// The pool's counters (for `/status`, and for tests).
    fn stats(&self) -> DbStats {
        DbStats {
            pool: self.pool_size(),
            ..DbStats::default()
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DbError(pub String);

/// A snapshot of a pool's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DbStats {
    /// Connections in the pool.
    pub pool: usize,
    /// Calls running now (each holding a connection).
    pub in_use: usize,
    /// The most calls that ever ran at once; never more than `pool`.
    pub peak_in_use: usize,
    /// Calls finished (successfully or not).
    pub calls: u64,
    /// Calls that found no free connection and had to wait for one.
    pub waits: u64,
    /// Calls that failed.
    pub errors: u64,
}

/// Rows put into an empty `subscriber` table.
pub const SEED_ROWS: u32 = 10_000;

/// The most operations one call may ask for: a call holds a connection for all of them, so an
/// unbounded `n` from the network could hold the pool for hours. Larger `n` is an error
/// (servers should answer 400 before calling).
pub const MAX_OPS_PER_CALL: u32 = 100_000;

/// How long a SQLite statement waits for the write lock (or a checkpoint) before failing.
pub const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// Connect timeout for PostgreSQL when the URL sets none.
const PG_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Open `url` (`sqlite:PATH` or `postgres://...`) with a pool of `pool` connections, creating
/// and filling the `subscriber` table when missing.
pub fn open(url: &str, pool: usize) -> Result<Arc<dyn Db>, DbError> {
    if pool == 0 {
        return Err(DbError(
            "the database pool needs at least 1 connection".into(),
        ));
    }
    if let Some(rest) = url.strip_prefix("sqlite:") {
        let path = rest.strip_prefix("//").unwrap_or(rest);
        Ok(Arc::new(open_sqlite(path, pool)?))
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Arc::new(open_postgres(url, pool)?))
    } else {
        Err(DbError(format!(
            "unsupported database URL {:?}: expected sqlite:PATH (a file, created when missing) \
             or postgres://USER:PASSWORD@HOST:PORT/DATABASE",
            redact(url)
        )))
    }
}

// ---------------------------------------------------------------------------------------------
// The pool

/// Connections handed out first-come first-served; see the module doc.
struct Pool<C> {
    size: usize,
    state: Mutex<PoolState<C>>,
    in_use: AtomicUsize,
    peak_in_use: AtomicUsize,
    calls: AtomicU64,
    waits: AtomicU64,
    errors: AtomicU64,
}

struct PoolState<C> {
    free: Vec<C>,
    waiters: VecDeque<Arc<Waiter<C>>>,
}

/// One blocked caller: the connection is put into `slot` by whoever returns one.
struct Waiter<C> {
    slot: Mutex<Option<C>>,
    ready: Condvar,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks cannot leave the data half-changed (a push or
    // a pop), so poisoning is ignored.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<C> Pool<C> {
    fn new(conns: Vec<C>) -> Self {
        Pool {
            size: conns.len(),
            state: Mutex::new(PoolState {
                free: conns,
                waiters: VecDeque::new(),
            }),
            in_use: AtomicUsize::new(0),
            peak_in_use: AtomicUsize::new(0),
            calls: AtomicU64::new(0),
            waits: AtomicU64::new(0),
            errors: AtomicU64::new(0),
        }
    }

    fn take(&self) -> C {
        let waiter = {
            let mut st = lock(&self.state);
            if st.waiters.is_empty() {
                if let Some(c) = st.free.pop() {
                    return c;
                }
            }
            let w = Arc::new(Waiter {
                slot: Mutex::new(None),
                ready: Condvar::new(),
            });
            st.waiters.push_back(Arc::clone(&w));
            w
        };
        self.waits.fetch_add(1, Relaxed);
        let mut slot = lock(&waiter.slot);
        loop {
            if let Some(c) = slot.take() {
                return c;
            }
            slot = waiter
                .ready
                .wait(slot)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn give_back(&self, c: C) {
        let mut st = lock(&self.state);
        match st.waiters.pop_front() {
            Some(w) => {
                drop(st);
                *lock(&w.slot) = Some(c);
                w.ready.notify_one();
            }
            None => st.free.push(c),
        }
    }

    /// Runs `f` on a pooled connection, waiting for one if need be.
    fn with<R>(&self, f: impl FnOnce(&mut C) -> Result<R, DbError>) -> Result<R, DbError> {
        struct Lease<'a, C> {
            pool: &'a Pool<C>,
            conn: Option<C>,
        }
        impl<C> Drop for Lease<'_, C> {
            fn drop(&mut self) {
                self.pool.in_use.fetch_sub(1, Relaxed);
                self.pool.calls.fetch_add(1, Relaxed);
                if let Some(c) = self.conn.take() {
                    self.pool.give_back(c);
                }
            }
        }
        let conn = self.take();
        let now = self.in_use.fetch_add(1, Relaxed) + 1;
        self.peak_in_use.fetch_max(now, Relaxed);
        let mut lease = Lease {
            pool: self,
            conn: Some(conn),
        };
        let r = f(lease
            .conn
            .as_mut()
            .expect("a lease holds its connection until dropped"));
        if r.is_err() {
            self.errors.fetch_add(1, Relaxed);
        }
        r
    }

    fn stats(&self) -> DbStats {
        DbStats {
            pool: self.size,
            in_use: self.in_use.load(Relaxed),
            peak_in_use: self.peak_in_use.load(Relaxed),
            calls: self.calls.load(Relaxed),
            waits: self.waits.load(Relaxed),
            errors: self.errors.load(Relaxed),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The operations, shared by both backends

/// One backend connection: a point read and a single-row autocommit insert.
trait Conn: Send + 'static {
    /// Makes the connection usable (reconnects a closed one); called at the start of each call.
    fn ready(&mut self) -> Result<(), DbError> {
        Ok(())
    }
    /// Whether the connection is known to be closed (the server ended it).
    fn closed(&self) -> bool {
        false
    }
    /// Reads the row `id`; false when there is none.
    fn read_one(&mut self, id: i64) -> Result<bool, DbError>;
    /// Inserts `row` in its own transaction; returns its id.
    fn insert_one(&mut self, row: &Subscriber) -> Result<i64, DbError>;
}

struct Pooled<C> {
    conn: C,
    rng: SmallRng,
}

struct PooledDb<C> {
    pool: Pool<Pooled<C>>,
    /// Ids in `min_id..=max_id` exist (save for gaps); `max_id` grows with our inserts.
    min_id: i64,
    max_id: AtomicI64,
}

impl<C: Conn> PooledDb<C> {
    fn new(conns: Vec<C>, min_id: i64, max_id: i64) -> Self {
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
            ^ u64::from(std::process::id()) << 32;
        let conns = conns
            .into_iter()
            .enumerate()
            .map(|(i, conn)| Pooled {
                conn,
                rng: SmallRng::seed_from_u64(seed.wrapping_add(i as u64)),
            })
            .collect();
        PooledDb {
            pool: Pool::new(conns),
            min_id,
            max_id: AtomicI64::new(max_id),
        }
    }
}

/// Runs `f` on `c`; when the first operation of a call fails because the connection turns out
/// to be closed (the server ended it while it sat in the pool: restart, idle timeout,
/// `pg_terminate_backend`), reconnects and runs it once more. Nothing of the call was done yet,
/// so the retry cannot double anything; a connection lost later in a call fails the call.
fn op<C: Conn, T>(
    c: &mut C,
    first: bool,
    f: impl Fn(&mut C) -> Result<T, DbError>,
) -> Result<T, DbError> {
    match f(c) {
        Err(_) if first && c.closed() => {
            c.ready()?;
            f(c)
        }
        r => r,
    }
}

fn check_n(n: u32) -> Result<(), DbError> {
    if n > MAX_OPS_PER_CALL {
        return Err(DbError(format!(
            "{n} operations in one call is more than the {MAX_OPS_PER_CALL} allowed"
        )));
    }
    Ok(())
}

impl<C: Conn> Db for PooledDb<C> {
    fn read(&self, n: u32) -> Result<u64, DbError> {
        check_n(n)?;
        self.pool.with(|p| {
            p.conn.ready()?;
            let hi = self.max_id.load(Relaxed).max(self.min_id);
            let mut found = 0;
            for i in 0..n {
                let id = p.rng.gen_range(self.min_id..=hi);
                found += u64::from(op(&mut p.conn, i == 0, |c| c.read_one(id))?);
            }
            Ok(found)
        })
    }

    fn write(&self, n: u32) -> Result<u64, DbError> {
        check_n(n)?;
        self.pool.with(|p| {
            p.conn.ready()?;
            let now = unix_now();
            for i in 0..n {
                let row = Subscriber::new(p.rng.gen_range(0..100_000_000), now);
                let id = op(&mut p.conn, i == 0, |c| c.insert_one(&row))?;
                self.max_id.fetch_max(id, Relaxed);
            }
            Ok(u64::from(n))
        })
    }

    fn pool_size(&self) -> usize {
        self.pool.size
    }

    fn stats(&self) -> DbStats {
        self.pool.stats()
    }
}

/// A row of `subscriber`, without its id.
struct Subscriber {
    msisdn: String,
    imsi: String,
    imei: String,
    device: &'static str,
    services: &'static str,
    updated_at: i64,
}

const DEVICES: [&str; 8] = [
    "Nokia N95",
    "Nokia 6300",
    "Sony Ericsson K800i",
    "Samsung Galaxy S II",
    "HTC Desire",
    "iPhone 4S",
    "BlackBerry Bold 9700",
    "Motorola RAZR V3",
];
const SERVICES: [&str; 4] = ["mms", "mms,wap", "mms,wap,gprs", "wap"];

impl Subscriber {
    /// The subscriber number `k` (0..10^8): deterministic, so seeded tables are identical.
    fn new(k: u64, updated_at: i64) -> Self {
        let k = k % 100_000_000;
        Subscriber {
            msisdn: format!("467{k:08}"),
            imsi: format!("24001{k:010}"),
            imei: format!(
                "35{:013}",
                k.wrapping_mul(7_919_000_003) % 10_000_000_000_000
            ),
            device: DEVICES[(k % DEVICES.len() as u64) as usize],
            services: SERVICES[(k / 7 % SERVICES.len() as u64) as usize],
            updated_at,
        }
    }
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

const COLUMNS: &str = "msisdn, imsi, imei, device, services, updated_at";

/// `url` with the password of its user-info part replaced by `***`.
fn redact(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return url.to_string();
    };
    match rest[..at].find(':') {
        Some(colon) => format!(
            "{}{}:***{}",
            &url[..scheme_end + 3],
            &rest[..colon],
            &rest[at..]
        ),
        None => url.to_string(),
    }
}

/// An error and its causes, `outer: inner: innermost`.
fn chain(e: &dyn StdError) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}

// ---------------------------------------------------------------------------------------------
// SQLite

struct SqliteConn {
    conn: rusqlite::Connection,
}

fn sqlite_err(path: &Path, what: &str, e: rusqlite::Error) -> DbError {
    DbError(format!("SQLite {}: {what}: {}", path.display(), chain(&e)))
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

fn sqlite_connect(path: &Path) -> Result<rusqlite::Connection, DbError> {
    let conn = rusqlite::Connection::open(path).map_err(|e| {
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        match dir {
            Some(d) if !d.is_dir() => DbError(format!(
                "cannot open SQLite database {}: directory {} does not exist",
                path.display(),
                d.display()
            )),
            _ => sqlite_err(path, "cannot open the database file", e),
        }
    })?;
    conn.busy_timeout(SQLITE_BUSY_TIMEOUT)
        .map_err(|e| sqlite_err(path, "setting busy_timeout", e))?;
    // WAL is a property of the file: set once, by the first connection. Switching needs an
    // exclusive lock, and SQLite reports BUSY at once (without its busy handler) when another
    // connection holds a lock during the switch, so retry for as long as the busy timeout.
    let deadline = Instant::now() + SQLITE_BUSY_TIMEOUT;
    let mode: String = loop {
        let r = conn.pragma_query_value(None, "journal_mode", |r| r.get::<_, String>(0));
        let r = match r {
            Ok(m) if m.eq_ignore_ascii_case("wal") => Ok(m),
            Ok(_) => conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0)),
            Err(e) => Err(e),
        };
        match r {
            Err(e) if is_busy(&e) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            r => break r.map_err(|e| sqlite_err(path, "setting journal_mode=WAL", e))?,
        }
    };
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(DbError(format!(
            "SQLite {}: the file system refused WAL mode (journal_mode is {mode}); put the \
             database on a local file system",
            path.display()
        )));
    }
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(|e| sqlite_err(path, "setting synchronous=NORMAL", e))?;
    Ok(conn)
}

const SQLITE_SCHEMA: &str = "CREATE TABLE IF NOT EXISTS subscriber (
    id INTEGER PRIMARY KEY,
    msisdn TEXT NOT NULL,
    imsi TEXT NOT NULL,
    imei TEXT NOT NULL,
    device TEXT NOT NULL,
    services TEXT NOT NULL,
    updated_at INTEGER NOT NULL
)";
const SQLITE_READ: &str = "SELECT id, msisdn, imsi, imei, device, services, updated_at \
                           FROM subscriber WHERE id = ?1";
const SQLITE_INSERT: &str = "INSERT INTO subscriber (msisdn, imsi, imei, device, services, \
                             updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)";

/// Creates and fills the table when needed (in one `BEGIN IMMEDIATE` transaction, so a second
/// process opening the same file waits and then finds it filled); returns the id range.
fn sqlite_setup(conn: &mut rusqlite::Connection, path: &Path) -> Result<(i64, i64), DbError> {
    use rusqlite::TransactionBehavior::Immediate;
    let err = |what: &'static str| move |e| sqlite_err(path, what, e);
    let tx = conn
        .transaction_with_behavior(Immediate)
        .map_err(err("starting the set-up transaction"))?;
    tx.execute_batch(SQLITE_SCHEMA)
        .map_err(err("creating table subscriber"))?;
    // The statements of read and write must compile against the table as it is.
    for sql in [SQLITE_READ, SQLITE_INSERT] {
        tx.prepare(sql).map_err(|e| {
            DbError(format!(
                "SQLite {}: table subscriber does not have the expected columns (id, \
                 {COLUMNS}): {}; remove the file or point the server at another one",
                path.display(),
                chain(&e)
            ))
        })?;
    }
    let any: bool = tx
        .query_row("SELECT EXISTS (SELECT 1 FROM subscriber)", [], |r| r.get(0))
        .map_err(err("counting subscribers"))?;
    if !any {
        let now = unix_now();
        let mut ins = tx
            .prepare(SQLITE_INSERT)
            .map_err(err("preparing the insert"))?;
        for k in 1..=u64::from(SEED_ROWS) {
            let s = Subscriber::new(k, now);
            ins.execute(rusqlite::params![
                s.msisdn,
                s.imsi,
                s.imei,
                s.device,
                s.services,
                s.updated_at
            ])
            .map_err(err("filling table subscriber"))?;
        }
    }
    let range: (Option<i64>, Option<i64>) = tx
        .query_row("SELECT min(id), max(id) FROM subscriber", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .map_err(err("reading the id range"))?;
    tx.commit().map_err(err("committing the set-up"))?;
    Ok((range.0.unwrap_or(1), range.1.unwrap_or(1)))
}

fn open_sqlite(path: &str, pool: usize) -> Result<PooledDb<SqliteConn>, DbError> {
    if path.is_empty() || path == ":memory:" || path.starts_with("file::memory:") {
        return Err(DbError(format!(
            "sqlite:{path}: give the path of a database file (created when missing), e.g. \
             sqlite:/tmp/headroom.db; an in-memory database would be a different empty \
             database for each pooled connection"
        )));
    }
    let path = PathBuf::from(path);
    let mut first = sqlite_connect(&path)?;
    let (min_id, max_id) = sqlite_setup(&mut first, &path)?;
    let mut conns = vec![SqliteConn { conn: first }];
    for _ in 1..pool {
        conns.push(SqliteConn {
            conn: sqlite_connect(&path)?,
        });
    }
    Ok(PooledDb::new(conns, min_id, max_id))
}

impl Conn for SqliteConn {
    fn read_one(&mut self, id: i64) -> Result<bool, DbError> {
        let run = || -> rusqlite::Result<bool> {
            let mut st = self.conn.prepare_cached(SQLITE_READ)?;
            let mut rows = st.query([id])?;
            match rows.next()? {
                Some(row) => {
                    // Take every column, as a client would.
                    for i in 0..7 {
                        row.get_ref(i)?;
                    }
                    Ok(true)
                }
                None => Ok(false),
            }
        };
        run().map_err(|e| DbError(format!("SQLite read failed: {}", chain(&e))))
    }

    fn insert_one(&mut self, s: &Subscriber) -> Result<i64, DbError> {
        let run = || -> rusqlite::Result<i64> {
            let mut st = self.conn.prepare_cached(SQLITE_INSERT)?;
            st.execute(rusqlite::params![
                s.msisdn,
                s.imsi,
                s.imei,
                s.device,
                s.services,
                s.updated_at
            ])?;
            Ok(self.conn.last_insert_rowid())
        };
        run().map_err(|e| DbError(format!("SQLite insert failed: {}", chain(&e))))
    }
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL

/// Where to connect, and how to name it in messages (never with the password).
struct PgTarget {
    config: pgclient::Config,
    /// `user@host:port/db`
    name: String,
    /// `host:port`
    addr: String,
}

struct PgConn {
    target: Arc<PgTarget>,
    client: pgclient::Client,
    read: pgclient::Statement,
    insert: pgclient::Statement,
}

const PG_SCHEMA: &str = "CREATE TABLE IF NOT EXISTS subscriber (
    id BIGSERIAL PRIMARY KEY,
    msisdn TEXT NOT NULL,
    imsi TEXT NOT NULL,
    imei TEXT NOT NULL,
    device TEXT NOT NULL,
    services TEXT NOT NULL,
    updated_at BIGINT NOT NULL
)";
const PG_READ: &str = "SELECT id, msisdn, imsi, imei, device, services, updated_at \
                        FROM subscriber WHERE id = $1";
const PG_INSERT: &str = "INSERT INTO subscriber (msisdn, imsi, imei, device, services, \
                         updated_at) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id";
/// Key of the advisory lock that serializes the set-up of concurrent openers.
const PG_SETUP_LOCK: i64 = 0x6865_6164_726f_6f6d; // "headroom"

fn pg_target(url: &str) -> Result<PgTarget, DbError> {
    let mut config = pgclient::Config::parse(url).map_err(|e| {
        DbError(format!(
            "invalid PostgreSQL URL {:?}: {e}; expected \
             postgres://USER:PASSWORD@HOST:PORT/DATABASE",
            redact(url),
        ))
    })?;
    if config.connect_timeout.is_none() {
        config.connect_timeout = Some(PG_CONNECT_TIMEOUT);
    }
    if config.application_name.is_none() {
        config.application_name = Some("headroom-serve".into());
    }
    let addr = config.addr();
    let db = if config.dbname.is_empty() {
        config.user.clone()
    } else {
        config.dbname.clone()
    };
    Ok(PgTarget {
        name: format!("{}@{addr}/{db}", config.user),
        addr,
        config,
    })
}

/// A message a person can act on, for an error of connecting to or talking with `t`.
fn pg_err(t: &PgTarget, what: &str, e: &pgclient::Error) -> DbError {
    const START: &str = "start it with scripts/postgres.sh start (or check the --db URL)";
    match e {
        pgclient::Error::Db { code, message, .. } => {
            let hint = match code.as_str() {
                // invalid_password, invalid_authorization_specification
                "28P01" | "28000" => {
                    " — check the user and password in the URL (scripts/postgres.sh url prints \
                     the right one for the test server)"
                }
                // invalid_catalog_name
                "3D000" => " — create the database, or name an existing one in the URL",
                // too_many_connections
                "53300" => " — use a smaller --db-pool, or raise the server's max_connections",
                // cannot_connect_now
                "57P03" => " — the server is starting or stopping; try again",
                _ => "",
            };
            DbError(format!(
                "PostgreSQL {}: {what}: {message} (SQLSTATE {code}){hint}",
                t.name
            ))
        }
        pgclient::Error::Io(io) => {
            use std::io::ErrorKind::*;
            let why = match io.kind() {
                ConnectionRefused => Some("connection refused"),
                TimedOut | WouldBlock => Some("timed out"),
                NotFound => Some("no such socket"),
                _ => None,
            };
            match why {
                Some(why) => DbError(format!(
                    "cannot connect to PostgreSQL at {}: {why} — {START}",
                    t.addr
                )),
                None => DbError(format!("PostgreSQL {}: {what}: {io}", t.name)),
            }
        }
        pgclient::Error::Protocol(m) => DbError(format!("PostgreSQL {}: {what}: {m}", t.name)),
    }
}

impl PgConn {
    fn connect(target: &Arc<PgTarget>) -> Result<Self, DbError> {
        let t = target.as_ref();
        let mut client =
            pgclient::Client::connect(&t.config).map_err(|e| pg_err(t, "cannot connect", &e))?;
        let (read, insert) = pg_prepare(&mut client, t)?;
        Ok(PgConn {
            target: Arc::clone(target),
            client,
            read,
            insert,
        })
    }
}

/// Prepares the read and the insert, and checks that the table has the columns they need.
fn pg_prepare(
    client: &mut pgclient::Client,
    t: &PgTarget,
) -> Result<(pgclient::Statement, pgclient::Statement), DbError> {
    use pgclient::{INT8, TEXT};
    let mismatch = |why: String| {
        DbError(format!(
            "PostgreSQL {}: table subscriber does not have the expected columns (id BIGINT, \
             {COLUMNS}, all TEXT but updated_at BIGINT): {why}; drop it or use another database",
            t.name
        ))
    };
    let mut prep = |name: &str, sql: &str| {
        client.prepare(name, sql).map_err(|e| match e {
            pgclient::Error::Db {
                message,
                fatal: false,
                ..
            } => mismatch(message),
            e => pg_err(t, "preparing statements", &e),
        })
    };
    let read = prep("headroom_read", PG_READ)?;
    let insert = prep("headroom_insert", PG_INSERT)?;
    let want = [INT8, TEXT, TEXT, TEXT, TEXT, TEXT, INT8];
    let got: Vec<u32> = read.columns.iter().map(|c| c.1).collect();
    if read.params != [INT8] || got != want || insert.params != want[1..] {
        return Err(mismatch(format!(
            "its types are {:?}",
            read.columns
                .iter()
                .map(|(name, oid)| format!("{name} {}", pgclient::type_name(*oid)))
                .collect::<Vec<_>>()
        )));
    }
    Ok((read, insert))
}

/// The first column of the first row, as an integer (`None`: NULL or no row).
fn first_i64(rows: &[Vec<pgclient::Value>]) -> Option<i64> {
    let v = rows.first()?.first()?.as_deref()?;
    std::str::from_utf8(v).ok()?.parse().ok()
}

/// Creates and fills the table when needed, under an advisory lock; returns the id range.
fn pg_setup(t: &PgTarget) -> Result<(i64, i64), DbError> {
    let mut client =
        pgclient::Client::connect(&t.config).map_err(|e| pg_err(t, "cannot connect", &e))?;
    let c = &mut client;
    c.simple("BEGIN")
        .map_err(|e| pg_err(t, "starting the set-up transaction", &e))?;
    c.simple(&format!("SELECT pg_advisory_xact_lock({PG_SETUP_LOCK})"))
        .map_err(|e| pg_err(t, "taking the set-up lock", &e))?;
    c.simple(PG_SCHEMA)
        .map_err(|e| pg_err(t, "creating table subscriber", &e))?;
    pg_prepare(c, t)?;
    let any = c
        .simple("SELECT EXISTS (SELECT 1 FROM subscriber)")
        .map_err(|e| pg_err(t, "counting subscribers", &e))?;
    if any
        .first()
        .and_then(|r| r.first())
        .and_then(|v| v.as_deref())
        != Some(b"t")
    {
        let now = unix_now();
        let mut text = String::with_capacity(SEED_ROWS as usize * 80);
        for k in 1..=u64::from(SEED_ROWS) {
            let s = Subscriber::new(k, now);
            // None of the values holds a tab, newline or backslash: COPY text needs no escaping.
            text.push_str(&format!(
                "{}\t{}\t{}\t{}\t{}\t{}\n",
                s.msisdn, s.imsi, s.imei, s.device, s.services, s.updated_at
            ));
        }
        let copy = format!("COPY subscriber ({COLUMNS}) FROM STDIN");
        c.copy_in(&copy, text.as_bytes())
            .map_err(|e| pg_err(t, "filling table subscriber", &e))?;
    }
    let row = c
        .simple("SELECT min(id), max(id) FROM subscriber")
        .map_err(|e| pg_err(t, "reading the id range", &e))?;
    let min = first_i64(&row);
    let max = row
        .first()
        .and_then(|r| r.get(1))
        .and_then(|v| v.as_deref())
        .and_then(|v| std::str::from_utf8(v).ok()?.parse().ok());
    c.simple("COMMIT")
        .map_err(|e| pg_err(t, "committing the set-up", &e))?;
    Ok((min.unwrap_or(1), max.unwrap_or(1)))
}

fn open_postgres(url: &str, pool: usize) -> Result<PooledDb<PgConn>, DbError> {
    let target = Arc::new(pg_target(url)?);
    let (min_id, max_id) = pg_setup(&target)?;
    let mut conns = Vec::with_capacity(pool);
    for i in 0..pool {
        let c = PgConn::connect(&target).map_err(|e| {
            if i == 0 {
                e
            } else {
                DbError(format!("connection {} of {pool}: {e}", i + 1))
            }
        })?;
        conns.push(c);
    }
    Ok(PooledDb::new(conns, min_id, max_id))
}

impl Conn for PgConn {
    fn ready(&mut self) -> Result<(), DbError> {
        if self.client.is_closed() {
            *self = PgConn::connect(&self.target)?;
        }
        Ok(())
    }

    fn closed(&self) -> bool {
        self.client.is_closed()
    }

    fn read_one(&mut self, id: i64) -> Result<bool, DbError> {
        let id = id.to_string();
        self.client
            .query(&self.read, &[id.as_bytes()])
            .map(|rows| !rows.is_empty())
            .map_err(|e| pg_err(&self.target, "read failed", &e))
    }

    fn insert_one(&mut self, s: &Subscriber) -> Result<i64, DbError> {
        let updated_at = s.updated_at.to_string();
        let rows = self
            .client
            .query(
                &self.insert,
                &[
                    s.msisdn.as_bytes(),
                    s.imsi.as_bytes(),
                    s.imei.as_bytes(),
                    s.device.as_bytes(),
                    s.services.as_bytes(),
                    updated_at.as_bytes(),
                ],
            )
            .map_err(|e| pg_err(&self.target, "insert failed", &e))?;
        first_i64(&rows).ok_or_else(|| {
            DbError(format!(
                "PostgreSQL {}: insert failed: no id returned",
                self.target.name
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_passwords() {
        assert_eq!(
            redact("postgres://u:secret@h:1/db"),
            "postgres://u:***@h:1/db"
        );
        assert_eq!(redact("mysql://u@h/db"), "mysql://u@h/db");
        assert_eq!(redact("sqlite:/tmp/x"), "sqlite:/tmp/x");
        assert_eq!(redact("x://h/p@q"), "x://h/p@q");
    }

    #[test]
    fn subscribers_are_deterministic_and_copy_safe() {
        let a = Subscriber::new(42, 7);
        let b = Subscriber::new(42, 7);
        assert_eq!(
            (a.msisdn.as_str(), a.imsi.len(), a.imei.len()),
            ("46700000042", 15, 15)
        );
        assert_eq!((a.imei, a.device), (b.imei, b.device));
        for s in DEVICES.iter().chain(SERVICES.iter()) {
            assert!(!s.contains(['\t', '\n', '\\']));
        }
    }

    #[test]
    fn pool_hands_connections_out_in_arrival_order() {
        let pool = Arc::new(Pool::new(vec![0u32]));
        let held = pool.take();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut hs = Vec::new();
        for i in 0..4 {
            let (p, order) = (Arc::clone(&pool), Arc::clone(&order));
            hs.push(std::thread::spawn(move || {
                p.with(|_| {
                    lock(&order).push(i);
                    Ok(())
                })
            }));
            // Let thread i queue before thread i+1.
            while lock(&pool.state).waiters.len() < i + 1 {
                std::thread::yield_now();
            }
        }
        pool.give_back(held);
        for h in hs {
            h.join().unwrap().unwrap();
        }
        assert_eq!(*lock(&order), vec![0, 1, 2, 3]);
        assert_eq!(pool.stats().waits, 4);
    }
}
