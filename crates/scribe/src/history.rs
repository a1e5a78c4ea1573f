//! Version history: the diff-match-patch patch texts stored in `<component>_history.patches`.
//!
//! The original Scribe stores, per record, a JSON array of patch texts made by npm `diff-match-patch` 1.0.5:
//! index 0 turns the first row's JSON into "", each later entry turns the updated row's JSON into the previous one.
//! Both runtimes read and write the same rows, so patch texts must be byte-compatible in both directions.
//!
//! JavaScript strings are UTF-16, so npm diff-match-patch diffs UTF-16 code units and its patch offsets count
//! them. diff-match-patch-rs's `Compat` mode diffs `char`s (Unicode scalar values): its offsets disagree with
//! Node's after any astral character (emoji), and it judges word boundaries with Unicode `is_alphanumeric`
//! where JS uses `/[^a-zA-Z0-9]/`, which moves edits in CJK text. So we run the crate's algorithms on our own
//! unit type, [`U16`], with JS's character classes: on UTF-16 code units the crate makes the same diffs and the
//! same patches as Node (proved against fixtures made by the npm package; see
//! `tests/fixtures/dmp/README.md`). Patch text is written and read here with JS's `encodeURI`/`decodeURI`.
//!
//! Where Node and the crate cannot agree:
//! - npm diff-match-patch 1.0.5 can split a surrogate pair between a diff and its neighbour, or cut one with a
//!   hunk's context; `encodeURI` then throws and the original fails the update. We write a patch that does the
//!   same edit with the pair kept whole ([`repair_split_surrogates`]); Node applies it to the same text.
//! - Applying a patch whose every hunk fits exactly where it says is emulated here step for step, so the result is
//!   Node's. A hunk that does not fit (the stored row changed outside the API, or a row serialised differently)
//!   goes to the crate's fuzzy matcher, whose heuristics differ from Node's in details (`match_bitap`'s
//!   search window); a hunk that fails there ends the walk.
//! - Diffs that hit diff-match-patch's 1 s deadline (rows of megabytes) depend on timing in either runtime; the
//!   patches stay correct, their text may differ.

use std::panic::{AssertUnwindSafe, catch_unwind};

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
        let s = units(input);
        s.ends_with(&[0x0A, 0x0A]) || s.ends_with(&[0x0A, 0x0D, 0x0A])
    }

    fn is_linebreak_start(input: &[Self]) -> bool {
        let s = units(input);
        [&[0x0A, 0x0A][..], &[0x0D, 0x0A, 0x0A], &[0x0A, 0x0D, 0x0A], &[0x0D, 0x0A, 0x0D, 0x0A]]
            .iter()
            .any(|p| s.starts_with(p))
    }

    // Only reached through the crate's `Display for Patch`, which we use for the hunk header alone; our own
    // writer (`patch_to_text`) refuses lone surrogates instead of replacing them.
    fn percent_encode(input: &[Self]) -> Vec<Self> {
        let text = String::from_utf16_lossy(&units(input));
        encode_uri(&text.encode_utf16().collect::<Vec<_>>()).unwrap_or_default().encode_utf16().map(U16).collect()
    }

    // Reached through the crate's patch_from_text, after our own parser accepted the same text.
    fn percent_decode(input: &[Self]) -> Vec<Self> {
        let text = String::from_utf16_lossy(&units(input));
        decode_uri(&text).unwrap_or_else(|| units(input)).into_iter().map(U16).collect()
    }
}

fn units(data: &[U16]) -> Vec<u16> {
    data.iter().map(|u| u.0).collect()
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
    diffs: Vec<(Ops, Vec<u16>)>,
}

impl Hunk {
    /// The text this hunk expects (diff_text1).
    fn text1(&self) -> Vec<u16> {
        self.diffs.iter().filter(|(op, _)| *op != Ops::Insert).flat_map(|(_, t)| t.iter().copied()).collect()
    }

    /// The text this hunk leaves (diff_text2).
    fn text2(&self) -> Vec<u16> {
        self.diffs.iter().filter(|(op, _)| *op != Ops::Delete).flat_map(|(_, t)| t.iter().copied()).collect()
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
        (apply_exact(&hunks, &from16)? == to16).then_some(hunks)
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

/// npm diff-match-patch's patch_apply for the case where every hunk's expected text sits exactly at its expected
/// place (its match_main then returns that place without fuzzy matching): null padding, delta bookkeeping and
/// all. `None` as soon as a hunk does not fit exactly; Node would go fuzzy there.
///
/// patch_splitMax is left out: when a big hunk fits exactly, the pieces it would be cut into fit exactly one
/// after another and leave the same text.
fn apply_exact(hunks: &[Hunk], text: &[u16]) -> Option<Vec<u16>> {
    const PAD: [u16; 4] = [1, 2, 3, 4];
    if hunks.is_empty() {
        return Some(text.to_vec());
    }
    let mut hunks = hunks.to_vec();
    for h in &mut hunks {
        h.start1 += PAD.len();
        h.start2 += PAD.len();
    }
    if let Some(first) = hunks.first_mut() {
        match first.diffs.first_mut() {
            Some((Ops::Equal, t)) if t.len() < PAD.len() => {
                let extra = PAD.len() - t.len();
                t.splice(0..0, PAD[t.len()..].iter().copied());
                first.start1 -= extra;
                first.start2 -= extra;
            }
            Some((Ops::Equal, _)) => {}
            _ => {
                first.diffs.insert(0, (Ops::Equal, PAD.to_vec()));
                first.start1 -= PAD.len();
                first.start2 -= PAD.len();
            }
        }
    }
    if let Some(last) = hunks.last_mut() {
        match last.diffs.last_mut() {
            Some((Ops::Equal, t)) if t.len() < PAD.len() => {
                let extra = PAD.len() - t.len();
                t.extend_from_slice(&PAD[..extra]);
            }
            Some((Ops::Equal, _)) => {}
            _ => last.diffs.push((Ops::Equal, PAD.to_vec())),
        }
    }
    let mut text: Vec<u16> = PAD.iter().chain(text).chain(&PAD).copied().collect();
    let mut delta: isize = 0;
    for h in &hunks {
        let expected = isize::try_from(h.start2).ok()? + delta;
        let old = h.text1();
        // match_main: clamp, whole-text shortcut, exact match at the expected place.
        let loc = usize::try_from(expected.max(0)).ok()?.min(text.len());
        let start = if text == old {
            0
        } else if text.get(loc..loc + old.len()) == Some(old.as_slice()) {
            loc
        } else {
            return None;
        };
        delta = isize::try_from(start).ok()? - expected;
        text.splice(start..start + old.len(), h.text2());
    }
    Some(text[PAD.len()..text.len() - PAD.len()].to_vec())
}

/// Applies one stored patch text to `current` the way the original's history walk does, and checks the result is
/// JSON.
fn apply_patch(patch: &str, current: &str) -> Option<String> {
    let hunks = parse_patch_text(patch)?;
    let text: Vec<u16> = current.encode_utf16().collect();
    let older = match apply_exact(&hunks, &text) {
        Some(older) => String::from_utf16(&older).ok()?,
        None => apply_fuzzy(patch, current)?,
    };
    serde_json::from_str::<serde::de::IgnoredAny>(&older).is_ok().then_some(older)
}

/// The crate's patch_apply (fuzzy matching) for hunks that do not fit exactly. Some of its arithmetic on a hunk
/// that fails to match (`length2 - length1` in usize) panics with overflow checks on, as in debug builds, and wraps
/// to the intended value without them, as in release; the panic is caught so that it only ends the walk.
fn apply_fuzzy(patch: &str, current: &str) -> Option<String> {
    let dmp = DiffMatchPatch::new();
    let applied = catch_unwind(AssertUnwindSafe(|| {
        let patches = dmp.patch_from_text::<U16>(patch).ok()?;
        dmp.patch_apply(&patches, current).ok()
    }));
    let (older, results) = applied.ok()??;
    results.iter().all(|ok| *ok).then_some(older)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[derive(serde::Deserialize)]
    struct Fixtures {
        pairs: Vec<Pair>,
        histories: Vec<History>,
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

    /// Patches written by Node apply in Rust to the exact text, with both the exact-fit path and the crate's
    /// fuzzy path (which must agree when the hunks fit).
    #[test]
    fn history_node_patches_apply_in_rust() {
        for p in fixtures().pairs {
            assert_eq!(apply_patch_text(&p.creation_patch, &p.new), "", "creation: {}", p.name);
            assert_eq!(apply_patch_text(&p.update_patch, &p.new), p.old, "update: {}", p.name);
            assert_eq!(apply_fuzzy(&p.update_patch, &p.new).as_deref(), Some(p.old.as_str()), "fuzzy: {}", p.name);
        }
    }

    fn apply_patch_text(patch: &str, text: &str) -> String {
        let hunks = parse_patch_text(patch).unwrap();
        String::from_utf16(&apply_exact(&hunks, &text.encode_utf16().collect::<Vec<_>>()).unwrap()).unwrap()
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
