// Fastify 5 peer of metadata-rs (compare's fastify-node and fastify-bun on the metadata workloads: this file
// run by `node --disable-warning=ExperimentalWarning` or `bun run`, cwd bench/peers, NODE_ENV=production). The
// lookup, the cache-aside and the answers are metadata.mjs's and cache.mjs's (the code server-node.mjs and
// server-bun.ts run); what is Fastify's is the routing: the id from the route parameter (decoded by Fastify's
// router), the region from Fastify's parsed query, 405s as routes, a not-found handler for the rest.
//
// The 200 body is metadata.mjs's render() (JSON.stringify), not a response-schema serializer's: with the cache
// on, that exact string is what is stored in Redis and replayed on a hit, and every runtime builds it with the
// same code; Fastify sends a string as it is.
//
// Contract: metadata.mjs's header (status, content-type and body byte-identical with metadata-rs, the Redis
// commands the same). Settings that keep Fastify on it: maxParamLength raised from 100 (a longer id would be
// Fastify's 404 {"error":"not found"}, where metadata-rs looks it up and answers 404 null); a percent-encoding
// that does not decode (/v1/metadata/%zz) reaches Fastify's frameworkErrors hook as FST_ERR_BAD_URL and is
// answered metadata.mjs's 400 "malformed id"; /v1/metadata/ (an empty id, which Fastify's router matches) is
// answered 404 {"error":"not found"}. Where this peer answers otherwise (none of it in the tests): the
// region is the first `region` Fastify's query parser finds, decoded by fast-querystring rather than
// URLSearchParams (they differ only on malformed percent-encodings, which no region passes anyway);
// percent-encoded bytes in the fixed part of the path are decoded before matching (/v1/%6Detadata/x is
// /v1/metadata/x here, 404 in metadata-rs).
//
// Env: as server-node.mjs (metadata.mjs's configFromEnv: METADATA_PORT (3001), METADATA_HOSTNAME (127.0.0.1),
// METADATA_DB (metadata.db), METADATA_REDIS_URL (unset: no cache), METADATA_REDIS_TTL (60 s),
// METADATA_REDIS_TIMEOUT_MS (50); bad values exit 64), PEER_PROCESSES (N > 1: a node:cluster primary and N
// workers on Node and on Bun, see ../frameworks.mjs; each worker has its own Redis connection). SQLite:
// node:sqlite on Node, bun:sqlite on Bun, read-only with the shared PRAGMAS. SIGTERM: close, exit 0.
import Fastify from "fastify";
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
import { engine, exitOnSigterm, readOnlyOpener } from "../frameworks.mjs";

const PREFIX = "/v1/metadata/";

const cfg = configOrExit("metadata-fastify", configFromEnv);
// PEER_PROCESSES=N > 1: this process becomes the cluster primary and stops here; workers go on.
await clusterPrimary("metadata-fastify");

const openDb = await readOnlyOpener();
// Read-only, the pragmas, both statements prepared once; any failure here is "database unavailable".
function open(path) {
  const [row, ping] = prepareReadOnly(openDb(path), PRAGMAS, [LOOKUP_SQL, HEALTH_SQL]);
  return { get: (id) => row.get(id), health: () => ping.get() };
}
const store = createStore(open, cfg.db);
// Loaded only with a cache, so the uncached peer runs (and weighs) exactly what it would without one.
const cache = cfg.redis ? await (await import("./cache.mjs")).openCache(cfg.redis) : null;

/** metadata.mjs's answer `r` ({ status, body (string or, from the cache, Buffer), headers? }) on `reply`. */
function answer(reply, r) {
  reply.code(r.status);
  if (r.headers !== undefined) reply.headers(r.headers);
  return reply.send(r.body);
}

const app = Fastify({
  logger: false,
  // Ids are looked up whatever their length (metadata-rs has no limit of its own below the request line's).
  routerOptions: { maxParamLength: 16 * 1024 },
  // Keep-alive connections are closed by app.close() too, so SIGTERM does not wait on idle clients.
  forceCloseConnections: true,
  frameworkErrors: (error, request, reply) => {
    // FST_ERR_BAD_URL: a percent-encoding in the path that does not decode. In an id that is metadata-rs's
    // "malformed id"; anywhere else the path names nothing.
    const onRoute = error.code === "FST_ERR_BAD_URL" && request.url.startsWith(PREFIX);
    const r = onRoute ? ANSWERS.malformedId : ANSWERS.notFound;
    // This reply skips the onSend hook below; a Buffer keeps the content-type it is given.
    return reply.code(r.status).type(CONTENT_TYPE).send(Buffer.from(r.body));
  },
});

// Fastify labels JSON `application/json; charset=utf-8`, and a cache hit's Buffer
// `application/octet-stream`; the contract is `application/json` exactly for every answer, so it is pinned
// here, after Fastify's own handling.
app.addHook("onSend", (request, reply, payload, done) => {
  reply.header("content-type", CONTENT_TYPE);
  done(null, payload);
});

// No route reads a body: one sent anyway is drained unread (as server-node.mjs does), whatever its type.
app.removeAllContentTypeParsers();
app.addContentTypeParser("*", (request, payload, done) => {
  payload.on("end", () => done(null));
  payload.resume();
});

const OTHER_METHODS = app.supportedMethods.filter((m) => m !== "GET" && m !== "HEAD");
const notAllowed = (request, reply) => answer(reply, ANSWERS.methodNotAllowed);

// GET answers HEAD too (exposeHeadRoutes); the id arrives decoded, the query parsed.
app.get("/v1/metadata/:id", (request, reply) => {
  const raw = request.query.region;
  // A repeated region: the first, as URLSearchParams.get (the plain peers) and metadata-rs take it.
  const first = Array.isArray(raw) ? raw[0] : raw;
  const id = request.params.id;
  // find-my-way matches an empty parameter; metadata.mjs's route() (and metadata-rs) name no route there.
  if (id === "") return answer(reply, ANSWERS.notFound);
  if (cache === null) return answer(reply, lookup(store.get, id, first));
  const region = regionOf(first);
  if (region === null) return answer(reply, ANSWERS.badRegion);
  return cachedLookup(store, cache, id, region).then((r) => answer(reply, r));
});
app.route({ method: OTHER_METHODS, url: "/v1/metadata/:id", handler: notAllowed });

app.get("/healthz", (request, reply) => {
  const sqliteOk = store.healthy();
  if (cache === null) return answer(reply, health(sqliteOk, "disabled"));
  return cache.healthy().then((ok) => answer(reply, health(sqliteOk, ok ? "ok" : "down")));
});
app.route({ method: OTHER_METHODS, url: "/healthz", handler: notAllowed });

app.setNotFoundHandler((request, reply) => answer(reply, ANSWERS.notFound));

await app.listen({ port: cfg.port, host: cfg.host });
console.log(`metadata peer: fastify ${app.version} on ${engine()} listening on http://${cfg.host}:${cfg.port}`);

exitOnSigterm(() => app.close());
