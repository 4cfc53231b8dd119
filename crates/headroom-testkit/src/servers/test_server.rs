//! A tiny HTTP/1.1 server on a thread per connection, for servers that misbehave in exactly
//! one way each.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

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
