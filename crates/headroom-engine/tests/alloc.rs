//! The hot path allocates nothing per request: a run of 20x more requests makes (almost) no
//! more allocations. Counted with a global allocator over the whole process, which includes the
//! in-process reference server, so it holds that server to the same rule.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

mod common;
use headroom_core::{LoadModel, Plan};

#[global_allocator]
static GLOBAL: headroom_testkit::CountingAlloc = headroom_testkit::CountingAlloc;

/// The counter is process-wide: the tests take turns so one's allocations never land in the
/// other's count.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn allocations_for(requests: u64, addr: std::net::SocketAddr) -> (u64, u64) {
    run_counted(plan_for(requests, addr), requests)
}

fn plan_for(requests: u64, addr: std::net::SocketAddr) -> Plan {
    let model = LoadModel::Closed {
        users: 4,
        per_user: None,
        think: None,
    };
    let mut p = common::plan(addr, model, 1);
    p.stop.duration = Some(Duration::from_secs(60));
    p.stop.requests = Some(requests);
    // One interval for the whole run: interval snapshots are not per request, but they do
    // allocate, and this test is about the per-request path.
    p.interval = Duration::from_secs(60);
    p.socket.nodelay = true;
    p
}

fn run_counted(plan: Plan, requests: u64) -> (u64, u64) {
    let (allocs, c) = run_counters(plan, requests);
    (allocs, c.responses)
}

fn run_counters(plan: Plan, requests: u64) -> (u64, headroom_metrics::Counters) {
    let before = headroom_testkit::process_allocs();
    let out = headroom_engine::run(&plan, Arc::new(AtomicBool::new(false)), &mut |_| {}).unwrap();
    let after = headroom_testkit::process_allocs();
    assert_eq!(out.total.counters.responses, requests);
    assert_eq!(out.total.counters.errors_total(), 0);
    (after - before, out.total.counters)
}

/// Warm up, then compare a run of 2,000 requests with one of 40,000: the larger may make fewer
/// than 100 more allocations.
fn assert_flat(what: &str, measure: fn(u64, std::net::SocketAddr) -> (u64, u64)) {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let server = headroom_serve::start(headroom_serve::ServerConfig {
        workers: 1,
        ..Default::default()
    })
    .unwrap();
    let addr = server.local_addr();
    measure(500, addr); // warm up lazily initialised state
    let (small, _) = measure(2_000, addr);
    let (large, n) = measure(40_000, addr);
    let extra = large.saturating_sub(small);
    assert!(
        extra < 100,
        "{n} {what} made {large} allocations against {small} for 2,000: {extra} extra"
    );
    server.stop();
}

#[test]
fn steady_state_allocates_nothing_per_request() {
    assert_flat("requests", allocations_for);
}

/// The same rule for scenario users: a session of static requests and a zero think, looped.
fn session_allocations_for(requests: u64, addr: std::net::SocketAddr) -> (u64, u64) {
    scenario_allocations_for(
        "load: {users: [{count: 4}]}\n\
         sessions: [{name: s, steps: [{request: GET /}, {think: 0s}, {request: {name: two, path: /}}]}]\n",
        requests,
        addr,
    )
}

/// The allocations of `requests` requests of the scenario `yaml` (a warm-up first, see
/// `run_counted`).
fn scenario_allocations_for(yaml: &str, requests: u64, addr: std::net::SocketAddr) -> (u64, u64) {
    let (allocs, c) = scenario_counters(yaml, requests, addr);
    (allocs, c.responses)
}

/// The allocations and the counters of `requests` requests of the scenario `yaml`.
fn scenario_counters(
    yaml: &str,
    requests: u64,
    addr: std::net::SocketAddr,
) -> (u64, headroom_metrics::Counters) {
    let s = headroom_scenario::parse_str(yaml, "alloc.yaml").unwrap();
    let c = headroom_scenario::compile(&s, std::path::Path::new(".")).unwrap();
    let mut plan = plan_for(requests, addr);
    plan.model = LoadModel::Sessions {
        users: c.users,
        phases: c.phases,
    };
    plan.workload = Some(Arc::new(c.workload));
    run_counters(plan, requests)
}

#[test]
fn sessions_allocate_nothing_per_request() {
    assert_flat("session requests", session_allocations_for);
}

/// Users with a warm cookie jar: every reply sets the cookie again (replacing it), every request
/// sends it back. Neither the jar nor the request each user now owns allocates per request.
fn cookie_allocations_for(requests: u64, addr: std::net::SocketAddr) -> (u64, u64) {
    let mut plan = plan_for(requests, addr);
    plan.request.path = "/cookie/123456".into();
    let (allocs, c) = run_counters(plan, requests);
    // Every reply stored its cookie: the jar was in use on every request.
    let stored = c.proto[headroom_core::ProtoCounter::HttpCookiesStored.index()];
    assert_eq!(stored, requests);
    (allocs, c.responses)
}

#[test]
fn cookie_jars_allocate_nothing_per_request_once_warm() {
    assert_flat("requests with cookies", cookie_allocations_for);
}

/// Issue 32: OAuth-signed requests (credentials from variables, a query and a form body, a
/// fresh nonce, timestamp and HMAC-SHA1 each) allocate nothing per request once a user's
/// signing buffers have grown. (The variable is set once per session: a `set` of a value
/// allocates its string.)
fn oauth_allocations_for(requests: u64, addr: std::net::SocketAddr) -> (u64, u64) {
    scenario_allocations_for(
        "load: {users: [{count: 4}]}\n\
         sessions: [{name: s, steps: [{set: {var: t, value: tok}}, {loop: {count: 100000, steps: [{request: {name: signed, method: POST, path: \"/?a=1&b=x%20y\", headers: {Content-Type: application/x-www-form-urlencoded}, body: \"c=3&d\", oauth: {consumer_key: key, consumer_secret: sec, token: \"${t}\", token_secret: ts}}}]}}]}]\n",
        requests,
        addr,
    )
}

#[test]
fn oauth_signed_requests_allocate_nothing_per_request() {
    assert_flat("OAuth-signed requests", oauth_allocations_for);
}

/// `set: {expr}` before each request: a number computed from the user's id and the previous
/// one, sent in the path. The value is written into the variable's own buffer and the tree is
/// walked on the stack: nothing allocated per evaluation once the buffer has grown.
fn expr_allocations_for(requests: u64, addr: std::net::SocketAddr) -> (u64, u64) {
    let (allocs, c) = scenario_counters(
        "load: {users: [{count: 4}]}\n\
         sessions: [{name: s, steps: [{set: {var: i, value: \"0\"}}, {loop: {count: 1000000, steps: [{set: {var: i, expr: \"if i > 500 then (i + user_id * 7) rem 1000 else abs(i - 999) div 2 + user_id\"}}, {request: \"GET /bytes/${i}\"}]}}]}]\n",
        requests,
        addr,
    );
    // One evaluation per request (each user's loop may stand one ahead when the run stops).
    let evaluated = c.proto[headroom_core::ProtoCounter::ExprEvaluated.index()];
    assert!(
        (requests..=requests + 4).contains(&evaluated),
        "{evaluated}"
    );
    (allocs, c.responses)
}

#[test]
fn set_expressions_allocate_nothing_per_evaluation() {
    assert_flat("requests after a set expr", expr_allocations_for);
}

/// Issue 32: `file` steps (a chunk written, the file stat'ed, in a loop) allocate nothing per
/// operation once a user's block and path buffer are made; `-n` counts them as requests.
fn file_allocations_for(requests: u64, addr: std::net::SocketAddr) -> (u64, u64) {
    let root = std::env::temp_dir().join(format!("headroom-alloc-files-{}", std::process::id()));
    std::fs::create_dir_all(&root).unwrap();
    let yaml = format!(
        "files: {{root: \"{}\"}}\n\
         load: {{users: [{{count: 4}}]}}\n\
         sessions: [{{name: s, steps: [{{file: {{open: \"f${{user_id}}\", mode: write}}}}, {{loop: {{count: 1000000, steps: [{{file: {{write_chunk: 64}}}}, {{file: {{stat: \"f${{user_id}}\"}}}}]}}}}]}}]\n",
        root.display()
    );
    let (allocs, counters) = scenario_counters(&yaml, requests, addr);
    let _ = std::fs::remove_dir_all(&root);
    let ops = counters.proto[headroom_core::ProtoCounter::FileOps.index()];
    assert_eq!(ops, requests, "-n counts file operations");
    (allocs, counters.responses)
}

#[test]
fn file_steps_allocate_nothing_per_operation() {
    assert_flat("file operations", file_allocations_for);
}
