//! Requests as parts: what the encoder wrote, and where it wrote each part.
//!
//! A [`Batch`] holds HTTP/1.1 requests encoded back to back (the bytes a connection writes)
//! and, for each, the spans of its method, target, header fields and body as the encoder
//! wrote them. Whoever needs a request's parts reads them from the spans, never by parsing the
//! bytes: HTTP/2 sends each request's parts as a stream's fields, the browser reads the method
//! and target of the request a reply answers and writes its next hop (a redirect, a Digest
//! answer) from the parts of the request before. Nothing re-parses what headroom wrote.
//!
//! A batch keeps its buffers: cleared and refilled, a warm batch allocates nothing. Bytes that
//! are not HTTP requests (a raw TCP send, a link's frames) go in through [`Batch::raw_mut`] and
//! have no parts.

use std::ops::Range;

use super::{encode_marked, put_marked, put_request_line};

/// The spans of one request in its batch's bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Entry {
    method: Range<usize>,
    target: Range<usize>,
    /// Its header fields: a range of [`Batch::fields`].
    fields: Range<usize>,
    body: Range<usize>,
    /// The request's bytes, request line to body.
    wire: Range<usize>,
}

/// Requests encoded back to back as HTTP/1.1, and the parts of each (see the module docs).
/// Reads as the bytes themselves (`Deref<Target = [u8]>`): what a connection writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Batch {
    bytes: Vec<u8>,
    entries: Vec<Entry>,
    /// Name and value spans of every request's header fields, in the order written.
    fields: Vec<(Range<usize>, Range<usize>)>,
}

/// One request of a [`Batch`], read from its parts.
#[derive(Debug, Clone, Copy)]
pub struct Parts<'a> {
    bytes: &'a [u8],
    entry: &'a Entry,
    fields: &'a [(Range<usize>, Range<usize>)],
}

impl std::ops::Deref for Batch {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl Batch {
    pub fn new() -> Batch {
        Batch::default()
    }

    /// Empties the batch, keeping its buffers.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.entries.clear();
        self.fields.clear();
    }

    /// How many requests it holds (bytes written through [`Batch::raw_mut`] are none).
    pub fn count(&self) -> usize {
        self.entries.len()
    }

    /// Bytes the buffer holds without growing.
    pub fn capacity(&self) -> usize {
        self.bytes.capacity()
    }

    /// The `i`th request.
    pub fn get(&self, i: usize) -> Option<Parts<'_>> {
        self.entries.get(i).map(|entry| Parts {
            bytes: &self.bytes,
            entry,
            fields: &self.fields,
        })
    }

    /// Every request, in order.
    pub fn iter(&self) -> impl Iterator<Item = Parts<'_>> + '_ {
        (0..self.entries.len()).filter_map(move |i| self.get(i))
    }

    /// The bytes of the first `n` requests (all of them when it holds fewer).
    pub fn first(&self, n: usize) -> &[u8] {
        match n.checked_sub(1).and_then(|i| self.entries.get(i)) {
            Some(e) => &self.bytes[..e.wire.end],
            None if n == 0 => &[],
            None => &self.bytes,
        }
    }

    /// How many bytes the batch holds, requests and raw bytes alike.
    pub fn byte_len(&self) -> usize {
        self.bytes.len()
    }

    /// The buffer for bytes that are not HTTP requests (a raw send, a link's frames): they
    /// are written as they are and have no parts.
    pub fn raw_mut(&mut self) -> &mut Vec<u8> {
        &mut self.bytes
    }

    /// Encodes a request after the others, as [`super::encode_parts_with`] does, and keeps
    /// where its parts went.
    #[allow(clippy::too_many_arguments)]
    pub fn push<'h, H>(
        &mut self,
        method: &str,
        path: &str,
        host: &str,
        headers: H,
        fields: &[(&str, &[u8])],
        body: &[u8],
        keep_alive: bool,
    ) where
        H: Iterator<Item = (&'h str, &'h str)> + Clone,
    {
        let first_field = self.fields.len();
        let marks = encode_marked(
            method,
            path,
            host,
            headers,
            fields,
            body,
            keep_alive,
            &mut self.bytes,
            &mut self.fields,
        );
        self.entries.push(Entry {
            method: marks.method,
            target: marks.target,
            fields: first_field..self.fields.len(),
            body: marks.body,
            wire: marks.wire,
        });
    }

    /// Appends every request of `other` (a request encoded once, sent many times), with its
    /// parts.
    pub fn append(&mut self, other: &Batch) {
        let shift = self.bytes.len();
        let fshift = self.fields.len();
        let at = |r: &Range<usize>| r.start + shift..r.end + shift;
        self.bytes.extend_from_slice(&other.bytes);
        self.fields
            .extend(other.fields.iter().map(|(n, v)| (at(n), at(v))));
        self.entries.extend(other.entries.iter().map(|e| Entry {
            method: at(&e.method),
            target: at(&e.target),
            fields: e.fields.start + fshift..e.fields.end + fshift,
            body: at(&e.body),
            wire: at(&e.wire),
        }));
    }

    /// Writes a request made from `from` (a request of another batch): `method` to `target`,
    /// with `from`'s header fields but those `drop` names (lower-case names compared without
    /// case), then `fields` (the browser's own; empty values skipped), and `from`'s body when
    /// `body`. How a redirect or a challenge answered goes again, from the request's parts.
    pub fn push_from(
        &mut self,
        from: Parts<'_>,
        method: &str,
        target: &str,
        drop: &dyn Fn(&[u8]) -> bool,
        fields: &[(&str, &[u8])],
        body: bool,
    ) {
        let out = &mut self.bytes;
        let start = out.len();
        let (method_span, target_span) = put_request_line(out, method, target);
        let first_field = self.fields.len();
        for (name, value) in from.fields() {
            if !drop(name) {
                put_marked(out, name, value, &mut self.fields);
            }
        }
        for (name, value) in fields.iter().filter(|(_, v)| !v.is_empty()) {
            put_marked(out, name.as_bytes(), value, &mut self.fields);
        }
        out.extend_from_slice(b"\r\n");
        let b0 = out.len();
        if body {
            out.extend_from_slice(from.body());
        }
        let end = out.len();
        self.entries.push(Entry {
            method: method_span,
            target: target_span,
            fields: first_field..self.fields.len(),
            body: b0..end,
            wire: start..end,
        });
    }
}

impl<'a> Parts<'a> {
    fn text(&self, r: &Range<usize>) -> &'a str {
        std::str::from_utf8(&self.bytes[r.clone()]).unwrap_or("")
    }

    pub fn method(&self) -> &'a str {
        self.text(&self.entry.method)
    }

    /// [`method`](Self::method) and [`target`](Self::target) as the bytes written, unchecked:
    /// for a sender that writes them on (HTTP/2's pseudo-fields) without reading them.
    pub fn method_bytes(&self) -> &'a [u8] {
        &self.bytes[self.entry.method.clone()]
    }

    pub fn target_bytes(&self) -> &'a [u8] {
        &self.bytes[self.entry.target.clone()]
    }

    /// The request target as written (`/` for an empty path).
    pub fn target(&self) -> &'a str {
        self.text(&self.entry.target)
    }

    /// The header fields as written: name and value, `Host` among them.
    pub fn fields(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + Clone + 'a {
        let bytes = self.bytes;
        self.fields[self.entry.fields.clone()]
            .iter()
            .map(move |(n, v)| (&bytes[n.clone()], &bytes[v.clone()]))
    }

    /// The `Host` field's value (empty without one): HTTP/2's `:authority`.
    pub fn authority(&self) -> &'a [u8] {
        self.fields()
            .find(|(n, _)| n.eq_ignore_ascii_case(b"host"))
            .map_or(&[], |(_, v)| v)
    }

    pub fn body(&self) -> &'a [u8] {
        &self.bytes[self.entry.body.clone()]
    }

    /// The request's bytes, request line to body.
    pub fn wire(&self) -> &'a [u8] {
        &self.bytes[self.entry.wire.clone()]
    }
}
