//! headroom's HTTP/2 client (`--http2` over TLS by ALPN, `--h2c` by prior knowledge, `-c C
//! --streams S`) end to end, against two independent servers on 127.0.0.1: nginx and h2o
//! (tests/common/tls_nginx.rs, h2o.rs). Each test checks headroom's counts against the server's
//! access log, and that GOAWAY and RST_STREAM are counted and survived. Every run is bounded in
//! count and time (`-d`).

mod common;

use common::access_log::AccessLog;
use common::h2o::H2o;
use common::pki::Pki;
use common::{err, num, one_line, run_json, run_plain, Nginx};

/// Time bound of every load below: far above what each needs, so a hang fails the test.
const BOUND: &str = "20s";

/// `-c 4 --streams 32 -n 10000` with `flags` against `url`: every request answered, no error,
/// and the server logged exactly 10,000 HTTP/2 requests.
fn ten_thousand_streams(url: &str, flags: &[&str], protocol: &str, server: &dyn AccessLog) {
    let args = [
        flags,
        &["-c", "4", "--streams", "32", "-n", "10000", "-d", BOUND],
    ]
    .concat();
    let (v, out) = run_json(url, &args);
    assert!(out.status.success(), "{url}: {v:#}");
    assert_eq!(v["protocol"], protocol, "{url}");
    assert_eq!(num(&v, &["streams"]), 32);
    assert_eq!(num(&v, &["requests"]), 10_000, "{url}: {v:#}");
    assert_eq!(num(&v, &["responses"]), 10_000, "{url}: {v:#}");
    assert_eq!(num(&v, &["errors_total"]), 0, "{url}: {v:#}");
    assert_eq!(num(&v, &["status", "2xx"]), 10_000, "{url}: {v:#}");
    assert_eq!(num(&v, &["connects"]), 4, "{url}: {v:#}");
    let h2 = &v["http2"];
    assert_eq!(num(h2, &["goaway"]), 0, "{url}: {h2:#}");
    assert_eq!(num(h2, &["connection_errors"]), 0, "{url}: {h2:#}");
    let lines = server.log_lines();
    let odd: Vec<_> = lines
        .iter()
        .filter(|l| l.uri != "/" || l.status != 200 || l.protocol != "HTTP/2.0")
        .collect();
    assert_eq!(lines.len(), 10_000, "{url}: {odd:?}");
    assert_eq!(server.logged_protocol("HTTP/2.0"), 10_000, "{url}");
    assert_eq!(server.logged_status(200), 10_000, "{url}");
    assert_eq!(server.logged_connections(), 4, "{url}");
    if protocol == "h2" {
        assert_eq!(num(&v, &["tls", "handshakes"]), 4, "{url}: {v:#}");
        assert_eq!(v["tls"]["alpn"], serde_json::json!(["h2"]), "{url}");
    } else {
        assert!(v["tls"].is_null(), "{url}: {:#}", v["tls"]);
        assert!(lines.iter().all(|l| l.tls.is_none()), "{url}");
    }
}

#[test]
fn nginx_h2_over_tls_answers_ten_thousand_streams() {
    let pki = Pki::new();
    let ng = Nginx::builder().tls(&pki.localhost).http2(true).start();
    let ca = pki.ca.to_str().unwrap();
    ten_thousand_streams(&ng.url("/"), &["--http2", "--cacert", ca], "h2", &ng);
}

#[test]
fn nginx_h2c_answers_ten_thousand_streams() {
    let ng = Nginx::builder().h2c(true).start();
    ten_thousand_streams(&ng.url("/"), &["--h2c"], "h2c", &ng);
}

#[test]
fn h2o_h2_over_tls_and_h2c_answer_ten_thousand_streams_each() {
    let pki = Pki::new();
    let ca = pki.ca.to_str().unwrap();
    let h = H2o::start(&pki.localhost);
    ten_thousand_streams(&h.tls_url("/"), &["--http2", "--cacert", ca], "h2", &h);
    let h = H2o::start(&pki.localhost);
    ten_thousand_streams(&h.h2c_url("/"), &["--h2c"], "h2c", &h);
}

#[test]
fn goaway_after_100_streams_replaces_the_connection_and_every_request_is_accounted_for() {
    let ng = Nginx::builder().h2c(true).keepalive_requests(100).start();
    let (v, out) = run_json(
        &ng.url("/"),
        &[
            "--h2c",
            "-c",
            "2",
            "--streams",
            "8",
            "-n",
            "1000",
            "-d",
            BOUND,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{v:#}");
    let h2 = &v["http2"];
    let goaway = num(h2, &["goaway"]);
    assert_eq!(num(h2, &["connection_errors"]), 0, "{h2:#}");
    let responses = num(&v, &["responses"]);
    let reset = err(&v, "stream_reset");
    assert_eq!(num(&v, &["requests"]), 1000, "{v:#}");
    assert_eq!(responses + reset, 1000, "{v:#}");
    // Streams above a GOAWAY's last-stream-id are the only resets, and the only errors: at most
    // 7 per GOAWAY (8 streams in flight, the 100th among them).
    assert_eq!(num(h2, &["rst_refused_stream"]), reset, "{h2:#}");
    assert_eq!(num(&v, &["errors_total"]), reset, "{v:#}");
    assert!(
        reset <= 7 * goaway,
        "{reset} refused for {goaway} GOAWAYs: {h2:#}"
    );
    assert_eq!(num(&v, &["status", "2xx"]), responses);
    assert_eq!(ng.logged_status(200), responses as usize);
    assert_eq!(ng.log_lines().len(), responses as usize);
    // nginx sent a GOAWAY on each connection that reached 100 streams, and on no other; the
    // refused streams count against -n, so the last two connections share what is left of the
    // 1,000 and end below 100: at least 8 GOAWAYs (100 x 8 + 7 x 8 + 2 x 99 >= 1,000), at
    // least 10 connections.
    let mut per_conn = std::collections::HashMap::new();
    for l in ng.log_lines() {
        *per_conn.entry(l.connection).or_insert(0u64) += 1;
    }
    assert!(per_conn.values().all(|&n| n <= 100), "{per_conn:?}");
    let full = per_conn.values().filter(|&&n| n == 100).count() as u64;
    assert_eq!(
        goaway, full,
        "GOAWAYs against nginx's full connections: {per_conn:?}"
    );
    assert!(goaway >= 8, "{goaway} GOAWAYs: {v:#}");
    let connects = num(&v, &["connects"]);
    assert!(connects >= 10, "{v:#}");
    assert!(
        connects >= per_conn.len() as u64,
        "{connects}: {per_conn:?}"
    );
    assert!(per_conn.len() >= 10, "{per_conn:?}");
}

#[test]
fn rst_stream_is_counted_by_code_and_the_server_is_used_on() {
    let pki = Pki::new();
    let ca = pki.ca.to_str().unwrap();
    let ng = Nginx::builder().tls(&pki.localhost).http2(true).start();
    let flags = ["--http2", "--cacert", ca, "-c", "2", "--streams", "4"];
    // /rst: nginx answers every stream with RST_STREAM(PROTOCOL_ERROR) and keeps the
    // connection.
    let (v, out) = run_json(
        &ng.url("/rst"),
        &[&flags[..], &["-n", "100", "-d", BOUND]].concat(),
    );
    assert_ne!(out.status.code(), Some(2), "{v:#}");
    assert_eq!(num(&v, &["requests"]), 100, "{v:#}");
    assert_eq!(num(&v, &["responses"]), 0, "{v:#}");
    assert_eq!(err(&v, "stream_reset"), 100, "{v:#}");
    assert_eq!(num(&v, &["errors_total"]), 100, "{v:#}");
    let h2 = &v["http2"];
    assert_eq!(num(h2, &["rst_protocol_error"]), 100, "{h2:#}");
    assert_eq!(num(h2, &["connection_errors"]), 0, "{h2:#}");
    assert_eq!(num(h2, &["goaway"]), 0, "{h2:#}");
    // A reset stream leaves its connection up: the two connections carried all 100.
    assert_eq!(num(&v, &["connects"]), 2, "{v:#}");
    assert_eq!(ng.logged_status(444), 100);

    // The same server, /: every request answered.
    let (v, out) = run_json(
        &ng.url("/"),
        &[&flags[..], &["-n", "100", "-d", BOUND]].concat(),
    );
    assert!(out.status.success(), "{v:#}");
    assert_eq!(num(&v, &["responses"]), 100, "{v:#}");
    assert_eq!(num(&v, &["errors_total"]), 0, "{v:#}");
    assert_eq!(num(&v["http2"], &["rst_protocol_error"]), 0);
    assert_eq!(ng.logged_status(200), 100);
}

/// Issue 16 over HTTP/2: exact codes per stream, and `--expect-status` deciding what fails, on
/// the HTTP/2 path of the engine (its own place where replies are counted).
#[test]
fn issue16_h2c_counts_exact_codes_and_checks_expect_status() {
    let ng = Nginx::builder().h2c(true).start();
    let flags = [
        "--h2c",
        "-c",
        "2",
        "--streams",
        "4",
        "-n",
        "100",
        "-d",
        BOUND,
    ];
    let (v, out) = run_json(&ng.url("/missing"), &flags);
    assert_eq!(out.status.code(), Some(0), "{v:#}");
    assert_eq!(v["status_codes"], serde_json::json!({"404": 100}), "{v:#}");
    assert_eq!(err(&v, "http_4xx"), 100, "{v:#}");
    assert_eq!(err(&v, "unexpected_status"), 0, "{v:#}");
    let (v, out) = run_json(
        &ng.url("/fail"),
        &[&flags[..], &["--expect-status", "200"]].concat(),
    );
    assert_eq!(out.status.code(), Some(0), "{v:#}");
    assert_eq!(v["status_codes"], serde_json::json!({"503": 100}), "{v:#}");
    assert_eq!(err(&v, "unexpected_status"), 100, "{v:#}");
    assert_eq!(err(&v, "http_5xx"), 0, "{v:#}");
    let (v, _) = run_json(
        &ng.url("/missing"),
        &[&flags[..], &["--expect-status", "404"]].concat(),
    );
    assert_eq!(num(&v, &["errors_total"]), 0, "{v:#}");
    assert_eq!(ng.logged_status(404), 200);
    assert_eq!(ng.logged_status(503), 100);
}

#[test]
fn http2_against_a_server_without_h2_says_so_in_one_line() {
    let pki = Pki::new();
    let ca = pki.ca.to_str().unwrap();
    // nginx over TLS without http2: it knows only http/1.1, and refuses a ClientHello that
    // offers h2 alone (a no_application_protocol alert), as OpenSSL servers do.
    let ng = Nginx::builder().tls(&pki.localhost).start();
    let out = run_plain(
        &ng.url("/"),
        &["--http2", "--cacert", ca, "-n", "10", "-d", BOUND],
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let line = one_line(&out);
    assert_eq!(ng.log_lines().len(), 0);
    assert!(line.contains("does not speak HTTP/2"), "{line}");
}

#[test]
fn http2_with_an_http_url_is_a_usage_error() {
    // --http2 is HTTP/2 over TLS: an http:// URL is a usage error (--h2c is the clear-text one).
    let plain = Nginx::builder().h2c(true).start();
    let out = run_plain(&plain.url("/"), &["--http2", "-n", "10", "-d", BOUND]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(one_line(&out).contains("--h2c"), "{out:?}");
    assert_eq!(plain.log_lines().len(), 0);
}
