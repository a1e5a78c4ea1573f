//! End-to-end tests across servers and runtimes live in `tests/*.rs`; this crate hosts them as a workspace
//! member. What they share (the raw HTTP client, the binaries under test, child processes, polling) is in the
//! `testkit` crate.

/// deploy/compose/tls.yml as docker-compose 1.29 (the compose client of scripts/compose-check.sh) can read it:
/// the same file without its `healthcheck: {disable: true}` blocks, which 1.29 refuses in an override of a
/// check docker-compose.yml sets. Compose v2 reads the file as it is. Without them the servers keep
/// docker-compose.yml's plain-HTTP health check, which fails against HTTPS (so the TLS check in
/// tests/tests/stack.rs polls the port itself rather than waiting for health).
pub fn tls_override_for_compose_1_29(tls_yml: &str) -> String {
    const BLOCK: &str = "    healthcheck:\n      disable: true\n";
    let blocks = tls_yml.matches(BLOCK).count();
    assert!(blocks > 0, "deploy/compose/tls.yml has no `healthcheck: disable: true` block: update this function");
    let stripped = tls_yml.replace(BLOCK, "");
    assert!(!stripped.contains("healthcheck"), "deploy/compose/tls.yml changed shape: update this function");
    stripped
}
