//! Exact status codes and `--expect-status` (issue 16), against the reference server in this
//! process (`headroom serve`'s `/status/CODE` answers with the code asked for). Every count is
//! checked against the requests sent, which `-n` makes exact.

mod common;

use common::*;
use serde_json::json;

/// Time bound of every load below: far above what each needs, so a hang fails the test.
const BOUND: &str = "20s";

#[test]
fn issue16_exact_codes_in_summary_equal_the_requests_sent() {
    let s = serve();
    for (code, n) in [
        (200u16, 57u64),
        (204, 13),
        (401, 31),
        (404, 40),
        (429, 23),
        (503, 11),
    ] {
        let url = format!("http://{}/status/{code}", s.local_addr());
        let (v, out) = run_json(&url, &["-c", "3", "-n", &n.to_string(), "-d", BOUND]);
        // A run with some success exits 0 whatever its errors; one where every reply is an
        // error exits 1 (issue 26: no request succeeded).
        let all_failed = code >= 400;
        assert_eq!(
            out.status.code(),
            Some(if all_failed { 1 } else { 0 }),
            "{code}: {v:#}"
        );
        assert_eq!(num(&v, &["requests"]), n, "{code}: {v:#}");
        assert_eq!(num(&v, &["responses"]), n, "{code}: {v:#}");
        assert_eq!(
            v["status_codes"],
            json!({ code.to_string(): n }),
            "{code}: {v:#}"
        );
        let class = format!("{}xx", code / 100);
        assert_eq!(num(&v, &["status", &class]), n, "{code}: {v:#}");
        // Without --expect-status, as before: 4xx and 5xx are errors of their class.
        let kind = match code {
            400..=499 => Some("http_4xx"),
            500..=599 => Some("http_5xx"),
            _ => None,
        };
        let failed = if kind.is_some() { n } else { 0 };
        assert_eq!(num(&v, &["errors_total"]), failed, "{code}: {v:#}");
        if let Some(kind) = kind {
            assert_eq!(err(&v, kind), n, "{code}: {v:#}");
        }
        assert_eq!(err(&v, "unexpected_status"), 0, "{code}: {v:#}");
        assert!(v["expect_status"].is_null(), "{code}: {v:#}");
    }
}

#[test]
fn issue16_expect_status_turns_unexpected_codes_into_one_error_each() {
    let s = serve();
    let url = |code: u16| format!("http://{}/status/{code}", s.local_addr());
    let n = 40u64;
    let load = ["-c", "2", "-n", "40", "-d", BOUND];

    // 404 not expected: unexpected_status, not also http_4xx; no request succeeded: exit 1.
    let (v, out) = run_json(
        &url(404),
        &[&load[..], &["--expect-status", "200"]].concat(),
    );
    assert_eq!(out.status.code(), Some(1), "{v:#}");
    assert_eq!(v["status_codes"], json!({"404": n}), "{v:#}");
    assert_eq!(num(&v, &["status", "4xx"]), n);
    assert_eq!(err(&v, "unexpected_status"), n, "{v:#}");
    assert_eq!(err(&v, "http_4xx"), 0, "{v:#}");
    assert_eq!(num(&v, &["errors_total"]), n, "{v:#}");
    assert_eq!(v["error_rate"], 1.0, "each reply fails once: {v:#}");
    assert_eq!(v["expect_status"], "200");

    // ... and --max-error-rate trips on them, as on 4xx/5xx.
    let (v, out) = run_json(
        &url(404),
        &[
            &load[..],
            &["--expect-status", "200", "--max-error-rate", "1%"],
        ]
        .concat(),
    );
    assert_eq!(out.status.code(), Some(1), "{v:#}");

    // An expected 404 is no error at all.
    let (v, out) = run_json(
        &url(404),
        &[&load[..], &["--expect-status", "200,404"]].concat(),
    );
    assert_eq!(out.status.code(), Some(0), "{v:#}");
    assert_eq!(num(&v, &["errors_total"]), 0, "{v:#}");
    assert_eq!(v["error_rate"], 0.0, "{v:#}");
    assert_eq!(v["status_codes"], json!({"404": n}), "{v:#}");
    assert_eq!(v["expect_status"], "200,404");

    // A 200 outside the set fails too, and a class and ranges work.
    let (v, _) = run_json(
        &url(200),
        &[&load[..], &["--expect-status", "204"]].concat(),
    );
    assert_eq!(err(&v, "unexpected_status"), n, "{v:#}");
    let (v, _) = run_json(
        &url(503),
        &[&load[..], &["--expect-status", "2xx,400-499"]].concat(),
    );
    assert_eq!(err(&v, "unexpected_status"), n, "{v:#}");
    assert_eq!(err(&v, "http_5xx"), 0, "{v:#}");
    assert_eq!(v["expect_status"], "200-299,400-499");
}

#[test]
fn issue16_human_summary_has_a_line_per_code() {
    let s = serve();
    let out = run_plain(
        &format!("http://{}/status/404", s.local_addr()),
        &["-c", "2", "-n", "40", "-d", BOUND, "--expect-status", "200"],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    // Every reply unexpected: the summary is printed, and the run exits 1 (issue 26).
    assert_eq!(out.status.code(), Some(1), "{text}");
    for needle in [
        "4xx 40  (expected: 200)",
        "    [404]      40 responses\n",
        "unexpected_status 40",
    ] {
        assert!(text.contains(needle), "summary lacks {needle:?}:\n{text}");
    }
    assert!(!text.contains("http_4xx"), "{text}");
}

/// Several codes in one run (a scenario's requests), through the whole run directory: every
/// interval line's codes add up to the summary's, and the CSV and the report show them.
#[test]
fn issue16_codes_of_a_scenario_through_intervals_csv_and_report() {
    let s = serve();
    let addr = s.local_addr();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("codes.yaml");
    // 5 users arrive over 1 s, each runs the 5 requests once.
    std::fs::write(
        &file,
        format!(
            r#"
servers: [{{host: {host}, port: {port}}}]
load: {{phases: [{{duration: 1s, arrival_rate: 5, arrival: constant}}]}}
sessions:
  - name: s
    steps:
      - request: GET /
      - request: GET /status/404
      - request: GET /status/429
      - request: GET /status/429
      - request: GET /status/503
"#,
            host = addr.ip(),
            port = addr.port()
        ),
    )
    .unwrap();
    let run = dir.path().join("run");
    let (v, out) = run_json(
        file.to_str().unwrap(),
        &[
            "-d",
            BOUND,
            "--interval",
            "100ms",
            "--out",
            run.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{v:#}");
    let want = json!({"200": 5, "404": 5, "429": 10, "503": 5});
    assert_eq!(v["status_codes"], want, "{v:#}");
    assert_eq!(num(&v, &["requests"]), 25, "{v:#}");
    // A scenario keeps the classes' errors (no --expect-status there).
    assert_eq!(err(&v, "http_4xx"), 15, "{v:#}");
    assert_eq!(err(&v, "http_5xx"), 5, "{v:#}");

    let lines = std::fs::read_to_string(run.join("intervals.jsonl")).unwrap();
    let mut sum = std::collections::BTreeMap::<String, u64>::new();
    for line in lines.lines() {
        let iv: serde_json::Value = serde_json::from_str(line).unwrap();
        let codes = iv["status_codes"]
            .as_object()
            .expect("every line has status_codes");
        for (k, n) in codes {
            *sum.entry(k.clone()).or_default() += n.as_u64().unwrap();
        }
    }
    assert_eq!(serde_json::to_value(&sum).unwrap(), want, "{lines}");

    let csv = std::fs::read_to_string(run.join("intervals.csv")).unwrap();
    let head: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    for code in ["200", "404", "429", "503"] {
        let col = head
            .iter()
            .position(|h| *h == format!("status_{code}"))
            .unwrap_or_else(|| panic!("no status_{code} column: {head:?}"));
        let total: u64 = csv
            .lines()
            .skip(1)
            .map(|l| l.split(',').nth(col).unwrap().parse::<u64>().unwrap())
            .sum();
        assert_eq!(total, want[code].as_u64().unwrap(), "{code}");
    }

    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(html.contains("<h3>Responses by status code</h3>"), "report");
    assert!(
        html.contains("<tr><td>429</td><td class=\"n\">10</td></tr>"),
        "report"
    );
}

#[test]
fn issue16_expect_status_is_for_url_runs_and_checks_its_codes() {
    let s = serve();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.yaml");
    std::fs::write(
        &file,
        "load: {users: [{count: 1}]}\nsessions: [{name: s, steps: [{request: GET /}]}]\n",
    )
    .unwrap();
    let target = s.local_addr().to_string();
    let out = run_plain(
        file.to_str().unwrap(),
        &["--target", &target, "--expect-status", "200"],
    );
    assert_eq!(out.status.code(), Some(2));
    let line = one_line(&out);
    assert!(
        line.contains("--expect-status applies to URL runs"),
        "{line}"
    );

    let url = format!("http://{target}/");
    for (bad, says) in [
        ("600", "not a status code from 100 to 599"),
        ("2xx,", "empty item"),
        ("299-200", "runs backwards"),
        ("9xx", "not a status class"),
    ] {
        let out = run_plain(&url, &["--expect-status", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let line = one_line(&out);
        assert!(line.contains(says), "{bad}: {line}");
    }
}
