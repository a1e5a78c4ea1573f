// Node peer for the ladder (crates/compare): node:http around the shared handler in ladder.mjs (the same
// code server-bun.ts runs), over node:sqlite (DatabaseSync) and pg, and the global fetch (undici) for the
// upstream route. Routes, answers and env: see ladder.mjs.
//   LADDER_DB=/tmp/metadata.db DATABASE_URL=postgres://postgres@127.0.0.1:5432/ladder \
//     node --disable-warning=ExperimentalWarning bench/peers/ladder/server-node.mjs
// PEER_PROCESSES (1: one process; N > 1: a node:cluster primary and N workers, see ../processes.mjs).
// TLS_CERT and TLS_KEY (both: HTTPS through node:https), TLS_RESUME: see ../tls.mjs.
// HTTP2 (off by default; on: node:http2, h2 and HTTP/1.1 by ALPN over TLS, h2c by prior knowledge only in
// cleartext, where node:http2 takes no HTTP/1.1; h2 streams answered by onStream through node:http2's core
// API, HTTP/1.1 ones by onRequest): see ../http2.mjs. The 413 goes out over h2 without its `connection: close`.
import http from "node:http";
import https from "node:https";
import { DatabaseSync } from "node:sqlite";
import { BODY_LIMIT, CONTENT_TYPE, PRAGMAS, TOO_LARGE, VIDEO_SQL, configFromEnv, createApp } from "./ladder.mjs";
import { nodeSend, nodeStreamSend } from "../serving.mjs";
import { clusterPrimary, configOrExit } from "../processes.mjs";
import { prepareReadOnly } from "../sqlite.mjs";
import { nodeTlsOptions, scheme, tlsFromEnv } from "../tls.mjs";
import { http2FromEnv, ignoreStreamError, nodeHttp2Server, protocolNote } from "../http2.mjs";

const cfg = configOrExit("ladder-node", configFromEnv);
// TLS_CERT / TLS_KEY read and checked before any worker is forked or the port is bound (exit 64 if bad).
const tls = configOrExit("ladder-node", tlsFromEnv);
// HTTP2 likewise (exit 64 on a value other than on/off).
const h2 = configOrExit("ladder-node", http2FromEnv);
// PEER_PROCESSES=N > 1: this process becomes the cluster primary and stops here; workers go on.
await clusterPrimary("ladder-node");

// Read-only, the pragmas, the statement prepared once; any failure here is "database unavailable".
function openSqlite(path) {
  const [video] = prepareReadOnly(new DatabaseSync(path, { readOnly: true }), PRAGMAS, [VIDEO_SQL]);
  return { get: (id) => video.get(id) };
}

const app = createApp(cfg, openSqlite);

function onRequest(req, res) {
  const routed = app.route(req.method, req.url, req.headers["content-length"]);
  if (typeof routed !== "string") {
    req.resume(); // drain whatever body came along
    // The upstream route answers with a promise (which never rejects).
    if (typeof routed.then === "function") routed.then((r) => nodeSend(res, r, CONTENT_TYPE));
    else nodeSend(res, routed, CONTENT_TYPE);
    return;
  }
  const chunks = [];
  let size = 0;
  let refused = false;
  req.on("data", (chunk) => {
    if (refused) return;
    size += chunk.length;
    if (size > BODY_LIMIT) {
      // A chunked body past the limit: answer now and close, as ladder-rs does.
      refused = true;
      chunks.length = 0;
      nodeSend(res, TOO_LARGE, CONTENT_TYPE);
      return;
    }
    chunks.push(chunk);
  });
  req.on("end", () => {
    if (refused) return;
    const r = app.answer(routed, chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size));
    if (typeof r.then === "function") r.then((x) => nodeSend(res, x, CONTENT_TYPE));
    else nodeSend(res, r, CONTENT_TYPE);
  });
}

// HTTP2=on: onRequest's steps for an h2 stream, through node:http2's core API.
function onStream(stream, headers) {
  stream.on("error", ignoreStreamError);
  const routed = app.route(headers[":method"], headers[":path"], headers["content-length"]);
  if (typeof routed !== "string") {
    stream.resume(); // drain whatever body came along
    if (typeof routed.then === "function") routed.then((r) => nodeStreamSend(stream, r, CONTENT_TYPE));
    else nodeStreamSend(stream, routed, CONTENT_TYPE);
    return;
  }
  const chunks = [];
  let size = 0;
  let refused = false;
  stream.on("data", (chunk) => {
    if (refused) return;
    size += chunk.length;
    if (size > BODY_LIMIT) {
      // A body past the limit without a content-length saying so: answer now (the stream's end comes with it;
      // the rest of the body is read and dropped).
      refused = true;
      chunks.length = 0;
      nodeStreamSend(stream, TOO_LARGE, CONTENT_TYPE);
      return;
    }
    chunks.push(chunk);
  });
  stream.on("end", () => {
    if (refused) return;
    const r = app.answer(routed, chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size));
    if (typeof r.then === "function") r.then((x) => nodeStreamSend(stream, x, CONTENT_TYPE));
    else nodeStreamSend(stream, r, CONTENT_TYPE);
  });
}

// HTTP2 off: node:http or node:https, as before HTTP2 existed.
const server = h2
  ? await nodeHttp2Server(tls, onStream, onRequest)
  : tls === null
    ? http.createServer(onRequest)
    : https.createServer(nodeTlsOptions(tls), onRequest);

server.listen(cfg.port, cfg.host, () => {
  console.log(`ladder peer: node ${process.version} listening on ${scheme(tls)}://${cfg.host}:${cfg.port}${protocolNote(h2, tls, false)}`);
});

// The harness stops servers with SIGTERM: stop listening, drop keep-alive connections, close the pool, exit 0.
process.on("SIGTERM", () => {
  server.close();
  // node:http2's servers have no closeAllConnections (node:http's); the exit below ends their sessions.
  server.closeAllConnections?.();
  app.close().finally(() => process.exit(0));
  setTimeout(() => process.exit(0), 1000).unref();
});
