//! issue 26: every load flag of `headroom run` either applies to a scenario file, a Tsung XML and
//! a HAR, or is refused in one line (exit 2) naming the flag and the file — none is ignored. The
//! flags walked are read from `headroom run --help` (its Load section, plus `--pipeline` and
//! `--streams`), so a load flag added later without a row here fails the test.
//!
//! Before issue 26, `run shop.har -c 20` ran 1 user and `run one.yaml -c 7` the file's 3, both
//! exit 0; `--arrival constant` was ignored with a file (and with a URL run without
//! `--arrival-rate`).

mod common;
use common::*;

use std::path::Path;

/// The files under test, all aimed at `addr`: a one-population YAML (3 users), a YAML of open
/// arrivals, a Tsung XML (arrival phases) and a HAR (1 user by default).
fn files(dir: &Path, addr: std::net::SocketAddr) -> [(&'static str, std::path::PathBuf); 4] {
    let (host, port) = (addr.ip(), addr.port());
    let one = dir.join("one.yaml");
    std::fs::write(
        &one,
        format!(
            "servers: [{{host: {host}, port: {port}}}]\nload: {{users: [{{count: 3}}]}}\n\
             sessions:\n  - name: s\n    steps:\n      - request: {{path: /}}\n"
        ),
    )
    .unwrap();
    let phases = dir.join("phases.yaml");
    std::fs::write(
        &phases,
        format!(
            "servers: [{{host: {host}, port: {port}}}]\n\
             load:\n  phases: [{{duration: 2s, arrival_rate: 100}}]\n\
             sessions:\n  - name: s\n    steps:\n      - request: {{path: /}}\n"
        ),
    )
    .unwrap();
    let tsung = dir.join("shop.xml");
    std::fs::write(
        &tsung,
        format!(
            r#"<?xml version="1.0"?>
<tsung version="1.0">
  <servers><server host="{host}" port="{port}" type="tcp"/></servers>
  <load>
    <arrivalphase phase="1" duration="2" unit="second"><users arrivalrate="100" unit="second"/></arrivalphase>
  </load>
  <sessions>
    <session name="s" probability="100" type="ts_http">
      <request><http url="/" method="GET" version="1.1"/></request>
    </session>
  </sessions>
</tsung>
"#
        ),
    )
    .unwrap();
    let har = dir.join("shop.har");
    std::fs::write(
        &har,
        format!(
            r#"{{"log": {{"version": "1.2", "creator": {{"name": "test", "version": "1"}}, "entries": [
  {{"startedDateTime": "2026-11-27T10:00:00.000Z", "time": 1,
    "request": {{"method": "GET", "url": "http://{host}:{port}/", "httpVersion": "HTTP/1.1", "headers": []}},
    "response": {{"status": 200}}}}]}}}}"#
        ),
    )
    .unwrap();
    [
        ("one.yaml", one),
        ("phases.yaml", phases),
        ("shop.xml", tsung),
        ("shop.har", har),
    ]
}

/// The long names of the flags in `headroom run --help`'s Load section.
fn load_flags_in_help() -> Vec<String> {
    let out = headroom().args(["run", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout).into_owned();
    let start = help
        .find("\nLoad:\n")
        .expect("a Load section in run --help");
    let section = &help[start + 7..];
    let mut flags = Vec::new();
    // The section ends at the next heading (a line that is not indented).
    for line in section
        .lines()
        .take_while(|l| l.is_empty() || l.starts_with(' '))
    {
        let t = line.trim_start();
        if !t.starts_with('-') {
            continue;
        }
        if let Some(at) = t.find("--") {
            let name: String = t[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            flags.push(name);
        }
    }
    assert!(flags.len() >= 10, "parsed {flags:?} from:\n{help}");
    flags
}

/// Each load flag with the value the test gives it.
const FLAGS: &[(&str, &[&str])] = &[
    ("--target", &[]), // a scenario's own flag, walked by every other test
    ("--connections", &["-c", "7"]),
    ("--duration", &["-d", "1500ms"]),
    ("--requests", &["-n", "40"]),
    ("--per-user", &["--per-user", "2"]),
    ("--think", &["--think", "10ms"]),
    ("--rate", &["--rate", "50"]),
    ("--arrival-rate", &["--arrival-rate", "5"]),
    ("--arrival", &["--arrival", "constant"]),
    ("--max-users", &["--max-users", "5"]),
    ("--ramp-up", &["--ramp-up", "1s"]),
    ("--stage", &["--stage", "1s:3"]),
    ("--threads", &["-t", "1"]),
    ("--pipeline", &["--pipeline", "2"]),
    ("--streams", &["--streams", "2"]),
    ("--timer-slack", &["--timer-slack", "5ms"]),
];

/// What a flag does with a file: applies (and the summary shows it), or is refused.
fn applies(flag: &str, file: &str) -> bool {
    match flag {
        // The engine's timers (a file's think times and phases) whatever the load.
        "--duration" | "--requests" | "--threads" | "--timer-slack" => true,
        // The population of a file whose load is one closed population: a HAR, one.yaml.
        "--connections" => file == "shop.har" || file == "one.yaml",
        _ => false,
    }
}

#[test]
fn issue26_every_load_flag_applies_or_is_refused_with_a_scenario_a_tsung_file_and_a_har() {
    let server = serve();
    let addr = server.local_addr();
    let dir = tempfile::tempdir().unwrap();
    let files = files(dir.path(), addr);

    let walked: Vec<&str> = FLAGS.iter().map(|(f, _)| *f).collect();
    for f in load_flags_in_help() {
        assert!(
            walked.contains(&f.as_str()),
            "run --help lists load flag {f}, which this test does not walk: add it to FLAGS"
        );
    }

    for (name, path) in &files {
        let path = path.to_str().unwrap();
        for (flag, args) in FLAGS {
            if args.is_empty() {
                continue;
            }
            // Every run is bounded: -d unless the flag is -d itself or -n (which bounds it).
            let mut all: Vec<&str> = args.to_vec();
            if !matches!(*flag, "--duration" | "--requests") {
                all.extend(["-d", "1s"]);
            }
            if *flag == "--requests" {
                all.extend(["-d", "10s"]);
            }
            if !applies(flag, name) {
                let out = run_plain(path, &all);
                let line = one_line(&out);
                assert_eq!(
                    out.status.code(),
                    Some(2),
                    "{name} {all:?}: refused with exit 2: {line}"
                );
                let shown = args[0];
                assert!(
                    line.contains(shown) || line.contains(flag),
                    "{name} {all:?}: the line names the flag: {line}"
                );
                assert!(
                    line.contains(name),
                    "{name} {all:?}: the line names the file: {line}"
                );
                assert!(
                    line.contains("load") || line.contains("replayed"),
                    "{name} {all:?}: the line names the file's own setting: {line}"
                );
                continue;
            }
            let (v, out) = run_json(path, &all);
            assert_eq!(
                out.status.code(),
                Some(0),
                "{name} {all:?} applies: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            match *flag {
                "--connections" => {
                    assert_eq!(v["load"]["users"], 7, "{name} -c 7: {}", v["load"]);
                    assert_eq!(v["users_started"], 7, "{name} -c 7");
                    assert_eq!(v["connections_peak"], 7, "{name} -c 7");
                }
                "--duration" => {
                    let d = v["duration_s"].as_f64().unwrap();
                    assert!((1.3..3.0).contains(&d), "{name} -d 1500ms ran {d} s");
                }
                "--requests" => assert_eq!(v["requests"], 40, "{name} -n 40"),
                "--threads" => assert_eq!(v["threads"], 1, "{name} -t 1"),
                "--timer-slack" => {
                    assert_eq!(v["timer_slack_us"], 5000, "{name} --timer-slack 5ms")
                }
                other => unreachable!("{other}"),
            }
        }
    }
}

/// The acceptance figure: `run FILE.har -c 20` runs 20 users (and without -c, the HAR's 1).
#[test]
fn issue26_a_har_with_c_20_runs_20_users() {
    let server = serve();
    let dir = tempfile::tempdir().unwrap();
    let files = files(dir.path(), server.local_addr());
    let har = files[3].1.to_str().unwrap();
    let (v, out) = run_json(har, &["-c", "20", "-d", "1s"]);
    succeeded(&out);
    assert_eq!(v["users_started"], 20, "{v}");
    assert_eq!(v["connections_peak"], 20);
    let (v, out) = run_json(har, &["-d", "1s"]);
    succeeded(&out);
    assert_eq!(v["users_started"], 1, "without -c the HAR's one user");
}

/// A URL run's open model takes no -c and an --arrival needs --arrival-rate: both were ignored.
#[test]
fn issue26_url_load_flags_of_another_model_are_refused() {
    for (args, says) in [
        (&["--arrival", "constant"][..], "--arrival-rate"),
        (&["--arrival-rate", "5", "-c", "20"][..], "-c 20"),
    ] {
        let out = run_plain("http://127.0.0.1:9/", args);
        let line = one_line(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {line}");
        assert!(line.contains(says), "{args:?}: {line}");
    }
}
