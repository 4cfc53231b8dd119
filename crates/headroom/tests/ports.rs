//! Ports in a range (issue 26): `--ports LO-HI` and `HEADROOM_PORTS` make the lab's `{port}` and
//! the `--agents local:N` agents listen on ports of that range, for machines where only some
//! ports are open; a bad range is a usage error (exit 2, one line).
//!
//! Each test has its own ten ports below Linux's ephemeral range (32768 on), so tests running at
//! once do not take each other's ports and no outgoing connection lands on them.

mod common;

use std::path::Path;
use std::process::Output;

use common::{headroom, one_line};

/// A lab of `repeat` runs of `headroom serve` whose server command writes the `{port}` it was
/// given to OUTPUT/ports.txt before it starts: the server's own record of where it listened.
fn port_lab(dir: &Path, repeat: u32) -> std::path::PathBuf {
    std::fs::write(
        dir.join("s.yaml"),
        "load: {users: [{count: 2}]}\nsessions: [{name: s, steps: [{request: GET /}]}]\n",
    )
    .unwrap();
    let e = dir.join("e.yaml");
    std::fs::write(
        &e,
        format!(
            r#"name: ports
server:
  command: echo {{port}} >> {{output}}/ports.txt; exec {{headroom}} serve --listen 127.0.0.1:{{port}}
  ready: {{port: "127.0.0.1:{{port}}"}}
load: {{scenario: s.yaml, duration: 1s}}
repeat: {repeat}
tables:
  - {{metric: throughput_rps}}
"#
        ),
    )
    .unwrap();
    e
}

fn lab_in(exp: &Path, out: &Path, args: &[&str], env_ports: Option<&str>) -> Output {
    let mut cmd = headroom();
    cmd.arg("lab").arg(exp).arg("--output").arg(out).args(args);
    cmd.env_remove("HEADROOM_PORTS");
    if let Some(r) = env_ports {
        cmd.env("HEADROOM_PORTS", r);
    }
    cmd.output().unwrap()
}

/// The ports the lab's servers were given, in run order; every run must have succeeded.
fn ports_used(o: &Output, out: &Path, runs: usize) -> Vec<u16> {
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains(&format!("{runs} run(s) now, 0 found stored, 0 failed")),
        "{stdout}\n{stderr}"
    );
    let ports: Vec<u16> = std::fs::read_to_string(out.join("ports.txt"))
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert_eq!(ports.len(), runs, "{ports:?}");
    ports
}

#[test]
fn issue26_lab_port_comes_from_the_ports_flag() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = port_lab(tmp.path(), 3);
    let out = tmp.path().join("out");
    let o = lab_in(&exp, &out, &["--ports", "31000-31009"], None);
    let ports = ports_used(&o, &out, 3);
    assert!(
        ports.iter().all(|p| (31000..=31009).contains(p)),
        "{ports:?}"
    );
    // Consecutive runs go round the range (a port the last server just left is not reused).
    assert!(ports.windows(2).all(|w| w[0] != w[1]), "{ports:?}");
}

#[test]
fn issue26_lab_port_comes_from_headroom_ports() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = port_lab(tmp.path(), 2);
    let out = tmp.path().join("out");
    let o = lab_in(&exp, &out, &[], Some("31010-31019"));
    let ports = ports_used(&o, &out, 2);
    assert!(
        ports.iter().all(|p| (31010..=31019).contains(p)),
        "{ports:?}"
    );
    // The flag wins over the variable.
    let out2 = tmp.path().join("out2");
    let o = lab_in(
        &exp,
        &out2,
        &["--ports", "31040-31049"],
        Some("31010-31019"),
    );
    let ports = ports_used(&o, &out2, 2);
    assert!(
        ports.iter().all(|p| (31040..=31049).contains(p)),
        "{ports:?}"
    );
}

#[test]
fn issue26_a_range_with_no_free_port_is_one_clear_line() {
    // The one port of the range is taken by a listener of this test.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let tmp = tempfile::tempdir().unwrap();
    let exp = port_lab(tmp.path(), 1);
    let range = format!("{port}-{port}");
    let o = lab_in(
        &exp,
        &tmp.path().join("out"),
        &["-q", "--ports", &range],
        None,
    );
    assert_eq!(o.status.code(), Some(1));
    let line = one_line(&o);
    assert!(
        line.contains(&format!("no free port in the port range {range}")),
        "{line}"
    );
}

#[test]
fn issue26_local_agents_listen_in_the_range() {
    let server = common::serve();
    let url = format!("http://{}/", server.local_addr());
    for (how, env) in [("flag", None), ("env", Some("31020-31029"))] {
        let mut cmd = headroom();
        cmd.args([
            "run",
            &url,
            "-c",
            "4",
            "--per-user",
            "10",
            "--agents",
            "local:2",
        ]);
        cmd.env_remove("HEADROOM_PORTS");
        match env {
            None => {
                cmd.args(["--ports", "31020-31029"]);
            }
            Some(r) => {
                cmd.env("HEADROOM_PORTS", r);
            }
        }
        let o = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{how}: {stderr}");
        // "headroom: agent local:1 at http://127.0.0.1:PORT": the address the agent itself
        // said it listens on.
        let ports: Vec<u16> = stderr
            .lines()
            .filter_map(|l| l.split_once(" at http://127.0.0.1:"))
            .map(|(_, p)| p.trim().parse().unwrap())
            .collect();
        assert_eq!(ports.len(), 2, "{how}: {stderr}");
        assert!(
            ports.iter().all(|p| (31020..=31029).contains(p)) && ports[0] != ports[1],
            "{how}: {ports:?}"
        );
    }
    assert_eq!(server.stats().requests, 80);
}

#[test]
fn issue26_bad_ranges_are_usage_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = port_lab(tmp.path(), 1);
    let out = tmp.path().join("out");
    for bad in ["31009-31000", "0-10", "31000", "1-65536", "a-b"] {
        // On the flag, of lab and of run.
        let o = lab_in(&exp, &out, &["--ports", bad], None);
        assert_eq!(o.status.code(), Some(2), "lab --ports {bad}");
        assert!(one_line(&o).contains("want LO-HI"), "lab --ports {bad}");
        let o = headroom()
            .args([
                "run",
                "http://127.0.0.1:9/",
                "--agents",
                "local:1",
                "--ports",
                bad,
            ])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "run --ports {bad}");
        assert!(one_line(&o).contains("want LO-HI"), "run --ports {bad}");
        // In the environment, named as such.
        let o = lab_in(&exp, &out, &[], Some(bad));
        assert_eq!(o.status.code(), Some(2), "HEADROOM_PORTS={bad}");
        let line = one_line(&o);
        assert!(
            line.contains("HEADROOM_PORTS") && line.contains("want LO-HI"),
            "{line}"
        );
    }
    // `run --ports` applies to local agents only: refused without them, not ignored.
    let o = headroom()
        .args(["run", "http://127.0.0.1:9/", "--ports", "31000-31009"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(one_line(&o).contains("needs --agents local:N"));
    assert!(!out.join("lab.sqlite").exists(), "no lab ran");
}
