//! What an agent's job carries: a typed spec with every file inside as bytes, never a command
//! line or a path. Real `headroom agent` processes (started in a directory of their own, where
//! none of the controller's files are), a controller (the `headroom run --agents` binary, or
//! `headroom_dist::run_controller` with a hand-made job), and a capturing server on loopback.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{headroom, Agent, TestServer};
use headroom_core::spec::{RunSpec, ScenarioSpec, Target};

/// One request as the server read it: its request line and its body.
#[derive(Debug, Clone)]
struct Seen {
    line: String,
    body: Vec<u8>,
}

/// A keep-alive server that keeps every request (line and Content-Length body) and answers 200.
fn capturing_server() -> (TestServer, Arc<Mutex<Vec<Seen>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let server = TestServer::start(move |c| {
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut w = c.try_clone().unwrap();
        let mut r = BufReader::new(c);
        loop {
            let mut line = String::new();
            if r.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let mut len = 0usize;
            loop {
                let mut h = String::new();
                if r.read_line(&mut h).unwrap_or(0) == 0 {
                    return;
                }
                if h == "\r\n" {
                    break;
                }
                if let Some((k, v)) = h.split_once(':') {
                    if k.eq_ignore_ascii_case("content-length") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                }
            }
            let mut body = vec![0u8; len.min(1 << 20)];
            if r.read_exact(&mut body).is_err() {
                return;
            }
            s.lock().unwrap().push(Seen {
                line: line.trim_end().to_string(),
                body,
            });
            if w.write_all(common::OK).is_err() {
                return;
            }
        }
    });
    (server, seen)
}

fn agents_file(dir: &std::path::Path, agents: &[&Agent]) -> std::path::PathBuf {
    let f = dir.join("agents.txt");
    let text: String = agents.iter().map(|a| format!("{}\n", a.addr)).collect();
    std::fs::write(&f, text).unwrap();
    f
}

#[test]
fn a_body_file_and_csv_feeders_reach_the_agents_as_bytes() {
    let token = "test-token-agent-jobs-bytes";
    let agents = [
        Agent::start_in_empty_dir(token),
        Agent::start_in_empty_dir(token),
    ];
    let (server, seen) = capturing_server();
    // The controller's files live in its own directory, named relative to it; the agents run
    // elsewhere, so they can only have what the job carried.
    let dir = tempfile::tempdir().unwrap();
    let list = agents_file(dir.path(), &[&agents[0], &agents[1]]);
    let body: Vec<u8> = (0..=255u8).cycle().take(3000).collect();
    std::fs::write(dir.path().join("body.bin"), &body).unwrap();
    let out = headroom()
        .current_dir(dir.path())
        .args(["run", &server.url(), "-m", "POST", "--body", "@body.bin"])
        .args(["-c", "2", "--per-user", "3", "-q", "--json"])
        .args(["--agents", &format!("file:{}", list.display())])
        .env("HEADROOM_TOKEN", token)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["agents"]["count"], 2, "{v}");
    assert_eq!(v["responses"], 6, "{v}");
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 6, "{seen:?}");
        for s in seen.iter() {
            assert!(s.line.starts_with("POST / "), "{s:?}");
            assert_eq!(s.body, body, "every agent sent the file's bytes");
        }
    }
    seen.lock().unwrap().clear();

    // A scenario whose users come from a CSV file in a subdirectory of the scenario's.
    std::fs::create_dir(dir.path().join("data")).unwrap();
    std::fs::write(dir.path().join("data/users.csv"), "ann\nbob\ncid\ndee\n").unwrap();
    std::fs::write(
        dir.path().join("s.yaml"),
        format!(
            "servers: [{{host: 127.0.0.1, port: {}}}]\n\
             load: {{users: [{{count: 4}}]}}\n\
             sessions:\n\
             \x20 - name: s\n\
             \x20   steps:\n\
             \x20     - set: {{var: who, csv: {{file: data/users.csv, column: 0, order: sequential}}}}\n\
             \x20     - request: GET /u/${{who}}\n\
             \x20     - think: 50ms\n",
            server.addr.port()
        ),
    )
    .unwrap();
    let out = headroom()
        .current_dir(dir.path())
        .args(["run", "s.yaml", "-d", "2s", "-q", "--json"])
        .args(["--agents", &format!("file:{}", list.display())])
        .env("HEADROOM_TOKEN", token)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["errors_total"], 0, "{v}");
    let seen = seen.lock().unwrap();
    assert!(seen.len() >= 8, "{seen:?}");
    let mut names: Vec<&str> = seen
        .iter()
        .map(|s| {
            s.line
                .strip_prefix("GET /u/")
                .and_then(|r| r.split(' ').next())
                .unwrap_or_else(|| panic!("{s:?}"))
        })
        .collect();
    names.sort();
    names.dedup();
    assert_eq!(
        names,
        ["ann", "bob", "cid", "dee"],
        "the CSV's rows, read by the agents from the job"
    );
}

/// Runs a hand-made job on one agent; the controller's outcome or its error.
fn run_job(agent: &Agent, token: &str, spec: RunSpec) -> Result<u64, String> {
    agent
        .run_hand_made_job(
            token,
            spec,
            headroom_dist::ControllerOpts {
                start_delay: Duration::from_millis(500),
                ..Default::default()
            },
        )
        .map(|o| o.outcome.total.counters.responses)
        .map_err(|e| e.to_string())
}

#[test]
fn a_hand_made_job_cannot_make_an_agent_read_a_file() {
    let token = "test-token-agent-jobs-attack";
    let agent = Agent::start_in_empty_dir(token);
    let (server, seen) = capturing_server();
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, "TOPSECRET-4711\n").unwrap();
    let attack = format!("@{}", secret.display());

    // The old attack: a body naming a file (`--body @/path`). In a spec the body is bytes; the
    // agent sends them as they are and opens nothing.
    let mut spec = RunSpec::new(Target::Url(server.url()));
    spec.method = "POST".into();
    spec.body = Some(attack.clone().into_bytes());
    spec.connections = Some(1);
    spec.per_user = Some(2);
    spec.threads = Some(1);
    assert_eq!(run_job(&agent, token, spec), Ok(2));
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 2, "{seen:?}");
        for s in seen.iter() {
            assert_eq!(s.body, attack.as_bytes(), "the text itself, not the file");
            assert!(!String::from_utf8_lossy(&s.body).contains("TOPSECRET"));
        }
    }

    // A scenario naming the file as a CSV feeder (absolute, or climbing out): the builder
    // takes files from the spec only, so the plan is refused and nothing is sent.
    for name in [secret.display().to_string(), "../../secret.txt".to_string()] {
        seen.lock().unwrap().clear();
        let yaml = format!(
            "servers: [{{host: 127.0.0.1, port: {}}}]\n\
             load: {{users: [{{count: 1}}]}}\n\
             sessions: [{{name: s, steps: [{{set: {{var: x, csv: {{file: '{name}', column: 0}}}}}}, {{request: 'GET /${{x}}'}}]}}]\n",
            server.addr.port()
        );
        let mut spec = RunSpec::new(Target::Scenario(ScenarioSpec {
            name: "hand-made.yaml".into(),
            yaml,
            files: Vec::new(),
            target: None,
        }));
        spec.duration = Some(Duration::from_secs(1));
        spec.threads = Some(1);
        let e = run_job(&agent, token, spec).unwrap_err();
        assert!(e.contains("not among the run's files"), "{name}: {e}");
        assert!(!e.contains("TOPSECRET"), "{e}");
        assert!(seen.lock().unwrap().is_empty(), "nothing was sent");
    }
    // The agent is still there for the next job.
    assert!(TcpStream::connect(&agent.addr).is_ok());
}
