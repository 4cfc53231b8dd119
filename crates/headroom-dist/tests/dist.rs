//! Transport and merge, end to end in one process: real tonic agents on 127.0.0.1 (port 0) with
//! a runner that synthesizes known intervals, and the controller merging them. The engine
//! itself is not involved.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use headroom_core::spec::{RunSpec, ScenarioSpec, SpecFile, Target};
use headroom_dist::agent::{agent_server_builder, serve_agent_until, AgentService, Serving};
use headroom_dist::{
    run_controller, AgentAddr, ControllerOpts, DistError, DistOutcome, Job, OnLoss, Runner,
};
use headroom_engine::{Interval, RunOutcome};
use headroom_metrics::Recorder;

const TOKEN: &str = "s3cret-token";
const IV: Duration = Duration::from_millis(100);

/// Record the known samples of segment `seg`, interval `k` into `r`.
fn record_samples(r: &mut Recorder, seg: u32, k: u64) {
    r.ensure_names(2, 1);
    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (u64::from(seg) << 32) ^ k.wrapping_mul(0x1234_5678);
    for j in 0..500u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Mostly milliseconds, some seconds, one stall of minutes per interval.
        let v = match j % 50 {
            0 => 1 + x % 10_000_000,
            49 if j == 499 => 60_000_000 + x % 240_000_000,
            _ => 1 + x % 20_000,
        };
        r.record_latency(v, v / 2 + 1);
        r.record_connect(1 + x % 3_000);
        r.record_name((j % 2) as usize, v, j % 17 == 0);
    }
    let c = &mut r.counters;
    c.requests += 500;
    c.responses += 490;
    c.status[2] += 480;
    c.status[5] += 10;
    c.errors[0] += 10;
    c.bytes_sent += 500 * 80;
    c.connections_peak += 10 + u64::from(seg);
    c.connections_open += 5;
    r.matches[0] += u64::from(seg) + 1;
}

/// What a test runner saw.
#[derive(Default)]
struct Probe {
    calls: AtomicUsize,
    /// The runner saw its stop flag set.
    stopped: AtomicBool,
    /// Intervals it sent.
    sent: Mutex<Vec<u64>>,
}

impl Probe {
    fn wait_stopped(&self, within: Duration) -> bool {
        let t = Instant::now();
        while t.elapsed() < within {
            if self.stopped.load(Ordering::SeqCst) {
                return true;
            }
            thread::sleep(Duration::from_millis(10));
        }
        false
    }
}

#[derive(Clone, Default)]
struct Behaviour {
    intervals: u64,
    /// After sending this interval, send nothing more until stopped.
    hang_after: Option<u64>,
    /// Fail while building the plan.
    fail_plan: bool,
}

/// Sleep until `t`, or until `stop` is set (true then). Bounded.
fn sleep_until(t: SystemTime, stop: &AtomicBool) -> bool {
    let limit = Instant::now() + Duration::from_secs(20);
    loop {
        if stop.load(Ordering::SeqCst) {
            return true;
        }
        let now = SystemTime::now();
        if now >= t || Instant::now() > limit {
            return false;
        }
        thread::sleep(
            t.duration_since(now)
                .unwrap_or_default()
                .min(Duration::from_millis(5)),
        );
    }
}

fn runner(b: Behaviour, probe: Arc<Probe>) -> Runner {
    Arc::new(move |job: Job, stop, ready, sink| {
        probe.calls.fetch_add(1, Ordering::SeqCst);
        if b.fail_plan {
            return Err("scenario.yaml:3:1: expected a step".into());
        }
        // The spec arrives typed, its files inside as bytes.
        assert_eq!(job.spec, job_spec());
        assert!(job.preflight);
        ready(1);
        let mut total = Recorder::new();
        let mut sent = 0;
        let mut interrupted = sleep_until(job.start_at, &stop);
        for k in 0..b.intervals {
            if interrupted {
                break;
            }
            if sleep_until(job.start_at + IV * (k as u32 + 1), &stop) {
                interrupted = true;
                break;
            }
            let mut rec = Recorder::new();
            record_samples(&mut rec, job.segment_index, k);
            total.add(&rec);
            sink(&Interval {
                index: k,
                start: IV * k as u32,
                length: IV,
                merged: &rec,
                workers_done: usize::from(k + 1 == b.intervals),
                workers: 1,
            });
            sent += 1;
            probe.sent.lock().unwrap().push(k);
            if b.hang_after == Some(k) {
                let t = Instant::now();
                while !stop.load(Ordering::SeqCst) && t.elapsed() < Duration::from_secs(10) {
                    thread::sleep(Duration::from_millis(5));
                }
                interrupted = true;
                break;
            }
        }
        if interrupted {
            probe.stopped.store(true, Ordering::SeqCst);
        }
        Ok(RunOutcome {
            total,
            started_at: job.start_at,
            elapsed: IV * sent,
            connections_peak: 10 + u64::from(job.segment_index),
            tcp_connected_peak: 10 + u64::from(job.segment_index),
            in_flight: u64::from(job.segment_index),
            intervals: u64::from(sent),
            interrupted,
        })
    })
}

/// An agent served by `serve_agent_until` on its own thread; stops when dropped.
struct Agent {
    addr: SocketAddr,
    shutdown: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<anyhow::Result<()>>>,
}

impl Agent {
    fn start(token: &str, runner: Runner) -> Agent {
        Agent::start_on("127.0.0.1:0", token, runner, Serving::default())
    }

    fn start_on(listen: &str, token: &str, runner: Runner, serving: Serving) -> Agent {
        let shutdown = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        let s = shutdown.clone();
        let token = token.to_string();
        let listen = listen.parse().unwrap();
        let thread = thread::spawn(move || {
            serve_agent_until(listen, token, runner, serving, |a| tx.send(a).unwrap(), s)
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("agent listening");
        Agent {
            addr,
            shutdown,
            thread: Some(thread),
        }
    }

    fn addr(&self, name: &str) -> AgentAddr {
        AgentAddr {
            name: name.into(),
            endpoint: format!("http://{}", self.addr),
            pin: None,
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.shutdown.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let r = t.join().expect("agent thread");
            if !thread::panicking() {
                r.expect("agent served");
            }
        }
    }
}

/// An agent on a runtime of its own that can be killed abruptly (connections cut, no goodbye).
struct KillableAgent {
    addr: SocketAddr,
    rt: tokio::runtime::Runtime,
}

impl KillableAgent {
    fn start(runner: Runner) -> KillableAgent {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let svc = AgentService::new(TOKEN.into(), runner).unwrap();
        rt.spawn(agent_server_builder().serve_with_incoming(
            svc.into_server(),
            tokio_stream::wrappers::TcpListenerStream::new(listener),
        ));
        KillableAgent { addr, rt }
    }

    fn kill(self) {
        self.rt.shutdown_background();
    }
}

/// A scenario run with a CSV feeder and a body, as a controller sends it.
fn job_spec() -> RunSpec {
    let mut spec = RunSpec::new(Target::Scenario(ScenarioSpec {
        name: "s.yaml".into(),
        yaml: "sessions: []\n".into(),
        files: vec![SpecFile {
            name: "users.csv".into(),
            data: b"alice,1\nbob,2\n".to_vec(),
        }],
        target: Some("127.0.0.1:1".into()),
    }));
    spec.rate = Some(100.0);
    spec.body = Some(vec![0, 1, 2, 255]);
    spec
}

fn job() -> Job {
    Job {
        spec: job_spec(),
        preflight: true,
        segment_index: 99,
        segment_count: 99,
        start_at: SystemTime::UNIX_EPOCH,
    }
}

fn opts(on_loss: OnLoss) -> ControllerOpts {
    ControllerOpts {
        on_loss,
        start_delay: Duration::from_millis(500),
        interval: IV,
        connect_timeout: Duration::from_secs(2),
        // Generous: a loaded CI machine may stall a process for a while.
        lost_after: Some(Duration::from_secs(3)),
        ..Default::default()
    }
}

/// One emitted interval, as the sink saw it.
struct Seen {
    index: u64,
    rec: Recorder,
    workers: usize,
    workers_done: usize,
}

fn control(
    agents: &[AgentAddr],
    token: &str,
    opts: ControllerOpts,
    stop: Arc<AtomicBool>,
    mut on_interval: impl FnMut(u64),
) -> (Result<DistOutcome, DistError>, Vec<Seen>) {
    let mut seen = Vec::new();
    let r = run_controller(agents, token, &job(), opts, stop, &mut |iv: &Interval<
        '_,
    >| {
        on_interval(iv.index);
        seen.push(Seen {
            index: iv.index,
            rec: iv.merged.clone(),
            workers: iv.workers,
            workers_done: iv.workers_done,
        });
    });
    (r, seen)
}

/// [`control`] of a run nobody stops, intervals only recorded.
fn control_to_end(
    agents: &[AgentAddr],
    token: &str,
    opts: ControllerOpts,
) -> (Result<DistOutcome, DistError>, Vec<Seen>) {
    control(
        agents,
        token,
        opts,
        Arc::new(AtomicBool::new(false)),
        |_| {},
    )
}

fn assert_same(a: &Recorder, b: &Recorder, what: &str) {
    assert_eq!(a.latency, b.latency, "{what}: latency");
    assert_eq!(a.latency_uncorrected, b.latency_uncorrected, "{what}");
    assert_eq!(a.connect, b.connect, "{what}: connect");
    assert_eq!(a.sessions, b.sessions, "{what}: sessions");
    assert_eq!(a.counters, b.counters, "{what}: counters");
    assert_eq!(a.matches, b.matches, "{what}: matches");
    assert_eq!(a.names.len(), b.names.len(), "{what}: names");
    for (x, y) in a.names.iter().zip(&b.names) {
        assert_eq!(
            (x.count, x.errors, &x.latency),
            (y.count, y.errors, &y.latency),
            "{what}: name"
        );
    }
    for q in [0.5, 0.9, 0.99, 0.999, 0.9999, 1.0] {
        assert_eq!(
            a.latency.value_at_quantile(q),
            b.latency.value_at_quantile(q),
            "{what}: q{q}"
        );
    }
}

#[test]
fn three_agents_merge_exactly() {
    let probes: Vec<Arc<Probe>> = (0..3).map(|_| Arc::new(Probe::default())).collect();
    let b = Behaviour {
        intervals: 5,
        ..Default::default()
    };
    let agents: Vec<Agent> = probes
        .iter()
        .map(|p| Agent::start(TOKEN, runner(b.clone(), p.clone())))
        .collect();
    let addrs: Vec<AgentAddr> = agents
        .iter()
        .enumerate()
        .map(|(i, a)| a.addr(&format!("local:{i}")))
        .collect();
    let t = Instant::now();
    let (r, seen) = control_to_end(&addrs, TOKEN, opts(OnLoss::Continue));
    let d = r.expect("run");
    assert!(t.elapsed() < Duration::from_secs(5));
    assert_eq!(d.agents, 3);
    assert!(d.lost.is_empty(), "{:?}", d.lost);
    assert_eq!(
        seen.iter().map(|s| s.index).collect::<Vec<_>>(),
        [0, 1, 2, 3, 4]
    );
    let mut all = Recorder::new();
    for s in &seen {
        let mut one = Recorder::new();
        for seg in 0..3 {
            record_samples(&mut one, seg, s.index);
            record_samples(&mut all, seg, s.index);
        }
        assert_same(&s.rec, &one, &format!("interval {}", s.index));
        assert_eq!(s.workers, 3);
        assert_eq!(s.rec.counters.requests, 1500);
    }
    assert_eq!(seen.last().unwrap().workers, 3);
    let o = &d.outcome;
    assert_same(&o.total, &all, "total");
    assert_eq!(o.intervals, 5);
    assert_eq!(o.in_flight, 3);
    assert_eq!(o.connections_peak, 10 + 11 + 12);
    assert!(!o.interrupted);
    assert_eq!(o.elapsed, IV * 5);
    for p in &probes {
        assert_eq!(p.calls.load(Ordering::SeqCst), 1);
        assert!(!p.stopped.load(Ordering::SeqCst));
    }
}

#[test]
fn wrong_token_names_the_agent_and_runs_nothing() {
    let probes: Vec<Arc<Probe>> = (0..2).map(|_| Arc::new(Probe::default())).collect();
    let b = Behaviour {
        intervals: 3,
        ..Default::default()
    };
    let agents: Vec<Agent> = probes
        .iter()
        .map(|p| Agent::start(TOKEN, runner(b.clone(), p.clone())))
        .collect();
    let addrs: Vec<AgentAddr> = agents
        .iter()
        .enumerate()
        .map(|(i, a)| a.addr(&format!("local:{i}")))
        .collect();
    let (r, seen) = control_to_end(&addrs, "not-the-token", opts(OnLoss::Continue));
    let e = r.expect_err("refused").to_string();
    assert!(e.contains("refused the token"), "{e}");
    assert!(
        addrs
            .iter()
            .any(|a| e.contains(&format!("agent {} ({})", a.name, a.endpoint))),
        "{e}"
    );
    assert!(seen.is_empty());
    for p in &probes {
        assert_eq!(
            p.calls.load(Ordering::SeqCst),
            0,
            "runner must not be called"
        );
    }
}

#[test]
fn bad_plan_and_unreachable_agent_fail_the_start() {
    let probe = Arc::new(Probe::default());
    let bad = Agent::start(
        TOKEN,
        runner(
            Behaviour {
                fail_plan: true,
                ..Default::default()
            },
            probe.clone(),
        ),
    );
    let (r, _) = control_to_end(&[bad.addr("ssh://u@h")], TOKEN, opts(OnLoss::Continue));
    let e = r.unwrap_err().to_string();
    assert!(
        e.starts_with("agent ssh://u@h (http://127.0.0.1:") && e.contains("expected a step"),
        "{e}"
    );

    // A port nobody listens on.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("http://{}", l.local_addr().unwrap());
    drop(l);
    let (r, _) = control_to_end(
        &[AgentAddr {
            name: "local:7".into(),
            endpoint: dead.clone(),
            pin: None,
        }],
        TOKEN,
        opts(OnLoss::Continue),
    );
    let e = r.unwrap_err().to_string();
    assert!(
        e.contains(&format!("agent local:7 ({dead}) could not be reached")),
        "{e}"
    );
}

#[test]
fn agent_not_ready_by_the_start_fails_it() {
    let probe = Arc::new(Probe::default());
    let p = probe.clone();
    // Builds its plan for too long, then waits to be stopped.
    let slow: Runner = Arc::new(move |_job, stop, ready, _sink| {
        p.calls.fetch_add(1, Ordering::SeqCst);
        thread::sleep(Duration::from_millis(600));
        ready(1);
        let t = Instant::now();
        while !stop.load(Ordering::SeqCst) && t.elapsed() < Duration::from_secs(10) {
            thread::sleep(Duration::from_millis(5));
        }
        p.stopped
            .store(stop.load(Ordering::SeqCst), Ordering::SeqCst);
        Err("stopped".into())
    });
    let agent = Agent::start(TOKEN, slow);
    let (r, _) = control_to_end(
        &[agent.addr("local:0")],
        TOKEN,
        ControllerOpts {
            start_delay: Duration::from_millis(200),
            ..opts(OnLoss::Continue)
        },
    );
    let e = r.unwrap_err().to_string();
    assert!(
        e.contains("agent local:0") && e.contains("was not ready by the start"),
        "{e}"
    );
    assert!(
        probe.wait_stopped(Duration::from_secs(3)),
        "its job was stopped"
    );
}

#[test]
fn second_concurrent_run_is_refused() {
    let probe = Arc::new(Probe::default());
    let agent = Agent::start(
        TOKEN,
        runner(
            Behaviour {
                intervals: 8,
                ..Default::default()
            },
            probe.clone(),
        ),
    );
    let addr = agent.addr("local:0");
    let a2 = addr.clone();
    let first = thread::spawn(move || {
        control_to_end(&[a2], TOKEN, opts(OnLoss::Continue))
            .0
            .map(|d| d.outcome.intervals)
    });
    let t = Instant::now();
    while probe.calls.load(Ordering::SeqCst) == 0 && t.elapsed() < Duration::from_secs(5) {
        thread::sleep(Duration::from_millis(5));
    }
    let (r, _) = control_to_end(&[addr], TOKEN, opts(OnLoss::Continue));
    assert!(r.unwrap_err().to_string().contains("is busy"));
    assert_eq!(first.join().unwrap().unwrap(), 8);
}

struct Lossy {
    agents: Vec<Agent>,
    probes: Vec<Arc<Probe>>,
    lossy: KillableAgent,
    lossy_probe: Arc<Probe>,
}

/// Start `n` normal agents and one killable agent (last) that hangs after interval 1.
fn with_lossy(n: usize, intervals: u64) -> Lossy {
    let probes: Vec<Arc<Probe>> = (0..n).map(|_| Arc::new(Probe::default())).collect();
    let b = Behaviour {
        intervals,
        ..Default::default()
    };
    let agents = probes
        .iter()
        .map(|p| Agent::start(TOKEN, runner(b.clone(), p.clone())))
        .collect();
    let lossy_probe = Arc::new(Probe::default());
    let lossy = KillableAgent::start(runner(
        Behaviour {
            intervals,
            hang_after: Some(1),
            ..Default::default()
        },
        lossy_probe.clone(),
    ));
    Lossy {
        agents,
        probes,
        lossy,
        lossy_probe,
    }
}

#[test]
fn lost_agent_with_continue_completes_without_it() {
    let Lossy {
        agents,
        probes,
        lossy,
        lossy_probe,
        ..
    } = with_lossy(2, 6);
    let mut addrs: Vec<AgentAddr> = agents
        .iter()
        .enumerate()
        .map(|(i, a)| a.addr(&format!("local:{i}")))
        .collect();
    addrs.push(AgentAddr {
        name: "ssh://u@lossy".into(),
        endpoint: format!("http://{}", lossy.addr),
        pin: None,
    });
    // Kill the lossy agent's server once the controller merged its interval 1 (it sends
    // nothing after that).
    let (emitted_tx, emitted) = mpsc::channel();
    let killer = thread::spawn(move || {
        loop {
            match emitted.recv_timeout(Duration::from_secs(10)) {
                Ok(1) => break,
                Ok(_) => {}
                Err(_) => panic!("interval 1 never merged"),
            }
        }
        lossy.kill();
    });
    let o = opts(OnLoss::Continue); // the loss is the cut connection, not a timeout
    let (r, seen) = control(&addrs, TOKEN, o, Arc::new(AtomicBool::new(false)), |k| {
        let _ = emitted_tx.send(k);
    });
    killer.join().unwrap();
    let d = r.expect("run goes on");
    assert_eq!(d.lost.len(), 1, "{:?}", d.lost);
    assert_eq!(d.lost[0].name, "ssh://u@lossy");
    assert_eq!(d.lost[0].after_interval, Some(1), "{:?}", d.lost);
    assert_eq!(
        seen.iter().map(|s| s.index).collect::<Vec<_>>(),
        [0, 1, 2, 3, 4, 5]
    );
    for s in &seen {
        let segs = if s.index <= 1 { 0..3 } else { 0..2 };
        let mut one = Recorder::new();
        for seg in segs {
            record_samples(&mut one, seg, s.index);
        }
        assert_same(&s.rec, &one, &format!("interval {}", s.index));
        assert_eq!(s.workers, 3);
        // The lost agent counts as done once lost (emitted while it was alive: not yet).
        if s.index == 0 {
            assert_eq!(s.workers_done, 0);
        } else if s.index >= 2 {
            assert!(s.workers_done >= 1, "interval {}", s.index);
        }
    }
    assert!(!d.outcome.interrupted);
    assert_eq!(d.outcome.intervals, 6);
    assert!(
        lossy_probe.wait_stopped(Duration::from_secs(3)),
        "lost agent's job stopped"
    );
    for p in &probes {
        assert_eq!(p.sent.lock().unwrap().len(), 6);
    }
}

#[test]
fn lost_agent_with_stop_ends_the_run() {
    // This time the lossy agent stays connected but goes silent: the loss timeout finds it.
    let Lossy {
        agents,
        probes,
        lossy,
        lossy_probe,
        ..
    } = with_lossy(2, 60);
    let mut addrs: Vec<AgentAddr> = agents
        .iter()
        .enumerate()
        .map(|(i, a)| a.addr(&format!("local:{i}")))
        .collect();
    addrs.push(AgentAddr {
        name: "local:2".into(),
        endpoint: format!("http://{}", lossy.addr),
        pin: None,
    });
    let t = Instant::now();
    let (r, seen) = control_to_end(
        &addrs,
        TOKEN,
        ControllerOpts {
            lost_after: Some(Duration::from_millis(400)),
            ..opts(OnLoss::Stop)
        },
    );
    let d = r.expect("merged so far");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert_eq!(d.lost.len(), 1, "{:?}", d.lost);
    assert_eq!(d.lost[0].name, "local:2");
    assert_eq!(d.lost[0].after_interval, Some(1));
    assert!(d.lost[0].why.contains("sent nothing"), "{}", d.lost[0].why);
    assert!(d.outcome.interrupted);
    assert!(d.outcome.intervals >= 2 && d.outcome.intervals < 60);
    let idx: Vec<u64> = seen.iter().map(|s| s.index).collect();
    assert_eq!(idx, (0..d.outcome.intervals).collect::<Vec<_>>());
    // Every agent's run was stopped.
    for p in probes.iter().chain([&lossy_probe]) {
        assert!(p.wait_stopped(Duration::from_secs(3)), "agent job stopped");
    }
    lossy.kill();
}

#[test]
fn stop_flag_stops_every_agent() {
    let probes: Vec<Arc<Probe>> = (0..2).map(|_| Arc::new(Probe::default())).collect();
    let b = Behaviour {
        intervals: 100,
        ..Default::default()
    };
    let agents: Vec<Agent> = probes
        .iter()
        .map(|p| Agent::start(TOKEN, runner(b.clone(), p.clone())))
        .collect();
    let addrs: Vec<AgentAddr> = agents
        .iter()
        .enumerate()
        .map(|(i, a)| a.addr(&format!("local:{i}")))
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let t = Instant::now();
    let (r, seen) = control(&addrs, TOKEN, opts(OnLoss::Continue), stop, |k| {
        if k == 2 {
            s.store(true, Ordering::SeqCst);
        }
    });
    let d = r.expect("interrupted run");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert!(d.outcome.interrupted);
    assert!(d.lost.is_empty());
    assert!(seen.len() >= 3 && seen.len() < 100);
    for p in &probes {
        assert!(p.wait_stopped(Duration::from_secs(3)), "agent job stopped");
    }
    // The agents are free again once their jobs ended; a stop before the start returns at once.
    thread::sleep(Duration::from_millis(200));
    let (r, _) = control(
        &addrs,
        TOKEN,
        ControllerOpts {
            start_delay: Duration::from_millis(100),
            ..opts(OnLoss::Continue)
        },
        Arc::new(AtomicBool::new(true)),
        |_| {},
    );
    assert!(r.expect("stopped at once").outcome.interrupted);
}

// ---- TLS between controller and agents (issue 18) ----

#[test]
fn a_tls_agent_with_its_fingerprint_pinned_runs_and_a_wrong_pin_is_refused() {
    let probe = Arc::new(Probe::default());
    let b = Behaviour {
        intervals: 2,
        ..Default::default()
    };
    let id = headroom_dist::AgentIdentity::self_signed().unwrap();
    let fp = id.fingerprint;
    let serving = Serving {
        tls: Some(id),
        insecure_plaintext: false,
    };
    let agent = Agent::start_on("127.0.0.2:0", TOKEN, runner(b, probe.clone()), serving);
    let mut addr = agent.addr("tls-agent");
    addr.pin = Some(fp);

    // Pinned: the run goes through TLS and merges as ever.
    let (r, seen) = control_to_end(std::slice::from_ref(&addr), TOKEN, opts(OnLoss::Continue));
    let out = r.expect("a pinned TLS agent runs");
    assert!(out.lost.is_empty());
    assert_eq!(seen.len(), 2);
    assert_eq!(probe.calls.load(Ordering::SeqCst), 1);

    // Another fingerprint pinned: refused before any call, both fingerprints named.
    let other = headroom_dist::AgentIdentity::self_signed()
        .unwrap()
        .fingerprint;
    addr.pin = Some(other);
    let (r, _) = control_to_end(std::slice::from_ref(&addr), TOKEN, opts(OnLoss::Continue));
    let e = r.expect_err("wrong pin").to_string();
    assert!(
        e.contains("agent tls-agent")
            && e.contains(&fp.to_string())
            && e.contains(&other.to_string()),
        "{e}"
    );
    assert!(!e.contains('\n'), "one line: {e}");
    assert_eq!(probe.calls.load(Ordering::SeqCst), 1, "no job ran");

    // The same pin for all agents (ControllerOpts::fingerprint) does as well.
    addr.pin = None;
    let (r, _) = control_to_end(
        std::slice::from_ref(&addr),
        TOKEN,
        ControllerOpts {
            fingerprint: Some(fp),
            ..opts(OnLoss::Continue)
        },
    );
    r.expect("pinned through the options");

    // Plaintext to a TLS agent fails the start rather than hang.
    let (r, _) = control_to_end(std::slice::from_ref(&addr), TOKEN, opts(OnLoss::Continue));
    assert!(r.is_err());
    assert_eq!(probe.calls.load(Ordering::SeqCst), 2);
}

#[test]
fn no_token_goes_in_clear_beyond_loopback_without_insecure_plaintext() {
    // A listener standing for an agent beyond loopback: nothing may connect to it. (Its
    // address is loopback, so it is named by a non-loopback name that the controller would
    // have to resolve: 192.0.2.1 is TEST-NET-1, never routed; the check comes before any
    // connection.)
    let addr = AgentAddr {
        name: "far".into(),
        endpoint: "http://192.0.2.1:7070".into(),
        pin: None,
    };
    let t = Instant::now();
    let (r, _) = control_to_end(std::slice::from_ref(&addr), TOKEN, opts(OnLoss::Continue));
    let e = r.expect_err("refused").to_string();
    assert!(
        e.contains("agent far") && e.contains("--insecure-plaintext") && e.contains("sha256:"),
        "{e}"
    );
    assert!(t.elapsed() < Duration::from_secs(1), "no connection tried");
}
