// Bun peer for the ladder (crates/compare): Bun.serve around the shared handler in ladder.mjs (the same
// code server-node.mjs runs), over bun:sqlite and pg, and Bun's fetch for the upstream route. Routes, answers
// and env: see ladder.mjs.
//   LADDER_DB=/tmp/metadata.db DATABASE_URL=postgres://postgres@127.0.0.1:5432/ladder \
//     bun run bench/peers/ladder/server-bun.ts
// PEER_PROCESSES (1: one process; N > 1: N processes on the port with reusePort, see ../processes.mjs).
// TLS_CERT and TLS_KEY (both: HTTPS through Bun.serve's `tls`), TLS_RESUME: see ../tls.mjs.
// HTTP2 (off by default; on: Bun.serve's `http2: true`, h2 by ALPN over TLS, h2c by prior knowledge in
// cleartext, HTTP/1.1 still answered on the same port): see ../http2.mjs.
import { Database } from "bun:sqlite";
// @ts-ignore -- plain ESM module without type declarations
import { BODY_LIMIT, CONTENT_TYPE, PRAGMAS, TOO_LARGE, VIDEO_SQL, configFromEnv, createApp, targetOfUrl } from "./ladder.mjs";
// @ts-ignore -- plain ESM module without type declarations
import { bunProcesses, configOrExit } from "../processes.mjs";
// @ts-ignore -- plain ESM module without type declarations
import { bunResponse, bunServe } from "../serving.mjs";
// @ts-ignore -- plain ESM module without type declarations
import { prepareReadOnly } from "../sqlite.mjs";
// @ts-ignore -- plain ESM module without type declarations
import { bunTls, scheme, tlsFromEnv } from "../tls.mjs";
// @ts-ignore -- plain ESM module without type declarations
import { bunHttp2, http2FromEnv, protocolNote } from "../http2.mjs";

const cfg: ReturnType<typeof configFromEnv> = configOrExit("ladder-bun", configFromEnv);
// TLS_CERT / TLS_KEY read and checked before any copy is spawned or the port is bound (exit 64 if bad).
const tls = configOrExit("ladder-bun", tlsFromEnv);
// HTTP2 likewise (exit 64 on a value other than on/off).
const h2 = configOrExit("ladder-bun", http2FromEnv);
// PEER_PROCESSES=N > 1: spawn N-1 copies of this script; every process listens with reusePort.
const reusePort = bunProcesses("ladder-bun");

// Read-only, the pragmas, the statement prepared once; any failure here is "database unavailable".
function openSqlite(path: string) {
  const [video] = prepareReadOnly(new Database(path, { readonly: true }), PRAGMAS, [VIDEO_SQL]);
  return { get: (id: string) => video.get(id) };
}

const app = createApp(cfg, openSqlite);

/** The body, or null once it grows past BODY_LIMIT (only chunked bodies get here unchecked). */
async function readBody(req: Request): Promise<Uint8Array | null> {
  if (req.body === null) return new Uint8Array(0);
  if (req.headers.get("content-length") !== null) return new Uint8Array(await req.arrayBuffer()); // ≤ the limit
  const reader = req.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.length;
    if (size > BODY_LIMIT) {
      reader.cancel().catch(() => {});
      return null;
    }
    chunks.push(value);
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

// Not async: the GET routes and refusals answer without a promise, as ladder-rs answers them without a future
// (but the upstream route, which awaits its call in both).
function onRequest(req: Request): Response | Promise<Response> {
  const routed = app.route(req.method, targetOfUrl(req.url), req.headers.get("content-length"));
  if (typeof routed === "string") return climb(routed, req);
  // The upstream route: a promise of the answer.
  if (typeof routed.then === "function") return routed.then((r: object) => bunResponse(r, CONTENT_TYPE));
  return bunResponse(routed, CONTENT_TYPE);
}

const server = bunServe(cfg, reusePort, onRequest, { ...bunTls(tls), ...bunHttp2(h2) });

async function climb(rung: string, req: Request): Promise<Response> {
  const bytes = await readBody(req);
  if (bytes === null) return bunResponse(TOO_LARGE, CONTENT_TYPE);
  return bunResponse(await app.answer(rung, bytes), CONTENT_TYPE);
}

// One line once listening: the harness polls HTTP for readiness, a person reads this.
console.log(`ladder peer: bun ${Bun.version} listening on ${scheme(tls)}://${server.hostname}:${server.port}${protocolNote(h2, tls, true)}`);

// The harness stops servers with SIGTERM: stop listening, close the pool, exit 0.
process.on("SIGTERM", () => {
  server.stop(true);
  app.close().finally(() => process.exit(0));
  setTimeout(() => process.exit(0), 1000).unref();
});
