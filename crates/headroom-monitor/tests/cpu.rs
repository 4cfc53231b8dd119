//! The sampler's CPU figures against an independent reading: the kernel's rusage of the child,
//! collected by this test with wait4 after the child is stopped. User and system time are
//! compared separately, as percentage points of the sampled window.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use headroom_monitor::Sampler;

struct Reading {
    window_s: f64,
    sampled_user_s: f64,
    sampled_sys_s: f64,
    rusage_user_s: f64,
    rusage_sys_s: f64,
    user_pct: f64,
    sys_pct: f64,
}

/// Run `cmd` for about two seconds under the sampler; stop it, take the last sample, then reap it
/// and read its rusage.
fn measure(cmd: &mut Command) -> Reading {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let start = Instant::now();
    let mut s = Sampler::new(child.id());
    s.sample().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let first = s.sample().unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let busy = s.sample().unwrap();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    // Wait until it is really stopped, so no CPU time passes between the readings.
    for _ in 0..200 {
        let st = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if st
            .rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('T'))
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let last = s.sample().unwrap();
    let window_s = start.elapsed().as_secs_f64();
    let mut status = 0;
    // SAFETY: a zeroed rusage is valid; pid is our unreaped child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::wait4(pid, &mut status, 0, &mut ru);
    }
    std::mem::forget(child); // reaped above
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let interval = busy.t_s - first.t_s;
    Reading {
        window_s,
        sampled_user_s: last.cpu_user_s,
        sampled_sys_s: last.cpu_sys_s,
        rusage_user_s: tv(ru.ru_utime),
        rusage_sys_s: tv(ru.ru_stime),
        user_pct: (busy.cpu_user_s - first.cpu_user_s) / interval * 100.0,
        sys_pct: (busy.cpu_sys_s - first.cpu_sys_s) / interval * 100.0,
    }
}

fn check(name: &str, r: &Reading) {
    let pp = |a: f64, b: f64| (a - b).abs() / r.window_s * 100.0;
    let (du, ds) = (
        pp(r.sampled_user_s, r.rusage_user_s),
        pp(r.sampled_sys_s, r.rusage_sys_s),
    );
    eprintln!(
        "{name}: sampled user {:.3}s sys {:.3}s; rusage user {:.3}s sys {:.3}s over {:.2}s: \
         differences {du:.2} and {ds:.2} percentage points; rate over the busy interval: \
         user {:.1}% sys {:.1}%",
        r.sampled_user_s,
        r.sampled_sys_s,
        r.rusage_user_s,
        r.rusage_sys_s,
        r.window_s,
        r.user_pct,
        r.sys_pct
    );
    assert!(du < 5.0, "{name}: user differs by {du:.2} points");
    assert!(ds < 5.0, "{name}: system differs by {ds:.2} points");
}

#[test]
fn a_busy_loop_reads_as_user_time() {
    let r = measure(Command::new("sh").args(["-c", "while :; do :; done"]));
    check("busy loop", &r);
    // Its share of a core depends on what else the machine runs (24.5% while two other builds
    // ran here): what it spends is user time, and the sampler saw it spend some.
    assert!(
        r.user_pct > 5.0,
        "a busy loop's user time was seen: {:.1}%",
        r.user_pct
    );
    assert!(
        r.user_pct > 3.0 * r.sys_pct,
        "a busy loop is mostly user time: user {:.1}%, sys {:.1}%",
        r.user_pct,
        r.sys_pct
    );
}

#[test]
fn one_byte_copies_read_as_system_time() {
    let r = measure(Command::new("dd").args(["if=/dev/zero", "of=/dev/null", "bs=1"]));
    check("dd bs=1", &r);
    assert!(
        r.sys_pct > r.user_pct,
        "syscalls dominate: user {:.1}% sys {:.1}%",
        r.user_pct,
        r.sys_pct
    );
}

#[test]
fn the_whole_tree_is_followed_and_reaped_children_count() {
    // sh runs a short CPU burst in a child (reaped by sh: it moves into sh's cutime/cstime),
    // then holds two sleeping children.
    let mut child = Command::new("sh")
        .args([
            "-c",
            "dd if=/dev/zero of=/dev/null bs=1 count=400000 2>/dev/null; sleep 30 & sleep 30 & wait",
        ])
        .spawn()
        .unwrap();
    let mut s = Sampler::new(child.id());
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = s.sample().unwrap();
    while last.processes < 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        last = s.sample().unwrap();
    }
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(last.processes, 3, "sh and its two sleeps: {last:?}");
    assert!(last.threads >= 3);
    assert!(
        last.cpu_user_s + last.cpu_sys_s >= 0.05,
        "the reaped dd's CPU time is kept: {last:?}"
    );
}
