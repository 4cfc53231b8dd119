//! Reference resolution against RFC 3986 §5.4's examples, and hostile `Location` values.

use super::*;

const RFC_BASE: Base<'static> = Base {
    scheme: Scheme::Http,
    host: "a",
    port: 80,
    target: "/b/c/d;p?q",
};

fn resolved(base: &Base<'_>, location: &[u8]) -> Result<String, LocationError> {
    let mut t = Target::default();
    resolve(base, location, &mut t).map(|()| t.to_string())
}

#[test]
fn rfc_3986_normal_and_abnormal_examples() {
    let cases: &[(&str, &str)] = &[
        // §5.4.1
        ("g", "http://a/b/c/g"),
        ("./g", "http://a/b/c/g"),
        ("g/", "http://a/b/c/g/"),
        ("/g", "http://a/g"),
        ("//g", "http://g/"),
        ("?y", "http://a/b/c/d;p?y"),
        ("g?y", "http://a/b/c/g?y"),
        ("#s", "http://a/b/c/d;p?q"),
        ("g#s", "http://a/b/c/g"),
        ("g?y#s", "http://a/b/c/g?y"),
        (";x", "http://a/b/c/;x"),
        ("g;x", "http://a/b/c/g;x"),
        ("g;x?y#s", "http://a/b/c/g;x?y"),
        (".", "http://a/b/c/"),
        ("./", "http://a/b/c/"),
        ("..", "http://a/b/"),
        ("../", "http://a/b/"),
        ("../g", "http://a/b/g"),
        ("../..", "http://a/"),
        ("../../", "http://a/"),
        ("../../g", "http://a/g"),
        // §5.4.2
        ("../../../g", "http://a/g"),
        ("../../../../g", "http://a/g"),
        ("/./g", "http://a/g"),
        ("/../g", "http://a/g"),
        ("g.", "http://a/b/c/g."),
        (".g", "http://a/b/c/.g"),
        ("g..", "http://a/b/c/g.."),
        ("..g", "http://a/b/c/..g"),
        ("./../g", "http://a/b/g"),
        ("./g/.", "http://a/b/c/g/"),
        ("g/./h", "http://a/b/c/g/h"),
        ("g/../h", "http://a/b/c/h"),
        ("g;x=1/./y", "http://a/b/c/g;x=1/y"),
        ("g;x=1/../y", "http://a/b/c/y"),
        ("g?y/./x", "http://a/b/c/g?y/./x"),
        ("g?y/../x", "http://a/b/c/g?y/../x"),
        ("g#s/./x", "http://a/b/c/g"),
        ("g#s/../x", "http://a/b/c/g"),
        ("http:g", "http://a/b/c/g"), // the backward-compatible reading
    ];
    for (location, want) in cases {
        assert_eq!(
            resolved(&RFC_BASE, location.as_bytes()).as_deref(),
            Ok(*want),
            "{location}"
        );
    }
    assert_eq!(
        resolved(&RFC_BASE, b"g:h"),
        Err(LocationError::UnsupportedScheme)
    );
}

#[test]
fn absolute_and_scheme_relative_locations() {
    let base = Base {
        scheme: Scheme::Http,
        host: "Local.Test",
        port: 8080,
        target: "/login?next=/home",
    };
    let cases: &[(&str, &str)] = &[
        (
            "https://Example.COM:8443/x/../y?z#f",
            "https://example.com:8443/y?z",
        ),
        ("HTTPS://h", "https://h/"),
        ("https://h:443/", "https://h/"),
        ("http://h:/p", "http://h/p"),
        ("//h:81/p", "http://h:81/p"),
        ("//h", "http://h/"),
        ("http://user:pw@h/p", "http://h/p"),
        ("http://[::1]:8080/a", "http://[::1]:8080/a"),
        ("http://[::1]/a", "http://[::1]/a"),
        ("http://127.0.0.1:9/", "http://127.0.0.1:9/"),
        ("/home", "http://local.test:8080/home"),
        ("home", "http://local.test:8080/home"),
        ("?x=1", "http://local.test:8080/login?x=1"),
        ("#top", "http://local.test:8080/login?next=/home"),
        ("  /padded\t", "http://local.test:8080/padded"),
        (
            "/a b/\u{e9}?q=<x>",
            "http://local.test:8080/a%20b/%C3%A9?q=%3Cx%3E",
        ),
    ];
    for (location, want) in cases {
        assert_eq!(
            resolved(&base, location.as_bytes()).as_deref(),
            Ok(*want),
            "{location}"
        );
    }
    // Non-UTF-8 bytes are percent-encoded, not refused.
    assert_eq!(
        resolved(&base, b"/\xff\xfe?\x80").as_deref(),
        Ok("http://local.test:8080/%FF%FE?%80")
    );
    // An empty base target counts as "/".
    let root = Base { target: "", ..base };
    assert_eq!(
        resolved(&root, b"g").as_deref(),
        Ok("http://local.test:8080/g")
    );
    assert_eq!(
        resolved(&root, b"?q").as_deref(),
        Ok("http://local.test:8080/?q")
    );
}

#[test]
fn bad_locations_are_typed_errors() {
    let long = format!("/{}", "a".repeat(MAX_LOCATION_LEN));
    let cases: &[(&[u8], LocationError)] = &[
        (b"", LocationError::Empty),
        (b"  \t ", LocationError::Empty),
        (long.as_bytes(), LocationError::TooLong),
        (b"/a\r\nX-Injected: 1", LocationError::ControlChar),
        (b"/a\x00", LocationError::ControlChar),
        (b"/a\tb", LocationError::ControlChar),
        (b"ftp://h/", LocationError::UnsupportedScheme),
        (b"wss://h/", LocationError::UnsupportedScheme),
        (b"mailto:x@y", LocationError::UnsupportedScheme),
        (b"javascript:alert(1)", LocationError::UnsupportedScheme),
        (b"https:g", LocationError::NoHost),
        (b"http:///p", LocationError::NoHost),
        (b"//", LocationError::NoHost),
        (b"http://user@/p", LocationError::NoHost),
        (b"http://:80/p", LocationError::NoHost),
        (b"http://h h/", LocationError::BadHost),
        (b"http://h\xc3\xa9/", LocationError::BadHost),
        (b"http://[::1/", LocationError::BadHost),
        (b"http://[zz]/", LocationError::BadHost),
        (b"http://[]/", LocationError::BadHost),
        (b"http://[1:2]/", LocationError::BadHost),
        (b"//u ser@h/", LocationError::BadHost),
        (b"http://[::1]x/", LocationError::BadHost),
        (b"http://h:99999/", LocationError::BadPort),
        (b"http://h:65536/", LocationError::BadPort),
        (b"http://h:0/", LocationError::BadPort),
        (b"http://h:8x/", LocationError::BadPort),
        (b"http://h:-1/", LocationError::BadPort),
        (b"http://h:00000000080/", LocationError::BadPort),
    ];
    for (location, err) in cases {
        assert_eq!(
            resolved(&RFC_BASE, location),
            Err(*err),
            "{}",
            String::from_utf8_lossy(location)
        );
        assert_eq!(err.kind(), "bad_location");
    }
}

#[test]
fn origin_and_authority() {
    let base = Base {
        scheme: Scheme::Http,
        host: "H",
        port: 80,
        target: "/",
    };
    let mut t = Target::default();
    resolve(&base, b"/x", &mut t).unwrap();
    assert!(t.same_origin(&base));
    assert_eq!(t.authority().to_string(), "h");
    resolve(&base, b"http://h:8080/x", &mut t).unwrap();
    assert!(!t.same_origin(&base));
    assert_eq!(t.authority().to_string(), "h:8080");
    resolve(&base, b"https://h/x", &mut t).unwrap();
    assert!(!t.same_origin(&base));
    assert_eq!((t.scheme, t.port), (Scheme::Https, 443));
    assert_eq!(t.authority().to_string(), "h");
}

#[test]
fn follow_method_by_status() {
    use FollowMethod::{Get, Same};
    let cases: &[(u16, &str, Option<FollowMethod>)] = &[
        (301, "GET", Some(Same)),
        (301, "POST", Some(Get)),
        (302, "post", Some(Get)),
        (302, "PUT", Some(Same)),
        (303, "POST", Some(Get)),
        (303, "DELETE", Some(Get)),
        (303, "HEAD", Some(Same)),
        (307, "POST", Some(Same)),
        (308, "POST", Some(Same)),
        (300, "GET", None),
        (304, "GET", None),
        (200, "GET", None),
    ];
    for (status, method, want) in cases {
        assert_eq!(follow_method(*status, method), *want, "{status} {method}");
    }
}

#[test]
fn mutated_locations_never_panic() {
    let seeds: &[&[u8]] = &[
        b"http://[::1]:8080/a/../b?c#d",
        b"//h:1/./..//x",
        b"../../g;x=1/./y",
        b"https:g",
    ];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut t = Target::default();
    for round in 0..20_000 {
        let mut v = seeds[round % seeds.len()].to_vec();
        for _ in 0..(round % 5) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = (x as usize) % (v.len() + 1);
            let alphabet = b"/.:?#@[]%\xff 0a";
            let b = alphabet[(x >> 32) as usize % alphabet.len()];
            if x & 1 == 0 && i < v.len() {
                v[i] = b;
            } else {
                v.insert(i, b);
            }
        }
        if resolve(&RFC_BASE, &v, &mut t).is_ok() {
            assert!(t.target.starts_with('/'), "{t:?}");
            assert!(!t.host.is_empty());
            assert!(t.target.bytes().all(|b| b > 0x20 && b < 0x7f));
        }
    }
}
