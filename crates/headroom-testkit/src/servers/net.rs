//! Loopback ports: a free one, waiting for a listener, and the ready probe every server here
//! answers with a token only its instance knows.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Child;
use std::thread;
use std::time::{Duration, Instant};

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
pub fn probe_token(addr: SocketAddr) -> Option<String> {
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

/// Stops a server started by a test: SIGTERM first (a master process must live long enough to
/// stop its workers, or they outlive the test as orphans), SIGKILL after 5 s.
pub fn stop_child(child: &mut Child) {
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(5) {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}
