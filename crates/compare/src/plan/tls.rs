//! The TLS every runtime is held to on the TLS workloads. One certificate per run (an ECDSA P-256 leaf and
//! its CA from the certs crate, written into the run's work dir, so no private key is ever in the
//! repository: RSA would make aws-lc look slow), and one protocol version, cipher suite and key-exchange
//! group. loadgen and compare's own probes offer each of these alone, so a server either negotiates exactly
//! them or fails the handshake; [`differences`] still checks what each run's handshakes reported, so a
//! record can never count work done under other parameters than rust's.

use std::path::Path;
use std::sync::Arc;

use loadgen::settings::{TlsSettings, TlsVersion, Trust};
use loadgen::stats::TlsCounts;

/// TLS 1.3: the published ladder's step D, and what every runtime here negotiates by default.
pub const VERSION: TlsVersion = TlsVersion::V1_3;
/// The suite every runtime here prefers on a CPU with AES instructions; named as rustls and loadgen do.
pub const CIPHER_SUITE: &str = "TLS13_AES_128_GCM_SHA256";
/// X25519, not the hybrid post-quantum group Bun (BoringSSL) picks when offered it: only rustls and
/// BoringSSL have that one, and its key share is 1.2 KB.
pub const GROUP: &str = "x25519";

/// The names loadgen's report uses for what the pinned parameters negotiate.
const VERSION_SEEN: &str = "TLSv1.3";
const GROUP_SEEN: &str = "X25519";
/// ALPN: servers that choose none speak HTTP/1.1 all the same (Bun.serve selects no protocol).
const ALPN_SEEN: [&str; 2] = ["http/1.1", "none"];

/// The run's certificate (a CA and a leaf for the loopback names), written under `work/tls`: its private key
/// lives only in the run's work dir.
pub fn run_certificate(work: &Path) -> anyhow::Result<certs::Files> {
    use anyhow::Context;
    let dir = work.join("tls");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let bundle = certs::Bundle::generate(certs::LOOPBACK_NAMES).context("generating the run's certificate")?;
    bundle.write(&dir).context("writing the run's certificate")
}

/// How a TLS workload's client connects: the run's CA, and whether sessions are resumed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientTls {
    /// The CA that signed every server's certificate this run.
    pub ca: std::path::PathBuf,
    /// Resume sessions on new connections (tickets); off: a full handshake on every connection.
    pub resume: bool,
    /// The one suite offered: [`CIPHER_SUITE`] in a comparison; calibrate offers what wrk and h2load (OpenSSL)
    /// negotiate by default, so the loaders it compares do the same work.
    pub cipher: &'static str,
}

impl ClientTls {
    /// The comparison's client: the pinned version, suite and group, trusting `ca`.
    pub fn new(ca: std::path::PathBuf, resume: bool) -> ClientTls {
        ClientTls { ca, resume, cipher: CIPHER_SUITE }
    }

    /// The pinned parameters as loadgen's client settings.
    pub fn settings(&self) -> TlsSettings {
        TlsSettings {
            trust: Trust::CaFile(self.ca.clone()),
            resume: self.resume,
            version: Some(VERSION),
            ciphers: vec![self.cipher.to_string()],
            groups: vec![GROUP.to_string()],
        }
    }

    /// The same as loadgen's flags.
    pub fn loadgen_args(&self) -> Vec<String> {
        let ca = self.ca.to_string_lossy().into_owned();
        let resume = if self.resume { "on" } else { "off" };
        [
            "--cacert",
            &ca,
            "--tls-version",
            VERSION.name(),
            "--tls-cipher",
            self.cipher,
            "--tls-group",
            GROUP,
            "--tls-resume",
            resume,
        ]
        .map(String::from)
        .to_vec()
    }
}

/// The client configuration compare's probes and readiness polls use against a server whose certificate
/// `ca` signed: the pinned parameters, no resumption (each probe is a connection of its own), verified
/// for 127.0.0.1, the address every server listens on.
pub fn probe_client(ca: &Path) -> anyhow::Result<Arc<rustls::ClientConfig>> {
    let tls = ClientTls::new(ca.to_path_buf(), false);
    let client = loadgen::tls_config::build(&tls.settings(), "127.0.0.1", false)?;
    Ok(client.config)
}

/// What a run's handshakes negotiated that differs from the pinned parameters, one line each; empty when
/// every handshake agreed. `None`: a TLS run whose report has no TLS side at all. `http2`: the run asked for
/// HTTP/2, so ALPN must have chosen h2.
pub fn differences(seen: Option<&TlsCounts>, http2: bool) -> Vec<String> {
    let Some(seen) = seen else { return vec!["loadgen reported no TLS handshake".to_string()] };
    let mut out = Vec::new();
    let mut expect = |what: &str, counts: &std::collections::BTreeMap<String, u64>, allowed: &[&str]| {
        let other: Vec<String> = counts
            .iter()
            .filter(|(name, n)| **n > 0 && !allowed.contains(&name.as_str()))
            .map(|(name, n)| format!("{name} ×{n}"))
            .collect();
        if !other.is_empty() {
            out.push(format!("negotiated {what} {} where every runtime is held to {}", other.join(", "), allowed[0]));
        }
    };
    expect("version", &seen.versions, &[VERSION_SEEN]);
    expect("cipher suite", &seen.cipher_suites, &[CIPHER_SUITE]);
    // A resumed TLS 1.3 handshake still exchanges a key (psk_dhe_ke), so the group is always there.
    expect("key-exchange group", &seen.groups, &[GROUP_SEEN]);
    expect("ALPN protocol", &seen.alpn, if http2 { &["h2"] } else { &ALPN_SEEN });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(version: &str, suite: &str, group: &str, alpn: &str) -> TlsCounts {
        let one = |k: &str| [(k.to_string(), 3u64)].into_iter().collect();
        TlsCounts {
            versions: one(version),
            cipher_suites: one(suite),
            groups: one(group),
            alpn: one(alpn),
            ..TlsCounts::default()
        }
    }

    #[test]
    fn pinned_parameters_are_what_loadgen_is_told_and_what_is_checked() {
        let tls = ClientTls::new("/w/ca.pem".into(), false);
        assert_eq!(
            tls.loadgen_args().join(" "),
            "--cacert /w/ca.pem --tls-version 1.3 --tls-cipher TLS13_AES_128_GCM_SHA256 --tls-group x25519 \
             --tls-resume off"
        );
        assert!(differences(Some(&counts("TLSv1.3", CIPHER_SUITE, "X25519", "http/1.1")), false).is_empty());
        assert!(differences(Some(&counts("TLSv1.3", CIPHER_SUITE, "X25519", "none")), false).is_empty(), "Bun's ALPN");
        let off = differences(Some(&counts("TLSv1.2", "TLS13_AES_256_GCM_SHA384", "X25519", "h2")), false);
        assert_eq!(off.len(), 3, "{off:?}");
        assert_eq!(off[0], "negotiated version TLSv1.2 ×3 where every runtime is held to TLSv1.3");
        assert_eq!(differences(None, false), ["loadgen reported no TLS handshake"]);
        // HTTP/2 runs: h2 and nothing else.
        assert!(differences(Some(&counts("TLSv1.3", CIPHER_SUITE, "X25519", "h2")), true).is_empty());
        let h1 = differences(Some(&counts("TLSv1.3", CIPHER_SUITE, "X25519", "http/1.1")), true);
        assert_eq!(h1, ["negotiated ALPN protocol http/1.1 ×3 where every runtime is held to h2"]);
    }

    #[test]
    fn probes_trust_the_run_s_ca_only() {
        let dir = tempfile::tempdir().expect("dir");
        let files = certs::Bundle::generate(certs::LOOPBACK_NAMES).expect("certs").write(dir.path()).expect("write");
        let config = probe_client(&files.ca).expect("client");
        assert_eq!(config.alpn_protocols, [b"http/1.1".to_vec()]);
        assert!(probe_client(&dir.path().join("missing.pem")).is_err());
    }
}
