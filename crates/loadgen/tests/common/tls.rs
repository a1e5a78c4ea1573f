//! TLS for the test servers: rustls's server over the same blocking sockets and threads ([`super::Server`]'s
//! `start_tls`), with a fresh ECDSA P-256 CA and certificate per test ([`certs::Bundle`]), so loadgen's
//! client meets a real TLS stack and a real chain.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{HandshakeKind, ServerConfig, ServerConnection, StreamOwned, SupportedProtocolVersion};

use super::{Ran, Reply, Request, Server, run};

/// A CA and a server certificate for 127.0.0.1, localhost and ::1, written to a temp dir.
pub struct Certs {
    pub bundle: certs::Bundle,
    /// `ca.pem`: what `--cacert` takes.
    pub ca: PathBuf,
    /// `cert.pem` (the server's chain) and `key.pem`, for servers started as processes.
    pub chain: PathBuf,
    pub key: PathBuf,
    _dir: tempfile::TempDir,
}

impl Certs {
    pub fn new() -> Certs {
        let bundle = certs::Bundle::generate(certs::LOOPBACK_NAMES).expect("generate a certificate bundle");
        let dir = tempfile::tempdir().expect("temp dir");
        let files = bundle.write(dir.path()).expect("write the certificate bundle");
        Certs { bundle, ca: files.ca, chain: files.chain, key: files.key, _dir: dir }
    }

    pub fn ca(&self) -> &str {
        self.ca.to_str().expect("UTF-8 temp path")
    }

    /// A server configuration with this chain and key: the versions given, ALPN http/1.1, rustls's defaults
    /// otherwise (a session cache and two TLS 1.3 tickets per connection: resumption works).
    pub fn server_config(&self, versions: &[&'static SupportedProtocolVersion]) -> Arc<ServerConfig> {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(self.bundle.chain_pem.as_bytes())
            .collect::<Result<_, _>>()
            .expect("the chain parses");
        let key = PrivateKeyDer::from_pem_slice(self.bundle.key_pem.as_bytes()).expect("the key parses");
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(versions)
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .expect("chain and key fit");
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(config)
    }
}

impl Server {
    /// HTTPS (TLS 1.3 and 1.2) answering `hello` and honouring `Connection: close` (the response says it too,
    /// then the server closes), as real servers do.
    pub fn tls_hello(certs: &Certs) -> Server {
        Server::tls_hello_with(certs.server_config(rustls::DEFAULT_VERSIONS))
    }

    pub fn tls_hello_with(config: Arc<ServerConfig>) -> Server {
        Server::start_tls(config, hello_honouring_close)
    }
}

/// Runs loadgen in process with `flags` against `server`'s `/` over HTTPS, trusting the CA of `certs` (the one
/// the server's certificate comes from); the run must succeed.
pub fn run_https(certs: &Certs, server: &Server, flags: &[&str]) -> Ran {
    let url = server.https_url("/");
    let list: Vec<&str> = flags.iter().copied().chain(["--cacert", certs.ca(), &url]).collect();
    run(&list)
}

/// `hello`, closing when the request says `Connection: close`.
pub fn hello_honouring_close(req: &Request) -> Reply {
    if req.header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close")) {
        Reply::status(200, &[("Content-Type", "text/plain"), ("Connection", "close")], super::HELLO.as_bytes())
            .closing()
    } else {
        Reply::hello()
    }
}

/// What the server saw of one handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerHandshake {
    /// `TLSv1_3`, `TLSv1_2` (rustls's names).
    pub version: String,
    pub resumed: bool,
    /// The name the client sent (none for an IP address).
    pub sni: Option<String>,
    pub alpn: Option<String>,
}

/// A server side TLS connection; reads drive the handshake.
pub struct Stream(StreamOwned<ServerConnection, TcpStream>);

impl Stream {
    pub fn accept(config: Arc<ServerConfig>, tcp: TcpStream) -> Option<Stream> {
        ServerConnection::new(config).ok().map(|conn| Stream(StreamOwned::new(conn, tcp)))
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl super::Transport for Stream {
    fn finish(&mut self) {
        self.0.conn.send_close_notify();
        let _ = self.0.flush();
        let _ = self.0.sock.shutdown(Shutdown::Write);
    }

    fn handshake(&self) -> Option<ServerHandshake> {
        let conn = &self.0.conn;
        if conn.is_handshaking() {
            return None;
        }
        Some(ServerHandshake {
            version: format!("{:?}", conn.protocol_version()?),
            resumed: conn.handshake_kind() == Some(HandshakeKind::Resumed),
            sni: conn.server_name().map(str::to_string),
            alpn: conn.alpn_protocol().map(|p| String::from_utf8_lossy(p).into_owned()),
        })
    }
}
