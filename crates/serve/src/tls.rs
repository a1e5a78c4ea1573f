//! TLS for every server (rustls on aws-lc-rs): the certificate and key from PEM files, TLS 1.3 and 1.2,
//! ALPN `h2` and `http/1.1` (`http/1.1` alone with HTTP/2 off), session resumption by tickets and by a session
//! cache (each can be turned off), and the certificate swapped in place on SIGHUP.
//!
//! Why a resolver rather than a fixed certificate in the config: a reload replaces what new handshakes get
//! without rebuilding the config, so the ticket key and the session cache survive it, and connections already
//! open keep the keys they negotiated. A reload that fails (a half-written file, a key from another pair)
//! keeps the old certificate and says why.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, NoServerSessionStorage, ResolvesServerCert, ServerSessionMemoryCache};
use rustls::sign::CertifiedKey;
use rustls::{ServerConfig, version};
use tokio_rustls::TlsAcceptor;

/// Sessions the server remembers for resumption by session ID (TLS 1.2) or stateful ticket (TLS 1.3 with
/// tickets off); shared by all workers. rustls's default is 256, which a benchmark's hundreds of connections
/// would cycle through before any resumed.
const SESSION_CACHE_ENTRIES: usize = 16 * 1024;

/// What `--tls-cert`, `--tls-key`, `--tls-tickets` and `--tls-session-cache` asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// PEM: the server's certificate first, then any intermediates.
    pub cert: PathBuf,
    /// PEM: the private key (PKCS#8, SEC1 or PKCS#1).
    pub key: PathBuf,
    /// Stateless TLS 1.3 tickets and TLS 1.2 session tickets.
    pub tickets: bool,
    /// A server-side session cache (TLS 1.2 session IDs, TLS 1.3 stateful tickets).
    pub session_cache: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{path}: {problem}")]
    File { path: PathBuf, problem: String },
    #[error("{key} does not match the certificate in {cert}")]
    KeyMismatch { cert: PathBuf, key: PathBuf },
    #[error("TLS setup: {0}")]
    Setup(rustls::Error),
}

/// A loaded TLS configuration: what every worker's acceptor uses, and the handle a reload goes through.
pub struct Tls {
    settings: TlsSettings,
    provider: Arc<CryptoProvider>,
    current: Arc<CurrentCert>,
    config: Arc<ServerConfig>,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls").field("settings", &self.settings).finish_non_exhaustive()
    }
}

impl Tls {
    /// Reads and checks the files: each readable and holding what it should, the key matching the certificate.
    /// With `http2`, ALPN offers `h2` before `http/1.1`; without, `http/1.1` alone, so a client that offers
    /// only `h2` is refused with an alert (no_application_protocol) rather than answered in a protocol it did
    /// not ask for.
    pub fn load(settings: &TlsSettings, http2: bool) -> Result<Tls, TlsError> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let current = Arc::new(CurrentCert(RwLock::new(certified_key(settings, &provider)?)));
        let mut config = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&version::TLS13, &version::TLS12])
            .map_err(TlsError::Setup)?
            .with_no_client_auth()
            .with_cert_resolver(current.clone());
        config.alpn_protocols =
            if http2 { vec![b"h2".to_vec(), b"http/1.1".to_vec()] } else { vec![b"http/1.1".to_vec()] };
        config.session_storage = if settings.session_cache {
            ServerSessionMemoryCache::new(SESSION_CACHE_ENTRIES)
        } else {
            Arc::new(NoServerSessionStorage {})
        };
        if settings.tickets {
            config.ticketer = rustls::crypto::aws_lc_rs::Ticketer::new().map_err(TlsError::Setup)?;
        }
        if !settings.tickets && !settings.session_cache {
            // Nothing could honour a ticket, so none is sent.
            config.send_tls13_tickets = 0;
        }
        Ok(Tls { settings: settings.clone(), provider, current, config: Arc::new(config) })
    }

    /// Reads the files again and, if they hold a good pair, serves it to every handshake from now on.
    pub fn reload(&self) -> Result<(), TlsError> {
        let fresh = certified_key(&self.settings, &self.provider)?;
        *self.current.0.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = fresh;
        Ok(())
    }

    pub fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(self.config.clone())
    }
}

/// The certificate new handshakes get; replaced whole by a reload.
#[derive(Debug)]
struct CurrentCert(RwLock<Arc<CertifiedKey>>);

impl ResolvesServerCert for CurrentCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone())
    }
}

fn certified_key(settings: &TlsSettings, provider: &CryptoProvider) -> Result<Arc<CertifiedKey>, TlsError> {
    let chain = read_chain(&settings.cert)?;
    let key_der = read_key(&settings.key)?;
    let key = provider
        .key_provider
        .load_private_key(key_der)
        .map_err(|e| TlsError::File { path: settings.key.clone(), problem: format!("unusable private key: {e}") })?;
    let certified = CertifiedKey::new(chain, key);
    match certified.keys_match() {
        Ok(()) => Ok(Arc::new(certified)),
        Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch)) => {
            Err(TlsError::KeyMismatch { cert: settings.cert.clone(), key: settings.key.clone() })
        }
        Err(e) => Err(TlsError::File { path: settings.cert.clone(), problem: format!("unusable certificate: {e}") }),
    }
}

fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(path)?;
    let chain = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::File { path: path.to_path_buf(), problem: format!("bad PEM: {e}") })?;
    if chain.is_empty() {
        return Err(TlsError::File { path: path.to_path_buf(), problem: "no CERTIFICATE block in it".into() });
    }
    Ok(chain)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = read(path)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        let problem = match e {
            rustls::pki_types::pem::Error::NoItemsFound => "no PRIVATE KEY block in it".to_string(),
            other => format!("bad PEM: {other}"),
        };
        TlsError::File { path: path.to_path_buf(), problem }
    })
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|e| TlsError::File { path: path.to_path_buf(), problem: format!("cannot read: {e}") })
}
