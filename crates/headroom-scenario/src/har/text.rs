//! The small text readers the HAR import needs and serde_json does not give: where each entry
//! starts in the file (for located warnings), RFC 3339 timestamps, and `http(s)://` URLs.
//! The URLs are taken apart by core's one URL parser ([`headroom_core::url`]).
//!
//! All three take any input without panicking: they index only through `get`, and give up
//! (`None` / `Err`) on anything they do not expect.

use headroom_core::url;

/// Byte offsets (into `text`) of the elements of the array at `log.entries`, at most `limit` of
/// them; `None` when the file is not laid out as expected (then warnings are not located).
///
/// A scan rather than a parse: it runs before (and independently of) serde_json, which keeps no
/// positions in a `Value`. Strings are skipped by their quotes and backslashes, containers by
/// depth, iteratively (no recursion, whatever the nesting). When a key repeats, the last one
/// counts, as serde_json's maps keep the last.
pub(crate) fn entry_offsets(text: &str, limit: usize) -> Option<Vec<usize>> {
    let mut s = Scan {
        b: text.as_bytes(),
        i: 0,
    };
    if text.starts_with('\u{feff}') {
        s.i = 3;
    }
    s.ws();
    s.enter_key(b"log")?;
    s.enter_key(b"entries")?;
    s.elements(limit)
}

struct Scan<'a> {
    b: &'a [u8],
    i: usize,
}

impl Scan<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    /// At a `"`: skips the string, returns its raw (still escaped) content.
    fn string(&mut self) -> Option<&[u8]> {
        if self.peek()? != b'"' {
            return None;
        }
        let start = self.i + 1;
        self.i = start;
        loop {
            match self.peek()? {
                b'\\' => self.i += 2,
                b'"' => {
                    let raw = self.b.get(start..self.i)?;
                    self.i += 1;
                    return Some(raw);
                }
                _ => self.i += 1,
            }
        }
    }

    /// Skips one value of any kind.
    fn skip(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.string().map(|_| ()),
            b'{' | b'[' => {
                let mut depth = 0usize;
                loop {
                    match self.peek()? {
                        b'"' => {
                            self.string()?;
                        }
                        b'{' | b'[' => {
                            depth += 1;
                            self.i += 1;
                        }
                        b'}' | b']' => {
                            depth -= 1;
                            self.i += 1;
                            if depth == 0 {
                                return Some(());
                            }
                        }
                        _ => self.i += 1,
                    }
                }
            }
            _ => {
                while !matches!(
                    self.peek(),
                    None | Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
                ) {
                    self.i += 1;
                }
                Some(())
            }
        }
    }

    /// At a `{`: moves to the value of member `key` (the last one if it repeats).
    fn enter_key(&mut self, key: &[u8]) -> Option<()> {
        if self.peek()? != b'{' {
            return None;
        }
        self.i += 1;
        let mut found = None;
        loop {
            self.ws();
            match self.peek()? {
                b'}' => break,
                b',' => {
                    self.i += 1;
                    continue;
                }
                _ => {}
            }
            let k = self.string()?;
            let hit = k == key;
            self.ws();
            if self.peek()? != b':' {
                return None;
            }
            self.i += 1;
            self.ws();
            if hit {
                found = Some(self.i);
            }
            self.skip()?;
        }
        self.i = found?;
        Some(())
    }

    /// At a `[`: the offsets of its first `limit` elements.
    fn elements(&mut self, limit: usize) -> Option<Vec<usize>> {
        if self.peek()? != b'[' {
            return None;
        }
        self.i += 1;
        let mut out = Vec::new();
        loop {
            self.ws();
            match self.peek()? {
                b']' => return Some(out),
                b',' => {
                    self.i += 1;
                    continue;
                }
                _ => {}
            }
            if out.len() == limit {
                return Some(out);
            }
            out.push(self.i);
            self.skip()?;
        }
    }
}

/// Milliseconds since the Unix epoch of an RFC 3339 / ISO 8601 date-time such as
/// `2025-01-31T09:30:00.123Z` or `2025-01-31T10:30:00.123456+01:00` (what HAR's
/// `startedDateTime` holds). Years 0000-9999; no leap seconds beyond `:60` read as `:59`+1 s.
pub(crate) fn parse_datetime_ms(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let part = b.get(from..from + len)?;
        if !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        Some(part.iter().fold(0i64, |n, d| n * 10 + i64::from(d - b'0')))
    };
    let sep = |at: usize, set: &[u8]| b.get(at).is_some_and(|c| set.contains(c));
    if !(sep(4, b"-") && sep(7, b"-") && sep(10, b"Tt ") && sep(13, b":") && sep(16, b":")) {
        return None;
    }
    let (y, mo, d) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (h, mi, sec) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    if !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 {
        return None;
    }
    if sec > 60 {
        return None;
    }
    let mut i = 19;
    let mut frac_ms = 0.0;
    if sep(i, b".,") {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        let digits = s.get(start..i)?;
        if digits.is_empty() {
            return None;
        }
        // Only the first 9 digits matter; more would not change an f64 of milliseconds.
        let kept = &digits[..digits.len().min(9)];
        frac_ms = kept.parse::<f64>().ok()? / 10f64.powi(kept.len() as i32) * 1000.0;
    }
    let offset_min = match b.get(i) {
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(&c @ (b'+' | b'-')) => {
            let oh = num(i + 1, 2)?;
            let (om, end) = if sep(i + 3, b":") {
                (num(i + 4, 2)?, i + 6)
            } else {
                (num(i + 3, 2)?, i + 5)
            };
            if end != b.len() || oh > 23 || om > 59 {
                return None;
            }
            let m = oh * 60 + om;
            if c == b'-' {
                -m
            } else {
                m
            }
        }
        _ => return None,
    };
    let days = days_from_civil(y, mo, d);
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec - offset_min * 60;
    Some(secs as f64 * 1000.0 + frac_ms)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// An `http://` or `https://` URL taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Url {
    pub tls: bool,
    /// Lower case; an IPv6 literal without its brackets.
    pub host: String,
    pub port: u16,
    /// Path and query as sent on the request line (`/` when empty); the fragment left out;
    /// spaces and non-ASCII characters percent-encoded as UTF-8 (a control character refuses
    /// the URL).
    pub target: String,
    /// The URL held `user:pass@`.
    pub userinfo: bool,
}

/// Why a URL is not replayed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum UrlError {
    /// Not http or https: the scheme, lower case, without `:`.
    Scheme(String),
    /// http(s) but not usable; the reason.
    Bad(&'static str),
}

/// `u` by core's one URL parser ([`headroom_core::url`]), with the words of the import's
/// warnings. A scheme other than http(s) is named first, whatever else is wrong: a `data:` or
/// `ws:` URL is skipped for what it is.
pub(crate) fn parse_url(u: &str) -> Result<Url, UrlError> {
    if let Some((name, _)) = url::split_scheme(u.as_bytes()) {
        if !(name.eq_ignore_ascii_case(b"http") || name.eq_ignore_ascii_case(b"https")) {
            return Err(UrlError::Scheme(
                String::from_utf8_lossy(name).to_ascii_lowercase(),
            ));
        }
    }
    let parsed = url::Url::parse(u.as_bytes()).map_err(|e| {
        use url::UrlErrorKind as K;
        UrlError::Bad(match e.kind {
            K::NoScheme => "no scheme",
            K::NoAuthority => "no '//' after the scheme",
            K::UnclosedBracket => "an unclosed '[' in the host",
            K::AfterIpv6 => "text after the IPv6 address",
            K::BadPort => "a port that is not 1-65535",
            K::NoHost | K::BadHost => "an empty or malformed host",
            K::ControlChar => "a control character",
            K::TooLong => "more than 64 KiB",
            K::BadUserinfo => "a space in the user info",
            K::UnsupportedScheme => "a scheme other than http or https",
        })
    })?;
    let mut target = String::with_capacity(u.len() + 1);
    // Only what cannot be sent is encoded: the rest goes as the browser sent it.
    parsed.push_target(&mut target, b"");
    Ok(Url {
        tls: parsed.scheme.is_tls(),
        host: parsed.host.to_ascii_lowercase(),
        port: parsed.port,
        target,
        userinfo: parsed.userinfo.is_some(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_of_entries_are_found_whatever_the_layout() {
        let t = r#"{"log": {"pages": [{"x": "]}"}], "entries": [ {"a": "\"}"}, [1,{}] ,3 ]}}"#;
        let offs = entry_offsets(t, 100).unwrap();
        let starts: Vec<&str> = offs.iter().map(|&o| &t[o..o + 2]).collect();
        assert_eq!(starts, ["{\"", "[1", "3 "]);
        assert_eq!(entry_offsets(t, 2).unwrap().len(), 2);
        // The last of repeated keys, as serde_json.
        let t = r#"{"log": {"entries": [1], "entries": [ 2]}}"#;
        assert_eq!(entry_offsets(t, 9), Some(vec![t.rfind('2').unwrap()]));
        for bad in [
            "",
            "{",
            "[]",
            r#"{"log": 1}"#,
            r#"{"log": {"entries": {}}}"#,
            r#"{"log": {"entries": [1, "#,
            r#"{"log": {"entries": ["\"#,
            r#"{"log" {"entries": []}}"#,
            "{\"log\": {\"entries\": [[[[[[[[",
        ] {
            let _ = entry_offsets(bad, 100);
        }
        assert_eq!(entry_offsets(r#"{"log": {"entries": {}}}"#, 9), None);
        assert_eq!(
            entry_offsets("\u{feff}{\"log\":{\"entries\":[]}}", 9),
            Some(vec![])
        );
    }

    #[test]
    fn datetimes_read_as_epoch_milliseconds() {
        assert_eq!(parse_datetime_ms("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(parse_datetime_ms("1970-01-01T00:00:01.5Z"), Some(1500.0));
        assert_eq!(
            parse_datetime_ms("2024-02-29T12:00:00.250+01:00"),
            Some(1_709_204_400_250.0)
        );
        assert_eq!(
            parse_datetime_ms("2024-02-29T11:00:00.250Z"),
            parse_datetime_ms("2024-02-29T06:30:00.250-0430")
        );
        let a = parse_datetime_ms("2025-01-01T00:00:00.123456789123Z").unwrap();
        assert!((a - 1_735_689_600_123.456_8).abs() < 0.01, "{a}");
        for bad in [
            "",
            "2024",
            "2023-02-29T00:00:00Z",
            "2024-13-01T00:00:00Z",
            "2024-01-01T24:00:00Z",
            "2024-01-01T00:00:00",
            "2024-01-01T00:00:00.Z",
            "2024-01-01T00:00:00+1:00",
            "2024-01-01T00:00:00Zjunk",
            "+024-01-01T00:00:00Z",
            "2024-01-01T00:00:00+99:99",
            "９９９９-01-01T00:00:00Z",
        ] {
            assert_eq!(parse_datetime_ms(bad), None, "{bad}");
        }
    }

    #[test]
    fn urls_split_into_origin_and_target() {
        let u = parse_url("HTTPS://User:pw@Example.COM/a b/é?q=1#frag").unwrap();
        assert_eq!(
            u,
            Url {
                tls: true,
                host: "example.com".into(),
                port: 443,
                target: "/a%20b/%C3%A9?q=1".into(),
                userinfo: true,
            }
        );
        let u = parse_url("http://[::1]:8080?x").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.target.as_str()),
            ("::1", 8080, "/?x")
        );
        assert_eq!(parse_url("http://h:/").unwrap().port, 80);
        // What a browser sent goes as it was: only what cannot be sent is encoded.
        assert_eq!(parse_url("http://h/{a}|b").unwrap().target, "/{a}|b");
        for (url, want) in [
            ("ws://h/", UrlError::Scheme("ws".into())),
            ("data:text/plain,hi", UrlError::Scheme("data".into())),
            (
                "chrome-extension://abc/x.js",
                UrlError::Scheme("chrome-extension".into()),
            ),
            ("http://h:0/", UrlError::Bad("a port that is not 1-65535")),
            (
                "http://h:65536/",
                UrlError::Bad("a port that is not 1-65535"),
            ),
            ("http://h:+80/", UrlError::Bad("a port that is not 1-65535")),
            ("http:///x", UrlError::Bad("an empty or malformed host")),
            ("http://a b/", UrlError::Bad("an empty or malformed host")),
            ("http:/x", UrlError::Bad("no '//' after the scheme")),
            ("/relative", UrlError::Bad("no scheme")),
            ("http://[::1/", UrlError::Bad("an unclosed '[' in the host")),
            ("http://h/a\nb", UrlError::Bad("a control character")),
            ("wss://h:0/", UrlError::Scheme("wss".into())),
        ] {
            assert_eq!(parse_url(url), Err(want), "{url}");
        }
    }
}
