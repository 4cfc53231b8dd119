//! Exact status codes and `--expect-status` (issue 16), against the reference server in this
//! process (`headroom serve`'s `/status/CODE` answers with the code asked for). Every count is
//! checked against the requests sent, which `-n` makes exact. (The CLI's side, its exit codes,
//! human summary and usage errors, is crates/headroom/tests/status_codes.rs.)

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use headroom_run::interval::IntervalLine;

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
        let f = run(&counted(&url, 3, n));
        let v = &f.summary;
        // A run with some success is clean whatever its errors; one where every reply is an
        // error succeeded in nothing (issue 26: `headroom run` exits 1).
        if code >= 400 {
            assert_nothing_succeeded(&f);
        } else {
            assert_clean(&f);
        }
        assert_eq!(v.requests, n, "{code}: {}", show(v));
        assert_eq!(v.responses, n, "{code}: {}", show(v));
        assert_eq!(v.status_codes, BTreeMap::from([(code, n)]), "{code}");
        let classes = [
            v.status.s1xx,
            v.status.s2xx,
            v.status.s3xx,
            v.status.s4xx,
            v.status.s5xx,
        ];
        for (k, got) in classes.into_iter().enumerate() {
            let want = if (k as u16 + 1) == code / 100 { n } else { 0 };
            assert_eq!(got, want, "{code}: class {}xx: {}", k + 1, show(v));
        }
        assert_eq!(v.status.other, 0, "{code}: {}", show(v));
        // Without --expect-status, as before: 4xx and 5xx are errors of their class.
        let (e4, e5) = match code {
            400..=499 => (n, 0),
            500..=599 => (0, n),
            _ => (0, 0),
        };
        assert_eq!(v.errors.http_4xx, e4, "{code}: {}", show(v));
        assert_eq!(v.errors.http_5xx, e5, "{code}: {}", show(v));
        assert_eq!(v.errors_total, e4 + e5, "{code}: {}", show(v));
        assert_eq!(v.errors.total(), e4 + e5, "{code}: {}", show(v));
        assert_eq!(v.errors.unexpected_status, 0, "{code}: {}", show(v));
        assert_eq!(v.expect_status, None, "{code}: {}", show(v));
    }
}

#[test]
fn issue16_expect_status_turns_unexpected_codes_into_one_error_each() {
    let s = serve();
    let n = 40u64;
    let load = |code: u16, expect: &str| {
        let mut spec = counted(&format!("http://{}/status/{code}", s.local_addr()), 2, n);
        spec.expect_status = Some(expect.into());
        spec
    };

    // 404 not expected: unexpected_status, not also http_4xx; no request succeeded.
    let f = run(&load(404, "200"));
    let v = &f.summary;
    assert_nothing_succeeded(&f);
    assert_eq!(v.status_codes, BTreeMap::from([(404, n)]), "{}", show(v));
    assert_eq!(v.status.s4xx, n);
    assert_eq!(v.errors.unexpected_status, n, "{}", show(v));
    assert_eq!(v.errors.http_4xx, 0, "{}", show(v));
    assert_eq!(v.errors_total, n, "{}", show(v));
    assert_eq!(v.error_rate, 1.0, "each reply fails once: {}", show(v));
    assert_eq!(v.expect_status.as_deref(), Some("200"));

    // An expected 404 is no error at all.
    let f = run(&load(404, "200,404"));
    let v = &f.summary;
    assert_clean(&f);
    assert_eq!(v.errors_total, 0, "{}", show(v));
    assert_eq!(v.error_rate, 0.0, "{}", show(v));
    assert_eq!(v.status_codes, BTreeMap::from([(404, n)]), "{}", show(v));
    assert_eq!(v.expect_status.as_deref(), Some("200,404"));

    // A 200 outside the set fails too, and a class and ranges work.
    let f = run(&load(200, "204"));
    assert_eq!(
        f.summary.errors.unexpected_status,
        n,
        "{}",
        show(&f.summary)
    );
    assert_nothing_succeeded(&f);
    let f = run(&load(503, "2xx,400-499"));
    let v = &f.summary;
    assert_eq!(v.errors.unexpected_status, n, "{}", show(v));
    assert_eq!(v.errors.http_5xx, 0, "{}", show(v));
    assert_eq!(v.expect_status.as_deref(), Some("200-299,400-499"));
}

/// Several codes in one run (a scenario's requests), through the whole run directory: every
/// interval line's codes add up to the summary's, and the CSV and the report show them.
#[test]
fn issue16_codes_of_a_scenario_through_intervals_csv_and_report() {
    let s = serve();
    let addr = s.local_addr();
    // 5 users arrive over 1 s, each runs the 5 requests once.
    let mut spec = scenario_spec(
        &format!(
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
        None,
    );
    spec.duration = secs(BOUND);
    spec.interval = Duration::from_millis(100);
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let f = run_into(&spec, &run);
    assert_clean(&f);
    let v = &f.summary;
    let want = BTreeMap::from([(200u16, 5u64), (404, 5), (429, 10), (503, 5)]);
    assert_eq!(v.status_codes, want, "{}", show(v));
    assert_eq!(v.requests, 25, "{}", show(v));
    // A scenario keeps the classes' errors (no --expect-status there).
    assert_eq!(v.errors.http_4xx, 15, "{}", show(v));
    assert_eq!(v.errors.http_5xx, 5, "{}", show(v));
    assert_eq!(v.errors_total, 20, "{}", show(v));

    let lines = std::fs::read_to_string(run.join("intervals.jsonl")).unwrap();
    let mut sum = BTreeMap::<u16, u64>::new();
    for line in lines.lines() {
        let raw: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(
            raw["status_codes"].is_object(),
            "every line has status_codes: {line}"
        );
        let iv: IntervalLine = serde_json::from_str(line).unwrap();
        for (k, n) in iv.status_codes {
            *sum.entry(k).or_default() += n;
        }
    }
    assert_eq!(sum, want, "{lines}");

    let csv = std::fs::read_to_string(run.join("intervals.csv")).unwrap();
    let head: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    for (code, n) in &want {
        let col = head
            .iter()
            .position(|h| *h == format!("status_{code}"))
            .unwrap_or_else(|| panic!("no status_{code} column: {head:?}"));
        let total: u64 = csv
            .lines()
            .skip(1)
            .map(|l| l.split(',').nth(col).unwrap().parse::<u64>().unwrap())
            .sum();
        assert_eq!(total, *n, "{code}");
    }

    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(html.contains("<h3>Responses by status code</h3>"), "report");
    assert!(
        html.contains("<tr><td>429</td><td class=\"n\">10</td></tr>"),
        "report"
    );
}
