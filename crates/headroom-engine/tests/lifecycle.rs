//! Connection lifecycle (issue 26): a server that closes a user's idle connection does not stop
//! the user; a request that finds its kept-alive connection closed goes again once when it is
//! idempotent (RFC 9110 §9.2.2); a connection counts as the server's only once it sent a byte.
//! Each test runs the engine against a small server on 127.0.0.1 that behaves one way.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;
use common::run;
use headroom_core::{Distribution, LoadModel, Plan};

#[derive(Clone, Copy)]
enum Behaviour {
    /// Answer every request (keep-alive); close a connection idle for this long (FIN), as a
    /// keep-alive timeout does.
    IdleClose(Duration),
    /// Answer the first request of each connection; on the second, close without a byte of
    /// reply (with a reset when `reset`): the race of a keep-alive timeout and a new request.
    SecondRequestCloses { reset: bool },
}

struct Server {
    addr: SocketAddr,
    done: Arc<AtomicBool>,
    /// Connections the server closed with nothing owed (idle, or on a request it refused).
    closes: Arc<AtomicU64>,
    /// Requests read.
    requests: Arc<AtomicU64>,
}

impl Server {
    fn start(b: Behaviour) -> Server {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        l.set_nonblocking(true).unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let closes = Arc::new(AtomicU64::new(0));
        let requests = Arc::new(AtomicU64::new(0));
        let (d, c, r) = (done.clone(), closes.clone(), requests.clone());
        std::thread::spawn(move || {
            // Bounded: the test ends it, and it gives up by itself after 60 s.
            let until = Instant::now() + Duration::from_secs(60);
            while !d.load(Ordering::Relaxed) && Instant::now() < until {
                match l.accept() {
                    Ok((s, _)) => {
                        let (c, r) = (c.clone(), r.clone());
                        std::thread::spawn(move || serve(s, b, &c, &r));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        Server {
            addr,
            done,
            closes,
            requests,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
    }
}

fn serve(mut s: TcpStream, b: Behaviour, closes: &AtomicU64, requests: &AtomicU64) {
    s.set_nonblocking(false).unwrap();
    let idle = match b {
        Behaviour::IdleClose(d) => d,
        Behaviour::SecondRequestCloses { .. } => Duration::from_secs(20),
    };
    s.set_read_timeout(Some(idle)).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let mut answered = 0;
    loop {
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let body = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if buf.len() < end + 4 + body {
                break;
            }
            buf.drain(..end + 4 + body);
            requests.fetch_add(1, Ordering::SeqCst);
            if let Behaviour::SecondRequestCloses { reset } = b {
                if answered == 1 {
                    closes.fetch_add(1, Ordering::SeqCst);
                    if reset {
                        let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
                    }
                    return;
                }
            }
            answered += 1;
            if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .is_err()
            {
                return;
            }
        }
        match s.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if buf.is_empty()
                    && matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
            {
                // Idle past the timeout with nothing owed: close, as a keep-alive timeout does.
                closes.fetch_add(1, Ordering::SeqCst);
                return;
            }
            Err(_) => return,
        }
    }
}

/// `GET /` on one worker for `secs` seconds (common::plan's settings otherwise).
fn plan(addr: SocketAddr, model: LoadModel, secs: u64) -> Plan {
    let mut p = common::plan(addr, model, 1);
    p.stop.duration = Some(Duration::from_secs(secs));
    p
}

fn think(ms: u64) -> Option<Distribution> {
    Some(Distribution::Constant(Duration::from_millis(ms)))
}

/// The stall of issue 26: a user thinking longer than the server's idle timeout lost its
/// connection during the think and never sent again (4 responses instead of 12 in the issue).
#[test]
fn issue_26_users_thinking_past_the_idle_timeout_go_on() {
    let server = Server::start(Behaviour::IdleClose(Duration::from_millis(100)));
    let model = LoadModel::Closed {
        users: 5,
        per_user: None,
        think: think(300),
    };
    let out = run(&plan(server.addr, model, 3));
    let c = &out.total.counters;
    // Each user sends about every 300 ms for 3 s: ~10 each; stalled users send 1.
    assert!(c.responses >= 40, "{} responses", c.responses);
    assert_eq!(c.errors_total(), 0, "{:?}", c.errors);
    // Every reply but the users' last was followed by the server's idle close, and every
    // such close but the last few by a reconnect.
    assert!(c.idle_closed + 5 >= c.responses, "{c:?}");
    assert!(c.reconnects + 5 >= c.idle_closed, "{c:?}");
    assert!(c.reconnects <= c.idle_closed);
    // The server's own count of idle closes matches ours (the last ones may land after the
    // run ended, when we closed first).
    let theirs = server.closes.load(Ordering::SeqCst);
    assert!(theirs.abs_diff(c.idle_closed) <= 5, "{theirs} vs {c:?}");
}

/// Paced users (a rate) keep their schedule over idle closes too.
#[test]
fn issue_26_paced_users_go_on_after_idle_closes() {
    let server = Server::start(Behaviour::IdleClose(Duration::from_millis(100)));
    // 4 users at 10 requests/s in all: each sends every 400 ms, past the 100 ms idle timeout.
    let model = LoadModel::Rate {
        connections: 4,
        rate: 10.0,
    };
    let out = run(&plan(server.addr, model, 3));
    let c = &out.total.counters;
    assert!(c.responses >= 25, "{} responses", c.responses);
    assert_eq!(c.errors_total(), 0, "{:?}", c.errors);
    assert!(c.reconnects >= 15, "{c:?}");
}

/// A scenario user thinking between requests, too.
#[test]
fn issue_26_session_users_go_on_after_idle_closes() {
    let server = Server::start(Behaviour::IdleClose(Duration::from_millis(100)));
    let text = "load: {users: [{count: 4}]}\nsessions: [{name: s, steps: [{request: \"GET /a\"}, \
                {think: 250ms}, {request: \"GET /b\"}, {think: 250ms}]}]\n";
    let s = headroom_scenario::parse_str(text, "idle.yaml").unwrap();
    let compiled = headroom_scenario::compile(&s, std::path::Path::new(".")).unwrap();
    let mut p = plan(
        server.addr,
        LoadModel::Sessions {
            users: compiled.users,
            phases: compiled.phases,
        },
        3,
    );
    p.workload = Some(Arc::new(compiled.workload));
    let out = run(&p);
    let c = &out.total.counters;
    // ~12 requests per user in 3 s; a stalled user sends 1.
    assert!(c.responses >= 36, "{} responses", c.responses);
    assert_eq!(c.errors_total(), 0, "{:?}", c.errors);
    assert!(c.sessions_completed >= 16, "{c:?}");
    assert!(c.reconnects >= 30, "{c:?}");
}

/// GET is idempotent: a request that finds its kept-alive connection closed (FIN or reset,
/// before any byte of its reply) goes again, once, on a new connection: no error.
#[test]
fn issue_26_a_get_that_finds_its_connection_closed_goes_again() {
    for reset in [false, true] {
        let server = Server::start(Behaviour::SecondRequestCloses { reset });
        let model = LoadModel::Closed {
            users: 3,
            per_user: Some(4),
            think: None,
        };
        let out = run(&plan(server.addr, model, 10));
        let c = &out.total.counters;
        // Per user: 1st answered; 2nd closed, sent again on a new connection and answered
        // there as its first; and so on: 4 answers, 3 closes.
        assert_eq!(c.responses, 12, "reset={reset} {c:?}");
        assert_eq!(c.errors_total(), 0, "reset={reset} {:?}", c.errors);
        assert_eq!(c.requests, 12, "a request sent again is one request");
        assert_eq!(c.idle_closed, 9, "reset={reset}");
        assert_eq!(c.reconnects, 9, "reset={reset}");
        assert_eq!(server.requests.load(Ordering::SeqCst), 21);
    }
}

/// POST is not idempotent: the same close is the request's error, never a second send.
#[test]
fn issue_26_a_post_that_finds_its_connection_closed_is_an_error() {
    let server = Server::start(Behaviour::SecondRequestCloses { reset: false });
    let model = LoadModel::Closed {
        users: 3,
        per_user: Some(4),
        think: None,
    };
    let mut p = plan(server.addr, model, 10);
    p.request.method = "POST".into();
    p.request.body = b"x=1".to_vec();
    let out = run(&p);
    let c = &out.total.counters;
    // Per user: 1st answered, 2nd closed (error), 3rd on a new connection answered, 4th
    // closed (error).
    assert_eq!(c.responses, 6, "{c:?}");
    assert_eq!(c.errors_total(), 6, "{:?}", c.errors);
    assert_eq!(c.idle_closed, 0);
    assert_eq!(server.requests.load(Ordering::SeqCst), 12);
}

/// A server that listens and never accepts: the kernel completes the TCP handshakes into its
/// accept queue, but the server holds none of them.
#[test]
fn issue_26_connections_in_the_accept_queue_are_not_the_servers() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let model = LoadModel::Closed {
        users: 10,
        per_user: None,
        think: None,
    };
    let mut p = plan(addr, model, 1);
    p.stop.duration = Some(Duration::from_millis(1500));
    let out = run(&p);
    assert_eq!(out.connections_peak, 0);
    assert_eq!(out.tcp_connected_peak, 10);
    assert_eq!(out.total.counters.responses, 0);
    assert!(out.total.served.is_empty());
    drop(l);
}

/// Once the server answers, the connection is its: served equals TCP-connected, and the time
/// from connect to its first byte is recorded per connection.
#[test]
fn issue_26_served_connections_are_counted_with_their_wait() {
    let server = Server::start(Behaviour::IdleClose(Duration::from_secs(10)));
    let model = LoadModel::Closed {
        users: 6,
        per_user: None,
        think: think(50),
    };
    let out = run(&plan(server.addr, model, 1));
    assert_eq!(out.connections_peak, 6);
    assert_eq!(out.tcp_connected_peak, 6);
    assert_eq!(out.total.served.len(), 6);
}
