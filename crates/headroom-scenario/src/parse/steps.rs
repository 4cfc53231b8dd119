//! Steps of a session: the `impl Parser` half that walks `steps:` lists, split from `parse.rs`
//! to keep files short. Same invariants as the parent: every error goes through `Parser::err`.

use super::{Parser, Vars, BUILTINS, MAX_INCLUDED_BYTES, MAX_INCLUDE_DEPTH, STEP_KINDS};
use crate::model::*;
use headroom_core::session::ExpectSpec;
use headroom_core::Distribution;
use marked_yaml::{LoaderOptions, Node};
use std::path::Path;

impl Parser {
    // ---- steps ------------------------------------------------------------------------------

    pub(super) fn steps(&mut self, node: &Node, vars: &mut Vars) -> Vec<Step> {
        let mut out = Vec::new();
        for n in self.seq(node, "steps").unwrap_or_default() {
            self.step(n, vars, &mut out);
        }
        out
    }

    fn step(&mut self, node: &Node, vars: &mut Vars, out: &mut Vec<Step>) {
        let expected = STEP_KINDS.join(", ");
        if let Some(s) = node.as_scalar() {
            match s.as_str() {
                "connect" => {
                    self.opens(node.span(), vars);
                    out.push(Step::Connect)
                }
                "close" => out.push(Step::Close),
                other => self.err(
                    node.span(),
                    format!("unknown step '{other}'; expected one of {expected}"),
                ),
            }
            return;
        }
        let Some(m) = self.map(node, "step") else {
            return;
        };
        if m.len() != 1 {
            self.err(
                m.span(),
                format!("a step is a mapping with exactly one key, one of {expected}"),
            );
            return;
        }
        let Some((k, v)) = m.iter().next() else {
            return;
        };
        let step = match k.as_str() {
            "request" => {
                if self.protocol_mismatch(Protocol::Http) {
                    self.err(
                        k.span(),
                        format!(
                            "request: the servers speak {}; use {} steps",
                            self.protocol.as_str(),
                            step_of(self.protocol)
                        ),
                    );
                }
                self.request(v, vars).map(Step::Request)
            }
            "pipeline" => {
                self.step_needs(k.span(), "a pipeline step", Protocol::Http);
                self.pipeline(v, vars).map(Step::Pipeline)
            }
            "send" => {
                if self.protocol_mismatch(Protocol::Raw) {
                    self.err(
                        k.span(),
                        format!(
                            "send: raw TCP steps need servers with protocol: raw (these speak {})",
                            self.protocol.as_str()
                        ),
                    );
                }
                self.send(v, vars).map(Step::Send)
            }
            "xmpp" => {
                self.step_needs(k.span(), "an xmpp step", Protocol::Xmpp);
                self.opens(k.span(), vars);
                self.xmpp(v, vars).map(Step::Xmpp)
            }
            "sql" => {
                if self.protocol != Protocol::Mysql {
                    self.step_needs(k.span(), "a sql step", Protocol::Pgsql);
                }
                self.sql(v, vars).map(Step::Sql)
            }
            "ws" => {
                self.step_needs(k.span(), "a ws step", Protocol::WebSocket);
                self.ws(v, vars).map(Step::Ws)
            }
            "mqtt" => {
                self.step_needs(k.span(), "an mqtt step", Protocol::Mqtt);
                self.mqtt(v, vars).map(Step::Mqtt)
            }
            "ldap" => {
                self.step_needs(k.span(), "an ldap step", Protocol::Ldap);
                self.ldap(v, vars).map(Step::Ldap)
            }
            "amqp" => {
                self.step_needs(k.span(), "an amqp step", Protocol::Amqp);
                self.amqp(v, vars).map(Step::Amqp)
            }
            "file" => self.file_step(k.span(), v, vars).map(Step::File),
            "think" => self.think(v).map(Step::Think),
            "loop" => self.looop(v, vars).map(Step::Loop),
            "transaction" => self.transaction(v, vars),
            "connect" => {
                self.opens(k.span(), vars);
                Some(Step::Connect)
            }
            "close" => Some(Step::Close),
            "set" => self.set(v, vars),
            "extract" => self.extract(v, vars).map(Step::Extract),
            "match" => self.matcher(v).map(Step::Match),
            "cookie" => {
                self.step_needs(k.span(), "a cookie step", Protocol::Http);
                self.cookie(v, vars).map(Step::Cookie)
            }
            "include" => {
                self.include(v, vars, out);
                None
            }
            other => {
                self.err(
                    k.span(),
                    format!("unknown step '{other}'; expected one of {expected}"),
                );
                None
            }
        };
        out.extend(step);
    }

    fn request(&mut self, node: &Node, vars: &Vars) -> Option<Request> {
        // Shorthand: `request: GET /path`.
        if let Some(s) = node.as_scalar() {
            let mut parts = s.as_str().split_whitespace();
            let (Some(method), Some(path), None) = (parts.next(), parts.next(), parts.next())
            else {
                self.err(node.span(), "request: expected 'METHOD /path' or a mapping");
                return None;
            };
            self.refs(node, path, vars);
            return Some(Request {
                name: format!("{method} {path}"),
                method: method.to_string(),
                path: path.to_string(),
                headers: Vec::new(),
                body: None,
                auth: None,
                oauth: None,
            });
        }
        let m = self.map(node, "request")?;
        self.keys(
            m,
            "request",
            &["name", "method", "path", "headers", "body", "auth", "oauth"],
        );
        let method = match m.get_node("method") {
            Some(x) => {
                let s = self.name(x, "method")?;
                if !s.chars().all(|c| c.is_ascii_uppercase()) {
                    self.err(
                        x.span(),
                        "method: expected an upper-case HTTP method such as GET",
                    );
                }
                s
            }
            None => "GET".to_string(),
        };
        let pn = self.required(m, "path", "request")?;
        let path = self.string(pn, "path")?;
        if !path.starts_with('/') && !path.starts_with("${") {
            self.err(
                pn.span(),
                "path: expected an absolute path starting with '/'",
            );
        }
        self.refs(pn, &path, vars);
        let mut headers = Vec::new();
        if let Some(h) = m.get_node("headers") {
            if let Some(hm) = self.map(h, "headers") {
                for (k, v) in hm.iter() {
                    if let Some(val) = self.string(v, "header value") {
                        self.refs(v, &val, vars);
                        headers.push((k.as_str().to_string(), val));
                    }
                }
            }
        }
        let body = match m.get_node("body") {
            Some(b) => {
                let s = self.string(b, "body")?;
                self.refs(b, &s, vars);
                Some(s)
            }
            None => None,
        };
        let name = match m.get_node("name") {
            Some(n) => self.name(n, "name")?,
            None => format!("{method} {path}"),
        };
        let auth = match m.get_node("auth") {
            Some(a) => Some(self.auth(a, vars)?),
            None => None,
        };
        let oauth = match m.get_node("oauth") {
            Some(o) => {
                let oauth = self.oauth(o, vars)?;
                // Both would write the request's Authorization.
                if auth.is_some() {
                    self.err(
                        o.span(),
                        "oauth: a request signed with OAuth carries its own Authorization; it \
                         cannot have `auth` too",
                    );
                }
                if let Some((k, _)) = headers
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
                {
                    self.err(
                        o.span(),
                        format!(
                            "oauth: a request signed with OAuth carries its own Authorization; \
                             drop the {k} header"
                        ),
                    );
                }
                Some(oauth)
            }
            None => None,
        };
        Some(Request {
            name,
            method,
            path,
            headers,
            body,
            auth,
            oauth: oauth.map(Box::new),
        })
    }

    /// `oauth: {consumer_key, consumer_secret, token, token_secret, method}`: OAuth 1.0
    /// credentials (each may hold `${var}`); `token` and `token_secret` default to empty (no
    /// `oauth_token`), `method` to HMAC-SHA1.
    fn oauth(&mut self, node: &Node, vars: &Vars) -> Option<OAuth> {
        let m = self.map(node, "oauth")?;
        self.keys(
            m,
            "oauth",
            &[
                "consumer_key",
                "consumer_secret",
                "token",
                "token_secret",
                "method",
            ],
        );
        let mut text = |key: &str, required: bool| -> Option<String> {
            let Some(n) = m.get_node(key) else {
                if required {
                    self.required(m, key, "oauth")?;
                }
                return Some(String::new());
            };
            let s = if key == "consumer_key" {
                self.name(n, key)?
            } else {
                self.string(n, key)?
            };
            self.refs(n, &s, vars);
            Some(s)
        };
        let consumer_key = text("consumer_key", true);
        let consumer_secret = text("consumer_secret", true);
        let token = text("token", false);
        let token_secret = text("token_secret", false);
        let method = match m.get_node("method") {
            Some(n) => {
                let v = n
                    .as_scalar()
                    .and_then(|s| OAuthMethod::parse(s.as_str().trim()));
                if v.is_none() {
                    self.err(n.span(), "method: expected HMAC-SHA1 or PLAINTEXT");
                }
                v
            }
            None => Some(OAuthMethod::HmacSha1),
        };
        Some(OAuth {
            consumer_key: consumer_key?,
            consumer_secret: consumer_secret?,
            token: token?,
            token_secret: token_secret?,
            method: method?,
        })
    }

    /// `pipeline: [{request: ...}, ...]`: requests written back to back, replies read in order.
    fn pipeline(&mut self, node: &Node, vars: &Vars) -> Option<Vec<Request>> {
        let items = self.seq(node, "pipeline")?;
        if items.is_empty() {
            self.err(
                node.span(),
                "pipeline: expected a list of one or more request steps",
            );
            return None;
        }
        if items.len() > MAX_PIPELINE {
            self.err(
                node.span(),
                format!(
                    "pipeline: {} requests; at most {MAX_PIPELINE} in one pipeline (split it)",
                    items.len()
                ),
            );
            return None;
        }
        let mut out = Vec::with_capacity(items.len());
        let mut head: Option<bool> = None;
        for item in items {
            let Some(m) = self.map(item, "pipeline item") else {
                continue;
            };
            let entry = match (m.len(), m.iter().next()) {
                (1, Some((k, v))) if k.as_str() == "request" => Some(v),
                _ => None,
            };
            let Some(v) = entry else {
                // At the offending step's key (a mapping's own span starts after it).
                let at = m.iter().next().map_or(m.span(), |(k, _)| k.span());
                self.err(
                    at,
                    "pipeline: each item is a request step (`- request: ...`); other steps go \
                     before or after the pipeline",
                );
                continue;
            };
            let Some(r) = self.request(v, vars) else {
                continue;
            };
            let is_head = r.method == "HEAD";
            if *head.get_or_insert(is_head) != is_head {
                self.err(
                    v.span(),
                    "pipeline: HEAD cannot share a pipeline with other methods (the replies to \
                     HEAD have no body); put it in a pipeline of its own",
                );
            }
            if r.auth
                .as_ref()
                .is_some_and(|a| a.scheme == AuthScheme::Digest)
            {
                self.err(
                    v.span(),
                    "pipeline: a request with digest auth cannot be pipelined (it answers the \
                     server's challenge, which comes after the whole pipeline is written); use \
                     a request step",
                );
            }
            out.push(r);
        }
        (out.len() == items.len()).then_some(out)
    }

    /// `auth: {user: u, password: p, scheme: basic|digest}` (scheme defaults to basic).
    fn auth(&mut self, node: &Node, vars: &Vars) -> Option<Auth> {
        let m = self.map(node, "auth")?;
        self.keys(m, "auth", &["user", "password", "scheme"]);
        let un = self.required(m, "user", "auth")?;
        let user = self.string(un, "user")?;
        self.refs(un, &user, vars);
        if user.contains(':') && !user.contains("${") {
            self.err(un.span(), "user: a user name cannot contain ':' (RFC 7617)");
        }
        let pn = self.required(m, "password", "auth")?;
        let password = self.string(pn, "password")?;
        self.refs(pn, &password, vars);
        let scheme = match m.get_node("scheme") {
            Some(sn) => match sn.as_scalar().map(|s| s.as_str().trim()) {
                Some("basic") => AuthScheme::Basic,
                Some("digest") => AuthScheme::Digest,
                _ => {
                    self.err(sn.span(), "scheme: expected basic or digest");
                    return None;
                }
            },
            None => AuthScheme::Basic,
        };
        Some(Auth {
            scheme,
            user,
            password,
        })
    }

    /// `cookie: clear` or `cookie: {set: {name: n, value: v, domain: d, path: p}}`.
    fn cookie(&mut self, node: &Node, vars: &Vars) -> Option<CookieStep> {
        if let Some(s) = node.as_scalar() {
            if s.as_str().trim() == "clear" {
                return Some(CookieStep::Clear);
            }
            self.err(
                node.span(),
                "cookie: expected clear or {set: {name: ..., value: ...}}",
            );
            return None;
        }
        let m = self.map(node, "cookie")?;
        self.keys(m, "cookie", &["set"]);
        let sn = self.required(m, "set", "cookie")?;
        let sm = self.map(sn, "set")?;
        self.keys(sm, "set", &["name", "value", "domain", "path"]);
        let nn = self.required(sm, "name", "set")?;
        let name = self.string(nn, "name")?;
        let token_ok = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_graphic() && !b"()<>@,;:\\\"/[]?={}".contains(&b));
        if !token_ok {
            self.err(
                nn.span(),
                "name: a cookie name is a token (letters, digits, !#$%&'*+-.^_`|~)",
            );
        }
        let vn = self.required(sm, "value", "set")?;
        let value = self.string(vn, "value")?;
        self.refs(vn, &value, vars);
        if value.bytes().any(|b| b.is_ascii_control() || b == b';') {
            self.err(
                vn.span(),
                "value: a cookie value cannot hold ';' or control characters",
            );
        }
        let domain = match sm.get_node("domain") {
            Some(d) => Some(self.string(d, "domain")?),
            None => None,
        };
        let path = match sm.get_node("path") {
            Some(p) => {
                let p = self.string(p, "path")?;
                Some(p)
            }
            None => None,
        };
        if let Some(p) = &path {
            if !p.starts_with('/') {
                let pn = sm.get_node("path").expect("present");
                self.err(pn.span(), "path: expected a path starting with '/'");
            }
        }
        Some(CookieStep::Set {
            name,
            value,
            domain,
            path,
        })
    }

    /// `send: {data: "...", expect: ..., name: ...}` or `send: "..."` (expect nothing).
    fn send(&mut self, node: &Node, vars: &Vars) -> Option<Send> {
        if node.as_scalar().is_some() {
            let data = self.string(node, "send")?;
            self.refs(node, &data, vars);
            return Some(Send {
                name: default_send_name(&data),
                data,
                expect: ExpectSpec::Nothing,
            });
        }
        let m = self.map(node, "send")?;
        self.keys(m, "send", &["name", "data", "expect"]);
        let dn = self.required(m, "data", "send")?;
        let data = self.string(dn, "data")?;
        self.refs(dn, &data, vars);
        let name = match m.get_node("name") {
            Some(n) => self.name(n, "name")?,
            None => default_send_name(&data),
        };
        let expect = match m.get_node("expect") {
            Some(e) => self.expect(e)?,
            None => ExpectSpec::Nothing,
        };
        Some(Send { name, data, expect })
    }

    /// `expect: nothing | {bytes: N} | {delimiter: "\r\n"} | {regex: "...", window: N} |
    /// {length: {width: 4, offset: 0, endian: big, includes_header: false, adjust: 0}}`.
    fn expect(&mut self, node: &Node) -> Option<ExpectSpec> {
        const FORMS: &str = "nothing, {bytes: N}, {delimiter: TEXT}, {regex: RE, window: N} \
                             or {length: {width: 1|2|4|8, ...}}";
        if let Some(s) = node.as_scalar() {
            if s.as_str() == "nothing" {
                return Some(ExpectSpec::Nothing);
            }
            self.err(node.span(), format!("expect: expected {FORMS}"));
            return None;
        }
        let m = self.map(node, "expect")?;
        self.keys(
            m,
            "expect",
            &["bytes", "delimiter", "regex", "window", "length"],
        );
        let spec = if let Some(b) = m.get_node("bytes") {
            let n = self.count(b, "bytes")?;
            if n == 0 {
                self.err(b.span(), "bytes: a reply is at least 1 byte");
                return None;
            }
            ExpectSpec::Bytes(n)
        } else if let Some(d) = m.get_node("delimiter") {
            let text = self.string(d, "delimiter")?;
            if text.is_empty() {
                self.err(d.span(), "delimiter: must not be empty");
                return None;
            }
            ExpectSpec::Delimiter(text.into_bytes())
        } else if let Some(r) = m.get_node("regex") {
            let pattern = self.string(r, "regex")?;
            if let Err(e) = regex::bytes::Regex::new(&pattern) {
                self.err(r.span(), format!("regex: {e}"));
                return None;
            }
            let window = match m.get_node("window") {
                Some(w) => self.count(w, "window")? as usize,
                None => 64 * 1024,
            };
            ExpectSpec::Regex { pattern, window }
        } else if let Some(l) = m.get_node("length") {
            let lm = self.map(l, "length")?;
            self.keys(
                lm,
                "length",
                &["width", "offset", "endian", "includes_header", "adjust"],
            );
            let wn = self.required(lm, "width", "length")?;
            let width = self.count(wn, "width")?;
            if ![1, 2, 4, 8].contains(&width) {
                self.err(wn.span(), "width: expected 1, 2, 4 or 8 (bytes)");
                return None;
            }
            let offset = match lm.get_node("offset") {
                Some(o) => match self.int(o, "offset")? {
                    v @ 0..=65536 => v as u64,
                    _ => {
                        self.err(o.span(), "offset: expected 0 to 65536 (bytes)");
                        return None;
                    }
                },
                None => 0,
            };
            let big_endian = match lm.get_node("endian") {
                Some(e) => match e.as_scalar().map(|s| s.as_str()) {
                    Some("big") => true,
                    Some("little") => false,
                    _ => {
                        self.err(e.span(), "endian: expected big or little");
                        return None;
                    }
                },
                None => true,
            };
            let includes_header = match lm.get_node("includes_header") {
                Some(b) => match b.as_scalar().map(|s| s.as_str()) {
                    Some("true") => true,
                    Some("false") => false,
                    _ => {
                        self.err(b.span(), "includes_header: expected true or false");
                        return None;
                    }
                },
                None => false,
            };
            let adjust = match lm.get_node("adjust") {
                Some(a) => self.int(a, "adjust")?,
                None => 0,
            };
            ExpectSpec::Length {
                offset: u32::try_from(offset).unwrap_or(u32::MAX),
                width: width as u8,
                big_endian,
                includes_header,
                adjust,
            }
        } else {
            self.err(m.span(), format!("expect: expected {FORMS}"));
            return None;
        };
        Some(spec)
    }

    fn think(&mut self, node: &Node) -> Option<Distribution> {
        if node.as_scalar().is_some() {
            return self.duration(node, "think").map(Distribution::Constant);
        }
        let m = self.map(node, "think")?;
        let kinds = ["constant", "uniform", "exponential", "pareto"];
        if m.len() != 1 {
            self.err(
                m.span(),
                format!("think: expected exactly one of {}", kinds.join(", ")),
            );
            return None;
        }
        let (k, v) = m.iter().next()?;
        match k.as_str() {
            "constant" => self.duration(v, "constant").map(Distribution::Constant),
            "exponential" => {
                let mean = match v.as_mapping() {
                    Some(em) => {
                        self.keys(em, "exponential", &["mean"]);
                        let n = self.required(em, "mean", "exponential")?;
                        self.duration(n, "mean")?
                    }
                    None => self.duration(v, "exponential")?,
                };
                Some(Distribution::Exponential { mean })
            }
            "uniform" => {
                let um = self.map(v, "uniform")?;
                self.keys(um, "uniform", &["min", "max"]);
                let min = self
                    .required(um, "min", "uniform")
                    .and_then(|x| self.duration(x, "min"));
                let max = self
                    .required(um, "max", "uniform")
                    .and_then(|x| self.duration(x, "max"));
                let (min, max) = (min?, max?);
                if min > max {
                    self.err(um.span(), "uniform: min must not exceed max");
                    return None;
                }
                Some(Distribution::Uniform { min, max })
            }
            "pareto" => {
                let pm = self.map(v, "pareto")?;
                self.keys(pm, "pareto", &["min", "alpha"]);
                let min = self
                    .required(pm, "min", "pareto")
                    .and_then(|x| self.duration(x, "min"));
                let alpha = self
                    .required(pm, "alpha", "pareto")
                    .and_then(|x| self.positive(x, "alpha"));
                Some(Distribution::Pareto {
                    min: min?,
                    alpha: alpha?,
                })
            }
            other => {
                self.err(
                    k.span(),
                    format!(
                        "unknown think kind '{other}'; expected one of {}",
                        kinds.join(", ")
                    ),
                );
                None
            }
        }
    }

    fn looop(&mut self, node: &Node, vars: &mut Vars) -> Option<Loop> {
        let m = self.map(node, "loop")?;
        self.keys(m, "loop", &["count", "while", "until", "counter", "steps"]);
        let count = match m.get_node("count") {
            Some(c) => Some(self.count(c, "count")?),
            None => None,
        };
        let cond_node = match (m.get_node("while"), m.get_node("until")) {
            (Some(_), Some(u)) => {
                self.err(u.span(), "loop: give 'while' or 'until', not both");
                return None;
            }
            (Some(w), None) => Some(("while", w)),
            (None, Some(u)) => Some(("until", u)),
            (None, None) => None,
        };
        if count.is_none() && cond_node.is_none() {
            self.err(m.span(), "loop needs 'count', 'while' or 'until'");
        }
        // The counter is set before each pass: the body may use it.
        let counter = match m.get_node("counter") {
            Some(c) => {
                let c = self.loop_counter(c)?;
                vars.insert(c.var.clone());
                Some(c)
            }
            None => None,
        };
        let sn = self.required(m, "steps", "loop")?;
        let steps = self.steps(sn, vars);
        if steps.is_empty() && sn.as_sequence().is_some_and(|q| q.is_empty()) {
            self.err(sn.span(), "loop is empty");
        }
        // The condition may name a variable set inside the body (typical for `until`), so it is
        // checked after walking the body.
        let condition = match cond_node {
            Some((kind, n)) => {
                let v = self.var_name(n, kind)?;
                if !vars.contains(&v) && !BUILTINS.contains(&v.as_str()) {
                    self.err(
                        n.span(),
                        format!("undefined variable '{v}' in loop {kind}; define it with set or extract"),
                    );
                }
                Some(if kind == "while" {
                    Condition::While(v)
                } else {
                    Condition::Until(v)
                })
            }
            None => None,
        };
        if count.is_none() && condition.is_none() {
            return None;
        }
        Some(Loop {
            count,
            condition,
            counter,
            steps,
        })
    }

    /// `counter: i` (1, 2, 3, ...) or `counter: {var: i, start: 1, step: 1}`.
    fn loop_counter(&mut self, node: &Node) -> Option<LoopCounter> {
        let Some(cm) = node.as_mapping() else {
            let var = self.var_name(node, "counter")?;
            return Some(LoopCounter {
                var,
                start: 1,
                step: 1,
            });
        };
        self.keys(cm, "counter", &["var", "start", "step"]);
        let var = self
            .required(cm, "var", "counter")
            .and_then(|v| self.var_name(v, "var"));
        let start = match cm.get_node("start") {
            Some(x) => self.int(x, "start"),
            None => Some(1),
        };
        let step = match cm.get_node("step") {
            Some(x) => self.int(x, "step"),
            None => Some(1),
        };
        Some(LoopCounter {
            var: var?,
            start: start?,
            step: step?,
        })
    }

    fn transaction(&mut self, node: &Node, vars: &mut Vars) -> Option<Step> {
        let m = self.map(node, "transaction")?;
        self.keys(m, "transaction", &["name", "steps"]);
        let name = self
            .required(m, "name", "transaction")
            .and_then(|n| self.name(n, "name"));
        let sn = self.required(m, "steps", "transaction")?;
        let steps = self.steps(sn, vars);
        if steps.is_empty() && sn.as_sequence().is_some_and(|q| q.is_empty()) {
            self.err(sn.span(), "transaction is empty");
        }
        Some(Step::Transaction { name: name?, steps })
    }

    fn set(&mut self, node: &Node, vars: &mut Vars) -> Option<Step> {
        let m = self.map(node, "set")?;
        let sources = [
            "value",
            "csv",
            "random_number",
            "random_string",
            "sequence",
            "user_id",
            "expr",
        ];
        let mut allowed = vec!["var"];
        allowed.extend(sources);
        self.keys(m, "set", &allowed);
        let var = self
            .required(m, "var", "set")
            .and_then(|v| self.var_name(v, "var"));
        let given: Vec<(&str, &Node)> = sources
            .iter()
            .filter_map(|k| m.get_node(k).map(|n| (*k, n)))
            .collect();
        let (kind, v) = match given.as_slice() {
            [one] => *one,
            [] => {
                self.err(
                    m.span(),
                    format!("set needs one source: {}", sources.join(", ")),
                );
                return None;
            }
            [_, second, ..] => {
                self.err(second.1.span(), "set takes exactly one source");
                return None;
            }
        };
        let source = match kind {
            "value" => {
                let s = self.string(v, "value")?;
                self.refs(v, &s, vars);
                SetSource::Value(s)
            }
            "csv" => {
                let cm = self.map(v, "csv")?;
                self.keys(cm, "csv", &["file", "column", "order"]);
                let file = self
                    .required(cm, "file", "csv")
                    .and_then(|f| self.name(f, "file"));
                let column = match cm.get_node("column") {
                    Some(c) => match self.int(c, "column") {
                        Some(c) if c >= 0 => Some(c as usize),
                        Some(_) => {
                            self.err(c.span(), "column: expected a zero-based index >= 0");
                            None
                        }
                        None => None,
                    },
                    None => Some(0),
                };
                let order = match cm.get_node("order") {
                    None => Some(CsvOrder::Sequential),
                    Some(o) => match o.as_scalar().map(|s| s.as_str()) {
                        Some("sequential") => Some(CsvOrder::Sequential),
                        Some("random") => Some(CsvOrder::Random),
                        Some("same_row") => Some(CsvOrder::SameRow),
                        _ => {
                            self.err(
                                o.span(),
                                "order: expected one of sequential, random, same_row",
                            );
                            None
                        }
                    },
                };
                SetSource::Csv {
                    file: file?,
                    column: column?,
                    order: order?,
                }
            }
            "random_number" => {
                let rm = self.map(v, "random_number")?;
                self.keys(rm, "random_number", &["min", "max"]);
                let min = self
                    .required(rm, "min", "random_number")
                    .and_then(|x| self.int(x, "min"));
                let max = self
                    .required(rm, "max", "random_number")
                    .and_then(|x| self.int(x, "max"));
                let (min, max) = (min?, max?);
                if min > max {
                    self.err(rm.span(), "random_number: min must not exceed max");
                    return None;
                }
                SetSource::RandomNumber { min, max }
            }
            "random_string" => {
                let rm = self.map(v, "random_string")?;
                self.keys(rm, "random_string", &["length"]);
                let n = self.required(rm, "length", "random_string")?;
                SetSource::RandomString {
                    length: self.count(n, "length")? as usize,
                }
            }
            "sequence" => {
                let (start, step) = match v.as_mapping() {
                    Some(sm) => {
                        self.keys(sm, "sequence", &["start", "step"]);
                        let start = match sm.get_node("start") {
                            Some(x) => self.int(x, "start")?,
                            None => 0,
                        };
                        let step = match sm.get_node("step") {
                            Some(x) => self.int(x, "step")?,
                            None => 1,
                        };
                        (start, step)
                    }
                    None => (self.int(v, "sequence (its start)")?, 1),
                };
                SetSource::Sequence { start, step }
            }
            "expr" => {
                let s = self.string(v, "expr")?;
                // Syntax, types, bounds, and every variable defined before this step; the
                // compiler parses it again to give the variables their ids.
                let parsed = headroom_core::expr::parse(&s, &mut |name: &str| {
                    if vars.contains(name) || BUILTINS.contains(&name) {
                        Ok(())
                    } else {
                        Err(format!(
                            "undefined variable '{name}'; define it with an earlier set or extract (builtins: {})",
                            BUILTINS.join(", ")
                        ))
                    }
                });
                if let Err(e) = parsed {
                    self.expr_err(v, &s, &e);
                    return None;
                }
                SetSource::Expr(s)
            }
            _ => {
                if v.as_scalar().and_then(|s| s.as_bool()) != Some(true) {
                    self.err(v.span(), "user_id: expected true");
                    return None;
                }
                SetSource::UserId
            }
        };
        let var = var?;
        vars.insert(var.clone());
        Some(Step::Set { var, source })
    }

    fn extract(&mut self, node: &Node, vars: &mut Vars) -> Option<Extract> {
        let m = self.map(node, "extract")?;
        let sources = ["regex", "json", "header"];
        self.keys(m, "extract", &["var", "regex", "json", "header", "default"]);
        let var = self
            .required(m, "var", "extract")
            .and_then(|v| self.var_name(v, "var"));
        let given: Vec<(&str, &Node)> = sources
            .iter()
            .filter_map(|k| m.get_node(k).map(|n| (*k, n)))
            .collect();
        let from = match given.as_slice() {
            [(kind, v)] => {
                let s = self.string(v, kind)?;
                match *kind {
                    "regex" if s.is_empty() => {
                        self.err(v.span(), "regex: expected a non-empty pattern");
                        return None;
                    }
                    "regex" => ExtractFrom::Regex(s),
                    "json" if !(s.is_empty() || s.starts_with('/')) => {
                        self.err(v.span(), "json: expected a JSON pointer such as /token");
                        return None;
                    }
                    "json" => ExtractFrom::JsonPointer(s),
                    _ if s.is_empty() => {
                        self.err(v.span(), "header: expected a header name");
                        return None;
                    }
                    _ => ExtractFrom::Header(s),
                }
            }
            [] => {
                self.err(m.span(), "extract needs one of regex, json, header");
                return None;
            }
            [_, second, ..] => {
                self.err(second.1.span(), "extract takes one of regex, json, header");
                return None;
            }
        };
        let default = match m.get_node("default") {
            Some(d) => Some(self.string(d, "default")?),
            None => None,
        };
        let var = var?;
        vars.insert(var.clone());
        Some(Extract { var, from, default })
    }

    fn matcher(&mut self, node: &Node) -> Option<Match> {
        let m = self.map(node, "match")?;
        self.keys(
            m,
            "match",
            &["name", "status", "body", "when", "do", "max_loops"],
        );
        let status = match m.get_node("status") {
            Some(s) => {
                let v = s.as_scalar().and_then(|x| x.as_str().parse::<u16>().ok());
                match v {
                    Some(v) if (100..=599).contains(&v) => Some(v),
                    _ => {
                        self.err(s.span(), "status: expected an HTTP status 100..599");
                        return None;
                    }
                }
            }
            None => None,
        };
        let body = match m.get_node("body") {
            Some(b) => Some(self.string(b, "body")?),
            None => None,
        };
        if status.is_none() && body.is_none() {
            self.err(m.span(), "match needs 'status' or 'body'");
            return None;
        }
        let when_matched = match m.get_node("when") {
            None => true,
            Some(w) => match w.as_scalar().map(|s| s.as_str()) {
                Some("match") => true,
                Some("nomatch") => false,
                _ => {
                    self.err(w.span(), "when: expected one of match, nomatch");
                    return None;
                }
            },
        };
        let dn = self.required(m, "do", "match")?;
        let action = match dn.as_scalar().map(|s| s.as_str()) {
            Some("continue") => MatchAction::Continue,
            Some("abort") => MatchAction::Abort,
            Some("restart") => MatchAction::Restart,
            Some("loop") => MatchAction::Loop,
            _ => {
                self.err(
                    dn.span(),
                    "do: expected one of continue, abort, restart, loop",
                );
                return None;
            }
        };
        let max_loops = match m.get_node("max_loops") {
            Some(n) => Some(self.count(n, "max_loops")?),
            None => None,
        };
        let name = match m.get_node("name") {
            Some(n) => self.name(n, "name")?,
            None => {
                let on = status
                    .map(|s| s.to_string())
                    .or(body.clone())
                    .unwrap_or_default();
                format!("match {on}")
            }
        };
        Some(Match {
            name,
            status,
            body,
            when_matched,
            action,
            max_loops,
        })
    }

    /// Inlines the steps of another file (a YAML list of steps) into `out`.
    fn include(&mut self, node: &Node, vars: &mut Vars, out: &mut Vec<Step>) {
        let Some(rel) = self.name(node, "include") else {
            return;
        };
        let here = self.files.get(self.current).cloned().unwrap_or_default();
        let base = Path::new(&here).parent().unwrap_or(Path::new(""));
        let path = base.join(&rel);
        let canon = match path.canonicalize() {
            Ok(p) => p,
            Err(e) => {
                self.err(node.span(), format!("include '{}': {e}", path.display()));
                return;
            }
        };
        if self.include_stack.contains(&canon) {
            let chain: Vec<String> = self
                .include_stack
                .iter()
                .chain(std::iter::once(&canon))
                .map(|p| {
                    p.file_name()
                        .map(|f| f.to_string_lossy().into_owned())
                        .unwrap_or_default()
                })
                .collect();
            self.err(
                node.span(),
                format!("includes loop: {}", chain.join(" -> ")),
            );
            return;
        }
        if self.include_stack.len() >= MAX_INCLUDE_DEPTH {
            self.err(
                node.span(),
                format!("includes nested deeper than {MAX_INCLUDE_DEPTH}"),
            );
            return;
        }
        if self.included_bytes > MAX_INCLUDED_BYTES {
            return; // said once already
        }
        let text = match crate::read_bounded_string(&canon, crate::MAX_SCENARIO_BYTES, "include") {
            Ok(t) => t,
            Err(e) => {
                self.err(node.span(), e);
                return;
            }
        };
        self.included_bytes += text.len() as u64;
        if self.included_bytes > MAX_INCLUDED_BYTES {
            self.err(
                node.span(),
                format!(
                    "includes read more than {} MiB in all (each include is read again)",
                    MAX_INCLUDED_BYTES >> 20
                ),
            );
            return;
        }
        let saved = self.current;
        self.include_stack.push(canon);
        let opts = LoaderOptions::default().toplevel_sequence();
        if let Some(root) = self.load_yaml(&text, &path.display().to_string(), opts) {
            out.extend(self.steps(&root, vars));
        }
        self.include_stack.pop();
        self.current = saved;
    }
}

/// The step kind that talks to servers of `p`.
pub(super) fn step_of(p: Protocol) -> &'static str {
    match p {
        Protocol::Http => "request",
        Protocol::Raw => "send",
        Protocol::Xmpp => "xmpp",
        Protocol::Pgsql => "sql",
        Protocol::WebSocket => "ws",
        Protocol::Mqtt => "mqtt",
        Protocol::Ldap => "ldap",
        Protocol::Mysql => "sql",
        Protocol::Amqp => "amqp",
    }
}

/// A send step's metric name when it has none: its data's first line, at most 40 characters.
fn default_send_name(data: &str) -> String {
    first_line_name(data, "send")
}

/// The first line of `text`, trimmed, at most 40 characters; `fallback` when that is empty.
pub(super) fn first_line_name(text: &str, fallback: &str) -> String {
    let line = text.lines().next().unwrap_or("").trim();
    let name: String = line.chars().take(40).collect();
    if name.is_empty() {
        fallback.to_string()
    } else {
        name
    }
}
