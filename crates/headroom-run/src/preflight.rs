//! Checks before the load: the target answers (and speaks TLS, and HTTP/2 when asked), and
//! this process may open the descriptors its connections need. `headroom run` and every agent
//! make them, so a wrong port or a too-low `ulimit -n` is one line naming the fix, not a run
//! full of errors.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use headroom_core::{LoadModel, Plan};

use crate::usage::UsageError;

/// This process's soft limit of open descriptors.
pub fn soft_fd_limit() -> u64 {
    // SAFETY: as above.
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 {
            r.rlim_cur
        } else {
            1024
        }
    }
}

/// One blocking connect before the load starts, as wrk does: a wrong port is one clear line,
/// not a run full of `refused`.
pub fn preflight(plan: &Plan) -> anyhow::Result<()> {
    if plan.workload.as_deref().is_some_and(|w| !w.uses_network()) {
        // Only file steps (and thinks, sets...): nothing connects.
        return Ok(());
    }
    if let Some(tls) = plan
        .tls
        .as_ref()
        .filter(|t| t.upgrade == headroom_core::TlsUpgrade::Direct)
    {
        // A TLS run: the handshake too, so a wrong certificate or a plain-text port is one
        // line naming the cause and the fix.
        return match headroom_engine::tls::probe(plan.target, tls, plan.connect_timeout) {
            Ok(p) if plan.http2.is_some() && p.alpn.as_deref() != Some(b"h2") => anyhow::bail!(
                "{} ({}) does not speak HTTP/2 over TLS: headroom offered ALPN h2 and the \
                 server chose {} — drop --http2 for HTTP/1.1, or enable http2 on the server \
                 (--no-preflight loads it anyway)",
                plan.target,
                plan.target_name,
                p.alpn
                    .map(|a| String::from_utf8_lossy(&a).into_owned())
                    .unwrap_or_else(|| "none".into())
            ),
            Ok(_) => Ok(()),
            Err(e) => anyhow::bail!(
                "TLS to {} ({}) failed{}: {} (--no-preflight loads it anyway)",
                plan.target,
                plan.target_name,
                e.kind
                    .map(|k| format!(" [{}]", k.name()))
                    .unwrap_or_default(),
                e.message
            ),
        };
    }
    match std::net::TcpStream::connect_timeout(&plan.target, plan.connect_timeout) {
        Ok(_) => Ok(()),
        Err(e) => anyhow::bail!(
            "cannot connect to {} ({}): {} — is the server running and listening there? \
             (--no-preflight loads it anyway)",
            plan.target,
            plan.target_name,
            e.to_string().to_lowercase()
        ),
    }
}

/// `headroom run`'s check after [`preflight`], for an `--h2c` URL run: HTTP/2's preface (no
/// request: an h2c server answers with its SETTINGS) shows a server that speaks HTTP/1.1 only.
/// Agents skip it: the controller made it.
pub fn protocol_probe(plan: &Plan) -> anyhow::Result<()> {
    if plan.workload.is_some() || plan.tls.is_some() || plan.http2.is_none() {
        return Ok(());
    }
    let Ok(tcp) = std::net::TcpStream::connect_timeout(&plan.target, plan.connect_timeout) else {
        return Ok(());
    };
    match h2c_refused(tcp, plan.connect_timeout.min(PROBE_WAIT)) {
        Some(line) => anyhow::bail!(
            "{} ({}) {line} (--no-preflight loads it anyway)",
            plan.target,
            plan.target_name
        ),
        None => Ok(()),
    }
}

/// How long a probe waits for the server's first bytes. It looks for proof of a wrong
/// protocol only: a server slower than this is loaded as asked.
const PROBE_WAIT: Duration = Duration::from_secs(2);

/// What the probe keeps of a reply: enough for a status line.
const PROBE_BYTES: usize = 4096;

/// Up to [`PROBE_BYTES`] of what the server sends within `wait` (until it closes, or `enough`
/// says the bytes so far decide), and whether it closed (EOF or reset).
fn read_some(
    tcp: &mut TcpStream,
    wait: Duration,
    enough: impl Fn(&[u8]) -> bool,
) -> (Vec<u8>, bool) {
    let deadline = Instant::now() + wait;
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while got.len() < PROBE_BYTES && !enough(&got) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || tcp.set_read_timeout(Some(left)).is_err() {
            return (got, false);
        }
        match tcp.read(&mut buf) {
            Ok(0) => return (got, true),
            Ok(n) => got.extend_from_slice(&buf[..n.min(PROBE_BYTES - got.len())]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return (got, false)
            }
            Err(_) => return (got, true),
        }
    }
    (got, false)
}

/// A plain-text HTTP/1.1 URL run in which nothing has succeeded, its failures replies of 4xx
/// (nginx answers plain HTTP on its `ssl` port with `400` "The plain HTTP request was sent to
/// HTTPS port") or protocol errors, resets or closes (a TLS alert, a hang-up): one TLS handshake
/// (certificate not checked) tells whether the port speaks TLS, and `Some(line)` says so with
/// the fix. Made during the run, after its first interval, rather than before it: a probe
/// before the load would have to send a request the server counts and the run does not.
pub fn tls_port(plan: &Plan, c: &headroom_metrics::Counters) -> Option<String> {
    use headroom_core::ErrorKind as K;
    if plan.workload.is_some() || plan.tls.is_some() || plan.http2.is_some() {
        return None;
    }
    let e = |k: K| c.errors[k.index()];
    let failed = e(K::Http4xx) + e(K::Protocol) + e(K::Reset) + e(K::Closed);
    if failed == 0 || failed < c.errors_total() || c.responses > e(K::Http4xx) {
        return None;
    }
    let mut o = headroom_core::TlsOptions::new(plan.target.ip().to_string());
    o.insecure = true;
    o.resume = false;
    headroom_engine::tls::probe(plan.target, &o, plan.connect_timeout.min(PROBE_WAIT)).ok()?;
    let got = if e(K::Http4xx) > 0 {
        let codes: Vec<String> = c.codes_seen().map(|(code, _)| code.to_string()).collect();
        format!("`{}` replies", codes.join("`, `"))
    } else {
        "protocol errors".to_string()
    };
    Some(format!(
        "{} ({}) is a TLS port: plain HTTP got only {got} there, and a TLS handshake succeeds — \
         use {}",
        plan.target,
        plan.target_name,
        https_url(&plan.target_name)
    ))
}

/// An `--h2c` run: HTTP/2's connection preface and an empty SETTINGS frame, which an h2c server
/// answers with its SETTINGS. A server that answers in HTTP/1.1 (`400`, `505`) or hangs up
/// does not speak h2c; `Some(line)` says so.
fn h2c_refused(mut tcp: TcpStream, wait: Duration) -> Option<String> {
    let _ = tcp.set_write_timeout(Some(wait));
    let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    hello.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    if tcp.write_all(&hello).is_err() {
        return None;
    }
    let (got, closed) = read_some(&mut tcp, wait, |b| {
        b.len() >= 9 && !b.starts_with(b"HTTP/") || b.windows(2).any(|w| w == b"\r\n")
    });
    drop(tcp);
    let fix = "drop --h2c for HTTP/1.1, or load a server that speaks h2c (HTTP/2 in clear text with prior knowledge)";
    if got.starts_with(b"HTTP/") {
        let line = status_line(&got).unwrap_or_else(|| "HTTP/1.x".into());
        return Some(format!(
            "does not speak h2c: it answered HTTP/2's preface with `{line}` — {fix}"
        ));
    }
    if got.is_empty() && closed {
        return Some(format!(
            "does not speak h2c: it closed the connection on HTTP/2's preface — {fix}"
        ));
    }
    None
}

/// The status line at the start of `b` (`HTTP/1.1 400 Bad Request`), if it is one.
fn status_line(b: &[u8]) -> Option<String> {
    let end = b.windows(2).position(|w| w == b"\r\n")?;
    let line = std::str::from_utf8(&b[..end]).ok()?;
    (line.starts_with("HTTP/") && line.len() <= 80).then(|| line.to_string())
}

/// `https://…` for a run's `http://…` URL, to say what to type instead.
fn https_url(name: &str) -> String {
    match name.get(..7) {
        Some(p) if p.eq_ignore_ascii_case("http://") => format!("https://{}", &name[7..]),
        _ => "an https:// URL".into(),
    }
}

pub fn check_fd_budget(plan: &Plan) -> anyhow::Result<()> {
    let conns = connections_of(plan);
    let limit = soft_fd_limit();
    if conns + 64 > limit {
        return Err(UsageError(format!(
            "{conns} connections need {conns} descriptors but this process may open {limit}; \
             lower -c, or raise the limit (ulimit -n) — past ~20,000 use several processes \
             (--agents local:N)"
        ))
        .into());
    }
    Ok(())
}

/// An agent's check: its segment's share of the connections must fit its descriptors.
pub fn check_fd_budget_share(plan: &Plan) -> anyhow::Result<()> {
    let total = connections_of(plan);
    let count = u64::from(plan.segment.count.max(1));
    let mine = total / count + u64::from(u64::from(plan.segment.index) < total % count);
    let limit = soft_fd_limit();
    if mine + 64 > limit {
        anyhow::bail!(
            "this agent's {mine} of {total} connections need {mine} descriptors but it may open \
             {limit}; use more agents"
        );
    }
    Ok(())
}

/// Connections a plan holds at once when every user is connected (0 when unbounded).
pub fn connections_of(plan: &Plan) -> u64 {
    match plan.model {
        LoadModel::Closed { users, .. } => u64::from(users),
        LoadModel::Rate { connections, .. } => u64::from(connections),
        LoadModel::Open { .. } => 0,
        LoadModel::Sessions { users, .. } => u64::from(users),
    }
}
