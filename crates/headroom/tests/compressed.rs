//! `--compressed` (issue 16): against nginx's gzip module, every reply is asked for compressed,
//! decoded, and its sizes counted; nginx's log shows what was asked. A server that sends a body
//! that does not decode fails each request as a `protocol` error. (br is covered by the proto
//! crate's unit tests: Debian's nginx-light has no brotli module.)

mod common;

use std::io::Write;

use common::*;

/// Time bound of every load below: far above what each needs, so a hang fails the test.
const BOUND: &str = "30s";

/// nginx gzipping a text file of known size, logging each request's Accept-Encoding and the
/// ratio nginx's gzip achieved (`-` when it sent the body as it is).
fn site() -> (Nginx, u64) {
    let ng = Nginx::start_with(
        r#"
    gzip on; gzip_types text/plain; gzip_min_length 0;
    location = /body.txt { root {dir}; default_type text/plain; }
    "#,
        "$request [$http_accept_encoding] $gzip_ratio",
    );
    let mut text = String::new();
    for i in 0..3000 {
        text.push_str(&format!(
            "{i:>6} the quick brown fox jumps over the lazy dog\n"
        ));
    }
    std::fs::write(ng.dir().join("body.txt"), &text).unwrap();
    (ng, text.len() as u64)
}

#[test]
fn issue16_compressed_replies_are_decoded_and_their_sizes_counted() {
    let (ng, size) = site();
    let url = ng.url("/body.txt");
    let n = 300u64;
    let (v, out) = run_json(
        &url,
        &["--compressed", "-c", "3", "-n", &n.to_string(), "-d", BOUND],
    );
    assert_eq!(out.status.code(), Some(0), "{v:#}");
    assert_eq!(num(&v, &["errors_total"]), 0, "{v:#}");
    assert_eq!(v["status_codes"], serde_json::json!({ "200": n }), "{v:#}");
    assert_eq!(v["http"]["compressed"], true, "{v:#}");
    assert_eq!(num(&v, &["http", "compressed_responses"]), n, "{v:#}");
    assert_eq!(num(&v, &["http", "body_bytes_decoded"]), n * size, "{v:#}");
    let encoded = num(&v, &["http", "body_bytes_encoded"]);
    assert!(encoded > 0 && encoded < n * size / 4, "{encoded} vs {v:#}");
    // nginx saw the header on every request and gzipped every reply.
    let lines = ng.log_lines();
    assert_eq!(lines.len() as u64, n);
    for l in &lines {
        assert!(l.contains("[gzip, br]"), "{l}");
        assert!(!l.ends_with(" -"), "not gzipped: {l}");
    }

    // Without --compressed nothing is asked for, nothing is decoded.
    let (v, out) = run_json(&url, &["-c", "2", "-n", "50", "-d", BOUND]);
    assert_eq!(out.status.code(), Some(0), "{v:#}");
    assert_eq!(v["http"]["compressed"], false, "{v:#}");
    assert_eq!(num(&v, &["http", "compressed_responses"]), 0, "{v:#}");
    assert_eq!(num(&v, &["http", "body_bytes_decoded"]), 0, "{v:#}");
    let lines = ng.log_lines();
    assert_eq!(lines.len() as u64, n + 50);
    let bad = lines[n as usize..].iter().find(|l| !l.ends_with("[-] -"));
    assert_eq!(bad, None, "asked for, or sent, compressed");

    // The user's own Accept-Encoding wins: identity asked, nothing compressed, sent once.
    let (v, _) = run_json(
        &url,
        &[
            "--compressed",
            "-H",
            "Accept-Encoding: identity",
            "-c",
            "1",
            "-n",
            "10",
            "-d",
            BOUND,
        ],
    );
    assert_eq!(num(&v, &["errors_total"]), 0, "{v:#}");
    assert_eq!(num(&v, &["http", "compressed_responses"]), 0, "{v:#}");
    let lines = ng.log_lines();
    assert_eq!(lines.len() as u64, n + 60);
    let bad = lines[n as usize + 50..]
        .iter()
        .find(|l| !l.ends_with("[identity] -"));
    assert_eq!(bad, None, "not the user's Accept-Encoding alone");

    // The human summary names them.
    let out = headroom()
        .args([
            "run",
            &url,
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
    assert!(text.contains("20 compressed responses ("), "{text}");
}

#[test]
fn issue16_a_body_that_does_not_decode_is_a_protocol_error() {
    // Says gzip, sends text: each reply fails its request, the connection is dropped and made
    // anew, and the run goes on.
    let server = TestServer::start(|mut c| {
        let body = b"this is not gzip at all";
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        while read_request(&mut c) {
            if c.write_all(head.as_bytes()).is_err() || c.write_all(body).is_err() {
                return;
            }
        }
    });
    let (v, out) = run_json(
        &server.url(),
        &["--compressed", "-c", "1", "-n", "20", "-d", BOUND],
    );
    assert_eq!(err(&v, "protocol"), 20, "{v:#}");
    assert_eq!(num(&v, &["http", "compressed_responses"]), 20, "{v:#}");
    assert_eq!(num(&v, &["http", "body_bytes_encoded"]), 20 * 23, "{v:#}");
    assert_ne!(out.status.code(), Some(2), "{v:#}");
    // Without --compressed the same replies are fine: the body is not looked at.
    let (v, _) = run_json(&server.url(), &["-c", "1", "-n", "20", "-d", BOUND]);
    assert_eq!(num(&v, &["errors_total"]), 0, "{v:#}");
}

#[test]
fn issue16_compressed_is_refused_with_a_scenario_file() {
    // Over HTTP/2 it applies (tests/users_h2.rs decodes gzip per stream).
    // Scenario files do not decode bodies yet: refused, not ignored.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.yaml");
    std::fs::write(&file, "sessions: []\n").unwrap();
    let out = run_plain(file.to_str().unwrap(), &["--compressed"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(one_line(&out).contains("--compressed (URL runs only for now) does not apply"));
}
