//! Coordinated omission: a server that stalls once must show in the corrected latency (measured
//! from each request's intended send time) and not in the uncorrected one.

mod common;
use common::*;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use headroom_run::summary::Load;

#[test]
fn one_second_stall_shows_in_corrected_p99_only() {
    // Keep-alive server, thread per connection. 1.5 s after the first request, every request
    // waits until the 1 s stall window ends.
    let first: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let f = first.clone();
    let s = TestServer::start(move |mut c| {
        c.set_nodelay(true).unwrap();
        while read_request(&mut c) {
            let now = Instant::now();
            let t0 = *f.lock().unwrap().get_or_insert(now);
            let (from, to) = (
                t0 + Duration::from_millis(1500),
                t0 + Duration::from_millis(2500),
            );
            if now >= from && now < to {
                std::thread::sleep(to - now);
            }
            if !write_all(&mut c, OK) {
                return;
            }
        }
    });
    // --rate 1000 -c 10 -d 5s -t 1
    let mut spec = url_spec(&s.url());
    spec.rate = Some(1000.0);
    spec.connections = Some(10);
    spec.duration = secs(5);
    spec.threads = Some(1);
    let f = run(&spec);
    assert_clean(&f);
    let v = &f.summary;
    assert_eq!(v.model, "rate");
    assert!(
        matches!(v.load, Load::Rate { connections: 10, rate } if rate == 1000.0),
        "{:?}",
        v.load
    );
    assert_eq!(v.errors_total, 0, "{:?}", v.errors);
    let responses = v.responses;
    assert!(responses > 4_000, "the pace held: {responses} responses");
    let corrected = v.latency_us.p99;
    let uncorrected = v.latency_uncorrected_us.p99;
    let max_uncorrected = v.latency_uncorrected_us.max;
    eprintln!(
        "stall: {responses} responses, corrected p99 {corrected}µs, uncorrected p99 \
         {uncorrected}µs, uncorrected max {max_uncorrected}µs"
    );
    assert!(
        corrected >= 300_000,
        "corrected p99 shows the stall: {corrected}µs"
    );
    assert!(
        uncorrected < 100_000,
        "uncorrected p99 hides it: {uncorrected}µs"
    );
    assert!(
        max_uncorrected >= 500_000,
        "the stalled requests themselves were slow"
    );
}

#[test]
fn paced_run_sends_at_the_requested_rate() {
    let s = TestServer::ok();
    // --rate 500 -c 5 -d 2s
    let mut spec = url_spec(&s.url());
    spec.rate = Some(500.0);
    spec.connections = Some(5);
    spec.duration = secs(2);
    let f = run(&spec);
    let r = f.summary.requests;
    assert!((960..=1010).contains(&r), "500/s for 2 s gave {r} requests");
    let p50 = f.summary.latency_us.p50;
    assert!(
        p50 < 5_000,
        "an idle fast server answers paced requests quickly: p50 {p50}µs"
    );
}

/// A paced run bounded by `-n` ends by itself once the last request is answered, over HTTP/1.1
/// and over HTTP/2 (h2c against nginx): a user whose pace has nothing left to send leaves at its
/// next tick (one such user waited for ever once every user shared one pace, issue 28), and
/// exactly `-n` requests went, each answered.
#[test]
fn a_paced_run_bounded_by_n_ends_with_exactly_n() {
    let h1 = TestServer::ok();
    let nginx = Nginx::builder()
        .h2c(true)
        .site("    location = /ok { return 200 \"ok\\n\"; }\n", "$status")
        .start();
    for (url, h2c) in [(h1.url(), false), (nginx.url("/ok"), true)] {
        // --rate 400 -c 4 -n 100 -d BOUND (-t 1: one worker's budget)
        let mut spec = counted(&url, 4, 100);
        spec.rate = Some(400.0);
        spec.threads = Some(1);
        spec.h2c = h2c;
        let t = std::time::Instant::now();
        let f = run(&spec);
        let v = &f.summary;
        assert_clean(&f);
        assert_eq!(
            (v.requests, v.responses),
            (100, 100),
            "h2c {h2c}: {}",
            show(v)
        );
        assert_eq!(code(v, 200), 100, "h2c {h2c}: {}", show(v));
        // 100 requests at 400/s take 0.25 s: far below the run's time bound.
        let took = t.elapsed();
        assert!(
            took < Duration::from_secs(BOUND / 3),
            "h2c {h2c}: the run did not end by itself: {took:?}"
        );
    }
}

/// Arrival instants at a server of a `--rate 1000 -c 10 -d 2s -t 1` run with this timer slack,
/// and the run's summary.
fn arrivals_with_slack(slack: Duration) -> (Vec<Instant>, headroom_run::summary::RunSummary) {
    let seen: Arc<Mutex<Vec<Instant>>> = Arc::new(Mutex::new(Vec::with_capacity(4096)));
    let log = seen.clone();
    let s = TestServer::start(move |mut c| {
        c.set_nodelay(true).unwrap();
        while read_request(&mut c) {
            log.lock().unwrap().push(Instant::now());
            if !write_all(&mut c, OK) {
                return;
            }
        }
    });
    let mut spec = url_spec(&s.url());
    spec.rate = Some(1000.0);
    spec.connections = Some(10);
    spec.duration = secs(2);
    spec.threads = Some(1);
    spec.timer_slack = Some(slack);
    let f = run(&spec);
    assert_clean(&f);
    let mut at = seen.lock().unwrap().clone();
    at.sort();
    (at, f.summary)
}

/// `--timer-slack` (issue 29): sends due within the slack go out in one wake-up, early, so a
/// server sees them together; the schedule does not move, so the rate is held; and a request
/// sent early is timed from when it went, so the corrected latency is never below the
/// uncorrected one (timed from the intended instant it would be).
#[test]
fn timer_slack_batches_paced_sends_and_keeps_the_rate_and_the_latency() {
    // Gaps between consecutive arrivals: how many are long (a pause between bursts).
    let long_gaps = |at: &[Instant]| {
        at.windows(2)
            .filter(|w| w[1] - w[0] >= Duration::from_millis(5))
            .count()
    };
    let (smooth, s0) = arrivals_with_slack(Duration::ZERO);
    let (bursts, s20) = arrivals_with_slack(Duration::from_millis(20));
    for (name, v) in [("slack 0", &s0), ("slack 20ms", &s20)] {
        // 1000/s for 2 s: 2000 slots, none at or after the end.
        assert!(
            (1990..=2000).contains(&v.requests),
            "{name}: the rate held: {} requests",
            v.requests
        );
        assert_eq!(v.errors_total, 0, "{name}: {:?}", v.errors);
        assert!(
            v.latency_us.p50 >= v.latency_uncorrected_us.p50
                && v.latency_us.p99 >= v.latency_uncorrected_us.p99,
            "{name}: corrected {:?} below uncorrected {:?}",
            v.latency_us,
            v.latency_uncorrected_us
        );
    }
    assert_eq!(s20.timer_slack_us, 20_000);
    // Without slack a send every 1 ms: a 5 ms pause only on a hiccup of the machine. With
    // 20 ms, the sends of each 20 ms go together: ~100 pauses in 2 s.
    let (p0, p20) = (long_gaps(&smooth), long_gaps(&bursts));
    eprintln!("pauses of 5 ms or more: slack 0 {p0}, slack 20ms {p20}");
    assert!(p0 < 30, "slack 0 sent in bursts: {p0} pauses");
    assert!(p20 >= 60, "slack 20ms did not batch: {p20} pauses");
    // The early sends are timed from when they went: a server that answers at once stays fast.
    assert!(
        s20.latency_us.p50 < 5_000,
        "p50 {}µs at slack 20ms",
        s20.latency_us.p50
    );
}
