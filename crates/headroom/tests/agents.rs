//! Distributed runs end to end: the real `headroom` binary as controller and as agents (local
//! child processes, and agents this test starts itself), loading `headroom serve` on loopback.
//! The agents in separate network namespaces are in `agents_netns.rs` (they need root).

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{headroom, run_json, Agent};

fn agents_file(agents: &[&Agent]) -> tempfile::NamedTempFile {
    let f = tempfile::NamedTempFile::new().unwrap();
    let text: String = std::iter::once("# test agents\n".to_string())
        .chain(agents.iter().map(|a| format!("{}\n", a.addr)))
        .collect();
    std::fs::write(f.path(), text).unwrap();
    f
}

#[test]
fn local_agents_split_the_users_and_their_counts_add_up_exactly() {
    let server = common::serve();
    let url = format!("http://{}/", server.local_addr());
    // 6 users of 50 requests over 3 agents of one thread: exactly 300 requests, 6 connections.
    let (v, out) = run_json(
        &url,
        &["-c", "6", "--per-user", "50", "--agents", "local:3"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(v["agents"]["count"], 3, "{v}");
    assert_eq!(v["agents"]["lost"].as_array().unwrap().len(), 0);
    assert_eq!(v["requests"], 300, "{v}");
    assert_eq!(v["responses"], 300);
    assert_eq!(v["latency_us"]["count"], 300, "{v}");
    assert_eq!(server.stats().requests, 300);
    assert_eq!(v["connections_peak"], 6, "{v}");
    assert_eq!(v["errors_total"], 0, "{v}");
}

#[test]
fn agents_from_a_file_run_a_scenario_and_one_killed_mid_run_is_reported() {
    let server = common::serve();
    let token = "test-token-file-agents";
    let agents = [
        Agent::start(token),
        Agent::start(token),
        Agent::start(token),
    ];
    let list = agents_file(&agents.iter().collect::<Vec<_>>());
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("s.yaml");
    std::fs::write(
        &scenario,
        format!(
            "servers: [{{host: 127.0.0.1, port: {}}}]\n\
             load: {{users: [{{count: 6}}]}}\n\
             sessions: [{{name: s, steps: [{{request: GET /}}, {{think: 20ms}}]}}]\n",
            server.local_addr().port()
        ),
    )
    .unwrap();
    let out_dir = dir.path().join("run");
    let mut run = headroom()
        .args([
            "run",
            scenario.to_str().unwrap(),
            "-d",
            "8s",
            "-q",
            "--no-report",
        ])
        .args(["--agents", &format!("file:{}", list.path().display())])
        .arg("--out")
        .arg(&out_dir)
        .env("HEADROOM_TOKEN", token)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Kill agent 2 (of 3) once the load has run for a while.
    std::thread::sleep(Duration::from_millis(5500));
    let mut victim = agents.into_iter().collect::<Vec<_>>();
    let killed = victim.remove(1);
    let killed_addr = killed.addr.clone();
    drop(killed); // SIGKILL
    let until = Instant::now() + Duration::from_secs(40);
    let status = loop {
        if let Some(s) = run.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < until, "the controller did not finish");
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = run.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(status.success(), "continue is the default: {stderr}");
    assert!(
        stderr.contains(&format!("agent {killed_addr} was lost")),
        "{stderr}"
    );
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("summary.json")).unwrap()).unwrap();
    let lost = v["agents"]["lost"].as_array().unwrap();
    assert_eq!(lost.len(), 1, "{v}");
    assert_eq!(lost[0]["name"], killed_addr.as_str());
    // Its intervals until the kill were kept: it ran ~3 s of load (the start is 2 s after the
    // agents are connected).
    assert!(lost[0]["after_interval"].as_u64().unwrap() >= 1, "{v}");
    assert!(
        lost[0]["why"]
            .as_str()
            .unwrap()
            .contains("connection broke"),
        "{v}"
    );
    let intervals = std::fs::read_to_string(out_dir.join("intervals.jsonl")).unwrap();
    assert!(intervals.lines().count() >= 7, "{intervals}");
    assert!(v["responses"].as_u64().unwrap() > 100, "{v}");
    assert_eq!(v["errors_total"], 0, "{v}");
}

#[test]
fn an_agent_refuses_a_controller_without_its_token() {
    let server = common::serve();
    let agent = Agent::start("the-right-token");
    let list = agents_file(&[&agent]);
    let out = headroom()
        .args(["run", &format!("http://{}/", server.local_addr())])
        .args(["-c", "2", "-d", "2s", "-q"])
        .args(["--agents", &format!("file:{}", list.path().display())])
        .env("HEADROOM_TOKEN", "a-wrong-token")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&agent.addr), "{stderr}");
    assert!(stderr.contains("token"), "{stderr}");
    // The preflight's one connection at most: no load was sent.
    assert_eq!(server.stats().requests, 0);
}

#[test]
fn an_agent_without_a_token_does_not_start() {
    let out = headroom()
        .args(["agent", "--listen", "127.0.0.1:0"])
        .env_remove("HEADROOM_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs a token"));
}

#[test]
fn bad_agent_specs_are_usage_errors() {
    for (spec, says) in [
        ("local:0", "between 1 and 256"),
        ("local:x", "must be a number"),
        ("tcp://h", "use local:N"),
        ("file:", "no file name"),
    ] {
        let out = headroom()
            .args([
                "run",
                "http://127.0.0.1:9/",
                "--agents",
                spec,
                "--no-preflight",
            ])
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{spec}: {e}");
        assert!(e.contains(says), "{spec}: {e}");
    }
}

#[test]
fn ctrl_c_at_the_controller_keeps_every_agents_last_interval() {
    let server = common::serve();
    let url = format!("http://{}/", server.local_addr());
    let run = headroom()
        .args(["run", &url, "-c", "4", "-d", "60s", "--json", "-q"])
        .args(["--agents", "local:2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // 2 s to start the agents and the load, then ~1.5 s of load: Ctrl-C mid-interval.
    std::thread::sleep(Duration::from_millis(3500));
    unsafe {
        libc::kill(run.id() as libc::pid_t, libc::SIGINT);
    }
    let asked = Instant::now();
    let out = run.wait_with_output().unwrap();
    assert!(
        asked.elapsed() < Duration::from_secs(15),
        "the stop took {:?}",
        asked.elapsed()
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no summary ({e}): {stderr}"));
    assert_eq!(v["interrupted"], true, "{v}");
    assert_eq!(v["agents"]["lost"].as_array().unwrap().len(), 0, "{v}");
    let responses = v["responses"].as_u64().unwrap();
    let in_flight = v["in_flight"].as_u64().unwrap();
    let served = server.stats().requests;
    assert!(responses > 100, "{v}");
    // Every response the server sent is counted, but for those in flight at the stop: nothing
    // of the agents' last (partial) intervals is lost.
    assert!(
        served >= responses && served - responses <= in_flight + 4,
        "server answered {served}, the merged summary counts {responses} (+{in_flight} in flight)"
    );
}

#[test]
fn on_agent_loss_stop_ends_the_run_and_fails_it() {
    let server = common::serve();
    let token = "test-token-stop";
    let mut agents = vec![Agent::start(token), Agent::start(token)];
    let list = agents_file(&agents.iter().collect::<Vec<_>>());
    let run = headroom()
        .args(["run", &format!("http://{}/", server.local_addr())])
        .args([
            "-c",
            "4",
            "-d",
            "30s",
            "--json",
            "-q",
            "--on-agent-loss",
            "stop",
        ])
        .args(["--agents", &format!("file:{}", list.path().display())])
        .env("HEADROOM_TOKEN", token)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(4000));
    let killed = agents.remove(0);
    let killed_addr = killed.addr.clone();
    drop(killed);
    let asked = Instant::now();
    let out = run.wait_with_output().unwrap();
    assert!(
        asked.elapsed() < Duration::from_secs(15),
        "took {:?}",
        asked.elapsed()
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("an agent was lost"), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["interrupted"], true, "{v}");
    assert_eq!(v["agents"]["stopped_by_loss"], true, "{v}");
    assert_eq!(v["agents"]["lost"][0]["name"], killed_addr.as_str(), "{v}");
    // The agent left was asked to stop and its last interval kept: the server answered no more
    // than the summary counts, but for requests in flight.
    let served = server.stats().requests;
    let responses = v["responses"].as_u64().unwrap();
    assert!(responses > 100, "{v}");
    assert!(served >= responses, "{served} < {responses}");
}
