//! One worker: an event loop on its own thread that owns its users, their connections, a
//! scratch read buffer and a recorder. Nothing here is shared with other threads except the stop
//! flag (read once per loop turn) and the channels that carry one snapshot per interval.
//!
//! A user is a small state machine (`State`) in a slab; its slab key plus a generation number is
//! the epoll token, so an event that was queued for a socket since closed is recognised and
//! dropped. Per request in steady state (keep-alive, no think time): one `send`, one `recv`, and
//! a share of one `epoll_pwait2` — no `epoll_ctl`, no allocation.
//!
//! The loop, the types and the start are here; what the loop calls is split by what it does:
//! - `arrivals.rs`: users made and started (closed, open, scenario phases, a ramp) and the timer
//!   each waits on;
//! - `conn.rs`: connections: connect, TLS, socket events, the write path and the one read path,
//!   the protocol's outcomes, the server's close, closing;
//! - `streams.rs`: requests as streams of one connection (a URL run's `--streams`, a batch's
//!   requests as HTTP/2 streams), the pace of sends at a rate, and what follows a read;
//! - `users.rs`: what a user does next: requests, replies (the browser), sessions, failures,
//!   retries and resends.
//!
//! Subtleties worth knowing before changing this module:
//! - Sockets are edge-triggered. A `recv` that returns fewer bytes than asked means the socket was
//!   drained at that instant (TCP), so we skip the extra `recv` that would only say EAGAIN; more
//!   data arriving later raises a new edge.
//! - Nothing calls back into the state machine recursively: a failure that happens while starting a
//!   request (a connect refused at once) parks the user on a due-now timer, and the loop handles at
//!   most `TIMER_BATCH` timers per turn, so even a target that refuses everything cannot starve
//!   the interval and stop checks.
//! - Timeouts are not timers: each user holds a deadline and a sweep checks them a few times per
//!   timeout period, and again at the earliest deadline it saw; a response timeout therefore
//!   fires at most `SWEEP_GAP` late, without pushing and cancelling a timer per request.
//! - A connection reads at most `READ_BUDGET` bytes per loop turn, then waits in `more` for the
//!   next turn (which does not sleep): a server that sends faster than we read cannot hold
//!   the loop, and so every deadline, interval and stop check runs whatever arrives.
//! - Timers fire up to the plan's `timer_slack` early (`run_timers`): at a rate the sends of each
//!   slack window share one wake-up instead of costing a sleep and a wake each (issue 29:
//!   `--rate 10000` went from 3.1x to 1.5x the closed model's CPU per response). A request
//!   sent early is timed from its send (`intended.min(sent)`), never from a later instant.
//!   Measured and not adopted: polling a few times without sleeping before a wait, or napping
//!   after a busy turn so replies gather (both cost more CPU per response than the wakes they
//!   saved), and reading an HTTP/2 connection to EAGAIN with one write after (no gain).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use headroom_core::session::ArrivalPhase;
use headroom_core::{ErrorKind, LoadModel, Plan};
use headroom_metrics::{Recorder, Snapshot};
use headroom_proto::http1::ResponseDecoder;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use slab::Slab;

use crate::browser::{Browser, BrowserConfig};
use crate::flight::Refill;
use crate::pacer;
use crate::poller::{Epoll, Event};
use crate::protocol::Protocol;
use crate::ramp::RampState;
use crate::session::{Program, SessionState};
use crate::tls::{TlsClient, UserSessions};
use crate::transport::Conn;
use headroom_proto::http1::Batch;
use users::browser_config;

mod arrivals;
mod conn;
mod streams;
mod users;

/// Size of the per-worker receive buffer. Every connection reads into it, so an idle connection
/// holds no buffer of its own.
const SCRATCH: usize = 64 * 1024;
/// Events taken per epoll wait.
const EVENTS: usize = 1024;
/// Timers handled per loop turn at most (see the module notes).
const TIMER_BATCH: usize = 4096;
/// Longest sleep, so the stop flag (Ctrl-C) is noticed promptly. Not shorter: every wake of an
/// otherwise idle worker costs a context switch (~80 µs on the 2-core VM here, measured with
/// `perf stat`), and a run of thousands of idle XMPP users is mostly such wakes; at 50 ms they
/// were ~10% of the generator's CPU in bench/xmpp-vs-tsung.sh. Deadlines, intervals and timers
/// are exact whatever this is: the sleep ends at the earliest of them.
const MAX_WAIT: Duration = Duration::from_millis(200);
/// Bytes one connection may read per loop turn. A server that sends faster than we read would
/// otherwise hold `read` for ever, and with it every deadline, interval and stop check of the
/// worker: over TLS (read until `WouldBlock`) an endless body kept `--timeout 1s` from firing
/// for 1.2-6.8 s (issue 26). Past this the connection goes on in the next turn.
const READ_BUDGET: usize = 1 << 20;
/// Closest spacing of two deadline sweeps, and so how late a deadline may fire (see `sweep`).
const SWEEP_GAP: Duration = Duration::from_millis(10);
/// Sessions a closed user may start within one turn before yielding (a session without I/O).
const SESSIONS_PER_TURN: usize = 64;

/// Everything a worker is handed at start; read-only.
pub(crate) struct WorkerSetup {
    /// This worker in its process (snapshots, thread name).
    pub id: usize,
    /// This worker among every worker of the run, over all agents: `segment.index * workers +
    /// id` of `segment.count * workers`. Every split between workers uses these.
    pub slot: usize,
    pub slots: usize,
    pub plan: Arc<Plan>,
    /// The encoded request, repeated `plan.pipeline` times back to back, with its parts.
    pub request: Arc<Batch>,
    pub head_request: bool,
    pub start: Instant,
    pub stop: Arc<AtomicBool>,
    pub snapshots: Sender<Snapshot>,
    pub recycled: Receiver<Box<Recorder>>,
    /// The prepared session workload (scenario runs).
    pub program: Option<Arc<Program>>,
    /// TLS on every connection (a copy per worker: its own session store).
    pub tls: Option<TlsClient>,
    /// How users top up their requests in flight: per reply for HTTP/2 URL runs whose every
    /// request is a copy of the run's one (no session, no hops), a batch at a time otherwise.
    pub refill: Refill,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// No request under way and nothing scheduled (about to start one, or parked at the end).
    Idle,
    /// Waiting for a timer (think time, paced send, or a retry after a failure).
    Waiting,
    /// Non-blocking connect in progress.
    Connecting,
    /// TCP connected; the TLS handshake is under way.
    Tls,
    /// Connected; the protocol's setup (login, startup, upgrade) is running.
    Handshake,
    /// Request partly written; waiting for the socket to take the rest.
    Writing,
    /// Request written; reading the response(s).
    Reading,
}

struct User {
    /// The connection (plain or TLS), while there is one.
    conn: Option<Conn>,
    /// Bumped whenever the user gets a new socket or loses one, so stale events are ignored.
    gen: u32,
    /// Bumped whenever the user schedules its one wake, so a superseded timer is ignored. Apart
    /// from `gen`: losing the connection while thinking must not cancel the think's end (a
    /// server's keep-alive timeout would otherwise stall the user for good).
    tgen: u32,
    /// How far the current connection got, for counting what the server holds.
    net: Net,
    /// The current connection completed a reply and was kept: a request that then finds it
    /// closed before any byte of its reply was sent into a keep-alive close, not a failure.
    reused: bool,
    /// Bytes of a reply to the current batch have arrived.
    replied: bool,
    /// The current request already went again after finding its connection closed.
    resent: bool,
    /// The server closed this user's last connection while idle: the next connect is a
    /// reconnect.
    lost_idle: bool,
    state: State,
    /// What the timer the user waits on is for.
    wake: Wake,
    decoder: ResponseDecoder,
    /// Requests this user may still start (`None` = unlimited).
    remaining: Option<u64>,
    /// Global user index (pacing slot in rate mode).
    global: u64,
    /// At a rate: paced sends that fell due so far.
    seq: u64,
    /// At a rate: sends that fell due and wait for room in the in-flight table (a free
    /// stream, an answered batch), and how many paced sends went out (the next one's intended
    /// time is the pace slot `sent_seq`).
    due: u32,
    sent_seq: u64,
    /// At a rate: the user's pace timers carry this (never changed by a reconnect,
    /// unlike `gen`: the pace goes on whatever happens to the connection).
    pace_gen: u32,
    /// When the current request was meant to be sent: the origin of corrected latency.
    intended: Instant,
    /// When it was actually written: the origin of uncorrected latency.
    sent: Instant,
    /// When the current connect began.
    connect_start: Instant,
    /// When the current connection's TCP handshake completed (the origin of `served`).
    tcp_at: Instant,
    /// Connect or response deadline; `None` while nothing is awaited.
    deadline: Option<Instant>,
    /// Requests in the current batch (pipeline depth, or less at the end of a quota).
    batch: u32,
    /// Bytes of the batch written so far.
    written: u32,
    /// The session being run (scenario runs); boxed so URL-mode users stay small.
    sess: Option<Box<SessionState>>,
    /// Arrived in an open phase: leaves after one session and counts against `max_users`.
    arrived: bool,
    /// A `once` user: leaves after its one session (and counts against no phase).
    once: bool,
    /// The connection's protocol above its transport (`Plain` while there is none).
    protocol: Protocol,
    /// Cookies, redirects, Digest answers (HTTP/1.1), made on first need.
    browser: Option<Box<Browser>>,
    /// URL runs: the request to write is the browser's (`Browser::hop`), not the run's shared one.
    own_request: bool,
    /// A ramped closed user: its index in the worker's ramp order ([`NO_RAMP`] otherwise).
    ramp: u32,
    /// The user's own TLS sessions to resume, made at its first TLS connect (`tls.rs`).
    tls_sessions: Option<UserSessions>,
    /// The requests in flight on the connection (`flight.rs`), every protocol's: a batch's
    /// requests answered in order (HTTP/1.1, raw TCP, the links) or its streams (HTTP/2).
    flight: Vec<crate::flight::Slot>,
    /// Requests the server refused unprocessed (a GOAWAY's unprocessed streams,
    /// REFUSED_STREAM), to go again once: first in `fill` (URL runs), or once the rest of the
    /// batch is answered (`submit_batch`).
    refused: Vec<crate::flight::Refused>,
}

impl User {
    /// Requests of the current batch not yet answered: in flight, or refused by the server
    /// unprocessed and waiting to go again with the rest of the batch. (A URL run's refused
    /// streams are not its batch's: `fill` sends them again whatever happens to the
    /// connection.)
    fn unanswered(&self, refill: Refill) -> u32 {
        let refused = if refill.refused_are_the_batchs() {
            self.refused.len()
        } else {
            0
        };
        (self.flight.len() + refused) as u32
    }
}

/// How far a user's connection got: the server holds it once it has sent a byte on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Net {
    /// No connection, or a connect under way.
    None,
    /// TCP connected (perhaps only into the server's accept queue).
    Tcp,
    /// The server sent its first byte: it has accepted the connection.
    Served,
}

/// [`User::ramp`] of a user that no ramp starts or stops.
const NO_RAMP: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wake {
    /// Start the next request, intended at the timer's instant.
    Send,
    /// Decide what to do next (after a failure).
    Next,
    /// A send that expects no reply was written: count it done.
    Written,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Timer {
    at: Instant,
    key: u32,
    /// The user's `tgen` when scheduled (`pace_gen` for a pace tick).
    gen: u32,
    /// A pace tick of a user at a rate (checked against `pace_gen`, whatever
    /// the user's state), not the user's one wake.
    pace: bool,
}

pub(crate) struct Worker {
    s: WorkerSetup,
    ep: Epoll,
    events: Vec<Event>,
    users: Slab<User>,
    timers: BinaryHeap<Reverse<Timer>>,
    scratch: Box<[u8]>,
    rec: Box<Recorder>,
    rng: SmallRng,
    /// This worker's share of `--requests` still to start (`None` = unlimited).
    budget: Option<u64>,
    /// How users' in-flight tables are topped up (`flight.rs`).
    refill: Refill,
    /// Open model: when the next user arrives, and how many may still arrive.
    next_arrival: Option<Instant>,
    arrivals_left: Option<u64>,
    arrival_rate: f64,
    /// TCP connections established and served connections (see [`Net`]) open now, and their
    /// peaks since the last interval.
    tcp_open: u64,
    tcp_peak: u64,
    served_open: u64,
    served_peak: u64,
    interval_index: u64,
    next_interval: Instant,
    next_sweep: Instant,
    sweep_every: Duration,
    deadline: Option<Instant>,
    bind_next: usize,
    /// Source of generation numbers: unique per worker, so a slab key reused by a new user can
    /// never match a timer or event of the user that held it before.
    next_gen: u32,
    /// Users whose deadline passed, collected by the sweep (kept to reuse its allocation).
    due: Vec<(usize, ErrorKind)>,
    /// Users whose connection keeps itself alive (MQTT), collected by the sweep (reused).
    pings: Vec<usize>,
    /// The buffer a user's batch of joined requests is built in, lent while it is written
    /// (`SessionState::run_ops`, `Worker::written_ahead`): one for the worker, not one of up
    /// to 4 KiB per user for the run.
    join_spare: Vec<u8>,
    /// Connections (key, generation) that read `READ_BUDGET` in a turn and may hold more: read
    /// again next turn (edge-triggered: no new event comes for bytes already there, nor for
    /// plaintext rustls holds). The second list is the first's spare allocation.
    more: Vec<(usize, u32)>,
    more_spare: Vec<(usize, u32)>,
    /// Requests left in flight when the run stopped (not failures: the run ended under them).
    pub in_flight: u64,
    /// Scenario runs: sequential CSV cursors by feeder, the phases and where we are in them.
    cursors: Vec<usize>,
    phases: Vec<ArrivalPhase>,
    phase_idx: usize,
    phase_start: Instant,
    /// No arrival drawn yet in the current phase (constant arrivals stagger their first one).
    phase_fresh: bool,
    /// Users from open phases alive now.
    open_alive: u64,
    /// Users this worker made arrive so far (their global ids derive from it).
    arrived_total: u64,
    /// TLS for every connection (this worker's copy).
    tls: Option<TlsClient>,
    /// The HTTP version the run's connections speak, as [`headroom_metrics::Negotiated::http`].
    http: u8,
    /// HTTP users' cookies, redirects, credentials and decoding; `None` when none apply.
    browser_cfg: Option<Arc<BrowserConfig>>,
    /// A ramped closed population (`Plan::ramp`): which of its users are wanted now.
    ramp: Option<Box<RampState>>,
    /// The slab key of each ramped user alive, by its index in the ramp order.
    ramp_keys: Vec<Option<u32>>,
    /// This thread's CPU time and run delay, and the instant, at the last interval's emission
    /// (the worker's own CPU per interval: the generator's self-check).
    cpu_at: (Duration, Duration),
    emitted_at: Instant,
}

/// CPU time this thread has used (user and system) and the time it waited runnable for a CPU,
/// from /proc/thread-self/schedstat (read once per interval); where that is missing, the CPU
/// clock alone and no wait.
fn thread_cpu() -> (Duration, Duration) {
    if let Ok(text) = std::fs::read_to_string("/proc/thread-self/schedstat") {
        let mut f = text.split_ascii_whitespace().map(|v| v.parse::<u64>().ok());
        if let (Some(Some(cpu)), Some(Some(wait))) = (f.next(), f.next()) {
            return (Duration::from_nanos(cpu), Duration::from_nanos(wait));
        }
    }
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write to; the clock id is a constant.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return (Duration::ZERO, Duration::ZERO);
    }
    (
        Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32),
        Duration::ZERO,
    )
}

/// The HTTP version a run's connections speak: 20 (HTTP/2), 11 (HTTP/1.1, WebSocket's upgrade
/// included), 0 for XMPP, PostgreSQL, MQTT and a scenario of raw TCP steps only.
fn http_version(plan: &Plan) -> u8 {
    use headroom_core::session::{LinkSpec, Op, SessionBody};
    if plan.http2.is_some() {
        return 20;
    }
    let Some(w) = plan.workload.as_deref() else {
        return 11;
    };
    match &w.link {
        LinkSpec::Xmpp(_)
        | LinkSpec::Pgsql(_)
        | LinkSpec::Mqtt(_)
        | LinkSpec::Ldap
        | LinkSpec::Mysql(_)
        | LinkSpec::Amqp(_) => 0,
        LinkSpec::WebSocket(_) => 11,
        LinkSpec::Plain => {
            let http = w.sessions.iter().any(|s| match &s.body {
                SessionBody::Ops { ops, .. } => ops.iter().any(|o| matches!(o, Op::Request(_))),
                _ => true,
            });
            if http {
                11
            } else {
                0
            }
        }
    }
}

/// The bit of a token's key that marks a user's second connection (BOSH's, `link::BoshLink`):
/// keys stay far below it (a worker holds at most the process's 20,000 descriptors).
const AUX: usize = 1 << 31;

fn token(key: usize, gen: u32) -> u64 {
    (u64::from(gen) << 32) | key as u64
}

impl Worker {
    pub fn new(s: WorkerSetup) -> io::Result<Worker> {
        let plan = s.plan.clone();
        let (id, n) = (s.slot, s.slots);
        let budget = plan.stop.requests.map(|r| pacer::share(r, n, id));
        let t = plan.timeout.min(plan.connect_timeout);
        let sweep_every = (t / 8).clamp(Duration::from_millis(5), Duration::from_millis(250));
        let start = s.start;
        let mut w = Worker {
            ep: Epoll::new()?,
            events: Vec::with_capacity(EVENTS),
            users: Slab::new(),
            timers: BinaryHeap::new(),
            scratch: vec![0u8; SCRATCH].into_boxed_slice(),
            rec: Box::new(Recorder::new()),
            rng: SmallRng::seed_from_u64((0x5EED_0000 + id as u64) ^ seed_entropy()),
            budget,
            next_arrival: None,
            arrivals_left: None,
            arrival_rate: 0.0,
            tcp_open: 0,
            tcp_peak: 0,
            served_open: 0,
            served_peak: 0,
            interval_index: 0,
            next_interval: start + plan.interval,
            cpu_at: thread_cpu(),
            emitted_at: start.max(Instant::now()),
            next_sweep: start + sweep_every,
            sweep_every,
            deadline: plan.stop.duration.map(|d| start + d),
            bind_next: id,
            next_gen: 0,
            due: Vec::new(),
            pings: Vec::new(),
            join_spare: Vec::new(),
            more: Vec::new(),
            more_spare: Vec::new(),
            in_flight: 0,
            cursors: Vec::new(),
            phases: Vec::new(),
            phase_idx: 0,
            phase_start: start,
            phase_fresh: true,
            open_alive: 0,
            arrived_total: 0,
            tls: s.tls.clone(),
            http: http_version(&plan),
            browser_cfg: browser_config(&plan, s.program.as_deref()).map(Arc::new),
            ramp: None,
            ramp_keys: Vec::new(),
            refill: s.refill,
            s,
        };
        if let Some(p) = w.s.program.clone() {
            w.rec.ensure_names(p.names(), p.matches());
            // Worker k of n reads rows k, k + n, ... of each file (see `CsvRow::Next`).
            w.cursors = vec![id; p.w.feeders.len()];
        }
        match plan.model {
            LoadModel::Closed { .. } | LoadModel::Sessions { .. } if !plan.ramp.is_empty() => {
                w.ramp_init();
            }
            LoadModel::Closed {
                users, per_user, ..
            } => {
                let mine = pacer::share(u64::from(users), n, id);
                let first = pacer::first_index(u64::from(users), n, id);
                for g in first..first + mine {
                    w.spawn_user(g, per_user, start);
                }
            }
            LoadModel::Rate { connections, .. } => {
                let c = u64::from(connections);
                let (mine, first) = (pacer::share(c, n, id), pacer::first_index(c, n, id));
                for g in first..first + mine {
                    // Each user's first send is at its own slot, not all at time zero.
                    let key = w.add_user(g, None);
                    let at = start + w.rate_offset(g, 0);
                    w.schedule(key, at, Wake::Send);
                    w.rec.counters.users_started += 1;
                }
            }
            LoadModel::Open {
                rate,
                process,
                max_users,
                ..
            } => {
                w.arrival_rate = rate / n as f64;
                w.arrivals_left = max_users.map(|m| pacer::share(m, n, id));
                let u = w.rng.gen::<f64>();
                w.next_arrival = Some(start + pacer::first_arrival(process, rate, n, id, u));
            }
            LoadModel::Sessions { users, ref phases } => {
                let users = u64::from(users);
                let (mine, first) = (pacer::share(users, n, id), pacer::first_index(users, n, id));
                for g in first..first + mine {
                    w.spawn_session_user(g, false, start);
                }
                // Once users: worker `id` of `n` takes every n-th, each asleep until its start.
                if let Some(prog) = w.s.program.clone() {
                    for (i, o) in prog.w.once.iter().enumerate() {
                        if i % n == id {
                            let g = headroom_core::session::ONCE_ID_BIT + i as u64;
                            w.spawn_once_user(g, o.session, start + o.at);
                        }
                    }
                }
                w.phases = phases.clone();
                w.next_arrival = w.next_phase_arrival(start);
            }
        }
        Ok(w)
    }

    /// The worker's loop. Returns when the run ends for this worker.
    pub fn run(mut self) -> io::Result<Worker> {
        loop {
            let now = Instant::now();
            if self.s.stop.load(Ordering::Relaxed) || self.deadline.is_some_and(|d| now >= d) {
                break;
            }
            if now >= self.next_interval {
                // Ramped users due before the interval's end start in it, however late this
                // turn is (their first request's latency runs from that instant).
                self.ramp_tick(self.next_interval - Duration::from_nanos(1));
                self.emit_interval(false);
            }
            if now >= self.next_sweep {
                // Sets the next sweep too (at the earliest deadline it saw, if sooner).
                self.sweep(now);
            }
            self.arrivals(now);
            self.ramp_tick(now);
            self.run_timers(now);
            if !self.more.is_empty() {
                self.read_more();
            }
            if self.finished() {
                break;
            }
            let wait = self.wait_time(Instant::now());
            let mut events = std::mem::take(&mut self.events);
            self.ep.wait(&mut events, Some(wait))?;
            for ev in events.iter() {
                let (data, flags) = (ev.u64, ev.events);
                let (key, gen) = ((data & 0xFFFF_FFFF) as usize, (data >> 32) as u32);
                if key & AUX != 0 {
                    self.on_aux_event(key & !AUX, gen, flags);
                } else {
                    self.on_event(key, gen, flags);
                }
            }
            self.events = events;
        }
        self.shutdown();
        Ok(self)
    }

    /// Nothing left to do: no users, and no arrivals to come.
    fn finished(&self) -> bool {
        self.users.is_empty() && self.next_arrival.is_none() && self.ramp_next().is_none()
    }

    fn wait_time(&self, now: Instant) -> Duration {
        if !self.more.is_empty() {
            // Connections that may hold more bytes: look at the sockets and go on at once.
            return Duration::ZERO;
        }
        let mut until = self.next_interval.min(self.next_sweep);
        if let Some(Reverse(t)) = self.timers.peek() {
            until = until.min(t.at);
        }
        if let Some(a) = self.next_arrival {
            until = until.min(a);
        }
        if let Some(r) = self.ramp_next() {
            until = until.min(r);
        }
        if let Some(d) = self.deadline {
            until = until.min(d);
        }
        until.saturating_duration_since(now).min(MAX_WAIT)
    }

    /// Fire the timers due by `now`, and those due within the plan's timer slack after it
    /// (early: sends that fall due close together go out in one wake-up, not one each), but
    /// none at or after the run's end.
    fn run_timers(&mut self, now: Instant) {
        // The loop stops at the deadline before this runs, so `now` is before it.
        let cutoff = now + self.s.plan.timer_slack;
        let end = self.deadline;
        for _ in 0..TIMER_BATCH {
            match self.timers.peek() {
                Some(Reverse(t)) if t.at <= cutoff && end.is_none_or(|d| t.at < d) => {}
                _ => return,
            }
            let Some(Reverse(t)) = self.timers.pop() else {
                return;
            };
            let key = t.key as usize;
            let Some(u) = self.users.get(key) else {
                continue;
            };
            // A stale timer (its user moved on) is no send: only live ones count as late.
            let live = if t.pace {
                u.pace_gen == t.gen
            } else {
                u.tgen == t.gen && u.state == State::Waiting
            };
            if live {
                self.rec
                    .record_lag(now.saturating_duration_since(t.at).as_micros() as u64);
            }
            if t.pace {
                if u.pace_gen == t.gen {
                    self.pace_tick(key);
                }
                continue;
            }
            if u.tgen != t.gen || u.state != State::Waiting {
                continue;
            }
            match u.wake {
                Wake::Send => self.start_request(key, t.at),
                Wake::Next if u.sess.is_some() => self.session_next(key, t.at),
                Wake::Next => self.next_request(key, Instant::now()),
                Wake::Written => self.complete_reply(key, None, true, false, None),
            }
        }
    }

    /// Check connect and response deadlines, and set the next sweep: a sweep period from now,
    /// or the earliest deadline still to come if sooner (but not within `SWEEP_GAP`: a run of
    /// users timing out one after the other costs a sweep per 10 ms, not one per user). A
    /// deadline is at least 8 periods ahead when set, so some sweep sees it before it falls
    /// due: it fires at most `SWEEP_GAP` late (issue 26: `--timeout 1s` used to fire up to
    /// 125 ms late).
    fn sweep(&mut self, now: Instant) {
        // Collect first: failing a user mutates the slab. The list is reused across sweeps.
        let mut due = std::mem::take(&mut self.due);
        let mut next = now + self.sweep_every;
        let mut pings = std::mem::take(&mut self.pings);
        // Only MQTT links ping: other runs do not look into each user's link (a cache miss a
        // user a sweep: ~5% of the user time at 4,000 idle LDAP users).
        let mqtt = self
            .s
            .program
            .as_deref()
            .is_some_and(|p| matches!(p.w.link, headroom_core::session::LinkSpec::Mqtt(_)));
        for (key, u) in self.users.iter() {
            if mqtt && u.protocol.link().is_some_and(|l| l.keeps_alive()) {
                pings.push(key);
            }
            if let Some(d) = u.deadline {
                if d > now {
                    next = next.min(d.max(now + SWEEP_GAP));
                } else {
                    let kind = if matches!(u.state, State::Connecting | State::Tls) {
                        ErrorKind::ConnectTimeout
                    } else {
                        ErrorKind::Timeout
                    };
                    due.push((key, kind));
                }
            }
        }
        for &(key, kind) in &due {
            self.fail(key, kind, now);
        }
        due.clear();
        self.due = due;
        // MQTT keep-alive: a PINGREQ on each connection that has sent nothing for a while (a
        // subscriber waiting for messages, a user thinking), written unless a request is half
        // written (it goes after it then).
        for &key in &pings {
            let Some(u) = self.users.get_mut(key) else {
                continue;
            };
            let Some(link) = u.protocol.link_mut() else {
                continue;
            };
            if link.keep_alive(now, &mut self.rec.counters) && u.state != State::Writing {
                self.flush_proto(key);
            }
        }
        pings.clear();
        self.pings = pings;
        self.next_sweep = next;
    }

    fn emit_interval(&mut self, last: bool) {
        let c = &mut self.rec.counters;
        c.connections_open = self.served_open;
        c.connections_peak = self.served_peak;
        c.tcp_connected_open = self.tcp_open;
        c.tcp_connected_peak = self.tcp_peak;
        c.users_active = self.users.len() as u64;
        // The worker's own CPU and run delay over the interval, against the wall time it
        // covered: a worker running or waiting to run nearly all of it never idled.
        let ((cpu, wait), at) = (thread_cpu(), Instant::now());
        let used = cpu.saturating_sub(self.cpu_at.0);
        let waited = wait.saturating_sub(self.cpu_at.1);
        let wall = at.saturating_duration_since(self.emitted_at);
        (self.cpu_at, self.emitted_at) = ((cpu, wait), at);
        c.worker_cpu_us = used.as_micros() as u64;
        c.worker_wait_us = waited.as_micros() as u64;
        c.worker_intervals = 1;
        let lag = &self.rec.lag;
        c.worker_late_intervals = u64::from(
            lag.len() >= headroom_metrics::LATE_MIN_EVENTS
                && lag.value_at_quantile(0.99) >= headroom_metrics::LATE_LAG_US,
        );
        c.worker_busy_intervals = u64::from(
            !wall.is_zero()
                && (used + waited).as_secs_f64()
                    >= headroom_metrics::BUSY_WORKER_PCT / 100.0 * wall.as_secs_f64(),
        );
        let fresh = self
            .s
            .recycled
            .try_recv()
            .unwrap_or_else(|_| Box::new(Recorder::new()));
        let recorder = std::mem::replace(&mut self.rec, fresh);
        if let Some(p) = &self.s.program {
            // A fresh recorder (none recycled yet) has no per-name tables.
            self.rec.ensure_names(p.names(), p.matches());
        }
        let snap = Snapshot {
            worker: self.s.id,
            index: self.interval_index,
            last,
            recorder,
        };
        // The collector outlives the workers; if it is gone, there is nobody to report to.
        let _ = self.s.snapshots.send(snap);
        self.served_peak = self.served_open;
        self.tcp_peak = self.tcp_open;
        self.interval_index += 1;
        self.next_interval += self.s.plan.interval;
    }

    fn shutdown(&mut self) {
        // Report the connections as they were when the run ended, not after we closed them.
        let open_at_stop = (self.tcp_open, self.served_open);
        let keys: Vec<usize> = self.users.iter().map(|(k, _)| k).collect();
        for key in keys {
            let u = &self.users[key];
            if matches!(u.state, State::Reading | State::Writing) {
                self.in_flight += u.flight.len() as u64;
            }
            self.close(key);
        }
        (self.tcp_open, self.served_open) = open_at_stop;
        self.emit_interval(true);
        (self.tcp_open, self.served_open) = (0, 0);
    }
}

/// Entropy for the per-worker RNG seed (runs differ; a fixed seed can be added later).
fn seed_entropy() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    t.as_nanos() as u64 ^ u64::from(std::process::id()).rotate_left(32)
}

#[cfg(test)]
mod tests {
    use super::conn::open_socket;
    use super::*;
    use headroom_core::{HttpRequest, SocketOptions, StopCondition};

    fn plan(socket: SocketOptions) -> Plan {
        Plan {
            target: "127.0.0.1:9".parse().unwrap(),
            target_name: "t".into(),
            request: HttpRequest {
                method: "GET".into(),
                path: "/".into(),
                host: "t".into(),
                headers: vec![],
                body: vec![],
            },
            model: LoadModel::Closed {
                users: 1,
                per_user: Some(1),
                think: None,
            },
            ramp: Vec::new(),
            stop: StopCondition::default(),
            threads: 1,
            interval: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            expect_status: Default::default(),
            keepalive: true,
            pipeline: 1,
            socket,
            workload: None,
            segment: Default::default(),
            start_at: None,
            tls: None,
            http2: None,
            browser: Default::default(),
            timer_slack: headroom_core::DEFAULT_TIMER_SLACK,
        }
    }

    #[test]
    fn socket_options_are_applied() {
        let p = plan(SocketOptions {
            sndbuf: Some(8192),
            rcvbuf: Some(16384),
            nodelay: true,
            bind: vec!["127.0.0.7".parse().unwrap()],
        });
        let s = open_socket(&p, Some("127.0.0.7".parse().unwrap())).unwrap();
        // Linux doubles the requested size to account for bookkeeping.
        assert_eq!(s.send_buffer_size().unwrap(), 16384);
        assert_eq!(s.recv_buffer_size().unwrap(), 32768);
        assert!(s.nodelay().unwrap());
        let local = s.local_addr().unwrap().as_socket().unwrap();
        assert_eq!(local.ip().to_string(), "127.0.0.7");
        assert_eq!(
            local.port(),
            0,
            "IP_BIND_ADDRESS_NO_PORT defers the port to connect"
        );
        let plain = open_socket(&plan(SocketOptions::default()), None).unwrap();
        assert!(!plain.nodelay().unwrap());
    }

    #[test]
    fn tokens_round_trip() {
        let t = token(12345, 0xDEAD_BEEF);
        assert_eq!((t & 0xFFFF_FFFF) as usize, 12345);
        assert_eq!((t >> 32) as u32, 0xDEAD_BEEF);
    }
}
