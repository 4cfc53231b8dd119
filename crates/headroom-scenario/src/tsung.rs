//! Import of Tsung XML configurations (`tsung.xml`: HTTP, jabber, pgsql, raw, websocket, mqtt,
//! ldap, mysql and amqp sessions) into a [`Scenario`].
//!
//! The XML is read with quick-xml into a small element tree that keeps the byte offset of every
//! element, attribute and text, so every warning and error names `file:line:column`. The tree is
//! then walked by [`Conv`], which maps what headroom can run and reports the rest:
//!
//! - **Nothing is silently ignored.** Every element or attribute that is not honoured gives
//!   exactly one warning with its position. A warning about an element covers its attributes and
//!   content (one warning for all of `<clients>`, not one per `<client>`). Pure identifiers with
//!   no behaviour (`<arrivalphase phase>`, `<repeat name>`, `<tsung version>`) are accepted.
//! - What would change the load in a way the user must know about is an **error**: other
//!   protocols, calls to Tsung's own Erlang modules, conditional steps, loop conditions that
//!   are not a truth test. What is mapped approximately is a **warning** at its
//!   place: a call to the file's own Erlang module gets a random-string stand-in, a simple
//!   `xpath` a regular expression, Tsung's legacy jabber logins run as SASL PLAIN.
//! - Tsung keeps a cookie jar per user, and so does every scenario by default: automatic
//!   cookies need nothing; `<add_cookie>` becomes a `cookie` step into the jar.
//! - The protocol sessions (`ts_jabber`, `ts_pgsql`, `ts_raw`, `ts_websocket`) are converted in
//!   [`proto`]: their connection setup (XMPP login, PostgreSQL startup, WebSocket upgrade) is
//!   implicit at connect in headroom, so its requests become the scenario's connection settings.
//! - After conversion the scenario is written with [`crate::to_yaml`] and parsed back with
//!   [`crate::parse_str`]; a difference is reported as an internal error (a bug here), so what is
//!   returned always validates and round-trips.
//!
//! See `docs/import.md` for the mapping table.

use crate::model::*;
use crate::ScenarioError;
use headroom_core::Distribution;
use proto::Kind;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

/// A scenario converted from another tool's format, with what was not carried over.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    pub scenario: Scenario,
    /// Located notes on what is not honoured or only approximated, in file order.
    pub warnings: Vec<ScenarioError>,
}

/// Converts a Tsung XML configuration. `file_name` is used in warnings and errors and for the
/// scenario's name (its stem). Returns every error found, in file order.
pub fn import_tsung(text: &str, file_name: &str) -> Result<Imported, Vec<ScenarioError>> {
    let (scenario, warnings, errors) = convert(text, file_name);
    finish(scenario, warnings, errors, file_name)
}

type Converted = (Scenario, Vec<ScenarioError>, Vec<ScenarioError>);

fn convert(text: &str, file_name: &str) -> Converted {
    let at = Locator::new(text, file_name);
    let doc = match xml::parse(text) {
        Ok(d) => d,
        Err(e) => {
            let empty = Scenario {
                name: None,
                servers: Vec::new(),
                load: Load::default(),
                sessions: Vec::new(),
                thresholds: Vec::new(),
                link: LinkSpec::Plain,
                http: Default::default(),
                file_root: None,
            };
            return (empty, Vec::new(), vec![at.error(e.pos, e.message)]);
        }
    };
    let mut c = Conv::new(&at);
    for pi in &doc.pis {
        c.warn(*pi, "processing instruction is not honoured");
    }
    let scenario = c.tsung(&doc.root);
    (scenario, c.warnings, c.errors)
}

/// Byte offsets to `file:line:column` (1-based, column in characters).
pub(crate) struct Locator<'a> {
    text: &'a str,
    file: &'a str,
    starts: Vec<usize>,
}

impl<'a> Locator<'a> {
    pub(crate) fn new(text: &'a str, file: &'a str) -> Self {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Locator { text, file, starts }
    }

    pub(crate) fn error(&self, offset: usize, message: impl Into<String>) -> ScenarioError {
        let mut off = offset.min(self.text.len());
        while !self.text.is_char_boundary(off) {
            off -= 1;
        }
        let line = self.starts.partition_point(|&s| s <= off);
        let start = self.starts[line - 1];
        ScenarioError {
            file: self.file.to_string(),
            line,
            column: self.text[start..off].chars().count() + 1,
            message: message.into(),
        }
    }
}

/// Sorts the findings, and on success checks that the scenario survives `to_yaml` + `parse_str`
/// unchanged (anything else is a bug of the importer, reported as such).
pub(crate) fn finish(
    scenario: Scenario,
    mut warnings: Vec<ScenarioError>,
    mut errors: Vec<ScenarioError>,
    file_name: &str,
) -> Result<Imported, Vec<ScenarioError>> {
    let key = |e: &ScenarioError| (e.line, e.column);
    errors.sort_by_key(key);
    warnings.sort_by_key(key);
    if !errors.is_empty() {
        return Err(errors);
    }
    let yaml = crate::to_yaml(&scenario);
    let internal = |message: String| ScenarioError {
        file: file_name.to_string(),
        line: 1,
        column: 1,
        message: format!("internal error of the importer (please report): {message}"),
    };
    match crate::parse_str(&yaml, "converted.yaml") {
        Ok(back) if back == scenario => Ok(Imported { scenario, warnings }),
        Ok(_) => Err(vec![internal(
            "the converted scenario does not read back the same".into(),
        )]),
        Err(errs) => Err(errs
            .into_iter()
            .map(|e| internal(format!("the converted scenario does not validate: {e}")))
            .collect()),
    }
}

/// Length of the random string that stands in for a call to the file's own Erlang code.
const STAND_IN_LENGTH: usize = 20;

/// What Tsung substitutes for a variable that is not set (`ts_search:extract_variable`).
const UNDEFINED: &str = "undefined";

/// Tsung's dynamic variable holding the user's number (1, 2, 3, ... in the order users start).
const TSUNG_USERID: &str = "tsung_userid";
/// What a session that reads `tsung_userid` sets it to first: headroom's `user_id` without the
/// 2^40 its arrived users carry, plus one, so that arrived users are numbered 1, 2, 3, ... as
/// Tsung numbers them, and a computation on the number (another user's, in fs-nfs.xml) finds
/// the numbers of other users. Closed users are 1.. too; `once` users (Tsung's `<user>`) carry
/// 2^41, which this takes off as well, so their numbers repeat arrived users' (warned).
const TSUNG_USERID_EXPR: &str = "user_id rem 1099511627776 + 1";

/// Variables every session has (as in the parser).
const BUILTINS: &[&str] = &["user_id", "session"];

/// Request bodies and elements of protocols other than HTTP.
const PROTOCOL_ELEMENTS: &[&str] = &[
    "jabber",
    "raw",
    "pgsql",
    "mysql",
    "ldap",
    "websocket",
    "mqtt",
    "amqp",
    "fs",
    "shell",
    "job",
    "xmpp",
    "bosh",
    "udp",
    "change_type",
    "interaction",
];

/// The error for an element of a protocol headroom does not convert.
fn unsupported(what: &str) -> String {
    format!("'{what}' is not supported (headroom converts ts_http, ts_jabber, ts_pgsql, ts_raw, ts_websocket, ts_mqtt, ts_ldap, ts_mysql, ts_amqp and ts_fs sessions)")
}

fn valid_var(s: &str) -> bool {
    !s.is_empty()
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !s.starts_with(|c: char| c.is_ascii_digit())
}

/// Seconds per Tsung `unit`.
fn unit_secs(unit: &str) -> Option<f64> {
    match unit {
        "millisecond" => Some(0.001),
        "second" => Some(1.0),
        "minute" => Some(60.0),
        "hour" => Some(3600.0),
        _ => None,
    }
}

/// Tsung's global `<option name="thinktime">`: the default of `<thinktime>`, and with
/// `override="true"` the value of every `<thinktime>`.
struct ThinkDefault {
    value: f64,
    random: bool,
    range: Option<(f64, f64)>,
    overrides: bool,
}

struct Conv<'a> {
    at: &'a Locator<'a>,
    errors: Vec<ScenarioError>,
    warnings: Vec<ScenarioError>,
    servers: Vec<Server>,
    /// A `<server type="bosh">` (where): the XMPP sessions go over BOSH.
    bosh_at: Option<usize>,
    /// `<option name="bosh_path" value>` (Tsung's default `/http-bind`).
    bosh_path: Option<String>,
    /// `<option name="file_server" id value>`: id -> path.
    files: HashMap<String, String>,
    /// The `<fs>` paths converted (with variables), and where: the files root is found from
    /// them at the end.
    fs_paths: Vec<(String, usize)>,
    /// A `<server type="erlang">` (what Tsung's fs examples name, unused by fs sessions).
    erlang_server: Option<usize>,
    /// Where the current session first reads Tsung's `tsung_userid` (it then sets it first).
    tsung_userid: Option<usize>,
    /// The sessions that read `tsung_userid`.
    userid_sessions: HashSet<String>,
    think: ThinkDefault,
    /// Variables defined so far in the current session (document order, as the parser checks).
    vars: HashSet<String>,
    /// Variables of the session that a `<dyn_variable>` names but headroom does not set, with
    /// why (for the error at a use).
    unset_vars: HashMap<String, String>,
    /// Every variable the session defines anywhere (`<var>`, `<dyn_variable>`, `<for var>`):
    /// a `%%_name%%` of none of them is Tsung's undefined variable.
    session_defs: HashSet<String>,
    /// Steps that must run before the step being converted: the cookie of an `<add_cookie>`,
    /// the stand-in value of a call to the file's own Erlang code. `steps` puts them in place.
    pending: Vec<Step>,
    /// Sessions skipped for their probability 0 (a `<user>` may name one).
    zero: HashSet<String>,
    /// Absolute-URL servers already warned about.
    other_hosts: HashSet<(String, u16)>,
    /// The file's protocol and connection settings, from the sessions converted so far.
    link: proto::Link,
    /// The current session's protocol state.
    sess: proto::Sess,
}

impl<'a> Conv<'a> {
    fn new(at: &'a Locator<'a>) -> Self {
        Conv {
            at,
            errors: Vec::new(),
            warnings: Vec::new(),
            servers: Vec::new(),
            bosh_at: None,
            bosh_path: None,
            files: HashMap::new(),
            fs_paths: Vec::new(),
            erlang_server: None,
            tsung_userid: None,
            userid_sessions: HashSet::new(),
            think: ThinkDefault {
                value: 5.0,
                random: false,
                range: None,
                overrides: false,
            },
            vars: HashSet::new(),
            unset_vars: HashMap::new(),
            session_defs: HashSet::new(),
            pending: Vec::new(),
            zero: HashSet::new(),
            other_hosts: HashSet::new(),
            link: proto::Link::default(),
            sess: proto::Sess::default(),
        }
    }

    fn warn(&mut self, pos: usize, msg: impl Into<String>) {
        let w = self.at.error(pos, msg);
        self.warnings.push(w);
    }

    fn error(&mut self, pos: usize, msg: impl Into<String>) {
        let e = self.at.error(pos, msg);
        self.errors.push(e);
    }

    // ---- generic helpers -------------------------------------------------------------------

    /// Warns about each attribute of `el` not in `known`.
    fn check_attrs(&mut self, el: &El, known: &[&str]) {
        for a in &el.attrs {
            if !known.contains(&a.key.as_str()) {
                self.warn(
                    a.pos,
                    format!("attribute '{}' of <{}> is not honoured", a.key, el.name),
                );
            }
        }
    }

    /// Warns about attribute `key` of `el` if present, with `why`.
    fn ignored(&mut self, el: &El, key: &str, why: &str) {
        if let Some(a) = el.attr(key) {
            let pos = a.pos;
            self.warn(
                pos,
                format!("attribute '{key}' of <{}> is not honoured: {why}", el.name),
            );
        }
    }

    fn no_text(&mut self, el: &El) {
        if let Some(p) = el.text_pos {
            self.warn(p, format!("text inside <{}> is not honoured", el.name));
        }
    }

    /// A child element this place does not take: protocol elements are errors, the rest
    /// warnings.
    fn unexpected(&mut self, c: &El, parent: &str) {
        let kind = Kind::of_element(&c.name);
        if let Some(k) = kind.filter(|_| parent == "request") {
            self.error(
                c.pos,
                format!(
                    "'<{}>' belongs in a session of type {}; this session is of type {}",
                    c.name,
                    k.session_type(),
                    self.sess.kind.session_type()
                ),
            );
        } else if kind.is_some_and(|k| k != Kind::Http) {
            self.error(
                c.pos,
                format!("'<{}>' goes inside a <request>, not in <{parent}>", c.name),
            );
        } else if PROTOCOL_ELEMENTS.contains(&c.name.as_str()) {
            self.error(c.pos, unsupported(&format!("<{}>", c.name)));
        } else {
            self.warn(
                c.pos,
                format!("<{}> inside <{parent}> is not honoured", c.name),
            );
        }
    }

    fn required<'e>(&mut self, el: &'e El, key: &str) -> Option<&'e Attr> {
        let a = el.attr(key);
        if a.is_none() {
            self.error(el.pos, format!("<{}> needs the attribute '{key}'", el.name));
        }
        a
    }

    fn number(&mut self, a: &Attr) -> Option<f64> {
        match a.value.trim().parse::<f64>() {
            Ok(v) if v.is_finite() => Some(v),
            _ => {
                self.error(
                    a.pos,
                    format!("{}=\"{}\": expected a number", a.key, a.value),
                );
                None
            }
        }
    }

    fn int(&mut self, a: &Attr) -> Option<i64> {
        match a.value.trim().parse::<i64>() {
            Ok(v) => Some(v),
            Err(_) => {
                self.error(
                    a.pos,
                    format!("{}=\"{}\": expected an integer", a.key, a.value),
                );
                None
            }
        }
    }

    fn positive_int(&mut self, a: &Attr) -> Option<u64> {
        match a.value.trim().parse::<u64>() {
            Ok(v) if v > 0 => Some(v),
            _ => {
                self.error(
                    a.pos,
                    format!("{}=\"{}\": expected a positive integer", a.key, a.value),
                );
                None
            }
        }
    }

    fn secs(&mut self, v: f64, pos: usize, what: &str) -> Option<Duration> {
        match Duration::try_from_secs_f64(v) {
            Ok(d) => Some(d),
            Err(_) => {
                self.error(pos, format!("{what}: expected a duration >= 0, got {v}"));
                None
            }
        }
    }

    fn unit(&mut self, el: &El, default: &str) -> Option<f64> {
        match el.attr("unit") {
            None => unit_secs(default),
            Some(a) => {
                let v = unit_secs(&a.value);
                if v.is_none() {
                    self.error(
                        a.pos,
                        format!(
                            "unit=\"{}\": expected one of millisecond, second, minute, hour",
                            a.value
                        ),
                    );
                }
                v
            }
        }
    }

    fn bool_attr(&mut self, el: &El, key: &str) -> Option<bool> {
        let a = el.attr(key)?;
        match a.value.as_str() {
            "true" => Some(true),
            "false" => Some(false),
            _ => {
                self.error(
                    a.pos,
                    format!("{key}=\"{}\": expected true or false", a.value),
                );
                None
            }
        }
    }

    fn var_name(&mut self, a: &Attr) -> Option<String> {
        if valid_var(&a.value) {
            Some(a.value.clone())
        } else {
            self.error(
                a.pos,
                format!(
                    "variable name '{}': headroom variables are letters, digits and _, not starting with a digit",
                    a.value
                ),
            );
            None
        }
    }

    /// Checks that `${name}` can be used here.
    fn use_var(&mut self, name: &str, pos: usize) -> bool {
        if self.vars.contains(name) || BUILTINS.contains(&name) {
            return true;
        }
        if let Some(why) = self.unset_vars.get(name) {
            let msg = format!("variable '{name}' is not set: {why}");
            self.error(pos, msg);
        } else {
            self.error(
                pos,
                format!("variable '{name}' is used before it is defined: headroom needs a <setdynvars> or <dyn_variable> earlier in the session"),
            );
        }
        false
    }

    /// What `%%_name%%` becomes: `${name}`, or for a variable the session defines nowhere
    /// Tsung's own text for it, `undefined` (`ts_search:subst` substitutes the word and logs
    /// a warning), with a warning here; `None` after an error.
    fn var_ref(&mut self, name: &str, pos: usize) -> Option<String> {
        let defined = self.vars.contains(name) || BUILTINS.contains(&name);
        if !defined && !self.session_defs.contains(name) && !self.unset_vars.contains_key(name) {
            // One warning per variable and place, however often the text uses it.
            let w = self.at.error(
                pos,
                format!("variable '{name}' is defined nowhere in the session: Tsung substitutes the text 'undefined' for '%%_{name}%%', and so does the converted scenario (a literal)"),
            );
            if !self.warnings.contains(&w) {
                self.warnings.push(w);
            }
            return Some(UNDEFINED.to_string());
        }
        self.use_var(name, pos).then(|| format!("${{{name}}}"))
    }

    /// Tsung substitution (`%%_name%%`, `%%name%%`) to headroom's `${name}`. With `enabled`
    /// false (no `subst="true"`), Tsung sends the text as is, and so does headroom.
    fn subst(&mut self, text: &str, pos: usize, enabled: bool) -> Option<String> {
        if text.contains("${") {
            self.error(
                pos,
                format!(
                    "'{text}' holds '${{', which headroom reads as a variable and cannot escape"
                ),
            );
            return None;
        }
        let mut out = String::new();
        let mut rest = text;
        let mut literal = false;
        let mut ok = true;
        while let Some(i) = rest.find("%%") {
            let after = &rest[i + 2..];
            let Some(j) = after.find("%%") else {
                break;
            };
            let inner = &after[..j];
            let var = inner.strip_prefix('_').unwrap_or(inner);
            let is_var = valid_var(var);
            let is_call = inner.contains(':') && !inner.contains(char::is_whitespace);
            if !is_var && !is_call {
                out.push_str(&rest[..i + 2]);
                rest = after;
                continue;
            }
            if !enabled {
                literal = true;
                out.push_str(&rest[..i + 4 + j]);
                rest = &after[j + 2..];
                continue;
            }
            out.push_str(&rest[..i]);
            if is_var && var == TSUNG_USERID {
                // Tsung's own number of the user, a dynamic variable of every session: set
                // from headroom's id when the session starts.
                self.tsung_userid.get_or_insert(pos);
                out.push_str("${tsung_userid}");
            } else if is_var {
                match self.var_ref(var, pos) {
                    Some(r) => out.push_str(&r),
                    None => ok = false,
                }
            } else if inner == "ts_user_server:get_unique_id" {
                out.push_str("${user_id}");
            } else if let Some(var) = self.stand_in(inner, pos) {
                out.push_str(&format!("${{{var}}}"));
            } else {
                self.error(
                    pos,
                    format!("'%%{inner}%%' calls Erlang code, which headroom scenarios cannot"),
                );
                ok = false;
            }
            rest = &after[j + 2..];
        }
        out.push_str(rest);
        if literal {
            self.warn(
                pos,
                "'%%...%%' is sent literally: Tsung substitutes only with subst=\"true\" on the <request>",
            );
        }
        ok.then_some(out)
    }

    /// A call `%%module:function%%` to the file's own Erlang code (a module that is not
    /// Tsung's `ts_*`, such as `symbol:new` in Tsung's example): headroom cannot run it, so a
    /// random string stands in for its result, drawn anew before each step that uses it (Tsung
    /// calls the function at each substitution), with a warning. `None` for Tsung's own
    /// modules, whose results have a meaning a random string would not keep.
    fn stand_in(&mut self, call: &str, pos: usize) -> Option<String> {
        let (module, function) = call.split_once(':')?;
        let ident = |s: &str| {
            !s.is_empty()
                && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && s.starts_with(|c: char| c.is_ascii_lowercase())
        };
        if !ident(module) || !ident(function) || module.starts_with("ts_") {
            return None;
        }
        let var = format!("{module}_{function}");
        let set = Step::Set {
            var: var.clone(),
            source: SetSource::RandomString {
                length: STAND_IN_LENGTH,
            },
        };
        // One set and one warning per step, however often the step calls it.
        if !self.pending.contains(&set) {
            self.pending.push(set);
            self.warn(
                pos,
                format!(
                    "'%%{call}%%' calls the file's own Erlang code ({module}:{function}/1), which headroom cannot run: a random string of {STAND_IN_LENGTH} characters stands in for its result (set: {{var: {var}, random_string: {{length: {STAND_IN_LENGTH}}}}}, drawn before each step that uses it)"
                ),
            );
        }
        self.vars.insert(var.clone());
        Some(var)
    }

    // ---- top level --------------------------------------------------------------------------

    fn tsung(&mut self, root: &El) -> Scenario {
        if root.name != "tsung" {
            self.error(
                root.pos,
                format!(
                    "expected <tsung> as the root element, found <{}>",
                    root.name
                ),
            );
        }
        self.check_attrs(root, &["version", "loglevel", "dumptraffic", "backend"]);
        for key in ["loglevel", "dumptraffic", "backend"] {
            self.ignored(root, key, "logs, traces and statistics are headroom's own");
        }
        self.no_text(root);
        let one =
            |name: &str| -> Vec<&El> { root.children.iter().filter(|c| c.name == name).collect() };
        for name in ["servers", "load", "sessions", "options"] {
            if let Some(extra) = one(name).get(1) {
                let pos = extra.pos;
                self.error(pos, format!("a second <{name}>; Tsung takes one"));
            }
        }
        // Options first: file servers and the default think time are used by sessions.
        if let Some(o) = one("options").first() {
            self.options(o);
        }
        if let Some(s) = one("servers").first() {
            self.servers(s);
        }
        let sessions = match one("sessions").first() {
            Some(s) => self.sessions(s),
            None => {
                self.error(root.pos, "no <sessions> in the file");
                Vec::new()
            }
        };
        let load = match one("load").first() {
            Some(l) => self.load(l, &sessions),
            None => {
                self.error(root.pos, "no <load> in the file");
                Load::default()
            }
        };
        for c in &root.children {
            match c.name.as_str() {
                "options" | "servers" | "sessions" | "load" => {}
                "clients" => self.warn(
                    c.pos,
                    "<clients> is not honoured: headroom generates the load from where it runs (clients are headroom's own)",
                ),
                "monitoring" => self.warn(
                    c.pos,
                    "<monitoring> is not honoured: headroom does not monitor the servers",
                ),
                "information" => self.warn(c.pos, "<information> is not honoured"),
                _ => self.unexpected(c, "tsung"),
            }
        }
        let name = Path::new(self.at.file)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .filter(|s| !s.is_empty());
        let (link, protocol) = self.link_spec();
        let fs = self
            .link
            .first
            .as_ref()
            .is_some_and(|f| f.0 == proto::Kind::Fs);
        if let Some(pos) = self.erlang_server {
            if fs {
                self.warn(
                    pos,
                    "<server type=\"erlang\"> is not honoured: fs sessions use no server (headroom's file steps connect nowhere)",
                );
            } else {
                self.error(
                    pos,
                    "'<server type=\"erlang\">' is not supported: headroom connects over TCP (type=\"tcp\")",
                );
            }
        }
        let mut sessions = sessions;
        let file_root = self.file_root(&mut sessions);
        if protocol != Protocol::Http && self.servers.is_empty() {
            // The protocol is said on the servers: without one, the steps cannot be checked.
            let pos = one("servers").first().map_or(root.pos, |s| s.pos);
            self.error(
                pos,
                format!(
                    "no <server>: headroom needs the server of the {} sessions",
                    protocol.as_str()
                ),
            );
        }
        if let (Some(pos), false) = (self.bosh_at, matches!(link, LinkSpec::Xmpp(_))) {
            self.error(
                pos,
                "type=\"bosh\" carries XMPP: only for ts_jabber sessions",
            );
        }
        let mut link = link;
        if let (LinkSpec::Xmpp(x), Some(_)) = (&mut link, self.bosh_at) {
            x.bosh = Some(
                self.bosh_path
                    .clone()
                    .unwrap_or_else(|| "/http-bind".to_string()),
            );
        }
        let mut servers = std::mem::take(&mut self.servers);
        for s in &mut servers {
            s.protocol = protocol;
        }
        if let (LinkSpec::Xmpp(_) | LinkSpec::Ldap, Some(pos)) = (&link, self.link.starttls_at) {
            if servers.iter().any(|s| s.tls.is_some()) {
                self.error(
                    pos,
                    "STARTTLS on a server of type=\"ssl\", whose connections are TLS from the first byte",
                );
            } else {
                self.warn(
                    pos,
                    "STARTTLS without certificate checks, as Tsung does (tls: {insecure: true, starttls: true}); drop `insecure` to verify",
                );
                for s in &mut servers {
                    s.tls = Some(ServerTls {
                        insecure: true,
                        starttls: true,
                        ..Default::default()
                    });
                }
            }
        }
        Scenario {
            name,
            servers,
            load,
            sessions,
            thresholds: Vec::new(),
            link,
            http: Default::default(),
            file_root,
        }
    }

    fn options(&mut self, el: &El) {
        self.check_attrs(el, &[]);
        self.no_text(el);
        for o in &el.children {
            if o.name != "option" {
                self.unexpected(o, "options");
                continue;
            }
            if o.attr("type").is_some_and(|t| t.value == "ts_jabber") {
                self.jabber_option(o);
                continue;
            }
            if o.attr("type").is_some_and(|t| t.value == "ts_amqp") {
                self.amqp_option(o);
                continue;
            }
            let name = o.attr("name").map(|a| a.value.as_str()).unwrap_or("");
            match name {
                "file_server" => {
                    self.check_attrs(o, &["name", "id", "value"]);
                    self.no_text(o);
                    for c in &o.children {
                        self.unexpected(c, "option");
                    }
                    if let Some(v) = self.required(o, "value") {
                        let id = o.attr("id").map(|a| a.value.clone());
                        let path = v.value.clone();
                        self.files
                            .insert(id.unwrap_or_else(|| "default".into()), path);
                    }
                }
                "bosh_path" => {
                    self.check_attrs(o, &["name", "value"]);
                    self.no_text(o);
                    if let Some(v) = self.required(o, "value") {
                        let (path, pos) = (v.value.clone(), v.pos);
                        if crate::parse::bosh_path_ok(&path) {
                            self.bosh_path = Some(path);
                        } else {
                            self.error(
                                pos,
                                format!(
                                    "bosh_path \"{path}\": expected an HTTP path, e.g. /http-bind"
                                ),
                            );
                        }
                    }
                }
                "thinktime" if o.attr("type").is_none() => {
                    self.check_attrs(o, &["name", "value", "random", "min", "max", "override"]);
                    self.no_text(o);
                    for c in &o.children {
                        self.unexpected(c, "option");
                    }
                    if let Some(a) = o.attr("value") {
                        if let Some(v) = self.number(a) {
                            self.think.value = v;
                        }
                    }
                    if let Some(r) = self.bool_attr(o, "random") {
                        self.think.random = r;
                    }
                    if let (Some(mn), Some(mx)) = (o.attr("min"), o.attr("max")) {
                        if let (Some(a), Some(b)) = (self.number(mn), self.number(mx)) {
                            self.think.range = Some((a, b));
                        }
                    }
                    if let Some(ov) = self.bool_attr(o, "override") {
                        self.think.overrides = ov;
                    }
                }
                "" => self.warn(o.pos, "<option> without a name is not honoured"),
                other => {
                    let why = match other {
                        "user_agent" => "add a User-Agent header to the requests instead",
                        "seed" => "headroom has its own seed",
                        "global_number" => "headroom has no barrier between users (ack=\"global\")",
                        _ => "headroom has its own settings for this",
                    };
                    self.warn(
                        o.pos,
                        format!("<option name=\"{other}\"> is not honoured: {why}"),
                    );
                }
            }
        }
    }

    fn servers(&mut self, el: &El) {
        self.check_attrs(el, &[]);
        self.no_text(el);
        for c in &el.children {
            if c.name != "server" {
                self.unexpected(c, "servers");
                continue;
            }
            self.check_attrs(c, &["host", "port", "type", "weight"]);
            self.no_text(c);
            for x in &c.children {
                self.unexpected(x, "server");
            }
            self.ignored(
                c,
                "weight",
                "requests go to the servers in headroom's own way",
            );
            let host = self.required(c, "host").and_then(|a| {
                if a.value.is_empty() {
                    let pos = a.pos;
                    self.error(pos, "host=\"\": expected a host name");
                    return None;
                }
                Some(a.value.clone())
            });
            let port = self
                .required(c, "port")
                .and_then(|a| match a.value.parse::<u16>() {
                    Ok(p) if p > 0 => Some(p),
                    _ => {
                        let pos = a.pos;
                        self.error(pos, format!("port=\"{}\": expected 1..65535", a.value));
                        None
                    }
                });
            let mut tls = None;
            let ok = match c.attr("type") {
                None => true,
                Some(t) => match t.value.as_str() {
                    "tcp" | "tcp6" => true,
                    "ssl" | "ssl6" | "bosh_ssl" => {
                        if t.value == "bosh_ssl" {
                            // XMPP over BOSH over https.
                            self.bosh_at = Some(t.pos);
                        }
                        // Tsung does not check the server's certificate: neither does the
                        // imported scenario (say so, so nobody takes it for verified).
                        let pos = t.pos;
                        self.warn(
                            pos,
                            format!(
                                "type=\"{}\": TLS without certificate checks, as Tsung does \
                                 (tls: {{insecure: true}}); drop `insecure` to verify",
                                t.value
                            ),
                        );
                        tls = Some(crate::model::ServerTls {
                            insecure: true,
                            ..Default::default()
                        });
                        true
                    }
                    // XMPP over BOSH: the server is the BOSH endpoint's HTTP listener.
                    "bosh" => {
                        self.bosh_at = Some(t.pos);
                        true
                    }
                    // Judged once the sessions are known: fs sessions do not use it.
                    "erlang" => {
                        self.erlang_server = self.erlang_server.or(Some(t.pos));
                        false
                    }
                    other => {
                        let why = match other {
                            "udp" | "udp6" => "headroom speaks TCP only",
                            _ => "headroom connects over TCP (type=\"tcp\")",
                        };
                        self.error(
                            t.pos,
                            format!("'<server type=\"{other}\">' is not supported: {why}"),
                        );
                        false
                    }
                },
            };
            if let (Some(host), Some(port), true) = (host, port, ok) {
                self.servers.push(Server {
                    http2: false,
                    host,
                    port,
                    protocol: Protocol::Http,
                    tls,
                });
            }
        }
    }

    // ---- load -------------------------------------------------------------------------------

    fn load(&mut self, el: &El, sessions: &[Session]) -> Load {
        self.check_attrs(el, &["duration", "unit", "loop"]);
        self.no_text(el);
        self.ignored(
            el,
            "duration",
            "the run lasts as long as its phases (and the users still running)",
        );
        if el.attr("duration").is_none() {
            self.ignored(el, "unit", "it goes with duration");
        }
        if let Some(l) = el.attr("loop") {
            if l.value.trim() != "0" {
                let pos = l.pos;
                self.warn(
                    pos,
                    format!(
                        "attribute 'loop' of <load> is not honoured: repeat the phases {} more time(s) in the converted file",
                        l.value
                    ),
                );
            }
        }
        let mut load = Load::default();
        for c in &el.children {
            match c.name.as_str() {
                "arrivalphase" => {
                    if let Some(p) = self.phase(c) {
                        load.phases.push(p);
                    }
                }
                "user" => {
                    self.check_attrs(c, &["session", "start_time", "unit"]);
                    self.no_text(c);
                    let Some(s) = self.required(c, "session") else {
                        continue;
                    };
                    let name = s.value.clone();
                    if !sessions.iter().any(|x| x.name == name) {
                        self.error(
                            s.pos,
                            format!("<user> refers to session '{name}', which is not converted"),
                        );
                        continue;
                    }
                    // Tsung starts the session once, start_time into the run; the user leaves
                    // when it ends: a `once` user.
                    let unit = self.unit(c, "second");
                    let Some(t) = self.required(c, "start_time") else {
                        continue;
                    };
                    let (Some(v), Some(unit)) = (self.number(t), unit) else {
                        continue;
                    };
                    let Some(at) = self.secs(v * unit, t.pos, "start_time") else {
                        continue;
                    };
                    if load.once.len() == MAX_ONCE {
                        self.error(c.pos, format!("more than {MAX_ONCE} <user>s"));
                        continue;
                    }
                    if self.userid_sessions.contains(&name) {
                        self.warn(
                            c.pos,
                            format!("session '{name}' reads tsung_userid: this once user's number counts from 1 as arrived users' do, so it may repeat one of theirs (Tsung numbers all users in one sequence)"),
                        );
                    }
                    load.once.push(Once { session: name, at });
                }
                _ => self.unexpected(c, "load"),
            }
        }
        if load.phases.is_empty() && load.once.is_empty() && self.errors.is_empty() {
            self.error(el.pos, "<load> has no <arrivalphase> or <user>");
        }
        load
    }

    fn phase(&mut self, el: &El) -> Option<Phase> {
        self.check_attrs(el, &["phase", "duration", "unit", "wait_all_sessions_end"]);
        self.no_text(el);
        self.ignored(
            el,
            "wait_all_sessions_end",
            "the next phase starts when this one's duration is over",
        );
        let unit = self.unit(el, "second");
        let duration = self
            .required(el, "duration")
            .and_then(|a| self.number(a).map(|v| (v, a.pos)));
        let mut users = None;
        for c in &el.children {
            match c.name.as_str() {
                "users" if users.is_none() => users = Some(c),
                "session_setup" => self.warn(
                    c.pos,
                    "<session_setup> is not honoured: the sessions' weights apply in every phase",
                ),
                _ => self.unexpected(c, "arrivalphase"),
            }
        }
        let Some(users) = users else {
            self.error(el.pos, "<arrivalphase> needs a <users> element");
            return None;
        };
        let rate = self.users(users);
        let (d, pos) = duration?;
        let duration = self.secs(d * unit?, pos, "duration")?;
        let (rate, max_users) = rate?;
        Some(Phase {
            duration,
            rate: Rate::Fixed(rate),
            arrival: Arrival::Poisson,
            max_users,
        })
    }

    fn users(&mut self, el: &El) -> Option<(f64, Option<u64>)> {
        self.check_attrs(el, &["arrivalrate", "interarrival", "unit", "maxnumber"]);
        self.no_text(el);
        for c in &el.children {
            self.unexpected(c, "users");
        }
        let unit = self.unit(el, "second");
        let rate = match (el.attr("arrivalrate"), el.attr("interarrival")) {
            (Some(r), None) => {
                let v = self.number(r)?;
                (v > 0.0).then(|| v / unit.unwrap_or(1.0)).or_else(|| {
                    self.error(r.pos, "arrivalrate must be positive");
                    None
                })
            }
            (None, Some(i)) => {
                let v = self.number(i)?;
                (v > 0.0)
                    .then(|| 1.0 / (v * unit.unwrap_or(1.0)))
                    .or_else(|| {
                        self.error(i.pos, "interarrival must be positive");
                        None
                    })
            }
            (Some(_), Some(i)) => {
                self.error(i.pos, "give arrivalrate or interarrival, not both");
                None
            }
            (None, None) => {
                self.error(el.pos, "<users> needs arrivalrate or interarrival");
                None
            }
        };
        let max = match el.attr("maxnumber") {
            Some(m) => {
                let n = self.positive_int(m)?;
                self.warn(
                    m.pos,
                    format!("maxnumber=\"{n}\" becomes max_users: headroom caps the users alive at once, Tsung caps the users started in the phase"),
                );
                Some(n)
            }
            None => None,
        };
        unit?;
        Some((rate?, max))
    }

    // ---- sessions ---------------------------------------------------------------------------

    fn sessions(&mut self, el: &El) -> Vec<Session> {
        self.check_attrs(el, &[]);
        self.no_text(el);
        let mut out: Vec<Session> = Vec::new();
        for c in &el.children {
            if c.name != "session" {
                self.unexpected(c, "sessions");
                continue;
            }
            if let Some(mut s) = self.session(c) {
                // Tsung runs sessions of the same name as two entries of its mix (a <user>
                // starts the first); headroom's names are unique, so the later one is renamed.
                if out.iter().any(|x| x.name == s.name) {
                    let name = (2..=out.len() + 2)
                        .map(|n| format!("{}-{n}", s.name))
                        .find(|n| !out.iter().any(|x| &x.name == n))
                        .expect("a free name");
                    self.warn(
                        c.pos,
                        format!("a second session named '{}' is named '{name}' (headroom's session names are unique; a <user> runs the first)", s.name),
                    );
                    s.name = name;
                }
                out.push(s);
            }
        }
        if out.is_empty() && self.errors.is_empty() {
            self.error(el.pos, "no session to convert");
        }
        out
    }

    fn session(&mut self, el: &El) -> Option<Session> {
        self.check_attrs(
            el,
            &[
                "name",
                "probability",
                "weight",
                "type",
                "persistent",
                "bidi",
            ],
        );
        self.no_text(el);
        let name = self.required(el, "name").map(|a| a.value.clone());
        let kind = match el.attr("type").map(|a| a.value.as_str()) {
            Some(t) => match Kind::of_type(t) {
                Some(k) => k,
                None => {
                    // One error per session, at its first element of the other protocol if any.
                    match el.find(&|e| PROTOCOL_ELEMENTS.contains(&e.name.as_str())) {
                        Some(p) => self.error(
                            p.pos,
                            format!(
                                "{}; session '{}' is of type {t}",
                                unsupported(&format!("<{}>", p.name)),
                                name.as_deref().unwrap_or("")
                            ),
                        ),
                        None => self.error(el.pos, unsupported(&format!("<session type=\"{t}\">"))),
                    }
                    return None;
                }
            },
            None => {
                self.error(
                    el.pos,
                    "<session> needs a type: ts_http, ts_jabber, ts_pgsql, ts_raw, ts_websocket, ts_mqtt, ts_ldap, ts_mysql, ts_amqp or ts_fs",
                );
                return None;
            }
        };
        let name = name?;
        if name.is_empty() {
            self.error(el.pos, "session name must not be empty");
            return None;
        }
        self.ignored(
            el,
            "persistent",
            "headroom keeps connections alive in its own way",
        );
        if kind == Kind::Http {
            self.ignored(el, "bidi", "it is for bidirectional protocols");
        }
        let weight = match (el.attr("probability"), el.attr("weight")) {
            (Some(p), None) | (None, Some(p)) => {
                let v = self.number(p)?;
                if v < 0.0 {
                    self.error(p.pos, format!("{} must not be negative", p.key));
                    return None;
                }
                if v == 0.0 {
                    self.warn(
                        p.pos,
                        format!("session '{name}' has {}=\"0\": weight 0, out of the mix; only a <user> naming it runs it", p.key),
                    );
                    self.zero.insert(name.clone());
                }
                v
            }
            (Some(_), Some(w)) => {
                self.error(w.pos, "give probability or weight, not both");
                return None;
            }
            (None, None) => {
                self.error(el.pos, "<session> needs probability (or weight)");
                return None;
            }
        };
        self.vars.clear();
        self.unset_vars.clear();
        self.session_defs.clear();
        definitions(el, &mut self.session_defs);
        self.pending.clear();
        self.tsung_userid = None;
        if !self.begin_session(el, kind, &name) {
            return None;
        }
        let mut steps = self.steps(&el.children, "session");
        if let Some(pos) = self.tsung_userid {
            self.warn(
                pos,
                format!("tsung_userid, Tsung's number of the user (1, 2, 3, ... as users start), becomes ${{tsung_userid}}, set first in the session to {TSUNG_USERID_EXPR} (headroom's user_id without the 2^40 its arrived users carry, plus one)"),
            );
            self.userid_sessions.insert(name.clone());
            steps.insert(
                0,
                Step::Set {
                    var: TSUNG_USERID.into(),
                    source: SetSource::Expr(TSUNG_USERID_EXPR.into()),
                },
            );
        }
        self.end_session(el, !steps.is_empty());
        if steps.is_empty() {
            self.error(
                el.pos,
                format!("session '{name}' has no step headroom can run"),
            );
            return None;
        }
        Some(Session {
            name,
            weight,
            steps,
            surge: None,
        })
    }

    fn steps(&mut self, children: &[El], parent: &str) -> Vec<Step> {
        let mut all = Vec::new();
        for c in children {
            let mut out = Vec::new();
            self.step(c, parent, &mut out);
            // What the step needs first (set in the conversion of the step itself).
            all.append(&mut self.pending);
            all.append(&mut out);
        }
        all
    }

    /// One child of a session, transaction or loop, converted into `out`.
    fn step(&mut self, c: &El, parent: &str, out: &mut Vec<Step>) {
        match c.name.as_str() {
            "request" => self.request(c, out),
            "thinktime" => {
                if let Some(d) = self.thinktime(c) {
                    out.push(Step::Think(d));
                    self.after_think(c.pos);
                }
            }
            "transaction" => self.transaction(c, out),
            "setdynvars" => self.setdynvars(c, out),
            "for" => self.for_loop(c, out),
            "repeat" => self.repeat(c, out),
            "while" | "until" => self.error(
                c.pos,
                format!("<{}> must be the last element of a <repeat>", c.name),
            ),
            "if" => self.error(
                c.pos,
                "'<if>' is not supported: headroom scenarios have no conditional step",
            ),
            "foreach" => self.error(
                c.pos,
                "'<foreach>' is not supported: headroom loops have no per-item variable",
            ),
            "set_option" => self.warn(c.pos, "<set_option> is not honoured"),
            _ => self.unexpected(c, parent),
        }
    }

    fn transaction(&mut self, el: &El, out: &mut Vec<Step>) {
        self.check_attrs(el, &["name"]);
        self.no_text(el);
        let name = self.required(el, "name").map(|a| a.value.clone());
        let absorbed = self.sess.absorbed;
        let steps = self.steps(&el.children, "transaction");
        let absorbed = self.sess.absorbed - absorbed;
        let Some(name) = name else {
            return;
        };
        if name.is_empty() {
            self.error(el.pos, "transaction name must not be empty");
            return;
        }
        if let Some(note) = self.absorbed_note(&name, absorbed, steps.is_empty()) {
            self.warn(el.pos, note);
        } else if steps.is_empty() {
            self.warn(
                el.pos,
                format!("transaction '{name}' has no step headroom can run: skipped"),
            );
        }
        if !steps.is_empty() {
            out.push(Step::Transaction { name, steps });
        }
    }

    fn thinktime(&mut self, el: &El) -> Option<Distribution> {
        self.check_attrs(el, &["value", "random", "min", "max"]);
        self.no_text(el);
        for c in &el.children {
            self.unexpected(c, "thinktime");
        }
        if let Some(v) = el.attr("value") {
            if v.value.starts_with("%%") {
                self.error(v.pos, "a think time from a variable is not supported");
                return None;
            }
            if v.value == "wait_bidi" || v.value == "wait_global" {
                self.error(v.pos, format!("value=\"{}\" is not supported", v.value));
                return None;
            }
        }
        let random = self.bool_attr(el, "random");
        let (value, min, max) = (el.attr("value"), el.attr("min"), el.attr("max"));
        let d = &self.think;
        let (def_value, def_random, def_range) = (d.value, d.random, d.range);
        if d.overrides {
            // Tsung replaces every think time by the option's.
            return self.think_of(def_value, def_random, def_range, el.pos);
        }
        match (value, min, max) {
            (None, Some(a), Some(b)) => {
                let (a, b) = (self.number(a)?, self.number(b)?);
                self.think_of(0.0, false, Some((a, b)), el.pos)
            }
            (Some(v), None, None) => {
                let v = self.number(v)?;
                self.think_of(v, random.unwrap_or(def_random), None, el.pos)
            }
            (None, None, None) => {
                self.think_of(def_value, random.unwrap_or(def_random), def_range, el.pos)
            }
            _ => {
                self.error(el.pos, "<thinktime> takes value, or min and max");
                None
            }
        }
    }

    fn think_of(
        &mut self,
        value: f64,
        random: bool,
        range: Option<(f64, f64)>,
        pos: usize,
    ) -> Option<Distribution> {
        if let Some((a, b)) = range {
            let (min, max) = (self.secs(a, pos, "min")?, self.secs(b, pos, "max")?);
            if min > max {
                self.error(pos, "thinktime min must not exceed max");
                return None;
            }
            return Some(Distribution::Uniform { min, max });
        }
        let d = self.secs(value, pos, "thinktime")?;
        Some(if random {
            // Tsung draws random think times from an exponential distribution of that mean.
            Distribution::Exponential { mean: d }
        } else {
            Distribution::Constant(d)
        })
    }

    fn setdynvars(&mut self, el: &El, out: &mut Vec<Step>) {
        const ALL: &[&str] = &[
            "sourcetype",
            "callback",
            "code",
            "fileid",
            "order",
            "delimiter",
            "length",
            "start",
            "end",
            "from",
            "jsonpath",
            "value",
        ];
        self.check_attrs(el, ALL);
        self.no_text(el);
        let mut vars = Vec::new();
        for c in &el.children {
            if c.name != "var" {
                self.unexpected(c, "setdynvars");
                continue;
            }
            self.check_attrs(c, &["name"]);
            self.no_text(c);
            if let Some(v) = self.required(c, "name").and_then(|a| self.var_name(a)) {
                vars.push(v);
            }
        }
        let kind = el
            .attr("sourcetype")
            .map(|a| a.value.clone())
            .unwrap_or_else(|| "erlang".into());
        let used: &[&str] = match kind.as_str() {
            "random_number" => &["start", "end"],
            "random_string" | "urandom_string" => &["length"],
            "file" => &["fileid", "order", "delimiter"],
            "value" => &["value"],
            "eval" => &["code"],
            // Tsung's unique id of the user (ts_user_server): headroom's ${user_id}, the same
            // number for every use within one user.
            "erlang"
                if el.attr("callback").is_some_and(|c| {
                    matches!(
                        c.value.trim(),
                        "ts_user_server:get_unique_id" | "ts_user_server:get_really_unique_id"
                    )
                }) =>
            {
                self.warn(
                    el.pos,
                    "ts_user_server's unique id becomes headroom's ${user_id} (unique per user; Tsung gives a new id at each call)",
                );
                &["callback"]
            }
            other => {
                let why = match other {
                    "erlang" | "eval" => "headroom scenarios run no Erlang code",
                    "jsonpath" => "use a <dyn_variable jsonpath> on the request instead",
                    _ => "headroom has no such source",
                };
                self.error(
                    el.pos,
                    format!("'<setdynvars sourcetype=\"{other}\">' is not supported: {why}"),
                );
                // Its variables count as defined: one error, not one more at each use.
                self.vars.extend(vars);
                return;
            }
        };
        for a in &el.attrs {
            if a.key != "sourcetype"
                && ALL.contains(&a.key.as_str())
                && !used.contains(&a.key.as_str())
            {
                self.warn(
                    a.pos,
                    format!(
                        "attribute '{}' of <setdynvars> does not apply to sourcetype=\"{kind}\": not honoured",
                        a.key
                    ),
                );
            }
        }
        let sources: Vec<SetSource> = match kind.as_str() {
            "random_number" => {
                let start = match el.attr("start") {
                    Some(a) => self.int(a),
                    None => Some(1),
                };
                let end = match el.attr("end") {
                    Some(a) => self.int(a),
                    None => Some(10),
                };
                let (Some(min), Some(max)) = (start, end) else {
                    return;
                };
                if min > max {
                    self.error(el.pos, "random_number: start must not exceed end");
                    return;
                }
                vec![SetSource::RandomNumber { min, max }; vars.len()]
            }
            "random_string" | "urandom_string" => {
                let length = match el.attr("length") {
                    Some(a) => self.positive_int(a),
                    None => Some(20),
                };
                let Some(length) = length else {
                    return;
                };
                vec![
                    SetSource::RandomString {
                        length: length as usize
                    };
                    vars.len()
                ]
            }
            "file" => {
                let id = el
                    .attr("fileid")
                    .map(|a| a.value.clone())
                    .unwrap_or_else(|| "default".into());
                let Some(file) = self.files.get(&id).cloned() else {
                    self.error(
                        el.pos,
                        format!("fileid '{id}' has no <option name=\"file_server\" id=\"{id}\">"),
                    );
                    return;
                };
                let order = match el.attr("order") {
                    None => CsvOrder::Sequential,
                    Some(o) => match o.value.as_str() {
                        "iter" => CsvOrder::Sequential,
                        "random" => CsvOrder::Random,
                        _ => {
                            let pos = o.pos;
                            self.error(pos, "order: expected iter or random");
                            return;
                        }
                    },
                };
                let delim = el.attr("delimiter");
                let d = delim.map(|a| a.value.as_str()).unwrap_or(";");
                if d != "," {
                    let pos = delim.map(|a| a.pos).unwrap_or(el.pos);
                    self.warn(
                        pos,
                        format!("headroom splits CSV lines on ','; Tsung splits this file on '{d}' (convert the file, or check it has one column)"),
                    );
                }
                // Tsung reads one line and splits it over the <var>s: the first takes the row,
                // the others read the same one.
                (0..vars.len())
                    .map(|column| SetSource::Csv {
                        file: file.clone(),
                        column,
                        order: if column == 0 {
                            order
                        } else {
                            CsvOrder::SameRow
                        },
                    })
                    .collect()
            }
            "erlang" => vec![SetSource::UserId; vars.len()],
            "eval" => {
                let Some(source) = self.eval_source(el, &vars) else {
                    // Its variables count as defined: one error, not one more at each use.
                    self.vars.extend(vars);
                    return;
                };
                vec![source]
            }
            _ => {
                let v = el
                    .attr("value")
                    .map(|a| a.value.clone())
                    .unwrap_or_default();
                if v.contains("${") {
                    self.error(
                        el.pos,
                        format!("'{v}' holds '${{', which headroom reads as a variable and cannot escape"),
                    );
                    return;
                }
                vec![SetSource::Value(v); vars.len()]
            }
        };
        if vars.is_empty() {
            self.warn(el.pos, "<setdynvars> without <var> sets nothing: skipped");
        }
        for (var, source) in vars.into_iter().zip(sources) {
            self.vars.insert(var.clone());
            out.push(Step::Set { var, source });
        }
    }

    /// `<setdynvars sourcetype="eval" code>` of one `<var>`: the Erlang fun translated into a
    /// `set: {expr}` (see [`eval`]), with a warning showing it; `None` after an error, located
    /// at the first construct the translation refused.
    fn eval_source(&mut self, el: &El, vars: &[String]) -> Option<SetSource> {
        let Some(code) = el.attr("code") else {
            self.error(
                el.pos,
                "<setdynvars sourcetype=\"eval\"> needs the attribute 'code'",
            );
            return None;
        };
        let [var] = vars else {
            if vars.is_empty() {
                self.warn(el.pos, "<setdynvars> without <var> sets nothing: skipped");
            } else {
                self.error(
                    el.pos,
                    format!("sourcetype=\"eval\" with {} <var>s: Tsung sets them from a list the fun returns; headroom translates a fun that returns one integer", vars.len()),
                );
            }
            return None;
        };
        let mut reads_userid = false;
        let defined = &self.vars;
        let unset = &self.unset_vars;
        let translated = eval::translate(&code.value, &mut |name: &str| {
            if name == TSUNG_USERID {
                reads_userid = true;
                Ok(TSUNG_USERID.to_string())
            } else if !valid_var(name) {
                Err(format!(
                    "'{name}' is no variable name headroom can hold (letters, digits, _)"
                ))
            } else if defined.contains(name) {
                Ok(name.to_string())
            } else if let Some(why) = unset.get(name) {
                Err(format!("dynamic variable '{name}' is not set: {why}"))
            } else {
                Err(format!("dynamic variable '{name}' is not set before this <setdynvars> (Tsung's lookup finds nothing there, and {{ok, Val}} = false fails)"))
            }
        });
        match translated {
            Ok(text) => {
                if reads_userid {
                    self.tsung_userid.get_or_insert(code.pos);
                }
                self.warn(
                    code.pos,
                    format!("the Erlang fun becomes set: {{var: {var}, expr: \"{text}\"}} (integers of 64 bits: an overflow ends the session where Erlang's integers would grow)"),
                );
                Some(SetSource::Expr(text))
            }
            Err(r) => {
                let pos = self.attr_value_pos(code, r.at);
                self.error(
                    pos,
                    format!("'<setdynvars sourcetype=\"eval\">' is not translated: {} (headroom translates Erlang funs that compute an integer from dynamic variables)", r.message),
                );
                None
            }
        }
    }

    /// Where byte `i` of attribute `a`'s value is in the file, following its entities and
    /// normalised white space; the attribute's own place when the value cannot be followed
    /// (an entity of the DTD that expanded to more than one character, say).
    fn attr_value_pos(&self, a: &Attr, i: usize) -> usize {
        let raw = self.at.text.as_bytes();
        let value = a.value.as_bytes();
        let skip_ws = |mut r: usize| {
            while raw.get(r).is_some_and(u8::is_ascii_whitespace) {
                r += 1;
            }
            r
        };
        let mut r = skip_ws(a.pos + a.key.len());
        if raw.get(r) != Some(&b'=') {
            return a.pos;
        }
        r = skip_ws(r + 1);
        let quote = match raw.get(r) {
            Some(&q @ (b'"' | b'\'')) => q,
            _ => return a.pos,
        };
        r += 1;
        let mut d = 0;
        while d < i.min(value.len()) {
            let Some(&c) = raw.get(r) else {
                return a.pos;
            };
            if c == quote {
                return a.pos;
            }
            if c == b'&' {
                // One character of the value, whatever the reference.
                let Some(semi) = raw[r..].iter().take(12).position(|&b| b == b';') else {
                    return a.pos;
                };
                d += a
                    .value
                    .get(d..)
                    .and_then(|v| v.chars().next())
                    .map_or(1, char::len_utf8);
                r += semi + 1;
            } else if c == b'\r' && raw.get(r + 1) == Some(&b'\n') && value[d] == b' ' {
                r += 2;
                d += 1;
            } else if c == value[d] || (c.is_ascii_whitespace() && value[d] == b' ') {
                r += 1;
                d += 1;
            } else {
                return a.pos;
            }
        }
        r
    }

    fn for_loop(&mut self, el: &El, out: &mut Vec<Step>) {
        self.check_attrs(el, &["var", "from", "to", "incr"]);
        self.no_text(el);
        // The counter is a variable of the loop (Tsung sets it before the first pass and keeps
        // it after the last), defined for the body and for what follows.
        let var = self.required(el, "var").and_then(|v| self.var_name(v));
        let from = self.required(el, "from").and_then(|a| self.int(a));
        let to = self.required(el, "to").and_then(|a| self.int(a));
        let incr = match el.attr("incr") {
            Some(a) => self.positive_int(a),
            None => Some(1),
        };
        if let Some(v) = &var {
            self.vars.insert(v.clone());
        }
        self.loop_boundary();
        let steps = self.steps(&el.children, "for");
        self.loop_boundary();
        let (Some(var), Some(from), Some(to), Some(incr)) = (var, from, to, incr) else {
            return;
        };
        // Tsung's for_end leaves once the counter is at least `to`, and adds `incr` otherwise:
        // the body runs with from, from + incr, ... up to the first value >= to (once when
        // to <= from).
        let span = (i128::from(to) - i128::from(from)).max(0);
        let count = 1 + (span + i128::from(incr) - 1) / i128::from(incr);
        let Ok(count) = u64::try_from(count) else {
            self.error(el.pos, "<for>: too many passes");
            return;
        };
        if steps.is_empty() {
            self.warn(el.pos, "<for> has no step headroom can run: skipped");
            return;
        }
        out.push(Step::Loop(Loop {
            count: Some(count),
            condition: None,
            counter: Some(LoopCounter {
                var,
                start: from,
                step: incr as i64,
            }),
            steps,
        }));
    }

    fn repeat(&mut self, el: &El, out: &mut Vec<Step>) {
        self.check_attrs(el, &["name", "max_repeat"]);
        self.no_text(el);
        let max = match el.attr("max_repeat") {
            Some(a) => self.positive_int(a),
            None => Some(20),
        };
        let Some((last, body)) = el
            .children
            .split_last()
            .filter(|(l, _)| l.name == "while" || l.name == "until")
        else {
            self.error(
                el.pos,
                "the last element of a <repeat> must be <while> or <until>",
            );
            return;
        };
        self.loop_boundary();
        let steps = self.steps(body, "repeat");
        self.loop_boundary();
        // The condition is checked after the body, which may define its variable.
        let condition = self.condition(last);
        let (Some(max), Some(condition)) = (max, condition) else {
            return;
        };
        if steps.is_empty() {
            self.warn(el.pos, "<repeat> has no step headroom can run: skipped");
            return;
        }
        out.push(Step::Loop(Loop {
            count: Some(max),
            condition: Some(condition),
            counter: None,
            steps,
        }));
    }

    /// `<while|until var eq|neq>` as a truth test of the variable, where that is what it means.
    fn condition(&mut self, el: &El) -> Option<Condition> {
        self.check_attrs(el, &["var", "eq", "neq", "gt", "lt", "gte", "lte"]);
        self.no_text(el);
        for c in &el.children {
            self.unexpected(c, &el.name.clone());
        }
        let var = self.required(el, "var").and_then(|a| self.var_name(a))?;
        let given: Vec<&Attr> = ["eq", "neq", "gt", "lt", "gte", "lte"]
            .iter()
            .filter_map(|k| el.attr(k))
            .collect();
        let [cmp] = given.as_slice() else {
            self.error(el.pos, format!("<{}> takes one of eq or neq", el.name));
            return None;
        };
        if cmp.key != "eq" && cmp.key != "neq" {
            self.error(
                cmp.pos,
                format!("{}=\"{}\": numeric comparisons are not supported; headroom loops test whether a variable is true (set, non-empty, not 0 or false)", cmp.key, cmp.value),
            );
            return None;
        }
        let truthy = match cmp.value.trim().to_ascii_lowercase().as_str() {
            "true" | "1" => true,
            "" | "0" | "false" => false,
            _ => {
                self.error(
                    cmp.pos,
                    format!(
                        "<{} var=\"{var}\" {}=\"{}\">: headroom loops test whether a variable is true (set, non-empty, not 0 or false), not whether it equals '{}'; compare with true, false, 1, 0 or \"\"",
                        el.name, cmp.key, cmp.value, cmp.value
                    ),
                );
                return None;
            }
        };
        if !self.vars.contains(&var) && !BUILTINS.contains(&var.as_str()) {
            self.use_var(&var, el.pos);
            return None;
        }
        // The Tsung test holds when the variable is true (eq true / neq false) or false.
        let holds_when_true = (cmp.key == "eq") == truthy;
        let is_while = (el.name == "while") == holds_when_true;
        Some(if is_while {
            Condition::While(var)
        } else {
            Condition::Until(var)
        })
    }

    // ---- requests ---------------------------------------------------------------------------

    fn request(&mut self, el: &El, out: &mut Vec<Step>) {
        if self.sess.kind != Kind::Http {
            self.proto_request(el, out);
            return;
        }
        self.check_attrs(el, &["subst", "tag"]);
        self.no_text(el);
        self.ignored(el, "tag", "headroom has no request tags to exclude");
        let subst = self.bool_attr(el, "subst").unwrap_or(false);
        let mut http = None;
        let mut matches = Vec::new();
        let mut dyns = Vec::new();
        let mut other_protocol = false;
        for c in &el.children {
            match c.name.as_str() {
                "http" if http.is_none() => http = Some(c),
                "http" => self.error(c.pos, "a <request> takes one <http>"),
                "match" => matches.push(c),
                "dyn_variable" => dyns.push(c),
                n if PROTOCOL_ELEMENTS.contains(&n) => {
                    other_protocol = true;
                    self.unexpected(c, "request");
                }
                _ => self.unexpected(c, "request"),
            }
        }
        let Some(h) = http else {
            if !other_protocol {
                self.error(el.pos, "<request> without <http>");
            }
            return;
        };
        if let Some(r) = self.http(h, subst) {
            out.push(Step::Request(r));
        }
        for m in matches {
            if let Some(x) = self.matcher(m) {
                out.push(Step::Match(x));
            }
        }
        for d in dyns {
            if let Some(e) = self.dyn_variable(d) {
                out.push(Step::Extract(e));
            }
        }
    }

    fn http(&mut self, el: &El, subst: bool) -> Option<Request> {
        self.check_attrs(
            el,
            &[
                "url",
                "method",
                "version",
                "contents",
                "content_type",
                "contents_from_file",
                "if_modified_since",
            ],
        );
        self.no_text(el);
        let url = self.required(el, "url")?;
        let method = match el.attr("method") {
            None => "GET".to_string(),
            Some(m) => {
                let up = m.value.to_ascii_uppercase();
                if up.is_empty() || !up.chars().all(|c| c.is_ascii_uppercase()) {
                    let pos = m.pos;
                    self.error(pos, format!("method=\"{}\" is not supported", m.value));
                    return None;
                }
                up
            }
        };
        if let Some(v) = el.attr("version") {
            match v.value.as_str() {
                "1.1" => {}
                "1.0" => {
                    let pos = v.pos;
                    self.warn(
                        pos,
                        "version=\"1.0\" is not honoured: headroom sends HTTP/1.1 requests",
                    );
                }
                other => {
                    let pos = v.pos;
                    self.error(pos, format!("version=\"{other}\": expected 1.0 or 1.1"));
                }
            }
        }
        if let Some(f) = el.attr("contents_from_file") {
            let pos = f.pos;
            self.error(
                pos,
                "contents_from_file is not supported: put the body in contents=\"...\"",
            );
            return None;
        }
        let raw_path = self.url_path(&url.value, url.pos)?;
        let path = self.subst(&raw_path, url.pos, subst)?;
        if !path.starts_with('/') && !path.starts_with("${") {
            self.error(
                url.pos,
                format!(
                    "url=\"{}\": expected an absolute path or an http:// URL",
                    url.value
                ),
            );
            return None;
        }
        let mut headers: Vec<(String, String)> = Vec::new();
        let mut auth = None;
        let mut oauth = None;
        let mut ok = true;
        for c in &el.children {
            match c.name.as_str() {
                "http_header" => {
                    self.check_attrs(c, &["name", "value", "encoding"]);
                    self.no_text(c);
                    let Some(name) = self.required(c, "name").map(|a| a.value.clone()) else {
                        ok = false;
                        continue;
                    };
                    let value = c.attr("value").map(|a| a.value.as_str()).unwrap_or("");
                    let Some(mut value) = self.subst(value, c.pos, subst) else {
                        ok = false;
                        continue;
                    };
                    if let Some(enc) = c.attr("encoding") {
                        if enc.value != "base64" {
                            let pos = enc.pos;
                            self.error(pos, format!("encoding=\"{}\": expected base64", enc.value));
                            ok = false;
                            continue;
                        }
                        if value.contains("${") {
                            self.error(
                                c.pos,
                                "a base64-encoded header cannot hold variables in headroom",
                            );
                            ok = false;
                            continue;
                        }
                        value = base64(value.as_bytes());
                    }
                    add_header(&mut headers, &name, value);
                }
                "soap" => {
                    self.check_attrs(c, &["action"]);
                    self.no_text(c);
                    if let Some(a) = self.required(c, "action") {
                        let v = a.value.clone();
                        match self.subst(&v, a.pos, subst) {
                            Some(v) => add_header(&mut headers, "SOAPAction", v),
                            None => ok = false,
                        }
                    }
                }
                "www_authenticate" => {
                    if auth.is_some() {
                        self.error(c.pos, "a second <www_authenticate>: an <http> takes one");
                        ok = false;
                        continue;
                    }
                    match self.www_authenticate(c, subst) {
                        Some(a) => auth = Some(a),
                        None => ok = false,
                    }
                }
                "add_cookie" => match self.add_cookie(c, subst) {
                    Some(step) => self.pending.push(Step::Cookie(step)),
                    None => ok = false,
                },
                "oauth" => {
                    if oauth.is_some() {
                        self.error(c.pos, "a second <oauth>: an <http> takes one");
                        ok = false;
                        continue;
                    }
                    match self.oauth(c, subst) {
                        Some(o) => oauth = Some(o),
                        None => ok = false,
                    }
                }
                _ => self.unexpected(c, "http"),
            }
        }
        if let Some(a) = el.attr("if_modified_since") {
            let v = a.value.clone();
            match self.subst(&v, a.pos, subst) {
                Some(v) => add_header(&mut headers, "If-Modified-Since", v),
                None => ok = false,
            }
        }
        let body = match el.attr("contents") {
            Some(a) => {
                let v = a.value.clone();
                Some(self.subst(&v, a.pos, subst)?)
            }
            None => None,
        };
        let has_type = headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-type"));
        match el.attr("content_type") {
            Some(ct) if has_type => {
                let pos = ct.pos;
                self.warn(
                    pos,
                    "attribute 'content_type' of <http> is not honoured: an <http_header name=\"Content-Type\"> is given",
                );
            }
            Some(ct) => {
                let v = ct.value.clone();
                match self.subst(&v, ct.pos, subst) {
                    Some(v) => headers.push(("Content-Type".into(), v)),
                    None => ok = false,
                }
            }
            // Tsung's default content type for a request with a body.
            None if !has_type && body.as_deref().is_some_and(|b| !b.is_empty()) => headers.push((
                "Content-Type".into(),
                "application/x-www-form-urlencoded".into(),
            )),
            None => {}
        }
        if let (Some(_), Some(_)) = (&auth, &oauth) {
            self.error(
                el.pos,
                "<www_authenticate> and <oauth> both write the request's Authorization: headroom sends one",
            );
            ok = false;
        }
        if !ok {
            return None;
        }
        Some(Request {
            name: format!("{method} {path}"),
            method,
            path,
            headers,
            body,
            auth,
            oauth: oauth.map(Box::new),
        })
    }

    /// `<oauth consumer_key consumer_secret [access_token access_token_secret]
    /// [encoding="HMAC-SHA1|PLAINTEXT"]>` (Tsung's `ts_config_http`): the request's `oauth`,
    /// signed per request as Tsung's `oauth_sign` does.
    fn oauth(&mut self, c: &El, subst: bool) -> Option<OAuth> {
        self.check_attrs(
            c,
            &[
                "consumer_key",
                "consumer_secret",
                "access_token",
                "access_token_secret",
                "encoding",
                "method",
            ],
        );
        self.no_text(c);
        for x in &c.children {
            self.unexpected(x, "oauth");
        }
        if let Some(m) = c.attr("method") {
            let pos = m.pos;
            self.warn(
                pos,
                "attribute 'method' of <oauth> is not honoured: Tsung reads the signature method from 'encoding' (default HMAC-SHA1), and so does headroom",
            );
        }
        let method = match c.attr("encoding") {
            None => OAuthMethod::HmacSha1,
            Some(e) => match OAuthMethod::parse(&e.value) {
                Some(m) => m,
                None => {
                    let pos = e.pos;
                    let msg = if e.value == "RSA-SHA1" {
                        "encoding=\"RSA-SHA1\" is not supported: headroom signs with HMAC-SHA1 or PLAINTEXT".to_string()
                    } else {
                        format!(
                            "encoding=\"{}\": expected HMAC-SHA1, PLAINTEXT or RSA-SHA1",
                            e.value
                        )
                    };
                    self.error(pos, msg);
                    return None;
                }
            },
        };
        let text = |conv: &mut Self, key: &str, required: bool| -> Option<String> {
            let Some(a) = c.attr(key) else {
                if required {
                    conv.required(c, key);
                    return None;
                }
                return Some(String::new());
            };
            let (v, pos) = (a.value.clone(), a.pos);
            if required && v.is_empty() {
                conv.error(pos, format!("{key}=\"\": expected a value"));
                return None;
            }
            conv.subst(&v, pos, subst)
        };
        let consumer_key = text(self, "consumer_key", true);
        let consumer_secret = text(self, "consumer_secret", true);
        let token = text(self, "access_token", false);
        let token_secret = text(self, "access_token_secret", false);
        Some(OAuth {
            consumer_key: consumer_key?,
            consumer_secret: consumer_secret?,
            token: token?,
            token_secret: token_secret?,
            method,
        })
    }

    /// `<www_authenticate userid passwd [type="basic|digest"] [realm nonce]>`: the request's
    /// `auth`. Basic goes with the request; for Digest headroom answers the server's challenge
    /// with its realm and nonce, which Tsung's file passes by hand from dyn_variables.
    fn www_authenticate(&mut self, c: &El, subst: bool) -> Option<Auth> {
        self.check_attrs(c, &["userid", "passwd", "type", "realm", "nonce"]);
        self.no_text(c);
        for x in &c.children {
            self.unexpected(x, "www_authenticate");
        }
        let scheme = match c.attr("type") {
            None => AuthScheme::Basic,
            Some(t) => match t.value.as_str() {
                "basic" => AuthScheme::Basic,
                "digest" => AuthScheme::Digest,
                other => {
                    let pos = t.pos;
                    self.error(
                        pos,
                        format!("type=\"{other}\": expected basic or digest (Tsung's two schemes)"),
                    );
                    return None;
                }
            },
        };
        for key in ["realm", "nonce"] {
            let Some(a) = c.attr(key) else { continue };
            let pos = a.pos;
            if scheme == AuthScheme::Digest {
                self.warn(
                    pos,
                    format!("attribute '{key}' of <www_authenticate> is not honoured: headroom's Digest takes the realm and nonce of the server's own challenge (WWW-Authenticate, then Authentication-Info's nextnonce), which is what Tsung's file passes here"),
                );
            } else {
                self.warn(
                    pos,
                    format!("attribute '{key}' of <www_authenticate> is not honoured: it is for type=\"digest\""),
                );
            }
        }
        let user = self.required(c, "userid").map(|a| (a.value.clone(), a.pos));
        let pass = self.required(c, "passwd").map(|a| (a.value.clone(), a.pos));
        let ((user, upos), (pass, ppos)) = (user?, pass?);
        let user = self.subst(&user, upos, subst)?;
        let password = self.subst(&pass, ppos, subst)?;
        if user.contains(':') && !user.contains("${") {
            self.error(
                upos,
                format!("userid=\"{user}\": a user name cannot contain ':' (RFC 7617)"),
            );
            return None;
        }
        Some(Auth {
            scheme,
            user,
            password,
        })
    }

    /// `<add_cookie key value [domain path]>`: a cookie put in the user's jar before the
    /// request, as Tsung does (it then goes with every request it matches).
    fn add_cookie(&mut self, c: &El, subst: bool) -> Option<CookieStep> {
        self.check_attrs(c, &["key", "value", "domain", "path"]);
        self.no_text(c);
        for x in &c.children {
            self.unexpected(x, "add_cookie");
        }
        let key = self.required(c, "key").map(|a| (a.value.clone(), a.pos));
        let value = self.required(c, "value").map(|a| (a.value.clone(), a.pos));
        let ((name, npos), (value, vpos)) = (key?, value?);
        let token = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_graphic() && !b"()<>@,;:\\\"/[]?={}%$".contains(&b));
        if !token {
            self.error(
                npos,
                format!(
                    "key=\"{name}\": a cookie name is a token (letters, digits, !#&'*+-.^_`|~)"
                ),
            );
            return None;
        }
        let value = self.subst(&value, vpos, subst)?;
        if value.bytes().any(|b| b.is_ascii_control() || b == b';') {
            self.error(vpos, "a cookie value cannot hold ';' or control characters");
            return None;
        }
        let mut text = |key: &str| -> Option<Option<String>> {
            match c.attr(key) {
                None => Some(None),
                Some(a) if a.value.contains("%%") || a.value.contains("${") => {
                    let pos = a.pos;
                    self.error(
                        pos,
                        format!("{key}=\"{}\": variables are not supported here", a.value),
                    );
                    None
                }
                Some(a) if a.value.is_empty() => Some(None),
                Some(a) => Some(Some(a.value.clone())),
            }
        };
        let domain = text("domain")?;
        let path = text("path")?;
        if let Some(p) = path.as_ref().filter(|p| !p.starts_with('/')) {
            let pos = c.attr("path").map_or(c.pos, |a| a.pos);
            self.error(
                pos,
                format!("path=\"{p}\": expected a path starting with '/'"),
            );
            return None;
        }
        Some(CookieStep::Set {
            name,
            value,
            domain,
            path,
        })
    }

    /// The path of `url`; an absolute `http://host:port/path` also names the server.
    fn url_path(&mut self, url: &str, pos: usize) -> Option<String> {
        let (rest, tls) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
            (Some(r), _) => (r, false),
            (_, Some(r)) => (r, true),
            _ => return Some(url.to_string()),
        };
        let split = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(split);
        let (host, port) = match authority.strip_prefix('[') {
            // [IPv6]:port
            Some(r) => match r.split_once(']') {
                Some((h, p)) => (h, p.strip_prefix(':')),
                None => (authority, None),
            },
            None => match authority.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            },
        };
        let port = match port {
            None if tls => 443,
            None => 80,
            Some(p) => match p.parse::<u16>() {
                Ok(p) if p > 0 => p,
                _ => {
                    self.error(pos, format!("url=\"{url}\": bad port '{p}'"));
                    return None;
                }
            },
        };
        let host = host.to_string();
        if host.is_empty() {
            self.error(pos, format!("url=\"{url}\": no host"));
            return None;
        }
        if self.servers.is_empty() {
            if tls {
                // Tsung does not check the server's certificate: neither does the scenario.
                self.warn(
                    pos,
                    format!("url=\"{url}\": TLS without certificate checks, as Tsung does (tls: {{insecure: true}}); drop `insecure` to verify"),
                );
            }
            self.servers.push(Server {
                http2: false,
                host: host.clone(),
                port,
                protocol: Protocol::Http,
                tls: tls.then(|| ServerTls {
                    insecure: true,
                    ..Default::default()
                }),
            });
        } else if self
            .servers
            .iter()
            .any(|s| s.host == host && s.port == port && s.tls.is_some() != tls)
        {
            // The same server spoken to another way: Tsung opens a connection of that kind
            // for the request, headroom connects to a server one way.
            let (is, was) = if tls {
                ("https", "plain")
            } else {
                ("http", "TLS")
            };
            self.error(
                pos,
                format!("url=\"{url}\": an {is}:// URL to {host}:{port}, a {was} server of the scenario (headroom connects to a server one way)"),
            );
            return None;
        } else if !self
            .servers
            .iter()
            .any(|s| s.host == host && s.port == port)
            && self.other_hosts.insert((host.clone(), port))
        {
            self.warn(
                pos,
                format!("the host of url=\"{url}\" ({host}:{port}) is not honoured: headroom sends every request to the scenario's servers"),
            );
        }
        let path = if path.is_empty() {
            "/".to_string()
        } else if path.starts_with('?') {
            format!("/{path}")
        } else {
            path.to_string()
        };
        Some(path)
    }

    /// `<dyn_variable header="name/param">`: a parameter of a header. The parameters of a
    /// Digest challenge are what headroom's Digest answers by itself (a warning; the variable
    /// stays unset, and a use of it is an error that says why); others are an error.
    fn header_param(
        &mut self,
        header: &str,
        param: &str,
        pos: usize,
        var: Option<&str>,
    ) -> Option<()> {
        let digest = ["www-authenticate", "authentication-info"]
            .contains(&header.to_ascii_lowercase().as_str())
            && ["realm", "nonce", "nextnonce", "opaque", "qop", "algorithm"]
                .contains(&param.to_ascii_lowercase().as_str());
        if !digest {
            self.error(
                pos,
                format!("header=\"{header}/{param}\": a parameter of a header is not supported (header=\"{header}\" takes the whole value)"),
            );
            return None;
        }
        self.warn(
            pos,
            format!("header=\"{header}/{param}\" is not needed: headroom's Digest authentication (<www_authenticate type=\"digest\">) reads {param} from the server's reply itself; the variable is not set"),
        );
        if let Some(v) = var.filter(|v| !self.vars.contains(*v)) {
            self.unset_vars.insert(
                v.to_string(),
                format!("it would hold {param} of {header}, which headroom's Digest authentication reads by itself"),
            );
        }
        Some(())
    }

    fn matcher(&mut self, el: &El) -> Option<Match> {
        self.check_attrs(
            el,
            &[
                "do",
                "when",
                "max_loop",
                "loop_back",
                "max_restart",
                "sleep_loop",
                "apply_to_content",
                "skip_headers",
                "subst",
                "name",
            ],
        );
        for c in &el.children {
            self.unexpected(c, "match");
        }
        let re = el.text.trim().to_string();
        if re.is_empty() {
            self.error(el.pos, "<match> without a regular expression");
            return None;
        }
        let action = match el.attr("do").map(|a| (a, a.value.as_str())) {
            None | Some((_, "continue")) => MatchAction::Continue,
            Some((_, "abort")) => MatchAction::Abort,
            Some((_, "restart")) => MatchAction::Restart,
            Some((_, "loop")) => MatchAction::Loop,
            Some((a, v @ ("log" | "dump"))) => {
                let pos = a.pos;
                self.warn(
                    pos,
                    format!("do=\"{v}\" is not honoured: headroom counts each firing under the match's name and continues"),
                );
                MatchAction::Continue
            }
            Some((a, v)) => {
                let pos = a.pos;
                self.error(
                    pos,
                    format!("do=\"{v}\": expected continue, loop, abort, restart, log or dump"),
                );
                return None;
            }
        };
        let when_matched = match el.attr("when").map(|a| (a, a.value.as_str())) {
            None | Some((_, "match")) => true,
            Some((_, "nomatch")) => false,
            Some((a, v)) => {
                let pos = a.pos;
                self.error(pos, format!("when=\"{v}\": expected match or nomatch"));
                return None;
            }
        };
        let max_loops = match (action, el.attr("max_loop")) {
            (MatchAction::Loop, Some(a)) => Some(self.positive_int(a)?),
            (MatchAction::Loop, None) => Some(20),
            (_, Some(a)) => {
                let pos = a.pos;
                self.warn(
                    pos,
                    "attribute 'max_loop' of <match> is not honoured: it only applies with do=\"loop\"",
                );
                None
            }
            (_, None) => None,
        };
        if action == MatchAction::Loop {
            match el.attr("sleep_loop") {
                Some(a) => {
                    let pos = a.pos;
                    self.warn(
                        pos,
                        "attribute 'sleep_loop' of <match> is not honoured: headroom repeats the request at once",
                    );
                }
                None => {
                    let pos = el.attr("do").map(|a| a.pos).unwrap_or(el.pos);
                    self.warn(
                        pos,
                        "do=\"loop\": headroom repeats the request at once, without Tsung's default 5 s sleep_loop",
                    );
                }
            }
        } else {
            self.ignored(el, "sleep_loop", "it only applies with do=\"loop\"");
        }
        self.ignored(el, "loop_back", "headroom repeats only the last request");
        self.ignored(
            el,
            "max_restart",
            "headroom restarts the session without a limit",
        );
        self.ignored(el, "apply_to_content", "headroom runs no Erlang code");
        self.ignored(
            el,
            "skip_headers",
            "headroom matches a body substring or a status",
        );
        if self.bool_attr(el, "subst") == Some(true) && re.contains("%%") {
            self.error(el.pos, "variables in a <match> are not supported");
            return None;
        }
        let (status, body) = if let Some(code) = status_of(&re) {
            (Some(code), None)
        } else if let Some((lit, dots)) = literal(&re) {
            if dots {
                self.warn(
                    el.text_pos.unwrap_or(el.pos),
                    format!("'.' in the regular expression '{re}' is taken literally: headroom's match takes a body substring"),
                );
            }
            (None, Some(lit))
        } else {
            self.warn(
                el.text_pos.unwrap_or(el.pos),
                format!("the regular expression '{re}' cannot be checked: headroom's match takes a status or a body substring; match dropped"),
            );
            return None;
        };
        let name = match el.attr("name") {
            Some(n) if !n.value.is_empty() => n.value.clone(),
            _ => format!(
                "match {}",
                status
                    .map(|s| s.to_string())
                    .or(body.clone())
                    .unwrap_or_default()
            ),
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

    /// A `<dyn_variable>` of an HTTP request, as an extract step; `None` when there is none
    /// (an error, or a variable headroom needs no step for, warned about).
    fn dyn_variable(&mut self, el: &El) -> Option<Extract> {
        const SOURCES: &[&str] = &["re", "regexp", "jsonpath", "header", "xpath", "pgsql_expr"];
        let mut known = vec!["name", "decode"];
        known.extend(SOURCES);
        self.check_attrs(el, &known);
        self.no_text(el);
        for c in &el.children {
            self.unexpected(c, "dyn_variable");
        }
        let var = self.required(el, "name").and_then(|a| self.var_name(a));
        self.ignored(
            el,
            "decode",
            "the value is taken as it appears in the reply",
        );
        let given: Vec<&Attr> = SOURCES.iter().filter_map(|k| el.attr(k)).collect();
        let from = match given.as_slice() {
            [] => {
                // Tsung's default: the value of the hidden form input of that name.
                let name = var.clone()?;
                ExtractFrom::Regex(format!(r#"name=["']{name}["'][^>]*value=["']([^"']*)["']"#))
            }
            [a] => match a.key.as_str() {
                "re" | "regexp" if a.value.is_empty() => {
                    self.error(a.pos, "an empty regular expression");
                    return None;
                }
                "re" => ExtractFrom::Regex(a.value.clone()),
                "regexp" => {
                    self.warn(
                        a.pos,
                        "regexp= is Tsung's old regular expression syntax: check the pattern as a modern regular expression",
                    );
                    ExtractFrom::Regex(a.value.clone())
                }
                "jsonpath" => match json_pointer(&a.value) {
                    Some(p) => ExtractFrom::JsonPointer(p),
                    None => {
                        self.error(
                            a.pos,
                            format!("jsonpath=\"{}\" cannot become a JSON pointer: only paths such as $.a.b[0] are supported", a.value),
                        );
                        return None;
                    }
                },
                "header" if a.value.is_empty() => {
                    self.error(a.pos, "header=\"\": expected a header name");
                    return None;
                }
                "header" => match a.value.split_once('/') {
                    None => ExtractFrom::Header(a.value.clone()),
                    Some((h, param)) => {
                        let (h, param, pos) = (h.to_string(), param.to_string(), a.pos);
                        self.header_param(&h, &param, pos, var.as_deref())?;
                        return None;
                    }
                },
                "xpath" => {
                    let (v, pos) = (a.value.clone(), a.pos);
                    let Some((re, note)) = xpath_regex(&v) else {
                        self.error(
                            pos,
                            format!("xpath=\"{v}\" is not supported: headroom converts paths of element names ending in text() or @attribute (/a/b/text(), //b/@id); use re or jsonpath"),
                        );
                        return None;
                    };
                    self.warn(
                        pos,
                        format!("xpath=\"{v}\" becomes the regular expression '{re}': {note}"),
                    );
                    ExtractFrom::Regex(re)
                }
                _ => {
                    self.error(
                        a.pos,
                        "pgsql_expr extraction is not supported: use re on the result rows",
                    );
                    return None;
                }
            },
            [_, second, ..] => {
                self.error(
                    second.pos,
                    "a <dyn_variable> takes one of re, jsonpath, header",
                );
                return None;
            }
        };
        let var = var?;
        self.vars.insert(var.clone());
        Some(Extract {
            var,
            from,
            default: None,
        })
    }
}

/// The names of every variable `el`'s descendants define: `<var name>` (of a `<setdynvars>`),
/// `<dyn_variable name>`, `<for var>`.
fn definitions(el: &El, out: &mut HashSet<String>) {
    for c in &el.children {
        let key = match c.name.as_str() {
            "var" | "dyn_variable" => "name",
            "for" => "var",
            _ => "",
        };
        if let Some(a) = c.attr(key) {
            out.insert(a.value.clone());
        }
        definitions(c, out);
    }
}

/// A simple XPath (a path of element names, `/` or `//` steps, ending in `text()` or
/// `@attribute`) as a regular expression on the reply, with what the expression no longer
/// checks. `None` for anything else (predicates, wildcards, axes, functions).
fn xpath_regex(xpath: &str) -> Option<(String, String)> {
    let x = xpath.trim();
    if !x.starts_with('/') {
        return None;
    }
    let steps: Vec<&str> = x.split('/').filter(|s| !s.is_empty()).collect();
    let (last, path) = steps.split_last()?;
    let name_ok = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'))
            && s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
    };
    if !path.iter().all(|s| name_ok(s)) {
        return None;
    }
    let esc = |s: &str| s.replace('.', "\\.");
    let (re, what) = if *last == "text()" {
        let el = esc(path.last()?);
        (
            format!("<{el}(?:\\s[^>]*)?>([^<]*)</{el}>"),
            format!("the text of the first <{}> element", path.last()?),
        )
    } else if let Some(attr) = last.strip_prefix('@').filter(|a| name_ok(a)) {
        let el = esc(path.last()?);
        (
            format!("<{el}\\s[^>]*\\b{}\\s*=\\s*[\"']([^\"']*)[\"']", esc(attr)),
            format!(
                "the attribute '{attr}' of the first <{}> element that has it",
                path.last()?
            ),
        )
    } else {
        return None;
    };
    let mut note = format!("headroom extracts {what} in the reply");
    if path.len() > 1 {
        note.push_str(&format!(
            ", wherever it is (the path /{} is not checked)",
            path.join("/")
        ));
    }
    note.push_str("; entities are not decoded");
    Some((re, note))
}

fn add_header(headers: &mut Vec<(String, String)>, name: &str, value: String) {
    match headers
        .iter_mut()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
    {
        Some((_, v)) => {
            let sep = if name.eq_ignore_ascii_case("cookie") {
                "; "
            } else {
                ", "
            };
            v.push_str(sep);
            v.push_str(&value);
        }
        None => headers.push((name.to_string(), value)),
    }
}

/// A status code from a regular expression on the status line, such as `^HTTP/1\.1 500`.
fn status_of(re: &str) -> Option<u16> {
    let r = re.strip_prefix('^').unwrap_or(re).strip_prefix("HTTP/1")?;
    let versions = [
        "\\.[01]", ".[01]", "\\.1", "\\.0", ".1", ".0", "\\.\\d", ".\\d", "\\..", "..",
    ];
    let rest = versions.iter().find_map(|v| r.strip_prefix(v))?;
    let code = rest.strip_prefix(' ')?;
    if code.len() != 3 || !code.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    code.parse().ok().filter(|c| (100..=599).contains(c))
}

/// The text a regular expression matches when it is a literal (escaped punctuation allowed).
/// The flag tells that unescaped `.` were taken literally.
fn literal(re: &str) -> Option<(String, bool)> {
    let mut out = String::new();
    let mut dots = false;
    let mut chars = re.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let n = chars.next()?;
                if n.is_ascii_alphanumeric() {
                    return None;
                }
                out.push(n);
            }
            '.' => {
                dots = true;
                out.push('.');
            }
            '^' | '$' | '*' | '+' | '?' | '(' | ')' | '[' | ']' | '{' | '}' | '|' => return None,
            c => out.push(c),
        }
    }
    (!out.is_empty()).then_some((out, dots))
}

/// A simple JSONPath (`$`, `.key`, `[0]`, `['key']`) as an RFC 6901 JSON pointer. Tsung's own
/// form without the `$` (`uid`, `user.name`, its jsonpath module's) is taken from the root.
fn json_pointer(path: &str) -> Option<String> {
    let path = path.trim();
    let rooted;
    let mut rest = match path.strip_prefix('$') {
        Some(r) => r,
        None if !path.is_empty() && !path.starts_with(['.', '[']) => {
            rooted = format!(".{path}");
            &rooted
        }
        None => return None,
    };
    let mut out = String::new();
    let escape = |k: &str| k.replace('~', "~0").replace('/', "~1");
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let key = &r[..end];
            if key.is_empty() || key.contains(['*', '?', '@', '(', ')', ']', '\'', '"', ' ']) {
                return None;
            }
            out.push('/');
            out.push_str(&escape(key));
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let inner = r[..end].trim();
            if !inner.is_empty() && inner.chars().all(|c| c.is_ascii_digit()) {
                out.push('/');
                out.push_str(inner);
            } else {
                let q = inner.chars().next()?;
                let key = inner
                    .strip_prefix(q)
                    .and_then(|k| k.strip_suffix(q))
                    .filter(|k| (q == '\'' || q == '"') && !k.contains(q))?;
                out.push('/');
                out.push_str(&escape(key));
            }
            rest = &r[end + 1..];
        } else {
            return None;
        }
    }
    Some(out)
}

/// Standard base64 with padding (for basic authentication and `encoding="base64"` headers).
fn base64(input: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

mod amqp;
mod eval;
mod fs;
mod ldap;
mod mqtt;
mod mysql;
mod proto;

// ---- the XML tree ---------------------------------------------------------------------------

/// An element with the byte offsets of its `<`, its attributes and its first non-blank text.
struct El {
    name: String,
    pos: usize,
    attrs: Vec<Attr>,
    children: Vec<El>,
    /// All character data of the element (text and CDATA), concatenated.
    text: String,
    text_pos: Option<usize>,
}

struct Attr {
    key: String,
    value: String,
    pos: usize,
}

impl El {
    fn attr(&self, key: &str) -> Option<&Attr> {
        self.attrs.iter().find(|a| a.key == key)
    }

    /// The first descendant (depth first, document order) for which `f` holds.
    fn find(&self, f: &dyn Fn(&El) -> bool) -> Option<&El> {
        for c in &self.children {
            if f(c) {
                return Some(c);
            }
            if let Some(x) = c.find(f) {
                return Some(x);
            }
        }
        None
    }
}

mod xml {
    use super::{Attr, El};
    use quick_xml::escape::resolve_predefined_entity;
    use quick_xml::events::{BytesStart, Event};
    use quick_xml::{Reader, XmlVersion};
    use std::collections::HashMap;

    pub(super) struct Doc {
        pub root: El,
        /// Offsets of processing instructions other than the `<?xml` declaration.
        pub pis: Vec<usize>,
    }

    pub(super) struct XmlError {
        pub pos: usize,
        pub message: String,
    }

    fn err(pos: usize, message: impl Into<String>) -> XmlError {
        XmlError {
            pos,
            message: message.into(),
        }
    }

    /// Deep nesting is refused rather than risking the stack of the recursive walk.
    const MAX_DEPTH: usize = 200;

    /// All references to `<!ENTITY>`s of the DTD together expand to at most this many bytes (a
    /// "billion laughs" file is refused, not expanded); an entity whose value refers to another
    /// declared entity is refused outright, so nothing expands more than one level.
    pub const MAX_ENTITY_EXPANSION: usize = 1 << 20;

    fn over_budget(pos: usize) -> XmlError {
        err(
            pos,
            format!(
                "entity references expand to more than {} MiB in all (a DTD entity \"bomb\"?); \
                 headroom expands DTD entities up to that bound only",
                MAX_ENTITY_EXPANSION >> 20
            ),
        )
    }

    pub(super) fn parse(text: &str) -> Result<Doc, XmlError> {
        let mut reader = Reader::from_str(text);
        let mut stack: Vec<El> = Vec::new();
        let mut root: Option<El> = None;
        let mut pis = Vec::new();
        let mut entities: HashMap<String, String> = HashMap::new();
        // Bytes expanded from declared entities so far (text and attributes).
        let mut expanded = 0usize;
        loop {
            let pos = reader.buffer_position() as usize;
            let event = match reader.read_event() {
                Ok(e) => e,
                Err(e) => {
                    return Err(err(
                        reader.error_position() as usize,
                        format!("XML syntax: {e}"),
                    ))
                }
            };
            match event {
                Event::Start(e) => {
                    if stack.len() >= MAX_DEPTH {
                        return Err(err(pos, format!("elements nested deeper than {MAX_DEPTH}")));
                    }
                    stack.push(element(&e, pos, &entities, &mut expanded)?);
                }
                Event::Empty(e) => {
                    let el = element(&e, pos, &entities, &mut expanded)?;
                    attach(&mut stack, &mut root, el)?;
                }
                Event::End(_) => {
                    let Some(el) = stack.pop() else {
                        return Err(err(pos, "a closing tag without an opening one"));
                    };
                    attach(&mut stack, &mut root, el)?;
                }
                Event::Text(t) => {
                    let s = t
                        .xml10_content()
                        .map_err(|e| err(pos, format!("XML text: {e}")))?;
                    add_text(&mut stack, pos, &s)?;
                }
                Event::CData(t) => {
                    let s = t
                        .xml10_content()
                        .map_err(|e| err(pos, format!("XML CDATA: {e}")))?;
                    add_text(&mut stack, pos, &s)?;
                }
                Event::GeneralRef(r) => {
                    let resolved = if r.is_char_ref() {
                        match r.resolve_char_ref() {
                            Ok(Some(c)) => c.to_string(),
                            _ => return Err(err(pos, "a bad character reference")),
                        }
                    } else {
                        let name = r
                            .decode()
                            .map_err(|e| err(pos, format!("XML reference: {e}")))?;
                        match resolve_predefined_entity(&name) {
                            Some(v) => v.to_string(),
                            None => match entities.get(name.as_ref()) {
                                Some(v) => {
                                    expanded += v.len();
                                    if expanded > MAX_ENTITY_EXPANSION {
                                        return Err(over_budget(pos));
                                    }
                                    v.clone()
                                }
                                None => return Err(err(pos, format!("unknown entity '&{name};'"))),
                            },
                        }
                    };
                    add_text(&mut stack, pos, &resolved)?;
                }
                Event::DocType(d) => {
                    let s = d.decode().map_err(|e| err(pos, format!("DOCTYPE: {e}")))?;
                    for (name, value) in internal_entities(&s) {
                        if let Some(other) = nested_reference(&value) {
                            return Err(err(
                                pos,
                                format!(
                                    "<!ENTITY {name}> refers to the entity '&{other};': nested \
                                     DTD entities are not expanded (a \"billion laughs\" file \
                                     grows without bound); write the value out"
                                ),
                            ));
                        }
                        entities.insert(name, value);
                    }
                }
                Event::PI(p) => {
                    if !p.target().eq_ignore_ascii_case(b"xml") {
                        pis.push(pos);
                    }
                }
                Event::Decl(_) | Event::Comment(_) => {}
                Event::Eof => break,
            }
        }
        if let Some(open) = stack.last() {
            return Err(err(open.pos, format!("<{}> is not closed", open.name)));
        }
        match root {
            Some(root) => Ok(Doc { root, pis }),
            None => Err(err(text.len(), "no XML element in the file")),
        }
    }

    fn attach(stack: &mut [El], root: &mut Option<El>, el: El) -> Result<(), XmlError> {
        if let Some(parent) = stack.last_mut() {
            parent.children.push(el);
        } else if root.is_none() {
            *root = Some(el);
        } else {
            return Err(err(el.pos, "a second root element"));
        }
        Ok(())
    }

    fn add_text(stack: &mut [El], pos: usize, s: &str) -> Result<(), XmlError> {
        match stack.last_mut() {
            Some(el) => {
                if el.text_pos.is_none() {
                    if let Some(i) = s.find(|c: char| !c.is_whitespace()) {
                        el.text_pos = Some(pos + i);
                    }
                }
                el.text.push_str(s);
                Ok(())
            }
            None if s.trim().is_empty() => Ok(()),
            None => Err(err(pos, "text outside the root element")),
        }
    }

    fn element(
        e: &BytesStart,
        pos: usize,
        entities: &HashMap<String, String>,
        expanded: &mut usize,
    ) -> Result<El, XmlError> {
        let name = String::from_utf8_lossy(e.name().as_ref()).into_owned();
        let offsets = attr_offsets(e);
        let mut attrs: Vec<Attr> = Vec::new();
        for (i, a) in e.attributes().enumerate() {
            let a = a.map_err(|x| err(pos, format!("XML attribute in <{name}>: {x}")))?;
            let key = String::from_utf8_lossy(a.key.as_ref()).into_owned();
            let apos = offsets.get(i).map(|o| pos + 1 + o).unwrap_or(pos);
            let mut over = false;
            let value = a
                .normalized_value_with(XmlVersion::Implicit1_0, 16, |n| {
                    resolve_predefined_entity(n).or_else(|| {
                        let v = entities.get(n).map(|s| s.as_str())?;
                        *expanded += v.len();
                        if *expanded > MAX_ENTITY_EXPANSION {
                            over = true;
                            return Some(""); // stop growing; refused below
                        }
                        Some(v)
                    })
                })
                .map_err(|x| {
                    use quick_xml::escape::EscapeError;
                    let msg = match x {
                        quick_xml::Error::Escape(EscapeError::UnrecognizedEntity(_, n)) => {
                            format!("unknown entity '&{n};' in attribute '{key}' of <{name}>")
                        }
                        x => format!("XML attribute '{key}' of <{name}>: {x}"),
                    };
                    err(apos, msg)
                })?
                .into_owned();
            if over {
                return Err(over_budget(apos));
            }
            attrs.push(Attr {
                key,
                value,
                pos: apos,
            });
        }
        Ok(El {
            name,
            pos,
            attrs,
            children: Vec::new(),
            text: String::new(),
            text_pos: None,
        })
    }

    /// Offsets (from just after `<`) of each attribute's name in a start tag.
    fn attr_offsets(e: &BytesStart) -> Vec<usize> {
        let raw: &[u8] = e;
        let mut out = Vec::new();
        let mut i = raw
            .iter()
            .position(|b| b.is_ascii_whitespace())
            .unwrap_or(raw.len());
        loop {
            while i < raw.len() && raw[i].is_ascii_whitespace() {
                i += 1;
            }
            if i >= raw.len() {
                break;
            }
            out.push(i);
            while i < raw.len() && !raw[i].is_ascii_whitespace() && raw[i] != b'=' {
                i += 1;
            }
            while i < raw.len() && raw[i].is_ascii_whitespace() {
                i += 1;
            }
            if i < raw.len() && raw[i] == b'=' {
                i += 1;
                while i < raw.len() && raw[i].is_ascii_whitespace() {
                    i += 1;
                }
                if i < raw.len() && (raw[i] == b'"' || raw[i] == b'\'') {
                    let q = raw[i];
                    i += 1;
                    while i < raw.len() && raw[i] != q {
                        i += 1;
                    }
                    i += 1;
                } else {
                    while i < raw.len() && !raw[i].is_ascii_whitespace() {
                        i += 1;
                    }
                }
            }
        }
        out
    }

    /// The name of the first general entity (other than XML's predefined five) `value` refers to.
    fn nested_reference(value: &str) -> Option<&str> {
        let mut rest = value;
        while let Some(i) = rest.find('&') {
            rest = &rest[i + 1..];
            let Some(end) = rest.find(';') else { break };
            let name = &rest[..end];
            let is_name = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'));
            if is_name && resolve_predefined_entity(name).is_none() {
                return Some(name);
            }
        }
        None
    }

    /// `<!ENTITY name "value">` declarations of an internal DTD subset (general entities only).
    fn internal_entities(doctype: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut rest = doctype;
        while let Some(i) = rest.find("<!ENTITY") {
            rest = &rest[i + 8..];
            let t = rest.trim_start();
            if t.starts_with('%') {
                continue;
            }
            let end = t.find(char::is_whitespace).unwrap_or(t.len());
            let (name, after) = t.split_at(end);
            let after = after.trim_start();
            let Some(q) = after.chars().next().filter(|c| *c == '"' || *c == '\'') else {
                continue;
            };
            if let Some(close) = after[1..].find(q) {
                out.push((name.to_string(), after[1..1 + close].to_string()));
            }
        }
        out
    }
}
