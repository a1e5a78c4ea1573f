// Node peer of metadata-rs (crates/compare's metadata workload): node:http around the shared
// handler in metadata.mjs (the same code server-bun.ts runs), over node:sqlite (DatabaseSync).
// Routes and answers: see metadata.mjs.
//   METADATA_DB=/tmp/metadata.db node bench/peers/metadata/server-node.mjs
// Env: METADATA_PORT (3001), METADATA_HOSTNAME (127.0.0.1), METADATA_DB (metadata.db), PEER_PROCESSES
// (1: one process; N > 1: a node:cluster primary and N workers, see ../processes.mjs), and the
// Redis cache's METADATA_REDIS_URL (unset: no cache), METADATA_REDIS_TTL (60 s), METADATA_REDIS_TIMEOUT_MS
// (50), as metadata-rs reads them (cache.mjs; each worker has its own connection).
import http from "node:http";
import { DatabaseSync } from "node:sqlite";
import { CONTENT_TYPE, HEALTH_SQL, LOOKUP_SQL, PRAGMAS, configFromEnv, createStore, handle } from "./metadata.mjs";
import { nodeSend } from "../serving.mjs";
import { clusterPrimary, configOrExit } from "../processes.mjs";
import { prepareReadOnly } from "../sqlite.mjs";

const cfg = configOrExit("metadata-node", configFromEnv);
// PEER_PROCESSES=N > 1: this process becomes the cluster primary and stops here; workers go on.
await clusterPrimary("metadata-node");

// Read-only, the pragmas, both statements prepared once; any failure here is "database unavailable".
function open(path) {
  const [lookup, health] = prepareReadOnly(new DatabaseSync(path, { readOnly: true }), PRAGMAS, [LOOKUP_SQL, HEALTH_SQL]);
  return { get: (id) => lookup.get(id), health: () => health.get() };
}

const store = createStore(open, cfg.db);
// Loaded only with a cache, so the uncached peer runs (and weighs) exactly what it did before.
const cache = cfg.redis ? await (await import("./cache.mjs")).openCache(cfg.redis) : null;

const server = http.createServer((req, res) => {
  // GET and HEAD carry no body; drain anything a client sent with another method.
  if (req.method !== "GET" && req.method !== "HEAD") req.resume();
  // handle() answers synchronously unless Redis is involved (see metadata.mjs).
  const r = handle(store, req.method, req.url, cache);
  if (r instanceof Promise) r.then((answer) => nodeSend(res, answer, CONTENT_TYPE));
  else nodeSend(res, r, CONTENT_TYPE);
});

server.listen(cfg.port, cfg.host, () => {
  console.log(`node ${process.version} listening on http://${cfg.host}:${cfg.port}`);
});

// The harness stops servers with SIGTERM: stop listening, drop keep-alive connections, exit 0.
process.on("SIGTERM", () => {
  server.close();
  server.closeAllConnections();
  process.exit(0);
});
