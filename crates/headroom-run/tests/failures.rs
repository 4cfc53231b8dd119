//! Every failure kind, produced on purpose by a server that fails in exactly that way, must be
//! counted under its own kind and no other. The runs go through the pipeline in this process
//! and the counts are the typed `RunSummary`'s. (The CLI's side of a run where nothing
//! succeeded, exit 1 and its one line, is crates/headroom/tests/wrong_protocol.rs.)

mod common;
use common::*;

use std::io::Write;
use std::thread;
use std::time::Duration;

use headroom_core::spec::RunSpec;
use headroom_run::RunSummary;

/// `URL -c C --per-user N`.
fn per_user(url: &str, c: u32, n: u64) -> RunSpec {
    let mut spec = url_spec(url);
    spec.connections = Some(c);
    spec.per_user = Some(n);
    spec
}

/// Assert `kind` (its count `n`, named `kind`) is the only kind counted, and was counted at
/// least `min` times.
fn only(v: &RunSummary, kind: &str, n: u64, min: u64) {
    assert!(
        n >= min,
        "expected >= {min} {kind}, got {n}: {:?}",
        v.errors
    );
    assert_eq!(v.errors_total, n, "other kinds counted: {:?}", v.errors);
    assert_eq!(v.errors.total(), n, "other kinds counted: {:?}", v.errors);
}

#[test]
fn refused_when_nothing_listens() {
    let port = free_port(); // bound and released: nothing listens there now
    let url = format!("http://127.0.0.1:{port}/");
    // `-c 2 --per-user 5` (no preflight: the pipeline here never makes one).
    let f = run(&per_user(&url, 2, 5));
    let v = &f.summary;
    // Nothing succeeded: `headroom run` exits 1 with this line (issue 26; it was exit 0).
    assert_nothing_succeeded(&f);
    let line = f.nothing_succeeded.as_deref().unwrap();
    assert!(line.contains("10 attempts, all refused"), "{line}");
    only(v, "refused", v.errors.refused, 10);
    assert_eq!(v.requests, 0, "no request was ever written");
}

#[test]
fn reset_when_server_sends_rst() {
    let s = TestServer::start(|mut c| {
        if read_request(&mut c) {
            // SO_LINGER 0 turns close into RST.
            let _ = socket2::SockRef::from(&c).set_linger(Some(Duration::ZERO));
        }
    });
    let v = run(&per_user(&s.url(), 2, 5)).summary;
    only(&v, "reset", v.errors.reset, 10);
    assert_eq!(v.requests, 10, "{}", show(&v));
}

#[test]
fn timeout_when_server_never_answers() {
    let s = TestServer::start(|mut c| {
        if read_request(&mut c) {
            thread::sleep(Duration::from_secs(5));
        }
    });
    let mut spec = per_user(&s.url(), 3, 1);
    spec.timeout = Duration::from_millis(300);
    let v = run(&spec).summary;
    only(&v, "timeout", v.errors.timeout, 3);
    let d = v.duration_s;
    assert!(d < 2.0, "the timeout ended the run promptly: {d}s");
}

#[test]
fn closed_when_server_closes_mid_response() {
    let s = TestServer::start(|mut c| {
        if read_request(&mut c) {
            let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part");
        }
    });
    let v = run(&per_user(&s.url(), 2, 4)).summary;
    only(&v, "closed", v.errors.closed, 8);
    assert_eq!(v.responses, 0, "{}", show(&v));
}

#[test]
fn protocol_error_on_garbage_reply() {
    let s = TestServer::start(|mut c| {
        if read_request(&mut c) {
            let _ = c.write_all(b"SSH-2.0-OpenSSH_9.2\r\n\r\n");
            thread::sleep(Duration::from_millis(200));
        }
    });
    let v = run(&per_user(&s.url(), 2, 3)).summary;
    only(&v, "protocol", v.errors.protocol, 6);
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
    // `-c 2 --per-user 2 --connect-timeout 300ms` (no preflight: the pipeline here never makes
    // one).
    let mut spec = per_user(&url, 2, 2);
    spec.connect_timeout = Duration::from_millis(300);
    let v = run(&spec).summary;
    only(&v, "connect_timeout", v.errors.connect_timeout, 4);
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
    let f = run(&per_user(&s.url(), 2, 10));
    assert_clean(&f);
    let v = &f.summary;
    assert_eq!(v.errors_total, 0, "{:?}", v.errors);
    assert_eq!(v.responses, 20, "{}", show(v));
    assert_eq!(v.connects, 20, "{}", show(v));
}
