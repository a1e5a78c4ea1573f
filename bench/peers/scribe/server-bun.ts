// Bun peer of scribe-rs (crates/compare's notes workloads): Bun.serve around the shared
// handler in scribe.mjs (the same code server-node.mjs runs). Env and routes: see scribe.mjs.
//   SCRIBE_VARIANT=fixed DATABASE_URL=postgres://postgres@127.0.0.1:5432/scribe \
//     REDIS_URL=redis://127.0.0.1:6379 bun run bench/peers/scribe/server-bun.ts
// PEER_PROCESSES (default 1: one process; N > 1: N processes on the port with reusePort, each with
// its own pools; see ../processes.mjs).
// @ts-ignore -- plain ESM module without type declarations
import { configFromEnv, createApp } from "./scribe.mjs";
// @ts-ignore -- plain ESM module without type declarations
import { bunProcesses, configOrExit } from "../processes.mjs";

const cfg = configOrExit("scribe-bun", configFromEnv);
// PEER_PROCESSES=N > 1: spawn N-1 copies of this script; every process listens with reusePort.
const reusePort = bunProcesses("scribe-bun");
const app = await createApp(cfg);

// Same content-type as the Node peer (and express's res.json).
const HEADERS = { "content-type": "application/json; charset=utf-8" };

const server = Bun.serve({
  port: cfg.port,
  hostname: cfg.host,
  // Development mode adds error pages and checks; a benchmark peer runs as in production.
  development: false,
  reusePort,
  maxRequestBodySize: cfg.payloadLimit,
  async fetch(req) {
    const url = req.url;
    // req.url is absolute: keep the path, drop the query string.
    const start = url.indexOf("/", url.indexOf("//") + 2);
    const q = url.indexOf("?", start);
    const path = q === -1 ? url.slice(start) : url.slice(start, q);
    const body = req.method === "POST" ? await req.text() : "";
    const r = await app.handle(req.method, path, body);
    return new Response(r.body, { status: r.status, headers: HEADERS });
  },
});

console.log(`scribe peer: bun ${Bun.version}, variant ${cfg.variant}, listening on http://${server.hostname}:${server.port}`);

process.on("SIGTERM", () => {
  server.stop(true);
  app.close().finally(() => process.exit(0));
  setTimeout(() => process.exit(0), 1000).unref();
});
