//! The `https://` side of probe: a rustls client over the same blocking socket as plain HTTP.
//!
//! Why rustls rather than a TLS-less check of the port: a health check of an HTTPS server must prove what a
//! client needs, a completed handshake and an HTTP answer inside it; an open port proves neither. Why
//! `--insecure` exists at all: a liveness check from inside the container connects to 127.0.0.1, a name the
//! server's certificate need not carry and a CA the image need not hold; the handshake (and its signature,
//! made with the certificate's key) still has to complete, which is what tells a live server from a dead one.

use std::sync::Arc;

use certs::trust::{CaFileError, RootsError};
use rustls::client::Resumption;
use rustls::crypto::aws_lc_rs;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, StreamOwned};

use crate::{Bounded, Error};

/// What an `https://` probe trusts: `--cacert PATH` or `--insecure` (the same choice loadgen offers).
pub use certs::trust::Trust;

/// The TLS stream the GET is sent on.
pub(crate) type Stream = StreamOwned<ClientConnection, Bounded>;

/// Runs the handshake on `sock` (its deadline bounds every read and write) with `config` (from [`config`]),
/// and returns the stream, or why the handshake failed. `host` is the URL's host without brackets: SNI and
/// the name the certificate must carry (an IP address sends no SNI and must be in the certificate's IP SANs).
pub(crate) fn connect(sock: Bounded, host: &str, config: Arc<ClientConfig>) -> Result<Stream, Error> {
    let name = ServerName::try_from(host.to_string())
        .map_err(|e| Error::Url(format!("{host:?} is not a TLS server name: {e}")))?;
    let conn = ClientConnection::new(config, name).map_err(Error::Tls)?;
    let mut stream = StreamOwned::new(conn, sock);
    // The handshake on its own, before the request, so its failures are named as such.
    while stream.conn.is_handshaking() {
        stream.conn.complete_io(&mut stream.sock).map_err(|e| crate::io_error(e, stream.sock.timeout, true))?;
    }
    Ok(stream)
}

/// rustls's defaults on aws-lc-rs (the provider the workspace builds with): TLS 1.3 and 1.2, ALPN
/// `http/1.1` (the servers speak nothing else), no session resumption (one connection per process).
pub(crate) fn config(trust: &Trust) -> Result<Arc<ClientConfig>, Error> {
    let provider = Arc::new(aws_lc_rs::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(Error::Tls)?;
    let mut config = certs::trust::client_config(builder, trust).map_err(|CaFileError { path, why }| {
        let why = match why {
            RootsError::Unreadable(why) => why,
            RootsError::NoCertificate => "no PEM certificate in it".into(),
        };
        Error::CaFile(path, why)
    })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config.resumption = Resumption::disabled();
    Ok(Arc::new(config))
}

/// A word on the commonest handshake failures, after rustls's own text.
pub(crate) fn hint(e: &rustls::Error) -> &'static str {
    use rustls::{CertificateError, InvalidMessage};
    match e {
        rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer) => " (no CA in --cacert issued it)",
        rustls::Error::InvalidCertificate(CertificateError::BadSignature) => {
            " (a CA in --cacert has its issuer's name but did not sign it)"
        }
        rustls::Error::InvalidMessage(InvalidMessage::InvalidContentType) => {
            " (the answer is not TLS: a plain-HTTP server?)"
        }
        _ => "",
    }
}
