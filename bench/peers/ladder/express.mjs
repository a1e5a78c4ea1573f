// Express 5 peer for the ladder (compare's express-node and express-bun: this file run by
// `node --disable-warning=ExperimentalWarning` or `bun run`, cwd bench/peers, NODE_ENV=production). The data
// access, validation and answers are ladder.mjs's (the same code server-node.mjs and server-bun.ts run: its
// ajv validator compiled once, its SQLite, Postgres and upstream calls); what is Express's is what an Express
// user would hand it:
//   routing      app.route(path).get|post(handler).all(405), a last middleware for 404;
//   body         express.raw() under a 64 KiB limit, for every content type (ladder-rs ignores Content-Type).
//                Not express.json(): it decodes with iconv-lite, so invalid UTF-8 turns into U+FFFD and a
//                leading BOM is stripped, and two bodies ladder-rs refuses with 400 (a "\xff" in a tag, a BOM
//                before the object) would pass. The raw bytes go to ladder.mjs's check(), which decodes them
//                strictly (fatal UTF-8, BOM kept and refused by JSON.parse) as the plain peers do;
//   answers      res.status().send(Buffer), errors from body-parser mapped to the contract in an error
//                middleware (413 with the contract's body; anything else it refuses, 400).
// res.json() / res.type("json") / res.send(string) would all label the answer `application/json;
// charset=utf-8` (Express 5's res.set adds the charset to any content-type); the contract is
// `application/json`, so it is set with node's setHeader and the body sent as a Buffer, which res.send leaves
// unlabelled (JSON.stringify, res.json's own serializer, builds it).
//
// x-powered-by and ETag are off, so Express does the per-request work the other peers do (no hash of every
// body, no extra header). What Express's defaults cost, measured on ladder-empty under Node 22.23.5: this file
// against a copy without the `app.disable("x-powered-by")` and `app.set("etag", false)` lines, one process at a
// time, alternated 6 times, each run
//   NODE_ENV=production LADDER_PORT=39400 LADDER_HOSTNAME=127.0.0.1 LADDER_DB=<a small metadata.db> \
//     taskset -c 0 node --disable-warning=ExperimentalWarning ladder/express.mjs
//   taskset -c 1 target/release/loadgen -c 64 -d 10s --warmup 3s --pin 1 http://127.0.0.1:39400/ladder/empty
// on the 2-core VM (2026-12-04, another job using it at times, hence the spread): 6,505 req/s (median) with
// both off, 6,112 with Express's defaults; per-pair ratio defaults/off 0.86-1.04, median 0.93: the defaults
// cost about 7% of Express's req/s on the smallest answer. (server-node.mjs did 31,878 and fastify.mjs 22,579
// req/s in one run of the same command.)
//
// Contract: ladder.mjs's header (status, content-type and body byte-identical with ladder-rs; 400 messages
// are ladder.mjs's). Where this peer answers otherwise (none of it in the cross-runtime tests): a body with a
// Content-Encoding other than identity is refused 400 by body-parser (inflate off; ladder-rs reads the bytes
// as they came, so usually 400 too, but a 404 or 405 path says 400 here).
//
// Env: as server-node.mjs (ladder.mjs's configFromEnv: LADDER_PORT, LADDER_HOSTNAME, LADDER_DB, DATABASE_URL,
// LADDER_POOL_SIZE, LADDER_PG_TIMEOUT_MS, LADDER_UPSTREAM_URL, LADDER_UPSTREAM_TIMEOUT_MS; bad values exit 64),
// TLS_CERT / TLS_KEY / TLS_RESUME (../tls.mjs; the app on node:https), PEER_PROCESSES (N > 1: a node:cluster
// primary and N workers on Node and on Bun, see ../frameworks.mjs). SQLite: node:sqlite on Node, bun:sqlite on
// Bun, read-only with the shared PRAGMAS. SIGTERM: close, exit 0.
import http from "node:http";
import https from "node:https";
import express from "express";
import { ANSWERS, BODY_LIMIT, CONTENT_TYPE, PRAGMAS, VIDEO_SQL, catalog, configFromEnv, createApp } from "./ladder.mjs";
import { clusterPrimary, configOrExit } from "../processes.mjs";
import { prepareReadOnly } from "../sqlite.mjs";
import { nodeTlsOptions, scheme, tlsFromEnv } from "../tls.mjs";
import { engine, exitOnSigterm, packageVersion, readOnlyOpener } from "../frameworks.mjs";

const cfg = configOrExit("ladder-express", configFromEnv);
// TLS_CERT / TLS_KEY read and checked before any worker is forked or the port is bound (exit 64 if bad).
const tls = configOrExit("ladder-express", tlsFromEnv);
// PEER_PROCESSES=N > 1: this process becomes the cluster primary and stops here; workers go on.
await clusterPrimary("ladder-express");

const open = await readOnlyOpener();
// Read-only, the pragmas, the statement prepared once; any failure here is "database unavailable".
function openSqlite(path) {
  const [video] = prepareReadOnly(open(path), PRAGMAS, [VIDEO_SQL]);
  return { get: (id) => video.get(id) };
}
const ladder = createApp(cfg, openSqlite);

// The fixed answers' bodies encoded once, as the plain peers' strings are built once.
const encoded = new Map(Object.values(ANSWERS).map((r) => [r, Buffer.from(r.body)]));

/** ladder.mjs's answer `r` ({ status, body, headers? }) on `res`. */
function send(res, r) {
  res.status(r.status).setHeader("content-type", CONTENT_TYPE);
  if (r.headers !== undefined) res.set(r.headers);
  res.send(encoded.get(r) ?? Buffer.from(r.body));
}

/** A 200 of `value`, serialized as res.json() would. */
function sendValue(res, value) {
  res.status(200).setHeader("content-type", CONTENT_TYPE);
  res.send(Buffer.from(JSON.stringify(value)));
}

const app = express();
app.disable("x-powered-by");
app.set("etag", false);
// Express matches "/ladder/json/" and "/LADDER/JSON" by default; the contract says 404 for both.
app.set("strict routing", true);
app.set("case sensitive routing", true);

// Every request with a body (any method, any path, any content type), read whole under the limit: ladder-rs
// reads a body it does not use too, and answers 413 past the limit on any path. A request without one
// (no Content-Length, no Transfer-Encoding: every GET of the benchmark) passes untouched.
app.use(express.raw({ type: () => true, limit: BODY_LIMIT, inflate: false }));

const notAllowedRead = (req, res) => send(res, ANSWERS.notAllowedRead);
const notAllowedPost = (req, res) => send(res, ANSWERS.notAllowedPost);

// .get answers HEAD too (Express runs the GET handler and leaves the body off).
app.route("/ladder/empty").get((req, res) => send(res, ANSWERS.ok)).all(notAllowedRead);
app.route("/ladder/json").get((req, res) => sendValue(res, catalog())).all(notAllowedRead);
app.route("/healthz").get((req, res) => send(res, ANSWERS.health)).all(notAllowedRead);
app
  .route("/ladder/upstream")
  .get(async (req, res) => {
    const token = await ladder.upstreamToken();
    if (typeof token === "string") sendValue(res, { ok: true, token });
    else send(res, token);
  })
  .all(notAllowedRead);

// The rungs: ladder.mjs's answer() checks the bytes (strict UTF-8, JSON.parse, the ajv validator, no lone
// surrogates) and climbs: SQLite, then Postgres (a promise). req.body is undefined when no body came at all.
for (const rung of ["validate", "sqlite", "postgres"]) {
  app
    .route(`/ladder/${rung}`)
    .post(async (req, res) => send(res, await ladder.answer(rung, req.body ?? new Uint8Array(0))))
    .all(notAllowedPost);
}

app.use((req, res) => send(res, ANSWERS.notFound));

// body-parser's refusals (err.type): entity.too.large (a declared length over the limit, or a chunked body
// growing past it; body-parser reads the rest off first, so the client gets the answer), request.size.invalid,
// encoding.unsupported, request.aborted. Anything else is a bug: 500.
app.use((err, req, res, next) => {
  if (err.type === "entity.too.large") return send(res, ANSWERS.tooLarge);
  if (err.status >= 400 && err.status < 500) {
    res.status(400).setHeader("content-type", CONTENT_TYPE);
    return res.send(Buffer.from(JSON.stringify({ error: err.message })));
  }
  res.status(500).setHeader("content-type", CONTENT_TYPE);
  res.send(Buffer.from(JSON.stringify({ error: "internal error" })));
});

const server = tls === null ? http.createServer(app) : https.createServer(nodeTlsOptions(tls), app);
server.listen(cfg.port, cfg.host, () => {
  console.log(
    `ladder peer: express ${packageVersion("express")} on ${engine()} listening on ${scheme(tls)}://${cfg.host}:${cfg.port}`,
  );
});

exitOnSigterm(async () => {
  server.close();
  server.closeAllConnections();
  await ladder.close();
});
