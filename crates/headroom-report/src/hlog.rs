//! The whole run's latency distribution from `latency.hlog` (HdrHistogram interval log, as
//! written by `headroom run --out`): every interval's histogram of a tag is decoded and added
//! up, and the sum is read at HdrHistogram's usual percentile steps, so the percentile plot
//! shows the full distribution rather than the five figures in summary.json.

use std::path::Path;

use base64::Engine as _;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;

/// Percentile steps per halving of the distance to 100% (HdrHistogram's default output uses 5).
pub const TICKS_PER_HALF: u32 = 5;

/// One tag's distribution: (percentile as a fraction in [0, 1), value in microseconds),
/// increasing in both, plus the number of samples and the maximum.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Distribution {
    pub count: u64,
    pub max_us: u64,
    pub points: Vec<(f64, f64)>,
}

/// The distributions the log holds. `corrected` is the untagged histogram, `uncorrected` the
/// `Tag=uncorrected` one; a tag with no sample is `None`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Distributions {
    pub corrected: Option<Distribution>,
    pub uncorrected: Option<Distribution>,
}

/// Reads `path`. `Ok(None)` when the file does not exist; `Err(text)` when it cannot be read
/// or decoded (the caller turns it into a note: the percentile plot falls back to summary.json).
pub fn read(path: &Path) -> Result<Option<Distributions>, String> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    parse(&bytes).map(Some)
}

/// Decodes a whole interval log.
pub fn parse(bytes: &[u8]) -> Result<Distributions, String> {
    let mut corrected: Option<Histogram<u64>> = None;
    let mut uncorrected: Option<Histogram<u64>> = None;
    let mut deser = Deserializer::new();
    for (i, entry) in IntervalLogIterator::new(bytes).enumerate() {
        let entry = entry.map_err(|e| format!("entry {}: {e:?}", i + 1))?;
        let LogEntry::Interval(ih) = entry else {
            continue;
        };
        let slot = match ih.tag().map(|t| t.as_str()) {
            None => &mut corrected,
            Some("uncorrected") => &mut uncorrected,
            Some(_) => continue,
        };
        let raw = base64::engine::general_purpose::STANDARD
            .decode(ih.encoded_histogram())
            .map_err(|e| format!("entry {}: base64: {e}", i + 1))?;
        let h: Histogram<u64> = deser
            .deserialize(&mut &raw[..])
            .map_err(|e| format!("entry {}: histogram: {e:?}", i + 1))?;
        match slot {
            Some(total) => total
                .add(&h)
                .map_err(|e| format!("entry {}: {e:?}", i + 1))?,
            None => *slot = Some(h),
        }
    }
    Ok(Distributions {
        corrected: corrected.as_ref().and_then(distribution),
        uncorrected: uncorrected.as_ref().and_then(distribution),
    })
}

/// The percentile points of `h` (None when empty). The last point is the maximum, at the
/// percentile of the last step below 100%.
pub fn distribution(h: &Histogram<u64>) -> Option<Distribution> {
    if h.is_empty() {
        return None;
    }
    let mut points: Vec<(f64, f64)> = Vec::new();
    for v in h.iter_quantiles(TICKS_PER_HALF) {
        let q = v.quantile_iterated_to();
        let value = h.highest_equivalent(v.value_iterated_to()) as f64;
        if q >= 1.0 {
            // 1/(1-q) is infinite at 100%: the maximum goes one step further right.
            let last_q = points.last().map_or(0.0, |p| p.0);
            let q_max = 1.0 - (1.0 - last_q) / 2.0;
            if points.last().is_none_or(|p| p.0 < q_max) {
                points.push((q_max, h.max() as f64));
            }
            break;
        }
        match points.last_mut() {
            Some(p) if p.0 == q => p.1 = value,
            _ => points.push((q, value)),
        }
    }
    Some(Distribution {
        count: h.len(),
        max_us: h.max(),
        points,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log_of(hists: &[(Option<&str>, &Histogram<u64>)]) -> Vec<u8> {
        use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
        let mut out = String::from(
            "#[Histogram log format version 1.3]\n#[StartTime: 1.000 (seconds since epoch)]\n\
             \"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n",
        );
        let mut ser = V2DeflateSerializer::new();
        for (i, (tag, h)) in hists.iter().enumerate() {
            let mut buf = Vec::new();
            ser.serialize(*h, &mut buf).unwrap();
            if let Some(t) = tag {
                out.push_str(&format!("Tag={t},"));
            }
            out.push_str(&format!(
                "{i}.000,1.000,{:.3},{}\n",
                h.max() as f64 / 1000.0,
                base64::engine::general_purpose::STANDARD.encode(&buf)
            ));
        }
        out.into_bytes()
    }

    fn hist(values: impl Iterator<Item = u64>) -> Histogram<u64> {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).unwrap();
        for v in values {
            h.record(v).unwrap();
        }
        h
    }

    #[test]
    fn intervals_of_a_tag_add_up_and_other_tags_stay_apart() {
        let a = hist(1..=1000);
        let b = hist(1001..=2000);
        let u = hist(std::iter::repeat_n(7, 10));
        let c = hist(std::iter::repeat_n(99_999, 5));
        let d = parse(&log_of(&[
            (None, &a),
            (Some("uncorrected"), &u),
            (Some("connect"), &c),
            (None, &b),
        ]))
        .unwrap();
        let corr = d.corrected.unwrap();
        assert_eq!(corr.count, 2000);
        assert_eq!(corr.max_us, b.max());
        // The median of 1..=2000 is ~1000, within the histogram's 3 significant digits.
        let (_, p50) = corr
            .points
            .iter()
            .copied()
            .find(|(q, _)| *q >= 0.5)
            .unwrap();
        assert!((p50 - 1000.0).abs() <= 2.0, "{p50}");
        let unc = d.uncorrected.unwrap();
        assert_eq!(unc.count, 10);
        assert!(unc.points.iter().all(|(_, v)| (*v - 7.0).abs() < 0.01));
    }

    #[test]
    fn points_rise_to_the_maximum_and_stay_below_one() {
        let h = hist((1..=100_000).map(|i| i * 3));
        let d = distribution(&h).unwrap();
        assert!(d.points.len() > 50, "{}", d.points.len());
        for w in d.points.windows(2) {
            assert!(w[0].0 < w[1].0 && w[0].1 <= w[1].1, "{w:?}");
        }
        let (q_last, v_last) = *d.points.last().unwrap();
        assert!(q_last < 1.0);
        assert_eq!(v_last, h.max() as f64);
        // The 99.9th percentile of 3..=300000 is ~299,700.
        let p999 = d.points.iter().find(|(q, _)| *q >= 0.999).unwrap().1;
        assert!((p999 - 299_700.0).abs() / 299_700.0 < 0.002, "{p999}");
    }

    #[test]
    fn bad_logs_are_errors_and_missing_files_none() {
        let mut bytes = log_of(&[(None, &hist(1..=10))]);
        let n = bytes.len();
        bytes.truncate(n - 10);
        bytes.extend_from_slice(b"!!!\n");
        assert!(parse(&bytes).is_err());
        assert_eq!(read(Path::new("/nonexistent/latency.hlog")), Ok(None));
        assert!(distribution(&hist(std::iter::empty())).is_none());
    }
}
