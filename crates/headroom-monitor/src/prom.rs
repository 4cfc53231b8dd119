//! Scraping a Prometheus / OpenMetrics text endpoint as extra server series.
//!
//! The text format (Prometheus 0.0.4, and the OpenMetrics subset servers expose): one sample a
//! line, `name{label="value",...} value [timestamp]`; `#` lines are HELP/TYPE comments (`# EOF`
//! ends an OpenMetrics body). The scrape is one blocking HTTP/1.0 GET with a timeout: a sampler
//! thread does it once an interval, so no async client is needed, and the parser is written here
//! because the crates that parse the format pull in a registry and a client we do not use.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

/// One sample of one series.
#[derive(Debug, Clone, PartialEq)]
pub struct PromSample {
    pub name: String,
    /// In the order the endpoint wrote them.
    pub labels: Labels,
    pub value: f64,
}

impl PromSample {
    /// `name` or `name{k="v",...}`: the series as Prometheus writes it.
    pub fn key(&self) -> String {
        if self.labels.is_empty() {
            return self.name.clone();
        }
        let labels: Vec<String> = self
            .labels
            .iter()
            .map(|(k, v)| {
                let v = v
                    .replace('\\', "\\\\")
                    .replace('"', "\\\"")
                    .replace('\n', "\\n");
                format!("{k}=\"{v}\"")
            })
            .collect();
        format!("{}{{{}}}", self.name, labels.join(","))
    }
}

/// A line the parser could not read.
#[derive(Debug, Clone, PartialEq)]
pub struct PromError {
    /// 1-based.
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for PromError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for PromError {}

fn name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// Parse a text exposition body into its samples.
pub fn parse(text: &str) -> Result<Vec<PromSample>, PromError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            if comment.trim() == "EOF" {
                break;
            }
            continue;
        }
        let err = |message: String| PromError {
            line: i + 1,
            message,
        };
        out.push(parse_sample(line).map_err(err)?);
    }
    Ok(out)
}

fn parse_sample(line: &str) -> Result<PromSample, String> {
    let mut chars = line.char_indices().peekable();
    match chars.peek() {
        Some((_, c)) if name_start(*c) => {}
        _ => return Err(format!("expected a metric name at the start of '{line}'")),
    }
    let mut end = line.len();
    while let Some(&(at, c)) = chars.peek() {
        if !name_char(c) {
            end = at;
            break;
        }
        chars.next();
    }
    let name = line[..end].to_string();
    let mut rest = &line[end..];
    let mut labels = Vec::new();
    if let Some(body) = rest.strip_prefix('{') {
        let (parsed, after) = parse_labels(body)?;
        labels = parsed;
        rest = after;
    }
    let rest = rest.trim_start();
    // OpenMetrics exemplars follow a ` # `; they are not part of the sample.
    let rest = rest.split(" # ").next().unwrap_or("");
    let mut fields = rest.split_ascii_whitespace();
    let value_text = fields
        .next()
        .ok_or_else(|| format!("'{name}' has no value"))?;
    let value = parse_value(value_text)
        .ok_or_else(|| format!("'{name}': '{value_text}' is not a number"))?;
    if let Some(ts) = fields.next() {
        if ts.parse::<f64>().is_err() {
            return Err(format!("'{name}': '{ts}' is not a timestamp"));
        }
    }
    if let Some(extra) = fields.next() {
        return Err(format!("'{name}': unexpected '{extra}' after the value"));
    }
    Ok(PromSample {
        name,
        labels,
        value,
    })
}

/// Label name -> value pairs, in the order written.
type Labels = Vec<(String, String)>;

/// Labels up to the closing brace; returns them and the text after the brace.
fn parse_labels(mut s: &str) -> Result<(Labels, &str), String> {
    let mut labels = Vec::new();
    loop {
        s = s.trim_start();
        if let Some(after) = s.strip_prefix('}') {
            return Ok((labels, after));
        }
        let end = s.find(|c: char| !name_char(c)).unwrap_or(s.len());
        if end == 0 || !s.starts_with(name_start) {
            return Err(format!("expected a label name at '{s}'"));
        }
        let key = s[..end].to_string();
        s = s[end..].trim_start();
        s = s
            .strip_prefix('=')
            .ok_or_else(|| format!("expected '=' after label '{key}'"))?
            .trim_start();
        s = s
            .strip_prefix('"')
            .ok_or_else(|| format!("label '{key}': expected a quoted value"))?;
        let mut value = String::new();
        let mut it = s.char_indices();
        let close = loop {
            match it.next() {
                None => return Err(format!("label '{key}': unterminated value")),
                Some((at, '"')) => break at,
                Some((_, '\\')) => match it.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c @ ('\\' | '"'))) => value.push(c),
                    Some((_, c)) => {
                        value.push('\\');
                        value.push(c);
                    }
                    None => return Err(format!("label '{key}': unterminated value")),
                },
                Some((_, c)) => value.push(c),
            }
        };
        labels.push((key, value));
        s = s[close + 1..].trim_start();
        if let Some(after) = s.strip_prefix(',') {
            s = after;
        } else if !s.starts_with('}') {
            return Err(format!("expected ',' or '}}' after a label at '{s}'"));
        }
    }
}

fn parse_value(t: &str) -> Option<f64> {
    match t {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => t.parse::<f64>().ok(),
    }
}

/// Scrapes one `http://HOST:PORT/path` endpoint.
#[derive(Debug, Clone)]
pub struct Scraper {
    addr: SocketAddr,
    host: String,
    path: String,
    timeout: Duration,
}

/// Bodies above this are refused (a scrape is a few KiB; this bounds a runaway endpoint).
const MAX_BODY: u64 = 8 << 20;

impl Scraper {
    /// `url` is `http://HOST:PORT/path` (no TLS); HOST is resolved once, here.
    pub fn new(url: &str, timeout: Duration) -> Result<Scraper, String> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("'{url}': a Prometheus endpoint is http://HOST:PORT/path"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/metrics"),
        };
        let with_port = if authority
            .rsplit_once(':')
            .is_some_and(|(_, p)| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        {
            authority.to_string()
        } else {
            format!("{authority}:80")
        };
        let addr = with_port
            .to_socket_addrs()
            .map_err(|e| format!("'{url}': cannot resolve {authority}: {e}"))?
            .next()
            .ok_or_else(|| format!("'{url}': {authority} has no address"))?;
        Ok(Scraper {
            addr,
            host: authority.to_string(),
            path: path.to_string(),
            timeout,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// One GET and parse.
    pub fn scrape(&self) -> Result<Vec<PromSample>, String> {
        let body = self.fetch()?;
        parse(&body).map_err(|e| format!("{}{}: {e}", self.addr, self.path))
    }

    fn fetch(&self) -> Result<String, String> {
        let at = || format!("{}{}", self.addr, self.path);
        let mut s = TcpStream::connect_timeout(&self.addr, self.timeout)
            .map_err(|e| format!("{}: {e}", at()))?;
        s.set_read_timeout(Some(self.timeout))
            .and_then(|_| s.set_write_timeout(Some(self.timeout)))
            .map_err(|e| format!("{}: {e}", at()))?;
        let req = format!(
            "GET {} HTTP/1.0\r\nHost: {}\r\nAccept: text/plain;version=0.0.4\r\nConnection: close\r\n\r\n",
            self.path, self.host
        );
        s.write_all(req.as_bytes())
            .map_err(|e| format!("{}: {e}", at()))?;
        let mut reply = Vec::new();
        s.take(MAX_BODY + 64 * 1024)
            .read_to_end(&mut reply)
            .map_err(|e| format!("{}: {e}", at()))?;
        let head_end = reply
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .ok_or_else(|| format!("{}: no complete HTTP reply", at()))?;
        let head = String::from_utf8_lossy(&reply[..head_end]);
        let status = head
            .lines()
            .next()
            .and_then(|l| l.split_ascii_whitespace().nth(1))
            .unwrap_or("");
        if status != "200" {
            return Err(format!(
                "{}: HTTP {status} ({})",
                at(),
                head.lines().next().unwrap_or("")
            ));
        }
        let chunked = head.lines().any(|l| {
            let l = l.to_ascii_lowercase();
            l.starts_with("transfer-encoding:") && l.contains("chunked")
        });
        let body = &reply[head_end + 4..];
        let body = if chunked {
            dechunk(body)?
        } else {
            body.to_vec()
        };
        String::from_utf8(body).map_err(|_| format!("{}: the body is not UTF-8", at()))
    }
}

/// Chunked transfer coding (an HTTP/1.1 server may use it even for a 1.0 request).
fn dechunk(mut b: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let eol = b
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("a chunk size line is cut")?;
        let size_text = std::str::from_utf8(&b[..eol]).map_err(|_| "bad chunk size")?;
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| "bad chunk size")?;
        b = &b[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if b.len() < size + 2 {
            return Err("a chunk is cut".into());
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_text_format() {
        let body = "# HELP http_requests_total The total.\n\
                    # TYPE http_requests_total counter\n\
                    http_requests_total{method=\"post\",code=\"200\"} 1027 1395066363000\n\
                    http_requests_total{method=\"post\",code=\"400\"}    3 1395066363000\n\
                    \n\
                    msdos_file_access_time_seconds{path=\"C:\\\\DIR\\\\FILE.TXT\",error=\"Cannot find file:\\n\\\"FILE.TXT\\\"\"} 1.458255915e9\n\
                    metric_without_timestamp_and_labels 12.47\n\
                    something_weird{problem=\"division by zero\"} +Inf -3982045\n\
                    rpc_duration_seconds{quantile=\"0.5\",} 4773\n\
                    go_gc_seconds NaN\n\
                    # EOF\n\
                    after_eof 1\n";
        let v = parse(body).unwrap();
        assert_eq!(v.len(), 7, "{v:?}");
        assert_eq!(v[0].name, "http_requests_total");
        assert_eq!(
            v[0].labels,
            [
                ("method".into(), "post".into()),
                ("code".into(), "200".into())
            ]
        );
        assert_eq!(v[0].value, 1027.0);
        assert_eq!(v[1].value, 3.0);
        assert_eq!(v[2].labels[0].1, "C:\\DIR\\FILE.TXT");
        assert_eq!(v[2].labels[1].1, "Cannot find file:\n\"FILE.TXT\"");
        assert_eq!(v[2].value, 1.458255915e9);
        assert_eq!(v[3].key(), "metric_without_timestamp_and_labels");
        assert_eq!(v[4].value, f64::INFINITY);
        assert_eq!(v[5].key(), "rpc_duration_seconds{quantile=\"0.5\"}");
        assert!(v[6].value.is_nan());
        assert_eq!(
            v[0].key(),
            "http_requests_total{method=\"post\",code=\"200\"}"
        );
    }

    #[test]
    fn bad_lines_are_located() {
        for (body, line, says) in [
            ("ok 1\n9bad 1\n", 2, "metric name"),
            ("a{x=1} 2\n", 1, "quoted value"),
            ("a{x=\"1\" 2\n", 1, "','"),
            ("a 1\nb\n", 2, "no value"),
            ("a one\n", 1, "not a number"),
            ("a{x=\"1} 2\n", 1, "unterminated"),
            ("a 1 2 3\n", 1, "unexpected"),
        ] {
            let e = parse(body).unwrap_err();
            assert_eq!(e.line, line, "{body:?}: {e}");
            assert!(e.message.contains(says), "{body:?}: {e}");
        }
    }

    #[test]
    fn chunked_bodies_are_joined() {
        assert_eq!(
            dechunk(b"3\r\nab \r\n2;x=1\r\n1\n\r\n0\r\n\r\n").unwrap(),
            b"ab 1\n"
        );
        assert!(dechunk(b"5\r\nab").is_err());
    }

    #[test]
    fn urls_are_checked() {
        assert!(Scraper::new("https://127.0.0.1:9/m", Duration::from_secs(1)).is_err());
        let s = Scraper::new("http://127.0.0.1:9100", Duration::from_secs(1)).unwrap();
        assert_eq!(s.path, "/metrics");
        assert_eq!(s.addr().port(), 9100);
    }
}
