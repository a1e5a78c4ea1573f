// Flight's edge middleware for the JavaScript peers (app-bun.ts, app-node.mjs): every decision the
// layers make lives here, once, so the Bun and the Node peer do the same work and both match what
// flight-rs (crates/flight/src/middleware) answers. The peers only differ in how they carry a
// response through the onion (Bun: a new Response per layer; Node: one record, one writeHead).
//
// Runtime-neutral: plain ESM on node: builtins that Bun implements too (crypto, fs, path, net).
// The `redis` package (bench/peers/node_modules) is imported only when REDIS_URL is set.

import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { realpathSync, readdirSync } from "node:fs";
import { readFile, realpath, stat } from "node:fs/promises";
import { isIP } from "node:net";
import { extname, join, sep } from "node:path";

// ---------------------------------------------------------------------------------------------------
// Settings

/** flight-rs's development secret (config.rs BUILT_IN_SECRET); production refuses it, as flight-rs does. */
export const BUILT_IN_SECRET = "flight-rs built-in development secret; set FLIGHT_APP_SECRET";

const PROFILES = ["bare", "default", "production"];

// clap's BoolishValueParser, so a flag means the same thing to flight-rs and to the peers.
function boolish(name, raw, fallback) {
  if (raw === undefined || raw === "") return fallback;
  const v = raw.toLowerCase();
  if (["y", "yes", "t", "true", "on", "1"].includes(v)) return true;
  if (["n", "no", "f", "false", "off", "0"].includes(v)) return false;
  throw new Error(`${name} must be true or false, not ${JSON.stringify(raw)}`);
}

function whole(name, raw, fallback, min) {
  if (raw === undefined || raw === "") return fallback;
  const n = /^[0-9]+$/.test(raw) ? Number(raw) : NaN;
  if (!(n >= min && n <= 0xffffffff)) throw new Error(`${name} must be a whole number >= ${min}, not ${JSON.stringify(raw)}`);
  return n;
}

// The form browsers send in Origin: lower case, no default port, no trailing slash (config.rs normalize_origin).
function normalizeOrigin(entry) {
  const lower = entry.replace(/\/+$/, "").toLowerCase();
  for (const [scheme, port] of [["https://", ":443"], ["http://", ":80"]]) {
    if (lower.startsWith(scheme) && lower.endsWith(port)) return lower.slice(0, -port.length);
  }
  return lower;
}

function parseOrigins(raw) {
  const entries = raw.split(",").map((s) => s.trim()).filter((s) => s !== "");
  // Set but empty is refused, as flight-rs does: an empty allowlist means "no origin", never "any".
  if (entries.length === 0) throw new Error("FLIGHT_CORS_ORIGINS is set but lists no origin; list origins, or `*` for any origin");
  if (entries.includes("*")) return "*";
  return entries.map((e) => {
    const o = normalizeOrigin(e);
    const host = o.startsWith("https://") ? o.slice(8) : o.startsWith("http://") ? o.slice(7) : null;
    if (!host || host.includes("/") || !/^[\x21-\x7e]+$/.test(o)) {
      throw new Error(`FLIGHT_CORS_ORIGINS entry ${JSON.stringify(e)} is not an origin like https://example.com`);
    }
    return o;
  });
}

/**
 * The peer's settings from the environment. Names follow the brief (PORT, HOSTNAME, FLIGHT_PROFILE,
 * REDIS_URL) and, for the tuning knobs, flight-rs's own variables with flight-rs's defaults. Throws on
 * a bad value (the entry points run this through processes.mjs configOrExit: one line, exit 64).
 */
export function configFromEnv(env = process.env) {
  const profile = env.FLIGHT_PROFILE || "default";
  if (!PROFILES.includes(profile)) throw new Error(`FLIGHT_PROFILE must be one of ${PROFILES.join(", ")}, not ${JSON.stringify(profile)}`);
  const production = profile === "production";
  let secret = env.FLIGHT_APP_SECRET;
  if (production && (secret === undefined || secret === BUILT_IN_SECRET)) {
    throw new Error("FLIGHT_APP_SECRET must be set to your own secret in the production profile");
  }
  if (production && Buffer.byteLength(secret) < 32) {
    throw new Error(`FLIGHT_APP_SECRET must be at least 32 bytes, got ${Buffer.byteLength(secret)}`);
  }
  secret ??= BUILT_IN_SECRET;
  const corsOrigins = parseOrigins(env.FLIGHT_CORS_ORIGINS ?? "*");
  const corsCredentials = boolish("FLIGHT_CORS_CREDENTIALS", env.FLIGHT_CORS_CREDENTIALS, false);
  if (corsCredentials && corsOrigins === "*") {
    throw new Error("FLIGHT_CORS_CREDENTIALS needs an explicit FLIGHT_CORS_ORIGINS list; browsers reject credentials with `*`");
  }
  let distPath = null;
  if (env.FLIGHT_DIST_PATH) {
    try {
      distPath = realpathSync(env.FLIGHT_DIST_PATH);
      readdirSync(distPath);
    } catch (e) {
      throw new Error(`FLIGHT_DIST_PATH ${JSON.stringify(env.FLIGHT_DIST_PATH)} is not a readable directory: ${e.message}`);
    }
  }
  const redisUrl = env.REDIS_URL || null;
  if (redisUrl && !/^rediss?:\/\//.test(redisUrl)) throw new Error(`REDIS_URL ${JSON.stringify(redisUrl)} is not a redis:// URL`);
  return {
    port: whole("PORT", env.PORT, 3000, 0),
    hostname: env.HOSTNAME || "127.0.0.1",
    profile,
    middleware: profile !== "bare",
    production,
    redisUrl,
    redisTimeoutMs: Math.max(1, whole("FLIGHT_REDIS_TIMEOUT_MS", env.FLIGHT_REDIS_TIMEOUT_MS, 100, 0)),
    secret: Buffer.from(secret),
    distPath,
    corsOrigins,
    corsCredentials,
    trustProxy: boolish("FLIGHT_TRUST_PROXY", env.FLIGHT_TRUST_PROXY, false),
    secureCookies: boolish("FLIGHT_SECURE_COOKIES", env.FLIGHT_SECURE_COOKIES, false),
    rateLimit: whole("FLIGHT_RATE_LIMIT", env.FLIGHT_RATE_LIMIT, 1200, 1),
    rateWindowMs: whole("FLIGHT_RATE_WINDOW", env.FLIGHT_RATE_WINDOW, 60, 1) * 1000,
    cacheTtlMs: whole("FLIGHT_CACHE_TTL", env.FLIGHT_CACHE_TTL, 30, 1) * 1000,
    compressionThreshold: whole("FLIGHT_COMPRESSION_THRESHOLD", env.FLIGHT_COMPRESSION_THRESHOLD, 1024, 0),
  };
}

// ---------------------------------------------------------------------------------------------------
// Bodies (serialized once: the hot paths must not measure JSON.stringify)

export const HELLO = JSON.stringify({ message: "Hello from Flight!" });
export const NOT_FOUND = JSON.stringify({ error: "not found" });
export const METHOD_NOT_ALLOWED = JSON.stringify({ error: "method not allowed" });
export const TOO_MANY = JSON.stringify({ error: "too many requests" });
export const SESSION_UNAVAILABLE = JSON.stringify({ error: "session store unavailable, retry shortly" });
export const SESSIONS_OFF = JSON.stringify({ error: "sessions are off in this profile (FLIGHT_MIDDLEWARE=production turns them on)" });
export const JSON_TYPE = "application/json";

/**
 * GET /api/items: 2,005 bytes, sha256 238b179a577f4f2afde4652ca27dacf4b3625b4c531dbc95626027b7bce78975.
 * Shape (no whitespace, keys in this order):
 *   {"items":[ITEM(1),ITEM(2),...,ITEM(20)]}   items joined by ","
 *   ITEM(i) = {"id":i,"name":"item-i","description":"Item i of 20","price_cents":P,"tags":[T1,"group-G"]}
 *   P  = (i * 379) % 2000 + 99          (integers only: float formatting differs between JS and serde)
 *   T1 = "even" when i % 2 == 0, else "odd";   G = i % 4
 * In Rust: format! each item in that order (serde_json::json! would sort the keys unless preserve_order).
 */
export const ITEMS = JSON.stringify({
  items: Array.from({ length: 20 }, (_, k) => {
    const i = k + 1;
    return {
      id: i,
      name: `item-${i}`,
      description: `Item ${i} of 20`,
      price_cents: (i * 379) % 2000 + 99,
      tags: [i % 2 === 0 ? "even" : "odd", `group-${i % 4}`],
    };
  }),
});

// ---------------------------------------------------------------------------------------------------
// Security headers (security_headers.rs): set only when the handler did not set them; CSP on HTML only.

export const SECURITY_HEADERS = [
  ["x-content-type-options", "nosniff"],
  ["x-frame-options", "DENY"],
  ["referrer-policy", "strict-origin-when-cross-origin"],
];
export const HTML_CSP = "default-src 'self'; base-uri 'self'; object-src 'none'; frame-ancestors 'none'; form-action 'self'";
export const isHtml = (contentType) => contentType != null && contentType.startsWith("text/html");

// ---------------------------------------------------------------------------------------------------
// CORS (cors.rs)

const CORS_METHODS = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS";
const CORS_DEFAULT_HEADERS = "Content-Type, Authorization, X-Requested-With";
const VARY_PREFLIGHT = "Origin, Access-Control-Request-Method, Access-Control-Request-Headers";
const TOKEN_LIST = /^[A-Za-z0-9\-_, ]*$/;

/**
 * `*` allows any origin and sends `Access-Control-Allow-Origin: *` on every response (no Vary: the answer
 * does not depend on Origin); a list echoes a listed Origin, adds `Vary: Origin` to every response, and
 * leaves an unlisted origin without an allow header.
 */
export class Cors {
  constructor(origins, credentials) {
    this.any = origins === "*";
    this.list = this.any ? [] : origins;
    this.credentials = credentials;
    /** Append `Vary: Origin` to every actual response. */
    this.vary = !this.any;
  }

  /** The Access-Control-Allow-Origin value for this Origin, or null when it is not allowed. */
  allowOrigin(origin) {
    if (this.any) return "*";
    return origin != null && this.list.includes(origin) ? origin : null;
  }

  isPreflight(method, origin, requestMethod) {
    return method === "OPTIONS" && origin != null && requestMethod != null;
  }

  /** Headers of the 204 answer to a preflight, in flight-rs's order. */
  preflightHeaders(origin, requestHeaders) {
    const out = [["vary", VARY_PREFLIGHT]];
    const allow = this.allowOrigin(origin);
    if (allow !== null) {
      out.push(["access-control-allow-origin", allow]);
      out.push(["access-control-allow-methods", CORS_METHODS]);
      // Echo the requested headers only when they are a plain token list; otherwise the defaults.
      const echo = requestHeaders != null && TOKEN_LIST.test(requestHeaders);
      out.push(["access-control-allow-headers", echo ? requestHeaders : CORS_DEFAULT_HEADERS]);
      out.push(["access-control-max-age", "600"]);
      if (this.credentials) out.push(["access-control-allow-credentials", "true"]);
    }
    return out;
  }
}

// ---------------------------------------------------------------------------------------------------
// Compression (compression.rs). The peers speak gzip only, as Flight's Bun build does; flight-rs also
// offers br, zstd and deflate and picks by q-value with ties going br > zstd > gzip > deflate.

/** The q-value (0..1000) Accept-Encoding gives `token`, or -1 when the token is not listed. */
function quality(accept, token) {
  for (const item of accept.split(",")) {
    const parts = item.split(";");
    if (parts[0].trim().toLowerCase() !== token) continue;
    for (let i = 1; i < parts.length; i++) {
      const p = parts[i].trim();
      if (p.startsWith("q=") || p.startsWith("Q=")) {
        const q = Number(p.slice(2).trim());
        return p.slice(2).trim() !== "" && q >= 0 && q <= 1 ? Math.round(q * 1000) : 0;
      }
    }
    return 1000;
  }
  return -1;
}

/** Whether this Accept-Encoding takes gzip: listed with q > 0, or unlisted and `*` with q > 0. */
export function acceptsGzip(accept) {
  if (!accept) return false;
  // Fast path for the common header values ("gzip", "gzip, br", "gzip, deflate, br"): no q-values at all.
  if (!accept.includes(";") && !accept.includes("*")) return /(^|,)\s*gzip\s*(,|$)/i.test(accept);
  let q = quality(accept, "gzip");
  if (q < 0) q = quality(accept, "*");
  return q > 0;
}

/** Media types that are already compressed (compression.rs already_compressed). */
export function alreadyCompressed(contentType) {
  const essence = contentType.split(";")[0].trim().toLowerCase();
  return (
    (essence.startsWith("image/") && essence !== "image/svg+xml") ||
    essence.startsWith("video/") ||
    essence.startsWith("audio/") ||
    ALREADY_COMPRESSED.has(essence)
  );
}
const ALREADY_COMPRESSED = new Set([
  "application/zip", "application/gzip", "application/x-gzip", "application/zstd", "application/x-brotli",
  "application/x-7z-compressed", "application/x-rar-compressed", "application/pdf", "application/wasm",
  "font/woff", "font/woff2", "text/event-stream",
]);

/**
 * What the compression layer does with a response, as flight-rs decides it:
 *   "skip"  leave it alone (1xx/204/304, already encoded, compressed media, no-transform, body under the
 *           threshold): the Bun peer re-wraps it unchanged;
 *   "vary"  it could be compressed, so append `Vary: Accept-Encoding` (even when this client gets identity);
 * The caller then gzips when the request took gzip (and was not HEAD). `length` is the body's length, or
 * -1 when it is streamed (flight-rs compresses a body of unknown length whatever the threshold).
 */
export function compressible(status, contentEncoding, contentType, cacheControl, length, threshold) {
  if (status < 200 || status === 204 || status === 304) return "skip";
  if (contentEncoding != null) return "skip";
  if (contentType != null && alreadyCompressed(contentType)) return "skip";
  if (cacheControl != null && cacheControl.toLowerCase().includes("no-transform")) return "skip";
  if (length >= 0 && length < threshold) return "skip";
  return "vary";
}

// ---------------------------------------------------------------------------------------------------
// Redis: one client per process, every command bounded like flight-rs's bounded_redis (100 ms default),
// so a slow or absent Redis degrades to memory (rate limit, cache) or 503 (sessions), never a hang.

export async function openRedis(url, timeoutMs) {
  const mod = await import("redis");
  const { createClient, RESP_TYPES } = mod.default ?? mod;
  let warned = false;
  const client = createClient({
    url,
    // Fail at once while disconnected instead of queueing: the callers fall back.
    disableOfflineQueue: true,
    // Reconnect at most once a second, as flight-rs does.
    socket: { connectTimeout: 1000, reconnectStrategy: () => 1000 },
  });
  client.on("error", (e) => {
    if (!warned) console.error(`redis ${url}: ${e.message}; falling back until it is back`);
    warned = true;
  });
  client.on("ready", () => {
    warned = false;
  });
  // Cache entries are bytes: read them as Buffers, everything else as strings.
  const binary = client.withTypeMapping({ [RESP_TYPES.BLOB_STRING]: Buffer });
  // Wait a bounded time for the first connection; without one, start anyway (fallbacks apply).
  await bounded(client.connect(), 1000).catch(() => {});
  return {
    client,
    binary,
    call: (fn) => (client.isReady ? bounded(fn(client, binary), timeoutMs) : Promise.reject(new Error("redis not ready"))),
  };
}

function bounded(promise, ms) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`redis command over ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** /healthz's "redis" field: disabled, ok or unavailable (health.rs). */
export async function redisHealth(redis) {
  if (!redis) return "disabled";
  try {
    await redis.call((c) => c.ping());
    return "ok";
  } catch {
    return "unavailable";
  }
}

// ---------------------------------------------------------------------------------------------------
// Client address (middleware/mod.rs client_ip): leftmost X-Forwarded-For only when the proxy is trusted.

export function clientIp(peer, forwardedFor, trustProxy) {
  if (trustProxy && forwardedFor) {
    const first = forwardedFor.split(",")[0].trim();
    if (isIP(first)) return first;
  }
  return peer || "0.0.0.0";
}

// ---------------------------------------------------------------------------------------------------
// Rate limit (rate_limit.rs): fixed window per client, key flight:rl:<window>:<ip> in Redis, memory
// otherwise and whenever Redis fails.

export class RateLimiter {
  constructor(limit, windowMs, redis) {
    this.limit = limit;
    this.windowMs = windowMs;
    this.redis = redis;
    this.current = -1;
    this.counts = new Map();
  }

  /** Counts one request; resolves to { count, resetSecs }. */
  async hit(client) {
    const now = Date.now();
    const window = Math.floor(now / this.windowMs);
    const resetSecs = Math.ceil(((window + 1) * this.windowMs - now) / 1000);
    if (this.redis) {
      const key = `flight:rl:${window}:${client}`;
      try {
        const [count] = await this.redis.call((c) => c.multi().incr(key).pExpire(key, this.windowMs * 2).execAsPipeline());
        return { count: Number(count), resetSecs };
      } catch {
        // fall through to memory while Redis is away
      }
    }
    if (this.current !== window) {
      // A new window voids every old count: drop the map (this also bounds its size).
      this.current = window;
      this.counts.clear();
    }
    const count = (this.counts.get(client) ?? 0) + 1;
    this.counts.set(client, count);
    return { count, resetSecs };
  }

  /** The RateLimit-* headers for a decision, in flight-rs's order. */
  headers(decision) {
    return [
      ["ratelimit-limit", String(this.limit)],
      ["ratelimit-remaining", String(Math.max(0, this.limit - decision.count))],
      ["ratelimit-reset", String(decision.resetSecs)],
    ];
  }
}

// ---------------------------------------------------------------------------------------------------
// Sessions (session.rs): cookie flight.sid=<id>.<sig>, id = 24 random bytes base64url (32 chars),
// sig = base64url(HMAC-SHA256(secret, id)) without padding, so a cookie one server signs verifies on
// another with the same secret. Data is JSON in Redis (flight:sess:<id>, 24 h) or memory. Lazy: nothing
// is loaded, saved or set unless the handler uses the session.

export const COOKIE_NAME = "flight.sid";
const SESSION_TTL_SECS = 24 * 60 * 60;
const MAX_MEMORY_SESSIONS = 100_000;
const SESSION_ID = /^[A-Za-z0-9_-]{32}$/;

export class SessionUnavailable extends Error {}

export class SessionStore {
  constructor(secret, secure, redis) {
    this.secret = secret;
    this.secure = secure;
    this.redis = redis;
    this.memory = new Map();
  }

  sign(id) {
    return createHmac("sha256", this.secret).update(id).digest("base64url");
  }

  /** The id in a cookie value `<id>.<sig>` when the signature is ours (constant-time compare), else null. */
  verify(value) {
    const dot = value.indexOf(".");
    if (dot < 0) return null;
    const id = value.slice(0, dot);
    const sig = value.slice(dot + 1);
    if (!SESSION_ID.test(id) || !/^[A-Za-z0-9_-]+$/.test(sig)) return null;
    const given = Buffer.from(sig, "base64url");
    const want = createHmac("sha256", this.secret).update(id).digest();
    return given.length === want.length && timingSafeEqual(given, want) ? id : null;
  }

  async load(id) {
    if (this.redis) {
      let raw;
      try {
        raw = await this.redis.call((c) => c.get(`flight:sess:${id}`));
      } catch {
        throw new SessionUnavailable();
      }
      if (raw == null) return null;
      try {
        const data = JSON.parse(raw);
        return data && typeof data === "object" && !Array.isArray(data) ? data : null;
      } catch {
        return null;
      }
    }
    const found = this.memory.get(id);
    return found && found.exp > Date.now() ? structuredClone(found.data) : null;
  }

  async save(id, data) {
    if (this.redis) {
      try {
        await this.redis.call((c) => c.set(`flight:sess:${id}`, JSON.stringify(data), { EX: SESSION_TTL_SECS }));
        return;
      } catch {
        throw new SessionUnavailable();
      }
    }
    const now = Date.now();
    if (this.memory.size >= MAX_MEMORY_SESSIONS) {
      for (const [k, v] of this.memory) if (v.exp <= now) this.memory.delete(k);
    }
    if (this.memory.size < MAX_MEMORY_SESSIONS || this.memory.has(id)) {
      this.memory.set(id, { exp: now + SESSION_TTL_SECS * 1000, data: structuredClone(data) });
    }
  }

  setCookie(id) {
    return `${COOKIE_NAME}=${id}.${this.sign(id)}; Path=/; Max-Age=${SESSION_TTL_SECS}; HttpOnly; SameSite=Strict${this.secure ? "; Secure" : ""}`;
  }

  /** The request's session: the signature of a flight.sid cookie is checked now, the data loaded on use. */
  open(cookieHeader) {
    const value = cookieHeader ? cookieValue(cookieHeader, COOKIE_NAME) : null;
    return new Session(this, value === null ? null : this.verify(value));
  }
}

/** The value of cookie `name` in a Cookie header (first match, surrounding quotes dropped). */
export function cookieValue(header, name) {
  for (const pair of header.split(";")) {
    const p = pair.trim();
    const eq = p.indexOf("=");
    if (eq >= 0 && p.slice(0, eq) === name) return p.slice(eq + 1).replace(/^"+|"+$/g, "");
  }
  return null;
}

export class Session {
  constructor(store, cookieId) {
    this.store = store;
    this.cookieId = cookieId;
    /** A handler read or wrote it: the response depends on the client (not cacheable). */
    this.touched = false;
    this.id = null;
    this.data = null;
    this.fresh = false;
    this.modified = false;
  }

  async ensureLoaded() {
    this.touched = true;
    if (this.data !== null) return;
    const found = this.cookieId === null ? null : await this.store.load(this.cookieId);
    if (found) {
      this.id = this.cookieId;
      this.data = found;
    } else {
      this.id = randomBytes(24).toString("base64url");
      this.data = {};
      this.fresh = true;
    }
  }

  async get(key) {
    await this.ensureLoaded();
    return this.data[key];
  }

  async set(key, value) {
    await this.ensureLoaded();
    this.data[key] = value;
    this.modified = true;
  }

  /**
   * After the handler: saves a changed session. Resolves to the Set-Cookie value for a new one, or null;
   * rejects with SessionUnavailable when the store is down (the response becomes a 503).
   */
  async finish() {
    if (!this.touched || this.data === null || !this.modified) return null;
    await this.store.save(this.id, this.data);
    return this.fresh ? this.store.setCookie(this.id) : null;
  }
}

/** GET /api/session's handler body: counts visits in the session (visits.rs). Resolves to the JSON. */
export async function countVisit(session) {
  const seen = await session.get("visits");
  const visits = (Number.isInteger(seen) && seen >= 0 ? seen : 0) + 1;
  await session.set("visits", visits);
  return JSON.stringify({ visits });
}

// ---------------------------------------------------------------------------------------------------
// Response cache (response_cache.rs): GET without Authorization or `Cache-Control: no-cache/no-store`,
// keyed by path+query, Accept-Encoding and Accept; stores 2xx with a whole body up to 1 MiB, no
// Set-Cookie, no `private`/`no-store`, no session use. Entries go to Redis (flight:cache:<key>, PX ttl,
// flight-rs's byte layout, so either side can read the other's) or memory, and memory when Redis fails.

const MAX_CACHE_BODY = 1024 * 1024;
const MAX_MEMORY_ENTRIES = 10_000;

/** The cache key, or null when the cache must not answer or fill this request. */
export function cacheKey(method, pathAndQuery, authorization, cacheControl, acceptEncoding, accept) {
  if (method !== "GET" || authorization != null) return null;
  if (cacheControl != null && (cacheControl.includes("no-cache") || cacheControl.includes("no-store"))) return null;
  return `GET ${pathAndQuery}\n${acceptEncoding ?? ""}\n${accept ?? ""}`;
}

/** Whether a response may be stored (its body must also be whole and at most 1 MiB: see `bodyFits`). */
export function storable(status, hasSetCookie, cacheControl, sessionTouched) {
  if (status < 200 || status > 299 || hasSetCookie || sessionTouched) return false;
  return !(cacheControl != null && (cacheControl.includes("no-store") || cacheControl.includes("private")));
}
export const bodyFits = (length) => length >= 0 && length <= MAX_CACHE_BODY;

// status u16, header count u16, then per header (name len u16, name, value len u32, value), then body.
export function encodeEntry({ status, headers, body }) {
  const parts = [];
  const head = Buffer.alloc(4);
  head.writeUInt16BE(status, 0);
  head.writeUInt16BE(headers.length, 2);
  parts.push(head);
  for (const [name, value] of headers) {
    const n = Buffer.from(name);
    const v = Buffer.from(value);
    const lens = Buffer.alloc(2);
    lens.writeUInt16BE(n.length, 0);
    const vlen = Buffer.alloc(4);
    vlen.writeUInt32BE(v.length, 0);
    parts.push(lens, n, vlen, v);
  }
  parts.push(body);
  return Buffer.concat(parts);
}

export function decodeEntry(raw) {
  try {
    let at = 0;
    const status = raw.readUInt16BE(at);
    const count = raw.readUInt16BE(at + 2);
    at += 4;
    const headers = [];
    for (let i = 0; i < count; i++) {
      const nlen = raw.readUInt16BE(at);
      const name = raw.toString("latin1", at + 2, at + 2 + nlen);
      at += 2 + nlen;
      const vlen = raw.readUInt32BE(at);
      const value = raw.toString("latin1", at + 4, at + 4 + vlen);
      at += 4 + vlen;
      if (at > raw.length) return null;
      headers.push([name, value]);
    }
    return { status, headers, body: raw.subarray(at) };
  } catch {
    return null;
  }
}

export class ResponseCache {
  constructor(ttlMs, redis) {
    this.ttlMs = ttlMs;
    this.redis = redis;
    this.memory = new Map();
  }

  /** A stored { status, headers: [[name, value]], body: Buffer }, or null. */
  async get(key) {
    if (this.redis) {
      try {
        const raw = await this.redis.call((_, bin) => bin.get(`flight:cache:${key}`));
        return raw == null ? null : decodeEntry(raw);
      } catch {
        // fall through to memory while Redis is away
      }
    }
    const found = this.memory.get(key);
    return found && found.exp > Date.now() ? found.entry : null;
  }

  async put(key, entry) {
    if (this.redis) {
      try {
        await this.redis.call((c) => c.set(`flight:cache:${key}`, encodeEntry(entry), { PX: this.ttlMs }));
        return;
      } catch {
        // fall through to memory
      }
    }
    const now = Date.now();
    if (this.memory.size >= MAX_MEMORY_ENTRIES) {
      for (const [k, v] of this.memory) if (v.exp <= now) this.memory.delete(k);
    }
    if (this.memory.size < MAX_MEMORY_ENTRIES) this.memory.set(key, { exp: now + this.ttlMs, entry });
  }
}

// ---------------------------------------------------------------------------------------------------
// Route table (routes.rs): exact paths, HEAD runs GET, another method on a known path is 405 with Allow,
// OPTIONS on a known path is 204 with Allow while CORS is on.

export function allowHeader(middleware) {
  return middleware ? "GET, HEAD, OPTIONS" : "GET, HEAD";
}

/** The request path without its query string, from a path-and-query or a full URL's path part. */
export function pathOf(pathAndQuery) {
  const q = pathAndQuery.indexOf("?");
  return q === -1 ? pathAndQuery : pathAndQuery.slice(0, q);
}

// ---------------------------------------------------------------------------------------------------
// Static files and the SPA fallback (static_files.rs). Returns a response record
// { status, headers: [[name, value]], body: Buffer|null, whole } or null for "not found" (the caller
// answers its JSON 404). `whole` is false for files over 256 KiB, which flight-rs streams: those are
// not cached and are compressed whatever the threshold. The peers offer only a `.gz` sibling (they do
// not speak br); flight-rs serves `.br` too when the client takes it.

const READ_WHOLE = 256 * 1024;

const MIME = {
  html: "text/html", htm: "text/html", js: "text/javascript", mjs: "text/javascript", css: "text/css",
  json: "application/json", txt: "text/plain", xml: "text/xml", csv: "text/csv", md: "text/markdown",
  svg: "image/svg+xml", png: "image/png", jpg: "image/jpeg", jpeg: "image/jpeg", gif: "image/gif",
  webp: "image/webp", avif: "image/avif", ico: "image/x-icon", woff: "font/woff", woff2: "font/woff2",
  ttf: "font/ttf", otf: "font/otf", wasm: "application/wasm", pdf: "application/pdf", mp4: "video/mp4",
  webm: "video/webm", mp3: "audio/mpeg", zip: "application/zip", gz: "application/gzip",
  webmanifest: "application/manifest+json",
};

/** Content-Type as flight-rs sends it: mime_guess's type, with charset=utf-8 on text-like types. */
export function contentTypeOf(path) {
  const mime = MIME[extname(path).slice(1).toLowerCase()] ?? "application/octet-stream";
  const text = mime.startsWith("text/") || mime === "application/javascript" || mime === "application/json" || mime === "image/svg+xml";
  return text ? `${mime}; charset=utf-8` : mime;
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** The request path as a relative path under the root, or null when it tries to leave it. */
function sanitize(raw) {
  let decoded = raw;
  if (raw.includes("%")) {
    // Percent-decode exactly once (undecodable triples stay as they are, as percent_encoding does).
    const bytes = [];
    for (let i = 0; i < raw.length; i++) {
      const c = raw.charCodeAt(i);
      if (c === 37 && i + 2 < raw.length && /^[0-9a-fA-F]{2}$/.test(raw.slice(i + 1, i + 3))) {
        bytes.push(parseInt(raw.slice(i + 1, i + 3), 16));
        i += 2;
      } else {
        for (const b of Buffer.from(raw[i])) bytes.push(b);
      }
    }
    try {
      decoded = utf8.decode(Uint8Array.from(bytes));
    } catch {
      return null;
    }
  }
  const out = [];
  for (const segment of decoded.split("/")) {
    if (segment === "" || segment === ".") continue;
    if (segment === ".." || segment.includes("\\") || segment.includes("\0")) return null;
    out.push(segment);
  }
  return out.join("/");
}

/** GET/HEAD of a page (last segment without a dot) from a client that takes HTML, outside /api and /healthz. */
function wantsSpa(path, accept) {
  const last = path.slice(path.lastIndexOf("/") + 1);
  return (
    accept != null && accept.includes("text/html") && !last.includes(".") &&
    !(path === "/api" || path.startsWith("/api/") || path === "/healthz" || path.startsWith("/healthz/"))
  );
}

function notModified(ifNoneMatch, ifModifiedSince, etag, mtimeSecs) {
  if (ifNoneMatch != null) {
    const bare = etag.replace(/^W\//, "");
    return ifNoneMatch.split(",").map((t) => t.trim()).some((t) => t === "*" || t.replace(/^W\//, "") === bare);
  }
  if (ifModifiedSince != null) {
    const since = Date.parse(ifModifiedSince);
    return !Number.isNaN(since) && mtimeSecs <= Math.floor(since / 1000);
  }
  return false;
}

export class StaticFiles {
  /** `root` is canonical (configFromEnv resolves it). */
  constructor(root) {
    this.root = root;
  }

  async lookup(rawPath) {
    const relative = sanitize(rawPath);
    if (relative === null) return { kind: "forbidden" };
    let candidate = join(this.root, relative);
    let meta;
    try {
      meta = await stat(candidate, { bigint: true });
      if (meta.isDirectory()) {
        candidate = join(candidate, "index.html");
        meta = await stat(candidate, { bigint: true });
      }
    } catch {
      return { kind: "missing" };
    }
    // Symlinks could still point outside: check where the file really is.
    let real;
    try {
      real = await realpath(candidate);
    } catch {
      return { kind: "missing" };
    }
    if ((real === this.root || real.startsWith(this.root + sep)) && meta.isFile()) return { kind: "found", path: real, meta };
    return { kind: "forbidden" };
  }

  /**
   * `req` holds the request's method, path and the headers this needs (accept, acceptEncoding,
   * ifNoneMatch, ifModifiedSince), each a string or undefined.
   */
  async serve(req) {
    if (req.method !== "GET" && req.method !== "HEAD") return null;
    const found = await this.lookup(req.path);
    if (found.kind === "found") return this.file(req, found.path, found.meta);
    if (found.kind === "missing" && wantsSpa(req.path, req.accept)) {
      const index = await this.lookup("/index.html");
      if (index.kind !== "found") return null;
      const res = await this.file(req, index.path, index.meta);
      // The same URL is a 404 for clients that do not take HTML.
      res.headers.push(["vary", "Accept"]);
      return res;
    }
    return null;
  }

  async file(req, path, meta) {
    const mtimeSecs = Number(meta.mtimeNs / 1_000_000_000n);
    const etag = `W/"${meta.size.toString(16)}-${meta.mtimeNs.toString(16)}"`;
    const lastModified = new Date(mtimeSecs * 1000).toUTCString();
    const headers = [];
    let status = 200;
    let body = null;
    let whole = true;
    if (notModified(req.ifNoneMatch, req.ifModifiedSince, etag, mtimeSecs)) {
      status = 304;
    } else {
      let file = path;
      let len = Number(meta.size);
      let encoding = null;
      if (acceptsGzip(req.acceptEncoding)) {
        try {
          const gz = await stat(`${path}.gz`);
          if (gz.isFile()) [file, len, encoding] = [`${path}.gz`, gz.size, "gzip"];
        } catch {
          // no precompressed sibling
        }
      }
      whole = len <= READ_WHOLE;
      if (req.method !== "HEAD") {
        try {
          body = await readFile(file);
        } catch (e) {
          console.error(`static file read failed: ${file}: ${e.message}`);
          return { status: 500, headers: [["content-type", JSON_TYPE]], body: Buffer.from(JSON.stringify({ error: "internal error" })), whole: true };
        }
      }
      headers.push(["content-length", String(len)]);
      if (encoding) headers.push(["content-encoding", encoding]);
    }
    headers.push(["content-type", contentTypeOf(path)]);
    headers.push(["etag", etag]);
    headers.push(["last-modified", lastModified]);
    headers.push(["vary", "Accept-Encoding"]);
    // HTML names the hashed assets; it must be revalidated so a deploy shows up.
    if (path.endsWith(".html")) headers.push(["cache-control", "no-cache"]);
    return { status, headers, body, whole };
  }
}
