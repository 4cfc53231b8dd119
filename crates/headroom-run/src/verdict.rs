//! Why a server stopped scaling: the generator's self-check ([`generator_of`]) and the verdict
//! ([`verdict`]), a pure function of a run's figures and the server's samples, so each rule is
//! unit-tested on figures alone. docs/verdicts.md states the rules for users.
//!
//! The verdict reads:
//! - the run (its summary): connections the kernel accepted but the server never answered
//!   (`tcp_connected_peak - connections_peak`), response timeouts, the error rate;
//! - the server's samples (its process tree, the machine, the kernel's TCP counters) from
//!   [`headroom_monitor`]: its CPU split into user and system at its busiest (the 90th
//!   percentile of the samples, so a ramp's last seconds count, not its quiet start), the
//!   threads it kept running, its descriptors against its limit, the accept queue's
//!   overflows, memory available, retransmits;
//! - the generator's self-check: its workers' CPU, how late it sent, what it could not start.
//!
//! Each limit whose evidence holds is a candidate; effects of a stronger cause are not (a
//! server at its descriptor limit leaves connections waiting and overflows its accept queue;
//! a CPU-bound one accepts late). One candidate is the verdict; two that are each a cause
//! (the server's CPU and the generator's, say) make `mixed`, naming both: a verdict that
//! guesses is worse than one that says the evidence is split.

use std::collections::BTreeMap;

use headroom_core::{ErrorKind, LoadModel, Plan};
use headroom_engine::RunOutcome;
use headroom_format::summary::{GeneratorSection, Verdict};
use headroom_metrics::BUSY_WORKER_PCT;
use headroom_monitor::Sample;

use crate::human::thousands;
use crate::interval::IntervalLine;
use crate::summary::{latency_of, round3, RunSummary};

/// The generator's sends count as late when their 99th percentile is this far behind.
pub const LATE_SEND_MS: f64 = headroom_metrics::LATE_LAG_US as f64 / 1000.0;
/// A server's CPU counts as its limit at this share of the cores it can use.
const CPU_SATURATED: f64 = 0.85;
/// The machine counts as saturated at this share of all its cores busy.
const MACHINE_SATURATED_PCT: f64 = 90.0;

/// Whether a load that meant to start `offered` users (or sessions) and started `started`
/// fell short beyond chance: the generator could not keep up, whatever the server did. A
/// shortfall below four standard deviations of a Poisson count is chance; past 20% it never is.
pub fn client_bound(started: u64, offered: f64) -> bool {
    (started as f64) < (0.8 * offered).min(offered - 4.0 * offered.sqrt())
}

/// The users an open model meant to start over `elapsed` seconds (`None` for a closed
/// population or a rate, whose users all start at once).
pub fn offered_arrivals(plan: &Plan, elapsed: f64) -> Option<f64> {
    match &plan.model {
        LoadModel::Open { rate, .. } => Some(rate * elapsed),
        LoadModel::Sessions { phases, .. } if !phases.is_empty() => {
            // Integrate each phase's (linear) rate over the part of it the run lived through.
            let mut left = elapsed;
            let mut sum = 0.0;
            for ph in phases {
                let d = ph.duration.as_secs_f64().min(left.max(0.0));
                sum += (ph.rate_at(0.0) + ph.rate_at(d)) / 2.0 * d;
                left -= ph.duration.as_secs_f64();
            }
            Some(sum)
        }
        _ => None,
    }
}

/// The generator's self-check of a run: its workers' CPU, how late it handled its timers and
/// arrivals, what it could not start, and `limits`, each reason it (not the server) was the
/// limit. The lab's rate search judges its probes by the same reasons.
pub fn generator_of(plan: &Plan, out: &RunOutcome) -> GeneratorSection {
    let c = &out.total.counters;
    let secs = out.elapsed.as_secs_f64().max(1e-9);
    let intervals = out.intervals.max(1);
    let workers = c.worker_intervals.div_ceil(intervals);
    let mut g = GeneratorSection {
        workers,
        worker_cpu_pct: round1(c.worker_cpu_us as f64 / 1e4 / secs / workers.max(1) as f64),
        worker_wait_pct: round1(c.worker_wait_us as f64 / 1e4 / secs / workers.max(1) as f64),
        busy_intervals_pct: round1(
            100.0 * c.worker_busy_intervals as f64 / c.worker_intervals.max(1) as f64,
        ),
        lag_us: latency_of(&out.total.lag),
        late_intervals_pct: round1(
            100.0 * c.worker_late_intervals as f64 / c.worker_intervals.max(1) as f64,
        ),
        arrivals_dropped: c.users_dropped,
        local_resource_errors: c.errors[ErrorKind::LocalResource.index()],
        limits: Vec::new(),
    };
    g.limits = generator_limits(&g, c.users_started, offered_arrivals(plan, secs));
    g
}

/// Each reason the generator was the limit (empty: it was not).
pub fn generator_limits(g: &GeneratorSection, started: u64, offered: Option<f64>) -> Vec<String> {
    let mut why = Vec::new();
    // Half the worker-intervals flat out: the figures measure the generator. (One busy
    // interval, a burst of connects, is not.)
    if g.busy_intervals_pct >= 50.0 {
        why.push(format!(
            "its workers ran or waited for a CPU at least {BUSY_WORKER_PCT:.0}% of the time in \
             {:.0}% of the intervals (each used {:.0}% of a core and waited {:.0}% of the time)",
            g.busy_intervals_pct, g.worker_cpu_pct, g.worker_wait_pct
        ));
    }
    // Late sends in half the worker-intervals: a generator behind its schedule, not one
    // burst (a thousand users starting at once start over a few ms).
    if g.late_intervals_pct >= 50.0 {
        why.push(format!(
            "it sent late: in {:.0}% of the intervals 1% of its timed sends and arrivals went \
             out {LATE_SEND_MS:.0} ms or more after their intended instants (p99 {:.0} ms over \
             the run)",
            g.late_intervals_pct,
            g.lag_us.p99 as f64 / 1000.0
        ));
    }
    if let Some(offered) = offered {
        if client_bound(started, offered) {
            why.push(format!(
                "it started {} of the {} users the load meant to start",
                thousands(started),
                thousands(offered.round() as u64)
            ));
        }
    }
    // Arrivals dropped at a phase's max_users are the scenario's own cap (Tsung's maxnumber),
    // reached when users outlive their arrivals (a slow server makes them): not the generator's
    // limit (bench/mqtt-vs-tsung.sh's runs were called client-bound for it).
    if g.local_resource_errors > 0 {
        why.push(format!(
            "{} connects failed for want of a local port or descriptor",
            thousands(g.local_resource_errors)
        ));
    }
    why
}

/// The figures the verdict rules read (each one is in the verdict's `evidence`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evidence {
    /// Server samples read (0: the server was not sampled; only the generator can be judged).
    pub samples: usize,
    /// The machine's cores.
    pub cores: f64,
    /// The server's CPU at its busiest (90th percentile of the samples), percent of a core.
    pub server_cpu_user_pct: f64,
    pub server_cpu_sys_pct: f64,
    /// The server's busiest thread's CPU (90th percentile of the samples), percent of a core,
    /// and its most threads.
    pub server_busiest_thread_pct: f64,
    pub server_threads: f64,
    /// The generator's CPU, percent of one core (all its workers).
    pub generator_cpu_pct: f64,
    /// The machine's CPU busy at its busiest, percent of all cores.
    pub machine_cpu_pct: f64,
    /// The most descriptors one server process held, and its limit (0: unknown).
    pub server_fds: f64,
    pub server_fd_limit: f64,
    /// The least memory available, as a fraction of the machine's.
    pub mem_available_frac: f64,
    /// The server's accept queue (its listeners on the load's port, when on this machine):
    /// whether any was found, the share of samples holding at least 2 connections the server
    /// had not accepted, the most it held, and the backlog.
    pub accept_queue_known: bool,
    pub accept_queue_share: f64,
    pub accept_queue_max: f64,
    pub accept_backlog: f64,
    /// The kernel's counters summed over the samples.
    pub listen_overflows: f64,
    pub syn_drops: f64,
    pub retransmits: f64,
    /// The run: TCP connections the kernel accepted that the server never answered at the
    /// peak, the share of intervals that ended with some left so ([`waiting_at`]), its most
    /// connections, response timeouts, attempts, the error rate.
    pub waiting: f64,
    pub waiting_share: f64,
    pub tcp_connected_peak: f64,
    pub timeouts: f64,
    pub attempts: f64,
    /// The run's handshakes: connect time's and connect-to-first-byte's 99th percentiles (ms),
    /// and connect timeouts. A handshake the kernel dropped at a full queue waits for a
    /// retransmitted SYN (1 s, then 2, 4...): the run's own evidence that the namespace's
    /// overflow counters were its server's.
    pub connect_p99_ms: f64,
    pub served_p99_ms: f64,
    pub connect_timeouts: f64,
    pub error_rate: f64,
    /// The generator's reasons to be the limit (see [`generator_limits`]).
    pub generator_limits: Vec<String>,
}

impl Evidence {
    /// The evidence of a run: its summary (with its `generator` section) and the server's
    /// samples taken during it, each with its rates (a sampler's first reading has none: leave
    /// it out); none: only the generator is judged.
    /// `cores` stands in for the machine's when no sample says how many it has.
    pub fn gather(s: &RunSummary, samples: &[Sample], waiting_share: f64, cores: f64) -> Evidence {
        let sampled_cores = samples.iter().map(|x| x.machine.cores).max().unwrap_or(0);
        let cores = if sampled_cores > 0 {
            f64::from(sampled_cores)
        } else {
            cores
        };
        let p90 = |f: &dyn Fn(&Sample) -> f64| percentile(samples.iter().map(f).collect(), 0.9);
        let max = |f: &dyn Fn(&Sample) -> f64| samples.iter().map(f).fold(0.0, f64::max);
        let sum = |f: &dyn Fn(&Sample) -> f64| samples.iter().map(f).sum::<f64>();
        // The limit of the process that held the most descriptors, at that sample.
        let (fds, fd_limit) = samples
            .iter()
            .map(|x| (x.fds_max_process as f64, x.fd_limit as f64))
            .fold((0.0, 0.0), |a, b| if b.0 > a.0 { b } else { a });
        let mem_available_frac = samples
            .iter()
            .filter(|x| x.machine.mem_total_bytes > 0)
            .map(|x| x.machine.mem_available_bytes as f64 / x.machine.mem_total_bytes as f64)
            .fold(1.0, f64::min);
        let e = &s.errors;
        let attempts = (s.responses + s.errors_total).max(1) as f64;
        Evidence {
            samples: samples.len(),
            cores: cores.max(1.0),
            server_cpu_user_pct: round1(p90(&|x| x.cpu_user_pct)),
            server_cpu_sys_pct: round1(p90(&|x| x.cpu_sys_pct)),
            server_busiest_thread_pct: round1(p90(&|x| x.busiest_thread_cpu_pct)),
            server_threads: max(&|x| x.threads as f64),
            generator_cpu_pct: round1(s.generator.worker_cpu_pct * s.generator.workers as f64),
            machine_cpu_pct: round1(p90(&|x| x.machine.cpu_user_pct + x.machine.cpu_sys_pct)),
            server_fds: fds,
            server_fd_limit: fd_limit,
            mem_available_frac,
            accept_queue_known: samples.iter().any(|x| x.listeners > 0),
            accept_queue_share: if samples.is_empty() {
                0.0
            } else {
                samples.iter().filter(|x| x.accept_queue >= 2).count() as f64 / samples.len() as f64
            },
            accept_queue_max: max(&|x| x.accept_queue as f64),
            accept_backlog: max(&|x| x.accept_backlog as f64),
            listen_overflows: sum(&|x| x.kernel.listen_overflows as f64),
            syn_drops: sum(&|x| x.kernel.syn_drops as f64),
            retransmits: sum(&|x| x.kernel.retransmits as f64),
            waiting: s.tcp_connected_peak.saturating_sub(s.connections_peak) as f64,
            waiting_share,
            tcp_connected_peak: s.tcp_connected_peak as f64,
            timeouts: e.timeout as f64,
            attempts,
            connect_p99_ms: s.connect_us.p99 as f64 / 1000.0,
            served_p99_ms: s.served_us.p99 as f64 / 1000.0,
            connect_timeouts: e.connect_timeout as f64,
            error_rate: s.error_rate,
            generator_limits: s.generator.limits.clone(),
        }
    }

    /// The evidence of a run up to its first `lines.len()` intervals (a capacity curve's
    /// break, where the server stopped scaling, not what it did after): the samples taken by
    /// their end, and the run's own figures from those interval lines — errors, timeouts,
    /// connections left waiting, connect time, the generator's CPU, lateness and local
    /// failures. (Connect-to-first-byte and dropped arrivals are not in the lines: 0 here.)
    pub fn gather_until(
        s: &RunSummary,
        samples: &[Sample],
        lines: &[IntervalLine],
        cores: f64,
    ) -> Evidence {
        let until = lines
            .last()
            .map_or(0.0, |l| l.t_s + l.length_s)
            // A sample taken just after the interval's end is still its.
            + 0.5;
        let samples: Vec<Sample> = samples.iter().filter(|x| x.t_s <= until).cloned().collect();
        let n = lines.len().max(1) as f64;
        let workers = s.generator.workers.max(1) as f64;
        let sum = |f: &dyn Fn(&IntervalLine) -> u64| lines.iter().map(f).sum::<u64>();
        let late = lines
            .iter()
            .filter(|l| l.lag_us.p99 >= headroom_metrics::LATE_LAG_US)
            .count() as f64;
        let g = GeneratorSection {
            workers: s.generator.workers,
            worker_cpu_pct: lines.iter().map(|l| l.generator_cpu_pct).sum::<f64>() / n,
            worker_wait_pct: lines.iter().map(|l| l.generator_wait_pct).sum::<f64>() / n,
            busy_intervals_pct: 100.0 * sum(&|l| l.generator_busy_workers) as f64 / (n * workers),
            lag_us: headroom_format::summary::Latency {
                count: lines.len() as u64,
                p99: lines.iter().map(|l| l.lag_us.p99).max().unwrap_or(0),
                ..Default::default()
            },
            late_intervals_pct: 100.0 * late / n,
            arrivals_dropped: 0,
            local_resource_errors: sum(&|l| l.errors.local_resource),
            limits: Vec::new(),
        };
        let errors = sum(&|l| l.errors.total());
        let responses = sum(&|l| l.responses);
        // The lines' figures in a summary of the window, for the rest of `gather`.
        let window = RunSummary {
            responses,
            errors_total: errors,
            error_rate: errors as f64 / (responses + errors).max(1) as f64,
            errors: headroom_format::summary::Errors {
                timeout: sum(&|l| l.errors.timeout),
                connect_timeout: sum(&|l| l.errors.connect_timeout),
                ..Default::default()
            },
            tcp_connected_peak: lines
                .iter()
                .map(|l| l.tcp_connected_peak)
                .max()
                .unwrap_or(0),
            connections_peak: lines.iter().map(|l| l.connections_peak).max().unwrap_or(0),
            connect_us: headroom_format::summary::Latency {
                p99: lines.iter().map(|l| l.connect_us.p99).max().unwrap_or(0),
                ..Default::default()
            },
            generator: GeneratorSection {
                limits: generator_limits(&g, sum(&|l| l.users_started), None),
                ..g
            },
            ..Default::default()
        };
        let waiting = lines
            .iter()
            .filter(|l| waiting_at(l.tcp_connected_open, l.connections_open))
            .count() as f64;
        Evidence::gather(&window, &samples, waiting / n, cores)
    }

    fn server_cpu(&self) -> f64 {
        self.server_cpu_user_pct + self.server_cpu_sys_pct
    }

    /// The machine's busy CPU in percent of one core.
    fn machine_busy(&self) -> f64 {
        self.machine_cpu_pct * self.cores
    }

    /// The server's CPU at the limit: one of its threads kept a core 85% busy (an event loop
    /// at its core's limit, however idle the other threads), or the server used 85% of every
    /// core, or the machine was busy and the server took at least half of it.
    fn cpu_saturated(&self) -> bool {
        self.server_busiest_thread_pct >= CPU_SATURATED * 100.0
            || self.server_cpu() >= CPU_SATURATED * 100.0 * self.cores
            || (self.machine_cpu_pct >= MACHINE_SATURATED_PCT
                && self.server_cpu() >= 0.5 * self.machine_busy())
    }

    /// The machine busy with neither the server nor the generator the limit alone, the
    /// generator taking a quarter of it or more: they share the cores.
    fn machine_shared(&self) -> bool {
        self.machine_cpu_pct >= MACHINE_SATURATED_PCT
            && self.generator_cpu_pct >= 0.25 * self.machine_busy()
    }

    /// One server process at its descriptor limit (within a few: the limit counts every
    /// descriptor, and the sample falls between accepts).
    fn at_fd_limit(&self) -> bool {
        self.server_fd_limit > 0.0 && self.server_fds + 8.0 >= self.server_fd_limit
    }

    /// Connections left waiting for the server: its accept queue held some in half the
    /// samples or more (read from the kernel when the server listens on this machine; else,
    /// as the generator saw it, connections left unanswered at the end of half the intervals),
    /// or response timeouts on 1% of the attempts. A server that accepts at once leaves its
    /// queue empty even while a burst overflows it: the handshakes the kernel dropped wait for
    /// a retransmitted SYN, outside the queue, and their requests may time out there; such
    /// timeouts beside an empty queue and overflows are the backlog's, not a pool's.
    fn left_waiting(&self) -> bool {
        let queued = if self.accept_queue_known {
            self.accept_queue_share >= 0.5
        } else {
            self.waiting_share >= 0.5
        };
        let outside_the_queue =
            self.accept_queue_known && self.overflowing() && self.handshakes_waited();
        queued || (self.timeouts >= 0.01 * self.attempts && !outside_the_queue)
    }

    /// The kernel dropped handshakes at a full accept queue or SYN queue.
    fn overflowing(&self) -> bool {
        self.listen_overflows + self.syn_drops > 0.0
    }

    /// Some of the run's own handshakes waited for a retransmitted SYN (a second or more to
    /// connect, or to the first byte) or timed out: the overflows were its server's, not some
    /// other listener's in the namespace.
    fn handshakes_waited(&self) -> bool {
        self.connect_p99_ms >= 900.0 || self.served_p99_ms >= 900.0 || self.connect_timeouts > 0.0
    }

    fn evidence_map(&self) -> BTreeMap<String, f64> {
        let mut m = BTreeMap::new();
        let mut put = |k: &str, v: f64| {
            m.insert(k.to_string(), v);
        };
        put("samples", self.samples as f64);
        put("cores", self.cores);
        put("server_cpu_user_pct", self.server_cpu_user_pct);
        put("server_cpu_sys_pct", self.server_cpu_sys_pct);
        put("server_busiest_thread_pct", self.server_busiest_thread_pct);
        put("server_threads", self.server_threads);
        put("generator_cpu_pct", self.generator_cpu_pct);
        put("machine_cpu_pct", self.machine_cpu_pct);
        put("server_fds", self.server_fds);
        put("server_fd_limit", self.server_fd_limit);
        put("mem_available_frac", round3(self.mem_available_frac));
        put("listen_overflows", self.listen_overflows);
        put("syn_drops", self.syn_drops);
        put("retransmits", self.retransmits);
        put(
            "accept_queue_known",
            f64::from(u8::from(self.accept_queue_known)),
        );
        put("accept_queue_share", round3(self.accept_queue_share));
        put("accept_queue_max", self.accept_queue_max);
        put("accept_backlog", self.accept_backlog);
        put("connections_waiting", self.waiting);
        put("waiting_share", round3(self.waiting_share));
        put("tcp_connected_peak", self.tcp_connected_peak);
        put("timeouts", self.timeouts);
        put("connect_p99_ms", self.connect_p99_ms);
        put("served_p99_ms", self.served_p99_ms);
        put("connect_timeouts", self.connect_timeouts);
        put("error_rate", self.error_rate);
        put("generator_limits", self.generator_limits.len() as f64);
        m
    }
}

/// A candidate limit: its name and the sentence that says it.
type Candidate = (&'static str, String);

/// The verdict of a run's evidence (see the module notes and docs/verdicts.md).
pub fn verdict(ev: &Evidence) -> Verdict {
    let mut server: Vec<Candidate> = Vec::new();
    let n = |v: f64| thousands(v.round() as u64);
    let cpu = ev.cpu_saturated();
    let fd = ev.at_fd_limit();
    if ev.samples > 0 {
        if fd {
            server.push((
                "descriptor_limit",
                format!(
                    "the server hit its descriptor limit: one process held {} of its {} \
                     descriptors, so it could accept no more connections{}",
                    n(ev.server_fds),
                    n(ev.server_fd_limit),
                    if ev.waiting > 0.0 {
                        format!(" ({} were left in the accept queue)", n(ev.waiting))
                    } else {
                        String::new()
                    }
                ),
            ));
        }
        if cpu {
            let kernel = ev.server_cpu_sys_pct >= ev.server_cpu_user_pct;
            server.push((
                if kernel { "cpu_kernel" } else { "cpu_user" },
                format!(
                    "the server was CPU-bound{}: {:.0}% of a core ({:.0}% in the kernel, \
                     {:.0}% in its own code), its busiest thread {:.0}%, on {:.0} core(s) \
                     {:.0}% busy",
                    if kernel {
                        " in the kernel"
                    } else {
                        " in its own code"
                    },
                    ev.server_cpu(),
                    ev.server_cpu_sys_pct,
                    ev.server_cpu_user_pct,
                    ev.server_busiest_thread_pct,
                    ev.cores,
                    ev.machine_cpu_pct
                ),
            ));
        }
        // The effects of the causes above are no candidates of their own. Nor is waiting seen
        // by a generator at its limit: replies it has not read yet look unanswered.
        let gen_limited = !ev.generator_limits.is_empty();
        if !fd && !cpu && !gen_limited && ev.left_waiting() {
            server.push((
                "pool_exhausted",
                format!(
                    "the server's workers were all taken: {} connection(s) waited in its \
                     accept queue{} and {} request(s) timed out, while its CPU sat at {:.0}% \
                     of a core ({:.0} threads)",
                    n(if ev.accept_queue_known {
                        ev.accept_queue_max
                    } else {
                        ev.waiting
                    }),
                    if ev.accept_queue_known {
                        format!(
                            " (of a backlog of {}, held in {:.0}% of the samples)",
                            n(ev.accept_backlog),
                            ev.accept_queue_share * 100.0
                        )
                    } else {
                        String::new()
                    },
                    n(ev.timeouts),
                    ev.server_cpu(),
                    ev.server_threads
                ),
            ));
        }
        if !fd
            && !cpu
            && (gen_limited || !ev.left_waiting())
            && ev.overflowing()
            && ev.handshakes_waited()
        {
            server.push((
                "backlog_overflow",
                format!(
                    "the server's listen backlog overflowed: the kernel dropped {} \
                     connection(s) at a full accept queue{} and {} SYN(s), the run's \
                     handshakes waited (p99 {:.0} ms to connect, {:.0} ms to the first byte), \
                     while the server accepted the rest at once and its CPU sat at {:.0}% of a \
                     core",
                    n(ev.listen_overflows),
                    if ev.accept_queue_known {
                        format!(" (a backlog of {})", n(ev.accept_backlog))
                    } else {
                        String::new()
                    },
                    n(ev.syn_drops),
                    ev.connect_p99_ms,
                    ev.served_p99_ms,
                    ev.server_cpu()
                ),
            ));
        }
        if ev.mem_available_frac < 0.05 {
            server.push((
                "memory",
                format!(
                    "the machine ran out of memory: {:.1}% of it was available at the least",
                    ev.mem_available_frac * 100.0
                ),
            ));
        }
        // Retransmits are the namespace's, every socket's: only many of them beside the run's
        // own failures say its network was the limit.
        if server.is_empty()
            && ev.retransmits >= 100.0_f64.max(0.05 * ev.attempts)
            && ev.error_rate >= 0.01
        {
            server.push((
                "network",
                format!(
                    "the network was the limit: {} segments were retransmitted",
                    n(ev.retransmits)
                ),
            ));
        }
    }
    let generator = (!ev.generator_limits.is_empty()).then(|| {
        (
            "client_bound",
            format!(
                "the generator was the limit: {}",
                ev.generator_limits.join("; ")
            ),
        )
    });
    // The machine's CPU the limit with neither side alone at it: both share it, and the
    // verdict names both.
    if server.is_empty() && generator.is_none() && ev.samples > 0 && ev.machine_shared() {
        let kernel = ev.server_cpu_sys_pct >= ev.server_cpu_user_pct;
        return Verdict {
            name: "mixed".into(),
            says: format!(
                "mixed evidence, no single limit: the machine's CPU was the limit, shared: its \
                 {:.0} core(s) were {:.0}% busy, {:.0}% of a core the server's and {:.0}% the \
                 generator's (pin them to separate cores, or load from another machine)",
                ev.cores,
                ev.machine_cpu_pct,
                ev.server_cpu(),
                ev.generator_cpu_pct
            ),
            candidates: vec![
                if kernel { "cpu_kernel" } else { "cpu_user" }.into(),
                "client_bound".into(),
            ],
            evidence: ev.evidence_map(),
        };
    }
    let mut all: Vec<Candidate> = server;
    all.extend(generator);
    let evidence = ev.evidence_map();
    match all.len() {
        0 if ev.samples == 0 => Verdict {
            name: "unknown".into(),
            says: "the server was not sampled (give --server-pid PID, or run it in a lab): \
                   only the generator was checked, and it was not the limit"
                .into(),
            candidates: Vec::new(),
            evidence,
        },
        0 => Verdict {
            name: "no_limit".into(),
            says: format!(
                "no limit reached: the server's CPU {:.0}% of a core, {} of {} descriptors, \
                 no connection left waiting, no accept queue overflow, and the generator kept \
                 its schedule",
                ev.server_cpu(),
                n(ev.server_fds),
                if ev.server_fd_limit > 0.0 {
                    n(ev.server_fd_limit)
                } else {
                    "?".into()
                }
            ),
            candidates: Vec::new(),
            evidence,
        },
        1 => {
            let (name, says) = all.remove(0);
            Verdict {
                name: name.into(),
                says,
                candidates: Vec::new(),
                evidence,
            }
        }
        _ => Verdict {
            name: "mixed".into(),
            says: format!(
                "mixed evidence, no single limit: {}",
                all.iter()
                    .map(|(_, s)| s.as_str())
                    .collect::<Vec<_>>()
                    .join("; and ")
            ),
            candidates: all.iter().map(|(n, _)| n.to_string()).collect(),
            evidence,
        },
    }
}

/// Whether an interval ended with connections the kernel accepted and the server had not
/// answered: at least 2, and 5% of the TCP connections open.
pub fn waiting_at(tcp_connected_open: u64, connections_open: u64) -> bool {
    let waiting = tcp_connected_open.saturating_sub(connections_open) as f64;
    waiting >= 2.0_f64.max(0.05 * tcp_connected_open as f64)
}

/// The `q` quantile of `v` (nearest rank; 0 when empty).
fn percentile(mut v: Vec<f64>, q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests;
