//! Users over HTTP/2 (issue 28), the CLI's side: a redirect hop waits for its reply, so more
//! streams per connection cannot apply with `--follow`, and the run says so (exit 2, one line)
//! before any load. What the users do over h2c against nginx and Apache is
//! crates/headroom-run/tests/users_h2.rs.

mod common;

use common::*;

#[test]
fn issue28_streams_with_follow_are_a_usage_error() {
    // Refused before any connection: nothing listens on the discard port.
    let out = run_plain(
        "http://127.0.0.1:9/r1",
        &["--h2c", "--streams", "4", "--follow", "3"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        one_line(&out).contains("--streams 4 cannot apply"),
        "{}",
        one_line(&out)
    );
}
