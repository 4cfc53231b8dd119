//! Users that behave like real users over HTTP/2 (issue 28): cookies, redirects and decoded
//! bodies as over HTTP/1.1 (tests/users.rs), against nginx speaking h2c (HTTP/2 in clear text,
//! prior knowledge) on loopback. Every figure is checked against what nginx logged, and every
//! logged request must have come over HTTP/2. (The CLI's side, `--streams` refused with
//! `--follow`, is crates/headroom/tests/users_h2.rs.)

mod common;

use std::collections::{BTreeMap, HashSet};

use common::tls_nginx::TlsNginx;
use common::*;
use headroom_core::spec::RunSpec;

/// `URL --h2c -c C -n N -d BOUND`.
fn h2c(url: &str, c: u32, n: u64) -> RunSpec {
    let mut spec = counted(url, c, n);
    spec.h2c = true;
    spec
}

/// A login that sets a per-login session cookie, a page that needs it, a chain of three
/// redirects, a page that sets a cookie only to a visitor without one, and a text file nginx
/// compresses. The log shows the URI, the code, the cookie and the protocol.
fn site() -> TlsNginx {
    Nginx::builder()
        .h2c(true)
        .site(
            r#"
    location = /login { add_header Set-Cookie "sid=$request_id; Path=/; HttpOnly" always; return 200 "welcome\n"; }
    location = /private { if ($cookie_sid = "") { return 401; } return 200 "secret\n"; }
    location = /r1 { return 302 /r2; }
    location = /r2 { return 301 http://127.0.0.1:{port}/r3; }
    location = /r3 { return 307 /final; }
    location = /final { return 200 "done\n"; }
    location = /visit { if ($cookie_sid = "") { add_header Set-Cookie "sid=$request_id; Path=/" always; } return 200 "hi\n"; }
    location /text/ { root {dir}/www; gzip on; gzip_types text/plain; gzip_min_length 0; }
"#,
            "$request_uri $status c=$cookie_sid $server_protocol",
        )
        .start()
}

/// `(uri, status, cookie)` of every logged request; panics on one that was not HTTP/2.
fn log(ng: &TlsNginx) -> Vec<(String, u16, String)> {
    ng.site_log()
        .iter()
        .filter_map(|l| {
            let mut p = l.split(' ');
            let uri = p.next()?.to_string();
            let status = p.next()?.parse().ok()?;
            let cookie = p.next()?.strip_prefix("c=")?.to_string();
            let protocol = p.next()?;
            assert_eq!(protocol, "HTTP/2.0", "{l}");
            Some((uri, status, cookie))
        })
        .collect()
}

fn count(log: &[(String, u16, String)], uri: &str, status: u16) -> usize {
    log.iter()
        .filter(|(u, s, _)| u == uri && *s == status)
        .count()
}

#[test]
fn issue28_thousand_users_log_in_over_http2_and_reach_the_cookie_protected_page() {
    let ng = site();
    // As tests/users.rs over HTTP/1.1: constant arrivals every 4 ms, 1,000 before 3,998 ms.
    let yaml = format!(
        r#"
servers: [{{host: 127.0.0.1, port: {port}, http: 2}}]
load:
  phases: [{{duration: 3998ms, arrival_rate: 250, arrival: constant, max_users: 1000}}]
sessions:
  - name: visit
    steps:
      - request: {{method: POST, path: /login, body: "user=${{user_id}}"}}
      - request: GET /private
"#,
        port = ng.addr.port()
    );
    let f = run(&scenario(&yaml, None));
    assert_clean(&f);
    let v = &f.summary;
    assert_eq!(v.responses, 2000, "{}", show(v));
    assert_eq!(v.errors_total, 0, "{}", show(v));
    assert_eq!(v.status_codes, BTreeMap::from([(200, 2000)]), "{}", show(v));
    assert_eq!(http(v).cookies_stored, 1000, "{}", show(v));
    let sessions = &v.scenario.as_ref().expect("a scenario's section").sessions;
    assert_eq!(sessions.completed, 1000, "{}", show(v));
    let l = log(&ng);
    assert_eq!(count(&l, "/login", 200), 1000);
    assert_eq!(
        count(&l, "/private", 200),
        1000,
        "every user reached the page"
    );
    assert_eq!(count(&l, "/private", 401), 0);
    // Each user sent its own cookie, and none came back to /login.
    let private: HashSet<&str> = l
        .iter()
        .filter(|(u, ..)| u == "/private")
        .map(|(_, _, c)| c.as_str())
        .collect();
    assert_eq!(private.len(), 1000, "1,000 distinct session cookies");
    assert!(!private.contains("-"));
    assert!(l
        .iter()
        .filter(|(u, ..)| u == "/login")
        .all(|(_, _, c)| c == "-"));

    // Without a jar the page refuses every user: the cookies above were the browser's doing.
    let before = l.len();
    let mut spec = scenario(&yaml, None);
    spec.no_cookies = true;
    let v = run(&spec).summary;
    assert_eq!(http(&v).cookies_stored, 0, "{}", show(&v));
    assert_eq!(v.status_codes.get(&401), Some(&1000), "{}", show(&v));
    assert_eq!(count(&log(&ng)[before..], "/private", 401), 1000);
}

#[test]
fn issue28_a_chain_of_three_redirects_is_followed_over_http2() {
    let ng = site();
    let n = 50u64;
    let mut spec = h2c(&ng.url("/r1"), 2, n);
    spec.follow = 3;
    let f = run(&spec);
    assert_clean(&f);
    let v = &f.summary;
    assert_eq!(v.protocol, "h2c", "{}", show(v));
    assert_eq!(v.requests, 4 * n, "{}", show(v));
    assert_eq!(v.responses, 4 * n, "{}", show(v));
    assert_eq!(
        v.status_codes,
        BTreeMap::from([(302, n), (301, n), (307, n), (200, n)]),
        "{}",
        show(v)
    );
    assert_eq!(http(v).redirects_followed, 3 * n, "{}", show(v));
    assert_eq!(v.errors_total, 0, "{}", show(v));
    let l = log(&ng);
    for (uri, code) in [("/r1", 302), ("/r2", 301), ("/r3", 307), ("/final", 200)] {
        assert_eq!(count(&l, uri, code), n as usize, "{uri}");
    }
}

#[test]
fn issue28_gzip_bodies_are_decoded_per_stream_over_http2() {
    let ng = site();
    let text = "headroom decodes what nginx compresses. ".repeat(400);
    std::fs::create_dir_all(ng.dir().join("www/text")).unwrap();
    std::fs::write(ng.dir().join("www/text/a.txt"), &text).unwrap();
    let n = 200u64;
    // Eight streams at once on each of two connections: bodies interleave on the wire.
    let mut spec = h2c(&ng.url("/text/a.txt"), 2, n);
    spec.compressed = true;
    spec.streams = Some(8);
    let f = run(&spec);
    assert_clean(&f);
    let v = &f.summary;
    assert_eq!(v.streams, Some(8), "{}", show(v));
    assert_eq!(v.errors_total, 0, "{}", show(v));
    assert_eq!(v.status_codes, BTreeMap::from([(200, n)]), "{}", show(v));
    assert_eq!(http(v).compressed_responses, n, "{}", show(v));
    assert_eq!(
        http(v).body_bytes_decoded,
        n * text.len() as u64,
        "{}",
        show(v)
    );
    let encoded = http(v).body_bytes_encoded;
    assert!(
        encoded > 0 && encoded * 10 < n * text.len() as u64,
        "{}",
        show(v)
    );
    assert_eq!(count(&log(&ng), "/text/a.txt", 200), n as usize);
}

#[test]
fn issue28_streams_of_a_url_run_carry_the_users_cookie() {
    let ng = site();
    // Two users, four streams each: the first streams go before any reply (no cookie yet);
    // from the first reply on, every request carries the cookie that user's jar holds.
    let mut spec = h2c(&ng.url("/visit"), 2, 400);
    spec.streams = Some(4);
    let f = run(&spec);
    assert_clean(&f);
    let v = &f.summary;
    assert_eq!(v.errors_total, 0, "{}", show(v));
    let l = log(&ng);
    assert_eq!(l.len(), 400);
    let without = l.iter().filter(|(_, _, c)| c == "-").count();
    assert!(
        without <= 2 * 4,
        "at most the first streams of each user: {without}"
    );
    let stored = http(v).cookies_stored;
    assert!(
        (2..=(2 * 4) as u64).contains(&stored),
        "one cookie per first reply: {stored}"
    );
    let sent: HashSet<&str> = l
        .iter()
        .filter(|(_, _, c)| c != "-")
        .map(|(_, _, c)| c.as_str())
        .collect();
    assert!(sent.len() >= 2 && sent.len() as u64 <= stored, "{sent:?}");
    // --no-cookies: nothing stored, nothing sent.
    let before = l.len();
    let mut spec = h2c(&ng.url("/visit"), 2, 100);
    spec.streams = Some(4);
    spec.no_cookies = true;
    let v = run(&spec).summary;
    assert_eq!(http(&v).cookies_stored, 0, "{}", show(&v));
    let after = log(&ng);
    assert_eq!(after.len(), before + 100);
    assert!(after[before..].iter().all(|(_, _, c)| c == "-"));
}

/// MD5 of `data` by md5sum (the test's own, independent of headroom's Digest code).
fn md5_hex(data: &[u8]) -> String {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut c = Command::new("md5sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("md5sum");
    c.stdin.take().unwrap().write_all(data).unwrap();
    let out = c.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

#[test]
fn issue28_digest_challenges_are_answered_over_http2_by_apache() {
    // Debian's Apache with mod_http2 speaking h2c (prior knowledge) and Digest on /digest/.
    let conf = r#"Protocols h2c http/1.1
<Location /digest/>
  AuthType Digest
  AuthName "headroom"
  AuthDigestProvider file
  AuthUserFile {dir}/digest
  Require valid-user
</Location>"#;
    let ap = apache::Apache::start(
        &[
            "http2",
            "authn_core",
            "authn_file",
            "authz_user",
            "auth_digest",
        ],
        conf,
        "%U %>s u=%u %H",
    );
    let dir = ap.dir.path();
    std::fs::create_dir_all(dir.join("www/digest")).unwrap();
    std::fs::write(dir.join("www/digest/index.html"), "digest ok\n").unwrap();
    let ha1 = md5_hex(b"bob:headroom:s3cret");
    std::fs::write(dir.join("digest"), format!("bob:headroom:{ha1}\n")).unwrap();
    let _ = std::process::Command::new("chmod")
        .args(["-R", "a+rX", &dir.display().to_string()])
        .status();
    let (n, users) = (100u64, 3u64);
    let mut spec = h2c(&ap.url("/digest/"), users as u32, n);
    spec.auth = Some("bob:s3cret".into());
    spec.digest = true;
    let f = run(&spec);
    assert_clean(&f);
    let v = &f.summary;
    // Each user is challenged once, answers, then answers every later request at once.
    assert_eq!(
        v.status_codes,
        BTreeMap::from([(200, n), (401, users)]),
        "{}",
        show(v)
    );
    assert_eq!(http(v).auth_challenges, users, "{}", show(v));
    assert_eq!(v.errors_total, 0, "{}", show(v));
    let text = ap.log_text();
    let ok = text
        .lines()
        .filter(|l| l.starts_with("/digest/") && l.ends_with(" 200 u=bob HTTP/2.0"))
        .count();
    assert_eq!(ok, n as usize, "{text}");
}

#[test]
fn issue28_a_pipelines_streams_are_counted_under_their_own_names_whatever_order_they_finish_in() {
    // Over HTTP/2 a pipeline's requests are concurrent streams: the slow one (300 ms behind
    // nginx, from headroom serve's /sleep/) finishes after the fast one that was sent after it.
    let upstream = serve();
    let ng = Nginx::builder()
        .h2c(true)
        .upstream(upstream.local_addr())
        .start();
    let yaml = format!(
        r#"
servers: [{{host: 127.0.0.1, port: {port}, http: 2}}]
load: {{users: [{{count: 2}}]}}
sessions:
  - name: s
    steps:
      - pipeline:
          - request: {{name: slow, path: /sleep/300}}
          - request: {{name: fast, path: /}}
"#,
        port = ng.addr.port()
    );
    let f = run(&scenario(&yaml, Some(8)));
    assert_clean(&f);
    let v = &f.summary;
    let by = &v
        .scenario
        .as_ref()
        .expect("a scenario's section")
        .by_request;
    assert_eq!(by["slow"].count, 4, "{}", show(v));
    assert_eq!(by["fast"].count, 4, "{}", show(v));
    assert_eq!(by["slow"].errors + by["fast"].errors, 0, "{}", show(v));
    let slow_min = by["slow"].latency_us.min;
    let fast_max = by["fast"].latency_us.max;
    assert!(
        slow_min >= 300_000,
        "the slow request's own time: {}",
        show(v)
    );
    assert!(
        fast_max < 200_000,
        "the fast request's own time: {}",
        show(v)
    );
}
