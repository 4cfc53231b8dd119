//! nginx (Debian's nginx-light 1.22: ssl and http_v2 built in) with TLS, HTTP/2 over TLS (ALPN
//! `h2`) or h2c, one variant per instance, for the TLS and HTTP/2 client tests:
//!
//! ```ignore
//! let pki = Pki::new();
//! let ng = Nginx::builder().tls(&pki.localhost).http2(true).start();   // https + h2 (ALPN)
//! let ng = Nginx::builder().h2c(true).start();                         // h2c, prior knowledge
//! let ng = Nginx::builder().tls(&pki.expired).start();                 // a bad certificate
//! let ng = Nginx::builder().tls(&pki.localhost).tls_protocols("TLSv1.3").start();
//! let ng = Nginx::builder().tls(&pki.localhost).http2(true).keepalive_requests(3).start();
//! ng.url("/");  ng.logged_protocol("HTTP/2.0");  ng.logged_reused();  ng.logged_connections();
//! ```
//!
//! What each variant does on the wire (checked by crates/headroom-run/tests/tls_servers.rs with nghttp, curl and
//! openssl s_client):
//! - `keepalive_requests(N)`: HTTP/1.1: the Nth response carries `Connection: close` and nginx
//!   closes. HTTP/2: after the Nth stream nginx sends GOAWAY(NO_ERROR, last_stream_id = the
//!   Nth stream), finishes the streams up to it, and closes; streams opened after it are not
//!   processed (the client must retry them on a new connection).
//! - `GET /rst`: `return 444`. HTTP/2: RST_STREAM(PROTOCOL_ERROR) on that stream, the connection
//!   stays up. HTTP/1.1: the connection is closed with no response at all.
//! - `POST /` with a body larger than the stream window (64 KiB): nginx answers 200 at once,
//!   then sends RST_STREAM(NO_ERROR) for the rest of the body (RFC 9113 section 8.1: the client
//!   must keep the response).
//! - `max_concurrent_streams(1)`: a client that opens more streams than the server's SETTINGS
//!   allow (e.g. before it has read them, as nghttp does) gets RST_STREAM(REFUSED_STREAM) for
//!   the excess. Timing-dependent: a stream that arrives after an earlier one has finished is
//!   served (nghttp with 3 URLs: 2 processed, stream 17 refused), so no test pins it.
//! - `/static/64k.bin`, `/static/1m.bin`: files of 65,536 and 1,048,576 bytes of 'x' (flow
//!   control: both exceed the initial 65,535-byte window).
//! - `/missing` 404, `/fail` 503, everything else `200 "hello from nginx\n"`.
//!
//! Every instance logs `$remote_addr $server_protocol $ssl_session_reused $ssl_protocol $status
//! $connection $request_uri` ([`AccessLog`]), with `ssl_session_cache shared:SSL:1m` and
//! `ssl_session_tickets on` (both resumption kinds; `session_resumption(false)` turns both off),
//! `keepalive_requests 1000000` unless told otherwise (in 1.22 it also bounds HTTP/2 streams per
//! connection: `http2_max_requests` is obsolete there), `http2_max_concurrent_streams 128`.
//! nginx 1.22's default `ssl_protocols` lacks TLSv1.3 (added to the default in 1.23.4), so it is
//! always set: `TLSv1.2 TLSv1.3` unless `tls_protocols` says otherwise. An h2c listener in 1.22
//! speaks only HTTP/2 with prior knowledge (no HTTP/1.1, no `Upgrade: h2c`).

use std::io::Read;
use std::net::SocketAddr;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::servers::access_log::{read_settled, settled_text, AccessLog, LogLine};
use crate::servers::net::{free_port, probe_token};
use crate::servers::nginx::{find_nginx, Nginx};
use crate::servers::pki::CertFiles;

/// What the next [`TlsNginx`] will be; see the module doc.
#[derive(Clone, Debug)]
pub struct NginxBuilder {
    tls: Option<CertFiles>,
    http2: bool,
    h2c: bool,
    tls_protocols: String,
    keepalive_requests: u64,
    max_concurrent_streams: u32,
    session_resumption: bool,
    upstream: Option<std::net::SocketAddr>,
    /// More `server` directives (`{dir}` and `{port}` replaced) and the format of a second
    /// access log, `site.log`, for the requests they serve.
    site: Option<(String, String)>,
}

impl Nginx {
    /// An nginx with TLS and/or HTTP/2; `Nginx::start()` stays the plain HTTP/1.1 one.
    pub fn builder() -> NginxBuilder {
        NginxBuilder {
            tls: None,
            http2: false,
            h2c: false,
            tls_protocols: "TLSv1.2 TLSv1.3".into(),
            keepalive_requests: 1_000_000,
            max_concurrent_streams: 128,
            session_resumption: true,
            upstream: None,
            site: None,
        }
    }
}

impl NginxBuilder {
    /// Serve TLS with this certificate and key (`listen PORT ssl`).
    pub fn tls(mut self, cert: &CertFiles) -> Self {
        self.tls = Some(cert.clone());
        self
    }

    /// With `tls`: offer `h2` by ALPN (and `http/1.1`). Without `tls`: same as `h2c(true)`.
    pub fn http2(mut self, on: bool) -> Self {
        self.http2 = on;
        self
    }

    /// Without `tls`: the listener speaks HTTP/2 in cleartext, prior knowledge only.
    pub fn h2c(mut self, on: bool) -> Self {
        self.h2c = on;
        self
    }

    /// nginx's `ssl_protocols`, e.g. `"TLSv1.3"` (default `"TLSv1.2 TLSv1.3"`).
    pub fn tls_protocols(mut self, protocols: &str) -> Self {
        self.tls_protocols = protocols.into();
        self
    }

    /// Requests per connection before nginx closes it (HTTP/2: GOAWAY); default 1,000,000.
    pub fn keepalive_requests(mut self, n: u64) -> Self {
        self.keepalive_requests = n;
        self
    }

    /// `http2_max_concurrent_streams` (default 128).
    pub fn max_concurrent_streams(mut self, n: u32) -> Self {
        self.max_concurrent_streams = n;
        self
    }

    /// Session cache and tickets both on (default) or both off (every handshake is full).
    pub fn session_resumption(mut self, on: bool) -> Self {
        self.session_resumption = on;
        self
    }

    /// Pass `/sleep/` to this HTTP/1.1 server (`proxy_pass`), e.g. headroom serve, whose
    /// `/sleep/MS` answers after MS milliseconds: slow replies behind an HTTP/2 front.
    pub fn upstream(mut self, addr: std::net::SocketAddr) -> Self {
        self.upstream = Some(addr);
        self
    }

    /// More `server` directives (`{dir}` and `{port}` become the instance's directory and
    /// port), logged to `site.log` in `log_format` ([`TlsNginx::site_log`]): a small site
    /// (a login, a cookie-protected page, redirects) behind this nginx's TLS or HTTP/2.
    pub fn site(mut self, directives: &str, log_format: &str) -> Self {
        self.site = Some((directives.into(), log_format.into()));
        self
    }

    /// Start it on a free loopback port (5 tries on port clashes), killed on drop.
    pub fn start(&self) -> TlsNginx {
        let mut last = String::new();
        for _ in 0..5 {
            match self.try_start() {
                Ok(ng) => return ng,
                Err(e) => last = e,
            }
        }
        panic!("nginx ({self:?}) did not start after 5 tries: {last}");
    }

    fn config(&self, d: &Path, port: u16, ready_port: u16, token: &str) -> String {
        let mut listen = format!("listen 127.0.0.1:{port} backlog=4096");
        let mut tls = String::new();
        if let Some(c) = &self.tls {
            listen.push_str(" ssl");
            tls = format!(
                "ssl_certificate {}; ssl_certificate_key {}; ssl_protocols {};",
                c.cert.display(),
                c.key.display(),
                self.tls_protocols
            );
        }
        if self.http2 || self.h2c {
            listen.push_str(" http2");
        }
        let resumption = if self.session_resumption {
            "ssl_session_cache shared:SSL:1m; ssl_session_tickets on;"
        } else {
            "ssl_session_cache off; ssl_session_tickets off;"
        };
        let upstream = match self.upstream {
            Some(a) => format!(
                "location /sleep/ {{ proxy_pass http://{a}; proxy_http_version 1.1; \
                 proxy_set_header Connection \"\"; }}"
            ),
            None => String::new(),
        };
        let (site, site_log) = match &self.site {
            Some((directives, format)) => (
                directives
                    .replace("{dir}", &d.display().to_string())
                    .replace("{port}", &port.to_string()),
                format!(
                    "log_format site '{format}'; access_log {}/site.log site;",
                    d.display()
                ),
            ),
            None => (String::new(), String::new()),
        };
        let d = d.display();
        format!(
            r#"daemon off;
worker_processes 1;
worker_rlimit_nofile 20000;
pid {d}/nginx.pid;
error_log {d}/error.log;
events {{ worker_connections 20000; }}
http {{
  log_format tls '$remote_addr $server_protocol $ssl_session_reused $ssl_protocol $status $connection $request_uri';
  access_log {d}/access.log tls;
  log_format negotiated '$connection $ssl_protocol $ssl_cipher $ssl_curve $server_protocol';
  access_log {d}/negotiated.log negotiated;
  {site_log}
  keepalive_requests {kr};
  keepalive_timeout 120s;
  http2_max_concurrent_streams {mcs};
  {resumption}
  ssl_session_timeout 1h;
  client_body_temp_path {d}; proxy_temp_path {d}; fastcgi_temp_path {d};
  uwsgi_temp_path {d}; scgi_temp_path {d};
  default_type text/plain;
  server {{
    {listen};
    {tls}
    location / {{ return 200 "hello from nginx\n"; }}
    location /missing {{ return 404; }}
    location /fail {{ return 503; }}
    location /rst {{ return 444; }}
    location /static/ {{ root {d}/www; }}
    {upstream}
    {site}
  }}
  server {{
    listen 127.0.0.1:{ready_port};
    location = /__headroom_ready {{ access_log off; return 200 "{token}"; }}
  }}
}}
"#,
            kr = self.keepalive_requests,
            mcs = self.max_concurrent_streams,
        )
    }

    fn try_start(&self) -> Result<TlsNginx, String> {
        let bin = find_nginx();
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        // nginx's worker runs as nobody when started by root: the static files must be readable.
        let www = d.join("www/static");
        std::fs::create_dir_all(&www).unwrap();
        std::fs::write(www.join("64k.bin"), vec![b'x'; 65_536]).unwrap();
        std::fs::write(www.join("1m.bin"), vec![b'x'; 1_048_576]).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            for p in [d.to_path_buf(), d.join("www"), www] {
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
        }
        let port = free_port();
        let ready_port = free_port();
        if port == ready_port {
            return Err("the same free port twice".into());
        }
        let token = format!("ready-{}-{port}", std::process::id());
        std::fs::write(
            d.join("nginx.conf"),
            self.config(d, port, ready_port, &token),
        )
        .unwrap();
        let ds = d.display().to_string();
        let mut child = Command::new(bin)
            .args(["-p", &ds, "-c", &format!("{ds}/nginx.conf"), "-e"])
            .arg(d.join("error.log"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start nginx");
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let ready: SocketAddr = format!("127.0.0.1:{ready_port}").parse().unwrap();
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(status)) = child.try_wait() {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                let log = std::fs::read_to_string(d.join("error.log")).unwrap_or_default();
                return Err(format!(
                    "nginx exited at start on {addr} ({status}): {err} {log}"
                ));
            }
            // nginx binds every listener before it serves any: the token on the ready port
            // proves the TLS / h2c port is this instance's too.
            match probe_token(ready) {
                Some(body) if body.contains(&token) => {
                    return Ok(TlsNginx {
                        nginx: Nginx { addr, dir, child },
                        tls: self.tls.is_some(),
                        cert: self.tls.as_ref().map(|c| c.cert.clone()),
                    });
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
}

/// A running nginx from [`NginxBuilder::start`]; derefs to [`Nginx`] (`addr`, `dir`,
/// `logged()`, `logged_sources()`), killed on drop.
pub struct TlsNginx {
    pub nginx: Nginx,
    pub tls: bool,
    /// The certificate it serves, if any.
    pub cert: Option<PathBuf>,
}

impl Deref for TlsNginx {
    type Target = Nginx;
    fn deref(&self) -> &Nginx {
        &self.nginx
    }
}

impl TlsNginx {
    /// `https://127.0.0.1:PORT{path}` with TLS (the good certificate names 127.0.0.1 too),
    /// `http://127.0.0.1:PORT{path}` without.
    pub fn url(&self, path: &str) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}{path}", self.addr)
    }

    /// The URL by name, `https://localhost:PORT{path}` (SNI and a DNS-name check). nginx
    /// listens on 127.0.0.1 only: a client that tries ::1 first must fall back.
    pub fn url_localhost(&self, path: &str) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://localhost:{}{path}", self.addr.port())
    }

    /// The master process's pid: a test checks it is gone after drop.
    pub fn pid(&self) -> u32 {
        self.nginx.child.id()
    }

    /// Lines of `site.log` ([`NginxBuilder::site`]), once nginx has written them all.
    pub fn site_log(&self) -> Vec<String> {
        settled_text(&self.dir.path().join("site.log"))
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// nginx's error log (handshake failures are logged there at `info`).
    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }
}

impl TlsNginx {
    /// What nginx says each request's connection negotiated, one line a request, as
    /// `$connection $ssl_protocol $ssl_cipher $ssl_curve $server_protocol` (OpenSSL's names:
    /// `7 TLSv1.3 TLS_AES_256_GCM_SHA384 X25519 HTTP/2.0`), in a log of its own so that
    /// [`AccessLog`]'s format stays as it is.
    pub fn negotiated_log(&self) -> Vec<String> {
        let path = self.dir.path().join("negotiated.log");
        // Settled as the access log is (nginx writes both at each request's end).
        let _ = self.log_lines();
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// The one combination nginx logged for every request, `(protocol, suite, group, http)`,
    /// with the suite and the group in IANA's names (as headroom reports them) and HTTP/2.0 as
    /// `HTTP/2`. Panics if nginx logged nothing or several combinations.
    pub fn negotiated(&self) -> (String, String, String, String) {
        let lines = self.negotiated_log();
        assert!(!lines.is_empty(), "nginx logged nothing");
        let set: std::collections::BTreeSet<(String, String, String, String)> = lines
            .iter()
            .map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                assert_eq!(f.len(), 5, "unexpected line: {l}");
                let http = match f[4] {
                    "HTTP/2.0" => "HTTP/2",
                    p => p,
                };
                (
                    f[1].to_string(),
                    iana_suite(f[2]),
                    iana_group(f[3]),
                    http.to_string(),
                )
            })
            .collect();
        assert_eq!(set.len(), 1, "nginx logged several combinations: {set:?}");
        set.into_iter().next().unwrap()
    }
}

/// OpenSSL's cipher names (nginx's `$ssl_cipher`) as IANA's, for the suites rustls offers.
fn iana_suite(openssl: &str) -> String {
    let name = match openssl {
        "ECDHE-ECDSA-AES256-GCM-SHA384" => "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        "ECDHE-ECDSA-AES128-GCM-SHA256" => "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        "ECDHE-ECDSA-CHACHA20-POLY1305" => "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        "ECDHE-RSA-AES256-GCM-SHA384" => "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        "ECDHE-RSA-AES128-GCM-SHA256" => "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        "ECDHE-RSA-CHACHA20-POLY1305" => "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        // TLS 1.3 suites have the same name in both.
        other => other,
    };
    name.to_string()
}

/// OpenSSL's group names (`$ssl_curve`) as IANA's.
fn iana_group(openssl: &str) -> String {
    match openssl {
        "prime256v1" => "secp256r1".into(),
        other => other.into(),
    }
}

impl AccessLog for TlsNginx {
    fn log_lines(&self) -> Vec<LogLine> {
        read_settled(&self.dir.path().join("access.log"))
    }
}
