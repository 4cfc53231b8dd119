//! Fuzz `Location` resolution.
//!
//! Input layout: byte 0 picks the base URL (bits 0-1) and whether a warm `Target` is reused
//! (bit 2); the rest is the `Location` value. Checked besides "no panic": a resolved target
//! has a host, a port, a request target starting with `/` made only of visible ASCII (no
//! space, control or fragment: it can go into a request line as is), and resolving it again
//! against itself gives the same target (resolution is idempotent on its own output, except a
//! path starting with `//`, which a reference would read as an authority).
#![no_main]

use headroom_proto::redirect::{resolve, Base, Scheme, Target};
use libfuzzer_sys::fuzz_target;

const BASES: [Base<'static>; 4] = [
    Base {
        scheme: Scheme::Http,
        host: "a",
        port: 80,
        target: "/b/c/d;p?q",
    },
    Base {
        scheme: Scheme::Https,
        host: "Example.com",
        port: 8443,
        target: "/",
    },
    Base {
        scheme: Scheme::Http,
        host: "[::1]",
        port: 8080,
        target: "",
    },
    Base {
        scheme: Scheme::Http,
        host: "127.0.0.1",
        port: 1,
        target: "/x/../y/?z#f",
    },
];

fuzz_target!(|data: &[u8]| {
    let Some((&sel, location)) = data.split_first() else {
        return;
    };
    let base = BASES[usize::from(sel & 3)];
    let mut t = Target::default();
    if sel & 4 != 0 {
        let _ = resolve(&base, b"//warm.example:1/some/long/path?and=query", &mut t);
    }
    if resolve(&base, location, &mut t).is_err() {
        return;
    }
    assert!(!t.host.is_empty() && t.port != 0);
    assert!(t.target.starts_with('/'));
    assert!(
        t.target.bytes().all(|b| b.is_ascii_graphic() && b != b'#'),
        "{t:?}"
    );
    if t.target.starts_with("//") {
        return; // an empty first segment reads as an authority when re-resolved
    }
    let again_base = Base {
        scheme: t.scheme,
        host: &t.host,
        port: t.port,
        target: &t.target,
    };
    let mut again = Target::default();
    resolve(&again_base, t.target.as_bytes(), &mut again).expect("own output resolves");
    assert_eq!(again, t);
});
