// The metadata peers' Redis connection for the response cache (metadata.mjs does the cache-aside),
// behaving as metadata-rs's does (crates/metadata/src/cache.rs over crates/bounded-redis), with the
// node-redis client the Scribe peers use, so Bun and Node run the same client code:
//   - one connection per process, connected at startup (waiting at most STARTUP_CONNECT_MS; the
//     server starts either way) and re-established by node-redis at most once a second after a loss;
//   - every command bounded by the timeout (METADATA_REDIS_TIMEOUT_MS): a command Redis has not
//     answered by then counts as a miss, so a slow or frozen Redis costs a request one timeout at most;
//   - while disconnected, commands fail at once (disableOfflineQueue) and the request goes straight to
//     SQLite, costing nothing;
//   - nothing here rejects or throws: failures become "no cached body" / "not healthy", logged once
//     when Redis goes away and once when it is back, never once per request.

import { RESP_TYPES, createClient } from "redis";

const RECONNECT_EVERY_MS = 1000;
const STARTUP_CONNECT_MS = 1000;
// Told apart from any reply: null is GET's "no such key".
const FAILED = Symbol("redis failed");

/**
 * The cache metadata.mjs's handle() takes: { get(key), put(key, body), healthy() }, over a client
 * connected to cfg.url (cfg is configFromEnv().redis). Resolves once connected, or after
 * STARTUP_CONNECT_MS when Redis is not there yet (node-redis keeps trying in the background).
 */
export async function openCache(cfg, log = (msg) => console.error(msg)) {
  const client = createClient({
    url: cfg.url,
    disableOfflineQueue: true,
    commandOptions: {
      // Cached bodies come back as the bytes that were stored, answered without a decode and re-encode.
      typeMapping: { [RESP_TYPES.BLOB_STRING]: Buffer },
      // node-redis's own timeout only covers the wait before a command is written; the deadline in
      // run() covers the whole command, so that one (an extra timer per command) is off.
      timeout: 0,
    },
    socket: {
      // Connecting never holds a request up (commands fail at once meanwhile), so this can be generous.
      connectTimeout: RECONNECT_EVERY_MS,
      reconnectStrategy: () => RECONNECT_EVERY_MS,
    },
  });

  let healthy = true;
  const mark = (ok, why) => {
    if (healthy && !ok) log(`metadata peer: redis unavailable (${why}); answering from SQLite until it returns`);
    else if (!healthy && ok) log("metadata peer: redis is back; caching again");
    healthy = ok;
  };
  // node-redis emits "error" on every failed (re)connect; without a listener that would end the process.
  client.on("error", (e) => mark(false, (e && e.message) || String(e)));

  const connected = client.connect().then(
    () => true,
    () => false,
  );
  if (!(await settleWithin(connected, STARTUP_CONNECT_MS, false))) {
    log(`metadata peer: redis at ${cfg.url} not connected at start; answering from SQLite until it is`);
  }

  const ttl = String(cfg.ttl);
  const timeoutMs = cfg.timeoutMs;

  /** One command within the deadline: its reply, or FAILED. Never rejects. */
  function run(args) {
    if (!client.isReady) {
      mark(false, "not connected");
      return Promise.resolve(FAILED);
    }
    let timer;
    const deadline = new Promise((resolve) => {
      timer = setTimeout(resolve, timeoutMs, FAILED);
    });
    // race() also takes the command's late rejection, so it is never an unhandled one.
    return Promise.race([client.sendCommand(args), deadline]).then(
      (reply) => {
        clearTimeout(timer);
        if (reply === FAILED) mark(false, `command timed out after ${timeoutMs} ms`);
        else mark(true);
        return reply;
      },
      (e) => {
        clearTimeout(timer);
        mark(false, (e && e.message) || String(e));
        return FAILED;
      },
    );
  }

  return {
    /** The cached body (a Buffer), or null on a miss or when Redis cannot answer in time. */
    async get(key) {
      const reply = await run(["GET", key]);
      return reply === FAILED ? null : reply;
    },
    /** Stores a 200 body for the TTL; the caller does not wait for it. */
    put(key, body) {
      run(["SET", key, body, "EX", ttl]);
    },
    /** PING within the deadline, for /healthz. */
    async healthy() {
      return (await run(["PING"])) !== FAILED;
    },
  };
}

/** What `promise` settles to, or `otherwise` after `ms`. */
function settleWithin(promise, ms, otherwise) {
  let timer;
  const late = new Promise((resolve) => {
    timer = setTimeout(resolve, ms, otherwise);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}
