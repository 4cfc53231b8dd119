//! The requests in flight on a user's connection, each with its own timing, for every
//! protocol: HTTP/1.1's pipelined batch (N entries answered in order, the oldest first), raw
//! TCP's and the links' one request, HTTP/2's streams (up to `--streams` of a URL run, or a
//! batch's requests), each answered by its stream id. Kept on the user, not in a protocol's
//! state, so every protocol fills and settles the same table, and a reply is timed from its own
//! entry.

use std::time::Instant;

/// How a user's in-flight table is topped up: one policy per run, from what its requests are.
/// Either way quota (`-n`, a user's share) is taken when a request is committed to go (a
/// batch when it starts, a stream when it opens), never when it is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refill {
    /// A batch at a time, refilled when empty: the next batch goes once every request of the
    /// last is answered (and a think time or a pace slot passed). HTTP/1.1's `--pipeline`
    /// requests (as wrk sends them), a session's batch (its steps are in order), a link's or
    /// raw TCP's one request, a request of several hops (a redirect, a Digest answer); over
    /// HTTP/2 the batch's requests go as streams. Requests the server refused unprocessed are
    /// the batch's: they go again with it, or fail with it.
    WhenEmpty,
    /// Refilled per reply: each answered request is replaced at once (or at its pace slot),
    /// up to the connection's capacity (`--streams` and the server's limit). Independent copies
    /// of the run's one request, over HTTP/2. Refused requests are the run's, not the
    /// connection's: they go again first on whatever connection the user has next.
    PerReply,
}

impl Refill {
    /// Requests the server refused and that wait to go again belong to the batch in flight
    /// (they fail with it).
    pub fn refused_are_the_batchs(self) -> bool {
        self == Refill::WhenEmpty
    }
}

/// One request in flight.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Slot {
    /// Its stream (the protocol's id of the request; its index in the batch for a protocol
    /// that answers in order).
    pub stream: u32,
    /// When it was meant to be sent (corrected latency) and when it was (uncorrected).
    pub intended: Instant,
    pub sent: Instant,
    /// Its index in the batch (0 for a URL run's streams).
    pub index: u32,
    /// This is the request's second go: the server refused its first unprocessed (GOAWAY,
    /// REFUSED_STREAM). Refused again, it fails.
    pub again: bool,
}

/// A request the server refused unprocessed, waiting to go again: when it was meant to go, and
/// its index in the batch (0 for a URL run's streams).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Refused {
    pub intended: Instant,
    pub index: u32,
}

/// Takes the request of `stream` out of the table, if it is in flight.
pub(crate) fn take(flight: &mut Vec<Slot>, stream: u32) -> Option<Slot> {
    let i = flight.iter().position(|s| s.stream == stream)?;
    Some(flight.swap_remove(i))
}

/// When the oldest request in flight was sent: its response deadline is the connection's.
pub(crate) fn oldest_sent(flight: &[Slot]) -> Option<Instant> {
    flight.iter().map(|s| s.sent).min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn requests_settle_by_stream_and_the_oldest_send_sets_the_deadline() {
        let t = Instant::now();
        let slot = |stream, after| Slot {
            stream,
            intended: t,
            sent: t + Duration::from_millis(after),
            index: 0,
            again: false,
        };
        let mut f = vec![slot(1, 5), slot(3, 1), slot(5, 9)];
        assert_eq!(oldest_sent(&f), Some(t + Duration::from_millis(1)));
        assert_eq!(take(&mut f, 3).map(|s| s.stream), Some(3));
        assert!(take(&mut f, 3).is_none(), "answered once");
        assert!(take(&mut f, 7).is_none(), "never sent");
        assert_eq!(oldest_sent(&f), Some(t + Duration::from_millis(5)));
        f.clear();
        assert_eq!(oldest_sent(&f), None);
    }
}
