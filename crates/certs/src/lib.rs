//! A throwaway certificate authority and one server certificate signed by it, both ECDSA P-256, made fresh
//! for each test or benchmark run so no private key is ever kept in the repository.
//!
//! Why P-256 everywhere: RSA signing dominates a full handshake and its cost differs widely between TLS
//! libraries (rustls on aws-lc, OpenSSL in Node, BoringSSL in Bun), so an RSA certificate would measure the
//! library's RSA code rather than the server. Why a CA and a leaf rather than one self-signed certificate:
//! clients (loadgen's `--cacert`, curl, openssl s_client) then verify the server the way they verify a real
//! one, a chain ending at a trust anchor, with the leaf marked for server authentication only. [`trust`] is
//! the client's side: a PEM file's anchors, or any certificate (`--insecure`).

pub mod trust;

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, PKCS_ECDSA_P256_SHA256,
};

/// The names every generated server certificate is valid for: what the servers bind to in tests and runs.
pub const LOOPBACK_NAMES: &[&str] = &["localhost", "127.0.0.1", "::1"];

#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("cannot generate a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
}

/// A CA certificate and a server certificate it signed, with the server's private key, all PEM.
#[derive(Debug, Clone)]
pub struct Bundle {
    /// The CA certificate: what a client trusts (`--cacert`).
    pub ca_pem: String,
    /// The server certificate followed by the CA certificate: the chain a server presents.
    pub chain_pem: String,
    /// The server's private key, PKCS#8.
    pub key_pem: String,
}

/// Where [`Bundle::write`] put the files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Files {
    pub ca: PathBuf,
    pub chain: PathBuf,
    pub key: PathBuf,
}

impl Bundle {
    /// A new CA and a server certificate for `names` (DNS names or IP addresses), valid from now on.
    pub fn generate(names: &[&str]) -> Result<Bundle, CertError> {
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        ca_params.distinguished_name.push(DnType::CommonName, "rust-baselines throwaway CA");
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?)?;

        let mut params = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())?;
        params.distinguished_name.push(DnType::CommonName, names.first().copied().unwrap_or("localhost"));
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
        let leaf = params.signed_by(&key, &ca)?;

        Ok(Bundle { ca_pem: ca.pem(), chain_pem: format!("{}{}", leaf.pem(), ca.pem()), key_pem: key.serialize_pem() })
    }

    /// Writes `ca.pem`, `cert.pem` (the chain) and `key.pem` into `dir`; the key readable by its owner only.
    pub fn write(&self, dir: &Path) -> Result<Files, CertError> {
        let files = Files { ca: dir.join("ca.pem"), chain: dir.join("cert.pem"), key: dir.join("key.pem") };
        write_file(&files.ca, &self.ca_pem, 0o644)?;
        write_file(&files.chain, &self.chain_pem, 0o644)?;
        write_file(&files.key, &self.key_pem, 0o600)?;
        Ok(files)
    }
}

fn write_file(path: &Path, text: &str, mode: u32) -> Result<(), CertError> {
    let fail = |source| CertError::Write { path: path.to_path_buf(), source };
    // Replace, never append to or reuse the permissions of, whatever was there.
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(fail(e)),
        _ => {}
    }
    let mut file = fs::OpenOptions::new().write(true).create_new(true).mode(mode).open(path).map_err(fail)?;
    file.write_all(text.as_bytes()).map_err(fail)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn writes_a_chain_a_ca_and_a_private_key() {
        let bundle = Bundle::generate(LOOPBACK_NAMES).expect("generate");
        assert_eq!(bundle.chain_pem.matches("BEGIN CERTIFICATE").count(), 2);
        assert!(bundle.chain_pem.ends_with(&bundle.ca_pem), "the chain ends with the CA");
        assert!(bundle.key_pem.starts_with("-----BEGIN PRIVATE KEY-----"), "PKCS#8");

        let dir = tempfile::tempdir().expect("dir");
        let files = bundle.write(dir.path()).expect("write");
        let mode = |p: &Path| fs::metadata(p).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode(&files.key), 0o600);
        assert_eq!(fs::read_to_string(&files.ca).expect("ca"), bundle.ca_pem);
        // Writing again replaces the files instead of failing on them.
        Bundle::generate(&["localhost"]).expect("again").write(dir.path()).expect("rewrite");
        assert_ne!(fs::read_to_string(&files.ca).expect("ca"), bundle.ca_pem);
    }

    #[test]
    fn each_bundle_has_its_own_keys() {
        let a = Bundle::generate(&["localhost"]).expect("a");
        let b = Bundle::generate(&["localhost"]).expect("b");
        assert_ne!(a.key_pem, b.key_pem);
        assert_ne!(a.ca_pem, b.ca_pem);
    }
}
