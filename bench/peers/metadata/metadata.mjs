// Video-metadata benchmark peer: the handler logic shared by server-bun.ts (Bun.serve + bun:sqlite),
// server-node.mjs (node:http + node:sqlite) and lookup-bench.mjs, so every runtime runs exactly the
// same JavaScript and only the HTTP server and the SQLite binding differ. Plain ESM, no dependencies.
//
// Contract (byte-identical with metadata-rs: status, content-type, body):
//   GET|HEAD /v1/metadata/{id}?region=R  200 {"id","channel","title","description","duration","views","trending"}
//                                        404 null (unknown id); 400 malformed id / bad region
//                                        500 stored locales not a JSON object; 503 any SQLite error (Retry-After: 1)
//   other methods on that route          405 {"error":"method not allowed"}, Allow: GET, HEAD
//   GET|HEAD /healthz                    200 {"status":"ok","sqlite":"ok","redis":"disabled"} or 503
//   anything else                        404 {"error":"not found"}
// Every response is `content-type: application/json` with a content-length.
//
// The servers supply the SQLite side as an `open(path)` function returning { get(id), health() }
// (each throws on any SQLite error); `createStore` opens it once at startup and, while opening
// fails, retries on later requests at most once per RETRY_OPEN_MS.

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
const HEALTH_OK = JSON.stringify({ status: "ok", sqlite: "ok", redis: "disabled" });
const HEALTH_DOWN = JSON.stringify({ status: "unavailable", sqlite: "down", redis: "disabled" });
const NO_ROW = "null";

const ALLOW = Object.freeze({ allow: "GET, HEAD" });
const RETRY_AFTER = Object.freeze({ "retry-after": "1" });

const pad2 = (n) => (n < 10 ? "0" + n : "" + n);

/** Seconds as M:SS, or H:MM:SS from one hour up; negative, missing or non-numeric counts as 0. */
export function formatDuration(value) {
  const s = Math.max(0, Math.trunc(Number(value ?? 0)) || 0);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  return h > 0 ? `${h}:${pad2(m)}:${pad2(sec)}` : `${m}:${pad2(sec)}`;
}

/**
 * One lookup: the JSON answer for `id` (already decoded) in `region` (the raw query value: null
 * or "" means en). `getRow(id)` returns the row or null/undefined and throws on SQLite errors.
 * Returns { status, body } (body a string), plus `headers` when the response needs extra ones.
 */
export function lookup(getRow, id, region) {
  if (region === null || region === undefined || region === "") region = "en";
  if (!REGION_RE.test(region)) return { status: 400, body: BAD_REGION };
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

/**
 * The whole request: method and raw target in, { status, body, headers } out (headers extra to
 * content-type and content-length, which the servers always set; body still present for HEAD, the
 * servers leave it off).
 */
export function handle(store, method, target) {
  const r = route(target);
  if (r.kind === "metadata") {
    if (method !== "GET" && method !== "HEAD") return { status: 405, body: METHOD_NOT_ALLOWED, headers: ALLOW };
    let id;
    try {
      id = decodeURIComponent(r.rawId);
    } catch {
      return { status: 400, body: MALFORMED_ID };
    }
    const region = r.query === "" ? null : new URLSearchParams(r.query).get("region");
    return lookup(store.get, id, region);
  }
  if (r.kind === "health") {
    if (method !== "GET" && method !== "HEAD") return { status: 405, body: METHOD_NOT_ALLOWED, headers: ALLOW };
    return store.healthy() ? { status: 200, body: HEALTH_OK } : { status: 503, body: HEALTH_DOWN };
  }
  return { status: 404, body: NOT_FOUND };
}

/** Server settings from the environment (the same variables metadata-rs reads). */
export function configFromEnv(env = process.env) {
  const port = Number(env.METADATA_PORT ?? 3001);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`METADATA_PORT: bad port ${env.METADATA_PORT}`);
  return {
    port,
    host: env.METADATA_HOSTNAME || "127.0.0.1",
    db: env.METADATA_DB || "metadata.db",
  };
}
