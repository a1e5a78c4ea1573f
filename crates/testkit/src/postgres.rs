//! A throwaway PostgreSQL cluster ([`localdeps::Postgres`]: trust auth for user `postgres`, fsync off) with
//! failures as panics, as tests want them.

pub struct Postgres(localdeps::Postgres);

impl Postgres {
    /// Creates a cluster and starts it; waits until it accepts queries. Panics with a clear message when
    /// PostgreSQL is not installed (the README's test command installs it).
    pub fn start() -> Postgres {
        Postgres(localdeps::Postgres::start(&localdeps::Options::default()).unwrap_or_else(|e| panic!("{e:#}")))
    }

    pub fn port(&self) -> u16 {
        self.0.port()
    }

    /// A URL for `database` as user `postgres` (no password: trust auth on loopback).
    pub fn url(&self, database: &str) -> String {
        self.0.url(database)
    }

    /// Creates a database (each test its own) and returns its URL.
    pub fn create_database(&self, name: &str) -> String {
        self.0.create_database(name).unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// Runs SQL through psql and returns its unaligned output, trimmed. Panics when psql fails.
    pub fn psql(&self, database: &str, sql: &str) -> String {
        self.0.psql(database, sql).unwrap_or_else(|e| panic!("{e:#}")).trim().to_string()
    }

    /// Immediate shutdown: like a crash (no checkpoint); committed data survives via the WAL.
    pub fn stop_immediate(&mut self) {
        self.0.stop_immediate();
    }

    /// Starts it again on the same port and data (after a stop).
    pub fn restart(&mut self) {
        self.0.restart().unwrap_or_else(|e| panic!("restarting postgres: {e:#}"));
    }
}
