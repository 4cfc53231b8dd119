//! TLS failures on the command line, against nginx with the test PKI's certificates on
//! 127.0.0.1 (headroom-testkit's tls_nginx): the preflight stops at once with one line naming
//! the failure's kind and its fix, `--no-preflight` prints the summary instead of a usage
//! error, and a `--cacert` that is not PEM is a usage error of one line. (The figures, the TLS
//! client's counts against what nginx, the WebSocket echo, ejabberd and PostgreSQL saw, each
//! failure counted by kind, are crates/headroom-run/tests/tls.rs.)

mod common;

use common::access_log::AccessLog;
use common::pki::Pki;
use common::{one_line, run_json, run_plain, Nginx};

/// Time bound of every load below: far above what each needs, so a hang fails the test.
const BOUND: &str = "20s";

/// One TLS failure made on purpose: the preflight stops at once with one line naming the kind
/// and the fix (`fixes`), and nothing reaches the server; with --no-preflight the run's summary
/// is printed (the 20 attempts counted under the kind: crates/headroom-run/tests/tls.rs).
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
    // Failed handshakes are the run's findings, not a usage error: the summary is printed.
    assert_ne!(out.status.code(), Some(2), "{kind}: {out:?}");
    assert_eq!(v["responses"], 0, "{kind}: {v:#}");
}

#[test]
fn tls_failures_are_named_by_the_preflight_in_one_line() {
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
