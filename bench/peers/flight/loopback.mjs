// Preloaded into the real Flight 2.0.2 by compare's flight-node runtime (`node --import`) and flight-bun
// (`bun --preload`). Flight calls `app.listen(port)` without a host, which listens on every interface; a
// benchmark server here must listen on loopback only. This adds FLIGHT_HOSTNAME (default 127.0.0.1) to a
// listen call that names a port and no host, and changes nothing else: it runs once per listen, never per
// request.
import http from "node:http";
import https from "node:https";
import net from "node:net";

const host = process.env.FLIGHT_HOSTNAME || "127.0.0.1";
// Node's http and https servers inherit net.Server's listen; Bun's have a listen of their own (koa's
// app.listen reaches it without passing through net.Server), so every class that owns one is wrapped.
for (const Server of [net.Server, http.Server, https.Server]) {
  if (!Object.prototype.hasOwnProperty.call(Server.prototype, "listen")) continue;
  const listen = Server.prototype.listen;
  Server.prototype.listen = function (...args) {
    if (typeof args[0] === "number" && (args.length === 1 || typeof args[1] === "function")) {
      args.splice(1, 0, host);
    }
    return listen.apply(this, args);
  };
}
