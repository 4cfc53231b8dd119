//! The TLS and HTTP/2 test servers themselves (headroom-testkit's pki, tls_nginx and h2o, and
//! the TLS listeners of the services scripts/test starts), checked with real clients: curl,
//! nghttp (nghttp2-client), openssl s_client, psql and Python's websockets. The run library's
//! TLS and HTTP/2 tests (tls.rs, http2.rs, tls_resume.rs, tls_negotiated.rs, h2_hostile.rs)
//! stand on these servers; these tests say the servers do what the harness promises. Every
//! server is on 127.0.0.1 and every client run is bounded (20 s). (They were
//! crates/headroom/tests/tls_servers.rs; no headroom command is run here.)

mod common;

use std::io::Read;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use common::access_log::{parse_line, AccessLog};
use common::h2o::H2o;
use common::pki::{CertFiles, Pki};
use common::tls_services::repo_root;
use common::Nginx;

/// Run a client with stdin closed, at most 20 s; (exited 0, stdout + stderr).
fn client(prog: &str, args: &[&str]) -> (bool, String) {
    let mut child = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {prog} ({e}): scripts/test installs it (Debian: curl, \
                 nghttp2-client for nghttp, openssl)"
            )
        });
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    // Bytes, not strings: s_client prints what the server sends, e.g. nginx's binary HTTP/2
    // SETTINGS frame when h2 was negotiated (read_to_string would drop the whole output).
    let o = thread::spawn(move || {
        let mut b = Vec::new();
        let _ = out.read_to_end(&mut b);
        String::from_utf8_lossy(&b).into_owned()
    });
    let e = thread::spawn(move || {
        let mut b = Vec::new();
        let _ = err.read_to_end(&mut b);
        String::from_utf8_lossy(&b).into_owned()
    });
    let t = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{prog} {args:?} ran for more than 20 s");
        }
        thread::sleep(Duration::from_millis(10));
    };
    let text = format!("{}{}", o.join().unwrap(), e.join().unwrap());
    (status.success(), text)
}

fn curl(args: &[&str]) -> String {
    let (ok, out) = client("curl", &[&["-sS", "--max-time", "10"], args].concat());
    assert!(ok, "curl {args:?} failed: {out}");
    out
}

/// `openssl s_client` to 127.0.0.1:port verifying against `ca` for the name localhost, with
/// `extra` flags; (handshake and verification succeeded, output).
fn s_client(port: u16, ca: &std::path::Path, extra: &[&str]) -> (bool, String) {
    let connect = format!("127.0.0.1:{port}");
    let ca = ca.display().to_string();
    let mut args = vec![
        "s_client",
        "-connect",
        &connect,
        "-servername",
        "localhost",
        "-verify_hostname",
        "localhost",
        "-verify_return_error",
        "-CAfile",
        &ca,
    ];
    args.extend_from_slice(extra);
    client("openssl", &args)
}

fn pid_alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid as i32, 0) == 0 }
}

fn assert_gone(pid: u32, who: &str) {
    // Drop waited for it; it is reaped, so kill(pid, 0) fails unless the pid was reused.
    assert!(!pid_alive(pid), "{who} (pid {pid}) outlived its harness");
}

#[test]
fn access_log_lines_of_both_servers_parse_alike() {
    let n = parse_line("127.0.0.1 HTTP/2.0 r TLSv1.3 200 7 /a").unwrap();
    assert_eq!((n.reused, n.tls.as_deref()), (Some(true), Some("TLSv1.3")));
    let h = parse_line("127.0.0.1 HTTP/2 0 TLSv1.3 200 3 /").unwrap();
    assert_eq!((h.protocol.as_str(), h.reused), ("HTTP/2.0", Some(false)));
    let p = parse_line("127.0.0.1 HTTP/1.1 - - 404 1 /missing").unwrap();
    assert_eq!((p.reused, p.tls, p.status), (None, None, 404));
}

#[test]
fn the_rust_and_the_shell_pki_make_the_same_kinds() {
    let pki = Pki::new();
    let shell_dir = tempfile::tempdir().unwrap();
    let out = Command::new(repo_root().join("scripts/pki.sh"))
        .arg(shell_dir.path().join("pki"))
        .output()
        .expect("run scripts/pki.sh");
    assert!(
        out.status.success(),
        "scripts/pki.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sd = shell_dir.path().join("pki");
    let shell = |n: &str| CertFiles {
        cert: sd.join(format!("{n}.pem")),
        key: sd.join(format!("{n}.key")),
    };
    for (ca, good, wrong, expired, own) in [
        (
            pki.ca.clone(),
            pki.localhost.clone(),
            pki.wrong_name.clone(),
            pki.expired.clone(),
            pki.self_signed.clone(),
        ),
        (
            sd.join("ca.pem"),
            shell("localhost"),
            shell("wrong-name"),
            shell("expired"),
            shell("self-signed"),
        ),
    ] {
        let verify = |c: &CertFiles, check: &[&str]| {
            let ca = ca.display().to_string();
            let cert = c.cert.display().to_string();
            client(
                "openssl",
                &[&["verify", "-CAfile", &ca], check, &[&cert]].concat(),
            )
        };
        for check in [
            &["-verify_hostname", "localhost"][..],
            &["-verify_ip", "127.0.0.1"],
            &["-verify_ip", "::1"],
        ] {
            let (ok, out) = verify(&good, check);
            assert!(ok, "{:?} {check:?}: {out}", good.cert);
        }
        for (c, why) in [
            (&wrong, "hostname mismatch"),
            (&expired, "certificate has expired"),
            (&own, "self-signed certificate"),
        ] {
            let (ok, out) = verify(c, &["-verify_hostname", "localhost"]);
            assert!(
                !ok && out.contains(why),
                "{:?}: wanted '{why}': {out}",
                c.cert
            );
        }
        // Each key belongs to its certificate.
        for c in [&good, &wrong, &expired, &own] {
            let (_, a) = client(
                "openssl",
                &["x509", "-noout", "-pubkey", "-in", c.cert.to_str().unwrap()],
            );
            let (_, b) = client(
                "openssl",
                &["pkey", "-pubout", "-in", c.key.to_str().unwrap()],
            );
            assert!(a.contains("BEGIN PUBLIC KEY") && a == b, "{:?}", c.cert);
        }
    }
}

#[test]
fn nginx_https_http1_logs_protocol_tls_version_and_resumption() {
    let pki = Pki::new();
    let ng = Nginx::builder().tls(&pki.localhost).start();
    let ca = pki.ca.to_str().unwrap();
    // Two requests, each on its own connection (the server closes after each): curl resumes the
    // first connection's session on the second.
    let body = curl(&[
        "--http1.1",
        "--cacert",
        ca,
        "-H",
        "Connection: close",
        &ng.url("/a"),
        &ng.url("/b"),
    ]);
    assert_eq!(body, "hello from nginx\nhello from nginx\n");
    // By name too (SNI, a DNS-name check).
    curl(&["--http1.1", "--cacert", ca, &ng.url_localhost("/c")]);
    assert_eq!(ng.logged(), 3);
    assert_eq!(ng.logged_protocol("HTTP/1.1"), 3);
    assert_eq!(ng.logged_tls("TLSv1.3"), 3, "{:?}", ng.log_lines());
    assert_eq!(ng.logged_connections(), 3);
    assert_eq!(ng.logged_reused(), 1, "{:?}", ng.log_lines());
    // Without ALPN h2 the server says http/1.1 only.
    let (ok, out) = s_client(ng.addr.port(), &pki.ca, &["-alpn", "h2,http/1.1"]);
    assert!(ok && out.contains("ALPN protocol: http/1.1"), "{out}");

    // session_resumption(false): every handshake is full.
    let full = Nginx::builder()
        .tls(&pki.localhost)
        .session_resumption(false)
        .start();
    curl(&[
        "--http1.1",
        "--cacert",
        ca,
        "-H",
        "Connection: close",
        &full.url("/a"),
        &full.url("/b"),
    ]);
    assert_eq!(full.logged_connections(), 2);
    assert_eq!(full.logged_reused(), 0, "{:?}", full.log_lines());
}

#[test]
fn nginx_h2_over_tls_and_h2c_log_http2() {
    let pki = Pki::new();
    let ng = Nginx::builder().tls(&pki.localhost).http2(true).start();
    let (ok, out) = client("nghttp", &["-nv", &ng.url("/"), &ng.url("/static/1m.bin")]);
    assert!(ok, "{out}");
    assert!(out.contains("The negotiated protocol: h2"), "{out}");
    let (ok, out) = s_client(ng.addr.port(), &pki.ca, &["-alpn", "h2"]);
    assert!(ok && out.contains("ALPN protocol: h2"), "{out}");
    // curl over h2 and, by ALPN choice, over HTTP/1.1 on the same listener.
    let ca = pki.ca.to_str().unwrap();
    let body = curl(&["--http2", "--cacert", ca, &ng.url("/static/64k.bin")]);
    assert_eq!(body.len(), 65_536);
    curl(&["--http1.1", "--cacert", ca, &ng.url("/")]);
    assert_eq!(ng.logged_protocol("HTTP/2.0"), 3, "{:?}", ng.log_lines());
    assert_eq!(ng.logged_protocol("HTTP/1.1"), 1);

    let h2c = Nginx::builder().h2c(true).start();
    let (ok, out) = client("nghttp", &["-n", &h2c.url("/"), &h2c.url("/missing")]);
    assert!(ok, "{out}");
    curl(&["--http2-prior-knowledge", &h2c.url("/")]);
    assert_eq!(h2c.logged_protocol("HTTP/2.0"), 3, "{:?}", h2c.log_lines());
    assert_eq!(h2c.logged_status(404), 1);
    assert_eq!(h2c.log_lines()[0].tls, None);
}

#[test]
fn h2o_answers_h2_and_http1_over_tls_and_h2c_and_logs_them() {
    let pki = Pki::new();
    let h = H2o::start(&pki.localhost);
    let ca = pki.ca.to_str().unwrap();
    let (ok, out) = client("nghttp", &["-nv", &h.tls_url("/"), &h.tls_url("/x")]);
    assert!(ok && out.contains("The negotiated protocol: h2"), "{out}");
    assert_eq!(
        curl(&["--http1.1", "--cacert", ca, &h.tls_url("/")]),
        "hello from h2o\n"
    );
    let (ok, out) = client("nghttp", &["-n", &h.h2c_url("/"), &h.h2c_url("/missing")]);
    assert!(ok, "{out}");
    assert_eq!(curl(&[&h.h2c_url("/")]), "hello from h2o\n");
    let lines = h.log_lines();
    assert_eq!(h.logged_protocol("HTTP/2.0"), 4, "{lines:?}");
    assert_eq!(h.logged_protocol("HTTP/1.1"), 2, "{lines:?}");
    assert_eq!(h.logged_status(404), 1, "{lines:?}");
    assert_eq!(h.logged_tls("TLSv1.3"), 3, "{lines:?}");
    // Resumption: the second connection of one curl resumes the first one's session.
    curl(&[
        "--http1.1",
        "--cacert",
        ca,
        "-H",
        "Connection: close",
        &h.tls_url("/r1"),
        &h.tls_url("/r2"),
    ]);
    assert_eq!(h.logged_reused(), 1, "{:?}", h.log_lines());
    let pid = h.pid();
    drop(h);
    assert_gone(pid, "h2o");
}

#[test]
fn bad_certificates_fail_verification_for_the_expected_reason() {
    let pki = Pki::new();
    let good = Nginx::builder().tls(&pki.localhost).start();
    let (ok, out) = s_client(good.addr.port(), &pki.ca, &[]);
    assert!(ok && out.contains("Verify return code: 0 (ok)"), "{out}");
    for (cert, why) in [
        (&pki.wrong_name, "hostname mismatch"),
        (&pki.expired, "certificate has expired"),
        (&pki.self_signed, "self-signed certificate"),
    ] {
        let ng = Nginx::builder().tls(cert).start();
        let (ok, out) = s_client(ng.addr.port(), &pki.ca, &[]);
        assert!(!ok, "{cert:?} verified: {out}");
        assert!(out.contains(why), "{cert:?}: wanted '{why}': {out}");
    }
}

#[test]
fn tls13_only_server_refuses_tls12() {
    let pki = Pki::new();
    let ng = Nginx::builder()
        .tls(&pki.localhost)
        .tls_protocols("TLSv1.3")
        .start();
    let (ok, out) = s_client(ng.addr.port(), &pki.ca, &["-tls1_2"]);
    assert!(!ok, "TLS 1.2 was accepted: {out}");
    assert!(out.contains("alert protocol version"), "{out}");
    let (ok, out) = s_client(ng.addr.port(), &pki.ca, &["-tls1_3"]);
    assert!(ok && out.contains("TLSv1.3"), "{out}");
    // The default server takes both.
    let both = Nginx::builder().tls(&pki.localhost).start();
    let (ok, out) = s_client(both.addr.port(), &pki.ca, &["-tls1_2"]);
    assert!(ok && out.contains("Protocol  : TLSv1.2"), "{out}");
}

#[test]
fn nginx_sends_goaway_after_keepalive_requests_on_h2_and_closes_on_http1() {
    let pki = Pki::new();
    let ng = Nginx::builder()
        .tls(&pki.localhost)
        .http2(true)
        .keepalive_requests(3)
        .start();
    let urls: Vec<String> = (0..4).map(|i| ng.url(&format!("/{i}"))).collect();
    let mut args = vec!["-nv"];
    args.extend(urls.iter().map(String::as_str));
    let (_, out) = client("nghttp", &args);
    // Streams 13, 15, 17 are answered; GOAWAY(NO_ERROR, last_stream_id=17) comes after the
    // second response's DATA; the fourth (19) is never processed.
    assert!(out.contains("recv GOAWAY frame"), "{out}");
    assert!(
        out.contains("last_stream_id=17, error_code=NO_ERROR(0x00)"),
        "{out}"
    );
    assert!(out.contains("total=4, processed=3"), "{out}");
    assert_eq!(ng.logged(), 3);
    assert_eq!(ng.logged_connections(), 1);

    // HTTP/1.1: the third response says Connection: close, curl opens a new connection for the
    // fourth.
    let ca = pki.ca.to_str().unwrap();
    let mut args = vec!["--http1.1", "--cacert", ca, "-sv"];
    args.extend(urls.iter().map(String::as_str));
    let out = curl(&args);
    assert!(out.contains("< Connection: close"), "{out}");
    assert_eq!(ng.logged(), 7);
    assert_eq!(ng.logged_connections(), 3, "{:?}", ng.log_lines());
}

#[test]
fn nginx_sends_rst_stream_for_return_444_and_after_answering_an_unread_body() {
    let pki = Pki::new();
    for ng in [
        Nginx::builder().tls(&pki.localhost).http2(true).start(),
        Nginx::builder().h2c(true).start(),
    ] {
        // GET /rst: RST_STREAM(PROTOCOL_ERROR), no response headers.
        let (_, out) = client("nghttp", &["-nv", &ng.url("/rst")]);
        assert!(out.contains("recv RST_STREAM frame"), "{out}");
        assert!(out.contains("error_code=PROTOCOL_ERROR(0x01)"), "{out}");
        assert!(!out.contains(":status"), "{out}");

        // A 1 MiB POST to /: 200, then RST_STREAM(NO_ERROR) for the body nginx won't read.
        let body = ng.dir.path().join("www/static/1m.bin");
        let (_, out) = client(
            "nghttp",
            &["-nv", "-d", body.to_str().unwrap(), &ng.url("/")],
        );
        let status = out.find(":status: 200").expect("a 200");
        let rst = out.find("recv RST_STREAM frame").expect("an RST_STREAM");
        assert!(status < rst, "{out}");
        assert!(out[rst..].contains("error_code=NO_ERROR(0x00)"), "{out}");
    }
    // HTTP/1.1: /rst closes the connection with no response.
    let ng = Nginx::builder().tls(&pki.localhost).start();
    let (ok, out) = client(
        "curl",
        &["-sS", "--cacert", pki.ca.to_str().unwrap(), &ng.url("/rst")],
    );
    assert!(!ok && out.contains("Empty reply from server"), "{out}");
}

#[test]
fn servers_are_killed_on_drop() {
    let pki = Pki::new();
    let ng = Nginx::builder().tls(&pki.localhost).http2(true).start();
    let (pid, addr) = (ng.pid(), ng.addr);
    let ok = std::net::TcpStream::connect(addr).is_ok();
    assert!(ok);
    drop(ng);
    assert_gone(pid, "nginx");
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "{addr} still accepts after drop"
    );
}

// ---- the shared protocol servers' TLS listeners (scripts/ejabberd.sh, postgres.sh, ws-echo.sh) --

/// `openssl s_client` against `addr` (HOST:PORT) trusting the scripts' CA, for the name
/// localhost; (ok, output).
fn s_client_addr(addr: &str, extra: &[&str]) -> (bool, String) {
    let ca = common::tls_services::test_ca();
    let ca = ca.to_str().unwrap();
    let args = [
        &[
            "s_client",
            "-connect",
            addr,
            "-verify_hostname",
            "localhost",
            "-verify_return_error",
            "-CAfile",
            ca,
        ][..],
        extra,
    ]
    .concat();
    client("openssl", &args)
}

#[test]
fn ejabberd_offers_starttls_and_speaks_direct_tls() {
    let plain = common::tls_services::xmpp_starttls_addr();
    let (ok, out) = s_client_addr(&plain, &["-starttls", "xmpp", "-xmpphost", "localhost"]);
    assert!(ok && out.contains("Verify return code: 0 (ok)"), "{out}");
    let direct = common::tls_services::xmpp_tls_addr();
    assert_ne!(direct, plain);
    let (ok, out) = s_client_addr(&direct, &["-servername", "localhost"]);
    assert!(ok && out.contains("Verify return code: 0 (ok)"), "{out}");
}

#[test]
fn postgres_takes_tls_and_plain_connections() {
    let url = common::tls_services::pg_tls_url();
    assert!(url.ends_with("?sslmode=require"), "{url}");
    let ca = common::tls_services::test_ca();
    let q = "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()";
    for (mode, want) in [
        ("sslmode=require".to_string(), "t"),
        ("sslmode=disable".to_string(), "f"),
        (
            format!("sslmode=verify-full&sslrootcert={}", ca.display()),
            "t",
        ),
    ] {
        let u = url.replace("sslmode=require", &mode);
        let (ok, out) = client("psql", &[&u, "-XAtc", q]);
        assert!(ok, "psql {u}: {out}");
        assert_eq!(out.trim(), want, "psql {u}");
    }
}

#[test]
fn websocket_echo_answers_over_tls() {
    let url = common::tls_services::wss_url();
    assert!(url.starts_with("wss://127.0.0.1:"), "{url}");
    let ca = common::tls_services::test_ca();
    let script = r#"
import asyncio, ssl, sys, websockets
async def main():
    ctx = ssl.create_default_context(cafile=sys.argv[2])
    async with websockets.connect(sys.argv[1] + "/echo", ssl=ctx) as ws:
        await ws.send("over tls")
        print(await ws.recv(), ws.transport.get_extra_info("ssl_object").version())
asyncio.run(asyncio.wait_for(main(), 10))
"#;
    let (ok, out) = client(
        "/usr/bin/python3",
        &["-c", script, &url, ca.to_str().unwrap()],
    );
    assert!(ok, "{out}");
    assert_eq!(out.trim(), "over tls TLSv1.3");
}
