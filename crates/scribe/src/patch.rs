//! A patch as diff-match-patch holds it (hunks of diffs in UTF-16 code units, its patch_obj) and as it is stored:
//! patch_toText and patch_fromText, GNU-diff-like headers and `encodeURI`-escaped lines, as npm diff-match-patch
//! 1.0.5 writes and reads them.

use diff_match_patch_rs::Ops;

use crate::diff::{Diffs, text1, text2};
use crate::js_uri::{decode_uri, encode_uri};

/// diff-match-patch's Patch_Margin: units of context around each edit.
pub(crate) const MARGIN: usize = 4;

/// One hunk of a patch, in UTF-16 code units (diff-match-patch's patch_obj).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hunk {
    pub(crate) start1: usize,
    pub(crate) start2: usize,
    pub(crate) length1: usize,
    pub(crate) length2: usize,
    pub(crate) diffs: Diffs,
}

impl Hunk {
    pub(crate) fn text1(&self) -> Vec<u16> {
        text1(&self.diffs)
    }

    pub(crate) fn text2(&self) -> Vec<u16> {
        text2(&self.diffs)
    }
}

/// patch_toText: GNU-diff-like header, each diff line `encodeURI`d, then `%20` back to a space.
/// `None` if a diff holds a lone surrogate (where `encodeURI` throws).
pub(crate) fn patch_to_text(hunks: &[Hunk]) -> Option<String> {
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

/// Parses a hunk header `@@ -a[,b] +c[,d] @@` (JS: `/^@@ -(\d+),?(\d*) \+(\d+),?(\d*) @@$/`) into
/// (start1, length1, start2, length2), 0-based as patch_fromText makes them. Rejects what would make a negative
/// start in JS (never written by diff-match-patch) and numbers beyond u32, so later arithmetic cannot overflow.
pub(crate) fn parse_header(line: &str) -> Option<(usize, usize, usize, usize)> {
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
pub(crate) fn parse_patch_text(text: &str) -> Option<Vec<Hunk>> {
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
