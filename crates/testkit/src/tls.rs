//! The TLS side of tests' HTTPS connections (`http::Conn::open_tls`): a rustls client that trusts one
//! CA (a fresh [`certs::Bundle`]'s), offers ALPN `http/1.1`, names the server `localhost`, and offers one
//! key-exchange group, X25519, as compare's loader does: offered rustls's default list, Bun's BoringSSL
//! answers with a HelloRetryRequest for X25519MLKEM768 where rustls and Node take X25519, so the runtimes
//! would not do the same handshake.

use std::io;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore};

/// A client configuration, shared by every connection made with it: with resumption on, the second
/// connection resumes the first one's session.
#[derive(Clone)]
pub struct Client {
    config: Arc<ClientConfig>,
}

impl Client {
    /// Trusts `ca_pem` only; TLS 1.3 and 1.2; sessions kept for resumption.
    pub fn new(ca_pem: &str) -> Client {
        Client::build(ca_pem, &[&rustls::version::TLS13, &rustls::version::TLS12], true)
    }

    /// The same, with session resumption off: every connection makes a full handshake.
    pub fn without_resumption(ca_pem: &str) -> Client {
        Client::build(ca_pem, &[&rustls::version::TLS13, &rustls::version::TLS12], false)
    }

    /// The same, offering TLS 1.2 only.
    pub fn tls12(ca_pem: &str) -> Client {
        Client::build(ca_pem, &[&rustls::version::TLS12], true)
    }

    fn build(ca_pem: &str, versions: &[&'static rustls::SupportedProtocolVersion], resume: bool) -> Client {
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            roots.add(cert.expect("CA PEM")).expect("a usable CA certificate");
        }
        let provider = Arc::new(rustls::crypto::CryptoProvider {
            kx_groups: vec![rustls::crypto::aws_lc_rs::kx_group::X25519],
            ..rustls::crypto::aws_lc_rs::default_provider()
        });
        let mut config = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(versions)
            .expect("protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        if !resume {
            config.resumption = rustls::client::Resumption::disabled();
        }
        Client { config: Arc::new(config) }
    }

    /// The same configuration offering `protocols` in ALPN instead of `http/1.1` (an HTTP/2 client's, say).
    pub fn config_with_alpn(&self, protocols: &[&[u8]]) -> Arc<ClientConfig> {
        let mut config = (*self.config).clone();
        config.alpn_protocols = protocols.iter().map(|p| p.to_vec()).collect();
        Arc::new(config)
    }

    /// A new client session for `localhost`, before its handshake.
    pub fn connection(&self) -> io::Result<ClientConnection> {
        let name = ServerName::try_from("localhost").expect("a valid DNS name");
        ClientConnection::new(self.config.clone(), name).map_err(io::Error::other)
    }
}
