//! One load against the lab's server, through the run pipeline: [`measure`] is
//! `headroom_run::pipeline::execute` with three sinks — the run directory (`headroom run
//! --out`'s, so `headroom report DIR` reads each run of a lab as it reads any run), the server's
//! sampler (its process tree and scraped series, on its own thread, from the load's start to its
//! end) and the intervals the lab keeps (its store, intervals.csv and the connection capacity).
//! The load runs in this process or on agents ([`LabAgents`]); either way the driver starts it
//! at the instant the sampler starts.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use headroom_core::spec::RunSpec;
use headroom_core::Plan;
use headroom_dist::{AgentAddr, ControllerOpts, Job};
use headroom_engine::Interval;
use headroom_monitor::prom::Scraper;
use headroom_monitor::{Sample, Sampler};
use headroom_run::interval::IntervalLine;
use headroom_run::pipeline::{execute, DirSink, Driver, Finished, LocalEngine, OnAgents, Sink};

use crate::server::{self, RunningServer};

/// Agents the lab's loads (warm-ups, measured runs, rate probes) run on (`headroom lab
/// --agents`), started once for the whole lab by the caller.
#[derive(Debug, Clone)]
pub struct LabAgents {
    pub addrs: Vec<AgentAddr>,
    pub token: String,
    /// The controller's options (each load sets the interval its plan has).
    pub opts: ControllerOpts,
    /// How long before a load's start the agents are called (they build their plans in it);
    /// the server's sampling starts with the load, not with the call.
    pub lead: Duration,
}

/// The job that makes every agent build the lab's plan of `load`: its spec, as the lab built
/// its own plan from it (the scenario with this configuration's values, a probe's load in
/// place, its CSV files inside). No preflight: the lab checked the server is ready, and the
/// load must open no connection of its own.
pub fn lab_job(load: &RunSpec) -> Job {
    Job {
        spec: load.clone(),
        preflight: false,
        segment_index: 0,
        segment_count: 1,
        start_at: SystemTime::now(),
    }
}

/// When a load called now starts: at once in this process, `lead` later on agents.
fn start_of(agents: Option<&LabAgents>) -> Option<SystemTime> {
    agents.map(|a| SystemTime::now() + a.lead)
}

/// Calls `f` with the driver of one load (`spec`), starting at `start`: this process's engine,
/// or a controller over the agents.
fn with_driver<R>(
    agents: Option<&LabAgents>,
    (plan, spec): (&Plan, &RunSpec),
    start: Option<SystemTime>,
    f: impl FnOnce(&mut dyn Driver) -> R,
) -> R {
    match agents {
        None => f(&mut LocalEngine { start }),
        Some(a) => {
            let job = lab_job(spec);
            f(&mut OnAgents {
                addrs: &a.addrs,
                token: &a.token,
                job: &job,
                opts: ControllerOpts {
                    interval: plan.interval,
                    ..a.opts.clone()
                },
                start,
            })
        }
    }
}

/// A warm-up load; what it measured is dropped, but trouble on agents is shown.
pub(crate) fn warm_up(
    agents: Option<&LabAgents>,
    (plan, spec): (&Plan, &RunSpec),
    stop: &Arc<AtomicBool>,
    progress: bool,
    tag: &str,
) {
    let r = with_driver(agents, (plan, spec), start_of(agents), |d| {
        d.drive(plan, stop.clone(), &mut |_| {})
    });
    if progress && agents.is_some() {
        match r {
            Ok(d) => d
                .warnings
                .iter()
                .for_each(|w| eprintln!("{tag}: warning: warm-up: {w}")),
            Err(e) => eprintln!("{tag}: warning: warm-up: {e}"),
        }
    }
}

/// Where to scrape extra series, and which to keep.
#[derive(Debug, Clone)]
pub struct PromSource {
    pub scraper: Scraper,
    /// Metric names to keep; every series when empty (at most [`MAX_SERIES`]).
    pub keep: Vec<String>,
}

/// Series kept from one scrape at most, so a chatty endpoint cannot flood the store.
pub const MAX_SERIES: usize = 64;

/// What the sampler thread read: the process tree, and the scraped series at the same instants.
#[derive(Debug, Default)]
pub(crate) struct Readings {
    pub samples: Vec<Sample>,
    /// One map per sample (empty when there is no endpoint or the scrape failed).
    pub prom: Vec<BTreeMap<String, f64>>,
    /// The last scrape error, if any.
    pub prom_error: Option<String>,
}

fn scrape_into(src: &Option<PromSource>, r: &mut Readings) {
    let mut m = BTreeMap::new();
    if let Some(src) = src {
        match src.scraper.scrape() {
            Ok(v) => {
                for x in v {
                    if (src.keep.is_empty() || src.keep.contains(&x.name)) && m.len() < MAX_SERIES {
                        m.insert(x.key(), x.value);
                    }
                }
            }
            Err(e) => r.prom_error = Some(e),
        }
    }
    r.prom.push(m);
}

/// Samples `pid`'s tree (the accept queue of its listener on `port`, and scrapes `prom`) every
/// `every` on its own thread, from `start` (the load's start; now when `None`) until `stop` is
/// set (or the process exits).
fn sample_in_background(
    pid: u32,
    port: Option<u16>,
    every: Duration,
    stop: Arc<AtomicBool>,
    prom: Option<PromSource>,
    start: Option<SystemTime>,
) -> JoinHandle<Readings> {
    std::thread::spawn(move || {
        if let Some(wait) = start.and_then(|t| t.duration_since(SystemTime::now()).ok()) {
            let until = Instant::now() + wait;
            while Instant::now() < until {
                if stop.load(Ordering::Relaxed) {
                    // The load ended before it started (it could not start).
                    return Readings::default();
                }
                std::thread::sleep(Duration::from_millis(5).min(until - Instant::now()));
            }
        }
        let mut s = Sampler::new(pid);
        if let Some(p) = port {
            s = s.listen_port(p);
        }
        let mut r = Readings::default();
        while let Ok(x) = s.sample() {
            r.samples.push(x);
            scrape_into(&prom, &mut r);
            let until = Instant::now() + every;
            while Instant::now() < until {
                if stop.load(Ordering::Relaxed) {
                    if let Ok(x) = s.sample() {
                        r.samples.push(x);
                        scrape_into(&prom, &mut r);
                    }
                    return r;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        r
    })
}

/// The server sampled beside the load: the sampling thread runs from the load's start until the
/// run's end (the sink's `finish`), or until [`SamplerSink::end`] when the load failed.
struct SamplerSink {
    done: Arc<AtomicBool>,
    thread: Option<JoinHandle<Readings>>,
    /// What the thread read, once it ended (`server_samples` ends it for the verdict).
    readings: Option<Readings>,
}

impl SamplerSink {
    fn start(
        pid: u32,
        port: Option<u16>,
        every: Duration,
        prom: Option<PromSource>,
        start: Option<SystemTime>,
    ) -> SamplerSink {
        let done = Arc::new(AtomicBool::new(false));
        let thread = Some(sample_in_background(
            pid,
            port,
            every,
            done.clone(),
            prom,
            start,
        ));
        SamplerSink {
            done,
            thread,
            readings: None,
        }
    }

    /// Stops the sampling and returns what it read.
    fn end(&mut self) -> Readings {
        if let Some(r) = self.readings.take() {
            return r;
        }
        self.done.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Sink for SamplerSink {
    fn interval(&mut self, _: &Interval<'_>, _: &IntervalLine) -> std::io::Result<()> {
        Ok(())
    }
    fn finish(&mut self, _: &headroom_run::RunSummary) -> anyhow::Result<()> {
        self.done.store(true, Ordering::Relaxed);
        Ok(())
    }
    fn wants_line(&self) -> bool {
        false
    }
    /// The run's samples for its verdict (the first, without rates, left out).
    fn server_samples(&mut self) -> Option<Vec<Sample>> {
        let r = self.end();
        let rated = r.samples.get(1..).unwrap_or(&[]).to_vec();
        self.readings = Some(r);
        Some(rated)
    }
}

impl Drop for SamplerSink {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
    }
}

/// The intervals the lab keeps: every line, for its store and intervals.csv, and for the
/// connection capacity ([`crate::intervals::connection_capacity`]).
#[derive(Default)]
struct KeptLines(Vec<IntervalLine>);

impl Sink for KeptLines {
    fn interval(&mut self, _: &Interval<'_>, line: &IntervalLine) -> std::io::Result<()> {
        self.0.push(line.clone());
        Ok(())
    }
}

/// One load against a running server: what the engine (or the agents) measured with its summary,
/// its intervals, the server's samples on the same clock, and whether the server survived.
pub(crate) struct Measured {
    /// The run as the pipeline finished it, or why the load did not run (or was cut short).
    pub outcome: Result<Finished, String>,
    /// Why the run directory is incomplete.
    pub dir_error: Option<String>,
    pub intervals: Vec<IntervalLine>,
    pub samples: Vec<Sample>,
    pub prom: Vec<BTreeMap<String, f64>>,
    pub prom_error: Option<String>,
    pub alive: Result<(), server::ServerFailure>,
}

impl Measured {
    /// The samples as stored: each with its scraped series under `prom`, when there are any.
    pub fn samples_json(&self) -> Vec<serde_json::Value> {
        self.samples
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                let mut v = serde_json::to_value(s).ok()?;
                if let Some(p) = self.prom.get(i).filter(|p| !p.is_empty()) {
                    v["prom"] = serde_json::json!(p);
                }
                Some(v)
            })
            .collect()
    }
}

/// Runs the measured load through the pipeline, sampling the server beside it. With `dir`, the
/// load is also written as a run directory (intervals.jsonl and latency.hlog as it goes,
/// summary.json and intervals.csv at its end).
pub(crate) fn measure(
    (plan, spec): (&Plan, &RunSpec),
    agents: Option<&LabAgents>,
    srv: &mut RunningServer,
    stop: &Arc<AtomicBool>,
    prom: Option<PromSource>,
    dir: Option<&Path>,
) -> Measured {
    let start = start_of(agents);
    let command = match dir {
        Some(d) => format!("headroom lab ({})", d.display()),
        None => "headroom lab".to_string(),
    };
    let mut dir_error = None;
    let mut dir_sink = dir.and_then(|path| {
        DirSink::create_at(path, start.unwrap_or_else(SystemTime::now), &command, false)
            .map_err(|e| dir_error = Some(e.to_string()))
            .ok()
    });
    // The server's accept queue, when the load goes to this machine's loopback.
    let port = plan.target.ip().is_loopback().then_some(plan.target.port());
    let mut sampler = SamplerSink::start(srv.pid(), port, plan.interval, prom, start);
    let mut kept = KeptLines::default();
    let finished = {
        let mut sinks: Vec<&mut dyn Sink> = vec![&mut sampler, &mut kept];
        if let Some(d) = dir_sink.as_mut() {
            sinks.push(d);
        }
        with_driver(agents, (plan, spec), start, |d| {
            execute(plan, &[], d, None, &mut sinks, stop.clone(), &command)
        })
    };
    let readings = sampler.end();
    let alive = srv.check_alive();
    let outcome = match finished {
        Err(e) => Err(e.to_string()),
        Ok(f) => {
            // What the pipeline warned about as it happened, kept for the run's messages.
            if let Some(e) = f.write_errors.first() {
                dir_error.get_or_insert(e.clone());
            }
            if let Some(w) = dir_sink.as_ref().and_then(|d| d.warning.as_ref()) {
                dir_error.get_or_insert(w.clone());
            }
            match f.summary.agents.as_ref().filter(|a| a.stopped_by_loss) {
                Some(a) => Err(format!(
                    "{}; the load was stopped (--on-agent-loss stop)",
                    a.lost
                        .iter()
                        .map(|l| format!("agent {} was lost: {}", l.name, l.why))
                        .collect::<Vec<_>>()
                        .join("; ")
                )),
                None => Ok(f),
            }
        }
    };
    Measured {
        outcome,
        dir_error,
        intervals: kept.0,
        samples: readings.samples,
        prom: readings.prom,
        prom_error: readings.prom_error,
        alive,
    }
}

#[cfg(test)]
mod tests {
    use super::lab_job;
    use crate::runner::load_for;
    use headroom_core::Plan;
    use std::time::Duration;

    /// Every field of the plan that decides the load, as text (Plan is not PartialEq).
    fn load_fields(p: &Plan) -> Vec<(&'static str, String)> {
        let w = p.workload.as_ref().expect("a scenario's workload");
        vec![
            ("model", format!("{:?}", p.model)),
            ("stop", format!("{:?}", p.stop)),
            ("threads", p.threads.to_string()),
            ("target", p.target.to_string()),
            ("timeout", format!("{:?}", p.timeout)),
            ("connect_timeout", format!("{:?}", p.connect_timeout)),
            ("interval", format!("{:?}", p.interval)),
            ("keepalive", p.keepalive.to_string()),
            ("pipeline", p.pipeline.to_string()),
            ("socket", format!("{:?}", p.socket)),
            ("request", format!("{:?}", p.request)),
            ("names", format!("{:?}", w.names)),
            ("sessions", format!("{:?}", w.sessions)),
            ("cumulative", format!("{:?}", w.cumulative)),
            ("vars", format!("{:?}", w.vars)),
            ("feeders", format!("{:?}", w.feeders)),
            ("link", format!("{:?}", w.link)),
        ]
    }

    /// The plan an agent builds from the lab's job (as `headroom agent` does, segment 0 of 1)
    /// is the lab's own plan: for closed users, arrival phases, a rate probe and its warm-up.
    #[test]
    fn an_agent_builds_the_labs_plan_from_its_job() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("data")).unwrap();
        std::fs::write(d.join("data/users.csv"), "ann\nbob\ncid\n").unwrap();
        std::fs::write(
            d.join("s.yaml"),
            "load: {users: [{count: {n}}], phases: [{phases}]}\n\
             sessions:\n\
             \x20 - name: one\n\
             \x20   steps:\n\
             \x20     - set: {var: user, csv: {file: data/users.csv, column: 0}}\n\
             \x20     - transaction:\n\
             \x20         name: tx\n\
             \x20         steps:\n\
             \x20           - request: GET /hello/${user}\n\
             \x20           - think: 10ms\n",
        )
        .unwrap();
        let experiment = |extra: &str| {
            let e = d.join("e.yaml");
            std::fs::write(
                &e,
                format!(
                    "name: eq\n\
                     server: {{command: \"exec {{headroom}} serve --listen 127.0.0.1:{{port}}\", ready: {{port: \"127.0.0.1:{{port}}\"}}}}\n\
                     factors: {{n: [\"1\", \"3\"], phases: [\"\", \"{{duration: 1500ms, ramp: {{from: 2, to: 7.25}}}}\"]}}\n\
                     load: {{scenario: s.yaml, duration: 2s, threads: 2, timeout: 3s}}\n{extra}"
                ),
            )
            .unwrap();
            crate::experiment::load(&e, false).unwrap()
        };
        let check =
            |l: &crate::experiment::Loaded, duration: Option<Duration>, rate: Option<f64>| {
                for config in &l.configurations {
                    let mut values = config.clone();
                    values.insert("port".into(), "4711".into());
                    let what = format!("{config:?} {duration:?} {rate:?}");
                    let rate = rate.map(|r| (r, l.rate_search.as_ref().unwrap()));
                    let (plan, spec) = load_for(l, &values, duration, rate).expect(&what);
                    let job = lab_job(&spec);
                    let headroom_core::spec::Target::Scenario(sc) = &job.spec.target else {
                        panic!("{what}: a scenario job")
                    };
                    assert_eq!(sc.files.len(), 1, "{what}: the CSV file, as bytes");
                    assert_eq!(sc.files[0].data, b"ann\nbob\ncid\n", "{what}");
                    let agent = headroom_run::agent::plan_from_job(&job).expect(&what);
                    let (ours, theirs) = (load_fields(&plan), load_fields(&agent));
                    for (a, b) in ours.iter().zip(&theirs) {
                        assert_eq!(a, b, "{what}");
                    }
                }
            };
        let plain = experiment("");
        assert_eq!(plain.configurations.len(), 4);
        check(&plain, plain.duration, None);
        // The warm-up: the same load, shorter.
        check(&plain, Some(Duration::from_millis(700)), None);
        let search = experiment(
            "capacity: {rate: {from: 10, to: 80, max_users: 50, arrival: constant, slo: {p99: 1s}}}\n",
        );
        // Probes (a rate from a bisection too) and the warm-up at `from`.
        check(&search, search.duration, Some(56.25));
        check(&search, Some(Duration::from_millis(500)), Some(10.0));
        let poisson = experiment("capacity: {rate: {from: 3.3, to: 9, slo: {of: tx, mean: 1s}}}\n");
        check(&poisson, Some(Duration::from_secs(3)), Some(3.3));
    }
}
