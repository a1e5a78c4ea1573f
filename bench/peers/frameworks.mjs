// What the framework peers (Fastify 5 and Express 5: flight/hello-*.mjs, ladder/{fastify,express}.mjs,
// metadata/{fastify,express}.mjs) share, so each file holds only its framework's routing and answers. Each of
// those files runs unchanged on Node (`node --disable-warning=ExperimentalWarning FILE`, compare's
// fastify-node / express-node) and on Bun through its Node compatibility (`bun run FILE`, fastify-bun /
// express-bun); nothing here changes what the plain peers (server-node.mjs, server-bun.ts) do.
//
// PEER_PROCESSES=N > 1 goes through processes.mjs's clusterPrimary() on both runtimes: Bun 1.4.5 implements
// node:cluster on Linux by giving every worker its own SO_REUSEPORT listener (the kernel spreads
// connections; no handle passing through the primary as node does by default). Checked with Fastify and
// Express on Bun: 2 workers forked, 20 fresh connections answered by both PIDs (9/11 and similar splits),
// SIGTERM to the primary stopped both. So the framework peers need no Bun.spawn copies (bunProcesses), and
// the frameworks' listen() takes no reusePort.

import { createRequire } from "node:module";
import { realpathSync } from "node:fs";
import { fileURLToPath } from "node:url";

export const isBun = typeof Bun !== "undefined";

/** "node v22.23.5" or "bun 1.4.5": what the startup line says the framework runs on. */
export function engine() {
  // Under Bun process.version is the Node version it emulates, so Bun's own version is named instead.
  return isBun ? `bun ${Bun.version}` : `node ${process.version}`;
}

const require = createRequire(import.meta.url);

/** The installed version of a package (from its package.json), for the startup line. */
export function packageVersion(name) {
  return require(`${name}/package.json`).version;
}

/** True when the module at `url` (its import.meta.url) is the script this process was started with. */
export function isEntryPoint(url) {
  if (process.argv[1] === undefined) return false;
  try {
    return realpathSync(process.argv[1]) === realpathSync(fileURLToPath(url));
  } catch {
    return false;
  }
}

/**
 * The runtime's own SQLite binding as `open(path)` (a read-only database; throws on any SQLite error):
 * node:sqlite under Node (as server-node.mjs), bun:sqlite under Bun (as server-bun.ts), so a framework peer
 * reads SQLite exactly as that runtime's plain peer does. Imported here, on first use, so the hello peers
 * never load a SQLite binding.
 */
export async function readOnlyOpener() {
  if (isBun) {
    const { Database } = await import("bun:sqlite");
    return (path) => new Database(path, { readonly: true });
  }
  const { DatabaseSync } = await import("node:sqlite");
  return (path) => new DatabaseSync(path, { readOnly: true });
}

/**
 * SIGTERM (the harness stops servers that way): `stop()` (close the listener and connections, may return a
 * promise), then exit 0; exit 0 after 1 s whatever happens, as the other peers do.
 */
export function exitOnSigterm(stop) {
  process.on("SIGTERM", () => {
    setTimeout(() => process.exit(0), 1000).unref();
    Promise.resolve()
      .then(stop)
      .catch(() => {})
      .finally(() => process.exit(0));
  });
}
