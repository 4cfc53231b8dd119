//! HdrHistogram interval log writer (the format read by HdrHistogram's `HistogramLogReader`,
//! `HistogramLogAnalyzer` and hdrhistogram-rs's `IntervalLogIterator`).
//!
//! Written by hand over the crate's V2+Deflate serializer because the crate's own
//! `IntervalLogWriter` borrows its output for its whole life, which does not fit a writer that is
//! fed one interval at a time from the collector. Each line is flushed as it is written, so a
//! killed run keeps every finished interval.

use std::io::{self, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

/// Writes one interval log.
pub struct HlogWriter<W: Write> {
    out: W,
    ser: V2DeflateSerializer,
    buf: Vec<u8>,
    /// A histogram of the standard range, to write a recorder's (sized by its values) with the
    /// standard bounds ([`crate::standard_range`]).
    scratch: Option<Histogram<u64>>,
}

impl<W: Write> HlogWriter<W> {
    /// Start a log: writes the version, start time and legend headers.
    pub fn new(mut out: W, start: SystemTime, comment: &str) -> io::Result<Self> {
        let start_s = start
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        for line in comment.lines() {
            writeln!(out, "#{line}")?;
        }
        writeln!(out, "#[Histogram log format version 1.3]")?;
        writeln!(out, "#[StartTime: {start_s:.3} (seconds since epoch)]")?;
        writeln!(out, "#[BaseTime: {start_s:.3} (seconds since epoch)]")?;
        writeln!(out, "#[MaxValueDivisor: 1000.0]")?;
        writeln!(
            out,
            "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\""
        )?;
        out.flush()?;
        Ok(HlogWriter {
            out,
            ser: V2DeflateSerializer::new(),
            buf: Vec::new(),
            scratch: None,
        })
    }

    /// Append one interval: `offset` from the start time, `length`, and its histogram
    /// (microseconds; Interval_Max is written in milliseconds, per MaxValueDivisor).
    pub fn write(
        &mut self,
        tag: Option<&str>,
        offset: Duration,
        length: Duration,
        h: &Histogram<u64>,
    ) -> io::Result<()> {
        self.buf.clear();
        let h = crate::standard_range(h, &mut self.scratch);
        self.ser
            .serialize(h, &mut self.buf)
            .map_err(|e| io::Error::other(format!("histogram encoding: {e:?}")))?;
        let b64 = base64::engine::general_purpose::STANDARD.encode(&self.buf);
        if let Some(t) = tag {
            write!(self.out, "Tag={t},")?;
        }
        writeln!(
            self.out,
            "{:.3},{:.3},{:.3},{}",
            offset.as_secs_f64(),
            length.as_secs_f64(),
            h.max() as f64 / 1000.0,
            b64
        )?;
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};

    #[test]
    fn log_reads_back_with_hdrhistogram_reader() {
        let mut h = crate::new_histogram();
        for v in 1..=1000u64 {
            h.record(v * 10).unwrap();
        }
        let mut out = Vec::new();
        {
            let mut w = HlogWriter::new(&mut out, SystemTime::now(), "test").unwrap();
            w.write(None, Duration::ZERO, Duration::from_secs(1), &h)
                .unwrap();
            w.write(
                Some("connect"),
                Duration::from_secs(1),
                Duration::from_secs(1),
                &h,
            )
            .unwrap();
        }
        let mut n = 0;
        let mut deser = hdrhistogram::serialization::Deserializer::new();
        for entry in IntervalLogIterator::new(&out) {
            if let LogEntry::Interval(ih) = entry.expect("parse") {
                let b = base64::engine::general_purpose::STANDARD
                    .decode(ih.encoded_histogram())
                    .unwrap();
                let back: Histogram<u64> = deser.deserialize(&mut &b[..]).unwrap();
                assert_eq!(back.len(), 1000);
                assert_eq!(back.value_at_quantile(0.5), h.value_at_quantile(0.5));
                n += 1;
            }
        }
        assert_eq!(n, 2);
    }
}
