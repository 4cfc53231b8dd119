//! What a user does next: start a request (or a batch), act on a reply (the browser's cookies,
//! redirects and Digest answers), run its session, think or pace, and count a failure, retry,
//! resend or leave.

use std::time::Instant;

use headroom_core::{ErrorKind, LoadModel, Plan};
use headroom_metrics::micros;
use rand::Rng;

use super::{State, Wake, Worker, SESSIONS_PER_TURN};
use crate::browser::{self, Browser, BrowserConfig, Next};
use crate::flight::Slot;
use crate::session::SessionState;
use crate::session::{Action, Env, Program};
use headroom_proto::http1::{Batch, Parts};

impl Worker {
    /// Begin a request (or a pipelined batch) meant to go at `intended`: at a rate, start the
    /// user's pace, whose ticks make sends due (`pace_tick`, `kick`); otherwise fill the
    /// user's in-flight table now.
    pub(super) fn start_request(&mut self, key: usize, intended: Instant) {
        if self.pace().is_some() {
            // The first pace tick: later ones come from the pace timer.
            self.users[key].state = State::Idle;
            self.pace_tick(key);
            return;
        }
        self.fill(key, intended);
    }

    /// A batch (`--pipeline` requests, a session's, one request) meant to go at `intended`
    /// (at a rate: at its pace slot, however late) takes its quota and goes: on the kept
    /// connection, or on a new one.
    pub(super) fn start_batch(&mut self, key: usize, intended: Instant) {
        let pipeline = u64::from(self.s.plan.pipeline);
        let pace = self.pace();
        let u = &mut self.users[key];
        let intended = match pace {
            Some((start, conns, rate)) if u.due > 0 => {
                let slot = start + crate::pacer::rate_offset(u.global, u.sent_seq, conns, rate);
                u.due -= 1;
                u.sent_seq += 1;
                slot
            }
            _ => intended,
        };
        let mut batch = pipeline;
        if let Some(st) = &u.sess {
            // A session batch is all or nothing: its bytes are already encoded.
            batch = st.names.len() as u64;
            if self.budget.is_some_and(|b| b < batch) {
                batch = 0;
            }
        }
        if let Some(r) = u.remaining {
            batch = batch.min(r);
        }
        if let Some(b) = self.budget {
            batch = batch.min(b);
        }
        if batch == 0 {
            self.user_done(key);
            return;
        }
        // The batch is committed: it takes its quota now, answered or not.
        if let Some(b) = self.budget.as_mut() {
            *b -= batch;
        }
        if let Some(r) = u.remaining.as_mut() {
            *r -= batch;
        }
        u.batch = batch as u32;
        u.intended = intended;
        u.written = 0;
        u.flight.clear();
        u.own_request = false;
        u.resent = false;
        u.refused.clear();
        self.own_request(key);
        let u = &mut self.users[key];
        if u.conn.is_some() {
            self.write_request(key);
        } else {
            self.connect(key);
        }
    }

    /// URL runs: a user whose browser adds fields (cookies, a Digest answer) sends its own copy
    /// of the run's requests, each written from the run's request's parts with them
    /// (`Browser::own_request`: nothing re-reads the request). Sessions' encoders write them as
    /// they encode (`session.rs`).
    fn own_request(&mut self, key: usize) {
        let Some(cfg) = self.browser_cfg.as_deref() else {
            return;
        };
        let u = &mut self.users[key];
        let Some(a) = u.browser.as_deref_mut().filter(|_| u.sess.is_none()) else {
            return;
        };
        let digest = cfg.digest.as_ref().map(|(u, p)| (u.as_str(), p.as_str()));
        let Some(run) = self
            .s
            .request
            .get(0)
            .filter(|_| a.adds_fields(digest.is_some()))
        else {
            return;
        };
        a.own_request(cfg, run, u.batch, digest, browser::unix_now());
        u.own_request = true;
    }

    /// The protocol's setup is done: time it, and go on with the step that connected.
    pub(super) fn link_ready(&mut self, key: usize) {
        let now = Instant::now();
        let u = &mut self.users[key];
        if let (Some(link), Some(prog)) = (u.protocol.link(), self.s.program.as_ref()) {
            if let Some(id) = prog.w.handshake {
                self.rec
                    .record_name(id as usize, micros(now - link.started), false);
            }
        }
        u.state = State::Idle;
        u.deadline = None;
        self.after_connect(key, now);
    }

    /// The connection failed (bad bytes, a refused login, a dead socket): count it against
    /// the request in flight or the setup, and drop the connection.
    pub(super) fn conn_failed(&mut self, key: usize, kind: ErrorKind) {
        let u = &self.users[key];
        match u.state {
            State::Reading | State::Writing | State::Handshake => {
                if u.state == State::Handshake {
                    if let Some(id) = self.s.program.as_ref().and_then(|p| p.w.handshake) {
                        self.rec.name_error(id as usize);
                    }
                }
                self.fail(key, kind, Instant::now());
            }
            _ => {
                // Between requests: nobody waited, but the connection and the session's state
                // on it (a login, a transaction) are lost: count it, and the session ends
                // aborted when the user next goes on (a closed user then starts a new one).
                self.rec.counters.error(kind);
                self.abort_session(key);
                self.close(key);
            }
        }
    }

    /// The server closed a protocol link's connection.
    pub(super) fn link_eof(&mut self, key: usize) {
        let u = &self.users[key];
        let clean = u.protocol.link().is_some_and(|l| l.eof_is_clean());
        match u.state {
            State::Reading | State::Writing | State::Handshake => {
                if u.protocol.closing() && u.state == State::Reading && clean {
                    // Our close, answered by the close of the connection.
                    self.complete_reply(key, None, false, false, None);
                } else {
                    self.conn_failed(key, ErrorKind::Closed);
                }
            }
            _ if clean && u.protocol.closing() => {
                // Our own close (an MQTT DISCONNECT, an LDAP unbind), done once written, answered
                // by the server's close before the worker moved on: the session goes on (a
                // Tsung publisher's session aborted so, 2 in 2,001, in bench/mqtt-vs-tsung.sh).
                self.close(key);
            }
            _ if clean => {
                // The server ended the stream politely between requests: the session cannot go
                // on without its connection, but nothing failed.
                self.abort_session(key);
                self.close(key);
            }
            _ => self.conn_failed(key, ErrorKind::Closed),
        }
    }

    /// A reply completed: the one place a reply is recorded, whatever the protocol. `failed`
    /// marks a protocol error reply (iq error, SQL error); `slot` is the request's own entry
    /// of the in-flight table when it went as a stream (its timing and its index in the
    /// batch), `None` for a reply in order (HTTP/1.1, the links), timed as the batch.
    pub(super) fn complete_reply(
        &mut self,
        key: usize,
        status: Option<u16>,
        keep_alive: bool,
        failed: bool,
        slot: Option<Slot>,
    ) {
        let now = Instant::now();
        let per_reply = self.per_reply();
        let u = &mut self.users[key];
        // A protocol close that was answered (or written) ends the connection.
        let keep_alive = keep_alive && !u.protocol.closing();
        // A request answered in order is the oldest of the batch's in flight.
        let slot = slot.or_else(|| (!u.flight.is_empty()).then(|| u.flight.remove(0)));
        let answered = slot.map_or(u.batch as usize, |s| s.index as usize);
        let next = match status {
            Some(code) => self.browser_reply(key, code, answered),
            None => Next::Done,
        };
        let u = &mut self.users[key];
        let c = &mut self.rec.counters;
        c.responses += 1;
        let mut failed = failed;
        match (next, status) {
            (Next::Hop { .. }, Some(code)) => c.status(code),
            (Next::Failed(kind), Some(code)) => {
                c.status(code);
                c.error(kind);
                failed = true;
            }
            (_, Some(code)) => {
                c.reply_status(code, &self.s.plan.expect_status);
            }
            (_, None) => {}
        }
        let (intended, sent) = slot.map_or((u.intended, u.sent), |s| (s.intended, s.sent));
        // A timer fired early (within the slack) sent before its intended time: its latency
        // runs from the send.
        let corrected = micros(now - intended.min(sent));
        self.rec.record_latency(corrected, micros(now - sent));
        if let Next::Hop { .. } = next {
            self.send_hop(key, keep_alive, now);
            return;
        }
        // The request's whole time, over its hops (redirects, a Digest answer).
        let whole = match u.browser.as_deref_mut() {
            Some(a) => {
                let whole = a.chain_start.map_or(corrected, |t| micros(now - t));
                a.end_request();
                whole
            }
            None => corrected,
        };
        if let Some(st) = u.sess.as_mut() {
            let bad = failed || status.is_some_and(|s| s >= 400);
            if let Some(status) = status {
                st.last_status = status;
            }
            if bad {
                st.on_error_status();
            }
            if let Some(&id) = st.names.get(answered) {
                self.rec.record_name(id as usize, whole, bad);
            }
        }
        if per_reply {
            // `after_read` refills.
            return;
        }
        let reuse = keep_alive && self.s.plan.keepalive;
        u.reused = reuse;
        if !reuse {
            let lost = u.unanswered(self.refill);
            if lost > 0 {
                // The server closes with pipelined requests unanswered.
                u.flight.clear();
                u.refused.clear();
                for _ in 0..lost {
                    self.rec.counters.error(ErrorKind::Closed);
                }
                if let Some(st) = u.sess.as_mut() {
                    st.on_failure();
                    for &id in st.names.iter().rev().take(lost as usize) {
                        self.rec.name_error(id as usize);
                    }
                }
            }
            self.close(key);
        }
        let u = &mut self.users[key];
        if u.unanswered(self.refill) == 0 {
            u.deadline = None;
            u.state = State::Idle;
            self.next_request(key, now);
        }
    }

    /// The browser's view of a complete HTTP reply: cookies stored, and whether a redirect or
    /// a Digest challenge makes it a hop of the request rather than its end.
    pub(super) fn browser_reply(&mut self, key: usize, status: u16, answered: usize) -> Next {
        let Some(cfg) = self.browser_cfg.as_deref() else {
            return Next::Done;
        };
        let u = &mut self.users[key];
        let (captured, dropped) = u.protocol.captured(&u.decoder);
        // A Set-Cookie too big to capture never reaches the jar, which would refuse it too.
        if cfg.cookies && dropped > 0 {
            let rejected = headroom_core::ProtoCounter::HttpCookiesRejected;
            self.rec.counters.proto(rejected, u64::from(dropped));
        }
        let redirect = cfg.follow > 0 && (300..400).contains(&status);
        // Content-Encoding alone (`--compressed`) is the decoder's business, not the browser's.
        let for_agent = captured
            .clone()
            .any(|(id, _)| id != headroom_proto::http1::HeaderId::ContentEncoding);
        if u.browser.is_none() && !for_agent && !redirect {
            return Next::Done;
        }
        let single = u.batch == 1;
        let url_creds = cfg.digest.as_ref().map(|(u, p)| (u.as_str(), p.as_str()));
        let (creds, request) = match &u.sess {
            Some(st) => (
                st.digest.then_some((&*st.auth_user, &*st.auth_password)),
                st.out.get(if single { 0 } else { answered }),
            ),
            None if u.own_request => (url_creds, None),
            None => (url_creds, self.s.request.get(0)),
        };
        if request.is_none() && u.sess.is_some() {
            // Not a request headroom encoded (cannot happen for an HTTP reply): nothing to read.
            return Next::Done;
        }
        let a = u.browser.get_or_insert_with(Browser::new);
        // The chain's start: its intended time, or its send if that went early (timer slack).
        let intended = u.intended.min(u.sent);
        let next = a.after_reply(
            cfg,
            status,
            captured,
            request,
            single,
            creds,
            &mut self.rec.counters,
            browser::unix_now(),
        );
        if let Next::Hop { .. } = next {
            a.chain_start.get_or_insert(intended);
        }
        next
    }

    /// Sends the browser's next hop of the current request (a redirect, or the request again
    /// with a Digest answer), timed from now, on this connection if it may be reused.
    fn send_hop(&mut self, key: usize, keep_alive: bool, now: Instant) {
        let reuse = keep_alive && self.s.plan.keepalive && !self.users[key].protocol.closing();
        if !reuse {
            self.close(key);
        }
        let u = &mut self.users[key];
        let Some(a) = u.browser.as_deref_mut() else {
            return;
        };
        match u.sess.as_deref_mut() {
            Some(st) => {
                st.out.clear();
                st.out.append(&a.hop);
                st.reply.clear();
                st.head = st.out.get(0).is_some_and(|r| r.method() == "HEAD");
            }
            None => u.own_request = true,
        }
        u.batch = 1;
        u.intended = now;
        u.written = 0;
        u.flight.clear();
        u.resent = false;
        u.deadline = None;
        u.state = State::Idle;
        if self.users[key].conn.is_some() {
            self.write_request(key);
        } else {
            self.connect(key);
        }
    }

    /// After a completed or failed request: think, pace, or go again.
    pub(super) fn next_request(&mut self, key: usize, now: Instant) {
        if self.users[key].sess.is_some() {
            self.session_next(key, now);
            return;
        }
        let paced = self.pace().is_some();
        let leaves = self.ramp_leaves(key);
        let u = &mut self.users[key];
        if u.remaining == Some(0) || self.budget == Some(0) || leaves {
            self.user_done(key);
            return;
        }
        if paced {
            // At a rate the pace timer makes sends due; go on with those.
            u.state = State::Idle;
            self.kick(key);
            return;
        }
        match self.s.plan.model {
            LoadModel::Closed { think: Some(d), .. } | LoadModel::Open { think: Some(d), .. } => {
                let at = now + d.sample(self.rng.gen::<f64>());
                self.schedule(key, at, Wake::Send);
            }
            _ => self.start_request(key, now),
        }
    }

    /// Run a scenario user's session until it needs the network or the clock.
    pub(super) fn session_next(&mut self, key: usize, now: Instant) {
        let Some(prog) = self.s.program.clone() else {
            return;
        };
        let mut sessions = 0;
        // At a rate each batch takes one paced slot: requests do not join there.
        let join = self.pace().is_none();
        loop {
            let u = &mut self.users[key];
            let Some(st) = u.sess.as_mut() else {
                return;
            };
            let requests_left = match (self.budget, u.remaining) {
                (Some(b), Some(r)) => Some(b.min(r)),
                (b, r) => b.or(r),
            };
            let mut env = Env {
                rng: &mut self.rng,
                rec: &mut self.rec,
                cursors: &mut self.cursors,
                cursor_step: self.s.slots,
                requests_left,
                now,
                link: u.protocol.link_mut(),
                browser: &mut u.browser,
                browser_cfg: self.browser_cfg.as_deref(),
                join,
                join_spare: &mut self.join_spare,
            };
            match st.advance(&prog, &mut env) {
                Action::Send => {
                    self.start_request(key, now);
                    return;
                }
                Action::Think(d) => {
                    self.schedule(key, now + d, Wake::Next);
                    return;
                }
                Action::Connect => {
                    let u = &mut self.users[key];
                    if u.conn.is_none() {
                        u.batch = 0;
                        u.flight.clear();
                        self.connect(key);
                        return;
                    }
                    if u.protocol.link().is_some_and(|l| !l.ready) {
                        // A protocol step on a connection whose setup is not done: cannot
                        // happen (steps run only once it is), but never spin on it.
                        self.fail(key, ErrorKind::Protocol, now);
                        return;
                    }
                    if u.protocol.link().is_none()
                        && prog.w.link != headroom_core::session::LinkSpec::Plain
                    {
                        // A protocol step on a connection without its link: reconnect.
                        self.close(key);
                    }
                }
                Action::Close => self.leave(key),
                Action::Yield => {
                    self.schedule(key, now, Wake::Next);
                    return;
                }
                Action::Ran => {
                    let spent = self.budget == Some(0) || u.remaining == Some(0);
                    if spent {
                        self.user_done(key);
                        return;
                    }
                    // It took its quota, as a batch of one does.
                    if let Some(b) = self.budget.as_mut() {
                        *b -= 1;
                    }
                    if let Some(r) = u.remaining.as_mut() {
                        *r -= 1;
                    }
                    self.schedule(key, now, Wake::Next);
                    return;
                }
                Action::Done { aborted } => {
                    let c = &mut self.rec.counters;
                    if aborted {
                        c.sessions_aborted += 1;
                    } else {
                        c.sessions_completed += 1;
                        if let Some(st) = self.users[key].sess.as_ref() {
                            let took = micros(now.saturating_duration_since(st.started));
                            headroom_metrics::record(&mut self.rec.sessions, took.max(1));
                        }
                    }
                    let leaves = self.ramp_leaves(key);
                    let u = &mut self.users[key];
                    if u.arrived || u.once || self.budget == Some(0) || leaves {
                        self.user_done(key);
                        return;
                    }
                    // A closed user goes on with its next session, on the same connection.
                    let fixed = prog.w.population_session(u.global);
                    let s = fixed.unwrap_or_else(|| prog.w.draw(self.rng.gen::<f64>()));
                    if let Some(st) = u.sess.as_mut() {
                        st.begin(&prog, s, &mut self.rng, now);
                    }
                    if let Some(a) = u.browser.as_deref_mut() {
                        // A new session is a new visit: a fresh jar, as k6 gives each iteration.
                        a.new_session();
                    }
                    sessions += 1;
                    if sessions >= SESSIONS_PER_TURN {
                        self.schedule(key, now, Wake::Next);
                        return;
                    }
                }
            }
        }
    }

    pub(super) fn count_failure(&mut self, key: usize, kind: ErrorKind) {
        let u = &mut self.users[key];
        // Every request of a pipelined batch that was sent and not answered failed.
        let open = u.unanswered(self.refill);
        for _ in 0..open.max(1) {
            self.rec.counters.error(kind);
        }
        if let Some(st) = u.sess.as_mut() {
            // Unanswered requests of the batch (all of them if it was never written).
            let lost = if open > 0 {
                open as usize
            } else {
                st.names.len()
            };
            for &id in st.names.iter().rev().take(lost) {
                self.rec.name_error(id as usize);
            }
            st.on_failure();
        }
    }

    /// A request (batch) failed: count it, drop the connection, and move on without recursing.
    pub(super) fn fail(&mut self, key: usize, kind: ErrorKind, now: Instant) {
        let none_sent = self.users[key].flight.is_empty();
        self.count_failure(key, kind);
        self.close(key);
        self.retry_later(key, now, none_sent);
    }

    /// Park the user on a due-now timer after a failure. Requests took their quota when
    /// committed (`Refill`); a failure with none committed (a connect or a handshake before a
    /// stream opened, a session's `connect` step) counts as one request, so a dead target
    /// still ends a run bounded by `-n`. `none_sent`: nothing was in flight when it failed.
    pub(super) fn retry_later(&mut self, key: usize, now: Instant, none_sent: bool) {
        let u = &mut self.users[key];
        if none_sent && u.batch == 0 {
            if let Some(b) = self.budget.as_mut() {
                *b = b.saturating_sub(1);
            }
            if let Some(r) = u.remaining.as_mut() {
                *r = r.saturating_sub(1);
            }
            if u.due > 0 {
                // At a rate: the send that fell due is the one that failed.
                u.due -= 1;
                u.sent_seq += 1;
            }
        }
        u.flight.clear();
        u.deadline = None;
        self.schedule(key, now, Wake::Next);
    }

    /// The server closed the user's connection while nothing was in flight (a keep-alive or
    /// idle timeout): not an error. The user keeps its schedule (a think, a pace) and connects
    /// again when it next sends.
    pub(super) fn idle_closed(&mut self, key: usize) {
        self.rec.counters.idle_closed += 1;
        self.close(key);
        self.users[key].lost_idle = true;
    }

    /// A request found its kept-alive connection closed before any byte of its reply (a send
    /// that hit a closed socket, a close or reset before the reply began): the server closed it
    /// as idle just as the request went. The request goes again once on a new connection if it
    /// is idempotent (RFC 9110 §9.2.2), as browsers do; the intended send time is kept, so the
    /// latency includes the reconnect. Returns false when it may not (and the caller fails it).
    pub(super) fn resend(&mut self, key: usize) -> bool {
        let u = &self.users[key];
        let may = u.reused
            && !u.replied
            && !u.resent
            && u.protocol.stateless()
            && u.flight.len() == u.batch as usize
            && Sending::of(&u.sess, &u.browser, u.own_request, u.batch, &self.s.request)
                .idempotent();
        if !may {
            return false;
        }
        // Counted again when they go out.
        self.rec.counters.requests -= u.flight.len() as u64;
        self.idle_closed(key);
        let u = &mut self.users[key];
        u.resent = true;
        u.written = 0;
        u.state = State::Idle;
        self.connect(key);
        true
    }

    /// The user's session, if any, cannot go on: it ends aborted when the user next goes on.
    pub(super) fn abort_session(&mut self, key: usize) {
        if let Some(st) = self.users[key].sess.as_mut() {
            st.on_failure();
        }
    }

    pub(super) fn user_done(&mut self, key: usize) {
        self.leave(key);
        let u = self.users.remove(key);
        if u.arrived {
            self.open_alive -= 1;
        }
        if let Some(k) = self.ramp_keys.get_mut(u.ramp as usize) {
            *k = None;
        }
        self.rec.counters.users_finished += 1;
    }
}

/// The batch a user is sending: its bytes as they are written, and the requests among them,
/// read from their parts (a raw send or a link's bytes have none).
pub(super) struct Sending<'a> {
    pub bytes: &'a [u8],
    requests: &'a Batch,
    count: usize,
}

impl<'a> Sending<'a> {
    /// What `u` sends (split borrows of a user, so its connection stays free): its session's
    /// batch, its browser's own request or hop, or the run's request `batch` times.
    pub fn of(
        sess: &'a Option<Box<SessionState>>,
        browser: &'a Option<Box<Browser>>,
        own_request: bool,
        batch: u32,
        run: &'a Batch,
    ) -> Sending<'a> {
        let (bytes, requests, count): (&[u8], _, _) = match (sess, browser) {
            (Some(st), _) => (&st.out, &st.out, st.out.count()),
            (None, Some(a)) if own_request => (&a.hop, &a.hop, a.hop.count()),
            (None, _) => (run.first(batch as usize), run, batch as usize),
        };
        Sending {
            bytes,
            requests,
            count,
        }
    }

    /// The requests of the batch, in order.
    pub fn requests(&self) -> impl Iterator<Item = Parts<'a>> + 'a {
        self.requests.iter().take(self.count)
    }

    /// Every request has an idempotent method (RFC 9110 §9.2.2): GET, HEAD, PUT, DELETE,
    /// OPTIONS, TRACE. Bytes that are not HTTP requests (raw TCP) are not.
    pub fn idempotent(&self) -> bool {
        const METHODS: [&str; 6] = ["GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"];
        self.count > 0 && self.requests().all(|r| METHODS.contains(&r.method()))
    }
}

/// The browser settings of a run, or `None` when no user needs one (raw TCP, session
/// protocols, or cookies off with no redirects, no Digest credentials and no decoding).
pub(super) fn browser_config(plan: &Plan, program: Option<&Program>) -> Option<BrowserConfig> {
    use headroom_core::session::{LinkSpec, Op, SessionBody};
    let opts = &plan.browser;
    let digest = opts
        .credentials
        .as_ref()
        .filter(|c| c.scheme == headroom_core::AuthScheme::Digest)
        .map(|c| (c.user.clone(), c.password.clone()));
    let mut http = true;
    let mut op_digest = false;
    if let Some(p) = program {
        http = p.w.link == LinkSpec::Plain
            && p.w.sessions.iter().any(|s| match &s.body {
                SessionBody::Ops { ops, .. } => ops.iter().any(|o| matches!(o, Op::Request(_))),
                SessionBody::Surge { .. } => true,
            });
        op_digest = p.w.sessions.iter().any(|s| match &s.body {
            SessionBody::Ops { ops, .. } => ops.iter().any(|o| {
                matches!(o, Op::Request(r) if r.auth.as_ref().is_some_and(|a| a.scheme == headroom_core::AuthScheme::Digest))
            }),
            SessionBody::Surge { .. } => false,
        });
    }
    let cfg = BrowserConfig {
        cookies: opts.cookies,
        follow: opts.follow,
        host: browser::host_of(&plan.request.host).to_string(),
        port: plan.target.port(),
        scheme: if plan.tls.is_some() {
            headroom_proto::redirect::Scheme::Https
        } else {
            headroom_proto::redirect::Scheme::Http
        },
        any_digest: digest.is_some() || op_digest,
        digest,
        compressed: opts.compressed,
    };
    (http && cfg.active()).then_some(cfg)
}
