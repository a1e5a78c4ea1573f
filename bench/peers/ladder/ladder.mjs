// Ladder peers: the routing, validation and response logic shared by server-bun.ts (Bun.serve +
// bun:sqlite) and server-node.mjs (node:http + node:sqlite), so both runtimes run the same JavaScript
// and only the HTTP server and the SQLite binding differ. Postgres through `pg` in both.
//
// Contract (byte-identical with ladder-rs in crates/ladder: status, content-type, body):
//   GET|HEAD /ladder/empty     200 {"ok":true}
//   GET|HEAD /ladder/json      200 catalog(): 1,043 bytes of JSON built and serialized per request
//   POST /ladder/validate      JSON body checked against SCHEMA (ajv, compiled once):
//                              200 {"ok":true,"id":ID}; 400 {"error":…} (not JSON / not UTF-8 / schema)
//   POST /ladder/sqlite        that, then VIDEO_SQL with the id:
//                              200 {"ok":true,"id","channel","duration_s","views"}; 404 {"error":"not found"}
//   POST /ladder/postgres      that, then ITEM_SQL with itemKey(id):
//                              200 {…the sqlite rung's fields…,"item":{"name","score"}}; 404 {"error":"item not found"}
//   GET|HEAD /ladder/upstream  GET LADDER_UPSTREAM_URL with the runtime's fetch (pooled, keep-alive), the whole call
//                              under LADDER_UPSTREAM_TIMEOUT_MS, then JSON.parse(its UTF-8 body).token:
//                              200 {"ok":true,"token":TOKEN}; 503 {"error":"upstream not configured"} (no URL);
//                              502 {"error":"upstream failed"} (connect error, non-2xx, no redirects followed, body
//                              over MAX_ANSWER_BYTES, not JSON, token not a well-formed string);
//                              504 {"error":"upstream timed out"}; no Retry-After on any of them
//   GET|HEAD /healthz          200 {"status":"ok"}
//   a known path, other method 405 {"error":"method not allowed"}, Allow: GET, HEAD | POST
//   anything else              404 {"error":"not found"}
//   declared or read body over BODY_LIMIT (any path)  413 {"error":"request body exceeds the limit of 65536 bytes"}
//   SQLite or Postgres failing 503 {"error":"database unavailable"}, Retry-After: 1
//   a stored row with a non-integer count or a non-text channel  500 {"error":"stored video is malformed"}
// The 400 messages differ between runtimes (each names its own parser's or validator's complaint).
// Every response is `content-type: application/json` with a content-length.
//
// Env (the same names ladder-rs reads): LADDER_PORT (3002), LADDER_HOSTNAME (0.0.0.0), LADDER_DB
// (metadata.db, opened read-only), DATABASE_URL (unset: the postgres rung answers 503),
// LADDER_POOL_SIZE (10), LADDER_PG_TIMEOUT_MS (2000), LADDER_UPSTREAM_URL (an http:// URL; unset or empty: the
// upstream route answers 503), LADDER_UPSTREAM_TIMEOUT_MS (2000).
import Ajv from "ajv";
import pg from "pg";

export const BODY_LIMIT = 64 * 1024;
export const VIDEO_SQL = "SELECT channel, duration_s, views FROM videos WHERE id = ?";
export const ITEM_SQL = "SELECT name, score FROM ladder_items WHERE id = $1";
// Same pragmas as ladder-rs (and metadata-rs), so the comparison is runtime against runtime.
export const PRAGMAS = Object.freeze(["PRAGMA busy_timeout = 100", "PRAGMA mmap_size = 268435456"]);
export const RETRY_OPEN_MS = 250;
export const CONTENT_TYPE = "application/json";
// The largest upstream answer taken (1 MiB), as ladder-rs's MAX_ANSWER_BYTES.
export const MAX_ANSWER_BYTES = 1024 * 1024;

// The same schema as crates/ladder/src/body.rs (the cross-runtime test compares them).
export const SCHEMA = {
  type: "object",
  additionalProperties: false,
  required: ["id", "region", "tags"],
  properties: {
    id: { type: "string", pattern: "^[A-Za-z0-9_-]{1,32}$" },
    region: { type: "string", pattern: "^[A-Za-z-]{2,35}$" },
    tags: { type: "array", maxItems: 16, items: { type: "string", maxLength: 32 } },
    note: { type: "string", maxLength: 280 },
  },
};

// The GET /ladder/json document, the same content as crates/ladder/src/catalog.rs. It exists to give the
// ladder a rung whose per-request work is building a ~1 KiB value and serializing it (HttpArena's json-tls
// size, the published ladder's "1 KB JSON"), with no body and no database. Integers, booleans and ASCII
// strings that need no escaping only, so JSON.stringify and serde_json print the same bytes by construction.
const CATALOG_ITEMS = Object.freeze([
  { id: 1, name: "Anvil", category: "tools", tags: ["iron", "heavy"], active: true, price: 18900, counts: { stock: 12, sold: 340 } },
  { id: 2, name: "Bellows", category: "tools", tags: ["leather"], active: true, price: 4250, counts: { stock: 4, sold: 57 } },
  { id: 3, name: "Chisel", category: "tools", tags: ["steel", "small"], active: false, price: 1299, counts: { stock: 0, sold: 1210 } },
  { id: 4, name: "Dowel", category: "parts", tags: ["oak", "small", "bulk"], active: true, price: 15, counts: { stock: 5000, sold: 88123 } },
  { id: 5, name: "Easel", category: "studio", tags: ["pine"], active: true, price: 7600, counts: { stock: 7, sold: 19 } },
  { id: 6, name: "Ferrule", category: "parts", tags: ["brass", "small"], active: true, price: 85, counts: { stock: 820, sold: 4406 } },
  { id: 7, name: "Gimlet", category: "tools", tags: ["steel"], active: false, price: 950, counts: { stock: 3, sold: 95 } },
  { id: 8, name: "Hinge", category: "parts", tags: ["brass", "bulk"], active: true, price: 240, counts: { stock: 1500, sold: 23017 } },
]);

/**
 * A fresh catalog document, built on every request and stringified right after: building and serializing is
 * the work this rung compares, so it is not cached as a string. Each item is a fresh object with a fresh
 * counts object (ladder-rs copies its structs by value into a fresh Vec); the tags arrays stay shared, as
 * ladder-rs shares its static slices.
 */
export function catalog() {
  return { ok: true, total: CATALOG_ITEMS.length, items: CATALOG_ITEMS.map((r) => ({ ...r, counts: { ...r.counts } })) };
}

/** The ladder_items row a video id reads: sum of its character codes (ids are ASCII) mod 1000, plus 1. */
export function itemKey(id) {
  let sum = 0;
  for (let i = 0; i < id.length; i++) sum += id.charCodeAt(i);
  return (sum % 1000) + 1;
}

const json = (status, body, headers) => (headers ? { status, body, headers } : { status, body });
const error = (status, message, headers) => json(status, JSON.stringify({ error: message }), headers);

const OK = json(200, JSON.stringify({ ok: true }));
const HEALTH_OK = json(200, JSON.stringify({ status: "ok" }));
const NOT_FOUND = error(404, "not found");
const ITEM_NOT_FOUND = error(404, "item not found");
const UNAVAILABLE = error(503, "database unavailable", Object.freeze({ "retry-after": "1" }));
const MALFORMED = error(500, "stored video is malformed");
const NOT_ALLOWED_READ = error(405, "method not allowed", Object.freeze({ allow: "GET, HEAD" }));
const NOT_ALLOWED_POST = error(405, "method not allowed", Object.freeze({ allow: "POST" }));
const UPSTREAM_NOT_CONFIGURED = error(503, "upstream not configured");
const UPSTREAM_FAILED = error(502, "upstream failed");
const UPSTREAM_TIMED_OUT = error(504, "upstream timed out");
export const TOO_LARGE = error(413, `request body exceeds the limit of ${BODY_LIMIT} bytes`, Object.freeze({ connection: "close" }));
// The fixed answers by name, for the framework peers (fastify.mjs, express.mjs), which route themselves and
// answer with these same bytes.
export const ANSWERS = Object.freeze({
  ok: OK,
  health: HEALTH_OK,
  notFound: NOT_FOUND,
  itemNotFound: ITEM_NOT_FOUND,
  unavailable: UNAVAILABLE,
  malformed: MALFORMED,
  notAllowedRead: NOT_ALLOWED_READ,
  notAllowedPost: NOT_ALLOWED_POST,
  tooLarge: TOO_LARGE,
});

const RUNGS = new Map([
  ["/ladder/validate", "validate"],
  ["/ladder/sqlite", "sqlite"],
  ["/ladder/postgres", "postgres"],
]);

// fatal: invalid UTF-8 is a 400 (as in ladder-rs), not U+FFFD; ignoreBOM: a BOM stays and JSON.parse refuses it.
const DECODER = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const validateBody = new Ajv({ allErrors: false }).compile(SCHEMA);

/** The request target of Bun's absolute req.url: everything from the first "/" after the authority. */
export function targetOfUrl(url) {
  const start = url.indexOf("/", url.indexOf("//") + 2);
  return start === -1 ? "/" : url.slice(start);
}

/** The body's id when it is UTF-8 JSON matching SCHEMA, else { error } for a 400. */
export function check(bytes) {
  let value;
  try {
    value = JSON.parse(DECODER.decode(bytes));
  } catch (e) {
    return { error: `invalid JSON: ${e.message}` };
  }
  if (!validateBody(value)) {
    const first = validateBody.errors[0];
    return { error: `${first.instancePath || "/"}: ${first.message}` };
  }
  // serde_json (ladder-rs) refuses lone surrogate escapes such as "\ud800"; so do the peers.
  if (!value.tags.every((t) => t.isWellFormed()) || (value.note !== undefined && !value.note.isWellFormed())) {
    return { error: "invalid JSON: lone surrogate in a string" };
  }
  return { id: value.id };
}

/**
 * The `token` of an upstream answer (bytes): UTF-8 JSON (fatal decoding, a BOM refused, as serde_json does in
 * ladder-rs), its `token` a well-formed string; else undefined. JSON.parse keeps the last of duplicate keys;
 * ladder-rs reads them the same way.
 */
export function tokenOf(bytes) {
  let value;
  try {
    value = JSON.parse(DECODER.decode(bytes));
  } catch {
    return undefined;
  }
  const token = value?.token;
  return typeof token === "string" && token.isWellFormed() ? token : undefined;
}

const isCount = (v) => v === null || (typeof v === "number" && Number.isInteger(v));

/**
 * The app around the two databases. `openSqlite(path)` returns { get(id) } (row or null/undefined) and
 * throws on any SQLite error; it is opened now and, while it fails, reopened at most every RETRY_OPEN_MS.
 */
export function createApp(cfg, openSqlite, log = (msg) => console.error(msg)) {
  // SQLite: one connection; dropped after an error, reopened lazily (as ladder-rs does per worker).
  let db = null;
  let lastAttempt = -Infinity;
  let sqliteFailing = false;
  const sqliteFailed = (e) => {
    db = null;
    if (!sqliteFailing) log(`ladder peer: SQLite unavailable (${e && e.message}); answering 503`);
    sqliteFailing = true;
  };
  const tryOpen = () => {
    const now = performance.now();
    if (now - lastAttempt < RETRY_OPEN_MS) return null;
    lastAttempt = now;
    try {
      db = openSqlite(cfg.db);
    } catch (e) {
      sqliteFailed(e);
    }
    return db;
  };
  tryOpen();

  // Postgres: a lazy pool, so the server starts (and the other rungs work) while Postgres is down.
  let pool = null;
  if (cfg.databaseUrl) {
    pool = new pg.Pool({
      connectionString: cfg.databaseUrl,
      max: cfg.poolSize,
      connectionTimeoutMillis: cfg.pgTimeoutMs, // waiting for a pooled client, and connecting
      query_timeout: cfg.pgTimeoutMs,
      statement_timeout: cfg.pgTimeoutMs,
    });
    // An idle client losing its connection emits on the pool; without a listener that kills the process.
    pool.on("error", () => {});
  }
  let pgFailing = false;
  const pgFailed = (e) => {
    if (!pgFailing) log(`ladder peer: Postgres unavailable (${e && e.message}); answering 503`);
    pgFailing = true;
    return UNAVAILABLE;
  };
  const ITEM_QUERY = { name: "ladder-item", text: ITEM_SQL, values: [0] };

  // Upstream: the runtime's own fetch and its global pool, the connection kept alive between calls.
  let upstreamFailing = false;
  const upstreamFailed = (answer, why) => {
    if (!upstreamFailing) log(`ladder peer: upstream call failed (${why}); answering ${answer.status}`);
    upstreamFailing = true;
    return answer;
  };

  /** The upstream route's answer; never rejects. */
  async function upstream() {
    const token = await upstreamToken();
    return typeof token === "string" ? json(200, JSON.stringify({ ok: true, token })) : token;
  }

  /** The upstream's token (a string), or the failure answer; never rejects. The body is read whole (a non-2xx
   * one too, so the connection goes back to the pool), under the same deadline as the request. */
  async function upstreamToken() {
    if (cfg.upstreamUrl === null) return UPSTREAM_NOT_CONFIGURED;
    const signal = AbortSignal.timeout(cfg.upstreamTimeoutMs);
    let token;
    try {
      // redirect "manual": a 3xx is an answer like any non-2xx (hyper's client follows none either).
      const res = await fetch(cfg.upstreamUrl, { signal, redirect: "manual" });
      const bytes = await res.arrayBuffer();
      if (bytes.byteLength > MAX_ANSWER_BYTES) return upstreamFailed(UPSTREAM_FAILED, "answer too long");
      if (!res.ok) return upstreamFailed(UPSTREAM_FAILED, `status ${res.status}`);
      token = tokenOf(bytes);
    } catch (e) {
      return upstreamFailed(signal.aborted ? UPSTREAM_TIMED_OUT : UPSTREAM_FAILED, e && e.message);
    }
    if (token === undefined) return upstreamFailed(UPSTREAM_FAILED, "the answer has no string token");
    if (upstreamFailing) log("ladder peer: upstream answers again");
    upstreamFailing = false;
    return token;
  }

  function video(id) {
    const d = db ?? tryOpen();
    if (d === null) return UNAVAILABLE;
    let row;
    try {
      row = d.get(id);
    } catch (e) {
      sqliteFailed(e);
      return UNAVAILABLE;
    }
    if (sqliteFailing) log("ladder peer: SQLite answers again");
    sqliteFailing = false;
    if (row === null || row === undefined) return NOT_FOUND;
    const { channel, duration_s, views } = row;
    if (!(channel === null || typeof channel === "string") || !isCount(duration_s) || !isCount(views)) return MALFORMED;
    return { ok: true, id, channel, duration_s, views };
  }

  async function item(key) {
    if (pool === null) return pgFailed(new Error("DATABASE_URL is not set"));
    let result;
    try {
      result = await pool.query({ ...ITEM_QUERY, values: [key] });
    } catch (e) {
      return pgFailed(e);
    }
    if (pgFailing) log("ladder peer: Postgres answers again");
    pgFailing = false;
    const row = result.rows[0];
    return row === undefined ? ITEM_NOT_FOUND : { name: row.name, score: row.score };
  }

  return {
    /**
     * Everything decided before the body is read: a response ({ status, body, headers? }), a promise of one
     * (the upstream route, which reads no body), or the rung ("validate" | "sqlite" | "postgres") whose body
     * the server reads (at most BODY_LIMIT bytes) for answer().
     */
    route(method, target, contentLength) {
      if (contentLength !== undefined && contentLength !== null && Number(contentLength) > BODY_LIMIT) return TOO_LARGE;
      const q = target.indexOf("?");
      const path = q === -1 ? target : target.slice(0, q);
      const rung = RUNGS.get(path);
      if (rung !== undefined) return method === "POST" ? rung : NOT_ALLOWED_POST;
      if (path === "/ladder/empty") return method === "GET" || method === "HEAD" ? OK : NOT_ALLOWED_READ;
      if (path === "/ladder/json") {
        return method === "GET" || method === "HEAD" ? json(200, JSON.stringify(catalog())) : NOT_ALLOWED_READ;
      }
      if (path === "/ladder/upstream") return method === "GET" || method === "HEAD" ? upstream() : NOT_ALLOWED_READ;
      if (path === "/healthz") return method === "GET" || method === "HEAD" ? HEALTH_OK : NOT_ALLOWED_READ;
      return NOT_FOUND;
    },

    /** The rung's answer to a body (bytes): a response, or a promise of one for the postgres rung. */
    answer(rung, bytes) {
      const checked = check(bytes);
      if (checked.error !== undefined) return error(400, checked.error);
      const id = checked.id;
      if (rung === "validate") return json(200, JSON.stringify({ ok: true, id }));
      const v = video(id);
      if (v.ok !== true) return v;
      if (rung === "sqlite") return json(200, JSON.stringify(v));
      return item(itemKey(id)).then((it) => {
        if (it.status !== undefined) return it;
        v.item = it;
        return json(200, JSON.stringify(v));
      });
    },

    async close() {
      if (pool !== null) await pool.end();
    },

    // The steps answer() is made of, for the framework peers, which parse, validate and serialize themselves:
    /** The sqlite rung's value { ok, id, channel, duration_s, views } (counts checked integers), or an answer. */
    video,
    /** A promise of the item { name, score }, or of an answer. */
    item,
    /** A promise of the upstream's token (a string), or of the failure answer. */
    upstreamToken,
  };
}

/** LADDER_UPSTREAM_URL: null when unset or empty; an http:// URL with a host (as ladder-rs takes), else an error. */
function upstreamUrl(raw) {
  if (raw === undefined || raw === "") return null;
  let url;
  try {
    url = new URL(raw);
  } catch {
    url = null;
  }
  if (url === null || url.protocol !== "http:" || url.hostname === "") {
    throw new Error(`LADDER_UPSTREAM_URL: ${JSON.stringify(raw)} is not an http:// URL with a host`);
  }
  return url.href;
}

/** Server settings from the environment (the same variables ladder-rs reads). */
export function configFromEnv(env = process.env) {
  const int = (name, fallback, min, max) => {
    const raw = env[name];
    if (raw === undefined || raw === "") return fallback;
    const n = Number(raw);
    if (!/^\d+$/.test(raw) || n < min || n > max) throw new Error(`${name}: bad value ${raw}`);
    return n;
  };
  return {
    port: int("LADDER_PORT", 3002, 0, 65535),
    host: env.LADDER_HOSTNAME || "0.0.0.0",
    db: env.LADDER_DB || "metadata.db",
    databaseUrl: env.DATABASE_URL || null,
    poolSize: int("LADDER_POOL_SIZE", 10, 1, 1000),
    pgTimeoutMs: int("LADDER_PG_TIMEOUT_MS", 2000, 1, 3_600_000),
    upstreamUrl: upstreamUrl(env.LADDER_UPSTREAM_URL),
    upstreamTimeoutMs: int("LADDER_UPSTREAM_TIMEOUT_MS", 2000, 1, 3_600_000),
  };
}
