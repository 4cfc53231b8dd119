//! The command line's small parsers, and the usage error they and every subcommand return.
//!
//! A leaf: this module imports nothing from the rest of the crate, and every other module
//! (`args`, `dist`, `import`, `k8s`, `lab`, `report`, `serve`, `scenario`, `main`) takes
//! [`UsageError`] and the `parse_*` value parsers from here, so the subcommand modules never
//! import `args` back (`args` names their clap types; the arrow goes one way). The parsers
//! return `Result<_, String>` where clap calls them as `value_parser`s (clap prints the string
//! after the flag's name), and `Result<_, UsageError>` where validation code calls them.
//!
//! [`UsageError`] is how "well-formed for clap but makes no sense" travels up to `main`, which
//! finds it with `downcast_ref` and exits with code 2 (docs/cli.md); any other error exits 1.
//! [`parse_listen`] lives beside the live server it configures (`headroom_report::live_server`)
//! and is re-exported here for the `--dashboard` and `--metrics-listen` flags.

use std::net::{IpAddr, Ipv4Addr};

use headroom_core::StatusSet;

pub use headroom_report::live_server::parse_listen;

/// A command line that is well-formed for clap but makes no sense: exit code 2. The run
/// library's own type, so a spec it refuses exits 2 the same way.
pub use headroom_run::UsageError;

/// `Err(UsageError(msg))`, for the `return usage(...)` of validation code.
pub fn usage<T>(msg: impl Into<String>) -> Result<T, UsageError> {
    Err(UsageError(msg.into()))
}

/// `10s`, `500ms`, `1m30s`, `2h`, or a bare number of seconds (the run library's, which
/// checks a spec's `--stage` and `--think` durations the same way).
pub use headroom_run::spec::parse_duration;

/// `8192`, `8k`, `64KiB`, `6m`, `1MiB` (k and m are binary: 1024 and 1048576).
pub fn parse_size(s: &str) -> Result<u32, String> {
    let t = s.trim().to_ascii_lowercase();
    let err = || format!("'{s}' is not a size; use e.g. 8192, 8k, 6m");
    let (num, mult) = if let Some(n) = t.strip_suffix("kib").or(t.strip_suffix('k')) {
        (n, 1024u64)
    } else if let Some(n) = t.strip_suffix("mib").or(t.strip_suffix('m')) {
        (n, 1024 * 1024)
    } else {
        (t.as_str(), 1)
    };
    let n: u64 = num.trim().parse().map_err(|_| err())?;
    let v = n.checked_mul(mult).ok_or_else(err)?;
    if v == 0 || v > i32::MAX as u64 {
        return Err(format!("'{s}' is out of range: 1 byte to 2 GiB"));
    }
    Ok(v as u32)
}

/// `0.01` or `1%`.
pub fn parse_rate(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|v| v / 100.0),
        None => t.parse::<f64>(),
    };
    match v {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "'{s}' is not an error rate; use a fraction from 0 to 1 (0.01) or a percentage (1%)"
        )),
    }
}

/// `--expect-status`: codes, ranges and classes (see [`StatusSet`]'s `FromStr`).
pub fn parse_expect_status(s: &str) -> Result<String, String> {
    s.parse::<StatusSet>().map(|_| s.to_string())
}

/// `--bind`: `127.0.0.2-127.0.0.50` (inclusive IPv4 range) or a comma-separated list.
pub fn parse_bind(s: &str) -> Result<Vec<IpAddr>, UsageError> {
    let bad = |why: String| {
        usage(format!(
            "bad --bind '{s}': {why}; use e.g. 127.0.0.2-127.0.0.50 or 127.0.0.2,127.0.0.3"
        ))
    };
    if let Some((a, b)) = s.split_once('-') {
        let (Ok(a), Ok(b)) = (a.trim().parse::<Ipv4Addr>(), b.trim().parse::<Ipv4Addr>()) else {
            return bad("a range takes two IPv4 addresses".into());
        };
        let (a, b) = (u32::from(a), u32::from(b));
        if b < a {
            return bad("the range ends before it starts".into());
        }
        if b - a >= 65_536 {
            return bad("the range is larger than 65,536 addresses".into());
        }
        return Ok((a..=b).map(|v| IpAddr::V4(Ipv4Addr::from(v))).collect());
    }
    let mut out = Vec::new();
    for part in s.split(',') {
        match part.trim().parse::<IpAddr>() {
            Ok(ip) => out.push(ip),
            Err(_) => return bad(format!("'{}' is not an IP address", part.trim())),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn durations_sizes_rates() {
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert!(parse_duration("soon")
            .unwrap_err()
            .contains("not a duration"));
        assert_eq!(parse_size("8k").unwrap(), 8192);
        assert_eq!(parse_size("6m").unwrap(), 6 << 20);
        assert!(parse_size("0").is_err());
        assert_eq!(parse_rate("1%").unwrap(), 0.01);
        assert_eq!(parse_rate("0.2").unwrap(), 0.2);
        assert!(parse_rate("150%").is_err());
    }

    #[test]
    fn bind_ranges_and_lists() {
        assert_eq!(parse_bind("127.0.0.2-127.0.0.50").unwrap().len(), 49);
        assert_eq!(parse_bind("127.0.0.2, 127.0.0.3").unwrap().len(), 2);
        assert!(parse_bind("127.0.0.9-127.0.0.2").is_err());
        assert!(parse_bind("127.0.0.1-127.1.0.1").is_err());
        assert!(parse_bind("nope")
            .unwrap_err()
            .0
            .contains("is not an IP address"));
    }
}
