//! The reference servers that headroom loads: servers whose architecture is known, so that a
//! study can compare architectures (and pollers, and worker counts, and runtimes) on one machine.
//! [`start`] runs one of them from a [`ServerConfig`]; every architecture serves the same routes
//! through the same pure request parser ([`http::InputState`]) and the same handlers for the slow
//! routes ([`handlers`]), so that only the architecture differs between two runs.
//!
//! # The architectures, and when a user would care
//!
//! - **Thread per connection** ([`Arch::ThreadPerConn`]): one acceptor thread and one OS thread
//!   per accepted connection, blocking in `read` and `write` — the multithreaded Apache model
//!   (seed 004). Simple, and every request can block (sleep, database, disk) without hurting
//!   anyone else; what it costs is a thread (stack, scheduler entry, a 64 KiB read buffer here)
//!   per *connection*, idle or not. Care when comparing "thousands of threads" against an event
//!   loop: memory and context switches grow with connections, not with load.
//! - **A pool of N handlers** ([`Arch::Pool`]): N threads each blocking in `accept` on the shared
//!   listener and serving one connection until it closes (rudy, seed 002). With more clients
//!   than handlers the rest wait in the kernel's listen backlog, so throughput is N / (service
//!   time) and latency grows with the queue: the server to show pool exhaustion and why a
//!   keep-alive client can starve everyone else. Care when sizing a worker pool (Apache
//!   prefork's `MaxRequestWorkers`, a servlet container's thread pool).
//! - **A reactor** ([`Arch::Reactor`]): `workers` event loops, each with its own listener and its
//!   own poll set over select(2), poll(2) or epoll(7) — the kernel-poll factor of seed 000, and
//!   nginx's model. Idle connections cost a few hundred bytes, not a thread; a poller whose cost
//!   grows with the number of watched descriptors (select, poll) shows in system CPU as
//!   connections grow, epoll does not. Blocking work (`/db`, `/file`) and CPU work (`/cpu`)
//!   stall every connection of its worker: care when a "fast" event loop calls blocking code.
//! - **An async runtime** ([`Arch::Async`]): tokio, one `current_thread` runtime or a
//!   multi-thread runtime with `workers` workers; a task per connection; `/sleep` awaits a
//!   timer, `/cpu` computes inline on the runtime worker, `/db` and `/file` go to
//!   `spawn_blocking`, so the database pool (not the runtime)
//!   bounds how many run at once — the SMP disabled / one scheduler / all cores factor of seed
//!   003. Care when choosing a runtime flavour or worker count for a service that mixes cheap
//!   requests with blocking I/O.
//!
//! # The reactor, and why it is built this way
//!
//! - **N workers, each with its own poll set and its own listening socket**, all bound to one
//!   address with `SO_REUSEPORT`. The kernel spreads incoming connections over the listeners (by
//!   a hash of the 4-tuple), so there is no shared accept queue to fight over (no thundering
//!   herd, no `EPOLLEXCLUSIVE`), and a connection lives its whole life on one thread: no locks,
//!   no cross-thread wake-ups, nothing shared but a few relaxed counters published once per
//!   wait.
//! - **Edge-triggered, registered once** (epoll). A connection is added for `EPOLLIN |
//!   EPOLLRDHUP` when accepted and modified only while a response could not be written whole
//!   (then `EPOLLOUT` is added until the tail drains). The steady state of a keep-alive request
//!   is therefore `epoll_wait` + one `read` + one `write`: no `epoll_ctl` per request, and no
//!   read that ends in `EAGAIN` when the first read came back short (a short read on a stream
//!   socket means the receive queue is empty; a later arrival raises a new edge).
//! - **No per-connection buffer while idle.** Each worker reads into one scratch buffer and
//!   parses the requests in place; only an incomplete request's bytes (or an unsent response
//!   tail) are copied into a per-connection `Vec`, allocated when needed and freed when emptied.
//!   An idle connection costs its small state in a slab plus the kernel's socket, which is what
//!   lets a worker hold tens of thousands of them (see DESIGN.md, "Measured facts").
//! - **One write per read.** Every complete request in what one read returned (pipelining) is
//!   answered in order, the responses appended to a per-worker output buffer and written with one
//!   `write`. Responses are encoded once at start-up; `/bytes/N` is one header plus a `memset`.
//!   When a client stops reading, the server stops answering it (the output is capped per round
//!   at [`MAX_QUEUED_OUTPUT`], a `/bytes/N` body included, and parsing resumes only after the
//!   unsent tail drains), and closes it after [`ServerConfig::write_timeout`] without progress
//!   (every architecture).
//! - **Server-initiated closes linger**: after the last response the write side is shut down and
//!   input is discarded until the client closes, so a close never turns into a reset that could
//!   destroy the response (400 to garbage, `Connection: close`, HTTP/1.0). Every architecture
//!   does the same.
//! - **Stopping** writes one eventfd registered (level-triggered) in every worker's poll set, so
//!   [`RunningServer::stop`] wakes all workers at once, whatever their connections are doing.
//! - Running out of descriptors in `accept4` (EMFILE and friends) is counted and accepting pauses
//!   for 10 ms instead of spinning (every architecture).
//!
//! # Stopping and draining
//!
//! [`RunningServer::stop`] closes everything at once; [`RunningServer::drain`] stops accepting,
//! lets requests in flight finish, closes idle connections and returns when none is left (or
//! closes the rest at its deadline). The blocking architectures are woken out of `accept` and
//! `read` by `shutdown(2)` on the listener and on every open connection's socket (the
//! connections are tracked for that); the async one through a `watch` channel its tasks
//! select on; the reactor through its stop eventfd (see [`RunningServer`] for the contract).
//!
//! # TLS
//!
//! [`ServerConfig::tls`] puts rustls around the same request handling in every architecture (see
//! [`tls`]): a sans-I/O session between the socket and the parser in the reactor and the async
//! server, a blocking rustls stream after a timed handshake in the blocking ones. The plain path
//! is the code it was: a plain connection carries a `None` where a TLS one has its session.
//!
//! Nothing read from the network can panic a worker: the parser is [`http::InputState`], pure,
//! tested byte by byte and fuzzed (`fuzz/fuzz_targets/http1_request.rs`).
//!
//! # Files to serve
//!
//! [`surge`] writes a SURGE file set (heavy-tailed sizes, Zipf-ranked names) for `--docroot`, so
//! that a scenario's `surge` session finds files of the model's sizes (`headroom surge fileset`).

use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use slab::Slab;
use socket2::{Domain, Protocol, Socket, Type};

mod asyncrt;
mod blocking;
pub mod db;
pub mod handlers;
pub mod http;
mod pgclient;
mod poller;
mod reactor;
pub mod surge;
mod sys;
pub mod tls;

pub use tls::{TlsError, TlsServer, TlsSource};

/// Output queued per connection at most before the server waits for the socket to take it:
/// pipelined responses are answered until the output holds this much, and a `/bytes/N` body is
/// produced in pieces of at most this size (see [`http::InputState::has_backlog`]). One
/// response head, or one small canned response, may go beyond it; a `/file` response that is
/// read into memory (the reactor, the async server, TLS) is the exception, bounded by
/// [`handlers::MAX_INLINE_FILE`]. So a client that requests `/bytes/16777216` and never reads
/// holds at most this much of the server's memory (plus the kernel's socket buffers), and
/// only until the write timeout.
pub const MAX_QUEUED_OUTPUT: usize = 256 * 1024;

/// The write timeout of a blocking socket, kept as "no progress for T": `SO_SNDTIMEO` is set
/// to a quarter of T ([`WriteStall::sndtimeo`]), so a `write` or `sendfile` that moves no byte
/// returns `EAGAIN` at most T/4 after the last byte went, and [`WriteStall::retry`] says
/// whether T has passed since the last progress. (`SO_SNDTIMEO` = T alone would allow up to
/// 2T: a call that took some bytes and then waited T returns them, and only the next call's
/// wait of T fails.)
pub(crate) struct WriteStall {
    timeout: Option<Duration>,
    last: Instant,
}

impl WriteStall {
    pub(crate) fn new(timeout: Option<Duration>) -> WriteStall {
        WriteStall {
            timeout: timeout.filter(|t| !t.is_zero()),
            last: Instant::now(),
        }
    }

    /// The `SO_SNDTIMEO` for `timeout` (`None`: none): a quarter of it, at least 10 ms.
    pub(crate) fn sndtimeo(timeout: Option<Duration>) -> Option<Duration> {
        timeout
            .filter(|t| !t.is_zero())
            .map(|t| (t / 4).max(Duration::from_millis(10)))
    }

    /// Bytes went out: the timeout starts again.
    pub(crate) fn progressed(&mut self) {
        self.last = Instant::now();
    }

    /// `e` is the `EAGAIN` of `SO_SNDTIMEO` and the write timeout has not passed since the last
    /// progress: try the write again.
    pub(crate) fn retry(&self, e: &io::Error) -> bool {
        e.kind() == io::ErrorKind::WouldBlock
            && self.timeout.is_some_and(|t| self.last.elapsed() < t)
    }
}

/// Default of [`ServerConfig::write_timeout`] (nginx's `send_timeout` is 60 s too).
pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(60);

/// The header timeout the command line gives the blocking architectures (thread per
/// connection, pool) unless told otherwise: Apache's `RequestReadTimeout` starts at 20 s for a
/// head (nginx's `client_header_timeout` is 60 s, but nginx does not spend a thread on the
/// wait). Long enough for any real client, short enough that a slowloris frees a pool
/// handler.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(20);

/// Which server architecture to run: the factor the studies compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    /// One OS thread per connection (the multithreaded Apache model, seed 004).
    ThreadPerConn,
    /// `handlers` threads, each blocking in accept on the shared listener and serving one
    /// connection at a time (rudy, seed 002).
    Pool { handlers: usize },
    /// Event-driven: `ServerConfig::workers` event loops, each with its own poll set, over
    /// select(2), poll(2) or epoll(7) — the kernel-poll factor of seed 000.
    Reactor { poller: Poller },
    /// tokio, one `current_thread` runtime or a multi-thread runtime with
    /// `ServerConfig::workers` workers (the SMP disabled / one scheduler / all cores factor of
    /// seed 003).
    Async { runtime: Runtime },
}

impl Arch {
    /// The name used on the command line and in `/status`: `thread-per-conn`, `pool`,
    /// `reactor` or `async`.
    pub fn name(&self) -> &'static str {
        match self {
            Arch::ThreadPerConn => "thread-per-conn",
            Arch::Pool { .. } => "pool",
            Arch::Reactor { .. } => "reactor",
            Arch::Async { .. } => "async",
        }
    }
}

/// The readiness mechanism of a reactor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Poller {
    Select,
    Poll,
    Epoll,
}

impl Poller {
    /// `select`, `poll` or `epoll`.
    pub fn name(&self) -> &'static str {
        match self {
            Poller::Select => "select",
            Poller::Poll => "poll",
            Poller::Epoll => "epoll",
        }
    }
}

/// The tokio runtime flavour of [`Arch::Async`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    CurrentThread,
    Multi,
}

impl Runtime {
    /// `current-thread` or `multi`.
    pub fn name(&self) -> &'static str {
        match self {
            Runtime::CurrentThread => "current-thread",
            Runtime::Multi => "multi",
        }
    }
}

/// Where `/db/*` requests go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbConfig {
    /// `sqlite:PATH` or `postgres://user:pass@host:port/db`.
    pub url: String,
    /// Connections in the pool (requests wait for a free one).
    pub pool: usize,
}

/// What to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// Address to listen on; port 0 picks a free port (the same for every worker).
    pub listen: SocketAddr,
    pub arch: Arch,
    /// Event loops of a reactor, or worker threads of a multi-thread async runtime; at least 1.
    /// Ignored by the other architectures.
    pub workers: usize,
    /// Listen backlog (the kernel caps it at `net.core.somaxconn`).
    pub backlog: i32,
    /// Body of `GET /`.
    pub body: Vec<u8>,
    /// SO_SNDBUF / SO_RCVBUF of accepted connections (`None`: the kernel's autotuning). Set on
    /// the listener, whose accepted sockets inherit them (and before `listen`, so that the
    /// receive buffer's window scale counts).
    pub sndbuf: Option<u32>,
    pub rcvbuf: Option<u32>,
    /// TCP_NODELAY on accepted connections (inherited from the listener).
    pub nodelay: bool,
    /// Connections held at most; further ones are accepted and closed at once (counted in
    /// [`ServerStats::rejected`]).
    pub max_conns: Option<usize>,
    /// Close a keep-alive connection idle for this long between requests.
    pub idle_timeout: Option<Duration>,
    /// Close a connection whose request head is not complete this long after its first byte.
    /// `None` here; the command line gives the blocking architectures
    /// [`DEFAULT_HEADER_TIMEOUT`] (a slowloris holds one of their threads per connection).
    pub header_timeout: Option<Duration>,
    /// Close a connection whose queued output makes no progress for this long (the client
    /// stopped reading): every architecture. Default [`DEFAULT_WRITE_TIMEOUT`].
    pub write_timeout: Option<Duration>,
    /// Close a connection after this many requests (sending `Connection: close` on the last).
    pub keepalive_requests: Option<u64>,
    /// Directory served under `/file/PATH`; `None` answers 404.
    pub docroot: Option<PathBuf>,
    /// Database of `/db/read/N` and `/db/write/N`; `None` answers 503.
    pub db: Option<DbConfig>,
    /// Serve HTTP over TLS with this certificate (see [`tls`]); `None`: plain HTTP.
    pub tls: Option<TlsSource>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            arch: Arch::Reactor {
                poller: Poller::Epoll,
            },
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            backlog: 1024,
            body: b"hello from headroom\n".to_vec(),
            sndbuf: None,
            rcvbuf: None,
            nodelay: true,
            max_conns: None,
            idle_timeout: None,
            header_timeout: None,
            write_timeout: Some(DEFAULT_WRITE_TIMEOUT),
            keepalive_requests: None,
            docroot: None,
            db: None,
            tls: None,
        }
    }
}

impl ServerConfig {
    /// The canned responses for this configuration (body of `/`, keep-alive request limit).
    pub fn responses(&self) -> http::Responses {
        http::Responses::new(&self.body).keepalive_requests(self.keepalive_requests)
    }
}

/// Counters summed over the workers. Workers publish them once per event-loop round (blocking
/// architectures: once per read), so a snapshot may lag the network by one round.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Connections accepted (including those closed at once as `rejected`).
    pub accepted: u64,
    /// Responses sent (every status; a pipelined batch counts each response).
    pub requests: u64,
    /// Connections open now (accepted and not yet closed).
    pub open: u64,
    /// Of `requests`, error responses to requests the server could not serve (400, 431, 501).
    pub bad_requests: u64,
    /// I/O errors other than resets: failed accepts (EMFILE...) and connections ended by a
    /// socket error.
    pub errors: u64,
    /// Of `errors`, failed accepts; mostly running out of descriptors.
    pub accept_errors: u64,
    /// Connections reset by the client (ECONNRESET, or EPIPE on write) while being served.
    pub resets: u64,
    /// Connections closed by the idle, the header or the write timeout.
    pub timeouts: u64,
    /// Connections closed at once on accept: over `max_conns` (or, for select, a descriptor
    /// above FD_SETSIZE).
    pub rejected: u64,
    /// `/db/*` requests answered 500 because the database call failed.
    pub db_errors: u64,
    /// TLS handshakes completed (see [`tls`]).
    pub tls_handshakes: u64,
    /// Of `tls_handshakes`, resumed ones (a session ID or a ticket from an earlier connection).
    pub tls_resumed: u64,
    /// TLS connections that ended before their handshake completed: bytes that are not TLS
    /// (plain HTTP), an alert, a client that left, the handshake timeout.
    pub tls_handshake_failures: u64,
}

/// One worker's published counters, alone on its cache line.
#[derive(Debug, Default)]
#[repr(align(64))]
pub(crate) struct Counters {
    accepted: AtomicU64,
    closed: AtomicU64,
    requests: AtomicU64,
    bad_requests: AtomicU64,
    errors: AtomicU64,
    accept_errors: AtomicU64,
    resets: AtomicU64,
    timeouts: AtomicU64,
    rejected: AtomicU64,
    tls_handshakes: AtomicU64,
    tls_resumed: AtomicU64,
    tls_handshake_failures: AtomicU64,
}

impl Counters {
    /// Requests this worker has published.
    pub(crate) fn requests(&self) -> u64 {
        self.requests.load(Relaxed)
    }
}

/// What an accept(2) failure means for an accepting loop (one classification for every
/// architecture, so they count and back off alike).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AcceptFailure {
    /// Nothing queued right now (EAGAIN on a non-blocking listener).
    Empty,
    /// The connection died in the queue, or a signal interrupted: take the next one; not counted.
    Skip,
    /// A network error of that one connection: counted, and retried at once (accept(2) says to
    /// treat these like EAGAIN).
    Retry,
    /// The listener was shut down or is not a socket (any more): nothing more will come.
    Closed,
    /// Out of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM) or anything unexpected:
    /// counted; retrying now would fail the same way, so back off.
    Backoff,
}

pub(crate) fn classify_accept_error(e: &std::io::Error) -> AcceptFailure {
    match e.raw_os_error().unwrap_or(0) {
        libc::EAGAIN => AcceptFailure::Empty,
        libc::EINTR | libc::ECONNABORTED => AcceptFailure::Skip,
        libc::EPROTO
        | libc::ENOPROTOOPT
        | libc::EHOSTDOWN
        | libc::ENONET
        | libc::EHOSTUNREACH
        | libc::EOPNOTSUPP
        | libc::ENETDOWN
        | libc::ENETUNREACH
        | libc::EPERM => AcceptFailure::Retry,
        libc::EINVAL | libc::EBADF | libc::ENOTSOCK => AcceptFailure::Closed,
        _ => AcceptFailure::Backoff,
    }
}

/// A worker's unpublished counts, plain integers on the hot path.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub accepted: u64,
    pub closed: u64,
    pub requests: u64,
    pub bad_requests: u64,
    pub errors: u64,
    pub accept_errors: u64,
    pub resets: u64,
    pub timeouts: u64,
    pub rejected: u64,
    pub tls_handshakes: u64,
    pub tls_resumed: u64,
    pub tls_handshake_failures: u64,
}

impl Tally {
    /// Add the counts to `c` (skipping zeros) and reset them.
    pub fn publish(&mut self, c: &Counters) {
        let pairs = [
            (self.accepted, &c.accepted),
            (self.closed, &c.closed),
            (self.requests, &c.requests),
            (self.bad_requests, &c.bad_requests),
            (self.errors, &c.errors),
            (self.accept_errors, &c.accept_errors),
            (self.resets, &c.resets),
            (self.timeouts, &c.timeouts),
            (self.rejected, &c.rejected),
            (self.tls_handshakes, &c.tls_handshakes),
            (self.tls_resumed, &c.tls_resumed),
            (self.tls_handshake_failures, &c.tls_handshake_failures),
        ];
        for (n, counter) in pairs {
            if n > 0 {
                counter.fetch_add(n, Relaxed);
            }
        }
        *self = Tally::default();
    }

    /// Count a connection ended by the socket error `e`: resets apart from other errors.
    pub fn io_error(&mut self, e: &io::Error) {
        match e.kind() {
            io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe => self.resets += 1,
            _ => self.errors += 1,
        }
    }
}

/// Sum the workers' counters (`db_errors` is filled in by the caller).
pub(crate) fn sum_counters(counters: &[Counters]) -> ServerStats {
    let mut s = ServerStats::default();
    let mut closed = 0;
    for c in counters {
        s.accepted += c.accepted.load(Relaxed);
        closed += c.closed.load(Relaxed);
        s.requests += c.requests.load(Relaxed);
        s.bad_requests += c.bad_requests.load(Relaxed);
        s.errors += c.errors.load(Relaxed);
        s.accept_errors += c.accept_errors.load(Relaxed);
        s.resets += c.resets.load(Relaxed);
        s.timeouts += c.timeouts.load(Relaxed);
        s.rejected += c.rejected.load(Relaxed);
        s.tls_handshakes += c.tls_handshakes.load(Relaxed);
        s.tls_resumed += c.tls_resumed.load(Relaxed);
        s.tls_handshake_failures += c.tls_handshake_failures.load(Relaxed);
    }
    s.open = s.accepted.saturating_sub(closed);
    s
}

/// Lock a mutex whose data stays consistent even if a holder panicked.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// How a server is told to drain or stop, shared by [`RunningServer`] and every thread of the
/// server (reached by handlers through [`handlers::Ctx`]).
///
/// Both flags only ever go from false to true. `stopping` wins over `draining`.
#[derive(Debug, Default)]
pub(crate) struct Control {
    /// Set by [`RunningServer::drain`] before it wakes anyone: stop accepting, let requests in
    /// flight finish, close idle connections.
    draining: AtomicBool,
    /// Set by [`RunningServer::stop`] (and at a drain's deadline) before it wakes anyone: close
    /// everything now.
    stopping: AtomicBool,
    /// Blocking `/sleep`s wait on this, so that a stop cuts them short.
    sleep_lock: Mutex<()>,
    sleep_wake: Condvar,
    /// Blocking architectures: the sockets of the connections being served, so that a drain or
    /// stop can `shutdown(2)` them out of a blocking `read`/`write`. Holding an `Arc` keeps the
    /// descriptor open (never reused by another connection) while it is listed here.
    conns: Mutex<Slab<Arc<TcpStream>>>,
}

impl Control {
    pub(crate) fn draining(&self) -> bool {
        self.draining.load(SeqCst)
    }

    pub(crate) fn stopping(&self) -> bool {
        self.stopping.load(SeqCst)
    }

    /// Sleep for `d`, or less when the server stops; false when cut short.
    pub(crate) fn sleep(&self, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        let mut guard = lock(&self.sleep_lock);
        loop {
            if self.stopping() {
                return false;
            }
            let now = Instant::now();
            if now >= deadline {
                return true;
            }
            guard = self
                .sleep_wake
                .wait_timeout(guard, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// List a blocking connection's socket; `None` when the server is stopping (drop the
    /// connection). While draining it is listed with its read side shut down already, so it
    /// answers what the client has sent and then sees the end of input.
    pub(crate) fn register(&self, s: &Arc<TcpStream>) -> Option<usize> {
        let mut conns = lock(&self.conns);
        if self.stopping() {
            return None;
        }
        if self.draining() {
            let _ = s.shutdown(Shutdown::Read);
        }
        Some(conns.insert(Arc::clone(s)))
    }

    pub(crate) fn unregister(&self, key: usize) {
        lock(&self.conns).try_remove(key);
    }

    /// Blocking connections listed now.
    pub(crate) fn open_conns(&self) -> usize {
        lock(&self.conns).len()
    }

    /// Drain: shut down the read side of every listed connection. A handler blocked in `read`
    /// between requests sees the end of input and closes; one busy with a request finishes it
    /// (its write side is intact) and sees the end of input on its next read.
    fn begin_drain(&self) {
        self.draining.store(true, SeqCst);
        for (_, s) in lock(&self.conns).iter() {
            let _ = s.shutdown(Shutdown::Read);
        }
    }

    /// Stop: wake the sleepers and shut down every listed connection both ways.
    fn begin_stop(&self) {
        self.stopping.store(true, SeqCst);
        drop(lock(&self.sleep_lock));
        self.sleep_wake.notify_all();
        for (_, s) in lock(&self.conns).iter() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

/// What the threads of a blocking or async server share.
pub(crate) struct Shared {
    pub config: ServerConfig,
    pub responses: http::Responses,
    pub ctx: Arc<handlers::Ctx>,
    pub counters: Arc<[Counters]>,
    pub control: Arc<Control>,
    /// TLS around every connection (`ServerConfig::tls`), loaded at start.
    pub tls: Option<Arc<TlsServer>>,
}

/// The architecture-specific part of a [`RunningServer`].
enum Backend {
    /// The reactor's stop eventfd (also signalled to drain).
    Reactor {
        stop: sys::EventFd,
    },
    /// The shared blocking listener: `shutdown(2)` on it wakes every thread blocked in
    /// `accept`.
    Blocking {
        listener: Arc<TcpListener>,
    },
    Async(asyncrt::Handle),
}

/// A started server; dropping it stops it too.
///
/// # Stopping and draining: the contract with `reactor.rs`
///
/// [`start`] calls `reactor::prepare(&config, stop_fd, Arc<handlers::Ctx>)` and runs each
/// returned worker as `worker.run(&counters[i])` on its own thread. Both [`RunningServer::stop`]
/// and [`RunningServer::drain`] wake the workers the same way: they set a flag, then write the
/// stop eventfd (`stop_fd`, level-triggered, never read, so it stays readable for every worker
/// from then on). A worker that sees the eventfd readable asks the `handlers::Ctx`:
///
/// - [`handlers::Ctx::draining`] false: **stop** (it is false once `stop` was called, even
///   after a drain): close every connection and the listener, publish the counters, and return
///   from `run`. `stop` then joins the threads.
/// - [`handlers::Ctx::draining`] true: **drain**: close the listener (the kernel refuses new
///   connections), close the connections with no request in flight
///   ([`http::InputState::is_idle`], nothing unsent), call
///   [`http::InputState::close_after_next`] on the others so that their next response says
///   `Connection: close`, and return from `run` once the worker holds no connection. Because the
///   eventfd stays readable, a draining worker must stop watching it (or each wait would return
///   at once and spin) and instead bound its waits by [`handlers::DRAIN_POLL`], checking
///   [`handlers::Ctx::stopping`] after each wait: that is how the stop at the drain's deadline
///   reaches it.
///
/// `drain` returns when every worker thread has returned, or calls `stop` at its deadline.
pub struct RunningServer {
    local_addr: SocketAddr,
    arch: Arch,
    ctx: Arc<handlers::Ctx>,
    /// Threads that return when the server stops (reactor workers, acceptor, pool handlers,
    /// the async runtime's thread). Thread-per-connection threads are not here: they are
    /// tracked by `Control::conns`.
    threads: Vec<JoinHandle<()>>,
    backend: Backend,
    tls: Option<Arc<TlsServer>>,
}

impl std::fmt::Debug for RunningServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningServer")
            .field("local_addr", &self.local_addr)
            .field("arch", &self.arch)
            .field("threads", &self.threads.len())
            .finish_non_exhaustive()
    }
}

/// How long `stop` waits for thread-per-connection threads to notice their socket was shut down
/// (they do within microseconds unless stuck in a database call).
const CONN_THREADS_GRACE: Duration = Duration::from_secs(2);

impl RunningServer {
    /// The address the server listens on (with the port chosen when `listen` had port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The architecture running.
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// The TLS setup when the server speaks TLS: its certificate and fingerprint.
    pub fn tls(&self) -> Option<&TlsServer> {
        self.tls.as_deref()
    }

    /// Counters summed over the workers.
    pub fn stats(&self) -> ServerStats {
        self.ctx.stats()
    }

    /// Requests answered per worker: reactor workers, pool handlers; for thread-per-connection
    /// and async servers, per shard (connection k counts in shard k % shards, the shards being
    /// as many as the cores, or the runtime's workers).
    pub fn worker_requests(&self) -> Vec<u64> {
        self.ctx.counters.iter().map(Counters::requests).collect()
    }

    /// Number of workers (counter shards; see [`RunningServer::worker_requests`]).
    pub fn workers(&self) -> usize {
        self.ctx.counters.len()
    }

    /// Stop accepting, close every connection and the listeners, and wait for the threads.
    pub fn stop(mut self) {
        self.shutdown();
    }

    /// Drain: stop accepting new connections (the listener is closed: the kernel refuses them),
    /// let requests in flight finish (their last response says `Connection: close` when the
    /// architecture can tell), close idle connections, and return once no connection is left —
    /// or, at `deadline`, close whatever is left as [`RunningServer::stop`] does.
    pub fn drain(mut self, deadline: Duration) {
        let end = Instant::now() + deadline;
        self.ctx.control.begin_drain();
        match &self.backend {
            Backend::Reactor { stop } => {
                if let Err(e) = stop.signal() {
                    eprintln!("headroom-serve: cannot signal workers to drain: {e}");
                }
            }
            Backend::Blocking { listener } => shutdown_listener(listener),
            Backend::Async(h) => h.drain(),
        }
        while Instant::now() < end && !self.drained() {
            std::thread::sleep(Duration::from_millis(2));
        }
        self.shutdown();
    }

    fn drained(&self) -> bool {
        let threads_done = self.threads.iter().all(|t| t.is_finished());
        match &self.backend {
            Backend::Reactor { .. } => threads_done,
            Backend::Blocking { .. } => threads_done && self.ctx.control.open_conns() == 0,
            Backend::Async(h) => h.live() == 0,
        }
    }

    /// Block until the server's threads exit (they only do when stopped, or on a fatal poller
    /// error).
    pub fn wait(mut self) {
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }

    fn shutdown(&mut self) {
        if self.threads.is_empty() {
            return;
        }
        let control = &self.ctx.control;
        control.begin_stop();
        match &self.backend {
            Backend::Reactor { stop } => {
                // Cannot fail short of a broken eventfd; then the join below would hang.
                if let Err(e) = stop.signal() {
                    eprintln!("headroom-serve: cannot signal workers to stop: {e}");
                    return;
                }
            }
            Backend::Blocking { listener } => shutdown_listener(listener),
            Backend::Async(h) => h.stop(),
        }
        for t in self.threads.drain(..) {
            // A thread that panicked has already been reported by the panic hook.
            let _ = t.join();
        }
        if let Backend::Blocking { .. } = self.backend {
            let end = Instant::now() + CONN_THREADS_GRACE;
            while control.open_conns() > 0 && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Wake every thread blocked in `accept` on `listener` (Linux: `shutdown(2)` on a listening
/// socket disconnects it; `accept` then fails with EINVAL) and refuse new connections.
fn shutdown_listener(listener: &TcpListener) {
    let _ = socket2::SockRef::from(listener).shutdown(Shutdown::Both);
}

/// The listener of the blocking and async architectures, in blocking mode, with the socket
/// options every accepted connection inherits (see [`listen_socket`]).
pub(crate) fn bind_listener(config: &ServerConfig) -> io::Result<TcpListener> {
    Ok(listen_socket(config.listen, config, false)?.into())
}

/// A listening socket with the options every accepted connection should have: on Linux an
/// accepted socket inherits `TCP_NODELAY`, `SO_SNDBUF` and `SO_RCVBUF` (and their locks) from
/// its listener, so nothing is set per connection. Setting the receive buffer before `listen`
/// is also what makes it count: the window scale is fixed in the SYN-ACK (tcp(7): "the socket
/// buffer size must be set prior to the listen(2) or connect(2) calls"). `reactor`: non-blocking
/// and `SO_REUSEPORT`, one such listener per event loop.
pub(crate) fn listen_socket(
    addr: SocketAddr,
    config: &ServerConfig,
    reactor: bool,
) -> io::Result<Socket> {
    let ty = if reactor {
        Type::STREAM.nonblocking()
    } else {
        Type::STREAM
    };
    let s = Socket::new(Domain::for_address(addr), ty.cloexec(), Some(Protocol::TCP))?;
    s.set_reuse_address(true)?;
    if reactor {
        s.set_reuse_port(true)?;
    }
    // Responses go out at once, never held by Nagle behind an unacknowledged earlier write.
    if config.nodelay {
        s.set_nodelay(true)?;
    }
    if let Some(n) = config.sndbuf {
        s.set_send_buffer_size(n as usize)?;
    }
    if let Some(n) = config.rcvbuf {
        s.set_recv_buffer_size(n as usize)?;
    }
    s.bind(&addr.into())?;
    s.listen(config.backlog)?;
    Ok(s)
}

/// Start the server `config.arch` describes.
///
/// Errors: binding (address in use, permission), `workers == 0` (reactor, multi-thread async),
/// `handlers == 0` (pool), loading the TLS certificate and key (`InvalidInput`, one line naming
/// the file), opening the database, or failing to create threads, poll sets or the runtime;
/// nothing is left running on error.
pub fn start(config: ServerConfig) -> io::Result<RunningServer> {
    let invalid = |msg: &str| io::Error::new(io::ErrorKind::InvalidInput, msg.to_string());
    let shards = match config.arch {
        Arch::Reactor { .. }
        | Arch::Async {
            runtime: Runtime::Multi,
        } => {
            if config.workers == 0 {
                return Err(invalid("workers must be at least 1"));
            }
            config.workers
        }
        Arch::Async {
            runtime: Runtime::CurrentThread,
        } => 1,
        Arch::Pool { handlers } => {
            if handlers == 0 {
                return Err(invalid("handlers must be at least 1"));
            }
            handlers
        }
        Arch::ThreadPerConn => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let tls = match &config.tls {
        Some(source) => {
            let timeout = config
                .header_timeout
                .unwrap_or(tls::DEFAULT_HANDSHAKE_TIMEOUT);
            let loaded = source
                .load(timeout)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
            Some(Arc::new(loaded))
        }
        None => None,
    };
    let db = match &config.db {
        Some(d) => {
            Some(db::open(&d.url, d.pool).map_err(|e| io::Error::other(format!("database: {e}")))?)
        }
        None => None,
    };
    let counters: Arc<[Counters]> = (0..shards).map(|_| Counters::default()).collect();
    let control = Arc::new(Control::default());
    let ctx = Arc::new(handlers::Ctx::new(
        db,
        config.docroot.clone(),
        config.arch,
        config.workers,
        Arc::clone(&counters),
        Arc::clone(&control),
        tls.is_some(),
    ));
    let arch = config.arch;
    match arch {
        Arch::Reactor { .. } => start_reactor(config, ctx, tls),
        Arch::ThreadPerConn | Arch::Pool { .. } | Arch::Async { .. } => {
            let listener = bind_listener(&config)?;
            let local_addr = listener.local_addr()?;
            let shared = Arc::new(Shared {
                responses: config.responses(),
                config,
                ctx: Arc::clone(&ctx),
                counters,
                control,
                tls: tls.clone(),
            });
            let (backend, async_thread) = match arch {
                Arch::Async { runtime } => {
                    let (thread, handle) = asyncrt::start(&shared, listener, runtime)?;
                    (Backend::Async(handle), Some(thread))
                }
                _ => (
                    Backend::Blocking {
                        listener: Arc::new(listener),
                    },
                    None,
                ),
            };
            let mut server = RunningServer {
                local_addr,
                arch,
                ctx,
                threads: async_thread.into_iter().collect(),
                backend,
                tls,
            };
            if let Backend::Blocking { listener } = &server.backend {
                let listener = Arc::clone(listener);
                // On error `server` drops: stops the threads already started.
                match arch {
                    Arch::Pool { handlers } => {
                        blocking::start_pool(&shared, &listener, handlers, &mut server.threads)?
                    }
                    _ => blocking::start_thread_per_conn(&shared, &listener, &mut server.threads)?,
                }
            }
            Ok(server)
        }
    }
}

fn start_reactor(
    config: ServerConfig,
    ctx: Arc<handlers::Ctx>,
    tls: Option<Arc<TlsServer>>,
) -> io::Result<RunningServer> {
    let stop = sys::EventFd::new()?;
    let (local_addr, workers) =
        reactor::prepare(&config, stop.raw(), Arc::clone(&ctx), tls.clone())?;
    debug_assert_eq!(workers.len(), ctx.counters.len());
    let mut server = RunningServer {
        local_addr,
        arch: config.arch,
        ctx: Arc::clone(&ctx),
        threads: Vec::with_capacity(workers.len()),
        backend: Backend::Reactor { stop },
        tls,
    };
    for (i, worker) in workers.into_iter().enumerate() {
        let ctx = Arc::clone(&ctx);
        let thread = std::thread::Builder::new()
            .name(format!("serve-{i}"))
            .spawn(move || worker.run(&ctx.counters[i]))?; // on error `server` drops: stops the rest
        server.threads.push(thread);
    }
    Ok(server)
}
