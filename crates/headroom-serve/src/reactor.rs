//! The epoll reactor: one event loop per worker thread over its own epoll and its own
//! `SO_REUSEPORT` listener. See the crate documentation for why.
//!
//! A connection is a small state machine ([`Conn`]) in the worker's slab; its token in epoll is
//! its slab key plus [`FIRST_CONN`]. Edge-triggered rules kept here: after a readable edge we
//! read until a short read, `EAGAIN` or end of file; after a writable edge we write until the
//! unsent tail is gone or the socket is full. Anything not done then waits for the next edge.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use slab::Slab;
use socket2::{Domain, Protocol, Socket, Type};

use crate::http::{Batch, InputState, Responses};
use crate::sys::{self, Epoll, Event};
use crate::{Counters, ServerConfig, Tally};

/// Token of the stop eventfd.
const STOP: u64 = 0;
/// Token of the worker's listener.
const LISTENER: u64 = 1;
/// Token of the connection in slab slot 0.
const FIRST_CONN: u64 = 2;

/// Per-worker read buffer. Large enough that a read rarely fills it, so a short read ends the
/// read loop without an extra `EAGAIN` read.
const SCRATCH: usize = 64 * 1024;
/// A round stops answering pipelined requests once this much output is queued; the rest is
/// answered after it is written (bounds memory per slow reader).
const OUT_LIMIT: usize = 256 * 1024;
/// Events taken per `epoll_wait`.
const EVENTS: usize = 256;
/// Pause in accepting after running out of descriptors.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);

const IN: u32 = libc::EPOLLIN as u32;
const OUT: u32 = libc::EPOLLOUT as u32;
const RDHUP: u32 = libc::EPOLLRDHUP as u32;
const HUP: u32 = libc::EPOLLHUP as u32;
const ERR: u32 = libc::EPOLLERR as u32;
const ET: u32 = libc::EPOLLET as u32;
/// A connection's registration while nothing waits to be written.
const READ_FLAGS: u32 = IN | RDHUP | ET;

/// Bind the listeners and create the epolls: everything that can fail before threads start.
pub(crate) fn prepare(config: &ServerConfig, stop: RawFd) -> io::Result<(SocketAddr, Vec<Worker>)> {
    let first = bind(config.listen, config.backlog)?;
    // With port 0 the first bind picks the port; the others join it through SO_REUSEPORT.
    let addr = first
        .local_addr()?
        .as_socket()
        .ok_or_else(|| io::Error::other("listener has no IP address"))?;
    let responses = Responses::new(&config.body);
    let mut workers = Vec::with_capacity(config.workers);
    let mut listener = Some(first);
    for _ in 0..config.workers {
        let listener = match listener.take() {
            Some(l) => l,
            None => bind(addr, config.backlog)?,
        };
        let epoll = Epoll::new()?;
        epoll.add(stop, IN, STOP)?;
        epoll.add(listener.as_raw_fd(), IN | ET, LISTENER)?;
        workers.push(Worker {
            epoll,
            listener,
            conns: Slab::new(),
            responses: responses.clone(),
            scratch: vec![0; SCRATCH].into_boxed_slice(),
            out: Vec::with_capacity(OUT_LIMIT),
            events: vec![sys::EMPTY_EVENT; EVENTS],
            tally: Tally::default(),
            accept_paused_until: None,
        });
    }
    Ok((addr, workers))
}

fn bind(addr: SocketAddr, backlog: i32) -> io::Result<Socket> {
    let s = Socket::new(
        Domain::for_address(addr),
        Type::STREAM.nonblocking().cloexec(),
        Some(Protocol::TCP),
    )?;
    s.set_reuse_address(true)?;
    s.set_reuse_port(true)?;
    // Inherited by accepted sockets on Linux: responses go out at once, never held by Nagle
    // behind an unacknowledged earlier write.
    s.set_nodelay(true)?;
    s.bind(&addr.into())?;
    s.listen(backlog)?;
    Ok(s)
}

/// One event loop and everything it owns.
pub(crate) struct Worker {
    epoll: Epoll,
    listener: Socket,
    conns: Slab<Conn>,
    responses: Responses,
    /// Every read of every connection of this worker lands here first.
    scratch: Box<[u8]>,
    /// Responses of one round, written with one `write`; empty between events.
    out: Vec<u8>,
    events: Vec<Event>,
    tally: Tally,
    /// Set after EMFILE & co: accept again at this instant (the listener is edge-triggered, so
    /// no new event would come for connections already queued).
    accept_paused_until: Option<Instant>,
}

impl Worker {
    /// Run until the stop eventfd fires (or epoll itself fails), then close everything.
    pub(crate) fn run(mut self, counters: &Counters) {
        'run: loop {
            let timeout = match self.accept_paused_until {
                None => -1,
                Some(t) => {
                    let ms = t.saturating_duration_since(Instant::now()).as_millis();
                    i32::try_from(ms).unwrap_or(i32::MAX)
                }
            };
            let n = match self.epoll.wait(&mut self.events, timeout) {
                Ok(n) => n,
                Err(_) => {
                    self.tally.errors += 1;
                    break 'run;
                }
            };
            for i in 0..n {
                // epoll_event is packed on x86-64: copy the fields out, never borrow them.
                let ev = self.events[i];
                let (token, flags) = (ev.u64, ev.events);
                match token {
                    STOP => break 'run,
                    LISTENER => self.accept_all(),
                    t => self.on_conn_event((t - FIRST_CONN) as usize, flags),
                }
            }
            if self
                .accept_paused_until
                .is_some_and(|t| Instant::now() >= t)
            {
                self.accept_paused_until = None;
                self.accept_all();
            }
            self.tally.publish(counters);
        }
        self.tally.closed += self.conns.len() as u64;
        self.tally.publish(counters);
        // Dropping `self` closes the connections, the listener and the epoll.
    }

    fn accept_all(&mut self) {
        if self.accept_paused_until.is_some() {
            return; // the timer retries
        }
        loop {
            match sys::accept_nonblocking(self.listener.as_raw_fd()) {
                Ok(fd) => {
                    let stream = TcpStream::from(fd);
                    let entry = self.conns.vacant_entry();
                    let token = entry.key() as u64 + FIRST_CONN;
                    if self
                        .epoll
                        .add(stream.as_raw_fd(), READ_FLAGS, token)
                        .is_err()
                    {
                        self.tally.errors += 1;
                        continue; // `stream` is dropped: closed
                    }
                    entry.insert(Conn::new(stream));
                    self.tally.accepted += 1;
                }
                Err(e) => match e.raw_os_error().unwrap_or(0) {
                    libc::EAGAIN => return,
                    // The connection died in the queue, or a signal: take the next one.
                    libc::EINTR | libc::ECONNABORTED => {}
                    // Network errors of that one connection (accept(2) says: treat like EAGAIN
                    // and retry).
                    libc::EPROTO
                    | libc::ENOPROTOOPT
                    | libc::EHOSTDOWN
                    | libc::ENONET
                    | libc::EHOSTUNREACH
                    | libc::EOPNOTSUPP
                    | libc::ENETDOWN
                    | libc::ENETUNREACH
                    | libc::EPERM => {
                        self.tally.errors += 1;
                        self.tally.accept_errors += 1;
                    }
                    // EMFILE, ENFILE, ENOBUFS, ENOMEM and anything unexpected: retrying now
                    // would fail the same way, so back off.
                    _ => {
                        self.tally.errors += 1;
                        self.tally.accept_errors += 1;
                        self.accept_paused_until = Some(Instant::now() + ACCEPT_BACKOFF);
                        return;
                    }
                },
            }
        }
    }

    fn on_conn_event(&mut self, key: usize, flags: u32) {
        // A stale event for a connection closed earlier in this batch finds no entry (or a new
        // connection in the slot, which then sees one spurious EAGAIN).
        let Some(conn) = self.conns.get_mut(key) else {
            return;
        };
        let mut cx = Ctx {
            epoll: &self.epoll,
            token: key as u64 + FIRST_CONN,
            scratch: &mut self.scratch,
            out: &mut self.out,
            responses: &self.responses,
            tally: &mut self.tally,
        };
        if conn.on_event(flags, &mut cx) == Next::Close {
            self.conns.remove(key);
            self.tally.closed += 1;
        }
        debug_assert!(self.out.is_empty());
        // One `/bytes/16777216` should not pin 16 MiB per worker for ever.
        if self.out.capacity() > 4 * OUT_LIMIT {
            self.out = Vec::with_capacity(OUT_LIMIT);
        }
    }
}

/// The worker's resources a connection borrows while it handles an event.
struct Ctx<'a> {
    epoll: &'a Epoll,
    token: u64,
    scratch: &'a mut [u8],
    out: &'a mut Vec<u8>,
    responses: &'a Responses,
    tally: &'a mut Tally,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    Keep,
    Close,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Serving requests.
    Open,
    /// A response ended the connection: once the output is written, shut down and linger.
    Closing,
    /// The client finished sending: once the output is written, close.
    PeerClosed,
    /// Our write side is shut down; input is discarded until the client closes, so that our
    /// close never resets a connection whose last response the client has not read yet.
    Lingering,
}

struct Conn {
    stream: TcpStream,
    input: InputState,
    /// Response bytes the socket did not take yet; empty (unallocated) almost always.
    unsent: Vec<u8>,
    state: State,
}

impl Conn {
    fn new(stream: TcpStream) -> Conn {
        Conn {
            stream,
            input: InputState::default(),
            unsent: Vec::new(),
            state: State::Open,
        }
    }

    fn on_event(&mut self, flags: u32, cx: &mut Ctx<'_>) -> Next {
        let hangup = flags & (RDHUP | HUP | ERR) != 0;
        let mut readable = flags & (IN | RDHUP | HUP | ERR) != 0;

        if !self.unsent.is_empty() {
            if flags & (OUT | HUP | ERR) == 0 {
                // Back-pressure: no new input is taken while the client is not reading ours.
                // (Edge-triggered: we re-read once the tail drains, below.)
                return Next::Keep;
            }
            match self.write_unsent() {
                Err(_) => return fail(cx),
                Ok(false) => return Next::Keep,
                Ok(true) => {}
            }
            if cx.epoll.modify(self.fd(), READ_FLAGS, cx.token).is_err() {
                return fail(cx);
            }
            // Input may have arrived while we were not reading it.
            readable = true;
            match self.state {
                State::Closing => return self.linger(cx),
                State::PeerClosed => return Next::Close,
                State::Open | State::Lingering => {}
            }
        }
        if self.state == State::Lingering {
            return self.discard(cx);
        }

        loop {
            let batch = if self.input.has_backlog() {
                self.input.resume(cx.responses, cx.out, OUT_LIMIT)
            } else if readable {
                match (&self.stream).read(cx.scratch) {
                    Ok(0) => {
                        self.state = State::PeerClosed;
                        readable = false;
                        Batch::default()
                    }
                    Ok(n) => {
                        // A short read emptied the receive queue (no EAGAIN read needed),
                        // unless the peer also hung up: then read on to see the end of file.
                        readable = n == cx.scratch.len() || hangup;
                        self.input
                            .feed(&cx.scratch[..n], cx.responses, cx.out, OUT_LIMIT)
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        readable = false;
                        Batch::default()
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => return fail(cx),
                }
            } else {
                return Next::Keep;
            };

            cx.tally.requests += batch.responses;
            cx.tally.bad_requests += batch.bad_requests;
            if batch.close {
                self.state = State::Closing;
            }
            if !cx.out.is_empty() {
                match self.write_out(cx) {
                    Err(_) => return fail(cx),
                    Ok(false) => return Next::Keep, // the rest when EPOLLOUT says so
                    Ok(true) => {}
                }
            }
            match self.state {
                State::Open => {}
                State::Closing => return self.linger(cx),
                State::PeerClosed | State::Lingering => return Next::Close,
            }
        }
    }

    fn fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }

    /// Write the round's output with one `write`; keep what the socket did not take and ask for
    /// `EPOLLOUT`. Ok(true) when everything went.
    fn write_out(&mut self, cx: &mut Ctx<'_>) -> io::Result<bool> {
        let written = loop {
            match (&self.stream).write(cx.out) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break 0,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    cx.out.clear();
                    return Err(e);
                }
            }
        };
        if written == cx.out.len() {
            cx.out.clear();
            return Ok(true);
        }
        self.unsent.extend_from_slice(&cx.out[written..]);
        cx.out.clear();
        cx.epoll.modify(self.fd(), READ_FLAGS | OUT, cx.token)?;
        Ok(false)
    }

    /// Write the unsent tail after a writable edge. Ok(true) when it is gone (and freed).
    fn write_unsent(&mut self) -> io::Result<bool> {
        while !self.unsent.is_empty() {
            match (&self.stream).write(&self.unsent) {
                Ok(n) if n == self.unsent.len() => break,
                Ok(n) => {
                    // A short write means the send buffer is full: wait for the next edge.
                    self.unsent.drain(..n);
                    return Ok(false);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.unsent = Vec::new();
        Ok(true)
    }

    /// Shut down our write side (the client sees the end of the response) and discard input
    /// until the client closes.
    fn linger(&mut self, cx: &mut Ctx<'_>) -> Next {
        self.state = State::Lingering;
        self.input = InputState::default();
        if self.stream.shutdown(Shutdown::Write).is_err() {
            return Next::Close;
        }
        self.discard(cx)
    }

    fn discard(&mut self, cx: &mut Ctx<'_>) -> Next {
        loop {
            match (&self.stream).read(cx.scratch) {
                Ok(0) => return Next::Close,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Keep,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // A reset after we said everything is no error of ours.
                Err(_) => return Next::Close,
            }
        }
    }
}

fn fail(cx: &mut Ctx<'_>) -> Next {
    cx.out.clear();
    cx.tally.errors += 1;
    Next::Close
}
