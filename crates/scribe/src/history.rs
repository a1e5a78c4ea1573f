//! Version history: the diff-match-patch patch texts stored in `<component>_history.patches`.
//!
//! The original Scribe stores, per record, a JSON array of patch texts made by npm `diff-match-patch` 1.0.5:
//! index 0 turns the first row's JSON into "", each later entry turns the updated row's JSON into the previous one.
//! Both runtimes may read and write the same rows, so patch texts must be byte-compatible in both directions.
//!
//! JavaScript strings are UTF-16: npm diff-match-patch diffs UTF-16 code units and its offsets count them.
//! diff-match-patch-rs's `Compat` mode diffs `char`s instead, so its offsets disagree with Node's after any astral
//! character (emoji), and it finds word boundaries with Unicode `is_alphanumeric` where JS uses
//! `/[^a-zA-Z0-9]/`, which moves edits in CJK and accented text. So patches are made by the crate's algorithms
//! running on our own unit type, [`U16`], with JS's character classes, and applied by a port of the JS
//! `patch_apply` (the crate's fuzzy matcher differs from JS's in its search window and float precision). Patch text
//! is written and read with JS's `encodeURI`/`decodeURI` rules. Fixtures made by the npm package prove it
//! (`tests/fixtures/dmp/README.md`): Rust writes Node's patch text byte for byte and applies Node's patches to
//! Node's result, fuzzy matches included.
//!
//! Where we differ from the original, on purpose:
//! - npm diff-match-patch 1.0.5 splits surrogate pairs (an emoji replaced by one sharing half its code units, or a
//!   hunk's context cutting one); `encodeURI` then throws and the original fails the update. We write the same
//!   edit with pairs kept whole ([`repair_split_surrogates`]); Node 1.0.5 applies it to the same text.
//! - The walk stops at a hunk that fails to apply (the original goes on with that hunk skipped, producing a version
//!   that never existed) and at a result that is not JSON (where the original's `JSON.parse` throws).
//! - Diffs that reach diff-match-patch's 1 s deadline (rows of megabytes) depend on timing in either runtime; the
//!   patches stay correct, their text may differ.

use diff_match_patch_rs::traits::DType;
use diff_match_patch_rs::{DiffMatchPatch, Ops, PatchInput};

/// The creation patch: turns `row_json` into "".
pub fn creation_patch(row_json: &str) -> String {
    make_patch(row_json, "")
}

/// The patch appended on update: turns `new_json` into `previous_json`.
pub fn update_patch(new_json: &str, previous_json: &str) -> String {
    make_patch(new_json, previous_json)
}

/// Versions newest first: `current_json` then each older version rebuilt from `patches[len-1..=1]`
/// (index 0, the creation patch, is skipped as the original does).
///
/// The walk stops, returning what was rebuilt so far, at a patch that does not parse, has a hunk that does not
/// apply, or yields text that is not JSON (where the original would throw from `JSON.parse`).
pub fn versions(current_json: &str, patches: &[String]) -> Vec<String> {
    let mut out = vec![current_json.to_owned()];
    for patch in patches.iter().skip(1).rev() {
        let Some(older) = out.last().and_then(|current| apply_patch(patch, current)) else { break };
        out.push(older);
    }
    out
}

/// One UTF-16 code unit: the element of a JavaScript string, so the unit of npm diff-match-patch's offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct U16(u16);

impl DType for U16 {
    fn from_char(c: char) -> Self {
        // The crate only asks for ASCII (patch syntax, padding \x01..\x04).
        U16(u16::try_from(u32::from(c)).unwrap_or(0xFFFD))
    }

    fn as_char(&self) -> Option<char> {
        char::from_u32(u32::from(self.0))
    }

    fn from_str(s: &str) -> Vec<Self> {
        s.encode_utf16().map(U16).collect()
    }

    fn to_string(data: &[Self]) -> Result<String, diff_match_patch_rs::Error> {
        String::from_utf16(&units(data)).map_err(|_| diff_match_patch_rs::Error::Utf8Error)
    }

    // The character classes of diff_cleanupSemanticScore_ in JS: /\s/, /[\r\n]/, /[^a-zA-Z0-9]/.
    fn is_whitespace(self) -> bool {
        is_js_whitespace(self.0)
    }

    fn is_newline(self) -> bool {
        self.0 == u16::from(b'\n')
    }

    fn is_carriage(self) -> bool {
        self.0 == u16::from(b'\r')
    }

    fn is_alphanum(self) -> bool {
        u8::try_from(self.0).is_ok_and(|b| b.is_ascii_alphanumeric())
    }

    fn is_linebreak_end(input: &[Self]) -> bool {
        ends_with_blank_line(&units(input))
    }

    fn is_linebreak_start(input: &[Self]) -> bool {
        starts_with_blank_line(&units(input))
    }

    // Only reached through the crate's `Display for Patch`, which we use for the hunk header alone; our own
    // writer (`patch_to_text`) refuses lone surrogates instead of replacing them.
    fn percent_encode(input: &[Self]) -> Vec<Self> {
        let text = String::from_utf16_lossy(&units(input));
        encode_uri(&text.encode_utf16().collect::<Vec<_>>()).unwrap_or_default().encode_utf16().map(U16).collect()
    }

    // Not reached: patch text is parsed by `parse_patch_text`.
    fn percent_decode(input: &[Self]) -> Vec<Self> {
        let text = String::from_utf16_lossy(&units(input));
        decode_uri(&text).unwrap_or_else(|| units(input)).into_iter().map(U16).collect()
    }
}

fn units(data: &[U16]) -> Vec<u16> {
    data.iter().map(|u| u.0).collect()
}

/// JS `/\n\r?\n$/`.
fn ends_with_blank_line(s: &[u16]) -> bool {
    s.ends_with(&[0x0A, 0x0A]) || s.ends_with(&[0x0A, 0x0D, 0x0A])
}

/// JS `/^\r?\n\r?\n/`.
fn starts_with_blank_line(s: &[u16]) -> bool {
    [&[0x0A, 0x0A][..], &[0x0D, 0x0A, 0x0A], &[0x0A, 0x0D, 0x0A], &[0x0D, 0x0A, 0x0D, 0x0A]]
        .iter()
        .any(|p| s.starts_with(p))
}

/// ECMAScript WhiteSpace and LineTerminator (what `/\s/` matches); unlike `char::is_whitespace` it includes
/// U+FEFF and excludes U+0085.
fn is_js_whitespace(u: u16) -> bool {
    matches!(
        u,
        0x09..=0x0D | 0x20 | 0xA0 | 0x1680 | 0x2000..=0x200A | 0x2028 | 0x2029 | 0x202F | 0x205F | 0x3000 | 0xFEFF
    )
}

/// diff-match-patch's Patch_Margin: units of context around each edit.
const MARGIN: usize = 4;

fn is_high(u: u16) -> bool {
    (0xD800..=0xDBFF).contains(&u)
}

fn is_low(u: u16) -> bool {
    (0xDC00..=0xDFFF).contains(&u)
}

/// One hunk of a patch, in UTF-16 code units (diff-match-patch's patch_obj).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Hunk {
    start1: usize,
    start2: usize,
    length1: usize,
    length2: usize,
    diffs: Diffs,
}

impl Hunk {
    fn text1(&self) -> Vec<u16> {
        text1(&self.diffs)
    }

    fn text2(&self) -> Vec<u16> {
        text2(&self.diffs)
    }
}

/// `patch_toText(patch_make(from, to))` as npm diff-match-patch writes it, or, where that throws, the repaired
/// equivalent. Every patch is checked to rebuild `to` from `from`; should one not (a bug), the patch is the
/// whole-text replacement, which is always correct.
fn make_patch(from: &str, to: &str) -> String {
    if from == to {
        return String::new();
    }
    let from16: Vec<u16> = from.encode_utf16().collect();
    let to16: Vec<u16> = to.encode_utf16().collect();
    let made = dmp_patch_make(from, to).and_then(|mut hunks| {
        if hunks.iter().any(|h| h.diffs.iter().any(|(_, t)| has_lone_surrogate(t))) {
            repair_split_surrogates(&mut hunks, &from16)?;
        }
        let (rebuilt, results) = patch_apply(&hunks, &from16)?;
        (rebuilt == to16 && results.iter().all(|ok| *ok)).then_some(hunks)
    });
    made.and_then(|hunks| patch_to_text(&hunks)).unwrap_or_else(|| whole_text_patch(&from16, &to16))
}

/// The crate's patch_make on UTF-16 units (diff_main with line mode, cleanupSemantic, cleanupEfficiency, context).
fn dmp_patch_make(from: &str, to: &str) -> Option<Vec<Hunk>> {
    let patches = DiffMatchPatch::new().patch_make::<U16>(PatchInput::new_text_text(from, to)).ok()?;
    patches
        .iter()
        .map(|p| {
            // The crate keeps the coordinates private; its Display writes them in the header line.
            let shown = p.to_string();
            let (start1, length1, start2, length2) = parse_header(shown.lines().next()?)?;
            let diffs = p.diffs().iter().map(|d| (d.op(), units(d.data()))).collect();
            Some(Hunk { start1, start2, length1, length2, diffs })
        })
        .collect()
}

fn has_lone_surrogate(t: &[u16]) -> bool {
    char::decode_utf16(t.iter().copied()).any(|c| c.is_err())
}

/// Makes every diff of every hunk whole UTF-16 without changing what the patch does (npm diff-match-patch 1.0.5
/// splits surrogate pairs, then `encodeURI` throws). Walking the hunks as patch_make built them (each `start2` is
/// a position in `text` with the earlier hunks applied): 1) a hunk boundary inside a pair moves out by one unit;
/// 2) inside the hunk, an equality that starts with a low surrogate gives it to the edit before it, one that ends
/// with a high surrogate gives it to the edit after it (to both deletion and insertion, creating either); emptied
/// equalities vanish and their edits merge; 3) the edge contexts grow back to at least [`MARGIN`] units, by whole
/// characters, where the text has them. generate.mjs has the same function, and checks that Node applies each
/// repaired patch exactly (no fuzzy matching) to the expected text.
fn repair_split_surrogates(hunks: &mut [Hunk], text: &[u16]) -> Option<()> {
    enum Item {
        Equal(Vec<u16>),
        Edit(Vec<u16>, Vec<u16>),
    }
    let mut cur = text.to_vec();
    for h in hunks.iter_mut() {
        let old = h.text1();
        if cur.get(h.start2..h.start2 + old.len())? != old.as_slice() {
            return None;
        }
        let mut old_len = old.len();
        let splits_pair = |at: usize| at > 0 && at < cur.len() && is_high(cur[at - 1]) && is_low(cur[at]);
        if splits_pair(h.start2) {
            let u = cur[h.start2 - 1];
            match h.diffs.first_mut() {
                Some((Ops::Equal, t)) => t.insert(0, u),
                _ => h.diffs.insert(0, (Ops::Equal, vec![u])),
            }
            h.start1 = h.start1.checked_sub(1)?;
            h.start2 -= 1;
            h.length1 += 1;
            h.length2 += 1;
            old_len += 1;
        }
        let end = h.start2 + old_len;
        if splits_pair(end) {
            let u = cur[end];
            match h.diffs.last_mut() {
                Some((Ops::Equal, t)) => t.push(u),
                _ => h.diffs.push((Ops::Equal, vec![u])),
            }
            h.length1 += 1;
            h.length2 += 1;
            old_len += 1;
        }

        let mut items: Vec<Item> = Vec::new();
        for (op, t) in h.diffs.drain(..) {
            match (op, items.last_mut()) {
                (Ops::Equal, Some(Item::Equal(e))) => e.extend(t),
                (Ops::Equal, _) => items.push(Item::Equal(t)),
                (Ops::Delete, Some(Item::Edit(d, _))) => d.extend(t),
                (Ops::Insert, Some(Item::Edit(_, i))) => i.extend(t),
                (Ops::Delete, _) => items.push(Item::Edit(t, Vec::new())),
                (Ops::Insert, _) => items.push(Item::Edit(Vec::new(), t)),
            }
        }
        for k in 0..items.len() {
            let (before, rest) = items.split_at_mut(k);
            let Some((Item::Equal(eq), after)) = rest.split_first_mut() else { continue };
            if let (Some(Item::Edit(d, i)), Some(&u)) = (before.last_mut(), eq.first())
                && is_low(u)
            {
                d.push(u);
                i.push(u);
                eq.remove(0);
            }
            if let (Some(Item::Edit(d, i)), Some(&u)) = (after.first_mut(), eq.last())
                && is_high(u)
            {
                d.insert(0, u);
                i.insert(0, u);
                eq.pop();
            }
        }
        let mut merged: Vec<Item> = Vec::new();
        for item in items {
            match (item, merged.last_mut()) {
                (Item::Equal(e), _) if e.is_empty() => {}
                (Item::Edit(d, i), Some(Item::Edit(md, mi))) => {
                    md.extend(d);
                    mi.extend(i);
                }
                (item, _) => merged.push(item),
            }
        }
        for item in merged {
            match item {
                Item::Equal(e) => h.diffs.push((Ops::Equal, e)),
                Item::Edit(d, i) => {
                    if !d.is_empty() {
                        h.diffs.push((Ops::Delete, d));
                    }
                    if !i.is_empty() {
                        h.diffs.push((Ops::Insert, i));
                    }
                }
            }
        }
        // Keep Patch_Margin units of context on each side where the text has them, as patch_make does: Node's
        // patch_apply pads a shorter edge context with \x01..\x04, and the hunk would no longer fit exactly.
        let mut lead = match h.diffs.first() {
            Some((Ops::Equal, t)) => t.len(),
            _ => 0,
        };
        while lead < MARGIN && h.start2 > 0 {
            let n = if h.start2 >= 2 && is_low(cur[h.start2 - 1]) && is_high(cur[h.start2 - 2]) { 2 } else { 1 };
            let grown = cur[h.start2 - n..h.start2].to_vec();
            match h.diffs.first_mut() {
                Some((Ops::Equal, t)) => drop(t.splice(0..0, grown)),
                _ => h.diffs.insert(0, (Ops::Equal, grown)),
            }
            h.start1 = h.start1.checked_sub(n)?;
            h.start2 -= n;
            h.length1 += n;
            h.length2 += n;
            old_len += n;
            lead += n;
        }
        let mut trail = match h.diffs.last() {
            Some((Ops::Equal, t)) => t.len(),
            _ => 0,
        };
        let mut end = h.start2 + old_len;
        while trail < MARGIN && end < cur.len() {
            let n = if end + 1 < cur.len() && is_high(cur[end]) && is_low(cur[end + 1]) { 2 } else { 1 };
            let grown = &cur[end..end + n];
            match h.diffs.last_mut() {
                Some((Ops::Equal, t)) => t.extend_from_slice(grown),
                _ => h.diffs.push((Ops::Equal, grown.to_vec())),
            }
            h.length1 += n;
            h.length2 += n;
            old_len += n;
            trail += n;
            end += n;
        }
        let after = h.text2();
        cur.splice(h.start2..h.start2 + old_len, after);
    }
    Some(())
}

/// The patch that replaces all of `from` with `to`: one hunk, no context. Correct in either runtime.
fn whole_text_patch(from: &[u16], to: &[u16]) -> String {
    if from == to {
        return String::new();
    }
    let mut diffs = Vec::new();
    if !from.is_empty() {
        diffs.push((Ops::Delete, from.to_vec()));
    }
    if !to.is_empty() {
        diffs.push((Ops::Insert, to.to_vec()));
    }
    let hunk = Hunk { start1: 0, start2: 0, length1: from.len(), length2: to.len(), diffs };
    // `from` and `to` come from Rust strings, so they are whole UTF-16 and always encode.
    patch_to_text(&[hunk]).unwrap_or_default()
}

/// patch_toText: GNU-diff-like header, each diff line `encodeURI`d, then `%20` back to a space.
/// `None` if a diff holds a lone surrogate (where `encodeURI` throws).
fn patch_to_text(hunks: &[Hunk]) -> Option<String> {
    use std::fmt::Write as _;
    fn coords(start: usize, length: usize) -> String {
        match length {
            0 => format!("{start},0"),
            1 => format!("{}", start + 1),
            _ => format!("{},{length}", start + 1),
        }
    }
    let mut out = String::new();
    for h in hunks {
        let _ = writeln!(out, "@@ -{} +{} @@", coords(h.start1, h.length1), coords(h.start2, h.length2));
        for (op, t) in &h.diffs {
            out.push(match op {
                Ops::Insert => '+',
                Ops::Delete => '-',
                Ops::Equal => ' ',
            });
            out.push_str(&encode_uri(t)?.replace("%20", " "));
            out.push('\n');
        }
    }
    Some(out)
}

/// JS `encodeURI`: keeps `A-Z a-z 0-9 ; , / ? : @ & = + $ - _ . ! ~ * ' ( ) #`, writes everything else as
/// upper-case `%XX` UTF-8 bytes. `None` on a lone surrogate (JS throws URIError).
fn encode_uri(units: &[u16]) -> Option<String> {
    const KEEP: &[u8] = b";,/?:@&=+$-_.!~*'()#";
    let mut out = String::with_capacity(units.len());
    for c in char::decode_utf16(units.iter().copied()) {
        let c = c.ok()?;
        if c.is_ascii_alphanumeric() || u8::try_from(c).is_ok_and(|b| KEEP.contains(&b)) {
            out.push(c);
        } else {
            let mut buf = [0; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push('%');
                out.push(char::from(b"0123456789ABCDEF"[usize::from(b >> 4)]));
                out.push(char::from(b"0123456789ABCDEF"[usize::from(b & 15)]));
            }
        }
    }
    Some(out)
}

/// JS `decodeURI`, to UTF-16: `%XX` sequences of UTF-8 are decoded, except escapes of the reserved set
/// `; / ? : @ & = + $ , #`, which stay as written. `None` where JS throws URIError.
fn decode_uri(s: &str) -> Option<Vec<u16>> {
    const RESERVED: &[u8] = b";/?:@&=+$,#";
    fn hex_byte(b: &[u8], at: usize) -> Option<u8> {
        if *b.get(at)? != b'%' {
            return None;
        }
        let digits = std::str::from_utf8(b.get(at + 1..at + 3)?).ok()?;
        u8::from_str_radix(digits, 16).ok().filter(|_| digits.bytes().all(|d| d.is_ascii_hexdigit()))
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'%' {
            let c = s.get(i..)?.chars().next()?;
            let mut buf = [0; 2];
            out.extend_from_slice(c.encode_utf16(&mut buf));
            i += c.len_utf8();
            continue;
        }
        let first = hex_byte(bytes, i)?;
        if first < 0x80 {
            if RESERVED.contains(&first) {
                out.extend(s.get(i..i + 3)?.encode_utf16());
            } else {
                out.push(u16::from(first));
            }
            i += 3;
            continue;
        }
        let n = match first {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => return None,
        };
        let mut seq = vec![first];
        for k in 1..n {
            seq.push(hex_byte(bytes, i + 3 * k)?);
        }
        // from_utf8 rejects what decodeURI rejects: bad continuation bytes, overlong forms, surrogates, > U+10FFFF.
        let c = std::str::from_utf8(&seq).ok()?.chars().next()?;
        let mut buf = [0; 2];
        out.extend_from_slice(c.encode_utf16(&mut buf));
        i += 3 * n;
    }
    Some(out)
}

/// Parses a hunk header `@@ -a[,b] +c[,d] @@` (JS: `/^@@ -(\d+),?(\d*) \+(\d+),?(\d*) @@$/`) into
/// (start1, length1, start2, length2), 0-based as patch_fromText makes them. Rejects what would make a negative
/// start in JS (never written by diff-match-patch) and numbers beyond u32, so later arithmetic cannot overflow.
fn parse_header(line: &str) -> Option<(usize, usize, usize, usize)> {
    fn coord(s: &str) -> Option<(usize, usize)> {
        let digits = |d: &str| -> Option<usize> {
            if d.is_empty() || !d.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            usize::try_from(d.parse::<u32>().ok()?).ok()
        };
        // JS: `,?(\d*)` — the comma is optional, so "12" followed by nothing means start 12, length 1.
        let (start, length) = match s.split_once(',') {
            Some((a, b)) => (a, Some(b)),
            None => (s, None),
        };
        let start = digits(start)?;
        match length {
            None | Some("") => Some((start.checked_sub(1)?, 1)),
            Some("0") => Some((start, 0)),
            Some(l) => Some((start.checked_sub(1)?, digits(l)?)),
        }
    }
    let inner = line.strip_prefix("@@ -")?.strip_suffix(" @@")?;
    let (a, b) = inner.split_once(" +")?;
    let (start1, length1) = coord(a)?;
    let (start2, length2) = coord(b)?;
    Some((start1, length1, start2, length2))
}

/// patch_fromText. `None` where JS throws (bad header, bad escape, unknown line mode).
fn parse_patch_text(text: &str) -> Option<Vec<Hunk>> {
    let mut hunks = Vec::new();
    if text.is_empty() {
        return Some(hunks);
    }
    let mut lines = text.split('\n').peekable();
    while let Some(header) = lines.next() {
        let (start1, length1, start2, length2) = parse_header(header)?;
        let mut hunk = Hunk { start1, start2, length1, length2, diffs: Vec::new() };
        while let Some(line) = lines.peek() {
            let mut chars = line.chars();
            let op = match chars.next() {
                None => None,
                Some('@') => break,
                Some('-') => Some(Ops::Delete),
                Some('+') => Some(Ops::Insert),
                Some(' ') => Some(Ops::Equal),
                Some(_) => return None,
            };
            if let Some(op) = op {
                hunk.diffs.push((op, decode_uri(chars.as_str())?));
            }
            lines.next();
        }
        hunks.push(hunk);
    }
    Some(hunks)
}

// diff-match-patch's settings, left at their defaults by the original.
const MATCH_MAX_BITS: usize = 32;
const MATCH_THRESHOLD: f64 = 0.5;
const MATCH_DISTANCE: f64 = 1000.0;
const PATCH_DELETE_THRESHOLD: f64 = 0.5;

type Diffs = Vec<(Ops, Vec<u16>)>;

/// Applies one stored patch text to `current` as the original's history walk does, and checks that every hunk
/// applied and the result is JSON.
fn apply_patch(patch: &str, current: &str) -> Option<String> {
    let hunks = parse_patch_text(patch)?;
    let (older, results) = patch_apply(&hunks, &current.encode_utf16().collect::<Vec<_>>())?;
    if !results.iter().all(|ok| *ok) {
        return None;
    }
    let older = String::from_utf16(&older).ok()?;
    serde_json::from_str::<serde::de::IgnoredAny>(&older).is_ok().then_some(older)
}

/// A hunk inside patch_apply: `start1` plays no part in applying, and splitting may make it negative in JS.
#[derive(Debug, Clone)]
struct Piece {
    start2: isize,
    length1: usize,
    length2: usize,
    diffs: Diffs,
}

/// JS `s.substring(a, b)`: bounds clamped to the string, swapped when reversed.
fn substring(s: &[u16], a: isize, b: isize) -> &[u16] {
    let clamp = |x: isize| usize::try_from(x).unwrap_or(0).min(s.len());
    let (a, b) = (clamp(a), clamp(b));
    &s[a.min(b)..a.max(b)]
}

/// The text a list of diffs starts from (diff_text1).
fn text1(diffs: &[(Ops, Vec<u16>)]) -> Vec<u16> {
    diffs.iter().filter(|(op, _)| *op != Ops::Insert).flat_map(|(_, t)| t.iter().copied()).collect()
}

/// The text a list of diffs leads to (diff_text2).
fn text2(diffs: &[(Ops, Vec<u16>)]) -> Vec<u16> {
    diffs.iter().filter(|(op, _)| *op != Ops::Delete).flat_map(|(_, t)| t.iter().copied()).collect()
}

/// npm diff-match-patch 1.0.5's patch_apply, step for step on UTF-16 code units (padding, splitMax, match_main
/// with its bitap search, the imperfect-match rediff), so fuzzy results are Node's too. Returns the text and one
/// flag per (split) hunk. `None` only where the crate's diff fails, which it should not.
fn patch_apply(hunks: &[Hunk], text: &[u16]) -> Option<(Vec<u16>, Vec<bool>)> {
    const PAD: [u16; MARGIN] = [1, 2, 3, 4];
    if hunks.is_empty() {
        return Some((text.to_vec(), Vec::new()));
    }
    let mut pieces: Vec<Piece> = hunks
        .iter()
        .map(|h| Piece {
            start2: h.start2 as isize + MARGIN as isize,
            length1: h.length1,
            length2: h.length2,
            diffs: h.diffs.clone(),
        })
        .collect();
    // patch_addPadding
    if let Some(first) = pieces.first_mut() {
        match first.diffs.first_mut() {
            Some((Ops::Equal, t)) if t.len() < MARGIN => {
                let extra = MARGIN - t.len();
                let grown = [&PAD[t.len()..], t.as_slice()].concat();
                *t = grown;
                first.start2 -= extra as isize;
                first.length1 += extra;
                first.length2 += extra;
            }
            Some((Ops::Equal, _)) => {}
            _ => {
                first.diffs.insert(0, (Ops::Equal, PAD.to_vec()));
                first.start2 -= MARGIN as isize;
                first.length1 += MARGIN;
                first.length2 += MARGIN;
            }
        }
    }
    if let Some(last) = pieces.last_mut() {
        match last.diffs.last_mut() {
            Some((Ops::Equal, t)) if t.len() < MARGIN => {
                let extra = MARGIN - t.len();
                t.extend_from_slice(&PAD[..extra]);
                // Sic: JS grows length1 only here.
                last.length1 += extra;
            }
            Some((Ops::Equal, _)) => {}
            _ => {
                last.diffs.push((Ops::Equal, PAD.to_vec()));
                last.length1 += MARGIN;
                last.length2 += MARGIN;
            }
        }
    }
    let mut text: Vec<u16> = PAD.iter().chain(text).chain(&PAD).copied().collect();
    let pieces = split_max(pieces);

    let max = MATCH_MAX_BITS as isize;
    let mut delta: isize = 0;
    let mut results = Vec::with_capacity(pieces.len());
    for p in &pieces {
        let expected = p.start2 + delta;
        let old = text1(&p.diffs);
        let len1 = old.len() as isize;
        let mut end_loc = None;
        let start_loc = if old.len() > MATCH_MAX_BITS {
            // Only a monster delete is still this long after split_max: match its two ends.
            match_main(&text, &old[..MATCH_MAX_BITS], expected).and_then(|start| {
                end_loc = match_main(&text, &old[old.len() - MATCH_MAX_BITS..], expected + len1 - max);
                end_loc.filter(|end| start < *end).map(|_| start)
            })
        } else {
            match_main(&text, &old, expected)
        };
        let Some(start) = start_loc else {
            results.push(false);
            delta -= p.length2 as isize - p.length1 as isize;
            continue;
        };
        results.push(true);
        let start = start as isize;
        delta = start - expected;
        let found = match end_loc {
            None => substring(&text, start, start + len1),
            Some(end) => substring(&text, start, end as isize + max),
        }
        .to_vec();
        let end = text.len() as isize;
        if old == found {
            text = [substring(&text, 0, start), &text2(&p.diffs), substring(&text, start + len1, end)].concat();
            continue;
        }
        let mut diffs = diff_main(&old, &found)?;
        if old.len() > MATCH_MAX_BITS && levenshtein(&diffs) as f64 / old.len() as f64 > PATCH_DELETE_THRESHOLD {
            if let Some(r) = results.last_mut() {
                *r = false;
            }
            continue;
        }
        cleanup_semantic_lossless(&mut diffs);
        let mut index1 = 0;
        let mut index2 = 0;
        for (op, t) in &p.diffs {
            if *op != Ops::Equal {
                index2 = x_index(&diffs, index1) as isize;
            }
            let end = text.len() as isize;
            match op {
                Ops::Insert => {
                    text = [substring(&text, 0, start + index2), t, substring(&text, start + index2, end)].concat();
                }
                Ops::Delete => {
                    let to = start + x_index(&diffs, index1 + t.len()) as isize;
                    text = [substring(&text, 0, start + index2), substring(&text, to, end)].concat();
                }
                Ops::Equal => {}
            }
            if *op != Ops::Delete {
                index1 += t.len();
            }
        }
    }
    let end = text.len() as isize;
    Some((substring(&text, MARGIN as isize, end - MARGIN as isize).to_vec(), results))
}

/// patch_splitMax: cuts hunks longer than the bitap width into pieces with rolling context.
fn split_max(pieces: Vec<Piece>) -> Vec<Piece> {
    let mut out = Vec::with_capacity(pieces.len());
    for big in pieces {
        if big.length1 <= MATCH_MAX_BITS {
            out.push(big);
            continue;
        }
        let mut start2 = big.start2;
        let mut rest: std::collections::VecDeque<(Ops, Vec<u16>)> = big.diffs.into();
        let mut precontext: Vec<u16> = Vec::new();
        while !rest.is_empty() {
            let mut piece =
                Piece { start2: start2 - precontext.len() as isize, length1: 0, length2: 0, diffs: Vec::new() };
            let mut empty = true;
            if !precontext.is_empty() {
                piece.length1 = precontext.len();
                piece.length2 = precontext.len();
                piece.diffs.push((Ops::Equal, precontext.clone()));
            }
            while piece.length1 < MATCH_MAX_BITS - MARGIN {
                let Some((op, t)) = rest.front_mut() else { break };
                if *op == Ops::Insert {
                    piece.length2 += t.len();
                    start2 += t.len() as isize;
                    empty = false;
                    piece.diffs.extend(rest.pop_front());
                } else if *op == Ops::Delete
                    && piece.diffs.len() == 1
                    && piece.diffs[0].0 == Ops::Equal
                    && t.len() > 2 * MATCH_MAX_BITS
                {
                    // A large deletion goes in one chunk.
                    piece.length1 += t.len();
                    empty = false;
                    piece.diffs.extend(rest.pop_front());
                } else {
                    let take = t.len().min(MATCH_MAX_BITS - piece.length1 - MARGIN);
                    piece.length1 += take;
                    if *op == Ops::Equal {
                        piece.length2 += take;
                        start2 += take as isize;
                    } else {
                        empty = false;
                    }
                    let taken: Vec<u16> = t.drain(..take).collect();
                    piece.diffs.push((*op, taken));
                    if t.is_empty() {
                        rest.pop_front();
                    }
                }
            }
            precontext = text2(&piece.diffs);
            precontext.drain(..precontext.len().saturating_sub(MARGIN));
            let mut postcontext = text1(rest.make_contiguous());
            postcontext.truncate(MARGIN);
            if !postcontext.is_empty() {
                piece.length1 += postcontext.len();
                piece.length2 += postcontext.len();
                match piece.diffs.last_mut() {
                    Some((Ops::Equal, t)) => t.extend(postcontext),
                    _ => piece.diffs.push((Ops::Equal, postcontext)),
                }
            }
            if !empty {
                out.push(piece);
            }
        }
    }
    out
}

/// match_main: `pattern` near `loc` in `text`, exactly there if possible, else by bitap.
fn match_main(text: &[u16], pattern: &[u16], loc: isize) -> Option<usize> {
    let loc = usize::try_from(loc).unwrap_or(0).min(text.len());
    if text == pattern {
        Some(0)
    } else if text.is_empty() {
        None
    } else if substring(text, loc as isize, (loc + pattern.len()) as isize) == pattern {
        Some(loc)
    } else {
        match_bitap(text, pattern, loc)
    }
}

/// match_bitap_, with JS's int32 bit arithmetic (u32 here) and double scores.
fn match_bitap(text: &[u16], pattern: &[u16], loc: usize) -> Option<usize> {
    let plen = pattern.len();
    if plen == 0 || plen > MATCH_MAX_BITS {
        // JS throws on a long pattern; patch_apply never makes one. An empty one matched exactly above.
        return None;
    }
    let mut alphabet: std::collections::HashMap<u16, u32> = std::collections::HashMap::new();
    for (i, &c) in pattern.iter().enumerate() {
        *alphabet.entry(c).or_insert(0) |= 1 << (plen - i - 1);
    }
    let loc = loc as isize;
    let tlen = text.len() as isize;
    let score = |errors: usize, x: isize| errors as f64 / plen as f64 + (loc - x).abs() as f64 / MATCH_DISTANCE;

    let mut threshold = MATCH_THRESHOLD;
    if let Some(best) = index_of(text, pattern, loc as usize) {
        threshold = score(0, best as isize).min(threshold);
        if let Some(best) = last_index_of(text, pattern, loc as usize + plen) {
            threshold = score(0, best as isize).min(threshold);
        }
    }

    let matchmask: u32 = 1 << (plen - 1);
    let mut best_loc = None;
    let mut bin_max = plen as isize + tlen;
    let mut last_rd: Vec<u32> = Vec::new();
    for d in 0..plen {
        let mut bin_min = 0;
        let mut bin_mid = bin_max;
        while bin_min < bin_mid {
            if score(d, loc + bin_mid) <= threshold {
                bin_min = bin_mid;
            } else {
                bin_max = bin_mid;
            }
            bin_mid = (bin_max - bin_min) / 2 + bin_min;
        }
        bin_max = bin_mid;
        let mut start = (loc - bin_mid + 1).max(1);
        let finish = (loc + bin_mid).min(tlen) + plen as isize;
        let size = usize::try_from(finish + 2).ok()?;
        let mut rd = vec![0u32; size];
        rd[size - 1] = (1u32 << d).wrapping_sub(1);
        let last = |j: isize| usize::try_from(j).ok().and_then(|j| last_rd.get(j)).copied().unwrap_or(0);
        let mut j = finish;
        while j >= start {
            let ju = j as usize;
            let char_match = text.get(ju - 1).and_then(|c| alphabet.get(c)).copied().unwrap_or(0);
            rd[ju] = ((rd[ju + 1] << 1) | 1) & char_match;
            if d > 0 {
                rd[ju] |= (((last(j + 1) | last(j)) << 1) | 1) | last(j + 1);
            }
            if rd[ju] & matchmask != 0 {
                let s = score(d, j - 1);
                if s <= threshold {
                    threshold = s;
                    best_loc = Some(ju - 1);
                    if j - 1 > loc {
                        // Passing loc: don't go further from it than this match is.
                        start = (2 * loc - (j - 1)).max(1);
                    } else {
                        break;
                    }
                }
            }
            j -= 1;
        }
        if score(d + 1, loc) > threshold {
            break;
        }
        last_rd = rd;
    }
    best_loc
}

/// JS `text.indexOf(pattern, from)` for a non-empty pattern.
fn index_of(text: &[u16], pattern: &[u16], from: usize) -> Option<usize> {
    text.get(from..)?.windows(pattern.len()).position(|w| w == pattern).map(|i| i + from)
}

/// JS `text.lastIndexOf(pattern, from)` for a non-empty pattern: the last match starting at or before `from`.
fn last_index_of(text: &[u16], pattern: &[u16], from: usize) -> Option<usize> {
    let last_start = text.len().checked_sub(pattern.len())?.min(from);
    (0..=last_start).rev().find(|&k| &text[k..k + pattern.len()] == pattern)
}

/// diff_main(a, b, false) on code units. The crate's Compat mode diffs `char`s; mapping each unit to one char
/// (surrogates to plane-15 private use, which no unit maps to otherwise) makes it diff units. Without line mode
/// the diff itself uses no character classes, so this is JS's diff.
fn diff_main(a: &[u16], b: &[u16]) -> Option<Diffs> {
    fn to_chars(units: &[u16]) -> String {
        units
            .iter()
            .filter_map(|&u| {
                let c = if (0xD800..=0xDFFF).contains(&u) { 0xF0000 + u32::from(u - 0xD800) } else { u32::from(u) };
                char::from_u32(c)
            })
            .collect()
    }
    fn to_unit(c: char) -> u16 {
        let c = u32::from(c);
        let u = if c >= 0xF0000 { c - 0xF0000 + 0xD800 } else { c };
        u16::try_from(u).unwrap_or(0xFFFD)
    }
    let mut dmp = DiffMatchPatch::new();
    dmp.set_checklines(false);
    let diffs = dmp.diff_main::<diff_match_patch_rs::Compat>(&to_chars(a), &to_chars(b)).ok()?;
    Some(diffs.iter().map(|d| (d.op(), d.data().iter().map(|&c| to_unit(c)).collect())).collect())
}

/// diff_levenshtein.
fn levenshtein(diffs: &[(Ops, Vec<u16>)]) -> usize {
    let (mut total, mut inserted, mut deleted) = (0, 0, 0);
    for (op, t) in diffs {
        match op {
            Ops::Insert => inserted += t.len(),
            Ops::Delete => deleted += t.len(),
            Ops::Equal => {
                total += inserted.max(deleted);
                inserted = 0;
                deleted = 0;
            }
        }
    }
    total + inserted.max(deleted)
}

/// diff_xIndex: the position in the second text of position `loc` of the first.
fn x_index(diffs: &[(Ops, Vec<u16>)], loc: usize) -> usize {
    let (mut chars1, mut chars2, mut last1, mut last2) = (0, 0, 0, 0);
    let mut overshot = None;
    for (op, t) in diffs {
        if *op != Ops::Insert {
            chars1 += t.len();
        }
        if *op != Ops::Delete {
            chars2 += t.len();
        }
        if chars1 > loc {
            overshot = Some(*op);
            break;
        }
        last1 = chars1;
        last2 = chars2;
    }
    if overshot == Some(Ops::Delete) {
        // The location was deleted.
        return last2;
    }
    last2 + (loc - last1)
}

/// diff_cleanupSemanticLossless: slides single edits between equalities to word and line boundaries.
fn cleanup_semantic_lossless(diffs: &mut Diffs) {
    let mut pointer = 1;
    while pointer + 1 < diffs.len() {
        if diffs[pointer - 1].0 == Ops::Equal && diffs[pointer + 1].0 == Ops::Equal {
            let mut equality1 = diffs[pointer - 1].1.clone();
            let mut edit = diffs[pointer].1.clone();
            let mut equality2 = diffs[pointer + 1].1.clone();
            // Shift the edit as far left as possible.
            let common = equality1.iter().rev().zip(edit.iter().rev()).take_while(|(a, b)| a == b).count();
            if common > 0 {
                let shared = edit[edit.len() - common..].to_vec();
                equality1.truncate(equality1.len() - common);
                edit = [&shared[..], &edit[..edit.len() - common]].concat();
                equality2 = [&shared[..], &equality2[..]].concat();
            }
            // Step right one unit at a time, keeping the best-scoring position.
            let mut best = (equality1.clone(), edit.clone(), equality2.clone());
            let mut best_score = semantic_score(&equality1, &edit) + semantic_score(&edit, &equality2);
            while !edit.is_empty() && edit.first() == equality2.first() {
                equality1.push(edit[0]);
                edit.remove(0);
                edit.push(equality2.remove(0));
                let score = semantic_score(&equality1, &edit) + semantic_score(&edit, &equality2);
                // >= prefers trailing to leading whitespace on edits.
                if score >= best_score {
                    best_score = score;
                    best = (equality1.clone(), edit.clone(), equality2.clone());
                }
            }
            if diffs[pointer - 1].1 != best.0 {
                let (best1, best_edit, best2) = best;
                if best1.is_empty() {
                    diffs.remove(pointer - 1);
                    pointer -= 1;
                } else {
                    diffs[pointer - 1].1 = best1;
                }
                diffs[pointer].1 = best_edit;
                if best2.is_empty() {
                    diffs.remove(pointer + 1);
                    pointer -= 1;
                } else {
                    diffs[pointer + 1].1 = best2;
                }
            }
        }
        pointer += 1;
    }
}

/// diff_cleanupSemanticScore_: 6 (edge) .. 0 (mid-word), with JS's character classes.
fn semantic_score(one: &[u16], two: &[u16]) -> u8 {
    let (Some(&c1), Some(&c2)) = (one.last(), two.first()) else { return 6 };
    let (u1, u2) = (U16(c1), U16(c2));
    let non_alnum1 = !u1.is_alphanum();
    let non_alnum2 = !u2.is_alphanum();
    let space1 = non_alnum1 && u1.is_whitespace();
    let space2 = non_alnum2 && u2.is_whitespace();
    let break1 = space1 && (u1.is_newline() || u1.is_carriage());
    let break2 = space2 && (u2.is_newline() || u2.is_carriage());
    let blank1 = break1 && ends_with_blank_line(one);
    let blank2 = break2 && starts_with_blank_line(two);
    if blank1 || blank2 {
        5
    } else if break1 || break2 {
        4
    } else if non_alnum1 && !space1 && space2 {
        3
    } else if space1 || space2 {
        2
    } else if non_alnum1 || non_alnum2 {
        1
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[derive(serde::Deserialize)]
    struct Fixtures {
        pairs: Vec<Pair>,
        histories: Vec<History>,
        drifts: Vec<Drift>,
    }

    #[derive(serde::Deserialize)]
    struct Pair {
        name: String,
        old: String,
        new: String,
        creation_patch: String,
        update_patch: String,
        versions: Vec<String>,
        #[serde(default)]
        original_error: Option<String>,
    }

    #[derive(serde::Deserialize)]
    struct History {
        name: String,
        rows: Vec<String>,
        patches: Vec<String>,
        versions: Vec<String>,
    }

    #[derive(serde::Deserialize)]
    struct Drift {
        name: String,
        patch: String,
        text: String,
        #[serde(default)]
        result: Option<String>,
        #[serde(default)]
        result_units: Option<Vec<u16>>,
        results: Vec<bool>,
    }

    fn fixtures() -> Fixtures {
        serde_json::from_str(include_str!("../tests/fixtures/dmp/fixtures.json")).unwrap()
    }

    #[test]
    fn history_fixtures_cover_the_hard_cases() {
        let f = fixtures();
        let astral = |s: &str| s.chars().any(|c| u32::from(c) > 0xFFFF);
        assert!(f.pairs.len() >= 50 && f.histories.len() >= 5);
        assert!(f.pairs.iter().filter(|p| astral(&p.new) && p.original_error.is_none()).count() >= 10);
        assert!(f.pairs.iter().filter(|p| p.original_error.is_some()).count() >= 3);
        assert!(f.pairs.iter().any(|p| p.update_patch.matches("@@ -").count() >= 3));
    }

    /// Rust writes exactly the patch text Node writes, including for non-ASCII and astral text. Where the
    /// original throws (split surrogate pair), Rust writes the repaired patch that generate.mjs checked in Node.
    #[test]
    fn history_patches_match_node_byte_for_byte() {
        for p in fixtures().pairs {
            assert_eq!(creation_patch(&p.new), p.creation_patch, "creation patch: {}", p.name);
            assert_eq!(update_patch(&p.new, &p.old), p.update_patch, "update patch: {}", p.name);
        }
        for h in fixtures().histories {
            assert_eq!(creation_patch(&h.rows[0]), h.patches[0], "{}", h.name);
            for i in 1..h.rows.len() {
                assert_eq!(update_patch(&h.rows[i], &h.rows[i - 1]), h.patches[i], "{} step {i}", h.name);
            }
        }
    }

    /// Patches written by Node apply in Rust to the exact text.
    #[test]
    fn history_node_patches_apply_in_rust() {
        for p in fixtures().pairs {
            assert_eq!(apply_patch_text(&p.creation_patch, &p.new), "", "creation: {}", p.name);
            assert_eq!(apply_patch_text(&p.update_patch, &p.new), p.old, "update: {}", p.name);
        }
    }

    fn apply_patch_text(patch: &str, text: &str) -> String {
        let hunks = parse_patch_text(patch).unwrap();
        let (out, results) = patch_apply(&hunks, &text.encode_utf16().collect::<Vec<_>>()).unwrap();
        assert!(results.iter().all(|ok| *ok));
        String::from_utf16(&out).unwrap()
    }

    /// Where the text is not what the patch expects, Rust's patch_apply does what Node's does: the same fuzzy
    /// matches, the same rediffs, the same failed hunks, the same resulting text.
    #[test]
    fn history_fuzzy_apply_matches_node() {
        let f = fixtures();
        assert!(f.drifts.iter().any(|d| d.results.contains(&false)));
        assert!(f.drifts.iter().any(|d| d.results.iter().all(|ok| *ok) && d.result.as_deref() != Some(&d.text)));
        for d in f.drifts {
            let hunks = parse_patch_text(&d.patch).unwrap();
            let (out, results) = patch_apply(&hunks, &d.text.encode_utf16().collect::<Vec<_>>()).unwrap();
            let expected = d.result_units.unwrap_or_else(|| d.result.unwrap_or_default().encode_utf16().collect());
            assert_eq!(String::from_utf16_lossy(&out), String::from_utf16_lossy(&expected), "{}", d.name);
            assert_eq!(out, expected, "{}", d.name);
            assert_eq!(results, d.results, "{}", d.name);
        }
    }

    #[test]
    fn history_versions_match_node_walk() {
        for p in fixtures().pairs {
            let patches = vec![creation_patch(&p.old), p.update_patch.clone()];
            assert_eq!(versions(&p.new, &patches), p.versions, "{}", p.name);
        }
        for h in fixtures().histories {
            assert_eq!(versions(h.rows.last().unwrap(), &h.patches), h.versions, "{}", h.name);
            let mut oldest_first = h.versions.clone();
            oldest_first.reverse();
            assert_eq!(oldest_first, h.rows, "{}", h.name);
        }
    }

    #[test]
    fn history_round_trip_through_rust_only() {
        let rows = [
            r#"{"id":1,"data":{"title":"メモ 📝"},"date_created":"2026-11-29T20:00:00.000Z","modified_by":1}"#,
            r#"{"id":1,"data":{"title":"メモ 📞"},"date_created":"2026-11-29T20:00:00.000Z","modified_by":2}"#,
            r#"{"id":1,"data":{"title":"メモ 📞🐀","x":[1]},"date_created":"2026-11-29T20:00:00.000Z","modified_by":2}"#,
            r#"{"id":1,"data":{"title":"🀀","x":[1]},"date_created":"2026-11-29T20:00:00.000Z","modified_by":3}"#,
        ];
        let mut patches = vec![creation_patch(rows[0])];
        for w in rows.windows(2) {
            patches.push(update_patch(w[1], w[0]));
        }
        let mut expected: Vec<String> = rows.iter().map(|r| r.to_string()).collect();
        expected.reverse();
        assert_eq!(versions(rows[3], &patches), expected);
        assert_eq!(creation_patch(""), "");
        assert_eq!(update_patch(rows[1], rows[1]), "");
        assert_eq!(versions(rows[0], &[creation_patch(rows[0])]), vec![rows[0].to_string()]);
    }

    /// The fallback for a patch that fails its self-check is a plain replacement; it must apply too.
    #[test]
    fn history_whole_text_fallback_applies() {
        for p in fixtures().pairs.iter().take(20) {
            let from: Vec<u16> = p.new.encode_utf16().collect();
            let to: Vec<u16> = p.old.encode_utf16().collect();
            assert_eq!(apply_patch_text(&whole_text_patch(&from, &to), &p.new), p.old, "{}", p.name);
            assert_eq!(apply_patch_text(&whole_text_patch(&from, &[]), &p.new), "", "{}", p.name);
        }
        assert_eq!(whole_text_patch(&[0x61], &[0x62]), "@@ -1 +1 @@\n-a\n+b\n");
    }

    #[test]
    fn history_walk_stops_at_a_bad_patch() {
        let v1 = r#"{"a":"one"}"#;
        let v2 = r#"{"a":"two"}"#;
        let v3 = r#"{"a":"three"}"#;
        let good = [creation_patch(v1), update_patch(v2, v1), update_patch(v3, v2)];
        assert_eq!(versions(v3, &good), vec![v3, v2, v1]);
        for bad in ["@@ nonsense @@\n", "@@ -1,3 +1,3 @@\n-%E3%81\n", "@@ -1,3 +1,3 @@\n*abc\n", "@@ -0 +1 @@\n-a\n"] {
            let patches = [good[0].clone(), bad.to_owned(), good[2].clone()];
            assert_eq!(versions(v3, &patches), vec![v3, v2], "{bad:?}");
        }
        // A hunk whose text is nowhere in the row: no fuzzy match, the walk ends without panicking.
        let elsewhere = update_patch(r#"{"zzzzzzzzzzzzzzzzzzzz":"qqqqqqqqqqqqqqqq"}"#, r#"{"b":1}"#);
        let patches = [good[0].clone(), elsewhere, good[2].clone()];
        assert_eq!(versions(v3, &patches), vec![v3, v2]);
        // A patch that applies but leaves something that is not JSON ends the walk too.
        let broken = update_patch(v2, r#"{"a":"one""#);
        assert_eq!(versions(v3, &[good[0].clone(), broken, good[2].clone()]), vec![v3, v2]);
    }

    #[test]
    fn history_fuzzy_apply_tolerates_a_drifted_row() {
        // The stored row was changed without a history entry (or serialised differently) far from the hunk:
        // the hunk still fits exactly where it says.
        let v1 = r#"{"title":"first","body":"0123456789abcdefghijklmnop","n":1}"#;
        let v2 = r#"{"title":"second","body":"0123456789abcdefghijklmnop","n":1}"#;
        let drifted = r#"{"title":"second","body":"0123456789abcdefghijklmnop","n":1.0}"#;
        let patches = [creation_patch(v1), update_patch(v2, v1)];
        assert_eq!(versions(drifted, &patches)[1], r#"{"title":"first","body":"0123456789abcdefghijklmnop","n":1.0}"#);
        // Changed inside the hunk's context: exact fit fails and fuzzy matching takes over.
        let drifted = r#"{"title":"second!","body":"0123456789abcdefghijklmnop","n":1}"#;
        let rebuilt = versions(drifted, &patches);
        assert_eq!(rebuilt.len(), 2);
        assert!(rebuilt[1].contains("first"), "{rebuilt:?}");
    }

    #[test]
    fn history_uri_codec_matches_js() {
        let all: String = (1u32..0x80).filter_map(char::from_u32).collect();
        // encodeURI(all chars 1..127) in Node 20
        let js = "%01%02%03%04%05%06%07%08%09%0A%0B%0C%0D%0E%0F%10%11%12%13%14%15%16%17%18%19%1A%1B%1C%1D%1E%1F\
                  %20!%22#$%25&'()*+,-./0123456789:;%3C=%3E?@ABCDEFGHIJKLMNOPQRSTUVWXYZ%5B%5C%5D%5E_%60\
                  abcdefghijklmnopqrstuvwxyz%7B%7C%7D~%7F";
        let units: Vec<u16> = all.encode_utf16().collect();
        assert_eq!(encode_uri(&units).unwrap(), js);
        assert_eq!(decode_uri(js).unwrap(), units);
        assert_eq!(encode_uri(&"é😀".encode_utf16().collect::<Vec<_>>()).unwrap(), "%C3%A9%F0%9F%98%80");
        assert_eq!(encode_uri(&[0xD83D]), None);
        // decodeURI keeps escapes of reserved characters and throws on malformed UTF-8.
        assert_eq!(decode_uri("%23%2F%3f%41").unwrap(), "%23%2F%3fA".encode_utf16().collect::<Vec<_>>());
        for bad in ["%", "%4", "%zz", "%C3", "%C3%28", "%ED%A0%BD", "%C0%AF", "%F8%88%80%80%80"] {
            assert_eq!(decode_uri(bad), None, "{bad}");
        }
    }
}
