//! What one sample of a server costs the sampler: `sample_cost PID [SAMPLES [PORT]]` samples the
//! tree of PID (and the accept queue of its listener on PORT) back to back (default 200 times)
//! and prints the sampler's own CPU time per sample and
//! what that is, in percent of one core, at one sample a second (the lab's default interval).
//! bench/monitor-cost.sh runs it against servers with many threads and many connections.

use std::time::Instant;

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct we pass; RUSAGE_SELF has no other precondition.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(pid) = args.get(1).and_then(|p| p.parse::<u32>().ok()) else {
        eprintln!("usage: sample_cost PID [SAMPLES [PORT]]");
        std::process::exit(2);
    };
    let n: u32 = match args.get(2).map(|v| v.parse()) {
        None => 200,
        Some(Ok(v)) if (1..=100_000).contains(&v) => v,
        Some(_) => {
            eprintln!("sample_cost: SAMPLES must be 1-100000");
            std::process::exit(2);
        }
    };
    let mut s = headroom_monitor::Sampler::new(pid);
    match args.get(3).map(|v| v.parse::<u16>()) {
        None => {}
        Some(Ok(port)) => s = s.listen_port(port),
        Some(Err(_)) => {
            eprintln!("sample_cost: PORT must be 1-65535");
            std::process::exit(2);
        }
    }
    let first = match s.sample() {
        Ok(x) => x,
        Err(e) => {
            eprintln!("sample_cost: {e}");
            std::process::exit(1);
        }
    };
    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    for _ in 0..n {
        if let Err(e) = s.sample() {
            eprintln!("sample_cost: {e}");
            std::process::exit(1);
        }
    }
    let cpu = (cpu_seconds() - cpu0) / n as f64;
    let wall = t0.elapsed().as_secs_f64() / n as f64;
    println!(
        "pid {pid}: {} processes, {} threads, {} descriptors; {n} samples: {:.3} ms CPU ({:.3} ms wall) each = {:.3}% of a core at 1 sample/s",
        first.processes,
        first.threads,
        first.fds,
        cpu * 1e3,
        wall * 1e3,
        cpu * 100.0
    );
}
