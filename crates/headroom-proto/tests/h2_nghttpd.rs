//! `headroom_proto::h2` against an independent HTTP/2 server: Debian's `nghttpd` (package
//! `nghttp2-server`) in h2c prior-knowledge mode (`--no-tls`) on 127.0.0.1, serving a docroot
//! this test writes. The client is a blocking `TcpStream` loop that feeds the codec whatever
//! each `read` returned, as the engine will. Every read has a timeout, every loop a count and a
//! deadline. Without nghttpd the test fails (it names the package to install); it never skips.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use headroom_proto::h2::{ClientConfig, ClientConn, Event, Request};

const DEADLINE: Duration = Duration::from_secs(60);
const SMALL_LEN: usize = 1_234;
const BIG_LEN: usize = 1 << 20;

/// A running nghttpd and its docroot; both go away on drop.
struct Nghttpd {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Drop for Nghttpd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn nghttpd_path() -> PathBuf {
    for p in ["/usr/sbin/nghttpd", "/usr/bin/nghttpd"] {
        if Path::new(p).exists() {
            return PathBuf::from(p);
        }
    }
    panic!(
        "nghttpd not found in /usr/sbin or /usr/bin: install Debian's package \
         `nghttp2-server` (apt-get install -y nghttp2-server)"
    );
}

fn body_byte(i: usize) -> u8 {
    (i * 31 % 251) as u8
}

fn start(extra: &[&str]) -> Nghttpd {
    let bin = nghttpd_path();
    let dir = std::env::temp_dir().join(format!(
        "headroom-h2-nghttpd-{}-{}",
        std::process::id(),
        extra.len()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let small: Vec<u8> = (0..SMALL_LEN).map(body_byte).collect();
    let big: Vec<u8> = (0..BIG_LEN).map(body_byte).collect();
    std::fs::write(dir.join("small.txt"), small).unwrap();
    std::fs::write(dir.join("big.bin"), big).unwrap();
    // A free port: bind to 0, read it, release it for nghttpd.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(bin)
        .args(["--no-tls", "-a", "127.0.0.1", "-d"])
        .arg(&dir)
        .args(extra)
        .arg(port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn nghttpd");
    let server = Nghttpd { child, dir, port };
    // Wait until it listens (at most 10 s).
    let t0 = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "nghttpd did not listen on 127.0.0.1:{port}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    server
}

#[derive(Debug, Default, Clone)]
struct Pending {
    path: &'static str,
    expected: usize,
    got: Vec<u8>,
    status: u16,
    content_length: Option<usize>,
}

/// Runs `plan` (path, expected body length, request body) over one connection with at most
/// `streams` open at once, checking every response's status, length and bytes. Returns the
/// bytes written to the socket.
fn drive(
    port: u16,
    cfg: ClientConfig,
    streams: u32,
    plan: &[(&'static str, usize, &[u8])],
) -> usize {
    let mut sock = TcpStream::connect(("127.0.0.1", port)).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    sock.set_nodelay(true).unwrap();
    let mut out = Vec::new();
    let mut conn = ClientConn::new(
        &ClientConfig {
            max_concurrent_streams_cap: streams,
            ..cfg
        },
        &mut out,
    );
    let mut open: Vec<(u32, Pending)> = Vec::new();
    let mut next = 0usize;
    let mut done = 0usize;
    let mut written = 0usize;
    let mut buf = vec![0u8; 64 * 1024];
    let authority = format!("127.0.0.1:{port}");
    let t0 = Instant::now();
    // Each round reads at least one byte or fails on the timeout: bounded by the deadline.
    for _round in 0..1_000_000 {
        if done == plan.len() {
            break;
        }
        assert!(
            t0.elapsed() < DEADLINE,
            "deadline: {done} of {} done",
            plan.len()
        );
        while next < plan.len() && conn.can_open() {
            let (path, expected, body) = plan[next];
            let len = body.len().to_string();
            let headers: &[(&[u8], &[u8])] = &[
                (b"user-agent", b"headroom-test"),
                (b"content-length", len.as_bytes()),
            ];
            let req = Request {
                method: if body.is_empty() { b"GET" } else { b"POST" },
                scheme: b"http",
                authority: authority.as_bytes(),
                path: path.as_bytes(),
                headers: if body.is_empty() {
                    &headers[..1]
                } else {
                    headers
                },
                body,
            };
            let id = conn.send_request(&req, &mut out).unwrap();
            open.push((
                id,
                Pending {
                    path,
                    expected,
                    ..Pending::default()
                },
            ));
            next += 1;
        }
        assert!(conn.open_streams() <= streams);
        if !out.is_empty() {
            sock.write_all(&out).unwrap();
            written += out.len();
            out.clear();
        }
        let n = match sock.read(&mut buf) {
            Ok(0) => panic!("nghttpd closed the connection ({done} done)"),
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => panic!("read: {e} ({done} of {} done)", plan.len()),
        };
        let mut completed = Vec::new();
        conn.feed(&buf[..n], &mut out, &mut |ev| match ev {
            Event::Status { stream, status } => {
                let p = &mut open.iter_mut().find(|(id, _)| *id == stream).unwrap().1;
                p.status = status;
            }
            Event::Header {
                stream,
                name,
                value,
            } => {
                if name == b"content-length" {
                    let p = &mut open.iter_mut().find(|(id, _)| *id == stream).unwrap().1;
                    p.content_length = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
                }
            }
            Event::Data { stream, data } => {
                let p = &mut open.iter_mut().find(|(id, _)| *id == stream).unwrap().1;
                p.got.extend_from_slice(data);
            }
            Event::Complete { stream, status } => completed.push((stream, status)),
            other => panic!("unexpected event {other:?}"),
        })
        .unwrap();
        for (stream, status) in completed {
            let i = open.iter().position(|(id, _)| *id == stream).unwrap();
            let (_, p) = open.swap_remove(i);
            assert_eq!(status, 200, "{}", p.path);
            assert_eq!(p.status, 200);
            assert_eq!(p.got.len(), p.expected, "{}", p.path);
            assert_eq!(p.content_length, Some(p.expected), "{}", p.path);
            assert!(
                p.got.iter().enumerate().all(|(i, &b)| b == body_byte(i)),
                "{}: body differs",
                p.path
            );
            done += 1;
        }
    }
    assert_eq!(done, plan.len());
    assert_eq!(conn.open_streams(), 0);
    // Say goodbye; the server closes after our GOAWAY.
    conn.close(&mut out);
    sock.write_all(&out).unwrap();
    written + out.len()
}

fn mixed_plan() -> Vec<(&'static str, usize, &'static [u8])> {
    let mut plan = Vec::new();
    for _ in 0..50 {
        plan.push(("/small.txt", SMALL_LEN, &b""[..]));
        plan.push(("/big.bin", BIG_LEN, &b""[..]));
    }
    plan
}

#[test]
fn nghttpd_small_and_1mib_files_over_4_streams() {
    let server = start(&[]);
    drive(server.port, ClientConfig::default(), 4, &mixed_plan());
}

#[test]
fn nghttpd_with_small_receive_windows_needs_our_window_updates() {
    // Our windows at the protocol minimum (64 KiB - 1): every 1 MiB response needs ~32 of our
    // WINDOW_UPDATEs per stream and on the connection.
    let server = start(&[]);
    let cfg = ClientConfig {
        initial_window_size: 65_535,
        ..ClientConfig::default()
    };
    drive(server.port, cfg, 4, &mixed_plan());
}

#[test]
fn nghttpd_request_bodies_wait_for_its_windows() {
    // The server's stream windows are 2^14-1 and its connection window 2^16-1: a 200 KB body
    // goes out in pieces as its WINDOW_UPDATEs arrive.
    let server = start(&["-w", "14", "-W", "16"]);
    let body: &'static [u8] = Box::leak(vec![b'x'; 200_000].into_boxed_slice());
    let plan: Vec<(&'static str, usize, &'static [u8])> =
        (0..20).map(|_| ("/small.txt", SMALL_LEN, body)).collect();
    let written = drive(server.port, ClientConfig::default(), 4, &plan);
    // Every body went out whole (the server answers after reading it).
    assert!(written > 20 * 200_000, "{written}");
}
