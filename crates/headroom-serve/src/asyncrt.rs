//! The async architecture: tokio, a `current_thread` runtime or a multi-thread runtime with
//! `workers` workers, and a task per connection.
//!
//! The accept loop runs in `block_on` on the server's own thread (for `current_thread`, that
//! thread *is* the runtime: every connection is served on it); each accepted connection is a
//! spawned task. Slow routes: `/sleep` awaits `tokio::time::sleep` (costs no thread), `/db` and
//! `/file` go through `spawn_blocking` — so at most as many database calls run at once as the
//! database pool has connections, the rest wait for one inside [`crate::db::Db`] on tokio's
//! blocking threads (seed 003's point: the pool, not the runtime, bounds the concurrency of the
//! I/O) — and `/status` runs inline (it never blocks). `/cpu` runs inline too: its computation
//! occupies the runtime worker that polls the task (with `current_thread`, every connection
//! waits), as CPU-heavy code in an async handler does.
//!
//! Memory per idle connection follows DESIGN.md: the task holds its socket and an
//! [`InputState`] (no buffer while idle); reads land in a per-thread scratch buffer, responses
//! are written from a per-thread output buffer, and only what the socket did not take is copied
//! into a task-owned `Vec` while it is awaited.
//!
//! TLS: a task holds a boxed [`tls::Session`] between its socket and its parser, and the
//! synchronous step above stays the same: the read's ciphertext is decrypted into a per-thread
//! plaintext buffer and parsed from there, and the round's output is sealed before it is
//! written (see `tls.rs`). The handshake must complete within the handshake timeout.
//!
//! Writes that the socket does not take at once are awaited under the write timeout, restarted
//! by every write that moves a byte ([`write_all_timed`]): a client that stops reading is
//! closed after `write_timeout` of no progress, and holds at most one round's output
//! ([`OUT_LIMIT`] plus a response head; `/bytes/N` bodies are produced in pieces) meanwhile.
//!
//! Stop and drain go through a `watch` channel: the accept loop and idle connections select on
//! it. Stopping ends `block_on`; the runtime is then shut down, which drops every task (and so
//! closes every socket) at its next await point.

use std::cell::RefCell;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::http::{Batch, InputState, Responses, Slow, SlowRoute};
use crate::tls;
use crate::{blocking, classify_accept_error, handlers, AcceptFailure, Runtime, Shared, Tally};

/// Per-thread read buffer.
const READ_BUF: usize = 64 * 1024;
/// Pipelined responses queued before they are written (then parsing resumes).
const OUT_LIMIT: usize = crate::MAX_QUEUED_OUTPUT;
/// After our last response: how long to wait for the client to close before closing anyway.
const LINGER: Duration = Duration::from_secs(1);
/// Pause in accepting after running out of descriptors.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);
/// How long a stopped runtime waits for its blocking tasks (a database call) before leaving them.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(200);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Running,
    Draining,
    Stopping,
}

/// The server's side of a running async server.
pub(crate) struct Handle {
    phase: watch::Sender<Phase>,
    /// Connections open now (exact: counted up on accept, down when the task ends or is
    /// dropped).
    live: Arc<AtomicUsize>,
}

impl Handle {
    pub(crate) fn drain(&self) {
        self.phase.send_replace(Phase::Draining);
    }

    pub(crate) fn stop(&self) {
        self.phase.send_replace(Phase::Stopping);
    }

    pub(crate) fn live(&self) -> usize {
        self.live.load(SeqCst)
    }
}

/// Build the runtime and start the thread that runs the accept loop in it.
pub(crate) fn start(
    shared: &Arc<Shared>,
    listener: std::net::TcpListener,
    runtime: Runtime,
) -> io::Result<(JoinHandle<()>, Handle)> {
    listener.set_nonblocking(true)?;
    let mut builder = match runtime {
        Runtime::CurrentThread => tokio::runtime::Builder::new_current_thread(),
        Runtime::Multi => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(shared.config.workers);
            b
        }
    };
    let rt = builder
        .enable_io()
        .enable_time()
        .thread_name("serve-async")
        .build()?;
    let listener = {
        let _guard = rt.enter();
        TcpListener::from_std(listener)?
    };
    let (tx, rx) = watch::channel(Phase::Running);
    let live = Arc::new(AtomicUsize::new(0));
    let (shared, live2) = (Arc::clone(shared), Arc::clone(&live));
    let thread = std::thread::Builder::new()
        .name("serve-async-main".into())
        .spawn(move || {
            rt.block_on(accept_loop(listener, shared, rx, live2));
            rt.shutdown_timeout(SHUTDOWN_GRACE);
        })?;
    Ok((thread, Handle { phase: tx, live }))
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut phase: watch::Receiver<Phase>,
    live: Arc<AtomicUsize>,
) {
    let mut tally = Tally::default();
    let mut next = 0usize;
    loop {
        if *phase.borrow_and_update() != Phase::Running {
            break;
        }
        tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, _)) => {
                    tally.accepted += 1;
                    let max = shared.config.max_conns.unwrap_or(usize::MAX);
                    if live.load(SeqCst) >= max {
                        tally.rejected += 1;
                        tally.closed += 1;
                        drop(stream);
                    } else {
                        live.fetch_add(1, SeqCst);
                        let conn = Conn {
                            shard: next % shared.counters.len(),
                            shared: Arc::clone(&shared),
                            tally: Tally::default(),
                            live: Arc::clone(&live),
                            handshaking: false,
                        };
                        next = next.wrapping_add(1);
                        // Counted before the task can answer anything: a client that sees its
                        // response and then asks /status finds itself in `accepted` (on a
                        // multi-thread runtime the task may run before this loop goes on).
                        tally.publish(&shared.counters[0]);
                        tokio::spawn(serve(stream, conn, phase.clone()));
                    }
                }
                Err(e) => match classify_accept_error(&e) {
                    AcceptFailure::Empty | AcceptFailure::Skip => {}
                    AcceptFailure::Retry => {
                        tally.errors += 1;
                        tally.accept_errors += 1;
                    }
                    // EMFILE & co (and a listener gone bad): retrying now would fail the same way.
                    AcceptFailure::Backoff | AcceptFailure::Closed => {
                        tally.errors += 1;
                        tally.accept_errors += 1;
                        tally.publish(&shared.counters[0]);
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                    }
                },
            },
            r = phase.changed() => {
                if r.is_err() {
                    break;
                }
            }
        }
        tally.publish(&shared.counters[0]);
    }
    tally.publish(&shared.counters[0]);
    // Draining or stopping: no more connections (the kernel refuses them once this closes).
    drop(listener);
    // Keep `block_on` (and so, on a current-thread runtime, the connections) going until stop.
    while *phase.borrow_and_update() != Phase::Stopping {
        if phase.changed().await.is_err() {
            break;
        }
    }
}

/// A connection task's counts, published when it ends — however it ends: a task dropped by the
/// runtime's shutdown still counts as closed.
struct Conn {
    shared: Arc<Shared>,
    shard: usize,
    tally: Tally,
    live: Arc<AtomicUsize>,
    /// TLS: the handshake has not completed (ending now is a failed handshake).
    handshaking: bool,
}

impl Conn {
    fn publish(&mut self) {
        self.tally.publish(&self.shared.counters[self.shard]);
    }

    fn failed(&mut self, e: &io::Error) {
        if self.shared.control.stopping() {
            return; // our own stop broke it
        }
        if e.kind() == io::ErrorKind::TimedOut {
            self.tally.timeouts += 1; // the write timeout
        } else {
            self.tally.io_error(e);
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if self.handshaking && !self.shared.control.stopping() {
            self.tally.tls_handshake_failures += 1;
        }
        self.tally.closed += 1;
        self.publish();
        self.live.fetch_sub(1, SeqCst);
    }
}

/// Per-thread buffers: every read of every connection on this thread lands in `buf`, and the
/// responses it calls for are written from `out` (see the module doc).
struct Scratch {
    buf: Box<[u8]>,
    out: Vec<u8>,
    /// TLS: the plaintext of one read (never allocated without TLS).
    plain: Vec<u8>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch {
        buf: vec![0; READ_BUF].into_boxed_slice(),
        out: Vec::new(),
        plain: Vec::new(),
    });
}

/// What one synchronous step (read or resume, parse, write) did.
enum Step {
    /// The socket had nothing after all (readiness was stale).
    WouldBlock,
    /// The client closed.
    Eof,
    Failed(io::Error),
    /// The TLS peer broke the protocol: send `alert` (if the socket takes it) and close.
    Broken {
        alert: Vec<u8>,
    },
    /// `unsent`: the part of the output the socket did not take (usually empty, unallocated).
    Done {
        batch: Batch,
        unsent: Vec<u8>,
    },
}

/// Read (or resume) and answer with the thread's scratch buffers, without awaiting. `tls`: the
/// connection's session (the handshake is counted in `tally` when it completes).
fn step(
    stream: &TcpStream,
    input: &mut InputState,
    responses: &Responses,
    resume: bool,
    mut tls: Option<&mut tls::Session>,
    tally: &mut Tally,
) -> Step {
    SCRATCH.with(|cell| {
        let s = &mut *cell.borrow_mut();
        let batch = if resume || input.has_backlog() {
            input.resume(responses, &mut s.out, OUT_LIMIT)
        } else {
            match stream.try_read(&mut s.buf) {
                Ok(0) => return Step::Eof,
                Ok(n) => match tls.as_deref_mut() {
                    None => input.feed(&s.buf[..n], responses, &mut s.out, OUT_LIMIT),
                    Some(t) => {
                        if t.receive(&s.buf[..n], &mut s.plain, tally).is_err() {
                            s.plain.clear();
                            let mut alert = Vec::new();
                            t.seal(&mut alert);
                            return Step::Broken { alert };
                        }
                        let batch = if s.plain.is_empty() {
                            Batch::default() // handshake records only
                        } else {
                            input.feed(&s.plain, responses, &mut s.out, OUT_LIMIT)
                        };
                        s.plain.clear();
                        batch
                    }
                },
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                    ) =>
                {
                    return Step::WouldBlock
                }
                Err(e) => return Step::Failed(e),
            }
        };
        if let Some(t) = tls {
            t.seal(&mut s.out); // ciphertext from here on, handshake records first
        }
        let mut written = 0;
        while written < s.out.len() {
            match stream.try_write(&s.out[written..]) {
                Ok(0) => break,
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    s.out.clear();
                    return Step::Failed(e);
                }
            }
        }
        let unsent = s.out[written..].to_vec();
        s.out.clear();
        // One `/bytes/16777216` should not pin 16 MiB per thread for ever.
        if s.out.capacity() > 4 * OUT_LIMIT {
            s.out = Vec::new();
        }
        Step::Done { batch, unsent }
    })
}

async fn serve(mut stream: TcpStream, mut me: Conn, mut phase: watch::Receiver<Phase>) {
    let sh = Arc::clone(&me.shared);
    let cfg = &sh.config;
    let mut input = InputState::default();
    let mut head_since: Option<std::time::Instant> = None;
    let mut resume = false;
    let mut tls = match &sh.tls {
        None => None,
        Some(t) => match tls::Session::new(t) {
            Ok(s) => Some(s),
            Err(_) => {
                me.tally.errors += 1; // rustls refused its own configuration
                return;
            }
        },
    };
    me.handshaking = tls.is_some();
    let handshake_end = sh
        .tls
        .as_ref()
        .map(|t| std::time::Instant::now() + t.handshake_timeout);
    loop {
        if !(resume || input.has_backlog()) {
            let draining = *phase.borrow_and_update() != Phase::Running;
            if draining {
                if input.is_idle() && !me.handshaking {
                    return;
                }
                input.close_after_next();
            }
            me.publish();
            let deadline = match (input.in_head(), head_since, cfg.header_timeout) {
                _ if me.handshaking => handshake_end,
                (true, Some(since), Some(t)) => Some(since + t),
                _ => cfg.idle_timeout.map(|t| std::time::Instant::now() + t),
            };
            let timer = tokio::time::sleep_until(tokio::time::Instant::from_std(
                deadline.unwrap_or_else(std::time::Instant::now),
            ));
            tokio::select! {
                r = stream.readable() => {
                    if let Err(e) = r {
                        me.failed(&e);
                        return;
                    }
                }
                _ = timer, if deadline.is_some() => {
                    me.tally.timeouts += 1;
                    return;
                }
                r = phase.changed(), if !draining => {
                    if r.is_err() {
                        return;
                    }
                    continue;
                }
            }
        }
        let stepped = step(
            &stream,
            &mut input,
            &sh.responses,
            resume,
            tls.as_deref_mut(),
            &mut me.tally,
        );
        let (batch, unsent) = match stepped {
            Step::WouldBlock => continue,
            Step::Eof => return,
            Step::Failed(e) => return me.failed(&e),
            Step::Broken { alert } => {
                let _ = stream.try_write(&alert);
                if !me.handshaking {
                    me.tally.errors += 1; // a failed handshake is counted when `me` drops
                }
                return;
            }
            Step::Done { batch, unsent } => (batch, unsent),
        };
        me.handshaking = tls.as_ref().is_some_and(|t| t.handshaking());
        resume = false;
        me.tally.requests += batch.responses;
        me.tally.bad_requests += batch.bad_requests;
        head_since = blocking::track_head(&input, head_since, &batch);
        if !unsent.is_empty() {
            if let Err(e) = write_all_timed(&mut stream, &unsent, cfg.write_timeout).await {
                return me.failed(&e);
            }
        }
        if let Some(slow) = batch.slow {
            let Some(mut out) = run_slow(&sh, slow).await else {
                return;
            };
            if let Some(t) = &mut tls {
                t.seal(&mut out);
            }
            if let Err(e) = write_all_timed(&mut stream, &out, cfg.write_timeout).await {
                return me.failed(&e);
            }
            me.tally.requests += 1;
            resume = !batch.close;
        }
        if batch.close {
            if let Some(t) = &mut tls {
                // close_notify, if the socket takes it at once.
                t.close_notify();
                let mut alert = Vec::new();
                t.seal(&mut alert);
                let _ = stream.try_write(&alert);
            }
            return linger(&mut stream).await;
        }
    }
}

/// Write all of `buf`, each write bounded by `timeout` (none: unbounded): the deadline is per
/// write, so it is "no progress for `timeout`", and a slow but reading client is never cut.
/// A write that times out is `TimedOut`.
async fn write_all_timed(
    stream: &mut TcpStream,
    mut buf: &[u8],
    timeout: Option<Duration>,
) -> io::Result<()> {
    let Some(t) = timeout.filter(|t| !t.is_zero()) else {
        return stream.write_all(buf).await;
    };
    while !buf.is_empty() {
        match tokio::time::timeout(t, stream.write(buf)).await {
            Err(_) => return Err(io::Error::from(io::ErrorKind::TimedOut)),
            Ok(Ok(0)) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
            Ok(Ok(n)) => buf = &buf[n..],
            Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
            Ok(Err(e)) => return Err(e),
        }
    }
    Ok(())
}

/// Run a slow request the async way; `None` if its blocking task was lost (runtime shutting
/// down).
async fn run_slow(sh: &Arc<Shared>, slow: Slow) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    match slow.route {
        SlowRoute::Sleep { ms } => {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            handlers::sleep_done(&slow, &sh.ctx, &mut out);
        }
        SlowRoute::Status | SlowRoute::Metrics => {
            handlers::run_blocking(&slow, &sh.ctx, &mut out);
        }
        SlowRoute::Cpu { .. } => {
            // Inline on purpose, not `spawn_blocking`: the computation holds this runtime
            // worker (with `current_thread`, the whole server) for as long as it runs, which
            // is what a CPU-heavy handler does to an async server.
            handlers::run_blocking(&slow, &sh.ctx, &mut out);
        }
        SlowRoute::DbRead { .. } | SlowRoute::DbWrite { .. } | SlowRoute::File { .. } => {
            let ctx = Arc::clone(&sh.ctx);
            out = tokio::task::spawn_blocking(move || {
                let mut out = Vec::new();
                handlers::run_blocking(&slow, &ctx, &mut out);
                out
            })
            .await
            .ok()?;
        }
    }
    Some(out)
}

/// Shut down our write side and discard input until the client closes, for at most [`LINGER`]
/// (closing with unread input would reset the connection and could destroy our last response).
async fn linger(stream: &mut TcpStream) {
    if stream.shutdown().await.is_err() {
        return;
    }
    let _ = tokio::time::timeout(LINGER, async {
        loop {
            if stream.readable().await.is_err() {
                return;
            }
            let r = SCRATCH.with(|cell| stream.try_read(&mut cell.borrow_mut().buf));
            match r {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return,
            }
        }
    })
    .await;
}
