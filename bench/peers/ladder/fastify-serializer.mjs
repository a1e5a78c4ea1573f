// The contract of Fastify's response serializer, checked on the Fastify ladder peer's own routes (buildApp()
// and RESPONSES of fastify.mjs, answered through fastify.inject, no socket): a 200 value is printed by
// fast-json-stringify from the route's `schema.response[200]`, which
//   1. drops a property the schema does not list, and
//   2. prints the string "42" as 42 for an `integer` property (and 2.5 as 2);
// so a handler that handed it an unchecked row would answer bytes ladder-rs never prints. Shown on
// /ladder/postgres, whose item.score is `integer`. A nullable count (`["integer","null"]`, the sqlite rung's
// duration_s and views) is not coerced: fast-json-stringify throws on "42" there, and Fastify answers 500.
// The peer relies on neither: ladder.mjs's video() checks each count is an integer (or null) and answers 500
// "stored video is malformed" otherwise, before anything is serialized (checked here too, through the real
// createApp() over a fake SQLite row), and item.score comes from pg's typed decode of an int4 column (a number).
//
// Run on each runtime from bench/peers (crates/ladder/tests/peers.rs does, on Node and on Bun):
//   node --disable-warning=ExperimentalWarning ladder/fastify-serializer.mjs; bun run ladder/fastify-serializer.mjs
// One line per check on stdout; exit 1 on the first mismatch (with what was expected and got), else 0.
import { buildApp } from "./fastify.mjs";
import { createApp } from "./ladder.mjs";
import { engine } from "../frameworks.mjs";

const BODY = JSON.stringify({ id: "abc", region: "en", tags: [] });
let failed = false;

async function expect(what, app, want, url = "/ladder/sqlite") {
  const res = await app.inject({ method: "POST", url, headers: { "content-type": "application/json" }, payload: BODY });
  const got = { status: res.statusCode, contentType: res.headers["content-type"], body: res.body };
  const ok = got.status === want.status && got.contentType === "application/json" && got.body === want.body;
  console.log(`${ok ? "ok" : "MISMATCH"}: ${what} (fastify on ${engine()})`);
  if (!ok) {
    console.log(`  expected ${JSON.stringify({ ...want, contentType: "application/json" })}`);
    console.log(`  got      ${JSON.stringify(got)}`);
    failed = true;
  }
  await app.close();
}

// A stand-in for createApp()'s object whose video() and item() hand the routes unchecked values: what the
// serializer does with them, alone.
const unchecked = (row, item = {}) => ({ video: (id) => ({ ok: true, id, ...row }), item: async () => item });

await expect(
  'the serializer: extra field dropped, "42" printed as 42 (integer)',
  buildApp(unchecked({ channel: "c", duration_s: 1, views: 7, extra: "not in the schema" }, { name: "n", score: "42", extra: 1 })),
  { status: 200, body: '{"ok":true,"id":"abc","channel":"c","duration_s":1,"views":7,"item":{"name":"n","score":42}}' },
  "/ladder/postgres",
);
await expect(
  'the serializer: "42" refused for ["integer","null"] (500)',
  buildApp(unchecked({ channel: "c", duration_s: "42", views: 7 })),
  { status: 500, body: JSON.stringify({ error: "The value of '#/properties/duration_s' does not match schema definition." }) },
);

// The real createApp() over a fake SQLite whose row holds the string "42" (TEXT in an INTEGER column) or a REAL:
// ladder.mjs refuses both, as ladder-rs does, so the serializer never sees them.
const quiet = () => {};
const cfg = { db: ":fake:", databaseUrl: null, upstreamUrl: null, upstreamTimeoutMs: 2000, poolSize: 1, pgTimeoutMs: 2000 };
for (const [what, row] of [
  ['the peer: a stored "42" answered 500', { channel: "c", duration_s: "42", views: 7 }],
  ["the peer: a stored 2.5 answered 500", { channel: "c", duration_s: 1, views: 2.5 }],
]) {
  const ladder = createApp(cfg, () => ({ get: () => row }), quiet);
  await expect(what, buildApp(ladder), { status: 500, body: '{"error":"stored video is malformed"}' });
}
// And a well-formed row passes through unchanged, NULLs included.
const ladder = createApp(cfg, () => ({ get: () => ({ channel: null, duration_s: -5, views: 9007199254740991 }) }), quiet);
await expect("the peer: a well-formed row printed as stored", buildApp(ladder), {
  status: 200,
  body: '{"ok":true,"id":"abc","channel":null,"duration_s":-5,"views":9007199254740991}',
});

process.exit(failed ? 1 : 0);
