//! Agents as separate hosts: each agent runs in a network namespace this test makes
//! (`scripts/netns.sh`: namespaces hr-agent-I at 10.203.0.(10+I), joined by veth pairs to a
//! bridge at 10.203.0.1 in the root namespace, with no route off the machine). The controller
//! runs in the root namespace and loads a server listening on the bridge address; the test
//! checks that the load really came from the agents' addresses, that the counts add up, and that
//! an agent killed mid-run is reported while the others finish. Needs root (CI runs as root).
//! The agents listen beyond loopback, so over TLS (a self-signed pair each): their `listening`
//! lines, fingerprint included, are the agents file the controller pins them by.

mod common;

use std::net::IpAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::netns_lock::Netns;
use common::source_server::SourceServer;
use common::{agent_address, headroom, repo_root};

/// `headroom agent` inside namespace `i`, listening on its address.
struct NsAgent {
    child: Child,
    /// HOST:PORT.
    addr: String,
    /// HOST:PORT sha256:FINGERPRINT, as it printed it.
    line: String,
}

impl NsAgent {
    fn start(i: usize, token: &str) -> NsAgent {
        let mut child = Command::new(repo_root().join("scripts/netns.sh"))
            .args(["exec", &i.to_string(), env!("CARGO_BIN_EXE_headroom")])
            .args(["agent", "--listen", &format!("10.203.0.{}:0", 10 + i)])
            .arg("--tls-self-signed")
            .env("HEADROOM_TOKEN", token)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let line = agent_address(&mut child, &format!("the agent in namespace {i}"));
        let addr = line.split_whitespace().next().unwrap().to_string();
        assert!(line.contains(" sha256:"), "a TLS agent: {line}");
        NsAgent { child, addr, line }
    }

    fn kill(&mut self) {
        // `ip netns exec` execs the agent: this is the agent's own pid.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for NsAgent {
    fn drop(&mut self) {
        self.kill();
    }
}

#[test]
fn agents_in_network_namespaces_load_a_server_and_one_killed_is_reported() {
    let _ns = Netns::up(3);
    let server = SourceServer::start("10.203.0.1");
    let token = "netns-test-token";
    let mut agents: Vec<NsAgent> = (1..=3).map(|i| NsAgent::start(i, token)).collect();
    let list = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        list.path(),
        agents
            .iter()
            .map(|a| format!("{}\n", a.line))
            .collect::<String>(),
    )
    .unwrap();
    let url = format!("http://10.203.0.1:{}/", server.port);
    let agents_arg = format!("file:{}", list.path().display());

    // 1. Three hosts, 9 users of 40 requests: exactly 360, 120 from each namespace.
    let out = headroom()
        .args(["run", &url, "-c", "9", "--per-user", "40", "--json", "-q"])
        .args(["--agents", &agents_arg])
        .env("HEADROOM_TOKEN", token)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["responses"], 360, "{v}");
    assert_eq!(v["agents"]["count"], 3);
    let by = server.by_source.lock().unwrap().clone();
    for i in 1..=3u8 {
        let ip: IpAddr = format!("10.203.0.{}", 10 + i).parse().unwrap();
        assert_eq!(by.get(&ip), Some(&120), "requests by source: {by:?}");
    }
    assert_eq!(by.len(), 3, "only the namespaces' addresses: {by:?}");

    // 2. The agent of namespace 3 killed mid-run: reported, its data kept, the run goes on.
    let mut run = headroom()
        .args(["run", &url, "-c", "6", "-d", "8s", "--json", "-q"])
        .args(["--agents", &agents_arg])
        .env("HEADROOM_TOKEN", token)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(5500));
    agents[2].kill();
    let until = Instant::now() + Duration::from_secs(40);
    while run.try_wait().unwrap().is_none() {
        assert!(Instant::now() < until, "the controller did not finish");
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = run.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let lost = v["agents"]["lost"].as_array().unwrap();
    assert_eq!(lost.len(), 1, "{v}");
    assert_eq!(lost[0]["name"], agents[2].addr.as_str());
    assert!(lost[0]["after_interval"].as_u64().unwrap() >= 1, "{v}");
    assert!(stderr.contains("was lost"), "{stderr}");
    assert_eq!(v["errors_total"], 0, "{v}");
}
