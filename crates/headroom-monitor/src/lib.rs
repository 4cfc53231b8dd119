//! Sampling the server under test from `/proc` (Linux).
//!
//! A [`Sampler`] follows one root process and every descendant alive at each sample (a server's
//! workers may be threads or processes, forked or exited between samples). Each [`Sample`] holds
//! the tree's cumulative CPU time split into user and system, and the rates over the interval
//! since the previous sample, plus gauges (RSS, threads, descriptors) and context switches. The
//! machine's CPU split and memory come from `/proc/stat` and `/proc/meminfo` in the same sample,
//! so server and machine figures share one clock with the load's intervals.
//!
//! CPU accounting: a process's `utime`/`stime` plus `cutime`/`cstime` (its children that exited
//! and were reaped). Summed over the live tree this counts each CPU second once: a child's time
//! moves into its parent's `cutime` only after it is gone from the tree.

pub mod prom;

use std::collections::HashMap;
use std::fs;
use std::io;
use std::time::{Duration, Instant};

/// One reading of the process tree and the machine.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Sample {
    /// Since the sampler started.
    pub t_s: f64,
    /// Processes in the tree (the root included).
    pub processes: u32,
    /// Cumulative CPU seconds of the tree since each process started.
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
    /// CPU over the interval since the previous sample, in percent of one core (200% = two
    /// cores busy). Zero in the first sample.
    pub cpu_user_pct: f64,
    pub cpu_sys_pct: f64,
    pub rss_bytes: u64,
    pub threads: u64,
    pub fds: u64,
    /// Cumulative context switches of the tree's processes (main threads' totals as /proc
    /// reports them per process).
    pub ctx_voluntary: u64,
    pub ctx_involuntary: u64,
    pub machine: Machine,
}

/// The whole machine over the interval: percent of all CPUs (100 = every core busy).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Machine {
    pub cpu_user_pct: f64,
    pub cpu_sys_pct: f64,
    pub cpu_iowait_pct: f64,
    pub mem_total_bytes: u64,
    pub mem_available_bytes: u64,
}

/// Reads a process tree again and again; keeps the previous reading for rates.
pub struct Sampler {
    root: i32,
    start: Instant,
    tick: f64,
    page: u64,
    prev: Option<(Instant, f64, f64)>,
    prev_stat: Option<[u64; 8]>,
}

/// Fields of /proc/PID/stat that we use.
#[derive(Debug, Clone, Copy, Default)]
struct ProcStat {
    ppid: i32,
    utime: u64,
    stime: u64,
    cutime: u64,
    cstime: u64,
    threads: u64,
    rss_pages: u64,
}

fn parse_stat(text: &str) -> Option<ProcStat> {
    // The command name is in parentheses and may hold spaces or ')': split after the last ')'.
    let rest = &text[text.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_ascii_whitespace().collect();
    // `rest` starts at field 3 (state); field N is f[N - 3].
    let n = |i: usize| f.get(i - 3).and_then(|v| v.parse::<i64>().ok());
    Some(ProcStat {
        ppid: n(4)? as i32,
        utime: n(14)? as u64,
        stime: n(15)? as u64,
        cutime: n(16)?.max(0) as u64,
        cstime: n(17)?.max(0) as u64,
        threads: n(20)?.max(0) as u64,
        rss_pages: n(24)?.max(0) as u64,
    })
}

fn read_stat(pid: i32) -> Option<ProcStat> {
    parse_stat(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Every pid in the tree rooted at `root` (the root first), from one scan of /proc.
pub fn tree(root: i32) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    if let Ok(dir) = fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            if let Some(st) = read_stat(pid) {
                children.entry(st.ppid).or_default().push(pid);
            }
        }
    }
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        if let Some(c) = children.get(&out[i]) {
            out.extend(c.iter().copied());
        }
        i += 1;
    }
    out
}

fn status_field(text: &str, key: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().split_ascii_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// user, nice, system, idle, iowait, irq, softirq, steal jiffies of all CPUs.
fn machine_stat() -> Option<[u64; 8]> {
    let text = fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let mut v = [0u64; 8];
    for (slot, f) in v.iter_mut().zip(line.split_ascii_whitespace().skip(1)) {
        *slot = f.parse().ok()?;
    }
    Some(v)
}

fn meminfo() -> (u64, u64) {
    let text = fs::read_to_string("/proc/meminfo").unwrap_or_default();
    (
        status_field(&text, "MemTotal:") * 1024,
        status_field(&text, "MemAvailable:") * 1024,
    )
}

impl Sampler {
    /// Follow the tree of `root` (a pid, e.g. `Child::id()`).
    pub fn new(root: u32) -> Sampler {
        // SAFETY: sysconf has no preconditions.
        let (tick, page) = unsafe {
            (
                libc::sysconf(libc::_SC_CLK_TCK),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        Sampler {
            root: root as i32,
            start: Instant::now(),
            tick: if tick > 0 { tick as f64 } else { 100.0 },
            page: if page > 0 { page as u64 } else { 4096 },
            prev: None,
            prev_stat: None,
        }
    }

    /// Read the tree now. Fails only when the root process is gone.
    pub fn sample(&mut self) -> io::Result<Sample> {
        let now = Instant::now();
        let root = read_stat(self.root).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("process {} is gone", self.root),
            )
        })?;
        let mut s = Sample {
            t_s: (now - self.start).as_secs_f64(),
            ..Default::default()
        };
        let (mut user, mut sys) = (0u64, 0u64);
        for pid in tree(self.root) {
            let st = if pid == self.root {
                root
            } else {
                match read_stat(pid) {
                    Some(st) => st,
                    None => continue, // exited between the scan and this read
                }
            };
            s.processes += 1;
            user += st.utime + st.cutime;
            sys += st.stime + st.cstime;
            s.threads += st.threads;
            s.rss_bytes += st.rss_pages * self.page;
            if let Ok(text) = fs::read_to_string(format!("/proc/{pid}/status")) {
                s.ctx_voluntary += status_field(&text, "voluntary_ctxt_switches:");
                s.ctx_involuntary += status_field(&text, "nonvoluntary_ctxt_switches:");
            }
            if let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) {
                s.fds += fds.count() as u64;
            }
        }
        s.cpu_user_s = user as f64 / self.tick;
        s.cpu_sys_s = sys as f64 / self.tick;
        if let Some((t, u, y)) = self.prev {
            let dt = (now - t).as_secs_f64().max(1e-9);
            // A process leaving the tree without being reaped inside it takes its time along:
            // rates never go negative.
            s.cpu_user_pct = ((s.cpu_user_s - u) / dt * 100.0).max(0.0);
            s.cpu_sys_pct = ((s.cpu_sys_s - y) / dt * 100.0).max(0.0);
        }
        self.prev = Some((now, s.cpu_user_s, s.cpu_sys_s));
        if let Some(m) = machine_stat() {
            if let Some(p) = self.prev_stat {
                let d: Vec<f64> = m
                    .iter()
                    .zip(p.iter())
                    .map(|(a, b)| a.saturating_sub(*b) as f64)
                    .collect();
                let total: f64 = d.iter().sum::<f64>().max(1.0);
                s.machine.cpu_user_pct = (d[0] + d[1]) / total * 100.0;
                s.machine.cpu_sys_pct = (d[2] + d[5] + d[6]) / total * 100.0;
                s.machine.cpu_iowait_pct = d[4] / total * 100.0;
            }
            self.prev_stat = Some(m);
        }
        let (total, avail) = meminfo();
        s.machine.mem_total_bytes = total;
        s.machine.mem_available_bytes = avail;
        Ok(s)
    }

    /// Sample every `every` until `stop` returns true or the root exits; the samples in order.
    pub fn run(&mut self, every: Duration, mut stop: impl FnMut(&Sample) -> bool) -> Vec<Sample> {
        let mut out = Vec::new();
        while let Ok(s) = self.sample() {
            let done = stop(&s);
            out.push(s);
            if done {
                break;
            }
            std::thread::sleep(every);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_odd_names_parse() {
        let line = "4242 (a) b (c)) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 75 3 4 20 0 7 0 1000 123456789 321 18446744073709551615";
        let st = parse_stat(line).unwrap();
        assert_eq!(st.ppid, 17);
        assert_eq!((st.utime, st.stime, st.cutime, st.cstime), (250, 75, 3, 4));
        assert_eq!(st.threads, 7);
        assert_eq!(st.rss_pages, 321);
        assert!(parse_stat("garbage").is_none());
    }

    #[test]
    fn samples_this_process() {
        let mut s = Sampler::new(std::process::id());
        let a = s.sample().unwrap();
        assert!(a.processes >= 1 && a.threads >= 1 && a.fds >= 3 && a.rss_bytes > 1 << 20);
        assert!(a.machine.mem_total_bytes > a.machine.mem_available_bytes);
        let b = s.sample().unwrap();
        assert!(b.cpu_user_s >= a.cpu_user_s);
        assert!(b.t_s >= a.t_s);
        assert!(
            Sampler::new(0x7fff_fff0).sample().is_err(),
            "no such process"
        );
    }
}
