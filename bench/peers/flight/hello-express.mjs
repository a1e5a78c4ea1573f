// Express 5 peer for the hello workloads (compare's express-node and express-bun: this file run by
// `node --disable-warning=ExperimentalWarning` or `bun run`, cwd bench/peers, NODE_ENV=production), the routes
// written as an Express user would, on Express's router and res.send.
//
// Contract (byte-identical body and content-type with hello-node.mjs and flight-rs):
//   GET|HEAD /api/hello -> 200 {"message":"Hello from Flight!"}  application/json
//   GET|HEAD /healthz   -> 200 {"status":"ok"}                   application/json
//   anything else       -> 404 {"error":"not found"}             application/json
// Env: PORT (default 3000), HOSTNAME (default 127.0.0.1), PEER_PROCESSES (default 1: one process; N > 1: a
// node:cluster primary and N workers on both runtimes, see ../processes.mjs and ../frameworks.mjs), TLS_CERT
// and TLS_KEY (both: HTTPS, the app on node:https as Express's docs show) and TLS_RESUME (see ../tls.mjs).
// SIGTERM: close the listener and every connection, exit 0.
//
// x-powered-by and ETag are off, so Express does the per-request work the other peers do (no hash of every
// body, no extra header); what they cost is measured in ../ladder/express.mjs's header.
import http from "node:http";
import https from "node:https";
import express from "express";
import { clusterPrimary, configOrExit } from "../processes.mjs";
import { nodeTlsOptions, scheme, tlsFromEnv } from "../tls.mjs";
import { engine, exitOnSigterm, packageVersion } from "../frameworks.mjs";

const CONTENT_TYPE = "application/json";

// TLS_CERT / TLS_KEY read and checked before any worker is forked or the port is bound (exit 64 if bad).
const tls = configOrExit("hello-express", tlsFromEnv);
// PEER_PROCESSES=N > 1: this process becomes the cluster primary and stops here; workers go on.
await clusterPrimary("hello-express");

const app = express();
app.disable("x-powered-by");
app.set("etag", false);
// Express matches "/api/hello/" and "/API/HELLO" by default; the contract (and every other peer) does not.
app.set("strict routing", true);
app.set("case sensitive routing", true);

// res.json() and res.type("json") label the answer `application/json; charset=utf-8` (Express 5's res.set
// adds the charset to any content-type it is given, res.send to any string body); the contract is
// `application/json` exactly. So the header is set with node's own setHeader and the body is sent as a Buffer,
// which res.send leaves unlabelled. JSON.stringify is what res.json would run.
function sendJson(res, status, value) {
  res.status(status).setHeader("content-type", CONTENT_TYPE);
  res.send(Buffer.from(JSON.stringify(value)));
}

// app.get answers HEAD too (Express runs the GET handler and leaves the body off).
app.get("/api/hello", (req, res) => sendJson(res, 200, { message: "Hello from Flight!" }));
app.get("/healthz", (req, res) => sendJson(res, 200, { status: "ok" }));
// No body parser: a body sent to any path is left to node:http, which discards it, as in hello-node.mjs.
app.use((req, res) => sendJson(res, 404, { error: "not found" }));

const port = Number(process.env.PORT ?? 3000);
const host = process.env.HOSTNAME ?? "127.0.0.1";
const server = tls === null ? http.createServer(app) : https.createServer(nodeTlsOptions(tls), app);
server.listen(port, host, () => {
  console.log(`hello peer: express ${packageVersion("express")} on ${engine()} listening on ${scheme(tls)}://${host}:${port}`);
});

exitOnSigterm(() => {
  server.close();
  server.closeAllConnections();
});
