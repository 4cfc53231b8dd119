//! Import of HAR files (HTTP Archive 1.2, what browsers' devtools and recording proxies save)
//! into a [`Scenario`]: one session replaying the recorded requests in file order.
//!
//! How it maps (`docs/import.md#har` has the table):
//!
//! - every entry of `log.entries` is one `request` step: its method, the URL's path and query,
//!   its headers, and its body (`postData.text`; base64 decoded when it says so);
//! - the gap between an entry's `startedDateTime` and the end of the entry before it
//!   (`startedDateTime + time`) becomes a `think` step, to the millisecond; requests the browser
//!   sent while another was still running (its parallel connections) are sent one after another;
//! - the entries of one page (`pageref`, named by `log.pages[].title`) become a `transaction`;
//! - the server is the origin (scheme, host, port) of most entries: a scenario sends to one
//!   server, so entries of other origins are left out, each with a warning;
//! - the load is a closed population of [`HarOptions::users`] users (default 1) replaying the
//!   recording back to back, or an open phase of [`HarOptions::rate`] users per second.
//!
//! Headers the engine writes itself or that describe the browser's connection are dropped:
//! hop-by-hop ones (`Connection`, `Keep-Alive`, `Transfer-Encoding`, `TE`, `Upgrade`,
//! `Proxy-*`, `Host`, `Content-Length`), HTTP/2 pseudo-headers (`:authority`, ...), the
//! browser's `Sec-*` and `Upgrade-Insecure-Requests`, and `Accept-Encoding` (headroom decodes
//! compressed replies only in URL runs, with `--compressed`: a scenario file cannot ask for
//! them yet, so a recorded `Accept-Encoding` would bring bodies it does not decode). Recorded `Cookie` headers are dropped too: each user keeps a
//! cookie jar, so what the server sets during the run goes back to it as it did to the browser.
//! Cookies the browser had before the recording began (sent before any recorded response set
//! them) become `cookie: {set: ...}` steps at the start of the session.
//!
//! **Nothing is silently dropped.** Whatever is not carried over gives a warning located at its
//! entry (`file:line:column: entries[N] METHOD URL: ...`): an entry skipped (a scheme other than
//! http/https such as `ws:` or `data:`, a method that is not an HTTP token or is `CONNECT`, no
//! response recorded, served from the browser's cache, another origin), a body that cannot be
//! sent, a header dropped for its name or value. What happens to many entries alike (dropped
//! header kinds, cookies, HTTP/2, concurrency) is one warning at the first entry, with a count.
//!
//! **Bounded input.** [`MAX_HAR_BYTES`] (64 MiB) caps the text, and [`read_har_file`] checks the
//! size (and that the path is a regular file) before reading. At most [`MAX_HAR_WARNINGS`]
//! warnings are listed; one more says how many were not. Malformed JSON is an error at its line
//! and column; a wrong type anywhere is a warning or an error, never a panic.

use crate::model::*;
use crate::tsung::{finish, Imported, Locator};
use crate::ScenarioError;
use headroom_core::Distribution;
use serde_json::value::RawValue;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

mod body;
mod text;
use text::{entry_offsets, parse_datetime_ms, parse_url, UrlError};

/// Largest HAR accepted, in bytes. The import holds the text, its entries as borrowed slices
/// and one entry's `serde_json::Value` at a time, then the converted requests (and, to check
/// them, their YAML read back): at most 8 bytes a byte at the peak (docs/import.md). Most of a large HAR is response bodies, which the import
/// does not need: save HARs without content.
pub const MAX_HAR_BYTES: u64 = 64 * 1024 * 1024;

/// Most located warnings listed; beyond it one last warning gives the count left out.
pub const MAX_HAR_WARNINGS: usize = 1000;

/// Longest think time taken from a gap between entries; longer gaps are cut to it (warned).
const MAX_THINK: Duration = Duration::from_secs(3600);

/// What the HAR does not say: how many users replay it, and how they arrive.
#[derive(Debug, Clone, PartialEq)]
pub struct HarOptions {
    /// A closed population of this many users, each replaying the recording back to back
    /// (`None` with no `rate`: 1 user).
    pub users: Option<u64>,
    /// Instead, users arriving at this rate per second (Poisson), each replaying it once.
    pub rate: Option<f64>,
    /// Length of the arrival phase (with `rate`).
    pub duration: Duration,
}

impl Default for HarOptions {
    fn default() -> Self {
        HarOptions {
            users: None,
            rate: None,
            duration: Duration::from_secs(60),
        }
    }
}

fn too_big(len: u64) -> String {
    format!(
        "{len} bytes: HAR files above {} MiB are refused (response bodies are most of a large \
         HAR; save it without content)",
        MAX_HAR_BYTES >> 20
    )
}

/// Reads a HAR file, refusing (with a one-line reason) what is not a regular file, what is
/// larger than [`MAX_HAR_BYTES`] (checked before reading, and again while reading in case it
/// grows) and what is not UTF-8.
pub fn read_har_file(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read it: {e}"))?;
    if !meta.is_file() {
        return Err(
            "not a regular file: a HAR must be a file, not a directory, pipe or device".into(),
        );
    }
    if meta.len() > MAX_HAR_BYTES {
        return Err(too_big(meta.len()));
    }
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read it: {e}"))?;
    let mut buf = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_HAR_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(|e| format!("cannot read it: {e}"))?;
    if buf.len() as u64 > MAX_HAR_BYTES {
        return Err(too_big(buf.len() as u64));
    }
    String::from_utf8(buf).map_err(|e| {
        format!(
            "not UTF-8 text (at byte {}): a HAR is JSON in UTF-8",
            e.utf8_error().valid_up_to()
        )
    })
}

/// [`read_har_file`] and [`import_har`]; a file that cannot be read is an error at 1:1.
pub fn load_har(path: &Path, opts: &HarOptions) -> Result<Imported, Vec<ScenarioError>> {
    let name = path.display().to_string();
    match read_har_file(path) {
        Ok(text) => import_har(&text, &name, opts),
        Err(message) => Err(vec![ScenarioError {
            file: name,
            line: 1,
            column: 1,
            message,
        }]),
    }
}

/// True when `text` is a JSON object with `log.entries` (a HAR), or JSON that does not parse but
/// names a `"log"` near its start (a broken HAR, whose error is best reported as JSON). Used to
/// tell a HAR saved as `.json` from a scenario written in JSON.
pub fn looks_like_har(text: &str) -> bool {
    let body = text.strip_prefix('\u{feff}').unwrap_or(text);
    match serde_json::from_str::<Skeleton<'_>>(body) {
        Ok(s) => s
            .log
            .and_then(|l| serde_json::from_str::<LogSkeleton<'_>>(l.get()).ok())
            .is_some_and(|l| l.entries.is_some()),
        Err(_) => {
            let head: String = body.chars().take(200).collect();
            head.trim_start().starts_with('{') && head.contains("\"log\"")
        }
    }
}

/// Converts a HAR. `file_name` is used in warnings and errors and for the scenario's name (its
/// stem). Returns every error found.
pub fn import_har(
    text: &str,
    file_name: &str,
    opts: &HarOptions,
) -> Result<Imported, Vec<ScenarioError>> {
    let at = Locator::new(text, file_name);
    if text.len() as u64 > MAX_HAR_BYTES {
        return Err(vec![at.error(0, too_big(text.len() as u64))]);
    }
    let bom = text.starts_with('\u{feff}');
    let not_har = || {
        vec![at.error(
            0,
            "not a HAR file: expected a JSON object {\"log\": {\"entries\": [...]}}",
        )]
    };
    // The whole text is checked here (syntax errors are found at their line and column), but
    // only its skeleton is kept: see `Skeleton`.
    let root: Skeleton<'_> =
        match serde_json::from_str(text.strip_prefix('\u{feff}').unwrap_or(text)) {
            Ok(v) => v,
            // Valid JSON of another shape (an array, a string at the top).
            Err(e) if e.classify() == serde_json::error::Category::Data => return Err(not_har()),
            Err(e) => {
                let message = e.to_string();
                let message = match message.find(" at line ") {
                    Some(i) => message[..i].to_string(),
                    None => message,
                };
                let column = e.column().max(1) + usize::from(bom && e.line() <= 1);
                return Err(vec![ScenarioError {
                    file: file_name.to_string(),
                    line: e.line().max(1),
                    column,
                    message: format!("not valid JSON: {message}"),
                }]);
            }
        };
    let Some(log) = root
        .log
        .and_then(|l| serde_json::from_str::<LogSkeleton<'_>>(l.get()).ok())
    else {
        return Err(not_har());
    };
    let Some(entries) = log
        .entries
        .and_then(|e| serde_json::from_str::<Vec<&RawValue>>(e.get()).ok())
    else {
        return Err(vec![
            at.error(0, "log.entries: expected an array of entries")
        ]);
    };
    if entries.is_empty() {
        return Err(vec![at.error(0, "log.entries is empty: nothing to replay")]);
    }
    let offsets = entry_offsets(text, entries.len()).filter(|o| o.len() == entries.len());
    let mut c = Conv {
        at: &at,
        offsets,
        warnings: Vec::new(),
        unlisted: 0,
        notes: BTreeMap::new(),
        set_names: HashSet::new(),
        preset: Vec::new(),
    };
    let pages = c.pages(log.pages.as_ref());
    // One entry's tree at a time: each is parsed from its text, converted, and dropped.
    let converted: Vec<Kept> = entries
        .iter()
        .enumerate()
        .filter_map(|(i, raw)| match serde_json::from_str::<Value>(raw.get()) {
            Ok(e) => c.entry(i, &e, &pages),
            Err(e) => {
                c.warn(i, "", format!("cannot be read ({e}): skipped"));
                None
            }
        })
        .collect();
    let count = entries.len();
    drop(entries);
    let mut errors = Vec::new();
    let load = match c.load(opts) {
        Ok(l) => l,
        Err(message) => {
            errors.push(at.error(0, message));
            Load::default()
        }
    };
    let Some(origin) = busiest_origin(&converted) else {
        // Every entry was skipped: its reasons are the errors.
        let mut errors = std::mem::take(&mut c.warnings);
        errors.push(at.error(
            text.len(),
            format!(
                "none of the {count} entries of log.entries can be replayed (the reasons are above)"
            ),
        ));
        return Err(errors);
    };
    let mut kept = Vec::with_capacity(converted.len());
    for k in converted {
        if k.origin == origin {
            kept.push(k);
        } else {
            let msg = format!(
                "{} is not the scenario's server {} (the origin of most requests): skipped, a \
                 scenario sends to one server",
                show_origin(&k.origin),
                show_origin(&origin)
            );
            c.warn(k.index, &k.label, msg);
        }
    }
    let mut steps: Vec<Step> = std::mem::take(&mut c.preset)
        .into_iter()
        .map(|(name, value)| {
            Step::Cookie(CookieStep::Set {
                name,
                value,
                domain: None,
                path: None,
            })
        })
        .collect();
    steps.extend(c.steps(kept, &pages));
    let mut warnings = c.finish_notes();
    let (tls, host, port) = origin;
    let scenario = Scenario {
        file_root: None,
        name: Path::new(file_name)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .filter(|s| !s.is_empty()),
        servers: vec![Server {
            http2: false,
            host,
            port,
            protocol: Protocol::Http,
            tls: tls.then(ServerTls::default),
        }],
        load,
        sessions: vec![Session {
            name: "recording".into(),
            weight: 1.0,
            steps,
            surge: None,
        }],
        thresholds: Vec::new(),
        link: LinkSpec::Plain,
        http: Default::default(),
    };
    if c.unlisted > 0 {
        warnings.push(at.error(
            text.len(),
            format!(
                "{} more warning(s) not listed: only the first {MAX_HAR_WARNINGS} are",
                c.unlisted
            ),
        ));
    }
    finish(scenario, warnings, errors, file_name)
}

/// What the import keeps of the whole file: `log`, as its text. A HAR parsed whole into
/// `serde_json::Value`s took ~28 bytes per byte of a HAR of small entries (a map per header,
/// each a `BTreeMap` node); the skeleton borrows the text instead, and each entry is parsed
/// alone when it is converted (see `docs/import.md`, bounds).
#[derive(serde::Deserialize)]
struct Skeleton<'a> {
    #[serde(borrow)]
    log: Option<&'a RawValue>,
}

/// `log`: its pages whole (a few per recording), its entries as text.
#[derive(serde::Deserialize)]
struct LogSkeleton<'a> {
    pages: Option<Value>,
    #[serde(borrow)]
    entries: Option<&'a RawValue>,
}

/// (TLS, host, port) of a request's URL.
type Origin = (bool, String, u16);

fn show_origin((tls, host, port): &Origin) -> String {
    let scheme = if *tls { "https" } else { "http" };
    if host.contains(':') {
        format!("{scheme}://[{host}]:{port}")
    } else {
        format!("{scheme}://{host}:{port}")
    }
}

/// The origin of most entries; among equals, the first seen.
fn busiest_origin(kept: &[Kept]) -> Option<Origin> {
    let mut counts: HashMap<&Origin, (usize, usize)> = HashMap::new();
    for (i, k) in kept.iter().enumerate() {
        counts.entry(&k.origin).or_insert((0, i)).0 += 1;
    }
    counts
        .into_iter()
        .max_by_key(|(_, (n, first))| (*n, std::cmp::Reverse(*first)))
        .map(|(o, _)| o.clone())
}

/// An entry that converted to a request.
struct Kept {
    index: usize,
    label: String,
    origin: Origin,
    request: Request,
    /// Index into the page names.
    page: Option<usize>,
    /// `startedDateTime`, ms since the epoch.
    start: Option<f64>,
    /// `time`, ms.
    time: f64,
}

/// What is noted once for all the entries it concerns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Note {
    Pseudo,
    HopByHop,
    BrowserOnly,
    AcceptEncoding,
    Cookie,
    Version,
    Overlap,
}

struct Tally {
    first: usize,
    /// The method and URL of the first entry.
    label: String,
    last: usize,
    entries: usize,
    names: BTreeSet<String>,
}

struct Conv<'a> {
    at: &'a Locator<'a>,
    /// Byte offset of each entry, when the scan found them all.
    offsets: Option<Vec<usize>>,
    warnings: Vec<ScenarioError>,
    unlisted: usize,
    notes: BTreeMap<Note, Tally>,
    /// Cookie names recorded responses set so far (in entry order).
    set_names: HashSet<String>,
    /// Cookies sent before any recorded response set them: the browser had them already.
    preset: Vec<(String, String)>,
}

/// Hop-by-hop and framing headers: the engine writes its own `Host`, `Content-Length` and
/// `Connection`; the others describe the recorded connection.
fn hop_by_hop(lower: &str) -> bool {
    matches!(
        lower,
        "connection"
            | "keep-alive"
            | "transfer-encoding"
            | "te"
            | "trailer"
            | "upgrade"
            | "host"
            | "content-length"
            | "http2-settings"
    ) || lower.starts_with("proxy-")
}

/// Headers only a browser sends about itself (fetch metadata, client hints).
fn browser_only(lower: &str) -> bool {
    lower.starts_with("sec-") || lower == "upgrade-insecure-requests"
}

/// RFC 9110 token characters.
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// At most 80 characters of `s`, with `...` when cut.
fn short(s: &str) -> String {
    if s.chars().count() <= 80 {
        return s.to_string();
    }
    let mut out: String = s.chars().take(77).collect();
    out.push_str("...");
    out
}

impl Conv<'_> {
    fn offset(&self, index: usize) -> usize {
        self.offsets
            .as_ref()
            .and_then(|o| o.get(index).copied())
            .unwrap_or(0)
    }

    /// A located warning about entry `index` (`label` is its method and URL, when known).
    fn warn(&mut self, index: usize, label: &str, msg: impl AsRef<str>) {
        if self.warnings.len() >= MAX_HAR_WARNINGS {
            self.unlisted += 1;
            return;
        }
        let sep = if label.is_empty() { "" } else { " " };
        let w = self.at.error(
            self.offset(index),
            format!("entries[{index}]{sep}{label}: {}", msg.as_ref()),
        );
        self.warnings.push(w);
    }

    fn note(&mut self, kind: Note, index: usize, label: &str, name: &str) {
        let t = self.notes.entry(kind).or_insert_with(|| Tally {
            first: index,
            label: label.to_string(),
            last: usize::MAX,
            entries: 0,
            names: BTreeSet::new(),
        });
        if t.last != index {
            t.last = index;
            t.entries += 1;
        }
        if t.names.len() < 12 {
            t.names.insert(name.to_string());
        }
    }

    /// The notes as warnings, each at the first entry it concerns.
    fn finish_notes(&mut self) -> Vec<ScenarioError> {
        let mut out = std::mem::take(&mut self.warnings);
        let notes = std::mem::take(&mut self.notes);
        for (kind, t) in notes {
            let names = t.names.iter().cloned().collect::<Vec<_>>().join(", ");
            let n = t.entries;
            let who = if n == 1 {
                "this request".to_string()
            } else {
                format!("{n} requests (this one and {} after it)", n - 1)
            };
            let verb = |one: &'static str, many: &'static str| if n == 1 { one } else { many };
            let msg = match kind {
                Note::Pseudo => format!(
                    "{who} {} HTTP/2 pseudo-headers ({names}): dropped, the method, path and \
                     server carry them on HTTP/1.1",
                    verb("holds", "hold")
                ),
                Note::HopByHop => format!(
                    "{who} {} connection-level headers ({names}): dropped, headroom writes its \
                     own Host, Content-Length and Connection",
                    verb("holds", "hold")
                ),
                Note::BrowserOnly => format!(
                    "{who} {} browser-only headers ({names}): dropped",
                    verb("holds", "hold")
                ),
                Note::AcceptEncoding => format!(
                    "{who} {} Accept-Encoding: dropped, a scenario cannot ask for compressed \
                     replies yet (--compressed is for URL runs), so replies come uncompressed",
                    verb("holds", "hold")
                ),
                Note::Cookie => format!(
                    "{who} {} a Cookie header: dropped, each user's cookie jar sends what the \
                     server sets during the run (cookies the browser had before the recording \
                     are set by cookie steps at the session's start)",
                    verb("holds", "hold")
                ),
                Note::Version => format!(
                    "{who} {} recorded over {names}: replayed over HTTP/1.1",
                    verb("was", "were")
                ),
                Note::Overlap => format!(
                    "{who} started before the one before {} had finished (the browser sent them \
                     at once, on several connections): headroom sends them one after another on \
                     one connection",
                    verb("it", "them")
                ),
            };
            let w = self.at.error(
                self.offset(t.first),
                format!("entries[{}] {}: {msg}", t.first, t.label),
            );
            out.push(w);
        }
        out
    }

    fn load(&self, opts: &HarOptions) -> Result<Load, String> {
        match (opts.users, opts.rate) {
            (Some(_), Some(_)) => {
                Err("users and rate exclude each other: a closed population or arrivals".into())
            }
            (_, Some(r)) => {
                if !(r.is_finite() && r > 0.0) {
                    return Err(format!(
                        "rate {r}: expected a positive number of users per second"
                    ));
                }
                if opts.duration.is_zero() {
                    return Err("duration: expected more than 0s".into());
                }
                Ok(Load {
                    phases: vec![Phase {
                        duration: opts.duration,
                        rate: Rate::Fixed(r),
                        arrival: Arrival::Poisson,
                        max_users: None,
                    }],
                    users: Vec::new(),
                    stages: Vec::new(),
                    once: Vec::new(),
                })
            }
            (users, None) => match users.unwrap_or(1) {
                0 => Err("users: expected at least 1".into()),
                count => Ok(Load {
                    phases: Vec::new(),
                    users: vec![Users {
                        count,
                        session: None,
                    }],
                    stages: Vec::new(),
                    once: Vec::new(),
                }),
            },
        }
    }

    /// Page ids to their index in the returned names (`title`, or the id without one).
    fn pages(&mut self, pages: Option<&Value>) -> (HashMap<String, usize>, Vec<String>) {
        let mut ids = HashMap::new();
        let mut names = Vec::new();
        let list = match pages {
            None | Some(Value::Null) => return (ids, names),
            Some(Value::Array(l)) => l,
            Some(_) => {
                let w = self.at.error(
                    0,
                    "log.pages is not an array: no request is grouped into a page transaction",
                );
                self.warnings.push(w);
                return (ids, names);
            }
        };
        for (i, p) in list.iter().enumerate() {
            let Some(id) = p.get("id").and_then(Value::as_str) else {
                let w = self.at.error(
                    0,
                    format!("log.pages[{i}] has no string id: its requests are in no transaction"),
                );
                self.warnings.push(w);
                continue;
            };
            let title = p
                .get("title")
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .unwrap_or(id);
            let name = if title.is_empty() {
                format!("page {}", i + 1)
            } else {
                title.to_string()
            };
            ids.insert(id.to_string(), names.len());
            names.push(name);
        }
        (ids, names)
    }

    /// Entry `i` as a request, or `None` (warned) when it cannot be replayed.
    fn entry(
        &mut self,
        i: usize,
        e: &Value,
        pages: &(HashMap<String, usize>, Vec<String>),
    ) -> Option<Kept> {
        if !e.is_object() {
            self.warn(i, "", "not an object: skipped");
            return None;
        }
        let Some(req) = e.get("request").filter(|r| r.is_object()) else {
            self.warn(i, "", "no request object: skipped");
            return None;
        };
        let (Some(method), Some(url)) = (
            req.get("method").and_then(Value::as_str),
            req.get("url").and_then(Value::as_str),
        ) else {
            self.warn(
                i,
                "",
                "request.method or request.url is missing or not a string: skipped",
            );
            return None;
        };
        let label = format!("{} {}", short(method), short(url));
        let u = match parse_url(url) {
            Ok(u) => u,
            Err(UrlError::Scheme(s)) => {
                let why = match s.as_str() {
                    "ws" | "wss" => "a WebSocket is not replayed by an HTTP scenario",
                    "data" | "blob" | "about" | "javascript" => {
                        "made inside the browser, never sent to a server"
                    }
                    "chrome-extension" | "moz-extension" | "chrome" | "devtools" => {
                        "a browser or extension resource"
                    }
                    _ => "only http and https are replayed",
                };
                self.warn(
                    i,
                    &label,
                    format!("scheme '{s}:' is not supported ({why}): skipped"),
                );
                return None;
            }
            Err(UrlError::Bad(why)) => {
                self.warn(i, &label, format!("the URL has {why}: skipped"));
                return None;
            }
        };
        if method == "CONNECT" {
            self.warn(
                i,
                &label,
                "CONNECT (a proxy tunnel) is not replayed: skipped",
            );
            return None;
        }
        if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
            self.warn(
                i,
                &label,
                format!(
                    "method '{}' is not supported (an upper-case HTTP method such as GET): skipped",
                    short(method)
                ),
            );
            return None;
        }
        if let Some(cache) = e.get("_fromCache").and_then(Value::as_str) {
            self.warn(
                i,
                &label,
                format!(
                    "served from the browser's {} cache, never sent to the server: skipped",
                    short(cache)
                ),
            );
            return None;
        }
        let resp = e.get("response");
        let error = resp
            .and_then(|r| r.get("_error"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let status = resp
            .and_then(|r| r.get("status"))
            .and_then(Value::as_f64)
            .unwrap_or(0.0);
        if let Some(err) = error {
            self.warn(
                i,
                &label,
                format!("no response was recorded ({}): skipped", short(err)),
            );
            return None;
        }
        if status < 1.0 {
            self.warn(i, &label, "no response was recorded (status 0): skipped");
            return None;
        }
        if u.userinfo {
            self.warn(
                i,
                &label,
                "user:password@ in the URL is not honoured (a recorded Authorization header is \
                 kept)",
            );
        }
        if let Some(v) = req.get("httpVersion").and_then(Value::as_str) {
            let lower = v.trim().to_ascii_lowercase();
            if !lower.is_empty() && lower != "http/1.1" && lower != "unknown" {
                self.note(Note::Version, i, &label, &short(v.trim()));
            }
        }
        let mut headers = self.headers(i, &label, req);
        let body = self.body(i, &label, req, &mut headers);
        if let Some(at) = headers
            .iter()
            .position(|(n, _)| n.eq_ignore_ascii_case("cookie"))
        {
            let (_, value) = headers.remove(at);
            self.note(Note::Cookie, i, &label, "Cookie");
            self.preset_cookies(i, &label, &value);
        } else if req
            .get("cookies")
            .and_then(Value::as_array)
            .is_some_and(|c| !c.is_empty())
        {
            self.warn(
                i,
                &label,
                "request.cookies lists cookies but no Cookie header was recorded: not sent",
            );
        }
        let mut target = u.target;
        if target.contains("${") {
            target = target.replace("${", "$%7B");
            self.warn(
                i,
                &label,
                "the URL holds '${', which headroom reads as a variable: sent as '$%7B' (the same \
                 once decoded)",
            );
        }
        let page = match e.get("pageref") {
            None | Some(Value::Null) => None,
            Some(Value::String(p)) => match pages.0.get(p.as_str()) {
                Some(&ix) => Some(ix),
                None => {
                    self.warn(
                        i,
                        &label,
                        format!(
                            "pageref '{}' names no page of log.pages: in no transaction",
                            short(p)
                        ),
                    );
                    None
                }
            },
            Some(_) => {
                self.warn(i, &label, "pageref is not a string: in no transaction");
                None
            }
        };
        let start = e
            .get("startedDateTime")
            .and_then(Value::as_str)
            .and_then(parse_datetime_ms);
        if start.is_none() {
            self.warn(
                i,
                &label,
                "startedDateTime is missing or not an ISO 8601 date-time: no think time before \
                 this request",
            );
        }
        let time = match e.get("time").map(Value::as_f64) {
            Some(Some(t)) if t.is_finite() && t >= 0.0 => t,
            None => 0.0,
            Some(_) => {
                self.warn(
                    i,
                    &label,
                    "time is not a number of milliseconds >= 0: taken as 0 for the think time \
                     after it",
                );
                0.0
            }
        };
        self.response_cookies(e.get("response"));
        let path_only = target.split('?').next().unwrap_or("/");
        let request = Request {
            name: format!("{method} {path_only}"),
            method: method.to_string(),
            path: target,
            headers,
            body,
            auth: None,
            oauth: None,
        };
        Some(Kept {
            index: i,
            label,
            origin: (u.tls, u.host, u.port),
            request,
            page,
            start,
            time,
        })
    }

    /// The cookies of a recorded `Cookie` header that no recorded response set before: the
    /// browser had them, so each user starts with them.
    fn preset_cookies(&mut self, i: usize, label: &str, header: &str) {
        for pair in header.split(';') {
            let Some((name, value)) = pair.trim().split_once('=') else {
                continue;
            };
            let (name, value) = (name.trim(), value.trim());
            if self.set_names.contains(name) || self.preset.iter().any(|(n, _)| n == name) {
                continue;
            }
            if !is_token(name) || value.bytes().any(|b| b.is_ascii_control() || b == b';') {
                self.warn(
                    i,
                    label,
                    format!(
                        "cookie '{}' cannot be set by a cookie step: not sent",
                        short(name)
                    ),
                );
                continue;
            }
            let value = if value.contains("${") {
                value.replace("${", "$%7B")
            } else {
                value.to_string()
            };
            self.preset.push((name.to_string(), value));
        }
    }

    /// Notes the names of the cookies a recorded response sets (its `Set-Cookie` headers and
    /// its `cookies` list).
    fn response_cookies(&mut self, response: Option<&Value>) {
        let Some(r) = response else { return };
        if let Some(hs) = r.get("headers").and_then(Value::as_array) {
            for h in hs {
                let name = h.get("name").and_then(Value::as_str).unwrap_or("");
                if !name.eq_ignore_ascii_case("set-cookie") {
                    continue;
                }
                let value = h.get("value").and_then(Value::as_str).unwrap_or("");
                // Chromium joins several Set-Cookie values of one response with newlines.
                for line in value.lines() {
                    if let Some((n, _)) = line.split(';').next().and_then(|p| p.split_once('=')) {
                        self.set_names.insert(n.trim().to_string());
                    }
                }
            }
        }
        if let Some(cs) = r.get("cookies").and_then(Value::as_array) {
            for c in cs {
                if let Some(n) = c.get("name").and_then(Value::as_str) {
                    self.set_names.insert(n.to_string());
                }
            }
        }
    }

    /// The headers to send: dropped ones noted or warned, repeated names joined (`; ` for
    /// Cookie, `, ` otherwise).
    fn headers(&mut self, i: usize, label: &str, req: &Value) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        let list = match req.get("headers") {
            None | Some(Value::Null) => return out,
            Some(Value::Array(l)) => l,
            Some(_) => {
                self.warn(
                    i,
                    label,
                    "request.headers is not an array: no header is sent",
                );
                return out;
            }
        };
        for h in list {
            let (Some(name), Some(value)) = (
                h.get("name").and_then(Value::as_str),
                h.get("value").and_then(Value::as_str),
            ) else {
                self.warn(
                    i,
                    label,
                    "a header without a string name and value: dropped",
                );
                continue;
            };
            let lower = name.to_ascii_lowercase();
            if name.starts_with(':') {
                self.note(Note::Pseudo, i, label, &short(&lower));
                continue;
            }
            if hop_by_hop(&lower) {
                self.note(Note::HopByHop, i, label, &short(&lower));
                continue;
            }
            if browser_only(&lower) {
                self.note(Note::BrowserOnly, i, label, &short(&lower));
                continue;
            }
            if lower == "accept-encoding" {
                self.note(Note::AcceptEncoding, i, label, "accept-encoding");
                continue;
            }
            if !is_token(name) {
                self.warn(
                    i,
                    label,
                    format!(
                        "header name '{}' is not an HTTP token: dropped",
                        short(name)
                    ),
                );
                continue;
            }
            let value = value.trim_matches([' ', '\t']);
            if value.contains(['\r', '\n', '\0']) {
                self.warn(
                    i,
                    label,
                    format!("header {name}: its value holds a line break or NUL: dropped"),
                );
                continue;
            }
            if value.contains("${") {
                self.warn(
                    i,
                    label,
                    format!(
                        "header {name}: its value holds '${{', which headroom reads as a \
                         variable and cannot escape: dropped"
                    ),
                );
                continue;
            }
            match out.iter_mut().find(|(n, _)| n.eq_ignore_ascii_case(name)) {
                Some((_, v)) => {
                    v.push_str(if lower == "cookie" { "; " } else { ", " });
                    v.push_str(value);
                }
                None => out.push((name.to_string(), value.to_string())),
            }
        }
        out
    }

    /// The session's steps: requests with the think times between them, each page's requests
    /// in a transaction.
    fn steps(
        &mut self,
        kept: Vec<Kept>,
        pages: &(HashMap<String, usize>, Vec<String>),
    ) -> Vec<Step> {
        let mut steps = Vec::new();
        // The open page transaction: (page index, its steps).
        let mut open: Option<(usize, Vec<Step>)> = None;
        let mut prev_end: Option<f64> = None;
        for k in kept {
            let mut think = None;
            if let (Some(start), Some(end)) = (k.start, prev_end) {
                let gap = start - end;
                if gap < -0.5 {
                    self.note(Note::Overlap, k.index, &k.label, "");
                }
                let ms = gap.round();
                if ms >= 1.0 {
                    let limit = MAX_THINK.as_millis() as f64;
                    if ms > limit {
                        self.warn(
                            k.index,
                            &k.label,
                            format!(
                                "{:.0} s passed since the request before: the think time is cut \
                                 to {} s",
                                ms / 1000.0,
                                MAX_THINK.as_secs()
                            ),
                        );
                    }
                    let d = Duration::from_millis(ms.min(limit) as u64);
                    think = Some(Step::Think(Distribution::Constant(d)));
                }
            }
            prev_end = k.start.map(|s| s + k.time);
            if open.as_ref().map(|(p, _)| *p) != k.page {
                if let Some((p, body)) = open.take() {
                    steps.push(Step::Transaction {
                        name: pages.1[p].clone(),
                        steps: body,
                    });
                }
                steps.extend(think.take());
                if let Some(p) = k.page {
                    open = Some((p, Vec::new()));
                }
            }
            match open.as_mut() {
                Some((_, body)) => {
                    body.extend(think);
                    body.push(Step::Request(k.request));
                }
                None => {
                    steps.extend(think);
                    steps.push(Step::Request(k.request));
                }
            }
        }
        if let Some((p, body)) = open {
            steps.push(Step::Transaction {
                name: pages.1[p].clone(),
                steps: body,
            });
        }
        steps
    }
}
