//! Shared test harness of the CLI's tests: run the real `headroom` binary, agents, and the
//! services scripts/test starts. The real servers a test starts on loopback (nginx, Apache,
//! h2o, the PKI, a misbehaving server) are `headroom_testkit::servers`, re-exported here.
// Each test binary includes this module and uses a part of it, re-exports included.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

pub mod chromium;
pub mod netns_lock;
pub mod source_server;

/// headroom serve (reactor, one worker) in this process on 127.0.0.1, any free port.
pub fn serve() -> headroom_serve::RunningServer {
    headroom_serve::start(headroom_serve::ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        workers: 1,
        ..Default::default()
    })
    .expect("start headroom serve")
}

/// The value of `attr="..."` in each tag of `html` that contains `marker`.
pub fn attrs<'a>(html: &'a str, marker: &str, attr: &str) -> Vec<&'a str> {
    html.match_indices(marker)
        .filter_map(|(at, _)| {
            let tag_end = html[at..].find('>')? + at;
            let tag_start = html[..at].rfind('<')?;
            let tag = &html[tag_start..tag_end];
            let key = format!("{attr}=\"");
            let v = tag.find(&key)? + key.len();
            let end = tag[v..].find('"')? + v;
            Some(&tag[v..end])
        })
        .collect()
}

/// The address a `headroom agent` (spawned with its stdout piped) says it listens on.
pub fn agent_address(child: &mut Child, who: &str) -> String {
    use std::io::BufRead;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("the agent's stdout is piped"))
        .read_line(&mut line)
        .unwrap();
    line.trim()
        .strip_prefix("headroom agent listening on ")
        .unwrap_or_else(|| panic!("{who} said '{line}'"))
        .to_string()
}

pub fn headroom() -> Command {
    Command::new(env!("CARGO_BIN_EXE_headroom"))
}

/// `headroom run ARGS... -q --out DIR` (its report.html and files in DIR); the caller checks
/// the exit status, or calls [`succeeded`].
pub fn run_into(args: &[&str], dir: &Path) -> Output {
    headroom()
        .arg("run")
        .args(args)
        .args(["-q", "--out"])
        .arg(dir)
        .output()
        .unwrap()
}

/// Fails the test with the command's stderr unless it exited 0.
pub fn succeeded(out: &Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Run `headroom run URL ARGS... --json -q` and parse the summary.
pub fn run_json(url: &str, args: &[&str]) -> (serde_json::Value, Output) {
    let out = headroom()
        .arg("run")
        .arg(url)
        .args(args)
        .args(["--json", "-q"])
        .output()
        .expect("spawn headroom");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "headroom did not print JSON ({e}); exit {:?}\nstdout: {}\nstderr: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (v, out)
}

/// Run `headroom run TARGET ARGS... -q` without `--json`: for runs that must stop before any
/// load (a usage error, a failed preflight), whose stderr is the point.
pub fn run_plain(target: &str, args: &[&str]) -> Output {
    headroom()
        .arg("run")
        .arg(target)
        .args(args)
        .arg("-q")
        .output()
        .expect("spawn headroom")
}

/// The single line a failed run printed on stderr; panics unless there is exactly one.
pub fn one_line(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(
        lines.len(),
        1,
        "wanted one line on stderr, got {} (exit {:?}):\n{err}",
        lines.len(),
        out.status.code()
    );
    lines[0].to_string()
}

/// Write `yaml` as `s.yaml` in a fresh directory, with `files` (name, source) copied beside it
/// (a scenario names its files relative to itself), and `run_json` it.
pub fn run_scenario(
    yaml: &str,
    files: &[(&str, &Path)],
    args: &[&str],
) -> (serde_json::Value, Output) {
    let dir = tempfile::tempdir().unwrap();
    for (name, src) in files {
        std::fs::copy(src, dir.path().join(name))
            .unwrap_or_else(|e| panic!("copy {} to {name}: {e}", src.display()));
    }
    let file = dir.path().join("s.yaml");
    std::fs::write(&file, yaml).unwrap();
    run_json(file.to_str().unwrap(), args)
}

/// The number at `path` in `v` (`num(&v, &["tls", "handshakes"])`); panics, showing `v`, when
/// there is none.
pub fn num(v: &serde_json::Value, path: &[&str]) -> u64 {
    let mut x = v;
    for p in path {
        x = &x[*p];
    }
    x.as_u64()
        .unwrap_or_else(|| panic!("no number at {path:?} in {v:#}"))
}

pub fn err(v: &serde_json::Value, kind: &str) -> u64 {
    v["errors"][kind]
        .as_u64()
        .unwrap_or_else(|| panic!("no errors.{kind} in {v}"))
}

// Each test binary uses some of these.
#[allow(unused_imports)]
pub use headroom_testkit::servers::net::{free_port, wait_port};
#[allow(unused_imports)]
pub use headroom_testkit::servers::nginx::Nginx;
#[allow(unused_imports)]
pub use headroom_testkit::servers::test_server::{read_request, write_all, TestServer, OK};
#[allow(unused_imports)]
pub use headroom_testkit::servers::{access_log, apache, h2o, pki, tls_nginx};

// ---- the protocol servers scripts/test starts (ejabberd, PostgreSQL, websockets echo) ----

#[allow(unused_imports)]
pub use headroom_testkit::servers::services::{pg, repo_root, service, xmpp};

// ---- `headroom agent` processes a test starts itself ----

/// A `headroom agent` a test started on 127.0.0.1 (port chosen by the system), killed when
/// dropped.
pub struct Agent {
    pub child: Child,
    /// HOST:PORT it listens on.
    pub addr: String,
    _cwd: Option<tempfile::TempDir>,
}

impl Agent {
    /// Sends this agent a hand-made job of `spec` (one segment, no preflight) straight from the
    /// crate's controller, as an attacker or a hand-written client would, with `token`.
    pub fn run_hand_made_job(
        &self,
        token: &str,
        spec: headroom_core::spec::RunSpec,
        opts: headroom_dist::ControllerOpts,
    ) -> Result<headroom_dist::DistOutcome, headroom_dist::DistError> {
        let job = headroom_dist::Job {
            spec,
            preflight: false,
            segment_index: 0,
            segment_count: 1,
            start_at: std::time::SystemTime::now(),
        };
        let addrs = [headroom_dist::AgentAddr {
            name: "test".into(),
            endpoint: format!("http://{}", self.addr),
            pin: None,
        }];
        headroom_dist::run_controller(
            &addrs,
            token,
            &job,
            opts,
            Arc::new(AtomicBool::new(false)),
            &mut |_| {},
        )
    }

    /// An agent whose stderr goes to the test's.
    pub fn start(token: &str) -> Agent {
        Agent::spawn(token, Stdio::inherit(), false)
    }

    /// An agent whose stderr the test reads (`child.stderr`).
    pub fn start_capturing(token: &str) -> Agent {
        Agent::spawn(token, Stdio::piped(), false)
    }

    /// An agent working in an empty directory of its own, so none of the controller's files
    /// are at hand.
    pub fn start_in_empty_dir(token: &str) -> Agent {
        Agent::spawn(token, Stdio::inherit(), true)
    }

    fn spawn(token: &str, stderr: Stdio, own_dir: bool) -> Agent {
        let cwd = own_dir.then(|| tempfile::tempdir().unwrap());
        let mut cmd = headroom();
        cmd.args(["agent", "--listen", "127.0.0.1:0"])
            .env("HEADROOM_TOKEN", token)
            .stdout(Stdio::piped())
            .stderr(stderr);
        if let Some(d) = &cwd {
            cmd.current_dir(d.path());
        }
        let mut child = cmd.spawn().expect("spawn headroom agent");
        let addr = agent_address(&mut child, "the agent");
        Agent {
            child,
            addr,
            _cwd: cwd,
        }
    }

    /// Sends `sig` to the agent.
    pub fn signal(&self, sig: i32) {
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

/// `headroom lab EXPERIMENT --quick --no-report --output OUT` for a shipped experiment
/// (`experiments/NAME.yaml`): asserts it exited 0 having run `runs` runs, none failed, and
/// returns its stdout and stderr.
pub fn lab_quick(experiment: &str, out: &Path, runs: usize) -> (String, String) {
    let exp = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../experiments")
        .join(experiment);
    let o = headroom()
        .arg("lab")
        .arg(&exp)
        .args(["--quick", "--no-report", "--output"])
        .arg(out)
        .output()
        .expect("run headroom lab");
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains(&format!("{runs} run(s) now, 0 found stored, 0 failed")),
        "{stdout}\n{stderr}"
    );
    (stdout, stderr)
}

/// A lab's `OUTPUT/tables.json`: the mean of `metric`'s cell in the row whose factor levels,
/// joined by '/', are `row` and the column whose levels are `col` (`""` takes the first
/// column). Panics naming what is missing.
pub fn lab_cell(out: &Path, metric: &str, row: &str, col: &str) -> f64 {
    lab_table_cell(out, metric, "cells", row, col)["mean"]
        .as_f64()
        .unwrap_or_else(|| panic!("{metric} {row} {col}: no value"))
}

/// A lab's verdict of the configuration at `row` / `col` (as [`lab_cell`] finds them), from its
/// table of verdicts in `OUTPUT/tables.json`: one name, or the names of differing repetitions.
pub fn lab_verdict(out: &Path, row: &str, col: &str) -> String {
    lab_table_cell(out, "verdict", "texts", row, col)
        .as_str()
        .unwrap_or_else(|| panic!("verdict {row} {col}: none"))
        .to_string()
}

/// The `grid` entry (`cells` or `texts`) of `metric`'s table in `OUTPUT/tables.json` at the row
/// and column whose levels, joined by '/', are `row` and `col` (`""`: the first).
fn lab_table_cell(out: &Path, metric: &str, grid: &str, row: &str, col: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(out.join("tables.json")).expect("tables.json");
    let tables: serde_json::Value = serde_json::from_str(&text).expect("tables.json parses");
    let t = tables
        .as_array()
        .expect("a list of tables")
        .iter()
        .find(|t| t["metric"] == metric)
        .unwrap_or_else(|| panic!("no table of {metric}"));
    let joined = |v: &serde_json::Value| {
        v.as_array()
            .map(|a| {
                a.iter()
                    .map(|x| x.as_str().unwrap_or(""))
                    .collect::<Vec<_>>()
                    .join("/")
            })
            .unwrap_or_default()
    };
    let find = |key: &str, want: &str| {
        t[key]
            .as_array()
            .and_then(|l| l.iter().position(|x| want.is_empty() || joined(x) == want))
            .unwrap_or_else(|| panic!("{metric}: no {key} {want:?} in {t}"))
    };
    let (r, c) = (find("rows", row), find("cols", col));
    t[grid][r][c].clone()
}

/// An output directory the servers' unprivileged processes (www-data) can traverse: a
/// tempdir is 0700.
pub fn shared_tempdir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    tmp
}

/// The live processes whose command line mentions `needle` (an Erlang VM started for this
/// test's output directory, say).
pub fn processes_mentioning(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        if pid == std::process::id().to_string() {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(needle) {
            found.push(format!("{pid}: {cmdline}"));
        }
    }
    found
}

/// The rows of a CSV the lab writes (`samples.csv`, `rate-curve.csv`: no quoted commas in the
/// tests' factors), each as a map from its header's names to its cells.
pub fn csv_records(text: &str) -> Vec<std::collections::BTreeMap<String, String>> {
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    lines
        .map(|l| {
            head.iter()
                .map(|h| h.to_string())
                .zip(l.split(',').map(str::to_string))
                .collect()
        })
        .collect()
}
