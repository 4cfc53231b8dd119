//! Running out of descriptors in accept: counted, backed off (not spun on), recovered from.
//!
//! Its own test binary (its own process), because it exhausts the process's descriptors; and
//! one test that runs the pollers one after another, because the limit is process-wide.

use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use headroom_serve::{start, Arch, Poller, ServerConfig};

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

/// The `stat` files of this process's server threads (`serve-*`), opened now: once the
/// descriptors are exhausted nothing more can be opened, but procfs regenerates a file's content
/// on every read from offset 0.
/// (A new thread names itself once it runs: wait for that.)
fn server_stats_files() -> Vec<File> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut files = Vec::new();
        for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
            let path = task.path();
            let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
            if comm.starts_with("serve-") {
                files.push(File::open(path.join("stat")).unwrap());
            }
        }
        if !files.is_empty() {
            return files;
        }
        assert!(Instant::now() < deadline, "no serve-* thread found");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// CPU time (user + system, in clock ticks) of the threads whose `stat` files these are.
fn cpu_ticks(files: &mut [File]) -> u64 {
    use std::io::{Seek, SeekFrom};
    let mut ticks = 0;
    for f in files {
        let mut stat = String::new();
        f.seek(SeekFrom::Start(0)).unwrap();
        f.read_to_string(&mut stat).unwrap();
        // pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'.
        let (_, rest) = stat.rsplit_once(')').unwrap();
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // Fields 14 and 15 of proc_pid_stat(5) are utime and stime; `rest` starts at field 3.
        ticks += fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    }
    ticks
}

#[test]
fn emfile_in_accept_backs_off_and_recovers() {
    for poller in [Poller::Select, Poller::Poll, Poller::Epoll] {
        eprintln!("{poller:?}");
        emfile_with(poller);
    }
}

/// select and poll must also stop *watching* the listener during the back-off (they are
/// level-triggered: a listener with a queued connection is reported on every call), and watch
/// it again afterwards.
fn emfile_with(poller: Poller) {
    let server = start(ServerConfig {
        workers: 1,
        arch: Arch::Reactor { poller },
        ..ServerConfig::default()
    })
    .unwrap();
    let mut stat = server_stats_files();
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
    let cpu = cpu_ticks(&mut stat);
    std::thread::sleep(Duration::from_millis(300));
    let later = server.stats();
    let spent = cpu_ticks(&mut stat) - cpu;
    assert!(first.accept_errors >= 1, "{poller:?}: {first:?}");
    assert_eq!(later.accepted, 0);
    // 300 ms of starvation at a 10 ms back-off: about thirty retries, not a spin...
    assert!(
        later.accept_errors - first.accept_errors <= 60,
        "{poller:?}: accept retried too often: {first:?} then {later:?}"
    );

    // ... and no busy loop around them either (a spin would take all 30 ticks).
    assert!(
        spent <= 10,
        "{poller:?}: the worker spun: {spent} ticks of CPU in 300 ms"
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
