//! `--compressed` (issue 16), the CLI's side: the human summary names the compressed responses,
//! and the flag is refused with a scenario file. What is asked, decoded and counted is
//! crates/headroom-run/tests/compressed.rs.

mod common;

use common::*;
use headroom_testkit::servers::nginx::gzip_text_site;

/// Time bound of every load below: far above what each needs, so a hang fails the test.
const BOUND: &str = "30s";

#[test]
fn issue16_the_human_summary_names_the_compressed_responses() {
    let (ng, _) = gzip_text_site();
    let out = headroom()
        .args([
            "run",
            &ng.url("/body.txt"),
            "--compressed",
            "-c",
            "1",
            "-n",
            "20",
            "-d",
            BOUND,
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("20 compressed responses ("), "{text}");
}

#[test]
fn issue16_compressed_is_refused_with_a_scenario_file() {
    // Over HTTP/2 it applies (crates/headroom-run/tests/users_h2.rs decodes gzip per stream).
    // Scenario files do not decode bodies yet: refused, not ignored.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.yaml");
    std::fs::write(&file, "sessions: []\n").unwrap();
    let out = run_plain(file.to_str().unwrap(), &["--compressed"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(one_line(&out).contains("--compressed (URL runs only for now) does not apply"));
}
