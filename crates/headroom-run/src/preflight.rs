//! Checks before the load: the target answers (and speaks TLS, and HTTP/2 when asked), and
//! this process may open the descriptors its connections need. `headroom run` and every agent
//! make them, so a wrong port or a too-low `ulimit -n` is one line naming the fix, not a run
//! full of errors.

use headroom_core::{LoadModel, Plan};

use crate::spec::UsageError;

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
