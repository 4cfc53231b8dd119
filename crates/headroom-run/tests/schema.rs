//! summary.json's and intervals.jsonl's schemas and documentation are kept true to
//! `RunSummary` and `IntervalLine`:
//! - schema/summary.schema.json and schema/interval.schema.json are generated from the types
//!   (`HEADROOM_BLESS=1` rewrites them);
//! - summaries and interval lines of real runs (this crate's engine against headroom serve, the
//!   summary with every optional section filled) validate against the committed schemas, and a
//!   summary with an unknown or a missing key or a wrong type does not;
//! - docs/summary-json.md names every field the schemas have.
//!
//! crates/headroom/tests/summary_keys.rs adds the CLI's side: nine `headroom run --out`
//! directories read back into `RunSummary` and written out unchanged.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use headroom_core::{HttpRequest, LoadModel, Plan, SocketOptions, StopCondition};
use headroom_run::summary::{self, Agents, LostAgent, RunSummary, RunSummaryExt};
use headroom_run::thresholds::{Checked, Unit};
use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The schema files and the types they are made from.
fn schemas() -> [(&'static str, Value); 2] {
    [
        ("summary.schema.json", summary::schema()),
        ("interval.schema.json", headroom_run::interval::schema()),
    ]
}

fn committed_schema(file: &str) -> Value {
    let path = repo().join("schema").join(file);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_committed_schemas_are_generated_from_the_types() {
    for (file, schema) in schemas() {
        let mut text = serde_json::to_string_pretty(&schema).unwrap();
        text.push('\n');
        let path = repo().join("schema").join(file);
        if std::env::var_os("HEADROOM_BLESS").is_some() {
            std::fs::write(&path, &text).unwrap();
            continue;
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == text,
            "{} is not what its type generates; HEADROOM_BLESS=1 cargo test -p headroom-run \
             --test schema rewrites it (and say what changed in docs/summary-json.md)",
            path.display()
        );
    }
}

/// A closed-model plan of 2 users x 50 requests against `addr`, over TLS when `tls`.
fn plan(addr: std::net::SocketAddr, tls: bool) -> Plan {
    Plan {
        target: addr,
        target_name: format!("http://{addr}/"),
        request: HttpRequest {
            method: "GET".into(),
            path: "/".into(),
            host: addr.to_string(),
            headers: Vec::new(),
            body: Vec::new(),
        },
        model: LoadModel::Closed {
            users: 2,
            per_user: Some(50),
            think: None,
        },
        ramp: Vec::new(),
        stop: StopCondition {
            duration: Some(Duration::from_secs(5)),
            requests: None,
        },
        threads: 1,
        interval: Duration::from_millis(200),
        connect_timeout: Duration::from_secs(5),
        timeout: Duration::from_secs(10),
        expect_status: "200".parse().unwrap(),
        keepalive: true,
        pipeline: 1,
        socket: SocketOptions::default(),
        workload: None,
        segment: Default::default(),
        start_at: None,
        tls: tls.then(|| {
            Arc::new(headroom_core::TlsOptions {
                insecure: true,
                ..headroom_core::TlsOptions::new("localhost")
            })
        }),
        http2: None,
        browser: Default::default(),
        timer_slack: headroom_core::DEFAULT_TIMER_SLACK,
    }
}

/// Runs `plan` in this process, as the lab would: Plan + RunOutcome → RunSummary, through the
/// run directory's writer; the summary and the interval lines.
fn run_summary(plan: &Plan, dir: &Path) -> (Value, Vec<Value>) {
    let mut lines = Vec::new();
    let outcome = headroom_engine::run(plan, Arc::new(AtomicBool::new(false)), &mut |iv| {
        lines.push(headroom_run::interval::interval_json(iv, plan, None))
    })
    .expect("the engine runs");
    assert!(!lines.is_empty());
    let mut s = RunSummary::build(plan, &outcome, &summary::self_usage(), "schema test");
    assert!(s.responses > 0, "{s:?}");
    // The sections a driver or a scenario adds, filled so the schema sees them.
    s.agents = Some(Agents {
        count: 2,
        threads_each: 1,
        lost: vec![LostAgent {
            name: "b".into(),
            after_interval: Some(3),
            why: "connection reset".into(),
        }],
        stopped_by_loss: false,
    });
    let broken = s.set_thresholds(&[
        Checked {
            threshold: "p99".into(),
            condition: "< 1s".into(),
            value: Some(1234.0),
            unit: Unit::Micros,
            ok: true,
        },
        Checked {
            threshold: "p99(none)".into(),
            condition: "< 1s".into(),
            value: None,
            unit: Unit::Micros,
            ok: false,
        },
    ]);
    assert_eq!(broken, 1);
    headroom_run::rundir::write_summary(dir, &s).unwrap();
    let text = std::fs::read_to_string(dir.join("summary.json")).unwrap();
    assert_eq!(RunSummary::from_json(&text).unwrap(), s, "round trip");
    (serde_json::from_str(&text).unwrap(), lines)
}

fn errors_of(validator: &jsonschema::Validator, v: &Value) -> Vec<String> {
    validator
        .iter_errors(v)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

#[test]
fn real_summaries_validate_against_the_committed_schema() {
    let validator = jsonschema::validator_for(&committed_schema("summary.schema.json"))
        .expect("a valid schema");
    let lines_validator = jsonschema::validator_for(&committed_schema("interval.schema.json"))
        .expect("a valid schema");
    let tmp = tempfile::tempdir().unwrap();
    for tls in [false, true] {
        let server = headroom_serve::start(headroom_serve::ServerConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            workers: 1,
            tls: tls.then_some(headroom_serve::TlsSource::SelfSigned),
            ..Default::default()
        })
        .unwrap();
        let dir = tmp.path().join(if tls { "tls" } else { "plain" });
        std::fs::create_dir_all(&dir).unwrap();
        let (v, lines) = run_summary(&plan(server.local_addr(), tls), &dir);
        server.stop();
        let errs = errors_of(&validator, &v);
        assert!(errs.is_empty(), "tls {tls}: {errs:#?}");
        for l in &lines {
            let errs = errors_of(&lines_validator, l);
            assert!(errs.is_empty(), "tls {tls}: {errs:#?} in {l}");
        }
        assert_eq!(v["tls"].is_object(), tls);
        assert_eq!(v["thresholds"][1]["value"], Value::Null);

        // The schema is strict: an unknown key, a missing one or a wrong type is refused.
        let mut extra = v.clone();
        extra["latency_us"]["p42"] = 1.into();
        assert!(!errors_of(&validator, &extra).is_empty(), "unknown key");
        let mut missing = v.clone();
        missing.as_object_mut().unwrap().remove("error_rate");
        assert!(!errors_of(&validator, &missing).is_empty(), "missing key");
        let mut wrong = v.clone();
        wrong["errors"]["refused"] = "none".into();
        assert!(!errors_of(&validator, &wrong).is_empty(), "wrong type");
    }
}

/// Every property name anywhere in the schema (fields of every section).
fn property_names(v: &Value, out: &mut std::collections::BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            if let Some(Value::Object(props)) = m.get("properties") {
                out.extend(props.keys().cloned());
            }
            for child in m.values() {
                property_names(child, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|c| property_names(c, out)),
        _ => {}
    }
}

#[test]
fn the_doc_names_every_field_of_the_schema() {
    let doc = std::fs::read_to_string(repo().join("docs/summary-json.md")).unwrap();
    let mut names = std::collections::BTreeSet::new();
    for (file, _) in schemas() {
        property_names(&committed_schema(file), &mut names);
    }
    assert!(names.len() > 100, "{names:?}");
    let missing: Vec<&String> = names
        .iter()
        .filter(|n| !doc.contains(&format!("`{n}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/summary-json.md does not name these summary.json fields (in backticks): {missing:?}"
    );
}
