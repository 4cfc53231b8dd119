//! The reactor: one event loop per worker thread over its own poll set and its own
//! `SO_REUSEPORT` listener, on select(2), poll(2) or epoll(7) ([`crate::poller`]). See the crate
//! documentation for why.
//!
//! "One acceptor and N workers" (issue 3) is done here as N acceptors, one per worker: every
//! worker listens on the same address with `SO_REUSEPORT` and the kernel spreads the
//! connections, so a connection is accepted by the loop that serves it and no descriptor ever
//! crosses threads. For select that also means each worker has its own 1024-descriptor budget.
//!
//! A connection is a small state machine ([`Conn`]) in the worker's slab; its token in the poll
//! set is its slab key plus [`FIRST_CONN`]. The loop is written for the strictest of the three
//! pollers, edge-triggered epoll: after a readable event we read until a short read, `EAGAIN` or
//! end of file; after a writable event we write until the unsent tail is gone or the socket is
//! full. Level-triggered select and poll are then correct as long as a connection *watches* only
//! what it will act on ([`Conn::want`]): input while it takes input, writability only while it
//! holds an unsent tail, nothing while it sleeps. The interest is compared after every event and
//! changed only when it differs, so epoll keeps its steady state of one `epoll_wait` + one
//! `read` + one `write` per request and no `epoll_ctl`.
//!
//! # TLS
//!
//! A TLS connection ([`Conn::tls`]) reads and writes the socket exactly as a plain one does; its
//! session decrypts what a read returned into the worker's `plain` buffer, which is parsed as
//! the scratch buffer would be, and [`Conn::write_out`] seals the round's responses (and any
//! queued handshake records) before the one write, so an unsent tail is ciphertext. While its
//! handshake runs a connection is in [`Phase::Handshake`], swept at the handshake timeout. A
//! connection closed before its handshake completed counts as a failed handshake
//! ([`Loop::close`]).
//!
//! # Time
//!
//! Three things are timed, all per worker and all off the request path:
//!
//! - `/sleep/MS` answers from a timer heap: the connection waits (watching nothing), the loop
//!   goes on serving everyone else, and when the timer is due the response is written and the
//!   connection's pending pipelined input is parsed. The other slow routes (`/cpu`, `/db`,
//!   `/file`, `/status`) run through [`crate::handlers::run_blocking`] on the worker thread
//!   itself: they block the whole loop, every other connection of the worker included — which
//!   is how a naive event loop that calls blocking (or CPU-heavy) code behaves, and what the
//!   architecture comparison is meant to show.
//! - `idle_timeout`, `header_timeout` and `write_timeout` are enforced by a coarse sweep: each
//!   connection keeps the phase it is in (idle between requests, inside a request head,
//!   writing an unsent tail, busy) and since when, a store per event; every quarter of the
//!   shortest timeout (10 ms to 1 s) the worker walks its slab and closes the expired ones. A
//!   connection is closed between T and T plus one sweep period after it went quiet; the
//!   per-request cost is O(1), the sweep O(connections) a few times per timeout. All count in
//!   `ServerStats::timeouts`. A writing connection's clock restarts whenever the socket takes
//!   a byte of its tail ([`Conn::progressed`]): the write timeout is "no progress for T", not
//!   "a response must be sent within T".
//! - The accept back-off after EMFILE & co (select and poll stop watching the listener
//!   meanwhile, or they would report it ready on every call).
//!
//! The clock is read after a wait only when something is timed, so a server without timeouts
//! or sleeps reads no clock at all.
//!
//! # Limits
//!
//! - `max_conns` is one count for the whole server (an atomic shared by the workers, touched
//!   only on accept and close): beyond it a connection is accepted and closed at once.
//! - select cannot watch a descriptor at or above `FD_SETSIZE` (1024): `FD_SET` would write
//!   past the `fd_set`. Such a connection is closed at once, and a message is printed the first
//!   time. Both count as accepted and `rejected`.
//! - Resets by the client (ECONNRESET, EPIPE) count in `resets`, other socket errors in
//!   `errors`.
//!
//! # Stopping and draining
//!
//! The stop eventfd only wakes; the flags of `handlers::Ctx` say what to do (the contract is
//! documented at `RunningServer` in lib.rs). Stop: close everything and return. Drain: close
//! the listener, close the idle connections, let the others finish with `Connection: close`,
//! return when none is left; see [`Loop::start_draining`].

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use slab::Slab;
use socket2::Socket;

use crate::http::{Batch, InputState, Responses, Slow, SlowRoute};
use crate::poller::{self, Interest, PollSet, ERR, HUP, IN, OUT, RDHUP};
use crate::tls::{self, TlsServer};
use crate::{
    classify_accept_error, handlers, sys, AcceptFailure, Arch, Counters, Poller, ServerConfig,
    Tally,
};

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
const OUT_LIMIT: usize = crate::MAX_QUEUED_OUTPUT;
/// Pause in accepting after running out of descriptors.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);
/// Bounds of the timeout sweep's period (a quarter of the shorter timeout).
const SWEEP_MIN: Duration = Duration::from_millis(10);
const SWEEP_MAX: Duration = Duration::from_secs(1);

/// Bind the listeners and create the poll sets: everything that can fail before threads start.
pub(crate) fn prepare(
    config: &ServerConfig,
    stop: RawFd,
    handlers: Arc<handlers::Ctx>,
    tls: Option<Arc<TlsServer>>,
) -> io::Result<(SocketAddr, Vec<Worker>)> {
    let kind = match config.arch {
        Arch::Reactor { poller } => poller,
        _ => Poller::Epoll,
    };
    let first = bind(config.listen, config)?;
    // With port 0 the first bind picks the port; the others join it through SO_REUSEPORT.
    let addr = first
        .local_addr()?
        .as_socket()
        .ok_or_else(|| io::Error::other("listener has no IP address"))?;
    let responses = config.responses();
    let held = config
        .max_conns
        .map(|max| (Arc::new(AtomicUsize::new(0)), max));
    let mut workers = Vec::with_capacity(config.workers);
    let mut listener = Some(first);
    for _ in 0..config.workers {
        let listener = match listener.take() {
            Some(l) => l,
            None => bind(addr, config)?,
        };
        let shared = Shared {
            listener,
            stop,
            responses: responses.clone(),
            held: held.clone(),
            idle_timeout: config.idle_timeout,
            header_timeout: config.header_timeout,
            write_timeout: config.write_timeout.filter(|t| !t.is_zero()),
            handlers: Arc::clone(&handlers),
            tls: tls.clone(),
        };
        workers.push(match kind {
            Poller::Select => Worker::Select(Box::new(Loop::new(poller::Select::new(), shared)?)),
            Poller::Poll => Worker::Poll(Box::new(Loop::new(poller::Poll::new(), shared)?)),
            Poller::Epoll => Worker::Epoll(Box::new(Loop::new(poller::Epoll::new()?, shared)?)),
        });
    }
    Ok((addr, workers))
}

fn bind(addr: SocketAddr, config: &ServerConfig) -> io::Result<Socket> {
    crate::listen_socket(addr, config, true)
}

/// What each worker gets from [`prepare`].
struct Shared {
    listener: Socket,
    stop: RawFd,
    responses: Responses,
    /// Connections held by all workers together, and the most allowed (`max_conns`).
    held: Option<(Arc<AtomicUsize>, usize)>,
    idle_timeout: Option<Duration>,
    header_timeout: Option<Duration>,
    write_timeout: Option<Duration>,
    handlers: Arc<handlers::Ctx>,
    tls: Option<Arc<TlsServer>>,
}

/// One worker: the same loop over one of the three pollers (monomorphized, so epoll's loop is
/// the code it was before there were three).
pub(crate) enum Worker {
    Select(Box<Loop<poller::Select>>),
    Poll(Box<Loop<poller::Poll>>),
    Epoll(Box<Loop<poller::Epoll>>),
}

impl Worker {
    /// Run until stopped (or the poller itself fails), then close everything.
    pub(crate) fn run(self, counters: &Counters) {
        match self {
            Worker::Select(l) => l.run(counters),
            Worker::Poll(l) => l.run(counters),
            Worker::Epoll(l) => l.run(counters),
        }
    }
}

/// The worker's coarse clock, read once per round when anything is timed.
struct Clock {
    epoch: Instant,
    now: Instant,
    /// `now` in milliseconds since `epoch` (wraps after 49 days; compared with wrapping_sub).
    ms: u32,
}

impl Clock {
    fn tick(&mut self) {
        self.now = Instant::now();
        self.ms = (self.now - self.epoch).as_millis() as u32;
    }
}

/// One event loop and everything it owns.
pub(crate) struct Loop<P> {
    poller: P,
    /// `None` once draining: the listener is closed so that new connections are refused.
    listener: Option<Socket>,
    /// The stop eventfd (owned by `RunningServer`).
    stop: RawFd,
    conns: Slab<Conn>,
    responses: Responses,
    handlers: Arc<handlers::Ctx>,
    /// Every read of every connection of this worker lands here first.
    scratch: Box<[u8]>,
    /// Responses of one round, written with one `write`; empty between events.
    out: Vec<u8>,
    /// TLS: the plaintext of one read, parsed from here; empty between events (and never
    /// allocated without TLS).
    plain: Vec<u8>,
    /// Every connection speaks TLS through a session made from this.
    tls: Option<Arc<TlsServer>>,
    tally: Tally,
    /// Set after EMFILE & co: accept again at this instant (the listener is edge-triggered on
    /// epoll, so no new event would come for connections already queued; select and poll stop
    /// watching it meanwhile, or they would report it on every wait).
    accept_paused_until: Option<Instant>,
    held: Option<(Arc<AtomicUsize>, usize)>,
    /// Timeouts in milliseconds (`u32::MAX`: none).
    idle_ms: u32,
    header_ms: u32,
    write_ms: u32,
    /// The TLS handshake timeout (`u32::MAX`: no TLS).
    handshake_ms: u32,
    /// Sweep period; `None` when neither timeout is set.
    sweep_every: Option<Duration>,
    next_sweep: Option<Instant>,
    /// Connections to close, filled by a sweep (kept to reuse its allocation).
    doomed: Vec<usize>,
    /// `/sleep` timers: (due, connection serial, slab key); a timer whose connection is gone
    /// (or whose slot holds another connection) is skipped.
    sleeps: BinaryHeap<Reverse<(Instant, u32, usize)>>,
    next_serial: u32,
    clock: Clock,
    /// Draining: no new connections; idle ones are closed, busy ones finish.
    draining: bool,
    /// The "descriptor beyond FD_SETSIZE" message is printed once per worker.
    warned_fd: bool,
}

impl<P: PollSet> Loop<P> {
    fn new(mut poller: P, shared: Shared) -> io::Result<Loop<P>> {
        let lfd = shared.listener.as_raw_fd();
        for (fd, what) in [(shared.stop, "stop eventfd"), (lfd, "listener")] {
            if !P::fits(fd) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{}: the {what}'s {}", P::NAME, sys::FdTooHigh(fd)),
                ));
            }
        }
        poller.register_stop(shared.stop, STOP)?;
        poller.register(lfd, LISTENER, Interest::Read)?;
        let ms = |d: Option<Duration>| d.map_or(u32::MAX, |d| d.as_millis().min(1 << 31) as u32);
        let handshake = shared.tls.as_ref().map(|t| t.handshake_timeout);
        let shortest = [
            shared.idle_timeout,
            shared.header_timeout,
            shared.write_timeout,
            handshake,
        ]
        .into_iter()
        .flatten()
        .min();
        let now = Instant::now();
        Ok(Loop {
            poller,
            listener: Some(shared.listener),
            stop: shared.stop,
            conns: Slab::new(),
            responses: shared.responses,
            handlers: shared.handlers,
            scratch: vec![0; SCRATCH].into_boxed_slice(),
            out: Vec::with_capacity(OUT_LIMIT),
            plain: Vec::new(),
            tls: shared.tls,
            tally: Tally::default(),
            accept_paused_until: None,
            held: shared.held,
            idle_ms: ms(shared.idle_timeout),
            header_ms: ms(shared.header_timeout),
            write_ms: ms(shared.write_timeout),
            handshake_ms: ms(handshake),
            sweep_every: shortest.map(|d| (d / 4).clamp(SWEEP_MIN, SWEEP_MAX)),
            next_sweep: None,
            doomed: Vec::new(),
            sleeps: BinaryHeap::new(),
            next_serial: 0,
            clock: Clock {
                epoch: now,
                now,
                ms: 0,
            },
            draining: false,
            warned_fd: false,
        })
    }

    /// True when anything is timed: then the clock is read once per round.
    fn clocked(&self) -> bool {
        self.sweep_every.is_some() || !self.sleeps.is_empty() || self.accept_paused_until.is_some()
    }

    /// How long the next wait may block: until the earliest timer, and no longer than
    /// [`handlers::DRAIN_POLL`] while draining (the stop eventfd is no longer watched then).
    fn timeout(&self) -> Option<Duration> {
        let drain = self.draining.then_some(handlers::DRAIN_POLL);
        let Some(due) = [
            self.sleeps.peek().map(|Reverse((t, _, _))| *t),
            self.accept_paused_until,
            self.next_sweep,
        ]
        .into_iter()
        .flatten()
        .min() else {
            return drain;
        };
        let d = due.saturating_duration_since(Instant::now());
        Some(drain.map_or(d, |p| p.min(d)))
    }

    fn run(mut self, counters: &Counters) {
        'run: loop {
            let n = match self.poller.wait(self.timeout()) {
                Ok(n) => n,
                Err(e) => {
                    eprintln!("headroom-serve: {} wait failed: {e}", P::NAME);
                    self.tally.errors += 1;
                    break 'run;
                }
            };
            if self.clocked() {
                self.clock.tick();
            }
            if self.draining && self.handlers.stopping() {
                break 'run; // the drain's deadline
            }
            for i in 0..n {
                let (token, flags) = self.poller.event(i);
                match token {
                    STOP => {
                        if self.on_stop() {
                            break 'run;
                        }
                    }
                    LISTENER => self.accept_all(),
                    t => self.on_conn_event((t - FIRST_CONN) as usize, flags),
                }
            }
            if self.clocked() {
                self.on_timers();
            }
            self.tally.publish(counters);
            if self.draining && self.conns.is_empty() {
                break 'run;
            }
        }
        self.tally.closed += self.conns.len() as u64;
        if let Some((held, _)) = &self.held {
            held.fetch_sub(self.conns.len(), Relaxed);
        }
        self.tally.publish(counters);
        // Dropping `self` closes the connections, the listener and the poll set.
    }

    /// The stop eventfd fired: stop now (true), or start draining (false). The contract is
    /// `RunningServer`'s (lib.rs): the flags say which; the eventfd only wakes.
    fn on_stop(&mut self) -> bool {
        if !self.handlers.draining() {
            return true;
        }
        if !self.draining {
            self.start_draining();
        }
        false
    }

    /// Stop accepting (the listener is closed, so the kernel refuses new connections), close
    /// the idle keep-alive connections and let the busy ones finish: their next response says
    /// `Connection: close` (then the client closes), and one that is idle after a response is
    /// closed too. An idle connection is read once more before it is closed: a request that
    /// arrived since its last event is answered (with `Connection: close`) rather than lost, and
    /// the close happens with an empty receive queue, so it is a FIN, not a reset.
    ///
    /// The stop eventfd stays readable from now on, so it is no longer watched (each wait would
    /// return at once); waits are bounded by [`handlers::DRAIN_POLL`] instead, and
    /// [`handlers::Ctx::stopping`] is checked after each (the stop at the drain's deadline).
    fn start_draining(&mut self) {
        self.draining = true;
        if self.poller.deregister_stop(self.stop, STOP).is_err() {
            self.tally.errors += 1;
        }
        if let Some(l) = self.listener.take() {
            self.poller.deregister(l.as_raw_fd(), LISTENER);
        }
        self.accept_paused_until = None;
        let mut idle = Vec::new();
        for (key, c) in self.conns.iter_mut() {
            if c.state == State::Open {
                // Its next response says `Connection: close` and ends it.
                c.input.close_after_next();
                if c.phase() == Phase::Idle {
                    idle.push(key);
                }
            }
        }
        for key in idle {
            self.drive(key, true, |c, cx| c.serve(true, false, cx));
        }
    }

    fn accept_all(&mut self) {
        if self.accept_paused_until.is_some() {
            return; // the timer retries
        }
        let Some(listener) = &self.listener else {
            return;
        };
        let lfd = listener.as_raw_fd();
        loop {
            match sys::accept_nonblocking(lfd) {
                Ok(fd) => {
                    let stream = TcpStream::from(fd);
                    let raw = stream.as_raw_fd();
                    if !P::fits(raw) {
                        // Never handed to select: FD_SET would write past its bitmap.
                        reject(&mut self.tally);
                        if !self.warned_fd {
                            self.warned_fd = true;
                            eprintln!(
                                "headroom-serve: {}; closing such connections at once \
                                 (counted as rejected); use poll or epoll for more",
                                sys::FdTooHigh(raw)
                            );
                        }
                        continue; // `stream` is dropped: closed
                    }
                    if let Some((held, max)) = &self.held {
                        if held.fetch_add(1, Relaxed) >= *max {
                            held.fetch_sub(1, Relaxed);
                            reject(&mut self.tally);
                            continue;
                        }
                    }
                    let session = match &self.tls {
                        None => None,
                        Some(t) => match tls::Session::new(t) {
                            Ok(s) => Some(s),
                            Err(_) => {
                                // rustls refused its own configuration: nothing to serve.
                                self.tally.errors += 1;
                                if let Some((held, _)) = &self.held {
                                    held.fetch_sub(1, Relaxed);
                                }
                                continue;
                            }
                        },
                    };
                    let entry = self.conns.vacant_entry();
                    let key = entry.key();
                    if self
                        .poller
                        .register(raw, key as u64 + FIRST_CONN, Interest::Read)
                        .is_err()
                    {
                        self.tally.errors += 1;
                        if let Some((held, _)) = &self.held {
                            held.fetch_sub(1, Relaxed);
                        }
                        continue;
                    }
                    self.next_serial = self.next_serial.wrapping_add(1);
                    let mut conn = Conn::new(stream, self.next_serial, self.clock.ms);
                    if session.is_some() {
                        // The handshake timeout runs from the accept, bytes or not.
                        conn.tls = session;
                        conn.phase = Phase::Handshake;
                    }
                    entry.insert(conn);
                    self.tally.accepted += 1;
                    if self.next_sweep.is_none() {
                        if let Some(every) = self.sweep_every {
                            self.clock.tick();
                            self.next_sweep = Some(self.clock.now + every);
                        }
                    }
                }
                Err(e) => match classify_accept_error(&e) {
                    AcceptFailure::Empty => return,
                    AcceptFailure::Skip => {}
                    AcceptFailure::Retry => {
                        self.tally.errors += 1;
                        self.tally.accept_errors += 1;
                    }
                    // EMFILE, ENFILE, ENOBUFS, ENOMEM and anything unexpected: retrying now
                    // would fail the same way, so back off.
                    AcceptFailure::Backoff | AcceptFailure::Closed => {
                        self.tally.errors += 1;
                        self.tally.accept_errors += 1;
                        self.accept_paused_until = Some(Instant::now() + ACCEPT_BACKOFF);
                        let _ =
                            self.poller
                                .reregister(lfd, LISTENER, Interest::Read, Interest::None);
                        return;
                    }
                },
            }
        }
    }

    fn on_conn_event(&mut self, key: usize, flags: u32) {
        // A stale event for a connection closed earlier in this batch finds no entry (or a new
        // connection in the slot, which then sees one spurious EAGAIN).
        if !self.conns.contains(key) {
            return;
        }
        self.drive(key, self.draining, |c, cx| c.on_event(flags, cx));
    }

    /// Apply what handling an event decided: close, or update the connection's interest, its
    /// timeout phase and its sleep timer.
    /// Run one step of connection `key`'s state machine (`f`) with the worker's shared buffers,
    /// then act on what it asks for next.
    fn drive(
        &mut self,
        key: usize,
        draining: bool,
        f: impl FnOnce(&mut Conn, &mut Ctx<'_>) -> Next,
    ) {
        let before = self.tally.requests;
        let mut cx = Ctx {
            scratch: &mut self.scratch,
            out: &mut self.out,
            plain: &mut self.plain,
            responses: &self.responses,
            handlers: &self.handlers,
            tally: &mut self.tally,
            draining,
        };
        let next = f(&mut self.conns[key], &mut cx);
        let answered = self.tally.requests - before;
        self.after(key, next, answered);
    }

    fn after(&mut self, key: usize, next: Next, answered: u64) {
        debug_assert!(self.out.is_empty());
        // One `/bytes/16777216` should not pin 16 MiB per worker for ever.
        if self.out.capacity() > 4 * OUT_LIMIT {
            self.out = Vec::with_capacity(OUT_LIMIT);
        }
        let ms = match next {
            Next::Close => return self.close(key),
            Next::Keep => None,
            Next::Sleep(ms) => Some(ms),
        };
        let conn = &mut self.conns[key];
        if let Some(ms) = ms {
            let due = Instant::now() + Duration::from_millis(ms);
            self.sleeps.push(Reverse((due, conn.serial, key)));
        }
        let want = conn.want();
        if want != conn.watch {
            let token = key as u64 + FIRST_CONN;
            if self
                .poller
                .reregister(conn.fd(), token, conn.watch, want)
                .is_err()
            {
                self.tally.errors += 1;
                return self.close(key);
            }
            conn.watch = want;
        }
        if self.sweep_every.is_some() {
            conn.stamp(self.clock.ms, answered > 0);
        }
    }

    fn close(&mut self, key: usize) {
        let conn = self.conns.remove(key);
        self.poller.deregister(conn.fd(), key as u64 + FIRST_CONN);
        self.tally.closed += 1;
        if let Some(t) = &conn.tls {
            t.ended(&mut self.tally);
        }
        if let Some((held, _)) = &self.held {
            held.fetch_sub(1, Relaxed);
        }
        // `conn` drops here: the descriptor closes after it left the poll set.
    }

    fn on_timers(&mut self) {
        let now = self.clock.now;
        while let Some(&Reverse((due, serial, key))) = self.sleeps.peek() {
            if due > now {
                break;
            }
            self.sleeps.pop();
            match self.conns.get(key) {
                Some(c) if c.serial == serial && c.sleeping.is_some() => {}
                _ => continue,
            }
            self.drive(key, self.draining, |c, cx| c.wake(cx));
        }
        if self.accept_paused_until.is_some_and(|t| now >= t) {
            self.accept_paused_until = None;
            if let Some(l) = &self.listener {
                let lfd = l.as_raw_fd();
                if self
                    .poller
                    .reregister(lfd, LISTENER, Interest::None, Interest::Read)
                    .is_err()
                {
                    self.tally.errors += 1;
                }
            }
            self.accept_all();
        }
        if self.next_sweep.is_some_and(|t| now >= t) {
            self.sweep();
            self.next_sweep = match self.sweep_every {
                Some(every) if !self.conns.is_empty() => Some(now + every),
                _ => None,
            };
        }
    }

    /// Close the connections whose idle or header timeout expired.
    fn sweep(&mut self) {
        let now = self.clock.ms;
        let mut doomed = std::mem::take(&mut self.doomed);
        doomed.clear();
        for (key, c) in self.conns.iter() {
            let limit = match c.phase {
                Phase::Idle | Phase::Linger => self.idle_ms,
                Phase::Head => self.header_ms,
                Phase::Write => self.write_ms,
                Phase::Handshake => self.handshake_ms,
                Phase::Busy => continue,
            };
            if now.wrapping_sub(c.since) >= limit {
                doomed.push(key);
            }
        }
        for &key in &doomed {
            self.tally.timeouts += 1;
            self.close(key);
        }
        self.doomed = doomed;
    }
}

/// The worker's resources a connection borrows while it handles an event.
struct Ctx<'a> {
    scratch: &'a mut [u8],
    out: &'a mut Vec<u8>,
    /// TLS: the plaintext of one read.
    plain: &'a mut Vec<u8>,
    responses: &'a Responses,
    handlers: &'a handlers::Ctx,
    tally: &'a mut Tally,
    draining: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    Keep,
    Close,
    /// Keep, and answer the `/sleep` this connection now waits on in this many milliseconds.
    Sleep(u64),
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

/// Which timeout applies to a connection, decided after each of its events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Between requests, nothing buffered or owed: `idle_timeout` from the last activity.
    Idle,
    /// Part of a request head is buffered: `header_timeout` from its first byte.
    Head,
    /// The TLS handshake is not complete: the handshake timeout from the accept.
    Handshake,
    /// Lingering after our last response: `idle_timeout` (the client should close).
    Linger,
    /// A response tail is unsent (the client is not reading): `write_timeout` from the last
    /// byte the socket took.
    Write,
    /// Owed a response, writing a tail, or sleeping: no timeout.
    Busy,
}

struct Conn {
    stream: TcpStream,
    input: InputState,
    /// Response bytes the socket did not take yet (TLS: ciphertext); empty (unallocated)
    /// almost always.
    unsent: Vec<u8>,
    /// TLS: the session between the socket and `input`; `None` for plain HTTP.
    tls: Option<Box<tls::Session>>,
    /// The `/sleep` this connection waits on (its response is due when the timer fires).
    sleeping: Option<Box<Slow>>,
    /// Tells this connection's timers from those of an earlier one in the same slab slot.
    serial: u32,
    /// When the current [`Phase`] started (the worker clock's milliseconds).
    since: u32,
    phase: Phase,
    state: State,
    /// What the poll set watches for this connection now.
    watch: Interest,
    /// A slow request was answered: parse the pending input before reading more.
    resume: bool,
    /// The socket took bytes of the unsent tail since the last [`Conn::stamp`]: the write
    /// timeout starts again.
    progressed: bool,
}

impl Conn {
    fn new(stream: TcpStream, serial: u32, now_ms: u32) -> Conn {
        Conn {
            stream,
            input: InputState::default(),
            unsent: Vec::new(),
            tls: None,
            sleeping: None,
            serial,
            since: now_ms,
            phase: Phase::Idle,
            state: State::Open,
            watch: Interest::Read,
            resume: false,
            progressed: false,
        }
    }

    fn fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }

    /// What to watch: writability while a tail is unsent (and then not input: that is the
    /// back-pressure), nothing while sleeping, else input.
    fn want(&self) -> Interest {
        if !self.unsent.is_empty() {
            Interest::Write
        } else if self.sleeping.is_some() {
            Interest::None
        } else {
            Interest::Read
        }
    }

    fn phase(&self) -> Phase {
        if self.tls.as_ref().is_some_and(|t| t.handshaking()) {
            return Phase::Handshake;
        }
        if !self.unsent.is_empty() {
            return Phase::Write;
        }
        match self.state {
            State::Lingering => Phase::Linger,
            State::Open if self.unsent.is_empty() && !self.resume => {
                if self.input.is_idle() {
                    Phase::Idle
                } else if self.input.in_head() {
                    Phase::Head
                } else {
                    Phase::Busy // sleeping, skipping a body, or holding a backlog
                }
            }
            _ => Phase::Busy,
        }
    }

    /// Record the phase after an event; `answered`: a response went out (so a head being
    /// buffered now is a new one, and an idle connection was active).
    fn stamp(&mut self, now_ms: u32, answered: bool) {
        let phase = self.phase();
        let progressed = std::mem::take(&mut self.progressed);
        if phase != self.phase || answered || progressed || phase == Phase::Idle {
            self.since = now_ms;
        }
        self.phase = phase;
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
                Err(e) => return fail(cx, &e),
                Ok(false) => return Next::Keep,
                Ok(true) => {}
            }
            if self.sleeping.is_some() {
                return Next::Keep; // the rest after the sleep's response
            }
            // Input may have arrived while we were not reading it.
            readable = true;
            match self.state {
                State::Closing => return self.linger(cx.scratch),
                State::PeerClosed => return Next::Close,
                State::Open | State::Lingering => {}
            }
        }
        if self.sleeping.is_some() {
            // Input waits in the socket until the sleep is answered; edge-triggered epoll will
            // not say it again, so the wake-up reads anyway.
            return Next::Keep;
        }
        if self.state == State::Lingering {
            return self.discard(cx.scratch);
        }
        self.serve(readable, hangup, cx)
    }

    /// The `/sleep` timer is due: answer it, then go on with the pending input.
    fn wake(&mut self, cx: &mut Ctx<'_>) -> Next {
        let Some(slow) = self.sleeping.take() else {
            return Next::Keep;
        };
        handlers::sleep_done(&slow, cx.handlers, cx.out);
        cx.tally.requests += 1;
        self.after_slow(&slow);
        if !self.unsent.is_empty() {
            // Order: behind the tail, which is still waiting for the client to read.
            self.seal(cx.out);
            self.unsent.extend_from_slice(cx.out);
            cx.out.clear();
            return Next::Keep;
        }
        // Read as after a hang-up (until EAGAIN or end of file, not just one short read): an
        // end of file that arrived during the sleep raised its one edge while it was ignored.
        self.serve(true, true, cx)
    }

    /// A slow request's response was appended: the connection goes on or ends with it.
    fn after_slow(&mut self, slow: &Slow) {
        if !slow.keep_alive {
            if self.state == State::Open {
                self.state = State::Closing;
            }
        } else if self.state == State::Open {
            self.resume = true;
        }
    }

    /// Parse and answer what is buffered and what the socket has, writing after each read,
    /// until the socket is drained, a write falls short, a `/sleep` starts or the connection
    /// ends. Whatever `cx.out` holds on entry is written first.
    fn serve(&mut self, mut readable: bool, hangup: bool, cx: &mut Ctx<'_>) -> Next {
        loop {
            let batch = if self.state != State::Open {
                Batch::default() // Closing: write what is left, then linger
            } else if self.resume || self.input.has_backlog() {
                self.resume = false;
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
                        match &mut self.tls {
                            None => {
                                self.input
                                    .feed(&cx.scratch[..n], cx.responses, cx.out, OUT_LIMIT)
                            }
                            Some(t) => {
                                if t.receive(&cx.scratch[..n], cx.plain, cx.tally).is_err() {
                                    return self.tls_broken(cx);
                                }
                                let batch = if cx.plain.is_empty() {
                                    Batch::default() // handshake records only
                                } else {
                                    self.input.feed(cx.plain, cx.responses, cx.out, OUT_LIMIT)
                                };
                                cx.plain.clear();
                                batch
                            }
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        readable = false;
                        Batch::default()
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return fail(cx, &e),
                }
            } else if self.has_output(cx.out) {
                Batch::default() // a slow response (or TLS records) to write
            } else if cx.draining && self.phase() == Phase::Idle {
                // Draining, everything answered and the socket empty: a FIN, not a reset.
                return Next::Close;
            } else {
                return Next::Keep;
            };

            cx.tally.requests += batch.responses;
            cx.tally.bad_requests += batch.bad_requests;
            if batch.close {
                self.state = State::Closing;
            }
            let mut sleep = None;
            if let Some(slow) = batch.slow {
                if let SlowRoute::Sleep { ms } = slow.route {
                    // Not now: the worker's timer answers it, and the loop goes on.
                    sleep = Some(ms);
                    self.sleeping = Some(Box::new(slow));
                } else {
                    // Blocks the whole worker for as long as it takes (see the module doc).
                    handlers::run_blocking(&slow, cx.handlers, cx.out);
                    cx.tally.requests += 1;
                    self.after_slow(&slow);
                }
            }
            if self.has_output(cx.out) {
                match self.write_out(cx) {
                    Err(e) => return fail(cx, &e),
                    // The rest when the socket says it is writable.
                    Ok(false) => return sleep.map_or(Next::Keep, Next::Sleep),
                    Ok(true) => {}
                }
            }
            if let Some(ms) = sleep {
                return Next::Sleep(ms);
            }
            match self.state {
                State::Open => {}
                State::Closing => return self.linger(cx.scratch),
                State::PeerClosed | State::Lingering => return Next::Close,
            }
        }
    }

    /// Output to write: responses in `out`, or TLS records queued in the session.
    fn has_output(&self, out: &[u8]) -> bool {
        !out.is_empty() || self.tls.as_ref().is_some_and(|t| t.wants_write())
    }

    /// TLS: turn the plaintext in `out` into ciphertext, queued records first. Plain: nothing.
    fn seal(&mut self, out: &mut Vec<u8>) {
        if let Some(t) = &mut self.tls {
            t.seal(out);
        }
    }

    /// The TLS peer broke the protocol (plain HTTP on a TLS port, an alert, garbage): send the
    /// alert rustls queued, if the socket takes it at once, and close. A handshake that never
    /// completed is counted when the connection closes; a broken established session counts as
    /// an error.
    fn tls_broken(&mut self, cx: &mut Ctx<'_>) -> Next {
        cx.out.clear();
        cx.plain.clear();
        self.seal(cx.out);
        let _ = (&self.stream).write(cx.out);
        cx.out.clear();
        if self.tls.as_ref().is_some_and(|t| !t.handshaking()) {
            cx.tally.errors += 1;
        }
        Next::Close
    }

    /// Write the round's output with one `write`; keep what the socket did not take (the loop
    /// then watches writability). Ok(true) when everything went. TLS: the output is sealed
    /// first, so `unsent` holds ciphertext.
    fn write_out(&mut self, cx: &mut Ctx<'_>) -> io::Result<bool> {
        self.seal(cx.out);
        if cx.out.is_empty() {
            return Ok(true);
        }
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
        Ok(false)
    }

    /// Write the unsent tail after a writable event. Ok(true) when it is gone (and freed).
    fn write_unsent(&mut self) -> io::Result<bool> {
        while !self.unsent.is_empty() {
            match (&self.stream).write(&self.unsent) {
                Ok(n) if n == self.unsent.len() => break,
                Ok(n) => {
                    // A short write means the send buffer is full: wait for the next event.
                    self.progressed |= n > 0;
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
    fn linger(&mut self, scratch: &mut [u8]) -> Next {
        self.state = State::Lingering;
        self.input = InputState::default();
        self.resume = false;
        if let Some(t) = &mut self.tls {
            // close_notify, if the socket takes it at once (a client may ignore its absence).
            t.close_notify();
            let mut alert = Vec::new();
            t.seal(&mut alert);
            let _ = (&self.stream).write(&alert);
        }
        if self.stream.shutdown(Shutdown::Write).is_err() {
            return Next::Close;
        }
        self.discard(scratch)
    }

    fn discard(&mut self, scratch: &mut [u8]) -> Next {
        loop {
            match (&self.stream).read(scratch) {
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

/// A connection ended by a socket error: a reset by the client (ECONNRESET, or EPIPE when the
/// reset arrived before our write) is counted apart from other errors.
fn fail(cx: &mut Ctx<'_>, e: &io::Error) -> Next {
    cx.out.clear();
    cx.tally.io_error(e);
    Next::Close
}

/// A connection accepted and closed at once (`max_conns`, or beyond select's reach): it counts
/// as accepted, closed and rejected (see `ServerStats::rejected`).
fn reject(tally: &mut Tally) {
    tally.accepted += 1;
    tally.closed += 1;
    tally.rejected += 1;
}
