//! One worker: an event loop on its own thread that owns its users, their connections, a
//! scratch read buffer and a recorder. Nothing here is shared with other threads except the stop
//! flag (read once per loop turn) and the channels that carry one snapshot per interval.
//!
//! A user is a small state machine (`State`) in a slab; its slab key plus a generation number is
//! the epoll token, so an event that was queued for a socket since closed is recognised and
//! dropped. Per request in steady state (keep-alive, no think time): one `send`, one `recv`, and
//! a share of one `epoll_pwait2` — no `epoll_ctl`, no allocation.
//!
//! Subtleties worth knowing before changing this file:
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

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use headroom_core::session::ArrivalPhase;
use headroom_core::{ArrivalProcess, ErrorKind, LoadModel, Plan, ProtoCounter};
use headroom_metrics::{micros, Recorder, Snapshot};
use headroom_proto::h2;
use headroom_proto::http1::{ResponseDecoder, DEFAULT_CAPTURE_BYTES};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use slab::Slab;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::agent::{self, Agent, AgentConfig, Next};
use crate::http2::{H2Conn, H2Request, SESSION_STREAMS};
use crate::link::Link;
use crate::pacer;
use crate::poller::{self, Epoll, Event};
use crate::proto::{self, Outcome, Proto};
use crate::ramp::{Change, RampState};
use crate::session::{Action, Awaiting, Env, Program, SessionState};
use crate::tls::{TlsClient, UserSessions};
use crate::transport::{Conn, IoErr};

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
    /// The encoded request, repeated `plan.pipeline` times back to back.
    pub request: Arc<[u8]>,
    pub request_len: usize,
    pub head_request: bool,
    pub start: Instant,
    pub stop: Arc<AtomicBool>,
    pub snapshots: Sender<Snapshot>,
    pub recycled: Receiver<Recorder>,
    /// The prepared session workload (scenario runs).
    pub program: Option<Arc<Program>>,
    /// TLS on every connection (a copy per worker: its own session store).
    pub tls: Option<TlsClient>,
    /// HTTP/2 runs: the request, in the parts a stream sends.
    pub h2req: Option<Arc<H2Request>>,
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
    /// Paced sends done (rate mode); for HTTP/2, paced sends that fell due.
    seq: u64,
    /// HTTP/2 at a rate: sends that fell due and wait for a free stream, and how many paced
    /// sends went out (the next one's intended time is the pace slot `sent_seq`).
    due: u32,
    sent_seq: u64,
    /// HTTP/2 at a rate: the user's pace timers carry this (never changed by a reconnect, unlike
    /// `gen`: the pace goes on whatever happens to the connection).
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
    /// Responses still expected in the current batch.
    outstanding: u32,
    /// Bytes of the batch written so far.
    written: u32,
    /// The session being run (scenario runs); boxed so URL-mode users stay small.
    sess: Option<Box<SessionState>>,
    /// Arrived in an open phase: leaves after one session and counts against `max_users`.
    arrived: bool,
    /// The connection's protocol above its transport (`Plain` while there is none).
    proto: Proto,
    /// Cookies, redirects, Digest answers (HTTP/1.1), made on first need.
    agent: Option<Box<Agent>>,
    /// URL runs: the request to write is the agent's (`Agent::hop`), not the run's shared one.
    own_request: bool,
    /// A ramped closed user: its index in the worker's ramp order ([`NO_RAMP`] otherwise).
    ramp: u32,
    /// The user's own TLS sessions to resume, made at its first TLS connect (`tls.rs`).
    tls_sessions: Option<UserSessions>,
    /// HTTP/2: requests the server refused unprocessed (a GOAWAY's unprocessed streams,
    /// REFUSED_STREAM), to go again once: first in `h2_fill` (URL runs), or once the rest of
    /// the session's batch is answered (`h2_send_session`).
    refused: Vec<crate::http2::Refused>,
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
    /// A pace tick of an HTTP/2 user at a rate (checked against `pace_gen`, whatever the
    /// user's state), not the user's one wake.
    pace: bool,
}

pub(crate) struct Worker {
    s: WorkerSetup,
    ep: Epoll,
    events: Vec<Event>,
    users: Slab<User>,
    timers: BinaryHeap<Reverse<Timer>>,
    scratch: Box<[u8]>,
    rec: Recorder,
    rng: SmallRng,
    /// This worker's share of `--requests` still to start (`None` = unlimited).
    budget: Option<u64>,
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
    /// HTTP/1.1 users' cookies, redirects and credentials; `None` when none apply.
    agent_cfg: Option<Arc<AgentConfig>>,
    /// A ramped closed population (`Plan::ramp`): which of its users are wanted now.
    ramp: Option<Box<RampState>>,
    /// The slab key of each ramped user alive, by its index in the ramp order.
    ramp_keys: Vec<Option<u32>>,
}

/// The HTTP version a run's connections speak: 20 (HTTP/2), 11 (HTTP/1.1, WebSocket's upgrade
/// included), 0 for XMPP, PostgreSQL and a scenario of raw TCP steps only.
fn http_version(plan: &Plan) -> u8 {
    use headroom_core::session::{LinkSpec, Op, SessionBody};
    if plan.http2.is_some() {
        return 20;
    }
    let Some(w) = plan.workload.as_deref() else {
        return 11;
    };
    match &w.link {
        LinkSpec::Xmpp(_) | LinkSpec::Pgsql(_) => 0,
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
            rec: Recorder::new(),
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
            next_sweep: start + sweep_every,
            sweep_every,
            deadline: plan.stop.duration.map(|d| start + d),
            bind_next: id,
            next_gen: 0,
            due: Vec::new(),
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
            agent_cfg: agent_config(&plan, s.program.as_deref()).map(Arc::new),
            ramp: None,
            ramp_keys: Vec::new(),
            s,
        };
        if let Some(p) = w.s.program.clone() {
            w.rec.ensure_names(p.names(), p.matches());
            w.cursors = vec![0; p.w.feeders.len()];
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
                w.phases = phases.clone();
                w.next_arrival = w.next_phase_arrival(start);
            }
        }
        Ok(w)
    }

    fn rate_offset(&self, g: u64, k: u64) -> Duration {
        match self.s.plan.model {
            LoadModel::Rate { connections, rate } => {
                pacer::rate_offset(g, k, u64::from(connections), rate)
            }
            _ => Duration::ZERO,
        }
    }

    /// A scenario user (closed, or arrived in a phase) whose session starts at `at`; its key.
    fn spawn_session_user(&mut self, global: u64, arrived: bool, at: Instant) -> Option<usize> {
        let prog = self.s.program.clone()?;
        let key = self.add_user(global, None);
        let fixed = if arrived {
            None
        } else {
            prog.w.population_session(global)
        };
        let session = fixed.unwrap_or_else(|| prog.w.draw(self.rng.gen::<f64>()));
        let mut st = Box::new(SessionState::new(&prog, global));
        st.begin(&prog, session, &mut self.rng, at);
        let u = &mut self.users[key];
        u.sess = Some(st);
        u.arrived = arrived;
        if arrived {
            self.open_alive += 1;
        }
        self.rec.counters.users_started += 1;
        self.schedule(key, at, Wake::Next);
        Some(key)
    }

    /// The next arrival after `from` over the phases, moving to later phases as they begin.
    /// Poisson phases with a ramp use thinning (candidates at the peak rate, each kept with
    /// probability rate(t)/peak), which gives an exact non-homogeneous Poisson process.
    fn next_phase_arrival(&mut self, from: Instant) -> Option<Instant> {
        let n = self.s.slots as f64;
        let mut t = from;
        loop {
            let ph = *self.phases.get(self.phase_idx)?;
            let end = self.phase_start + ph.duration;
            let into = |at: Instant| at.saturating_duration_since(self.phase_start).as_secs_f64();
            let gap = match ph.process {
                ArrivalProcess::Poisson => {
                    pacer::arrival_gap(ArrivalProcess::Poisson, ph.peak() / n, self.rng.gen())
                }
                ArrivalProcess::Constant => {
                    let total = ph.rate_at(into(t)).max(ph.peak() * 1e-3);
                    if self.phase_fresh {
                        // Worker i of n takes global slots i, i + n, ...: the merged stream is
                        // evenly spaced instead of n arrivals at once.
                        pacer::first_arrival(
                            ArrivalProcess::Constant,
                            total,
                            self.s.slots,
                            self.s.slot,
                            0.0,
                        )
                    } else {
                        pacer::arrival_gap(ArrivalProcess::Constant, total / n, 0.0)
                    }
                }
            };
            let cand = t + gap;
            if cand >= end {
                // Memoryless: sampling afresh from the phase boundary keeps the process exact.
                self.phase_idx += 1;
                self.phase_start = end;
                self.phase_fresh = true;
                t = end;
                continue;
            }
            self.phase_fresh = false;
            t = cand;
            if ph.process == ArrivalProcess::Poisson && ph.from != ph.to {
                let keep = ph.rate_at(into(cand)) / ph.peak();
                if self.rng.gen::<f64>() >= keep {
                    continue;
                }
            }
            return Some(cand);
        }
    }

    fn add_user(&mut self, global: u64, remaining: Option<u64>) -> usize {
        let now = self.s.start;
        self.next_gen = self.next_gen.wrapping_add(1);
        let key = self.users.insert(User {
            conn: None,
            gen: self.next_gen,
            tgen: self.next_gen,
            net: Net::None,
            reused: false,
            replied: false,
            resent: false,
            lost_idle: false,
            state: State::Idle,
            wake: Wake::Send,
            decoder: ResponseDecoder::new(),
            remaining,
            global,
            seq: 0,
            due: 0,
            sent_seq: 0,
            pace_gen: self.next_gen,
            intended: now,
            sent: now,
            connect_start: now,
            tcp_at: now,
            deadline: None,
            batch: 0,
            outstanding: 0,
            written: 0,
            sess: None,
            arrived: false,
            proto: Proto::Plain,
            agent: None,
            own_request: false,
            ramp: NO_RAMP,
            tls_sessions: None,
            refused: Vec::new(),
        });
        if let Some(cfg) = &self.agent_cfg {
            self.users[key]
                .decoder
                .set_capture(cfg.capture(), DEFAULT_CAPTURE_BYTES);
        }
        key
    }

    /// A new user that starts its first request at `at`.
    fn spawn_user(&mut self, global: u64, remaining: Option<u64>, at: Instant) {
        let key = self.add_user(global, remaining);
        self.rec.counters.users_started += 1;
        self.schedule(key, at, Wake::Send);
    }

    fn schedule(&mut self, key: usize, at: Instant, wake: Wake) {
        self.next_gen = self.next_gen.wrapping_add(1);
        let u = &mut self.users[key];
        u.state = State::Waiting;
        u.wake = wake;
        u.deadline = None;
        u.tgen = self.next_gen;
        self.timers.push(Reverse(Timer {
            at,
            key: key as u32,
            gen: u.tgen,
            pace: false,
        }));
    }

    /// HTTP/2 at a rate: the user's next pace tick, at `at`, whatever its state.
    fn schedule_pace(&mut self, key: usize, at: Instant) {
        self.timers.push(Reverse(Timer {
            at,
            key: key as u32,
            gen: self.users[key].pace_gen,
            pace: true,
        }));
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
                self.on_event((data & 0xFFFF_FFFF) as usize, (data >> 32) as u32, flags);
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

    fn arrivals(&mut self, now: Instant) {
        if let LoadModel::Sessions { .. } = self.s.plan.model {
            self.session_arrivals(now);
            return;
        }
        let LoadModel::Open {
            process, per_user, ..
        } = self.s.plan.model
        else {
            return;
        };
        let mut n = 0;
        while let Some(at) = self.next_arrival {
            if at > now || n >= TIMER_BATCH {
                break;
            }
            n += 1;
            if self.arrivals_left == Some(0) || self.budget == Some(0) {
                self.next_arrival = None;
                break;
            }
            if let Some(left) = self.arrivals_left.as_mut() {
                *left -= 1;
            }
            // Global user ids interleave across workers so they never collide. (Counted by the
            // worker: the recorder's counters restart every interval.)
            let g = self.arrived_total * self.s.slots as u64 + self.s.slot as u64;
            self.arrived_total += 1;
            self.spawn_user(g, Some(per_user), at);
            let gap = pacer::arrival_gap(process, self.arrival_rate, self.rng.gen::<f64>());
            self.next_arrival = Some(at + gap);
        }
    }

    fn session_arrivals(&mut self, now: Instant) {
        let mut n = 0;
        while let Some(at) = self.next_arrival {
            if at > now || n >= TIMER_BATCH {
                break;
            }
            n += 1;
            if self.budget == Some(0) {
                self.next_arrival = None;
                break;
            }
            let cap = self.phases[self.phase_idx]
                .max_users
                .map(|m| pacer::share(m, self.s.slots, self.s.slot).max(1));
            if cap.is_some_and(|c| self.open_alive >= c) {
                self.rec.counters.users_dropped += 1;
            } else {
                let g = self.arrived_total * self.s.slots as u64 + self.s.slot as u64 + (1 << 40);
                self.arrived_total += 1;
                self.spawn_session_user(g, true, at);
            }
            self.next_arrival = self.next_phase_arrival(at);
        }
    }

    fn run_timers(&mut self, now: Instant) {
        for _ in 0..TIMER_BATCH {
            match self.timers.peek() {
                Some(Reverse(t)) if t.at <= now => {}
                _ => return,
            }
            let Some(Reverse(t)) = self.timers.pop() else {
                return;
            };
            let key = t.key as usize;
            let Some(u) = self.users.get(key) else {
                continue;
            };
            if t.pace {
                if u.pace_gen == t.gen {
                    self.h2_pace(key);
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
                Wake::Written => self.complete_reply(key, None, true, false),
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
        for (key, u) in self.users.iter() {
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
        self.next_sweep = next;
    }

    /// Begin a request (or a pipelined batch) meant to go at `intended`.
    fn start_request(&mut self, key: usize, intended: Instant) {
        if self.s.h2req.is_some() {
            // HTTP/2: streams are opened (and counted against quotas) one by one by `h2_fill`.
            if self.pace().is_some() {
                // The first pace tick: later ones come from the pace timer.
                self.users[key].state = State::Idle;
                self.h2_pace(key);
                return;
            }
            let u = &mut self.users[key];
            u.intended = intended;
            u.batch = 0;
            if u.proto.is_h2() {
                self.h2_fill(key, intended);
            } else if u.conn.is_none() {
                self.connect(key);
            }
            return;
        }
        let pipeline = u64::from(self.s.plan.pipeline);
        let u = &mut self.users[key];
        let mut batch = pipeline;
        if let Some(st) = &u.sess {
            // A session batch is all or nothing: its bytes are already encoded.
            batch = st.names.len() as u64;
            if self.budget.is_some_and(|b| b < batch) {
                batch = 0;
            }
        }
        if let Some(r) = u.remaining {
            batch = batch.min(r);
        }
        if let Some(b) = self.budget {
            batch = batch.min(b);
        }
        if batch == 0 {
            self.user_done(key);
            return;
        }
        if let Some(b) = self.budget.as_mut() {
            *b -= batch;
        }
        u.batch = batch as u32;
        u.intended = intended;
        u.written = 0;
        u.outstanding = 0;
        u.own_request = false;
        u.resent = false;
        u.refused.clear();
        self.decorate(key);
        let u = &mut self.users[key];
        if u.conn.is_some() {
            self.write_request(key);
        } else {
            self.connect(key);
        }
    }

    /// Adds the user's cookies and Digest answer to the batch about to be written (HTTP/1.1).
    fn decorate(&mut self, key: usize) {
        let Some(cfg) = self.agent_cfg.as_deref() else {
            return;
        };
        let u = &mut self.users[key];
        let Some(a) = u.agent.as_deref_mut() else {
            return;
        };
        match u.sess.as_deref_mut() {
            Some(st) => {
                if a.decorates(st.digest) {
                    let creds = st.digest.then_some((&*st.auth_user, &*st.auth_password));
                    a.decorate(cfg, &mut st.out, creds, agent::unix_now());
                }
            }
            None => {
                let digest = cfg.digest.as_ref().map(|(u, p)| (u.as_str(), p.as_str()));
                if !u.own_request && a.decorates(digest.is_some()) {
                    // The shared request becomes this user's own.
                    let total = self.s.request_len * u.batch as usize;
                    a.hop.clear();
                    a.hop.extend_from_slice(&self.s.request[..total]);
                    u.own_request = true;
                }
                if u.own_request {
                    let mut own = std::mem::take(&mut a.hop);
                    a.decorate(cfg, &mut own, digest, agent::unix_now());
                    a.hop = own;
                }
            }
        }
    }

    fn connect(&mut self, key: usize) {
        let now = Instant::now();
        let plan = &self.s.plan;
        let bind = if plan.socket.bind.is_empty() {
            None
        } else {
            let ip = plan.socket.bind[self.bind_next % plan.socket.bind.len()];
            self.bind_next = self.bind_next.wrapping_add(self.s.slots);
            Some(ip)
        };
        let u = &mut self.users[key];
        u.connect_start = now;
        self.next_gen = self.next_gen.wrapping_add(1);
        u.gen = self.next_gen;
        let result = open_socket(plan, bind).and_then(|sock| {
            self.ep.add(sock.as_raw_fd(), token(key, u.gen))?;
            match sock.connect(&SockAddr::from(plan.target)) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
                Err(e) => return Err(e),
            }
            Ok(sock)
        });
        match result {
            Ok(sock) => {
                u.conn = Some(Conn::plain(sock));
                u.state = State::Connecting;
                u.deadline = Some(now + plan.connect_timeout);
                if std::mem::take(&mut u.lost_idle) {
                    self.rec.counters.reconnects += 1;
                }
            }
            Err(e) => {
                let kind = ErrorKind::from_io(&e, true);
                self.count_failure(key, kind);
                self.retry_later(key, now);
            }
        }
    }

    fn on_event(&mut self, key: usize, gen: u32, flags: u32) {
        let Some(u) = self.users.get(key) else { return };
        if u.gen != gen || u.conn.is_none() {
            return;
        }
        const READABLE: u32 = poller::IN | poller::RDHUP | poller::ERR | poller::HUP;
        const WRITABLE: u32 = poller::OUT | poller::ERR | poller::HUP;
        if u.state == State::Tls {
            self.tls_handshake(key);
            return;
        }
        if u.state == State::Connecting {
            if flags & WRITABLE != 0 {
                self.on_connect(key);
            }
            return;
        }
        if flags & WRITABLE != 0 {
            if u.conn.as_ref().is_some_and(|c| c.wants_write()) && !self.flush_conn(key) {
                // TLS records the socket could not take before; writing them failed the user.
                return;
            }
            let Some(u) = self.users.get(key).filter(|u| u.gen == gen) else {
                return;
            };
            if u.state == State::Writing {
                self.write_request(key);
            } else if u.proto.pending() && !self.flush_proto(key) {
                return;
            }
        }
        // Every protocol reads through one path; plain HTTP reads while a reply is awaited, and
        // between requests to see the server close a kept-alive connection (or send bytes nobody
        // asked for).
        if flags & READABLE != 0
            && self
                .users
                .get(key)
                .is_some_and(|u| u.gen == gen && u.conn.is_some())
        {
            self.read(key, flags);
        }
    }

    fn on_connect(&mut self, key: usize) {
        let now = Instant::now();
        let u = &mut self.users[key];
        let Some(sock) = u.conn.as_ref().map(|c| &c.sock) else {
            return;
        };
        match sock.take_error() {
            Ok(None) => {}
            Ok(Some(e)) | Err(e) => {
                let kind = ErrorKind::from_io(&e, true);
                self.fail(key, kind, now);
                return;
            }
        }
        // A writable edge with no error but no peer yet is spurious: keep waiting.
        if let Err(e) = sock.peer_addr() {
            if e.raw_os_error() == Some(libc::ENOTCONN) {
                return;
            }
        }
        self.rec.counters.connects += 1;
        self.rec.record_connect(micros(now - u.connect_start));
        u.net = Net::Tcp;
        u.tcp_at = now;
        self.tcp_open += 1;
        self.tcp_peak = self.tcp_peak.max(self.tcp_open);
        if let Some(tls) = &self.tls {
            match tls.connect(&mut u.tls_sessions) {
                Ok(t) => {
                    if let (Some(c), Some(o)) = (u.conn.as_mut(), self.s.plan.tls.as_ref()) {
                        c.start_tls(t, &o.upgrade);
                    }
                    // The handshake is timed from here, apart from the connect, and bounded by
                    // the connect timeout.
                    u.connect_start = now;
                    u.state = State::Tls;
                    u.deadline = Some(now + self.s.plan.connect_timeout);
                    self.tls_handshake(key);
                }
                Err(e) => self.fail(key, crate::tls::classify(&e), now),
            }
            return;
        }
        self.connected(key, now);
    }

    /// Drive the TLS handshake; once done, time it and go on as after a plain connect.
    fn tls_handshake(&mut self, key: usize) {
        let u = &mut self.users[key];
        let gen = u.gen;
        let Some(conn) = u.conn.as_mut() else { return };
        let before = self.rec.counters.bytes_received;
        let r = conn.handshake(&mut self.rec.counters);
        if self.rec.counters.bytes_received != before {
            // The ServerHello (or an alert): the server has accepted the connection.
            self.served(key);
        }
        let u = &mut self.users[key];
        let Some(conn) = u.conn.as_mut() else { return };
        match r {
            Ok(false) | Err(IoErr::WouldBlock) => {}
            Ok(true) => {
                let now = Instant::now();
                if conn.is_tls() {
                    self.rec.record_tls(micros(now - u.connect_start));
                    self.rec.counters.proto(ProtoCounter::TlsHandshakes, 1);
                    if conn.resumed() {
                        self.rec.counters.proto(ProtoCounter::TlsResumed, 1);
                    }
                    if let Some(n) = conn.negotiated(self.http) {
                        self.rec.negotiated.count(&n, 1);
                    }
                }
                u.state = State::Idle;
                u.deadline = None;
                self.connected(key, now);
                // Plaintext that came with the handshake's last flight raises no new edge:
                // read it now if anybody listens.
                if self.users.get(key).is_some_and(|u| {
                    u.gen == gen && (u.proto.reads_always() || u.state == State::Reading)
                }) {
                    self.read(key, 0);
                }
            }
            Err(IoErr::Failed(kind)) => self.fail(key, kind, Instant::now()),
        }
    }

    /// The connection (and its TLS) is up: start the protocol's setup, or go on with the step
    /// that asked for the connection.
    fn connected(&mut self, key: usize, now: Instant) {
        let u = &mut self.users[key];
        if let Some(h) = self.s.plan.http2 {
            if u.conn
                .as_ref()
                .is_some_and(|c| c.is_tls() && c.alpn() != Some(b"h2"))
            {
                // The server did not agree to HTTP/2 (ALPN): nothing can be sent.
                self.fail(key, ErrorKind::Protocol, now);
                return;
            }
            if u.sess.is_some() {
                // A session's requests go out as streams when its steps send them.
                u.proto = Proto::H2(Box::new(H2Conn::new(SESSION_STREAMS)));
                self.after_connect(key, now);
                return;
            }
            u.proto = Proto::H2(Box::new(H2Conn::new(h.streams)));
            let intended = u.intended;
            self.h2_fill(key, intended);
            return;
        }
        if let Some(prog) = &self.s.program {
            if let Some(link) = Link::start(&prog.w.link, &prog.host, u.global, &mut self.rng) {
                // The protocol's setup runs first; `link_ready` goes on from here after it.
                u.proto = Proto::Link(Box::new(link));
                u.state = State::Handshake;
                u.deadline = Some(now + self.s.plan.timeout);
                self.flush_proto(key);
                return;
            }
        }
        self.after_connect(key, now);
    }

    /// The connection is usable: go on with the step that asked for it.
    fn after_connect(&mut self, key: usize, now: Instant) {
        let u = &mut self.users[key];
        if u.sess.is_some() && u.batch == 0 {
            // An explicit `connect` step: nothing to send yet.
            u.state = State::Idle;
            u.deadline = None;
            self.session_next(key, now);
            return;
        }
        self.write_request(key);
    }

    fn write_request(&mut self, key: usize) {
        if let Some(h) = self.users[key].proto.h2() {
            if !h.conn.can_open() {
                // A GOAWAY (or spent stream ids) on the kept connection: a new one.
                self.close(key);
                self.connect(key);
                return;
            }
            self.h2_send_session(key);
            return;
        }
        let u = &mut self.users[key];
        let (bytes, head): (&[u8], bool) = match (&u.sess, &u.agent) {
            (Some(st), _) => (&st.out, st.head),
            (None, Some(a)) if u.own_request => (&a.hop, self.s.head_request),
            (None, _) => {
                let total = self.s.request_len * u.batch as usize;
                (&self.s.request[..total], self.s.head_request)
            }
        };
        let total = bytes.len();
        let Some(conn) = u.conn.as_mut() else { return };
        let first = u.state != State::Writing;
        if first {
            u.written = 0;
            u.replied = false;
            u.decoder.set_head_request(head);
        }
        let mut off = u.written as usize;
        let gen = u.gen;
        while off < total {
            match conn.send(&bytes[off..total], &mut self.rec.counters) {
                Ok(n) => {
                    if off == 0 {
                        // First bytes of the batch on the wire: the requests now exist.
                        u.sent = Instant::now();
                        u.outstanding = u.batch;
                        self.rec.counters.requests += u64::from(u.batch);
                    }
                    off += n;
                }
                Err(IoErr::WouldBlock) => break,
                Err(IoErr::Failed(kind)) => {
                    if !self.resend(key) {
                        self.fail(key, kind, Instant::now());
                    }
                    return;
                }
            }
        }
        u.written = off as u32;
        if first {
            // The response timeout runs from the moment the request was (first) written.
            u.deadline = Some(Instant::now() + self.s.plan.timeout);
        }
        u.state = if off < total {
            State::Writing
        } else {
            State::Reading
        };
        if u.state == State::Reading && u.proto.pending() {
            // Protocol bytes (a pong, say) that waited for the request to be written.
            self.flush_proto(key);
            let Some(u) = self.users.get(key).filter(|u| u.gen == gen) else {
                return;
            };
            if u.state != State::Reading {
                return;
            }
        }
        let u = &mut self.users[key];
        if u.state == State::Reading
            && u.sess
                .as_ref()
                .is_some_and(|st| st.awaiting == Awaiting::Nothing)
        {
            // A send that expects nothing is done once written. It completes from the timer
            // queue, not from here: a loop of such sends would otherwise recurse without end.
            u.deadline = None;
            self.schedule(key, Instant::now(), Wake::Written);
        }
    }

    /// Reads the connection until it is drained, handing every byte to the protocol (see
    /// [`crate::proto`]): one read path for every protocol and transport.
    fn read(&mut self, key: usize, flags: u32) {
        let mut scratch = std::mem::take(&mut self.scratch);
        let gen = self.users[key].gen;
        let mut budget = READ_BUDGET;
        while let Some(u) = self.users.get_mut(key).filter(|u| u.gen == gen) {
            let reads = u.proto.reads_always() || u.state != State::Writing;
            let Some(conn) = u.conn.as_mut().filter(|_| reads) else {
                break;
            };
            let drains = conn.short_read_drains();
            match conn.recv(&mut scratch, &mut self.rec.counters) {
                Ok(0) => {
                    self.on_eof(key);
                    break;
                }
                Ok(n) => {
                    if u.net != Net::Served {
                        self.served(key);
                    }
                    self.users[key].replied = true;
                    self.feed(key, gen, &scratch[..n]);
                    if drains && n < scratch.len() {
                        // Short read: drained. A peer half-close seen with this edge still
                        // needs handling.
                        if flags & (poller::RDHUP | poller::HUP) != 0
                            && self.users.get(key).is_some_and(|u| {
                                u.gen == gen
                                    && u.conn.is_some()
                                    && (u.proto.reads_always() || u.state != State::Writing)
                            })
                        {
                            self.on_eof(key);
                        }
                        break;
                    }
                    budget = budget.saturating_sub(n);
                    if budget == 0 {
                        // Enough for this turn (see READ_BUDGET): the rest in the next.
                        self.more.push((key, gen));
                        break;
                    }
                }
                Err(IoErr::WouldBlock) => break,
                Err(IoErr::Failed(kind)) => {
                    self.proto_failed(key, kind);
                    break;
                }
            }
        }
        self.scratch = scratch;
    }

    /// Goes on reading the connections that used their `READ_BUDGET` in the last turn.
    fn read_more(&mut self) {
        let spare = std::mem::take(&mut self.more_spare);
        let mut list = std::mem::replace(&mut self.more, spare);
        for &(key, gen) in &list {
            if self
                .users
                .get(key)
                .is_some_and(|u| u.gen == gen && u.conn.is_some())
            {
                self.read(key, 0);
            }
        }
        list.clear();
        self.more_spare = list;
    }

    /// Hands bytes read to the protocol and acts on each outcome, until it needs more.
    fn feed(&mut self, key: usize, gen: u32, mut buf: &[u8]) {
        loop {
            // Each outcome may end the user or replace its connection: re-check every turn.
            let Some(u) = self.users.get_mut(key).filter(|u| u.gen == gen) else {
                return;
            };
            if u.conn.is_none() || (buf.is_empty() && !u.proto.queued()) {
                break;
            }
            let cx = proto::FeedCx {
                decoder: &mut u.decoder,
                sess: u.sess.as_deref_mut(),
                reading: u.state == State::Reading,
                program: self.s.program.as_deref(),
                counters: &mut self.rec.counters,
            };
            let (used, outcome) = match proto::feed(&mut u.proto, cx, buf) {
                Ok(x) => x,
                Err(kind) => {
                    self.proto_failed(key, kind);
                    return;
                }
            };
            buf = buf.get(used..).unwrap_or(&[]);
            if u.proto.link().is_some_and(|l| l.pending()) && u.state != State::Writing {
                // A link's answer (a pong, a login step) goes out at once; HTTP/2's frames wait
                // for the end of the read, with the requests it makes room for.
                self.flush_proto(key);
                if self.users.get(key).is_none_or(|u| u.gen != gen) {
                    return;
                }
            }
            match outcome {
                None if used == 0 => break,
                None => {}
                Some(o) => self.on_outcome(key, o),
            }
        }
        if self.users[key].proto.is_h2() {
            self.h2_after_read(key);
        }
    }

    /// Acts on what the protocol completed.
    fn on_outcome(&mut self, key: usize, o: Outcome) {
        let u = &mut self.users[key];
        let session = u.sess.is_some();
        let c = &mut self.rec.counters;
        match (o, u.proto.h2()) {
            (Outcome::GoAway { code }, _) => {
                // The streams above its last id follow as `Reset`s (REFUSED_STREAM).
                c.proto(ProtoCounter::H2GoAway, 1);
                if code != h2::error_code::NO_ERROR {
                    c.proto(ProtoCounter::H2ConnectionErrors, 1);
                }
            }
            (Outcome::Reset { stream, code }, Some(h)) => {
                let slot = h.take(stream);
                if let Some(slot) =
                    slot.filter(|s| !s.again && code == h2::error_code::REFUSED_STREAM)
                {
                    // Not processed (RFC 9113 §8.7): it goes again, once, its intended time
                    // kept, counted as a request when it goes — on this connection if it still
                    // opens streams, else on a new one. URL runs: first in `h2_fill`; a
                    // session's: once the rest of its batch is answered (`h2_after_read`).
                    c.proto(ProtoCounter::h2_rst(code), 1);
                    c.requests -= 1;
                    u.refused.push(crate::http2::Refused {
                        intended: slot.intended,
                        index: slot.index,
                    });
                    return;
                }
                let in_flight = slot.is_some();
                proto::count_reset(c, code, in_flight && !session);
                if in_flight && session {
                    // A session's request failed: the session goes on as after any failure.
                    self.fail(key, ErrorKind::StreamReset, Instant::now());
                }
            }
            (Outcome::Reply { stream, status, .. }, Some(h)) if !session => {
                // A URL run's stream: counted here; `h2_after_read` refills.
                if let Some(slot) = h.take(stream) {
                    let now = Instant::now();
                    c.responses += 1;
                    c.reply_status(status.unwrap_or(0), &self.s.plan.expect_status);
                    self.rec
                        .record_latency(micros(now - slot.intended), micros(now - slot.sent));
                }
            }
            (Outcome::Reply { stream, status, .. }, Some(h)) => {
                // A session's stream completes a request of its batch, as over HTTP/1.1.
                if h.take(stream).is_some() && u.state == State::Reading {
                    self.complete_reply(key, status, true, false);
                }
            }
            (Outcome::Ready, _) => self.link_ready(key),
            (
                Outcome::Reply {
                    status,
                    keep_alive,
                    ok,
                    ..
                },
                None,
            ) => {
                if u.state == State::Reading {
                    if !ok {
                        c.error(ErrorKind::ErrorReply);
                    }
                    self.complete_reply(key, status, keep_alive, !ok);
                }
            }
            (Outcome::Closed, _) => {
                // The server ended the session unasked: a user waiting on a reply failed; an
                // idle one just loses its connection (and reconnects when next due).
                if matches!(u.state, State::Reading | State::Writing) {
                    self.fail(key, ErrorKind::Closed, Instant::now());
                } else {
                    self.abort_session(key);
                    self.close(key);
                }
            }
            (Outcome::Unexpected, _) => {
                // The user keeps its schedule and reconnects when next due.
                c.error(ErrorKind::Protocol);
                self.close(key);
            }
            (Outcome::Reset { .. }, None) => {}
        }
    }

    /// The server closed the connection.
    fn on_eof(&mut self, key: usize) {
        let now = Instant::now();
        let u = &self.users[key];
        if matches!(u.proto, Proto::Plain) && u.state == State::Reading && self.resend(key) {
            return;
        }
        let u = &mut self.users[key];
        match &mut u.proto {
            Proto::Link(_) => self.link_eof(key),
            Proto::H2(h) => {
                // A close with nothing in flight (after a GOAWAY, or an idle timeout) is not a
                // failure; otherwise whatever was in flight failed.
                if h.slots.is_empty() && !u.refused.is_empty() {
                    // Refused requests wait to go again: on a new connection, now.
                    self.close(key);
                    self.connect(key);
                } else if h.slots.is_empty() {
                    let waiting = u.state == State::Waiting;
                    self.idle_closed(key);
                    if !waiting {
                        self.next_request(key, now);
                    }
                } else {
                    self.fail(key, ErrorKind::Closed, now);
                }
            }
            Proto::Plain if u.state != State::Reading => self.idle_closed(key),
            Proto::Plain => match proto::eof_plain(&mut u.decoder, u.sess.as_deref_mut()) {
                // A body delimited by the close: complete. If more responses of a pipelined
                // batch were expected, those failed.
                Ok(o) => self.on_outcome(key, o),
                Err(kind) => self.fail(key, kind, now),
            },
        }
    }

    /// The connection failed (bad bytes, a refused login, a dead socket).
    fn proto_failed(&mut self, key: usize, kind: ErrorKind) {
        let u = &self.users[key];
        match &u.proto {
            Proto::Link(_) => self.link_failed(key, kind),
            Proto::H2(_) => {
                // The codec may have written its GOAWAY: send it before the connection goes.
                self.flush_proto(key);
                if self.users.get(key).is_some_and(|u| u.conn.is_some()) {
                    self.fail(key, kind, Instant::now());
                }
            }
            Proto::Plain if matches!(u.state, State::Reading | State::Writing) => {
                if !self.resend(key) {
                    self.fail(key, kind, Instant::now())
                }
            }
            // Lost while idle (reset by the server): nobody waited; reconnect when next needed.
            Proto::Plain => self.idle_closed(key),
        }
    }

    /// HTTP/2: open streams up to `--streams` (and the server's limit) while the user's quota
    /// and the run's budget allow; `intended` is when these requests were meant to go. A user
    /// left with nothing in flight and nothing to send is done.
    fn h2_fill(&mut self, key: usize, intended: Instant) {
        let streams = self.s.plan.http2.map_or(1, |h| h.streams) as usize;
        // Borrowed, not cloned: an Arc clone per send would bounce its count between workers.
        let Some(req) = self.s.h2req.as_deref() else {
            return;
        };
        let now = Instant::now();
        let pace = self.pace();
        let u = &mut self.users[key];
        let Some(h) = u.proto.h2() else { return };
        // Refused requests first: they were counted against quotas and the pace when they
        // first went, and keep their intended time.
        while !u.refused.is_empty() && h.slots.len() < streams && h.conn.can_open() {
            let Ok(stream) = req.send(&mut h.conn, &mut h.out) else {
                break;
            };
            h.slots.push(crate::http2::Slot {
                stream,
                intended: u.refused.pop().map_or(now, |r| r.intended),
                sent: now,
                index: 0,
                again: true,
            });
            self.rec.counters.requests += 1;
            self.rec.counters.proto(ProtoCounter::H2Resent, 1);
        }
        while h.slots.len() < streams && h.conn.can_open() {
            if u.remaining == Some(0) || self.budget == Some(0) {
                break;
            }
            if pace.is_some() && u.due == 0 {
                break;
            }
            let Ok(stream) = req.send(&mut h.conn, &mut h.out) else {
                break;
            };
            let intended = match pace {
                // At a rate each stream's request was meant for its own pace slot: latency runs
                // from there, however long it waited for a free stream (coordinated omission).
                Some((start, conns, rate)) => {
                    let at = start + pacer::rate_offset(u.global, u.sent_seq, conns, rate);
                    u.due -= 1;
                    u.sent_seq += 1;
                    at
                }
                None => intended,
            };
            h.slots.push(crate::http2::Slot {
                stream,
                intended,
                sent: now,
                index: 0,
                again: false,
            });
            if let Some(r) = u.remaining.as_mut() {
                *r -= 1;
            }
            if let Some(b) = self.budget.as_mut() {
                *b -= 1;
            }
            self.rec.counters.requests += 1;
        }
        u.outstanding = h.slots.len() as u32;
        if h.slots.is_empty() {
            let refused = !u.refused.is_empty();
            if !refused && (u.remaining == Some(0) || self.budget == Some(0)) {
                self.user_done(key);
            } else if !refused && pace.is_some() && u.due == 0 {
                // At a rate, nothing due: wait for the next pace tick.
                u.state = State::Idle;
                u.deadline = None;
            } else {
                // GOAWAY (or ids exhausted): this connection takes no more streams.
                self.close(key);
                let wake = if pace.is_some() {
                    Wake::Next
                } else {
                    Wake::Send
                };
                self.schedule(key, now, wake);
            }
            return;
        }
        if u.state != State::Reading {
            u.state = State::Reading;
            u.sent = now;
        }
        // From the oldest stream's send, however much the server sends meanwhile (PINGs kept
        // a request alive for ever before issue 26).
        u.deadline = h.oldest_sent().map(|t| t + self.s.plan.timeout);
        self.flush_proto(key);
    }

    /// HTTP/2 in a scenario: the session's batch (encoded as HTTP/1.1) goes out as one stream
    /// per request, all in flight at once.
    fn h2_send_session(&mut self, key: usize) {
        let now = Instant::now();
        let scheme: &[u8] = if self.s.plan.tls.is_some() {
            b"https"
        } else {
            b"http"
        };
        let u = &mut self.users[key];
        let (Some(st), Some(h)) = (u.sess.as_deref(), u.proto.h2()) else {
            return;
        };
        let intended = u.intended;
        // The batch's requests the server refused unprocessed go again, alone; otherwise all.
        let again = !u.refused.is_empty();
        let refused = &u.refused;
        let slots = &mut h.slots;
        let sent = crate::http2::send_http1_batch(
            &mut h.conn,
            &mut h.out,
            &st.out,
            scheme,
            &|i| !again || refused.iter().any(|r| r.index as usize == i),
            &mut |index, stream| {
                slots.push(crate::http2::Slot {
                    stream,
                    intended,
                    sent: now,
                    index: index as u32,
                    again,
                })
            },
        );
        u.refused.clear();
        u.sent = now;
        u.outstanding = h.slots.len() as u32;
        self.rec.counters.requests += u64::from(u.outstanding);
        if again {
            self.rec
                .counters
                .proto(ProtoCounter::H2Resent, u64::from(u.outstanding));
        }
        if let Err(kind) = sent {
            self.fail(key, kind, now);
            return;
        }
        u.written = 0;
        u.state = State::Reading;
        u.deadline = Some(now + self.s.plan.timeout);
        self.flush_proto(key);
    }

    /// HTTP/2 at a rate (`--rate`): the pace's start and parameters; `None` otherwise. Each
    /// user keeps its own pace of sends whatever its streams are doing, so up to `--streams` of
    /// its requests are in flight at once and a late reply delays no later send.
    fn pace(&self) -> Option<(Instant, u64, f64)> {
        match self.s.plan.model {
            LoadModel::Rate { connections, rate } if self.s.h2req.is_some() => {
                Some((self.s.start, u64::from(connections), rate))
            }
            _ => None,
        }
    }

    /// HTTP/2 at a rate: one more send of this user fell due; schedule the next tick and send
    /// what a free stream allows.
    fn h2_pace(&mut self, key: usize) {
        let Some((start, conns, rate)) = self.pace() else {
            return;
        };
        let u = &mut self.users[key];
        let left = u
            .remaining
            .map_or(u64::MAX, |r| r.saturating_sub(u64::from(u.due)));
        if left == 0 || self.budget == Some(0) {
            return;
        }
        u.due += 1;
        u.seq += 1;
        if left > 1 {
            let at = start + pacer::rate_offset(u.global, u.seq, conns, rate);
            self.schedule_pace(key, at);
        }
        self.h2_kick(key);
    }

    /// HTTP/2 at a rate: send what fell due, connecting first if needed. A user waiting on a
    /// timer (a retry) or a connect in progress is left alone: it goes on from there.
    fn h2_kick(&mut self, key: usize) {
        let u = &mut self.users[key];
        if u.state == State::Waiting {
            return;
        }
        if u.proto.is_h2() {
            self.h2_fill(key, Instant::now());
        } else if u.conn.is_none() && (u.due > 0 || !u.refused.is_empty()) {
            self.connect(key);
        }
    }

    /// HTTP/2, after a read's outcomes: keep the streams going, and write what the codec and
    /// the new streams put out in one go.
    fn h2_after_read(&mut self, key: usize) {
        let now = Instant::now();
        let refill = self.pace().is_some();
        let u = &mut self.users[key];
        if u.sess.is_some() {
            // Sessions go on from each reply (complete_reply): only the codec's frames to send,
            // and the batch's refused requests once the rest of it is answered.
            if !u.refused.is_empty()
                && u.state == State::Reading
                && u.proto.h2().is_some_and(|h| h.slots.is_empty())
            {
                // On this connection if it still opens streams (`write_request`).
                self.write_request(key);
                if self.users.get(key).is_none_or(|u| !u.proto.is_h2()) {
                    return;
                }
            }
            self.flush_proto(key);
            return;
        }
        let Some(h) = u.proto.h2() else { return };
        u.outstanding = h.slots.len() as u32;
        let idle = h.slots.is_empty();
        let goaway = h.conn.goaway().is_some();
        let oldest = h.oldest_sent();
        if refill || matches!(self.s.plan.model, LoadModel::Closed { think: None, .. }) {
            // Each answered stream is replaced at once (the closed model's next request), or
            // by a send that fell due meanwhile (at a rate).
            self.h2_fill(key, now);
        } else if idle && !u.refused.is_empty() {
            // Refused requests go again at once, not after a think time.
            self.h2_fill(key, now);
        } else if idle {
            u.state = State::Idle;
            u.deadline = None;
            if goaway {
                self.close(key);
            }
            self.next_request(key, now);
        } else {
            u.deadline = oldest.map(|t| t + self.s.plan.timeout);
        }
        if self.users.get(key).is_some_and(|u| u.proto.is_h2()) {
            self.flush_proto(key);
        }
    }

    /// Writes what the transport holds (TLS records the socket did not take). False if that
    /// failed the user.
    fn flush_conn(&mut self, key: usize) -> bool {
        let u = &mut self.users[key];
        let Some(conn) = u.conn.as_mut() else {
            return false;
        };
        match conn.flush(&mut self.rec.counters) {
            Ok(()) | Err(IoErr::WouldBlock) => true,
            Err(IoErr::Failed(kind)) => {
                self.proto_failed(key, kind);
                false
            }
        }
    }

    /// Writes the protocol's own bytes (link answers, HTTP/2 frames). False if that failed the
    /// user.
    fn flush_proto(&mut self, key: usize) -> bool {
        let u = &mut self.users[key];
        let (Some(conn), Some((out, written))) = (u.conn.as_mut(), u.proto.out()) else {
            return true;
        };
        while *written < out.len() {
            match conn.send(&out[*written..], &mut self.rec.counters) {
                Ok(n) => *written += n,
                Err(IoErr::WouldBlock) => return true,
                Err(IoErr::Failed(kind)) => {
                    if u.proto.is_h2() {
                        self.fail(key, kind, Instant::now());
                    } else {
                        self.link_failed(key, kind);
                    }
                    return false;
                }
            }
        }
        out.clear();
        *written = 0;
        true
    }

    /// The protocol's setup is done: time it, and go on with the step that connected.
    fn link_ready(&mut self, key: usize) {
        let now = Instant::now();
        let u = &mut self.users[key];
        if let (Some(link), Some(prog)) = (u.proto.link(), self.s.program.as_ref()) {
            if let Some(id) = prog.w.handshake {
                self.rec
                    .record_name(id as usize, micros(now - link.started), false);
            }
        }
        u.state = State::Idle;
        u.deadline = None;
        self.after_connect(key, now);
    }

    /// The link failed (bad bytes, a refused login, a dead socket): count it against the
    /// request in flight or the setup, and drop the connection.
    fn link_failed(&mut self, key: usize, kind: ErrorKind) {
        let u = &self.users[key];
        match u.state {
            State::Reading | State::Writing | State::Handshake => {
                if u.state == State::Handshake {
                    if let Some(id) = self.s.program.as_ref().and_then(|p| p.w.handshake) {
                        self.rec.name_error(id as usize);
                    }
                }
                self.fail(key, kind, Instant::now());
            }
            _ => {
                // Between requests: nobody waited, but the connection and the session's state
                // on it (a login, a transaction) are lost: count it, and the session ends
                // aborted when the user next goes on (a closed user then starts a new one).
                self.rec.counters.error(kind);
                self.abort_session(key);
                self.close(key);
            }
        }
    }

    /// The server closed a protocol link's connection.
    fn link_eof(&mut self, key: usize) {
        let u = &self.users[key];
        let clean = u.proto.link().is_some_and(|l| l.eof_is_clean());
        match u.state {
            State::Reading | State::Writing | State::Handshake => {
                if u.proto.closing() && u.state == State::Reading && clean {
                    // Our close, answered by the close of the connection.
                    self.complete_reply(key, None, false, false);
                } else {
                    self.link_failed(key, ErrorKind::Closed);
                }
            }
            _ if clean => {
                // The server ended the stream politely between requests: the session cannot go
                // on without its connection, but nothing failed.
                self.abort_session(key);
                self.close(key);
            }
            _ => self.link_failed(key, ErrorKind::Closed),
        }
    }

    /// A reply completed; `failed` marks a protocol error reply (iq error, SQL error).
    fn complete_reply(&mut self, key: usize, status: Option<u16>, keep_alive: bool, failed: bool) {
        let now = Instant::now();
        let u = &mut self.users[key];
        // A protocol close that was answered (or written) ends the connection.
        let keep_alive = keep_alive && !u.proto.closing();
        let answered = u.batch.saturating_sub(u.outstanding) as usize;
        u.outstanding = u.outstanding.saturating_sub(1);
        let next = match status {
            Some(code) if !u.proto.is_h2() => self.agent_reply(key, code, answered),
            _ => Next::Done,
        };
        let u = &mut self.users[key];
        let c = &mut self.rec.counters;
        c.responses += 1;
        let mut failed = failed;
        match (next, status) {
            (Next::Hop { .. }, Some(code)) => c.status(code),
            (Next::Failed(kind), Some(code)) => {
                c.status(code);
                c.error(kind);
                failed = true;
            }
            (_, Some(code)) => {
                c.reply_status(code, &self.s.plan.expect_status);
            }
            (_, None) => {}
        }
        let corrected = micros(now - u.intended);
        self.rec.record_latency(corrected, micros(now - u.sent));
        if let Next::Hop { .. } = next {
            self.send_hop(key, keep_alive, now);
            return;
        }
        // The request's whole time, over its hops (redirects, a Digest answer).
        let whole = match u.agent.as_deref_mut() {
            Some(a) => {
                let whole = a.chain_start.map_or(corrected, |t| micros(now - t));
                a.end_request();
                whole
            }
            None => corrected,
        };
        if let Some(st) = u.sess.as_mut() {
            let bad = failed || status.is_some_and(|s| s >= 400);
            if let Some(status) = status {
                st.last_status = status;
            }
            if bad {
                st.on_error_status();
            }
            if let Some(&id) = st.names.get(answered) {
                self.rec.record_name(id as usize, whole, bad);
            }
        }
        let reuse = keep_alive && self.s.plan.keepalive;
        u.reused = reuse;
        if !reuse {
            if u.outstanding > 0 {
                // The server closes with pipelined requests unanswered.
                let lost = u.outstanding;
                u.outstanding = 0;
                for _ in 0..lost {
                    self.rec.counters.error(ErrorKind::Closed);
                }
                if let Some(st) = u.sess.as_mut() {
                    st.on_failure();
                    for &id in st.names.iter().rev().take(lost as usize) {
                        self.rec.name_error(id as usize);
                    }
                }
            }
            self.close(key);
        }
        let u = &mut self.users[key];
        if u.outstanding == 0 {
            u.deadline = None;
            u.state = State::Idle;
            let batch = u64::from(u.batch);
            if let Some(r) = u.remaining.as_mut() {
                *r = r.saturating_sub(batch);
            }
            self.next_request(key, now);
        }
    }

    /// The agent's view of a complete HTTP/1.1 reply: cookies stored, and whether a redirect
    /// or a Digest challenge makes it a hop of the request rather than its end.
    fn agent_reply(&mut self, key: usize, status: u16, answered: usize) -> Next {
        let Some(cfg) = self.agent_cfg.as_deref() else {
            return Next::Done;
        };
        let u = &mut self.users[key];
        // A Set-Cookie too big to capture never reaches the jar, which would refuse it too.
        let dropped = u.decoder.cookies_dropped();
        if cfg.cookies && dropped > 0 {
            let rejected = headroom_core::ProtoCounter::HttpCookiesRejected;
            self.rec.counters.proto(rejected, u64::from(dropped));
        }
        let redirect = cfg.follow > 0 && (300..400).contains(&status);
        // Content-Encoding alone (`--compressed`) is the decoder's business, not the agent's.
        let for_agent = u
            .decoder
            .captured()
            .any(|(id, _)| id != headroom_proto::http1::HeaderId::ContentEncoding);
        if u.agent.is_none() && !for_agent && !redirect {
            return Next::Done;
        }
        let single = u.batch == 1;
        let (digest, request): (bool, Option<&[u8]>) = match &u.sess {
            Some(st) if single => (st.digest, Some(&st.out)),
            Some(st) => (st.digest, Some(agent::nth_request(&st.out, answered))),
            None if u.own_request => (cfg.digest.is_some(), None),
            None => (
                cfg.digest.is_some(),
                Some(&self.s.request[..self.s.request_len]),
            ),
        };
        let a = u.agent.get_or_insert_with(Agent::new);
        let intended = u.intended;
        let next = a.after_reply(
            cfg,
            status,
            u.decoder.captured(),
            request,
            single,
            digest,
            &mut self.rec.counters,
            agent::unix_now(),
        );
        if let Next::Hop { .. } = next {
            a.chain_start.get_or_insert(intended);
        }
        next
    }

    /// Sends the agent's next hop of the current request (a redirect, or the request again
    /// with a Digest answer), timed from now, on this connection if it may be reused.
    fn send_hop(&mut self, key: usize, keep_alive: bool, now: Instant) {
        let reuse = keep_alive && self.s.plan.keepalive && !self.users[key].proto.closing();
        if !reuse {
            self.close(key);
        }
        let u = &mut self.users[key];
        let Some(a) = u.agent.as_deref_mut() else {
            return;
        };
        match u.sess.as_deref_mut() {
            Some(st) => {
                st.out.clear();
                st.out.extend_from_slice(&a.hop);
                st.reply.clear();
                st.head = st.out.starts_with(b"HEAD ");
            }
            None => u.own_request = true,
        }
        u.batch = 1;
        u.intended = now;
        u.written = 0;
        u.outstanding = 0;
        u.resent = false;
        u.deadline = None;
        u.state = State::Idle;
        self.decorate(key);
        if self.users[key].conn.is_some() {
            self.write_request(key);
        } else {
            self.connect(key);
        }
    }

    /// After a completed or failed request: think, pace, or go again.
    fn next_request(&mut self, key: usize, now: Instant) {
        if self.users[key].sess.is_some() {
            self.session_next(key, now);
            return;
        }
        let paced = self.pace().is_some();
        let leaves = self.ramp_leaves(key);
        let u = &mut self.users[key];
        if u.remaining == Some(0) || self.budget == Some(0) || leaves {
            self.user_done(key);
            return;
        }
        if paced {
            // HTTP/2 at a rate: the pace timer makes sends due; go on with those.
            u.state = State::Idle;
            self.h2_kick(key);
            return;
        }
        match self.s.plan.model {
            LoadModel::Rate { .. } => {
                u.seq += 1;
                let (g, k) = (u.global, u.seq);
                let at = self.s.start + self.rate_offset(g, k);
                if at <= now {
                    self.start_request(key, at);
                } else {
                    self.schedule(key, at, Wake::Send);
                }
            }
            LoadModel::Closed { think: Some(d), .. } | LoadModel::Open { think: Some(d), .. } => {
                let at = now + d.sample(self.rng.gen::<f64>());
                self.schedule(key, at, Wake::Send);
            }
            _ => self.start_request(key, now),
        }
    }

    /// Run a scenario user's session until it needs the network or the clock.
    fn session_next(&mut self, key: usize, now: Instant) {
        let Some(prog) = self.s.program.clone() else {
            return;
        };
        let mut sessions = 0;
        loop {
            let u = &mut self.users[key];
            let Some(st) = u.sess.as_mut() else {
                return;
            };
            let mut env = Env {
                rng: &mut self.rng,
                rec: &mut self.rec,
                cursors: &mut self.cursors,
                now,
                link: u.proto.link_mut(),
                agent: &mut u.agent,
            };
            match st.advance(&prog, &mut env) {
                Action::Send => {
                    self.start_request(key, now);
                    return;
                }
                Action::Think(d) => {
                    self.schedule(key, now + d, Wake::Next);
                    return;
                }
                Action::Connect => {
                    let u = &mut self.users[key];
                    if u.conn.is_none() {
                        u.batch = 0;
                        u.outstanding = 0;
                        self.connect(key);
                        return;
                    }
                    if u.proto.link().is_some_and(|l| !l.ready) {
                        // A protocol step on a connection whose setup is not done: cannot
                        // happen (steps run only once it is), but never spin on it.
                        self.fail(key, ErrorKind::Protocol, now);
                        return;
                    }
                    if u.proto.link().is_none()
                        && prog.w.link != headroom_core::session::LinkSpec::Plain
                    {
                        // A protocol step on a connection without its link: reconnect.
                        self.close(key);
                    }
                }
                Action::Close => self.close(key),
                Action::Yield => {
                    self.schedule(key, now, Wake::Next);
                    return;
                }
                Action::Done { aborted } => {
                    let c = &mut self.rec.counters;
                    if aborted {
                        c.sessions_aborted += 1;
                    } else {
                        c.sessions_completed += 1;
                        if let Some(st) = self.users[key].sess.as_ref() {
                            let took = micros(now.saturating_duration_since(st.started));
                            self.rec.sessions.saturating_record(took.max(1));
                        }
                    }
                    let leaves = self.ramp_leaves(key);
                    let u = &mut self.users[key];
                    if u.arrived || self.budget == Some(0) || leaves {
                        self.user_done(key);
                        return;
                    }
                    // A closed user goes on with its next session, on the same connection.
                    let fixed = prog.w.population_session(u.global);
                    let s = fixed.unwrap_or_else(|| prog.w.draw(self.rng.gen::<f64>()));
                    if let Some(st) = u.sess.as_mut() {
                        st.begin(&prog, s, &mut self.rng, now);
                    }
                    if let Some(a) = u.agent.as_deref_mut() {
                        // A new session is a new visit: a fresh jar, as k6 gives each iteration.
                        a.new_session();
                    }
                    sessions += 1;
                    if sessions >= SESSIONS_PER_TURN {
                        self.schedule(key, now, Wake::Next);
                        return;
                    }
                }
            }
        }
    }

    fn count_failure(&mut self, key: usize, kind: ErrorKind) {
        let u = &mut self.users[key];
        // Every request of a pipelined batch that was sent and not answered failed.
        let n = u.outstanding.max(1);
        for _ in 0..n {
            self.rec.counters.error(kind);
        }
        if let Some(st) = u.sess.as_mut() {
            // Unanswered requests of the batch (all of them if it was never written).
            let lost = if u.outstanding > 0 {
                u.outstanding as usize
            } else {
                st.names.len()
            };
            for &id in st.names.iter().rev().take(lost) {
                self.rec.name_error(id as usize);
            }
            st.on_failure();
        }
    }

    /// A request (batch) failed: count it, drop the connection, and move on without recursing.
    fn fail(&mut self, key: usize, kind: ErrorKind, now: Instant) {
        self.count_failure(key, kind);
        self.close(key);
        self.retry_later(key, now);
    }

    /// Count the failed batch against the user's quota and park the user on a due-now timer.
    fn retry_later(&mut self, key: usize, now: Instant) {
        let u = &mut self.users[key];
        let batch = if self.s.h2req.is_some() {
            // HTTP/2 streams took their quota when sent; a failure with none in flight (a
            // connect or handshake) counts as one request, so a dead target still ends a run
            // bounded by -n.
            let none_sent = u.outstanding == 0;
            if none_sent {
                if let Some(b) = self.budget.as_mut() {
                    *b = b.saturating_sub(1);
                }
                if u.due > 0 {
                    // At a rate: the send that fell due is the one that failed.
                    u.due -= 1;
                    u.sent_seq += 1;
                }
            }
            u64::from(none_sent)
        } else {
            u64::from(u.batch.max(1))
        };
        u.outstanding = 0;
        u.deadline = None;
        if let Some(r) = u.remaining.as_mut() {
            *r = r.saturating_sub(batch);
        }
        self.schedule(key, now, Wake::Next);
    }

    /// The server closed the user's connection while nothing was in flight (a keep-alive or
    /// idle timeout): not an error. The user keeps its schedule (a think, a pace) and connects
    /// again when it next sends.
    fn idle_closed(&mut self, key: usize) {
        self.rec.counters.idle_closed += 1;
        self.close(key);
        self.users[key].lost_idle = true;
    }

    /// A request found its kept-alive connection closed before any byte of its reply (a send
    /// that hit a closed socket, a close or reset before the reply began): the server closed it
    /// as idle just as the request went. The request goes again once on a new connection if it
    /// is idempotent (RFC 9110 §9.2.2), as browsers do; the intended send time is kept, so the
    /// latency includes the reconnect. Returns false when it may not (and the caller fails it).
    fn resend(&mut self, key: usize) -> bool {
        let u = &self.users[key];
        let may = u.reused
            && !u.replied
            && !u.resent
            && matches!(u.proto, Proto::Plain)
            && u.outstanding == u.batch
            && idempotent(self.batch_bytes(key));
        if !may {
            return false;
        }
        // Counted again when they go out.
        self.rec.counters.requests -= u64::from(u.outstanding);
        self.idle_closed(key);
        let u = &mut self.users[key];
        u.resent = true;
        u.outstanding = 0;
        u.written = 0;
        u.state = State::Idle;
        self.connect(key);
        true
    }

    /// The bytes of the batch being sent (as `write_request` picks them).
    fn batch_bytes(&self, key: usize) -> &[u8] {
        let u = &self.users[key];
        match (&u.sess, &u.agent) {
            (Some(st), _) => &st.out,
            (None, Some(a)) if u.own_request => &a.hop,
            (None, _) => &self.s.request[..self.s.request_len * u.batch as usize],
        }
    }

    /// The user's session, if any, cannot go on: it ends aborted when the user next goes on.
    fn abort_session(&mut self, key: usize) {
        if let Some(st) = self.users[key].sess.as_mut() {
            st.on_failure();
        }
    }

    /// The server sent its first byte on the user's connection: it holds the connection now
    /// (before that, a TCP handshake may sit in its accept queue).
    fn served(&mut self, key: usize) {
        let u = &mut self.users[key];
        if u.net == Net::Tcp {
            u.net = Net::Served;
            self.served_open += 1;
            self.served_peak = self.served_peak.max(self.served_open);
            self.rec
                .record_served(micros(Instant::now().saturating_duration_since(u.tcp_at)));
        }
    }

    fn close(&mut self, key: usize) {
        let u = &mut self.users[key];
        if let Proto::Link(mut link) = std::mem::replace(&mut u.proto, Proto::Plain) {
            link.release(self.s.program.as_ref().and_then(|p| p.xmpp.as_ref()));
        }
        if let Some(conn) = u.conn.take() {
            drop(conn);
            self.rec.counters.disconnects += 1;
        }
        match std::mem::replace(&mut u.net, Net::None) {
            Net::Served => {
                self.served_open -= 1;
                self.tcp_open -= 1;
            }
            Net::Tcp => self.tcp_open -= 1,
            Net::None => {}
        }
        u.reused = false;
        self.next_gen = self.next_gen.wrapping_add(1);
        u.gen = self.next_gen;
        u.decoder.reset();
        u.deadline = None;
        u.written = 0;
        if u.state != State::Waiting {
            u.state = State::Idle;
        }
    }

    fn user_done(&mut self, key: usize) {
        self.close(key);
        let u = self.users.remove(key);
        if u.arrived {
            self.open_alive -= 1;
        }
        if let Some(k) = self.ramp_keys.get_mut(u.ramp as usize) {
            *k = None;
        }
        self.rec.counters.users_finished += 1;
    }

    fn emit_interval(&mut self, last: bool) {
        let c = &mut self.rec.counters;
        c.connections_open = self.served_open;
        c.connections_peak = self.served_peak;
        c.tcp_connected_open = self.tcp_open;
        c.tcp_connected_peak = self.tcp_peak;
        c.users_active = self.users.len() as u64;
        let fresh = self
            .s
            .recycled
            .try_recv()
            .unwrap_or_else(|_| Recorder::new());
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
                self.in_flight += u64::from(u.outstanding);
            }
            self.close(key);
        }
        (self.tcp_open, self.served_open) = open_at_stop;
        self.emit_interval(true);
        (self.tcp_open, self.served_open) = (0, 0);
    }
}

/// The ramp of a closed population (`Plan::ramp`): the schedule is `ramp.rs`; here users are
/// started when it says and told to leave by it (lazily: a user checks when next free).
impl Worker {
    fn ramp_init(&mut self) {
        let plan = self.s.plan.clone();
        let pops: Vec<u64> = match (&plan.model, &plan.workload) {
            (LoadModel::Sessions { .. }, Some(w)) => {
                w.populations.iter().map(|p| u64::from(p.0)).collect()
            }
            (LoadModel::Closed { users, .. }, _) => vec![u64::from(*users)],
            _ => return,
        };
        let st = RampState::new(&plan.ramp, &pops, self.s.slot, self.s.slots);
        self.ramp_keys = vec![None; st.order.len()];
        self.ramp = Some(Box::new(st));
    }

    /// When the ramp next starts or stops a user of this worker.
    fn ramp_next(&self) -> Option<Instant> {
        let r = self.ramp.as_ref()?;
        Some(self.s.start + r.next_at()?)
    }

    /// Apply the ramp's changes due by `now`: start the users it wants (at their scheduled
    /// instant, the origin of their first request's latency).
    fn ramp_tick(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.s.start);
        for _ in 0..TIMER_BATCH {
            let Some(r) = self.ramp.as_mut() else {
                return;
            };
            if self.budget == Some(0) {
                r.end();
                return;
            }
            let Some(change) = r.due(elapsed) else {
                return;
            };
            let Change::Start { idx, at } = change else {
                // A user told to leave does so when it is next free (`ramp_leaves`).
                continue;
            };
            if self.ramp_keys[idx].is_some() {
                // Told to leave and wanted again before it left: it simply stays.
                continue;
            }
            let g = r.order[idx].1;
            let at = self.s.start + at;
            let key = match (&self.s.plan.model, self.s.program.is_some()) {
                (LoadModel::Closed { per_user, .. }, _) => {
                    let per_user = *per_user;
                    let key = self.add_user(g, per_user);
                    self.rec.counters.users_started += 1;
                    self.schedule(key, at, Wake::Send);
                    key
                }
                (_, true) => match self.spawn_session_user(g, false, at) {
                    Some(key) => key,
                    None => continue,
                },
                _ => continue,
            };
            self.users[key].ramp = idx as u32;
            self.ramp_keys[idx] = Some(key as u32);
        }
    }

    /// A ramped user no longer wanted: it leaves now, at a point where it is free to.
    fn ramp_leaves(&self, key: usize) -> bool {
        let idx = self.users[key].ramp;
        idx != NO_RAMP && self.ramp.as_ref().is_some_and(|r| idx as usize >= r.wanted)
    }
}

/// A fresh non-blocking TCP socket with the plan's options, bound to `bind` if given.
/// Every request in `bytes` (HTTP/1.1, back to back) has an idempotent method (RFC 9110
/// §9.2.2): GET, HEAD, PUT, DELETE, OPTIONS, TRACE. Anything else, or bytes that are not HTTP
/// (raw TCP), is not.
fn idempotent(bytes: &[u8]) -> bool {
    const METHODS: [&[u8]; 6] = [
        b"GET ",
        b"HEAD ",
        b"PUT ",
        b"DELETE ",
        b"OPTIONS ",
        b"TRACE ",
    ];
    let mut rest = bytes;
    let mut any = false;
    while !rest.is_empty() {
        if !METHODS.iter().any(|m| rest.starts_with(m)) {
            return false;
        }
        any = true;
        // The next request starts after this one's head and body; for the methods above the
        // encoder writes a Content-Length when there is a body.
        match agent::request_len(rest) {
            Some(n) if n > 0 && n <= rest.len() => rest = &rest[n..],
            _ => return false,
        }
    }
    any
}

fn open_socket(plan: &Plan, bind: Option<std::net::IpAddr>) -> io::Result<Socket> {
    let domain = Domain::for_address(plan.target);
    let sock = Socket::new(
        domain,
        Type::STREAM.nonblocking().cloexec(),
        Some(Protocol::TCP),
    )?;
    let o = &plan.socket;
    if o.nodelay {
        sock.set_nodelay(true)?;
    }
    if let Some(b) = o.sndbuf {
        sock.set_send_buffer_size(b as usize)?;
    }
    if let Some(b) = o.rcvbuf {
        sock.set_recv_buffer_size(b as usize)?;
    }
    if let Some(ip) = bind {
        if ip.is_ipv4() {
            // Let the kernel pick the port at connect time, per (source, destination) pair,
            // instead of reserving one at bind time: each source address then gets its own
            // ephemeral range towards the target.
            let one: libc::c_int = 1;
            // SAFETY: valid socket, pointer to a live c_int of the right size.
            unsafe {
                libc::setsockopt(
                    sock.as_raw_fd(),
                    libc::IPPROTO_IP,
                    libc::IP_BIND_ADDRESS_NO_PORT,
                    (&one as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                );
            }
        }
        sock.bind(&SockAddr::from(std::net::SocketAddr::new(ip, 0)))?;
    }
    Ok(sock)
}

/// Entropy for the per-worker RNG seed (runs differ; a fixed seed can be added later).
/// The agent settings of a run, or `None` when no user needs one (HTTP/2, raw TCP, session
/// protocols, or cookies off with no redirects and no Digest credentials).
fn agent_config(plan: &Plan, program: Option<&Program>) -> Option<AgentConfig> {
    use headroom_core::session::{LinkSpec, Op, SessionBody};
    if plan.http2.is_some() {
        return None;
    }
    let ua = &plan.agent;
    let digest = ua
        .credentials
        .as_ref()
        .filter(|c| c.scheme == headroom_core::AuthScheme::Digest)
        .map(|c| (c.user.clone(), c.password.clone()));
    let mut http = true;
    let mut op_digest = false;
    if let Some(p) = program {
        http = p.w.link == LinkSpec::Plain
            && p.w.sessions.iter().any(|s| match &s.body {
                SessionBody::Ops { ops, .. } => ops.iter().any(|o| matches!(o, Op::Request(_))),
                SessionBody::Surge { .. } => true,
            });
        op_digest = p.w.sessions.iter().any(|s| match &s.body {
            SessionBody::Ops { ops, .. } => ops.iter().any(|o| {
                matches!(o, Op::Request(r) if r.auth.as_ref().is_some_and(|a| a.scheme == headroom_core::AuthScheme::Digest))
            }),
            SessionBody::Surge { .. } => false,
        });
    }
    let cfg = AgentConfig {
        cookies: ua.cookies,
        follow: ua.follow,
        host: agent::host_of(&plan.request.host).to_string(),
        port: plan.target.port(),
        scheme: if plan.tls.is_some() {
            headroom_proto::redirect::Scheme::Https
        } else {
            headroom_proto::redirect::Scheme::Http
        },
        any_digest: digest.is_some() || op_digest,
        digest,
        compressed: ua.compressed,
    };
    (http && cfg.active()).then_some(cfg)
}

fn seed_entropy() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    t.as_nanos() as u64 ^ u64::from(std::process::id()).rotate_left(32)
}

#[cfg(test)]
mod tests {
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
            agent: Default::default(),
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
