//! The compatibility rule, read side: a file of an older headroom reads (a missing key is its
//! default), a newer one's unknown keys are ignored, and what the writer writes reads back
//! equal.

use headroom_format::{IntervalLine, Load, RunSummary};

/// A summary.json with the keys of the first format-1 release only (2026-11-22: no TLS, no
/// HTTP/2, no status codes, no served connections, ten error kinds).
const FIRST_RELEASE: &str = r#"{
  "bytes_received": 2000, "bytes_sent": 1000, "command": "headroom run http://h/ -c 2",
  "connect_us": {"count": 2, "max": 90, "mean": 80.0, "min": 70, "p50": 80, "p90": 90,
                 "p99": 90, "p999": 90, "stdev": 10.0},
  "connections_peak": 2, "connects": 2, "cpu_sys_s": 0.5, "cpu_user_s": 0.25,
  "duration_s": 1.0, "error_rate": 0.0,
  "errors": {"closed": 0, "connect_timeout": 0, "http_4xx": 0, "http_5xx": 0,
             "local_resource": 0, "other": 0, "protocol": 0, "refused": 0, "reset": 1,
             "timeout": 0},
  "errors_total": 1, "format_version": 1, "headroom_version": "0.1.0", "in_flight": 0,
  "interrupted": false, "keepalive": true,
  "latency_us": {"count": 10, "max": 900, "mean": 500.0, "min": 100, "p50": 500, "p90": 800,
                 "p99": 900, "p999": 900, "stdev": 50.0},
  "latency_uncorrected_us": {"count": 10, "max": 900, "mean": 500.0, "min": 100, "p50": 500,
                             "p90": 800, "p99": 900, "p999": 900, "stdev": 50.0},
  "load": {"name": "closed", "per_user": null, "think": null, "users": 2},
  "max_rss_kb": 4096, "model": "closed", "pipeline": 1, "requests": 10, "responses": 10,
  "started_at": "2026-11-22T10:00:00.000Z",
  "status": {"1xx": 0, "2xx": 10, "3xx": 0, "4xx": 0, "5xx": 0, "other": 0},
  "target": "http://h/", "threads": 1, "throughput_rps": 10.0, "users_finished": 0,
  "users_started": 2
}"#;

#[test]
fn a_first_release_summary_reads_with_defaults_for_what_came_later() {
    let s: RunSummary = serde_json::from_str(FIRST_RELEASE).expect("an old summary reads");
    assert_eq!(s.responses, 10);
    assert_eq!(s.errors.reset, 1);
    assert_eq!(s.latency_us.p99, 900);
    assert_eq!(
        s.load,
        Load::Closed {
            users: 2,
            per_user: None,
            think: None,
            ramp: Vec::new()
        }
    );
    // Later fields: their defaults.
    assert!(s.status_codes.is_empty());
    assert_eq!(s.errors.flood, 0);
    assert_eq!(s.served_us.count, 0);
    assert_eq!(s.tcp_connected_peak, 0);
    assert_eq!(s.tls, None);
    assert_eq!(s.protocol, "");
}

#[test]
fn unknown_keys_and_load_models_of_a_newer_file_are_ignored() {
    let mut v: serde_json::Value = serde_json::from_str(FIRST_RELEASE).unwrap();
    v["brand_new"] = serde_json::json!({"x": [1, 2]});
    v["latency_us"]["p9999"] = 950.into();
    v["load"] = serde_json::json!({"name": "wave", "period_s": 10});
    let s: RunSummary = serde_json::from_value(v).expect("a newer summary reads");
    assert_eq!(s.latency_us.p99, 900);
    assert_eq!(s.load, Load::Other);
}

#[test]
fn a_wrong_type_is_an_error_not_a_default() {
    let mut v: serde_json::Value = serde_json::from_str(FIRST_RELEASE).unwrap();
    v["responses"] = "ten".into();
    let e = serde_json::from_value::<RunSummary>(v).unwrap_err();
    assert!(e.to_string().contains("expected u64"), "{e}");
}

#[test]
fn an_old_interval_line_reads_and_a_written_one_reads_back_equal() {
    let old = r#"{"index": 3, "t_s": 3.0, "length_s": 1.0, "requests": 5, "responses": 5,
        "rps": 5.0, "errors": {"reset": 0}, "status": {"2xx": 5},
        "latency_us": {"mean": 1.5, "p50": 1, "p90": 2, "p99": 3, "max": 4}}"#;
    let l: IntervalLine = serde_json::from_str(old).unwrap();
    assert_eq!((l.index, l.responses, l.latency_us.p99), (3, 5, 3));
    assert!(l.status_codes.is_empty());
    assert_eq!(l.server, None);

    let written = IntervalLine {
        status_codes: [(200, 5), (503, 1)].into_iter().collect(),
        tcp_connected_peak: 9,
        ..l
    };
    let text = serde_json::to_string(&serde_json::to_value(&written).unwrap()).unwrap();
    assert!(
        text.contains(r#""status_codes":{"200":5,"503":1}"#),
        "{text}"
    );
    let back: IntervalLine = serde_json::from_str(&text).unwrap();
    assert_eq!(back, written);
}
