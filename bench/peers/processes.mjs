// N-core layouts for the benchmark peers, shared by every entry point (Bun .ts and Node .mjs).
//
// Env PEER_PROCESSES=N (default 1; unset or empty means 1). With 1 nothing here does anything: the
// entry point starts exactly as it would without this module (no cluster, no copies, no reusePort).
// With N > 1:
//   Node  clusterPrimary(): the process becomes a node:cluster primary that forks N workers and
//         never serves itself; each worker runs the entry point's normal single-process path
//         (it is forked with PEER_PROCESSES=1). node:cluster's default scheduling applies: on Linux
//         the primary accepts and hands connections to the workers round-robin (node itself honours
//         NODE_CLUSTER_SCHED_POLICY=none, which lets the workers accept from the shared socket).
//   Bun   bunProcesses(): the first process spawns N-1 copies of itself (same argv, PEER_PROCESSES=1,
//         PEER_PROCESS_INDEX=1..N-1 as the marker) and every process, itself included, listens with
//         reusePort: the kernel spreads connections over the N listeners. N > 1 needs a fixed port:
//         with port 0 each process would get a port of its own.
// Every process stays in the first one's process group, so a harness that kills the group stops all.
// A worker or copy that exits while the group is not stopping is logged and the first process exits
// 1 (after stopping the rest): during a benchmark a dead worker must be noticed, not silently
// replaced. SIGTERM (and, for Node, SIGINT) to the first process sends SIGTERM to the others; it
// exits 0 once they are gone, SIGKILLing any left after 2 s. In Bun the entry point's own SIGTERM
// handler runs as well and may exit first (the copies have their SIGTERM by then); any other exit
// of the first Bun process (an uncaught error, say) also sends SIGTERM to the copies. Node workers
// exit by themselves when their primary dies (node:cluster closes the IPC channel).
// `name` is the entry point's name for log lines ("hello-bun", "metadata-node", ...).
// configOrExit() is the settings step the service entry points run first (exit 64 on a bad value).

const MAX_PROCESSES = 256;
// After this long, processes still running after SIGTERM are killed.
const STOP_GRACE_MS = 2000;

/**
 * The entry point's settings from `configFromEnv()` (its module's reader of the environment); a bad
 * setting prints one line on stderr, `name: message`, and exits 64, before any process is started.
 */
export function configOrExit(name, configFromEnv) {
  try {
    return configFromEnv();
  } catch (e) {
    console.error(`${name}: ${e.message}`);
    process.exit(64);
  }
}

/** N from PEER_PROCESSES; a bad value prints one line on stderr and exits 64. */
export function peerProcesses(name, env = process.env) {
  const raw = env.PEER_PROCESSES;
  if (raw === undefined || raw === "") return 1;
  const n = /^[0-9]+$/.test(raw) ? Number(raw) : NaN;
  if (!(n >= 1 && n <= MAX_PROCESSES)) {
    console.error(`${name}: PEER_PROCESSES must be a whole number from 1 to ${MAX_PROCESSES}, not ${JSON.stringify(raw)}`);
    process.exit(64);
  }
  return n;
}

// Stops `procs` (objects with kill(signal) and an exited flag kept by the caller): SIGTERM now,
// SIGKILL after the grace period, then exit(code) once none is left.
function stopAll(procs, code) {
  const left = () => procs.filter((p) => !p.exited);
  for (const p of left()) p.kill("SIGTERM");
  const check = () => {
    if (left().length === 0) process.exit(code);
  };
  setInterval(check, 10);
  setTimeout(() => {
    for (const p of left()) p.kill("SIGKILL");
    process.exit(code);
  }, STOP_GRACE_MS);
  check();
}

/**
 * Node. With PEER_PROCESSES=1 (and in the workers, which are forked with it) returns undefined at
 * once. With N > 1 forks the N workers and returns a promise that never settles: an entry point
 * writes `await clusterPrimary(name)` before building its server, so the primary stops there.
 */
export function clusterPrimary(name) {
  const n = peerProcesses(name);
  if (n === 1) return undefined;
  return import("node:cluster").then(({ default: cluster }) => {
    let stopping = false;
    const workers = [];
    const stop = (code) => {
      if (stopping) return;
      stopping = true;
      stopAll(workers, code);
    };
    cluster.on("exit", (worker, code, signal) => {
      const w = workers.find((p) => p.worker === worker);
      if (w) w.exited = true;
      if (stopping) return;
      console.error(`${name}: worker ${worker.process.pid} exited unexpectedly (${signal ?? `code ${code}`}); stopping`);
      stop(1);
    });
    for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => stop(0));
    for (let i = 0; i < n; i++) {
      const worker = cluster.fork({ PEER_PROCESSES: "1", PEER_PROCESS_INDEX: String(i) });
      workers.push({ worker, exited: false, kill: (sig) => worker.process.kill(sig) });
    }
    return new Promise(() => {});
  });
}

/**
 * Bun. Returns the `reusePort` to pass to Bun.serve: false for a plain single-process run, true
 * in a group. With N > 1 (and no PEER_PROCESS_INDEX marker) first spawns the N-1 copies.
 */
export function bunProcesses(name) {
  const n = peerProcesses(name);
  if (process.env.PEER_PROCESS_INDEX !== undefined) return true;
  if (n === 1) return false;

  let stopping = false;
  const copies = [];
  const stop = (code) => {
    if (stopping) return;
    stopping = true;
    stopAll(copies, code);
  };
  const cmd = [process.execPath, ...process.execArgv, ...process.argv.slice(1)];
  for (let i = 1; i < n; i++) {
    const copy = { exited: false, kill: (sig) => copy.proc.kill(sig) };
    copy.proc = Bun.spawn({
      cmd,
      env: { ...process.env, PEER_PROCESSES: "1", PEER_PROCESS_INDEX: String(i) },
      stdio: ["ignore", "inherit", "inherit"],
      onExit(p, code, signal) {
        copy.exited = true;
        if (stopping) return;
        console.error(`${name}: process ${p.pid} exited unexpectedly (${signal ?? `code ${code}`}); stopping`);
        stop(1);
      },
    });
    copies.push(copy);
  }
  // Registered before the entry point's own SIGTERM handler (if any), which runs too and may exit
  // first: the copies have their SIGTERM by then. Any other exit (an uncaught error) takes them along.
  process.on("SIGTERM", () => stop(0));
  process.on("exit", () => {
    for (const c of copies) if (!c.exited) c.kill("SIGTERM");
  });
  return true;
}
