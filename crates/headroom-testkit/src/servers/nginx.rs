//! nginx (Debian's nginx-light) with one worker on 127.0.0.1, its own prefix and access log;
//! [`crate::servers::tls_nginx`] adds TLS and HTTP/2.

use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::servers::net::{free_port, probe_token};

/// nginx (Debian's) with one worker on 127.0.0.1, its own prefix and access log, killed on drop.
pub struct Nginx {
    pub addr: SocketAddr,
    pub dir: tempfile::TempDir,
    pub(crate) child: Child,
}

pub(crate) fn find_nginx() -> PathBuf {
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

    /// The master process's pid (its worker is its child).
    pub fn pid(&self) -> u32 {
        self.child.id()
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
        crate::servers::net::stop_child(&mut self.child);
    }
}

/// nginx gzipping a text file of known size at `/body.txt`, logging each request's
/// Accept-Encoding and the ratio nginx's gzip achieved (`-` when it sent the body as it is):
/// the server and the file's size (what a decoded body must come to).
pub fn gzip_text_site() -> (Nginx, u64) {
    let ng = Nginx::start_with(
        r#"
    gzip on; gzip_types text/plain; gzip_min_length 0;
    location = /body.txt { root {dir}; default_type text/plain; }
    "#,
        "$request [$http_accept_encoding] $gzip_ratio",
    );
    let mut text = String::new();
    for i in 0..3000 {
        text.push_str(&format!(
            "{i:>6} the quick brown fox jumps over the lazy dog\n"
        ));
    }
    std::fs::write(ng.dir().join("body.txt"), &text).unwrap();
    (ng, text.len() as u64)
}
