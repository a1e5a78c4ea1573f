// Express 5 peer of metadata-rs (compare's express-node and express-bun on the metadata workloads: this file
// run by `node --disable-warning=ExperimentalWarning` or `bun run`, cwd bench/peers, NODE_ENV=production). The
// lookup, the cache-aside and the answers are metadata.mjs's and cache.mjs's (the code server-node.mjs and
// server-bun.ts run); what is Express's is the routing: the id from the route parameter (decoded by Express's
// router), the region from Express's parsed query (req.query), 405s with route().all, a last middleware for 404.
//
// Answers go out as res.status().send(Buffer) with the content-type set by node's setHeader: Express 5's
// res.type()/res.json()/res.send(string) all add `; charset=utf-8`, and the contract is `application/json`
// exactly (see ../ladder/express.mjs). x-powered-by and ETag are off, so Express does the per-request work
// the other peers do (the cost of its defaults is measured in ../ladder/express.mjs's header).
//
// Contract: metadata.mjs's header (status, content-type and body byte-identical with metadata-rs, the Redis
// commands the same). A percent-encoding in the id that does not decode (/v1/metadata/%zz) makes Express's
// router fail with a 400 error, answered metadata.mjs's 400 "malformed id". Where this peer answers otherwise
// (none of it in the tests): the region is the first `region` node's querystring (Express 5's "simple" query
// parser) finds, which differs from URLSearchParams only on malformed percent-encodings (no region passes
// them anyway).
//
// Env: as server-node.mjs (metadata.mjs's configFromEnv: METADATA_PORT (3001), METADATA_HOSTNAME (127.0.0.1),
// METADATA_DB (metadata.db), METADATA_REDIS_URL (unset: no cache), METADATA_REDIS_TTL (60 s),
// METADATA_REDIS_TIMEOUT_MS (50); bad values exit 64), PEER_PROCESSES (N > 1: a node:cluster primary and N
// workers on Node and on Bun, see ../frameworks.mjs; each worker has its own Redis connection). SQLite:
// node:sqlite on Node, bun:sqlite on Bun, read-only with the shared PRAGMAS. SIGTERM: close, exit 0.
import http from "node:http";
import express from "express";
import {
  ANSWERS,
  CONTENT_TYPE,
  HEALTH_SQL,
  LOOKUP_SQL,
  PRAGMAS,
  cachedLookup,
  configFromEnv,
  createStore,
  health,
  lookup,
  regionOf,
} from "./metadata.mjs";
import { clusterPrimary, configOrExit } from "../processes.mjs";
import { prepareReadOnly } from "../sqlite.mjs";
import { engine, exitOnSigterm, packageVersion, readOnlyOpener } from "../frameworks.mjs";

const cfg = configOrExit("metadata-express", configFromEnv);
// PEER_PROCESSES=N > 1: this process becomes the cluster primary and stops here; workers go on.
await clusterPrimary("metadata-express");

const openDb = await readOnlyOpener();
// Read-only, the pragmas, both statements prepared once; any failure here is "database unavailable".
function open(path) {
  const [row, ping] = prepareReadOnly(openDb(path), PRAGMAS, [LOOKUP_SQL, HEALTH_SQL]);
  return { get: (id) => row.get(id), health: () => ping.get() };
}
const store = createStore(open, cfg.db);
// Loaded only with a cache, so the uncached peer runs (and weighs) exactly what it would without one.
const cache = cfg.redis ? await (await import("./cache.mjs")).openCache(cfg.redis) : null;

// The fixed answers' bodies encoded once.
const encoded = new Map(Object.values(ANSWERS).map((r) => [r, Buffer.from(r.body)]));

/** metadata.mjs's answer `r` ({ status, body (string or, from the cache, Buffer), headers? }) on `res`. */
function send(res, r) {
  res.status(r.status).setHeader("content-type", CONTENT_TYPE);
  if (r.headers !== undefined) res.set(r.headers);
  const body = r.body;
  res.send(typeof body === "string" ? (encoded.get(r) ?? Buffer.from(body)) : body);
}

const app = express();
app.disable("x-powered-by");
app.set("etag", false);
// Express matches "/v1/metadata/x/" and "/V1/METADATA/x" by default; metadata-rs answers 404 to both.
app.set("strict routing", true);
app.set("case sensitive routing", true);

const notAllowed = (req, res) => send(res, ANSWERS.methodNotAllowed);

// .get answers HEAD too; no body parser: a body sent anyway is left to node:http, which discards it.
app
  .route("/v1/metadata/:id")
  .get((req, res) => {
    const raw = req.query.region;
    // A repeated region: the first, as URLSearchParams.get (the plain peers) and metadata-rs take it.
    const first = Array.isArray(raw) ? raw[0] : raw;
    const id = req.params.id;
    if (cache === null) return send(res, lookup(store.get, id, first));
    const region = regionOf(first);
    if (region === null) return send(res, ANSWERS.badRegion);
    return cachedLookup(store, cache, id, region).then((r) => send(res, r));
  })
  .all(notAllowed);

app
  .route("/healthz")
  .get((req, res) => {
    const sqliteOk = store.healthy();
    if (cache === null) return send(res, health(sqliteOk, "disabled"));
    return cache.healthy().then((ok) => send(res, health(sqliteOk, ok ? "ok" : "down")));
  })
  .all(notAllowed);

app.use((req, res) => send(res, ANSWERS.notFound));

// The router's 400 for a parameter that does not decode (the only error these routes raise): metadata-rs's
// "malformed id". Anything else is a bug: 500.
app.use((err, req, res, next) => {
  if (err.status === 400) return send(res, ANSWERS.malformedId);
  res.status(500).setHeader("content-type", CONTENT_TYPE);
  res.send(Buffer.from(JSON.stringify({ error: "internal error" })));
});

const server = http.createServer(app);
server.listen(cfg.port, cfg.host, () => {
  console.log(`metadata peer: express ${packageVersion("express")} on ${engine()} listening on http://${cfg.host}:${cfg.port}`);
});

exitOnSigterm(() => {
  server.close();
  server.closeAllConnections();
});
