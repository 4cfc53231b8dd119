//! Headless Chromium (Debian's `chromium` package, installed by scripts/test) driven over the
//! DevTools protocol through `--remote-debugging-pipe`: the browser reads commands on fd 3 and
//! writes replies and events on fd 4, each a JSON message ended by a NUL byte. A pipe needs no
//! port, no websocket client and no chromedriver.
//!
//! The tests use it to open reports and the live dashboard the way a reader would: every console
//! error, uncaught exception and failed load is collected ([`Browser::errors`]), page state is
//! read with [`Browser::eval`], and screenshots are kept in [`artifact_dir`]. With
//! [`Browser::record_network`] it also records what the page sends, as DevTools' Network panel
//! does, and [`Browser::har`] writes that down as a HAR (tests/har.rs).

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub const CHROMIUM: &str = "/usr/bin/chromium";

/// How long one protocol command may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// Where tests keep screenshots: `target/tmp/artifacts` (CI prints the path).
pub fn artifact_dir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("artifacts");
    std::fs::create_dir_all(&d).expect("create the artifact directory");
    d
}

pub struct Browser {
    child: Child,
    to_browser: File,
    from_browser: Receiver<Value>,
    next_id: u64,
    session: String,
    /// Events read while waiting for replies, not yet looked at.
    events: Vec<Value>,
    /// Console errors, exceptions and failed loads seen so far.
    errors: Vec<String>,
    /// `Network.*` events, in arrival order, kept across navigations.
    network: Vec<Value>,
    _profile: tempfile::TempDir,
}

fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 fills two new descriptors, owned below.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(rc, 0, "pipe2: {}", std::io::Error::last_os_error());
    // SAFETY: both were just created and are not owned elsewhere.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

impl Browser {
    /// Start headless Chromium with a fresh profile and attach to a new blank page.
    pub fn launch() -> Browser {
        assert!(
            Path::new(CHROMIUM).exists(),
            "{CHROMIUM} is missing: install Debian's chromium package \
             (scripts/test does: apt-get install chromium)"
        );
        let profile = tempfile::tempdir().expect("profile dir");
        // Commands go browser-ward on pipe (cmd_r -> fd 3), replies come back on (fd 4 -> ev_r).
        let (cmd_r, cmd_w) = pipe();
        let (ev_r, ev_w) = pipe();
        let (cmd_r_fd, ev_w_fd) = (cmd_r.as_raw_fd(), ev_w.as_raw_fd());
        let mut cmd = Command::new(CHROMIUM);
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-sync",
            "--no-first-run",
            "--no-default-browser-check",
            "--remote-debugging-pipe",
            "--window-size=1100,900",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        // SAFETY: only async-signal-safe calls (dup2) between fork and exec. dup2 onto 3 and 4
        // clears close-on-exec there; the originals (close-on-exec) vanish at exec. The fds are
        // above 4 unless the test process has almost none open: dup them up first to be sure.
        unsafe {
            cmd.pre_exec(move || {
                let a = libc::fcntl(cmd_r_fd, libc::F_DUPFD_CLOEXEC, 10);
                let b = libc::fcntl(ev_w_fd, libc::F_DUPFD_CLOEXEC, 10);
                if a < 0 || b < 0 || libc::dup2(a, 3) < 0 || libc::dup2(b, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("start chromium");
        drop(cmd_r);
        drop(ev_w);
        let (tx, rx) = channel();
        let reader = File::from(ev_r);
        std::thread::spawn(move || {
            let mut r = BufReader::new(reader);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match r.read_until(0, &mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        if buf.last() == Some(&0) {
                            buf.pop();
                        }
                        match serde_json::from_slice::<Value>(&buf) {
                            Ok(v) => {
                                if tx.send(v).is_err() {
                                    return;
                                }
                            }
                            Err(e) => eprintln!("chromium: unreadable message: {e}"),
                        }
                    }
                }
            }
        });
        let mut b = Browser {
            child,
            to_browser: File::from(cmd_w),
            from_browser: rx,
            next_id: 0,
            session: String::new(),
            events: Vec::new(),
            errors: Vec::new(),
            network: Vec::new(),
            _profile: profile,
        };
        let target = b.call("Target.createTarget", json!({"url": "about:blank"}));
        let id = target["targetId"].as_str().expect("targetId").to_string();
        let attached = b.call(
            "Target.attachToTarget",
            json!({"targetId": id, "flatten": true}),
        );
        b.session = attached["sessionId"]
            .as_str()
            .expect("sessionId")
            .to_string();
        for domain in ["Page.enable", "Runtime.enable", "Log.enable"] {
            b.call(domain, json!({}));
        }
        b
    }

    /// Send one command (to the page once attached) and wait for its result.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if !self.session.is_empty() {
            msg["sessionId"] = json!(self.session);
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.to_browser
            .write_all(&bytes)
            .unwrap_or_else(|e| panic!("chromium pipe closed ({method}): {e}"));
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        loop {
            let v = self.next_message(deadline).unwrap_or_else(|| {
                panic!("chromium did not answer {method} within {COMMAND_TIMEOUT:?}")
            });
            if v["id"].as_u64() == Some(id) {
                if let Some(e) = v.get("error") {
                    panic!("chromium: {method} failed: {e}");
                }
                return v["result"].clone();
            }
            self.note_event(v);
        }
    }

    fn next_message(&mut self, deadline: Instant) -> Option<Value> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.from_browser.recv_timeout(left) {
            Ok(v) => Some(v),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => panic!("chromium exited"),
        }
    }

    /// Keep an event; record it as an error if it is one.
    fn note_event(&mut self, v: Value) {
        let p = &v["params"];
        match v["method"].as_str() {
            Some("Runtime.consoleAPICalled")
                if matches!(p["type"].as_str(), Some("error") | Some("assert")) =>
            {
                let args: Vec<String> = p["args"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|x| {
                                x["value"]
                                    .as_str()
                                    .map(str::to_string)
                                    .unwrap_or_else(|| x["description"].to_string())
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                self.errors
                    .push(format!("console.error: {}", args.join(" ")));
            }
            Some("Runtime.exceptionThrown") => {
                let d = &p["exceptionDetails"];
                self.errors.push(format!(
                    "uncaught exception: {} {}",
                    d["text"].as_str().unwrap_or(""),
                    d["exception"]["description"].as_str().unwrap_or("")
                ));
            }
            Some("Log.entryAdded") if p["entry"]["level"].as_str() == Some("error") => {
                let e = &p["entry"];
                self.errors.push(format!(
                    "log error ({}): {} {}",
                    e["source"].as_str().unwrap_or(""),
                    e["text"].as_str().unwrap_or(""),
                    e["url"].as_str().unwrap_or("")
                ));
            }
            Some(m) if m.starts_with("Network.") => self.network.push(v.clone()),
            _ => {}
        }
        self.events.push(v);
    }

    /// Take in every event that has arrived so far.
    fn drain(&mut self) {
        while let Ok(v) = self.from_browser.try_recv() {
            self.note_event(v);
        }
    }

    /// Navigate to `url` and wait for its load event.
    pub fn open(&mut self, url: &str) {
        self.drain();
        self.events.clear();
        let r = self.call("Page.navigate", json!({"url": url}));
        if let Some(e) = r["errorText"].as_str() {
            panic!("chromium could not open {url}: {e}");
        }
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        loop {
            if self
                .events
                .iter()
                .any(|e| e["method"].as_str() == Some("Page.loadEventFired"))
            {
                return;
            }
            let v = self
                .next_message(deadline)
                .unwrap_or_else(|| panic!("{url} did not finish loading"));
            self.note_event(v);
        }
    }

    /// Evaluate `js` in the page (promises awaited) and return its value; an exception in
    /// `js` fails the test.
    pub fn eval(&mut self, js: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": js, "returnByValue": true, "awaitPromise": true}),
        );
        if let Some(d) = r.get("exceptionDetails") {
            panic!("evaluating {js}: {d}");
        }
        r["result"]["value"].clone()
    }

    /// Poll `js` until it is truthy (true, a non-zero number, a non-empty string); false if
    /// `within` passed first.
    pub fn wait_for(&mut self, js: &str, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            let v = self.eval(js);
            let truthy = match &v {
                Value::Bool(b) => *b,
                Value::Number(n) => n.as_f64().is_some_and(|x| x != 0.0),
                Value::String(s) => !s.is_empty(),
                Value::Null => false,
                _ => true,
            };
            if truthy {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Lay the page out as on a screen of `width` x `height` CSS pixels (the window, for
    /// layout and for [`Browser::screenshot_screen`]).
    pub fn set_viewport(&mut self, width: u32, height: u32) {
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
        );
    }

    /// A PNG of what the window shows (the first screen) at `path`; returns its size in bytes.
    pub fn screenshot_screen(&mut self, path: &Path) -> usize {
        self.capture(json!({"format": "png"}), path)
    }

    /// `Page.captureScreenshot` with `params`, the PNG written to `path`; returns its size.
    fn capture(&mut self, params: Value, path: &Path) -> usize {
        use base64::Engine as _;
        let shot = self.call("Page.captureScreenshot", params);
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().expect("screenshot data"))
            .expect("screenshot base64");
        std::fs::write(path, &png)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        png.len()
    }

    /// A PNG of the whole page (not only the window) at `path`; returns its size in bytes.
    pub fn screenshot(&mut self, path: &Path) -> usize {
        let m = self.call("Page.getLayoutMetrics", json!({}));
        let size = &m["cssContentSize"];
        let w = size["width"].as_f64().unwrap_or(1100.0).ceil().max(1.0);
        let h = size["height"]
            .as_f64()
            .unwrap_or(900.0)
            .ceil()
            .clamp(1.0, 16000.0);
        self.capture(
            json!({
                "format": "png",
                "captureBeyondViewport": true,
                "clip": {"x": 0, "y": 0, "width": w, "height": h, "scale": 1},
            }),
            path,
        )
    }

    /// Run `js` (a form submit, a click on a link) and wait for the load event of the page it
    /// navigates to.
    pub fn navigate_by(&mut self, js: &str) {
        self.drain();
        self.events.clear();
        self.eval(js);
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        loop {
            if self
                .events
                .iter()
                .any(|e| e["method"].as_str() == Some("Page.loadEventFired"))
            {
                return;
            }
            let v = self
                .next_message(deadline)
                .unwrap_or_else(|| panic!("the page {js} opened did not finish loading"));
            self.note_event(v);
        }
    }

    /// Record every request the page makes from now on, with the browser's cache off (every
    /// load goes to the server, as in a first visit).
    pub fn record_network(&mut self) {
        self.call("Network.enable", json!({}));
        self.call("Network.setCacheDisabled", json!({"cacheDisabled": true}));
    }

    /// Wait until every request recorded so far has finished or failed; false if `within`
    /// passed first.
    pub fn network_idle(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            self.drain();
            let mut open = std::collections::HashSet::new();
            for e in &self.network {
                let id = e["params"]["requestId"].as_str().unwrap_or("").to_string();
                match e["method"].as_str() {
                    Some("Network.requestWillBeSent") => {
                        open.insert(id);
                    }
                    Some("Network.loadingFinished") | Some("Network.loadingFailed") => {
                        open.remove(&id);
                    }
                    _ => {}
                }
            }
            if open.is_empty() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The requests recorded since [`Browser::record_network`] as a HAR 1.2 document, built
    /// from the DevTools Network events the way DevTools' own "Save all as HAR" does: an entry
    /// per request (a redirect ends one entry and starts the next), the headers actually sent
    /// (`requestWillBeSentExtraInfo`: Host, Connection, Cookie, ... included) when reported,
    /// the POST body, the status or the error, and a page per document load.
    pub fn har(&mut self) -> Value {
        use std::collections::{HashMap, VecDeque};
        self.drain();
        struct Entry {
            id: String,
            page: Option<String>,
            wall: f64,
            start: f64,
            end: Option<f64>,
            method: String,
            url: String,
            headers: Value,
            post: Option<String>,
            status: Option<u64>,
            protocol: String,
            error: Option<String>,
            cached: bool,
        }
        let mut entries: Vec<Entry> = Vec::new();
        let mut pages: Vec<Value> = Vec::new();
        let mut extra: HashMap<String, VecDeque<Value>> = HashMap::new();
        let latest = |entries: &[Entry], id: &str| -> Option<usize> {
            entries.iter().rposition(|e| e.id == id)
        };
        let events = self.network.clone();
        for ev in &events {
            let p = &ev["params"];
            let id = p["requestId"].as_str().unwrap_or("").to_string();
            match ev["method"].as_str().unwrap_or("") {
                "Network.requestWillBeSent" => {
                    if let Some(r) = p.get("redirectResponse") {
                        if let Some(i) = latest(&entries, &id) {
                            entries[i].status = r["status"].as_u64();
                            entries[i].protocol = r["protocol"].as_str().unwrap_or("").into();
                            entries[i].end = p["timestamp"].as_f64();
                        }
                    }
                    let req = &p["request"];
                    let url = req["url"].as_str().unwrap_or("").to_string();
                    let wall = p["wallTime"].as_f64().unwrap_or(0.0);
                    if p["type"].as_str() == Some("Document") {
                        pages.push(json!({
                            "id": format!("page_{}", pages.len() + 1),
                            "title": url,
                            "startedDateTime": iso8601(wall),
                            "pageTimings": {},
                        }));
                    }
                    let mut post = req["postData"].as_str().map(str::to_string);
                    if post.is_none() {
                        if let Some(parts) = req["postDataEntries"].as_array() {
                            use base64::Engine as _;
                            let mut bytes = Vec::new();
                            for part in parts {
                                if let Some(b) = part["bytes"].as_str() {
                                    bytes.extend(
                                        base64::engine::general_purpose::STANDARD
                                            .decode(b)
                                            .expect("postDataEntries base64"),
                                    );
                                }
                            }
                            post = Some(String::from_utf8_lossy(&bytes).into_owned());
                        }
                    }
                    if post.is_none() && req["hasPostData"].as_bool() == Some(true) {
                        let r = self.call("Network.getRequestPostData", json!({"requestId": id}));
                        post = r["postData"].as_str().map(str::to_string);
                    }
                    entries.push(Entry {
                        id,
                        page: pages
                            .last()
                            .map(|pg| pg["id"].as_str().unwrap().to_string()),
                        wall,
                        start: p["timestamp"].as_f64().unwrap_or(0.0),
                        end: None,
                        method: req["method"].as_str().unwrap_or("").to_string(),
                        url,
                        headers: req["headers"].clone(),
                        post,
                        status: None,
                        protocol: String::new(),
                        error: None,
                        cached: false,
                    });
                }
                "Network.requestWillBeSentExtraInfo" => {
                    extra.entry(id).or_default().push_back(p["headers"].clone());
                }
                "Network.responseReceived" => {
                    if let Some(i) = latest(&entries, &id) {
                        entries[i].status = p["response"]["status"].as_u64();
                        entries[i].protocol =
                            p["response"]["protocol"].as_str().unwrap_or("").into();
                    }
                }
                "Network.requestServedFromCache" => {
                    if let Some(i) = latest(&entries, &id) {
                        entries[i].cached = true;
                    }
                }
                "Network.loadingFinished" | "Network.loadingFailed" => {
                    if let Some(i) = latest(&entries, &id) {
                        entries[i].end = p["timestamp"].as_f64();
                        if let Some(t) = p["errorText"].as_str() {
                            entries[i].error = Some(t.to_string());
                        }
                    }
                }
                _ => {}
            }
        }
        let header_list = |h: &Value| -> Vec<Value> {
            h.as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| json!({"name": k, "value": v.as_str().unwrap_or("")}))
                        .collect()
                })
                .unwrap_or_default()
        };
        let out: Vec<Value> = entries
            .iter()
            .map(|e| {
                // The headers on the wire, when the browser reported them, else the page's.
                let sent = extra
                    .get_mut(&e.id)
                    .and_then(|q| q.pop_front())
                    .unwrap_or_else(|| e.headers.clone());
                let headers = header_list(&sent);
                let mime = headers
                    .iter()
                    .find(|h| {
                        h["name"]
                            .as_str()
                            .unwrap()
                            .eq_ignore_ascii_case("content-type")
                    })
                    .map(|h| h["value"].as_str().unwrap().to_string())
                    .unwrap_or_default();
                let ms = e.end.map_or(0.0, |end| ((end - e.start) * 1000.0).max(0.0));
                let version = if e.protocol.is_empty() {
                    "http/1.1"
                } else {
                    e.protocol.as_str()
                };
                let mut request = json!({
                    "method": e.method,
                    "url": e.url,
                    "httpVersion": version,
                    "headers": headers,
                    "queryString": [],
                    "cookies": [],
                    "headersSize": -1,
                    "bodySize": e.post.as_ref().map_or(0, |b| b.len()),
                });
                if let Some(b) = &e.post {
                    request["postData"] = json!({"mimeType": mime, "text": b});
                }
                let mut response = json!({
                    "status": e.status.unwrap_or(0),
                    "statusText": "",
                    "httpVersion": e.protocol,
                    "headers": [],
                    "cookies": [],
                    "content": {"size": 0, "mimeType": ""},
                    "redirectURL": "",
                    "headersSize": -1,
                    "bodySize": -1,
                });
                if let Some(err) = &e.error {
                    response["_error"] = json!(err);
                }
                let mut entry = json!({
                    "startedDateTime": iso8601(e.wall),
                    "time": ms,
                    "request": request,
                    "response": response,
                    "cache": {},
                    "timings": {"send": 0, "wait": ms, "receive": 0},
                });
                if let Some(pg) = &e.page {
                    entry["pageref"] = json!(pg);
                }
                if e.cached {
                    entry["_fromCache"] = json!("memory");
                }
                entry
            })
            .collect();
        json!({"log": {
            "version": "1.2",
            "creator": {"name": "headroom tests (DevTools Network events)", "version": "1"},
            "pages": pages,
            "entries": out,
        }})
    }

    /// Every console error, uncaught exception and failed load seen so far.
    pub fn errors(&mut self) -> Vec<String> {
        self.drain();
        self.errors.clone()
    }
}

/// Seconds since the Unix epoch as `2025-03-01T10:00:00.123Z`.
pub fn iso8601(secs: f64) -> String {
    let ms = (secs * 1000.0).round() as i64;
    let (days, rest) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3_600_000,
        rest / 60_000 % 60,
        rest / 1000 % 60,
        rest % 1000
    )
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
