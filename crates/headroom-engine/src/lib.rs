//! headroom's load engine.
//!
//! [`run`] executes a [`Plan`]: it starts one worker thread per `plan.threads`, each an epoll
//! event loop owning its share of the users (see `worker/` for the hot path), and turns the
//! calling thread into the collector. Every `plan.interval` each worker hands over its recorder;
//! the collector merges the workers' recorders of the same interval exactly (HdrHistogram adds)
//! and passes the merged interval to the caller's sink, in interval order, as soon as every
//! worker still running has reported it. Reporting therefore never reads live worker state.
//!
//! Beneath the worker, every connection is a transport (`transport.rs`: plain TCP or rustls)
//! carrying one protocol with one calling convention (`protocol.rs`: encode into an output buffer,
//! feed received bytes, get outcomes): HTTP/1.1 and raw replies, the session links (`link.rs`:
//! XMPP, PostgreSQL, WebSocket) and HTTP/2 (`http2.rs`). The worker has one read path and one
//! write path for protocol bytes whatever the protocol, and asks the protocol what it can do
//! (open a stream, say what a close means) rather than which one it is: adding a protocol is one
//! module and one variant of `protocol::Protocol` (see `protocol.rs`). Every protocol's requests
//! in flight are one table on the user (`flight.rs`), topped up by one policy per run (a batch
//! when empty, or per reply), with one quota rule and, at a rate, one pace for every protocol;
//! the browser (`browser.rs`: cookies, redirects, Digest) is the same over HTTP/1.1 and HTTP/2.
//!
//! The engine knows nothing of the command line, JSON or files: sinks do.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use headroom_core::{Plan, PlanError};
use headroom_metrics::{Recorder, Snapshot};

mod browser;
mod flight;
mod http2;
mod link;
mod outcome;
pub mod pacer;
mod poller;
mod protocol;
pub mod ramp;
mod session;
pub mod tls;
mod transport;
mod worker;

/// One merged interval, handed to the sink.
#[derive(Debug)]
pub struct Interval<'a> {
    /// Interval number from 0.
    pub index: u64,
    /// Offset of the interval's start from the start of the run.
    pub start: Duration,
    /// Its length (the last one may be shorter).
    pub length: Duration,
    /// All workers' measurements of this interval, merged.
    pub merged: &'a Recorder,
    /// Workers that had stopped by the end of this interval.
    pub workers_done: usize,
    pub workers: usize,
}

/// What a finished run measured.
#[derive(Debug)]
pub struct RunOutcome {
    /// Every interval merged.
    pub total: Recorder,
    /// Wall-clock instant the load started.
    pub started_at: SystemTime,
    /// Length of the load, from start to the last worker's stop.
    pub elapsed: Duration,
    /// Most served connections open at once (the server sent a byte on them: it holds them),
    /// the sum of the workers' per-interval peaks maximised over intervals: exact for a fixed
    /// population, an upper bound when workers peak apart.
    pub connections_peak: u64,
    /// Most TCP connections established at once, served or not (those in the server's accept
    /// queue included), summed and maximised as `connections_peak`.
    pub tcp_connected_peak: u64,
    /// Requests still awaiting a response when the run stopped (neither answered nor failed).
    pub in_flight: u64,
    /// Intervals reported.
    pub intervals: u64,
    /// True when the stop flag (Ctrl-C) ended the run early.
    pub interrupted: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error("worker {worker}: {source}")]
    Worker {
        worker: usize,
        source: std::io::Error,
    },
    #[error("could not encode the request: {0}")]
    Request(String),
    #[error("TLS: {0}")]
    Tls(String),
}

/// An interval being merged by the collector: the first worker's snapshot, the others added in.
struct Pending {
    merged: Box<Recorder>,
    /// The worker whose recorder `merged` is (it gets it back once the interval is emitted).
    owner: usize,
    /// Snapshots merged.
    count: usize,
}

/// Execute `plan`. `stop` may be set from another thread (e.g. a Ctrl-C handler) to end the run
/// early; the run still reports everything measured until then. `sink` sees each interval.
pub fn run(
    plan: &Plan,
    stop: Arc<AtomicBool>,
    sink: &mut dyn FnMut(&Interval<'_>),
) -> Result<RunOutcome, EngineError> {
    plan.validate()?;
    let mut plan = plan.clone();
    if let Some(c) = &plan.browser.credentials {
        if c.scheme == headroom_core::AuthScheme::Basic && plan.workload.is_none() {
            // Basic credentials are the same on every request: one static header.
            let mut v = Vec::new();
            headroom_proto::auth::write_basic_value(&c.user, &c.password, &mut v);
            let v = String::from_utf8(v).map_err(|e| EngineError::Request(e.to_string()))?;
            plan.request.headers.push(("Authorization".into(), v));
        }
    }
    if plan.browser.compressed
        && plan.workload.is_none()
        && !plan
            .request
            .headers
            .iter()
            .any(|(n, _)| n.trim().eq_ignore_ascii_case("accept-encoding"))
    {
        // `--compressed`: ask for what the decoder decodes, unless the user asked otherwise.
        plan.request
            .headers
            .push(("Accept-Encoding".into(), "gzip, br".into()));
    }
    let plan = Arc::new(plan);
    // The run's request, encoded once with its parts, as many times as a pipeline sends it.
    let mut request = headroom_proto::http1::Batch::new();
    let r = &plan.request;
    for _ in 0..plan.pipeline.max(1) {
        let headers = r.headers.iter().map(|(n, v)| (n.as_str(), v.as_str()));
        request.push(
            &r.method,
            &r.path,
            &r.host,
            headers,
            &[],
            &r.body,
            plan.keepalive,
        );
    }
    let request = Arc::new(request);
    let head_request = plan.request.method.eq_ignore_ascii_case("HEAD");
    let program = match &plan.workload {
        Some(w) => Some(Arc::new(
            session::Program::new(w.clone(), &plan.request.host, plan.keepalive)
                .map_err(EngineError::Request)?
                .with_tls(plan.tls.is_some()),
        )),
        None => None,
    };

    let tls = match &plan.tls {
        Some(o) => Some(tls::TlsClient::new(o).map_err(EngineError::Tls)?),
        None => None,
    };
    // URL runs send one request on every stream; scenario sessions send their own requests,
    // and so does a URL run whose requests may take several hops (a redirect followed, a
    // Digest challenge answered): one request at a time per connection, as over HTTP/1.1.
    let hops = plan.browser.follow > 0
        || plan
            .browser
            .credentials
            .as_ref()
            .is_some_and(|c| c.scheme == headroom_core::AuthScheme::Digest);
    let refill = match plan.http2 {
        Some(_) if plan.workload.is_none() && !hops => flight::Refill::PerReply,
        _ => flight::Refill::WhenEmpty,
    };
    let n = plan.threads;
    let (snap_tx, snap_rx) = mpsc::channel::<Snapshot>();
    let mut recycle_tx = Vec::with_capacity(n);
    let mut handles = Vec::with_capacity(n);
    // A distributed run starts every agent at the controller's instant: wait for it here, after
    // everything that can fail has been checked, so the load itself starts on time.
    if let Some(at) = plan.start_at {
        while let Ok(left) = at.duration_since(SystemTime::now()) {
            if left.is_zero() || stop.load(std::sync::atomic::Ordering::Relaxed) {
                break;
            }
            std::thread::sleep(left.min(Duration::from_millis(50)));
        }
    }
    let started_at = SystemTime::now();
    let start = Instant::now();
    let seg = plan.segment;
    for id in 0..n {
        let (rtx, rrx) = mpsc::channel::<Box<Recorder>>();
        recycle_tx.push(rtx);
        let setup = worker::WorkerSetup {
            id,
            slot: seg.index as usize * n + id,
            slots: seg.count as usize * n,
            plan: plan.clone(),
            request: request.clone(),
            head_request,
            start,
            stop: stop.clone(),
            snapshots: snap_tx.clone(),
            recycled: rrx,
            program: program.clone(),
            tls: tls.clone(),
            refill,
        };
        let h = std::thread::Builder::new()
            .name(format!("headroom-w{id}"))
            .spawn(move || -> Result<u64, std::io::Error> {
                let w = worker::Worker::new(setup)?;
                let w = w.run()?;
                Ok(w.in_flight)
            })
            .map_err(|e| EngineError::Worker {
                worker: id,
                source: e,
            })?;
        handles.push(h);
    }
    drop(snap_tx);

    // Collector: merge per interval, emit in order once every live worker has reported. The
    // first snapshot of an interval is its merge: the others are added into it (and go back to
    // their workers at once), and it goes back to its own worker once emitted. With one worker
    // nothing is copied, and no recorder is held here besides the run's total.
    let mut pending: BTreeMap<u64, Pending> = BTreeMap::new();
    // finished[w] = Some(i) once worker w sent its last snapshot, for interval i.
    let mut finished: Vec<Option<u64>> = vec![None; n];
    let mut next_emit: u64 = 0;
    let mut total = Recorder::new();
    let mut peak = 0u64;
    let mut tcp_peak = 0u64;
    let mut emit = |idx: u64,
                    rec: &Recorder,
                    finished: &[Option<u64>],
                    total: &mut Recorder,
                    sink: &mut dyn FnMut(&Interval<'_>)| {
        let istart = plan.interval * idx as u32;
        let iend = (istart + plan.interval).min(start.elapsed().max(istart));
        let done = finished
            .iter()
            .filter(|f| f.is_some_and(|i| i <= idx))
            .count();
        total.add(rec);
        peak = peak.max(rec.counters.connections_peak);
        tcp_peak = tcp_peak.max(rec.counters.tcp_connected_peak);
        sink(&Interval {
            index: idx,
            start: istart,
            length: iend - istart,
            merged: rec,
            workers_done: done,
            workers: n,
        });
    };
    for snap in snap_rx.iter() {
        let w = snap.worker;
        if snap.last {
            finished[w] = Some(snap.index);
        }
        match pending.entry(snap.index) {
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(Pending {
                    merged: snap.recorder,
                    owner: w,
                    count: 1,
                });
            }
            std::collections::btree_map::Entry::Occupied(mut o) => {
                let p = o.get_mut();
                p.merged.add(&snap.recorder);
                p.count += 1;
                let mut rec = snap.recorder;
                rec.reset();
                let _ = recycle_tx[w].send(rec);
            }
        }
        // Emit every complete interval in order.
        while let Some(p) = pending.get(&next_emit) {
            let expected = finished
                .iter()
                .filter(|f| f.is_none_or(|i| i >= next_emit))
                .count();
            if p.count < expected {
                break;
            }
            let mut p = pending.remove(&next_emit).expect("present");
            emit(next_emit, &p.merged, &finished, &mut total, sink);
            p.merged.reset();
            // A worker that has stopped takes nothing back.
            let _ = recycle_tx[p.owner].send(p.merged);
            next_emit += 1;
        }
    }
    // All workers gone: flush what is left, in order.
    for (idx, p) in std::mem::take(&mut pending) {
        emit(idx, &p.merged, &finished, &mut total, sink);
        next_emit = idx + 1;
    }
    let elapsed = start.elapsed();
    let mut in_flight = 0;
    for (id, h) in handles.into_iter().enumerate() {
        match h.join() {
            Ok(Ok(f)) => in_flight += f,
            Ok(Err(e)) => {
                return Err(EngineError::Worker {
                    worker: id,
                    source: e,
                })
            }
            Err(_) => {
                return Err(EngineError::Worker {
                    worker: id,
                    source: std::io::Error::other("worker thread panicked"),
                })
            }
        }
    }
    Ok(RunOutcome {
        total,
        started_at,
        elapsed,
        connections_peak: peak,
        tcp_connected_peak: tcp_peak,
        in_flight,
        intervals: next_emit,
        interrupted: stop.load(std::sync::atomic::Ordering::Relaxed),
    })
}
