//! Component schemas: discovery, the Redis schema cache, and validators compiled once per distinct schema.
//!
//! Every record body is checked against the envelope (schemas/default.table.schema.json, built into the binary
//! because it mirrors the table columns the store writes) and its `data` against the component's own schema,
//! looked up in this order:
//!
//! 1. the schema folder, read and compiled at startup: component `notes` is `notes.schema.json`, subcomponent
//!    `a/b` is `a.b.schema.json` (flat: subdirectories are not read; `default.table.schema.json` is the envelope
//!    and is skipped). A file that does not parse or compile stops startup, naming the file;
//! 2. the in-process cache of schemas found below, which expires after [`DEFAULT_CACHE_TTL`] so a schema changed
//!    at the base URL is picked up (failed fetches are remembered for [`ERROR_TTL`] only);
//! 3. Redis (the schema db, key = component path, value = the schema JSON), under the store's deadline: Redis
//!    down or hung means "not cached", never a stuck request;
//! 4. `GET <schemaBaseUrl>/<component>/schema` (http:// only: TLS is not built in), under `fetch_timeout`. A 200
//!    is compiled and stored in Redis (with the same expiry) and in process; a 404 means "no schema".
//!
//! Without a component schema the envelope alone applies, unless `require_schema` is set, in which case the
//! component is refused ([`SchemaError::NotFound`]); an unreachable base URL is then [`SchemaError::Fetch`].
//!
//! Differences from the original Scribe, on purpose: it fetched from the base URL and compiled a validator on
//! every request; here a validator is compiled once per distinct schema content (shared by hash, see
//! [`ComponentSchema::hash`]) and concurrent requests for one uncached component wait for a single lookup. It
//! flushed the Redis schema db at startup; here entries expire instead, so instances sharing the db do not wipe
//! each other's cache and a changed schema is seen within two expiry periods (Redis, then process) at most.
//! Validators never follow a `$ref` to a file or URL: such a schema fails to compile ([`SchemaError::Invalid`]).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use tokio::sync::OnceCell;

/// The envelope every record body must match; the same file the repository ships in schemas/.
const ENVELOPE_SOURCE: &str = include_str!("../../../schemas/default.table.schema.json");
const ENVELOPE_FILE: &str = "default.table.schema.json";
const SCHEMA_SUFFIX: &str = ".schema.json";

/// How long a schema found in Redis or at the base URL (or found missing there) is trusted in process.
pub const DEFAULT_CACHE_TTL: Duration = Duration::from_secs(60);
/// How long a failed fetch is remembered: long enough that a hung base URL costs one timeout per component per
/// period instead of one per request, short enough that recovery is noticed quickly.
pub const ERROR_TTL: Duration = Duration::from_secs(5);
/// A schema is a few KiB; anything near this is not a schema.
const MAX_SCHEMA_BYTES: usize = 1 << 20;
/// A body can fail in many places; the first ones are enough to fix it, and the response stays small.
const MAX_MESSAGES: usize = 50;
/// Above this many cached lookups (one per distinct component name asked for), expired ones are dropped.
const CACHE_PRUNE_AT: usize = 1024;

pub struct SchemaConfig {
    /// Folder of `<component>.schema.json` files, loaded at startup.
    pub dir: Option<PathBuf>,
    /// `http://host[:port][/prefix]`; schemas are fetched from `<base_url>/<component>/schema`.
    pub base_url: Option<String>,
    /// Refuse components that have no schema of their own.
    pub require_schema: bool,
    /// The store on the schema db (SCRIBE_APP_REDIS_SCHEMA_DB, 1 by default).
    pub redis: Option<Arc<bounded_redis::RedisStore>>,
    /// Bound on one base URL fetch: connect, request, and reading the body.
    pub fetch_timeout: Duration,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum SchemaError {
    /// `require_schema` is set and the component has no schema anywhere.
    #[error("{0}")]
    NotFound(String),
    /// A schema (file, Redis entry or fetched body) does not parse or compile, or is refused (remote `$ref`).
    #[error("{0}")]
    Invalid(String),
    /// The base URL is unusable or did not answer, and a schema is required.
    #[error("{0}")]
    Fetch(String),
}

/// The compiled validators for one component: the envelope, plus the component's schema for `data` if it has one.
pub struct ComponentSchema {
    hash: u64,
    envelope: Arc<jsonschema::Validator>,
    data: Option<jsonschema::Validator>,
    source: Option<Value>,
}

impl ComponentSchema {
    /// Validates a whole record body: envelope first, then `data` against the component schema. Err carries
    /// the validator's messages (each "path: message", path a JSON pointer into the body, `/` for the body
    /// itself), for a 400. Offending values are not echoed back: the path says where they are.
    pub fn validate(&self, record: &Value) -> Result<(), Vec<String>> {
        if !self.envelope.is_valid(record) {
            return Err(messages(&self.envelope, record, ""));
        }
        if let (Some(validator), Some(data)) = (&self.data, record.get("data"))
            && !validator.is_valid(data)
        {
            return Err(messages(validator, data, "/data"));
        }
        Ok(())
    }

    /// Identifies the schema content (envelope and component schema together); equal content, equal hash, and
    /// the same value across processes and builds (FNV-1a over the compact JSON), so it can key DDL.
    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// Whether the component has a schema of its own (false: only the envelope applies).
    pub fn has_component_schema(&self) -> bool {
        self.data.is_some()
    }

    /// The component's schema for `data`, as loaded.
    pub fn component_schema(&self) -> Option<&Value> {
        self.source.as_ref()
    }
}

fn messages(validator: &jsonschema::Validator, instance: &Value, prefix: &str) -> Vec<String> {
    validator
        .iter_errors(instance)
        .take(MAX_MESSAGES)
        .map(|error| {
            let mut line = format!("{prefix}{}", error.instance_path().as_str());
            if line.is_empty() {
                line.push('/');
            }
            let _ = write!(line, ": {}", error.masked());
            line
        })
        .collect()
}

type Lookup = Result<Arc<ComponentSchema>, SchemaError>;

struct Cached {
    result: Lookup,
    expires: Instant,
}

type HttpClient = Client<HttpConnector, Empty<Bytes>>;

/// One lookup of an uncached component: its result and how long to cache it.
type InFlight = OnceCell<(Lookup, Duration)>;

pub struct Registry {
    envelope: Arc<jsonschema::Validator>,
    /// Compact JSON of the envelope: the prefix of every content hash.
    envelope_json: Vec<u8>,
    /// What a component without a schema of its own gets (when allowed).
    envelope_only: Arc<ComponentSchema>,
    /// Loaded at startup and never changed: read without a lock.
    folder: HashMap<String, Arc<ComponentSchema>>,
    base_url: Option<String>,
    require_schema: bool,
    redis: Option<Arc<bounded_redis::RedisStore>>,
    fetch_timeout: Duration,
    cache_ttl: Duration,
    http: HttpClient,
    /// Lookups that went past the folder, by component, until they expire.
    cache: RwLock<HashMap<String, Cached>>,
    /// One lookup per uncached component at a time; everyone asking meanwhile waits for its result.
    /// Lock order: `inflight`, then `cache`.
    inflight: Mutex<HashMap<String, Arc<InFlight>>>,
    /// Compiled schemas by content hash, so equal content is compiled once however many components or refetches
    /// share it. Weak: a schema nobody uses any more is freed.
    compiled: Mutex<HashMap<u64, Weak<ComponentSchema>>>,
}

impl Registry {
    /// Compiles the envelope once, checks the base URL, and loads and compiles every `*.schema.json` in the
    /// folder (a bad file is an error naming it).
    pub fn new(config: SchemaConfig) -> Result<Registry, SchemaError> {
        let envelope_value: Value = serde_json::from_str(ENVELOPE_SOURCE)
            .map_err(|e| SchemaError::Invalid(format!("built-in {ENVELOPE_FILE}: {e}")))?;
        let envelope = Arc::new(
            compile(&envelope_value).map_err(|e| SchemaError::Invalid(format!("built-in {ENVELOPE_FILE}: {e}")))?,
        );
        let envelope_json = envelope_value.to_string().into_bytes();
        let envelope_only = Arc::new(ComponentSchema {
            hash: fnv1a(&[&envelope_json]),
            envelope: envelope.clone(),
            data: None,
            source: None,
        });
        let base_url = config.base_url.as_deref().map(check_base_url).transpose()?.flatten();
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(config.fetch_timeout));
        connector.set_nodelay(true);
        let http = Client::builder(TokioExecutor::new()).pool_max_idle_per_host(4).build(connector);
        let mut registry = Registry {
            envelope,
            envelope_json,
            envelope_only,
            folder: HashMap::new(),
            base_url,
            require_schema: config.require_schema,
            redis: config.redis,
            fetch_timeout: config.fetch_timeout,
            cache_ttl: DEFAULT_CACHE_TTL,
            http,
            cache: RwLock::new(HashMap::new()),
            inflight: Mutex::new(HashMap::new()),
            compiled: Mutex::new(HashMap::new()),
        };
        if let Some(dir) = &config.dir {
            registry.folder = registry.load_folder(dir)?;
            tracing::info!(dir = %dir.display(), components = registry.folder.len(), "loaded component schemas");
        }
        Ok(registry)
    }

    /// How long schemas from Redis or the base URL are trusted in process (default [`DEFAULT_CACHE_TTL`]); also
    /// the expiry of the Redis entries written.
    pub fn with_cache_ttl(mut self, ttl: Duration) -> Registry {
        self.cache_ttl = ttl;
        self
    }

    /// The components found in the schema folder at startup, sorted.
    pub fn folder_components(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.folder.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }

    /// component: "notes" or "a/b" (surrounding slashes are ignored). Order: the folder (loaded at startup), the
    /// in-process cache, Redis, the base URL; see the module docs. Without any component schema:
    /// Ok(envelope-only schema) unless `require_schema`. A name that cannot be a component (characters other
    /// than ASCII letters, digits, `_`, `-` in `/`-separated segments) is never looked up in Redis or fetched.
    pub async fn get(&self, component: &str) -> Result<Arc<ComponentSchema>, SchemaError> {
        let component = component.trim_matches('/');
        if let Some(schema) = self.folder.get(component) {
            return Ok(schema.clone());
        }
        if !is_component_name(component) || (self.redis.is_none() && self.base_url.is_none()) {
            return self.absent(component);
        }
        if let Some(hit) = self.cached(component) {
            return hit;
        }
        let cell = {
            let mut inflight = self.inflight.lock().unwrap_or_else(PoisonError::into_inner);
            match inflight.get(component) {
                Some(cell) => cell.clone(),
                None => {
                    // A lookup that just finished filled the cache before leaving `inflight`.
                    if let Some(hit) = self.cached(component) {
                        return hit;
                    }
                    let cell = Arc::new(OnceCell::new());
                    inflight.insert(component.to_owned(), cell.clone());
                    cell
                }
            }
        };
        // If the caller running the lookup is cancelled, a waiting one takes it over.
        let (result, ttl) = cell.get_or_init(|| self.resolve(component)).await.clone();
        let mut inflight = self.inflight.lock().unwrap_or_else(PoisonError::into_inner);
        if inflight.get(component).is_some_and(|current| Arc::ptr_eq(current, &cell)) {
            let mut cache = self.cache.write().unwrap_or_else(PoisonError::into_inner);
            let now = Instant::now();
            if cache.len() >= CACHE_PRUNE_AT {
                cache.retain(|_, cached| cached.expires > now);
            }
            cache.insert(component.to_owned(), Cached { result: result.clone(), expires: now + ttl });
            inflight.remove(component);
        }
        result
    }

    fn cached(&self, component: &str) -> Option<Lookup> {
        let cache = self.cache.read().unwrap_or_else(PoisonError::into_inner);
        cache.get(component).filter(|cached| cached.expires > Instant::now()).map(|cached| cached.result.clone())
    }

    fn absent(&self, component: &str) -> Lookup {
        if self.require_schema {
            Err(SchemaError::NotFound(format!("component '{component}' has no schema and schemas are required")))
        } else {
            Ok(self.envelope_only.clone())
        }
    }

    /// Redis, then the base URL; returns the result and how long to cache it.
    async fn resolve(&self, component: &str) -> (Lookup, Duration) {
        if let Some(redis) = &self.redis {
            let mut cmd = redis::cmd("GET");
            cmd.arg(component);
            match redis.query::<Option<String>>(cmd).await {
                Ok(Some(text)) => match serde_json::from_str::<Value>(&text) {
                    Ok(schema) => {
                        return (self.compile_for(component, schema, "schema cached in redis"), self.cache_ttl);
                    }
                    Err(e) => tracing::warn!(component, error = %e, "ignoring unparseable schema cached in redis"),
                },
                Ok(None) => {}
                // The store logs the outage once; a cache that is down is a cache miss.
                Err(e) => tracing::debug!(component, error = %e, "redis schema cache skipped"),
            }
        }
        let Some(base_url) = &self.base_url else {
            return (self.absent(component), self.cache_ttl);
        };
        let url = format!("{base_url}/{component}/schema");
        match self.fetch(&url).await {
            Ok(Some(schema)) => {
                let result = self.compile_for(component, schema, &format!("schema from {url}"));
                if let (Ok(compiled), Some(redis)) = (&result, &self.redis)
                    && let Some(schema) = &compiled.source
                {
                    let mut cmd = redis::cmd("SET");
                    cmd.arg(component).arg(schema.to_string()).arg("PX").arg(self.cache_ttl.as_millis().max(1) as u64);
                    if let Err(e) = redis.query::<()>(cmd).await {
                        tracing::debug!(component, error = %e, "schema not stored in redis");
                    }
                }
                (result, self.cache_ttl)
            }
            Ok(None) => (self.absent(component), self.cache_ttl),
            Err(message) if self.require_schema => (Err(SchemaError::Fetch(message)), ERROR_TTL.min(self.cache_ttl)),
            Err(message) => {
                tracing::warn!(component, error = %message, "schema fetch failed; validating the envelope only");
                (Ok(self.envelope_only.clone()), ERROR_TTL.min(self.cache_ttl))
            }
        }
    }

    /// GET under the fetch timeout. Ok(None): 404, the component has no schema there.
    async fn fetch(&self, url: &str) -> Result<Option<Value>, String> {
        let uri: hyper::Uri = url.parse().map_err(|e| format!("schema URL {url}: {e}"))?;
        let request = hyper::Request::get(uri)
            .header(hyper::header::ACCEPT, "application/json")
            .body(Empty::<Bytes>::new())
            .map_err(|e| format!("GET {url}: {e}"))?;
        let exchange = async {
            let response = self.http.request(request).await.map_err(|e| format!("GET {url}: {}", error_chain(&e)))?;
            let status = response.status();
            if status == hyper::StatusCode::NOT_FOUND {
                return Ok(None);
            }
            if !status.is_success() {
                return Err(format!("GET {url}: status {status}"));
            }
            let body = Limited::new(response.into_body(), MAX_SCHEMA_BYTES)
                .collect()
                .await
                .map_err(|e| format!("GET {url}: reading the body: {e}"))?
                .to_bytes();
            serde_json::from_slice(&body).map(Some).map_err(|e| format!("GET {url}: the body is not JSON: {e}"))
        };
        match tokio::time::timeout(self.fetch_timeout, exchange).await {
            Ok(outcome) => outcome,
            Err(_) => Err(format!("GET {url}: no answer within {} ms", self.fetch_timeout.as_millis())),
        }
    }

    fn load_folder(&self, dir: &Path) -> Result<HashMap<String, Arc<ComponentSchema>>, SchemaError> {
        let entries = std::fs::read_dir(dir)
            .map_err(|e| SchemaError::Invalid(format!("schema folder {}: {e}", dir.display())))?;
        let mut folder = HashMap::new();
        for entry in entries {
            let entry = entry.map_err(|e| SchemaError::Invalid(format!("schema folder {}: {e}", dir.display())))?;
            let path = entry.path();
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else { continue };
            let Some(stem) = name.strip_suffix(SCHEMA_SUFFIX) else { continue };
            if name == ENVELOPE_FILE || !path.is_file() {
                continue;
            }
            let component = stem.replace('.', "/");
            if !is_component_name(&component) {
                return Err(SchemaError::Invalid(format!(
                    "{}: '{stem}' is not a component name (ASCII letters, digits, _ and -; '.' separates subcomponents)",
                    path.display()
                )));
            }
            let text =
                std::fs::read_to_string(&path).map_err(|e| SchemaError::Invalid(format!("{}: {e}", path.display())))?;
            let schema: Value = serde_json::from_str(&text)
                .map_err(|e| SchemaError::Invalid(format!("{}: not JSON: {e}", path.display())))?;
            let compiled = self.compile_for(&component, schema, &path.display().to_string())?;
            folder.insert(component, compiled);
        }
        Ok(folder)
    }

    /// Compiles `schema` for a component, or reuses the compiled schema with the same content.
    fn compile_for(&self, component: &str, schema: Value, origin: &str) -> Lookup {
        let hash = fnv1a(&[&self.envelope_json, b"\n", schema.to_string().as_bytes()]);
        let same = |compiled: &HashMap<u64, Weak<ComponentSchema>>| {
            compiled.get(&hash).and_then(Weak::upgrade).filter(|existing| existing.source.as_ref() == Some(&schema))
        };
        if let Some(existing) = same(&self.compiled.lock().unwrap_or_else(PoisonError::into_inner)) {
            return Ok(existing);
        }
        // Compiled outside the lock: other components' lookups need not wait for this one.
        let validator = compile(&schema).map_err(|e| {
            SchemaError::Invalid(format!("{origin}: the schema for component '{component}' does not compile: {e}"))
        })?;
        let mut compiled = self.compiled.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(existing) = same(&compiled) {
            return Ok(existing);
        }
        compiled.retain(|_, weak| weak.strong_count() > 0);
        let fresh = Arc::new(ComponentSchema {
            hash,
            envelope: self.envelope.clone(),
            data: Some(validator),
            source: Some(schema),
        });
        compiled.insert(hash, Arc::downgrade(&fresh));
        Ok(fresh)
    }
}

/// Compiles with formats enforced (`date-time` in the envelope must mean something) and retrieval refused, so a
/// `$ref` to a file or URL is a compile error even if a resolve feature of jsonschema gets enabled elsewhere.
fn compile(schema: &Value) -> Result<jsonschema::Validator, String> {
    jsonschema::options().offline().should_validate_formats(true).build(schema).map_err(|e| {
        let at = e.instance_path().as_str();
        if at.is_empty() { e.to_string() } else { format!("at {at}: {e}") }
    })
}

/// `None` for an empty URL (configured but blank means not configured).
fn check_base_url(url: &str) -> Result<Option<String>, SchemaError> {
    let trimmed = url.trim().trim_end_matches('/');
    if trimmed.is_empty() {
        return Ok(None);
    }
    let scheme = trimmed.split_once("://").map(|(scheme, _)| scheme.to_ascii_lowercase());
    match scheme.as_deref() {
        Some("http") => {}
        Some("https") => {
            return Err(SchemaError::Fetch(format!(
                "schema base URL {trimmed}: https is not supported because TLS is not built into scribe-rs; \
                 use an http:// URL (for example a local TLS-terminating proxy)"
            )));
        }
        _ => return Err(SchemaError::Fetch(format!("schema base URL {trimmed}: must start with http://"))),
    }
    match trimmed.parse::<hyper::Uri>() {
        Ok(uri) if uri.host().is_some() && uri.query().is_none() => Ok(Some(trimmed.to_owned())),
        Ok(_) => Err(SchemaError::Fetch(format!("schema base URL {trimmed}: needs a host and no query"))),
        Err(e) => Err(SchemaError::Fetch(format!("schema base URL {trimmed}: {e}"))),
    }
}

/// Names that are safe as a file stem, a Redis key and a URL path: `seg(/seg)*`, seg = `[A-Za-z0-9_-]+`.
fn is_component_name(component: &str) -> bool {
    !component.is_empty()
        && component.split('/').all(|segment| {
            !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        })
}

fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in parts.iter().flat_map(|part| part.iter()) {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// hyper-util's client error says only "client error (Connect)"; the cause is further down the chain.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let _ = write!(text, ": {cause}");
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn repo_schemas() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schemas")
    }

    fn config() -> SchemaConfig {
        SchemaConfig {
            dir: None,
            base_url: None,
            require_schema: false,
            redis: None,
            fetch_timeout: Duration::from_secs(2),
        }
    }

    fn record(data: Value) -> Value {
        json!({
            "data": data,
            "date_created": "2024-05-01T10:00:00.000Z",
            "date_modified": "2024-05-01T10:00:00.000Z",
            "created_by": 1,
            "modified_by": 2
        })
    }

    fn folder(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        dir
    }

    fn joined(result: Result<(), Vec<String>>) -> String {
        result.unwrap_err().join("\n")
    }

    /// A tiny HTTP/1.1 server: answers each request from `routes` (path → status, body), 404 otherwise, after
    /// `delay`; counts requests. `hang` makes it accept and never answer.
    struct SchemaServer {
        base_url: String,
        hits: Arc<AtomicUsize>,
        routes: Arc<Mutex<HashMap<String, (u16, String)>>>,
    }

    impl SchemaServer {
        async fn start(delay: Duration, hang: bool) -> SchemaServer {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let base_url = format!("http://{}", listener.local_addr().unwrap());
            let hits = Arc::new(AtomicUsize::new(0));
            let routes: Arc<Mutex<HashMap<String, (u16, String)>>> = Arc::default();
            let (server_hits, server_routes) = (hits.clone(), routes.clone());
            tokio::spawn(async move {
                loop {
                    let Ok((mut socket, _)) = listener.accept().await else { return };
                    let (hits, routes) = (server_hits.clone(), server_routes.clone());
                    tokio::spawn(async move {
                        let mut request = Vec::new();
                        let mut buf = [0u8; 4096];
                        while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                            match socket.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => request.extend_from_slice(&buf[..n]),
                            }
                        }
                        hits.fetch_add(1, Ordering::SeqCst);
                        if hang {
                            tokio::time::sleep(Duration::from_secs(3600)).await;
                        }
                        tokio::time::sleep(delay).await;
                        let text = String::from_utf8_lossy(&request);
                        let path = text.split(' ').nth(1).unwrap_or("").to_owned();
                        let (status, body) =
                            routes.lock().unwrap().get(&path).cloned().unwrap_or((404, "{\"error\":\"no\"}".into()));
                        let response = format!(
                            "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                             Connection: close\r\n\r\n{body}",
                            body.len()
                        );
                        let _ = socket.write_all(response.as_bytes()).await;
                        let _ = socket.shutdown().await;
                    });
                }
            });
            SchemaServer { base_url, hits, routes }
        }

        fn serve(&self, path: &str, status: u16, body: &Value) {
            self.routes.lock().unwrap().insert(path.to_owned(), (status, body.to_string()));
        }

        fn hits(&self) -> usize {
            self.hits.load(Ordering::SeqCst)
        }
    }

    fn widget_schema() -> Value {
        json!({"type": "object", "properties": {"size": {"type": "integer"}}, "required": ["size"]})
    }

    async fn redis_store(redis: &testkit::Redis, timeout: Duration) -> Arc<bounded_redis::RedisStore> {
        let url = redis.url();
        let url = format!("{}/1", url.strip_suffix("/0").unwrap());
        Arc::new(bounded_redis::RedisStore::new(&url, timeout).unwrap())
    }

    #[tokio::test]
    async fn envelope_accepts_valid_and_rejects_bad_records_readably() {
        let schema = Registry::new(config()).unwrap().get("anything").await.unwrap();
        assert!(!schema.has_component_schema());
        schema.validate(&record(json!({"free": ["form"]}))).unwrap();

        let mut missing = record(json!({}));
        missing.as_object_mut().unwrap().remove("date_modified");
        let message = joined(schema.validate(&missing));
        assert!(message.contains("/: \"date_modified\" is a required property"), "{message}");

        let mut extra = record(json!({}));
        extra["id"] = json!(7);
        let message = joined(schema.validate(&extra));
        assert!(message.contains("Additional properties are not allowed ('id' was unexpected)"), "{message}");

        let mut wrong = record(json!([1, 2]));
        wrong["created_by"] = json!("alice");
        wrong["modified_by"] = json!(1.5);
        wrong["date_created"] = json!("yesterday");
        let messages = schema.validate(&wrong).unwrap_err();
        let message = messages.join("\n");
        assert_eq!(messages.len(), 4, "{message}");
        assert!(message.contains("/data: value is not of type \"object\""), "{message}");
        assert!(message.contains("/created_by: value is not of type \"integer\""), "{message}");
        assert!(message.contains("/modified_by: value is not of type \"integer\""), "{message}");
        assert!(message.contains("/date_created: value is not a \"date-time\""), "{message}");
        assert!(!message.contains("alice"), "values are not echoed: {message}");

        let message = joined(schema.validate(&json!("not an object")));
        assert!(message.starts_with("/: value is not of type \"object\""), "{message}");
    }

    #[tokio::test]
    async fn notes_data_is_validated_by_the_shipped_schema() {
        let registry = Registry::new(SchemaConfig { dir: Some(repo_schemas()), ..config() }).unwrap();
        assert!(registry.folder_components().contains(&"notes"));
        assert!(!registry.folder_components().contains(&"default/table"), "the envelope is not a component");
        let notes = registry.get("notes").await.unwrap();
        assert!(notes.has_component_schema());
        let good = json!({"title": "t", "body": "b", "tags": ["x"], "ids": [1, 3], "parent": null, "extra": {"k": 1}});
        notes.validate(&record(good)).unwrap();
        notes.validate(&record(json!({}))).unwrap();
        notes.validate(&record(json!({"ids": [3], "parent": 4}))).unwrap();

        let message = joined(notes.validate(&record(json!({"title": 5, "ids": [1, "two"], "tags": "x"}))));
        assert!(message.contains("/data/title: value is not of type \"string\""), "{message}");
        assert!(message.contains("/data/ids/1: value is not of type \"integer\""), "{message}");
        assert!(message.contains("/data/tags: value is not of type \"array\""), "{message}");

        // The envelope is checked first; a broken envelope reports envelope problems.
        let message = joined(notes.validate(&json!({"data": {"title": 5}})));
        assert!(message.contains("is a required property") && !message.contains("/data/title"), "{message}");
        // `/notes/` and `notes` are the same component.
        assert!(Arc::ptr_eq(&registry.get("/notes/").await.unwrap(), &notes));
    }

    #[tokio::test]
    async fn folder_discovery_maps_files_to_components() {
        let dir = folder(&[
            ("a.schema.json", r#"{"type":"object","required":["a"]}"#),
            ("a.b.schema.json", r#"{"type":"object","required":["b"]}"#),
            ("default.table.schema.json", r#"{"type":"object","required":["never"]}"#),
            ("README.md", "not a schema"),
            ("other.json", "{not json"),
        ]);
        std::fs::create_dir(dir.path().join("a")).unwrap();
        std::fs::write(dir.path().join("a/c.schema.json"), r#"{"required":["c"]}"#).unwrap();
        let registry = Registry::new(SchemaConfig { dir: Some(dir.path().into()), ..config() }).unwrap();
        assert_eq!(registry.folder_components(), ["a", "a/b"]);

        let a = registry.get("a").await.unwrap();
        let message = joined(a.validate(&record(json!({"b": 1}))));
        assert!(message.contains("/data: \"a\" is a required property"), "{message}");
        let ab = registry.get("a/b").await.unwrap();
        ab.validate(&record(json!({"b": 1}))).unwrap();
        assert!(ab.validate(&record(json!({"a": 1}))).is_err());
        // Subdirectories are not read: a/c has no schema, so only the envelope applies.
        assert!(!registry.get("a/c").await.unwrap().has_component_schema());
        // default.table.schema.json in the folder is the envelope's name, not a component, and does not replace it.
        registry.get("a").await.unwrap().validate(&record(json!({"a": 1}))).unwrap();
    }

    #[tokio::test]
    async fn bad_folder_files_stop_startup_naming_the_file() {
        for (name, text, expected) in [
            ("broken.schema.json", "{not json", "not JSON"),
            ("typed.schema.json", r#"{"type": 5}"#, "does not compile"),
            ("bad name.schema.json", "{}", "is not a component name"),
        ] {
            let dir = folder(&[("fine.schema.json", "{}"), (name, text)]);
            let error = Registry::new(SchemaConfig { dir: Some(dir.path().into()), ..config() }).err().unwrap();
            let message = error.to_string();
            assert!(matches!(error, SchemaError::Invalid(_)), "{message}");
            assert!(message.contains(name) && message.contains(expected), "{message}");
        }
        let missing = Registry::new(SchemaConfig { dir: Some("/nonexistent/schemas".into()), ..config() });
        assert!(missing.err().unwrap().to_string().contains("/nonexistent/schemas"));
    }

    #[tokio::test]
    async fn same_content_is_compiled_once() {
        let same = r#"{"type":"object","properties":{"n":{"type":"integer"}}}"#;
        let dir = folder(&[
            ("x.schema.json", same),
            // Same JSON, other whitespace: same content.
            ("y.schema.json", "{ \"type\": \"object\",\n \"properties\": {\"n\": {\"type\": \"integer\"}} }"),
            ("z.schema.json", r#"{"type":"object","properties":{"n":{"type":"string"}}}"#),
        ]);
        let registry = Registry::new(SchemaConfig { dir: Some(dir.path().into()), ..config() }).unwrap();
        let x = registry.get("x").await.unwrap();
        let y = registry.get("y").await.unwrap();
        let z = registry.get("z").await.unwrap();
        assert!(Arc::ptr_eq(&x, &y));
        assert_eq!(x.hash(), y.hash());
        assert_ne!(x.hash(), z.hash());
        assert!(Arc::ptr_eq(&x, &registry.get("x").await.unwrap()));
        let envelope_only = registry.get("none").await.unwrap();
        assert!(Arc::ptr_eq(&envelope_only, &registry.get("other").await.unwrap()));
        assert_ne!(envelope_only.hash(), x.hash());

        // The hash depends on content only, so another process (or registry) computes the same one.
        let again = Registry::new(SchemaConfig { dir: Some(dir.path().into()), ..config() }).unwrap();
        assert_eq!(again.get("x").await.unwrap().hash(), x.hash());
        assert_eq!(again.get("none").await.unwrap().hash(), envelope_only.hash());
    }

    #[tokio::test]
    async fn base_url_schemas_are_fetched_once_and_cached() {
        let server = SchemaServer::start(Duration::ZERO, false).await;
        server.serve("/widgets/schema", 200, &widget_schema());
        server.serve("/gadgets/schema", 200, &widget_schema());
        server.serve("/shop/items/schema", 200, &json!({"required": ["sku"]}));
        let registry =
            Registry::new(SchemaConfig { base_url: Some(format!("{}/", server.base_url)), ..config() }).unwrap();

        let widgets = registry.get("widgets").await.unwrap();
        widgets.validate(&record(json!({"size": 3}))).unwrap();
        let message = joined(widgets.validate(&record(json!({"size": "big"}))));
        assert!(message.contains("/data/size: value is not of type \"integer\""), "{message}");
        assert!(Arc::ptr_eq(&widgets, &registry.get("widgets").await.unwrap()));
        assert_eq!(server.hits(), 1, "the second get is served from the process cache");

        // Another component with the same content shares the compiled schema.
        assert!(Arc::ptr_eq(&widgets, &registry.get("gadgets").await.unwrap()));
        // Subcomponents map to nested paths.
        let items = registry.get("shop/items").await.unwrap();
        assert!(items.validate(&record(json!({}))).is_err());
        // 404: no schema there, the envelope applies; remembered too.
        assert!(!registry.get("plain").await.unwrap().has_component_schema());
        assert!(!registry.get("plain").await.unwrap().has_component_schema());
        assert_eq!(server.hits(), 4);
        // Names that cannot be components are never fetched.
        assert!(!registry.get("../etc").await.unwrap().has_component_schema());
        assert!(!registry.get("a?b").await.unwrap().has_component_schema());
        assert_eq!(server.hits(), 4);
    }

    #[tokio::test]
    async fn concurrent_first_requests_share_one_fetch_and_compile() {
        let server = SchemaServer::start(Duration::from_millis(200), false).await;
        server.serve("/widgets/schema", 200, &widget_schema());
        let registry =
            Arc::new(Registry::new(SchemaConfig { base_url: Some(server.base_url.clone()), ..config() }).unwrap());
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..32 {
            let registry = registry.clone();
            tasks.spawn(async move { registry.get("widgets").await.unwrap() });
        }
        let schemas = tasks.join_all().await;
        assert_eq!(server.hits(), 1);
        assert!(schemas.iter().all(|schema| Arc::ptr_eq(schema, &schemas[0])));
    }

    #[tokio::test]
    async fn fetched_schemas_expire_so_changes_are_picked_up() {
        let server = SchemaServer::start(Duration::ZERO, false).await;
        server.serve("/widgets/schema", 200, &widget_schema());
        let registry = Registry::new(SchemaConfig { base_url: Some(server.base_url.clone()), ..config() })
            .unwrap()
            .with_cache_ttl(Duration::from_secs(1));
        let first = registry.get("widgets").await.unwrap();
        assert!(first.validate(&record(json!({}))).is_err());

        server.serve("/widgets/schema", 200, &json!({"type": "object"}));
        assert!(Arc::ptr_eq(&first, &registry.get("widgets").await.unwrap()), "still cached");
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let second = registry.get("widgets").await.unwrap();
        second.validate(&record(json!({}))).unwrap();
        assert_ne!(first.hash(), second.hash());
        assert_eq!(server.hits(), 2);
    }

    #[tokio::test]
    async fn require_schema_refuses_components_without_one() {
        let dir = folder(&[("notes.schema.json", "{}")]);
        let registry =
            Registry::new(SchemaConfig { dir: Some(dir.path().into()), require_schema: true, ..config() }).unwrap();
        assert!(registry.get("notes").await.unwrap().has_component_schema());
        let error = registry.get("ghosts").await.err().unwrap();
        assert!(matches!(error, SchemaError::NotFound(_)), "{error}");
        assert!(error.to_string().contains("ghosts"), "{error}");

        // Same with a base URL that answers 404.
        let server = SchemaServer::start(Duration::ZERO, false).await;
        let registry =
            Registry::new(SchemaConfig { base_url: Some(server.base_url.clone()), require_schema: true, ..config() })
                .unwrap();
        assert!(matches!(registry.get("ghosts").await, Err(SchemaError::NotFound(_))));

        // Without require_schema the envelope alone applies.
        let registry = Registry::new(config()).unwrap();
        let schema = registry.get("ghosts").await.unwrap();
        assert!(!schema.has_component_schema());
        schema.validate(&record(json!({"anything": true}))).unwrap();
        assert!(schema.validate(&json!({"data": {}})).is_err());
    }

    #[tokio::test]
    async fn base_url_failures_are_fetch_errors_when_required() {
        // Hung: accepts and never answers.
        let hung = SchemaServer::start(Duration::ZERO, true).await;
        let fetch_timeout = Duration::from_millis(300);
        let required = Registry::new(SchemaConfig {
            base_url: Some(hung.base_url.clone()),
            require_schema: true,
            fetch_timeout,
            ..config()
        })
        .unwrap();
        let outcome = tokio::time::timeout(Duration::from_secs(5), required.get("widgets")).await.unwrap();
        let error = outcome.err().unwrap();
        assert!(matches!(error, SchemaError::Fetch(_)) && error.to_string().contains("no answer"), "{error}");
        // Remembered briefly: the next request does not wait for another timeout.
        let hits = hung.hits();
        assert!(matches!(required.get("widgets").await, Err(SchemaError::Fetch(_))));
        assert_eq!(hung.hits(), hits);

        let optional =
            Registry::new(SchemaConfig { base_url: Some(hung.base_url.clone()), fetch_timeout, ..config() }).unwrap();
        let schema = tokio::time::timeout(Duration::from_secs(5), optional.get("widgets")).await.unwrap().unwrap();
        assert!(!schema.has_component_schema());

        // Refused connection, and a 500.
        let closed = format!("http://127.0.0.1:{}", testkit::free_port());
        let registry =
            Registry::new(SchemaConfig { base_url: Some(closed), require_schema: true, ..config() }).unwrap();
        let error = registry.get("widgets").await.err().unwrap();
        assert!(matches!(error, SchemaError::Fetch(_)), "{error}");
        assert!(error.to_string().contains("refused"), "{error}");

        let server = SchemaServer::start(Duration::ZERO, false).await;
        server.serve("/widgets/schema", 500, &json!({}));
        server.serve("/junk/schema", 200, &json!("x"));
        let registry =
            Registry::new(SchemaConfig { base_url: Some(server.base_url.clone()), require_schema: true, ..config() })
                .unwrap();
        let error = registry.get("widgets").await.err().unwrap();
        assert!(error.to_string().contains("status 500"), "{error}");
        // A string is not a schema.
        assert!(matches!(registry.get("junk").await, Err(SchemaError::Invalid(_))));
    }

    #[tokio::test]
    async fn https_base_url_is_refused_with_a_clear_reason() {
        for url in ["https://schemas.example.com", "HTTPS://schemas.example.com/v1/"] {
            let error = Registry::new(SchemaConfig { base_url: Some(url.into()), ..config() }).err().unwrap();
            assert!(matches!(error, SchemaError::Fetch(_)), "{error}");
            assert!(error.to_string().contains("TLS is not built in"), "{error}");
        }
        let error = Registry::new(SchemaConfig { base_url: Some("ftp://x".into()), ..config() }).err().unwrap();
        assert!(error.to_string().contains("must start with http://"), "{error}");
        // Blank means not configured.
        assert!(Registry::new(SchemaConfig { base_url: Some(" ".into()), ..config() }).is_ok());
    }

    #[tokio::test]
    async fn remote_refs_are_refused() {
        for reference in ["http://127.0.0.1:9/schema.json", "file:///etc/passwd", "other.schema.json"] {
            let schema = json!({"type": "object", "properties": {"x": {"$ref": reference}}});
            let error = compile(&schema).err().unwrap();
            assert!(error.contains(reference), "{error}");

            let dir = folder(&[("remote.schema.json", &schema.to_string())]);
            let error = Registry::new(SchemaConfig { dir: Some(dir.path().into()), ..config() }).err().unwrap();
            assert!(matches!(error, SchemaError::Invalid(_)), "{error}");
            assert!(error.to_string().contains("remote.schema.json"), "{error}");
        }
        // Local refs are fine.
        let local = json!({"$defs": {"n": {"type": "integer"}}, "properties": {"x": {"$ref": "#/$defs/n"}}});
        assert!(compile(&local).is_ok());

        // From the base URL: refused, and it is not cached in Redis or followed.
        let server = SchemaServer::start(Duration::ZERO, false).await;
        server.serve("/remote/schema", 200, &json!({"$ref": format!("{}/other/schema", server.base_url)}));
        server.serve("/other/schema", 200, &json!({"type": "object"}));
        let registry = Registry::new(SchemaConfig { base_url: Some(server.base_url.clone()), ..config() }).unwrap();
        let error = registry.get("remote").await.err().unwrap();
        assert!(matches!(error, SchemaError::Invalid(_)), "{error}");
        assert!(error.to_string().contains("Retrieval is disabled"), "{error}");
        assert_eq!(server.hits(), 1, "the $ref was not followed");
    }

    #[tokio::test]
    async fn fetched_schemas_are_cached_in_redis_db_1() {
        let redis = testkit::Redis::start();
        let store = redis_store(&redis, Duration::from_millis(500)).await;
        let server = SchemaServer::start(Duration::ZERO, false).await;
        server.serve("/widgets/schema", 200, &widget_schema());
        server.serve("/shop/items/schema", 200, &json!({"required": ["sku"]}));
        let registry = Registry::new(SchemaConfig {
            base_url: Some(server.base_url.clone()),
            redis: Some(store.clone()),
            ..config()
        })
        .unwrap();
        registry.get("widgets").await.unwrap();
        registry.get("shop/items").await.unwrap();
        assert_eq!(server.hits(), 2);

        let mut get = redis::cmd("GET");
        get.arg("widgets");
        let cached: String = store.query(get).await.unwrap();
        assert_eq!(serde_json::from_str::<Value>(&cached).unwrap(), widget_schema());
        let mut ttl = redis::cmd("PTTL");
        ttl.arg("shop/items");
        let ttl: i64 = store.query(ttl).await.unwrap();
        assert!(ttl > 0 && ttl <= DEFAULT_CACHE_TTL.as_millis() as i64, "entries expire: {ttl}");
        // db 1, not db 0.
        let db0 = bounded_redis::RedisStore::new(&redis.url(), Duration::from_millis(500)).unwrap();
        let mut exists = redis::cmd("EXISTS");
        exists.arg("widgets");
        assert_eq!(db0.query::<i64>(exists).await.unwrap(), 0);

        // A fresh registry (another instance) finds it in Redis, even with the base URL now failing.
        server.serve("/widgets/schema", 500, &json!({}));
        let other = Registry::new(SchemaConfig {
            base_url: Some(server.base_url.clone()),
            redis: Some(store.clone()),
            require_schema: true,
            ..config()
        })
        .unwrap();
        let widgets = other.get("widgets").await.unwrap();
        assert!(widgets.validate(&record(json!({"size": "big"}))).is_err());
        assert_eq!(server.hits(), 2);

        // A schema put in Redis by someone else is used too; junk in Redis is a miss.
        let mut set = redis::cmd("SET");
        set.arg("seeded").arg(json!({"required": ["seed"]}).to_string());
        store.query::<()>(set).await.unwrap();
        let mut set = redis::cmd("SET");
        set.arg("junk").arg("{not json");
        store.query::<()>(set).await.unwrap();
        let registry = Registry::new(SchemaConfig { redis: Some(store.clone()), ..config() }).unwrap();
        let seeded = registry.get("seeded").await.unwrap();
        assert!(seeded.validate(&record(json!({}))).is_err());
        seeded.validate(&record(json!({"seed": 1}))).unwrap();
        assert!(!registry.get("junk").await.unwrap().has_component_schema());
    }

    #[tokio::test]
    async fn frozen_redis_does_not_hold_up_lookups() {
        let redis = testkit::Redis::start();
        let store = redis_store(&redis, Duration::from_millis(200)).await;
        store.ping().await.unwrap();
        redis.freeze();

        let server = SchemaServer::start(Duration::ZERO, false).await;
        server.serve("/widgets/schema", 200, &widget_schema());
        let dir = folder(&[("notes.schema.json", r#"{"required":["title"]}"#)]);
        let registry = Registry::new(SchemaConfig {
            dir: Some(dir.path().into()),
            base_url: Some(server.base_url.clone()),
            redis: Some(store.clone()),
            require_schema: true,
            fetch_timeout: Duration::from_secs(1),
        })
        .unwrap();
        let bound = Duration::from_secs(3);
        let notes = tokio::time::timeout(bound, registry.get("notes")).await.unwrap().unwrap();
        assert!(notes.has_component_schema());
        let widgets = tokio::time::timeout(bound, registry.get("widgets")).await.unwrap().unwrap();
        assert!(widgets.validate(&record(json!({"size": "big"}))).is_err());
        assert_eq!(server.hits(), 1);
        assert!(!store.is_healthy());

        // Never connected before the freeze: the lazy connect is bounded too.
        let fresh = redis_store(&redis, Duration::from_millis(200)).await;
        let registry = Registry::new(SchemaConfig {
            base_url: Some(server.base_url.clone()),
            redis: Some(fresh),
            require_schema: true,
            ..config()
        })
        .unwrap();
        tokio::time::timeout(bound, registry.get("widgets")).await.unwrap().unwrap();
        redis.thaw();
    }
}
