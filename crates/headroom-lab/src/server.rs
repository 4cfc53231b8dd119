//! The server under test: one start per lab configuration.
//!
//! A [`ServerSpec`] describes how to start the server (a `sh -c` command template whose
//! `{factor}` placeholders are replaced by the configuration's levels), how to tell it is
//! ready ([`Ready`]), and how to stop it. [`start`] spawns the command in its own process
//! group (optionally pinned with `taskset -c CPUS`), captures stdout and stderr into a
//! bounded ring buffer, and waits for readiness. The returned [`RunningServer`] can be
//! checked for liveness during a run, stopped gracefully ([`RunningServer::stop`]), and
//! kills its whole process group when dropped, so no server outlives the lab.
//!
//! Failures are reported as [`ServerFailure`]s carrying a [`FailureKind`], a message with
//! the exit status where there is one, and the tail of the server's output.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::setup::connect;
pub use crate::setup::Factors;

/// Default for [`ServerSpec::ready_timeout`].
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(10);
/// Default for [`ServerSpec::grace`].
pub const DEFAULT_GRACE: Duration = Duration::from_secs(5);
/// Default for [`ServerSpec::before_run_timeout`].
pub const DEFAULT_BEFORE_RUN_TIMEOUT: Duration = Duration::from_secs(120);
/// Longest one `ready.command` try may take.
const READY_COMMAND_LIMIT: Duration = Duration::from_secs(5);
/// Pause between `ready.command` tries (a command is dearer than a connect).
const READY_COMMAND_PAUSE: Duration = Duration::from_millis(200);
/// Default for [`ServerSpec::stop_signal`].
pub const DEFAULT_STOP_SIGNAL: i32 = libc::SIGTERM;

/// How often readiness (and liveness while waiting) is polled.
const POLL_INTERVAL: Duration = Duration::from_millis(20);
/// Most lines kept for failure reports.
const TAIL_LINES: usize = 20;
/// Most bytes kept for failure reports.
const TAIL_BYTES: usize = 4096;
/// A line longer than this is split (bounds the readers' memory).
const MAX_LINE_BYTES: usize = 64 * 1024;
/// How long to wait for the output readers to see end-of-file after the group is gone.
const READER_DRAIN: Duration = Duration::from_millis(500);
/// How long to wait for a process to disappear after SIGKILL.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// How to start, recognise as ready, and stop the server under test.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerSpec {
    /// Shell command template run with `sh -c`, `{factor}` placeholders replaced by the
    /// level, e.g. `"headroom serve --listen 127.0.0.1:{port} --arch {arch} --workers
    /// {workers}"`. `{{`/`}}` are literal braces.
    pub command: String,
    /// Extra environment variables; values are templates too.
    pub env: Vec<(String, String)>,
    /// Working directory of the server (default: the lab's).
    pub cwd: Option<PathBuf>,
    /// When the server counts as ready.
    pub ready: Ready,
    /// How long to wait for readiness (default 10s).
    pub ready_timeout: Duration,
    /// Signal sent to the process group to stop the server (default SIGTERM).
    pub stop_signal: i32,
    /// How long to wait after `stop_signal` before SIGKILL (default 5s).
    pub grace: Duration,
    /// Pin the server with `taskset -c CPUS` (a template too), e.g. "0" or "0-1".
    pub cpus: Option<String>,
    /// Configuration files rendered before each start: (template, path), both templates; the
    /// template is relative to `template_dir` (see `setup::render_files`).
    pub files: Vec<(String, String)>,
    /// Where `files`' templates are (the experiment file's directory).
    pub template_dir: PathBuf,
    /// A `sh -c` template run (to exit 0) before each start, with the server's environment and
    /// working directory.
    pub before_run: Option<String>,
    /// How long `before_run` may take (default 120s).
    pub before_run_timeout: Duration,
}

impl ServerSpec {
    /// A spec with the defaults: no extra environment, the current directory, a 10s ready
    /// timeout, SIGTERM then SIGKILL after 5s, no CPU pinning.
    pub fn new(command: impl Into<String>, ready: Ready) -> Self {
        ServerSpec {
            command: command.into(),
            env: Vec::new(),
            cwd: None,
            ready,
            ready_timeout: DEFAULT_READY_TIMEOUT,
            stop_signal: DEFAULT_STOP_SIGNAL,
            grace: DEFAULT_GRACE,
            cpus: None,
            files: Vec::new(),
            template_dir: PathBuf::from("."),
            before_run: None,
            before_run_timeout: DEFAULT_BEFORE_RUN_TIMEOUT,
        }
    }
}

/// When the server counts as ready. Every string is a template like the command.
#[derive(Debug, Clone, PartialEq)]
pub enum Ready {
    /// A TCP connect to HOST:PORT succeeds.
    Port(String),
    /// `GET PATH` on HOST:PORT answers 200.
    Http { addr: String, path: String },
    /// A line containing this text appears on the server's stdout or stderr.
    Line(String),
    /// An XMPP client stream opened to `domain` on HOST:PORT is answered with its features.
    Xmpp { addr: String, domain: String },
    /// This `sh -c` command exits 0 (each try bounded to 5 s).
    Command(String),
}

/// Replace `{name}` by `factors[name]`; `{{` and `}}` are literal braces. An unknown name
/// is an error naming it and the known factors; so is an unbalanced brace.
pub fn expand(template: &str, factors: &Factors) -> Result<String, String> {
    let mut out = String::with_capacity(template.len());
    let mut chars = template.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match c {
            '{' if chars.peek().map(|&(_, n)| n) == Some('{') => {
                chars.next();
                out.push('{');
            }
            '{' => {
                let mut name = String::new();
                let mut closed = false;
                for (_, n) in chars.by_ref() {
                    if n == '}' {
                        closed = true;
                        break;
                    }
                    name.push(n);
                }
                if !closed {
                    return Err(format!(
                        "unclosed `{{` at byte {at} in {template:?} (write `{{{{` for a literal brace)"
                    ));
                }
                match factors.get(name.trim()) {
                    Some(level) => out.push_str(level),
                    None => {
                        let known = if factors.is_empty() {
                            "none".to_string()
                        } else {
                            factors
                                .keys()
                                .map(String::as_str)
                                .collect::<Vec<_>>()
                                .join(", ")
                        };
                        return Err(format!(
                            "unknown factor `{name}` in {template:?}; known factors: {known}"
                        ));
                    }
                }
            }
            '}' if chars.peek().map(|&(_, n)| n) == Some('}') => {
                chars.next();
                out.push('}');
            }
            '}' => {
                return Err(format!(
                    "unmatched `}}` at byte {at} in {template:?} (write `}}}}` for a literal brace)"
                ))
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

/// Why the server could not be started or kept running.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ServerFailure {
    pub kind: FailureKind,
    pub message: String,
    /// Last ~20 lines / 4 KiB of stdout+stderr.
    pub stderr_tail: String,
}

/// The kinds of [`ServerFailure`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The process could not be spawned (missing shell, `taskset`, working directory...).
    Spawn,
    /// The process exited before it was ready.
    ExitedBeforeReady,
    /// The process did not become ready within the timeout (it has been stopped).
    NotReady,
    /// The process exited after it was ready.
    DiedDuringRun,
    /// A template (command, environment, cpus, readiness) could not be expanded.
    Template,
    /// The lab was stopped (Ctrl-C, SIGTERM) while it waited for the server to be ready (it has
    /// been stopped too).
    Interrupted,
    /// A configuration file could not be rendered from its template.
    Files,
    /// The `before_run` command failed or did not end in time.
    BeforeRun,
}

impl FailureKind {
    /// A stable snake_case name, e.g. for storing.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Spawn => "spawn",
            FailureKind::ExitedBeforeReady => "exited_before_ready",
            FailureKind::NotReady => "not_ready",
            FailureKind::DiedDuringRun => "died_during_run",
            FailureKind::Template => "template",
            FailureKind::Interrupted => "interrupted",
            FailureKind::Files => "files",
            FailureKind::BeforeRun => "before_run",
        }
    }
}

impl std::fmt::Display for FailureKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

fn failure(kind: FailureKind, message: String, tail: String) -> ServerFailure {
    ServerFailure {
        kind,
        message,
        stderr_tail: tail,
    }
}

// ---------------------------------------------------------------------------------------
// Output capture
// ---------------------------------------------------------------------------------------

/// Output shared between the reader threads and the [`RunningServer`].
struct Output {
    state: Mutex<OutputState>,
    changed: Condvar,
}

struct OutputState {
    lines: VecDeque<String>,
    bytes: usize,
    /// Text whose appearance in a line makes the server ready (Ready::Line).
    needle: Option<String>,
    needle_seen: bool,
    /// Reader threads still running.
    open_streams: usize,
}

impl Output {
    fn new(needle: Option<String>) -> Self {
        Output {
            state: Mutex::new(OutputState {
                lines: VecDeque::new(),
                bytes: 0,
                needle,
                needle_seen: false,
                open_streams: 0,
            }),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, OutputState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push_line(&self, raw: &[u8]) {
        let mut raw = raw;
        while let [rest @ .., b'\n' | b'\r'] = raw {
            raw = rest;
        }
        let text = String::from_utf8_lossy(raw);
        let mut st = self.lock();
        if !st.needle_seen {
            if let Some(needle) = &st.needle {
                if text.contains(needle.as_str()) {
                    st.needle_seen = true;
                }
            }
        }
        let line = if text.len() > TAIL_BYTES {
            let mut start = text.len() - TAIL_BYTES;
            while !text.is_char_boundary(start) {
                start += 1;
            }
            format!("…{}", &text[start..])
        } else {
            text.into_owned()
        };
        st.bytes += line.len() + 1;
        st.lines.push_back(line);
        while st.lines.len() > 1 && (st.lines.len() > TAIL_LINES || st.bytes > TAIL_BYTES) {
            if let Some(old) = st.lines.pop_front() {
                st.bytes -= old.len() + 1;
            }
        }
        drop(st);
        self.changed.notify_all();
    }

    fn tail(&self) -> String {
        let st = self.lock();
        let mut out = String::with_capacity(st.bytes);
        for line in &st.lines {
            out.push_str(line);
            out.push('\n');
        }
        out
    }

    fn needle_seen(&self) -> bool {
        self.lock().needle_seen
    }

    /// Wait until every reader saw end-of-file, at most `timeout`; true if they all did.
    fn wait_closed(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut st = self.lock();
        while st.open_streams > 0 {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            st = self
                .changed
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        true
    }
}

fn spawn_reader(
    name: &str,
    mut source: impl Read + Send + 'static,
    output: Arc<Output>,
) -> std::io::Result<JoinHandle<()>> {
    output.lock().open_streams += 1;
    let thread_output = output.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("server-{name}"))
        .spawn(move || {
            let output = thread_output;
            let mut buf = [0u8; 8192];
            let mut line: Vec<u8> = Vec::new();
            loop {
                match source.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        let mut chunk = &buf[..n];
                        while let Some(pos) = chunk.iter().position(|&b| b == b'\n') {
                            line.extend_from_slice(&chunk[..pos]);
                            output.push_line(&line);
                            line.clear();
                            chunk = &chunk[pos + 1..];
                        }
                        line.extend_from_slice(chunk);
                        if line.len() >= MAX_LINE_BYTES {
                            output.push_line(&line);
                            line.clear();
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => break,
                }
            }
            if !line.is_empty() {
                output.push_line(&line);
            }
            output.lock().open_streams -= 1;
            output.changed.notify_all();
        });
    if spawned.is_err() {
        output.lock().open_streams -= 1;
    }
    spawned
}

// ---------------------------------------------------------------------------------------
// Process helpers
// ---------------------------------------------------------------------------------------

/// Has the child exited? Does not reap it, so its pid (and process group id) stay reserved
/// and the group can still be signalled safely.
fn has_exited(pid: u32) -> bool {
    // SAFETY: siginfo_t is plain data; waitid only writes into it.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let rc = libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        );
        if rc != 0 {
            // ECHILD: not our child any more (already reaped): it is gone.
            return std::io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD);
        }
        info.si_pid() != 0
    }
}

fn signal_group(pgid: u32, signal: i32) {
    // SAFETY: kill(2) with a negative pid signals the process group; no memory involved.
    unsafe {
        libc::kill(-(pgid as libc::pid_t), signal);
    }
}

/// Name of a signal, e.g. "SIGTERM", or "signal 42".
pub fn signal_name(signal: i32) -> String {
    let name = match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGCHLD => "SIGCHLD",
        libc::SIGCONT => "SIGCONT",
        libc::SIGSTOP => "SIGSTOP",
        libc::SIGTSTP => "SIGTSTP",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        _ => return format!("signal {signal}"),
    };
    name.to_string()
}

/// "exit status 3", "killed by signal 9 (SIGKILL)".
fn describe_status(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => format!("killed by signal {sig} ({})", signal_name(sig)),
        _ => status.to_string(),
    }
}

fn ms(d: Duration) -> String {
    humantime::format_duration(Duration::from_millis(d.as_millis() as u64)).to_string()
}

// ---------------------------------------------------------------------------------------
// Readiness
// ---------------------------------------------------------------------------------------

enum Probe {
    Port {
        text: String,
        addrs: Vec<SocketAddr>,
    },
    Http {
        text: String,
        addrs: Vec<SocketAddr>,
        path: String,
    },
    Line(String),
    Xmpp {
        text: String,
        addrs: Vec<SocketAddr>,
        domain: String,
    },
    Command {
        command: String,
        env: Vec<(String, String)>,
        cwd: Option<PathBuf>,
    },
}

impl Probe {
    fn new(
        spec: &ServerSpec,
        env: &[(String, String)],
        factors: &Factors,
    ) -> Result<Probe, ServerFailure> {
        let ready = &spec.ready;
        let tmpl = |what: &str, t: &str| {
            expand(t, factors).map_err(|e| {
                failure(
                    FailureKind::Template,
                    format!("bad {what} template: {e}"),
                    String::new(),
                )
            })
        };
        let resolve = |text: &str| {
            let addrs: Vec<SocketAddr> = text
                .to_socket_addrs()
                .map_err(|e| {
                    failure(
                        FailureKind::Template,
                        format!("bad readiness address {text:?} (want HOST:PORT): {e}"),
                        String::new(),
                    )
                })?
                .collect();
            if addrs.is_empty() {
                return Err(failure(
                    FailureKind::Template,
                    format!("readiness address {text:?} resolves to nothing"),
                    String::new(),
                ));
            }
            Ok(addrs)
        };
        Ok(match ready {
            Ready::Port(addr) => {
                let text = tmpl("readiness address", addr)?;
                let addrs = resolve(&text)?;
                Probe::Port { text, addrs }
            }
            Ready::Http { addr, path } => {
                let text = tmpl("readiness address", addr)?;
                let addrs = resolve(&text)?;
                let mut path = tmpl("readiness path", path)?;
                if !path.starts_with('/') {
                    path.insert(0, '/');
                }
                Probe::Http { text, addrs, path }
            }
            Ready::Line(needle) => Probe::Line(tmpl("readiness line", needle)?),
            Ready::Xmpp { addr, domain } => {
                let text = tmpl("readiness address", addr)?;
                let addrs = resolve(&text)?;
                let domain = tmpl("readiness domain", domain)?;
                Probe::Xmpp {
                    text,
                    addrs,
                    domain,
                }
            }
            Ready::Command(c) => Probe::Command {
                command: tmpl("readiness command", c)?,
                env: env.to_vec(),
                cwd: spec.cwd.clone(),
            },
        })
    }

    fn describe(&self) -> String {
        match self {
            Probe::Port { text, .. } => format!("a TCP connect to {text}"),
            Probe::Http { text, path, .. } => format!("GET {path} on {text} answering 200"),
            Probe::Line(needle) => format!("a line containing {needle:?}"),
            Probe::Xmpp { text, domain, .. } => {
                format!("an XMPP stream to {domain} on {text} answered with its features")
            }
            Probe::Command { command, .. } => format!("`{command}` exiting 0"),
        }
    }

    /// How long to wait between two checks.
    fn pause(&self) -> Duration {
        match self {
            Probe::Command { .. } => READY_COMMAND_PAUSE,
            _ => POLL_INTERVAL,
        }
    }

    /// One readiness check; `Err` carries what was observed instead.
    fn check(&self, output: &Output, budget: Duration) -> Result<(), String> {
        let budget = budget.clamp(Duration::from_millis(10), Duration::from_millis(250));
        match self {
            Probe::Line(needle) => {
                if output.needle_seen() {
                    Ok(())
                } else {
                    Err(format!("no line containing {needle:?} yet"))
                }
            }
            Probe::Port { addrs, .. } => connect(addrs, budget).map(drop),
            Probe::Http { text, addrs, path } => http_get_status(addrs, text, path, budget)
                .and_then(|status_line| {
                    let code = status_line.split_whitespace().nth(1);
                    if status_line.starts_with("HTTP/") && code == Some("200") {
                        Ok(())
                    } else {
                        Err(format!("answer {status_line:?}"))
                    }
                }),
            Probe::Xmpp { addrs, domain, .. } => {
                crate::setup::xmpp_ready(addrs, domain, budget.max(Duration::from_secs(1)))
            }
            Probe::Command { command, env, cwd } => crate::setup::run_bounded(
                "readiness command",
                command,
                env,
                cwd.as_deref(),
                READY_COMMAND_LIMIT,
            )
            .map_err(|f| {
                let last = f.tail.lines().last().unwrap_or("").trim().to_string();
                if last.is_empty() {
                    f.message
                } else {
                    format!("{} ({last})", f.message)
                }
            }),
        }
    }
}

/// A minimal HTTP/1.1 GET; returns the status line.
fn http_get_status(
    addrs: &[SocketAddr],
    host: &str,
    path: &str,
    timeout: Duration,
) -> Result<String, String> {
    let mut stream = connect(addrs, timeout)?;
    let io = |e: std::io::Error| format!("GET {path} on {host}: {e}");
    stream.set_read_timeout(Some(timeout)).map_err(io)?;
    stream.set_write_timeout(Some(timeout)).map_err(io)?;
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: headroom-lab\r\nAccept: */*\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).map_err(io)?;
    let mut answer = Vec::new();
    let mut buf = [0u8; 512];
    while !answer.contains(&b'\n') && answer.len() < 1024 {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io(e)),
        }
    }
    if answer.is_empty() {
        return Err(format!(
            "GET {path} on {host}: connection closed without an answer"
        ));
    }
    let end = answer
        .iter()
        .position(|&b| b == b'\n')
        .unwrap_or(answer.len());
    Ok(String::from_utf8_lossy(&answer[..end])
        .trim_end()
        .to_string())
}

// ---------------------------------------------------------------------------------------
// Start / run / stop
// ---------------------------------------------------------------------------------------

/// A started server. Dropping it kills its whole process group.
pub struct RunningServer {
    child: Child,
    pid: u32,
    output: Arc<Output>,
    readers: Vec<JoinHandle<()>>,
    /// The expanded command line (with the `taskset` prefix, if any).
    command: String,
    stop_signal: i32,
    grace: Duration,
    /// Set once the process has been reaped.
    exit: Option<ExitStatus>,
}

/// Start the server for `factors` and wait until it is ready (or fail: exited early ->
/// `ExitedBeforeReady` with its exit status and output tail; timeout -> `NotReady`, and the
/// process is stopped).
pub fn start(spec: &ServerSpec, factors: &Factors) -> Result<RunningServer, ServerFailure> {
    start_until(spec, factors, &AtomicBool::new(false))
}

/// [`start`], giving up (`Interrupted`, the process stopped) as soon as `stop` is set: a lab
/// told to stop does not wait out a server's `ready_timeout`.
pub fn start_until(
    spec: &ServerSpec,
    factors: &Factors,
    stop: &AtomicBool,
) -> Result<RunningServer, ServerFailure> {
    let template = |what: &str, t: &str| {
        expand(t, factors).map_err(|e| {
            failure(
                FailureKind::Template,
                format!("bad {what} template: {e}"),
                String::new(),
            )
        })
    };
    let command = template("server command", &spec.command)?;
    let mut env = Vec::with_capacity(spec.env.len());
    for (key, value) in &spec.env {
        env.push((key.clone(), template(&format!("environment {key}"), value)?));
    }
    let cpus = spec
        .cpus
        .as_deref()
        .map(|c| template("cpus", c))
        .transpose()?;
    let probe = Probe::new(spec, &env, factors)?;

    if let Some(dir) = &spec.cwd {
        if !dir.is_dir() {
            return Err(failure(
                FailureKind::Spawn,
                format!(
                    "cannot start `{command}`: working directory {} is not a directory",
                    dir.display()
                ),
                String::new(),
            ));
        }
    }

    crate::setup::render_files(&spec.files, &spec.template_dir, factors)
        .map_err(|e| failure(FailureKind::Files, e, String::new()))?;
    if let Some(step) = &spec.before_run {
        let step = template("before_run", step)?;
        crate::setup::run_bounded(
            "before_run",
            &step,
            &env,
            spec.cwd.as_deref(),
            spec.before_run_timeout,
        )
        .map_err(|f| failure(FailureKind::BeforeRun, f.message, f.tail))?;
    }

    let (mut cmd, shown) = match &cpus {
        Some(cpus) => {
            let mut c = Command::new("taskset");
            c.args(["-c", cpus, "/bin/sh", "-c", &command]);
            (c, format!("taskset -c {cpus} sh -c {command:?}"))
        }
        None => {
            let mut c = Command::new("/bin/sh");
            c.args(["-c", &command]);
            (c, command.clone())
        }
    };
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // If the lab itself is killed (SIGKILL, a crash), the server must not outlive it: the kernel
    // sends it SIGKILL when the thread that started it dies. The lab starts servers from its
    // main thread (or a test's thread), which lives as long as the run. The getppid check covers
    // a lab that died between the fork and the prctl.
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: between fork and exec only async-signal-safe calls (prctl, getppid, _exit).
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    cmd.envs(env);
    if let Some(dir) = &spec.cwd {
        cmd.current_dir(dir);
    }

    let needle = match &probe {
        Probe::Line(n) => Some(n.clone()),
        _ => None,
    };
    let output = Arc::new(Output::new(needle));
    let started = Instant::now();
    let mut child = cmd.spawn().map_err(|e| {
        let hint = if cpus.is_some() && e.kind() == std::io::ErrorKind::NotFound {
            " (is `taskset` installed? apt-get install util-linux)"
        } else {
            ""
        };
        failure(
            FailureKind::Spawn,
            format!("cannot start `{shown}`: {e}{hint}"),
            String::new(),
        )
    })?;
    let pid = child.id();

    let mut readers = Vec::new();
    let mut reader_error = None;
    for (name, stream) in [
        (
            "stdout",
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
        ),
        (
            "stderr",
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
        ),
    ] {
        if let Some(stream) = stream {
            match spawn_reader(name, stream, output.clone()) {
                Ok(h) => readers.push(h),
                Err(e) => reader_error = Some(e),
            }
        }
    }
    let mut server = RunningServer {
        child,
        pid,
        output: output.clone(),
        readers,
        command: shown,
        stop_signal: spec.stop_signal,
        grace: spec.grace,
        exit: None,
    };
    if let Some(e) = reader_error {
        // Dropping `server` kills the group.
        return Err(failure(
            FailureKind::Spawn,
            format!(
                "cannot start output reader threads for `{}`: {e}",
                server.command
            ),
            String::new(),
        ));
    }

    let deadline = started + spec.ready_timeout;
    let mut last_note;
    loop {
        if has_exited(pid) {
            let status = server.reap_after_exit();
            return Err(failure(
                FailureKind::ExitedBeforeReady,
                format!(
                    "server exited before it was ready ({}) after {}: `{}`",
                    describe_status(status),
                    ms(started.elapsed()),
                    server.command
                ),
                server.output.tail(),
            ));
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        match probe.check(&output, remaining) {
            Ok(()) => return Ok(server),
            Err(note) => last_note = note,
        }
        if stop.load(Ordering::Relaxed) {
            let stopped = server.stop_inner();
            return Err(failure(
                FailureKind::Interrupted,
                format!("stopped while waiting for `{}`; {stopped}", server.command),
                server.output.tail(),
            ));
        }
        let now = Instant::now();
        if now >= deadline {
            let stopped = server.stop_inner();
            return Err(failure(
                FailureKind::NotReady,
                format!(
                    "server not ready after {} (waiting for {}; last: {last_note}): `{}`; {stopped}",
                    ms(spec.ready_timeout),
                    probe.describe(),
                    server.command
                ),
                server.output.tail(),
            ));
        }
        std::thread::sleep(probe.pause().min(deadline - now));
    }
}

impl RunningServer {
    /// Process id of the started process (`sh`, or the server if the shell exec'd it); it
    /// is also the process group id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The command line as started (expanded, with the `taskset` prefix if any).
    pub fn command(&self) -> &str {
        &self.command
    }

    /// Every live process of the server's process group (the started `sh` and whatever it
    /// started: the server, its workers). Note: `sh -c CMD` does not replace itself by CMD
    /// (dash), so [`pid`](Self::pid) is the shell unless the template says `exec CMD`;
    /// sample these pids to measure the server itself.
    pub fn group_pids(&self) -> Vec<u32> {
        let mut pids = Vec::new();
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return pids;
        };
        for entry in dir.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // "pid (comm) state ppid pgrp ..."; comm may contain spaces and parentheses.
            let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
                continue;
            };
            let mut fields = after.split_whitespace();
            let state = fields.next();
            let pgrp = fields.nth(1).and_then(|f| f.parse::<u32>().ok());
            if pgrp == Some(self.pid) && !matches!(state, Some("Z") | Some("X")) {
                pids.push(pid);
            }
        }
        pids.sort_unstable();
        pids
    }

    /// `Err(DiedDuringRun)` with the exit status and output tail if the process has exited.
    pub fn check_alive(&mut self) -> Result<(), ServerFailure> {
        let status = match self.exit {
            Some(status) => status,
            None if has_exited(self.pid) => self.reap_after_exit(),
            None => return Ok(()),
        };
        Err(failure(
            FailureKind::DiedDuringRun,
            format!(
                "server died during the run ({}): `{}`",
                describe_status(status),
                self.command
            ),
            self.output.tail(),
        ))
    }

    /// The last ~20 lines / 4 KiB of the server's stdout and stderr.
    pub fn output_tail(&self) -> String {
        self.output.tail()
    }

    /// Send the stop signal to the process group, wait up to the grace period, then SIGKILL
    /// the group; returns how it ended (e.g. "exited 0 after SIGTERM in 12ms", "killed
    /// after 5s grace").
    pub fn stop(mut self) -> String {
        self.stop_inner()
    }

    /// The leader has exited (not reaped): kill what is left of its group, reap it, and
    /// let the readers drain so the tail is complete.
    fn reap_after_exit(&mut self) -> ExitStatus {
        signal_group(self.pid, libc::SIGKILL);
        let status = match self.child.wait() {
            Ok(s) => s,
            Err(_) => ExitStatus::from_raw(0),
        };
        self.exit = Some(status);
        self.finish_readers();
        status
    }

    fn finish_readers(&mut self) {
        if self.output.wait_closed(READER_DRAIN) {
            for h in self.readers.drain(..) {
                let _ = h.join();
            }
        } else {
            // Something outside the group still holds the pipes; leave the threads be.
            self.readers.clear();
        }
    }

    /// SIGKILL the group and wait (bounded) for the leader; true if it was reaped.
    fn kill_now(&mut self) -> bool {
        signal_group(self.pid, libc::SIGKILL);
        let deadline = Instant::now() + KILL_WAIT;
        loop {
            if has_exited(self.pid) {
                if let Ok(status) = self.child.wait() {
                    self.exit = Some(status);
                }
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn stop_inner(&mut self) -> String {
        if let Some(status) = self.exit {
            return format!("had already ended ({})", describe_status(status));
        }
        if has_exited(self.pid) {
            let status = self.reap_after_exit();
            return format!(
                "had already ended ({}) before stop",
                describe_status(status)
            );
        }
        let sig = signal_name(self.stop_signal);
        let sent = Instant::now();
        signal_group(self.pid, self.stop_signal);
        let deadline = sent + self.grace;
        let mut pause = Duration::from_millis(1);
        loop {
            if has_exited(self.pid) {
                let took = sent.elapsed();
                let status = self.reap_after_exit();
                return match (status.code(), status.signal()) {
                    (Some(code), _) => format!("exited {code} after {sig} in {}", ms(took)),
                    (None, Some(s)) if s == self.stop_signal => {
                        format!("ended by {sig} in {}", ms(took))
                    }
                    _ => format!("{} after {sig} in {}", describe_status(status), ms(took)),
                };
            }
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            std::thread::sleep(pause.min(deadline - now));
            pause = (pause * 2).min(Duration::from_millis(20));
        }
        let reaped = self.kill_now();
        self.finish_readers();
        if reaped {
            format!("killed after {} grace", ms(self.grace))
        } else {
            format!(
                "sent SIGKILL after {} grace, but pid {} has not ended yet",
                ms(self.grace),
                self.pid
            )
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        if self.exit.is_none() {
            self.kill_now();
            self.finish_readers();
        }
    }
}

impl std::fmt::Debug for RunningServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningServer")
            .field("pid", &self.pid)
            .field("command", &self.command)
            .field("exit", &self.exit)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn factors(pairs: &[(&str, &str)]) -> Factors {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn expand_edge_cases() {
        let f = factors(&[("a", "1")]);
        assert_eq!(expand("", &f).unwrap(), "");
        assert_eq!(expand("{a}{a}", &f).unwrap(), "11");
        assert_eq!(expand("{{{a}}}", &f).unwrap(), "{1}");
        assert!(expand("x{a", &f).unwrap_err().contains("unclosed"));
        assert!(expand("x}", &f).unwrap_err().contains("unmatched"));
        let e = expand("{b}", &Factors::new()).unwrap_err();
        assert!(e.contains("`b`") && e.contains("none"), "{e}");
    }

    #[test]
    fn ring_buffer_is_bounded() {
        let out = Output::new(Some("needle".into()));
        for i in 0..100 {
            out.push_line(format!("line {i}\n").as_bytes());
        }
        let tail = out.tail();
        assert_eq!(tail.lines().count(), TAIL_LINES);
        assert!(tail.ends_with("line 99\n"));
        assert!(!out.needle_seen());
        out.push_line(&vec![b'x'; 10_000]);
        let tail = out.tail();
        assert!(tail.len() <= TAIL_BYTES + 8, "{}", tail.len());
        out.push_line(b"the needle\r\n");
        assert!(out.needle_seen());
        assert!(out.tail().ends_with("the needle\n"));
    }

    #[test]
    fn status_descriptions() {
        assert_eq!(
            describe_status(ExitStatus::from_raw(3 << 8)),
            "exit status 3"
        );
        assert_eq!(
            describe_status(ExitStatus::from_raw(9)),
            "killed by signal 9 (SIGKILL)"
        );
        assert_eq!(signal_name(libc::SIGTERM), "SIGTERM");
        assert_eq!(ms(Duration::from_micros(12_345)), "12ms");
    }
}
