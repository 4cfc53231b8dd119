//! headroom's TLS client end to end, against real servers on 127.0.0.1: nginx with the test PKI's
//! certificates (tests/common/tls_nginx.rs), and the TLS listeners of the shared services that
//! scripts/test starts (the WebSocket echo's wss://, ejabberd's direct TLS and STARTTLS,
//! PostgreSQL's SSLRequest). Each test checks headroom's figures against what the server logged:
//! requests, connections, resumed sessions. Every run is bounded in count and time (`-d`).

mod common;

use std::sync::OnceLock;

use common::access_log::AccessLog;
use common::pki::Pki;
use common::tls_services::{pg_tls_url, test_ca, wss_url, xmpp_starttls_addr, xmpp_tls_addr};
use common::{err, num, one_line, repo_root, run_json, run_plain, run_scenario, Nginx};

/// Time bound of every load below: far above what each needs, so a hang fails the test.
const BOUND: &str = "20s";

#[test]
fn https_keepalive_one_handshake_per_connection_and_every_request_logged() {
    let pki = Pki::new();
    let ng = Nginx::builder().tls(&pki.localhost).start();
    let ca = pki.ca.to_str().unwrap();
    let (v, out) = run_json(
        &ng.url("/"),
        &["--cacert", ca, "-c", "10", "--per-user", "200", "-d", BOUND],
    );
    assert!(out.status.success(), "{v:#}");
    assert_eq!(v["protocol"], "http/1.1");
    assert_eq!(num(&v, &["requests"]), 2000, "{v:#}");
    assert_eq!(num(&v, &["responses"]), 2000);
    assert_eq!(num(&v, &["errors_total"]), 0, "{v:#}");
    assert_eq!(num(&v, &["status", "2xx"]), 2000, "{v:#}");
    // Keep-alive: one connection, and one handshake, per user; the preflight's handshake is
    // not part of the load.
    assert_eq!(num(&v, &["connects"]), 10, "{v:#}");
    assert_eq!(num(&v, &["tls", "handshakes"]), 10, "{v:#}");
    assert_eq!(num(&v, &["tls_us", "count"]), 10, "{v:#}");
    assert_eq!(v["tls"]["ca"], "file");
    assert_eq!(ng.log_lines().len(), 2000);
    assert_eq!(ng.logged_status(200), 2000);
    assert_eq!(ng.logged_tls("TLSv1.3"), 2000, "TLS 1.3 by default");
    assert_eq!(ng.logged_connections(), 10, "{:?}", &ng.log_lines()[..3]);
}

#[test]
fn https_connection_per_request_resumes_sessions_unless_told_not_to() {
    let pki = Pki::new();
    let ca = pki.ca.to_str().unwrap();
    let base = [
        "--cacert",
        ca,
        "--no-keepalive",
        "-c",
        "4",
        "--per-user",
        "50",
        "-d",
        BOUND,
    ];

    let ng = Nginx::builder().tls(&pki.localhost).start();
    let (v, out) = run_json(&ng.url("/"), &base);
    assert!(out.status.success(), "{v:#}");
    assert_eq!(num(&v, &["responses"]), 200, "{v:#}");
    assert_eq!(num(&v, &["errors_total"]), 0, "{v:#}");
    assert_eq!(ng.log_lines().len(), 200);
    assert_eq!(num(&v, &["connects"]), 200, "{v:#}");
    assert_eq!(ng.logged_connections(), 200);
    assert_eq!(num(&v, &["tls", "handshakes"]), 200, "{v:#}");
    assert_eq!(num(&v, &["tls_us", "count"]), 200);
    assert_eq!(v["tls"]["resume"], true);
    // Only each user's first handshake is full (each user resumes its own session, issue 26);
    // headroom's count and nginx's agree.
    let resumed = num(&v, &["tls", "resumed"]);
    assert_eq!(resumed, 200 - 4, "{:#}", v["tls"]);
    let reused = ng.logged_reused();
    assert_eq!(resumed as usize, reused, "headroom and nginx disagree");

    let ng = Nginx::builder().tls(&pki.localhost).start();
    let (v, out) = run_json(&ng.url("/"), &[&base[..], &["--no-tls-resume"]].concat());
    assert!(out.status.success(), "{v:#}");
    assert_eq!(num(&v, &["responses"]), 200, "{v:#}");
    assert_eq!(num(&v, &["errors_total"]), 0, "{v:#}");
    assert_eq!(num(&v, &["tls", "handshakes"]), 200, "{v:#}");
    assert_eq!(v["tls"]["resume"], false);
    assert_eq!(num(&v, &["tls", "resumed"]), 0, "{v:#}");
    assert_eq!(ng.log_lines().len(), 200);
    assert_eq!(ng.logged_reused(), 0, "{:?}", &ng.log_lines()[..3]);
}

/// One TLS failure made on purpose: the preflight stops at once with one line naming the kind
/// and the fix (`fixes`), and nothing reaches the server; with --no-preflight each of 20
/// attempts is counted under the kind.
fn check_failure(
    url: &str,
    args: &[&str],
    kind: &str,
    fixes: &[&str],
    requests_logged: impl Fn() -> usize,
) {
    let out = run_plain(url, &[args, &["-c", "1", "-n", "20", "-d", BOUND]].concat());
    assert_eq!(out.status.code(), Some(1), "{kind}: {out:?}");
    assert!(out.stdout.is_empty(), "{kind}: {out:?}");
    let line = one_line(&out);
    assert!(line.contains(&format!("[{kind}]")), "{kind}: {line}");
    for fix in fixes {
        assert!(line.contains(fix), "{kind}: no '{fix}' in: {line}");
    }
    assert_eq!(
        requests_logged(),
        0,
        "{kind}: the preflight let a request through"
    );

    let (v, out) = run_json(
        url,
        &[
            args,
            &["--no-preflight", "-c", "1", "-n", "20", "-d", BOUND],
        ]
        .concat(),
    );
    assert_eq!(err(&v, kind), 20, "{kind}: {v:#}");
    assert_eq!(num(&v, &["errors_total"]), 20, "{kind}: {v:#}");
    assert_eq!(num(&v, &["responses"]), 0, "{kind}: {v:#}");
    assert_eq!(num(&v, &["tls", "handshakes"]), 0, "{kind}: {v:#}");
    assert_eq!(
        requests_logged(),
        0,
        "{kind}: a failed handshake carried a request"
    );
    // Failed handshakes are the run's findings, not a usage error: the summary is printed.
    assert_ne!(out.status.code(), Some(2), "{kind}: {out:?}");
}

#[test]
fn tls_failures_are_named_by_the_preflight_and_counted_by_kind_without_it() {
    let pki = Pki::new();
    let ca = pki.ca.to_str().unwrap();

    let own = Nginx::builder().tls(&pki.self_signed).start();
    check_failure(
        &own.url("/"),
        &[],
        "tls_untrusted",
        &["--cacert", "-k"],
        || own.log_lines().len(),
    );
    // -k: the same server loads with no error.
    let (v, out) = run_json(&own.url("/"), &["-k", "-c", "2", "-n", "20", "-d", BOUND]);
    assert!(out.status.success(), "{v:#}");
    assert_eq!(num(&v, &["responses"]), 20, "{v:#}");
    assert_eq!(num(&v, &["errors_total"]), 0, "{v:#}");
    assert_eq!(v["tls"]["insecure"], true);
    assert_eq!(own.log_lines().len(), 20);

    let wrong = Nginx::builder().tls(&pki.wrong_name).start();
    check_failure(
        &wrong.url_localhost("/"),
        &["--cacert", ca],
        "tls_wrong_name",
        &["'localhost'", "-k"],
        || wrong.log_lines().len(),
    );

    let expired = Nginx::builder().tls(&pki.expired).start();
    check_failure(
        &expired.url("/"),
        &["--cacert", ca],
        "tls_expired",
        &["expired", "-k"],
        || expired.log_lines().len(),
    );

    let tls13 = Nginx::builder()
        .tls(&pki.localhost)
        .tls_protocols("TLSv1.3")
        .start();
    check_failure(
        &tls13.url("/"),
        &["--cacert", ca, "--tls-max", "1.2"],
        "tls_version",
        &["--tls-min/--tls-max"],
        || tls13.log_lines().len(),
    );

    // A plain HTTP server answers the ClientHello with a 400 of its own, which nginx logs:
    // count only the requests it served.
    let plain = Nginx::start();
    let served = || {
        plain.logged();
        let log = std::fs::read_to_string(plain.dir.path().join("access.log")).unwrap_or_default();
        log.lines().filter(|l| !l.ends_with(" 400")).count()
    };
    let url = format!("https://{}/", plain.addr);
    check_failure(
        &url,
        &["--cacert", ca],
        "tls_malformed",
        &["http://"],
        served,
    );
}

#[test]
fn a_cacert_that_is_not_pem_is_a_usage_error_of_one_line() {
    let ng = Nginx::builder().tls(&Pki::new().localhost).start();
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("ca.pem");
    std::fs::write(&bad, "this is not a certificate\n").unwrap();
    let out = run_plain(
        &ng.url("/"),
        &["--cacert", bad.to_str().unwrap(), "-n", "10", "-d", BOUND],
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let line = one_line(&out);
    assert!(line.contains("--cacert"), "{line}");
    assert_eq!(ng.log_lines().len(), 0);
    // A missing file too.
    let out = run_plain(
        &ng.url("/"),
        &["--cacert", "/nonexistent/ca.pem", "-n", "10", "-d", BOUND],
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(one_line(&out).contains("/nonexistent/ca.pem"), "{out:?}");
}

fn split(addr: &str) -> (&str, &str) {
    addr.rsplit_once(':').expect("HOST:PORT")
}

#[test]
fn wss_echo_every_message_sent_is_received() {
    let url = wss_url();
    let addr = url.strip_prefix("wss://").unwrap().trim_end_matches('/');
    let (host, port) = split(addr);
    assert_eq!(host, "127.0.0.1");
    // 4 users arrive over 1 s, each sends 5 messages and closes: 20 echoes. The CA file is
    // named relative to the scenario.
    let yaml = format!(
        r#"
servers: [{{host: {host}, port: {port}, protocol: websocket, tls: {{cacert: ca.pem}}}}]
websocket: {{path: /echo}}
load: {{phases: [{{duration: 1s, arrival_rate: 4, arrival: constant}}]}}
sessions:
  - name: s
    steps:
      - loop: {{count: 5, steps: [{{ws: {{send: "over tls ${{user_id}}", name: echo}}}}]}}
      - ws: close
"#
    );
    let (v, out) = run_scenario(&yaml, &[("ca.pem", &test_ca())], &["-d", BOUND]);
    assert!(out.status.success(), "{v:#}");
    assert_eq!(v["protocol"], "websocket");
    assert_eq!(num(&v, &["errors_total"]), 0, "{v:#}");
    let w = &v["scenario"]["protocol"]["websocket"];
    assert_eq!(num(w, &["messages_sent"]), 20, "{w:#}");
    assert_eq!(num(w, &["messages_received"]), 20, "{w:#}");
    assert_eq!(num(&v, &["scenario", "by_request", "echo", "count"]), 20);
    assert_eq!(num(&v, &["tls", "handshakes"]), 4, "{v:#}");
    assert_eq!(num(&v, &["tls_us", "count"]), 4, "{v:#}");
}

/// Accounts user20151..user20170 (password `pass`), which no other test uses: registered once
/// per test binary (scripts/ejabberd.sh register is idempotent).
fn xmpp_tls_users() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        xmpp_starttls_addr();
        let out = std::process::Command::new(repo_root().join("scripts/ejabberd.sh"))
            .args(["register", "20151", "20170"])
            .output()
            .expect("scripts/ejabberd.sh register");
        assert!(
            out.status.success(),
            "scripts/ejabberd.sh register 20151 20170: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
}

/// 10 users log in over TLS (`tls` is the server's `tls:` map), send their presence and close.
fn xmpp_logins(addr: &str, tls: &str, first: u32) -> serde_json::Value {
    xmpp_tls_users();
    let (host, port) = split(addr);
    let last = first + 9;
    let yaml = format!(
        r#"
servers: [{{host: {host}, port: {port}, protocol: xmpp, tls: {tls}}}]
xmpp: {{domain: localhost, users: {{first: {first}, last: {last}}}, username: user, password: pass}}
load: {{phases: [{{duration: 1s, arrival_rate: 10, arrival: constant}}]}}
sessions:
  - name: s
    steps:
      - xmpp: presence:initial
      - xmpp: close
"#
    );
    let (v, out) = run_scenario(&yaml, &[("ca.pem", &test_ca())], &["-d", BOUND]);
    assert!(out.status.success(), "{tls}: {v:#}");
    assert_eq!(v["protocol"], "xmpp");
    assert_eq!(num(&v, &["errors_total"]), 0, "{tls}: {v:#}");
    let x = &v["scenario"]["protocol"]["xmpp"];
    assert_eq!(num(x, &["logins"]), 10, "{tls}: {v:#}");
    assert_eq!(num(x, &["sent_presence"]), 10, "{tls}: {x:#}");
    assert_eq!(num(&v, &["scenario", "sessions", "completed"]), 10);
    assert_eq!(num(&v, &["tls", "handshakes"]), 10, "{tls}: {v:#}");
    assert_eq!(num(&v, &["tls_us", "count"]), 10, "{tls}: {v:#}");
    v
}

#[test]
fn xmpp_logins_over_direct_tls() {
    let direct = xmpp_tls_addr();
    assert_ne!(direct, xmpp_starttls_addr());
    xmpp_logins(&direct, "{cacert: ca.pem}", 20151);
}

#[test]
fn xmpp_logins_after_starttls_on_the_plain_port() {
    xmpp_logins(
        &xmpp_starttls_addr(),
        "{cacert: ca.pem, starttls: true}",
        20161,
    );
}

/// PostgreSQL's host, port, user, password and database from its TLS URL.
fn pg_tls() -> (String, String, String, String, String) {
    let url = pg_tls_url();
    let rest = url.strip_prefix("postgres://").expect("postgres:// URL");
    let (userinfo, hostpart) = rest.split_once('@').unwrap();
    let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
    let (addr, db) = hostpart.split_once('/').unwrap();
    let (host, port) = addr.rsplit_once(':').unwrap();
    assert_eq!(host, "127.0.0.1");
    (
        host.into(),
        port.into(),
        user.into(),
        password.into(),
        db.split('?').next().unwrap().into(),
    )
}

/// 5 users, each one session of 20 statements on one connection, with `tls` as the server's
/// `tls:` setting. Each statement asks the server whether its own connection is encrypted and
/// divides by the answer: over plain TCP it fails (division by zero), so `sql_errors` is the
/// server's own word on TLS.
fn pg_sessions(tls: &str) -> serde_json::Value {
    let (host, port, user, password, db) = pg_tls();
    let yaml = format!(
        r#"
servers: [{{host: {host}, port: {port}, protocol: pgsql, tls: {tls}}}]
pgsql: {{database: {db}, user: {user}, password: {password}}}
load: {{phases: [{{duration: 1s, arrival_rate: 5, arrival: constant}}]}}
sessions:
  - name: s
    steps:
      - loop:
          count: 20
          steps:
            - sql: {{query: "SELECT 1 / (SELECT ssl::int FROM pg_stat_ssl WHERE pid = pg_backend_pid())", name: ssl}}
"#
    );
    let (v, _) = run_scenario(&yaml, &[], &["-d", BOUND]);
    assert_eq!(v["protocol"], "pgsql");
    assert_eq!(
        num(&v, &["scenario", "by_request", "pgsql:startup", "count"]),
        5,
        "{tls}: {v:#}"
    );
    assert_eq!(num(&v, &["scenario", "by_request", "ssl", "count"]), 100);
    assert_eq!(num(&v, &["scenario", "sessions", "completed"]), 5);
    v
}

#[test]
fn pgsql_sessions_with_sslmode_require_are_encrypted_and_disable_is_not() {
    let v = pg_sessions("{sslmode: require}");
    assert_eq!(num(&v, &["errors_total"]), 0, "{v:#}");
    assert_eq!(
        num(&v, &["scenario", "protocol", "pgsql", "sql_errors"]),
        0,
        "{v:#}"
    );
    assert_eq!(num(&v, &["tls", "handshakes"]), 5, "{v:#}");
    assert_eq!(num(&v, &["tls_us", "count"]), 5, "{v:#}");

    // verify-full checks the chain (the scripts' CA) and the name (127.0.0.1 is in it).
    let ca = test_ca();
    let v = pg_sessions(&format!(
        "{{sslmode: verify-full, cacert: {}}}",
        ca.display()
    ));
    assert_eq!(num(&v, &["errors_total"]), 0, "{v:#}");
    assert_eq!(num(&v, &["tls", "handshakes"]), 5, "{v:#}");

    // disable: no TLS at all, and the server says so on every statement.
    let v = pg_sessions("{sslmode: disable}");
    assert!(v["tls"].is_null(), "{:#}", v["tls"]);
    assert_eq!(num(&v, &["tls_us", "count"]), 0, "{v:#}");
    assert_eq!(
        num(&v, &["scenario", "protocol", "pgsql", "sql_errors"]),
        100,
        "{v:#}"
    );
}
