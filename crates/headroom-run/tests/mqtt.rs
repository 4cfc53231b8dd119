//! MQTT sessions end to end against a real broker on 127.0.0.1: Debian's mosquitto, private,
//! started by `scripts/mosquitto.sh` (`scripts/test` exports `HEADROOM_MQTT_URL`; without it
//! the script is run here). Each test checks what headroom says against what the broker says
//! it did, and every message received exactly once. The broker's counters compared are
//! `$SYS/broker/publish/messages/sent` (every PUBLISH it sent) and `$SYS/broker/messages/
//! received` (every packet it received), packet by packet, through a watcher subscribed for the
//! whole test (`MqttSysWatch`): mosquitto 2.0's publish/messages/received leaves out QoS 2 and
//! retained publishes (checked with its own mosquitto_pub). Tests that read the broker's counters hold one lock: the counters are the broker's,
//! and another test's messages would move them. Every run is bounded (`-d`).

mod common;

use common::*;
use headroom_core::spec::RunSpec;
use headroom_run::summary::MqttCounters;
use headroom_run::RunSummary;
use headroom_testkit::servers::services::{mqtt, repo_root, MqttSysWatch};
use std::sync::Mutex;
use std::time::Duration;

static BROKER: Mutex<()> = Mutex::new(());

fn mqtt_counters(v: &RunSummary) -> &MqttCounters {
    scenario_of(v)
        .protocol
        .as_ref()
        .and_then(|p| p.mqtt.as_ref())
        .unwrap_or_else(|| panic!("no mqtt counters: {}", show(v)))
}

fn tx<'a>(v: &'a RunSummary, name: &str) -> &'a headroom_run::summary::NameFigures {
    scenario_of(v)
        .by_transaction
        .get(name)
        .unwrap_or_else(|| panic!("no figures for the transaction {name}: {}", show(v)))
}

/// The packets a run's users sent the broker, from headroom's counts: each CONNECT accepted,
/// each PUBLISH, each SUBSCRIBE and UNSUBSCRIBE granted, each PINGREQ, `disconnects`
/// DISCONNECTs, and per message received its acknowledgement: `acks` packets each (QoS 0: 0,
/// QoS 1: a PUBACK, QoS 2: a PUBREC and a PUBCOMP), with `pubrels` for the QoS 2 publishes.
fn packets_sent(
    m: &MqttCounters,
    unsubscribes: u64,
    disconnects: u64,
    acks: u64,
    pubrels: u64,
) -> u64 {
    m.connects + m.published + m.subscribed + unsubscribes + m.pings + disconnects + acks + pubrels
}

#[test]
fn a_hundred_publishers_reach_a_hundred_subscribers_exactly_once() {
    let _broker = BROKER.lock().unwrap_or_else(|e| e.into_inner());
    let addr = mqtt();
    let (host, port) = addr.rsplit_once(':').unwrap();
    // 100 subscribers and 100 publishers, closed users, one session each (a long think ends
    // each within the run): every publisher sends 10 timed QoS 1 messages to its own topic
    // under lat/, every subscriber takes lat/# and waits for all 1,000.
    let yaml = format!(
        r#"
servers: [{{host: {host}, port: {port}, protocol: mqtt}}]
mqtt: {{keep_alive: 5s}}
load:
  users: [{{count: 100, session: sub}}, {{count: 100, session: pub}}]
sessions:
  - name: sub
    steps:
      - mqtt: {{subscribe: "lat/#", qos: 1}}
      - mqtt: {{wait: {{messages: 1000, timeout: 20s}}}}
      - think: 60s
  - name: pub
    steps:
      - mqtt: connect
      - think: 2s
      - loop: {{count: 10, steps: [{{mqtt: {{publish: "lat/${{user_id}}", qos: 1, size: 64}}}}, {{think: 100ms}}]}}
      - think: 60s
"#
    );
    let watch = MqttSysWatch::start(&addr);
    let before = watch.snapshot();
    let f = run(&lasting(&yaml, 12));
    let v = &f.summary;
    let (sent, received) = before.until(&watch.snapshot());
    let m = mqtt_counters(v);
    assert_eq!(v.errors_total, 0, "{}", show(v));
    assert!(v.target.contains("(mqtt://127.0.0.1:"), "{}", v.target);
    assert_eq!(m.connects, 200, "{m:#?}");
    assert_eq!(m.subscribed, 100, "{m:#?}");
    assert_eq!(m.published, 1000, "{m:#?}");
    assert_eq!(m.publish_acked, 1000, "{m:#?}");
    // Every message reached every subscriber once: 100 x 1,000, none twice.
    assert_eq!(m.received, 100_000, "{m:#?}");
    assert_eq!(m.received_dup, 0, "{m:#?}");
    assert_eq!(by_request(v, "mqtt:wait").count, 100, "{}", show(v));
    assert_eq!(by_request(v, "mqtt:wait").errors, 0, "{}", show(v));
    // Publish-to-receive latency: every message received was timed.
    let d = tx(v, "mqtt:delivery");
    assert_eq!(d.count, 100_000, "{}", show(v));
    assert!(
        d.latency_us.p50 > 0 && d.latency_us.max < 20_000_000,
        "{d:?}"
    );
    // The broker's own counts: 100,000 messages out; in, every packet the users sent (a
    // PUBACK per message received; the run ends with the users connected: no DISCONNECT).
    assert_eq!(sent, 100_000, "broker sent");
    assert_eq!(received, packets_sent(m, 0, 0, m.received, 0), "{m:#?}");
}

#[test]
fn qos_0_and_2_publish_and_a_subscriber_keeps_alive_while_it_waits() {
    let _broker = BROKER.lock().unwrap_or_else(|e| e.into_inner());
    let addr = mqtt();
    let (host, port) = addr.rsplit_once(':').unwrap();
    // MQTT 5, keep-alive 1 s: a subscriber that sends nothing for 4 s must ping (the broker
    // drops a client silent for 1.5 keep-alives) and still receive what comes after.
    let yaml = format!(
        r#"
servers: [{{host: {host}, port: {port}, protocol: mqtt}}]
mqtt: {{version: 5, keep_alive: 1s}}
load:
  users: [{{count: 5, session: sub}}, {{count: 5, session: pub}}]
sessions:
  - name: sub
    steps:
      - mqtt: {{subscribe: "ka/+/q", qos: 2}}
      - mqtt: {{wait: {{messages: 100, timeout: 15s}}}}
      - mqtt: {{unsubscribe: "ka/+/q"}}
      - mqtt: disconnect
      - think: 60s
  - name: pub
    steps:
      - mqtt: connect
      - think: 4s
      - loop: {{count: 10, steps: [{{mqtt: {{publish: "ka/${{user_id}}/q", qos: 2, size: 100}}}}, {{mqtt: {{publish: "ka/${{user_id}}/q", text: "plain ${{user_id}}"}}}}]}}
      - mqtt: ping
      - mqtt: disconnect
      - think: 60s
"#
    );
    let watch = MqttSysWatch::start(&addr);
    let before = watch.snapshot();
    let f = run(&lasting(&yaml, 12));
    let v = &f.summary;
    let (sent, received) = before.until(&watch.snapshot());
    let m = mqtt_counters(v);
    assert_eq!(v.errors_total, 0, "{}", show(v));
    assert_eq!(m.server_disconnects, 0, "{m:#?}");
    // 5 publishers x 10 x (one QoS 2, one QoS 0); the QoS 2 ones completed (PUBCOMP).
    assert_eq!(m.published, 100, "{m:#?}");
    assert_eq!(m.publish_acked, 50, "{m:#?}");
    // 5 subscribers x 100 messages, each once (QoS 2 downgraded to the publish's QoS).
    assert_eq!(m.received, 500, "{m:#?}");
    assert_eq!(m.received_dup, 0, "{m:#?}");
    // Only the sized payloads carry a send time.
    assert_eq!(tx(v, "mqtt:delivery").count, 250, "{}", show(v));
    // Keep-alive pings while the users waited 4 s, beyond the wait steps' and ping steps' own.
    assert!(m.pings > 5 + 5, "{m:#?}");
    assert_eq!(by_request(v, "mqtt:unsubscribe").count, 5, "{}", show(v));
    assert_eq!(by_request(v, "mqtt:ping").count, 5, "{}", show(v));
    assert_eq!(sent, 500, "broker sent");
    // In: 5 unsubscribes, 10 disconnects, a PUBREC and a PUBCOMP for each of the 250 QoS 2
    // messages received, a PUBREL for each of the 50 QoS 2 publishes.
    assert_eq!(received, packets_sent(m, 5, 10, 2 * 250, 50), "{m:#?}");
}

#[test]
fn a_refused_login_and_a_wait_that_times_out_are_failures_that_say_so() {
    // Its users retry the refused login as fast as they can: a storm of connections that would
    // slow the broker for the other tests.
    let _broker = BROKER.lock().unwrap_or_else(|e| e.into_inner());
    let addr = mqtt();
    let (host, port) = addr.rsplit_once(':').unwrap();
    // scripts/mosquitto.sh's user `headroom` with a wrong password: CONNACK refuses it.
    let yaml = format!(
        r#"
servers: [{{host: {host}, port: {port}, protocol: mqtt}}]
mqtt: {{username: headroom, password: wrong}}
load:
  users: [{{count: 2}}]
sessions:
  - name: s
    steps:
      - mqtt: {{publish: "x/y", qos: 1}}
      - think: 60s
"#
    );
    let f = run(&lasting(&yaml, 2));
    let v = &f.summary;
    assert!(v.errors_total >= 2, "{}", show(v));
    assert_eq!(mqtt_counters(v).connects, 0, "{}", show(v));
    assert!(v.errors.login >= 2, "{}", show(v));
    // Nobody publishes to this topic: the wait fails at its own timeout, not the run's.
    let yaml = format!(
        r#"
servers: [{{host: {host}, port: {port}, protocol: mqtt}}]
load:
  users: [{{count: 3}}]
sessions:
  - name: s
    steps:
      - mqtt: {{subscribe: "nobody/publishes/here", qos: 1}}
      - mqtt: {{wait: {{messages: 1, timeout: 1s}}}}
      - think: 60s
"#
    );
    let f = run(&lasting(&yaml, 4));
    let v = &f.summary;
    // Each user's wait fails after 1 s, and its next session waits again: about 3 each.
    let wait = by_request(v, "mqtt:wait");
    assert_eq!(wait.count, 0, "{}", show(v));
    assert!(wait.errors >= 3, "{}", show(v));
    assert_eq!(v.errors.timeout, wait.errors, "{}", show(v));
    assert_eq!(v.errors_total, wait.errors, "{}", show(v));
}

/// Tsung's own `examples/mqtt.xml` (Debian's tsung) as `headroom run mqtt.xml --target` imports
/// it, its arrival phase made 1,000 publishers (10 s at 100/s, evenly spaced) instead of 1: no
/// error, and the broker's counts are headroom's.
#[test]
fn tsungs_mqtt_example_with_a_thousand_publishers() {
    let _broker = BROKER.lock().unwrap_or_else(|e| e.into_inner());
    let addr = mqtt();
    let example = std::path::Path::new("/usr/share/doc/tsung/examples/mqtt.xml");
    let xml = std::fs::read_to_string(example).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (Debian's tsung package; scripts/test installs it)",
            example.display()
        )
    });
    let mut sc = headroom_scenario::import_tsung(&xml, "mqtt.xml")
        .unwrap_or_else(|e| panic!("{e:?}"))
        .scenario;
    use headroom_scenario::model::{Arrival, Phase, Rate};
    assert_eq!(sc.load.phases.len(), 1, "{:?}", sc.load);
    sc.load.phases = vec![Phase {
        duration: Duration::from_secs(10),
        rate: Rate::Fixed(100.0),
        arrival: Arrival::Constant,
        max_users: None,
    }];
    // The file's subscriber (`<user session="mqtt_subscriber" start_time="10">`, a `once` user)
    // starts with the run here, before the publishers, so that it receives their messages (the
    // file's own phase has one publisher, after 10 s; this one has 1,000 from the start).
    assert_eq!(sc.load.once.len(), 1, "{:?}", sc.load);
    assert_eq!(sc.load.once[0].at, Duration::from_secs(10));
    sc.load.once[0].at = Duration::ZERO;
    // No retained message from an earlier run: the subscriber counts this run's messages only.
    let (host, port) = addr.rsplit_once(':').unwrap();
    let cleared = std::process::Command::new("mosquitto_pub")
        .args(["-h", host, "-p", port, "-t", "test_topic", "-r", "-n"])
        .status()
        .expect("mosquitto_pub");
    assert!(cleared.success());
    let built = headroom_run::files::scenario_spec(
        "mqtt.xml",
        &sc,
        std::path::Path::new("."),
        Some(addr.clone()),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut spec = RunSpec::new(headroom_core::spec::Target::Scenario(built));
    spec.duration = secs(20);
    // The broker's counts of publishes received and sent, and of every packet received.
    let watch = MqttSysWatch::start(&addr);
    let before = watch.snapshot();
    let f = run(&spec);
    let v = &f.summary;
    let (sent, received) = before.until(&watch.snapshot());
    let m = mqtt_counters(v);
    assert_eq!(v.errors_total, 0, "{}", show(v));
    // The 1,000 publishers and the one subscriber Tsung's <user> starts.
    assert_eq!(m.connects, 1001, "{m:#?}");
    assert_eq!(m.published, 10_000, "{m:#?}");
    assert_eq!(m.publish_acked, 10_000, "{m:#?}");
    assert_eq!(m.subscribed, 1, "{m:#?}");
    assert_eq!(by_request(v, "mqtt:disconnect").count, 1000, "{}", show(v));
    // What the broker sent is what the subscriber received: all of it, but for publishes
    // before its subscription.
    assert_eq!(sent, m.received, "{m:#?}");
    assert!(m.received >= 9_900, "{m:#?}");
    // Every packet the users sent (the 1,000 publishers' DISCONNECTs; a PUBACK per message
    // received) is one the broker counted.
    assert_eq!(received, packets_sent(m, 0, 1000, m.received, 0), "{m:#?}");
}

/// A topic that grows past the protocol's 65,535 bytes once its variables are in is not sent:
/// its step fails (error `other`), the session goes on, and nothing panics.
#[test]
fn a_topic_too_long_for_mqtt_fails_its_step() {
    // Its packets would move the broker's counters another test compares.
    let _broker = BROKER.lock().unwrap_or_else(|e| e.into_inner());
    let addr = mqtt();
    let (host, port) = addr.rsplit_once(':').unwrap();
    let long = "a".repeat(40_000);
    let yaml = format!(
        r#"
servers: [{{host: {host}, port: {port}, protocol: mqtt}}]
load:
  users: [{{count: 1}}]
sessions:
  - name: s
    steps:
      - set: {{var: t, value: "{long}"}}
      - mqtt: {{publish: "${{t}}/${{t}}", qos: 1, name: long}}
      - mqtt: {{publish: "short/${{user_id}}", qos: 1, name: short}}
      - think: 60s
"#
    );
    let f = run(&lasting(&yaml, 2));
    let v = &f.summary;
    assert_eq!(by_request(v, "long").errors, 1, "{}", show(v));
    assert_eq!(by_request(v, "long").count, 0, "{}", show(v));
    assert_eq!(v.errors.other, 1, "{}", show(v));
    assert_eq!(by_request(v, "short").count, 1, "{}", show(v));
    assert_eq!(mqtt_counters(v).published, 1, "{}", show(v));
}

/// MQTT over TLS (mosquitto's TLS listener, the test PKI's certificate checked against its CA).
#[test]
fn mqtt_over_tls() {
    // Its packets would move the broker's counters another test compares.
    let _broker = BROKER.lock().unwrap_or_else(|e| e.into_inner());
    let url = match std::env::var("HEADROOM_MQTTS_URL") {
        Ok(u) if !u.is_empty() => u,
        _ => {
            mqtt(); // started by its script if it does not run
            let out = std::process::Command::new(repo_root().join("scripts/mosquitto.sh"))
                .arg("tls-url")
                .output()
                .expect("scripts/mosquitto.sh tls-url");
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        }
    };
    let addr = url.strip_prefix("mqtts://").expect("mqtts:// URL");
    let (host, port) = addr.rsplit_once(':').unwrap();
    let ca = std::path::PathBuf::from(
        std::env::var("HEADROOM_TEST_CA").unwrap_or_else(|_| "/tmp/headroom-pki/ca.pem".into()),
    );
    let yaml = format!(
        r#"
servers: [{{host: {host}, port: {port}, protocol: mqtt, tls: {{cacert: ca.pem}}}}]
load:
  users: [{{count: 5}}]
sessions:
  - name: s
    steps:
      - mqtt: {{subscribe: "tls/${{user_id}}", qos: 1}}
      - mqtt: {{publish: "tls/${{user_id}}", qos: 1, size: 64}}
      - mqtt: {{wait: {{messages: 1, timeout: 5s}}}}
      - think: 60s
"#
    );
    let mut spec = scenario_with_files(&yaml, &[("ca.pem", &ca)]);
    spec.duration = secs(3);
    let f = run(&spec);
    let v = &f.summary;
    let m = mqtt_counters(v);
    assert_eq!(v.errors_total, 0, "{}", show(v));
    assert_eq!(m.connects, 5, "{m:#?}");
    assert_eq!(m.received, 5, "{m:#?}");
    assert_eq!(tls(v).handshakes, 5, "{}", show(v));
}
