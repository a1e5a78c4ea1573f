//! deploy/k8s, checked without a cluster (this project's machines have none):
//!
//! - Schemas: every manifest passes `kubernetes-validate --strict` for Kubernetes 1.37 and 1.31 (and a copy
//!   with an unknown field fails, so the validator is known to validate); the kustomizations (the stack, the
//!   loadgen Job, and deploy/k8s-tls, the stack with HTTPS) render with `kubectl kustomize` into objects that
//!   pass too, every one in the stack's namespace.
//! - Meaning: each Deployment's env, turned into command-line flags, parses as its server's own config (so no
//!   variable is misspelled or unread and every value is valid); probes, Services, PodDisruptionBudgets and
//!   NetworkPolicies point at ports and pods that exist; requests equal limits in whole CPUs and the worker
//!   count equals them; every pod is locked down; the kustomizations list every file. deploy/k8s-tls differs
//!   from the stack only in what HTTPS needs: the Secret's files mounted where the servers' TLS variables
//!   point, readable by their group alone, HTTPS probes, `appProtocol: https`.
//! - Behaviour: each server, started in this process from its Deployment's env, answers its probe paths as
//!   the manifests' comments say (scribe-rs's liveness path 200 and readiness path 503 with Postgres and Redis
//!   down); metadata-rs's init container command writes a file the server serves; the loadgen Job's exact
//!   arguments run as `completions` concurrent processes against a local flight-rs, and merge-reports.sh
//!   (with a fake kubectl that replays their logs) merges them exactly.
//!
//! The validators come from `bash scripts/install-deploy-tools.sh` (into .tools/bin); kubectl (for
//! `kubectl kustomize`, offline) from the machine. A missing tool fails its test with a message, never skips.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use clap::{FromArgMatches, Parser};
use serde_json::Value;
use testkit::process::{Guard, wait_for_exit};
use testkit::workspace::root;

const NAMESPACE: &str = "rust-baselines";
/// The Kubernetes versions whose schemas the manifests must pass: the newest bundled, and an older one still
/// run by managed clusters (the preStop `sleep` action the servers use is on by default from 1.30).
const KUBERNETES_VERSIONS: [&str; 2] = ["1.37.0", "1.31.0"];

fn k8s_dir() -> PathBuf {
    root().join("deploy/k8s")
}

/// The HTTPS overlay: beside deploy/k8s, as kustomize refuses an overlay inside its base's directory.
fn k8s_tls_dir() -> PathBuf {
    root().join("deploy/k8s-tls")
}

/// A validator installed by scripts/install-deploy-tools.sh; a clear failure when it is missing.
fn deploy_tool(name: &str) -> PathBuf {
    let path = root().join(".tools/bin").join(name);
    assert!(
        path.is_file(),
        "{} is missing: run `bash scripts/install-deploy-tools.sh` (installs the deployment validators into .tools/bin)",
        path.display()
    );
    path
}

/// kubectl from PATH (only `kubectl kustomize` and `kubectl label --local`, which need no cluster).
fn kubectl() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).map(|dir| dir.join("kubectl")).find(|p| p.is_file()).unwrap_or_else(|| {
        panic!(
            "kubectl not found on PATH: it renders the kustomizations offline (`kubectl kustomize`); \
             install it with `apt-get install kubernetes-client`"
        )
    })
}

/// Every manifest: the YAML files under deploy/k8s except the kustomizations, sorted.
fn manifest_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml")
                && path.file_name().is_some_and(|n| n != "kustomization.yaml")
            {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(&k8s_dir(), &mut files);
    files.sort();
    assert!(files.len() >= 8, "expected the stack's manifests in {}, found {files:?}", k8s_dir().display());
    files
}

/// The documents of a multi-document YAML file (split on `---` lines), comments-only documents dropped.
fn documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let mut docs = Vec::new();
    let mut current = String::new();
    for line in text.lines().chain(std::iter::once("---")) {
        if line == "---" {
            let doc: Value = serde_yaml::from_str(&current)
                .unwrap_or_else(|e| panic!("{} is not valid YAML: {e}\n{current}", path.display()));
            if !doc.is_null() {
                docs.push(doc);
            }
            current.clear();
        } else {
            current.push_str(line);
            current.push('\n');
        }
    }
    docs
}

/// One Kubernetes object and the file it came from.
struct Object {
    file: String,
    value: Value,
}

impl Object {
    fn kind(&self) -> &str {
        str_at(&self.value, "/kind")
    }

    fn name(&self) -> &str {
        str_at(&self.value, "/metadata/name")
    }

    fn id(&self) -> String {
        format!("{} {}/{}", self.file, self.kind(), self.name())
    }

    fn pod_spec(&self) -> &Value {
        at(&self.value, "/spec/template/spec")
    }
}

/// Every object of every manifest (the stack and the loadgen Job).
fn objects() -> Vec<Object> {
    let base = k8s_dir();
    let mut out = Vec::new();
    for path in manifest_files() {
        let file = path.strip_prefix(&base).expect("under deploy/k8s").display().to_string();
        out.extend(documents(&path).into_iter().map(|value| Object { file: file.clone(), value }));
    }
    out
}

fn objects_of<'a>(objects: &'a [Object], kind: &str) -> Vec<&'a Object> {
    objects.iter().filter(|o| o.kind() == kind).collect()
}

fn find<'a>(objects: &'a [Object], kind: &str, name: &str) -> &'a Object {
    objects
        .iter()
        .find(|o| o.kind() == kind && o.name() == name)
        .unwrap_or_else(|| panic!("no {kind} named {name} in deploy/k8s"))
}

fn at<'a>(value: &'a Value, pointer: &str) -> &'a Value {
    value.pointer(pointer).unwrap_or_else(|| panic!("{pointer} missing in {value}"))
}

fn str_at<'a>(value: &'a Value, pointer: &str) -> &'a str {
    at(value, pointer).as_str().unwrap_or_else(|| panic!("{pointer} is not a string in {value}"))
}

fn u64_at(value: &Value, pointer: &str) -> u64 {
    at(value, pointer).as_u64().unwrap_or_else(|| panic!("{pointer} is not a whole number in {value}"))
}

fn array_at<'a>(value: &'a Value, pointer: &str) -> &'a Vec<Value> {
    at(value, pointer).as_array().unwrap_or_else(|| panic!("{pointer} is not a list in {value}"))
}

/// All containers of a pod spec, init containers first.
fn containers(pod: &Value) -> Vec<&Value> {
    let init = pod.get("initContainers").and_then(Value::as_array).into_iter().flatten();
    init.chain(array_at(pod, "/containers")).collect()
}

/// The main container: the only one (sidecars would need this test to say which is the server).
fn main_container(object: &Object) -> &Value {
    let list = array_at(object.pod_spec(), "/containers");
    assert_eq!(list.len(), 1, "{}: one container expected", object.id());
    &list[0]
}

/// Whether `labels` carries every `key: value` of a matchLabels map.
fn selects(match_labels: &Value, labels: &Value) -> bool {
    let wanted = match_labels.as_object().expect("matchLabels is a map");
    !wanted.is_empty() && wanted.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// Whole CPUs from a quantity (`"1"`, `2`, `"2000m"`); `None` for fractions.
fn whole_cpus(quantity: &Value) -> Option<u64> {
    match quantity {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => match s.strip_suffix('m') {
            Some(milli) => milli.parse::<u64>().ok().filter(|m| m % 1000 == 0).map(|m| m / 1000),
            None => s.parse().ok(),
        },
        _ => None,
    }
}

/// The containerPort a probe or Service port refers to (by name or number) in a container.
fn resolve_port(container: &Value, port: &Value) -> Option<u64> {
    let ports = container.get("ports").and_then(Value::as_array)?;
    ports
        .iter()
        .find(|p| match port {
            Value::String(name) => p.get("name").and_then(Value::as_str) == Some(name.as_str()),
            Value::Number(n) => p.get("containerPort").and_then(Value::as_u64) == n.as_u64(),
            _ => false,
        })
        .and_then(|p| p.get("containerPort").and_then(Value::as_u64))
}

// ---------------------------------------------------------------------------------------------------------
// Schemas

fn validate(version: &str, files: &[PathBuf]) -> (bool, String) {
    let output = Command::new(deploy_tool("kubernetes-validate"))
        .args(["--strict", "-k", version])
        .args(files)
        .output()
        .expect("run kubernetes-validate");
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success(), text)
}

/// Passed means: exit 0, one "passed" line per object, and no warning (an unknown kind or apiVersion is
/// only a warning to kubernetes-validate, with exit 0: the object was not checked at all).
fn assert_passes(version: &str, files: &[PathBuf], objects: usize) {
    let (ok, text) = validate(version, files);
    assert!(ok, "kubernetes-validate --strict -k {version} failed:\n{text}");
    let passed = text.lines().filter(|l| l.contains(" passed for resource ")).count();
    assert_eq!(passed, objects, "one 'passed' line per object for {version}:\n{text}");
    assert!(!text.contains("WARN") && !text.contains("ERROR"), "warnings for {version}:\n{text}");
}

#[test]
fn every_manifest_passes_the_kubernetes_schemas() {
    let files = manifest_files();
    let count = objects().len();
    for version in KUBERNETES_VERSIONS {
        assert_passes(version, &files, count);
    }
}

#[test]
fn the_validator_rejects_what_the_schemas_do_not_allow() {
    let dir = tempfile::tempdir().expect("temp dir");
    let original = std::fs::read_to_string(k8s_dir().join("flight-rs.yaml")).expect("flight-rs.yaml");

    // An unknown field in the container: strict validation must name it.
    let anchor = "          imagePullPolicy: IfNotPresent\n";
    assert!(original.contains(anchor), "flight-rs.yaml changed shape; update this test's anchor");
    let unknown = dir.path().join("unknown-field.yaml");
    std::fs::write(&unknown, original.replacen(anchor, &format!("{anchor}          imagePullPolicyy: Always\n"), 1))
        .expect("write");
    let (ok, text) = validate(KUBERNETES_VERSIONS[0], &[unknown]);
    assert!(!ok && text.contains("imagePullPolicyy"), "an unknown field must fail validation:\n{text}");

    // A wrong type.
    let typed = dir.path().join("wrong-type.yaml");
    std::fs::write(&typed, original.replacen("  replicas: 2\n", "  replicas: two\n", 1)).expect("write");
    let (ok, text) = validate(KUBERNETES_VERSIONS[0], &[typed]);
    assert!(!ok && text.contains("replicas"), "a string replica count must fail validation:\n{text}");

    // A field newer than the older version: the per-version schemas differ (the preStop sleep action is not
    // in 1.25's), so validating against an old version is not a no-op.
    let (ok, text) = validate("1.25.0", &[k8s_dir().join("flight-rs.yaml")]);
    assert!(!ok && text.contains("sleep"), "1.25 has no preStop sleep; its schema must say so:\n{text}");

    // A misspelled kind is only a warning with exit 0: why assert_passes also refuses warnings.
    let kind = dir.path().join("unknown-kind.yaml");
    std::fs::write(&kind, original.replacen("kind: Deployment\n", "kind: Deploymnt\n", 1)).expect("write");
    let (_, text) = validate(KUBERNETES_VERSIONS[0], &[kind]);
    assert!(text.contains("WARN"), "an unknown kind should at least warn:\n{text}");
}

/// `kubectl kustomize dir`, written to `out` (what the validator reads) and parsed.
fn render(dir: &Path, out: &Path) -> Vec<Value> {
    let output = Command::new(kubectl()).arg("kustomize").arg(dir).output().expect("run kubectl kustomize");
    assert!(
        output.status.success(),
        "kubectl kustomize {} failed: {}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::write(out, &output.stdout).expect("write the rendered objects");
    documents(out)
}

#[test]
fn every_kustomization_renders_into_valid_objects_in_the_namespace() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, path) in [("stack", k8s_dir()), ("loadgen", k8s_dir().join("loadgen")), ("tls", k8s_tls_dir())] {
        let rendered = dir.path().join(format!("{name}.yaml"));
        let docs = render(&path, &rendered);
        assert!(!docs.is_empty(), "{name}: nothing rendered");
        for doc in &docs {
            if str_at(doc, "/kind") != "Namespace" {
                assert_eq!(str_at(doc, "/metadata/namespace"), NAMESPACE, "{name}: {doc}");
            }
        }
        for version in KUBERNETES_VERSIONS {
            assert_passes(version, std::slice::from_ref(&rendered), docs.len());
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Meaning

#[test]
fn kustomizations_list_every_manifest() {
    let base = k8s_dir();
    let mut listed = BTreeSet::new();
    for dir in [base.clone(), base.join("loadgen")] {
        let kustomization = dir.join("kustomization.yaml");
        let docs = documents(&kustomization);
        assert_eq!(docs.len(), 1, "{}", kustomization.display());
        let k = &docs[0];
        assert_eq!(str_at(k, "/kind"), "Kustomization");
        assert_eq!(str_at(k, "/namespace"), NAMESPACE, "{}", kustomization.display());
        for resource in array_at(k, "/resources") {
            let file = dir.join(resource.as_str().expect("a resource path"));
            assert!(file.is_file(), "{} lists {} which does not exist", kustomization.display(), file.display());
            assert!(listed.insert(file.canonicalize().expect("canonical path")), "{} listed twice", file.display());
        }
    }
    let files: BTreeSet<PathBuf> = manifest_files().iter().map(|f| f.canonicalize().expect("canonical path")).collect();
    let unlisted: Vec<_> = files.difference(&listed).collect();
    assert!(unlisted.is_empty(), "manifests no kustomization lists: {unlisted:?}");
    // The Job stays out of the stack's kustomization: applying the stack must not start a load test.
    let stack = documents(&base.join("kustomization.yaml"));
    assert!(!array_at(&stack[0], "/resources").iter().any(|r| r.as_str().is_some_and(|s| s.contains("job"))));
}

/// The servers the Deployments run.
#[derive(Debug, Clone, Copy)]
enum Server {
    Flight,
    Scribe,
    Metadata,
}

impl Server {
    fn of(deployment: &str) -> Server {
        match deployment {
            "flight-rs" => Server::Flight,
            "scribe-rs" => Server::Scribe,
            "metadata-rs" => Server::Metadata,
            other => panic!("Deployment {other} runs no server this test knows; add it here"),
        }
    }
}

/// What the tests need from a parsed server config.
struct Parsed {
    port: u16,
    workers: Option<u16>,
    shutdown_timeout: u64,
}

/// A container's env as name → value; values from a Secret are read from secret.yaml (a placeholder there).
fn container_env(objects: &[Object], container: &Value) -> Vec<(String, String)> {
    let mut env = Vec::new();
    let mut seen = BTreeSet::new();
    for var in container.get("env").and_then(Value::as_array).into_iter().flatten() {
        let name = str_at(var, "/name").to_string();
        assert!(seen.insert(name.clone()), "env {name} set twice");
        let value = match var.get("value") {
            Some(v) => v.as_str().unwrap_or_else(|| panic!("env {name}: value must be a string")).to_string(),
            None => {
                let secret = str_at(var, "/valueFrom/secretKeyRef/name");
                let key = str_at(var, "/valueFrom/secretKeyRef/key");
                let object = find(objects, "Secret", secret);
                str_at(&object.value, &format!("/stringData/{key}")).to_string()
            }
        };
        env.push((name, value));
    }
    env
}

/// Parses `env` exactly as the server's binary would (its clap command with every env var, through
/// `serve::command_with_env`), by turning each variable into `--long=value`. A variable that no argument
/// reads fails the test, and so does a value the server would refuse. The test process's own environment
/// plays no part.
fn parse_env<C: clap::Parser>(prefix: &str, env: &[(String, String)]) -> C {
    let command = serve::command_with_env::<C>(prefix);
    let name = command.get_name().to_string();
    let longs: HashMap<String, String> = command
        .get_arguments()
        .filter_map(|a| Some((a.get_env()?.to_str()?.to_string(), a.get_long()?.to_string())))
        .collect();
    let mut args = vec![name.clone()];
    for (var, value) in env {
        let long = longs.get(var).unwrap_or_else(|| panic!("{name} reads no env var {var} (it reads {longs:?})"));
        args.push(format!("--{long}={value}"));
    }
    let command = command.mut_args(|a| a.env(None::<&str>));
    let matches = command.try_get_matches_from(&args).unwrap_or_else(|e| panic!("{name} refuses {args:?}: {e}"));
    C::from_arg_matches(&matches).unwrap_or_else(|e| panic!("{name} refuses {args:?}: {e}"))
}

fn parse_server(server: Server, env: &[(String, String)]) -> Parsed {
    match server {
        Server::Flight => {
            let c: flight::Config = parse_env("FLIGHT", env);
            let parsed = Parsed { port: c.port, workers: c.serve.workers, shutdown_timeout: c.serve.shutdown_timeout };
            c.resolve().unwrap_or_else(|e| panic!("flight-rs config does not resolve: {e}"));
            parsed
        }
        Server::Scribe => {
            let c: scribe::Config = parse_env("SCRIBE_APP", env);
            let parsed = Parsed { port: c.port, workers: c.serve.workers, shutdown_timeout: c.serve.shutdown_timeout };
            c.resolve().unwrap_or_else(|e| panic!("scribe-rs config does not resolve: {e}"));
            parsed
        }
        Server::Metadata => {
            let c: metadata::config::Config = parse_env("METADATA", env);
            assert!(c.command.is_none(), "the server container must serve, not run a subcommand");
            c.resolve().unwrap_or_else(|e| panic!("metadata-rs config does not resolve: {e}"));
            Parsed { port: c.port, workers: c.serve.workers, shutdown_timeout: c.serve.shutdown_timeout }
        }
    }
}

#[test]
fn deployments_configure_the_servers_they_run() {
    let objects = objects();
    let deployments = objects_of(&objects, "Deployment");
    let names: BTreeSet<&str> = deployments.iter().map(|d| d.name()).collect();
    assert_eq!(names, BTreeSet::from(["flight-rs", "metadata-rs", "scribe-rs"]));
    for deployment in deployments {
        let id = deployment.id();
        let name = deployment.name();
        let container = main_container(deployment);
        assert_eq!(str_at(container, "/image"), format!("rust-baselines/{name}:0.1.0"), "{id}");
        assert_eq!(at(container, "/command"), &serde_json::json!([format!("/usr/local/bin/{name}")]), "{id}");

        let env = container_env(&objects, container);
        let parsed = parse_server(Server::of(name), &env);

        // The server listens on a declared containerPort, and every probe hits it.
        let ports = array_at(container, "/ports");
        assert!(
            ports.iter().any(|p| p.get("containerPort").and_then(Value::as_u64) == Some(u64::from(parsed.port))),
            "{id}: the server listens on {} but no containerPort says so",
            parsed.port
        );
        for probe in ["readinessProbe", "livenessProbe", "startupProbe"] {
            let p = at(container, &format!("/{probe}"));
            let path = str_at(p, "/httpGet/path");
            assert!(path.starts_with('/'), "{id} {probe}: path {path}");
            let port = resolve_port(container, at(p, "/httpGet/port"));
            assert_eq!(port, Some(u64::from(parsed.port)), "{id} {probe}: must hit the port the server listens on");
        }

        // Whole CPUs, requests == limits, and one worker per CPU.
        let cpus = whole_cpus(at(container, "/resources/limits/cpu"))
            .unwrap_or_else(|| panic!("{id}: the CPU limit must be whole CPUs"));
        assert!(cpus >= 1, "{id}");
        assert_eq!(parsed.workers.map(u64::from), Some(cpus), "{id}: the worker count must equal the CPUs");

        // The grace period covers the preStop sleep plus the server's own drain deadline.
        let sleep = u64_at(container, "/lifecycle/preStop/sleep/seconds");
        let grace = u64_at(deployment.pod_spec(), "/terminationGracePeriodSeconds");
        assert!(
            grace > sleep + parsed.shutdown_timeout,
            "{id}: terminationGracePeriodSeconds {grace} must exceed preStop {sleep} s + shutdown timeout {} s",
            parsed.shutdown_timeout
        );

        // Several replicas behind a budget that lets one go at a time.
        assert!(u64_at(&deployment.value, "/spec/replicas") >= 2, "{id}");
        let selector = at(&deployment.value, "/spec/selector/matchLabels");
        assert!(selects(selector, at(&deployment.value, "/spec/template/metadata/labels")), "{id}");
    }
}

/// The env prefix of a server's variables (what its main passes to serve::parse_or_exit).
fn prefix(server: Server) -> &'static str {
    match server {
        Server::Flight => "FLIGHT",
        Server::Scribe => "SCRIBE_APP",
        Server::Metadata => "METADATA",
    }
}

/// Removes the entries of the list at `pointer` for which `drop` holds, and the list itself if that empties it.
fn remove_from_list(value: &mut Value, pointer: &str, drop: impl Fn(&Value) -> bool) {
    let (parent, key) = pointer.rsplit_once('/').expect("a pointer with a parent");
    let Some(map) = value.pointer_mut(parent).and_then(Value::as_object_mut) else { return };
    let Some(list) = map.get_mut(key).and_then(Value::as_array_mut) else { return };
    list.retain(|entry| !drop(entry));
    if list.is_empty() {
        map.remove(key);
    }
}

fn remove_field(value: &mut Value, pointer: &str) {
    let (parent, key) = pointer.rsplit_once('/').expect("a pointer with a parent");
    if let Some(map) = value.pointer_mut(parent).and_then(Value::as_object_mut) {
        map.remove(key);
    }
}

/// deploy/k8s-tls, rendered, is deploy/k8s rendered plus HTTPS and nothing else: each server reads the
/// `server-tls` Secret's tls.crt and tls.key from a read-only mount (the variables parse as the server's own),
/// the files are readable by the server's group and no other uid, every probe uses HTTPS, and the server
/// Services say `appProtocol: https`. With exactly those removed, every object equals the plain stack's.
#[test]
fn tls_overlay_adds_https_and_nothing_else() {
    let dir = tempfile::tempdir().expect("temp dir");
    let plain = render(&k8s_dir(), &dir.path().join("stack.yaml"));
    let tls = render(&k8s_tls_dir(), &dir.path().join("tls.yaml"));
    let objects: Vec<Object> =
        tls.iter().map(|value| Object { file: "deploy/k8s-tls".into(), value: value.clone() }).collect();
    let servers = BTreeSet::from(["flight-rs", "metadata-rs", "scribe-rs"]);
    let mut patched = BTreeSet::new();
    let mut stripped = BTreeMap::new();
    for object in &objects {
        let id = object.id();
        let mut value = object.value.clone();
        match object.kind() {
            "Deployment" => {
                let name = object.name();
                let server = Server::of(name);
                let pod = object.pod_spec();
                let container = main_container(object);
                let env = container_env(&objects, container);
                parse_server(server, &env);
                let var = |suffix: &str| format!("{}_TLS_{suffix}", prefix(server));
                let path_of = |var: &str| -> String {
                    let found = env.iter().find(|(n, _)| n == var).unwrap_or_else(|| panic!("{id}: no {var}"));
                    found.1.clone()
                };
                let (cert, key) = (path_of(&var("CERT")), path_of(&var("KEY")));
                let mount = array_at(container, "/volumeMounts")
                    .iter()
                    .find(|m| cert.starts_with(&format!("{}/", str_at(m, "/mountPath"))))
                    .unwrap_or_else(|| panic!("{id}: nothing mounted where {cert} is"));
                let at_mount = str_at(mount, "/mountPath");
                assert_eq!(
                    (cert.as_str(), key.as_str()),
                    (&*format!("{at_mount}/tls.crt"), &*format!("{at_mount}/tls.key"))
                );
                assert_eq!(mount.get("readOnly"), Some(&Value::Bool(true)), "{id}: the key's mount is read-only");
                let volume = array_at(pod, "/volumes")
                    .iter()
                    .find(|v| v["name"] == mount["name"])
                    .unwrap_or_else(|| panic!("{id}: no volume {}", mount["name"]));
                assert_eq!(str_at(volume, "/secret/secretName"), "server-tls", "{id}");
                assert!(volume.pointer("/secret/items").is_none(), "{id}: the kubernetes.io/tls keys as they are");
                // Secret files are root's; the pod's fsGroup becomes their group. Readable by the server's group
                // (its runAsGroup), by no other uid, writable by none.
                let mode = u64_at(volume, "/secret/defaultMode");
                assert_eq!(mode & 0o277, 0o040, "{id}: defaultMode {mode:o}: group read, nothing for others");
                assert_eq!(at(pod, "/securityContext/fsGroup"), at(pod, "/securityContext/runAsGroup"), "{id}");
                for probe in ["startupProbe", "readinessProbe", "livenessProbe"] {
                    assert_eq!(str_at(container, &format!("/{probe}/httpGet/scheme")), "HTTPS", "{id} {probe}");
                    remove_field(&mut value, &format!("/spec/template/spec/containers/0/{probe}/httpGet/scheme"));
                }
                let tls_var = |e: &Value| [var("CERT"), var("KEY")].iter().any(|v| e["name"] == v.as_str());
                remove_from_list(&mut value, "/spec/template/spec/containers/0/env", tls_var);
                remove_from_list(&mut value, "/spec/template/spec/containers/0/volumeMounts", |m| m == mount);
                remove_from_list(&mut value, "/spec/template/spec/volumes", |v| v == volume);
                patched.insert(name.to_string());
            }
            "Service" if servers.contains(object.name()) => {
                for (i, port) in array_at(&object.value, "/spec/ports").iter().enumerate() {
                    assert_eq!(str_at(port, "/appProtocol"), "https", "{id}");
                    remove_field(&mut value, &format!("/spec/ports/{i}/appProtocol"));
                }
            }
            _ => {}
        }
        stripped.insert(format!("{} {}", object.kind(), object.name()), value);
    }
    assert_eq!(patched.iter().map(String::as_str).collect::<BTreeSet<_>>(), servers, "every server gets HTTPS");
    // fsGroup is compared apart: metadata-rs sets it in the stack already, the overlay sets it everywhere.
    let without_fs_group = |mut v: Value| {
        remove_field(&mut v, "/spec/template/spec/securityContext/fsGroup");
        v
    };
    let plain: BTreeMap<String, Value> = plain
        .into_iter()
        .map(|v| (format!("{} {}", str_at(&v, "/kind"), str_at(&v, "/metadata/name")), without_fs_group(v)))
        .collect();
    assert_eq!(stripped.keys().collect::<Vec<_>>(), plain.keys().collect::<Vec<_>>(), "the same objects");
    for (name, value) in stripped {
        assert_eq!(without_fs_group(value), plain[&name], "{name}: deploy/k8s-tls changes more than HTTPS needs");
    }
}

#[test]
fn every_pod_is_guaranteed_and_locked_down() {
    let objects = objects();
    let workloads: Vec<&Object> =
        objects.iter().filter(|o| matches!(o.kind(), "Deployment" | "StatefulSet" | "Job")).collect();
    assert_eq!(workloads.len(), 6, "three servers, Postgres, Redis and the loadgen Job");
    for workload in workloads {
        let id = workload.id();
        let pod = workload.pod_spec();
        assert_eq!(pod.get("automountServiceAccountToken"), Some(&Value::Bool(false)), "{id}: no API token");
        assert_eq!(at(pod, "/securityContext/runAsNonRoot"), &Value::Bool(true), "{id}");
        assert_ne!(u64_at(pod, "/securityContext/runAsUser"), 0, "{id}");
        assert_eq!(str_at(pod, "/securityContext/seccompProfile/type"), "RuntimeDefault", "{id}");
        for container in containers(pod) {
            let cid = format!("{id} container {}", str_at(container, "/name"));
            // Guaranteed QoS: every container's requests equal its limits, CPU in whole cores (what the
            // static CPU manager needs to give exclusive cores).
            let requests = at(container, "/resources/requests");
            let limits = at(container, "/resources/limits");
            assert_eq!(requests, limits, "{cid}: requests must equal limits");
            assert!(limits.get("memory").is_some(), "{cid}: a memory limit");
            assert!(whole_cpus(at(limits, "/cpu")).is_some_and(|c| c >= 1), "{cid}: whole CPUs");
            let security = at(container, "/securityContext");
            assert_eq!(at(security, "/allowPrivilegeEscalation"), &Value::Bool(false), "{cid}");
            assert_eq!(at(security, "/readOnlyRootFilesystem"), &Value::Bool(true), "{cid}");
            assert_eq!(at(security, "/runAsNonRoot"), &Value::Bool(true), "{cid}");
            assert_eq!(at(security, "/capabilities/drop"), &serde_json::json!(["ALL"]), "{cid}");
            assert!(security.pointer("/capabilities/add").is_none(), "{cid}: no capabilities added");
            assert!(security.get("privileged").is_none_or(|p| p == &Value::Bool(false)), "{cid}");
            let image = str_at(container, "/image");
            let tag = image.rsplit_once(':').map(|(_, t)| t).unwrap_or("");
            assert!(!tag.is_empty() && tag != "latest" && !tag.contains('/'), "{cid}: pin the image tag ({image})");
        }
    }
    // The managed-service notes and the placeholder stay obvious.
    let secret = find(&objects, "Secret", "scribe-db");
    assert!(str_at(&secret.value, "/stringData/password").contains("CHANGE-ME"), "the password is a placeholder");
    assert!(
        str_at(&find(&objects, "StatefulSet", "postgres").value, "/spec/template/spec/containers/0/image")
            .starts_with("postgres:17.")
    );
    assert!(
        str_at(&find(&objects, "StatefulSet", "redis").value, "/spec/template/spec/containers/0/image")
            .starts_with("redis:8.")
    );
}

/// The pods of the stack's workloads: (workload id, pod labels, main container).
fn pod_templates(objects: &[Object]) -> Vec<(String, &Value, &Value)> {
    objects
        .iter()
        .filter(|o| matches!(o.kind(), "Deployment" | "StatefulSet" | "Job"))
        .map(|o| (o.id(), at(&o.value, "/spec/template/metadata/labels"), main_container(o)))
        .collect()
}

#[test]
fn services_budgets_and_policies_select_real_pods_and_ports() {
    let objects = objects();
    let pods = pod_templates(&objects);

    let services = objects_of(&objects, "Service");
    assert_eq!(services.len(), 5, "one Service per server, Postgres and Redis");
    for service in services {
        let id = service.id();
        assert_eq!(str_at(&service.value, "/spec/type"), "ClusterIP", "{id}");
        let selector = at(&service.value, "/spec/selector");
        let matched: Vec<_> = pods.iter().filter(|(_, labels, _)| selects(selector, labels)).collect();
        assert_eq!(matched.len(), 1, "{id} must select exactly one workload's pods, selects {:?}", {
            matched.iter().map(|(w, _, _)| w.as_str()).collect::<Vec<_>>()
        });
        let (workload, _, container) = matched[0];
        assert!(!workload.contains("Job"), "{id}: a Service for the load generator?");
        for port in array_at(&service.value, "/spec/ports") {
            let target = port.get("targetPort").unwrap_or_else(|| at(port, "/port"));
            assert!(resolve_port(container, target).is_some(), "{id}: targetPort {target} is no port of {workload}");
        }
    }

    let budgets = objects_of(&objects, "PodDisruptionBudget");
    let deployments = objects_of(&objects, "Deployment");
    assert_eq!(budgets.len(), deployments.len(), "one PodDisruptionBudget per Deployment");
    for deployment in deployments {
        let labels = at(&deployment.value, "/spec/template/metadata/labels");
        let replicas = u64_at(&deployment.value, "/spec/replicas");
        let matching: Vec<_> =
            budgets.iter().filter(|b| selects(at(&b.value, "/spec/selector/matchLabels"), labels)).collect();
        assert_eq!(matching.len(), 1, "{}: exactly one budget", deployment.id());
        // A budget that allows no disruption would block every node drain.
        let budget = &matching[0].value;
        let unavailable = budget.pointer("/spec/maxUnavailable").and_then(Value::as_u64);
        let available = budget.pointer("/spec/minAvailable").and_then(Value::as_u64);
        assert!(
            unavailable.is_some_and(|u| u >= 1 && u < replicas) || available.is_some_and(|a| a < replicas),
            "{}: the budget must let one pod go and keep one",
            deployment.id()
        );
    }
    for budget in objects_of(&objects, "PodDisruptionBudget") {
        let selector = at(&budget.value, "/spec/selector/matchLabels");
        assert!(
            objects_of(&objects, "Deployment")
                .iter()
                .any(|d| selects(selector, at(&d.value, "/spec/template/metadata/labels"))),
            "{} selects no Deployment",
            budget.id()
        );
    }

    for policy in objects_of(&objects, "NetworkPolicy") {
        let id = policy.id();
        let target = pods
            .iter()
            .find(|(_, labels, _)| selects(at(&policy.value, "/spec/podSelector/matchLabels"), labels))
            .unwrap_or_else(|| panic!("{id} protects no pods"));
        for rule in array_at(&policy.value, "/spec/ingress") {
            for from in array_at(rule, "/from") {
                let selector = at(from, "/podSelector/matchLabels");
                assert!(
                    pods.iter().any(|(_, labels, _)| selects(selector, labels)),
                    "{id}: {selector} selects no pods"
                );
            }
            for port in array_at(rule, "/ports") {
                assert!(resolve_port(target.2, at(port, "/port")).is_some(), "{id}: port {port} not on {}", target.0);
            }
        }
    }
    // Every Deployment configured to reach a protected Service (by host name, or in a URL) is admitted by the
    // policy that protects its pods: a policy must not cut a client the manifests set up.
    let mut checked = 0;
    for policy in objects_of(&objects, "NetworkPolicy") {
        let protected = at(&policy.value, "/spec/podSelector/matchLabels");
        let froms: Vec<&Value> = array_at(&policy.value, "/spec/ingress")
            .iter()
            .flat_map(|rule| array_at(rule, "/from"))
            .map(|from| at(from, "/podSelector/matchLabels"))
            .collect();
        for service in objects_of(&objects, "Service") {
            if at(&service.value, "/spec/selector") != protected {
                continue;
            }
            let host = service.name();
            for deployment in objects_of(&objects, "Deployment") {
                let env = container_env(&objects, main_container(deployment));
                let uses = env.iter().any(|(_, v)| v == host || v.contains(&format!("://{host}:")));
                if uses {
                    let labels = at(&deployment.value, "/spec/template/metadata/labels");
                    assert!(froms.iter().any(|f| selects(f, labels)), "{} blocks {}", policy.id(), deployment.id());
                    checked += 1;
                }
            }
        }
    }
    assert!(checked >= 2, "scribe-rs reaches Postgres and Redis through the policies ({checked} checked)");
}

// ---------------------------------------------------------------------------------------------------------
// Behaviour

/// A port nothing listens on: the dependencies that are "down".
fn closed_port() -> u16 {
    testkit::free_port()
}

/// Replaces (or adds) env entries.
fn with_env(mut env: Vec<(String, String)>, overrides: &[(&str, String)]) -> Vec<(String, String)> {
    for (name, value) in overrides {
        match env.iter_mut().find(|(n, _)| n == name) {
            Some(entry) => entry.1 = value.clone(),
            None => env.push((name.to_string(), value.clone())),
        }
    }
    env
}

/// Starts a Deployment's server in this process from its env (with `overrides`), on 127.0.0.1:<ephemeral>.
fn start_server(objects: &[Object], name: &str, overrides: &[(&str, String)]) -> serve::Server {
    let container = main_container(find(objects, "Deployment", name));
    let env = with_env(container_env(objects, container), overrides);
    let local: SocketAddr = "127.0.0.1:0".parse().expect("an address");
    let listeners = serve::bind_reuseport(local, 1).expect("bind 127.0.0.1:0");
    match Server::of(name) {
        Server::Flight => {
            let config: flight::Config = parse_env("FLIGHT", &env);
            let limits = config.serve.limits();
            let app = flight::App::new(config.resolve().expect("flight-rs config")).expect("flight-rs app");
            flight::start(app, listeners, limits).expect("flight-rs starts")
        }
        Server::Scribe => {
            let config: scribe::Config = parse_env("SCRIBE_APP", &env);
            let limits = config.serve.limits();
            let shared = scribe::Shared::new(config.resolve().expect("scribe-rs config")).expect("scribe-rs state");
            scribe::start(shared, listeners, limits).expect("scribe-rs starts")
        }
        Server::Metadata => {
            let config: metadata::config::Config = parse_env("METADATA", &env);
            let limits = config.serve.limits();
            metadata::start(config.resolve().expect("metadata-rs config"), listeners, limits)
                .expect("metadata-rs starts")
        }
    }
}

/// GETs every probe path of a Deployment: probe name → (status, body).
fn probe(objects: &[Object], name: &str, server: &serve::Server) -> BTreeMap<&'static str, (u16, String)> {
    let container = main_container(find(objects, "Deployment", name));
    let mut out = BTreeMap::new();
    for probe in ["startupProbe", "readinessProbe", "livenessProbe"] {
        let p = at(container, &format!("/{probe}"));
        let path = str_at(p, "/httpGet/path");
        let timeout = Duration::from_secs(p.get("timeoutSeconds").and_then(Value::as_u64).unwrap_or(1));
        let started = std::time::Instant::now();
        let res = testkit::http::get(server.local_addr(), path);
        assert!(started.elapsed() < timeout, "{name} {probe}: {path} took longer than the probe's timeout");
        out.insert(probe, (res.status, res.text()));
    }
    out
}

/// The init container's gen-data command, parsed by metadata-rs itself.
fn gen_data_args(objects: &[Object]) -> metadata_dataset::GenDataArgs {
    let deployment = find(objects, "Deployment", "metadata-rs");
    let init = array_at(deployment.pod_spec(), "/initContainers");
    assert_eq!(init.len(), 1);
    assert_eq!(str_at(&init[0], "/image"), "rust-baselines/metadata-rs:0.1.0");
    let argv: Vec<&str> = array_at(&init[0], "/command").iter().map(|a| a.as_str().expect("a string")).collect();
    let matches = serve::command_with_env::<metadata::config::Config>("METADATA")
        .mut_args(|a| a.env(None::<&str>))
        .try_get_matches_from(&argv)
        .unwrap_or_else(|e| panic!("metadata-rs refuses the init command {argv:?}: {e}"));
    let config = metadata::config::Config::from_arg_matches(&matches).expect("a metadata-rs config");
    match config.command {
        Some(metadata::config::Command::GenData(args)) => args,
        other => panic!("the init container must run gen-data, runs {other:?}"),
    }
}

#[test]
fn probe_paths_answer_as_the_manifests_expect() {
    let objects = objects();

    // flight-rs: /healthz is 200 whenever it serves.
    let flight = start_server(&objects, "flight-rs", &[]);
    for (probe, (status, body)) in probe(&objects, "flight-rs", &flight) {
        assert_eq!(status, 200, "flight-rs {probe}: {body}");
    }

    // scribe-rs with Postgres and Redis down: liveness and startup still 200 (no restart storm), readiness
    // 503 naming both (no traffic).
    let overrides = [
        ("SCRIBE_APP_DB_HOST", "127.0.0.1".to_string()),
        ("SCRIBE_APP_DB_PORT", closed_port().to_string()),
        ("REDIS_URL", format!("redis://127.0.0.1:{}/1", closed_port())),
    ];
    let scribe = start_server(&objects, "scribe-rs", &overrides);
    let answers = probe(&objects, "scribe-rs", &scribe);
    assert_eq!(answers["livenessProbe"].0, 200, "scribe-rs liveness with dependencies down: {:?}", answers);
    assert_eq!(answers["startupProbe"].0, 200, "scribe-rs startup with dependencies down: {:?}", answers);
    let (status, body) = &answers["readinessProbe"];
    assert_eq!(*status, 503, "scribe-rs readiness with Postgres and Redis down: {body}");
    let health: Value = serde_json::from_str(body).expect("a JSON health body");
    assert_eq!(health["postgres"], "unavailable", "{body}");
    assert_eq!(health["redis"], "unavailable", "{body}");

    // metadata-rs on a file made by its own init command (fewer rows, to keep the test quick).
    let dir = tempfile::tempdir().expect("temp dir");
    let mut args = gen_data_args(&objects);
    args.db = dir.path().join("metadata.db");
    args.ids = dir.path().join("sample_ids.txt");
    args.rows = 2000;
    metadata_dataset::run(&args).expect("gen-data");
    let metadata = start_server(&objects, "metadata-rs", &[("METADATA_DB", args.db.display().to_string())]);
    for (probe, (status, body)) in probe(&objects, "metadata-rs", &metadata) {
        assert_eq!(status, 200, "metadata-rs {probe}: {body}");
    }
    let id = std::fs::read_to_string(&args.ids).expect("sample ids");
    let id = id.lines().next().expect("one sample id");
    let res = testkit::http::get(metadata.local_addr(), &format!("/v1/metadata/{id}"));
    assert!(matches!(res.status, 200 | 404), "a lookup answers: {} {}", res.status, res.text());
}

#[test]
fn metadata_init_container_writes_the_file_the_server_reads() {
    let objects = objects();
    let deployment = find(&objects, "Deployment", "metadata-rs");
    let args = gen_data_args(&objects);
    assert!(args.force, "--force: a re-run init container finds the previous copy in the emptyDir");
    let server = main_container(deployment);
    let env = container_env(&objects, server);
    let db = &env.iter().find(|(k, _)| k == "METADATA_DB").expect("METADATA_DB is set").1;
    assert_eq!(Path::new(db), args.db, "the server reads the file gen-data writes");

    // Both containers mount the same writable volume at the file's directory (WAL needs its -shm file there).
    let dir = args.db.parent().expect("a directory").to_str().expect("UTF-8");
    let init = &array_at(deployment.pod_spec(), "/initContainers")[0];
    let volume_at = |container: &Value| -> String {
        let mount = array_at(container, "/volumeMounts")
            .iter()
            .find(|m| str_at(m, "/mountPath") == dir)
            .unwrap_or_else(|| panic!("nothing mounted at {dir}"));
        assert_ne!(mount.get("readOnly"), Some(&Value::Bool(true)), "SQLite in WAL mode needs a writable directory");
        str_at(mount, "/name").to_string()
    };
    let volume = volume_at(init);
    assert_eq!(volume_at(server), volume);
    assert!(args.ids.starts_with(dir), "sample ids on the volume too (the root filesystem is read-only)");
    let declared = array_at(deployment.pod_spec(), "/volumes")
        .iter()
        .find(|v| str_at(v, "/name") == volume)
        .expect("the volume is declared");
    assert!(declared.get("emptyDir").is_some(), "an emptyDir, as the manifest's comment explains");
}

/// The JSON report in a pod's log, found independently of merge-reports.sh's awk: serde parses one value
/// from the first line that is `{`.
fn report_in_log(log: &str) -> Value {
    let start = if log.starts_with("{\n") { 0 } else { log.find("\n{\n").expect("a JSON report in the log") + 1 };
    serde_json::Deserializer::from_str(&log[start..])
        .into_iter::<Value>()
        .next()
        .expect("one JSON value")
        .expect("a JSON report")
}

/// A kubectl stand-in for merge-reports.sh: Job queries are answered by the real kubectl from job.yaml plus a
/// finished status (`kubectl label --local`, no cluster), so their jsonpaths are checked for real; pod
/// lists and logs come from the saved outputs. Anything else fails, and every call is recorded.
const FAKE_KUBECTL: &str = r#"#!/usr/bin/env bash
set -euo pipefail
echo "$*" >>"$FAKE_KUBE_DIR/calls"
fail() { echo "fake kubectl: $* (called with: $ARGS)" >&2; exit 1; }
ARGS="$*"
[ "$#" -ge 2 ] && [ "$1" = --namespace ] && [ "$2" = rust-baselines ] || fail "expected --namespace rust-baselines"
shift 2
case "$1" in
  get)
    case "$2" in
      job)
        [ "$#" -eq 5 ] && [ "$3" = loadgen ] && [ "$4" = -o ] || fail "unexpected job query"
        exec "$REAL_KUBECTL" label --local -f "$FAKE_KUBE_DIR/job.yaml" fake=1 -o "$5" ;;
      pods)
        [ "$#" -eq 7 ] && [ "$3" = -l ] && [ "$5" = --field-selector=status.phase=Succeeded ] &&
          [ "$6" = -o ] && [ "$7" = 'jsonpath={.items[*].metadata.name}' ] || fail "unexpected pod query"
        case "$4" in
          batch.kubernetes.io/job-name=loadgen,batch.kubernetes.io/job-completion-index=*) index="${4##*=}" ;;
          *) fail "unexpected selector" ;;
        esac
        if [ -f "$FAKE_KUBE_DIR/logs/$index.log" ]; then printf 'loadgen-%s-x7k2p' "$index"; fi ;;
      *) fail "unexpected get" ;;
    esac ;;
  logs)
    [ "$#" -eq 2 ] || fail "unexpected logs call"
    case "$2" in
      pod/loadgen-*-x7k2p) index="${2#pod/loadgen-}"; cat "$FAKE_KUBE_DIR/logs/${index%-x7k2p}.log" ;;
      *) fail "unexpected pod" ;;
    esac ;;
  *) fail "unexpected command" ;;
esac
"#;

/// Runs merge-reports.sh with the stand-in kubectl (answering for job.yaml with `status` added, and for the
/// logs saved in `work/logs`) and `loadgen`'s directory first on PATH; the script's defaults otherwise.
fn merge_reports(work: &Path, status: &str, loadgen: &Path, out: &Path) -> std::process::Output {
    let shim = work.join("bin");
    std::fs::create_dir_all(&shim).expect("shim dir");
    let fake = shim.join("kubectl");
    std::fs::write(&fake, FAKE_KUBECTL).expect("write the fake kubectl");
    let mut permissions = std::fs::metadata(&fake).expect("metadata").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&fake, permissions).expect("chmod the fake kubectl");
    let job_yaml = std::fs::read_to_string(k8s_dir().join("loadgen/job.yaml")).expect("job.yaml");
    std::fs::write(work.join("job.yaml"), format!("{job_yaml}status:\n  {status}\n")).expect("write the Job");
    let path = std::env::join_paths(
        [shim, loadgen.parent().expect("a directory").to_path_buf()]
            .into_iter()
            .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .expect("PATH");
    Command::new("bash")
        .arg(k8s_dir().join("merge-reports.sh"))
        .env("PATH", path)
        .env("OUT_DIR", out)
        .env("FAKE_KUBE_DIR", work)
        .env("REAL_KUBECTL", kubectl())
        .env_remove("NAMESPACE")
        .env_remove("KUBECTL")
        .env_remove("LOADGEN")
        .env_remove("WAIT_SECONDS")
        .stdin(Stdio::null())
        .output()
        .expect("run merge-reports.sh")
}

#[test]
fn merge_reports_refuses_a_job_with_a_failed_pod() {
    let work = tempfile::tempdir().expect("temp dir");
    let out = work.path().join("out");
    let run = merge_reports(work.path(), "succeeded: 3\n  failed: 1", &testkit::workspace::binary("loadgen"), &out);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success(), "a failed pod must fail the merge");
    assert!(stderr.contains("1 pod(s) of job/loadgen failed"), "says why: {stderr}");
    assert!(!out.join("merged.json").exists(), "nothing merged");
}

#[test]
fn loadgen_job_runs_and_merges_exactly() {
    let objects = objects();
    let job = find(&objects, "Job", "loadgen");
    let spec = at(&job.value, "/spec");
    assert_eq!(str_at(spec, "/completionMode"), "Indexed");
    let completions = u64_at(spec, "/completions");
    assert!(completions >= 2, "several loaders");
    assert_eq!(u64_at(spec, "/parallelism"), completions, "all at once");
    assert_eq!(u64_at(spec, "/backoffLimit"), 0, "a retried pod would not run with the others");
    assert_eq!(str_at(spec, "/template/spec/restartPolicy"), "Never");
    assert!(u64_at(spec, "/activeDeadlineSeconds") > 0, "bounded");

    let container = main_container(job);
    assert_eq!(str_at(container, "/image"), "rust-baselines/loadgen:0.1.0");
    assert_eq!(at(container, "/command"), &serde_json::json!(["/usr/local/bin/loadgen"]));
    let args: Vec<String> =
        array_at(container, "/args").iter().map(|a| a.as_str().expect("a string").to_string()).collect();

    // loadgen itself accepts the arguments, and they say what the manifest's comments say.
    let argv = std::iter::once("loadgen".to_string()).chain(args.iter().cloned());
    let cli = loadgen::cli::Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("loadgen refuses {args:?}: {e}"));
    assert!(cli.command.is_none(), "the Job runs load, not a subcommand");
    let run = &cli.run;
    assert_eq!(run.json.as_deref(), Some(Path::new("/dev/stdout")), "the JSON report on stdout, after the text");
    let cpus = whole_cpus(at(container, "/resources/limits/cpu")).expect("whole CPUs");
    assert_eq!(u64::from(run.threads), cpus, "one loader thread per CPU");
    assert!(run.duration >= Duration::from_secs(10), "a duration long against the pods' start skew");
    assert!(
        run.warmup + run.duration + Duration::from_secs(60)
            < Duration::from_secs(u64_at(spec, "/activeDeadlineSeconds")),
        "the Job's deadline leaves room for the run"
    );

    // The URL names the flight-rs Service by its port.
    let url = run.url.clone().expect("a target URL");
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (authority, path) = rest.split_at(rest.find('/').expect("a path"));
    let (host, port) = authority.split_once(':').expect("host:port");
    let service = find(&objects, "Service", host);
    let service_ports: Vec<u64> = array_at(&service.value, "/spec/ports").iter().map(|p| u64_at(p, "/port")).collect();
    assert!(service_ports.contains(&port.parse().expect("a port")), "{url}: {host} has ports {service_ports:?}");
    assert!(selects(
        at(&service.value, "/spec/selector"),
        at(&find(&objects, "Deployment", "flight-rs").value, "/spec/template/metadata/labels")
    ));

    // Run the Job's arguments, with only the URL and --duration replaced, against a local flight-rs set up as
    // its Deployment is, `completions` processes at once, as the Job controller would start them.
    let server = start_server(&objects, "flight-rs", &[]);
    let local_url = format!("http://{}{path}", server.local_addr());
    let mut replaced = (0, 0);
    let local_args: Vec<String> = args
        .iter()
        .map(|a| {
            if *a == url {
                replaced.0 += 1;
                local_url.clone()
            } else if a.starts_with("--duration=") {
                replaced.1 += 1;
                "--duration=2s".to_string()
            } else {
                a.clone()
            }
        })
        .collect();
    assert_eq!(replaced, (1, 1), "the Job's args hold the URL and --duration=… once each: {args:?}");

    let loadgen = testkit::workspace::binary("loadgen");
    let work = tempfile::tempdir().expect("temp dir");
    let logs = work.path().join("logs");
    std::fs::create_dir_all(&logs).expect("logs dir");
    let mut runs = Vec::new();
    for index in 0..completions {
        // One pipe for stdout and stderr, as a container's log holds both.
        let (mut reader, writer) = std::io::pipe().expect("a pipe");
        let mut command = Command::new(&loadgen);
        command
            .args(&local_args)
            .env("JOB_COMPLETION_INDEX", index.to_string())
            .stdin(Stdio::null())
            .stdout(writer.try_clone().expect("clone the pipe"))
            .stderr(writer);
        let child = Guard(command.spawn().expect("start loadgen"));
        drop(command); // the parent's copies of the pipe's write end: EOF once the child exits
        let output = std::thread::spawn(move || {
            let mut out = String::new();
            reader.read_to_string(&mut out).map(|_| out)
        });
        runs.push((index, child, output));
    }
    let mut parts = Vec::new();
    for (index, mut child, output) in runs {
        let status = wait_for_exit(&mut child.0, Duration::from_secs(90)).expect("loadgen finishes");
        let log = output.join().expect("the reader thread").expect("the log is UTF-8");
        assert!(status.success(), "loader {index} failed ({status}):\n{log}");
        std::fs::write(logs.join(format!("{index}.log")), &log).expect("save the log");
        parts.push(report_in_log(&log));
    }
    drop(server);

    // merge-reports.sh, with kubectl replaced by the stand-in and loadgen on PATH.
    let out = work.path().join("out");
    let merged_run = merge_reports(work.path(), &format!("succeeded: {completions}"), &loadgen, &out);
    let stdout = String::from_utf8_lossy(&merged_run.stdout);
    let stderr = String::from_utf8_lossy(&merged_run.stderr);
    assert!(merged_run.status.success(), "merge-reports.sh failed:\n{stdout}\n{stderr}");
    eprintln!("merge-reports.sh printed:\n{stdout}");
    assert!(stdout.contains(&format!("Merged {completions} reports")), "the merged text report:\n{stdout}");
    assert!(stdout.contains("start spread: "), "the start skew is printed:\n{stdout}");
    let calls = std::fs::read_to_string(work.path().join("calls")).expect("kubectl calls");
    for index in 0..completions {
        let logs_calls =
            calls.lines().filter(|l| *l == format!("--namespace rust-baselines logs pod/loadgen-{index}-x7k2p"));
        assert_eq!(logs_calls.count(), 1, "one `kubectl logs` per completion index:\n{calls}");
    }

    // The script extracted each report whole.
    for (index, part) in parts.iter().enumerate() {
        let extracted = std::fs::read_to_string(out.join(format!("report-{index}.json"))).expect("extracted report");
        let extracted: Value = serde_json::from_str(&extracted).expect("an extracted report is JSON");
        assert_eq!(&extracted, part, "report {index} as extracted by merge-reports.sh");
    }

    // The merge is exact: counts add, and the merged histogram is the sum of the parts' histograms.
    let merged = loadgen::merge::read_report(&out.join("merged.json")).expect("merged.json is a loadgen report");
    let parts: Vec<loadgen::report::Report> =
        parts.into_iter().map(|p| serde_json::from_value(p).expect("a loadgen report")).collect();
    for (index, part) in parts.iter().enumerate() {
        assert!(part.responses > 0, "loader {index} got responses");
        assert_eq!(part.non_2xx_3xx, 0, "loader {index}: only 200s");
        assert_eq!(part.errors.total(), 0, "loader {index}: no socket errors");
    }
    assert_eq!(merged.merged_from, completions);
    assert_eq!(merged.responses, parts.iter().map(|p| p.responses).sum::<u64>(), "responses add up");
    let mut status = BTreeMap::new();
    for part in &parts {
        for (code, n) in &part.status {
            *status.entry(*code).or_insert(0) += n;
        }
    }
    assert_eq!(merged.status, status, "status counts add up");
    assert_eq!(merged.latency.count, parts.iter().map(|p| p.latency.count).sum::<u64>(), "latency counts add up");
    assert_eq!(merged.latency.max_us, parts.iter().map(|p| p.latency.max_us).max().expect("parts"), "max of maxes");
    assert_eq!(merged.latency.min_us, parts.iter().map(|p| p.latency.min_us).min().expect("parts"), "min of mins");
    // A quantile of the union lies between the parts' quantiles (it would not for an average of percentiles
    // weighted wrongly, and says the merge used all the data).
    let p99: Vec<u64> = parts.iter().map(|p| p.latency.p99_us).collect();
    let (low, high) = (*p99.iter().min().expect("parts"), *p99.iter().max().expect("parts"));
    assert!((low..=high).contains(&merged.latency.p99_us), "merged p99 {} outside {p99:?}", merged.latency.p99_us);

    let decode = |encoded: &str| loadgen::report::decode_histogram(encoded).expect("a histogram");
    let merged_histogram = decode(&merged.latency.histogram);
    assert_eq!(merged_histogram.len(), merged.latency.count, "the merged histogram holds every response");
    assert_eq!(merged_histogram.len(), parts.iter().map(|p| decode(&p.latency.histogram).len()).sum::<u64>());
    let mut expected: BTreeMap<u64, u64> = BTreeMap::new();
    for part in &parts {
        for v in decode(&part.latency.histogram).iter_recorded() {
            *expected.entry(v.value_iterated_to()).or_insert(0) += v.count_at_value();
        }
    }
    let actual: BTreeMap<u64, u64> =
        merged_histogram.iter_recorded().map(|v| (v.value_iterated_to(), v.count_at_value())).collect();
    assert_eq!(actual, expected, "every bucket of the merged histogram is the sum of the parts' buckets");
}
