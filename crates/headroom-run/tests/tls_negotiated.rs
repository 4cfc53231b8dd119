//! What the TLS handshakes negotiated (issue 27): the protocol version, cipher suite, key
//! exchange group, ALPN protocol and HTTP version, checked against nginx's own log of each
//! request's `$ssl_protocol $ssl_cipher $ssl_curve $server_protocol` (OpenSSL's names, turned
//! into the IANA ones headroom prints), in the summary and the run directory's report, resumed
//! handshakes included. (The CLI's side, the human summary's line, a distributed run's summary
//! and TLS failures in words, is crates/headroom/tests/tls_negotiated.rs.)

mod common;

use common::access_log::AccessLog;
use common::pki::Pki;
use common::tls_nginx::TlsNginx;
use common::*;
use headroom_core::spec::RunSpec;
use headroom_core::TlsVersion;

/// A run of `spec` (`-c 4 -n 200 -d BOUND` added) against `ng`: its summary and the run
/// directory's report agree with what nginx logged, for every handshake. Returns what was
/// negotiated, in words.
fn check(ng: &TlsNginx, mut spec: RunSpec, alpn: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    spec.connections = Some(4);
    spec.requests = Some(200);
    spec.duration = secs(BOUND);
    let f = run_into(&spec, dir.path());
    assert_clean(&f);
    let v = &f.summary;
    let (protocol, suite, group, http) = ng.negotiated();
    let words = format!("{protocol} {suite} {group} {alpn} {http}");

    let t = tls(v);
    let handshakes = t.handshakes;
    assert_eq!(handshakes, 4, "{t:#?}");
    let n = &t.negotiated;
    assert_eq!(n.len(), 1, "{n:#?}");
    assert_eq!(n[0].protocol, protocol, "{n:#?}");
    assert_eq!(n[0].cipher_suite, suite, "{n:#?}");
    assert_eq!(n[0].key_exchange.as_deref(), Some(group.as_str()), "{n:#?}");
    assert_eq!(n[0].alpn.as_deref(), Some(alpn), "{n:#?}");
    assert_eq!(n[0].http.as_deref(), Some(http.as_str()), "{n:#?}");
    assert_eq!(n[0].handshakes, handshakes);
    assert_eq!(t.negotiated_other, 0);
    assert_eq!(n[0].words(), words);

    let report = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
    assert!(
        report.contains(&format!("{words} (4 handshakes)")),
        "no '{words}' in the report"
    );
    words
}

#[test]
fn negotiated_tls_h2_and_tls12_match_nginx_log() {
    let pki = Pki::new();

    let h2 = Nginx::builder().tls(&pki.localhost).http2(true).start();
    // --cacert CA --http2
    let mut spec = url_spec(&h2.url("/"));
    spec.cacert = pem(&pki.ca);
    spec.http2 = true;
    let words = check(&h2, spec, "h2");
    eprintln!("h2: {words}");
    assert!(words.starts_with("TLSv1.3 "), "{words}");
    assert_eq!(h2.logged_protocol("HTTP/2.0"), 200);

    let h1 = Nginx::builder().tls(&pki.localhost).start();
    // --cacert CA --tls-max 1.2
    let mut spec = url_spec(&h1.url("/"));
    spec.cacert = pem(&pki.ca);
    spec.tls_max = TlsVersion::Tls12;
    let words = check(&h1, spec, "http/1.1");
    eprintln!("TLS 1.2: {words}");
    assert!(words.starts_with("TLSv1.2 TLS_ECDHE_"), "{words}");
}

#[test]
fn resumed_handshakes_are_counted_with_what_they_negotiated() {
    let pki = Pki::new();
    let ng = Nginx::builder().tls(&pki.localhost).start();
    for (max, tls_max) in [("1.2", TlsVersion::Tls12), ("1.3", TlsVersion::Tls13)] {
        // --cacert CA --tls-max MAX --no-keepalive -c 4 --per-user 10 -d BOUND
        let mut spec = url_spec(&ng.url("/"));
        spec.cacert = pem(&pki.ca);
        spec.tls_max = tls_max;
        spec.no_keepalive = true;
        spec.connections = Some(4);
        spec.per_user = Some(10);
        spec.duration = secs(BOUND);
        let f = run(&spec);
        assert_clean(&f);
        let t = tls(&f.summary);
        eprintln!("--tls-max {max}: {:#?}", t.negotiated);
        assert_eq!(t.handshakes, 40, "{t:#?}");
        assert_eq!(t.resumed, 36, "{t:#?}");
        let n = &t.negotiated;
        let sum: u64 = n.iter().map(|e| e.handshakes).sum();
        assert_eq!(sum, 40, "{t:#?}");
        assert!(
            n.iter().all(|e| e.protocol == format!("TLSv{max}")),
            "{t:#?}"
        );
        // A resumed TLS 1.2 session makes no key exchange of its own (its 4 users' first
        // handshakes do); TLS 1.3 resumes with a fresh (EC)DHE exchange (psk_dhe_ke).
        let no_kx: u64 = n
            .iter()
            .filter(|e| e.key_exchange.is_none())
            .map(|e| e.handshakes)
            .sum();
        assert_eq!(no_kx, if max == "1.2" { 36 } else { 0 }, "{t:#?}");
    }
}
