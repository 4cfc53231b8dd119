//! Load against a real nginx started on loopback by the harness: the run's counts must equal
//! what nginx logged (closed and open models, pipelining, a connection per request, an exact
//! request budget over threads, status classes as errors, source addresses), and the run
//! directory holds what the run measured. (The CLI's side, `--max-error-rate`'s exit codes, is
//! crates/headroom/tests/nginx.rs.)

mod common;

use std::net::IpAddr;
use std::time::Duration;

use common::*;
use headroom_core::spec::RunSpec;

/// `URL -c C --per-user N`.
fn per_user(url: &str, c: u32, n: u64) -> RunSpec {
    let mut spec = url_spec(url);
    spec.connections = Some(c);
    spec.per_user = Some(n);
    spec
}

#[test]
fn closed_c_by_n_count_equals_nginx_log_exactly() {
    let ng = Nginx::start();
    let mut spec = per_user(&ng.url("/"), 20, 500);
    spec.threads = Some(2);
    let f = run(&spec);
    assert_clean(&f);
    let v = &f.summary;
    assert_eq!(v.model, "closed");
    assert_eq!(v.requests, 10_000, "{}", show(v));
    assert_eq!(v.responses, 10_000);
    assert_eq!(v.errors_total, 0);
    assert_eq!(v.status.s2xx, 10_000);
    assert_eq!(v.users_started, 20);
    assert_eq!(v.users_finished, 20);
    assert_eq!(v.connections_peak, 20);
    assert_eq!(ng.logged(), 10_000, "nginx logged a different count");
}

#[test]
fn pipelined_and_connection_per_request_counts_match_nginx() {
    let ng = Nginx::start();
    let mut spec = per_user(&ng.url("/"), 3, 101);
    spec.pipeline = 8;
    let v = run(&spec).summary;
    assert_eq!(v.responses, 303, "{}", show(&v));
    assert_eq!(v.errors_total, 0);
    assert_eq!(v.pipeline, 8);
    assert_eq!(v.connects, 3, "pipelining stays on one connection per user");
    assert_eq!(ng.logged(), 303);

    let mut spec = per_user(&ng.url("/"), 4, 25);
    spec.no_keepalive = true;
    let v = run(&spec).summary;
    assert_eq!(v.responses, 100, "{}", show(&v));
    assert_eq!(v.connects, 100, "a connection per request");
    assert_eq!(v.errors_total, 0);
    assert_eq!(ng.logged(), 403);
}

#[test]
fn request_budget_is_exact_across_threads() {
    let ng = Nginx::start();
    let mut spec = url_spec(&ng.url("/"));
    spec.connections = Some(7);
    spec.requests = Some(1001);
    spec.threads = Some(2);
    let v = run(&spec).summary;
    assert_eq!(v.requests, 1001, "{}", show(&v));
    assert_eq!(v.responses, 1001);
    assert_eq!(ng.logged(), 1001);
}

/// 4xx and 5xx replies are errors of their class (what `--max-error-rate` is checked against:
/// its exit codes are the CLI's, crates/headroom/tests/nginx.rs), and a run in which every
/// reply was one succeeded in nothing, saying what every reply was (issue 26).
#[test]
fn http_status_classes_count_as_errors() {
    let ng = Nginx::start();
    let f = run(&per_user(&ng.url("/missing"), 2, 10));
    let v = &f.summary;
    assert_eq!(v.status.s4xx, 20, "{}", show(v));
    assert_eq!(v.errors.http_4xx, 20);
    assert_eq!(v.error_rate, 1.0);
    assert_nothing_succeeded(&f);

    let f = run(&per_user(&ng.url("/fail"), 1, 5));
    assert_eq!(f.summary.errors.http_5xx, 5, "{}", show(&f.summary));
    assert_nothing_succeeded(&f);
    let line = f.nothing_succeeded.as_deref().unwrap();
    assert!(line.contains("5 replies, all 503"), "{line}");

    let f = run(&per_user(&ng.url("/"), 1, 5));
    assert_clean(&f);
    assert_eq!(f.summary.error_rate, 0.0, "{}", show(&f.summary));
}

#[test]
fn open_model_arrivals_and_run_directory() {
    let ng = Nginx::start();
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    let mut spec = url_spec(&ng.url("/"));
    spec.arrival_rate = Some(200.0);
    spec.per_user = Some(3);
    spec.think = Some("10ms".into());
    spec.duration = secs(3);
    spec.interval = Duration::from_millis(500);
    let f = run_into(&spec, &out_dir);
    let v = &f.summary;
    assert_eq!(v.model, "open");
    // 600 expected arrivals; a Poisson count has sd ~24.5, so +-6 sd.
    let started = v.users_started;
    assert!((450..=750).contains(&started), "users_started {started}");
    let finished = v.users_finished;
    assert!(
        finished + 60 >= started,
        "most users finish: {finished} of {started}"
    );
    assert_eq!(v.errors_total, 0);
    let requests = v.requests;
    assert!(
        requests >= 3 * finished && requests <= 3 * started,
        "{requests}"
    );
    assert_eq!(ng.logged() as u64, v.responses + v.in_flight);

    // The run directory: summary.json equal to the run's summary, one interval line per
    // 500ms, an hlog.
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("summary.json")).unwrap())
            .unwrap();
    let ours: serde_json::Value = serde_json::from_str(&show(v)).unwrap();
    assert_eq!(s, ours);
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(out_dir.join("intervals.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!((6..=8).contains(&lines.len()), "{} intervals", lines.len());
    let sum: u64 = lines.iter().map(|l| l["responses"].as_u64().unwrap()).sum();
    assert_eq!(sum, v.responses, "intervals add up to the total");
    let hlog = std::fs::read_to_string(out_dir.join("latency.hlog")).unwrap();
    assert!(hlog.contains("#[Histogram log format version 1.3]"));
    assert!(
        hlog.lines()
            .filter(|l| l.starts_with("Tag=uncorrected,"))
            .count()
            >= 6
    );
    for key in [
        "requests",
        "responses",
        "errors",
        "users_started",
        "throughput_rps",
        "latency_us",
        "latency_uncorrected_us",
        "connect_us",
        "connections_peak",
        "duration_s",
        "cpu_user_s",
        "cpu_sys_s",
        "max_rss_kb",
    ] {
        assert!(!s[key].is_null(), "summary.json lacks {key}");
    }
    for p in ["mean", "p50", "p90", "p99", "p999", "max"] {
        assert!(s["latency_us"][p].is_number(), "latency_us.{p}");
    }
}

#[test]
fn bind_spreads_connections_over_source_addresses() {
    let ng = Nginx::start();
    let mut spec = per_user(&ng.url("/"), 6, 10);
    spec.no_keepalive = true;
    // --bind 127.0.0.2-127.0.0.4
    spec.bind = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
        .iter()
        .map(|a| a.parse::<IpAddr>().unwrap())
        .collect();
    let v = run(&spec).summary;
    assert_eq!(v.errors_total, 0, "{:?}", v.errors);
    let sources = ng.logged_sources();
    assert_eq!(sources.len(), 60);
    for ip in ["127.0.0.2", "127.0.0.3", "127.0.0.4"] {
        let n = sources.iter().filter(|s| *s == ip).count();
        assert!(n >= 10, "{ip} used {n} times of 60: {sources:?}");
    }
    assert!(sources
        .iter()
        .all(|s| s.starts_with("127.0.0.") && s != "127.0.0.1"));
}
