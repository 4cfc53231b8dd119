//! Ramps of a closed population (`--ramp-up`, a scenario's `stages:`; k6's ramping-vus) as pure
//! functions: nothing here sleeps or reads a clock (STYLE lesson 4).
//!
//! The stages draw a level `c(t)`: linear from where the previous stage ended (0 before the
//! first) to each stage's `users` over its duration, held after the last. Every closed user of
//! the run has a *rank* `r` in `0..N`, and the user is wanted exactly while `c(t) > r`. So on
//! a rise from `a` to `b` over `d`, rank `r` (`a <= r < b`) starts at `d·(r-a)/(b-a)` into the
//! stage — `--ramp-up D` with `N` users starts rank `g` at `D·g/N` — and on a fall from `a` to
//! `b` rank `r` (`b <= r < a`) is told to leave at `d·(a-r)/(a-b)`: the highest rank first.
//!
//! Ranks are global, over every worker of every agent, so the whole run starts evenly however it
//! is split. Each worker owns the closed users `slot, slot + slots, ...` (strided, so every
//! worker starts users all through the ramp rather than one after another), and with several
//! populations the ranks interleave them in proportion (`rank`), so a run at half its peak has
//! half of every population.
//!
//! A user wanted at a rank is a prefix of the worker's own ranks at any instant, so a worker's
//! whole ramp state is the length of that prefix and where on the stages it is ([`RampState`]).
//! A crossing is found by stage index first and time second: a rank crosses at most once per
//! stage, so a fall to exactly `r` and a rise from `r` at the same instant stay two ordered
//! events, and no event is ever found twice.

use std::time::Duration;

use headroom_core::RampStage;

/// A point on the stages: `at` from the start of the run, within stage `stage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct RampPos {
    pub stage: usize,
    pub at: Duration,
}

/// The level of the stages `t` after the start: how many users are wanted, as a real number.
pub fn level(stages: &[RampStage], t: Duration) -> f64 {
    let (mut from, mut start) = (0.0, Duration::ZERO);
    for s in stages {
        let to = f64::from(s.users);
        let end = start + s.duration;
        if t < end {
            let f = (t - start).as_secs_f64() / s.duration.as_secs_f64();
            return from + (to - from) * f;
        }
        from = to;
        start = end;
    }
    from
}

/// The first crossing of rank `r` in direction `up` (true: it becomes wanted; false: it is told
/// to leave) in stage `from.stage` or later; `None` if it never crosses that way again.
pub fn cross(stages: &[RampStage], r: u64, up: bool, from: RampPos) -> Option<RampPos> {
    let r = r as f64;
    let mut start: Duration = stages[..from.stage.min(stages.len())]
        .iter()
        .map(|s| s.duration)
        .sum();
    for (k, s) in stages.iter().enumerate().skip(from.stage) {
        let a = if k == 0 {
            0.0
        } else {
            f64::from(stages[k - 1].users)
        };
        let b = f64::from(s.users);
        let frac = if up && a <= r && r < b {
            Some((r - a) / (b - a))
        } else if !up && b <= r && r < a {
            Some((a - r) / (a - b))
        } else {
            None
        };
        if let Some(f) = frac {
            let at = start + secs(s.duration.as_secs_f64() * f);
            return Some(RampPos { stage: k, at });
        }
        start += s.duration;
    }
    None
}

/// The rank of closed user `g` when the users are the populations `pops` in order (user `g`
/// belongs to the population whose range holds it). User `j` of population `p` (of `n_p`) sits
/// at `(2j+1)/(2·n_p)` on [0, 1); ranks are the order of these points, ties to the earlier
/// population. Every prefix of ranks therefore holds each population in proportion, within one
/// user. A bijection of `0..N` onto itself; with one population, `rank(g) = g`.
pub fn rank(pops: &[u64], g: u64) -> u64 {
    let mut offset = 0u64;
    let mut found = None;
    for (p, &n) in pops.iter().enumerate() {
        if g < offset + n {
            found = Some((p, g - offset));
            break;
        }
        offset += n;
    }
    let Some((p, j)) = found else {
        return g;
    };
    let np = u128::from(pops[p]);
    let mut r = 0u64;
    for (q, &nq) in pops.iter().enumerate() {
        if nq == 0 {
            continue;
        }
        // Users j' of population q with (2j'+1)/(2 n_q) < (2j+1)/(2 n_p), i.e.
        // (2j'+1)·n_p < x with x = (2j+1)·n_q: the odd numbers up to floor((x-1)/n_p).
        let x = (2 * u128::from(j) + 1) * u128::from(nq);
        let m = (x - 1) / np;
        let mut c = m.div_ceil(2);
        // Ties go to the earlier population.
        if q < p && x % np == 0 && (x / np) % 2 == 1 {
            c += 1;
        }
        r += c.min(u128::from(nq)) as u64;
    }
    r
}

/// What a worker's ramp asks for next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// The worker's `idx`-th user (in ramp order) is wanted from `at` on.
    Start { idx: usize, at: Duration },
    /// The worker's `idx`-th user is no longer wanted: it leaves when next free to.
    Stop { idx: usize },
}

/// One worker's part of a ramp: its closed users in ramp order and how many are wanted now.
#[derive(Debug, Clone)]
pub struct RampState {
    stages: Vec<RampStage>,
    /// This worker's closed users, `(rank, global id)`, by rank.
    pub order: Vec<(u64, u64)>,
    /// `order[..wanted]` are wanted now.
    pub wanted: usize,
    /// The last change applied.
    pos: RampPos,
    /// The next change, and whether it is a start.
    next: Option<(RampPos, bool)>,
}

impl RampState {
    /// Worker `slot` of `slots`: it owns the closed users `slot, slot + slots, ...` of the
    /// populations `pops` (their sizes, in order; one population for a URL run).
    pub fn new(stages: &[RampStage], pops: &[u64], slot: usize, slots: usize) -> RampState {
        let total: u64 = pops.iter().sum();
        let slots = slots.max(1) as u64;
        let mut order: Vec<(u64, u64)> = (slot as u64..total)
            .step_by(slots as usize)
            .map(|g| (rank(pops, g), g))
            .collect();
        order.sort_unstable();
        let mut st = RampState {
            stages: stages.to_vec(),
            order,
            wanted: 0,
            pos: RampPos {
                stage: 0,
                at: Duration::ZERO,
            },
            next: None,
        };
        st.next = st.find_next();
        st
    }

    /// When the next change falls due (from the start of the run); `None`: the ramp is over
    /// for this worker.
    pub fn next_at(&self) -> Option<Duration> {
        self.next.map(|(p, _)| p.at)
    }

    /// The next change if it is due `elapsed` after the start, applied.
    pub fn due(&mut self, elapsed: Duration) -> Option<Change> {
        let (pos, up) = self.next?;
        if pos.at > elapsed {
            return None;
        }
        let change = if up {
            self.wanted += 1;
            Change::Start {
                idx: self.wanted - 1,
                at: pos.at,
            }
        } else {
            self.wanted -= 1;
            Change::Stop { idx: self.wanted }
        };
        self.pos = pos;
        self.next = self.find_next();
        Some(change)
    }

    /// Stop the ramp here: nothing more starts or stops (the run's request budget is spent).
    pub fn end(&mut self) {
        self.next = None;
    }

    fn find_next(&self) -> Option<(RampPos, bool)> {
        let up = self
            .order
            .get(self.wanted)
            .and_then(|&(r, _)| cross(&self.stages, r, true, self.pos));
        let down = self
            .wanted
            .checked_sub(1)
            .and_then(|i| cross(&self.stages, self.order[i].0, false, self.pos));
        match (up, down) {
            (Some(u), Some(d)) if d < u => Some((d, false)),
            (Some(u), _) => Some((u, true)),
            (None, Some(d)) => Some((d, false)),
            (None, None) => None,
        }
    }
}

fn secs(s: f64) -> Duration {
    headroom_core::secs_saturating(s, 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(spec: &[(u64, u32)]) -> Vec<RampStage> {
        spec.iter()
            .map(|&(ms, users)| RampStage {
                duration: Duration::from_millis(ms),
                users,
            })
            .collect()
    }

    /// Every change of a worker's ramp, in order, with the wanted count after each.
    fn changes(
        stages: &[RampStage],
        pops: &[u64],
        slot: usize,
        slots: usize,
    ) -> Vec<(Change, usize, Duration)> {
        let mut s = RampState::new(stages, pops, slot, slots);
        let mut out = Vec::new();
        for _ in 0..100_000 {
            let Some(at) = s.next_at() else { break };
            let c = s.due(at).expect("due at its own time");
            out.push((c, s.wanted, at));
        }
        assert!(s.next_at().is_none(), "the ramp ends");
        out
    }

    #[test]
    fn ramp_up_starts_user_g_at_d_g_over_n() {
        let stages = st(&[(10_000, 1000)]);
        let ch = changes(&stages, &[1000], 0, 1);
        assert_eq!(ch.len(), 1000);
        for (g, (c, wanted, _)) in ch.iter().enumerate() {
            let want = Duration::from_micros(10 * g as u64 * 1000);
            match *c {
                Change::Start { idx, at } => {
                    assert_eq!(idx, g);
                    assert!(at.abs_diff(want) < Duration::from_nanos(10), "{g}: {at:?}");
                }
                other => panic!("{other:?}"),
            }
            assert_eq!(*wanted, g + 1);
        }
    }

    #[test]
    fn workers_and_agents_together_start_evenly() {
        // 1000 users over 10 s split over 3 workers x 2 agents: merged, 100 starts per second,
        // and every worker starts users all through the ramp.
        let stages = st(&[(10_000, 1000)]);
        let mut per_sec = [0u32; 10];
        for slot in 0..6 {
            let ch = changes(&stages, &[1000], slot, 6);
            let last = ch.iter().map(|c| c.2).max().unwrap();
            assert!(
                last > Duration::from_millis(9_900),
                "slot {slot} ends at {last:?}"
            );
            for (c, _, at) in ch {
                assert!(matches!(c, Change::Start { .. }));
                per_sec[at.as_secs() as usize] += 1;
            }
        }
        assert_eq!(per_sec, [100; 10]);
    }

    #[test]
    fn up_hold_down_leaves_highest_rank_first() {
        let stages = st(&[(1000, 10), (3000, 10), (1000, 0)]);
        let ch = changes(&stages, &[10], 0, 1);
        assert_eq!(ch.len(), 20);
        let peak = ch.iter().map(|c| c.1).max().unwrap();
        assert_eq!(peak, 10);
        // Rank 9 leaves 0.1 s into the fall, rank 0 at its end.
        assert_eq!(ch[10].0, Change::Stop { idx: 9 });
        assert_eq!(ch[10].2, Duration::from_millis(4100));
        assert_eq!(ch[19].0, Change::Stop { idx: 0 });
        assert_eq!(ch[19].2, Duration::from_millis(5000));
        assert_eq!(ch[19].1, 0);
        // The level agrees with the wanted count just after each change.
        for (_, wanted, at) in &ch {
            let c = level(&stages, *at + Duration::from_micros(1));
            assert_eq!(*wanted as f64, c.ceil(), "at {at:?}: level {c}");
        }
    }

    #[test]
    fn fall_and_rise_through_the_same_level_do_not_loop() {
        // 4 -> 2 -> 4: rank 2 stops at the end of the fall and starts at the start of the rise,
        // at the same instant; an instant stage jumps all at once.
        let stages = st(&[(400, 4), (400, 2), (400, 4), (0, 0), (0, 3)]);
        let ch = changes(&stages, &[4], 0, 1);
        let kinds: Vec<String> = ch
            .iter()
            .map(|(c, w, _)| match c {
                Change::Start { idx, .. } => format!("+{idx}/{w}"),
                Change::Stop { idx } => format!("-{idx}/{w}"),
            })
            .collect();
        assert_eq!(
            kinds.join(" "),
            "+0/1 +1/2 +2/3 +3/4 -3/3 -2/2 +2/3 +3/4 -3/3 -2/2 -1/1 -0/0 +0/1 +1/2 +2/3"
        );
    }

    #[test]
    fn ranks_are_a_bijection_and_interleave_populations() {
        for pops in [
            vec![10u64],
            vec![3, 7],
            vec![30, 70],
            vec![1, 1, 1],
            vec![0, 5, 0, 2],
            vec![333, 1, 666],
        ] {
            let n: u64 = pops.iter().sum();
            let mut ranks: Vec<u64> = (0..n).map(|g| rank(&pops, g)).collect();
            let by_rank = {
                let mut v: Vec<(u64, u64)> = (0..n).map(|g| (rank(&pops, g), g)).collect();
                v.sort();
                v
            };
            ranks.sort();
            assert_eq!(ranks, (0..n).collect::<Vec<_>>(), "{pops:?}");
            // Every prefix holds each population within one user of its share.
            let mut seen = vec![0u64; pops.len()];
            for (k, &(_, g)) in by_rank.iter().enumerate() {
                let mut off = 0;
                for (p, &np) in pops.iter().enumerate() {
                    if g < off + np {
                        seen[p] += 1;
                        break;
                    }
                    off += np;
                }
                for (p, &np) in pops.iter().enumerate() {
                    let share = (k as f64 + 1.0) * np as f64 / n as f64;
                    assert!((seen[p] as f64 - share).abs() <= 1.0, "{pops:?} prefix {k}");
                }
            }
        }
        assert_eq!(rank(&[10], 7), 7);
    }

    #[test]
    fn level_interpolates_and_holds() {
        let stages = st(&[(10_000, 100), (10_000, 100), (10_000, 0)]);
        assert_eq!(level(&stages, Duration::ZERO), 0.0);
        assert_eq!(level(&stages, Duration::from_secs(5)), 50.0);
        assert_eq!(level(&stages, Duration::from_secs(15)), 100.0);
        assert_eq!(level(&stages, Duration::from_secs(25)), 50.0);
        assert_eq!(level(&stages, Duration::from_secs(99)), 0.0);
    }
}
