//! The shared protocol servers scripts/test starts (ejabberd, PostgreSQL, the WebSocket echo),
//! found through the environment variable scripts/test exports, or started by their script
//! (which installs the Debian package and starts a private server on 127.0.0.1).

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

/// The repository's root directory.
pub fn repo_root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// `scripts/NAME start` (idempotent), or the address in `var` when set (scripts/test sets
/// them: `HEADROOM_XMPP_ADDR`, `HEADROOM_PG_URL`, `HEADROOM_WS_URL`).
pub fn service(var: &str, script: &str) -> String {
    if let Ok(v) = std::env::var(var) {
        if !v.is_empty() {
            return v;
        }
    }
    let out = Command::new(repo_root().join("scripts").join(script))
        .arg("start")
        .output()
        .unwrap_or_else(|e| panic!("run scripts/{script} start: {e}"));
    assert!(
        out.status.success(),
        "scripts/{script} start failed (it installs the Debian package and starts a private \
         server on 127.0.0.1; scripts/test runs it): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .last()
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// ejabberd's HOST:PORT, with users 1..=600 and 20001..=21600 registered (the tests that
/// count chats exactly use the second range, which no example and no offline chat touches).
pub fn xmpp() -> &'static str {
    static ADDR: OnceLock<String> = OnceLock::new();
    ADDR.get_or_init(|| {
        let addr = service("HEADROOM_XMPP_ADDR", "ejabberd.sh");
        for (first, last) in [("1", "600"), ("20001", "21600")] {
            let out = Command::new(repo_root().join("scripts/ejabberd.sh"))
                .args(["register", first, last])
                .output()
                .expect("scripts/ejabberd.sh register");
            assert!(
                out.status.success(),
                "scripts/ejabberd.sh register {first} {last} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(addr.starts_with("127.0.0.1:"), "ejabberd at {addr}");
        addr
    })
}

/// PostgreSQL's (host, port, user, password, database) from `HEADROOM_PG_URL`.
pub fn pg() -> (String, String, String, String, String) {
    pg_parts(&service("HEADROOM_PG_URL", "postgres.sh"))
}

/// (host, port, user, password, database) of a `postgres://user:password@host:port/db?...`
/// URL on 127.0.0.1.
pub fn pg_parts(url: &str) -> (String, String, String, String, String) {
    let rest = url.strip_prefix("postgres://").expect("postgres:// URL");
    let (userinfo, hostpart) = rest.split_once('@').unwrap();
    let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
    let (addr, db) = hostpart.split_once('/').unwrap();
    let (host, port) = addr.rsplit_once(':').unwrap();
    assert_eq!(host, "127.0.0.1");
    (
        host.into(),
        port.into(),
        user.into(),
        password.into(),
        db.split('?').next().unwrap().into(),
    )
}
