// Fastify 5 peer for the ladder (compare's fastify-node and fastify-bun: this file run by
// `node --disable-warning=ExperimentalWarning` or `bun run`, cwd bench/peers, NODE_ENV=production). The data
// access and the fixed answers are ladder.mjs's (the same SQLite, Postgres and upstream code server-node.mjs and
// server-bun.ts run); what is Fastify's is what a Fastify user would hand it:
//   routing      one route per path and method (405s are routes too), a not-found handler for the rest;
//   body         a content-type parser reading the bytes under Fastify's bodyLimit (65536) and decoding them
//                as ladder-rs does (UTF-8 strictly, a BOM refused, then JSON.parse);
//   validation   the route's `schema.body` = ladder.mjs's SCHEMA, compiled and run by Fastify's Ajv;
//   serializing  every 200 through Fastify's compiled serializer (the route's `schema.response[200]`, keys in
//                the order ladder-rs prints them); the fixed error answers are ladder.mjs's strings.
// Errors (parser, validator, body limit) go through one error handler that answers the contract's bodies.
//
// Contract: ladder.mjs's header (status, content-type and body byte-identical with ladder-rs; 400 messages
// are Fastify's / Ajv's own). Where this peer answers otherwise (none of it in the cross-runtime tests):
//   - a GET or HEAD declaring a body over 65536 bytes is answered normally (Fastify reads no body for GET/HEAD),
//     where ladder-rs says 413;
//   - a request whose Content-Type header does not parse as a media type gets 415 before any route runs
//     (Fastify's check), where ladder-rs ignores the header; any well-formed type is read as JSON;
//   - percent-encoded paths are decoded before matching (find-my-way): /ladder/%65mpty is /ladder/empty;
//   - methods node:http parses but Fastify does not route by default are added (addHttpMethod) so they get
//     405 on the ladder's paths, as ladder-rs answers them.
//
// Env: as server-node.mjs (ladder.mjs's configFromEnv: LADDER_PORT, LADDER_HOSTNAME, LADDER_DB, DATABASE_URL,
// LADDER_POOL_SIZE, LADDER_PG_TIMEOUT_MS, LADDER_UPSTREAM_URL, LADDER_UPSTREAM_TIMEOUT_MS; bad values exit 64),
// TLS_CERT / TLS_KEY / TLS_RESUME (../tls.mjs; HTTPS through Fastify's `https` option), PEER_PROCESSES (N > 1:
// a node:cluster primary and N workers on Node and on Bun, see ../frameworks.mjs). SQLite: node:sqlite on
// Node, bun:sqlite on Bun, read-only with the shared PRAGMAS. SIGTERM: close, exit 0.
//
// buildApp() is exported for fastify-serializer.mjs, which checks the response serializer's contract on these
// very routes; the server starts only when this file is the script run.
import http from "node:http";
import Fastify from "fastify";
import {
  ANSWERS,
  BODY_LIMIT,
  CONTENT_TYPE,
  PRAGMAS,
  SCHEMA,
  VIDEO_SQL,
  catalog,
  configFromEnv,
  createApp,
  itemKey,
} from "./ladder.mjs";
import { clusterPrimary, configOrExit } from "../processes.mjs";
import { prepareReadOnly } from "../sqlite.mjs";
import { nodeTlsOptions, scheme, tlsFromEnv } from "../tls.mjs";
import { engine, exitOnSigterm, isEntryPoint, readOnlyOpener } from "../frameworks.mjs";

const str = { type: "string" };
const bool = { type: "boolean" };
const int = { type: "integer" };
// SQLite columns may be NULL (ladder-rs prints null); ladder.mjs's video() has already refused anything else.
const nullableInt = { type: ["integer", "null"] };
const object = (properties) => ({ type: "object", required: Object.keys(properties), properties });

const VIDEO = {
  ok: bool,
  id: str,
  channel: { type: ["string", "null"] },
  duration_s: nullableInt,
  views: nullableInt,
};

/** The 200 answers' schemas, properties in ladder-rs's key order (fast-json-stringify prints that order). */
export const RESPONSES = Object.freeze({
  empty: object({ ok: bool }),
  health: object({ status: str }),
  json: object({
    ok: bool,
    total: int,
    items: {
      type: "array",
      items: object({
        id: int,
        name: str,
        category: str,
        tags: { type: "array", items: str },
        active: bool,
        price: int,
        counts: object({ stock: int, sold: int }),
      }),
    },
  }),
  validate: object({ ok: bool, id: str }),
  sqlite: object(VIDEO),
  postgres: object({ ...VIDEO, item: object({ name: str, score: int }) }),
  upstream: object({ ok: bool, token: str }),
});

// Every method node:http hands to a request handler (CONNECT is its own event), so each gets the contract's
// 405 on a ladder path rather than Fastify's 404 for a method it does not route.
const ALL_METHODS = http.METHODS.filter((m) => m !== "CONNECT");
const READS = ["GET", "HEAD"];

/** ladder.mjs's fixed answer `r` ({ status, body, headers? }) on `reply`. */
function answer(reply, r) {
  reply.code(r.status);
  if (r.headers !== undefined) reply.headers(r.headers);
  return reply.send(r.body);
}

const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** A 400 for the error handler. */
function badRequest(message) {
  const e = new Error(message);
  e.statusCode = 400;
  return e;
}

// serde_json (ladder-rs) refuses lone surrogate escapes such as "\ud800", which JSON.parse and Ajv accept;
// ladder.mjs's check() refuses them after validation, and so does this.
const wellFormed = (body) => body.tags.every((t) => t.isWellFormed()) && (body.note === undefined || body.note.isWellFormed());

/**
 * The Fastify app over `ladder` (createApp()'s object: video, item, upstreamToken), not yet listening.
 * `options` go to Fastify() (https, for one).
 */
export function buildApp(ladder, options = {}) {
  const app = Fastify({
    logger: false,
    bodyLimit: BODY_LIMIT,
    // Keep-alive connections are closed by app.close() too, so SIGTERM does not wait on idle clients.
    forceCloseConnections: true,
    ajv: {
      // Fastify's defaults would change what is validated: removeAdditional drops unknown properties (an
      // {"extra":1} body would pass, where ladder-rs and the plain peers refuse it with 400), coerceTypes
      // turns 1 into "1" and a lone "x" into ["x"] for the schema's strings and arrays, useDefaults fills
      // in defaults. Off, the body is checked as it came, so the verdicts are ladder-rs's.
      customOptions: { removeAdditional: false, coerceTypes: false, useDefaults: false, allErrors: false },
    },
    // FST_ERR_BAD_URL (a percent-encoding in the path that does not decode): no ladder path, so 404. This reply
    // skips the onSend hook below; a Buffer keeps the content-type it is given.
    frameworkErrors: (error, request, reply) =>
      reply.code(404).type(CONTENT_TYPE).send(Buffer.from(ANSWERS.notFound.body)),
    ...options,
  });
  for (const m of ALL_METHODS) if (!app.supportedMethods.includes(m)) app.addHttpMethod(m, { hasBody: true });

  // Fastify labels JSON `application/json; charset=utf-8`, and appends the charset to an `application/json`
  // a handler sets too; the contract is `application/json` exactly, so it is pinned here, after Fastify's own
  // handling, on every answer (all are JSON).
  app.addHook("onSend", (request, reply, payload, done) => {
    reply.header("content-type", CONTENT_TYPE);
    done(null, payload);
  });

  app.setErrorHandler((error, request, reply) => {
    // Fastify's FST_ERR_CTP_BODY_TOO_LARGE: a declared length over bodyLimit, or a chunked body growing past it.
    if (error.statusCode === 413) return answer(reply, ANSWERS.tooLarge);
    if (error.statusCode === 400 || error.validation !== undefined) {
      reply.code(400);
      return reply.send(JSON.stringify({ error: error.message }));
    }
    // 415 (a Content-Type that is not a media type) and anything unexpected keep Fastify's status.
    const status = error.statusCode >= 400 && error.statusCode < 600 ? error.statusCode : 500;
    reply.code(status);
    return reply.send(JSON.stringify({ error: error.message }));
  });
  app.setNotFoundHandler((request, reply) => answer(reply, ANSWERS.notFound));

  // A body sent where none is read (405s, 404s, an empty rung's GET) is read under bodyLimit and dropped:
  // ladder-rs too reads it (413 past the limit) and answers by the path. Every content type alike, as there.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "buffer" }, (request, bytes, done) => done(null));

  const read = (url, schema, handler) => {
    app.get(url, { schema: { response: { 200: schema } } }, handler);
    app.route({ method: ALL_METHODS.filter((m) => !READS.includes(m)), url, handler: (q, r) => answer(r, ANSWERS.notAllowedRead) });
  };
  // GET routes answer HEAD too (Fastify's exposeHeadRoutes). Handlers return the value; Fastify serializes it.
  read("/ladder/empty", RESPONSES.empty, () => ({ ok: true }));
  read("/ladder/json", RESPONSES.json, () => catalog());
  read("/healthz", RESPONSES.health, () => ({ status: "ok" }));
  read("/ladder/upstream", RESPONSES.upstream, async (request, reply) => {
    const token = await ladder.upstreamToken();
    return typeof token === "string" ? { ok: true, token } : answer(reply, token);
  });

  // The rungs, in their own encapsulated context: only here is the body parsed as JSON.
  app.register(async (rungs) => {
    rungs.removeAllContentTypeParsers();
    rungs.addContentTypeParser("*", { parseAs: "buffer" }, (request, bytes, done) => {
      let value;
      try {
        value = JSON.parse(decoder.decode(bytes));
      } catch (e) {
        return done(badRequest(`invalid JSON: ${e.message}`));
      }
      done(null, value);
    });
    const rung = (url, handler) => {
      rungs.post(url, { schema: { body: SCHEMA, response: { 200: RESPONSES[url.slice("/ladder/".length)] } } }, (request, reply) => {
        // No body at all (no content-length, no chunks): Fastify skips parsing and validation sees undefined.
        const body = request.body;
        if (body === undefined || body === null) throw badRequest("invalid JSON: empty body");
        if (!wellFormed(body)) throw badRequest("invalid JSON: lone surrogate in a string");
        return handler(body.id, reply);
      });
      rungs.route({ method: ALL_METHODS.filter((m) => m !== "POST"), url, handler: (q, r) => answer(r, ANSWERS.notAllowedPost) });
    };
    rung("/ladder/validate", (id) => ({ ok: true, id }));
    // video(): the row as { ok, id, channel, duration_s, views }, counts already checked to be integers (500
    // otherwise), so nothing relies on the serializer's coercion; or a fixed answer (404, 500, 503).
    rung("/ladder/sqlite", (id, reply) => {
      const v = ladder.video(id);
      return v.ok === true ? v : answer(reply, v);
    });
    rung("/ladder/postgres", async (id, reply) => {
      const v = ladder.video(id);
      if (v.ok !== true) return answer(reply, v);
      const item = await ladder.item(itemKey(id));
      if (item.status !== undefined) return answer(reply, item);
      v.item = item;
      return v;
    });
  });
  return app;
}

async function main() {
  const cfg = configOrExit("ladder-fastify", configFromEnv);
  // TLS_CERT / TLS_KEY read and checked before any worker is forked or the port is bound (exit 64 if bad).
  const tls = configOrExit("ladder-fastify", tlsFromEnv);
  // PEER_PROCESSES=N > 1: this process becomes the cluster primary and stops here; workers go on.
  await clusterPrimary("ladder-fastify");

  const open = await readOnlyOpener();
  // Read-only, the pragmas, the statement prepared once; any failure here is "database unavailable".
  const openSqlite = (path) => {
    const [video] = prepareReadOnly(open(path), PRAGMAS, [VIDEO_SQL]);
    return { get: (id) => video.get(id) };
  };
  const ladder = createApp(cfg, openSqlite);
  const app = buildApp(ladder, tls === null ? {} : { https: nodeTlsOptions(tls) });
  await app.listen({ port: cfg.port, host: cfg.host });
  console.log(`ladder peer: fastify ${app.version} on ${engine()} listening on ${scheme(tls)}://${cfg.host}:${cfg.port}`);
  exitOnSigterm(async () => {
    await app.close();
    await ladder.close();
  });
}

if (isEntryPoint(import.meta.url)) await main();
