//! The command line as a person meets it: bad input is one line saying what is wrong, with
//! exit code 2; an unreachable target is one line and exit 1; help teaches.

mod common;
use common::*;

fn stderr_of(args: &[&str]) -> (i32, String, String) {
    let out = headroom().args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_url_is_one_line_and_exit_2() {
    for (url, says) in [
        ("127.0.0.1:8080", "no scheme"),
        ("ftp://127.0.0.1/", "scheme 'ftp' is not supported"),
        ("http://127.0.0.1:70000/", "not a number from 1 to 65535"),
    ] {
        let (code, stdout, stderr) = stderr_of(&["run", url]);
        assert_eq!(code, 2, "{url}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");
        assert!(stderr.contains(says), "{url}: {stderr}");
        assert!(
            stderr.contains("expected") || stderr.contains("use"),
            "says how to fix: {stderr}"
        );
        assert!(stdout.is_empty());
    }
}

/// A mistyped flag keeps clap's suggestion, in the one line, with the subcommand's help named.
#[test]
fn a_mistyped_flag_suggests_the_right_one_in_one_line() {
    for (args, want, help) in [
        (
            &["run", "http://127.0.0.1:1/", "--conections", "5"][..],
            "did you mean '--connections'?",
            "(see 'headroom run --help')",
        ),
        (
            &["lab", "e.yaml", "--qiuck"],
            "did you mean '--quick'?",
            "(see 'headroom lab --help')",
        ),
    ] {
        let (code, stdout, stderr) = stderr_of(args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
        assert!(stderr.trim_end().ends_with(help), "{args:?}: {stderr}");
        assert!(stdout.is_empty());
    }
}

#[test]
fn bad_flag_values_are_one_line_and_exit_2() {
    for (args, says) in [
        (
            vec!["run", "http://127.0.0.1/", "-c", "many"],
            "invalid value 'many'",
        ),
        (
            vec!["run", "http://127.0.0.1/", "-d", "soon"],
            "not a duration",
        ),
        (
            vec!["run", "http://127.0.0.1/", "--think", "gauss:1s"],
            "unknown distribution",
        ),
        (
            vec![
                "run",
                "http://127.0.0.1/",
                "--rate",
                "10",
                "--arrival-rate",
                "5",
            ],
            "choose one",
        ),
        (
            vec!["run", "http://127.0.0.1/", "--max-error-rate", "150%"],
            "not an error rate",
        ),
        (
            vec!["run", "http://127.0.0.1/", "--bind", "127.0.0.9-127.0.0.2"],
            "ends before it starts",
        ),
        (
            vec!["run", "http://127.0.0.1/", "--arrival", "bursty"],
            "possible values",
        ),
        (
            vec!["run", "http://127.0.0.1/", "-c", "50000"],
            "descriptors",
        ),
    ] {
        let (code, _, stderr) = stderr_of(&args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

#[test]
fn unreachable_port_is_one_line_and_exit_1() {
    let port = free_port();
    let (code, stdout, stderr) = stderr_of(&["run", &format!("http://127.0.0.1:{port}/")]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr:?}");
    assert!(stderr.contains("connection refused"), "{stderr}");
    assert!(stderr.contains("is the server running"), "{stderr}");
    assert!(stdout.is_empty());
}

#[test]
fn help_teaches_models_and_exit_codes() {
    let (code, stdout, _) = stderr_of(&["run", "--help"]);
    assert_eq!(code, 0);
    for needle in [
        "--per-user",
        "--rate",
        "--arrival-rate",
        "Examples:",
        "Exit codes",
        "coordinated",
        "FILE.yaml",
        "--target",
    ] {
        assert!(stdout.contains(needle), "help lacks {needle}");
    }
}

/// Each command's long help has its examples (the long text once sat on the argument struct,
/// where the subcommand's doc comment replaced it: `report --help` showed one line).
#[test]
fn every_commands_help_has_examples() {
    for (cmd, needle) in [
        ("report", "headroom report runs/a runs/b"),
        ("import", "headroom import tsung tsung.xml"),
        ("agent", "Example"),
        ("serve", "Example"),
        ("lab", "Example"),
        ("run", "Examples:"),
    ] {
        let (code, stdout, _) = stderr_of(&[cmd, "--help"]);
        assert_eq!(code, 0, "{cmd}");
        assert!(
            stdout.contains(needle),
            "{cmd} --help lacks {needle}:\n{stdout}"
        );
    }
}

/// Completions load into bash and complete the subcommands; the man pages are written, one per
/// subcommand, and name the flags.
#[test]
fn completions_and_man_pages_come_from_the_command_line() {
    let exe = env!("CARGO_BIN_EXE_headroom");
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source <('{exe}' completions bash) && complete -p headroom && \
             COMP_WORDS=(headroom re) COMP_CWORD=1 COMP_LINE='headroom re' COMP_POINT=11 && \
             _headroom headroom re headroom && echo \"${{COMPREPLY[@]}}\""
        ))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(text.contains("-F _headroom headroom"), "{text}");
    assert!(text.lines().last().unwrap().contains("report"), "{text}");
    for shell in ["zsh", "fish"] {
        let (code, stdout, _) = stderr_of(&["completions", shell]);
        assert_eq!(code, 0);
        assert!(stdout.contains("headroom"), "{shell}");
    }
    let (code, _, stderr) = stderr_of(&["completions", "tcsh"]);
    assert_eq!(code, 2, "{stderr}");

    let (code, page, _) = stderr_of(&["man"]);
    assert_eq!(code, 0);
    assert!(
        page.starts_with(".ie") || page.contains(".TH headroom 1"),
        "{page}"
    );
    let dir = tempfile::tempdir().unwrap();
    let (code, _, stderr) = stderr_of(&["man", "--dir", dir.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    for name in [
        "headroom.1",
        "headroom-run.1",
        "headroom-lab.1",
        "headroom-report.1",
    ] {
        let p = dir.path().join(name);
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(text.contains(".SH NAME"), "{name}");
    }
    let run = std::fs::read_to_string(dir.path().join("headroom-run.1")).unwrap();
    assert!(run.contains("connections"), "run's page names its flags");
}

#[test]
fn human_summary_names_the_model_and_figures() {
    let s = TestServer::ok();
    let out = headroom()
        .args(["run", &s.url(), "-c", "2", "--per-user", "50", "-q"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "closed model, 2 users x 50 requests",
        "Latency",
        "p99.9",
        "Connect",
        "Errors       none",
        "2xx 100",
    ] {
        assert!(text.contains(needle), "summary lacks {needle:?}:\n{text}");
    }
    assert!(out.stderr.is_empty(), "quiet run prints nothing on stderr");
}

#[test]
fn progress_lines_when_not_a_terminal() {
    let s = TestServer::ok();
    let out = headroom()
        .args([
            "run",
            &s.url(),
            "-c",
            "2",
            "-d",
            "1200ms",
            "--interval",
            "200ms",
            "--json",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let lines = err.lines().filter(|l| l.contains("req/s")).count();
    assert!(
        (5..=8).contains(&lines),
        "one plain progress line per interval: {err}"
    );
    assert!(!err.contains('\r'), "no carriage returns off a terminal");
    let _: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is pure JSON");
}

#[test]
fn sigint_stops_cleanly_and_still_writes_the_summary() {
    let s = TestServer::ok();
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("r");
    let child = headroom()
        .args([
            "run",
            &s.url(),
            "-c",
            "2",
            "-d",
            "30s",
            "-q",
            "--out",
            run.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let t = std::time::Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(t.elapsed().as_secs() < 3, "stopped promptly");
    assert!(out.status.success());
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    assert_eq!(v["interrupted"], true);
    assert!(v["responses"].as_u64().unwrap() > 0);
    assert!(v["duration_s"].as_f64().unwrap() < 5.0);
}

/// `headroom serve` as a person runs it: one readiness line naming the address, answers,
/// and a clean exit 0 on SIGTERM (drain), for a blocking and an event-driven architecture.
#[test]
fn serve_prints_readiness_serves_and_drains_on_sigterm() {
    use std::io::{BufRead, BufReader, Read, Write};
    for arch in [
        vec!["--arch", "pool", "--handlers", "2"],
        vec!["--arch", "reactor", "--poller", "poll", "--workers", "1"],
        vec!["--arch", "async", "--runtime", "current-thread"],
    ] {
        let mut child = headroom()
            .args(["serve", "--listen", "127.0.0.1:0", "--drain-timeout", "2s"])
            .args(&arch)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(
            line.starts_with("headroom serve: listening on 127.0.0.1:"),
            "{arch:?}: {line}"
        );
        let addr = line.split_whitespace().nth(4).unwrap().to_string();
        let mut c = std::net::TcpStream::connect(&addr).unwrap();
        c.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        c.write_all(b"GET /status HTTP/1.1\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut got = String::new();
        c.read_to_string(&mut got).unwrap();
        assert!(got.starts_with("HTTP/1.1 200 OK"), "{arch:?}: {got}");
        assert!(got.contains("\"arch\""), "{arch:?}: /status is JSON: {got}");
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let t = std::time::Instant::now();
        let status = child.wait().unwrap();
        assert!(status.success(), "{arch:?}: {status:?}");
        assert!(t.elapsed().as_secs() < 3, "{arch:?}: drained promptly");
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert!(
            err.contains("draining") && err.contains("stopped after"),
            "{arch:?}: {err}"
        );
    }
}

#[test]
fn serve_bad_flags_are_one_line_and_exit_2() {
    for (args, says) in [
        (
            vec!["serve", "--arch", "pool", "--handlers", "0"],
            "bad --handlers 0",
        ),
        (
            vec!["serve", "--db", "mysql://x"],
            "use sqlite:PATH or postgres://",
        ),
        (vec!["serve", "--arch", "fork"], "possible values"),
        (
            vec!["serve", "--docroot", "/nonexistent/dir"],
            "not a directory",
        ),
    ] {
        let (code, _, stderr) = stderr_of(&args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr:?}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}
