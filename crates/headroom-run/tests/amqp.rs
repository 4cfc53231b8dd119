//! AMQP sessions end to end against a real broker on 127.0.0.1: Debian's RabbitMQ, a private
//! node started by `scripts/rabbitmq.sh` (`scripts/test` exports `HEADROOM_AMQP_URL`; without
//! it the script is run here), user headroom/headroom on vhost `/`. Each test compares
//! headroom's counts with the broker's own global message counters (`scripts/rabbitmq.sh
//! counters`). The tests hold one lock: the counters are the node's. Every run is bounded.

mod common;

use common::*;
use headroom_run::summary::AmqpCounters;
use headroom_run::RunSummary;
use headroom_testkit::servers::services::{repo_root, service};
use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Mutex;

static BROKER: Mutex<()> = Mutex::new(());

fn amqp() -> String {
    let url = service("HEADROOM_AMQP_URL", "rabbitmq.sh");
    let rest = url.strip_prefix("amqp://").expect("amqp:// URL");
    let addr = rest.split_once('@').map_or(rest, |x| x.1);
    let addr = addr.split('/').next().unwrap_or_default();
    assert!(addr.starts_with("127.0.0.1:"), "RabbitMQ at {url}");
    addr.to_string()
}

fn amqp_counters(v: &RunSummary) -> &AmqpCounters {
    scenario_of(v)
        .protocol
        .as_ref()
        .and_then(|p| p.amqp.as_ref())
        .unwrap_or_else(|| panic!("no amqp counters: {}", show(v)))
}

/// The node's global message counters (`name value` lines).
fn counters() -> BTreeMap<String, u64> {
    let out = Command::new(repo_root().join("scripts/rabbitmq.sh"))
        .arg("counters")
        .output()
        .expect("scripts/rabbitmq.sh counters");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter_map(|(k, v)| Some((k.to_string(), v.trim().parse().ok()?)))
        .collect()
}

/// 1,000 publishers and 10 consumers, each once, as Tsung's amqp.xml has them (confirms on,
/// persistent messages, consumers with a prefetch and acks): every message published is
/// confirmed, delivered and acknowledged, timed from publish to delivery, and the broker's own
/// counters say the same.
#[test]
fn a_thousand_publishers_and_ten_consumers() {
    let _lock = BROKER.lock().unwrap_or_else(|e| e.into_inner());
    let addr = amqp();
    let (host, port) = addr.rsplit_once(':').unwrap();
    let declare = r#"
      - amqp: {channel_open: 1}
      - amqp: {exchange_declare: hr_exchange, type: direct}
      - amqp: {queue_declare: hr_queue}
      - amqp: {queue_bind: hr_queue, exchange: hr_exchange, routing_key: hr_queue}"#;
    let yaml = format!(
        r#"
servers: [{{host: {host}, port: {port}, protocol: amqp}}]
amqp: {{user: headroom, password: headroom, vhost: /}}
load:
  users: [{{count: 10, session: consumer}}, {{count: 1000, session: publisher}}]
sessions:
  - name: consumer
    steps:{declare}
      - amqp: {{qos: 200}}
      - amqp: {{consume: hr_queue, ack: true}}
      - think: 60s
  - name: publisher
    steps:{declare}
      - think: 1s
      - amqp: {{confirm_select: 1}}
      - loop: {{count: 10, steps: [{{amqp: {{publish: hr_exchange, routing_key: hr_queue, persistent: true, size: 100}}}}]}}
      - amqp: {{wait_confirms: 10s}}
      - amqp: {{channel_close: 1}}
      - amqp: close
      - think: 60s
"#
    );
    let before = counters();
    let f = run(&lasting(&yaml, 20));
    let v = &f.summary;
    std::thread::sleep(std::time::Duration::from_millis(500));
    let after = counters();
    let moved = |k: &str| after[k] - before[k];
    let a = amqp_counters(v);
    assert_eq!(v.errors_total, 0, "{}", show(v));
    assert_eq!(by_request(v, "amqp:connect").count, 1010, "{}", show(v));
    assert_eq!(a.published, 10_000, "{a:#?}");
    assert_eq!(a.confirmed, 10_000, "{a:#?}");
    assert_eq!(a.nacked, 0, "{a:#?}");
    assert_eq!(a.delivered, 10_000, "{a:#?}");
    assert_eq!(a.acked, 10_000, "{a:#?}");
    assert_eq!(
        by_request(v, "amqp:wait_confirms").count,
        1000,
        "{}",
        show(v)
    );
    assert_eq!(by_request(v, "amqp:close").count, 1000, "{}", show(v));
    let d = scenario_of(v)
        .by_transaction
        .get("amqp:delivery")
        .unwrap_or_else(|| panic!("{}", show(v)));
    assert_eq!(d.count, 10_000, "{}", show(v));
    // The broker's counts.
    assert_eq!(moved("messages_received_total"), 10_000, "{after:?}");
    assert_eq!(moved("messages_confirmed_total"), 10_000, "{after:?}");
    assert_eq!(moved("messages_routed_total"), 10_000, "{after:?}");
    assert_eq!(moved("messages_delivered_total"), 10_000, "{after:?}");
    assert_eq!(moved("messages_acknowledged_total"), 10_000, "{after:?}");
}

/// A refused login; a method the broker refuses closes its channel and fails the step; a wait
/// for messages that do not come fails at its own timeout.
#[test]
fn refusals_and_timeouts_say_what_failed() {
    let _lock = BROKER.lock().unwrap_or_else(|e| e.into_inner());
    let addr = amqp();
    let (host, port) = addr.rsplit_once(':').unwrap();
    let yaml = format!(
        r#"
servers: [{{host: {host}, port: {port}, protocol: amqp}}]
amqp: {{user: headroom, password: wrong}}
load: {{users: [{{count: 1}}]}}
sessions: [{{name: s, steps: [{{amqp: {{channel_open: 1}}}}, {{think: 60s}}]}}]
"#
    );
    let f = run(&lasting(&yaml, 2));
    assert!(f.summary.errors.login >= 1, "{}", show(&f.summary));
    let yaml = format!(
        r#"
servers: [{{host: {host}, port: {port}, protocol: amqp}}]
amqp: {{user: headroom, password: headroom}}
load: {{users: [{{count: 2, session: bind}}, {{count: 1, session: wait}}]}}
sessions:
  - name: bind
    steps:
      - amqp: {{channel_open: 1}}
      - amqp: {{queue_bind: no_such_queue_hr, exchange: no_such_exchange_hr, name: bad-bind}}
      - think: 60s
  - name: wait
    steps:
      - amqp: {{channel_open: 1}}
      - amqp: {{queue_declare: "", exclusive: true}}
      - amqp: {{wait: {{messages: 1, timeout: 1s}}}}
      - think: 60s
"#
    );
    let f = run(&lasting(&yaml, 3));
    let v = &f.summary;
    let a = amqp_counters(v);
    // The failed step ends the session; a closed user starts it again.
    assert!(by_request(v, "bad-bind").errors >= 2, "{}", show(v));
    assert!(a.channels_closed >= 2, "{a:#?}");
    assert_eq!(
        v.errors.error_reply,
        by_request(v, "bad-bind").errors,
        "{}",
        show(v)
    );
    let wait = by_request(v, "amqp:wait");
    assert!(wait.errors >= 1 && wait.count == 0, "{}", show(v));
    assert_eq!(v.errors.timeout, wait.errors, "{}", show(v));
}

/// AMQP over TLS from the first byte (`amqps`, the broker's TLS listener with the scripts'
/// certificate, checked against their CA): 20 publishers with confirms, the handshakes counted,
/// and the broker received and confirmed every message.
#[test]
fn amqps_publishes_with_confirms() {
    let _lock = BROKER.lock().unwrap_or_else(|e| e.into_inner());
    amqp(); // started by its script if it does not run
    let out = Command::new(repo_root().join("scripts/rabbitmq.sh"))
        .arg("tls-url")
        .output()
        .expect("scripts/rabbitmq.sh tls-url");
    let url = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let rest = url.strip_prefix("amqps://").expect("amqps:// URL");
    let addr = rest
        .split_once('@')
        .map_or(rest, |x| x.1)
        .trim_end_matches('/');
    let (host, port) = addr.rsplit_once(':').unwrap();
    let ca = common::tls_services::test_ca();
    let yaml = format!(
        r#"
servers: [{{host: {host}, port: {port}, protocol: amqp, tls: {{cacert: "{ca}"}}}}]
amqp: {{user: headroom, password: headroom, vhost: /}}
load:
  users: [{{count: 20}}]
sessions:
  - name: publisher
    steps:
      - amqp: {{channel_open: 1}}
      - amqp: {{confirm_select: 1}}
      - loop: {{count: 5, steps: [{{amqp: {{publish: amq.direct, routing_key: nowhere, size: 100}}}}]}}
      - amqp: {{wait_confirms: 10s}}
      - amqp: close
      - think: 60s
"#,
        ca = ca.display()
    );
    let before = counters();
    let f = run(&lasting(&yaml, 4));
    let v = &f.summary;
    std::thread::sleep(std::time::Duration::from_millis(500));
    let after = counters();
    let moved = |k: &str| after[k] - before[k];
    let a = amqp_counters(v);
    assert_eq!(v.errors_total, 0, "{}", show(v));
    assert_eq!(tls(v).handshakes, 20, "{}", show(v));
    assert_eq!(a.published, 100, "{a:#?}");
    assert_eq!(a.confirmed, 100, "{a:#?}");
    assert_eq!(moved("messages_received_total"), 100, "{after:?}");
    assert_eq!(moved("messages_confirmed_total"), 100, "{after:?}");
}
