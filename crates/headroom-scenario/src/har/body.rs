//! Request bodies of HAR entries: `postData.text` (base64 decoded when it says so), or the
//! form rebuilt from `postData.params`; what cannot be sent is warned at its entry.

use super::{short, Conv};
use serde_json::Value;

impl Conv<'_> {
    /// The body to send, from `postData`; adds `Content-Type` from its `mimeType` when no such
    /// header was recorded.
    pub(super) fn body(
        &mut self,
        i: usize,
        label: &str,
        req: &Value,
        headers: &mut Vec<(String, String)>,
    ) -> Option<String> {
        let pd = match req.get("postData") {
            None | Some(Value::Null) => {
                let size = req.get("bodySize").and_then(Value::as_f64).unwrap_or(0.0);
                if size >= 1.0 {
                    self.warn(
                        i,
                        label,
                        format!(
                            "request.bodySize is {size} but no postData was recorded: sent \
                             without a body"
                        ),
                    );
                }
                return None;
            }
            Some(pd) if pd.is_object() => pd,
            Some(_) => {
                self.warn(
                    i,
                    label,
                    "request.postData is not an object: sent without a body",
                );
                return None;
            }
        };
        let mime = pd
            .get("mimeType")
            .and_then(Value::as_str)
            .map(str::trim)
            .unwrap_or("");
        let encoding = pd
            .get("encoding")
            .or_else(|| pd.get("_encoding"))
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty());
        let body = match (pd.get("text"), encoding) {
            (Some(Value::String(t)), None) => Some(t.clone()),
            (Some(Value::String(t)), Some(enc)) if enc.eq_ignore_ascii_case("base64") => {
                use base64::Engine as _;
                let compact: String = t.chars().filter(|c| !c.is_ascii_whitespace()).collect();
                match base64::engine::general_purpose::STANDARD.decode(compact.as_bytes()) {
                    Ok(bytes) => match String::from_utf8(bytes) {
                        Ok(s) => Some(s),
                        Err(e) => {
                            self.warn(
                                i,
                                label,
                                format!(
                                    "the body is binary ({} bytes, not UTF-8): the scenario \
                                     format holds text bodies, sent without a body",
                                    e.as_bytes().len()
                                ),
                            );
                            None
                        }
                    },
                    Err(_) => {
                        self.warn(
                            i,
                            label,
                            "postData.text says base64 but is not: sent without a body",
                        );
                        None
                    }
                }
            }
            (Some(Value::String(_)), Some(enc)) => {
                self.warn(
                    i,
                    label,
                    format!(
                        "postData encoding '{}' is not understood: sent without a body",
                        short(enc)
                    ),
                );
                None
            }
            (Some(Value::Null) | None, _) => self.params_body(i, label, pd, mime),
            (Some(_), _) => {
                self.warn(
                    i,
                    label,
                    "postData.text is not a string: sent without a body",
                );
                None
            }
        };
        let body = body?;
        if body.contains("${") {
            self.warn(
                i,
                label,
                "the body holds '${', which headroom reads as a variable and cannot escape: sent \
                 without a body",
            );
            return None;
        }
        let has_type = headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("content-type"));
        if !has_type
            && !mime.is_empty()
            && !mime.contains(['\r', '\n', '\0'])
            && !mime.contains("${")
        {
            headers.push(("Content-Type".into(), mime.to_string()));
        }
        Some(body)
    }

    /// A body from `postData.params` (HAR's parsed form), when there is no `text`.
    fn params_body(&mut self, i: usize, label: &str, pd: &Value, mime: &str) -> Option<String> {
        let params = pd.get("params").and_then(Value::as_array)?;
        if params.is_empty() {
            return None;
        }
        if !mime
            .to_ascii_lowercase()
            .starts_with("application/x-www-form-urlencoded")
        {
            self.warn(
                i,
                label,
                format!(
                    "postData has params but no text ({}): a multipart body is not rebuilt, sent \
                     without a body",
                    short(mime)
                ),
            );
            return None;
        }
        let mut pairs = Vec::new();
        for p in params {
            let name = p.get("name").and_then(Value::as_str);
            let value = p.get("value").and_then(Value::as_str).unwrap_or("");
            match name {
                Some(n) => pairs.push((n.to_string(), value.to_string())),
                None => {
                    self.warn(i, label, "a postData param without a string name: dropped");
                }
            }
        }
        self.warn(
            i,
            label,
            "postData has params but no text: the body is rebuilt from them, URL-encoded",
        );
        Some(form_encode(&pairs))
    }
}

/// `application/x-www-form-urlencoded` of `name=value` pairs.
fn form_encode(pairs: &[(String, String)]) -> String {
    let enc = |s: &str| {
        let mut out = String::new();
        for b in s.bytes() {
            match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => {
                    out.push(b as char)
                }
                b' ' => out.push('+'),
                _ => out.push_str(&format!("%{b:02X}")),
            }
        }
        out
    };
    pairs
        .iter()
        .map(|(n, v)| format!("{}={}", enc(n), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}
