// TLS for the peers (issue 32): the ladder and hello servers, Bun and Node, serve HTTPS when given a
// certificate and key, and plain HTTP exactly as before when not.
//
// Env (read once, before any process is started or any port is bound):
//   TLS_CERT    PEM certificate chain (the leaf first), a file path
//   TLS_KEY     PEM private key of that leaf, a file path
//               Both or neither (unset and empty are the same). One without the other, a file that cannot
//               be read, one that holds no certificate / no private key, or a key that does not belong to
//               the certificate: one line on stderr naming the variable and file, exit 64.
//   TLS_RESUME  on (default; unset or empty) | off. Only read with TLS on.
//               on:  each runtime's own default resumption, which is stateless session tickets only. With
//                    PEER_PROCESSES > 1 each Bun copy has its own ticket keys, so a ticket resumes only on
//                    the copy that issued it (2 of 6 resumptions fell back to full handshakes in one try);
//                    a node:cluster pair resumed 6 of 6 in the same try (not looked into). Bun.serve (BoringSSL): two tickets after a full TLS 1.3 handshake, one
//                    in TLS 1.2, lifetime hint 48 h; no session-ID resumption (TLS 1.2 without tickets
//                    does not resume). node:https (OpenSSL 3.5): two tickets after a full TLS 1.3
//                    handshake, one in TLS 1.2 (hint 7200 s); node keeps no server-side session cache
//                    unless 'newSession'/'resumeSession' listeners are added (these peers add none).
//               off: SSL_OP_NO_TICKET on both (the same bit, 0x4000, in OpenSSL and BoringSSL): nothing
//                    resumes, TLS 1.3 or 1.2. Bun then sends no ticket at all. OpenSSL still sends two
//                    (stateful) tickets after each full TLS 1.3 handshake, which no cache backs, so they
//                    never resume: node has no setting for OpenSSL's ticket count.
// Protocol: each runtime's defaults, nothing pinned here (TLS 1.2 and 1.3, minimum 1.2 on both); a harness
// pins by what its client offers, and must offer exactly one suite and one group: node:https picks by its
// own order (TLS_AES_256_GCM_SHA384 first, whatever the client prefers), Bun.serve by the client's order.
// Groups: node takes the client's first key share (P-256 if offered first), Bun.serve X25519 whenever
// offered. ALPN with HTTP2 off (../http2.mjs; the default): node:https selects `http/1.1` (and refuses a
// client offering only h2 with an alert); Bun.serve does no ALPN on its server side at all (no protocol
// selected, whatever the client offers; HTTP/1.1 spoken); so does Bun's node:https (Fastify on Bun), which
// selects nothing for a client offering only h2. With HTTP2=on both select h2 when the client offers it,
// else http/1.1, and still speak HTTP/1.1 to a client offering no ALPN (node:http2 with allowHTTP1; node
// refuses a list holding neither protocol with an alert, Bun.serve speaks HTTP/1.1): see ../http2.mjs.
// Plain HTTP sent to the TLS port: both close without a byte back (HTTP2 on or off).

import { readFileSync } from "node:fs";
import { X509Certificate, createPrivateKey } from "node:crypto";

/** OpenSSL's and BoringSSL's SSL_OP_NO_TICKET. */
export const SSL_OP_NO_TICKET = 0x4000;

/**
 * The TLS settings from the environment: null when TLS_CERT and TLS_KEY are both unset, else
 * { cert, key (PEM text), certPath, keyPath, resume (boolean) }. Throws an Error with a one-line message
 * (for configOrExit in processes.mjs) on a bad setting.
 */
export function tlsFromEnv(env = process.env) {
  const certPath = env.TLS_CERT ?? "";
  const keyPath = env.TLS_KEY ?? "";
  if (certPath === "" && keyPath === "") return null;
  if (keyPath === "") throw new Error(`TLS_CERT is set (${certPath}) but TLS_KEY is not: give both or neither`);
  if (certPath === "") throw new Error(`TLS_KEY is set (${keyPath}) but TLS_CERT is not: give both or neither`);
  const cert = readPem("TLS_CERT", certPath);
  const key = readPem("TLS_KEY", keyPath);
  let x509;
  try {
    x509 = new X509Certificate(cert);
  } catch {
    throw new Error(`TLS_CERT ${certPath}: no PEM certificate in the file`);
  }
  let privateKey;
  try {
    privateKey = createPrivateKey(key);
  } catch {
    throw new Error(`TLS_KEY ${keyPath}: no unencrypted PEM private key in the file`);
  }
  if (!x509.checkPrivateKey(privateKey)) {
    throw new Error(`TLS_KEY ${keyPath}: does not match the certificate in ${certPath}`);
  }
  const rawResume = env.TLS_RESUME ?? "";
  if (!["", "on", "off"].includes(rawResume)) {
    throw new Error(`TLS_RESUME must be on or off, not ${JSON.stringify(rawResume)}`);
  }
  return { cert, key, certPath, keyPath, resume: rawResume !== "off" };
}

function readPem(name, path) {
  try {
    return readFileSync(path, "utf8");
  } catch (e) {
    throw new Error(`${name} ${path}: cannot read the file (${e.code ?? e.message})`);
  }
}

/** "https" with TLS, else "http": for the listening line. */
export function scheme(tls) {
  return tls === null ? "http" : "https";
}

/**
 * Bun. The options to spread into Bun.serve's: {} without TLS (the plaintext server's options stay exactly
 * what they were), else { tls }. Bun.serve takes no ALPN setting on its server side (it ignores
 * ALPNProtocols there), so none is given: with HTTP2=on its `http2: true` does the ALPN (h2, http/1.1).
 */
export function bunTls(tls) {
  if (tls === null) return {};
  const options = { cert: tls.cert, key: tls.key };
  if (!tls.resume) options.secureOptions = SSL_OP_NO_TICKET;
  return { tls: options };
}

/**
 * Node. The options for https.createServer (only called with TLS on). With HTTP2=on, nodeHttp2TlsOptions in
 * ../http2.mjs derives node:http2's from these (their ALPN list dropped, allowHTTP1 added).
 */
export function nodeTlsOptions(tls) {
  const options = { cert: tls.cert, key: tls.key, ALPNProtocols: ["http/1.1"] };
  if (!tls.resume) options.secureOptions = SSL_OP_NO_TICKET;
  return options;
}
