//! Connections: the connect and the TLS handshake, the socket's events, writing a request and
//! the protocol's own bytes, the one read path (bytes fed to the protocol, its outcomes acted
//! on), the server's close, and closing a connection.

use std::io;
use std::os::fd::AsRawFd;
use std::time::Instant;

use headroom_core::{ErrorKind, Plan, ProtoCounter, TlsUpgrade};
use headroom_metrics::micros;
use headroom_proto::h2;
use headroom_proto::http1::HeaderSet;
use socket2::{Domain, Protocol as IpProtocol, SockAddr, Socket, Type};

use super::users::Sending;
use super::{token, Net, State, Wake, Worker, AUX, READ_BUDGET};
use crate::flight::{take, Slot};
use crate::http2::{H2Conn, SESSION_STREAMS};
use crate::link::Link;
use crate::poller;
use crate::protocol::{self, Eof, Outcome, Protocol};
use crate::session::Awaiting;
use crate::transport::{Conn, IoErr};

impl Worker {
    pub(super) fn connect(&mut self, key: usize) {
        let now = Instant::now();
        let plan = &self.s.plan;
        let bind = if plan.socket.bind.is_empty() {
            None
        } else {
            let ip = plan.socket.bind[self.bind_next % plan.socket.bind.len()];
            self.bind_next = self.bind_next.wrapping_add(self.s.slots);
            Some(ip)
        };
        let u = &mut self.users[key];
        u.connect_start = now;
        self.next_gen = self.next_gen.wrapping_add(1);
        u.gen = self.next_gen;
        let result = start_connect(plan, bind, &self.ep, token(key, u.gen));
        match result {
            Ok(sock) => {
                u.conn = Some(Conn::plain(sock));
                u.state = State::Connecting;
                u.deadline = Some(now + plan.connect_timeout);
                if std::mem::take(&mut u.lost_idle) {
                    self.rec.counters.reconnects += 1;
                }
            }
            Err(e) => {
                let kind = ErrorKind::from_io(&e, true);
                self.count_failure(key, kind);
                self.retry_later(key, now, true);
            }
        }
    }

    pub(super) fn on_event(&mut self, key: usize, gen: u32, flags: u32) {
        let Some(u) = self.users.get(key) else { return };
        if u.gen != gen || u.conn.is_none() {
            return;
        }
        const READABLE: u32 = poller::IN | poller::RDHUP | poller::ERR | poller::HUP;
        const WRITABLE: u32 = poller::OUT | poller::ERR | poller::HUP;
        if u.state == State::Tls {
            self.tls_handshake(key);
            return;
        }
        if u.state == State::Connecting {
            if flags & WRITABLE != 0 {
                self.on_connect(key, flags);
            }
            // A server that speaks first (MySQL's greeting) may have spoken by now: edge
            // triggered, this event is the only one its bytes get. (A TLS handshake reads for
            // itself.)
            let speaks = self.users.get(key).is_some_and(|u| {
                u.gen == gen
                    && u.conn.is_some()
                    && !matches!(u.state, State::Connecting | State::Tls)
            });
            if flags & READABLE != 0 && speaks {
                self.read(key, flags);
            }
            return;
        }
        if flags & WRITABLE != 0 {
            if u.conn.as_ref().is_some_and(|c| c.wants_write()) && !self.flush_conn(key) {
                // TLS records the socket could not take before; writing them failed the user.
                return;
            }
            let Some(u) = self.users.get(key).filter(|u| u.gen == gen) else {
                return;
            };
            if u.state == State::Writing {
                self.write_request(key);
            } else if u.protocol.pending() && !self.flush_proto(key) {
                return;
            }
        }
        // Every protocol reads through one path; plain HTTP reads while a reply is awaited, and
        // between requests to see the server close a kept-alive connection (or send bytes nobody
        // asked for).
        if flags & READABLE != 0
            && self
                .users
                .get(key)
                .is_some_and(|u| u.gen == gen && u.conn.is_some())
        {
            self.read(key, flags);
        }
    }

    fn on_connect(&mut self, key: usize, flags: u32) {
        let now = Instant::now();
        let u = &mut self.users[key];
        let Some(sock) = u.conn.as_ref().map(|c| &c.sock) else {
            return;
        };
        match connected(sock, flags) {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                let kind = ErrorKind::from_io(&e, true);
                self.fail(key, kind, now);
                return;
            }
        }
        self.rec.counters.connects += 1;
        self.rec.record_connect(micros(now - u.connect_start));
        u.net = Net::Tcp;
        u.tcp_at = now;
        self.tcp_open += 1;
        self.tcp_peak = self.tcp_peak.max(self.tcp_open);
        let link_tls = self.link_tls();
        let u = &mut self.users[key];
        if link_tls {
            // MySQL: the greeting comes in plain text, the link asks for TLS after it
            // (`link_start_tls`); the handshake is timed from here, as PostgreSQL's SSLRequest.
            u.connect_start = now;
        } else if let Some(tls) = &self.tls {
            match tls.connect(&mut u.tls_sessions) {
                Ok(t) => {
                    if let (Some(c), Some(o)) = (u.conn.as_mut(), self.s.plan.tls.as_ref()) {
                        c.start_tls(t, &o.upgrade);
                    }
                    // The handshake is timed from here, apart from the connect, and bounded by
                    // the connect timeout.
                    u.connect_start = now;
                    u.state = State::Tls;
                    u.deadline = Some(now + self.s.plan.connect_timeout);
                    self.tls_handshake(key);
                }
                Err(e) => self.fail(key, crate::tls::classify(&e), now),
            }
            return;
        }
        self.connected(key, now);
    }

    /// Drive the TLS handshake; once done, time it and go on as after a plain connect.
    fn tls_handshake(&mut self, key: usize) {
        let u = &mut self.users[key];
        let gen = u.gen;
        let Some(conn) = u.conn.as_mut() else { return };
        let before = self.rec.counters.bytes_received;
        let r = conn.handshake(&mut self.rec.counters);
        if self.rec.counters.bytes_received != before {
            // The ServerHello (or an alert): the server has accepted the connection.
            self.served(key);
        }
        let u = &mut self.users[key];
        let Some(conn) = u.conn.as_mut() else { return };
        match r {
            Ok(false) | Err(IoErr::WouldBlock) => {}
            Ok(true) => {
                let now = Instant::now();
                if conn.is_tls() {
                    self.rec.record_tls(micros(now - u.connect_start));
                    self.rec.counters.proto(ProtoCounter::TlsHandshakes, 1);
                    if conn.resumed() {
                        self.rec.counters.proto(ProtoCounter::TlsResumed, 1);
                    }
                    if let Some(n) = conn.negotiated(self.http) {
                        self.rec.negotiated.count(&n, 1);
                    }
                }
                if u.protocol.link().is_some_and(|l| !l.ready) {
                    // A link's setup asked for TLS (MySQL): it goes on over it, timed from
                    // now as the protocol's setup.
                    let Some(link) = u.protocol.link_mut() else {
                        return;
                    };
                    if !link.tls_started() {
                        self.fail(key, ErrorKind::Protocol, now);
                        return;
                    }
                    link.started = now;
                    u.state = State::Handshake;
                    u.deadline = Some(now + self.s.plan.timeout);
                    self.flush_proto(key);
                    return;
                }
                u.state = State::Idle;
                u.deadline = None;
                self.connected(key, now);
                // Plaintext that came with the handshake's last flight raises no new edge:
                // read it now if anybody listens.
                if self.users.get(key).is_some_and(|u| {
                    u.gen == gen && (u.protocol.reads_always() || u.state == State::Reading)
                }) {
                    self.read(key, 0);
                }
            }
            Err(IoErr::Failed(kind)) => self.fail(key, kind, Instant::now()),
        }
    }

    /// The connection (and its TLS) is up: start the protocol's setup, or go on with the step
    /// that asked for the connection.
    fn connected(&mut self, key: usize, now: Instant) {
        let wanted = self
            .browser_cfg
            .as_deref()
            .map_or(HeaderSet::NONE, |c| c.capture());
        let per_reply = self.per_reply();
        let tls = self.s.plan.tls.is_some();
        let u = &mut self.users[key];
        if let Some(h) = self.s.plan.http2 {
            if u.conn
                .as_ref()
                .is_some_and(|c| c.is_tls() && c.alpn() != Some(b"h2"))
            {
                // The server did not agree to HTTP/2 (ALPN): nothing can be sent.
                self.fail(key, ErrorKind::Protocol, now);
                return;
            }
            if !per_reply {
                // A batch's requests go out as streams when it is sent.
                let h2 = H2Conn::new(SESSION_STREAMS, tls, wanted);
                u.protocol = Protocol::H2(Box::new(h2));
                self.after_connect(key, now);
                return;
            }
            u.protocol = Protocol::H2(Box::new(H2Conn::new(h.streams, tls, wanted)));
            let intended = u.intended;
            self.fill(key, intended);
            return;
        }
        let link_tls = self.link_tls();
        let u = &mut self.users[key];
        if let Some(prog) = &self.s.program {
            let connect = u.sess.as_deref().and_then(|st| st.connect_options(prog));
            let vars = u.sess.as_deref().map_or(&[][..], |st| st.vars());
            if let Some(link) = Link::start(
                &prog.w.link,
                connect,
                &prog.host,
                u.global,
                vars,
                &mut self.rng,
                link_tls,
            ) {
                if link.ready {
                    // No setup (LDAP): the step that asked for the connection goes on.
                    u.protocol = Protocol::Link(Box::new(link));
                    self.after_connect(key, now);
                    return;
                }
                // The protocol's setup runs first; `link_ready` goes on from here after it.
                u.protocol = Protocol::Link(Box::new(link));
                u.state = State::Handshake;
                u.deadline = Some(now + self.s.plan.timeout);
                self.flush_proto(key);
                return;
            }
        }
        self.after_connect(key, now);
    }

    /// TLS is the link's to start (MySQL's SSLRequest after the greeting), not the connect's.
    fn link_tls(&self) -> bool {
        self.tls.is_some()
            && self
                .s
                .plan
                .tls
                .as_ref()
                .is_some_and(|o| o.upgrade == TlsUpgrade::MysqlSslRequest)
    }

    /// The link's setup asked for TLS: its request (MySQL's SSLRequest, in the link's out) is
    /// written in plain text, then the handshake runs; the setup goes on over TLS once it is
    /// done (`tls_handshake`).
    fn link_start_tls(&mut self, key: usize) {
        let now = Instant::now();
        if !self.flush_proto(key) {
            return;
        }
        let u = &mut self.users[key];
        let Some(tls) = self.tls.as_ref().filter(|_| !u.protocol.pending()) else {
            // A fresh socket that cannot take 36 bytes at once (or TLS asked unconfigured):
            // never mix the request into the handshake.
            self.fail(key, ErrorKind::Protocol, now);
            return;
        };
        match tls.connect(&mut u.tls_sessions) {
            Ok(t) => {
                if let Some(c) = u.conn.as_mut() {
                    c.start_tls(t, &TlsUpgrade::MysqlSslRequest);
                }
                u.state = State::Tls;
                u.deadline = Some(now + self.s.plan.connect_timeout);
                self.tls_handshake(key);
            }
            Err(e) => self.fail(key, crate::tls::classify(&e), now),
        }
    }

    /// The connection is usable: go on with the step that asked for it.
    pub(super) fn after_connect(&mut self, key: usize, now: Instant) {
        let u = &mut self.users[key];
        if u.sess.is_some() && u.batch == 0 {
            // An explicit `connect` step: nothing to send yet.
            u.state = State::Idle;
            u.deadline = None;
            self.session_next(key, now);
            return;
        }
        self.write_request(key);
    }

    pub(super) fn write_request(&mut self, key: usize) {
        let protocol = &self.users[key].protocol;
        if protocol.frames_requests() {
            if !protocol.can_open() {
                // A GOAWAY (or spent stream ids) on the kept connection: a new one.
                self.close(key);
                self.connect(key);
                return;
            }
            self.submit_batch(key);
            return;
        }
        let u = &mut self.users[key];
        let head = u.sess.as_ref().map_or(self.s.head_request, |st| st.head);
        let bytes = Sending::of(&u.sess, &u.browser, u.own_request, u.batch, &self.s.request).bytes;
        let total = bytes.len();
        let Some(conn) = u.conn.as_mut() else { return };
        let first = u.state != State::Writing;
        if first {
            u.written = 0;
            u.replied = false;
            u.decoder.set_head_request(head);
        }
        let mut off = u.written as usize;
        let gen = u.gen;
        if total == 0 && first {
            // Nothing for this connection: the protocol carries the request itself (BOSH
            // queues a step's stanzas for whichever of its connections is free). The request
            // exists from now.
            batch_sent(
                &mut u.flight,
                &mut u.sent,
                u.intended,
                u.batch,
                &mut self.rec.counters,
            );
        }
        while off < total {
            match conn.send(&bytes[off..total], &mut self.rec.counters) {
                Ok(n) => {
                    if off == 0 {
                        // First bytes of the batch on the wire: the requests now exist, each
                        // an entry of the in-flight table, answered in order.
                        batch_sent(
                            &mut u.flight,
                            &mut u.sent,
                            u.intended,
                            u.batch,
                            &mut self.rec.counters,
                        );
                    }
                    off += n;
                }
                Err(IoErr::WouldBlock) => break,
                Err(IoErr::Failed(kind)) => {
                    if !self.resend(key) {
                        self.fail(key, kind, Instant::now());
                    }
                    return;
                }
            }
        }
        u.written = off as u32;
        if first {
            // The response timeout runs from the moment the request was (first) written.
            let timeout = u.sess.as_ref().and_then(|st| st.step_timeout);
            u.deadline = Some(Instant::now() + timeout.unwrap_or(self.s.plan.timeout));
        }
        u.state = if off < total {
            State::Writing
        } else {
            State::Reading
        };
        if u.state == State::Reading
            && u.sess
                .as_ref()
                .is_some_and(|st| matches!(st.awaiting, Awaiting::Nothing | Awaiting::Link))
        {
            self.written_ahead(key);
        }
        let u = &mut self.users[key];
        if u.state == State::Reading && u.protocol.pending() {
            // Protocol bytes (a pong, say) that waited for the request to be written.
            self.flush_proto(key);
            let Some(u) = self.users.get(key).filter(|u| u.gen == gen) else {
                return;
            };
            if u.state != State::Reading {
                return;
            }
        }
        if !self.service_aux(key) {
            return;
        }
        let u = &mut self.users[key];
        if u.state == State::Reading
            && u.sess
                .as_ref()
                .is_some_and(|st| st.awaiting == Awaiting::Nothing)
        {
            // A send that expects nothing is done once written. It completes from the timer
            // queue, not from here: a loop of such sends would otherwise recurse without end.
            u.deadline = None;
            self.schedule(key, Instant::now(), Wake::Written);
        }
    }

    /// A session's batch of protocol requests is written. Only its last request may wait for
    /// something (a request that waits ends a batch: `SessionState::run_ops`), so those ahead
    /// of it are done now, as each alone would have been once written; the last completes as
    /// a batch of one does (when written, or with its reply). The transactions that ended
    /// inside the batch end now too.
    fn written_ahead(&mut self, key: usize) {
        let now = Instant::now();
        let u = &mut self.users[key];
        let ahead = u.flight.len().saturating_sub(1);
        for slot in u.flight.drain(..ahead) {
            self.rec.counters.responses += 1;
            let corrected = micros(now - slot.intended.min(slot.sent));
            self.rec.record_latency(corrected, micros(now - slot.sent));
            let name = u
                .sess
                .as_ref()
                .and_then(|st| st.names.get(slot.index as usize));
            if let Some(&id) = name {
                self.rec.record_name(id as usize, corrected, false);
            }
        }
        if let Some(st) = u.sess.as_mut() {
            st.batch_written(&mut self.rec, now);
            st.lend_back(&mut self.join_spare);
        }
    }

    /// Reads the connection until it is drained, handing every byte to the protocol (see
    /// [`crate::protocol`]): one read path for every protocol and transport.
    fn read(&mut self, key: usize, flags: u32) {
        let mut scratch = std::mem::take(&mut self.scratch);
        let gen = self.users[key].gen;
        let mut budget = READ_BUDGET;
        while let Some(u) = self.users.get_mut(key).filter(|u| u.gen == gen) {
            // (During a handshake a link asked for, TLS reads for itself.)
            let reads =
                (u.protocol.reads_always() || u.state != State::Writing) && u.state != State::Tls;
            let Some(conn) = u.conn.as_mut().filter(|_| reads) else {
                break;
            };
            let drains = conn.short_read_drains();
            match conn.recv(&mut scratch, &mut self.rec.counters) {
                Ok(0) => {
                    self.on_eof(key);
                    break;
                }
                Ok(n) => {
                    if u.net != Net::Served {
                        self.served(key);
                    }
                    self.users[key].replied = true;
                    self.feed(key, gen, &scratch[..n]);
                    if drains && n < scratch.len() {
                        // Short read: drained. A peer half-close seen with this edge still
                        // needs handling.
                        if flags & (poller::RDHUP | poller::HUP) != 0
                            && self.users.get(key).is_some_and(|u| {
                                u.gen == gen
                                    && u.conn.is_some()
                                    && (u.protocol.reads_always() || u.state != State::Writing)
                            })
                        {
                            self.on_eof(key);
                        }
                        break;
                    }
                    budget = budget.saturating_sub(n);
                    if budget == 0 {
                        // Enough for this turn (see READ_BUDGET): the rest in the next.
                        self.more.push((key, gen));
                        break;
                    }
                }
                Err(IoErr::WouldBlock) => break,
                Err(IoErr::Failed(kind)) => {
                    self.proto_failed(key, kind);
                    break;
                }
            }
        }
        self.scratch = scratch;
    }

    /// Goes on reading the connections that used their `READ_BUDGET` in the last turn.
    pub(super) fn read_more(&mut self) {
        let spare = std::mem::take(&mut self.more_spare);
        let mut list = std::mem::replace(&mut self.more, spare);
        for &(key, gen) in &list {
            if self
                .users
                .get(key)
                .is_some_and(|u| u.gen == gen && u.conn.is_some())
            {
                self.read(key, 0);
            }
        }
        list.clear();
        self.more_spare = list;
    }

    /// Hands bytes read to the protocol and acts on each outcome, until it needs more.
    fn feed(&mut self, key: usize, gen: u32, mut buf: &[u8]) {
        loop {
            // Each outcome may end the user or replace its connection: re-check every turn.
            let Some(u) = self.users.get_mut(key).filter(|u| u.gen == gen) else {
                return;
            };
            if u.conn.is_none() || (buf.is_empty() && !u.protocol.queued()) {
                break;
            }
            let cx = protocol::FeedCx {
                decoder: &mut u.decoder,
                sess: u.sess.as_deref_mut(),
                reading: u.state == State::Reading,
                program: self.s.program.as_deref(),
                counters: &mut self.rec.counters,
                names: &mut self.rec.names,
            };
            let (used, outcome) = match protocol::feed(&mut u.protocol, cx, buf) {
                Ok(x) => x,
                Err(kind) => {
                    self.proto_failed(key, kind);
                    return;
                }
            };
            buf = buf.get(used..).unwrap_or(&[]);
            // A link's answers (a pong, a login step, an MQTT PUBACK) go out before the user
            // acts on an outcome, and otherwise once the bytes read are used up: the answers to
            // the messages of one read share one write (a subscriber acknowledging QoS 1
            // messages made a send per message). HTTP/2's frames wait for the end of the read,
            // with the requests it makes room for.
            let settle = outcome.is_some() || used == 0 || buf.is_empty();
            if settle && u.protocol.urgent() && u.state != State::Writing {
                self.flush_proto(key);
                if self.users.get(key).is_none_or(|u| u.gen != gen) {
                    return;
                }
            }
            match outcome {
                None if used == 0 => break,
                None => {}
                Some(o) => self.on_outcome(key, o),
            }
        }
        if !self.service_aux(key) {
            return;
        }
        if self.users[key].conn.is_some() {
            self.after_read(key);
        }
    }

    /// BOSH's second connection (`link::BoshLink`): opened when it first has a request to
    /// carry, then written whenever one is due; a failure of the session is the user's. Returns
    /// false when the user failed (or its connection is gone).
    pub(super) fn service_aux(&mut self, key: usize) -> bool {
        let Some(u) = self.users.get_mut(key) else {
            return false;
        };
        let gen = u.gen;
        let Some(link) = u.protocol.link_mut() else {
            return u.conn.is_some();
        };
        if link.bosh_mut().is_none() {
            return u.conn.is_some();
        }
        // What came is acted on: the poll now, if none is outstanding.
        if let Some(prog) = self.s.program.as_deref() {
            link.bosh_poll(&prog.w.link, &mut self.rec.counters);
        }
        if u.state != State::Writing && u.protocol.pending() {
            if !self.flush_proto(key) {
                return false;
            }
            if self.users.get(key).is_none_or(|u| u.gen != gen) {
                return false;
            }
        }
        let Some(bl) = self.users[key]
            .protocol
            .link_mut()
            .and_then(|l| l.bosh_mut())
        else {
            return false;
        };
        let mut failure = bl.failed.take();
        if failure.is_none() && bl.aux_pending() {
            if bl.aux.is_none() {
                let plan = &self.s.plan;
                let ep = &self.ep;
                let opened = start_connect(plan, None, ep, token(key | AUX, gen));
                match opened {
                    Ok(sock) => {
                        bl.aux = Some(Conn::plain(sock));
                        bl.aux_connected = false;
                        bl.aux_tls = false;
                        bl.aux_started = Instant::now();
                    }
                    Err(e) => failure = Some(ErrorKind::from_io(&e, true)),
                }
            } else if bl.aux_connected && !bl.aux_tls {
                if let Some(conn) = bl.aux.as_mut() {
                    while bl.aux_written < bl.aux_out.len() {
                        match conn.send(&bl.aux_out[bl.aux_written..], &mut self.rec.counters) {
                            Ok(n) => bl.aux_written += n,
                            Err(IoErr::WouldBlock) => break,
                            Err(IoErr::Failed(kind)) => {
                                failure = Some(kind);
                                break;
                            }
                        }
                    }
                }
            }
        }
        if let Some(kind) = failure {
            self.proto_failed(key, kind);
            return false;
        }
        self.users
            .get(key)
            .is_some_and(|u| u.gen == gen && u.conn.is_some())
    }

    /// An event of a user's second connection (BOSH's): its connect completing, room to write,
    /// responses to read (taken by the session, whose stanzas then go through [`Self::feed`]
    /// like the first connection's), its close.
    pub(super) fn on_aux_event(&mut self, key: usize, gen: u32, flags: u32) {
        const READABLE: u32 = poller::IN | poller::RDHUP | poller::ERR | poller::HUP;
        const WRITABLE: u32 = poller::OUT | poller::ERR | poller::HUP;
        let Some(u) = self.users.get_mut(key).filter(|u| u.gen == gen) else {
            return;
        };
        let sessions = &mut u.tls_sessions;
        let Some(bl) = u.protocol.link_mut().and_then(|l| l.bosh_mut()) else {
            return;
        };
        let Some(conn) = bl.aux.as_mut() else {
            return;
        };
        if !bl.aux_connected {
            if flags & WRITABLE == 0 {
                return;
            }
            match connected(&conn.sock, flags) {
                Ok(true) => {}
                Ok(false) => return,
                Err(e) => {
                    self.proto_failed(key, ErrorKind::from_io(&e, true));
                    return;
                }
            }
            bl.aux_connected = true;
            // A TCP connection like the user's own: counted and timed with them.
            self.rec.counters.connects += 1;
            let now = Instant::now();
            self.rec.record_connect(micros(now - bl.aux_started));
            if let Some(tls) = &self.tls {
                // https: the handshake as on the user's own connection, timed from here.
                match tls.connect(sessions) {
                    Ok(t) => conn.start_tls(t, &TlsUpgrade::Direct),
                    Err(e) => {
                        self.proto_failed(key, crate::tls::classify(&e));
                        return;
                    }
                }
                bl.aux_tls = true;
                bl.aux_started = now;
            }
        }
        if bl.aux_tls {
            match conn.handshake(&mut self.rec.counters) {
                Ok(false) | Err(IoErr::WouldBlock) => return,
                Ok(true) => {
                    bl.aux_tls = false;
                    self.rec.record_tls(micros(Instant::now() - bl.aux_started));
                    self.rec.counters.proto(ProtoCounter::TlsHandshakes, 1);
                    if conn.resumed() {
                        self.rec.counters.proto(ProtoCounter::TlsResumed, 1);
                    }
                    // Its requests, due meanwhile, go now.
                    if !self.service_aux(key) {
                        return;
                    }
                }
                Err(IoErr::Failed(kind)) => {
                    self.proto_failed(key, kind);
                    return;
                }
            }
        } else if flags & WRITABLE != 0 {
            if conn.wants_write() {
                // TLS records the socket could not take before.
                if let Err(IoErr::Failed(kind)) = conn.flush(&mut self.rec.counters) {
                    self.proto_failed(key, kind);
                    return;
                }
            }
            if !self.service_aux(key) {
                return;
            }
        }
        if flags & READABLE == 0 {
            return;
        }
        let mut scratch = std::mem::take(&mut self.scratch);
        let mut failure = None;
        while let Some(u) = self.users.get_mut(key).filter(|u| u.gen == gen) {
            let Some(link) = u.protocol.link_mut() else {
                break;
            };
            let Some(conn) = link.bosh_mut().and_then(|bl| bl.aux.as_mut()) else {
                break;
            };
            let drains = conn.short_read_drains();
            match conn.recv(&mut scratch, &mut self.rec.counters) {
                Ok(0) => {
                    let bl = link.bosh_mut().expect("checked above");
                    if bl.aux_outstanding() {
                        failure = Some(ErrorKind::Closed);
                    } else {
                        // Closed while idle (HTTP keep-alive ended): opened again when next
                        // needed.
                        bl.aux = None;
                        bl.aux_connected = false;
                        self.rec.counters.disconnects += 1;
                    }
                    break;
                }
                Ok(n) => {
                    let Some(prog) = self.s.program.as_deref() else {
                        break;
                    };
                    if let Err(kind) =
                        link.aux_input(&prog.w.link, &scratch[..n], &mut self.rec.counters)
                    {
                        failure = Some(kind);
                        break;
                    }
                    if u.state != State::Writing && u.protocol.pending() {
                        self.flush_proto(key);
                    }
                    self.feed(key, gen, &[]);
                    if drains && n < scratch.len() {
                        break;
                    }
                }
                Err(IoErr::WouldBlock) => break,
                Err(IoErr::Failed(kind)) => {
                    failure = Some(kind);
                    break;
                }
            }
        }
        self.scratch = scratch;
        if let Some(kind) = failure {
            if self.users.get(key).is_some_and(|u| u.gen == gen) {
                self.proto_failed(key, kind);
            }
        }
    }

    /// Acts on what the protocol completed.
    fn on_outcome(&mut self, key: usize, o: Outcome) {
        let per_reply = self.per_reply();
        let u = &mut self.users[key];
        let c = &mut self.rec.counters;
        match o {
            Outcome::GoAway { code } => {
                // The streams above its last id follow as `Reset`s (REFUSED_STREAM).
                c.proto(ProtoCounter::H2GoAway, 1);
                if code != h2::error_code::NO_ERROR {
                    c.proto(ProtoCounter::H2ConnectionErrors, 1);
                }
            }
            Outcome::Reset { stream, code } => {
                let slot = take(&mut u.flight, stream);
                if let Some(slot) =
                    slot.filter(|s| !s.again && code == h2::error_code::REFUSED_STREAM)
                {
                    // Not processed (RFC 9113 §8.7): it goes again, once, its intended time
                    // kept, counted as a request when it goes — on this connection if it still
                    // opens streams, else on a new one. Streams of a URL run: first in `fill`;
                    // a batch's: once the rest of it is answered (`after_read`).
                    c.proto(ProtoCounter::h2_rst(code), 1);
                    c.requests -= 1;
                    u.refused.push(crate::flight::Refused {
                        intended: slot.intended,
                        index: slot.index,
                    });
                    return;
                }
                protocol::count_reset(c, code, slot.is_some() && per_reply);
                if let (Some(slot), false) = (slot, per_reply) {
                    // A request of the batch failed: the user goes on as after any failure,
                    // this request counted with the rest of the batch.
                    u.flight.push(slot);
                    self.fail(key, ErrorKind::StreamReset, Instant::now());
                }
            }
            Outcome::Failed { stream, kind } => match (take(&mut u.flight, stream), per_reply) {
                (Some(_), true) => c.error(kind),
                (Some(slot), false) => {
                    u.flight.push(slot);
                    self.fail(key, kind, Instant::now());
                }
                (None, _) => {}
            },
            Outcome::Reply {
                stream,
                status,
                keep_alive,
                ok,
            } => {
                // A stream answers its own request, by id; the others answer in order.
                let slot = (stream != 0).then(|| take(&mut u.flight, stream));
                let mine = slot.is_none_or(|s| s.is_some());
                // A URL run's stream is answered whatever the user is doing (its streams go
                // on); a batch's reply only while the user reads it.
                if mine && (per_reply || u.state == State::Reading) {
                    if !ok {
                        c.error(ErrorKind::ErrorReply);
                    }
                    self.complete_reply(key, status, keep_alive, !ok, slot.flatten());
                }
            }
            Outcome::Ready => self.link_ready(key),
            Outcome::StartTls => self.link_start_tls(key),
            Outcome::Closed => {
                // The server ended the session unasked: a user waiting on a reply failed; an
                // idle one just loses its connection (and reconnects when next due).
                if matches!(u.state, State::Reading | State::Writing) {
                    self.fail(key, ErrorKind::Closed, Instant::now());
                } else {
                    self.abort_session(key);
                    self.close(key);
                }
            }
            Outcome::Unexpected => {
                // The user keeps its schedule and reconnects when next due.
                c.error(ErrorKind::Protocol);
                self.close(key);
            }
        }
    }

    /// The server closed the connection.
    fn on_eof(&mut self, key: usize) {
        let now = Instant::now();
        let u = &mut self.users[key];
        let reading = u.state == State::Reading;
        if reading && self.resend(key) {
            return;
        }
        let u = &mut self.users[key];
        let cx = protocol::FeedCx {
            decoder: &mut u.decoder,
            sess: u.sess.as_deref_mut(),
            reading,
            program: self.s.program.as_deref(),
            counters: &mut self.rec.counters,
            names: &mut self.rec.names,
        };
        match protocol::eof(&u.protocol, cx, !u.flight.is_empty()) {
            // A body delimited by the close: complete. If more responses of a pipelined
            // batch were expected, those failed.
            Eof::Reply(o) => self.on_outcome(key, o),
            Eof::Failed(kind) => self.fail(key, kind, now),
            Eof::Link => self.link_eof(key),
            Eof::Idle { .. } if !u.refused.is_empty() => {
                // Refused requests wait to go again: on a new connection, now.
                self.close(key);
                self.connect(key);
            }
            Eof::Idle { go_on } => {
                // Not a failure (a keep-alive or idle timeout, or the close after a GOAWAY).
                let waiting = u.state == State::Waiting;
                self.idle_closed(key);
                if go_on && !waiting {
                    self.next_request(key, now);
                }
            }
        }
    }

    /// The connection failed (bad bytes, a refused login, a dead socket).
    fn proto_failed(&mut self, key: usize, kind: ErrorKind) {
        // The protocol may have written its last words (HTTP/2's GOAWAY): send them first.
        let gen = self.users[key].gen;
        if self.users[key].protocol.stateless() {
            let u = &self.users[key];
            if matches!(u.state, State::Reading | State::Writing) {
                if !self.resend(key) {
                    self.fail(key, kind, Instant::now())
                }
            } else {
                // Lost while idle (reset by the server): nobody waited; reconnect when next
                // needed.
                self.idle_closed(key);
            }
            return;
        }
        if self.users[key].state != State::Writing && !self.flush_proto(key) {
            return;
        }
        if self.users.get(key).is_some_and(|u| u.gen == gen) {
            self.conn_failed(key, kind);
        }
    }

    /// Writes what the transport holds (TLS records the socket did not take). False if that
    /// failed the user.
    fn flush_conn(&mut self, key: usize) -> bool {
        let u = &mut self.users[key];
        let Some(conn) = u.conn.as_mut() else {
            return false;
        };
        match conn.flush(&mut self.rec.counters) {
            Ok(()) | Err(IoErr::WouldBlock) => true,
            Err(IoErr::Failed(kind)) => {
                self.proto_failed(key, kind);
                false
            }
        }
    }

    /// Writes the protocol's own bytes (link answers, HTTP/2 frames). False if that failed the
    /// user.
    pub(super) fn flush_proto(&mut self, key: usize) -> bool {
        let u = &mut self.users[key];
        let (Some(conn), Some((out, written))) = (u.conn.as_mut(), u.protocol.out()) else {
            return true;
        };
        while *written < out.len() {
            match conn.send(&out[*written..], &mut self.rec.counters) {
                Ok(n) => *written += n,
                Err(IoErr::WouldBlock) => return true,
                Err(IoErr::Failed(kind)) => {
                    self.conn_failed(key, kind);
                    return false;
                }
            }
        }
        out.clear();
        *written = 0;
        true
    }

    /// The server sent its first byte on the user's connection: it holds the connection now
    /// (before that, a TCP handshake may sit in its accept queue).
    fn served(&mut self, key: usize) {
        let u = &mut self.users[key];
        if u.net == Net::Tcp {
            u.net = Net::Served;
            self.served_open += 1;
            self.served_peak = self.served_peak.max(self.served_open);
            self.rec
                .record_served(micros(Instant::now().saturating_duration_since(u.tcp_at)));
        }
    }

    /// The user leaves its connection by choice (a `close` step, the end of its session): with
    /// nothing in flight, the protocol's goodbye ([`Link::goodbye`]: MySQL's `COM_QUIT`,
    /// PostgreSQL's Terminate) goes first, in one write (a socket that cannot take its five
    /// bytes at once, or fails, skips it: the close follows either way), then the close.
    pub(super) fn leave(&mut self, key: usize) {
        let u = &mut self.users[key];
        if u.flight.is_empty() && matches!(u.state, State::Idle | State::Waiting) {
            if let (Some(conn), Some(link)) = (u.conn.as_mut(), u.protocol.link_mut()) {
                if link.goodbye() {
                    let _ = conn.send(&link.out[link.written..], &mut self.rec.counters);
                }
            }
        }
        self.close(key);
    }

    pub(super) fn close(&mut self, key: usize) {
        let u = &mut self.users[key];
        if u.protocol
            .link_mut()
            .and_then(|l| l.bosh_mut())
            .is_some_and(|b| b.aux.is_some())
        {
            // BOSH's second connection closes with the link.
            self.rec.counters.disconnects += 1;
        }
        u.protocol
            .release(self.s.program.as_ref().and_then(|p| p.xmpp.as_ref()));
        if let Some(conn) = u.conn.take() {
            drop(conn);
            self.rec.counters.disconnects += 1;
        }
        match std::mem::replace(&mut u.net, Net::None) {
            Net::Served => {
                self.served_open -= 1;
                self.tcp_open -= 1;
            }
            Net::Tcp => self.tcp_open -= 1,
            Net::None => {}
        }
        u.reused = false;
        u.flight.clear();
        self.next_gen = self.next_gen.wrapping_add(1);
        u.gen = self.next_gen;
        u.decoder.reset();
        u.deadline = None;
        u.written = 0;
        if u.state != State::Waiting {
            u.state = State::Idle;
        }
    }
}

/// A fresh socket registered with the poller under `token`, its non-blocking connect to the
/// plan's target started.
fn start_connect(
    plan: &Plan,
    bind: Option<std::net::IpAddr>,
    ep: &poller::Epoll,
    token: u64,
) -> io::Result<Socket> {
    let sock = open_socket(plan, bind)?;
    ep.add(sock.as_raw_fd(), token)?;
    match sock.connect(&SockAddr::from(plan.target)) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(e),
    }
    Ok(sock)
}

/// On a writable edge of a connecting socket (its epoll `flags`): connected (`true`), not yet
/// (`false`: an edge with no error but no peer is spurious, keep waiting), or the connect's
/// error.
///
/// Writable without an error or a hang-up is connected, with no system call: TCP reports a
/// socket writable only once past SYN_SENT, and a failed connect (refused, unreachable, timed
/// out) as EPOLLERR with EPOLLHUP (`tcp_poll`). Asking the socket besides (`SO_ERROR`, then
/// `getpeername`) made two system calls per connection (wrk makes none): 2 of the ~9 a
/// `--no-keepalive` request costs. Only an edge with an error or a hang-up asks.
fn connected(sock: &Socket, flags: u32) -> io::Result<bool> {
    if flags & poller::OUT != 0 && flags & (poller::ERR | poller::HUP) == 0 {
        return Ok(true);
    }
    if let Some(e) = sock.take_error()? {
        return Err(e);
    }
    match sock.peer_addr() {
        Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => Ok(false),
        _ => Ok(true),
    }
}

/// A batch of `batch` requests exists from now: one entry each in the user's in-flight table,
/// answered in order, and counted.
fn batch_sent(
    flight: &mut Vec<Slot>,
    sent: &mut Instant,
    intended: Instant,
    batch: u32,
    counters: &mut headroom_metrics::Counters,
) {
    let now = Instant::now();
    *sent = now;
    flight.clear();
    // Room for the batch exactly (`extend` would take room for 4: 144 bytes of each idle
    // connection's 829, issue 29).
    flight.reserve_exact(batch as usize);
    flight.extend((0..batch).map(|i| Slot {
        stream: i,
        intended,
        sent: now,
        index: i,
        again: false,
    }));
    counters.requests += u64::from(batch);
}

/// A fresh non-blocking TCP socket with the plan's options, bound to `bind` if given.
pub(super) fn open_socket(plan: &Plan, bind: Option<std::net::IpAddr>) -> io::Result<Socket> {
    let domain = Domain::for_address(plan.target);
    let sock = Socket::new(
        domain,
        Type::STREAM.nonblocking().cloexec(),
        Some(IpProtocol::TCP),
    )?;
    let o = &plan.socket;
    if o.nodelay {
        sock.set_nodelay(true)?;
    }
    if let Some(b) = o.sndbuf {
        sock.set_send_buffer_size(b as usize)?;
    }
    if let Some(b) = o.rcvbuf {
        sock.set_recv_buffer_size(b as usize)?;
    }
    if let Some(ip) = bind {
        if ip.is_ipv4() {
            // Let the kernel pick the port at connect time, per (source, destination) pair,
            // instead of reserving one at bind time: each source address then gets its own
            // ephemeral range towards the target.
            let one: libc::c_int = 1;
            // SAFETY: valid socket, pointer to a live c_int of the right size.
            unsafe {
                libc::setsockopt(
                    sock.as_raw_fd(),
                    libc::IPPROTO_IP,
                    libc::IP_BIND_ADDRESS_NO_PORT,
                    (&one as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                );
            }
        }
        sock.bind(&SockAddr::from(std::net::SocketAddr::new(ip, 0)))?;
    }
    Ok(sock)
}
