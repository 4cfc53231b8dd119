//! Each verdict of docs/verdicts.md produced on purpose against a real server on loopback
//! (issue 31), through `headroom run --server-pid`: a light load finds no limit; a pool of 4
//! handlers under 50 keep-alive clients is exhausted; a listen backlog of 8 overflows under a
//! burst of 1,000 connects; a server with 256 descriptors hits its limit; poll() over 9,000
//! clients is CPU-bound in the kernel (epoll, under the same load, reaches no limit); a
//! CPU-heavy route makes the server CPU-bound in its own code; and headroom pinned to one core,
//! a connection per request, against Debian's nginx pinned to the other, is the limit itself.
//!
//! The kernel's TCP counters and the machine's CPU are the whole machine's, so the tests take
//! turns (one lock), and each asserts the figures its verdict rests on besides its name.

mod common;
use common::*;

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;

use serde_json::Value;

/// One test at a time: each reads the machine's CPU and the namespace's counters.
static MACHINE: Mutex<()> = Mutex::new(());

fn machine() -> std::sync::MutexGuard<'static, ()> {
    MACHINE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Keeps a process on one CPU (and its descriptors at `nofile`, soft and hard), set in the
/// child before it runs.
fn confine(cmd: &mut Command, cpu: Option<usize>, nofile: Option<u64>) {
    // SAFETY: only async-signal-safe calls (sched_setaffinity, setrlimit) on plain data.
    unsafe {
        cmd.pre_exec(move || {
            if let Some(cpu) = cpu {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(cpu, &mut set);
                if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if let Some(n) = nofile {
                let r = libc::rlimit {
                    rlim_cur: n,
                    rlim_max: n,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &r) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

/// `headroom serve ARGS` on a free loopback port, killed on drop.
struct Served {
    child: Child,
    port: u16,
}

impl Served {
    fn start(args: &[&str], nofile: Option<u64>) -> Served {
        let port = free_port();
        let mut cmd = headroom();
        cmd.arg("serve")
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        confine(&mut cmd, None, nofile);
        let child = cmd.spawn().expect("start headroom serve");
        wait_port(
            format!("127.0.0.1:{port}").parse().unwrap(),
            std::time::Duration::from_secs(10),
        );
        Served { child, port }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `headroom run URL ARGS --server-pid PID --json -q` (on CPU `cpu` when given): the summary.
fn run_sampled(url: &str, args: &[&str], pid: u32, cpu: Option<usize>) -> Value {
    run_sampled_with_stderr(url, &[args, &["-q"]].concat(), pid, cpu).0
}

/// As [`run_sampled`], without `-q`: the summary and what the run said on stderr as it went.
fn run_sampled_with_stderr(
    url: &str,
    args: &[&str],
    pid: u32,
    cpu: Option<usize>,
) -> (Value, String) {
    let mut cmd = headroom();
    cmd.arg("run")
        .arg(url)
        .args(args)
        .args(["--server-pid", &pid.to_string(), "--json"]);
    confine(&mut cmd, cpu, None);
    let out = cmd.output().expect("spawn headroom run");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no summary ({e}); exit {:?}\n{stderr}", out.status.code()));
    (v, stderr)
}

/// The verdict's name, and a figure of its evidence.
fn verdict(v: &Value) -> &str {
    v["verdict"]["name"].as_str().unwrap_or("(none)")
}

fn evidence(v: &Value, key: &str) -> f64 {
    v["verdict"]["evidence"][key]
        .as_f64()
        .unwrap_or_else(|| panic!("no evidence '{key}' in {}", v["verdict"]))
}

/// The verdict and the generator's section, for a failure's message.
fn why(v: &Value) -> String {
    format!(
        "{}\ngenerator: {}",
        serde_json::to_string_pretty(&v["verdict"]).unwrap(),
        v["generator"]
    )
}

#[test]
fn a_light_load_reaches_no_limit_and_says_so_in_the_summary() {
    let _m = machine();
    let s = Served::start(&["--arch", "reactor", "--workers", "1"], None);
    let pid = s.child.id().to_string();
    let v = run_sampled(
        &s.url("/"),
        &["-c", "10", "--rate", "100", "-d", "4s"],
        s.child.id(),
        None,
    );
    assert_eq!(verdict(&v), "no_limit", "{}", why(&v));
    assert!(evidence(&v, "server_cpu_user_pct") + evidence(&v, "server_cpu_sys_pct") < 50.0);
    assert_eq!(
        v["generator"]["limits"],
        serde_json::json!([]),
        "{}",
        why(&v)
    );
    assert!(
        v["generator"]["lag_us"]["count"].as_u64().unwrap() >= 300,
        "{}",
        why(&v)
    );
    // The human summary ends with the self-check and the verdict.
    let out = headroom()
        .args(["run", &s.url("/"), "-c", "2", "--rate", "20", "-d", "2s"])
        .args(["--server-pid", &pid, "-q"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Self-check   ") && text.contains(" worker(s) at "),
        "{text}"
    );
    assert!(
        text.contains("Verdict      no_limit: no limit reached"),
        "{text}"
    );
}

#[test]
fn four_handlers_under_fifty_keepalive_clients_are_an_exhausted_pool() {
    let _m = machine();
    let s = Served::start(&["--arch", "pool", "--handlers", "4"], None);
    let v = run_sampled(
        &s.url("/"),
        &["-c", "50", "--rate", "200", "-d", "5s", "--timeout", "2s"],
        s.child.id(),
        None,
    );
    assert_eq!(verdict(&v), "pool_exhausted", "{}", why(&v));
    // 46 clients sat in the accept queue of an idle server.
    assert!(evidence(&v, "accept_queue_max") >= 40.0, "{}", why(&v));
    assert!(evidence(&v, "accept_queue_share") >= 0.5, "{}", why(&v));
    assert!(evidence(&v, "server_cpu_user_pct") < 20.0, "{}", why(&v));
}

#[test]
fn a_backlog_of_8_overflows_under_a_burst_of_connects() {
    let _m = machine();
    let s = Served::start(
        &["--arch", "reactor", "--workers", "1", "--backlog", "8"],
        None,
    );
    let v = run_sampled(
        &s.url("/"),
        &["-c", "1000", "--per-user", "1", "-d", "20s"],
        s.child.id(),
        None,
    );
    assert_eq!(verdict(&v), "backlog_overflow", "{}", why(&v));
    assert_eq!(evidence(&v, "accept_backlog"), 8.0, "{}", why(&v));
    assert!(evidence(&v, "listen_overflows") >= 100.0, "{}", why(&v));
    // The server accepted at once: its queue was empty at every sample, its CPU idle. (Some
    // requests time out outside it, in handshakes waiting for a retransmitted SYN.)
    assert_eq!(evidence(&v, "accept_queue_share"), 0.0, "{}", why(&v));
    assert!(v["responses"].as_u64().unwrap() >= 500, "{}", why(&v));
}

#[test]
fn a_server_with_256_descriptors_hits_its_limit() {
    let _m = machine();
    let s = Served::start(&["--arch", "reactor", "--workers", "1"], Some(256));
    let v = run_sampled(
        &s.url("/"),
        &["-c", "400", "--rate", "400", "-d", "5s", "--timeout", "2s"],
        s.child.id(),
        None,
    );
    assert_eq!(verdict(&v), "descriptor_limit", "{}", why(&v));
    assert_eq!(evidence(&v, "server_fd_limit"), 256.0, "{}", why(&v));
    assert!(evidence(&v, "server_fds") >= 248.0, "{}", why(&v));
}

#[test]
fn poll_over_9000_slow_clients_is_cpu_bound_in_the_kernel_and_epoll_is_not() {
    let _m = machine();
    let load = [
        "-c",
        "9000",
        "--rate",
        "9000",
        "-d",
        "12s",
        "--connect-timeout",
        "10s",
    ];
    let mut seen = Vec::new();
    for poller in ["poll", "epoll"] {
        let s = Served::start(
            &["--arch", "reactor", "--workers", "1", "--poller", poller],
            None,
        );
        let v = run_sampled(&s.url("/"), &load, s.child.id(), None);
        assert_eq!(v["connections_peak"], 9000, "{poller}: {}", why(&v));
        seen.push((poller, v));
    }
    let (poll, epoll) = (&seen[0].1, &seen[1].1);
    assert_eq!(verdict(poll), "cpu_kernel", "{}", why(poll));
    assert!(
        evidence(poll, "server_cpu_sys_pct") >= 80.0,
        "{}",
        why(poll)
    );
    assert_eq!(verdict(epoll), "no_limit", "{}", why(epoll));
    assert!(
        evidence(epoll, "server_cpu_sys_pct") < evidence(poll, "server_cpu_sys_pct") / 3.0,
        "{}",
        why(epoll)
    );
}

#[test]
fn a_cpu_heavy_route_makes_the_server_cpu_bound_in_its_own_code() {
    let _m = machine();
    let s = Served::start(&["--arch", "reactor", "--workers", "1"], None);
    let v = run_sampled(
        &s.url("/cpu/1000"),
        &["-c", "10", "-d", "5s"],
        s.child.id(),
        None,
    );
    assert_eq!(verdict(&v), "cpu_user", "{}", why(&v));
    assert!(
        evidence(&v, "server_busiest_thread_pct") >= 85.0,
        "{}",
        why(&v)
    );
    assert!(evidence(&v, "server_cpu_user_pct") > 4.0 * evidence(&v, "server_cpu_sys_pct"));
}

#[test]
fn headroom_on_one_core_against_nginx_on_the_other_is_client_bound() {
    let _m = machine();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(
        cores >= 2,
        "this test pins nginx and headroom to two cores; {cores} here"
    );
    // No access log: nginx writes nothing per request.
    let ng = Nginx::start_with("access_log off;", "$status");
    // nginx (its master and its worker) on CPU 1; headroom on CPU 0.
    let master = ng.pid();
    for pid in headroom_monitor::tree(master as i32) {
        // SAFETY: a zeroed cpu_set_t with one CPU set, for a process we started.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(1, &mut set);
            assert_eq!(
                libc::sched_setaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &set),
                0,
                "pin nginx {pid}"
            );
        }
    }
    // A connection per request: connecting and closing cost the generator more than nginx.
    let (v, stderr) = run_sampled_with_stderr(
        &ng.url("/"),
        &["--no-keepalive", "-c", "50", "-t", "1", "-d", "5s"],
        master,
        Some(0),
    );
    assert_eq!(verdict(&v), "client_bound", "{}", why(&v));
    // Said while the run went, once, after three intervals in a row at its limit.
    assert_eq!(
        stderr
            .matches("headroom: warning: the generator is the limit (its workers used")
            .count(),
        1,
        "{stderr}"
    );
    assert!(v["generator"]["busy_intervals_pct"].as_f64().unwrap() >= 50.0);
    assert!(
        evidence(&v, "server_busiest_thread_pct") < 85.0,
        "{}",
        why(&v)
    );
}
