//! What a TLS handshake negotiated, or why it failed, in the names the report uses: the TLS engine (`tls`)
//! says it, the worker counts it (`stats`).

use rustls::{ClientConnection, HandshakeKind, ProtocolVersion};

/// One finished handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handshake {
    /// `TLSv1.3`, `TLSv1.2`.
    pub version: &'static str,
    /// rustls's name, e.g. `TLS13_AES_128_GCM_SHA256`.
    pub cipher_suite: &'static str,
    /// e.g. `X25519`; `none` when no key exchange took place (a resumed TLS 1.2 session).
    pub group: &'static str,
    /// The protocol the server chose, `http/1.1`, or `none` when it chose none.
    pub alpn: &'static str,
    pub kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Full,
    /// A full handshake that took a second ClientHello (the server wanted another key-exchange group).
    FullWithHelloRetry,
    Resumed,
}

impl Handshake {
    /// What `conn`, whose handshake just finished, negotiated.
    pub fn of(conn: &ClientConnection) -> Handshake {
        let version = match conn.protocol_version() {
            Some(ProtocolVersion::TLSv1_3) => "TLSv1.3",
            Some(ProtocolVersion::TLSv1_2) => "TLSv1.2",
            Some(other) => other.as_str().unwrap_or("unknown"),
            None => "unknown",
        };
        let cipher_suite = conn.negotiated_cipher_suite().and_then(|s| s.suite().as_str()).unwrap_or("unknown");
        let group = conn.negotiated_key_exchange_group().and_then(|g| g.name().as_str()).unwrap_or("none");
        // The server can only choose what was offered: http/1.1 alone, or h2 alone with --http2.
        let alpn = match conn.alpn_protocol() {
            Some(b"http/1.1") => "http/1.1",
            Some(b"h2") => "h2",
            Some(_) => "other",
            None => "none",
        };
        let kind = match conn.handshake_kind() {
            Some(HandshakeKind::Resumed) => Kind::Resumed,
            Some(HandshakeKind::FullWithHelloRetryRequest) => Kind::FullWithHelloRetry,
            _ => Kind::Full,
        };
        Handshake { version, cipher_suite, group, alpn, kind }
    }
}

/// Why a TLS connection failed: `reason` is the short key failures are counted under, `detail` the whole
/// message (for the run's last error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub reason: String,
    pub detail: String,
}

impl Failure {
    /// rustls's error, counted by its kind and first detail: `invalid certificate: UnknownIssuer`, `alert
    /// received: HandshakeFailure`, `invalid message: InvalidContentType` (plaintext from the server).
    pub fn of(e: &rustls::Error) -> Failure {
        Failure { reason: reason(&format!("{e:?}")), detail: e.to_string() }
    }

    /// A failure of loadgen's own finding (a timeout, a close mid-handshake).
    pub fn new(reason: &str) -> Failure {
        Failure { reason: reason.to_string(), detail: reason.to_string() }
    }
}

/// `InvalidCertificate(NotValidForNameContext { expected: … })` → `invalid certificate: NotValidForNameContext`:
/// the variant in words and the name of the first thing inside it, so a failure counts under a key that does
/// not grow with the detail.
fn reason(debug: &str) -> String {
    let outer_end = debug.find(|c: char| !c.is_ascii_alphanumeric()).unwrap_or(debug.len());
    let mut words = String::new();
    for c in debug[..outer_end].chars() {
        if c.is_ascii_uppercase() && !words.is_empty() {
            words.push(' ');
        }
        words.push(c.to_ascii_lowercase());
    }
    let inner = debug[outer_end..].trim_start_matches(['(', '{', ' ']);
    let inner = &inner[..inner.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(inner.len())];
    if inner.is_empty() { words } else { format!("{words}: {inner}") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::{AlertDescription, CertificateError};

    #[test]
    fn failures_count_under_short_stable_reasons() {
        let of = |e: rustls::Error| Failure::of(&e).reason;
        assert_eq!(
            of(rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer)),
            "invalid certificate: UnknownIssuer"
        );
        assert_eq!(
            of(rustls::Error::AlertReceived(AlertDescription::HandshakeFailure)),
            "alert received: HandshakeFailure"
        );
        assert_eq!(of(rustls::Error::DecryptError), "decrypt error");
        assert_eq!(of(rustls::Error::General("x y".into())), "general");
        assert_eq!(
            reason("InvalidCertificate(NotValidForNameContext { expected: X })"),
            "invalid certificate: NotValidForNameContext"
        );
    }
}
