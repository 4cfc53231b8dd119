//! The reactor over real loopback sockets, each behaviour on every poller: the tests are
//! written once as `fn name(poller: Poller)` and instantiated per poller by `per_poller!` at the
//! bottom (as `select::name`, `poll::name`, `epoll::name`).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

mod common;
use common::*;

use headroom_serve::{start, Arch, Poller, RunningServer, ServerConfig};

fn config(poller: Poller, workers: usize) -> ServerConfig {
    ServerConfig {
        workers,
        arch: Arch::Reactor { poller },
        ..ServerConfig::default()
    }
}

fn server(poller: Poller, workers: usize) -> RunningServer {
    start(config(poller, workers)).expect("start server")
}

fn get_root_returns_the_configured_body(poller: Poller) {
    let s = start(ServerConfig {
        body: b"custom body\n".to_vec(),
        ..config(poller, 2)
    })
    .unwrap();
    let mut c = connect(&s);
    c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut r = Reader::new(c);
    let resp = r.response();
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, b"custom body\n");
    assert_eq!(resp.header("content-type"), Some("text/plain"));
    assert_eq!(resp.header("connection"), None);
    let st = wait_stats(&s, |st| st.requests == 1);
    assert_eq!((st.accepted, st.requests, st.open), (1, 1, 1));
    drop(r);
    let st = wait_stats(&s, |st| st.open == 0);
    assert_eq!(st.open, 0);
    assert_eq!(st.errors, 0);
    s.stop();
}

#[test]
fn default_body_and_config() {
    let cfg = ServerConfig::default();
    assert_eq!(cfg.listen.to_string(), "127.0.0.1:0");
    assert!(cfg.workers >= 1);
    assert_eq!(cfg.backlog, 1024);
    let s = start(cfg).unwrap();
    let mut c = connect(&s);
    c.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    assert_eq!(Reader::new(c).response().body, b"hello from headroom\n");
}

fn keep_alive_100_sequential_requests(poller: Poller) {
    let s = server(poller, 2);
    let c = connect(&s);
    let mut w = c.try_clone().unwrap();
    let mut r = Reader::new(c);
    for i in 0..100 {
        w.write_all(format!("GET /bytes/{i} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .unwrap();
        let resp = r.response();
        assert_eq!(resp.status, 200);
        assert_eq!(resp.body.len(), i);
    }
    let st = wait_stats(&s, |st| st.requests == 100);
    assert_eq!((st.accepted, st.requests), (1, 100));
}

fn pipelined_requests_in_one_write_are_answered_in_order(poller: Poller) {
    let s = server(poller, 2);
    let mut c = connect(&s);
    let mut all = Vec::new();
    for i in 0..10 {
        all.extend_from_slice(format!("GET /bytes/{i} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes());
    }
    c.write_all(&all).unwrap();
    let mut r = Reader::new(c);
    for i in 0..10 {
        assert_eq!(r.response().body.len(), i, "response {i} out of order");
    }
}

fn bytes_n_delivers_exactly_n_bytes(poller: Poller) {
    let s = server(poller, 2);
    let mut c = connect(&s);
    c.write_all(b"GET /bytes/100000 HTTP/1.1\r\n\r\nGET /bytes/3 HTTP/1.1\r\n\r\n")
        .unwrap();
    let mut r = Reader::new(c);
    let resp = r.response();
    assert_eq!(resp.header("content-length"), Some("100000"));
    assert_eq!(resp.body.len(), 100_000);
    assert!(resp.body.iter().all(|&b| b == b'x'));
    assert_eq!(
        r.response().body,
        b"xxx",
        "no stray bytes between responses"
    );

    r.stream
        .write_all(b"GET /bytes/16777217 HTTP/1.1\r\n\r\nGET /nope HTTP/1.1\r\n\r\n")
        .unwrap();
    assert_eq!(r.response().status, 400);
    assert_eq!(
        r.response().status,
        404,
        "a too-large N keeps the connection"
    );
}

fn garbage_gets_400_and_the_connection_closes(poller: Poller) {
    let s = server(poller, 1);
    let mut c = connect(&s);
    c.write_all(b"\x16\x03\x01 this is not http\r\n\r\n")
        .unwrap();
    let mut r = Reader::new(c);
    let resp = r.response();
    assert_eq!(resp.status, 400);
    assert_eq!(resp.header("connection"), Some("close"));
    r.expect_eof();
    // The server lingers (discarding input) until the client closes too.
    assert_eq!(s.stats().open, 1);
    drop(r);
    let st = wait_stats(&s, |st| st.open == 0);
    assert_eq!((st.bad_requests, st.open, st.errors), (1, 0, 0));
}

fn garbage_after_good_requests_in_one_write(poller: Poller) {
    let s = server(poller, 1);
    let mut c = connect(&s);
    // The client keeps sending after the 400: the server must still deliver it, not reset.
    c.write_all(b"GET / HTTP/1.1\r\n\r\nBROKEN\x00\r\n\r\n")
        .unwrap();
    c.write_all(&[b'z'; 10000]).unwrap();
    let mut r = Reader::new(c);
    assert_eq!(r.response().status, 200);
    assert_eq!(r.response().status, 400);
    r.expect_eof();
}

fn http10_closes_after_the_response(poller: Poller) {
    let s = server(poller, 1);
    let mut c = connect(&s);
    c.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    let mut r = Reader::new(c);
    let resp = r.response();
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("connection"), Some("close"));
    r.expect_eof();

    // HTTP/1.0 that asks for keep-alive gets it.
    let mut c = connect(&s);
    c.write_all(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        .unwrap();
    let mut r = Reader::new(c);
    assert_eq!(r.response().header("connection"), Some("keep-alive"));
    r.stream
        .write_all(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
        .unwrap();
    assert_eq!(r.response().status, 200);
    r.expect_eof();
}

fn request_bodies_are_skipped_even_when_split(poller: Poller) {
    let s = server(poller, 1);
    let mut c = connect(&s);
    c.write_all(b"POST /bytes/1 HTTP/1.1\r\nContent-Length: 20000\r\n\r\n")
        .unwrap();
    c.write_all(&[b'b'; 12000]).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    c.write_all(&[b'b'; 8000]).unwrap();
    c.write_all(b"GET /bytes/2 HTTP/1.1\r\n\r\n").unwrap();
    let mut r = Reader::new(c);
    assert_eq!(r.response().body, b"x");
    assert_eq!(r.response().body, b"xx");
}

fn head_split_byte_by_byte(poller: Poller) {
    let s = server(poller, 1);
    let mut c = connect(&s);
    for &b in b"GET /bytes/4 HTTP/1.1\r\nHost: x\r\n\r\n" {
        c.write_all(&[b]).unwrap();
    }
    assert_eq!(Reader::new(c).response().body, b"xxxx");
}

fn oversized_head_gets_431_and_close(poller: Poller) {
    let s = server(poller, 1);
    let mut c = connect(&s);
    let mut req = b"GET / HTTP/1.1\r\nX-Big: ".to_vec();
    req.resize(20 * 1024, b'a');
    c.write_all(&req).unwrap();
    let mut r = Reader::new(c);
    assert_eq!(r.response().status, 431);
    r.expect_eof();
}

/// A client that does not read: the server must keep the unsent tail, wait for EPOLLOUT and
/// deliver everything in order once the client reads.
fn slow_reader_gets_every_byte_in_order(poller: Poller) {
    let s = server(poller, 1);
    let mut c = connect(&s);
    let mut req = Vec::new();
    for _ in 0..3 {
        req.extend_from_slice(b"GET /bytes/16777216 HTTP/1.1\r\n\r\n");
    }
    req.extend_from_slice(b"GET /bytes/5 HTTP/1.1\r\n\r\n");
    c.write_all(&req).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let mut r = Reader::new(c);
    for _ in 0..3 {
        assert_eq!(r.response().body.len(), 16 * 1024 * 1024);
    }
    assert_eq!(r.response().body, b"xxxxx");
}

/// Many pipelined small requests: more output than one round's cap, so parsing must resume
/// after the writes drain.
fn deep_pipeline_beyond_the_output_cap(poller: Poller) {
    let s = server(poller, 1);
    let c = connect(&s);
    let n = 20_000;
    let mut w = c.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        let mut req = Vec::new();
        for _ in 0..n {
            req.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
        }
        w.write_all(&req).unwrap();
    });
    let mut r = Reader::new(c);
    for _ in 0..n {
        assert_eq!(r.response().body, b"hello from headroom\n");
    }
    writer.join().unwrap();
    let st = wait_stats(&s, |st| st.requests == n);
    assert_eq!(st.requests, n);
}

fn connections_spread_over_workers_on_one_port(poller: Poller) {
    let s = server(poller, 4);
    assert_eq!(s.workers(), 4);
    let mut conns: Vec<TcpStream> = (0..64).map(|_| connect(&s)).collect();
    for c in &mut conns {
        c.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    }
    for c in conns.drain(..) {
        assert_eq!(Reader::new(c).response().status, 200);
    }
    let st = wait_stats(&s, |st| st.accepted == 64 && st.open == 0);
    assert_eq!((st.accepted, st.requests, st.open), (64, 64, 0));
}

fn client_half_close_still_gets_its_answers(poller: Poller) {
    let s = server(poller, 1);
    let mut c = connect(&s);
    c.write_all(b"GET / HTTP/1.1\r\n\r\nGET /bytes/2 HTTP/1.1\r\n\r\n")
        .unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    let mut r = Reader::new(c);
    assert_eq!(r.response().status, 200);
    assert_eq!(r.response().body, b"xx");
    r.expect_eof();
}

fn stop_returns_promptly_with_open_connections(poller: Poller) {
    let s = server(poller, 2);
    let mut idle: Vec<TcpStream> = (0..20).map(|_| connect(&s)).collect();
    // Some mid-request, some mid-body, one not reading a large response.
    idle[0].write_all(b"GET / HTTP/1.1\r\nHost:").unwrap();
    idle[1]
        .write_all(b"POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\nab")
        .unwrap();
    idle[2]
        .write_all(b"GET /bytes/16777216 HTTP/1.1\r\n\r\n")
        .unwrap();
    wait_stats(&s, |st| st.accepted == 20);
    let t = Instant::now();
    s.stop();
    let took = t.elapsed();
    assert!(took < Duration::from_secs(1), "stop took {took:?}");
    // The connections are closed by the server.
    let mut buf = [0u8; 1024];
    let n = idle[3].read(&mut buf).unwrap_or(0);
    assert_eq!(n, 0);
}

fn dropping_the_server_stops_it_and_frees_the_port(poller: Poller) {
    let s = server(poller, 2);
    let addr = s.local_addr();
    drop(s);
    assert!(
        TcpStream::connect(addr).is_err(),
        "nothing listens any more"
    );
    // The same address can be bound again at once.
    let again = start(ServerConfig {
        listen: addr,
        ..config(poller, 2)
    })
    .unwrap();
    assert_eq!(again.local_addr(), addr);
}

#[test]
fn zero_workers_is_an_error() {
    let err = start(ServerConfig {
        workers: 0,
        ..ServerConfig::default()
    })
    .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
}

/// The listener's TCP_NODELAY is inherited by accepted sockets (Linux), so no per-connection
/// setsockopt is needed. Found through /proc/self/fd: the server runs in this process.
fn accepted_sockets_inherit_nodelay(poller: Poller) {
    use std::os::fd::BorrowedFd;
    let s = server(poller, 1);
    let mut c = connect(&s);
    c.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    let client = c.local_addr().unwrap();
    assert_eq!(Reader::new(c.try_clone().unwrap()).response().status, 200);
    let mut found = false;
    for entry in std::fs::read_dir("/proc/self/fd").unwrap() {
        let Ok(fd) = entry.unwrap().file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        // SAFETY: `fd` stays open for the duration (the server holds it; the test only reads).
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        let sock = socket2::SockRef::from(&fd);
        let Ok(peer) = sock.peer_addr() else { continue };
        if peer.as_socket() == Some(client) {
            assert!(
                sock.nodelay().unwrap(),
                "accepted socket without TCP_NODELAY"
            );
            found = true;
        }
    }
    assert!(found, "server side of the connection not found");
}

fn ipv6_loopback_when_available(poller: Poller) {
    let listen = "[::1]:0".parse().unwrap();
    if std::net::TcpListener::bind(listen).is_err() {
        eprintln!("no IPv6 loopback here; skipped");
        return;
    }
    let s = start(ServerConfig {
        listen,
        ..config(poller, 2)
    })
    .unwrap();
    assert!(s.local_addr().is_ipv6());
    let mut c = connect(&s);
    c.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    assert_eq!(Reader::new(c).response().status, 200);
}

// Instantiate the tests above once per poller (see `common::per_poller!`).
per_poller!(
    get_root_returns_the_configured_body,
    keep_alive_100_sequential_requests,
    pipelined_requests_in_one_write_are_answered_in_order,
    bytes_n_delivers_exactly_n_bytes,
    garbage_gets_400_and_the_connection_closes,
    garbage_after_good_requests_in_one_write,
    http10_closes_after_the_response,
    request_bodies_are_skipped_even_when_split,
    head_split_byte_by_byte,
    oversized_head_gets_431_and_close,
    slow_reader_gets_every_byte_in_order,
    deep_pipeline_beyond_the_output_cap,
    connections_spread_over_workers_on_one_port,
    client_half_close_still_gets_its_answers,
    stop_returns_promptly_with_open_connections,
    dropping_the_server_stops_it_and_frees_the_port,
    accepted_sockets_inherit_nodelay,
    ipv6_loopback_when_available,
);
