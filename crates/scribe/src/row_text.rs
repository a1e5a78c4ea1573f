//! A row as the JSON text the API answers with and the history diffs: columns in table order, timestamps UTC
//! with milliseconds and `Z` (as the Node peers serialize them), written straight from PostgreSQL's wire
//! values. Nothing goes through a `serde_json::Value`: `jsonb` arrives as PostgreSQL's own text (`{"a": 1}`)
//! and only loses the blanks PostgreSQL puts after `:` and `,`; the few numbers serde_json would print
//! differently from that text (fractions, exponents, integers past 18 digits) go through serde_json, so the
//! bytes are exactly what parsing the value into serde_json and printing it gave.

use std::io::Write;

use chrono::{Datelike, Timelike};
use serve::push_json_str;
use tokio_postgres::Row;
use tokio_postgres::types::{FromSql, Type};

use crate::error::ApiError;

/// The row's JSON object.
pub fn row_text(row: &Row) -> Result<String, ApiError> {
    let mut out = Vec::with_capacity(256);
    out.push(b'{');
    for (i, column) in row.columns().iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        push_json_str(&mut out, column.name());
        out.push(b':');
        push_value(&mut out, row, i, column.type_())
            .map_err(|e| ApiError::Internal(format!("column {}: {e}", column.name())))?;
    }
    out.push(b'}');
    // Every piece written is UTF-8: names and text columns are `str`, jsonb text is checked as it is copied.
    String::from_utf8(out).map_err(|e| ApiError::Internal(format!("row text: {e}")))
}

type ColumnError = Box<dyn std::error::Error + Sync + Send>;

fn push_value(out: &mut Vec<u8>, row: &Row, i: usize, ty: &Type) -> Result<(), ColumnError> {
    macro_rules! plain {
        ($t:ty) => {
            match row.try_get::<_, Option<$t>>(i)? {
                Some(v) => write!(out, "{v}")?,
                None => out.extend_from_slice(b"null"),
            }
        };
    }
    match *ty {
        Type::INT2 => plain!(i16),
        Type::INT4 => plain!(i32),
        Type::INT8 => plain!(i64),
        Type::BOOL => plain!(bool),
        // serde_json's float printing (and NaN/infinity as null), as the response always had.
        Type::FLOAT4 => serde_json::to_writer(&mut *out, &row.try_get::<_, Option<f32>>(i)?.map(f64::from))?,
        Type::FLOAT8 => serde_json::to_writer(&mut *out, &row.try_get::<_, Option<f64>>(i)?)?,
        Type::JSONB => match row.try_get::<_, Option<JsonbText<'_>>>(i)? {
            Some(JsonbText(text)) => push_jsonb(out, text)?,
            None => out.extend_from_slice(b"null"),
        },
        // `json` keeps the text as sent (blanks, duplicate keys): serde_json normalizes it, as before.
        Type::JSON => serde_json::to_writer(&mut *out, &row.try_get::<_, Option<serde_json::Value>>(i)?)?,
        Type::TIMESTAMPTZ => match row.try_get::<_, Option<chrono::DateTime<chrono::Utc>>>(i)? {
            Some(at) => push_time(out, at.naive_utc()),
            None => out.extend_from_slice(b"null"),
        },
        Type::TIMESTAMP => match row.try_get::<_, Option<chrono::NaiveDateTime>>(i)? {
            Some(at) => push_time(out, at),
            None => out.extend_from_slice(b"null"),
        },
        _ => match row.try_get::<_, Option<&str>>(i)? {
            Some(text) => push_json_str(out, text),
            None => out.extend_from_slice(b"null"),
        },
    }
    Ok(())
}

/// `2026-12-02T10:40:00.123Z`; years outside 0..=9999 as chrono writes them (`+10000-…`).
fn push_time(out: &mut Vec<u8>, at: chrono::NaiveDateTime) {
    out.push(b'"');
    let year = at.year();
    if (0..=9999).contains(&year) {
        let millis = at.nanosecond() % 1_000_000_000 / 1_000_000;
        let _ = write!(
            out,
            "{year:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{millis:03}Z",
            at.month(),
            at.day(),
            at.hour(),
            at.minute(),
            at.second()
        );
    } else {
        let _ = write!(out, "{}", at.format("%Y-%m-%dT%H:%M:%S%.3fZ"));
    }
    out.push(b'"');
}

/// A `jsonb` value's text, borrowed from the row (binary format: a version byte, 1, then the text).
struct JsonbText<'a>(&'a [u8]);

impl<'a> FromSql<'a> for JsonbText<'a> {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, ColumnError> {
        match raw.split_first() {
            Some((1, text)) => Ok(JsonbText(text)),
            _ => Err("unsupported jsonb encoding version".into()),
        }
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::JSONB
    }
}

/// PostgreSQL's jsonb text without the blanks between tokens; strings are copied as they are (PostgreSQL
/// and serde_json escape the same characters the same way), numbers as serde_json prints them.
fn push_jsonb(out: &mut Vec<u8>, text: &[u8]) -> Result<(), ColumnError> {
    std::str::from_utf8(text)?;
    let mut i = 0;
    while i < text.len() {
        match text[i] {
            b'"' => {
                let start = i;
                i += 1;
                while i < text.len() && text[i] != b'"' {
                    i += if text[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                out.extend_from_slice(text.get(start..i).ok_or("unterminated string in jsonb text")?);
            }
            b' ' | b'\n' | b'\r' | b'\t' => i += 1,
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < text.len() && matches!(text[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9') {
                    i += 1;
                }
                push_number(out, &text[start..i])?;
            }
            other => {
                out.push(other);
                i += 1;
            }
        }
    }
    Ok(())
}

/// An integer of at most 18 digits fits every serde_json integer type and prints as written (PostgreSQL
/// writes no leading zeros and no `-0`); anything else is parsed and printed by serde_json (`1.50` → `1.5`),
/// which fails, as before, for a number no f64 holds.
fn push_number(out: &mut Vec<u8>, token: &[u8]) -> Result<(), ColumnError> {
    let digits = token.strip_prefix(b"-").unwrap_or(token);
    if !digits.is_empty() && digits.len() <= 18 && digits.iter().all(u8::is_ascii_digit) {
        out.extend_from_slice(token);
        return Ok(());
    }
    let number: serde_json::Number = serde_json::from_slice(token)?;
    serde_json::to_writer(&mut *out, &number)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compact(text: &str) -> String {
        let mut out = Vec::new();
        push_jsonb(&mut out, text.as_bytes()).expect("jsonb text");
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn jsonb_text_prints_as_serde_json_prints_the_parsed_value() {
        for text in [
            r#"{"a": 1, "b": [1, 2, {"c": null}], "d": "x, y: z"}"#,
            r#"{"q": "say \"hi\"\\ \n\t", "e": "é 😀", "n": -12, "f": 1.50, "g": 100000000000000000000}"#,
            r#"[true, false, null, 0, -0.5, 1e-7, 123456789012345678, -123456789012345678]"#,
            r#""just a string""#,
            "[]",
            "{}",
        ] {
            let expected =
                serde_json::to_string(&serde_json::from_str::<serde_json::Value>(text).expect("json")).expect("print");
            assert_eq!(compact(text), expected, "{text}");
        }
    }

    #[test]
    fn a_number_no_f64_holds_fails_as_before() {
        let huge = format!("[1{}]", "0".repeat(400));
        assert!(push_jsonb(&mut Vec::new(), huge.as_bytes()).is_err());
    }
}
