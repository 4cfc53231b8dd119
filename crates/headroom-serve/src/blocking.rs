//! The blocking architectures: a thread per connection, and a pool of handler threads that each
//! block in `accept` on the shared listener (see the crate documentation for what they model).
//!
//! Both serve a connection the same way ([`Handler::serve`]): a blocking `read` into the
//! thread's 64 KiB buffer, [`InputState::feed`], one `write_all` of the responses; slow requests
//! run right there on the thread ([`handlers::run_blocking_on`]). That *is* the model: a thread
//! owns a connection for its whole life, whatever it does.
//!
//! Timeouts are `SO_RCVTIMEO` on the socket, changed only when the phase of the connection
//! changes (between requests: `idle_timeout`; inside a request head: what is left of
//! `header_timeout`). A read that times out closes the connection and counts it in `timeouts`.
//! The write timeout is `SO_SNDTIMEO` (a quarter of it, set once per connection) plus
//! [`crate::WriteStall`]: a `write` (or `sendfile`) that moves no byte returns `EAGAIN` and is
//! retried until `write_timeout` has passed since the last byte went, so a client that stops
//! reading frees its thread after `write_timeout` of no progress (counted in `timeouts` too). The output queued
//! per connection is at most [`OUT_LIMIT`] plus one response head (a `/bytes/N` body goes out
//! in pieces of that size).
//!
//! Stopping and draining reach a thread blocked in `accept` through `shutdown(2)` on the listener
//! and a thread blocked in `read`/`write` through `shutdown(2)` on its socket, listed in
//! [`crate::Control`] while it is served.
//!
//! TLS ([`Transport::Tls`]): the handshake is driven first, under the handshake timeout (the
//! socket's `SO_RCVTIMEO` set to what is left of it before every read), so a client that never
//! finishes it frees the thread; the connection is then served exactly as a plain one, through a
//! blocking `rustls::StreamOwned`. `/file` is read into memory there instead of sendfile(2),
//! which would bypass the encryption.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustls::{ServerConnection, StreamOwned};

use crate::http::InputState;
use crate::tls::{self, TlsServer};
use crate::{classify_accept_error, handlers, AcceptFailure, Counters, Shared, Tally};

/// Read buffer of each thread (thread per connection: of each connection).
const READ_BUF: usize = 64 * 1024;
/// Pipelined responses queued before they are written (then parsing resumes).
const OUT_LIMIT: usize = crate::MAX_QUEUED_OUTPUT;
/// After our last response: how long to wait for the client to close before closing anyway.
const LINGER: Duration = Duration::from_secs(1);
/// Pause in accepting after running out of descriptors.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);

/// Start `handlers` threads that each accept and serve one connection at a time; handler `i`
/// publishes to `counters[i]`.
pub(crate) fn start_pool(
    shared: &Arc<Shared>,
    listener: &Arc<TcpListener>,
    handlers: usize,
    threads: &mut Vec<JoinHandle<()>>,
) -> io::Result<()> {
    for i in 0..handlers {
        let (shared, listener) = (Arc::clone(shared), Arc::clone(listener));
        let thread = std::thread::Builder::new()
            .name(format!("serve-pool-{i}"))
            .spawn(move || {
                let counters = &shared.counters[i];
                let mut h = Handler::new(&shared, counters);
                while let Some(stream) = accept(&listener, &shared, &mut h.tally, counters) {
                    let stream = Arc::new(stream);
                    match admit(&shared, &stream, &mut h.tally) {
                        Some(key) => h.serve(&stream, key),
                        None => h.tally.closed += 1,
                    }
                    h.tally.publish(counters);
                }
                h.tally.publish(counters);
            })?;
        threads.push(thread);
    }
    Ok(())
}

/// Start the acceptor thread, which starts one thread per accepted connection. Connection `k`
/// publishes to `counters[k % counters.len()]`.
pub(crate) fn start_thread_per_conn(
    shared: &Arc<Shared>,
    listener: &Arc<TcpListener>,
    threads: &mut Vec<JoinHandle<()>>,
) -> io::Result<()> {
    let (shared, listener) = (Arc::clone(shared), Arc::clone(listener));
    let thread = std::thread::Builder::new()
        .name("serve-acceptor".into())
        .spawn(move || {
            let mut tally = Tally::default();
            let mut next = 0usize;
            while let Some(stream) = accept(&listener, &shared, &mut tally, &shared.counters[0]) {
                let stream = Arc::new(stream);
                if let Some(key) = admit(&shared, &stream, &mut tally) {
                    let shard = next % shared.counters.len();
                    next = next.wrapping_add(1);
                    let (sh, st) = (Arc::clone(&shared), Arc::clone(&stream));
                    let spawned =
                        std::thread::Builder::new()
                            .name("serve-conn".into())
                            .spawn(move || {
                                let counters = &sh.counters[shard];
                                let mut h = Handler::new(&sh, counters);
                                h.serve(&st, key);
                                h.tally.publish(counters);
                            });
                    if spawned.is_err() {
                        // Out of threads (EAGAIN): the connection is closed unserved.
                        shared.control.unregister(key);
                        tally.errors += 1;
                        tally.closed += 1;
                    }
                } else {
                    tally.closed += 1;
                }
                tally.publish(&shared.counters[0]);
            }
            tally.publish(&shared.counters[0]);
        })?;
    threads.push(thread);
    Ok(())
}

/// Accept the next connection (counted in `accepted`); `None` when the server stops or drains
/// (the listener was shut down). Running out of descriptors is counted and backed off; failures
/// are published to `counters` as they happen, so a server starved of descriptors shows it while
/// it waits, not only once a connection finally comes through.
fn accept(
    listener: &TcpListener,
    shared: &Shared,
    tally: &mut Tally,
    counters: &Counters,
) -> Option<TcpStream> {
    loop {
        let control = &shared.control;
        if control.stopping() || control.draining() {
            return None;
        }
        match listener.accept() {
            Ok((stream, _)) => {
                tally.accepted += 1;
                return Some(stream);
            }
            Err(e) => {
                if control.stopping() || control.draining() {
                    return None;
                }
                match classify_accept_error(&e) {
                    AcceptFailure::Empty | AcceptFailure::Skip => {}
                    // Shut down (by someone else than us?): nothing more will come.
                    AcceptFailure::Closed => return None,
                    AcceptFailure::Retry => {
                        tally.errors += 1;
                        tally.accept_errors += 1;
                        tally.publish(counters);
                    }
                    AcceptFailure::Backoff => {
                        tally.errors += 1;
                        tally.accept_errors += 1;
                        tally.publish(counters);
                        std::thread::sleep(ACCEPT_BACKOFF);
                    }
                }
            }
        }
    }
}

/// Enforce `max_conns` and list the connection in the control (so a stop can shut it down);
/// `None`: close it at once (over the limit: counted as rejected; or the server is stopping).
fn admit(shared: &Shared, stream: &Arc<TcpStream>, tally: &mut Tally) -> Option<usize> {
    if let Some(max) = shared.config.max_conns {
        if shared.control.open_conns() >= max {
            tally.rejected += 1;
            return None;
        }
    }
    shared.control.register(stream)
}

/// A thread's serving state: its buffers and its unpublished counts.
struct Handler<'a> {
    shared: &'a Shared,
    counters: &'a Counters,
    buf: Box<[u8]>,
    out: Vec<u8>,
    tally: Tally,
}

impl<'a> Handler<'a> {
    fn new(shared: &'a Shared, counters: &'a Counters) -> Handler<'a> {
        Handler {
            shared,
            counters,
            buf: vec![0; READ_BUF].into_boxed_slice(),
            out: Vec::new(),
            tally: Tally::default(),
        }
    }

    /// Serve `stream` (listed in the control as `key`) until it ends, then unlist it and count
    /// it closed. The descriptor closes when the last `Arc` goes.
    fn serve(&mut self, stream: &Arc<TcpStream>, key: usize) {
        let timed = match crate::WriteStall::sndtimeo(self.shared.config.write_timeout) {
            Some(t) => stream.set_write_timeout(Some(t)),
            None => Ok(()),
        };
        match (&self.shared.tls, timed) {
            (_, Err(_)) => self.tally.errors += 1,
            (None, Ok(())) => self.conn(stream, &mut Transport::Plain(stream)),
            (Some(t), Ok(())) => {
                if let Some(mut io) = self.handshake(stream, t) {
                    self.conn(stream, &mut io);
                }
            }
        }
        self.shared.control.unregister(key);
        self.tally.closed += 1;
        self.out.clear();
        if self.out.capacity() > 4 * OUT_LIMIT {
            self.out = Vec::new();
        }
    }

    /// Complete the TLS handshake on `s` within the handshake timeout; `None` (counted as a
    /// failed handshake, unless the server is stopping or draining) when it fails or times out.
    fn handshake<'s>(&mut self, s: &'s TcpStream, tls: &TlsServer) -> Option<Transport<'s>> {
        let Ok(mut conn) = ServerConnection::new(Arc::clone(&tls.config)) else {
            self.tally.errors += 1; // rustls refused its own configuration
            return None;
        };
        let deadline = Instant::now() + tls.handshake_timeout;
        let mut sock = s;
        // Bounded by the deadline: every read waits at most what is left of it.
        while conn.is_handshaking() {
            let left = deadline.saturating_duration_since(Instant::now());
            let failure = if left.is_zero() {
                Some(io::Error::from(io::ErrorKind::TimedOut))
            } else if let Err(e) = s.set_read_timeout(Some(left.max(Duration::from_millis(1)))) {
                Some(e)
            } else {
                match conn.complete_io(&mut sock) {
                    // No progress at all: the peer is gone.
                    Ok((0, 0)) if conn.is_handshaking() => {
                        Some(io::Error::from(io::ErrorKind::UnexpectedEof))
                    }
                    Ok(_) => None,
                    Err(e) => Some(e),
                }
            };
            if let Some(e) = failure {
                let control = &self.shared.control;
                if !(control.stopping() || control.draining()) {
                    self.tally.tls_handshake_failures += 1;
                    if is_timeout(&e) {
                        self.tally.timeouts += 1;
                    } else if !(tls::is_tls_error(&e) || e.kind() == io::ErrorKind::UnexpectedEof) {
                        self.tally.io_error(&e);
                    }
                }
                return None;
            }
        }
        tls::count_handshake(&conn, &mut self.tally);
        // `conn` sets the timeouts it wants from none.
        if s.set_read_timeout(None).is_err() {
            self.tally.errors += 1;
            return None;
        }
        Some(Transport::Tls(Box::new(StreamOwned::new(conn, s))))
    }

    fn conn(&mut self, s: &TcpStream, io: &mut Transport<'_>) {
        let sh = self.shared;
        let cfg = &sh.config;
        let mut input = InputState::default();
        let mut read_timeout: Option<Duration> = None;
        let mut head_since: Option<Instant> = None;
        let mut resume = false;
        loop {
            let batch = if resume || input.has_backlog() {
                resume = false;
                input.resume(&sh.responses, &mut self.out, OUT_LIMIT)
            } else {
                // About to block: publish what this connection did so far.
                self.tally.publish(self.counters);
                let want = match (input.in_head(), head_since, cfg.header_timeout) {
                    (true, Some(since), Some(t)) => {
                        let left = (since + t).saturating_duration_since(Instant::now());
                        if left.is_zero() {
                            self.tally.timeouts += 1;
                            return;
                        }
                        Some(left.max(Duration::from_millis(1)))
                    }
                    _ => cfg.idle_timeout,
                };
                if want != read_timeout {
                    if s.set_read_timeout(want).is_err() {
                        self.tally.errors += 1;
                        return;
                    }
                    read_timeout = want;
                }
                match io.read(&mut self.buf) {
                    Ok(0) => return, // the client closed (or a drain shut our read side)
                    Ok(n) => {
                        if sh.control.draining() {
                            input.close_after_next();
                        }
                        input.feed(&self.buf[..n], &sh.responses, &mut self.out, OUT_LIMIT)
                    }
                    Err(e) if is_timeout(&e) => {
                        self.tally.timeouts += 1;
                        return;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    // TLS: the client closed without a close_notify (most do).
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return,
                    Err(e) => return self.failed(&e),
                }
            };
            self.tally.requests += batch.responses;
            self.tally.bad_requests += batch.bad_requests;
            head_since = track_head(&input, head_since, &batch);
            if let Some(slow) = &batch.slow {
                // The responses before it go out first: the client may be waiting on them.
                if let Err(e) = self.write_out(io) {
                    return self.failed(&e);
                }
                let done = match io {
                    Transport::Plain(s) => handlers::run_blocking_on(
                        slow,
                        &sh.ctx,
                        &mut self.out,
                        s,
                        cfg.write_timeout,
                    ),
                    // No sendfile under TLS: the file is read into `out` and encrypted.
                    Transport::Tls(_) => Ok(handlers::run_blocking(slow, &sh.ctx, &mut self.out)),
                };
                match done {
                    Ok(_) => self.tally.requests += 1,
                    Err(e) => return self.failed(&e),
                }
                resume = !batch.close;
            }
            if let Err(e) = self.write_out(io) {
                return self.failed(&e);
            }
            if batch.close {
                io.close_notify();
                return linger(s, &mut self.buf);
            }
        }
    }

    /// Write the output, each `write` bounded by `SO_SNDTIMEO` and retried until the write
    /// timeout has passed with no progress (see [`crate::WriteStall`]). (rustls's stream takes
    /// plaintext only once the records before it went out, so a retry never repeats bytes.)
    fn write_out(&mut self, io: &mut Transport<'_>) -> io::Result<()> {
        if self.out.is_empty() {
            return Ok(());
        }
        let mut stall = crate::WriteStall::new(self.shared.config.write_timeout);
        let mut pos = 0;
        let r = loop {
            let r = if pos < self.out.len() {
                io.write(&self.out[pos..])
            } else {
                match io.flush() {
                    Ok(()) => break Ok(()),
                    Err(e) => Err(e),
                }
            };
            match r {
                Ok(0) => break Err(io::Error::from(io::ErrorKind::WriteZero)),
                Ok(n) => {
                    pos += n;
                    stall.progressed();
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted || stall.retry(&e) => {}
                Err(e) => break Err(e),
            }
        };
        self.out.clear();
        r
    }

    /// The connection broke, or a write made no progress for `write_timeout` (`SO_SNDTIMEO`
    /// reports EAGAIN): count it, unless it is our own stop that broke it.
    fn failed(&mut self, e: &io::Error) {
        if self.shared.control.stopping() {
            return;
        }
        if is_timeout(e) {
            self.tally.timeouts += 1;
        } else {
            self.tally.io_error(e);
        }
    }
}

/// What a connection reads and writes through: the socket, or rustls over it.
enum Transport<'s> {
    Plain(&'s TcpStream),
    Tls(Box<StreamOwned<ServerConnection, &'s TcpStream>>),
}

impl Transport<'_> {
    /// TLS: send a close_notify before our side closes (best effort).
    fn close_notify(&mut self) {
        if let Transport::Tls(t) = self {
            t.conn.send_close_notify();
            let _ = t.flush();
        }
    }
}

impl Read for Transport<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(s) => s.read(buf),
            Transport::Tls(t) => t.read(buf),
        }
    }
}

impl Write for Transport<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(s) => s.write(buf),
            Transport::Tls(t) => t.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Transport::Plain(_) => Ok(()),
            Transport::Tls(t) => t.flush(),
        }
    }
}

/// When the head being received started: kept while the same head grows, restarted when a
/// request was answered (what is buffered now is a new head), `None` outside a head.
pub(crate) fn track_head(
    input: &InputState,
    since: Option<Instant>,
    batch: &crate::http::Batch,
) -> Option<Instant> {
    if !input.in_head() {
        return None;
    }
    match since {
        Some(t) if batch.responses == 0 && batch.slow.is_none() => Some(t),
        _ => Some(Instant::now()),
    }
}

/// A read or a write timed out (SO_RCVTIMEO and SO_SNDTIMEO report EAGAIN).
fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Shut down our write side (the client sees the end of our last response) and discard input
/// until the client closes, for at most [`LINGER`]: closing with unread input would reset the
/// connection and could destroy that response.
fn linger(s: &TcpStream, buf: &mut [u8]) {
    if s.shutdown(Shutdown::Write).is_err() {
        return;
    }
    let end = Instant::now() + LINGER;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() || s.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match (&*s).read(buf) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}
