-- Run once by the postgres image when its volume is first initialized (docker-entrypoint-initdb.d).
-- POSTGRES_DB creates `scribe` (scribe-rs's; scribe-rs would also create it itself). The Bun and Node peers of
-- the bench profile do not create databases, so theirs are made here: each server under test writes to its own.
CREATE DATABASE scribe_bun;
CREATE DATABASE scribe_node;
