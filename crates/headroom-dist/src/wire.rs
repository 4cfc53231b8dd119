//! Wire form of a [`Recorder`]: exact, so that recorders merged after a round trip give the same
//! percentiles as one histogram holding every sample.
//!
//! Histograms travel as HdrHistogram V2 serialized bytes, *not* deflated. Measured on this
//! project's 2-core machine (release build) for a busy interval histogram of 100,000 samples
//! spread from microseconds to minutes: plain V2 is 7.9 KB in 25 µs, V2 deflate 5.1 KB in
//! 550 µs — a third smaller for 20 times the CPU (see the `v2_plain_vs_deflate_size_and_time`
//! test, which prints both). One message per agent per interval makes the size a non-issue,
//! and the plain form lets the decoder bound every length by the bytes actually received (a
//! deflated payload could announce gigabytes).
//!
//! Decoding never panics on bad input: wrong array lengths, foreign histogram bounds or corrupt
//! bytes are a [`WireError`].

use std::io::Cursor;

use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;
use headroom_core::{ErrorKind, ProtoCounter, STATUS_CODES};
use headroom_engine::Interval;
use headroom_metrics::{
    micros, Counters, NameStats, Negotiated, NegotiatedSet, Recorder, ALPN_MAX, MAX_LATENCY_US,
    NEGOTIATED_MAX, SIGFIG,
};

use crate::messages::{CountersMsg, IntervalMsg, NameStatsMsg, NegotiatedMsg, RecorderMsg};

/// A message that does not decode to a [`Recorder`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WireError {
    #[error("recorder without counters")]
    MissingCounters,
    #[error("counters.{field} has {got} entries, expected {expected} (agent of another version?)")]
    ArrayLength {
        field: &'static str,
        got: usize,
        expected: usize,
    },
    #[error("histogram {which}: {why}")]
    Histogram { which: String, why: String },
    #[error("interval without a recorder")]
    MissingRecorder,
    #[error("negotiated TLS: {0}")]
    Negotiated(String),
}

/// V2 header: cookie, payload length, normalizing offset, significant digits, lowest, highest,
/// integer-to-double ratio.
const V2_HEADER: usize = 40;
const V2_COOKIE: u32 = 0x1c84_9303 | 0x10;

/// Encodes histograms for the wire, with the standard bounds the decoder checks: a recorder's
/// histograms are sized by their values, and go through a scratch one of the standard range
/// ([`headroom_metrics::standard_range`]).
#[derive(Default)]
struct HistogramEncoder {
    ser: V2Serializer,
    scratch: Option<Histogram<u64>>,
}

fn encode_histogram(e: &mut HistogramEncoder, h: &Histogram<u64>) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    let h = headroom_metrics::standard_range(h, &mut e.scratch);
    // Writing to a Vec cannot fail, and a count above i64::MAX (the only other error) would take
    // millennia to record.
    e.ser
        .serialize(h, &mut out)
        .expect("V2 serialization of a u64 histogram into a Vec");
    out
}

fn decode_histogram(
    d: &mut Deserializer,
    bytes: &[u8],
    which: impl Fn() -> String,
) -> Result<Histogram<u64>, WireError> {
    let err = |why: String| WireError::Histogram {
        which: which(),
        why,
    };
    // Check the header ourselves: the deserializer trusts the announced payload length (it would
    // allocate it) and accepts any bounds, while merging needs headroom's standard ones.
    if bytes.len() < V2_HEADER {
        return Err(err(format!("{} bytes, shorter than a header", bytes.len())));
    }
    let be32 = |i: usize| u32::from_be_bytes(bytes[i..i + 4].try_into().expect("4 bytes"));
    let be64 = |i: usize| u64::from_be_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
    if be32(0) != V2_COOKIE {
        return Err(err("not an HdrHistogram V2 encoding".into()));
    }
    let payload = be32(4) as usize;
    if payload != bytes.len() - V2_HEADER {
        return Err(err(format!(
            "payload of {payload} bytes announced, {} present",
            bytes.len() - V2_HEADER
        )));
    }
    let (digits, low, high) = (be32(12), be64(16), be64(24));
    if digits != u32::from(SIGFIG) || low != 1 || high != MAX_LATENCY_US {
        return Err(err(format!(
            "bounds 1..{MAX_LATENCY_US} at {SIGFIG} digits expected, got {low}..{high} at {digits}"
        )));
    }
    // The deserializer can still overflow on adversarial varints (a panic in debug builds):
    // contain it.
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        d.deserialize::<u64, _>(&mut Cursor::new(bytes))
    }));
    match r {
        Ok(Ok(h)) => Ok(h),
        Ok(Err(e)) => Err(err(format!("{e:?}"))),
        Err(_) => Err(err("corrupt counts".into())),
    }
}

/// Encode a recorder for the wire.
pub fn encode_recorder(r: &Recorder) -> RecorderMsg {
    // Exhaustive destructuring: a field added to Counters or Recorder fails to compile here
    // until it is carried over the wire too.
    let Recorder {
        latency,
        latency_uncorrected,
        connect,
        tls,
        sessions,
        served,
        lag,
        counters,
        negotiated,
        names,
        matches,
    } = r;
    let Counters {
        requests,
        responses,
        errors,
        status,
        status_codes,
        bytes_sent,
        bytes_received,
        users_started,
        users_finished,
        connects,
        disconnects,
        connections_open,
        connections_peak,
        tcp_connected_open,
        tcp_connected_peak,
        idle_closed,
        reconnects,
        users_active,
        sessions_completed,
        sessions_aborted,
        users_dropped,
        proto,
        worker_cpu_us,
        worker_wait_us,
        worker_intervals,
        worker_busy_intervals,
        worker_late_intervals,
    } = *counters;
    let mut s = HistogramEncoder::default();
    RecorderMsg {
        latency: encode_histogram(&mut s, latency),
        latency_uncorrected: encode_histogram(&mut s, latency_uncorrected),
        connect: encode_histogram(&mut s, connect),
        tls: encode_histogram(&mut s, tls),
        sessions: encode_histogram(&mut s, sessions),
        served: encode_histogram(&mut s, served),
        lag: encode_histogram(&mut s, lag),
        counters: Some(CountersMsg {
            requests,
            responses,
            errors: errors.to_vec(),
            status: status.to_vec(),
            bytes_sent,
            bytes_received,
            users_started,
            users_finished,
            connects,
            disconnects,
            connections_open,
            connections_peak,
            users_active,
            sessions_completed,
            sessions_aborted,
            users_dropped,
            proto: proto.to_vec(),
            status_codes: status_codes.to_vec(),
            tcp_connected_open,
            tcp_connected_peak,
            idle_closed,
            reconnects,
            worker_cpu_us,
            worker_intervals,
            worker_busy_intervals,
            worker_wait_us,
            worker_late_intervals,
        }),
        names: names
            .iter()
            .map(|n| {
                let NameStats {
                    count,
                    errors,
                    latency,
                } = n;
                NameStatsMsg {
                    count: *count,
                    errors: *errors,
                    latency: encode_histogram(&mut s, latency),
                }
            })
            .collect(),
        matches: matches.clone(),
        negotiated: negotiated
            .iter()
            .map(|(k, count)| {
                let Negotiated {
                    version,
                    suite,
                    group,
                    alpn: _,
                    alpn_len: _,
                    http,
                } = *k;
                NegotiatedMsg {
                    version: version.into(),
                    suite: suite.into(),
                    group: group.into(),
                    alpn: k.alpn().unwrap_or_default().to_vec(),
                    http: http.into(),
                    count,
                }
            })
            .collect(),
        negotiated_other: negotiated.other,
    }
}

/// The negotiated set of a message: bounded like the sender's, every code in its range.
fn decode_negotiated(m: &RecorderMsg) -> Result<NegotiatedSet, WireError> {
    let err = |why: String| WireError::Negotiated(why);
    if m.negotiated.len() > NEGOTIATED_MAX {
        return Err(err(format!(
            "{} combinations, at most {NEGOTIATED_MAX} expected",
            m.negotiated.len()
        )));
    }
    let code = |field: &str, v: u32| {
        u16::try_from(v).map_err(|_| err(format!("{field} {v} is not a 16-bit code")))
    };
    let mut set = NegotiatedSet::default();
    for n in &m.negotiated {
        if n.alpn.len() > ALPN_MAX {
            return Err(err(format!(
                "an ALPN protocol of {} bytes, at most {ALPN_MAX} expected",
                n.alpn.len()
            )));
        }
        let mut k = Negotiated {
            version: code("version", n.version)?,
            suite: code("suite", n.suite)?,
            group: code("group", n.group)?,
            http: u8::try_from(n.http).map_err(|_| err(format!("http {}", n.http)))?,
            ..Negotiated::default()
        };
        k.set_alpn(Some(&n.alpn));
        set.count(&k, n.count);
    }
    set.other = m.negotiated_other;
    Ok(set)
}

fn array<const N: usize>(field: &'static str, v: &[u64]) -> Result<[u64; N], WireError> {
    v.try_into().map_err(|_| WireError::ArrayLength {
        field,
        got: v.len(),
        expected: N,
    })
}

/// Decode a recorder received from the wire; the exact inverse of [`encode_recorder`].
pub fn decode_recorder(m: &RecorderMsg) -> Result<Recorder, WireError> {
    let c = m.counters.as_ref().ok_or(WireError::MissingCounters)?;
    let counters = Counters {
        requests: c.requests,
        responses: c.responses,
        errors: array::<{ ErrorKind::COUNT }>("errors", &c.errors)?,
        status: array::<6>("status", &c.status)?,
        status_codes: array::<STATUS_CODES>("status_codes", &c.status_codes)?,
        bytes_sent: c.bytes_sent,
        bytes_received: c.bytes_received,
        users_started: c.users_started,
        users_finished: c.users_finished,
        connects: c.connects,
        disconnects: c.disconnects,
        connections_open: c.connections_open,
        connections_peak: c.connections_peak,
        tcp_connected_open: c.tcp_connected_open,
        tcp_connected_peak: c.tcp_connected_peak,
        idle_closed: c.idle_closed,
        reconnects: c.reconnects,
        users_active: c.users_active,
        sessions_completed: c.sessions_completed,
        sessions_aborted: c.sessions_aborted,
        users_dropped: c.users_dropped,
        proto: array::<{ ProtoCounter::COUNT }>("proto", &c.proto)?,
        worker_cpu_us: c.worker_cpu_us,
        worker_wait_us: c.worker_wait_us,
        worker_late_intervals: c.worker_late_intervals,
        worker_intervals: c.worker_intervals,
        worker_busy_intervals: c.worker_busy_intervals,
    };
    let mut d = Deserializer::new();
    let mut names = Vec::with_capacity(m.names.len());
    for (i, n) in m.names.iter().enumerate() {
        names.push(NameStats {
            count: n.count,
            errors: n.errors,
            latency: decode_histogram(&mut d, &n.latency, || format!("names[{i}].latency"))?,
        });
    }
    Ok(Recorder {
        latency: decode_histogram(&mut d, &m.latency, || "latency".into())?,
        latency_uncorrected: decode_histogram(&mut d, &m.latency_uncorrected, || {
            "latency_uncorrected".into()
        })?,
        connect: decode_histogram(&mut d, &m.connect, || "connect".into())?,
        tls: decode_histogram(&mut d, &m.tls, || "tls".into())?,
        sessions: decode_histogram(&mut d, &m.sessions, || "sessions".into())?,
        served: decode_histogram(&mut d, &m.served, || "served".into())?,
        lag: decode_histogram(&mut d, &m.lag, || "lag".into())?,
        counters,
        negotiated: decode_negotiated(m)?,
        names,
        matches: m.matches.clone(),
    })
}

/// Encode one of the engine's merged intervals (the agent's sink does this once per interval).
pub fn encode_interval(iv: &Interval<'_>) -> IntervalMsg {
    IntervalMsg {
        index: iv.index,
        start_us: micros(iv.start),
        length_us: micros(iv.length),
        workers_done: iv.workers_done as u64,
        workers: iv.workers as u64,
        recorder: Some(encode_recorder(iv.merged)),
    }
}

/// The recorder of a received interval.
pub fn decode_interval(m: &IntervalMsg) -> Result<Recorder, WireError> {
    decode_recorder(m.recorder.as_ref().ok_or(WireError::MissingRecorder)?)
}

#[cfg(test)]
mod tests;
