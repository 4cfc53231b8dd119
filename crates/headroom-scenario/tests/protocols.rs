//! XMPP, PostgreSQL and WebSocket scenarios: `protocol: xmpp | pgsql | websocket` servers, their
//! settings sections and the `xmpp`, `sql` and `ws` steps, parsed to exact model values
//! (defaults included), emitted back by `to_yaml` and refused where they do not belong, each
//! refusal a located error.

use headroom_core::session::{Op, Piece, SessionBody, Template};
use headroom_scenario::model::*;
use headroom_scenario::{compile, parse_str, to_yaml, ScenarioError};

const XMPP: &str = r#"
servers:
  - {host: 127.0.0.1, port: 25222, protocol: xmpp}
xmpp:
  domain: localhost
  users: {first: 1, last: 5000}
load: {users: [{count: 2}]}
sessions:
  - name: active
    steps:
      - xmpp: presence:initial
      - xmpp: {type: roster:get, ack: local, name: roster}
      - xmpp: {type: chat, to: online, size: 256}
      - xmpp: {type: chat, to: offline, text: "hi ${user_id}"}
      - xmpp: {type: presence:broadcast, show: away, status: "gone"}
      - xmpp: {type: presence:directed, to: online, show: dnd}
      - xmpp: {type: presence:subscribe, to: random}
      - xmpp: presence:final
      - xmpp: {type: roster:add, to: random}
      - xmpp: {type: roster:rename, to: previous, alias: "friend"}
      - xmpp: {type: roster:remove, to: previous}
      - xmpp: {type: raw, data: "<presence/>"}
      - xmpp: close
"#;

const XMPP_DEFAULTS: &str = r#"
servers: [{host: 127.0.0.1, port: 5222, protocol: xmpp}]
xmpp: {domain: example.org, users: {first: 0, last: 0}}
load: {users: [{count: 1}]}
sessions:
  - name: defaults
    steps:
      - xmpp: {type: chat, size: 1}
      - xmpp: presence:directed
      - xmpp: presence:subscribe
      - xmpp: roster:add
      - xmpp: {type: roster:rename, alias: buddy}
      - xmpp: roster:remove
      - xmpp: presence:broadcast
      - xmpp: roster:get
      - xmpp: {type: chat, to: unique, text: "", ack: no_ack}
      - xmpp: {type: presence:broadcast, status: "${not_a_template}"}
      - connect
      - think: 1s
      - close
"#;

const PGSQL: &str = r#"
servers: [{host: 127.0.0.1, port: 5432, protocol: pgsql}]
pgsql:
  database: headroom
  user: headroom_md5
  password: headroom
load: {users: [{count: 2}]}
sessions:
  - name: kv
    steps:
      - set: {var: k, random_number: {min: 1, max: 100}}
      - sql: "SELECT 1"
      - sql: {query: "SELECT v FROM kv WHERE k = $1", params: ["${k}"], prepare: true, name: read}
      - sql:
          query: |
            SELECT a_rather_long_column_name, another_one FROM t
            WHERE x = 1
      - sql: {query: "UPDATE kv SET v = $2 WHERE k = $1", params: [7, "v${k}"]}
      - extract: {var: v, regex: "(\\d+)"}
"#;

const WS: &str = r#"
servers: [{host: 127.0.0.1, port: 8080, protocol: websocket}]
websocket:
  path: /chat
  subprotocol: chat
  origin: http://localhost
load: {users: [{count: 2}]}
sessions:
  - name: echo
    steps:
      - ws: {send: "hello ${user_id}"}
      - ws: {send: "AAEC", binary: true, reply: false, name: blob}
      - ws: ping
      - ws: {ping: true, name: heartbeat}
      - ws: close
"#;

fn show(errs: &[ScenarioError]) -> String {
    errs.iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

fn parse(text: &str) -> Scenario {
    parse_str(text, "t.yaml").unwrap_or_else(|e| panic!("{}\n---\n{text}", show(&e)))
}

/// `to_yaml` and back gives the same scenario; returns the YAML.
fn round_trip(s: &Scenario) -> String {
    let yaml = to_yaml(s);
    match parse_str(&yaml, "x.yaml") {
        Ok(back) => assert_eq!(&back, s, "round trip differs; YAML was:\n{yaml}"),
        Err(e) => panic!("YAML does not parse:\n{}\n---\n{yaml}", show(&e)),
    }
    yaml
}

fn xmpp(name: &str, action: XmppAction<String>, ack: XmppAck) -> Step {
    Step::Xmpp(Xmpp {
        name: name.into(),
        action,
        ack,
    })
}

fn sql(name: &str, query: &str, params: &[&str], prepare: bool) -> Step {
    Step::Sql(Sql {
        name: name.into(),
        query: query.into(),
        params: params.iter().map(|p| p.to_string()).collect(),
        prepare,
    })
}

fn ws(name: &str, action: WsAction<String>) -> Step {
    Step::Ws(Ws {
        name: name.into(),
        action,
    })
}

// ---- parsing to exact values ------------------------------------------------------------------

#[test]
fn xmpp_steps_and_section_parse_to_exact_values() {
    use XmppAck::*;
    use XmppAction as A;
    use XmppDest::*;
    let s = parse(XMPP);
    assert_eq!(s.servers[0].protocol, Protocol::Xmpp);
    assert_eq!(
        s.link,
        LinkSpec::Xmpp(XmppSpec {
            domain: "localhost".into(),
            username: "user".into(),
            password: "pass".into(),
            first: 1,
            last: 5000,
            login: None,
            resource: None,
            anonymous: false,
            register: false,
            bosh: None,
        })
    );
    let want = vec![
        xmpp("xmpp:presence:initial", A::PresenceInitial, Reply),
        xmpp("roster", A::RosterGet, Local),
        xmpp(
            "xmpp:chat",
            A::Chat {
                to: Online,
                size: 256,
                text: None,
            },
            Reply,
        ),
        xmpp(
            "xmpp:chat",
            A::Chat {
                to: Offline,
                size: 0,
                text: Some("hi ${user_id}".into()),
            },
            Reply,
        ),
        xmpp(
            "xmpp:presence:broadcast",
            A::PresenceBroadcast {
                show: Some("away".into()),
                status: Some("gone".into()),
            },
            Reply,
        ),
        xmpp(
            "xmpp:presence:directed",
            A::PresenceDirected {
                to: Online,
                show: Some("dnd".into()),
                status: None,
            },
            Reply,
        ),
        xmpp(
            "xmpp:presence:subscribe",
            A::PresenceSubscribe { to: Random },
            Reply,
        ),
        xmpp("xmpp:presence:final", A::PresenceFinal, Reply),
        xmpp("xmpp:roster:add", A::RosterAdd { to: Random }, Reply),
        xmpp(
            "xmpp:roster:rename",
            A::RosterRename {
                to: Previous,
                name: "friend".into(),
            },
            Reply,
        ),
        xmpp(
            "xmpp:roster:remove",
            A::RosterRemove { to: Previous },
            Reply,
        ),
        xmpp("xmpp:raw", A::Raw("<presence/>".into()), Reply),
        xmpp("xmpp:close", A::Close, Reply),
    ];
    assert_eq!(s.sessions[0].steps, want);
}

#[test]
fn xmpp_defaults_per_type() {
    use XmppAck::*;
    use XmppAction as A;
    use XmppDest::*;
    let s = parse(XMPP_DEFAULTS);
    let LinkSpec::Xmpp(spec) = &s.link else {
        panic!("{:?}", s.link)
    };
    assert_eq!((spec.first, spec.last), (0, 0));
    assert_eq!(spec.domain, "example.org");
    let want = vec![
        xmpp(
            "xmpp:chat",
            A::Chat {
                to: Online,
                size: 1,
                text: None,
            },
            Reply,
        ),
        xmpp(
            "xmpp:presence:directed",
            A::PresenceDirected {
                to: Online,
                show: None,
                status: None,
            },
            Reply,
        ),
        xmpp(
            "xmpp:presence:subscribe",
            A::PresenceSubscribe { to: Random },
            Reply,
        ),
        xmpp("xmpp:roster:add", A::RosterAdd { to: Random }, Reply),
        xmpp(
            "xmpp:roster:rename",
            A::RosterRename {
                to: Previous,
                name: "buddy".into(),
            },
            Reply,
        ),
        xmpp(
            "xmpp:roster:remove",
            A::RosterRemove { to: Previous },
            Reply,
        ),
        xmpp(
            "xmpp:presence:broadcast",
            A::PresenceBroadcast {
                show: None,
                status: None,
            },
            Reply,
        ),
        xmpp("xmpp:roster:get", A::RosterGet, Reply),
        xmpp(
            "xmpp:chat",
            A::Chat {
                to: Unique,
                size: 0,
                text: Some(String::new()),
            },
            NoAck,
        ),
        // `status` is not a template: kept as written, not checked for definedness.
        xmpp(
            "xmpp:presence:broadcast",
            A::PresenceBroadcast {
                show: None,
                status: Some("${not_a_template}".into()),
            },
            Reply,
        ),
        Step::Connect,
        Step::Think(headroom_core::Distribution::Constant(
            std::time::Duration::from_secs(1),
        )),
        Step::Close,
    ];
    assert_eq!(s.sessions[0].steps, want);
}

#[test]
fn xmpp_section_options() {
    let with = |section: &str| {
        let text = format!(
            "servers: [{{host: 127.0.0.1, port: 5222, protocol: xmpp}}]\n{section}\
             load: {{users: [{{count: 1}}]}}\nsessions: [{{name: a, steps: [xmpp: close]}}]\n"
        );
        parse(&text).link
    };
    assert_eq!(
        with(
            "xmpp:\n  domain: d\n  users: {first: 10, last: 20}\n  username: bot\n  \
             password: secret\n  resource: headroom\n  register: true\n"
        ),
        LinkSpec::Xmpp(XmppSpec {
            domain: "d".into(),
            username: "bot".into(),
            password: "secret".into(),
            first: 10,
            last: 20,
            login: None,
            resource: Some("headroom".into()),
            anonymous: false,
            register: true,
            bosh: None,
        })
    );
    // Anonymous logins need no accounts: `users` may be left out (stored as 1..=1).
    let anon = LinkSpec::Xmpp(XmppSpec {
        domain: "d".into(),
        username: "user".into(),
        password: "pass".into(),
        first: 1,
        last: 1,
        login: None,
        resource: None,
        anonymous: true,
        register: false,
        bosh: None,
    });
    assert_eq!(with("xmpp: {domain: d, anonymous: true}\n"), anon);
    assert_eq!(
        with("xmpp: {domain: d, anonymous: true, users: {first: 1, last: 1}}\n"),
        anon
    );
    let LinkSpec::Xmpp(x) =
        with("xmpp: {domain: d, anonymous: true, users: {first: 5, last: 9}}\n")
    else {
        panic!()
    };
    assert_eq!((x.first, x.last, x.anonymous), (5, 9, true));
}

#[test]
fn sql_steps_and_pgsql_section_parse_to_exact_values() {
    let s = parse(PGSQL);
    assert_eq!(s.servers[0].protocol, Protocol::Pgsql);
    assert_eq!(
        s.link,
        LinkSpec::Pgsql(PgSpec {
            database: "headroom".into(),
            user: "headroom_md5".into(),
            password: Some("headroom".into()),
        })
    );
    let steps = &s.sessions[0].steps;
    assert_eq!(steps.len(), 6);
    assert_eq!(steps[1], sql("SELECT 1", "SELECT 1", &[], false));
    assert_eq!(
        steps[2],
        sql("read", "SELECT v FROM kv WHERE k = $1", &["${k}"], true)
    );
    // Named by the first line of the query, cut to 40 characters.
    let long = "SELECT a_rather_long_column_name, another_one FROM t\nWHERE x = 1\n";
    assert_eq!(
        steps[3],
        sql("SELECT a_rather_long_column_name, anothe", long, &[], false)
    );
    assert_eq!(
        "SELECT a_rather_long_column_name, anothe".chars().count(),
        40
    );
    // A number is a parameter's text.
    assert_eq!(
        steps[4],
        sql(
            "UPDATE kv SET v = $2 WHERE k = $1",
            "UPDATE kv SET v = $2 WHERE k = $1",
            &["7", "v${k}"],
            false
        )
    );

    // Without a password.
    let s = parse(
        "servers: [{host: 127.0.0.1, port: 5432, protocol: pgsql}]\n\
         pgsql: {database: db, user: u}\n\
         load: {users: [{count: 1}]}\nsessions: [{name: a, steps: [sql: SELECT 1]}]\n",
    );
    assert_eq!(
        s.link,
        LinkSpec::Pgsql(PgSpec {
            database: "db".into(),
            user: "u".into(),
            password: None,
        })
    );
}

#[test]
fn ws_steps_and_websocket_section_parse_to_exact_values() {
    let s = parse(WS);
    assert_eq!(s.servers[0].protocol, Protocol::WebSocket);
    assert_eq!(
        s.link,
        LinkSpec::WebSocket(WsSpec {
            path: "/chat".into(),
            subprotocol: Some("chat".into()),
            origin: Some("http://localhost".into()),
        })
    );
    let want = vec![
        ws(
            "ws:send",
            WsAction::Message {
                binary: false,
                data: "hello ${user_id}".into(),
                reply: true,
            },
        ),
        ws(
            "blob",
            WsAction::Message {
                binary: true,
                data: "AAEC".into(),
                reply: false,
            },
        ),
        ws("ws:ping", WsAction::Ping),
        ws("heartbeat", WsAction::Ping),
        ws("ws:close", WsAction::Close),
    ];
    assert_eq!(s.sessions[0].steps, want);

    // No section: the upgrade goes to `/`; `ws` is short for `websocket`.
    let s = parse(
        "servers: [{host: 127.0.0.1, port: 80, protocol: ws}]\n\
         load: {users: [{count: 1}]}\nsessions: [{name: a, steps: [ws: ping]}]\n",
    );
    assert_eq!(s.servers[0].protocol, Protocol::WebSocket);
    assert_eq!(
        s.link,
        LinkSpec::WebSocket(WsSpec {
            path: "/".into(),
            subprotocol: None,
            origin: None,
        })
    );
    assert!(!round_trip(&s).contains("websocket:"));
}

#[test]
fn http_and_raw_keep_a_plain_link_and_steps_allowed_everywhere_stay_allowed() {
    let s = parse(
        "servers: [{host: 127.0.0.1, port: 9, protocol: tcp}]\n\
         load: {users: [{count: 1}]}\nsessions: [{name: a, steps: [{send: x}]}]\n",
    );
    assert_eq!(s.servers[0].protocol, Protocol::Raw);
    assert_eq!(s.link, LinkSpec::Plain);
    let s = parse("load: {users: [{count: 1}]}\nsessions: [{name: a, steps: [request: GET /]}]\n");
    assert_eq!(s.link, LinkSpec::Plain);
    // connect, close, think, loop, transaction, set, extract and match on every protocol.
    for (protocol, section, step) in [
        (
            "xmpp",
            "xmpp: {domain: d, anonymous: true}\n",
            "xmpp: presence:initial",
        ),
        ("pgsql", "pgsql: {database: d, user: u}\n", "sql: SELECT 1"),
        ("websocket", "", "ws: {send: x}"),
    ] {
        let text = format!(
            "servers: [{{host: 127.0.0.1, port: 1, protocol: {protocol}}}]\n{section}\
             load: {{users: [{{count: 1}}]}}\nsessions:\n  - name: a\n    steps:\n\
             \x20     - connect\n\
             \x20     - set: {{var: x, value: \"1\"}}\n\
             \x20     - transaction:\n\
             \x20         name: t\n\
             \x20         steps:\n\
             \x20           - loop: {{count: 2, steps: [{step}, think: 1ms]}}\n\
             \x20     - extract: {{var: y, regex: \"(.)\"}}\n\
             \x20     - match: {{body: x, do: continue}}\n\
             \x20     - close\n"
        );
        let s = parse(&text);
        assert_eq!(s.sessions[0].steps.len(), 6, "{protocol}");
        round_trip(&s);
    }
}

#[test]
fn the_link_reaches_the_compiled_workload() {
    for (text, handshake) in [
        (XMPP, "xmpp:login"),
        (PGSQL, "pgsql:startup"),
        (WS, "ws:handshake"),
    ] {
        let s = parse(text);
        let c = compile(&s, std::path::Path::new(".")).expect("compiles");
        assert_eq!(c.workload.link, s.link);
        let id = c.workload.handshake.expect("a handshake name") as usize;
        assert_eq!(c.workload.names[id].name, handshake);
    }
}

// ---- emitting -------------------------------------------------------------------------------

#[test]
fn every_form_round_trips_and_defaults_are_written_compactly() {
    let yaml = round_trip(&parse(XMPP));
    for want in [
        "xmpp:\n  domain: localhost\n  users: {first: 1, last: 5000}\nload:",
        "      - xmpp: presence:initial\n",
        "      - xmpp: {type: roster:get, ack: local, name: roster}\n",
        "      - xmpp: {type: chat, size: 256}\n",
        "      - xmpp: {type: chat, to: offline, text: \"hi ${user_id}\"}\n",
        "      - xmpp: {type: presence:directed, show: dnd}\n",
        "      - xmpp: presence:subscribe\n",
        "      - xmpp: {type: roster:rename, alias: friend}\n",
        "      - xmpp: roster:remove\n",
        "      - xmpp: {type: raw, data: <presence/>}\n",
        "      - xmpp: close\n",
    ] {
        assert!(yaml.contains(want), "{want:?} not in:\n{yaml}");
    }
    let yaml = round_trip(&parse(XMPP_DEFAULTS));
    assert!(
        yaml.contains("      - xmpp: {type: chat, to: unique, text: \"\", ack: no_ack}\n"),
        "{yaml}"
    );
    assert!(yaml.contains("  users: {first: 0, last: 0}\n"), "{yaml}");

    let yaml = round_trip(&parse(PGSQL));
    for want in [
        "pgsql:\n  database: headroom\n  user: headroom_md5\n  password: headroom\n",
        "      - sql: SELECT 1\n",
        "      - sql: {query: SELECT v FROM kv WHERE k = $1, params: [\"${k}\"], prepare: true, name: read}\n",
        "      - sql: \"SELECT a_rather_long_column_name, another_one FROM t\\nWHERE x = 1\\n\"\n",
        "      - sql: {query: UPDATE kv SET v = $2 WHERE k = $1, params: [\"7\", \"v${k}\"]}\n",
    ] {
        assert!(yaml.contains(want), "{want:?} not in:\n{yaml}");
    }

    let yaml = round_trip(&parse(WS));
    for want in [
        "websocket:\n  path: /chat\n  subprotocol: chat\n  origin: \"http://localhost\"\n",
        "      - ws: {send: \"hello ${user_id}\"}\n",
        "      - ws: {send: AAEC, binary: true, reply: false, name: blob}\n",
        "      - ws: ping\n",
        "      - ws: {ping: true, name: heartbeat}\n",
        "      - ws: close\n",
    ] {
        assert!(yaml.contains(want), "{want:?} not in:\n{yaml}");
    }
}

/// Issue 32: `xmpp.login` logs each connection in with its session's variables (Tsung's
/// `<xmpp_authenticate>` over a CSV file): parsed as written, round-tripped, and compiled over
/// the variables' slots, the same slots the session's `set` steps fill.
#[test]
fn xmpp_login_from_the_sessions_variables() {
    let text = "servers: [{host: 127.0.0.1, port: 5222, protocol: xmpp}]\n\
                xmpp:\n  domain: d\n  login: {user: \"${name}\", password: \"pw-${pass}\"}\n\
                load: {users: [{count: 1}]}\n\
                sessions:\n  - name: a\n    steps:\n\
                \x20     - set: {var: name, csv: {file: u.csv, column: 0}}\n\
                \x20     - set: {var: pass, csv: {file: u.csv, column: 1, order: same_row}}\n\
                \x20     - xmpp: roster:get\n\
                \x20     - xmpp: close\n";
    let s = parse(text);
    let LinkSpec::Xmpp(x) = &s.link else {
        panic!("{:?}", s.link)
    };
    let login = x.login.as_ref().expect("a login");
    assert_eq!(
        (login.user.as_str(), login.password.as_str()),
        ("${name}", "pw-${pass}")
    );
    // Numbered accounts do not apply: users defaults to 1..=1.
    assert_eq!((x.first, x.last, x.anonymous), (1, 1, false));
    assert!(matches!(
        &s.sessions[0].steps[1],
        Step::Set {
            source: SetSource::Csv {
                column: 1,
                order: CsvOrder::SameRow,
                ..
            },
            ..
        }
    ));
    let yaml = round_trip(&s);
    assert!(
        yaml.contains("  login: {user: \"${name}\", password: \"pw-${pass}\"}\n"),
        "{yaml}"
    );
    assert!(yaml.contains("order: same_row"), "{yaml}");
    assert!(!yaml.contains("users: {first"), "{yaml}");

    let dir = std::env::temp_dir().join(format!("headroom-login-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("u.csv"), "ann,1\n").unwrap();
    let c = compile(&s, &dir).expect("compiles");
    let _ = std::fs::remove_dir_all(&dir);
    let LinkSpec::Xmpp(cx) = &c.workload.link else {
        panic!()
    };
    let t = &cx.login.as_ref().unwrap().templates;
    let slot = |v: &str| c.workload.vars.iter().position(|n| n == v).unwrap() as u16;
    assert_eq!(t[0], Template(vec![Piece::Var(slot("name"))]));
    assert_eq!(
        t[1],
        Template(vec![Piece::Lit("pw-".into()), Piece::Var(slot("pass"))])
    );
    let mut vars = vec![String::new(); c.workload.vars.len()];
    vars[slot("name") as usize] = "ann".into();
    vars[slot("pass") as usize] = "1".into();
    let mut out = String::new();
    t[1].expand_into(&vars, &mut out);
    assert_eq!(out, "pw-1");
}

#[test]
fn sections_round_trip_with_every_option() {
    for section in [
        "xmpp:\n  domain: d\n  users: {first: 3, last: 4}\n  username: \"u:\"\n  password: \"\"\n  resource: r\n  register: true\n",
        "xmpp:\n  domain: d\n  anonymous: true\n",
        "xmpp:\n  domain: d\n  users: {first: 7, last: 8}\n  anonymous: true\n",
    ] {
        let text = format!(
            "servers: [{{host: 127.0.0.1, port: 5222, protocol: xmpp}}]\n{section}\
             load: {{users: [{{count: 1}}]}}\nsessions: [{{name: a, steps: [xmpp: close]}}]\n"
        );
        let yaml = round_trip(&parse(&text));
        assert!(yaml.contains(section), "{section:?} not in:\n{yaml}");
    }
    for (section, ends) in [
        ("pgsql:\n  database: d\n  user: u\n", "sql: \"1\""),
        (
            "pgsql:\n  database: d\n  user: u\n  password: \"\"\n",
            "sql: \"1\"",
        ),
        ("websocket:\n  subprotocol: x\n", "ws: close"),
        ("websocket:\n  origin: o\n", "ws: close"),
    ] {
        let protocol = section.split(':').next().unwrap();
        let text = format!(
            "servers: [{{host: 127.0.0.1, port: 1, protocol: {protocol}}}]\n{section}\
             load: {{users: [{{count: 1}}]}}\nsessions: [{{name: a, steps: [{ends}]}}]\n"
        );
        let yaml = round_trip(&parse(&text));
        assert!(yaml.contains(section), "{section:?} not in:\n{yaml}");
    }
}

struct XorShift(u64);
impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn coin(&mut self) -> bool {
        self.next() & 1 == 0
    }
    /// Text meant to trip the emitter's quoting: YAML indicators, typed-looking words, escapes.
    fn text(&mut self, non_empty: bool) -> String {
        const PIECES: &[&str] = &[
            "a",
            "SELECT",
            " ",
            ":",
            ": ",
            "#",
            " #",
            "{",
            "}",
            "[",
            "]",
            ",",
            "'",
            "\"",
            "\\",
            "\n",
            "\t",
            "-",
            "?",
            "&",
            "*",
            "!",
            "|",
            ">",
            "%",
            "@",
            "`",
            "true",
            "null",
            "~",
            "0x1F",
            "12",
            "1.5",
            "é",
            "<presence/>",
            "$1",
            "${user_id}",
            "${session}",
        ];
        loop {
            let n = self.below(5) + usize::from(non_empty);
            let s: String = (0..n).map(|_| PIECES[self.below(PIECES.len())]).collect();
            if !non_empty || !s.trim().is_empty() {
                return s;
            }
        }
    }
}

/// Random protocol steps that the parser could have produced, under the session's defined
/// variables only (builtins), emitted and read back.
#[test]
fn random_protocol_steps_round_trip() {
    let mut rng = XorShift(0x0DDB_1A5E_5BAD_5EED);
    let dests = [
        XmppDest::Online,
        XmppDest::Offline,
        XmppDest::Random,
        XmppDest::Unique,
        XmppDest::Previous,
    ];
    let acks = [XmppAck::NoAck, XmppAck::Local, XmppAck::Reply];
    let shows = ["chat", "away", "xa", "dnd"];
    for round in 0..300 {
        let protocol = [Protocol::Xmpp, Protocol::Pgsql, Protocol::WebSocket][round % 3];
        let mut steps = Vec::new();
        for _ in 0..1 + rng.below(6) {
            let step = match protocol {
                Protocol::Xmpp => {
                    let to = dests[rng.below(5)];
                    let opt = |rng: &mut XorShift, v: String| rng.coin().then_some(v);
                    let action = match rng.below(12) {
                        0 => XmppAction::PresenceInitial,
                        1 => XmppAction::PresenceFinal,
                        2 => XmppAction::PresenceBroadcast {
                            show: opt(&mut rng, shows[round % 4].into()),
                            status: {
                                let t = rng.text(false);
                                opt(&mut rng, t)
                            },
                        },
                        3 => XmppAction::PresenceDirected {
                            to,
                            show: opt(&mut rng, shows[round % 4].into()),
                            status: {
                                let t = rng.text(false);
                                opt(&mut rng, t)
                            },
                        },
                        4 => XmppAction::PresenceSubscribe { to },
                        5 => XmppAction::RosterGet,
                        6 => XmppAction::RosterAdd { to },
                        7 => XmppAction::RosterRename {
                            to,
                            name: rng.text(true),
                        },
                        8 => XmppAction::RosterRemove { to },
                        9 if rng.coin() => XmppAction::Chat {
                            to,
                            size: 1 + rng.below(10_000),
                            text: None,
                        },
                        9 => XmppAction::Chat {
                            to,
                            size: 0,
                            text: Some(rng.text(false)),
                        },
                        10 => XmppAction::Raw(rng.text(false)),
                        _ => XmppAction::Close,
                    };
                    let name = if rng.coin() {
                        format!("xmpp:{}", action.type_name())
                    } else {
                        rng.text(true)
                    };
                    xmpp(&name, action, acks[rng.below(3)])
                }
                Protocol::Pgsql => {
                    let query = rng.text(true);
                    let params: Vec<String> = (0..rng.below(3)).map(|_| rng.text(false)).collect();
                    let name = if rng.coin() {
                        let line = query.lines().next().unwrap_or("").trim();
                        let n: String = line.chars().take(40).collect();
                        if n.is_empty() {
                            "sql".to_string()
                        } else {
                            n
                        }
                    } else {
                        rng.text(true)
                    };
                    Step::Sql(Sql {
                        name,
                        query,
                        params,
                        prepare: rng.coin(),
                    })
                }
                _ => {
                    let action = match rng.below(3) {
                        0 => WsAction::Ping,
                        1 => WsAction::Close,
                        _ => WsAction::Message {
                            binary: rng.coin(),
                            data: rng.text(false),
                            reply: rng.coin(),
                        },
                    };
                    let default = match action {
                        WsAction::Message { .. } => "ws:send",
                        WsAction::Ping => "ws:ping",
                        WsAction::Close => "ws:close",
                    };
                    let name = if rng.coin() {
                        default.to_string()
                    } else {
                        rng.text(true)
                    };
                    ws(&name, action)
                }
            };
            steps.push(step);
        }
        let link = match protocol {
            Protocol::Xmpp => LinkSpec::Xmpp(XmppSpec {
                domain: rng.text(true),
                username: rng.text(false),
                password: rng.text(false),
                first: rng.below(10) as u64,
                last: 10 + rng.below(10) as u64,
                login: None,
                resource: rng.coin().then(|| rng.text(true)),
                anonymous: false,
                register: rng.coin(),
                bosh: None,
            }),
            Protocol::Pgsql => LinkSpec::Pgsql(PgSpec {
                database: rng.text(true),
                user: rng.text(true),
                password: rng.coin().then(|| rng.text(false)),
            }),
            _ => LinkSpec::WebSocket(WsSpec {
                path: format!("/{}", rng.text(false)),
                subprotocol: rng.coin().then(|| rng.text(true)),
                origin: rng.coin().then(|| rng.text(true)),
            }),
        };
        let s = Scenario {
            file_root: None,
            name: None,
            servers: vec![Server {
                http2: false,
                host: "127.0.0.1".into(),
                port: 1000,
                protocol,
                tls: None,
            }],
            load: Load {
                phases: vec![],
                users: vec![Users {
                    count: 1,
                    session: None,
                }],
                stages: Vec::new(),
                once: Vec::new(),
            },
            sessions: vec![Session {
                name: "s".into(),
                weight: 1.0,
                steps,
                surge: None,
            }],
            thresholds: vec![],
            link,
            http: Default::default(),
        };
        round_trip(&s);
    }
}

// ---- errors ---------------------------------------------------------------------------------

const XHEAD: &str = "servers: [{host: 127.0.0.1, port: 5222, protocol: xmpp}]\n\
                     xmpp: {domain: localhost, users: {first: 1, last: 10}}\n\
                     load: {users: [{count: 1}]}\n\
                     sessions:\n  - name: a\n    steps:\n";
const PHEAD: &str = "servers: [{host: 127.0.0.1, port: 5432, protocol: pgsql}]\n\
                     pgsql: {database: d, user: u}\n\
                     load: {users: [{count: 1}]}\n\
                     sessions:\n  - name: a\n    steps:\n";
const WHEAD: &str = "servers: [{host: 127.0.0.1, port: 80, protocol: websocket}]\n\
                     load: {users: [{count: 1}]}\n\
                     sessions:\n  - name: a\n    steps:\n";
const HHEAD: &str = "load: {users: [{count: 1}]}\nsessions:\n  - name: a\n    steps:\n";
const LHEAD: &str = "servers: [{host: 127.0.0.1, port: 389, protocol: ldap}]\n\
                     load: {users: [{count: 1}]}\n\
                     sessions:\n  - name: a\n    steps:\n";
const AHEAD: &str = "servers: [{host: 127.0.0.1, port: 5672, protocol: amqp}]\n\
                     load: {users: [{count: 1}]}\n\
                     sessions:\n  - name: a\n    steps:\n";
const FHEAD: &str = "files: {root: /srv/bench}\n\
                     load: {users: [{count: 1}]}\n\
                     sessions:\n  - name: a\n    steps:\n";
const MHEAD: &str = "servers: [{host: 127.0.0.1, port: 1883, protocol: mqtt}]\n\
                     load: {users: [{count: 1}]}\n\
                     sessions:\n  - name: a\n    steps:\n";

/// One bad file: its text, the line of the error, a marker whose first occurrence on that
/// line is the error's column, and a fragment of the message.
struct Case {
    text: String,
    line: usize,
    at: &'static str,
    want: &'static str,
}

fn case(head: &str, step: &str, at: &'static str, want: &'static str) -> Case {
    Case {
        line: head.lines().count() + 1,
        text: format!("{head}      - {step}\n"),
        at,
        want,
    }
}

fn file(text: String, line: usize, at: &'static str, want: &'static str) -> Case {
    Case {
        text,
        line,
        at,
        want,
    }
}

fn cases() -> Vec<Case> {
    let x = |step, at, want| case(XHEAD, step, at, want);
    let p = |step, at, want| case(PHEAD, step, at, want);
    let w = |step, at, want| case(WHEAD, step, at, want);
    let m = |step, at, want| case(MHEAD, step, at, want);
    let top = "load: {users: [{count: 1}]}\nsessions: [{name: a, steps: [connect]}]\n";
    let mtop = |section: &str| {
        format!("servers: [{{host: 127.0.0.1, port: 1883, protocol: mqtt}}]\n{section}{top}")
    };
    let xtop = |section: &str| {
        format!("servers: [{{host: 127.0.0.1, port: 5222, protocol: xmpp}}]\n{section}{top}")
    };
    vec![
        // Step kinds against the servers' protocol.
        case(HHEAD, "xmpp: close", "xmpp", "an xmpp step needs servers with `protocol: xmpp`; these speak http"),
        case(HHEAD, "sql: SELECT 1", "sql", "a sql step needs servers with `protocol: pgsql`; these speak http"),
        x("ws: ping", "ws", "a ws step needs servers with `protocol: websocket`; these speak xmpp (use xmpp steps)"),
        p("xmpp: close", "xmpp", "an xmpp step needs servers with `protocol: xmpp`; these speak pgsql (use sql steps)"),
        w("sql: SELECT 1", "sql", "these speak websocket (use ws steps)"),
        x("request: GET /", "request", "request: the servers speak xmpp; use xmpp steps"),
        p("send: x", "send", "send: raw TCP steps need servers with protocol: raw (these speak pgsql)"),
        // xmpp steps.
        x("xmpp: presence:initail", "presence", "xmpp: unknown type 'presence:initail'; expected one of presence:initial, presence:final"),
        x("xmpp: {type: presence:initial, to: online}", "to:", "'to' does not apply to xmpp presence:initial; it takes type, ack, name"),
        x("xmpp: {type: roster:get, size: 3}", "size", "'size' does not apply to xmpp roster:get"),
        x("xmpp: {type: chat, size: 1, show: away}", "show", "'show' does not apply to xmpp chat; it takes type, to, size, text, ack, name"),
        x("xmpp: {type: chat, size: 1, body: x}", "body", "unknown key 'body' in xmpp; expected one of type, to, size, text, show, status, alias, data, ack, name"),
        x("xmpp: {to: online}", "{", "xmpp is missing 'type'"),
        x("xmpp: {type: chat, size: 1, ack: global}", "global", "ack: Tsung's `global` is a barrier"),
        x("xmpp: {type: chat, size: 1, ack: global}", "global", "use `reply` (wait for the matching reply) or `no_ack`"),
        x("xmpp: {type: chat, size: 1, ack: always}", "always", "ack: expected one of no_ack, local, reply"),
        x("xmpp: {type: chat, size: 1, text: hi}", "hi}", "xmpp chat takes 'size' or 'text', not both"),
        x("xmpp: {type: chat, to: online}", "{", "xmpp chat needs 'size' (body bytes, at least 1) or 'text'"),
        x("xmpp: chat", "chat", "write it as a mapping: {type: chat, size: 64}"),
        x("xmpp: {type: chat, size: 0}", "0", "size: expected a positive integer"),
        x("xmpp: {type: chat, size: 1, to: everyone}", "everyone", "to: expected one of online, offline, random, unique, previous"),
        x("xmpp: {type: presence:broadcast, show: busy}", "busy", "show: expected one of chat, away, xa, dnd"),
        x("xmpp: {type: roster:rename, to: random}", "{", "xmpp roster:rename is missing 'alias'"),
        x("xmpp: roster:rename", "roster", "write it as a mapping: {type: roster:rename, alias: friend}"),
        x("xmpp: {type: raw}", "{", "xmpp raw is missing 'data'"),
        x("xmpp: {type: chat, text: \"hi ${who}\"}", "\"hi", "undefined variable '${who}'"),
        x("xmpp: {type: raw, data: \"<x>${who}</x>\"}", "\"<x>", "undefined variable '${who}'"),
        x("xmpp: [close]", "[", "xmpp: expected a mapping"),
        // sql steps.
        p("sql: \"SELECT ${undefined}\"", "\"SELECT", "undefined variable '${undefined}'"),
        p("sql: {query: \"SELECT $1\", params: [\"${nope}\"]}", "\"${nope}", "undefined variable '${nope}'"),
        p("sql: {query: x, args: []}", "args", "unknown key 'args' in sql; expected one of query, params, prepare, name"),
        p("sql: {query: x, prepare: maybe}", "maybe", "prepare: expected true or false"),
        p("sql: {query: x, params: x}", "x}", "params: expected a list"),
        p("sql: {params: [1]}", "{", "sql is missing 'query'"),
        p("sql: \" \"", "\"", "query: expected an SQL statement, got nothing"),
        p("sql: {query: x, name: \"\"}", "\"\"", "name: expected a non-empty name"),
        // ws steps.
        w("ws: pong", "pong", "ws: expected ping, close, {send: TEXT, binary, reply, name}"),
        w("ws: {send: x, bogus: 1}", "bogus", "unknown key 'bogus' in ws; expected one of send, binary, reply, ping, close, name"),
        w("ws: {send: x, ping: true}", "true", "ws takes one of send, ping, close ('ping' is a second one)"),
        w("ws: {ping: true, binary: true}", "binary", "'binary' applies to send only, not to a ws ping"),
        w("ws: {close: yes}", "yes", "close: expected true"),
        w("ws: {send: x, reply: maybe}", "maybe", "reply: expected true or false"),
        w("ws: {name: x}", "{", "ws: expected ping, close"),
        w("ws: {send: \"${later}\"}", "\"${later}", "undefined variable '${later}'"),
        // mqtt steps.
        case(HHEAD, "mqtt: ping", "mqtt", "an mqtt step needs servers with `protocol: mqtt`; these speak http"),
        m("ws: ping", "ws", "these speak mqtt (use mqtt steps)"),
        m("mqtt: pong", "pong", "mqtt: expected connect, ping, disconnect"),
        m("mqtt: {publish: \"a/#\"}", "\"a/#", "publish: '+' and '#' are wildcards of subscriptions, not of a topic published to"),
        m("mqtt: {subscribe: \"a/b#\"}", "\"a/b#", "subscribe: a wildcard is a whole level: '+' anywhere, '#' only last (got 'b#')"),
        m("mqtt: {subscribe: \"#/a\"}", "\"#/a", "a wildcard is a whole level"),
        m("mqtt: {subscribe: \"\"}", "\"\"", "subscribe: expected a topic, got nothing"),
        m("mqtt: {publish: a, qos: 3}", "3}", "qos: expected 0, 1 or 2"),
        m("mqtt: {publish: a, size: 1048577}", "1048577", "size: expected bytes, 0..=1048576"),
        m("mqtt: {publish: a, size: 1, text: x}", "x}", "publish takes size or text, not both"),
        m("mqtt: {subscribe: a, retain: true}", "retain", "'retain' does not apply to an mqtt subscribe"),
        m("mqtt: {publish: a, subscribe: b}", "b}", "an mqtt step takes one of connect, publish, subscribe, unsubscribe, ping, wait, disconnect ('subscribe' is a second one)"),
        m("mqtt: {wait: 5s}", "5s", "wait: expected {messages: N, timeout: DURATION}"),
        m("mqtt: {wait: {messages: 0}}", "0}", "messages: expected a positive integer"),
        m("mqtt: {wait: {messages: 1, timeout: 2d}}", "2d", "timeout: expected more than 0, at most 24h"),
        m("mqtt: {connect: {keep_alive: 1.5s}}", "1.5s", "keep_alive: whole seconds, 0s..=65535s (0s: off)"),
        m("mqtt: {connect: {will: {payload: x}}}", "{payload", "will is missing 'topic'"),
        m("mqtt: {connect: {version: 5}}", "version", "unknown key 'version' in connect"),
        m("mqtt: {publish: \"t/${nope}\"}", "\"t/", "undefined variable '${nope}'"),
        file(mtop("mqtt: {version: 4.0}\n"), 2, "4.0", "version: expected 3.1.1 or 5"),
        file(mtop("mqtt: {keep_alive: 70000s}\n"), 2, "70000s", "keep_alive: whole seconds"),
        file(mtop("mqtt: {client_id: x, host: h}\n"), 2, "host", "unknown key 'host' in mqtt; expected one of client_id"),
        // ldap steps.
        case(HHEAD, "ldap: unbind", "ldap", "an ldap step needs servers with `protocol: ldap`; these speak http"),
        case(LHEAD, "ldap: bind", "bind", "ldap: expected unbind, {bind: DN, password}"),
        case(LHEAD, "ldap: {bind: dn, filter: x}", "filter", "unknown key 'filter' in ldap bind; expected one of bind, name, password"),
        case(LHEAD, "ldap: {search: b, scope: tree}", "tree", "scope: expected base, one or sub"),
        case(LHEAD, "ldap: {search: b, size_limit: -1}", "-1", "size_limit: expected entries, 0 (no limit) to 2147483647"),
        case(LHEAD, "ldap: {add: dn}", "{", "ldap add is missing 'attrs'"),
        case(LHEAD, "ldap: {add: dn, attrs: {cn: []}}", "[]", "cn: an added attribute needs a value"),
        case(LHEAD, "ldap: {modify: dn, changes: [{replace: sn, add: cn}]}", "{replace", "a change takes exactly one of add, delete, replace"),
        case(LHEAD, "ldap: {modify: dn, changes: [{add: cn}]}", "{add", "an add change needs values"),
        case(LHEAD, "ldap: {delete: dn, search: x}", "dn,", "an ldap step takes one of bind, search, add, modify, delete, unbind ('delete' is a second one)"),
        case(LHEAD, "ldap: {delete: \"uid=${who}\"}", "\"uid", "undefined variable '${who}'"),
        file(
            "servers: [{host: 127.0.0.1, port: 3306, protocol: mysql, tls: {sslmode: require}}]\nmysql: {user: u}\nload: {users: [{count: 1}]}\nsessions: [{name: a, steps: [connect]}]\n".into(),
            1, "require}", "tls.sslmode: only for protocol pgsql",
        ),
        // amqp steps.
        case(HHEAD, "amqp: close", "amqp", "an amqp step needs servers with `protocol: amqp`; these speak http"),
        case(AHEAD, "amqp: open", "open", "amqp: expected close or a mapping with one of channel_open"),
        case(AHEAD, "amqp: {channel_open: 0}", "0}", "channel: expected a number, 1 to 65535"),
        case(AHEAD, "amqp: {publish: x, channel: 65536}", "65536", "channel: expected a number, 1 to 65535, or a template such as \"${ch}\""),
        case(AHEAD, "amqp: {qos: 5, channel: two}", "two", "channel: expected a number, 1 to 65535, or a template"),
        case(AHEAD, "amqp: {channel_close: auto}", "auto", "channel: expected a number, 1 to 65535, or a template"),
        case(AHEAD, "amqp: {confirm_select: [1]}", "[1]", "channel: expected a number"),
        case(AHEAD, "amqp: {channel_open: \"${nope}\"}", "\"${nope}", "undefined variable '${nope}'"),
        case(AHEAD, "amqp: {consume: q, channel: \"${user_id}${session}${session}${session}${session}${session}${session}${session}${session}${session}${session}${session}${session}${session}${session}${session}${session}${session}${session}${session}${session}${session}${session}${session}${session}${session}${session}${session}${session}\"}", "\"${user_id}", "channel: at most 255 bytes"),
        case(AHEAD, "amqp: {exchange_declare: x, type: fast}", "fast", "type: expected direct, fanout, topic or headers"),
        case(AHEAD, "amqp: {queue_bind: q}", "{", "amqp queue_bind is missing 'exchange'"),
        case(AHEAD, "amqp: {qos: -1}", "-1", "qos: expected a prefetch count, 0 (no limit) to 65535"),
        case(AHEAD, "amqp: {qos: 5, ack: true}", "ack", "unknown key 'ack' in amqp qos"),
        case(AHEAD, "amqp: {publish: x, size: 1, text: y}", "y}", "publish takes size or text, not both"),
        case(AHEAD, "amqp: {wait_confirms: 0s}", "0s", "wait_confirms: expected more than 0, at most 24h"),
        case(AHEAD, "amqp: {publish: x, consume: q}", "x,", "an amqp step takes one action ('publish' is a second one)"),
        // file steps (issue 32).
        case(FHEAD, "file: {mkdir: /abs}", "/abs", "mkdir: an absolute path: file steps work under the files root"),
        case(FHEAD, "file: {read: a/../../b}", "a/..", "read: '..' would leave the files root"),
        case(FHEAD, "file: {open: f}", "{open", "file open is missing 'mode' (read or write)"),
        case(FHEAD, "file: {open: f, mode: append}", "append", "mode: expected read or write"),
        case(FHEAD, "file: {write: f, size: 67108865}", "67108865", "size: expected bytes, 0 to 67108864 (64 MiB)"),
        case(FHEAD, "file: {read_chunk: 0}", "0}", "read_chunk: expected bytes, 1 to 67108864"),
        case(FHEAD, "file: {mkdir: a, delete: b}", "b}", "a file step takes one action ('delete' is a second one after 'mkdir')"),
        case(FHEAD, "file: {stat: a, size: 3}", "3}", "'size' does not apply to a file stat"),
        case(FHEAD, "file: {symlink: a}", "{symlink", "file symlink is missing 'link' (the link to make)"),
        case(FHEAD, "file: reopen", "reopen", "file: expected close or a mapping with one of mkdir, rmdir"),
        case(FHEAD, "file: {read: \"${nope}\"}", "\"${nope}", "undefined variable '${nope}'"),
        case(FHEAD, "file: {copy: a}", "copy", "unknown key 'copy' in file"),
        case(HHEAD, "file: close", "file", "a file step needs a top-level `files: {root: /dir}` section"),
        file(
            "files: {root: bench}\nload: {users: [{count: 1}]}\nsessions: [{name: a, steps: [{file: close}]}]\n".into(),
            1, "bench", "root: expected an absolute directory",
        ),
        // Sections against the servers' protocol.
        file(
            "servers: [{host: 127.0.0.1, port: 5222, protocol: xmpp}]\nload: {users: [{count: 1}]}\nsessions: [{name: a, steps: [xmpp: close]}]\n".into(),
            1, "xmpp}", "the servers speak xmpp: the scenario needs a top-level `xmpp:` section (domain and users: {first, last})",
        ),
        file(
            format!("servers:\n  - {{host: 127.0.0.1, port: 1, protocol: pgsql}}\n{top}"),
            2, "pgsql}", "the scenario needs a top-level `pgsql:` section (database and user)",
        ),
        file(
            format!("servers: [{{host: 127.0.0.1, port: 1}}]\nxmpp: {{domain: d, anonymous: true}}\n{top}"),
            2, "xmpp", "xmpp: settings for servers with `protocol: xmpp`; these speak http",
        ),
        file(
            format!("servers: [{{host: 127.0.0.1, port: 1, protocol: pgsql}}]\npgsql: {{database: d, user: u}}\nwebsocket: {{path: /}}\n{top}"),
            3, "websocket", "websocket: settings for servers with `protocol: websocket`; these speak pgsql",
        ),
        file(
            format!("servers: [{{host: 127.0.0.1, port: 1, protocol: raw}}]\npgsql: {{database: d, user: u}}\n{top}"),
            2, "pgsql", "pgsql: settings for servers with `protocol: pgsql`; these speak raw",
        ),
        // The xmpp section.
        file(xtop("xmpp: {users: {first: 1, last: 2}}\n"), 2, "{", "xmpp is missing 'domain'"),
        file(xtop("xmpp: {domain: d}\n"), 2, "{", "xmpp is missing 'users' ({first, last}: user N logs in as {username}N@{domain}); only `anonymous: true` and `login` do without"),
        // A login from variables (issue 32).
        file(xtop("xmpp: {domain: d, login: {user: u, password: p}, users: {first: 1, last: 2}}\n"), 2, "users", "users: with `login`, each user logs in as its session's variables say; numbered accounts do not apply"),
        file(xtop("xmpp: {domain: d, password: x, login: {user: u, password: p}}\n"), 2, "password: x", "password: with `login`"),
        file(xtop("xmpp: {domain: d, login: {password: p}}\n"), 2, "{password", "login is missing 'user'"),
        file(xtop("xmpp: {domain: d, login: {user: \"\", password: p}}\n"), 2, "\"\"", "user: expected a non-empty name"),
        file(xtop("xmpp: {domain: d, login: {user: \"${u\", password: p}}\n"), 2, "\"${u", "user: unterminated '${'; expected '${name}'"),
        file(xtop("xmpp: {domain: d, login: {user: u, password: \"${}\"}}\n"), 2, "\"${}", "password: '${}' names no variable"),
        file(xtop("xmpp: {domain: d, login: {user: u, password: p, resource: r}}\n"), 2, "resource", "unknown key 'resource' in login; expected one of user, password"),
        file(xtop("xmpp: {domain: d, anonymous: true, login: {user: u, password: p}}\n"), 2, "true", "anonymous: SASL ANONYMOUS logs in without a user and password; login gives them"),
        file(xtop("xmpp: {domain: d, login: {user: \"${who}\", password: p}}\n"), 4, "connect", "xmpp.login uses '${who}', which this session does not set before this step opens the connection (the login runs at the connect)"),
        file(
            "servers: [{host: 127.0.0.1, port: 5222, protocol: xmpp}]\nxmpp: {domain: d, login: {user: \"${who}\", password: p}}\nload: {users: [{count: 1}]}\nsessions: [{name: a, steps: [{xmpp: roster:get}, {set: {var: who, value: x}}, connect]}]\n".into(),
            4, "xmpp:", "xmpp.login uses '${who}', which this session does not set before this step opens the connection",
        ),
        file(
            "servers: [{host: 127.0.0.1, port: 5222, protocol: xmpp}]\nxmpp: {domain: d, login: {user: \"${user_id}\", password: p}}\nload: {users: [{count: 1}]}\nsessions: [{name: a, steps: [{xmpp: {type: chat, size: 5}}]}]\n".into(),
            4, "{type", "xmpp chat goes to another user (`to`), picked among the numbered accounts of xmpp.users; this scenario's users log in with xmpp.login, which numbers none",
        ),
        file(
            "servers: [{host: 127.0.0.1, port: 5222, protocol: xmpp}]\nxmpp: {domain: d, login: {user: \"${user_id}\", password: p}}\nload: {users: [{count: 1}]}\nsessions: [{name: a, steps: [{xmpp: {type: roster:add, to: offline}}]}]\n".into(),
            4, "offline", "xmpp roster:add goes to another user (`to`)",
        ),
        file(xtop("xmpp: {domain: d, users: {first: 5, last: 2}}\n"), 2, "{first", "users: first (5) must not exceed last (2)"),
        file(xtop("xmpp: {domain: d, users: {first: -1, last: 2}}\n"), 2, "-1", "first: expected an integer >= 0"),
        file(xtop("xmpp: {domain: d, users: {first: 1}}\n"), 2, "{first", "users is missing 'last'"),
        file(xtop("xmpp: {domain: d, anonymous: true, bosh: http-bind}\n"), 2, "http-bind", "bosh: expected the endpoint's HTTP path, e.g. /bosh"),
        file(xtop("xmpp: {domain: d, anonymous: true, bosh: /a b}\n"), 2, "/a b", "bosh: expected the endpoint's HTTP path"),
        file(xtop("xmpp: {domain: d, users: {first: 1, last: 2, step: 1}}\n"), 2, "step", "unknown key 'step' in users; expected one of first, last"),
        file(xtop("xmpp: {domain: d, host: h, users: {first: 1, last: 2}}\n"), 2, "host", "unknown key 'host' in xmpp; expected one of domain, users, username, password, resource, anonymous, register"),
        file(xtop("xmpp: {domain: d, anonymous: maybe}\n"), 2, "maybe", "anonymous: expected true or false"),
        file(xtop("xmpp: {domain: d, anonymous: true, register: true}\n"), 2, "true}", "register: in-band registration creates accounts to log in to; anonymous logins have none"),
        file(xtop("xmpp: {domain: \"\", anonymous: true}\n"), 2, "\"\"", "domain: expected a non-empty name"),
        file(xtop("xmpp: [domain]\n"), 2, "[", "xmpp: expected a mapping"),
        // The pgsql and websocket sections.
        file(
            format!("servers: [{{host: 127.0.0.1, port: 1, protocol: pgsql}}]\npgsql:\n  database: d\n  db: x\n{top}"),
            4, "db", "unknown key 'db' in pgsql; expected one of database, user, password",
        ),
        file(
            format!("servers: [{{host: 127.0.0.1, port: 1, protocol: pgsql}}]\npgsql: {{database: d}}\n{top}"),
            2, "{", "pgsql is missing 'user'",
        ),
        file(
            format!("servers: [{{host: 127.0.0.1, port: 1, protocol: websocket}}]\nwebsocket: {{path: chat}}\n{top}"),
            2, "chat", "path: expected an absolute path starting with '/'",
        ),
        file(
            format!("servers: [{{host: 127.0.0.1, port: 1, protocol: websocket}}]\nwebsocket: {{path: /, protocol: chat}}\n{top}"),
            2, "protocol", "unknown key 'protocol' in websocket; expected one of path, subprotocol, origin",
        ),
        // Servers.
        file(
            format!("servers: [{{host: 127.0.0.1, port: 1, protocol: smtp}}]\n{top}"),
            1, "smtp", "protocol: expected one of http, raw (or tcp), xmpp, pgsql, websocket (or ws), mqtt, ldap",
        ),
        file(
            format!("servers:\n  - {{host: 127.0.0.1, port: 1, protocol: xmpp}}\n  - {{host: 127.0.0.1, port: 2}}\nxmpp: {{domain: d, anonymous: true}}\n{top}"),
            3, "{", "every server of a scenario speaks the same one (this one speaks http, the first xmpp)",
        ),
    ]
}

#[test]
fn each_bad_snippet_gives_a_located_error() {
    let mut wrong = Vec::new();
    for Case {
        text,
        line,
        at,
        want,
    } in cases()
    {
        let Some(line_text) = text.lines().nth(line - 1) else {
            wrong.push(format!("{want}: the text has no line {line}"));
            continue;
        };
        let Some(byte) = line_text.find(at) else {
            wrong.push(format!("{want}: {at:?} not on line {line}: {line_text:?}"));
            continue;
        };
        let col = line_text[..byte].chars().count() + 1;
        let Err(errs) = parse_str(&text, "t.yaml") else {
            wrong.push(format!("{want}: accepted:\n{text}"));
            continue;
        };
        match errs.iter().find(|e| e.message.contains(want)) {
            None => wrong.push(format!(
                "no error containing {want:?}; got\n{}",
                show(&errs)
            )),
            Some(e) if (e.file.as_str(), e.line, e.column) != ("t.yaml", line, col) => {
                wrong.push(format!("{want}: want t.yaml:{line}:{col}, got {e}"))
            }
            Some(_) => {}
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

#[test]
fn all_errors_of_a_file_are_reported() {
    let text = format!(
        "{XHEAD}      - xmpp: {{type: chat}}\n      - sql: SELECT 1\n      - xmpp: {{type: raw, data: \"${{a}}\"}}\n      - ws: ping\n      - xmpp: {{type: close, ack: global}}\n"
    );
    let errs = parse_str(&text, "t.yaml").unwrap_err();
    let got: Vec<(usize, usize)> = errs.iter().map(|e| (e.line, e.column)).collect();
    assert_eq!(
        got,
        [(7, 15), (8, 9), (9, 33), (10, 9), (11, 34)],
        "{}",
        show(&errs)
    );
    assert!(errs[2].message.contains("undefined variable '${a}'"));
}

#[test]
fn an_unknown_protocol_is_one_error_not_one_per_step() {
    let text = "servers: [{host: 127.0.0.1, port: 5222, protocol: jabber}]\n\
                xmpp: {domain: d, anonymous: true}\n\
                load: {users: [{count: 1}]}\n\
                sessions: [{name: a, steps: [xmpp: presence:initial, xmpp: close]}]\n";
    let errs = parse_str(text, "t.yaml").unwrap_err();
    assert_eq!(errs.len(), 1, "{}", show(&errs));
    assert_eq!((errs[0].line, errs[0].column), (1, 51), "{}", errs[0]);
}

#[test]
fn variables_defined_earlier_are_accepted_in_every_template_field() {
    let text = format!(
        "{XHEAD}      - set: {{var: who, value: bob}}\n      - xmpp: {{type: chat, text: \"hi ${{who}}\"}}\n      - xmpp: {{type: raw, data: \"<x>${{who}}</x>\"}}\n"
    );
    let s = parse(&text);
    assert_eq!(s.sessions[0].steps.len(), 3);
    let text = format!(
        "{PHEAD}      - extract: {{var: id, regex: \"(.)\"}}\n      - sql: {{query: \"SELECT ${{id}}\", params: [\"${{id}}\", \"${{session}}\"]}}\n"
    );
    parse(&text);
    let text =
        format!("{WHEAD}      - set: {{var: m, value: x}}\n      - ws: {{send: \"${{m}}\"}}\n");
    parse(&text);
}

/// The examples of docs/scenario.md's "XMPP, PostgreSQL and WebSocket" section and the MQTT,
/// LDAP and AMQP ones after it stay valid (and round-trip).
#[test]
fn doc_examples_validate() {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/scenario.md");
    let doc = std::fs::read_to_string(path).unwrap();
    let section = doc
        .split("### XMPP, PostgreSQL and WebSocket\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("docs/scenario.md has the section");
    let blocks: Vec<&str> = section
        .split("```yaml\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .collect();
    let protocols: Vec<Option<Protocol>> = blocks
        .iter()
        .map(|b| {
            let s = parse_str(b, "scenario.md").unwrap_or_else(|e| panic!("{}\n{b}", show(&e)));
            round_trip(&s);
            s.servers.first().map(|x| x.protocol)
        })
        .collect();
    assert_eq!(
        protocols,
        [
            Some(Protocol::Xmpp),
            // Accounts from a file (`login`).
            Some(Protocol::Xmpp),
            Some(Protocol::Pgsql),
            Some(Protocol::WebSocket),
            Some(Protocol::Mysql),
            Some(Protocol::Mqtt),
            Some(Protocol::Ldap),
            Some(Protocol::Amqp),
            // File steps: no server.
            None
        ]
    );
}

#[test]
fn bosh_over_starttls_is_refused_at_compile() {
    let yaml = "servers: [{host: 127.0.0.1, port: 5443, protocol: xmpp, tls: {starttls: true}}]\n\
                xmpp: {domain: localhost, anonymous: true, bosh: /bosh}\n\
                load: {phases: [{duration: 1s, arrival_rate: 1}]}\n\
                sessions:\n  - name: s\n    steps:\n      - xmpp: presence:initial\n";
    let sc = parse_str(yaml, "t.yaml").expect("parses");
    let err = headroom_scenario::compile(&sc, std::path::Path::new(".")).unwrap_err();
    assert!(err.contains("STARTTLS does not apply to BOSH"), "{err}");
    // BOSH over https, and without tls: they compile.
    for t in [", tls: true}]", "}]"] {
        let other = yaml.replace(", tls: {starttls: true}}]", t);
        let sc = parse_str(&other, "t.yaml").expect("parses");
        headroom_scenario::compile(&sc, std::path::Path::new("."))
            .unwrap_or_else(|e| panic!("{t}: {e}"));
    }
}

/// Issue 32: a request's `oauth` parses to exact values, round-trips (defaults left out) and
/// compiles to templates over the session's variables.
#[test]
fn oauth_requests_parse_round_trip_and_compile() {
    let text = "load: {users: [{count: 1}]}\nsessions:\n  - name: a\n    steps:\n\
                \x20     - set: {var: t, value: x}\n\
                \x20     - request: {path: /a, oauth: {consumer_key: k, consumer_secret: s}}\n\
                \x20     - request: {path: /b, oauth: {consumer_key: \"${t}k\", consumer_secret: \"\", token: \"${t}\", token_secret: ts, method: PLAINTEXT}}\n";
    let s = parse(text);
    let req = |i: usize| match &s.sessions[0].steps[i] {
        Step::Request(r) => r.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        req(1).oauth,
        Some(Box::new(OAuth {
            consumer_key: "k".into(),
            consumer_secret: "s".into(),
            token: String::new(),
            token_secret: String::new(),
            method: OAuthMethod::HmacSha1
        }))
    );
    assert_eq!(
        req(2).oauth,
        Some(Box::new(OAuth {
            consumer_key: "${t}k".into(),
            consumer_secret: String::new(),
            token: "${t}".into(),
            token_secret: "ts".into(),
            method: OAuthMethod::Plaintext
        }))
    );
    let yaml = round_trip(&s);
    assert!(
        yaml.contains("oauth: {consumer_key: k, consumer_secret: s}\n"),
        "{yaml}"
    );
    assert!(yaml.contains("method: PLAINTEXT"), "{yaml}");
    let c = compile(&s, std::path::Path::new(".")).unwrap();
    let SessionBody::Ops { ops, .. } = &c.workload.sessions[0].body else {
        panic!()
    };
    let Op::Request(r) = &ops[2] else {
        panic!("{:?}", ops[2])
    };
    let o = r.oauth.as_deref().expect("compiled oauth");
    let slot = c.workload.vars.iter().position(|v| v == "t").unwrap() as u16;
    assert_eq!(
        o.consumer_key,
        Template(vec![Piece::Var(slot), Piece::Lit("k".into())])
    );
    assert_eq!(o.token, Template(vec![Piece::Var(slot)]));
    assert_eq!(o.method, OAuthMethod::Plaintext);
}

/// The `oauth` steps shown in docs/scenario.md are valid steps.
#[test]
fn the_docs_oauth_steps_are_valid() {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/scenario.md");
    let doc = std::fs::read_to_string(path).unwrap();
    let block = doc
        .split("`oauth:` signs the request")
        .nth(1)
        .and_then(|rest| rest.split("```yaml\n").nth(1))
        .and_then(|b| b.split("```").next())
        .expect("docs/scenario.md shows oauth steps");
    let steps: String = block.lines().map(|l| format!("      {l}\n")).collect();
    let s = parse(&format!(
        "load: {{users: [{{count: 1}}]}}\nsessions:\n  - name: a\n    steps:\n{steps}"
    ));
    let signed = s.sessions[0]
        .steps
        .iter()
        .filter(|st| matches!(st, Step::Request(r) if r.oauth.is_some()))
        .count();
    assert_eq!(signed, 2);
}

/// Issue 32: `file` steps parse to exact actions, round-trip (defaults left out) and compile
/// with the root; a scenario of file steps only needs no server.
#[test]
fn file_steps_parse_round_trip_and_compile() {
    let text = "files: {root: /srv/bench}\nload: {users: [{count: 1}]}\nsessions:\n  - name: a\n    steps:\n\
                \x20     - file: {mkdir: \"u${user_id}\"}\n\
                \x20     - file: {write: \"u${user_id}/f\", size: 0, name: empty}\n\
                \x20     - file: {write: \"u${user_id}/g\"}\n\
                \x20     - file: {open: \"u${user_id}/g\", mode: read}\n\
                \x20     - file: {read_chunk: 4096}\n\
                \x20     - file: close\n\
                \x20     - file: {close: true, name: shut}\n\
                \x20     - file: {symlink: \"u${user_id}/g\", link: \"u${user_id}/l\"}\n";
    let s = parse(text);
    assert_eq!(s.file_root.as_deref(), Some("/srv/bench"));
    let actions: Vec<(&str, &FileAction<String>)> = s.sessions[0]
        .steps
        .iter()
        .map(|st| match st {
            Step::File(f) => (f.name.as_str(), &f.action),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        actions,
        [
            ("file:mkdir", &FileAction::MakeDir("u${user_id}".into())),
            (
                "empty",
                &FileAction::Write {
                    path: "u${user_id}/f".into(),
                    size: 0
                }
            ),
            (
                "file:write",
                &FileAction::Write {
                    path: "u${user_id}/g".into(),
                    size: 1024
                }
            ),
            (
                "file:open",
                &FileAction::Open {
                    path: "u${user_id}/g".into(),
                    write: false
                }
            ),
            ("file:read_chunk", &FileAction::ReadChunk(4096)),
            ("file:close", &FileAction::Close),
            ("shut", &FileAction::Close),
            (
                "file:symlink",
                &FileAction::Symlink {
                    target: "u${user_id}/g".into(),
                    link: "u${user_id}/l".into()
                }
            ),
        ]
    );
    let yaml = round_trip(&s);
    assert!(yaml.contains("files: {root: /srv/bench}\n"), "{yaml}");
    assert!(yaml.contains("- file: close\n"), "{yaml}");
    let c = compile(&s, std::path::Path::new(".")).unwrap();
    assert_eq!(c.workload.file_root.as_deref(), Some("/srv/bench"));
    assert!(c.workload.has_file_ops() && !c.workload.uses_network());
    let SessionBody::Ops { ops, .. } = &c.workload.sessions[0].body else {
        panic!()
    };
    assert!(ops.iter().all(|o| matches!(o, Op::File(_))), "{ops:?}");
}
