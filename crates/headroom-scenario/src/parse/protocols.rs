//! The protocols above TCP other than HTTP: the `xmpp`, `sql` and `ws` steps and the settings
//! sections `xmpp:`, `pgsql:` and `websocket:` they need. Split from `steps.rs` to keep files
//! short; same invariants as the parent: every error goes through `Parser::err`, located.
//!
//! Which step kinds a session may use follows from the servers' `protocol` (read before the
//! sessions): `request` on http, `send` on raw, `xmpp` on xmpp, `sql` on pgsql and mysql, `ws` on
//! websocket. The section of the servers' protocol becomes [`Scenario::link`].

use super::steps::{first_line_name, step_of};
use super::{Parser, Vars, BUILTINS};
use crate::model::*;
use marked_yaml::types::MarkedMappingNode;
use marked_yaml::{Node, Span};

/// Every `type` of an `xmpp` step, as written.
const XMPP_TYPES: &[&str] = &[
    "presence:initial",
    "presence:final",
    "presence:broadcast",
    "presence:directed",
    "presence:subscribe",
    "roster:get",
    "roster:add",
    "roster:rename",
    "roster:remove",
    "chat",
    "raw",
    "close",
];
/// Every key of an `xmpp` step mapping; which of them a type takes is [`xmpp_type_keys`].
const XMPP_KEYS: &[&str] = &[
    "type", "to", "size", "text", "show", "status", "alias", "data", "ack", "name",
];
/// RFC 6121 `<show/>` values.
const SHOWS: &[&str] = &["chat", "away", "xa", "dnd"];
const DESTS: &str = "online, offline, random, unique, previous";

/// The keys `type` takes besides `type`, `ack` and `name`.
fn xmpp_type_keys(t: &str) -> &'static [&'static str] {
    match t {
        "chat" => &["to", "size", "text"],
        "presence:broadcast" => &["show", "status"],
        "presence:directed" => &["to", "show", "status"],
        "presence:subscribe" | "roster:add" | "roster:remove" => &["to"],
        "roster:rename" => &["to", "alias"],
        "raw" => &["data"],
        _ => &[],
    }
}

/// The destination an xmpp step of type `t` goes to without `to`; `None` for types that take
/// none.
pub(crate) fn xmpp_default_to(t: &str) -> Option<XmppDest> {
    match t {
        "chat" | "presence:directed" => Some(XmppDest::Online),
        "presence:subscribe" | "roster:add" => Some(XmppDest::Random),
        "roster:rename" | "roster:remove" => Some(XmppDest::Previous),
        _ => None,
    }
}

/// Calls `f` on the name of each `${name}` of `text`, in order; `Err` for a `${` without its
/// `}` or an empty name.
fn var_refs(text: &str, mut f: impl FnMut(&str) -> Result<(), String>) -> Result<(), String> {
    let mut rest = text;
    while let Some(i) = rest.find("${") {
        let after = &rest[i + 2..];
        let Some(end) = after.find('}') else {
            return Err("unterminated '${'; expected '${name}'".into());
        };
        if end == 0 {
            return Err("'${}' names no variable".into());
        }
        f(&after[..end])?;
        rest = &after[end + 1..];
    }
    Ok(())
}

/// An xmpp step's metric name without `name`: `xmpp:TYPE`.
pub(crate) fn default_xmpp_name<T>(a: &XmppAction<T>) -> String {
    format!("xmpp:{}", a.type_name())
}

/// A sql step's metric name without `name`: the query's first line, at most 40 characters.
pub(crate) fn default_sql_name(query: &str) -> String {
    first_line_name(query, "sql")
}

/// A ws step's metric name without `name`: `ws:send`, `ws:ping` or `ws:close`.
pub(crate) fn default_ws_name<T>(a: &WsAction<T>) -> &'static str {
    match a {
        WsAction::Message { .. } => "ws:send",
        WsAction::Ping => "ws:ping",
        WsAction::Close => "ws:close",
    }
}

impl Parser {
    /// True when the servers' protocol is known and is not `p`.
    pub(super) fn protocol_mismatch(&self, p: Protocol) -> bool {
        !self.protocol_unknown && self.protocol != p
    }

    /// Reports a step kind (at its key) the servers' protocol does not speak.
    pub(super) fn step_needs(&mut self, key: &Span, what: &str, p: Protocol) {
        if self.protocol_mismatch(p) {
            self.err(
                key,
                format!(
                    "{what} needs servers with `protocol: {}`; these speak {} (use {} steps)",
                    p.as_str(),
                    self.protocol.as_str(),
                    step_of(self.protocol)
                ),
            );
        }
    }

    pub(super) fn boolean(&mut self, node: &Node, what: &str) -> Option<bool> {
        let v = node.as_scalar().and_then(|s| s.as_bool());
        if v.is_none() {
            self.err(node.span(), format!("{what}: expected true or false"));
        }
        v
    }

    // ---- xmpp -------------------------------------------------------------------------------

    /// `xmpp: TYPE` or `xmpp: {type, to, size, text, show, status, alias, data, ack, name}`.
    pub(super) fn xmpp(&mut self, node: &Node, vars: &Vars) -> Option<Xmpp> {
        if node.as_scalar().is_some() {
            let t = self.xmpp_type(node)?;
            let action = self.xmpp_action(t, None, node, vars)?;
            return Some(Xmpp {
                name: default_xmpp_name(&action),
                action,
                ack: XmppAck::Reply,
            });
        }
        let m = self.map(node, "xmpp")?;
        self.keys(m, "xmpp", XMPP_KEYS);
        let tn = self.required(m, "type", "xmpp")?;
        let t = self.xmpp_type(tn)?;
        let takes = xmpp_type_keys(t);
        for k in m.keys() {
            let k = k.as_str();
            let general = ["type", "ack", "name"].contains(&k);
            if XMPP_KEYS.contains(&k) && !general && !takes.contains(&k) {
                let mut allowed = vec!["type"];
                allowed.extend(takes);
                allowed.extend(["ack", "name"]);
                let span = *m
                    .keys()
                    .find(|x| x.as_str() == k)
                    .map_or(m.span(), |x| x.span());
                self.err(
                    &span,
                    format!(
                        "'{k}' does not apply to xmpp {t}; it takes {}",
                        allowed.join(", ")
                    ),
                );
            }
        }
        let ack = match m.get_node("ack") {
            Some(a) => self.xmpp_ack(a),
            None => Some(XmppAck::Reply),
        };
        let action = self.xmpp_action(t, Some(m), node, vars);
        let name = match m.get_node("name") {
            Some(n) => self.name(n, "name"),
            None => action.as_ref().map(default_xmpp_name),
        };
        Some(Xmpp {
            name: name?,
            action: action?,
            ack: ack?,
        })
    }

    fn xmpp_type(&mut self, node: &Node) -> Option<&'static str> {
        let s = node.as_scalar().map(|s| s.as_str()).unwrap_or_default();
        let t = XMPP_TYPES.iter().copied().find(|t| *t == s);
        if t.is_none() {
            self.err(
                node.span(),
                format!(
                    "xmpp: unknown type '{s}'; expected one of {}",
                    XMPP_TYPES.join(", ")
                ),
            );
        }
        t
    }

    fn xmpp_ack(&mut self, node: &Node) -> Option<XmppAck> {
        match node.as_scalar().map(|s| s.as_str()) {
            Some("no_ack") => Some(XmppAck::NoAck),
            Some("local") => Some(XmppAck::Local),
            Some("reply") => Some(XmppAck::Reply),
            Some("global") => {
                self.err(
                    node.span(),
                    "ack: Tsung's `global` is a barrier across all users, which headroom does \
                     not have; use `reply` (wait for the matching reply) or `no_ack`",
                );
                None
            }
            _ => {
                self.err(node.span(), "ack: expected one of no_ack, local, reply");
                None
            }
        }
    }

    /// The action of type `t` from the mapping `m` (`None` for the bare `xmpp: TYPE`); `at` is
    /// where a missing key is reported.
    fn xmpp_action(
        &mut self,
        t: &str,
        m: Option<&MarkedMappingNode>,
        at: &Node,
        vars: &Vars,
    ) -> Option<XmppAction<String>> {
        // Keys the type does not take are reported by the caller and ignored here.
        let takes = xmpp_type_keys(t);
        let get = |k: &str| m.filter(|_| takes.contains(&k)).and_then(|m| m.get_node(k));
        let to = match get("to") {
            Some(n) => {
                let d = n.as_scalar().and_then(|s| XmppDest::parse(s.as_str()));
                if d.is_none() {
                    self.err(n.span(), format!("to: expected one of {DESTS}"));
                }
                d
            }
            None => xmpp_default_to(t),
        };
        if to.is_some() && self.xmpp_login.is_some() {
            let span = *get("to").map_or(at.span(), |n| n.span());
            self.err(
                &span,
                format!(
                    "xmpp {t} goes to another user (`to`), picked among the numbered accounts \
                     of xmpp.users; this scenario's users log in with xmpp.login, which numbers \
                     none (send a `raw` stanza to a JID instead)"
                ),
            );
            return None;
        }
        let show = match get("show") {
            Some(n) => {
                let s = n.as_scalar().map(|s| s.as_str()).unwrap_or_default();
                if !SHOWS.contains(&s) {
                    self.err(
                        n.span(),
                        format!("show: expected one of {}", SHOWS.join(", ")),
                    );
                    return None;
                }
                Some(s.to_string())
            }
            None => None,
        };
        let status = match get("status") {
            Some(n) => Some(self.string(n, "status")?),
            None => None,
        };
        let span = *at.span();
        Some(match t {
            "presence:initial" => XmppAction::PresenceInitial,
            "presence:final" => XmppAction::PresenceFinal,
            "presence:broadcast" => XmppAction::PresenceBroadcast { show, status },
            "presence:directed" => XmppAction::PresenceDirected {
                to: to?,
                show,
                status,
            },
            "presence:subscribe" => XmppAction::PresenceSubscribe { to: to? },
            "roster:get" => XmppAction::RosterGet,
            "roster:add" => XmppAction::RosterAdd { to: to? },
            "roster:rename" => {
                let Some(n) = get("alias") else {
                    self.missing(
                        &span,
                        "xmpp roster:rename is missing 'alias' (the roster name to set)",
                        "{type: roster:rename, alias: friend}",
                        m.is_none(),
                    );
                    return None;
                };
                let name = self.name(n, "alias")?;
                XmppAction::RosterRename { to: to?, name }
            }
            "roster:remove" => XmppAction::RosterRemove { to: to? },
            "chat" => {
                let (size, text) = match (get("size"), get("text")) {
                    (Some(_), Some(x)) => {
                        self.err(x.span(), "xmpp chat takes 'size' or 'text', not both");
                        return None;
                    }
                    (Some(n), None) => (self.count(n, "size")? as usize, None),
                    (None, Some(n)) => {
                        let text = self.string(n, "text")?;
                        self.refs(n, &text, vars);
                        (0, Some(text))
                    }
                    (None, None) => {
                        self.missing(
                            &span,
                            "xmpp chat needs 'size' (body bytes, at least 1) or 'text'",
                            "{type: chat, size: 64}",
                            m.is_none(),
                        );
                        return None;
                    }
                };
                XmppAction::Chat {
                    to: to?,
                    size,
                    text,
                }
            }
            "raw" => {
                let Some(n) = get("data") else {
                    self.missing(
                        &span,
                        "xmpp raw is missing 'data' (the bytes to send)",
                        "{type: raw, data: \"<presence/>\"}",
                        m.is_none(),
                    );
                    return None;
                };
                let data = self.string(n, "data")?;
                self.refs(n, &data, vars);
                XmppAction::Raw(data)
            }
            _ => XmppAction::Close,
        })
    }

    /// A missing key; for a bare `xmpp: TYPE`, with the mapping form to write instead.
    fn missing(&mut self, span: &Span, message: &str, example: &str, bare: bool) {
        if bare {
            self.err(span, format!("{message}; write it as a mapping: {example}"));
        } else {
            self.err(span, message);
        }
    }

    // ---- sql --------------------------------------------------------------------------------

    /// `sql: QUERY` or `sql: {query, params: [...], prepare, name}`.
    pub(super) fn sql(&mut self, node: &Node, vars: &Vars) -> Option<Sql> {
        if node.as_scalar().is_some() {
            let query = self.query(node, vars)?;
            return Some(Sql {
                name: default_sql_name(&query),
                query,
                params: Vec::new(),
                prepare: false,
            });
        }
        let m = self.map(node, "sql")?;
        self.keys(m, "sql", &["query", "params", "prepare", "name"]);
        let query = self
            .required(m, "query", "sql")
            .and_then(|q| self.query(q, vars));
        let mut params = Some(Vec::new());
        if let Some(pn) = m.get_node("params") {
            match self.seq(pn, "params") {
                Some(list) => {
                    for p in list {
                        match self.string(p, "params entry") {
                            Some(s) => {
                                self.refs(p, &s, vars);
                                if let Some(v) = params.as_mut() {
                                    v.push(s);
                                }
                            }
                            None => params = None,
                        }
                    }
                }
                None => params = None,
            }
        }
        let prepare = match m.get_node("prepare") {
            Some(p) => self.boolean(p, "prepare"),
            None => Some(false),
        };
        let name = match (m.get_node("name"), &query) {
            (Some(n), _) => self.name(n, "name"),
            (None, Some(q)) => Some(default_sql_name(q)),
            (None, None) => None,
        };
        Some(Sql {
            name: name?,
            query: query?,
            params: params?,
            prepare: prepare?,
        })
    }

    fn query(&mut self, node: &Node, vars: &Vars) -> Option<String> {
        let q = self.string(node, "query")?;
        if q.trim().is_empty() {
            self.err(node.span(), "query: expected an SQL statement, got nothing");
            return None;
        }
        self.refs(node, &q, vars);
        Some(q)
    }

    // ---- ws ---------------------------------------------------------------------------------

    /// `ws: ping`, `ws: close`, `ws: {send, binary, reply, name}` or `ws: {ping|close: true,
    /// name}`.
    pub(super) fn ws(&mut self, node: &Node, vars: &Vars) -> Option<Ws> {
        const FORMS: &str = "ping, close, {send: TEXT, binary, reply, name}, {ping: true, name} \
                             or {close: true, name}";
        if let Some(s) = node.as_scalar() {
            let action = match s.as_str() {
                "ping" => WsAction::Ping,
                "close" => WsAction::Close,
                _ => {
                    self.err(node.span(), format!("ws: expected {FORMS}"));
                    return None;
                }
            };
            return Some(Ws {
                name: default_ws_name(&action).to_string(),
                action,
            });
        }
        let m = self.map(node, "ws")?;
        self.keys(
            m,
            "ws",
            &["send", "binary", "reply", "ping", "close", "name"],
        );
        let given: Vec<(&str, &Node)> = ["send", "ping", "close"]
            .into_iter()
            .filter_map(|k| m.get_node(k).map(|n| (k, n)))
            .collect();
        let action = match given.as_slice() {
            [("send", n)] => {
                let data = self.string(n, "send");
                if let Some(d) = &data {
                    self.refs(n, d, vars);
                }
                let binary = match m.get_node("binary") {
                    Some(b) => self.boolean(b, "binary"),
                    None => Some(false),
                };
                let reply = match m.get_node("reply") {
                    Some(r) => self.boolean(r, "reply"),
                    None => Some(true),
                };
                WsAction::Message {
                    binary: binary?,
                    data: data?,
                    reply: reply?,
                }
            }
            [(kind, n)] => {
                for k in ["binary", "reply"] {
                    if let Some(x) = m.keys().find(|x| x.as_str() == k) {
                        self.err(
                            x.span(),
                            format!("'{k}' applies to send only, not to a ws {kind}"),
                        );
                    }
                }
                if n.as_scalar().and_then(|s| s.as_bool()) != Some(true) {
                    self.err(n.span(), format!("{kind}: expected true"));
                    return None;
                }
                if *kind == "ping" {
                    WsAction::Ping
                } else {
                    WsAction::Close
                }
            }
            [] => {
                self.err(m.span(), format!("ws: expected {FORMS}"));
                return None;
            }
            [_, (second, n), ..] => {
                self.err(
                    n.span(),
                    format!("ws takes one of send, ping, close ('{second}' is a second one)"),
                );
                return None;
            }
        };
        let name = match m.get_node("name") {
            Some(n) => self.name(n, "name")?,
            None => default_ws_name(&action).to_string(),
        };
        Some(Ws { name, action })
    }

    // ---- settings sections ------------------------------------------------------------------

    /// The `xmpp:`, `pgsql:` or `websocket:` section the servers' protocol needs, checked
    /// against it: a section for another protocol is refused, a missing required one reported
    /// at the servers' `protocol`.
    pub(super) fn link(&mut self, top: &MarkedMappingNode) -> LinkSpec {
        let sections = [
            ("xmpp", Protocol::Xmpp),
            ("pgsql", Protocol::Pgsql),
            ("websocket", Protocol::WebSocket),
            ("mqtt", Protocol::Mqtt),
            ("mysql", Protocol::Mysql),
            ("amqp", Protocol::Amqp),
        ];
        let mut link = None;
        for (key, p) in sections {
            let Some(k) = top.keys().find(|k| k.as_str() == key) else {
                continue;
            };
            let Some(v) = top.get_node(key) else {
                continue;
            };
            if self.protocol_mismatch(p) {
                self.err(
                    k.span(),
                    format!(
                        "{key}: settings for servers with `protocol: {}`; these speak {}",
                        p.as_str(),
                        self.protocol.as_str()
                    ),
                );
                continue;
            }
            link = match p {
                Protocol::Xmpp => self.xmpp_spec(v).map(LinkSpec::Xmpp),
                Protocol::Pgsql => self.pg_spec(v).map(LinkSpec::Pgsql),
                Protocol::Mqtt => self.mqtt_spec(v).map(LinkSpec::Mqtt),
                Protocol::Mysql => self.mysql_spec(v).map(LinkSpec::Mysql),
                Protocol::Amqp => self.amqp_spec(v).map(LinkSpec::Amqp),
                _ => self.ws_spec(v).map(LinkSpec::WebSocket),
            };
        }
        if let Some(l) = link {
            return l;
        }
        let needed = match self.protocol {
            _ if self.protocol_unknown => None,
            Protocol::Xmpp => Some(("xmpp", "domain and users: {first, last}")),
            Protocol::Pgsql => Some(("pgsql", "database and user")),
            Protocol::WebSocket => {
                if top.get_node("websocket").is_none() {
                    return LinkSpec::WebSocket(WsSpec {
                        path: "/".into(),
                        subprotocol: None,
                        origin: None,
                    });
                }
                None
            }
            Protocol::Ldap => return LinkSpec::Ldap,
            Protocol::Amqp => {
                if top.get_node("amqp").is_none() {
                    return LinkSpec::Amqp(AmqpSpec {
                        user: "guest".into(),
                        password: "guest".into(),
                        vhost: "/".into(),
                    });
                }
                None
            }
            Protocol::Mysql => Some(("mysql", "user")),
            Protocol::Mqtt => {
                if top.get_node("mqtt").is_none() {
                    return LinkSpec::Mqtt(MqttSpec {
                        v5: false,
                        connect: MqttConnect::default(),
                        delivery: 0,
                    });
                }
                None
            }
            Protocol::Http | Protocol::Raw => None,
        };
        if let Some((key, what)) = needed {
            if top.get_node(key).is_none() {
                // At the first server's `protocol` (the servers decide what is needed).
                let at = top
                    .get_node("servers")
                    .and_then(|s| s.as_sequence())
                    .and_then(|s| s.first())
                    .and_then(|s| s.as_mapping())
                    .and_then(|s| s.get_node("protocol"))
                    .map_or(*top.span(), |n| *n.span());
                self.err(
                    &at,
                    format!(
                        "the servers speak {}: the scenario needs a top-level `{key}:` section \
                         ({what})",
                        self.protocol.as_str()
                    ),
                );
            }
        }
        LinkSpec::Plain
    }

    /// `xmpp: {domain, users: {first, last}, username, password, resource, anonymous,
    /// register, login: {user, password}}`.
    fn xmpp_spec(&mut self, node: &Node) -> Option<XmppSpec> {
        let m = self.map(node, "xmpp")?;
        self.keys(
            m,
            "xmpp",
            &[
                "domain",
                "users",
                "username",
                "password",
                "resource",
                "anonymous",
                "register",
                "bosh",
                "login",
            ],
        );
        let login = match m.get_node("login") {
            Some(l) => Some(self.xmpp_login(l, m)?),
            None => None,
        };
        let domain = self
            .required(m, "domain", "xmpp")
            .and_then(|d| self.name(d, "domain"));
        let anonymous = match m.get_node("anonymous") {
            Some(a) => self.boolean(a, "anonymous"),
            None => Some(false),
        };
        let register = match m.get_node("register") {
            Some(r) => self.boolean(r, "register"),
            None => Some(false),
        };
        if let (Some(true), Some(true), Some(r)) = (anonymous, register, m.get_node("register")) {
            self.err(
                r.span(),
                "register: in-band registration creates accounts to log in to; anonymous \
                 logins have none",
            );
        }
        if let (Some(true), Some(_), Some(a)) = (anonymous, &login, m.get_node("anonymous")) {
            self.err(
                a.span(),
                "anonymous: SASL ANONYMOUS logs in without a user and password; login gives them",
            );
        }
        let users = match m.get_node("users") {
            Some(u) => self.xmpp_users(u),
            None if anonymous == Some(true) || login.is_some() => Some((1, 1)),
            None => {
                if anonymous.is_some() {
                    self.err(
                        m.span(),
                        "xmpp is missing 'users' ({first, last}: user N logs in as \
                         {username}N@{domain}); only `anonymous: true` and `login` do without",
                    );
                }
                None
            }
        };
        let username = match m.get_node("username") {
            Some(n) => self.string(n, "username"),
            None => Some("user".to_string()),
        };
        let password = match m.get_node("password") {
            Some(n) => self.string(n, "password"),
            None => Some("pass".to_string()),
        };
        let resource = match m.get_node("resource") {
            Some(n) => Some(self.name(n, "resource")?),
            None => None,
        };
        let bosh = match m.get_node("bosh") {
            Some(n) => Some(self.bosh_path(n)?),
            None => None,
        };
        let (first, last) = users?;
        Some(XmppSpec {
            domain: domain?,
            username: username?,
            password: password?,
            first,
            last,
            login,
            resource,
            anonymous: anonymous?,
            register: register?,
            bosh,
        })
    }

    /// `bosh: /path`: the HTTP path of the server's BOSH endpoint (ejabberd: `/bosh`).
    fn bosh_path(&mut self, node: &Node) -> Option<String> {
        let p = self.string(node, "bosh")?;
        if !bosh_path_ok(&p) {
            self.err(
                node.span(),
                "bosh: expected the endpoint's HTTP path, e.g. /bosh (starting with '/', no \
                 spaces, at most 1,024 bytes)",
            );
            return None;
        }
        Some(p)
    }

    /// `login: {user, password}` of the `xmpp:` section `section`: texts with `${var}`, whose
    /// variables each session sets before it connects (checked at the steps, see
    /// [`Parser::opens`]). It replaces `users`, `username` and `password`.
    fn xmpp_login(&mut self, node: &Node, section: &MarkedMappingNode) -> Option<XmppLogin> {
        let m = self.map(node, "login")?;
        self.keys(m, "login", &["user", "password"]);
        for k in section.keys() {
            if ["users", "username", "password"].contains(&k.as_str()) {
                self.err(
                    k.span(),
                    format!(
                        "{}: with `login`, each user logs in as its session's variables say; \
                         numbered accounts do not apply",
                        k.as_str()
                    ),
                );
            }
        }
        let user = self
            .required(m, "user", "login")
            .and_then(|n| self.name(n, "user"));
        let password = self
            .required(m, "password", "login")
            .and_then(|n| self.string(n, "password"));
        let (user, password) = (user?, password?);
        for (text, key) in [(&user, "user"), (&password, "password")] {
            if let Err(why) = var_refs(text, |_| Ok(())) {
                let span = *m.get_node(key).map_or(m.span(), |n| n.span());
                self.err(&span, format!("{key}: {why}"));
                return None;
            }
        }
        Some(XmppLogin::new(&user, &password))
    }

    /// A step at `span` that opens the session's connection (`connect`, or any xmpp step,
    /// which opens one on demand): the first one checks that the session set the variables
    /// of `xmpp.login` before it (the login runs when the connection opens).
    pub(super) fn opens(&mut self, span: &Span, vars: &Vars) {
        if self.opened {
            return;
        }
        self.opened = true;
        let Some(l) = self.xmpp_login.clone() else {
            return;
        };
        for text in [&l.user, &l.password] {
            let _ = var_refs(text, |name| {
                if vars.contains(name) || BUILTINS.contains(&name) {
                    return Ok(());
                }
                self.err(
                    span,
                    format!(
                        "xmpp.login uses '${{{name}}}', which this session does not set before \
                         this step opens the connection (the login runs at the connect): set it \
                         earlier, e.g. from a csv file"
                    ),
                );
                Ok(())
            });
        }
    }

    fn xmpp_users(&mut self, node: &Node) -> Option<(u64, u64)> {
        let m = self.map(node, "users")?;
        self.keys(m, "users", &["first", "last"]);
        let mut get = |key: &str| {
            let n = self.required(m, key, "users")?;
            let v = n
                .as_scalar()
                .and_then(|s| s.as_str().trim().parse::<u64>().ok());
            if v.is_none() {
                self.err(n.span(), format!("{key}: expected an integer >= 0"));
            }
            v
        };
        let (first, last) = (get("first"), get("last"));
        let (first, last) = (first?, last?);
        if first > last {
            self.err(
                m.span(),
                format!("users: first ({first}) must not exceed last ({last})"),
            );
            return None;
        }
        Some((first, last))
    }

    /// `pgsql: {database, user, password}`.
    fn pg_spec(&mut self, node: &Node) -> Option<PgSpec> {
        let m = self.map(node, "pgsql")?;
        self.keys(m, "pgsql", &["database", "user", "password"]);
        let database = self
            .required(m, "database", "pgsql")
            .and_then(|d| self.name(d, "database"));
        let user = self
            .required(m, "user", "pgsql")
            .and_then(|u| self.name(u, "user"));
        let password = match m.get_node("password") {
            Some(p) => Some(self.string(p, "password")?),
            None => None,
        };
        Some(PgSpec {
            database: database?,
            user: user?,
            password,
        })
    }

    /// `mysql: {user, password, database}`.
    fn mysql_spec(&mut self, node: &Node) -> Option<MysqlSpec> {
        let m = self.map(node, "mysql")?;
        self.keys(m, "mysql", &["user", "password", "database"]);
        let user = self
            .required(m, "user", "mysql")
            .and_then(|u| self.name(u, "user"));
        let password = match m.get_node("password") {
            Some(p) => Some(self.string(p, "password")?),
            None => None,
        };
        let database = match m.get_node("database") {
            Some(d) => Some(self.name(d, "database")?),
            None => None,
        };
        Some(MysqlSpec {
            user: user?,
            password,
            database,
        })
    }

    /// `websocket: {path, subprotocol, origin}`.
    fn ws_spec(&mut self, node: &Node) -> Option<WsSpec> {
        let m = self.map(node, "websocket")?;
        self.keys(m, "websocket", &["path", "subprotocol", "origin"]);
        let path = match m.get_node("path") {
            Some(p) => {
                let s = self.string(p, "path")?;
                if !s.starts_with('/') {
                    self.err(
                        p.span(),
                        "path: expected an absolute path starting with '/'",
                    );
                    return None;
                }
                s
            }
            None => "/".to_string(),
        };
        let subprotocol = match m.get_node("subprotocol") {
            Some(n) => Some(self.name(n, "subprotocol")?),
            None => None,
        };
        let origin = match m.get_node("origin") {
            Some(n) => Some(self.name(n, "origin")?),
            None => None,
        };
        Some(WsSpec {
            path,
            subprotocol,
            origin,
        })
    }
}

/// An HTTP path a BOSH endpoint can have here: from `/`, no spaces or controls, at most 1,024
/// bytes (the `xmpp.bosh` key and Tsung's `bosh_path` option).
pub(crate) fn bosh_path_ok(p: &str) -> bool {
    p.starts_with('/') && p.len() <= 1024 && !p.bytes().any(|b| b <= b' ' || b == 0x7f)
}
