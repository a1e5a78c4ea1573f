//! The bench: what every cell and every loadgen process of one invocation shares (the loader binary, the
//! core layout, the timings, where logs go).

use std::path::PathBuf;
use std::time::Duration;

use crate::system::cores::Cores;

/// Closed-loop runs with the server cores less busy than this were limited by the loader.
pub const LOADER_BOUND_PCT: f64 = 90.0;

/// What every cell shares: the loader, the layout, the timings.
#[derive(Debug, Clone)]
pub struct Bench {
    pub loadgen: PathBuf,
    pub server_cores: Cores,
    pub loader_cores: Cores,
    pub warmup: Duration,
    pub duration: Duration,
    /// loadgen's per-request timeout; a timeout voids the run.
    pub request_timeout: Duration,
    /// How long a server may take to answer its first 200.
    pub ready_timeout: Duration,
    /// Server logs and loadgen reports go here.
    pub logdir: PathBuf,
    /// loadgen's `--engine`; None leaves loadgen's default (io_uring where the kernel allows it).
    pub loadgen_engine: Option<&'static str>,
}
