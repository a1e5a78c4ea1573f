//! The TLS client configuration a run's [`TlsSettings`] ask for, built once before the workers start: the
//! trust anchors (a CA file, or `--insecure`), exactly the versions, cipher suites and key-exchange groups
//! asked for (so every server under test negotiates the same thing), ALPN `http/1.1`, and session resumption
//! on or off. Each worker then takes its own copy ([`for_worker`]) with its own session store, so no lock is
//! shared between threads and "resumed after the first handshake" holds per worker.

use std::path::PathBuf;
use std::sync::Arc;

use certs::trust::{CaFileError, RootsError};
use rustls::client::Resumption;
use rustls::crypto::{CryptoProvider, aws_lc_rs};
use rustls::pki_types::{InvalidDnsNameError, ServerName};
use rustls::{ClientConfig, SupportedProtocolVersion};

use crate::session_store::SessionStore;
use crate::settings::{TlsSettings, TlsVersion, Trust};

/// What a worker needs to open TLS connections to the target.
#[derive(Debug, Clone)]
pub struct TlsClient {
    pub config: Arc<ClientConfig>,
    /// SNI and the certificate's name: the URL's host (an IP address sends no SNI, as rustls does).
    pub server_name: ServerName<'static>,
    pub resume: bool,
}

/// Why the TLS flags give no client configuration. Each message is one line for the user and quotes the
/// cause, so the cause is not also a `source` (a chain printer such as anyhow's `{:#}` would say it twice).
#[derive(Debug, thiserror::Error)]
pub enum TlsConfigError {
    #[error("{host:?} is not a TLS server name: {error}")]
    BadServerName { host: String, error: InvalidDnsNameError },
    #[error("the TLS flags ask for nothing that can be offered: {0}")]
    NothingToOffer(rustls::Error),
    #[error("cannot read --cacert {}: {why}", path.display())]
    CaFileUnreadable { path: PathBuf, why: String },
    #[error("--cacert {}: no CA certificate in it", path.display())]
    NoCaCertificate { path: PathBuf },
    /// A `--tls-cipher` or `--tls-group` name that aws-lc-rs does not have; `known` lists the names it has.
    #[error("{flag} {asked:?} is not one of {}", known.join(", "))]
    UnknownName { flag: &'static str, asked: String, known: Vec<String> },
    #[error("--tls-cipher offers no suite for --tls-version {}", version.name())]
    NoSuiteForVersion { version: TlsVersion },
}

/// The client configuration for `tls` against `host`, offering ALPN `h2` alone with `http2` (a server that
/// would rather speak HTTP/1.1 then says so by selecting nothing or refusing, and the run reports it) and
/// `http/1.1` alone without.
pub fn build(tls: &TlsSettings, host: &str, http2: bool) -> Result<TlsClient, TlsConfigError> {
    let server_name = ServerName::try_from(host.to_string())
        .map_err(|error| TlsConfigError::BadServerName { host: host.to_string(), error })?;
    let provider = Arc::new(provider(tls)?);
    let versions: &[&'static SupportedProtocolVersion] = match tls.version {
        Some(TlsVersion::V1_2) => &[&rustls::version::TLS12],
        Some(TlsVersion::V1_3) => &[&rustls::version::TLS13],
        None => rustls::DEFAULT_VERSIONS,
    };
    let builder = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .map_err(TlsConfigError::NothingToOffer)?;
    let trust = match &tls.trust {
        Trust::CaFile(path) => certs::trust::Trust::CaFile(path.clone()),
        Trust::Insecure => certs::trust::Trust::Insecure,
    };
    let mut config = certs::trust::client_config(builder, &trust).map_err(|CaFileError { path, why }| match why {
        RootsError::Unreadable(why) => TlsConfigError::CaFileUnreadable { path, why },
        RootsError::NoCertificate => TlsConfigError::NoCaCertificate { path },
    })?;
    config.alpn_protocols = vec![if http2 { b"h2".to_vec() } else { b"http/1.1".to_vec() }];
    config.resumption = Resumption::disabled();
    Ok(TlsClient { config: Arc::new(config), server_name, resume: tls.resume })
}

/// A worker's own copy of the configuration: with resumption on, a session store of its own, sized for its
/// `connections`.
pub fn for_worker(client: &TlsClient, connections: usize) -> TlsClient {
    if !client.resume {
        return client.clone();
    }
    let mut config = (*client.config).clone();
    config.resumption = Resumption::store(Arc::new(SessionStore::for_connections(connections)));
    TlsClient { config: Arc::new(config), ..client.clone() }
}

/// aws-lc-rs with the suites and groups asked for. Default: its suites, and X25519 then P-256. Only the first
/// group's key share is sent, so a TLS 1.3 server agrees on X25519 without another round trip; P-256 is
/// listed because in TLS 1.2 the same list also says which curves the client takes for an ECDSA
/// certificate, and OpenSSL refuses a P-256 certificate to a client that lists X25519 alone ("no shared
/// cipher").
fn provider(tls: &TlsSettings) -> Result<CryptoProvider, TlsConfigError> {
    let mut provider = aws_lc_rs::default_provider();
    if !tls.ciphers.is_empty() {
        provider.cipher_suites = pick(&tls.ciphers, aws_lc_rs::ALL_CIPHER_SUITES, "--tls-cipher", |s| {
            s.suite().as_str().unwrap_or("?").to_string()
        })?;
    }
    let groups: Vec<String> =
        if tls.groups.is_empty() { vec!["x25519".into(), "secp256r1".into()] } else { tls.groups.clone() };
    provider.kx_groups =
        pick(&groups, aws_lc_rs::ALL_KX_GROUPS, "--tls-group", |g| g.name().as_str().unwrap_or("?").to_string())?;
    if let Some(version) = tls.version {
        let wanted = match version {
            TlsVersion::V1_2 => rustls::ProtocolVersion::TLSv1_2,
            TlsVersion::V1_3 => rustls::ProtocolVersion::TLSv1_3,
        };
        if !provider.cipher_suites.iter().any(|s| s.version().version == wanted) {
            return Err(TlsConfigError::NoSuiteForVersion { version });
        }
    }
    Ok(provider)
}

/// The items of `all` named in `names` (case-insensitive; `-` and `_` alike), in the order asked.
fn pick<T: Copy>(
    names: &[String],
    all: &[T],
    flag: &'static str,
    name: impl Fn(&T) -> String,
) -> Result<Vec<T>, TlsConfigError> {
    let norm = |s: &str| s.to_ascii_lowercase().replace('-', "_");
    names
        .iter()
        .map(|asked| {
            all.iter().find(|item| norm(&name(item)) == norm(asked)).copied().ok_or_else(|| {
                TlsConfigError::UnknownName { flag, asked: asked.clone(), known: all.iter().map(&name).collect() }
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(version: Option<TlsVersion>, ciphers: &[&str], groups: &[&str]) -> TlsSettings {
        TlsSettings {
            trust: Trust::Insecure,
            resume: true,
            version,
            ciphers: ciphers.iter().map(|s| s.to_string()).collect(),
            groups: groups.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn offers_exactly_what_was_asked() {
        let p = provider(&settings(None, &[], &[])).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            p.kx_groups.iter().map(|g| g.name()).collect::<Vec<_>>(),
            [rustls::NamedGroup::X25519, rustls::NamedGroup::secp256r1]
        );
        assert_eq!(p.cipher_suites.len(), aws_lc_rs::DEFAULT_CIPHER_SUITES.len());
        let p = provider(&settings(None, &["tls13_aes_128_gcm_sha256"], &["SECP256R1", "x25519"]))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            p.cipher_suites.iter().map(|s| s.suite()).collect::<Vec<_>>(),
            [rustls::CipherSuite::TLS13_AES_128_GCM_SHA256]
        );
        assert_eq!(
            p.kx_groups.iter().map(|g| g.name()).collect::<Vec<_>>(),
            [rustls::NamedGroup::secp256r1, rustls::NamedGroup::X25519]
        );
    }

    /// The error's text, or "" when there was none.
    fn said<T>(result: Result<T, TlsConfigError>) -> String {
        result.err().map(|e| e.to_string()).unwrap_or_default()
    }

    #[test]
    fn unknown_names_and_impossible_mixes_are_refused() {
        let e = provider(&settings(None, &["TLS13_NOPE"], &[])).err();
        assert!(
            matches!(&e, Some(TlsConfigError::UnknownName { flag: "--tls-cipher", asked, .. }) if asked == "TLS13_NOPE")
        );
        let e = e.map(|e| e.to_string()).unwrap_or_default();
        assert!(e.starts_with("--tls-cipher \"TLS13_NOPE\" is not one of TLS13_AES_256_GCM_SHA384"), "{e}");
        let e = said(provider(&settings(None, &[], &["p999"])));
        assert!(e.contains("--tls-group \"p999\" is not one of"), "{e}");
        let e = provider(&settings(Some(TlsVersion::V1_2), &["TLS13_AES_128_GCM_SHA256"], &[])).err();
        assert!(matches!(e, Some(TlsConfigError::NoSuiteForVersion { version: TlsVersion::V1_2 })));
        assert_eq!(e.map(|e| e.to_string()).as_deref(), Some("--tls-cipher offers no suite for --tls-version 1.2"));
    }

    #[test]
    fn a_missing_or_empty_ca_file_is_named() {
        let mut tls = settings(None, &[], &[]);
        tls.trust = Trust::CaFile("/nonexistent/ca.pem".into());
        let e = build(&tls, "localhost", false).err();
        assert!(matches!(e, Some(TlsConfigError::CaFileUnreadable { .. })), "{e:?}");
        let e = said(build(&tls, "localhost", false));
        assert!(e.starts_with("cannot read --cacert /nonexistent/ca.pem"), "{e}");
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "").unwrap_or_else(|e| panic!("{e}"));
        tls.trust = Trust::CaFile(empty.clone());
        let e = said(build(&tls, "localhost", false));
        assert_eq!(e, format!("--cacert {}: no CA certificate in it", empty.display()));
    }

    #[test]
    fn each_worker_gets_its_own_session_store() {
        let client = build(&settings(None, &[], &[]), "127.0.0.1", false).unwrap_or_else(|e| panic!("{e}"));
        let (a, b) = (for_worker(&client, 4), for_worker(&client, 4));
        assert!(!Arc::ptr_eq(&a.config, &b.config));
        assert_eq!(client.config.alpn_protocols, [b"http/1.1".to_vec()]);
    }

    #[test]
    fn http2_offers_h2_alone() {
        let client = build(&settings(None, &[], &[]), "127.0.0.1", true).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(client.config.alpn_protocols, [b"h2".to_vec()]);
    }
}
