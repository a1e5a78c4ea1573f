// Bun peer of metadata-rs (crates/compare's metadata workload): Bun.serve with a fetch handler
// around the shared handler in metadata.mjs (the same code server-node.mjs runs), over bun:sqlite.
// Routes and answers: see metadata.mjs.
//   METADATA_DB=/tmp/metadata.db bun run bench/peers/metadata/server-bun.ts
// Env: METADATA_PORT (3001), METADATA_HOSTNAME (127.0.0.1), METADATA_DB (metadata.db), PEER_PROCESSES
// (1: one process; N > 1: N processes on the port with reusePort, see ../processes.mjs), and the
// Redis cache's METADATA_REDIS_URL (unset: no cache), METADATA_REDIS_TTL (60 s), METADATA_REDIS_TIMEOUT_MS
// (50), as metadata-rs reads them (cache.mjs; each process has its own connection).
import { Database } from "bun:sqlite";
// @ts-ignore -- plain ESM module without type declarations
import { CONTENT_TYPE, HEALTH_SQL, LOOKUP_SQL, PRAGMAS, configFromEnv, createStore, handle, targetOfUrl } from "./metadata.mjs";
// @ts-ignore -- plain ESM module without type declarations
import { bunProcesses, configOrExit } from "../processes.mjs";
// @ts-ignore -- plain ESM module without type declarations
import { bunResponse, bunServe } from "../serving.mjs";
// @ts-ignore -- plain ESM module without type declarations
import { prepareReadOnly } from "../sqlite.mjs";

type RedisConfig = { url: string; ttl: number; timeoutMs: number };
const cfg: { port: number; host: string; db: string; redis: RedisConfig | null } = configOrExit(
  "metadata-bun",
  configFromEnv,
);
// PEER_PROCESSES=N > 1: spawn N-1 copies of this script; every process listens with reusePort.
const reusePort = bunProcesses("metadata-bun");

// Read-only, the pragmas, both statements prepared once; any failure here is "database unavailable".
function open(path: string) {
  const [lookup, health] = prepareReadOnly(new Database(path, { readonly: true }), PRAGMAS, [LOOKUP_SQL, HEALTH_SQL]);
  return { get: (id: string) => lookup.get(id), health: () => health.get() };
}

const store = createStore(open, cfg.db);
// Loaded only with a cache, so the uncached peer runs (and weighs) exactly what it did before.
// @ts-ignore -- plain ESM module without type declarations
const cache = cfg.redis ? await (await import("./cache.mjs")).openCache(cfg.redis) : null;

const toResponse = (r: unknown) => bunResponse(r, CONTENT_TYPE);

// handle() answers synchronously unless Redis is involved (see metadata.mjs).
function onRequest(req: Request): Response | Promise<Response> {
  const r = handle(store, req.method, targetOfUrl(req.url), cache);
  return r instanceof Promise ? r.then(toResponse) : toResponse(r);
}

const server = bunServe(cfg, reusePort, onRequest);

// One line once listening: the harness polls HTTP for readiness, a person reads this.
console.log(`bun ${Bun.version} listening on http://${server.hostname}:${server.port}`);

// The harness stops servers with SIGTERM.
process.on("SIGTERM", () => {
  server.stop(true);
  process.exit(0);
});
