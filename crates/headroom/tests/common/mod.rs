//! Shared test harness: run the real `headroom` binary, a real nginx started on loopback, and
//! small purpose-built servers that misbehave in exactly one way each.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

pub mod access_log;
pub mod apache;
pub mod chromium;
pub mod h2o;
pub mod netns_lock;
pub mod pki;
pub mod source_server;
pub mod tls_nginx;
pub mod tls_services;

/// headroom serve (reactor, one worker) in this process on 127.0.0.1, any free port.
pub fn serve() -> headroom_serve::RunningServer {
    headroom_serve::start(headroom_serve::ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        workers: 1,
        ..Default::default()
    })
    .expect("start headroom serve")
}

/// The value of `attr="..."` in each tag of `html` that contains `marker`.
pub fn attrs<'a>(html: &'a str, marker: &str, attr: &str) -> Vec<&'a str> {
    html.match_indices(marker)
        .filter_map(|(at, _)| {
            let tag_end = html[at..].find('>')? + at;
            let tag_start = html[..at].rfind('<')?;
            let tag = &html[tag_start..tag_end];
            let key = format!("{attr}=\"");
            let v = tag.find(&key)? + key.len();
            let end = tag[v..].find('"')? + v;
            Some(&tag[v..end])
        })
        .collect()
}

/// The address a `headroom agent` (spawned with its stdout piped) says it listens on.
pub fn agent_address(child: &mut Child, who: &str) -> String {
    use std::io::BufRead;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("the agent's stdout is piped"))
        .read_line(&mut line)
        .unwrap();
    line.trim()
        .strip_prefix("headroom agent listening on ")
        .unwrap_or_else(|| panic!("{who} said '{line}'"))
        .to_string()
}

pub fn headroom() -> Command {
    Command::new(env!("CARGO_BIN_EXE_headroom"))
}

/// `headroom run ARGS... -q --out DIR` (its report.html and files in DIR); the caller checks
/// the exit status, or calls [`succeeded`].
pub fn run_into(args: &[&str], dir: &Path) -> Output {
    headroom()
        .arg("run")
        .args(args)
        .args(["-q", "--out"])
        .arg(dir)
        .output()
        .unwrap()
}

/// Fails the test with the command's stderr unless it exited 0.
pub fn succeeded(out: &Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Run `headroom run URL ARGS... --json -q` and parse the summary.
pub fn run_json(url: &str, args: &[&str]) -> (serde_json::Value, Output) {
    let out = headroom()
        .arg("run")
        .arg(url)
        .args(args)
        .args(["--json", "-q"])
        .output()
        .expect("spawn headroom");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "headroom did not print JSON ({e}); exit {:?}\nstdout: {}\nstderr: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (v, out)
}

/// Run `headroom run TARGET ARGS... -q` without `--json`: for runs that must stop before any
/// load (a usage error, a failed preflight), whose stderr is the point.
pub fn run_plain(target: &str, args: &[&str]) -> Output {
    headroom()
        .arg("run")
        .arg(target)
        .args(args)
        .arg("-q")
        .output()
        .expect("spawn headroom")
}

/// The single line a failed run printed on stderr; panics unless there is exactly one.
pub fn one_line(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(
        lines.len(),
        1,
        "wanted one line on stderr, got {} (exit {:?}):\n{err}",
        lines.len(),
        out.status.code()
    );
    lines[0].to_string()
}

/// Write `yaml` as `s.yaml` in a fresh directory, with `files` (name, source) copied beside it
/// (a scenario names its files relative to itself), and `run_json` it.
pub fn run_scenario(
    yaml: &str,
    files: &[(&str, &Path)],
    args: &[&str],
) -> (serde_json::Value, Output) {
    let dir = tempfile::tempdir().unwrap();
    for (name, src) in files {
        std::fs::copy(src, dir.path().join(name))
            .unwrap_or_else(|e| panic!("copy {} to {name}: {e}", src.display()));
    }
    let file = dir.path().join("s.yaml");
    std::fs::write(&file, yaml).unwrap();
    run_json(file.to_str().unwrap(), args)
}

/// The number at `path` in `v` (`num(&v, &["tls", "handshakes"])`); panics, showing `v`, when
/// there is none.
pub fn num(v: &serde_json::Value, path: &[&str]) -> u64 {
    let mut x = v;
    for p in path {
        x = &x[*p];
    }
    x.as_u64()
        .unwrap_or_else(|| panic!("no number at {path:?} in {v:#}"))
}

pub fn err(v: &serde_json::Value, kind: &str) -> u64 {
    v["errors"][kind]
        .as_u64()
        .unwrap_or_else(|| panic!("no errors.{kind} in {v}"))
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn wait_port(addr: SocketAddr, within: Duration) {
    let t = Instant::now();
    while t.elapsed() < within {
        if let Ok(s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            // A connect to a free port in the ephemeral range can pick that very port as its
            // source and "succeed" by connecting to itself: that is nobody listening.
            if s.local_addr().ok() != s.peer_addr().ok() {
                return;
            }
        }
        thread::sleep(Duration::from_millis(20));
    }
    panic!("nothing listening on {addr} after {within:?}");
}

/// GET /__headroom_ready on `addr` with a fresh connection; the whole reply, if any.
fn probe_token(addr: SocketAddr) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
    // A connect to a free port can pick that very port as its source and connect to itself.
    if s.local_addr().ok() == s.peer_addr().ok() {
        return None;
    }
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(b"GET /__headroom_ready HTTP/1.0\r\nHost: t\r\n\r\n")
        .ok()?;
    let mut reply = String::new();
    s.read_to_string(&mut reply).ok()?;
    Some(reply)
}

/// nginx (Debian's) with one worker on 127.0.0.1, its own prefix and access log, killed on drop.
pub struct Nginx {
    pub addr: SocketAddr,
    pub dir: tempfile::TempDir,
    child: Child,
}

fn find_nginx() -> PathBuf {
    for p in ["/usr/sbin/nginx", "/usr/bin/nginx", "/usr/local/sbin/nginx"] {
        if Path::new(p).exists() {
            return PathBuf::from(p);
        }
    }
    panic!(
        "nginx is not installed. Run scripts/test (it installs Debian's nginx-light), \
         or: apt-get install -y nginx-light"
    );
}

impl Nginx {
    /// Start nginx on a free loopback port. The port comes from `free_port`, so another test
    /// (or a client's ephemeral source port) can take it before nginx binds: nginx then exits,
    /// or another server answers there. Readiness is therefore proved by asking
    /// `/__headroom_ready` for a token only this instance knows; on a clash it retries on a new
    /// port.
    pub fn start() -> Nginx {
        Nginx::start_with("", "$remote_addr $request $status")
    }

    /// Like [`start`](Nginx::start), with more `server` directives (`{dir}` and `{port}` in
    /// them become the instance's directory and port) and the access log's format.
    pub fn start_with(server: &str, log_format: &str) -> Nginx {
        let mut last = String::new();
        for _ in 0..5 {
            match Nginx::try_start(server, log_format) {
                Ok(ng) => return ng,
                Err(e) => last = e,
            }
        }
        panic!("nginx did not start after 5 tries: {last}");
    }

    fn try_start(server: &str, log_format: &str) -> Result<Nginx, String> {
        let bin = find_nginx();
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let d = dir.path().display();
        let token = format!("ready-{}-{port}", std::process::id());
        let server = server
            .replace("{dir}", &d.to_string())
            .replace("{port}", &port.to_string());
        let conf = format!(
            r#"daemon off;
worker_processes 1;
worker_rlimit_nofile 20000;
pid {d}/nginx.pid;
error_log {d}/error.log;
events {{ worker_connections 20000; }}
http {{
  log_format plain '{log_format}';
  access_log {d}/access.log plain;
  keepalive_requests 1000000;
  keepalive_timeout 120s;
  client_body_temp_path {d}; proxy_temp_path {d}; fastcgi_temp_path {d};
  uwsgi_temp_path {d}; scgi_temp_path {d};
  server {{
    listen 127.0.0.1:{port} backlog=4096;
    location / {{ return 200 "hello from nginx\n"; }}
    location /missing {{ return 404; }}
    location /fail {{ return 503; }}
    location = /__headroom_ready {{ access_log off; return 200 "{token}"; }}
    {server}
  }}
}}
"#
        );
        std::fs::write(dir.path().join("nginx.conf"), conf).unwrap();
        let mut child = Command::new(bin)
            .args(["-p", &d.to_string(), "-c", &format!("{d}/nginx.conf")])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start nginx");
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(status)) = child.try_wait() {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                return Err(format!("nginx exited at start on {addr} ({status}): {err}"));
            }
            match probe_token(addr) {
                Some(body) if body.contains(&token) => {
                    // The probe is not logged (access_log off): the log counts only load.
                    return Ok(Nginx { addr, dir, child });
                }
                _ => thread::sleep(Duration::from_millis(20)),
            }
        }
        let _ = child.kill();
        let _ = child.wait();
        Err(format!(
            "nginx on {addr} did not answer its ready token within 10 s"
        ))
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Lines in the access log (requests nginx answered). nginx writes each line when the
    /// request completes; give it a moment to settle.
    pub fn logged(&self) -> usize {
        let path = self.dir.path().join("access.log");
        let mut last = usize::MAX;
        for _ in 0..50 {
            let n = std::fs::read_to_string(&path)
                .map(|s| s.lines().count())
                .unwrap_or(0);
            if n == last {
                return n;
            }
            last = n;
            thread::sleep(Duration::from_millis(50));
        }
        last
    }
}

impl Nginx {
    /// The instance's directory (config, logs, files it serves).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The access log's lines, once settled.
    pub fn log_lines(&self) -> Vec<String> {
        self.logged();
        std::fs::read_to_string(self.dir.path().join("access.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// The client address of every logged request.
    pub fn logged_sources(&self) -> Vec<String> {
        self.logged();
        let log = std::fs::read_to_string(self.dir.path().join("access.log")).unwrap_or_default();
        log.lines()
            .filter_map(|l| l.split(' ').next())
            .map(str::to_string)
            .collect()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM, not SIGKILL: the master must live long enough to stop its workers, or they
        // outlive the test as orphans.
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

/// A tiny server on 127.0.0.1 running `handler` on a thread per accepted connection, until
/// dropped. The handler gets the stream after its first request has been read.
pub struct TestServer {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl TestServer {
    pub fn start<F>(handler: F) -> TestServer
    where
        F: Fn(TcpStream) + Send + Sync + 'static,
    {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let handler = Arc::new(handler);
        thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((c, _)) => {
                        c.set_nonblocking(false).unwrap();
                        let h = handler.clone();
                        thread::spawn(move || h(c));
                    }
                    Err(_) => thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        TestServer { addr, stop }
    }

    /// A keep-alive server answering every request with a 2-byte 200.
    pub fn ok() -> TestServer {
        TestServer::start(|mut c| {
            while read_request(&mut c) {
                if !write_all(&mut c, OK) {
                    return;
                }
            }
        })
    }

    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Read one request head (up to the blank line); false if the peer closed first.
pub fn read_request(c: &mut TcpStream) -> bool {
    let mut buf = Vec::new();
    let mut b = [0u8; 1024];
    loop {
        match c.read(&mut b) {
            Ok(0) | Err(_) => return false,
            Ok(n) => {
                buf.extend_from_slice(&b[..n]);
                if buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    return true;
                }
            }
        }
    }
}

pub const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

pub fn write_all(c: &mut TcpStream, b: &[u8]) -> bool {
    c.write_all(b).is_ok()
}

// ---- the protocol servers scripts/test starts (ejabberd, PostgreSQL, websockets echo) ----

/// The repository's root directory.
pub fn repo_root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// `scripts/NAME start` (idempotent), or the address in `var` when set.
pub fn service(var: &str, script: &str) -> String {
    if let Ok(v) = std::env::var(var) {
        if !v.is_empty() {
            return v;
        }
    }
    let out = std::process::Command::new(repo_root().join("scripts").join(script))
        .arg("start")
        .output()
        .unwrap_or_else(|e| panic!("run scripts/{script} start: {e}"));
    assert!(
        out.status.success(),
        "scripts/{script} start failed (it installs the Debian package and starts a private \
         server on 127.0.0.1; scripts/test runs it): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .last()
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// ejabberd's HOST:PORT, with users 1..=600 and 20001..=21600 registered (the tests that
/// count chats exactly use the second range, which no example and no offline chat touches).
pub fn xmpp() -> &'static str {
    static ADDR: OnceLock<String> = OnceLock::new();
    ADDR.get_or_init(|| {
        let addr = service("HEADROOM_XMPP_ADDR", "ejabberd.sh");
        for (first, last) in [("1", "600"), ("20001", "21600")] {
            let out = std::process::Command::new(repo_root().join("scripts/ejabberd.sh"))
                .args(["register", first, last])
                .output()
                .expect("scripts/ejabberd.sh register");
            assert!(
                out.status.success(),
                "scripts/ejabberd.sh register {first} {last} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(addr.starts_with("127.0.0.1:"), "ejabberd at {addr}");
        addr
    })
}

/// PostgreSQL's (host, port, user, password, database) from `HEADROOM_PG_URL`.
pub fn pg() -> (String, String, String, String, String) {
    let url = service("HEADROOM_PG_URL", "postgres.sh");
    let rest = url.strip_prefix("postgres://").expect("postgres:// URL");
    let (userinfo, hostpart) = rest.split_once('@').unwrap();
    let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
    let (addr, db) = hostpart.split_once('/').unwrap();
    let (host, port) = addr.rsplit_once(':').unwrap();
    assert_eq!(host, "127.0.0.1");
    (
        host.into(),
        port.into(),
        user.into(),
        password.into(),
        db.split('?').next().unwrap().into(),
    )
}

// ---- `headroom agent` processes a test starts itself ----

/// A `headroom agent` a test started on 127.0.0.1 (port chosen by the system), killed when
/// dropped.
pub struct Agent {
    pub child: Child,
    /// HOST:PORT it listens on.
    pub addr: String,
    _cwd: Option<tempfile::TempDir>,
}

impl Agent {
    /// Sends this agent a hand-made job of `spec` (one segment, no preflight) straight from the
    /// crate's controller, as an attacker or a hand-written client would, with `token`.
    pub fn run_hand_made_job(
        &self,
        token: &str,
        spec: headroom_core::spec::RunSpec,
        opts: headroom_dist::ControllerOpts,
    ) -> Result<headroom_dist::DistOutcome, headroom_dist::DistError> {
        let job = headroom_dist::Job {
            spec,
            preflight: false,
            segment_index: 0,
            segment_count: 1,
            start_at: std::time::SystemTime::now(),
        };
        let addrs = [headroom_dist::AgentAddr {
            name: "test".into(),
            endpoint: format!("http://{}", self.addr),
            pin: None,
        }];
        headroom_dist::run_controller(
            &addrs,
            token,
            &job,
            opts,
            Arc::new(AtomicBool::new(false)),
            &mut |_| {},
        )
    }

    /// An agent whose stderr goes to the test's.
    pub fn start(token: &str) -> Agent {
        Agent::spawn(token, Stdio::inherit(), false)
    }

    /// An agent whose stderr the test reads (`child.stderr`).
    pub fn start_capturing(token: &str) -> Agent {
        Agent::spawn(token, Stdio::piped(), false)
    }

    /// An agent working in an empty directory of its own, so none of the controller's files
    /// are at hand.
    pub fn start_in_empty_dir(token: &str) -> Agent {
        Agent::spawn(token, Stdio::inherit(), true)
    }

    fn spawn(token: &str, stderr: Stdio, own_dir: bool) -> Agent {
        let cwd = own_dir.then(|| tempfile::tempdir().unwrap());
        let mut cmd = headroom();
        cmd.args(["agent", "--listen", "127.0.0.1:0"])
            .env("HEADROOM_TOKEN", token)
            .stdout(Stdio::piped())
            .stderr(stderr);
        if let Some(d) = &cwd {
            cmd.current_dir(d.path());
        }
        let mut child = cmd.spawn().expect("spawn headroom agent");
        let addr = agent_address(&mut child, "the agent");
        Agent {
            child,
            addr,
            _cwd: cwd,
        }
    }

    /// Sends `sig` to the agent.
    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, sig);
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
