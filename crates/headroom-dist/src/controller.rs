//! The controller side: start one job on every agent, merge their interval streams exactly.
//!
//! [`run_controller`] connects to every agent, sends each the same job with its own execution
//! segment (`i` of `agents.len()`) and the same start instant, waits for every `Ready`, then
//! merges: interval k is emitted to the sink, in index order, once every agent still running
//! has reported it (the rule of the engine's own collector, with agents in place of workers).
//! An agent that finished early or was lost no longer holds the merge back; what it reported
//! before stays in the result.
//!
//! An agent with a pinned fingerprint ([`AgentAddr::pin`], or [`ControllerOpts::fingerprint`]
//! for all) is reached over TLS and must present exactly that certificate
//! ([`crate::tls`]); one without is reached in plain HTTP/2, which the controller does only when
//! the agent's address is loopback or [`ControllerOpts::insecure_plaintext`] allows it: the token
//! travels in every call's metadata.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use headroom_engine::{Interval, RunOutcome};
use headroom_metrics::Recorder;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tonic::metadata::MetadataValue;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request, Status};

use crate::agent::{Job, MAX_REQUEST_BYTES, VERSION};
use crate::messages::agent_client::AgentClient;
use crate::messages::agent_event::Event;
use crate::messages::{Done, RunRequest, StopRequest};
use crate::wire::decode_interval;

/// Where an agent listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentAddr {
    /// For messages, e.g. `local:3` or `ssh://user@host`.
    pub name: String,
    /// gRPC endpoint, e.g. `http://127.0.0.1:4711` (the scheme stays `http` with TLS too: the
    /// TLS is the connector's).
    pub endpoint: String,
    /// The SHA-256 fingerprint its certificate must have: the agent is reached over TLS.
    /// `None`: plain HTTP/2, unless [`ControllerOpts::fingerprint`] pins all agents.
    pub pin: Option<crate::tls::Fingerprint>,
}

/// What to do when an agent is lost during the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnLoss {
    /// Go on without it: the merge no longer waits for it.
    #[default]
    Continue,
    /// Cancel the other agents and finish with what was merged (`interrupted`).
    Stop,
}

#[derive(Debug, Clone)]
pub struct ControllerOpts {
    pub on_loss: OnLoss,
    /// From the moment every agent is connected to the start of the load. Every agent must have
    /// built its plan (and received its files) within it.
    pub start_delay: Duration,
    /// The run's interval (the agents' `--interval`): sets the loss timeout.
    pub interval: Duration,
    /// Limit for each agent's TCP + HTTP/2 connection.
    pub connect_timeout: Duration,
    /// An agent that sends nothing for this long once the load started is lost. `None`:
    /// `3 * interval + 5s`, and at least [`MIN_SILENCE`]. (An agent that dies is found at once:
    /// its connection breaks. Silence only catches a hung host or a cut network, and agents on
    /// saturated cores may well report late: 59 local agents establishing 1,000,000 connections
    /// on 2 cores were silent for over 8 s.)
    pub lost_after: Option<Duration>,
    /// The fingerprint of agents whose [`AgentAddr::pin`] is `None` (agents that share one
    /// certificate, `--agent-fingerprint`).
    pub fingerprint: Option<crate::tls::Fingerprint>,
    /// Reach an agent beyond loopback without TLS (its token then crosses the network in
    /// clear). Off: such an agent fails the run at its start, before the token is sent.
    pub insecure_plaintext: bool,
}

impl Default for ControllerOpts {
    fn default() -> Self {
        ControllerOpts {
            on_loss: OnLoss::Continue,
            start_delay: Duration::from_secs(2),
            interval: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(5),
            lost_after: None,
            fingerprint: None,
            insecure_plaintext: false,
        }
    }
}

/// An agent that stopped reporting before its run finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostAgent {
    pub name: String,
    /// Last interval it reported (its data up to there is in the result).
    pub after_interval: Option<u64>,
    pub why: String,
}

/// What a distributed run measured.
#[derive(Debug)]
pub struct DistOutcome {
    /// All agents merged. `started_at` is the common start instant; `elapsed` the longest
    /// agent's; `in_flight` the sum of the agents that finished.
    pub outcome: RunOutcome,
    pub lost: Vec<LostAgent>,
    /// Agents the run started on.
    pub agents: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum DistError {
    #[error("no agents to run on")]
    NoAgents,
    /// An agent could not start its share: unreachable, refused the token, bad plan...
    #[error("agent {name} ({endpoint}) {why}")]
    Agent {
        name: String,
        endpoint: String,
        why: String,
    },
    #[error("the agent token cannot be sent in an HTTP header (printable ASCII only)")]
    BadToken,
    #[error("could not start the controller's runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

/// What an agent's task reports to the merge loop.
enum Msg {
    Event(Box<Event>),
    /// The stream ended: `None` cleanly (EOF), `Some(why)` on an error.
    End(Option<String>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    Starting,
    Running,
    Finished,
    Lost,
    Cancelled,
}

struct AgentState {
    st: St,
    reported: Option<u64>,
    last_msg: Instant,
    done: Option<Done>,
    /// When a run without `Done` ended (lost or cancelled).
    ended: Option<Instant>,
}

impl AgentState {
    fn live(&self) -> bool {
        matches!(self.st, St::Starting | St::Running)
    }
}

/// What a failed call means, for a person.
fn status_why(s: &Status) -> String {
    match s.code() {
        Code::Unauthenticated => "refused the token".into(),
        Code::ResourceExhausted => "is busy with another run".into(),
        Code::Unavailable => format!("is unreachable: {}", s.message()),
        Code::Cancelled => "cancelled the run".into(),
        // A dropped connection mid-stream (the agent died or its host went away) comes as an
        // h2 error with code Unknown.
        Code::Unknown if s.message().contains("h2 protocol error") => {
            format!("its connection broke ({})", s.message())
        }
        c => format!("answered {c:?}: {}", s.message()),
    }
}

/// Whether every address `endpoint`'s host names is loopback (a name that does not resolve is
/// not).
async fn is_loopback(endpoint: &str) -> bool {
    let Ok(uri) = endpoint.parse::<tonic::transport::Uri>() else {
        return false;
    };
    let Some(host) = uri.host() else { return false };
    let host = host.trim_matches(|c| c == '[' || c == ']').to_string();
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        return ip.is_loopback();
    }
    let port = uri.port_u16().unwrap_or(80);
    let addrs: Vec<std::net::SocketAddr> =
        match tokio::net::lookup_host((host.as_str(), port)).await {
            Ok(a) => a.collect(),
            Err(_) => return false,
        };
    !addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback())
}

/// The transport error's sources say what happened (refused, unreachable, bad certificate...).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut why = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let s_text = s.to_string();
        if !why.ends_with(&s_text) {
            why = format!("{why}: {s_text}");
        }
        src = s.source();
    }
    why
}

async fn connect(a: &AgentAddr, opts: &ControllerOpts) -> Result<Channel, String> {
    let timeout = opts.connect_timeout;
    let ep = Endpoint::from_shared(a.endpoint.clone())
        .map_err(|e| format!("has a bad address: {e}"))?
        .connect_timeout(timeout)
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(10))
        .keep_alive_timeout(Duration::from_secs(20))
        .keep_alive_while_idle(true);
    let pin = a.pin.or(opts.fingerprint);
    if pin.is_none() && !opts.insecure_plaintext && !is_loopback(&a.endpoint).await {
        return Err(
            "is beyond loopback and no certificate fingerprint is pinned for it, so its token \
             would cross the network in clear: write the sha256: fingerprint the agent printed \
             after its address in the agents file (or give --agent-fingerprint), or accept \
             plaintext with --insecure-plaintext"
                .into(),
        );
    }
    let connector = pin.map(crate::tls::PinnedConnector::new);
    let connecting = async {
        match &connector {
            Some(c) => ep.connect_with_connector(c.clone()).await,
            None => ep.connect().await,
        }
    };
    match tokio::time::timeout(timeout, connecting).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => {
            if let (Some(c), Some(pin)) = (&connector, pin) {
                if let Some(seen) = c.seen().filter(|s| *s != pin) {
                    return Err(format!(
                        "presented certificate {seen}, but {pin} is pinned for it: not the \
                         agent pinned (a new certificate, or someone in between); if it is \
                         yours, pin the fingerprint it printed at start"
                    ));
                }
                return Err(format!(
                    "could not be reached over TLS (does it serve TLS? it prints a sha256: \
                     fingerprint when it does): {}",
                    error_chain(&e)
                ));
            }
            Err(format!("could not be reached: {}", error_chain(&e)))
        }
        Err(_) => Err(format!("could not be reached within {timeout:?}")),
    }
}

/// The least silence after which an agent counts as lost, unless `lost_after` says otherwise.
pub const MIN_SILENCE: Duration = Duration::from_secs(60);

/// How long a stopped run waits for the agents' last intervals before cancelling them.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Ask one agent to stop its run (best effort: a lost agent is handled by its stream).
async fn send_stop(channel: Channel, auth: MetadataValue<tonic::metadata::Ascii>) {
    let mut client = AgentClient::new(channel);
    let mut req = Request::new(StopRequest {});
    req.metadata_mut().insert("authorization", auth);
    let _ = tokio::time::timeout(Duration::from_secs(2), client.stop(req)).await;
}

async fn agent_task(
    idx: usize,
    channel: Channel,
    req: Request<RunRequest>,
    tx: mpsc::UnboundedSender<(usize, Msg)>,
) {
    let mut client = AgentClient::new(channel).max_decoding_message_size(MAX_REQUEST_BYTES);
    let mut stream = match client.run(req).await {
        Ok(r) => r.into_inner(),
        Err(s) => {
            let _ = tx.send((idx, Msg::End(Some(status_why(&s)))));
            return;
        }
    };
    loop {
        match stream.message().await {
            Ok(Some(ev)) => {
                if let Some(e) = ev.event {
                    if tx.send((idx, Msg::Event(Box::new(e)))).is_err() {
                        return;
                    }
                }
            }
            Ok(None) => {
                let _ = tx.send((idx, Msg::End(None)));
                return;
            }
            Err(s) => {
                let _ = tx.send((idx, Msg::End(Some(status_why(&s)))));
                return;
            }
        }
    }
}

/// One interval being merged.
struct Pending {
    rec: Recorder,
    start_us: u64,
    length_us: u64,
}

/// Run `job` on `agents` (agent i runs segment i of `agents.len()`) and merge their intervals
/// into `sink`, in index order. Blocking: runs a small tokio runtime of its own.
///
/// Errors only when the run could not start: an agent unreachable, refusing the token, failing
/// to build its plan or not ready by the start. Agents lost later are listed in
/// [`DistOutcome::lost`]; nothing is printed. Setting `stop` cancels every agent's run, emits
/// what was received and returns (`interrupted`).
pub fn run_controller(
    agents: &[AgentAddr],
    token: &str,
    job: &Job,
    opts: ControllerOpts,
    stop: Arc<AtomicBool>,
    sink: &mut dyn FnMut(&Interval<'_>),
) -> Result<DistOutcome, DistError> {
    if agents.is_empty() {
        return Err(DistError::NoAgents);
    }
    let auth: MetadataValue<_> = format!("Bearer {token}")
        .parse()
        .map_err(|_| DistError::BadToken)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("headroom-controller")
        .enable_all()
        .build()
        .map_err(DistError::Runtime)?;
    rt.block_on(controller(agents, auth, job, opts, stop, sink))
}

async fn controller(
    agents: &[AgentAddr],
    auth: MetadataValue<tonic::metadata::Ascii>,
    job: &Job,
    opts: ControllerOpts,
    stop: Arc<AtomicBool>,
    sink: &mut dyn FnMut(&Interval<'_>),
) -> Result<DistOutcome, DistError> {
    let n = agents.len();
    let fail = |i: usize, why: String| DistError::Agent {
        name: agents[i].name.clone(),
        endpoint: agents[i].endpoint.clone(),
        why,
    };

    // Connect to all at once.
    let connecting: Vec<JoinHandle<Result<Channel, String>>> = agents
        .iter()
        .map(|a| {
            let a = a.clone();
            let o = opts.clone();
            tokio::spawn(async move { connect(&a, &o).await })
        })
        .collect();
    let mut channels = Vec::with_capacity(n);
    for (i, h) in connecting.into_iter().enumerate() {
        match h.await {
            Ok(Ok(c)) => channels.push(c),
            Ok(Err(why)) => return Err(fail(i, why)),
            Err(e) => return Err(fail(i, format!("could not be connected to: {e}"))),
        }
    }

    // The spec first: encoding one of hundreds of MB (feeder files travel in it) takes a
    // noticeable time, which must not eat into the agents' time to get ready.
    let spec = crate::agent::encode_spec(&job.spec);
    // Same start for all.
    let start_at = SystemTime::now() + opts.start_delay;
    let start = Instant::now() + opts.start_delay;
    let start_ns = start_at
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let (tx, mut rx) = mpsc::unbounded_channel::<(usize, Msg)>();
    let mut tasks = Vec::with_capacity(n);
    let stop_channels = channels.clone();
    for (i, ch) in channels.into_iter().enumerate() {
        let mut req = Request::new(RunRequest {
            spec: spec.clone(),
            preflight: job.preflight,
            segment_index: i as u32,
            segment_count: n as u32,
            start_at_unix_ns: start_ns,
            controller_version: VERSION.into(),
        });
        req.metadata_mut().insert("authorization", auth.clone());
        tasks.push(tokio::spawn(agent_task(i, ch, req, tx.clone())));
    }
    drop(tx);
    let abort_all = |tasks: &[JoinHandle<()>]| tasks.iter().for_each(|t| t.abort());

    let lost_after = opts
        .lost_after
        .unwrap_or((opts.interval * 3 + Duration::from_secs(5)).max(MIN_SILENCE));
    let now = Instant::now();
    let mut st: Vec<AgentState> = (0..n)
        .map(|_| AgentState {
            st: St::Starting,
            reported: None,
            last_msg: now,
            done: None,
            ended: None,
        })
        .collect();
    let mut m = Merge {
        pending: BTreeMap::new(),
        next_emit: 0,
        total: Recorder::new(),
        peak: 0,
        tcp_peak: 0,
        interval: opts.interval,
    };
    let mut lost: Vec<LostAgent> = Vec::new();
    let mut cancelled = false;
    // A stop (Ctrl-C, or an agent lost under OnLoss::Stop) first asks every agent to stop and
    // keeps merging until each has sent its last interval and `Done`, for at most STOP_GRACE;
    // only then are the streams cancelled. So a stopped run keeps every sample measured.
    let mut stopping = false;
    let mut draining_until: Option<Instant> = None;

    loop {
        if !st.iter().any(AgentState::live) {
            break;
        }
        if (stopping || stop.load(Ordering::SeqCst)) && draining_until.is_none() {
            stopping = true;
            draining_until = Some(Instant::now() + STOP_GRACE);
            for (i, ch) in stop_channels.iter().enumerate() {
                if st[i].live() {
                    tokio::spawn(send_stop(ch.clone(), auth.clone()));
                }
            }
        }
        if draining_until.is_some_and(|d| Instant::now() >= d) {
            cancelled = true;
            break;
        }
        let msg = tokio::select! {
            m = rx.recv() => match m {
                Some(m) => Some(m),
                // Every agent's task ended: each sent its end first, so none is live; guard
                // against spinning on the closed channel all the same.
                None => {
                    let i = st.iter().position(AgentState::live).expect("a live agent");
                    Some((i, Msg::End(Some("lost its connection task".into()))))
                }
            },
            _ = tokio::time::sleep(Duration::from_millis(50)) => None,
        };
        let now = Instant::now();
        if let Some((i, msg)) = msg {
            let a = &mut st[i];
            a.last_msg = now;
            let mut lose: Option<String> = None;
            match msg {
                Msg::End(why) if a.live() => {
                    let why = why.unwrap_or_else(|| "closed its stream without finishing".into());
                    if a.st == St::Starting {
                        abort_all(&tasks);
                        // A plain HTTP/2 call to an agent that serves TLS breaks at once, in
                        // one of several ways that say nothing of TLS (an h2 error, a reset, a
                        // stream closed early, a Cancelled status from the client's own
                        // transport, depending on timing): hint at TLS on any of them, only not
                        // when the agent itself answered (it refuses a token or is busy; it
                        // never sends Cancelled).
                        let plain = agents[i].pin.or(opts.fingerprint).is_none();
                        let agent_answered = ["refused the token", "is busy"]
                            .iter()
                            .any(|p| why.starts_with(p));
                        let hint = if plain && !agent_answered {
                            " (an agent that serves TLS prints a sha256: fingerprint after its \
                             address: pin it, in the agents file or with --agent-fingerprint)"
                        } else {
                            ""
                        };
                        return Err(fail(i, format!("{why}{hint}")));
                    }
                    lose = Some(why);
                }
                Msg::Event(e) if a.live() => match *e {
                    Event::Ready(_) => a.st = St::Running,
                    Event::Interval(iv) => {
                        a.st = St::Running;
                        if a.reported.is_some_and(|r| iv.index <= r) {
                            lose = Some(format!("sent interval {} out of order", iv.index));
                        } else {
                            match decode_interval(&iv) {
                                Ok(rec) => {
                                    a.reported = Some(iv.index);
                                    m.add(iv.index, iv.start_us, iv.length_us, &rec);
                                }
                                Err(e) => lose = Some(format!("sent a bad interval: {e}")),
                            }
                        }
                    }
                    // A run cut short that this controller did not stop: the agent itself
                    // was stopped (SIGTERM, Ctrl-C, its stdin closed). It sent what it measured
                    // and `Done`, but its share of the load is missing: it is lost.
                    Event::Done(d)
                        if d.interrupted && !stopping && !stop.load(Ordering::SeqCst) =>
                    {
                        a.done = Some(d);
                        lose = Some(
                            "stopped before the end of its run (the agent was shut down: \
                             SIGTERM or Ctrl-C on its host)"
                                .into(),
                        );
                    }
                    Event::Done(d) => {
                        a.st = St::Finished;
                        a.done = Some(d);
                    }
                    Event::Failed(f) => {
                        if a.st == St::Starting {
                            abort_all(&tasks);
                            return Err(fail(i, format!("failed: {}", f.message)));
                        }
                        lose = Some(format!("failed: {}", f.message));
                    }
                },
                // Anything after the end of an agent's run.
                _ => {}
            }
            if let Some(why) = lose {
                let a = &mut st[i];
                a.st = St::Lost;
                a.ended = Some(now);
                tasks[i].abort();
                lost.push(LostAgent {
                    name: agents[i].name.clone(),
                    after_interval: a.reported,
                    why,
                });
                if opts.on_loss == OnLoss::Stop {
                    stopping = true;
                }
            }
        }
        for (i, a) in st.iter_mut().enumerate() {
            if a.st == St::Starting && now >= start {
                abort_all(&tasks);
                return Err(fail(
                    i,
                    format!(
                        "was not ready by the start ({:?} after connecting)",
                        opts.start_delay
                    ),
                ));
            }
            if a.st == St::Running && now >= a.last_msg.max(start) + lost_after {
                a.st = St::Lost;
                a.ended = Some(a.last_msg);
                tasks[i].abort();
                lost.push(LostAgent {
                    name: agents[i].name.clone(),
                    after_interval: a.reported,
                    why: format!("sent nothing for {lost_after:?}"),
                });
                if opts.on_loss == OnLoss::Stop {
                    stopping = true;
                }
            }
        }
        m.emit_complete(&st, n, sink);
    }

    if cancelled {
        // Cancel every run (dropping a stream stops the agent's job), then take in what had
        // already arrived.
        abort_all(&tasks);
        while let Ok((i, msg)) = rx.try_recv() {
            let a = &mut st[i];
            let Msg::Event(e) = msg else { continue };
            match *e {
                Event::Interval(iv) if a.live() && a.reported.is_none_or(|r| iv.index > r) => {
                    if let Ok(rec) = decode_interval(&iv) {
                        a.reported = Some(iv.index);
                        m.add(iv.index, iv.start_us, iv.length_us, &rec);
                    }
                }
                Event::Done(d) if a.live() => {
                    a.st = St::Finished;
                    a.done = Some(d);
                }
                _ => {}
            }
        }
        let now = Instant::now();
        for a in st.iter_mut().filter(|a| a.live()) {
            a.st = St::Cancelled;
            a.ended = Some(now);
        }
    }
    // Every agent ended: flush what is left, in order.
    m.flush(&st, n, sink);

    let mut elapsed = Duration::ZERO;
    let mut in_flight = 0;
    let mut interrupted = cancelled || stopping || stop.load(Ordering::SeqCst);
    for a in &st {
        if let Some(d) = &a.done {
            elapsed = elapsed.max(Duration::from_micros(d.elapsed_us));
            in_flight += d.in_flight;
            interrupted |= d.interrupted;
        } else if let Some(t) = a.ended {
            elapsed = elapsed.max(t.saturating_duration_since(start));
        }
    }
    Ok(DistOutcome {
        outcome: RunOutcome {
            total: m.total,
            started_at: start_at,
            elapsed,
            connections_peak: m.peak,
            tcp_connected_peak: m.tcp_peak,
            in_flight,
            intervals: m.next_emit,
            interrupted,
        },
        lost,
        agents: n,
    })
}

/// The merge of the agents' intervals, emitted in index order.
struct Merge {
    pending: BTreeMap<u64, Pending>,
    next_emit: u64,
    total: Recorder,
    peak: u64,
    tcp_peak: u64,
    interval: Duration,
}

impl Merge {
    fn add(&mut self, index: u64, start_us: u64, length_us: u64, rec: &Recorder) {
        let p = self.pending.entry(index).or_insert_with(|| Pending {
            rec: Recorder::new(),
            start_us,
            length_us: 0,
        });
        p.rec.add(rec);
        p.length_us = p.length_us.max(length_us);
    }

    /// Emit every interval that every live agent has reported.
    fn emit_complete(&mut self, st: &[AgentState], n: usize, sink: &mut dyn FnMut(&Interval<'_>)) {
        loop {
            let k = self.next_emit;
            let reported = |a: &AgentState| a.reported.is_some_and(|r| r >= k);
            let complete = st.iter().all(|a| !a.live() || reported(a))
                && st.iter().any(|a| a.live() && reported(a));
            if !complete {
                return;
            }
            // A live agent went past k without reporting it (none had data): an empty interval.
            let p = self.pending.remove(&k);
            self.emit(k, p, st, n, sink);
            self.next_emit = k + 1;
        }
    }

    fn flush(&mut self, st: &[AgentState], n: usize, sink: &mut dyn FnMut(&Interval<'_>)) {
        for (k, p) in std::mem::take(&mut self.pending) {
            self.emit(k, Some(p), st, n, sink);
            self.next_emit = k + 1;
        }
    }

    fn emit(
        &mut self,
        k: u64,
        p: Option<Pending>,
        st: &[AgentState],
        n: usize,
        sink: &mut dyn FnMut(&Interval<'_>),
    ) {
        let p = p.unwrap_or_else(|| Pending {
            rec: Recorder::new(),
            start_us: headroom_metrics::micros(self.interval).saturating_mul(k),
            length_us: headroom_metrics::micros(self.interval),
        });
        let done = st
            .iter()
            .filter(|a| !a.live() && a.reported.is_none_or(|r| r <= k))
            .count();
        self.total.add(&p.rec);
        self.peak = self.peak.max(p.rec.counters.connections_peak);
        self.tcp_peak = self.tcp_peak.max(p.rec.counters.tcp_connected_peak);
        sink(&Interval {
            index: k,
            start: Duration::from_micros(p.start_us),
            length: Duration::from_micros(p.length_us),
            merged: &p.rec,
            workers_done: done,
            workers: n,
        });
    }
}
