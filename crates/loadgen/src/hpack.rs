//! HPACK (RFC 7541) for loadgen's HTTP/2 client: the static table, dynamic tables, integers, string literals
//! and Huffman decoding.
//!
//! [`Encoder`] writes request fields: an indexed field when the table has it, otherwise a literal with
//! incremental indexing, so a repeated request costs about a byte per field. loona-hpack's encoder never
//! indexes a field whose name is in the static table (`:authority`, `:path`, `user-agent`…), so every request
//! would carry those values again. No Huffman coding: it would cost CPU per request to save bytes on first use.
//!
//! [`Decoder`] reads response blocks field by field into a callback that borrows each name and value (from the
//! block, a table, or a scratch buffer for Huffman-coded strings), so a block costs no allocation unless it adds
//! to the dynamic table. Ours rather than a crate's: loona-hpack, the maintained decoder we used first, builds
//! a hash map for every Huffman-coded string it decodes (hpack-rs's design), which cost about 100,000
//! instructions per response against hyper's server (it codes content-length and date values each time).
//! Huffman decoding here walks a table of 256 states by 4-bit steps, built once per process from the code of
//! RFC 7541 Appendix B.

use std::collections::VecDeque;
use std::sync::LazyLock;

/// Why a header block could not be decoded: each is a COMPRESSION_ERROR for the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.reason())]
pub enum HpackError {
    Truncated,
    Integer,
    Index,
    Huffman,
    TableSize,
    SizeUpdateLate,
}

impl HpackError {
    /// The message, as the `'static` reason a connection error carries.
    pub fn reason(self) -> &'static str {
        match self {
            HpackError::Truncated => "HPACK block cut short",
            HpackError::Integer => "HPACK integer too large",
            HpackError::Index => "HPACK index 0 or beyond the tables",
            HpackError::Huffman => "HPACK Huffman string invalid (EOS, or padding that is not the EOS prefix)",
            HpackError::TableSize => "HPACK table size update above the limit we advertised",
            HpackError::SizeUpdateLate => "HPACK table size update after a field",
        }
    }
}

/// RFC 7541 Appendix A.
pub const STATIC_TABLE: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

/// RFC 7541 Appendix B: each symbol's code (0 to 255, then EOS), right-aligned, and its length in bits.
const HUFFMAN_CODES: [u32; 257] = [
    0x1ff8, 0x7fffd8, 0xfffffe2, 0xfffffe3, 0xfffffe4, 0xfffffe5, 0xfffffe6, 0xfffffe7, 0xfffffe8, 0xffffea,
    0x3ffffffc, 0xfffffe9, 0xfffffea, 0x3ffffffd, 0xfffffeb, 0xfffffec, 0xfffffed, 0xfffffee, 0xfffffef, 0xffffff0,
    0xffffff1, 0xffffff2, 0x3ffffffe, 0xffffff3, 0xffffff4, 0xffffff5, 0xffffff6, 0xffffff7, 0xffffff8, 0xffffff9,
    0xffffffa, 0xffffffb, 0x14, 0x3f8, 0x3f9, 0xffa, 0x1ff9, 0x15, 0xf8, 0x7fa, 0x3fa, 0x3fb, 0xf9, 0x7fb, 0xfa, 0x16,
    0x17, 0x18, 0x0, 0x1, 0x2, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x5c, 0xfb, 0x7ffc, 0x20, 0xffb, 0x3fc,
    0x1ffa, 0x21, 0x5d, 0x5e, 0x5f, 0x60, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x6b, 0x6c, 0x6d,
    0x6e, 0x6f, 0x70, 0x71, 0x72, 0xfc, 0x73, 0xfd, 0x1ffb, 0x7fff0, 0x1ffc, 0x3ffc, 0x22, 0x7ffd, 0x3, 0x23, 0x4,
    0x24, 0x5, 0x25, 0x26, 0x27, 0x6, 0x74, 0x75, 0x28, 0x29, 0x2a, 0x7, 0x2b, 0x76, 0x2c, 0x8, 0x9, 0x2d, 0x77, 0x78,
    0x79, 0x7a, 0x7b, 0x7ffe, 0x7fc, 0x3ffd, 0x1ffd, 0xffffffc, 0xfffe6, 0x3fffd2, 0xfffe7, 0xfffe8, 0x3fffd3,
    0x3fffd4, 0x3fffd5, 0x7fffd9, 0x3fffd6, 0x7fffda, 0x7fffdb, 0x7fffdc, 0x7fffdd, 0x7fffde, 0xffffeb, 0x7fffdf,
    0xffffec, 0xffffed, 0x3fffd7, 0x7fffe0, 0xffffee, 0x7fffe1, 0x7fffe2, 0x7fffe3, 0x7fffe4, 0x1fffdc, 0x3fffd8,
    0x7fffe5, 0x3fffd9, 0x7fffe6, 0x7fffe7, 0xffffef, 0x3fffda, 0x1fffdd, 0xfffe9, 0x3fffdb, 0x3fffdc, 0x7fffe8,
    0x7fffe9, 0x1fffde, 0x7fffea, 0x3fffdd, 0x3fffde, 0xfffff0, 0x1fffdf, 0x3fffdf, 0x7fffeb, 0x7fffec, 0x1fffe0,
    0x1fffe1, 0x3fffe0, 0x1fffe2, 0x7fffed, 0x3fffe1, 0x7fffee, 0x7fffef, 0xfffea, 0x3fffe2, 0x3fffe3, 0x3fffe4,
    0x7ffff0, 0x3fffe5, 0x3fffe6, 0x7ffff1, 0x3ffffe0, 0x3ffffe1, 0xfffeb, 0x7fff1, 0x3fffe7, 0x7ffff2, 0x3fffe8,
    0x1ffffec, 0x3ffffe2, 0x3ffffe3, 0x3ffffe4, 0x7ffffde, 0x7ffffdf, 0x3ffffe5, 0xfffff1, 0x1ffffed, 0x7fff2,
    0x1fffe3, 0x3ffffe6, 0x7ffffe0, 0x7ffffe1, 0x3ffffe7, 0x7ffffe2, 0xfffff2, 0x1fffe4, 0x1fffe5, 0x3ffffe8,
    0x3ffffe9, 0xffffffd, 0x7ffffe3, 0x7ffffe4, 0x7ffffe5, 0xfffec, 0xfffff3, 0xfffed, 0x1fffe6, 0x3fffe9, 0x1fffe7,
    0x1fffe8, 0x7ffff3, 0x3fffea, 0x3fffeb, 0x1ffffee, 0x1ffffef, 0xfffff4, 0xfffff5, 0x3ffffea, 0x7ffff4, 0x3ffffeb,
    0x7ffffe6, 0x3ffffec, 0x3ffffed, 0x7ffffe7, 0x7ffffe8, 0x7ffffe9, 0x7ffffea, 0x7ffffeb, 0xffffffe, 0x7ffffec,
    0x7ffffed, 0x7ffffee, 0x7ffffef, 0x7fffff0, 0x3ffffee, 0x3fffffff,
];
const HUFFMAN_LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28,
    28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12,
    10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6,
    5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22,
    22, 23, 22, 23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22, 21, 20,
    22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28,
    27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28,
    27, 27, 27, 27, 27, 26, 30,
];

/// A few entries of HPACK's static table (RFC 7541 Appendix A) with their indexes: the pseudo-header values
/// requests use most and the names of common request headers. A field that matches none is sent as a literal
/// once and found in the dynamic table afterwards, so the rest of the static table would only save bytes on
/// first use.
const STATIC_SUBSET: &[(usize, &[u8], &[u8])] = &[
    (1, b":authority", b""),
    (2, b":method", b"GET"),
    (3, b":method", b"POST"),
    (4, b":path", b"/"),
    (6, b":scheme", b"http"),
    (7, b":scheme", b"https"),
    (16, b"accept-encoding", b"gzip, deflate"),
    (19, b"accept", b""),
    (23, b"authorization", b""),
    (28, b"content-length", b""),
    (31, b"content-type", b""),
    (32, b"cookie", b""),
    (58, b"user-agent", b""),
];
/// Entries in the whole static table: the dynamic table's indexes start after them.
const STATIC_LEN: usize = STATIC_TABLE.len();

/// The request side of HPACK (RFC 7541): an indexed field when the static subset or the dynamic table has it,
/// otherwise a literal with incremental indexing (its name indexed when a table has the name), so the next
/// request finds it. A field too large for the table is sent without indexing rather than emptying the table.
#[derive(Debug)]
pub struct Encoder {
    /// The dynamic table, newest first, and its size as HPACK counts it (32 bytes per entry on top).
    table: VecDeque<(Vec<u8>, Vec<u8>)>,
    size: usize,
    max: usize,
    /// Evicted entries, whose buffers the next insertions reuse.
    spare: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Encoder {
    pub fn new(max: usize) -> Encoder {
        Encoder { table: VecDeque::new(), size: 0, max, spare: Vec::new() }
    }

    /// A new maximum size (the caller signals it to the server in the next block).
    pub fn set_max(&mut self, max: usize) {
        self.max = max;
        self.evict_for(0);
    }

    fn evict_for(&mut self, room: usize) {
        while self.size + room > self.max {
            let Some(entry) = self.table.pop_back() else { break };
            self.size -= entry.0.len() + entry.1.len() + 32;
            self.spare.push(entry);
        }
    }

    pub fn encode(&mut self, name: &[u8], value: &[u8], out: &mut Vec<u8>) {
        let mut name_index = None;
        for &(index, n, v) in STATIC_SUBSET {
            if n == name {
                if v == value {
                    return write_integer(out, index, 7, 0x80);
                }
                name_index.get_or_insert(index);
            }
        }
        for (k, (n, v)) in self.table.iter().enumerate() {
            if n.as_slice() == name {
                if v.as_slice() == value {
                    return write_integer(out, STATIC_LEN + 1 + k, 7, 0x80);
                }
                name_index.get_or_insert(STATIC_LEN + 1 + k);
            }
        }
        let size = name.len() + value.len() + 32;
        let (prefix, pattern) = if size > self.max { (4, 0x00) } else { (6, 0x40) };
        write_integer(out, name_index.unwrap_or(0), prefix, pattern);
        if name_index.is_none() {
            write_string(out, name);
        }
        write_string(out, value);
        if size > self.max {
            return;
        }
        // The name index above was resolved before the insertion, as the decoder resolves it.
        self.evict_for(size);
        let (mut n, mut v) = self.spare.pop().unwrap_or_default();
        n.clear();
        n.extend_from_slice(name);
        v.clear();
        v.extend_from_slice(value);
        self.table.push_front((n, v));
        self.size += size;
    }
}

/// An HPACK integer with a `prefix`-bit prefix after the `pattern` bits (RFC 7541 §5.1).
pub fn write_integer(out: &mut Vec<u8>, value: usize, prefix: u8, pattern: u8) {
    let mask = (1usize << prefix) - 1;
    if value < mask {
        out.push(pattern | value as u8);
        return;
    }
    out.push(pattern | mask as u8);
    let mut rest = value - mask;
    while rest >= 0x80 {
        out.push(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// An HPACK string literal, not Huffman-coded (RFC 7541 §5.2).
pub fn write_string(out: &mut Vec<u8>, bytes: &[u8]) {
    write_integer(out, bytes.len(), 7, 0);
    out.extend_from_slice(bytes);
}

/// An HPACK dynamic table size update (RFC 7541 §6.3): `001` and the size as a 5-bit-prefix integer.
pub fn write_table_size_update(out: &mut Vec<u8>, size: u32) {
    write_integer(out, size as usize, 5, 0x20);
}

/// The decoder of one connection: its dynamic table and scratch buffers.
#[derive(Debug)]
pub struct Decoder {
    /// Newest first; the size as HPACK counts it (32 bytes per entry on top of name and value).
    table: VecDeque<(Vec<u8>, Vec<u8>)>,
    size: usize,
    /// The current maximum (the server's last size update) and the limit we advertised.
    max: usize,
    limit: usize,
    /// Huffman-decoded name and value of the field being emitted.
    name_buf: Vec<u8>,
    value_buf: Vec<u8>,
    /// Evicted entries, whose buffers the next insertions reuse.
    spare: Vec<(Vec<u8>, Vec<u8>)>,
}

/// Where a decoded string is: in the block (plain) or in a scratch buffer (Huffman-coded).
#[derive(Clone, Copy)]
enum Str {
    Block(usize, usize),
    Scratch,
}

impl Decoder {
    /// A decoder whose dynamic table may grow to `limit` bytes (our SETTINGS_HEADER_TABLE_SIZE).
    pub fn new(limit: usize) -> Decoder {
        Decoder {
            table: VecDeque::new(),
            size: 0,
            max: limit,
            limit,
            name_buf: Vec::new(),
            value_buf: Vec::new(),
            spare: Vec::new(),
        }
    }

    /// Decodes one whole header block (HEADERS and its CONTINUATIONs, joined), calling `emit` with each
    /// field's name and value in order. On an error the table may have changed: the connection is over.
    pub fn decode(&mut self, block: &[u8], mut emit: impl FnMut(&[u8], &[u8])) -> Result<(), HpackError> {
        let mut at = 0;
        let mut fields = 0usize;
        while at < block.len() {
            let first = block[at];
            if first & 0x80 != 0 {
                let index = integer(block, &mut at, 7)?;
                let (name, value) = entry(&self.table, index)?;
                emit(name, value);
            } else if first & 0xe0 == 0x20 {
                // A size update may only open a block (RFC 7541 §4.2).
                if fields > 0 {
                    return Err(HpackError::SizeUpdateLate);
                }
                let size = integer(block, &mut at, 5)?;
                if size > self.limit {
                    return Err(HpackError::TableSize);
                }
                self.max = size;
                self.evict_for(0);
                continue;
            } else {
                // A literal: with incremental indexing (01), without (0000) or never indexed (0001).
                let indexing = first & 0xc0 == 0x40;
                let index = integer(block, &mut at, if indexing { 6 } else { 4 })?;
                let name = if index == 0 { Some(self.string(block, &mut at, true)?) } else { None };
                let value = self.string(block, &mut at, false)?;
                let value_bytes = match value {
                    Str::Block(from, to) => &block[from..to],
                    Str::Scratch => &self.value_buf[..],
                };
                let name_bytes = match name {
                    Some(Str::Block(from, to)) => &block[from..to],
                    Some(Str::Scratch) => &self.name_buf[..],
                    None => entry(&self.table, index)?.0,
                };
                emit(name_bytes, value_bytes);
                if indexing {
                    let (mut n, mut v) = self.spare.pop().unwrap_or_default();
                    n.clear();
                    v.clear();
                    n.extend_from_slice(name_bytes);
                    v.extend_from_slice(value_bytes);
                    self.insert(n, v);
                }
            }
            fields += 1;
        }
        Ok(())
    }

    /// A string literal at `at`: where its bytes are (Huffman-coded ones decoded into the name or value
    /// scratch buffer).
    fn string(&mut self, block: &[u8], at: &mut usize, name: bool) -> Result<Str, HpackError> {
        let huffman = block.get(*at).ok_or(HpackError::Truncated)? & 0x80 != 0;
        let len = integer(block, at, 7)?;
        let end = at.checked_add(len).filter(|&end| end <= block.len()).ok_or(HpackError::Truncated)?;
        let from = *at;
        *at = end;
        if !huffman {
            return Ok(Str::Block(from, end));
        }
        let out = if name { &mut self.name_buf } else { &mut self.value_buf };
        out.clear();
        huffman_decode(&block[from..end], out)?;
        Ok(Str::Scratch)
    }

    fn insert(&mut self, name: Vec<u8>, value: Vec<u8>) {
        let size = name.len() + value.len() + 32;
        self.evict_for(size);
        if size > self.max {
            // Larger than the whole table: it empties the table and is not kept (RFC 7541 §4.4).
            self.spare.push((name, value));
            return;
        }
        self.size += size;
        self.table.push_front((name, value));
    }

    /// Evicts the oldest entries until `room` more bytes fit under the maximum.
    fn evict_for(&mut self, room: usize) {
        while self.size + room > self.max {
            let Some(entry) = self.table.pop_back() else { break };
            self.size -= entry.0.len() + entry.1.len() + 32;
            if self.spare.len() < 16 {
                self.spare.push(entry);
            }
        }
    }
}

/// Entry `index` of the static table (1 to 61) or of `table`, the dynamic one (62 on, newest first).
fn entry(table: &VecDeque<(Vec<u8>, Vec<u8>)>, index: usize) -> Result<(&[u8], &[u8]), HpackError> {
    match index {
        0 => Err(HpackError::Index),
        1..=61 => Ok(STATIC_TABLE[index - 1]),
        _ => table.get(index - 62).map(|(n, v)| (&n[..], &v[..])).ok_or(HpackError::Index),
    }
}

/// An integer with an `prefix`-bit prefix at `at` (RFC 7541 §5.1), moving `at` past it. Bounded: no integer
/// here exceeds 2^28 (a length or index that large could never fit a block anyway).
fn integer(block: &[u8], at: &mut usize, prefix: u8) -> Result<usize, HpackError> {
    let mask = (1usize << prefix) - 1;
    let first = *block.get(*at).ok_or(HpackError::Truncated)? as usize & mask;
    *at += 1;
    if first < mask {
        return Ok(first);
    }
    let mut value = mask;
    let mut shift = 0;
    loop {
        let byte = *block.get(*at).ok_or(HpackError::Truncated)?;
        *at += 1;
        value += ((byte & 0x7f) as usize) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
        shift += 7;
        if shift > 21 {
            return Err(HpackError::Integer);
        }
    }
}

/// One step of the Huffman decoder: from a state (a node of the code's tree, 0 the root) and 4 input bits,
/// the next state, the symbol completed on the way (at most one: every code is at least 5 bits long), and
/// whether the step is an error (it completed EOS).
#[derive(Debug, Clone, Copy, Default)]
struct Step {
    next: u8,
    /// A completed symbol, or 256 for none.
    symbol: u16,
    error: bool,
}

/// The decoder's steps, [state * 16 + nibble], and per state whether input may end there: at the root, or
/// within 7 bits of it along 1s (the EOS code's prefix, the only padding allowed).
struct Huffman {
    steps: Vec<Step>,
    may_end: Vec<bool>,
}

static HUFFMAN: LazyLock<Huffman> = LazyLock::new(|| {
    // The tree: internal nodes 0..256, children as node numbers or LEAF | symbol.
    const LEAF: u16 = 0x8000;
    let mut children: Vec<[u16; 2]> = vec![[0, 0]];
    let mut depth_ones: Vec<(u8, bool)> = vec![(0, true)];
    for (symbol, (&code, &len)) in HUFFMAN_CODES.iter().zip(HUFFMAN_LENGTHS.iter()).enumerate() {
        let mut node = 0usize;
        for bit_at in (0..len).rev() {
            let bit = ((code >> bit_at) & 1) as usize;
            if bit_at == 0 {
                children[node][bit] = LEAF | symbol as u16;
                break;
            }
            if children[node][bit] == 0 {
                let (depth, ones) = depth_ones[node];
                children.push([0, 0]);
                depth_ones.push((depth + 1, ones && bit == 1));
                children[node][bit] = (children.len() - 1) as u16;
            }
            node = children[node][bit] as usize;
        }
    }
    let states = children.len();
    let mut steps = vec![Step::default(); states * 16];
    for state in 0..states {
        for nibble in 0..16u8 {
            let mut step = Step { next: 0, symbol: 256, error: false };
            let mut node = state;
            for bit_at in (0..4).rev() {
                let child = children[node][usize::from((nibble >> bit_at) & 1)];
                if child & LEAF != 0 {
                    let symbol = child & !LEAF;
                    if symbol == 256 {
                        step.error = true;
                    }
                    step.symbol = symbol;
                    node = 0;
                } else {
                    node = usize::from(child);
                }
            }
            step.next = node as u8;
            steps[state * 16 + usize::from(nibble)] = step;
        }
    }
    let may_end = depth_ones.iter().map(|&(depth, ones)| depth == 0 || (ones && depth <= 7)).collect();
    Huffman { steps, may_end }
});

/// Decodes a Huffman-coded string into `out`.
pub fn huffman_decode(input: &[u8], out: &mut Vec<u8>) -> Result<(), HpackError> {
    let huffman = &*HUFFMAN;
    let mut state = 0usize;
    for &byte in input {
        for nibble in [byte >> 4, byte & 0x0f] {
            let step = huffman.steps[state * 16 + usize::from(nibble)];
            if step.error {
                return Err(HpackError::Huffman);
            }
            if step.symbol < 256 {
                out.push(step.symbol as u8);
            }
            state = usize::from(step.next);
        }
    }
    if huffman.may_end[state] { Ok(()) } else { Err(HpackError::Huffman) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(text: &str) -> Vec<u8> {
        let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
        digits.chunks(2).map(|p| u8::from_str_radix(std::str::from_utf8(p).expect("ascii"), 16).expect("hex")).collect()
    }

    fn fields(decoder: &mut Decoder, block: &[u8]) -> Vec<(String, String)> {
        let mut out = Vec::new();
        decoder
            .decode(block, |n, v| {
                out.push((String::from_utf8_lossy(n).into_owned(), String::from_utf8_lossy(v).into_owned()))
            })
            .expect("the block decodes");
        out
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
    }

    #[test]
    fn the_rfc_response_examples_with_huffman_decode_and_evict() {
        // RFC 7541 C.6: three responses, Huffman-coded, through a 256-byte table (evictions on the way).
        let mut decoder = Decoder::new(256);
        let first = hex(
            "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        );
        assert_eq!(
            fields(&mut decoder, &first),
            pairs(&[
                (":status", "302"),
                ("cache-control", "private"),
                ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
                ("location", "https://www.example.com"),
            ])
        );
        assert_eq!(decoder.size, 222);
        let second = hex("4883 640e ffc1 c0bf");
        assert_eq!(
            fields(&mut decoder, &second),
            pairs(&[
                (":status", "307"),
                ("cache-control", "private"),
                ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
                ("location", "https://www.example.com"),
            ])
        );
        let third = hex(
            "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
        );
        assert_eq!(
            fields(&mut decoder, &third),
            pairs(&[
                (":status", "200"),
                ("cache-control", "private"),
                ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
                ("location", "https://www.example.com"),
                ("content-encoding", "gzip"),
                ("set-cookie", "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"),
            ])
        );
        assert_eq!(decoder.size, 215);
    }

    #[test]
    fn plain_literals_and_indexes_as_in_the_rfc_request_examples() {
        // RFC 7541 C.3: requests without Huffman coding.
        let mut decoder = Decoder::new(4096);
        let first = hex("8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d");
        assert_eq!(
            fields(&mut decoder, &first),
            pairs(&[(":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", "www.example.com")])
        );
        let second = hex("8286 84be 5808 6e6f 2d63 6163 6865");
        assert_eq!(fields(&mut decoder, &second)[4], ("cache-control".to_string(), "no-cache".to_string()));
        // Literal never indexed (0001) and without indexing (0000) leave the table alone.
        let size = decoder.size;
        let literal = [&[0x10, 0x03][..], b"abc", &[0x03], b"xyz", &[0x0f, 0x0d, 0x02], b"42"].concat();
        assert_eq!(fields(&mut decoder, &literal), pairs(&[("abc", "xyz"), ("content-length", "42")]));
        assert_eq!(decoder.size, size);
    }

    #[test]
    fn bad_blocks_are_errors() {
        let mut decoder = Decoder::new(4096);
        let mut decode = |block: &[u8]| decoder.decode(block, |_, _| {}).err();
        assert_eq!(decode(&[0x80]), Some(HpackError::Index), "index 0");
        assert_eq!(decode(&[0xbf, 0x7f]), Some(HpackError::Index), "beyond the tables");
        assert_eq!(decode(&[0x41, 0x05, b'a']), Some(HpackError::Truncated), "a value cut short");
        assert_eq!(decode(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]), Some(HpackError::Integer));
        assert_eq!(decode(&[0x3f, 0xe2, 0x1f]), Some(HpackError::TableSize), "4,097 bytes > the 4,096 advertised");
        assert_eq!(decode(&[0x82, 0x20]), Some(HpackError::SizeUpdateLate));
        // Huffman: EOS in the data (30 ones), and padding of 0s instead of the EOS prefix.
        assert_eq!(decode(&[0x40, 0x81, 0x00, 0x84, 0xff, 0xff, 0xff, 0xff]), Some(HpackError::Huffman));
        assert_eq!(decode(&[0x40, 0x81, 0x00, 0x81, 0x00]), Some(HpackError::Huffman));
    }

    #[test]
    fn every_symbol_round_trips_through_huffman() {
        // Encode each byte value with the table (a test-only encoder), then decode all of them at once.
        let input: Vec<u8> = (0..=255u8).chain(*b"Hello, HPACK!").collect();
        let (mut bits, mut count, mut coded) = (0u64, 0u32, Vec::new());
        for &b in &input {
            let (code, len) = (u64::from(HUFFMAN_CODES[usize::from(b)]), u32::from(HUFFMAN_LENGTHS[usize::from(b)]));
            bits = (bits << len) | code;
            count += len;
            while count >= 8 {
                coded.push((bits >> (count - 8)) as u8);
                count -= 8;
                bits &= (1 << count) - 1;
            }
        }
        if count > 0 {
            coded.push(((bits << (8 - count)) | ((1 << (8 - count)) - 1)) as u8);
        }
        let mut out = Vec::new();
        huffman_decode(&coded, &mut out).expect("decodes");
        assert_eq!(out, input);
    }

    fn decode_owned(decoder: &mut Decoder, block: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        decoder.decode(block, |n, v| out.push((n.to_vec(), v.to_vec()))).expect("decodes");
        out
    }

    /// The static subset's indexes are the RFC's, and the encoder's dynamic table stays in step with the
    /// decoder's through evictions, name references and a field too large to index.
    #[test]
    fn the_field_encoder_agrees_with_a_decoder() {
        let mut encoder = Encoder::new(4096);
        let mut decoder = Decoder::new(4096);
        let mut block = Vec::new();
        for &(_, name, value) in STATIC_SUBSET {
            encoder.encode(name, value, &mut block);
            encoder.encode(name, b"other", &mut block);
        }
        let got = decode_owned(&mut decoder, &block);
        let expected: Vec<(Vec<u8>, Vec<u8>)> = STATIC_SUBSET
            .iter()
            .flat_map(|&(_, n, v)| [(n.to_vec(), v.to_vec()), (n.to_vec(), b"other".to_vec())])
            .collect();
        assert_eq!(got, expected);
        let big = vec![b'b'; 5000];
        for round in 0..300 {
            block.clear();
            let path = format!("/items/{}", round % 150);
            let fields: [(&[u8], &[u8]); 4] =
                [(b":path", path.as_bytes()), (b"x-round", b"same"), (b"x-big", &big), (b"x-round", path.as_bytes())];
            for (name, value) in fields {
                encoder.encode(name, value, &mut block);
            }
            let got = decode_owned(&mut decoder, &block);
            assert_eq!(got, fields.iter().map(|(n, v)| (n.to_vec(), v.to_vec())).collect::<Vec<_>>(), "round {round}");
        }
        assert!(encoder.size <= 4096 && encoder.table.len() + encoder.spare.len() < 4096 / 32);
    }
}
