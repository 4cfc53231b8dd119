//! The HTTP/2 client (`--http2` over TLS by ALPN, `--h2c` by prior knowledge, `-c C --streams
//! S`, scenarios with `http: 2`) end to end, against two independent servers on 127.0.0.1:
//! nginx and h2o (headroom-testkit's tls_nginx and h2o). Each test checks the run's counts
//! against the server's access log, and that GOAWAY and RST_STREAM are counted and survived.
//! Every run is bounded in count and time. (The CLI's side, `--http2` refused with an http://
//! URL, the one line against a server without h2 and the human summary's header, is
//! crates/headroom/tests/http2.rs.)

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};

use common::access_log::AccessLog;
use common::h2o::H2o;
use common::pki::Pki;
use common::*;
use headroom_core::spec::RunSpec;
use headroom_run::RunSummary;

/// `URL --h2c -c C --streams S -n N -d BOUND`.
fn h2c(url: &str, c: u32, streams: u32, n: u64) -> RunSpec {
    let mut spec = counted(url, c, n);
    spec.h2c = true;
    spec.streams = Some(streams);
    spec
}

/// `URL --http2 --cacert CA -c C --streams S -n N -d BOUND`.
fn h2_tls(url: &str, ca: &std::path::Path, c: u32, streams: u32, n: u64) -> RunSpec {
    let mut spec = counted(url, c, n);
    spec.http2 = true;
    spec.cacert = pem(ca);
    spec.streams = Some(streams);
    spec
}

/// `-c 4 --streams 32 -n 10000` of `spec` (`--http2 --cacert` or `--h2c` against `url`): every
/// request answered, no error, and the server logged exactly 10,000 HTTP/2 requests.
fn ten_thousand_streams(spec: RunSpec, protocol: &str, server: &dyn AccessLog) {
    let url = spec.name().to_string();
    let f = run(&spec);
    let v = &f.summary;
    assert_clean(&f);
    assert_eq!(v.protocol, protocol, "{url}");
    assert_eq!(v.streams, Some(32));
    assert_eq!(v.requests, 10_000, "{url}: {}", show(v));
    assert_eq!(v.responses, 10_000, "{url}: {}", show(v));
    assert_eq!(v.errors_total, 0, "{url}: {}", show(v));
    assert_eq!(v.status.s2xx, 10_000, "{url}: {}", show(v));
    assert_eq!(v.connects, 4, "{url}: {}", show(v));
    let h = h2(v);
    assert_eq!(h.goaway, 0, "{url}: {h:#?}");
    assert_eq!(h.connection_errors, 0, "{url}: {h:#?}");
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
        assert_eq!(tls(v).handshakes, 4, "{url}: {}", show(v));
        assert_eq!(tls(v).alpn, ["h2"], "{url}");
    } else {
        assert!(v.tls.is_none(), "{url}: {:#?}", v.tls);
        assert!(lines.iter().all(|l| l.tls.is_none()), "{url}");
    }
}

#[test]
fn nginx_h2_over_tls_answers_ten_thousand_streams() {
    let pki = Pki::new();
    let ng = Nginx::builder().tls(&pki.localhost).http2(true).start();
    ten_thousand_streams(h2_tls(&ng.url("/"), &pki.ca, 4, 32, 10_000), "h2", &ng);
}

#[test]
fn nginx_h2c_answers_ten_thousand_streams() {
    let ng = Nginx::builder().h2c(true).start();
    ten_thousand_streams(h2c(&ng.url("/"), 4, 32, 10_000), "h2c", &ng);
}

#[test]
fn h2o_h2_over_tls_and_h2c_answer_ten_thousand_streams_each() {
    let pki = Pki::new();
    let h = H2o::start(&pki.localhost);
    ten_thousand_streams(h2_tls(&h.tls_url("/"), &pki.ca, 4, 32, 10_000), "h2", &h);
    let h = H2o::start(&pki.localhost);
    ten_thousand_streams(h2c(&h.h2c_url("/"), 4, 32, 10_000), "h2c", &h);
}

/// nginx's GOAWAY after 100 streams (keepalive_requests 100): the streams above its last id
/// were not processed, so they go again on a new connection (RFC 9113 §8.7, issue 26), counted
/// as `http2.resent`, not as errors. Before issue 26 each was a `stream_reset` error.
#[test]
fn goaway_after_100_streams_replaces_the_connection_and_unprocessed_streams_go_again() {
    let ng = Nginx::builder().h2c(true).keepalive_requests(100).start();
    let f = run(&h2c(&ng.url("/"), 2, 8, 1000));
    let v = &f.summary;
    assert_clean(&f);
    let h = h2(v);
    let goaway = h.goaway;
    assert_eq!(h.connection_errors, 0, "{h:#?}");
    // Every one of the 1,000 answered, once: the refused ones went again, and `requests`
    // counts each request once.
    assert_eq!(v.requests, 1000, "{}", show(v));
    assert_eq!(v.responses, 1000, "{}", show(v));
    assert_eq!(v.errors_total, 0, "{}", show(v));
    let refused = h.rst_refused_stream;
    assert!(
        refused > 0,
        "8 streams in flight when each GOAWAY came: {h:#?}"
    );
    assert_eq!(h.resent, refused, "{h:#?}");
    // At most 7 per GOAWAY (8 streams in flight, the 100th among them).
    assert!(
        refused <= 7 * goaway,
        "{refused} refused for {goaway} GOAWAYs: {h:#?}"
    );
    assert_eq!(v.status.s2xx, 1000);
    assert_eq!(ng.logged_status(200), 1000);
    assert_eq!(ng.log_lines().len(), 1000);
    // nginx sent a GOAWAY on each connection that reached 100 streams, and on no other: 10.
    let mut per_conn = HashMap::new();
    for l in ng.log_lines() {
        *per_conn.entry(l.connection).or_insert(0u64) += 1;
    }
    assert!(per_conn.values().all(|&n| n <= 100), "{per_conn:?}");
    let full = per_conn.values().filter(|&&n| n == 100).count() as u64;
    assert_eq!(
        goaway, full,
        "GOAWAYs against nginx's full connections: {per_conn:?}"
    );
    assert!(goaway >= 9, "{goaway} GOAWAYs: {}", show(v));
    let connects = v.connects;
    assert!(connects >= 10, "{}", show(v));
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
    let mut spec = h2c(&ng.url("/"), 2, 8, 1000);
    spec.rate = Some(2000.0);
    let f = run(&spec);
    let v = &f.summary;
    assert_clean(&f);
    assert_eq!(v.responses, 1000, "{}", show(v));
    assert_eq!(v.errors_total, 0, "{}", show(v));
    let h = h2(v);
    assert!(h.goaway >= 19, "{h:#?}");
    assert_eq!(h.resent, h.rst_refused_stream, "{h:#?}");
    assert_eq!(ng.logged_status(200), 1000);

    let ng = Nginx::builder().h2c(true).keepalive_requests(10).start();
    let mut spec = counted(&ng.url("/"), 2, 100);
    spec.h2c = true;
    spec.think = Some("10ms".into());
    let f = run(&spec);
    let v = &f.summary;
    assert_clean(&f);
    assert_eq!(v.responses, 100, "{}", show(v));
    assert_eq!(v.errors_total, 0, "{}", show(v));
    assert!(h2(v).goaway >= 9, "{}", show(v));
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
    let f = run(&h2c(&ng.url("/static/1m.bin"), 1, 8, 16));
    let v = &f.summary;
    assert_clean(&f);
    assert_eq!(v.requests, 16, "{}", show(v));
    assert_eq!(v.responses, 16, "{}", show(v));
    assert_eq!(v.errors_total, 0, "{}", show(v));
    let h = h2(v);
    let refused = h.rst_refused_stream;
    assert!((1..=7).contains(&refused), "{h:#?}");
    assert_eq!(h.resent, refused, "{h:#?}");
    assert_eq!(v.connects, 1, "{}", show(v));
    assert_eq!(ng.logged_status(200), 16);
}

#[test]
fn rst_stream_is_counted_by_code_and_the_server_is_used_on() {
    let pki = Pki::new();
    let ng = Nginx::builder().tls(&pki.localhost).http2(true).start();
    // /rst: nginx answers every stream with RST_STREAM(PROTOCOL_ERROR) and keeps the
    // connection.
    let v = run(&h2_tls(&ng.url("/rst"), &pki.ca, 2, 4, 100)).summary;
    assert_eq!(v.requests, 100, "{}", show(&v));
    assert_eq!(v.responses, 0, "{}", show(&v));
    assert_eq!(v.errors.stream_reset, 100, "{}", show(&v));
    assert_eq!(v.errors_total, 100, "{}", show(&v));
    let h = h2(&v);
    assert_eq!(h.rst_protocol_error, 100, "{h:#?}");
    assert_eq!(h.connection_errors, 0, "{h:#?}");
    assert_eq!(h.goaway, 0, "{h:#?}");
    // A reset stream leaves its connection up: the two connections carried all 100.
    assert_eq!(v.connects, 2, "{}", show(&v));
    assert_eq!(ng.logged_status(444), 100);

    // The same server, /: every request answered.
    let f = run(&h2_tls(&ng.url("/"), &pki.ca, 2, 4, 100));
    let v = &f.summary;
    assert_clean(&f);
    assert_eq!(v.responses, 100, "{}", show(v));
    assert_eq!(v.errors_total, 0, "{}", show(v));
    assert_eq!(h2(v).rst_protocol_error, 0);
    assert_eq!(ng.logged_status(200), 100);
}

/// Issue 16 over HTTP/2: exact codes per stream, and `--expect-status` deciding what fails, on
/// the HTTP/2 path of the engine (its own place where replies are counted).
#[test]
fn issue16_h2c_counts_exact_codes_and_checks_expect_status() {
    let ng = Nginx::builder().h2c(true).start();
    let f = run(&h2c(&ng.url("/missing"), 2, 4, 100));
    let v = &f.summary;
    // Every reply an error: no request succeeded (issue 26).
    assert_nothing_succeeded(&f);
    assert_eq!(v.status_codes, BTreeMap::from([(404, 100)]), "{}", show(v));
    assert_eq!(v.errors.http_4xx, 100, "{}", show(v));
    assert_eq!(v.errors.unexpected_status, 0, "{}", show(v));
    let mut spec = h2c(&ng.url("/fail"), 2, 4, 100);
    spec.expect_status = Some("200".into());
    let f = run(&spec);
    let v = &f.summary;
    assert_nothing_succeeded(&f);
    assert_eq!(v.status_codes, BTreeMap::from([(503, 100)]), "{}", show(v));
    assert_eq!(v.errors.unexpected_status, 100, "{}", show(v));
    assert_eq!(v.errors.http_5xx, 0, "{}", show(v));
    let mut spec = h2c(&ng.url("/missing"), 2, 4, 100);
    spec.expect_status = Some("404".into());
    let v = run(&spec).summary;
    assert_eq!(v.errors_total, 0, "{}", show(&v));
    assert_eq!(ng.logged_status(404), 200);
    assert_eq!(ng.logged_status(503), 100);
}

#[test]
fn streams_at_a_rate_keep_slow_replies_in_flight_at_once() {
    // 100 requests/s on one connection to replies that take 100 ms (headroom serve's
    // /sleep/100 behind an h2c nginx): ~10 must be in flight at once. With --streams 16 the
    // rate holds and each reply's latency is about the sleep; with one stream the connection
    // carries at most 10/s and the corrected latency shows the queue (coordinated omission).
    let backend = serve();
    let ng = Nginx::builder()
        .h2c(true)
        .upstream(backend.local_addr())
        .start();
    let url = ng.url("/sleep/100");
    // --h2c -c 1 --rate 100 -d 3s --streams S
    let base = |streams: u32| {
        let mut spec = url_spec(&url);
        spec.h2c = true;
        spec.connections = Some(1);
        spec.rate = Some(100.0);
        spec.duration = secs(3);
        spec.streams = Some(streams);
        spec
    };
    let f = run(&base(16));
    let v = &f.summary;
    assert_clean(&f);
    assert_eq!(v.streams, Some(16));
    let requests = v.requests;
    assert!(
        (270..=310).contains(&requests),
        "{requests} requests: {}",
        show(v)
    );
    assert_eq!(v.errors_total, 0, "{}", show(v));
    assert_eq!(v.connects, 1, "{}", show(v));
    let p50 = v.latency_us.p50;
    let p99 = v.latency_us.p99;
    assert!(
        (100_000..180_000).contains(&p50),
        "p50 {p50}µs: {}",
        show(v)
    );
    assert!(p99 < 400_000, "p99 {p99}µs: {}", show(v));
    let answered = v.responses;
    let logged = ng.log_lines().iter().filter(|l| l.status == 200).count() as u64;
    assert!(
        logged >= answered && logged <= requests,
        "nginx logged {logged}, headroom {answered} answered of {requests}"
    );

    let f = run(&base(1));
    let v = &f.summary;
    assert_clean(&f);
    let requests = v.requests;
    assert!(
        requests <= 40,
        "one stream carries at most ~10/s: {requests}: {}",
        show(v)
    );
    let p99 = v.latency_us.p99;
    assert!(
        p99 > 1_000_000,
        "the queue shows in corrected latency: p99 {p99}µs"
    );
}

/// The port of a server's URL.
fn port(url: &str) -> u16 {
    url.rsplit_once(':')
        .and_then(|(_, p)| p.trim_end_matches('/').parse().ok())
        .unwrap()
}

/// A scenario over HTTP/2 (`http: 2`): `tls` is the server's `tls:` value (`""` for h2c).
fn h2_scenario(port: u16, tls: &str, ca: Option<&std::path::Path>) -> RunSummary {
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
    run(&scenario_with_files(&yaml, &files)).summary
}

#[test]
fn scenarios_speak_http2_over_tls_and_h2c() {
    let pki = Pki::new();
    for tls_on in [false, true] {
        let b = Nginx::builder().http2(true);
        let ng = if tls_on {
            b.tls(&pki.localhost)
        } else {
            b.h2c(true)
        }
        .start();
        let port = port(&ng.url("/"));
        let v = if tls_on {
            h2_scenario(port, ", tls: {cacert: ca.pem}", Some(&pki.ca))
        } else {
            h2_scenario(port, "", None)
        };
        let want = if tls_on { "h2" } else { "h2c" };
        assert_eq!(v.protocol, want, "{}", show(&v));
        assert_eq!(v.requests, 60, "{}", show(&v));
        assert_eq!(v.responses, 60, "{}", show(&v));
        assert_eq!(v.status.s2xx, 20, "{}", show(&v));
        assert_eq!(v.status.s4xx, 40, "{}", show(&v));
        let by = &v.scenario.as_ref().expect("a scenario section").by_request;
        for name in ["home", "static", "missing"] {
            assert_eq!(by.get(name).map(|n| n.count), Some(20), "{name}: {by:#?}");
        }
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
        if tls_on {
            assert_eq!(tls(&v).handshakes, 20, "{}", show(&v));
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
    let port = port(&ng.url("/"));
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
    let f = run(&scenario(&yaml, None));
    let v = &f.summary;
    assert_clean(&f);
    assert_eq!(v.errors_total, 0, "{}", show(v));
    assert_eq!(v.requests, 120, "{}", show(v));
    assert_eq!(v.responses, 120, "{}", show(v));
    let h = h2(v);
    assert_eq!(h.rst_refused_stream, 40, "{h:#?}");
    assert_eq!(h.resent, 40, "{h:#?}");
    let by = &v.scenario.as_ref().expect("a scenario section").by_request;
    for name in ["first", "a", "b", "c", "d", "last"] {
        assert_eq!(by.get(name).map(|n| n.count), Some(20), "{name}: {by:#?}");
    }
    let lines = ng.log_lines();
    assert_eq!(lines.len(), 120);
    for uri in ["/", "/a", "/b", "/c", "/d", "/e"] {
        assert_eq!(lines.iter().filter(|l| l.uri == uri).count(), 20, "{uri}");
    }
    // Two connections per session: the first ends at its 3rd request, the second carries the
    // refused 2 and the last.
    let conns: HashSet<_> = lines.iter().map(|l| &l.connection).collect();
    assert_eq!(conns.len(), 40);
}
