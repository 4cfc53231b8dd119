//! The agent side: a gRPC server (`headroom.dist.Agent`) that runs one job at a time with a
//! [`Runner`] and streams its intervals back.
//!
//! A call must carry `authorization: Bearer <token>`; anything else is answered
//! `UNAUTHENTICATED` by an interceptor that sees only the request's metadata, before its body
//! is read or decoded (so [`MAX_REQUEST_BYTES`] applies to authenticated calls only: an
//! unauthenticated 200 MB upload costs the agent nothing), and logged on stderr with the peer's
//! address, at most one line a second. Beyond loopback a token has at least
//! [`MIN_TOKEN_BYTES`] bytes. An agent is a tool that sends traffic
//! where it is told, so it never runs without a token: [`AgentService::new`] and [`serve_agent`]
//! refuse an empty one.
//!
//! Beyond loopback an agent serves over TLS ([`Serving::tls`], see [`crate::tls`]: the
//! controller pins the certificate's fingerprint), so the token never crosses a network in
//! clear, unless [`Serving::insecure_plaintext`] says so: [`serve_agent`] refuses to start
//! otherwise.
//!
//! The runner is blocking (it runs the engine, which owns its threads): it runs on a thread of
//! its own, and the intervals it reports are encoded there, once per interval, and handed to the
//! response stream through a channel. The engine's workers never touch gRPC.
//!
//! When the controller goes away (stream cancelled, connection lost), the response stream is
//! dropped and the job's stop flag is set, so the run ends early.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use headroom_core::spec::{RunSpec, SPEC_VERSION};
use headroom_engine::{Interval, RunOutcome};
use tokio::sync::{mpsc, Notify};
use tonic::codegen::tokio_stream::Stream;
use tonic::{Request, Response, Status};

use crate::messages::agent_event::Event;
use crate::messages::agent_server::{Agent, AgentServer};
use crate::messages::{AgentEvent, Done, Failed, Ready, RunRequest, StopReply, StopRequest};
use crate::tls::AgentIdentity;
use crate::wire::encode_interval;

/// How an agent serves its port.
#[derive(Debug, Clone, Default)]
pub struct Serving {
    /// TLS with this certificate; `None`: plain HTTP/2.
    pub tls: Option<AgentIdentity>,
    /// Allow plain HTTP/2 beyond loopback (the token then crosses the network in clear).
    pub insecure_plaintext: bool,
}

/// This crate's version, sent in `Ready` and `RunRequest`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Largest `RunRequest` an agent accepts (scenario and data files travel in it).
pub const MAX_REQUEST_BYTES: usize = 256 << 20;

/// Shortest token an agent listening beyond loopback accepts.
pub const MIN_TOKEN_BYTES: usize = 16;

/// Seconds a shutting-down agent waits for its job's last messages before it closes anyway.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// What an agent is asked to run: a typed spec (the scenario and every file it reads inside as
/// bytes), never a command line and never a path to open.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// The run, as the controller built it.
    pub spec: RunSpec,
    /// Check the target is reachable before the load.
    pub preflight: bool,
    /// This agent's execution segment: `segment_index` of `segment_count`.
    pub segment_index: u32,
    pub segment_count: u32,
    /// When the load starts, on this machine's clock; interval k covers
    /// `[start_at + k·I, start_at + (k+1)·I)`.
    pub start_at: SystemTime,
}

/// The spec of a `RunRequest`: JSON of [`RunSpec`] at this headroom's [`SPEC_VERSION`].
pub fn decode_spec(bytes: &[u8]) -> Result<RunSpec, String> {
    if bytes.is_empty() {
        return Err(
            "the controller sent no run spec (is it an older headroom? run the same \
                    version on the controller and the agents)"
                .into(),
        );
    }
    let spec: RunSpec = serde_json::from_slice(bytes)
        .map_err(|e| format!("the controller's run spec does not decode: {e}"))?;
    if spec.version != SPEC_VERSION {
        return Err(format!(
            "the controller's run spec is version {} and this agent reads version \
             {SPEC_VERSION}: run the same headroom version on the controller and the agents",
            spec.version
        ));
    }
    Ok(spec)
}

/// The bytes of `spec` in a `RunRequest`.
pub fn encode_spec(spec: &RunSpec) -> Vec<u8> {
    serde_json::to_vec(spec).expect("a RunSpec serializes")
}

/// Runs a job, blocking: `runner(job, stop, ready, sink)`.
///
/// - builds and validates the plan from `job.spec` for segment
///   `job.segment_index` of `job.segment_count`, then calls `ready(threads)` once (this sends
///   `Ready` to the controller), then waits for `job.start_at` and runs the load;
/// - calls `sink` with each merged interval, in order (typically the engine's sink);
/// - stops early once `stop` is set (the controller went away or the agent shuts down);
/// - returns the outcome, or a message a person can act on (sent as `Failed`).
///
/// An error returned before `ready` was called fails the whole distributed run at its start.
pub type Runner = Arc<
    dyn Fn(
            Job,
            Arc<AtomicBool>,
            &mut dyn FnMut(u32),
            &mut dyn FnMut(&Interval<'_>),
        ) -> Result<RunOutcome, String>
        + Send
        + Sync,
>;

/// Equality of two byte strings in time independent of where they differ.
fn ct_eq(given: &[u8], expected: &[u8]) -> bool {
    let mut diff = u8::from(given.len() != expected.len());
    for (i, e) in expected.iter().enumerate() {
        diff |= e ^ given.get(i).copied().unwrap_or(!e);
    }
    std::hint::black_box(diff) == 0
}

fn unix_ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

struct Shared {
    token: Vec<u8>,
    runner: Runner,
    busy: AtomicBool,
    /// Stop flag of the job running now.
    current: Mutex<Option<Arc<AtomicBool>>>,
    /// When the last refusal was logged, and how many were not since.
    refusals: Mutex<(Option<std::time::Instant>, u64)>,
}

impl Shared {
    fn token_ok(&self, metadata: &tonic::metadata::MetadataMap) -> bool {
        let given = metadata
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        ct_eq(given.as_bytes(), &self.token)
    }

    /// One stderr line per refused call, at most one a second (a flood of attempts must not
    /// flood the log): the lines in between are counted in the next one.
    fn log_refusal(&self, peer: Option<SocketAddr>) {
        let mut r = self.refusals.lock().expect("agent state");
        let now = std::time::Instant::now();
        if r.0
            .is_some_and(|t| now.duration_since(t) < Duration::from_secs(1))
        {
            r.1 += 1;
            return;
        }
        let more = std::mem::take(&mut r.1);
        r.0 = Some(now);
        let peer = peer.map_or_else(|| "an unknown peer".to_string(), |p| p.to_string());
        let more = if more > 0 {
            format!(" ({more} more refused since the last such line)")
        } else {
            String::new()
        };
        eprintln!("headroom agent: refused a call from {peer}: missing or wrong token{more}");
    }
}

/// The token check on a call's metadata, before its body is read (see the module's notes).
#[derive(Clone)]
pub struct TokenCheck {
    shared: Arc<Shared>,
}

impl tonic::service::Interceptor for TokenCheck {
    fn call(&mut self, req: Request<()>) -> Result<Request<()>, Status> {
        if self.shared.token_ok(req.metadata()) {
            Ok(req)
        } else {
            self.shared.log_refusal(req.remote_addr());
            Err(Status::unauthenticated("missing or wrong agent token"))
        }
    }
}

/// The `headroom.dist.Agent` service; cheap to clone (shared state).
#[derive(Clone)]
pub struct AgentService {
    shared: Arc<Shared>,
}

impl AgentService {
    /// A service accepting calls that carry `token`. An empty token is refused.
    pub fn new(token: String, runner: Runner) -> anyhow::Result<Self> {
        if token.is_empty() {
            anyhow::bail!("an agent needs a non-empty token: it sends traffic where it is told");
        }
        Ok(AgentService {
            shared: Arc::new(Shared {
                token: token.into_bytes(),
                runner,
                busy: AtomicBool::new(false),
                current: Mutex::new(None),
                refusals: Mutex::new((None, 0)),
            }),
        })
    }

    /// The tonic service behind its token check, with request size limits set.
    pub fn into_server(
        self,
    ) -> tonic::service::interceptor::InterceptedService<AgentServer<AgentService>, TokenCheck>
    {
        let check = TokenCheck {
            shared: self.shared.clone(),
        };
        tonic::service::interceptor::InterceptedService::new(
            AgentServer::new(self).max_decoding_message_size(MAX_REQUEST_BYTES),
            check,
        )
    }

    /// Set the stop flag of the running job, if any.
    pub fn stop_job(&self) {
        if let Some(s) = self.shared.current.lock().expect("agent state").as_ref() {
            s.store(true, Ordering::SeqCst);
        }
    }

    /// The interceptor checked already; checked again here so the service is never served
    /// without it.
    fn authorize<T>(&self, req: &Request<T>) -> Result<(), Status> {
        if self.shared.token_ok(req.metadata()) {
            Ok(())
        } else {
            Err(Status::unauthenticated("missing or wrong agent token"))
        }
    }
}

/// The response stream of `Run`; dropping it (client gone) stops the job.
pub struct EventStream {
    rx: mpsc::UnboundedReceiver<Result<AgentEvent, Status>>,
    stop: Arc<AtomicBool>,
}

impl Stream for EventStream {
    type Item = Result<AgentEvent, Status>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}

impl Drop for EventStream {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn event(e: Event) -> Result<AgentEvent, Status> {
    Ok(AgentEvent { event: Some(e) })
}

#[tonic::async_trait]
impl Agent for AgentService {
    type RunStream = EventStream;

    async fn run(&self, req: Request<RunRequest>) -> Result<Response<EventStream>, Status> {
        self.authorize(&req)?;
        let r = req.into_inner();
        if r.segment_count == 0 || r.segment_index >= r.segment_count {
            return Err(Status::invalid_argument(format!(
                "segment {} of {} does not exist",
                r.segment_index, r.segment_count
            )));
        }
        if self
            .shared
            .busy
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(Status::resource_exhausted(
                "this agent is already running a job",
            ));
        }
        let spec = decode_spec(&r.spec).map_err(Status::invalid_argument)?;
        let job = Job {
            spec,
            preflight: r.preflight,
            segment_index: r.segment_index,
            segment_count: r.segment_count,
            start_at: UNIX_EPOCH + Duration::from_nanos(r.start_at_unix_ns),
        };
        let stop = Arc::new(AtomicBool::new(false));
        *self.shared.current.lock().expect("agent state") = Some(stop.clone());
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = self.shared.clone();
        let job_stop = stop.clone();
        let spawned = std::thread::Builder::new()
            .name("headroom-agent-job".into())
            .spawn(move || run_job(shared, job, job_stop, tx));
        if let Err(e) = spawned {
            *self.shared.current.lock().expect("agent state") = None;
            self.shared.busy.store(false, Ordering::Release);
            return Err(Status::internal(format!("could not start the job: {e}")));
        }
        Ok(Response::new(EventStream { rx, stop }))
    }

    /// End the running job as Ctrl-C would; its stream still carries the last interval and
    /// `Done`, so a controller that stops a run loses none of it.
    async fn stop(&self, req: Request<StopRequest>) -> Result<Response<StopReply>, Status> {
        self.authorize(&req)?;
        let running = self.shared.current.lock().expect("agent state").is_some();
        self.stop_job();
        Ok(Response::new(StopReply { running }))
    }
}

/// The job's thread: run, forward intervals, end with `Done` or `Failed`, free the agent.
fn run_job(
    shared: Arc<Shared>,
    job: Job,
    stop: Arc<AtomicBool>,
    tx: mpsc::UnboundedSender<Result<AgentEvent, Status>>,
) {
    let ready_sent = std::cell::Cell::new(false);
    let send_ready = |threads: u32| {
        if !ready_sent.replace(true) {
            let _ = tx.send(event(Event::Ready(Ready {
                agent_version: VERSION.into(),
                pid: std::process::id(),
                threads,
            })));
        }
    };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut ready = |threads: u32| send_ready(threads);
        let mut sink = |iv: &Interval<'_>| {
            send_ready(0);
            let _ = tx.send(event(Event::Interval(encode_interval(iv))));
        };
        (shared.runner)(job, stop.clone(), &mut ready, &mut sink)
    }));
    let last = match result {
        Ok(Ok(o)) => {
            send_ready(0);
            Event::Done(Done {
                elapsed_us: headroom_metrics::micros(o.elapsed),
                in_flight: o.in_flight,
                connections_peak: o.connections_peak,
                intervals: o.intervals,
                interrupted: o.interrupted,
                started_at_unix_ns: unix_ns(o.started_at),
            })
        }
        Ok(Err(message)) => Event::Failed(Failed { message }),
        Err(_) => Event::Failed(Failed {
            message: "the agent's run panicked".into(),
        }),
    };
    // Free the agent before the last message, so a controller that starts the next run as soon
    // as it sees `Done` does not find it busy.
    *shared.current.lock().expect("agent state") = None;
    shared.busy.store(false, Ordering::Release);
    let _ = tx.send(event(last));
}

/// Serve the agent on `listen` until SIGINT or SIGTERM. Blocking; see [`serve_agent_until`].
pub fn serve_agent(
    listen: SocketAddr,
    token: String,
    runner: Runner,
    serving: Serving,
    on_listening: impl FnOnce(SocketAddr),
) -> anyhow::Result<()> {
    serve_inner(listen, token, runner, serving, on_listening, async {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            match signal(SignalKind::terminate()) {
                Ok(mut term) => {
                    tokio::select! {
                        _ = tokio::signal::ctrl_c() => {}
                        _ = term.recv() => {}
                    }
                }
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    })
}

/// Serve the agent on `listen` (port 0 allowed) until `shutdown` is set. Blocking: builds a
/// small tokio runtime of its own (one worker thread: the load engine owns the cores), binds,
/// calls `on_listening` with the bound address, and serves. On shutdown the running job, if
/// any, is stopped and given a few seconds to send its last messages.
pub fn serve_agent_until(
    listen: SocketAddr,
    token: String,
    runner: Runner,
    serving: Serving,
    on_listening: impl FnOnce(SocketAddr),
    shutdown: Arc<AtomicBool>,
) -> anyhow::Result<()> {
    serve_inner(listen, token, runner, serving, on_listening, async move {
        while !shutdown.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
}

fn serve_inner(
    listen: SocketAddr,
    token: String,
    runner: Runner,
    serving: Serving,
    on_listening: impl FnOnce(SocketAddr),
    signal: impl Future<Output = ()> + Send,
) -> anyhow::Result<()> {
    if !listen.ip().is_loopback() && serving.tls.is_none() && !serving.insecure_plaintext {
        anyhow::bail!(
            "an agent listening on {listen} (beyond loopback) needs TLS, or an explicit \
             choice of plaintext: the token would cross the network in clear"
        );
    }
    if !listen.ip().is_loopback() && token.len() < MIN_TOKEN_BYTES {
        anyhow::bail!(
            "an agent listening on {listen} (beyond loopback) needs a token of at least \
             {MIN_TOKEN_BYTES} bytes (this one has {})",
            token.len()
        );
    }
    let service = AgentService::new(token, runner)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("headroom-agent-rpc")
        .enable_all()
        .build()
        .context("could not start the agent's runtime")?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("could not listen on {listen}"))?;
        on_listening(listener.local_addr()?);
        let fired = Arc::new(Notify::new());
        let handle = service.clone();
        let fired2 = fired.clone();
        let mut builder = agent_server_builder();
        if let Some(id) = &serving.tls {
            builder = builder
                .tls_config(id.server_config())
                .context("the agent's certificate and key")?;
        }
        let serve = builder.serve_with_incoming_shutdown(
            service.into_server(),
            tokio_stream::wrappers::TcpListenerStream::new(listener),
            async move {
                signal.await;
                handle.stop_job();
                fired2.notify_one();
            },
        );
        tokio::select! {
            r = serve => r.context("agent server"),
            _ = async { fired.notified().await; tokio::time::sleep(SHUTDOWN_GRACE).await } => Ok(()),
        }
    })
}

/// The tonic server settings agents use: no Nagle delay, and HTTP/2 keep-alives so a controller
/// that vanished (machine down, network cut) is noticed and its job stopped.
pub fn agent_server_builder() -> tonic::transport::Server {
    tonic::transport::Server::builder()
        .tcp_nodelay(true)
        .http2_keepalive_interval(Some(Duration::from_secs(10)))
        .http2_keepalive_timeout(Some(Duration::from_secs(20)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_time_compare() {
        assert!(ct_eq(b"secret", b"secret"));
        assert!(!ct_eq(b"secreT", b"secret"));
        assert!(!ct_eq(b"secret1", b"secret"));
        assert!(!ct_eq(b"secre", b"secret"));
        assert!(!ct_eq(b"", b"secret"));
        assert!(!ct_eq(b"\xff", b"\x00"));
    }

    #[test]
    fn empty_token_refused_at_startup() {
        let runner: Runner = Arc::new(|_, _, _, _| Err("never".into()));
        let e = serve_agent_until(
            "127.0.0.1:0".parse().unwrap(),
            String::new(),
            runner,
            Serving::default(),
            |_| panic!("must not listen"),
            Arc::new(AtomicBool::new(true)),
        )
        .unwrap_err();
        assert!(e.to_string().contains("token"), "{e}");
    }

    #[test]
    fn plaintext_beyond_loopback_refused_at_startup() {
        let runner: Runner = Arc::new(|_, _, _, _| Err("never".into()));
        let e = serve_agent_until(
            "0.0.0.0:0".parse().unwrap(),
            "a-token-of-sixteen-bytes-or-more".into(),
            runner,
            Serving::default(),
            |_| panic!("must not listen"),
            Arc::new(AtomicBool::new(true)),
        )
        .unwrap_err();
        assert!(e.to_string().contains("needs TLS"), "{e}");
    }
}
