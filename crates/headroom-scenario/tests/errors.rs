//! A table of bad snippets, each with the located error it must give.

use headroom_scenario::parse_str;

const HEAD: &str = "load:\n  phases:\n    - {duration: 10s, arrival_rate: 5}\n";

/// (name, text, line, column, expected substring)
fn cases() -> Vec<(&'static str, String, usize, usize, &'static str)> {
    let s = |body: &str| format!("{HEAD}sessions:\n  - name: a\n    steps:\n{body}");
    vec![
        (
            "misspelt step",
            s("      - requst: GET /\n"),
            7,
            9,
            "unknown step 'requst'; expected one of request, think, loop",
        ),
        (
            "negative weight",
            format!("{HEAD}sessions:\n  - name: a\n    weight: -2\n    steps: [{{request: GET /}}]\n"),
            6,
            13,
            "weights must be 0 or more",
        ),
        (
            "every weight zero",
            format!("{HEAD}sessions:\n  - name: a\n    weight: 0\n    steps: [{{request: GET /}}]\n"),
            5,
            3,
            "every session has weight 0, but arrivals or users without a session draw from the mix",
        ),
        (
            "empty session",
            format!("{HEAD}sessions:\n  - name: x\n    steps: []\n"),
            6,
            12,
            "session 'x' is empty",
        ),
        (
            "undefined variable",
            s("      - request:\n          path: /u/${user}\n"),
            8,
            17,
            "undefined variable '${user}'",
        ),
        (
            "oauth without a consumer secret",
            s("      - request: {path: /, oauth: {consumer_key: k}}\n"),
            7,
            35,
            "oauth is missing 'consumer_secret'",
        ),
        (
            "oauth method",
            s("      - request: {path: /, oauth: {consumer_key: k, consumer_secret: s, method: RSA-SHA1}}\n"),
            7,
            81,
            "method: expected HMAC-SHA1 or PLAINTEXT",
        ),
        (
            "oauth with auth",
            s("      - request: {path: /, auth: {user: u, password: p}, oauth: {consumer_key: k, consumer_secret: s}}\n"),
            7,
            65,
            "oauth: a request signed with OAuth carries its own Authorization; it cannot have `auth` too",
        ),
        (
            "oauth with an Authorization header",
            s("      - request: {path: /, headers: {authorization: x}, oauth: {consumer_key: k, consumer_secret: s}}\n"),
            7,
            64,
            "drop the authorization header",
        ),
        (
            "oauth variable",
            s("      - request: {path: /, oauth: {consumer_key: k, consumer_secret: s, token: \"${t}\"}}\n"),
            7,
            80,
            "undefined variable '${t}'",
        ),
        (
            "oauth key",
            s("      - request: {path: /, oauth: {consumer_key: k, consumer_secret: s, realm: r}}\n"),
            7,
            73,
            "unknown key 'realm' in oauth; expected one of consumer_key, consumer_secret, token, token_secret, method",
        ),
        (
            "csv order",
            s("      - set: {var: x, csv: {file: u.csv, order: backwards}}\n"),
            7,
            49,
            "order: expected one of sequential, random, same_row",
        ),
        (
            "phase without rate",
            "load:\n  phases:\n    - {duration: 10s}\nsessions: [{name: a, steps: [{request: GET /}]}]\n"
                .to_string(),
            3,
            7,
            "phase needs one of arrival_rate, interarrival or ramp",
        ),
        (
            "bad duration",
            s("      - think: 2 fortnights\n"),
            7,
            16,
            "expected a duration",
        ),
        (
            "unknown top key",
            format!("{HEAD}sesions: []\n"),
            4,
            1,
            "unknown key 'sesions' in scenario",
        ),
        (
            "yaml syntax",
            format!("{HEAD}sessions: [\n"),
            5,
            1,
            "YAML syntax",
        ),
        (
            "duplicate key",
            format!("{HEAD}load: {{}}\n"),
            4,
            1,
            "duplicate key 'load'",
        ),
        (
            "bad match action",
            s("      - request: GET /\n      - match: {status: 500, do: explode}\n"),
            8,
            34,
            "do: expected one of continue, abort, restart, loop",
        ),
        (
            "extract with two sources",
            s("      - extract: {var: t, regex: 'x', json: /t}\n"),
            7,
            45,
            "extract takes one of regex, json, header",
        ),
        (
            "loop without bound",
            s("      - loop: {steps: [{request: GET /}]}\n"),
            7,
            15,
            "loop needs 'count', 'while' or 'until'",
        ),
        (
            "loop counter not a variable name",
            s("      - loop: {count: 2, counter: 9x, steps: [{request: GET /}]}\n"),
            7,
            35,
            "counter: expected a variable name (letters, digits, _), got '9x'",
        ),
        (
            "loop counter step not an integer",
            s("      - loop: {count: 2, counter: {var: i, step: 1.5}, steps: [{request: GET /}]}\n"),
            7,
            50,
            "step: expected an integer",
        ),
        (
            "loop counter with Tsung's attribute names",
            s("      - loop: {count: 2, counter: {var: i, from: 1}, steps: [{request: GET /}]}\n"),
            7,
            44,
            "unknown key 'from' in counter; expected one of var, start, step",
        ),
        (
            "loop counter without its variable",
            s("      - loop: {count: 2, counter: {start: 1}, steps: [{request: GET /}]}\n"),
            7,
            35,
            "counter is missing 'var'",
        ),
        (
            "loop counter used before its loop",
            s("      - request: GET /p/${i}\n      - loop: {count: 2, counter: i, steps: [{request: GET /}]}\n"),
            7,
            18,
            "undefined variable '${i}'",
        ),
        (
            "once naming no session",
            "load:\n  once: [{session: b, at: 1s}]\nsessions: [{name: a, steps: [{request: GET /}]}]\n".to_string(),
            2,
            20,
            "once: no session named 'b'",
        ),
        (
            "once at a time that is no duration",
            "load:\n  once: [{session: a, at: soon}]\nsessions: [{name: a, steps: [{request: GET /}]}]\n".to_string(),
            2,
            27,
            "at: expected a duration",
        ),
        (
            "once without its session",
            "load:\n  once: [{at: 1s}]\nsessions: [{name: a, steps: [{request: GET /}]}]\n".to_string(),
            2,
            10,
            "once is missing 'session'",
        ),
        (
            "once with a count",
            "load:\n  once: [{session: a, count: 2}]\nsessions: [{name: a, steps: [{request: GET /}]}]\n".to_string(),
            2,
            23,
            "unknown key 'count' in once; expected one of session, at",
        ),
        (
            "more once users than the bound",
            format!(
                "load:\n  once: [{}]\nsessions: [{{name: a, steps: [{{request: GET /}}]}}]\n",
                vec!["{session: a}"; 10_001].join(", ")
            ),
            2,
            9,
            "once: 10001 users, at most 10000",
        ),
        (
            "once not a list",
            "load:\n  once: {session: a}\nsessions: [{name: a, steps: [{request: GET /}]}]\n".to_string(),
            2,
            9,
            "once",
        ),
        (
            "missing include",
            s("      - include: nowhere.yaml\n"),
            7,
            18,
            "include 'nowhere.yaml'",
        ),
        (
            "bad threshold",
            format!("{HEAD}sessions: [{{name: a, steps: [{{request: GET /}}]}}]\nthresholds: {{p99: 'fast'}}\n"),
            5,
            19,
            "expected a comparison",
        ),
        (
            "threshold on an unknown name",
            format!("{HEAD}sessions: [{{name: a, steps: [{{request: {{name: home, path: /}}}}]}}]\nthresholds: {{'p99(hom)': '< 1s'}}\n"),
            5,
            14,
            "threshold 'p99(hom)' names 'hom', which is no request or transaction (names: home)",
        ),
        (
            // At the very character inside a plain scalar...
            "set expr: undefined variable",
            s("      - set: {var: x, expr: user_id + y}\n"),
            7,
            39,
            "expr: undefined variable 'y'; define it with an earlier set or extract",
        ),
        (
            // ... and inside a quoted one.
            "set expr: a condition where an integer goes",
            s("      - set: {var: x, expr: \"1 + (2 < 3)\"}\n"),
            7,
            34,
            "expr: '+' takes an integer, and this is a condition",
        ),
        (
            "set expr: the variable it sets is not defined before it",
            s("      - set: {var: x, expr: 'x + 1'}\n"),
            7,
            30,
            "expr: undefined variable 'x'",
        ),
        (
            "set expr: not an integer expression",
            s("      - set: {var: x, expr: user_id > 3}\n"),
            7,
            29,
            "expr: the expression is a condition; a set needs an integer",
        ),
        (
            "two rates",
            "load:\n  phases:\n    - {duration: 1s, arrival_rate: 1, interarrival: 1s}\nsessions: [{name: a, steps: [{request: GET /}]}]\n".to_string(),
            3,
            53,
            "only one of arrival_rate",
        ),
    ]
}

#[test]
fn each_bad_snippet_gives_a_located_error() {
    // Collect every mismatch so one run shows them all.
    let mut wrong = Vec::new();
    for (name, text, line, col, want) in cases() {
        let Err(errs) = parse_str(&text, "t.yaml") else {
            wrong.push(format!("{name}: parsed without error"));
            continue;
        };
        match errs.iter().find(|e| e.message.contains(want)) {
            None => wrong.push(format!(
                "{name}: no error containing {want:?}; got {errs:?}"
            )),
            Some(e) if (e.line, e.column) != (line, col) || e.file != "t.yaml" => {
                wrong.push(format!("{name}: want {line}:{col}, got {e}"))
            }
            Some(e) => assert!(e.to_string().starts_with(&format!("t.yaml:{line}:{col}: "))),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn errors_are_all_reported_not_just_the_first() {
    let text =
        format!("{HEAD}sessions:\n  - name: a\n    weight: -1\n    steps: [{{requst: GET /}}]\n");
    let errs = parse_str(&text, "t.yaml").unwrap_err();
    assert!(errs.len() >= 2, "{errs:#?}");
}

/// Issue 27: five independent mistakes, a threshold naming no request among them, give five
/// located lines at once (the threshold's came only after the others were fixed: it was
/// checked after the compile).
#[test]
fn five_mistakes_give_five_lines_thresholds_included() {
    let text = "\
servers: [{host: 127.0.0.1, port: 9}]
load: {users: [{count: 2}]}
sessions:
  - name: browse
    weight: -1
    steps:
      - request: {name: home, path: /}
      - requst: GET /x
      - request: \"GET /u/${user}\"
      - think: 10parsecs
thresholds:
  \"p99(hom)\": \"< 200ms\"
  error_rate: \"< 1%\"
";
    let errs = parse_str(text, "five.yaml").unwrap_err();
    let at: Vec<(usize, usize)> = errs.iter().map(|e| (e.line, e.column)).collect();
    assert_eq!(errs.len(), 5, "{errs:#?}");
    for (want, line, col) in [
        ("weights must be 0 or more", 5, 13),
        ("unknown step 'requst'", 8, 9),
        ("undefined variable '${user}'", 9, 18),
        ("think: expected a duration", 10, 16),
        ("threshold 'p99(hom)' names 'hom'", 12, 3),
    ] {
        let e = errs
            .iter()
            .find(|e| e.message.contains(want))
            .unwrap_or_else(|| panic!("no {want:?} in {errs:#?}"));
        assert_eq!((e.line, e.column), (line, col), "{want}: {at:?}");
    }
}

/// What a threshold may name is what the compile gives figures to: the same names, in the same
/// order, for a scenario with every kind of named step.
#[test]
fn metric_names_are_the_compiled_names() {
    let text = format!(
        "{HEAD}sessions:\n  - name: a\n    steps:\n      - request: {{name: home, path: /}}\n      \
         - transaction: {{name: buy, steps: [{{request: GET /cart}}, {{loop: {{count: 2, steps: [{{request: GET /item}}]}}}}]}}\n      \
         - pipeline: [{{request: GET /a.css}}, {{request: GET /b.js}}]\n      - request: {{name: home, path: /again}}\n  \
         - name: s\n    surge: default\n"
    );
    let sc = parse_str(&text, "t.yaml").unwrap_or_else(|e| panic!("{e:#?}"));
    let compiled = headroom_scenario::compile(&sc, std::path::Path::new(".")).unwrap();
    let got: Vec<&str> = compiled
        .workload
        .names
        .iter()
        .map(|n| n.name.as_str())
        .collect();
    let mut want = sc.metric_names();
    want.sort();
    let mut got_sorted = got.clone();
    got_sorted.sort();
    assert_eq!(want, got_sorted, "compiled {got:?}");
    assert!(got.contains(&"page") && got.contains(&"buy"), "{got:?}");
}

#[test]
fn include_loop_is_reported() {
    let dir = std::env::temp_dir().join(format!("headroom-scenario-inc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.yaml"), "- include: b.yaml\n").unwrap();
    std::fs::write(dir.join("b.yaml"), "- request: GET /\n- include: a.yaml\n").unwrap();
    let main = dir.join("main.yaml");
    std::fs::write(
        &main,
        format!("{HEAD}sessions:\n  - name: a\n    steps:\n      - include: a.yaml\n"),
    )
    .unwrap();
    let errs = headroom_scenario::load(&main).unwrap_err();
    let e = errs
        .iter()
        .find(|e| e.message.contains("includes loop"))
        .unwrap_or_else(|| panic!("{errs:#?}"));
    assert!(e.file.ends_with("b.yaml"), "{e}");
    assert_eq!((e.line, e.column), (2, 12), "{e}");
    assert!(e.message.contains("a.yaml -> b.yaml -> a.yaml"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

/// A session of weight 0 that only a `once` user runs is no error: nothing draws from the mix.
#[test]
fn a_weight_zero_session_run_once_is_valid() {
    let sc = parse_str(
        "load:\n  once: [{session: late, at: 2m}, {session: late}]\nsessions: [{name: late, weight: 0, steps: [{request: GET /}]}]\n",
        "t.yaml",
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    let at: Vec<_> = sc
        .load
        .once
        .iter()
        .map(|o| (o.session.as_str(), o.at.as_secs()))
        .collect();
    assert_eq!(at, [("late", 120), ("late", 0)]);
    let c = headroom_scenario::compile(&sc, std::path::Path::new(".")).unwrap();
    assert_eq!(c.users, 0);
    assert_eq!(c.workload.once.len(), 2);
    assert_eq!(c.workload.once[0].at.as_secs(), 120);
}

/// A `set` expression written over several lines (a folded block) is located at the scalar,
/// saying at which character; one over the byte bound is refused before it is parsed.
#[test]
fn set_expressions_off_one_line_or_too_long() {
    let s = |body: &str| format!("{HEAD}sessions:\n  - name: a\n    steps:\n{body}");
    let errs = parse_str(
        &s("      - set:\n          var: x\n          expr: >-\n            1 +\n            2 2\n"),
        "t.yaml",
    )
    .unwrap_err();
    assert!(
        errs.iter().any(|e| e.line == 10
            && e.message == "expr: at character 7: expected an operator, found '2'"),
        "{errs:?}"
    );
    let long = format!("1{}", " + 1".repeat(1100));
    let errs = parse_str(
        &s(&format!("      - set: {{var: x, expr: '{long}'}}\n")),
        "t.yaml",
    )
    .unwrap_err();
    assert!(
        errs.iter()
            .any(|e| e.line == 7 && e.message.contains("4401 bytes long; at most 4096")),
        "{errs:?}"
    );
}
