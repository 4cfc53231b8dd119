use super::*;

/// A server that coped on a 2-core machine: a few % CPU, descriptors far from the limit,
/// nothing waiting, the generator calm. Each test changes what its verdict needs.
fn calm() -> Evidence {
    Evidence {
        samples: 10,
        cores: 2.0,
        server_cpu_user_pct: 3.0,
        server_cpu_sys_pct: 2.0,
        server_busiest_thread_pct: 3.0,
        server_threads: 5.0,
        generator_cpu_pct: 10.0,
        machine_cpu_pct: 20.0,
        server_fds: 60.0,
        server_fd_limit: 1024.0,
        mem_available_frac: 0.8,
        accept_queue_known: true,
        accept_queue_share: 0.0,
        accept_queue_max: 0.0,
        accept_backlog: 4096.0,
        listen_overflows: 0.0,
        syn_drops: 0.0,
        retransmits: 0.0,
        waiting: 0.0,
        waiting_share: 0.0,
        tcp_connected_peak: 50.0,
        timeouts: 0.0,
        attempts: 10_000.0,
        connect_p99_ms: 0.2,
        served_p99_ms: 0.5,
        connect_timeouts: 0.0,
        error_rate: 0.0,
        generator_limits: Vec::new(),
    }
}

fn name(ev: &Evidence) -> String {
    verdict(ev).name
}

#[test]
fn client_bound_only_beyond_chance() {
    // Small probes: Poisson noise is large, so only a gross shortfall counts: 48 sessions at
    // 8/s fail only below 20, where 0.8 × 48 alone would fail 8% of honest probes.
    assert!(!client_bound(39, 48.0) && !client_bound(21, 48.0));
    assert!(client_bound(19, 48.0));
    assert!(!client_bound(0, 10.0), "too few to judge");
    // Large probes: 80% is the line.
    assert!(!client_bound(8_100, 10_000.0));
    assert!(client_bound(7_900, 10_000.0));
}

#[test]
fn light_load_is_no_limit_and_an_unsampled_server_is_unknown() {
    let v = verdict(&calm());
    assert_eq!(v.name, "no_limit", "{}", v.says);
    assert!(v.says.contains("no limit reached"), "{}", v.says);
    assert_eq!(v.evidence["server_fd_limit"], 1024.0);
    let unsampled = Evidence {
        samples: 0,
        ..calm()
    };
    assert_eq!(name(&unsampled), "unknown");
    // Even unsampled, a generator that was the limit says so.
    let busy = Evidence {
        samples: 0,
        generator_limits: vec!["it sent late".into()],
        ..calm()
    };
    assert_eq!(name(&busy), "client_bound");
}

#[test]
fn a_full_core_is_cpu_bound_split_by_where_the_time_went() {
    // An event loop at 95% of its core, in its own code.
    let user = Evidence {
        server_cpu_user_pct: 90.0,
        server_cpu_sys_pct: 5.0,
        server_busiest_thread_pct: 95.0,
        machine_cpu_pct: 70.0,
        ..calm()
    };
    let v = verdict(&user);
    assert_eq!(v.name, "cpu_user", "{}", v.says);
    assert!(v.says.contains("95% of a core"), "{}", v.says);
    // poll() over thousands of descriptors: the time is the kernel's.
    let kernel = Evidence {
        server_cpu_user_pct: 2.0,
        server_cpu_sys_pct: 88.0,
        server_busiest_thread_pct: 90.0,
        ..calm()
    };
    assert_eq!(name(&kernel), "cpu_kernel");
    // Two threads at 60% each with the machine two-thirds busy: no thread and no core at its
    // limit...
    let two = Evidence {
        server_cpu_user_pct: 120.0,
        server_busiest_thread_pct: 60.0,
        machine_cpu_pct: 65.0,
        ..calm()
    };
    assert_eq!(name(&two), "no_limit");
    // ...but the machine busy with the server holding most of it is.
    let starved = Evidence {
        machine_cpu_pct: 95.0,
        ..two.clone()
    };
    assert_eq!(name(&starved), "cpu_user");
    // Many threads, each light, together using 85% of every core.
    let all_cores = Evidence {
        server_cpu_user_pct: 175.0,
        server_busiest_thread_pct: 5.0,
        machine_cpu_pct: 88.0,
        ..calm()
    };
    assert_eq!(name(&all_cores), "cpu_user");
    // A busy machine the server barely uses, nor the generator: someone else's CPU.
    let other = Evidence {
        machine_cpu_pct: 95.0,
        server_cpu_user_pct: 40.0,
        server_busiest_thread_pct: 40.0,
        generator_cpu_pct: 20.0,
        ..calm()
    };
    assert_eq!(name(&other), "no_limit");
}

#[test]
fn a_machine_shared_by_server_and_generator_names_both() {
    // Two cores 94% busy: the server 75% of a core, the generator 81%, neither alone at a limit.
    let shared = Evidence {
        server_cpu_user_pct: 6.0,
        server_cpu_sys_pct: 69.0,
        server_busiest_thread_pct: 75.0,
        generator_cpu_pct: 81.0,
        machine_cpu_pct: 94.0,
        ..calm()
    };
    let v = verdict(&shared);
    assert_eq!(v.name, "mixed", "{}", v.says);
    assert_eq!(v.candidates, ["cpu_kernel", "client_bound"]);
    assert!(v.says.contains("shared"), "{}", v.says);
}

#[test]
fn connections_left_waiting_with_an_idle_cpu_are_an_exhausted_pool() {
    // `--arch pool --handlers 4` under 50 keep-alive clients: 4 served, 46 in the accept queue.
    let pool = Evidence {
        accept_queue_share: 1.0,
        accept_queue_max: 46.0,
        waiting: 46.0,
        waiting_share: 1.0,
        tcp_connected_peak: 50.0,
        server_threads: 6.0,
        ..calm()
    };
    let v = verdict(&pool);
    assert_eq!(v.name, "pool_exhausted", "{}", v.says);
    assert!(v.says.contains("46 connection(s) waited"), "{}", v.says);
    // Requests that time out inside a server whose CPU idles: the same.
    let stalled = Evidence {
        timeouts: 150.0,
        ..calm()
    };
    assert_eq!(name(&stalled), "pool_exhausted");
    // A listener not on this machine: the generator's view of waiting stands in.
    let remote = Evidence {
        accept_queue_known: false,
        accept_queue_share: 0.0,
        ..pool.clone()
    };
    assert_eq!(name(&remote), "pool_exhausted");
    // A burst whose handshakes waited a second for a retransmitted SYN is not.
    let burst = Evidence {
        accept_queue_known: false,
        waiting: 300.0,
        waiting_share: 0.2,
        ..calm()
    };
    assert_eq!(name(&burst), "no_limit");
    assert!(waiting_at(50, 4) && !waiting_at(50, 49) && !waiting_at(1_000, 970));
    // A CPU-bound server also accepts late: that is its CPU, not a pool.
    let slow = Evidence {
        server_cpu_user_pct: 97.0,
        server_busiest_thread_pct: 96.0,
        ..pool
    };
    assert_eq!(name(&slow), "cpu_user");
}

#[test]
fn overflows_beside_an_empty_accept_queue_are_the_backlog() {
    // `--backlog 8` and a burst of 1,000 connects: the server accepts at once, yet the kernel
    // drops thousands; the generator sees connections waiting for their SYN retransmits.
    // Some of their requests time out there, outside the queue: still the backlog's.
    let burst = Evidence {
        listen_overflows: 3_757.0,
        syn_drops: 40.0,
        accept_backlog: 8.0,
        waiting: 733.0,
        waiting_share: 0.9,
        timeouts: 142.0,
        attempts: 1_000.0,
        ..calm()
    };
    // Without its own handshakes waiting, the namespace's overflows were another listener's
    // (and timeouts with quick handshakes happened inside the server).
    let elsewhere = Evidence {
        timeouts: 0.0,
        ..burst.clone()
    };
    assert_eq!(name(&elsewhere), "no_limit");
    assert_eq!(name(&burst), "pool_exhausted");
    let burst = Evidence {
        connect_p99_ms: 1_020.0,
        ..burst
    };
    let v = verdict(&burst);
    assert_eq!(v.name, "backlog_overflow", "{}", v.says);
    // A connect timeout says the same.
    let timed_out = Evidence {
        connect_p99_ms: 0.3,
        connect_timeouts: 4.0,
        ..burst.clone()
    };
    assert_eq!(name(&timed_out), "backlog_overflow");
    assert!(v.says.contains("3,757 connection(s)"), "{}", v.says);
    assert!(v.says.contains("a backlog of 8"), "{}", v.says);
    // The same overflows with a queue that stays full: nobody accepts, a pool is taken.
    let full = Evidence {
        accept_queue_share: 0.9,
        accept_queue_max: 8.0,
        ..burst
    };
    assert_eq!(name(&full), "pool_exhausted");
}

#[test]
fn a_process_at_its_descriptor_limit_is_the_limit_whatever_follows() {
    let fd = Evidence {
        server_fds: 1_020.0,
        server_fd_limit: 1_024.0,
        waiting: 400.0,
        waiting_share: 0.9,
        tcp_connected_peak: 1_400.0,
        listen_overflows: 900.0,
        timeouts: 500.0,
        ..calm()
    };
    let v = verdict(&fd);
    assert_eq!(v.name, "descriptor_limit", "{}", v.says);
    assert!(v.says.contains("1,020 of its 1,024"), "{}", v.says);
    // 30 short of the limit is not at it.
    let near = Evidence {
        server_fds: 994.0,
        waiting: 0.0,
        waiting_share: 0.0,
        listen_overflows: 0.0,
        timeouts: 0.0,
        ..fd
    };
    assert_eq!(name(&near), "no_limit");
    // An unknown limit (0) is never reached.
    let unknown = Evidence {
        server_fd_limit: 0.0,
        ..near
    };
    assert_eq!(name(&unknown), "no_limit");
}

#[test]
fn memory_and_network_have_their_own_evidence() {
    let mem = Evidence {
        mem_available_frac: 0.02,
        ..calm()
    };
    assert_eq!(name(&mem), "memory");
    let net = Evidence {
        retransmits: 5_000.0,
        error_rate: 0.03,
        ..calm()
    };
    assert_eq!(name(&net), "network");
    // Retransmits with a run that failed nothing are some other socket's.
    let elsewhere = Evidence {
        error_rate: 0.0,
        ..net.clone()
    };
    assert_eq!(name(&elsewhere), "no_limit");
    // Retransmits beside a stronger cause are its effect.
    let both = Evidence {
        server_cpu_sys_pct: 95.0,
        server_busiest_thread_pct: 96.0,
        ..net
    };
    assert_eq!(name(&both), "cpu_kernel");
}

#[test]
fn the_generator_at_its_limit_is_client_bound_and_mixed_beside_a_server_limit() {
    let gen = Evidence {
        generator_limits: vec!["its workers used at least 90% of a core".into()],
        ..calm()
    };
    let v = verdict(&gen);
    assert_eq!(v.name, "client_bound", "{}", v.says);
    assert!(v.says.contains("the generator was the limit"), "{}", v.says);
    // A generator at its limit leaves replies unread: what looks like waiting connections is
    // its own, no pool of the server's.
    let unread = Evidence {
        waiting: 49.0,
        waiting_share: 1.0,
        ..gen.clone()
    };
    assert_eq!(name(&unread), "client_bound");
    // Both at a limit: say both, guess neither.
    let both = Evidence {
        server_cpu_user_pct: 96.0,
        server_busiest_thread_pct: 96.0,
        ..gen
    };
    let v = verdict(&both);
    assert_eq!(v.name, "mixed", "{}", v.says);
    assert_eq!(v.candidates, ["cpu_user", "client_bound"]);
    // Two causes of the server's own: its CPU and its descriptors.
    let fd_cpu = Evidence {
        server_fds: 1_024.0,
        server_cpu_sys_pct: 95.0,
        server_busiest_thread_pct: 96.0,
        ..calm()
    };
    assert_eq!(
        verdict(&fd_cpu).candidates,
        ["descriptor_limit", "cpu_kernel"]
    );
}

#[test]
fn the_generators_limits_each_have_a_reason() {
    let calm = GeneratorSection {
        workers: 1,
        worker_cpu_pct: 40.0,
        busy_intervals_pct: 10.0,
        lag_us: headroom_format::summary::Latency {
            count: 1_000,
            p99: 900,
            ..Default::default()
        },
        ..Default::default()
    };
    assert!(generator_limits(&calm, 100, Some(100.0)).is_empty());
    let busy = GeneratorSection {
        busy_intervals_pct: 80.0,
        worker_cpu_pct: 96.0,
        ..calm.clone()
    };
    let why = generator_limits(&busy, 100, None);
    assert!(
        why.len() == 1 && why[0].contains("80% of the intervals"),
        "{why:?}"
    );
    // Starved: a third of a core used, the rest of the time waiting for one.
    let starved = GeneratorSection {
        busy_intervals_pct: 100.0,
        worker_cpu_pct: 33.0,
        worker_wait_pct: 62.0,
        ..calm.clone()
    };
    assert!(generator_limits(&starved, 100, None)[0].contains("waited 62%"));
    // Behind its schedule in most intervals.
    let late = GeneratorSection {
        late_intervals_pct: 80.0,
        lag_us: headroom_format::summary::Latency {
            count: 1_000,
            p99: 25_000,
            ..Default::default()
        },
        ..calm.clone()
    };
    let why = generator_limits(&late, 100, None);
    assert!(
        why[0].contains("in 80% of the intervals") && why[0].contains("p99 25 ms"),
        "{why:?}"
    );
    // One burst of a thousand starts, 17 ms late at its tail, in one interval of ten: no
    // evidence.
    let burst = GeneratorSection {
        late_intervals_pct: 10.0,
        lag_us: headroom_format::summary::Latency {
            count: 1_021,
            p99: 17_071,
            ..Default::default()
        },
        ..calm.clone()
    };
    assert!(generator_limits(&burst, 100, None).is_empty());
    assert!(generator_limits(&calm, 700, Some(1_000.0))[0].contains("700 of the 1,000"));
    let dropped = GeneratorSection {
        arrivals_dropped: 12,
        local_resource_errors: 3,
        ..calm
    };
    // A phase's max_users is the scenario's cap, not the generator's limit.
    let limits = generator_limits(&dropped, 100, None);
    assert_eq!(limits.len(), 1, "{limits:?}");
    assert!(limits[0].contains("3 connects failed"), "{limits:?}");
}

#[test]
fn gather_reads_the_busiest_samples_and_sums_the_kernels_counters() {
    let sample = |cpu: f64, fds: u64, overflows: u64| {
        let mut s = Sample {
            cpu_user_pct: cpu,
            cpu_sys_pct: 1.0,
            threads: 4,
            threads_running: 1,
            fds_max_process: fds,
            fd_limit: 1024,
            ..Default::default()
        };
        s.machine.mem_total_bytes = 1000;
        s.machine.mem_available_bytes = 500;
        s.kernel.listen_overflows = overflows;
        s.accept_queue = overflows * 2;
        s.accept_backlog = 8;
        s.listeners = 1;
        s
    };
    // A ramp: quiet, then busy at its end.
    let samples: Vec<Sample> = (0..10)
        .map(|i| sample(10.0 * i as f64, 100 + i, 2))
        .collect();
    let summary = RunSummary {
        tcp_connected_peak: 50,
        connections_peak: 40,
        responses: 1_000,
        ..Default::default()
    };
    let ev = Evidence::gather(&summary, &samples, 0.5, 2.0);
    assert_eq!(
        ev.server_cpu_user_pct, 80.0,
        "the 90th percentile, not the mean"
    );
    assert_eq!((ev.server_fds, ev.server_fd_limit), (109.0, 1024.0));
    assert_eq!(ev.listen_overflows, 20.0);
    assert_eq!(ev.waiting, 10.0);
    assert_eq!(ev.mem_available_frac, 0.5);
    assert_eq!(ev.waiting_share, 0.5);
    assert!(ev.accept_queue_known);
    assert_eq!((ev.accept_queue_share, ev.accept_queue_max), (1.0, 4.0));
    assert_eq!(ev.accept_backlog, 8.0);
    assert_eq!(Evidence::gather(&summary, &[], 0.0, 2.0).samples, 0);
}

#[test]
fn offered_arrivals_integrate_the_phases_the_run_lived_through() {
    use headroom_core::session::ArrivalPhase;
    use headroom_core::ArrivalProcess;
    use std::time::Duration;
    let phase = |secs: u64, from: f64, to: f64| ArrivalPhase {
        duration: Duration::from_secs(secs),
        from,
        to,
        process: ArrivalProcess::Poisson,
        max_users: None,
    };
    let mut plan = crate::summary::test_plan();
    plan.model = LoadModel::Sessions {
        users: 0,
        phases: vec![phase(10, 10.0, 10.0), phase(10, 0.0, 20.0)],
    };
    assert_eq!(offered_arrivals(&plan, 20.0), Some(200.0));
    // Cut short 5 s into the ramp: 100 + (0 + 10) / 2 × 5.
    assert_eq!(offered_arrivals(&plan, 15.0), Some(125.0));
    plan.model = LoadModel::Rate {
        connections: 4,
        rate: 100.0,
    };
    assert_eq!(offered_arrivals(&plan, 10.0), None);
}

#[test]
fn the_verdict_at_a_break_reads_the_run_up_to_it() {
    // poll over a ramp of slow clients: CPU-bound in the kernel from the 5th second (its
    // break), at its descriptor limit from the 9th, where the generator also ran short of
    // local ports.
    let samples: Vec<Sample> = (1..=12)
        .map(|t| {
            let mut s = Sample {
                t_s: t as f64,
                cpu_sys_pct: if t >= 4 { 99.0 } else { 30.0 },
                busiest_thread_cpu_pct: if t >= 4 { 99.0 } else { 30.0 },
                fds_max_process: if t >= 9 { 20_000 } else { 1_000 * t },
                fd_limit: 20_000,
                ..Default::default()
            };
            s.machine.cores = 2;
            s.machine.mem_total_bytes = 100;
            s.machine.mem_available_bytes = 90;
            s
        })
        .collect();
    let lines: Vec<IntervalLine> = (0..12)
        .map(|k| {
            let mut l = IntervalLine {
                index: k,
                t_s: k as f64,
                length_s: 1.0,
                responses: 1_000,
                generator_cpu_pct: 10.0,
                ..Default::default()
            };
            if k >= 9 {
                l.errors.local_resource = 30;
            }
            l
        })
        .collect();
    let whole = RunSummary {
        responses: 12_000,
        generator: GeneratorSection {
            workers: 1,
            limits: vec!["90 connects failed for want of a local port or descriptor".into()],
            ..Default::default()
        },
        ..Default::default()
    };
    let v = verdict(&Evidence::gather(&whole, &samples, 0.0, 2.0));
    assert_eq!(v.name, "mixed", "{}", v.says);
    assert_eq!(
        v.candidates,
        ["descriptor_limit", "cpu_kernel", "client_bound"]
    );
    // Up to the break (the 6th interval's end): the kernel's CPU alone.
    let at = Evidence::gather_until(&whole, &samples, &lines[..6], 2.0);
    assert_eq!(at.samples, 6, "the samples up to 6.5 s");
    assert!(at.generator_limits.is_empty(), "{:?}", at.generator_limits);
    let v = verdict(&at);
    assert_eq!(v.name, "cpu_kernel", "{}", v.says);
    // The window's own generator figures: short of ports in its last intervals.
    let late = Evidence::gather_until(&whole, &samples, &lines, 2.0);
    assert!(
        late.generator_limits[0].contains("90 connects"),
        "{:?}",
        late.generator_limits
    );
}
