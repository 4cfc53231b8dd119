//! Tsung's `ts_jabber`, `ts_pgsql`, `ts_raw` and `ts_websocket` sessions (`ts_mqtt` in
//! `mqtt.rs`).
//!
//! The difference that shapes this module: in headroom the connection setup of XMPP
//! (stream, SASL, bind, session, registration), PostgreSQL (startup and authentication) and
//! WebSocket (the upgrade) is not a list of steps but part of opening the connection, timed as
//! `xmpp:login`, `pgsql:startup` or `ws:handshake`, with its settings in the scenario's `xmpp:`,
//! `pgsql:` or `websocket:` section. So:
//!
//! - Tsung's `connect` becomes a `connect` step at the same place (the connection opens there,
//!   and the setup runs at once); the other setup requests (`auth_sasl`, `auth_sasl_bind`, the
//!   stream restart, `authenticate`, ...) are *absorbed*: they give the settings and no step. A
//!   think time between them now follows the whole setup, and a transaction of setup requests
//!   only is dropped; both are warned about.
//! - The settings must be the same for every session (one `LinkSpec` per scenario); what differs
//!   is an error, or a warning where headroom's choice is harmless.
//! - PostgreSQL's extended protocol (`parse`, `bind`, `describe`, `execute`, each unacknowledged
//!   in Tsung, then `sync`) becomes one `sql` step at the `sync`, with the bind's parameters;
//!   `prepare: true` when a named statement is executed more than once (at two places, or inside
//!   a loop), so that headroom parses it once per connection as Tsung's parse-once file does.
//!
//! See `docs/import.md` for the mapping table.

use super::{Conv, El, PROTOCOL_ELEMENTS};
use crate::model::*;
use headroom_core::session::ExpectSpec;
use std::collections::HashMap;

/// Tsung's defaults for the jabber options (`ts_jabber.hrl`, Tsung 1.7).
pub(super) const XMPP_DOMAIN: &str = "erlang-projects.org";
/// Tsung's default `muc_service` option.
pub(super) const XMPP_MUC_SERVICE: &str = "conference.localhost";
/// Tsung's default `pubsub_service` is none; ejabberd's, which Tsung's example names.
pub(super) const XMPP_PUBSUB_SERVICE: &str = "pubsub.localhost";
/// The privacy list a converted `privacy:set_active` activates.
pub(super) const XMPP_PRIVACY_LIST: &str = "tsung_list";
pub(super) const XMPP_USERNAME: &str = "tsunguser";
pub(super) const XMPP_PASSWD: &str = "sesame";
pub(super) const XMPP_USERID_MAX: u64 = 10_000;
/// The resource Tsung binds (`resource` of `<jabber>`, default `tsung`).
pub(super) const XMPP_RESOURCE: &str = "tsung";
/// The name Tsung gives a renamed roster item (fixed in `ts_jabber_common`).
pub(super) const XMPP_RENAME: &str = "Tsung Testuser";
/// Largest `<raw datasize>` converted: the zero bytes are written out in the scenario.
pub(super) const MAX_DATASIZE: u64 = 1 << 20;

/// The session types the importer converts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum Kind {
    #[default]
    Http,
    Jabber,
    Pgsql,
    Raw,
    WebSocket,
    Mqtt,
    Ldap,
    Mysql,
    Amqp,
    /// Tsung's fs plugin: `file` steps, no connection.
    Fs,
}

impl Kind {
    pub(super) const ALL: [Kind; 10] = [
        Kind::Http,
        Kind::Jabber,
        Kind::Pgsql,
        Kind::Raw,
        Kind::WebSocket,
        Kind::Mqtt,
        Kind::Ldap,
        Kind::Mysql,
        Kind::Amqp,
        Kind::Fs,
    ];

    pub(super) fn of_type(t: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.session_type() == t)
    }

    pub(super) fn of_element(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.element() == name)
    }

    /// The `type` of `<session>`.
    pub(super) fn session_type(self) -> &'static str {
        match self {
            Kind::Http => "ts_http",
            Kind::Jabber => "ts_jabber",
            Kind::Pgsql => "ts_pgsql",
            Kind::Raw => "ts_raw",
            Kind::WebSocket => "ts_websocket",
            Kind::Mqtt => "ts_mqtt",
            Kind::Ldap => "ts_ldap",
            Kind::Mysql => "ts_mysql",
            Kind::Amqp => "ts_amqp",
            Kind::Fs => "ts_fs",
        }
    }

    /// The element inside `<request>`.
    pub(super) fn element(self) -> &'static str {
        match self {
            Kind::Http => "http",
            Kind::Jabber => "jabber",
            Kind::Pgsql => "pgsql",
            Kind::Raw => "raw",
            Kind::WebSocket => "websocket",
            Kind::Mqtt => "mqtt",
            Kind::Ldap => "ldap",
            Kind::Mysql => "mysql",
            Kind::Amqp => "amqp",
            Kind::Fs => "fs",
        }
    }

    pub(super) fn protocol(self) -> Protocol {
        match self {
            Kind::Http => Protocol::Http,
            Kind::Jabber => Protocol::Xmpp,
            Kind::Pgsql => Protocol::Pgsql,
            Kind::Raw => Protocol::Raw,
            Kind::WebSocket => Protocol::WebSocket,
            Kind::Mqtt => Protocol::Mqtt,
            Kind::Ldap => Protocol::Ldap,
            Kind::Mysql => Protocol::Mysql,
            Kind::Amqp => Protocol::Amqp,
            // No connection: the servers (if any) are HTTP's, unused.
            Kind::Fs => Protocol::Http,
        }
    }

    /// What headroom's implicit connection setup does, and the name it is timed under.
    fn setup(self) -> (&'static str, &'static str) {
        match self {
            Kind::Jabber => ("the XMPP login", "xmpp:login"),
            Kind::Pgsql => ("the PostgreSQL startup and authentication", "pgsql:startup"),
            Kind::WebSocket => ("the WebSocket upgrade", "ws:handshake"),
            Kind::Mqtt => ("the MQTT connect", "mqtt:connect"),
            Kind::Ldap => ("opening the connection", "the connect"),
            Kind::Mysql => ("the MySQL login", "mysql:login"),
            Kind::Amqp => ("the AMQP login and connection.open", "amqp:connect"),
            Kind::Http | Kind::Raw | Kind::Fs => ("opening the connection", "the connect"),
        }
    }

    /// The protocol's name in messages.
    fn label(self) -> &'static str {
        match self {
            Kind::Http => "HTTP",
            Kind::Jabber => "XMPP",
            Kind::Pgsql => "PostgreSQL",
            Kind::Raw => "raw TCP",
            Kind::WebSocket => "WebSocket",
            Kind::Mqtt => "MQTT",
            Kind::Ldap => "LDAP",
            Kind::Mysql => "MySQL",
            Kind::Amqp => "AMQP",
            Kind::Fs => "file",
        }
    }
}

/// An `<xmpp_authenticate>`'s user and password (converted to `${var}` templates) and where
/// it is.
type Account = (String, String, usize);

/// An `<option type="ts_jabber" name value>`.
pub(super) struct JabberOption {
    pub(super) name: String,
    pub(super) value: String,
    /// Position of the `<option>`.
    pub(super) pos: usize,
}

/// What the file's sessions say about the connections, gathered as they are converted.
#[derive(Default)]
pub(super) struct Link {
    /// The protocol, from the first converted session: its name and position.
    pub(super) first: Option<(Kind, String, usize)>,
    /// `<option type="ts_jabber">` in file order (a later one of the same name wins, as in
    /// Tsung).
    pub(super) jabber_options: Vec<JabberOption>,
    /// SASL ANONYMOUS (true) or PLAIN, and the session that said so first.
    anonymous: Option<(bool, String)>,
    register: Option<(bool, String)>,
    /// The first `<jabber type="register">` of the file.
    register_at: Option<usize>,
    /// Where sessions first differ on registering, and the warning that says so.
    register_mixed: Option<(usize, String)>,
    resource: Option<(String, String)>,
    /// XMPP: whether the sessions upgrade with STARTTLS, the session that said so first, and
    /// the first `<jabber type="starttls">` of the file.
    starttls: Option<(bool, String)>,
    pub(super) starttls_at: Option<usize>,
    /// XMPP: the account the first session with steps logs in with (`Some`: its
    /// `<xmpp_authenticate>` user and password, `None`: a numbered account), and its name.
    login: Option<(Option<Account>, String)>,
    pg: Option<(PgSpec, String)>,
    ws: Option<(WsSpec, String)>,
    mysql: Option<(MysqlSpec, String)>,
    /// AMQP: the virtual host and the session that opened it first; the `ts_amqp` options'
    /// username and password.
    amqp_vhost: Option<(String, String)>,
    pub(super) amqp_user: Option<String>,
    pub(super) amqp_password: Option<String>,
    /// Where those options are (warned about in a file without amqp sessions).
    pub(super) amqp_options: Vec<usize>,
}

/// A PostgreSQL extended-protocol unit being read: what came since the last `sync`.
#[derive(Default)]
struct Unit {
    /// Position of its first element.
    start: Option<usize>,
    /// Statement name, query.
    parse: Option<(String, String)>,
    /// Statement name, parameters, position of the bind.
    bind: Option<(String, Vec<String>, usize)>,
    /// Position of the execute.
    execute: Option<usize>,
}

/// The current session's protocol state.
#[derive(Default)]
pub(super) struct Sess {
    pub(super) kind: Kind,
    name: String,
    /// A `connect` step was written and no close since.
    connected: bool,
    /// Think times since the connect that setup requests may still follow.
    thinks: Vec<usize>,
    /// Setup requests absorbed so far in the session (transactions compare the count).
    pub(super) absorbed: usize,
    /// XMPP: SASL seen (`Some(anonymous)`), where the session registers.
    auth: Option<bool>,
    register: Option<usize>,
    resource: Option<String>,
    /// XMPP, LDAP: where the session's `starttls` (`start_tls`) is.
    pub(super) starttls: Option<usize>,
    /// LDAP: a request other than `start_tls` was read.
    pub(super) ldap_sent: bool,
    /// XMPP: a `<jabber>` of the session was read (the first one's `<xmpp_authenticate>`
    /// gives the session's account, as in Tsung), and that account's user, password and
    /// position.
    jabber_seen: bool,
    login: Option<Account>,
    /// PostgreSQL: the connect's settings and where the connect was.
    pg: Option<(PgSpec, usize)>,
    password: Option<String>,
    unit: Unit,
    /// Statement name -> query, as parsed so far.
    statements: HashMap<String, String>,
    /// Statement name -> executions (a bind inside a loop counts twice).
    executions: HashMap<String, u32>,
    /// WebSocket: the connect's settings.
    ws: Option<(WsSpec, usize)>,
    /// MySQL: the authenticate's settings.
    mysql: Option<(MysqlSpec, usize)>,
    /// AMQP: the connection.open's virtual host and where it was.
    amqp_vhost: Option<(String, usize)>,
}

/// What a protocol element became, for the `<match>` and `<dyn_variable>` next to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Produced {
    /// A step whose reply headroom keeps for `extract` and `match` (sql, send).
    Readable,
    /// A step whose reply headroom does not keep (xmpp, ws).
    Unreadable,
    /// No step with a reply, for the reason given.
    NoReply(NoReply),
    /// Nothing (an error was reported).
    Nothing,
}

/// Why a protocol element gives no step with a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NoReply {
    /// A `connect` or a request absorbed into the connection setup.
    Setup,
    /// A close.
    Close,
    /// Part of an extended-protocol unit, or a sync that ends no statement.
    Unit,
}

/// Two sessions' accounts are the same (positions aside).
fn same_login(a: &Option<Account>, b: &Option<Account>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => a.0 == b.0 && a.1 == b.1,
        _ => false,
    }
}

/// How a session logs in, for messages.
fn login_who(l: &Option<Account>) -> String {
    match l {
        Some((u, _, _)) => format!("as '{u}' (<xmpp_authenticate>)"),
        None => "with a numbered account".into(),
    }
}

/// A metric name from a query or data: its first line, trimmed, at most 40 characters (the
/// parser's default for `sql` and `send` steps).
fn first_line(text: &str, fallback: &str) -> String {
    let line = text.lines().next().unwrap_or("").trim();
    let name: String = line.chars().take(40).collect();
    if name.is_empty() {
        fallback.to_string()
    } else {
        name
    }
}

/// Counts the executions (binds) of each named statement under `el`; a bind inside a
/// `<for>` or `<repeat>` counts twice.
fn count_binds(el: &El, in_loop: bool, out: &mut HashMap<String, u32>) {
    for c in &el.children {
        let looped = in_loop || c.name == "for" || c.name == "repeat";
        if c.name == "pgsql" && c.attr("type").is_some_and(|t| t.value == "bind") {
            let name = c
                .attr("name_prepared")
                .map(|a| a.value.clone())
                .unwrap_or_default();
            *out.entry(name).or_default() += if in_loop { 2 } else { 1 };
        }
        count_binds(c, looped, out);
    }
}

impl Conv<'_> {
    // ---- sessions -----------------------------------------------------------------------------

    /// Starts a session of `kind`: checks that it is the file's protocol, resets the state.
    /// False when the session cannot be converted.
    pub(super) fn begin_session(&mut self, el: &El, kind: Kind, name: &str) -> bool {
        match &self.link.first {
            None => self.link.first = Some((kind, name.to_string(), el.pos)),
            Some((first, first_name, _)) if *first != kind => {
                let msg = format!(
                    "session '{name}' is of type {}, session '{first_name}' of type {}: headroom runs one protocol per scenario (convert them to two files)",
                    kind.session_type(),
                    first.session_type()
                );
                self.error(el.pos, msg);
                return false;
            }
            Some(_) => {}
        }
        self.sess = Sess {
            kind,
            name: name.to_string(),
            ..Sess::default()
        };
        if kind == Kind::Pgsql {
            count_binds(el, false, &mut self.sess.executions);
        }
        // AMQP's bidi (ack deliveries, answer heartbeats) is what headroom's client always does.
        if kind != Kind::Http && kind != Kind::Amqp {
            self.ignored(
                el,
                "bidi",
                "headroom's protocol clients do not answer what the server sends on its own",
            );
        }
        true
    }

    /// Every session with steps upgrades with STARTTLS, or none does: it is a setting of the
    /// server. `starttls`: where this session's is.
    fn same_starttls(&mut self, el: &El, starttls: Option<usize>, has_steps: bool, name: &str) {
        let tls = starttls.is_some();
        self.link.starttls_at = self.link.starttls_at.or(starttls);
        match &self.link.starttls {
            None if has_steps => self.link.starttls = Some((tls, name.to_string())),
            Some((t, other)) if *t != tls => {
                let (yes, no) = if tls {
                    (name, other.as_str())
                } else {
                    (other.as_str(), name)
                };
                let msg = format!(
                    "session '{yes}' upgrades to TLS with STARTTLS, session '{no}' does not: headroom sets up every connection of a scenario the same way"
                );
                self.error(el.pos, msg);
            }
            _ => {}
        }
    }

    /// Ends the session: checks what is left open, merges its connection settings into the
    /// file's.
    pub(super) fn end_session(&mut self, el: &El, has_steps: bool) {
        let sess = std::mem::take(&mut self.sess);
        let name = sess.name.clone();
        if let Some(start) = sess.unit.start {
            self.error(
                start,
                "parse/bind/execute without a <pgsql type=\"sync\"> after them: headroom sends extended-protocol messages as a unit that ends with a sync",
            );
        }
        match sess.kind {
            Kind::Http | Kind::Raw | Kind::Mqtt | Kind::Fs => {}
            Kind::Ldap => self.same_starttls(el, sess.starttls, has_steps, &name),
            Kind::Amqp => {
                if let Some((vhost, pos)) = sess.amqp_vhost {
                    match &self.link.amqp_vhost {
                        None => self.link.amqp_vhost = Some((vhost, name)),
                        Some((v, other)) if *v != vhost => {
                            let msg = format!(
                                "session '{name}' opens virtual host '{vhost}', session '{other}' '{v}': headroom opens the same one on every connection"
                            );
                            self.error(pos, msg);
                        }
                        Some(_) => {}
                    }
                }
            }
            Kind::Jabber => {
                match sess.auth {
                    None if has_steps => self.warn(
                        el.pos,
                        format!("session '{name}' does not authenticate (no auth_sasl or auth_sasl_anonymous): headroom logs every XMPP connection in at connect"),
                    ),
                    None => {}
                    Some(anonymous) => match &self.link.anonymous {
                        None => self.link.anonymous = Some((anonymous, name.clone())),
                        Some((a, other)) if *a != anonymous => {
                            let msg = format!(
                                "session '{name}' logs in with {}, session '{other}' with {}: headroom logs every connection of a scenario in the same way",
                                sasl(anonymous),
                                sasl(*a)
                            );
                            self.error(el.pos, msg);
                        }
                        Some(_) => {}
                    },
                }
                if has_steps {
                    match &self.link.login {
                        None => self.link.login = Some((sess.login.clone(), name.clone())),
                        Some((l, other)) if !same_login(l, &sess.login) => {
                            let pos = sess.login.as_ref().map_or(el.pos, |l| l.2);
                            let msg = format!(
                                "session '{name}' logs in {}, session '{other}' {}: headroom logs every connection of a scenario in the same way",
                                login_who(&sess.login),
                                login_who(l)
                            );
                            self.error(pos, msg);
                        }
                        Some(_) => {}
                    }
                }
                self.same_starttls(el, sess.starttls, has_steps, &name);
                let registers = sess.register.is_some();
                self.link.register_at = self.link.register_at.or(sess.register);
                match &self.link.register {
                    None => self.link.register = Some((registers, name.clone())),
                    Some((r, other)) if *r != registers => {
                        let (yes, no) = if registers {
                            (&name, other)
                        } else {
                            (other, &name)
                        };
                        let msg = format!(
                            "session '{yes}' registers its user, session '{no}' does not: headroom registers before every login (an existing account counts as done)"
                        );
                        // Warned about when the login is known (not if the registration goes).
                        self.link.register_mixed.get_or_insert((el.pos, msg));
                        self.link.register = Some((true, name.clone()));
                    }
                    Some(_) => {}
                }
                if let Some(res) = sess.resource {
                    match &self.link.resource {
                        None => self.link.resource = Some((res, name.clone())),
                        Some((r, other)) if *r != res => {
                            let msg = format!(
                                "session '{name}' binds resource '{res}', session '{other}' '{r}': headroom binds '{r}' for every session"
                            );
                            self.warn(el.pos, msg);
                        }
                        Some(_) => {}
                    }
                }
            }
            Kind::Pgsql => {
                let Some((mut spec, pos)) = sess.pg else {
                    self.error(
                        el.pos,
                        format!("session '{name}' has no <pgsql type=\"connect\">: headroom needs its database and username"),
                    );
                    return;
                };
                spec.password = sess.password;
                match &self.link.pg {
                    None => self.link.pg = Some((spec, name)),
                    Some((s, other)) if *s != spec => {
                        let msg = format!(
                            "session '{name}' connects as {}, session '{other}' as {}: headroom connects every session with the same database, user and password",
                            pg_who(&spec),
                            pg_who(s)
                        );
                        self.error(pos, msg);
                    }
                    Some(_) => {}
                }
            }
            Kind::Mysql => {
                let Some((spec, pos)) = sess.mysql else {
                    if has_steps {
                        self.error(
                            el.pos,
                            format!("session '{name}' has no <mysql type=\"authenticate\">: headroom needs its username and password"),
                        );
                    }
                    return;
                };
                match &self.link.mysql {
                    None => self.link.mysql = Some((spec, name)),
                    Some((s, other)) if *s != spec => {
                        let msg = format!(
                            "session '{name}' logs in as {}, session '{other}' as {}: headroom logs every connection in the same way",
                            spec.user, s.user
                        );
                        self.error(pos, msg);
                    }
                    Some(_) => {}
                }
            }
            Kind::WebSocket => {
                let Some((spec, pos)) = sess.ws else {
                    self.error(
                        el.pos,
                        format!("session '{name}' has no <websocket type=\"connect\">: headroom needs the upgrade's path"),
                    );
                    return;
                };
                match &self.link.ws {
                    None => self.link.ws = Some((spec, name)),
                    Some((s, other)) if *s != spec => {
                        let msg = format!(
                            "session '{name}' upgrades with {}, session '{other}' with {}: headroom upgrades every connection the same way",
                            ws_who(&spec),
                            ws_who(s)
                        );
                        self.error(pos, msg);
                    }
                    Some(_) => {}
                }
            }
        }
    }

    /// The scenario's connection settings and protocol, once every session is converted.
    pub(super) fn link_spec(&mut self) -> (LinkSpec, Protocol) {
        let kind = self.link.first.as_ref().map(|f| f.0).unwrap_or_default();
        let options = std::mem::take(&mut self.link.jabber_options);
        if kind != Kind::Jabber {
            for o in &options {
                self.warn(
                    o.pos,
                    format!(
                        "<option type=\"ts_jabber\" name=\"{}\"> is not honoured: the file has no jabber session",
                        o.name
                    ),
                );
            }
        }
        if kind != Kind::Amqp {
            for pos in std::mem::take(&mut self.link.amqp_options) {
                self.warn(
                    pos,
                    "<option type=\"ts_amqp\"> is not honoured: the file has no amqp session",
                );
            }
        }
        let link = match kind {
            Kind::Http | Kind::Raw | Kind::Fs => LinkSpec::Plain,
            Kind::Jabber => LinkSpec::Xmpp(self.xmpp_spec(&options)),
            Kind::Pgsql => match &self.link.pg {
                Some((spec, _)) => LinkSpec::Pgsql(spec.clone()),
                None => LinkSpec::Plain,
            },
            Kind::WebSocket => match &self.link.ws {
                Some((spec, _)) => LinkSpec::WebSocket(spec.clone()),
                None => LinkSpec::Plain,
            },
            Kind::Ldap => LinkSpec::Ldap,
            Kind::Mysql => match &self.link.mysql {
                Some((spec, _)) => LinkSpec::Mysql(spec.clone()),
                None => LinkSpec::Plain,
            },
            // Each session's connect step carries its own options; Tsung's keep-alive default
            // for any connection opened without one.
            // Tsung's defaults, guest/guest on /.
            Kind::Amqp => LinkSpec::Amqp(AmqpSpec {
                user: self
                    .link
                    .amqp_user
                    .clone()
                    .unwrap_or_else(|| "guest".into()),
                password: self
                    .link
                    .amqp_password
                    .clone()
                    .unwrap_or_else(|| "guest".into()),
                vhost: self
                    .link
                    .amqp_vhost
                    .as_ref()
                    .map_or_else(|| "/".into(), |v| v.0.clone()),
            }),
            Kind::Mqtt => LinkSpec::Mqtt(MqttSpec {
                v5: false,
                connect: MqttConnect {
                    keep_alive: 10,
                    ..MqttConnect::default()
                },
                delivery: 0,
            }),
        };
        (link, kind.protocol())
    }

    fn xmpp_spec(&mut self, options: &[JabberOption]) -> XmppSpec {
        let last = |name: &str| options.iter().rev().find(|o| o.name == name);
        let text = |name: &str, default: &str| {
            last(name)
                .map(|o| o.value.clone())
                .unwrap_or_else(|| default.to_string())
        };
        if last("domain").is_none() {
            if let Some((_, _, pos)) = self.link.first {
                self.warn(
                    pos,
                    format!("no <option type=\"ts_jabber\" name=\"domain\">: users log in to Tsung's default domain {XMPP_DOMAIN}"),
                );
            }
        }
        let anonymous = self.link.anonymous.as_ref().is_some_and(|a| a.0);
        let mut register = self.link.register.as_ref().is_some_and(|r| r.0);
        if let (true, true, Some(pos)) = (anonymous, register, self.link.register_at) {
            self.warn(
                pos,
                "this registration is dropped: the sessions log in anonymously, without an account",
            );
            register = false;
        } else if let Some((pos, msg)) = self.link.register_mixed.take() {
            self.warn(pos, msg);
        }
        let userid_max = last("userid_max")
            .and_then(|o| o.value.trim().parse::<u64>().ok())
            .unwrap_or(XMPP_USERID_MAX);
        let mut login = self.link.login.as_ref().and_then(|l| l.0.clone());
        if let (true, Some((_, _, pos))) = (anonymous, &login) {
            self.warn(
                *pos,
                "<xmpp_authenticate> is not honoured: the sessions log in anonymously, without an account",
            );
            login = None;
        }
        let max_at = last("userid_max").map(|o| o.pos);
        match (&login, max_at) {
            (None, Some(pos)) if userid_max == 0 && !anonymous => self.error(
                pos,
                "userid_max=\"0\": Tsung then takes each session's account from an <xmpp_authenticate> in its first <jabber> request, and the file has none",
            ),
            (Some(_), Some(pos)) if userid_max > 0 => self.warn(
                pos,
                "<option type=\"ts_jabber\" name=\"userid_max\"> is not honoured: the sessions log in with <xmpp_authenticate>, and headroom numbers no accounts besides",
            ),
            _ => {}
        }
        // Tsung's user server takes the random and offline destinations of chats and roster
        // requests from these files; a session that logs in from variables sends none (its
        // requests to another user are refused at the request).
        for o in options {
            let what = match o.name.as_str() {
                "random_from_fileid" => "random",
                "offline_from_fileid" => "offline",
                _ => continue,
            };
            if login.is_some() {
                let file = match self.files.get(&o.value) {
                    Some(path) => format!("file '{path}' (fileid '{}')", o.value),
                    None => format!("fileid '{}'", o.value),
                };
                self.warn(
                    o.pos,
                    format!(
                        "<option type=\"ts_jabber\" name=\"{}\"> is not honoured: Tsung names the {what} user a chat or roster request goes to from {file}; no request of this file goes to another user (headroom's users logged in from <xmpp_authenticate> are nobody's destination)",
                        o.name
                    ),
                );
            } else {
                self.error(
                    o.pos,
                    format!(
                        "'<option type=\"ts_jabber\" name=\"{}\">' is not supported without <xmpp_authenticate>: headroom's users are {{username}}{{N}}@{{domain}} for N in 1..userid_max",
                        o.name
                    ),
                );
            }
        }
        if let Some(o) = last("fileid_delimiter") {
            self.warn(
                o.pos,
                "<option type=\"ts_jabber\" name=\"fileid_delimiter\"> is not honoured: it splits the lines of the random_from_fileid and offline_from_fileid files, which headroom does not read (a <setdynvars> names its own delimiter)",
            );
        }
        // With a login from variables the numbered accounts' names are unused: the format's
        // defaults, as a scenario without them reads.
        let (username, password) = match &login {
            Some(_) => ("user".to_string(), "pass".to_string()),
            None => (text("username", XMPP_USERNAME), text("passwd", XMPP_PASSWD)),
        };
        XmppSpec {
            domain: text("domain", XMPP_DOMAIN),
            username,
            password,
            first: 1,
            last: if login.is_some() {
                1
            } else {
                userid_max.max(1)
            },
            login: login.map(|(u, p, _)| XmppLogin::new(&u, &p)),
            resource: Some(
                self.link
                    .resource
                    .as_ref()
                    .map(|r| r.0.clone())
                    .unwrap_or_else(|| XMPP_RESOURCE.to_string()),
            ),
            anonymous,
            register,
            bosh: None,
        }
    }

    /// `<option type="ts_jabber" name value>`, checked here and applied when the sessions are
    /// known.
    pub(super) fn jabber_option(&mut self, o: &El) {
        self.check_attrs(o, &["type", "name", "value"]);
        self.no_text(o);
        for c in &o.children {
            self.unexpected(c, "option");
        }
        let name = o.attr("name").map(|a| a.value.clone()).unwrap_or_default();
        let why = match name.as_str() {
            "domain" | "username" | "passwd" | "userid_max" => None,
            "global_number" => Some(
                "headroom has no barrier between users (ack=\"global\" becomes a wait for the request's own reply)",
            ),
            "muc_service" | "pubsub_service" => None,
            // Judged once the sessions' logins are known (`xmpp_spec`).
            "fileid_delimiter" | "random_from_fileid" | "offline_from_fileid" => None,
            "vhost_file" => {
                self.error(
                    o.pos,
                    format!("'<option type=\"ts_jabber\" name=\"{name}\">' is not supported: headroom's users are {{username}}{{N}}@{{domain}} for N in 1..userid_max"),
                );
                return;
            }
            "" => Some("it has no name"),
            _ => Some("Tsung 1.7 does not know it"),
        };
        if let Some(why) = why {
            self.warn(
                o.pos,
                format!("<option type=\"ts_jabber\" name=\"{name}\"> is not honoured: {why}"),
            );
            return;
        }
        let Some(v) = self.required(o, "value") else {
            return;
        };
        if name == "userid_max" {
            // 0: every account comes from an <xmpp_authenticate> (checked in `xmpp_spec`).
            if v.value.trim().parse::<u64>().is_err() {
                let pos = v.pos;
                let msg = format!("value=\"{}\": expected an integer >= 0", v.value);
                self.error(pos, msg);
                return;
            }
        } else if v.value.is_empty() {
            let pos = v.pos;
            self.error(pos, format!("{name}: expected a non-empty value"));
            return;
        }
        let value = v.value.clone();
        self.link.jabber_options.push(JabberOption {
            name,
            value,
            pos: o.pos,
        });
    }

    // ---- steps ------------------------------------------------------------------------------

    /// A think time of the session at `pos` (already converted).
    pub(super) fn after_think(&mut self, pos: usize) {
        if self.sess.kind != Kind::Http && self.sess.connected {
            self.sess.thinks.push(pos);
        }
    }

    /// A loop boundary: an extended-protocol unit must not cross it.
    pub(super) fn loop_boundary(&mut self) {
        if let Some(start) = self.sess.unit.start.take() {
            self.sess.unit = Unit::default();
            self.error(
                start,
                "parse/bind/execute without a <pgsql type=\"sync\"> before the loop boundary: headroom sends extended-protocol messages as a unit that ends with a sync",
            );
        }
    }

    /// The message for a transaction whose setup requests were absorbed (`absorbed` of them);
    /// `None` when there were none.
    pub(super) fn absorbed_note(&self, name: &str, absorbed: usize, empty: bool) -> Option<String> {
        if absorbed == 0 {
            return None;
        }
        let (what, timed) = self.sess.kind.setup();
        Some(if empty {
            format!("transaction '{name}' holds only requests of {what}, which headroom runs when the connection opens, timed as {timed}: dropped")
        } else {
            format!("transaction '{name}' no longer times its {absorbed} request(s) of {what}: headroom runs them when the connection opens, timed as {timed}")
        })
    }

    /// A setup request at `pos` absorbed into the implicit connection setup.
    pub(super) fn absorb(&mut self) {
        self.sess.absorbed += 1;
        let (what, timed) = self.sess.kind.setup();
        for t in std::mem::take(&mut self.sess.thinks) {
            self.warn(
                t,
                format!("this think time no longer delays the rest of {what}: headroom runs it all when the connection opens (timed as {timed}), before the think time"),
            );
        }
    }

    /// The session's AMQP virtual host; false (an error given) when it differs from an earlier
    /// one of the session.
    pub(super) fn sess_amqp_vhost(&mut self, vhost: String, pos: usize) -> bool {
        match &self.sess.amqp_vhost {
            Some((v, _)) if *v != vhost => {
                let msg = format!(
                    "this connection.open opens virtual host '{vhost}', an earlier one of the session '{v}': headroom opens the same one on every connection"
                );
                self.error(pos, msg);
                false
            }
            Some(_) => true,
            None => {
                self.sess.amqp_vhost = Some((vhost, pos));
                true
            }
        }
    }

    /// The session's MySQL login; false (an error given) when it differs from an earlier one.
    pub(super) fn sess_mysql(&mut self, spec: MysqlSpec, pos: usize) -> bool {
        match &self.sess.mysql {
            Some((s, _)) if *s != spec => {
                let msg = format!(
                    "this authenticate logs in as {}, an earlier one of the session as {}: headroom logs every connection in the same way",
                    spec.user, s.user
                );
                self.error(pos, msg);
                false
            }
            Some(_) => true,
            None => {
                self.sess.mysql = Some((spec, pos));
                true
            }
        }
    }

    pub(super) fn proto_act(&mut self) {
        self.act();
    }

    pub(super) fn proto_absorb(&mut self) {
        self.absorb();
    }

    pub(super) fn proto_connect(&mut self, out: &mut Vec<Step>) {
        self.connect(out);
    }

    /// A close was written: the next request opens a new connection.
    pub(super) fn proto_closed(&mut self) {
        self.sess.connected = false;
    }

    /// A request that is not part of the setup: think times before it are the session's own.
    fn act(&mut self) {
        self.sess.thinks.clear();
    }

    /// Tsung's `connect`: a `connect` step where the connection opens; again on an open
    /// connection (XMPP's stream restart after SASL), absorbed.
    fn connect(&mut self, out: &mut Vec<Step>) {
        if self.sess.connected {
            self.absorb();
        } else {
            out.push(Step::Connect);
            self.sess.connected = true;
            self.sess.thinks.clear();
        }
    }

    /// A `<request>` of a protocol session.
    pub(super) fn proto_request(&mut self, el: &El, out: &mut Vec<Step>) {
        self.check_attrs(el, &["subst", "tag"]);
        self.no_text(el);
        self.ignored(el, "tag", "headroom has no request tags to exclude");
        let subst = self.bool_attr(el, "subst").unwrap_or(false);
        let kind = self.sess.kind;
        let want = kind.element();
        let mut main = None;
        let mut matches = Vec::new();
        let mut dyns = Vec::new();
        let mut other_protocol = false;
        for c in &el.children {
            match c.name.as_str() {
                n if n == want && main.is_none() => main = Some(c),
                n if n == want => self.error(c.pos, format!("a <request> takes one <{want}>")),
                "match" => matches.push(c),
                "dyn_variable" => dyns.push(c),
                n => {
                    other_protocol |= PROTOCOL_ELEMENTS.contains(&n) || n == "http";
                    self.unexpected(c, "request");
                }
            }
        }
        let Some(m) = main else {
            if !other_protocol {
                self.error(el.pos, format!("<request> without <{want}>"));
            }
            return;
        };
        let produced = match kind {
            Kind::Jabber => self.jabber(m, subst, out),
            Kind::Pgsql => self.pgsql(m, subst, out),
            Kind::Raw => self.raw(m, subst, out),
            Kind::WebSocket => self.websocket(m, subst, out),
            Kind::Mysql => self.mysql(m, subst, out),
            Kind::Amqp => self.amqp(m, subst, out),
            Kind::Ldap if m.attr("type").is_some_and(|t| t.value == "start_tls") => {
                self.ldap_start_tls(m)
            }
            Kind::Ldap => {
                if self.ldap(m, subst, out) {
                    self.act();
                    Produced::Unreadable
                } else {
                    Produced::Nothing
                }
            }
            Kind::Mqtt => {
                if self.mqtt(m, subst, out) {
                    self.act();
                    Produced::Unreadable
                } else {
                    Produced::Nothing
                }
            }
            Kind::Fs => self.fs(m, subst, out),
            Kind::Http => Produced::Nothing,
        };
        let why = match produced {
            Produced::Readable | Produced::Nothing => None,
            Produced::Unreadable => Some(format!(
                "headroom does not keep {} replies for checks",
                kind.label()
            )),
            Produced::NoReply(NoReply::Setup) => Some(format!(
                "the request is part of {}, which headroom runs when the connection opens",
                kind.setup().0
            )),
            Produced::NoReply(NoReply::Close) => Some("a close has no reply to check".into()),
            Produced::NoReply(NoReply::Unit) => Some(
                "Tsung does not wait for a reply to it; headroom reads the reply of an extended-protocol unit at its sync".into(),
            ),
        };
        for x in matches {
            match &why {
                None => {
                    if let (Produced::Readable, Some(x)) = (produced, self.matcher(x)) {
                        out.push(Step::Match(x));
                    }
                }
                Some(why) => self.warn(x.pos, format!("<match> is dropped: {why}")),
            }
        }
        for d in dyns {
            match &why {
                None => {
                    if let (Produced::Readable, Some(e)) = (produced, self.dyn_variable(d)) {
                        out.push(Step::Extract(e));
                    }
                }
                // A value taken from a reply of the setup is Tsung's way to carry the stream
                // id or a nonce into its own login requests, which headroom replaces: not set,
                // and a use of it elsewhere is an error that says why.
                Some(why) if produced == Produced::NoReply(NoReply::Setup) => {
                    let name = d.attr("name").filter(|v| super::valid_var(&v.value));
                    let what = name.map_or(String::new(), |v| format!(" name=\"{}\"", v.value));
                    self.warn(
                        d.pos,
                        format!("<dyn_variable{what}> is not honoured (the variable is not set): {why}; Tsung takes it for its own login requests"),
                    );
                    if let Some(v) = name.filter(|v| !self.vars.contains(&v.value)) {
                        self.unset_vars.insert(v.value.clone(), why.clone());
                    }
                }
                Some(why) => {
                    self.error(
                        d.pos,
                        format!("'<dyn_variable>' is not supported here: {why}"),
                    );
                    // Its variable counts as defined: one error, not one per later use.
                    if let Some(v) = d.attr("name").filter(|v| super::valid_var(&v.value)) {
                        self.vars.insert(v.value.clone());
                    }
                }
            }
        }
    }

    /// A value that goes into the scenario's connection settings: no variables.
    pub(super) fn fixed(&mut self, el: &El, key: &str, default: Option<&str>) -> Option<String> {
        let Some(a) = el.attr(key) else {
            return match default {
                Some(d) => Some(d.to_string()),
                None => {
                    self.required(el, key);
                    None
                }
            };
        };
        if a.value.contains("%%") || a.value.contains("${") {
            let pos = a.pos;
            self.error(
                pos,
                format!(
                    "{key}=\"{}\": variables are not supported in connection settings (headroom sets up every connection of the scenario the same way)",
                    a.value
                ),
            );
            return None;
        }
        Some(a.value.clone())
    }

    // ---- jabber -----------------------------------------------------------------------------

    fn jabber(&mut self, el: &El, subst: bool, out: &mut Vec<Step>) -> Produced {
        let ty = el.attr("type").map(|a| a.value.as_str()).unwrap_or("chat");
        self.no_text(el);
        let first = !std::mem::replace(&mut self.sess.jabber_seen, true);
        for c in &el.children {
            if c.name == "xmpp_authenticate" {
                self.xmpp_authenticate(c, subst, first);
            } else {
                self.unexpected(c, "jabber");
            }
        }
        let not_supported =
            |what: &str| format!("'<jabber type=\"{ty}\">' is not supported: {what}");
        let setup: &[&str] = &["type", "ack"];
        match ty {
            "connect" => {
                self.check_attrs(el, &["type", "ack", "version"]);
                if let Some(v) = el.attr("version") {
                    if v.value != "1.0" {
                        let pos = v.pos;
                        self.error(
                            pos,
                            format!("version=\"{}\" is not supported: headroom opens XMPP 1.0 streams (the legacy jabber:iq:auth login is not supported)", v.value),
                        );
                        return Produced::Nothing;
                    }
                }
                self.setup_ack(el);
                self.connect(out);
                Produced::NoReply(NoReply::Setup)
            }
            "auth_sasl" | "auth_sasl_anonymous" | "auth_sasl_session" | "register" => {
                self.check_attrs(el, setup);
                self.setup_ack(el);
                match ty {
                    "auth_sasl" => self.sess.auth = Some(false),
                    "auth_sasl_anonymous" => self.sess.auth = Some(true),
                    "register" => self.sess.register = self.sess.register.or(Some(el.pos)),
                    _ => {}
                }
                self.absorb();
                Produced::NoReply(NoReply::Setup)
            }
            "auth_sasl_bind" => {
                self.check_attrs(el, &["type", "ack", "resource"]);
                self.setup_ack(el);
                if el.attr("resource").is_some() {
                    match self.fixed(el, "resource", None) {
                        Some(r) if !r.is_empty() => self.sess.resource = Some(r),
                        Some(_) => {
                            self.error(el.pos, "resource=\"\": expected a resource name");
                            return Produced::Nothing;
                        }
                        None => return Produced::Nothing,
                    }
                }
                self.absorb();
                Produced::NoReply(NoReply::Setup)
            }
            // Tsung's legacy jabber:iq:auth login (XEP-0078; the password in plain, as a
            // digest of the stream id, or SIP-style as a digest of the server's nonce): the
            // same account and password, one round trip more or less; headroom's XMPP client speaks SASL only, so the
            // login is run as SASL PLAIN (what auth_sasl does) and said so.
            "auth_get" | "auth_set_plain" | "auth_set_digest" | "auth_set_sip" => {
                self.check_attrs(el, &["type", "ack", "resource"]);
                self.setup_ack(el);
                if ty != "auth_get" {
                    self.sess.auth = Some(false);
                    self.warn(
                        el.pos,
                        format!("'<jabber type=\"{ty}\">' (Tsung's legacy jabber:iq:auth login, XEP-0078) is run as a SASL PLAIN login with the same user and password: headroom's XMPP client speaks SASL only"),
                    );
                }
                if el.attr("resource").is_some() {
                    match self.fixed(el, "resource", None) {
                        Some(r) if !r.is_empty() => self.sess.resource = Some(r),
                        Some(_) => {
                            self.error(el.pos, "resource=\"\": expected a resource name");
                            return Produced::Nothing;
                        }
                        None => return Produced::Nothing,
                    }
                }
                self.absorb();
                Produced::NoReply(NoReply::Setup)
            }
            "auth_sasl_external" => {
                self.error(
                    el.pos,
                    not_supported("headroom logs in with SASL PLAIN or ANONYMOUS"),
                );
                Produced::Nothing
            }
            // STARTTLS (RFC 6120 §5): a setting of the server (`tls: {starttls: true}`), run
            // in the login with the stream restart after it.
            "starttls" => {
                self.check_attrs(el, &["type", "ack"]);
                self.ignored(el, "ack", "the login waits for the server's <proceed/>");
                if !self.sess.connected {
                    self.error(el.pos, "<jabber type=\"starttls\"> before a connect");
                    return Produced::Nothing;
                }
                self.sess.starttls = self.sess.starttls.or(Some(el.pos));
                self.absorb();
                Produced::NoReply(NoReply::Setup)
            }
            _ => {
                let Some(action) = self.xmpp_action(el, ty, subst) else {
                    return Produced::Nothing;
                };
                if let (Some(_), Some(dest)) = (&self.sess.login, action.dest()) {
                    self.error(
                        el.pos,
                        format!(
                            "'<jabber type=\"{ty}\">' goes to another ({}) user, which headroom picks among numbered accounts; this session logs in with <xmpp_authenticate>, and such users are nobody's destination",
                            dest.as_str()
                        ),
                    );
                    return Produced::Nothing;
                }
                let Some(ack) = self.xmpp_ack(el) else {
                    return Produced::Nothing;
                };
                if matches!(action, XmppAction::Close) {
                    self.sess.connected = false;
                }
                self.act();
                out.push(Step::Xmpp(Xmpp {
                    name: format!("xmpp:{}", action.type_name()),
                    action,
                    ack,
                }));
                Produced::Unreadable
            }
        }
    }

    /// `<xmpp_authenticate username passwd>` of a `<jabber>` (`first`: the session's first):
    /// the session's account, over its variables with `subst`.
    fn xmpp_authenticate(&mut self, c: &El, subst: bool, first: bool) {
        self.check_attrs(c, &["username", "passwd"]);
        self.no_text(c);
        for x in &c.children {
            self.unexpected(x, "xmpp_authenticate");
        }
        if !first {
            self.warn(
                c.pos,
                "<xmpp_authenticate> is not honoured: Tsung takes a session's account from its first <jabber> request only",
            );
            return;
        }
        let (Some(u), Some(p)) = (self.required(c, "username"), self.required(c, "passwd")) else {
            return;
        };
        let (upos, ppos) = (u.pos, p.pos);
        let (uv, pv) = (u.value.clone(), p.value.clone());
        if uv.trim().is_empty() {
            self.error(upos, "username=\"\": expected a user name");
            return;
        }
        let user = self.subst(&uv, upos, subst);
        let password = self.subst(&pv, ppos, subst);
        if let (Some(user), Some(password)) = (user, password) {
            self.sess.login = Some((user, password, c.pos));
        }
    }

    /// `ack` of a setup request: the setup waits for each of its replies anyway; a barrier is
    /// not kept.
    fn setup_ack(&mut self, el: &El) {
        if let Some(a) = el.attr("ack") {
            if a.value == "global" {
                let pos = a.pos;
                self.warn(
                    pos,
                    "ack=\"global\" is not honoured: this request is part of the XMPP login, which headroom runs when the connection opens, without a barrier between users",
                );
            }
        }
    }

    fn xmpp_ack(&mut self, el: &El) -> Option<XmppAck> {
        let Some(a) = el.attr("ack") else {
            // Tsung's default.
            return Some(XmppAck::NoAck);
        };
        let pos = a.pos;
        match a.value.as_str() {
            "no_ack" => Some(XmppAck::NoAck),
            "local" => Some(XmppAck::Local),
            "global" => {
                self.warn(
                    pos,
                    "ack=\"global\" becomes ack: reply: Tsung's global ack is a barrier (each user waits until global_number users got there), headroom waits for this request's own reply (an iq's result; a message or presence is done once written)",
                );
                Some(XmppAck::Reply)
            }
            v => {
                self.error(
                    pos,
                    format!("ack=\"{v}\": expected no_ack, local or global"),
                );
                None
            }
        }
    }

    /// `destination` (Tsung's default: random).
    fn xmpp_dest(&mut self, el: &El) -> Option<XmppDest> {
        let Some(a) = el.attr("destination") else {
            return Some(XmppDest::Random);
        };
        match XmppDest::parse(&a.value) {
            Some(d) => Some(d),
            None => {
                let pos = a.pos;
                self.error(
                    pos,
                    format!(
                        "destination=\"{}\": expected online, offline, random, unique or previous",
                        a.value
                    ),
                );
                None
            }
        }
    }

    /// `<jabber type>` of a request that is a step.
    fn xmpp_action(&mut self, el: &El, ty: &str, subst: bool) -> Option<XmppAction<String>> {
        let roster_previous = |conv: &mut Self, what: &str| {
            conv.warn(
                el.pos,
                format!("{what} goes to 'previous' (in headroom: the destination of this user's previous chat); Tsung sends it to the contact of the session's last iq:roster:add"),
            );
        };
        let no_group = |conv: &mut Self| {
            conv.ignored(
                el,
                "group",
                "headroom's roster requests put the contact in no group",
            );
        };
        Some(match ty {
            "presence:initial" | "presence:final" | "iq:roster:get" | "close" => {
                self.check_attrs(el, &["type", "ack"]);
                match ty {
                    "presence:initial" => XmppAction::PresenceInitial,
                    "presence:final" => XmppAction::PresenceFinal,
                    "iq:roster:get" => XmppAction::RosterGet,
                    _ => XmppAction::Close,
                }
            }
            "presence:broadcast" | "presence:directed" => {
                self.check_attrs(el, &["type", "ack", "show", "status", "destination"]);
                // Tsung's defaults, always sent.
                if let Some(a) = el
                    .attr("show")
                    .filter(|a| !["chat", "away", "xa", "dnd"].contains(&a.value.as_str()))
                {
                    let pos = a.pos;
                    self.error(
                        pos,
                        format!(
                            "show=\"{}\": expected chat, away, xa or dnd (RFC 6121)",
                            a.value
                        ),
                    );
                    return None;
                }
                let show = el.attr("show").map_or("chat", |a| a.value.as_str());
                let status = el.attr("status").map_or("Available", |a| a.value.as_str());
                let (show, status) = (Some(show.to_string()), Some(status.to_string()));
                if ty == "presence:broadcast" {
                    self.ignored(el, "destination", "a broadcast goes to the user's contacts");
                    XmppAction::PresenceBroadcast { show, status }
                } else {
                    if let Some(d) = el.attr("destination").filter(|d| d.value != "online") {
                        let pos = d.pos;
                        self.warn(
                            pos,
                            format!("destination=\"{}\" is not honoured: Tsung sends a directed presence to an online user, and so does the converted step", d.value),
                        );
                    }
                    XmppAction::PresenceDirected {
                        to: XmppDest::Online,
                        show,
                        status,
                    }
                }
            }
            "presence:subscribe" | "iq:roster:remove" => {
                self.check_attrs(el, &["type", "ack"]);
                roster_previous(self, ty);
                if ty == "presence:subscribe" {
                    XmppAction::PresenceSubscribe {
                        to: XmppDest::Previous,
                    }
                } else {
                    XmppAction::RosterRemove {
                        to: XmppDest::Previous,
                    }
                }
            }
            "iq:roster:rename" => {
                self.check_attrs(el, &["type", "ack", "group"]);
                roster_previous(self, ty);
                no_group(self);
                XmppAction::RosterRename {
                    to: XmppDest::Previous,
                    name: XMPP_RENAME.to_string(),
                }
            }
            "iq:roster:add" => {
                self.check_attrs(el, &["type", "ack", "destination", "group"]);
                no_group(self);
                XmppAction::RosterAdd {
                    to: self.xmpp_dest(el)?,
                }
            }
            "chat" => {
                self.check_attrs(
                    el,
                    &["type", "ack", "destination", "size", "data", "stamped"],
                );
                let to = self.xmpp_dest(el)?;
                let size = match el.attr("size") {
                    None => 0,
                    Some(a) => match a.value.trim().parse::<usize>() {
                        Ok(n) => n,
                        Err(_) => {
                            let pos = a.pos;
                            self.error(
                                pos,
                                format!("size=\"{}\": expected a number of bytes", a.value),
                            );
                            return None;
                        }
                    },
                };
                let text = match el.attr("data") {
                    Some(a) => {
                        let (v, pos) = (a.value.clone(), a.pos);
                        Some(self.subst(&v, pos, subst)?)
                    }
                    None => None,
                };
                if text.is_some() {
                    self.ignored(el, "size", "Tsung sends the data as the body");
                }
                if let Some(s) = el.attr("stamped").filter(|s| s.value != "false") {
                    let pos = s.pos;
                    self.warn(
                        pos,
                        "attribute 'stamped' of <jabber> is not honoured: headroom does not stamp messages (a message's delivery is counted on the receiver's side)",
                    );
                }
                match (text, size) {
                    (Some(text), _) => XmppAction::Chat {
                        to,
                        size: 0,
                        text: Some(text),
                    },
                    // Tsung's default size: an empty body.
                    (None, 0) => XmppAction::Chat {
                        to,
                        size: 0,
                        text: Some(String::new()),
                    },
                    (None, size) => XmppAction::Chat {
                        to,
                        size,
                        text: None,
                    },
                }
            }
            "raw" => {
                self.check_attrs(el, &["type", "ack", "data"]);
                let a = self.required(el, "data")?;
                let (v, pos) = (a.value.clone(), a.pos);
                XmppAction::Raw(self.subst(&v, pos, subst)?)
            }
            t if t.starts_with("muc:") || t.starts_with("privacy:") || t.starts_with("pubsub:") => {
                let data = self.xmpp_stanza(el, t, subst)?;
                XmppAction::Raw(data)
            }
            t => {
                let why = if t.starts_with("muc:") {
                    "headroom has no multi-user chat requests"
                } else if t.starts_with("pubsub:") {
                    "headroom has no publish-subscribe requests"
                } else if t.starts_with("privacy:") {
                    "headroom has no privacy-list requests"
                } else {
                    "headroom does not know it"
                };
                self.error(
                    el.pos,
                    format!("'<jabber type=\"{t}\">' is not supported: {why}"),
                );
                return None;
            }
        })
    }

    /// Tsung's multi-user chat (XEP-0045) and privacy-list (XEP-0016) requests, which
    /// headroom's XMPP client has no types for: the stanza Tsung's `ts_jabber` sends, written
    /// out as a `raw` step (the same bytes on the wire, so the same load). `None` (with a
    /// located error) for a type Tsung does not have or a missing attribute.
    fn xmpp_stanza(&mut self, el: &El, ty: &str, subst: bool) -> Option<String> {
        let attr = |conv: &mut Self, key: &str| -> Option<String> {
            let a = conv.required(el, key)?;
            let (v, pos) = (a.value.clone(), a.pos);
            conv.subst(&v, pos, subst)
        };
        let service = || {
            self.link
                .jabber_options
                .iter()
                .rev()
                .find(|o| o.name == "muc_service")
                .map_or_else(|| XMPP_MUC_SERVICE.to_string(), |o| o.value.clone())
        };
        let service = service();
        let stanza = match ty {
            "muc:join" | "muc:nick" => {
                self.check_attrs(el, &["type", "ack", "room", "nick"]);
                let room = attr(self, "room")?;
                let nick = attr(self, "nick")?;
                if ty == "muc:join" {
                    format!("<presence to='{room}@{service}/{nick}'><x xmlns='http://jabber.org/protocol/muc'/></presence>")
                } else {
                    format!("<presence to='{room}@{service}/{nick}'/>")
                }
            }
            "muc:exit" => {
                self.check_attrs(el, &["type", "ack", "room", "nick"]);
                let room = attr(self, "room")?;
                let nick = attr(self, "nick")?;
                format!("<presence type='unavailable' to='{room}@{service}/{nick}'/>")
            }
            "muc:chat" => {
                self.check_attrs(el, &["type", "ack", "room", "size", "data"]);
                let room = attr(self, "room")?;
                let body = match el.attr("data") {
                    Some(_) => attr(self, "data")?,
                    None => {
                        let size = match el.attr("size") {
                            None => 0,
                            Some(a) => match a.value.trim().parse::<usize>() {
                                Ok(n) => n,
                                Err(_) => {
                                    let pos = a.pos;
                                    self.error(
                                        pos,
                                        format!("size=\"{}\": expected a number of bytes", a.value),
                                    );
                                    return None;
                                }
                            },
                        };
                        "x".repeat(size)
                    }
                };
                format!(
                    "<message type='groupchat' to='{room}@{service}'><body>{body}</body></message>"
                )
            }
            "pubsub:create" | "pubsub:publish" | "pubsub:subscribe" => {
                return self.pubsub_stanza(el, ty, subst);
            }
            "privacy:get_names" => {
                self.check_attrs(el, &["type", "ack"]);
                "<iq type='get' id='privacy'><query xmlns='jabber:iq:privacy'/></iq>".to_string()
            }
            "privacy:set_active" => {
                self.check_attrs(el, &["type", "ack"]);
                self.warn(
                    el.pos,
                    format!("'<jabber type=\"{ty}\">' activates the list '{XMPP_PRIVACY_LIST}' for every user (Tsung names it after the user, {{username}}N@{{domain}}_list)"),
                );
                format!("<iq type='set' id='privacy'><query xmlns='jabber:iq:privacy'><active name='{XMPP_PRIVACY_LIST}'/></query></iq>")
            }
            _ => {
                let what = if ty.starts_with("muc:") {
                    "headroom converts muc:join, muc:chat, muc:nick and muc:exit"
                } else if ty.starts_with("pubsub:") {
                    "headroom converts pubsub:create, pubsub:publish and pubsub:subscribe"
                } else {
                    "headroom converts privacy:get_names and privacy:set_active"
                };
                self.error(
                    el.pos,
                    format!("'<jabber type=\"{ty}\">' is not supported: {what}"),
                );
                return None;
            }
        };
        self.warn(
            el.pos,
            format!("'<jabber type=\"{ty}\">' is sent as a raw stanza (headroom's XMPP client has no {} type): the bytes Tsung sends, with its ack", if ty.starts_with("muc:") { "multi-user chat" } else { "privacy-list" }),
        );
        Some(stanza)
    }

    /// Tsung's publish-subscribe requests (XEP-0060), written out as `ts_jabber_common` does
    /// (Tsung 1.7). A node name with a leading `/` is absolute; another is under the user's
    /// own hierarchy (`/home/{domain}/{user}/node`), and a subscription names the user's own
    /// JID: a raw stanza can name the user only when the file has one account
    /// (`userid_max="1"`), else an error. The id is `pubsub` (Tsung numbers its stanzas), the
    /// payload of a publish `size` times `x` (Tsung's are random letters).
    fn pubsub_stanza(&mut self, el: &El, ty: &str, subst: bool) -> Option<String> {
        let option = |conv: &Self, name: &str, default: &str| {
            conv.link
                .jabber_options
                .iter()
                .rev()
                .find(|o| o.name == name)
                .map_or_else(|| default.to_string(), |o| o.value.clone())
        };
        let service = option(self, "pubsub_service", XMPP_PUBSUB_SERVICE);
        let domain = option(self, "domain", XMPP_DOMAIN);
        let username = option(self, "username", XMPP_USERNAME);
        let one_account = option(self, "userid_max", "").trim() == "1";
        let mut own = |conv: &mut Self, what: &str| -> Option<String> {
            if one_account {
                return Some(format!("{username}1"));
            }
            conv.error(
                el.pos,
                format!("'<jabber type=\"{ty}\">' {what}, which a raw stanza can name only when every user is the same account (<option type=\"ts_jabber\" name=\"userid_max\" value=\"1\">)"),
            );
            None
        };
        let node = match el.attr("node") {
            None => None,
            Some(a) => {
                let (v, pos) = (a.value.clone(), a.pos);
                Some(self.subst(&v, pos, subst)?)
            }
        };
        let node_attr = |conv: &mut Self,
                         own: &mut dyn FnMut(&mut Self, &str) -> Option<String>|
         -> Option<String> {
            Some(match node.as_deref() {
                None => String::from(" "),
                Some(n) if n.starts_with('/') => format!(" node='{n}'"),
                Some(n) => {
                    let user = own(conv, "names a node under the user's own hierarchy")?;
                    format!(" node='/home/{domain}/{user}/{n}'")
                }
            })
        };
        let head = format!(
            "<iq to='{service}' type='set' id='pubsub'><pubsub xmlns='http://jabber.org/protocol/pubsub'>"
        );
        let stanza = match ty {
            "pubsub:create" => {
                self.check_attrs(el, &["type", "ack", "node", "node_type", "data"]);
                let attr = node_attr(self, &mut own)?;
                let node_type = el
                    .attr("node_type")
                    .map_or(String::new(), |t| format!(" type='{}' ", t.value));
                let fields = match el.attr("data") {
                    None => String::new(),
                    Some(a) => match erlang_fields(&a.value) {
                        Some(f) => f,
                        None => {
                            let pos = a.pos;
                            self.error(
                                pos,
                                "data: expected the node options as Tsung reads them, a list of {'field', 'value'} pairs ending in '.'",
                            );
                            return None;
                        }
                    },
                };
                format!("{head}<create{attr}{node_type}/><configure> <x xmlns='jabber:x:data' type='submit'>{fields}</x></configure></pubsub></iq>")
            }
            "pubsub:publish" => {
                self.check_attrs(el, &["type", "ack", "node", "size", "stamped"]);
                let attr = node_attr(self, &mut own)?;
                let size = match el.attr("size") {
                    None => 0,
                    Some(a) => {
                        match a.value.trim().parse::<usize>() {
                            Ok(n) if n <= MAX_DATASIZE as usize => n,
                            _ => {
                                let pos = a.pos;
                                self.error(pos, format!("size=\"{}\": expected a number of bytes up to {MAX_DATASIZE}", a.value));
                                return None;
                            }
                        }
                    }
                };
                if let Some(s) = el.attr("stamped").filter(|s| s.value != "false") {
                    let pos = s.pos;
                    self.warn(pos, "attribute 'stamped' of <jabber> is not honoured: headroom does not stamp messages");
                }
                let body = "x".repeat(size);
                format!("{head}<publish{attr}><item><entry>{body}</entry></item></publish></pubsub></iq>")
            }
            _ => {
                self.check_attrs(el, &["type", "ack", "node", "destination"]);
                let attr = match node.as_deref() {
                    Some(n) if n.starts_with('/') => format!(" node='{n}'"),
                    _ => {
                        self.error(
                            el.pos,
                            "'<jabber type=\"pubsub:subscribe\">' without an absolute node (node=\"/...\") subscribes to another user's hierarchy, which a raw stanza cannot name",
                        );
                        return None;
                    }
                };
                self.ignored(
                    el,
                    "destination",
                    "the node is absolute, so no other user is named",
                );
                let user = own(self, "sends the user's own JID")?;
                format!("{head}<subscribe{attr} jid='{user}@{domain}'/></pubsub></iq>")
            }
        };
        self.warn(
            el.pos,
            format!("'<jabber type=\"{ty}\">' is sent as a raw stanza (headroom's XMPP client has no publish-subscribe type): the bytes Tsung sends, with its ack (id 'pubsub' for Tsung's counter)"),
        );
        Some(stanza)
    }

    // ---- pgsql ------------------------------------------------------------------------------

    fn pgsql(&mut self, el: &El, subst: bool, out: &mut Vec<Step>) -> Produced {
        let Some(t) = self.required(el, "type") else {
            return Produced::Nothing;
        };
        let (ty, ty_pos) = (t.value.clone(), t.pos);
        for c in &el.children {
            self.unexpected(c, "pgsql");
        }
        if !matches!(ty.as_str(), "sql" | "parse") {
            self.no_text(el);
        }
        let unit_part = matches!(
            ty.as_str(),
            "parse" | "bind" | "describe" | "execute" | "sync"
        );
        if !unit_part {
            if let Some(start) = self.sess.unit.start.take() {
                self.sess.unit = Unit::default();
                self.error(
                    start,
                    format!("parse/bind/execute without a <pgsql type=\"sync\"> before <pgsql type=\"{ty}\">: headroom sends extended-protocol messages as a unit that ends with a sync"),
                );
            }
        } else if self.sess.unit.start.is_none() && ty != "sync" {
            self.sess.unit.start = Some(el.pos);
        }
        match ty.as_str() {
            "connect" => {
                self.check_attrs(el, &["type", "database", "username"]);
                let db = self.fixed(el, "database", None);
                let user = self.fixed(el, "username", None);
                let (Some(database), Some(user)) = (db, user) else {
                    return Produced::Nothing;
                };
                if database.is_empty() || user.is_empty() {
                    let key = if database.is_empty() {
                        "database"
                    } else {
                        "username"
                    };
                    self.error(el.pos, format!("{key}=\"\": expected a name"));
                    return Produced::Nothing;
                }
                let spec = PgSpec {
                    database,
                    user,
                    password: None,
                };
                match &self.sess.pg {
                    Some((s, _)) if *s != spec => {
                        let msg = format!(
                            "this connect is as {}, an earlier one of the session as {}: headroom connects every session with the same settings",
                            pg_who(&spec),
                            pg_who(s)
                        );
                        self.error(el.pos, msg);
                        return Produced::Nothing;
                    }
                    Some(_) => {}
                    None => self.sess.pg = Some((spec, el.pos)),
                }
                self.connect(out);
                Produced::NoReply(NoReply::Setup)
            }
            "authenticate" => {
                self.check_attrs(el, &["type", "password"]);
                let Some(p) = self.fixed(el, "password", None) else {
                    return Produced::Nothing;
                };
                if let Some(old) = self.sess.password.as_ref().filter(|o| **o != p) {
                    let msg = format!("this password differs from the session's earlier one ('{old}'): headroom connects every session with the same settings");
                    self.error(el.pos, msg);
                    return Produced::Nothing;
                }
                self.sess.password = Some(p);
                self.absorb();
                Produced::NoReply(NoReply::Setup)
            }
            "sql" => {
                self.check_attrs(el, &["type"]);
                let text = el.text.trim();
                let pos = el.text_pos.unwrap_or(el.pos);
                if text.is_empty() {
                    self.error(el.pos, "<pgsql type=\"sql\"> without a query");
                    return Produced::Nothing;
                }
                let Some(query) = self.subst(text, pos, subst) else {
                    return Produced::Nothing;
                };
                self.act();
                out.push(Step::Sql(Sql {
                    name: first_line(&query, "sql"),
                    query,
                    params: Vec::new(),
                    prepare: false,
                }));
                Produced::Readable
            }
            "parse" => {
                self.check_attrs(el, &["type", "name_prepared", "parameters"]);
                self.ignored(
                    el,
                    "parameters",
                    "headroom sends no parameter types: the server infers them from the query",
                );
                let text = el.text.trim();
                let pos = el.text_pos.unwrap_or(el.pos);
                if text.is_empty() {
                    self.error(el.pos, "<pgsql type=\"parse\"> without a query");
                    return Produced::Nothing;
                }
                if text.contains("${") {
                    self.error(pos, format!("'{text}' holds '${{', which headroom reads as a variable and cannot escape"));
                    return Produced::Nothing;
                }
                if subst && text.contains("%%") {
                    self.warn(
                        pos,
                        "'%%...%%' is sent literally: Tsung substitutes no variables in a <pgsql type=\"parse\">",
                    );
                }
                let name = el
                    .attr("name_prepared")
                    .map(|a| a.value.clone())
                    .unwrap_or_default();
                if let Some((n, q)) = self.sess.unit.parse.take() {
                    self.sess.statements.insert(n, q);
                }
                self.sess.unit.parse = Some((name, text.to_string()));
                Produced::NoReply(NoReply::Unit)
            }
            "bind" => {
                self.check_attrs(
                    el,
                    &[
                        "type",
                        "name_portal",
                        "name_prepared",
                        "parameters",
                        "formats",
                        "formats_results",
                    ],
                );
                if let Some(f) = el
                    .attr("formats")
                    .filter(|f| f.value != "none" && f.value != "text")
                {
                    let pos = f.pos;
                    self.error(
                        pos,
                        format!(
                            "formats=\"{}\" is not supported: headroom sends parameters as text",
                            f.value
                        ),
                    );
                    return Produced::Nothing;
                }
                if let Some(f) = el
                    .attr("formats_results")
                    .filter(|f| f.value.split(',').any(|x| x.trim() != "text"))
                {
                    let pos = f.pos;
                    self.warn(
                        pos,
                        format!("formats_results=\"{}\" is not honoured: headroom asks for text results", f.value),
                    );
                }
                let mut params = Vec::new();
                if let Some(p) = el.attr("parameters").filter(|p| !p.value.is_empty()) {
                    let (v, pos) = (p.value.clone(), p.pos);
                    for x in v.split(',') {
                        if x == "null" {
                            self.error(
                                pos,
                                "parameter 'null' (SQL NULL) is not supported: headroom sends every parameter as text",
                            );
                            return Produced::Nothing;
                        }
                        let Some(x) = self.subst(x, pos, subst) else {
                            return Produced::Nothing;
                        };
                        params.push(x);
                    }
                }
                let name = el
                    .attr("name_prepared")
                    .map(|a| a.value.clone())
                    .unwrap_or_default();
                if self.sess.unit.bind.is_some() {
                    self.error(
                        el.pos,
                        "a second bind before the sync: headroom runs one statement per unit",
                    );
                    return Produced::Nothing;
                }
                self.sess.unit.bind = Some((name, params, el.pos));
                Produced::NoReply(NoReply::Unit)
            }
            "describe" => {
                // Part of the unit: headroom describes the portal itself where it needs to.
                self.check_attrs(el, &["type", "name_portal", "name_prepared"]);
                Produced::NoReply(NoReply::Unit)
            }
            "execute" => {
                self.check_attrs(el, &["type", "name_portal", "max_rows"]);
                if let Some(m) = el.attr("max_rows").filter(|m| m.value.trim() != "0") {
                    let pos = m.pos;
                    self.warn(
                        pos,
                        format!(
                            "max_rows=\"{}\" is not honoured: headroom fetches every row",
                            m.value
                        ),
                    );
                }
                if self.sess.unit.bind.is_none() {
                    self.error(el.pos, "execute without a bind before it");
                    return Produced::Nothing;
                }
                self.sess.unit.execute = Some(el.pos);
                Produced::NoReply(NoReply::Unit)
            }
            "sync" => {
                self.check_attrs(el, &["type"]);
                self.sync(el, out)
            }
            "close" => {
                self.check_attrs(el, &["type"]);
                self.act();
                out.push(Step::Close);
                self.sess.connected = false;
                Produced::NoReply(NoReply::Close)
            }
            "flush" | "copy" | "copydone" | "copyfail" => {
                self.error(
                    el.pos,
                    format!("'<pgsql type=\"{ty}\">' is not supported: headroom runs queries and prepared statements only"),
                );
                Produced::Nothing
            }
            other => {
                self.error(
                    ty_pos,
                    format!("type=\"{other}\": expected connect, authenticate, sql, parse, bind, describe, execute, sync or close"),
                );
                Produced::Nothing
            }
        }
    }

    /// A `sync`: the unit read since the last one becomes a `sql` step (or nothing, for a
    /// parse alone).
    fn sync(&mut self, el: &El, out: &mut Vec<Step>) -> Produced {
        let unit = std::mem::take(&mut self.sess.unit);
        let Some(start) = unit.start else {
            self.warn(el.pos, "a sync with nothing before it is dropped");
            return Produced::NoReply(NoReply::Unit);
        };
        let Some((stmt, params, bind_pos)) = unit.bind else {
            // A parse alone: headroom parses a statement when it runs it.
            if let Some((name, query)) = unit.parse {
                let what = if name.is_empty() {
                    "the unnamed statement".to_string()
                } else {
                    format!("statement '{name}'")
                };
                self.warn(
                    start,
                    format!("this parse of {what} is no step of its own: headroom parses a statement when a bind executes it (a prepared one once per connection)"),
                );
                self.sess.statements.insert(name, query);
            }
            return Produced::NoReply(NoReply::Unit);
        };
        if unit.execute.is_none() {
            self.error(
                bind_pos,
                "a bind without an execute before the sync is not supported",
            );
            return Produced::Nothing;
        }
        if let Some((n, q)) = unit.parse {
            self.sess.statements.insert(n, q);
        }
        let Some(query) = self.sess.statements.get(&stmt).cloned() else {
            let what = if stmt.is_empty() {
                "the unnamed statement".to_string()
            } else {
                format!("statement '{stmt}'")
            };
            self.error(
                bind_pos,
                format!(
                    "this bind executes {what}, which no parse of the session defines before it"
                ),
            );
            return Produced::Nothing;
        };
        let prepare = !stmt.is_empty() && self.sess.executions.get(&stmt).copied().unwrap_or(0) > 1;
        self.act();
        out.push(Step::Sql(Sql {
            name: first_line(&query, "sql"),
            query,
            params,
            prepare,
        }));
        Produced::Readable
    }

    // ---- raw --------------------------------------------------------------------------------

    fn raw(&mut self, el: &El, subst: bool, out: &mut Vec<Step>) -> Produced {
        self.check_attrs(el, &["data", "datasize", "ack"]);
        self.no_text(el);
        for c in &el.children {
            self.unexpected(c, "raw");
        }
        let expect = match el.attr("ack") {
            None => Some(ExpectSpec::Nothing),
            Some(a) => {
                let pos = a.pos;
                match a.value.as_str() {
                    "no_ack" => Some(ExpectSpec::Nothing),
                    "local" => {
                        self.warn(
                            pos,
                            "ack=\"local\" becomes expect: {bytes: 1}: Tsung ends the request at the first packet, headroom at the reply's first byte; the reply's other bytes then count as the next reply or, when nothing is awaited, as a protocol error that closes the connection (give an expect that fits the reply)",
                        );
                        Some(ExpectSpec::Bytes(1))
                    }
                    "global" => {
                        self.error(
                            pos,
                            "ack=\"global\" is not supported: it is a barrier across global_number users, and headroom has no barrier",
                        );
                        None
                    }
                    v => {
                        self.error(
                            pos,
                            format!("ack=\"{v}\": expected no_ack, local or global"),
                        );
                        None
                    }
                }
            }
        };
        let data = match el.attr("datasize").filter(|a| !a.value.is_empty()) {
            Some(a) if a.value.contains("%%") => {
                let pos = a.pos;
                self.error(pos, "a datasize from a variable is not supported");
                None
            }
            Some(a) => match self.positive_int(a) {
                Some(n) if n > MAX_DATASIZE => {
                    let pos = a.pos;
                    self.error(
                        pos,
                        format!("datasize=\"{n}\": at most {MAX_DATASIZE} bytes are supported (the zero bytes are written out in the scenario)"),
                    );
                    None
                }
                Some(n) => {
                    self.ignored(el, "data", "Tsung sends datasize zero bytes instead");
                    Some(("\0".repeat(n as usize), format!("{n} zero bytes")))
                }
                None => None,
            },
            None => match self.required(el, "data") {
                Some(a) => {
                    let (v, pos) = (a.value.clone(), a.pos);
                    self.subst(&v, pos, subst)
                        .map(|d| (d.clone(), first_line(&d, "send")))
                }
                None => None,
            },
        };
        let (Some(expect), Some((data, name))) = (expect, data) else {
            return Produced::Nothing;
        };
        self.act();
        out.push(Step::Send(Send { name, data, expect }));
        Produced::Readable
    }

    // ---- websocket --------------------------------------------------------------------------

    fn websocket(&mut self, el: &El, subst: bool, out: &mut Vec<Step>) -> Produced {
        let Some(t) = self.required(el, "type") else {
            return Produced::Nothing;
        };
        let (ty, ty_pos) = (t.value.clone(), t.pos);
        for c in &el.children {
            self.unexpected(c, "websocket");
        }
        match ty.as_str() {
            "connect" => {
                self.check_attrs(el, &["type", "path", "origin", "subprotocols"]);
                self.no_text(el);
                let path = self.fixed(el, "path", Some("/"));
                let origin = self.fixed(el, "origin", Some(""));
                let protocols = self.fixed(el, "subprotocols", Some(""));
                let (Some(path), Some(origin), Some(protocols)) = (path, origin, protocols) else {
                    return Produced::Nothing;
                };
                if !path.starts_with('/') {
                    let pos = el.attr("path").map_or(el.pos, |a| a.pos);
                    self.error(
                        pos,
                        format!("path=\"{path}\": expected an absolute path starting with '/'"),
                    );
                    return Produced::Nothing;
                }
                let spec = WsSpec {
                    path,
                    subprotocol: (!protocols.is_empty()).then_some(protocols),
                    origin: (!origin.is_empty()).then_some(origin),
                };
                match &self.sess.ws {
                    Some((s, _)) if *s != spec => {
                        let msg = format!(
                            "this connect upgrades with {}, an earlier one of the session with {}: headroom upgrades every connection the same way",
                            ws_who(&spec),
                            ws_who(s)
                        );
                        self.error(el.pos, msg);
                        return Produced::Nothing;
                    }
                    Some(_) => {}
                    None => self.sess.ws = Some((spec, el.pos)),
                }
                if self.sess.connected {
                    self.error(
                        el.pos,
                        "a second connect without a close before it (Tsung would send a second upgrade on the open connection)",
                    );
                    return Produced::Nothing;
                }
                self.connect(out);
                Produced::NoReply(NoReply::Setup)
            }
            "message" => {
                self.check_attrs(el, &["type", "ack", "frame"]);
                let reply = match el.attr("ack") {
                    // Tsung's default, `parse`, waits for a message; `local` for the first
                    // packet, which holds it.
                    None => Some(true),
                    Some(a) => {
                        let pos = a.pos;
                        match a.value.as_str() {
                            "parse" | "local" => Some(true),
                            "no_ack" => Some(false),
                            "global" => {
                                self.warn(
                                    pos,
                                    "ack=\"global\" becomes a wait for the reply: Tsung's global ack is a barrier (each user waits until global_number users got there), headroom waits for the server's next message",
                                );
                                Some(true)
                            }
                            v => {
                                self.error(
                                    pos,
                                    format!("ack=\"{v}\": expected parse, local, no_ack or global"),
                                );
                                None
                            }
                        }
                    }
                };
                let binary = match el.attr("frame") {
                    // Tsung's default.
                    None => Some(true),
                    Some(f) => match f.value.as_str() {
                        "binary" => Some(true),
                        "text" => Some(false),
                        v => {
                            let pos = f.pos;
                            self.error(pos, format!("frame=\"{v}\": expected text or binary"));
                            None
                        }
                    },
                };
                // Tsung strips the spaces around the text (not the newlines).
                let text = el.text.trim_matches(' ');
                let pos = el.text_pos.unwrap_or(el.pos);
                let data = self.subst(text, pos, subst);
                let (Some(reply), Some(binary), Some(data)) = (reply, binary, data) else {
                    return Produced::Nothing;
                };
                self.act();
                out.push(Step::Ws(Ws {
                    name: "ws:send".into(),
                    action: WsAction::Message {
                        binary,
                        data,
                        reply,
                    },
                }));
                // The reply message is kept for a following extract or match.
                if reply {
                    Produced::Readable
                } else {
                    Produced::Unreadable
                }
            }
            "close" => {
                self.check_attrs(el, &["type", "ack"]);
                self.no_text(el);
                self.ignored(el, "ack", "a close waits for the server's close");
                self.act();
                self.sess.connected = false;
                out.push(Step::Ws(Ws {
                    name: "ws:close".into(),
                    action: WsAction::Close,
                }));
                Produced::Unreadable
            }
            other => {
                self.error(
                    ty_pos,
                    format!("type=\"{other}\": expected connect, message or close"),
                );
                Produced::Nothing
            }
        }
    }
}

/// Tsung's node options for `pubsub:create` (`data="[{'pubsub#access_model','open'}, ...]."`,
/// an Erlang term) as the data-form fields it writes: `<field var='F'><value>V</value></field>`,
/// a list value giving one `<value>` each. `None` when the text is not such a term.
fn erlang_fields(data: &str) -> Option<String> {
    /// An atom, quoted or bare, at the start of `s`: its text and the rest.
    fn atom(s: &str) -> Option<(String, &str)> {
        let s = s.trim_start();
        if let Some(r) = s.strip_prefix('\'') {
            let end = r.find('\'')?;
            return Some((r[..end].to_string(), &r[end + 1..]));
        }
        let end = s
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '@'))
            .unwrap_or(s.len());
        (end > 0 && s.starts_with(|c: char| c.is_ascii_lowercase()))
            .then(|| (s[..end].to_string(), &s[end..]))
    }
    fn punct(s: &str, c: char) -> Option<&str> {
        s.trim_start().strip_prefix(c)
    }
    let esc = |v: &str| {
        v.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('\'', "&apos;")
    };
    let mut rest = punct(data, '[')?;
    let mut out = String::new();
    if let Some(r) = punct(rest, ']') {
        rest = r;
    } else {
        loop {
            rest = punct(rest, '{')?;
            let (field, r) = atom(rest)?;
            rest = punct(r, ',')?;
            let mut values = Vec::new();
            if let Some(mut r) = punct(rest, '[') {
                loop {
                    let (v, r2) = atom(r)?;
                    values.push(v);
                    match punct(r2, ',') {
                        Some(r3) => r = r3,
                        None => {
                            r = punct(r2, ']')?;
                            break;
                        }
                    }
                }
                rest = r;
            } else {
                let (v, r) = atom(rest)?;
                values.push(v);
                rest = r;
            }
            rest = punct(rest, '}')?;
            out.push_str(&format!("<field var='{}'>", esc(&field)));
            for v in values {
                out.push_str(&format!("<value>{}</value>", esc(&v)));
            }
            out.push_str("</field>");
            match punct(rest, ',') {
                Some(r) => rest = r,
                None => {
                    rest = punct(rest, ']')?;
                    break;
                }
            }
        }
    }
    punct(rest, '.')?.trim().is_empty().then_some(out)
}

fn sasl(anonymous: bool) -> &'static str {
    if anonymous {
        "SASL ANONYMOUS"
    } else {
        "SASL PLAIN"
    }
}

fn pg_who(s: &PgSpec) -> String {
    let mut t = format!("user '{}' on database '{}'", s.user, s.database);
    if s.password.is_none() {
        t.push_str(" without a password");
    }
    t
}

fn ws_who(s: &WsSpec) -> String {
    let mut t = format!("path '{}'", s.path);
    if let Some(p) = &s.subprotocol {
        t.push_str(&format!(", subprotocols '{p}'"));
    }
    if let Some(o) = &s.origin {
        t.push_str(&format!(", origin '{o}'"));
    }
    t
}
