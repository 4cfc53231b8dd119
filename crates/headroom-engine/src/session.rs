//! The session interpreter: what a scenario user does next.
//!
//! A [`SessionState`] walks a session's ops ([`headroom_core::session::Op`]) until it reaches one
//! that needs the network or the clock, and returns it as an [`Action`]: send a request (already
//! encoded into the state's own buffer), think, connect, close, or finish. The worker does the
//! I/O and calls back in when it is done. Nothing here touches a socket, so every rule of the
//! step language is unit-tested without one.
//!
//! Per request the interpreter allocates nothing in steady state: requests without `${var}` are
//! encoded once per run ([`Program`]) and copied; templated ones are expanded into buffers the
//! state keeps. Extracting (regex, JSON) allocates, and only runs when a scenario asks for it.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use headroom_core::expr::EvalError;
use headroom_core::session::{
    self, AmqpAction, AmqpOp, CsvRow, ExpectSpec, ExtractOp, LinkSpec, MatchAction, MqttAction,
    MqttConnect, MqttOp, NameId, NameKind, Op, SessionBody, SetOp, Workload, VAR_SESSION,
    VAR_USER_ID,
};
use headroom_core::surge::{Page, Zipf};
use headroom_core::ProtoCounter;
use headroom_metrics::{micros, Recorder};
use headroom_proto::http1::{Batch, Decoded, RawResponse, ResponseDecoder};
use headroom_proto::raw;
use rand::rngs::SmallRng;
use rand::Rng;

use crate::browser::{self, Browser, BrowserConfig};
use crate::link::{Link, LinkWait, XmppShared};

/// Ops run per `advance` call at most before yielding to the event loop, so a session of only
/// `set` steps in an endless loop cannot stall the worker.
const STEP_BUDGET: usize = 10_000;
/// Most protocol requests written in one send when each waits for nothing (an AMQP publish, an
/// MQTT publish at QoS 0): consecutive ones join one batch, one system call instead of one
/// each (issue 29: writes coalesced per loop turn). Bounded so one user's batch stays small:
/// its buffers stay the user's for the run (per user memory is measured against Tsung's), and
/// 32 requests a send already make the send's cost a small part of each request's.
const JOIN_REQUESTS: usize = 32;
/// Bytes a batch of joined requests grows to at most (its last request may take it past).
const JOIN_BYTES: usize = 4096;
/// Default most repetitions of a request by a `match` with `do: loop`.
const DEFAULT_MAX_LOOPS: u64 = 20;

/// A workload prepared for running: regexes compiled and static requests encoded, once.
pub(crate) struct Program {
    pub w: Arc<Workload>,
    /// Per session, per op: what was precomputed for it.
    extra: Vec<Vec<Extra>>,
    /// Per session: the Zipf popularity of a SURGE session.
    zipf: Vec<Option<Zipf>>,
    pub host: String,
    keepalive: bool,
    /// XMPP runs: who is connected and online, shared by every worker.
    pub xmpp: Option<XmppShared>,
    /// The connections speak TLS: OAuth signs `https://` URLs.
    https: bool,
    /// AMQP runs: the metric id of `amqp:delivery` (the publish-to-receive latency).
    amqp_delivery: usize,
}

enum Extra {
    None,
    /// A request without variables, encoded (with its parts).
    Encoded(Box<Batch>),
    Regex(regex::Regex),
    /// A raw send: its bytes when they have no variables, and its compiled reply matcher
    /// (`None`: expect nothing).
    Send(Option<Box<[u8]>>, Option<raw::Expect>),
    /// The statement name of a prepared `sql` step, `h{session}_{op}`, written once per run.
    Statement(Box<str>),
}

impl Program {
    pub fn new(w: Arc<Workload>, host: &str, keepalive: bool) -> Result<Program, String> {
        let mut extra = Vec::with_capacity(w.sessions.len());
        let mut zipf = Vec::with_capacity(w.sessions.len());
        for s in &w.sessions {
            let mut ex = Vec::new();
            match &s.body {
                SessionBody::Ops { ops, .. } => {
                    zipf.push(None);
                    for op in ops {
                        ex.push(match op {
                            Op::Request(r) => match static_request(r, host, keepalive) {
                                Some(b) => Extra::Encoded(b),
                                None => Extra::None,
                            },
                            Op::Send(x) => Extra::Send(
                                x.data
                                    .as_literal()
                                    .map(|d| d.into_bytes().into_boxed_slice()),
                                compile_expect(&x.expect)
                                    .map_err(|e| format!("session '{}': expect: {e}", s.name))?,
                            ),
                            Op::Extract {
                                from: ExtractOp::Regex(re),
                                ..
                            } => Extra::Regex(regex::Regex::new(re).map_err(|e| {
                                format!("session '{}': bad regex {re:?}: {e}", s.name)
                            })?),
                            Op::Ldap(headroom_core::session::LdapOp {
                                action: headroom_core::session::LdapAction::Search { filter, .. },
                                ..
                            }) => {
                                // A filter without variables is checked now, not per request.
                                if let Some(f) = filter.as_literal() {
                                    headroom_proto::ldap::Filter::parse(&f).map_err(|e| {
                                        format!("session '{}': ldap filter {f:?}: {e}", s.name)
                                    })?;
                                }
                                Extra::None
                            }
                            Op::Sql(q) if q.prepare => {
                                Extra::Statement(format!("h{}_{}", extra.len(), ex.len()).into())
                            }
                            _ => Extra::None,
                        });
                    }
                }
                SessionBody::Surge { params, .. } => {
                    params
                        .validate()
                        .map_err(|e| format!("session '{}': {e}", s.name))?;
                    zipf.push(Some(Zipf::new(params.files, params.zipf_exponent)));
                }
            }
            extra.push(ex);
        }
        let xmpp = match &w.link {
            LinkSpec::Xmpp(x) => Some(XmppShared {
                pool: std::sync::Mutex::new(
                    headroom_proto::xmpp::UserPool::new(x.first, x.last)
                        .map_err(|e| format!("xmpp users {}..{}: {e}", x.first, x.last))?,
                ),
            }),
            _ => None,
        };
        let amqp_delivery = w
            .names
            .iter()
            .position(|n| n.name == "amqp:delivery" && n.kind == NameKind::Transaction)
            .unwrap_or(usize::MAX);
        Ok(Program {
            w,
            extra,
            zipf,
            host: host.to_string(),
            keepalive,
            xmpp,
            https: false,
            amqp_delivery,
        })
    }

    /// The connections speak TLS (the URLs OAuth signs are `https://`).
    pub fn with_tls(mut self, tls: bool) -> Program {
        self.https = tls;
        self
    }

    /// The reply matcher of the raw send at `session`/`pc` (`None`: expect nothing).
    pub fn expect(&self, session: usize, pc: usize) -> Option<&raw::Expect> {
        match self.extra.get(session)?.get(pc)? {
            Extra::Send(_, e) => e.as_ref(),
            _ => None,
        }
    }

    pub fn names(&self) -> usize {
        self.w.names.len()
    }

    pub fn matches(&self) -> usize {
        self.w.matches.len()
    }
}

fn compile_expect(spec: &ExpectSpec) -> Result<Option<raw::Expect>, raw::ExpectError> {
    Ok(Some(match spec {
        ExpectSpec::Nothing => return Ok(None),
        ExpectSpec::Bytes(n) => raw::Expect::bytes(*n)?,
        ExpectSpec::Delimiter(d) => raw::Expect::delimiter(d)?,
        ExpectSpec::Regex { pattern, window } => raw::Expect::regex(pattern, *window)?,
        ExpectSpec::Length {
            offset,
            width,
            big_endian,
            includes_header,
            adjust,
        } => raw::Expect::length_prefix(raw::LengthPrefix {
            offset: *offset,
            width: *width,
            endian: if *big_endian {
                raw::Endian::Big
            } else {
                raw::Endian::Little
            },
            includes_header: *includes_header,
            adjust: *adjust,
        })?,
    }))
}

fn static_request(r: &session::RequestOp, host: &str, keepalive: bool) -> Option<Box<Batch>> {
    if r.auth.is_some() || r.oauth.is_some() {
        // Credentials are written per request (templates, Digest answers, OAuth signatures).
        return None;
    }
    let path = r.path.as_literal()?;
    let mut vals = Vec::with_capacity(r.headers.len());
    for (_, v) in &r.headers {
        vals.push(v.as_literal()?);
    }
    let body = match &r.body {
        Some(b) => b.as_literal()?,
        None => String::new(),
    };
    let mut out = Batch::new();
    let headers = r
        .headers
        .iter()
        .zip(vals.iter())
        .map(|((n, _), v)| (n.as_str(), v.as_str()));
    out.push(
        &r.method,
        &path,
        host,
        headers,
        &[],
        body.as_bytes(),
        keepalive,
    );
    Some(Box::new(out))
}

/// A user's OAuth buffers.
#[derive(Default)]
struct OAuthBuffers {
    signer: headroom_proto::oauth::Signer,
    texts: [String; 4],
    uri: String,
    value: Vec<u8>,
}

impl OAuthBuffers {
    /// Signs request `r` (its target `path`, header values `hvals` and `body` expanded) into
    /// `value`; empty when it has no `oauth`.
    #[allow(clippy::too_many_arguments)]
    fn sign(
        &mut self,
        prog: &Program,
        r: &session::RequestOp,
        path: &str,
        hvals: &[String],
        body: &str,
        vars: &[String],
        rng: &mut SmallRng,
    ) {
        use headroom_proto::oauth::{write_base_uri, Credentials, Method};
        self.value.clear();
        let Some(o) = r.oauth.as_deref() else {
            return;
        };
        let templates = [
            &o.consumer_key,
            &o.consumer_secret,
            &o.token,
            &o.token_secret,
        ];
        for (slot, t) in self.texts.iter_mut().zip(templates) {
            slot.clear();
            t.expand_into(vars, slot);
        }
        let (target, query) = path.split_once('?').unwrap_or((path, ""));
        let target = target.split('#').next().unwrap_or_default();
        let query = query.split('#').next().unwrap_or_default();
        self.uri.clear();
        write_base_uri(prog.https, &prog.host, target, &mut self.uri);
        // The body's parameters are signed when it is a form (RFC 5849 §3.4.1.3.1).
        let form = r
            .headers
            .iter()
            .zip(hvals)
            .any(|((n, _), v)| {
                n.eq_ignore_ascii_case("content-type")
                    && v.split(';').next().is_some_and(|t| {
                        t.trim()
                            .eq_ignore_ascii_case("application/x-www-form-urlencoded")
                    })
            })
            .then_some(body.as_bytes());
        const ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        let mut nonce = [0u8; 16];
        for b in &mut nonce {
            *b = ALNUM[rng.gen_range(0..ALNUM.len())];
        }
        let cred = Credentials {
            consumer_key: &self.texts[0],
            consumer_secret: &self.texts[1],
            token: &self.texts[2],
            token_secret: &self.texts[3],
            method: match o.method {
                session::OAuthMethod::HmacSha1 => Method::HmacSha1,
                session::OAuthMethod::Plaintext => Method::Plaintext,
            },
            // Tsung sends it.
            version: true,
        };
        self.signer.write_value(
            &r.method,
            &self.uri,
            query,
            form,
            &cred,
            std::str::from_utf8(&nonce).unwrap_or_default(),
            browser::unix_now(),
            &mut self.value,
        );
    }
}

/// What the worker must do next for a session user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Write `out` (holding `names.len()` requests back to back) and read as many replies.
    Send,
    /// Wait, then call `advance` again.
    Think(Duration),
    /// Open the connection (if not open), then call `advance` again.
    Connect,
    /// Close the connection, then call `advance` again.
    Close,
    /// Call `advance` again on a later loop turn (the step budget ran out).
    Yield,
    /// A step that needs no connection did its request (a file operation): it takes one of
    /// the run's requests (`-n`); call `advance` again on a later loop turn.
    Ran,
    /// The session ended (normally, or aborted by a failure or a `match`).
    Done { aborted: bool },
}

/// What ends the reply of the batch being sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Awaiting {
    /// HTTP responses, one per request of the batch.
    Http,
    /// A raw reply, as the matcher of the send op at (session, pc) says
    /// ([`Program::expect`]).
    Raw { session: usize, pc: usize },
    /// Nothing: the send is done once written.
    Nothing,
    /// The reply the connection's protocol link waits for ([`Link::wait`]).
    Link,
}

/// Where a SURGE session is in its current page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SurgeAt {
    Base,
    Embedded(usize),
}

/// One user's progress through its current session.
pub(crate) struct SessionState {
    pub session: usize,
    /// When the current session began (its duration is recorded when it ends).
    pub started: Instant,
    pc: usize,
    loops: Vec<u64>,
    /// Variable values by slot; unset is empty.
    vars: Vec<String>,
    /// Open transactions: name, start, whether a request inside failed.
    tx: Vec<(NameId, Instant, bool)>,
    /// Transactions whose end came inside a batch of joined requests: they end when the batch
    /// is written ([`SessionState::batch_written`]), as they would have without the join.
    tx_ends: Vec<NameId>,
    /// `out` holds the worker's join buffer (see [`Env::join_spare`]).
    borrowed: bool,
    /// The encoded requests of the current batch, with their parts (a raw send's or a link's
    /// bytes have none).
    pub out: Batch,
    /// Metric ids of the batch's requests, in order.
    pub names: Vec<NameId>,
    /// The batch is a HEAD request (its replies have no body).
    pub head: bool,
    /// Keep the reply bytes for a following extract/match.
    pub capture: bool,
    /// What ends the batch's reply.
    pub awaiting: Awaiting,
    /// Raw replies: where the current one stands.
    pub raw: raw::ExpectState,
    pub reply: Vec<u8>,
    /// Status of the last complete reply (0 before any).
    pub last_status: u16,
    /// The batch's request has Digest credentials (`auth_user`, `auth_password`): the browser
    /// answers the server's challenge with them.
    pub digest: bool,
    pub auth_user: String,
    pub auth_password: String,
    /// `Authorization: Basic` value of the current request.
    auth_basic: Vec<u8>,
    /// `file` steps: the open file and buffers (made at the first file step).
    files: Option<Box<files::Files>>,
    /// OAuth: the signer's buffers, the credentials expanded, the base string URI and the
    /// `Authorization` value of the current request (all reused; made at the first signed
    /// request).
    oauth: Option<Box<OAuthBuffers>>,
    /// A request of the session failed: the session ends at the next `advance`.
    pub failed: bool,
    /// How long the batch's reply may take when its step says (an MQTT `wait`); the run's
    /// `--timeout` otherwise.
    pub step_timeout: Option<Duration>,
    /// `reply` holds the captured replies of a whole pipeline (see `keep_last_reply`).
    pipelined_reply: bool,
    last_request_pc: usize,
    match_loops: u64,
    /// Next values of `sequence` variables, by slot.
    sequences: Vec<(u16, i64)>,
    /// The row each feeder's last `csv` set read (`usize::MAX`: none yet), by feeder.
    csv_rows: Vec<usize>,
    pages: VecDeque<Page>,
    surge_at: SurgeAt,
    // Reused expansion buffers.
    texts: [String; 3],
    path: String,
    hvals: Vec<String>,
    body: String,
    params: Vec<String>,
}

/// What `advance` may use besides the state: the worker's randomness, clock and recorder.
pub(crate) struct Env<'a> {
    pub rng: &'a mut SmallRng,
    pub rec: &'a mut Recorder,
    /// Sequential CSV cursors of this worker, by feeder: the next row to read, before the
    /// modulo (they start at the worker's slot).
    pub cursors: &'a mut [usize],
    /// How far a cursor moves per row read: the run's number of worker slots.
    pub cursor_step: usize,
    /// Requests this user may still make (the run's `-n` share and the user's own), `None`:
    /// no bound. A step without a connection (a file operation) checks it before it runs.
    pub requests_left: Option<u64>,
    pub now: Instant,
    /// The connection's protocol link, when the connection is open and speaks one.
    pub link: Option<&'a mut Link>,
    /// The user's browser (cookie jar, redirects, credentials), made on first need.
    pub browser: &'a mut Option<Box<Browser>>,
    /// The run's browser settings (`None`: no user needs a browser).
    pub browser_cfg: Option<&'a BrowserConfig>,
    /// Requests that wait for nothing may join one batch (not at a `--rate`, where each batch
    /// takes one paced slot).
    pub join: bool,
    /// The worker's buffer for a batch of joined requests: `out` takes it when a second
    /// request joins, and gives it back once the batch is written ([`SessionState::lend_back`]).
    pub join_spare: &'a mut Vec<u8>,
}

impl SessionState {
    pub fn new(prog: &Program, user_id: u64) -> SessionState {
        let mut vars = vec![String::new(); prog.w.vars.len().max(2)];
        vars[VAR_USER_ID as usize] = user_id.to_string();
        SessionState {
            session: 0,
            started: Instant::now(),
            pc: 0,
            loops: Vec::new(),
            vars,
            tx: Vec::new(),
            tx_ends: Vec::new(),
            borrowed: false,
            out: Batch::new(),
            names: Vec::new(),
            head: false,
            capture: false,
            awaiting: Awaiting::Http,
            raw: raw::ExpectState::new(),
            reply: Vec::new(),
            last_status: 0,
            digest: false,
            auth_user: String::new(),
            auth_password: String::new(),
            auth_basic: Vec::new(),
            files: None,
            oauth: None,
            failed: false,
            step_timeout: None,
            pipelined_reply: false,
            last_request_pc: 0,
            match_loops: 0,
            sequences: Vec::new(),
            csv_rows: Vec::new(),
            pages: VecDeque::new(),
            surge_at: SurgeAt::Base,
            texts: Default::default(),
            path: String::new(),
            hvals: Vec::new(),
            body: String::new(),
            params: Vec::new(),
        }
    }

    /// Start session `session` from its first step.
    pub fn begin(&mut self, prog: &Program, session: usize, rng: &mut SmallRng, now: Instant) {
        if let Some(f) = self.files.as_mut() {
            f.reset();
        }
        self.session = session;
        self.started = now;
        self.pc = 0;
        self.tx.clear();
        self.tx_ends.clear();
        self.failed = false;
        self.match_loops = 0;
        self.last_status = 0;
        self.reply.clear();
        let s = &prog.w.sessions[session];
        let name = &mut self.vars[VAR_SESSION as usize];
        name.clear();
        name.push_str(&s.name);
        match &s.body {
            SessionBody::Ops { loops, .. } => {
                self.loops.clear();
                self.loops.resize(*loops, 0);
            }
            SessionBody::Surge { params, .. } => {
                let zipf = prog.zipf[session]
                    .as_ref()
                    .expect("zipf of a surge session");
                let mut u = || rng.gen::<f64>();
                self.pages = params.session(&mut u, zipf).into();
                self.surge_at = SurgeAt::Base;
            }
        }
    }

    /// The variables by slot (unset: empty).
    pub fn vars(&self) -> &[String] {
        &self.vars
    }

    /// The CONNECT options of the step the session stands at, when it is an MQTT `connect`
    /// (the connection about to open is its own).
    pub fn connect_options<'p>(&self, prog: &'p Program) -> Option<&'p MqttConnect> {
        let SessionBody::Ops { ops, .. } = &prog.w.sessions.get(self.session)?.body else {
            return None;
        };
        match ops.get(self.pc)? {
            Op::Mqtt(MqttOp {
                action: MqttAction::Connect(c),
                ..
            }) => Some(c),
            _ => None,
        }
    }

    /// A request of the current batch failed: open transactions fail with it.
    pub fn on_failure(&mut self) {
        self.failed = true;
        for t in &mut self.tx {
            t.2 = true;
        }
    }

    /// A reply with an error status (4xx/5xx): open transactions count an error.
    pub fn on_error_status(&mut self) {
        for t in &mut self.tx {
            t.2 = true;
        }
    }

    /// Run ops until one needs the worker.
    pub fn advance(&mut self, prog: &Program, env: &mut Env<'_>) -> Action {
        if self.failed {
            self.end_transactions(env.rec);
            return Action::Done { aborted: true };
        }
        let session = self.session;
        match &prog.w.sessions[session].body {
            SessionBody::Ops { ops, .. } => self.run_ops(prog, ops, env),
            SessionBody::Surge {
                params,
                page,
                object,
            } => self.run_surge(prog, params, *page, *object, env),
        }
    }

    fn end_transactions(&mut self, rec: &mut Recorder) {
        // Transactions cut short by an aborted session are failures of that transaction.
        self.tx_ends.clear();
        for (id, _, _) in self.tx.drain(..) {
            rec.name_error(id as usize);
        }
    }

    /// A batch begins to join requests: it grows in the worker's buffer, its bytes so far
    /// copied there, and the user's own small one waits in the worker meanwhile.
    fn borrow(&mut self, spare: &mut Vec<u8>) {
        if !std::mem::replace(&mut self.borrowed, true) {
            spare.clear();
            spare.extend_from_slice(self.out.raw_mut());
            std::mem::swap(self.out.raw_mut(), spare);
        }
    }

    /// The batch is written: `out` gives the worker's join buffer back, if it has it (its
    /// bytes are not needed any more: a protocol link's requests are never sent again).
    pub fn lend_back(&mut self, spare: &mut Vec<u8>) {
        if std::mem::take(&mut self.borrowed) {
            std::mem::swap(self.out.raw_mut(), spare);
        }
    }

    /// The batch is written: the transactions that ended inside it end now.
    pub fn batch_written(&mut self, rec: &mut Recorder, now: Instant) {
        while let Some(id) = self.tx_ends.pop() {
            self.end_tx(id, rec, now);
        }
    }

    /// Transaction `id` (its latest open one) ends at `now`: timed, an error if a request
    /// inside failed.
    fn end_tx(&mut self, id: NameId, rec: &mut Recorder, now: Instant) {
        if let Some(i) = self.tx.iter().rposition(|t| t.0 == id) {
            let (_, start, err) = self.tx.remove(i);
            rec.record_name(id as usize, micros(now - start), err);
        }
    }

    /// Whether the op at the head of a batch of joined requests may join it too (or, a step
    /// of control, run before it is sent).
    fn joins(&self, op: &Op, env: &Env<'_>) -> bool {
        match op {
            Op::Amqp(_) | Op::Mqtt(_) => {
                self.names.len() < JOIN_REQUESTS
                    && self.out.byte_len() < JOIN_BYTES
                    && env
                        .requests_left
                        .is_none_or(|n| (self.names.len() as u64) < n)
            }
            Op::Jump(_)
            | Op::LoopInit { .. }
            | Op::LoopTest { .. }
            | Op::TxBegin(_)
            | Op::TxEnd(_) => true,
            _ => false,
        }
    }

    fn run_ops(&mut self, prog: &Program, ops: &[Op], env: &mut Env<'_>) -> Action {
        if std::mem::take(&mut self.pipelined_reply) {
            self.keep_last_reply();
        }
        if !self.tx_ends.is_empty() {
            self.batch_written(env.rec, env.now);
        }
        // A batch of joined requests is being built: each waits for nothing, so the next
        // protocol step may join it (a step that waits ends it, as its last request).
        let mut joined = false;
        for _ in 0..STEP_BUDGET {
            let op = ops.get(self.pc);
            if joined && !op.is_some_and(|op| self.joins(op, env)) {
                // The batch goes first; this step runs after it is written.
                return Action::Send;
            }
            let Some(op) = op else {
                self.end_transactions(env.rec);
                return Action::Done { aborted: false };
            };
            let pc = self.pc;
            self.pc += 1;
            match op {
                Op::Request(r) => {
                    // A `pipeline` step: the request before this one was batched with it, so
                    // this one joins the batch being built. Jumps only land on a pipeline's
                    // first request, so this is a pure function of the position.
                    let joins = pc
                        .checked_sub(1)
                        .is_some_and(|p| matches!(&ops[p], Op::Request(q) if q.pipeline_next));
                    if !joins {
                        self.last_request_pc = pc;
                        self.out.clear();
                        self.names.clear();
                        self.head = r.method.eq_ignore_ascii_case("HEAD");
                        self.capture = false;
                        self.awaiting = Awaiting::Http;
                        self.reply.clear();
                    }
                    self.names.push(r.name);
                    // Only a pipeline's last request captures (an extract reads the last reply).
                    self.capture |= r.capture;
                    self.credentials(r.auth.as_ref());
                    // The pre-encoded bytes serve while the browser adds nothing to them.
                    let adds = env.browser_cfg.is_some()
                        && env
                            .browser
                            .as_deref()
                            .is_some_and(|a| a.adds_fields(self.digest));
                    match &prog.extra[self.session][pc] {
                        Extra::Encoded(b) if !adds => self.out.append(b),
                        _ => self.encode(prog, r, env),
                    }
                    if r.pipeline_next && matches!(ops.get(pc + 1), Some(Op::Request(_))) {
                        continue;
                    }
                    // The worker captures every reply of the batch into `reply`; the next
                    // `run_ops` keeps only the last.
                    self.pipelined_reply = self.capture && self.names.len() > 1;
                    return Action::Send;
                }
                Op::Send(x) => {
                    self.last_request_pc = pc;
                    self.out.clear();
                    self.names.clear();
                    self.names.push(x.name);
                    self.head = false;
                    self.capture = x.capture;
                    self.reply.clear();
                    self.raw.reset();
                    let Extra::Send(data, expect) = &prog.extra[self.session][pc] else {
                        unreachable!("Program::new prepares every send");
                    };
                    self.awaiting = match expect {
                        Some(_) => Awaiting::Raw {
                            session: self.session,
                            pc,
                        },
                        None => Awaiting::Nothing,
                    };
                    match data {
                        Some(b) => self.out.raw_mut().extend_from_slice(b),
                        None => {
                            self.body.clear();
                            x.data.expand_into(&self.vars, &mut self.body);
                            self.out.raw_mut().extend_from_slice(self.body.as_bytes());
                        }
                    }
                    return Action::Send;
                }
                Op::Mqtt(MqttOp {
                    action: MqttAction::Connect(_),
                    ..
                }) if env.link.as_deref().is_some_and(|l| l.ready) => {
                    // Connected (by this step, or before it): nothing to send.
                }
                Op::Amqp(a)
                    if env
                        .link
                        .as_deref()
                        .is_some_and(|l| l.ready && l.amqp_satisfied(a)) =>
                {
                    // Its confirms are in (or its messages have come) already: done, unsent.
                    env.rec.record_name(a.name as usize, 1, false);
                }
                Op::Xmpp(_) | Op::Sql(_) | Op::Ws(_) | Op::Mqtt(_) | Op::Ldap(_) | Op::Amqp(_) => {
                    let Some(link) = env.link.as_deref_mut().filter(|l| l.ready) else {
                        // Open the connection (and run the protocol's setup) first, then
                        // come back to this step.
                        self.pc = pc;
                        self.names.clear();
                        return Action::Connect;
                    };
                    self.last_request_pc = pc;
                    if !joined {
                        self.out.clear();
                        self.names.clear();
                        self.head = false;
                        self.capture = matches!(op, Op::Ws(w) if w.capture);
                        self.reply.clear();
                    }
                    self.step_timeout = match op {
                        Op::Mqtt(MqttOp {
                            action: MqttAction::Wait { timeout, .. },
                            ..
                        })
                        | Op::Amqp(AmqpOp {
                            action:
                                AmqpAction::Wait { timeout, .. } | AmqpAction::WaitConfirms { timeout },
                            ..
                        }) => Some(*timeout),
                        _ => None,
                    };
                    let c = &mut env.rec.counters;
                    let wait = match op {
                        Op::Xmpp(x) => {
                            let LinkSpec::Xmpp(spec) = &prog.w.link else {
                                unreachable!("xmpp steps compile only for xmpp servers")
                            };
                            self.names.push(x.name);
                            match link.xmpp_request(
                                spec,
                                prog.xmpp.as_ref(),
                                x,
                                &self.vars,
                                &mut self.body,
                                self.out.raw_mut(),
                                env.rng,
                                c,
                            ) {
                                Ok(w) => w,
                                Err(_) => {
                                    // Nobody fits the destination: nothing is sent (Tsung's
                                    // error_no_online), the step counts as failed.
                                    env.rec.name_error(x.name as usize);
                                    self.names.clear();
                                    continue;
                                }
                            }
                        }
                        Op::Sql(q) => {
                            self.names.push(q.name);
                            let statement = match &prog.extra[self.session][pc] {
                                Extra::Statement(n) => n,
                                _ => "",
                            };
                            link.sql_request(
                                q,
                                (self.session as u32, pc as u32),
                                statement,
                                &self.vars,
                                &mut self.body,
                                &mut self.params,
                                self.out.raw_mut(),
                                c,
                            )
                        }
                        Op::Ws(w) => {
                            self.names.push(w.name);
                            link.ws_request(
                                w,
                                &self.vars,
                                &mut self.body,
                                self.out.raw_mut(),
                                env.rng,
                                c,
                            )
                        }
                        Op::Mqtt(m) => {
                            self.names.push(m.name);
                            match link.mqtt_request(
                                m,
                                &self.vars,
                                &mut self.texts,
                                self.out.raw_mut(),
                                env.now,
                                c,
                            ) {
                                Ok(w) => w,
                                Err(_) => {
                                    // A topic or payload the protocol cannot carry once its
                                    // variables are in: not sent, the step fails, the session
                                    // goes on (as an XMPP step without a destination).
                                    c.error(headroom_core::ErrorKind::Other);
                                    env.rec.name_error(m.name as usize);
                                    self.names.pop(); // (a batch joined before it goes on)
                                    continue;
                                }
                            }
                        }
                        Op::Amqp(a) => {
                            self.names.push(a.name);
                            match link.amqp_request(
                                a,
                                &self.vars,
                                &mut self.texts,
                                self.out.raw_mut(),
                                prog.amqp_delivery,
                                c,
                            ) {
                                Ok(w) => w,
                                Err(_) => {
                                    // A channel that is no number from 1 to 65535 once its
                                    // variables are in (or none free to open): not sent, the
                                    // step fails, the session goes on.
                                    c.error(headroom_core::ErrorKind::Other);
                                    env.rec.name_error(a.name as usize);
                                    self.names.pop(); // (a batch joined before it goes on)
                                    continue;
                                }
                            }
                        }
                        Op::Ldap(l) => {
                            self.names.push(l.name);
                            match link.ldap_request(l, &self.vars, self.out.raw_mut(), c) {
                                Ok(w) => w,
                                Err(_) => {
                                    // A filter that does not parse once its variables are in:
                                    // not sent, the step fails, the session goes on.
                                    c.error(headroom_core::ErrorKind::Other);
                                    env.rec.name_error(l.name as usize);
                                    self.names.clear();
                                    continue;
                                }
                            }
                        }
                        _ => unreachable!("matched above"),
                    };
                    self.awaiting = if wait == LinkWait::None {
                        Awaiting::Nothing
                    } else {
                        Awaiting::Link
                    };
                    // A publish waits for nothing: the steps after it may join its batch.
                    joined = env.join
                        && wait == LinkWait::None
                        && matches!(
                            op,
                            Op::Amqp(AmqpOp {
                                action: AmqpAction::Publish { .. },
                                ..
                            }) | Op::Mqtt(MqttOp {
                                action: MqttAction::Publish { .. },
                                ..
                            })
                        );
                    if joined {
                        self.borrow(env.join_spare);
                        continue;
                    }
                    return Action::Send;
                }
                Op::Think(d) => {
                    let t = d.sample(env.rng.gen::<f64>());
                    if !t.is_zero() {
                        return Action::Think(t);
                    }
                }
                Op::LoopInit { slot } => self.loops[*slot as usize] = 0,
                Op::LoopTest {
                    slot,
                    count,
                    condition,
                    counter,
                    exit,
                } => {
                    let n = self.loops[*slot as usize];
                    let mut go = count.is_none_or(|c| n < c);
                    if let Some(c) = condition {
                        let t = session::truthy(&self.vars[c.var as usize]);
                        go &= if c.while_true { t } else { !t };
                    }
                    if go {
                        self.loops[*slot as usize] = n + 1;
                        if let Some(c) = counter {
                            // In place: the variable's buffer is reused from pass to pass.
                            use std::fmt::Write;
                            let v = &mut self.vars[c.var as usize];
                            v.clear();
                            let _ = write!(v, "{}", c.value(n));
                        }
                    } else {
                        self.pc = *exit;
                    }
                }
                Op::Jump(to) => self.pc = *to,
                Op::TxBegin(id) => self.tx.push((*id, env.now, false)),
                Op::TxEnd(id) if joined => self.tx_ends.push(*id),
                Op::TxEnd(id) => self.end_tx(*id, env.rec, env.now),
                Op::Cookie(c) => self.cookie(prog, c, env),
                Op::Connect => {
                    // No request rides on a connect: a failed connect fails no name.
                    self.names.clear();
                    return Action::Connect;
                }
                Op::Close => return Action::Close,
                Op::Set { var, source } => {
                    if let Err(e) = self.set(prog, *var, source, env) {
                        // An expression that cannot be computed: the session cannot go on
                        // with a value it does not have (Tsung's user dies of the same
                        // failure of its Erlang code), and the summary says which failure.
                        let c = &mut env.rec.counters;
                        c.proto(
                            match e {
                                EvalError::Overflow => ProtoCounter::ExprOverflow,
                                EvalError::DivisionByZero => ProtoCounter::ExprDivisionByZero,
                                EvalError::NotInteger(_) => ProtoCounter::ExprNotInteger,
                            },
                            1,
                        );
                        self.end_transactions(env.rec);
                        return Action::Done { aborted: true };
                    }
                }
                Op::File(f) => {
                    if env.requests_left == Some(0) {
                        // The run's requests are all taken: this one is not run.
                        self.pc = pc;
                        return Action::Ran;
                    }
                    let root = prog.w.file_root.as_deref().unwrap_or("/nonexistent");
                    let files = self.files.get_or_insert_with(Box::default);
                    files.run(root, f, &self.vars, env.rng, env.rec);
                    // One blocking operation per turn: the worker's other users go between.
                    return Action::Ran;
                }
                Op::Extract { var, from, default } => {
                    let found = self.extract(&prog.extra[self.session][pc], from);
                    let slot = *var as usize;
                    match (found, default) {
                        (Some(v), _) => self.vars[slot] = v,
                        (None, Some(d)) => {
                            let mut s = String::new();
                            d.expand_into(&self.vars, &mut s);
                            self.vars[slot] = s;
                        }
                        (None, None) => {}
                    }
                }
                Op::Match(m) => {
                    let mut hit = true;
                    if let Some(st) = m.status {
                        hit &= self.last_status == st;
                    }
                    if let Some(b) = &m.body {
                        hit &= contains(&self.reply_body(), b.as_bytes());
                    }
                    if hit != m.when_matched {
                        self.match_loops = 0;
                        continue;
                    }
                    if let Some(c) = env.rec.matches.get_mut(m.id as usize) {
                        *c += 1;
                    }
                    match m.action {
                        MatchAction::Continue => {}
                        MatchAction::Abort => {
                            self.end_transactions(env.rec);
                            return Action::Done { aborted: true };
                        }
                        MatchAction::Restart => {
                            self.end_transactions(env.rec);
                            let s = self.session;
                            self.begin(prog, s, env.rng, env.now);
                        }
                        MatchAction::Loop => {
                            let max = m.max_loops.unwrap_or(DEFAULT_MAX_LOOPS);
                            if self.match_loops < max {
                                self.match_loops += 1;
                                self.pc = self.last_request_pc;
                            } else {
                                self.match_loops = 0;
                            }
                        }
                    }
                }
            }
        }
        if joined {
            return Action::Send;
        }
        Action::Yield
    }

    /// A pipeline's replies were captured back to back: keep only the last (the one an
    /// `extract` or `match` after the pipeline reads). Replies are delimited as the worker's
    /// decoder delimits them; a capture cut short by `CAPTURE_LIMIT` keeps the last reply
    /// that began in it. Moves bytes within `reply`, allocates nothing.
    fn keep_last_reply(&mut self) {
        let mut dec = ResponseDecoder::new();
        dec.set_head_request(self.head);
        let (mut pos, mut last) = (0, 0);
        // Each turn consumes one whole reply, so there are at most `names.len()` turns.
        for _ in 0..self.names.len() {
            if pos >= self.reply.len() {
                break;
            }
            last = pos;
            match dec.decode(&self.reply[pos..]) {
                Ok((used, Decoded::Complete(_))) if used > 0 => pos += used,
                _ => break,
            }
        }
        self.reply.drain(..last);
    }

    fn run_surge(
        &mut self,
        prog: &Program,
        params: &headroom_core::surge::SurgeParams,
        page_name: NameId,
        object_name: NameId,
        env: &mut Env<'_>,
    ) -> Action {
        loop {
            let Some(page) = self.pages.front() else {
                return Action::Done { aborted: false };
            };
            match self.surge_at {
                SurgeAt::Base => {
                    self.out.clear();
                    self.names.clear();
                    self.head = false;
                    self.capture = false;
                    let rank = page.base;
                    self.push_get(prog, params, rank, page_name, env);
                    self.surge_at = SurgeAt::Embedded(0);
                    return Action::Send;
                }
                SurgeAt::Embedded(i) if i < page.embedded.len() => {
                    self.out.clear();
                    self.names.clear();
                    let end = (i + params.pipeline.max(1) as usize).min(page.embedded.len());
                    for k in i..end {
                        let rank = self.pages[0].embedded[k];
                        self.push_get(prog, params, rank, object_name, env);
                    }
                    self.surge_at = SurgeAt::Embedded(end);
                    return Action::Send;
                }
                SurgeAt::Embedded(_) => {
                    let off = self.pages.pop_front().and_then(|p| p.off);
                    self.surge_at = SurgeAt::Base;
                    if let Some(d) = off {
                        if !self.pages.is_empty() && !d.is_zero() {
                            return Action::Think(d);
                        }
                    }
                }
            }
        }
    }

    fn push_get(
        &mut self,
        prog: &Program,
        params: &headroom_core::surge::SurgeParams,
        rank: u64,
        name: NameId,
        env: &mut Env<'_>,
    ) {
        self.path.clear();
        params.push_file_name(rank, &mut self.path);
        let (cookie, auth) = browser_fields(env, "GET", &self.path, None);
        self.out.push(
            "GET",
            &self.path,
            &prog.host,
            std::iter::empty(),
            &[("Cookie", cookie), ("Authorization", auth)],
            &[],
            prog.keepalive,
        );
        self.names.push(name);
    }

    /// Expands the request's credentials: a Basic header value, or Digest ones for the browser.
    fn credentials(&mut self, auth: Option<&session::AuthOp>) {
        self.digest = false;
        self.auth_basic.clear();
        let Some(a) = auth else {
            return;
        };
        self.auth_user.clear();
        a.user.expand_into(&self.vars, &mut self.auth_user);
        self.auth_password.clear();
        a.password.expand_into(&self.vars, &mut self.auth_password);
        match a.scheme {
            headroom_core::AuthScheme::Basic => headroom_proto::auth::write_basic_value(
                &self.auth_user,
                &self.auth_password,
                &mut self.auth_basic,
            ),
            headroom_core::AuthScheme::Digest => self.digest = true,
        }
    }

    /// A `cookie` step: the jar changes as if the server had set (or the user cleared) it.
    fn cookie(&mut self, prog: &Program, op: &session::CookieOp, env: &mut Env<'_>) {
        match op {
            session::CookieOp::Clear => {
                if let Some(a) = env.browser.as_mut() {
                    a.jar.clear();
                }
            }
            session::CookieOp::Set {
                name,
                value,
                domain,
                path,
            } => {
                // Written as the Set-Cookie a server would send, so the jar's one set of rules
                // (domain match, bounds) applies.
                let b = &mut self.body;
                b.clear();
                b.push_str(name);
                b.push('=');
                value.expand_into(&self.vars, b);
                b.push_str("; Path=");
                b.push_str(path.as_deref().unwrap_or("/"));
                if let Some(d) = domain {
                    b.push_str("; Domain=");
                    b.push_str(d);
                }
                let host = browser::host_of(&prog.host);
                let a = env.browser.get_or_insert_with(Browser::new);
                let c = &mut env.rec.counters;
                match a
                    .jar
                    .set_cookie(b.as_bytes(), host, "/", browser::unix_now())
                {
                    Ok(_) => c.proto(headroom_core::ProtoCounter::HttpCookiesStored, 1),
                    Err(_) => c.proto(headroom_core::ProtoCounter::HttpCookiesRejected, 1),
                }
            }
        }
    }

    /// Encodes the request of `r` into `out`, with the fields the user's browser adds.
    fn encode(&mut self, prog: &Program, r: &session::RequestOp, env: &mut Env<'_>) {
        self.path.clear();
        r.path.expand_into(&self.vars, &mut self.path);
        self.hvals.resize(r.headers.len(), String::new());
        for (slot, (_, t)) in self.hvals.iter_mut().zip(r.headers.iter()) {
            slot.clear();
            t.expand_into(&self.vars, slot);
        }
        self.body.clear();
        if let Some(b) = &r.body {
            b.expand_into(&self.vars, &mut self.body);
        }
        let oauth = match r.oauth {
            Some(_) => {
                let o = self.oauth.get_or_insert_with(Box::default);
                o.sign(
                    prog,
                    r,
                    &self.path,
                    &self.hvals,
                    &self.body,
                    &self.vars,
                    env.rng,
                );
                std::str::from_utf8(&o.value).unwrap_or("")
            }
            None => "",
        };
        // At most one of them: the scenario refuses `auth` with `oauth`.
        let basic = std::str::from_utf8(&self.auth_basic).unwrap_or("");
        let headers = r
            .headers
            .iter()
            .zip(self.hvals.iter())
            .map(|((n, _), v)| (n.as_str(), v.as_str()))
            .chain((!basic.is_empty()).then_some(("Authorization", basic)))
            .chain((!oauth.is_empty()).then_some(("Authorization", oauth)));
        let creds = self
            .digest
            .then_some((&*self.auth_user, &*self.auth_password));
        let (cookie, auth) = browser_fields(env, &r.method, &self.path, creds);
        self.out.push(
            &r.method,
            &self.path,
            &prog.host,
            headers,
            &[("Cookie", cookie), ("Authorization", auth)],
            self.body.as_bytes(),
            prog.keepalive,
        );
    }

    /// Runs a `set`; `Err` only for an expression that cannot be computed (the variable keeps
    /// its value).
    fn set(
        &mut self,
        prog: &Program,
        var: u16,
        source: &SetOp,
        env: &mut Env<'_>,
    ) -> Result<(), EvalError> {
        let slot = var as usize;
        if let SetOp::Expr(e) = source {
            env.rec.counters.proto(ProtoCounter::ExprEvaluated, 1);
            let n = e.eval(&self.vars)?;
            // Written into the variable's own buffer: no allocation once it is big enough.
            let v = &mut self.vars[slot];
            v.clear();
            let _ = write!(v, "{n}");
            return Ok(());
        }
        if let SetOp::Csv {
            feeder,
            column,
            row,
        } = source
        {
            // Copied into the variable's own buffer: no allocation once it is big enough.
            let f = &prog.w.feeders[*feeder];
            if self.csv_rows.len() < prog.w.feeders.len() {
                self.csv_rows.resize(prog.w.feeders.len(), usize::MAX);
            }
            let last = self.csv_rows[*feeder];
            let i = match row {
                CsvRow::Same if last < f.len() => last,
                CsvRow::Random => env.rng.gen_range(0..f.len()),
                CsvRow::Next | CsvRow::Same => {
                    // This worker's rows: its slot, then every `cursor_step`-th row after it.
                    let c = &mut env.cursors[*feeder];
                    let i = *c % f.len();
                    *c = c.wrapping_add(env.cursor_step.max(1));
                    i
                }
            };
            self.csv_rows[*feeder] = i;
            let v = &mut self.vars[slot];
            v.clear();
            v.push_str(f.field(i, *column));
            return Ok(());
        }
        let value = match source {
            SetOp::Value(t) => {
                let mut s = String::new();
                t.expand_into(&self.vars, &mut s);
                s
            }
            SetOp::Csv { .. } | SetOp::Expr(_) => unreachable!("handled above"),
            SetOp::RandomNumber { min, max } => env.rng.gen_range(*min..=*max).to_string(),
            SetOp::RandomString { length } => {
                const ALNUM: &[u8] =
                    b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
                (0..*length)
                    .map(|_| ALNUM[env.rng.gen_range(0..ALNUM.len())] as char)
                    .collect()
            }
            SetOp::Sequence { start, step } => {
                let i = match self.sequences.iter().position(|s| s.0 == var) {
                    Some(i) => i,
                    None => {
                        self.sequences.push((var, *start));
                        self.sequences.len() - 1
                    }
                };
                let v = self.sequences[i].1;
                self.sequences[i].1 = v.wrapping_add(*step);
                v.to_string()
            }
            SetOp::UserId => self.vars[VAR_USER_ID as usize].clone(),
        };
        self.vars[slot] = value;
        Ok(())
    }

    fn reply_body(&self) -> std::borrow::Cow<'_, [u8]> {
        if self.awaiting != Awaiting::Http {
            // A raw reply is all body.
            return std::borrow::Cow::Borrowed(&self.reply);
        }
        match RawResponse::parse(&self.reply) {
            Some(r) => r.body(),
            None => std::borrow::Cow::Borrowed(&[][..]),
        }
    }

    fn extract(&self, extra: &Extra, from: &ExtractOp) -> Option<String> {
        if self.awaiting != Awaiting::Http {
            let body = &self.reply;
            return match from {
                ExtractOp::Header(_) => None,
                ExtractOp::Regex(_) => {
                    let Extra::Regex(re) = extra else { return None };
                    let text = String::from_utf8_lossy(body);
                    let caps = re.captures(&text)?;
                    let m = caps.get(1).or_else(|| caps.get(0))?;
                    Some(m.as_str().to_string())
                }
                ExtractOp::JsonPointer(ptr) => headroom_proto::json::pointer(body, ptr),
            };
        }
        let reply = RawResponse::parse(&self.reply)?;
        match from {
            ExtractOp::Header(name) => reply
                .header(name)
                .map(|v| String::from_utf8_lossy(v).trim().to_string()),
            ExtractOp::Regex(_) => {
                let Extra::Regex(re) = extra else { return None };
                let body = reply.body();
                let text = String::from_utf8_lossy(&body);
                let caps = re.captures(&text)?;
                let m = caps.get(1).or_else(|| caps.get(0))?;
                Some(m.as_str().to_string())
            }
            ExtractOp::JsonPointer(ptr) => headroom_proto::json::pointer(&reply.body(), ptr),
        }
    }
}

/// The `Cookie` and Digest `Authorization` values the user's browser adds to a request of
/// `method` to `path` (empty when it adds none, or there is no browser).
fn browser_fields<'e>(
    env: &'e mut Env<'_>,
    method: &str,
    path: &str,
    creds: Option<(&str, &str)>,
) -> (&'e [u8], &'e [u8]) {
    let (Some(cfg), Some(a)) = (env.browser_cfg, env.browser.as_deref_mut()) else {
        return (&[], &[]);
    };
    if !a.adds_fields(creds.is_some()) {
        return (&[], &[]);
    }
    let target = if path.is_empty() { "/" } else { path };
    let (cookie, auth) = a.fields(cfg, method, target, creds, browser::unix_now());
    (cookie.unwrap_or_default(), auth.unwrap_or_default())
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

mod files;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_pipeline;
