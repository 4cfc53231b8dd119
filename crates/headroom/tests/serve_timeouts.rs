//! Issue 18 ("hardening") finding 6, the reference servers under clients that misbehave:
//!
//! - a client that requests `/bytes/16777216` and never reads pinned ~16 MB of the server per
//!   connection, for ever (every architecture; measured on the code before the fix: 15-17.5 MB
//!   per client, never closed). Now the body is produced in 256 KiB pieces and `--write-timeout`
//!   closes the connection after that long without progress;
//! - a slowloris (Debian's `slowhttptest -H`) kept `--arch pool` from answering anyone for as
//!   long as it ran (no header timeout by default). Now thread-per-conn and pool have one (20 s
//!   by default; short here);
//! - and the pool still shows pool exhaustion under the load of the studies (bench/arches.sh,
//!   seed 002, keep-alive clients): the header timeout does not touch a connection that is
//!   between requests.
//!
//! Every server here is `headroom serve` on 127.0.0.1 port 0, killed when its guard drops.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{headroom, run_json};

/// A `headroom serve` child, killed on drop.
struct Serve {
    child: Child,
    addr: SocketAddr,
}

impl Serve {
    fn start(args: &[&str]) -> Serve {
        let mut child = headroom()
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn headroom serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .split_whitespace()
            .find_map(|w| w.parse::<SocketAddr>().ok())
            .unwrap_or_else(|| panic!("no address in the ready line {line:?} ({args:?})"));
        Serve { child, addr }
    }

    /// Resident memory of the server, in KiB.
    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .expect("VmRSS")
    }

    /// `GET /status` on a connection of its own (counted in `open` while it is served).
    fn status(&self) -> serde_json::Value {
        let body = get(self.addr, "/status", Duration::from_secs(5)).expect("/status answered");
        let json = body.split("\r\n\r\n").nth(1).unwrap_or("");
        serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {body}"))
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `GET path` with `Connection: close`; the whole answer, or `None` if none came within `within`.
fn get(addr: SocketAddr, path: &str, within: Duration) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, within).ok()?;
    s.set_read_timeout(Some(within)).unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nConnection: close\r\n\r\n").as_bytes())
        .ok()?;
    let mut v = Vec::new();
    s.read_to_end(&mut v).ok()?;
    (!v.is_empty()).then(|| String::from_utf8_lossy(&v).into_owned())
}

/// Every architecture `headroom serve --help` lists (and each poller and runtime).
const ARCHES: &[&[&str]] = &[
    &["--arch", "thread-per-conn"],
    &["--arch", "pool", "--handlers", "16"],
    &["--arch", "reactor", "--poller", "epoll", "--workers", "2"],
    &["--arch", "reactor", "--poller", "poll", "--workers", "2"],
    &["--arch", "reactor", "--poller", "select", "--workers", "2"],
    &["--arch", "async", "--runtime", "multi", "--workers", "2"],
    &["--arch", "async", "--runtime", "current-thread"],
];

/// (a) Eight clients each request `/bytes/16777216` and read nothing: the server grows by at
/// most 1.5 MiB per client (before the fix: 15-17.5 MB each; now about 0.1-0.4 MB), and every
/// one of them is closed after `--write-timeout 2s` — not before, and within a sweep of it.
#[test]
fn a_client_that_never_reads_costs_little_and_is_closed_after_the_write_timeout() {
    const CLIENTS: u64 = 8;
    let mut report = Vec::new();
    for arch in ARCHES {
        let mut args = arch.to_vec();
        args.extend(["--write-timeout", "2s"]);
        let server = Serve::start(&args);
        let _ = server.status(); // the first request's allocations are not the clients'
        let before = server.rss_kib();
        let sent = Instant::now();
        let clients: Vec<TcpStream> = (0..CLIENTS)
            .map(|_| {
                let mut s = TcpStream::connect(server.addr).unwrap();
                s.write_all(b"GET /bytes/16777216 HTTP/1.1\r\nHost: t\r\n\r\n")
                    .unwrap();
                s
            })
            .collect();
        // Every connection is stalled (socket buffers full) well within a second on loopback.
        std::thread::sleep(Duration::from_millis(1000));
        let grown = server.rss_kib().saturating_sub(before);
        let st = server.status();
        assert_eq!(st["open"], CLIENTS + 1, "{arch:?}: {st}");
        assert!(
            grown < CLIENTS * 1536,
            "{arch:?}: {grown} KiB more for {CLIENTS} clients that never read"
        );
        // Closed after the write timeout: `open` falls back to the /status connection itself.
        let closed = loop {
            let st = server.status();
            if st["open"] == 1 {
                assert_eq!(st["timeouts"], CLIENTS, "{arch:?}: {st}");
                break sent.elapsed();
            }
            // T plus a quarter of T (the sweep, or SO_SNDTIMEO) after the last byte went; the
            // rest is slack for a loaded machine.
            assert!(
                sent.elapsed() < Duration::from_secs(8),
                "{arch:?}: still open 8 s after the requests (write timeout 2 s): {st}"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(
            closed >= Duration::from_millis(1900),
            "{arch:?}: closed {closed:?} after the requests, before the 2 s write timeout"
        );
        report.push(format!(
            "{}: +{} KiB per client, closed after {:.1} s",
            arch.join(" "),
            grown / CLIENTS,
            closed.as_secs_f64()
        ));
        drop(clients);
    }
    eprintln!("{}", report.join("\n"));
}

/// (b) slowhttptest's slowloris (200 connections, headers trickled every 5 s, 15 s at most)
/// against a pool of 50 with `--header-timeout 1s`: the pool answers a normal request while the
/// attack runs, the attack's connections are closed as timeouts, and the pool answers after
/// it. Before the fix (no header timeout by default) no request was answered for as long as
/// slowhttptest ran (probes at 4, 7.5 and 11 s timed out; slowhttptest reported "service
/// available: NO" to its end).
#[test]
fn the_pool_answers_during_a_slowloris_with_a_header_timeout() {
    let server = Serve::start(&[
        "--arch",
        "pool",
        "--handlers",
        "50",
        "--header-timeout",
        "1s",
    ]);
    let tmp = tempfile::tempdir().unwrap();
    let url = format!("http://{}/", server.addr);
    let mut attack = Command::new("slowhttptest")
        .args([
            "-H", "-c", "200", "-r", "100", "-i", "5", "-l", "15", "-p", "2",
        ])
        .args(["-u", &url, "-g", "-o"])
        .arg(tmp.path().join("slow"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect(
            "slowhttptest is not installed (apt-get install -y slowhttptest; scripts/test does)",
        );
    let start = Instant::now();
    // Let the attack take every handler: 100 connections a second, 50 handlers.
    std::thread::sleep(Duration::from_millis(1000));
    let mut answered_during = None;
    let mut probes = Vec::new();
    while start.elapsed() < Duration::from_secs(20) {
        let t = start.elapsed();
        let got = get(server.addr, "/", Duration::from_secs(3));
        let running = attack.try_wait().unwrap().is_none();
        probes.push(format!(
            "{:.1}s: {} (attack running: {running})",
            t.as_secs_f64(),
            got.as_deref()
                .map_or("no answer", |g| g.lines().next().unwrap_or(""))
        ));
        if running && got.is_some_and(|g| g.starts_with("HTTP/1.1 200")) {
            answered_during = Some(t);
            break;
        }
        if !running {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let answered = answered_during.unwrap_or_else(|| {
        let _ = attack.kill();
        panic!(
            "no request answered during the attack:\n{}",
            probes.join("\n")
        )
    });
    // The attack's connections end as header timeouts, and slowhttptest ends with them.
    let end = Instant::now() + Duration::from_secs(20);
    while attack.try_wait().unwrap().is_none() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = attack.kill();
    let _ = attack.wait();
    let st = server.status();
    assert!(
        st["timeouts"].as_u64().unwrap() >= 100,
        "the slowloris connections were not timed out: {st}"
    );
    assert!(get(server.addr, "/", Duration::from_secs(3))
        .is_some_and(|g| g.starts_with("HTTP/1.1 200")));
    eprintln!(
        "answered {:.1} s into the attack; {} connections timed out\n{}",
        answered.as_secs_f64(),
        st["timeouts"],
        probes.join("\n")
    );
}

/// (c) The pool's point survives the default header timeout: seed 002's load as
/// bench/arches.sh runs it with KEEPALIVE=1 (C keep-alive clients each doing N sequential
/// `/sleep/40`), here C=5, N=4 on 2 handlers with `headroom serve`'s defaults. A handler is
/// held by one client for all its requests, so the run takes ceil(5/2) = 3 rounds of 4 x 40 ms
/// (about 0.48 s), not the 0.16 s that 5 handlers take. (The library-level tests of the same
/// effect: headroom-serve's tests/arches.rs `pool_of_2_serves_the_third_client_only_after_one_
/// closes` and `pool_throughput_is_bounded_by_its_handlers`.)
#[test]
fn the_pool_still_exhausts_under_the_studies_keepalive_load() {
    let mut took = Vec::new();
    for handlers in ["2", "5"] {
        let server = Serve::start(&["--arch", "pool", "--handlers", handlers]);
        let url = format!("http://{}/sleep/40", server.addr);
        let (v, out) = run_json(&url, &["-c", "5", "--per-user", "4"]);
        assert!(out.status.success(), "{v}");
        assert_eq!(v["requests"], 20, "{v}");
        assert_eq!(v["errors_total"], 0, "{v}");
        took.push(v["duration_s"].as_f64().unwrap());
    }
    let (two, five) = (took[0], took[1]);
    assert!(
        two >= 0.45,
        "2 handlers, 5 keep-alive clients: {two} s, expected 3 rounds"
    );
    // 3 rounds against 1: the ratio, not the absolute time, on a loaded machine.
    assert!(
        two >= 2.0 * five,
        "{two} s on 2 handlers, {five} s on 5: expected about 3x"
    );
    eprintln!(
        "5 keep-alive clients x 4 sleeps of 40 ms: {two:.2} s on 2 handlers, {five:.2} s on 5"
    );
}

/// The write timeout is "no progress for T", not "a response within T": a client that reads a
/// 1 MB body slowly (16 KiB every 100 ms, about 6 s in all, through 8 KiB socket buffers on
/// both sides so that the server's writes stall between its reads) gets all of it from every
/// architecture under `--write-timeout 1s`.
#[test]
fn a_slow_reader_that_keeps_reading_is_never_cut() {
    const LEN: usize = 1_000_000;
    let servers: Vec<Serve> = ARCHES
        .iter()
        .map(|arch| {
            let mut args = arch.to_vec();
            args.extend(["--write-timeout", "1s", "--sndbuf", "8k"]);
            Serve::start(&args)
        })
        .collect();
    let readers: Vec<_> = servers
        .iter()
        .zip(ARCHES)
        .map(|(server, arch)| {
            let addr = server.addr;
            std::thread::spawn(move || {
                let sock = socket2::Socket::new(
                    socket2::Domain::IPV4,
                    socket2::Type::STREAM,
                    Some(socket2::Protocol::TCP),
                )
                .unwrap();
                sock.set_recv_buffer_size(8192).unwrap();
                sock.connect(&addr.into()).unwrap();
                let mut s: TcpStream = sock.into();
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                s.write_all(format!("GET /bytes/{LEN} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
                    .unwrap();
                let t = Instant::now();
                let mut got = 0usize;
                let mut buf = vec![0u8; 16 * 1024];
                while t.elapsed() < Duration::from_secs(30) {
                    std::thread::sleep(Duration::from_millis(100));
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => got += n,
                    }
                    if got >= LEN {
                        break;
                    }
                }
                (arch, got, t.elapsed())
            })
        })
        .collect();
    for r in readers {
        let (arch, got, took) = r.join().unwrap();
        // The head comes first: the whole answer is a little more than LEN.
        assert!(
            got > LEN,
            "{arch:?}: cut after {got} bytes and {took:?} though the client kept reading"
        );
        assert!(
            took > Duration::from_secs(2),
            "{arch:?}: {took:?}: the reads were not slow"
        );
    }
    for server in &servers {
        assert_eq!(server.status()["timeouts"], 0);
    }
}
