//! Load against a real nginx started on loopback by the harness: headroom's counts must equal
//! what nginx logged.

mod common;
use common::*;

#[test]
fn closed_c_by_n_count_equals_nginx_log_exactly() {
    let ng = Nginx::start();
    let (v, out) = run_json(&ng.url("/"), &["-c", "20", "--per-user", "500", "-t", "2"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(v["model"], "closed");
    assert_eq!(v["requests"], 10_000, "{v}");
    assert_eq!(v["responses"], 10_000);
    assert_eq!(v["errors_total"], 0);
    assert_eq!(v["status"]["2xx"], 10_000);
    assert_eq!(v["users_started"], 20);
    assert_eq!(v["users_finished"], 20);
    assert_eq!(v["connections_peak"], 20);
    assert_eq!(ng.logged(), 10_000, "nginx logged a different count");
}

#[test]
fn pipelined_and_connection_per_request_counts_match_nginx() {
    let ng = Nginx::start();
    let (v, _) = run_json(
        &ng.url("/"),
        &["-c", "3", "--per-user", "101", "--pipeline", "8"],
    );
    assert_eq!(v["responses"], 303, "{v}");
    assert_eq!(v["errors_total"], 0);
    assert_eq!(v["pipeline"], 8);
    assert_eq!(
        v["connects"], 3,
        "pipelining stays on one connection per user"
    );
    assert_eq!(ng.logged(), 303);

    let (v, _) = run_json(
        &ng.url("/"),
        &["-c", "4", "--per-user", "25", "--no-keepalive"],
    );
    assert_eq!(v["responses"], 100, "{v}");
    assert_eq!(v["connects"], 100, "a connection per request");
    assert_eq!(v["errors_total"], 0);
    assert_eq!(ng.logged(), 403);
}

#[test]
fn request_budget_is_exact_across_threads() {
    let ng = Nginx::start();
    let (v, _) = run_json(&ng.url("/"), &["-c", "7", "-n", "1001", "-t", "2"]);
    assert_eq!(v["requests"], 1001, "{v}");
    assert_eq!(v["responses"], 1001);
    assert_eq!(ng.logged(), 1001);
}

#[test]
fn http_status_classes_count_as_errors_and_trip_max_error_rate() {
    let ng = Nginx::start();
    let (v, out) = run_json(
        &ng.url("/missing"),
        &["-c", "2", "--per-user", "10", "--max-error-rate", "1%"],
    );
    assert_eq!(v["status"]["4xx"], 20, "{v}");
    assert_eq!(err(&v, "http_4xx"), 20);
    assert_eq!(v["error_rate"], 1.0);
    assert_eq!(
        out.status.code(),
        Some(1),
        "an error rate over the limit exits 1"
    );
    // No limit given, but no request succeeded: exit 1 saying what every reply was (issue 26).
    let (v, out) = run_json(&ng.url("/fail"), &["-c", "1", "--per-user", "5"]);
    assert_eq!(err(&v, "http_5xx"), 5);
    assert_eq!(out.status.code(), Some(1));
    assert!(one_line(&out).contains("5 replies, all 503"));
    let (_, out) = run_json(
        &ng.url("/"),
        &["-c", "1", "--per-user", "5", "--max-error-rate", "0"],
    );
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn open_model_arrivals_and_run_directory() {
    let ng = Nginx::start();
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    let (v, _) = run_json(
        &ng.url("/"),
        &[
            "--arrival-rate",
            "200",
            "--per-user",
            "3",
            "--think",
            "10ms",
            "-d",
            "3s",
            "--interval",
            "500ms",
            "--out",
            out_dir.to_str().unwrap(),
        ],
    );
    assert_eq!(v["model"], "open");
    // 600 expected arrivals; a Poisson count has sd ~24.5, so +-6 sd.
    let started = v["users_started"].as_u64().unwrap();
    assert!((450..=750).contains(&started), "users_started {started}");
    let finished = v["users_finished"].as_u64().unwrap();
    assert!(
        finished + 60 >= started,
        "most users finish: {finished} of {started}"
    );
    assert_eq!(v["errors_total"], 0);
    let requests = v["requests"].as_u64().unwrap();
    assert!(
        requests >= 3 * finished && requests <= 3 * started,
        "{requests}"
    );
    assert_eq!(
        ng.logged() as u64,
        v["responses"].as_u64().unwrap() + v["in_flight"].as_u64().unwrap()
    );

    // The run directory: summary.json equal to stdout, one interval line per 500ms, an hlog.
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("summary.json")).unwrap())
            .unwrap();
    assert_eq!(s, v);
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(out_dir.join("intervals.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!((6..=8).contains(&lines.len()), "{} intervals", lines.len());
    let sum: u64 = lines.iter().map(|l| l["responses"].as_u64().unwrap()).sum();
    assert_eq!(
        sum,
        v["responses"].as_u64().unwrap(),
        "intervals add up to the total"
    );
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
        assert!(!v[key].is_null(), "summary lacks {key}");
    }
    for p in ["mean", "p50", "p90", "p99", "p999", "max"] {
        assert!(v["latency_us"][p].is_number(), "latency_us.{p}");
    }
}

#[test]
fn bind_spreads_connections_over_source_addresses() {
    let ng = Nginx::start();
    let (v, _) = run_json(
        &ng.url("/"),
        &[
            "-c",
            "6",
            "--per-user",
            "10",
            "--no-keepalive",
            "--bind",
            "127.0.0.2-127.0.0.4",
        ],
    );
    assert_eq!(v["errors_total"], 0, "{}", v["errors"]);
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
