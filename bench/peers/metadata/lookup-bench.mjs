// DB-only lookup benchmark for the video-metadata peers: no HTTP, just metadata.mjs's lookup() over
// the runtime's own SQLite binding (bun:sqlite under Bun, node:sqlite under Node), opened and
// prepared exactly as the servers do. metadata-rs bench-lookup does the same in Rust and prints the
// same line, so found and bytes must agree across runtimes.
//   bun run bench/peers/metadata/lookup-bench.mjs --db PATH --ids PATH --iterations 2000000 --warmup 200000
//   node bench/peers/metadata/lookup-bench.mjs --db PATH --ids PATH ...
// Iteration i looks up ids[i % n] in REGIONS[(i + floor(i / n)) % 5] (so each id meets every region
// over five passes); warmup iterations run first, untimed, with the same formula. Prints one JSON line:
//   {"runtime":"bun"|"node","version":…,"iterations":N,"seconds":S,"ops_per_sec":X,"found":F,"bytes":B}
import { readFileSync } from "node:fs";
import { HEALTH_SQL, LOOKUP_SQL, PRAGMAS, REGIONS, lookup } from "./metadata.mjs";
import { prepareReadOnly } from "../sqlite.mjs";

function parseArgs(argv) {
  const out = { db: null, ids: null, iterations: 2_000_000, warmup: 200_000 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    const count = () => {
      const v = value();
      if (!/^\d+$/.test(v)) throw new Error(`${a}: not a count: ${v}`);
      return Number(v);
    };
    if (a === "--db") out.db = value();
    else if (a === "--ids") out.ids = value();
    else if (a === "--iterations") out.iterations = count();
    else if (a === "--warmup") out.warmup = count();
    else throw new Error(`unknown argument ${a}`);
  }
  if (!out.db || !out.ids) throw new Error("--db and --ids are required");
  return out;
}

// Opened as the servers open it: read-only, same pragmas, statements prepared once.
async function openStore(path) {
  if (typeof Bun !== "undefined") {
    const { Database } = await import("bun:sqlite");
    const [stmt, health] = prepareReadOnly(new Database(path, { readonly: true }), PRAGMAS, [LOOKUP_SQL, HEALTH_SQL]);
    health.get();
    return { runtime: "bun", version: Bun.version, get: (id) => stmt.get(id) };
  }
  const { DatabaseSync } = await import("node:sqlite");
  const [stmt, health] = prepareReadOnly(new DatabaseSync(path, { readOnly: true }), PRAGMAS, [LOOKUP_SQL, HEALTH_SQL]);
  health.get();
  return { runtime: "node", version: process.version, get: (id) => stmt.get(id) };
}

function run(get, ids, from, count, acc) {
  const n = ids.length;
  const regions = REGIONS;
  let found = 0;
  let bytes = 0;
  for (let i = from; i < from + count; i++) {
    const r = lookup(get, ids[i % n], regions[(i + Math.floor(i / n)) % 5]);
    if (r.status === 200) found++;
    bytes += Buffer.byteLength(r.body);
  }
  acc.found += found;
  acc.bytes += bytes;
}

let args;
try {
  args = parseArgs(process.argv.slice(2));
} catch (e) {
  console.error(`lookup-bench: ${e.message}`);
  process.exit(64);
}
const ids = readFileSync(args.ids, "utf8").split("\n").map((l) => (l.endsWith("\r") ? l.slice(0, -1) : l)).filter((l) => l !== "");
if (ids.length === 0) {
  console.error(`lookup-bench: no ids in ${args.ids}`);
  process.exit(64);
}
const store = await openStore(args.db);

// Warmup: the same formula from i = 0, results discarded.
run(store.get, ids, 0, args.warmup, { found: 0, bytes: 0 });
const acc = { found: 0, bytes: 0 };
const t0 = process.hrtime.bigint();
run(store.get, ids, 0, args.iterations, acc);
const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
console.log(JSON.stringify({
  runtime: store.runtime,
  version: store.version,
  iterations: args.iterations,
  seconds,
  ops_per_sec: seconds > 0 ? args.iterations / seconds : null,
  found: acc.found,
  bytes: acc.bytes,
}));
