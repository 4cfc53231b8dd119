//! The reactor's three pollers (select, poll, epoll) and what the loop does around them: slow
//! routes on a timer, timeouts, connection limits, socket options, resets, draining — each test
//! written once as `fn name(poller: Poller)` and instantiated per poller by `per_poller!`.
//!
//! Tests that need the process to themselves (select's descriptor limit depends on descriptor
//! numbers; the no-spin checks read the server threads' CPU time) re-run this test binary for
//! just that test in a child process: see [`isolated`].

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::process::Command;
use std::time::{Duration, Instant};

mod common;
use common::*;

use headroom_serve::{start, Arch, Poller, ServerConfig};

const ALL: [Poller; 3] = [Poller::Select, Poller::Poll, Poller::Epoll];

fn config(poller: Poller) -> ServerConfig {
    ServerConfig {
        workers: 1,
        arch: Arch::Reactor { poller },
        ..ServerConfig::default()
    }
}

// --- every poller ------------------------------------------------------------------------------

fn keep_alive_and_pipelining_in_order_with_slow_routes(poller: Poller) {
    let s = start(config(poller)).unwrap();
    let mut c = Reader::connect(s.local_addr());
    for i in 0..20 {
        assert_eq!(c.get(&format!("/bytes/{i}")).body.len(), i);
    }
    // Canned, timer and blocking routes in one write: answered in request order.
    let mut req = Vec::new();
    for path in ["/bytes/1", "/sleep/30", "/bytes/2", "/status", "/bytes/3"] {
        req.extend_from_slice(format!("GET {path} HTTP/1.1\r\n\r\n").as_bytes());
    }
    c.send(&req);
    assert_eq!(c.response().body, b"x");
    assert_eq!(c.response().body, b"slept 30 ms\n");
    assert_eq!(c.response().body, b"xx");
    let status = String::from_utf8(c.response().body).unwrap();
    let name = format!("\"poller\":\"{}\"", poller.name());
    assert!(status.contains(&name), "{status}");
    assert_eq!(c.response().body, b"xxx");
    let st = wait_stats(&s, |st| st.requests == 25);
    assert_eq!((st.accepted, st.requests, st.errors), (1, 25, 0));
}

fn garbage_gets_400_and_the_connection_ends(poller: Poller) {
    let s = start(config(poller)).unwrap();
    let mut c = Reader::connect(s.local_addr());
    c.send(b"GET / HTTP/1.1\r\n\r\n\x16\x03\x01 not http\r\n\r\n");
    assert_eq!(c.response().status, 200);
    let r = c.response();
    assert_eq!((r.status, r.close), (400, true));
    c.expect_end();
    drop(c);
    let st = wait_stats(&s, |st| st.open == 0);
    assert_eq!((st.bad_requests, st.open, st.errors), (1, 0, 0));
}

/// `/sleep` waits on the worker's timer: the only worker goes on serving everyone else, and
/// timers fire in due order whatever order they were set in.
fn sleep_does_not_delay_other_connections(poller: Poller) {
    let s = start(config(poller)).unwrap();
    let addr = s.local_addr();
    let mut long = Reader::connect(addr);
    let mut short = Reader::connect(addr);
    let mut other = Reader::connect(addr);
    let t = Instant::now();
    long.send(b"GET /sleep/400 HTTP/1.1\r\n\r\n");
    short.send(b"GET /sleep/150 HTTP/1.1\r\n\r\n");
    for _ in 0..5 {
        assert_eq!(other.get("/").status, 200);
    }
    let quick = t.elapsed();
    assert!(quick < Duration::from_millis(120), "/ took {quick:?}");
    assert_eq!(short.response().body, b"slept 150 ms\n");
    let t_short = t.elapsed();
    assert_eq!(long.response().body, b"slept 400 ms\n");
    let t_long = t.elapsed();
    assert!(t_short >= Duration::from_millis(150), "{t_short:?}");
    assert!(t_short < Duration::from_millis(390), "{t_short:?}");
    assert!(t_long >= Duration::from_millis(400), "{t_long:?}");
    // The connections go on after their sleep.
    assert_eq!(long.get("/bytes/2").body, b"xx");
}

/// The client half-closes while its `/sleep` runs: it still gets the answer (and what it
/// pipelined behind), then the server closes its side too and the connection is gone.
fn half_close_during_a_sleep(poller: Poller) {
    let s = start(config(poller)).unwrap();
    let mut c = Reader::connect(s.local_addr());
    c.send(b"GET /sleep/100 HTTP/1.1\r\n\r\n");
    std::thread::sleep(Duration::from_millis(30));
    c.send(b"GET /bytes/2 HTTP/1.1\r\n\r\n");
    c.stream.shutdown(std::net::Shutdown::Write).unwrap();
    assert_eq!(c.response().body, b"slept 100 ms\n");
    assert_eq!(c.response().body, b"xx");
    c.expect_end();
    let st = wait_stats(&s, |st| st.open == 0);
    assert_eq!((st.open, st.requests, st.errors), (0, 2, 0));
}

fn idle_timeout_closes_idle_connections_only(poller: Poller) {
    let s = start(ServerConfig {
        idle_timeout: Some(Duration::from_millis(300)),
        ..config(poller)
    })
    .unwrap();
    let addr = s.local_addr();
    let mut idle = Reader::connect(addr);
    let mut busy = Reader::connect(addr);
    assert_eq!(idle.get("/").status, 200);
    let t = Instant::now();
    // A request every 60 ms keeps `busy` alive well past the timeout.
    while t.elapsed() < Duration::from_millis(900) {
        assert_eq!(busy.get("/").status, 200);
        std::thread::sleep(Duration::from_millis(60));
    }
    assert!(idle.ended_within(Duration::from_secs(1)), "idle kept");
    let closed_after = t.elapsed();
    assert!(
        closed_after >= Duration::from_millis(300),
        "{closed_after:?}"
    );
    assert_eq!(busy.get("/").status, 200);
    let st = wait_stats(&s, |st| st.timeouts == 1 && st.open == 1);
    assert_eq!((st.timeouts, st.open, st.errors), (1, 1, 0));
}

fn header_timeout_closes_incomplete_heads(poller: Poller) {
    let s = start(ServerConfig {
        header_timeout: Some(Duration::from_millis(300)),
        ..config(poller)
    })
    .unwrap();
    let addr = s.local_addr();
    let mut quiet = Reader::connect(addr); // connected, never sends: no head started
    let mut stuck = Reader::connect(addr);
    let mut trickle = Reader::connect(addr);
    let t = Instant::now();
    stuck.send(b"GET / HTTP/1.1\r\nHost:");
    // A byte every 50 ms does not extend the head's deadline: it runs from its first byte.
    let mut ended = false;
    for &b in b"GET / HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" {
        if trickle.stream.write_all(&[b]).is_err() {
            ended = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
        if t.elapsed() > Duration::from_millis(900) {
            break;
        }
    }
    assert!(ended || trickle.ended_within(Duration::from_secs(1)));
    assert!(stuck.ended_within(Duration::from_secs(1)));
    assert!(t.elapsed() >= Duration::from_millis(300));
    // No head started, so no header timeout (and no idle timeout configured).
    assert!(!quiet.ended_within(Duration::from_millis(10)));
    assert_eq!(quiet.get("/").status, 200);
    let st = wait_stats(&s, |st| st.timeouts == 2 && st.open == 1);
    assert_eq!((st.timeouts, st.open), (2, 1));
}

fn max_conns_rejects_beyond_the_limit(poller: Poller) {
    let s = start(ServerConfig {
        max_conns: Some(2),
        workers: 2, // the limit is for the server, whichever worker accepts
        ..config(poller)
    })
    .unwrap();
    let addr = s.local_addr();
    let mut a = Reader::connect(addr);
    let mut b = Reader::connect(addr);
    assert_eq!(a.get("/").status, 200);
    assert_eq!(b.get("/").status, 200);
    let mut c = Reader::connect(addr);
    let _ = c.stream.write_all(b"GET / HTTP/1.1\r\n\r\n");
    assert!(c.try_response().is_none(), "third connection served");
    let st = wait_stats(&s, |st| st.rejected == 1);
    assert_eq!((st.rejected, st.accepted, st.open), (1, 3, 2));
    // A freed place is taken again.
    drop(a);
    wait_stats(&s, |st| st.open == 1);
    let mut d = Reader::connect(addr);
    assert_eq!(d.get("/").status, 200);
    assert_eq!(b.get("/").status, 200);
}

/// The server's side of a connection in this process, found through /proc/self/fd.
fn server_side(client: &TcpStream, f: impl FnOnce(socket2::SockRef<'_>)) {
    let me = client.local_addr().unwrap();
    for entry in std::fs::read_dir("/proc/self/fd").unwrap() {
        let Ok(fd) = entry.unwrap().file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        // SAFETY: the server holds `fd` open for the duration (the test only reads options).
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        let sock = socket2::SockRef::from(&fd);
        if sock.peer_addr().ok().and_then(|a| a.as_socket()) == Some(me) {
            return f(sock);
        }
    }
    panic!("server side of {me} not found");
}

fn proc_sys(path: &str) -> usize {
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// SO_SNDBUF, SO_RCVBUF and TCP_NODELAY are set on the listener and inherited (Linux): the
/// accepted socket has them, with no per-connection setsockopt. The kernel doubles what it was
/// given (for its own bookkeeping) after capping it at net.core.[wr]mem_max.
fn socket_options_reach_accepted_sockets(poller: Poller) {
    let want = 96 * 1024;
    let s = start(ServerConfig {
        sndbuf: Some(want as u32),
        rcvbuf: Some(want as u32),
        nodelay: false,
        ..config(poller)
    })
    .unwrap();
    let mut c = Reader::connect(s.local_addr());
    assert_eq!(c.get("/").status, 200);
    let snd = 2 * want.min(proc_sys("/proc/sys/net/core/wmem_max"));
    let rcv = 2 * want.min(proc_sys("/proc/sys/net/core/rmem_max"));
    server_side(&c.stream, |sock| {
        assert_eq!(sock.send_buffer_size().unwrap(), snd);
        assert_eq!(sock.recv_buffer_size().unwrap(), rcv);
        assert!(!sock.nodelay().unwrap());
    });
    // And by default: autotuned buffers (not locked at our size), TCP_NODELAY on.
    let s = start(config(poller)).unwrap();
    let mut c = Reader::connect(s.local_addr());
    assert_eq!(c.get("/").status, 200);
    server_side(&c.stream, |sock| {
        assert_ne!(sock.send_buffer_size().unwrap(), snd);
        assert!(sock.nodelay().unwrap());
    });
}

/// A client that resets (SO_LINGER 0 then close) is counted in `resets`, not `errors`: once
/// while the server waits to write a tail (the write fails), once mid-request (the read fails).
fn client_resets_are_counted_apart(poller: Poller) {
    let s = start(config(poller)).unwrap();
    let addr = s.local_addr();
    let reset = |c: TcpStream| {
        socket2::SockRef::from(&c)
            .set_linger(Some(Duration::ZERO))
            .unwrap();
        drop(c);
    };
    let mut writer = connect_addr(addr);
    writer
        .write_all(b"GET /bytes/16777216 HTTP/1.1\r\n\r\n")
        .unwrap();
    let mut reader = connect_addr(addr);
    reader.write_all(b"GET / HTTP/1.1\r\nHost").unwrap();
    wait_stats(&s, |st| st.accepted == 2);
    std::thread::sleep(Duration::from_millis(50));
    reset(writer);
    reset(reader);
    let st = wait_stats(&s, |st| st.open == 0);
    assert_eq!((st.resets, st.errors, st.open), (2, 0, 0), "{st:?}");
}

/// Drain: new connections are refused, an idle connection is closed at once, one in the middle
/// of its head gets its answer with `Connection: close`, a sleeping one gets its answer, and
/// `drain` returns as soon as they are done.
fn drain_finishes_in_flight_and_closes_idle(poller: Poller) {
    let s = start(ServerConfig {
        workers: 2,
        ..config(poller)
    })
    .unwrap();
    let addr = s.local_addr();
    let mut idle = Reader::connect(addr);
    assert_eq!(idle.get("/").status, 200);
    let mut partial = Reader::connect(addr);
    partial.send(b"GET /bytes/3 HTTP/1.1\r\n");
    let mut sleeper = Reader::connect(addr);
    sleeper.send(b"GET /sleep/300 HTTP/1.1\r\n\r\n");
    wait_stats(&s, |st| st.accepted == 3);
    std::thread::sleep(Duration::from_millis(30));

    let t = Instant::now();
    let drainer = std::thread::spawn(move || s.drain(Duration::from_secs(10)));
    assert!(idle.ended_within(Duration::from_millis(500)), "idle kept");
    assert!(t.elapsed() < Duration::from_millis(200));
    let refused = TcpStream::connect_timeout(&addr, Duration::from_millis(500))
        .map(|mut c| {
            c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let _ = c.write_all(b"GET / HTTP/1.1\r\n\r\n");
            let mut b = [0u8; 64];
            !matches!(c.read(&mut b), Ok(n) if n > 0)
        })
        .unwrap_or(true);
    assert!(refused, "a new connection was served while draining");
    partial.send(b"\r\n");
    let r = partial.response();
    assert_eq!(
        (r.status, r.close, r.body.as_slice()),
        (200, true, &b"xxx"[..])
    );
    partial.expect_end();
    drop(partial); // what a client does after `Connection: close` (the server lingers till then)
    assert_eq!(sleeper.response().body, b"slept 300 ms\n");
    sleeper.expect_end();
    drainer.join().unwrap();
    let took = t.elapsed();
    assert!(took < Duration::from_secs(2), "drain took {took:?}");
}

/// At the drain's deadline whatever is left is closed (the workers notice within DRAIN_POLL).
fn drain_deadline_closes_the_rest(poller: Poller) {
    let s = start(config(poller)).unwrap();
    let mut sleeper = Reader::connect(s.local_addr());
    sleeper.send(b"GET /sleep/5000 HTTP/1.1\r\n\r\n");
    wait_stats(&s, |st| st.accepted == 1);
    std::thread::sleep(Duration::from_millis(20));
    let t = Instant::now();
    s.drain(Duration::from_millis(200));
    let took = t.elapsed();
    assert!(took >= Duration::from_millis(200), "{took:?}");
    assert!(took < Duration::from_millis(1000), "{took:?}");
    assert!(sleeper.ended_within(Duration::from_secs(1)));
}

fn stop_is_prompt_with_sleeping_connections(poller: Poller) {
    let s = start(config(poller)).unwrap();
    let mut c = Reader::connect(s.local_addr());
    c.send(b"GET /sleep/10000 HTTP/1.1\r\n\r\n");
    wait_stats(&s, |st| st.accepted == 1);
    let t = Instant::now();
    s.stop();
    assert!(t.elapsed() < Duration::from_millis(500));
    assert!(c.ended_within(Duration::from_secs(1)));
}

// Instantiate the tests above once per poller (see `common::per_poller!`).
per_poller!(
    keep_alive_and_pipelining_in_order_with_slow_routes,
    garbage_gets_400_and_the_connection_ends,
    sleep_does_not_delay_other_connections,
    half_close_during_a_sleep,
    idle_timeout_closes_idle_connections_only,
    header_timeout_closes_incomplete_heads,
    max_conns_rejects_beyond_the_limit,
    socket_options_reach_accepted_sockets,
    client_resets_are_counted_apart,
    drain_finishes_in_flight_and_closes_idle,
    drain_deadline_closes_the_rest,
    stop_is_prompt_with_sleeping_connections,
);

// --- tests in a process of their own -----------------------------------------------------------

/// Run `body` only in a child process that runs this test alone: this test binary re-executed
/// with `name --exact` (libtest) and `HEADROOM_ISOLATED=name`. The parent just checks that the
/// child passed.
fn isolated(name: &str, body: impl FnOnce()) {
    if std::env::var("HEADROOM_ISOLATED").as_deref() == Ok(name) {
        return body();
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env("HEADROOM_ISOLATED", name)
        .output()
        .expect("re-run the test binary");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{name} (child process) failed:\n{text}"
    );
    assert!(text.contains("1 passed"), "{name} did not run:\n{text}");
}

/// Move a descriptor to a number at or above 4096 (closing the original), so that the client
/// sockets of a test leave the low numbers to the server in the same process.
fn move_high(s: TcpStream) -> TcpStream {
    use std::os::fd::{FromRawFd, IntoRawFd};
    // SAFETY: F_DUPFD_CLOEXEC returns a new descriptor we then own; the original is closed by
    // dropping `s`.
    let fd = unsafe { libc::fcntl(s.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 4096) };
    assert!(fd >= 4096, "{}", std::io::Error::last_os_error());
    drop(s);
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    unsafe { TcpStream::from_raw_fd(fd.into_raw_fd()) }
}

/// select(2) cannot watch a descriptor at or above FD_SETSIZE (1024): the server refuses such
/// connections at once (closing them, counting them as rejected) instead of corrupting its
/// fd_set, and keeps serving the others — and new ones once numbers below 1024 are free.
#[test]
fn select_refuses_descriptors_beyond_fd_setsize() {
    isolated("select_refuses_descriptors_beyond_fd_setsize", || {
        let total = 1030;
        let s = start(config(Poller::Select)).unwrap();
        let addr = s.local_addr();
        let mut served = Vec::new();
        let mut refused = 0;
        for _ in 0..total {
            let mut c = Reader::new(move_high(connect_addr(addr)));
            let _ = c.stream.write_all(b"GET / HTTP/1.1\r\n\r\n");
            match c.try_response() {
                Some(r) => {
                    assert_eq!(r.status, 200);
                    served.push(c);
                }
                None => refused += 1,
            }
        }
        // The process holds a few descriptors of its own (stdio, the eventfd, the listener...).
        assert!(served.len() >= 1000, "only {} served", served.len());
        assert_eq!(served.len() + refused, total);
        assert!(refused >= 6, "{refused} refused");
        let st = wait_stats(&s, |st| st.rejected == refused as u64);
        assert_eq!(st.rejected, refused as u64);
        assert_eq!(st.open, served.len() as u64);
        assert_eq!(st.errors, 0);
        // Everyone served is still served.
        for c in served.iter_mut().step_by(50) {
            assert_eq!(c.get("/bytes/1").body, b"x");
        }
        // Free some numbers below 1024: new connections get them and are served.
        served.truncate(served.len() - 10);
        wait_stats(&s, |st| st.open == served.len() as u64);
        for _ in 0..5 {
            let mut c = Reader::new(move_high(connect_addr(addr)));
            assert_eq!(c.get("/").status, 200);
            served.push(c);
        }
    });
}

/// CPU time (user + system, clock ticks) of the server threads (`serve-*`) of this process.
fn server_cpu_ticks() -> u64 {
    let mut ticks = 0;
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'.
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        if head.contains("(serve-") {
            let f: Vec<&str> = rest.split_whitespace().collect();
            // Fields 14 and 15 of proc_pid_stat(5), utime and stime; `rest` starts at field 3.
            ticks += f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
        }
    }
    ticks
}

/// Level-triggered pollers report a ready descriptor on every call, so a connection must not
/// watch what it will not act on. Three such states, each held for 300 ms per poller while the
/// server's CPU time is measured (a spinning worker would burn all 30 ticks):
/// - asleep in `/sleep` with more pipelined input behind it (input ready, not to be read yet);
/// - a client that does not read a large response and keeps sending requests (input ready, but
///   back-pressure: only writability is watched);
/// - lingering after a 400, the client still connected.
#[test]
fn level_triggered_pollers_do_not_spin() {
    isolated("level_triggered_pollers_do_not_spin", || {
        for poller in ALL {
            let s = start(config(poller)).unwrap();
            let addr = s.local_addr();
            let mut sleeper = Reader::connect(addr);
            sleeper.send(b"GET /sleep/400 HTTP/1.1\r\n\r\n");
            let mut hog = Reader::connect(addr);
            hog.send(b"GET /bytes/16777216 HTTP/1.1\r\n\r\n");
            let mut lingerer = Reader::connect(addr);
            lingerer.send(b"BAD\x00\r\n\r\n");
            assert_eq!(lingerer.response().status, 400);
            std::thread::sleep(Duration::from_millis(50));
            // Sent while the sleep runs: it waits in the socket, readable and not to be read.
            sleeper.send(b"GET /bytes/1 HTTP/1.1\r\n\r\n");
            hog.send(b"GET / HTTP/1.1\r\n\r\n");
            std::thread::sleep(Duration::from_millis(20));

            let before = server_cpu_ticks();
            std::thread::sleep(Duration::from_millis(300));
            let spent = server_cpu_ticks() - before;
            eprintln!("{poller:?}: {spent} ticks of server CPU in 300 ms");
            assert!(spent <= 5, "{poller:?}: {spent} ticks of CPU in 300 ms");

            // And each is still served right.
            assert_eq!(sleeper.response().body, b"slept 400 ms\n");
            assert_eq!(sleeper.response().body, b"x");
            assert_eq!(hog.response().body.len(), 16 * 1024 * 1024);
            assert_eq!(hog.response().status, 200);
            lingerer.expect_end();
            s.stop();
        }
    });
}
