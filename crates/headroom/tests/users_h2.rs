//! Users that behave like real users over HTTP/2 (issue 28): cookies, redirects and decoded
//! bodies as over HTTP/1.1 (tests/users.rs), against nginx speaking h2c (HTTP/2 in clear text,
//! prior knowledge) on loopback. Every figure is checked against what nginx logged, and every
//! logged request must have come over HTTP/2.

mod common;

use std::collections::HashSet;

use common::tls_nginx::TlsNginx;
use common::*;

/// Time bound of every load below: far above what each needs, so a hang fails the test.
const BOUND: &str = "30s";

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
    let (v, out) = run_scenario(&yaml, &[], &["-d", BOUND]);
    assert_eq!(out.status.code(), Some(0), "{v:#}");
    assert_eq!(num(&v, &["responses"]), 2000, "{v:#}");
    assert_eq!(num(&v, &["errors_total"]), 0, "{v:#}");
    assert_eq!(num(&v, &["http", "cookies_stored"]), 1000, "{v:#}");
    assert_eq!(
        num(&v, &["scenario", "sessions", "completed"]),
        1000,
        "{v:#}"
    );
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
    let (v, _) = run_scenario(&yaml, &[], &["-d", BOUND, "--no-cookies"]);
    assert_eq!(num(&v, &["http", "cookies_stored"]), 0, "{v:#}");
    assert_eq!(v["status_codes"]["401"], 1000, "{v:#}");
    assert_eq!(count(&log(&ng)[before..], "/private", 401), 1000);
}

#[test]
fn issue28_a_chain_of_three_redirects_is_followed_over_http2() {
    let ng = site();
    let n = 50u64;
    let (v, out) = run_json(
        &ng.url("/r1"),
        &[
            "--h2c",
            "-c",
            "2",
            "-n",
            &n.to_string(),
            "--follow",
            "3",
            "-d",
            BOUND,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{v:#}");
    assert_eq!(num(&v, &["requests"]), 4 * n, "{v:#}");
    assert_eq!(num(&v, &["responses"]), 4 * n, "{v:#}");
    for code in ["302", "301", "307", "200"] {
        assert_eq!(v["status_codes"][code], n, "{code}: {v:#}");
    }
    assert_eq!(num(&v, &["http", "redirects_followed"]), 3 * n, "{v:#}");
    assert_eq!(num(&v, &["errors_total"]), 0, "{v:#}");
    let l = log(&ng);
    for (uri, code) in [("/r1", 302), ("/r2", 301), ("/r3", 307), ("/final", 200)] {
        assert_eq!(count(&l, uri, code), n as usize, "{uri}");
    }
    // A hop waits for its reply: more streams per connection cannot apply, and say so.
    let out = run_plain(
        &ng.url("/r1"),
        &["--h2c", "--streams", "4", "--follow", "3"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        one_line(&out).contains("--streams 4 cannot apply"),
        "{}",
        one_line(&out)
    );
}

#[test]
fn issue28_gzip_bodies_are_decoded_per_stream_over_http2() {
    let ng = site();
    let text = "headroom decodes what nginx compresses. ".repeat(400);
    std::fs::create_dir_all(ng.dir().join("www/text")).unwrap();
    std::fs::write(ng.dir().join("www/text/a.txt"), &text).unwrap();
    let n = 200u64;
    // Eight streams at once on each of two connections: bodies interleave on the wire.
    let (v, out) = run_json(
        &ng.url("/text/a.txt"),
        &[
            "--h2c",
            "--compressed",
            "-c",
            "2",
            "--streams",
            "8",
            "-n",
            &n.to_string(),
            "-d",
            BOUND,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{v:#}");
    assert_eq!(num(&v, &["errors_total"]), 0, "{v:#}");
    assert_eq!(num(&v, &["http", "compressed_responses"]), n, "{v:#}");
    assert_eq!(
        num(&v, &["http", "body_bytes_decoded"]),
        n * text.len() as u64,
        "{v:#}"
    );
    let encoded = num(&v, &["http", "body_bytes_encoded"]);
    assert!(encoded > 0 && encoded * 10 < n * text.len() as u64, "{v:#}");
    assert_eq!(count(&log(&ng), "/text/a.txt", 200), n as usize);
}

#[test]
fn issue28_streams_of_a_url_run_carry_the_users_cookie() {
    let ng = site();
    // Two users, four streams each: the first streams go before any reply (no cookie yet);
    // from the first reply on, every request carries the cookie that user's jar holds.
    let (v, out) = run_json(
        &ng.url("/visit"),
        &[
            "--h2c",
            "-c",
            "2",
            "--streams",
            "4",
            "-n",
            "400",
            "-d",
            BOUND,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{v:#}");
    assert_eq!(num(&v, &["errors_total"]), 0, "{v:#}");
    let l = log(&ng);
    assert_eq!(l.len(), 400);
    let without = l.iter().filter(|(_, _, c)| c == "-").count();
    assert!(
        without <= 2 * 4,
        "at most the first streams of each user: {without}"
    );
    let stored = num(&v, &["http", "cookies_stored"]);
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
    let (v, _) = run_json(
        &ng.url("/visit"),
        &[
            "--h2c",
            "-c",
            "2",
            "--streams",
            "4",
            "-n",
            "100",
            "--no-cookies",
            "-d",
            BOUND,
        ],
    );
    assert_eq!(num(&v, &["http", "cookies_stored"]), 0, "{v:#}");
    assert!(log(&ng)[before..].iter().all(|(_, _, c)| c == "-"));
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
    let ap = common::apache::Apache::start(
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
    let (v, out) = run_json(
        &ap.url("/digest/"),
        &[
            "--h2c",
            "-a",
            "bob:s3cret",
            "--digest",
            "-c",
            &users.to_string(),
            "-n",
            &n.to_string(),
            "-d",
            BOUND,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{v:#}");
    // Each user is challenged once, answers, then answers every later request at once.
    assert_eq!(v["status_codes"]["200"], n, "{v:#}");
    assert_eq!(v["status_codes"]["401"], users, "{v:#}");
    assert_eq!(num(&v, &["http", "auth_challenges"]), users, "{v:#}");
    assert_eq!(num(&v, &["errors_total"]), 0, "{v:#}");
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
    let (v, out) = run_scenario(&yaml, &[], &["-n", "8", "-d", BOUND]);
    assert_eq!(out.status.code(), Some(0), "{v:#}");
    let by = &v["scenario"]["by_request"];
    assert_eq!(by["slow"]["count"], 4, "{v:#}");
    assert_eq!(by["fast"]["count"], 4, "{v:#}");
    let slow_min = num(by, &["slow", "latency_us", "min"]);
    let fast_max = num(by, &["fast", "latency_us", "max"]);
    assert!(slow_min >= 300_000, "the slow request's own time: {v:#}");
    assert!(fast_max < 200_000, "the fast request's own time: {v:#}");
}
