//! What the TLS handshakes negotiated (issue 27), the CLI's side: the human summary's
//! `Negotiated` line and a distributed run's summary (agents as processes) against nginx's own
//! log of each request's `$ssl_protocol $ssl_cipher $ssl_curve $server_protocol` (OpenSSL's
//! names, turned into the IANA ones headroom prints). And TLS failures in words on stderr: no
//! Rust enum names, dates as dates. (The figures, summary.json's and the report's against
//! nginx's log, resumed handshakes included, are crates/headroom-run/tests/tls_negotiated.rs.)

mod common;

use common::access_log::AccessLog;
use common::pki::Pki;
use common::{headroom, num, one_line, run_into, run_plain, Nginx};

const BOUND: &str = "20s";

/// A run against `ng` with `args`: its human summary's `Negotiated` line says what nginx
/// logged, for every handshake.
fn check(ng: &common::tls_nginx::TlsNginx, args: &[&str], alpn: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let all = [args, &["-c", "4", "-n", "200", "-d", BOUND]].concat();
    let out = run_into(&[&[ng.url("/").as_str()][..], &all].concat(), dir.path());
    let human = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{out:?}");
    let (protocol, suite, group, http) = ng.negotiated();
    let words = format!("{protocol} {suite} {group} {alpn} {http}");
    let line = human
        .lines()
        .find(|l| l.trim_start().starts_with("Negotiated"))
        .unwrap_or_else(|| panic!("no Negotiated line in:\n{human}"));
    assert!(line.contains(&format!("{words}  (4 handshakes)")), "{line}");
    line.to_string()
}

#[test]
fn the_human_summary_says_what_was_negotiated() {
    let pki = Pki::new();
    let ca = pki.ca.to_str().unwrap();

    let h2 = Nginx::builder().tls(&pki.localhost).http2(true).start();
    let line = check(&h2, &["--cacert", ca, "--http2"], "h2");
    eprintln!("h2: {line}");
    assert!(line.contains("TLSv1.3 "), "{line}");
    assert_eq!(h2.logged_protocol("HTTP/2.0"), 200);

    let h1 = Nginx::builder().tls(&pki.localhost).start();
    let line = check(&h1, &["--cacert", ca, "--tls-max", "1.2"], "http/1.1");
    eprintln!("TLS 1.2: {line}");
    assert!(line.contains("TLSv1.2 TLS_ECDHE_"), "{line}");
}

#[test]
fn a_distributed_run_carries_what_was_negotiated() {
    let pki = Pki::new();
    let ca = pki.ca.to_str().unwrap();
    let ng = Nginx::builder().tls(&pki.localhost).http2(true).start();
    let dir = tempfile::tempdir().unwrap();
    let url = ng.url("/");
    let out = run_into(
        &[
            url.as_str(),
            "--cacert",
            ca,
            "--http2",
            "--agents",
            "local:2",
            "-c",
            "4",
            "-n",
            "200",
            "-d",
            BOUND,
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("summary.json")).unwrap()).unwrap();
    let (protocol, suite, group, _) = ng.negotiated();
    let n = &v["tls"]["negotiated"];
    assert_eq!(n.as_array().map(Vec::len), Some(1), "{n:#}");
    assert_eq!(n[0]["protocol"], protocol.as_str(), "{n:#}");
    assert_eq!(n[0]["cipher_suite"], suite.as_str(), "{n:#}");
    assert_eq!(n[0]["key_exchange"], group.as_str(), "{n:#}");
    assert_eq!(n[0]["alpn"], "h2", "{n:#}");
    assert_eq!(
        num(&n[0], &["handshakes"]),
        num(&v, &["tls", "handshakes"]),
        "{:#}",
        v["tls"]
    );
    assert_eq!(num(&n[0], &["handshakes"]), 4, "{:#}", v["tls"]);
}

/// Run a shell command (openssl) that must succeed.
fn sh(script: &str) {
    let out = std::process::Command::new("sh")
        .args(["-c", script])
        .output()
        .unwrap();
    assert!(out.status.success(), "{script}: {out:?}");
}

/// No Rust enum name in a line a person reads: no `Other(`, no CamelCase word.
fn assert_words(line: &str) {
    assert!(
        !line.contains("Other(") && !line.contains("OtherError"),
        "{line}"
    );
    let camel = line.split(|c: char| !c.is_ascii_alphanumeric()).find(|w| {
        w.len() > 1
            && w.starts_with(|c: char| c.is_ascii_uppercase())
            && w.chars().skip(1).any(|c| c.is_ascii_lowercase())
            && w.chars().skip(1).any(|c| c.is_ascii_uppercase())
    });
    assert_eq!(camel, None, "a CamelCase word in: {line}");
}

#[test]
fn tls_failures_are_sentences_with_dates() {
    let pki = Pki::new();
    let ca = pki.ca.to_str().unwrap();
    let args = ["-c", "1", "-n", "5", "-d", BOUND];

    // pki.rs: the expired leaf is valid 2020-01-01 .. 2021-01-01.
    let expired = Nginx::builder().tls(&pki.expired).start();
    let out = run_plain(&expired.url("/"), &[&["--cacert", ca][..], &args].concat());
    let line = one_line(&out);
    eprintln!("expired: {line}");
    assert!(
        line.contains("expired on 2021-01-01 00:00:00 UTC"),
        "{line}"
    );
    assert!(line.contains("-k"), "{line}");
    assert_words(&line);

    // A self-signed certificate made as a CA (webpki: "CA used as end entity").
    let own = Nginx::builder().tls(&pki.self_signed).start();
    let out = run_plain(&own.url("/"), &args);
    let line = one_line(&out);
    eprintln!("self-signed: {line}");
    assert!(line.contains("--cacert"), "{line}");
    assert_words(&line);

    // One made as `openssl req -x509` makes it (CA:TRUE), with another CA trusted: webpki
    // refuses a CA certificate as the server's own before it looks for an issuer (rustls'
    // `Other(OtherError(CaUsedAsEndEntity))`).
    let dir = tempfile::tempdir().unwrap();
    let x509 = common::pki::CertFiles {
        cert: dir.path().join("x509.pem"),
        key: dir.path().join("x509.key"),
    };
    sh(&format!(
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
         -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 -days 30 \
         -keyout {} -out {}",
        x509.key.display(),
        x509.cert.display()
    ));
    let made_as_ca = Nginx::builder().tls(&x509).start();
    let out = run_plain(
        &made_as_ca.url("/"),
        &[&["--cacert", ca][..], &args].concat(),
    );
    let line = one_line(&out);
    eprintln!("openssl req -x509, another CA trusted: {line}");
    assert!(line.contains("itself a CA certificate"), "{line}");
    assert!(line.contains("--cacert"), "{line}");
    assert_words(&line);

    let wrong = Nginx::builder().tls(&pki.wrong_name).start();
    let out = run_plain(
        &wrong.url_localhost("/"),
        &[&["--cacert", ca][..], &args].concat(),
    );
    let line = one_line(&out);
    eprintln!("wrong name: {line}");
    assert!(line.contains("wrong.example"), "{line}");
    assert_words(&line);

    // An X.509 version 1 client certificate (`openssl x509 -req` without extensions).
    let dir = tempfile::tempdir().unwrap();
    let (key, cert) = (dir.path().join("v1.key"), dir.path().join("v1.pem"));
    let csr = dir.path().join("v1.csr");
    let script = format!(
        "openssl ecparam -name prime256v1 -genkey -noout -out {k} && \
         openssl req -new -key {k} -subj /CN=client -out {c} && \
         openssl x509 -req -in {c} -signkey {k} -days 30 -out {p}",
        k = key.display(),
        c = csr.display(),
        p = cert.display()
    );
    sh(&script);
    let ng = Nginx::builder().tls(&pki.localhost).start();
    let out = headroom()
        .args(["run", &ng.url("/"), "--cacert", ca, "--cert"])
        .arg(&cert)
        .arg("--key")
        .arg(&key)
        .args(args)
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    let line = one_line(&out);
    eprintln!("v1 client certificate: {line}");
    assert!(line.contains("version 1"), "{line}");
    assert_words(&line);
    assert_eq!(ng.log_lines().len(), 0);
}
