//! The report reads run directories written by earlier releases. `fixtures/run-2026-11-28` is a
//! real run directory (summary.json format 1, intervals.jsonl, latency.hlog) written by the
//! release built on 2026-11-28 (b3bd4da: `headroom run http://127.0.0.1:23456/ -c 4 -d 2s --out`
//! against `headroom serve --arch reactor`). When the file format moves into its own crate
//! (issue 28), this directory must still load, figure for figure: a change that drops a field or
//! refuses an old one fails here.

use std::path::Path;

use headroom_report::{load_run, render};

fn fixture() -> &'static Path {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/run-2026-11-28"
    ))
}

#[test]
fn a_run_directory_of_the_2026_11_28_release_loads_figure_for_figure() {
    let data = load_run(fixture()).expect("the fixture loads");
    assert!(data.notes.is_empty(), "{:?}", data.notes);
    let s = data.summary.as_ref().expect("summary.json is read");
    assert_eq!(s.format_version, Some(1));
    assert_eq!(s.target.as_deref(), Some("http://127.0.0.1:23456/"));
    assert_eq!(s.responses, Some(244_716));
    assert_eq!(s.requests, Some(244_720));
    assert_eq!(s.status_codes.get("200"), Some(&244_716));
    assert_eq!(s.duration_s, Some(2.002));
    assert_eq!(s.latency_us.count, Some(244_716));
    assert_eq!(s.latency_us.p99, Some(120.0));
    // Two one-second intervals, and the whole run's distributions from latency.hlog.
    assert_eq!(data.intervals.len(), 2, "{:?}", data.intervals.len());
    let interval_responses: u64 = data.intervals.iter().filter_map(|i| i.responses).sum();
    assert_eq!(interval_responses, 244_716);
    assert!(data.distributions.is_some(), "latency.hlog is read");

    let html = render(&data);
    assert!(html.contains("http://127.0.0.1:23456/"));
    assert!(
        html.contains("244,716"),
        "the response count is on the page"
    );
}
