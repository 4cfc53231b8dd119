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
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;

pub mod http;
mod reactor;
mod sys;

/// What to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// Address to listen on; port 0 picks a free port (the same for every worker).
    pub listen: SocketAddr,
    /// Worker threads (each one epoll loop and one listening socket); at least 1.
    pub workers: usize,
    /// Listen backlog of each worker's socket (the kernel caps it at `net.core.somaxconn`).
    pub backlog: i32,
    /// Body of `GET /`.
    pub body: Vec<u8>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            backlog: 1024,
            body: b"hello from headroom\n".to_vec(),
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
