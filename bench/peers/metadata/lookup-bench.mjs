// DB-only lookup benchmark for the video-metadata peers: no HTTP, just metadata.mjs's lookup() over
// the runtime's own SQLite binding (bun:sqlite under Bun, node:sqlite under Node), opened and
// prepared exactly as the servers do. metadata-rs bench-lookup does the same in Rust and prints the
// same line, so found and bytes must agree across runtimes.
//   bun run bench/peers/metadata/lookup-bench.mjs --db PATH --ids PATH --iterations 2000000 --warmup 200000
//   node bench/peers/metadata/lookup-bench.mjs --db PATH --ids PATH ...
// Iteration i looks up ids[i % n] in REGIONS[(i + floor(i / n)) % 5] (so each id meets every region
// over five passes); warmup iterations run first, untimed, with the same formula. Prints one JSON line:
//   {"runtime":"bun"|"node","version":…,"iterations":N,"seconds":S,"ops_per_sec":X,"found":F,"bytes":B}
// With --inserts N --insert-db PATH (and --insert-warmup W) it then times N single-row inserts, each its own
// autocommit transaction, through one prepared statement into a new file, as crates/metadata/src/
// bench_insert.rs does (same statements, same rows), and adds to the line
//   "inserts":N,"insert_seconds":S,"inserts_per_sec":X,"rows":W+N,"position_sum":P,"id_chars":C
// (rows and sums read back from the table: equal on every runtime).
import { existsSync, readFileSync } from "node:fs";
import { HEALTH_SQL, LOOKUP_SQL, PRAGMAS, REGIONS, lookup } from "./metadata.mjs";
import { prepareReadOnly } from "../sqlite.mjs";

function parseArgs(argv) {
  const out = { db: null, ids: null, iterations: 2_000_000, warmup: 200_000, inserts: 0, insertWarmup: 0, insertDb: null };
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
    else if (a === "--inserts") out.inserts = count();
    else if (a === "--insert-warmup") out.insertWarmup = count();
    else if (a === "--insert-db") out.insertDb = value();
    else throw new Error(`unknown argument ${a}`);
  }
  if (!out.db || !out.ids) throw new Error("--db and --ids are required");
  if (out.inserts > 0 && !out.insertDb) throw new Error("--inserts needs --insert-db PATH (a file that does not exist yet)");
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

// The insert loop's statements, byte for byte those of crates/metadata/src/bench_insert.rs. WAL with
// synchronous OFF: an fsync per commit would time the shared disk, not the binding.
const INSERT_PRAGMAS = ["PRAGMA journal_mode = WAL", "PRAGMA synchronous = OFF"];
const CREATE_SQL =
  "CREATE TABLE plays (id INTEGER PRIMARY KEY, video_id TEXT NOT NULL, region TEXT NOT NULL, position_ms INTEGER NOT NULL)";
const INSERT_SQL = "INSERT INTO plays (video_id, region, position_ms) VALUES (?, ?, ?)";
const READ_BACK_SQL =
  "SELECT count(*) AS rows, coalesce(sum(position_ms), 0) AS position_sum, coalesce(sum(length(video_id)), 0) AS id_chars FROM plays";

// A new file (an existing one is refused, so no run appends to another's rows), pragmas set, table created,
// the insert prepared once.
async function createInsertStore(path) {
  if (existsSync(path)) throw new Error(`${path} exists: the insert loop starts from a new file`);
  const db = typeof Bun !== "undefined" ? new (await import("bun:sqlite")).Database(path, { create: true })
    : new (await import("node:sqlite")).DatabaseSync(path);
  for (const p of INSERT_PRAGMAS) db.exec(p);
  db.exec(CREATE_SQL);
  return { insert: db.prepare(INSERT_SQL), readBack: db.prepare(READ_BACK_SQL) };
}

// Rows from..from+count of the shared sequence: (ids[i % n], the lookup loop's region for i, i·7919 mod 3,600,000).
function insertRows(insert, ids, from, count) {
  const n = ids.length;
  for (let i = from; i < from + count; i++) {
    insert.run(ids[i % n], REGIONS[(i + Math.floor(i / n)) % 5], (i * 7919) % 3_600_000);
  }
}

async function timeInserts(args, ids) {
  const store = await createInsertStore(args.insertDb);
  insertRows(store.insert, ids, 0, args.insertWarmup);
  const t0 = process.hrtime.bigint();
  insertRows(store.insert, ids, args.insertWarmup, args.inserts);
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const back = store.readBack.get();
  const rows = Number(back.rows);
  if (rows !== args.insertWarmup + args.inserts) {
    throw new Error(`the table holds ${rows} rows after ${args.insertWarmup + args.inserts} inserts`);
  }
  return {
    inserts: args.inserts,
    insert_seconds: seconds,
    inserts_per_sec: seconds > 0 ? args.inserts / seconds : null,
    rows,
    position_sum: Number(back.position_sum),
    id_chars: Number(back.id_chars),
  };
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
let inserted = {};
if (args.inserts > 0) {
  try {
    inserted = await timeInserts(args, ids);
  } catch (e) {
    console.error(`lookup-bench: ${e.message}`);
    process.exit(1);
  }
}
console.log(JSON.stringify({
  runtime: store.runtime,
  version: store.version,
  iterations: args.iterations,
  seconds,
  ops_per_sec: seconds > 0 ? args.iterations / seconds : null,
  found: acc.found,
  bytes: acc.bytes,
  ...inserted,
}));
