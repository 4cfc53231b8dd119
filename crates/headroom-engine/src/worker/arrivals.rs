//! Arrivals: users made and started (a closed population at start, an open model's or a
//! scenario phase's arrivals, a ramp's starts and leaves), their pacing slots, and the timer
//! each waits on.

use std::cmp::Reverse;
use std::time::{Duration, Instant};

use headroom_core::{ArrivalProcess, LoadModel};
use headroom_proto::http1::{ResponseDecoder, DEFAULT_CAPTURE_BYTES};
use rand::Rng;

use super::{Net, State, Timer, User, Wake, Worker, NO_RAMP, TIMER_BATCH};
use crate::pacer;
use crate::protocol::Protocol;
use crate::ramp::{Change, RampState};
use crate::session::SessionState;

impl Worker {
    pub(super) fn rate_offset(&self, g: u64, k: u64) -> Duration {
        match self.s.plan.model {
            LoadModel::Rate { connections, rate } => {
                pacer::rate_offset(g, k, u64::from(connections), rate)
            }
            _ => Duration::ZERO,
        }
    }

    /// A scenario user (closed, or arrived in a phase) whose session starts at `at`; its key.
    pub(super) fn spawn_session_user(
        &mut self,
        global: u64,
        arrived: bool,
        at: Instant,
    ) -> Option<usize> {
        let prog = self.s.program.clone()?;
        let key = self.add_user(global, None);
        let fixed = if arrived {
            None
        } else {
            prog.w.population_session(global)
        };
        let session = fixed.unwrap_or_else(|| prog.w.draw(self.rng.gen::<f64>()));
        let mut st = Box::new(SessionState::new(&prog, global));
        st.begin(&prog, session, &mut self.rng, at);
        let u = &mut self.users[key];
        u.sess = Some(st);
        u.arrived = arrived;
        if arrived {
            self.open_alive += 1;
        }
        self.rec.counters.users_started += 1;
        self.schedule(key, at, Wake::Next);
        Some(key)
    }

    /// A `once` user: session `session` from `at` (it sleeps until then), then it leaves.
    pub(super) fn spawn_once_user(&mut self, global: u64, session: usize, at: Instant) {
        let Some(prog) = self.s.program.clone() else {
            return;
        };
        let key = self.add_user(global, None);
        let mut st = Box::new(SessionState::new(&prog, global));
        st.begin(&prog, session, &mut self.rng, at);
        let u = &mut self.users[key];
        u.sess = Some(st);
        u.once = true;
        self.rec.counters.users_started += 1;
        self.schedule(key, at, Wake::Next);
    }

    /// The next arrival after `from` over the phases, moving to later phases as they begin.
    /// Poisson phases with a ramp use thinning (candidates at the peak rate, each kept with
    /// probability rate(t)/peak), which gives an exact non-homogeneous Poisson process.
    pub(super) fn next_phase_arrival(&mut self, from: Instant) -> Option<Instant> {
        let n = self.s.slots as f64;
        let mut t = from;
        loop {
            let ph = *self.phases.get(self.phase_idx)?;
            let end = self.phase_start + ph.duration;
            let into = |at: Instant| at.saturating_duration_since(self.phase_start).as_secs_f64();
            let gap = match ph.process {
                ArrivalProcess::Poisson => {
                    pacer::arrival_gap(ArrivalProcess::Poisson, ph.peak() / n, self.rng.gen())
                }
                ArrivalProcess::Constant => {
                    let total = ph.rate_at(into(t)).max(ph.peak() * 1e-3);
                    if self.phase_fresh {
                        // Worker i of n takes global slots i, i + n, ...: the merged stream is
                        // evenly spaced instead of n arrivals at once.
                        pacer::first_arrival(
                            ArrivalProcess::Constant,
                            total,
                            self.s.slots,
                            self.s.slot,
                            0.0,
                        )
                    } else {
                        pacer::arrival_gap(ArrivalProcess::Constant, total / n, 0.0)
                    }
                }
            };
            let cand = t + gap;
            if cand >= end {
                // Memoryless: sampling afresh from the phase boundary keeps the process exact.
                self.phase_idx += 1;
                self.phase_start = end;
                self.phase_fresh = true;
                t = end;
                continue;
            }
            self.phase_fresh = false;
            t = cand;
            if ph.process == ArrivalProcess::Poisson && ph.from != ph.to {
                let keep = ph.rate_at(into(cand)) / ph.peak();
                if self.rng.gen::<f64>() >= keep {
                    continue;
                }
            }
            return Some(cand);
        }
    }

    pub(super) fn add_user(&mut self, global: u64, remaining: Option<u64>) -> usize {
        let now = self.s.start;
        self.next_gen = self.next_gen.wrapping_add(1);
        let key = self.users.insert(User {
            conn: None,
            gen: self.next_gen,
            tgen: self.next_gen,
            net: Net::None,
            reused: false,
            replied: false,
            resent: false,
            lost_idle: false,
            state: State::Idle,
            wake: Wake::Send,
            decoder: ResponseDecoder::new(),
            remaining,
            global,
            seq: 0,
            due: 0,
            sent_seq: 0,
            pace_gen: self.next_gen,
            intended: now,
            sent: now,
            connect_start: now,
            tcp_at: now,
            deadline: None,
            batch: 0,
            written: 0,
            sess: None,
            arrived: false,
            once: false,
            protocol: Protocol::Plain,
            browser: None,
            own_request: false,
            ramp: NO_RAMP,
            tls_sessions: None,
            flight: Vec::new(),
            refused: Vec::new(),
        });
        if let Some(cfg) = &self.browser_cfg {
            self.users[key]
                .decoder
                .set_capture(cfg.capture(), DEFAULT_CAPTURE_BYTES);
        }
        key
    }

    /// A new user that starts its first request at `at`.
    pub(super) fn spawn_user(&mut self, global: u64, remaining: Option<u64>, at: Instant) {
        let key = self.add_user(global, remaining);
        self.rec.counters.users_started += 1;
        self.schedule(key, at, Wake::Send);
    }

    pub(super) fn schedule(&mut self, key: usize, at: Instant, wake: Wake) {
        self.next_gen = self.next_gen.wrapping_add(1);
        let u = &mut self.users[key];
        u.state = State::Waiting;
        u.wake = wake;
        u.deadline = None;
        u.tgen = self.next_gen;
        self.timers.push(Reverse(Timer {
            at,
            key: key as u32,
            gen: u.tgen,
            pace: false,
        }));
    }

    /// At a rate: the user's next pace tick, at `at`, whatever its state.
    pub(super) fn schedule_pace(&mut self, key: usize, at: Instant) {
        self.timers.push(Reverse(Timer {
            at,
            key: key as u32,
            gen: self.users[key].pace_gen,
            pace: true,
        }));
    }

    pub(super) fn arrivals(&mut self, now: Instant) {
        if let LoadModel::Sessions { .. } = self.s.plan.model {
            self.session_arrivals(now);
            return;
        }
        let LoadModel::Open {
            process, per_user, ..
        } = self.s.plan.model
        else {
            return;
        };
        let mut n = 0;
        while let Some(at) = self.next_arrival {
            if at > now || n >= TIMER_BATCH {
                break;
            }
            n += 1;
            if self.arrivals_left == Some(0) || self.budget == Some(0) {
                self.next_arrival = None;
                break;
            }
            if let Some(left) = self.arrivals_left.as_mut() {
                *left -= 1;
            }
            // Global user ids interleave across workers so they never collide. (Counted by the
            // worker: the recorder's counters restart every interval.)
            let g = self.arrived_total * self.s.slots as u64 + self.s.slot as u64;
            self.arrived_total += 1;
            self.rec
                .record_lag(now.saturating_duration_since(at).as_micros() as u64);
            self.spawn_user(g, Some(per_user), at);
            let gap = pacer::arrival_gap(process, self.arrival_rate, self.rng.gen::<f64>());
            self.next_arrival = Some(at + gap);
        }
    }

    fn session_arrivals(&mut self, now: Instant) {
        let mut n = 0;
        while let Some(at) = self.next_arrival {
            if at > now || n >= TIMER_BATCH {
                break;
            }
            n += 1;
            if self.budget == Some(0) {
                self.next_arrival = None;
                break;
            }
            self.rec
                .record_lag(now.saturating_duration_since(at).as_micros() as u64);
            let cap = self.phases[self.phase_idx]
                .max_users
                .map(|m| pacer::share(m, self.s.slots, self.s.slot).max(1));
            if cap.is_some_and(|c| self.open_alive >= c) {
                self.rec.counters.users_dropped += 1;
            } else {
                let g = self.arrived_total * self.s.slots as u64 + self.s.slot as u64 + (1 << 40);
                self.arrived_total += 1;
                self.spawn_session_user(g, true, at);
            }
            self.next_arrival = self.next_phase_arrival(at);
        }
    }
}

/// The ramp of a closed population (`Plan::ramp`): the schedule is `ramp.rs`; here users are
/// started when it says and told to leave by it (lazily: a user checks when next free).
impl Worker {
    pub(super) fn ramp_init(&mut self) {
        let plan = self.s.plan.clone();
        let pops: Vec<u64> = match (&plan.model, &plan.workload) {
            (LoadModel::Sessions { .. }, Some(w)) => {
                w.populations.iter().map(|p| u64::from(p.0)).collect()
            }
            (LoadModel::Closed { users, .. }, _) => vec![u64::from(*users)],
            _ => return,
        };
        let st = RampState::new(&plan.ramp, &pops, self.s.slot, self.s.slots);
        self.ramp_keys = vec![None; st.order.len()];
        self.ramp = Some(Box::new(st));
    }

    /// When the ramp next starts or stops a user of this worker.
    pub(super) fn ramp_next(&self) -> Option<Instant> {
        let r = self.ramp.as_ref()?;
        Some(self.s.start + r.next_at()?)
    }

    /// Apply the ramp's changes due by `now`: start the users it wants (at their scheduled
    /// instant, the origin of their first request's latency).
    pub(super) fn ramp_tick(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.s.start);
        for _ in 0..TIMER_BATCH {
            let Some(r) = self.ramp.as_mut() else {
                return;
            };
            if self.budget == Some(0) {
                r.end();
                return;
            }
            let Some(change) = r.due(elapsed) else {
                return;
            };
            let Change::Start { idx, at } = change else {
                // A user told to leave does so when it is next free (`ramp_leaves`).
                continue;
            };
            if self.ramp_keys[idx].is_some() {
                // Told to leave and wanted again before it left: it simply stays.
                continue;
            }
            let g = r.order[idx].1;
            let at = self.s.start + at;
            let key = match (&self.s.plan.model, self.s.program.is_some()) {
                (LoadModel::Closed { per_user, .. }, _) => {
                    let per_user = *per_user;
                    let key = self.add_user(g, per_user);
                    self.rec.counters.users_started += 1;
                    self.schedule(key, at, Wake::Send);
                    key
                }
                (_, true) => match self.spawn_session_user(g, false, at) {
                    Some(key) => key,
                    None => continue,
                },
                _ => continue,
            };
            self.users[key].ramp = idx as u32;
            self.ramp_keys[idx] = Some(key as u32);
        }
    }

    /// A ramped user no longer wanted: it leaves now, at a point where it is free to.
    pub(super) fn ramp_leaves(&self, key: usize) -> bool {
        let idx = self.users[key].ramp;
        idx != NO_RAMP && self.ramp.as_ref().is_some_and(|r| idx as usize >= r.wanted)
    }
}
