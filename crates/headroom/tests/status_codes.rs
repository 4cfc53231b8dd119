//! Exact status codes and `--expect-status` (issue 16), the CLI's side: the exit code, the human
//! summary and the usage errors, against the reference server in this process (`headroom
//! serve`'s `/status/CODE` answers with the code asked for). The figures (every count against
//! the requests sent, the run directory's intervals, CSV and report) are
//! crates/headroom-run/tests/status_codes.rs.

mod common;

use common::*;

/// Time bound of every load below: far above what each needs, so a hang fails the test.
const BOUND: &str = "20s";

/// The exit code follows what succeeded: a run with some success exits 0 whatever its errors;
/// one where every reply is an error exits 1 (issue 26: no request succeeded), and so does one
/// over `--max-error-rate`. (The figures themselves are checked in
/// crates/headroom-run/tests/status_codes.rs.)
#[test]
fn issue16_exit_codes_follow_the_codes_and_expect_status() {
    let s = serve();
    let url = |code: u16| format!("http://{}/status/{code}", s.local_addr());
    let load = ["-c", "2", "-n", "40", "-d", BOUND];
    for (code, expect, extra, exit) in [
        (200u16, None, &[][..], 0),
        (204, None, &[][..], 0),
        (404, None, &[][..], 1),
        (503, None, &[][..], 1),
        // 404 not expected: every reply fails.
        (404, Some("200"), &[][..], 1),
        // ... and --max-error-rate trips on them, as on 4xx/5xx.
        (404, Some("200"), &["--max-error-rate", "1%"][..], 1),
        // An expected 404 is no error at all.
        (404, Some("200,404"), &[][..], 0),
    ] {
        let mut args: Vec<&str> = load.to_vec();
        if let Some(e) = expect {
            args.extend(["--expect-status", e]);
        }
        args.extend(extra);
        let (v, out) = run_json(&url(code), &args);
        assert_eq!(out.status.code(), Some(exit), "{code} {args:?}: {v:#}");
        assert_eq!(num(&v, &["responses"]), 40, "{code} {args:?}: {v:#}");
        if exit == 1 {
            let err = String::from_utf8_lossy(&out.stderr);
            let why = if extra.is_empty() {
                "no request succeeded"
            } else {
                "exceeds --max-error-rate"
            };
            assert!(err.contains(why), "{code} {args:?}: {err}");
        }
    }
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
