//! Response assertions: status, exact body, substring, SHA-256, length, required headers. Checked on every
//! response or every Nth; a failure counts as an error.

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

impl Assertions {
    /// Parses what `expect` asks for and reads `--expect-body-file`. Errors are one line, for the user.
    pub fn from_settings(expect: &ExpectSettings) -> Result<Assertions, String> {
        let body = match (&expect.body, &expect.body_file) {
            (Some(_), Some(_)) => return Err("give --expect-body or --expect-body-file, not both".to_string()),
            (Some(b), None) => Some(b.clone().into_bytes()),
            (None, Some(path)) => Some(
                std::fs::read(path).map_err(|e| format!("cannot read --expect-body-file {}: {e}", path.display()))?,
            ),
            (None, None) => None,
        };
        let sha256 = match &expect.sha256 {
            Some(hex) => {
                Some(parse_sha256(hex).ok_or_else(|| format!("--expect-sha256 {hex:?} is not 64 hex digits"))?)
            }
            None => None,
        };
        let mut headers = Vec::new();
        for raw in &expect.headers {
            let (name, value) = match raw.split_once(':') {
                Some((n, v)) => (n.trim(), Some(v.trim().to_string())),
                None => (raw.trim(), None),
            };
            if name.is_empty() {
                return Err(format!("--expect-header {raw:?} has no name"));
            }
            headers.push((name.to_ascii_lowercase(), value));
        }
        if let Some(status) = expect.status.iter().find(|s| !(100..=999).contains(*s)) {
            return Err(format!("--expect-status {status} is not an HTTP status"));
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
}
