//! Plain types of a validated scenario. Everything here has passed validation: weights are
//! positive, sessions are non-empty, every `${var}` is defined before use, includes are inlined.
//!
//! Units: durations are `Duration`; rates are arrivals per second (`f64`).

use headroom_core::Distribution;
use std::time::Duration;

/// A whole scenario file.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// Optional human name (`name:`).
    pub name: Option<String>,
    pub servers: Vec<Server>,
    pub load: Load,
    pub sessions: Vec<Session>,
    pub thresholds: Vec<Threshold>,
    /// Connection settings of the servers' protocol (`LinkSpec::Plain` for HTTP and raw).
    pub link: LinkSpec,
    /// How HTTP users behave: cookies, redirects (`cookies:`, `follow:`).
    pub http: HttpBehaviour,
    /// The directory `file` steps work under (`files: {root}`, absolute); `None`: no
    /// `files:` section, and no `file` steps.
    pub file_root: Option<String>,
}

impl Scenario {
    /// The request and transaction names that get figures (the protocol's handshake, a SURGE
    /// session's `page` and `object`, each step's name), in first-use order without repeats: what
    /// a threshold may name. The compile gives the same names (a test checks).
    pub fn metric_names(&self) -> Vec<&str> {
        /// Names in first-use order, and a set to skip repeats (a HAR may hold 70,000 steps).
        #[derive(Default)]
        struct Names<'a> {
            list: Vec<&'a str>,
            seen: std::collections::HashSet<&'a str>,
        }
        impl<'a> Names<'a> {
            fn push(&mut self, n: &'a str) {
                if self.seen.insert(n) {
                    self.list.push(n);
                }
            }
            fn walk(&mut self, steps: &'a [Step]) {
                for s in steps {
                    match s {
                        Step::Request(r) => self.push(&r.name),
                        Step::Pipeline(list) => list.iter().for_each(|r| self.push(&r.name)),
                        Step::Send(x) => self.push(&x.name),
                        Step::Xmpp(x) => self.push(&x.name),
                        Step::Sql(q) => self.push(&q.name),
                        Step::Ws(x) => self.push(&x.name),
                        Step::File(f) => self.push(&f.name),
                        Step::Loop(l) => self.walk(&l.steps),
                        Step::Transaction { name, steps } => {
                            self.push(name);
                            self.walk(steps);
                        }
                        _ => {}
                    }
                }
            }
        }
        let mut n = Names::default();
        if let Some(h) = self.link.handshake_name() {
            n.push(h);
        }
        for s in &self.sessions {
            if s.surge.is_some() {
                n.push("page");
                n.push("object");
            }
            n.walk(&s.steps);
        }
        n.list
    }
}

/// How an HTTP user behaves beyond the requests it is told to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpBehaviour {
    /// Keep a cookie jar per user (`cookies:`, default true, as Tsung and k6): store what
    /// `Set-Cookie` says, send what matches. The jar is emptied when a session begins.
    pub cookies: bool,
    /// Redirects followed per request at most (`follow:`, default 0 as wrk); a longer chain
    /// counts as `redirect_limit`.
    pub follow: u32,
}

impl Default for HttpBehaviour {
    fn default() -> Self {
        HttpBehaviour {
            cookies: true,
            follow: 0,
        }
    }
}

/// A target server.
#[derive(Debug, Clone, PartialEq)]
pub struct Server {
    pub host: String,
    pub port: u16,
    pub protocol: Protocol,
    /// TLS on the connections (`tls: true` or a map); `None` is plain TCP.
    pub tls: Option<ServerTls>,
    /// `http: 2`: HTTP/2 (over TLS by ALPN, or h2c by prior knowledge without `tls`).
    pub http2: bool,
}

/// A server's `tls:` settings. Command-line TLS flags (`-k`, `--cacert`, ...) add to these.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ServerTls {
    /// Accept any certificate.
    pub insecure: bool,
    /// PEM files, relative to the scenario file.
    pub cacert: Option<String>,
    pub cert: Option<String>,
    pub key: Option<String>,
    pub min: Option<headroom_core::TlsVersion>,
    pub max: Option<headroom_core::TlsVersion>,
    /// Session resumption (on unless `false`).
    pub resume: Option<bool>,
    /// Name sent as SNI and checked against the certificate (default: the server's host).
    pub server_name: Option<String>,
    /// XMPP: STARTTLS on the plain port instead of TLS from the first byte.
    pub starttls: bool,
    /// PostgreSQL: `sslmode` (`require` unless given).
    pub sslmode: Option<PgSslMode>,
}

/// PostgreSQL's `sslmode`, as libpq has it (`disable` is a server without `tls:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PgSslMode {
    /// TLS if the server accepts it, plain text if not; the certificate is not checked.
    Prefer,
    /// TLS or nothing; the certificate is not checked.
    Require,
    /// TLS, with the chain and the host name checked.
    VerifyFull,
}

impl PgSslMode {
    pub fn as_str(self) -> &'static str {
        match self {
            PgSslMode::Prefer => "prefer",
            PgSslMode::Require => "require",
            PgSslMode::VerifyFull => "verify-full",
        }
    }
}

/// What the scenario's connections speak; it decides which steps a session may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// HTTP/1.1: `request` steps.
    #[default]
    Http,
    /// Raw TCP: `send` steps with an `expect`.
    Raw,
    /// XMPP client streams: `xmpp` steps; settings in the `xmpp:` section.
    Xmpp,
    /// PostgreSQL frontend: `sql` steps; settings in the `pgsql:` section.
    Pgsql,
    /// WebSocket client: `ws` steps; settings in the `websocket:` section.
    WebSocket,
    /// MQTT client: `mqtt` steps; settings in the `mqtt:` section (optional).
    Mqtt,
    /// LDAP v3 client: `ldap` steps; no settings section (a bind is a step).
    Ldap,
    /// MySQL/MariaDB client: `sql` steps; settings in the `mysql:` section.
    Mysql,
    /// AMQP 0-9-1 client: `amqp` steps; settings in the `amqp:` section (optional).
    Amqp,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Http => "http",
            Protocol::Raw => "raw",
            Protocol::Xmpp => "xmpp",
            Protocol::Pgsql => "pgsql",
            Protocol::WebSocket => "websocket",
            Protocol::Mqtt => "mqtt",
            Protocol::Ldap => "ldap",
            Protocol::Mysql => "mysql",
            Protocol::Amqp => "amqp",
        }
    }
}

// Per-protocol connection settings (the scenario's `xmpp:`, `pgsql:` or `websocket:` section)
// and the protocol actions are the engine's own types.
pub use headroom_core::session::{
    AmqpAction, AmqpSpec, LdapAction, LdapMod, LdapScope, LinkSpec, MqttAction, MqttConnect,
    MqttPayload, MqttSpec, MqttWill, MysqlSpec, PgSpec, WsAction, WsSpec, XmppAck, XmppAction,
    XmppDest, XmppLogin, XmppSpec,
};

/// An `xmpp:` step.
#[derive(Debug, Clone, PartialEq)]
pub struct Xmpp {
    /// Metric name; defaults to `xmpp:TYPE` (`xmpp:chat`).
    pub name: String,
    pub action: XmppAction<String>,
    pub ack: XmppAck,
}

/// A `sql:` step.
#[derive(Debug, Clone, PartialEq)]
pub struct Sql {
    /// Metric name; defaults to the first 40 characters of the query.
    pub name: String,
    pub query: String,
    pub params: Vec<String>,
    pub prepare: bool,
}

/// A `ws:` step.
#[derive(Debug, Clone, PartialEq)]
pub struct Ws {
    /// Metric name; defaults to `ws:send`, `ws:ping`, `ws:close`.
    pub name: String,
    pub action: WsAction<String>,
}

/// An `mqtt:` step.
#[derive(Debug, Clone, PartialEq)]
pub struct Mqtt {
    /// Metric name; defaults to `mqtt:TYPE` (`mqtt:publish`).
    pub name: String,
    pub action: MqttAction<String>,
}

/// An `ldap:` step.
#[derive(Debug, Clone, PartialEq)]
pub struct Ldap {
    /// Metric name; defaults to `ldap:TYPE` (`ldap:search`).
    pub name: String,
    pub action: LdapAction<String>,
}

/// An `amqp:` step.
#[derive(Debug, Clone, PartialEq)]
pub struct Amqp {
    /// Metric name; defaults to `amqp:TYPE` (`amqp:publish`).
    pub name: String,
    pub action: AmqpAction<String>,
}

/// Open arrival phases, closed user populations and/or users started once. At least one is
/// non-empty.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Load {
    /// Run one after another.
    pub phases: Vec<Phase>,
    /// Closed populations: each user runs sessions back to back.
    pub users: Vec<Users>,
    /// Users that each run one named session once, starting at a time of their own, then
    /// leave (Tsung's `<user session start_time>`), at most [`MAX_ONCE`].
    pub once: Vec<Once>,
    /// Stages of the closed population (`stages:`): each moves the number of users linearly
    /// to `users` over `duration`, from 0 at the start (k6's ramping-vus). Empty: every user of
    /// `users` starts at once.
    pub stages: Vec<Stage>,
}

/// Most `once` users of a scenario: each is a user started on its own.
pub const MAX_ONCE: usize = 10_000;

/// A user that runs `session` once, starting `at` into the run, then leaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Once {
    pub session: String,
    pub at: Duration,
}

/// One stage of a closed population's ramp.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stage {
    pub duration: Duration,
    /// Users at the end of the stage.
    pub users: u64,
}

/// An open arrival phase: new users (each running one session) arrive at `rate`.
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    pub duration: Duration,
    pub rate: Rate,
    pub arrival: Arrival,
    /// Cap on users alive at once in this phase (arrivals beyond it are dropped and counted).
    pub max_users: Option<u64>,
}

/// Arrival rate in users per second. `interarrival: 2s` is stored as `Fixed(0.5)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    Fixed(f64),
    /// Linear from `from` at the phase start to `to` at its end.
    Ramp {
        from: f64,
        to: f64,
    },
}

/// How arrivals are spaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Arrival {
    /// Exponential inter-arrival times (the default, as in Tsung).
    #[default]
    Poisson,
    /// Evenly spaced.
    Constant,
}

/// A closed population of `count` users.
#[derive(Debug, Clone, PartialEq)]
pub struct Users {
    pub count: u64,
    /// Session every user runs; `None` draws from the weighted mix each time.
    pub session: Option<String>,
}

/// A named, weighted sequence of steps.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub name: String,
    /// Relative weight in the mix; > 0 and finite.
    pub weight: f64,
    /// Empty for a SURGE session.
    pub steps: Vec<Step>,
    /// A generated SURGE session (`surge: {...}`) instead of written steps.
    pub surge: Option<Box<headroom_core::surge::SurgeParams>>,
}

/// One step of a session.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Request(Request),
    /// HTTP pipelining (`pipeline:`, httperf's burst): the requests are written back to back on
    /// the user's connection, then their replies are read in order. Each is timed and counted
    /// under its own name; an `extract` or `match` after it reads the last reply. Holds at least
    /// one request, at most `MAX_PIPELINE`.
    Pipeline(Vec<Request>),
    /// Raw TCP: send bytes, wait for the reply `expect` describes.
    Send(Send),
    Xmpp(Xmpp),
    Sql(Sql),
    Ws(Ws),
    Mqtt(Mqtt),
    Ldap(Ldap),
    Amqp(Amqp),
    Think(Distribution),
    Loop(Loop),
    Transaction {
        name: String,
        steps: Vec<Step>,
    },
    Connect,
    Close,
    Set {
        var: String,
        source: SetSource,
    },
    Extract(Extract),
    Match(Match),
    Cookie(CookieStep),
    /// A local file operation (Tsung's fs plugin) under [`Scenario::file_root`].
    File(FileStep),
}

/// A `file` step: its metric name (default `file:TYPE`) and what it does; paths may hold
/// `${var}` references and are relative to the file root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStep {
    pub name: String,
    pub action: FileAction<String>,
}

pub use headroom_core::session::FileAction;

/// Most bytes one `file` step reads or writes (a `write`'s size, a chunk's): 64 MiB.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// Most requests in one `pipeline` step. httperf sets no limit; this bounds what one step makes
/// a user write before it reads anything (a server's pipelining depth is usually far lower).
pub const MAX_PIPELINE: usize = 256;

/// A raw TCP exchange. `data` may hold `${var}` references.
#[derive(Debug, Clone, PartialEq)]
pub struct Send {
    /// Metric name (default: `send N` for the N-th send of the session, 1-based).
    pub name: String,
    pub data: String,
    pub expect: headroom_core::session::ExpectSpec,
}

/// An HTTP request. `path`, header values and `body` may hold `${var}` references.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Name used for per-request figures; defaults to `METHOD path`.
    pub name: String,
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<String>,
    /// Credentials for the server's challenge (`auth:`): Basic is sent with the request,
    /// Digest answers the server's 401 and then goes with every request of the user.
    pub auth: Option<Auth>,
    /// OAuth 1.0 signing (`oauth:`): an `Authorization: OAuth ...` signed per request.
    pub oauth: Option<Box<OAuth>>,
}

/// OAuth 1.0 credentials of a request (RFC 5849); each may hold `${var}` references. An empty
/// `token` sends no `oauth_token`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuth {
    pub consumer_key: String,
    pub consumer_secret: String,
    pub token: String,
    pub token_secret: String,
    pub method: OAuthMethod,
}

pub use headroom_core::session::OAuthMethod;

/// HTTP authentication of a request. `user` and `password` may hold `${var}` references.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Auth {
    pub scheme: AuthScheme,
    pub user: String,
    pub password: String,
}

pub use headroom_core::AuthScheme;

/// A scenario step that changes the user's cookie jar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CookieStep {
    /// Put a cookie in the jar, as if the server had set it (`value` may hold `${var}`).
    /// `domain` defaults to the server's host (host-only), `path` to `/`.
    Set {
        name: String,
        value: String,
        domain: Option<String>,
        path: Option<String>,
    },
    /// Empty the jar.
    Clear,
}

/// A loop: `count` iterations, or while/until a variable is truthy (set, non-empty, not `0` or
/// `false`). With both, `count` caps the conditional loop.
#[derive(Debug, Clone, PartialEq)]
pub struct Loop {
    pub count: Option<u64>,
    pub condition: Option<Condition>,
    /// A variable holding the pass's number (`counter:`), as Tsung's `<for var>`.
    pub counter: Option<LoopCounter>,
    pub steps: Vec<Step>,
}

/// A loop's counter variable: `start` in the first pass, then `step` more in each (Tsung's
/// `<for from incr var>`). Set before each pass's steps; after the loop it keeps the last
/// pass's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopCounter {
    pub var: String,
    pub start: i64,
    pub step: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    While(String),
    Until(String),
}

/// Where a `set` takes its value from.
#[derive(Debug, Clone, PartialEq)]
pub enum SetSource {
    Value(String),
    /// A CSV feeder: `file` relative to the scenario file, zero-based `column`.
    Csv {
        file: String,
        column: usize,
        order: CsvOrder,
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
    /// An integer expression over the session's variables (`headroom_core::expr`'s syntax),
    /// kept as written; checked when parsed, compiled to a tree.
    Expr(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CsvOrder {
    /// The next row in turn (the run's workers take rows in turn).
    #[default]
    Sequential,
    Random,
    /// The row this user's previous `csv` set of the same file read: several columns of one
    /// row into several variables.
    SameRow,
}

/// Takes a value from the last reply into `var`.
#[derive(Debug, Clone, PartialEq)]
pub struct Extract {
    pub var: String,
    pub from: ExtractFrom,
    /// Value when nothing matches; without it the variable is left unset.
    pub default: Option<String>,
}

/// Where an extract looks: `Regex` (first capture group, or the whole match without a group),
/// `JsonPointer` (RFC 6901, into the reply body) or `Header` (by case-insensitive name). The
/// engine's own type: the model and the compiled workload share it.
pub use headroom_core::session::ExtractOp as ExtractFrom;

/// A check on the last reply; every firing is counted under its name.
#[derive(Debug, Clone, PartialEq)]
pub struct Match {
    pub name: String,
    pub status: Option<u16>,
    /// Substring of the body.
    pub body: Option<String>,
    /// Fire when the condition holds (`true`, the default) or when it does not.
    pub when_matched: bool,
    pub action: MatchAction,
    /// For `loop`: most times the preceding request is repeated.
    pub max_loops: Option<u64>,
}

/// What a firing match does (shared with the engine): continue, abort the session, restart it,
/// or repeat the request before it.
pub use headroom_core::session::MatchAction;

/// A CI threshold such as `p99(login) < 200ms`.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// The key as written, for reporting.
    pub text: String,
    pub metric: Metric,
    pub op: CmpOp,
    pub value: ThresholdValue,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Metric {
    /// Latency percentile (0 < p <= 100) of a request or transaction name, or all with `None`.
    Percentile {
        p: f64,
        name: Option<String>,
    },
    Mean {
        name: Option<String>,
    },
    /// Failed / total requests.
    ErrorRate,
    /// Requests per second over the run.
    Rps,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ThresholdValue {
    Duration(Duration),
    /// A fraction: `1%` is 0.01.
    Ratio(f64),
    Number(f64),
}
