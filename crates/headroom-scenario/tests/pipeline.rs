//! The `pipeline` step: parsed into the model, written back by `to_yaml`, compiled into requests
//! batched with the next, and refused with a located error where it cannot work.

use headroom_core::session::{Op, SessionBody};
use headroom_scenario::model::{Step, MAX_PIPELINE};
use headroom_scenario::{compile, parse_str, to_yaml};
use std::path::Path;

const HEAD: &str = "load: {users: [{count: 1}]}\nsessions:\n  - name: a\n    steps:\n";

fn scenario(steps: &str) -> String {
    format!("{HEAD}{steps}")
}

#[test]
fn a_pipeline_parses_round_trips_and_compiles_to_batched_requests() {
    let text = scenario(
        "      - set: {var: id, value: \"7\"}\n\
         \x20     - pipeline:\n\
         \x20         - request: GET /a\n\
         \x20         - request: {name: b, method: POST, path: \"/b/${id}\", body: x}\n\
         \x20         - request: GET /c\n\
         \x20     - extract: {var: t, header: ETag}\n\
         \x20     - request: GET /d\n",
    );
    let s = parse_str(&text, "p.yaml").unwrap_or_else(|e| panic!("{e:?}"));
    let Step::Pipeline(rs) = &s.sessions[0].steps[1] else {
        panic!("{:?}", s.sessions[0].steps[1])
    };
    let names: Vec<&str> = rs.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["GET /a", "b", "GET /c"]);

    let yaml = to_yaml(&s);
    assert!(yaml.contains("- pipeline:\n"), "{yaml}");
    assert_eq!(parse_str(&yaml, "back.yaml").unwrap(), s, "{yaml}");

    let c = compile(&s, Path::new(".")).unwrap();
    let SessionBody::Ops { ops, .. } = &c.workload.sessions[0].body else {
        panic!("ops")
    };
    let requests: Vec<(String, bool, bool)> = ops
        .iter()
        .filter_map(|op| match op {
            Op::Request(r) => Some((
                c.workload.names[r.name as usize].name.clone(),
                r.pipeline_next,
                r.capture,
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        requests,
        [
            ("GET /a".to_string(), true, false),
            ("b".to_string(), true, false),
            // The last of the pipeline keeps its reply for the extract after it.
            ("GET /c".to_string(), false, true),
            ("GET /d".to_string(), false, false),
        ]
    );
}

#[test]
fn a_pipeline_of_one_is_a_plain_request_when_compiled() {
    let s = parse_str(
        &scenario("      - pipeline: [{request: GET /only}]\n"),
        "p.yaml",
    )
    .unwrap();
    let c = compile(&s, Path::new(".")).unwrap();
    let SessionBody::Ops { ops, .. } = &c.workload.sessions[0].body else {
        panic!("ops")
    };
    assert!(
        matches!(&ops[..], [Op::Request(r)] if !r.pipeline_next),
        "{ops:?}"
    );
}

#[test]
fn bad_pipelines_are_located_errors() {
    let many: String = (0..=MAX_PIPELINE)
        .map(|i| format!("{{request: GET /{i}}}"))
        .collect::<Vec<_>>()
        .join(", ");
    let cases: Vec<(String, usize, usize, &str)> = vec![
        (
            scenario("      - pipeline: []\n"),
            5,
            19,
            "expected a list of one or more request steps",
        ),
        (
            scenario("      - pipeline: GET /a\n"),
            5,
            19,
            "pipeline: expected a list",
        ),
        (
            scenario("      - pipeline:\n          - request: GET /a\n          - think: 1s\n"),
            7,
            13,
            "each item is a request step",
        ),
        (
            scenario("      - pipeline:\n          - request: GET /a\n          - request: HEAD /b\n"),
            7,
            22,
            "HEAD cannot share a pipeline",
        ),
        (
            scenario(
                "      - pipeline:\n          - request: {path: /a, auth: {user: u, password: p, scheme: digest}}\n",
            ),
            6,
            22,
            "digest auth cannot be pipelined",
        ),
        (
            scenario("      - pipeline:\n          - request: {path: \"/a/${nope}\"}\n"),
            6,
            29,
            "undefined variable '${nope}'",
        ),
        (
            scenario(&format!("      - pipeline: [{many}]\n")),
            5,
            19,
            "at most 256 in one pipeline",
        ),
        (
            format!(
                "servers: [{{host: 127.0.0.1, port: 9, protocol: raw}}]\n{}",
                scenario("      - pipeline: [{request: GET /a}]\n")
            ),
            6,
            9,
            "a pipeline step needs servers with `protocol: http`",
        ),
    ];
    for (text, line, column, want) in cases {
        let errs = parse_str(&text, "p.yaml").expect_err(&text);
        assert!(
            errs.iter()
                .any(|e| e.line == line && e.column == column && e.message.contains(want)),
            "wanted {line}:{column} {want:?} in:\n{}\n---\n{text}",
            errs.iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

/// The fuzzer's pipeline seed stays a valid scenario (a seed the parser refuses explores little).
#[test]
fn the_fuzz_seed_parses_and_round_trips() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/scenario_yaml/pipeline.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let s = parse_str(&text, "pipeline.yaml").unwrap_or_else(|e| panic!("{e:?}"));
    let pipelines = s.sessions[0]
        .steps
        .iter()
        .filter(|x| matches!(x, Step::Pipeline(_)))
        .count();
    assert_eq!(pipelines, 2);
    assert_eq!(parse_str(&to_yaml(&s), "back.yaml").unwrap(), s);
}

/// The steps shown under "Pipelining" in docs/scenario.md are valid steps.
#[test]
fn the_docs_example_is_valid() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/scenario.md");
    let docs = std::fs::read_to_string(path).unwrap();
    let section = &docs[docs.find("### Pipelining").expect("a Pipelining section")..];
    let start = section.find("```yaml\n").expect("an example") + "```yaml\n".len();
    let body = &section[start..start + section[start..].find("```").unwrap()];
    let steps: String = body.lines().map(|l| format!("      {l}\n")).collect();
    let s = parse_str(&scenario(&steps), "docs.yaml").unwrap_or_else(|e| panic!("{e:?}\n{body}"));
    assert!(matches!(&s.sessions[0].steps[0], Step::Pipeline(rs) if rs.len() == 3));
}
