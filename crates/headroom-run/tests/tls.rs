//! The TLS client end to end, against real servers on 127.0.0.1: nginx with the test PKI's
//! certificates (headroom-testkit's tls_nginx), and the TLS listeners of the shared services
//! that scripts/test starts (the WebSocket echo's wss://, ejabberd's direct TLS and STARTTLS,
//! PostgreSQL's SSLRequest). Each test checks the run's figures against what the server logged:
//! requests, connections, resumed sessions, and each TLS failure counted under its kind. Every
//! run is bounded in count and time. (The CLI's side, the preflight's one line naming each
//! failure and its fix, and a `--cacert` that is not PEM, is crates/headroom/tests/tls.rs.)

mod common;

use std::sync::OnceLock;

use common::access_log::AccessLog;
use common::pki::Pki;
use common::tls_services::{
    pg_tls_url, repo_root, test_ca, wss_url, xmpp_starttls_addr, xmpp_tls_addr,
};
use common::*;
use headroom_core::spec::RunSpec;
use headroom_core::TlsVersion;
use headroom_run::RunSummary;

#[test]
fn https_keepalive_one_handshake_per_connection_and_every_request_logged() {
    let pki = Pki::new();
    let ng = Nginx::builder().tls(&pki.localhost).start();
    // --cacert CA -c 10 --per-user 200 -d BOUND
    let mut spec = url_spec(&ng.url("/"));
    spec.cacert = pem(&pki.ca);
    spec.connections = Some(10);
    spec.per_user = Some(200);
    spec.duration = secs(BOUND);
    let f = run_preflighted(&spec);
    let v = &f.summary;
    assert_clean(&f);
    assert_eq!(v.protocol, "http/1.1");
    assert_eq!(v.requests, 2000, "{}", show(v));
    assert_eq!(v.responses, 2000);
    assert_eq!(v.errors_total, 0, "{}", show(v));
    assert_eq!(v.status.s2xx, 2000, "{}", show(v));
    // Keep-alive: one connection, and one handshake, per user; the preflight's handshake is
    // not part of the load.
    assert_eq!(v.connects, 10, "{}", show(v));
    assert_eq!(tls(v).handshakes, 10, "{}", show(v));
    assert_eq!(v.tls_us.count, 10, "{}", show(v));
    assert_eq!(tls(v).ca, "file");
    assert_eq!(ng.log_lines().len(), 2000);
    assert_eq!(ng.logged_status(200), 2000);
    assert_eq!(ng.logged_tls("TLSv1.3"), 2000, "TLS 1.3 by default");
    assert_eq!(ng.logged_connections(), 10, "{:?}", &ng.log_lines()[..3]);
}

#[test]
fn https_connection_per_request_resumes_sessions_unless_told_not_to() {
    let pki = Pki::new();
    // --cacert CA --no-keepalive -c 4 --per-user 50 -d BOUND
    let base = |url: &str| {
        let mut spec = url_spec(url);
        spec.cacert = pem(&pki.ca);
        spec.no_keepalive = true;
        spec.connections = Some(4);
        spec.per_user = Some(50);
        spec.duration = secs(BOUND);
        spec
    };

    let ng = Nginx::builder().tls(&pki.localhost).start();
    let f = run(&base(&ng.url("/")));
    let v = &f.summary;
    assert_clean(&f);
    assert_eq!(v.responses, 200, "{}", show(v));
    assert_eq!(v.errors_total, 0, "{}", show(v));
    assert_eq!(ng.log_lines().len(), 200);
    assert_eq!(v.connects, 200, "{}", show(v));
    assert_eq!(ng.logged_connections(), 200);
    assert_eq!(tls(v).handshakes, 200, "{}", show(v));
    assert_eq!(v.tls_us.count, 200);
    assert!(tls(v).resume);
    // Only each user's first handshake is full (each user resumes its own session, issue 26);
    // headroom's count and nginx's agree.
    let resumed = tls(v).resumed;
    assert_eq!(resumed, 200 - 4, "{:#?}", v.tls);
    let reused = ng.logged_reused();
    assert_eq!(resumed as usize, reused, "headroom and nginx disagree");

    let ng = Nginx::builder().tls(&pki.localhost).start();
    let mut spec = base(&ng.url("/"));
    spec.no_tls_resume = true;
    let f = run(&spec);
    let v = &f.summary;
    assert_clean(&f);
    assert_eq!(v.responses, 200, "{}", show(v));
    assert_eq!(v.errors_total, 0, "{}", show(v));
    assert_eq!(tls(v).handshakes, 200, "{}", show(v));
    assert!(!tls(v).resume);
    assert_eq!(tls(v).resumed, 0, "{}", show(v));
    assert_eq!(ng.log_lines().len(), 200);
    assert_eq!(ng.logged_reused(), 0, "{:?}", &ng.log_lines()[..3]);
}

/// One TLS failure made on purpose, without the preflight (`--no-preflight`, which stops at the
/// first: crates/headroom/tests/tls.rs checks its line): each of 20 attempts of `spec` (`-c 1
/// -n 20 -d BOUND` added) is counted under `kind`, and nothing reaches the server.
fn check_failure(mut spec: RunSpec, kind: &str, requests_logged: impl Fn() -> usize) {
    spec.connections = Some(1);
    spec.requests = Some(20);
    spec.duration = secs(BOUND);
    // Failed handshakes are the run's findings, not a usage error: the spec builds and runs.
    let v = run(&spec).summary;
    let e = &v.errors;
    let counted = match kind {
        "tls_untrusted" => e.tls_untrusted,
        "tls_wrong_name" => e.tls_wrong_name,
        "tls_expired" => e.tls_expired,
        "tls_version" => e.tls_version,
        "tls_malformed" => e.tls_malformed,
        k => panic!("no such kind here: {k}"),
    };
    assert_eq!(counted, 20, "{kind}: {}", show(&v));
    assert_eq!(v.errors_total, 20, "{kind}: {}", show(&v));
    assert_eq!(v.responses, 0, "{kind}: {}", show(&v));
    assert_eq!(tls(&v).handshakes, 0, "{kind}: {}", show(&v));
    assert_eq!(
        requests_logged(),
        0,
        "{kind}: a failed handshake carried a request"
    );
}

/// `URL --cacert CA`.
fn trusting(url: &str, pki: &Pki) -> RunSpec {
    let mut spec = url_spec(url);
    spec.cacert = pem(&pki.ca);
    spec
}

#[test]
fn tls_failures_are_counted_by_kind() {
    let pki = Pki::new();

    let own = Nginx::builder().tls(&pki.self_signed).start();
    check_failure(url_spec(&own.url("/")), "tls_untrusted", || {
        own.log_lines().len()
    });
    // -k: the same server loads with no error.
    let mut spec = counted(&own.url("/"), 2, 20);
    spec.insecure = true;
    let f = run(&spec);
    let v = &f.summary;
    assert_clean(&f);
    assert_eq!(v.responses, 20, "{}", show(v));
    assert_eq!(v.errors_total, 0, "{}", show(v));
    assert!(tls(v).insecure);
    assert_eq!(own.log_lines().len(), 20);

    let wrong = Nginx::builder().tls(&pki.wrong_name).start();
    check_failure(
        trusting(&wrong.url_localhost("/"), &pki),
        "tls_wrong_name",
        || wrong.log_lines().len(),
    );

    let expired = Nginx::builder().tls(&pki.expired).start();
    check_failure(trusting(&expired.url("/"), &pki), "tls_expired", || {
        expired.log_lines().len()
    });

    let tls13 = Nginx::builder()
        .tls(&pki.localhost)
        .tls_protocols("TLSv1.3")
        .start();
    let mut spec = trusting(&tls13.url("/"), &pki);
    spec.tls_max = TlsVersion::Tls12;
    check_failure(spec, "tls_version", || tls13.log_lines().len());

    // A plain HTTP server answers the ClientHello with a 400 of its own, which nginx logs:
    // count only the requests it served.
    let plain = Nginx::start();
    let served = || {
        plain.logged();
        let log = std::fs::read_to_string(plain.dir.path().join("access.log")).unwrap_or_default();
        log.lines().filter(|l| !l.ends_with(" 400")).count()
    };
    let url = format!("https://{}/", plain.addr);
    check_failure(trusting(&url, &pki), "tls_malformed", served);
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
    let f = run(&scenario_with_files(&yaml, &[("ca.pem", &test_ca())]));
    let v = &f.summary;
    assert_clean(&f);
    assert_eq!(v.protocol, "websocket");
    assert_eq!(v.errors_total, 0, "{}", show(v));
    let sc = v.scenario.as_ref().expect("a scenario section");
    let w = sc
        .protocol
        .as_ref()
        .and_then(|p| p.websocket.as_ref())
        .unwrap_or_else(|| panic!("no websocket counters: {}", show(v)));
    assert_eq!(w.messages_sent, 20, "{w:#?}");
    assert_eq!(w.messages_received, 20, "{w:#?}");
    assert_eq!(sc.by_request.get("echo").map(|n| n.count), Some(20));
    assert_eq!(tls(v).handshakes, 4, "{}", show(v));
    assert_eq!(v.tls_us.count, 4, "{}", show(v));
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
fn xmpp_logins(addr: &str, tls_map: &str, first: u32) -> RunSummary {
    xmpp_tls_users();
    let (host, port) = split(addr);
    let last = first + 9;
    let yaml = format!(
        r#"
servers: [{{host: {host}, port: {port}, protocol: xmpp, tls: {tls_map}}}]
xmpp: {{domain: localhost, users: {{first: {first}, last: {last}}}, username: user, password: pass}}
load: {{phases: [{{duration: 1s, arrival_rate: 10, arrival: constant}}]}}
sessions:
  - name: s
    steps:
      - xmpp: presence:initial
      - xmpp: close
"#
    );
    let f = run(&scenario_with_files(&yaml, &[("ca.pem", &test_ca())]));
    let v = f.summary.clone();
    assert_clean(&f);
    assert_eq!(v.protocol, "xmpp");
    assert_eq!(v.errors_total, 0, "{tls_map}: {}", show(&v));
    let sc = v.scenario.as_ref().expect("a scenario section");
    let x = sc
        .protocol
        .as_ref()
        .and_then(|p| p.xmpp.as_ref())
        .unwrap_or_else(|| panic!("no xmpp counters: {}", show(&v)));
    assert_eq!(x.logins, 10, "{tls_map}: {}", show(&v));
    assert_eq!(x.sent_presence, 10, "{tls_map}: {x:#?}");
    assert_eq!(sc.sessions.completed, 10);
    assert_eq!(tls(&v).handshakes, 10, "{tls_map}: {}", show(&v));
    assert_eq!(v.tls_us.count, 10, "{tls_map}: {}", show(&v));
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
    pg_parts(&pg_tls_url())
}

/// The counters of a pgsql scenario's run.
fn pgsql(v: &RunSummary) -> &headroom_run::summary::PgsqlCounters {
    v.scenario
        .as_ref()
        .and_then(|s| s.protocol.as_ref())
        .and_then(|p| p.pgsql.as_ref())
        .unwrap_or_else(|| panic!("no pgsql counters: {}", show(v)))
}

/// 5 users, each one session of 20 statements on one connection, with `tls` as the server's
/// `tls:` setting. Each statement asks the server whether its own connection is encrypted and
/// divides by the answer: over plain TCP it fails (division by zero), so `sql_errors` is the
/// server's own word on TLS.
fn pg_sessions(tls_map: &str) -> RunSummary {
    let (host, port, user, password, db) = pg_tls();
    let yaml = format!(
        r#"
servers: [{{host: {host}, port: {port}, protocol: pgsql, tls: {tls_map}}}]
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
    let v = run(&scenario_with_files(&yaml, &[])).summary;
    assert_eq!(v.protocol, "pgsql");
    let sc = v.scenario.as_ref().expect("a scenario section");
    assert_eq!(
        sc.by_request.get("pgsql:startup").map(|n| n.count),
        Some(5),
        "{tls_map}: {}",
        show(&v)
    );
    assert_eq!(sc.by_request.get("ssl").map(|n| n.count), Some(100));
    assert_eq!(sc.sessions.completed, 5);
    v
}

#[test]
fn pgsql_sessions_with_sslmode_require_are_encrypted_and_disable_is_not() {
    let v = pg_sessions("{sslmode: require}");
    assert_eq!(v.errors_total, 0, "{}", show(&v));
    assert_eq!(pgsql(&v).sql_errors, 0, "{}", show(&v));
    assert_eq!(tls(&v).handshakes, 5, "{}", show(&v));
    assert_eq!(v.tls_us.count, 5, "{}", show(&v));

    // verify-full checks the chain (the scripts' CA) and the name (127.0.0.1 is in it).
    let ca = test_ca();
    let v = pg_sessions(&format!(
        "{{sslmode: verify-full, cacert: {}}}",
        ca.display()
    ));
    assert_eq!(v.errors_total, 0, "{}", show(&v));
    assert_eq!(tls(&v).handshakes, 5, "{}", show(&v));

    // disable: no TLS at all, and the server says so on every statement.
    let v = pg_sessions("{sslmode: disable}");
    assert!(v.tls.is_none(), "{:#?}", v.tls);
    assert_eq!(v.tls_us.count, 0, "{}", show(&v));
    assert_eq!(pgsql(&v).sql_errors, 100, "{}", show(&v));
}
