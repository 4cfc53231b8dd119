//! Fuzz the cookie jar: `Set-Cookie` parsing, the cookie-date algorithm, storage and the
//! `Cookie` header.
//!
//! Input layout: byte 0 picks the request (host, path, secure) and the jar's bound (bits 0-1:
//! host, bits 2-3: path, bit 4: secure, bits 5-7: most cookies, 1 to 8); the rest is lines of
//! `Set-Cookie` values (split at LF; a CR or other control character stays in a value, where the
//! parser must refuse it). Each line is stored at a later time than the one before (the clock
//! steps by the line's first byte, in minutes), then the `Cookie` header is written.
//!
//! Checked besides "no panic": the jar never holds more cookies than its bound, nor a cookie
//! larger than the per-cookie bound; the header is one line (`Cookie: …\r\n`, no other CR or
//! LF) or nothing; a stored cookie is sent back to the request that set it unless it is
//! `Secure` on a plain request or it set a path elsewhere; a cookie that parsed but was not
//! stored has a typed error.
#![no_main]

use headroom_proto::cookie::{parse_cookie_date, parse_set_cookie, Jar, JarLimits, Stored};
use libfuzzer_sys::fuzz_target;

const HOSTS: [&str; 4] = ["example.com", "www.example.com", "127.0.0.1", "[::1]"];
const PATHS: [&str; 4] = ["/", "/a/b", "/a/b/c?q=/x", ""];

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let host = HOSTS[usize::from(sel & 3)];
    let path = PATHS[usize::from((sel >> 2) & 3)];
    let secure = sel & 0x10 != 0;
    let limits = JarLimits {
        max_cookies: usize::from(sel >> 5) + 1,
        ..JarLimits::default()
    };
    let mut jar = Jar::with_limits(limits);
    let mut now = 1_700_000_000u64;
    let mut out = Vec::new();
    for line in rest.split(|&b| b == b'\n') {
        now += 60 * u64::from(line.first().copied().unwrap_or(0));
        let _ = parse_cookie_date(line);
        let parsed = parse_set_cookie(line);
        let stored = jar.set_cookie(line, host, path, now);
        match (&parsed, &stored) {
            (Err(e), Err(f)) => assert_eq!(e, f),
            (Err(e), Ok(s)) => panic!("parse failed ({e:?}) but store said {s:?}"),
            (Ok(_), _) => {}
        }
        assert!(jar.len() <= limits.max_cookies);
        for c in jar.iter() {
            let size = c.name().len() + c.value().len() + c.domain().len() + c.path().len();
            assert!(size <= limits.max_cookie_bytes);
            assert!(!c.name().is_empty());
        }
        out.clear();
        let n = jar.write_header(host, path, secure, now, &mut out);
        if n == 0 {
            assert!(out.is_empty());
        } else {
            assert!(out.starts_with(b"Cookie: ") && out.ends_with(b"\r\n"));
            let body = &out[..out.len() - 2];
            assert!(!body.contains(&b'\r') && !body.contains(&b'\n'));
        }
        if let (Ok(c), Ok(Stored::Added | Stored::Replaced)) = (&parsed, &stored) {
            let path_ok = c
                .path
                .map_or(true, |p| p.first() != Some(&b'/') || p == b"/");
            if path_ok && (secure || !c.secure) {
                assert!(n > 0, "a cookie just stored for this request was not sent");
            }
        }
    }
});
