// Node peer of scribe-rs (crates/compare's notes workloads): node:http around the shared
// handler in scribe.mjs (the same code server-bun.ts runs). Env and routes: see scribe.mjs.
//   SCRIBE_VARIANT=fixed DATABASE_URL=postgres://postgres@127.0.0.1:5432/scribe \
//     REDIS_URL=redis://127.0.0.1:6379 node bench/peers/scribe/server-node.mjs
// PEER_PROCESSES (default 1: one process; N > 1: a node:cluster primary and N workers, each with
// its own pools; see ../processes.mjs).
import http from "node:http";
import { configFromEnv, createApp } from "./scribe.mjs";
import { clusterPrimary, configOrExit } from "../processes.mjs";

const cfg = configOrExit("scribe-node", configFromEnv);
// PEER_PROCESSES=N > 1: this process becomes the cluster primary and stops here; workers go on.
await clusterPrimary("scribe-node");
const app = await createApp(cfg);

const TOO_LARGE = JSON.stringify({ error: "payload too large" });

function send(res, status, body) {
  // Explicit content-length: otherwise node:http would fall back to chunked encoding.
  res.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(body),
  });
  res.end(body);
}

const server = http.createServer((req, res) => {
  const q = req.url.indexOf("?");
  const path = q === -1 ? req.url : req.url.slice(0, q);
  if (req.method !== "POST") {
    // Drain and ignore any body on other methods.
    req.resume();
    app.handle(req.method, path, "").then((r) => send(res, r.status, r.body));
    return;
  }
  const chunks = [];
  let size = 0;
  let tooLarge = false;
  req.on("data", (chunk) => {
    size += chunk.length;
    if (size > cfg.payloadLimit) tooLarge = true;
    else chunks.push(chunk);
  });
  req.on("end", () => {
    if (tooLarge) return send(res, 413, TOO_LARGE);
    app.handle("POST", path, Buffer.concat(chunks).toString("utf8")).then((r) => send(res, r.status, r.body));
  });
});

server.listen(cfg.port, cfg.host, () => {
  console.log(`scribe peer: node ${process.version}, variant ${cfg.variant}, listening on http://${cfg.host}:${cfg.port}`);
});

// The harness stops servers with SIGTERM: stop listening, close the pools, exit 0.
process.on("SIGTERM", () => {
  server.close();
  server.closeAllConnections();
  app.close().finally(() => process.exit(0));
  setTimeout(() => process.exit(0), 1000).unref();
});
