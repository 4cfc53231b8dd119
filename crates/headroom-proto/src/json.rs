//! RFC 6901 JSON pointer lookup over raw reply bytes, for a scenario's `extract: {json: /a/0/b}`.
//!
//! Written by hand rather than with serde_json because the engine only ever needs one value out
//! of a reply: this walks the bytes once, skipping what the pointer does not enter, builds no
//! tree, and keeps a general-purpose JSON library out of the engine's dependencies. Strings are
//! unescaped only for the value returned and the keys compared. Malformed input gives `None`
//! (never a panic: the reply comes from the network); the fuzz target and a property test
//! against serde_json hold it to that.

/// Deepest nesting walked; deeper documents give `None` instead of exhausting the stack.
const MAX_DEPTH: usize = 128;

/// The value at `pointer` in the JSON document `doc`: a string's text (unescaped), `None` for a
/// `null` or a missing value, and any other value as its JSON text (numbers, `true`, objects...).
pub fn pointer(doc: &[u8], pointer: &str) -> Option<String> {
    if !(pointer.is_empty() || pointer.starts_with('/')) {
        return None;
    }
    let mut p = Parser { s: doc, i: 0 };
    p.ws();
    let tokens: Vec<String> = if pointer.is_empty() {
        Vec::new()
    } else {
        pointer[1..]
            .split('/')
            .map(|t| t.replace("~1", "/").replace("~0", "~"))
            .collect()
    };
    for (depth, token) in tokens.iter().enumerate() {
        if depth >= MAX_DEPTH {
            return None;
        }
        match p.peek()? {
            b'{' => {
                p.i += 1;
                p.find_key(token)?;
            }
            b'[' => {
                p.i += 1;
                let index: usize = token.parse().ok()?;
                if token.len() > 1 && token.starts_with('0') {
                    return None; // RFC 6901: no leading zeros
                }
                p.find_index(index)?;
            }
            _ => return None,
        }
        p.ws();
    }
    let start = p.i;
    match p.peek()? {
        b'"' => p.string(),
        b'n' => {
            p.skip_value(0)?;
            None
        }
        _ => {
            p.skip_value(0)?;
            std::str::from_utf8(&doc[start..p.i])
                .ok()
                .map(|s| s.trim().to_string())
        }
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn eat(&mut self, b: u8) -> Option<()> {
        self.ws();
        (self.peek()? == b).then(|| self.i += 1)
    }

    /// Inside an object (after `{`): position at the value of `key`.
    fn find_key(&mut self, key: &str) -> Option<()> {
        self.ws();
        if self.peek()? == b'}' {
            return None;
        }
        loop {
            self.ws();
            let k = self.string()?;
            self.eat(b':')?;
            self.ws();
            if k == key {
                return Some(());
            }
            self.skip_value(1)?;
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                _ => return None,
            }
        }
    }

    /// Inside an array (after `[`): position at element `index`.
    fn find_index(&mut self, index: usize) -> Option<()> {
        self.ws();
        if self.peek()? == b']' {
            return None;
        }
        for _ in 0..index {
            self.skip_value(1)?;
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                _ => return None,
            }
            self.ws();
        }
        Some(())
    }

    /// A string at the cursor, unescaped.
    fn string(&mut self) -> Option<String> {
        self.ws();
        if self.peek()? != b'"' {
            return None;
        }
        self.i += 1;
        let mut out = Vec::new();
        loop {
            let b = self.peek()?;
            self.i += 1;
            match b {
                b'"' => return String::from_utf8(out).ok(),
                b'\\' => {
                    let e = self.peek()?;
                    self.i += 1;
                    match e {
                        b'"' | b'\\' | b'/' => out.push(e),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let mut c = self.hex4()?;
                            if (0xD800..0xDC00).contains(&c) {
                                // A surrogate pair: \uD83D\uDE00.
                                if self.s.get(self.i..self.i + 2)? != b"\\u" {
                                    return None;
                                }
                                self.i += 2;
                                let lo = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return None;
                                }
                                c = 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00);
                            }
                            let ch = char::from_u32(c)?;
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                        }
                        _ => return None,
                    }
                }
                0..=0x1F => return None,
                _ => out.push(b),
            }
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let h = self.s.get(self.i..self.i + 4)?;
        self.i += 4;
        u32::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()
    }

    /// Skip one value of any kind at the cursor.
    fn skip_value(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.ws();
        match self.peek()? {
            b'"' => self.string().map(|_| ()),
            b'{' => {
                self.i += 1;
                self.ws();
                if self.peek()? == b'}' {
                    self.i += 1;
                    return Some(());
                }
                loop {
                    self.string()?;
                    self.eat(b':')?;
                    self.skip_value(depth + 1)?;
                    self.ws();
                    match self.peek()? {
                        b',' => self.i += 1,
                        b'}' => {
                            self.i += 1;
                            return Some(());
                        }
                        _ => return None,
                    }
                }
            }
            b'[' => {
                self.i += 1;
                self.ws();
                if self.peek()? == b']' {
                    self.i += 1;
                    return Some(());
                }
                loop {
                    self.skip_value(depth + 1)?;
                    self.ws();
                    match self.peek()? {
                        b',' => self.i += 1,
                        b']' => {
                            self.i += 1;
                            return Some(());
                        }
                        _ => return None,
                    }
                }
            }
            b't' => self.word(b"true"),
            b'f' => self.word(b"false"),
            b'n' => self.word(b"null"),
            b'-' | b'0'..=b'9' => {
                let start = self.i;
                while matches!(
                    self.peek(),
                    Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                ) {
                    self.i += 1;
                }
                let text = std::str::from_utf8(&self.s[start..self.i]).ok()?;
                text.parse::<f64>().ok().map(|_| ())
            }
            _ => None,
        }
    }

    fn word(&mut self, w: &[u8]) -> Option<()> {
        (self.s.get(self.i..self.i + w.len())? == w).then(|| self.i += w.len())
    }
}

#[cfg(test)]
mod tests {
    use super::pointer;

    #[test]
    fn finds_values_by_pointer() {
        let doc = br#" {"a": {"b": [10, "x\"y", {"c~d": true, "e/f": null}]}, "s": "caf\u00e9 \ud83d\ude00", "n": -1.5e3} "#;
        assert_eq!(pointer(doc, "/a/b/0").as_deref(), Some("10"));
        assert_eq!(pointer(doc, "/a/b/1").as_deref(), Some("x\"y"));
        assert_eq!(pointer(doc, "/a/b/2/c~0d").as_deref(), Some("true"));
        assert_eq!(pointer(doc, "/a/b/2/e~1f"), None, "null is no value");
        assert_eq!(pointer(doc, "/s").as_deref(), Some("café 😀"));
        assert_eq!(pointer(doc, "/n").as_deref(), Some("-1.5e3"));
        assert_eq!(pointer(doc, "/a/b/3"), None);
        assert_eq!(pointer(doc, "/a/b/01"), None);
        assert_eq!(pointer(doc, "/zz"), None);
        assert_eq!(
            pointer(br#"{"o": {"k": [1, 2]}}"#, "/o").as_deref(),
            Some(r#"{"k": [1, 2]}"#)
        );
        assert_eq!(pointer(b"[1, 2]", "").as_deref(), Some("[1, 2]"));
        assert_eq!(pointer(b"{\"a\": 1}", "a"), None, "a pointer starts with /");
    }

    #[test]
    fn malformed_documents_give_none() {
        for doc in [
            &b""[..],
            b"{",
            b"{\"a\" 1}",
            b"{\"a\": [1, 2}",
            b"\"unterminated",
            b"{\"a\": tru}",
            b"{\"a\": \"\\uZZZZ\"}",
        ] {
            assert_eq!(
                pointer(doc, "/a"),
                None,
                "{:?}",
                String::from_utf8_lossy(doc)
            );
        }
        let deep = "[".repeat(100_000);
        assert_eq!(pointer(deep.as_bytes(), "/0/0"), None);
        let deep_key = format!("{}1{}", "[".repeat(5000), "]".repeat(5000));
        assert_eq!(pointer(deep_key.as_bytes(), "/0/1"), None);
    }

    /// Against serde_json on generated documents: every pointer to every value agrees.
    #[test]
    fn agrees_with_serde_json() {
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut rnd = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        fn gen(r: &mut dyn FnMut(u64) -> u64, depth: u32) -> serde_json::Value {
            use serde_json::Value as V;
            let pick = if depth > 3 { r(4) } else { r(6) };
            match pick {
                0 => V::Null,
                1 => V::Bool(r(2) == 0),
                2 => V::from(r(1000) as i64 - 500),
                3 => V::String(["", "a", "é\"\\/\n", "~/x", "😀 \u{1}"][r(5) as usize].to_string()),
                4 => V::Array((0..r(4)).map(|_| gen(r, depth + 1)).collect()),
                _ => V::Object(
                    (0..r(4))
                        .map(|i| {
                            (
                                ["k", "a/b", "m~n", "ü"][i as usize].to_string(),
                                gen(r, depth + 1),
                            )
                        })
                        .collect(),
                ),
            }
        }
        fn pointers(v: &serde_json::Value, at: String, out: &mut Vec<String>) {
            out.push(at.clone());
            match v {
                serde_json::Value::Array(a) => {
                    for (i, e) in a.iter().enumerate() {
                        pointers(e, format!("{at}/{i}"), out);
                    }
                }
                serde_json::Value::Object(o) => {
                    for (k, e) in o {
                        let k = k.replace('~', "~0").replace('/', "~1");
                        pointers(e, format!("{at}/{k}"), out);
                    }
                }
                _ => {}
            }
        }
        for _ in 0..500 {
            let v = gen(&mut rnd, 0);
            let text = if rnd(2) == 0 {
                serde_json::to_string(&v).unwrap()
            } else {
                serde_json::to_string_pretty(&v).unwrap()
            };
            let mut ps = Vec::new();
            pointers(&v, String::new(), &mut ps);
            for p in ps {
                let at = v.pointer(&p).unwrap();
                let want = match at {
                    serde_json::Value::String(s) => Some(s.clone()),
                    serde_json::Value::Null => None,
                    other => Some(serde_json::to_string(other).unwrap()),
                };
                // Non-strings come back as the document's text: compare them re-serialised.
                let got = pointer(text.as_bytes(), &p).map(|g| {
                    if at.is_string() {
                        g
                    } else {
                        let parsed: serde_json::Value = serde_json::from_str(&g).unwrap();
                        serde_json::to_string(&parsed).unwrap()
                    }
                });
                assert_eq!(got, want, "pointer {p:?} in {text}");
            }
        }
    }
}
