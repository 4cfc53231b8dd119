//! A small HTTP/1.1 server for the agents-in-namespaces tests: it answers every request and
//! counts requests by the client's address, so a test can check where the load came from.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A keep-alive HTTP server counting requests by source address (the agents' namespaces).
pub struct SourceServer {
    pub port: u16,
    pub by_source: Arc<Mutex<HashMap<IpAddr, u64>>>,
    done: Arc<AtomicBool>,
}

impl SourceServer {
    /// Listening on `ip` (e.g. the bridge address 10.203.0.1), any free port.
    pub fn start(ip: &str) -> SourceServer {
        let l = TcpListener::bind((ip, 0)).unwrap_or_else(|e| panic!("bind {ip}: {e}"));
        let port = l.local_addr().unwrap().port();
        l.set_nonblocking(true).unwrap();
        let by_source = Arc::new(Mutex::new(HashMap::new()));
        let done = Arc::new(AtomicBool::new(false));
        let (b, d) = (by_source.clone(), done.clone());
        std::thread::spawn(move || {
            let until = Instant::now() + Duration::from_secs(120);
            while !d.load(Ordering::Relaxed) && Instant::now() < until {
                match l.accept() {
                    Ok((s, peer)) => {
                        let b = b.clone();
                        std::thread::spawn(move || serve(s, peer.ip(), b));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        SourceServer {
            port,
            by_source,
            done,
        }
    }
}

impl Drop for SourceServer {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
    }
}

fn serve(mut s: TcpStream, peer: IpAddr, by: Arc<Mutex<HashMap<IpAddr, u64>>>) {
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            buf.drain(..end + 4);
            *by.lock().unwrap().entry(peer).or_default() += 1;
            if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .is_err()
            {
                return;
            }
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}
