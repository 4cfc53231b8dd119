//! A lab's runs are run directories of `headroom run --out`'s format: their summary.json and
//! intervals.jsonl validate against the same schemas (schema/, generated from the run library's
//! types) as a plain run's, `headroom report` renders one, and `headroom report A B` compares a
//! lab's run with a plain run. The server is the real reference server (`headroom serve`).

mod common;

use std::path::{Path, PathBuf};

use common::headroom;
use serde_json::Value;

fn schema(name: &str) -> jsonschema::Validator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../schema")
        .join(name);
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    jsonschema::validator_for(&v).expect("a valid schema")
}

/// Every schema error of the run directory's summary.json and intervals.jsonl lines.
fn invalid(dir: &Path) -> Vec<String> {
    let summary = schema("summary.schema.json");
    let interval = schema("interval.schema.json");
    let mut errs = Vec::new();
    let s: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    errs.extend(
        summary
            .iter_errors(&s)
            .map(|e| format!("summary.json: {e} at {}", e.instance_path())),
    );
    let lines = std::fs::read_to_string(dir.join("intervals.jsonl")).unwrap();
    assert!(lines.lines().count() >= 2, "{}: {lines}", dir.display());
    for (i, l) in lines.lines().enumerate() {
        let v: Value = serde_json::from_str(l).unwrap();
        errs.extend(
            interval
                .iter_errors(&v)
                .map(|e| format!("intervals.jsonl:{}: {e} at {}", i + 1, e.instance_path())),
        );
    }
    errs
}

#[test]
fn a_labs_runs_are_run_directories_that_validate_report_and_compare() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(
        d.join("s.yaml"),
        "load: {users: [{count: 4}]}\nsessions: [{name: one, steps: [{request: GET /}, {think: 20ms}]}]\n",
    )
    .unwrap();
    std::fs::write(
        d.join("e.yaml"),
        r#"name: dirs
server:
  command: exec {headroom} serve --listen 127.0.0.1:{port} --workers {workers}
  ready: {port: "127.0.0.1:{port}"}
factors:
  workers: ["1", "2"]
load: {scenario: s.yaml, duration: 2s, threads: 1}
"#,
    )
    .unwrap();
    let out = d.join("out");
    let o = headroom()
        .args(["lab", d.join("e.yaml").to_str().unwrap(), "--output"])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");

    let runs: Vec<PathBuf> = ["workers-1_rep1", "workers-2_rep1"]
        .iter()
        .map(|n| out.join("runs").join(n))
        .collect();
    for r in &runs {
        for f in [
            "summary.json",
            "intervals.jsonl",
            "latency.hlog",
            "intervals.csv",
        ] {
            assert!(r.join(f).is_file(), "{} has no {f}", r.display());
        }
        let errs = invalid(r);
        assert!(errs.is_empty(), "{}: {errs:#?}", r.display());
        let s: Value =
            serde_json::from_str(&std::fs::read_to_string(r.join("summary.json")).unwrap())
                .unwrap();
        assert!(s["responses"].as_u64().unwrap() > 20, "{s}");
        assert_eq!(s["errors_total"], 0, "{s}");
        assert_eq!(s["model"], "sessions", "{s}");
    }

    // A plain run's directory validates against the same schemas.
    let server = common::serve();
    let plain = d.join("plain");
    let o = headroom()
        .args(["run", &format!("http://{}/", server.local_addr())])
        .args(["-c", "4", "-d", "2s", "-q", "--no-report", "--out"])
        .arg(&plain)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let errs = invalid(&plain);
    assert!(errs.is_empty(), "plain: {errs:#?}");

    // `headroom report` renders a lab's run as it renders any run.
    let o = headroom().arg("report").arg(&runs[0]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let html = std::fs::read_to_string(runs[0].join("report.html")).unwrap();
    assert!(html.contains("<svg"), "charts drawn");
    assert!(html.contains("s.yaml"), "the run's target named");

    // And compares it with the plain run.
    let page = d.join("compare.html");
    let o = headroom()
        .arg("report")
        .arg(&runs[0])
        .arg(&plain)
        .arg("-o")
        .arg(&page)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("workers-1_rep1"), "the lab's run is a column");
    assert!(html.contains("plain"), "the plain run is a column");
    assert!(html.contains("<svg"), "overlaid charts");
}
