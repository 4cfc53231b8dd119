//! Scenario files end to end: the examples in `scenarios/` run against `headroom serve` (those
//! of XMPP and PostgreSQL against the ejabberd and PostgreSQL that scripts/test starts),
//! thresholds decide the exit code, arrivals are Poisson (Kolmogorov–Smirnov), session weights
//! hold over 10,000 sessions, SURGE sessions average their configured requests, and a Tsung XML
//! runs directly.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use common::headroom;
use headroom_core::stats::ks_statistic;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn serve(docroot: Option<PathBuf>) -> headroom_serve::RunningServer {
    headroom_serve::start(headroom_serve::ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        workers: 1,
        docroot,
        ..Default::default()
    })
    .expect("start headroom serve")
}

/// `headroom run FILE --target ADDR --json -q EXTRA...`: the summary and the process output.
fn run_file(file: &Path, addr: SocketAddr, extra: &[&str]) -> (serde_json::Value, Output) {
    let out = headroom()
        .arg("run")
        .arg(file)
        .args(["--target", &addr.to_string(), "--json", "-q"])
        .args(extra)
        .output()
        .expect("run headroom");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "summary JSON ({e}); stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (v, out)
}

fn write_scenario(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn by_request(v: &serde_json::Value, name: &str) -> u64 {
    v["scenario"]["by_request"][name]["count"]
        .as_u64()
        .unwrap_or_else(|| panic!("no figures for request '{name}': {}", v["scenario"]))
}

#[test]
fn every_example_runs_against_headroom_serve() {
    let tmp = tempfile::tempdir().unwrap();
    let files = tmp.path().join("surge");
    let st = headroom()
        .args(["surge", "fileset"])
        .arg(&files)
        .args(["--files", "2000"])
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let server = serve(Some(files));
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
            common::xmpp().parse().unwrap()
        } else if text.contains("protocol: pgsql") {
            let (host, port, ..) = common::pg();
            format!("{host}:{port}").parse().unwrap()
        } else {
            addr
        };
        // 6 s: long enough that mix.yaml's ramp (from 1 user/s, ~12 arrivals, 80% readers) has
        // brought a reader (all writers: p ~ 1e-4), so its `p99(article)` threshold has replies
        // to judge; a threshold with no reply at all is broken by design. 4 s once missed.
        let (v, out) = run_file(&file, target, &["-d", "6s"]);
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{name}: exit {:?}, stderr {stderr}, thresholds {}",
            out.status.code(),
            v["thresholds"]
        );
        assert!(v["responses"].as_u64().unwrap() > 0, "{name}: no responses");
        // The Tsung example keeps its shop's URLs (/items, /cart, ...), which headroom serve
        // answers with 404: those count as http_4xx; nothing else may fail.
        let allowed_4xx = if name.ends_with(".xml") {
            v["errors"]["http_4xx"].as_u64().unwrap()
        } else {
            0
        };
        assert_eq!(
            v["errors_total"].as_u64(),
            Some(allowed_4xx),
            "{name}: errors {}",
            v["errors"]
        );
        assert_eq!(v["model"], "sessions", "{name}");
        let by_request = v["scenario"]["by_request"].as_object().unwrap();
        // The protocol's connection setup (xmpp:login, pgsql:startup) is timed by name but is
        // no request of the scenario's.
        let counted: u64 = by_request
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "xmpp:login" | "pgsql:startup"))
            .map(|(_, r)| r["count"].as_u64().unwrap())
            .sum();
        assert_eq!(
            counted,
            v["responses"].as_u64().unwrap(),
            "{name}: per-name counts add up to the responses"
        );
        seen += 1;
    }
    assert!(seen >= 5, "expected the example scenarios, found {seen}");
    server.stop();
}

#[test]
fn the_login_example_extracts_and_times_its_transaction() {
    let server = serve(None);
    let (v, out) = run_file(
        &repo().join("scenarios/login.yaml"),
        server.local_addr(),
        &["-d", "2s"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", v);
    let s = &v["scenario"];
    let logins = by_request(&v, "login");
    let accounts = by_request(&v, "account");
    assert!(logins > 10, "{s}");
    // Every account request follows a login in the same session (some sessions are cut at stop).
    assert!(accounts <= logins && accounts + 50 >= logins, "{s}");
    let tx = &s["by_transaction"]["sign-in"];
    assert!(tx["count"].as_u64().unwrap() >= accounts, "{s}");
    assert!(tx["latency_us"]["p50"].as_u64().unwrap() > 0);
    assert_eq!(s["matches"]["expired"], 0);
    assert_eq!(s["matches"]["server-error"], 0);
    assert!(s["sessions"]["completed"].as_u64().unwrap() > 0);
    // `close` after each session: connects follow sessions, not requests.
    let connects = v["connects"].as_u64().unwrap();
    assert!(
        connects < logins + 60,
        "{connects} connects for {logins} sessions"
    );
    let th = &v["thresholds"][0];
    assert_eq!(th["threshold"], "p99(sign-in)");
    assert_eq!(th["ok"], true);
    server.stop();
}

#[test]
fn a_broken_threshold_exits_1_and_is_listed() {
    let tmp = tempfile::tempdir().unwrap();
    let server = serve(None);
    let f = write_scenario(
        tmp.path(),
        "t.yaml",
        "load: {users: [{count: 2}]}\n\
         sessions: [{name: s, steps: [{request: {name: slow, path: /sleep/20}}]}]\n\
         thresholds:\n  \"p99(slow)\": \"< 5ms\"\n  error_rate: \"< 1%\"\n",
    );
    let (v, out) = run_file(&f, server.local_addr(), &["-d", "1s"]);
    assert_eq!(out.status.code(), Some(1), "{v}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("1 threshold(s) broken"), "{stderr}");
    assert_eq!(v["thresholds_ok"], false);
    let t = v["thresholds"].as_array().unwrap();
    assert_eq!(t[0]["threshold"], "p99(slow)");
    assert_eq!(t[0]["ok"], false);
    assert!(t[0]["value"].as_f64().unwrap() >= 20_000.0, "{}", t[0]);
    assert_eq!(t[1]["threshold"], "error_rate");
    assert_eq!(t[1]["ok"], true);
    server.stop();
}

#[test]
fn scenario_errors_are_located_and_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let f = write_scenario(
        tmp.path(),
        "bad.yaml",
        "load: {users: [{count: 2}]}\nsessions:\n  - name: s\n    weight: -1\n    steps: [{requst: GET /}]\n",
    );
    let out = headroom()
        .arg("run")
        .arg(&f)
        .args(["--target", "127.0.0.1:9"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert!(
        lines[0].contains("bad.yaml:4:13: weights must be 0 or more"),
        "{stderr}"
    );
    assert!(
        lines[1].contains("bad.yaml:5:14: unknown step 'requst'"),
        "{stderr}"
    );
    // A flag that describes its own load is refused with a scenario.
    let f = write_scenario(
        tmp.path(),
        "ok.yaml",
        "load: {users: [{count: 2}]}\nsessions: [{name: s, steps: [{request: GET /}]}]\n",
    );
    let out = headroom()
        .arg("run")
        .arg(&f)
        .args(["--target", "127.0.0.1:9", "--rate", "10"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--rate cannot apply"), "{err}");
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
    let f = write_scenario(
        tmp.path(),
        "p.yaml",
        &format!(
            "load: {{phases: [{{duration: {secs}s, arrival_rate: {rate}}}]}}\n\
             sessions: [{{name: s, steps: [{{request: GET /}}]}}]\n"
        ),
    );
    let (v, out) = run_file(&f, rec.addr, &["--no-preflight"]);
    assert_eq!(out.status.code(), Some(0), "{v}");
    let times = rec.accepts.lock().unwrap().clone();
    let n = times.len() as f64;
    let expected = rate * secs;
    // Arrival count: Poisson(λT); 4 standard deviations either side.
    assert!(
        (n - expected).abs() < 4.0 * expected.sqrt(),
        "{n} arrivals, expected {expected} ± {:.0}",
        4.0 * expected.sqrt()
    );
    assert_eq!(v["users_started"].as_u64().unwrap() as f64, n);
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
    let f = write_scenario(
        tmp.path(),
        "c.yaml",
        &format!(
            "load: {{phases: [{{duration: 3s, arrival_rate: {rate}, arrival: constant}}]}}\n\
             sessions: [{{name: s, steps: [{{request: GET /}}]}}]\n"
        ),
    );
    let (v, out) = run_file(&f, rec.addr, &["--no-preflight", "-t", "2"]);
    assert_eq!(out.status.code(), Some(0), "{v}");
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
    let server = serve(None);
    let f = write_scenario(
        tmp.path(),
        "w.yaml",
        "load: {users: [{count: 20}]}\n\
         sessions:\n\
         - {name: a, weight: 1, steps: [{request: {name: a, path: /bytes/1}}]}\n\
         - {name: b, weight: 3, steps: [{request: {name: b, path: /bytes/2}}]}\n",
    );
    let (v, out) = run_file(&f, server.local_addr(), &["-n", "12000", "-d", "60s"]);
    assert_eq!(out.status.code(), Some(0), "{v}");
    let (a, b) = (by_request(&v, "a") as f64, by_request(&v, "b") as f64);
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
    let st = headroom()
        .args(["surge", "fileset"])
        .arg(&files)
        .args(["--files", "300"])
        .output()
        .unwrap();
    assert!(st.status.success());
    let server = serve(Some(files));
    // Short OFF times so that thousands of sessions complete in a few seconds.
    let f = write_scenario(
        tmp.path(),
        "s.yaml",
        "load: {users: [{count: 20}]}\n\
         sessions: [{name: web, surge: {files: 300, requests_per_session: 6.5, pipeline: 4, prefix: /file/, off_k: 0.0001, max_off: 0.001}}]\n",
    );
    let (v, out) = run_file(&f, server.local_addr(), &["-d", "4s"]);
    assert_eq!(out.status.code(), Some(0), "{v}");
    assert_eq!(v["errors_total"], 0, "{}", v["errors"]);
    let s = &v["scenario"];
    let sessions = s["sessions"]["completed"].as_u64().unwrap() as f64;
    let requests = (by_request(&v, "page") + by_request(&v, "object")) as f64;
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
    let f = write_scenario(
        tmp.path(),
        "f.yaml",
        "load: {users: [{count: 2}]}\n\
         sessions:\n\
         - {name: a, steps: [connect, {request: {name: never, path: /}}]}\n\
         - {name: b, steps: [{transaction: {name: tx, steps: [{request: {name: refused, path: /}}]}}]}\n",
    );
    let out = headroom()
        .arg("run")
        .arg(&f)
        .args([
            "--target",
            "127.0.0.1:1",
            "--no-preflight",
            "-d",
            "500ms",
            "--json",
            "-q",
        ])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = &v["scenario"];
    let refused = v["errors"]["refused"].as_u64().unwrap();
    let aborted = s["sessions"]["aborted"].as_u64().unwrap();
    assert!(refused > 10, "{v}");
    assert_eq!(v["errors_total"].as_u64().unwrap(), refused);
    // Each refused connect ends its session; a user whose connect was refused just before the
    // stop has not reached the end of its session yet (at most one per user).
    assert!(
        aborted <= refused && refused <= aborted + 2,
        "{aborted} sessions aborted for {refused} refused"
    );
    assert_eq!(s["sessions"]["completed"], 0);
    // A failed `connect` step fails no request; a failed request counts under its name, and its
    // transaction counts an error without a latency.
    assert_eq!(s["by_request"]["never"]["errors"], 0, "{s}");
    let named = s["by_request"]["refused"]["errors"].as_u64().unwrap();
    assert!(named > 0 && named < refused, "{s}");
    // The transaction's error is counted when its session ends (again: up to one per user is
    // still pending at the stop).
    let tx_errors = s["by_transaction"]["tx"]["errors"].as_u64().unwrap();
    assert!(tx_errors <= named && named <= tx_errors + 2, "{s}");
    assert_eq!(s["by_transaction"]["tx"]["count"], 0);
}
