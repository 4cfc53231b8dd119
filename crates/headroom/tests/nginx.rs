//! `--max-error-rate`'s exit codes against a real nginx started on loopback by the harness: a
//! run over the limit exits 1 saying so, and a limit of 0 lets a run without errors exit 0.
//! (The figures, headroom's counts against what nginx logged, are
//! crates/headroom-run/tests/nginx.rs.)

mod common;
use common::*;

#[test]
fn max_error_rate_trips_on_http_errors_and_zero_passes_a_clean_run() {
    let ng = Nginx::start();
    let (v, out) = run_json(
        &ng.url("/missing"),
        &["-c", "2", "--per-user", "10", "--max-error-rate", "1%"],
    );
    assert_eq!(err(&v, "http_4xx"), 20, "{v}");
    assert_eq!(
        out.status.code(),
        Some(1),
        "an error rate over the limit exits 1"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("exceeds --max-error-rate"), "{stderr}");
    let (_, out) = run_json(
        &ng.url("/"),
        &["-c", "1", "--per-user", "5", "--max-error-rate", "0"],
    );
    assert_eq!(out.status.code(), Some(0));
}
