//! Raw TCP scenarios: `protocol: raw` servers and `send` steps with their `expect`, parsed,
//! compiled, emitted back, and refused where they do not belong (located errors).

use headroom_core::session::{ExpectSpec, Op, SessionBody};
use headroom_scenario::model::{Protocol, Step};
use headroom_scenario::{compile, parse_str};

const RAW: &str = r#"
servers: [{host: 127.0.0.1, port: 11211, protocol: raw}]
load: {users: [{count: 2}]}
sessions:
  - name: cache
    steps:
      - send: {name: set, data: "set k${user_id} 0 0 5\r\nhello\r\n", expect: {delimiter: "\r\n"}}
      - send: "touch k1 10 noreply\r\n"
      - send: {data: "get k1\r\n", expect: {regex: "END\r\n", window: 4096}}
      - extract: {var: v, regex: "VALUE k1 0 5\r\n(\\w+)"}
      - send: {name: fixed, data: "x", expect: {bytes: 12}}
      - send: {name: framed, data: "y", expect: {length: {width: 4, offset: 1, endian: little, includes_header: true, adjust: -1}}}
      - send: {name: quiet, data: "z", expect: nothing}
"#;

#[test]
fn send_steps_parse_compile_and_round_trip() {
    let s = parse_str(RAW, "raw.yaml").expect("valid");
    assert_eq!(s.servers[0].protocol, Protocol::Raw);
    let sends: Vec<_> = s.sessions[0]
        .steps
        .iter()
        .filter_map(|st| match st {
            Step::Send(x) => Some(x),
            _ => None,
        })
        .collect();
    assert_eq!(sends.len(), 6);
    assert_eq!(sends[0].name, "set");
    assert_eq!(sends[0].data, "set k${user_id} 0 0 5\r\nhello\r\n");
    assert_eq!(sends[0].expect, ExpectSpec::Delimiter(b"\r\n".to_vec()));
    // A send without a name is named by its first line; a bare string expects nothing.
    assert_eq!(sends[1].name, "touch k1 10 noreply");
    assert_eq!(sends[1].expect, ExpectSpec::Nothing);
    assert_eq!(sends[2].name, "get k1");
    assert_eq!(
        sends[2].expect,
        ExpectSpec::Regex {
            pattern: "END\r\n".into(),
            window: 4096
        }
    );
    assert_eq!(sends[3].expect, ExpectSpec::Bytes(12));
    assert_eq!(
        sends[4].expect,
        ExpectSpec::Length {
            offset: 1,
            width: 4,
            big_endian: false,
            includes_header: true,
            adjust: -1
        }
    );
    assert_eq!(sends[5].expect, ExpectSpec::Nothing);

    let c = compile(&s, std::path::Path::new(".")).expect("compiles");
    let SessionBody::Ops { ops, .. } = &c.workload.sessions[0].body else {
        panic!("ops")
    };
    let compiled: Vec<&headroom_core::session::SendOp> = ops
        .iter()
        .filter_map(|o| match o {
            Op::Send(x) => Some(x),
            _ => None,
        })
        .collect();
    assert_eq!(compiled.len(), 6);
    // The reply an `extract` reads is kept: only the send before it captures.
    let captures: Vec<bool> = compiled.iter().map(|x| x.capture).collect();
    assert_eq!(captures, [false, false, true, false, false, false]);
    assert!(
        compiled[0].data.as_literal().is_none(),
        "${{user_id}} stays a hole"
    );
    assert_eq!(
        compiled[1].data.as_literal().as_deref(),
        Some("touch k1 10 noreply\r\n")
    );

    // Emitted and parsed again: the same scenario.
    let yaml = headroom_scenario::emit::to_yaml(&s);
    let again = parse_str(&yaml, "again.yaml").unwrap_or_else(|e| panic!("{e:?}\n{yaml}"));
    assert_eq!(again.sessions, s.sessions, "{yaml}");
    assert_eq!(again.servers, s.servers);
}

fn first_error(text: &str) -> String {
    match parse_str(text, "t.yaml") {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e[0].to_string(),
    }
}

#[test]
fn misplaced_and_malformed_sends_are_located_errors() {
    let http =
        "load: {users: [{count: 1}]}\nsessions:\n  - name: a\n    steps:\n      - send: \"x\"\n";
    let e = first_error(http);
    assert!(e.starts_with("t.yaml:5:9:"), "{e}");
    assert!(
        e.contains("send: raw TCP steps need servers with protocol: raw"),
        "{e}"
    );

    let head = "servers: [{host: 127.0.0.1, port: 9, protocol: raw}]\nload: {users: [{count: 1}]}\nsessions:\n  - name: a\n    steps:\n";
    let e = first_error(&format!("{head}      - request: GET /\n"));
    assert!(e.starts_with("t.yaml:6:9:"), "{e}");
    assert!(e.contains("the servers speak raw; use send steps"), "{e}");

    for (step, want) in [
        (
            "{data: x, expect: {bytes: 0}}",
            "bytes: expected a positive integer",
        ),
        (
            "{data: x, expect: {delimiter: \"\"}}",
            "delimiter: must not be empty",
        ),
        ("{data: x, expect: {regex: \"(\"}}", "regex:"),
        (
            "{data: x, expect: {length: {width: 3}}}",
            "width: expected 1, 2, 4 or 8",
        ),
        (
            "{data: x, expect: {length: {width: 2, endian: middle}}}",
            "endian: expected big or little",
        ),
        (
            "{data: x, expect: sometimes}",
            "expect: expected nothing, {bytes: N}",
        ),
        (
            "{data: x, expect: {lines: 2}}",
            "unknown key 'lines' in expect",
        ),
        ("{expect: nothing}", "send is missing 'data'"),
    ] {
        let e = first_error(&format!("{head}      - send: {step}\n"));
        assert!(e.starts_with("t.yaml:6:"), "{step}: {e}");
        assert!(e.contains(want), "{step}: {e}");
    }

    let mixed = "servers:\n  - {host: 127.0.0.1, port: 9, protocol: raw}\n  - {host: 127.0.0.1, port: 8, protocol: http}\nload: {users: [{count: 1}]}\nsessions: [{name: a, steps: [{send: x}]}]\n";
    let e = first_error(mixed);
    assert!(
        e.contains("every server of a scenario speaks the same one"),
        "{e}"
    );
}
