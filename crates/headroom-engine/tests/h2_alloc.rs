//! HTTP/2 users allocate nothing per request once warm, cookies and all: nginx (h2c, 1 worker)
//! sets a cookie on every reply, every stream captures its head (per stream: they interleave),
//! the jar stores the cookie, and every request sends it back as its `cookie` field. A run of
//! 20x more requests makes (almost) no more allocations. Needs nginx (scripts/test installs
//! Debian's nginx-light).

use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use headroom_core::{Http2Options, LoadModel, ProtoCounter};

mod common;

#[global_allocator]
static GLOBAL: headroom_testkit::CountingAlloc = headroom_testkit::CountingAlloc;

/// nginx speaking h2c on a free loopback port, killed (and its directory removed) on drop.
struct Nginx {
    addr: SocketAddr,
    dir: std::path::PathBuf,
    child: Child,
}

impl Nginx {
    fn start() -> Nginx {
        let bin = ["/usr/sbin/nginx", "/usr/bin/nginx"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
            .expect("nginx is not installed: run scripts/test (it installs nginx-light)");
        for attempt in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .unwrap()
                .port();
            let dir = std::env::temp_dir().join(format!(
                "headroom-h2-alloc-{}-{attempt}-{port}",
                std::process::id()
            ));
            std::fs::create_dir_all(&dir).unwrap();
            let d = dir.display();
            let conf = format!(
                r#"daemon off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  keepalive_requests 1000000;
  http2_max_concurrent_streams 128;
  client_body_temp_path {d}; proxy_temp_path {d}; fastcgi_temp_path {d};
  uwsgi_temp_path {d}; scgi_temp_path {d};
  server {{
    listen 127.0.0.1:{port} http2;
    location / {{ add_header Set-Cookie "sid=$connection; Path=/" always; return 200 "ok\n"; }}
  }}
}}
"#
            );
            std::fs::write(dir.join("nginx.conf"), conf).unwrap();
            let mut child = Command::new(bin)
                .args(["-p", &d.to_string(), "-c", &format!("{d}/nginx.conf"), "-e"])
                .arg(dir.join("error.log"))
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start nginx");
            let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
            let t = Instant::now();
            while t.elapsed() < Duration::from_secs(10) {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                if TcpStream::connect(addr).is_ok() {
                    return Nginx { addr, dir, child };
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_dir_all(&dir);
            eprintln!("nginx did not start on {addr}: {err}");
        }
        panic!("nginx did not start after 5 tries");
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Allocations and counters of `requests` on 2 users x 4 streams.
fn run(addr: SocketAddr, requests: u64) -> (u64, headroom_metrics::Counters) {
    let model = LoadModel::Closed {
        users: 2,
        per_user: None,
        think: None,
    };
    let mut p = common::plan(addr, model, 1);
    p.http2 = Some(Http2Options { streams: 4 });
    p.agent.cookies = true;
    p.stop.duration = Some(Duration::from_secs(60));
    p.stop.requests = Some(requests);
    // One interval for the whole run: snapshots allocate, and they are not per request.
    p.interval = Duration::from_secs(60);
    let before = headroom_testkit::process_allocs();
    let out = common::run(&p);
    let after = headroom_testkit::process_allocs();
    let c = out.total.counters;
    assert_eq!(c.responses, requests, "{c:?}");
    assert_eq!(c.errors_total(), 0, "{c:?}");
    (after - before, c)
}

#[test]
fn http2_users_with_cookies_allocate_nothing_per_request_once_warm() {
    let ng = Nginx::start();
    run(ng.addr, 500); // warm up lazily initialised state
    let (small, _) = run(ng.addr, 2_000);
    let (large, c) = run(ng.addr, 40_000);
    // Every reply stored its cookie: the jar and the per-stream capture were in use throughout.
    assert_eq!(c.proto[ProtoCounter::HttpCookiesStored.index()], 40_000);
    let extra = large.saturating_sub(small);
    assert!(
        extra < 100,
        "40,000 HTTP/2 requests with cookies made {large} allocations against {small} for 2,000: {extra} extra"
    );
}
