//! Ramps of a closed population (issue 16): `--ramp-up` starts users evenly, second by second,
//! and a scenario's `stages:` move the number of users alive up and down — measured from the
//! run directory's per-second intervals, against `headroom serve` on loopback.

mod common;

use std::path::Path;
use std::process::Output;

use common::headroom;

/// headroom serve (reactor) in this process, with room for a thousand connections.
fn serve(workers: usize) -> headroom_serve::RunningServer {
    raise_nofile(4096);
    headroom_serve::start(headroom_serve::ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        workers,
        ..Default::default()
    })
    .expect("start headroom serve")
}

/// Raise this process's descriptor soft limit (the server's side of every connection, and the
/// `headroom run` child that inherits it) to `want`, within the hard limit.
fn raise_nofile(want: u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit write and read the one struct given.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
        if lim.rlim_cur < want {
            lim.rlim_cur = want.min(lim.rlim_max);
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &lim), 0);
        }
    }
    assert!(
        lim.rlim_cur >= 2500,
        "the ramp tests need ~2,200 descriptors; the hard limit is {}",
        lim.rlim_max
    );
}

fn intervals(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("intervals.jsonl"))
        .expect("intervals.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("an interval line"))
        .collect()
}

fn field(iv: &serde_json::Value, name: &str) -> u64 {
    iv[name]
        .as_u64()
        .unwrap_or_else(|| panic!("no '{name}' in {iv}"))
}

fn ok(out: &Output) {
    assert!(
        out.status.success(),
        "headroom run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The acceptance figure of issue 16: `-c 1000 --ramp-up 10s` starts 100 users (±5%) in
/// every second of the ramp, and all 1,000 of them.
#[test]
fn ramp_up_starts_users_evenly_second_by_second() {
    let server = serve(1);
    let url = format!("http://{}/", server.local_addr());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let out = headroom()
        .args([
            "run",
            &url,
            "-c",
            "1000",
            "--ramp-up",
            "10s",
            "-d",
            "12s",
            "-t",
            "2",
        ])
        .args(["-q", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    ok(&out);
    let ivs = intervals(&dir);
    let started: Vec<u64> = ivs.iter().map(|iv| field(iv, "users_started")).collect();
    let active: Vec<u64> = ivs.iter().map(|iv| field(iv, "users_active")).collect();
    eprintln!("users started per second: {started:?}");
    eprintln!("users alive at each second's end: {active:?}");
    assert!(ivs.len() >= 12, "12 one-second intervals: {}", ivs.len());
    for (s, &n) in started.iter().take(10).enumerate() {
        assert!(
            (95..=105).contains(&n),
            "second {s}: {n} users started, not 100 ± 5% ({started:?})"
        );
    }
    assert_eq!(started.iter().sum::<u64>(), 1000, "every user started");
    assert_eq!(started[10..].iter().sum::<u64>(), 0, "none after the ramp");
    // Users stay: the population grows by ~100 a second and holds at 1,000.
    for s in 0..9 {
        assert!(active[s] < active[s + 1], "alive grows: {active:?}");
    }
    assert_eq!(active[10], 1000, "{active:?}");
    let errors: u64 = ivs
        .iter()
        .flat_map(|iv| iv["errors"].as_object().unwrap().values())
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(errors, 0, "no errors on loopback");
}

/// A scenario's stages: up to 200 users, hold, down to 0. Users alive follow the stages, and
/// the users told to leave finish their session and count in `users_finished` as they go.
#[test]
fn scenario_stages_ramp_users_up_and_down() {
    let server = serve(1);
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("stages.yaml");
    std::fs::write(
        &file,
        "load:\n  stages:\n    - {duration: 3s, users: 200}\n    - {duration: 2s, users: 200}\n    \
         - {duration: 3s, users: 0}\n\
         sessions:\n  - name: page\n    steps:\n      - request: GET /\n      - think: 100ms\n",
    )
    .unwrap();
    let dir = tmp.path().join("run");
    let out = headroom()
        .arg("run")
        .arg(&file)
        .args([
            "--target",
            &server.local_addr().to_string(),
            "-t",
            "2",
            "-q",
        ])
        .arg("--out")
        .arg(&dir)
        .output()
        .unwrap();
    ok(&out);
    let ivs = intervals(&dir);
    let col = |name: &str| -> Vec<u64> { ivs.iter().map(|iv| field(iv, name)).collect() };
    let (started, active, finished) = (
        col("users_started"),
        col("users_active"),
        col("users_finished"),
    );
    eprintln!("started {started:?}\nalive {active:?}\nfinished {finished:?}");
    // No -d: the run ends with the last stage, 8 s.
    assert_eq!(ivs.len(), 8, "one interval a second over the stages");
    // Up: ~67 users a second; alive at the end of second 1 (level 133) and at the peak.
    assert!((60..=73).contains(&started[0]), "{started:?}");
    assert!((125..=141).contains(&active[1]), "{active:?}");
    assert_eq!(active[2], 200, "the peak: {active:?}");
    assert_eq!(active[4], 200, "held: {active:?}");
    assert_eq!(started.iter().sum::<u64>(), 200, "each user started once");
    assert_eq!(
        finished[..5].iter().sum::<u64>(),
        0,
        "nobody leaves before the fall"
    );
    // Down: ~67 leave a second (each at the end of its 100 ms session), alive falls.
    for s in 5..7 {
        assert!((55..=80).contains(&finished[s]), "second {s}: {finished:?}");
    }
    assert!(active[5] < 200 && active[6] < active[5] && active[7] < active[6]);
    assert!(active[6] <= 85, "level 67 at 7 s: {active:?}");
    let left: u64 = finished.iter().sum();
    // The last few, told to leave in the run's final 100 ms, may still be in their session.
    assert!(left >= 185, "the users left as the stages fell: {left}");
}

/// Contradictions are refused with a one-line usage error (exit 2), before any load.
#[test]
fn ramp_contradictions_are_usage_errors() {
    for args in [
        &["-c", "10", "--ramp-up", "5s", "--rate", "100"][..],
        &["--ramp-up", "5s", "--arrival-rate", "10"][..],
        &["--stage", "5s:100", "-c", "20"][..],
    ] {
        let out = headroom()
            .args(["run", "http://127.0.0.1:9/"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    }
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("bad.yaml");
    std::fs::write(
        &file,
        "load:\n  users:\n    - {count: 10}\n  stages:\n    - {duration: 5s, users: 20}\n\
         sessions:\n  - name: s\n    steps:\n      - request: GET /\n",
    )
    .unwrap();
    let out = headroom()
        .arg("run")
        .arg(&file)
        .args(["--target", "127.0.0.1:9"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.yaml:5:5:") && err.contains("add up to 10"),
        "located at the stages: {err}"
    );
}
