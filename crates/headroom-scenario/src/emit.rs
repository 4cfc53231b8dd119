//! Writes a [`Scenario`] back as native YAML: block style at the top level, for the protocol
//! settings sections and for steps that hold other steps or requests with headers or a body,
//! flow style (`{...}`) for small mappings (servers, phases, think times, `set`, `extract`,
//! `match`, `send`, `xmpp`, `sql`, `ws`), the shorthands `request: GET /path`, `xmpp: TYPE`,
//! `sql: QUERY`, `ws: ping` when a step has nothing more, and durations as `500ms`, `2s`, `1m 30s`.
//!
//! Defaults are left out (`arrival: poisson`, `weight: 1`, `method: GET`, a step `name` equal to
//! the one the parser would derive, an xmpp `to` equal to its type's default, `ack: reply`,
//! `username: user`, a `websocket:` section of defaults), so the output reads like a
//! hand-written file.
//!
//! The property it keeps: for every `s` the parser produced,
//! `parse_str(&to_yaml(&s), "x.yaml") == Ok(s)`. Durations are written to the nanosecond and
//! numbers in Rust's shortest round-tripping form, so nothing is lost. Strings are quoted when a
//! YAML reader could take them for something else (see [`scalar`]).

use crate::model::*;
use crate::parse::{
    default_amqp_name, default_file_name, default_ldap_name, default_mqtt_name, default_sql_name,
    default_ws_name, default_xmpp_name, xmpp_default_to,
};
use headroom_core::Distribution;
use std::time::Duration;

/// The scenario as native YAML text (ends with a newline).
pub fn to_yaml(s: &Scenario) -> String {
    let mut out = String::new();
    if let Some(name) = &s.name {
        line(&mut out, 0, &format!("name: {}", scalar(name, false)));
    }
    if !s.servers.is_empty() {
        line(&mut out, 0, "servers:");
        for srv in &s.servers {
            line(&mut out, 2, &format!("- {}", server(srv)));
        }
    }
    link(&mut out, &s.link);
    if !s.http.cookies {
        line(&mut out, 0, "cookies: false");
    }
    if s.http.follow > 0 {
        line(&mut out, 0, &format!("follow: {}", s.http.follow));
    }
    if let Some(root) = &s.file_root {
        let mut m = Flow::default();
        m.str("root", root);
        line(&mut out, 0, &format!("files: {}", m.finish()));
    }
    line(&mut out, 0, "load:");
    if !s.load.phases.is_empty()
        || (s.load.users.is_empty() && s.load.stages.is_empty() && s.load.once.is_empty())
    {
        if s.load.phases.is_empty() {
            line(&mut out, 2, "phases: []");
        } else {
            line(&mut out, 2, "phases:");
        }
        for p in &s.load.phases {
            line(&mut out, 4, &format!("- {}", phase(p)));
        }
    }
    if !s.load.users.is_empty() {
        line(&mut out, 2, "users:");
        for u in &s.load.users {
            let mut m = Flow::default();
            m.raw("count", u.count.to_string());
            if let Some(session) = &u.session {
                m.str("session", session);
            }
            line(&mut out, 4, &format!("- {}", m.finish()));
        }
    }
    if !s.load.stages.is_empty() {
        line(&mut out, 2, "stages:");
        for st in &s.load.stages {
            let mut m = Flow::default();
            m.raw("duration", duration(st.duration));
            m.raw("users", st.users.to_string());
            line(&mut out, 4, &format!("- {}", m.finish()));
        }
    }
    if !s.load.once.is_empty() {
        line(&mut out, 2, "once:");
        for o in &s.load.once {
            let mut m = Flow::default();
            m.str("session", &o.session);
            m.raw("at", duration(o.at));
            line(&mut out, 4, &format!("- {}", m.finish()));
        }
    }
    if s.sessions.is_empty() {
        line(&mut out, 0, "sessions: []");
    } else {
        line(&mut out, 0, "sessions:");
    }
    for sess in &s.sessions {
        line(
            &mut out,
            2,
            &format!("- name: {}", scalar(&sess.name, false)),
        );
        if sess.weight != 1.0 {
            line(&mut out, 4, &format!("weight: {}", number(sess.weight)));
        }
        match &sess.surge {
            Some(p) => line(&mut out, 4, &format!("surge: {}", surge(p))),
            None => steps(&mut out, 4, &sess.steps),
        }
    }
    if !s.thresholds.is_empty() {
        line(&mut out, 0, "thresholds:");
        for t in &s.thresholds {
            line(
                &mut out,
                2,
                &format!("{}: {}", scalar(&t.text, false), threshold(t)),
            );
        }
    }
    out
}

/// The settings section of the servers' protocol, leaving out defaults (a WebSocket section
/// with only defaults is left out whole).
fn link(out: &mut String, l: &LinkSpec) {
    match l {
        LinkSpec::Plain => {}
        LinkSpec::Xmpp(x) => {
            line(out, 0, "xmpp:");
            line(out, 2, &format!("domain: {}", scalar(&x.domain, false)));
            if let Some(l) = &x.login {
                let mut m = Flow::default();
                m.str("user", &l.user);
                m.str("password", &l.password);
                line(out, 2, &format!("login: {}", m.finish()));
            } else {
                if !(x.anonymous && x.first == 1 && x.last == 1) {
                    line(
                        out,
                        2,
                        &format!("users: {{first: {}, last: {}}}", x.first, x.last),
                    );
                }
                if x.username != "user" {
                    line(out, 2, &format!("username: {}", scalar(&x.username, false)));
                }
                if x.password != "pass" {
                    line(out, 2, &format!("password: {}", scalar(&x.password, false)));
                }
            }
            if let Some(r) = &x.resource {
                line(out, 2, &format!("resource: {}", scalar(r, false)));
            }
            if x.anonymous {
                line(out, 2, "anonymous: true");
            }
            if x.register {
                line(out, 2, "register: true");
            }
            if let Some(b) = &x.bosh {
                line(out, 2, &format!("bosh: {}", scalar(b, false)));
            }
        }
        LinkSpec::Pgsql(p) => {
            line(out, 0, "pgsql:");
            line(out, 2, &format!("database: {}", scalar(&p.database, false)));
            line(out, 2, &format!("user: {}", scalar(&p.user, false)));
            if let Some(pw) = &p.password {
                line(out, 2, &format!("password: {}", scalar(pw, false)));
            }
        }
        LinkSpec::Ldap => {}
        LinkSpec::Amqp(a) => {
            if a.user == "guest" && a.password == "guest" && a.vhost == "/" {
                return;
            }
            line(out, 0, "amqp:");
            line(out, 2, &format!("user: {}", scalar(&a.user, true)));
            line(out, 2, &format!("password: {}", scalar(&a.password, true)));
            line(out, 2, &format!("vhost: {}", scalar(&a.vhost, true)));
        }
        LinkSpec::Mysql(p) => {
            line(out, 0, "mysql:");
            line(out, 2, &format!("user: {}", scalar(&p.user, false)));
            if let Some(pw) = &p.password {
                line(out, 2, &format!("password: {}", scalar(pw, false)));
            }
            if let Some(d) = &p.database {
                line(out, 2, &format!("database: {}", scalar(d, false)));
            }
        }
        LinkSpec::Mqtt(m) => {
            let fields = mqtt_connect_fields(&m.connect);
            if !m.v5 && fields.is_empty() {
                return;
            }
            line(out, 0, "mqtt:");
            if m.v5 {
                line(out, 2, "version: 5");
            }
            for (k, v) in fields {
                line(out, 2, &format!("{k}: {v}"));
            }
        }
        LinkSpec::WebSocket(w) => {
            if w.path == "/" && w.subprotocol.is_none() && w.origin.is_none() {
                return;
            }
            line(out, 0, "websocket:");
            if w.path != "/" {
                line(out, 2, &format!("path: {}", scalar(&w.path, false)));
            }
            if let Some(sp) = &w.subprotocol {
                line(out, 2, &format!("subprotocol: {}", scalar(sp, false)));
            }
            if let Some(o) = &w.origin {
                line(out, 2, &format!("origin: {}", scalar(o, false)));
            }
        }
    }
}

/// The parameters that differ from SURGE's defaults, or `default`.
fn surge(p: &headroom_core::surge::SurgeParams) -> String {
    let def = headroom_core::surge::SurgeParams::default();
    let mut m = Flow::default();
    for key in headroom_core::surge::SurgeParams::KEYS {
        if let Some(v) = p.get(key).filter(|v| Some(*v) != def.get(key)) {
            m.raw(key, number(v));
        }
    }
    if p.prefix != def.prefix {
        m.str("prefix", &p.prefix);
    }
    if m.0.is_empty() {
        "default".into()
    } else {
        m.finish()
    }
}

fn line(out: &mut String, indent: usize, text: &str) {
    for _ in 0..indent {
        out.push(' ');
    }
    out.push_str(text);
    out.push('\n');
}

/// A flow mapping being built: `{k: v, ...}`.
#[derive(Default)]
struct Flow(Vec<String>);

impl Flow {
    /// A value already in YAML form (a number, a duration, a nested flow mapping).
    fn raw(&mut self, k: &str, v: String) {
        self.0.push(format!("{k}: {v}"));
    }
    /// A string value, quoted as needed for flow context.
    fn str(&mut self, k: &str, v: &str) {
        self.0.push(format!("{k}: {}", scalar(v, true)));
    }
    fn finish(self) -> String {
        format!("{{{}}}", self.0.join(", "))
    }
}

fn server(s: &Server) -> String {
    let mut m = Flow::default();
    m.str("host", &s.host);
    m.raw("port", s.port.to_string());
    match s.protocol {
        // `http` is the default.
        Protocol::Http => {}
        p => m.raw("protocol", p.as_str().into()),
    }
    if let Some(t) = &s.tls {
        m.raw("tls", server_tls(t));
    }
    if s.http2 {
        m.raw("http", "2".into());
    }
    m.finish()
}

fn server_tls(t: &ServerTls) -> String {
    let mut m = Flow::default();
    if t.insecure {
        m.raw("insecure", "true".into());
    }
    for (k, v) in [
        ("cacert", &t.cacert),
        ("cert", &t.cert),
        ("key", &t.key),
        ("server_name", &t.server_name),
    ] {
        if let Some(v) = v {
            m.str(k, v);
        }
    }
    for (k, v) in [("min", t.min), ("max", t.max)] {
        if let Some(v) = v {
            m.raw(k, format!("'{}'", v.name()));
        }
    }
    if let Some(r) = t.resume {
        m.raw("resume", r.to_string());
    }
    if t.starttls {
        m.raw("starttls", "true".into());
    }
    if let Some(s) = t.sslmode {
        m.raw("sslmode", s.as_str().into());
    }
    if m.0.is_empty() {
        return "true".into();
    }
    m.finish()
}

fn phase(p: &Phase) -> String {
    let mut m = Flow::default();
    m.raw("duration", duration(p.duration));
    match p.rate {
        Rate::Fixed(r) => m.raw("arrival_rate", number(r)),
        Rate::Ramp { from, to } => m.raw(
            "ramp",
            format!("{{from: {}, to: {}}}", number(from), number(to)),
        ),
    }
    match p.arrival {
        Arrival::Poisson => {}
        Arrival::Constant => m.raw("arrival", "constant".into()),
    }
    if let Some(n) = p.max_users {
        m.raw("max_users", n.to_string());
    }
    m.finish()
}

fn steps(out: &mut String, indent: usize, list: &[Step]) {
    if list.is_empty() {
        line(out, indent, "steps: []");
        return;
    }
    line(out, indent, "steps:");
    for s in list {
        step(out, indent + 2, s);
    }
}

/// One `- step` item at `indent`; its nested keys go at `indent + 4`.
fn step(out: &mut String, indent: usize, s: &Step) {
    let inner = indent + 4;
    match s {
        Step::Request(r) => request(out, indent, r),
        Step::Pipeline(list) => {
            line(out, indent, "- pipeline:");
            for r in list {
                request(out, inner, r);
            }
        }
        Step::Cookie(c) => cookie(out, indent, c),
        Step::File(f) => line(out, indent, &format!("- file: {}", file(f))),
        Step::Send(x) => line(out, indent, &format!("- send: {}", send(x))),
        Step::Xmpp(x) => line(out, indent, &format!("- xmpp: {}", xmpp(x))),
        Step::Sql(q) => line(out, indent, &format!("- sql: {}", sql(q))),
        Step::Ws(w) => line(out, indent, &format!("- ws: {}", ws(w))),
        Step::Mqtt(m) => line(out, indent, &format!("- mqtt: {}", mqtt(m))),
        Step::Ldap(l) => line(out, indent, &format!("- ldap: {}", ldap(l))),
        Step::Amqp(a) => line(out, indent, &format!("- amqp: {}", amqp(a))),
        Step::Think(d) => line(out, indent, &format!("- think: {}", think(d))),
        Step::Loop(l) => {
            line(out, indent, "- loop:");
            if let Some(c) = l.count {
                line(out, inner, &format!("count: {c}"));
            }
            match &l.condition {
                Some(Condition::While(v)) => {
                    line(out, inner, &format!("while: {}", scalar(v, false)))
                }
                Some(Condition::Until(v)) => {
                    line(out, inner, &format!("until: {}", scalar(v, false)))
                }
                None => {}
            }
            match &l.counter {
                Some(c) if c.start == 1 && c.step == 1 => {
                    line(out, inner, &format!("counter: {}", scalar(&c.var, false)))
                }
                Some(c) => line(
                    out,
                    inner,
                    &format!(
                        "counter: {{var: {}, start: {}, step: {}}}",
                        scalar(&c.var, false),
                        c.start,
                        c.step
                    ),
                ),
                None => {}
            }
            steps(out, inner, &l.steps);
        }
        Step::Transaction { name, steps: body } => {
            line(out, indent, "- transaction:");
            line(out, inner, &format!("name: {}", scalar(name, false)));
            steps(out, inner, body);
        }
        Step::Connect => line(out, indent, "- connect"),
        Step::Close => line(out, indent, "- close"),
        Step::Set { var, source } => {
            line(out, indent, &format!("- set: {}", set(var, source)));
        }
        Step::Extract(e) => {
            let mut m = Flow::default();
            m.str("var", &e.var);
            match &e.from {
                ExtractFrom::Regex(r) => m.str("regex", r),
                ExtractFrom::JsonPointer(p) => m.str("json", p),
                ExtractFrom::Header(h) => m.str("header", h),
            }
            if let Some(d) = &e.default {
                m.str("default", d);
            }
            line(out, indent, &format!("- extract: {}", m.finish()));
        }
        Step::Match(x) => line(out, indent, &format!("- match: {}", matcher(x))),
    }
}

fn send(x: &Send) -> String {
    use headroom_core::session::ExpectSpec;
    let mut m = Flow::default();
    m.str("name", &x.name);
    m.str("data", &x.data);
    match &x.expect {
        ExpectSpec::Nothing => {}
        ExpectSpec::Bytes(n) => m.raw("expect", format!("{{bytes: {n}}}")),
        ExpectSpec::Delimiter(d) => m.raw(
            "expect",
            format!(
                "{{delimiter: {}}}",
                scalar(&String::from_utf8_lossy(d), true)
            ),
        ),
        ExpectSpec::Regex { pattern, window } => m.raw(
            "expect",
            format!("{{regex: {}, window: {window}}}", scalar(pattern, true)),
        ),
        ExpectSpec::Length {
            offset,
            width,
            big_endian,
            includes_header,
            adjust,
        } => m.raw(
            "expect",
            format!(
                "{{length: {{width: {width}, offset: {offset}, endian: {}, includes_header: \
                 {includes_header}, adjust: {adjust}}}}}",
                if *big_endian { "big" } else { "little" }
            ),
        ),
    }
    m.finish()
}

/// `TYPE` alone when nothing else differs from the defaults, else `{type: TYPE, ...}`.
fn xmpp(x: &Xmpp) -> String {
    let t = x.action.type_name();
    let mut m = Flow::default();
    // Type names, destinations, show values and acks are fixed words that need no quotes.
    m.raw("type", t.into());
    let to = |m: &mut Flow, to: &XmppDest| {
        if Some(*to) != xmpp_default_to(t) {
            m.raw("to", to.as_str().into());
        }
    };
    let presence = |m: &mut Flow, show: &Option<String>, status: &Option<String>| {
        if let Some(s) = show {
            m.str("show", s);
        }
        if let Some(s) = status {
            m.str("status", s);
        }
    };
    match &x.action {
        XmppAction::PresenceInitial
        | XmppAction::PresenceFinal
        | XmppAction::RosterGet
        | XmppAction::Close => {}
        XmppAction::PresenceBroadcast { show, status } => presence(&mut m, show, status),
        XmppAction::PresenceDirected {
            to: dest,
            show,
            status,
        } => {
            to(&mut m, dest);
            presence(&mut m, show, status);
        }
        XmppAction::PresenceSubscribe { to: dest }
        | XmppAction::RosterAdd { to: dest }
        | XmppAction::RosterRemove { to: dest } => to(&mut m, dest),
        XmppAction::RosterRename { to: dest, name } => {
            to(&mut m, dest);
            m.str("alias", name);
        }
        XmppAction::Chat {
            to: dest,
            size,
            text,
        } => {
            to(&mut m, dest);
            match text {
                Some(text) => m.str("text", text),
                None => m.raw("size", size.to_string()),
            }
        }
        XmppAction::Raw(data) => m.str("data", data),
    }
    if x.ack != XmppAck::Reply {
        m.raw("ack", x.ack.as_str().into());
    }
    if x.name != default_xmpp_name(&x.action) {
        m.str("name", &x.name);
    }
    if m.0.len() == 1 {
        t.to_string()
    } else {
        m.finish()
    }
}

/// The query alone when it is a simple query under its default name, else a mapping.
fn sql(q: &Sql) -> String {
    if q.params.is_empty() && !q.prepare && q.name == default_sql_name(&q.query) {
        return scalar(&q.query, false);
    }
    let mut m = Flow::default();
    m.str("query", &q.query);
    if !q.params.is_empty() {
        let params: Vec<String> = q.params.iter().map(|p| scalar(p, true)).collect();
        m.raw("params", format!("[{}]", params.join(", ")));
    }
    if q.prepare {
        m.raw("prepare", "true".into());
    }
    if q.name != default_sql_name(&q.query) {
        m.str("name", &q.name);
    }
    m.finish()
}

/// The CONNECT options that differ from the defaults, as `(key, value)` pairs of YAML.
fn mqtt_connect_fields(c: &MqttConnect) -> Vec<(&'static str, String)> {
    let d = MqttConnect::default();
    let mut f = Vec::new();
    if c.client_id != d.client_id {
        f.push(("client_id", scalar(&c.client_id, true)));
    }
    if c.clean_start != d.clean_start {
        f.push(("clean_start", c.clean_start.to_string()));
    }
    if c.keep_alive != d.keep_alive {
        f.push(("keep_alive", format!("{}s", c.keep_alive)));
    }
    if let Some(u) = &c.username {
        f.push(("username", scalar(u, true)));
    }
    if let Some(p) = &c.password {
        f.push(("password", scalar(p, true)));
    }
    if let Some(w) = &c.will {
        let mut m = Flow::default();
        m.str("topic", &w.topic);
        if !w.payload.is_empty() {
            m.str("payload", &w.payload);
        }
        if w.qos != 0 {
            m.raw("qos", w.qos.to_string());
        }
        if w.retain {
            m.raw("retain", "true".into());
        }
        f.push(("will", m.finish()));
    }
    if c.session_expiry != d.session_expiry {
        f.push(("session_expiry", format!("{}s", c.session_expiry)));
    }
    f
}

/// The CONNECT options as a flow mapping (`{}` when all are defaults).
fn mqtt_connect(c: &MqttConnect) -> String {
    let mut m = Flow::default();
    for (k, v) in mqtt_connect_fields(c) {
        m.raw(k, v);
    }
    m.finish()
}

/// A flow list of quoted values.
fn flow_list(values: &[String]) -> String {
    let v: Vec<String> = values.iter().map(|x| scalar(x, true)).collect();
    format!("[{}]", v.join(", "))
}

/// `close`, or a mapping.
fn amqp(x: &Amqp) -> String {
    let named = x.name != default_amqp_name(&x.action);
    let mut m = Flow::default();
    // A channel: a number as such, a template as a string.
    let put = |m: &mut Flow, key: &str, ch: &str| {
        if ch.parse::<u16>().is_ok() {
            m.raw(key, ch.to_string());
        } else {
            m.str(key, ch);
        }
    };
    let channel = |m: &mut Flow, ch: &str| {
        if ch != "1" {
            put(m, "channel", ch);
        }
    };
    match &x.action {
        AmqpAction::Close if !named => return "close".into(),
        AmqpAction::Close => m.raw("close", "true".into()),
        AmqpAction::ChannelOpen { channel: None } => m.raw("channel_open", "auto".into()),
        AmqpAction::ChannelOpen { channel: Some(c) } => put(&mut m, "channel_open", c),
        AmqpAction::ChannelClose { channel: c } => put(&mut m, "channel_close", c),
        AmqpAction::ConfirmSelect { channel: c } => put(&mut m, "confirm_select", c),
        AmqpAction::ExchangeDeclare {
            channel: c,
            exchange,
            kind,
            durable,
        } => {
            m.str("exchange_declare", exchange);
            m.str("type", kind);
            if *durable {
                m.raw("durable", "true".into());
            }
            channel(&mut m, c);
        }
        AmqpAction::QueueDeclare {
            channel: c,
            queue,
            durable,
            exclusive,
            auto_delete,
        } => {
            m.str("queue_declare", queue);
            for (k, v) in [
                ("durable", durable),
                ("exclusive", exclusive),
                ("auto_delete", auto_delete),
            ] {
                if *v {
                    m.raw(k, "true".into());
                }
            }
            channel(&mut m, c);
        }
        AmqpAction::QueueBind {
            channel: c,
            queue,
            exchange,
            routing_key,
        } => {
            m.str("queue_bind", queue);
            m.str("exchange", exchange);
            m.str("routing_key", routing_key);
            channel(&mut m, c);
        }
        AmqpAction::Qos {
            channel: c,
            prefetch,
        } => {
            m.raw("qos", prefetch.to_string());
            channel(&mut m, c);
        }
        AmqpAction::Consume {
            channel: c,
            queue,
            ack,
        } => {
            m.str("consume", queue);
            if !*ack {
                m.raw("ack", "false".into());
            }
            channel(&mut m, c);
        }
        AmqpAction::Publish {
            channel: c,
            exchange,
            routing_key,
            persistent,
            payload,
        } => {
            m.str("publish", exchange);
            m.str("routing_key", routing_key);
            if *persistent {
                m.raw("persistent", "true".into());
            }
            match payload {
                MqttPayload::Size(n) => m.raw("size", n.to_string()),
                MqttPayload::Text(t) => m.str("text", t),
            }
            channel(&mut m, c);
        }
        AmqpAction::WaitConfirms { timeout } => m.raw(
            "wait_confirms",
            humantime::format_duration(*timeout).to_string(),
        ),
        AmqpAction::Wait { messages, timeout } => m.raw(
            "wait",
            format!(
                "{{messages: {messages}, timeout: {}}}",
                humantime::format_duration(*timeout)
            ),
        ),
    }
    if named {
        m.str("name", &x.name);
    }
    m.finish()
}

/// `unbind`, or a mapping.
/// A `file` step: `close`, or its action's mapping (the name when not the default).
fn file(f: &FileStep) -> String {
    let default = f.name == default_file_name(&f.action);
    if matches!(f.action, FileAction::Close) && default {
        return "close".into();
    }
    let mut m = Flow::default();
    match &f.action {
        FileAction::MakeDir(p) => m.str("mkdir", p),
        FileAction::RemoveDir(p) => m.str("rmdir", p),
        FileAction::Delete(p) => m.str("delete", p),
        FileAction::Stat(p) => m.str("stat", p),
        FileAction::Read(p) => m.str("read", p),
        FileAction::Write { path, size } => {
            m.str("write", path);
            m.raw("size", size.to_string());
        }
        FileAction::Open { path, write } => {
            m.str("open", path);
            m.raw("mode", if *write { "write" } else { "read" }.into());
        }
        FileAction::ReadChunk(n) => m.raw("read_chunk", n.to_string()),
        FileAction::WriteChunk(n) => m.raw("write_chunk", n.to_string()),
        FileAction::Close => m.raw("close", "true".into()),
        FileAction::Symlink { target, link } => {
            m.str("symlink", target);
            m.str("link", link);
        }
    }
    if !default {
        m.str("name", &f.name);
    }
    m.finish()
}

fn ldap(x: &Ldap) -> String {
    let named = x.name != default_ldap_name(&x.action);
    let mut m = Flow::default();
    match &x.action {
        LdapAction::Unbind if !named => return "unbind".into(),
        LdapAction::Unbind => m.raw("unbind", "true".into()),
        LdapAction::Bind { dn, password } => {
            m.str("bind", dn);
            m.str("password", password);
        }
        LdapAction::Search {
            base,
            filter,
            scope,
            attrs,
            size_limit,
        } => {
            m.str("search", base);
            m.str("filter", filter);
            if *scope != LdapScope::Sub {
                m.raw("scope", scope.as_str().into());
            }
            if !attrs.is_empty() {
                m.raw("attrs", flow_list(attrs));
            }
            if *size_limit != 0 {
                m.raw("size_limit", size_limit.to_string());
            }
        }
        LdapAction::Add { dn, attrs } => {
            m.str("add", dn);
            let items: Vec<String> = attrs
                .iter()
                .map(|(a, v)| format!("{}: {}", scalar(a, true), flow_list(v)))
                .collect();
            m.raw("attrs", format!("{{{}}}", items.join(", ")));
        }
        LdapAction::Modify { dn, changes } => {
            m.str("modify", dn);
            let items: Vec<String> = changes
                .iter()
                .map(|(op, a, v)| {
                    if v.is_empty() {
                        format!("{{{}: {}}}", op.as_str(), scalar(a, true))
                    } else {
                        format!(
                            "{{{}: {}, values: {}}}",
                            op.as_str(),
                            scalar(a, true),
                            flow_list(v)
                        )
                    }
                })
                .collect();
            m.raw("changes", format!("[{}]", items.join(", ")));
        }
        LdapAction::Delete { dn } => m.str("delete", dn),
    }
    if named {
        m.str("name", &x.name);
    }
    m.finish()
}

/// `ping` / `disconnect` / `connect`, or a mapping.
fn mqtt(x: &Mqtt) -> String {
    let named = x.name != default_mqtt_name(&x.action);
    let mut m = Flow::default();
    match &x.action {
        MqttAction::Ping if !named => return "ping".into(),
        MqttAction::Disconnect if !named => return "disconnect".into(),
        MqttAction::Ping => m.raw("ping", "true".into()),
        MqttAction::Disconnect => m.raw("disconnect", "true".into()),
        MqttAction::Connect(c) => {
            let body = mqtt_connect(c);
            if body == "{}" && !named {
                return "connect".into();
            }
            m.raw("connect", if body == "{}" { "true".into() } else { body });
        }
        MqttAction::Publish {
            topic,
            qos,
            retain,
            payload,
        } => {
            m.str("publish", topic);
            if *qos != 0 {
                m.raw("qos", qos.to_string());
            }
            if *retain {
                m.raw("retain", "true".into());
            }
            match payload {
                MqttPayload::Size(n) => m.raw("size", n.to_string()),
                MqttPayload::Text(t) => m.str("text", t),
            }
        }
        MqttAction::Subscribe { filter, qos } => {
            m.str("subscribe", filter);
            if *qos != 0 {
                m.raw("qos", qos.to_string());
            }
        }
        MqttAction::Unsubscribe { filter } => m.str("unsubscribe", filter),
        MqttAction::Wait { messages, timeout } => m.raw(
            "wait",
            format!(
                "{{messages: {messages}, timeout: {}}}",
                humantime::format_duration(*timeout)
            ),
        ),
    }
    if named {
        m.str("name", &x.name);
    }
    m.finish()
}

/// `ping` / `close`, or a mapping for a message or a named ping or close.
fn ws(w: &Ws) -> String {
    let named = w.name != default_ws_name(&w.action);
    let mut m = Flow::default();
    match &w.action {
        WsAction::Message {
            binary,
            data,
            reply,
        } => {
            m.str("send", data);
            if *binary {
                m.raw("binary", "true".into());
            }
            if !*reply {
                m.raw("reply", "false".into());
            }
        }
        WsAction::Ping if !named => return "ping".into(),
        WsAction::Close if !named => return "close".into(),
        WsAction::Ping => m.raw("ping", "true".into()),
        WsAction::Close => m.raw("close", "true".into()),
    }
    if named {
        m.str("name", &w.name);
    }
    m.finish()
}

fn set(var: &str, source: &SetSource) -> String {
    let mut m = Flow::default();
    m.str("var", var);
    match source {
        SetSource::Value(v) => m.str("value", v),
        SetSource::Csv {
            file,
            column,
            order,
        } => {
            let mut c = Flow::default();
            c.str("file", file);
            c.raw("column", column.to_string());
            match order {
                CsvOrder::Sequential => {}
                CsvOrder::Random => c.raw("order", "random".into()),
                CsvOrder::SameRow => c.raw("order", "same_row".into()),
            }
            m.raw("csv", c.finish());
        }
        SetSource::RandomNumber { min, max } => {
            m.raw("random_number", format!("{{min: {min}, max: {max}}}"))
        }
        SetSource::RandomString { length } => {
            m.raw("random_string", format!("{{length: {length}}}"))
        }
        SetSource::Sequence { start, step } if *step == 1 => {
            m.raw("sequence", format!("{{start: {start}}}"))
        }
        SetSource::Sequence { start, step } => {
            m.raw("sequence", format!("{{start: {start}, step: {step}}}"))
        }
        SetSource::UserId => m.raw("user_id", "true".into()),
        SetSource::Expr(e) => m.str("expr", e),
    }
    m.finish()
}

fn matcher(x: &Match) -> String {
    let mut m = Flow::default();
    if let Some(st) = x.status {
        m.raw("status", st.to_string());
    }
    if let Some(b) = &x.body {
        m.str("body", b);
    }
    if !x.when_matched {
        m.raw("when", "nomatch".into());
    }
    let action = match x.action {
        MatchAction::Continue => "continue",
        MatchAction::Abort => "abort",
        MatchAction::Restart => "restart",
        MatchAction::Loop => "loop",
    };
    m.raw("do", action.into());
    if let Some(n) = x.max_loops {
        m.raw("max_loops", n.to_string());
    }
    if x.name != default_match_name(x) {
        m.str("name", &x.name);
    }
    m.finish()
}

/// The name the parser gives a match without `name:`.
fn default_match_name(m: &Match) -> String {
    let on = m
        .status
        .map(|s| s.to_string())
        .or(m.body.clone())
        .unwrap_or_default();
    format!("match {on}")
}

fn request(out: &mut String, indent: usize, r: &Request) {
    let default_name = format!("{} {}", r.method, r.path);
    let one_word = |s: &str| !s.is_empty() && !s.contains(char::is_whitespace);
    if r.headers.is_empty()
        && r.body.is_none()
        && r.auth.is_none()
        && r.oauth.is_none()
        && r.name == default_name
        && one_word(&r.method)
        && one_word(&r.path)
    {
        let text = format!("- request: {}", scalar(&default_name, false));
        line(out, indent, &text);
        return;
    }
    let inner = indent + 4;
    line(out, indent, "- request:");
    if r.name != default_name {
        line(out, inner, &format!("name: {}", scalar(&r.name, false)));
    }
    if r.method != "GET" {
        line(out, inner, &format!("method: {}", scalar(&r.method, false)));
    }
    line(out, inner, &format!("path: {}", scalar(&r.path, false)));
    if !r.headers.is_empty() {
        let mut m = Flow::default();
        for (k, v) in &r.headers {
            m.0.push(format!("{}: {}", scalar(k, true), scalar(v, true)));
        }
        let flow = m.finish();
        if inner + "headers: ".len() + flow.len() <= 100 {
            line(out, inner, &format!("headers: {flow}"));
        } else {
            line(out, inner, "headers:");
            for (k, v) in &r.headers {
                let text = format!("{}: {}", scalar(k, false), scalar(v, false));
                line(out, inner + 2, &text);
            }
        }
    }
    if let Some(b) = &r.body {
        line(out, inner, &format!("body: {}", scalar(b, false)));
    }
    if let Some(a) = &r.auth {
        let mut m = Flow::default();
        m.str("user", &a.user);
        m.str("password", &a.password);
        if a.scheme != AuthScheme::Basic {
            m.raw("scheme", a.scheme.as_str().to_string());
        }
        line(out, inner, &format!("auth: {}", m.finish()));
    }
    if let Some(o) = &r.oauth {
        let mut m = Flow::default();
        m.str("consumer_key", &o.consumer_key);
        m.str("consumer_secret", &o.consumer_secret);
        if !o.token.is_empty() {
            m.str("token", &o.token);
        }
        if !o.token_secret.is_empty() {
            m.str("token_secret", &o.token_secret);
        }
        if o.method != OAuthMethod::HmacSha1 {
            m.raw("method", o.method.as_str().to_string());
        }
        line(out, inner, &format!("oauth: {}", m.finish()));
    }
}

fn cookie(out: &mut String, indent: usize, c: &CookieStep) {
    match c {
        CookieStep::Clear => line(out, indent, "- cookie: clear"),
        CookieStep::Set {
            name,
            value,
            domain,
            path,
        } => {
            let mut m = Flow::default();
            m.str("name", name);
            m.str("value", value);
            if let Some(d) = domain {
                m.str("domain", d);
            }
            if let Some(p) = path {
                m.str("path", p);
            }
            line(out, indent, &format!("- cookie: {{set: {}}}", m.finish()));
        }
    }
}

fn think(d: &Distribution) -> String {
    match d {
        Distribution::Constant(c) => duration(*c),
        Distribution::Uniform { min, max } => format!(
            "{{uniform: {{min: {}, max: {}}}}}",
            duration(*min),
            duration(*max)
        ),
        Distribution::Exponential { mean } => format!("{{exponential: {}}}", duration(*mean)),
        Distribution::Pareto { min, alpha } => format!(
            "{{pareto: {{min: {}, alpha: {}}}}}",
            duration(*min),
            number(*alpha)
        ),
    }
}

fn threshold(t: &Threshold) -> String {
    let op = match t.op {
        CmpOp::Lt => "<",
        CmpOp::Le => "<=",
        CmpOp::Gt => ">",
        CmpOp::Ge => ">=",
    };
    let value = match t.value {
        ThresholdValue::Duration(d) => duration(d),
        ThresholdValue::Ratio(r) => format!("{}%", percent(r)),
        ThresholdValue::Number(n) => number(n),
    };
    // Starts with `<` or `>`, which YAML takes for a block scalar indicator: always quoted.
    quote(&format!("{op} {value}"))
}

/// `r` (a fraction) as a percentage that the parser turns back into exactly `r` (it divides
/// by 100, so `r * 100` printed naively may not come back bit for bit).
fn percent(r: f64) -> String {
    let back = |t: &str| t.parse::<f64>().map(|v| v / 100.0) == Ok(r);
    let first = number(r * 100.0);
    if back(&first) {
        return first;
    }
    for prec in 0..=20 {
        let t = format!("{:.prec$}", r * 100.0);
        if back(&t) {
            return t;
        }
    }
    first
}

/// A float in the shortest form that parses back to the same value (`80`, `0.5`).
fn number(v: f64) -> String {
    format!("{v}")
}

/// `1h 2m 3s 4ms 5us 6ns`, leaving out zero parts; `0s` for zero. Exact to the nanosecond.
pub(crate) fn duration(d: Duration) -> String {
    if d.is_zero() {
        return "0s".into();
    }
    let secs = d.as_secs();
    let nanos = d.subsec_nanos();
    let parts = [
        (secs / 3600, "h"),
        ((secs / 60) % 60, "m"),
        (secs % 60, "s"),
        (u64::from(nanos / 1_000_000), "ms"),
        (u64::from((nanos / 1_000) % 1_000), "us"),
        (u64::from(nanos % 1_000), "ns"),
    ];
    let text: Vec<String> = parts
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, u)| format!("{n}{u}"))
        .collect();
    text.join(" ")
}

/// `s` as a YAML string scalar: plain when any YAML reader reads it back as the same string,
/// else quoted. `flow` is true inside `{...}`, where `, [ ] { }` need quotes too.
pub(crate) fn scalar(s: &str, flow: bool) -> String {
    if plain_ok(s, flow) {
        s.to_string()
    } else {
        quote(s)
    }
}

fn plain_ok(s: &str, flow: bool) -> bool {
    let Some(first) = s.chars().next() else {
        return false;
    };
    // Edge spaces would be trimmed; a trailing ` -` or ` ?` before `,` or `}` reads as an
    // indicator in flow context (yaml-rust2), so edge indicators are quoted everywhere.
    if s.starts_with(' ') || s.ends_with([' ', '-', '?']) {
        return false;
    }
    // Characters that start something else in YAML.
    if "-?:,[]{}#&*!|>'\"%@`".contains(first) {
        return false;
    }
    // `:` and `#` can start a mapping value or a comment: quoted anywhere.
    if s.contains([':', '#']) {
        return false;
    }
    if flow && s.contains(['{', '}', '[', ']', ',']) {
        return false;
    }
    // Printable ASCII and non-ASCII letters and digits only; tabs, control and format
    // characters and Unicode spaces are quoted.
    let printable = s
        .chars()
        .all(|c| c.is_ascii_graphic() || c == ' ' || (!c.is_ascii() && c.is_alphanumeric()));
    printable && !looks_typed(s)
}

/// True for text that YAML 1.1 or 1.2 readers resolve to a null, a boolean or a number (or the
/// merge key `<<`).
fn looks_typed(s: &str) -> bool {
    let lower = s.to_ascii_lowercase();
    const WORDS: &[&str] = &[
        "~", "null", "true", "false", "yes", "no", "on", "off", "y", "n", "<<", ".inf", "-.inf",
        "+.inf", ".nan",
    ];
    if WORDS.contains(&lower.as_str()) || s.parse::<f64>().is_ok() {
        return true;
    }
    let t = lower.trim_start_matches(['+', '-']);
    if t.contains('_') && t.replace('_', "").parse::<f64>().is_ok() {
        return true;
    }
    for prefix in ["0x", "0o", "0b"] {
        if let Some(rest) = t.strip_prefix(prefix) {
            if !rest.is_empty() && rest.chars().all(|c| c.is_ascii_hexdigit() || c == '_') {
                return true;
            }
        }
    }
    // Dates such as 2024-01-31.
    t.starts_with(|c: char| c.is_ascii_digit()) && t.chars().all(|c| c.is_ascii_digit() || c == '-')
}

/// A quoted scalar: double quotes when that needs no escape, single quotes when the text is
/// printable, else double quotes with escapes.
fn quote(s: &str) -> String {
    let special = |c: char| {
        c.is_control()
            || matches!(
                c,
                '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
            )
    };
    let printable = !s.chars().any(special);
    if printable && !s.contains(['"', '\\']) {
        return format!("\"{s}\"");
    }
    if printable {
        return format!("'{}'", s.replace('\'', "''"));
    }
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if special(c) => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_round_trip() {
        for load in [
            "load:\n  stages:\n    - {duration: 10s, users: 100}\n    - {duration: 30s, users: 100}\n    - {duration: 10s, users: 0}\n",
            "load:\n  users:\n    - {count: 3, session: s}\n  stages:\n    - {duration: 0s, users: 3}\n    - {duration: 1m 500ms, users: 1}\n",
            "load:\n  phases:\n    - {duration: 5s, arrival_rate: 2}\n  stages:\n    - {duration: 5s, users: 7}\n",
        ] {
            let text = format!("{load}sessions:\n  - name: s\n    steps:\n      - request: GET /\n");
            let s = crate::parse_str(&text, "t.yaml").expect("parses");
            assert!(!s.load.stages.is_empty());
            let again = crate::parse_str(&to_yaml(&s), "t.yaml").expect("emitted parses");
            assert_eq!(again, s, "{}", to_yaml(&s));
        }
    }

    #[test]
    fn durations_are_short_and_exact() {
        assert_eq!(duration(Duration::ZERO), "0s");
        assert_eq!(duration(Duration::from_millis(500)), "500ms");
        assert_eq!(duration(Duration::from_secs(90)), "1m 30s");
        assert_eq!(duration(Duration::from_secs(7200)), "2h");
        assert_eq!(duration(Duration::new(2, 500_000_007)), "2s 500ms 7ns");
        for d in [
            Duration::new(3_723, 4_005_006),
            Duration::from_nanos(1),
            Duration::from_secs(100 * 3600),
        ] {
            assert_eq!(humantime::parse_duration(&duration(d)).unwrap(), d);
        }
    }

    #[test]
    fn quoting() {
        assert_eq!(scalar("/index.html", true), "/index.html");
        assert_eq!(scalar("127.0.0.1", true), "127.0.0.1");
        assert_eq!(scalar("Bearer ${token}", false), "Bearer ${token}");
        assert_eq!(scalar("Bearer ${token}", true), "\"Bearer ${token}\"");
        assert_eq!(scalar("a: b", false), "\"a: b\"");
        assert_eq!(scalar("x #y", false), "\"x #y\"");
        assert_eq!(scalar("true", false), "\"true\"");
        assert_eq!(scalar("0x1F", false), "\"0x1F\"");
        assert_eq!(scalar("12", false), "\"12\"");
        assert_eq!(scalar("", false), "\"\"");
        assert_eq!(scalar("-x", false), "\"-x\"");
        assert_eq!(scalar(r#"{"a": 1}"#, false), r#"'{"a": 1}'"#);
        assert_eq!(scalar("it's \"x\"", false), "it's \"x\"");
        assert_eq!(scalar("'a' \"b\"", false), r#"'''a'' "b"'"#);
        assert_eq!(scalar("0 -", true), "\"0 -\"");
        assert_eq!(scalar("a\nb\"", false), r#""a\nb\"""#);
        assert_eq!(scalar("café", true), "café");
    }

    #[test]
    fn percent_round_trips() {
        for r in [0.01, 0.07, 0.001, 0.333, 0.5, 1.0, 0.123456789] {
            let t = percent(r);
            assert_eq!(t.parse::<f64>().unwrap() / 100.0, r, "{r} -> {t}");
        }
    }
}
