//! Issue 18 ("hardening") finding 8, the exit codes at the edges: `-n 0` and `-c 0` are usage
//! errors, a lab whose every run failed exits 1, and a closed stdout ends the process quietly
//! (never a panic, exit 101).

mod common;

use std::process::Stdio;

use common::{headroom, one_line, run_plain};

/// Runs `cmd` to its end with its stdout closed at once (as `| head -c 0` would): its exit code
/// and its stderr, after asserting it did not panic.
fn with_stdout_closed(cmd: &mut std::process::Command) -> (Option<i32>, String) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{cmd:?}: {stderr}");
    (out.status.code(), stderr)
}

#[test]
fn zero_requests_and_zero_connections_are_usage_errors() {
    for args in [
        &["-n", "0"][..],
        &["--requests", "0"],
        &["-c", "0"],
        &["-c", "0", "-n", "5"],
    ] {
        let mut all = args.to_vec();
        all.push("--no-preflight");
        let out = run_plain("http://127.0.0.1:9/", &all);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let line = one_line(&out);
        assert!(line.contains(" 0"), "{args:?}: {line}");
    }
}

#[test]
fn a_lab_whose_every_run_failed_exits_1() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("s.yaml"),
        "load: {users: [{count: 2}]}\nsessions: [{name: s, steps: [{request: GET /}]}]\n",
    )
    .unwrap();
    let exp = tmp.path().join("e.yaml");
    std::fs::write(
        &exp,
        r#"name: all-fail
server:
  command: "echo 'cannot bind: boom' >&2; exit 3"
  ready: {port: "127.0.0.1:{port}"}
  ready_timeout: 2s
factors:
  mode: [a, b]
load: {scenario: s.yaml, duration: 1s}
tables:
  - {metric: throughput_rps, cols: [mode]}
"#,
    )
    .unwrap();
    let o = headroom()
        .args(["lab", exp.to_str().unwrap(), "--no-report", "--output"])
        .arg(tmp.path().join("out"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stdout.contains("2 failed"), "{stdout}\n{stderr}");
    assert_eq!(o.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stderr.contains("every run failed"), "{stderr}");
}

/// `headroom run ... | head -1`: the reader goes away before the summary is written. Ten runs
/// each of the human summary (with a run directory, so its lines too) and of `--json`.
#[test]
fn a_closed_stdout_ends_the_run_quietly() {
    let server = common::serve();
    let url = format!("http://{}/", server.local_addr());
    let tmp = tempfile::tempdir().unwrap();
    for round in 0..10 {
        for json in [false, true] {
            let mut cmd = headroom();
            cmd.args(["run", &url, "-c", "2", "-n", "40", "-q"])
                .arg("--out")
                .arg(tmp.path().join(format!("r{round}-{json}")));
            if json {
                cmd.arg("--json");
            }
            let (code, stderr) = with_stdout_closed(&mut cmd);
            assert_eq!(code, Some(0), "json={json}: {stderr}");
            assert!(stderr.trim().is_empty(), "json={json}: {stderr}");
        }
    }
}

/// The same for the commands that print a file or a path: `import` (the scenario's YAML),
/// `k8s manifest` (the objects) and `report` (the page's path), each with its reader gone.
#[test]
fn import_k8s_and_report_end_quietly_on_a_closed_stdout() {
    let server = common::serve();
    let url = format!("http://{}/", server.local_addr());
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    let o = run_plain(
        &url,
        &["-c", "1", "-n", "20", "--out", run.to_str().unwrap()],
    );
    assert!(o.status.success(), "{o:?}");
    let root = common::repo_root();
    let tsung = root.join("scenarios/tsung-example.xml");
    let mix = root.join("scenarios/mix.yaml");
    let page = tmp.path().join("page.html");
    let cases: Vec<Vec<String>> = vec![
        vec!["import".into(), "tsung".into(), tsung.display().to_string()],
        vec![
            "k8s".into(),
            "manifest".into(),
            mix.display().to_string(),
            "--agents".into(),
            "2".into(),
        ],
        vec![
            "report".into(),
            run.display().to_string(),
            "-o".into(),
            page.display().to_string(),
        ],
    ];
    for args in &cases {
        for _ in 0..5 {
            let (code, stderr) = with_stdout_closed(headroom().args(args));
            let errors: Vec<&str> = stderr.lines().filter(|l| !l.contains("warning")).collect();
            assert_eq!(code, Some(0), "{args:?}: {stderr}");
            assert!(errors.is_empty(), "{args:?}: {stderr}");
        }
    }
}

/// `headroom surge fileset DIR | head -c 0`: its summary paragraph went through `println!`,
/// which panicked (exit 101) on the closed stdout; and `headroom serve | head -1`: its ready
/// line failed the command (exit 1) instead of serving on. Both print through `outln!` now.
#[test]
fn a_closed_stdout_ends_surge_quietly_and_serve_serves_on() {
    let tmp = tempfile::tempdir().unwrap();
    for round in 0..3 {
        let (code, stderr) = with_stdout_closed(
            headroom()
                .args(["surge", "fileset", "--files", "5"])
                .arg(tmp.path().join(format!("set{round}"))),
        );
        assert_eq!(code, Some(0), "{stderr}");
        assert!(stderr.trim().is_empty(), "{stderr}");
    }

    let port = common::free_port();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut child = headroom()
        .args(["serve", "--listen", &addr.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    common::wait_port(addr, std::time::Duration::from_secs(10));
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    assert!(child.try_wait().unwrap().is_none(), "serve exited");
    // SIGTERM drains it: exit 0, no panic.
    let pid = child.id() as libc::pid_t;
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}
