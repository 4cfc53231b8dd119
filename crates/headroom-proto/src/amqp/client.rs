//! Encoders of what the client sends. Every function appends whole frames to `out` (never
//! clears it) and allocates nothing beyond growing it.
//!
//! Channel numbers are the caller's: 1..=[`super::Connection::channel_max`] for everything but
//! the connection's own methods (channel 0). Names, routing keys and consumer tags are short
//! strings: longer than 255 bytes they are cut at 255 (the broker refuses such names anyway).
//! No method is sent with `no-wait`: the codec reports every reply ([`super::Progress`]).

use super::wire::{
    end_frame, end_table, put_field_bool, put_field_str, put_shortstr, put_u16, put_u32, put_u64,
    start_frame, start_method, start_table, FRAME_BODY, FRAME_END, FRAME_HEADER, FRAME_HEARTBEAT,
    FRAME_MIN_SIZE, FRAME_OVERHEAD, PROTOCOL_HEADER,
};

/// Basic.Publish's addressing and flags (one value a session keeps and reuses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Publish<'a> {
    pub channel: u16,
    /// `""`: the default exchange (routes by queue name).
    pub exchange: &'a str,
    pub routing_key: &'a str,
    /// Unroutable messages come back as [`super::Progress::Returned`] instead of being dropped.
    pub mandatory: bool,
    /// delivery-mode 2: the broker writes the message to disk (in a durable queue).
    pub persistent: bool,
}

/// Exchange.Declare's flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExchangeOptions {
    /// Only check that it exists (404 on the channel if not).
    pub passive: bool,
    /// Survives a broker restart.
    pub durable: bool,
    /// Deleted when its last binding goes.
    pub auto_delete: bool,
    /// Not published to by clients, only by exchange-to-exchange bindings.
    pub internal: bool,
}

/// Queue.Declare's flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueOptions {
    /// Only check that it exists (404 on the channel if not); Declare-Ok gives its counts.
    pub passive: bool,
    /// Survives a broker restart (persistent messages in it too).
    pub durable: bool,
    /// This connection's only, deleted when it closes.
    pub exclusive: bool,
    /// Deleted when its last consumer goes.
    pub auto_delete: bool,
}

/// A value in the `arguments` table of [`queue_declare_args`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg<'a> {
    /// `S`, e.g. `x-queue-type: quorum`.
    Str(&'a str),
    /// `l` (64-bit signed), e.g. `x-max-length`, `x-message-ttl`.
    Int(i64),
    /// `t`.
    Bool(bool),
}

/// The protocol header, `AMQP 0 0 9 1`: the first bytes the client sends
/// ([`super::Connection::new`] writes it).
pub fn protocol_header(out: &mut Vec<u8>) {
    out.extend_from_slice(PROTOCOL_HEADER);
}

/// A heartbeat frame (type 8, channel 0, empty): what the engine's timer sends when it has
/// sent nothing else for half the negotiated interval.
pub fn heartbeat(out: &mut Vec<u8>) {
    out.extend_from_slice(&[FRAME_HEARTBEAT, 0, 0, 0, 0, 0, 0, FRAME_END]);
}

/// Channel.Open (20.10): reserved short string. Answered by Channel.Open-Ok.
pub fn channel_open(out: &mut Vec<u8>, channel: u16) {
    let at = start_method(out, channel, 20, 10);
    put_shortstr(out, b""); // reserved-1 (out-of-band)
    end_frame(out, at);
}

/// Channel.Close (20.40) with this reply code (200 for a normal close), an empty text and no
/// failing method. Answered by Channel.Close-Ok.
pub fn channel_close(out: &mut Vec<u8>, channel: u16, reply_code: u16) {
    let at = start_method(out, channel, 20, 40);
    put_u16(out, reply_code);
    put_shortstr(out, b""); // reply-text
    put_u16(out, 0); // class-id
    put_u16(out, 0); // method-id
    end_frame(out, at);
}

/// Exchange.Declare (40.10) of `name` of type `kind` (`direct`, `fanout`, `topic`, `headers`),
/// no arguments. Answered by Exchange.Declare-Ok.
pub fn exchange_declare(
    out: &mut Vec<u8>,
    channel: u16,
    name: &str,
    kind: &str,
    opts: ExchangeOptions,
) {
    let at = start_method(out, channel, 40, 10);
    put_u16(out, 0); // reserved-1 (ticket)
    put_shortstr(out, name.as_bytes());
    put_shortstr(out, kind.as_bytes());
    out.push(
        u8::from(opts.passive)
            | u8::from(opts.durable) << 1
            | u8::from(opts.auto_delete) << 2
            | u8::from(opts.internal) << 3, // bit 4: no-wait, off
    );
    put_u32(out, 0); // arguments: an empty table
    end_frame(out, at);
}

/// Exchange.Delete (40.20). Answered by Exchange.Delete-Ok.
pub fn exchange_delete(out: &mut Vec<u8>, channel: u16, name: &str, if_unused: bool) {
    let at = start_method(out, channel, 40, 20);
    put_u16(out, 0); // reserved-1
    put_shortstr(out, name.as_bytes());
    out.push(u8::from(if_unused)); // bit 1: no-wait, off
    end_frame(out, at);
}

/// Queue.Declare (50.10) of `name` (`""`: the server names it, see
/// [`super::Method::QueueDeclareOk`]), no arguments. Answered by Queue.Declare-Ok.
pub fn queue_declare(out: &mut Vec<u8>, channel: u16, name: &str, opts: QueueOptions) {
    queue_declare_args(out, channel, name, opts, &[]);
}

/// Queue.Declare with an `arguments` table (`x-queue-type`, `x-max-length`, ...).
pub fn queue_declare_args(
    out: &mut Vec<u8>,
    channel: u16,
    name: &str,
    opts: QueueOptions,
    args: &[(&str, Arg<'_>)],
) {
    let at = start_method(out, channel, 50, 10);
    put_u16(out, 0); // reserved-1
    put_shortstr(out, name.as_bytes());
    out.push(
        u8::from(opts.passive)
            | u8::from(opts.durable) << 1
            | u8::from(opts.exclusive) << 2
            | u8::from(opts.auto_delete) << 3, // bit 4: no-wait, off
    );
    let table = start_table(out);
    for (name, value) in args {
        match *value {
            Arg::Str(s) => put_field_str(out, name, s.as_bytes()),
            Arg::Int(i) => {
                put_shortstr(out, name.as_bytes());
                out.push(b'l');
                out.extend_from_slice(&i.to_be_bytes());
            }
            Arg::Bool(b) => put_field_bool(out, name, b),
        }
    }
    end_table(out, table);
    end_frame(out, at);
}

/// Queue.Bind (50.20) of `queue` to `exchange` with `routing_key`, no arguments. Answered by
/// Queue.Bind-Ok.
pub fn queue_bind(out: &mut Vec<u8>, channel: u16, queue: &str, exchange: &str, routing_key: &str) {
    let at = start_method(out, channel, 50, 20);
    put_u16(out, 0); // reserved-1
    put_shortstr(out, queue.as_bytes());
    put_shortstr(out, exchange.as_bytes());
    put_shortstr(out, routing_key.as_bytes());
    out.push(0); // no-wait, off
    put_u32(out, 0); // arguments: an empty table
    end_frame(out, at);
}

/// Queue.Purge (50.30): drop its ready messages. Answered by Queue.Purge-Ok (the count).
pub fn queue_purge(out: &mut Vec<u8>, channel: u16, queue: &str) {
    let at = start_method(out, channel, 50, 30);
    put_u16(out, 0); // reserved-1
    put_shortstr(out, queue.as_bytes());
    out.push(0); // no-wait, off
    end_frame(out, at);
}

/// Queue.Delete (50.40). Answered by Queue.Delete-Ok (the count of messages deleted).
pub fn queue_delete(out: &mut Vec<u8>, channel: u16, queue: &str, if_unused: bool, if_empty: bool) {
    let at = start_method(out, channel, 50, 40);
    put_u16(out, 0); // reserved-1
    put_shortstr(out, queue.as_bytes());
    out.push(u8::from(if_unused) | u8::from(if_empty) << 1); // bit 2: no-wait, off
    end_frame(out, at);
}

/// Basic.Qos (60.10): at most `prefetch_count` unacknowledged deliveries on each consumer of
/// the channel (0: no limit); no size limit. Answered by Basic.Qos-Ok.
pub fn basic_qos(out: &mut Vec<u8>, channel: u16, prefetch_count: u16) {
    let at = start_method(out, channel, 60, 10);
    put_u32(out, 0); // prefetch-size: no limit
    put_u16(out, prefetch_count);
    out.push(0); // global: off (per consumer, in RabbitMQ)
    end_frame(out, at);
}

/// Basic.Consume (60.20) from `queue` (`consumer_tag` `""`: the server chooses one, see
/// [`super::Method::BasicConsumeOk`]). `no_ack`: the server counts messages delivered as
/// acknowledged. Answered by Basic.Consume-Ok, then deliveries.
pub fn basic_consume(
    out: &mut Vec<u8>,
    channel: u16,
    queue: &str,
    consumer_tag: &str,
    no_ack: bool,
) {
    let at = start_method(out, channel, 60, 20);
    put_u16(out, 0); // reserved-1
    put_shortstr(out, queue.as_bytes());
    put_shortstr(out, consumer_tag.as_bytes());
    out.push(u8::from(no_ack) << 1); // no-local 0, no-ack 1, exclusive 2, no-wait 3
    put_u32(out, 0); // arguments: an empty table
    end_frame(out, at);
}

/// Basic.Cancel (60.30) of a consumer. Answered by Basic.Cancel-Ok.
pub fn basic_cancel(out: &mut Vec<u8>, channel: u16, consumer_tag: &str) {
    let at = start_method(out, channel, 60, 30);
    put_shortstr(out, consumer_tag.as_bytes());
    out.push(0); // no-wait, off
    end_frame(out, at);
}

/// Basic.Ack (60.80) of a delivery (`multiple`: and of every earlier one on the channel).
pub fn basic_ack(out: &mut Vec<u8>, channel: u16, delivery_tag: u64, multiple: bool) {
    let at = start_method(out, channel, 60, 80);
    put_u64(out, delivery_tag);
    out.push(u8::from(multiple));
    end_frame(out, at);
}

/// Basic.Nack (60.120, a RabbitMQ extension): refuse a delivery (`multiple`: and every earlier
/// one), `requeue` it or drop (dead-letter) it.
pub fn basic_nack(
    out: &mut Vec<u8>,
    channel: u16,
    delivery_tag: u64,
    multiple: bool,
    requeue: bool,
) {
    let at = start_method(out, channel, 60, 120);
    put_u64(out, delivery_tag);
    out.push(u8::from(multiple) | u8::from(requeue) << 1);
    end_frame(out, at);
}

/// Basic.Reject (60.90): refuse one delivery, `requeue` it or drop it.
pub fn basic_reject(out: &mut Vec<u8>, channel: u16, delivery_tag: u64, requeue: bool) {
    let at = start_method(out, channel, 60, 90);
    put_u64(out, delivery_tag);
    out.push(u8::from(requeue));
    end_frame(out, at);
}

/// Confirm.Select (85.10): publisher confirms on the channel. Answered by Confirm.Select-Ok;
/// from then on every publish is confirmed by a [`super::Progress::Confirm`].
pub fn confirm_select(out: &mut Vec<u8>, channel: u16) {
    let at = start_method(out, channel, 85, 10);
    out.push(0); // nowait, off
    end_frame(out, at);
}

/// Basic.Publish (60.40) of `body`: the method frame, the content header, then body frames of
/// at most `frame_max` bytes each (the negotiated one: [`super::Connection::frame_max`]; the
/// [`super::Connection::basic_publish`] wrapper passes it). An empty body has no body frame.
pub fn basic_publish(out: &mut Vec<u8>, frame_max: u32, p: &Publish<'_>, body: &[u8]) {
    basic_publish_parts(out, frame_max, p, body, 0, 0);
}

/// Basic.Publish of a body made of `head` followed by `fill_len` bytes of `fill`, written
/// straight into the frames (no body buffer): the engine writes its timestamp as `head` and
/// pads to the message size it was asked for.
pub fn basic_publish_parts(
    out: &mut Vec<u8>,
    frame_max: u32,
    p: &Publish<'_>,
    head: &[u8],
    fill: u8,
    fill_len: usize,
) {
    let total = head.len() + fill_len;
    let at = start_method(out, p.channel, 60, 40);
    put_u16(out, 0); // reserved-1
    put_shortstr(out, p.exchange.as_bytes());
    put_shortstr(out, p.routing_key.as_bytes());
    out.push(u8::from(p.mandatory)); // mandatory 0, immediate 1 (off: RabbitMQ refuses it)
    end_frame(out, at);

    // Content header (spec 4.2.6.1): class-id, weight, body size, property flags, properties.
    let at = start_frame(out, FRAME_HEADER, p.channel);
    put_u16(out, 60); // class-id: basic
    put_u16(out, 0); // weight: unused, 0
    put_u64(out, total as u64);
    if p.persistent {
        put_u16(out, 0x1000); // property flags: only delivery-mode (bit 12) present
        out.push(2); // delivery-mode: persistent
    } else {
        put_u16(out, 0); // no properties: transient
    }
    end_frame(out, at);

    // Body frames: payloads of at most frame_max - 8 bytes, head first, then filler.
    let max = frame_max.max(FRAME_MIN_SIZE).saturating_sub(FRAME_OVERHEAD) as usize;
    out.reserve(total + total.div_ceil(max) * FRAME_OVERHEAD as usize);
    let mut head = head;
    let mut fill_left = fill_len;
    while !head.is_empty() || fill_left > 0 {
        let at = start_frame(out, FRAME_BODY, p.channel);
        let from_head = head.len().min(max);
        let (now, later) = head.split_at(from_head);
        out.extend_from_slice(now);
        head = later;
        let from_fill = fill_left.min(max - from_head);
        out.resize(out.len() + from_fill, fill);
        fill_left -= from_fill;
        end_frame(out, at);
    }
}

/// Connection.Close (10.50) with this reply code (200 for a normal close). Answered by
/// Connection.Close-Ok; use [`super::Connection::connection_close`], which also makes the
/// decoder ignore what the server still sends until then.
pub fn connection_close(out: &mut Vec<u8>, reply_code: u16) {
    let at = start_method(out, 0, 10, 50);
    put_u16(out, reply_code);
    put_shortstr(out, b""); // reply-text
    put_u16(out, 0); // class-id
    put_u16(out, 0); // method-id
    end_frame(out, at);
}

// ---- what the codec writes by itself ----

/// The capabilities we announce in Start-Ok's client properties: what the decoder handles.
pub(super) const CAPABILITIES: [&str; 5] = [
    "publisher_confirms",
    "consumer_cancel_notify",
    "basic.nack",
    "connection.blocked",
    // a refused login is a Connection.Close 403 (AuthFailed), not just a closed socket
    "authentication_failure_close",
];

/// Connection.Start-Ok (10.11): client properties (product, platform and capabilities; no
/// version, so that the bytes stay those recorded in `testdata/`), mechanism PLAIN, response
/// `\0user\0password` (RFC 4616, empty authorization identity), locale en_US.
pub(super) fn start_ok(out: &mut Vec<u8>, user: &str, password: &str) {
    let at = start_method(out, 0, 10, 11);
    let props = start_table(out); // client-properties
    put_field_str(out, "product", b"headroom");
    put_field_str(out, "platform", b"Rust");
    put_shortstr(out, b"capabilities");
    out.push(b'F');
    let caps = start_table(out);
    for cap in CAPABILITIES {
        put_field_bool(out, cap, true);
    }
    end_table(out, caps);
    end_table(out, props);
    put_shortstr(out, b"PLAIN"); // mechanism
    put_u32(out, (2 + user.len() + password.len()) as u32); // response: a long string
    out.push(0);
    out.extend_from_slice(user.as_bytes());
    out.push(0);
    out.extend_from_slice(password.as_bytes());
    put_shortstr(out, b"en_US"); // locale
    end_frame(out, at);
}

/// Connection.Tune-Ok (10.31): the negotiated channel-max and frame-max, our heartbeat.
pub(super) fn tune_ok(out: &mut Vec<u8>, channel_max: u16, frame_max: u32, heartbeat: u16) {
    let at = start_method(out, 0, 10, 31);
    put_u16(out, channel_max);
    put_u32(out, frame_max);
    put_u16(out, heartbeat);
    end_frame(out, at);
}

/// Connection.Open (10.40) of a virtual host.
pub(super) fn connection_open(out: &mut Vec<u8>, vhost: &str) {
    let at = start_method(out, 0, 10, 40);
    put_shortstr(out, vhost.as_bytes());
    put_shortstr(out, b""); // reserved-1 (capabilities)
    out.push(0); // reserved-2 (insist)
    end_frame(out, at);
}

/// Connection.Close-Ok (10.51): no arguments.
pub(super) fn connection_close_ok(out: &mut Vec<u8>) {
    let at = start_method(out, 0, 10, 51);
    end_frame(out, at);
}

/// Channel.Close-Ok (20.41): no arguments.
pub(super) fn channel_close_ok(out: &mut Vec<u8>, channel: u16) {
    let at = start_method(out, channel, 20, 41);
    end_frame(out, at);
}

/// Channel.Flow-Ok (20.21): the flow state the server asked for.
pub(super) fn channel_flow_ok(out: &mut Vec<u8>, channel: u16, active: bool) {
    let at = start_method(out, channel, 20, 21);
    out.push(u8::from(active));
    end_frame(out, at);
}

/// Basic.Cancel-Ok (60.31), answering a server's Basic.Cancel that wants a reply.
pub(super) fn basic_cancel_ok(out: &mut Vec<u8>, channel: u16, consumer_tag: &[u8]) {
    let at = start_method(out, channel, 60, 31);
    put_shortstr(out, consumer_tag);
    end_frame(out, at);
}
