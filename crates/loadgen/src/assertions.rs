//! Response assertions: status, exact body, substring, SHA-256, length, required headers. Checked on every
//! response or every Nth; a failure counts as an error.

use std::path::PathBuf;

use sha2::{Digest, Sha256};

use crate::settings::ExpectSettings;

#[derive(Debug, Default)]
pub struct Assertions {
    /// Allowed statuses; empty = any.
    statuses: Vec<u16>,
    body: Option<Vec<u8>>,
    contains: Option<Vec<u8>>,
    sha256: Option<[u8; 32]>,
    length: Option<u64>,
    /// Lower-case name, and the exact value when one was given.
    headers: Vec<(String, Option<String>)>,
    pub every: u64,
}

/// Why the `--expect-*` flags give no assertions. Each message is one line for the user; a read error is
/// quoted in it, so it is not also a `source` (a chain printer would say it twice).
#[derive(Debug, thiserror::Error)]
pub enum AssertionsError {
    #[error("give --expect-body or --expect-body-file, not both")]
    BodyTwice,
    #[error("cannot read --expect-body-file {}: {error}", path.display())]
    BodyFileUnreadable { path: PathBuf, error: std::io::Error },
    #[error("--expect-sha256 {hex:?} is not 64 hex digits")]
    BadSha256 { hex: String },
    #[error("--expect-header {raw:?} has no name")]
    HeaderWithoutName { raw: String },
    #[error("--expect-status {status} is not an HTTP status")]
    BadStatus { status: u16 },
}

impl Assertions {
    /// Parses what `expect` asks for and reads `--expect-body-file`.
    pub fn from_settings(expect: &ExpectSettings) -> Result<Assertions, AssertionsError> {
        let body = match (&expect.body, &expect.body_file) {
            (Some(_), Some(_)) => return Err(AssertionsError::BodyTwice),
            (Some(b), None) => Some(b.clone().into_bytes()),
            (None, Some(path)) => Some(
                std::fs::read(path)
                    .map_err(|error| AssertionsError::BodyFileUnreadable { path: path.clone(), error })?,
            ),
            (None, None) => None,
        };
        let sha256 = match &expect.sha256 {
            Some(hex) => Some(parse_sha256(hex).ok_or_else(|| AssertionsError::BadSha256 { hex: hex.clone() })?),
            None => None,
        };
        let mut headers = Vec::new();
        for raw in &expect.headers {
            let (name, value) = match raw.split_once(':') {
                Some((n, v)) => (n.trim(), Some(v.trim().to_string())),
                None => (raw.trim(), None),
            };
            if name.is_empty() {
                return Err(AssertionsError::HeaderWithoutName { raw: raw.clone() });
            }
            headers.push((name.to_ascii_lowercase(), value));
        }
        if let Some(&status) = expect.status.iter().find(|s| !(100..=999).contains(*s)) {
            return Err(AssertionsError::BadStatus { status });
        }
        Ok(Assertions {
            statuses: expect.status.clone(),
            body,
            contains: expect.contains.clone().map(String::into_bytes),
            sha256,
            length: expect.length,
            headers,
            every: expect.every.max(1),
        })
    }

    pub fn any(&self) -> bool {
        !self.statuses.is_empty()
            || self.body.is_some()
            || self.contains.is_some()
            || self.sha256.is_some()
            || self.length.is_some()
            || !self.headers.is_empty()
    }

    /// The body bytes must be kept for this response's checks.
    pub fn needs_body(&self) -> bool {
        self.body.is_some() || self.contains.is_some() || self.sha256.is_some()
    }

    pub fn needs_headers(&self) -> bool {
        !self.headers.is_empty()
    }

    /// Required headers present (and equal, when a value was given)?
    pub fn headers_ok(&self, headers: &[httparse::Header<'_>]) -> bool {
        self.headers.iter().all(|(name, value)| {
            headers
                .iter()
                .any(|h| h.name.eq_ignore_ascii_case(name) && value.as_ref().is_none_or(|v| h.value == v.as_bytes()))
        })
    }

    /// Everything but headers; `body` is only consulted when `needs_body`.
    pub fn response_ok(&self, status: u16, body_len: u64, body: &[u8]) -> bool {
        if !(self.statuses.is_empty() || self.statuses.contains(&status)) || self.length.is_some_and(|l| l != body_len)
        {
            return false;
        }
        if self.body.as_ref().is_some_and(|b| b.as_slice() != body) {
            return false;
        }
        if self.contains.as_ref().is_some_and(|c| !c.is_empty() && !body.windows(c.len()).any(|w| w == c.as_slice())) {
            return false;
        }
        if let Some(expected) = &self.sha256
            && Sha256::digest(body).as_slice() != expected
        {
            return false;
        }
        true
    }
}

fn parse_sha256(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim();
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_hex_parses() {
        let hex = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        assert_eq!(parse_sha256(hex).map(|h| h[0]), Some(0xe3));
        assert!(parse_sha256("abc").is_none());
        let a = Assertions { sha256: parse_sha256(hex), ..Default::default() };
        assert!(a.response_ok(200, 0, b""));
        assert!(!a.response_ok(200, 1, b"x"));
    }

    #[test]
    fn flags_that_make_no_assertion_are_refused_by_name() {
        let expect = |edit: fn(&mut ExpectSettings)| {
            let mut expect = ExpectSettings {
                status: Vec::new(),
                body: None,
                body_file: None,
                contains: None,
                sha256: None,
                length: None,
                headers: Vec::new(),
                every: 1,
            };
            edit(&mut expect);
            Assertions::from_settings(&expect).err()
        };
        let both = expect(|e| (e.body, e.body_file) = (Some("a".into()), Some("b".into())));
        assert!(matches!(both, Some(AssertionsError::BodyTwice)), "{both:?}");
        let missing = expect(|e| e.body_file = Some("/nonexistent/body".into()));
        assert!(matches!(missing, Some(AssertionsError::BodyFileUnreadable { .. })), "{missing:?}");
        let short = expect(|e| e.sha256 = Some("abc".into()));
        assert_eq!(short.map(|e| e.to_string()).as_deref(), Some("--expect-sha256 \"abc\" is not 64 hex digits"));
        let nameless = expect(|e| e.headers = vec![": x".into()]);
        assert_eq!(nameless.map(|e| e.to_string()).as_deref(), Some("--expect-header \": x\" has no name"));
        let status = expect(|e| e.status = vec![200, 99]);
        assert!(matches!(status, Some(AssertionsError::BadStatus { status: 99 })), "{status:?}");
        assert_eq!(status.map(|e| e.to_string()).as_deref(), Some("--expect-status 99 is not an HTTP status"));
    }
}
