//! Requests as streams of one connection: a URL run's streams kept up to `--streams` (`fill`),
//! a batch's requests sent as the protocol's own (`submit_batch`), the pace of sends at a rate,
//! and what follows a read. Every request in flight is a slot of the user's in-flight table
//! (`flight.rs`); what a protocol does with it is behind `Protocol`'s `open` and `submit`.

use std::time::Instant;

use headroom_core::{LoadModel, ProtoCounter};

use super::users::Sending;
use super::{State, User, Wake, Worker};
use crate::browser::{self, BrowserConfig};
use crate::flight::{self, Refill, Slot};
use crate::pacer;
use headroom_proto::http1::Parts;

impl User {
    /// Opens a stream for the run's request on this user's connection, with the cookies its
    /// jar holds for the request's path: the stream's id.
    fn open(&mut self, req: Parts<'_>, cfg: Option<&BrowserConfig>, unix: u64) -> Option<u32> {
        let cookie = match (cfg, self.browser.as_deref_mut()) {
            (Some(cfg), Some(a)) => a.cookie_value(cfg, req.target(), unix),
            _ => None,
        };
        self.protocol.open(req, cookie)
    }
}

impl Worker {
    /// Users refill per reply (`Refill::PerReply`): each keeps up to `--streams` requests in
    /// flight, each answered and timed on its own. Otherwise a user sends a batch and waits for
    /// all of it.
    pub(super) fn per_reply(&self) -> bool {
        self.refill == Refill::PerReply
    }

    /// Tops up the user's in-flight table as the run's policy says (`Refill`), for every
    /// protocol, closed, paced or open: per reply, open streams up to the connection's capacity
    /// (connecting first); when empty, a batch goes if the user is between batches.
    /// `intended` is when these requests were meant to go (at a rate: their pace slots).
    pub(super) fn fill(&mut self, key: usize, intended: Instant) {
        // At a rate a batch goes only when a send fell due.
        let paced_idle = self.pace().is_some() && self.users[key].due == 0;
        let u = &mut self.users[key];
        match self.refill {
            Refill::PerReply if u.conn.is_some() => self.fill_streams(key, intended),
            Refill::PerReply => {
                // Streams are opened (and take their quota) one by one once connected.
                u.intended = intended;
                u.batch = 0;
                self.connect(key);
            }
            Refill::WhenEmpty if matches!(u.state, State::Idle | State::Waiting) && !paced_idle => {
                self.start_batch(key, intended)
            }
            Refill::WhenEmpty => {}
        }
    }

    /// Open streams up to the connection's capacity (and the server's limit) while the user's quota and the
    /// run's budget allow; `intended` is when these requests were meant to go. A user left with
    /// nothing in flight and nothing to send is done.
    fn fill_streams(&mut self, key: usize, intended: Instant) {
        // Borrowed, not cloned: an Arc clone per send would bounce its count between workers.
        let Some(req) = self.s.request.get(0) else {
            return;
        };
        let now = Instant::now();
        let pace = self.pace();
        let cfg = self.browser_cfg.as_deref();
        let u = &mut self.users[key];
        let streams = u.protocol.capacity();
        // The cookies' clock, read once per fill and only by a user that has a jar.
        let unix = u.browser.as_ref().map_or(0, |_| browser::unix_now());
        // Refused requests first: they were counted against quotas and the pace when they
        // first went, and keep their intended time.
        while !u.refused.is_empty() && u.flight.len() < streams && u.protocol.can_open() {
            let Some(stream) = u.open(req, cfg, unix) else {
                break;
            };
            u.flight.push(Slot {
                stream,
                intended: u.refused.pop().map_or(now, |r| r.intended),
                sent: now,
                index: 0,
                again: true,
            });
            self.rec.counters.requests += 1;
            self.rec.counters.proto(ProtoCounter::H2Resent, 1);
        }
        while u.flight.len() < streams && u.protocol.can_open() {
            if u.remaining == Some(0) || self.budget == Some(0) {
                break;
            }
            if pace.is_some() && u.due == 0 {
                break;
            }
            let Some(stream) = u.open(req, cfg, unix) else {
                break;
            };
            let intended = match pace {
                // At a rate each stream's request was meant for its own pace slot: latency runs
                // from there, however long it waited for a free stream (coordinated omission).
                Some((start, conns, rate)) => {
                    let at = start + pacer::rate_offset(u.global, u.sent_seq, conns, rate);
                    u.due -= 1;
                    u.sent_seq += 1;
                    at
                }
                None => intended,
            };
            u.flight.push(Slot {
                stream,
                intended,
                sent: now,
                index: 0,
                again: false,
            });
            if let Some(r) = u.remaining.as_mut() {
                *r -= 1;
            }
            if let Some(b) = self.budget.as_mut() {
                *b -= 1;
            }
            self.rec.counters.requests += 1;
        }
        if u.flight.is_empty() {
            let refused = !u.refused.is_empty();
            if !refused && (u.remaining == Some(0) || self.budget == Some(0)) {
                self.user_done(key);
            } else if !refused && pace.is_some() && u.due == 0 {
                // At a rate, nothing due: wait for the next pace tick.
                u.state = State::Idle;
                u.deadline = None;
            } else {
                // GOAWAY (or ids exhausted): this connection takes no more streams.
                self.close(key);
                let wake = if pace.is_some() {
                    Wake::Next
                } else {
                    Wake::Send
                };
                self.schedule(key, now, wake);
            }
            return;
        }
        if u.state != State::Reading {
            u.state = State::Reading;
            u.sent = now;
        }
        // From the oldest stream's send, however much the server sends meanwhile (PINGs kept
        // a request alive for ever before issue 26).
        u.deadline = flight::oldest_sent(&u.flight).map(|t| t + self.s.plan.timeout);
        self.flush_proto(key);
    }

    /// The batch (a session's requests, a URL run's request or the browser's hop, encoded as
    /// HTTP/1.1) goes out as the protocol's own requests, all in flight at once.
    pub(super) fn submit_batch(&mut self, key: usize) {
        let now = Instant::now();
        let u = &mut self.users[key];
        let batch = Sending::of(&u.sess, &u.browser, u.own_request, u.batch, &self.s.request);
        let intended = u.intended;
        // The batch's requests the server refused unprocessed go again, alone; otherwise all.
        let again = !u.refused.is_empty();
        let refused = &u.refused;
        let flight = &mut u.flight;
        // Room for the batch exactly (a push into an empty Vec would take room for 4).
        flight.reserve_exact(u.batch as usize);
        let sent = u.protocol.submit(
            batch.requests(),
            &|i| !again || refused.iter().any(|r| r.index as usize == i),
            &mut |index, stream| {
                flight.push(Slot {
                    stream,
                    intended,
                    sent: now,
                    index: index as u32,
                    again,
                })
            },
        );
        u.refused.clear();
        u.sent = now;
        let went = u.flight.len() as u64;
        self.rec.counters.requests += went;
        if again {
            self.rec.counters.proto(ProtoCounter::H2Resent, went);
        }
        if let Err(kind) = sent {
            self.fail(key, kind, now);
            return;
        }
        u.written = 0;
        u.state = State::Reading;
        u.deadline = Some(now + self.s.plan.timeout);
        self.flush_proto(key);
    }

    /// At a rate (`--rate`): the pace's start and parameters; `None` otherwise. Each user keeps
    /// its own pace of sends whatever its requests are doing: a send falls due at its slot and
    /// goes when the in-flight table has room (a free stream; an answered batch), timed from
    /// its slot however late it goes (coordinated omission), so a late reply delays no later
    /// slot.
    pub(super) fn pace(&self) -> Option<(Instant, u64, f64)> {
        match self.s.plan.model {
            LoadModel::Rate { connections, rate } => {
                Some((self.s.start, u64::from(connections), rate))
            }
            _ => None,
        }
    }

    /// At a rate: one more send of this user fell due; schedule the next tick and send
    /// what a free stream allows.
    pub(super) fn pace_tick(&mut self, key: usize) {
        let Some((start, conns, rate)) = self.pace() else {
            return;
        };
        let u = &mut self.users[key];
        let left = u
            .remaining
            .map_or(u64::MAX, |r| r.saturating_sub(u64::from(u.due)));
        if left == 0 || self.budget == Some(0) {
            // Nothing more will fall due: a user with nothing under way goes on as after a
            // reply (`next_request`: done, or what is still due); one that is busy does so
            // when its requests are answered.
            if u.state == State::Idle && u.flight.is_empty() && u.refused.is_empty() {
                self.next_request(key, Instant::now());
            }
            return;
        }
        u.due += 1;
        u.seq += 1;
        if left > 1 {
            let at = start + pacer::rate_offset(u.global, u.seq, conns, rate);
            self.schedule_pace(key, at);
        }
        self.kick(key);
    }

    /// At a rate: send what fell due (`fill`), connecting first if needed. A user waiting on a
    /// timer (a retry) or a connection being set up is left alone: it goes on from there.
    /// Streams fill the free ones; a batch goes once the last one is answered, timed from its
    /// own slot.
    pub(super) fn kick(&mut self, key: usize) {
        let u = &mut self.users[key];
        match u.state {
            State::Waiting | State::Connecting | State::Tls | State::Handshake => {}
            _ if u.conn.is_some() || u.due > 0 || !u.refused.is_empty() => {
                self.fill(key, Instant::now())
            }
            _ => {}
        }
    }

    /// After a read's outcomes: keep the streams going, and write what the protocol and the
    /// new requests put out in one go (a link's answers went out as they came, in `feed`).
    pub(super) fn after_read(&mut self, key: usize) {
        let now = Instant::now();
        let paced = self.pace().is_some();
        let per_reply = self.per_reply();
        let u = &mut self.users[key];
        let gen = u.gen;
        if !per_reply {
            // A batch goes on from each reply (complete_reply): only the protocol's own bytes
            // to send, and the batch's refused requests once the rest of it is answered.
            if !u.refused.is_empty() && u.state == State::Reading && u.flight.is_empty() {
                // On this connection if it still opens streams (`write_request`).
                self.write_request(key);
            }
            if self
                .users
                .get(key)
                .is_some_and(|u| u.gen == gen && u.state != State::Writing)
            {
                self.flush_proto(key);
            }
            return;
        }
        let idle = u.flight.is_empty();
        let goaway = u.protocol.going_away();
        let oldest = flight::oldest_sent(&u.flight);
        if paced || matches!(self.s.plan.model, LoadModel::Closed { think: None, .. }) {
            // Each answered stream is replaced at once (the closed model's next request), or
            // by a send that fell due meanwhile (at a rate).
            self.fill(key, now);
        } else if idle && !u.refused.is_empty() {
            // Refused requests go again at once, not after a think time.
            self.fill(key, now);
        } else if idle {
            u.state = State::Idle;
            u.deadline = None;
            if goaway {
                self.close(key);
            }
            self.next_request(key, now);
        } else {
            u.deadline = oldest.map(|t| t + self.s.plan.timeout);
        }
        if self.users.get(key).is_some_and(|u| u.gen == gen) {
            self.flush_proto(key);
        }
    }
}
