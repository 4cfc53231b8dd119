//! `headroom serve`: run one of the reference servers in the foreground until SIGTERM/Ctrl-C,
//! which drains it (stop accepting, finish in-flight requests, close idle connections) within
//! `--drain-timeout`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, ValueEnum};
use headroom_serve::{Arch, DbConfig, Poller, Runtime, ServerConfig, TlsSource};

use crate::parse::{parse_duration, parse_size, UsageError};

pub const SERVE_LONG: &str = "\
Run a reference server: an HTTP/1.1 server whose architecture is known, so a study can compare \
architectures, pollers and worker counts on one machine.

Architectures:
  thread-per-conn   one OS thread per connection (the multithreaded Apache model)
  pool              --handlers N threads, each blocking in accept and serving one connection
                    at a time (rudy, seed 002): clients beyond N wait in the backlog
  reactor           --workers N event loops over --poller select|poll|epoll (the kernel-poll
                    factor of seed 000)
  async             tokio, --runtime current-thread or multi with --workers K (seed 003)

Endpoints: /  /bytes/N  /sleep/MS  /file/PATH (--docroot)  /db/read/N  /db/write/N (--db)  /status
  /metrics  /status/CODE (answers with status CODE, 200 to 599)

Timeouts and bounds (a client that misbehaves costs a bounded amount, for a bounded time):
  --write-timeout 60s   every architecture: a connection whose queued output makes no progress
                        for this long (the client stopped reading) is closed; 0 disables
  --header-timeout T    a request head must be complete T after its first byte; default 20s
                        for thread-per-conn and pool (a slowloris holds one of their threads per
                        connection), none for reactor and async; 0 disables
  Output queued per connection: at most 256 KiB (plus one response head): /bytes/N bodies are
  produced in pieces of that size as the client reads, never whole; /file read into memory (the
  reactor, async and TLS; the blocking architectures use sendfile) is bounded by 64 MiB instead.
  Closed connections count in /status's timeouts.

TLS (every architecture; rustls, TLS 1.2 and 1.3, ALPN http/1.1): --tls CERT,KEY serves the PEM
certificate chain and key; --tls-self-signed makes a certificate for localhost, 127.0.0.1 and ::1
at start. Resumption: TLS 1.2 session IDs (a server cache) and tickets, TLS 1.3 tickets. A
handshake must finish within the header timeout (10s when there is none). /status counts tls_handshakes,
tls_resumed and tls_handshake_failures.

Prints one line 'headroom serve: listening on ADDR (...)' on stdout when ready, and with TLS a
second one with the certificate's SHA-256 fingerprint.
SIGTERM or Ctrl-C drains it; a second Ctrl-C stops at once.

Examples:
  headroom serve --listen 127.0.0.1:8080
  headroom serve --arch pool --handlers 5 --listen 127.0.0.1:8080
  headroom serve --arch reactor --poller poll --workers 1 --sndbuf 8k
  headroom serve --arch async --runtime multi --workers 2 --db sqlite:/tmp/h.db --db-pool 50
  headroom serve --tls-self-signed --listen 127.0.0.1:8443
  headroom serve --arch pool --handlers 50 --tls cert.pem,key.pem --header-timeout 5s";

#[derive(Args, Debug, Clone)]
// The text is given on the subcommand (args.rs): a variant's doc comment would replace it here.
pub struct ServeArgs {
    /// Server architecture.
    #[arg(long, value_enum, default_value = "reactor")]
    pub arch: ArchArg,
    /// Handler threads of --arch pool.
    #[arg(long, default_value_t = 10)]
    pub handlers: usize,
    /// Readiness mechanism of --arch reactor.
    #[arg(long, value_enum, default_value = "epoll")]
    pub poller: PollerArg,
    /// Event loops (reactor) or runtime worker threads (async multi); default: the cores.
    #[arg(long)]
    pub workers: Option<usize>,
    /// tokio runtime of --arch async.
    #[arg(long, value_enum, default_value = "multi")]
    pub runtime: RuntimeArg,
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Listen backlog.
    #[arg(long, default_value_t = 1024)]
    pub backlog: i32,
    /// SO_SNDBUF of accepted connections, e.g. 8k, 6m.
    #[arg(long, value_parser = parse_size)]
    pub sndbuf: Option<u32>,
    /// SO_RCVBUF of accepted connections.
    #[arg(long, value_parser = parse_size)]
    pub rcvbuf: Option<u32>,
    /// Disable TCP_NODELAY on accepted connections (on by default).
    #[arg(long)]
    pub no_nodelay: bool,
    /// Most connections held at once; more are accepted and closed (counted).
    #[arg(long)]
    pub max_conns: Option<usize>,
    /// Close keep-alive connections idle this long.
    #[arg(long, value_parser = parse_duration)]
    pub idle_timeout: Option<Duration>,
    /// Close connections whose request head is incomplete this long after its first byte
    /// [default: 20s for thread-per-conn and pool, none for reactor and async; 0: none].
    #[arg(long, value_parser = parse_duration)]
    pub header_timeout: Option<Duration>,
    /// Close connections whose queued output makes no progress this long (0: never).
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub write_timeout: Duration,
    /// Close a connection after this many requests.
    #[arg(long)]
    pub keepalive_requests: Option<u64>,
    /// Directory served under /file/PATH.
    #[arg(long)]
    pub docroot: Option<PathBuf>,
    /// Database of /db/*: sqlite:PATH (embedded) or postgres://user:pass@host:port/db.
    #[arg(long)]
    pub db: Option<String>,
    /// Connections in the database pool.
    #[arg(long, default_value_t = 10)]
    pub db_pool: usize,
    /// How long SIGTERM waits for in-flight requests before closing everything.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub drain_timeout: Duration,
    /// Serve HTTPS with this certificate chain and private key (PEM files), given as CERT,KEY.
    #[arg(long, value_name = "CERT,KEY", value_parser = parse_tls_files)]
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Serve HTTPS with a certificate made at start for localhost, 127.0.0.1 and ::1 (its
    /// SHA-256 fingerprint is printed after the ready line).
    #[arg(long, conflicts_with = "tls")]
    pub tls_self_signed: bool,
}

/// `CERT,KEY`: two file names (split at the first comma).
fn parse_tls_files(s: &str) -> Result<(PathBuf, PathBuf), String> {
    match s.split_once(',') {
        Some((cert, key)) if !cert.is_empty() && !key.is_empty() => {
            Ok((PathBuf::from(cert), PathBuf::from(key)))
        }
        _ => Err(format!(
            "'{s}': give the certificate and key PEM files as CERT,KEY"
        )),
    }
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchArg {
    ThreadPerConn,
    Pool,
    Reactor,
    Async,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollerArg {
    Select,
    Poll,
    Epoll,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeArg {
    CurrentThread,
    Multi,
}

impl ServeArgs {
    pub fn to_config(&self) -> Result<ServerConfig, UsageError> {
        let bad = |m: String| Err(UsageError(m));
        let workers = self
            .workers
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        if workers == 0 || workers > 1024 {
            return bad(format!("bad --workers {workers}: allowed 1 to 1024"));
        }
        let arch = match self.arch {
            ArchArg::ThreadPerConn => Arch::ThreadPerConn,
            ArchArg::Pool => {
                if self.handlers == 0 || self.handlers > 100_000 {
                    return bad(format!(
                        "bad --handlers {}: allowed 1 to 100000",
                        self.handlers
                    ));
                }
                Arch::Pool {
                    handlers: self.handlers,
                }
            }
            ArchArg::Reactor => Arch::Reactor {
                poller: match self.poller {
                    PollerArg::Select => Poller::Select,
                    PollerArg::Poll => Poller::Poll,
                    PollerArg::Epoll => Poller::Epoll,
                },
            },
            ArchArg::Async => Arch::Async {
                runtime: match self.runtime {
                    RuntimeArg::CurrentThread => Runtime::CurrentThread,
                    RuntimeArg::Multi => Runtime::Multi,
                },
            },
        };
        if self.backlog <= 0 {
            return bad(format!("bad --backlog {}: at least 1", self.backlog));
        }
        if self.max_conns == Some(0) || self.keepalive_requests == Some(0) {
            return bad("--max-conns and --keepalive-requests take at least 1".into());
        }
        if let Some(d) = &self.docroot {
            if !d.is_dir() {
                return bad(format!("bad --docroot '{}': not a directory", d.display()));
            }
        }
        let db = match &self.db {
            None => None,
            Some(url) => {
                if !(url.starts_with("sqlite:") || url.starts_with("postgres://")) {
                    return bad(format!(
                        "bad --db '{url}': use sqlite:PATH or postgres://user:pass@host:port/db"
                    ));
                }
                if self.db_pool == 0 || self.db_pool > 10_000 {
                    return bad(format!(
                        "bad --db-pool {}: allowed 1 to 10000",
                        self.db_pool
                    ));
                }
                Some(DbConfig {
                    url: url.clone(),
                    pool: self.db_pool,
                })
            }
        };
        let tls = match (&self.tls, self.tls_self_signed) {
            (Some((cert, key)), _) => {
                let source = TlsSource::Files {
                    cert: cert.clone(),
                    key: key.clone(),
                };
                // Read the files now: a bad one is a usage error (exit 2), not a failed start.
                if let Err(e) = source.check() {
                    return bad(format!("bad --tls: {e}"));
                }
                Some(source)
            }
            (None, true) => Some(TlsSource::SelfSigned),
            (None, false) => None,
        };
        let header_timeout = match (self.header_timeout, arch) {
            (Some(t), _) if t.is_zero() => None,
            (Some(t), _) => Some(t),
            (None, Arch::ThreadPerConn | Arch::Pool { .. }) => {
                Some(headroom_serve::DEFAULT_HEADER_TIMEOUT)
            }
            (None, _) => None,
        };
        let write_timeout = Some(self.write_timeout).filter(|t| !t.is_zero());
        Ok(ServerConfig {
            listen: self.listen,
            arch,
            workers,
            backlog: self.backlog,
            sndbuf: self.sndbuf,
            rcvbuf: self.rcvbuf,
            nodelay: !self.no_nodelay,
            max_conns: self.max_conns,
            idle_timeout: self.idle_timeout,
            header_timeout,
            write_timeout,
            keepalive_requests: self.keepalive_requests,
            docroot: self.docroot.clone(),
            db,
            tls,
            ..ServerConfig::default()
        })
    }
}

/// A short description of the architecture (and TLS) for the readiness line.
pub fn describe(c: &ServerConfig) -> String {
    let tls = match &c.tls {
        None => "",
        Some(TlsSource::SelfSigned) => ", tls self-signed",
        Some(TlsSource::Files { .. }) => ", tls",
    };
    format!("{}{tls}", describe_arch(c))
}

fn describe_arch(c: &ServerConfig) -> String {
    match c.arch {
        Arch::ThreadPerConn => "thread-per-conn".into(),
        Arch::Pool { handlers } => format!("pool, {handlers} handlers"),
        Arch::Reactor { poller } => {
            format!(
                "reactor, {}, {} workers",
                format!("{poller:?}").to_lowercase(),
                c.workers
            )
        }
        Arch::Async {
            runtime: Runtime::CurrentThread,
        } => "async, current-thread".into(),
        Arch::Async {
            runtime: Runtime::Multi,
        } => format!("async, multi, {} workers", c.workers),
    }
}

pub fn cmd_serve(a: &ServeArgs) -> anyhow::Result<ExitCode> {
    let config = a.to_config()?;
    let what = describe(&config);
    // The handler first: the server answers from its own threads as soon as it is started, so
    // a SIGTERM sent right after its first answer (a lab stopping it at once) must find the
    // handler there, not the default action that kills without a drain (seen under load in
    // tests/edges.rs).
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let _ = ctrlc::set_handler(move || {
        let _ = tx.send(());
    });
    let server = headroom_serve::start(config.clone())
        .map_err(|e| anyhow::anyhow!("cannot start the server on {}: {e}", config.listen))?;
    // A closed stdout (`| head -1`, a lab that stopped reading) is no reason to stop serving:
    // these lines go out through `outln!`, which ends quietly on a broken pipe.
    outln!(
        "headroom serve: listening on {} ({what})",
        server.local_addr()
    );
    if let Some(tls) = server.tls() {
        outln!(
            "headroom serve: tls certificate sha256 {}",
            tls.fingerprint()
        );
    }
    // Wait for the first SIGTERM/SIGINT.
    let _ = rx.recv();
    eprintln!(
        "headroom serve: draining (up to {:.0}s; Ctrl-C again to stop at once)",
        a.drain_timeout.as_secs_f64()
    );
    let stats_before = server.stats();
    let deadline = a.drain_timeout;
    let drained = std::thread::spawn(move || server.drain(deadline));
    // A second signal during the drain exits at once.
    loop {
        if drained.is_finished() {
            break;
        }
        if rx.recv_timeout(Duration::from_millis(50)).is_ok() {
            eprintln!("headroom serve: stopped");
            return Ok(ExitCode::from(130));
        }
    }
    let _ = drained.join();
    eprintln!(
        "headroom serve: stopped after {} requests on {} connections",
        headroom_run::human::thousands(stats_before.requests),
        headroom_run::human::thousands(stats_before.accepted)
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }

    fn parse(args: &[&str]) -> Result<ServeArgs, clap::Error> {
        let argv = std::iter::once("serve").chain(args.iter().copied());
        Cli::try_parse_from(argv).map(|c| c.serve)
    }

    #[test]
    fn tls_flags() {
        let a = parse(&["--tls-self-signed", "--arch", "pool"]).unwrap();
        let c = a.to_config().unwrap();
        assert_eq!(c.tls, Some(TlsSource::SelfSigned));
        assert_eq!(describe(&c), "pool, 10 handlers, tls self-signed");
        assert!(parse(&["--tls", "cert.pem"]).is_err(), "CERT,KEY needed");
        assert!(parse(&["--tls", "a,b", "--tls-self-signed"]).is_err());
        assert_eq!(parse(&[]).unwrap().to_config().unwrap().tls, None);
    }

    /// Issue 18 finding 6: the header timeout is on by default where a slowloris holds a thread
    /// (thread-per-conn, pool) and off elsewhere; the write timeout is on everywhere; 0 turns
    /// either off.
    #[test]
    fn timeouts_default_per_architecture_and_0_disables() {
        let cfg = |args: &[&str]| parse(args).unwrap().to_config().unwrap();
        let t20 = Some(Duration::from_secs(20));
        let t60 = Some(Duration::from_secs(60));
        for arch in ["thread-per-conn", "pool"] {
            let c = cfg(&["--arch", arch]);
            assert_eq!((c.header_timeout, c.write_timeout), (t20, t60), "{arch}");
        }
        for arch in ["reactor", "async"] {
            let c = cfg(&["--arch", arch]);
            assert_eq!((c.header_timeout, c.write_timeout), (None, t60), "{arch}");
        }
        let c = cfg(&[
            "--arch",
            "pool",
            "--header-timeout",
            "0",
            "--write-timeout",
            "0",
        ]);
        assert_eq!((c.header_timeout, c.write_timeout), (None, None));
        let c = cfg(&[
            "--arch",
            "reactor",
            "--header-timeout",
            "2s",
            "--write-timeout",
            "1.5",
        ]);
        assert_eq!(c.header_timeout, Some(Duration::from_secs(2)));
        assert_eq!(c.write_timeout, Some(Duration::from_millis(1500)));
        assert!(parse(&["--write-timeout", "soon"]).is_err());
    }

    #[test]
    fn tls_missing_key_is_a_one_line_usage_error() {
        let dir = std::env::temp_dir().join(format!("headroom-serve-args-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cert = dir.join("cert.pem");
        std::fs::write(
            &cert,
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let missing = dir.join("key.pem");
        let arg = format!("{},{}", cert.display(), missing.display());
        let e = parse(&["--tls", &arg]).unwrap().to_config().unwrap_err();
        assert!(
            e.0.starts_with("bad --tls: cannot read the key file"),
            "{}",
            e.0
        );
        assert!(e.0.contains("key.pem") && !e.0.contains('\n'), "{}", e.0);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
