//! How a client trusts a server's certificate: the anchors of a PEM file (`--cacert` in loadgen and probe),
//! or any certificate at all (`--insecure`). In one place because an insecure verifier must still check the
//! handshake's signature, and a second copy is one that could forget to. [`client_config`] is the step both
//! clients share; the versions, ALPN and resumption around it stay each client's own.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::WantsClientCert;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, ConfigBuilder, DigitallySignedStruct, RootCertStore, SignatureScheme, WantsVerifier};

/// What a client trusts: `--cacert PATH` or `--insecure`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trust {
    /// Every certificate in the PEM file is a trust anchor, so a CA file works, and so does a chain file that
    /// ends with the CA that issued it. A file with only the server's own certificate does not: webpki never
    /// takes the presented certificate itself as its anchor.
    CaFile(PathBuf),
    /// Any certificate, for any name; the handshake (and its signature) must still complete.
    Insecure,
}

/// `builder` (the caller's provider and protocol versions) given `trust`'s verifier and no client
/// certificate: the caller then sets ALPN and resumption on the config. `--insecure`'s verifier checks
/// signatures with the builder's own provider, so an insecure handshake costs what a verified one would, minus
/// the chain check.
pub fn client_config(
    builder: ConfigBuilder<ClientConfig, WantsVerifier>,
    trust: &Trust,
) -> Result<ClientConfig, CaFileError> {
    let builder: ConfigBuilder<ClientConfig, WantsClientCert> = match trust {
        Trust::CaFile(path) => builder
            .with_root_certificates(roots_from_pem_file(path).map_err(|why| CaFileError { path: path.clone(), why })?),
        Trust::Insecure => {
            let algorithms = builder.crypto_provider().signature_verification_algorithms;
            builder.dangerous().with_custom_certificate_verifier(any_certificate(algorithms))
        }
    };
    Ok(builder.with_no_client_auth())
}

/// Why a PEM file gave no trust anchor.
#[derive(Debug)]
pub enum RootsError {
    /// Unreadable, or not PEM.
    Unreadable(String),
    /// Read, but no certificate in it.
    NoCertificate,
}

/// A `--cacert` file that gave no trust anchor: which, and why (each client words it for its own flag).
#[derive(Debug)]
pub struct CaFileError {
    pub path: PathBuf,
    pub why: RootsError,
}

/// Every certificate in the PEM file at `path` as a trust anchor: a CA file, or a chain ending with its CA.
fn roots_from_pem_file(path: &Path) -> Result<RootCertStore, RootsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| RootsError::Unreadable(e.to_string()))?;
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(RootsError::NoCertificate);
    }
    Ok(roots)
}

/// A verifier that takes any certificate chain, for any name, but checks the handshake's signature with the
/// presented certificate's key as usual: the server must hold that key, and the handshake costs the client
/// what a verified one would, minus the chain check.
fn any_certificate(algorithms: WebPkiSupportedAlgorithms) -> Arc<dyn ServerCertVerifier> {
    Arc::new(AnyCertificate(algorithms))
}

#[derive(Debug)]
struct AnyCertificate(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Bundle, LOOPBACK_NAMES};
    use rustls::crypto::aws_lc_rs;

    fn builder() -> ConfigBuilder<ClientConfig, WantsVerifier> {
        ClientConfig::builder_with_provider(Arc::new(aws_lc_rs::default_provider()))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .expect("TLS 1.3 on aws-lc-rs")
    }

    #[test]
    fn a_ca_file_a_chain_file_or_insecure_gives_a_config() {
        let dir = tempfile::tempdir().expect("temp dir");
        let files = Bundle::generate(LOOPBACK_NAMES).expect("generate").write(dir.path()).expect("write");
        for trust in [Trust::CaFile(files.ca), Trust::CaFile(files.chain), Trust::Insecure] {
            let config = client_config(builder(), &trust);
            assert!(config.is_ok(), "{trust:?}: {:?}", config.err());
        }
    }

    #[test]
    fn a_ca_file_without_a_certificate_or_missing_is_refused() {
        let dir = tempfile::tempdir().expect("temp dir");
        let files = Bundle::generate(LOOPBACK_NAMES).expect("generate").write(dir.path()).expect("write");
        let refused = client_config(builder(), &Trust::CaFile(files.key));
        assert!(matches!(refused, Err(CaFileError { why: RootsError::NoCertificate, .. })), "{refused:?}");
        let missing = client_config(builder(), &Trust::CaFile(dir.path().join("absent.pem")));
        assert!(matches!(missing, Err(CaFileError { why: RootsError::Unreadable(_), .. })), "{missing:?}");
    }
}
