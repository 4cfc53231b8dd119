//! `--http2` and `--h2c` on the command line, against nginx on 127.0.0.1 (headroom-testkit's
//! tls_nginx): `--http2` with an http:// URL is a usage error, a server without h2 is one line
//! and exit 1 before any load, and the human summary's header names the streams. (The
//! figures, the HTTP/2 client's counts against nginx's and h2o's logs, GOAWAY and RST_STREAM,
//! are crates/headroom-run/tests/http2.rs.)

mod common;

use common::access_log::AccessLog;
use common::pki::Pki;
use common::{one_line, run_plain, Nginx};

/// Time bound of every load below: far above what each needs, so a hang fails the test.
const BOUND: &str = "20s";

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
