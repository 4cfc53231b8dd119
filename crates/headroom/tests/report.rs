//! `headroom report` on a real run: a run against headroom serve (in this process, on loopback)
//! is written to a directory, and its report must hold every chart with data and reach for
//! nothing on the network.

mod common;

use common::{attrs, headroom, serve};

#[test]
fn a_real_runs_report_has_every_chart_with_data_and_no_network() {
    let server = serve();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let url = format!("http://{}/sleep/1", server.local_addr());
    let out = headroom()
        .args(["run", &url, "-c", "4", "-d", "3s", "-q", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = headroom().arg("report").arg(&dir).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = dir.join("report.html");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        page.display().to_string()
    );
    let html = std::fs::read_to_string(&page).unwrap();
    let charts = attrs(&html, "data-chart=", "data-chart");
    assert_eq!(headroom_report::charts::NAMES.len(), 6);
    for name in headroom_report::charts::NAMES {
        assert_eq!(
            charts.iter().filter(|c| **c == name).count(),
            1,
            "chart {name}: {charts:?}"
        );
    }
    // Each interval's throughput is a point: a 3 s run at 1 s intervals has at least 3.
    let points: Vec<usize> = attrs(&html, "data-series=", "data-points")
        .iter()
        .map(|p| p.parse().unwrap())
        .collect();
    assert!(
        points.iter().filter(|p| **p >= 3).count() >= 5,
        "{points:?}"
    );
    // Self-contained: no script or style from elsewhere.
    for bad in ["src=\"http", "href=\"http", "@import", "url(http"] {
        assert!(!html.contains(bad), "the page loads {bad}…");
    }
    server.stop();
}

#[test]
fn a_bad_directory_is_a_usage_error() {
    let o = headroom()
        .args(["report", "/nonexistent/run"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("is not a directory"));
}

/// A scenario with a named request that always fails (404), so the errors chart has data.
const MIXED: &str = r#"
name: report-mix
load:
  phases:
    - {duration: 20s, arrival_rate: 40, arrival: constant}
sessions:
  - name: browse
    steps:
      - transaction:
          name: page
          steps:
            - request: {name: home, method: GET, path: /sleep/2}
            - request: {name: missing, method: GET, path: /no/such/page}
      - think: 50ms
      - request: {name: status, method: GET, path: /status}
"#;

/// The acceptance test of the report: a real scenario run writes report.html by itself; the
/// page opened in headless Chromium logs no error, holds every chart with drawn data, and its
/// screenshot is kept as an artifact. With --no-report the run writes no page.
#[test]
fn a_real_runs_report_opens_in_chromium_with_every_chart_drawn() {
    let server = serve();
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("mix.yaml");
    std::fs::write(&scenario, MIXED).unwrap();
    let dir = tmp.path().join("run");
    let out = headroom()
        .arg("run")
        .arg(&scenario)
        .args(["--target", &server.local_addr().to_string(), "-d", "4s"])
        // The server runs in this test process: sample it.
        .args(["--server-pid", &std::process::id().to_string(), "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = dir.join("report.html");
    assert!(
        stdout.contains(&format!("Report       {}", page.display())),
        "{stdout}"
    );
    let csv = std::fs::read_to_string(dir.join("intervals.csv")).unwrap();
    let intervals = std::fs::read_to_string(dir.join("intervals.jsonl")).unwrap();
    assert_eq!(csv.lines().count(), intervals.lines().count() + 1);
    assert!(
        csv.lines().next().unwrap().ends_with(",server_fds"),
        "{}\n{}",
        csv.lines().next().unwrap(),
        String::from_utf8_lossy(&out.stderr)
    );

    let mut b = common::chromium::Browser::launch();
    b.open(&format!("file://{}", page.display()));
    // Every chart the report promises, each once, each with at least one series drawn with
    // points and a visible extent.
    let charts = b.eval(
        r#"Array.from(document.querySelectorAll('svg[data-chart]')).map(svg => ({
             name: svg.dataset.chart,
             series: Array.from(svg.querySelectorAll('[data-series]')).map(s => ({
               name: s.dataset.series,
               points: Number(s.dataset.points),
               width: s.getBBox().width,
               height: s.getBBox().height,
             })),
           }))"#,
    );
    let charts = charts.as_array().expect("chart list");
    for name in headroom_report::charts::NAMES {
        let found: Vec<&serde_json::Value> = charts.iter().filter(|c| c["name"] == name).collect();
        assert_eq!(found.len(), 1, "chart {name} in {charts:?}");
        let drawn: Vec<&serde_json::Value> = found[0]["series"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| {
                s["points"].as_u64().unwrap_or(0) >= 2 && s["width"].as_f64().unwrap_or(0.0) > 10.0
            })
            .collect();
        assert!(
            !drawn.is_empty(),
            "chart {name} draws no data: {:?}",
            found[0]
        );
    }
    // The sampled server's charts, each once; its accept queue read at every interval (the
    // target is on loopback).
    for name in headroom_report::charts::SERVER_NAMES {
        let found = charts.iter().filter(|c| c["name"] == name).count();
        assert_eq!(found, 1, "chart {name} in {charts:?}");
    }
    let queue = charts.iter().find(|c| c["name"] == "server-queue").unwrap();
    assert!(
        queue["series"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == "in its accept queue" && s["points"].as_u64() >= Some(3)),
        "{queue}"
    );
    // The 404s are errors per second of kind http_4xx; the per-name table lists each request.
    let errors = charts.iter().find(|c| c["name"] == "errors").unwrap();
    assert!(
        errors["series"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == "http_4xx" && s["points"].as_u64() >= Some(3)),
        "{errors}"
    );
    let text = b.eval("document.body.innerText");
    let text = text.as_str().unwrap();
    for name in ["home", "missing", "status", "page"] {
        assert!(text.contains(name), "{name} missing from the page");
    }
    let shot = common::chromium::artifact_dir().join("report.png");
    let bytes = b.screenshot(&shot);
    assert!(bytes > 50_000, "screenshot of {bytes} bytes");
    eprintln!("screenshot: {}", shot.display());
    assert_eq!(b.errors(), Vec::<String>::new());

    // --no-report: the run directory without the page.
    let quiet_dir = tmp.path().join("no-report");
    let url = format!("http://{}/", server.local_addr());
    let out = headroom()
        .args([
            "run",
            &url,
            "-c",
            "2",
            "-d",
            "1s",
            "-q",
            "--no-report",
            "--out",
        ])
        .arg(&quiet_dir)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(quiet_dir.join("intervals.csv").exists());
    assert!(!quiet_dir.join("report.html").exists());
    server.stop();
}

/// The harness must see what it is there to catch, or the test above proves nothing.
#[test]
fn the_browser_harness_catches_console_errors_and_exceptions() {
    let tmp = tempfile::tempdir().unwrap();
    let page = tmp.path().join("bad.html");
    std::fs::write(
        &page,
        "<!DOCTYPE html><html><head><link rel=\"icon\" href=\"data:,\"></head><body><p id=\"p\">hi</p>\
         <script>console.error('broken ' + 42); setTimeout(() => missingFunction(), 0);</script>\
         <img src=\"nonexistent.png\"></body></html>",
    )
    .unwrap();
    let mut b = common::chromium::Browser::launch();
    b.open(&format!("file://{}", page.display()));
    assert!(b.wait_for(
        "document.getElementById('p').textContent == 'hi'",
        std::time::Duration::from_secs(5)
    ));
    assert!(b.wait_for(
        "new Promise(r => setTimeout(() => r(true), 200))",
        std::time::Duration::from_secs(5)
    ));
    let errors = b.errors();
    assert!(
        errors
            .iter()
            .any(|e| e.contains("console.error: broken 42")),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|e| e.contains("missingFunction")),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|e| e.contains("nonexistent.png")),
        "{errors:?}"
    );
}

#[test]
fn a_server_pid_that_does_not_exist_is_a_usage_error_before_any_load() {
    let o = headroom()
        .args([
            "run",
            "http://127.0.0.1:1/",
            "-d",
            "1s",
            "--no-preflight",
            "--server-pid",
            "999999999",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--server-pid 999999999"), "{stderr}");
    assert!(o.stdout.is_empty());
}
