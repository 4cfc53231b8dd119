//! Streaming decoders for HTTP content codings (`Content-Encoding: gzip`, `deflate`, `br`),
//! sans I/O: [`ContentDecoder::feed`] takes body bytes as they come (after de-chunking), in any
//! split, and counts what they decode to. The decoded bytes are not kept: a load generator
//! wants to know that a body decodes and how big it is, not its text.
//!
//! # Memory, and what allocates
//!
//! Output goes into one fixed scratch buffer ([`SCRATCH_LEN`] bytes) that each call overwrites,
//! so a body of any size decodes in bounded memory. Nothing is allocated before the first
//! encoded response. Then:
//! - **gzip and deflate** (miniz_oxide through flate2): the inflate state (its 32 KiB window
//!   included, ~43 KiB in all) is created on the first such response and *reset*, not
//!   re-created, for every later one; the gzip header and trailer are parsed here by a small
//!   state machine (CRC-32 and length checked). A warm decoder allocates nothing per response
//!   (`tests/encoding_alloc.rs` counts it).
//! - **br**: `brotli-decompressor` has no reset, and sizes its ring buffer and Huffman tables
//!   per stream (up to the stream's window, at most 16 MiB in the RFC 7932 format HTTP uses), so
//!   a fresh state is made for each br response and dropped when it ends: a few allocations per
//!   br response, no memory held between them.
//!
//! # What counts as corrupt
//!
//! Bytes that do not decode, a stream that stops before its end (truncated), bytes after its
//! end, or a gzip CRC-32 or length that does not match: each is a [`CodingError`], reported in
//! the response's [`BodyStats`] when the body ends. After the first error the rest of the body
//! is only counted (the HTTP framing is still sound, so the connection's next response is not
//! lost). Nothing here panics on any input.

use brotli_decompressor::{BrotliDecompressStream, BrotliResult, BrotliState, StandardAlloc};
use flate2::{Decompress, FlushDecompress, Status};

/// Bytes of the scratch buffer decoded output is written to (and forgotten).
pub const SCRATCH_LEN: usize = 8 * 1024;

/// A content coding headroom decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coding {
    /// RFC 1952 (also sent as `x-gzip`).
    Gzip,
    /// The zlib format (RFC 1950), as RFC 9110 §8.4.1.2 defines `deflate`.
    Deflate,
    /// Brotli (RFC 7932).
    Br,
}

impl Coding {
    /// The coding a `Content-Encoding` value names, if headroom decodes it. `identity`, a list
    /// of codings (`gzip, br`: applied in turn, which servers do not do) and unknown codings are
    /// `None`: such a body is counted as it is, not decoded.
    pub fn parse(value: &[u8]) -> Option<Coding> {
        let v = value.trim_ascii();
        let is = |name: &str| v.eq_ignore_ascii_case(name.as_bytes());
        if is("gzip") || is("x-gzip") {
            Some(Coding::Gzip)
        } else if is("deflate") {
            Some(Coding::Deflate)
        } else if is("br") {
            Some(Coding::Br)
        } else {
            None
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            Coding::Gzip => "gzip",
            Coding::Deflate => "deflate",
            Coding::Br => "br",
        }
    }
}

/// Why an encoded body did not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CodingError {
    #[error("compressed body does not decode")]
    Corrupt,
    #[error("compressed body ends before its stream does")]
    Truncated,
    #[error("bytes after the end of the compressed stream")]
    TrailingData,
    #[error("gzip CRC-32 or length does not match the decoded body")]
    Checksum,
}

/// What one encoded response body came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyStats {
    pub coding: Coding,
    /// Body bytes as received (after de-chunking).
    pub encoded: u64,
    /// Bytes they decoded to (up to the error, if any).
    pub decoded: u64,
    pub error: Option<CodingError>,
}

/// Where a gzip member's framing stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gz {
    /// The fixed 10-byte header, `n` bytes of it seen.
    Fixed {
        n: u8,
    },
    /// FEXTRA's 2-byte length, `n` bytes seen.
    ExtraLen {
        n: u8,
    },
    Extra {
        left: u16,
    },
    /// FNAME, FCOMMENT: zero-terminated.
    Name,
    Comment,
    /// FHCRC: 2 bytes left to skip (`left`).
    HeaderCrc {
        left: u8,
    },
    Deflate,
    /// CRC-32 and ISIZE, `n` of 8 bytes seen.
    Trailer {
        n: u8,
    },
    /// A member ended: the body may end, or another member follow (RFC 1952 §2.2).
    End,
}

const FHCRC: u8 = 0x02;
const FEXTRA: u8 = 0x04;
const FNAME: u8 = 0x08;
const FCOMMENT: u8 = 0x10;
const FRESERVED: u8 = 0xe0;

type Brotli = BrotliState<StandardAlloc, StandardAlloc, StandardAlloc>;

/// One connection's (or user's) content decoder: [`start`](Self::start) at each response head,
/// [`feed`](Self::feed) its body bytes, [`finish`](Self::finish) at its end.
#[derive(Default)]
pub struct ContentDecoder {
    /// The coding of the body in progress (`None`: not decoding).
    coding: Option<Coding>,
    encoded: u64,
    decoded: u64,
    error: Option<CodingError>,
    /// gzip: framing; deflate: `Deflate` then `End`.
    gz: Option<Gz>,
    flags: u8,
    extra_len: u16,
    trailer: [u8; 8],
    crc: crc32fast::Hasher,
    /// Decoded bytes of the current gzip member (ISIZE is this mod 2^32).
    member_out: u64,
    /// Created on the first gzip/deflate body, reset for each later one.
    inflate: Option<Decompress>,
    /// Made for each br body, dropped at its end.
    brotli: Option<Box<Brotli>>,
    br_done: bool,
    /// Allocated on the first encoded body; [`SCRATCH_LEN`] bytes.
    scratch: Vec<u8>,
    last: Option<BodyStats>,
}

impl std::fmt::Debug for ContentDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContentDecoder")
            .field("coding", &self.coding)
            .field("encoded", &self.encoded)
            .field("decoded", &self.decoded)
            .field("error", &self.error)
            .field("last", &self.last)
            .finish_non_exhaustive()
    }
}

impl ContentDecoder {
    /// A decoder that holds nothing until its first encoded body.
    pub fn new() -> ContentDecoder {
        ContentDecoder::default()
    }

    /// A response body begins, encoded with `coding` (`None`: not encoded, nothing to do).
    /// Forgets any body in progress and the last result.
    pub fn start(&mut self, coding: Option<Coding>) {
        self.abort();
        let Some(coding) = coding else {
            return;
        };
        self.coding = Some(coding);
        if self.scratch.len() != SCRATCH_LEN {
            self.scratch = vec![0; SCRATCH_LEN];
        }
        match coding {
            Coding::Gzip => {
                self.gz = Some(Gz::Fixed { n: 0 });
                self.crc.reset();
                self.member_out = 0;
            }
            Coding::Deflate => {
                self.gz = Some(Gz::Deflate);
                self.inflate_reset(true);
            }
            Coding::Br => {
                // The RFC 7932 window (16 MiB at most), not the large-window extension.
                self.brotli = Some(Box::new(BrotliState::new_strict(
                    StandardAlloc::default(),
                    StandardAlloc::default(),
                    StandardAlloc::default(),
                )));
                self.br_done = false;
            }
        }
    }

    /// Body bytes of the response in progress, as received. Ignored when it is not encoded.
    pub fn feed(&mut self, input: &[u8]) {
        let Some(coding) = self.coding else {
            return;
        };
        self.encoded = self.encoded.saturating_add(input.len() as u64);
        if self.error.is_some() || input.is_empty() {
            return;
        }
        let r = match coding {
            Coding::Gzip | Coding::Deflate => self.feed_flate(input),
            Coding::Br => self.feed_br(input),
        };
        if let Err(e) = r {
            self.error = Some(e);
            self.brotli = None;
        }
    }

    /// The body ended: what it came to, or `None` when it was not encoded (or was empty, as a
    /// HEAD, 204 or 304 response's is, whatever its `Content-Encoding`). Also kept for
    /// [`last`](Self::last) until the next [`start`](Self::start).
    pub fn finish(&mut self) -> Option<BodyStats> {
        let coding = self.coding.take()?;
        let complete = match coding {
            Coding::Gzip | Coding::Deflate => self.gz == Some(Gz::End),
            Coding::Br => self.br_done,
        };
        let error = self.error.or((!complete).then_some(CodingError::Truncated));
        self.brotli = None;
        self.last = (self.encoded > 0).then_some(BodyStats {
            coding,
            encoded: self.encoded,
            decoded: self.decoded,
            error,
        });
        self.last
    }

    /// The result of the body that [`finish`](Self::finish) ended last.
    pub fn last(&self) -> Option<BodyStats> {
        self.last
    }

    /// Forget the body in progress and the last result (a reconnect, a protocol error).
    /// Keeps the inflate state and the scratch buffer for the next body.
    pub fn abort(&mut self) {
        self.coding = None;
        self.encoded = 0;
        self.decoded = 0;
        self.error = None;
        self.gz = None;
        self.brotli = None;
        self.br_done = false;
        self.last = None;
    }

    fn inflate_reset(&mut self, zlib: bool) {
        match self.inflate.as_mut() {
            Some(d) => d.reset(zlib),
            None => self.inflate = Some(Decompress::new(zlib)),
        }
    }

    /// gzip (framing here, deflate in miniz_oxide) and zlib.
    fn feed_flate(&mut self, mut input: &[u8]) -> Result<(), CodingError> {
        while let Some((&b, rest)) = input.split_first() {
            let Some(state) = self.gz else {
                return Err(CodingError::Corrupt);
            };
            // Header and trailer bytes go one at a time (a few per body); deflate data in bulk.
            let next = match state {
                Gz::Deflate => {
                    let used = self.inflate_some(input)?;
                    input = input.get(used..).unwrap_or_default();
                    continue;
                }
                Gz::Fixed { n } => {
                    match (n, b) {
                        (0, 0x1f) | (1, 0x8b) | (2, 8) => {}
                        (3, f) if f & FRESERVED == 0 => self.flags = f,
                        (0..=3, _) => return Err(CodingError::Corrupt),
                        _ => {}
                    }
                    if n < 9 {
                        Gz::Fixed { n: n + 1 }
                    } else {
                        self.after_header_part(0)
                    }
                }
                Gz::ExtraLen { n: 0 } => {
                    self.extra_len = u16::from(b);
                    Gz::ExtraLen { n: 1 }
                }
                Gz::ExtraLen { .. } => {
                    self.extra_len |= u16::from(b) << 8;
                    match self.extra_len {
                        0 => self.after_header_part(1),
                        left => Gz::Extra { left },
                    }
                }
                Gz::Extra { left } => {
                    // Skip as much of the extra field as is here.
                    let take = input.len().min(usize::from(left));
                    input = input.get(take..).unwrap_or_default();
                    let left = left.saturating_sub(take as u16);
                    self.gz = Some(if left == 0 {
                        self.after_header_part(1)
                    } else {
                        Gz::Extra { left }
                    });
                    continue;
                }
                Gz::Name | Gz::Comment => match input.iter().position(|&c| c == 0) {
                    Some(i) => {
                        input = input.get(i + 1..).unwrap_or_default();
                        let part = if state == Gz::Name { 2 } else { 3 };
                        self.gz = Some(self.after_header_part(part));
                        continue;
                    }
                    None => return Ok(()),
                },
                Gz::HeaderCrc { left } => {
                    if left > 1 {
                        Gz::HeaderCrc { left: left - 1 }
                    } else {
                        self.after_header_part(4)
                    }
                }
                Gz::Trailer { n } => {
                    self.trailer[usize::from(n)] = b;
                    if n < 7 {
                        Gz::Trailer { n: n + 1 }
                    } else {
                        self.check_trailer()?;
                        Gz::End
                    }
                }
                Gz::End if self.coding == Some(Coding::Gzip) && b == 0x1f => {
                    // Another member (concatenated gzip).
                    self.crc.reset();
                    self.member_out = 0;
                    Gz::Fixed { n: 1 }
                }
                Gz::End => return Err(CodingError::TrailingData),
            };
            self.gz = Some(next);
            input = rest;
        }
        Ok(())
    }

    /// The gzip header state after optional part `done` (0 fixed, 1 extra, 2 name, 3 comment,
    /// 4 header CRC) is behind us: the next optional part the flags announce, else the data.
    fn after_header_part(&mut self, done: u8) -> Gz {
        let f = self.flags;
        if done < 1 && f & FEXTRA != 0 {
            Gz::ExtraLen { n: 0 }
        } else if done < 2 && f & FNAME != 0 {
            Gz::Name
        } else if done < 3 && f & FCOMMENT != 0 {
            Gz::Comment
        } else if done < 4 && f & FHCRC != 0 {
            Gz::HeaderCrc { left: 2 }
        } else {
            self.inflate_reset(false);
            Gz::Deflate
        }
    }

    fn check_trailer(&mut self) -> Result<(), CodingError> {
        let [c0, c1, c2, c3, s0, s1, s2, s3] = self.trailer;
        let crc = u32::from_le_bytes([c0, c1, c2, c3]);
        let size = u32::from_le_bytes([s0, s1, s2, s3]);
        let hasher = std::mem::take(&mut self.crc);
        if hasher.finalize() != crc || self.member_out as u32 != size {
            return Err(CodingError::Checksum);
        }
        Ok(())
    }

    /// Inflates from `input` until it is used up or the deflate stream ends; returns the bytes
    /// used. Each turn of the loop consumes input or produces output, else it stops.
    fn inflate_some(&mut self, input: &[u8]) -> Result<usize, CodingError> {
        let gzip = self.coding == Some(Coding::Gzip);
        let Some(d) = self.inflate.as_mut() else {
            return Err(CodingError::Corrupt);
        };
        let mut used = 0usize;
        loop {
            let (in0, out0) = (d.total_in(), d.total_out());
            let rest = input.get(used..).unwrap_or_default();
            let status = d
                .decompress(rest, &mut self.scratch, FlushDecompress::None)
                .map_err(|_| CodingError::Corrupt)?;
            let took = usize::try_from(d.total_in() - in0).unwrap_or(rest.len());
            let made = usize::try_from(d.total_out() - out0).unwrap_or(0);
            used += took.min(rest.len());
            self.decoded += made as u64;
            if gzip {
                let out = self.scratch.get(..made).unwrap_or_default();
                self.crc.update(out);
                self.member_out += made as u64;
            }
            if status == Status::StreamEnd {
                self.gz = Some(if gzip { Gz::Trailer { n: 0 } } else { Gz::End });
                return Ok(used);
            }
            let full = made == self.scratch.len();
            if (took == 0 && made == 0) || (used >= input.len() && !full) {
                return Ok(used);
            }
        }
    }

    fn feed_br(&mut self, input: &[u8]) -> Result<(), CodingError> {
        if self.br_done {
            return Err(CodingError::TrailingData);
        }
        let Some(state) = self.brotli.as_deref_mut() else {
            return Err(CodingError::Corrupt);
        };
        let mut available_in = input.len();
        let mut input_offset = 0usize;
        loop {
            let mut available_out = self.scratch.len();
            let mut output_offset = 0usize;
            let mut total_out = 0usize;
            let r = BrotliDecompressStream(
                &mut available_in,
                &mut input_offset,
                input,
                &mut available_out,
                &mut output_offset,
                &mut self.scratch,
                &mut total_out,
                state,
            );
            self.decoded += output_offset as u64;
            match r {
                // Asked for room after making none would loop forever: call it corrupt.
                BrotliResult::NeedsMoreOutput if output_offset == 0 => {
                    return Err(CodingError::Corrupt)
                }
                BrotliResult::NeedsMoreOutput => {}
                BrotliResult::NeedsMoreInput => return Ok(()),
                BrotliResult::ResultSuccess => {
                    self.br_done = true;
                    self.brotli = None;
                    return if available_in > 0 {
                        Err(CodingError::TrailingData)
                    } else {
                        Ok(())
                    };
                }
                BrotliResult::ResultFailure => return Err(CodingError::Corrupt),
            }
        }
    }
}

#[cfg(test)]
mod tests;
