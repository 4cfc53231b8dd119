//! Users that behave like real users (issue 16), the CLI's side: credentials that contradict
//! each other are usage errors (exit 2, one line), before any load. What the users do against
//! nginx and Apache (cookies, redirects, Basic and Digest auth, exact codes) is
//! crates/headroom-run/tests/users.rs.

mod common;

use common::*;

#[test]
fn issue16_credentials_twice_or_digest_without_any_are_usage_errors() {
    // Refused before any connection: nothing listens on the discard port.
    let url = "http://127.0.0.1:9/basic";
    let with_userinfo = "http://alice:wonderland@127.0.0.1:9/basic";
    let out = run_plain(with_userinfo, &["-a", "bob:x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(one_line(&out).contains("credentials twice"));
    let out = run_plain(url, &["--digest"]);
    assert_eq!(out.status.code(), Some(2));
    one_line(&out);
}
