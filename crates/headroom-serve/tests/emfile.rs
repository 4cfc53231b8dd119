//! Running out of descriptors in accept: counted, backed off (not spun on), recovered from.
//!
//! Its own test binary (its own process), because it exhausts the process's descriptors.

use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use headroom_serve::{start, ServerConfig};

fn nofile() -> libc::rlimit {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into `r`.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) }, 0);
    r
}

fn set_nofile(r: &libc::rlimit) {
    // SAFETY: setrlimit reads `r`.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, r) }, 0);
}

#[test]
fn emfile_in_accept_backs_off_and_recovers() {
    let server = start(ServerConfig {
        workers: 1,
        ..ServerConfig::default()
    })
    .unwrap();
    let saved = nofile();
    // Keep the filling short: a low soft limit (fds in use here are well under 200).
    set_nofile(&libc::rlimit {
        rlim_cur: 256.min(saved.rlim_cur),
        rlim_max: saved.rlim_max,
    });
    let mut fillers = Vec::new();
    loop {
        match File::open("/dev/null") {
            Ok(f) => fillers.push(f),
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(libc::EMFILE), "{e}");
                break;
            }
        }
    }
    // Exactly one descriptor free: the client's socket takes it, the server's accept finds none.
    fillers.pop();
    let mut client = TcpStream::connect(server.local_addr()).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    client.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();

    let deadline = Instant::now() + Duration::from_secs(5);
    while server.stats().accept_errors == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let first = server.stats();
    std::thread::sleep(Duration::from_millis(100));
    let later = server.stats();
    assert!(first.accept_errors >= 1, "{first:?}");
    assert_eq!(later.accepted, 0);
    // 100 ms of starvation at a 10 ms back-off: about ten retries, not a spin.
    assert!(
        later.accept_errors - first.accept_errors <= 20,
        "accept retried too often: {first:?} then {later:?}"
    );

    drop(fillers);
    set_nofile(&saved);
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.ends_with(b"hello from headroom\n") {
        let n = client.read(&mut buf).expect("served after recovery");
        assert!(n > 0, "closed instead of served");
        got.extend_from_slice(&buf[..n]);
    }
    assert!(got.starts_with(b"HTTP/1.1 200 OK\r\n"));
    let st = server.stats();
    assert_eq!(st.accepted, 1);
    assert_eq!(st.errors, st.accept_errors);
    server.stop();
}
