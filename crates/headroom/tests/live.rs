//! The live dashboard (`--dashboard`) and Prometheus endpoint (`--metrics-listen`) of a real
//! run against headroom serve (in this process, on loopback), read with a plain TCP client and
//! with headless Chromium. Every run is a few seconds long and loads 127.0.0.1 only.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::thread;
use std::time::{Duration, Instant};

use common::{headroom, serve};
use serde_json::Value;

const CHARTS: [&str; 5] = ["users", "throughput", "latency", "errors", "connect"];

/// A running `headroom run` whose stderr lines arrive on a channel (and are kept for messages).
struct Run {
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Run {
    fn start(args: &[&str]) -> Run {
        let mut child = headroom()
            .arg("run")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn headroom");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = channel();
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Run {
            child,
            lines: rx,
            seen: Vec::new(),
        }
    }

    /// The address in the stderr line starting with `prefix` (`headroom: dashboard at http://`).
    fn addr_from(&mut self, prefix: &str) -> SocketAddr {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(a) = self.seen.iter().find_map(|l| {
                let rest = l.strip_prefix(prefix)?;
                rest.split('/').next()?.parse().ok()
            }) {
                return a;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => self.seen.push(l),
                Err(_) => panic!("no line '{prefix}…' on stderr; saw {:?}", self.seen),
            }
        }
    }

    /// Waits (bounded) for the exit; (code, stdout, whole stderr).
    fn wait(mut self, within: Duration) -> (Option<i32>, String, String) {
        let deadline = Instant::now() + within;
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("headroom did not exit within {within:?}");
            }
            thread::sleep(Duration::from_millis(50));
        };
        let mut out = String::new();
        self.child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(2)) {
            self.seen.push(l);
        }
        (status.code(), out, self.seen.join("\n"))
    }
}

/// One GET with a fresh connection: (status code, headers lowercased, body).
fn get(addr: SocketAddr, path: &str) -> (u16, BTreeMap<String, String>, String) {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("read the response");
    let text = String::from_utf8(raw).expect("utf-8 response");
    let (head, body) = text.split_once("\r\n\r\n").expect("a header block");
    let mut lines = head.lines();
    let code = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .expect("a status line");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    (code, headers, body.to_string())
}

/// Checks a Prometheus text exposition (format 0.0.4) line by line: every sample is
/// `name{labels} value` with a float value, every family has HELP and TYPE before its samples.
/// Returns the samples: "name{labels}" -> value.
fn parse_exposition(text: &str) -> BTreeMap<String, f64> {
    let mut help = BTreeSet::new();
    let mut types = BTreeMap::new();
    let mut samples = BTreeMap::new();
    for line in text.lines() {
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, text) = rest.split_once(' ').expect("HELP name text");
            assert!(!text.is_empty(), "{line}");
            help.insert(name.to_string());
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE name kind");
            assert!(
                ["counter", "gauge", "summary", "histogram", "untyped"].contains(&kind),
                "{line}"
            );
            types.insert(name.to_string(), kind.to_string());
            continue;
        }
        assert!(!line.starts_with('#'), "stray comment: {line}");
        let (series, value) = line.rsplit_once(' ').expect("sample: series value");
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("bad value in: {line}")),
        };
        let name = match series.split_once('{') {
            Some((name, labels)) => {
                let labels = labels.strip_suffix('}').expect("labels end with }");
                // k="v" pairs; values here have no comma or escaped quote.
                for pair in labels.split(',') {
                    let (k, v) = pair.split_once('=').expect("label k=v");
                    assert!(
                        !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                        "{line}"
                    );
                    assert!(
                        v.starts_with('"') && v.ends_with('"') && v.len() >= 2,
                        "{line}"
                    );
                }
                name
            }
            None => series,
        };
        assert!(
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "{line}"
        );
        assert!(help.contains(name), "no HELP before {line}");
        let kind = types
            .get(name)
            .unwrap_or_else(|| panic!("no TYPE before {line}"));
        if kind == "counter" {
            assert!(name.ends_with("_total"), "{line}");
            assert!(value >= 0.0, "{line}");
        }
        samples.insert(series.to_string(), value);
    }
    samples
}

/// What an event stream sent: the JSON of each `data:` message (default event), and whether
/// `event: end` came, with everything raw for messages.
#[derive(Default, Debug)]
struct Events {
    updates: Vec<Value>,
    ended: bool,
    keepalives: usize,
    raw: String,
}

/// Reads `GET /events` until `event: end` (then a little more) or `within`.
fn read_events(addr: SocketAddr, within: Duration) -> Events {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).expect("connect");
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    write!(s, "GET /events HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let deadline = Instant::now() + within;
    let mut raw = Vec::new();
    let mut buf = [0u8; 16384];
    let mut ev = Events::default();
    while Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => break,
        }
        if String::from_utf8_lossy(&raw).contains("event: end\n") {
            break;
        }
    }
    ev.raw = String::from_utf8(raw).expect("utf-8 stream");
    let (head, body) = ev.raw.split_once("\r\n\r\n").expect("a header block");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let head_lc = head.to_ascii_lowercase();
    assert!(
        head_lc.contains("content-type: text/event-stream"),
        "{head}"
    );
    assert!(head_lc.contains("cache-control: no-cache"), "{head}");
    for block in body.split("\n\n") {
        let mut event = "message";
        let mut data = String::new();
        for line in block.lines() {
            if line.starts_with(':') {
                ev.keepalives += 1;
            } else if let Some(e) = line.strip_prefix("event: ") {
                event = e;
            } else if let Some(d) = line.strip_prefix("data: ") {
                data.push_str(d);
            }
        }
        match event {
            "end" => ev.ended = true,
            _ if !data.is_empty() => ev
                .updates
                .push(serde_json::from_str(&data).expect("data is JSON")),
            _ => {}
        }
    }
    ev
}

#[test]
fn a_run_serves_its_dashboard_events_and_prometheus_metrics() {
    let server = serve();
    let url = format!("http://{}/", server.local_addr());
    // A gentle constant rate: the server and the generator share two cores with other tests.
    let mut run = Run::start(&[
        &url,
        "--rate",
        "500",
        "-c",
        "2",
        "-t",
        "1",
        "-d",
        "4s",
        "--json",
        "--dashboard",
        "127.0.0.1:0",
        "--metrics-listen",
        "127.0.0.1:0",
        "--linger",
        "2s",
    ]);
    let dash = run.addr_from("headroom: dashboard at http://");
    let metrics = run.addr_from("headroom: metrics at http://");
    assert!(dash.ip().is_loopback() && dash.port() != 0, "{dash}");
    assert_ne!(dash, metrics, "two listeners");
    // Follow the run's events from the start, in the background.
    let events = thread::spawn(move || read_events(dash, Duration::from_secs(20)));

    // The page, and what is not there.
    let (code, headers, page) = get(dash, "/");
    assert_eq!(code, 200);
    assert!(
        headers["content-type"].starts_with("text/html"),
        "{headers:?}"
    );
    for name in CHARTS {
        assert!(
            page.contains(&format!("data-slot=\"{name}\"")),
            "slot {name}"
        );
    }
    assert!(page.contains("new EventSource('/events')"));
    let (code, _, _) = get(dash, "/nope");
    assert_eq!(code, 404);
    let (code, _, _) = get(dash, "/metrics");
    assert_eq!(code, 404, "metrics are on their own listener");
    let (code, _, _) = get(metrics, "/");
    assert_eq!(code, 404, "the page is on the dashboard's listener");

    // Two scrapes 1.5 s apart, both valid, the counters growing.
    thread::sleep(Duration::from_millis(1500));
    let (code, headers, first) = get(metrics, "/metrics");
    assert_eq!(code, 200);
    assert_eq!(
        headers["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let a = parse_exposition(&first);
    thread::sleep(Duration::from_millis(1500));
    let (_, _, second) = get(metrics, "/metrics");
    let b = parse_exposition(&second);
    for name in [
        "headroom_requests_total",
        "headroom_responses_total",
        "headroom_errors_total{kind=\"reset\"}",
        "headroom_responses_by_status_total{class=\"2xx\"}",
        "headroom_bytes_sent_total",
        "headroom_bytes_received_total",
        "headroom_connections_open",
        "headroom_users_active",
        "headroom_interval_latency_seconds{quantile=\"0.5\"}",
        "headroom_interval_latency_seconds{quantile=\"0.9\"}",
        "headroom_interval_latency_seconds{quantile=\"0.99\"}",
        "headroom_interval_latency_seconds{quantile=\"1\"}",
        "headroom_interval_throughput_rps",
        "headroom_run_elapsed_seconds",
        "headroom_run_finished",
    ] {
        assert!(b.contains_key(name), "{name} missing:\n{second}");
    }
    let responses = |m: &BTreeMap<String, f64>| m["headroom_responses_total"];
    assert!(
        responses(&b) > responses(&a) && responses(&a) > 0.0,
        "responses {} then {}",
        responses(&a),
        responses(&b)
    );
    assert!(b["headroom_run_elapsed_seconds"] > a["headroom_run_elapsed_seconds"]);
    assert_eq!(b["headroom_run_finished"], 0.0);
    assert_eq!(b["headroom_connections_open"], 2.0);
    let p99 = b["headroom_interval_latency_seconds{quantile=\"0.99\"}"];
    assert!(p99 > 0.0 && p99 < 1.0, "p99 {p99} s");
    eprintln!(
        "scrapes: responses_total {} then {}, rps {}, p99 {p99} s",
        responses(&a),
        responses(&b),
        b["headroom_interval_throughput_rps"]
    );

    // The stream: updates with every chart, t_s growing, then `end`.
    let ev = events.join().unwrap();
    assert!(ev.ended, "no `event: end`:\n{}", ev.raw);
    assert!(ev.updates.len() >= 2, "{} updates", ev.updates.len());
    let mut last_t = -1.0;
    for u in &ev.updates {
        let charts = u["charts"].as_object().expect("charts");
        for name in CHARTS {
            let svg = charts[name].as_str().expect("an svg string");
            assert!(
                svg.starts_with(&format!("<svg class=\"chart\" data-chart=\"{name}\"")),
                "{name}"
            );
        }
        let t = u["t_s"].as_f64().expect("t_s");
        assert!(t > last_t, "t_s {t} after {last_t}");
        last_t = t;
        assert!(u["figures"]["elapsed"].as_str().unwrap().ends_with(" s"));
    }
    eprintln!(
        "events: {} updates, t_s {:?}",
        ev.updates.len(),
        ev.updates
            .iter()
            .map(|u| u["t_s"].as_f64().unwrap())
            .collect::<Vec<_>>()
    );

    // Lingering: the final figures, the same as the summary's.
    let (_, _, last) = get(metrics, "/metrics");
    let fin = parse_exposition(&last);
    assert_eq!(fin["headroom_run_finished"], 1.0, "{last}");

    let (code, stdout, stderr) = run.wait(Duration::from_secs(20));
    assert_eq!(code, Some(0), "{stderr}");
    let summary: Value = serde_json::from_str(&stdout).expect("summary JSON on stdout");
    assert_eq!(
        fin["headroom_responses_total"],
        summary["responses"].as_f64().unwrap(),
        "the counters sum every interval"
    );
    assert_eq!(
        fin["headroom_requests_total"],
        summary["requests"].as_f64().unwrap()
    );
    assert!(stderr.contains("stay up for 2s (--linger"), "{stderr}");
    // Gone after the linger.
    assert!(TcpStream::connect_timeout(&metrics, Duration::from_millis(500)).is_err());
    server.stop();
}

#[test]
fn a_dashboard_address_not_of_this_machine_is_a_usage_error_and_nothing_runs() {
    let server = serve();
    let url = format!("http://{}/", server.local_addr());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    // Binding 10.0.0.1 (not an address of this machine) fails at once: nothing is sent anywhere.
    let out = headroom()
        .args([
            "run",
            &url,
            "-c",
            "1",
            "-d",
            "2s",
            "-q",
            "--dashboard",
            "10.0.0.1:0",
        ])
        .arg("--out")
        .arg(&dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("cannot listen on 10.0.0.1:0 for --dashboard")
            && stderr.contains("not an address of this machine"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(out.stdout.is_empty());
    assert!(!dir.exists(), "no run directory");
    assert_eq!(server.stats().accepted, 0, "no preflight, no load");

    // Other bad values are usage errors too.
    for args in [
        vec!["--dashboard", "http://x"],
        vec!["--metrics-listen", "99999"],
        vec!["--linger", "5s"],
    ] {
        let out = headroom()
            .args(["run", &url, "-d", "1s", "-q"])
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    }
    assert_eq!(server.stats().accepted, 0);
    server.stop();
}

#[test]
fn the_dashboard_in_headless_chromium_updates_without_errors() {
    use common::chromium::{artifact_dir, Browser};

    let server = serve();
    let url = format!("http://{}/", server.local_addr());
    let mut run = Run::start(&[
        &url,
        "--rate",
        "300",
        "-c",
        "2",
        "-t",
        "1",
        "-d",
        "8s",
        "-q",
        "--dashboard",
        "127.0.0.1:0",
    ]);
    let dash = run.addr_from("headroom: dashboard at http://");
    let mut browser = Browser::launch();
    browser.open(&format!("http://{dash}/"));
    let points = "(function(){var p=document.querySelector('[data-slot=\"throughput\"] \
                  [data-series=\"rps\"]');return p?Number(p.getAttribute('data-points')):0;})()";
    assert!(
        browser.wait_for(
            &format!("document.getElementById('status').textContent==='live' && {points}>=1"),
            Duration::from_secs(10)
        ),
        "the dashboard did not go live: status {:?}",
        browser.eval("document.getElementById('status').textContent")
    );
    let read = "JSON.stringify({status:document.getElementById('status').textContent,\
                elapsed:document.getElementById('fig-elapsed').textContent,\
                throughput:document.getElementById('fig-throughput').textContent,\
                p99:document.getElementById('fig-p99').textContent,\
                users:document.getElementById('fig-users').textContent,\
                charts:document.querySelectorAll('svg[data-chart]').length})";
    let dir = artifact_dir();
    let shot1 = dir.join("dashboard-1.png");
    assert!(browser.screenshot(&shot1) > 10_000);
    let first: Value = serde_json::from_str(browser.eval(read).as_str().unwrap()).unwrap();
    let n1 = browser.eval(points).as_f64().unwrap();
    thread::sleep(Duration::from_millis(2500));
    let shot2 = dir.join("dashboard-2.png");
    assert!(browser.screenshot(&shot2) > 10_000);
    let second: Value = serde_json::from_str(browser.eval(read).as_str().unwrap()).unwrap();
    let n2 = browser.eval(points).as_f64().unwrap();
    eprintln!(
        "dashboard: {first} ({n1} points) then {second} ({n2} points); screenshots {} {}",
        shot1.display(),
        shot2.display()
    );
    assert_eq!(first["charts"], 5);
    assert_ne!(first["elapsed"], "–");
    assert_ne!(first["elapsed"], second["elapsed"]);
    assert!(n2 > n1, "throughput points {n1} then {n2}");
    // At the end of the run the page says so.
    assert!(
        browser.wait_for(
            "document.getElementById('status').textContent==='run finished'",
            Duration::from_secs(15)
        ),
        "status {:?}",
        browser.eval("document.getElementById('status').textContent")
    );
    let errors = browser.errors();
    assert!(errors.is_empty(), "browser errors: {errors:#?}");
    let (code, _, stderr) = run.wait(Duration::from_secs(20));
    assert_eq!(code, Some(0), "{stderr}");
    server.stop();
}
