//! The TLS side of the shared protocol servers that scripts/test starts (ejabberd, PostgreSQL,
//! the WebSocket echo), for the XMPP-over-TLS, `sslmode` and `wss://` client tests. Each reads
//! its environment variable when set (scripts/test exports them) and otherwise runs the script,
//! which installs and starts the server if needed:
//!
//! | function | env var | default | what |
//! |---|---|---|---|
//! | [`test_ca`] | `HEADROOM_TEST_CA` | /tmp/headroom-pki/ca.pem | the CA the scripts' certificates chain to |
//! | [`xmpp_starttls_addr`] | `HEADROOM_XMPP_ADDR` | 127.0.0.1:25222 | c2s, STARTTLS offered (not required) |
//! | [`xmpp_tls_addr`] | `HEADROOM_XMPP_TLS_ADDR` | 127.0.0.1:25224 | c2s, TLS from the first byte |
//! | [`pg_tls_url`] | `HEADROOM_PG_TLS_URL` | postgres://headroom:headroom@127.0.0.1:25432/headroom?sslmode=require | same server as `HEADROOM_PG_URL`, ssl on |
//! | [`wss_url`] | `HEADROOM_WSS_URL` | wss://127.0.0.1:25381 | the echo's paths over TLS |
//!
//! Every certificate is the scripts' PKI's `localhost` one (names localhost, 127.0.0.1, ::1).

use std::path::PathBuf;
use std::process::Command;

pub use super::repo_root;
use super::service;

fn from_env(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.is_empty())
}

/// `scripts/SCRIPT start` (idempotent), then `scripts/SCRIPT WHAT`'s output.
fn script_value(var: &str, script: &str, start_var: &str, what: &str) -> String {
    if let Some(v) = from_env(var) {
        return v;
    }
    service(start_var, script);
    let out = Command::new(repo_root().join("scripts").join(script))
        .arg(what)
        .output()
        .unwrap_or_else(|e| panic!("run scripts/{script} {what}: {e}"));
    assert!(out.status.success(), "scripts/{script} {what} failed");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The scripts' CA certificate (made by scripts/pki.sh when missing).
pub fn test_ca() -> PathBuf {
    if let Some(v) = from_env("HEADROOM_TEST_CA") {
        return PathBuf::from(v);
    }
    let dir = from_env("HEADROOM_PKI_DIR").unwrap_or_else(|| "/tmp/headroom-pki".into());
    let out = Command::new(repo_root().join("scripts/pki.sh"))
        .arg(&dir)
        .output()
        .expect("run scripts/pki.sh");
    assert!(
        out.status.success(),
        "scripts/pki.sh {dir}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(dir).join("ca.pem")
}

/// ejabberd's c2s address, where STARTTLS is offered.
pub fn xmpp_starttls_addr() -> String {
    service("HEADROOM_XMPP_ADDR", "ejabberd.sh")
}

/// ejabberd's direct-TLS c2s address.
pub fn xmpp_tls_addr() -> String {
    script_value(
        "HEADROOM_XMPP_TLS_ADDR",
        "ejabberd.sh",
        "HEADROOM_XMPP_ADDR",
        "tls-url",
    )
}

/// PostgreSQL's URL with `?sslmode=require`.
pub fn pg_tls_url() -> String {
    script_value(
        "HEADROOM_PG_TLS_URL",
        "postgres.sh",
        "HEADROOM_PG_URL",
        "tls-url",
    )
}

/// The WebSocket echo's `wss://` URL.
pub fn wss_url() -> String {
    script_value(
        "HEADROOM_WSS_URL",
        "ws-echo.sh",
        "HEADROOM_WS_URL",
        "wss-url",
    )
}
