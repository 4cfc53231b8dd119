//! Execution segments: the agents of a distributed run each run `Plan.segment` of the same plan.
//! Their shares must add up to exactly the whole run, and user ids must never collide. Each
//! segment here runs in turn against one small HTTP server that records every request path.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

mod common;
use common::{plan, run};
use headroom_core::{LoadModel, Plan, Segment};

/// An HTTP/1.1 server answering 200 to everything, keeping every request's path.
struct PathServer {
    addr: SocketAddr,
    paths: Arc<Mutex<Vec<String>>>,
    done: Arc<AtomicBool>,
    /// Connections still being served.
    live: Arc<AtomicUsize>,
}

impl PathServer {
    fn start() -> PathServer {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        l.set_nonblocking(true).unwrap();
        let paths = Arc::new(Mutex::new(Vec::new()));
        let done = Arc::new(AtomicBool::new(false));
        let live = Arc::new(AtomicUsize::new(0));
        let (p, d, lv) = (paths.clone(), done.clone(), live.clone());
        std::thread::spawn(move || {
            // Bounded: the test ends it, and it gives up by itself after 60 s.
            let until = Instant::now() + Duration::from_secs(60);
            while !d.load(Ordering::Relaxed) && Instant::now() < until {
                match l.accept() {
                    Ok((s, _)) => {
                        let (p, lv) = (p.clone(), lv.clone());
                        lv.fetch_add(1, Ordering::SeqCst);
                        std::thread::spawn(move || {
                            serve(s, p);
                            lv.fetch_sub(1, Ordering::SeqCst);
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        PathServer {
            addr,
            paths,
            done,
            live,
        }
    }

    /// The paths requested so far, once every connection of the run that just ended has been
    /// read to its end (a request still in a socket buffer must count for that run, not the
    /// next one).
    fn take(&self) -> Vec<String> {
        let until = Instant::now() + Duration::from_secs(10);
        while self.live.load(Ordering::SeqCst) > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::mem::take(&mut *self.paths.lock().unwrap())
    }
}

impl Drop for PathServer {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
    }
}

fn serve(mut s: TcpStream, paths: Arc<Mutex<Vec<String>>>) {
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            buf.drain(..end + 4);
            let path = head.split(' ').nth(1).unwrap_or("").to_string();
            paths.lock().unwrap().push(path);
            if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                .is_err()
            {
                return;
            }
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// A scenario plan whose every request names its user: `/u/${user_id}`.
fn scenario_plan(addr: SocketAddr, load: &str, threads: usize) -> Plan {
    let text =
        format!("{load}\nsessions: [{{name: s, steps: [{{request: \"GET /u/${{user_id}}\"}}]}}]\n");
    let s = headroom_scenario::parse_str(&text, "segments.yaml").unwrap();
    let c = headroom_scenario::compile(&s, std::path::Path::new(".")).unwrap();
    let mut p = plan(
        addr,
        LoadModel::Sessions {
            users: c.users,
            phases: c.phases,
        },
        threads,
    );
    p.stop.duration = Some(c.phases_duration.max(Duration::from_secs(1)));
    p.workload = Some(Arc::new(c.workload));
    p
}

#[test]
fn segments_of_a_closed_load_add_up_to_the_whole() {
    let server = PathServer::start();
    // 7 users of 3 requests each, over 3 agents of 2 threads: 6 global worker slots.
    let model = LoadModel::Closed {
        users: 7,
        per_user: Some(3),
        think: None,
    };
    let mut started = Vec::new();
    let mut responses = 0;
    for index in 0..3 {
        let mut p = plan(server.addr, model.clone(), 2);
        p.segment = Segment { index, count: 3 };
        let out = run(&p);
        assert_eq!(out.total.counters.errors_total(), 0);
        started.push(out.total.counters.users_started);
        responses += out.total.counters.responses;
    }
    // Slots take 2,1,1,1,1,1 users; agent 0 holds slots 0-1, agent 1 slots 2-3, agent 2 4-5.
    assert_eq!(started, vec![3, 2, 2]);
    assert_eq!(responses, 21);
    assert_eq!(server.take().len(), 21);
}

#[test]
fn a_request_budget_is_split_exactly_over_the_segments() {
    let server = PathServer::start();
    let model = LoadModel::Closed {
        users: 4,
        per_user: None,
        think: None,
    };
    let mut total = 0;
    for index in 0..3 {
        let mut p = plan(server.addr, model.clone(), 1);
        p.stop.requests = Some(100);
        p.segment = Segment { index, count: 3 };
        let out = run(&p);
        // 100 over 3 slots: 34, 33, 33.
        assert_eq!(out.total.counters.responses, [34, 33, 33][index as usize]);
        total += out.total.counters.responses;
    }
    assert_eq!(total, 100);
}

#[test]
fn user_ids_never_collide_across_segments() {
    let server = PathServer::start();
    // A fixed population of 10 and 40 arrivals at a constant rate, over 2 agents of 2 threads.
    let load =
        "load: {users: [{count: 10}], phases: [{duration: 1s, arrival_rate: 40, arrival: constant}]}";
    let mut per_agent = Vec::new();
    for index in 0..2 {
        let mut p = scenario_plan(server.addr, load, 2);
        p.segment = Segment { index, count: 2 };
        let out = run(&p);
        assert_eq!(out.total.counters.errors_total(), 0);
        per_agent.push(server.take());
    }
    // A population user repeats its session (and its id) within its agent; ids of different
    // agents must be disjoint.
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (agent, paths) in per_agent.iter().enumerate() {
        assert!(!paths.is_empty(), "agent {agent} sent nothing");
        let mut mine: Vec<&String> = paths.iter().collect();
        mine.sort();
        mine.dedup();
        for p in mine {
            if let Some(other) = seen.insert(p.clone(), agent) {
                panic!("{p} was used by agent {other} and again by agent {agent}");
            }
        }
    }
    // The population's ids are 0..10 exactly, split over both agents.
    for id in 0..10 {
        assert!(
            seen.contains_key(&format!("/u/{id}")),
            "population user {id} missing"
        );
    }
    // Arrived users' ids are above 2^40, one per arrival. (Constant arrivals: a Poisson phase's
    // count varies by ±6 around 40, which made this check fail a CI run at 34.)
    let arrived = seen.keys().filter(|p| p.len() > "/u/99".len()).count();
    assert_eq!(seen.len() - arrived, 10, "{seen:?}");
    assert!(
        (36..=44).contains(&arrived),
        "40 arrivals expected over both agents, got {arrived}"
    );
}

#[test]
fn a_run_waits_for_its_start_instant() {
    let server = PathServer::start();
    let mut p = plan(
        server.addr,
        LoadModel::Closed {
            users: 1,
            per_user: Some(1),
            think: None,
        },
        1,
    );
    let at = SystemTime::now() + Duration::from_millis(700);
    p.start_at = Some(at);
    let out = run(&p);
    let late = out
        .started_at
        .duration_since(at)
        .expect("started before its instant");
    assert!(late < Duration::from_millis(200), "started {late:?} late");
    assert_eq!(out.total.counters.responses, 1);
}

#[test]
fn a_segment_that_does_not_exist_is_refused() {
    let mut p = plan(
        "127.0.0.1:9".parse().unwrap(),
        LoadModel::Closed {
            users: 1,
            per_user: Some(1),
            think: None,
        },
        1,
    );
    p.segment = Segment { index: 2, count: 2 };
    let e = headroom_engine::run(&p, Arc::new(AtomicBool::new(false)), &mut |_| {}).unwrap_err();
    assert!(e.to_string().contains("segment 2 of 2"), "{e}");
}
