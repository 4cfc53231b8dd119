//! What the TLS handshakes negotiated (issue 27): the protocol version, cipher suite, key
//! exchange group, ALPN protocol and HTTP version, checked against nginx's own log of each
//! request's `$ssl_protocol $ssl_cipher $ssl_curve $server_protocol` (OpenSSL's names, turned
//! into the IANA ones headroom prints), in the summary and the run directory's report, resumed
//! handshakes included. (The CLI's side, the human summary's line, a distributed run's summary
//! and TLS failures in words, is crates/headroom/tests/tls_negotiated.rs.)

mod common;

use std::collections::BTreeSet;

use common::access_log::AccessLog;
use common::pki::Pki;
use common::tls_nginx::TlsNginx;
use common::*;
use headroom_core::spec::RunSpec;
use headroom_core::TlsVersion;

/// OpenSSL's cipher names (nginx's `$ssl_cipher`) as IANA's, for the suites rustls offers.
fn iana_suite(openssl: &str) -> String {
    let name = match openssl {
        "ECDHE-ECDSA-AES256-GCM-SHA384" => "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        "ECDHE-ECDSA-AES128-GCM-SHA256" => "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        "ECDHE-ECDSA-CHACHA20-POLY1305" => "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        "ECDHE-RSA-AES256-GCM-SHA384" => "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        "ECDHE-RSA-AES128-GCM-SHA256" => "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        "ECDHE-RSA-CHACHA20-POLY1305" => "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        // TLS 1.3 suites have the same name in both.
        other => other,
    };
    name.to_string()
}

/// OpenSSL's group names (`$ssl_curve`) as IANA's.
fn iana_group(openssl: &str) -> String {
    match openssl {
        "prime256v1" => "secp256r1".into(),
        other => other.into(),
    }
}

/// The one combination nginx logged for every request: `(protocol, suite, group, http)`.
fn nginx_says(ng: &TlsNginx) -> (String, String, String, String) {
    let lines = ng.negotiated_log();
    assert!(!lines.is_empty(), "nginx logged nothing");
    let set: BTreeSet<(String, String, String, String)> = lines
        .iter()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            assert_eq!(f.len(), 5, "unexpected line: {l}");
            let http = match f[4] {
                "HTTP/2.0" => "HTTP/2",
                p => p,
            };
            (
                f[1].to_string(),
                iana_suite(f[2]),
                iana_group(f[3]),
                http.to_string(),
            )
        })
        .collect();
    assert_eq!(set.len(), 1, "nginx logged several combinations: {set:?}");
    set.into_iter().next().unwrap()
}

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
    let (protocol, suite, group, http) = nginx_says(ng);
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
