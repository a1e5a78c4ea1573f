//! A second opinion on what loadgen negotiates: OpenSSL's `openssl s_server -www`, whose page names the
//! version and cipher it negotiated and whether the session was `New` or `Reused`. loadgen checks every page
//! (`--expect-contains`) and its report must say the same. Needs the `openssl` command (Debian: openssl).

mod common;

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::tls::Certs;
use common::*;

/// `openssl s_server -www` on a free port; killed when dropped.
struct SServer {
    child: Child,
    port: u16,
}

impl SServer {
    fn start(certs: &Certs) -> SServer {
        let port = closed_port();
        let child = Command::new("openssl")
            .args(["s_server", "-quiet", "-www", "-accept", &format!("127.0.0.1:{port}")])
            .arg("-cert")
            .arg(&certs.chain)
            .arg("-key")
            .arg(&certs.key)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run `openssl s_server` ({e}): install openssl (Debian: apt-get install openssl)")
            });
        let server = SServer { child, port };
        let deadline = Instant::now() + Duration::from_secs(5);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "openssl s_server did not listen on {port} within 5 s");
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    fn url(&self) -> String {
        format!("https://127.0.0.1:{}/", self.port)
    }
}

impl Drop for SServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One connection at a time (s_server serves one), each carrying one request: every page is one handshake.
fn run_against(server: &SServer, certs: &Certs, extra: &[&str]) -> Ran {
    let url = server.url();
    let mut list = vec!["-c", "1", "-d", "600ms", "--requests-per-conn", "1", "--cacert", certs.ca()];
    list.extend_from_slice(extra);
    list.push(&url);
    run(&list)
}

#[test]
fn openssl_agrees_on_version_and_cipher() {
    let certs = Certs::new();
    let server = SServer::start(&certs);
    for (extra, says) in [
        (
            ["--tls-version", "1.3", "--tls-cipher", "TLS13_AES_128_GCM_SHA256"],
            "New, TLSv1.3, Cipher is TLS_AES_128_GCM_SHA256",
        ),
        (
            ["--tls-version", "1.2", "--tls-cipher", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"],
            "New, TLSv1.2, Cipher is ECDHE-ECDSA-AES128-GCM-SHA256",
        ),
    ] {
        let ran =
            run_against(&server, &certs, &[&extra[..], &["--tls-resume", "off", "--expect-contains", says]].concat());
        let r = &ran.report;
        assert!(r.responses >= 3, "{says}: {} responses ({:?})", r.responses, r.errors);
        assert_eq!(r.assertions.checked, r.responses, "{says}");
        assert_eq!(r.assertions.failed, 0, "{says}: openssl said otherwise");
        let c = &r.tls.as_ref().unwrap_or_else(|| panic!("no TLS")).counts;
        assert_eq!(c.cipher_suites.keys().collect::<Vec<_>>(), [extra[3]], "{says}");
        assert_eq!(c.handshakes.resumed, 0, "{says}");
    }
}

#[test]
fn openssl_sees_the_resumptions_loadgen_counts() {
    let certs = Certs::new();
    let server = SServer::start(&certs);
    let ran = run_against(&server, &certs, &["--expect-contains", "Reused, TLSv1.3"]);
    let r = &ran.report;
    let h = &r.tls.as_ref().unwrap_or_else(|| panic!("no TLS")).counts.handshakes;
    assert!(r.responses >= 3, "{} responses ({:?})", r.responses, r.errors);
    // The one full handshake is the one page that does not say Reused; every other page does.
    assert_eq!(h.full, 1, "{h:?}");
    assert_eq!(r.assertions.failed, 1, "pages without Reused: {} of {} ({h:?})", r.assertions.failed, r.responses);
    assert!(h.resumed + 1 >= r.responses, "{h:?}, {} responses", r.responses);
}
