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

/// nginx's GOAWAY after 100 streams (keepalive_requests 100): the streams above its last id
/// were not processed, so they go again on a new connection (RFC 9113 §8.7, issue 26), counted
/// as `http2.resent`, not as errors. Before issue 26 each was a `stream_reset` error.
#[test]
fn goaway_after_100_streams_replaces_the_connection_and_unprocessed_streams_go_again() {
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
    // Every one of the 1,000 answered, once: the refused ones went again, and `requests`
    // counts each request once.
    assert_eq!(num(&v, &["requests"]), 1000, "{v:#}");
    assert_eq!(num(&v, &["responses"]), 1000, "{v:#}");
    assert_eq!(num(&v, &["errors_total"]), 0, "{v:#}");
    let refused = num(h2, &["rst_refused_stream"]);
    assert!(
        refused > 0,
        "8 streams in flight when each GOAWAY came: {h2:#}"
    );
    assert_eq!(num(h2, &["resent"]), refused, "{h2:#}");
    // At most 7 per GOAWAY (8 streams in flight, the 100th among them).
    assert!(
        refused <= 7 * goaway,
        "{refused} refused for {goaway} GOAWAYs: {h2:#}"
    );
    assert_eq!(num(&v, &["status", "2xx"]), 1000);
    assert_eq!(ng.logged_status(200), 1000);
    assert_eq!(ng.log_lines().len(), 1000);
    // nginx sent a GOAWAY on each connection that reached 100 streams, and on no other: 10.
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
    assert!(goaway >= 9, "{goaway} GOAWAYs: {v:#}");
    let connects = num(&v, &["connects"]);
    assert!(connects >= 10, "{v:#}");
    assert!(
        connects >= per_conn.len() as u64,
        "{connects}: {per_conn:?}"
    );
    assert!(per_conn.len() >= 10, "{per_conn:?}");
}

/// Paced users (`--rate`, up to 8 streams each) and users that think (`--think`, one stream)
/// after nginx's GOAWAY: the refused streams go again at once on a new connection, and a
/// request after a think finds the old connection spent and opens another — no error either
/// way, every request answered once.
#[test]
fn goaway_with_paced_and_thinking_users_loses_nothing() {
    let ng = Nginx::builder().h2c(true).keepalive_requests(50).start();
    let (v, out) = run_json(
        &ng.url("/"),
        &[
            "--h2c",
            "-c",
            "2",
            "--streams",
            "8",
            "--rate",
            "2000",
            "-n",
            "1000",
            "-d",
            BOUND,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{v:#}");
    assert_eq!(num(&v, &["responses"]), 1000, "{v:#}");
    assert_eq!(num(&v, &["errors_total"]), 0, "{v:#}");
    let h2 = &v["http2"];
    assert!(num(h2, &["goaway"]) >= 19, "{h2:#}");
    assert_eq!(
        num(h2, &["resent"]),
        num(h2, &["rst_refused_stream"]),
        "{h2:#}"
    );
    assert_eq!(ng.logged_status(200), 1000);

    let ng = Nginx::builder().h2c(true).keepalive_requests(10).start();
    let (v, out) = run_json(
        &ng.url("/"),
        &[
            "--h2c", "-c", "2", "--think", "10ms", "-n", "100", "-d", BOUND,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{v:#}");
    assert_eq!(num(&v, &["responses"]), 100, "{v:#}");
    assert_eq!(num(&v, &["errors_total"]), 0, "{v:#}");
    assert!(num(&v["http2"], &["goaway"]) >= 9, "{v:#}");
    assert_eq!(ng.logged_status(200), 100);
}

/// A server whose SETTINGS allow one stream at a time (`http2_max_concurrent_streams 1`)
/// refuses with RST_STREAM(REFUSED_STREAM) the streams a client opened before reading them:
/// headroom's first flight of 8 (each a 1 MiB body, so the first stays open) loses most of
/// them (7 or 6 here: nginx may finish one before reading the next), which go again on the same
/// connection, one at a time as the SETTINGS now say.
#[test]
fn refused_streams_go_again_on_the_same_connection() {
    let ng = Nginx::builder().h2c(true).max_concurrent_streams(1).start();
    let (v, out) = run_json(
        &ng.url("/static/1m.bin"),
        &[
            "--h2c",
            "-c",
            "1",
            "--streams",
            "8",
            "-n",
            "16",
            "-d",
            BOUND,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{v:#}");
    assert_eq!(num(&v, &["requests"]), 16, "{v:#}");
    assert_eq!(num(&v, &["responses"]), 16, "{v:#}");
    assert_eq!(num(&v, &["errors_total"]), 0, "{v:#}");
    let h2 = &v["http2"];
    let refused = num(h2, &["rst_refused_stream"]);
    assert!((1..=7).contains(&refused), "{h2:#}");
    assert_eq!(num(h2, &["resent"]), refused, "{h2:#}");
    assert_eq!(num(&v, &["connects"]), 1, "{v:#}");
    assert_eq!(ng.logged_status(200), 16);
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
    // Every reply an error: no request succeeded, exit 1 (issue 26).
    assert_eq!(out.status.code(), Some(1), "{v:#}");
    assert_eq!(v["status_codes"], serde_json::json!({"404": 100}), "{v:#}");
    assert_eq!(err(&v, "http_4xx"), 100, "{v:#}");
    assert_eq!(err(&v, "unexpected_status"), 0, "{v:#}");
    let (v, out) = run_json(
        &ng.url("/fail"),
        &[&flags[..], &["--expect-status", "200"]].concat(),
    );
    assert_eq!(out.status.code(), Some(1), "{v:#}");
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

#[test]
fn streams_at_a_rate_keep_slow_replies_in_flight_at_once() {
    // 100 requests/s on one connection to replies that take 100 ms (headroom serve's
    // /sleep/100 behind an h2c nginx): ~10 must be in flight at once. With --streams 16 the
    // rate holds and each reply's latency is about the sleep; with one stream the connection
    // carries at most 10/s and the corrected latency shows the queue (coordinated omission).
    let backend = common::serve();
    let ng = Nginx::builder()
        .h2c(true)
        .upstream(backend.local_addr())
        .start();
    let url = ng.url("/sleep/100");
    let base = ["--h2c", "-c", "1", "--rate", "100", "-d", "3s"];
    let (v, out) = run_json(&url, &[&base[..], &["--streams", "16"]].concat());
    assert!(out.status.success(), "{v:#}");
    assert_eq!(num(&v, &["streams"]), 16);
    let requests = num(&v, &["requests"]);
    assert!(
        (270..=310).contains(&requests),
        "{requests} requests: {v:#}"
    );
    assert_eq!(num(&v, &["errors_total"]), 0, "{v:#}");
    assert_eq!(num(&v, &["connects"]), 1, "{v:#}");
    let p50 = num(&v, &["latency_us", "p50"]);
    let p99 = num(&v, &["latency_us", "p99"]);
    assert!((100_000..180_000).contains(&p50), "p50 {p50}µs: {v:#}");
    assert!(p99 < 400_000, "p99 {p99}µs: {v:#}");
    let answered = num(&v, &["responses"]);
    let logged = ng.log_lines().iter().filter(|l| l.status == 200).count() as u64;
    assert!(
        logged >= answered && logged <= requests,
        "nginx logged {logged}, headroom {answered} answered of {requests}"
    );

    let (v, out) = run_json(&url, &[&base[..], &["--streams", "1"]].concat());
    assert!(out.status.success(), "{v:#}");
    let requests = num(&v, &["requests"]);
    assert!(
        requests <= 40,
        "one stream carries at most ~10/s: {requests}: {v:#}"
    );
    let p99 = num(&v, &["latency_us", "p99"]);
    assert!(
        p99 > 1_000_000,
        "the queue shows in corrected latency: p99 {p99}µs"
    );
}

/// A scenario over HTTP/2 (`http: 2`): `tls` is the server's `tls:` value (`""` for h2c).
fn h2_scenario(port: u16, tls: &str, ca: Option<&std::path::Path>) -> serde_json::Value {
    // 20 sessions of 3 requests: a page, an extract from its body (nginx's `return 200`
    // text), a request that uses it, and a 404; every request a stream of the user's
    // connection.
    let yaml = format!(
        r#"
servers: [{{host: 127.0.0.1, port: {port}, http: 2{tls}}}]
load: {{phases: [{{duration: 1s, arrival_rate: 20, arrival: constant}}]}}
sessions:
  - name: s
    steps:
      - request: {{name: home, path: /}}
      - extract: {{var: who, regex: 'hello from (\w+)'}}
      - request: {{name: static, path: "/static/${{who}}.txt"}}
      - request: {{name: missing, path: /missing}}
"#
    );
    let files: Vec<(&str, &std::path::Path)> = ca.iter().map(|p| ("ca.pem", *p)).collect();
    let (v, out) = common::run_scenario(&yaml, &files, &["-d", BOUND]);
    assert_ne!(out.status.code(), Some(2), "{v:#}");
    v
}

#[test]
fn scenarios_speak_http2_over_tls_and_h2c() {
    let pki = Pki::new();
    for tls in [false, true] {
        let b = Nginx::builder().http2(true);
        let ng = if tls {
            b.tls(&pki.localhost)
        } else {
            b.h2c(true)
        }
        .start();
        let port: u16 = ng
            .url("/")
            .rsplit_once(':')
            .and_then(|(_, p)| p.trim_end_matches('/').parse().ok())
            .unwrap();
        let v = if tls {
            h2_scenario(port, ", tls: {cacert: ca.pem}", Some(&pki.ca))
        } else {
            h2_scenario(port, "", None)
        };
        let want = if tls { "h2" } else { "h2c" };
        assert_eq!(v["protocol"], want, "{v:#}");
        assert_eq!(num(&v, &["requests"]), 60, "{v:#}");
        assert_eq!(num(&v, &["responses"]), 60, "{v:#}");
        assert_eq!(num(&v, &["status", "2xx"]), 20, "{v:#}");
        assert_eq!(num(&v, &["status", "4xx"]), 40, "{v:#}");
        let by = &v["scenario"]["by_request"];
        assert_eq!(num(by, &["home", "count"]), 20, "{by:#}");
        assert_eq!(num(by, &["static", "count"]), 20, "{by:#}");
        assert_eq!(num(by, &["missing", "count"]), 20, "{by:#}");
        let lines = ng.log_lines();
        assert_eq!(lines.len(), 60, "{want}");
        assert!(lines.iter().all(|l| l.protocol == "HTTP/2.0"), "{want}");
        // The extracted word reached the server: /static/nginx.txt (absent: 404).
        let extracted = lines
            .iter()
            .filter(|l| l.uri == "/static/nginx.txt")
            .count();
        assert_eq!(
            extracted,
            20,
            "{want}: {:?}",
            lines.iter().map(|l| &l.uri).collect::<Vec<_>>()
        );
        if tls {
            assert_eq!(num(&v, &["tls", "handshakes"]), 20, "{v:#}");
        }
    }
}

/// A scenario's pipeline over HTTP/2 meets nginx's GOAWAY (keepalive_requests 3) in the middle:
/// of its 4 streams nginx processes 2 and leaves 2 above its last id. Those 2 go again on a new
/// connection once the other 2 are answered, and the session goes on (issue 26); before, each
/// was a `stream_reset` error and the session was aborted. Each arriving user has its own
/// connection, so every session meets the same GOAWAY.
#[test]
fn scenario_pipeline_over_h2_survives_goaway_in_its_middle() {
    let ng = Nginx::builder().h2c(true).keepalive_requests(3).start();
    let port: u16 = ng
        .url("/")
        .rsplit_once(':')
        .and_then(|(_, p)| p.trim_end_matches('/').parse().ok())
        .unwrap();
    let yaml = format!(
        r#"
servers: [{{host: 127.0.0.1, port: {port}, http: 2}}]
load: {{phases: [{{duration: 1s, arrival_rate: 20, arrival: constant}}]}}
sessions:
  - name: s
    steps:
      - request: {{name: first, path: /}}
      - pipeline:
          - request: {{name: a, path: /a}}
          - request: {{name: b, path: /b}}
          - request: {{name: c, path: /c}}
          - request: {{name: d, path: /d}}
      - request: {{name: last, path: /e}}
"#
    );
    let (v, out) = common::run_scenario(&yaml, &[], &["-d", BOUND]);
    assert_eq!(out.status.code(), Some(0), "{v:#}");
    assert_eq!(num(&v, &["errors_total"]), 0, "{v:#}");
    assert_eq!(num(&v, &["requests"]), 120, "{v:#}");
    assert_eq!(num(&v, &["responses"]), 120, "{v:#}");
    let h2 = &v["http2"];
    assert_eq!(num(h2, &["rst_refused_stream"]), 40, "{h2:#}");
    assert_eq!(num(h2, &["resent"]), 40, "{h2:#}");
    let by = &v["scenario"]["by_request"];
    for name in ["first", "a", "b", "c", "d", "last"] {
        assert_eq!(num(by, &[name, "count"]), 20, "{name}: {by:#}");
    }
    let lines = ng.log_lines();
    assert_eq!(lines.len(), 120);
    for uri in ["/", "/a", "/b", "/c", "/d", "/e"] {
        assert_eq!(lines.iter().filter(|l| l.uri == uri).count(), 20, "{uri}");
    }
    // Two connections per session: the first ends at its 3rd request, the second carries the
    // refused 2 and the last.
    let conns: std::collections::HashSet<_> = lines.iter().map(|l| &l.connection).collect();
    assert_eq!(conns.len(), 40);
}

/// The summary's first line names an HTTP/2 run's streams beside its users and then how the
/// users came (it read `closed model, 2 users ramped up over 1s x 4 stream(s)`).
#[test]
fn an_h2_ramp_reads_in_order_in_the_header() {
    let ng = Nginx::builder().h2c(true).start();
    let out = common::headroom()
        .args(["run", &ng.url("/"), "--h2c", "-c", "2", "--streams", "4"])
        .args(["--ramp-up", "1s", "-n", "200", "-d", BOUND])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let human = String::from_utf8_lossy(&out.stdout);
    assert!(
        human.contains("H2C, closed model, 2 users x 4 stream(s), ramped up over 1s, "),
        "{human}"
    );
    assert_eq!(ng.logged_status(200), 200);
}
