//! Receiving: one method per frame type (RFC 9113 §6), the stream and connection errors they
//! raise, and the header-block handling (response heads, 1xx, trailers). Split from `h2.rs`
//! only to keep files short; these are methods of [`ClientConn`].

use super::frame::{self, Head, MAX_31};
use super::*;

impl ClientConn {
    pub(super) fn frame(
        &mut self,
        h: Head,
        payload: &[u8],
        out: &mut Vec<u8>,
        on: &mut (impl FnMut(Event<'_>) + ?Sized),
    ) -> Result<(), ConnError> {
        if let Some(c) = self.cont {
            if h.kind != frame::CONTINUATION || h.stream != c.stream {
                return Err(proto("header block interrupted (CONTINUATION expected)"));
            }
        }
        if !self.got_settings && (h.kind != frame::SETTINGS || h.flags & frame::ACK != 0) {
            return Err(proto("server preface is not a SETTINGS frame"));
        }
        match h.kind {
            frame::DATA => self.on_data(h, payload, out, on),
            frame::HEADERS => self.on_headers(h, payload, out, on),
            frame::PRIORITY => self.on_priority(h, payload, out, on),
            frame::RST_STREAM => self.on_rst(h, payload, on),
            frame::SETTINGS => self.on_settings(h, payload, out),
            frame::PUSH_PROMISE => Err(proto("PUSH_PROMISE although we disabled push")),
            frame::PING => {
                if on_ping(h, payload, out)? {
                    self.queued_control();
                }
                Ok(())
            }
            frame::GOAWAY => self.on_goaway(h, payload, on),
            frame::WINDOW_UPDATE => self.on_window_update(h, payload, out, on),
            frame::CONTINUATION => self.on_continuation(h, payload, out, on),
            // RFC 9113 §5.5: unknown frame types are ignored.
            _ => Ok(()),
        }
    }

    /// A stream error (RFC 9113 §5.4.2): RST_STREAM from us, `Reset` to the caller.
    fn stream_error(
        &mut self,
        i: usize,
        code: u32,
        out: &mut Vec<u8>,
        on: &mut (impl FnMut(Event<'_>) + ?Sized),
    ) {
        let Some(id) = self.streams.get(i).map(|s| s.id) else {
            return;
        };
        frame::write_rst(out, id, code);
        self.queued_control();
        self.free(i);
        on(Event::Reset { stream: id, code });
    }

    /// The response on slot `i` ended.
    fn complete(&mut self, i: usize, out: &mut Vec<u8>, on: &mut (impl FnMut(Event<'_>) + ?Sized)) {
        let Some(s) = self.streams.get(i) else {
            return;
        };
        let (id, status) = (s.id, s.status);
        if s.body_off < s.body.len() {
            // The server answered before our body was out (RFC 9113 §8.1): stop sending it.
            frame::write_rst(out, id, NO_ERROR);
            self.queued_control();
        }
        self.free(i);
        on(Event::Complete { stream: id, status });
    }

    fn on_data(
        &mut self,
        h: Head,
        payload: &[u8],
        out: &mut Vec<u8>,
        on: &mut (impl FnMut(Event<'_>) + ?Sized),
    ) -> Result<(), ConnError> {
        if h.stream == 0 {
            return Err(proto("DATA on stream 0"));
        }
        // Flow control counts the whole payload, padding included (RFC 9113 §6.9).
        let len = payload.len() as u32;
        let conn_pending = self.conn_recv_pending.saturating_add(len);
        if conn_pending > self.our_window.max(frame::DEFAULT_WINDOW) {
            return Err(conn_err(
                FLOW_CONTROL_ERROR,
                "DATA beyond the connection window",
            ));
        }
        self.conn_recv_pending = conn_pending;
        let data = strip_padding(&h, payload)?;
        match self.slot(h.stream) {
            None if self.is_idle(h.stream) => return Err(proto("DATA on an idle stream")),
            None => {}
            Some(i) => {
                let limit = if self.settings_acked {
                    self.our_window
                } else {
                    self.our_window.max(frame::DEFAULT_WINDOW)
                };
                let s = &mut self.streams[i];
                let pending = s.recv_pending.saturating_add(len);
                if s.recv != Recv::Body {
                    self.stream_error(i, PROTOCOL_ERROR, out, on);
                } else if pending > limit {
                    self.stream_error(i, FLOW_CONTROL_ERROR, out, on);
                } else {
                    s.recv_pending = pending;
                    if !data.is_empty() {
                        on(Event::Data {
                            stream: h.stream,
                            data,
                        });
                    }
                    if h.flags & frame::END_STREAM != 0 {
                        self.complete(i, out, on);
                    } else if pending > 0 && pending >= self.our_window / 2 {
                        frame::write_window_update(out, h.stream, pending);
                        s.recv_pending = 0;
                        self.queued_control();
                    }
                }
            }
        }
        let cp = self.conn_recv_pending;
        if cp > 0 && cp >= self.our_window.max(frame::DEFAULT_WINDOW) / 2 {
            frame::write_window_update(out, 0, cp);
            self.conn_recv_pending = 0;
            self.queued_control();
        }
        Ok(())
    }

    fn on_headers(
        &mut self,
        h: Head,
        payload: &[u8],
        out: &mut Vec<u8>,
        on: &mut (impl FnMut(Event<'_>) + ?Sized),
    ) -> Result<(), ConnError> {
        if h.stream == 0 {
            return Err(proto("HEADERS on stream 0"));
        }
        let mut fragment = strip_padding(&h, payload)?;
        if h.flags & frame::PRIORITY_FLAG != 0 {
            // Stream dependency and weight: parsed, ignored.
            fragment = fragment
                .get(5..)
                .ok_or(proto("HEADERS too short for its priority fields"))?;
        }
        if self.is_idle(h.stream) {
            return Err(proto("HEADERS on a stream we did not open"));
        }
        let end_stream = h.flags & frame::END_STREAM != 0;
        if h.flags & frame::END_HEADERS != 0 {
            return self.on_block(h.stream, end_stream, fragment, out, on);
        }
        if fragment.len() > self.max_block {
            return Err(conn_err(ENHANCE_YOUR_CALM, "header block too large"));
        }
        self.block.clear();
        self.block.extend_from_slice(fragment);
        self.cont = Some(Cont {
            stream: h.stream,
            end_stream,
            frames: 0,
        });
        Ok(())
    }

    fn on_continuation(
        &mut self,
        h: Head,
        payload: &[u8],
        out: &mut Vec<u8>,
        on: &mut (impl FnMut(Event<'_>) + ?Sized),
    ) -> Result<(), ConnError> {
        let Some(mut c) = self.cont else {
            return Err(proto("CONTINUATION without a HEADERS before it"));
        };
        c.frames += 1;
        if c.frames > MAX_CONTINUATIONS {
            return Err(conn_err(ENHANCE_YOUR_CALM, "too many CONTINUATION frames"));
        }
        if self.block.len().saturating_add(payload.len()) > self.max_block {
            return Err(conn_err(ENHANCE_YOUR_CALM, "header block too large"));
        }
        self.block.extend_from_slice(payload);
        if h.flags & frame::END_HEADERS == 0 {
            self.cont = Some(c);
            return Ok(());
        }
        self.cont = None;
        let block = std::mem::take(&mut self.block);
        let r = self.on_block(c.stream, c.end_stream, &block, out, on);
        self.block = block;
        r
    }

    /// A whole header block for `stream`: a response head, an informational head or trailers.
    fn on_block(
        &mut self,
        stream: u32,
        end_stream: bool,
        block: &[u8],
        out: &mut Vec<u8>,
        on: &mut (impl FnMut(Event<'_>) + ?Sized),
    ) -> Result<(), ConnError> {
        let compression = |_| conn_err(COMPRESSION_ERROR, "undecodable header block");
        let Some(i) = self.slot(stream) else {
            // A stream we closed: decode anyway, to keep the HPACK table in step.
            self.hdec
                .decode(block, usize::MAX, &mut |_, _| {})
                .map_err(compression)?;
            return Ok(());
        };
        let trailers = self.streams[i].recv == Recv::Body;
        let mut status: u16 = 0;
        let mut malformed = false;
        let mut regular_seen = false;
        let within = self
            .hdec
            .decode(block, self.max_header_list, &mut |name, value| {
                let pseudo = name.first() == Some(&b':');
                if trailers {
                    if pseudo {
                        malformed = true;
                    } else {
                        on(Event::Header {
                            stream,
                            name,
                            value,
                        });
                    }
                } else if pseudo {
                    if name == b":status" && status == 0 && !regular_seen {
                        status = parse_status(value);
                        malformed |= status == 0;
                        if status >= 200 {
                            on(Event::Status { stream, status });
                        }
                    } else {
                        malformed = true;
                    }
                } else {
                    regular_seen = true;
                    if status == 0 {
                        malformed = true;
                    } else if status >= 200 {
                        on(Event::Header {
                            stream,
                            name,
                            value,
                        });
                    }
                }
            })
            .map_err(compression)?;
        if !within || malformed || (trailers && !end_stream) || (!trailers && status == 0) {
            self.stream_error(i, PROTOCOL_ERROR, out, on);
            return Ok(());
        }
        if !trailers {
            if status < 200 {
                // Informational: the final head is still to come (RFC 9113 §8.1).
                if end_stream {
                    self.stream_error(i, PROTOCOL_ERROR, out, on);
                }
                return Ok(());
            }
            let s = &mut self.streams[i];
            s.status = status;
            s.recv = Recv::Body;
        }
        if end_stream {
            self.complete(i, out, on);
        }
        Ok(())
    }

    fn on_priority(
        &mut self,
        h: Head,
        payload: &[u8],
        out: &mut Vec<u8>,
        on: &mut (impl FnMut(Event<'_>) + ?Sized),
    ) -> Result<(), ConnError> {
        if h.stream == 0 {
            return Err(proto("PRIORITY on stream 0"));
        }
        if payload.len() != 5 {
            if let Some(i) = self.slot(h.stream) {
                self.stream_error(i, FRAME_SIZE_ERROR, out, on);
            }
        }
        Ok(())
    }

    fn on_rst(
        &mut self,
        h: Head,
        payload: &[u8],
        on: &mut (impl FnMut(Event<'_>) + ?Sized),
    ) -> Result<(), ConnError> {
        let code: [u8; 4] = payload
            .try_into()
            .map_err(|_| frame_size("RST_STREAM payload is not 4 bytes"))?;
        if h.stream == 0 {
            return Err(proto("RST_STREAM on stream 0"));
        }
        match self.slot(h.stream) {
            Some(i) => {
                self.free(i);
                on(Event::Reset {
                    stream: h.stream,
                    code: u32::from_be_bytes(code),
                });
            }
            None if self.is_idle(h.stream) => return Err(proto("RST_STREAM on an idle stream")),
            None => {}
        }
        Ok(())
    }

    fn on_settings(&mut self, h: Head, payload: &[u8], out: &mut Vec<u8>) -> Result<(), ConnError> {
        if h.stream != 0 {
            return Err(proto("SETTINGS on a stream"));
        }
        if h.flags & frame::ACK != 0 {
            if !payload.is_empty() {
                return Err(frame_size("SETTINGS ACK with a payload"));
            }
            if !self.settings_acked {
                self.settings_acked = true;
                self.hdec.set_max_allowed(self.our_table_size);
            }
            return Ok(());
        }
        if !payload.len().is_multiple_of(6) {
            return Err(frame_size("SETTINGS payload not a multiple of 6"));
        }
        let mut saw_max_streams = false;
        for p in payload.chunks_exact(6) {
            let id = u16::from_be_bytes([p[0], p[1]]);
            let v = u32::from_be_bytes([p[2], p[3], p[4], p[5]]);
            match id {
                frame::SETTINGS_HEADER_TABLE_SIZE => self.henc.set_peer_max(v as usize),
                frame::SETTINGS_ENABLE_PUSH if v != 0 => {
                    return Err(proto("server sent SETTINGS_ENABLE_PUSH other than 0"));
                }
                frame::SETTINGS_MAX_CONCURRENT_STREAMS => {
                    self.peer_max_streams = v;
                    saw_max_streams = true;
                }
                frame::SETTINGS_INITIAL_WINDOW_SIZE => {
                    if v > MAX_31 {
                        return Err(conn_err(
                            FLOW_CONTROL_ERROR,
                            "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1",
                        ));
                    }
                    let delta = i64::from(v) - i64::from(self.peer_initial_window);
                    for s in self.streams.iter_mut().filter(|s| s.id != 0) {
                        s.send_window += delta;
                        if s.send_window > i64::from(MAX_31) {
                            return Err(conn_err(
                                FLOW_CONTROL_ERROR,
                                "SETTINGS_INITIAL_WINDOW_SIZE overflows a stream window",
                            ));
                        }
                    }
                    self.peer_initial_window = v;
                }
                frame::SETTINGS_MAX_FRAME_SIZE => {
                    if !(frame::MIN_MAX_FRAME..=frame::MAX_MAX_FRAME).contains(&v) {
                        return Err(proto("SETTINGS_MAX_FRAME_SIZE out of range"));
                    }
                    self.peer_max_frame = v;
                }
                // MAX_HEADER_LIST_SIZE is advisory; unknown settings are ignored (§6.5.2).
                _ => {}
            }
        }
        if !self.got_settings {
            self.got_settings = true;
            if !saw_max_streams {
                self.peer_max_streams = u32::MAX;
            }
        }
        frame::write_settings_ack(out);
        self.queued_control();
        self.flush_bodies(out);
        Ok(())
    }

    fn on_goaway(
        &mut self,
        h: Head,
        payload: &[u8],
        on: &mut (impl FnMut(Event<'_>) + ?Sized),
    ) -> Result<(), ConnError> {
        if h.stream != 0 {
            return Err(proto("GOAWAY on a stream"));
        }
        let (Some(last), Some(code)) = (payload.get(0..4), payload.get(4..8)) else {
            return Err(frame_size("GOAWAY shorter than 8 bytes"));
        };
        let mut last = u32::from_be_bytes([last[0], last[1], last[2], last[3]]) & MAX_31;
        let code = u32::from_be_bytes([code[0], code[1], code[2], code[3]]);
        if let Some((prev, _)) = self.goaway_recv {
            last = last.min(prev);
        }
        self.goaway_recv = Some((last, code));
        let unprocessed = self.streams.iter().filter(|s| s.id > last).count() as u32;
        on(Event::GoAway {
            last_stream_id: last,
            code,
            unprocessed,
        });
        for i in 0..self.streams.len() {
            let id = self.streams[i].id;
            if id > last {
                self.free(i);
                on(Event::Reset {
                    stream: id,
                    code: REFUSED_STREAM,
                });
            }
        }
        Ok(())
    }

    fn on_window_update(
        &mut self,
        h: Head,
        payload: &[u8],
        out: &mut Vec<u8>,
        on: &mut (impl FnMut(Event<'_>) + ?Sized),
    ) -> Result<(), ConnError> {
        let inc: [u8; 4] = payload
            .try_into()
            .map_err(|_| frame_size("WINDOW_UPDATE payload is not 4 bytes"))?;
        let inc = i64::from(u32::from_be_bytes(inc) & MAX_31);
        if h.stream == 0 {
            if inc == 0 {
                return Err(proto("WINDOW_UPDATE of 0 on the connection"));
            }
            self.conn_send_window += inc;
            if self.conn_send_window > i64::from(MAX_31) {
                return Err(conn_err(
                    FLOW_CONTROL_ERROR,
                    "connection send window above 2^31-1",
                ));
            }
        } else {
            match self.slot(h.stream) {
                None if self.is_idle(h.stream) => {
                    return Err(proto("WINDOW_UPDATE on an idle stream"));
                }
                None => return Ok(()),
                Some(i) => {
                    let s = &mut self.streams[i];
                    if inc == 0 {
                        self.stream_error(i, PROTOCOL_ERROR, out, on);
                        return Ok(());
                    }
                    s.send_window += inc;
                    if s.send_window > i64::from(MAX_31) {
                        self.stream_error(i, FLOW_CONTROL_ERROR, out, on);
                        return Ok(());
                    }
                }
            }
        }
        self.flush_bodies(out);
        Ok(())
    }
}

/// A PING: true if it was answered (an ACK queued).
fn on_ping(h: Head, payload: &[u8], out: &mut Vec<u8>) -> Result<bool, ConnError> {
    if h.stream != 0 {
        return Err(proto("PING on a stream"));
    }
    let data: &[u8; 8] = payload
        .try_into()
        .map_err(|_| frame_size("PING payload is not 8 bytes"))?;
    if h.flags & frame::ACK == 0 {
        frame::write_ping(out, frame::ACK, data);
        return Ok(true);
    }
    Ok(false)
}

/// The payload of a frame without its padding (RFC 9113 §6.1).
fn strip_padding<'a>(h: &Head, payload: &'a [u8]) -> Result<&'a [u8], ConnError> {
    if h.flags & frame::PADDED == 0 {
        return Ok(payload);
    }
    let Some((&pad, rest)) = payload.split_first() else {
        return Err(frame_size("PADDED frame without a pad length"));
    };
    let keep = rest
        .len()
        .checked_sub(usize::from(pad))
        .ok_or(proto("padding longer than the payload"))?;
    Ok(&rest[..keep])
}

/// A `:status` value: three digits, 100..=999; 0 when invalid.
fn parse_status(v: &[u8]) -> u16 {
    match v {
        [a @ b'1'..=b'9', b @ b'0'..=b'9', c @ b'0'..=b'9'] => {
            u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0')
        }
        _ => 0,
    }
}
