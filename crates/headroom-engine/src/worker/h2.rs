//! HTTP/2: streams opened up to `--streams` (URL runs), a session's batch sent as streams, the
//! pace of sends at a rate, and what follows a read.

use std::time::Instant;

use headroom_core::{LoadModel, ProtoCounter};

use super::{State, Wake, Worker};
use crate::pacer;

impl Worker {
    /// HTTP/2: open streams up to `--streams` (and the server's limit) while the user's quota
    /// and the run's budget allow; `intended` is when these requests were meant to go. A user
    /// left with nothing in flight and nothing to send is done.
    pub(super) fn h2_fill(&mut self, key: usize, intended: Instant) {
        let streams = self.s.plan.http2.map_or(1, |h| h.streams) as usize;
        // Borrowed, not cloned: an Arc clone per send would bounce its count between workers.
        let Some(req) = self.s.h2req.as_deref() else {
            return;
        };
        let now = Instant::now();
        let pace = self.pace();
        let u = &mut self.users[key];
        let Some(h) = u.proto.h2() else { return };
        // Refused requests first: they were counted against quotas and the pace when they
        // first went, and keep their intended time.
        while !u.refused.is_empty() && h.slots.len() < streams && h.conn.can_open() {
            let Ok(stream) = req.send(&mut h.conn, &mut h.out) else {
                break;
            };
            h.slots.push(crate::http2::Slot {
                stream,
                intended: u.refused.pop().map_or(now, |r| r.intended),
                sent: now,
                index: 0,
                again: true,
            });
            self.rec.counters.requests += 1;
            self.rec.counters.proto(ProtoCounter::H2Resent, 1);
        }
        while h.slots.len() < streams && h.conn.can_open() {
            if u.remaining == Some(0) || self.budget == Some(0) {
                break;
            }
            if pace.is_some() && u.due == 0 {
                break;
            }
            let Ok(stream) = req.send(&mut h.conn, &mut h.out) else {
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
            h.slots.push(crate::http2::Slot {
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
        u.outstanding = h.slots.len() as u32;
        if h.slots.is_empty() {
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
        u.deadline = h.oldest_sent().map(|t| t + self.s.plan.timeout);
        self.flush_proto(key);
    }

    /// HTTP/2 in a scenario: the session's batch (encoded as HTTP/1.1) goes out as one stream
    /// per request, all in flight at once.
    pub(super) fn h2_send_session(&mut self, key: usize) {
        let now = Instant::now();
        let scheme: &[u8] = if self.s.plan.tls.is_some() {
            b"https"
        } else {
            b"http"
        };
        let u = &mut self.users[key];
        let (Some(st), Some(h)) = (u.sess.as_deref(), u.proto.h2()) else {
            return;
        };
        let intended = u.intended;
        // The batch's requests the server refused unprocessed go again, alone; otherwise all.
        let again = !u.refused.is_empty();
        let refused = &u.refused;
        let slots = &mut h.slots;
        let sent = crate::http2::send_http1_batch(
            &mut h.conn,
            &mut h.out,
            &st.out,
            scheme,
            &|i| !again || refused.iter().any(|r| r.index as usize == i),
            &mut |index, stream| {
                slots.push(crate::http2::Slot {
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
        u.outstanding = h.slots.len() as u32;
        self.rec.counters.requests += u64::from(u.outstanding);
        if again {
            self.rec
                .counters
                .proto(ProtoCounter::H2Resent, u64::from(u.outstanding));
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

    /// HTTP/2 at a rate (`--rate`): the pace's start and parameters; `None` otherwise. Each
    /// user keeps its own pace of sends whatever its streams are doing, so up to `--streams` of
    /// its requests are in flight at once and a late reply delays no later send.
    pub(super) fn pace(&self) -> Option<(Instant, u64, f64)> {
        match self.s.plan.model {
            LoadModel::Rate { connections, rate } if self.s.h2req.is_some() => {
                Some((self.s.start, u64::from(connections), rate))
            }
            _ => None,
        }
    }

    /// HTTP/2 at a rate: one more send of this user fell due; schedule the next tick and send
    /// what a free stream allows.
    pub(super) fn h2_pace(&mut self, key: usize) {
        let Some((start, conns, rate)) = self.pace() else {
            return;
        };
        let u = &mut self.users[key];
        let left = u
            .remaining
            .map_or(u64::MAX, |r| r.saturating_sub(u64::from(u.due)));
        if left == 0 || self.budget == Some(0) {
            return;
        }
        u.due += 1;
        u.seq += 1;
        if left > 1 {
            let at = start + pacer::rate_offset(u.global, u.seq, conns, rate);
            self.schedule_pace(key, at);
        }
        self.h2_kick(key);
    }

    /// HTTP/2 at a rate: send what fell due, connecting first if needed. A user waiting on a
    /// timer (a retry) or a connect in progress is left alone: it goes on from there.
    pub(super) fn h2_kick(&mut self, key: usize) {
        let u = &mut self.users[key];
        if u.state == State::Waiting {
            return;
        }
        if u.proto.is_h2() {
            self.h2_fill(key, Instant::now());
        } else if u.conn.is_none() && (u.due > 0 || !u.refused.is_empty()) {
            self.connect(key);
        }
    }

    /// HTTP/2, after a read's outcomes: keep the streams going, and write what the codec and
    /// the new streams put out in one go.
    pub(super) fn h2_after_read(&mut self, key: usize) {
        let now = Instant::now();
        let refill = self.pace().is_some();
        let u = &mut self.users[key];
        if u.sess.is_some() {
            // Sessions go on from each reply (complete_reply): only the codec's frames to send,
            // and the batch's refused requests once the rest of it is answered.
            if !u.refused.is_empty()
                && u.state == State::Reading
                && u.proto.h2().is_some_and(|h| h.slots.is_empty())
            {
                // On this connection if it still opens streams (`write_request`).
                self.write_request(key);
                if self.users.get(key).is_none_or(|u| !u.proto.is_h2()) {
                    return;
                }
            }
            self.flush_proto(key);
            return;
        }
        let Some(h) = u.proto.h2() else { return };
        u.outstanding = h.slots.len() as u32;
        let idle = h.slots.is_empty();
        let goaway = h.conn.goaway().is_some();
        let oldest = h.oldest_sent();
        if refill || matches!(self.s.plan.model, LoadModel::Closed { think: None, .. }) {
            // Each answered stream is replaced at once (the closed model's next request), or
            // by a send that fell due meanwhile (at a rate).
            self.h2_fill(key, now);
        } else if idle && !u.refused.is_empty() {
            // Refused requests go again at once, not after a think time.
            self.h2_fill(key, now);
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
        if self.users.get(key).is_some_and(|u| u.proto.is_h2()) {
            self.flush_proto(key);
        }
    }
}
