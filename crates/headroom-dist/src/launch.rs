//! Launching agents for a controller: the local and SSH launchers (the third, Kubernetes, is
//! [`crate::k8s`], which writes manifests instead of starting processes).
//!
//! `--agents SPEC` (of `headroom run` and `headroom lab`) is parsed by [`parse_agents`] into an
//! [`AgentsSpec`]; [`start_agents`] then starts `local:N` agents as child processes of `exe`
//! (the caller's own binary: the CLI passes `std::env::current_exe()`, so a controller starts
//! agents of its own version), starts `ssh://` agents with `ssh HOST exec headroom agent ...`
//! (`HEADROOM_REMOTE_BIN` names the remote binary, `HEADROOM_SSH_OPTS` adds ssh options), or
//! reads `file:` agents that already run. Every started agent is told `--listen HOST:0
//! --token-file - --stop-on-stdin-eof`: it gets the token on its standard input (never on a
//! command line), prints [`LISTENING`] and its address on stdout (and, when it serves TLS, its
//! certificate's `sha256:` fingerprint after the address, which the controller then pins: for
//! an ssh agent that line came through ssh's own authenticated channel), and ends when that
//! input ends. ssh agents listen beyond loopback, so they are told `--tls-self-signed`; local
//! ones listen on 127.0.0.1 in plain HTTP/2. [`Started`] holds the processes and their stdins; dropping it closes the stdins, sends
//! SIGTERM and waits (5 s, then SIGKILL), so the agents never outlive the run.
//!
//! With a [`PortRange`] (`--ports LO-HI` or `HEADROOM_PORTS`, for machines where only some
//! ports are open) local agents are told `--listen 127.0.0.1:P` with P the first port of the
//! range nobody listens on, instead of letting the kernel pick one.
//!
//! Callers: the binary's `dist.rs` (`headroom run --agents`, through a wrapper that passes the
//! executable and turns [`LaunchError::Usage`] into exit code 2) and `lab.rs` (`headroom lab`,
//! agents started once for the whole lab). [`random_token`] is the token of agents a controller
//! starts itself (local ones).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command as Process, Stdio};
use std::time::{Duration, Instant};

use crate::tls::Fingerprint;
use crate::AgentAddr;

/// How long the controller waits for a started agent to say where it listens.
const AGENT_START_TIMEOUT: Duration = Duration::from_secs(30);
/// The line an agent prints on stdout once it listens (a parent reads the address from it);
/// `headroom agent` prints it: `LISTENING ADDR` or, over TLS, `LISTENING ADDR sha256:HEX`
/// (the rest of the line is then a line of a `file:` agents list).
pub const LISTENING: &str = "headroom agent listening on ";

/// What follows [`LISTENING`]: the address, and the fingerprint of an agent serving TLS.
pub fn parse_listening(rest: &str) -> Option<(SocketAddr, Option<Fingerprint>)> {
    let mut words = rest.split_whitespace();
    let addr = words.next()?.parse().ok()?;
    let pin = match words.next() {
        Some(f) => Some(f.parse().ok()?),
        None => None,
    };
    words.next().is_none().then_some((addr, pin))
}

/// Why agents were not started.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The `file:` list cannot be read or lists no agent: the command line's fault (the CLI
    /// exits 2).
    #[error("{0}")]
    Usage(String),
    /// An agent process did not start or did not say where it listens (the message names the
    /// agent and, for ssh, what to check).
    #[error("{0}")]
    Start(String),
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// `--agents`: where the agents are.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentsSpec {
    /// N child processes of this binary on this machine.
    Local(usize),
    /// Started over SSH: `ssh://[user@]host[:port]`, comma-separated.
    Ssh(Vec<SshTarget>),
    /// Already running agents listed in a file: `host:port [sha256:HEX]` per line, `#`
    /// comments.
    File(PathBuf),
}

/// One `ssh://` agent.
#[derive(Debug, Clone, PartialEq)]
pub struct SshTarget {
    /// `user@host` or `host`, as given to ssh.
    pub dest: String,
    /// The host alone (where the agent is reached).
    pub host: String,
    pub port: Option<u16>,
}

/// `--agents SPEC`: `local:N` (1 to 256), `ssh://[user@]host[:port],...` or `file:PATH`; the
/// error is a usage message naming the flag.
pub fn parse_agents(s: &str) -> Result<AgentsSpec, String> {
    let fix = "use local:N, ssh://user@host[,ssh://...] or file:agents.txt";
    if let Some(n) = s.strip_prefix("local:") {
        let n: usize = n
            .parse()
            .map_err(|_| format!("bad --agents '{s}': N must be a number; {fix}"))?;
        if n == 0 || n > 256 {
            return Err(format!(
                "bad --agents '{s}': between 1 and 256 local agents"
            ));
        }
        return Ok(AgentsSpec::Local(n));
    }
    if let Some(f) = s.strip_prefix("file:") {
        if f.is_empty() {
            return Err(format!("bad --agents '{s}': no file name; {fix}"));
        }
        return Ok(AgentsSpec::File(PathBuf::from(f)));
    }
    if s.starts_with("ssh://") {
        let mut targets = Vec::new();
        for part in s.split(',') {
            let Some(rest) = part.strip_prefix("ssh://") else {
                return Err(format!(
                    "bad --agents '{s}': '{part}' is not ssh://...; {fix}"
                ));
            };
            let rest = rest.trim_end_matches('/');
            let (user, hostport) = match rest.rsplit_once('@') {
                Some((u, h)) => (Some(u), h),
                None => (None, rest),
            };
            let (host, port) = match hostport.rsplit_once(':') {
                Some((h, p)) if !h.contains(':') || h.starts_with('[') => (
                    h.trim_matches(|c| c == '[' || c == ']'),
                    Some(
                        p.parse::<u16>()
                            .map_err(|_| format!("bad --agents '{s}': bad ssh port in '{part}'"))?,
                    ),
                ),
                _ => (hostport, None),
            };
            if host.is_empty() || user.is_some_and(str::is_empty) {
                return Err(format!("bad --agents '{s}': '{part}' names no host; {fix}"));
            }
            targets.push(SshTarget {
                dest: match user {
                    Some(u) => format!("{u}@{host}"),
                    None => host.to_string(),
                },
                host: host.to_string(),
                port,
            });
        }
        return Ok(AgentsSpec::Ssh(targets));
    }
    Err(format!("bad --agents '{s}'; {fix}"))
}

/// `--ports LO-HI` / `HEADROOM_PORTS`: the ports on which what headroom starts on this machine
/// listens (local agents; the lab's `{port}`), for machines where only some ports are open.
/// Without one, the kernel picks any free port (port 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortRange {
    lo: u16,
    hi: u16,
}

impl std::str::FromStr for PortRange {
    type Err = String;

    /// `LO-HI`, both from 1 to 65535 and LO <= HI (`31000-31000` is one port).
    fn from_str(s: &str) -> Result<Self, String> {
        let port = |p: &str| p.trim().parse::<u16>().ok().filter(|&p| p > 0);
        match s.split_once('-').map(|(lo, hi)| (port(lo), port(hi))) {
            Some((Some(lo), Some(hi))) if lo <= hi => Ok(PortRange { lo, hi }),
            _ => Err(format!(
                "'{s}' is not a port range: want LO-HI, two ports from 1 to 65535 with LO <= HI \
                 (e.g. 31000-31999)"
            )),
        }
    }
}

impl std::fmt::Display for PortRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.lo, self.hi)
    }
}

impl PortRange {
    pub fn lo(self) -> u16 {
        self.lo
    }

    pub fn hi(self) -> u16 {
        self.hi
    }

    pub fn contains(self, port: u16) -> bool {
        (self.lo..=self.hi).contains(&port)
    }

    /// The first port at or after `from` (going round the range; `from` outside it means
    /// `lo`) on which `ip` can listen now. Found by binding a listener and closing it at
    /// once: as with any free-port probe, another process may take the port before its user
    /// binds it. The error is one line naming the range.
    pub fn free_port(self, ip: IpAddr, from: u16) -> Result<u16, String> {
        let from = if self.contains(from) { from } else { self.lo };
        let size = u32::from(self.hi - self.lo) + 1;
        let offset = u32::from(from - self.lo);
        for i in 0..size {
            let p = (u32::from(self.lo) + (offset + i) % size) as u16;
            if TcpListener::bind((ip, p)).is_ok() {
                return Ok(p);
            }
        }
        Err(format!(
            "no free port in the port range {self} (--ports or HEADROOM_PORTS) on {ip}: all \
             {size} are in use; give a wider range"
        ))
    }
}

/// Agents this controller started: stopped (and waited for) when dropped.
pub struct Started {
    pub addrs: Vec<AgentAddr>,
    children: Vec<Child>,
    /// Each child's stdin, kept open: closing it ends the agent (`--stop-on-stdin-eof`), and for
    /// an agent over SSH it is the only way (see `headroom agent --stop-on-stdin-eof`).
    stdins: Vec<ChildStdin>,
}

impl Drop for Started {
    fn drop(&mut self) {
        // End of file on each agent's stdin, through ssh for remote ones: the agent stops.
        self.stdins.clear();
        for c in &mut self.children {
            // SIGTERM: the agent's Ctrl-C path stops its run and exits.
            unsafe {
                libc::kill(c.id() as libc::pid_t, libc::SIGTERM);
            }
        }
        let until = Instant::now() + Duration::from_secs(5);
        for c in &mut self.children {
            while Instant::now() < until {
                if let Ok(Some(_)) = c.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Start (local, ssh) or list (file) the agents; local ones run `exe agent ...` and listen on a
/// port of `ports` when given (any free port otherwise).
pub fn start_agents(
    spec: &AgentsSpec,
    token: &str,
    exe: &Path,
    ports: Option<PortRange>,
) -> Result<Started, LaunchError> {
    let mut started = Started {
        addrs: Vec::new(),
        children: Vec::new(),
        stdins: Vec::new(),
    };
    match spec {
        AgentsSpec::Local(n) => {
            let mut next = ports.map_or(0, PortRange::lo);
            for i in 0..*n {
                // The agents before this one already listen, so the probe passes over them.
                let port = match ports {
                    Some(r) => {
                        let p = r
                            .free_port(IpAddr::V4(Ipv4Addr::LOCALHOST), next)
                            .map_err(LaunchError::Start)?;
                        next = p.wrapping_add(1);
                        p
                    }
                    None => 0,
                };
                let mut cmd = Process::new(exe);
                cmd.args(["agent", "--listen", &format!("127.0.0.1:{port}")]);
                cmd.args(["--token-file", "-"]);
                cmd.arg("--stop-on-stdin-eof");
                // A local agent must not outlive its controller, whatever kills the controller.
                unsafe {
                    use std::os::unix::process::CommandExt;
                    cmd.pre_exec(|| {
                        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                        Ok(())
                    });
                }
                let name = format!("local:{}", i + 1);
                let (child, stdin, addr, pin) = spawn_agent(cmd, token, &name)?;
                started.children.push(child);
                started.stdins.push(stdin);
                started.addrs.push(AgentAddr {
                    name,
                    endpoint: format!("http://{addr}"),
                    pin,
                });
            }
        }
        AgentsSpec::Ssh(targets) => {
            let bin = std::env::var("HEADROOM_REMOTE_BIN").unwrap_or_else(|_| "headroom".into());
            for t in targets {
                let mut cmd = Process::new("ssh");
                cmd.args(["-o", "BatchMode=yes", "-T"]);
                // Extra ssh options (identity, config file, known hosts), split on whitespace.
                if let Ok(opts) = std::env::var("HEADROOM_SSH_OPTS") {
                    cmd.args(opts.split_whitespace());
                }
                if let Some(p) = t.port {
                    cmd.args(["-p", &p.to_string()]);
                }
                // The token goes through ssh's standard input, never onto a command line. The
                // agent ends when that input ends: when this controller closes it or dies, or
                // the connection drops (sshd sends no signal to a command without a terminal).
                // It listens beyond loopback, so over TLS: a new self-signed certificate, whose
                // fingerprint comes back on its `listening` line through ssh and is pinned.
                cmd.arg(&t.dest).arg(format!(
                    "exec {bin} agent --listen 0.0.0.0:0 --tls-self-signed --token-file - \
                     --stop-on-stdin-eof"
                ));
                let name = match t.port {
                    Some(p) => format!("ssh://{}:{p}", t.dest),
                    None => format!("ssh://{}", t.dest),
                };
                let (child, stdin, addr, pin) = spawn_agent(cmd, token, &name)?;
                if pin.is_none() {
                    drop((child, stdin));
                    return Err(LaunchError::Start(format!(
                        "agent {name} did not say which certificate it serves (an older \
                         headroom on that host? run the same version as the controller)"
                    )));
                }
                started.children.push(child);
                started.stdins.push(stdin);
                let host = if t.host.contains(':') {
                    format!("[{}]", t.host)
                } else {
                    t.host.clone()
                };
                started.addrs.push(AgentAddr {
                    name,
                    endpoint: format!("http://{host}:{}", addr.port()),
                    pin,
                });
            }
        }
        AgentsSpec::File(f) => {
            let text = std::fs::read_to_string(f)
                .map_err(|e| LaunchError::Usage(format!("--agents file:{}: {e}", f.display())))?;
            for (no, line) in text.lines().enumerate() {
                let line = line.split('#').next().unwrap_or("").trim();
                if line.is_empty() {
                    continue;
                }
                let at = |why: String| {
                    LaunchError::Usage(format!(
                        "--agents file:{} line {}: {why}",
                        f.display(),
                        no + 1
                    ))
                };
                let mut words = line.split_whitespace();
                let hostport = words.next().unwrap_or("").trim_start_matches("http://");
                if !hostport.contains(':') {
                    return Err(at(format!(
                        "'{line}' is not HOST:PORT [sha256:FINGERPRINT]"
                    )));
                }
                let pin = match words.next() {
                    Some(w) => Some(w.parse::<Fingerprint>().map_err(at)?),
                    None => None,
                };
                if let Some(extra) = words.next() {
                    return Err(at(format!(
                        "'{extra}' after the fingerprint (one agent per line: HOST:PORT \
                         [sha256:FINGERPRINT])"
                    )));
                }
                started.addrs.push(AgentAddr {
                    name: hostport.to_string(),
                    endpoint: format!("http://{hostport}"),
                    pin,
                });
            }
            if started.addrs.is_empty() {
                return Err(LaunchError::Usage(format!(
                    "--agents file:{} lists no agent (one HOST:PORT [sha256:FINGERPRINT] per \
                     line)",
                    f.display()
                )));
            }
        }
    }
    Ok(started)
}

/// Start one agent process, hand it the token on stdin and read where it listens. The stdin is
/// returned open: the agent runs until it is closed.
fn spawn_agent(
    mut cmd: Process,
    token: &str,
    name: &str,
) -> Result<(Child, ChildStdin, SocketAddr, Option<Fingerprint>), LaunchError> {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = cmd
        .spawn()
        .map_err(|e| LaunchError::Start(format!("cannot start agent {name}: {e}")))?;
    let mut stdin = child.stdin.take().expect("piped");
    // A process that already exited (ssh refused) closes the pipe: say so below, not here.
    let _ = writeln!(stdin, "{token}").and_then(|_| stdin.flush());
    let stdout = child.stdout.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut r = BufReader::new(stdout);
        let mut line = String::new();
        while r.read_line(&mut line).unwrap_or(0) > 0 {
            if let Some(a) = line.trim().strip_prefix(LISTENING) {
                let _ = tx.send(parse_listening(a));
                // Keep draining so the agent never blocks on a full pipe.
                let mut sink = Vec::new();
                let _ = r.read_to_end(&mut sink);
                return;
            }
            line.clear();
        }
        let _ = tx.send(None);
    });
    let why = match rx.recv_timeout(AGENT_START_TIMEOUT) {
        Ok(Some((addr, pin))) => return Ok((child, stdin, addr, pin)),
        Ok(None) => {
            // Its stdout ended: it is exiting (ssh could not log in, no such binary...). Give
            // it a moment to, so that its own exit status is the one reported.
            let until = Instant::now() + Duration::from_secs(2);
            while Instant::now() < until && matches!(child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
            "it ended before saying where it listens".to_string()
        }
        Err(_) => format!(
            "it did not say where it listens within {}s",
            AGENT_START_TIMEOUT.as_secs()
        ),
    };
    drop(stdin);
    let _ = child.kill();
    let status = child.wait().ok();
    let ssh_hint = if name.starts_with("ssh://") {
        "; its messages and ssh's are above (ssh exits with 255 when it cannot connect or log \
         in without a prompt: check the key, HEADROOM_SSH_OPTS and HEADROOM_REMOTE_BIN)"
    } else {
        ""
    };
    Err(LaunchError::Start(format!(
        "agent {name} did not start: {why}{}{ssh_hint}",
        status.map(|s| format!(" ({s})")).unwrap_or_default()
    )))
}

/// A random token for agents this controller starts itself (hex of 16 bytes from the kernel).
pub fn random_token() -> io::Result<String> {
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agents_specs() {
        assert_eq!(parse_agents("local:3"), Ok(AgentsSpec::Local(3)));
        assert_eq!(
            parse_agents("file:a.txt"),
            Ok(AgentsSpec::File(PathBuf::from("a.txt")))
        );
        assert_eq!(
            parse_agents("ssh://u@h1:2222,ssh://h2/,ssh://[::1]:22"),
            Ok(AgentsSpec::Ssh(vec![
                SshTarget {
                    dest: "u@h1".into(),
                    host: "h1".into(),
                    port: Some(2222),
                },
                SshTarget {
                    dest: "h2".into(),
                    host: "h2".into(),
                    port: None,
                },
                SshTarget {
                    dest: "::1".into(),
                    host: "::1".into(),
                    port: Some(22),
                },
            ]))
        );
        for (bad, why) in [
            ("local:0", "between 1 and 256"),
            ("local:x", "must be a number"),
            ("file:", "no file name"),
            ("ssh://@h", "names no host"),
            ("ssh://h,x", "is not ssh://"),
            ("tcp://h", "use local:N"),
        ] {
            let e = parse_agents(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn a_file_of_agents_is_read_and_a_bad_one_is_a_usage_error() {
        let dir = std::env::temp_dir().join(format!("headroom-launch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let exe = Path::new("/nonexistent");
        let list = dir.join("agents.txt");
        let fp = format!("sha256:{}", "0f".repeat(32));
        std::fs::write(
            &list,
            format!("# two\n10.0.0.1:7070 {fp}\nhttp://h:7071 # b\n\n"),
        )
        .unwrap();
        let s = start_agents(&AgentsSpec::File(list.clone()), "t", exe, None).unwrap();
        let eps: Vec<&str> = s.addrs.iter().map(|a| a.endpoint.as_str()).collect();
        assert_eq!(eps, ["http://10.0.0.1:7070", "http://h:7071"]);
        assert_eq!(s.addrs[0].pin, Some(fp.parse().unwrap()));
        assert_eq!(s.addrs[1].pin, None);
        for (bad, why) in [
            ("h:1 sha256:00\n", "not a certificate fingerprint"),
            (&*format!("h:1 {fp} x\n"), "after the fingerprint"),
        ] {
            std::fs::write(&list, bad).unwrap();
            let e = start_agents(&AgentsSpec::File(list.clone()), "t", exe, None).err();
            assert!(
                matches!(&e, Some(LaunchError::Usage(m)) if m.contains(why) && m.contains("line 1")),
                "{bad}: {e:?}"
            );
        }
        std::fs::write(&list, "# none\n").unwrap();
        let e = start_agents(&AgentsSpec::File(list.clone()), "t", exe, None).err();
        assert!(
            matches!(&e, Some(LaunchError::Usage(m)) if m.contains("lists no agent")),
            "{e:?}"
        );
        std::fs::write(&list, "h\n").unwrap();
        let e = start_agents(&AgentsSpec::File(list), "t", exe, None).err();
        assert!(
            matches!(&e, Some(LaunchError::Usage(m)) if m.contains("is not HOST:PORT")),
            "{e:?}"
        );
        let e = start_agents(&AgentsSpec::File(dir.join("missing")), "t", exe, None).err();
        assert!(matches!(e, Some(LaunchError::Usage(_))), "{e:?}");
        // A local agent that cannot be started says which.
        let e = start_agents(&AgentsSpec::Local(1), "t", exe, None).err();
        assert!(
            matches!(&e, Some(LaunchError::Start(m)) if m.contains("local:1")),
            "{e:?}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn port_ranges_parse_and_pick_a_free_port_in_range() {
        let r: PortRange = "31000-31009".parse().unwrap();
        assert_eq!(
            (r.lo(), r.hi(), r.to_string()),
            (31000, 31009, "31000-31009".into())
        );
        assert_eq!(
            "7-7".parse::<PortRange>().map(|r| r.to_string()),
            Ok("7-7".into())
        );
        for bad in [
            "", "31000", "9-8", "0-10", "1-65536", "a-b", "1-2-3", "-5", "5-",
        ] {
            let e = bad.parse::<PortRange>().unwrap_err();
            assert!(e.contains("want LO-HI"), "{bad}: {e}");
        }
        // A range of two ports, one of them taken: the other, from wherever the search starts.
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let p = taken.local_addr().unwrap().port();
        let (lo, other) = if p > 1024 { (p - 1, p - 1) } else { (p, p + 1) };
        let r: PortRange = format!("{lo}-{}", lo + 1).parse().unwrap();
        let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
        if TcpListener::bind((ip, other)).is_ok() {
            assert_eq!(r.free_port(ip, p), Ok(other));
            assert_eq!(r.free_port(ip, 1), Ok(other));
        }
        // Every port taken: one line naming the range.
        let one: PortRange = format!("{p}-{p}").parse().unwrap();
        let e = one.free_port(ip, p).unwrap_err();
        assert!(
            e.contains(&format!("no free port in the port range {p}-{p}")),
            "{e}"
        );
        assert!(!e.contains('\n'), "{e}");
    }

    #[test]
    fn listening_lines_parse() {
        let fp = format!("sha256:{}", "ab".repeat(32));
        assert_eq!(
            parse_listening("127.0.0.1:80"),
            Some(("127.0.0.1:80".parse().unwrap(), None))
        );
        assert_eq!(
            parse_listening(&format!("[::1]:80 {fp}")),
            Some(("[::1]:80".parse().unwrap(), Some(fp.parse().unwrap())))
        );
        assert_eq!(parse_listening("127.0.0.1:80 sha256:00"), None);
        assert_eq!(parse_listening(&format!("127.0.0.1:80 {fp} x")), None);
        assert_eq!(parse_listening("nowhere"), None);
    }

    #[test]
    fn random_tokens_are_32_hex_digits_and_differ() {
        let (a, b) = (random_token().unwrap(), random_token().unwrap());
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
