//! Schedules as pure functions: who gets what share, when the k-th send of a paced user is due,
//! and how far apart arrivals are. Nothing here sleeps or reads a clock, so every rule is tested
//! from a table (STYLE lesson 4).

use std::time::Duration;

use headroom_core::{ArrivalProcess, Distribution};

/// Worker `i`'s share of `total` when split over `n` workers: as even as possible, the first
/// `total % n` workers taking one more. The shares add up to `total` exactly.
pub fn share(total: u64, n: usize, i: usize) -> u64 {
    let n = n.max(1) as u64;
    let i = i as u64;
    total / n + u64::from(i < total % n)
}

/// The global index of worker `i`'s first user when `total` users are split by [`share`].
pub fn first_index(total: u64, n: usize, i: usize) -> u64 {
    (0..i).map(|j| share(total, n, j)).sum()
}

/// Offset from the start of the run at which user `g` (of `conns`) sends its `k`-th request
/// (k from 0) in a constant-throughput run of `rate` requests/s. Users are interleaved so that
/// together they send evenly every `1/rate` seconds: user g owns slots g, g+conns, g+2*conns...
pub fn rate_offset(g: u64, k: u64, conns: u64, rate: f64) -> Duration {
    let slot = g as f64 + k as f64 * conns as f64;
    secs(slot / rate)
}

/// The gap before the next arrival on one worker, for a worker arrival rate `rate` (users/s)
/// and a uniform variate `u` (ignored for constant arrivals).
pub fn arrival_gap(process: ArrivalProcess, rate: f64, u: f64) -> Duration {
    let mean = secs(1.0 / rate);
    match process {
        ArrivalProcess::Constant => mean,
        ArrivalProcess::Poisson => Distribution::Exponential { mean }.sample(u),
    }
}

/// Offset of worker `i`'s first arrival (of `n` workers, global rate `rate`): constant arrivals
/// are staggered so the merged stream is evenly spaced; Poisson streams need no offset (a sum of
/// independent Poisson processes is Poisson), so their first gap is drawn like any other.
pub fn first_arrival(process: ArrivalProcess, rate: f64, n: usize, i: usize, u: f64) -> Duration {
    match process {
        ArrivalProcess::Constant => secs(i as f64 / rate),
        ArrivalProcess::Poisson => arrival_gap(process, rate / n.max(1) as f64, u),
    }
}

fn secs(s: f64) -> Duration {
    headroom_core::secs_saturating(s, 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_and_differ_by_at_most_one() {
        for total in [0u64, 1, 2, 7, 10, 1001] {
            for n in 1..6 {
                let s: Vec<u64> = (0..n).map(|i| share(total, n, i)).collect();
                assert_eq!(s.iter().sum::<u64>(), total, "{total} over {n}");
                let (mn, mx) = (s.iter().min().unwrap(), s.iter().max().unwrap());
                assert!(mx - mn <= 1);
                assert_eq!(first_index(total, n, n - 1) + s[n - 1], total);
            }
        }
    }

    #[test]
    fn rate_slots_are_evenly_interleaved() {
        // 4 users at 1000/s: the merged sends are exactly 1 ms apart.
        let mut all: Vec<Duration> = (0..4)
            .flat_map(|g| (0..25).map(move |k| rate_offset(g, k, 4, 1000.0)))
            .collect();
        all.sort();
        for (i, t) in all.iter().enumerate() {
            let want = Duration::from_micros(1000 * i as u64);
            let diff = t.abs_diff(want);
            assert!(diff < Duration::from_nanos(10), "slot {i}: {t:?}");
        }
    }

    #[test]
    fn arrival_gaps() {
        assert_eq!(
            arrival_gap(ArrivalProcess::Constant, 50.0, 0.9),
            Duration::from_millis(20)
        );
        // Poisson gap at u = 1 - 1/e is exactly the mean.
        let g = arrival_gap(ArrivalProcess::Poisson, 50.0, 1.0 - (-1.0f64).exp());
        assert!(g.abs_diff(Duration::from_millis(20)) < Duration::from_nanos(100));
        assert_eq!(
            first_arrival(ArrivalProcess::Constant, 100.0, 2, 1, 0.5),
            Duration::from_millis(10)
        );
    }
}
