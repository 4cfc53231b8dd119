//! Issue 18: agents safe on a network. TLS between the controller and an agent, the agent's
//! certificate pinned by its SHA-256 fingerprint (a `file:` line `HOST:PORT sha256:HEX`, or
//! `--agent-fingerprint`); a wrong pin refused naming both fingerprints; no agent listening
//! beyond loopback in plain text unless told `--insecure-plaintext`, and no controller sending
//! its token in clear beyond loopback; `--allow-targets` refusing a job before any connection.
//! The agents here listen on 127.0.0.2 (loopback, TLS asked for explicitly); agents_netns.rs
//! and agents_ssh.rs run TLS agents on real non-loopback addresses.

mod common;

use std::process::{Child, Output, Stdio};

use common::pki::Pki;
use common::{headroom, one_line};

const TOKEN: &str = "agents-tls-test-token";

/// A `headroom agent` with `args`, and what its `listening` line said after the prefix.
struct TlsAgent {
    child: Child,
    /// `HOST:PORT` or `HOST:PORT sha256:HEX`.
    line: String,
}

impl TlsAgent {
    fn start(args: &[&str]) -> TlsAgent {
        let mut child = headroom()
            .arg("agent")
            .args(args)
            .env("HEADROOM_TOKEN", TOKEN)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let line = common::agent_address(&mut child, "the TLS agent");
        TlsAgent { child, line }
    }

    fn addr(&self) -> &str {
        self.line.split_whitespace().next().unwrap()
    }

    fn fingerprint(&self) -> &str {
        self.line
            .split_whitespace()
            .nth(1)
            .unwrap_or_else(|| panic!("no fingerprint on '{}'", self.line))
    }
}

impl Drop for TlsAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn agents_file(lines: &[String]) -> tempfile::NamedTempFile {
    let f = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(f.path(), lines.join("\n") + "\n").unwrap();
    f
}

/// `headroom run URL -c 2 --per-user 10 --json -q --agents file:LIST extra...`
fn run(url: &str, list: &tempfile::NamedTempFile, extra: &[&str]) -> Output {
    headroom()
        .args(["run", url, "-c", "2", "--per-user", "10", "--json", "-q"])
        .arg("--agents")
        .arg(format!("file:{}", list.path().display()))
        .args(extra)
        .env("HEADROOM_TOKEN", TOKEN)
        .output()
        .unwrap()
}

/// The fingerprint `openssl x509 -fingerprint -sha256` gives `cert`, as it prints it.
fn openssl_fingerprint(cert: &std::path::Path) -> String {
    let out = std::process::Command::new("openssl")
        .args(["x509", "-noout", "-fingerprint", "-sha256", "-in"])
        .arg(cert)
        .output()
        .expect("openssl (Debian package openssl)");
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn a_tls_agent_with_its_fingerprint_pinned_runs_and_a_wrong_pin_is_refused() {
    let pki = Pki::new();
    let server = common::serve();
    let url = format!("http://{}/", server.local_addr());
    let agent = TlsAgent::start(&[
        "--listen",
        "127.0.0.2:0",
        "--tls-cert",
        pki.localhost.cert.to_str().unwrap(),
        "--tls-key",
        pki.localhost.key.to_str().unwrap(),
    ]);
    // The agent prints the fingerprint openssl computes for its certificate.
    let openssl = openssl_fingerprint(&pki.localhost.cert);
    let hex: String = openssl
        .split_once('=')
        .unwrap()
        .1
        .replace(':', "")
        .to_lowercase();
    assert_eq!(agent.fingerprint(), format!("sha256:{hex}"), "{openssl}");

    // Its listening line, as printed, is its line in the agents file: the run goes through.
    let list = agents_file(std::slice::from_ref(&agent.line));
    let out = run(&url, &list, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["responses"], 20, "{v}");
    assert_eq!(server.stats().requests, 20);

    // --agent-fingerprint, in openssl's own form, pins an agent whose line gives none.
    let bare = agents_file(&[agent.addr().to_string()]);
    let out = run(&url, &bare, &["--agent-fingerprint", &openssl]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(server.stats().requests, 40);

    // Another certificate's fingerprint: refused in one line naming the agent and both
    // fingerprints, exit 1, and no request reaches the server.
    let wrong = format!("sha256:{}", "5a".repeat(32));
    let list = agents_file(&[format!("{} {wrong}", agent.addr())]);
    let out = run(&url, &list, &[]);
    assert_eq!(out.status.code(), Some(1));
    let line = one_line(&out);
    assert!(
        line.contains(&format!("agent {}", agent.addr()))
            && line.contains(agent.fingerprint())
            && line.contains(&wrong),
        "{line}"
    );
    assert_eq!(server.stats().requests, 40, "nothing ran");

    // No pin: 127.0.0.2 is loopback, so the controller tries plain HTTP/2, which a TLS agent
    // does not speak: the run fails at its start.
    let out = run(&url, &bare, &[]);
    assert_eq!(out.status.code(), Some(1));
    let line = one_line(&out);
    assert!(line.contains("prints a sha256: fingerprint"), "{line}");
    assert_eq!(server.stats().requests, 40, "nothing ran");
}

#[test]
fn beyond_loopback_an_agent_without_tls_refuses_to_start_and_a_controller_to_send_in_clear() {
    // The agent: exit 2, one line naming the three ways out, before it listens.
    let out = headroom()
        .args(["agent", "--listen", "0.0.0.0:0"])
        .env("HEADROOM_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let line = one_line(&out);
    assert!(
        line.contains("--tls-cert")
            && line.contains("--tls-self-signed")
            && line.contains("--insecure-plaintext"),
        "{line}"
    );
    assert!(out.stdout.is_empty(), "it never listened");

    // The controller: an agent beyond loopback without a pin is refused before any connection
    // (192.0.2.1 is TEST-NET-1: nothing answers there, and nothing is tried).
    let list = agents_file(&["192.0.2.1:7070".to_string()]);
    let t = std::time::Instant::now();
    let out = run("http://127.0.0.1:9/", &list, &["--no-preflight"]);
    assert_eq!(out.status.code(), Some(1));
    let line = one_line(&out);
    assert!(
        line.contains("agent 192.0.2.1:7070") && line.contains("--insecure-plaintext"),
        "{line}"
    );
    assert!(
        t.elapsed() < std::time::Duration::from_secs(3),
        "no connection tried"
    );

    // --agent-fingerprint is for file: agents.
    let out = headroom()
        .args([
            "run",
            "http://127.0.0.1:9/",
            "--agents",
            "local:1",
            "--no-preflight",
        ])
        .args([
            "--agent-fingerprint",
            &format!("sha256:{}", "5a".repeat(32)),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(one_line(&out).contains("file: agents"));

    // A bad pin in the file is a usage error naming the line.
    let list = agents_file(&["127.0.0.2:7070 sha256:abc".to_string()]);
    let out = run("http://127.0.0.1:9/", &list, &["--no-preflight"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(one_line(&out).contains("line 1"));
}

#[test]
fn a_self_signed_agent_prints_a_fresh_fingerprint_that_pins_it() {
    let server = common::serve();
    let url = format!("http://{}/", server.local_addr());
    let a = TlsAgent::start(&["--listen", "127.0.0.2:0", "--tls-self-signed"]);
    let b = TlsAgent::start(&["--listen", "127.0.0.2:0", "--tls-self-signed"]);
    assert_ne!(a.fingerprint(), b.fingerprint(), "a new pair each start");
    let list = agents_file(&[a.line.clone(), b.line.clone()]);
    let out = run(&url, &list, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(server.stats().requests, 20);
}

#[test]
fn allow_targets_refuses_a_job_outside_its_networks_before_any_connection() {
    let server = common::serve();
    let port = server.local_addr().port();
    let strict = TlsAgent::start(&["--listen", "127.0.0.1:0", "--allow-targets", "10.0.0.0/8"]);
    let list = agents_file(std::slice::from_ref(&strict.line));
    // By address and by a name that resolves to one (checked after resolution). The
    // controller's own preflight is off: every connection the server sees would be the
    // agent's.
    for url in [
        format!("http://127.0.0.1:{port}/"),
        format!("http://localhost:{port}/"),
    ] {
        let out = run(&url, &list, &["--no-preflight"]);
        assert_eq!(out.status.code(), Some(1), "{url}");
        let line = one_line(&out);
        assert!(
            line.contains(&format!("agent {}", strict.addr()))
                && line.contains("outside its --allow-targets 10.0.0.0/8"),
            "{line}"
        );
        let s = server.stats();
        assert_eq!(
            (s.accepted, s.requests),
            (0, 0),
            "no connection made: {url}"
        );
    }

    // Inside the list: runs as ever.
    let open = TlsAgent::start(&[
        "--listen",
        "127.0.0.1:0",
        "--allow-targets",
        "::1,127.0.0.0/8",
    ]);
    let list = agents_file(std::slice::from_ref(&open.line));
    let out = run(&format!("http://127.0.0.1:{port}/"), &list, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(server.stats().requests, 20);

    // A bad list is a usage error of the agent.
    let out = headroom()
        .args(["agent", "--allow-targets", "10.0.0.0/33"])
        .env("HEADROOM_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(one_line(&out).contains("prefix length"));
}
