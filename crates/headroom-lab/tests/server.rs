//! The server lifecycle against real processes. Every server listens on 127.0.0.1 only and
//! every wait is bounded.

use std::net::TcpListener;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use headroom_lab::server::{expand, start, Factors, FailureKind, Ready, ServerSpec};

fn factors(pairs: &[(&str, &str)]) -> Factors {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A port nobody listens on right now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn python3() -> PathBuf {
    let system = PathBuf::from("/usr/bin/python3");
    if system.exists() {
        return system;
    }
    let out = std::process::Command::new("sh")
        .args(["-c", "command -v python3"])
        .output()
        .unwrap();
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        !path.is_empty(),
        "these tests need python3 (for `python3 -m http.server`): apt-get install python3"
    );
    PathBuf::from(path)
}

/// Is the process alive (present and not a zombie)?
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rfind(')')
                .and_then(|i| stat[i + 1..].split_whitespace().next());
            !matches!(state, Some("Z") | Some("X") | None)
        }
        Err(_) => false,
    }
}

/// Wait (bounded) until the process is gone; true if it is.
fn gone_soon(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(2);
    while alive(pid) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// The number after `key=` in the output.
fn find_pid(tail: &str, key: &str) -> u32 {
    let at = tail
        .find(&format!("{key}="))
        .unwrap_or_else(|| panic!("no {key}= in output:\n{tail}"));
    tail[at + key.len() + 1..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

fn spec(command: &str, ready: Ready) -> ServerSpec {
    let mut s = ServerSpec::new(command, ready);
    s.ready_timeout = Duration::from_secs(5);
    s.grace = Duration::from_secs(2);
    s
}

fn http_server_spec(ready: Ready, dir: &tempfile::TempDir) -> ServerSpec {
    let command = format!(
        "sleep 0.3; exec {} -m http.server --bind 127.0.0.1 {{port}}",
        python3().display()
    );
    let mut s = spec(&command, ready);
    s.cwd = Some(dir.path().to_path_buf());
    s.ready_timeout = Duration::from_secs(10);
    s
}

#[test]
fn expand_placeholders_braces_and_unknown_factor() {
    let f = factors(&[("port", "8080"), ("arch", "epoll"), ("workers", "4")]);
    assert_eq!(
        expand(
            "serve --listen 127.0.0.1:{port} --arch {arch} --workers {workers}",
            &f
        )
        .unwrap(),
        "serve --listen 127.0.0.1:8080 --arch epoll --workers 4"
    );
    assert_eq!(
        expand("awk '{{print $1}}' -v w={workers}", &f).unwrap(),
        "awk '{print $1}' -v w=4"
    );
    assert_eq!(expand("no placeholders", &f).unwrap(), "no placeholders");
    let err = expand("--threads {threads}", &f).unwrap_err();
    assert!(err.contains("threads"), "{err}");
    assert!(err.contains("arch, port, workers"), "{err}");
    assert!(expand("{port", &f).is_err());
    assert!(expand("port}", &f).is_err());
}

#[test]
fn port_readiness_with_a_real_server() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port().to_string();
    let f = factors(&[("port", &port)]);
    let s = http_server_spec(Ready::Port("127.0.0.1:{port}".into()), &dir);
    let t0 = Instant::now();
    let srv = start(&s, &f).unwrap_or_else(|e| panic!("{e}\n{}", e.stderr_tail));
    assert!(t0.elapsed() >= Duration::from_millis(300));
    std::net::TcpStream::connect(("127.0.0.1", port.parse::<u16>().unwrap()))
        .expect("ready means the port accepts connections");
    let pid = srv.pid();
    let how = srv.stop();
    assert!(how.contains("SIGTERM"), "{how}");
    assert!(gone_soon(pid));
}

#[test]
fn http_readiness_with_a_real_server() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("index.html"), "hello").unwrap();
    let port = free_port().to_string();
    let f = factors(&[("port", &port)]);
    let s = http_server_spec(
        Ready::Http {
            addr: "127.0.0.1:{port}".into(),
            path: "/".into(),
        },
        &dir,
    );
    let mut srv = start(&s, &f).unwrap_or_else(|e| panic!("{e}\n{}", e.stderr_tail));
    srv.check_alive().unwrap();
    // The readiness GET shows up in the server's access log.
    let deadline = Instant::now() + Duration::from_secs(2);
    while !srv.output_tail().contains("GET / HTTP/1.1") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        srv.output_tail().contains("\"GET / HTTP/1.1\" 200"),
        "{}",
        srv.output_tail()
    );
    srv.stop();
}

#[test]
fn http_readiness_wants_200() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port().to_string();
    let f = factors(&[("port", &port)]);
    let mut s = http_server_spec(
        Ready::Http {
            addr: "127.0.0.1:{port}".into(),
            path: "/missing".into(),
        },
        &dir,
    );
    s.ready_timeout = Duration::from_secs(2);
    let err = start(&s, &f).unwrap_err();
    assert_eq!(err.kind, FailureKind::NotReady, "{err}");
    assert!(err.message.contains("404"), "{err}");
}

#[test]
fn line_readiness() {
    let s = spec(
        "echo starting; sleep 0.2; echo READY now; sleep 30",
        Ready::Line("READY".into()),
    );
    let t0 = Instant::now();
    let mut srv = start(&s, &Factors::new()).unwrap();
    let took = t0.elapsed();
    assert!(took >= Duration::from_millis(200), "{took:?}");
    assert!(took < Duration::from_secs(3), "{took:?}");
    srv.check_alive().unwrap();
    assert_eq!(srv.output_tail(), "starting\nREADY now\n");
}

#[test]
fn line_readiness_on_stderr_with_a_template() {
    let s = spec(
        "echo 'listening on {port}' >&2; sleep 30",
        Ready::Line("on {port}".into()),
    );
    let srv = start(&s, &factors(&[("port", "9")])).unwrap();
    assert!(srv.output_tail().contains("listening on 9"));
}

#[test]
fn environment_values_are_templates() {
    let mut s = spec(
        "echo \"greeting: $GREETING\"; echo READY; sleep 30",
        Ready::Line("READY".into()),
    );
    s.env = vec![("GREETING".into(), "hello {who}".into())];
    let srv = start(&s, &factors(&[("who", "lab")])).unwrap();
    assert!(srv.output_tail().contains("greeting: hello lab"));
}

#[test]
fn exits_at_once_is_exited_before_ready() {
    let s = spec(
        "echo 'cannot bind 127.0.0.1:1: permission denied' >&2; exit 7",
        Ready::Port(format!("127.0.0.1:{}", free_port())),
    );
    let t0 = Instant::now();
    let err = start(&s, &Factors::new()).unwrap_err();
    assert!(t0.elapsed() < Duration::from_secs(2));
    assert_eq!(err.kind, FailureKind::ExitedBeforeReady, "{err}");
    assert!(err.message.contains("exit status 7"), "{err}");
    assert!(
        err.stderr_tail.contains("cannot bind 127.0.0.1:1"),
        "{}",
        err.stderr_tail
    );
}

#[test]
fn never_ready_is_not_ready_and_stopped() {
    let mut s = spec(
        "sleep 30 & echo child=$!; echo leader=$$; sleep 30",
        Ready::Port(format!("127.0.0.1:{}", free_port())),
    );
    s.ready_timeout = Duration::from_millis(500);
    let t0 = Instant::now();
    let err = start(&s, &Factors::new()).unwrap_err();
    let took = t0.elapsed();
    assert_eq!(err.kind, FailureKind::NotReady, "{err}");
    assert!(took >= Duration::from_millis(500), "{took:?}");
    assert!(took < Duration::from_millis(500 + 1500), "{took:?}");
    assert!(err.message.contains("500ms"), "{err}");
    let leader = find_pid(&err.stderr_tail, "leader");
    let child = find_pid(&err.stderr_tail, "child");
    assert!(!alive(leader), "server {leader} still running");
    assert!(gone_soon(child), "server's child {child} still running");
}

#[test]
fn dying_mid_run_is_died_during_run() {
    let s = spec(
        "echo READY; sleep 0.3; echo boom >&2; exit 3",
        Ready::Line("READY".into()),
    );
    let mut srv = start(&s, &Factors::new()).unwrap();
    srv.check_alive().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let err = loop {
        match srv.check_alive() {
            Ok(()) => {
                assert!(Instant::now() < deadline, "server did not die");
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => break e,
        }
    };
    assert_eq!(err.kind, FailureKind::DiedDuringRun, "{err}");
    assert!(err.message.contains("exit status 3"), "{err}");
    assert!(err.stderr_tail.contains("boom"), "{}", err.stderr_tail);
    // Asking again gives the same answer; stopping says it had ended.
    assert_eq!(srv.check_alive().unwrap_err(), err);
    let how = srv.stop();
    assert!(how.contains("already ended"), "{how}");
}

#[test]
fn stop_with_sigterm_handled() {
    let s = spec(
        "trap 'echo bye; exit 0' TERM; echo READY; while :; do sleep 0.1; done",
        Ready::Line("READY".into()),
    );
    let srv = start(&s, &Factors::new()).unwrap();
    let pid = srv.pid();
    let t0 = Instant::now();
    let how = srv.stop();
    assert!(how.starts_with("exited 0 after SIGTERM in "), "{how}");
    assert!(t0.elapsed() < Duration::from_secs(1));
    assert!(!alive(pid));
}

#[test]
fn stop_with_default_sigterm_action() {
    let s = spec("echo READY; sleep 30", Ready::Line("READY".into()));
    let srv = start(&s, &Factors::new()).unwrap();
    let how = srv.stop();
    assert!(how.contains("SIGTERM"), "{how}");
    assert!(!how.contains("killed after"), "{how}");
}

#[test]
fn stop_with_another_signal() {
    let mut s = spec(
        "trap 'exit 0' USR1; echo READY; while :; do sleep 0.1; done",
        Ready::Line("READY".into()),
    );
    s.stop_signal = libc::SIGUSR1;
    let srv = start(&s, &Factors::new()).unwrap();
    let how = srv.stop();
    assert!(how.starts_with("exited 0 after SIGUSR1"), "{how}");
}

#[test]
fn stop_kills_a_server_ignoring_sigterm_and_its_children() {
    let mut s = spec(
        "trap '' TERM; sleep 30 & echo child=$!; echo READY; while :; do sleep 0.1; done",
        Ready::Line("READY".into()),
    );
    s.grace = Duration::from_millis(300);
    let srv = start(&s, &Factors::new()).unwrap();
    let pid = srv.pid();
    let child = find_pid(&srv.output_tail(), "child");
    assert!(alive(child));
    assert!(srv.group_pids().contains(&pid) && srv.group_pids().contains(&child));
    let t0 = Instant::now();
    let how = srv.stop();
    let took = t0.elapsed();
    assert_eq!(how, "killed after 300ms grace");
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert!(!alive(pid));
    assert!(gone_soon(child), "the server's child {child} survived");
}

#[test]
fn cpus_pins_the_server_with_taskset() {
    let found = std::process::Command::new("sh")
        .args(["-c", "command -v taskset"])
        .output()
        .unwrap()
        .status
        .success();
    assert!(
        found,
        "`taskset` is missing: apt-get install util-linux (it pins the server to CPUs)"
    );
    let mut s = spec("echo READY; sleep 30", Ready::Line("READY".into()));
    s.cpus = Some("{cpu}".into());
    let srv = start(&s, &factors(&[("cpu", "0")])).unwrap();
    assert!(
        srv.command().starts_with("taskset -c 0 "),
        "{}",
        srv.command()
    );
    let status = std::fs::read_to_string(format!("/proc/{}/status", srv.pid())).unwrap();
    let allowed = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .expect("Cpus_allowed_list in /proc/PID/status")
        .trim();
    assert_eq!(allowed, "0");
    srv.stop();
}

#[test]
fn drop_kills_the_process_group() {
    let s = spec(
        "sleep 30 & echo child=$!; echo READY; wait",
        Ready::Line("READY".into()),
    );
    let srv = start(&s, &Factors::new()).unwrap();
    let pid = srv.pid();
    let child = find_pid(&srv.output_tail(), "child");
    assert!(alive(pid) && alive(child));
    let t0 = Instant::now();
    drop(srv);
    assert!(t0.elapsed() < Duration::from_secs(2));
    assert!(!alive(pid), "server {pid} survived the drop");
    assert!(gone_soon(child), "server's child {child} survived the drop");
}

#[test]
fn template_and_spawn_failures() {
    let s = spec("serve --port {port}", Ready::Line("x".into()));
    let err = start(&s, &factors(&[("arch", "epoll")])).unwrap_err();
    assert_eq!(err.kind, FailureKind::Template);
    assert!(
        err.message.contains("port") && err.message.contains("arch"),
        "{err}"
    );

    let s = spec("true", Ready::Port("127.0.0.1:{nope}".into()));
    assert_eq!(
        start(&s, &Factors::new()).unwrap_err().kind,
        FailureKind::Template
    );

    let mut s = spec("true", Ready::Line("x".into()));
    s.cwd = Some("/nonexistent/headroom-lab".into());
    let err = start(&s, &Factors::new()).unwrap_err();
    assert_eq!(err.kind, FailureKind::Spawn);
    assert!(err.message.contains("/nonexistent/headroom-lab"), "{err}");
}

/// `server.files` and `before_run` happen before every start, in that order, with the
/// configuration's values; the server reads what they left.
#[test]
fn files_are_rendered_and_before_run_runs_before_each_start() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    std::fs::write(dir.path().join("conf-{w}.tmpl"), "unused\n").unwrap();
    std::fs::write(
        dir.path().join("conf-3.tmpl"),
        "workers {w} on {port}; { kept }\n",
    )
    .unwrap();
    let mut spec = ServerSpec::new(
        "cat {out}/rendered-{w}.conf; cat {out}/before; echo up; exec sleep 30",
        Ready::Line("up".into()),
    );
    spec.files = vec![("conf-{w}.tmpl".into(), "{out}/rendered-{w}.conf".into())];
    spec.template_dir = dir.path().to_path_buf();
    // It sees the rendered file already (files come first).
    spec.before_run = Some(
        "grep -q 'workers 3' {out}/rendered-{w}.conf && echo settled-{w} > {out}/before".into(),
    );
    let f = factors(&[("w", "3"), ("port", "4242"), ("out", &d)]);
    let srv = start(&spec, &f).unwrap();
    let tail = srv.output_tail();
    assert!(tail.contains("workers 3 on 4242; { kept }"), "{tail}");
    assert!(tail.contains("settled-3"), "{tail}");
    drop(srv);

    // A failing settle step: no server is started, and its output is in the failure.
    spec.before_run = Some("echo still draining >&2; exit 4".into());
    let e = start(&spec, &f).unwrap_err();
    assert_eq!(e.kind, FailureKind::BeforeRun);
    assert!(e.message.contains("exit status 4"), "{}", e.message);
    assert!(
        e.stderr_tail.contains("still draining"),
        "{}",
        e.stderr_tail
    );
    // One that hangs is killed at its timeout.
    spec.before_run = Some("sleep 30".into());
    spec.before_run_timeout = Duration::from_millis(300);
    let t = Instant::now();
    let e = start(&spec, &f).unwrap_err();
    assert_eq!(e.kind, FailureKind::BeforeRun);
    assert!(t.elapsed() < Duration::from_secs(5));
    // A template that is not there is the run's failure, named.
    spec.before_run = None;
    spec.files = vec![("missing-{w}.tmpl".into(), "{out}/x".into())];
    let e = start(&spec, &f).unwrap_err();
    assert_eq!(e.kind, FailureKind::Files);
    assert!(e.message.contains("missing-3.tmpl"), "{}", e.message);
}

/// `ready.command`: ready once the command exits 0, not before; one that never does is
/// `NotReady` naming the command and what it said last.
#[test]
fn a_readiness_command_waits_for_exit_zero() {
    let dir = tempfile::tempdir().unwrap();
    let flag = dir.path().join("ready");
    let f = factors(&[("flag", flag.to_str().unwrap())]);
    let mut spec = ServerSpec::new(
        "sleep 0.6; touch {flag}; exec sleep 30",
        Ready::Command("test -f {flag}".into()),
    );
    let t = Instant::now();
    let srv = start(&spec, &f).unwrap();
    assert!(flag.exists());
    assert!(
        t.elapsed() >= Duration::from_millis(600),
        "{:?}",
        t.elapsed()
    );
    drop(srv);
    spec.command = "exec sleep 30".into();
    spec.ready = Ready::Command("echo 'not yet: no such table' >&2; exit 1".into());
    spec.ready_timeout = Duration::from_millis(800);
    let e = start(&spec, &f).unwrap_err();
    assert_eq!(e.kind, FailureKind::NotReady);
    assert!(
        e.message.contains("not yet: no such table"),
        "{}",
        e.message
    );
}
