//! When is a request done? Tsung's `ack` attribute, and the question the engine asks of every
//! event while a request is outstanding: "is this the reply I wait for?".

use super::splitter::{Event, Kind, StanzaType};

/// Tsung's `ack` of a `<jabber>` request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ack {
    /// Done as soon as it is written (Tsung `no_ack`).
    NoAck,
    /// Done at the first event from the server, whatever it is (Tsung `local`: "as soon as a
    /// packet is received"). Whitespace keep-alives are not events.
    Local,
    /// Done at the reply that matches it (see [`Wait::for_request`]). Note: Tsung's `global`
    /// is something else, a barrier (every user waits until `global_number` users reached it);
    /// that belongs to the engine's scheduler, not to the protocol.
    Global,
}

/// What a request is, for deciding what its reply is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RequestKind {
    /// An iq `get`/`set` carrying the caller's numeric id: answered by an iq `result` or `error`
    /// with the same id.
    Iq { id: u64 },
    /// A message or presence: XMPP sends no reply to the sender (a chat's delivery is counted
    /// on the receiver's side, from the message stanza it receives).
    NoReply,
    /// The client's `</stream:stream>`: answered by the server's.
    Close,
}

/// What the engine waits for after sending a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Wait {
    /// Nothing: the request is done when written.
    Nothing,
    /// Any event.
    AnyEvent,
    /// The iq `result`/`error` with this id.
    IqReply(u64),
    /// The server's `</stream:stream>`.
    StreamClose,
}

/// The answer to "is this the reply I wait for?".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WaitOutcome {
    /// Not yet: keep waiting (the event is someone else's business, e.g. an incoming chat).
    Pending,
    /// The request is done.
    Done,
    /// The request failed; count it under `kind()`.
    Failed(ReplyError),
}

/// Why a request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum ReplyError {
    #[error("the server answered with an error (type='error')")]
    ErrorReply,
    #[error("the server sent a stream error")]
    StreamError,
    #[error("the server closed the stream")]
    Closed,
}

impl ReplyError {
    pub fn kind(self) -> &'static str {
        match self {
            ReplyError::ErrorReply => "xmpp_error_reply",
            ReplyError::StreamError => "xmpp_stream_error",
            ReplyError::Closed => "closed",
        }
    }
}

impl Wait {
    /// What to wait for after sending a request of `kind` with acknowledgement `ack`.
    /// `Global` on a message or presence waits for nothing (there is no reply to wait for).
    pub fn for_request(ack: Ack, kind: RequestKind) -> Wait {
        match (ack, kind) {
            (Ack::NoAck, _) => Wait::Nothing,
            // What the server sends after a client's close is its own close (its stanzas in
            // flight before it): waiting for "any event" would fail the close at the very
            // answer it asked for (Tsung's `close` with `ack="local"`, as in its examples).
            (Ack::Local, RequestKind::Close) => Wait::StreamClose,
            (Ack::Local, _) => Wait::AnyEvent,
            (Ack::Global, RequestKind::Iq { id }) => Wait::IqReply(id),
            (Ack::Global, RequestKind::NoReply) => Wait::Nothing,
            (Ack::Global, RequestKind::Close) => Wait::StreamClose,
        }
    }

    /// Is `ev` the reply this wait is for?
    pub fn check(&self, ev: &Event<'_>) -> WaitOutcome {
        match (*self, ev) {
            (Wait::Nothing, _) => WaitOutcome::Done,
            (Wait::StreamClose, Event::StreamClose { .. }) => WaitOutcome::Done,
            (_, Event::StreamClose { .. }) => WaitOutcome::Failed(ReplyError::Closed),
            (Wait::StreamClose, _) => WaitOutcome::Pending,
            (_, Event::Stanza(s)) if s.kind == Kind::StreamError => {
                WaitOutcome::Failed(ReplyError::StreamError)
            }
            (Wait::AnyEvent, _) => WaitOutcome::Done,
            (Wait::IqReply(id), Event::Stanza(s)) => {
                if s.kind != Kind::Iq || s.id_u64() != Some(id) {
                    return WaitOutcome::Pending;
                }
                match s.stanza_type() {
                    StanzaType::Result => WaitOutcome::Done,
                    StanzaType::Error => WaitOutcome::Failed(ReplyError::ErrorReply),
                    // A get/set from the server with our id is not an answer.
                    _ => WaitOutcome::Pending,
                }
            }
            (Wait::IqReply(_), Event::StreamOpen(_)) => WaitOutcome::Pending,
        }
    }
}
