//! `headroom lab` end to end with the real reference server: a quick experiment runs and prints
//! its table, an interrupted lab resumes without redoing stored runs, and a server that fails to
//! start or dies mid-run is reported for its configuration while the lab goes on.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use common::headroom;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn lab(args: &[&str], out: &Path) -> Output {
    headroom()
        .arg("lab")
        .args(args)
        .arg("--output")
        .arg(out)
        .output()
        .expect("run headroom lab")
}

/// Writes the scenario `s.yaml` and the experiment `e.yaml` into `dir`; the experiment's path.
fn write_experiment(dir: &Path, scenario: &str, experiment: &str) -> PathBuf {
    std::fs::write(dir.join("s.yaml"), scenario).unwrap();
    let e = dir.join("e.yaml");
    std::fs::write(&e, experiment).unwrap();
    e
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).to_string(),
        String::from_utf8_lossy(&o.stderr).to_string(),
    )
}

#[test]
fn rudy_quick_runs_prints_its_tables_and_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = repo().join("experiments/rudy.yaml");
    let o = lab(&[exp.to_str().unwrap(), "--quick"], tmp.path());
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("mean response time (ms), handlers x (C, N)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("4 run(s) now, 0 found stored, 0 failed"),
        "{stdout}"
    );
    assert!(
        stderr.contains("[4/4] c=50 handlers=4 n=10 rep 1"),
        "{stderr}"
    );
    // The study's table: the response time grows with the clients past the handlers and
    // falls with more handlers (/sleep/1 takes at least 1 ms).
    let out = tmp.path();
    let t = |h: &str, c: &str| cell(out, "latency_mean_ms", h, &format!("{c}/10"));
    assert!(t("1", "10") >= 1.0, "{stdout}");
    assert!(t("1", "50") > 2.0 * t("1", "10"), "{stdout}");
    assert!(t("4", "50") < t("1", "50") / 2.0, "{stdout}");
    let md = std::fs::read_to_string(tmp.path().join("tables.md")).unwrap();
    assert!(md.contains("handlers"), "{md}");
    assert!(tmp.path().join("lab.sqlite").exists());
    // Started again: everything is found stored, nothing is redone.
    let o = lab(&[exp.to_str().unwrap(), "--quick"], tmp.path());
    let (stdout, _) = text(&o);
    assert!(stdout.contains("0 run(s) now, 4 found stored"), "{stdout}");
}

#[test]
fn an_interrupted_lab_resumes_where_it_stopped() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = repo().join("experiments/rudy.yaml");
    let mut child = headroom()
        .args(["lab", exp.to_str().unwrap(), "--quick", "--output"])
        .arg(tmp.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Stop it (SIGTERM, as `kill` does) once the first run is stored.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut stderr = child.stderr.take().unwrap();
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    while !seen.contains("[1/4]") && Instant::now() < deadline {
        use std::io::Read;
        match stderr.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => seen.push_str(&String::from_utf8_lossy(&buf[..n])),
        }
    }
    assert!(seen.contains("[1/4]"), "{seen}");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{seen}");
    let o = lab(&[exp.to_str().unwrap(), "--quick"], tmp.path());
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    let stored: usize = stdout
        .split(" found stored")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!((1..4).contains(&stored), "{stdout}");
    assert!(
        stdout.contains(&format!("{} run(s) now, {stored} found stored", 4 - stored)),
        "{stdout}"
    );
    assert_eq!(
        stderr.matches("stored, skipped").count(),
        stored,
        "{stderr}"
    );
}

/// The server samples carry what says why a server stopped scaling (issue 31): a pool of one
/// handler behind an accept queue of 4, started with a descriptor limit of 256, and 60
/// keep-alive clients. `samples.csv` shows the server's descriptor limit, its threads by state,
/// and the kernel's accept-queue overflows: the clients the handler does not take wait in a full
/// queue and their SYNs are dropped.
#[test]
fn samples_show_the_descriptor_limit_threads_and_the_accept_queue_overflowing() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = write_experiment(
        tmp.path(),
        "load: {users: [{count: 60}]}\nsessions: [{name: s, steps: [{loop: {count: 1000000, steps: [{request: GET /}]}}]}]\n",
        r#"name: overflow
server:
  command: >-
    ulimit -n 256;
    exec {headroom} serve --listen 127.0.0.1:{port} --arch pool --handlers 1 --backlog 4
  ready: {port: "127.0.0.1:{port}"}
factors:
  handlers: ["1"]
load: {scenario: s.yaml, duration: 4s, timeout: 2s}
warmup: 0s
tables:
  - {metric: kernel_listen_overflows, cols: [handlers]}
  - {metric: server_fd_limit, cols: [handlers]}
"#,
    );
    let out = tmp.path().join("out");
    let o = lab(&[exp.to_str().unwrap(), "--no-report"], &out);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    let csv = std::fs::read_to_string(out.join("samples.csv")).unwrap();
    let rows = common::csv_records(&csv);
    assert!(rows.len() >= 3, "{csv}");
    let num = |r: &std::collections::BTreeMap<String, String>, name: &str| {
        r.get(name)
            .unwrap_or_else(|| panic!("no column {name}: {csv}"))
            .parse::<f64>()
            .unwrap_or(-1.0)
    };
    for r in &rows {
        assert_eq!(num(r, "fd_limit"), 256.0, "{csv}");
        assert!(num(r, "fds_max_process") >= 3.0, "{csv}");
        // The running threads are some of the server's threads; the machine's run queue holds
        // at least the sampler.
        assert!(num(r, "threads_running") >= 0.0 && num(r, "threads_running") <= num(r, "threads"));
        assert!(num(r, "procs_running") >= 1.0, "{csv}");
    }
    let overflows: f64 = rows.iter().map(|r| num(r, "listen_overflows")).sum();
    let drops: f64 = rows.iter().map(|r| num(r, "listen_drops")).sum();
    assert!(overflows >= 1.0 && drops >= overflows, "{csv}");
    // The same as a table's figures: the run's overflows summed, the limit.
    let cell = |metric: &str| common::lab_cell(&out, metric, "", "1");
    assert_eq!(cell("kernel_listen_overflows"), overflows, "{stdout}");
    assert_eq!(cell("server_fd_limit"), 256.0, "{stdout}");
}

#[test]
fn failing_servers_are_reported_and_the_lab_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = write_experiment(
        tmp.path(),
        "load: {users: [{count: 2}]}\nsessions: [{name: s, steps: [{request: GET /}]}]\n",
        r#"name: failing
server:
  command: >-
    if [ {mode} = nostart ]; then echo 'cannot bind: boom' >&2; exit 3; fi;
    if [ {mode} = dies ]; then {headroom} serve --listen 127.0.0.1:{port} & p=$!;
    sleep 0.7; echo 'dying now' >&2; kill -9 $p; exit 4; fi;
    exec {headroom} serve --listen 127.0.0.1:{port}
  ready: {port: "127.0.0.1:{port}"}
  ready_timeout: 5s
factors:
  mode: [ok, nostart, dies]
load: {scenario: s.yaml, duration: 2s}
tables:
  - {metric: throughput_rps, cols: [mode]}
"#,
    );
    let out = tmp.path().join("out");
    let o = lab(&[exp.to_str().unwrap()], &out);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("3 run(s) now, 0 found stored, 2 failed"),
        "{stdout}"
    );
    assert!(
        stderr.contains("mode=nostart rep 1: server failed") && stderr.contains("boom"),
        "{stderr}"
    );
    assert!(
        stderr.contains("mode=dies rep 1: server died during the run")
            && stderr.contains("dying now"),
        "{stderr}"
    );
    assert!(
        stderr.contains("mode=ok rep 1:") && stderr.contains("req/s"),
        "{stderr}"
    );
    assert!(
        stdout.contains("failed"),
        "the table shows the failed cells: {stdout}"
    );
    // The report is written all the same, with the failed cells and the dead server's samples.
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains(">failed 1/1</td>"), "{html}");
    assert!(
        html.contains("data-series=\"mode=dies (failed)\""),
        "{html}"
    );
}

/// The other study experiments' quick variants run end to end with no failed configuration.
fn cell(out: &Path, metric: &str, row: &str, col: &str) -> f64 {
    common::lab_cell(out, metric, row, col)
}

/// Seed 004's finding in `experiments/event-vs-threads.yaml --quick`: 1,000 kept-alive SURGE
/// clients. The reactor's one event loop serves them all without a timeout; the pool's 100
/// handlers serve 100 at a time and the queued clients time out.
#[test]
fn event_vs_threads_quick_shows_the_pool_starving() {
    let tmp = tempfile::tempdir().unwrap();
    let (stdout, _) = common::lab_quick("event-vs-threads.yaml", tmp.path(), 2);
    let out = tmp.path();
    let (reactor, pool, col) = ("reactor/1/500/0", "pool/1/100/0", "1000");
    assert_eq!(cell(out, "errors_timeout", reactor, col), 0.0, "{stdout}");
    assert!(cell(out, "errors_timeout", pool, col) >= 100.0, "{stdout}");
    let (tr, tp) = (
        cell(out, "throughput_rps", reactor, col),
        cell(out, "throughput_rps", pool, col),
    );
    assert!(tr > 3.0 * tp && tp > 0.0, "{tr} vs {tp}\n{stdout}");
}

/// Seed 003's figure in `experiments/io-bound.yaml --quick`: five probes from 8 sessions/s find
/// each configuration's break (a capacity, not a lower bound), where sessions take far longer
/// than at the lowest rate.
#[test]
fn io_bound_quick_finds_each_break_and_the_duration_curve() {
    let tmp = tempfile::tempdir().unwrap();
    common::lab_quick("io-bound.yaml", tmp.path(), 4);
    let curve = std::fs::read_to_string(tmp.path().join("rate-curve.csv")).unwrap();
    // Per configuration: its probes in order.
    let mut runs: std::collections::BTreeMap<String, Vec<(f64, bool, f64)>> = Default::default();
    for r in common::csv_records(&curve) {
        runs.entry(format!("{}/{}", r["pool"], r["runtime"]))
            .or_default()
            .push((
                r["rate"].parse().unwrap(),
                r["ok"] == "true",
                r["of_mean_ms"].parse().unwrap_or(0.0),
            ));
    }
    assert_eq!(runs.len(), 4, "{curve}");
    for (name, probes) in &runs {
        let broke = probes.iter().find(|p| !p.1);
        let held: Vec<_> = probes.iter().filter(|p| p.1).collect();
        assert!(held.len() >= 2, "{name}: {curve}");
        let Some(broke) = broke else {
            panic!("{name} never broke: {curve}")
        };
        // Sessions take far longer where the rate broke than at the first rate held. (Not
        // between held rates: below the break a busy machine's noise outweighs the trend.)
        assert!(broke.2 > 2.0 * held[0].2, "{name}: {curve}");
    }
}

/// The max-sustainable-rate search against a server whose capacity is known: one handler thread
/// serving 10 ms requests, one per connection, cannot sustain more than ~100 sessions/s. With
/// constant arrivals and a 100 ms p99 SLO the search must bracket that figure.
#[test]
fn rate_search_finds_a_one_handler_pools_capacity() {
    let tmp = tempfile::tempdir().unwrap();
    // The scenario's own load is what `headroom run s.yaml` would do; the search replaces it.
    let exp = write_experiment(
        tmp.path(),
        "load: {users: [{count: 1}]}\nsessions: [{name: one, steps: [{request: GET /sleep/10}]}]\n",
        r#"name: rate
server:
  command: exec {headroom} serve --listen 127.0.0.1:{port} --arch pool --handlers {handlers}
  ready: {port: "127.0.0.1:{port}"}
factors:
  handlers: ["1"]
load: {scenario: s.yaml, duration: 3s}
capacity:
  rate:
    from: 20
    to: 640
    precision: 10%
    max_probes: 9
    arrival: constant
    pause: 500ms
    slo: {p99: 100ms, error_rate: 1%}
tables:
  - {metric: capacity_rate, cols: [handlers], title: "sessions/s sustained"}
"#,
    );
    let out = tmp.path().join("out");
    let o = lab(&[exp.to_str().unwrap()], &out);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("sessions/s sustained"), "{stdout}");
    assert!(stderr.contains("probe 1 at 20.0/s"), "{stderr}");
    assert!(stderr.contains("broke (request p99"), "{stderr}");
    let curve = std::fs::read_to_string(out.join("rate-curve.csv")).unwrap();
    let header: Vec<&str> = curve.lines().next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (mut held, mut broke) = (Vec::new(), Vec::new());
    for line in curve.lines().skip(1) {
        let cells: Vec<&str> = line.split(',').collect();
        let rate: f64 = cells[col("rate")].parse().unwrap();
        match cells[col("ok")] {
            "true" => {
                let p99: f64 = cells[col("latency_p99_ms")].parse().unwrap();
                assert!(
                    (10.0..=100.0).contains(&p99),
                    "held probe p99 {p99}: {line}"
                );
                held.push(rate)
            }
            "false" => broke.push(rate),
            other => panic!("ok column {other}: {line}"),
        }
    }
    let best = held.iter().cloned().fold(0.0, f64::max);
    let worst = broke.iter().cloned().fold(f64::INFINITY, f64::min);
    // 10 ms per request on one thread: at most ~100/s, and well above 50/s on any machine.
    assert!(
        (50.0..=115.0).contains(&best),
        "sustained {best}/s\n{curve}\n{stderr}"
    );
    assert!(
        worst > best && worst <= 2.0 * best,
        "broke at {worst}\n{curve}"
    );
    assert!(held.len() + broke.len() <= 9, "{curve}");
}

/// A Prometheus endpoint is scraped at every server sample: headroom serve's own count of
/// responses per second (`/metrics`) must agree with what the load measured.
#[test]
fn prometheus_series_are_scraped_beside_the_samples() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = write_experiment(
        tmp.path(),
        "load: {users: [{count: 4}]}\nsessions: [{name: s, steps: [{loop: {count: 1000000, steps: [{request: GET /sleep/2}]}}]}]\n",
        r#"name: prom
server:
  command: exec {headroom} serve --listen 127.0.0.1:{port} --arch {arch}
  ready: {port: "127.0.0.1:{port}"}
factors:
  arch: [reactor]
load: {scenario: s.yaml, duration: 4s}
monitor:
  prometheus: "http://127.0.0.1:{port}/metrics"
  series: [headroom_requests_total, headroom_connections_open]
tables:
  - {metric: throughput_rps, cols: [arch]}
  - {metric: prom_headroom_requests_total_per_s, cols: [arch]}
  - {metric: prom_headroom_connections_open_max, cols: [arch]}
  - {metric: prom_headroom_accepted_total, cols: [arch]}
"#,
    );
    let out = tmp.path().join("out");
    let o = lab(&[exp.to_str().unwrap()], &out);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(!stderr.contains("warning: scraping"), "{stderr}");
    let csv = std::fs::read_to_string(out.join("tables.csv")).unwrap();
    // Each table is "# title", a header, then "reactor,MEAN,...".
    let value = |metric: &str| -> Option<f64> {
        let mut lines = csv
            .lines()
            .skip_while(|l| !l.starts_with('#') || !l.contains(metric));
        lines.next()?;
        lines.next()?;
        lines.next()?.split(',').nth(1)?.parse().ok()
    };
    let client = value("throughput_rps").expect("throughput");
    let server = value("prom_headroom_requests_total_per_s").expect(&csv);
    // 4 users, 2 ms each: a few hundred per second; the server's rate covers the samples'
    // span (a second less than the load at most), so allow 15%.
    assert!(client > 200.0, "{csv}");
    assert!(
        (server - client).abs() / client < 0.15,
        "server {server}/s against client {client}/s\n{csv}"
    );
    // The 4 users, the scrape's own connection while it is answered, and on a loaded machine
    // the readiness probe's connection when the server has not yet seen it close (a CI run
    // with a build beside it saw 6).
    let open = value("prom_headroom_connections_open_max").expect(&csv);
    assert!((4.0..=6.0).contains(&open), "{open}\n{csv}");
    // Not in `series`: not kept.
    assert_eq!(value("prom_headroom_accepted_total"), None, "{csv}");
}

/// A lab killed outright (SIGKILL: no chance to stop its server) takes its server with it, and
/// started again it redoes only the run that was cut.
#[test]
fn a_killed_lab_leaves_no_server_behind_and_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let exp = write_experiment(
        tmp.path(),
        "load: {users: [{count: 1}]}\nsessions: [{name: s, steps: [{loop: {count: 1000000, steps: [{request: GET /sleep/5}]}}]}]\n",
        r#"name: killed
server:
  command: "echo $$ > {output}/server-{mode}.pid; exec {headroom} serve --listen 127.0.0.1:{port}"
  ready: {port: "127.0.0.1:{port}"}
factors:
  mode: [a, b]
load: {scenario: s.yaml, duration: 3s}
"#,
    );
    let mut child = headroom()
        .args(["lab", exp.to_str().unwrap(), "--output"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until run a is stored and b's server has started.
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut all);
        all
    });
    let pid_file = out.join("server-b.pid");
    let deadline = Instant::now() + Duration::from_secs(30);
    let pid: i32 = loop {
        if let Some(p) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            break p;
        }
        assert!(Instant::now() < deadline, "the second server never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    let alive = |pid: i32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s.rsplit(')').next().map(|r| r.trim_start().to_string()))
            .is_some_and(|r| !r.starts_with('Z') && !r.starts_with('X'))
    };
    // Into b's load, so the server is serving when the lab dies.
    std::thread::sleep(Duration::from_millis(1000));
    assert!(alive(pid), "the server {pid} is not running");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let progress = reader.join().unwrap();
    assert!(progress.contains("[1/2] mode=a rep 1:"), "{progress}");
    assert!(
        !progress.contains("[2/2] mode=b rep 1:"),
        "b finished: {progress}"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let survived = alive(pid);
    if survived {
        // SAFETY: cleaning up the process this test made.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    assert!(!survived, "server {pid} outlived the killed lab");
    // Started again: a is stored, only b runs.
    let o = lab(&[exp.to_str().unwrap()], &out);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("1 run(s) now, 1 found stored, 0 failed"),
        "{stdout}\n{stderr}"
    );
}

/// A quick variant and the full experiment never share stored runs: by default they go to
/// different directories, and in one directory a different duration is a changed spec.
#[test]
fn quick_and_full_runs_are_kept_apart() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = write_experiment(
        tmp.path(),
        "load: {users: [{count: 1}]}\nsessions: [{name: s, steps: [{request: GET /}]}]\n",
        r#"name: apart
server:
  command: "exec {headroom} serve --listen 127.0.0.1:{port}"
  ready: {port: "127.0.0.1:{port}"}
load: {scenario: s.yaml, duration: 2s}
output: runs/apart
quick: {duration: 1s}
"#,
    );
    let run = |args: &[&str]| {
        headroom()
            .arg("lab")
            .arg(&exp)
            .args(args)
            .arg("-q")
            .output()
            .unwrap()
    };
    let o = run(&["--quick"]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    assert!(tmp.path().join("runs/apart-quick/lab.sqlite").exists());
    assert!(!tmp.path().join("runs/apart").exists());
    // The same directory, another duration: refused, nothing mixed.
    let dir = tmp.path().join("runs/apart-quick");
    let o = run(&["--output", dir.to_str().unwrap()]);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stderr.contains("run.duration_s"), "{stderr}");
}

/// Extracts the `<svg ...>...</svg>` whose `data-chart` is `name` from a report page.
fn chart<'a>(html: &'a str, name: &str) -> &'a str {
    let at = html
        .find(&format!("data-chart=\"{name}\""))
        .unwrap_or_else(|| panic!("no chart {name}"));
    let start = html[..at].rfind("<svg").unwrap();
    let end = start + html[start..].find("</svg>").unwrap();
    &html[start..end]
}

/// The number in `data-points="N"` of the series `series` in `svg`.
fn points(svg: &str, series: &str) -> usize {
    let key = format!("data-series=\"{series}\" data-points=\"");
    let at = svg
        .find(&key)
        .unwrap_or_else(|| panic!("no series {series} in {svg}"))
        + key.len();
    svg[at..at + svg[at..].find('"').unwrap()].parse().unwrap()
}

/// At the end of a lab its HTML report is written next to the tables (not with --no-report),
/// and `headroom report OUTPUT` writes the same page again.
#[test]
fn a_lab_writes_its_report_and_report_rewrites_it() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = write_experiment(
        tmp.path(),
        "load: {users: [{count: 2}]}\nsessions: [{name: s, steps: [{loop: {count: 1000000, steps: [{request: GET /sleep/2}]}}]}]\n",
        r#"name: report
server:
  command: exec {headroom} serve --listen 127.0.0.1:{port} --arch reactor --poller {poller}
  ready: {port: "127.0.0.1:{port}"}
factors:
  poller: [poll, epoll]
load: {scenario: s.yaml, duration: 2s}
tables:
  - {metric: throughput_rps, cols: [poller], title: "throughput <rps>"}
"#,
    );
    let out = tmp.path().join("out");
    let o = lab(&[exp.to_str().unwrap()], &out);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    let report = out.join("report.html");
    assert!(
        stdout.contains(&format!("  Report       {}", report.display())),
        "{stdout}"
    );
    for file in ["tables.json", "samples.csv"] {
        assert!(out.join(file).exists(), "{file}");
    }
    let html = std::fs::read_to_string(&report).unwrap();
    // The pivot table, escaped, with a cell per configuration.
    assert!(html.contains("<h3>throughput &lt;rps&gt;</h3>"), "{html}");
    assert!(html.contains("<table class=\"pivot\">"));
    assert!(html.contains("<th class=\"n\">poller=poll</th><th class=\"n\">poller=epoll</th>"));
    // Its bar chart: one group, a bar per configuration.
    let bars = chart(&html, "bars-0");
    assert_eq!(bars.matches("class=\"bar\"").count(), 2, "{bars}");
    // The server's CPU: a series per configuration, each with points.
    for name in ["server-cpu-sys", "server-cpu-user", "server-rss"] {
        let svg = chart(&html, name);
        for series in ["poller=poll", "poller=epoll"] {
            assert!(points(svg, series) >= 1, "{name} {series}: {svg}");
        }
    }
    // Connections over time, from intervals.csv.
    assert!(points(chart(&html, "capacity-connections"), "poller=poll") >= 1);
    // Self-contained.
    for bad in [
        "<script",
        "src=\"http",
        "href=\"http",
        "src='http",
        "href='http",
    ] {
        assert!(!html.contains(bad), "{bad}");
    }
    // As a reader sees it: no console error in Chromium, every chart drawn; a screenshot kept.
    let mut b = common::chromium::Browser::launch();
    b.open(&format!("file://{}", report.display()));
    let empty = b.eval(
        "Array.from(document.querySelectorAll('svg[data-chart]'))\
         .filter(s => s.getBBox().width < 100 || s.querySelectorAll('[data-series]').length == 0)\
         .map(s => s.dataset.chart)",
    );
    assert_eq!(empty, serde_json::json!([]), "charts without data");
    b.screenshot(&common::chromium::artifact_dir().join("lab-report.png"));
    assert_eq!(b.errors(), Vec::<String>::new());

    // Again with --no-report: every run is stored, no page is written.
    std::fs::remove_file(&report).unwrap();
    let o = lab(&[exp.to_str().unwrap(), "--no-report"], &out);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("0 run(s) now, 2 found stored"), "{stdout}");
    assert!(!stdout.contains("Report"), "{stdout}");
    assert!(!report.exists());

    // `headroom report OUTPUT` writes the same page.
    let o = headroom().arg("report").arg(&out).output().unwrap();
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_eq!(stdout.trim(), report.display().to_string());
    assert_eq!(std::fs::read_to_string(&report).unwrap(), html);
}

/// `experiments/tls-handshake.yaml --quick`: the reactor over TLS (one event loop) with an ECDSA
/// P-256 and an RSA 2048 certificate (made by `openssl req` before the first run), keep-alive
/// against a connection per request, resumption on and off. Every configuration runs without an
/// error; a connection per request costs a handshake per request, resumed with resumption on and
/// never with it off; keep-alive serves far more. And the finding: with RSA a full handshake's
/// signature dominates, so resumption serves several times the handshakes, far more than it
/// gains with ECDSA.
#[test]
fn tls_handshake_quick_sweeps_keepalive_and_resumption() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = repo().join("experiments/tls-handshake.yaml");
    let o = lab(&[exp.to_str().unwrap(), "--quick"], tmp.path());
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("8 run(s) now, 0 found stored, 0 failed"),
        "{stdout}\n{stderr}"
    );
    assert!(stdout.contains("TLS handshake p99 (ms)"), "{stdout}");
    let tables: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(tmp.path().join("tables.json")).unwrap())
            .unwrap();
    // metric -> (key, keepalive, resume) -> mean over the cell's runs (one event loop).
    let value = |metric: &str, key: &str, keepalive: &str, resume: &str| -> f64 {
        let t = tables
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["metric"] == metric)
            .unwrap_or_else(|| panic!("no table of {metric}"));
        let r = t["rows"]
            .as_array()
            .unwrap()
            .iter()
            .position(|r| r[0] == key && r[1] == "1" && r[2] == keepalive)
            .unwrap_or_else(|| panic!("{metric}: no row {key}, {keepalive}"));
        let c = t["cols"]
            .as_array()
            .unwrap()
            .iter()
            .position(|c| c[0] == resume)
            .unwrap_or_else(|| panic!("{metric}: no column {resume}"));
        t["cells"][r][c]["mean"]
            .as_f64()
            .unwrap_or_else(|| panic!("{metric} {key} {keepalive} {resume}: {stdout}"))
    };
    for key in ["ecdsa", "rsa"] {
        for resume in ["true", "false"] {
            let what = format!("key={key} resume={resume}\n{stdout}");
            for keepalive in ["true", "false"] {
                assert_eq!(value("errors_total", key, keepalive, resume), 0.0, "{what}");
                assert!(
                    value("throughput_rps", key, keepalive, resume) > 0.0,
                    "{what}"
                );
                // The server's CPU was sampled.
                assert!(
                    value("server_cpu_user_pct", key, keepalive, resume)
                        + value("server_cpu_sys_pct", key, keepalive, resume)
                        > 1.0,
                    "{what}"
                );
                assert!(value("tls_p50_ms", key, keepalive, resume) > 0.0, "{what}");
            }
            // A connection per request: a handshake per response, give or take the 4 users'
            // connections in flight at the end (2 s runs: 2 per second).
            let rps = value("throughput_rps", key, "false", resume);
            let hps = value("tls_handshakes_per_s", key, "false", resume);
            assert!(
                (hps - rps).abs() <= 0.03 * rps + 4.0,
                "{hps} handshakes/s for {rps} responses/s: {what}"
            );
            let resumed = value("tls_resumed_pct", key, "false", resume);
            if resume == "true" {
                assert!(resumed > 50.0, "{resumed}% resumed: {what}");
            } else {
                assert_eq!(resumed, 0.0, "{what}");
            }
            // Keep-alive: a handshake per user, then only requests.
            let ka = value("throughput_rps", key, "true", resume);
            assert!(ka > 3.0 * rps, "keep-alive {ka}/s against {rps}/s: {what}");
            assert!(
                value("tls_handshakes_per_s", key, "true", resume) < 0.01 * ka,
                "{what}"
            );
        }
    }
    // Resumption's gain on a connection per request: handshakes served with it on against off.
    let gain = |key: &str| {
        value("throughput_rps", key, "false", "true")
            / value("throughput_rps", key, "false", "false")
    };
    let (ecdsa, rsa) = (gain("ecdsa"), gain("rsa"));
    assert!(
        rsa >= 2.0 && rsa > 1.5 * ecdsa,
        "resumption serves {rsa:.2}x with RSA, {ecdsa:.2}x with ECDSA\n{stdout}"
    );
}

/// Seed 000's finding in `experiments/kernel-poll.yaml --quick`: 14,000 slow clients against
/// the reactor over poll() and over epoll. poll() scans every descriptor at every wake-up: its
/// server spends several times epoll's system CPU and answers several times slower, with the
/// same clients served.
#[test]
fn kernel_poll_quick_shows_polls_cost_against_epoll() {
    let tmp = tempfile::tempdir().unwrap();
    let (stdout, _) = common::lab_quick("kernel-poll.yaml", tmp.path(), 2);
    let value = |metric: &str, poller: &str| cell(tmp.path(), metric, &format!("{poller}/1"), "8k");
    let (sys_poll, sys_epoll) = (
        value("server_cpu_sys_pct", "poll"),
        value("server_cpu_sys_pct", "epoll"),
    );
    assert!(
        sys_poll > 4.0 * sys_epoll && sys_poll > 20.0,
        "system CPU poll {sys_poll}% epoll {sys_epoll}%\n{stdout}"
    );
    let (p99_poll, p99_epoll) = (
        value("latency_p99_ms", "poll"),
        value("latency_p99_ms", "epoll"),
    );
    assert!(
        p99_poll > 2.0 * p99_epoll,
        "p99 poll {p99_poll} ms epoll {p99_epoll} ms\n{stdout}"
    );
    // poll's capacity is not above epoll's, within 5%. (Not asserted: epoll holding all 14,000.
    // The experiment's break includes p99 > 10 ms three seconds in a row, which a busy machine, a
    // test suite running beside it, can cause for either poller from the start. Where neither
    // breaks both capacities are lower bounds, the clients connected at the peak, and a busy
    // generator connects a few hundred fewer in one run than in the other: CI saw poll 14,219
    // against epoll 13,941, neither broken.)
    let (cap_poll, cap_epoll) = (
        value("capacity_connections", "poll"),
        value("capacity_connections", "epoll"),
    );
    assert!(
        cap_poll <= 1.05 * cap_epoll,
        "capacity poll {cap_poll} epoll {cap_epoll}\n{stdout}"
    );
    // Why (issue 31): poll's limit is the kernel's CPU; epoll's 14,000 clients reach none
    // (its limit, the 20,000 descriptors, is past the quick variant).
    assert_eq!(
        common::lab_verdict(tmp.path(), "poll/1", "8k"),
        "cpu_kernel",
        "{stdout}"
    );
    assert_eq!(
        common::lab_verdict(tmp.path(), "epoll/1", "8k"),
        "no_limit",
        "{stdout}"
    );
}
