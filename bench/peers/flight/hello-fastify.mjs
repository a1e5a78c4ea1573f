// Fastify 5 peer for the hello workloads (compare's fastify-node and fastify-bun: this file run by
// `node --disable-warning=ExperimentalWarning` or `bun run`, cwd bench/peers, NODE_ENV=production), the routes
// written as a Fastify user would: each with a response schema, so the body goes through Fastify's compiled
// serializer (fast-json-stringify) rather than a pre-encoded buffer.
//
// Contract (byte-identical body and content-type with hello-node.mjs and flight-rs):
//   GET|HEAD /api/hello -> 200 {"message":"Hello from Flight!"}  application/json
//   GET|HEAD /healthz   -> 200 {"status":"ok"}                   application/json
//   anything else       -> 404 {"error":"not found"}             application/json
// Env: PORT (default 3000), HOSTNAME (default 127.0.0.1), PEER_PROCESSES (default 1: one process; N > 1: a
// node:cluster primary and N workers on both runtimes, see ../processes.mjs and ../frameworks.mjs), TLS_CERT
// and TLS_KEY (both: HTTPS, Fastify's `https` option, i.e. node:https) and TLS_RESUME (see ../tls.mjs),
// HTTP2 (off by default; on: Fastify's `http2: true`, i.e. node:http2 through its compat API, with `https`
// and allowHTTP1 over TLS: h2 and HTTP/1.1 by ALPN; h2c by prior knowledge only in cleartext; see ../http2.mjs).
// SIGTERM: close the listener and every connection, exit 0.
import Fastify from "fastify";
import { clusterPrimary, configOrExit } from "../processes.mjs";
import { nodeTlsOptions, scheme, tlsFromEnv } from "../tls.mjs";
import { http2FromEnv, nodeHttp2TlsOptions, protocolNote } from "../http2.mjs";
import { engine, exitOnSigterm } from "../frameworks.mjs";

const CONTENT_TYPE = "application/json";

// TLS_CERT / TLS_KEY read and checked before any worker is forked or the port is bound (exit 64 if bad).
const tls = configOrExit("hello-fastify", tlsFromEnv);
// HTTP2 likewise (exit 64 on a value other than on/off).
const h2 = configOrExit("hello-fastify", http2FromEnv);
// PEER_PROCESSES=N > 1: this process becomes the cluster primary and stops here; workers go on.
await clusterPrimary("hello-fastify");

// HTTP2 off: exactly the options given before HTTP2 existed (no `http2` key at all). On, cleartext: no
// `https` key, as Fastify's http2 path takes `https: null` for TLS options (typeof null is "object").
let transport = { https: tls === null ? null : nodeTlsOptions(tls) };
if (h2) transport = tls === null ? { http2: true } : { http2: true, https: nodeHttp2TlsOptions(tls) };
const app = Fastify({
  // No logger: the plain peers log nothing per request either.
  logger: false,
  ...transport,
  // Keep-alive connections are closed by app.close() too, so SIGTERM does not wait on idle clients.
  forceCloseConnections: true,
});

// Fastify labels a JSON answer `application/json; charset=utf-8` and appends the charset to an
// `application/json` set by the handler too; the contract is `application/json` exactly, so it is pinned
// after Fastify's own handling, on every answer (all of them are JSON).
app.addHook("onSend", (request, reply, payload, done) => {
  reply.header("content-type", CONTENT_TYPE);
  done(null, payload);
});

const message = { type: "object", required: ["message"], properties: { message: { type: "string" } } };
const status = { type: "object", required: ["status"], properties: { status: { type: "string" } } };

// GET routes answer HEAD too (Fastify's exposeHeadRoutes, on by default). Query strings do not take part in
// matching; a trailing slash is another path (ignoreTrailingSlash off by default), as in the other peers.
app.get("/api/hello", { schema: { response: { 200: message } } }, () => ({ message: "Hello from Flight!" }));
app.get("/healthz", { schema: { response: { 200: status } } }, () => ({ status: "ok" }));

// No route here reads a body; one sent anyway (to any path) is drained unread, as hello-node.mjs does, so a
// POST answers 404 whatever its content type or JSON, instead of Fastify's 400 / 413 / 415.
app.removeAllContentTypeParsers();
app.addContentTypeParser("*", (request, payload, done) => {
  payload.on("end", () => done(null));
  payload.resume();
});

const NOT_FOUND = JSON.stringify({ error: "not found" });
app.setNotFoundHandler((request, reply) => {
  reply.code(404).send(NOT_FOUND);
});

const port = Number(process.env.PORT ?? 3000);
const host = process.env.HOSTNAME ?? "127.0.0.1";
await app.listen({ port, host });
console.log(`hello peer: fastify ${app.version} on ${engine()} listening on ${scheme(tls)}://${host}:${port}${protocolNote(h2, tls, false)}`);

exitOnSigterm(() => app.close());
