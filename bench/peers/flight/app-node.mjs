// Node peer of flight-rs that does the work Flight's Bun build does (issue 15, item 2), in Node's idiom:
// the same onion of async layers as app-bun.ts, outermost first, each taking (req, ctx, next), but over
// one small response record { status, headers, body } that the layers change in place, then a single
// writeHead/end. gzip with node:zlib. Every decision comes from ./edge.mjs and matches crates/flight.
//
// Layers, outermost first (crates/flight/src/middleware/mod.rs):
//   default     security headers, CORS, compression (gzip only)
//   production  + rate limit, sessions, response cache
//   bare        none (the route table only, like hello-node.mjs plus /api/items)
// Routes: GET /api/hello, /api/items, /healthz, /api/session (production: counts visits in the session),
// then the static/SPA fallback when FLIGHT_DIST_PATH is set, else 404 {"error":"not found"}.
// Env: see configFromEnv in edge.mjs (PORT, HOSTNAME, FLIGHT_PROFILE, REDIS_URL, FLIGHT_DIST_PATH,
// FLIGHT_APP_SECRET, FLIGHT_CORS_ORIGINS, FLIGHT_RATE_LIMIT, ...) and PEER_PROCESSES (../processes.mjs).
import http from "node:http";
import { gzipSync } from "node:zlib";
import { clusterPrimary, configOrExit } from "../processes.mjs";
import * as edge from "./edge.mjs";

const NAME = "app-node";
const cfg = configOrExit(NAME, edge.configFromEnv);
// PEER_PROCESSES=N > 1: this process becomes the cluster primary and stops here; workers go on.
await clusterPrimary(NAME);

const redis = cfg.redisUrl ? await edge.openRedis(cfg.redisUrl, cfg.redisTimeoutMs) : null;

// Bodies encoded once; each response still goes through the whole onion and node:http's normal path.
const HELLO = Buffer.from(edge.HELLO);
const ITEMS = Buffer.from(edge.ITEMS);
const NOT_FOUND = Buffer.from(edge.NOT_FOUND);
const METHOD_NOT_ALLOWED = Buffer.from(edge.METHOD_NOT_ALLOWED);
const TOO_MANY = Buffer.from(edge.TOO_MANY);
const SESSION_UNAVAILABLE = Buffer.from(edge.SESSION_UNAVAILABLE);
const SESSIONS_OFF = Buffer.from(edge.SESSIONS_OFF);

// A response record. Header names are lower case; a header sent more than once (vary) holds an array,
// which writeHead sends as one line per value.
const json = (body, status = 200) => ({ status, headers: { "content-type": edge.JSON_TYPE }, body });

function append(headers, name, value) {
  const old = headers[name];
  headers[name] = old === undefined ? value : Array.isArray(old) ? [...old, value] : [old, value];
}

// ---------------------------------------------------------------------------------------------------
// Layers

async function securityHeaders(_req, _ctx, next) {
  const res = await next();
  const h = res.headers;
  for (const [name, value] of edge.SECURITY_HEADERS) h[name] ??= value;
  if (edge.isHtml(h["content-type"])) h["content-security-policy"] ??= edge.HTML_CSP;
  return res;
}

const cors = new edge.Cors(cfg.corsOrigins, cfg.corsCredentials);
async function corsLayer(req, _ctx, next) {
  const origin = req.headers.origin;
  if (cors.isPreflight(req.method, origin, req.headers["access-control-request-method"])) {
    return { status: 204, headers: Object.fromEntries(cors.preflightHeaders(origin, req.headers["access-control-request-headers"])), body: null };
  }
  const allow = cors.allowOrigin(origin);
  const res = await next();
  if (cors.vary) append(res.headers, "vary", "Origin");
  if (allow !== null) {
    res.headers["access-control-allow-origin"] = allow;
    if (cors.credentials) res.headers["access-control-allow-credentials"] = "true";
  }
  return res;
}

async function compression(req, ctx, next) {
  const gzip = req.method !== "HEAD" && edge.acceptsGzip(req.headers["accept-encoding"]);
  const res = await next();
  const h = res.headers;
  // A bodiless record (HEAD of a static file) weighs 0 even for a big file, as flight-rs's empty body does.
  const length = res.body === null ? 0 : ctx.streamed ? -1 : res.body.length;
  if (edge.compressible(res.status, h["content-encoding"], h["content-type"], h["cache-control"], length, cfg.compressionThreshold) === "skip") return res;
  // It could have been compressed: caches must key on Accept-Encoding from here on.
  append(h, "vary", "Accept-Encoding");
  if (!gzip || res.body === null) return res;
  delete h["content-length"];
  h["content-encoding"] = "gzip";
  // Synchronous: the body is already in memory, and a thread-pool hop costs more than a ~2 KB gzip.
  res.body = gzipSync(res.body);
  return res;
}

const limiter = new edge.RateLimiter(cfg.rateLimit, cfg.rateWindowMs, redis);
async function rateLimit(req, _ctx, next) {
  const client = edge.clientIp(req.socket.remoteAddress, req.headers["x-forwarded-for"], cfg.trustProxy);
  const decision = await limiter.hit(client);
  let res;
  if (decision.count > cfg.rateLimit) {
    res = json(TOO_MANY, 429);
    res.headers["retry-after"] = String(decision.resetSecs);
  } else {
    res = await next();
  }
  for (const [name, value] of limiter.headers(decision)) res.headers[name] = value;
  return res;
}

const sessionStore = new edge.SessionStore(cfg.secret, cfg.secureCookies, redis);
async function sessions(req, ctx, next) {
  ctx.session = sessionStore.open(req.headers.cookie);
  const res = await next();
  let cookie;
  try {
    cookie = await ctx.session.finish();
  } catch {
    return unavailable();
  }
  if (cookie !== null) append(res.headers, "set-cookie", cookie);
  return res;
}

function unavailable() {
  const res = json(SESSION_UNAVAILABLE, 503);
  res.headers["retry-after"] = "1";
  return res;
}

const cache = new edge.ResponseCache(cfg.cacheTtlMs, redis);
async function responseCache(req, ctx, next) {
  const rh = req.headers;
  const key = edge.cacheKey(req.method, req.url, rh.authorization, rh["cache-control"], rh["accept-encoding"], rh.accept);
  if (key === null) return next();
  const hit = await cache.get(key);
  if (hit !== null) {
    const headers = {};
    for (const [name, value] of hit.headers) append(headers, name, value);
    headers["x-cache"] = "hit";
    return { status: hit.status, headers, body: hit.body };
  }
  const res = await next();
  const h = res.headers;
  const whole = !ctx.streamed && edge.bodyFits(res.body === null ? 0 : res.body.length);
  if (whole && edge.storable(res.status, h["set-cookie"] !== undefined, h["cache-control"], ctx.session?.touched ?? false)) {
    const headers = [];
    for (const [name, value] of Object.entries(h)) {
      if (name === "connection") continue;
      for (const v of Array.isArray(value) ? value : [value]) headers.push([name, v]);
    }
    await cache.put(key, { status: res.status, headers, body: res.body ?? Buffer.alloc(0) });
  }
  h["x-cache"] = "miss";
  return res;
}

const layers = !cfg.middleware
  ? []
  : cfg.production
    ? [securityHeaders, corsLayer, compression, rateLimit, sessions, responseCache]
    : [securityHeaders, corsLayer, compression];

// Each layer gets `next` as a closure over the one inside it, as a Koa-style compose does.
const compose = (handler) => layers.reduceRight((inner, layer) => (req, ctx) => layer(req, ctx, () => inner(req, ctx)), handler);

// ---------------------------------------------------------------------------------------------------
// Routes

const allow = edge.allowHeader(cfg.middleware);
// One path of the route table: GET (and HEAD, which runs GET) answered, OPTIONS 204 while CORS is on,
// any other method 405 with Allow.
const route = (get) => async (req, ctx) => {
  const m = req.method;
  if (m === "GET" || m === "HEAD") return get(req, ctx);
  if (m === "OPTIONS" && cfg.middleware) return { status: 204, headers: { allow }, body: null };
  const res = json(METHOD_NOT_ALLOWED, 405);
  res.headers.allow = allow;
  return res;
};

const files = cfg.distPath ? new edge.StaticFiles(cfg.distPath) : null;
async function fallback(req, ctx) {
  if (files === null) return json(NOT_FOUND, 404);
  const h = req.headers;
  const rec = await files.serve({
    method: req.method,
    path: edge.pathOf(req.url),
    accept: h.accept,
    acceptEncoding: h["accept-encoding"],
    ifNoneMatch: h["if-none-match"],
    ifModifiedSince: h["if-modified-since"],
  });
  if (rec === null) return json(NOT_FOUND, 404);
  ctx.streamed = !rec.whole;
  const headers = {};
  for (const [name, value] of rec.headers) append(headers, name, value);
  return { status: rec.status, headers, body: rec.body };
}

const table = new Map([
  ["/api/hello", route(async () => json(HELLO))],
  ["/api/items", route(async () => json(ITEMS))],
  [
    "/healthz",
    route(async () => {
      const res = json(Buffer.from(JSON.stringify({ status: "ok", profile: cfg.profile, redis: await edge.redisHealth(redis) })));
      res.headers["cache-control"] = "no-store";
      return res;
    }),
  ],
  [
    "/api/session",
    route(async (_req, ctx) => {
      if (!ctx.session) return json(SESSIONS_OFF, 404);
      try {
        return json(Buffer.from(await edge.countVisit(ctx.session)));
      } catch {
        return unavailable();
      }
    }),
  ],
]);
// The onion composed once per route, not per request.
const chains = new Map([...table].map(([path, handler]) => [path, compose(handler)]));
const fallbackChain = compose(fallback);

function send(res, rec) {
  const h = rec.headers;
  const bodiless = rec.status === 204 || rec.status === 304;
  // Explicit content-length: otherwise node:http would fall back to chunked encoding.
  if (!bodiless && h["content-length"] === undefined) h["content-length"] = rec.body === null ? 0 : rec.body.length;
  res.writeHead(rec.status, h);
  // node:http drops the body of an answer to HEAD by itself.
  res.end(bodiless ? undefined : (rec.body ?? undefined));
}

const server = http.createServer((req, res) => {
  const chain = chains.get(edge.pathOf(req.url)) ?? fallbackChain;
  chain(req, { session: null, streamed: false }).then(
    (rec) => send(res, rec),
    (e) => {
      console.error(`${NAME}: ${e?.stack ?? e}`);
      send(res, json(Buffer.from(JSON.stringify({ error: "internal error" })), 500));
    },
  );
});

server.listen(cfg.port, cfg.hostname, () => {
  console.log(`node ${process.version} listening on http://${cfg.hostname}:${cfg.port} (profile ${cfg.profile})`);
});

// Exit promptly on SIGTERM (the harness stops servers that way), closing the listener first.
process.on("SIGTERM", () => {
  server.close();
  server.closeAllConnections();
  redis?.client.destroy();
  process.exit(0);
});
