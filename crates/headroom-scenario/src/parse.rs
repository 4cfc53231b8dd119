//! The walker from a span-keeping YAML tree to [`crate::model`], collecting located errors.
//!
//! Invariant: every error is pushed through [`Parser::err`], which takes a node span, so no error
//! can lose its position. A node without a start marker (never produced by the loader, but the
//! type allows it) falls back to line 1, column 1 of the file being walked.
//!
//! Variables are checked in document order: a `${var}` must be defined by an earlier `set` or
//! `extract` in the same session (loops and transactions included, in order), or be a builtin.

use crate::model::*;
use crate::ScenarioError;
use marked_yaml::types::MarkedMappingNode;
use marked_yaml::{LoaderOptions, Node, Span};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod amqp;
mod files;
mod ldap;
mod mqtt;
mod protocols;
mod steps;

pub(crate) use amqp::default_amqp_name;
pub(crate) use files::default_file_name;
pub(crate) use ldap::default_ldap_name;
pub(crate) use mqtt::{default_mqtt_name, MAX_MQTT_PAYLOAD};
pub(crate) use protocols::{
    bosh_path_ok, default_sql_name, default_ws_name, default_xmpp_name, xmpp_default_to,
};

const TOP_KEYS: &[&str] = &[
    "name",
    "servers",
    "xmpp",
    "pgsql",
    "websocket",
    "mqtt",
    "mysql",
    "amqp",
    "load",
    "sessions",
    "thresholds",
    "cookies",
    "follow",
    "files",
];
const STEP_KINDS: &[&str] = &[
    "request",
    "think",
    "loop",
    "transaction",
    "connect",
    "close",
    "set",
    "extract",
    "match",
    "send",
    "xmpp",
    "sql",
    "ws",
    "mqtt",
    "ldap",
    "amqp",
    "include",
    "cookie",
    "pipeline",
    "file",
];
use headroom_core::MAX_FOLLOW;
/// Variables every session has without a `set`.
const BUILTINS: &[&str] = &["user_id", "session"];
/// Includes nested deeper than this are reported (guards against unbounded non-cyclic chains).
const MAX_INCLUDE_DEPTH: usize = 16;
/// All `include:`s of one scenario together read at most this much (an include may be named
/// many times, each inlining it again): 4 MiB, as one file (was 64 MiB, which took over 3 GB
/// to parse; see [`crate::MAX_SCENARIO_BYTES`]).
const MAX_INCLUDED_BYTES: u64 = crate::MAX_SCENARIO_BYTES;

pub(crate) type Vars = HashSet<String>;

pub(crate) struct Parser {
    /// Source id (index) -> file name as given.
    files: Vec<String>,
    /// Source id -> its text (to place an error inside a scalar, such as a `set` expression's);
    /// empty for a text without `expr` in it.
    texts: Vec<String>,
    /// The file being walked, for nodes without a marker.
    current: usize,
    errors: Vec<ScenarioError>,
    /// Canonical paths of the files being included, outermost first.
    include_stack: Vec<PathBuf>,
    /// Bytes read by `include:`s so far (bounded by [`MAX_INCLUDED_BYTES`]).
    included_bytes: u64,
    /// The servers' protocol: which of `request`, `send`, `xmpp`, `sql` and `ws` sessions may
    /// use, and which settings section the scenario needs.
    protocol: Protocol,
    /// A server's `protocol` was not understood (already reported): steps and sections are not
    /// checked against `protocol`, which would only repeat that error.
    protocol_unknown: bool,
    /// The `mqtt:` section's CONNECT: what a session's `connect` step starts from.
    mqtt_base: MqttConnect,
    /// Where each `load.once` entry names its session (checked once the sessions are read).
    once_at: Vec<Span>,

    /// The `xmpp:` section's `login` (user and password over the session's variables): each
    /// session must set its variables before the step that first opens a connection.
    xmpp_login: Option<XmppLogin>,
    /// The current session opened a connection already (its login's variables are checked).
    opened: bool,
    /// The scenario has a `files: {root}` section (`file` steps need one).
    file_root: bool,
}

impl Parser {
    pub(crate) fn new() -> Self {
        Parser {
            files: Vec::new(),
            texts: Vec::new(),
            current: 0,
            errors: Vec::new(),
            include_stack: Vec::new(),
            included_bytes: 0,
            protocol: Protocol::Http,
            protocol_unknown: false,
            mqtt_base: MqttConnect::default(),
            once_at: Vec::new(),

            xmpp_login: None,
            opened: false,
            file_root: false,
        }
    }

    pub(crate) fn scenario(
        mut self,
        text: &str,
        file_name: &str,
    ) -> Result<Scenario, Vec<ScenarioError>> {
        if let Ok(p) = Path::new(file_name).canonicalize() {
            self.include_stack.push(p);
        }
        let root = self.load_yaml(text, file_name, LoaderOptions::default());
        let scenario = root.and_then(|root| self.top(&root));
        match scenario {
            Some(s) if self.errors.is_empty() => Ok(s),
            _ => Err(self.errors),
        }
    }

    fn load_yaml(&mut self, text: &str, file_name: &str, opts: LoaderOptions) -> Option<Node> {
        let id = self.files.len();
        self.files.push(file_name.to_string());
        // Kept only where an expression may need its errors placed: a copy of every text
        // doubled the peak memory of a large import's check (the 64 MB HAR's 18.7 MB of YAML,
        // tests/bounds.rs), for nothing unless the file has an `expr`.
        self.texts.push(if text.contains("expr") {
            text.to_string()
        } else {
            String::new()
        });
        self.current = id;
        let opts = opts.error_on_duplicate_keys(true);
        match marked_yaml::parse_yaml_with_options(id, text, opts) {
            Ok(node) => Some(node),
            Err(e) => {
                use marked_yaml::LoadError as E;
                let (mark, msg) = match &e {
                    E::TopLevelMustBeMapping(m) => {
                        (*m, "expected a mapping at the top level".into())
                    }
                    E::TopLevelMustBeSequence(m) => {
                        (*m, "expected a sequence of steps at the top level".into())
                    }
                    E::UnexpectedAnchor(m) => (*m, "anchors and aliases are not supported".into()),
                    E::MappingKeyMustBeScalar(m) => (*m, "mapping keys must be scalars".into()),
                    E::UnexpectedTag(m) => (*m, "YAML tags are not supported".into()),
                    E::ScanError(m, s) => (*m, format!("YAML syntax: {}", s.info())),
                    E::DuplicateKey(d) => match d.key.span().start() {
                        Some(m) => (*m, format!("duplicate key '{}'", d.key.as_str())),
                        None => (
                            marked_yaml::Marker::new(id, 0, 1, 1),
                            "duplicate key".into(),
                        ),
                    },
                };
                self.push(file_name.to_string(), mark.line(), mark.column(), msg);
                None
            }
        }
    }

    fn push(&mut self, file: String, line: usize, column: usize, message: String) {
        self.errors.push(ScenarioError {
            file,
            line: line.max(1),
            column: column.max(1),
            message,
        });
    }

    fn err(&mut self, span: &Span, message: impl Into<String>) {
        let (file, line, col) = match span.start() {
            Some(m) => (m.source(), m.line(), m.column()),
            None => (self.current, 1, 1),
        };
        let name = self.files.get(file).cloned().unwrap_or_default();
        self.push(name, line, col, message.into());
    }

    /// An error of the expression `text`, the scalar `node`: at its very character when the
    /// scalar is written on one line as it reads (plain or quoted without escapes), otherwise
    /// at the scalar, saying which character.
    fn expr_err(&mut self, node: &Node, text: &str, e: &headroom_core::expr::ExprError) {
        let Some(m) = node.span().start() else {
            self.err(node.span(), format!("expr: {e}"));
            return;
        };
        let src = self.texts.get(m.source()).map(String::as_str).unwrap_or("");
        let line = src.lines().nth(m.line().saturating_sub(1)).unwrap_or("");
        let from: String = line.chars().skip(m.column().saturating_sub(1)).collect();
        let quoted = from.starts_with(['"', '\'']);
        let body = if quoted { &from[1..] } else { &from[..] };
        if body.starts_with(text) && text.is_char_boundary(e.at.min(text.len())) {
            let at = e.at.min(text.len());
            let col = m.column() + usize::from(quoted) + text[..at].chars().count();
            let name = self.files.get(m.source()).cloned().unwrap_or_default();
            self.push(name, m.line(), col, format!("expr: {}", e.message));
        } else {
            self.err(node.span(), format!("expr: {e}"));
        }
    }

    // ---- generic helpers -------------------------------------------------------------------

    fn map<'a>(&mut self, node: &'a Node, what: &str) -> Option<&'a MarkedMappingNode> {
        let m = node.as_mapping();
        if m.is_none() {
            self.err(node.span(), format!("{what}: expected a mapping"));
        }
        m
    }

    /// Reports keys of `map` not in `allowed`.
    fn keys(&mut self, map: &MarkedMappingNode, what: &str, allowed: &[&str]) {
        for k in map.keys() {
            if !allowed.contains(&k.as_str()) {
                self.err(
                    k.span(),
                    format!(
                        "unknown key '{}' in {what}; expected one of {}",
                        k.as_str(),
                        allowed.join(", ")
                    ),
                );
            }
        }
    }

    fn required<'a>(
        &mut self,
        map: &'a MarkedMappingNode,
        key: &str,
        what: &str,
    ) -> Option<&'a Node> {
        let n = map.get_node(key);
        if n.is_none() {
            self.err(map.span(), format!("{what} is missing '{key}'"));
        }
        n
    }

    fn string(&mut self, node: &Node, what: &str) -> Option<String> {
        match node.as_scalar() {
            Some(s) => Some(s.as_str().to_string()),
            None => {
                self.err(node.span(), format!("{what}: expected a string"));
                None
            }
        }
    }

    fn name(&mut self, node: &Node, what: &str) -> Option<String> {
        let s = self.string(node, what)?;
        if s.is_empty() {
            self.err(node.span(), format!("{what}: expected a non-empty name"));
            return None;
        }
        Some(s)
    }

    fn var_name(&mut self, node: &Node, what: &str) -> Option<String> {
        let s = self.string(node, what)?;
        let ok = !s.is_empty()
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !s.starts_with(|c: char| c.is_ascii_digit());
        if !ok {
            self.err(
                node.span(),
                format!("{what}: expected a variable name (letters, digits, _), got '{s}'"),
            );
            return None;
        }
        Some(s)
    }

    fn number(&mut self, node: &Node, what: &str) -> Option<f64> {
        let v = node
            .as_scalar()
            .and_then(|s| s.as_str().trim().parse::<f64>().ok());
        match v {
            Some(v) if v.is_finite() => Some(v),
            _ => {
                self.err(node.span(), format!("{what}: expected a number"));
                None
            }
        }
    }

    fn positive(&mut self, node: &Node, what: &str) -> Option<f64> {
        let v = self.number(node, what)?;
        if v <= 0.0 {
            self.err(node.span(), format!("{what} must be positive"));
            return None;
        }
        Some(v)
    }

    fn int(&mut self, node: &Node, what: &str) -> Option<i64> {
        let v = node
            .as_scalar()
            .and_then(|s| s.as_str().trim().parse::<i64>().ok());
        if v.is_none() {
            self.err(node.span(), format!("{what}: expected an integer"));
        }
        v
    }

    fn count(&mut self, node: &Node, what: &str) -> Option<u64> {
        let v = node
            .as_scalar()
            .and_then(|s| s.as_str().trim().parse::<u64>().ok());
        match v {
            Some(v) if v > 0 => Some(v),
            _ => {
                self.err(node.span(), format!("{what}: expected a positive integer"));
                None
            }
        }
    }

    /// `500ms`, `2s`, `1m 30s` (humantime) or a plain number of seconds.
    fn duration(&mut self, node: &Node, what: &str) -> Option<Duration> {
        let text = node.as_scalar().map(|s| s.as_str().trim().to_string());
        let d = text.as_deref().and_then(|t| {
            if let Ok(secs) = t.parse::<f64>() {
                Duration::try_from_secs_f64(secs).ok()
            } else {
                humantime::parse_duration(t).ok()
            }
        });
        if d.is_none() {
            self.err(
                node.span(),
                format!("{what}: expected a duration such as 500ms, 2s, 1m or a number of seconds"),
            );
        }
        d
    }

    fn seq<'a>(&mut self, node: &'a Node, what: &str) -> Option<&'a [Node]> {
        match node.as_sequence() {
            Some(s) => Some(s.as_slice()),
            None => {
                self.err(node.span(), format!("{what}: expected a list"));
                None
            }
        }
    }

    /// Checks every `${name}` in `text` is defined.
    fn refs(&mut self, node: &Node, text: &str, vars: &Vars) {
        let mut rest = text;
        while let Some(i) = rest.find("${") {
            let after = &rest[i + 2..];
            let Some(end) = after.find('}') else {
                self.err(node.span(), "unterminated '${'; expected '${name}'");
                return;
            };
            let name = &after[..end];
            if !vars.contains(name) && !BUILTINS.contains(&name) {
                self.err(
                    node.span(),
                    format!(
                        "undefined variable '${{{name}}}'; define it with an earlier set or extract (builtins: {})",
                        BUILTINS.join(", ")
                    ),
                );
            }
            rest = &after[end + 1..];
        }
    }

    /// Top-level `cookies:` and `follow:`.
    fn http_behaviour(&mut self, map: &marked_yaml::types::MarkedMappingNode) -> HttpBehaviour {
        let mut h = HttpBehaviour::default();
        if let Some(n) = map.get_node("cookies") {
            h.cookies = self.boolean(n, "cookies").unwrap_or(true);
        }
        if let Some(n) = map.get_node("follow") {
            let v = n
                .as_scalar()
                .and_then(|s| s.as_str().trim().parse::<u32>().ok())
                .filter(|&v| v <= MAX_FOLLOW);
            match v {
                Some(v) => h.follow = v,
                None => self.err(
                    n.span(),
                    format!("follow: expected the most redirects to follow, 0 to {MAX_FOLLOW}"),
                ),
            }
        }
        h
    }

    // ---- top level --------------------------------------------------------------------------

    fn top(&mut self, root: &Node) -> Option<Scenario> {
        let map = self.map(root, "scenario")?;
        self.keys(map, "scenario", TOP_KEYS);
        let name = map.get_node("name").and_then(|n| self.string(n, "name"));
        let servers = match map.get_node("servers") {
            Some(n) => self.servers(n),
            None => Vec::new(),
        };
        let link = self.link(map);
        if let LinkSpec::Mqtt(m) = &link {
            self.mqtt_base = m.connect.clone();
        }
        if let LinkSpec::Xmpp(x) = &link {
            self.xmpp_login.clone_from(&x.login);
        }
        let file_root = map.get_node("files").and_then(|n| self.files(n));
        self.file_root = map.get_node("files").is_some();
        let load = self
            .required(map, "load", "scenario")
            .and_then(|n| self.load(n))
            .unwrap_or_default();
        let sessions = match self.required(map, "sessions", "scenario") {
            Some(n) => self.sessions(n),
            None => Vec::new(),
        };
        for u in &load.users {
            if let Some(s) = &u.session {
                if !sessions.iter().any(|x| &x.name == s) {
                    let span = *map.get_node("load").map(|n| n.span()).unwrap_or(map.span());
                    self.err(&span, format!("users refer to unknown session '{s}'"));
                }
            }
        }
        let once_at = std::mem::take(&mut self.once_at);
        for (o, span) in load.once.iter().zip(&once_at) {
            if !sessions.iter().any(|x| x.name == o.session) {
                self.err(span, format!("once: no session named '{}'", o.session));
            }
        }
        let draws = !load.phases.is_empty() || load.users.iter().any(|u| u.session.is_none());
        if draws && !sessions.is_empty() && sessions.iter().all(|s| s.weight == 0.0) {
            let span = *map
                .get_node("sessions")
                .map(|n| n.span())
                .unwrap_or(map.span());
            self.err(
                &span,
                "every session has weight 0, but arrivals or users without a session draw from the mix: give one a weight above 0",
            );
        }
        let http = self.http_behaviour(map);
        let mut scenario = Scenario {
            name,
            servers,
            load,
            sessions,
            thresholds: Vec::new(),
            link,
            http,
            file_root,
        };
        if let Some(n) = map.get_node("thresholds") {
            // Checked against the names the sessions give, with the file's other errors.
            scenario.thresholds = self.thresholds(n, &scenario.metric_names());
        }
        Some(scenario)
    }

    fn servers(&mut self, node: &Node) -> Vec<Server> {
        let mut out = Vec::new();
        for (i, n) in self
            .seq(node, "servers")
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            let Some(m) = self.map(n, "server") else {
                continue;
            };
            self.keys(m, "server", &["host", "port", "protocol", "tls", "http"]);
            let host = self
                .required(m, "host", "server")
                .and_then(|h| self.name(h, "host"));
            let port = self.required(m, "port", "server").and_then(|p| {
                let v = p.as_scalar().and_then(|s| s.as_str().parse::<u16>().ok());
                match v {
                    Some(v) if v > 0 => Some(v),
                    _ => {
                        self.err(p.span(), "port: expected an integer 1..65535");
                        None
                    }
                }
            });
            let mut protocol = Protocol::Http;
            if let Some(p) = m.get_node("protocol") {
                match p.as_scalar().map(|s| s.as_str()) {
                    Some("http") => {}
                    Some("raw") | Some("tcp") => protocol = Protocol::Raw,
                    Some("xmpp") => protocol = Protocol::Xmpp,
                    Some("pgsql") => protocol = Protocol::Pgsql,
                    Some("websocket") | Some("ws") => protocol = Protocol::WebSocket,
                    Some("mqtt") => protocol = Protocol::Mqtt,
                    Some("ldap") => protocol = Protocol::Ldap,
                    Some("mysql") => protocol = Protocol::Mysql,
                    Some("amqp") => protocol = Protocol::Amqp,
                    _ => {
                        self.err(
                            p.span(),
                            "protocol: expected one of http, raw (or tcp), xmpp, pgsql, \
                             websocket (or ws), mqtt, ldap, mysql, amqp",
                        );
                        self.protocol_unknown = true;
                        continue;
                    }
                }
            }
            // A server without `protocol` speaks http: it counts in the comparison too.
            if i > 0 && !self.protocol_unknown && protocol != self.protocol {
                let span = *m.get_node("protocol").map_or(m.span(), |p| p.span());
                self.err(
                    &span,
                    format!(
                        "protocol: every server of a scenario speaks the same one (this one \
                         speaks {}, the first {})",
                        protocol.as_str(),
                        self.protocol.as_str()
                    ),
                );
                continue;
            }
            self.protocol = protocol;
            let tls = m.get_node("tls").and_then(|t| self.server_tls(t, protocol));
            let mut http2 = false;
            if let Some(h) = m.get_node("http") {
                match h.as_scalar().map(|s| s.as_str()) {
                    Some("2") if protocol == Protocol::Http => http2 = true,
                    Some("1.1") => {}
                    Some("2") => self.err(
                        h.span(),
                        format!(
                            "http: 2 is for http servers (this one speaks {})",
                            protocol.as_str()
                        ),
                    ),
                    _ => self.err(h.span(), "http: expected 1.1 or 2"),
                }
            }
            if i > 0 && out.first().is_some_and(|f: &Server| f.http2 != http2) {
                self.err(
                    m.span(),
                    "http: every server of a scenario speaks the same HTTP version",
                );
            }
            if let (Some(host), Some(port)) = (host, port) {
                out.push(Server {
                    host,
                    port,
                    protocol,
                    tls,
                    http2,
                });
            }
        }
        out
    }

    /// `tls: true`, `tls: false` or `tls: {insecure, cacert, cert, key, min, max, resume,
    /// server_name, starttls (xmpp, ldap), sslmode (pgsql)}`.
    fn server_tls(&mut self, node: &Node, protocol: Protocol) -> Option<ServerTls> {
        if let Some(b) = node.as_scalar().and_then(|s| s.as_bool()) {
            return b.then(ServerTls::default);
        }
        let m = self.map(node, "tls")?;
        self.keys(
            m,
            "tls",
            &[
                "insecure",
                "cacert",
                "cert",
                "key",
                "min",
                "max",
                "resume",
                "server_name",
                "starttls",
                "sslmode",
            ],
        );
        let mut t = ServerTls::default();
        let flag = |p: &mut Self, k: &str| {
            m.get_node(k)
                .and_then(|n| match n.as_scalar().and_then(|s| s.as_bool()) {
                    Some(b) => Some(b),
                    None => {
                        p.err(n.span(), format!("tls.{k}: expected true or false"));
                        None
                    }
                })
        };
        t.insecure = flag(self, "insecure").unwrap_or(false);
        t.resume = flag(self, "resume");
        t.starttls = flag(self, "starttls").unwrap_or(false);
        for (k, slot) in [
            ("cacert", &mut t.cacert),
            ("cert", &mut t.cert),
            ("key", &mut t.key),
            ("server_name", &mut t.server_name),
        ] {
            if let Some(n) = m.get_node(k) {
                *slot = self.name(n, &format!("tls.{k}"));
            }
        }
        if t.cert.is_some() != t.key.is_some() {
            self.err(m.span(), "tls: cert and key go together (mutual TLS)");
        }
        for (k, slot) in [("min", &mut t.min), ("max", &mut t.max)] {
            if let Some(n) = m.get_node(k) {
                *slot = match n.as_scalar().map(|s| s.as_str()) {
                    Some("1.2") => Some(headroom_core::TlsVersion::Tls12),
                    Some("1.3") => Some(headroom_core::TlsVersion::Tls13),
                    _ => {
                        self.err(n.span(), format!("tls.{k}: expected 1.2 or 1.3"));
                        None
                    }
                };
            }
        }
        if let (Some(a), Some(b)) = (t.min, t.max) {
            if a > b {
                self.err(m.span(), "tls: min is above max");
            }
        }
        if let Some(n) = m.get_node("starttls") {
            if t.starttls && !matches!(protocol, Protocol::Xmpp | Protocol::Ldap) {
                self.err(n.span(), "tls.starttls: only for protocols xmpp and ldap");
            }
        }
        if let Some(n) = m.get_node("sslmode") {
            if protocol != Protocol::Pgsql {
                self.err(n.span(), "tls.sslmode: only for protocol pgsql");
            }
            match n.as_scalar().map(|s| s.as_str()) {
                Some("disable") => return None,
                Some("prefer") => t.sslmode = Some(PgSslMode::Prefer),
                Some("require") => t.sslmode = Some(PgSslMode::Require),
                Some("verify-full") => t.sslmode = Some(PgSslMode::VerifyFull),
                _ => self.err(
                    n.span(),
                    "tls.sslmode: expected disable, prefer, require or verify-full",
                ),
            }
        }
        Some(t)
    }

    fn load(&mut self, node: &Node) -> Option<Load> {
        let m = self.map(node, "load")?;
        self.keys(m, "load", &["phases", "users", "stages", "once"]);
        let mut load = Load::default();
        if let Some(p) = m.get_node("phases") {
            for n in self.seq(p, "phases").unwrap_or_default() {
                if let Some(ph) = self.phase(n) {
                    load.phases.push(ph);
                }
            }
        }
        if let Some(u) = m.get_node("users") {
            for n in self.seq(u, "users").unwrap_or_default() {
                let Some(um) = self.map(n, "users") else {
                    continue;
                };
                self.keys(um, "users", &["count", "session"]);
                let count = self
                    .required(um, "count", "users")
                    .and_then(|c| self.count(c, "count"));
                let session = um.get_node("session").and_then(|s| self.name(s, "session"));
                if let Some(count) = count {
                    load.users.push(Users { count, session });
                }
            }
        }
        if let Some(st) = m.get_node("stages") {
            load.stages = self.stages(st, &load.users);
        }
        if let Some(o) = m.get_node("once") {
            load.once = self.once(o);
        }
        if ["phases", "users", "stages", "once"]
            .iter()
            .all(|k| m.get_node(k).is_none())
        {
            self.err(
                m.span(),
                "load needs 'phases' (open arrivals), 'users' (closed populations), 'stages' \
                 (a ramped closed population) or 'once' (users that run a session once)",
            );
        }
        Some(load)
    }

    /// `once: [{session: s, at: 10s}, ...]`: users that each run `session` once, from `at`
    /// into the run (default 0s).
    fn once(&mut self, node: &Node) -> Vec<Once> {
        let mut out = Vec::new();
        let Some(list) = self.seq(node, "once") else {
            return out;
        };
        if list.len() > MAX_ONCE {
            self.err(
                node.span(),
                format!("once: {} users, at most {MAX_ONCE}", list.len()),
            );
            return out;
        }
        for n in list {
            let Some(om) = self.map(n, "once") else {
                continue;
            };
            self.keys(om, "once", &["session", "at"]);
            let session = self.required(om, "session", "once").and_then(|s| {
                let name = self.name(s, "session")?;
                Some((name, *s.span()))
            });
            let at = match om.get_node("at") {
                Some(a) => self.duration(a, "at"),
                None => Some(Duration::ZERO),
            };
            if let (Some((session, span)), Some(at)) = (session, at) {
                out.push(Once { session, at });
                self.once_at.push(span);
            }
        }
        out
    }

    /// `stages: [{duration: 10s, users: 100}, ...]`: the closed population's ramp. With
    /// `users:` populations, the stages' peak must be their total (the stages say how many
    /// users are alive, the populations which sessions they run); without, the peak users draw
    /// from the session mix.
    fn stages(&mut self, node: &Node, pops: &[Users]) -> Vec<Stage> {
        let mut out = Vec::new();
        let Some(list) = self.seq(node, "stages") else {
            return out;
        };
        if list.len() > headroom_core::MAX_RAMP_STAGES {
            self.err(
                node.span(),
                format!(
                    "stages: {} stages, at most {}",
                    list.len(),
                    headroom_core::MAX_RAMP_STAGES
                ),
            );
            return out;
        }
        let mut ok = true;
        for n in list {
            let Some(sm) = self.map(n, "stage") else {
                ok = false;
                continue;
            };
            self.keys(sm, "stage", &["duration", "users"]);
            let duration = self
                .required(sm, "duration", "stage")
                .and_then(|d| self.duration(d, "duration"));
            let users = self.required(sm, "users", "stage").and_then(|u| {
                let v = u
                    .as_scalar()
                    .and_then(|s| s.as_str().trim().parse::<u32>().ok());
                if v.is_none() {
                    self.err(
                        u.span(),
                        "users: expected a whole number of users from 0 to 4294967295",
                    );
                }
                v
            });
            match (duration, users) {
                (Some(duration), Some(users)) => out.push(Stage {
                    duration,
                    users: u64::from(users),
                }),
                _ => ok = false,
            }
        }
        if !ok {
            return out;
        }
        let peak = out.iter().map(|s| s.users).max().unwrap_or(0);
        if peak == 0 {
            self.err(
                node.span(),
                "stages: the users never rise above 0; give a stage such as {duration: 10s, users: 100}",
            );
        } else if out.iter().all(|s| s.duration.is_zero()) {
            self.err(
                node.span(),
                "stages: every stage lasts 0s; give one a duration",
            );
        }
        let total: u64 = pops.iter().map(|u| u.count).sum();
        if !pops.is_empty() && total != peak {
            self.err(
                node.span(),
                format!(
                    "stages peak at {peak} users but the populations under 'users' add up to \
                     {total}: make them equal (the stages say how many users are alive, the \
                     populations which sessions they run)"
                ),
            );
        }
        out
    }

    fn phase(&mut self, node: &Node) -> Option<Phase> {
        let m = self.map(node, "phase")?;
        let keys = [
            "duration",
            "arrival_rate",
            "interarrival",
            "ramp",
            "arrival",
            "max_users",
        ];
        self.keys(m, "phase", &keys);
        let duration = self
            .required(m, "duration", "phase")
            .and_then(|d| self.duration(d, "duration"));
        let given: Vec<&str> = ["arrival_rate", "interarrival", "ramp"]
            .into_iter()
            .filter(|k| m.get_node(k).is_some())
            .collect();
        let rate = match given.as_slice() {
            [] => {
                self.err(
                    m.span(),
                    "phase needs one of arrival_rate, interarrival or ramp",
                );
                None
            }
            ["arrival_rate"] => {
                let n = m.get_node("arrival_rate")?;
                self.positive(n, "arrival_rate").map(Rate::Fixed)
            }
            ["interarrival"] => {
                let n = m.get_node("interarrival")?;
                match self.duration(n, "interarrival") {
                    Some(d) if !d.is_zero() => Some(Rate::Fixed(1.0 / d.as_secs_f64())),
                    Some(_) => {
                        self.err(n.span(), "interarrival must be positive");
                        None
                    }
                    None => None,
                }
            }
            ["ramp"] => {
                let n = m.get_node("ramp")?;
                let rm = self.map(n, "ramp")?;
                self.keys(rm, "ramp", &["from", "to"]);
                let from = self
                    .required(rm, "from", "ramp")
                    .and_then(|v| self.number(v, "from"));
                let to = self
                    .required(rm, "to", "ramp")
                    .and_then(|v| self.number(v, "to"));
                match (from, to) {
                    (Some(f), Some(t)) if f >= 0.0 && t >= 0.0 && f + t > 0.0 => {
                        Some(Rate::Ramp { from: f, to: t })
                    }
                    (Some(_), Some(_)) => {
                        self.err(n.span(), "ramp rates must be >= 0 and not both 0");
                        None
                    }
                    _ => None,
                }
            }
            _ => {
                let n = m.get_node(given[1])?;
                self.err(
                    n.span(),
                    "give only one of arrival_rate, interarrival or ramp in a phase",
                );
                None
            }
        };
        let arrival = match m.get_node("arrival") {
            None => Some(Arrival::Poisson),
            Some(a) => match a.as_scalar().map(|s| s.as_str()) {
                Some("poisson") => Some(Arrival::Poisson),
                Some("constant") => Some(Arrival::Constant),
                _ => {
                    self.err(a.span(), "arrival: expected one of poisson, constant");
                    None
                }
            },
        };
        let max_users = match m.get_node("max_users") {
            Some(n) => Some(self.count(n, "max_users")?),
            None => None,
        };
        Some(Phase {
            duration: duration?,
            rate: rate?,
            arrival: arrival?,
            max_users,
        })
    }

    fn sessions(&mut self, node: &Node) -> Vec<Session> {
        let mut out: Vec<Session> = Vec::new();
        let list = self.seq(node, "sessions").unwrap_or_default();
        if list.is_empty() && node.as_sequence().is_some() {
            self.err(node.span(), "sessions: expected at least one session");
        }
        for n in list {
            let Some(m) = self.map(n, "session") else {
                continue;
            };
            self.keys(m, "session", &["name", "weight", "steps", "surge"]);
            let name = self
                .required(m, "name", "session")
                .and_then(|x| self.name(x, "name"));
            if let (Some(name), Some(nn)) = (&name, m.get_node("name")) {
                if out.iter().any(|s| &s.name == name) {
                    self.err(nn.span(), format!("duplicate session name '{name}'"));
                }
            }
            let weight = match m.get_node("weight") {
                None => Some(1.0),
                Some(w) => match self.number(w, "weight") {
                    Some(v) if v >= 0.0 && v.is_finite() => Some(v),
                    Some(_) => {
                        self.err(
                            w.span(),
                            "weights must be 0 or more (0: out of the mix, run only by users naming the session)",
                        );
                        None
                    }
                    None => None,
                },
            };
            let mut vars = Vars::new();
            self.opened = false;
            let (mut steps, mut surge) = (Vec::new(), None);
            match (m.get_node("steps"), m.get_node("surge")) {
                (Some(_), Some(sg)) => {
                    self.err(sg.span(), "a session has either steps or surge, not both");
                }
                (None, Some(sg)) => surge = self.surge(sg).map(Box::new),
                _ => {
                    steps = match self.required(m, "steps", "session") {
                        Some(s) => self.steps(s, &mut vars),
                        None => Vec::new(),
                    };
                    if let (Some(name), Some(s)) = (&name, m.get_node("steps")) {
                        if steps.is_empty() && s.as_sequence().is_some_and(|q| q.is_empty()) {
                            self.err(s.span(), format!("session '{name}' is empty"));
                        }
                    }
                }
            }
            if let (Some(name), Some(weight)) = (name, weight) {
                if steps.is_empty() && surge.is_none() {
                    continue;
                }
                out.push(Session {
                    name,
                    weight,
                    steps,
                    surge,
                });
            }
        }
        out
    }

    /// `surge: {files: 2000, requests_per_session: 6.5, ...}`: SURGE defaults with overrides.
    fn surge(&mut self, node: &Node) -> Option<headroom_core::surge::SurgeParams> {
        use headroom_core::surge::SurgeParams;
        let mut p = SurgeParams::default();
        if node.as_scalar().is_some_and(|s| s.as_str() == "default") {
            return Some(p);
        }
        let m = self.map(node, "surge")?;
        let mut ok = true;
        for (k, v) in m.iter() {
            let key = k.as_str();
            if key == "prefix" {
                match v.as_scalar() {
                    Some(s) if s.as_str().starts_with('/') => p.prefix = s.as_str().to_string(),
                    _ => {
                        self.err(
                            v.span(),
                            "surge prefix: expected a URL path such as /surge/",
                        );
                        ok = false;
                    }
                }
                continue;
            }
            if !SurgeParams::KEYS.contains(&key) {
                self.err(
                    k.span(),
                    format!(
                        "unknown surge key '{key}'; expected one of prefix, {}",
                        SurgeParams::KEYS.join(", ")
                    ),
                );
                ok = false;
                continue;
            }
            let Some(x) = self.number(v, key) else {
                ok = false;
                continue;
            };
            if let Err(e) = p.set(key, x) {
                self.err(v.span(), format!("surge {key}: {e}"));
                ok = false;
            }
        }
        if let Err(e) = p.validate() {
            self.err(node.span(), format!("surge: {e}"));
            ok = false;
        }
        ok.then_some(p)
    }

    // ---- thresholds -------------------------------------------------------------------------

    /// The thresholds; each name (`p99(NAME)`, `mean(NAME)`) must be one of `names`.
    fn thresholds(&mut self, node: &Node, names: &[&str]) -> Vec<Threshold> {
        let mut out = Vec::new();
        let Some(m) = self.map(node, "thresholds") else {
            return out;
        };
        for (k, v) in m.iter() {
            let metric = parse_metric(k.as_str());
            if metric.is_none() {
                self.err(
                    k.span(),
                    format!(
                        "unknown threshold metric '{}'; expected error_rate, rps, mean(NAME) or pNN(NAME) such as p99(login)",
                        k.as_str()
                    ),
                );
            }
            let cmp = v.as_scalar().and_then(|s| parse_cmp(s.as_str()));
            if cmp.is_none() {
                self.err(
                    v.span(),
                    "threshold: expected a comparison such as '< 200ms', '<= 1%' or '> 100'",
                );
            }
            let named = match &metric {
                Some(Metric::Percentile { name, .. } | Metric::Mean { name }) => name.as_deref(),
                _ => None,
            };
            if let Some(n) = named.filter(|n| !names.contains(n)) {
                const SHOWN: usize = 20;
                let mut known = names
                    .iter()
                    .take(SHOWN)
                    .copied()
                    .collect::<Vec<_>>()
                    .join(", ");
                if names.len() > SHOWN {
                    known.push_str(&format!(", ... ({} in all)", names.len()));
                }
                self.err(
                    k.span(),
                    format!(
                        "threshold '{}' names '{n}', which is no request or transaction (names: {known})",
                        k.as_str()
                    ),
                );
                continue;
            }
            if let (Some(metric), Some((op, value))) = (metric, cmp) {
                out.push(Threshold {
                    text: k.as_str().to_string(),
                    metric,
                    op,
                    value,
                });
            }
        }
        out
    }
}

fn parse_metric(key: &str) -> Option<Metric> {
    let key = key.trim();
    match key {
        "error_rate" => return Some(Metric::ErrorRate),
        "rps" => return Some(Metric::Rps),
        _ => {}
    }
    let (head, name) = match key.find('(') {
        Some(i) if key.ends_with(')') => {
            let inner = key[i + 1..key.len() - 1].trim();
            (&key[..i], (!inner.is_empty()).then(|| inner.to_string()))
        }
        Some(_) => return None,
        None => (key, None),
    };
    if head == "mean" {
        return Some(Metric::Mean { name });
    }
    let p: f64 = head.strip_prefix('p')?.parse().ok()?;
    (p > 0.0 && p <= 100.0).then_some(Metric::Percentile { p, name })
}

fn parse_cmp(text: &str) -> Option<(CmpOp, ThresholdValue)> {
    let t = text.trim();
    let (op, rest) = if let Some(r) = t.strip_prefix("<=") {
        (CmpOp::Le, r)
    } else if let Some(r) = t.strip_prefix(">=") {
        (CmpOp::Ge, r)
    } else if let Some(r) = t.strip_prefix('<') {
        (CmpOp::Lt, r)
    } else if let Some(r) = t.strip_prefix('>') {
        (CmpOp::Gt, r)
    } else {
        return None;
    };
    let rest = rest.trim();
    let value = if let Some(pct) = rest.strip_suffix('%') {
        let v: f64 = pct.trim().parse().ok()?;
        ThresholdValue::Ratio(v / 100.0)
    } else if let Ok(v) = rest.parse::<f64>() {
        ThresholdValue::Number(v)
    } else {
        ThresholdValue::Duration(humantime::parse_duration(rest).ok()?)
    };
    match value {
        ThresholdValue::Ratio(v) | ThresholdValue::Number(v) if !v.is_finite() => None,
        v => Some((op, v)),
    }
}
