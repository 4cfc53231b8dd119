//! A compiled session workload: what each virtual user does, flattened into ops.
//!
//! The scenario compiler (`headroom-scenario`) turns a validated scenario into a [`Workload`];
//! the engine interprets it. Everything a user needs at run time is resolved here once: variable
//! names become slot numbers, request and transaction names become metric ids, loops become
//! jumps, CSV files are read. The interpreter therefore does no lookups by name and, for requests
//! without variables, no encoding either.
//!
//! Ops of one session, for `loop {count: 2, steps: [request A]}` then `request B`:
//!
//! ```text
//! 0 LoopInit{slot 0}
//! 1 LoopTest{slot 0, count 2, exit 4}
//! 2 Request A
//! 3 Jump 1
//! 4 Request B
//! ```

use std::sync::Arc;
use std::time::Duration;

use crate::surge::SurgeParams;
use crate::{ArrivalProcess, Distribution};

/// Metric id of a request or transaction name (index into [`Workload::names`]).
pub type NameId = u16;
/// Variable slot (index into [`Workload::vars`]); defined in [`crate::expr`], whose compiled
/// expressions name variables by it.
pub use crate::expr::VarId;

/// Slot of the builtin `${user_id}`.
pub const VAR_USER_ID: VarId = 0;
/// Slot of the builtin `${session}` (the session's name).
pub const VAR_SESSION: VarId = 1;

/// Everything the engine needs to run sessions.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    pub sessions: Vec<SessionProgram>,
    /// Cumulative normalised weights, same order as `sessions`; the last is 1.0.
    pub cumulative: Vec<f64>,
    /// Closed populations in order: `(users, session)`; `None` draws from the mix each time.
    /// User `g` (0-based, over all populations) belongs to the population whose range holds it.
    pub populations: Vec<(u32, Option<usize>)>,
    /// Users that each run one session once from their own start, then leave (`load.once`).
    pub once: Vec<OnceUser>,
    /// Names of per-name figures: requests and transactions.
    pub names: Vec<MetricName>,
    /// Names of `match` checks, index = the match's id.
    pub matches: Vec<String>,
    /// Variable names, index = slot; slots 0 and 1 are the builtins.
    pub vars: Vec<String>,
    /// CSV feeders, shared by every worker.
    pub feeders: Vec<Arc<Feeder>>,
    /// The protocol above TCP and its per-connection setup (login, startup, upgrade).
    pub link: LinkSpec,
    /// Metric id the per-connection setup is timed under (`login`, `startup`, `handshake`);
    /// `None` for HTTP and raw TCP, which have none.
    pub handshake: Option<NameId>,
    /// The directory `file` steps work under (absolute); `None` when the scenario has none.
    pub file_root: Option<String>,
}

/// A user that runs session `session` (an index of [`Workload::sessions`]) once, starting `at`
/// into the run, then leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OnceUser {
    pub at: Duration,
    pub session: usize,
}

/// Global ids of `once` users: bit 41 above their index (closed users count from 0, arrived
/// ones carry bit 40).
pub const ONCE_ID_BIT: u64 = 1 << 41;

/// A CSV feeder: the file's text in one buffer and where each row starts, so a file of short
/// rows costs its own bytes plus 4 per row (a `String` per field and a `Vec` per row cost ~80
/// bytes a row). Rows are the file's lines that are not blank; fields are split on `,` and
/// trimmed when read ([`Feeder::field`]), which allocates nothing.
///
/// Invariant: every entry of `rows` is the byte offset of a line start in `text`, and
/// `text.len() <= u32::MAX` (checked by [`Feeder::new`]).
#[derive(Clone, PartialEq, Eq)]
pub struct Feeder {
    text: Box<str>,
    rows: Box<[u32]>,
}

impl Feeder {
    /// The feeder of `text`; `None` when it has no row that is not blank, or is 4 GiB or more
    /// (offsets are `u32`: data files are far smaller, see `headroom_scenario::MAX_DATA_BYTES`).
    pub fn new(text: String) -> Option<Feeder> {
        if u32::try_from(text.len()).is_err() {
            return None;
        }
        // Sized once (one slot a line), so the offsets never hold twice their need while growing.
        let lines = text.bytes().filter(|&b| b == b'\n').count() + 1;
        let mut rows = Vec::with_capacity(lines);
        let mut start = 0usize;
        for line in text.split_inclusive('\n') {
            if !line.trim().is_empty() {
                rows.push(start as u32);
            }
            start += line.len();
        }
        if rows.is_empty() {
            return None;
        }
        Some(Feeder {
            text: text.into_boxed_str(),
            rows: rows.into_boxed_slice(),
        })
    }

    /// Number of rows (at least 1).
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Always false: a feeder has a row (see [`Feeder::new`]).
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Field `column` (0-based) of row `row`, trimmed; `""` past the row's last field. Reads the
    /// row up to that field; allocates nothing.
    ///
    /// # Panics
    /// When `row >= self.len()`.
    pub fn field(&self, row: usize, column: usize) -> &str {
        let rest = &self.text[self.rows[row] as usize..];
        let line = &rest[..rest.find('\n').unwrap_or(rest.len())];
        line.split(',').nth(column).map_or("", str::trim)
    }

    /// Bytes held: the text and the row offsets.
    pub fn heap_bytes(&self) -> usize {
        self.text.len() + self.rows.len() * std::mem::size_of::<u32>()
    }
}

/// Short: the sizes, and the text when it is small (a plan's debug form is compared in tests).
impl std::fmt::Debug for Feeder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Feeder");
        d.field("rows", &self.rows.len())
            .field("bytes", &self.text.len());
        if self.text.len() <= 256 {
            d.field("text", &self.text);
        }
        d.finish()
    }
}

impl Workload {
    /// The session index for a uniform variate `u` in [0, 1).
    pub fn draw(&self, u: f64) -> usize {
        let i = self.cumulative.partition_point(|&c| c <= u);
        i.min(self.sessions.len().saturating_sub(1))
    }

    /// The fixed session of closed user `g`, or `None` when it draws from the mix.
    pub fn population_session(&self, g: u64) -> Option<usize> {
        let mut start = 0u64;
        for &(n, s) in &self.populations {
            start += u64::from(n);
            if g < start {
                return s;
            }
        }
        None
    }

    /// Some session has a `file` step.
    pub fn has_file_ops(&self) -> bool {
        self.sessions.iter().any(|s| match &s.body {
            SessionBody::Ops { ops, .. } => ops.iter().any(|o| matches!(o, Op::File(_))),
            SessionBody::Surge { .. } => false,
        })
    }

    /// Some `set` computes an expression (its evaluations and failures are counted).
    pub fn has_expr_sets(&self) -> bool {
        self.sessions.iter().any(|s| match &s.body {
            SessionBody::Ops { ops, .. } => ops.iter().any(|o| {
                matches!(
                    o,
                    Op::Set {
                        source: SetOp::Expr(_),
                        ..
                    }
                )
            }),
            SessionBody::Surge { .. } => false,
        })
    }

    /// Some step needs a connection to the server (everything but think, loops, transactions,
    /// variables, cookies and file steps; SURGE sessions send requests).
    pub fn uses_network(&self) -> bool {
        self.sessions.iter().any(|s| match &s.body {
            SessionBody::Ops { ops, .. } => ops.iter().any(|o| {
                !matches!(
                    o,
                    Op::Think(_)
                        | Op::LoopInit { .. }
                        | Op::LoopTest { .. }
                        | Op::Jump(_)
                        | Op::TxBegin(_)
                        | Op::TxEnd(_)
                        | Op::Set { .. }
                        | Op::Cookie(_)
                        | Op::File(_)
                )
            }),
            SessionBody::Surge { .. } => true,
        })
    }

    /// Total closed users.
    pub fn closed_users(&self) -> u32 {
        self.populations.iter().map(|p| p.0).sum()
    }
}

/// A per-name figure: a request name or a transaction name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricName {
    pub name: String,
    pub kind: NameKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameKind {
    Request,
    Transaction,
}

/// One session of the mix.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionProgram {
    pub name: String,
    pub body: SessionBody,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SessionBody {
    /// Written steps, flattened.
    Ops {
        ops: Vec<Op>,
        /// Loop counter slots used by `ops`.
        loops: usize,
    },
    /// Generated SURGE pages (base file + pipelined embedded objects, OFF times between pages).
    Surge {
        params: Box<SurgeParams>,
        /// Metric ids of the base page requests and of the embedded object requests.
        page: NameId,
        object: NameId,
    },
}

/// One instruction of a session.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    Request(RequestOp),
    /// Raw TCP: send bytes, then wait for a reply as `expect` says.
    Send(SendOp),
    Think(Distribution),
    /// Reset loop counter `slot` to 0.
    LoopInit {
        slot: u16,
    },
    /// Leave the loop (jump to `exit`) when the counter reached `count` or the condition fails;
    /// otherwise count one iteration, set the loop's counter variable if it has one, and go on.
    LoopTest {
        slot: u16,
        count: Option<u64>,
        condition: Option<LoopCondition>,
        counter: Option<LoopCounterOp>,
        exit: usize,
    },
    Jump(usize),
    TxBegin(NameId),
    TxEnd(NameId),
    /// An XMPP request on the logged-in stream.
    Xmpp(XmppOp),
    /// A PostgreSQL statement on the started connection.
    Sql(SqlOp),
    /// A WebSocket message, ping or close on the upgraded connection.
    Ws(WsOp),
    /// An MQTT publish, subscribe, wait or disconnect on the connected client.
    Mqtt(MqttOp),
    /// An LDAP bind, search, add, modify, delete or unbind on the connection.
    Ldap(LdapOp),
    /// An AMQP method, publish or wait on the connection's channels.
    Amqp(AmqpOp),
    /// A local file operation under the workload's file root (no connection).
    File(FileOp),
    Connect,
    Close,
    Set {
        var: VarId,
        source: SetOp,
    },
    Extract {
        var: VarId,
        from: ExtractOp,
        default: Option<Template>,
    },
    Match(MatchOp),
    /// Change the user's cookie jar.
    Cookie(CookieOp),
}

/// A change to the user's cookie jar.
#[derive(Debug, Clone, PartialEq)]
pub enum CookieOp {
    /// Store a cookie as if the server had set it. `domain` `None` is host-only for the
    /// server's host; `path` defaults to `/`.
    Set {
        name: String,
        value: Template,
        domain: Option<String>,
        path: Option<String>,
    },
    /// Empty the jar.
    Clear,
}

/// Credentials of a request (templates: `${user}` works).
#[derive(Debug, Clone, PartialEq)]
pub struct AuthOp {
    pub scheme: crate::AuthScheme,
    pub user: Template,
    pub password: Template,
}

/// OAuth 1.0 (RFC 5849) credentials of a request, as templates: the request goes with an
/// `Authorization: OAuth ...` signed for it (a fresh nonce and timestamp each time).
#[derive(Debug, Clone, PartialEq)]
pub struct OAuthOp {
    pub consumer_key: Template,
    pub consumer_secret: Template,
    /// Expands to nothing: no `oauth_token`.
    pub token: Template,
    pub token_secret: Template,
    pub method: OAuthMethod,
}

/// How an OAuth request is signed (`oauth_signature_method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OAuthMethod {
    #[default]
    HmacSha1,
    /// The secrets in the clear (RFC 5849 §3.4.4).
    Plaintext,
}

impl OAuthMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            OAuthMethod::HmacSha1 => "HMAC-SHA1",
            OAuthMethod::Plaintext => "PLAINTEXT",
        }
    }

    pub fn parse(s: &str) -> Option<OAuthMethod> {
        match s {
            "HMAC-SHA1" => Some(OAuthMethod::HmacSha1),
            "PLAINTEXT" => Some(OAuthMethod::Plaintext),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoopCondition {
    pub var: VarId,
    /// `true` for `while` (go on while truthy), `false` for `until`.
    pub while_true: bool,
}

/// A loop's counter variable: pass `n` (0-based) sets `var` to `start + n * step`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoopCounterOp {
    pub var: VarId,
    pub start: i64,
    pub step: i64,
}

impl LoopCounterOp {
    /// The value of pass `n` (0-based), saturating at the ends of `i64` (a loop without a
    /// count may run past them).
    pub fn value(&self, n: u64) -> i64 {
        let v = i128::from(self.start) + i128::from(n) * i128::from(self.step);
        v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
    }
}

/// An HTTP request with `${var}` templates.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestOp {
    pub name: NameId,
    pub method: String,
    pub path: Template,
    pub headers: Vec<(String, Template)>,
    pub body: Option<Template>,
    /// Keep the reply's bytes: a later `extract` or `match` reads them.
    pub capture: bool,
    /// Credentials for the server's challenge.
    pub auth: Option<AuthOp>,
    /// An OAuth 1.0 signature, computed per request (its own `Authorization`).
    pub oauth: Option<Box<OAuthOp>>,
    /// Written in one batch with the next op, which is a request too (a `pipeline` step): the
    /// requests go back to back on the connection and their replies are read, in order, once
    /// the batch's last request (the one with `false` here) is written.
    pub pipeline_next: bool,
}

/// Raw TCP: bytes to send (a template) and how the reply ends.
#[derive(Debug, Clone, PartialEq)]
pub struct SendOp {
    pub name: NameId,
    pub data: Template,
    pub expect: ExpectSpec,
    /// Keep the reply's bytes: a later `extract` or `match` reads them.
    pub capture: bool,
}

/// How a raw reply ends (compiled by `headroom-proto::raw` at run start).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExpectSpec {
    /// Do not wait: the step is done once its bytes are written (Tsung's `ack="no_ack"`).
    Nothing,
    /// Exactly this many bytes.
    Bytes(u64),
    /// Up to and including this delimiter.
    Delimiter(Vec<u8>),
    /// A length header: `width` bytes after `offset`, counting itself (`includes_header`) or not,
    /// plus `adjust`.
    Length {
        offset: u32,
        width: u8,
        big_endian: bool,
        includes_header: bool,
        adjust: i64,
    },
    /// The shortest prefix holding a match, searched in the first `window` bytes.
    Regex { pattern: String, window: usize },
}

/// The protocol every connection of a run speaks above TCP, with what it needs to set a
/// connection up. HTTP and raw TCP need nothing; the others run a setup exchange right after
/// the TCP connect (XMPP login, PostgreSQL startup and authentication, WebSocket upgrade),
/// timed under [`Workload::handshake`], before the step that needed the connection goes on.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum LinkSpec {
    /// HTTP/1.1 or raw TCP.
    #[default]
    Plain,
    Xmpp(XmppSpec),
    Pgsql(PgSpec),
    WebSocket(WsSpec),
    Mqtt(MqttSpec),
    /// LDAP v3: nothing to set up (a bind is a step of its own).
    Ldap,
    /// MySQL/MariaDB: the login (after the server's greeting); `sql` steps as for PostgreSQL.
    Mysql(MysqlSpec),
    /// AMQP 0-9-1: the connection's login (SASL PLAIN) and virtual host.
    Amqp(AmqpSpec),
}

impl LinkSpec {
    /// The name the setup is timed under, or `None`.
    pub fn handshake_name(&self) -> Option<&'static str> {
        match self {
            LinkSpec::Plain => None,
            LinkSpec::Xmpp(_) => Some("xmpp:login"),
            LinkSpec::Pgsql(_) => Some("pgsql:startup"),
            LinkSpec::WebSocket(_) => Some("ws:handshake"),
            LinkSpec::Mqtt(_) => Some("mqtt:connect"),
            LinkSpec::Ldap => None,
            LinkSpec::Mysql(_) => Some("mysql:login"),
            LinkSpec::Amqp(_) => Some("amqp:connect"),
        }
    }
}

/// XMPP accounts and login. User `N` (from `first..=last`) logs in as
/// `{username}{N}@{domain}` with password `{password}{N}`, as Tsung's jabber plugin does;
/// with [`XmppSpec::login`], each connection logs in with the user and password its session's
/// variables hold at the connect instead (Tsung's `<xmpp_authenticate>` over a CSV file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XmppSpec {
    pub domain: String,
    pub username: String,
    pub password: String,
    pub first: u64,
    pub last: u64,
    /// The login's user and password from the session's variables; `None`: numbered accounts.
    /// Such users are nobody's destination (a `to` needs numbered accounts).
    pub login: Option<XmppLogin>,
    /// Resource to bind; `None` lets the server pick one.
    pub resource: Option<String>,
    /// SASL ANONYMOUS instead of PLAIN (no accounts needed).
    pub anonymous: bool,
    /// In-band registration (XEP-0077) before logging in; an existing account counts as done.
    pub register: bool,
    /// Over BOSH (XEP-0124/0206) at this HTTP path instead of a TCP stream.
    pub bosh: Option<String>,
}

/// An XMPP login from the session's variables: `user` and `password` as written (`${name}`
/// holes), and the same compiled over the workload's variable slots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XmppLogin {
    pub user: String,
    pub password: String,
    /// `[user, password]` over the variable slots: set by the scenario compiler (empty
    /// before); the engine reads only these.
    pub templates: [Template; 2],
}

impl XmppLogin {
    /// A login of these texts, not compiled yet.
    pub fn new(user: &str, password: &str) -> XmppLogin {
        XmppLogin {
            user: user.to_string(),
            password: password.to_string(),
            templates: Default::default(),
        }
    }
}

/// PostgreSQL startup: database, role and password (cleartext, MD5 or SCRAM-SHA-256, as the
/// server asks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgSpec {
    pub database: String,
    pub user: String,
    pub password: Option<String>,
}

/// MySQL login: user, password (mysql_native_password or caching_sha2_password, as the server
/// asks) and the default database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MysqlSpec {
    pub user: String,
    pub password: Option<String>,
    pub database: Option<String>,
}

/// AMQP 0-9-1 login: user, password and virtual host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AmqpSpec {
    pub user: String,
    pub password: String,
    pub vhost: String,
}

/// An AMQP request on one of the connection's channels (numbered from 1, opened by a step). A
/// channel is a template: its number once the variables are in, 1 to 65535 (anything else fails
/// the step unsent).
#[derive(Debug, Clone, PartialEq)]
pub struct AmqpOp {
    pub name: NameId,
    pub action: AmqpAction<Template>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum AmqpAction<T> {
    /// Channel.Open; done at its Open-Ok. `None`: the number Tsung's client picks, one below
    /// the lowest channel open (1 when none is), else one above the highest, else the lowest
    /// free.
    ChannelOpen { channel: Option<T> },
    /// Channel.Close; done at its Close-Ok.
    ChannelClose { channel: T },
    ExchangeDeclare {
        channel: T,
        exchange: T,
        kind: String,
        durable: bool,
    },
    QueueDeclare {
        channel: T,
        queue: T,
        durable: bool,
        exclusive: bool,
        auto_delete: bool,
    },
    QueueBind {
        channel: T,
        queue: T,
        exchange: T,
        routing_key: T,
    },
    /// Confirm.Select: the broker confirms each later publish of the channel.
    ConfirmSelect { channel: T },
    /// Basic.Qos: at most `prefetch` unacknowledged deliveries to the channel's consumers.
    Qos { channel: T, prefetch: u16 },
    /// Basic.Consume; with `ack` every delivery is acknowledged (Basic.Ack) as it arrives.
    Consume { channel: T, queue: T, ack: bool },
    /// Basic.Publish; done once written (confirms are waited for by `wait_confirms`).
    Publish {
        channel: T,
        exchange: T,
        routing_key: T,
        persistent: bool,
        payload: MqttPayload<T>,
    },
    /// Done once every publish on a confirming channel of the connection is confirmed; fails
    /// (a timeout) when `timeout` passes first.
    WaitConfirms { timeout: Duration },
    /// Done once the connection has received `messages` deliveries in all; fails (a timeout)
    /// when `timeout` passes first.
    Wait { messages: u64, timeout: Duration },
    /// Connection.Close; done at its Close-Ok, then the connection closes.
    Close,
}

impl<T> AmqpAction<T> {
    /// The step's type as written (`publish`, `queue_declare`...).
    pub fn type_name(&self) -> &'static str {
        match self {
            AmqpAction::ChannelOpen { .. } => "channel_open",
            AmqpAction::ChannelClose { .. } => "channel_close",
            AmqpAction::ExchangeDeclare { .. } => "exchange_declare",
            AmqpAction::QueueDeclare { .. } => "queue_declare",
            AmqpAction::QueueBind { .. } => "queue_bind",
            AmqpAction::ConfirmSelect { .. } => "confirm_select",
            AmqpAction::Qos { .. } => "qos",
            AmqpAction::Consume { .. } => "consume",
            AmqpAction::Publish { .. } => "publish",
            AmqpAction::WaitConfirms { .. } => "wait_confirms",
            AmqpAction::Wait { .. } => "wait",
            AmqpAction::Close => "close",
        }
    }

    pub fn map_text<U, E>(self, mut f: impl FnMut(T) -> Result<U, E>) -> Result<AmqpAction<U>, E> {
        Ok(match self {
            AmqpAction::ChannelOpen { channel } => AmqpAction::ChannelOpen {
                channel: channel.map(&mut f).transpose()?,
            },
            AmqpAction::ChannelClose { channel } => AmqpAction::ChannelClose {
                channel: f(channel)?,
            },
            AmqpAction::ExchangeDeclare {
                channel,
                exchange,
                kind,
                durable,
            } => AmqpAction::ExchangeDeclare {
                channel: f(channel)?,
                exchange: f(exchange)?,
                kind,
                durable,
            },
            AmqpAction::QueueDeclare {
                channel,
                queue,
                durable,
                exclusive,
                auto_delete,
            } => AmqpAction::QueueDeclare {
                channel: f(channel)?,
                queue: f(queue)?,
                durable,
                exclusive,
                auto_delete,
            },
            AmqpAction::QueueBind {
                channel,
                queue,
                exchange,
                routing_key,
            } => AmqpAction::QueueBind {
                channel: f(channel)?,
                queue: f(queue)?,
                exchange: f(exchange)?,
                routing_key: f(routing_key)?,
            },
            AmqpAction::ConfirmSelect { channel } => AmqpAction::ConfirmSelect {
                channel: f(channel)?,
            },
            AmqpAction::Qos { channel, prefetch } => AmqpAction::Qos {
                channel: f(channel)?,
                prefetch,
            },
            AmqpAction::Consume {
                channel,
                queue,
                ack,
            } => AmqpAction::Consume {
                channel: f(channel)?,
                queue: f(queue)?,
                ack,
            },
            AmqpAction::Publish {
                channel,
                exchange,
                routing_key,
                persistent,
                payload,
            } => AmqpAction::Publish {
                channel: f(channel)?,
                exchange: f(exchange)?,
                routing_key: f(routing_key)?,
                persistent,
                payload: match payload {
                    MqttPayload::Size(n) => MqttPayload::Size(n),
                    MqttPayload::Text(t) => MqttPayload::Text(f(t)?),
                },
            },
            AmqpAction::WaitConfirms { timeout } => AmqpAction::WaitConfirms { timeout },
            AmqpAction::Wait { messages, timeout } => AmqpAction::Wait { messages, timeout },
            AmqpAction::Close => AmqpAction::Close,
        })
    }
}

/// WebSocket upgrade request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WsSpec {
    /// Request target of the upgrade, `/` by default.
    pub path: String,
    /// `Sec-WebSocket-Protocol` to ask for.
    pub subprotocol: Option<String>,
    /// `Origin` header to send.
    pub origin: Option<String>,
}

/// MQTT: the protocol version every connection speaks, and the CONNECT it sends unless its
/// session's `connect` step says otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MqttSpec {
    /// MQTT 5 (protocol level 5) instead of 3.1.1 (level 4).
    pub v5: bool,
    pub connect: MqttConnect,
    /// Metric id of the publish-to-receive latency (`mqtt:delivery`): set by the compiler.
    pub delivery: NameId,
}

/// What a CONNECT says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MqttConnect {
    /// Client identifier prefix: user N connects as `{client_id}{N}` (unique per user, as
    /// brokers need: a second connection with the same id takes the first one over). Empty
    /// (the default): `headroom-{pid}-{N}`, unique across runs at once on one machine too.
    pub client_id: String,
    /// Start a new session (3.1.1's clean session, 5's clean start).
    pub clean_start: bool,
    /// Seconds; 0 turns keep-alive off. The client sends PINGREQ when it has sent nothing for
    /// that long (the broker waits one and a half), so an idle subscriber is not disconnected.
    pub keep_alive: u16,
    pub username: Option<String>,
    pub password: Option<String>,
    pub will: Option<MqttWill>,
    /// MQTT 5's Session Expiry Interval, seconds (0: the session ends with the connection).
    pub session_expiry: u32,
}

impl Default for MqttConnect {
    fn default() -> Self {
        MqttConnect {
            client_id: String::new(),
            clean_start: true,
            keep_alive: 60,
            username: None,
            password: None,
            will: None,
            session_expiry: 0,
        }
    }
}

/// The message the broker publishes when the client goes away without a DISCONNECT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MqttWill {
    pub topic: String,
    pub payload: String,
    pub qos: u8,
    pub retain: bool,
}

/// An MQTT request.
#[derive(Debug, Clone, PartialEq)]
pub struct MqttOp {
    pub name: NameId,
    pub action: MqttAction<Template>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum MqttAction<T> {
    /// Connect (TCP, then CONNECT and its CONNACK, timed as `mqtt:connect`) with these
    /// options; nothing when the user is connected already.
    Connect(Box<MqttConnect>),
    /// PUBLISH; done once written (QoS 0), at its PUBACK (1) or its PUBCOMP (2).
    Publish {
        topic: T,
        qos: u8,
        retain: bool,
        payload: MqttPayload<T>,
    },
    /// SUBSCRIBE to one filter (wildcards `+` and `#`); done at its SUBACK.
    Subscribe { filter: T, qos: u8 },
    /// UNSUBSCRIBE; done at its UNSUBACK.
    Unsubscribe { filter: T },
    /// PINGREQ; done at its PINGRESP.
    Ping,
    /// Done once the connection has received `messages` messages in all, failed (a timeout)
    /// when `timeout` passes first. (Waiting a time without a count is a think time.)
    Wait { messages: u64, timeout: Duration },
    /// DISCONNECT, then the connection closes.
    Disconnect,
}

impl<T> MqttAction<T> {
    /// The step's type as written (`publish`, `subscribe`...).
    pub fn type_name(&self) -> &'static str {
        match self {
            MqttAction::Connect(_) => "connect",
            MqttAction::Publish { .. } => "publish",
            MqttAction::Subscribe { .. } => "subscribe",
            MqttAction::Unsubscribe { .. } => "unsubscribe",
            MqttAction::Ping => "ping",
            MqttAction::Wait { .. } => "wait",
            MqttAction::Disconnect => "disconnect",
        }
    }

    pub fn map_text<U, E>(self, mut f: impl FnMut(T) -> Result<U, E>) -> Result<MqttAction<U>, E> {
        Ok(match self {
            MqttAction::Connect(c) => MqttAction::Connect(c),
            MqttAction::Publish {
                topic,
                qos,
                retain,
                payload,
            } => MqttAction::Publish {
                topic: f(topic)?,
                qos,
                retain,
                payload: match payload {
                    MqttPayload::Size(n) => MqttPayload::Size(n),
                    MqttPayload::Text(t) => MqttPayload::Text(f(t)?),
                },
            },
            MqttAction::Subscribe { filter, qos } => MqttAction::Subscribe {
                filter: f(filter)?,
                qos,
            },
            MqttAction::Unsubscribe { filter } => MqttAction::Unsubscribe { filter: f(filter)? },
            MqttAction::Ping => MqttAction::Ping,
            MqttAction::Wait { messages, timeout } => MqttAction::Wait { messages, timeout },
            MqttAction::Disconnect => MqttAction::Disconnect,
        })
    }
}

/// What a PUBLISH carries: `size` bytes (the first 16 are the send time, which the receiving
/// users turn into publish-to-receive latency), or a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MqttPayload<T> {
    Size(u32),
    Text(T),
}

/// An LDAP request; done at its final response (a search at its SearchResultDone, its entries
/// counted on the way). A result other than `success` (and, for a compare, `compareTrue` or
/// `compareFalse`) is an error reply of the step.
#[derive(Debug, Clone, PartialEq)]
pub struct LdapOp {
    pub name: NameId,
    pub action: LdapAction<Template>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum LdapAction<T> {
    /// A simple bind.
    Bind {
        dn: T,
        password: T,
    },
    /// A search: an RFC 4515 filter, the attributes to return (none: all user attributes).
    Search {
        base: T,
        filter: T,
        scope: LdapScope,
        attrs: Vec<String>,
        size_limit: u32,
    },
    Add {
        dn: T,
        attrs: Vec<(String, Vec<T>)>,
    },
    Modify {
        dn: T,
        changes: Vec<(LdapMod, String, Vec<T>)>,
    },
    Delete {
        dn: T,
    },
    /// Unbind; the server closes the connection.
    Unbind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LdapScope {
    Base,
    One,
    Sub,
}

impl LdapScope {
    pub fn as_str(self) -> &'static str {
        match self {
            LdapScope::Base => "base",
            LdapScope::One => "one",
            LdapScope::Sub => "sub",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LdapMod {
    Add,
    Delete,
    Replace,
}

impl LdapMod {
    pub fn as_str(self) -> &'static str {
        match self {
            LdapMod::Add => "add",
            LdapMod::Delete => "delete",
            LdapMod::Replace => "replace",
        }
    }
}

impl<T> LdapAction<T> {
    /// The step's type as written (`bind`, `search`...).
    pub fn type_name(&self) -> &'static str {
        match self {
            LdapAction::Bind { .. } => "bind",
            LdapAction::Search { .. } => "search",
            LdapAction::Add { .. } => "add",
            LdapAction::Modify { .. } => "modify",
            LdapAction::Delete { .. } => "delete",
            LdapAction::Unbind => "unbind",
        }
    }

    pub fn map_text<U, E>(self, mut f: impl FnMut(T) -> Result<U, E>) -> Result<LdapAction<U>, E> {
        fn all<T, U, E>(v: Vec<T>, f: &mut impl FnMut(T) -> Result<U, E>) -> Result<Vec<U>, E> {
            v.into_iter().map(f).collect()
        }
        Ok(match self {
            LdapAction::Bind { dn, password } => LdapAction::Bind {
                dn: f(dn)?,
                password: f(password)?,
            },
            LdapAction::Search {
                base,
                filter,
                scope,
                attrs,
                size_limit,
            } => LdapAction::Search {
                base: f(base)?,
                filter: f(filter)?,
                scope,
                attrs,
                size_limit,
            },
            LdapAction::Add { dn, attrs } => {
                let dn = f(dn)?;
                let mut out = Vec::with_capacity(attrs.len());
                for (a, v) in attrs {
                    out.push((a, all(v, &mut f)?));
                }
                LdapAction::Add { dn, attrs: out }
            }
            LdapAction::Modify { dn, changes } => {
                let dn = f(dn)?;
                let mut out = Vec::with_capacity(changes.len());
                for (m, a, v) in changes {
                    out.push((m, a, all(v, &mut f)?));
                }
                LdapAction::Modify { dn, changes: out }
            }
            LdapAction::Delete { dn } => LdapAction::Delete { dn: f(dn)? },
            LdapAction::Unbind => LdapAction::Unbind,
        })
    }
}

/// An XMPP request: what to send, and what ends it.
#[derive(Debug, Clone, PartialEq)]
pub struct XmppOp {
    pub name: NameId,
    pub action: XmppAction<Template>,
    pub ack: XmppAck,
}

/// When an XMPP request is done (Tsung's `ack`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XmppAck {
    /// Once written.
    NoAck,
    /// At the first stanza received after it (Tsung's `local`).
    Local,
    /// At its own reply: the iq result or error with its id, the server's close for a close;
    /// messages and presences have none and are done once written. (Tsung's `global` is a
    /// barrier across users; headroom reads it as "wait for the matching reply".)
    #[default]
    Reply,
}

impl XmppAck {
    pub fn as_str(self) -> &'static str {
        match self {
            XmppAck::NoAck => "no_ack",
            XmppAck::Local => "local",
            XmppAck::Reply => "reply",
        }
    }
}

/// Who an XMPP chat, directed presence or roster change goes to (Tsung's `destination`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XmppDest {
    /// An online user other than the sender, round-robin.
    #[default]
    Online,
    /// A user not connected: the server stores the message.
    Offline,
    /// Any user of the range, uniformly.
    Random,
    /// Always the first user: a hot spot.
    Unique,
    /// The destination of this user's previous chat.
    Previous,
}

impl XmppDest {
    pub fn as_str(self) -> &'static str {
        match self {
            XmppDest::Online => "online",
            XmppDest::Offline => "offline",
            XmppDest::Random => "random",
            XmppDest::Unique => "unique",
            XmppDest::Previous => "previous",
        }
    }

    pub fn parse(s: &str) -> Option<XmppDest> {
        Some(match s {
            "online" => XmppDest::Online,
            "offline" => XmppDest::Offline,
            "random" => XmppDest::Random,
            "unique" => XmppDest::Unique,
            "previous" => XmppDest::Previous,
            _ => return None,
        })
    }
}

/// What an XMPP request sends; `T` is the text type (`String` in a scenario, [`Template`] here).
#[derive(Debug, Clone, PartialEq)]
pub enum XmppAction<T> {
    /// `<presence/>`: the user becomes online (and receives its contacts' presence).
    PresenceInitial,
    /// `<presence type='unavailable'/>`.
    PresenceFinal,
    /// A presence broadcast to the user's contacts.
    PresenceBroadcast {
        show: Option<String>,
        status: Option<String>,
    },
    /// A presence to one user.
    PresenceDirected {
        to: XmppDest,
        show: Option<String>,
        status: Option<String>,
    },
    /// A subscription request to one user.
    PresenceSubscribe { to: XmppDest },
    /// `iq:roster:get`.
    RosterGet,
    /// Add a user to the roster.
    RosterAdd { to: XmppDest },
    /// Rename the roster entry of a user.
    RosterRename { to: XmppDest, name: String },
    /// Remove a user from the roster.
    RosterRemove { to: XmppDest },
    /// A chat message: a body of exactly `size` bytes, or the text `text`.
    Chat {
        to: XmppDest,
        size: usize,
        text: Option<T>,
    },
    /// Bytes sent as they are.
    Raw(T),
    /// `</stream:stream>`: the reply is the server's close, then the connection is closed.
    Close,
}

impl<T> XmppAction<T> {
    /// The step type as written in a scenario (`presence:initial`, `chat`, ...).
    pub fn type_name(&self) -> &'static str {
        match self {
            XmppAction::PresenceInitial => "presence:initial",
            XmppAction::PresenceFinal => "presence:final",
            XmppAction::PresenceBroadcast { .. } => "presence:broadcast",
            XmppAction::PresenceDirected { .. } => "presence:directed",
            XmppAction::PresenceSubscribe { .. } => "presence:subscribe",
            XmppAction::RosterGet => "roster:get",
            XmppAction::RosterAdd { .. } => "roster:add",
            XmppAction::RosterRename { .. } => "roster:rename",
            XmppAction::RosterRemove { .. } => "roster:remove",
            XmppAction::Chat { .. } => "chat",
            XmppAction::Raw(_) => "raw",
            XmppAction::Close => "close",
        }
    }

    /// The other user the action goes to, for the types that have one.
    pub fn dest(&self) -> Option<XmppDest> {
        match self {
            XmppAction::PresenceDirected { to, .. }
            | XmppAction::PresenceSubscribe { to }
            | XmppAction::RosterAdd { to }
            | XmppAction::RosterRename { to, .. }
            | XmppAction::RosterRemove { to }
            | XmppAction::Chat { to, .. } => Some(*to),
            XmppAction::PresenceInitial
            | XmppAction::PresenceFinal
            | XmppAction::PresenceBroadcast { .. }
            | XmppAction::RosterGet
            | XmppAction::Raw(_)
            | XmppAction::Close => None,
        }
    }

    /// The same action with its text mapped (scenario strings to templates).
    pub fn map_text<U, E>(self, mut f: impl FnMut(T) -> Result<U, E>) -> Result<XmppAction<U>, E> {
        Ok(match self {
            XmppAction::PresenceInitial => XmppAction::PresenceInitial,
            XmppAction::PresenceFinal => XmppAction::PresenceFinal,
            XmppAction::PresenceBroadcast { show, status } => {
                XmppAction::PresenceBroadcast { show, status }
            }
            XmppAction::PresenceDirected { to, show, status } => {
                XmppAction::PresenceDirected { to, show, status }
            }
            XmppAction::PresenceSubscribe { to } => XmppAction::PresenceSubscribe { to },
            XmppAction::RosterGet => XmppAction::RosterGet,
            XmppAction::RosterAdd { to } => XmppAction::RosterAdd { to },
            XmppAction::RosterRename { to, name } => XmppAction::RosterRename { to, name },
            XmppAction::RosterRemove { to } => XmppAction::RosterRemove { to },
            XmppAction::Chat { to, size, text } => XmppAction::Chat {
                to,
                size,
                text: text.map(&mut f).transpose()?,
            },
            XmppAction::Raw(t) => XmppAction::Raw(f(t)?),
            XmppAction::Close => XmppAction::Close,
        })
    }
}

/// A PostgreSQL statement. Without parameters and not prepared it is a simple query; with
/// parameters it goes through the extended protocol (parse, bind, execute, sync); `prepare`
/// parses it once per connection under a statement name and then only binds and executes.
#[derive(Debug, Clone, PartialEq)]
pub struct SqlOp {
    pub name: NameId,
    pub query: Template,
    pub params: Vec<Template>,
    pub prepare: bool,
    /// Keep the result rows as text for a later `extract`/`match`.
    pub capture: bool,
}

/// A WebSocket request.
#[derive(Debug, Clone, PartialEq)]
pub struct WsOp {
    pub name: NameId,
    pub action: WsAction<Template>,
    /// Keep the reply message's payload: a later `extract` or `match` reads it.
    pub capture: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum WsAction<T> {
    /// A text or binary message; `reply` waits for the next message from the server.
    Message { binary: bool, data: T, reply: bool },
    /// A ping; done at its pong.
    Ping,
    /// A close frame; done at the server's close frame, then the connection is closed.
    Close,
}

impl<T> WsAction<T> {
    pub fn map_text<U, E>(self, f: impl FnOnce(T) -> Result<U, E>) -> Result<WsAction<U>, E> {
        Ok(match self {
            WsAction::Message {
                binary,
                data,
                reply,
            } => WsAction::Message {
                binary,
                data: f(data)?,
                reply,
            },
            WsAction::Ping => WsAction::Ping,
            WsAction::Close => WsAction::Close,
        })
    }
}

/// Text with `${var}` holes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Template(pub Vec<Piece>);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Lit(String),
    Var(VarId),
}

impl Template {
    /// A template without holes.
    pub fn literal(s: &str) -> Template {
        Template(vec![Piece::Lit(s.to_string())])
    }

    /// The text when the template has no variables.
    pub fn as_literal(&self) -> Option<String> {
        let mut s = String::new();
        for p in &self.0 {
            match p {
                Piece::Lit(l) => s.push_str(l),
                Piece::Var(_) => return None,
            }
        }
        Some(s)
    }

    /// Append the expansion to `out`; an unset variable expands to nothing.
    pub fn expand_into(&self, vars: &[String], out: &mut String) {
        for p in &self.0 {
            match p {
                Piece::Lit(l) => out.push_str(l),
                Piece::Var(v) => {
                    if let Some(val) = vars.get(*v as usize) {
                        out.push_str(val)
                    }
                }
            }
        }
    }
}

/// The AMQP channel number `t` says once its variables are in: ASCII digits only, 1 to 65535;
/// `None` for anything else (empty, a sign, a space, 0, too large). Reads the pieces in place,
/// allocating nothing.
pub fn amqp_channel(t: &Template, vars: &[String]) -> Option<u16> {
    let mut n: u32 = 0;
    let mut digits = 0usize;
    for p in &t.0 {
        let text = match p {
            Piece::Lit(l) => l.as_str(),
            Piece::Var(v) => vars.get(*v as usize).map_or("", String::as_str),
        };
        for b in text.bytes() {
            if !b.is_ascii_digit() {
                return None;
            }
            n = n * 10 + u32::from(b - b'0');
            digits += 1;
            if n > u32::from(u16::MAX) {
                return None;
            }
        }
    }
    match u16::try_from(n) {
        Ok(c) if digits > 0 && c >= 1 => Some(c),
        _ => None,
    }
}

/// A `file` step: Tsung's fs plugin, run by the user on the local file system under the
/// workload's [`Workload::file_root`], timed under `name`.
#[derive(Debug, Clone, PartialEq)]
pub struct FileOp {
    pub name: NameId,
    pub action: FileAction<Template>,
}

/// What a `file` step does. Paths are relative to the file root; sizes are bytes (bounded by
/// the scenario parser).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileAction<T> {
    MakeDir(T),
    RemoveDir(T),
    Delete(T),
    /// Read the file's metadata.
    Stat(T),
    /// Read the whole file.
    Read(T),
    /// Create (or truncate) the file and write `size` bytes.
    Write {
        path: T,
        size: u64,
    },
    /// Open the file for the chunk steps that follow (closing the user's open one first).
    Open {
        path: T,
        write: bool,
    },
    /// Read up to this many bytes from the open file, from where the last chunk ended.
    ReadChunk(u64),
    /// Write this many bytes to the open file, after the last chunk.
    WriteChunk(u64),
    /// Close the open file.
    Close,
    /// Make `link` a symbolic link to `target` (both under the root).
    Symlink {
        target: T,
        link: T,
    },
}

impl<T> FileAction<T> {
    /// The step's type, as the scenario writes it.
    pub fn type_name(&self) -> &'static str {
        match self {
            FileAction::MakeDir(_) => "mkdir",
            FileAction::RemoveDir(_) => "rmdir",
            FileAction::Delete(_) => "delete",
            FileAction::Stat(_) => "stat",
            FileAction::Read(_) => "read",
            FileAction::Write { .. } => "write",
            FileAction::Open { .. } => "open",
            FileAction::ReadChunk(_) => "read_chunk",
            FileAction::WriteChunk(_) => "write_chunk",
            FileAction::Close => "close",
            FileAction::Symlink { .. } => "symlink",
        }
    }

    /// The same action with its paths mapped (scenario strings to templates).
    pub fn map_path<U, E>(self, mut f: impl FnMut(T) -> Result<U, E>) -> Result<FileAction<U>, E> {
        Ok(match self {
            FileAction::MakeDir(p) => FileAction::MakeDir(f(p)?),
            FileAction::RemoveDir(p) => FileAction::RemoveDir(f(p)?),
            FileAction::Delete(p) => FileAction::Delete(f(p)?),
            FileAction::Stat(p) => FileAction::Stat(f(p)?),
            FileAction::Read(p) => FileAction::Read(f(p)?),
            FileAction::Write { path, size } => FileAction::Write {
                path: f(path)?,
                size,
            },
            FileAction::Open { path, write } => FileAction::Open {
                path: f(path)?,
                write,
            },
            FileAction::ReadChunk(n) => FileAction::ReadChunk(n),
            FileAction::WriteChunk(n) => FileAction::WriteChunk(n),
            FileAction::Close => FileAction::Close,
            FileAction::Symlink { target, link } => FileAction::Symlink {
                target: f(target)?,
                link: f(link)?,
            },
        })
    }
}

/// Why `path` cannot be a path under a file root, if it cannot: empty, absolute, holding a
/// NUL byte or a `..` component. The scenario parser asks it of the path as written; the
/// engine of the path with its variables in, before it touches the file system.
pub fn file_path_problem(path: &str) -> Option<&'static str> {
    if path.is_empty() {
        return Some("expected a path under the files root");
    }
    if path.starts_with('/') {
        return Some(
            "an absolute path: file steps work under the files root, give it relative to it",
        );
    }
    if path.contains('\0') {
        return Some("a path cannot hold a NUL byte");
    }
    if path.split('/').any(|c| c == "..") {
        return Some("'..' would leave the files root");
    }
    None
}

/// Which row of its feeder a `csv` set reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CsvRow {
    /// The next row in turn. The run's workers take rows in turn (worker `k` of `n` reads rows
    /// `k`, `k + n`, ...), so users of different workers do not read the same row until the
    /// file wraps.
    Next,
    /// A row drawn at random.
    Random,
    /// The row this user's previous `csv` set of the same feeder read (the next one when it
    /// read none yet): several columns of one row into several variables.
    Same,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SetOp {
    Value(Template),
    /// Column `column` of feeder `feeder`, of the row `row` says.
    Csv {
        feeder: usize,
        column: usize,
        row: CsvRow,
    },
    RandomNumber {
        min: i64,
        max: i64,
    },
    RandomString {
        length: usize,
    },
    Sequence {
        start: i64,
        step: i64,
    },
    UserId,
    /// An integer computed from the session's variables (`set: {expr}`); a failure (a
    /// variable that holds no integer, an overflow, a division by zero) ends the session.
    Expr(crate::expr::IntExpr<VarId>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExtractOp {
    Regex(String),
    JsonPointer(String),
    Header(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct MatchOp {
    /// Index into [`Workload::matches`].
    pub id: u16,
    pub status: Option<u16>,
    pub body: Option<String>,
    pub when_matched: bool,
    pub action: MatchAction,
    pub max_loops: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchAction {
    Continue,
    Abort,
    Restart,
    /// Repeat the preceding request.
    Loop,
}

/// One open arrival phase of a session workload.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ArrivalPhase {
    pub duration: Duration,
    /// Users per second at the phase start and at its end (equal for a fixed rate).
    pub from: f64,
    pub to: f64,
    pub process: ArrivalProcess,
    /// Most users alive at once from this phase; arrivals beyond it are dropped and counted.
    pub max_users: Option<u64>,
}

impl ArrivalPhase {
    /// Rate at `t` seconds into the phase.
    pub fn rate_at(&self, t: f64) -> f64 {
        let d = self.duration.as_secs_f64();
        if d <= 0.0 {
            return self.to;
        }
        self.from + (self.to - self.from) * (t / d).clamp(0.0, 1.0)
    }

    /// Highest rate over the phase.
    pub fn peak(&self) -> f64 {
        self.from.max(self.to)
    }

    /// Expected arrivals over the phase.
    pub fn expected_arrivals(&self) -> f64 {
        (self.from + self.to) / 2.0 * self.duration.as_secs_f64()
    }
}

/// Truthiness of a variable in loop conditions: set, non-empty, not `0` or `false`.
pub fn truthy(v: &str) -> bool {
    !(v.is_empty() || v == "0" || v.eq_ignore_ascii_case("false"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w() -> Workload {
        Workload {
            sessions: vec![
                SessionProgram {
                    name: "a".into(),
                    body: SessionBody::Ops {
                        ops: vec![],
                        loops: 0,
                    },
                };
                3
            ],
            cumulative: vec![0.2, 0.8, 1.0],
            populations: vec![(2, Some(1)), (3, None)],
            once: vec![],
            names: vec![],
            matches: vec![],
            vars: vec!["user_id".into(), "session".into()],
            feeders: vec![],
            link: LinkSpec::Plain,
            handshake: None,
            file_root: None,
        }
    }

    /// The feeder reads as the old `Vec<Vec<String>>` did: non-blank lines, split on `,`, trimmed.
    #[test]
    fn a_feeder_reads_as_rows_of_trimmed_fields() {
        let text = "ann, 1 ,x\r\n\n  \nbob,2\r\n,\ncid";
        let old: Vec<Vec<String>> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| l.split(',').map(|c| c.trim().to_string()).collect())
            .collect();
        let f = Feeder::new(text.to_string()).unwrap();
        assert_eq!(f.len(), old.len());
        for (r, row) in old.iter().enumerate() {
            for c in 0..4 {
                let want = row.get(c).map_or("", String::as_str);
                assert_eq!(f.field(r, c), want, "row {r} column {c}");
            }
        }
        assert_eq!(f.field(0, 1), "1");
        assert_eq!(f.field(3, 0), "cid");
        assert_eq!(f.heap_bytes(), text.len() + 4 * 4);
        assert!(Feeder::new(" \n\r\n".into()).is_none());
        assert!(Feeder::new(String::new()).is_none());
    }

    #[test]
    fn draw_follows_cumulative_weights() {
        let w = w();
        assert_eq!(w.draw(0.0), 0);
        assert_eq!(w.draw(0.19), 0);
        assert_eq!(w.draw(0.2), 1);
        assert_eq!(w.draw(0.79), 1);
        assert_eq!(w.draw(0.8), 2);
        assert_eq!(w.draw(0.999), 2);
        assert_eq!(w.draw(1.0), 2);
    }

    #[test]
    fn populations_map_users() {
        let w = w();
        assert_eq!(w.population_session(0), Some(1));
        assert_eq!(w.population_session(1), Some(1));
        assert_eq!(w.population_session(2), None);
        assert_eq!(w.closed_users(), 5);
    }

    #[test]
    fn templates_expand() {
        let t = Template(vec![
            Piece::Lit("/u/".into()),
            Piece::Var(2),
            Piece::Lit("?s=".into()),
            Piece::Var(1),
        ]);
        let mut out = String::new();
        t.expand_into(&["7".into(), "web".into(), "ann".into()], &mut out);
        assert_eq!(out, "/u/ann?s=web");
        assert_eq!(t.as_literal(), None);
        assert_eq!(Template::literal("/x").as_literal().as_deref(), Some("/x"));
    }

    #[test]
    fn amqp_channels_are_numbers_from_1_to_65535() {
        let vars: Vec<String> = [
            "7", "web", "12", "0", "", "65535", "70000", " 3", "-1", "00",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let var = |v| Template(vec![Piece::Var(v)]);
        assert_eq!(amqp_channel(&var(0), &vars), Some(7));
        assert_eq!(amqp_channel(&var(2), &vars), Some(12));
        assert_eq!(amqp_channel(&var(5), &vars), Some(65535));
        // A number split over pieces: "1" then "2".
        let split = Template(vec![Piece::Lit("1".into()), Piece::Var(0)]);
        assert_eq!(amqp_channel(&split, &vars), Some(17));
        assert_eq!(amqp_channel(&Template::literal("1"), &vars), Some(1));
        for bad in [1, 3, 4, 6, 7, 8, 9, 99] {
            assert_eq!(amqp_channel(&var(bad), &vars), None, "{bad}");
        }
        assert_eq!(
            amqp_channel(&Template::literal("99999999999999999999"), &vars),
            None
        );
        assert_eq!(amqp_channel(&Template::default(), &vars), None);
    }

    #[test]
    fn ramps_interpolate() {
        let p = ArrivalPhase {
            duration: Duration::from_secs(10),
            from: 1.0,
            to: 21.0,
            process: ArrivalProcess::Poisson,
            max_users: None,
        };
        assert_eq!(p.rate_at(0.0), 1.0);
        assert_eq!(p.rate_at(5.0), 11.0);
        assert_eq!(p.rate_at(20.0), 21.0);
        assert_eq!(p.expected_arrivals(), 110.0);
        assert!(truthy("x") && !truthy("0") && !truthy("") && !truthy("False"));
    }
}
