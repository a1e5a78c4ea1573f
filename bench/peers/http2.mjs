// HTTP/2 for the peers: the hello and ladder servers (Bun and Node) and the Fastify hello peer serve h2 over
// TLS and h2c in cleartext when asked, so a benchmark can multiplex requests on one connection as it can
// against the Rust servers (h2 then http/1.1 offered by ALPN over TLS; h2c by prior knowledge in cleartext).
//
// Env (read once, before any process is started or any port is bound; the same on every peer):
//   HTTP2  off (default; unset or empty) | on. Anything else: one line on stderr naming the variable,
//          exit 64 (configOrExit in processes.mjs).
//          off: nothing here takes part; each peer builds exactly the server it built before HTTP2 existed
//               (node:http / node:https, Bun.serve without `http2`), so HTTP/1.1 runs are unchanged.
//          on:  with TLS_CERT/TLS_KEY (../tls.mjs) h2 over TLS, else h2c, as below. TLS_RESUME applies as before.
// What each runtime then does (Bun 1.4.5, node v22.23.5; checked by test-h2.sh, the rest by hand with curl,
// nghttp, h2load and `openssl s_client -alpn`):
//   Bun.serve with `http2: true`
//     TLS        ALPN: h2 when the client offers it (whatever the client's order), else http/1.1 when offered;
//                no ALPN offered, or neither protocol: none selected, HTTP/1.1 spoken. So h2 and HTTP/1.1 on
//                the port.
//     cleartext  a connection opening with the h2 preface gets h2c (prior knowledge); any other is HTTP/1.1 on
//                the same port. `Upgrade: h2c` is not taken up: the request is answered in HTTP/1.1.
//     SETTINGS   MAX_CONCURRENT_STREAMS 256, INITIAL_WINDOW_SIZE 65536, MAX_FRAME_SIZE 16384,
//                MAX_HEADER_LIST_SIZE 16384; the connection window raised to 16 MiB at once.
//     A Response's connection / keep-alive headers are left out of h2 answers (sent as given in HTTP/1.1).
//     PEER_PROCESSES > 1: every copy listens with reusePort, as over HTTP/1.1.
//   node:http2: h2 streams through its core API (the 'stream' event, respond()), HTTP/1.1 on the TLS port
//   through node:http's request/response objects; see nodeHttp2Server for why not the compat API
//     TLS        createSecureServer({ allowHTTP1: true }): ALPN list h2, http/1.1 (node:http2 sets it itself),
//                h2 chosen whatever the client's order; no ALPN offered: HTTP/1.1; a list with neither
//                protocol: refused with a no_application_protocol alert. So h2 and HTTP/1.1 on the port.
//     cleartext  createServer(): h2c by prior knowledge ONLY. node 22 has no HTTP/1.1 fallback in cleartext
//                (allowHTTP1 is read only for TLS sockets, which carry an ALPN result; passing it to
//                createServer changes nothing): an HTTP/1.1 request gets an empty SETTINGS frame and a GOAWAY
//                (error code 2), then the connection is closed. A readiness probe must speak h2c here.
//                `Upgrade: h2c` is not taken up either (that is the same HTTP/1.1 request).
//     SETTINGS   none sent (node's defaults: no stream limit announced, 65,535-byte windows).
//     respond() throws on a `connection` header, so the ladder's 413 goes out over h2 without its
//     `connection: close` (nodeStreamSend in serving.mjs); Bun.serve drops it silently, node's compat API
//     with one UnsupportedWarning per process.
//     PEER_PROCESSES > 1: node:cluster as over HTTP/1.1 (the primary hands the TCP connection to a worker;
//     ALPN, TLS and h2 all happen in the worker).
//   Fastify 5 (flight/hello-fastify.mjs): its own `http2: true` option, with `https` (plus allowHTTP1: true)
//     for TLS: the same node:http2 servers as above, but with h2 streams through the compat API (Fastify's
//     request and reply sit on it), under Node and under Bun's node:http2, which behaved as node's in every
//     point above that was checked (ALPN choice and refusal, HTTP/1.1 without ALPN, no SETTINGS; h2c only
//     in cleartext: an HTTP/1.1 request gets a GOAWAY, PROTOCOL_ERROR "invalid connection preface").
//     Fastify 5.12.8 must get no `https` key at all for h2c: given `https: null`, its http2 path takes that
//     for TLS options (typeof null is "object") and throws.

import { nodeTlsOptions } from "./tls.mjs";

/**
 * HTTP2 from the environment: false (off, unset or empty) or true (on). Throws an Error with a one-line
 * message naming the variable (for configOrExit in processes.mjs) on any other value.
 */
export function http2FromEnv(env = process.env) {
  const raw = env.HTTP2 ?? "";
  if (raw === "" || raw === "off") return false;
  if (raw === "on") return true;
  throw new Error(`HTTP2 must be on or off, not ${JSON.stringify(raw)}`);
}

/** Bun. The options to spread into Bun.serve's: {} when off (the options stay exactly what they were). */
export function bunHttp2(h2) {
  return h2 ? { http2: true } : {};
}

/**
 * Node. The options for http2.createSecureServer (and Fastify's `https` with `http2: true`): the TLS
 * settings of nodeTlsOptions() without its ALPN list (node:http2 sets h2, http/1.1 itself, and would
 * overwrite it anyway), and allowHTTP1 so HTTP/1.1 clients are still served on the port.
 */
export function nodeHttp2TlsOptions(tls) {
  const { ALPNProtocols, ...options } = nodeTlsOptions(tls);
  return { ...options, allowHTTP1: true };
}

/**
 * Node. The HTTP/2 server: h2 streams go to `onStream(stream, headers)` (node:http2's core API); over TLS,
 * HTTP/1.1 requests (allowHTTP1) go to `onRequest(req, res)`, the very handler the peer gives node:http, with
 * node:http's own request and response objects. h2c (http2.createServer) without TLS, h2 with HTTP/1.1
 * fallback (createSecureServer) with it. node:http2 is imported here, so a peer with HTTP2 off never loads it.
 *
 * The core API, not the compat one (a 'request' listener with req/res, which would have let onRequest serve
 * h2 too): it is what Node offers for speed, and what a Node user tuning a minimal h2 server writes. The
 * compat API wraps every stream in two objects with their listeners, and its res.end(body) sends the body
 * and the end of the stream as two DATA frames where stream.end(body) sends one; on this machine it
 * answered visibly fewer h2 requests a second than the core API (a quick h2load look, not a measurement).
 * The answers stay the same bytes (test-h2.sh compares them with the HTTP/1.1 ones). Fastify keeps the
 * compat API: that is what the framework does.
 *
 * With allowHTTP1 node delivers HTTP/1.1 only as 'request' events, and adding the first 'request' listener
 * makes node:http2 add a 'stream' listener of its own that wraps every h2 stream for the compat API; that
 * listener is taken off again, so h2 streams reach onStream alone.
 */
export async function nodeHttp2Server(tls, onStream, onRequest) {
  const { default: http2 } = await import("node:http2");
  if (tls === null) return http2.createServer().on("stream", onStream);
  const server = http2.createSecureServer(nodeHttp2TlsOptions(tls));
  server.on("request", onRequest);
  server.removeAllListeners("stream");
  server.on("stream", onStream);
  return server;
}

/** Node. For a server stream's 'error' event: without a listener, a client resetting a stream with an error
 * code (RST_STREAM INTERNAL_ERROR, say) would throw ERR_HTTP2_STREAM_ERROR at the process and stop it. */
export function ignoreStreamError() {}

/**
 * For the listening line: "" when off (the line stays what it was), else what the port speaks, e.g.
 * " (h2, http/1.1)" over TLS, " (h2c, http/1.1)" or " (h2c only)" in cleartext. `cleartextHttp1` says
 * whether the runtime's cleartext h2 server also takes HTTP/1.1 (Bun: yes; node:http2: no).
 */
export function protocolNote(h2, tls, cleartextHttp1) {
  if (!h2) return "";
  if (tls !== null) return " (h2, http/1.1)";
  return cleartextHttp1 ? " (h2c, http/1.1)" : " (h2c only)";
}
