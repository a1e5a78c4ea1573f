// Bun peer of flight-rs that does the work Flight's Bun build does (issue 15, item 2): the edge
// middleware as an onion of async layers, outermost first, each taking (req, ctx, next) and returning a
// NEW Response with copied headers, the way that build carries a response (and the cost measured here).
// Every decision comes from ./edge.mjs, shared with app-node.mjs, and matches crates/flight.
//
// Layers, outermost first (crates/flight/src/middleware/mod.rs):
//   default     security headers, CORS, compression (gzip only: Bun.gzipSync)
//   production  + rate limit, sessions, response cache
//   bare        none (the route table only, like hello-bun.ts plus /api/items)
// Routes: GET /api/hello, /api/items, /healthz, /api/session (production: counts visits in the session),
// then the static/SPA fallback when FLIGHT_DIST_PATH is set, else 404 {"error":"not found"}.
// Env: see configFromEnv in edge.mjs (PORT, HOSTNAME, FLIGHT_PROFILE, REDIS_URL, FLIGHT_DIST_PATH,
// FLIGHT_APP_SECRET, FLIGHT_CORS_ORIGINS, FLIGHT_RATE_LIMIT, ...) and PEER_PROCESSES (../processes.mjs).
// @ts-ignore -- plain ESM module without type declarations
import { bunProcesses, configOrExit } from "../processes.mjs";
// @ts-ignore -- plain ESM module without type declarations
import * as edge from "./edge.mjs";

const NAME = "app-bun";
const cfg = configOrExit(NAME, edge.configFromEnv);
// PEER_PROCESSES=N > 1: spawn N-1 copies of this script; every process listens with reusePort.
const reusePort = bunProcesses(NAME);

// Per-request state the layers share: the server (for the client address), the session, and whether
// the body is "streamed" (a static file over 256 KiB, which flight-rs streams: not cached, always compressed).
type Ctx = { server: Bun.Server; session: any; streamed: boolean };
type Handler = (req: Request, ctx: Ctx) => Promise<Response>;
type Layer = (req: Request, ctx: Ctx, next: () => Promise<Response>) => Promise<Response>;

// Content-type set explicitly: Bun would add ";charset=utf-8" to string bodies, and the peers must match.
const json = (body: string, status = 200, extra?: Record<string, string>) =>
  new Response(body, { status, headers: extra ? { "content-type": edge.JSON_TYPE, ...extra } : { "content-type": edge.JSON_TYPE } });

// A copy of `res` with `headers` (already copied and changed) and the body given, or res's own.
// 204/304 must be built with a null body (the Response constructor refuses any other).
const rewrap = (res: Response, headers: Headers, body: any = res.body) =>
  new Response(res.status === 204 || res.status === 304 ? null : body, { status: res.status, headers });

// Path and query from req.url ("http://host:port/path?q"): cheaper than new URL() per request.
const pathAndQuery = (url: string) => url.slice(url.indexOf("/", url.indexOf("//") + 2));

const redis = cfg.redisUrl ? await edge.openRedis(cfg.redisUrl, cfg.redisTimeoutMs) : null;

// ---------------------------------------------------------------------------------------------------
// Layers

const securityHeaders: Layer = async (_req, _ctx, next) => {
  const res = await next();
  const h = new Headers(res.headers);
  for (const [name, value] of edge.SECURITY_HEADERS) if (!h.has(name)) h.set(name, value);
  if (edge.isHtml(h.get("content-type")) && !h.has("content-security-policy")) h.set("content-security-policy", edge.HTML_CSP);
  return rewrap(res, h);
};

const cors = new edge.Cors(cfg.corsOrigins, cfg.corsCredentials);
const corsLayer: Layer = async (req, _ctx, next) => {
  const origin = req.headers.get("origin");
  if (cors.isPreflight(req.method, origin, req.headers.get("access-control-request-method"))) {
    return new Response(null, { status: 204, headers: cors.preflightHeaders(origin, req.headers.get("access-control-request-headers")) });
  }
  const allow = cors.allowOrigin(origin);
  const res = await next();
  const h = new Headers(res.headers);
  if (cors.vary) h.append("vary", "Origin");
  if (allow !== null) {
    h.set("access-control-allow-origin", allow);
    if (cors.credentials) h.set("access-control-allow-credentials", "true");
  }
  return rewrap(res, h);
};

const compression: Layer = async (req, ctx, next) => {
  const gzip = req.method !== "HEAD" && edge.acceptsGzip(req.headers.get("accept-encoding"));
  const res = await next();
  const h = new Headers(res.headers);
  const body = res.body === null ? null : await res.bytes();
  // A bodiless answer (204/304, HEAD of a static file) weighs 0 even for a big file, as flight-rs's empty body does.
  const length = body === null ? 0 : ctx.streamed ? -1 : body.length;
  const verdict = edge.compressible(res.status, h.get("content-encoding"), h.get("content-type"), h.get("cache-control"), length, cfg.compressionThreshold);
  if (verdict === "skip") return rewrap(res, h, body);
  // It could have been compressed: caches must key on Accept-Encoding from here on.
  h.append("vary", "Accept-Encoding");
  if (!gzip || body === null) return rewrap(res, h, body);
  h.delete("content-length");
  h.set("content-encoding", "gzip");
  // Synchronous: the body is already in memory, and a thread-pool hop costs more than a ~2 KB gzip.
  return rewrap(res, h, Bun.gzipSync(body));
};

const limiter = new edge.RateLimiter(cfg.rateLimit, cfg.rateWindowMs, redis);
const rateLimit: Layer = async (req, ctx, next) => {
  const client = edge.clientIp(ctx.server.requestIP(req)?.address, req.headers.get("x-forwarded-for"), cfg.trustProxy);
  const decision = await limiter.hit(client);
  const res = decision.count > cfg.rateLimit ? json(edge.TOO_MANY, 429, { "retry-after": String(decision.resetSecs) }) : await next();
  const h = new Headers(res.headers);
  for (const [name, value] of limiter.headers(decision)) h.set(name, value);
  return rewrap(res, h);
};

const sessionStore = new edge.SessionStore(cfg.secret, cfg.secureCookies, redis);
const sessions: Layer = async (req, ctx, next) => {
  ctx.session = sessionStore.open(req.headers.get("cookie"));
  const res = await next();
  let cookie;
  try {
    cookie = await ctx.session.finish();
  } catch {
    return json(edge.SESSION_UNAVAILABLE, 503, { "retry-after": "1" });
  }
  const h = new Headers(res.headers);
  if (cookie !== null) h.append("set-cookie", cookie);
  return rewrap(res, h);
};

const cache = new edge.ResponseCache(cfg.cacheTtlMs, redis);
const responseCache: Layer = async (req, ctx, next) => {
  const rh = req.headers;
  const key = edge.cacheKey(req.method, pathAndQuery(req.url), rh.get("authorization"), rh.get("cache-control"), rh.get("accept-encoding"), rh.get("accept"));
  if (key === null) return next();
  const hit = await cache.get(key);
  if (hit !== null) {
    const h = new Headers(hit.headers);
    h.set("x-cache", "hit");
    return new Response(hit.status === 204 ? null : hit.body, { status: hit.status, headers: h });
  }
  const res = await next();
  const h = new Headers(res.headers);
  const body = res.body === null ? null : await res.bytes();
  const whole = !ctx.streamed && edge.bodyFits(body === null ? 0 : body.length);
  if (whole && edge.storable(res.status, h.has("set-cookie"), h.get("cache-control"), ctx.session?.touched ?? false)) {
    const headers = [...h].filter(([name]) => name !== "connection");
    await cache.put(key, { status: res.status, headers, body: Buffer.from(body ?? new Uint8Array(0)) });
  }
  h.set("x-cache", "miss");
  return rewrap(res, h, body);
};

const layers: Layer[] = !cfg.middleware
  ? []
  : cfg.production
    ? [securityHeaders, corsLayer, compression, rateLimit, sessions, responseCache]
    : [securityHeaders, corsLayer, compression];

// Each layer gets `next` as a closure over the one inside it, as a Koa-style compose does.
const compose = (handler: Handler): Handler =>
  layers.reduceRight<Handler>((inner, layer) => (req, ctx) => layer(req, ctx, () => inner(req, ctx)), handler);

// ---------------------------------------------------------------------------------------------------
// Routes

const allow = edge.allowHeader(cfg.middleware);
// One path of the route table: GET (and HEAD, which runs GET) answered, OPTIONS 204 while CORS is on,
// any other method 405 with Allow.
const route = (get: Handler): Handler => async (req, ctx) => {
  const m = req.method;
  if (m === "GET" || m === "HEAD") return get(req, ctx);
  if (m === "OPTIONS" && cfg.middleware) return new Response(null, { status: 204, headers: { allow } });
  return json(edge.METHOD_NOT_ALLOWED, 405, { allow });
};

const hello: Handler = async () => json(edge.HELLO);
const items: Handler = async () => json(edge.ITEMS);
const health: Handler = async () =>
  json(JSON.stringify({ status: "ok", profile: cfg.profile, redis: await edge.redisHealth(redis) }), 200, { "cache-control": "no-store" });
const visits: Handler = async (_req, ctx) => {
  if (!ctx.session) return json(edge.SESSIONS_OFF, 404);
  try {
    return json(await edge.countVisit(ctx.session));
  } catch {
    return json(edge.SESSION_UNAVAILABLE, 503, { "retry-after": "1" });
  }
};

const files = cfg.distPath ? new edge.StaticFiles(cfg.distPath) : null;
const fallback: Handler = async (req, ctx) => {
  if (files === null) return json(edge.NOT_FOUND, 404);
  const h = req.headers;
  const rec = await files.serve({
    method: req.method,
    path: edge.pathOf(pathAndQuery(req.url)),
    accept: h.get("accept") ?? undefined,
    acceptEncoding: h.get("accept-encoding") ?? undefined,
    ifNoneMatch: h.get("if-none-match") ?? undefined,
    ifModifiedSince: h.get("if-modified-since") ?? undefined,
  });
  if (rec === null) return json(edge.NOT_FOUND, 404);
  ctx.streamed = !rec.whole;
  return new Response(rec.body, { status: rec.status, headers: rec.headers });
};

const serveWith = (handler: Handler) => {
  const chain = compose(handler);
  return (req: Request, server: Bun.Server) => chain(req, { server, session: null, streamed: false });
};

const server = Bun.serve({
  port: cfg.port,
  hostname: cfg.hostname,
  // Development mode adds error pages and checks; a benchmark peer runs as in production.
  development: false,
  reusePort,
  // Not method-keyed: the whole route table's answer (405, OPTIONS) runs inside the onion, as in flight-rs.
  routes: {
    "/api/hello": serveWith(route(hello)),
    "/api/items": serveWith(route(items)),
    "/healthz": serveWith(route(health)),
    "/api/session": serveWith(route(visits)),
  },
  fetch: serveWith(fallback),
  // An unexpected throw: the same JSON 500 flight-rs sends, not Bun's error page.
  error(e) {
    console.error(`${NAME}: ${e?.stack ?? e}`);
    return json(JSON.stringify({ error: "internal error" }), 500);
  },
});

// One line once listening: the harness polls HTTP for readiness, a person reads this.
console.log(`bun ${Bun.version} listening on http://${server.hostname}:${server.port} (profile ${cfg.profile})`);

process.on("SIGTERM", () => {
  server.stop(true);
  redis?.client.destroy();
  process.exit(0);
});
