//! Ramps of a closed population (issue 16), the CLI's side: contradictory ramps are usage errors
//! (exit 2, one line), before any load. How users ramp up and down is
//! crates/headroom-run/tests/ramp.rs.

mod common;

use common::headroom;

/// Contradictions are refused with a one-line usage error (exit 2), before any load.
#[test]
fn ramp_contradictions_are_usage_errors() {
    for args in [
        &["-c", "10", "--ramp-up", "5s", "--rate", "100"][..],
        &["--ramp-up", "5s", "--arrival-rate", "10"][..],
        &["--stage", "5s:100", "-c", "20"][..],
    ] {
        let out = headroom()
            .args(["run", "http://127.0.0.1:9/"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    }
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("bad.yaml");
    std::fs::write(
        &file,
        "load:\n  users:\n    - {count: 10}\n  stages:\n    - {duration: 5s, users: 20}\n\
         sessions:\n  - name: s\n    steps:\n      - request: GET /\n",
    )
    .unwrap();
    let out = headroom()
        .arg("run")
        .arg(&file)
        .args(["--target", "127.0.0.1:9"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.yaml:5:5:") && err.contains("add up to 10"),
        "located at the stages: {err}"
    );
}
