//! The lookup-and-build step: one `videos` row and a region in, the response JSON out, byte for byte what the
//! Bun and Node peers' `JSON.stringify` produces (bench/peers/metadata/metadata.mjs holds the same logic).
//!
//! `locales` is parsed without building a tree: only the requested region's and `en`'s title and description
//! are kept, borrowed from the row's text when they contain no escapes.
//!
//! A JavaScript string may hold a lone surrogate (`"\ud800"` parses), a Rust string may not, so serde_json
//! refuses such a title. Only then is the row parsed again, tolerantly: the kept strings as their JSON
//! literals, decoded to WTF-8 and written as `JSON.stringify` writes them (`\ud800`), so those rows answer
//! 200 with the peers' bytes while every other row pays nothing for it.

use std::borrow::Cow;
use std::fmt;
use std::io::Write;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serve::{push_json_str, push_json_str_contents};

/// The region used when the request names none (or an empty one), and the fallback locale.
pub const DEFAULT_REGION: &str = "en";

/// Views above this, in a region the video is localized for, make it trending.
pub const TRENDING_VIEWS: i64 = 500_000;

/// One `videos` row, borrowed from SQLite's buffers.
#[derive(Debug, Clone, Copy)]
pub struct Row<'a> {
    pub channel: Option<&'a str>,
    pub duration_s: Option<i64>,
    pub views: Option<i64>,
    /// The JSON text, as bytes: serde_json then checks UTF-8 only in the strings it keeps, not in the skipped
    /// regions (a whole-column check was a tenth of the lookup's time). `None` when the column is NULL,
    /// which the peers' `JSON.parse(null)` turns into a malformed row too.
    pub locales: Option<&'a [u8]>,
}

/// The row's `locales` is not a JSON object; the peers answer 500 for it, and so do we.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Malformed(String);

impl Malformed {
    fn locales(detail: impl fmt::Display) -> Malformed {
        Malformed(format!("locales is not a JSON object: {detail}"))
    }

    /// A column whose storage class the contract does not allow.
    pub fn column(name: &str, found: rusqlite::types::Type) -> Malformed {
        Malformed(format!("column {name} holds {found}"))
    }
}

/// Appends the response body for `row` seen from `region` to `out`.
pub fn render(id: &str, region: &str, row: &Row<'_>, out: &mut Vec<u8>) -> Result<(), Malformed> {
    let locales = row.locales.ok_or_else(|| Malformed::locales("NULL"))?;
    let picked = match pick(locales, region, Mode::Strict) {
        Ok(picked) => picked,
        // Not JSON, not an object, or a string serde_json will not hold: the second parse tells them apart.
        Err(strict) => pick(locales, region, Mode::Tolerant).map_err(|_| Malformed::locales(strict))?,
    };
    let has_region = picked.region.is_some();
    let locale = picked.region.or(picked.en).unwrap_or_default();
    let trending = has_region && row.views.is_some_and(|v| v > TRENDING_VIEWS);

    out.extend_from_slice(b"{\"id\":");
    push_json_str(out, id);
    out.extend_from_slice(b",\"channel\":");
    push_opt_str(out, row.channel);
    out.extend_from_slice(b",\"title\":");
    push_text(out, locale.title.as_ref());
    out.extend_from_slice(b",\"description\":");
    push_text(out, locale.description.as_ref());
    out.extend_from_slice(b",\"duration\":\"");
    push_duration(out, row.duration_s.unwrap_or(0));
    out.extend_from_slice(b"\",\"views\":");
    match row.views {
        Some(views) => push_integer(out, views),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(if trending { b",\"trending\":true}" } else { b",\"trending\":false}" });
    Ok(())
}

fn pick<'de>(locales: &'de [u8], region: &str, mode: Mode) -> Result<Picked<'de>, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(locales);
    let picked = PickLocales { region, mode }.deserialize(&mut de)?;
    de.end()?;
    Ok(picked)
}

/// `H:MM:SS` from an hour up, else `M:SS`; negative durations count as 0 (as the peers' `Math.max(0, …)`).
pub fn format_duration(seconds: i64) -> String {
    let mut out = Vec::with_capacity(12);
    push_duration(&mut out, seconds);
    String::from_utf8(out).unwrap_or_default()
}

fn push_duration(out: &mut Vec<u8>, seconds: i64) {
    let s = seconds.max(0);
    let (hours, minutes, secs) = (s / 3600, s % 3600 / 60, s % 60);
    if hours > 0 {
        push_integer(out, hours);
        out.push(b':');
        push_two_digits(out, minutes);
    } else {
        push_integer(out, minutes);
    }
    out.push(b':');
    push_two_digits(out, secs);
}

fn push_two_digits(out: &mut Vec<u8>, n: i64) {
    out.push(b'0' + (n / 10) as u8);
    out.push(b'0' + (n % 10) as u8);
}

/// Without the allocation `to_string` makes.
fn push_integer(out: &mut Vec<u8>, n: i64) {
    // Writing to a Vec cannot fail.
    let _ = write!(out, "{n}");
}

/// A kept string. Borrowed means the JSON text held it without escapes, and serde_json refuses raw control
/// characters, so it is written as it stood; an unescaped (owned) one is escaped again; a literal (the
/// tolerant parse's) is decoded and escaped again.
fn push_text(out: &mut Vec<u8>, s: Option<&Text<'_>>) {
    match s {
        Some(Text::Parsed(Cow::Borrowed(s))) => {
            out.push(b'"');
            out.extend_from_slice(s.as_bytes());
            out.push(b'"');
        }
        Some(Text::Parsed(Cow::Owned(s))) => push_json_str(out, s),
        Some(Text::Literal(literal)) => push_literal(out, literal),
        None => out.extend_from_slice(b"null"),
    }
}

/// A JSON string literal as `JSON.stringify(JSON.parse(literal))` writes it. serde_json decodes it into bytes
/// with lone surrogates kept, as WTF-8 (a surrogate's three bytes, `ED A0..BF 80..BF`); the well-formed runs
/// between them are escaped as any string, and each lone surrogate is written as ES2019's well-formed
/// `JSON.stringify` writes it, `\u` and four lower-case hex digits.
fn push_literal(out: &mut Vec<u8>, literal: &str) {
    let mut de = serde_json::Deserializer::from_str(literal);
    let Ok(Wtf8(bytes)) = de.deserialize_bytes(Wtf8Visitor) else {
        // It parsed once already, as a string; cannot fail now.
        out.extend_from_slice(b"null");
        return;
    };
    out.push(b'"');
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        let valid = match std::str::from_utf8(rest) {
            Ok(all) => all,
            // Safe to index: `valid_up_to` ends a valid prefix.
            Err(e) => std::str::from_utf8(&rest[..e.valid_up_to()]).unwrap_or_default(),
        };
        push_json_str_contents(out, valid);
        rest = &rest[valid.len()..];
        if let [0xED, b1 @ 0xA0..=0xBF, b2 @ 0x80..=0xBF, tail @ ..] = rest {
            let unit = 0xD000 | (u32::from(b1 & 0x3F) << 6) | u32::from(b2 & 0x3F);
            let _ = write!(out, "\\u{unit:04x}");
            rest = tail;
        } else if !rest.is_empty() {
            // serde_json produces no other invalid UTF-8; skip a byte rather than loop.
            rest = &rest[1..];
        }
    }
    out.push(b'"');
}

fn push_opt_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => push_json_str(out, s),
        None => out.extend_from_slice(b"null"),
    }
}

// --- locales parsing -------------------------------------------------------------------------------------

#[derive(Debug, Default)]
struct Locale<'de> {
    title: Option<Text<'de>>,
    description: Option<Text<'de>>,
}

/// A kept string: parsed by serde_json, or (the tolerant parse) the JSON literal it stands in.
#[derive(Debug)]
enum Text<'de> {
    Parsed(Cow<'de, str>),
    Literal(&'de str),
}

/// How the kept strings are read: as Rust strings (every row, first), or as literals (a row serde_json
/// refused, again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Strict,
    Tolerant,
}

#[derive(Debug, Default)]
struct Picked<'de> {
    /// Present when `locales` has the requested region as its own key.
    region: Option<Locale<'de>>,
    en: Option<Locale<'de>>,
}

/// Deserializes the `locales` object, keeping only the requested region and `en`; the other regions are
/// skipped without allocating. Anything but an object is an error (the peers check the same).
struct PickLocales<'r> {
    region: &'r str,
    mode: Mode,
}

impl<'de> DeserializeSeed<'de> for PickLocales<'_> {
    type Value = Picked<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for PickLocales<'_> {
    type Value = Picked<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object of region → {title, description}")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut picked = Picked::default();
        // Later duplicates win, as with JSON.parse.
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            if *key == *self.region.as_bytes() {
                picked.region = Some(map.next_value_seed(LocaleSeed(self.mode))?);
            } else if *key == *DEFAULT_REGION.as_bytes() {
                picked.en = Some(map.next_value_seed(LocaleSeed(self.mode))?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(picked)
    }
}

/// One locale. Tolerant: taken as its raw text first (skipping a string value tolerates a lone surrogate,
/// reading it does not), then, when it is an object, parsed from that text.
struct LocaleSeed(Mode);

impl<'de> DeserializeSeed<'de> for LocaleSeed {
    type Value = Locale<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        match self.0 {
            Mode::Strict => deserializer.deserialize_any(LocaleVisitor(Mode::Strict)),
            Mode::Tolerant => {
                let raw = <&'de RawValue as de::Deserialize<'de>>::deserialize(deserializer)?;
                if !raw.get().starts_with('{') {
                    return Ok(Locale::default());
                }
                let mut inner = serde_json::Deserializer::from_str(raw.get());
                inner.deserialize_map(LocaleVisitor(Mode::Tolerant)).map_err(de::Error::custom)
            }
        }
    }
}

/// A locale that is not an object has no title or description (the peers' `typeof loc === "object"` check).
struct LocaleVisitor(Mode);

impl<'de> Visitor<'de> for LocaleVisitor {
    type Value = Locale<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a locale")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut locale = Locale::default();
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            match &*key {
                b"title" => locale.title = self.text(&mut map)?,
                b"description" => locale.description = self.text(&mut map)?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(locale)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Locale::default())
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Locale::default())
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Locale::default())
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Locale::default())
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Locale::default())
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Locale::default())
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Locale::default())
    }
}

impl LocaleVisitor {
    /// A title or description: `None` unless it is a string.
    fn text<'de, A: MapAccess<'de>>(&self, map: &mut A) -> Result<Option<Text<'de>>, A::Error> {
        Ok(match self.0 {
            Mode::Strict => map.next_value::<MaybeStr<'de>>()?.0.map(Text::Parsed),
            Mode::Tolerant => {
                let raw = map.next_value::<&'de RawValue>()?.get();
                raw.starts_with('"').then_some(Text::Literal(raw))
            }
        })
    }
}

/// WTF-8 bytes of a JSON string literal (see [`push_literal`]).
struct Wtf8(Vec<u8>);

struct Wtf8Visitor;

impl<'de> Visitor<'de> for Wtf8Visitor {
    type Value = Wtf8;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_bytes<E>(self, b: &[u8]) -> Result<Self::Value, E> {
        Ok(Wtf8(b.to_vec()))
    }
    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(Wtf8(s.as_bytes().to_vec()))
    }
}

/// An object key, as bytes: keys are compared, never written, so serde_json unescapes them without checking
/// their UTF-8 (a tenth of the lookup went to checking every region's key).
struct Key<'de>(Cow<'de, [u8]>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_bytes(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_bytes<E>(self, b: &'de [u8]) -> Result<Self::Value, E> {
        Ok(Key(Cow::Borrowed(b)))
    }
    fn visit_bytes<E>(self, b: &[u8]) -> Result<Self::Value, E> {
        Ok(Key(Cow::Owned(b.to_vec())))
    }
    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(Key(Cow::Borrowed(s.as_bytes())))
    }
    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(Key(Cow::Owned(s.as_bytes().to_vec())))
    }
}

/// A string field, or `None` for any other JSON value (the peers' `typeof … === "string"`).
struct MaybeStr<'de>(Option<Cow<'de, str>>);

impl<'de> de::Deserialize<'de> for MaybeStr<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(MaybeStrVisitor)
    }
}

struct MaybeStrVisitor;

impl<'de> Visitor<'de> for MaybeStrVisitor {
    type Value = MaybeStr<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(MaybeStr(Some(Cow::Borrowed(s))))
    }
    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(MaybeStr(Some(Cow::Owned(s.to_string()))))
    }
    fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
        Ok(MaybeStr(Some(Cow::Owned(s))))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(MaybeStr(None))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(MaybeStr(None))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(MaybeStr(None))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(MaybeStr(None))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(MaybeStr(None))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(MaybeStr(None))
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(MaybeStr(None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(id: &str, region: &str, row: Row<'_>) -> String {
        let mut out = Vec::new();
        render(id, region, &row, &mut out).expect("renders");
        String::from_utf8(out).expect("utf-8")
    }

    const LOCALES: &str =
        r#"{"en":{"title":"Ramen","description":"Noodles"},"ja":{"title":"ラーメン","description":"麺"}}"#;

    fn row(views: i64) -> Row<'static> {
        Row { channel: Some("Chef"), duration_s: Some(3725), views: Some(views), locales: Some(LOCALES.as_bytes()) }
    }

    #[test]
    fn region_present_and_fallback() {
        assert_eq!(
            body("a1", "ja", row(600_000)),
            r#"{"id":"a1","channel":"Chef","title":"ラーメン","description":"麺","duration":"1:02:05","views":600000,"trending":true}"#
        );
        assert_eq!(
            body("a1", "ko", row(600_000)),
            r#"{"id":"a1","channel":"Chef","title":"Ramen","description":"Noodles","duration":"1:02:05","views":600000,"trending":false}"#
        );
        assert!(body("a1", "en", row(500_000)).ends_with(r#""views":500000,"trending":false}"#));
        assert!(body("a1", "en", row(500_001)).ends_with(r#""trending":true}"#));
    }

    #[test]
    fn durations() {
        for (s, want) in [
            (0, "0:00"),
            (59, "0:59"),
            (60, "1:00"),
            (3599, "59:59"),
            (3600, "1:00:00"),
            (360_000, "100:00:00"),
            (-5, "0:00"),
        ] {
            assert_eq!(format_duration(s), want, "{s} s");
        }
    }

    #[test]
    fn escapes_like_json_stringify() {
        let locales = r#"{"en":{"title":"a\"b\\c\n\u0001\u2028 🍜","description":5}}"#;
        let row = Row { channel: None, duration_s: None, views: None, locales: Some(locales.as_bytes()) };
        assert_eq!(
            body("x\"y", "en", row),
            "{\"id\":\"x\\\"y\",\"channel\":null,\"title\":\"a\\\"b\\\\c\\n\\u0001\u{2028} 🍜\",\"description\":null,\
             \"duration\":\"0:00\",\"views\":null,\"trending\":false}"
        );
    }

    #[test]
    fn malformed_locales() {
        for bad in ["[]", "null", "\"en\"", "{", "{} x", "1"] {
            let row = Row { channel: None, duration_s: None, views: None, locales: Some(bad.as_bytes()) };
            assert!(render("x", "en", &row, &mut Vec::new()).is_err(), "{bad}");
        }
        let row = Row { channel: None, duration_s: None, views: None, locales: None };
        assert!(render("x", "en", &row, &mut Vec::new()).is_err(), "NULL locales");
    }

    #[test]
    fn escaped_keys_are_the_keys_they_spell() {
        let locales = r#"{"\u0065n":{"\u0074itle":"e","description":"d"},"j\u0061":{"title":"j"}}"#;
        let row = Row { channel: None, duration_s: None, views: None, locales: Some(locales.as_bytes()) };
        assert!(body("i", "ko", row).contains(r#""title":"e","description":"d""#));
        assert!(body("i", "ja", row).contains(r#""title":"j","description":null"#));
    }

    #[test]
    fn odd_locales_shapes() {
        let locales = r#"{"ja":"x","en":{"title":["t"],"description":"d","extra":{"a":[1]}},"en":{"title":"last"}}"#;
        let row = Row { channel: Some("c"), duration_s: Some(1), views: Some(1), locales: Some(locales.as_bytes()) };
        // A non-object locale for the region: present (so no fallback), but without title or description.
        assert!(body("i", "ja", row).contains(r#""title":null,"description":null"#));
        // Duplicate keys: the last wins.
        assert!(body("i", "ko", row).contains(r#""title":"last","description":null"#));
    }
}
