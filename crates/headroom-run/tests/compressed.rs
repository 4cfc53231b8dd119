//! `--compressed` (issue 16): against nginx's gzip module, every reply is asked for compressed,
//! decoded, and its sizes counted; nginx's log shows what was asked. A server that sends a body
//! that does not decode fails each request as a `protocol` error. (br is covered by the proto
//! crate's unit tests: Debian's nginx-light has no brotli module. The CLI's side, the human
//! summary's line and the refusal with a scenario file, is crates/headroom/tests/compressed.rs.)

mod common;

use std::collections::BTreeMap;
use std::io::Write;

use common::*;
use headroom_core::spec::RunSpec;
use headroom_testkit::servers::nginx::gzip_text_site;

/// `URL [--compressed] -c C -n N -d BOUND`.
fn load(url: &str, compressed: bool, c: u32, n: u64) -> RunSpec {
    let mut spec = counted(url, c, n);
    spec.compressed = compressed;
    spec
}

#[test]
fn issue16_compressed_replies_are_decoded_and_their_sizes_counted() {
    let (ng, size) = gzip_text_site();
    let url = ng.url("/body.txt");
    let n = 300u64;
    let f = run(&load(&url, true, 3, n));
    assert_clean(&f);
    let v = &f.summary;
    let http = v.http.as_ref().expect("a URL run has the http section");
    assert_eq!(v.errors_total, 0, "{}", show(v));
    assert_eq!(v.status_codes, BTreeMap::from([(200, n)]), "{}", show(v));
    assert!(http.compressed, "{}", show(v));
    assert_eq!(http.compressed_responses, n, "{}", show(v));
    assert_eq!(http.body_bytes_decoded, n * size, "{}", show(v));
    let encoded = http.body_bytes_encoded;
    assert!(
        encoded > 0 && encoded < n * size / 4,
        "{encoded} vs {}",
        show(v)
    );
    // nginx saw the header on every request and gzipped every reply.
    let lines = ng.log_lines();
    assert_eq!(lines.len() as u64, n);
    for l in &lines {
        assert!(l.contains("[gzip, br]"), "{l}");
        assert!(!l.ends_with(" -"), "not gzipped: {l}");
    }

    // Without --compressed nothing is asked for, nothing is decoded.
    let f = run(&load(&url, false, 2, 50));
    assert_clean(&f);
    let v = &f.summary;
    let http = v.http.as_ref().expect("a URL run has the http section");
    assert!(!http.compressed, "{}", show(v));
    assert_eq!(http.compressed_responses, 0, "{}", show(v));
    assert_eq!(http.body_bytes_decoded, 0, "{}", show(v));
    assert_eq!(http.body_bytes_encoded, 0, "{}", show(v));
    let lines = ng.log_lines();
    assert_eq!(lines.len() as u64, n + 50);
    let bad = lines[n as usize..].iter().find(|l| !l.ends_with("[-] -"));
    assert_eq!(bad, None, "asked for, or sent, compressed");

    // The user's own Accept-Encoding wins: identity asked, nothing compressed, sent once.
    let mut spec = load(&url, true, 1, 10);
    spec.headers = vec!["Accept-Encoding: identity".into()];
    let f = run(&spec);
    let v = &f.summary;
    assert_eq!(v.errors_total, 0, "{}", show(v));
    assert_eq!(
        v.http.as_ref().unwrap().compressed_responses,
        0,
        "{}",
        show(v)
    );
    let lines = ng.log_lines();
    assert_eq!(lines.len() as u64, n + 60);
    let bad = lines[n as usize + 50..]
        .iter()
        .find(|l| !l.ends_with("[identity] -"));
    assert_eq!(bad, None, "not the user's Accept-Encoding alone");
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
    let f = run(&load(&server.url(), true, 1, 20));
    let v = &f.summary;
    assert_eq!(v.errors.protocol, 20, "{}", show(v));
    let http = v.http.as_ref().unwrap();
    assert_eq!(http.compressed_responses, 20, "{}", show(v));
    assert_eq!(http.body_bytes_encoded, 20 * 23, "{}", show(v));
    // Without --compressed the same replies are fine: the body is not looked at.
    let f = run(&load(&server.url(), false, 1, 20));
    assert_clean(&f);
    assert_eq!(f.summary.errors_total, 0, "{}", show(&f.summary));
}
