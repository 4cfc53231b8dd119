//! The client connection: frame decoder and state machine. See the module documentation of
//! [`crate::amqp`].

use super::client::{self, Publish};
use super::wire::{
    skip_table, Reader, TableError, DEFAULT_FRAME_MAX, DEFAULT_MAX_TABLE_LEN, FRAME_BODY,
    FRAME_END, FRAME_HEADER, FRAME_HEADER_LEN, FRAME_HEARTBEAT, FRAME_METHOD, FRAME_MIN_SIZE,
    FRAME_OVERHEAD,
};
use super::AmqpError;

/// How many leading bytes of each delivered message body are kept for the engine
/// ([`Progress::Delivery::head`]): room for a timestamp and a sequence number.
pub const HEAD_LEN: usize = 16;
/// A split-frame buffer whose capacity grew beyond this is freed once its frame has been
/// handled, instead of being kept for the next split frame.
pub const RETAINED_CAPACITY: usize = 4 * 1024;

/// Who logs in, and where.
#[derive(Debug, Clone, Copy)]
pub struct Login<'a> {
    pub user: &'a str,
    pub password: &'a str,
    /// The virtual host, e.g. `/`.
    pub vhost: &'a str,
}

/// What the client proposes at Connection.Tune; after the handshake,
/// [`Connection::channel_max`], [`Connection::frame_max`] and [`Connection::heartbeat`] give
/// what was agreed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tuning {
    /// Highest channel number we use (0: no limit of ours). The smaller of ours and the
    /// server's is agreed. Default 2047, RabbitMQ's default.
    pub channel_max: u16,
    /// Largest frame we accept, in bytes, at least [`super::FRAME_MIN_SIZE`]. The smaller of
    /// ours and the server's is agreed. Default [`DEFAULT_FRAME_MAX`].
    pub frame_max: u32,
    /// Heartbeat interval in seconds we ask for (0: none, the default; the server then sends
    /// none either). The engine sends [`client::heartbeat`] on its timer.
    pub heartbeat: u16,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            channel_max: 2047,
            frame_max: DEFAULT_FRAME_MAX,
            heartbeat: 0,
        }
    }
}

/// A synchronous reply the engine asked for (class.method in the spec).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method<'a> {
    /// 20.11
    ChannelOpenOk,
    /// 20.41, the answer to our Channel.Close.
    ChannelCloseOk,
    /// 40.11
    ExchangeDeclareOk,
    /// 40.21
    ExchangeDeleteOk,
    /// 50.11: the queue's name (the server's choice when we declared `""`) and its counts
    /// (what a passive declare is for).
    QueueDeclareOk {
        queue: &'a [u8],
        message_count: u32,
        consumer_count: u32,
    },
    /// 50.21
    QueueBindOk,
    /// 50.31: how many messages were purged.
    QueuePurgeOk { message_count: u32 },
    /// 50.41: how many messages were deleted with the queue.
    QueueDeleteOk { message_count: u32 },
    /// 60.11
    BasicQosOk,
    /// 60.21: the consumer's tag (the server's choice when we gave `""`).
    BasicConsumeOk { consumer_tag: &'a [u8] },
    /// 60.31
    BasicCancelOk { consumer_tag: &'a [u8] },
    /// 85.11: publisher confirms are on for the channel.
    ConfirmSelectOk,
    /// 10.51, the answer to our Connection.Close (channel 0): the server closes the socket.
    ConnectionCloseOk,
}

/// What one [`Connection::decode`] call completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress<'a> {
    /// All input consumed, nothing to report (replies may have been written to `out`).
    NeedMore,
    /// Connection.Open-Ok: logged in, channels may be opened.
    Ready,
    /// A synchronous reply to a method the engine sent.
    MethodOk { channel: u16, method: Method<'a> },
    /// A publisher confirm: Basic.Ack (`ack`) or Basic.Nack (the broker could not take the
    /// message) of `delivery_tag`, and of every earlier unconfirmed tag of the channel when
    /// `multiple`.
    Confirm {
        channel: u16,
        delivery_tag: u64,
        multiple: bool,
        ack: bool,
    },
    /// A message delivered to a consumer (Basic.Deliver, its header and all its body frames).
    Delivery {
        channel: u16,
        delivery_tag: u64,
        redelivered: bool,
        /// The body's size in bytes (counted, not kept).
        body_len: u64,
        /// Its first `min(body_len, HEAD_LEN)` bytes.
        head: &'a [u8],
    },
    /// A mandatory publish the broker could not route came back (Basic.Return: 312 NO_ROUTE),
    /// its content consumed.
    Returned {
        channel: u16,
        reply_code: u16,
        body_len: u64,
    },
    /// The server closed a channel (Channel.Close: 404 NOT_FOUND, 406 PRECONDITION_FAILED,
    /// 403 ACCESS_REFUSED, ...) because of the method `class_id.method_id`; the codec wrote
    /// Channel.Close-Ok. The number may be opened again. Text: [`Connection::last_close_text`].
    ServerClosedChannel {
        channel: u16,
        reply_code: u16,
        class_id: u16,
        method_id: u16,
    },
    /// The server cancelled a consumer (Basic.Cancel: its queue was deleted, or failed over).
    /// The codec wrote Basic.Cancel-Ok if the server wanted one.
    ConsumerCancelled {
        channel: u16,
        consumer_tag: &'a [u8],
    },
    /// Connection.Blocked (a RabbitMQ extension): the broker stops reading from publishers
    /// (memory or disk alarm) until [`Progress::Unblocked`].
    Blocked,
    /// Connection.Unblocked.
    Unblocked,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Protocol header sent, waiting for Connection.Start.
    Start,
    /// Start-Ok sent, waiting for Connection.Tune.
    Tune,
    /// Tune-Ok and Open sent, waiting for Connection.Open-Ok.
    OpenOk,
    Ready,
    /// Connection.Close-Ok received (after ours), or Close-Ok written (after the server's).
    Closed,
}

/// Where the frame decoder is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rx {
    /// Before a frame, or inside its 7-byte header (`hdr_len` bytes of it in `hdr`).
    Header,
    /// Inside a payload: `left` of its `len` bytes still to come.
    Payload {
        typ: u8,
        channel: u16,
        len: u32,
        left: u32,
    },
    /// The payload is in; the frame-end octet comes next.
    End { typ: u8, channel: u16 },
}

/// The framing layer: a frame header in progress, and the payload of a split frame.
#[derive(Debug)]
struct FrameReader {
    rx: Rx,
    hdr: [u8; FRAME_HEADER_LEN],
    hdr_len: u8,
    /// The payload of a method or header frame that arrived split.
    buf: Vec<u8>,
    /// `buf` holds a frame already handled (an event may borrow it): clear it on the next call.
    buf_returned: bool,
}

impl FrameReader {
    fn in_progress(&self) -> bool {
        self.hdr_len > 0 || self.rx != Rx::Header
    }

    fn release(&mut self) {
        self.buf.clear();
        if self.buf.capacity() > RETAINED_CAPACITY {
            self.buf = Vec::new();
        }
    }
}

/// What is needed until Connection.Open is written, then dropped.
struct Creds {
    user: String,
    password: String,
    vhost: String,
}

/// What a message in transit is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ContentKind {
    Deliver {
        delivery_tag: u64,
        redelivered: bool,
    },
    Return {
        reply_code: u16,
    },
}

impl ContentKind {
    fn method(self) -> u16 {
        match self {
            ContentKind::Deliver { .. } => 60,
            ContentKind::Return { .. } => 50,
        }
    }
}

/// A message between its method frame and its last body frame, on one channel.
#[derive(Debug, Clone, Copy)]
struct Pending {
    channel: u16,
    kind: ContentKind,
    /// Its content header arrived (`body_len` and `left` are known).
    header: bool,
    body_len: u64,
    left: u64,
    head: [u8; HEAD_LEN],
}

/// An event before it borrows anything: `p` with placeholders, and where its borrowed parts
/// are (a short string in the frame's payload; the first `head` bytes of `State::head`).
#[derive(Debug, Clone, Copy)]
struct Ev {
    p: Progress<'static>,
    s: Option<(u32, u8)>,
    head: u8,
}

impl Ev {
    fn plain(p: Progress<'static>) -> Ev {
        Ev {
            p,
            s: None,
            head: 0,
        }
    }

    fn method(channel: u16, method: Method<'static>) -> Ev {
        Ev::plain(Progress::MethodOk { channel, method })
    }

    /// Fills in the borrowed parts.
    fn view<'a>(self, payload: &'a [u8], head: &'a [u8; HEAD_LEN]) -> Progress<'a> {
        let s = self
            .s
            .and_then(|(at, n)| {
                let at = at as usize;
                payload.get(at..at + usize::from(n))
            })
            .unwrap_or_default();
        match self.p {
            Progress::MethodOk { channel, method } => Progress::MethodOk {
                channel,
                method: match method {
                    Method::QueueDeclareOk {
                        message_count,
                        consumer_count,
                        ..
                    } => Method::QueueDeclareOk {
                        queue: s,
                        message_count,
                        consumer_count,
                    },
                    Method::BasicConsumeOk { .. } => Method::BasicConsumeOk { consumer_tag: s },
                    Method::BasicCancelOk { .. } => Method::BasicCancelOk { consumer_tag: s },
                    m => m,
                },
            },
            Progress::ConsumerCancelled { channel, .. } => Progress::ConsumerCancelled {
                channel,
                consumer_tag: s,
            },
            Progress::Delivery {
                channel,
                delivery_tag,
                redelivered,
                body_len,
                ..
            } => Progress::Delivery {
                channel,
                delivery_tag,
                redelivered,
                body_len,
                head: head.get(..usize::from(self.head)).unwrap_or_default(),
            },
            p => p,
        }
    }
}

/// Where an event's payload is.
enum Src {
    None,
    /// `start..end` of the input slice given to `step`.
    Input(usize, usize),
    Buf,
}

/// Everything but the framing layer, so that a payload borrowed from the frame buffer can be
/// handled.
struct State {
    phase: Phase,
    creds: Option<Box<Creds>>,
    /// Ours until Connection.Tune, then the agreed values.
    channel_max: u16,
    frame_max: u32,
    heartbeat: u16,
    max_table_len: u32,
    /// We sent Connection.Close: everything but Close and Close-Ok is ignored (spec 2.2.4).
    closing: bool,
    heartbeats: u64,
    /// Messages in transit, at most one per channel.
    pending: Vec<Pending>,
    /// The head of the last completed delivery.
    head: [u8; HEAD_LEN],
    /// (reply code, class, method) of the last Channel.Close or Connection.Close received.
    last_close: Option<(u16, u16, u16)>,
    close_text: String,
}

/// One client connection's protocol state. See the module documentation of [`crate::amqp`].
pub struct Connection {
    rd: FrameReader,
    st: State,
    failed: Option<AmqpError>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("phase", &self.st.phase)
            .field("channel_max", &self.st.channel_max)
            .field("frame_max", &self.st.frame_max)
            .field("heartbeat", &self.st.heartbeat)
            .field("in_transit", &self.st.pending.len())
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// A connection about to log in with the default [`Tuning`]: appends the protocol header
    /// to `out`.
    pub fn new(login: &Login<'_>, out: &mut Vec<u8>) -> Connection {
        Connection::with_tuning(login, Tuning::default(), out)
    }

    /// The same with our own channel-max, frame-max and heartbeat.
    pub fn with_tuning(login: &Login<'_>, tuning: Tuning, out: &mut Vec<u8>) -> Connection {
        client::protocol_header(out);
        Connection {
            rd: FrameReader {
                rx: Rx::Header,
                hdr: [0; FRAME_HEADER_LEN],
                hdr_len: 0,
                buf: Vec::new(),
                buf_returned: false,
            },
            st: State {
                phase: Phase::Start,
                creds: Some(Box::new(Creds {
                    user: login.user.to_owned(),
                    password: login.password.to_owned(),
                    vhost: login.vhost.to_owned(),
                })),
                channel_max: tuning.channel_max,
                frame_max: tuning.frame_max.max(FRAME_MIN_SIZE),
                heartbeat: tuning.heartbeat,
                max_table_len: DEFAULT_MAX_TABLE_LEN,
                closing: false,
                heartbeats: 0,
                pending: Vec::new(),
                head: [0; HEAD_LEN],
                last_close: None,
                close_text: String::new(),
            },
            failed: None,
        }
    }

    /// Longest field table accepted from the server (default [`super::DEFAULT_MAX_TABLE_LEN`]);
    /// longer is [`AmqpError::TableLimit`].
    pub fn set_max_table_len(&mut self, max_len: u32) {
        self.st.max_table_len = max_len;
    }

    /// Feeds bytes read from the socket; replies the protocol needs are appended to `out`.
    /// Returns how many bytes were consumed and what completed; the bytes after a completed
    /// event are not consumed: call again with the rest.
    ///
    /// `NeedMore` comes with all of `input` consumed; any other progress with at least one byte
    /// consumed. After an `Err` the connection is unusable (send `out`, which may hold a
    /// Close-Ok, then close): every later call returns the same error.
    pub fn decode<'a>(
        &'a mut self,
        input: &'a [u8],
        out: &mut Vec<u8>,
    ) -> Result<(usize, Progress<'a>), AmqpError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        if self.rd.buf_returned {
            self.rd.buf_returned = false;
            self.rd.release();
        }
        let mut pos = 0usize;
        loop {
            let rest = input.get(pos..).unwrap_or_default();
            if rest.is_empty() {
                return Ok((pos, Progress::NeedMore));
            }
            match self.step(rest, out) {
                Err(e) => {
                    self.failed = Some(e);
                    return Err(e);
                }
                Ok((used, None)) => pos += used,
                Ok((used, Some((ev, src)))) => {
                    let payload: &[u8] = match src {
                        Src::None => &[],
                        Src::Input(a, b) => rest.get(a..b).unwrap_or_default(),
                        Src::Buf => &self.rd.buf,
                    };
                    return Ok((pos + used, ev.view(payload, &self.st.head)));
                }
            }
        }
    }

    /// Consumes at least one byte of `rest` (not empty); at most one frame is completed.
    fn step(
        &mut self,
        rest: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(usize, Option<(Ev, Src)>), AmqpError> {
        let rd = &mut self.rd;
        match rd.rx {
            Rx::Header => {
                let have = usize::from(rd.hdr_len);
                let take = (FRAME_HEADER_LEN - have).min(rest.len());
                if let (Some(dst), Some(src)) =
                    (rd.hdr.get_mut(have..have + take), rest.get(..take))
                {
                    dst.copy_from_slice(src);
                }
                if have + take < FRAME_HEADER_LEN {
                    rd.hdr_len = (have + take) as u8;
                    return Ok((take, None));
                }
                rd.hdr_len = 0;
                let [typ, c0, c1, s0, s1, s2, s3] = rd.hdr;
                let channel = u16::from_be_bytes([c0, c1]);
                let len = u32::from_be_bytes([s0, s1, s2, s3]);
                if self.st.phase == Phase::Start && rd.hdr.starts_with(b"AMQP") {
                    // The server refused our version and sent the one it speaks.
                    return Err(AmqpError::ProtocolVersion);
                }
                self.st.check_frame(typ, channel, len)?;
                rd.rx = if len == 0 {
                    Rx::End { typ, channel }
                } else {
                    Rx::Payload {
                        typ,
                        channel,
                        len,
                        left: len,
                    }
                };
                Ok((take, None))
            }
            Rx::Payload {
                typ,
                channel,
                len,
                left,
            } => {
                let n = left as usize;
                if typ == FRAME_BODY {
                    // Never buffered: its bytes are counted (and the first few kept) as they come.
                    let take = n.min(rest.len());
                    self.st
                        .body_bytes(channel, rest.get(..take).unwrap_or_default());
                    let left = left - take as u32;
                    rd.rx = if left == 0 {
                        Rx::End { typ, channel }
                    } else {
                        Rx::Payload {
                            typ,
                            channel,
                            len,
                            left,
                        }
                    };
                    return Ok((take, None));
                }
                if left == len && rd.buf.is_empty() && rest.len() > n {
                    // Fast path: the whole payload and its end octet are in this input.
                    if rest.get(n) != Some(&FRAME_END) {
                        return Err(AmqpError::BadFrame);
                    }
                    rd.rx = Rx::Header;
                    let payload = rest.get(..n).unwrap_or_default();
                    let ev = self.st.frame(typ, channel, payload, out)?;
                    return Ok((n + 1, ev.map(|ev| (ev, Src::Input(0, n)))));
                }
                let take = n.min(rest.len());
                rd.buf
                    .extend_from_slice(rest.get(..take).unwrap_or_default());
                let left = left - take as u32;
                rd.rx = if left == 0 {
                    Rx::End { typ, channel }
                } else {
                    Rx::Payload {
                        typ,
                        channel,
                        len,
                        left,
                    }
                };
                Ok((take, None))
            }
            Rx::End { typ, channel } => {
                if rest.first() != Some(&FRAME_END) {
                    return Err(AmqpError::BadFrame);
                }
                rd.rx = Rx::Header;
                if typ == FRAME_BODY {
                    let ev = self.st.body_end(channel);
                    return Ok((1, ev.map(|ev| (ev, Src::None))));
                }
                let ev = self.st.frame(typ, channel, &self.rd.buf, out)?;
                if ev.is_some() {
                    // The event may borrow the buffer: cleared on the next call.
                    self.rd.buf_returned = true;
                } else {
                    self.rd.release();
                }
                Ok((1, ev.map(|ev| (ev, Src::Buf))))
            }
        }
    }

    /// The server closed the connection. `Ok` if it did so between frames once ready (or
    /// after an error already returned, or after the close handshake);
    /// [`AmqpError::Incomplete`] in the middle of a frame, the handshake or a message.
    pub fn eof(&self) -> Result<(), AmqpError> {
        if self.failed.is_some() || self.st.phase == Phase::Closed || self.st.closing {
            return Ok(());
        }
        if self.in_progress() {
            Err(AmqpError::Incomplete)
        } else {
            Ok(())
        }
    }

    /// A frame, the handshake or a message is partly received.
    pub fn in_progress(&self) -> bool {
        self.rd.in_progress() || self.st.phase != Phase::Ready || !self.st.pending.is_empty()
    }

    /// The handshake completed and the connection is neither closed nor failed.
    pub fn is_ready(&self) -> bool {
        self.st.phase == Phase::Ready && !self.st.closing && self.failed.is_none()
    }

    /// The close handshake is over (Close-Ok received or written).
    pub fn is_closed(&self) -> bool {
        self.st.phase == Phase::Closed
    }

    /// Highest channel number usable (agreed at Connection.Tune; ours before).
    pub fn channel_max(&self) -> u16 {
        self.st.channel_max
    }

    /// Largest frame either side sends (agreed at Connection.Tune; ours before).
    pub fn frame_max(&self) -> u32 {
        self.st.frame_max
    }

    /// Heartbeat interval in seconds we announced in Tune-Ok (0: none). Send
    /// [`client::heartbeat`] when nothing else was sent for half of it; the server closes the
    /// connection after two intervals of silence.
    pub fn heartbeat(&self) -> u16 {
        self.st.heartbeat
    }

    /// Heartbeat frames received from the server.
    pub fn heartbeats_received(&self) -> u64 {
        self.st.heartbeats
    }

    /// (reply code, class-id, method-id) of the last Channel.Close or Connection.Close the
    /// server sent.
    pub fn last_close(&self) -> Option<(u16, u16, u16)> {
        self.st.last_close
    }

    /// Its reply text (e.g. `NOT_FOUND - no queue 'x' in vhost '/'`), at most 255 bytes.
    pub fn last_close_text(&self) -> &str {
        &self.st.close_text
    }

    /// Capacity of the split-frame buffer (0 when none is held), for memory accounting.
    pub fn buffer_capacity(&self) -> usize {
        self.rd.buf.capacity()
    }

    /// Capacity of the table of messages in transit, for memory accounting.
    pub fn in_transit_capacity(&self) -> usize {
        self.st.pending.capacity()
    }

    /// Basic.Publish of `body` split at the agreed frame size ([`client::basic_publish`]).
    pub fn basic_publish(&self, out: &mut Vec<u8>, p: &Publish<'_>, body: &[u8]) {
        client::basic_publish(out, self.st.frame_max, p, body);
    }

    /// Basic.Publish of `head` then `fill_len` bytes of `fill`, split at the agreed frame size
    /// ([`client::basic_publish_parts`]).
    pub fn basic_publish_parts(
        &self,
        out: &mut Vec<u8>,
        p: &Publish<'_>,
        head: &[u8],
        fill: u8,
        fill_len: usize,
    ) {
        client::basic_publish_parts(out, self.st.frame_max, p, head, fill, fill_len);
    }

    /// Connection.Close (reply code 200 for a normal close): from now on the decoder ignores
    /// everything but the server's Close-Ok ([`Method::ConnectionCloseOk`]) or Close.
    pub fn connection_close(&mut self, out: &mut Vec<u8>, reply_code: u16) {
        client::connection_close(out, reply_code);
        self.st.closing = true;
        self.st.pending.clear();
    }
}

impl State {
    /// Checks a frame header before its payload is read.
    fn check_frame(&self, typ: u8, channel: u16, len: u32) -> Result<(), AmqpError> {
        if !matches!(
            typ,
            FRAME_METHOD | FRAME_HEADER | FRAME_BODY | FRAME_HEARTBEAT
        ) {
            return Err(AmqpError::BadFrame);
        }
        if len > self.frame_max.saturating_sub(FRAME_OVERHEAD) {
            return Err(AmqpError::TooLong);
        }
        match typ {
            FRAME_HEARTBEAT if channel != 0 || len != 0 => Err(AmqpError::BadFrame),
            FRAME_HEADER | FRAME_BODY if channel == 0 => Err(AmqpError::BadFrame),
            FRAME_BODY if !self.closing => {
                // A body frame belongs to a message whose header came, and cannot overrun it.
                let p = self
                    .find(channel)
                    .filter(|p| p.header)
                    .ok_or(AmqpError::Unexpected(0, 0))?;
                if u64::from(len) > p.left {
                    return Err(AmqpError::Malformed(60, p.kind.method()));
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn find(&self, channel: u16) -> Option<&Pending> {
        self.pending.iter().find(|p| p.channel == channel)
    }

    fn find_index(&self, channel: u16) -> Option<usize> {
        self.pending.iter().position(|p| p.channel == channel)
    }

    /// Bytes of a body frame (validated by `check_frame`): counted, the first few kept.
    fn body_bytes(&mut self, channel: u16, data: &[u8]) {
        let Some(p) = self.pending.iter_mut().find(|p| p.channel == channel) else {
            return; // closing: ignored
        };
        let seen = (p.body_len - p.left) as usize;
        if seen < HEAD_LEN {
            let n = (HEAD_LEN - seen).min(data.len());
            if let (Some(dst), Some(src)) = (p.head.get_mut(seen..seen + n), data.get(..n)) {
                dst.copy_from_slice(src);
            }
        }
        p.left -= data.len() as u64;
    }

    /// A body frame ended: the message is complete when its last byte has come.
    fn body_end(&mut self, channel: u16) -> Option<Ev> {
        let i = self.find_index(channel)?;
        if self.pending.get(i)?.left > 0 {
            return None;
        }
        Some(self.complete(i))
    }

    fn complete(&mut self, i: usize) -> Ev {
        let p = self.pending.swap_remove(i);
        match p.kind {
            ContentKind::Deliver {
                delivery_tag,
                redelivered,
            } => {
                self.head = p.head;
                Ev {
                    p: Progress::Delivery {
                        channel: p.channel,
                        delivery_tag,
                        redelivered,
                        body_len: p.body_len,
                        head: &[],
                    },
                    s: None,
                    head: p.body_len.min(HEAD_LEN as u64) as u8,
                }
            }
            ContentKind::Return { reply_code } => Ev::plain(Progress::Returned {
                channel: p.channel,
                reply_code,
                body_len: p.body_len,
            }),
        }
    }

    /// A whole method, content-header or heartbeat frame.
    fn frame(
        &mut self,
        typ: u8,
        channel: u16,
        payload: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<Option<Ev>, AmqpError> {
        match typ {
            FRAME_METHOD => self.method(channel, payload, out),
            FRAME_HEADER => self.content_header(channel, payload),
            _ => {
                self.heartbeats += 1;
                Ok(None)
            }
        }
    }

    /// Content header (spec 4.2.6.1): class-id, weight, body size, property flags and
    /// properties (not parsed: we read nothing from them).
    fn content_header(&mut self, channel: u16, payload: &[u8]) -> Result<Option<Ev>, AmqpError> {
        if self.closing {
            return Ok(None);
        }
        let i = self
            .find_index(channel)
            .filter(|&i| self.pending.get(i).is_some_and(|p| !p.header))
            .ok_or(AmqpError::Unexpected(0, 0))?;
        let Some(p) = self.pending.get_mut(i) else {
            return Err(AmqpError::Unexpected(0, 0));
        };
        let bad = AmqpError::Malformed(60, p.kind.method());
        let mut r = Reader::new(payload);
        let class = r.u16().ok_or(bad)?;
        let _weight = r.u16().ok_or(bad)?;
        let size = r.u64().ok_or(bad)?;
        r.u16().ok_or(bad)?; // property flags
        if class != 60 {
            return Err(bad);
        }
        p.header = true;
        p.body_len = size;
        p.left = size;
        if size == 0 {
            return Ok(Some(self.complete(i)));
        }
        Ok(None)
    }

    fn method(
        &mut self,
        channel: u16,
        payload: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<Option<Ev>, AmqpError> {
        let mut r = Reader::new(payload);
        let (Some(class), Some(method)) = (r.u16(), r.u16()) else {
            return Err(AmqpError::Malformed(0, 0));
        };
        let bad = AmqpError::Malformed(class, method);
        let unexpected = AmqpError::Unexpected(class, method);
        if self.phase == Phase::Closed {
            return Err(unexpected);
        }
        if self.closing && !matches!((class, method), (10, 50) | (10, 51)) {
            return Ok(None); // spec 2.2.4: discard until Close-Ok
        }
        if class == 10 {
            if channel != 0 {
                return Err(unexpected);
            }
            return self.connection_method(method, r, out);
        }
        if channel == 0
            || channel > self.channel_max
            || self.phase != Phase::Ready
            || self.find(channel).is_some()
        {
            // Not a connection method, or a method in the middle of a message's content.
            return Err(unexpected);
        }
        let ev = match (class, method) {
            (20, 11) => {
                r.longstr().ok_or(bad)?; // reserved-1
                Ev::method(channel, Method::ChannelOpenOk)
            }
            (20, 20) => {
                let active = r.u8().ok_or(bad)? & 1 != 0;
                end(&r, bad)?;
                client::channel_flow_ok(out, channel, active);
                return Ok(None);
            }
            (20, 40) => {
                let (code, class_id, method_id) = self.close_args(&mut r, bad)?;
                end(&r, bad)?;
                client::channel_close_ok(out, channel);
                return Ok(Some(Ev::plain(Progress::ServerClosedChannel {
                    channel,
                    reply_code: code,
                    class_id,
                    method_id,
                })));
            }
            (20, 41) => Ev::method(channel, Method::ChannelCloseOk),
            (40, 11) => Ev::method(channel, Method::ExchangeDeclareOk),
            (40, 21) => Ev::method(channel, Method::ExchangeDeleteOk),
            (50, 11) => {
                let s = r.shortstr_at().ok_or(bad)?;
                let message_count = r.u32().ok_or(bad)?;
                let consumer_count = r.u32().ok_or(bad)?;
                Ev {
                    s: Some(s),
                    ..Ev::method(
                        channel,
                        Method::QueueDeclareOk {
                            queue: &[],
                            message_count,
                            consumer_count,
                        },
                    )
                }
            }
            (50, 21) => Ev::method(channel, Method::QueueBindOk),
            (50, 31) => {
                let message_count = r.u32().ok_or(bad)?;
                Ev::method(channel, Method::QueuePurgeOk { message_count })
            }
            (50, 41) => {
                let message_count = r.u32().ok_or(bad)?;
                Ev::method(channel, Method::QueueDeleteOk { message_count })
            }
            (60, 11) => Ev::method(channel, Method::BasicQosOk),
            (60, 21) | (60, 31) => {
                let s = r.shortstr_at().ok_or(bad)?;
                let method = if method == 21 {
                    Method::BasicConsumeOk { consumer_tag: &[] }
                } else {
                    Method::BasicCancelOk { consumer_tag: &[] }
                };
                Ev {
                    s: Some(s),
                    ..Ev::method(channel, method)
                }
            }
            (60, 30) => {
                // The server cancels a consumer (consumer_cancel_notify).
                let (at, n) = r.shortstr_at().ok_or(bad)?;
                let no_wait = r.u8().ok_or(bad)? & 1 != 0;
                end(&r, bad)?;
                if !no_wait {
                    let tag = payload
                        .get(at as usize..at as usize + usize::from(n))
                        .unwrap_or_default();
                    client::basic_cancel_ok(out, channel, tag);
                }
                return Ok(Some(Ev {
                    p: Progress::ConsumerCancelled {
                        channel,
                        consumer_tag: &[],
                    },
                    s: Some((at, n)),
                    head: 0,
                }));
            }
            (60, 50) => {
                let reply_code = r.u16().ok_or(bad)?;
                r.shortstr().ok_or(bad)?; // reply-text
                r.shortstr().ok_or(bad)?; // exchange
                r.shortstr().ok_or(bad)?; // routing-key
                end(&r, bad)?;
                self.start_content(channel, ContentKind::Return { reply_code });
                return Ok(None);
            }
            (60, 60) => {
                r.shortstr().ok_or(bad)?; // consumer-tag
                let delivery_tag = r.u64().ok_or(bad)?;
                let redelivered = r.u8().ok_or(bad)? & 1 != 0;
                r.shortstr().ok_or(bad)?; // exchange
                r.shortstr().ok_or(bad)?; // routing-key
                end(&r, bad)?;
                self.start_content(
                    channel,
                    ContentKind::Deliver {
                        delivery_tag,
                        redelivered,
                    },
                );
                return Ok(None);
            }
            (60, 80) | (60, 120) => {
                let delivery_tag = r.u64().ok_or(bad)?;
                let bits = r.u8().ok_or(bad)?;
                Ev::plain(Progress::Confirm {
                    channel,
                    delivery_tag,
                    multiple: bits & 1 != 0,
                    ack: method == 80,
                })
            }
            (85, 11) => Ev::method(channel, Method::ConfirmSelectOk),
            _ => return Err(unexpected),
        };
        end(&r, bad)?;
        Ok(Some(ev))
    }

    fn start_content(&mut self, channel: u16, kind: ContentKind) {
        self.pending.push(Pending {
            channel,
            kind,
            header: false,
            body_len: 0,
            left: 0,
            head: [0; HEAD_LEN],
        });
    }

    /// Connection.* on channel 0.
    fn connection_method(
        &mut self,
        method: u16,
        mut r: Reader<'_>,
        out: &mut Vec<u8>,
    ) -> Result<Option<Ev>, AmqpError> {
        let bad = AmqpError::Malformed(10, method);
        let unexpected = AmqpError::Unexpected(10, method);
        match (self.phase, method) {
            (Phase::Start, 10) => {
                let major = r.u8().ok_or(bad)?;
                let minor = r.u8().ok_or(bad)?;
                if (major, minor) != (0, 9) {
                    return Err(AmqpError::ProtocolVersion);
                }
                skip_table(&mut r, self.max_table_len).map_err(|e| match e {
                    TableError::Malformed => bad,
                    TableError::Limit => AmqpError::TableLimit,
                })?; // server-properties
                let mechanisms = r.longstr().ok_or(bad)?;
                r.longstr().ok_or(bad)?; // locales
                end(&r, bad)?;
                if !mechanisms.split(|&b| b == b' ').any(|m| m == b"PLAIN") {
                    return Err(AmqpError::NoPlainMechanism);
                }
                let creds = self.creds.as_deref().ok_or(unexpected)?;
                client::start_ok(out, &creds.user, &creds.password);
                self.phase = Phase::Tune;
                Ok(None)
            }
            (Phase::Tune, 30) => {
                let channel_max = r.u16().ok_or(bad)?;
                let frame_max = r.u32().ok_or(bad)?;
                let _server_heartbeat = r.u16().ok_or(bad)?;
                end(&r, bad)?;
                if frame_max != 0 && frame_max < FRAME_MIN_SIZE {
                    return Err(bad);
                }
                // 0 means "no limit" on either side.
                let limit = |v: u16| if v == 0 { u16::MAX } else { v };
                self.channel_max = limit(self.channel_max).min(limit(channel_max));
                if frame_max != 0 {
                    self.frame_max = self.frame_max.min(frame_max);
                }
                client::tune_ok(out, self.channel_max, self.frame_max, self.heartbeat);
                let creds = self.creds.take().ok_or(unexpected)?;
                client::connection_open(out, &creds.vhost);
                self.phase = Phase::OpenOk;
                Ok(None)
            }
            (Phase::OpenOk, 41) => {
                r.shortstr().ok_or(bad)?; // reserved-1 (known-hosts)
                end(&r, bad)?;
                self.phase = Phase::Ready;
                Ok(Some(Ev::plain(Progress::Ready)))
            }
            (_, 50) => {
                let (code, _, _) = self.close_args(&mut r, bad)?;
                end(&r, bad)?;
                client::connection_close_ok(out);
                let during_handshake = self.phase != Phase::Ready;
                self.phase = Phase::Closed;
                self.pending.clear();
                Err(
                    if during_handshake && code == super::reply::ACCESS_REFUSED {
                        AmqpError::AuthFailed
                    } else {
                        AmqpError::ServerClosed(code)
                    },
                )
            }
            (_, 51) if self.closing => {
                end(&r, bad)?;
                self.phase = Phase::Closed;
                Ok(Some(Ev::method(0, Method::ConnectionCloseOk)))
            }
            (Phase::Tune | Phase::OpenOk | Phase::Ready, 60) => {
                r.shortstr().ok_or(bad)?; // reason
                end(&r, bad)?;
                Ok(Some(Ev::plain(Progress::Blocked)))
            }
            (Phase::Tune | Phase::OpenOk | Phase::Ready, 61) => {
                end(&r, bad)?;
                Ok(Some(Ev::plain(Progress::Unblocked)))
            }
            _ => Err(unexpected),
        }
    }

    /// The arguments of Connection.Close and Channel.Close: reply-code, reply-text (kept for
    /// [`Connection::last_close_text`]), class-id, method-id.
    fn close_args(
        &mut self,
        r: &mut Reader<'_>,
        bad: AmqpError,
    ) -> Result<(u16, u16, u16), AmqpError> {
        let code = r.u16().ok_or(bad)?;
        let text = r.shortstr().ok_or(bad)?;
        let class = r.u16().ok_or(bad)?;
        let method = r.u16().ok_or(bad)?;
        self.last_close = Some((code, class, method));
        self.close_text.clear();
        self.close_text.push_str(&String::from_utf8_lossy(text));
        Ok((code, class, method))
    }
}

/// The arguments ended where the payload does.
fn end(r: &Reader<'_>, bad: AmqpError) -> Result<(), AmqpError> {
    if r.is_empty() {
        Ok(())
    } else {
        Err(bad)
    }
}

#[cfg(test)]
pub(super) fn sizes() -> (usize, usize) {
    (
        std::mem::size_of::<Connection>(),
        std::mem::size_of::<Pending>(),
    )
}
