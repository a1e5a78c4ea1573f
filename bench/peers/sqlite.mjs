// The peers' read-only SQLite setup, shared by the metadata and ladder servers (Bun and Node) and
// lookup-bench.mjs: the same pragmas and statements as the Rust servers, prepared once at open.
//
// `db` is an opened database of either binding (bun:sqlite's Database or node:sqlite's DatabaseSync,
// read-only); both have exec() and prepare(). Returns the prepared statements in the order of `sqls`.
// On any failure the database is closed and the error rethrown: the caller treats it as "database
// unavailable" and opens again later.
export function prepareReadOnly(db, pragmas, sqls) {
  try {
    for (const p of pragmas) db.exec(p);
    return sqls.map((sql) => db.prepare(sql));
  } catch (e) {
    db.close();
    throw e;
  }
}
