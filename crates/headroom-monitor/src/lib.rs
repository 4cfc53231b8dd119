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

pub mod listen;
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
    /// Descriptors as the kernel counts them against RLIMIT_NOFILE: on Linux 6.2 and later the
    /// size of /proc/PID/fd, which includes the one each thread blocked in accept() has
    /// reserved (a pool of 2,000 handlers waiting in accept holds ~2,006); on older kernels the
    /// entries listed there.
    pub fds: u64,
    /// Cumulative context switches of the tree's processes (main threads' totals as /proc
    /// reports them per process).
    pub ctx_voluntary: u64,
    pub ctx_involuntary: u64,
    /// The tree's threads by scheduler state at the sample: running or runnable (R), and
    /// blocked in the kernel without a signal (D: disk, some locks). The rest sleep or wait.
    /// Each multi-threaded process's threads are read one file each: past 256 threads in the
    /// tree, every k-th thread is read and counted k times (an estimate, so a sample of a
    /// 2,000-thread pool stays cheap).
    pub threads_running: u64,
    pub threads_blocked: u64,
    /// The busiest thread's CPU over the interval, percent of one core (among the threads read
    /// for their states; 0 in the first sample). An event loop at 100% is the server's limit
    /// however idle its other threads are; a thread's state at one instant says less (a loop
    /// busy 98% of the time sleeps in epoll_wait between bursts).
    pub busiest_thread_cpu_pct: f64,
    /// The process holding the most descriptors: how many, and its soft RLIMIT_NOFILE (0 when
    /// unreadable). A server at its limit fails every accept with EMFILE.
    pub fds_max_process: u64,
    pub fd_limit: u64,
    /// With a listening port ([`Sampler::listen_port`]): connections in its accept queue at
    /// the sample (completed by the kernel, not accepted by the server yet), its backlog, and
    /// the listening sockets found (0: none, or no port given).
    pub accept_queue: u64,
    pub accept_backlog: u64,
    pub listeners: u32,
    pub machine: Machine,
    /// The kernel's side: TCP counters and the run queue.
    pub kernel: Kernel,
}

/// The whole machine over the interval: percent of all CPUs (100 = every core busy).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Machine {
    pub cpu_user_pct: f64,
    pub cpu_sys_pct: f64,
    pub cpu_iowait_pct: f64,
    pub mem_total_bytes: u64,
    pub mem_available_bytes: u64,
    /// Of `cpu_sys_pct`: time in softirq (network receive and transmit processing, mostly).
    pub cpu_softirq_pct: f64,
    /// The machine's CPUs (the `cpuN` lines of /proc/stat), whatever this process's affinity.
    pub cores: u32,
}

/// The kernel's TCP counters and scheduler queue at one sample. The TCP figures are the
/// network namespace's (`/proc/net/netstat`, `/proc/net/snmp`, `/proc/net/sockstat`): every
/// socket of it, the generator's too when it shares the namespace. Counters are the increase
/// over the interval since the previous sample (zero in the first); gauges are read at the
/// sample. Readable without privileges.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Kernel {
    /// Connections a full accept queue could not take (TcpExt ListenOverflows): the server
    /// does not accept as fast as clients connect, or not at all.
    pub listen_overflows: u64,
    /// Connection requests dropped at a listener for any reason (TcpExt ListenDrops; includes
    /// the overflows).
    pub listen_drops: u64,
    /// SYNs answered with a cookie because the SYN queue was full (TcpExt SyncookiesSent).
    pub syncookies_sent: u64,
    /// SYNs dropped because the SYN queue was full and cookies were off (TcpExt
    /// TCPReqQFullDrop).
    pub syn_drops: u64,
    /// Segments retransmitted (Tcp RetransSegs).
    pub retransmits: u64,
    /// Resets sent (Tcp OutRsts).
    pub resets_sent: u64,
    /// Established connections ended by a reset (Tcp EstabResets): resets received, mostly.
    pub estab_resets: u64,
    /// Gauges from /proc/net/sockstat: TCP sockets in use, orphaned (closed by their process,
    /// still draining), in TIME_WAIT, and the pages of memory TCP holds (against
    /// net.ipv4.tcp_mem's pressure thresholds).
    pub tcp_inuse: u64,
    pub tcp_orphan: u64,
    pub tcp_time_wait: u64,
    pub tcp_mem_pages: u64,
    /// The machine's run queue at the sample (/proc/stat procs_running, every CPU's) and the
    /// tasks blocked on I/O (procs_blocked).
    pub procs_running: u64,
    pub procs_blocked: u64,
}

/// The cumulative TCP counters a [`Kernel`] reports as increases, in its field order.
const TCP_COUNTERS: usize = 7;

/// One reading of the namespace's cumulative TCP counters (see [`Kernel`]'s first 7 fields).
fn tcp_counters(netstat: &str, snmp: &str) -> [u64; TCP_COUNTERS] {
    let ext = |name: &str| proc_net_value(netstat, "TcpExt:", name);
    let tcp = |name: &str| proc_net_value(snmp, "Tcp:", name);
    [
        ext("ListenOverflows"),
        ext("ListenDrops"),
        ext("SyncookiesSent"),
        ext("TCPReqQFullDrop"),
        tcp("RetransSegs"),
        tcp("OutRsts"),
        tcp("EstabResets"),
    ]
}

/// A value of the /proc/net/{netstat,snmp} format: a header line `PREFIX name name ...`
/// followed by a line `PREFIX value value ...`. 0 when the name or a line is missing.
fn proc_net_value(text: &str, prefix: &str, name: &str) -> u64 {
    let mut lines = text.lines().filter(|l| l.starts_with(prefix));
    while let (Some(names), Some(values)) = (lines.next(), lines.next()) {
        if let Some(i) = names.split_ascii_whitespace().position(|n| n == name) {
            return values
                .split_ascii_whitespace()
                .nth(i)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
        }
    }
    0
}

/// `TCP: inuse N orphan N tw N alloc N mem N` of /proc/net/sockstat: (inuse, orphan, tw, mem).
fn sockstat(text: &str) -> (u64, u64, u64, u64) {
    let Some(line) = text.lines().find(|l| l.starts_with("TCP:")) else {
        return (0, 0, 0, 0);
    };
    let f: Vec<&str> = line.split_ascii_whitespace().collect();
    let get = |key: &str| {
        f.iter()
            .position(|k| *k == key)
            .and_then(|i| f.get(i + 1)?.parse().ok())
            .unwrap_or(0)
    };
    (get("inuse"), get("orphan"), get("tw"), get("mem"))
}

/// The soft limit of "Max open files" in a /proc/PID/limits text (0 when absent or
/// "unlimited").
fn fd_soft_limit(limits: &str) -> u64 {
    limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))
        .and_then(|rest| rest.split_ascii_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// How many descriptors a process holds against its limit. Linux 6.2 and later report the count
/// as the size of /proc/PID/fd (one stat, whatever the count; it includes descriptors reserved
/// by threads blocked in accept()); older kernels report 0 there, and the directory is listed
/// instead (a 20,000-descriptor server costs milliseconds per sample that way).
fn open_fds(pid: i32) -> Option<u64> {
    let dir = format!("/proc/{pid}/fd");
    match fs::metadata(&dir) {
        Ok(m) if m.len() > 0 => Some(m.len()),
        Ok(_) => Some(fs::read_dir(&dir).ok()?.count() as u64),
        Err(_) => None,
    }
}

/// At most this many threads' states are read per sample (see [`Sample::threads_running`]).
const THREAD_STATES_READ: u64 = 256;

/// One process's threads by state: (running or runnable, blocked uninterruptibly), with each
/// thread read's CPU ticks (user + system) into `cpu`, reading
/// every `stride`-th thread and counting it `stride` times.
fn thread_states(pid: i32, stride: u64, cpu: &mut HashMap<i32, u64>) -> (u64, u64) {
    let (mut running, mut blocked) = (0, 0);
    let Ok(dir) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return (0, 0);
    };
    for t in dir.flatten().step_by(stride.max(1) as usize) {
        let Ok(text) = fs::read_to_string(t.path().join("stat")) else {
            continue; // the thread ended between the listing and the read
        };
        let Some(st) = parse_stat(&text) else {
            continue;
        };
        match st.state {
            b'R' => running += stride,
            b'D' => blocked += stride,
            _ => {}
        }
        if let Some(tid) = t.file_name().to_str().and_then(|s| s.parse().ok()) {
            cpu.insert(tid, st.utime + st.stime);
        }
    }
    (running, blocked)
}

/// Reads a process tree again and again; keeps the previous reading for rates.
pub struct Sampler {
    root: i32,
    start: Instant,
    tick: f64,
    page: u64,
    prev: Option<(Instant, f64, f64)>,
    prev_stat: Option<[u64; 8]>,
    prev_tcp: Option<[u64; TCP_COUNTERS]>,
    /// Each thread's CPU ticks at the previous sample, by thread id (the threads read then).
    prev_threads: HashMap<i32, u64>,
    /// The server's listening port, whose accept queue each sample reads.
    port: Option<u16>,
}

/// Fields of /proc/PID/stat that we use.
#[derive(Debug, Clone, Copy, Default)]
struct ProcStat {
    /// The state letter of its main thread (R, S, D, ...).
    state: u8,
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
        state: *f.first()?.as_bytes().first()?,
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

/// user, nice, system, idle, iowait, irq, softirq, steal jiffies of all CPUs, from /proc/stat.
fn machine_stat(text: &str) -> Option<[u64; 8]> {
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
            prev_tcp: None,
            prev_threads: HashMap::new(),
            port: None,
        }
    }

    /// Also read the accept queue of the TCP listeners on `port` at each sample (the server's
    /// port: the lab's, or a run's target).
    pub fn listen_port(mut self, port: u16) -> Sampler {
        self.port = Some(port);
        self
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
        let procs: Vec<(i32, ProcStat)> = tree(self.root)
            .into_iter()
            .filter_map(|pid| {
                if pid == self.root {
                    Some((pid, root))
                } else {
                    // None: exited between the scan and this read.
                    read_stat(pid).map(|st| (pid, st))
                }
            })
            .collect();
        // Reading a thread's state is a file read per thread: past THREAD_STATES_READ threads
        // in the tree, every k-th thread of each process is read and counted k times.
        let all_threads: u64 = procs.iter().map(|(_, st)| st.threads).sum();
        let stride = all_threads.div_ceil(THREAD_STATES_READ).max(1);
        let mut most_fds = None;
        let mut thread_cpu: HashMap<i32, u64> = HashMap::new();
        for (pid, st) in procs {
            s.processes += 1;
            user += st.utime + st.cutime;
            sys += st.stime + st.cstime;
            s.threads += st.threads;
            s.rss_bytes += st.rss_pages * self.page;
            if let Ok(text) = fs::read_to_string(format!("/proc/{pid}/status")) {
                s.ctx_voluntary += status_field(&text, "voluntary_ctxt_switches:");
                s.ctx_involuntary += status_field(&text, "nonvoluntary_ctxt_switches:");
            }
            if let Some(n) = open_fds(pid) {
                s.fds += n;
                if n >= s.fds_max_process {
                    s.fds_max_process = n;
                    most_fds = Some(pid);
                }
            }
            let (running, blocked) = if st.threads <= 1 {
                // One thread: its state and CPU are the process's, already read.
                thread_cpu.insert(pid, st.utime + st.stime);
                (u64::from(st.state == b'R'), u64::from(st.state == b'D'))
            } else {
                thread_states(pid, stride, &mut thread_cpu)
            };
            s.threads_running += running;
            s.threads_blocked += blocked;
        }
        if let Some(pid) = most_fds {
            s.fd_limit = fs::read_to_string(format!("/proc/{pid}/limits"))
                .map(|t| fd_soft_limit(&t))
                .unwrap_or(0);
        }
        s.cpu_user_s = user as f64 / self.tick;
        s.cpu_sys_s = sys as f64 / self.tick;
        if let Some((t, u, y)) = self.prev {
            let dt = (now - t).as_secs_f64().max(1e-9);
            // A process leaving the tree without being reaped inside it takes its time along:
            // rates never go negative.
            s.cpu_user_pct = ((s.cpu_user_s - u) / dt * 100.0).max(0.0);
            s.cpu_sys_pct = ((s.cpu_sys_s - y) / dt * 100.0).max(0.0);
            let busiest = thread_cpu
                .iter()
                .filter_map(|(tid, now)| Some(now.saturating_sub(*self.prev_threads.get(tid)?)))
                .max()
                .unwrap_or(0);
            // A tick-counted figure: at most 100% of a core, whatever the rounding.
            s.busiest_thread_cpu_pct = (busiest as f64 / self.tick / dt * 100.0).min(100.0);
        }
        self.prev_threads = thread_cpu;
        self.prev = Some((now, s.cpu_user_s, s.cpu_sys_s));
        let stat = fs::read_to_string("/proc/stat").unwrap_or_default();
        s.machine.cores = stat
            .lines()
            .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
            .count() as u32;
        if let Some(m) = machine_stat(&stat) {
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
                s.machine.cpu_softirq_pct = d[6] / total * 100.0;
            }
            self.prev_stat = Some(m);
        }
        self.kernel(&mut s.kernel, &stat);
        if let Some(q) = self.port.and_then(|p| listen::accept_queue(p).ok()) {
            s.accept_queue = q.queued;
            s.accept_backlog = q.backlog;
            s.listeners = q.listeners;
        }
        let (total, avail) = meminfo();
        s.machine.mem_total_bytes = total;
        s.machine.mem_available_bytes = avail;
        Ok(s)
    }

    /// The kernel's counters now: increases since the previous sample, and gauges.
    fn kernel(&mut self, k: &mut Kernel, stat: &str) {
        let read = |p: &str| fs::read_to_string(p).unwrap_or_default();
        let now = tcp_counters(&read("/proc/net/netstat"), &read("/proc/net/snmp"));
        if let Some(prev) = self.prev_tcp {
            let d: [u64; TCP_COUNTERS] = std::array::from_fn(|i| now[i].saturating_sub(prev[i]));
            k.listen_overflows = d[0];
            k.listen_drops = d[1];
            k.syncookies_sent = d[2];
            k.syn_drops = d[3];
            k.retransmits = d[4];
            k.resets_sent = d[5];
            k.estab_resets = d[6];
        }
        self.prev_tcp = Some(now);
        (k.tcp_inuse, k.tcp_orphan, k.tcp_time_wait, k.tcp_mem_pages) =
            sockstat(&read("/proc/net/sockstat"));
        k.procs_running = status_field(stat, "procs_running");
        k.procs_blocked = status_field(stat, "procs_blocked");
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
        assert_eq!((st.state, st.ppid), (b'S', 17));
        assert_eq!((st.utime, st.stime, st.cutime, st.cstime), (250, 75, 3, 4));
        assert_eq!(st.threads, 7);
        assert_eq!(st.rss_pages, 321);
        assert!(parse_stat("garbage").is_none());
    }

    #[test]
    fn kernel_counters_parse_from_their_proc_formats() {
        let netstat = "TcpExt: SyncookiesSent ListenOverflows ListenDrops TCPReqQFullDrop\n\
                       TcpExt: 3 17 19 2\n\
                       IpExt: InNoRoutes ListenOverflows\n\
                       IpExt: 5 999\n";
        let snmp =
            "Ip: Forwarding\nIp: 1\nTcp: RtoAlgorithm RetransSegs InErrs OutRsts EstabResets\n\
                    Tcp: 1 40 0 11 7\nUdp: InDatagrams\nUdp: 5\n";
        assert_eq!(tcp_counters(netstat, snmp), [17, 19, 3, 2, 40, 11, 7]);
        // A name missing, a truncated file, garbage: zeros, no panic.
        assert_eq!(proc_net_value(netstat, "TcpExt:", "NoSuchCounter"), 0);
        assert_eq!(
            proc_net_value("TcpExt: ListenOverflows\n", "TcpExt:", "ListenOverflows"),
            0
        );
        assert_eq!(
            proc_net_value(
                "TcpExt: ListenOverflows\nTcpExt: x\n",
                "TcpExt:",
                "ListenOverflows"
            ),
            0
        );
        assert_eq!(tcp_counters("", ""), [0; TCP_COUNTERS]);
        let sock =
            "sockets: used 22\nTCP: inuse 7 orphan 2 tw 4 alloc 9 mem 52\nUDP: inuse 0 mem 0\n";
        assert_eq!(sockstat(sock), (7, 2, 4, 52));
        assert_eq!(sockstat("TCP: inuse"), (0, 0, 0, 0));
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max open files            4000                 20000                files     \n";
        assert_eq!(fd_soft_limit(limits), 4000);
        assert_eq!(
            fd_soft_limit(
                "Max open files            unlimited            unlimited            files\n"
            ),
            0
        );
    }

    #[test]
    fn descriptors_are_counted_as_a_listing_counts_them() {
        // A child holding a known set, none reserved: its count equals its listing.
        let child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let listed = fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count() as u64;
        assert_eq!(open_fds(pid), Some(listed));
        let mut child = child;
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(open_fds(0x7fff_fff0), None);
    }

    #[test]
    fn this_process_shows_its_descriptor_limit_threads_and_the_kernel() {
        let mut s = Sampler::new(std::process::id());
        let a = s.sample().unwrap();
        // The process itself: its limit is readable and above what it holds; the thread taking
        // the sample is running.
        assert!(
            a.fds_max_process >= 3 && a.fd_limit >= a.fds_max_process,
            "{a:?}"
        );
        assert!(
            a.threads_running >= 1 && a.threads_running <= a.threads,
            "{a:?}"
        );
        assert!(a.kernel.procs_running >= 1, "{a:?}");
        // A listener nobody accepts from, with a backlog of 1, and connections past it: the
        // namespace's ListenOverflows grows between two samples.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        // SAFETY: listen(2) on a socket we own; only changes its backlog.
        unsafe {
            libc::listen(std::os::fd::AsRawFd::as_raw_fd(&l), 1);
        }
        let addr = l.local_addr().unwrap();
        let mut held = Vec::new();
        for _ in 0..8 {
            let mut c = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(50));
            if let Ok(c) = c.as_mut() {
                c.set_nonblocking(true).unwrap();
            }
            held.push(c);
        }
        std::thread::sleep(Duration::from_millis(1100)); // a SYN retransmit at 1 s
        let b = s.sample().unwrap();
        assert!(
            b.kernel.listen_overflows >= 1 && b.kernel.listen_drops >= b.kernel.listen_overflows,
            "{:?}",
            b.kernel
        );
        assert!(b.kernel.tcp_inuse >= 1, "{:?}", b.kernel);
    }

    #[test]
    fn the_busiest_thread_shows_a_loop_spinning_beside_idle_threads() {
        // A thread is judged from the second sample that reads it: the spinner exists (asleep)
        // before the first, spins 400 ms of its own CPU between the two (however long the
        // machine makes it wait), and stays alive until the second has read it. Idle threads
        // sleep beside it.
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let (spun_tx, spun_rx) = std::sync::mpsc::channel();
        let (read_tx, read_rx) = std::sync::mpsc::channel::<()>();
        let spin = std::thread::spawn(move || {
            let _ = go_rx.recv_timeout(Duration::from_secs(10));
            let start = cpu_now();
            let mut x = 1u64;
            while cpu_now() - start < 0.4 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
            spun_tx.send(()).unwrap();
            let _ = read_rx.recv_timeout(Duration::from_secs(10));
            x
        });
        let idle: Vec<_> = (0..3)
            .map(|_| std::thread::spawn(|| std::thread::sleep(Duration::from_millis(700))))
            .collect();
        let mut s = Sampler::new(std::process::id());
        let a = s.sample().unwrap();
        assert_eq!(a.busiest_thread_cpu_pct, 0.0, "no rate in the first sample");
        assert!(a.machine.cores >= 1, "{:?}", a.machine);
        let t0 = Instant::now();
        go_tx.send(()).unwrap();
        spun_rx.recv().unwrap();
        let b = s.sample().unwrap();
        let wall = t0.elapsed().as_secs_f64();
        read_tx.send(()).unwrap();
        spin.join().unwrap();
        // 400 ms of one thread over the wall time between the samples (ticks of 10 ms).
        let expect = 40.0 / (wall + 0.05);
        assert!(
            b.busiest_thread_cpu_pct >= expect * 0.6 && b.busiest_thread_cpu_pct <= 100.0,
            "busiest thread {}% over {wall:.2}s",
            b.busiest_thread_cpu_pct
        );
        for t in idle {
            t.join().unwrap();
        }
    }

    /// This thread's CPU time in seconds.
    fn cpu_now() -> f64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a valid timespec to write to.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
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
