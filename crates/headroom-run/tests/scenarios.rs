//! Scenario files end to end, through the pipeline in this process: the examples in
//! `scenarios/` run against `headroom serve` (those of XMPP and PostgreSQL against the ejabberd
//! and PostgreSQL that scripts/test starts), thresholds are checked and listed, arrivals are
//! Poisson (Kolmogorov–Smirnov), session weights hold over 10,000 sessions, SURGE sessions
//! average their configured requests, and a Tsung XML runs directly. The figures are the typed
//! `RunSummary`'s. (The CLI's side, a scenario's located errors, refused flags and a broken
//! threshold's exit code and message, is crates/headroom/tests/scenarios.rs.)

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use headroom_core::spec::RunSpec;
use headroom_core::stats::ks_statistic;

fn repo() -> PathBuf {
    repo_root().to_path_buf()
}

/// headroom serve (reactor, one worker) on 127.0.0.1 serving `docroot`'s files.
fn serve_files(docroot: PathBuf) -> headroom_serve::RunningServer {
    headroom_serve::start(headroom_serve::ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        workers: 1,
        docroot: Some(docroot),
        ..Default::default()
    })
    .expect("start headroom serve")
}

/// `headroom surge fileset DIR --files N`: a SURGE file set.
fn surge_fileset(dir: &Path, files: u64) {
    let params = headroom_serve::surge::params_from_flags(files, 0, &[]).unwrap();
    headroom_serve::surge::write_fileset(dir, &params, false)
        .unwrap_or_else(|e| panic!("surge fileset: {e}"));
}

/// `headroom run FILE --target ADDR`.
fn file_at(file: &Path, addr: SocketAddr) -> RunSpec {
    file_spec(file, Some(addr.to_string()))
}

/// `headroom run DIR/NAME --target ADDR` with `text` as the file.
fn text_at(dir: &Path, name: &str, text: &str, addr: SocketAddr) -> RunSpec {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    file_at(&p, addr)
}

fn count(v: &headroom_run::RunSummary, name: &str) -> u64 {
    by_request(v, name).count
}

#[test]
fn every_example_runs_against_headroom_serve() {
    let tmp = tempfile::tempdir().unwrap();
    let files = tmp.path().join("surge");
    surge_fileset(&files, 2000);
    let server = serve_files(files);
    let addr = server.local_addr();
    let mut seen = 0;
    let mut entries: Vec<PathBuf> = std::fs::read_dir(repo().join("scenarios"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension()
                .is_some_and(|e| e == "yaml" || e == "yml" || e == "xml")
        })
        .collect();
    entries.sort();
    for file in entries {
        // Examples of other protocols run against the real servers scripts/test starts.
        let text = std::fs::read_to_string(&file).unwrap();
        let target: SocketAddr = if text.contains("protocol: xmpp") {
            xmpp().parse().unwrap()
        } else if text.contains("protocol: pgsql") {
            let (host, port, ..) = pg();
            format!("{host}:{port}").parse().unwrap()
        } else {
            addr
        };
        // 6 s: long enough that mix.yaml's ramp (from 1 user/s, ~12 arrivals, 80% readers) has
        // brought a reader (all writers: p ~ 1e-4), so its `p99(article)` threshold has replies
        // to judge; a threshold with no reply at all is broken by design. 4 s once missed.
        let mut spec = file_at(&file, target);
        spec.duration = secs(6);
        let f = run(&spec);
        let v = &f.summary;
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        // What `headroom run` exits 0 on: something succeeded and no threshold broke.
        assert_eq!(
            f.nothing_succeeded, None,
            "{name}: thresholds {:?}",
            v.thresholds
        );
        assert_eq!(f.broken, 0, "{name}: thresholds {:?}", v.thresholds);
        assert!(f.write_errors.is_empty(), "{name}: {:?}", f.write_errors);
        assert!(!v.interrupted, "{name}");
        assert!(v.responses > 0, "{name}: no responses");
        // The Tsung example keeps its shop's URLs (/items, /cart, ...), which headroom serve
        // answers with 404: those count as http_4xx; nothing else may fail.
        let allowed_4xx = if name.ends_with(".xml") {
            v.errors.http_4xx
        } else {
            0
        };
        assert_eq!(v.errors_total, allowed_4xx, "{name}: errors {:?}", v.errors);
        assert_eq!(v.model, "sessions", "{name}");
        // The protocol's connection setup (xmpp:login, pgsql:startup) is timed by name but is
        // no request of the scenario's.
        let counted: u64 = scenario_of(v)
            .by_request
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "xmpp:login" | "pgsql:startup"))
            .map(|(_, r)| r.count)
            .sum();
        assert_eq!(
            counted, v.responses,
            "{name}: per-name counts add up to the responses"
        );
        seen += 1;
    }
    assert!(seen >= 5, "expected the example scenarios, found {seen}");
    server.stop();
}

#[test]
fn the_login_example_extracts_and_times_its_transaction() {
    let server = serve();
    let mut spec = file_at(&repo().join("scenarios/login.yaml"), server.local_addr());
    spec.duration = secs(2);
    let f = run(&spec);
    assert_clean(&f);
    let v = &f.summary;
    let s = scenario_of(v);
    let logins = count(v, "login");
    let accounts = count(v, "account");
    assert!(logins > 10, "{}", show(v));
    // Every account request follows a login in the same session (some sessions are cut at stop).
    assert!(accounts <= logins && accounts + 50 >= logins, "{}", show(v));
    let tx = s
        .by_transaction
        .get("sign-in")
        .unwrap_or_else(|| panic!("no sign-in transaction: {}", show(v)));
    assert!(tx.count >= accounts, "{}", show(v));
    assert!(tx.latency_us.p50 > 0, "{}", show(v));
    assert_eq!(matched(v, "expired"), 0, "{}", show(v));
    assert_eq!(matched(v, "server-error"), 0, "{}", show(v));
    assert!(s.sessions.completed > 0, "{}", show(v));
    // `close` after each session: connects follow sessions, not requests.
    let connects = v.connects;
    assert!(
        connects < logins + 60,
        "{connects} connects for {logins} sessions"
    );
    let th = &v.thresholds.as_ref().expect("the example's thresholds")[0];
    assert_eq!(th.threshold, "p99(sign-in)");
    assert!(th.ok, "{th:?}");
    server.stop();
}

/// A broken threshold is listed with its value, and the others with theirs. (`headroom run`
/// exits 1 and says so: crates/headroom/tests/scenarios.rs.)
#[test]
fn a_broken_threshold_is_listed() {
    let tmp = tempfile::tempdir().unwrap();
    let server = serve();
    let mut spec = text_at(
        tmp.path(),
        "t.yaml",
        "load: {users: [{count: 2}]}\n\
         sessions: [{name: s, steps: [{request: {name: slow, path: /sleep/20}}]}]\n\
         thresholds:\n  \"p99(slow)\": \"< 5ms\"\n  error_rate: \"< 1%\"\n",
        server.local_addr(),
    );
    spec.duration = secs(1);
    let f = run(&spec);
    let v = &f.summary;
    assert_eq!(f.broken, 1, "{}", show(v));
    assert_eq!(f.nothing_succeeded, None, "{}", show(v));
    assert_eq!(v.thresholds_ok, Some(false), "{}", show(v));
    let t = v.thresholds.as_ref().expect("the thresholds");
    assert_eq!(t[0].threshold, "p99(slow)");
    assert!(!t[0].ok, "{:?}", t[0]);
    assert!(t[0].value.unwrap() >= 20_000.0, "{:?}", t[0]);
    assert_eq!(t[1].threshold, "error_rate");
    assert!(t[1].ok, "{:?}", t[1]);
    server.stop();
}

/// A listener that records when each connection arrives and answers every request with a tiny
/// 200. Each arriving user opens one connection, so accept times are arrival times.
struct Recorder {
    addr: SocketAddr,
    accepts: Arc<Mutex<Vec<Instant>>>,
}

impl Recorder {
    fn start() -> Recorder {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let accepts = Arc::new(Mutex::new(Vec::new()));
        let a = accepts.clone();
        std::thread::spawn(move || {
            for conn in l.incoming() {
                let Ok(mut c) = conn else { continue };
                a.lock().unwrap().push(Instant::now());
                std::thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    let mut pending = Vec::new();
                    loop {
                        match c.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => pending.extend_from_slice(&buf[..n]),
                        }
                        while let Some(i) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                            pending.drain(..i + 4);
                            if c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                                .is_err()
                            {
                                return;
                            }
                        }
                    }
                });
            }
        });
        Recorder { addr, accepts }
    }
}

#[test]
fn poisson_phase_arrivals_pass_kolmogorov_smirnov() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = Recorder::start();
    let (rate, secs) = (300.0, 4.0);
    // No preflight here: the pipeline in this process never makes one (`--no-preflight`).
    let f = run(&text_at(
        tmp.path(),
        "p.yaml",
        &format!(
            "load: {{phases: [{{duration: {secs}s, arrival_rate: {rate}}}]}}\n\
             sessions: [{{name: s, steps: [{{request: GET /}}]}}]\n"
        ),
        rec.addr,
    ));
    assert_clean(&f);
    let v = &f.summary;
    let times = rec.accepts.lock().unwrap().clone();
    let n = times.len() as f64;
    let expected = rate * secs;
    // Arrival count: Poisson(λT); 4 standard deviations either side.
    assert!(
        (n - expected).abs() < 4.0 * expected.sqrt(),
        "{n} arrivals, expected {expected} ± {:.0}",
        4.0 * expected.sqrt()
    );
    assert_eq!(v.users_started as f64, n, "{}", show(v));
    // Inter-arrival gaps: exponential with mean 1/λ (KS at the 0.1% level).
    let mut gaps: Vec<f64> = times
        .windows(2)
        .map(|w| (w[1] - w[0]).as_secs_f64())
        .collect();
    gaps.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let d = ks_statistic(&gaps, |x| 1.0 - (-rate * x).exp());
    let critical = 1.95 / (gaps.len() as f64).sqrt();
    eprintln!(
        "poisson: {} arrivals (expected {expected}), KS D = {d:.4}, critical {critical:.4}",
        times.len()
    );
    assert!(d < critical, "KS D {d:.4} >= {critical:.4}");
    // The uniform-gap alternative is clearly rejected by the same test, so it has power here.
    let even: Vec<f64> = vec![1.0 / rate; gaps.len()];
    assert!(ks_statistic(&even, |x| 1.0 - (-rate * x).exp()) > critical);
}

/// Constant arrivals from several generator threads interleave: the merged stream is evenly
/// spaced, not one arrival per thread at the same instant.
#[test]
fn constant_phase_arrivals_are_evenly_spaced_across_threads() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = Recorder::start();
    let rate = 40.0;
    // `-t 2` (and no preflight, as `--no-preflight`: the pipeline here never makes one).
    let mut spec = text_at(
        tmp.path(),
        "c.yaml",
        &format!(
            "load: {{phases: [{{duration: 3s, arrival_rate: {rate}, arrival: constant}}]}}\n\
             sessions: [{{name: s, steps: [{{request: GET /}}]}}]\n"
        ),
        rec.addr,
    );
    spec.threads = Some(2);
    assert_clean(&run(&spec));
    let times = rec.accepts.lock().unwrap().clone();
    assert!(
        (118..=122).contains(&times.len()),
        "{} arrivals",
        times.len()
    );
    let gaps: Vec<f64> = times
        .windows(2)
        .map(|w| (w[1] - w[0]).as_secs_f64())
        .collect();
    // 25 ms apart; two threads firing together would leave gaps near 0 and 50 ms.
    let close = gaps.iter().filter(|g| **g < 0.25 / rate).count();
    let median = {
        let mut g = gaps.clone();
        g.sort_by(f64::total_cmp);
        g[g.len() / 2]
    };
    eprintln!(
        "constant: {} arrivals, median gap {median:.4} s, {close} under 6 ms",
        times.len()
    );
    assert!(
        close <= gaps.len() / 20,
        "{close} of {} gaps under 6 ms",
        gaps.len()
    );
    assert!((median - 1.0 / rate).abs() < 0.004, "median gap {median}");
}

#[test]
fn session_weights_hold_over_ten_thousand_sessions() {
    let tmp = tempfile::tempdir().unwrap();
    let server = serve();
    let mut spec = text_at(
        tmp.path(),
        "w.yaml",
        "load: {users: [{count: 20}]}\n\
         sessions:\n\
         - {name: a, weight: 1, steps: [{request: {name: a, path: /bytes/1}}]}\n\
         - {name: b, weight: 3, steps: [{request: {name: b, path: /bytes/2}}]}\n",
        server.local_addr(),
    );
    spec.requests = Some(12000);
    spec.duration = secs(60);
    let f = run(&spec);
    assert_clean(&f);
    let v = &f.summary;
    let (a, b) = (count(v, "a") as f64, count(v, "b") as f64);
    let n = a + b;
    assert!(n >= 10_000.0, "{n} sessions");
    let p = 0.25;
    let sd = (n * p * (1.0 - p)).sqrt();
    eprintln!(
        "weights: a {a}, b {b}: share of a {:.4} (expected 0.25 ± {:.4})",
        a / n,
        4.0 * sd / n
    );
    assert!((a - n * p).abs() < 4.0 * sd, "a = {a} of {n}");
    server.stop();
}

#[test]
fn surge_sessions_average_their_configured_requests() {
    let tmp = tempfile::tempdir().unwrap();
    let files = tmp.path().join("f");
    surge_fileset(&files, 300);
    let server = serve_files(files);
    // Short OFF times so that thousands of sessions complete in a few seconds.
    let mut spec = text_at(
        tmp.path(),
        "s.yaml",
        "load: {users: [{count: 20}]}\n\
         sessions: [{name: web, surge: {files: 300, requests_per_session: 6.5, pipeline: 4, prefix: /file/, off_k: 0.0001, max_off: 0.001}}]\n",
        server.local_addr(),
    );
    spec.duration = secs(4);
    let f = run(&spec);
    assert_clean(&f);
    let v = &f.summary;
    assert_eq!(v.errors_total, 0, "{:?}", v.errors);
    let sessions = scenario_of(v).sessions.completed as f64;
    let requests = (count(v, "page") + count(v, "object")) as f64;
    // Requests of sessions cut at the stop are at most 20 sessions' worth.
    let per = requests / sessions;
    eprintln!("surge: {sessions} sessions, {requests} requests, {per:.2} per session");
    assert!(sessions > 500.0, "{sessions}");
    assert!((per - 6.5).abs() < 0.65, "{per:.2} requests per session");
    server.stop();
}

#[test]
fn a_failed_request_aborts_its_session_and_counts_under_its_name() {
    let tmp = tempfile::tempdir().unwrap();
    // Port 1 on loopback: nothing listens, every connect is refused at once.
    // `--target 127.0.0.1:1 -d 500ms` (no preflight: the pipeline here never makes one).
    let mut spec = text_at(
        tmp.path(),
        "f.yaml",
        "load: {users: [{count: 2}]}\n\
         sessions:\n\
         - {name: a, steps: [connect, {request: {name: never, path: /}}]}\n\
         - {name: b, steps: [{transaction: {name: tx, steps: [{request: {name: refused, path: /}}]}}]}\n",
        "127.0.0.1:1".parse().unwrap(),
    );
    spec.duration = Some(Duration::from_millis(500));
    let f = run(&spec);
    let v = &f.summary;
    let s = scenario_of(v);
    let refused = v.errors.refused;
    let aborted = s.sessions.aborted;
    assert!(refused > 10, "{}", show(v));
    assert_eq!(v.errors_total, refused, "{}", show(v));
    // Each refused connect ends its session; a user whose connect was refused just before the
    // stop has not reached the end of its session yet (at most one per user).
    assert!(
        aborted <= refused && refused <= aborted + 2,
        "{aborted} sessions aborted for {refused} refused"
    );
    assert_eq!(s.sessions.completed, 0, "{}", show(v));
    // A failed `connect` step fails no request; a failed request counts under its name, and its
    // transaction counts an error without a latency.
    assert_eq!(by_request(v, "never").errors, 0, "{}", show(v));
    let named = by_request(v, "refused").errors;
    assert!(named > 0 && named < refused, "{}", show(v));
    // The transaction's error is counted when its session ends (again: up to one per user is
    // still pending at the stop).
    let tx = s
        .by_transaction
        .get("tx")
        .unwrap_or_else(|| panic!("no tx transaction: {}", show(v)));
    assert!(tx.errors <= named && named <= tx.errors + 2, "{}", show(v));
    assert_eq!(tx.count, 0, "{}", show(v));
}

/// Requests seen by [`ok_server`]: path and wall time.
type Seen = Arc<Mutex<Vec<(String, std::time::SystemTime)>>>;

/// An HTTP/1.1 server on 127.0.0.1 answering every request `200 ok`, keeping the connection,
/// recording each request's path and wall time in `seen`.
fn ok_server(seen: Seen) -> std::net::SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut c) = conn else { continue };
            let s = seen.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let mut pending = Vec::new();
                loop {
                    match c.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => pending.extend_from_slice(&buf[..n]),
                    }
                    while let Some(i) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&pending[..i]).to_string();
                        let path = head.split(' ').nth(1).unwrap_or("").to_string();
                        s.lock().unwrap().push((path, std::time::SystemTime::now()));
                        pending.drain(..i + 4);
                        if c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                            .is_err()
                        {
                            return;
                        }
                    }
                }
            });
        }
    });
    addr
}

/// A `once` user (Tsung's `<user session start_time>`) runs its session exactly once, starting
/// no earlier than its `at`, beside a phase's arrivals that draw from the mix (where its
/// session, of weight 0, never is); without `-d` the run lasts until it has left, past the
/// phase's end. The server records each request's path and wall time.
#[test]
fn a_once_user_runs_its_session_once_from_its_start_time() {
    let seen: Seen = Arc::default();
    let addr = ok_server(seen.clone());
    let yaml = format!(
        r#"
servers: [{{host: 127.0.0.1, port: {}}}]
load:
  phases: [{{duration: 1s, arrival_rate: 10, arrival: constant}}]
  once: [{{session: late, at: 2s}}]
sessions:
  - name: main
    steps: [{{request: {{name: main, path: /main}}}}]
  - name: late
    weight: 0
    steps:
      - request: {{name: late, path: /late}}
      - think: 300ms
      - request: {{name: late2, path: /late2}}
"#,
        addr.port()
    );
    let mut spec = scenario_spec(&yaml, None);
    spec.threads = Some(2);
    let f = run(&spec);
    let v = &f.summary;
    assert_eq!(v.errors_total, 0, "{}", show(v));
    let started = humantime::parse_rfc3339(&v.started_at).unwrap();
    let seen = seen.lock().unwrap().clone();
    let late: Vec<_> = seen.iter().filter(|(p, _)| p == "/late").collect();
    assert_eq!(late.len(), 1, "{seen:?}");
    assert_eq!(seen.iter().filter(|(p, _)| p == "/late2").count(), 1);
    let after = late[0].1.duration_since(started).unwrap();
    assert!(
        after >= Duration::from_secs(2),
        "the once user began {after:?} into the run"
    );
    assert_eq!(by_request(v, "late").count, 1, "{}", show(v));
    assert_eq!(by_request(v, "late2").count, 1, "{}", show(v));
    // The phase's arrivals all ran `main`; every user, the once user too, left.
    let mains = seen.iter().filter(|(p, _)| p == "/main").count() as u64;
    assert!((8..=12).contains(&mains), "{mains} arrivals in 1 s at 10/s");
    assert_eq!(by_request(v, "main").count, mains, "{}", show(v));
    assert_eq!(v.users_started, mains + 1, "{}", show(v));
    assert_eq!(v.users_finished, mains + 1, "{}", show(v));
    // The run outlasted its phase until the once user had left, and no longer than needed.
    assert!(
        (2.3..6.0).contains(&v.duration_s),
        "the run lasted {} s",
        v.duration_s
    );
}

/// A load of `once` users alone (no phase, no closed user) runs them and ends when they have
/// left; it used to be refused ("the load has neither users nor phases").
#[test]
fn once_users_alone_run_and_end_the_run() {
    let addr = ok_server(Arc::default());
    let yaml = format!(
        r#"
servers: [{{host: 127.0.0.1, port: {}}}]
load:
  once: [{{session: s, at: 0s}}, {{session: s, at: 500ms}}]
sessions:
  - name: s
    steps:
      - request: {{name: one, path: /one}}
      - think: 200ms
      - request: {{name: two, path: /two}}
"#,
        addr.port()
    );
    let f = run(&scenario_spec(&yaml, None));
    let v = &f.summary;
    assert_eq!(v.errors_total, 0, "{}", show(v));
    assert_eq!(by_request(v, "one").count, 2, "{}", show(v));
    assert_eq!(by_request(v, "two").count, 2, "{}", show(v));
    assert_eq!(v.users_started, 2, "{}", show(v));
    assert_eq!(v.users_finished, 2, "{}", show(v));
    assert!(
        (0.7..5.0).contains(&v.duration_s),
        "the run lasted {} s",
        v.duration_s
    );
}
