//! `headroom lab` end to end with the real reference server: a quick experiment runs and prints
//! its table, an interrupted lab resumes without redoing stored runs, and a server that fails to
//! start or dies mid-run is reported for its configuration while the lab goes on.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use common::headroom;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn lab(args: &[&str], out: &Path) -> Output {
    headroom()
        .arg("lab")
        .args(args)
        .arg("--output")
        .arg(out)
        .output()
        .expect("run headroom lab")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).to_string(),
        String::from_utf8_lossy(&o.stderr).to_string(),
    )
}

#[test]
fn rudy_quick_runs_prints_its_tables_and_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = repo().join("experiments/rudy.yaml");
    let o = lab(&[exp.to_str().unwrap(), "--quick"], tmp.path());
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("mean response time (ms), handlers x (C, N)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("4 run(s) now, 0 found stored, 0 failed"),
        "{stdout}"
    );
    // Each run has a plausible figure: /sleep/1 takes at least 1 ms.
    assert!(
        stderr.contains("[4/4] c=10 handlers=4 n=10 rep 2"),
        "{stderr}"
    );
    let md = std::fs::read_to_string(tmp.path().join("tables.md")).unwrap();
    assert!(md.contains("handlers"), "{md}");
    assert!(tmp.path().join("lab.sqlite").exists());
    // Started again: everything is found stored, nothing is redone.
    let o = lab(&[exp.to_str().unwrap(), "--quick"], tmp.path());
    let (stdout, _) = text(&o);
    assert!(stdout.contains("0 run(s) now, 4 found stored"), "{stdout}");
}

#[test]
fn an_interrupted_lab_resumes_where_it_stopped() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = repo().join("experiments/rudy.yaml");
    let mut child = headroom()
        .args(["lab", exp.to_str().unwrap(), "--quick", "--output"])
        .arg(tmp.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Stop it (SIGTERM, as `kill` does) once the first run is stored.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut stderr = child.stderr.take().unwrap();
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    while !seen.contains("[1/4]") && Instant::now() < deadline {
        use std::io::Read;
        match stderr.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => seen.push_str(&String::from_utf8_lossy(&buf[..n])),
        }
    }
    assert!(seen.contains("[1/4]"), "{seen}");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{seen}");
    let o = lab(&[exp.to_str().unwrap(), "--quick"], tmp.path());
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    let stored: usize = stdout
        .split(" found stored")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!((1..4).contains(&stored), "{stdout}");
    assert!(
        stdout.contains(&format!("{} run(s) now, {stored} found stored", 4 - stored)),
        "{stdout}"
    );
    assert_eq!(
        stderr.matches("stored, skipped").count(),
        stored,
        "{stderr}"
    );
}

#[test]
fn failing_servers_are_reported_and_the_lab_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("s.yaml"),
        "load: {users: [{count: 2}]}\nsessions: [{name: s, steps: [{request: GET /}]}]\n",
    )
    .unwrap();
    std::fs::write(
        tmp.path().join("e.yaml"),
        r#"name: failing
server:
  command: >-
    if [ {mode} = nostart ]; then echo 'cannot bind: boom' >&2; exit 3; fi;
    if [ {mode} = dies ]; then {headroom} serve --listen 127.0.0.1:{port} & p=$!;
    sleep 0.7; echo 'dying now' >&2; kill -9 $p; exit 4; fi;
    exec {headroom} serve --listen 127.0.0.1:{port}
  ready: {port: "127.0.0.1:{port}"}
  ready_timeout: 5s
factors:
  mode: [ok, nostart, dies]
load: {scenario: s.yaml, duration: 2s}
tables:
  - {metric: throughput_rps, cols: [mode]}
"#,
    )
    .unwrap();
    let out = tmp.path().join("out");
    let o = lab(&[tmp.path().join("e.yaml").to_str().unwrap()], &out);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("3 run(s) now, 0 found stored, 2 failed"),
        "{stdout}"
    );
    assert!(
        stderr.contains("mode=nostart rep 1: server failed") && stderr.contains("boom"),
        "{stderr}"
    );
    assert!(
        stderr.contains("mode=dies rep 1: server died during the run")
            && stderr.contains("dying now"),
        "{stderr}"
    );
    assert!(
        stderr.contains("mode=ok rep 1:") && stderr.contains("req/s"),
        "{stderr}"
    );
    assert!(
        stdout.contains("failed"),
        "the table shows the failed cells: {stdout}"
    );
}

/// The other study experiments' quick variants run end to end with no failed configuration.
#[test]
fn study_experiments_quick_variants_run() {
    for (file, title, runs) in [
        (
            "experiments/io-bound.yaml",
            "mean duration of a 500-operation session (ms)",
            4,
        ),
        ("experiments/event-vs-threads.yaml", "client timeouts", 2),
        (
            "experiments/kernel-poll.yaml",
            "most slow clients connected before a break",
            2,
        ),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let exp = repo().join(file);
        let o = lab(&[exp.to_str().unwrap(), "--quick"], tmp.path());
        let (stdout, stderr) = text(&o);
        assert_eq!(o.status.code(), Some(0), "{file}: {stdout}\n{stderr}");
        assert!(stdout.contains(title), "{file}: {stdout}");
        assert!(
            stdout.contains(&format!("{runs} run(s) now, 0 found stored, 0 failed")),
            "{file}: {stdout}\n{stderr}"
        );
        assert!(
            !stdout.contains("failed "),
            "{file}: a failed cell: {stdout}"
        );
    }
}
