// Node peer for the ladder (crates/compare): node:http around the shared handler in ladder.mjs (the same
// code server-bun.ts runs), over node:sqlite (DatabaseSync) and pg, and the global fetch (undici) for the
// upstream route. Routes, answers and env: see ladder.mjs.
//   LADDER_DB=/tmp/metadata.db DATABASE_URL=postgres://postgres@127.0.0.1:5432/ladder \
//     node --disable-warning=ExperimentalWarning bench/peers/ladder/server-node.mjs
// PEER_PROCESSES (1: one process; N > 1: a node:cluster primary and N workers, see ../processes.mjs).
// TLS_CERT and TLS_KEY (both: HTTPS through node:https), TLS_RESUME: see ../tls.mjs.
import http from "node:http";
import https from "node:https";
import { DatabaseSync } from "node:sqlite";
import { BODY_LIMIT, CONTENT_TYPE, PRAGMAS, TOO_LARGE, VIDEO_SQL, configFromEnv, createApp } from "./ladder.mjs";
import { nodeSend } from "../serving.mjs";
import { clusterPrimary, configOrExit } from "../processes.mjs";
import { prepareReadOnly } from "../sqlite.mjs";
import { nodeTlsOptions, scheme, tlsFromEnv } from "../tls.mjs";

const cfg = configOrExit("ladder-node", configFromEnv);
// TLS_CERT / TLS_KEY read and checked before any worker is forked or the port is bound (exit 64 if bad).
const tls = configOrExit("ladder-node", tlsFromEnv);
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

const server = tls === null ? http.createServer(onRequest) : https.createServer(nodeTlsOptions(tls), onRequest);

server.listen(cfg.port, cfg.host, () => {
  console.log(`ladder peer: node ${process.version} listening on ${scheme(tls)}://${cfg.host}:${cfg.port}`);
});

// The harness stops servers with SIGTERM: stop listening, drop keep-alive connections, close the pool, exit 0.
process.on("SIGTERM", () => {
  server.close();
  server.closeAllConnections();
  app.close().finally(() => process.exit(0));
  setTimeout(() => process.exit(0), 1000).unref();
});
