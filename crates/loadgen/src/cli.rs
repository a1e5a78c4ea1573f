//! The command line: wrk-compatible basics (`-t -c -d -H --timeout --latency`, URL positional) and the rest,
//! parsed by clap into [`RunArgs`] and [`CapacityArgs`], then turned into plain settings
//! ([`RunSettings`], [`CapacitySettings`]) with the flags that must fit together checked. Only this module
//! and the binary know about clap: the rest of loadgen reads the settings.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::builder::PossibleValue;
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use oskit::cpu_list::CpuListError;

// Where these lived before the settings moved out of this module; callers may still name them here.
pub use crate::rate::{Rate, Schedule};
use crate::settings::{
    CapacitySettings, ExpectSettings, HdrLogSettings, OutputSettings, RequestLogSettings, RequestSettings, RunSettings,
    TlsSettings, TlsVersion, Trust,
};
pub use crate::settings::{EngineChoice, Pick};
use crate::target::TargetError;
// The flags' duration syntax lives in textfmt, shared with every binary.
use textfmt::parse_duration;

#[derive(Debug, Parser)]
#[command(
    name = "loadgen",
    version,
    about = "HTTP/1.1 load generator: closed and open loop, HDR latency, JSON reports"
)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Merge JSON reports (e.g. one per machine) exactly: counts add, histograms merge.
    Merge {
        /// Reports written by `loadgen --json`.
        #[arg(required = true)]
        reports: Vec<PathBuf>,
        /// Write the merged report as JSON here (`-` for stdout).
        #[arg(long)]
        json: Option<PathBuf>,
        /// Print the latency distribution.
        #[arg(long)]
        latency: bool,
    },
    /// Draw a `--log-requests` file as an SVG: latency over time (p50, p99 and max per time bucket).
    LogChart {
        /// The file `--log-requests` wrote.
        log: PathBuf,
        /// Write the SVG here.
        #[arg(long)]
        svg: PathBuf,
        /// Width of a time bucket, e.g. 100ms, 1s.
        #[arg(long, default_value = "100ms", value_parser = parse_duration)]
        bucket: Duration,
    },
    /// Find the highest open-loop rate at which a latency objective holds (e.g. `--p99 10ms`): steps that
    /// double the rate, then bisect, each with its own warmup. `--json FILE` writes every step.
    Capacity(Box<CapacityArgs>),
}

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Target, e.g. http://127.0.0.1:3000/api/hello or https://localhost:3443/ (https needs --cacert or
    /// --insecure).
    #[arg(required = true)]
    pub url: Option<String>,
    /// Worker threads, each with its own event loop, connections and histogram.
    #[arg(short = 't', long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: u32,
    /// Connections, spread evenly over threads.
    #[arg(short = 'c', long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub connections: u32,
    /// Measured duration, e.g. 10s, 500ms, 2m.
    #[arg(short = 'd', long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Warmup before measuring (its results are discarded).
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    pub warmup: Duration,
    /// Extra request header, `Name: value` (repeatable).
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,
    /// Per-request timeout: on expiry the connection is closed, reopened and a timeout counted.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Print the latency distribution.
    #[arg(long)]
    pub latency: bool,
    /// Request method.
    #[arg(short = 'm', long, default_value = "GET")]
    pub method: String,
    /// Request body, read from this file (sent with Content-Length).
    #[arg(long)]
    pub body_file: Option<PathBuf>,
    /// Pin worker threads to these CPUs, round-robin: `1`, `2-3`, `0,2`.
    #[arg(long)]
    pub pin: Option<String>,
    /// Requests in flight per connection (1 = no pipelining).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub pipeline: u32,
    /// I/O engine: io_uring (one ring per thread, multishot receives, one submit per loop turn) or epoll.
    /// `auto` takes io_uring where the kernel allows it and says so on stderr when it falls back to epoll.
    #[arg(long, value_enum, default_value_t = EngineChoice::Auto, env = "LOADGEN_ENGINE")]
    pub engine: EngineChoice,
    /// Close each connection after N responses and open a new one (connection churn, plaintext or TLS): the
    /// Nth request carries `Connection: close`. Without it, connections are kept alive.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub requests_per_conn: Option<u64>,
    /// Speak HTTP/2: over https, ALPN offers h2 alone; over http, h2c by prior knowledge (the connection
    /// preface, no Upgrade). A server that answers in another protocol fails the run, saying which.
    #[arg(long, conflicts_with_all = ["pipeline", "requests_per_conn"])]
    pub http2: bool,
    /// With --http2: concurrent streams per connection (h2load's -m). When the server allows fewer at once
    /// (SETTINGS_MAX_CONCURRENT_STREAMS), each connection keeps that many open and the report says so.
    #[arg(long, default_value_t = 1, requires = "http2", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub streams: u32,
    /// https: trust the CA certificate(s) in this PEM file (no system roots are read).
    #[arg(long, conflicts_with = "insecure")]
    pub cacert: Option<PathBuf>,
    /// https: accept any server certificate (its handshake signature is still verified).
    #[arg(long)]
    pub insecure: bool,
    /// https: resume TLS sessions (an in-memory ticket store per thread), or a full handshake on every new
    /// connection (off). Default: on.
    #[arg(long, value_enum)]
    pub tls_resume: Option<Switch>,
    /// https: offer exactly this TLS version (default: 1.3 and 1.2).
    #[arg(long, value_enum)]
    pub tls_version: Option<TlsVersion>,
    /// https: cipher suites to offer, by name, comma-separated (e.g. TLS13_AES_128_GCM_SHA256). Default:
    /// rustls's (AES-256-GCM, AES-128-GCM, ChaCha20-Poly1305; ECDHE-ECDSA/RSA for 1.2).
    #[arg(long, value_delimiter = ',')]
    pub tls_cipher: Vec<String>,
    /// https: key-exchange groups to offer, by name, comma-separated (x25519, secp256r1, secp384r1,
    /// x25519mlkem768); the first is sent as the key share. Default: x25519,secp256r1 (every TLS 1.3 server
    /// takes X25519; P-256 is listed for TLS 1.2 servers with a P-256 certificate).
    #[arg(long, value_delimiter = ',')]
    pub tls_group: Vec<String>,
    /// Open loop: total requests per second over all threads. Latency is then measured from each request's
    /// intended send time (corrected for coordinated omission). Without it: closed loop, like wrk.
    /// `START:END` with --ramp: the rate climbs (or falls) linearly from START to END.
    #[arg(short = 'R', long, value_parser = Rate::parse)]
    pub rate: Option<Rate>,
    /// With `-R START:END`: how long the linear ramp takes, from the start of the measured window (the warmup
    /// runs at START; after the ramp the rate stays at END). Must fit in -d.
    #[arg(long, value_parser = parse_duration, requires = "rate")]
    pub ramp: Option<Duration>,
    /// Open-loop arrival schedule.
    #[arg(long, value_enum, default_value_t = Schedule::Uniform)]
    pub schedule: Schedule,
    /// Path template replacing the URL's path, e.g. `/v1/metadata/{id}?region={region}`.
    #[arg(long)]
    pub path: Option<String>,
    /// Values for a template variable: `NAME=@FILE` (one per line) or `NAME=a,b,c` (repeatable).
    #[arg(long = "var")]
    pub vars: Vec<String>,
    /// How template values are drawn.
    #[arg(long, value_enum, default_value_t = Pick::Random)]
    pub pick: Pick,
    /// Seed for random draws and the Poisson schedule (same seed, same sequence).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Replay the raw HTTP/1.1 requests in this file, in order, round-robin (instead of the URL's path).
    #[arg(long)]
    pub replay: Option<PathBuf>,
    /// Expected status code of every response; a comma list (`200,404`) allows any of them.
    #[arg(long, value_delimiter = ',')]
    pub expect_status: Vec<u16>,
    /// Expected exact body.
    #[arg(long)]
    pub expect_body: Option<String>,
    /// Expected exact body, read from a file.
    #[arg(long)]
    pub expect_body_file: Option<PathBuf>,
    /// The body must contain this.
    #[arg(long)]
    pub expect_contains: Option<String>,
    /// The body's SHA-256, hex.
    #[arg(long)]
    pub expect_sha256: Option<String>,
    /// The body's length in bytes.
    #[arg(long)]
    pub expect_length: Option<u64>,
    /// A header the response must carry: `Name` or `Name: value` (repeatable).
    #[arg(long)]
    pub expect_header: Vec<String>,
    /// Check assertions on every Nth response (1 = all).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub check_every: u64,
    /// Do not fail the run (exit 0) on assertion failures or when fewer connections were established than asked.
    #[arg(long)]
    pub allow_failures: bool,
    /// Write the JSON report here (`-` for stdout).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write one JSON line per second while running (`-` for stdout).
    #[arg(long)]
    pub jsonl: Option<PathBuf>,
    /// No live progress line (it is only shown on a terminal anyway).
    #[arg(long)]
    pub no_progress: bool,
    /// Write one line per response of the measured window here (tab-separated: intended send time, actual
    /// send time, latency, status, body bytes, connection; see the README). `loadgen log-chart` draws it.
    #[arg(long)]
    pub log_requests: Option<PathBuf>,
    /// Log every Nth response only.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..), requires = "log_requests")]
    pub log_every: u64,
    /// Log at most this many responses (held in memory until the run ends, about 40 bytes each).
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..), requires = "log_requests")]
    pub log_max: u64,
    /// Write an HdrHistogram interval log of the measured window here: one latency histogram per
    /// --hdr-interval, every thread merged, values in microseconds, in the format HdrHistogram's
    /// HistogramLogProcessor reads (give it -outputValueUnitRatio 1000 to print milliseconds; see the README).
    #[arg(long)]
    pub hdr_log: Option<PathBuf>,
    /// With --hdr-log: the length of each interval, a whole number of milliseconds (e.g. 1s, 250ms).
    #[arg(long, default_value = "1s", value_parser = parse_duration, requires = "hdr_log")]
    pub hdr_interval: Duration,
}

#[derive(Debug, Clone, Args)]
pub struct CapacityArgs {
    /// The objective: the 99th percentile of latency (from the intended send time) must be at most this.
    #[arg(long, value_parser = parse_duration)]
    pub p99: Option<Duration>,
    /// The 99.9th percentile must be at most this too (or alone, without --p99).
    #[arg(long, value_parser = parse_duration)]
    pub p999: Option<Duration>,
    /// The first rate tried, requests per second.
    #[arg(long, default_value_t = 1000.0)]
    pub start: f64,
    /// Stop the doubling here: the capacity is reported as at least this when it still passes.
    #[arg(long, default_value_t = 10_000_000.0)]
    pub max: f64,
    /// Bisect until the highest pass and the lowest failure are within this many percent.
    #[arg(long, default_value_t = 5.0)]
    pub precision: f64,
    /// Run a failed step again this many times at the same rate; it fails only if every attempt does.
    #[arg(long, default_value_t = 1)]
    pub retries: u32,
    /// The request, connection, assertion and timing flags, as for a run: -d is each step's measured length
    /// and --warmup its warmup (here 5s and 1s unless given), -c and -t apply to every step.
    #[command(flatten)]
    pub run: RunArgs,
}

/// A capacity step's length and warmup when not given: a run's 10 s after none would make a search of a
/// dozen steps take minutes.
const CAPACITY_STEP: Duration = Duration::from_secs(5);
const CAPACITY_WARMUP: Duration = Duration::from_secs(1);

/// Parses the process's command line (see [`parse_from`]).
pub fn from_command_line() -> Result<Cli, clap::Error> {
    parse_from(std::env::args_os())
}

/// Parses a command line, program name first. Unlike `Cli::try_parse_from`, `capacity` gets its own
/// defaults for -d and --warmup: clap has one default per flag and the run's flags are shared, so they are
/// set here, where clap says whether the user gave a value.
pub fn parse_from<I, T>(argv: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let matches = Cli::command().try_get_matches_from(argv)?;
    let mut cli = Cli::from_arg_matches(&matches)?;
    if let (Some(Command::Capacity(args)), Some(given)) = (&mut cli.command, matches.subcommand_matches("capacity")) {
        if defaulted(given, "duration") {
            args.run.duration = CAPACITY_STEP;
        }
        if defaulted(given, "warmup") {
            args.run.warmup = CAPACITY_WARMUP;
        }
    }
    Ok(cli)
}

fn defaulted(matches: &ArgMatches, id: &str) -> bool {
    matches.value_source(id) == Some(ValueSource::DefaultValue)
}

/// clap's error as the one line loadgen prints for bad input (without clap's `error: ` and usage).
pub fn error_line(e: &clap::Error) -> String {
    let text = e.to_string();
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let mut line = lines.next().unwrap_or("invalid arguments").trim_start_matches("error: ").to_string();
    // "the following required arguments were not provided:" names them on the next line.
    if line.ends_with(':')
        && let Some(next) = lines.next()
    {
        line = format!("{line} {next}");
    }
    line
}

/// Why a run's flags give no settings: the ones clap cannot check alone (they need the URL resolved, or
/// two flags read together). Each message is one line for the user.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("a URL is required")]
    NoUrl,
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error("empty CPU list {raw:?}")]
    EmptyCpuList { raw: String },
    #[error("invalid CPU list {raw:?} (e.g. 1, 2-3, 0,2)")]
    BadCpuList { raw: String },
    #[error("--rate must be a positive number of requests per second")]
    RateNotPositive,
    #[error("-R {}:{} is a ramp: say how long it takes with --ramp DURATION", rate.start, rate.end)]
    RampWithoutDuration { rate: Rate },
    #[error("--ramp needs a ramp: -R START:END")]
    DurationWithoutRamp,
    #[error("--ramp {ramp:?} is longer than the measured window (-d {window:?})")]
    RampLongerThanWindow { ramp: Duration, window: Duration },
    #[error("--cacert, --insecure and --tls-* apply to https:// URLs only")]
    TlsFlagsWithoutHttps,
    #[error("an https:// URL needs --cacert PATH (the CA to trust) or --insecure")]
    HttpsWithoutTrust,
    #[error("--hdr-interval must be more than zero")]
    HdrIntervalZero,
    #[error(
        "--hdr-interval {interval:?} is not a whole number of milliseconds (the log's timestamps are in milliseconds)"
    )]
    HdrIntervalNotWholeMillis { interval: Duration },
}

/// Why a capacity search's flags give no settings: the search's own flags (checked first), or the run's.
#[derive(Debug, thiserror::Error)]
pub enum CapacitySettingsError {
    #[error("capacity needs an objective: --p99 DURATION and/or --p999 DURATION")]
    NoObjective,
    #[error("capacity chooses the rates itself: leave out -R and --ramp")]
    RateGiven,
    #[error("capacity writes no per-second lines: leave out --jsonl (--json carries every step)")]
    JsonlGiven,
    #[error("capacity writes no interval log: leave out --hdr-log (each step would overwrite it)")]
    HdrLogGiven,
    #[error("--start must be at least 1 request per second")]
    StartBelowOne,
    #[error("--max must be at least --start")]
    MaxBelowStart,
    #[error("--precision is a percentage between 0 and 100")]
    PrecisionOutOfRange,
    #[error("-d (each step's length) must be more than zero")]
    ZeroStep,
    #[error(transparent)]
    Run(#[from] SettingsError),
}

impl RunArgs {
    /// The run these flags ask for: the URL resolved, the CPU list parsed, the rate checked against --ramp
    /// and -d.
    pub fn settings(&self) -> Result<RunSettings, SettingsError> {
        let url = self.url.as_deref().ok_or(SettingsError::NoUrl)?;
        let target = crate::target::parse(url)?;
        let pins = self.pin.as_deref().map(parse_cpus).transpose()?;
        self.check_rate()?;
        let hdr_log = self.hdr_log_settings()?;
        let tls = self.tls_settings(target.tls)?;
        Ok(RunSettings {
            target,
            threads: self.threads as usize,
            connections: self.connections as usize,
            duration: self.duration,
            warmup: self.warmup,
            timeout: self.timeout,
            pipeline: if self.http2 { self.streams as usize } else { self.pipeline as usize },
            http2: self.http2,
            pins,
            engine: self.engine,
            rate: self.rate,
            ramp: self.ramp,
            schedule: self.schedule,
            seed: self.seed,
            requests_per_conn: self.requests_per_conn,
            tls,
            requests: RequestSettings {
                method: self.method.clone(),
                headers: self.headers.clone(),
                body_file: self.body_file.clone(),
                path: self.path.clone(),
                vars: self.vars.clone(),
                pick: self.pick,
                replay: self.replay.clone(),
            },
            expect: ExpectSettings {
                status: self.expect_status.clone(),
                body: self.expect_body.clone(),
                body_file: self.expect_body_file.clone(),
                contains: self.expect_contains.clone(),
                sha256: self.expect_sha256.clone(),
                length: self.expect_length,
                headers: self.expect_header.clone(),
                every: self.check_every,
            },
            output: OutputSettings {
                json: self.json.clone(),
                jsonl: self.jsonl.clone(),
                latency: self.latency,
                progress: !self.no_progress,
                request_log: self.log_requests.clone().map(|path| RequestLogSettings {
                    path,
                    every: self.log_every,
                    max: self.log_max,
                }),
                hdr_log,
            },
            allow_failures: self.allow_failures,
        })
    }

    /// The open-loop rate makes sense: positive, and a ramp (`-R START:END`) comes with a `--ramp` that fits
    /// in the measured window, and only then.
    fn check_rate(&self) -> Result<(), SettingsError> {
        let Some(rate) = self.rate else { return Ok(()) };
        let positive = |r: f64| r.is_finite() && r > 0.0;
        if !(positive(rate.start) && positive(rate.end)) {
            return Err(SettingsError::RateNotPositive);
        }
        match (rate.is_ramp(), self.ramp) {
            (true, None) => Err(SettingsError::RampWithoutDuration { rate }),
            (false, Some(_)) => Err(SettingsError::DurationWithoutRamp),
            (true, Some(ramp)) if ramp > self.duration => {
                Err(SettingsError::RampLongerThanWindow { ramp, window: self.duration })
            }
            _ => Ok(()),
        }
    }

    /// `--hdr-log` with its interval, which must be a whole number of milliseconds: the log writes timestamps
    /// in milliseconds, so finer intervals would not read back as written.
    fn hdr_log_settings(&self) -> Result<Option<HdrLogSettings>, SettingsError> {
        let Some(path) = &self.hdr_log else { return Ok(None) };
        let interval = self.hdr_interval;
        if interval.is_zero() {
            return Err(SettingsError::HdrIntervalZero);
        }
        if !interval.subsec_nanos().is_multiple_of(1_000_000) {
            return Err(SettingsError::HdrIntervalNotWholeMillis { interval });
        }
        Ok(Some(HdrLogSettings { path: path.clone(), interval }))
    }

    /// The TLS flags: for an https URL, whom to trust (one of --cacert and --insecure) and what to offer; for
    /// an http URL, none of them.
    fn tls_settings(&self, https: bool) -> Result<Option<TlsSettings>, SettingsError> {
        if !https {
            let given = self.cacert.is_some()
                || self.insecure
                || self.tls_resume.is_some()
                || self.tls_version.is_some()
                || !self.tls_cipher.is_empty()
                || !self.tls_group.is_empty();
            return if given { Err(SettingsError::TlsFlagsWithoutHttps) } else { Ok(None) };
        }
        let trust = match (&self.cacert, self.insecure) {
            (Some(path), _) => Trust::CaFile(path.clone()),
            (None, true) => Trust::Insecure,
            (None, false) => return Err(SettingsError::HttpsWithoutTrust),
        };
        Ok(Some(TlsSettings {
            trust,
            resume: !matches!(self.tls_resume, Some(Switch::Off)),
            version: self.tls_version,
            ciphers: self.tls_cipher.clone(),
            groups: self.tls_group.clone(),
        }))
    }
}

/// `on` or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Switch {
    On,
    Off,
}

impl CapacityArgs {
    /// The search these flags ask for. The search's own flags are checked first, then the run's as for a
    /// run.
    pub fn settings(&self) -> Result<CapacitySettings, CapacitySettingsError> {
        self.check()?;
        Ok(CapacitySettings {
            p99: self.p99,
            p999: self.p999,
            start: self.start,
            max: self.max,
            precision: self.precision,
            retries: self.retries,
            run: self.run.settings()?,
        })
    }

    fn check(&self) -> Result<(), CapacitySettingsError> {
        if self.p99.is_none() && self.p999.is_none() {
            return Err(CapacitySettingsError::NoObjective);
        }
        if self.run.rate.is_some() || self.run.ramp.is_some() {
            return Err(CapacitySettingsError::RateGiven);
        }
        if self.run.jsonl.is_some() {
            return Err(CapacitySettingsError::JsonlGiven);
        }
        if self.run.hdr_log.is_some() {
            return Err(CapacitySettingsError::HdrLogGiven);
        }
        if !(self.start.is_finite() && self.start >= 1.0) {
            return Err(CapacitySettingsError::StartBelowOne);
        }
        if !(self.max.is_finite() && self.max >= self.start) {
            return Err(CapacitySettingsError::MaxBelowStart);
        }
        if !(self.precision.is_finite() && self.precision > 0.0 && self.precision < 100.0) {
            return Err(CapacitySettingsError::PrecisionOutOfRange);
        }
        if self.run.duration.is_zero() {
            return Err(CapacitySettingsError::ZeroStep);
        }
        Ok(())
    }
}

// The settings' enums take their flag values here rather than deriving clap's trait, so that settings.rs and
// rate.rs stay free of clap. The names are what `#[derive(ValueEnum)]` would give (kebab-case).

impl ValueEnum for EngineChoice {
    fn value_variants<'a>() -> &'a [Self] {
        &[EngineChoice::Auto, EngineChoice::Uring, EngineChoice::Epoll]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(match self {
            EngineChoice::Auto => "auto",
            EngineChoice::Uring => "uring",
            EngineChoice::Epoll => "epoll",
        }))
    }
}

impl ValueEnum for TlsVersion {
    fn value_variants<'a>() -> &'a [Self] {
        &[TlsVersion::V1_2, TlsVersion::V1_3]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.name()))
    }
}

impl ValueEnum for Schedule {
    fn value_variants<'a>() -> &'a [Self] {
        &[Schedule::Uniform, Schedule::Poisson]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.name()))
    }
}

impl ValueEnum for Pick {
    fn value_variants<'a>() -> &'a [Self] {
        &[Pick::Random, Pick::RoundRobin]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(match self {
            Pick::Random => "random",
            Pick::RoundRobin => "round-robin",
        }))
    }
}

/// `1`, `2-3`, `0,2,4-5` → CPU ids, in oskit's one rule for CPU lists (an empty item such as `1,` is refused).
/// The error names the whole list as given, with an example, rather than oskit's bad item.
fn parse_cpus(raw: &str) -> Result<Vec<usize>, SettingsError> {
    oskit::cpu_list::parse_cpu_list(raw).map_err(|e| match e {
        CpuListError::Empty => SettingsError::EmptyCpuList { raw: raw.to_string() },
        CpuListError::BadItem(_) | CpuListError::TooHigh(_) => SettingsError::BadCpuList { raw: raw.to_string() },
    })
}

/// A run's settings from its command line, program name first: how the unit tests of the report's parts
/// (merge, render, capacity) say what run they stand for.
#[cfg(test)]
pub(crate) fn run_settings_of<T: AsRef<str>>(command: &[T]) -> RunSettings {
    let cli = parse_from(command.iter().map(AsRef::as_ref)).unwrap_or_else(|e| panic!("{e}"));
    cli.run.settings().unwrap_or_else(|e| panic!("{e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse() {
        let parsed = |raw: &str| parse_cpus(raw).map_err(|e| e.to_string());
        assert_eq!(parsed("1"), Ok(vec![1]));
        assert_eq!(parsed("0,2-3"), Ok(vec![0, 2, 3]));
        assert!(matches!(parse_cpus("3-1"), Err(SettingsError::BadCpuList { .. })));
        assert!(matches!(parse_cpus("a"), Err(SettingsError::BadCpuList { .. })));
        assert_eq!(parsed("1,"), Err("invalid CPU list \"1,\" (e.g. 1, 2-3, 0,2)".to_string()));
        assert!(matches!(parse_cpus(""), Err(SettingsError::EmptyCpuList { .. })));
        assert_eq!(parsed(""), Err("empty CPU list \"\"".to_string()));
    }

    fn cli(args: &str) -> Cli {
        parse_from(std::iter::once("loadgen").chain(args.split_whitespace())).unwrap_or_else(|e| panic!("{e}"))
    }

    fn run_settings(args: &str) -> Result<RunSettings, SettingsError> {
        cli(args).run.settings()
    }

    fn capacity_settings(args: &str) -> Result<CapacitySettings, CapacitySettingsError> {
        match cli(args).command {
            Some(Command::Capacity(capacity)) => capacity.settings(),
            other => panic!("{args}: not a capacity search: {other:?}"),
        }
    }

    #[test]
    fn run_flags_become_settings() {
        let s = run_settings(
            "-t2 -c8 -d3s --warmup 500ms --pin 0,2-3 -R 100:200 --ramp 1s --schedule poisson --no-progress \
             --log-requests log.tsv --log-every 3 http://127.0.0.1:1/x?y=1",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((s.target.path.as_str(), s.target.addr.port()), ("/x?y=1", 1));
        assert_eq!((s.threads, s.connections, s.pipeline), (2, 8, 1));
        assert_eq!((s.duration, s.warmup), (Duration::from_secs(3), Duration::from_millis(500)));
        assert_eq!(s.pins, Some(vec![0, 2, 3]));
        assert_eq!((s.rate, s.ramp), (Some(Rate { start: 100.0, end: 200.0 }), Some(Duration::from_secs(1))));
        assert_eq!(s.schedule, Schedule::Poisson);
        assert!(!s.output.progress);
        let log = s.output.request_log.unwrap_or_else(|| panic!("no request log"));
        assert_eq!((log.path, log.every, log.max), (PathBuf::from("log.tsv"), 3, 1_000_000));
        let plain = run_settings("http://127.0.0.1:1/").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((plain.rate, plain.pins, plain.output.progress), (None, None, true));
        assert!(plain.output.request_log.is_none());
    }

    #[test]
    fn flags_that_do_not_fit_together_are_refused() {
        for (args, says) in [
            ("-R 100:200 http://127.0.0.1:1/", "-R 100:200 is a ramp: say how long it takes with --ramp DURATION"),
            ("-R 100 --ramp 1s http://127.0.0.1:1/", "--ramp needs a ramp: -R START:END"),
            ("-R 1:2 --ramp 20s http://127.0.0.1:1/", "--ramp 20s is longer than the measured window (-d 10s)"),
            ("--pin 3-1 http://127.0.0.1:1/", "invalid CPU list \"3-1\" (e.g. 1, 2-3, 0,2)"),
        ] {
            assert_eq!(run_settings(args).err().map(|e| e.to_string()).as_deref(), Some(says), "{args}");
        }
        let untrusted = run_settings("https://127.0.0.1:1/").err();
        assert!(matches!(untrusted, Some(SettingsError::HttpsWithoutTrust)), "{untrusted:?}");
        assert!(untrusted.is_some_and(|e| e.to_string().contains("needs --cacert PATH")));
        for tls_flag in ["--insecure", "--tls-resume off"] {
            let refused = run_settings(&format!("{tls_flag} http://127.0.0.1:1/"));
            assert!(matches!(refused, Err(SettingsError::TlsFlagsWithoutHttps)), "{tls_flag}: {refused:?}");
        }
        assert!(matches!(run_settings("ftp://127.0.0.1:1/"), Err(SettingsError::Target(TargetError::NotHttp { .. }))));
        assert!(cli_err("--cacert ca.pem --insecure https://127.0.0.1:1/").contains("cannot be used with"));
        assert!(cli_err("--requests-per-conn 0 http://127.0.0.1:1/").contains("0"));
    }

    fn cli_err(args: &str) -> String {
        match parse_from(std::iter::once("loadgen").chain(args.split_whitespace())) {
            Ok(_) => panic!("{args}: accepted"),
            Err(e) => error_line(&e),
        }
    }

    #[test]
    fn hdr_log_flags_become_settings_and_an_interval_finer_than_the_log_is_refused() {
        let s = run_settings("--hdr-log run.hdr http://127.0.0.1:1/").unwrap_or_else(|e| panic!("{e}"));
        let log = s.output.hdr_log.unwrap_or_else(|| panic!("no hdr log"));
        assert_eq!((log.path, log.interval), (PathBuf::from("run.hdr"), Duration::from_secs(1)), "1 s by default");
        let s = run_settings("--hdr-log run.hdr --hdr-interval 250ms http://127.0.0.1:1/");
        assert_eq!(s.ok().and_then(|s| s.output.hdr_log).map(|l| l.interval), Some(Duration::from_millis(250)));
        assert!(run_settings("http://127.0.0.1:1/").is_ok_and(|s| s.output.hdr_log.is_none()));
        let refused = |args: &str| run_settings(args).err().map(|e| e.to_string());
        let says = Some("--hdr-interval must be more than zero".to_string());
        assert_eq!(refused("--hdr-log x --hdr-interval 0 http://127.0.0.1:1/"), says);
        let says =
            "--hdr-interval 1.5ms is not a whole number of milliseconds (the log's timestamps are in milliseconds)";
        assert_eq!(refused("--hdr-log x --hdr-interval 1500us http://127.0.0.1:1/").as_deref(), Some(says));
        assert!(cli_err("--hdr-interval 1s http://127.0.0.1:1/").contains("--hdr-log"), "needs --hdr-log");
        assert!(cli_err("--hdr-log x --hdr-interval soon http://127.0.0.1:1/").contains("--hdr-interval"));
        let refused = capacity_settings("capacity --p99 1ms --hdr-log x http://127.0.0.1:1/").err();
        assert!(matches!(refused, Some(CapacitySettingsError::HdrLogGiven)), "{refused:?}");
    }

    #[test]
    fn tls_flags_become_settings() {
        let s = run_settings(
            "--cacert ca.pem --tls-resume off --tls-version 1.2 --tls-cipher A,B --tls-group x25519 \
             --requests-per-conn 10 https://localhost:8443/",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let tls = s.tls.unwrap_or_else(|| panic!("no TLS settings"));
        assert_eq!(tls.trust, Trust::CaFile(PathBuf::from("ca.pem")));
        assert_eq!((tls.resume, tls.version), (false, Some(TlsVersion::V1_2)));
        assert_eq!((tls.ciphers, tls.groups), (vec!["A".to_string(), "B".to_string()], vec!["x25519".to_string()]));
        assert_eq!(s.requests_per_conn, Some(10));
        let s = run_settings("--insecure https://127.0.0.1:1/").unwrap_or_else(|e| panic!("{e}"));
        let tls = s.tls.unwrap_or_else(|| panic!("no TLS settings"));
        assert_eq!((tls.trust, tls.resume, tls.version), (Trust::Insecure, true, None));
        assert!(run_settings("http://127.0.0.1:1/").is_ok_and(|s| s.tls.is_none() && s.requests_per_conn.is_none()));
    }

    #[test]
    fn a_capacity_step_defaults_shorter_than_a_run() {
        let run = run_settings("http://127.0.0.1:1/").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((run.duration, run.warmup), (Duration::from_secs(10), Duration::ZERO));
        let search = capacity_settings("capacity --p99 10ms http://127.0.0.1:1/").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((search.run.duration, search.run.warmup), (CAPACITY_STEP, CAPACITY_WARMUP));
        assert_eq!((search.p99, search.p999), (Some(Duration::from_millis(10)), None));
        let given = capacity_settings("capacity --p999 1s -d 10s --warmup 0s http://127.0.0.1:1/")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((given.run.duration, given.run.warmup), (Duration::from_secs(10), Duration::ZERO));
    }

    #[test]
    fn capacity_flags_are_checked_before_the_runs() {
        // The search's own mistakes are named first, even with a run flag that is wrong too.
        let refused = capacity_settings("capacity --pin x http://127.0.0.1:1/").err();
        assert!(matches!(refused, Some(CapacitySettingsError::NoObjective)), "{refused:?}");
        assert!(refused.is_some_and(|e| e.to_string().starts_with("capacity needs an objective")));
        let refused = capacity_settings("capacity --p99 1ms -R 5 http://127.0.0.1:1/").err();
        assert!(refused.is_some_and(|e| e.to_string().contains("leave out -R")));
        let refused = capacity_settings("capacity --p99 1ms --pin x http://127.0.0.1:1/").err();
        assert!(matches!(refused, Some(CapacitySettingsError::Run(SettingsError::BadCpuList { .. }))), "{refused:?}");
        assert!(refused.is_some_and(|e| e.to_string().starts_with("invalid CPU list")));
    }

    fn names<T: ValueEnum>() -> Vec<String> {
        T::value_variants().iter().filter_map(ValueEnum::to_possible_value).map(|v| v.get_name().to_string()).collect()
    }

    #[test]
    fn flag_values_are_the_names_a_derive_would_give() {
        assert_eq!(names::<EngineChoice>(), ["auto", "uring", "epoll"]);
        assert_eq!(names::<Pick>(), ["random", "round-robin"]);
        assert_eq!(names::<Schedule>(), ["uniform", "poisson"]);
        assert_eq!(names::<TlsVersion>(), ["1.2", "1.3"]);
        assert_eq!(cli("--pick round-robin http://127.0.0.1:1/").run.pick, Pick::RoundRobin);
    }
}
