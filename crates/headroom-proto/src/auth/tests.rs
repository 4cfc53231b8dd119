//! Basic and Digest against the RFCs' worked examples, and hostile challenges.

use super::*;

fn s(v: &[u8]) -> &str {
    std::str::from_utf8(v).unwrap()
}

#[test]
fn basic_matches_rfc_7617() {
    let mut out = Vec::new();
    write_basic("Aladdin", "open sesame", &mut out);
    assert_eq!(
        s(&out),
        "Authorization: Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==\r\n"
    );
    out.clear();
    write_basic_value("test", "123\u{a3}", &mut out);
    assert_eq!(s(&out), "Basic dGVzdDoxMjPCow==");
    out.clear();
    write_basic_value("", "", &mut out);
    assert_eq!(s(&out), "Basic Og==");
}

const RFC7616_SHA256: &[u8] = b"Digest\r\n realm=\"http-auth@example.org\",\r\n qop=\"auth, auth-int\",\r\n algorithm=SHA-256,\r\n nonce=\"7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v\",\r\n opaque=\"FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS\"";
const RFC7616_CNONCE: &str = "f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ";

/// The RFC's challenges with the line folding of its layout removed.
fn unfold(v: &[u8]) -> Vec<u8> {
    v.iter()
        .copied()
        .filter(|&b| b != b'\r' && b != b'\n')
        .collect()
}

fn answer(challenge: &[u8], user: &str, password: &str, uri: &str, cnonce: &str) -> String {
    let mut st = DigestState::new();
    st.take_challenge_value(challenge).unwrap();
    let mut out = Vec::new();
    st.write_value(user, password, "GET", uri, cnonce, &mut out)
        .unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn digest_matches_rfc_7616_section_3_9_1() {
    let sha = unfold(RFC7616_SHA256);
    let c = parse_digest_challenge(&sha).unwrap();
    assert_eq!(c.realm, b"http-auth@example.org");
    assert_eq!(c.algorithm, Algorithm::Sha256);
    assert_eq!(c.qop, Qop::Auth, "auth chosen over auth-int");
    assert!(!c.stale && !c.userhash);
    assert_eq!(
        answer(
            &sha,
            "Mufasa",
            "Circle of Life",
            "/dir/index.html",
            RFC7616_CNONCE
        ),
        "Digest username=\"Mufasa\", realm=\"http-auth@example.org\", uri=\"/dir/index.html\", \
         algorithm=SHA-256, nonce=\"7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v\", nc=00000001, \
         cnonce=\"f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ\", qop=auth, \
         response=\"753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1\", \
         opaque=\"FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS\""
    );
    let md5 = String::from_utf8(sha).unwrap().replace("SHA-256", "MD5");
    assert_eq!(
        answer(
            md5.as_bytes(),
            "Mufasa",
            "Circle of Life",
            "/dir/index.html",
            RFC7616_CNONCE
        ),
        "Digest username=\"Mufasa\", realm=\"http-auth@example.org\", uri=\"/dir/index.html\", \
         algorithm=MD5, nonce=\"7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v\", nc=00000001, \
         cnonce=\"f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ\", qop=auth, \
         response=\"8ca523f5e9506fed4657c9700eebdbec\", \
         opaque=\"FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS\""
    );
}

#[test]
fn digest_matches_rfc_2617_and_rfc_2069() {
    let challenge = b"Digest realm=\"testrealm@host.com\", qop=\"auth,auth-int\", nonce=\"dcd98b7102dd2f0e8b11d0f600bfb0c093\", opaque=\"5ccc069c403ebaf9f0171e9517f40e41\"";
    let mut st = DigestState::new();
    st.take_challenge_value(challenge).unwrap();
    let mut out = Vec::new();
    st.write_header(
        "Mufasa",
        "Circle Of Life",
        "GET",
        "/dir/index.html",
        "0a4f113b",
        &mut out,
    )
    .unwrap();
    assert_eq!(
        s(&out),
        "Authorization: Digest username=\"Mufasa\", realm=\"testrealm@host.com\", \
         uri=\"/dir/index.html\", nonce=\"dcd98b7102dd2f0e8b11d0f600bfb0c093\", nc=00000001, \
         cnonce=\"0a4f113b\", qop=auth, response=\"6629fae49393a05397450978507c4ef1\", \
         opaque=\"5ccc069c403ebaf9f0171e9517f40e41\"\r\n"
    );
    // Without qop: the RFC 2069 computation, no nc or cnonce.
    let legacy =
        b"Digest realm=\"testrealm@host.com\", nonce=\"dcd98b7102dd2f0e8b11d0f600bfb0c093\"";
    assert_eq!(parse_digest_challenge(legacy).unwrap().qop, Qop::Legacy);
    assert_eq!(
        answer(
            legacy,
            "Mufasa",
            "CircleOfLife",
            "/dir/index.html",
            "ignored"
        ),
        "Digest username=\"Mufasa\", realm=\"testrealm@host.com\", uri=\"/dir/index.html\", \
         nonce=\"dcd98b7102dd2f0e8b11d0f600bfb0c093\", \
         response=\"1949323746fe6a43ef61f9606e7febea\""
    );
}

#[test]
fn session_algorithms_nonce_count_and_userhash() {
    let base = String::from_utf8(unfold(RFC7616_SHA256)).unwrap();
    let md5_sess = base.replace("SHA-256", "md5-SESS");
    let mut st = DigestState::new();
    st.take_challenge_value(md5_sess.as_bytes()).unwrap();
    let mut out = Vec::new();
    st.write_value(
        "Mufasa",
        "Circle of Life",
        "GET",
        "/dir/index.html",
        RFC7616_CNONCE,
        &mut out,
    )
    .unwrap();
    assert!(s(&out).contains("algorithm=MD5-sess"));
    assert!(s(&out).contains("response=\"e783283f46242139c486a698fec7211d\""));

    let sha_sess = base.replace("SHA-256", "SHA-256-sess");
    st.take_challenge_value(sha_sess.as_bytes()).unwrap();
    assert_eq!(st.next_nc(), 2, "the same nonce keeps counting");
    out.clear();
    st.write_value(
        "Mufasa",
        "Circle of Life",
        "GET",
        "/dir/index.html",
        RFC7616_CNONCE,
        &mut out,
    )
    .unwrap();
    assert!(s(&out).contains("nc=00000002"));
    assert!(s(&out)
        .contains("response=\"6bb0010aa4bdf46422a798c509ea32e256f27bd37de5cc3bdf8ed51e1d77d650\""));

    // A new nonce (stale) restarts the count.
    let stale = base.replace("7ypf", "XXXX") + ", stale=TRUE, userhash=true";
    let c = st.take_challenge_value(stale.as_bytes()).unwrap();
    assert!(c.stale && c.userhash);
    assert_eq!(st.next_nc(), 1);
    out.clear();
    st.write_value("Mufasa", "Circle of Life", "GET", "/", "c", &mut out)
        .unwrap();
    let v = s(&out);
    assert!(v.starts_with(
        "Digest username=\"a947aad205e80e429958a387394944c6b496301e79f89d35a4cc23b6ee12b5b6\", "
    ));
    assert!(v.ends_with(", userhash=true") && v.contains("nc=00000001"));
}

#[test]
fn quoted_values_are_unescaped_for_hashing_and_echoed_as_received() {
    let challenge = br#"Digest realm="a\"b", nonce="n\\x", qop=auth"#;
    let c = parse_digest_challenge(challenge).unwrap();
    assert_eq!(c.realm, br#"a\"b"#);
    assert_eq!(
        answer(challenge, "Mu\"fasa", "pw", "/", "c"),
        r#"Digest username="Mu\"fasa", realm="a\"b", uri="/", nonce="n\\x", nc=00000001, cnonce="c", qop=auth, response="d45f2b0c61adcd1ff979da8c07de128d""#
    );
    // A non-ASCII user name goes as username* (RFC 8187).
    let v = answer(challenge, "J\u{e4}s\u{f8}n Doe", "pw", "/", "c");
    assert!(
        v.starts_with("Digest username*=UTF-8''J%C3%A4s%C3%B8n%20Doe, realm="),
        "{v}"
    );
}

#[test]
fn challenge_lists_with_several_schemes() {
    let mixed = br#"Basic realm="simple", Digest realm="r", nonce="n", qop="auth""#;
    assert_eq!(parse_digest_challenge(mixed).unwrap().realm, b"r");
    let rfc9110 =
        br#"Newauth realm="apps", type=1, title="Login to \"apps\"", Basic realm="simple""#;
    assert_eq!(parse_digest_challenge(rfc9110), Err(AuthError::NotDigest));
    // The first usable Digest challenge wins; token68 schemes are skipped.
    let prefs = br#"Negotiate YIIabc==, Digest realm="r", nonce="n", algorithm=SHA-512-256, qop=auth, digest realm="r2", nonce="n2", algorithm=SHA-256, qop=auth"#;
    let c = parse_digest_challenge(prefs).unwrap();
    assert_eq!((c.realm, c.algorithm), (&b"r2"[..], Algorithm::Sha256));
    // When none is usable, the first one's reason.
    let none = br#"Digest realm="r", nonce="n", algorithm=SHA-512-256, Digest realm="r", nonce="n", qop="auth-int""#;
    assert_eq!(
        parse_digest_challenge(none),
        Err(AuthError::UnsupportedAlgorithm)
    );
    // Quoted algorithm and unquoted qop, as some servers send.
    let loose = br#"DIGEST REALM="r", NONCE="n", Algorithm="SHA-256", qop=auth"#;
    assert_eq!(
        parse_digest_challenge(loose).unwrap().algorithm,
        Algorithm::Sha256
    );
}

#[test]
fn bad_challenges_are_typed_errors() {
    let long = format!(
        r#"Digest realm="r", nonce="{}""#,
        "n".repeat(MAX_PARAM_LEN + 1)
    );
    let cases: &[(&[u8], AuthError)] = &[
        (b"", AuthError::NotDigest),
        (b"Basic realm=\"x\"", AuthError::NotDigest),
        (b"Digest", AuthError::MissingRealm),
        (br#"Digest nonce="n""#, AuthError::MissingRealm),
        (br#"Digest realm="r""#, AuthError::MissingNonce),
        (br#"Digest realm="r, nonce="n""#, AuthError::Malformed),
        (br#"Digest realm="r\"#, AuthError::Malformed),
        (
            b"Digest realm=\"r\", nonce=\"n\", \xff",
            AuthError::Malformed,
        ),
        // Control characters in a quoted value would be echoed into our header: refused.
        (
            b"Digest realm=\"r\", nonce=\"n\r\nX: y\"",
            AuthError::Malformed,
        ),
        (b"Digest realm=\"r\", nonce=\"n\\\r\"", AuthError::Malformed),
        (b"Digest realm=\"r\x00\", nonce=\"n\"", AuthError::Malformed),
        (b"Digest realm=\"r\x7f\", nonce=\"n\"", AuthError::Malformed),
        (
            b"Digest realm=\"r\tok\", nonce=\"n\\\x00\"",
            AuthError::Malformed,
        ),
        (
            br#"Digest realm="r", nonce="n", qop="auth-int""#,
            AuthError::AuthIntOnly,
        ),
        (
            br#"Digest realm="r", nonce="n", qop="x-other""#,
            AuthError::UnsupportedQop,
        ),
        (
            br#"Digest realm="r", nonce="n", algorithm=SHA-512-256"#,
            AuthError::UnsupportedAlgorithm,
        ),
        (long.as_bytes(), AuthError::TooLarge),
    ];
    for (value, err) in cases {
        assert_eq!(
            parse_digest_challenge(value).map(|_| ()),
            Err(*err),
            "{}",
            String::from_utf8_lossy(value)
        );
    }
    assert_eq!(AuthError::AuthIntOnly.kind(), "auth_unsupported");
    assert_eq!(AuthError::Malformed.kind(), "auth_challenge");
    // No challenge yet: an error, nothing written.
    let mut st = DigestState::new();
    let mut out = Vec::new();
    assert_eq!(
        st.write_header("u", "p", "GET", "/", "c", &mut out),
        Err(AuthError::NoChallenge)
    );
    assert!(out.is_empty());
    // A failed challenge leaves the state as it was.
    st.take_challenge_value(br#"Digest realm="r", nonce="n""#)
        .unwrap();
    assert!(st.take_challenge_value(br#"Digest realm="x""#).is_err());
    assert_eq!(st.realm, b"r");
}

#[test]
fn mutated_challenges_never_panic() {
    let seed = unfold(RFC7616_SHA256);
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut st = DigestState::new();
    let mut out = Vec::new();
    let alphabet = b"\",\\= \tDigestrealmnonceqop\xff";
    for round in 0..20_000 {
        let mut v = seed.clone();
        for _ in 0..(1 + round % 6) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = (x as usize) % (v.len() + 1);
            let b = alphabet[(x >> 40) as usize % alphabet.len()];
            match x % 3 {
                0 if i < v.len() => v[i] = b,
                1 if i < v.len() => {
                    v.remove(i);
                }
                _ => v.insert(i, b),
            }
        }
        if st.take_challenge_value(&v).is_ok() {
            out.clear();
            st.write_header("u", "p", "GET", "/", "c", &mut out)
                .unwrap();
            assert!(!out.contains(&b'\n') || out.ends_with(b"\r\n"));
        }
    }
}
