//! summary.json and intervals.jsonl keep their figures: a few fixed runs of the real binary (a
//! plain closed-model run, a TLS constant-rate run, an open-model run, h2c against nginx, local
//! agents, scenarios with transactions, matches, thresholds, arrival phases and a WebSocket
//! protocol section) each give the sorted set of their JSON key paths with each value's JSON
//! type, compared with `tests/data/summary-keys.txt`. The golden was made from the code before
//! summary.json became a typed struct (issue 17), so a key or type lost in a refactor fails here.
//!
//! A path joins object keys with `.`; an array's elements are `[]`; maps keyed by data (status
//! codes, request and transaction names, match names) are `*`. A figure that is `null` in one run
//! and a number in another shows both types in their runs. `HEADROOM_BLESS=1` rewrites the
//! golden (for a deliberate change of the format: say so in docs/summary-json.md too).
//!
//! Each summary.json also reads back into `headroom_run::RunSummary` (headroom-format's) and
//! writes out unchanged, and each interval line into `IntervalLine`, so every run here conforms
//! to the types the schemas (schema/) are made from. The types read tolerantly (a missing key is
//! its default, an unknown one ignored), so it is the round trip that catches a key the types do
//! not have or one the writer left out.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::{headroom, service, Nginx};
use headroom_run::interval::IntervalLineExt;
use headroom_run::summary::RunSummaryExt;
use serde_json::Value;

/// Object paths whose keys are data (a status code, a name), not field names.
const DATA_KEYED: [&str; 5] = [
    "status_codes",
    "scenario.by_request",
    "scenario.by_transaction",
    "scenario.matches",
    "scenario.names",
];

/// Lists whose length is the run's data, not its format (empty in a run whose generator kept
/// up, one line per reason in another): their elements' paths are left out.
const DATA_LISTS: [&str; 2] = ["generator.limits", "verdict.candidates"];

fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_u64() => "u64",
        Value::Number(n) if n.is_i64() => "i64",
        Value::Number(_) => "f64",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Every `path type` of `v` under `prefix`.
fn paths(v: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            let data = DATA_KEYED.contains(&prefix);
            for (k, child) in m {
                let seg = if data { "*" } else { k.as_str() };
                let p = if prefix.is_empty() {
                    seg.to_string()
                } else {
                    format!("{prefix}.{seg}")
                };
                out.insert(format!("{p} {}", type_of(child)));
                paths(child, &p, out);
            }
        }
        Value::Array(_) if DATA_LISTS.contains(&prefix) => {}
        Value::Array(a) => {
            let p = format!("{prefix}[]");
            for child in a {
                out.insert(format!("{p} {}", type_of(child)));
                paths(child, &p, out);
            }
        }
        _ => {}
    }
}

/// One configuration's key sets: summary.json, then every line of intervals.jsonl together.
fn section(name: &str, dir: &Path) -> String {
    let text = std::fs::read_to_string(dir.join("summary.json")).unwrap();
    let summary: Value = serde_json::from_str(&text).unwrap();
    // The typed summary reads it and writes it back unchanged (an unknown key would be dropped,
    // a missing one written): summary.json is exactly headroom_run::RunSummary.
    let typed = headroom_run::RunSummary::from_json(&text)
        .unwrap_or_else(|e| panic!("{name}: summary.json is not a RunSummary: {e}"));
    assert_eq!(typed.to_json(), summary, "{name}: RunSummary round trip");
    let mut keys = BTreeSet::new();
    paths(&summary, "", &mut keys);
    let mut lines = BTreeSet::new();
    let text = std::fs::read_to_string(dir.join("intervals.jsonl")).unwrap();
    assert!(!text.trim().is_empty(), "{name}: no interval lines");
    for l in text.lines() {
        let v: Value = serde_json::from_str(l).unwrap();
        let typed: headroom_run::interval::IntervalLine = serde_json::from_str(l)
            .unwrap_or_else(|e| panic!("{name}: an interval line is not an IntervalLine: {e}"));
        assert_eq!(typed.to_json(), v, "{name}: IntervalLine round trip");
        paths(&v, "", &mut lines);
    }
    let mut s = format!("[{name} summary.json]\n");
    for k in &keys {
        s.push_str(k);
        s.push('\n');
    }
    s.push_str(&format!("\n[{name} intervals.jsonl]\n"));
    for k in &lines {
        s.push_str(k);
        s.push('\n');
    }
    s.push('\n');
    s
}

/// `headroom run TARGET ARGS -q --no-report --out DIR`, which must succeed; its stdout.
fn run(target: &str, args: &[&str], dir: &Path) -> Vec<u8> {
    run_exit(target, args, dir, 0)
}

/// `run`, which must exit with `code`.
fn run_exit(target: &str, args: &[&str], dir: &Path, code: i32) -> Vec<u8> {
    let out = headroom()
        .args(["run", target, "-q", "--no-report", "--interval", "250ms"])
        .args(args)
        .arg("--out")
        .arg(dir)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(code),
        "{target} {args:?}: exit {:?}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Each key line of a golden text prefixed with its section (`[plain summary.json] path type`).
fn located(text: &str) -> BTreeSet<String> {
    let mut at = "";
    let mut out = BTreeSet::new();
    for l in text.lines() {
        if l.starts_with('[') {
            at = l;
        } else if !l.is_empty() && !l.starts_with('#') {
            out.insert(format!("{at} {l}"));
        }
    }
    out
}

fn repo() -> &'static Path {
    common::repo_root()
}

#[test]
fn summary_and_interval_keys_match_the_golden() {
    let tmp = tempfile::tempdir().unwrap();
    let d = |n: &str| tmp.path().join(n);
    let mut golden = String::from(
        "# Key paths of summary.json and intervals.jsonl from fixed runs (tests/summary_keys.rs).\n\
         # HEADROOM_BLESS=1 cargo test -p headroom --test summary_keys rewrites this file.\n\n",
    );

    // A plain closed-model run, summary.json also on stdout (--json), the server sampled.
    let plain = common::serve();
    let url = format!("http://{}/", plain.local_addr());
    let pid = std::process::id().to_string();
    let stdout = run(
        &url,
        &[
            "-c",
            "2",
            "-t",
            "1",
            "-d",
            "600ms",
            "--json",
            "--server-pid",
            &pid,
        ],
        &d("plain"),
    );
    let printed: Value = serde_json::from_slice(&stdout).expect("--json prints summary.json");
    let written: Value =
        serde_json::from_slice(&std::fs::read(d("plain").join("summary.json")).unwrap()).unwrap();
    assert_eq!(printed, written, "--json prints what summary.json holds");
    golden.push_str(&section("plain", &d("plain")));

    // Open model: arrivals, think time, max users, expected statuses, no keep-alive.
    run(
        &url,
        &[
            "--arrival-rate",
            "50",
            "--per-user",
            "2",
            "--think",
            "5ms",
            "--max-users",
            "1000",
            "-d",
            "600ms",
            "--expect-status",
            "2xx",
            "--no-keepalive",
            "-t",
            "1",
        ],
        &d("open"),
    );
    golden.push_str(&section("open", &d("open")));

    // Local agents: the agents section.
    run(
        &url,
        &["-c", "2", "--per-user", "20", "--agents", "local:2"],
        &d("agents"),
    );
    golden.push_str(&section("agents", &d("agents")));

    // Scenarios against headroom serve: transactions, matches, thresholds, a CSV feeder
    // (login.yaml); then arrival phases, weighted sessions and every threshold metric, one of
    // them on a request never reached (its value is null and it breaks: exit 1).
    let target = plain.local_addr().to_string();
    run(
        repo().join("scenarios/login.yaml").to_str().unwrap(),
        &["--target", &target, "-d", "700ms"],
        &d("login"),
    );
    golden.push_str(&section("login", &d("login")));
    let phases = tmp.path().join("phases.yaml");
    std::fs::write(
        &phases,
        format!(
            "servers: [{{host: 127.0.0.1, port: {}}}]\n\
             load:\n  phases:\n    - {{duration: 300ms, ramp: {{from: 20, to: 60}}}}\n    \
             - {{duration: 300ms, arrival_rate: 50, arrival: constant, max_users: 1000}}\n\
             sessions:\n  - name: s\n    weight: 3\n    steps:\n      \
             - request: {{name: a, path: /}}\n  - name: t\n    weight: 1\n    steps:\n      \
             - think: 10s\n      - request: {{name: b, path: /}}\n\
             thresholds:\n  \"p99(a)\": \"< 10s\"\n  \"mean(b)\": \"< 10s\"\n  \
             error_rate: \"< 50%\"\n  rps: \">= 0\"\n  p90: \"< 10s\"\n",
            plain.local_addr().port()
        ),
    )
    .unwrap();
    run_exit(phases.to_str().unwrap(), &[], &d("phases"), 1);
    golden.push_str(&section("phases", &d("phases")));
    plain.stop();

    // TLS at a constant rate, against headroom serve's self-signed certificate.
    let tls = headroom_serve::start(headroom_serve::ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        workers: 1,
        tls: Some(headroom_serve::TlsSource::SelfSigned),
        ..Default::default()
    })
    .unwrap();
    let url = format!("https://localhost:{}/", tls.local_addr().port());
    run(
        &url,
        &["-k", "--rate", "200", "-c", "2", "-t", "1", "-n", "100"],
        &d("tls"),
    );
    golden.push_str(&section("tls", &d("tls")));
    tls.stop();

    // HTTP/2 in clear text against nginx: the http2 section, and the http one (the browser).
    let ng = Nginx::builder().h2c(true).start();
    run(
        &ng.url("/"),
        &["--h2c", "-c", "2", "--streams", "2", "-t", "1", "-n", "200"],
        &d("h2c"),
    );
    golden.push_str(&section("h2c", &d("h2c")));
    drop(ng);

    // A WebSocket scenario against the echo server (scripts/ws-echo.sh): the protocol section.
    let ws = service("HEADROOM_WS_URL", "ws-echo.sh");
    let (host, port) = ws
        .strip_prefix("ws://")
        .unwrap()
        .trim_end_matches('/')
        .rsplit_once(':')
        .unwrap();
    let yaml = format!(
        "servers: [{{host: {host}, port: {port}, protocol: websocket}}]\n\
         websocket: {{path: /}}\n\
         load: {{users: [{{count: 2}}]}}\n\
         sessions:\n  - name: s\n    steps:\n      - ws: {{send: hello, name: echo}}\n      - ws: ping\n      - ws: close\n"
    );
    let f = tmp.path().join("ws.yaml");
    std::fs::write(&f, yaml).unwrap();
    run(f.to_str().unwrap(), &["-d", "600ms"], &d("ws"));
    golden.push_str(&section("ws", &d("ws")));

    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/summary-keys.txt");
    if std::env::var_os("HEADROOM_BLESS").is_some() {
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, &golden).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("{}: {e} (HEADROOM_BLESS=1 writes it)", file.display()));
    if want != golden {
        let w = located(&want);
        let g = located(&golden);
        let lost: Vec<&String> = w.difference(&g).collect();
        let new: Vec<&String> = g.difference(&w).collect();
        panic!(
            "summary.json / intervals.jsonl keys changed.\nlost: {lost:#?}\nnew: {new:#?}\n\
             (a deliberate change: HEADROOM_BLESS=1 rewrites {})",
            file.display()
        );
    }
}
