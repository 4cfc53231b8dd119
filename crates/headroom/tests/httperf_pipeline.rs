//! Issue 16: an httperf wsesslog file runs as httperf runs it with `--max-piped-calls` — a
//! burst's first request alone, then, once its reply is in, the burst's other requests
//! pipelined on the session's connection. nginx is the witness: it logs `$pipe` ("p" when a
//! request was read behind another one still in its buffer, "." otherwise) with `$connection`
//! and `$connection_requests`, so the log shows which requests went back to back on which
//! connection.

mod common;
use common::*;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// nginx on loopback logging `CONNECTION CONNECTION_REQUESTS PIPE URI STATUS`; stopped on drop.
struct PipeNginx {
    addr: SocketAddr,
    dir: tempfile::TempDir,
    child: Child,
}

impl PipeNginx {
    fn start() -> PipeNginx {
        let mut last = String::new();
        // A free port can be taken before nginx binds it: try again on another.
        for _ in 0..5 {
            match PipeNginx::try_start() {
                Ok(n) => return n,
                Err(e) => last = e,
            }
        }
        panic!("nginx did not start after 5 tries: {last}");
    }

    fn try_start() -> Result<PipeNginx, String> {
        let bin = ["/usr/sbin/nginx", "/usr/bin/nginx", "/usr/local/sbin/nginx"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
            .expect("nginx is not installed (apt-get install -y nginx-light)");
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let d = dir.path().display();
        let token = format!("pipe-ready-{}-{port}", std::process::id());
        let conf = format!(
            r#"daemon off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log;
events {{ worker_connections 1024; }}
http {{
  log_format pipe '$connection $connection_requests $pipe $request_uri $status';
  access_log {d}/access.log pipe;
  keepalive_requests 1000000;
  client_body_temp_path {d}; proxy_temp_path {d}; fastcgi_temp_path {d};
  uwsgi_temp_path {d}; scgi_temp_path {d};
  server {{
    listen 127.0.0.1:{port};
    location / {{ return 200 "ok\n"; }}
    location = /__ready {{ access_log off; return 200 "{token}"; }}
  }}
}}
"#
        );
        std::fs::write(dir.path().join("nginx.conf"), conf).unwrap();
        let mut child = Command::new(bin)
            .args(["-p", &d.to_string(), "-c", &format!("{d}/nginx.conf")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nginx");
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("nginx exited at start on {addr}: {status}"));
            }
            if ready(addr).is_some_and(|body| body.contains(&token)) {
                return Ok(PipeNginx { addr, dir, child });
            }
            thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        Err(format!("nginx on {addr} did not answer within 10 s"))
    }

    /// The access log once it has stopped growing.
    fn log(&self) -> Vec<Logged> {
        let path = self.dir.path().join("access.log");
        let mut text = String::new();
        let mut last = None;
        for _ in 0..50 {
            text = std::fs::read_to_string(&path).unwrap_or_default();
            if last == Some(text.len()) {
                break;
            }
            last = Some(text.len());
            thread::sleep(Duration::from_millis(50));
        }
        text.lines()
            .map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                assert_eq!(f.len(), 5, "unexpected access-log line: {l}");
                Logged {
                    connection: f[0].parse().unwrap(),
                    nth: f[1].parse().unwrap(),
                    pipelined: match f[2] {
                        "p" => true,
                        "." => false,
                        other => panic!("$pipe is p or ., not {other}: {l}"),
                    },
                    uri: f[3].to_string(),
                    status: f[4].parse().unwrap(),
                }
            })
            .collect()
    }
}

impl Drop for PipeNginx {
    fn drop(&mut self) {
        // SIGTERM lets the master stop its worker; SIGKILL would orphan it.
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ready(addr: SocketAddr) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
    if s.local_addr().ok() == s.peer_addr().ok() {
        return None;
    }
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(b"GET /__ready HTTP/1.0\r\nHost: t\r\n\r\n")
        .ok()?;
    let mut reply = String::new();
    s.read_to_string(&mut reply).ok()?;
    Some(reply)
}

#[derive(Debug)]
struct Logged {
    connection: u64,
    /// `$connection_requests`: 1 for the connection's first request.
    nth: u64,
    pipelined: bool,
    uri: String,
    status: u16,
}

/// Two bursts of several requests (one with a POST inside) and a burst of one, with think times
/// between them so each burst starts on a quiet connection.
const WSESSLOG: &str = "\
# httperf --wsesslog=N,0,pipe.wsesslog
/index.html think=0.05
    /img/logo.png
    /img/banner.jpg
/articles/42.html think=0.05
/a
  /b method=POST contents='x=1'
  /c
  /d
";

/// The session as nginx must see it on one connection: (URI, pipelined). A burst's first
/// request goes alone; the pipeline after it starts on an empty buffer, so nginx reads its first
/// request plain and the others behind it.
const SESSION: [(&str, bool); 8] = [
    ("/index.html", false),
    ("/img/logo.png", false),
    ("/img/banner.jpg", true),
    ("/articles/42.html", false),
    ("/a", false),
    ("/b", false),
    ("/c", true),
    ("/d", true),
];

/// Where a session cut by the end of the run may stop: between steps, never inside a pipeline.
const STEP_ENDS: [usize; 5] = [1, 3, 4, 5, 8];

fn import(dir: &Path, addr: SocketAddr) -> PathBuf {
    let log = dir.join("pipe.wsesslog");
    std::fs::write(&log, WSESSLOG).unwrap();
    let yaml = dir.join("pipe.yaml");
    let out = headroom()
        .args(["import", "httperf"])
        .arg(&log)
        .args([
            "--server",
            &addr.to_string(),
            "--rate",
            "25",
            "--duration",
            "1s",
        ])
        .arg("-o")
        .arg(&yaml)
        .output()
        .expect("spawn headroom import");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let warnings = String::from_utf8_lossy(&out.stderr);
    assert!(
        !warnings.contains("one after another"),
        "bursts are no longer sent sequentially: {warnings}"
    );
    let text = std::fs::read_to_string(&yaml).unwrap();
    assert_eq!(text.matches("- pipeline:").count(), 2, "{text}");
    yaml
}

#[test]
fn issue_16_httperf_bursts_are_pipelined_on_the_session_connection() {
    let ng = PipeNginx::start();
    let dir = tempfile::tempdir().unwrap();
    let yaml = import(dir.path(), ng.addr);
    let (v, out) = run_json(yaml.to_str().unwrap(), &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let requests = num(&v, &["requests"]);
    assert_eq!(num(&v, &["errors_total"]), 0, "{v:#}");
    assert_eq!(
        num(&v, &["responses"]) + num(&v, &["in_flight"]),
        requests,
        "{v:#}"
    );
    let log = ng.log();
    assert_eq!(
        log.len() as u64,
        requests,
        "nginx answered a different number of requests than headroom sent"
    );

    // Per connection, in the order nginx read them: the session, step by step, each pipeline's
    // 2nd..nth request read behind its first.
    let mut by_conn: BTreeMap<u64, Vec<&Logged>> = BTreeMap::new();
    for l in &log {
        assert_eq!(l.status, 200, "{l:?}");
        by_conn.entry(l.connection).or_default().push(l);
    }
    let mut whole = 0;
    for (conn, lines) in &mut by_conn {
        lines.sort_by_key(|l| l.nth);
        let nth: Vec<u64> = lines.iter().map(|l| l.nth).collect();
        let want: Vec<u64> = (1..=lines.len() as u64).collect();
        assert_eq!(nth, want, "connection {conn}: requests missing or repeated");
        let got: Vec<(&str, bool)> = lines
            .iter()
            .map(|l| (l.uri.as_str(), l.pipelined))
            .collect();
        assert!(
            got.len() <= SESSION.len() && got[..] == SESSION[..got.len()],
            "connection {conn} saw {got:?}, wanted a prefix of {SESSION:?}"
        );
        // A session cut by the end of the run stops between steps (a pipeline is written whole).
        assert!(
            STEP_ENDS.contains(&got.len()),
            "connection {conn} stopped inside a pipeline: {got:?}"
        );
        if got.len() == SESSION.len() {
            whole += 1;
        }
    }
    // One connection per session; a user the end of the run cut may have connected without
    // sending anything yet.
    let (connects, cut) = (
        num(&v, &["connects"]),
        num(&v, &["users_started"]) - num(&v, &["users_finished"]),
    );
    let seen = by_conn.len() as u64;
    assert!(
        seen <= connects && connects <= seen + cut,
        "{seen} connections carried requests; headroom made {connects} ({cut} users cut)"
    );
    assert!(
        whole >= 5,
        "only {whole} whole sessions in {} connections",
        by_conn.len()
    );

    // Each request is counted under its own name, as nginx logged it.
    let mut per_uri: BTreeMap<&str, u64> = BTreeMap::new();
    for l in &log {
        *per_uri.entry(l.uri.as_str()).or_default() += 1;
    }
    let pipelined = log.iter().filter(|l| l.pipelined).count();
    assert!(pipelined * 3 > log.len(), "{pipelined} of {}", log.len());
    // A request the end of the run left unanswered reached nginx but has no reply to count:
    // per name, headroom's count is nginx's less its share of `in_flight`.
    let mut unanswered = 0;
    for (uri, n) in per_uri {
        let method = if uri == "/b" { "POST" } else { "GET" };
        let name = format!("{method} {uri}");
        let counted = num(&v, &["scenario", "by_request", &name, "count"]);
        assert!(counted <= n, "{name}: headroom {counted}, nginx {n}");
        unanswered += n - counted;
    }
    assert_eq!(unanswered, num(&v, &["in_flight"]), "{v:#}");
}
