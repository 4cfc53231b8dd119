//! The URL parser from a table of good and bad URLs, and hostile inputs that must not panic.

use super::*;

/// (url, scheme, userinfo, host, port, path, query, target as `push_target(.., b"")` writes it)
type Good = (
    &'static [u8],
    Scheme,
    Option<&'static str>,
    &'static str,
    u16,
    &'static str,
    Option<&'static str>,
    &'static str,
);

const GOOD: &[Good] = &[
    (
        b"http://example.com",
        Scheme::Http,
        None,
        "example.com",
        80,
        "",
        None,
        "/",
    ),
    (
        b"http://example.com/",
        Scheme::Http,
        None,
        "example.com",
        80,
        "/",
        None,
        "/",
    ),
    (b"https://h", Scheme::Https, None, "h", 443, "", None, "/"),
    (
        b"ws://h/chat",
        Scheme::Ws,
        None,
        "h",
        80,
        "/chat",
        None,
        "/chat",
    ),
    (b"wss://h", Scheme::Wss, None, "h", 443, "", None, "/"),
    // Upper-case scheme; the host's case is the caller's to fold.
    (
        b"HTTPS://Example.COM:8443/A/b?X=1#frag",
        Scheme::Https,
        None,
        "Example.COM",
        8443,
        "/A/b",
        Some("X=1"),
        "/A/b?X=1",
    ),
    (b"WsS://h:9/", Scheme::Wss, None, "h", 9, "/", None, "/"),
    // IPv6 in brackets, with and without a port; the brackets are not part of the host.
    (
        b"http://[::1]:8080?x",
        Scheme::Http,
        None,
        "::1",
        8080,
        "",
        Some("x"),
        "/?x",
    ),
    (
        b"http://[2001:db8::1]/p",
        Scheme::Http,
        None,
        "2001:db8::1",
        80,
        "/p",
        None,
        "/p",
    ),
    (
        b"https://[::ffff:1.2.3.4]:443/",
        Scheme::Https,
        None,
        "::ffff:1.2.3.4",
        443,
        "/",
        None,
        "/",
    ),
    (
        b"http://127.0.0.1:1/",
        Scheme::Http,
        None,
        "127.0.0.1",
        1,
        "/",
        None,
        "/",
    ),
    // Ports: empty is the default; leading zeros within five digits; the highest.
    (b"http://h:/", Scheme::Http, None, "h", 80, "/", None, "/"),
    (
        b"http://h:00080/",
        Scheme::Http,
        None,
        "h",
        80,
        "/",
        None,
        "/",
    ),
    (
        b"http://h:65535",
        Scheme::Http,
        None,
        "h",
        65535,
        "",
        None,
        "/",
    ),
    // Query without a path, empty query, a '?' inside the query, a fragment alone.
    (
        b"http://h?q",
        Scheme::Http,
        None,
        "h",
        80,
        "",
        Some("q"),
        "/?q",
    ),
    (
        b"http://h/?",
        Scheme::Http,
        None,
        "h",
        80,
        "/",
        Some(""),
        "/?",
    ),
    (
        b"http://h/a?b?c",
        Scheme::Http,
        None,
        "h",
        80,
        "/a",
        Some("b?c"),
        "/a?b?c",
    ),
    (
        b"http://h#f?not-a-query",
        Scheme::Http,
        None,
        "h",
        80,
        "",
        None,
        "/",
    ),
    // User info: up to the last '@', as written.
    (
        b"http://user:p%40ss@h/",
        Scheme::Http,
        Some("user:p%40ss"),
        "h",
        80,
        "/",
        None,
        "/",
    ),
    (
        b"http://a@b@h/x",
        Scheme::Http,
        Some("a@b"),
        "h",
        80,
        "/x",
        None,
        "/x",
    ),
    (
        b"http://@h/",
        Scheme::Http,
        Some(""),
        "h",
        80,
        "/",
        None,
        "/",
    ),
    // Names: letters, digits and -._~
    (
        b"http://my_host-1.local~x/",
        Scheme::Http,
        None,
        "my_host-1.local~x",
        80,
        "/",
        None,
        "/",
    ),
    // Spaces and non-ASCII in the path and query are kept, and encoded by push_target.
    (
        "http://h/a b/\u{e9}?q= 1".as_bytes(),
        Scheme::Http,
        None,
        "h",
        80,
        "/a b/\u{e9}",
        Some("q= 1"),
        "/a%20b/%C3%A9?q=%201",
    ),
    // Dot segments are kept (resolving them is the redirect's business).
    (
        b"http://h/a/../b/./c",
        Scheme::Http,
        None,
        "h",
        80,
        "/a/../b/./c",
        None,
        "/a/../b/./c",
    ),
];

#[test]
fn good_urls_split_into_their_parts() {
    for &(input, scheme, userinfo, host, port, path, query, target) in GOOD {
        let shown = String::from_utf8_lossy(input);
        let u = Url::parse(input).unwrap_or_else(|e| panic!("{shown}: {e:?}"));
        assert_eq!(u.scheme, scheme, "{shown}");
        assert_eq!(u.userinfo, userinfo.map(str::as_bytes), "{shown}");
        assert_eq!(u.host, host, "{shown}");
        assert_eq!(u.port, port, "{shown}");
        assert_eq!(u.path, path.as_bytes(), "{shown}");
        assert_eq!(u.query, query.map(str::as_bytes), "{shown}");
        assert_eq!(u.is_ipv6(), host.contains(':'), "{shown}");
        let mut t = String::new();
        u.push_target(&mut t, b"");
        assert_eq!(t, target, "{shown}");
    }
}

#[test]
fn bad_urls_name_what_and_where() {
    use UrlErrorKind::*;
    let long = format!("http://h/{}", "a".repeat(MAX_URL_LEN));
    let long_host = format!("http://{}/", "a".repeat(MAX_HOST_LEN + 1));
    // (url, kind, the part quoted)
    let cases: &[(&[u8], UrlErrorKind, &str)] = &[
        (b"", NoScheme, ""),
        (b"example.com/x", NoScheme, ""),
        (b"127.0.0.1:80", NoScheme, ""),
        (b"/relative", NoScheme, ""),
        (b"//h/p", NoScheme, ""),
        (b"1http://h/", NoScheme, ""),
        (b"localhost:8080", NoAuthority, ""),
        (b"http:/x", NoAuthority, ""),
        (b"http:", NoAuthority, ""),
        (b"mailto:x@y", NoAuthority, ""),
        (b"ftp://h/", UnsupportedScheme, "ftp"),
        (
            b"chrome-extension://abc/x.js",
            UnsupportedScheme,
            "chrome-extension",
        ),
        (b"http://", NoHost, ""),
        (b"http:///x", NoHost, ""),
        (b"http://:80/", NoHost, ""),
        (b"http://user@/p", NoHost, ""),
        (b"http://a b/", BadHost, "a b"),
        (b"http://h\xc3\xa9/", BadHost, "h\u{e9}"),
        (b"http://a:b:80/", BadHost, "a:b"),
        (b"http://h%41/", BadHost, "h%41"),
        (
            long_host.as_bytes(),
            BadHost,
            &long_host[7..long_host.len() - 1],
        ),
        (b"http://[::1/", UnclosedBracket, "[::1"),
        (b"http://[zz]/", BadHost, "[zz]"),
        (b"http://[]/", BadHost, "[]"),
        (b"http://[1:2]/", BadHost, "[1:2]"),
        (b"http://[fe80::1%25eth0]/", BadHost, "[fe80::1%25eth0]"),
        (b"http://[::1]x/", AfterIpv6, "x"),
        (b"http://[::1]:80x/", BadPort, "80x"),
        (b"http://h:0/", BadPort, "0"),
        (b"http://h:65536/", BadPort, "65536"),
        (b"http://h:99999/", BadPort, "99999"),
        (b"http://h:000080/", BadPort, "000080"),
        (b"http://h:+80/", BadPort, "+80"),
        (b"http://h:-1/", BadPort, "-1"),
        (b"http://h:8x?q", BadPort, "8x"),
        (b"http://h: 80/", BadPort, " 80"),
        (b"http://u ser@h/", BadUserinfo, " "),
        (b"http://h/a\r\nX-Injected: 1", ControlChar, "\r"),
        (b"http://h/a\x00", ControlChar, "\x00"),
        (b"http://h\t/", ControlChar, "\t"),
        (b"http://h/\x7f", ControlChar, "\x7f"),
        (b"http://h/#frag\n", ControlChar, "\n"),
        (long.as_bytes(), TooLong, "aaaaaaaaa"),
    ];
    for &(input, kind, part) in cases {
        let shown = String::from_utf8_lossy(input);
        let e = Url::parse(input).expect_err(&shown);
        assert_eq!(e.kind, kind, "{shown}");
        assert!(
            e.range.end <= input.len() && e.range.start <= e.range.end,
            "{shown}"
        );
        let text = std::str::from_utf8(input).unwrap();
        assert_eq!(e.part(text), part, "{shown}");
    }
    // The limits themselves are accepted.
    let host = "a".repeat(MAX_HOST_LEN);
    assert_eq!(
        Url::parse(format!("http://{host}/").as_bytes())
            .unwrap()
            .host,
        host
    );
    let mut at_limit = "http://h/".to_string();
    at_limit.push_str(&"a".repeat(MAX_URL_LEN - at_limit.len()));
    assert_eq!(at_limit.len(), MAX_URL_LEN);
    assert!(Url::parse(at_limit.as_bytes()).is_ok());
}

#[test]
fn a_reference_from_its_authority_takes_the_scheme_given() {
    let u = Url::with_scheme(Scheme::Https, b"//H:8443/p?q#f").unwrap();
    assert_eq!((u.scheme, u.host, u.port), (Scheme::Https, "H", 8443));
    assert_eq!((u.path, u.query), (&b"/p"[..], Some(&b"q"[..])));
    assert_eq!(Url::with_scheme(Scheme::Wss, b"//h").unwrap().port, 443);
    let e = Url::with_scheme(Scheme::Http, b"/p").unwrap_err();
    assert_eq!(e.kind, UrlErrorKind::NoAuthority);
    // Ranges are into the reference given.
    let e = Url::with_scheme(Scheme::Http, b"//h:0/").unwrap_err();
    assert_eq!((e.kind, e.part("//h:0/")), (UrlErrorKind::BadPort, "0"));
    let e = Url::with_scheme(Scheme::Http, b"//h/\n").unwrap_err();
    assert_eq!(e.kind, UrlErrorKind::ControlChar);
}

#[test]
fn schemes_and_their_defaults() {
    for (name, scheme, port, tls) in [
        ("http", Scheme::Http, 80, false),
        ("HTTPS", Scheme::Https, 443, true),
        ("Ws", Scheme::Ws, 80, false),
        ("wss", Scheme::Wss, 443, true),
    ] {
        assert_eq!(Scheme::parse(name.as_bytes()), Some(scheme));
        assert_eq!((scheme.default_port(), scheme.is_tls()), (port, tls));
        assert!(scheme.as_str().eq_ignore_ascii_case(name));
    }
    for bad in ["", "htt", "https2", "ftp", "http "] {
        assert_eq!(Scheme::parse(bad.as_bytes()), None, "{bad}");
    }
}

/// An input and the (scheme, rest) it splits into, if it does.
type SplitCase<'a> = (&'a [u8], Option<(&'a [u8], &'a [u8])>);

#[test]
fn schemes_split_only_before_any_slash_query_or_fragment() {
    let cases: &[SplitCase] = &[
        (b"g:h", Some((b"g", b"h"))),
        (b"http:", Some((b"http", b""))),
        (b"a+b-c.d://x", Some((b"a+b-c.d", b"//x"))),
        (b"a/b:c", None),
        (b"?a:b", None),
        (b"#a:b", None),
        (b"1a:b", None),
        (b":b", None),
        (b"no-colon", None),
        (b"", None),
    ];
    for &(input, want) in cases {
        assert_eq!(
            split_scheme(input),
            want,
            "{}",
            String::from_utf8_lossy(input)
        );
    }
    assert_eq!(split_path_query(b"/p?q#f?x"), (&b"/p"[..], Some(&b"q"[..])));
    assert_eq!(split_path_query(b"#f"), (&b""[..], None));
}

#[test]
fn percent_encoding_takes_what_cannot_be_sent_and_the_extra_set() {
    let mut s = String::new();
    percent_encode(&mut s, b"a b\x01\x7f\xff{|}~", b"{}");
    assert_eq!(s, "a%20b%01%7F%FF%7B|%7D~");
}

/// Invariants of any URL the parser accepts.
fn check_accepted(u: &Url<'_>, input: &[u8]) {
    let shown = String::from_utf8_lossy(input);
    assert!(!u.host.is_empty() && u.host.is_ascii(), "{shown}");
    assert!(u.port != 0, "{shown}");
    assert!(
        u.path.is_empty() || u.path.first() == Some(&b'/'),
        "{shown}"
    );
    let mut t = String::new();
    u.push_target(&mut t, b"");
    assert!(t.starts_with('/'), "{shown}: {t}");
    assert!(t.bytes().all(|b| b > 0x20 && b < 0x7f), "{shown}: {t}");
}

#[test]
fn truncated_and_mutated_urls_never_panic() {
    let mut accepted = 0;
    for &(input, ..) in GOOD {
        for i in 0..=input.len() {
            for part in [&input[..i], &input[i..]] {
                if let Ok(u) = Url::parse(part) {
                    check_accepted(&u, part);
                    accepted += 1;
                }
                let _ = Url::with_scheme(Scheme::Http, part);
            }
        }
    }
    // Some truncations are URLs still (`http://exam`), most are not.
    assert!(accepted > GOOD.len(), "{accepted}");
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for round in 0..20_000 {
        let mut v = GOOD[round % GOOD.len()].0.to_vec();
        for _ in 0..(round % 6) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = (x as usize) % (v.len() + 1);
            let alphabet = b"/.:?#@[]%\xff 0a\r";
            let b = alphabet[(x >> 32) as usize % alphabet.len()];
            if x & 1 == 0 && i < v.len() {
                v[i] = b;
            } else {
                v.insert(i, b);
            }
        }
        if let Ok(u) = Url::parse(&v) {
            check_accepted(&u, &v);
        }
    }
}
