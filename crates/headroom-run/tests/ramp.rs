//! Ramps of a closed population (issue 16): `--ramp-up` starts users evenly, second by second,
//! and a scenario's `stages:` move the number of users alive up and down — measured from the
//! run's per-second intervals.jsonl lines, against `headroom serve` on loopback. (The CLI's
//! side, contradictory ramps refused as usage errors, is crates/headroom/tests/ramp.rs.)

mod common;

use std::time::Duration;

use common::*;
use headroom_run::interval::IntervalLine;
use headroom_run::summary::{Load, Stage};

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

/// Raise this process's descriptor soft limit (the server's side of every connection and the
/// engine's, both in this process) to `want`, within the hard limit.
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

fn col(ivs: &[IntervalLine], f: impl Fn(&IntervalLine) -> u64) -> Vec<u64> {
    ivs.iter().map(f).collect()
}

/// The acceptance figure of issue 16: `-c 1000 --ramp-up 10s` starts 100 users (±5%) in
/// every second of the ramp, and all 1,000 of them.
#[test]
fn ramp_up_starts_users_evenly_second_by_second() {
    let server = serve(1);
    // -c 1000 --ramp-up 10s -d 12s -t 2
    let mut spec = url_spec(&format!("http://{}/", server.local_addr()));
    spec.connections = Some(1000);
    spec.ramp_up = Some(Duration::from_secs(10));
    spec.duration = secs(12);
    spec.threads = Some(2);
    let (f, ivs) = run_lines(&spec);
    assert_clean(&f);
    let started = col(&ivs, |iv| iv.users_started);
    let active = col(&ivs, |iv| iv.users_active);
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
    let errors: u64 = ivs.iter().map(|iv| iv.errors.total()).sum();
    assert_eq!(errors, 0, "no errors on loopback");
    // The summary agrees with its lines, and names the ramp.
    let v = &f.summary;
    assert_eq!(v.errors_total, 0, "{}", show(v));
    assert_eq!(v.users_started, 1000, "{}", show(v));
    match &v.load {
        Load::Closed { users, ramp, .. } => {
            assert_eq!(*users, 1000, "{:?}", v.load);
            assert_eq!(
                ramp,
                &vec![Stage {
                    duration_s: 10.0,
                    users: 1000
                }],
                "{:?}",
                v.load
            );
        }
        other => panic!("not a closed load: {other:?}"),
    }
}

/// A scenario's stages: up to 200 users, hold, down to 0. Users alive follow the stages, and
/// the users told to leave finish their session and count in `users_finished` as they go.
#[test]
fn scenario_stages_ramp_users_up_and_down() {
    let server = serve(1);
    // stages.yaml --target ADDR -t 2
    let mut spec = scenario_spec(
        "load:\n  stages:\n    - {duration: 3s, users: 200}\n    - {duration: 2s, users: 200}\n    \
         - {duration: 3s, users: 0}\n\
         sessions:\n  - name: page\n    steps:\n      - request: GET /\n      - think: 100ms\n",
        Some(server.local_addr().to_string()),
    );
    spec.threads = Some(2);
    let (f, ivs) = run_lines(&spec);
    assert_clean(&f);
    let (started, active, finished) = (
        col(&ivs, |iv| iv.users_started),
        col(&ivs, |iv| iv.users_active),
        col(&ivs, |iv| iv.users_finished),
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
    let v = &f.summary;
    assert_eq!(v.users_started, 200, "{}", show(v));
    assert_eq!(v.errors_total, 0, "{}", show(v));
}
