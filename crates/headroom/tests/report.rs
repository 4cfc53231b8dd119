//! `headroom report` on a real run: a run against headroom serve (in this process, on loopback)
//! is written to a directory, and its report must hold every chart with data and reach for
//! nothing on the network.

mod common;

use common::headroom;

fn serve() -> headroom_serve::RunningServer {
    headroom_serve::start(headroom_serve::ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        workers: 1,
        ..Default::default()
    })
    .expect("start headroom serve")
}

/// The value of `attr="..."` in each tag of `html` that contains `marker`.
fn attrs<'a>(html: &'a str, marker: &str, attr: &str) -> Vec<&'a str> {
    html.match_indices(marker)
        .filter_map(|(at, _)| {
            let tag_end = html[at..].find('>')? + at;
            let tag_start = html[..at].rfind('<')?;
            let tag = &html[tag_start..tag_end];
            let key = format!("{attr}=\"");
            let v = tag.find(&key)? + key.len();
            let end = tag[v..].find('"')? + v;
            Some(&tag[v..end])
        })
        .collect()
}

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
fn report_refuses_what_it_cannot_do_yet() {
    let tmp = tempfile::tempdir().unwrap();
    let o = headroom()
        .args(["report"])
        .arg(tmp.path())
        .arg(tmp.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("one run directory"));
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
}
