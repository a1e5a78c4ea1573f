// Preloaded into the real Flight 2.0.2 by compare's flight-node runtime (`node --import`). Flight calls
// `app.listen(port)` without a host, which listens on every interface; a benchmark server here must listen
// on loopback only. This adds FLIGHT_HOSTNAME (default 127.0.0.1) to a listen call that names a port and no
// host, and changes nothing else: it runs once per listen, never per request.
import net from "node:net";

const host = process.env.FLIGHT_HOSTNAME || "127.0.0.1";
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === "number" && (args.length === 1 || typeof args[1] === "function")) {
    args.splice(1, 0, host);
  }
  return listen.apply(this, args);
};
