//! One test at a time uses the network namespaces of `scripts/netns.sh`: `up` first removes
//! every hr-agent-* namespace, so two tests (two test binaries run at once, or two tests of
//! one binary on their threads) would tear down each other's hosts. Each holds this lock, a
//! `flock` on one file in /tmp, from before `netns.sh up` until after `netns.sh down`.

use std::fs::File;
use std::os::unix::io::AsRawFd;
use std::time::{Duration, Instant};

const LOCK_FILE: &str = "/tmp/headroom-netns.lock";
/// Longer than any test that holds it takes.
const WAIT: Duration = Duration::from_secs(600);

/// The lock, held until dropped (closing the file releases it, even if the test panics or the
/// process dies).
pub struct NetnsLock(File);

pub fn netns_lock() -> NetnsLock {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(LOCK_FILE)
        .unwrap_or_else(|e| panic!("open {LOCK_FILE}: {e}"));
    let until = Instant::now() + WAIT;
    // Each open() is its own open file description, so this also excludes the other threads
    // of this process.
    while unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        assert!(
            Instant::now() < until,
            "another test held {LOCK_FILE} (the network namespaces) for over {}s",
            WAIT.as_secs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    NetnsLock(f)
}

/// Namespaces hr-agent-1..n of `scripts/netns.sh`, made under the lock; removed (and the lock
/// released) when dropped.
pub struct Netns {
    _lock: NetnsLock,
}

impl Netns {
    pub fn up(n: usize) -> Netns {
        assert!(
            unsafe { libc::geteuid() } == 0,
            "this test makes network namespaces and needs root: run `sudo scripts/test`, or the \
             test alone with `sudo -E cargo test --release -p headroom --test NAME` (CI runs as \
             root)"
        );
        let lock = netns_lock();
        let out = std::process::Command::new(super::repo_root().join("scripts/netns.sh"))
            .args(["up", &n.to_string()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "scripts/netns.sh up {n}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Netns { _lock: lock }
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = std::process::Command::new(super::repo_root().join("scripts/netns.sh"))
            .arg("down")
            .output();
    }
}
