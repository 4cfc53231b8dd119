//! Recorders, interval snapshots and their exact merge.
//!
//! Each engine worker owns one [`Recorder`] and writes to it without locks. At every interval
//! boundary the worker hands its recorder to the collector and continues with an empty one (a
//! recycled recorder, so steady state allocates nothing). The collector merges the workers'
//! recorders with [`Recorder::add`]: histograms add bucket by bucket, so merged percentiles are
//! exactly those of one histogram holding every sample — never an average of percentiles.
//!
//! Units: every latency is in microseconds.

use std::time::Duration;

use hdrhistogram::Histogram;
use headroom_core::status::status_slot;
use headroom_core::{ErrorKind, ProtoCounter, StatusSet, STATUS_CODES, STATUS_MIN};

pub mod hlog;

/// Highest trackable latency: one hour, in microseconds. Larger values saturate.
pub const MAX_LATENCY_US: u64 = 3_600_000_000;
/// Significant figures kept by every histogram (0.1% relative error).
pub const SIGFIG: u8 = 3;

/// A new empty latency histogram with headroom's precision, sized for what it holds: it starts
/// at 16 KiB (values up to 2 ms, in its first bucket) and grows a bucket at a time (8 KiB each)
/// as larger values come, up to [`MAX_LATENCY_US`] (184 KiB); record into it with [`record`].
/// The standard range allocated up front cost 184 KiB per histogram, 13 per recorder of a run
/// with six request names, four recorders alive: 9.8 MB of the 29 MB a 2,000-user MQTT run
/// held, where its values needed a third of that. Merging ([`Recorder::add`]) grows the
/// receiving histogram as needed; files and the wire carry the standard range
/// ([`standard_range`]), as before.
pub fn new_histogram() -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, 2, SIGFIG).expect("static histogram bounds");
    h.auto(true);
    h
}

/// An empty histogram of the standard range, [`MAX_LATENCY_US`], allocated whole.
pub fn standard_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, SIGFIG).expect("static histogram bounds")
}

/// Record one value (microseconds) into a histogram from [`new_histogram`], growing it if it
/// must; values above [`MAX_LATENCY_US`] are recorded as [`MAX_LATENCY_US`].
#[inline]
pub fn record(h: &mut Histogram<u64>, us: u64) {
    // A growing histogram cannot refuse a value within the standard range (its counts are at
    // most the standard range's), and one of the standard range holds it already.
    let _ = h.record(us.min(MAX_LATENCY_US));
}

/// `h` with the standard range's bounds (the header of its encodings: a file's or the wire's
/// readers expect 1..[`MAX_LATENCY_US`] at [`SIGFIG`] digits): `h` itself when it has them,
/// else its counts copied into `scratch` (reset first; made on first use). The encoding of the
/// counts is the same either way: the V2 format stops at the largest value recorded.
pub fn standard_range<'a>(
    h: &'a Histogram<u64>,
    scratch: &'a mut Option<Histogram<u64>>,
) -> &'a Histogram<u64> {
    if h.high() == MAX_LATENCY_US {
        return h;
    }
    let s = scratch.get_or_insert_with(standard_histogram);
    s.reset();
    // Same precision, and `h` holds nothing beyond the standard range: cannot fail.
    let _ = s.add(h);
    s
}

/// Plain counters of one interval (or of a whole run once merged).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counters {
    /// Requests written to a socket (at least partly).
    pub requests: u64,
    /// Complete responses received, whatever their status.
    pub responses: u64,
    /// Failures by [`ErrorKind::index`].
    pub errors: [u64; ErrorKind::COUNT],
    /// Responses by status class: index 1..=5 for 1xx..5xx, 0 for anything else.
    pub status: [u64; 6],
    /// Responses by exact status: index `code - 100` for codes 100..=599 (codes outside are in
    /// `status[0]` only). A fixed array, so counting and merging never allocate; iterate the
    /// codes seen with [`Counters::codes_seen`].
    pub status_codes: [u64; STATUS_CODES],
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Users (virtual users) that began.
    pub users_started: u64,
    /// Users that finished their work and left.
    pub users_finished: u64,
    /// Connections established (TCP handshakes completed).
    pub connects: u64,
    /// Connections closed (by either side, for any reason).
    pub disconnects: u64,
    /// Gauge: connections the server held at the end of the interval: *served* ones, on which
    /// the server sent at least one byte (a TLS ServerHello, a reply, a stream header). A TCP
    /// handshake alone may sit in the kernel's accept queue, unseen by the server.
    pub connections_open: u64,
    /// Gauge: the most served connections open at once during the interval.
    pub connections_peak: u64,
    /// Gauge: TCP connections established and open at the end of the interval, served or not
    /// (those waiting in the server's accept queue included).
    pub tcp_connected_open: u64,
    /// Gauge: the most TCP connections established at once during the interval.
    pub tcp_connected_peak: u64,
    /// Connections the server closed (FIN or reset) while the user had nothing in flight: a
    /// keep-alive or idle timeout. Not an error: the user reconnects when it next sends.
    pub idle_closed: u64,
    /// New connections a user opened because the server had closed its last one while idle
    /// (including a request that found its reused connection closed and went again).
    pub reconnects: u64,
    /// Gauge: users active at the end of the interval.
    pub users_active: u64,
    /// Sessions that ran to their end (scenario runs).
    pub sessions_completed: u64,
    /// Sessions ended early: a failed request or a `match` with `do: abort`.
    pub sessions_aborted: u64,
    /// Arrivals dropped because a phase's `max_users` were alive.
    pub users_dropped: u64,
    /// Protocol counters by [`ProtoCounter::index`] (XMPP stanzas, SQL statements, frames).
    pub proto: [u64; ProtoCounter::COUNT],
    /// The generator's own CPU: microseconds of CPU its worker threads used (user and system),
    /// microseconds they waited runnable for a CPU (the scheduler's run delay: a machine too
    /// busy to run them), the worker-intervals reported, and those in which the worker was
    /// running or waiting to run at least [`BUSY_WORKER_PCT`] of the time (a worker that busy
    /// is the run's limit, not the server).
    pub worker_cpu_us: u64,
    pub worker_wait_us: u64,
    pub worker_intervals: u64,
    pub worker_busy_intervals: u64,
    /// Worker-intervals in which 1% of the worker's timed sends and arrivals (of at least
    /// [`LATE_MIN_EVENTS`]) were [`LATE_LAG_US`] or more late: a generator behind its schedule
    /// for a whole interval, not for one burst.
    pub worker_late_intervals: u64,
}

/// How late (µs) the 99th percentile of an interval's timed sends must be for the interval to
/// count as late ([`Counters::worker_late_intervals`]), and the fewest events that can say so.
pub const LATE_LAG_US: u64 = 10_000;
pub const LATE_MIN_EVENTS: u64 = 20;

/// A worker that used this much of a core over an interval counts it as busy
/// ([`Counters::worker_busy_intervals`]).
pub const BUSY_WORKER_PCT: f64 = 90.0;

impl Default for Counters {
    fn default() -> Self {
        Counters {
            requests: 0,
            responses: 0,
            errors: [0; ErrorKind::COUNT],
            status: [0; 6],
            status_codes: [0; STATUS_CODES],
            bytes_sent: 0,
            bytes_received: 0,
            users_started: 0,
            users_finished: 0,
            connects: 0,
            disconnects: 0,
            connections_open: 0,
            connections_peak: 0,
            tcp_connected_open: 0,
            tcp_connected_peak: 0,
            idle_closed: 0,
            reconnects: 0,
            users_active: 0,
            sessions_completed: 0,
            sessions_aborted: 0,
            users_dropped: 0,
            proto: [0; ProtoCounter::COUNT],
            worker_cpu_us: 0,
            worker_wait_us: 0,
            worker_intervals: 0,
            worker_busy_intervals: 0,
            worker_late_intervals: 0,
        }
    }
}

impl Counters {
    /// Add another worker's (or interval's) counters. Gauges add too: summing the workers'
    /// gauges of the same interval gives the process-wide figure (peaks give an upper bound,
    /// since workers may peak at different instants).
    pub fn add(&mut self, o: &Counters) {
        self.requests += o.requests;
        self.responses += o.responses;
        for (a, b) in self.errors.iter_mut().zip(o.errors.iter()) {
            *a += b;
        }
        for (a, b) in self.status.iter_mut().zip(o.status.iter()) {
            *a += b;
        }
        for (a, b) in self.status_codes.iter_mut().zip(o.status_codes.iter()) {
            *a += b;
        }
        self.bytes_sent += o.bytes_sent;
        self.bytes_received += o.bytes_received;
        self.users_started += o.users_started;
        self.users_finished += o.users_finished;
        self.connects += o.connects;
        self.disconnects += o.disconnects;
        self.connections_open += o.connections_open;
        self.connections_peak += o.connections_peak;
        self.tcp_connected_open += o.tcp_connected_open;
        self.tcp_connected_peak += o.tcp_connected_peak;
        self.idle_closed += o.idle_closed;
        self.reconnects += o.reconnects;
        self.users_active += o.users_active;
        self.sessions_completed += o.sessions_completed;
        self.sessions_aborted += o.sessions_aborted;
        self.users_dropped += o.users_dropped;
        for (a, b) in self.proto.iter_mut().zip(o.proto.iter()) {
            *a += b;
        }
        self.worker_cpu_us += o.worker_cpu_us;
        self.worker_wait_us += o.worker_wait_us;
        self.worker_intervals += o.worker_intervals;
        self.worker_busy_intervals += o.worker_busy_intervals;
        self.worker_late_intervals += o.worker_late_intervals;
    }

    #[inline]
    pub fn proto(&mut self, c: ProtoCounter, n: u64) {
        self.proto[c.index()] += n;
    }

    /// All failures of every kind.
    pub fn errors_total(&self) -> u64 {
        self.errors.iter().sum()
    }

    /// Failed attempts over attempts: (errors) / (responses + failures that produced no
    /// response). summary.json's `error_rate`, `--max-error-rate` and a scenario's
    /// `error_rate` threshold.
    pub fn error_rate(&self) -> f64 {
        // The failures that are complete responses: counted once, as responses.
        let http = self.errors[ErrorKind::Http4xx.index()]
            + self.errors[ErrorKind::Http5xx.index()]
            + self.errors[ErrorKind::UnexpectedStatus.index()]
            + self.errors[ErrorKind::RedirectLimit.index()]
            + self.errors[ErrorKind::BadLocation.index()]
            + self.errors[ErrorKind::RedirectOffsite.index()];
        let attempts = self.responses + (self.errors_total() - http);
        if attempts == 0 {
            0.0
        } else {
            self.errors_total() as f64 / attempts as f64
        }
    }

    #[inline]
    pub fn error(&mut self, kind: ErrorKind) {
        self.errors[kind.index()] += 1;
    }

    /// Count a response's status: its class and, for 100..=599, its exact code.
    #[inline]
    pub fn status(&mut self, status: u16) {
        let class = (status / 100) as usize;
        let idx = if (1..=5).contains(&class) { class } else { 0 };
        self.status[idx] += 1;
        if let Some(slot) = status_slot(status) {
            self.status_codes[slot] += 1;
        }
    }

    /// Count a complete HTTP response's status ([`Counters::status`]) and, if it failed, its
    /// error; returns whether it was counted as one. With `expect` empty (no `--expect-status`)
    /// a 4xx is `http_4xx` and a 5xx `http_5xx`; otherwise a status outside `expect` is
    /// `unexpected_status` (not also `http_4xx`/`http_5xx`) and one inside it is no error,
    /// whatever its class. The one place the engine's HTTP/1.1 and HTTP/2 paths classify a
    /// reply's status.
    #[inline]
    pub fn reply_status(&mut self, status: u16, expect: &StatusSet) -> bool {
        self.status(status);
        let kind = if expect.is_empty() {
            match status {
                400..=499 => ErrorKind::Http4xx,
                500..=599 => ErrorKind::Http5xx,
                _ => return false,
            }
        } else if expect.contains(status) {
            return false;
        } else {
            ErrorKind::UnexpectedStatus
        };
        self.error(kind);
        true
    }

    /// The exact codes seen, ascending, with their counts (zeros left out).
    pub fn codes_seen(&self) -> impl Iterator<Item = (u16, u64)> + '_ {
        (STATUS_MIN..)
            .zip(self.status_codes.iter().copied())
            .filter(|&(_, n)| n > 0)
    }
}

/// What one TLS handshake agreed on, in the protocol's own codes, so that counting it allocates
/// nothing and it travels to a controller as numbers. Names are for the edge
/// ([`Negotiated::version_name`] and its siblings).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Negotiated {
    /// The TLS protocol version (`0x0304` is TLS 1.3, `0x0303` TLS 1.2).
    pub version: u16,
    /// The cipher suite's IANA code (`0x1302` is TLS_AES_256_GCM_SHA384).
    pub suite: u16,
    /// The key exchange group's IANA code (`0x001d` is X25519); 0 when the handshake made no
    /// key exchange of its own (a resumed TLS 1.2 session).
    pub group: u16,
    /// The ALPN protocol the server chose (`alpn[..alpn_len]`); empty if none. Only a protocol
    /// headroom offered can be chosen, and none it offers is longer than [`ALPN_MAX`]; a longer
    /// one is cut.
    pub alpn: [u8; ALPN_MAX],
    pub alpn_len: u8,
    /// The HTTP version spoken on the connection: 11 (HTTP/1.1), 20 (HTTP/2), 0 (not HTTP:
    /// XMPP, PostgreSQL).
    pub http: u8,
}

/// Longest ALPN protocol name a [`Negotiated`] keeps.
pub const ALPN_MAX: usize = 16;
/// Distinct [`Negotiated`] combinations a [`NegotiatedSet`] counts apart; the rest are "other".
pub const NEGOTIATED_MAX: usize = 16;

impl Negotiated {
    /// The ALPN protocol chosen, or `None`.
    pub fn alpn(&self) -> Option<&[u8]> {
        let p = &self.alpn[..usize::from(self.alpn_len).min(ALPN_MAX)];
        (!p.is_empty()).then_some(p)
    }

    /// Set the ALPN protocol (cut at [`ALPN_MAX`] bytes).
    pub fn set_alpn(&mut self, p: Option<&[u8]>) {
        let p = p.unwrap_or_default();
        let n = p.len().min(ALPN_MAX);
        self.alpn = [0; ALPN_MAX];
        self.alpn[..n].copy_from_slice(&p[..n]);
        self.alpn_len = n as u8;
    }

    /// `TLSv1.3`, as OpenSSL (and nginx's `$ssl_protocol`) name it.
    pub fn version_name(&self) -> String {
        match self.version {
            0x0304 => "TLSv1.3".into(),
            0x0303 => "TLSv1.2".into(),
            0x0302 => "TLSv1.1".into(),
            0x0301 => "TLSv1".into(),
            v => format!("0x{v:04x}"),
        }
    }

    /// The cipher suite's IANA name (`TLS_AES_256_GCM_SHA384`,
    /// `TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384`): the suites headroom offers, else the code.
    pub fn suite_name(&self) -> String {
        let name = match self.suite {
            0x1301 => "TLS_AES_128_GCM_SHA256",
            0x1302 => "TLS_AES_256_GCM_SHA384",
            0x1303 => "TLS_CHACHA20_POLY1305_SHA256",
            0xc02b => "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
            0xc02c => "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
            0xcca9 => "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
            0xc02f => "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            0xc030 => "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
            0xcca8 => "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
            s => return format!("0x{s:04x}"),
        };
        name.into()
    }

    /// The key exchange group's name (`X25519`, `secp256r1`), `None` for no key exchange.
    pub fn group_name(&self) -> Option<String> {
        let name = match self.group {
            0 => return None,
            0x001d => "X25519",
            0x001e => "X448",
            0x0017 => "secp256r1",
            0x0018 => "secp384r1",
            0x0019 => "secp521r1",
            0x11ec => "X25519MLKEM768",
            g => return Some(format!("0x{g:04x}")),
        };
        Some(name.into())
    }

    /// The ALPN protocol as text (bytes that are not UTF-8 replaced).
    pub fn alpn_name(&self) -> Option<String> {
        self.alpn().map(|p| String::from_utf8_lossy(p).into_owned())
    }

    /// `HTTP/1.1`, `HTTP/2`, or `None` for a protocol other than HTTP.
    pub fn http_name(&self) -> Option<&'static str> {
        match self.http {
            11 => Some("HTTP/1.1"),
            20 => Some("HTTP/2"),
            _ => None,
        }
    }
}

/// Handshakes counted by what they agreed on: at most [`NEGOTIATED_MAX`] distinct combinations,
/// in the order first seen, and the handshakes of any further ones as `other`. In place, so
/// counting and merging never allocate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NegotiatedSet {
    entries: [(Negotiated, u64); NEGOTIATED_MAX],
    len: usize,
    /// Handshakes whose combination found no room.
    pub other: u64,
}

impl NegotiatedSet {
    /// Count `n` handshakes that agreed on `k`.
    #[inline]
    pub fn count(&mut self, k: &Negotiated, n: u64) {
        if let Some(e) = self.entries[..self.len].iter_mut().find(|e| e.0 == *k) {
            e.1 += n;
        } else if self.len < NEGOTIATED_MAX {
            self.entries[self.len] = (*k, n);
            self.len += 1;
        } else {
            self.other += n;
        }
    }

    /// Merge another set: its combinations, then its `other`.
    pub fn add(&mut self, o: &NegotiatedSet) {
        for (k, n) in o.iter() {
            self.count(k, n);
        }
        self.other += o.other;
    }

    /// The combinations with their counts, in the order first seen.
    pub fn iter(&self) -> impl Iterator<Item = (&Negotiated, u64)> + '_ {
        self.entries[..self.len].iter().map(|(k, n)| (k, *n))
    }

    /// Every handshake counted, `other` included.
    pub fn total(&self) -> u64 {
        self.iter().map(|(_, n)| n).sum::<u64>() + self.other
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0 && self.other == 0
    }
}

/// Everything one worker measures.
#[derive(Debug, Clone)]
pub struct Recorder {
    /// Response time from the *intended* send time (coordinated omission corrected).
    pub latency: Histogram<u64>,
    /// Response time from the moment the request was actually written.
    pub latency_uncorrected: Histogram<u64>,
    /// TCP connect time.
    pub connect: Histogram<u64>,
    /// TLS handshake time: from the TCP connect's completion to the handshake's (apart from
    /// the connect time, like k6's `http_req_tls_handshaking`). Empty without TLS.
    pub tls: Histogram<u64>,
    /// Wall time of each session that ran to its end (scenario runs).
    pub sessions: Histogram<u64>,
    /// From the TCP connect's completion to the server's first byte on the connection (a TLS
    /// ServerHello, the first reply, a stream header): the wait in the server's accept queue
    /// plus its first answer. A connection closed before any byte is not recorded.
    pub served: Histogram<u64>,
    /// How late the generator acted against the instants it meant to: each timer that fired
    /// (a send after think time or at a rate, a session's next step) and each arrival, from
    /// its intended instant to the loop turn that handled it. A busy or starved generator
    /// shows here first: its sends go out late, and the load it offered is not the one asked.
    /// Zero for timers fired early (within the timer slack).
    pub lag: Histogram<u64>,
    pub counters: Counters,
    /// What the TLS handshakes agreed on (empty without TLS).
    pub negotiated: NegotiatedSet,
    /// Per request or transaction name (scenario runs; empty otherwise), by name id.
    pub names: Vec<NameStats>,
    /// Firings of each `match` check, by match id.
    pub matches: Vec<u64>,
}

/// Figures of one request or transaction name.
#[derive(Debug, Clone)]
pub struct NameStats {
    /// Completed responses (requests) or completed transactions.
    pub count: u64,
    /// Failed requests (any error kind, 4xx/5xx included) or transactions holding one.
    pub errors: u64,
    /// Latency (corrected, for requests; wall time, for transactions).
    pub latency: Histogram<u64>,
}

impl NameStats {
    /// One completed request or transaction of `us` microseconds.
    #[inline]
    pub fn record(&mut self, us: u64, error: bool) {
        self.count += 1;
        self.errors += u64::from(error);
        record(&mut self.latency, us.max(1));
    }
}

impl Default for NameStats {
    fn default() -> Self {
        NameStats {
            count: 0,
            errors: 0,
            latency: new_histogram(),
        }
    }
}

impl Default for Recorder {
    fn default() -> Self {
        Self::new()
    }
}

impl Recorder {
    pub fn new() -> Self {
        Recorder {
            latency: new_histogram(),
            latency_uncorrected: new_histogram(),
            connect: new_histogram(),
            tls: new_histogram(),
            sessions: new_histogram(),
            served: new_histogram(),
            lag: new_histogram(),
            counters: Counters::default(),
            negotiated: NegotiatedSet::default(),
            names: Vec::new(),
            matches: Vec::new(),
        }
    }

    /// Size the per-name and per-match tables (never shrinks).
    pub fn ensure_names(&mut self, names: usize, matches: usize) {
        if self.names.len() < names {
            self.names.resize_with(names, NameStats::default);
        }
        if self.matches.len() < matches {
            self.matches.resize(matches, 0);
        }
    }

    /// Record a latency for name `id` (the table must be sized).
    #[inline]
    pub fn record_name(&mut self, id: usize, us: u64, error: bool) {
        if let Some(n) = self.names.get_mut(id) {
            n.record(us, error);
        }
    }

    /// Count a failure for name `id` without a latency.
    #[inline]
    pub fn name_error(&mut self, id: usize) {
        if let Some(n) = self.names.get_mut(id) {
            n.errors += 1;
        }
    }

    /// Record one response's latencies (microseconds).
    #[inline]
    pub fn record_latency(&mut self, corrected_us: u64, uncorrected_us: u64) {
        record(&mut self.latency, corrected_us.max(1));
        record(&mut self.latency_uncorrected, uncorrected_us.max(1));
    }

    #[inline]
    pub fn record_connect(&mut self, us: u64) {
        record(&mut self.connect, us.max(1));
    }

    #[inline]
    pub fn record_tls(&mut self, us: u64) {
        record(&mut self.tls, us.max(1));
    }

    #[inline]
    pub fn record_served(&mut self, us: u64) {
        record(&mut self.served, us.max(1));
    }

    /// Record how late (microseconds) a timer or an arrival was handled.
    #[inline]
    pub fn record_lag(&mut self, us: u64) {
        record(&mut self.lag, us);
    }

    /// Merge `other` into `self` exactly.
    pub fn add(&mut self, other: &Recorder) {
        // Same bounds on both sides, so `add` cannot fail; saturate defensively anyway.
        let _ = self.latency.add(&other.latency);
        let _ = self.latency_uncorrected.add(&other.latency_uncorrected);
        let _ = self.connect.add(&other.connect);
        let _ = self.tls.add(&other.tls);
        let _ = self.sessions.add(&other.sessions);
        let _ = self.served.add(&other.served);
        let _ = self.lag.add(&other.lag);
        self.counters.add(&other.counters);
        self.negotiated.add(&other.negotiated);
        self.ensure_names(other.names.len(), other.matches.len());
        for (a, b) in self.names.iter_mut().zip(other.names.iter()) {
            a.count += b.count;
            a.errors += b.errors;
            let _ = a.latency.add(&b.latency);
        }
        for (a, b) in self.matches.iter_mut().zip(other.matches.iter()) {
            *a += b;
        }
    }

    /// Empty everything, keeping allocations. A histogram that holds nothing is left alone: its
    /// reset would write every page of its counts, making them resident for nothing.
    pub fn reset(&mut self) {
        let reset = |h: &mut Histogram<u64>| {
            if !h.is_empty() {
                h.reset();
            }
        };
        reset(&mut self.latency);
        reset(&mut self.latency_uncorrected);
        reset(&mut self.connect);
        reset(&mut self.tls);
        reset(&mut self.sessions);
        reset(&mut self.served);
        reset(&mut self.lag);
        self.counters = Counters::default();
        self.negotiated = NegotiatedSet::default();
        for n in &mut self.names {
            n.count = 0;
            n.errors = 0;
            reset(&mut n.latency);
        }
        self.matches.iter_mut().for_each(|m| *m = 0);
    }
}

/// One worker's measurements over one interval.
#[derive(Debug)]
pub struct Snapshot {
    pub worker: usize,
    /// Interval number, from 0 at the start of the run.
    pub index: u64,
    /// True for the worker's last snapshot (it has stopped).
    pub last: bool,
    /// Boxed: a recorder is 6 KiB of counters, and a channel allocates its slots in blocks of
    /// 31 (200 KiB a block, for a snapshot a second).
    pub recorder: Box<Recorder>,
}

/// Figures of a latency histogram, in microseconds (`mean` and `stdev` rounded to 0.1 µs).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct LatencyStats {
    pub count: u64,
    pub mean: f64,
    pub stdev: f64,
    pub min: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

impl LatencyStats {
    pub fn of(h: &Histogram<u64>) -> LatencyStats {
        if h.is_empty() {
            return LatencyStats::default();
        }
        LatencyStats {
            count: h.len(),
            mean: (h.mean() * 10.0).round() / 10.0,
            stdev: (h.stdev() * 10.0).round() / 10.0,
            min: h.min(),
            p50: h.value_at_quantile(0.50),
            p90: h.value_at_quantile(0.90),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
        }
    }
}

/// Duration to whole microseconds, saturating.
#[inline]
pub fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiated_set_is_bounded_and_merges_exactly() {
        let key = |suite: u16| {
            let mut k = Negotiated {
                version: 0x0304,
                suite,
                group: 0x001d,
                http: 20,
                ..Negotiated::default()
            };
            k.set_alpn(Some(b"h2"));
            k
        };
        let mut a = NegotiatedSet::default();
        let mut b = NegotiatedSet::default();
        for s in 0..20u16 {
            a.count(&key(s), 2);
            b.count(&key(19 - s), 1);
        }
        assert_eq!(a.iter().count(), NEGOTIATED_MAX);
        assert_eq!(a.other, 4 * 2);
        assert_eq!(a.total(), 40);
        let mut r = Recorder::new();
        r.negotiated = a;
        let mut m = Recorder::new();
        m.negotiated = b;
        m.add(&r);
        assert_eq!(m.negotiated.total(), 60);
        assert_eq!(m.negotiated.iter().count(), NEGOTIATED_MAX);
        m.reset();
        assert!(m.negotiated.is_empty());
    }

    #[test]
    fn negotiated_names() {
        let mut k = Negotiated {
            version: 0x0304,
            suite: 0x1302,
            group: 0x001d,
            http: 20,
            ..Negotiated::default()
        };
        k.set_alpn(Some(b"h2"));
        assert_eq!(k.version_name(), "TLSv1.3");
        assert_eq!(k.suite_name(), "TLS_AES_256_GCM_SHA384");
        assert_eq!(k.group_name().as_deref(), Some("X25519"));
        assert_eq!(k.alpn_name().as_deref(), Some("h2"));
        assert_eq!(k.http_name(), Some("HTTP/2"));
        k.suite = 0xabcd;
        k.group = 0;
        k.set_alpn(Some(&[b'x'; 40]));
        assert_eq!(k.suite_name(), "0xabcd");
        assert_eq!(k.group_name(), None);
        assert_eq!(k.alpn().map(<[u8]>::len), Some(ALPN_MAX));
        k.set_alpn(None);
        assert_eq!(k.alpn_name(), None);
    }

    #[test]
    fn merged_percentiles_equal_one_histogram() {
        // Deterministic pseudo-random samples split unevenly over 3 recorders.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut all = Recorder::new();
        let mut parts = [Recorder::new(), Recorder::new(), Recorder::new()];
        for i in 0..100_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = 1 + (x % 2_000_000) / (1 + (x >> 60));
            all.record_latency(v, v / 2);
            parts[(i % 7 % 3) as usize].record_latency(v, v / 2);
        }
        let mut merged = Recorder::new();
        for p in &parts {
            merged.add(p);
        }
        for q in [0.5, 0.9, 0.99, 0.999, 0.9999, 1.0] {
            assert_eq!(
                merged.latency.value_at_quantile(q),
                all.latency.value_at_quantile(q),
                "quantile {q}"
            );
        }
        assert_eq!(merged.latency.len(), 100_000);
        assert_eq!(
            LatencyStats::of(&merged.latency),
            LatencyStats::of(&all.latency)
        );
    }

    #[test]
    fn counters_add_and_status_classes() {
        let mut a = Counters::default();
        a.status(200);
        a.status(404);
        a.status(503);
        a.status(999);
        a.error(ErrorKind::Reset);
        let mut b = a;
        b.add(&a);
        assert_eq!(b.status, [2, 0, 2, 0, 2, 2]);
        assert_eq!(b.errors_total(), 2);
        assert_eq!(
            b.codes_seen().collect::<Vec<_>>(),
            [(200, 2), (404, 2), (503, 2)],
            "999 is in the `other` class only"
        );
    }

    #[test]
    fn exact_codes_at_the_edges_and_merged() {
        let mut parts = [Counters::default(), Counters::default()];
        for (i, code) in [100u16, 599, 99, 600, 0, u16::MAX, 429, 429, 200]
            .iter()
            .enumerate()
        {
            parts[i % 2].status(*code);
        }
        let mut m = Counters::default();
        for p in &parts {
            m.add(p);
        }
        assert_eq!(
            m.codes_seen().collect::<Vec<_>>(),
            [(100, 1), (200, 1), (429, 2), (599, 1)]
        );
        assert_eq!(m.status, [4, 1, 1, 0, 2, 1]);
        // Every response is in exactly one class; the exact codes add up to the classes 1..=5.
        let exact: u64 = m.codes_seen().map(|(_, n)| n).sum();
        assert_eq!(exact, m.status[1..].iter().sum::<u64>());
    }

    #[test]
    fn reply_status_without_expectation_counts_4xx_and_5xx() {
        let mut c = Counters::default();
        let none = StatusSet::EMPTY;
        assert!(!c.reply_status(200, &none));
        assert!(!c.reply_status(302, &none));
        assert!(c.reply_status(404, &none));
        assert!(c.reply_status(503, &none));
        assert!(
            !c.reply_status(999, &none),
            "an odd code is counted, not failed"
        );
        assert_eq!(c.errors[ErrorKind::Http4xx.index()], 1);
        assert_eq!(c.errors[ErrorKind::Http5xx.index()], 1);
        assert_eq!(c.errors[ErrorKind::UnexpectedStatus.index()], 0);
        assert_eq!(c.codes_seen().count(), 4);
    }

    #[test]
    fn reply_status_with_expectation_replaces_the_class_errors() {
        let mut c = Counters::default();
        let expect: StatusSet = "200,404".parse().unwrap();
        assert!(!c.reply_status(200, &expect));
        assert!(!c.reply_status(404, &expect), "an expected 404 is no error");
        assert!(c.reply_status(204, &expect), "an unexpected 2xx is one");
        assert!(c.reply_status(500, &expect));
        assert!(c.reply_status(999, &expect));
        assert_eq!(c.errors[ErrorKind::UnexpectedStatus.index()], 3);
        assert_eq!(c.errors[ErrorKind::Http4xx.index()], 0);
        assert_eq!(c.errors[ErrorKind::Http5xx.index()], 0);
        assert_eq!(c.errors_total(), 3);
        assert_eq!(
            c.codes_seen().collect::<Vec<_>>(),
            [(200, 1), (204, 1), (404, 1), (500, 1)]
        );
    }

    #[test]
    fn histograms_grow_with_their_values_and_encode_as_the_standard_range() {
        use hdrhistogram::serialization::{Serializer, V2Serializer};
        let mut small = new_histogram();
        let mut full = standard_histogram();
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        for i in 0..50_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Mostly short, a few long, one beyond the range.
            let v = match i % 1000 {
                0 => x % (2 * MAX_LATENCY_US),
                1..=9 => x % 60_000_000,
                _ => 1 + x % 5_000,
            };
            record(&mut small, v);
            full.saturating_record(v.min(MAX_LATENCY_US));
        }
        for q in [0.0, 0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(small.value_at_quantile(q), full.value_at_quantile(q), "{q}");
        }
        assert_eq!(
            (small.len(), small.min(), small.max()),
            (full.len(), full.min(), full.max())
        );
        // The same bytes in a file or on the wire as a histogram of the standard range.
        let encode = |h: &Histogram<u64>| {
            let mut out = Vec::new();
            V2Serializer::new().serialize(h, &mut out).unwrap();
            out
        };
        let mut scratch = None;
        assert_eq!(encode(standard_range(&small, &mut scratch)), encode(&full));
        // A short-valued one stays small: 16 KiB for values up to 2 ms, not 184 KiB.
        let mut short = new_histogram();
        (1..2_000).for_each(|v| record(&mut short, v));
        assert!(
            short.distinct_values() <= 2048,
            "{}",
            short.distinct_values()
        );
        assert_eq!(standard_histogram().distinct_values(), 23 * 1024);
        assert_eq!(encode(standard_range(&short, &mut scratch)).len(), {
            let mut f = standard_histogram();
            (1..2_000).for_each(|v| f.record(v).unwrap());
            encode(&f).len()
        });
        // Merging grows the receiving histogram, whichever is larger.
        let mut r = Recorder::new();
        r.latency = short.clone();
        let mut big = Recorder::new();
        big.latency = small.clone();
        r.add(&big);
        assert_eq!(r.latency.len(), short.len() + small.len());
        assert_eq!(r.latency.max(), small.max());
        r.reset();
        assert!(r.latency.is_empty());
    }

    #[test]
    fn huge_values_saturate_not_panic() {
        let mut r = Recorder::new();
        r.record_latency(u64::MAX, 0);
        assert_eq!(r.latency.len(), 1);
        assert!(r.latency.max() >= MAX_LATENCY_US);
    }
}
