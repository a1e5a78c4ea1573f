//! The probe set: requests every runtime must answer exactly as the reference (rust) does before it is
//! timed, what an answer is, and how two answers differ.

use std::time::Duration;

use crate::system::http;

/// What a probe got back: the parts the runtimes must agree on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub content_type: Option<String>,
    /// Content-Encoding as sent; `body` is decoded.
    pub encoding: Option<String>,
    pub body: Vec<u8>,
}

impl Answer {
    /// An unencoded answer.
    pub fn new(status: u16, content_type: &str, body: &[u8]) -> Answer {
        Answer { status, content_type: Some(content_type.into()), encoding: None, body: body.to_vec() }
    }
}

/// An answer, or why there was none.
pub type Outcome = Result<Answer, String>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub label: String,
    pub method: &'static str,
    pub target: String,
    /// JSON request body.
    pub body: Option<Vec<u8>>,
    /// Request headers besides Host and Connection (Accept-Encoding: the answer is decoded before it is
    /// compared, since gzip bytes differ between libraries; the encoding itself is compared).
    pub headers: &'static [(&'static str, &'static str)],
    /// False where bodies legitimately differ (validation messages); status and content type still count.
    pub compare_body: bool,
    /// Only the status counts: error pages whose form is each framework's own (Koa's text/plain 404).
    pub status_only: bool,
    /// What the contract itself says, checked for every runtime (the reference included).
    pub contract: Option<Answer>,
}

impl Probe {
    pub fn get(label: impl Into<String>, target: impl Into<String>) -> Probe {
        Probe {
            label: label.into(),
            method: "GET",
            target: target.into(),
            body: None,
            headers: &[],
            compare_body: true,
            status_only: false,
            contract: None,
        }
    }

    /// The same probe with these request headers.
    pub fn with_headers(self, headers: &'static [(&'static str, &'static str)]) -> Probe {
        Probe { headers, ..self }
    }

    pub fn request_line(&self) -> String {
        format!("{} {}", self.method, self.target)
    }

    /// Sends the probe on a fresh connection; a gzip answer is decoded.
    pub fn ask(&self, endpoint: &http::Endpoint) -> Outcome {
        let body = self.body.as_deref().map(|b| ("application/json", b));
        let r = http::request(endpoint, self.method, &self.target, body, self.headers, Duration::from_secs(10))
            .map_err(|e| format!("request failed: {e}"))?;
        let encoding = r.header("content-encoding").map(str::to_ascii_lowercase);
        let content_type = r.header("content-type").map(str::to_string);
        let body = match encoding.as_deref() {
            None | Some("identity") => r.body,
            Some("gzip") => {
                let mut out = Vec::new();
                std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(r.body.as_slice()), &mut out)
                    .map_err(|e| format!("the gzip body does not decode: {e}"))?;
                out
            }
            // Nothing compare loads takes other encodings; an answer in one is a difference, not a decode.
            Some(_) => r.body,
        };
        Ok(Answer { status: r.status, content_type, encoding, body })
    }
}

/// How `got` differs from `want` for this probe, or `None` when they agree.
pub fn difference(probe: &Probe, got: &Outcome, want: &Outcome, content_type_essence: bool) -> Option<String> {
    let (got, want) = match (got, want) {
        (Err(e), _) => return Some(e.clone()),
        (Ok(_), Err(e)) => return Some(format!("the reference has no answer ({e})")),
        (Ok(g), Ok(w)) => (g, w),
    };
    let mut parts = Vec::new();
    if got.status != want.status {
        parts.push(format!("status {} (want {})", got.status, want.status));
    }
    if probe.status_only {
        return if parts.is_empty() { None } else { Some(parts.join("; ")) };
    }
    // RFC 9239: application/javascript is an obsolete alias of text/javascript (koa-send still sends it).
    let essence = |ct: &Option<String>| {
        ct.as_deref().map(|c| match c.split(';').next().unwrap_or("").trim().to_ascii_lowercase() {
            js if js == "application/javascript" => "text/javascript".to_string(),
            other => other,
        })
    };
    let ct_differs = if content_type_essence {
        essence(&got.content_type) != essence(&want.content_type)
    } else {
        got.content_type != want.content_type
    };
    if ct_differs {
        parts.push(format!("content-type {:?} (want {:?})", got.content_type, want.content_type));
    }
    if got.encoding != want.encoding {
        parts.push(format!("content-encoding {:?} (want {:?})", got.encoding, want.encoding));
    }
    if probe.compare_body && got.body != want.body {
        parts.push(first_difference(&got.body, &want.body));
    }
    if parts.is_empty() { None } else { Some(parts.join("; ")) }
}

/// Where two bodies part, with a little context from each.
pub fn first_difference(got: &[u8], want: &[u8]) -> String {
    let at = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()));
    let around = |b: &[u8]| {
        let lo = at.saturating_sub(30);
        let hi = (at + 40).min(b.len());
        String::from_utf8_lossy(&b[lo.min(hi)..hi]).into_owned()
    };
    format!(
        "body differs at byte {at} (got {} bytes, want {}): got …{:?}… want …{:?}…",
        got.len(),
        want.len(),
        around(got),
        around(want)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_difference_names_status_type_or_byte() {
        let probe = Probe::get("p", "/p");
        let a = |status, ct: &str, body: &str| -> Outcome { Ok(Answer::new(status, ct, body.as_bytes())) };
        assert_eq!(
            difference(&probe, &a(200, "application/json", "{}"), &a(200, "application/json", "{}"), false),
            None
        );
        let d = difference(
            &probe,
            &a(200, "application/json", r#"{"a":2}"#),
            &a(200, "application/json", r#"{"a":1}"#),
            false,
        );
        assert!(d.is_some_and(|d| d.contains("byte 5")));
        let charset = a(200, "application/json; charset=utf-8", "{}");
        assert!(difference(&probe, &charset, &a(200, "application/json", "{}"), false).is_some());
        assert_eq!(difference(&probe, &charset, &a(200, "application/json", "{}"), true), None);
        assert!(
            difference(&probe, &a(500, "application/json", "{}"), &a(200, "application/json", "{}"), true)
                .is_some_and(|d| d.contains("status 500 (want 200)"))
        );
        assert!(difference(&probe, &Err("refused".into()), &a(200, "x", ""), false).is_some());
    }
}
