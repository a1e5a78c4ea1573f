// Scribe benchmark peer: the handler logic shared by server-node.mjs (node:http) and
// server-bun.ts (Bun.serve), so both runtimes run exactly the same JavaScript.
//
// It reproduces the original Scribe (Node/express) on the routes crates/compare's notes workloads time:
//   POST /:component      validate the envelope, make sure the tables exist, insert the row and its
//                         first history entry, answer [row]
//   GET  /:component/:id  [row], or [] when absent or when the table does not exist
//   GET  /healthz         200 {"status":"ok","postgres":"ok","redis":"ok"} or 503 naming the failed one
//   GET  /                200
// Rows serialize as node-postgres gives them: columns in table order, timestamptz as a JS Date
// (so JSON shows UTC with milliseconds and Z), jsonb keys in the order Postgres stores them.
//
// Two variants (env SCRIBE_VARIANT), identical responses:
//   shipped  what the original does on every POST: builds and compiles a new ajv validator, runs
//            CREATE TABLE IF NOT EXISTS for both tables and ALTER TABLE ... ADD COLUMN IF NOT EXISTS
//            for each data column, then the insert and the history insert as two autocommit statements.
//   fixed    the obvious repairs: validators compiled once per schema, the DDL once per component
//            (remembered in the process), the insert and the history insert in one transaction.
// Both look the component's schema up in Redis (db SCRIBE_APP_REDIS_SCHEMA_DB, default 1; key =
// component name; value = a JSON Schema for `data`) on every POST, as the original's schema cache
// does, and fall back to the default envelope schema when the key is absent or Redis is unavailable.
// Redis never blocks a request: commands are refused while disconnected and bounded by a timeout.
//
// Env: SCRIBE_APP_PORT (1337), SCRIBE_APP_HOST (127.0.0.1), SCRIBE_VARIANT (shipped|fixed, default
// shipped), DATABASE_URL (else SCRIBE_APP_DB_HOST/PORT/USER/PASS/NAME), REDIS_URL (else
// SCRIBE_APP_REDIS_HOST/PORT), SCRIBE_APP_REDIS_SCHEMA_DB (1), SCRIBE_APP_DB_POOL (pg Pool max, 10:
// node-postgres' default), SCRIBE_APP_PAYLOAD_LIMIT (bytes, 50 MiB).

import Ajv from "ajv";
import addFormats from "ajv-formats";
import DiffMatchPatch from "diff-match-patch";
import pg from "pg";
import { createClient } from "redis";

// The record envelope: the same rules as schemas/default.table.schema.json, which scribe-rs compiles in.
export const DEFAULT_SCHEMA = Object.freeze({
  type: "object",
  properties: {
    data: { type: "object" },
    date_created: { type: "string", format: "date-time" },
    date_modified: { type: "string", format: "date-time" },
    created_by: { type: "integer" },
    modified_by: { type: "integer" },
  },
  required: ["data", "date_created", "date_modified", "created_by", "modified_by"],
  additionalProperties: false,
});

// Columns after `id`, in table order; also the ALTER TABLE list of the shipped variant.
const COLUMNS = [
  ["data", "jsonb"],
  ["date_created", "timestamptz"],
  ["date_modified", "timestamptz"],
  ["created_by", "integer"],
  ["modified_by", "integer"],
];

// Table names come from the URL and go into SQL unquoted (as in the original, so `Notes` and
// `notes` are one table): only plain identifiers are accepted.
const COMPONENT_RE = /^[A-Za-z_][A-Za-z0-9_]{0,54}$/;
const REDIS_TIMEOUT_MS = 100;
const HEALTH_TIMEOUT_MS = 1000;
const PG_UNDEFINED_TABLE = "42P01";
const INT4_MAX = 2147483647;

const dmp = new DiffMatchPatch();

// --------------------------------------------------------------------------------------
// Config
// --------------------------------------------------------------------------------------

export function configFromEnv(env = process.env) {
  const variant = env.SCRIBE_VARIANT ?? "shipped";
  if (variant !== "shipped" && variant !== "fixed") {
    throw new Error(`SCRIBE_VARIANT must be shipped or fixed, not ${JSON.stringify(variant)}`);
  }
  const enc = encodeURIComponent;
  const databaseUrl =
    env.DATABASE_URL ??
    `postgres://${enc(env.SCRIBE_APP_DB_USER ?? "postgres")}:${enc(env.SCRIBE_APP_DB_PASS ?? "")}@` +
      `${env.SCRIBE_APP_DB_HOST ?? "127.0.0.1"}:${env.SCRIBE_APP_DB_PORT ?? 5432}/${enc(env.SCRIBE_APP_DB_NAME ?? "scribe")}`;
  const redisUrl =
    env.REDIS_URL ?? `redis://${env.SCRIBE_APP_REDIS_HOST ?? "127.0.0.1"}:${env.SCRIBE_APP_REDIS_PORT ?? 6379}`;
  return {
    variant,
    port: Number(env.SCRIBE_APP_PORT ?? 1337),
    host: env.SCRIBE_APP_HOST ?? "127.0.0.1",
    databaseUrl,
    redisUrl,
    // A database number in REDIS_URL's path wins over SCRIBE_APP_REDIS_SCHEMA_DB.
    redisDb: redisDbFromUrl(redisUrl) ?? Number(env.SCRIBE_APP_REDIS_SCHEMA_DB ?? 1),
    poolMax: Number(env.SCRIBE_APP_DB_POOL ?? 10),
    payloadLimit: Number(env.SCRIBE_APP_PAYLOAD_LIMIT ?? 50 * 1024 * 1024),
  };
}

function redisDbFromUrl(url) {
  try {
    const m = /^\/(\d+)$/.exec(new URL(url).pathname);
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

// --------------------------------------------------------------------------------------
// Responses: { status, body } with body already JSON text; the servers add the headers.
// --------------------------------------------------------------------------------------

const json = (status, value) => ({ status, body: JSON.stringify(value) });
const error = (status, message) => json(status, { error: message });

function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// --------------------------------------------------------------------------------------
// The app
// --------------------------------------------------------------------------------------

export async function createApp(cfg) {
  const pool = new pg.Pool({
    connectionString: cfg.databaseUrl,
    max: cfg.poolMax,
    connectionTimeoutMillis: 5000,
  });
  // An idle client losing its connection emits on the pool; without a listener that kills the process.
  pool.on("error", (e) => console.error(`postgres: idle client error: ${e.message}`));

  const redis = createClient({
    url: cfg.redisUrl,
    database: cfg.redisDb,
    // Fail fast while disconnected instead of queueing commands until Redis comes back.
    disableOfflineQueue: true,
    socket: {
      connectTimeout: 1000,
      reconnectStrategy: (retries) => Math.min(50 * 2 ** retries, 2000),
    },
  });
  let lastRedisError = 0;
  redis.on("error", (e) => {
    // node-redis emits on every failed reconnect; one line every 10 s is enough.
    const now = Date.now();
    if (now - lastRedisError > 10_000) {
      lastRedisError = now;
      console.error(`redis: ${e.message || e}`);
    }
  });
  // Start serving even when Redis is down: schema lookups fall back to the default schema.
  try {
    await withTimeout(redis.connect(), 2000, "redis connect"); // node-redis keeps reconnecting after this
  } catch (e) {
    console.error(`redis: not connected at start (${e.message}); using the default schema until it is`);
  }

  const fixed = cfg.variant === "fixed";
  const validators = new Map(); // fixed: schema text -> compiled validator
  const ddlDone = new Map(); // fixed: component -> Promise of its DDL

  function newAjv() {
    // strict: false so a component schema from Redis with unknown keywords still compiles.
    const ajv = new Ajv({ allErrors: true, strict: false });
    addFormats(ajv);
    return ajv;
  }

  // The component's schema for `data` from Redis, or null (absent, Redis down or slow, bad JSON).
  async function componentSchemaText(component) {
    if (!redis.isReady) return null;
    try {
      return await withTimeout(redis.get(component), REDIS_TIMEOUT_MS, "redis GET");
    } catch {
      return null;
    }
  }

  function schemaFor(text) {
    if (text == null) return DEFAULT_SCHEMA;
    let own;
    try {
      own = JSON.parse(text);
    } catch {
      return DEFAULT_SCHEMA;
    }
    if (own === null || typeof own !== "object") return DEFAULT_SCHEMA;
    return { ...DEFAULT_SCHEMA, properties: { ...DEFAULT_SCHEMA.properties, data: { ...own, type: "object" } } };
  }

  async function validatorFor(component) {
    const text = await componentSchemaText(component);
    if (!fixed) return newAjv().compile(schemaFor(text)); // the original: a new validator per request
    const key = text ?? "";
    let v = validators.get(key);
    if (!v) {
      v = newAjv().compile(schemaFor(text));
      validators.set(key, v);
    }
    return v;
  }

  function ddlStatements(c) {
    return [
      `CREATE TABLE IF NOT EXISTS ${c} (id serial primary key, ${COLUMNS.map(([n, t]) => `${n} ${t}`).join(", ")})`,
      `CREATE TABLE IF NOT EXISTS ${c}_history (id serial primary key, ` +
        `foreignkey integer references ${c}(id) on delete cascade, patches json)`,
      ...COLUMNS.map(([n, t]) => `ALTER TABLE ${c} ADD COLUMN IF NOT EXISTS ${n} ${t}`),
    ];
  }

  async function runDdl(c) {
    for (const sql of ddlStatements(c)) await pool.query(sql);
  }

  function ensureTables(c) {
    if (!fixed) return runDdl(c);
    let p = ddlDone.get(c);
    if (!p) {
      p = runDdl(c).catch((e) => {
        ddlDone.delete(c); // try again on the next request
        throw e;
      });
      ddlDone.set(c, p);
    }
    return p;
  }

  const INSERT_COLS = COLUMNS.map(([n]) => n).join(", ");
  const insertSql = (c) => `INSERT INTO ${c} (${INSERT_COLS}) VALUES ($1, $2, $3, $4, $5) RETURNING *`;
  const historySql = (c) => `INSERT INTO ${c}_history (foreignkey, patches) VALUES ($1, $2)`;
  const insertParams = (r) => [r.data, r.date_created, r.date_modified, r.created_by, r.modified_by];
  // The first history entry: the patch that turns the new row's JSON into "".
  const firstPatches = (row) => JSON.stringify([dmp.patch_toText(dmp.patch_make(JSON.stringify(row), ""))]);

  async function create(c, record) {
    await ensureTables(c);
    if (!fixed) {
      const { rows } = await pool.query(insertSql(c), insertParams(record));
      await pool.query(historySql(c), [rows[0].id, firstPatches(rows[0])]);
      return rows[0];
    }
    const client = await pool.connect();
    try {
      await client.query("BEGIN");
      const { rows } = await client.query(insertSql(c), insertParams(record));
      await client.query(historySql(c), [rows[0].id, firstPatches(rows[0])]);
      await client.query("COMMIT");
      client.release();
      return rows[0];
    } catch (e) {
      // A failed ROLLBACK means the connection is unusable: destroy it rather than return it.
      try {
        await client.query("ROLLBACK");
        client.release();
      } catch (e2) {
        client.release(e2);
      }
      throw e;
    }
  }

  async function post(component, bodyText) {
    let record;
    try {
      record = JSON.parse(bodyText);
    } catch {
      return error(400, "invalid JSON body");
    }
    const validate = await validatorFor(component);
    if (!validate(record)) return json(400, validate.errors);
    const row = await create(component, record);
    return json(200, [row]);
  }

  async function getById(component, id) {
    if (!/^\d+$/.test(id)) return error(400, "id must be an integer");
    if (Number(id) > INT4_MAX) return json(200, []);
    try {
      const { rows } = await pool.query(`SELECT * FROM ${component} WHERE id = $1`, [Number(id)]);
      return json(200, rows);
    } catch (e) {
      if (e.code === PG_UNDEFINED_TABLE) return json(200, []);
      throw e;
    }
  }

  async function health() {
    const check = async (p) => {
      try {
        await p();
        return "ok";
      } catch {
        return "error";
      }
    };
    const [postgres, redisState] = await Promise.all([
      check(() => withTimeout(pool.query("SELECT 1"), HEALTH_TIMEOUT_MS, "postgres")),
      check(() => {
        if (!redis.isReady) throw new Error("redis not connected");
        return withTimeout(redis.ping(), HEALTH_TIMEOUT_MS, "redis");
      }),
    ]);
    const ok = postgres === "ok" && redisState === "ok";
    return json(ok ? 200 : 503, { status: ok ? "ok" : "error", postgres, redis: redisState });
  }

  // method, path without the query string, body text (POST only) -> { status, body }
  async function handle(method, path, bodyText) {
    try {
      const parts = path.split("/").filter(Boolean);
      if (method === "GET" || method === "HEAD") {
        if (parts.length === 0) return json(200, { status: "ok" });
        if (parts.length === 1 && parts[0] === "healthz") return await health();
        if (parts.length === 2) {
          if (!COMPONENT_RE.test(parts[0])) return error(400, "invalid component name");
          return await getById(parts[0], parts[1]);
        }
      } else if (method === "POST" && parts.length === 1) {
        if (!COMPONENT_RE.test(parts[0])) return error(400, "invalid component name");
        return await post(parts[0], bodyText);
      }
      return error(404, "not found");
    } catch (e) {
      console.error(`${method} ${path}: ${e.stack || e}`);
      return error(500, "internal error");
    }
  }

  async function close() {
    if (redis.isOpen) redis.destroy();
    await pool.end();
  }

  return { handle, close, variant: cfg.variant };
}
