//! HTTP status codes as headroom counts and checks them.
//!
//! Every code from [`STATUS_MIN`] to [`STATUS_MAX`] is counted on its own (in an array indexed
//! by `code - STATUS_MIN`, so counting never allocates); anything else a server may send (`600`,
//! `099`) is counted in the `other` class only. [`StatusSet`] is the set of codes a run expects
//! (`--expect-status`), checked with one shift and mask per response.

use std::fmt;
use std::str::FromStr;

/// Lowest status code counted on its own (the first 1xx).
pub const STATUS_MIN: u16 = 100;
/// Highest status code counted on its own (the last 5xx).
pub const STATUS_MAX: u16 = 599;
/// How many exact codes are counted: the length of a per-code counters array.
pub const STATUS_CODES: usize = (STATUS_MAX - STATUS_MIN + 1) as usize;

/// The slot of `code` in a per-code counters array, or `None` outside
/// [`STATUS_MIN`]`..=`[`STATUS_MAX`].
#[inline]
pub fn status_slot(code: u16) -> Option<usize> {
    code.checked_sub(STATUS_MIN)
        .map(usize::from)
        .filter(|&i| i < STATUS_CODES)
}

/// Words of a [`StatusSet`]: bits for codes `0..640`, enough for every code it may hold.
const WORDS: usize = (STATUS_MAX as usize).div_ceil(64);

/// A set of status codes in [`STATUS_MIN`]`..=`[`STATUS_MAX`], as `--expect-status` gives it.
/// A bitset: membership is one shift and mask, and the set is `Copy` (80 bytes) so a plan holds
/// it inline. The empty set means "no expectation" (see [`crate::Plan::expect_status`]).
#[derive(Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct StatusSet {
    bits: [u64; WORDS],
}

impl StatusSet {
    /// The empty set.
    pub const EMPTY: StatusSet = StatusSet { bits: [0; WORDS] };

    /// Add `code`; false (and nothing added) outside [`STATUS_MIN`]`..=`[`STATUS_MAX`].
    pub fn insert(&mut self, code: u16) -> bool {
        if !(STATUS_MIN..=STATUS_MAX).contains(&code) {
            return false;
        }
        let i = usize::from(code);
        self.bits[i / 64] |= 1 << (i % 64);
        true
    }

    /// Whether `code` is in the set (any `u16`, so a server's odd code is simply "not in it").
    #[inline]
    pub fn contains(&self, code: u16) -> bool {
        let i = usize::from(code);
        self.bits
            .get(i / 64)
            .is_some_and(|w| (w >> (i % 64)) & 1 == 1)
    }

    pub fn is_empty(&self) -> bool {
        self.bits.iter().all(|&w| w == 0)
    }

    /// The codes in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = u16> + '_ {
        (STATUS_MIN..=STATUS_MAX).filter(|&c| self.contains(c))
    }
}

impl fmt::Debug for StatusSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StatusSet({self})")
    }
}

/// The canonical text: ascending codes, runs of three or more as `A-B`, e.g. `200-299,404`.
impl fmt::Display for StatusSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut codes = self.iter().peekable();
        while let Some(lo) = codes.next() {
            let mut hi = lo;
            while codes.peek() == Some(&(hi + 1)) {
                hi += 1;
                codes.next();
            }
            let sep = if first { "" } else { "," };
            first = false;
            match hi - lo {
                0 => write!(f, "{sep}{lo}")?,
                1 => write!(f, "{sep}{lo},{hi}")?,
                _ => write!(f, "{sep}{lo}-{hi}")?,
            }
        }
        Ok(())
    }
}

/// Parses a comma-separated list of codes (`200`), ranges (`200-299`) and classes (`2xx`), each
/// within [`STATUS_MIN`]`..=`[`STATUS_MAX`]; the error says which item is wrong and why.
impl FromStr for StatusSet {
    type Err = String;

    fn from_str(s: &str) -> Result<StatusSet, String> {
        let code = |t: &str| -> Result<u16, String> {
            match t.trim().parse::<u16>() {
                Ok(c) if (STATUS_MIN..=STATUS_MAX).contains(&c) => Ok(c),
                _ => Err(format!(
                    "'{}' is not a status code from {STATUS_MIN} to {STATUS_MAX}",
                    t.trim()
                )),
            }
        };
        let mut set = StatusSet::EMPTY;
        for item in s.split(',') {
            let item = item.trim();
            let (lo, hi) =
                if let Some(class) = item.strip_suffix("xx").or_else(|| item.strip_suffix("XX")) {
                    let lo = code(&format!("{class}00"))
                        .map_err(|_| format!("'{item}' is not a status class from 1xx to 5xx"))?;
                    (lo, lo + 99)
                } else if let Some((a, b)) = item.split_once('-') {
                    let (lo, hi) = (code(a)?, code(b)?);
                    if lo > hi {
                        return Err(format!("'{item}': the range runs backwards"));
                    }
                    (lo, hi)
                } else if item.is_empty() {
                    return Err("an empty item: expected codes such as 200,204 or 200-299".into());
                } else {
                    let c = code(item)?;
                    (c, c)
                };
            for c in lo..=hi {
                set.insert(c);
            }
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_cover_100_to_599() {
        assert_eq!(status_slot(99), None);
        assert_eq!(status_slot(100), Some(0));
        assert_eq!(status_slot(599), Some(STATUS_CODES - 1));
        assert_eq!(status_slot(600), None);
        assert_eq!(status_slot(0), None);
        assert_eq!(status_slot(u16::MAX), None);
    }

    #[test]
    fn set_membership_and_bounds() {
        let mut s = StatusSet::EMPTY;
        assert!(s.is_empty());
        assert!(s.insert(200) && s.insert(599) && s.insert(100));
        assert!(!s.insert(99) && !s.insert(600) && !s.insert(u16::MAX));
        assert!(s.contains(200) && s.contains(599) && s.contains(100));
        assert!(!s.contains(201) && !s.contains(0) && !s.contains(640) && !s.contains(u16::MAX));
        assert_eq!(s.iter().collect::<Vec<_>>(), [100, 200, 599]);
    }

    #[test]
    fn parse_codes_ranges_classes_and_print_canonically() {
        let s: StatusSet = "204, 200,2xx,404-406,301,302".parse().unwrap();
        assert_eq!(s.iter().count(), 100 + 3 + 2);
        assert_eq!(s.to_string(), "200-299,301,302,404-406");
        let t: StatusSet = s.to_string().parse().unwrap();
        assert_eq!(s, t);
        assert_eq!("200".parse::<StatusSet>().unwrap().to_string(), "200");
        for bad in [
            "", "200,", "abc", "99", "600", "6xx", "0xx", "300-200", "200-", "2x",
        ] {
            let e = bad.parse::<StatusSet>().unwrap_err();
            assert!(!e.is_empty(), "{bad}");
        }
        assert!("600"
            .parse::<StatusSet>()
            .unwrap_err()
            .contains("100 to 599"));
    }
}
