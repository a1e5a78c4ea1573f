//! How a client trusts a server's certificate: the anchors of a PEM file (`--cacert` in loadgen and probe),
//! or any certificate at all (`--insecure`). In one place because an insecure verifier must still check the
//! handshake's signature, and a second copy is one that could forget to.

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};

/// Why a PEM file gave no trust anchor.
#[derive(Debug)]
pub enum RootsError {
    /// Unreadable, or not PEM.
    Unreadable(String),
    /// Read, but no certificate in it.
    NoCertificate,
}

/// Every certificate in the PEM file at `path` as a trust anchor: a CA file, or a chain ending with its CA.
pub fn roots_from_pem_file(path: &Path) -> Result<RootCertStore, RootsError> {
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
pub fn any_certificate(algorithms: WebPkiSupportedAlgorithms) -> Arc<dyn ServerCertVerifier> {
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
