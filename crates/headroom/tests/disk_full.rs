//! Issue 18 finding 5: a disk that fills mid-run. The run directory lives on a small tmpfs this
//! test mounts (root, as the suite runs) with a filler file leaving ~120 KiB free; an
//! 8 s run at 50 ms intervals writes ~270 KiB, so the disk fills between 1 and 4 s in. Asserted: each file's
//! write failure is warned once on stderr as it happens (well before the end), intervals.jsonl
//! and latency.hlog keep whole lines, the summary is still printed on stdout, summary.json is
//! written (its space is reserved when the run starts) with no temporary file left, and the exit
//! code is 3 (docs/cli.md).

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{headroom, serve};

/// A tmpfs mounted for the test, unmounted (lazily) when dropped.
struct Tmpfs {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Tmpfs {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mnt");
        std::fs::create_dir(&path).unwrap();
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&path)
            .status()
            .expect("run mount");
        assert!(
            st.success(),
            "mount -t tmpfs failed (the suite runs as root)"
        );
        Tmpfs { path, _dir: dir }
    }

    /// Bytes free for an unprivileged-or-not writer (statfs's f_bavail * f_bsize).
    fn available(&self) -> u64 {
        let o = Command::new("stat")
            .args(["-f", "-c", "%a %S"])
            .arg(&self.path)
            .output()
            .unwrap();
        let s = String::from_utf8(o.stdout).unwrap();
        let v: Vec<u64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();
        v[0] * v[1]
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

fn fill_leaving(fs: &Tmpfs, free: u64) {
    let avail = fs.available();
    assert!(avail > free, "tmpfs has only {avail} bytes");
    std::fs::write(fs.path.join("filler"), vec![0u8; (avail - free) as usize]).unwrap();
    let left = fs.available();
    assert!(
        left <= free + 8192 && left + 8192 >= free,
        "left {left}, wanted {free}"
    );
}

fn whole_lines(p: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(p).unwrap();
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "{} ends mid-line: ...{:?}",
        p.display(),
        &text[text.len().saturating_sub(80)..]
    );
    text.lines().map(str::to_string).collect()
}

#[test]
fn a_disk_that_fills_mid_run_loses_nothing_already_measured() {
    let fs = Tmpfs::mount("1m");
    fill_leaving(&fs, 120 * 1024);
    let server = serve();
    let url = format!("http://{}/", server.local_addr());
    let out = fs.path.join("run");
    let started = Instant::now();
    let mut child = headroom()
        .args(["run", &url, "-c", "4", "-d", "8s", "--interval", "50ms"])
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .map(|l| (started.elapsed(), l))
            .collect::<Vec<(Duration, String)>>()
    });
    let stdout = std::io::read_to_string(child.stdout.take().unwrap()).unwrap();
    let status = child.wait().unwrap();
    let lines = reader.join().unwrap();
    let all: String = lines
        .iter()
        .map(|(t, l)| format!("[{:.1}s] {l}\n", t.as_secs_f64()))
        .collect();
    let ctx = format!("stdout:\n{stdout}\nstderr:\n{all}");

    // Warned once per file, as it happened (the run lasts 8 s).
    let jsonl_warnings: Vec<&(Duration, String)> = lines
        .iter()
        .filter(|(_, l)| l.contains("warning") && l.contains("intervals.jsonl"))
        .collect();
    assert_eq!(jsonl_warnings.len(), 1, "{ctx}");
    assert!(
        jsonl_warnings[0].1.contains("No space left on device"),
        "{ctx}"
    );
    assert!(
        jsonl_warnings[0].0 < Duration::from_millis(7000),
        "warned only at the end: {ctx}"
    );
    let hlog_warnings = lines
        .iter()
        .filter(|(_, l)| l.contains("warning") && l.contains("latency.hlog"))
        .count();
    assert!(hlog_warnings <= 1, "{ctx}");

    // The summary on stdout, and the documented exit code.
    assert!(stdout.contains("Requests"), "{ctx}");
    assert!(stdout.contains("Latency"), "{ctx}");
    assert_eq!(status.code(), Some(3), "{ctx}");
    assert!(
        lines.last().is_some_and(|(_, l)| l.contains("incomplete")),
        "{ctx}"
    );

    // Whole lines, some of them, fewer than the run's 160 intervals.
    let jsonl = whole_lines(&out.join("intervals.jsonl"));
    assert!(
        !jsonl.is_empty() && jsonl.len() < 150,
        "{} lines: {ctx}",
        jsonl.len()
    );
    for l in &jsonl {
        serde_json::from_str::<serde_json::Value>(l).unwrap_or_else(|e| panic!("{e}: {l}"));
    }
    for l in whole_lines(&out.join("latency.hlog")) {
        if !l.starts_with('#') && !l.starts_with('"') {
            let want = if l.starts_with("Tag=") { 5 } else { 4 };
            assert_eq!(l.split(',').count(), want, "{l}");
        }
    }

    // summary.json whole, with the whole run's figures; no temporary file left.
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap())
            .unwrap_or_else(|e| panic!("summary.json: {e}\n{ctx}"));
    assert!(summary["requests"].as_u64().unwrap() > 0, "{summary}");
    assert!(summary["duration_s"].as_f64().unwrap() > 7.5, "{summary}");
    let left: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    // A derived file is whole or absent.
    if let Ok(html) = std::fs::read_to_string(out.join("report.html")) {
        assert!(html.trim_end().ends_with("</html>"), "report.html cut");
    }
}
