//! The answer to `GET /upstream`, serialized once at start.

/// Every answer's size in bytes: a typical small JSON API response, and the same for every token, so a run's
/// bytes on the wire do not depend on it.
pub const DOCUMENT_BYTES: usize = 1024;

/// `{"service":"upstream","token":"<token>","padding":"xxx…"}`, padded to exactly [`DOCUMENT_BYTES`]. The
/// token must be one [`crate::config::parse_token`] accepts (nothing to escape, at most 64 bytes), so the
/// padding always has room.
pub fn document(token: &str) -> Vec<u8> {
    let head = format!(r#"{{"service":"upstream","token":"{token}","padding":""#);
    let tail = r#""}"#;
    let padding = DOCUMENT_BYTES.saturating_sub(head.len() + tail.len());
    let mut out = Vec::with_capacity(DOCUMENT_BYTES);
    out.extend_from_slice(head.as_bytes());
    out.resize(out.len() + padding, b'x');
    out.extend_from_slice(tail.as_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_token_gives_exactly_1024_bytes() {
        for token in ["a", crate::config::DEFAULT_TOKEN, &"Z".repeat(64)] {
            let doc = document(token);
            assert_eq!(doc.len(), DOCUMENT_BYTES, "{token}");
            let text = std::str::from_utf8(&doc).expect("ASCII");
            assert!(text.starts_with(&format!(r#"{{"service":"upstream","token":"{token}","padding":"x"#)), "{text}");
            assert!(text.ends_with(r#"xx"}"#), "{text}");
        }
    }
}
