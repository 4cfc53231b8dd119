//! Shared harness of the run library's tests: a spec built as `headroom run`'s flags would
//! build it, run through the pipeline in this process (the engine, no agents), and the typed
//! `RunSummary` (with the `Finished` run around it) to assert on. The real servers a test
//! loads (nginx, Apache, the reference test server) are `headroom_testkit::servers`,
//! re-exported here.
// Each test binary includes this module and uses a part of it, re-exports included.
#![allow(dead_code)]

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use headroom_core::spec::{RunSpec, Target};
use headroom_engine::Interval;
use headroom_run::interval::IntervalLine;
use headroom_run::pipeline::{self, Finished, Sink};
use headroom_run::summary::HttpSection;
use headroom_run::RunSummary;

#[allow(unused_imports)]
pub use headroom_testkit::servers::net::{free_port, wait_port};
#[allow(unused_imports)]
pub use headroom_testkit::servers::nginx::Nginx;
#[allow(unused_imports)]
pub use headroom_testkit::servers::test_server::{read_request, write_all, TestServer, OK};
#[allow(unused_imports)]
pub use headroom_testkit::servers::{access_log, apache, h2o, pki, tls_nginx};

/// The spec of `headroom run URL` (its defaults), to be filled as its flags would.
pub fn url_spec(url: &str) -> RunSpec {
    RunSpec::new(Target::Url(url.to_string()))
}

/// The spec of `headroom run DIR/s.yaml` with `yaml` as the file, read as the CLI reads it
/// (every file it names read into the spec); `target` as `--target`.
pub fn scenario_spec(yaml: &str, target: Option<String>) -> RunSpec {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.yaml");
    std::fs::write(&file, yaml).unwrap();
    let sc = headroom_run::files::scenario_file(&file, target)
        .unwrap_or_else(|e| panic!("the scenario does not read: {e}\n{yaml}"));
    RunSpec::new(Target::Scenario(sc))
}

/// `headroom run s.yaml -d D` with `yaml` as s.yaml (the protocol tests' runs).
pub fn lasting(yaml: &str, d: u64) -> RunSpec {
    let mut spec = scenario_spec(yaml, None);
    spec.duration = secs(d);
    spec
}

/// Time bound of every load the tests give a request count (`-n`): far above what each
/// needs, so a hang fails the test.
pub const BOUND: u64 = 30;

/// `URL -c C -n N -d BOUND`.
pub fn counted(url: &str, c: u32, n: u64) -> RunSpec {
    let mut spec = url_spec(url);
    spec.connections = Some(c);
    spec.requests = Some(n);
    spec.duration = secs(BOUND);
    spec
}

/// A scenario of `yaml` with `-d BOUND` (and `-n N` when given).
pub fn scenario(yaml: &str, n: Option<u64>) -> RunSpec {
    let mut spec = scenario_spec(yaml, None);
    spec.duration = secs(BOUND);
    spec.requests = n;
    spec
}

/// The summary's `http` section, which a run of HTTP users has.
pub fn http(v: &RunSummary) -> &HttpSection {
    v.http
        .as_ref()
        .unwrap_or_else(|| panic!("no http section: {}", show(v)))
}

/// The count of responses with `code`, 0 when none.
pub fn code(v: &RunSummary, code: u16) -> u64 {
    v.status_codes.get(&code).copied().unwrap_or(0)
}

/// `spec` built and run by this process's engine with no sink: the finished run.
pub fn run(spec: &RunSpec) -> Finished {
    run_with(spec, &mut [])
}

/// `spec` built and run by this process's engine, each interval and the end going to `sinks`.
pub fn run_with(spec: &RunSpec, sinks: &mut [&mut dyn Sink]) -> Finished {
    let built =
        headroom_run::build(spec).unwrap_or_else(|e| panic!("the spec does not build: {e}"));
    pipeline::execute(
        &built.plan,
        &built.thresholds,
        &mut pipeline::LocalEngine::now(),
        None,
        sinks,
        Arc::new(AtomicBool::new(false)),
        "test",
    )
    .unwrap_or_else(|e| panic!("the run failed: {e:#}"))
}

/// `spec` run with its intervals.jsonl lines kept: the finished run and its lines.
pub fn run_lines(spec: &RunSpec) -> (Finished, Vec<IntervalLine>) {
    let mut lines = Lines::default();
    let f = run_with(spec, &mut [&mut lines]);
    (f, lines.0)
}

/// `spec` run into the run directory `dir` (summary.json, intervals.jsonl, intervals.csv and
/// report.html, as `headroom run --out DIR` writes it).
pub fn run_into(spec: &RunSpec, dir: &Path) -> Finished {
    let mut sink = pipeline::DirSink::create(dir, "test", true).expect("create the run directory");
    let f = run_with(spec, &mut [&mut sink]);
    assert!(f.write_errors.is_empty(), "{:?}", f.write_errors);
    assert_eq!(sink.warning, None, "the run directory's derived files");
    f
}

/// A sink that keeps every interval's line.
#[derive(Default)]
pub struct Lines(pub Vec<IntervalLine>);

impl Sink for Lines {
    fn interval(&mut self, _: &Interval<'_>, line: &IntervalLine) -> std::io::Result<()> {
        self.0.push(line.clone());
        Ok(())
    }
}

/// A run that `headroom run` would end with exit 0 (no `--max-error-rate` given): something
/// succeeded, no threshold broke, nothing failed to be written, and it was not interrupted.
pub fn assert_clean(f: &Finished) {
    assert_eq!(f.nothing_succeeded, None, "{}", show(&f.summary));
    assert_eq!(f.broken, 0, "{}", show(&f.summary));
    assert!(f.write_errors.is_empty(), "{:?}", f.write_errors);
    assert!(!f.summary.interrupted, "{}", show(&f.summary));
}

/// A run in which no request succeeded: `headroom run` says so and exits 1.
pub fn assert_nothing_succeeded(f: &Finished) {
    let line = f
        .nothing_succeeded
        .as_deref()
        .unwrap_or_else(|| panic!("something succeeded: {}", show(&f.summary)));
    assert!(line.starts_with("no request succeeded: "), "{line}");
}

/// The summary as summary.json, for a failed assertion's message.
pub fn show(s: &RunSummary) -> String {
    serde_json::to_string_pretty(s).unwrap()
}

/// `secs` seconds.
pub fn secs(secs: u64) -> Option<Duration> {
    Some(Duration::from_secs(secs))
}

/// headroom serve (reactor, one worker) in this process on 127.0.0.1, any free port.
pub fn serve() -> headroom_serve::RunningServer {
    headroom_serve::start(headroom_serve::ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        workers: 1,
        ..Default::default()
    })
    .expect("start headroom serve")
}

// raw, links, scenarios:

/// The summary's scenario section, which a scenario's run has.
pub fn scenario_of(v: &RunSummary) -> &headroom_run::summary::ScenarioSection {
    v.scenario
        .as_ref()
        .unwrap_or_else(|| panic!("no scenario section: {}", show(v)))
}

/// The figures of the scenario's request called `name`.
pub fn by_request<'a>(v: &'a RunSummary, name: &str) -> &'a headroom_run::summary::NameFigures {
    scenario_of(v)
        .by_request
        .get(name)
        .unwrap_or_else(|| panic!("no figures for the request {name}: {}", show(v)))
}

/// How often the scenario's match called `name` fired (it must be in the summary).
pub fn matched(v: &RunSummary, name: &str) -> u64 {
    *scenario_of(v)
        .matches
        .get(name)
        .unwrap_or_else(|| panic!("no match {name}: {}", show(v)))
}

#[allow(unused_imports)]
pub use headroom_testkit::servers::services::{pg, pg_parts, repo_root, service, xmpp};

/// The spec of `headroom run FILE` for a scenario file already on disk (the files it names
/// read beside it), `target` as `--target`.
pub fn file_spec(file: &Path, target: Option<String>) -> RunSpec {
    let sc = headroom_run::files::scenario_file(file, target)
        .unwrap_or_else(|e| panic!("{} does not read: {e}", file.display()));
    RunSpec::new(Target::Scenario(sc))
}

// http2, tls, nginx:

/// The spec of `headroom run DIR/s.yaml -d BOUND`, with `files` (name, source) copied beside
/// `yaml` first (a scenario names its files, a CA or a CSV, relative to itself).
pub fn scenario_with_files(yaml: &str, files: &[(&str, &Path)]) -> RunSpec {
    let dir = tempfile::tempdir().unwrap();
    for (name, src) in files {
        std::fs::copy(src, dir.path().join(name))
            .unwrap_or_else(|e| panic!("copy {} to {name}: {e}", src.display()));
    }
    let file = dir.path().join("s.yaml");
    std::fs::write(&file, yaml).unwrap();
    let sc = headroom_run::files::scenario_file(&file, None)
        .unwrap_or_else(|e| panic!("the scenario does not read: {e}\n{yaml}"));
    let mut spec = RunSpec::new(Target::Scenario(sc));
    spec.duration = secs(BOUND);
    spec
}

/// The bytes of a PEM file, as `--cacert FILE` (or `--cert`, `--key`) puts them in the spec.
pub fn pem(path: &Path) -> Option<Vec<u8>> {
    Some(std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display())))
}

/// The summary's `tls` section, which a run over TLS has.
pub fn tls(v: &RunSummary) -> &headroom_run::summary::TlsSection {
    v.tls
        .as_ref()
        .unwrap_or_else(|| panic!("no tls section: {}", show(v)))
}

/// The summary's `http2` section, which an HTTP/2 run has.
pub fn h2(v: &RunSummary) -> &headroom_run::summary::Http2Section {
    v.http2
        .as_ref()
        .unwrap_or_else(|| panic!("no http2 section: {}", show(v)))
}

/// The TLS listeners of the shared services scripts/test starts (wss://, XMPP, PostgreSQL).
pub mod tls_services;

/// `spec` as `headroom run` runs it without `--no-preflight`: the preflight (one connection,
/// TLS handshake included) and the protocol probe first, then the load.
pub fn run_preflighted(spec: &RunSpec) -> Finished {
    let built =
        headroom_run::build(spec).unwrap_or_else(|e| panic!("the spec does not build: {e}"));
    headroom_run::preflight::preflight(&built.plan)
        .unwrap_or_else(|e| panic!("the preflight failed: {e:#}"));
    headroom_run::preflight::protocol_probe(&built.plan)
        .unwrap_or_else(|e| panic!("the protocol probe failed: {e:#}"));
    run(spec)
}
