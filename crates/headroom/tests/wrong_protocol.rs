//! issue 26: a run aimed at a port that speaks another protocol is one line with the fix and
//! exit 1 — `http://` to nginx's TLS port (it answers plain HTTP with a `400` "The plain HTTP
//! request was sent to HTTPS port"; the run stops after its first interval) or to a rustls port
//! (a TLS alert), and `--h2c` to an HTTP/1.1-only server (at the preflight) — and a run in which
//! no request succeeded exits 1 with one line saying what every reply was, `--no-preflight` runs
//! included. Before issue 26 each of these exited 0
//! (43,685 x `400` against nginx's TLS port; 100% `protocol` errors with `--h2c`).

mod common;
use common::pki::Pki;
use common::*;

use std::time::{Duration, Instant};

/// nginx's `ssl` listener, given `http://`: it answers every request with its `400` "The plain
/// HTTP request was sent to HTTPS port". The run stops after its first interval with one line
/// that says to use https (a probe before the load would cost the server a request the run
/// does not count; a TLS handshake made once nothing has succeeded costs nothing).
#[test]
fn issue26_plain_http_to_nginx_tls_port_is_one_line_and_exit_1() {
    let pki = Pki::new();
    let ng = Nginx::builder().tls(&pki.localhost).start();
    let url = format!("http://{}/", ng.addr);
    for extra in [&[][..], &["--no-preflight"][..]] {
        let t = Instant::now();
        let mut args = vec!["-c", "20", "-d", "20s"];
        args.extend_from_slice(extra);
        let out = run_plain(&url, &args);
        let line = one_line(&out);
        assert_eq!(out.status.code(), Some(1), "{extra:?}: {line}");
        assert!(
            t.elapsed() < Duration::from_secs(6),
            "{extra:?}: stopped after the first interval, not -d 20s: {:?}",
            t.elapsed()
        );
        assert!(
            line.starts_with("headroom: no request succeeded: "),
            "{line}"
        );
        assert!(line.contains("is a TLS port"), "{line}");
        assert!(line.contains("only `400` replies"), "{line}");
        assert!(
            line.contains(&format!("use https://{}/", ng.addr)),
            "{line}"
        );
    }
    // The fix works.
    let (v, out) = run_json(
        &format!("https://{}/", ng.addr),
        &["-k", "-c", "2", "-n", "20"],
    );
    succeeded(&out);
    assert_eq!(v["responses"], 20, "{v}");
}

/// A rustls server (headroom serve --tls-self-signed) answers plain HTTP with a TLS alert: the
/// run's protocol errors, then the same line.
#[test]
fn issue26_plain_http_to_a_rustls_port_is_one_line_and_exit_1() {
    let mut child = headroom()
        .args([
            "serve",
            "--tls-self-signed",
            "--listen",
            "127.0.0.1:0",
            "--workers",
            "1",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let addr = {
        use std::io::BufRead;
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        line.split_whitespace()
            .find(|w| w.starts_with("127.0.0.1:"))
            .unwrap_or_else(|| panic!("{line}"))
            .to_string()
    };
    let t = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let out = run_plain(
        &format!("http://{addr}/"),
        &["-d", "20s", "--out", run_dir.to_str().unwrap()],
    );
    let _ = child.kill();
    let _ = child.wait();
    let line = one_line(&out);
    assert_eq!(out.status.code(), Some(1), "{line}");
    assert!(t.elapsed() < Duration::from_secs(6), "{:?}", t.elapsed());
    assert!(line.contains("is a TLS port"), "{line}");
    assert!(line.contains("protocol errors"), "{line}");
    assert!(line.contains(&format!("use https://{addr}/")), "{line}");
    // summary.json says headroom stopped it, and why; nobody interrupted it.
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("summary.json")).unwrap())
            .unwrap();
    assert_eq!(v["interrupted"], false, "{v}");
    let stopped = v["stopped"].as_str().expect("stopped says why");
    assert!(stopped.contains("is a TLS port"), "{stopped}");
    let html = std::fs::read_to_string(run_dir.join("report.html")).unwrap();
    assert!(
        html.contains("headroom stopped the run early"),
        "the report says it"
    );
}

/// `--h2c` to headroom serve (HTTP/1.1 only): its 400 to HTTP/2's preface is one line with the
/// fix; an h2c nginx passes the same check (no false alarm) and the run succeeds.
#[test]
fn issue26_h2c_to_an_http1_server_is_one_preflight_line() {
    let server = serve();
    let url = format!("http://{}/", server.local_addr());
    let out = run_plain(&url, &["--h2c", "-d", "5s"]);
    let line = one_line(&out);
    assert_eq!(out.status.code(), Some(1), "{line}");
    assert!(line.contains("does not speak h2c"), "{line}");
    assert!(
        line.contains("HTTP/1.1 4"),
        "the server's status line: {line}"
    );
    assert!(line.contains("drop --h2c"), "{line}");
    // The preface, which it answered with its 400; no load was sent.
    assert!(server.stats().requests <= 1, "no load was sent");

    let ng = Nginx::builder().h2c(true).start();
    let (v, out) = run_json(&ng.url("/"), &["--h2c", "-c", "2", "-n", "20"]);
    succeeded(&out);
    assert_eq!(v["responses"], 20, "{v}");
}

/// `--no-preflight` runs whose every attempt failed: exit 1 and one line saying what happened.
#[test]
fn issue26_a_run_with_no_success_exits_1_saying_what_every_reply_was() {
    let server = serve();
    let port = free_port();
    let refused = format!("http://127.0.0.1:{port}/");
    let status = format!("http://{}/status/503", server.local_addr());
    let fine = format!("http://{}/", server.local_addr());
    for (url, says) in [
        (&refused, "attempts, all refused"),
        (&status, "replies, all 503 Service Unavailable"),
    ] {
        let out = run_plain(url, &["-c", "2", "--per-user", "5", "--no-preflight"]);
        let line = one_line(&out);
        assert_eq!(out.status.code(), Some(1), "{url}: {line}");
        assert!(
            line.starts_with("headroom: no request succeeded: "),
            "{line}"
        );
        assert!(line.contains(says), "{url}: {line}");
    }
    // The same with --json: the summary on stdout, the line on stderr, exit 1.
    let (v, out) = run_json(&status, &["-c", "1", "--per-user", "3"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(v["responses"], 3);
    assert!(one_line(&out).contains("3 replies, all 503"));
    // One success is enough: errors alone do not fail a run.
    let (v, out) = run_json(&fine, &["-c", "1", "--per-user", "3"]);
    succeeded(&out);
    assert_eq!(v["errors_total"], 0);
}
