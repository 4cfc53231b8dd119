//! Every failure kind, produced on purpose by a server that fails in exactly that way, must be
//! counted under its own kind and no other.

mod common;
use common::*;

use std::io::Write;
use std::thread;
use std::time::Duration;

/// Assert `kind` is the only kind counted, and was counted at least `min` times.
fn only(v: &serde_json::Value, kind: &str, min: u64) {
    let n = err(v, kind);
    assert!(
        n >= min,
        "expected >= {min} {kind}, got {n}: {}",
        v["errors"]
    );
    assert_eq!(
        v["errors_total"].as_u64().unwrap(),
        n,
        "other kinds counted: {}",
        v["errors"]
    );
}

#[test]
fn refused_when_nothing_listens() {
    let port = free_port(); // bound and released: nothing listens there now
    let url = format!("http://127.0.0.1:{port}/");
    let (v, out) = run_json(&url, &["-c", "2", "--per-user", "5", "--no-preflight"]);
    // Nothing succeeded: exit 1 and one line saying so (issue 26; it was exit 0).
    assert_eq!(out.status.code(), Some(1));
    assert!(one_line(&out).contains("10 attempts, all refused"));
    only(&v, "refused", 10);
    assert_eq!(v["requests"], 0, "no request was ever written");
}

#[test]
fn reset_when_server_sends_rst() {
    let s = TestServer::start(|mut c| {
        if read_request(&mut c) {
            // SO_LINGER 0 turns close into RST.
            let _ = socket2::SockRef::from(&c).set_linger(Some(Duration::ZERO));
        }
    });
    let (v, _) = run_json(&s.url(), &["-c", "2", "--per-user", "5"]);
    only(&v, "reset", 10);
    assert_eq!(v["requests"], 10);
}

#[test]
fn timeout_when_server_never_answers() {
    let s = TestServer::start(|mut c| {
        if read_request(&mut c) {
            thread::sleep(Duration::from_secs(5));
        }
    });
    let (v, _) = run_json(
        &s.url(),
        &["-c", "3", "--per-user", "1", "--timeout", "300ms"],
    );
    only(&v, "timeout", 3);
    let d = v["duration_s"].as_f64().unwrap();
    assert!(d < 2.0, "the timeout ended the run promptly: {d}s");
}

#[test]
fn closed_when_server_closes_mid_response() {
    let s = TestServer::start(|mut c| {
        if read_request(&mut c) {
            let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part");
        }
    });
    let (v, _) = run_json(&s.url(), &["-c", "2", "--per-user", "4"]);
    only(&v, "closed", 8);
    assert_eq!(v["responses"], 0);
}

#[test]
fn protocol_error_on_garbage_reply() {
    let s = TestServer::start(|mut c| {
        if read_request(&mut c) {
            let _ = c.write_all(b"SSH-2.0-OpenSSH_9.2\r\n\r\n");
            thread::sleep(Duration::from_millis(200));
        }
    });
    let (v, _) = run_json(&s.url(), &["-c", "2", "--per-user", "3"]);
    only(&v, "protocol", 6);
}

#[test]
fn connect_timeout_when_backlog_is_full() {
    // A listener that never accepts, with its queue filled: the kernel drops further SYNs.
    let l = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    l.bind(
        &"127.0.0.1:0"
            .parse::<std::net::SocketAddr>()
            .unwrap()
            .into(),
    )
    .unwrap();
    l.listen(0).unwrap();
    let addr = l.local_addr().unwrap().as_socket().unwrap();
    let mut fillers = Vec::new();
    for _ in 0..4 {
        if let Ok(c) = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            fillers.push(c);
        }
    }
    let url = format!("http://{addr}/");
    let (v, _) = run_json(
        &url,
        &[
            "-c",
            "2",
            "--per-user",
            "2",
            "--connect-timeout",
            "300ms",
            "--no-preflight",
        ],
    );
    only(&v, "connect_timeout", 4);
    drop((l, fillers));
}

#[test]
fn http_keepalive_close_is_not_an_error() {
    // A server that answers each request with Connection: close, then closes: the user
    // reconnects and nothing counts as a failure.
    let s = TestServer::start(|mut c| {
        if read_request(&mut c) {
            let _ =
                c.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok");
        }
    });
    let (v, _) = run_json(&s.url(), &["-c", "2", "--per-user", "10"]);
    assert_eq!(v["errors_total"], 0, "{}", v["errors"]);
    assert_eq!(v["responses"], 20);
    assert_eq!(v["connects"], 20);
}
