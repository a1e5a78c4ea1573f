// Node peer of flight-rs (crates/compare's hello workloads).
//
// Plain node:http with a tiny exact-match router: the cheapest honest Node
// server, so the comparison is against Node itself rather than a framework.
//
// Contract (byte-identical body and content-type with hello-bun.ts):
//   GET /api/hello -> 200 {"message":"Hello from Flight!"}  application/json
//   GET /healthz   -> 200 {"status":"ok"}                   application/json
//   anything else  -> 404 {"error":"not found"}             application/json
// Env: PORT (default 3000), HOSTNAME (default 127.0.0.1), PEER_PROCESSES (default 1: one process;
// N > 1: a node:cluster primary and N workers, see ../processes.mjs), TLS_CERT and TLS_KEY (both: HTTPS
// through node:https) and TLS_RESUME (see ../tls.mjs), HTTP2 (off by default; on: node:http2, h2 and HTTP/1.1
// by ALPN over TLS, h2c by prior knowledge only in cleartext, where node:http2 takes no HTTP/1.1; h2 streams
// answered by onStream through node:http2's core API, HTTP/1.1 ones by onRequest; see ../http2.mjs).
import http from "node:http";
import https from "node:https";
import { clusterPrimary, configOrExit } from "../processes.mjs";
import { nodeTlsOptions, scheme, tlsFromEnv } from "../tls.mjs";
import { http2FromEnv, ignoreStreamError, nodeHttp2Server, protocolNote } from "../http2.mjs";

// TLS_CERT / TLS_KEY read and checked before any worker is forked or the port is bound (exit 64 if bad).
const tls = configOrExit("hello-node", tlsFromEnv);
// HTTP2 likewise (exit 64 on a value other than on/off).
const h2 = configOrExit("hello-node", http2FromEnv);
// PEER_PROCESSES=N > 1: this process becomes the cluster primary and stops here; workers go on.
await clusterPrimary("hello-node");

// Bodies are encoded once; each response still goes through node:http's normal path.
const HELLO = Buffer.from(JSON.stringify({ message: "Hello from Flight!" }));
const HEALTH = Buffer.from(JSON.stringify({ status: "ok" }));
const NOT_FOUND = Buffer.from(JSON.stringify({ error: "not found" }));

function send(res, status, body) {
  // Explicit content-length: otherwise node:http would fall back to chunked encoding.
  res.writeHead(status, { "content-type": "application/json", "content-length": body.length });
  res.end(body);
}

function onRequest(req, res) {
  if (req.method === "GET" || req.method === "HEAD") {
    // Ignore any query string, as Bun's route table does.
    const q = req.url.indexOf("?");
    const path = q === -1 ? req.url : req.url.slice(0, q);
    if (path === "/api/hello") return send(res, 200, HELLO);
    if (path === "/healthz") return send(res, 200, HEALTH);
  }
  send(res, 404, NOT_FOUND);
}

// HTTP2=on: the same routes and answers for an h2 stream, through node:http2's core API.
function respond(stream, status, body) {
  stream.respond({ ":status": status, "content-type": "application/json", "content-length": body.length });
  // node:http2 ends a HEAD stream with the headers (stream.headRequest) and writes no body.
  stream.end(body);
}

function onStream(stream, headers) {
  stream.on("error", ignoreStreamError);
  const method = headers[":method"];
  if (method === "GET" || method === "HEAD") {
    const target = headers[":path"];
    const q = target.indexOf("?");
    const path = q === -1 ? target : target.slice(0, q);
    if (path === "/api/hello") return respond(stream, 200, HELLO);
    if (path === "/healthz") return respond(stream, 200, HEALTH);
  }
  // Any body sent along is read and dropped, as node:http does with an unread one.
  stream.resume();
  respond(stream, 404, NOT_FOUND);
}

// HTTP2 off: node:http or node:https, as before HTTP2 existed.
const server = h2
  ? await nodeHttp2Server(tls, onStream, onRequest)
  : tls === null
    ? http.createServer(onRequest)
    : https.createServer(nodeTlsOptions(tls), onRequest);

const port = Number(process.env.PORT ?? 3000);
const host = process.env.HOSTNAME ?? "127.0.0.1";
server.listen(port, host, () => {
  console.log(`node ${process.version} listening on ${scheme(tls)}://${host}:${port}${protocolNote(h2, tls, false)}`);
});

// Exit promptly on SIGTERM (the harness stops servers that way); without a handler
// Node would also die, but this keeps the exit code 0 and closes the listener first.
process.on("SIGTERM", () => {
  server.close();
  // node:http2's servers have no closeAllConnections (node:http's); the exit below ends their sessions.
  server.closeAllConnections?.();
  process.exit(0);
});
