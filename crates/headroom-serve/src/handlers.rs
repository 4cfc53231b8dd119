//! Running the slow routes ([`http::Slow`]): the part of a request that takes time or I/O, shared
//! by every architecture.
//!
//! The parser hands a slow request out in [`http::Batch::slow`]; the architecture then runs it
//! the way its model says and appends the response to its output:
//!
//! | route | blocking architectures | reactor | async |
//! |---|---|---|---|
//! | `/sleep/MS` | [`run_blocking`] (the thread sleeps) | a timer, then [`sleep_done`] | `tokio::time::sleep`, then [`sleep_done`] |
//! | `/cpu/US` | [`run_blocking`] (the handler thread computes) | [`run_blocking`] on the loop's thread (the whole loop waits) | [`run_blocking`] inline in the task (it holds its runtime worker; not `spawn_blocking`) |
//! | `/db/*`, `/file/*` | [`run_blocking`] (`/file` with sendfile(2)) | [`run_blocking`] on the loop's thread (the whole loop waits) | [`run_blocking`] in `spawn_blocking` |
//! | `/status`, `/metrics` | [`run_blocking`] | [`run_blocking`] | [`run_blocking`] (they never block) |
//!
//! Every response is complete and self-delimiting (`Content-Length`), carries the `Connection`
//! header the request called for ([`http::Slow::keep_alive`], [`http::Slow::http10`]) and has no
//! body for `HEAD`. Errors are responses, never panics: no database configured is 503, a failed
//! database call is 500 (counted in [`crate::ServerStats::db_errors`]), a missing file 404.
//! `/sleep` and `/cpu` cut short by a stop are 503.
//!
//! The counts of the request itself (`requests`) are the caller's, as for canned responses.

use std::fs::File;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::db::Db;
use crate::http::{self, Slow, SlowRoute};
use crate::{Arch, Control, Counters, ServerStats};

/// Largest file answered from memory ([`run_blocking`]); larger files get 500 there. The
/// blocking architectures send files with sendfile(2) and have no such limit.
pub const MAX_INLINE_FILE: u64 = 64 * 1024 * 1024;

/// How long a draining reactor worker may wait before it checks [`Ctx::stopping`] again (see
/// the contract at [`crate::RunningServer`]).
pub const DRAIN_POLL: Duration = Duration::from_millis(10);

/// What a slow request needs besides itself: the database, the docroot, and where `/status`
/// reads its counters. One per server, shared by its threads.
pub struct Ctx {
    pub(crate) db: Option<Arc<dyn Db>>,
    pub(crate) docroot: Option<PathBuf>,
    pub(crate) arch: Arch,
    /// `ServerConfig::workers` (shown in `/status` where the architecture uses it).
    pub(crate) workers: usize,
    pub(crate) counters: Arc<[Counters]>,
    pub(crate) control: Arc<Control>,
    /// The server speaks TLS (shown in `/status`).
    pub(crate) tls: bool,
    /// `/db/*` calls that failed (answered 500). Counted here, on the error path only, so that
    /// every architecture counts them the same way.
    db_errors: AtomicU64,
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("db", &self.db.as_ref().map(|d| d.pool_size()))
            .field("docroot", &self.docroot)
            .field("arch", &self.arch)
            .finish_non_exhaustive()
    }
}

impl Ctx {
    pub(crate) fn new(
        db: Option<Arc<dyn Db>>,
        docroot: Option<PathBuf>,
        arch: Arch,
        workers: usize,
        counters: Arc<[Counters]>,
        control: Arc<Control>,
        tls: bool,
    ) -> Ctx {
        Ctx {
            db,
            docroot,
            arch,
            workers,
            counters,
            control,
            tls,
            db_errors: AtomicU64::new(0),
        }
    }

    /// True while the server drains and has not been told to stop (see the contract at
    /// [`crate::RunningServer`]). False before a drain, and false again once `stop` was called.
    pub fn draining(&self) -> bool {
        self.control.draining() && !self.control.stopping()
    }

    /// True once the server was told to stop (directly, or at a drain's deadline).
    pub fn stopping(&self) -> bool {
        self.control.stopping()
    }

    /// The server's counters, as [`crate::RunningServer::stats`] returns them.
    pub(crate) fn stats(&self) -> ServerStats {
        let mut s = crate::sum_counters(&self.counters);
        s.db_errors = self.db_errors.load(Relaxed);
        s
    }
}

/// What running a slow request produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// The response's status code.
    pub status: u16,
}

/// Append a complete response to a slow request: head (see [`http::push_slow_head`]) and, unless
/// it is a `HEAD` request, `body`.
pub fn respond(out: &mut Vec<u8>, slow: &Slow, status: &str, content_type: &str, body: &[u8]) {
    http::push_slow_head(out, slow, status, content_type, body.len() as u64);
    if !slow.head {
        out.extend_from_slice(body);
    }
}

/// Run `slow` to completion on this thread, blocking as long as it takes (sleep, database call,
/// file read), and append its response to `out`.
///
/// `/sleep` sleeps on this thread (cut short with a 503 when the server stops); architectures
/// with timers answer it with [`sleep_done`] instead. `/cpu` computes on this thread
/// ([`burn_cpu`]; a 503 too if the server stops meanwhile). `/file` is read into `out` (at most
/// [`MAX_INLINE_FILE`]).
pub fn run_blocking(slow: &Slow, ctx: &Ctx, out: &mut Vec<u8>) -> Outcome {
    match &slow.route {
        SlowRoute::Sleep { ms } => {
            if ctx.control.sleep(Duration::from_millis(*ms)) {
                sleep_done(slow, ctx, out)
            } else {
                text(out, slow, 503, "server stopping\n")
            }
        }
        SlowRoute::Cpu { us } => match burn_cpu(*us, || ctx.stopping()) {
            Some(_) => {
                let mut body = [0u8; 40];
                let n = {
                    let mut w = &mut body[..];
                    let _ = writeln!(w, "cpu {us} us");
                    40 - w.len()
                };
                respond(out, slow, "200 OK", "text/plain", &body[..n]);
                Outcome { status: 200 }
            }
            None => text(out, slow, 503, "server stopping\n"),
        },
        SlowRoute::DbRead { n } => db_call(slow, ctx, out, *n, false),
        SlowRoute::DbWrite { n } => db_call(slow, ctx, out, *n, true),
        SlowRoute::File { path } => match open_file(ctx, path) {
            Err((code, msg)) => text(out, slow, code, msg),
            Ok((_, len)) if len > MAX_INLINE_FILE && !slow.head => text(
                out,
                slow,
                500,
                "file too large to serve from memory in this architecture\n",
            ),
            Ok((mut file, len)) => {
                let start = out.len();
                http::push_slow_head(out, slow, "200 OK", content_type(path), len);
                if slow.head {
                    return Outcome { status: 200 };
                }
                let body = out.len();
                out.resize(body + len as usize, 0);
                if file.read_exact(&mut out[body..]).is_err() {
                    // Shrunk or unreadable since the stat: nothing sent yet, so say so.
                    out.truncate(start);
                    return text(out, slow, 500, "cannot read file\n");
                }
                Outcome { status: 200 }
            }
        },
        SlowRoute::Status => {
            let body = status_json(ctx);
            respond(out, slow, "200 OK", "application/json", body.as_bytes());
            Outcome { status: 200 }
        }
        SlowRoute::Metrics => {
            let body = metrics_text(ctx);
            respond(
                out,
                slow,
                "200 OK",
                "text/plain; version=0.0.4; charset=utf-8",
                body.as_bytes(),
            );
            Outcome { status: 200 }
        }
    }
}

/// Mixing rounds of [`burn_cpu`] before its first clock read (about half a microsecond of work:
/// a round is 1 to 2 ns).
const FIRST_CHUNK: u64 = 256;
/// Fewest and most mixing rounds between two clock reads after the first. At most about 100 µs
/// of work, so that the clock's system call stays well under 1% of the time (it is system CPU,
/// and the route is about user CPU).
const MIN_CHUNK: u64 = 64;
const MAX_CHUNK: u64 = 1 << 16;

/// `/cpu/US`: keep the calling thread busy in user space until it has used `us` microseconds of
/// its own CPU time (`CLOCK_THREAD_CPUTIME_ID`, so a thread that is preempted meanwhile still
/// does all of its work), and return the mixing rounds done.
///
/// The work is a xorshift64 generator folded into an FNV-1a style hash: dependent integer
/// arithmetic on two registers, no memory traffic, nothing the compiler can skip (the state goes
/// through [`std::hint::black_box`]). The only system call is the clock read between chunks of
/// rounds; each chunk is sized from the rate measured so far to end near the target (the first
/// one is a few hundred rounds, so `/cpu/1` takes a few microseconds, not a chunk's worth).
///
/// Bounded in wall time as well: it stops after 10 × `us` microseconds of wall time whatever
/// CPU it got (a thread starved by a busy machine does less work, but always answers). Without
/// a thread CPU clock, wall time stands in for CPU time. `stop` is asked between chunks (keep it
/// cheap: an atomic load); `None` when it said yes before the work was done.
pub fn burn_cpu(us: u64, stop: impl Fn() -> bool) -> Option<u64> {
    let want = Duration::from_micros(us);
    let wall_cap = want.saturating_mul(10);
    let wall0 = Instant::now();
    let cpu0 = crate::sys::thread_cpu_time();
    let spent = || match (cpu0, crate::sys::thread_cpu_time()) {
        (Some(a), Some(b)) => b.saturating_sub(a),
        _ => wall0.elapsed(),
    };
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15 ^ us;
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    let mut rounds = 0u64;
    let mut chunk = FIRST_CHUNK;
    loop {
        for _ in 0..chunk {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            h = (h ^ x).wrapping_mul(0x0000_0100_0000_01B3);
        }
        (x, h) = std::hint::black_box((x, h));
        rounds += chunk;
        let cpu = spent();
        if cpu >= want || wall0.elapsed() >= wall_cap {
            std::hint::black_box(h);
            return Some(rounds);
        }
        if stop() {
            return None;
        }
        // Rounds left at the rate so far; doubling while the clock has not moved yet.
        let left = (want - cpu).as_nanos();
        chunk = match (left * u128::from(rounds)).checked_div(cpu.as_nanos()) {
            Some(n) => u64::try_from(n).unwrap_or(MAX_CHUNK),
            None => chunk.saturating_mul(2),
        }
        .clamp(MIN_CHUNK, MAX_CHUNK);
    }
}

/// Append the response of a `/sleep/MS` whose time is up (the caller waited: a timer, an
/// `await`). Any other route is run with [`run_blocking`].
pub fn sleep_done(slow: &Slow, ctx: &Ctx, out: &mut Vec<u8>) -> Outcome {
    match slow.route {
        SlowRoute::Sleep { ms } => {
            let mut body = [0u8; 40];
            let n = {
                let mut w = &mut body[..];
                let _ = writeln!(w, "slept {ms} ms");
                40 - w.len()
            };
            respond(out, slow, "200 OK", "text/plain", &body[..n]);
            Outcome { status: 200 }
        }
        _ => run_blocking(slow, ctx, out),
    }
}

/// Blocking architectures: like [`run_blocking`], but a `/file` body goes straight from the page
/// cache to the socket with sendfile(2). For `/file`, `out` (whatever it held, then the response
/// head) is written to `sock` first and left empty; otherwise the response is appended to `out`
/// as by [`run_blocking`]. An error means the connection is broken (part of a response may be
/// out): close it.
pub(crate) fn run_blocking_on(
    slow: &Slow,
    ctx: &Ctx,
    out: &mut Vec<u8>,
    sock: &TcpStream,
    write_timeout: Option<Duration>,
) -> io::Result<Outcome> {
    let SlowRoute::File { path } = &slow.route else {
        return Ok(run_blocking(slow, ctx, out));
    };
    if slow.head {
        return Ok(run_blocking(slow, ctx, out));
    }
    let (file, len) = match open_file(ctx, path) {
        Ok(f) => f,
        Err((code, msg)) => return Ok(text(out, slow, code, msg)),
    };
    http::push_slow_head(out, slow, "200 OK", content_type(path), len);
    // The send buffer may still be full of the responses before it: the same timeout.
    let mut stall = crate::WriteStall::new(write_timeout);
    let mut head = &out[..];
    while !head.is_empty() {
        match (&*sock).write(head) {
            Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
            Ok(n) => {
                head = &head[n..];
                stall.progressed();
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted || stall.retry(&e) => {}
            Err(e) => return Err(e),
        }
    }
    out.clear();
    sendfile_all(sock, &file, len, write_timeout)?;
    Ok(Outcome { status: 200 })
}

fn text(out: &mut Vec<u8>, slow: &Slow, code: u16, body: &str) -> Outcome {
    let status = match code {
        200 => "200 OK",
        400 => "400 Bad Request",
        403 => "403 Forbidden",
        404 => "404 Not Found",
        500 => "500 Internal Server Error",
        _ => "503 Service Unavailable",
    };
    respond(out, slow, status, "text/plain", body.as_bytes());
    Outcome { status: code }
}

fn db_call(slow: &Slow, ctx: &Ctx, out: &mut Vec<u8>, n: u32, write: bool) -> Outcome {
    let Some(db) = &ctx.db else {
        return text(out, slow, 503, "no database configured (--db)\n");
    };
    let result = if write { db.write(n) } else { db.read(n) };
    match result {
        Ok(rows) => {
            let verb = if write { "wrote" } else { "read" };
            text(out, slow, 200, &format!("{verb} {rows}\n"))
        }
        Err(e) => {
            ctx.db_errors.fetch_add(1, Relaxed);
            text(out, slow, 500, &format!("database error: {e}\n"))
        }
    }
}

/// Open `path` under the docroot: the file and its length, or the status and body to answer.
/// `path` was checked by the parser (relative, no `..`); symbolic links inside the docroot are
/// followed, as web servers do by default.
fn open_file(ctx: &Ctx, path: &str) -> Result<(File, u64), (u16, &'static str)> {
    let Some(root) = &ctx.docroot else {
        return Err((404, "not found (no docroot configured)\n"));
    };
    let full = root.join(Path::new(path));
    let file = File::open(&full).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory => (404, "not found\n"),
        io::ErrorKind::PermissionDenied => (403, "forbidden\n"),
        _ => (500, "cannot open file\n"),
    })?;
    let meta = file.metadata().map_err(|_| (500, "cannot stat file\n"))?;
    if !meta.is_file() {
        return Err((404, "not found\n"));
    }
    Ok((file, meta.len()))
}

/// `Content-Type` by file extension (case-insensitive); `application/octet-stream` otherwise.
pub fn content_type(path: &str) -> &'static str {
    let ext = match path.rsplit_once('.') {
        Some((_, ext)) if !ext.contains('/') => ext,
        _ => "",
    };
    const TYPES: [(&str, &str); 9] = [
        ("html", "text/html"),
        ("htm", "text/html"),
        ("txt", "text/plain"),
        ("css", "text/css"),
        ("js", "text/javascript"),
        ("json", "application/json"),
        ("png", "image/png"),
        ("jpg", "image/jpeg"),
        ("gif", "image/gif"),
    ];
    TYPES
        .iter()
        .find(|(e, _)| e.eq_ignore_ascii_case(ext))
        .map_or("application/octet-stream", |(_, t)| t)
}

/// The `/metrics` document: the `/status` counters in the Prometheus text exposition format
/// (version 0.0.4), for a lab's `monitor.prometheus` or any scraper.
pub fn metrics_text(ctx: &Ctx) -> String {
    use std::fmt::Write as _;
    let s = ctx.stats();
    let mut t = String::with_capacity(1024);
    let mut put = |name: &str, kind: &str, help: &str, v: u64| {
        let _ = write!(
            t,
            "# HELP headroom_{name} {help}\n# TYPE headroom_{name} {kind}\nheadroom_{name} {v}\n"
        );
    };
    put("connections_open", "gauge", "Connections open now.", s.open);
    put(
        "accepted_total",
        "counter",
        "Connections accepted.",
        s.accepted,
    );
    put("requests_total", "counter", "Responses sent.", s.requests);
    put(
        "bad_requests_total",
        "counter",
        "Requests the server could not serve (400, 431, 501).",
        s.bad_requests,
    );
    put(
        "errors_total",
        "counter",
        "I/O errors other than resets.",
        s.errors,
    );
    put(
        "accept_errors_total",
        "counter",
        "Failed accepts.",
        s.accept_errors,
    );
    put(
        "resets_total",
        "counter",
        "Connections reset by the client.",
        s.resets,
    );
    put(
        "timeouts_total",
        "counter",
        "Connections closed by a server timeout.",
        s.timeouts,
    );
    put(
        "rejected_total",
        "counter",
        "Connections refused at --max-conns.",
        s.rejected,
    );
    put(
        "db_errors_total",
        "counter",
        "Failed database calls.",
        s.db_errors,
    );
    put(
        "tls_handshakes_total",
        "counter",
        "TLS handshakes completed.",
        s.tls_handshakes,
    );
    put(
        "tls_resumed_total",
        "counter",
        "Of the TLS handshakes, resumed ones.",
        s.tls_resumed,
    );
    put(
        "tls_handshake_failures_total",
        "counter",
        "TLS connections that ended before their handshake completed.",
        s.tls_handshake_failures,
    );
    t
}

/// The `/status` document: the architecture and the counters (a snapshot: counters are
/// published once per round, so it may lag by one).
pub fn status_json(ctx: &Ctx) -> String {
    use std::fmt::Write as _;
    let s = ctx.stats();
    let mut j = String::with_capacity(512);
    let _ = write!(j, "{{\"arch\":\"{}\"", ctx.arch.name());
    let _ = match ctx.arch {
        Arch::ThreadPerConn => Ok(()),
        Arch::Pool { handlers } => write!(j, ",\"handlers\":{handlers}"),
        Arch::Reactor { poller } => write!(
            j,
            ",\"poller\":\"{}\",\"workers\":{}",
            poller.name(),
            ctx.workers
        ),
        Arch::Async { runtime } => {
            let workers = match runtime {
                crate::Runtime::CurrentThread => 1,
                crate::Runtime::Multi => ctx.workers,
            };
            write!(
                j,
                ",\"runtime\":\"{}\",\"workers\":{workers}",
                runtime.name()
            )
        }
    };
    let _ = write!(
        j,
        ",\"open\":{},\"accepted\":{},\"requests\":{},\"bad_requests\":{},\"errors\":{},\
         \"accept_errors\":{},\"resets\":{},\"timeouts\":{},\"rejected\":{},\"db_errors\":{},\
         \"tls\":{},\"tls_handshakes\":{},\"tls_resumed\":{},\"tls_handshake_failures\":{}",
        s.open,
        s.accepted,
        s.requests,
        s.bad_requests,
        s.errors,
        s.accept_errors,
        s.resets,
        s.timeouts,
        s.rejected,
        s.db_errors,
        ctx.tls,
        s.tls_handshakes,
        s.tls_resumed,
        s.tls_handshake_failures
    );
    if let Some(db) = &ctx.db {
        let _ = write!(j, ",\"db_pool\":{}", db.pool_size());
    }
    let _ = write!(j, ",\"draining\":{}", ctx.draining());
    j.push_str(",\"worker_requests\":[");
    for (i, c) in ctx.counters.iter().enumerate() {
        if i > 0 {
            j.push(',');
        }
        let _ = write!(j, "{}", c.requests());
    }
    j.push_str("]}\n");
    j
}

/// Send `len` bytes of `file` (from its start) to `sock` with sendfile(2).
/// `sendfile(2)` the whole file; the socket's `SO_SNDTIMEO` bounds each call and
/// [`crate::WriteStall`] the time without progress.
fn sendfile_all(
    sock: &TcpStream,
    file: &File,
    len: u64,
    write_timeout: Option<Duration>,
) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let mut stall = crate::WriteStall::new(write_timeout);
    let mut offset: libc::off_t = 0;
    let mut left = len;
    while left > 0 {
        let chunk = left.min(1 << 30) as usize;
        // SAFETY: both descriptors are open for the duration of the call (borrowed from live
        // objects); `offset` is a valid off_t the kernel updates.
        let n = unsafe { libc::sendfile(sock.as_raw_fd(), file.as_raw_fd(), &mut offset, chunk) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted || stall.retry(&e) {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            // The file shrank under us; the promised Content-Length cannot be kept.
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "file shrank while being sent",
            ));
        }
        left -= n as u64;
        stall.progressed();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(docroot: Option<PathBuf>) -> Ctx {
        Ctx::new(
            None,
            docroot,
            Arch::Pool { handlers: 2 },
            1,
            (0..2).map(|_| Counters::default()).collect(),
            Arc::new(Control::default()),
            false,
        )
    }

    fn slow(route: SlowRoute) -> Slow {
        Slow {
            route,
            keep_alive: true,
            head: false,
            http10: false,
        }
    }

    fn text_of(out: &[u8]) -> String {
        String::from_utf8_lossy(out).into_owned()
    }

    #[test]
    fn content_types() {
        assert_eq!(content_type("a/b.HTML"), "text/html");
        assert_eq!(content_type("x.json"), "application/json");
        assert_eq!(content_type("x.jpg"), "image/jpeg");
        assert_eq!(content_type("x.tar.gz"), "application/octet-stream");
        assert_eq!(content_type("dir.d/noext"), "application/octet-stream");
        assert_eq!(content_type("noext"), "application/octet-stream");
    }

    #[test]
    fn sleep_and_db_without_database() {
        let c = ctx(None);
        let mut out = Vec::new();
        let t = std::time::Instant::now();
        let o = run_blocking(&slow(SlowRoute::Sleep { ms: 20 }), &c, &mut out);
        assert!(t.elapsed() >= Duration::from_millis(20));
        assert_eq!(o.status, 200);
        assert_eq!(
            text_of(&out),
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 12\r\n\r\nslept 20 ms\n"
        );
        out.clear();
        let mut s = slow(SlowRoute::DbRead { n: 3 });
        s.keep_alive = false;
        assert_eq!(run_blocking(&s, &c, &mut out).status, 503);
        assert!(text_of(&out).contains("Connection: close\r\n"));
    }

    #[test]
    fn sleep_is_cut_short_by_stop() {
        let c = ctx(None);
        let control = Arc::clone(&c.control);
        let stopper = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            control.begin_stop();
        });
        let t = std::time::Instant::now();
        let mut out = Vec::new();
        let o = run_blocking(&slow(SlowRoute::Sleep { ms: 60_000 }), &c, &mut out);
        assert!(t.elapsed() < Duration::from_secs(5));
        assert_eq!(o.status, 503);
        stopper.join().unwrap();
    }

    #[test]
    fn burn_cpu_uses_the_cpu_asked_for_in_user_space() {
        let cpu0 = crate::sys::thread_cpu_time().expect("thread CPU clock");
        let user0 = crate::sys::thread_user_time();
        let t = Instant::now();
        let rounds = burn_cpu(20_000, || false).expect("not stopped");
        let wall = t.elapsed();
        let cpu = crate::sys::thread_cpu_time().unwrap() - cpu0;
        let user = crate::sys::thread_user_time() - user0;
        assert!(cpu >= Duration::from_millis(15), "cpu {cpu:?}");
        assert!(wall < Duration::from_secs(1), "wall {wall:?}");
        // Tick-sampled, so only roughly: most of it in user space.
        assert!(
            user >= Duration::from_millis(10),
            "user {user:?} of cpu {cpu:?}"
        );
        assert!(rounds > FIRST_CHUNK, "{rounds} rounds");
        // The smallest amount is a few microseconds, not a chunk's worth.
        let t = Instant::now();
        assert!(burn_cpu(1, || false).is_some());
        assert!(t.elapsed() < Duration::from_millis(50), "{:?}", t.elapsed());
    }

    #[test]
    fn burn_cpu_stops_when_told() {
        let t = Instant::now();
        assert_eq!(burn_cpu(1_000_000, || true), None);
        assert!(
            t.elapsed() < Duration::from_millis(100),
            "{:?}",
            t.elapsed()
        );
    }

    #[test]
    fn cpu_route_answers_and_is_cut_short_by_stop() {
        let c = ctx(None);
        let mut out = Vec::new();
        let o = run_blocking(&slow(SlowRoute::Cpu { us: 1000 }), &c, &mut out);
        assert_eq!(o.status, 200);
        assert_eq!(
            text_of(&out),
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 12\r\n\r\ncpu 1000 us\n"
        );
        out.clear();
        let mut s = slow(SlowRoute::Cpu { us: 1 });
        s.keep_alive = false;
        s.head = true;
        assert_eq!(run_blocking(&s, &c, &mut out).status, 200);
        assert!(
            text_of(&out).ends_with("Content-Length: 9\r\nConnection: close\r\n\r\n"),
            "{}",
            text_of(&out)
        );
        out.clear();
        c.control.begin_stop();
        let t = Instant::now();
        let o = run_blocking(&slow(SlowRoute::Cpu { us: 1_000_000 }), &c, &mut out);
        assert_eq!(o.status, 503);
        assert!(
            t.elapsed() < Duration::from_millis(100),
            "{:?}",
            t.elapsed()
        );
    }

    #[test]
    fn files_from_the_docroot() {
        let dir = std::env::temp_dir().join(format!("headroom-handlers-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/a.css"), b"body{}").unwrap();
        let c = ctx(Some(dir.clone()));
        let mut out = Vec::new();
        let path = |p: &str| SlowRoute::File { path: p.into() };
        assert_eq!(
            run_blocking(&slow(path("sub/a.css")), &c, &mut out).status,
            200
        );
        assert!(
            text_of(&out).ends_with("Content-Type: text/css\r\nContent-Length: 6\r\n\r\nbody{}")
        );
        out.clear();
        let mut head = slow(path("sub/a.css"));
        head.head = true;
        run_blocking(&head, &c, &mut out);
        assert!(text_of(&out).ends_with("Content-Length: 6\r\n\r\n"));
        out.clear();
        assert_eq!(
            run_blocking(&slow(path("missing")), &c, &mut out).status,
            404
        );
        assert_eq!(run_blocking(&slow(path("sub")), &c, &mut out).status, 404);
        assert_eq!(
            run_blocking(&slow(path("sub/a.css/x")), &c, &mut out).status,
            404
        );
        let none = ctx(None);
        assert_eq!(
            run_blocking(&slow(path("sub/a.css")), &none, &mut out).status,
            404
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn metrics_are_prometheus_text() {
        let c = ctx(None);
        let mut out = Vec::new();
        run_blocking(&slow(SlowRoute::Metrics), &c, &mut out);
        let t = text_of(&out);
        assert!(t.contains("Content-Type: text/plain; version=0.0.4"), "{t}");
        let body = &t[t.find("\r\n\r\n").unwrap() + 4..];
        assert!(
            body.contains("# TYPE headroom_requests_total counter\n"),
            "{body}"
        );
        assert!(body.contains("\nheadroom_connections_open 0\n"), "{body}");
        // Every line is a comment or `name value`.
        for line in body.lines().filter(|l| !l.starts_with('#')) {
            let (name, v) = line.split_once(' ').unwrap();
            assert!(
                name.starts_with("headroom_") && v.parse::<u64>().is_ok(),
                "{line}"
            );
        }
    }

    #[test]
    fn status_is_json_with_the_arch() {
        let c = ctx(None);
        let mut out = Vec::new();
        run_blocking(&slow(SlowRoute::Status), &c, &mut out);
        let t = text_of(&out);
        assert!(t.contains("Content-Type: application/json\r\n"));
        let body = &t[t.find("\r\n\r\n").unwrap() + 4..];
        assert!(
            body.starts_with("{\"arch\":\"pool\",\"handlers\":2,\"open\":0,"),
            "{body}"
        );
        assert!(body.ends_with("\"worker_requests\":[0,0]}\n"), "{body}");
    }
}
