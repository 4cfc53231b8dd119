//! From a validated [`Scenario`] to the engine's [`Workload`]: variables become slots, names
//! become metric ids, loops and transactions become flat ops with jumps, CSV feeders are read.
//!
//! The scenario was validated already, so what can still fail here is only what validation
//! cannot see: a CSV file that cannot be read.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use headroom_core::session::LinkSpec;
use headroom_core::session::{
    AmqpOp, ArrivalPhase, AuthOp, CookieOp, CsvRow, Feeder, FileOp, LdapOp, LoopCondition,
    LoopCounterOp, MatchOp, MetricName, MqttOp, NameId, NameKind, OAuthOp, OnceUser, Op, Piece,
    RequestOp, SendOp, SessionBody, SessionProgram, SetOp, SqlOp, Template, VarId, Workload,
    WsAction, WsOp, XmppOp, XmppSpec,
};
use headroom_core::{ArrivalProcess, RampStage, TlsOptions, TlsUpgrade};

use crate::model::{
    Arrival, Condition, CookieStep, CsvOrder, Metric, PgSslMode, Protocol, Rate, Scenario, Server,
    SetSource, Step,
};

/// A scenario ready for the engine.
#[derive(Debug, Clone)]
pub struct Compiled {
    pub workload: Workload,
    /// Open arrival phases, in order.
    pub phases: Vec<ArrivalPhase>,
    /// Closed users over all populations.
    pub users: u32,
    /// Total length of the phases (zero without phases).
    pub phases_duration: Duration,
    /// The closed population's ramp (`stages:`); empty: every closed user starts at once.
    pub ramp: Vec<RampStage>,
    /// The CSV files read (in feeder order), then the TLS files, as the scenario names them
    /// (relative to its directory): what a distributed run ships to its agents beside it.
    pub files: Vec<String>,
    /// TLS to the first server, from its `tls:` settings (files read); `None` for plain TCP.
    pub tls: Option<TlsOptions>,
    /// The servers speak HTTP/2 (`http: 2`).
    pub http2: bool,
    /// Cookies and redirects (`cookies:`, `follow:`).
    pub http: crate::model::HttpBehaviour,
}

/// Where a compile gets the files a scenario names (CSV feeders, TLS certificates and keys):
/// given the name as the scenario writes it, the file's bytes, or why not (one line naming the
/// file). [`compile`] reads them from disk below the scenario's directory; an agent compiles
/// from the bytes its job carries and reads nothing of its own.
pub type FileSource<'a> = dyn Fn(&str) -> Result<Vec<u8>, String> + 'a;

/// Files read from disk, relative to `base` (the scenario file's directory).
pub fn files_below(base: &Path) -> impl Fn(&str) -> Result<Vec<u8>, String> + '_ {
    move |name: &str| crate::read_bounded(&base.join(name), crate::MAX_DATA_BYTES, "file")
}

/// The TLS options of a server's `tls:` settings, its files from `files`.
/// `xmpp_domain` is the stream's `to` for STARTTLS.
pub fn server_tls(
    srv: &Server,
    xmpp_domain: Option<&str>,
    files: &FileSource<'_>,
) -> Result<Option<TlsOptions>, String> {
    let Some(t) = &srv.tls else {
        return Ok(None);
    };
    let read = |what: &str, f: &Option<String>| -> Result<Option<Vec<u8>>, String> {
        match f {
            Some(f) => files(f)
                .map(Some)
                .map_err(|e| format!("tls.{what}: cannot read '{f}': {e}")),
            None => Ok(None),
        }
    };
    let mut o = TlsOptions::new(t.server_name.clone().unwrap_or_else(|| srv.host.clone()));
    o.ca_pem = read("cacert", &t.cacert)?;
    o.client_cert_pem = read("cert", &t.cert)?;
    o.client_key_pem = read("key", &t.key)?;
    let pg = srv.protocol == Protocol::Pgsql;
    let mode = t.sslmode.unwrap_or(PgSslMode::Require);
    // libpq's prefer and require encrypt without checking the certificate.
    o.insecure = t.insecure || (pg && mode != PgSslMode::VerifyFull);
    if let Some(v) = t.min {
        o.min_version = v;
    }
    if let Some(v) = t.max {
        o.max_version = v;
    }
    o.resume = t.resume.unwrap_or(true);
    o.alpn = match srv.protocol {
        Protocol::Http if srv.http2 => vec![b"h2".to_vec()],
        Protocol::Http | Protocol::WebSocket => vec![b"http/1.1".to_vec()],
        _ => Vec::new(),
    };
    o.upgrade = match srv.protocol {
        Protocol::Xmpp if t.starttls => TlsUpgrade::XmppStartTls {
            domain: xmpp_domain.unwrap_or(&srv.host).to_string(),
        },
        Protocol::Pgsql => TlsUpgrade::PgSslRequest {
            required: mode != PgSslMode::Prefer,
        },
        Protocol::Mysql => TlsUpgrade::MysqlSslRequest,
        Protocol::Ldap if t.starttls => TlsUpgrade::LdapStartTls,
        _ => TlsUpgrade::Direct,
    };
    Ok(Some(o))
}

/// Compiles `s`; CSV files are read relative to `base` (the scenario file's directory).
pub fn compile(s: &Scenario, base: &Path) -> Result<Compiled, String> {
    compile_with(s, &files_below(base))
}

/// Compiles `s`, taking the files it names from `files` (see [`FileSource`]).
pub fn compile_with(s: &Scenario, source: &FileSource<'_>) -> Result<Compiled, String> {
    let mut c = Compiler {
        vars: vec!["user_id".into(), "session".into()],
        names: Vec::new(),
        name_index: [HashMap::new(), HashMap::new()],
        reserved: s
            .thresholds
            .iter()
            .filter_map(|t| match &t.metric {
                Metric::Percentile { name, .. } | Metric::Mean { name } => name.clone(),
                _ => None,
            })
            .collect(),
        overflow: [(None, 0); 2],
        matches: Vec::new(),
        feeders: Vec::new(),
        feeder_index: HashMap::new(),
        files: source,
    };
    // The connection setup is timed under its own name, listed first.
    let handshake = s
        .link
        .handshake_name()
        .map(|n| c.name(n, NameKind::Request));
    // MQTT: the publish-to-receive latency, measured by the receiving users, under its own
    // name (a transaction: a span between two users, not a request of one).
    let mut link = s.link.clone();
    if let LinkSpec::Mqtt(m) = &mut link {
        m.delivery = c.name("mqtt:delivery", NameKind::Transaction);
    }
    if let LinkSpec::Xmpp(XmppSpec { login: Some(l), .. }) = &mut link {
        // Over the sessions' variables (the parser checked each is set before the connect).
        l.templates = [c.template(&l.user), c.template(&l.password)];
    }
    if let LinkSpec::Amqp(_) = &link {
        // The engine finds it by name (AMQP's delivery latency, as MQTT's).
        c.name("amqp:delivery", NameKind::Transaction);
    }
    let mut sessions = Vec::with_capacity(s.sessions.len());
    for sess in &s.sessions {
        let body = match &sess.surge {
            Some(p) => SessionBody::Surge {
                params: p.clone(),
                page: c.name("page", NameKind::Request),
                object: c.name("object", NameKind::Request),
            },
            None => {
                let mut ops = Vec::new();
                let mut loops = 0u16;
                c.steps(&sess.steps, &mut ops, &mut loops)?;
                mark_captures(&mut ops);
                SessionBody::Ops {
                    ops,
                    loops: usize::from(loops),
                }
            }
        };
        sessions.push(SessionProgram {
            name: sess.name.clone(),
            body,
        });
    }
    let total: f64 = s.sessions.iter().map(|x| x.weight).sum();
    let draws = !s.load.phases.is_empty() || s.load.users.iter().any(|u| u.session.is_none());
    if total <= 0.0 && draws {
        return Err(
            "every session has weight 0, but arrivals or users without a session draw from the mix"
                .into(),
        );
    }
    let total = if total > 0.0 { total } else { 1.0 };
    let mut acc = 0.0;
    let mut cumulative: Vec<f64> = s
        .sessions
        .iter()
        .map(|x| {
            acc += x.weight / total;
            acc
        })
        .collect();
    // The last session in the mix ends it at exactly 1, and so does every weight-0 session
    // after it: rounding can never draw a session out of the mix.
    if let Some(j) = s.sessions.iter().rposition(|x| x.weight > 0.0) {
        for c in &mut cumulative[j..] {
            *c = 1.0;
        }
    }
    let mut populations = Vec::new();
    for u in &s.load.users {
        let idx = match &u.session {
            Some(name) => Some(
                s.sessions
                    .iter()
                    .position(|x| &x.name == name)
                    .ok_or_else(|| format!("users: no session named '{name}'"))?,
            ),
            None => None,
        };
        let n = u32::try_from(u.count).map_err(|_| "users: count too large".to_string())?;
        populations.push((n, idx));
    }
    let once = s
        .load
        .once
        .iter()
        .map(|o| {
            let session = s
                .sessions
                .iter()
                .position(|x| x.name == o.session)
                .ok_or_else(|| format!("once: no session named '{}'", o.session))?;
            Ok(OnceUser { at: o.at, session })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let ramp: Vec<RampStage> = s
        .load
        .stages
        .iter()
        .map(|st| {
            let users =
                u32::try_from(st.users).map_err(|_| "stages: users too large".to_string())?;
            Ok(RampStage {
                duration: st.duration,
                users,
            })
        })
        .collect::<Result<_, String>>()?;
    if populations.is_empty() && !ramp.is_empty() {
        // Stages without populations: the peak's users draw from the session mix.
        populations.push((RampStage::peak(&ramp), None));
    }
    let phases: Vec<ArrivalPhase> = s
        .load
        .phases
        .iter()
        .map(|p| {
            let (from, to) = match p.rate {
                Rate::Fixed(r) => (r, r),
                Rate::Ramp { from, to } => (from, to),
            };
            ArrivalPhase {
                duration: p.duration,
                from,
                to,
                process: match p.arrival {
                    Arrival::Poisson => ArrivalProcess::Poisson,
                    Arrival::Constant => ArrivalProcess::Constant,
                },
                max_users: p.max_users,
            }
        })
        .collect();
    let phases_duration = phases.iter().map(|p| p.duration).sum();
    let mut files: Vec<(usize, String)> = c
        .feeder_index
        .iter()
        .map(|(f, &i)| (i, f.clone()))
        .collect();
    files.sort();
    let tls = match s.servers.first() {
        Some(srv) => {
            let domain = match &s.link {
                LinkSpec::Xmpp(x) => Some(x.domain.as_str()),
                _ => None,
            };
            server_tls(srv, domain, source)?
        }
        None => None,
    };
    if let (Some(t), LinkSpec::Xmpp(XmppSpec { bosh: Some(_), .. })) = (&tls, &s.link) {
        if t.upgrade != TlsUpgrade::Direct {
            return Err(
                "xmpp.bosh: STARTTLS does not apply to BOSH, whose TLS is https's (tls without starttls)"
                    .to_string(),
            );
        }
    }
    if let Some(t) = s.servers.first().and_then(|srv| srv.tls.as_ref()) {
        for f in [&t.cacert, &t.cert, &t.key].into_iter().flatten() {
            files.push((usize::MAX, f.clone()));
        }
    }
    c.name_overflow();
    let workload = Workload {
        sessions,
        cumulative,
        populations,
        once,
        names: c.names,
        matches: c.matches,
        vars: c.vars,
        feeders: c.feeders,
        link,
        handshake,
        file_root: s.file_root.clone(),
    };
    Ok(Compiled {
        users: workload.closed_users(),
        workload,
        phases,
        phases_duration,
        ramp,
        files: files.into_iter().map(|(_, f)| f).collect(),
        tls,
        http2: s.servers.first().is_some_and(|srv| srv.http2),
        http: s.http,
    })
}

/// Distinct request and transaction names a scenario keeps figures for. Each name costs a
/// latency histogram (188 KB) in every recorder that records it — a worker's interval, the
/// merged run, an agent's — about 1.1 MB per name in a run: 500 names stay within ~550 MB.
/// Past the cap (a HAR of thousands of distinct URLs), further names share one figure,
/// `(other: N names past the first 500)`, one per kind.
pub const MAX_NAMES: usize = 500;

struct Compiler<'a> {
    vars: Vec<String>,
    names: Vec<MetricName>,
    /// `names`' index by name, one map per kind (looked up by `&str`, no key built), and the
    /// names folded into each kind's overflow figure.
    name_index: [HashMap<String, usize>; 2],
    /// Names a threshold checks: they keep their own figure past the cap.
    reserved: std::collections::HashSet<String>,
    overflow: [(Option<usize>, usize); 2],
    matches: Vec<String>,
    feeders: Vec<Arc<Feeder>>,
    feeder_index: HashMap<String, usize>,
    files: &'a FileSource<'a>,
}

impl Compiler<'_> {
    fn var(&mut self, name: &str) -> VarId {
        let i = match self.vars.iter().position(|v| v == name) {
            Some(i) => i,
            None => {
                self.vars.push(name.to_string());
                self.vars.len() - 1
            }
        };
        i as VarId
    }

    fn name(&mut self, name: &str, kind: NameKind) -> NameId {
        if let Some(&i) = self.name_index[kind as usize].get(name) {
            return i as NameId;
        }
        let push = |names: &mut Vec<MetricName>, name: String| {
            names.push(MetricName { name, kind });
            names.len() - 1
        };
        let i = if self.names.len() < MAX_NAMES || self.reserved.contains(name) {
            let i = push(&mut self.names, name.to_string());
            self.name_index[kind as usize].insert(name.to_string(), i);
            i
        } else {
            // Past the cap: every further name of this kind shares one figure, named at the
            // end of the compile with how many it holds (`name_overflow`).
            let slot = &mut self.overflow[kind as usize];
            slot.1 += 1;
            match slot.0 {
                Some(i) => i,
                None => {
                    let i = push(&mut self.names, String::new());
                    self.overflow[kind as usize].0 = Some(i);
                    i
                }
            }
        };
        i as NameId
    }

    /// Names the overflow figures (see [`MAX_NAMES`]).
    fn name_overflow(&mut self) {
        for (i, n) in self.overflow {
            if let Some(i) = i {
                self.names[i].name = format!("(other: {n} names past the first {MAX_NAMES})");
            }
        }
    }

    fn template(&mut self, text: &str) -> Template {
        let mut pieces = Vec::new();
        let mut rest = text;
        while let Some(i) = rest.find("${") {
            let after = &rest[i + 2..];
            let Some(end) = after.find('}') else { break };
            if i > 0 {
                pieces.push(Piece::Lit(rest[..i].to_string()));
            }
            pieces.push(Piece::Var(self.var(&after[..end])));
            rest = &after[end + 1..];
        }
        if !rest.is_empty() {
            pieces.push(Piece::Lit(rest.to_string()));
        }
        Template(pieces)
    }

    fn feeder(&mut self, file: &str) -> Result<usize, String> {
        if let Some(&i) = self.feeder_index.get(file) {
            return Ok(i);
        }
        let bytes = (self.files)(file).map_err(|e| format!("csv file {e}"))?;
        let text =
            String::from_utf8(bytes).map_err(|_| format!("csv file {file}: not UTF-8 text"))?;
        // The file's bytes become the feeder's buffer (no copy); it adds 4 bytes a row.
        if text.len() as u64 > crate::MAX_DATA_BYTES {
            return Err(format!(
                "csv file {file}: over the size limit ({} bytes, at most {} MiB)",
                text.len(),
                crate::MAX_DATA_BYTES >> 20
            ));
        }
        let Some(feeder) = Feeder::new(text) else {
            return Err(format!("csv file {file}: no rows"));
        };
        self.feeders.push(Arc::new(feeder));
        self.feeder_index
            .insert(file.to_string(), self.feeders.len() - 1);
        Ok(self.feeders.len() - 1)
    }

    fn steps(&mut self, steps: &[Step], ops: &mut Vec<Op>, loops: &mut u16) -> Result<(), String> {
        for step in steps {
            match step {
                Step::Request(r) => {
                    let op = RequestOp {
                        name: self.name(&r.name, NameKind::Request),
                        method: r.method.clone(),
                        path: self.template(&r.path),
                        headers: r
                            .headers
                            .iter()
                            .map(|(k, v)| (k.clone(), self.template(v)))
                            .collect(),
                        body: r.body.as_deref().map(|b| self.template(b)),
                        capture: false,
                        auth: r.auth.as_ref().map(|a| AuthOp {
                            scheme: a.scheme,
                            user: self.template(&a.user),
                            password: self.template(&a.password),
                        }),
                        oauth: r.oauth.as_ref().map(|o| {
                            Box::new(OAuthOp {
                                consumer_key: self.template(&o.consumer_key),
                                consumer_secret: self.template(&o.consumer_secret),
                                token: self.template(&o.token),
                                token_secret: self.template(&o.token_secret),
                                method: o.method,
                            })
                        }),
                        pipeline_next: false,
                    };
                    ops.push(Op::Request(op));
                }
                Step::Pipeline(list) => {
                    // Each request compiles as a request step would; all but the last are
                    // written in one batch with the next.
                    let first = ops.len();
                    for r in list {
                        self.steps(std::slice::from_ref(&Step::Request(r.clone())), ops, loops)?;
                    }
                    let last = ops.len().saturating_sub(1).max(first);
                    for op in &mut ops[first..last] {
                        if let Op::Request(r) = op {
                            r.pipeline_next = true;
                        }
                    }
                }
                Step::Send(x) => {
                    let op = SendOp {
                        name: self.name(&x.name, NameKind::Request),
                        data: self.template(&x.data),
                        expect: x.expect.clone(),
                        capture: false,
                    };
                    ops.push(Op::Send(op));
                }
                Step::Xmpp(x) => {
                    let op = XmppOp {
                        name: self.name(&x.name, NameKind::Request),
                        action: x
                            .action
                            .clone()
                            .map_text(|t| Ok::<_, String>(self.template(&t)))?,
                        ack: x.ack,
                    };
                    ops.push(Op::Xmpp(op));
                }
                Step::Sql(q) => {
                    let op = SqlOp {
                        name: self.name(&q.name, NameKind::Request),
                        query: self.template(&q.query),
                        params: q.params.iter().map(|p| self.template(p)).collect(),
                        prepare: q.prepare,
                        capture: false,
                    };
                    ops.push(Op::Sql(op));
                }
                Step::File(f) => {
                    let op = FileOp {
                        name: self.name(&f.name, NameKind::Request),
                        action: f
                            .action
                            .clone()
                            .map_path(|t| Ok::<_, String>(self.template(&t)))?,
                    };
                    ops.push(Op::File(op));
                }
                Step::Ws(x) => {
                    let op = WsOp {
                        name: self.name(&x.name, NameKind::Request),
                        action: x
                            .action
                            .clone()
                            .map_text(|t| Ok::<_, String>(self.template(&t)))?,
                        capture: false,
                    };
                    ops.push(Op::Ws(op));
                }
                Step::Mqtt(x) => {
                    let op = MqttOp {
                        name: self.name(&x.name, NameKind::Request),
                        action: x
                            .action
                            .clone()
                            .map_text(|t| Ok::<_, String>(self.template(&t)))?,
                    };
                    ops.push(Op::Mqtt(op));
                }
                Step::Amqp(x) => {
                    let op = AmqpOp {
                        name: self.name(&x.name, NameKind::Request),
                        action: x
                            .action
                            .clone()
                            .map_text(|t| Ok::<_, String>(self.template(&t)))?,
                    };
                    ops.push(Op::Amqp(op));
                }
                Step::Ldap(x) => {
                    let op = LdapOp {
                        name: self.name(&x.name, NameKind::Request),
                        action: x
                            .action
                            .clone()
                            .map_text(|t| Ok::<_, String>(self.template(&t)))?,
                    };
                    ops.push(Op::Ldap(op));
                }
                Step::Think(d) => ops.push(Op::Think(*d)),
                Step::Loop(l) => {
                    let slot = *loops;
                    *loops += 1;
                    ops.push(Op::LoopInit { slot });
                    let test = ops.len();
                    let condition = l.condition.as_ref().map(|c| match c {
                        Condition::While(v) => LoopCondition {
                            var: self.var(v),
                            while_true: true,
                        },
                        Condition::Until(v) => LoopCondition {
                            var: self.var(v),
                            while_true: false,
                        },
                    });
                    let counter = l.counter.as_ref().map(|c| LoopCounterOp {
                        var: self.var(&c.var),
                        start: c.start,
                        step: c.step,
                    });
                    ops.push(Op::LoopTest {
                        slot,
                        count: l.count,
                        condition,
                        counter,
                        exit: 0,
                    });
                    self.steps(&l.steps, ops, loops)?;
                    ops.push(Op::Jump(test));
                    let exit_at = ops.len();
                    if let Op::LoopTest { exit, .. } = &mut ops[test] {
                        *exit = exit_at;
                    }
                }
                Step::Transaction { name, steps } => {
                    let id = self.name(name, NameKind::Transaction);
                    ops.push(Op::TxBegin(id));
                    self.steps(steps, ops, loops)?;
                    ops.push(Op::TxEnd(id));
                }
                Step::Cookie(c) => ops.push(Op::Cookie(match c {
                    CookieStep::Set {
                        name,
                        value,
                        domain,
                        path,
                    } => CookieOp::Set {
                        name: name.clone(),
                        value: self.template(value),
                        domain: domain.clone(),
                        path: path.clone(),
                    },
                    CookieStep::Clear => CookieOp::Clear,
                })),
                Step::Connect => ops.push(Op::Connect),
                Step::Close => ops.push(Op::Close),
                Step::Set { var, source } => {
                    let source = match source {
                        SetSource::Value(v) => SetOp::Value(self.template(v)),
                        SetSource::Csv {
                            file,
                            column,
                            order,
                        } => SetOp::Csv {
                            feeder: self.feeder(file)?,
                            column: *column,
                            row: match order {
                                CsvOrder::Sequential => CsvRow::Next,
                                CsvOrder::Random => CsvRow::Random,
                                CsvOrder::SameRow => CsvRow::Same,
                            },
                        },
                        SetSource::RandomNumber { min, max } => SetOp::RandomNumber {
                            min: *min,
                            max: *max,
                        },
                        SetSource::RandomString { length } => {
                            SetOp::RandomString { length: *length }
                        }
                        SetSource::Sequence { start, step } => SetOp::Sequence {
                            start: *start,
                            step: *step,
                        },
                        SetSource::UserId => SetOp::UserId,
                        // Checked by the parser (syntax, types, variables defined before);
                        // parsed again here to give its variables their ids.
                        SetSource::Expr(text) => SetOp::Expr(
                            headroom_core::expr::parse(text, &mut |name: &str| {
                                Ok::<_, String>(self.var(name))
                            })
                            .map_err(|e| format!("set {var}: expr '{text}': {e}"))?,
                        ),
                    };
                    let var = self.var(var);
                    ops.push(Op::Set { var, source });
                }
                Step::Extract(e) => {
                    let from = e.from.clone();
                    let default = e.default.as_deref().map(|d| self.template(d));
                    let var = self.var(&e.var);
                    ops.push(Op::Extract { var, from, default });
                }
                Step::Match(m) => {
                    let id = match self.matches.iter().position(|x| x == &m.name) {
                        Some(i) => i,
                        None => {
                            self.matches.push(m.name.clone());
                            self.matches.len() - 1
                        }
                    } as u16;
                    ops.push(Op::Match(MatchOp {
                        id,
                        status: m.status,
                        body: m.body.clone(),
                        when_matched: m.when_matched,
                        action: m.action,
                        max_loops: m.max_loops,
                    }));
                }
            }
        }
        Ok(())
    }
}

/// A request keeps its reply's bytes when an `extract`, or a `match` on the body, follows it
/// before the next request in op order.
fn mark_captures(ops: &mut [Op]) {
    let mut needed = false;
    for op in ops.iter_mut().rev() {
        match op {
            Op::Extract { .. } => needed = true,
            Op::Match(m) if m.body.is_some() => needed = true,
            Op::Request(r) => {
                r.capture = needed;
                needed = false;
            }
            Op::Send(x) => {
                x.capture = needed;
                needed = false;
            }
            Op::Ws(w) => {
                // Only a message that waits for its reply has one to keep.
                w.capture = needed && matches!(w.action, WsAction::Message { reply: true, .. });
                needed = false;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compiled(yaml: &str) -> Compiled {
        let s = crate::parse_str(yaml, "t.yaml").expect("valid");
        compile(&s, Path::new(".")).expect("compiles")
    }

    /// Issue 26: a scenario with more distinct names than [`MAX_NAMES`] (a HAR of thousands
    /// of URLs) keeps figures for the first 500 and one shared figure for the rest, named
    /// with their count, per kind: memory per name is a histogram in every recorder.
    #[test]
    fn names_past_the_cap_share_one_figure_per_kind() {
        let mut steps = String::new();
        for i in 0..MAX_NAMES + 250 {
            steps.push_str(&format!("  - request: GET /r{i}\n"));
        }
        for i in 0..3 {
            steps.push_str(&format!(
                "  - transaction: {{name: t{i}, steps: [{{request: GET /r0}}]}}\n"
            ));
        }
        // Named again past the cap: still its own figure.
        steps.push_str("  - request: GET /r7\n");
        let c = compiled(&format!(
            "load: {{users: [{{count: 1}}]}}\nsessions:\n- name: s\n  steps:\n{steps}"
        ));
        let names = &c.workload.names;
        assert_eq!(names.len(), MAX_NAMES + 2, "500 own, 2 overflow figures");
        let want = format!("(other: 250 names past the first {MAX_NAMES})");
        let req = names
            .iter()
            .position(|n| n.name == want)
            .expect("request overflow");
        assert_eq!(names[req].kind, NameKind::Request);
        let tx = names
            .iter()
            .position(|n| n.name == format!("(other: 3 names past the first {MAX_NAMES})"))
            .expect("transaction overflow");
        assert_eq!(names[tx].kind, NameKind::Transaction);
        let SessionBody::Ops { ops, .. } = &c.workload.sessions[0].body else {
            panic!("ops")
        };
        let ids: Vec<NameId> = ops
            .iter()
            .filter_map(|o| match o {
                Op::Request(r) => Some(r.name),
                _ => None,
            })
            .collect();
        assert_eq!(ids[7], 7);
        assert_eq!(ids[MAX_NAMES - 1] as usize, MAX_NAMES - 1);
        assert!(ids[MAX_NAMES..MAX_NAMES + 250]
            .iter()
            .all(|&i| i as usize == req));
        assert_eq!(*ids.last().unwrap(), 7, "GET /r7 again: its own figure");
    }

    #[test]
    fn loops_and_transactions_flatten_with_jumps() {
        let c = compiled(
            r#"
load: {users: [{count: 2}]}
sessions:
- name: s
  steps:
  - loop: {count: 3, steps: [{request: GET /a}, {extract: {var: t, header: X-T}}]}
  - transaction: {name: tx, steps: [{request: "GET /b/${t}"}]}
"#,
        );
        let SessionBody::Ops { ops, loops } = &c.workload.sessions[0].body else {
            panic!("ops")
        };
        assert_eq!(*loops, 1);
        assert!(matches!(ops[0], Op::LoopInit { slot: 0 }));
        assert!(matches!(
            ops[1],
            Op::LoopTest {
                count: Some(3),
                exit: 5,
                ..
            }
        ));
        let Op::Request(a) = &ops[2] else { panic!() };
        assert!(a.capture, "an extract follows /a");
        assert!(matches!(ops[4], Op::Jump(1)));
        assert!(matches!(ops[5], Op::TxBegin(_)));
        let Op::Request(b) = &ops[6] else { panic!() };
        assert!(!b.capture);
        assert_eq!(b.path.0.len(), 2, "literal + variable: {:?}", b.path);
        assert_eq!(c.users, 2);
        let kinds: Vec<_> = c.workload.names.iter().map(|n| n.kind).collect();
        assert_eq!(
            kinds,
            [NameKind::Request, NameKind::Transaction, NameKind::Request]
        );
    }

    #[test]
    fn stages_become_the_ramp() {
        let sessions = "sessions:\n  - {name: a, steps: [{request: GET /}]}\n  - {name: b, steps: [{request: GET /b}]}\n";
        let c = compiled(&format!(
            "load:\n  stages: [{{duration: 10s, users: 50}}, {{duration: 5s, users: 0}}]\n{sessions}"
        ));
        assert_eq!(c.users, 50, "the peak's users draw from the mix");
        assert_eq!(c.workload.populations, vec![(50, None)]);
        assert_eq!(c.ramp.len(), 2);
        assert_eq!(
            headroom_core::RampStage::total(&c.ramp),
            Duration::from_secs(15)
        );
        let c = compiled(&format!(
            "load:\n  users: [{{count: 20, session: a}}, {{count: 30, session: b}}]\n  stages: [{{duration: 10s, users: 50}}]\n{sessions}"
        ));
        assert_eq!(c.workload.populations, vec![(20, Some(0)), (30, Some(1))]);
        assert_eq!(c.ramp[0].users, 50);
        for (bad, says) in [
            (
                "users: [{count: 20}]\n  stages: [{duration: 10s, users: 50}]",
                "add up to 20",
            ),
            ("stages: [{duration: 10s, users: 0}]", "never rise above 0"),
            ("stages: [{duration: 0s, users: 5}]", "lasts 0s"),
            ("stages: [{duration: 10s, users: -3}]", "whole number"),
            ("stages: [{duration: 10s}]", "missing 'users'"),
            (
                "stages: [{duration: 10s, users: 5, vus: 3}]",
                "unknown key 'vus'",
            ),
        ] {
            let e =
                crate::parse_str(&format!("load:\n  {bad}\n{sessions}"), "t.yaml").expect_err(bad);
            let text = e
                .iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("\n");
            assert!(
                text.contains(says) && text.contains("t.yaml:"),
                "{bad}: {text}"
            );
        }
    }

    #[test]
    fn weights_become_cumulative_and_phases_carry_over() {
        let c = compiled(
            "load: {phases: [{duration: 10s, arrival_rate: 5}, {duration: 5s, ramp: {from: 1, to: 3}, arrival: constant}]}\n\
             sessions:\n\
             - {name: a, weight: 1, steps: [{request: GET /}]}\n\
             - {name: b, weight: 3, steps: [{request: GET /}]}\n",
        );
        assert_eq!(c.workload.cumulative, vec![0.25, 1.0]);
        assert_eq!(c.phases.len(), 2);
        assert_eq!((c.phases[1].from, c.phases[1].to), (1.0, 3.0));
        assert_eq!(c.phases[1].process, ArrivalProcess::Constant);
        assert_eq!(c.phases_duration, Duration::from_secs(15));
        assert_eq!(c.users, 0);
    }

    #[test]
    fn a_missing_csv_is_a_clear_error() {
        let s = crate::parse_str(
            "load: {users: [{count: 1}]}\n\
             sessions: [{name: a, steps: [{set: {var: u, csv: {file: nope.csv}}}, {request: \"GET /${u}\"}]}]\n",
            "t.yaml",
        )
        .unwrap();
        let e = compile(&s, Path::new("/nonexistent")).unwrap_err();
        assert!(e.contains("/nonexistent/nope.csv"), "{e}");
    }
}
