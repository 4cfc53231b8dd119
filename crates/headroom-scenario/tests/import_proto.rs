//! The Tsung importer on jabber, pgsql, raw and websocket sessions (`tests/data/tsung/`): the
//! exact model each realistic file gives (connection settings, steps, names, acks,
//! destinations), its warnings at their line and column, and located errors for what cannot be
//! converted. `import_tsung` writes every converted scenario and parses it back before
//! returning it, so each successful conversion here is also a round trip through the YAML of
//! the xmpp, sql, ws and send steps.

use headroom_core::session::ExpectSpec;
use headroom_core::Distribution;
use headroom_scenario::model::*;
use headroom_scenario::{import_tsung, parse_str, to_yaml, Imported, ScenarioError};
use std::path::PathBuf;
use std::time::Duration;

const FIXTURES: &[&str] = &[
    "tsung/jabber-mix.xml",
    "tsung/pgsql-bench.xml",
    "tsung/raw-echo.xml",
    "tsung/websocket-chat.xml",
    "tsung-jabber.xml",
];

fn data(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn show(errs: &[ScenarioError]) -> String {
    errs.iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The conversion of fixture `name` (its file name is what warnings name).
fn convert(name: &str) -> (String, Imported) {
    let text = data(name);
    let file = name.rsplit('/').next().unwrap();
    let imp = import_tsung(&text, file).unwrap_or_else(|e| panic!("{}", show(&e)));
    (text, imp)
}

/// 1-based line and column (in characters) of the `n`-th (from 1) `needle` in `text`.
fn nth(text: &str, needle: &str, n: usize) -> (usize, usize) {
    let mut from = 0;
    let mut i = 0;
    for _ in 0..n {
        i = from
            + text[from..]
                .find(needle)
                .unwrap_or_else(|| panic!("{needle:?} #{n} not in fixture"));
        from = i + needle.len();
    }
    let before = &text[..i];
    let line = before.matches('\n').count() + 1;
    let col = before[before.rfind('\n').map_or(0, |k| k + 1)..]
        .chars()
        .count()
        + 1;
    (line, col)
}

fn at(text: &str, needle: &str) -> (usize, usize) {
    nth(text, needle, 1)
}

/// Warnings as (line, column, message).
fn located(imp: &Imported) -> Vec<(usize, usize, &str)> {
    imp.warnings
        .iter()
        .map(|w| (w.line, w.column, w.message.as_str()))
        .collect()
}

fn xmpp(action: XmppAction<String>, ack: XmppAck) -> Step {
    Step::Xmpp(Xmpp {
        name: format!("xmpp:{}", action.type_name()),
        action,
        ack,
    })
}

fn think(secs: u64) -> Step {
    Step::Think(Distribution::Constant(Duration::from_secs(secs)))
}

fn random_think(secs: u64) -> Step {
    Step::Think(Distribution::Exponential {
        mean: Duration::from_secs(secs),
    })
}

fn tx(name: &str, steps: Vec<Step>) -> Step {
    Step::Transaction {
        name: name.into(),
        steps,
    }
}

fn sql(query: &str, params: &[&str], prepare: bool) -> Step {
    Step::Sql(Sql {
        name: query
            .lines()
            .next()
            .unwrap()
            .trim()
            .chars()
            .take(40)
            .collect(),
        query: query.into(),
        params: params.iter().map(|p| p.to_string()).collect(),
        prepare,
    })
}

fn ws(data: &str, binary: bool, reply: bool) -> Step {
    Step::Ws(Ws {
        name: "ws:send".into(),
        action: WsAction::Message {
            binary,
            data: data.into(),
            reply,
        },
    })
}

fn chat(to: XmppDest, size: usize, text: Option<&str>) -> XmppAction<String> {
    XmppAction::Chat {
        to,
        size,
        text: text.map(String::from),
    }
}

fn one_phase(secs: u64, rate: f64) -> Load {
    Load {
        phases: vec![Phase {
            duration: Duration::from_secs(secs),
            rate: Rate::Fixed(rate),
            arrival: Arrival::Poisson,
            max_users: None,
        }],
        users: vec![],
        stages: Vec::new(),
        once: Vec::new(),
    }
}

fn server(port: u16, protocol: Protocol) -> Vec<Server> {
    vec![Server {
        http2: false,
        host: "127.0.0.1".into(),
        port,
        protocol,
        tls: None,
    }]
}

// ---- jabber ---------------------------------------------------------------------------------

#[test]
fn jabber_mix_converts() {
    let (text, imp) = convert("tsung/jabber-mix.xml");
    let s = &imp.scenario;
    assert_eq!(s.name.as_deref(), Some("jabber-mix"));
    assert_eq!(s.servers, server(5222, Protocol::Xmpp));
    assert_eq!(s.load, one_phase(600, 50.0));
    // Users N in 1..=userid_max log in as userN@localhost with password passN, binding Tsung's
    // resource; the SASL PLAIN login of every session is implicit at connect.
    assert_eq!(
        s.link,
        LinkSpec::Xmpp(XmppSpec {
            domain: "localhost".into(),
            username: "user".into(),
            password: "pass".into(),
            first: 1,
            last: 20_000,
            login: None,
            resource: Some("tsung".into()),
            anonymous: false,
            register: false,
            bosh: None,
        })
    );
    let mix: Vec<(&str, f64)> = s
        .sessions
        .iter()
        .map(|x| (x.name.as_str(), x.weight))
        .collect();
    assert_eq!(mix, [("inactive", 20.0), ("idle", 60.0), ("active", 20.0)]);
    use XmppAck::*;
    use XmppAction::*;
    assert_eq!(
        s.sessions[0].steps,
        [Step::Connect, think(2), think(300), xmpp(Close, NoAck)]
    );
    assert_eq!(
        s.sessions[1].steps,
        [
            Step::Connect,
            xmpp(PresenceInitial, NoAck),
            tx("roster", vec![xmpp(RosterGet, Local)]),
            random_think(600),
            xmpp(PresenceFinal, NoAck),
            xmpp(Close, NoAck),
        ]
    );
    assert_eq!(
        s.sessions[2].steps,
        [
            Step::Connect,
            xmpp(PresenceInitial, NoAck),
            xmpp(RosterGet, Local),
            think(30),
            tx(
                "offline",
                vec![xmpp(chat(XmppDest::Offline, 56, None), NoAck)]
            ),
            think(30),
            Step::Loop(Loop {
                count: Some(10),
                condition: Some(Condition::While("more".into())),
                counter: None,
                steps: vec![
                    tx(
                        "online",
                        vec![xmpp(chat(XmppDest::Online, 16, None), NoAck)]
                    ),
                    random_think(30),
                    Step::Set {
                        var: "more".into(),
                        source: SetSource::RandomNumber { min: 0, max: 3 },
                    },
                ],
            }),
            xmpp(
                PresenceBroadcast {
                    show: Some("away".into()),
                    status: Some("lunch".into()),
                },
                NoAck
            ),
            xmpp(chat(XmppDest::Previous, 0, Some("back soon")), Reply),
            xmpp(PresenceFinal, NoAck),
            xmpp(Close, Local),
        ]
    );
    let login = "transaction 'authenticate' holds only requests of the XMPP login, which headroom \
                 runs when the connection opens, timed as xmpp:login: dropped";
    assert_eq!(
        located(&imp),
        [
            (5, 8, "attribute 'loglevel' of <tsung> is not honoured: logs, traces and statistics are headroom's own"),
            (6, 3, "<clients> is not honoured: headroom generates the load from where it runs (clients are headroom's own)"),
            (18, 5, "<option type=\"ts_jabber\" name=\"global_number\"> is not honoured: headroom has no barrier between users (ack=\"global\" becomes a wait for the request's own reply)"),
            (27, 7, "this think time no longer delays the rest of the XMPP login: headroom runs it all when the connection opens (timed as xmpp:login), before the think time"),
            (28, 7, login),
            (40, 7, login),
            (57, 7, login),
            (79, 37, "ack=\"global\" becomes ack: reply: Tsung's global ack is a barrier (each user waits until global_number users got there), headroom waits for this request's own reply (an iq's result; a message or presence is done once written)"),
            (79, 90, "attribute 'stamped' of <jabber> is not honoured: headroom does not stamp messages (a message's delivery is counted on the receiver's side)"),
        ]
    );
    // The positions are those of the elements and attributes.
    assert_eq!(at(&text, "<thinktime value=\"2\""), (27, 7));
    assert_eq!(nth(&text, "<transaction name=\"authenticate\"", 3), (57, 7));
    assert_eq!(at(&text, "ack=\"global\""), (79, 37));
    assert!(imp.warnings.iter().all(|w| w.file == "jabber-mix.xml"));
}

/// A Tsung file: one server on `port`, one phase, `options` and `sessions`. Line 7 is the
/// first line of `sessions`.
fn doc(port: u16, options: &str, sessions: &str) -> String {
    format!(
        "<?xml version=\"1.0\"?>\n<tsung>\n<servers><server host=\"127.0.0.1\" port=\"{port}\" type=\"tcp\"/></servers>\n\
         <load><arrivalphase phase=\"1\" duration=\"10\" unit=\"second\"><users arrivalrate=\"1\" unit=\"second\"/></arrivalphase></load>\n\
         <options>{options}</options>\n<sessions>\n{sessions}\n</sessions>\n</tsung>\n"
    )
}

/// One session `s` of `ts_KIND` whose body starts on line 8.
fn session(port: u16, kind: &str, body: &str) -> String {
    doc(
        port,
        "",
        &format!("<session name=\"s\" probability=\"100\" type=\"ts_{kind}\">\n{body}\n</session>"),
    )
}

fn import(xml: &str) -> Imported {
    import_tsung(xml, "t.xml").unwrap_or_else(|e| panic!("{}\n--- in:\n{xml}", show(&e)))
}

#[test]
fn jabber_defaults_login_variants_and_roster() {
    let xml = session(
        5222,
        "jabber",
        "<request><jabber type=\"connect\"/></request>\n\
         <request><jabber type=\"register\" ack=\"local\"/></request>\n\
         <request><jabber type=\"auth_sasl\" ack=\"local\"/></request>\n\
         <request><jabber type=\"connect\" ack=\"local\"/></request>\n\
         <request><jabber type=\"auth_sasl_bind\" resource=\"bench\" ack=\"local\"/></request>\n\
         <request><jabber type=\"auth_sasl_session\" ack=\"local\"/></request>\n\
         <request><jabber type=\"iq:roster:add\" destination=\"online\" group=\"Friends\" ack=\"local\"/></request>\n\
         <request><jabber type=\"presence:subscribe\"/></request>\n\
         <request><jabber type=\"iq:roster:rename\" ack=\"local\"/></request>\n\
         <request><jabber type=\"iq:roster:remove\" ack=\"local\"/></request>\n\
         <request><jabber type=\"presence:directed\" destination=\"random\"/></request>\n\
         <request><jabber type=\"presence:broadcast\"/></request>\n\
         <request subst=\"true\"><jabber data=\"&lt;iq type='get' id='p%%_session%%'&gt;&lt;ping xmlns='urn:xmpp:ping'/&gt;&lt;/iq&gt;\" type=\"raw\" ack=\"local\"/></request>\n\
         <request><jabber size=\"10\"/></request>\n\
         <request><jabber type=\"chat\" destination=\"unique\"/></request>",
    );
    let imp = import(&xml);
    // No ts_jabber option: Tsung's defaults (tsunguser, sesame, ids 1..10000); the bind's
    // resource; SASL PLAIN after an in-band registration.
    assert_eq!(
        imp.scenario.link,
        LinkSpec::Xmpp(XmppSpec {
            domain: "erlang-projects.org".into(),
            username: "tsunguser".into(),
            password: "sesame".into(),
            first: 1,
            last: 10_000,
            login: None,
            resource: Some("bench".into()),
            anonymous: false,
            register: true,
            bosh: None,
        })
    );
    use XmppAck::*;
    use XmppAction::*;
    use XmppDest::*;
    assert_eq!(
        imp.scenario.sessions[0].steps,
        [
            Step::Connect,
            xmpp(RosterAdd { to: Online }, Local),
            xmpp(PresenceSubscribe { to: Previous }, NoAck),
            xmpp(
                RosterRename {
                    to: Previous,
                    name: "Tsung Testuser".into()
                },
                Local
            ),
            xmpp(RosterRemove { to: Previous }, Local),
            xmpp(
                PresenceDirected {
                    to: Online,
                    show: Some("chat".into()),
                    status: Some("Available".into())
                },
                NoAck
            ),
            xmpp(
                PresenceBroadcast {
                    show: Some("chat".into()),
                    status: Some("Available".into())
                },
                NoAck
            ),
            xmpp(
                Raw("<iq type='get' id='p${session}'><ping xmlns='urn:xmpp:ping'/></iq>".into()),
                Local
            ),
            // Tsung's defaults: type chat, destination random, no_ack; size 0, an empty body.
            xmpp(chat(Random, 10, None), NoAck),
            xmpp(chat(Unique, 0, Some("")), NoAck),
        ]
    );
    let previous = |what: &str| {
        format!("{what} goes to 'previous' (in headroom: the destination of this user's previous chat); Tsung sends it to the contact of the session's last iq:roster:add")
    };
    let got: Vec<(usize, usize, String)> = imp
        .warnings
        .iter()
        .map(|w| (w.line, w.column, w.message.clone()))
        .collect();
    let at = |n| at(&xml, n);
    assert_eq!(
        got,
        [
            (7, 1, "no <option type=\"ts_jabber\" name=\"domain\">: users log in to Tsung's default domain erlang-projects.org".to_string()),
            (at("group=").0, at("group=").1, "attribute 'group' of <jabber> is not honoured: headroom's roster requests put the contact in no group".into()),
            (at("<jabber type=\"presence:subscribe\"").0, at("<jabber type=\"presence:subscribe\"").1, previous("presence:subscribe")),
            (at("<jabber type=\"iq:roster:rename\"").0, at("<jabber type=\"iq:roster:rename\"").1, previous("iq:roster:rename")),
            (at("<jabber type=\"iq:roster:remove\"").0, at("<jabber type=\"iq:roster:remove\"").1, previous("iq:roster:remove")),
            (at("destination=\"random\"").0, at("destination=\"random\"").1, "destination=\"random\" is not honoured: Tsung sends a directed presence to an online user, and so does the converted step".into()),
        ]
    );
    assert_eq!(at("group="), (14, 60));
}

/// Tsung's publish-subscribe requests (as in its `jabber_node.xml`) go out as the stanzas
/// `ts_jabber_common` writes: the node options of a create as data-form fields, a publish's
/// `size` bytes, a subscription naming the one account's JID.
#[test]
fn jabber_pubsub_requests_are_tsungs_stanzas() {
    let options = "<option type=\"ts_jabber\" name=\"pubsub_service\" value=\"ps.example\"/>\
                   <option type=\"ts_jabber\" name=\"userid_max\" value=\"1\"/>\
                   <option type=\"ts_jabber\" name=\"domain\" value=\"localhost\"/>\
                   <option type=\"ts_jabber\" name=\"username\" value=\"user\"/>";
    let body = "<request><jabber type=\"connect\"/></request>\n\
        <request><jabber type=\"auth_sasl\"/></request>\n\
        <request><jabber type='pubsub:create' ack=\"local\" node=\"/test\" node_type=\"flat\" data=\"[{'pubsub#access_model','open'},\n   {'pubsub#max_items', '0'}, {'pubsub#roles', [owner, 'publisher']}].\"/></request>\n\
        <request><jabber type='pubsub:create' ack=\"local\" node=\"mine\"/></request>\n\
        <request><jabber type='pubsub:subscribe' ack=\"local\" node=\"/test\"/></request>\n\
        <request><jabber type='pubsub:publish' size='9' ack=\"local\" node=\"/test\"/></request>";
    let xml = doc(
        5222,
        options,
        &format!("<session name=\"s\" probability=\"100\" type=\"ts_jabber\">\n{body}\n</session>"),
    );
    let imp = import(&xml);
    let raws: Vec<&str> = imp.scenario.sessions[0]
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Xmpp(Xmpp {
                action: XmppAction::Raw(d),
                ack,
                ..
            }) => {
                assert_eq!(*ack, XmppAck::Local);
                Some(d.as_str())
            }
            _ => None,
        })
        .collect();
    let head = "<iq to='ps.example' type='set' id='pubsub'><pubsub xmlns='http://jabber.org/protocol/pubsub'>";
    assert_eq!(
        raws,
        [
            format!("{head}<create node='/test' type='flat' /><configure> <x xmlns='jabber:x:data' type='submit'><field var='pubsub#access_model'><value>open</value></field><field var='pubsub#max_items'><value>0</value></field><field var='pubsub#roles'><value>owner</value><value>publisher</value></field></x></configure></pubsub></iq>"),
            format!("{head}<create node='/home/localhost/user1/mine'/><configure> <x xmlns='jabber:x:data' type='submit'></x></configure></pubsub></iq>"),
            format!("{head}<subscribe node='/test' jid='user1@localhost'/></pubsub></iq>"),
            format!("{head}<publish node='/test'><item><entry>xxxxxxxxx</entry></item></publish></pubsub></iq>"),
        ]
    );
    // With more than one account, the user's own JID cannot be written out.
    let many = xml.replace(
        "name=\"userid_max\" value=\"1\"",
        "name=\"userid_max\" value=\"5\"",
    );
    assert_ne!(many, xml);
    let errs = import_tsung(&many, "t.xml").unwrap_err();
    let line = |needle: &str| xml.lines().position(|l| l.contains(needle)).unwrap() + 1;
    for (needle, want) in [
        (
            "node=\"mine\"",
            "names a node under the user's own hierarchy",
        ),
        ("pubsub:subscribe", "sends the user's own JID"),
    ] {
        assert!(
            errs.iter()
                .any(|e| e.line == line(needle) && e.message.contains(want)),
            "{want}: {}",
            show(&errs)
        );
    }
    // A data term Tsung could not read either.
    let bad = xml.replace(
        "{'pubsub#roles', [owner, 'publisher']}].",
        "{'pubsub#roles'}]",
    );
    assert_ne!(bad, xml);
    let errs = import_tsung(&bad, "t.xml").unwrap_err();
    assert!(
        errs.iter()
            .any(|e| e.message.contains("data: expected the node options")),
        "{}",
        show(&errs)
    );
}

/// `<jabber type="starttls">` (Tsung's `jabber_starttls.xml` without its CSV users): the server
/// takes `tls: {starttls: true}`, unchecked as in Tsung, and the request joins the login.
#[test]
fn jabber_starttls_becomes_the_servers_tls() {
    let xml = session(
        5222,
        "jabber",
        "<request><jabber type=\"connect\" ack=\"local\"/></request>\n\
         <request><jabber type=\"starttls\" ack=\"bidi_ack\"/></request>\n\
         <request><jabber type=\"connect\" ack=\"local\"/></request>\n\
         <request><jabber type=\"auth_sasl\" ack=\"local\"/></request>\n\
         <request><jabber type=\"iq:roster:get\" ack=\"local\"/></request>",
    );
    let imp = import(&xml);
    let tls = imp.scenario.servers[0].tls.clone();
    assert_eq!(
        tls,
        Some(ServerTls {
            insecure: true,
            starttls: true,
            ..Default::default()
        })
    );
    let steps = &imp.scenario.sessions[0].steps;
    assert_eq!(steps[0], Step::Connect);
    assert_eq!(steps.len(), 2, "{steps:?}");
    let line = xml.lines().position(|l| l.contains("starttls")).unwrap() + 1;
    assert!(
        imp.warnings
            .iter()
            .any(|w| w.line == line && w.message.contains("STARTTLS without certificate checks")),
        "{}",
        show(&imp.warnings)
    );
    // On a server that is TLS from the first byte, STARTTLS is an error.
    let ssl = xml.replace("type=\"tcp\"", "type=\"ssl\"");
    assert_ne!(ssl, xml);
    let errs = import_tsung(&ssl, "t.xml").unwrap_err();
    assert!(
        errs.iter()
            .any(|e| e.line == line && e.message.contains("STARTTLS on a server of type=\"ssl\"")),
        "{}",
        show(&errs)
    );
}

/// `<server type="bosh_ssl">`: XMPP over BOSH over https, without certificate checks as in
/// Tsung (a warning says so).
#[test]
fn jabber_bosh_ssl_is_bosh_over_https() {
    let xml = session(
        5281,
        "jabber",
        "<request><jabber type=\"connect\" ack=\"local\"/></request>\n\
         <request><jabber type=\"auth_sasl\" ack=\"local\"/></request>",
    )
    .replace("type=\"tcp\"", "type=\"bosh_ssl\"");
    let imp = import(&xml);
    let tls = imp.scenario.servers[0].tls.clone();
    assert_eq!(
        tls,
        Some(ServerTls {
            insecure: true,
            ..Default::default()
        })
    );
    match &imp.scenario.link {
        LinkSpec::Xmpp(x) => assert!(x.bosh.is_some(), "{x:?}"),
        other => panic!("{other:?}"),
    }
    assert!(
        imp.warnings
            .iter()
            .any(|w| w.message.contains("TLS without certificate checks")),
        "{}",
        show(&imp.warnings)
    );
}

/// Issue 32: accounts from a CSV file, as Debian's `jabber_starttls.xml` has them —
/// `userid_max="0"`, a `<setdynvars sourcetype="file">` of the user and password, and the
/// connect's `<xmpp_authenticate>` over them — become `xmpp.login` over the two variables, which
/// read one row of the file.
#[test]
fn jabber_accounts_from_a_csv_file_become_the_login() {
    let xml = doc(
        5222,
        "<option type=\"ts_jabber\" name=\"domain\" value=\"localhost\"/>\
         <option type=\"ts_jabber\" name=\"userid_max\" value=\"0\"/>\
         <option type=\"ts_jabber\" name=\"random_from_fileid\" value=\"userdb\"/>\
         <option type=\"ts_jabber\" name=\"fileid_delimiter\" value=\";\"/>\
         <option name=\"file_server\" id=\"userdb\" value=\"users.csv\"/>",
        "<session name=\"s\" probability=\"100\" type=\"ts_jabber\">\n\
         <setdynvars sourcetype=\"file\" fileid=\"userdb\" delimiter=\",\" order=\"random\"><var name=\"username\"/><var name=\"password\"/></setdynvars>\n\
         <request subst=\"true\"><jabber type=\"connect\" ack=\"local\"><xmpp_authenticate username=\"%%_username%%\" passwd=\"%%_password%%\"/></jabber></request>\n\
         <request><jabber type=\"auth_sasl\" ack=\"local\"/></request>\n\
         <request><jabber type=\"iq:roster:get\" ack=\"local\"><xmpp_authenticate username=\"late\" passwd=\"x\"/></jabber></request>\n\
         </session>",
    );
    let imp = import(&xml);
    let LinkSpec::Xmpp(x) = &imp.scenario.link else {
        panic!("{:?}", imp.scenario.link)
    };
    assert_eq!(x.login, Some(XmppLogin::new("${username}", "${password}")));
    assert_eq!((x.first, x.last, x.domain.as_str()), (1, 1, "localhost"));
    let steps = &imp.scenario.sessions[0].steps;
    let csv = |column: usize, order| Step::Set {
        var: ["username", "password"][column].into(),
        source: SetSource::Csv {
            file: "users.csv".into(),
            column,
            order,
        },
    };
    assert_eq!(
        steps[..3],
        [
            csv(0, CsvOrder::Random),
            csv(1, CsvOrder::SameRow),
            Step::Connect
        ]
    );
    let w = located(&imp);
    let has = |line: usize, want: &str| {
        assert!(
            w.iter().any(|(l, _, m)| *l == line && m.contains(want)),
            "no warning at {line} saying {want:?}: {w:#?}"
        )
    };
    has(5, "name=\"random_from_fileid\"> is not honoured: Tsung names the random user a chat or roster request goes to from file 'users.csv' (fileid 'userdb'); no request of this file goes to another user");
    has(5, "name=\"fileid_delimiter\"> is not honoured");
    has(11, "<xmpp_authenticate> is not honoured: Tsung takes a session's account from its first <jabber> request only");
}

#[test]
fn jabber_anonymous_login_drops_registration() {
    let xml = doc(
        5222,
        "<option type=\"ts_jabber\" name=\"domain\" value=\"localhost\"/>",
        "<session name=\"a\" probability=\"50\" type=\"ts_jabber\">\n\
         <request><jabber type=\"connect\"/></request>\n\
         <request><jabber type=\"register\"/></request>\n\
         <request><jabber type=\"auth_sasl_anonymous\"/></request>\n\
         <request><jabber type=\"presence:broadcast\" show=\"dnd\" status=\"busy\"/></request>\n\
         </session>\n\
         <session name=\"b\" probability=\"50\" type=\"ts_jabber\">\n\
         <request><jabber type=\"auth_sasl_anonymous\"/></request>\n\
         <request><jabber type=\"presence:initial\"/></request>\n\
         </session>",
    );
    let imp = import(&xml);
    let LinkSpec::Xmpp(spec) = &imp.scenario.link else {
        panic!("{:?}", imp.scenario.link)
    };
    assert_eq!(
        (spec.domain.as_str(), spec.anonymous, spec.register),
        ("localhost", true, false)
    );
    let got: Vec<(usize, &str)> = imp
        .warnings
        .iter()
        .map(|w| (w.line, w.message.as_str()))
        .collect();
    assert_eq!(
        got,
        [(
            9,
            "this registration is dropped: the sessions log in anonymously, without an account"
        ),]
    );
    // Session b opens its connection on demand: the login runs before its first step.
    assert_eq!(
        imp.scenario.sessions[1].steps,
        [xmpp(XmppAction::PresenceInitial, XmppAck::NoAck)]
    );
    // With SASL PLAIN every session registers, with a warning at the first that does not.
    let plain = import(&xml.replace("auth_sasl_anonymous", "auth_sasl"));
    let LinkSpec::Xmpp(spec) = &plain.scenario.link else {
        panic!("{:?}", plain.scenario.link)
    };
    assert_eq!((spec.anonymous, spec.register), (false, true));
    assert_eq!(
        located(&plain),
        [(13, 1, "session 'a' registers its user, session 'b' does not: headroom registers before every login (an existing account counts as done)")]
    );
}

#[test]
fn tsung_jabber_fixture_converts_with_its_notes() {
    // The small file that was refused before the protocol work: no SASL request, no options.
    let (text, imp) = convert("tsung-jabber.xml");
    assert_eq!(
        imp.scenario.sessions[0].steps,
        [
            Step::Connect,
            think(2),
            xmpp(chat(XmppDest::Online, 16, None), XmppAck::NoAck)
        ]
    );
    assert_eq!(imp.scenario.servers, server(5222, Protocol::Xmpp));
    assert_eq!(
        imp.scenario.load,
        Load {
            phases: vec![Phase {
                duration: Duration::from_secs(60),
                rate: Rate::Fixed(0.5),
                arrival: Arrival::Poisson,
                max_users: None
            }],
            users: vec![],
            stages: Vec::new(),
            once: Vec::new(),
        }
    );
    let session = at(&text, "<session probability");
    assert_eq!(session, (11, 5));
    assert_eq!(
        located(&imp),
        [
            (2, 8, "attribute 'loglevel' of <tsung> is not honoured: logs, traces and statistics are headroom's own"),
            (3, 3, "<clients> is not honoured: headroom generates the load from where it runs (clients are headroom's own)"),
            (11, 5, "session 'jabber-example' does not authenticate (no auth_sasl or auth_sasl_anonymous): headroom logs every XMPP connection in at connect"),
            (11, 5, "no <option type=\"ts_jabber\" name=\"domain\">: users log in to Tsung's default domain erlang-projects.org"),
        ]
    );
}

// ---- pgsql ----------------------------------------------------------------------------------

#[test]
fn pgsql_bench_converts() {
    let (text, imp) = convert("tsung/pgsql-bench.xml");
    let s = &imp.scenario;
    assert_eq!(s.servers, server(5432, Protocol::Pgsql));
    assert_eq!(s.load, one_phase(600, 0.5));
    assert_eq!(
        s.link,
        LinkSpec::Pgsql(PgSpec {
            database: "bench".into(),
            user: "bench".into(),
            password: Some("sesame".into()),
        })
    );
    let by_id = "SELECT name FROM accounts WHERE id = $1";
    assert_eq!(
        s.sessions[0].steps,
        [
            // The startup and authentication run at the connect, inside Tsung's transaction.
            tx("connection", vec![Step::Connect]),
            think(2),
            tx("select", vec![sql("SELECT * FROM accounts;", &[], false)]),
            Step::Set {
                var: "id".into(),
                source: SetSource::RandomNumber { min: 1, max: 1000 },
            },
            Step::Loop(Loop {
                count: Some(5),
                condition: None,
                counter: Some(LoopCounter {
                    var: "i".into(),
                    start: 1,
                    step: 1,
                }),
                steps: vec![
                    // Parsed once (its own unit), executed in a loop: prepared.
                    sql(by_id, &["${id}"], true),
                    Step::Match(Match {
                        name: "match alice".into(),
                        status: None,
                        body: Some("alice".into()),
                        when_matched: false,
                        action: MatchAction::Abort,
                        max_loops: None,
                    }),
                    think(1),
                ],
            }),
            // The unnamed statement: parse, bind, execute, sync in one unit.
            sql(
                "INSERT INTO log (account, note) VALUES ($1, $2)",
                &["${id}", "seen"],
                false
            ),
            sql(
                "UPDATE accounts\n   SET seen = now()\n WHERE id = ${id};",
                &[],
                false
            ),
            Step::Close,
        ]
    );
    let Step::Sql(insert) = &s.sessions[0].steps[5] else {
        panic!()
    };
    assert_eq!(insert.name, "INSERT INTO log (account, note) VALUES (");
    assert_eq!(
        located(&imp),
        [
            (3, 8, "attribute 'loglevel' of <tsung> is not honoured: logs, traces and statistics are headroom's own"),
            (17, 7, "transaction 'authentication' holds only requests of the PostgreSQL startup and authentication, which headroom runs when the connection opens, timed as pgsql:startup: dropped"),
            (24, 16, "this parse of statement 'by_id' is no step of its own: headroom parses a statement when a bind executes it (a prepared one once per connection)"),
        ]
    );
    assert_eq!(at(&text, "<transaction name=\"authentication\""), (17, 7));
    assert_eq!(at(&text, "<pgsql type=\"parse\" name_prepared"), (24, 16));
}

#[test]
fn pgsql_statement_executed_once_is_not_prepared() {
    let xml = session(
        5432,
        "pgsql",
        "<request><pgsql type=\"connect\" database=\"d\" username=\"u\"/></request>\n\
         <request><pgsql type=\"parse\" name_prepared=\"one\">SELECT $1::int</pgsql></request>\n\
         <request><pgsql type=\"bind\" name_prepared=\"one\" parameters=\"7\" formats_results=\"binary\"/></request>\n\
         <request><pgsql type=\"execute\" max_rows=\"10\"/></request>\n\
         <request><pgsql type=\"sync\"/></request>",
    );
    let imp = import(&xml);
    assert_eq!(
        imp.scenario.link,
        LinkSpec::Pgsql(PgSpec {
            database: "d".into(),
            user: "u".into(),
            password: None
        })
    );
    assert_eq!(
        imp.scenario.sessions[0].steps,
        [Step::Connect, sql("SELECT $1::int", &["7"], false)]
    );
    let got: Vec<&str> = imp.warnings.iter().map(|w| w.message.as_str()).collect();
    assert_eq!(
        got,
        [
            "formats_results=\"binary\" is not honoured: headroom asks for text results",
            "max_rows=\"10\" is not honoured: headroom fetches every row",
        ]
    );
    assert_eq!(
        (imp.warnings[0].line, imp.warnings[1].line),
        (10, 11),
        "{}",
        show(&imp.warnings)
    );
}

// ---- raw ------------------------------------------------------------------------------------

#[test]
fn raw_echo_converts_and_round_trips() {
    let (text, imp) = convert("tsung/raw-echo.xml");
    let s = &imp.scenario;
    assert_eq!(s.servers, server(7000, Protocol::Raw));
    assert_eq!(s.link, LinkSpec::Plain);
    assert_eq!(s.load, one_phase(60, 10.0));
    let send = |name: &str, data: &str, expect: ExpectSpec| {
        Step::Send(Send {
            name: name.into(),
            data: data.into(),
            expect,
        })
    };
    assert_eq!(
        s.sessions[0].steps,
        [
            tx(
                "open",
                vec![
                    send(
                        "HELO example.org",
                        "HELO example.org\r\n",
                        ExpectSpec::Bytes(1)
                    ),
                    Step::Match(Match {
                        name: "match 250".into(),
                        status: None,
                        body: Some("250".into()),
                        when_matched: false,
                        action: MatchAction::Abort,
                        max_loops: None,
                    }),
                ]
            ),
            think(4),
            send("16 zero bytes", &"\0".repeat(16), ExpectSpec::Nothing),
            Step::Set {
                var: "key".into(),
                source: SetSource::RandomString { length: 8 },
            },
            send("GET ${key}", "GET ${key}\n", ExpectSpec::Nothing),
            tx("close", vec![send("QUIT", "QUIT\n", ExpectSpec::Nothing)]),
        ]
    );
    assert_eq!(
        located(&imp),
        [
            (2, 8, "attribute 'loglevel' of <tsung> is not honoured: logs, traces and statistics are headroom's own"),
            (16, 50, "ack=\"local\" becomes expect: {bytes: 1}: Tsung ends the request at the first packet, headroom at the reply's first byte; the reply's other bytes then count as the next reply or, when nothing is awaited, as a protocol error that closes the connection (give an expect that fits the reply)"),
        ]
    );
    assert_eq!(at(&text, "ack=\"local\""), (16, 50));
    // What is written reads back as the same scenario.
    let yaml = to_yaml(s);
    assert_eq!(&parse_str(&yaml, "raw.yaml").unwrap(), s, "{yaml}");
    assert!(yaml.contains("protocol: raw"), "{yaml}");
}

// ---- websocket ------------------------------------------------------------------------------

#[test]
fn websocket_chat_converts() {
    let (text, imp) = convert("tsung/websocket-chat.xml");
    let s = &imp.scenario;
    assert_eq!(s.servers, server(8080, Protocol::WebSocket));
    assert_eq!(s.load, one_phase(120, 1.0));
    assert_eq!(
        s.link,
        LinkSpec::WebSocket(WsSpec {
            path: "/chat".into(),
            subprotocol: Some("chat".into()),
            origin: Some("http://example.org".into()),
        })
    );
    assert_eq!(
        s.sessions[0].steps,
        [
            Step::Connect,
            ws(r#"{"user":"user", "password":"password"}"#, false, true),
            think(1),
            Step::Set {
                var: "text".into(),
                source: SetSource::RandomString { length: 12 },
            },
            tx("say", vec![ws(r#"{"say":"${text}"}"#, false, true)]),
            // Tsung's default frame is binary; no_ack does not wait for a message.
            ws("ping", true, false),
            Step::Ws(Ws {
                name: "ws:close".into(),
                action: WsAction::Close,
            }),
        ]
    );
    assert_eq!(
        located(&imp),
        [(2, 8, "attribute 'loglevel' of <tsung> is not honoured: logs, traces and statistics are headroom's own")]
    );
    assert_eq!(at(&text, "loglevel"), (2, 8));
}

// ---- errors ---------------------------------------------------------------------------------

#[test]
fn protocol_errors_name_what_and_where() {
    let jabber = |body: &str| session(5222, "jabber", body);
    let pg = |body: &str| {
        session(
            5432,
            "pgsql",
            &format!("<request><pgsql type=\"connect\" database=\"d\" username=\"u\"/></request>\n{body}"),
        )
    };
    let raw = |body: &str| session(7000, "raw", body);
    let websocket = |body: &str| {
        session(
            8080,
            "websocket",
            &format!("<request><websocket type=\"connect\"/></request>\n{body}"),
        )
    };
    let two = |a: &str, b: &str| {
        doc(
            5222,
            "",
            &format!(
                "<session name=\"a\" probability=\"50\" type=\"ts_{a}\">\n{}\n</session>\n<session name=\"b\" probability=\"50\" type=\"ts_{b}\">\n{}\n</session>",
                body_of(a),
                body_of(b)
            ),
        )
    };
    let cases: &[(String, &str, usize)] = &[
        (
            jabber("<request><jabber type=\"auth_sasl_external\" ack=\"local\"/></request>"),
            "'<jabber type=\"auth_sasl_external\">' is not supported: headroom logs in with SASL PLAIN or ANONYMOUS",
            8,
        ),
        (
            jabber("<request>\n<jabber type=\"muc:kick\" room=\"r\" nick=\"n\"/></request>"),
            "'<jabber type=\"muc:kick\">' is not supported: headroom converts muc:join, muc:chat, muc:nick and muc:exit",
            9,
        ),
        (
            jabber("<request><jabber type=\"starttls\"/></request>"),
            "<jabber type=\"starttls\"> before a connect",
            8,
        ),
        (
            session(5280, "raw", "<request><raw data=\"x\" ack=\"no_ack\"/></request>")
                .replace("type=\"tcp\"", "type=\"bosh\""),
            "type=\"bosh\" carries XMPP: only for ts_jabber sessions",
            3,
        ),
        (
            doc(5280, "<option name=\"bosh_path\" value=\"http-bind\"/>", "<session name=\"s\" probability=\"100\" type=\"ts_jabber\">\n<request><jabber type=\"connect\"/></request>\n</session>"),
            "bosh_path \"http-bind\": expected an HTTP path",
            5,
        ),
        (
            doc(
                5222,
                "",
                "<session name=\"a\" probability=\"50\" type=\"ts_jabber\">\n<request><jabber type=\"connect\"/></request><request><jabber type=\"starttls\"/></request><request><jabber type=\"close\"/></request>\n</session>\n\
                 <session name=\"b\" probability=\"50\" type=\"ts_jabber\">\n<request><jabber type=\"connect\"/></request><request><jabber type=\"close\"/></request>\n</session>",
            ),
            "session 'a' upgrades to TLS with STARTTLS, session 'b' does not",
            10,
        ),
        (
            jabber("<request><jabber type=\"connect\"><xmpp_authenticate username=\"a\" passwd=\"b\"/></jabber></request>\n<request><jabber type=\"chat\" size=\"5\" destination=\"online\"/></request>"),
            "'<jabber type=\"chat\">' goes to another (online) user, which headroom picks among numbered accounts; this session logs in with <xmpp_authenticate>, and such users are nobody's destination",
            9,
        ),
        (
            // Defined after its use (one defined nowhere is Tsung's text 'undefined').
            jabber("<request subst=\"true\"><jabber type=\"connect\"><xmpp_authenticate username=\"%%_who%%\" passwd=\"b\"/></jabber></request>\n<setdynvars sourcetype=\"random_string\" length=\"5\"><var name=\"who\"/></setdynvars>"),
            "variable 'who' is used before it is defined",
            8,
        ),
        (
            jabber("<request><jabber type=\"connect\"><xmpp_authenticate username=\"\" passwd=\"b\"/></jabber></request>"),
            "username=\"\": expected a user name",
            8,
        ),
        (
            jabber("<request><jabber type=\"connect\"><xmpp_authenticate username=\"a\"/></jabber></request>"),
            "<xmpp_authenticate> needs the attribute 'passwd'",
            8,
        ),
        (
            doc(
                5222,
                "",
                "<session name=\"a\" probability=\"50\" type=\"ts_jabber\">\n<request><jabber type=\"connect\"/></request>\n</session>\n\
                 <session name=\"b\" probability=\"50\" type=\"ts_jabber\">\n<request><jabber type=\"connect\"><xmpp_authenticate username=\"x\" passwd=\"y\"/></jabber></request>\n</session>",
            ),
            "session 'b' logs in as 'x' (<xmpp_authenticate>), session 'a' with a numbered account: headroom logs every connection of a scenario in the same way",
            11,
        ),
        (
            doc(5222, "<option type=\"ts_jabber\" name=\"random_from_fileid\" value=\"userdb\"/>", &jabber_session("s")),
            "'<option type=\"ts_jabber\" name=\"random_from_fileid\">' is not supported without <xmpp_authenticate>",
            5,
        ),
        (
            jabber("<request><jabber type=\"connect\" version=\"legacy\"/></request>"),
            "version=\"legacy\" is not supported",
            8,
        ),
        (
            jabber("<request><jabber type=\"chat\" ack=\"bidi_ack\"/></request>"),
            "ack=\"bidi_ack\": expected no_ack, local or global",
            8,
        ),
        (
            jabber("<request><jabber type=\"presence:broadcast\" show=\"busy\"/></request>"),
            "show=\"busy\": expected chat, away, xa or dnd (RFC 6121)",
            8,
        ),
        (
            session(8080, "websocket", "<request><websocket type=\"connect\" path=\"chat\"/></request>"),
            "path=\"chat\": expected an absolute path starting with '/'",
            8,
        ),
        (
            session(5432, "pgsql", "<request><pgsql type=\"connect\" database=\"\" username=\"u\"/></request>"),
            "database=\"\": expected a name",
            8,
        ),
        (
            session(7000, "raw", "<request><raw data=\"x\"/></request>").replace("host=\"127.0.0.1\"", "host=\"\""),
            "host=\"\": expected a host name",
            3,
        ),
        (
            jabber("<request><jabber type=\"chat\" destination=\"everyone\"/></request>"),
            "destination=\"everyone\": expected online, offline, random, unique or previous",
            8,
        ),
        (
            jabber("<request><dyn_variable name=\"x\" re=\"id='(\\d+)'\"/><jabber type=\"iq:roster:get\" ack=\"local\"/></request>"),
            "'<dyn_variable>' is not supported here: headroom does not keep XMPP replies for checks",
            8,
        ),
        (
            jabber("<request subst=\"true\"><jabber type=\"auth_sasl_bind\" resource=\"r%%_session%%\"/></request>"),
            "variables are not supported in connection settings",
            8,
        ),
        (
            doc(5222, "<option type=\"ts_jabber\" name=\"vhost_file\" value=\"vhosts\"/>", &jabber_session("s")),
            "'<option type=\"ts_jabber\" name=\"vhost_file\">' is not supported",
            5,
        ),
        (
            doc(5222, "<option type=\"ts_jabber\" name=\"userid_max\" value=\"0\"/>", &jabber_session("s")),
            "userid_max=\"0\": Tsung then takes each session's account from an <xmpp_authenticate> in its first <jabber> request, and the file has none",
            5,
        ),
        (
            doc(5222, "<option type=\"ts_jabber\" name=\"userid_max\" value=\"-3\"/>", &jabber_session("s")),
            "value=\"-3\": expected an integer >= 0",
            5,
        ),
        (
            doc(
                5222,
                "",
                "<session name=\"a\" probability=\"50\" type=\"ts_jabber\">\n<request><jabber type=\"auth_sasl\"/></request>\n</session>\n\
                 <session name=\"b\" probability=\"50\" type=\"ts_jabber\">\n<request><jabber type=\"auth_sasl_anonymous\"/></request>\n</session>",
            ),
            "session 'b' logs in with SASL ANONYMOUS, session 'a' with SASL PLAIN",
            10,
        ),
        (
            two("jabber", "pgsql"),
            "session 'b' is of type ts_pgsql, session 'a' of type ts_jabber: headroom runs one protocol per scenario",
            10,
        ),
        (
            two("http", "raw"),
            "session 'b' is of type ts_raw, session 'a' of type ts_http",
            10,
        ),
        (
            jabber("<request><raw data=\"x\"/></request>"),
            "'<raw>' belongs in a session of type ts_raw; this session is of type ts_jabber",
            8,
        ),
        (
            session(80, "http", "<request><websocket type=\"connect\"/></request>"),
            "'<websocket>' belongs in a session of type ts_websocket; this session is of type ts_http",
            8,
        ),
        (
            session(1234, "shell", "<request><shell cmd=\"ls\"/></request>"),
            "'<shell>' is not supported (headroom converts ts_http, ts_jabber, ts_pgsql, ts_raw, ts_websocket, ts_mqtt, ts_ldap, ts_mysql, ts_amqp and ts_fs sessions); session 's' is of type ts_shell",
            8,
        ),
        (
            session(5672, "amqp", "<request subst=\"true\"><amqp type=\"basic.publish\" channel=\"%%_ch%%x\"/></request>"),
            "channel=\"%%_ch%%x\": expected a channel number, 1 to 65535 (or, with subst=\"true\", a variable holding one)",
            8,
        ),
        (
            session(1883, "mqtt", "<request><mqtt type=\"publish\" topic=\"a/#\">x</mqtt></request>"),
            "topic=\"a/#\": '+' and '#' are wildcards of subscriptions, not of a topic published to",
            8,
        ),
        (
            session(1883, "mqtt", "<request><mqtt type=\"subscribe\" topic=\"a\" qos=\"3\"/></request>"),
            "qos=\"3\": expected 0, 1 or 2",
            8,
        ),
        (
            session(1883, "mqtt", "<request><mqtt type=\"retain\"/></request>"),
            "<mqtt type=\"retain\">: expected connect, publish, subscribe, unsubscribe, disconnect or waitForMessages",
            8,
        ),
        (
            session(5222, "jabber", "<jabber type=\"chat\"/>"),
            "'<jabber>' goes inside a <request>, not in <session>",
            8,
        ),
        (
            tsung_udp(),
            "'<server type=\"udp\">' is not supported: headroom speaks TCP only",
            3,
        ),
        (
            pg("<request><pgsql type=\"parse\">SELECT 1</pgsql></request>\n<request><pgsql type=\"sql\">SELECT 2</pgsql></request>"),
            "parse/bind/execute without a <pgsql type=\"sync\"> before <pgsql type=\"sql\">",
            9,
        ),
        (
            pg("<request><pgsql type=\"parse\">SELECT 1</pgsql></request>"),
            "parse/bind/execute without a <pgsql type=\"sync\"> after them",
            9,
        ),
        (
            pg("<request><pgsql type=\"parse\">SELECT 1</pgsql></request>\n<for from=\"1\" to=\"2\" var=\"i\"><request><pgsql type=\"sync\"/></request></for>"),
            "before the loop boundary",
            9,
        ),
        (
            pg("<request><pgsql type=\"bind\" name_prepared=\"nope\"/></request>\n<request><pgsql type=\"execute\"/></request>\n<request><pgsql type=\"sync\"/></request>"),
            "this bind executes statement 'nope', which no parse of the session defines before it",
            9,
        ),
        (
            pg("<request><pgsql type=\"parse\">SELECT $1</pgsql></request>\n<request><pgsql type=\"bind\" parameters=\"null\"/></request>"),
            "parameter 'null' (SQL NULL) is not supported",
            10,
        ),
        (
            pg("<request><pgsql type=\"execute\"/></request>"),
            "execute without a bind before it",
            9,
        ),
        (
            pg("<request><pgsql type=\"parse\">SELECT 1</pgsql></request>\n<request><pgsql type=\"bind\"/></request>\n<request><pgsql type=\"sync\"/></request>"),
            "a bind without an execute before the sync is not supported",
            10,
        ),
        (
            pg("<request><pgsql type=\"copy\">1,2</pgsql></request>"),
            "'<pgsql type=\"copy\">' is not supported",
            9,
        ),
        (
            pg("<request><pgsql type=\"sql\">SELECT 1</pgsql><dyn_variable name=\"n\" pgsql_expr=\"data_row[1][1]\"/></request>"),
            "pgsql_expr extraction is not supported",
            9,
        ),
        (
            session(5432, "pgsql", "<request subst=\"true\"><pgsql type=\"connect\" database=\"db%%_session%%\" username=\"u\"/></request>"),
            "variables are not supported in connection settings",
            8,
        ),
        (
            session(5432, "pgsql", "<request><pgsql type=\"sql\">SELECT 1</pgsql></request>"),
            "session 's' has no <pgsql type=\"connect\">: headroom needs its database and username",
            7,
        ),
        (
            doc(
                5432,
                "",
                "<session name=\"a\" probability=\"50\" type=\"ts_pgsql\">\n<request><pgsql type=\"connect\" database=\"d\" username=\"u\"/></request>\n</session>\n\
                 <session name=\"b\" probability=\"50\" type=\"ts_pgsql\">\n<request><pgsql type=\"connect\" database=\"d\" username=\"v\"/></request>\n</session>",
            ),
            "session 'b' connects as user 'v' on database 'd' without a password, session 'a' as user 'u'",
            11,
        ),
        (
            raw("<request><raw data=\"x\" ack=\"global\"/></request>"),
            "ack=\"global\" is not supported: it is a barrier across global_number users",
            8,
        ),
        (
            raw("<request subst=\"true\"><raw datasize=\"%%_n%%\"/></request>"),
            "a datasize from a variable is not supported",
            8,
        ),
        (
            raw("<request><raw datasize=\"2000000\"/></request>"),
            "at most 1048576 bytes are supported",
            8,
        ),
        (
            raw("<request><raw ack=\"no_ack\"/></request>"),
            "<raw> needs the attribute 'data'",
            8,
        ),
        (
            doc(7000, "", "<session name=\"s\" probability=\"100\" type=\"ts_raw\">\n<request><raw data=\"x\"/></request>\n</session>")
                .replace("<servers><server host=\"127.0.0.1\" port=\"7000\" type=\"tcp\"/></servers>", ""),
            "no <server>: headroom needs the server of the raw sessions",
            2,
        ),
        (
            websocket("<request><websocket type=\"message\" frame=\"utf8\">x</websocket></request>"),
            "frame=\"utf8\": expected text or binary",
            9,
        ),
        (
            websocket("<request><websocket type=\"connect\"/></request>"),
            "a second connect without a close before it",
            9,
        ),
        (
            websocket("<request><dyn_variable name=\"uid\" re=\"(\\d+)\"/><websocket type=\"message\" ack=\"no_ack\">hi</websocket></request>\n<request subst=\"true\"><websocket type=\"message\">%%_uid%%</websocket></request>"),
            "'<dyn_variable>' is not supported here: headroom does not keep WebSocket replies for checks",
            9,
        ),
        (
            session(8080, "websocket", "<request><websocket type=\"message\">hi</websocket></request>"),
            "session 's' has no <websocket type=\"connect\">: headroom needs the upgrade's path",
            7,
        ),
        (
            session(8080, "websocket", "<request><websocket type=\"upgrade\"/></request>"),
            "type=\"upgrade\": expected connect, message or close",
            8,
        ),
    ];
    for (xml, want, line) in cases {
        let errs = match import_tsung(xml, "t.xml") {
            Ok(i) => panic!(
                "expected an error with {want:?}, got {:?}\n--- in:\n{xml}",
                i.scenario
            ),
            Err(e) => e,
        };
        assert!(
            errs.iter()
                .any(|e| e.message.contains(want) && e.line == *line),
            "expected {want:?} at line {line}, got:\n{}\n--- in:\n{xml}",
            show(&errs)
        );
        assert!(errs.iter().all(|e| e.line >= 1 && e.column >= 1));
        assert!(
            errs.iter().all(|e| !e.message.contains("internal error")),
            "{}",
            show(&errs)
        );
    }
    // One error for a dyn_variable, not one more for each later use of its variable.
    let (xml, _, _) = cases
        .iter()
        .find(|c| c.1.contains("WebSocket replies"))
        .unwrap();
    let errs = import_tsung(xml, "t.xml").unwrap_err();
    assert_eq!(errs.len(), 1, "{}", show(&errs));
}

/// A session body that converts, per session type.
fn body_of(kind: &str) -> &'static str {
    match kind {
        "jabber" => "<request><jabber type=\"connect\"/></request>",
        "pgsql" => "<request><pgsql type=\"connect\" database=\"d\" username=\"u\"/></request>",
        "raw" => "<request><raw data=\"x\"/></request>",
        _ => "<request><http url=\"/\"/></request>",
    }
}

fn jabber_session(name: &str) -> String {
    format!(
        "<session name=\"{name}\" probability=\"100\" type=\"ts_jabber\">\n{}\n</session>",
        body_of("jabber")
    )
}

fn tsung_udp() -> String {
    session(7000, "raw", body_of("raw")).replace("type=\"tcp\"", "type=\"udp\"")
}

#[test]
fn jabber_options_without_jabber_sessions_warn() {
    let xml = doc(
        8080,
        "<option type=\"ts_jabber\" name=\"domain\" value=\"x.org\"/>",
        "<session name=\"s\" probability=\"100\" type=\"ts_http\"><request><http url=\"/\"/></request></session>",
    );
    let imp = import_tsung(&xml, "t.xml").unwrap_or_else(|e| panic!("{}", show(&e)));
    assert_eq!(
        located(&imp),
        [(5, 10, "<option type=\"ts_jabber\" name=\"domain\"> is not honoured: the file has no jabber session")]
    );
    assert_eq!(imp.scenario.link, LinkSpec::Plain);
    assert_eq!(imp.scenario.servers[0].protocol, Protocol::Http);
}

#[test]
fn login_requests_inside_a_transaction_with_actions_are_noted() {
    let xml = session(
        5222,
        "jabber",
        "<transaction name=\"start\">\n\
         <request><jabber type=\"connect\"/></request>\n\
         <request><jabber type=\"auth_sasl\" ack=\"global\"/></request>\n\
         <request><jabber type=\"connect\"/></request>\n\
         <request><jabber type=\"auth_sasl_bind\"/></request>\n\
         <request><jabber type=\"presence:initial\"/></request>\n\
         </transaction>",
    );
    let imp = import(&xml);
    assert_eq!(
        imp.scenario.sessions[0].steps,
        [tx(
            "start",
            vec![
                Step::Connect,
                xmpp(XmppAction::PresenceInitial, XmppAck::NoAck)
            ]
        )]
    );
    let got: Vec<(usize, &str)> = imp
        .warnings
        .iter()
        .map(|w| (w.line, w.message.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (7, "no <option type=\"ts_jabber\" name=\"domain\">: users log in to Tsung's default domain erlang-projects.org"),
            (8, "transaction 'start' no longer times its 3 request(s) of the XMPP login: headroom runs them when the connection opens, timed as xmpp:login"),
            (10, "ack=\"global\" is not honoured: this request is part of the XMPP login, which headroom runs when the connection opens, without a barrier between users"),
        ]
    );
}

// ---- every fixture ----------------------------------------------------------------------------

#[test]
fn every_fixture_round_trips() {
    for name in FIXTURES {
        let (_, imp) = convert(name);
        let yaml = to_yaml(&imp.scenario);
        match parse_str(&yaml, "x.yaml") {
            Ok(back) => assert_eq!(back, imp.scenario, "{name}: YAML was:\n{yaml}"),
            Err(e) => panic!("{name}: YAML does not parse:\n{}\n---\n{yaml}", show(&e)),
        }
    }
}

#[test]
fn protocol_mutants_round_trip_or_fail_located() {
    let mut rng = XorShift(0x2545_F491_4F6C_DD1D);
    for name in FIXTURES {
        let src = data(name).into_bytes();
        for _ in 0..300 {
            let text = mutant(&src, &mut rng);
            match import_tsung(&text, name) {
                Ok(imp) => {
                    let yaml = to_yaml(&imp.scenario);
                    assert_eq!(parse_str(&yaml, "x.yaml").as_ref(), Ok(&imp.scenario));
                }
                Err(errs) => {
                    for e in &errs {
                        assert!(e.line >= 1 && e.column >= 1, "{e}");
                        assert!(!e.message.contains("internal error"), "{e}\n{text}");
                    }
                }
            }
        }
    }
}

struct XorShift(u64);

impl XorShift {
    fn below(&mut self, n: u64) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x % n.max(1)
    }
}

/// `src` with one to three random deletions, copies and swaps of bytes.
fn mutant(src: &[u8], rng: &mut XorShift) -> String {
    let mut v = src.to_vec();
    for _ in 0..=rng.below(3) {
        let i = rng.below(v.len() as u64) as usize;
        match rng.below(3) {
            0 => {
                let n = (1 + rng.below(12) as usize).min(v.len() - i);
                v.drain(i..i + n);
            }
            1 => {
                let end = (i + 1 + rng.below(24) as usize).min(v.len());
                let chunk = v[i..end].to_vec();
                let at = rng.below(v.len() as u64) as usize;
                v.splice(at..at, chunk);
            }
            _ => {
                let j = rng.below(v.len() as u64) as usize;
                v.swap(i, j);
            }
        }
    }
    String::from_utf8_lossy(&v).into_owned()
}

#[test]
fn docs_jabber_example_is_current() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/import.md");
    let docs = std::fs::read_to_string(path).unwrap();
    let start = docs
        .find("This Tsung file (`chat.xml`):\n\n```xml\n")
        .expect("example in docs/import.md")
        + "This Tsung file (`chat.xml`):\n\n```xml\n".len();
    let end = start + docs[start..].find("```").unwrap();
    let imp =
        import_tsung(&docs[start..end], "chat.xml").unwrap_or_else(|e| panic!("{}", show(&e)));
    let yaml = to_yaml(&imp.scenario);
    let warnings: String = imp.warnings.iter().map(|w| format!("{w}\n")).collect();
    assert!(
        docs.contains(&format!("```yaml\n{yaml}```")),
        "docs/import.md is stale:\n{yaml}"
    );
    assert!(
        docs.contains(&format!("warnings\n\n```\n{warnings}```")),
        "docs/import.md is stale:\n{warnings}"
    );
}

/// Tsung's ldap elements as its stock ldap.xml writes them: bind, searches with scopes, add with
/// attributes and values, modify whose empty modifications are dropped (with a warning), and
/// the variables of `subst="true"`.
#[test]
fn ldap_sessions_convert() {
    let xml = session(
        389,
        "ldap",
        r#"<setdynvars sourcetype="random_number" start="1" end="9"><var name="n"/></setdynvars>
<request><ldap type="bind" user="uid=nniclausse" password="XXX"/></request>
<request><ldap type="search" base="dc=pablo-desktop" filter="(cn=user2)" scope="wholeSubtree"></ldap></request>
<request subst="true"><ldap type="search" base="dc=pablo-desktop" filter="(&amp;(cn=a*%%_n%%*n)(dc=pablo-desktop))" scope="singleLevel"></ldap></request>
<request subst="true"><ldap type="add" dn="cn=u%%_n%%,dc=pablo-desktop"><attr type="objectClass"><value>person</value><value>inetOrgPerson</value></attr><attr type="sn"><value>fffs</value></attr></ldap></request>
<request><ldap type="modify" dn="cn=u1,dc=pablo-desktop"><modification type="add"/><modification type="replace"><attr type="sn"><value>SomeSN</value></attr><attr type="mail"><value>some@mail.com</value></attr></modification><modification type="delete"/></ldap></request>
<request><ldap type="unbind"/></request>"#,
    );
    let imp = import(&xml);
    let sc = &imp.scenario;
    assert_eq!(sc.servers[0].protocol, Protocol::Ldap);
    assert_eq!(sc.link, LinkSpec::Ldap);
    let ldap: Vec<&LdapAction<String>> = sc.sessions[0]
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Ldap(l) => Some(&l.action),
            _ => None,
        })
        .collect();
    assert_eq!(
        ldap,
        [
            &LdapAction::Bind {
                dn: "uid=nniclausse".into(),
                password: "XXX".into()
            },
            &LdapAction::Search {
                base: "dc=pablo-desktop".into(),
                filter: "(cn=user2)".into(),
                scope: LdapScope::Sub,
                attrs: vec![],
                size_limit: 0
            },
            &LdapAction::Search {
                base: "dc=pablo-desktop".into(),
                filter: "(&(cn=a*${n}*n)(dc=pablo-desktop))".into(),
                scope: LdapScope::One,
                attrs: vec![],
                size_limit: 0
            },
            &LdapAction::Add {
                dn: "cn=u${n},dc=pablo-desktop".into(),
                attrs: vec![
                    (
                        "objectClass".into(),
                        vec!["person".into(), "inetOrgPerson".into()]
                    ),
                    ("sn".into(), vec!["fffs".into()])
                ]
            },
            &LdapAction::Modify {
                dn: "cn=u1,dc=pablo-desktop".into(),
                changes: vec![
                    (LdapMod::Replace, "sn".into(), vec!["SomeSN".into()]),
                    (
                        LdapMod::Replace,
                        "mail".into(),
                        vec!["some@mail.com".into()]
                    )
                ]
            },
            &LdapAction::Unbind,
        ]
    );
    let empty = imp
        .warnings
        .iter()
        .filter(|w| {
            w.message
                .contains("a <modification> without an <attr> changes nothing")
        })
        .count();
    assert_eq!(empty, 2, "{:?}", imp.warnings);
}

/// Tsung's `<ldap type="start_tls">` (commented out in its stock ldap.xml) as a session's first
/// request: the server's `tls: {starttls: true, insecure: true}` (Tsung checks no certificate),
/// its certificate files not honoured, each with a warning. After another LDAP request, or in
/// one session of two, it is refused, located.
#[test]
fn ldap_start_tls_is_the_servers_setting() {
    let xml = session(
        389,
        "ldap",
        r#"<request><ldap type="start_tls" cacertfile="/etc/ldap/ssl/ca.pem" certfile="/etc/ldap/ssl/c.pem" keyfile="/etc/ldap/ssl/k.pem"></ldap></request>
<request><ldap type="bind" user="uid=nniclausse" password="XXX"/></request>"#,
    );
    let imp = import(&xml);
    let tls = imp.scenario.servers[0].tls.as_ref().expect("tls");
    assert!(tls.starttls && tls.insecure, "{tls:?}");
    let steps = &imp.scenario.sessions[0].steps;
    assert_eq!(
        steps.iter().filter(|s| matches!(s, Step::Ldap(_))).count(),
        1,
        "{steps:?}"
    );
    for key in ["cacertfile", "certfile", "keyfile"] {
        assert!(
            imp.warnings
                .iter()
                .any(|w| w.message.contains(&format!("attribute '{key}'"))),
            "{key}: {:?}",
            imp.warnings
        );
    }

    let late = session(
        389,
        "ldap",
        r#"<request><ldap type="bind" user="uid=nniclausse" password="XXX"/></request>
<request><ldap type="start_tls"/></request>"#,
    );
    let errs = import_tsung(&late, "t.xml").unwrap_err();
    assert!(
        errs.iter()
            .any(|e| e.line == 9 && e.message.contains("after other LDAP requests")),
        "{}",
        show(&errs)
    );

    let mixed = doc(
        389,
        "",
        r#"<session name="a" probability="50" type="ts_ldap"><request><ldap type="start_tls"/></request><request><ldap type="bind" user="u" password="p"/></request></session>
<session name="b" probability="50" type="ts_ldap"><request><ldap type="bind" user="u" password="p"/></request></session>"#,
    );
    let errs = import_tsung(&mixed, "t.xml").unwrap_err();
    assert!(
        errs.iter()
            .any(|e| e.message.contains("upgrades to TLS with STARTTLS")),
        "{}",
        show(&errs)
    );
}

/// Issue 32: a `ts_fs` session (Tsung's fs plugin, as `fs-nfs.xml` uses it) becomes `file`
/// steps under the files root its absolute paths share, `%%_tsung_userid%%` Tsung's number of
/// the user (set first in the session from headroom's id); its `<server type="erlang">` is
/// warned about and dropped, as fs sessions use no server.
#[test]
fn fs_sessions_become_file_steps_under_their_common_root() {
    let xml = "<?xml version=\"1.0\"?>\n<tsung>\n<servers><server host=\"127.0.0.1\" port=\"5432\" type=\"erlang\"/></servers>\n\
         <load><arrivalphase phase=\"1\" duration=\"10\" unit=\"second\"><users arrivalrate=\"1\" unit=\"second\"/></arrivalphase></load>\n\
         <sessions>\n<session name=\"fs\" probability=\"100\" type=\"ts_fs\">\n\
         <transaction name=\"mkdir\"><request subst=\"true\"><fs cmd=\"make_dir\" path=\"/mnt/bench/%%_tsung_userid%%\"/></request></transaction>\n\
         <request subst=\"true\"><fs cmd=\"open\" mode=\"write\" path=\"/mnt/bench/%%_tsung_userid%%/f.bin\"/></request>\n\
         <for from=\"0\" to=\"2\" var=\"chunk\" incr=\"1\"><request><fs cmd=\"write_chunk\" size=\"65536\"/></request></for>\n\
         <request><fs cmd=\"close\"/></request>\n\
         <request subst=\"true\"><fs cmd=\"open\" mode=\"read\" path=\"/mnt/bench/%%_tsung_userid%%/f.bin\"/></request>\n\
         <request><fs cmd=\"read_chunk\" size=\"4096\" path=\"/x\"/></request>\n\
         <request><fs cmd=\"close\"/></request>\n\
         <request subst=\"true\"><fs path=\"/mnt/bench/%%_tsung_userid%%/w\"/></request>\n\
         <request subst=\"true\"><fs cmd=\"read\" path=\"/mnt/bench/%%_tsung_userid%%/w\"/></request>\n\
         <request subst=\"true\"><fs cmd=\"stat\" path=\"/mnt/bench/shared/w\"/></request>\n\
         <request subst=\"true\"><fs cmd=\"make_symlink\" path=\"/mnt/bench/%%_tsung_userid%%/w\" dest=\"/mnt/bench/%%_tsung_userid%%/l\"/></request>\n\
         <request subst=\"true\"><fs cmd=\"delete\" path=\"/mnt/bench/%%_tsung_userid%%/l\"/></request>\n\
         <request subst=\"true\"><fs cmd=\"del_dir\" path=\"/mnt/bench/%%_tsung_userid%%\"/></request>\n\
         </session>\n</sessions>\n</tsung>\n";
    let imp = import(xml);
    let sc = &imp.scenario;
    assert_eq!(sc.file_root.as_deref(), Some("/mnt/bench"));
    assert!(sc.servers.is_empty(), "{:?}", sc.servers);
    let file = |a: FileAction<String>| {
        Step::File(FileStep {
            name: format!("file:{}", a.type_name()),
            action: a,
        })
    };
    let u = |p: &str| format!("${{tsung_userid}}{p}");
    assert_eq!(
        sc.sessions[0].steps[0],
        Step::Set {
            var: "tsung_userid".into(),
            source: SetSource::Expr("user_id rem 1099511627776 + 1".into())
        }
    );
    let steps = &sc.sessions[0].steps[1..];
    assert_eq!(
        steps[0],
        tx("mkdir", vec![file(FileAction::MakeDir(u("")))])
    );
    assert_eq!(
        steps[1],
        file(FileAction::Open {
            path: u("/f.bin"),
            write: true
        })
    );
    let Step::Loop(l) = &steps[2] else {
        panic!("{:?}", steps[2])
    };
    assert_eq!(l.steps, [file(FileAction::WriteChunk(65536))]);
    assert_eq!(
        steps[3..],
        [
            file(FileAction::Close),
            file(FileAction::Open {
                path: u("/f.bin"),
                write: false
            }),
            file(FileAction::ReadChunk(4096)),
            file(FileAction::Close),
            // Tsung's defaults: cmd write, size 1024.
            file(FileAction::Write {
                path: u("/w"),
                size: 1024
            }),
            file(FileAction::Read(u("/w"))),
            file(FileAction::Stat("shared/w".into())),
            file(FileAction::Symlink {
                target: u("/w"),
                link: u("/l")
            }),
            file(FileAction::Delete(u("/l"))),
            file(FileAction::RemoveDir(u(""))),
        ]
    );
    let w = located(&imp);
    assert!(
        w.iter().any(|(l, _, m)| *l == 3
            && m.contains("<server type=\"erlang\"> is not honoured: fs sessions use no server")),
        "{w:#?}"
    );
    let at = nth(xml, "path=\"/mnt/bench/%%_tsung_userid%%\"", 1);
    assert!(
        w.iter().any(|(l, c, m)| (*l, *c) == at
            && m.contains("tsung_userid, Tsung's number of the user (1, 2, 3, ... as users start), becomes ${tsung_userid}")),
        "{w:#?}"
    );
    assert!(
        w.iter().any(|(l, _, m)| *l == 12
            && m.contains(
                "attribute 'path' of <fs> is not honoured: cmd=\"read_chunk\" does not use it"
            )),
        "{w:#?}"
    );
    // It compiles, and names no server to connect to.
    let c = headroom_scenario::compile(sc, std::path::Path::new(".")).unwrap();
    assert!(c.workload.has_file_ops() && !c.workload.uses_network());
}

#[test]
fn fs_errors_name_what_and_where() {
    let fs = |body: &str| session(1, "fs", body);
    let cases: &[(String, &str, usize)] = &[
        (
            fs("<request><fs cmd=\"read\" path=\"data/x\"/></request>"),
            "path=\"data/x\": a relative path, which Tsung opens from its working directory",
            8,
        ),
        (
            fs("<request><fs cmd=\"truncate\" path=\"/a/b\"/></request>"),
            "cmd=\"truncate\": expected read, write, open",
            8,
        ),
        (
            fs("<request><fs cmd=\"write\" path=\"/a/b\" size=\"67108865\"/></request>"),
            "size=\"67108865\": expected bytes, 0 to 67108864 (64 MiB)",
            8,
        ),
        (
            fs("<request><fs cmd=\"open\" mode=\"append\" path=\"/a/b\"/></request>"),
            "mode=\"append\": expected read or write",
            8,
        ),
        (
            fs("<request><fs cmd=\"read_chunk\" size=\"0\"/></request>"),
            "a chunk is at least 1 byte",
            8,
        ),
        (
            fs("<request><fs cmd=\"stat\" path=\"/a/b\"/></request>\n<request><fs cmd=\"stat\" path=\"/a/../etc/passwd\"/></request>"),
            "path \"/a/../etc/passwd\": '..' would leave the files root",
            9,
        ),
        (
            fs("<request><fs cmd=\"make_symlink\" path=\"/a/b\"/></request>"),
            "<fs> needs the attribute 'dest'",
            8,
        ),
        (
            session(5222, "jabber", body_of("jabber")).replace("type=\"tcp\"", "type=\"erlang\""),
            "'<server type=\"erlang\">' is not supported: headroom connects over TCP",
            3,
        ),
    ];
    for (xml, want, line) in cases {
        let errs = match import_tsung(xml, "t.xml") {
            Ok(i) => panic!("expected {want:?}, got {:?}\n--- in:\n{xml}", i.scenario),
            Err(e) => e,
        };
        assert!(
            errs.iter()
                .any(|e| e.message.contains(want) && e.line == *line),
            "expected {want:?} at line {line}, got:\n{}\n--- in:\n{xml}",
            show(&errs)
        );
    }
}

/// fs-nfs.xml's `<setdynvars sourcetype="eval">`: its Erlang fun (another user's number from
/// this one's) becomes a `set: {expr}`, shown in a warning; `tsung_userid` is set first.
#[test]
fn eval_funs_of_integer_arithmetic_become_set_expressions() {
    let xml = session(
        1,
        "fs",
        "<request subst=\"true\"><fs cmd=\"make_dir\" path=\"/mnt/bench/%%_tsung_userid%%\"/></request>\n\
         <setdynvars sourcetype=\"eval\" code=\"fun({Pid,DynVars})->\n\
             {ok,Val} = ts_dynvars:lookup(tsung_userid,DynVars),\n\
             {Id,Mod} = case list_to_integer(Val) of\n\
                I when I > 128 -> {I,256};\n\
                I when I > 64  -> {I,128};\n\
                I when I > 32  -> {I,64};\n\
                I              -> {I,32}\n\
             end,\n\
             case Id &lt; 9 of\n\
              true -> (abs(Id+8) rem Mod) +1;\n\
              _ -> (abs(Id-9) rem Mod) +1\n\
             end\n\
           end.\">\n\
           <var name=\"previd\"/>\n\
         </setdynvars>\n\
         <request subst=\"true\"><fs cmd=\"stat\" path=\"/mnt/bench/%%_previd%%\"/></request>",
    );
    let imp = import(&xml);
    let steps = &imp.scenario.sessions[0].steps;
    let mod_ = "(if tsung_userid > 128 then 256 else if tsung_userid > 64 then 128 else if tsung_userid > 32 then 64 else 32)";
    let want = format!(
        "if tsung_userid < 9 then abs(tsung_userid + 8) rem {mod_} + 1 else abs(tsung_userid - 9) rem {mod_} + 1"
    );
    assert_eq!(
        steps[2],
        Step::Set {
            var: "previd".into(),
            source: SetSource::Expr(want.clone())
        }
    );
    assert!(matches!(&steps[0], Step::Set { var, .. } if var == "tsung_userid"));
    assert!(
        matches!(&steps[3], Step::File(f) if f.action == FileAction::Stat("${previd}".into())),
        "{:?}",
        steps[3]
    );
    let w = located(&imp);
    let at = nth(&xml, "code=", 1);
    assert!(
        w.iter().any(|(l, c, m)| (*l, *c) == at
            && m.contains(&format!(
                "the Erlang fun becomes set: {{var: previd, expr: \"{want}\"}}"
            ))),
        "{w:#?}"
    );
    headroom_scenario::compile(&imp.scenario, std::path::Path::new(".")).unwrap();
}

/// An eval fun outside the subset is refused at the construct the translation stopped at, its
/// line and column in the file (entities and line breaks of the attribute followed).
#[test]
fn eval_funs_outside_the_subset_are_refused_where_they_leave_it() {
    let eval = |code: &str| {
        session(
            80,
            "http",
            &format!(
                "<setdynvars sourcetype=\"random_number\" start=\"1\" end=\"9\"><var name=\"n\"/></setdynvars>\n\
                 <setdynvars sourcetype=\"eval\" code=\"{code}\"><var name=\"x\"/></setdynvars>\n\
                 <request subst=\"true\"><http url=\"/%%_x%%\"/></request>"
            ),
        )
    };
    let head = "fun({_,D}) -&gt; {ok,V} = ts_dynvars:lookup(n,D),";
    // (the code, the text the refusal points at, what it says)
    let cases: &[(String, &str, &str)] = &[
        (
            // On the attribute's second line, after the entities "&lt;" and "-&gt;".
            format!("{head}\n  N = list_to_integer(V), case N &lt; 3 of true -&gt; lists:seq(N, 1); _ -&gt; 0 end end."),
            "lists:seq",
            "a call to lists:seq/2",
        ),
        (
            format!("{head}\n  N = list_to_integer(V), case N &lt; 3 of true -&gt; [N]; _ -&gt; 0 end end."),
            "[N]",
            "a list ([...])",
        ),
        (
            format!("{head} N = list_to_integer(V), N / 2 end."),
            "/ 2",
            "'/' (division to a float; integer division is div)",
        ),
        (
            format!("{head} {{ok,W}} = ts_dynvars:lookup(missing,D), list_to_integer(W) end."),
            "missing",
            "dynamic variable 'missing' is not set before this <setdynvars>",
        ),
        (
            format!("{head} N = list_to_integer(V), case N of 1 -&gt; 2 end end."),
            "case N of",
            "this case may match no clause",
        ),
        (
            format!("{head} erlang:now() end."),
            "erlang:now",
            "a call to erlang:now/0",
        ),
    ];
    for (code, needle, want) in cases {
        let xml = eval(code);
        let (line, col) = nth(&xml, needle, 1);
        let errs = match import_tsung(&xml, "t.xml") {
            Ok(i) => panic!("expected {want:?}, got {:?}", i.scenario),
            Err(e) => e,
        };
        assert!(
            errs.iter().any(|e| e.message.contains(want)
                && e.message
                    .starts_with("'<setdynvars sourcetype=\"eval\">' is not translated: ")
                && (e.line, e.column) == (line, col)),
            "expected {want:?} at {line}:{col}, got:\n{}\n--- in:\n{xml}",
            show(&errs)
        );
        // One error: the variable it would set counts as set for what follows.
        assert_eq!(errs.len(), 1, "{}", show(&errs));
    }
    // Several <var>s (Tsung would set them from a list) and no code: refused at the element.
    let two = session(
        80,
        "http",
        "<setdynvars sourcetype=\"eval\" code=\"fun({_,_}) -&gt; 1 end.\"><var name=\"a\"/><var name=\"b\"/></setdynvars>\n\
         <request><http url=\"/\"/></request>",
    );
    let errs = import_tsung(&two, "t.xml").unwrap_err();
    assert!(
        errs.iter()
            .any(|e| e.line == 8 && e.message.contains("sourcetype=\"eval\" with 2 <var>s")),
        "{}",
        show(&errs)
    );
}

/// A session reading `tsung_userid` sets it first; a `<user>` running such a session is warned
/// about (once users count from 1 too, as arrived ones do: numbers may repeat).
#[test]
fn tsung_userid_is_set_first_and_once_users_are_warned_about() {
    let xml = "<?xml version=\"1.0\"?>\n<tsung>\n<servers><server host=\"127.0.0.1\" port=\"80\" type=\"tcp\"/></servers>\n\
         <load><arrivalphase phase=\"1\" duration=\"10\" unit=\"second\"><users arrivalrate=\"1\" unit=\"second\"/></arrivalphase>\n\
         <user session=\"s\" start_time=\"5\" unit=\"second\"/></load>\n\
         <sessions>\n<session name=\"s\" probability=\"100\" type=\"ts_http\">\n\
         <request subst=\"true\"><http url=\"/u/%%_tsung_userid%%\"/></request>\n</session>\n</sessions>\n</tsung>\n";
    let imp = import(xml);
    let steps = &imp.scenario.sessions[0].steps;
    assert_eq!(
        steps[0],
        Step::Set {
            var: "tsung_userid".into(),
            source: SetSource::Expr("user_id rem 1099511627776 + 1".into())
        }
    );
    assert!(matches!(&steps[1], Step::Request(r) if r.path == "/u/${tsung_userid}"));
    let w = located(&imp);
    assert!(
        w.iter().any(|(l, _, m)| *l == 5
            && m.contains("session 's' reads tsung_userid: this once user's number counts from 1")),
        "{w:#?}"
    );
}
