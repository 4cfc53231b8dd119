//! The reference servers that headroom loads: servers whose architecture is known, so that a
//! study can compare architectures (and pollers, and worker counts) on one machine.
//!
//! For now there is one: an **epoll reactor** ([`start`]), the server of `headroom demo` and the
//! loopback target of the tests. Later ones (select/poll reactors, thread per connection, a
//! handler pool, an async runtime, database endpoints) reuse [`http`] and [`RunningServer`].
//!
//! # The reactor, and why it is built this way
//!
//! - **N workers, each with its own epoll and its own listening socket**, all bound to one
//!   address with `SO_REUSEPORT`. The kernel spreads incoming connections over the listeners (by
//!   a hash of the 4-tuple), so there is no shared accept queue to fight over (no thundering
//!   herd, no `EPOLLEXCLUSIVE`), and a connection lives its whole life on one thread: no locks,
//!   no cross-thread wake-ups, nothing shared but a few relaxed counters published once per
//!   `epoll_wait` batch.
//! - **Edge-triggered, registered once.** A connection is added for `EPOLLIN | EPOLLRDHUP` when
//!   accepted and modified only while a response could not be written whole (then `EPOLLOUT` is
//!   added until the tail drains). The steady state of a keep-alive request is therefore
//!   `epoll_wait` + one `read` + one `write`: no `epoll_ctl` per request, and no read that ends in
//!   `EAGAIN` when the first read came back short (a short read on a stream socket means the
//!   receive queue is empty; a later arrival raises a new edge).
//! - **No per-connection buffer while idle.** Each worker reads into one scratch buffer and
//!   parses the requests in place; only an incomplete request's bytes (or an unsent response
//!   tail) are copied into a per-connection `Vec`, allocated when needed and freed when emptied.
//!   An idle connection costs its small state in a slab plus the kernel's socket, which is what
//!   lets a worker hold tens of thousands of them (see DESIGN.md, "Measured facts").
//! - **One write per read.** Every complete request in what one read returned (pipelining) is
//!   answered in order, the responses appended to a per-worker output buffer and written with one
//!   `write`. Responses are encoded once at start-up; `/bytes/N` is one header plus a `memset`.
//!   When a client stops reading, the server stops answering it (the output is capped per round
//!   and parsing resumes only after the unsent tail drains).
//! - **Server-initiated closes linger**: after the last response the write side is shut down and
//!   input is discarded until the client closes, so a close never turns into a reset that could
//!   destroy the response (400 to garbage, `Connection: close`, HTTP/1.0).
//! - **Stopping** writes one eventfd registered (level-triggered) in every worker's epoll, so
//!   [`RunningServer::stop`] wakes all workers at once, whatever their connections are doing.
//! - Running out of descriptors in `accept4` (EMFILE and friends) is counted and accepting pauses
//!   for 10 ms instead of spinning.
//!
//! Nothing read from the network can panic a worker: the parser is [`http::InputState`], pure
//! and tested byte by byte.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

pub mod db;
pub mod http;
mod reactor;
mod sys;

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

/// The readiness mechanism of a reactor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Poller {
    Select,
    Poll,
    Epoll,
}

/// The tokio runtime flavour of [`Arch::Async`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    CurrentThread,
    Multi,
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
    /// SO_SNDBUF / SO_RCVBUF of accepted connections (`None`: the kernel's autotuning).
    pub sndbuf: Option<u32>,
    pub rcvbuf: Option<u32>,
    /// TCP_NODELAY on accepted connections.
    pub nodelay: bool,
    /// Connections held at most; further ones are accepted and closed at once (counted).
    pub max_conns: Option<usize>,
    /// Close a keep-alive connection idle for this long between requests.
    pub idle_timeout: Option<Duration>,
    /// Close a connection whose request head is not complete this long after its first byte.
    pub header_timeout: Option<Duration>,
    /// Close a connection after this many requests (sending `Connection: close` on the last).
    pub keepalive_requests: Option<u64>,
    /// Directory served under `/file/PATH`; `None` answers 404.
    pub docroot: Option<PathBuf>,
    /// Database of `/db/read/N` and `/db/write/N`; `None` answers 503.
    pub db: Option<DbConfig>,
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
            keepalive_requests: None,
            docroot: None,
            db: None,
        }
    }
}

/// Counters summed over the workers. Workers publish them once per event-loop round, so a
/// snapshot may lag the network by one round.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Connections accepted.
    pub accepted: u64,
    /// Responses sent (every status; a pipelined batch counts each response).
    pub requests: u64,
    /// Connections open now (accepted and not yet closed).
    pub open: u64,
    /// Of `requests`, error responses to requests the server could not serve (400, 431, 501).
    pub bad_requests: u64,
    /// I/O errors: failed accepts (EMFILE...) and connections ended by a socket error (reset).
    pub errors: u64,
    /// Of `errors`, failed accepts; mostly running out of descriptors.
    pub accept_errors: u64,
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
        ];
        for (n, counter) in pairs {
            if n > 0 {
                counter.fetch_add(n, Relaxed);
            }
        }
        *self = Tally::default();
    }
}

/// A started server; dropping it stops it too.
#[derive(Debug)]
pub struct RunningServer {
    local_addr: SocketAddr,
    stop: sys::EventFd,
    threads: Vec<JoinHandle<()>>,
    counters: Arc<[Counters]>,
}

impl RunningServer {
    /// The address the server listens on (with the port chosen when `listen` had port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Counters summed over the workers.
    pub fn stats(&self) -> ServerStats {
        let mut s = ServerStats::default();
        let mut closed = 0;
        for c in self.counters.iter() {
            s.accepted += c.accepted.load(Relaxed);
            closed += c.closed.load(Relaxed);
            s.requests += c.requests.load(Relaxed);
            s.bad_requests += c.bad_requests.load(Relaxed);
            s.errors += c.errors.load(Relaxed);
            s.accept_errors += c.accept_errors.load(Relaxed);
        }
        s.open = s.accepted.saturating_sub(closed);
        s
    }

    /// Number of worker threads.
    pub fn workers(&self) -> usize {
        self.counters.len()
    }

    /// Stop the workers, close every connection and the listeners, and wait for the threads.
    pub fn stop(mut self) {
        self.shutdown();
    }

    /// Block until the workers exit (they only do when stopped or on a fatal epoll error).
    pub fn wait(mut self) {
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }

    fn shutdown(&mut self) {
        if self.threads.is_empty() {
            return;
        }
        // Cannot fail short of a broken eventfd; then the join below would hang, so say so.
        if let Err(e) = self.stop.signal() {
            eprintln!("headroom-serve: cannot signal workers to stop: {e}");
            return;
        }
        for t in self.threads.drain(..) {
            // A worker that panicked has already been reported by the panic hook.
            let _ = t.join();
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Start the epoll reactor: bind `config.workers` listeners and start one thread per worker.
///
/// Errors: binding (address in use, permission), `workers == 0`, or failing to create epoll or
/// threads; nothing is left running on error.
pub fn start(config: ServerConfig) -> std::io::Result<RunningServer> {
    if config.workers == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "workers must be at least 1",
        ));
    }
    let stop = sys::EventFd::new()?;
    let (local_addr, workers) = reactor::prepare(&config, stop.raw())?;
    let counters: Arc<[Counters]> = workers.iter().map(|_| Counters::default()).collect();
    let mut server = RunningServer {
        local_addr,
        stop,
        threads: Vec::with_capacity(workers.len()),
        counters: Arc::clone(&counters),
    };
    for (i, worker) in workers.into_iter().enumerate() {
        let counters = Arc::clone(&counters);
        let thread = std::thread::Builder::new()
            .name(format!("serve-{i}"))
            .spawn(move || worker.run(&counters[i]))?; // on error `server` drops: stops the rest
        server.threads.push(thread);
    }
    Ok(server)
}
