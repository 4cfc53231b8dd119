//! h2o (Debian's 2.2.5), a second HTTP/2 implementation beside nginx, on loopback:
//!
//! ```ignore
//! let h = H2o::start(&pki.localhost);
//! h.tls_url("/")   // https://127.0.0.1:P/  TLS 1.2/1.3, ALPN h2 and http/1.1
//! h.h2c_url("/")   // http://127.0.0.1:Q/   HTTP/1.1, h2c by prior knowledge, and Upgrade: h2c
//! h.logged_protocol("HTTP/2.0");  h.logged_reused();
//! ```
//!
//! Every path answers `200 "hello from h2o\n"` (an mruby handler: h2o's workers run as nobody
//! under root and read no file) except `/missing` (404). The access log has the same fields as
//! the nginx harness's ([`AccessLog`]; h2o's `%H` says `HTTP/2`, normalized to `HTTP/2.0`).
//! Session resumption: h2o's default (an internal session cache and tickets). One thread.

use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::servers::access_log::{read_settled, AccessLog, LogLine};
use crate::servers::net::{free_port, probe_token};
use crate::servers::pki::CertFiles;

/// A running h2o, killed on drop.
pub struct H2o {
    /// The TLS listener.
    pub tls_addr: SocketAddr,
    /// The cleartext listener (HTTP/1.1 and h2c).
    pub h2c_addr: SocketAddr,
    pub dir: tempfile::TempDir,
    child: Child,
}

fn find_h2o() -> PathBuf {
    for p in ["/usr/bin/h2o", "/usr/sbin/h2o", "/usr/local/bin/h2o"] {
        if Path::new(p).exists() {
            return PathBuf::from(p);
        }
    }
    panic!(
        "h2o is not installed. Run scripts/test (it installs Debian's h2o without starting its \
         service), or: apt-get install -y h2o"
    );
}

impl H2o {
    /// Start h2o with `cert` on a free loopback port for TLS and another for cleartext (5 tries
    /// on port clashes).
    pub fn start(cert: &CertFiles) -> H2o {
        let mut last = String::new();
        for _ in 0..5 {
            match H2o::try_start(cert) {
                Ok(h) => return h,
                Err(e) => last = e,
            }
        }
        panic!("h2o did not start after 5 tries: {last}");
    }

    fn try_start(cert: &CertFiles) -> Result<H2o, String> {
        let bin = find_h2o();
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display().to_string();
        let (tls_port, plain_port) = (free_port(), free_port());
        if tls_port == plain_port {
            return Err("the same free port twice".into());
        }
        let token = format!("ready-{}-{plain_port}", std::process::id());
        // As root h2o must be told whom to run as; it opens the logs and reads the keys first.
        // No pid-file: h2o writes it after dropping privileges; we hold the child anyway.
        // ocsp-update-interval 0: no OCSP fetcher (the test CA has no responder).
        let user = if unsafe { libc::geteuid() } == 0 {
            "user: nobody\n"
        } else {
            ""
        };
        let conf = format!(
            r#"{user}error-log: {d}/error.log
num-threads: 1
http2-max-concurrent-requests-per-connection: 128
access-log:
  path: {d}/access.log
  format: "%h %H %{{ssl.session-reused}}x %{{ssl.protocol-version}}x %s %{{connection-id}}x %U%q"
listen:
  host: 127.0.0.1
  port: {tls_port}
  ssl:
    certificate-file: {cert}
    key-file: {key}
    minimum-version: TLSv1.2
    ocsp-update-interval: 0
listen:
  host: 127.0.0.1
  port: {plain_port}
hosts:
  default:
    paths:
      /__headroom_ready:
        access-log: /dev/null
        mruby.handler: |
          Proc.new do |env|
            [200, {{"content-type" => "text/plain"}}, ["{token}"]]
          end
      /missing:
        mruby.handler: |
          Proc.new do |env|
            [404, {{"content-type" => "text/plain"}}, ["not here\n"]]
          end
      /:
        mruby.handler: |
          Proc.new do |env|
            [200, {{"content-type" => "text/plain"}}, ["hello from h2o\n"]]
          end
"#,
            cert = cert.cert.display(),
            key = cert.key.display(),
        );
        std::fs::write(dir.path().join("h2o.conf"), conf).unwrap();
        let mut child = Command::new(bin)
            .arg("-c")
            .arg(dir.path().join("h2o.conf"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start h2o");
        let tls_addr: SocketAddr = format!("127.0.0.1:{tls_port}").parse().unwrap();
        let h2c_addr: SocketAddr = format!("127.0.0.1:{plain_port}").parse().unwrap();
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(status)) = child.try_wait() {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                let log = std::fs::read_to_string(dir.path().join("error.log")).unwrap_or_default();
                return Err(format!("h2o exited at start ({status}): {err} {log}"));
            }
            // h2o binds both listeners before it serves: the token proves both are its own.
            match probe_token(h2c_addr) {
                Some(body) if body.contains(&token) => {
                    return Ok(H2o {
                        tls_addr,
                        h2c_addr,
                        dir,
                        child,
                    })
                }
                _ => thread::sleep(Duration::from_millis(20)),
            }
        }
        let _ = child.kill();
        let _ = child.wait();
        Err("h2o did not answer its ready token within 10 s".into())
    }

    pub fn tls_url(&self, path: &str) -> String {
        format!("https://{}{path}", self.tls_addr)
    }

    pub fn h2c_url(&self, path: &str) -> String {
        format!("http://{}{path}", self.h2c_addr)
    }

    /// The pid of h2o's (only) process: a test checks it is gone after drop.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl AccessLog for H2o {
    /// The load's lines only. h2o 2.2.5 ignores the per-path `access-log: /dev/null` of the
    /// readiness path, so its probe (an HTTP/1.0 request on the cleartext listener) is logged
    /// too: it is left out here, as nginx's harness never logs it.
    fn log_lines(&self) -> Vec<LogLine> {
        read_settled(&self.dir.path().join("access.log"))
            .into_iter()
            .filter(|l| l.uri != "/__headroom_ready")
            .collect()
    }
}

impl Drop for H2o {
    fn drop(&mut self) {
        crate::servers::net::stop_child(&mut self.child);
    }
}
