//! Agents started over SSH by a real OpenSSH server (Debian's openssh-server), run by this test
//! inside a network namespace it makes (`scripts/netns.sh`: hr-agent-1 at 10.203.0.11, a bridge
//! at 10.203.0.1 in the root namespace, no route off the machine). sshd has a private config in a
//! temporary directory: its own host key, one authorized client key the test generated, no
//! passwords, no PAM; nothing of the machine's own ssh setup is used or started.
//!
//! The controller runs in the root namespace with `--agents ssh://root@10.203.0.11:2222` and
//! loads a server on the bridge address that counts requests by source address. Checked: the
//! load came from 10.203.0.11 (the agent ran in the namespace, started over ssh); the token is on
//! no command line (nor in the agent's environment) on the "remote" host; the agent ends with the
//! controller; a key sshd refuses fails the run at once, naming the agent.
//!
//! Needs root (network namespaces) and /usr/sbin/sshd: `sudo scripts/test` installs and runs it
//! (CI runs as root). Alone: `sudo -E cargo test --release -p headroom --test agents_ssh`.

mod common;

use std::collections::HashMap;
use std::io::Read;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::netns_lock::Netns;
use common::source_server::SourceServer;
use common::{headroom, repo_root};

const SSHD: &str = "/usr/sbin/sshd";
const HOST: &str = "10.203.0.11";
const PORT: u16 = 2222;
const AGENT: &str = "ssh://root@10.203.0.11:2222";

/// Namespace hr-agent-1 (under the lock), after checking sshd is there.
fn netns_with_sshd() -> Netns {
    assert!(
        Path::new(SSHD).exists(),
        "{SSHD} is missing: apt-get install openssh-server (scripts/test does, and keeps the \
         system's sshd from starting)"
    );
    Netns::up(1)
}

/// Keys and config of a private sshd, in a temporary directory.
struct SshFiles {
    dir: tempfile::TempDir,
}

impl SshFiles {
    fn new() -> SshFiles {
        let dir = tempfile::Builder::new()
            .prefix("headroom-sshd-")
            .tempdir()
            .unwrap();
        let f = SshFiles { dir };
        for key in ["host_key", "client_key", "wrong_key"] {
            let out = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-C", "headroom-test", "-f"])
                .arg(f.path(key))
                .output()
                .expect("ssh-keygen (Debian: openssh-client)");
            assert!(out.status.success(), "ssh-keygen: {out:?}");
        }
        std::fs::copy(f.path("client_key.pub"), f.path("authorized_keys")).unwrap();
        let config = format!(
            "ListenAddress {HOST}\n\
             Port {PORT}\n\
             HostKey {host_key}\n\
             PidFile {pid}\n\
             AuthorizedKeysFile {auth}\n\
             PermitRootLogin prohibit-password\n\
             PubkeyAuthentication yes\n\
             PasswordAuthentication no\n\
             KbdInteractiveAuthentication no\n\
             UsePAM no\n\
             StrictModes no\n\
             PermitUserEnvironment no\n\
             LogLevel DEBUG1\n",
            host_key = f.path("host_key").display(),
            pid = f.path("sshd.pid").display(),
            auth = f.path("authorized_keys").display(),
        );
        std::fs::write(f.path("sshd_config"), config).unwrap();
        f
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.path("sshd.log")).unwrap_or_default()
    }

    /// HEADROOM_SSH_OPTS for the client key `key`: nothing of ~/.ssh (config, known hosts,
    /// other keys) is read or written.
    fn ssh_opts(&self, key: &str) -> String {
        format!(
            "-F /dev/null -i {} -o IdentitiesOnly=yes -o StrictHostKeyChecking=no \
             -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR",
            self.path(key).display()
        )
    }
}

/// sshd in namespace hr-agent-1, listening on 10.203.0.11:2222; stopped when dropped.
struct Sshd {
    child: Child,
}

impl Sshd {
    fn start(files: &SshFiles) -> Sshd {
        // The privilege separation directory sshd insists on (the package's service would make
        // it; that service is not run here).
        std::fs::create_dir_all("/run/sshd").unwrap();
        // `ip netns exec` execs sshd (-D: no daemon), so the child is sshd itself.
        let mut child = Command::new(repo_root().join("scripts/netns.sh"))
            .args(["exec", "1", SSHD, "-D", "-e", "-f"])
            .arg(files.path("sshd_config"))
            .arg("-E")
            .arg(files.path("sshd.log"))
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let addr: SocketAddr = format!("{HOST}:{PORT}").parse().unwrap();
        let until = Instant::now() + Duration::from_secs(15);
        loop {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_ok() {
                return Sshd { child };
            }
            if let Ok(Some(st)) = child.try_wait() {
                panic!("sshd exited ({st}) before listening:\n{}", files.log());
            }
            if Instant::now() > until {
                let _ = child.kill();
                let _ = child.wait();
                panic!("sshd did not listen on {addr} within 15s:\n{}", files.log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until && matches!(self.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A process seen in namespace hr-agent-1.
#[derive(Debug, Clone)]
struct Seen {
    pid: u32,
    cmdline: String,
    environ: String,
}

/// The inode of a network namespace, as /proc/PID/ns/net names it (`net:[INODE]`).
fn netns_inode(name: &str) -> u64 {
    std::fs::metadata(format!("/run/netns/{name}"))
        .unwrap_or_else(|e| panic!("/run/netns/{name}: {e}"))
        .ino()
}

/// Every process now in the network namespace whose inode is `ns`.
fn processes_in(ns: u64) -> Vec<Seen> {
    let want = format!("net:[{ns}]");
    let mut seen = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(link) = std::fs::read_link(e.path().join("ns/net")) else {
            continue;
        };
        if link.to_string_lossy() != want {
            continue;
        }
        let read = |f: &str| {
            std::fs::read(e.path().join(f))
                .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
                .unwrap_or_default()
        };
        seen.push(Seen {
            pid,
            cmdline: read("cmdline"),
            environ: read("environ"),
        });
    }
    seen
}

fn is_our_agent(p: &Seen) -> bool {
    p.cmdline
        .starts_with(&format!("{} agent ", env!("CARGO_BIN_EXE_headroom")))
}

/// Samples the processes of a namespace every few milliseconds until stopped: each (pid, command
/// line) seen.
struct Watch {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Vec<Seen>>,
}

impl Watch {
    fn start(ns: u64) -> Watch {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            // By pid and command line: a pid is first seen as the shell sshd starts, then as the
            // program that shell execs.
            let mut all: HashMap<(u32, String), Seen> = HashMap::new();
            let until = Instant::now() + Duration::from_secs(120);
            while !s.load(Ordering::Relaxed) && Instant::now() < until {
                for p in processes_in(ns) {
                    all.entry((p.pid, p.cmdline.clone())).or_insert(p);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            all.into_values().collect()
        });
        Watch { stop, thread }
    }

    fn finish(self) -> Vec<Seen> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

/// Run `cmd` to its end, killing it after `limit`.
fn output_within(mut cmd: Command, limit: Duration) -> (Output, Duration) {
    let t0 = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let o = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = out.read_to_end(&mut b);
        b
    });
    let e = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = err.read_to_end(&mut b);
        b
    });
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the controller did not finish within {}s; stderr: {}",
                limit.as_secs(),
                String::from_utf8_lossy(&e.join().unwrap())
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed = t0.elapsed();
    let out = Output {
        status,
        stdout: o.join().unwrap(),
        stderr: e.join().unwrap(),
    };
    (out, elapsed)
}

/// Wait (bounded) until no agent of this test's binary is left in namespace `ns`.
fn assert_no_agent_left(ns: u64) {
    let until = Instant::now() + Duration::from_secs(15);
    loop {
        let left: Vec<Seen> = processes_in(ns).into_iter().filter(is_our_agent).collect();
        if left.is_empty() {
            return;
        }
        if Instant::now() > until {
            for p in &left {
                unsafe {
                    libc::kill(p.pid as libc::pid_t, libc::SIGKILL);
                }
            }
            panic!("the agent outlived its controller by 15s: {left:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_agent_started_over_ssh_loads_from_its_host_and_ends_with_the_controller() {
    let _ns = netns_with_sshd();
    let files = SshFiles::new();
    let _sshd = Sshd::start(&files);
    let server = SourceServer::start("10.203.0.1");
    let ns = netns_inode("hr-agent-1");
    let token = "ssh-test-token-4f0c2a9e";

    let watch = Watch::start(ns);
    let mut cmd = headroom();
    cmd.args(["run", &format!("http://10.203.0.1:{}/", server.port)])
        .args(["-c", "4", "--per-user", "25", "--json", "-q"])
        .args(["--agents", AGENT])
        .env("HEADROOM_TOKEN", token)
        .env("HEADROOM_SSH_OPTS", files.ssh_opts("client_key"))
        .env("HEADROOM_REMOTE_BIN", env!("CARGO_BIN_EXE_headroom"));
    let (out, took) = output_within(cmd, Duration::from_secs(90));
    let seen = watch.finish();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "exit {:?}: {stderr}\nsshd log:\n{}",
        out.status.code(),
        files.log()
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["responses"], 100, "{v}");
    assert_eq!(v["agents"]["count"], 1, "{v}");
    assert_eq!(v["errors_total"], 0, "{v}");

    // Every request came from the namespace's address: the agent ran there, started by sshd.
    let by = server.by_source.lock().unwrap().clone();
    let host: IpAddr = HOST.parse().unwrap();
    assert_eq!(by.get(&host), Some(&100), "requests by source: {by:?}");
    assert_eq!(by.len(), 1, "requests by source: {by:?}");

    // The agent was seen in the namespace (started by sshd there).
    let agents: Vec<&Seen> = seen.iter().filter(|p| is_our_agent(p)).collect();
    let cmdlines: Vec<&str> = seen.iter().map(|p| p.cmdline.as_str()).collect();
    assert_eq!(
        agents.len(),
        1,
        "agent processes seen: {agents:?} of {cmdlines:?}"
    );
    assert!(
        agents[0].cmdline.contains("--token-file -"),
        "{:?}",
        agents[0].cmdline
    );
    // The token is on no command line on that host (visible to all its users), nor in the
    // agent's environment: it went through ssh's standard input.
    for p in &seen {
        assert!(
            !p.cmdline.contains(token),
            "the token is on a command line: pid {} {:?}",
            p.pid,
            p.cmdline
        );
    }
    assert!(
        !agents[0].environ.contains(token),
        "the token is in the agent's environment"
    );
    assert!(!files.log().contains(token), "the token is in sshd's log");

    // The controller is gone, and so is its agent: its stdin ended when the ssh session did.
    assert_no_agent_left(ns);
    eprintln!(
        "agents_ssh: 100 responses from {HOST} via {AGENT} in {:.1}s; {} processes seen in the \
         namespace, none with the token",
        took.as_secs_f64(),
        seen.len()
    );
}

#[test]
fn a_key_sshd_refuses_fails_the_run_at_once_naming_the_agent() {
    let _ns = netns_with_sshd();
    let files = SshFiles::new();
    let _sshd = Sshd::start(&files);
    let server = SourceServer::start("10.203.0.1");
    let ns = netns_inode("hr-agent-1");

    let mut cmd = headroom();
    cmd.args(["run", &format!("http://10.203.0.1:{}/", server.port)])
        .args(["-c", "4", "--per-user", "25", "--json", "-q"])
        .args(["--agents", AGENT])
        .env("HEADROOM_TOKEN", "ssh-test-token-wrong-key")
        .env("HEADROOM_SSH_OPTS", files.ssh_opts("wrong_key"))
        .env("HEADROOM_REMOTE_BIN", env!("CARGO_BIN_EXE_headroom"));
    let (out, took) = output_within(cmd, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("agent {AGENT} did not start")),
        "the error names the agent: {stderr}"
    );
    assert!(
        stderr.contains("Permission denied"),
        "ssh's reason: {stderr}"
    );
    assert!(
        took < Duration::from_secs(20),
        "a refused login fails at once, not after the start timeout: {took:?}"
    );
    assert!(out.stdout.is_empty(), "no summary without agents");
    assert!(
        server.by_source.lock().unwrap().is_empty(),
        "no load was sent"
    );
    assert_no_agent_left(ns);
}
