//! Scenario files, the CLI's side: a scenario's errors are located and exit 2, a flag that
//! describes its own load is refused, and a broken threshold makes `headroom run` exit 1 and
//! say so. The scenario runs themselves (the examples, thresholds' values, arrivals, session
//! weights, SURGE sessions, a failed request's session) are
//! crates/headroom-run/tests/scenarios.rs.

mod common;

use std::path::{Path, PathBuf};

use common::{headroom, serve};

fn write_scenario(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// A broken threshold: exit 1 and a line on stderr. (The thresholds' values and list are
/// crates/headroom-run/tests/scenarios.rs.)
#[test]
fn a_broken_threshold_exits_1_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let server = serve();
    let f = write_scenario(
        tmp.path(),
        "t.yaml",
        "load: {users: [{count: 2}]}\n\
         sessions: [{name: s, steps: [{request: {name: slow, path: /sleep/20}}]}]\n\
         thresholds:\n  \"p99(slow)\": \"< 5ms\"\n  error_rate: \"< 1%\"\n",
    );
    let out = headroom()
        .arg("run")
        .arg(&f)
        .args(["--target", &server.local_addr().to_string()])
        .args(["-d", "1s", "-q"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("1 threshold(s) broken"), "{stderr}");
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
