//! Looking inside one complete, captured stanza: find a child element by local name, take its
//! text. A forward scan over the bytes (quotes, comments and CDATA skipped), no tree, no
//! allocation; on malformed input it finds nothing rather than failing.

use std::ops::Range;

use super::splitter::local_name;

/// An element found in a stanza's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Element {
    /// From its `<` to the `>` of its start tag, inclusive.
    pub start_tag: Range<usize>,
    /// Between its start and end tags; `None` for an empty-element tag (`<a/>`).
    pub content: Option<Range<usize>>,
    /// Index just past its end (past `/>` or its end tag's `>`).
    pub end: usize,
}

/// What a markup construct at some `<` is.
enum Markup<'a> {
    Start {
        name: &'a [u8],
        tag_end: usize,
        empty: bool,
    },
    End {
        tag_end: usize,
    },
    /// Comment, CDATA, processing instruction, declaration: skip to `end`.
    Skip {
        end: usize,
    },
}

fn find_from(hay: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    let rest = hay.get(from..)?;
    if needle.is_empty() || rest.len() < needle.len() {
        return None;
    }
    rest.windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

/// Index of the `>` ending the tag that starts at `lt`, skipping quoted values.
pub(crate) fn tag_end(xml: &[u8], lt: usize) -> Option<usize> {
    let mut quote = 0u8;
    for (k, &c) in xml.get(lt..)?.iter().enumerate() {
        if quote != 0 {
            if c == quote {
                quote = 0;
            }
        } else if c == b'"' || c == b'\'' {
            quote = c;
        } else if c == b'>' {
            return Some(lt + k);
        }
    }
    None
}

fn markup_at(xml: &[u8], lt: usize) -> Option<Markup<'_>> {
    let rest = xml.get(lt..)?;
    if rest.starts_with(b"<!--") {
        let e = find_from(xml, lt + 4, b"-->")?;
        return Some(Markup::Skip { end: e + 3 });
    }
    if rest.starts_with(b"<![CDATA[") {
        let e = find_from(xml, lt + 9, b"]]>")?;
        return Some(Markup::Skip { end: e + 3 });
    }
    if rest.starts_with(b"<?") {
        let e = find_from(xml, lt + 2, b"?>")?;
        return Some(Markup::Skip { end: e + 2 });
    }
    if rest.starts_with(b"<!") {
        let e = tag_end(xml, lt)?;
        return Some(Markup::Skip { end: e + 1 });
    }
    let te = tag_end(xml, lt)?;
    if rest.get(1) == Some(&b'/') {
        return Some(Markup::End { tag_end: te });
    }
    let name_len = rest
        .iter()
        .skip(1)
        .position(|&c| matches!(c, b' ' | b'\t' | b'\r' | b'\n' | b'/' | b'>'))?;
    let name = rest.get(1..1 + name_len)?;
    let empty = te > lt && xml.get(te - 1) == Some(&b'/');
    Some(Markup::Start {
        name,
        tag_end: te,
        empty,
    })
}

/// Index just past the end of the element whose start tag ends at `te` (not empty).
fn element_end(xml: &[u8], te: usize) -> Option<(usize, usize)> {
    let mut depth = 1u32;
    let mut pos = te + 1;
    loop {
        let lt = pos + xml.get(pos..)?.iter().position(|&c| c == b'<')?;
        match markup_at(xml, lt)? {
            Markup::Skip { end } => pos = end,
            Markup::Start { tag_end, empty, .. } => {
                if !empty {
                    depth += 1;
                }
                pos = tag_end + 1;
            }
            Markup::End { tag_end } => {
                depth -= 1;
                if depth == 0 {
                    return Some((lt, tag_end + 1));
                }
                pos = tag_end + 1;
            }
        }
    }
}

/// The first element at or after `from` (at any depth) whose local name is `local`.
pub fn find_element_from(xml: &[u8], from: usize, local: &[u8]) -> Option<Element> {
    let mut pos = from;
    loop {
        let lt = pos + xml.get(pos..)?.iter().position(|&c| c == b'<')?;
        match markup_at(xml, lt)? {
            Markup::Skip { end } => pos = end,
            Markup::End { tag_end } => pos = tag_end + 1,
            Markup::Start {
                name,
                tag_end,
                empty,
            } => {
                if local_name(name) == local {
                    if empty {
                        return Some(Element {
                            start_tag: lt..tag_end + 1,
                            content: None,
                            end: tag_end + 1,
                        });
                    }
                    let (content_end, end) = element_end(xml, tag_end)?;
                    return Some(Element {
                        start_tag: lt..tag_end + 1,
                        content: Some(tag_end + 1..content_end),
                        end,
                    });
                }
                pos = tag_end + 1;
            }
        }
    }
}

/// The first element (at any depth) whose local name is `local`.
pub fn find_element(xml: &[u8], local: &str) -> Option<Element> {
    find_element_from(xml, 0, local.as_bytes())
}

/// The raw content (entities not decoded) of the first element named `local`; empty for `<a/>`.
/// E.g. `child_text(bytes, "body")` for a message's body, `"jid"` for a bind result.
pub fn child_text<'a>(xml: &'a [u8], local: &str) -> Option<&'a [u8]> {
    let e = find_element(xml, local)?;
    match e.content {
        Some(r) => xml.get(r),
        None => Some(&[]),
    }
}

/// Every element named `local` (at any depth, not nested in one another), in order.
pub fn elements<'a>(xml: &'a [u8], local: &'a str) -> impl Iterator<Item = Element> + 'a {
    let mut pos = 0usize;
    std::iter::from_fn(move || {
        let e = find_element_from(xml, pos, local.as_bytes())?;
        pos = e.end.max(pos + 1);
        Some(e)
    })
}

/// The defined condition of an error stanza or stream error: the local name of the first child
/// element of its `<error>` (or of the `<stream:error>` itself), other than `<text>`, e.g.
/// `conflict`, `item-not-found`, `not-authorized`. Needs the captured bytes.
pub fn error_condition(stanza: &[u8]) -> Option<&[u8]> {
    let Markup::Start {
        name,
        tag_end,
        empty,
    } = markup_at(stanza, 0)?
    else {
        return None;
    };
    // For `<stream:error>` the stanza itself is the error element.
    let content = if local_name(name) == b"error" {
        if empty {
            return None;
        }
        tag_end + 1..element_end(stanza, tag_end)?.0
    } else {
        find_element_from(stanza, tag_end + 1, b"error")?.content?
    };
    let mut pos = content.start;
    while pos < content.end {
        let lt = pos
            + stanza
                .get(pos..content.end)?
                .iter()
                .position(|&c| c == b'<')?;
        match markup_at(stanza, lt)? {
            Markup::Skip { end } => pos = end,
            Markup::End { tag_end } => pos = tag_end + 1,
            Markup::Start {
                name,
                tag_end,
                empty,
            } => {
                let l = local_name(name);
                if l != b"text" {
                    return Some(l);
                }
                pos = if empty {
                    tag_end + 1
                } else {
                    element_end(stanza, tag_end)?.1
                };
            }
        }
    }
    None
}

/// Decoded length of XML character data: each entity or character reference (`&amp;`,
/// `&#x41;`) counts as the bytes of the character it stands for, CDATA markers count nothing.
/// For checking a received body's length against what was sent.
pub fn text_len(raw: &[u8]) -> usize {
    let mut n = 0usize;
    let mut i = 0usize;
    while let Some(&c) = raw.get(i) {
        if c == b'&' {
            if let Some(semi) = raw
                .get(i..)
                .and_then(|r| r.iter().take(12).position(|&x| x == b';'))
            {
                let ent = raw.get(i + 1..i + semi).unwrap_or(&[]);
                n += match ent {
                    [b'#', b'x' | b'X', hex @ ..] => char_len(
                        u32::from_str_radix(std::str::from_utf8(hex).unwrap_or(""), 16).ok(),
                    ),
                    [b'#', dec @ ..] => {
                        char_len(std::str::from_utf8(dec).ok().and_then(|d| d.parse().ok()))
                    }
                    _ => 1,
                };
                i += semi + 1;
                continue;
            }
        } else if raw.get(i..).is_some_and(|r| r.starts_with(b"<![CDATA[")) {
            let end = find_from(raw, i + 9, b"]]>").unwrap_or(raw.len());
            n += end - (i + 9).min(end);
            i = end + 3;
            continue;
        }
        n += 1;
        i += 1;
    }
    n
}

fn char_len(cp: Option<u32>) -> usize {
    cp.and_then(char::from_u32).map_or(1, char::len_utf8)
}
