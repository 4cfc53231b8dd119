//! The live side of a run: a web dashboard (`--dashboard ADDR`) and a Prometheus endpoint
//! (`--metrics-listen ADDR`), served while the load runs. It lives beside the report because it
//! shows the same figures the same way: each interval line (the JSON of `intervals.jsonl`) is
//! read with [`crate::data`] and drawn with [`crate::live`], the dashboard's page and charts.
//! Like the rest of this crate it never touches the engine: whoever runs the load (the
//! `headroom` binary's `start_live`, for `run` and `demo`) starts a [`LiveServer`], hands it
//! every interval line with [`LiveServer::push`] and ends it with [`LiveServer::finish`].
//!
//! A tiny HTTP/1.1 server on plain threads, off the hot path: one accept thread per listener, a
//! thread per connection (at most [`MAX_CONNECTIONS`] at once; beyond that a 503), every
//! response `Connection: close`. The engine's collector thread only hands each interval line
//! to [`LiveServer::push`], which sends it over a channel; a render thread of this module parses
//! it, adds it to the run's counters and renders the dashboard update (five SVG charts), then
//! wakes the event streams. Nothing here can slow the load down.
//!
//! Routes: on the dashboard listener `GET /` (the page) and `GET /events` (server-sent events:
//! the latest update at once, then each new one, a `: keepalive` comment every 15 s, and
//! `event: end` when the run has finished); on the metrics listener `GET /metrics` (Prometheus
//! text format 0.0.4). Anything else is a 404 (405 for a method other than GET or HEAD). When
//! both flags give the same address, one listener serves all three.
//!
//! [`parse_listen`] reads the flags' `ADDR`; a [`StartError::NotLocal`] is the caller's usage
//! error (the CLI exits 2 on it), any other [`StartError`] a failure.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use headroom_format::IntervalLine;

use crate::data::Interval;
use crate::live::Live;

/// Connections served at once (page loads, event streams, scrapes); more get a 503.
pub const MAX_CONNECTIONS: usize = 32;
/// An idle event stream gets a comment this often, so proxies and browsers keep it open.
const KEEPALIVE: Duration = Duration::from_secs(15);
/// Reading a request head or writing a response gives up after this long.
const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// At the end, how long [`LiveServer::finish`] waits for every event stream to have sent `end`.
const END_WAIT: Duration = Duration::from_secs(2);
/// A request head larger than this is refused.
const MAX_HEAD: usize = 8192;
/// Browsers reconnect a dropped event stream after this long (ms).
const RETRY_MS: u32 = 3000;

/// The page's policy: its inline script and style, the event stream on its own origin, nothing
/// else (the icon is a `data:` URL).
const CSP: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                   connect-src 'self'; img-src data:";

/// `--dashboard` and `--metrics-listen` values: `PORT` (on 127.0.0.1) or `HOST:PORT`
/// (`0.0.0.0:9090`, `[::1]:9090`, `localhost:9090`). Port 0 takes a free port.
pub fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    let t = s.trim();
    if let Ok(port) = t.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    if let Ok(a) = t.parse::<SocketAddr>() {
        return Ok(a);
    }
    let bad = || {
        format!(
            "'{s}' is not a port or HOST:PORT; use e.g. 9090 (on 127.0.0.1), 127.0.0.1:9090, \
             or 0.0.0.0:9090 to be reachable from the network"
        )
    };
    if !t.contains(':') {
        return Err(bad());
    }
    match t.to_socket_addrs() {
        Ok(addrs) => {
            let addrs: Vec<SocketAddr> = addrs.collect();
            addrs
                .iter()
                .find(|a| a.is_ipv4())
                .or(addrs.first())
                .copied()
                .ok_or_else(bad)
        }
        Err(_) => Err(bad()),
    }
}

/// What a listener answers.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Routes {
    dashboard: bool,
    metrics: bool,
}

/// The run's counters for `/metrics`: sums over the intervals so far, and the last interval's
/// gauges.
#[derive(Debug, Clone, Default)]
struct Metrics {
    intervals: u64,
    requests: u64,
    responses: u64,
    errors: BTreeMap<String, u64>,
    status: BTreeMap<String, u64>,
    /// Responses by exact code, the codes seen so far.
    status_codes: BTreeMap<String, u64>,
    bytes_sent: u64,
    bytes_received: u64,
    connections_open: u64,
    users_active: u64,
    /// The last interval's p50, p90, p99 and max latency in seconds; `None` without a response.
    latency_s: Option<[f64; 4]>,
    rps: f64,
    elapsed_s: f64,
}

impl Metrics {
    fn add(&mut self, iv: &Interval) {
        self.intervals += 1;
        self.requests += iv.requests.unwrap_or(0);
        self.responses += iv.responses.unwrap_or(0);
        for (k, v) in &iv.errors {
            *self.errors.entry(k.clone()).or_insert(0) += v;
        }
        for (k, v) in &iv.status {
            *self.status.entry(k.clone()).or_insert(0) += v;
        }
        for (k, v) in iv.status_codes.iter().flatten() {
            *self.status_codes.entry(k.clone()).or_insert(0) += v;
        }
        self.bytes_sent += iv.bytes_sent.unwrap_or(0);
        self.bytes_received += iv.bytes_received.unwrap_or(0);
        self.connections_open = iv.connections_open.unwrap_or(0);
        self.users_active = iv.users_active.unwrap_or(0);
        let l = &iv.latency_us;
        self.latency_s = match (iv.responses, l.p50, l.p90, l.p99, l.max) {
            (Some(n), Some(a), Some(b), Some(c), Some(d)) if n > 0 => {
                Some([a / 1e6, b / 1e6, c / 1e6, d / 1e6])
            }
            _ => None,
        };
        self.rps = iv.rps.unwrap_or_else(|| match (iv.responses, iv.length_s) {
            (Some(r), Some(len)) if len > 0.0 => r as f64 / len,
            _ => 0.0,
        });
        if let Some(t) = iv.t_end() {
            self.elapsed_s = t;
        }
    }

    /// The exposition, text format 0.0.4.
    fn render(&self, finished: bool, target: &str) -> String {
        let mut out = String::with_capacity(4096);
        let n = |v: u64| v.to_string();
        metric(
            &mut out,
            "headroom_run_info",
            "gauge",
            "Always 1; the labels name the target and the headroom version.",
            &[(
                format!(
                    "target=\"{}\",version=\"{}\"",
                    label(target),
                    env!("CARGO_PKG_VERSION")
                ),
                "1".into(),
            )],
        );
        let counters: [(&str, &str, u64); 4] = [
            (
                "headroom_requests_total",
                "Requests sent since the run started.",
                self.requests,
            ),
            (
                "headroom_responses_total",
                "Responses received since the run started.",
                self.responses,
            ),
            (
                "headroom_bytes_sent_total",
                "Bytes sent since the run started.",
                self.bytes_sent,
            ),
            (
                "headroom_bytes_received_total",
                "Bytes received since the run started.",
                self.bytes_received,
            ),
        ];
        for (name, help, v) in &counters[..2] {
            metric(&mut out, name, "counter", help, &[(String::new(), n(*v))]);
        }
        let by = |key: &str, m: &BTreeMap<String, u64>| -> Vec<(String, String)> {
            m.iter()
                .map(|(k, v)| (format!("{key}=\"{}\"", label(k)), n(*v)))
                .collect()
        };
        metric(
            &mut out,
            "headroom_errors_total",
            "counter",
            "Failed requests and connections since the run started, by kind (docs/cli.md).",
            &by("kind", &self.errors),
        );
        metric(
            &mut out,
            "headroom_responses_by_status_total",
            "counter",
            "Responses since the run started, by status class.",
            &by("class", &self.status),
        );
        metric(
            &mut out,
            "headroom_responses_by_code_total",
            "counter",
            "Responses since the run started, by exact status code (the codes seen so far).",
            &by("code", &self.status_codes),
        );
        for (name, help, v) in &counters[2..] {
            metric(&mut out, name, "counter", help, &[(String::new(), n(*v))]);
        }
        metric(
            &mut out,
            "headroom_connections_open",
            "gauge",
            "Connections open at the end of the last interval.",
            &[(String::new(), n(self.connections_open))],
        );
        metric(
            &mut out,
            "headroom_users_active",
            "gauge",
            "Virtual users active at the end of the last interval.",
            &[(String::new(), n(self.users_active))],
        );
        let q = ["0.5", "0.9", "0.99", "1"];
        let lat: Vec<(String, String)> = (0..4)
            .map(|i| {
                (
                    format!("quantile=\"{}\"", q[i]),
                    self.latency_s.map_or("NaN".to_string(), |l| float(l[i])),
                )
            })
            .collect();
        metric(
            &mut out,
            "headroom_interval_latency_seconds",
            "gauge",
            "Latency (corrected for coordinated omission) in the last interval, by quantile \
             (1 is the maximum); NaN when the interval had no response.",
            &lat,
        );
        metric(
            &mut out,
            "headroom_interval_throughput_rps",
            "gauge",
            "Responses per second in the last interval.",
            &[(String::new(), float(self.rps))],
        );
        metric(
            &mut out,
            "headroom_run_elapsed_seconds",
            "gauge",
            "Seconds from the run start to the end of the last interval.",
            &[(String::new(), float(self.elapsed_s))],
        );
        metric(
            &mut out,
            "headroom_run_finished",
            "gauge",
            "1 once the run has finished (the figures are final), else 0.",
            &[(String::new(), u64::from(finished).to_string())],
        );
        out
    }
}

/// One metric family: HELP, TYPE and its samples (labels without braces, value).
fn metric(out: &mut String, name: &str, kind: &str, help: &str, samples: &[(String, String)]) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for (labels, value) in samples {
        if labels.is_empty() {
            let _ = writeln!(out, "{name} {value}");
        } else {
            let _ = writeln!(out, "{name}{{{labels}}} {value}");
        }
    }
}

/// A label value escaped as the text format wants (backslash, double quote, newline).
fn label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A sample value: plain decimal, `NaN`, `+Inf`, `-Inf`.
fn float(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

struct State {
    /// Bumped at each update.
    seq: u64,
    /// The latest dashboard update (one JSON line).
    update: Option<Arc<String>>,
    metrics: Metrics,
    /// The run is over: the figures are final, event streams send `end`.
    finished: bool,
    /// The server is going away: event streams close.
    stopping: bool,
    /// Event streams that have not sent `end` yet.
    end_pending: usize,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    page: String,
    title: String,
    /// Connections being served.
    active: AtomicUsize,
    stop_accepting: AtomicBool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The dashboard and metrics server of one run. Start it before the load, [`push`] every
/// interval line, [`finish`] it after the summary.
///
/// [`push`]: LiveServer::push
/// [`finish`]: LiveServer::finish
pub struct LiveServer {
    shared: Arc<Shared>,
    tx: Option<mpsc::Sender<IntervalLine>>,
    render: Option<JoinHandle<()>>,
    listeners: Vec<(SocketAddr, JoinHandle<()>)>,
    /// `http://HOST:PORT/` of the dashboard, if any.
    pub dashboard_url: Option<String>,
    /// `http://HOST:PORT/metrics`, if any.
    pub metrics_url: Option<String>,
}

/// Why [`LiveServer::start`] failed.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The address is not one of this machine's: the command line's fault (exit 2 in the CLI).
    #[error("{0}")]
    NotLocal(String),
    /// The address could not be bound otherwise (in use, not allowed): a failure (exit 1).
    #[error("{0}")]
    Bind(String),
    /// A listener's address or a thread could not be had.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Binds `addr` for `flag`: an address that is not this machine's is [`StartError::NotLocal`],
/// anything else (in use, not allowed) [`StartError::Bind`].
fn bind(addr: SocketAddr, flag: &str) -> Result<TcpListener, StartError> {
    TcpListener::bind(addr).map_err(|e| {
        let msg = format!(
            "cannot listen on {addr} for {flag}: {}",
            e.to_string().to_lowercase()
        );
        if e.kind() == io::ErrorKind::AddrNotAvailable {
            StartError::NotLocal(format!(
                "{msg} — it is not an address of this machine; give a port (127.0.0.1), \
                 127.0.0.1:PORT, or 0.0.0.0:PORT"
            ))
        } else {
            StartError::Bind(msg)
        }
    })
}

/// The address to put in a URL (and to connect to) for a listener bound to `a`.
fn reachable(a: SocketAddr) -> SocketAddr {
    match a.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => {
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), a.port())
        }
        IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), a.port())
        }
        _ => a,
    }
}

impl LiveServer {
    /// Binds the listeners (before the load starts, so a bad address fails the command at
    /// once), prints `headroom: dashboard at http://…/` and `headroom: metrics at
    /// http://…/metrics` on stderr (with the real port when 0 was asked), warns when a listener
    /// is reachable from the network, and starts serving. `title` names the run on the page
    /// (the target).
    pub fn start(
        dashboard: Option<SocketAddr>,
        metrics: Option<SocketAddr>,
        title: &str,
    ) -> Result<LiveServer, StartError> {
        let mut plan: Vec<(SocketAddr, Routes, &str)> = Vec::new();
        match (dashboard, metrics) {
            (Some(d), Some(m)) if d == m && d.port() != 0 => plan.push((
                d,
                Routes {
                    dashboard: true,
                    metrics: true,
                },
                "--dashboard and --metrics-listen",
            )),
            _ => {
                if let Some(d) = dashboard {
                    let r = Routes {
                        dashboard: true,
                        metrics: false,
                    };
                    plan.push((d, r, "--dashboard"));
                }
                if let Some(m) = metrics {
                    let r = Routes {
                        dashboard: false,
                        metrics: true,
                    };
                    plan.push((m, r, "--metrics-listen"));
                }
            }
        }
        // Every bind before any thread: a failure leaves nothing behind.
        let mut bound = Vec::new();
        for (addr, routes, flag) in plan {
            let l = bind(addr, flag)?;
            let local = l.local_addr()?;
            bound.push((l, local, routes, flag));
        }
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                seq: 0,
                update: None,
                metrics: Metrics::default(),
                finished: false,
                stopping: false,
                end_pending: 0,
            }),
            changed: Condvar::new(),
            page: crate::live::dashboard_page(title),
            title: title.to_string(),
            active: AtomicUsize::new(0),
            stop_accepting: AtomicBool::new(false),
        });
        let mut server = LiveServer {
            shared: shared.clone(),
            tx: None,
            render: None,
            listeners: Vec::new(),
            dashboard_url: None,
            metrics_url: None,
        };
        for (listener, local, routes, flag) in bound {
            let shown = reachable(local);
            if routes.dashboard {
                let url = format!("http://{shown}/");
                eprintln!("headroom: dashboard at {url}");
                server.dashboard_url = Some(url);
            }
            if routes.metrics {
                let url = format!("http://{shown}/metrics");
                eprintln!("headroom: metrics at {url}");
                server.metrics_url = Some(url);
            }
            if !local.ip().is_loopback() {
                eprintln!(
                    "headroom: warning: {flag} listens on {local}: it is reachable from the \
                     network, without authentication"
                );
            }
            let sh = shared.clone();
            let handle = thread::Builder::new()
                .name("live-accept".into())
                .spawn(move || accept_loop(listener, routes, sh))?;
            server.listeners.push((shown, handle));
        }
        let (tx, rx) = mpsc::channel::<IntervalLine>();
        let sh = shared.clone();
        server.render = Some(
            thread::Builder::new()
                .name("live-render".into())
                .spawn(move || render_loop(rx, sh))?,
        );
        server.tx = Some(tx);
        Ok(server)
    }

    /// Hands one interval line (as written to intervals.jsonl) to the render thread. Cheap:
    /// a clone of the typed line and a channel send, on the engine's collector thread.
    pub fn push(&self, line: &IntervalLine) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(line.clone());
        }
    }

    /// The run is over: the last pushed intervals are rendered, `/metrics` says
    /// `headroom_run_finished 1`, every event stream gets `event: end` (waited for, up to 2 s).
    /// Then the server keeps answering for `linger` so a scraper or a browser gets the final
    /// state (cut short when `interrupt` turns true, e.g. at Ctrl-C), and stops.
    pub fn finish(mut self, linger: Duration, interrupt: &AtomicBool) {
        self.close(linger, Some(interrupt));
    }

    fn close(&mut self, linger: Duration, interrupt: Option<&AtomicBool>) {
        let Some(tx) = self.tx.take() else {
            return;
        };
        drop(tx);
        if let Some(h) = self.render.take() {
            let _ = h.join();
        }
        {
            let mut st = self.shared.lock();
            st.finished = true;
            self.shared.changed.notify_all();
            let deadline = Instant::now() + END_WAIT;
            while st.end_pending > 0 {
                let now = Instant::now();
                if now >= deadline {
                    break;
                }
                st = self
                    .shared
                    .changed
                    .wait_timeout(st, deadline - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        }
        if !linger.is_zero() && !self.listeners.is_empty() {
            eprintln!(
                "headroom: the run has finished; {} stay{} up for {} (--linger{})",
                match (&self.dashboard_url, &self.metrics_url) {
                    (Some(_), Some(_)) => "the dashboard and the metrics",
                    (Some(_), None) => "the dashboard",
                    _ => "the metrics",
                },
                if self.dashboard_url.is_some() && self.metrics_url.is_some() {
                    ""
                } else {
                    "s"
                },
                humantime::format_duration(linger),
                if interrupt.is_some() {
                    "; Ctrl-C ends it"
                } else {
                    ""
                }
            );
            let was = interrupt.map(|i| i.load(Ordering::SeqCst));
            let end = Instant::now() + linger;
            while Instant::now() < end {
                if let (Some(i), Some(was)) = (interrupt, was) {
                    if i.load(Ordering::SeqCst) != was {
                        break;
                    }
                }
                thread::sleep((end - Instant::now()).min(Duration::from_millis(100)));
            }
        }
        {
            let mut st = self.shared.lock();
            st.stopping = true;
            self.shared.changed.notify_all();
        }
        self.shared.stop_accepting.store(true, Ordering::SeqCst);
        for (addr, handle) in self.listeners.drain(..) {
            // Wake the blocking accept; it sees the flag and returns.
            let _ = TcpStream::connect_timeout(&addr, Duration::from_secs(1));
            let _ = handle.join();
        }
    }
}

impl Drop for LiveServer {
    /// A run that failed half-way: the streams are told the run ended and the server stops.
    fn drop(&mut self) {
        self.close(Duration::ZERO, None);
    }
}

fn render_loop(rx: mpsc::Receiver<IntervalLine>, shared: Arc<Shared>) {
    let mut live = Live::new();
    while let Ok(first) = rx.recv() {
        // Several lines waiting (a slow render): take them all, render once.
        let mut lines = vec![first];
        lines.extend(rx.try_iter());
        let mut metrics = shared.lock().metrics.clone();
        for line in &lines {
            live.push(line);
            if let Some(iv) = live.last() {
                metrics.add(iv);
            }
        }
        let update = Arc::new(live.update_json());
        let mut st = shared.lock();
        st.metrics = metrics;
        st.update = Some(update);
        st.seq += 1;
        shared.changed.notify_all();
    }
}

/// Decrements the active-connection count however the connection's thread ends.
struct Active(Arc<Shared>);

impl Drop for Active {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::SeqCst);
    }
}

fn accept_loop(listener: TcpListener, routes: Routes, shared: Arc<Shared>) {
    for conn in listener.incoming() {
        if shared.stop_accepting.load(Ordering::SeqCst) {
            break;
        }
        let mut stream = match conn {
            Ok(s) => s,
            Err(_) => {
                // Out of descriptors or an aborted handshake: not a reason to stop serving.
                thread::sleep(Duration::from_millis(20));
                continue;
            }
        };
        if shared.active.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            shared.active.fetch_sub(1, Ordering::SeqCst);
            let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
            let _ = respond(
                &mut stream,
                "503 Service Unavailable",
                "text/plain; charset=utf-8",
                &[("Retry-After", "5")],
                b"too many connections to headroom's live server\n",
                true,
            );
            continue;
        }
        let guard = Active(shared.clone());
        let sh = shared.clone();
        let spawned = thread::Builder::new()
            .name("live-conn".into())
            .spawn(move || {
                let _guard = guard;
                let _ = serve(stream, routes, &sh);
            });
        // A failed spawn drops the closure, and with it the guard and the stream.
        drop(spawned);
    }
}

/// Reads a request head: (method, path without the query). `None` for a malformed request.
fn read_head(s: &mut TcpStream) -> io::Result<Option<(String, String)>> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.windows(4).any(|w| w == b"\r\n\r\n") || buf.windows(2).any(|w| w == b"\n\n") {
            break;
        }
        if buf.len() > MAX_HEAD {
            return Ok(None);
        }
    }
    let text = String::from_utf8_lossy(&buf);
    let first = text.lines().next().unwrap_or("");
    let mut parts = first.split_whitespace();
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Ok(None);
    };
    if !version.starts_with("HTTP/1.") {
        return Ok(None);
    }
    let path = target.split(['?', '#']).next().unwrap_or("/").to_string();
    Ok(Some((method.to_string(), path)))
}

/// Writes a whole response and closes (`Connection: close`); `body` is left out for HEAD.
fn respond(
    s: &mut TcpStream,
    status: &str,
    content_type: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    with_body: bool,
) -> io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Connection: close\r\nX-Content-Type-Options: nosniff\r\n",
        body.len()
    );
    for (k, v) in headers {
        let _ = write!(head, "{k}: {v}\r\n");
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    if with_body {
        out.extend_from_slice(body);
    }
    s.write_all(&out)?;
    s.flush()
}

fn serve(mut s: TcpStream, routes: Routes, shared: &Shared) -> io::Result<()> {
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    let _ = s.set_nodelay(true);
    let Some((method, path)) = read_head(&mut s)? else {
        return respond(
            &mut s,
            "400 Bad Request",
            "text/plain; charset=utf-8",
            &[],
            b"bad request\n",
            true,
        );
    };
    let known = (routes.dashboard && (path == "/" || path == "/events"))
        || (routes.metrics && path == "/metrics");
    if !known {
        let mut here = Vec::new();
        if routes.dashboard {
            here.extend(["/", "/events"]);
        }
        if routes.metrics {
            here.push("/metrics");
        }
        let body = format!("not found: {path} (here: {})\n", here.join(", "));
        return respond(
            &mut s,
            "404 Not Found",
            "text/plain; charset=utf-8",
            &[],
            body.as_bytes(),
            method != "HEAD",
        );
    }
    if method != "GET" && method != "HEAD" {
        return respond(
            &mut s,
            "405 Method Not Allowed",
            "text/plain; charset=utf-8",
            &[("Allow", "GET, HEAD")],
            b"only GET and HEAD here\n",
            true,
        );
    }
    let with_body = method == "GET";
    match path.as_str() {
        "/" => respond(
            &mut s,
            "200 OK",
            "text/html; charset=utf-8",
            &[
                ("Cache-Control", "no-store"),
                ("Content-Security-Policy", CSP),
            ],
            shared.page.as_bytes(),
            with_body,
        ),
        "/metrics" => {
            let body = {
                let st = shared.lock();
                st.metrics.render(st.finished, &shared.title)
            };
            respond(
                &mut s,
                "200 OK",
                "text/plain; version=0.0.4; charset=utf-8",
                &[("Cache-Control", "no-store")],
                body.as_bytes(),
                with_body,
            )
        }
        _ if !with_body => respond(
            &mut s,
            "200 OK",
            "text/event-stream",
            &[("Cache-Control", "no-cache")],
            b"",
            false,
        ),
        _ => events(s, shared),
    }
}

/// What an event stream does next.
enum Next {
    Update(u64, Arc<String>),
    End(Option<f64>),
    KeepAlive,
    Close,
}

/// Counts an event stream as owing `end` until it has sent it (or died).
struct EndOwed<'a> {
    shared: &'a Shared,
    owed: bool,
}

impl EndOwed<'_> {
    fn paid(&mut self) {
        if self.owed {
            self.owed = false;
            self.shared.lock().end_pending -= 1;
            self.shared.changed.notify_all();
        }
    }
}

impl Drop for EndOwed<'_> {
    fn drop(&mut self) {
        self.paid();
    }
}

/// `GET /events`: server-sent events until the server stops or the client goes.
fn events(mut s: TcpStream, shared: &Shared) -> io::Result<()> {
    shared.lock().end_pending += 1;
    let mut owed = EndOwed { shared, owed: true };
    s.write_all(
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
             Connection: close\r\nX-Accel-Buffering: no\r\n\r\nretry: {RETRY_MS}\n\n"
        )
        .as_bytes(),
    )?;
    let mut sent_seq = 0u64;
    loop {
        let next = {
            let mut st = shared.lock();
            loop {
                if st.seq > sent_seq {
                    if let Some(u) = &st.update {
                        break Next::Update(st.seq, u.clone());
                    }
                }
                if st.finished && owed.owed {
                    break Next::End(Some(st.metrics.elapsed_s).filter(|t| *t > 0.0));
                }
                if st.stopping {
                    break Next::Close;
                }
                let (guard, timeout) = shared
                    .changed
                    .wait_timeout(st, KEEPALIVE)
                    .unwrap_or_else(|e| e.into_inner());
                st = guard;
                if timeout.timed_out() {
                    break Next::KeepAlive;
                }
            }
        };
        match next {
            Next::Update(seq, data) => {
                sent_seq = seq;
                let mut msg = Vec::with_capacity(data.len() + 32);
                let _ = write!(msg, "id: {seq}\ndata: ");
                msg.extend_from_slice(data.as_bytes());
                msg.extend_from_slice(b"\n\n");
                s.write_all(&msg)?;
            }
            Next::End(t) => {
                // An event with no data is not dispatched: `end` carries the final elapsed time.
                let t = t.map_or("null".to_string(), |t| format!("{t}"));
                let r = s.write_all(format!("event: end\ndata: {{\"t_s\":{t}}}\n\n").as_bytes());
                owed.paid();
                r?;
            }
            Next::KeepAlive => s.write_all(b": keepalive\n\n")?,
            Next::Close => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses() {
        assert_eq!(
            parse_listen("9090").unwrap(),
            "127.0.0.1:9090".parse().unwrap()
        );
        assert_eq!(parse_listen("0").unwrap(), "127.0.0.1:0".parse().unwrap());
        assert_eq!(
            parse_listen("0.0.0.0:80").unwrap(),
            "0.0.0.0:80".parse().unwrap()
        );
        assert_eq!(parse_listen("[::1]:1").unwrap(), "[::1]:1".parse().unwrap());
        assert_eq!(parse_listen("localhost:7").unwrap().port(), 7);
        for bad in ["", "x", "70000", "1.2.3.4", "host:port", "127.0.0.1:99999"] {
            let e = parse_listen(bad).unwrap_err();
            assert!(e.contains("is not a port or HOST:PORT"), "{bad}: {e}");
        }
    }

    #[test]
    fn exposition_sums_intervals_and_escapes_labels() {
        let mut m = Metrics::default();
        for i in 0..2u64 {
            let v = serde_json::json!({
                "t_s": i, "length_s": 1, "requests": 10, "responses": 9, "rps": 9.0,
                "errors": {"reset": i, "refused": 0}, "status": {"2xx": 9, "5xx": 0},
                "status_codes": {"200": 8, "204": 1},
                "latency_us": {"p50": 1000, "p90": 2000, "p99": 3500, "max": 12000},
                "connections_open": 3, "users_active": 4,
                "bytes_sent": 100, "bytes_received": 1000,
            });
            m.add(&crate::data::interval_from_line(
                &serde_json::from_value(v).unwrap(),
                1,
            ));
        }
        let text = m.render(false, "http://h/\"x\"\\");
        for want in [
            "headroom_requests_total 20\n",
            "headroom_responses_total 18\n",
            "headroom_errors_total{kind=\"reset\"} 1\n",
            "headroom_errors_total{kind=\"refused\"} 0\n",
            "headroom_responses_by_status_total{class=\"2xx\"} 18\n",
            "headroom_responses_by_code_total{code=\"200\"} 16\n",
            "headroom_responses_by_code_total{code=\"204\"} 2\n",
            "headroom_bytes_sent_total 200\n",
            "headroom_bytes_received_total 2000\n",
            "headroom_connections_open 3\n",
            "headroom_users_active 4\n",
            "headroom_interval_latency_seconds{quantile=\"0.99\"} 0.0035\n",
            "headroom_interval_latency_seconds{quantile=\"1\"} 0.012\n",
            "headroom_interval_throughput_rps 9\n",
            "headroom_run_elapsed_seconds 2\n",
            "headroom_run_finished 0\n",
            "target=\"http://h/\\\"x\\\"\\\\\"",
            "# TYPE headroom_errors_total counter\n",
        ] {
            assert!(text.contains(want), "{want} not in\n{text}");
        }
        // An interval without a response: NaN quantiles.
        let v = serde_json::json!({"t_s": 2, "length_s": 1, "responses": 0,
            "latency_us": {"p50": 0, "p90": 0, "p99": 0, "max": 0}});
        m.add(&crate::data::interval_from_line(
            &serde_json::from_value(v).unwrap(),
            3,
        ));
        let text = m.render(true, "");
        assert!(text.contains("headroom_interval_latency_seconds{quantile=\"0.5\"} NaN\n"));
        assert!(text.contains("headroom_run_finished 1\n"));
        assert!(text.contains("headroom_responses_total 18\n"));
    }
}
