//! A response's header block, decoded: its regular fields kept in reused buffers (handed to the worker as
//! `&[httparse::Header]`, the type its assertions take) and what its pseudo-headers and `content-length` say,
//! checked against HTTP/2's rules for a response (RFC 9113 §8.3.2). Apart from `h2` because this is
//! per-block work that needs none of the connection's state but the HPACK decoder it is given; `h2::Client`
//! decides what a decoded block means for its stream (a head, trailers, an error).

use std::ops::Range;

use crate::h2_request::trim;
use crate::hpack::{Decoder, HpackError};

/// What a decoded header block says, beyond its regular fields (kept in [`Fields`]).
#[derive(Debug, Default)]
pub(crate) struct Decoded {
    pub(crate) status: Option<u16>,
    pub(crate) content_length: Option<u64>,
    /// The block decoded but breaks HTTP/2's rules for a response: the stream is reset.
    pub(crate) malformed: Option<&'static str>,
    /// Over the header list limit: a connection error.
    pub(crate) too_large: bool,
}

/// What `:status` makes of a block that is not trailers.
pub(crate) enum Status {
    /// The final head.
    Final(u16),
    /// A 1xx head: skipped, the final one follows.
    Interim,
    /// No head a server may send: the stream is reset.
    Malformed(&'static str),
}

impl Status {
    /// `end_stream`: the block ends the stream (which a 1xx head may not).
    pub(crate) fn of(status: Option<u16>, end_stream: bool) -> Status {
        match status {
            None => Status::Malformed("response without :status"),
            Some(101) => Status::Malformed("101 Switching Protocols in HTTP/2"),
            Some(100..=199) if end_stream => Status::Malformed("1xx response with END_STREAM"),
            Some(100..=199) => Status::Interim,
            Some(status) => Status::Final(status),
        }
    }
}

/// The regular fields of the last block decoded: their bytes, each one's name and value ranges in them, and
/// the allocation the `Head` event's header slice is built in (see `recycle`).
#[derive(Debug, Default)]
pub(crate) struct Fields {
    bytes: Vec<u8>,
    ranges: Vec<(Range<usize>, Range<usize>)>,
    list: Vec<httparse::Header<'static>>,
}

impl Fields {
    /// Decodes a whole header block into these fields and what its pseudo-headers and content-length say.
    /// A header list over `limit` bytes (names, values and 32 per field) stops keeping fields and is
    /// reported as `too_large`.
    pub(crate) fn decode(&mut self, decoder: &mut Decoder, block: &[u8], limit: usize) -> Result<Decoded, HpackError> {
        let Fields { bytes: field_bytes, ranges: fields, .. } = self;
        field_bytes.clear();
        fields.clear();
        let mut d = Decoded::default();
        let mut size = 0usize;
        let mut regular = false;
        let malformed = |d: &mut Decoded, why: &'static str| {
            d.malformed.get_or_insert(why);
        };
        decoder.decode(block, |name, value| {
            size += name.len() + value.len() + 32;
            if size > limit {
                d.too_large = true;
                return;
            }
            if let Some(pseudo) = name.strip_prefix(b":") {
                if regular {
                    malformed(&mut d, "pseudo-header after a regular field");
                } else if pseudo != b"status" {
                    malformed(&mut d, "pseudo-header other than :status in a response");
                } else if d.status.is_some() {
                    malformed(&mut d, "two :status fields");
                } else {
                    match value {
                        &[a, b, c] if [a, b, c].iter().all(u8::is_ascii_digit) && a != b'0' => {
                            d.status = Some(u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0'));
                        }
                        _ => malformed(&mut d, "invalid :status"),
                    }
                }
                return;
            }
            regular = true;
            if name.is_empty() || name.iter().any(|&b| b <= b' ' || b >= 0x7f || b.is_ascii_uppercase() || b == b':') {
                malformed(&mut d, "invalid field name");
                return;
            }
            if value.iter().any(|&b| b == 0 || b == b'\r' || b == b'\n') {
                malformed(&mut d, "invalid field value");
                return;
            }
            if name == b"content-length" {
                let n = std::str::from_utf8(trim(value))
                    .ok()
                    .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|v| v.parse::<u64>().ok());
                match n {
                    Some(n) if d.content_length.is_none_or(|l| l == n) => d.content_length = Some(n),
                    _ => malformed(&mut d, "invalid content-length"),
                }
            }
            let name_at = field_bytes.len();
            field_bytes.extend_from_slice(name);
            let value_at = field_bytes.len();
            field_bytes.extend_from_slice(value);
            fields.push((name_at..value_at, value_at..field_bytes.len()));
        })?;
        Ok(d)
    }

    /// Hands the fields to `f` as a header slice, built in the same allocation every time.
    pub(crate) fn with_headers(&mut self, f: impl FnOnce(&[httparse::Header<'_>])) {
        let mut headers = recycle(std::mem::take(&mut self.list));
        for (name, value) in &self.ranges {
            // Names were checked to be printable ASCII while decoding.
            let name = std::str::from_utf8(&self.bytes[name.clone()]).unwrap_or("");
            headers.push(httparse::Header { name, value: &self.bytes[value.clone()] });
        }
        f(&headers);
        self.list = recycle(headers);
    }
}

/// Empties `list` and hands back its allocation typed for another lifetime, so the `Head` event's header slice
/// is built in the same buffer every time. Collecting a `vec::IntoIter` into a `Vec` of an element with the
/// same layout (only the lifetime differs) reuses the allocation, so this does not allocate.
fn recycle<'b>(mut list: Vec<httparse::Header<'_>>) -> Vec<httparse::Header<'b>> {
    list.clear();
    list.into_iter().map(|_| httparse::EMPTY_HEADER).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_event_reuses_one_allocation() {
        let mut list: Vec<httparse::Header<'static>> = Vec::with_capacity(16);
        let at = list.as_ptr() as usize;
        let bytes = b"name".to_vec();
        let mut borrowed = recycle(std::mem::take(&mut list));
        borrowed.push(httparse::Header { name: "n", value: &bytes });
        assert_eq!(borrowed.as_ptr() as usize, at);
        list = recycle(borrowed);
        assert_eq!((list.as_ptr() as usize, list.capacity(), list.len()), (at, 16, 0));
    }
}
