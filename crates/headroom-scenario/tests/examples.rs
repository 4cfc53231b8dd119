//! Every scenario in `scenarios/` (top level; `scenarios/include/` holds step fragments) parses
//! and validates.

use headroom_scenario::model::{Rate, Step};
use std::path::PathBuf;

pub fn scenario_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios")
}

pub fn examples() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(scenario_dir())
        .expect("scenarios/ exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    v.sort();
    v
}

#[test]
fn every_example_validates() {
    let files = examples();
    assert!(
        files.len() >= 3,
        "expected at least 3 examples, got {files:?}"
    );
    for f in files {
        let s = headroom_scenario::load(&f).unwrap_or_else(|errs| {
            let text: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
            panic!("{} failed:\n{}", f.display(), text.join("\n"))
        });
        assert!(!s.sessions.is_empty());
        for srv in &s.servers {
            assert_eq!(
                srv.host,
                "127.0.0.1",
                "{}: examples target loopback",
                f.display()
            );
        }
    }
}

#[test]
fn login_inlines_its_include() {
    let s = headroom_scenario::load(scenario_dir().join("login.yaml")).unwrap();
    let names: Vec<&str> = s.sessions[0]
        .steps
        .iter()
        .filter_map(|st| match st {
            Step::Request(r) => Some(r.name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(names, ["account"]);
    assert!(matches!(s.sessions[0].steps[0], Step::Connect));
}

#[test]
fn mix_has_weights_and_ramp() {
    let s = headroom_scenario::load(scenario_dir().join("mix.yaml")).unwrap();
    let w: Vec<f64> = s.sessions.iter().map(|x| x.weight).collect();
    assert_eq!(w, [80.0, 20.0]);
    assert_eq!(
        s.load.phases[0].rate,
        Rate::Ramp {
            from: 1.0,
            to: 20.0
        }
    );
    assert_eq!(s.thresholds.len(), 3);
}

#[test]
fn interarrival_is_a_rate() {
    let s = headroom_scenario::parse_str(
        "load: {phases: [{duration: 1m, interarrival: 250ms}]}\nsessions: [{name: a, steps: [{request: GET /}]}]\n",
        "t.yaml",
    )
    .unwrap();
    assert_eq!(s.load.phases[0].rate, Rate::Fixed(4.0));
    assert_eq!(s.load.phases[0].duration.as_secs(), 60);
}

/// The JSON Schema is valid JSON and lists the same top-level keys and step kinds as the parser.
#[test]
fn schema_matches_the_format() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../schema/scenario.schema.json");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut top: Vec<&str> = schema["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    top.sort();
    assert_eq!(
        top,
        [
            "amqp",
            "cookies",
            "files",
            "follow",
            "load",
            "mqtt",
            "mysql",
            "name",
            "pgsql",
            "servers",
            "sessions",
            "thresholds",
            "websocket",
            "xmpp"
        ]
    );
    let mut kinds: Vec<String> = schema["$defs"]["step"]["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["required"][0].as_str().map(String::from))
        .collect();
    kinds.sort();
    let mut want = [
        "amqp",
        "close",
        "connect",
        "cookie",
        "extract",
        "file",
        "include",
        "ldap",
        "loop",
        "match",
        "mqtt",
        "pipeline",
        "request",
        "send",
        "set",
        "sql",
        "think",
        "transaction",
        "ws",
        "xmpp",
    ];
    want.sort();
    assert_eq!(kinds, want);
}

/// The full example in docs/scenario.md stays valid.
#[test]
fn doc_example_validates() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/scenario.md");
    let doc = std::fs::read_to_string(path).unwrap();
    let example = doc
        .split("## A full example\n\n```yaml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("docs/scenario.md has a full example");
    let s =
        headroom_scenario::parse_str(example, "scenario.md").unwrap_or_else(|e| panic!("{e:#?}"));
    assert_eq!(s.sessions.len(), 2);
    assert_eq!(s.load.phases.len(), 2);
}

/// The steps shown under "Set expressions" in docs/scenario.md are valid and compile.
#[test]
fn the_set_expressions_example_is_valid() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/scenario.md");
    let docs = std::fs::read_to_string(path).unwrap();
    let section = &docs[docs.find("## Set expressions").expect("the section")..];
    let start = section.find("```yaml\n").expect("an example") + "```yaml\n".len();
    let body = &section[start..start + section[start..].find("```").unwrap()];
    let text = format!(
        "servers: [{{host: 127.0.0.1, port: 8080}}]\nload: {{users: [{{count: 1}}]}}\nsessions:\n  - name: a\n    steps:\n{body}"
    );
    let s = headroom_scenario::parse_str(&text, "docs.yaml")
        .unwrap_or_else(|e| panic!("{e:?}\n{body}"));
    let exprs = s.sessions[0]
        .steps
        .iter()
        .filter(|x| {
            matches!(
                x,
                Step::Set {
                    source: headroom_scenario::model::SetSource::Expr(_),
                    ..
                }
            )
        })
        .count();
    assert_eq!(exprs, 2);
    headroom_scenario::compile(&s, std::path::Path::new(".")).unwrap();
}
