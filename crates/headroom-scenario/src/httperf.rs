//! Import of httperf `--wsesslog` session files into a [`Scenario`].
//!
//! The format (httperf's man page): sessions are separated by blank lines; `#` starts a comment
//! line. Each line is `URI [method=M] [contents=TEXT] [think=SECONDS]`. A line that does not
//! start with white space begins a *burst*; the indented lines after it are further requests of
//! the same burst. `think=` is the user's think time after the burst. Values may be quoted with
//! `'` or `"`; inside quotes `\n`, `\r`, `\t`, `\\` and `\"` are escapes.
//!
//! How it maps:
//!
//! - one server (`HttperfOptions::host`, `port`) and one Poisson phase of
//!   `HttperfOptions::rate` users/s (default 1) lasting `HttperfOptions::duration` (default 60 s):
//!   each arriving user runs one session, as httperf's `--wsesslog` with `--rate` does;
//! - each session of the file is a session `session-N` (N from 1) of weight 1;
//! - **bursts**: httperf sends a burst's first request (the unindented line) alone; once its
//!   reply is in, it issues the burst's other requests (the indented lines) concurrently —
//!   pipelined on the session's connection when `--max-piped-calls` allows, as in the studies
//!   that use wsesslog. So the first becomes a `request` step and the others a `pipeline` step
//!   (their requests written back to back, replies read in order, each timed and counted under
//!   its own name; one alone is a `request`). Two cases split the pipeline into consecutive
//!   ones, each with a located warning: HEAD mixed with other methods (headroom reads a whole
//!   pipeline's replies as HEAD replies or none) and more than [`MAX_PIPELINE`] requests. The
//!   burst's `think=` becomes a constant `think` after it; after a session's last burst it is
//!   left out (httperf ends the session there);
//! - httperf's default think time (the `X` of `--wsesslog=N,X,FILE`) is not in the file; give it
//!   per burst with `think=`.

use crate::model::*;
use crate::tsung::{finish, Imported, Locator};
use crate::ScenarioError;
use headroom_core::Distribution;
use std::path::Path;
use std::time::Duration;

/// What the wsesslog file does not say: where to send, and the arrival rate and duration.
#[derive(Debug, Clone, PartialEq)]
pub struct HttperfOptions {
    pub host: String,
    pub port: u16,
    /// Sessions started per second (httperf's `--rate`); `None` is 1/s.
    pub rate: Option<f64>,
    pub duration: Duration,
}

impl Default for HttperfOptions {
    fn default() -> Self {
        HttperfOptions {
            host: "127.0.0.1".into(),
            port: 80,
            rate: None,
            duration: Duration::from_secs(60),
        }
    }
}

/// Converts an httperf `--wsesslog` file. `file_name` is used in warnings and errors and for the
/// scenario's name (its stem). Returns every error found, in file order.
pub fn import_httperf(
    text: &str,
    file_name: &str,
    opts: &HttperfOptions,
) -> Result<Imported, Vec<ScenarioError>> {
    let at = Locator::new(text, file_name);
    let mut c = Conv {
        at: &at,
        errors: Vec::new(),
        warnings: Vec::new(),
    };
    let rate = opts.rate.unwrap_or(1.0);
    if !(rate.is_finite() && rate > 0.0) {
        c.error(
            0,
            format!("rate {rate}: expected a positive number of sessions per second"),
        );
    }
    if opts.duration.is_zero() {
        c.error(0, "duration: expected more than 0s");
    }
    if opts.host.is_empty() || opts.port == 0 {
        c.error(0, "host and port (> 0) are needed");
    }
    let sessions = c.sessions(text);
    let scenario = Scenario {
        file_root: None,
        name: Path::new(file_name)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .filter(|s| !s.is_empty()),
        servers: vec![Server {
            http2: false,
            host: opts.host.clone(),
            port: opts.port,
            protocol: Protocol::Http,
            tls: None,
        }],
        load: Load {
            phases: vec![Phase {
                duration: opts.duration,
                rate: Rate::Fixed(rate),
                arrival: Arrival::Poisson,
                max_users: None,
            }],
            users: Vec::new(),
            stages: Vec::new(),
            once: Vec::new(),
        },
        sessions,
        thresholds: Vec::new(),
        link: LinkSpec::Plain,
        http: Default::default(),
    };
    finish(scenario, c.warnings, c.errors, file_name)
}

struct Burst {
    /// Each request with the byte offset of its line.
    requests: Vec<(usize, Request)>,
    think: Option<Duration>,
}

struct Conv<'a> {
    at: &'a Locator<'a>,
    errors: Vec<ScenarioError>,
    warnings: Vec<ScenarioError>,
}

impl Conv<'_> {
    fn error(&mut self, pos: usize, msg: impl Into<String>) {
        let e = self.at.error(pos, msg);
        self.errors.push(e);
    }

    fn warn(&mut self, pos: usize, msg: impl Into<String>) {
        let w = self.at.error(pos, msg);
        self.warnings.push(w);
    }

    fn sessions(&mut self, text: &str) -> Vec<Session> {
        let mut sessions: Vec<Vec<Burst>> = Vec::new();
        let mut current: Vec<Burst> = Vec::new();
        let mut offset = 0;
        for raw in text.split_inclusive('\n') {
            let start = offset;
            offset += raw.len();
            let line = raw.trim_end_matches(['\n', '\r']);
            let body = line.trim_start();
            if body.is_empty() {
                if !current.is_empty() {
                    sessions.push(std::mem::take(&mut current));
                }
                continue;
            }
            if body.starts_with('#') {
                continue;
            }
            let indent = line.len() - body.len();
            let Some((request, think)) = self.line(body, start + indent) else {
                continue;
            };
            if indent == 0 {
                current.push(Burst {
                    requests: vec![(start, request)],
                    think,
                });
                continue;
            }
            let Some(burst) = current.last_mut() else {
                self.error(
                    start + indent,
                    "an indented line continues a burst, but no burst has started in this session",
                );
                continue;
            };
            burst.requests.push((start + indent, request));
            if let Some(t) = think {
                if burst.think.is_some() {
                    self.error(start + indent, "a second think= in the same burst");
                } else {
                    burst.think = Some(t);
                }
            }
        }
        if !current.is_empty() {
            sessions.push(current);
        }
        if sessions.is_empty() && self.errors.is_empty() {
            self.error(text.len(), "no session in the file");
        }
        sessions
            .into_iter()
            .enumerate()
            .map(|(i, bursts)| {
                let n = bursts.len();
                let mut steps = Vec::new();
                for (j, b) in bursts.into_iter().enumerate() {
                    self.burst_steps(b.requests, &mut steps);
                    if let Some(t) = b.think.filter(|_| j + 1 < n) {
                        steps.push(Step::Think(Distribution::Constant(t)));
                    }
                }
                Session {
                    name: format!("session-{}", i + 1),
                    weight: 1.0,
                    steps,
                    surge: None,
                }
            })
            .collect()
    }

    /// The steps of one burst: its first request alone, then the others as `pipeline`s, as
    /// httperf issues them once the first reply is in. A new pipeline starts where HEAD meets
    /// another method (a pipeline's replies are all read as HEAD replies or none) or after
    /// `MAX_PIPELINE` requests; each split is warned about at the request that starts it.
    fn burst_steps(&mut self, requests: Vec<(usize, Request)>, steps: &mut Vec<Step>) {
        let mut requests = requests.into_iter();
        let Some((_, first)) = requests.next() else {
            return;
        };
        steps.push(Step::Request(first));
        let requests: Vec<(usize, Request)> = requests.collect();
        let total = requests.len();
        let mut groups: Vec<Vec<Request>> = Vec::new();
        for (pos, r) in requests {
            let split = groups.last().map(|g| {
                let head = |r: &Request| r.method == "HEAD";
                (g.len() >= MAX_PIPELINE, head(&g[0]) != head(&r))
            });
            match split {
                Some((false, false)) => {
                    groups.last_mut().expect("checked").push(r);
                    continue;
                }
                Some((full, _)) => {
                    let why = if full {
                        format!("more than {MAX_PIPELINE} requests in one pipeline")
                    } else {
                        "HEAD and other methods cannot share a pipeline (replies to HEAD have \
                         no body)"
                            .to_string()
                    };
                    self.warn(
                        pos,
                        format!("the {total} pipelined requests of this burst are split here into another pipeline: {why}"),
                    );
                }
                None => {}
            }
            groups.push(vec![r]);
        }
        for mut g in groups {
            if g.len() == 1 {
                steps.push(Step::Request(g.remove(0)));
            } else {
                steps.push(Step::Pipeline(g));
            }
        }
    }

    /// One request line (`body` starts at byte `pos` of the file): the request and its `think=`.
    fn line(&mut self, body: &str, pos: usize) -> Option<(Request, Option<Duration>)> {
        let words = match split_words(body) {
            Ok(w) => w,
            Err((at, msg)) => {
                self.error(pos + at, msg);
                return None;
            }
        };
        let (uri_at, uri) = words.first()?.clone();
        let mut ok = true;
        if !uri.starts_with('/') {
            self.error(
                pos + uri_at,
                format!("'{uri}': expected a URI path starting with '/'"),
            );
            ok = false;
        }
        let mut method = "GET".to_string();
        let mut body_text = None;
        let mut think = None;
        for (at, word) in &words[1..] {
            let (key, value) = word.split_once('=').unwrap_or((word.as_str(), ""));
            match key {
                "method" => {
                    if value.is_empty() || !value.chars().all(|c| c.is_ascii_uppercase()) {
                        self.error(
                            pos + at,
                            format!("method={value}: expected an upper-case HTTP method"),
                        );
                        ok = false;
                    }
                    method = value.to_string();
                }
                "contents" => body_text = Some(value.to_string()),
                "think" => match value.parse::<f64>().ok().map(Duration::try_from_secs_f64) {
                    Some(Ok(d)) => think = Some(d),
                    _ => {
                        self.error(pos + at, format!("think={value}: expected seconds >= 0"));
                        ok = false;
                    }
                },
                _ => self.warn(pos + at, format!("'{key}' is not honoured")),
            }
        }
        for text in std::iter::once(&uri).chain(body_text.as_ref()) {
            if text.contains("${") {
                self.error(
                    pos + uri_at,
                    format!("'{text}' holds '${{', which headroom reads as a variable and cannot escape"),
                );
                ok = false;
            }
        }
        ok.then(|| {
            (
                Request {
                    name: format!("{method} {uri}"),
                    method,
                    path: uri,
                    headers: Vec::new(),
                    body: body_text,
                    auth: None,
                    oauth: None,
                },
                think,
            )
        })
    }
}

/// Splits a line into words with their byte offsets; quotes group (and are removed), with
/// backslash escapes inside them.
fn split_words(line: &str) -> Result<Vec<(usize, String)>, (usize, String)> {
    let mut out = Vec::new();
    let mut chars = line.char_indices().peekable();
    while let Some(&(start, c)) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        let mut word = String::new();
        while let Some(&(i, c)) = chars.peek() {
            if c.is_whitespace() {
                break;
            }
            chars.next();
            if c != '\'' && c != '"' {
                word.push(c);
                continue;
            }
            let quote = c;
            let mut closed = false;
            while let Some((_, c)) = chars.next() {
                if c == quote {
                    closed = true;
                    break;
                }
                if c == '\\' {
                    match chars.next() {
                        Some((_, 'n')) => word.push('\n'),
                        Some((_, 'r')) => word.push('\r'),
                        Some((_, 't')) => word.push('\t'),
                        Some((_, other)) => word.push(other),
                        None => break,
                    }
                } else {
                    word.push(c);
                }
            }
            if !closed {
                return Err((i, format!("unclosed {quote}")));
            }
        }
        out.push((start, word));
    }
    Ok(out)
}
