//! One UTF-16 code unit with JavaScript's character classes: the element scribe-rs runs diff-match-patch-rs on.
//!
//! JavaScript strings are UTF-16: npm diff-match-patch diffs UTF-16 code units and its offsets count them.
//! diff-match-patch-rs's `Compat` mode diffs `char`s instead, so its offsets disagree with Node's after any astral
//! character (emoji), and it finds word boundaries with Unicode `is_alphanumeric` where JS uses
//! `/[^a-zA-Z0-9]/`, which moves edits in CJK and accented text. [`U16`] is the crate's `DType` with Node's unit
//! and Node's classes, so the crate's algorithms make the patches Node makes.

use diff_match_patch_rs::traits::DType;

use crate::js_uri::{decode_uri, encode_uri};

/// One UTF-16 code unit: the element of a JavaScript string, so the unit of npm diff-match-patch's offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct U16(pub(crate) u16);

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

pub(crate) fn units(data: &[U16]) -> Vec<u16> {
    data.iter().map(|u| u.0).collect()
}

/// JS `/\n\r?\n$/`.
pub(crate) fn ends_with_blank_line(s: &[u16]) -> bool {
    s.ends_with(&[0x0A, 0x0A]) || s.ends_with(&[0x0A, 0x0D, 0x0A])
}

/// JS `/^\r?\n\r?\n/`.
pub(crate) fn starts_with_blank_line(s: &[u16]) -> bool {
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

pub(crate) fn is_high(u: u16) -> bool {
    (0xD800..=0xDBFF).contains(&u)
}

pub(crate) fn is_low(u: u16) -> bool {
    (0xDC00..=0xDFFF).contains(&u)
}
