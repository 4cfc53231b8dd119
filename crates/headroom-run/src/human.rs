//! What a person reads: the live progress line on stderr and the human summary at the end
//! (like wrk's), with the number formats they share.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use headroom_core::session::ArrivalPhase;
use headroom_core::session::{LinkSpec, NameKind, Workload};
use headroom_core::{ArrivalProcess, ErrorKind, LoadModel, Plan, ProtoCounter, RampStage};
use headroom_engine::{Interval, RunOutcome};
use headroom_metrics::{Counters, LatencyStats, Recorder};

use crate::summary::SelfUsage;
use crate::thresholds::{Checked, Unit};
pub use headroom_core::numbers::thousands;

/// Live progress on stderr: one rewritten line on a terminal, one plain line per interval
/// otherwise (so logs and CI output stay readable).
pub struct Progress {
    tty: bool,
    total: Option<Duration>,
    responses: u64,
    errors: u64,
    /// Intervals in a row in which the generator was at its limit, and whether that was said.
    limited_run: u32,
    warned: bool,
}

/// Intervals in a row at its limit before the generator warns while the run goes.
const LIMITED_INTERVALS: u32 = 3;

impl Progress {
    pub fn new(total: Option<Duration>) -> Progress {
        Progress {
            tty: std::io::stderr().is_terminal(),
            total,
            responses: 0,
            errors: 0,
            limited_run: 0,
            warned: false,
        }
    }

    pub fn interval(&mut self, iv: &Interval<'_>) {
        let c = &iv.merged.counters;
        self.responses += c.responses;
        self.errors += c.errors_total();
        if let Some(why) = generator_at_limit(iv) {
            self.limited_run += 1;
            if self.limited_run >= LIMITED_INTERVALS && !self.warned {
                self.warned = true;
                let mut e = std::io::stderr().lock();
                if self.tty {
                    let _ = write!(e, "\r\x1b[K");
                }
                let _ = writeln!(
                    e,
                    "headroom: warning: the generator is the limit ({why}, {LIMITED_INTERVALS} \
                     intervals in a row): the figures measure headroom, not the server (give it \
                     more --threads or cores, or agents)"
                );
            }
        } else {
            self.limited_run = 0;
        }
        let elapsed = iv.start + iv.length;
        let clock = match self.total {
            Some(t) => format!("{:>6.1}s/{:.0}s", elapsed.as_secs_f64(), t.as_secs_f64()),
            None => format!("{:>6.1}s", elapsed.as_secs_f64()),
        };
        let rps = c.responses as f64 / iv.length.as_secs_f64().max(1e-9);
        let p99 = if iv.merged.latency.is_empty() {
            0
        } else {
            iv.merged.latency.value_at_quantile(0.99)
        };
        let line = format!(
            "[{clock}] users {:>6}  conns {:>6}  {:>10} req/s  p99 {:>8}  responses {:>10}  errors {}",
            c.users_active,
            c.connections_open,
            thousands(rps.round() as u64),
            fmt_us(p99),
            thousands(self.responses),
            thousands(self.errors),
        );
        let mut e = std::io::stderr().lock();
        if self.tty {
            let _ = write!(e, "\r\x1b[K{line}");
        } else {
            let _ = writeln!(e, "{line}");
        }
        let _ = e.flush();
    }

    pub fn finish(&self) {
        if self.tty {
            eprintln!();
        }
    }
}

/// Why the generator was at its limit in one interval: every worker used at least 90% of a
/// core, or 1% of its timed sends went out 10 ms late or more (of at least 100).
fn generator_at_limit(iv: &Interval<'_>) -> Option<String> {
    let c = &iv.merged.counters;
    if c.worker_intervals > 0 && c.worker_busy_intervals == c.worker_intervals {
        return Some(format!(
            "its workers used {:.0}% of a core each",
            c.worker_cpu_us as f64
                / 1e4
                / iv.length.as_secs_f64().max(1e-9)
                / c.worker_intervals as f64
        ));
    }
    let lag = &iv.merged.lag;
    let p99_ms = lag.value_at_quantile(0.99) as f64 / 1000.0;
    let late_ms = headroom_metrics::LATE_LAG_US as f64 / 1000.0;
    (lag.len() >= 100 && p99_ms >= late_ms)
        .then(|| format!("1% of its sends went out {p99_ms:.0} ms late or more"))
}

/// The generator's self-check and the verdict, for the end of the human summary.
pub fn verdict_human(s: &headroom_format::RunSummary) -> String {
    let g = &s.generator;
    let late = if g.lag_us.count == 0 {
        "no timed sends".to_string()
    } else {
        format!(
            "timed sends late p99 {} (of {})",
            fmt_us(g.lag_us.p99),
            thousands(g.lag_us.count)
        )
    };
    let mut out = format!(
        "  Self-check   {} worker(s) at {:.0}% of a core each; {late}{}\n",
        g.workers,
        g.worker_cpu_pct,
        if g.limits.is_empty() {
            String::new()
        } else {
            format!(
                "\n  WARNING      the generator was the limit: {}",
                g.limits.join("; ")
            )
        }
    );
    if let Some(v) = &s.verdict {
        out.push_str(&format!("  Verdict      {}: {}\n", v.name, v.says));
    }
    out
}

/// Microseconds as a short human figure: 850µs, 1.25ms, 3.40s.
pub fn fmt_us(us: u64) -> String {
    if us < 1_000 {
        format!("{us}µs")
    } else if us < 1_000_000 {
        format!("{:.2}ms", us as f64 / 1e3)
    } else {
        format!("{:.2}s", us as f64 / 1e6)
    }
}

fn fmt_bytes(b: f64) -> String {
    if b >= 1024.0 * 1024.0 {
        format!("{:.1} MiB", b / 1024.0 / 1024.0)
    } else if b >= 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{b:.0} B")
    }
}

fn lat_line(s: &LatencyStats) -> String {
    if s.count == 0 {
        return "no samples".into();
    }
    format!(
        "mean {}  p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
        fmt_us(s.mean.round() as u64),
        fmt_us(s.p50),
        fmt_us(s.p90),
        fmt_us(s.p99),
        fmt_us(s.p999),
        fmt_us(s.max)
    )
}

/// A length as the flags write it: `10s`, `1.5s`, `250ms`.
fn dur(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 1.0 {
        format!("{}ms", d.as_millis())
    } else {
        format!("{}s", (s * 100.0).round() / 100.0)
    }
}

/// How a closed population came and went, to follow `N users`: `ramped up over 10s` (one
/// stage, `--ramp-up`), or every stage (`--stage`, `load.stages`): `in stages: 0 → 100 over
/// 10s, 100 for 30s, 100 → 0 over 10s`. `None` without a ramp (every user at once).
pub fn ramp_words(stages: &[RampStage]) -> Option<String> {
    match stages {
        [] => None,
        [one] => Some(format!("ramped up over {}", dur(one.duration))),
        _ => {
            let mut from = 0;
            let steps: Vec<String> = stages
                .iter()
                .map(|s| {
                    let t = if s.users == from {
                        format!("{} for {}", s.users, dur(s.duration))
                    } else {
                        format!("{from} → {} over {}", s.users, dur(s.duration))
                    };
                    from = s.users;
                    t
                })
                .collect();
            Some(format!("in stages: {}", steps.join(", ")))
        }
    }
}

/// An arrival phase in words: `Poisson arrivals 20 → 60 users/s over 3s`, `evenly spaced
/// arrivals 10 users/s over 5s (at most 40 users)`.
pub fn phase_words(p: &ArrivalPhase) -> String {
    let process = match p.process {
        ArrivalProcess::Poisson => "Poisson arrivals",
        ArrivalProcess::Constant => "evenly spaced arrivals",
    };
    let rate = if p.from == p.to {
        format!("{}", p.from)
    } else {
        format!("{} → {}", p.from, p.to)
    };
    let mut t = format!("{process} {rate} users/s over {}", dur(p.duration));
    if let Some(m) = p.max_users {
        t.push_str(&format!(" (at most {m} users)"));
    }
    t
}

/// The load in the summary's first line: the model, its users or rate, and how they came (a
/// ramp's stages, a scenario's arrival phases).
pub fn model_words(model: &LoadModel, ramp: &[RampStage]) -> String {
    let ramp = ramp_words(ramp)
        .map(|r| format!(" {r}"))
        .unwrap_or_default();
    match model {
        LoadModel::Closed {
            users,
            per_user: Some(n),
            ..
        } => format!("closed model, {users} users x {n} requests{ramp}"),
        LoadModel::Closed { users, .. } => format!("closed model, {users} users{ramp}"),
        LoadModel::Rate { connections, rate } => {
            format!("constant rate {rate} req/s over {connections} connections")
        }
        LoadModel::Open {
            rate,
            process,
            per_user,
            ..
        } => {
            format!("open model, {rate} users/s ({process:?}), {per_user} requests each")
        }
        LoadModel::Sessions { users, phases } => {
            let closed = (*users > 0).then(|| format!("{users} closed users{ramp}"));
            let phases = (!phases.is_empty()).then(|| {
                phases
                    .iter()
                    .map(phase_words)
                    .collect::<Vec<_>>()
                    .join(", then ")
            });
            match (closed, phases) {
                (Some(c), Some(p)) => format!("sessions, {c}, beside {p}"),
                (Some(c), None) => format!("sessions, {c}"),
                (None, Some(p)) => format!("sessions, {p}"),
                (None, None) => "sessions, no users".to_string(),
            }
        }
    }
}

/// The human summary, like wrk's.
pub fn human_summary(plan: &Plan, out: &RunOutcome, usage: &SelfUsage) -> String {
    let t = &out.total;
    let c = &t.counters;
    let secs = out.elapsed.as_secs_f64().max(1e-9);
    let model = match plan.http2 {
        // The streams beside the users, then how they came: `H2C, closed model, 40 users x 4
        // stream(s), ramped up over 1s`.
        Some(h) => format!(
            "{}, {} x {} stream(s){}",
            crate::summary::protocol_name(plan).to_uppercase(),
            model_words(&plan.model, &[]),
            h.streams,
            ramp_words(&plan.ramp)
                .map(|r| format!(", {r}"))
                .unwrap_or_default()
        ),
        None => model_words(&plan.model, &plan.ramp),
    };
    let mut s = String::new();
    let w = &mut s;
    use std::fmt::Write as _;
    let _ = writeln!(
        w,
        "{} — {model}, {} thread(s), {:.1}s{}",
        plan.target_name,
        plan.threads,
        secs,
        if out.interrupted {
            " (interrupted)"
        } else {
            ""
        }
    );
    let _ = writeln!(
        w,
        "  Requests     {} sent, {} answered{}",
        thousands(c.requests),
        thousands(c.responses),
        if out.in_flight > 0 {
            format!(", {} in flight at stop", thousands(out.in_flight))
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        w,
        "  Throughput   {} req/s, {}/s in, {}/s out",
        thousands((c.responses as f64 / secs).round() as u64),
        fmt_bytes(c.bytes_received as f64 / secs),
        fmt_bytes(c.bytes_sent as f64 / secs)
    );
    let _ = writeln!(
        w,
        "  Latency      {}",
        lat_line(&LatencyStats::of(&t.latency))
    );
    let _ = writeln!(
        w,
        "  uncorrected  {}",
        lat_line(&LatencyStats::of(&t.latency_uncorrected))
    );
    let _ = writeln!(
        w,
        "  Connect      {}  ({} connects)",
        lat_line(&LatencyStats::of(&t.connect)),
        thousands(c.connects)
    );
    if !t.tls.is_empty() {
        use headroom_core::ProtoCounter;
        let resumed = c.proto[ProtoCounter::TlsResumed.index()];
        let _ = writeln!(
            w,
            "  TLS          {}  ({} handshakes, {} resumed)",
            lat_line(&LatencyStats::of(&t.tls)),
            thousands(c.proto[ProtoCounter::TlsHandshakes.index()]),
            thousands(resumed)
        );
        // What was negotiated: one line per combination, the most frequent first.
        let label = |i: usize| if i == 0 { "Negotiated" } else { "" };
        let figures = crate::summary::negotiated_of(&t.negotiated);
        for (i, f) in figures.iter().enumerate() {
            let _ = writeln!(
                w,
                "  {:<12} {}  ({} handshakes)",
                label(i),
                f.words(),
                thousands(f.handshakes)
            );
        }
        if t.negotiated.other > 0 {
            let _ = writeln!(
                w,
                "  {:<12} other combinations  ({} handshakes)",
                label(figures.len()),
                thousands(t.negotiated.other)
            );
        }
    }
    let classes: Vec<String> = ["other", "1xx", "2xx", "3xx", "4xx", "5xx"]
        .iter()
        .zip(c.status.iter())
        .filter(|(_, v)| **v > 0)
        .map(|(n, v)| format!("{n} {}", thousands(*v)))
        .collect();
    let _ = writeln!(
        w,
        "  Status       {}{}",
        if classes.is_empty() {
            "none".into()
        } else {
            classes.join(", ")
        },
        if plan.expect_status.is_empty() {
            String::new()
        } else {
            format!("  (expected: {})", plan.expect_status)
        }
    );
    // One line per exact code seen, as hey prints them.
    for (code, n) in c.codes_seen() {
        let _ = writeln!(w, "    [{code}]      {} responses", thousands(n));
    }
    if let Some(line) = http_line(c) {
        let _ = writeln!(w, "  Users        {line}");
    }
    let errs: Vec<String> = ErrorKind::ALL
        .iter()
        .filter(|k| c.errors[k.index()] > 0)
        .map(|k| format!("{} {}", k.name(), thousands(c.errors[k.index()])))
        .collect();
    let _ = writeln!(
        w,
        "  Errors       {}",
        if errs.is_empty() {
            "none".into()
        } else {
            format!(
                "{} ({:.2}%): {}",
                thousands(c.errors_total()),
                100.0 * c.error_rate(),
                errs.join(", ")
            )
        }
    );
    // Served: the server sent a byte on them. TCP handshakes alone may sit in its accept
    // queue; say so when the two differ.
    let queued = if out.tcp_connected_peak > out.connections_peak {
        format!(
            " served (TCP-connected peak {}: the rest waited in the server's accept queue)",
            thousands(out.tcp_connected_peak)
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        w,
        "  Connections  peak {}{queued}, users started {}, finished {}",
        thousands(out.connections_peak),
        thousands(c.users_started),
        thousands(c.users_finished)
    );
    if !t.served.is_empty() && out.tcp_connected_peak > out.connections_peak {
        let _ = writeln!(
            w,
            "  Served after {}  (TCP connect to the server's first byte)",
            lat_line(&LatencyStats::of(&t.served))
        );
    }
    if c.idle_closed > 0 || c.reconnects > 0 {
        let _ = writeln!(
            w,
            "  Idle closes  {} connection(s) closed by the server while idle (keep-alive \
             timeout), {} reconnect(s); not errors",
            thousands(c.idle_closed),
            thousands(c.reconnects)
        );
    }
    let cpu = usage.cpu_user_s + usage.cpu_sys_s;
    let _ = writeln!(
        w,
        "  Generator    CPU {:.2}s user + {:.2}s sys ({:.0} req per CPU-second), max RSS {}",
        usage.cpu_user_s,
        usage.cpu_sys_s,
        if cpu > 0.0 {
            c.responses as f64 / cpu
        } else {
            0.0
        },
        fmt_bytes(usage.max_rss_kb as f64 * 1024.0)
    );
    s
}

/// One line of what users did besides their requests, when they did anything.
fn http_line(c: &headroom_metrics::Counters) -> Option<String> {
    use headroom_core::ProtoCounter as P;
    let mut parts: Vec<String> = [
        (P::HttpRedirects, "redirects followed"),
        (P::HttpCookiesStored, "cookies stored"),
        (P::HttpCookiesMalformed, "malformed Set-Cookie"),
        (P::HttpCookiesRejected, "cookies rejected"),
        (P::HttpCookiesEvicted, "cookies evicted"),
        (P::HttpAuthChallenges, "auth challenges answered"),
        (P::HttpAuthFailed, "auth failed"),
    ]
    .iter()
    .filter(|(k, _)| c.proto[k.index()] > 0)
    .map(|(k, what)| format!("{} {what}", thousands(c.proto[k.index()])))
    .collect();
    let compressed = c.proto[P::HttpCompressedResponses.index()];
    if compressed > 0 {
        // Bodies as sent and as decoded: the ratio is what compression saved on the wire.
        let enc = c.proto[P::HttpBodyBytesEncoded.index()];
        let dec = c.proto[P::HttpBodyBytesDecoded.index()];
        let ratio = if enc > 0 {
            dec as f64 / enc as f64
        } else {
            0.0
        };
        parts.push(format!(
            "{} compressed responses ({} sent, {} decoded, {ratio:.1}x)",
            thousands(compressed),
            fmt_bytes(enc as f64),
            fmt_bytes(dec as f64),
        ));
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// The protocol counters as a few human lines.
fn protocol_human(w: &Workload, c: &Counters) -> Option<String> {
    let p = |k: ProtoCounter| thousands(c.proto[k.index()]);
    use ProtoCounter::*;
    let files = w.has_file_ops().then(|| {
        format!(
            "  Files        {} operations, {} read, {} written; failed: not found {}, \
             permission denied {}, no space {}, not open {}, escaping the root {}, other {} \
             (already there: {})\n",
            p(FileOps),
            fmt_bytes(c.proto[FileBytesRead.index()] as f64),
            fmt_bytes(c.proto[FileBytesWritten.index()] as f64),
            p(FileNotFound),
            p(FilePermissionDenied),
            p(FileNoSpace),
            p(FileNotOpen),
            p(FileEscapes),
            p(FileOtherErrors),
            p(FileAlreadyExists),
        )
    });
    let exprs = w.has_expr_sets().then(|| {
        format!(
            "  Set expr     {} evaluated; failed, ending the session: not an integer {}, \
             overflow {}, division by zero {}\n",
            p(ExprEvaluated),
            p(ExprNotInteger),
            p(ExprOverflow),
            p(ExprDivisionByZero),
        )
    });
    let lines: String = [protocol_link_human(w, c), files, exprs]
        .into_iter()
        .flatten()
        .collect();
    (!lines.is_empty()).then_some(lines)
}

/// The counters of the servers' protocol as a few human lines.
fn protocol_link_human(w: &Workload, c: &Counters) -> Option<String> {
    let p = |k: ProtoCounter| thousands(c.proto[k.index()]);
    use ProtoCounter::*;
    Some(match &w.link {
        LinkSpec::Plain => return None,
        LinkSpec::Xmpp(_) => {
            let sent = c.proto[XmppChatSent.index()];
            let got = c.proto[XmppChatReceived.index()];
            let ratio = if sent > 0 {
                format!(" ({:.1}% of sent)", got as f64 * 100.0 / sent as f64)
            } else {
                String::new()
            };
            format!(
                "  XMPP         {} logins; chats sent {}, received {}{ratio}\n\
                 \x20              stanzas sent: message {}, presence {}, iq {}, other {}\n\
                 \x20              received: message {}, presence {}, iq {}, other {}\n\
                 \x20              iq errors {}, stream errors {}, no destination {}\n",
                p(XmppLogins),
                p(XmppChatSent),
                p(XmppChatReceived),
                p(XmppSentMessage),
                p(XmppSentPresence),
                p(XmppSentIq),
                p(XmppSentOther),
                p(XmppReceivedMessage),
                p(XmppReceivedPresence),
                p(XmppReceivedIq),
                p(XmppReceivedOther),
                p(XmppErrorReplies),
                p(XmppStreamErrors),
                p(XmppNoDestination),
            )
        }
        LinkSpec::Pgsql(_) => format!(
            "  PostgreSQL   {} statements, {} rows, {} SQL errors\n",
            p(PgQueries),
            p(PgRows),
            p(PgSqlErrors)
        ),
        LinkSpec::WebSocket(_) => format!(
            "  WebSocket    messages sent {}, received {}; pings {}, pongs {}, closes {} received\n",
            p(WsMessagesSent),
            p(WsMessagesReceived),
            p(WsPingsReceived),
            p(WsPongsReceived),
            p(WsClosesReceived)
        ),
        LinkSpec::Mqtt(_) => format!(
            "  MQTT         {} connects; published {} ({} acknowledged, {} refused); received {} \
             ({} dup)\n\x20              subscribed {} ({} refused); pings {}, broker \
             disconnects {}\n",
            p(MqttConnects),
            p(MqttPublished),
            p(MqttPublishAcked),
            p(MqttPublishRefused),
            p(MqttReceived),
            p(MqttReceivedDup),
            p(MqttSubscribed),
            p(MqttSubscribeRefused),
            p(MqttPings),
            p(MqttServerDisconnects),
        ),
        LinkSpec::Amqp(_) => format!(
            "  AMQP         published {} ({} confirmed, {} refused, {} returned); delivered {} \
             ({} acknowledged); channels closed by the broker {}\n",
            p(AmqpPublished),
            p(AmqpConfirmed),
            p(AmqpNacked),
            p(AmqpReturned),
            p(AmqpDelivered),
            p(AmqpAcked),
            p(AmqpChannelsClosed)
        ),
        LinkSpec::Mysql(_) => format!(
            "  MySQL        {} statements ({} prepared), {} rows, {} affected, {} SQL errors\n",
            p(MysqlQueries),
            p(MysqlPrepares),
            p(MysqlRows),
            p(MysqlAffected),
            p(MysqlSqlErrors)
        ),
        LinkSpec::Ldap => format!(
            "  LDAP         {} requests, {} entries; results: success {}, noSuchObject {}, \
             invalidCredentials {},\n\x20              entryAlreadyExists {}, \
             insufficientAccessRights {}, sizeLimitExceeded {}, busy/unavailable {}, \
             unwillingToPerform {}, other {}; notices {}\n",
            p(LdapRequests),
            p(LdapEntries),
            p(LdapSuccess),
            p(LdapNoSuchObject),
            p(LdapInvalidCredentials),
            p(LdapEntryAlreadyExists),
            p(LdapInsufficientAccessRights),
            p(LdapSizeLimitExceeded),
            p(LdapBusy),
            p(LdapUnwillingToPerform),
            p(LdapOtherResults),
            p(LdapNotices),
        ),
    })
}

/// Human lines: one per name, then sessions and thresholds.
pub fn scenario_human(plan: &Plan, total: &Recorder, checked: &[Checked]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let Some(w) = plan.workload.as_ref() else {
        return s;
    };
    let width = w.names.iter().map(|m| m.name.len() + 3).max().unwrap_or(4);
    let _ = writeln!(
        s,
        "  {:<width$}  {:>9} {:>7} {:>9} {:>9} {:>9}",
        "Name", "count", "errors", "p50", "p99", "max"
    );
    for (m, n) in w.names.iter().zip(total.names.iter()) {
        let label = match m.kind {
            NameKind::Request => m.name.clone(),
            NameKind::Transaction => format!("tx {}", m.name),
        };
        let st = LatencyStats::of(&n.latency);
        let _ = writeln!(
            s,
            "  {label:<width$}  {:>9} {:>7} {:>9} {:>9} {:>9}",
            thousands(n.count),
            thousands(n.errors),
            fmt_us(st.p50),
            fmt_us(st.p99),
            fmt_us(st.max)
        );
    }
    for (m, c) in w.matches.iter().zip(total.matches.iter()) {
        let _ = writeln!(s, "  match '{m}' fired {}", thousands(*c));
    }
    let c = &total.counters;
    let mean = if total.sessions.is_empty() {
        String::new()
    } else {
        format!(" (mean {})", fmt_us(total.sessions.mean().round() as u64))
    };
    let _ = writeln!(
        s,
        "  Sessions     {} completed{mean}, {} aborted{}",
        thousands(c.sessions_completed),
        thousands(c.sessions_aborted),
        if c.users_dropped > 0 {
            format!(
                ", {} arrivals dropped (max_users)",
                thousands(c.users_dropped)
            )
        } else {
            String::new()
        }
    );
    if let Some(line) = protocol_human(w, c) {
        s.push_str(&line);
    }
    for t in checked {
        // An unmeasured value shows as NaN, as it always has.
        let v = t.value.unwrap_or(f64::NAN);
        let shown = match t.unit {
            Unit::Micros if v.is_finite() => fmt_us(v as u64),
            Unit::Fraction => format!("{:.3}%", v * 100.0),
            _ => format!("{v:.1}"),
        };
        let _ = writeln!(
            s,
            "  Threshold    {} {}: {} ({})",
            t.threshold,
            t.condition,
            if t.ok { "ok" } else { "BROKEN" },
            shown
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(secs: u64, users: u32) -> RampStage {
        RampStage {
            duration: Duration::from_secs(secs),
            users,
        }
    }

    #[test]
    fn a_ramp_reads_in_the_header() {
        let closed = LoadModel::Closed {
            users: 500,
            per_user: None,
            think: None,
        };
        assert_eq!(model_words(&closed, &[]), "closed model, 500 users");
        // Issue 27: `-c 500 --ramp-up 10s` printed `closed model, 500 users`.
        assert_eq!(
            model_words(&closed, &[stage(10, 500)]),
            "closed model, 500 users ramped up over 10s"
        );
        let peak = LoadModel::Closed {
            users: 100,
            per_user: None,
            think: None,
        };
        assert_eq!(
            model_words(&peak, &[stage(10, 100), stage(30, 100), stage(10, 0)]),
            "closed model, 100 users in stages: 0 → 100 over 10s, 100 for 30s, 100 → 0 over 10s"
        );
        let each = LoadModel::Closed {
            users: 20,
            per_user: Some(5),
            think: None,
        };
        assert_eq!(
            model_words(&each, &[stage(2, 20)]),
            "closed model, 20 users x 5 requests ramped up over 2s"
        );
        assert_eq!(
            ramp_words(&[RampStage {
                duration: Duration::from_millis(1500),
                users: 3
            }])
            .unwrap(),
            "ramped up over 1.5s"
        );
    }

    #[test]
    fn phases_and_rates_read_in_the_header() {
        let phase = |from: f64, to: f64, process, max_users| ArrivalPhase {
            duration: Duration::from_secs(3),
            from,
            to,
            process,
            max_users,
        };
        let sessions = LoadModel::Sessions {
            users: 0,
            phases: vec![
                phase(20.0, 60.0, ArrivalProcess::Poisson, None),
                phase(60.0, 60.0, ArrivalProcess::Constant, Some(40)),
            ],
        };
        assert_eq!(
            model_words(&sessions, &[]),
            "sessions, Poisson arrivals 20 → 60 users/s over 3s, then evenly spaced arrivals \
             60 users/s over 3s (at most 40 users)"
        );
        let both = LoadModel::Sessions {
            users: 8,
            phases: vec![phase(2.5, 2.5, ArrivalProcess::Poisson, None)],
        };
        assert_eq!(
            model_words(&both, &[stage(5, 8)]),
            "sessions, 8 closed users ramped up over 5s, beside Poisson arrivals 2.5 users/s \
             over 3s"
        );
        let rate = LoadModel::Rate {
            connections: 10,
            rate: 1000.0,
        };
        assert_eq!(
            model_words(&rate, &[]),
            "constant rate 1000 req/s over 10 connections"
        );
    }

    #[test]
    fn formatting() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(fmt_us(850), "850µs");
        assert_eq!(fmt_us(1250), "1.25ms");
        assert_eq!(fmt_us(3_400_000), "3.40s");
    }
}
