//! Real dependencies on this machine: PostgreSQL (`initdb` + `postgres`) and `redis-server`, started from
//! the installed binaries (PATH, the usual sbin dirs, Debian's /usr/lib/postgresql/<major>/bin) in temp
//! dirs, listening on free loopback ports only, optionally pinned to cores with taskset, and stopped when
//! dropped. No mocks anywhere that uses them: testkit's tests talk to these servers and inject faults into
//! them (kill, restart, freeze, thaw); compare runs them next to the servers it measures.
//!
//! ```no_run
//! let redis = localdeps::Redis::start(&localdeps::Options::default())?;
//! println!("{}", redis.url());
//! # anyhow::Ok(())
//! ```

mod binaries;
mod child;
mod owned_dir;
mod port;
mod postgres;
mod redis;

use std::path::PathBuf;
use std::sync::Arc;

pub use binaries::{INSTALL_HINT, find_in, search_dirs};
pub use child::{PlainSpawner, Process, Spawner};
pub use owned_dir::OwnedDir;
pub use port::free_port;
pub use postgres::{PgBin, Postgres, check_db_name, psql};
pub use redis::Redis;

/// How the servers are started.
#[derive(Clone)]
pub struct Options {
    /// `taskset -c` list the servers run on; `None`: wherever the scheduler puts them.
    pub cores: Option<String>,
    /// PostgreSQL keeps its durability defaults (fsync, full_page_writes): a benchmark of a write path with
    /// fsync off measures something no deployment runs. Off, both are disabled, which tests want for speed.
    pub durable: bool,
    /// Where binaries are looked up, in order ([`search_dirs`] by default).
    pub dirs: Vec<PathBuf>,
    /// Starts and owns the processes ([`PlainSpawner`] by default: plain children).
    pub spawner: Arc<dyn Spawner>,
}

impl Default for Options {
    fn default() -> Options {
        Options { cores: None, durable: false, dirs: search_dirs(), spawner: Arc::new(PlainSpawner) }
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options").field("cores", &self.cores).field("durable", &self.durable).finish_non_exhaustive()
    }
}
