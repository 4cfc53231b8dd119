//! Running out of descriptors in accept: counted, backed off (not spun on), recovered from.
//!
//! Its own test binary (its own process), because it exhausts the process's descriptors; and
//! one test that runs the pollers one after another, because the limit is process-wide.

use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use headroom_serve::{start, Arch, Poller, Runtime, ServerConfig};

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

/// CPU time (user + system, in clock ticks) of the threads whose `stat` files these are. A
/// thread that has ended since its file was opened (the previous server's, still stopping when
/// the files were listed: its read fails with ESRCH) spins no more and counts nothing; at least
/// one must still be there.
fn cpu_ticks(files: &mut [File]) -> u64 {
    use std::io::{Seek, SeekFrom};
    let mut ticks = 0;
    let mut read = 0;
    for f in files {
        let mut stat = String::new();
        f.seek(SeekFrom::Start(0)).unwrap();
        match f.read_to_string(&mut stat) {
            Ok(_) => read += 1,
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => continue,
            Err(e) => panic!("reading a server thread's stat: {e}"),
        }
        // pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'.
        let (_, rest) = stat.rsplit_once(')').unwrap();
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // Fields 14 and 15 of proc_pid_stat(5) are utime and stime; `rest` starts at field 3.
        ticks += fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    }
    assert!(read > 0, "every server thread listed has ended");
    ticks
}

/// Wait until a server thread whose name starts with `prefix` sits in accept4(2) (x86-64
/// syscall 288, read from /proc/self/task/*/syscall): only then has the kernel reserved its
/// descriptor number, which the blocking architectures' tests rely on.
fn wait_in_accept(prefix: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
            let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            if comm.starts_with(prefix) {
                let sc = std::fs::read_to_string(task.path().join("syscall")).unwrap_or_default();
                if sc.split_whitespace().next() == Some("288") {
                    return;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("no {prefix}* thread blocked in accept4 after 5 s");
}

#[test]
fn emfile_in_accept_backs_off_and_recovers() {
    // One process, one descriptor limit: the architectures take turns.
    let arches = [
        Arch::ThreadPerConn,
        Arch::Reactor {
            poller: Poller::Select,
        },
        Arch::Reactor {
            poller: Poller::Poll,
        },
        Arch::Reactor {
            poller: Poller::Epoll,
        },
        Arch::Async {
            runtime: Runtime::CurrentThread,
        },
        Arch::Async {
            runtime: Runtime::Multi,
        },
    ];
    for arch in arches {
        eprintln!("{arch:?}");
        emfile_with(arch);
    }
    eprintln!("Pool");
    pool_serves_with_descriptors_exhausted();
}

/// A pool never meets EMFILE in accept: a free handler is blocked in accept(2) holding the
/// descriptor number the kernel reserved for it, and a busy handler does not accept. What must
/// hold is that it keeps serving while the process has no descriptor to spare: connection after
/// connection, each taking the descriptor the previous one released.
fn pool_serves_with_descriptors_exhausted() {
    let server = start(ServerConfig {
        workers: 1,
        arch: Arch::Pool { handlers: 1 },
        ..ServerConfig::default()
    })
    .unwrap();
    wait_in_accept("serve-pool");
    let saved = nofile();
    set_nofile(&libc::rlimit {
        rlim_cur: 256.min(saved.rlim_cur),
        rlim_max: saved.rlim_max,
    });
    let mut fillers = Vec::new();
    while let Ok(f) = File::open("/dev/null") {
        fillers.push(f);
    }
    // One descriptor to spare for the whole loop: each client takes it and gives it back, and
    // the handler re-reserves its own on every accept. (Refilling here would race the handler
    // back into accept and could steal its slot.)
    fillers.pop();
    for i in 0..3 {
        let mut c = TcpStream::connect(server.local_addr()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c.write_all(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut got = Vec::new();
        c.read_to_end(&mut got).expect("served");
        assert!(got.starts_with(b"HTTP/1.1 200 OK\r\n"), "client {i}");
    }
    drop(fillers);
    set_nofile(&saved);
    let st = server.stats();
    assert_eq!(st.accepted, 3);
    assert_eq!(
        st.accept_errors, 0,
        "the reserved descriptor was always there"
    );
    server.stop();
}

/// select and poll must also stop *watching* the listener during the back-off (they are
/// level-triggered: a listener with a queued connection is reported on every call), and watch
/// it again afterwards.
fn emfile_with(poller: Arch) {
    let server = start(ServerConfig {
        workers: 1,
        arch: poller,
        ..ServerConfig::default()
    })
    .unwrap();
    let mut stat = server_stats_files();
    if poller == Arch::ThreadPerConn {
        wait_in_accept("serve-acceptor");
    }
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
    // A thread blocked in accept(2) has already taken its descriptor number (the kernel reserves
    // it before it waits), so a blocking architecture admits one connection more before its
    // accept finds none. Free exactly one descriptor per client: the clients' sockets take them
    // all, and the server's (next) accept fails.
    let reserved = usize::from(matches!(poller, Arch::ThreadPerConn | Arch::Pool { .. }));
    let mut clients = Vec::new();
    for _ in 0..=reserved {
        fillers.pop();
        let mut client = TcpStream::connect(server.local_addr()).unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        client.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        clients.push(client);
    }

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
    assert_eq!(later.accepted, reserved as u64, "{poller:?}");
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
    for client in clients.iter_mut() {
        let mut got = Vec::new();
        let mut buf = [0u8; 1024];
        while !got.ends_with(b"hello from headroom\n") {
            let n = client.read(&mut buf).expect("served after recovery");
            assert!(n > 0, "{poller:?}: closed instead of served");
            got.extend_from_slice(&buf[..n]);
        }
        assert!(got.starts_with(b"HTTP/1.1 200 OK\r\n"));
        // Done with it: the pool's single handler is free for the next client.
        let _ = client.shutdown(std::net::Shutdown::Both);
    }
    // Counters are published per round and may lag the network a little.
    let settle = Instant::now() + Duration::from_secs(2);
    while server.stats().accepted < 1 + reserved as u64 && Instant::now() < settle {
        std::thread::sleep(Duration::from_millis(5));
    }
    let st = server.stats();
    assert_eq!(st.accepted, 1 + reserved as u64, "{poller:?}");
    assert_eq!(st.errors, st.accept_errors);
    server.stop();
}
