//! What the engine's integration tests share: a plain GET plan and a run of it.
// Each test binary includes this module and uses a part of it.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use headroom_core::{HttpRequest, LoadModel, Plan, Segment, SocketOptions, StopCondition};

/// `GET /` to `addr` under `model` on `threads` workers, for at most 20 s, 500 ms intervals,
/// keep-alive, 5 s timeouts.
pub fn plan(addr: SocketAddr, model: LoadModel, threads: usize) -> Plan {
    Plan {
        target: addr,
        target_name: format!("http://{addr}/"),
        request: HttpRequest {
            method: "GET".into(),
            path: "/".into(),
            host: addr.to_string(),
            headers: vec![],
            body: vec![],
        },
        model,
        ramp: Vec::new(),
        stop: StopCondition {
            duration: Some(Duration::from_secs(20)),
            requests: None,
        },
        threads,
        interval: Duration::from_millis(500),
        connect_timeout: Duration::from_secs(5),
        timeout: Duration::from_secs(5),
        expect_status: Default::default(),
        keepalive: true,
        pipeline: 1,
        socket: SocketOptions::default(),
        workload: None,
        segment: Segment::default(),
        start_at: None,
        tls: None,
        http2: None,
        browser: Default::default(),
        timer_slack: headroom_core::DEFAULT_TIMER_SLACK,
    }
}

pub fn run(p: &Plan) -> headroom_engine::RunOutcome {
    headroom_engine::run(p, Arc::new(AtomicBool::new(false)), &mut |_| {}).unwrap()
}
