//! Raw TCP sessions against a real server: Debian's memcached (installed by scripts/test),
//! started by the test on 127.0.0.1 with its text protocol, whose replies end with known
//! delimiters. Every reply is matched by the scenario's `expect`; a reply that never ends right
//! is an error, not a hang. The scenarios run through the pipeline in this process and the
//! figures are the typed `RunSummary`'s. (There is no CLI side: nothing here is the CLI's.)

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use headroom_core::spec::RunSpec;

const MEMCACHED: &str = "/usr/bin/memcached";

/// A private memcached on 127.0.0.1, killed on drop.
struct Memcached {
    child: Child,
    addr: SocketAddr,
}

impl Memcached {
    fn start() -> Memcached {
        assert!(
            Path::new(MEMCACHED).exists(),
            "{MEMCACHED} is missing: install Debian's memcached (scripts/test does)"
        );
        // The port is free when picked but may be taken before memcached binds it: then
        // memcached exits, and we try another. Readiness is its own answer to `version`.
        for _ in 0..5 {
            let port = free_port();
            let mut cmd = Command::new(MEMCACHED);
            cmd.args([
                "-l",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "-U",
                "0",
                "-t",
                "1",
            ]);
            if unsafe { libc::geteuid() } == 0 {
                cmd.args(["-u", "nobody"]);
            }
            let mut child = cmd
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start memcached");
            let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if child.try_wait().ok().flatten().is_some() {
                    break;
                }
                if ask(addr, "version\r\n").starts_with("VERSION ") {
                    return Memcached { child, addr };
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("memcached did not start on 127.0.0.1 in 5 tries");
    }
}

impl Drop for Memcached {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One request on a fresh connection; the reply up to its `\r\n` (empty if none).
fn ask(addr: SocketAddr, request: &str) -> String {
    let Ok(mut c) = TcpStream::connect_timeout(&addr, Duration::from_millis(500)) else {
        return String::new();
    };
    let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
    if c.write_all(request.as_bytes()).is_err() {
        return String::new();
    }
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while !out.ends_with(b"\r\n") {
        match c.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&out).to_string()
}

/// `headroom run s.yaml --target ADDR` with `scenario` as s.yaml.
fn load(scenario: &str, addr: SocketAddr) -> RunSpec {
    scenario_spec(scenario, Some(addr.to_string()))
}

const CACHE: &str = r#"
servers: [{host: 127.0.0.1, port: 1, protocol: raw}]
load: {users: [{count: 4}]}
sessions:
  - name: cache
    steps:
      - send: {name: set, data: "set k${user_id} 0 0 5\r\nv${user_id}xyz\r\n", expect: {delimiter: "\r\n"}}
      - match: {body: STORED, when: nomatch, do: abort}
      - send: {name: get, data: "get k${user_id}\r\n", expect: {delimiter: "END\r\n"}}
      - extract: {var: value, regex: "VALUE k\\d+ 0 5\r\n(\\w+)\r\n"}
      - send: {name: copy, data: "set copy${user_id} 0 0 5\r\n${value}\r\n", expect: {delimiter: "\r\n"}}
      - send: {name: touch, data: "touch k${user_id} 100 noreply\r\n"}
      - send: {name: version, data: "version\r\n", expect: {regex: "VERSION [0-9.]+\r\n", window: 64}}
"#;

/// Sessions of raw exchanges complete against memcached: every reply is matched by its
/// delimiter or regex, an extracted value travels into a later send (checked in memcached
/// afterwards), and a send that expects nothing is counted once written.
#[test]
fn raw_sessions_run_against_memcached_with_every_reply_matched() {
    let mc = Memcached::start();
    let mut spec = load(CACHE, mc.addr);
    spec.duration = secs(2);
    let f = run(&spec);
    assert_clean(&f);
    let v = &f.summary;
    assert_eq!(v.errors_total, 0, "{}", show(v));
    let sessions = scenario_of(v).sessions.completed;
    assert!(sessions > 100, "{}", show(v));
    assert_eq!(scenario_of(v).sessions.aborted, 0, "{}", show(v));
    // Each name ran once per session (a session cut at the stop may hold one more).
    for name in ["set", "get", "copy", "touch", "version"] {
        let n = by_request(v, name).count;
        assert!(
            n >= sessions && n <= sessions + 4,
            "{name}: {n} for {sessions} sessions"
        );
    }
    assert_eq!(matched(v, "match STORED"), 0, "{}", show(v));
    // No HTTP status on a raw reply.
    assert_eq!(v.status.other, 0, "{}", show(v));
    assert_eq!(v.status.s2xx, 0, "{}", show(v));
    // The value extracted from `get` was sent back by `copy`.
    for user in 0..4 {
        let reply = ask(mc.addr, &format!("get copy{user}\r\n"));
        let want = format!("VALUE copy{user} 0 5\r\nv{user}xyz\r\n");
        assert!(reply.starts_with(&want), "user {user}: {reply:?}");
    }
}

/// A reply that does not end as expected fails its request: a connection closed by the
/// server before the delimiter is `closed`; bytes past the window without a match are a
/// `protocol` error. Both abort the session and count under the request's name.
#[test]
fn replies_that_never_end_right_are_errors_not_hangs() {
    let mc = Memcached::start();
    let quit = r#"
servers: [{host: 127.0.0.1, port: 1, protocol: raw}]
load: {users: [{count: 1}]}
sessions:
  - name: q
    steps:
      - send: {name: quit, data: "quit\r\n", expect: {delimiter: "\r\n"}}
"#;
    let mut spec = load(quit, mc.addr);
    spec.requests = Some(20);
    spec.duration = secs(BOUND);
    let f = run(&spec);
    let v = &f.summary;
    assert_eq!(v.errors.closed, 20, "{}", show(v));
    assert_eq!(by_request(v, "quit").errors, 20, "{}", show(v));
    assert_eq!(scenario_of(v).sessions.aborted, 20, "{}", show(v));

    let window = r#"
servers: [{host: 127.0.0.1, port: 1, protocol: raw}]
load: {users: [{count: 1}]}
sessions:
  - name: w
    steps:
      - send: {name: stats, data: "stats\r\n", expect: {regex: "NEVER", window: 32}}
"#;
    let mut spec = load(window, mc.addr);
    spec.requests = Some(5);
    spec.duration = secs(BOUND);
    let f = run(&spec);
    let v = &f.summary;
    assert_eq!(v.errors.protocol, 5, "{}", show(v));
    assert_eq!(by_request(v, "stats").errors, 5, "{}", show(v));
}

/// A loop's counter is substituted on the wire: each pass's `send` carries its own value, a
/// nested loop's counter counts from 1 in each outer pass, and after the loop the variable keeps
/// the last pass's value. A server of the test records every byte the user sends.
#[test]
fn loop_counters_are_sent_as_each_pass_sets_them() {
    use std::sync::{Arc, Mutex};
    let got = Arc::new(Mutex::new(Vec::new()));
    let sink = got.clone();
    let server = TestServer::start(move |mut c| {
        let _ = c.set_read_timeout(Some(Duration::from_secs(10)));
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = c.read(&mut buf) {
            sink.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    let yaml = r#"
servers: [{host: 127.0.0.1, port: 1, protocol: raw}]
load: {users: [{count: 1}]}
sessions:
  - name: s
    steps:
      - loop:
          count: 3
          counter: {var: ch, start: 3, step: 2}
          steps:
            - send: "p${ch};"
            - loop: {count: 2, counter: i, steps: [{send: "q${ch}.${i};"}]}
      - loop: {count: 2, counter: {var: down, start: -1, step: -3}, steps: [{send: "d${down};"}]}
      - send: "after=${ch},${i};"
      - think: 60s
"#;
    let mut spec = load(yaml, server.addr);
    spec.duration = secs(1);
    let f = run(&spec);
    assert_eq!(f.summary.errors_total, 0, "{}", show(&f.summary));
    let sent = String::from_utf8(got.lock().unwrap().clone()).unwrap();
    assert_eq!(
        sent,
        "p3;q3.1;q3.2;p5;q5.1;q5.2;p7;q7.1;q7.2;d-1;d-4;after=7,2;"
    );
}
