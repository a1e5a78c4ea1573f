// Koa peer for the hello workloads: the framework stack Flight's Node build runs on (Koa 3 and
// @koa/router, pinned in ../package-lock.json), one process, as a user would write the route. compare runs
// it unchanged on Node (runtime koa) and on Bun through its Node compatibility (koa-bun).
//
// It measures the framework alone on hello-bare, where the real Flight 2.0.2 (@thoughtpivot/flight, compare's
// flight-node and flight-bun) cannot go: Flight has no mode without its middleware.
//
// Contract (byte-identical body and content-type with hello-node.mjs and flight-rs):
//   GET /api/hello -> 200 {"message":"Hello from Flight!"}  application/json
//   GET /healthz   -> 200 {"status":"ok"}                   application/json
//   anything else  -> 404 {"error":"not found"}             application/json
// Env: PORT (default 3000), HOSTNAME (default 127.0.0.1), TLS_CERT and TLS_KEY (both: HTTPS, Koa's
// handler on node:https as its docs show) and TLS_RESUME (see ../tls.mjs).
import http from "node:http";
import https from "node:https";
import Koa from "koa";
import Router from "@koa/router";
import { configOrExit } from "../processes.mjs";
import { nodeTlsOptions, scheme, tlsFromEnv } from "../tls.mjs";

// TLS_CERT / TLS_KEY read and checked before the port is bound (exit 64 if bad).
const tls = configOrExit("hello-koa", tlsFromEnv);

const app = new Koa();
const router = new Router();

// Koa would label an object body `application/json; charset=utf-8`; the contract says `application/json`,
// so the header is set first and Koa keeps it.
function json(ctx, status, value) {
  ctx.set("Content-Type", "application/json");
  ctx.status = status;
  ctx.body = value;
}

router.get("/api/hello", (ctx) => json(ctx, 200, { message: "Hello from Flight!" }));
router.get("/healthz", (ctx) => json(ctx, 200, { status: "ok" }));

app.use(router.routes());
app.use((ctx) => json(ctx, 404, { error: "not found" }));

const port = Number(process.env.PORT ?? 3000);
const host = process.env.HOSTNAME ?? "127.0.0.1";
// app.listen(...) is http.createServer(app.callback()).listen(...): the same, spelled out for both schemes.
const handler = app.callback();
const server = tls === null ? http.createServer(handler) : https.createServer(nodeTlsOptions(tls), handler);
server.listen(port, host, () => {
  // compare runs this file on Node (koa) and on Bun (koa-bun), whose process.version is the Node it emulates.
  const engine = typeof Bun === "undefined" ? `node ${process.version}` : `bun ${Bun.version}`;
  console.log(`koa on ${engine} listening on ${scheme(tls)}://${host}:${port}`);
});

process.on("SIGTERM", () => {
  server.close();
  server.closeAllConnections();
  process.exit(0);
});
