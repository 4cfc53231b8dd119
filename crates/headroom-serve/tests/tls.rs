//! TLS in every architecture (`ServerConfig::tls`), against an in-process rustls client on
//! loopback: keep-alive and pipelined requests with exact bodies, session resumption (TLS 1.3
//! tickets, TLS 1.2 tickets and session IDs) as the client sees it, handshake failures that
//! close one connection and are counted, the handshake timeout, certificate files, and the
//! one-line errors of bad files. Every loop is bounded in count; every read has a timeout.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{connect_addr, wait_stats, READ_TIMEOUT};
use headroom_serve::{start, Arch, Poller, RunningServer, Runtime, ServerConfig, TlsSource};
use rustls::client::Resumption;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, HandshakeKind, RootCertStore, StreamOwned};

const BODY: &[u8] = b"hello from headroom\n";

/// Every architecture (and every reactor poller) under test, with a name for messages.
fn arches() -> Vec<(&'static str, Arch)> {
    vec![
        ("thread-per-conn", Arch::ThreadPerConn),
        ("pool", Arch::Pool { handlers: 4 }),
        (
            "reactor-epoll",
            Arch::Reactor {
                poller: Poller::Epoll,
            },
        ),
        (
            "reactor-poll",
            Arch::Reactor {
                poller: Poller::Poll,
            },
        ),
        (
            "reactor-select",
            Arch::Reactor {
                poller: Poller::Select,
            },
        ),
        (
            "async-multi",
            Arch::Async {
                runtime: Runtime::Multi,
            },
        ),
        (
            "async-current-thread",
            Arch::Async {
                runtime: Runtime::CurrentThread,
            },
        ),
    ]
}

fn tls_config(arch: Arch, tls: TlsSource) -> ServerConfig {
    ServerConfig {
        arch,
        workers: 2,
        body: BODY.to_vec(),
        tls: Some(tls),
        ..ServerConfig::default()
    }
}

fn start_self_signed(name: &str, arch: Arch) -> RunningServer {
    start(tls_config(arch, TlsSource::SelfSigned)).unwrap_or_else(|e| panic!("{name}: start: {e}"))
}

/// A client that trusts exactly the server's certificate, offering `versions` and ALPN
/// `http/1.1`, with rustls' default in-memory resumption (or `resumption`).
fn client_config(
    s: &RunningServer,
    versions: &[&'static rustls::SupportedProtocolVersion],
    resumption: Option<Resumption>,
) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    let der = s.tls().expect("a TLS server").certificate_der().to_vec();
    roots
        .add(CertificateDer::from(der))
        .expect("the certificate as a root");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut c = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    c.alpn_protocols = vec![b"http/1.1".to_vec()];
    if let Some(r) = resumption {
        c.resumption = r;
    }
    Arc::new(c)
}

fn tls13(s: &RunningServer) -> Arc<ClientConfig> {
    client_config(s, &[&rustls::version::TLS13], None)
}

/// A TLS client connection that reads HTTP responses (bounded by [`READ_TIMEOUT`]).
struct Client {
    tls: StreamOwned<ClientConnection, TcpStream>,
    buf: Vec<u8>,
}

struct Response {
    status: u16,
    close: bool,
    body: Vec<u8>,
}

impl Client {
    /// Connect and complete the handshake (`name`: the name the certificate must cover).
    fn connect(addr: SocketAddr, config: &Arc<ClientConfig>, name: &str) -> Client {
        let sock = connect_addr(addr);
        let server_name = ServerName::try_from(name.to_string()).unwrap();
        let conn = ClientConnection::new(Arc::clone(config), server_name).unwrap();
        let mut tls = StreamOwned::new(conn, sock);
        // Bounded: every turn does I/O under the read timeout, and a handshake is a few turns.
        for _ in 0..100 {
            if !tls.conn.is_handshaking() {
                break;
            }
            tls.conn
                .complete_io(&mut tls.sock)
                .unwrap_or_else(|e| panic!("handshake: {e}"));
        }
        assert!(!tls.conn.is_handshaking(), "handshake did not complete");
        assert_eq!(tls.conn.alpn_protocol(), Some(&b"http/1.1"[..]));
        Client {
            tls,
            buf: Vec::new(),
        }
    }

    fn kind(&self) -> Option<HandshakeKind> {
        self.tls.conn.handshake_kind()
    }

    fn send(&mut self, bytes: &[u8]) {
        self.tls.write_all(bytes).expect("send");
        self.tls.flush().expect("flush");
    }

    fn get(&mut self, path: &str) -> Response {
        self.send(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes());
        self.response()
    }

    fn fill(&mut self) -> usize {
        let mut chunk = [0u8; 65536];
        match self.tls.read(&mut chunk) {
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                n
            }
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => 0,
            Err(e) => panic!("read: {e}"),
        }
    }

    fn response(&mut self) -> Response {
        // Bounded: each turn reads more bytes (a read that returns none fails the test).
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut r = httparse::Response::new(&mut headers);
            if let httparse::Status::Complete(head) = r.parse(&self.buf).expect("valid response") {
                let status = r.code.unwrap();
                let find = |name: &str| {
                    r.headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case(name))
                        .map(|h| String::from_utf8_lossy(h.value).into_owned())
                };
                let len: usize = find("content-length").unwrap().parse().unwrap();
                let close = find("connection").as_deref() == Some("close");
                while self.buf.len() < head + len {
                    assert!(self.fill() > 0, "connection closed mid-body");
                }
                let body = self.buf[head..head + len].to_vec();
                self.buf.drain(..head + len);
                return Response {
                    status,
                    close,
                    body,
                };
            }
            assert!(self.fill() > 0, "connection closed before a response");
        }
    }

    /// End the connection the polite way (close_notify, then FIN).
    fn close(mut self) {
        self.tls.conn.send_close_notify();
        let _ = self.tls.flush();
    }
}

fn expect_body(name: &str, r: &Response, body: &[u8]) {
    assert_eq!(r.status, 200, "{name}");
    assert!(!r.close, "{name}: keep-alive");
    assert_eq!(r.body.len(), body.len(), "{name}: body length");
    assert!(r.body == body, "{name}: body bytes");
}

/// The server's `/status`, fetched over TLS with `config` (after a first request, so that the
/// counts of this connection's handshake are published: they may lag by one round).
fn status(s: &RunningServer, config: &Arc<ClientConfig>) -> serde_json::Value {
    let mut c = Client::connect(s.local_addr(), config, "localhost");
    expect_body("status", &c.get("/"), BODY);
    let r = c.get("/status");
    assert_eq!(r.status, 200);
    c.close();
    serde_json::from_slice(&r.body).expect("status JSON")
}

/// Send `bytes` on a plain TCP connection and read until the server ends it; returns what
/// came back. The server must end it within [`READ_TIMEOUT`].
fn plain_exchange(addr: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut c = connect_addr(addr);
    let _ = c.write_all(bytes);
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    // Bounded: the read timeout, and at most 64 KiB accepted.
    while got.len() < 65536 {
        match c.read(&mut chunk) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return got,
            Err(e) => panic!("the server did not end a broken TLS connection: {e}"),
        }
    }
    panic!("the server sent over 64 KiB to a broken TLS connection");
}

/// Per architecture: 100 keep-alive requests each to `/` and `/bytes/100000` with exact
/// bodies, a pipelined batch, a 1 MiB request body, a resumed second connection, and a plain-HTTP client that fails
/// alone (counted) while a TLS client on another connection goes on being served.
#[test]
fn every_arch_serves_resumes_and_survives_plain_http() {
    let big = vec![b'x'; 100_000];
    for (name, arch) in arches() {
        let s = start_self_signed(name, arch);
        let fp = s.tls().unwrap().fingerprint();
        assert_eq!(fp.len(), 32 * 3 - 1, "{name}: {fp}");
        let config = tls13(&s);

        let mut a = Client::connect(s.local_addr(), &config, "localhost");
        assert_eq!(a.kind(), Some(HandshakeKind::Full), "{name}");
        for i in 0..100 {
            expect_body(&format!("{name} / #{i}"), &a.get("/"), BODY);
            expect_body(
                &format!("{name} /bytes #{i}"),
                &a.get("/bytes/100000"),
                &big,
            );
        }
        // Pipelined: ten requests in one write, answered in order.
        let mut batch = Vec::new();
        for i in 0..10 {
            batch.extend_from_slice(
                format!("GET /bytes/{i} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
            );
        }
        a.send(&batch);
        for i in 0..10 {
            expect_body(&format!("{name} pipelined #{i}"), &a.response(), &big[..i]);
        }
        // A 1 MiB request body (many records per read, skipped by the parser), then a request.
        let body = vec![b'y'; 1 << 20];
        a.send(
            format!(
                "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )
            .as_bytes(),
        );
        a.send(&body);
        expect_body(&format!("{name} POST"), &a.response(), BODY);
        expect_body(&format!("{name} after POST"), &a.get("/"), BODY);
        a.close();

        // The first connection's session (a TLS 1.3 ticket) resumes the second.
        let mut b = Client::connect(s.local_addr(), &config, "localhost");
        assert_eq!(b.kind(), Some(HandshakeKind::Resumed), "{name}: resumed");
        expect_body(name, &b.get("/"), BODY);

        // Plain HTTP on the TLS port: that connection fails, `b` does not notice.
        let got = plain_exchange(s.local_addr(), b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(
            !got.windows(5).any(|w| w == b"HTTP/"),
            "{name}: plain HTTP answered: {got:?}"
        );
        expect_body(name, &b.get("/bytes/100000"), &big);
        b.close();

        let st = wait_stats(&s, |st| {
            st.tls_handshake_failures == 1 && st.tls_handshakes == 2 && st.open == 0
        });
        assert_eq!(st.tls_handshake_failures, 1, "{name}: {st:?}");
        assert_eq!(st.tls_handshakes, 2, "{name}: {st:?}");
        assert_eq!(st.tls_resumed, 1, "{name}: {st:?}");
        assert_eq!(st.requests, 100 + 100 + 10 + 2 + 2, "{name}: {st:?}");

        // /status (over TLS, itself a third handshake) says the same.
        let j = status(&s, &config);
        assert_eq!(j["tls"], true, "{name}: {j}");
        assert_eq!(j["tls_handshake_failures"], 1, "{name}: {j}");
        assert_eq!(j["tls_handshakes"], 3, "{name}: {j}");
        assert_eq!(j["tls_resumed"], 2, "{name}: {j}");
        s.stop();
    }
}

/// Both ways TLS 1.2 resumes (a session ID from the server's cache, a stateless ticket) and
/// TLS 1.3 tickets, as the client sees them.
#[test]
fn resumption_by_session_id_and_by_ticket() {
    for (name, arch) in arches() {
        let s = start_self_signed(name, arch);
        let tls12 = &[&rustls::version::TLS12];
        let id_only = Resumption::in_memory_sessions(16)
            .tls12_resumption(rustls::client::Tls12Resumption::SessionIdOnly);
        let cases = [
            ("tls1.3 ticket", tls13(&s)),
            ("tls1.2 ticket", client_config(&s, tls12, None)),
            ("tls1.2 session id", client_config(&s, tls12, Some(id_only))),
        ];
        for (case, config) in &cases {
            let mut first = Client::connect(s.local_addr(), config, "localhost");
            assert_eq!(first.kind(), Some(HandshakeKind::Full), "{name} {case}");
            expect_body(name, &first.get("/"), BODY);
            first.close();
            let mut again = Client::connect(s.local_addr(), config, "localhost");
            assert_eq!(again.kind(), Some(HandshakeKind::Resumed), "{name} {case}");
            expect_body(name, &again.get("/"), BODY);
            again.close();
        }
        // A client without resumption does full handshakes.
        let none = client_config(&s, &[&rustls::version::TLS13], Some(Resumption::disabled()));
        for _ in 0..2 {
            let c = Client::connect(s.local_addr(), &none, "localhost");
            assert_eq!(c.kind(), Some(HandshakeKind::Full), "{name} no resumption");
            c.close();
        }
        let st = wait_stats(&s, |st| st.tls_handshakes == 8 && st.open == 0);
        assert_eq!(
            (st.tls_handshakes, st.tls_resumed),
            (8, 3),
            "{name}: {st:?}"
        );
        assert_eq!(st.tls_handshake_failures, 0, "{name}: {st:?}");
        s.stop();
    }
}

/// The self-signed certificate covers localhost, 127.0.0.1 and ::1 (the name checked is the
/// client's, whatever address it connected to, so ::1 is checked over IPv4 loopback).
#[test]
fn self_signed_names() {
    let s = start_self_signed(
        "reactor",
        Arch::Reactor {
            poller: Poller::Epoll,
        },
    );
    let config = tls13(&s);
    for name in ["localhost", "127.0.0.1", "::1"] {
        let mut c = Client::connect(s.local_addr(), &config, name);
        expect_body(name, &c.get("/"), BODY);
        c.close();
    }
    s.stop();
}

/// Hostile and broken clients each fail their own connection, counted once; the server goes on
/// serving. Nothing panics.
#[test]
fn broken_handshakes_are_counted_and_isolated() {
    let client_hello_start: &[u8] = &[0x16, 0x03, 0x01, 0x00, 0x05, 0x01, 0x00];
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("plain http", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        (
            "garbage",
            (0..4096u32).map(|i| (i * 7919 % 251) as u8).collect(),
        ),
        // A handshake record announcing 16 KiB that never comes, then the client leaves.
        ("truncated record", vec![0x16, 0x03, 0x01, 0x40, 0x00, 0x01]),
        ("half a client hello", client_hello_start.to_vec()),
        // A fatal alert (handshake_failure) instead of a ClientHello.
        ("alert", vec![0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28]),
        // A record longer than TLS allows.
        ("oversized record", vec![0x16, 0x03, 0x03, 0xff, 0xff, 0x00]),
        ("nothing", Vec::new()),
    ];
    for (name, arch) in arches() {
        let s = start_self_signed(name, arch);
        let config = tls13(&s);
        // A served client stays connected throughout.
        let mut keeper = Client::connect(s.local_addr(), &config, "localhost");
        for (case, bytes) in &cases {
            let mut c = connect_addr(s.local_addr());
            let _ = c.write_all(bytes);
            // The client leaves (or the server already ended it).
            let _ = c.shutdown(std::net::Shutdown::Write);
            let mut rest = Vec::new();
            let _ = c.read_to_end(&mut rest);
            assert!(
                !rest.windows(5).any(|w| w == b"HTTP/"),
                "{name} {case}: answered in plain"
            );
            expect_body(&format!("{name} {case}"), &keeper.get("/"), BODY);
        }
        keeper.close();
        let n = cases.len() as u64;
        let st = wait_stats(&s, |st| st.tls_handshake_failures == n && st.open == 0);
        assert_eq!(st.tls_handshake_failures, n, "{name}: {st:?}");
        assert_eq!(st.tls_handshakes, 1, "{name}: {st:?}");
        s.stop();
    }
}

/// A client that connects and never finishes its handshake is closed at the header timeout
/// (which is the handshake timeout), counted as a timeout and a failed handshake; a pool with
/// one handler serves the next client after it.
#[test]
fn handshake_timeout_frees_the_handler() {
    for (name, mut arch) in arches() {
        if let Arch::Pool { handlers } = &mut arch {
            *handlers = 1;
        }
        let s = start(ServerConfig {
            header_timeout: Some(Duration::from_millis(300)),
            ..tls_config(arch, TlsSource::SelfSigned)
        })
        .unwrap();
        let started = Instant::now();
        // Silent, then half a ClientHello: neither completes.
        let mut silent = connect_addr(s.local_addr());
        let mut partial = connect_addr(s.local_addr());
        partial
            .write_all(&[0x16, 0x03, 0x01, 0x00, 0x40, 0x01])
            .unwrap();
        for (what, c) in [("silent", &mut silent), ("partial", &mut partial)] {
            let mut b = [0u8; 64];
            match c.read(&mut b) {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
                Err(e) => panic!("{name}: {what} client not closed: {e}"),
            }
        }
        let config = tls13(&s);
        let mut c = Client::connect(s.local_addr(), &config, "localhost");
        expect_body(name, &c.get("/"), BODY);
        c.close();
        assert!(
            started.elapsed() < READ_TIMEOUT,
            "{name}: {:?}",
            started.elapsed()
        );
        let st = wait_stats(&s, |st| st.tls_handshake_failures == 2 && st.open == 0);
        assert_eq!(st.tls_handshake_failures, 2, "{name}: {st:?}");
        assert_eq!(st.timeouts, 2, "{name}: {st:?}");
        s.stop();
    }
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("headroom-tls-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Write a certificate for localhost and its key as PEM files; returns their paths and the
/// certificate (DER).
fn write_pem(dir: &Path) -> (PathBuf, PathBuf, Vec<u8>) {
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    std::fs::write(&cert, made.cert.pem()).unwrap();
    std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
    (cert, key, made.cert.der().to_vec())
}

/// `--tls CERT,KEY`: the server presents the certificate from the files, in every architecture.
#[test]
fn certificate_and_key_from_pem_files() {
    let dir = temp_dir("files");
    let (cert, key, der) = write_pem(&dir);
    for (name, arch) in arches() {
        let source = TlsSource::Files {
            cert: cert.clone(),
            key: key.clone(),
        };
        let s = start(tls_config(arch, source)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(s.tls().unwrap().certificate_der(), &der[..], "{name}");
        assert_eq!(
            s.tls().unwrap().fingerprint(),
            headroom_serve::tls::fingerprint(&der)
        );
        let config = tls13(&s);
        let mut c = Client::connect(s.local_addr(), &config, "localhost");
        expect_body(name, &c.get("/"), BODY);
        expect_body(name, &c.get("/bytes/100000"), &vec![b'x'; 100_000]);
        c.close();
        s.stop();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A missing, unreadable or wrong key (or certificate) file is one line naming the file, and
/// nothing starts.
#[test]
fn bad_files_are_one_line_errors() {
    let dir = temp_dir("bad");
    let (cert, key, _) = write_pem(&dir);
    let garbage = dir.join("garbage.pem");
    std::fs::write(&garbage, "not a PEM file\n").unwrap();
    let (other_cert, _, _) = write_pem(&temp_dir("bad-other"));
    let missing = dir.join("missing.pem");
    let cases = [
        ("missing key", cert.clone(), missing.clone(), "missing.pem"),
        // A directory cannot be read as a file (a mode bit would not stop root).
        ("unreadable key", cert.clone(), dir.clone(), "key file"),
        (
            "no key in file",
            cert.clone(),
            garbage.clone(),
            "no PEM private key",
        ),
        (
            "missing cert",
            missing.clone(),
            key.clone(),
            "certificate file",
        ),
        (
            "no cert in file",
            garbage.clone(),
            key.clone(),
            "no PEM certificate",
        ),
        ("key of another cert", other_cert, key.clone(), "rejected"),
    ];
    for (case, cert, key, says) in cases {
        let source = TlsSource::Files { cert, key };
        let e = start(tls_config(Arch::Pool { handlers: 1 }, source.clone()))
            .expect_err(case)
            .to_string();
        assert!(!e.contains('\n'), "{case}: one line: {e}");
        assert!(e.contains(says), "{case}: {e}");
        let checked = source.check().expect_err(case).to_string();
        assert_eq!(checked, e, "{case}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A plain server's `/status` says `"tls":false` with zero TLS counters.
#[test]
fn plain_status_says_no_tls() {
    let s = start(ServerConfig {
        workers: 1,
        ..ServerConfig::default()
    })
    .unwrap();
    let mut r = common::Reader::connect(s.local_addr());
    let j: serde_json::Value = serde_json::from_slice(&r.get("/status").body).unwrap();
    assert_eq!(j["tls"], false);
    assert_eq!(j["tls_handshakes"], 0);
    assert!(s.tls().is_none());
    s.stop();
}

/// A drain closes an idle TLS keep-alive connection (the client sees the end) and returns long
/// before its deadline; a request in flight on another connection is answered first.
#[test]
fn drain_closes_idle_tls_connections() {
    for (name, arch) in arches() {
        let s = start_self_signed(name, arch);
        let config = tls13(&s);
        let mut idle = Client::connect(s.local_addr(), &config, "localhost");
        expect_body(name, &idle.get("/"), BODY);
        let mut busy = Client::connect(s.local_addr(), &config, "localhost");
        busy.send(b"GET /sleep/300 HTTP/1.1\r\nHost: x\r\n\r\n");
        std::thread::sleep(Duration::from_millis(100));
        let started = Instant::now();
        let drained = std::thread::spawn(move || s.drain(Duration::from_secs(8)));
        let r = busy.response();
        assert_eq!(
            (r.status, r.body.as_slice()),
            (200, &b"slept 300 ms\n"[..]),
            "{name}"
        );
        assert_eq!(idle.fill(), 0, "{name}: the idle connection ends");
        drained.join().unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "{name}: drain took {:?}",
            started.elapsed()
        );
    }
}
