//! Bounded inputs (issue 18, finding 4): every file a user names is read within a bound, and
//! what would grow without one is refused early with exit 2 and a one-line reason.
//!
//! Each case runs the binary as a child under an address-space limit and a deadline, and reads
//! its peak RSS from wait4's rusage. `HEADROOM_BOUNDS_BIN` runs the same cases against another
//! binary (to show them failing on the code before the fix).

use std::ffi::OsStr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Every refusal here must come well within this.
const DEADLINE: Duration = Duration::from_secs(10);
/// Peak RSS a refusal may reach (the binary alone is ~10-20 MB).
const MAX_RSS_KB: i64 = 100 * 1024;

fn bin() -> PathBuf {
    std::env::var_os("HEADROOM_BOUNDS_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_headroom")))
}

struct Outcome {
    /// Exit code; None if killed by a signal (or by the deadline).
    code: Option<i32>,
    timed_out: bool,
    stderr: String,
    max_rss_kb: i64,
    elapsed: Duration,
}

impl std::fmt::Debug for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?}{} after {:?}, peak RSS {} kB, stderr: {}",
            self.code,
            if self.timed_out {
                " (killed at the deadline)"
            } else {
                ""
            },
            self.elapsed,
            self.max_rss_kb,
            self.stderr.trim()
        )
    }
}

/// Runs headroom with `args` in `dir`, under a 4 GiB address-space limit (so a regression
/// cannot take the machine), killed at `deadline`; `signal_after` sends SIGTERM that long after
/// the start.
fn run_in(
    dir: &Path,
    args: &[&OsStr],
    deadline: Duration,
    signal_after: Option<Duration>,
) -> Outcome {
    let stderr_path = dir.join(format!("stderr-{}.txt", rand_suffix()));
    let stderr_file = std::fs::File::create(&stderr_path).unwrap();
    let mut cmd = Command::new(bin());
    cmd.args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr_file);
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 4 << 30,
                rlim_max: 4 << 30,
            };
            libc::setrlimit(libc::RLIMIT_AS, &lim);
            Ok(())
        });
    }
    let start = Instant::now();
    let child = cmd.spawn().expect("spawn headroom");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let mut timed_out = false;
    let mut signalled = false;
    // Bounded: one poll per 10 ms until the deadline, then one blocking wait after SIGKILL.
    loop {
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
        if r == pid {
            break;
        }
        assert!(r == 0, "wait4: {}", std::io::Error::last_os_error());
        if let Some(after) = signal_after {
            if !signalled && start.elapsed() >= after {
                unsafe { libc::kill(pid, libc::SIGTERM) };
                signalled = true;
            }
        }
        if start.elapsed() > deadline {
            timed_out = true;
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
            assert_eq!(r, pid);
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let elapsed = start.elapsed();
    std::mem::forget(child); // reaped above
    let code = if libc::WIFEXITED(status) {
        Some(libc::WEXITSTATUS(status))
    } else {
        None
    };
    Outcome {
        code,
        timed_out,
        stderr: std::fs::read_to_string(&stderr_path).unwrap_or_default(),
        max_rss_kb: ru.ru_maxrss,
        elapsed,
    }
}

fn run(dir: &Path, args: &[&str]) -> Outcome {
    let args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    run_in(dir, &args, DEADLINE, None)
}

fn rand_suffix() -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    N.fetch_add(1, Ordering::Relaxed).to_string()
}

/// Refused: exit 2, quickly, with little memory, one line naming `needle`.
fn assert_refused(o: &Outcome, needle: &str) {
    assert_eq!(o.code, Some(2), "{o:?}");
    assert!(!o.timed_out, "{o:?}");
    assert!(o.elapsed < Duration::from_secs(5), "{o:?}");
    assert!(o.max_rss_kb < MAX_RSS_KB, "{o:?}");
    assert!(
        o.stderr.to_lowercase().contains(&needle.to_lowercase()),
        "expected '{needle}' in: {o:?}"
    );
    let lines = o.stderr.trim().lines().count();
    assert!(lines <= 2, "a one-line error expected: {o:?}");
}

/// An 827-byte "billion laughs": ten references per level, nine levels, in an attribute.
const LAUGHS: &str = r#"<?xml version="1.0"?>
<!DOCTYPE tsung [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<tsung>
 <servers><server host="127.0.0.1" port="1" type="tcp"/></servers>
 <load><arrivalphase phase="1" duration="1" unit="second"><users arrivalrate="1" unit="second"/></arrivalphase></load>
 <sessions><session name="s" probability="100" type="ts_http">
  <request><http url="/&lol9;" method="GET" version="1.1"/></request>
 </session></sessions>
</tsung>
"#;

#[test]
fn billion_laughs_is_refused_by_import_and_run() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("laughs.xml"), LAUGHS).unwrap();
    let o = run(dir.path(), &["import", "tsung", "laughs.xml"]);
    assert_refused(&o, "entit");
    let o = run(dir.path(), &["run", "laughs.xml", "-d", "1s"]);
    assert_refused(&o, "entit");
}

/// A directory with the one-request scenario `s.yaml` the experiments below load.
fn lab_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("s.yaml"),
        "load: {phases: [{duration: 1s, arrival_rate: 1}]}\n\
         sessions: [{name: a, steps: [{request: GET /}]}]\n",
    )
    .unwrap();
    dir
}

fn experiment(factors: usize, levels: usize) -> String {
    let mut s = String::from(
        "name: big\nserver:\n  command: \"sleep 60\"\n  ready: {port: \"127.0.0.1:1\"}\n  \
         ready_timeout: 60s\nload: {scenario: s.yaml, duration: 1s}\nfactors:\n",
    );
    for f in 0..factors {
        let l: Vec<String> = (0..levels).map(|i| format!("\"{i}\"")).collect();
        s.push_str(&format!("  f{f}: [{}]\n", l.join(", ")));
    }
    s
}

#[test]
fn an_experiment_of_too_many_configurations_is_refused_before_expanding() {
    let dir = lab_dir();
    std::fs::write(dir.path().join("big.yaml"), experiment(12, 10)).unwrap();
    let o = run(
        dir.path(),
        &["lab", "big.yaml", "--output", "out", "--no-report"],
    );
    assert_refused(&o, "combinations:");
    assert!(o.stderr.contains("1000000000000"), "the count: {o:?}");
    assert!(o.stderr.contains("10000"), "the limit: {o:?}");
}

/// SIGTERM while the lab waits for a server to be ready: the readiness wait watches the stop
/// flag (`server::start_until`), so the lab stops within seconds instead of waiting out
/// `ready_timeout` (60 s here; before that fix it took 18 s or more).
#[test]
fn sigterm_stops_a_lab_of_ten_thousand_configurations_at_once() {
    let dir = lab_dir();
    // 10^4: at the limit, so accepted; its server never gets ready.
    std::fs::write(dir.path().join("big.yaml"), experiment(4, 10)).unwrap();
    let args: Vec<&OsStr> = ["lab", "big.yaml", "--output", "out", "--no-report"]
        .iter()
        .map(OsStr::new)
        .collect();
    let o = run_in(
        dir.path(),
        &args,
        Duration::from_secs(20),
        Some(Duration::from_millis(1500)),
    );
    assert!(!o.timed_out, "{o:?}");
    assert!(o.stderr.contains("stopping"), "{o:?}");
    assert!(
        o.elapsed < Duration::from_millis(1500 + 3000),
        "SIGTERM must stop it within 3 s: {o:?}"
    );
    assert!(o.max_rss_kb < MAX_RSS_KB, "{o:?}");
}

#[test]
fn devices_and_pipes_are_refused_as_include_csv_body_and_scenario() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("inc.yaml"),
        "servers: [{host: 127.0.0.1, port: 1}]\n\
         load: {phases: [{duration: 1s, arrival_rate: 1}]}\n\
         sessions: [{name: a, steps: [{include: /dev/zero}, {request: GET /}]}]\n",
    )
    .unwrap();
    let o = run(d, &["run", "inc.yaml", "-d", "1s"]);
    assert_refused(&o, "not a regular file");

    std::fs::write(
        d.join("csv.yaml"),
        "servers: [{host: 127.0.0.1, port: 1}]\n\
         load: {phases: [{duration: 1s, arrival_rate: 1}]}\n\
         sessions: [{name: a, steps: [{set: {var: u, csv: {file: /dev/zero, column: 0}}}, \
         {request: \"GET /${u}\"}]}]\n",
    )
    .unwrap();
    let o = run(d, &["run", "csv.yaml", "-d", "1s"]);
    assert_refused(&o, "not a regular file");

    let o = run(
        d,
        &[
            "run",
            "http://127.0.0.1:1/",
            "--body",
            "@/dev/zero",
            "-n",
            "1",
        ],
    );
    assert_refused(&o, "not a regular file");

    std::os::unix::fs::symlink("/dev/zero", d.join("zero.yaml")).unwrap();
    let o = run(d, &["run", "zero.yaml", "-d", "1s"]);
    assert_refused(&o, "not a regular file");
    std::os::unix::fs::symlink("/dev/zero", d.join("zero.xml")).unwrap();
    let o = run(d, &["run", "zero.xml", "-d", "1s"]);
    assert_refused(&o, "not a regular file");

    // A FIFO with no writer: opening it would block for ever.
    let fifo = d.join("fifo.yaml");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let o = run(d, &["run", "fifo.yaml", "-d", "1s"]);
    assert_refused(&o, "not a regular file");

    // The experiment file itself.
    std::os::unix::fs::symlink("/dev/zero", d.join("exp.yaml")).unwrap();
    let o = run(d, &["lab", "exp.yaml", "--output", "out"]);
    assert_refused(&o, "not a regular file");
}

#[test]
fn a_scenario_over_the_size_limit_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // 16 MiB + 1 of comment: sparse, so the test writes almost nothing.
    let f = std::fs::File::create(d.join("big.yaml")).unwrap();
    f.set_len((16 << 20) + 1).unwrap();
    let o = run(d, &["run", "big.yaml", "-d", "1s"]);
    assert_refused(&o, "size limit");
}
