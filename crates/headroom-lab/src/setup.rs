//! What the lab does around a server's start besides spawning it: configuration files rendered
//! from templates (`server.files`), the settle command (`server.before_run`), and the two
//! readiness probes that do more than connect: a command that must exit 0 (`ready.command`,
//! e.g. `psql -c 'SELECT 1'`) and an XMPP stream opened to a domain (`ready.xmpp`).
//!
//! Every step is bounded: a template file is at most [`MAX_TEMPLATE_BYTES`], a command runs in
//! its own process group and is killed (the whole group) at its deadline, its output is kept to
//! its last [`TAIL_BYTES`], and the XMPP probe reads at most [`XMPP_READ_LIMIT`] bytes.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The levels of one configuration: factor name -> level (`server` re-exports it).
pub type Factors = std::collections::BTreeMap<String, String>;

/// Largest template a `server.files` entry may name.
pub const MAX_TEMPLATE_BYTES: u64 = 1 << 20;
/// Output of a step kept for its failure message.
const TAIL_BYTES: usize = 4096;
/// Most bytes the XMPP probe reads before it gives up on seeing the features.
const XMPP_READ_LIMIT: usize = 64 * 1024;

/// Replace `{name}` for each name in `values` and leave every other brace alone: scenario
/// texts keep their own `${var}`, and configuration files (nginx's blocks, Apache's
/// `%{Referer}i`) keep theirs.
pub fn expand_known(text: &str, values: &Factors) -> String {
    let mut out = text.to_string();
    for (k, v) in values {
        out = out.replace(&format!("{{{k}}}"), v);
    }
    out
}

/// Render every `(template, path)` of `files` for `values`: the template is read from
/// `dir.join(expand(template))`, its known placeholders replaced, and written to
/// `expand(path)` (parent directories made). Returns the paths written.
pub fn render_files(
    files: &[(String, String)],
    dir: &Path,
    values: &Factors,
) -> Result<Vec<PathBuf>, String> {
    let mut written = Vec::with_capacity(files.len());
    for (template, path) in files {
        let src = dir.join(expand_known(template, values));
        let dst = PathBuf::from(expand_known(path, values));
        let meta = std::fs::metadata(&src)
            .map_err(|e| format!("server.files: template {}: {e}", src.display()))?;
        if !meta.is_file() {
            return Err(format!(
                "server.files: template {} is not a regular file",
                src.display()
            ));
        }
        if meta.len() > MAX_TEMPLATE_BYTES {
            return Err(format!(
                "server.files: template {} is {} bytes, more than {MAX_TEMPLATE_BYTES}",
                src.display(),
                meta.len()
            ));
        }
        let text = std::fs::read_to_string(&src)
            .map_err(|e| format!("server.files: template {}: {e}", src.display()))?;
        if let Some(parent) = dst.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("server.files: cannot create {}: {e}", parent.display()))?;
        }
        std::fs::write(&dst, expand_known(&text, values))
            .map_err(|e| format!("server.files: cannot write {}: {e}", dst.display()))?;
        written.push(dst);
    }
    Ok(written)
}

/// How a bounded command ended when it did not exit 0.
#[derive(Debug)]
pub struct StepFailed {
    pub message: String,
    /// The last [`TAIL_BYTES`] of its stdout and stderr.
    pub tail: String,
}

/// Runs `sh -c command` in its own process group with `env` and `cwd`, for at most `timeout`
/// (then SIGKILL to the group); `Ok` when it exits 0. Its output is collected (the tail kept).
pub fn run_bounded(
    what: &str,
    command: &str,
    env: &[(String, String)],
    cwd: Option<&Path>,
    timeout: Duration,
) -> Result<(), StepFailed> {
    let mut cmd = Command::new("/bin/sh");
    cmd.args(["-c", command])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .envs(env.iter().map(|(k, v)| (k, v)));
    if let Some(d) = cwd {
        cmd.current_dir(d);
    }
    // As the server: a lab killed outright takes its steps with it.
    // SAFETY: between fork and exec only async-signal-safe calls (prctl).
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|e| StepFailed {
        message: format!("{what}: cannot run `{command}`: {e}"),
        tail: String::new(),
    })?;
    let pgid = child.id() as libc::pid_t;
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    for stream in [
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    ]
    .into_iter()
    .flatten()
    {
        let tx = tx.clone();
        // A thread per stream, ended by end-of-file (or left behind if something outside the
        // group keeps the pipe: it holds at most one buffer).
        let _ = std::thread::Builder::new()
            .name("lab-step-output".into())
            .spawn(move || {
                let mut s = stream;
                let mut buf = vec![0u8; 8192];
                loop {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if tx.send(buf[..n].to_vec()).is_err() {
                                break;
                            }
                        }
                    }
                }
            });
    }
    drop(tx);
    let mut tail: Vec<u8> = Vec::new();
    let mut keep = |chunk: Vec<u8>| {
        tail.extend_from_slice(&chunk);
        if tail.len() > TAIL_BYTES {
            tail.drain(..tail.len() - TAIL_BYTES);
        }
    };
    let started = Instant::now();
    let deadline = started + timeout;
    let status = loop {
        while let Ok(chunk) = rx.try_recv() {
            keep(chunk);
        }
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) => {}
            Err(_) => break None,
        }
        if Instant::now() >= deadline {
            // SAFETY: kill(2) on our child's process group.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            let _ = child.wait();
            break None;
        }
        if let Ok(chunk) = rx.recv_timeout(Duration::from_millis(10)) {
            keep(chunk);
        }
    };
    // What is left in the pipes, briefly (the group is gone or done).
    let drain_until = Instant::now() + Duration::from_millis(200);
    while let Ok(chunk) = rx.recv_timeout(drain_until.saturating_duration_since(Instant::now())) {
        keep(chunk);
    }
    // Whatever the leader left running in its group goes with it.
    // SAFETY: as above; a group that is gone makes this a no-op (ESRCH).
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
    let tail = String::from_utf8_lossy(&tail).into_owned();
    match status {
        Some(s) if s.success() => Ok(()),
        Some(s) => {
            let how = match (s.code(), s.signal()) {
                (Some(c), _) => format!("exit status {c}"),
                (None, Some(sig)) => format!("killed by signal {sig}"),
                _ => s.to_string(),
            };
            Err(StepFailed {
                message: format!("{what} `{command}` failed ({how})"),
                tail,
            })
        }
        None => Err(StepFailed {
            message: format!(
                "{what} `{command}` did not end within {} (killed)",
                humantime::format_duration(Duration::from_millis(timeout.as_millis() as u64))
            ),
            tail,
        }),
    }
}

/// A TCP connection to the first of `addrs` that takes one within `timeout` (the readiness
/// probes' connect); the last failure otherwise.
pub(crate) fn connect(addrs: &[SocketAddr], timeout: Duration) -> Result<TcpStream, String> {
    let mut last = String::from("no address");
    for addr in addrs {
        match TcpStream::connect_timeout(addr, timeout) {
            Ok(s) => return Ok(s),
            Err(e) => last = format!("connect to {addr}: {e}"),
        }
    }
    Err(last)
}

/// One XMPP readiness check: a client stream opened to `domain` on one of `addrs` is answered
/// with a stream header and its `<stream:features>` (ejabberd answers before it can log anyone
/// in only once its listeners and the domain's modules are up). `Err` says what came instead.
pub fn xmpp_ready(addrs: &[SocketAddr], domain: &str, timeout: Duration) -> Result<(), String> {
    let mut s = connect(addrs, timeout)?;
    let io = |e: std::io::Error| format!("XMPP stream to {domain}: {e}");
    let deadline = Instant::now() + timeout;
    s.set_write_timeout(Some(timeout)).map_err(io)?;
    let open = format!(
        "<?xml version='1.0'?><stream:stream to='{}' xmlns='jabber:client' \
         xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>",
        xml_attr(domain)
    );
    s.write_all(open.as_bytes()).map_err(io)?;
    let mut got: Vec<u8> = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&got);
        if text.contains("<stream:features") || text.contains("<features") {
            let _ = s.write_all(b"</stream:stream>");
            return Ok(());
        }
        if let Some(at) = text.find("<stream:error") {
            let error: String = text[at..].chars().take(200).collect();
            return Err(format!("stream error: {error}"));
        }
        if got.len() >= XMPP_READ_LIMIT {
            return Err(format!("{XMPP_READ_LIMIT} bytes without <stream:features>"));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err("no <stream:features> in time".into());
        }
        s.set_read_timeout(Some(left)).map_err(io)?;
        match s.read(&mut buf) {
            Ok(0) => return Err("closed before <stream:features>".into()),
            Ok(n) => got.extend_from_slice(&buf[..n.min(XMPP_READ_LIMIT - got.len())]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io(e)),
        }
    }
}

fn xml_attr(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('\'', "&apos;")
        .replace('<', "&lt;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn values(pairs: &[(&str, &str)]) -> Factors {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn files_are_rendered_with_known_names_only() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("nginx-2.conf"),
            "worker_processes {workers};\nhttp { server { listen {port}; } }\nlog '%{Referer}i';\n",
        )
        .unwrap();
        let out = dir.path().join("out");
        let v = values(&[
            ("workers", "2"),
            ("port", "8080"),
            ("output", out.to_str().unwrap()),
        ]);
        let files = vec![(
            "nginx-{workers}.conf".to_string(),
            "{output}/conf/n-{port}.conf".to_string(),
        )];
        let written = render_files(&files, dir.path(), &v).unwrap();
        assert_eq!(written, vec![out.join("conf/n-8080.conf")]);
        assert_eq!(
            std::fs::read_to_string(&written[0]).unwrap(),
            "worker_processes 2;\nhttp { server { listen 8080; } }\nlog '%{Referer}i';\n"
        );
    }

    #[test]
    fn a_missing_or_oversized_template_is_a_one_line_error() {
        let dir = tempfile::tempdir().unwrap();
        let v = values(&[("port", "1")]);
        let e =
            render_files(&[("nope.conf".into(), "/dev/null".into())], dir.path(), &v).unwrap_err();
        assert!(e.contains("nope.conf") && !e.contains('\n'), "{e}");
        let big = dir.path().join("big.conf");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(MAX_TEMPLATE_BYTES + 1)
            .unwrap();
        let e = render_files(
            &[(
                "big.conf".into(),
                dir.path().join("x").display().to_string(),
            )],
            dir.path(),
            &v,
        )
        .unwrap_err();
        assert!(e.contains("more than"), "{e}");
        assert!(!dir.path().join("x").exists());
    }

    #[test]
    fn a_step_passes_fails_with_its_output_and_is_killed_at_its_deadline() {
        run_bounded("before_run", "true", &[], None, Duration::from_secs(5)).unwrap();
        let e = run_bounded(
            "before_run",
            "echo settling; echo broke >&2; exit 3",
            &[],
            None,
            Duration::from_secs(5),
        )
        .unwrap_err();
        assert!(e.message.contains("exit status 3"), "{}", e.message);
        assert!(
            e.tail.contains("settling") && e.tail.contains("broke"),
            "{}",
            e.tail
        );
        let env = vec![("HR_STEP".to_string(), "seen".to_string())];
        let e = run_bounded(
            "s",
            "echo $HR_STEP; false",
            &env,
            None,
            Duration::from_secs(5),
        )
        .unwrap_err();
        assert!(e.tail.contains("seen"), "{}", e.tail);
        // A child that outlives the shell is killed with the group, in bounded time.
        let t = Instant::now();
        let e = run_bounded(
            "before_run",
            "sleep 30 & sleep 30",
            &[],
            None,
            Duration::from_millis(300),
        )
        .unwrap_err();
        assert!(e.message.contains("did not end within"), "{}", e.message);
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    }

    #[test]
    fn the_xmpp_probe_wants_the_features_and_reports_what_came_instead() {
        let serve = |answer: &'static str| {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let h = std::thread::spawn(move || {
                let (mut c, _) = l.accept().unwrap();
                let mut buf = [0u8; 1024];
                let n = c.read(&mut buf).unwrap();
                let seen = String::from_utf8_lossy(&buf[..n]).into_owned();
                c.write_all(answer.as_bytes()).unwrap();
                std::thread::sleep(Duration::from_millis(100));
                seen
            });
            (addr, h)
        };
        let (addr, h) = serve(
            "<?xml version='1.0'?><stream:stream from='lab.test' id='1' version='1.0'>\
             <stream:features><mechanisms/></stream:features>",
        );
        xmpp_ready(&[addr], "lab.test", Duration::from_secs(2)).unwrap();
        assert!(h.join().unwrap().contains("to='lab.test'"));
        let (addr, h) =
            serve("<stream:stream><stream:error><host-unknown/></stream:error></stream:stream>");
        let e = xmpp_ready(&[addr], "other", Duration::from_secs(2)).unwrap_err();
        assert!(e.contains("host-unknown"), "{e}");
        h.join().unwrap();
        let (addr, h) = serve("HTTP/1.1 400 Bad Request\r\n\r\n");
        let e = xmpp_ready(&[addr], "lab.test", Duration::from_millis(500)).unwrap_err();
        assert!(e.contains("stream:features") || e.contains("closed"), "{e}");
        h.join().unwrap();
    }
}
