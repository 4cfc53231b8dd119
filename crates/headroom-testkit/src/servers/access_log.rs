//! The access-log lines of the TLS / HTTP/2 test servers (nginx and h2o), parsed into one shape
//! so a test counts requests by protocol, TLS version, session reuse and connection the same way
//! against either server.

use std::path::Path;
use std::thread;
use std::time::Duration;

/// One logged request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLine {
    /// The client's address (`127.0.0.1`).
    pub source: String,
    /// `HTTP/1.1`, `HTTP/1.0` or `HTTP/2.0` (h2o writes `HTTP/2`; it is normalized to nginx's
    /// spelling).
    pub protocol: String,
    /// Whether the TLS session was resumed (an abbreviated handshake); `None` without TLS.
    pub reused: Option<bool>,
    /// `TLSv1.2` or `TLSv1.3`; `None` without TLS.
    pub tls: Option<String>,
    pub status: u16,
    /// The server's connection id: distinct values = connections that carried requests.
    pub connection: String,
    pub uri: String,
}

fn opt(field: &str) -> Option<&str> {
    match field {
        "" | "-" => None,
        f => Some(f),
    }
}

/// Parse `SOURCE PROTOCOL REUSED TLS STATUS CONNECTION URI` (the format both servers are given).
pub fn parse_line(line: &str) -> Option<LogLine> {
    let f: Vec<&str> = line.split(' ').collect();
    if f.len() < 7 {
        return None;
    }
    let protocol = match f[1] {
        "HTTP/2" => "HTTP/2.0".to_string(),
        p => p.to_string(),
    };
    let tls = opt(f[3]).map(str::to_string);
    // nginx: "r" resumed, "." full; h2o: "1" / "0". Without TLS both log "-" (nginx's empty
    // variable).
    let reused = tls.as_ref().and(opt(f[2]).map(|r| r == "r" || r == "1"));
    Some(LogLine {
        source: f[0].to_string(),
        protocol,
        reused,
        tls,
        status: f[4].parse().ok()?,
        connection: f[5].to_string(),
        uri: f[6..].join(" "),
    })
}

/// The text of the log at `path` once the file has stopped growing (read every 50 ms until two
/// reads agree, 2.5 s at most): a server writes a line when a request completes.
pub fn settled_text(path: &Path) -> String {
    let mut last = None;
    let mut text = String::new();
    for _ in 0..50 {
        text = std::fs::read_to_string(path).unwrap_or_default();
        if last == Some(text.len()) {
            break;
        }
        last = Some(text.len());
        thread::sleep(Duration::from_millis(50));
    }
    text
}

/// Every line of the log at `path`, once the file has stopped growing (the servers write a line
/// when a request completes; give them a moment to settle). Lines that do not parse panic: the
/// format is ours.
pub fn read_settled(path: &Path) -> Vec<LogLine> {
    settled_text(path)
        .lines()
        .map(|l| parse_line(l).unwrap_or_else(|| panic!("unexpected access-log line: {l}")))
        .collect()
}

/// Counting helpers shared by the nginx and h2o harness types.
pub trait AccessLog {
    /// Every logged request so far.
    fn log_lines(&self) -> Vec<LogLine>;

    /// Requests logged with this protocol (`"HTTP/2.0"`, `"HTTP/1.1"`).
    fn logged_protocol(&self, protocol: &str) -> usize {
        self.log_lines()
            .iter()
            .filter(|l| l.protocol == protocol)
            .count()
    }

    /// Requests logged on a resumed TLS session.
    fn logged_reused(&self) -> usize {
        self.log_lines()
            .iter()
            .filter(|l| l.reused == Some(true))
            .count()
    }

    /// Requests logged on a connection whose TLS version was `version` (`"TLSv1.3"`).
    fn logged_tls(&self, version: &str) -> usize {
        self.log_lines()
            .iter()
            .filter(|l| l.tls.as_deref() == Some(version))
            .count()
    }

    /// Requests logged with this status.
    fn logged_status(&self, status: u16) -> usize {
        self.log_lines()
            .iter()
            .filter(|l| l.status == status)
            .count()
    }

    /// Distinct connections that carried the logged requests.
    fn logged_connections(&self) -> usize {
        let mut ids: Vec<String> = self.log_lines().into_iter().map(|l| l.connection).collect();
        ids.sort();
        ids.dedup();
        ids.len()
    }
}
