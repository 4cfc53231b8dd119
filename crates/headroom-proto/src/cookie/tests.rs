//! Tests of the cookie jar against RFC 6265 §5, and of its bounds against hostile input.

use super::*;

const NOW: u64 = 1_700_000_000;

fn header(jar: &mut Jar, host: &str, path: &str, secure: bool, now: u64) -> String {
    let mut out = Vec::new();
    jar.write_value(host, path, secure, now, &mut out);
    String::from_utf8(out).unwrap()
}

fn set(jar: &mut Jar, value: &str, host: &str, path: &str) -> Result<Stored, CookieError> {
    jar.set_cookie(value.as_bytes(), host, path, NOW)
}

#[test]
fn parses_name_value_and_attributes() {
    let c = parse_set_cookie(
        b" SID = 31d4d96e407aad42 ; Path=/docs; Domain=.Example.com; Secure; HttpOnly; SameSite=Lax; Max-Age=60; Expires=Wed, 09 Jun 2021 10:18:14 GMT",
    )
    .unwrap();
    assert_eq!(c.name, b"SID");
    assert_eq!(c.value, b"31d4d96e407aad42");
    assert_eq!(c.path, Some(&b"/docs"[..]));
    assert_eq!(c.domain, Some(&b"Example.com"[..]));
    assert!(c.secure && c.http_only);
    assert_eq!(c.max_age, Some(60));
    assert_eq!(c.expires, Some(1_623_233_894));

    // Attribute names are case-insensitive; the last valid one wins; unknown ones are ignored.
    let c = parse_set_cookie(
        b"a=\"quoted v\"; PATH=/x; path=/y; max-age=abc; MAX-AGE=5; foo=bar; secure=no",
    )
    .unwrap();
    assert_eq!(c.value, b"\"quoted v\"");
    assert_eq!(c.path, Some(&b"/y"[..]));
    assert_eq!(
        c.max_age,
        Some(5),
        "an invalid Max-Age is ignored, not reset"
    );
    assert!(c.secure);

    // An empty value, and '=' inside the value.
    let c = parse_set_cookie(b"a=").unwrap();
    assert_eq!((c.name, c.value), (&b"a"[..], &b""[..]));
    let c = parse_set_cookie(b"a=b=c").unwrap();
    assert_eq!((c.name, c.value), (&b"a"[..], &b"b=c"[..]));
    // An empty Domain is ignored (§5.2.3).
    let c = parse_set_cookie(b"a=b; Domain=; Domain=.").unwrap();
    assert_eq!(c.domain, None);
}

#[test]
fn malformed_set_cookie_is_a_typed_error() {
    let cases: &[(&[u8], CookieError)] = &[
        (b"", CookieError::NoNameValue),
        (b"novalue", CookieError::NoNameValue),
        (b"novalue; a=b", CookieError::NoNameValue),
        (b"=value", CookieError::EmptyName),
        (b"  =value", CookieError::EmptyName),
        (b"a=b\r\nX-Injected: 1", CookieError::ControlChar),
        (b"a=b\x00", CookieError::ControlChar),
        (b"a=b; Path=/\x7f", CookieError::ControlChar),
    ];
    for (input, err) in cases {
        assert_eq!(parse_set_cookie(input), Err(*err), "{input:?}");
        assert_eq!(err.kind(), "cookie_malformed");
    }
    assert_eq!(CookieError::DomainMismatch.kind(), "cookie_rejected");
    // Tabs are whitespace, not control characters; non-UTF-8 bytes are just bytes.
    let c = parse_set_cookie(b"\tn\t=\xff\xfe\x80;\tSecure").unwrap();
    assert_eq!(
        (c.name, c.value, c.secure),
        (&b"n"[..], &b"\xff\xfe\x80"[..], true)
    );
}

#[test]
fn cookie_dates_parse_as_rfc_6265_says() {
    let ok: &[(&str, u64)] = &[
        ("Sun, 06 Nov 1994 08:49:37 GMT", 784_111_777),
        ("Sunday, 06-Nov-94 08:49:37 GMT", 784_111_777),
        ("Sun Nov  6 08:49:37 1994", 784_111_777),
        ("6 november 1994 8:49:37", 784_111_777),
        ("Wed, 09 Jun 2021 10:18:14 GMT", 1_623_233_894),
        ("Thu, 01 Jan 1970 00:00:00 GMT", 0),
        ("Thu, 01 Jan 1970 00:00:01 GMT", 1),
        ("01 Jan 69 00:00:00", 3_124_224_000), // 2069
        ("29 Feb 2000 00:00:00", 951_782_400),
        ("31 Dec 9999 23:59:59", 253_402_300_799),
        ("Mon, 01 Jan 1601 00:00:00 GMT", 0), // valid, before the epoch
        ("Fri, 13 Feb 2009 23:31:30Z", 1_234_567_890),
    ];
    for (input, want) in ok {
        assert_eq!(parse_cookie_date(input.as_bytes()), Some(*want), "{input}");
    }
    let bad: &[&str] = &[
        "",
        "garbage",
        "Sun, 06 Nov 99999 08:49:37 GMT", // a five-digit year is no year
        "Sun, 06 Nov 1600 08:49:37 GMT",
        "30 Feb 2024 00:00:00",
        "29 Feb 2023 00:00:00",
        "00 Jan 2024 00:00:00",
        "32 Jan 2024 00:00:00",
        "1 Jan 2024 24:00:00",
        "1 Jan 2024 23:60:00",
        "1 Jan 2024 23:59:60",
        "1 Jan 2024 123:00:00",
        "1 Jan 2024",
        "1 Xyz 2024 00:00:00",
        "\u{ff}\u{fe} 1 Jan",
    ];
    for input in bad {
        assert_eq!(parse_cookie_date(input.as_bytes()), None, "{input}");
    }
    assert_eq!(
        parse_cookie_date(b"1 Jan 2024 00:00:00\xff"),
        Some(1_704_067_200)
    );
}

#[test]
fn max_age_wins_over_expires_and_expiry_is_honoured() {
    for v in [
        "a=1; Max-Age=10; Expires=Thu, 01 Jan 1970 00:00:01 GMT",
        "a=1; Expires=Thu, 01 Jan 1970 00:00:01 GMT; Max-Age=10",
    ] {
        let mut jar = Jar::new();
        assert_eq!(set(&mut jar, v, "h", "/"), Ok(Stored::Added), "{v}");
        assert_eq!(jar.iter().next().unwrap().expiry(), Some(NOW + 10));
        assert_eq!(header(&mut jar, "h", "/", false, NOW + 9), "a=1");
        assert_eq!(header(&mut jar, "h", "/", false, NOW + 10), "");
        jar.remove_expired(NOW + 10);
        assert!(jar.is_empty());
    }
    let mut jar = Jar::new();
    set(
        &mut jar,
        "a=1; Expires=Wed, 09 Jun 2100 10:18:14 GMT",
        "h",
        "/",
    )
    .unwrap();
    assert_eq!(header(&mut jar, "h", "/", false, NOW), "a=1");
    // A session cookie never expires within a run.
    set(&mut jar, "s=1", "h", "/").unwrap();
    assert_eq!(jar.iter().nth(1).unwrap().expiry(), None);
    assert_eq!(header(&mut jar, "h", "/", false, u64::MAX - 1), "s=1");
}

#[test]
fn hostile_max_age_values() {
    let mut jar = Jar::new();
    set(
        &mut jar,
        "a=1; Max-Age=99999999999999999999999999",
        "h",
        "/",
    )
    .unwrap();
    assert_eq!(
        jar.iter().next().unwrap().expiry(),
        Some(NOW + i64::MAX as u64)
    );
    set(&mut jar, "b=1; Max-Age=18446744073709551615", "h", "/").unwrap();
    assert_eq!(
        header(&mut jar, "h", "/", false, NOW + (1 << 40)),
        "a=1; b=1"
    );
    // Max-Age <= 0 deletes; a huge negative one too.
    assert_eq!(
        set(&mut jar, "a=; Max-Age=0", "h", "/"),
        Ok(Stored::Deleted)
    );
    assert_eq!(
        set(&mut jar, "b=; Max-Age=-99999999999999999999999", "h", "/"),
        Ok(Stored::Deleted)
    );
    assert_eq!(
        set(&mut jar, "c=; Max-Age=-1", "h", "/"),
        Ok(Stored::Expired)
    );
    assert!(jar.is_empty());
    // "-", "+5", "5s" and "" are not delta-seconds: ignored, the cookie is a session cookie.
    for v in [
        "d=1; Max-Age=-",
        "d=1; Max-Age=+5",
        "d=1; Max-Age=5s",
        "d=1; Max-Age=",
    ] {
        set(&mut jar, v, "h", "/").unwrap();
        assert_eq!(jar.iter().next().unwrap().expiry(), None, "{v}");
    }
    // A past Expires deletes.
    assert_eq!(
        set(
            &mut jar,
            "d=x; Expires=Thu, 01 Jan 1970 00:00:00 GMT",
            "h",
            "/"
        ),
        Ok(Stored::Deleted)
    );
}

#[test]
fn domain_and_path_matching_tables() {
    let domains: &[(&str, &str, bool)] = &[
        ("example.com", "example.com", true),
        ("Example.COM", "example.com", true),
        ("www.example.com", "example.com", true),
        ("a.b.example.com", "example.com", true),
        ("badexample.com", "example.com", false),
        ("example.com", "www.example.com", false),
        ("com", "example.com", false),
        ("example.com", "", false),
        ("127.0.0.1", "127.0.0.1", true),
        ("1.127.0.0.1", "127.0.0.1", true), // not an IP literal: a host name
        ("10.0.0.1", "0.0.1", false),
        ("[::1]", "[::1]", true),
        ("a.[::1]", "[::1]", false),
    ];
    for (host, domain, want) in domains {
        assert_eq!(
            domain_match(host.as_bytes(), domain.as_bytes()),
            *want,
            "{host} ~ {domain}"
        );
    }
    let paths: &[(&str, &str, bool)] = &[
        ("/", "/", true),
        ("", "/", true),
        ("/docs", "/docs", true),
        ("/docs/", "/docs", true),
        ("/docs/web", "/docs", true),
        ("/docs/web", "/docs/", true),
        ("/docsweb", "/docs", false),
        ("/doc", "/docs", false),
        ("/Docs", "/docs", false),
        ("/anything", "/", true),
    ];
    for (path, cookie_path, want) in paths {
        assert_eq!(
            path_match(path.as_bytes(), cookie_path.as_bytes()),
            *want,
            "{path} ~ {cookie_path}"
        );
    }
    let defaults: &[(&str, &str)] = &[
        ("", "/"),
        ("x", "/"),
        ("/", "/"),
        ("/a", "/"),
        ("/a/", "/a"),
        ("/a/b", "/a"),
        ("/a/b/c?q=/x/y", "/a/b"),
        ("/a/b#frag/z", "/a"),
    ];
    for (path, want) in defaults {
        assert_eq!(default_path(path.as_bytes()), want.as_bytes(), "{path}");
    }
}

#[test]
fn host_only_domain_and_path_scoping() {
    let mut jar = Jar::new();
    assert_eq!(
        set(&mut jar, "host=1", "Example.com", "/a/b"),
        Ok(Stored::Added)
    );
    assert_eq!(
        set(
            &mut jar,
            "dom=1; Domain=.EXAMPLE.com; Path=/",
            "www.example.com",
            "/"
        ),
        Ok(Stored::Added)
    );
    assert_eq!(
        set(&mut jar, "same=1; Domain=example.com", "example.com", "/"),
        Ok(Stored::Added)
    );
    assert_eq!(
        set(
            &mut jar,
            "bad=1; Path=relative",
            "example.com",
            "/x/y?q=/1/2"
        ),
        Ok(Stored::Added)
    );
    assert_eq!(
        set(&mut jar, "evil=1; Domain=other.com", "example.com", "/"),
        Err(CookieError::DomainMismatch)
    );
    assert_eq!(
        set(&mut jar, "up=1; Domain=www.example.com", "example.com", "/"),
        Err(CookieError::DomainMismatch)
    );
    assert_eq!(set(&mut jar, "x=1", "", "/"), Err(CookieError::EmptyHost));

    let view: Vec<_> = jar
        .iter()
        .map(|c| {
            (
                String::from_utf8_lossy(c.name()).into_owned(),
                String::from_utf8_lossy(c.domain()).into_owned(),
                String::from_utf8_lossy(c.path()).into_owned(),
                c.host_only(),
            )
        })
        .collect();
    assert_eq!(
        view,
        [
            ("host".into(), "example.com".into(), "/a".into(), true),
            ("bad".into(), "example.com".into(), "/x".into(), true),
            ("dom".into(), "example.com".into(), "/".into(), false),
            ("same".into(), "example.com".into(), "/".into(), false),
        ]
    );
    assert_eq!(
        header(&mut jar, "example.com", "/a/b", false, NOW),
        "host=1; dom=1; same=1"
    );
    assert_eq!(
        header(&mut jar, "EXAMPLE.COM", "/x", false, NOW),
        "bad=1; dom=1; same=1"
    );
    // A subdomain gets the domain cookies, not the host-only ones.
    assert_eq!(
        header(&mut jar, "www.example.com", "/a/b", false, NOW),
        "dom=1; same=1"
    );
    assert_eq!(header(&mut jar, "example.org", "/", false, NOW), "");
    assert_eq!(
        header(&mut jar, "example.com", "/ab", false, NOW),
        "dom=1; same=1"
    );
}

#[test]
fn ip_hosts_get_host_only_cookies() {
    let mut jar = Jar::new();
    set(&mut jar, "a=1", "127.0.0.1", "/").unwrap();
    set(&mut jar, "b=1; Domain=127.0.0.1", "127.0.0.1", "/").unwrap();
    assert_eq!(
        set(&mut jar, "c=1; Domain=0.0.1", "127.0.0.1", "/"),
        Err(CookieError::DomainMismatch)
    );
    assert_eq!(header(&mut jar, "127.0.0.1", "/", false, NOW), "a=1; b=1");
    assert_eq!(header(&mut jar, "127.0.0.2", "/", false, NOW), "");
}

#[test]
fn secure_cookies_go_only_over_secure_channels() {
    let mut jar = Jar::new();
    set(&mut jar, "s=1; Secure", "h", "/").unwrap();
    set(&mut jar, "p=1; HttpOnly", "h", "/").unwrap();
    assert_eq!(header(&mut jar, "h", "/", false, NOW), "p=1");
    assert_eq!(header(&mut jar, "h", "/", true, NOW), "s=1; p=1");
}

#[test]
fn order_is_longer_paths_first_then_creation_and_replacement_keeps_its_place() {
    let mut jar = Jar::new();
    for v in [
        "a=1; Path=/",
        "b=1; Path=/x/y",
        "c=1; Path=/x",
        "d=1; Path=/",
        "e=1; Path=/x/y",
    ] {
        set(&mut jar, v, "h", "/").unwrap();
    }
    assert_eq!(
        header(&mut jar, "h", "/x/y/z", false, NOW),
        "b=1; e=1; c=1; a=1; d=1"
    );
    // Replacing keeps the creation time, hence the place; a new value and attributes.
    assert_eq!(
        set(&mut jar, "a=2; Path=/; Secure", "h", "/"),
        Ok(Stored::Replaced)
    );
    assert_eq!(
        header(&mut jar, "h", "/x/y/z", true, NOW),
        "b=1; e=1; c=1; a=2; d=1"
    );
    assert_eq!(
        header(&mut jar, "h", "/x/y/z", false, NOW),
        "b=1; e=1; c=1; d=1"
    );
    // A cookie of the same name on another path is another cookie.
    assert_eq!(set(&mut jar, "a=3; Path=/x", "h", "/"), Ok(Stored::Added));
    assert_eq!(header(&mut jar, "h", "/x", true, NOW), "c=1; a=3; a=2; d=1");
    assert_eq!(jar.len(), 6);
    // Deleting and re-adding makes it the newest.
    assert_eq!(
        set(&mut jar, "c=; Path=/x; Max-Age=0", "h", "/"),
        Ok(Stored::Deleted)
    );
    assert_eq!(set(&mut jar, "c=4; Path=/x", "h", "/"), Ok(Stored::Added));
    assert_eq!(header(&mut jar, "h", "/x", true, NOW), "a=3; c=4; a=2; d=1");
}

#[test]
fn write_header_writes_a_whole_line_or_nothing() {
    let mut jar = Jar::new();
    let mut out = b"GET / HTTP/1.1\r\n".to_vec();
    assert_eq!(jar.write_header("h", "/", false, NOW, &mut out), 0);
    assert_eq!(out, b"GET / HTTP/1.1\r\n");
    set(&mut jar, "a=b", "h", "/").unwrap();
    jar.set_cookie(b"c=\xff", "h", "/", NOW).unwrap();
    assert_eq!(jar.write_header("h", "/", false, NOW, &mut out), 2);
    assert_eq!(out, b"GET / HTTP/1.1\r\nCookie: a=b; c=\xff\r\n");
    jar.clear();
    assert!(jar.is_empty());
    assert_eq!(jar.write_header("h", "/", false, NOW, &mut out), 0);
}

#[test]
fn ten_thousand_cookies_hold_the_count_bound() {
    let mut jar = Jar::new();
    for i in 0..10_000 {
        let v = format!("c{i}=v{i}; Path=/p{}", i % 7);
        assert_eq!(set(&mut jar, &v, "h", "/"), Ok(Stored::Added));
        assert!(jar.len() <= MAX_COOKIES);
    }
    assert_eq!(jar.len(), MAX_COOKIES);
    assert_eq!(jar.evicted(), 10_000 - MAX_COOKIES as u64);
    // The most recent ones are kept (least recently used go first).
    assert!(jar.iter().all(|c| {
        let n: usize = std::str::from_utf8(&c.name()[1..])
            .unwrap()
            .parse()
            .unwrap();
        n >= 10_000 - MAX_COOKIES
    }));
    // Buffers are recycled, never more than the bound.
    assert!(jar.cookies.len() + jar.spare.len() <= MAX_COOKIES);

    // A cookie that was just sent survives eviction over one that was not.
    let mut jar = Jar::with_limits(JarLimits {
        max_cookies: 2,
        ..JarLimits::default()
    });
    set(&mut jar, "old=1; Path=/keep", "h", "/").unwrap();
    set(&mut jar, "mid=1; Path=/other", "h", "/").unwrap();
    assert_eq!(header(&mut jar, "h", "/keep", false, NOW), "old=1");
    set(&mut jar, "new=1", "h", "/").unwrap();
    let names: Vec<_> = jar.iter().map(|c| c.name().to_vec()).collect();
    assert_eq!(names, [b"old".to_vec(), b"new".to_vec()]);
    // Expired cookies go before live ones.
    let mut jar = Jar::with_limits(JarLimits {
        max_cookies: 2,
        ..JarLimits::default()
    });
    set(&mut jar, "live=1", "h", "/").unwrap();
    set(&mut jar, "short=1; Max-Age=1", "h", "/").unwrap();
    jar.set_cookie(b"late=1", "h", "/", NOW + 5).unwrap();
    let names: Vec<_> = jar.iter().map(|c| c.name().to_vec()).collect();
    assert_eq!(names, [b"live".to_vec(), b"late".to_vec()]);
    assert_eq!(jar.evicted(), 0);
    // A zero bound is raised to one.
    assert_eq!(
        Jar::with_limits(JarLimits {
            max_cookies: 0,
            max_cookie_bytes: 10
        })
        .limits()
        .max_cookies,
        1
    );
}

#[test]
fn byte_bound_refuses_large_cookies() {
    let mut jar = Jar::new();
    // name + value + domain ("h") + path ("/") = 4096 exactly: fits.
    let value = "v".repeat(MAX_COOKIE_BYTES - 3);
    assert_eq!(
        set(&mut jar, &format!("n={value}"), "h", "/"),
        Ok(Stored::Added)
    );
    let value = "v".repeat(MAX_COOKIE_BYTES);
    assert_eq!(
        set(&mut jar, &format!("n={value}"), "h", "/"),
        Err(CookieError::TooLarge)
    );
    assert_eq!(CookieError::TooLarge.kind(), "cookie_rejected");
    // Over-long Domain and Path attributes are ignored (RFC 6265bis), not fatal.
    let long = "a".repeat(MAX_ATTRIBUTE_VALUE + 1);
    let input = format!("n=1; Domain={long}; Path=/{long}");
    let c = parse_set_cookie(input.as_bytes()).unwrap();
    assert_eq!((c.domain, c.path), (None, None));
    // A 1 MB Set-Cookie with empty name still fails fast and typed.
    let huge = format!("={}", "x".repeat(1 << 20));
    assert_eq!(set(&mut jar, &huge, "h", "/"), Err(CookieError::EmptyName));
    assert_eq!(jar.len(), 1);
}
