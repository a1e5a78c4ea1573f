//! `compare images`: container image size and container start time of the images docker-compose.yml builds,
//! measured with the local container engine (Docker, else podman); said plainly, and nothing made up, when
//! there is none.
//!
//! - Size is what `image inspect` reports (`.Size`, the unpacked layers). An image that is not built is
//!   reported as such; compare never builds or pulls (`run --pull never`).
//! - Start time is from `run -d` being spawned to the first HTTP answer of any status on the published
//!   /healthz port, so it covers container creation, the network namespace and the process's own start; the
//!   servers answer /healthz (503) without their databases, so no dependency is needed. Every start gets a
//!   fresh host port, and the container is removed (`rm -f`) after each start.
//! - An image built on scripts/compose-check.sh's local stand-ins for the base images (they carry the label
//!   [`STANDIN_LABEL`], which images built on them inherit) is marked so in the table: its size is not the
//!   size of the same image built on the official bases.
//! - Results go to stdout and to `<out-dir>/<UTC stamp>-<hostname>-images.{md,json}`, with the command and
//!   the engine's name and version.
//!
//! Exit codes: 0 measured, 2 nothing measured (no engine, or no image built), 64 bad arguments.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Serialize;

use crate::format::{num, shell_join};
use crate::plan::paths;
use crate::records::{self, Machine};
use crate::stats::spread;
use crate::system::http::Endpoint;
use crate::system::process::Spawned;
use crate::table::Table;

/// How long one docker CLI call may take (`docker info` against a dead socket fails fast; a hung engine must
/// not hang compare).
const DOCKER_CALL: Duration = Duration::from_secs(30);
/// How long a container may take to its first answer.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// The label scripts/compose-check.sh puts on its stand-in base images (deploy/podman/README.md).
pub const STANDIN_LABEL: &str = "org.rust-baselines.standin";

/// The images docker-compose.yml builds: name, reference, the port its server listens on (0: size only).
pub const DEFAULT_IMAGES: [(&str, &str, u16); 5] = [
    ("flight-rs", "rust-baselines/flight-rs:0.1.0", 3000),
    ("scribe-rs", "rust-baselines/scribe-rs:0.1.0", 1337),
    ("metadata-rs", "rust-baselines/metadata-rs:0.1.0", 3001),
    ("loadgen", "rust-baselines/loadgen:0.1.0", 0),
    ("peers", "rust-baselines/peers:0.1.0", 0),
];

#[derive(Debug, Clone, clap::Args)]
pub struct ImagesArgs {
    /// Starts per image.
    #[arg(long, env = "COMPARE_IMAGE_RUNS", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub runs: u32,
    /// The engine's CLI: `docker`, `podman` or a path; `auto` takes docker when its engine answers, else
    /// podman (with deploy/podman/containers.conf when CONTAINERS_CONF is not set).
    #[arg(long, env = "COMPARE_DOCKER", default_value = "auto")]
    pub docker: String,
    /// Images to measure instead of docker-compose.yml's, repeatable: `NAME=IMAGE[@PORT]` (no port: size only).
    #[arg(long = "image", value_name = "NAME=IMAGE[@PORT]")]
    pub images: Vec<String>,
    /// Where the .md and .json go [default: <repo>/bench/results].
    #[arg(long, env = "COMPARE_OUT_DIR")]
    pub out_dir: Option<PathBuf>,
}

/// One image to measure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImageSpec {
    pub name: String,
    pub reference: String,
    /// The container port answering /healthz; `None`: size only.
    pub port: Option<u16>,
}

/// `NAME=IMAGE[@PORT]`.
pub fn parse_image(spec: &str) -> anyhow::Result<ImageSpec> {
    let Some((name, rest)) = spec.split_once('=') else { bail!("--image {spec:?}: expected NAME=IMAGE[@PORT]") };
    if name.is_empty() || rest.is_empty() {
        bail!("--image {spec:?}: expected NAME=IMAGE[@PORT]");
    }
    // A digest (`image@sha256:…`) also has an `@`: only a trailing all-digit part is a port.
    let (reference, port) = match rest.rsplit_once('@') {
        Some((r, p)) if !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()) => {
            let port: u16 = p.parse().with_context(|| format!("--image {spec:?}: port {p:?}"))?;
            if port == 0 {
                bail!("--image {spec:?}: port 0");
            }
            (r, Some(port))
        }
        _ => (rest, None),
    };
    Ok(ImageSpec { name: name.into(), reference: reference.into(), port })
}

/// What was measured for one image.
#[derive(Debug, Clone, Serialize)]
pub struct ImageResult {
    pub spec: ImageSpec,
    pub size_bytes: Option<u64>,
    /// The stand-in label of its base image (scripts/compose-check.sh), when it was built on one.
    pub standin: Option<String>,
    /// Each start's milliseconds to the first answer; failed starts are in `errors`.
    pub start_ms: Vec<f64>,
    pub errors: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ImagesReport {
    pub command: Vec<String>,
    pub started_at: String,
    pub machine: Machine,
    /// The engine's name and version, or why there is no engine to ask.
    pub engine: Result<String, String>,
    pub results: Vec<ImageResult>,
}

/// A container engine's CLI and the environment it runs with.
#[derive(Debug, Clone)]
pub struct Engine {
    pub cli: String,
    /// Set for every call (podman's CONTAINERS_CONF when compare chose it).
    pub env: Vec<(String, String)>,
}

impl Engine {
    pub fn new(cli: &str) -> Engine {
        Engine { cli: cli.into(), env: Vec::new() }
    }

    fn is_podman(&self) -> bool {
        std::path::Path::new(&self.cli).file_name().is_some_and(|n| n == "podman")
    }

    /// `Docker engine 28.2.2` or `podman 4.3.1`, with the settings file compare gave podman.
    fn describe(&self, version: &str) -> String {
        let name = if self.is_podman() { "podman" } else { "Docker engine" };
        match self.env.iter().find(|(k, _)| k == "CONTAINERS_CONF") {
            Some((_, conf)) => format!("{name} {version} (CONTAINERS_CONF={conf})"),
            None => format!("{name} {version}"),
        }
    }
}

/// The engine `--docker` names, with its version or why it did not answer; `auto`: docker if its engine
/// answers, else podman, which on this project's machines needs deploy/podman/containers.conf (runc, ulimits
/// below the hard limits).
pub fn choose_engine(requested: &str, repo: &std::path::Path) -> (Engine, Result<String, String>) {
    if requested != "auto" {
        let engine = Engine::new(requested);
        let version = engine_version(&engine);
        return (engine, version);
    }
    let docker = Engine::new("docker");
    let docker_version = engine_version(&docker);
    if docker_version.is_ok() {
        return (docker, docker_version);
    }
    let mut podman = Engine::new("podman");
    let conf = repo.join("deploy/podman/containers.conf");
    if std::env::var_os("CONTAINERS_CONF").is_none() && conf.is_file() {
        podman.env.push(("CONTAINERS_CONF".into(), conf.display().to_string()));
    }
    match engine_version(&podman) {
        Ok(version) => (podman, Ok(version)),
        Err(_) => (docker, docker_version),
    }
}

/// Runs one engine CLI call to completion (bounded), returning trimmed stdout or the error with stderr.
fn docker(engine: &Engine, args: &[&str]) -> anyhow::Result<String> {
    let bin = engine.cli.as_str();
    let dir = tempfile::tempdir().context("temp dir")?;
    let (out_path, err_path) = (dir.path().join("out"), dir.path().join("err"));
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .envs(engine.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path)?)
        .stderr(std::fs::File::create(&err_path)?);
    let mut child = Spawned::spawn(cmd, "docker").with_context(|| format!("running {bin}"))?;
    let status = match child.wait_timeout(DOCKER_CALL)? {
        Some(s) => s,
        None => {
            child.kill();
            bail!("`{bin} {}` took over {} s", args.join(" "), DOCKER_CALL.as_secs());
        }
    };
    let out = std::fs::read_to_string(&out_path).unwrap_or_default();
    if !status.success() {
        let err = std::fs::read_to_string(&err_path).unwrap_or_default();
        let first = err.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("no message");
        bail!("`{bin} {}` failed ({status}): {first}", args.join(" "));
    }
    Ok(out.trim().to_string())
}

/// The engine's version when one answers.
pub fn engine_version(engine: &Engine) -> Result<String, String> {
    docker(engine, &["version", "--format", "{{.Server.Version}}"]).map_err(|e| format!("{e:#}"))
}

fn first_answer(port: u16, deadline: Instant) -> anyhow::Result<()> {
    loop {
        match crate::system::http::request(
            &Endpoint::cleartext(port),
            "GET",
            "/healthz",
            None,
            &[],
            Duration::from_secs(1),
        ) {
            Ok(_) => return Ok(()),
            Err(e) if Instant::now() >= deadline => {
                bail!("no answer on /healthz within {} s: {e}", READY_TIMEOUT.as_secs())
            }
            Err(_) => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}

fn one_start(bin: &Engine, spec: &ImageSpec, container_port: u16) -> anyhow::Result<f64> {
    let host_port = localdeps::free_port()?;
    let publish = format!("127.0.0.1:{host_port}:{container_port}");
    let began = Instant::now();
    let id = docker(bin, &["run", "-d", "--rm", "--pull", "never", "-p", &publish, &spec.reference])?;
    let answered = first_answer(host_port, began + READY_TIMEOUT);
    let elapsed = began.elapsed();
    let removed = docker(bin, &["rm", "-f", &id]);
    answered?;
    removed.with_context(|| format!("removing container {id}"))?;
    Ok(elapsed.as_secs_f64() * 1e3)
}

pub fn measure(bin: &Engine, specs: &[ImageSpec], runs: u32) -> Vec<ImageResult> {
    specs
        .iter()
        .map(|spec| {
            let mut result = ImageResult {
                spec: spec.clone(),
                size_bytes: None,
                standin: None,
                start_ms: Vec::new(),
                errors: Vec::new(),
            };
            let format = format!("{{{{.Size}}}} {{{{index .Config.Labels \"{STANDIN_LABEL}\"}}}}");
            match docker(bin, &["image", "inspect", "--format", &format, &spec.reference]) {
                Ok(answer) => {
                    let (size, label) = answer.split_once(' ').unwrap_or((&answer, ""));
                    result.size_bytes = size.trim().parse().ok();
                    let label = label.trim();
                    result.standin = (!label.is_empty() && label != "<no value>").then(|| label.to_string());
                }
                Err(e) => {
                    result.errors.push(format!("not built here (`docker compose build` builds it): {e:#}"));
                    return result;
                }
            }
            if let Some(port) = spec.port {
                for _ in 0..runs {
                    if crate::system::process::interrupted() {
                        break;
                    }
                    match one_start(bin, spec, port) {
                        Ok(ms) => result.start_ms.push(ms),
                        Err(e) => result.errors.push(format!("{e:#}")),
                    }
                }
            }
            result
        })
        .collect()
}

pub fn render(report: &ImagesReport) -> String {
    let mut out = String::from("# compare images: container image size and start time\n\n");
    let _ = writeln!(out, "- command: `{}`", shell_join(&report.command));
    let _ = writeln!(out, "- started {}", report.started_at);
    let _ = writeln!(out, "- machine: {}", report.machine);
    match &report.engine {
        Err(why) => {
            let _ = writeln!(
                out,
                "\nNo container engine here (neither Docker nor podman answered), so image size and container \
                 start time were not measured. {why}\n"
            );
            return out;
        }
        Ok(engine) => {
            let _ = writeln!(out, "- engine: {engine}\n");
        }
    }
    out.push_str(
        "Size: `image inspect` .Size. Start: `run -d` spawned → first HTTP answer (any status) on /healthz, \
         median (min–max) over the starts; the container is removed after each. Base: `official` when built on \
         the base images the Dockerfile names, `stand-in` when built on scripts/compose-check.sh's local \
         stand-ins for them (deploy/podman/README.md says what differs and how it moves the size).\n\n",
    );
    let mut table = Table::new(["image", "base", "size MiB", "start ms", "starts", "problems"]);
    for r in &report.results {
        let size = r.size_bytes.map_or("—".into(), |b| num(b as f64 / (1024.0 * 1024.0), 1));
        let start = match spread(r.start_ms.iter().copied()) {
            Some(s) => format!("{} ({}–{})", num(s.median, 0), num(s.min, 0), num(s.max, 0)),
            None if r.spec.port.is_none() => "size only".into(),
            None => "—".into(),
        };
        let problems = r.errors.first().map_or(String::new(), |e| {
            let more = if r.errors.len() > 1 { format!(" (+{} more)", r.errors.len() - 1) } else { String::new() };
            format!("{e}{more}")
        });
        let base = match (&r.size_bytes, &r.standin) {
            (None, _) => "—",
            (Some(_), Some(_)) => "stand-in",
            (Some(_), None) => "official",
        };
        let image = format!("{} `{}`", r.spec.name, r.spec.reference);
        table.row([image.as_str(), base, &size, &start, &r.start_ms.len().to_string(), &problems]);
    }
    out.push_str(&table.finish());
    out
}

/// `compare images`, start to exit code.
pub fn command(args: &ImagesArgs) -> ExitCode {
    let specs: Vec<ImageSpec> = if args.images.is_empty() {
        DEFAULT_IMAGES
            .iter()
            .map(|(n, r, p)| ImageSpec { name: n.to_string(), reference: r.to_string(), port: (*p != 0).then_some(*p) })
            .collect()
    } else {
        match args.images.iter().map(|s| parse_image(s)).collect::<anyhow::Result<Vec<_>>>() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("config error: {e:#}");
                return ExitCode::from(64);
            }
        }
    };
    crate::system::process::install_panic_hook();
    let machine = records::machine_info();
    let started_at = records::now_rfc3339();
    let cwd = std::env::current_dir().unwrap_or_default();
    let repo = paths::find_repo(&cwd);
    let (engine, version) = choose_engine(&args.docker, &repo);
    let results = match &version {
        Ok(_) => measure(&engine, &specs, args.runs),
        Err(_) => Vec::new(),
    };
    let engine_text = version.map(|v| engine.describe(&v));
    let measured = results.iter().any(|r| r.size_bytes.is_some());
    let report =
        ImagesReport { command: std::env::args().collect(), started_at, machine, engine: engine_text, results };
    let text = render(&report);
    print!("{text}");
    let folder = paths::ResultFolder::now(&paths::results_dir(&repo, &cwd, args.out_dir.as_deref()));
    let stem = folder.file(&report.machine.hostname, "-images");
    let written =
        std::fs::create_dir_all(&folder.dir).and_then(|()| std::fs::write(stem.with_extension("md"), &text)).and_then(
            |()| std::fs::write(stem.with_extension("json"), serde_json::to_vec_pretty(&report).unwrap_or_default()),
        );
    match written {
        Ok(()) => eprintln!("compare images: wrote {}.md and .json", stem.display()),
        Err(e) => eprintln!("compare images: writing {}: {e}", stem.display()),
    }
    if measured { ExitCode::SUCCESS } else { ExitCode::from(2) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_specs_take_a_reference_and_an_optional_port() {
        let s = parse_image("f=rust-baselines/flight-rs:0.1.0@3000").expect("with port");
        assert_eq!((s.reference.as_str(), s.port), ("rust-baselines/flight-rs:0.1.0", Some(3000)));
        let s = parse_image("p=rust-baselines/peers:0.1.0").expect("size only");
        assert_eq!(s.port, None);
        let s = parse_image("d=x@sha256:abcdef").expect("a digest is not a port");
        assert_eq!((s.reference.as_str(), s.port), ("x@sha256:abcdef", None));
        assert!(parse_image("nothing").is_err());
        assert!(parse_image("=x").is_err());
        assert!(parse_image("a=x@0").is_err());
        assert!(parse_image("a=x@99999").is_err());
    }

    #[test]
    fn no_engine_is_said_plainly() {
        let engine = engine_version(&Engine::new("/nonexistent/docker"));
        assert!(engine.is_err());
        let report = ImagesReport {
            command: vec!["compare".into(), "images".into()],
            started_at: "t".into(),
            machine: records::machine_info(),
            engine,
            results: Vec::new(),
        };
        let text = render(&report);
        assert!(text.contains("No container engine here (neither Docker nor podman answered), so image size"));
        assert!(!text.contains("| image |"), "no table of figures that were not measured");
    }
}
