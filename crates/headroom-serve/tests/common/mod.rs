//! Helpers shared by the integration tests that talk HTTP to a running server over loopback
//! (`reactor`, `arches`, `pollers`): connecting, reading responses off a connection with
//! `httparse`, waiting for the server's stats to settle, and instantiating a test once per
//! poller ([`per_poller!`]). Each test binary uses a subset.

#![allow(dead_code)]

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use headroom_serve::{RunningServer, ServerStats};

/// How long a client read waits before the test fails instead of hanging.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// A client connection to `s` (read timeout [`READ_TIMEOUT`], `TCP_NODELAY`).
pub fn connect(s: &RunningServer) -> TcpStream {
    connect_addr(s.local_addr())
}

/// A client connection to `addr` (read timeout [`READ_TIMEOUT`], `TCP_NODELAY`).
pub fn connect_addr(addr: SocketAddr) -> TcpStream {
    let c = TcpStream::connect(addr).expect("connect");
    c.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    c.set_nodelay(true).unwrap();
    c
}

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// The response said `Connection: close`.
    pub close: bool,
    pub body: Vec<u8>,
}

impl Response {
    /// The first header called `name` (case-insensitive), if any.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Reads responses off one connection, keeping bytes that belong to the next one.
pub struct Reader {
    pub stream: TcpStream,
    pub buf: Vec<u8>,
}

impl Reader {
    pub fn new(stream: TcpStream) -> Reader {
        Reader {
            stream,
            buf: Vec::new(),
        }
    }

    /// A reader on a fresh connection to `addr` (see [`connect_addr`]).
    pub fn connect(addr: SocketAddr) -> Reader {
        Reader::new(connect_addr(addr))
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("send");
    }

    /// Sends `GET path` (HTTP/1.1, keep-alive) and reads its response.
    pub fn get(&mut self, path: &str) -> Response {
        self.send(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes());
        self.response()
    }

    /// More bytes from the socket; 0 at end of file (a reset counts as end of file here).
    pub fn fill(&mut self) -> usize {
        let mut chunk = [0u8; 65536];
        match self.stream.read(&mut chunk) {
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                n
            }
            Err(e) if e.kind() == ErrorKind::ConnectionReset => 0,
            Err(e) => panic!("read: {e}"),
        }
    }

    /// The next response, or `None` if the connection ends before its first byte (ending
    /// part-way through one fails the test).
    pub fn try_response(&mut self) -> Option<Response> {
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut r = httparse::Response::new(&mut headers);
            if let httparse::Status::Complete(head) = r.parse(&self.buf).expect("valid response") {
                let status = r.code.unwrap();
                let headers: Vec<(String, String)> = r
                    .headers
                    .iter()
                    .map(|h| {
                        (
                            h.name.to_string(),
                            String::from_utf8_lossy(h.value).into_owned(),
                        )
                    })
                    .collect();
                let find = |name: &str| {
                    headers
                        .iter()
                        .find(|(n, _)| n.eq_ignore_ascii_case(name))
                        .map(|(_, v)| v.as_str())
                };
                let len: usize = find("content-length")
                    .expect("content-length")
                    .parse()
                    .unwrap();
                let close = find("connection") == Some("close");
                while self.buf.len() < head + len {
                    assert!(self.fill() > 0, "connection closed mid-body");
                }
                let body = self.buf[head..head + len].to_vec();
                self.buf.drain(..head + len);
                return Some(Response {
                    status,
                    headers,
                    close,
                    body,
                });
            }
            if self.fill() == 0 {
                assert!(
                    self.buf.is_empty(),
                    "connection closed mid-head: {:?}",
                    self.buf
                );
                return None;
            }
        }
    }

    /// The next response; the connection ending first fails the test.
    pub fn response(&mut self) -> Response {
        self.try_response()
            .expect("a response, not the end of the connection")
    }

    /// The server closes cleanly (end of file, not a reset) with nothing more to say.
    pub fn expect_eof(&mut self) {
        assert!(self.buf.is_empty(), "unexpected bytes {:?}", self.buf);
        let mut rest = Vec::new();
        self.stream
            .read_to_end(&mut rest)
            .expect("clean end of file");
        assert!(rest.is_empty(), "unexpected bytes {rest:?}");
    }

    /// The server ends the connection (end of file or reset) with nothing more to say.
    pub fn expect_end(&mut self) {
        assert!(self.fill() == 0, "unexpected bytes {:?}", self.buf);
    }

    /// The server closed the connection (end of file or reset) within `within`; the read
    /// timeout stays at `within` afterwards.
    pub fn expect_closed(&mut self, within: Duration) {
        self.stream.set_read_timeout(Some(within)).unwrap();
        let mut b = [0u8; 1024];
        match self.stream.read(&mut b) {
            Ok(0) => {}
            Ok(n) => panic!("unexpected bytes {:?}", &b[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
            Err(e) => panic!("not closed within {within:?}: {e}"),
        }
    }

    /// True when the server has ended the connection (end of file or reset) within `wait`,
    /// false if nothing arrived by then; the read timeout is back at [`READ_TIMEOUT`] after.
    pub fn ended_within(&mut self, wait: Duration) -> bool {
        self.stream.set_read_timeout(Some(wait)).unwrap();
        let mut b = [0u8; 1];
        let ended = match self.stream.read(&mut b) {
            Ok(0) => true,
            Ok(_) => panic!("unexpected byte {b:?}"),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => true,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => false,
            Err(e) => panic!("read: {e}"),
        };
        self.stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        ended
    }
}

/// Stats are published once per round: poll until they match `ok` (for at most 5 s), and
/// return the last ones seen either way.
pub fn wait_stats(s: &RunningServer, ok: impl Fn(&ServerStats) -> bool) -> ServerStats {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let st = s.stats();
        if ok(&st) || Instant::now() > deadline {
            return st;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Instantiates tests written as `fn name(poller: Poller)` once per poller, as `select::name`,
/// `poll::name` and `epoll::name` (at the call site: `per_poller!(name, other_name)`).
#[allow(unused_macros)] // `arches` has no use for it
macro_rules! per_poller {
    ($($name:ident),* $(,)?) => {
        mod select {
            $( #[test] fn $name() { super::$name(headroom_serve::Poller::Select) } )*
        }
        mod poll {
            $( #[test] fn $name() { super::$name(headroom_serve::Poller::Poll) } )*
        }
        mod epoll {
            $( #[test] fn $name() { super::$name(headroom_serve::Poller::Epoll) } )*
        }
    };
}
#[allow(unused_imports)]
pub(crate) use per_poller;
