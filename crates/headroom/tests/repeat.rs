//! `headroom run --repeat N --out DIR` (issue 27): the same load N times into DIR/1 ... DIR/N,
//! the spread over them in DIR/repeats.json and DIR/report.html, and the flags it cannot go
//! with refused in one line with exit 2.

mod common;

use common::{headroom, serve};

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = headroom().arg("run").args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn three_repeats_into_one_directory_with_their_spread() {
    let server = serve();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("set");
    let url = format!("http://{}/sleep/1", server.local_addr());
    let (code, stdout, stderr) = run(&[
        &url,
        "-c",
        "4",
        "-d",
        "2s",
        "--repeat",
        "3",
        "-q",
        "--out",
        dir.to_str().unwrap(),
    ]);
    server.stop();
    assert_eq!(code, Some(0), "{stderr}");
    for k in ["1", "2", "3"] {
        for file in ["summary.json", "intervals.jsonl", "report.html"] {
            assert!(dir.join(k).join(file).is_file(), "{k}/{file}");
        }
    }
    assert!(!dir.join("4").exists());
    // Each repeat's summary, then the spread.
    assert_eq!(stdout.matches("  Run dir      ").count(), 3, "{stdout}");
    assert!(stdout.contains("Repeats        3 of 3 (mean ± 95% interval over the repeats)"));
    assert!(stdout.contains("  Throughput   "), "{stdout}");
    assert!(stdout.contains(&format!(
        "  Report       {}",
        dir.join("report.html").display()
    )));

    let repeats: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("repeats.json")).unwrap()).unwrap();
    assert_eq!(repeats["format_version"], 1);
    assert_eq!(repeats["asked"], 3);
    assert_eq!(repeats["runs"], serde_json::json!(["1", "2", "3"]));
    assert_eq!(repeats["interrupted"], false);
    let t = &repeats["throughput_rps"];
    assert_eq!(t["n"], 3);
    let each: Vec<f64> = ["1", "2", "3"]
        .iter()
        .map(|k| {
            let s: serde_json::Value = serde_json::from_str(
                &std::fs::read_to_string(dir.join(k).join("summary.json")).unwrap(),
            )
            .unwrap();
            s["throughput_rps"].as_f64().unwrap()
        })
        .collect();
    let mean = each.iter().sum::<f64>() / 3.0;
    assert!(
        (t["mean"].as_f64().unwrap() - mean).abs() < 1e-6,
        "{t} vs {each:?}"
    );
    assert!(t["ci95"].as_f64().unwrap() > 0.0, "{t}");
    assert!(t["min"].as_f64().unwrap() <= t["max"].as_f64().unwrap());
    assert!(repeats["latency_p99_us"]["mean"].as_f64().unwrap() >= 1000.0);

    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("3 repeats: throughput "), "verdict");
    assert!(html.contains("(mean and 95% interval over the repeats)"));
    assert!(html.contains("<h2>Spread over the repeats</h2>"));
    assert!(html.contains("data-series=\"2: rps\""));
    assert!(html.contains("<a href=\"3/report.html\">"));

    // `report DIR` rewrites the same page; a set given to a comparison is refused.
    std::fs::remove_file(dir.join("report.html")).unwrap();
    let out = headroom().arg("report").arg(&dir).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        std::fs::read_to_string(dir.join("report.html")).unwrap(),
        html
    );
    let out = headroom()
        .arg("report")
        .arg(dir.join("1"))
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is a set of repeats (run --repeat)"), "{err}");
}

#[test]
fn repeat_is_refused_where_it_cannot_apply() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("o");
    let o = out.to_str().unwrap();
    let url = "http://127.0.0.1:1/";
    for (args, says) in [
        (vec![url, "--repeat", "3"], "--repeat needs --out DIR"),
        (
            vec![url, "--repeat", "3", "--out", o, "--agents", "local:2"],
            "--repeat cannot go with --agents",
        ),
        (
            vec![url, "--repeat", "3", "--out", o, "--json"],
            "--repeat cannot go with --json",
        ),
        (
            vec![url, "--repeat", "3", "--out", o, "--dashboard", "0"],
            "--repeat cannot go with --dashboard",
        ),
        (
            vec![url, "--repeat", "3", "--out", o, "--metrics-listen", "0"],
            "--repeat cannot go with --metrics-listen",
        ),
        (vec![url, "--repeat", "1", "--out", o], "--repeat"),
        (vec![url, "--repeat", "101", "--out", o], "2..=100"),
    ] {
        let (code, stdout, stderr) = run(&args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(stdout.is_empty());
    }
    assert!(!out.exists(), "nothing ran");
}

#[test]
fn repeat_is_in_the_help() {
    let out = headroom().args(["run", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("--repeat <N>"), "{help}");
    assert!(help.contains("into DIR/1 ... DIR/N"), "{help}");
}
