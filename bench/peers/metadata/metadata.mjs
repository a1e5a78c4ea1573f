// Video-metadata benchmark peer: the handler logic shared by server-bun.ts (Bun.serve + bun:sqlite),
// server-node.mjs (node:http + node:sqlite) and lookup-bench.mjs, so every runtime runs exactly the
// same JavaScript and only the HTTP server and the SQLite binding differ. Plain ESM, no dependencies
// (the Redis client lives in cache.mjs, which only the servers load).
//
// Contract (byte-identical with metadata-rs: status, content-type, body):
//   GET|HEAD /v1/metadata/{id}?region=R  200 {"id","channel","title","description","duration","views","trending"}
//                                        404 null (unknown id); 400 malformed id / bad region
//                                        500 stored locales not a JSON object; 503 any SQLite error (Retry-After: 1)
//   other methods on that route          405 {"error":"method not allowed"}, Allow: GET, HEAD
//   GET|HEAD /healthz                    200 {"status":"ok","sqlite":"ok","redis":R} or 503
//                                        {"status":"unavailable","sqlite":"down","redis":R}; R is "disabled"
//                                        without a cache, else "ok" or "down" (PING within the timeout);
//                                        Redis never makes it fail
//   anything else                        404 {"error":"not found"}
// Every response is `content-type: application/json` with a content-length; a cache hit is answered
// with exactly the headers and bytes of the miss that filled it.
//
// Optional Redis cache-aside, as metadata-rs's (crates/metadata/src/cache.rs and api.rs): with
// METADATA_REDIS_URL set, a valid metadata request (the id decoded, the region checked; 400s and
// 405s never touch Redis) first GETs `metadata:v1:<region>:<id>` (region "en" when absent or empty).
// A hit answers the stored bytes with 200. A miss reads SQLite, answers, and fills the cache with
// `SET key body EX ttl` without making the response wait; only 200 bodies are stored (a 404 costs a
// GET and a lookup). Every command is bounded by METADATA_REDIS_TIMEOUT_MS; Redis slow or down sends
// the request straight to SQLite (see cache.mjs). HEAD takes the same path as GET.
//
// The servers supply the SQLite side as an `open(path)` function returning { get(id), health() }
// (each throws on any SQLite error); `createStore` opens it once at startup and, while opening
// fails, retries on later requests at most once per RETRY_OPEN_MS. The cache, when there is one,
// is { get(key) -> Promise<body or null>, put(key, body), healthy() -> Promise<boolean> }, none of
// which rejects (cache.mjs's openCache).

export const REGIONS = Object.freeze(["ja", "ko", "zh-TW", "en", "th"]);

export const LOOKUP_SQL = "SELECT channel, duration_s, views, locales FROM videos WHERE id = ?";
export const HEALTH_SQL = "SELECT 1 FROM videos LIMIT 1";
// Same pragmas as metadata-rs, so the comparison is runtime against runtime, not configuration.
export const PRAGMAS = Object.freeze(["PRAGMA busy_timeout = 100", "PRAGMA mmap_size = 268435456"]);
export const RETRY_OPEN_MS = 250;

export const CONTENT_TYPE = "application/json";
const PREFIX = "/v1/metadata/";
const REGION_RE = /^[A-Za-z0-9-]{1,35}$/;

const NOT_FOUND = JSON.stringify({ error: "not found" });
const METHOD_NOT_ALLOWED = JSON.stringify({ error: "method not allowed" });
const MALFORMED_ID = JSON.stringify({ error: "malformed id" });
const BAD_REGION = JSON.stringify({ error: "region must be a language tag like en or zh-TW" });
const MALFORMED_STORED = JSON.stringify({ error: "stored metadata is malformed" });
const DB_UNAVAILABLE = JSON.stringify({ error: "database unavailable" });
const NO_REDIS = "disabled";
const NO_ROW = "null";

const ALLOW = Object.freeze({ allow: "GET, HEAD" });
const RETRY_AFTER = Object.freeze({ "retry-after": "1" });

// The fixed answers by name, for the framework peers (fastify.mjs, express.mjs), which route themselves and
// answer with these same bytes.
export const ANSWERS = Object.freeze({
  notFound: Object.freeze({ status: 404, body: NOT_FOUND }),
  methodNotAllowed: Object.freeze({ status: 405, body: METHOD_NOT_ALLOWED, headers: ALLOW }),
  malformedId: Object.freeze({ status: 400, body: MALFORMED_ID }),
  badRegion: Object.freeze({ status: 400, body: BAD_REGION }),
});

const pad2 = (n) => (n < 10 ? "0" + n : "" + n);

/** Seconds as M:SS, or H:MM:SS from one hour up; negative, missing or non-numeric counts as 0. */
export function formatDuration(value) {
  const s = Math.max(0, Math.trunc(Number(value ?? 0)) || 0);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  return h > 0 ? `${h}:${pad2(m)}:${pad2(sec)}` : `${m}:${pad2(sec)}`;
}

/** The region a raw query value names (null or "" means en), or null when it is not a plausible tag. */
export function regionOf(raw) {
  if (raw === null || raw === undefined || raw === "") return "en";
  return REGION_RE.test(raw) ? raw : null;
}

/**
 * One lookup: the JSON answer for `id` (already decoded) in `region` (the raw query value: null
 * or "" means en). `getRow(id)` returns the row or null/undefined and throws on SQLite errors.
 * Returns { status, body } (body a string), plus `headers` when the response needs extra ones.
 */
export function lookup(getRow, id, region) {
  const valid = regionOf(region);
  return valid === null ? { status: 400, body: BAD_REGION } : render(getRow, id, valid);
}

/** lookup() for a region regionOf() has already checked. */
function render(getRow, id, region) {
  let row;
  try {
    row = getRow(id);
  } catch {
    return { status: 503, body: DB_UNAVAILABLE, headers: RETRY_AFTER };
  }
  if (row === null || row === undefined) return { status: 404, body: NO_ROW };
  let locales;
  try {
    locales = JSON.parse(row.locales);
  } catch {
    return { status: 500, body: MALFORMED_STORED };
  }
  if (locales === null || typeof locales !== "object" || Array.isArray(locales)) {
    return { status: 500, body: MALFORMED_STORED };
  }
  const has = Object.hasOwn(locales, region);
  const loc = has ? locales[region] : Object.hasOwn(locales, "en") ? locales.en : null;
  const isObj = loc !== null && typeof loc === "object";
  const title = isObj && typeof loc.title === "string" ? loc.title : null;
  const description = isObj && typeof loc.description === "string" ? loc.description : null;
  const views = row.views;
  const body = JSON.stringify({
    id,
    channel: row.channel,
    title,
    description,
    duration: formatDuration(row.duration_s),
    views,
    trending: views !== null && views > 500000 && has,
  });
  return { status: 200, body };
}

/**
 * Which route a request target (path and query, as sent on the request line) names:
 *   { kind: "metadata", rawId, query } | { kind: "health" } | { kind: "none" }
 */
export function route(target) {
  const q = target.indexOf("?");
  const path = q === -1 ? target : target.slice(0, q);
  if (path.startsWith(PREFIX)) {
    const rawId = path.slice(PREFIX.length);
    if (rawId !== "" && !rawId.includes("/")) {
      return { kind: "metadata", rawId, query: q === -1 ? "" : target.slice(q + 1) };
    }
    return { kind: "none" };
  }
  if (path === "/healthz") return { kind: "health" };
  return { kind: "none" };
}

/** The request target of Bun's absolute req.url: everything from the first "/" after the authority. */
export function targetOfUrl(url) {
  const start = url.indexOf("/", url.indexOf("//") + 2);
  return start === -1 ? "/" : url.slice(start);
}

/** The SQLite side, opened now and reopened lazily (at most once per RETRY_OPEN_MS) while it fails. */
export function createStore(open, path, log = (msg) => console.error(msg)) {
  let db = null;
  let lastAttempt = -Infinity;
  let lastError = "";
  const tryOpen = () => {
    const now = performance.now();
    if (now - lastAttempt < RETRY_OPEN_MS) return null;
    lastAttempt = now;
    try {
      db = open(path);
      if (lastError) log(`metadata peer: opened ${path}`);
      lastError = "";
    } catch (e) {
      const msg = `metadata peer: cannot open ${path}: ${e && e.message}`;
      if (msg !== lastError) log(msg); // once per distinct error, not once per request
      lastError = msg;
    }
    return db;
  };
  tryOpen();
  const current = () => db ?? tryOpen();
  return {
    // The getRow lookup() wants: throws (so lookup answers 503) while the database is unavailable.
    get(id) {
      const d = current();
      if (d === null) throw new Error("database unavailable");
      return d.get(id);
    },
    healthy() {
      const d = current();
      if (d === null) return false;
      try {
        d.health();
        return true;
      } catch {
        return false;
      }
    },
  };
}

/** The Redis key of a rendered response: `metadata:v1:<region>:<id>`, as metadata-rs's Cache::key. */
export function cacheKey(region, id) {
  // The region is checked to [A-Za-z0-9-], so the first ":" after it ends it: no two pairs share a key.
  return "metadata:v1:" + region + ":" + id;
}

/**
 * The whole request: method and raw target in, { status, body, headers } out (headers extra to
 * content-type and content-length, which the servers always set; body a string, or a Buffer on a
 * cache hit; still present for HEAD, the servers leave it off).
 *
 * Without a cache (`cache` null) the answer is returned as it is, synchronously, as before. With one,
 * the metadata and health routes return a Promise of it (never rejected by Redis), the others still
 * answer synchronously: metadata-rs likewise answers inline and only awaits when Redis is involved, so
 * the uncached workload keeps paying nothing for the cache. The servers check which they got.
 */
export function handle(store, method, target, cache = null) {
  const r = route(target);
  if (r.kind === "metadata") {
    if (method !== "GET" && method !== "HEAD") return { status: 405, body: METHOD_NOT_ALLOWED, headers: ALLOW };
    let id;
    try {
      id = decodeURIComponent(r.rawId);
    } catch {
      return { status: 400, body: MALFORMED_ID };
    }
    const region = regionOf(r.query === "" ? null : new URLSearchParams(r.query).get("region"));
    if (region === null) return { status: 400, body: BAD_REGION };
    return cache === null ? render(store.get, id, region) : cachedLookup(store, cache, id, region);
  }
  if (r.kind === "health") {
    if (method !== "GET" && method !== "HEAD") return { status: 405, body: METHOD_NOT_ALLOWED, headers: ALLOW };
    const sqliteOk = store.healthy();
    if (cache === null) return health(sqliteOk, NO_REDIS);
    return cache.healthy().then((ok) => health(sqliteOk, ok ? "ok" : "down"));
  }
  return { status: 404, body: NOT_FOUND };
}

/** Cache-aside: GET first; on a miss SQLite answers and a 200 body is SET in the background. `region` is
 * regionOf()'s (already checked). */
export async function cachedLookup(store, cache, id, region) {
  const key = cacheKey(region, id);
  const cached = await cache.get(key);
  if (cached !== null) return { status: 200, body: cached };
  const answer = render(store.get, id, region);
  // Not awaited: the response does not wait for the SET (metadata-rs spawns it). put() never rejects.
  if (answer.status === 200) cache.put(key, answer.body);
  return answer;
}

/** /healthz: the status follows SQLite alone; `redis` is "disabled", "ok" or "down". */
export function health(sqliteOk, redis) {
  const body = sqliteOk
    ? JSON.stringify({ status: "ok", sqlite: "ok", redis })
    : JSON.stringify({ status: "unavailable", sqlite: "down", redis });
  return { status: sqliteOk ? 200 : 503, body };
}

/**
 * Server settings from the environment (the same variables metadata-rs reads). `redis` is null without
 * METADATA_REDIS_URL (or with it empty), else { url, ttl (s), timeoutMs }. Bad values throw, naming the
 * variable: the servers print that line and exit 64, as metadata-rs does.
 */
export function configFromEnv(env = process.env) {
  const port = Number(env.METADATA_PORT ?? 3001);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`METADATA_PORT: bad port ${env.METADATA_PORT}`);
  return {
    port,
    host: env.METADATA_HOSTNAME || "127.0.0.1",
    db: env.METADATA_DB || "metadata.db",
    redis: redisFromEnv(env),
  };
}

function redisFromEnv(env) {
  const url = env.METADATA_REDIS_URL;
  if (url === undefined || url === "") return null;
  checkRedisUrl(url);
  const ttl = wholeNumber(env, "METADATA_REDIS_TTL", 60);
  if (ttl < 1) throw new Error(`METADATA_REDIS_TTL: must be at least 1 second, not ${ttl}`);
  // As metadata-rs: 0 ms would time every command out, so it means 1.
  const timeoutMs = Math.max(1, wholeNumber(env, "METADATA_REDIS_TIMEOUT_MS", 50));
  return { url, ttl, timeoutMs };
}

/** A URL node-redis can use: redis:// or rediss://, a host, and at most a database number as the path. */
function checkRedisUrl(url) {
  let parsed;
  try {
    parsed = new URL(url);
  } catch {
    throw new Error(`METADATA_REDIS_URL ${JSON.stringify(url)}: not a URL`);
  }
  if (parsed.protocol !== "redis:" && parsed.protocol !== "rediss:") {
    throw new Error(`METADATA_REDIS_URL ${JSON.stringify(url)}: the peers take redis:// or rediss:// URLs`);
  }
  if (parsed.hostname === "") throw new Error(`METADATA_REDIS_URL ${JSON.stringify(url)}: missing hostname`);
  if (!/^(\/[0-9]*)?$/.test(parsed.pathname)) {
    throw new Error(`METADATA_REDIS_URL ${JSON.stringify(url)}: invalid database number`);
  }
}

/** An unsigned integer variable, as clap parses one for metadata-rs (an empty value is an error too). */
function wholeNumber(env, name, fallback) {
  const raw = env[name];
  if (raw === undefined) return fallback;
  const n = /^\+?[0-9]+$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isSafeInteger(n)) throw new Error(`${name}: not a whole number: ${JSON.stringify(raw)}`);
  return n;
}
