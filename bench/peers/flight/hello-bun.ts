// Bun peer of flight-rs (crates/compare's hello workloads).
//
// Uses Bun.serve's native `routes` table, as Flight's Bun port does, so the
// measurement covers Bun's own router rather than a hand-written `fetch` switch.
// The handlers build a fresh Response per request (like the Node peer and the
// Rust server) instead of a static `new Response(...)` route value, which Bun
// would serve from a precomputed buffer without running any JS at all.
//
// Contract (byte-identical body and content-type with hello-node.mjs):
//   GET /api/hello -> 200 {"message":"Hello from Flight!"}  application/json
//   GET /healthz   -> 200 {"status":"ok"}                   application/json
//   anything else  -> 404 {"error":"not found"}             application/json
// Env: PORT (default 3000), HOSTNAME (default 127.0.0.1), PEER_PROCESSES (default 1: one process;
// N > 1: N processes on the port with reusePort, see ../processes.mjs), TLS_CERT and TLS_KEY (both: HTTPS
// through Bun.serve's `tls`) and TLS_RESUME (see ../tls.mjs), HTTP2 (off by default; on: Bun.serve's
// `http2: true`, i.e. h2 by ALPN over TLS, h2c by prior knowledge in cleartext, HTTP/1.1 still answered on
// the same port; see ../http2.mjs).
// @ts-ignore -- plain ESM module without type declarations
import { bunProcesses, configOrExit } from "../processes.mjs";
// @ts-ignore -- plain ESM module without type declarations
import { bunTls, scheme, tlsFromEnv } from "../tls.mjs";
// @ts-ignore -- plain ESM module without type declarations
import { bunHttp2, http2FromEnv, protocolNote } from "../http2.mjs";

const HELLO = JSON.stringify({ message: "Hello from Flight!" });
const HEALTH = JSON.stringify({ status: "ok" });
const NOT_FOUND = JSON.stringify({ error: "not found" });
// Set explicitly: Response.json() would add ";charset=utf-8" and the peers must match.
const JSON_HEADERS = { "content-type": "application/json" };

const json = (body: string, status = 200) => new Response(body, { status, headers: JSON_HEADERS });

// TLS_CERT / TLS_KEY read and checked before any copy is spawned or the port is bound (exit 64 if bad).
const tls = configOrExit("hello-bun", tlsFromEnv);
// HTTP2 likewise (exit 64 on a value other than on/off).
const h2 = configOrExit("hello-bun", http2FromEnv);
// PEER_PROCESSES=N > 1: spawn N-1 copies of this script; every process listens with reusePort.
const reusePort = bunProcesses("hello-bun");

const server = Bun.serve({
  port: Number(process.env.PORT ?? 3000),
  hostname: process.env.HOSTNAME ?? "127.0.0.1",
  // Development mode adds error pages and checks; a benchmark peer runs as in production.
  development: false,
  reusePort,
  routes: {
    // Method-keyed so other methods fall through to `fetch` and get the JSON 404.
    "/api/hello": { GET: () => json(HELLO) },
    "/healthz": { GET: () => json(HEALTH) },
  },
  fetch() {
    return json(NOT_FOUND, 404);
  },
  ...bunTls(tls),
  ...bunHttp2(h2),
});

// One line once listening: the harness polls HTTP for readiness, a person reads this.
console.log(`bun ${Bun.version} listening on ${scheme(tls)}://${server.hostname}:${server.port}${protocolNote(h2, tls, true)}`);
