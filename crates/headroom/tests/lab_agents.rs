//! `headroom lab --agents`: every load of the lab runs on agents (here `local:2`, child
//! processes of the lab) and their measurements are merged exactly, while the lab still starts,
//! samples and stops the server.

mod common;

use std::path::Path;
use std::process::Output;

use common::headroom;

fn lab(exp: &Path, out: &Path, extra: &[&str]) -> (Output, String, String) {
    let o = headroom()
        .arg("lab")
        .arg(exp)
        .arg("--output")
        .arg(out)
        .args(extra)
        .output()
        .expect("run headroom lab");
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    let stderr = String::from_utf8_lossy(&o.stderr).to_string();
    (o, stdout, stderr)
}

fn write(dir: &Path, scenario: &str, experiment: &str) -> std::path::PathBuf {
    std::fs::write(dir.join("s.yaml"), scenario).unwrap();
    let e = dir.join("e.yaml");
    std::fs::write(&e, experiment).unwrap();
    e
}

/// The value of table `metric`'s cell in row `row` of tables.csv ("# title", header, rows).
fn cell(csv: &str, metric: &str, row: &str) -> f64 {
    let mut lines = csv
        .lines()
        .skip_while(|l| !l.starts_with('#') || !l.contains(metric));
    lines.next();
    lines.next();
    lines
        .take_while(|l| !l.starts_with('#'))
        .find(|l| l.split(',').next() == Some(row))
        .and_then(|l| l.split(',').nth(1)?.parse().ok())
        .unwrap_or_else(|| panic!("no {metric} for {row} in\n{csv}"))
}

/// Two configurations on two local agents: every run is stored, and the responses the agents
/// measured are the responses the server sent (its own counter, scraped), less the scrapes.
#[test]
fn a_lab_on_local_agents_measures_what_the_server_served() {
    let tmp = tempfile::tempdir().unwrap();
    // 40 sessions of one quick request each, arriving evenly over 2s: none is in flight at the
    // end, so the client's and the server's counts must agree exactly.
    let exp = write(
        tmp.path(),
        "load: {phases: [{duration: 2s, arrival_rate: 20, arrival: constant}]}\n\
         sessions: [{name: s, steps: [{request: GET /}]}]\n",
        r#"name: agents
server:
  command: exec {headroom} serve --listen 127.0.0.1:{port} --arch {arch}
  ready: {port: "127.0.0.1:{port}"}
factors:
  arch: [reactor, pool]
load: {scenario: s.yaml, threads: 1}
monitor:
  prometheus: "http://127.0.0.1:{port}/metrics"
  series: [headroom_requests_total]
tables:
  - {metric: responses, rows: [arch], title: "responses"}
  - {metric: errors_total, rows: [arch], title: "errors"}
  - {metric: prom_headroom_requests_total, rows: [arch], title: "server responses"}
"#,
    );
    let out = tmp.path().join("out");
    let (o, stdout, stderr) = lab(&exp, &out, &["--agents", "local:2"]);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("agent local:1 at http://127.0.0.1:")
            && stderr.contains("agent local:2 at http://127.0.0.1:"),
        "{stderr}"
    );
    assert!(
        stdout.contains("2 run(s) now, 0 found stored, 0 failed"),
        "{stdout}\n{stderr}"
    );
    assert!(stdout.contains("server responses"), "{stdout}");
    assert!(!stderr.contains("warning"), "{stderr}");
    let csv = std::fs::read_to_string(out.join("tables.csv")).unwrap();
    let samples = std::fs::read_to_string(out.join("samples.csv")).unwrap();
    for arch in ["reactor", "pool"] {
        let responses = cell(&csv, "responses", arch);
        assert!(
            (38.0..=42.0).contains(&responses),
            "{arch}: {responses}\n{csv}"
        );
        assert_eq!(cell(&csv, "errors", arch), 0.0, "{arch}\n{csv}");
        // Every sample scraped /metrics once; its own response may or may not be counted in it.
        let scrapes = samples
            .lines()
            .filter(|l| l.starts_with(&format!("{arch},")))
            .count() as f64;
        let server = cell(&csv, "server responses", arch);
        assert!(
            server - scrapes == responses || server - scrapes + 1.0 == responses,
            "{arch}: server {server}, scrapes {scrapes}, agents {responses}\n{csv}\n{samples}"
        );
    }
}

/// The max-sustainable-rate search on agents: the warm-up and every probe run there, each
/// probe's figures are the agents' merged. The SLO is loose (a debug build on a busy machine is
/// slow to start), so every probe holds: 20, 40, 80/s.
#[test]
fn a_rate_search_on_local_agents_probes_each_rate() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = write(
        tmp.path(),
        "load: {users: [{count: 1}]}\nsessions: [{name: one, steps: [{request: GET /sleep/1}]}]\n",
        r#"name: rate-agents
server:
  command: exec {headroom} serve --listen 127.0.0.1:{port} --arch pool --handlers 4
  ready: {port: "127.0.0.1:{port}"}
load: {scenario: s.yaml, duration: 1s, threads: 1}
warmup: 500ms
capacity:
  rate: {from: 20, to: 640, max_probes: 3, arrival: constant, pause: 0s, slo: {p99: 2s}}
"#,
    );
    let out = tmp.path().join("out");
    let (o, stdout, stderr) = lab(&exp, &out, &["--agents", "local:2"]);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("1 run(s) now, 0 found stored, 0 failed"),
        "{stdout}\n{stderr}"
    );
    assert!(stderr.contains("probe 3 at 80.0/s: "), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    assert!(stdout.contains("rate curves"), "{stdout}");
    let curve = std::fs::read_to_string(out.join("rate-curve.csv")).unwrap();
    let header: Vec<&str> = curve.lines().next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let rows: Vec<Vec<&str>> = curve
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    assert_eq!(rows.len(), 3, "{curve}");
    for (row, rate) in rows.iter().zip([20.0, 40.0, 80.0]) {
        assert_eq!(row[col("rate")].parse::<f64>().unwrap(), rate, "{curve}");
        assert_eq!(row[col("ok")], "true", "{curve}\n{stderr}");
        assert_eq!(row[col("error_rate")], "0.0", "{curve}");
        // RATE sessions/s for 1s on two agents, merged: about RATE responses a second.
        let rps: f64 = row[col("throughput_rps")].parse().unwrap();
        assert!(
            (0.75 * rate..=1.25 * rate).contains(&rps),
            "{rate}: {rps}\n{curve}"
        );
    }
}

/// Agents that cannot be reached fail each run, which is stored as failed with the reason;
/// the lab goes on to the next configuration, and since every run failed it exits 1.
#[test]
fn unreachable_agents_fail_the_runs_and_the_lab_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = write(
        tmp.path(),
        "load: {users: [{count: 1}]}\nsessions: [{name: s, steps: [{request: GET /}]}]\n",
        r#"name: no-agents
server:
  command: exec {headroom} serve --listen 127.0.0.1:{port}
  ready: {port: "127.0.0.1:{port}"}
factors:
  n: ["1", "2"]
load: {scenario: s.yaml, duration: 1s}
"#,
    );
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let agents = tmp.path().join("agents.txt");
    std::fs::write(&agents, format!("127.0.0.1:{port}\n")).unwrap();
    let spec = format!("file:{}", agents.display());
    let out = tmp.path().join("out");
    let (o, stdout, stderr) = lab(&exp, &out, &["--agents", &spec, "--token", "t0k3n"]);
    assert_eq!(o.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stderr.contains("every run failed"), "{stderr}");
    assert!(
        stdout.contains("2 run(s) now, 0 found stored, 2 failed"),
        "{stdout}\n{stderr}"
    );
    assert_eq!(
        stderr.matches("load failed: agent 127.0.0.1:").count(),
        2,
        "{stderr}"
    );
    assert!(stderr.contains("could not be reached"), "{stderr}");
}
