//! Issue 18 ("hardening"), the agents' side: an agent stopped by a signal is a lost agent
//! (finding 7); tokens, refused attempts and unauthenticated uploads (findings 1 and 8); the
//! token written to no output (finding 3).

mod common;

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{agent_address, headroom};

/// A `headroom agent` this test started, killed when dropped.
struct Agent {
    child: Child,
    addr: String,
}

impl Agent {
    fn start(token: &str) -> Agent {
        let mut child = headroom()
            .args(["agent", "--listen", "127.0.0.1:0"])
            .env("HEADROOM_TOKEN", token)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn headroom agent");
        let addr = agent_address(&mut child, "the agent");
        Agent { child, addr }
    }

    fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, sig);
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn agents_file(agents: &[&Agent]) -> tempfile::NamedTempFile {
    let f = tempfile::NamedTempFile::new().unwrap();
    let text: String = agents.iter().map(|a| format!("{}\n", a.addr)).collect();
    std::fs::write(f.path(), text).unwrap();
    f
}

fn wait_exit(child: &mut Child, within: Duration) -> std::process::ExitStatus {
    let until = Instant::now() + within;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(Instant::now() < until, "the process did not finish in time");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Finding 7: an agent stopped by SIGTERM mid-run ended the run early, exit 0, silently, even
/// under `--on-agent-loss stop`. It is a lost agent: reported on stderr and in summary.json, and
/// `stop` exits 1.
#[test]
fn an_agent_stopped_by_sigterm_is_lost_and_stop_exits_1() {
    let server = common::serve();
    let token = "hardening-token-sigterm-0123456789";
    for on_loss in ["continue", "stop"] {
        let agents = [Agent::start(token), Agent::start(token)];
        let list = agents_file(&[&agents[0], &agents[1]]);
        let dir = tempfile::tempdir().unwrap();
        let out_dir = dir.path().join("run");
        let mut run = headroom()
            .args(["run", &format!("http://{}/", server.local_addr())])
            .args(["-c", "4", "--rate", "200", "-d", "8s", "-q", "--no-report"])
            .args(["--agents", &format!("file:{}", list.path().display())])
            .args(["--on-agent-loss", on_loss])
            .arg("--out")
            .arg(&out_dir)
            .env("HEADROOM_TOKEN", token)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The load starts 2 s after the agents are connected: SIGTERM agent 2 two seconds in.
        std::thread::sleep(Duration::from_millis(4000));
        agents[1].signal(libc::SIGTERM);
        let status = wait_exit(&mut run, Duration::from_secs(40));
        let out = run.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("agent {} was lost", agents[1].addr)),
            "{on_loss}: {stderr}"
        );
        let v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out_dir.join("summary.json")).unwrap()).unwrap();
        let lost = v["agents"]["lost"].as_array().unwrap();
        assert_eq!(lost.len(), 1, "{on_loss}: {v}");
        assert_eq!(lost[0]["name"], agents[1].addr.as_str());
        if on_loss == "stop" {
            assert_eq!(status.code(), Some(1), "{stderr}");
        } else {
            assert_eq!(status.code(), Some(0), "{stderr}");
            // The other agent went on to the end: the run lasted its 8 s.
            let intervals = std::fs::read_to_string(out_dir.join("intervals.jsonl")).unwrap();
            assert!(intervals.lines().count() >= 7, "{intervals}");
        }
    }
}
