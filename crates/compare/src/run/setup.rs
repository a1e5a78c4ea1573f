//! The bench: what every cell and every loadgen process of one invocation shares (the loader binary, the
//! core layout, the timings, where logs go).

use std::path::PathBuf;
use std::time::Duration;

use crate::system::cores::Cores;

/// Closed-loop runs with the server cores less busy than this were limited by the loader.
pub const LOADER_BOUND_PCT: f64 = 90.0;

/// How long a server may take to its first 200 (Node with a cold disk cache and a Postgres pool).
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);

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
    /// A command loadgen runs under, between taskset and loadgen (the budget gate's callgrind); empty: none.
    pub loadgen_wrapper: Vec<String>,
}

/// A run's timings: the warmup, the measured window and loadgen's per-request timeout.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub warmup: Duration,
    pub duration: Duration,
    pub request_timeout: Duration,
}

impl Bench {
    /// The bench of one invocation (a comparison or a calibration): `loadgen`, the (server, loader) cores,
    /// the timings, logs under `logdir`; every server gets [`READY_TIMEOUT`], loadgen its default engine.
    pub fn new(loadgen: PathBuf, (server, loader): (&Cores, &Cores), timing: Timing, logdir: PathBuf) -> Bench {
        Bench {
            loadgen,
            server_cores: server.clone(),
            loader_cores: loader.clone(),
            warmup: timing.warmup,
            duration: timing.duration,
            request_timeout: timing.request_timeout,
            ready_timeout: READY_TIMEOUT,
            logdir,
            loadgen_engine: None,
            loadgen_wrapper: Vec::new(),
        }
    }
}
