//! The workloads: what each loads (path, method, body, connections), which answers count, and the probe set
//! every runtime must answer exactly as the reference (rust) does before it is timed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};

use crate::plan::site::{DEEP_LINK, Site};
use crate::system::http;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Flight,
    Scribe,
    Metadata,
    /// ladder-rs and its peers: one server, one route per rung.
    Ladder,
}

/// Flight's middleware profiles (flight-rs's FLIGHT_MIDDLEWARE, the peers' FLIGHT_PROFILE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlightProfile {
    /// No middleware: the route table alone.
    Bare,
    /// Security headers, CORS, compression.
    Default,
    /// Default's layers plus rate limit, sessions and a response cache in Redis.
    Production,
}

impl FlightProfile {
    pub fn as_str(self) -> &'static str {
        match self {
            FlightProfile::Bare => "bare",
            FlightProfile::Default => "default",
            FlightProfile::Production => "production",
        }
    }
}

/// A workload: what is loaded, on which service. Its name is its identity in records and on the command
/// line; everything compare decides per workload is a property here, so no other module compares names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Workload {
    HelloBare,
    HelloDefault,
    HelloProduction,
    Json2k,
    Static,
    NotesRead,
    NotesWrite,
    Metadata,
    LadderEmpty,
    LadderValidate,
    LadderSqlite,
    LadderPostgres,
}

impl Workload {
    /// Every workload, in the order `all` gives and the report lists them.
    pub const ALL: [Workload; 12] = [
        Workload::HelloBare,
        Workload::HelloDefault,
        Workload::HelloProduction,
        Workload::Json2k,
        Workload::Static,
        Workload::NotesRead,
        Workload::NotesWrite,
        Workload::Metadata,
        Workload::LadderEmpty,
        Workload::LadderValidate,
        Workload::LadderSqlite,
        Workload::LadderPostgres,
    ];

    /// The ladder's rungs, each adding per-request work to the one before.
    pub const LADDER: [Workload; 4] =
        [Workload::LadderEmpty, Workload::LadderValidate, Workload::LadderSqlite, Workload::LadderPostgres];

    pub fn name(self) -> &'static str {
        match self {
            Workload::HelloBare => "hello-bare",
            Workload::HelloDefault => "hello-default",
            Workload::HelloProduction => "hello-production",
            Workload::Json2k => "json-2k",
            Workload::Static => "static",
            Workload::NotesRead => "notes-read",
            Workload::NotesWrite => "notes-write",
            Workload::Metadata => "metadata",
            Workload::LadderEmpty => "ladder-empty",
            Workload::LadderValidate => "ladder-validate",
            Workload::LadderSqlite => "ladder-sqlite",
            Workload::LadderPostgres => "ladder-postgres",
        }
    }

    pub fn parse(name: &str) -> Option<Workload> {
        Workload::ALL.into_iter().find(|w| w.name() == name)
    }

    pub fn service(self) -> Service {
        match self {
            Workload::HelloBare
            | Workload::HelloDefault
            | Workload::HelloProduction
            | Workload::Json2k
            | Workload::Static => Service::Flight,
            Workload::NotesRead | Workload::NotesWrite => Service::Scribe,
            Workload::Metadata => Service::Metadata,
            Workload::LadderEmpty | Workload::LadderValidate | Workload::LadderSqlite | Workload::LadderPostgres => {
                Service::Ladder
            }
        }
    }

    /// flight-rs's middleware profile on a Flight workload; the peers run the same layers.
    pub fn flight_profile(self) -> Option<FlightProfile> {
        match self {
            Workload::HelloBare => Some(FlightProfile::Bare),
            Workload::HelloDefault | Workload::Json2k => Some(FlightProfile::Default),
            Workload::HelloProduction | Workload::Static => Some(FlightProfile::Production),
            _ => None,
        }
    }

    /// A Flight workload with Flight's middleware on (default or production), the one flight-node can run.
    pub fn has_flight_middleware(self) -> bool {
        matches!(self.flight_profile(), Some(FlightProfile::Default | FlightProfile::Production))
    }

    /// Connections under load, unless `--connections` says otherwise.
    pub fn connections(self) -> u32 {
        match self {
            Workload::NotesWrite => 50,
            Workload::Metadata => 128,
            _ => 100,
        }
    }

    /// Statuses outside 2xx that are answers, not failures (metadata's absent sample ids).
    pub fn also_ok(self) -> &'static [u16] {
        if self == Workload::Metadata { &[404] } else { &[] }
    }

    /// Compare content types without parameters: the Scribe peers send express's `; charset=utf-8` and the
    /// real Flight Koa's, which their clients ignore; the media type itself must still match.
    pub fn content_type_essence(self) -> bool {
        matches!(
            self,
            Workload::HelloDefault
                | Workload::HelloProduction
                | Workload::Json2k
                | Workload::Static
                | Workload::NotesRead
                | Workload::NotesWrite
        )
    }

    /// The ladder's rung name (`empty`, `validate`, `sqlite`, `postgres`), on a ladder workload.
    pub fn rung(self) -> Option<&'static str> {
        (self.service() == Service::Ladder).then(|| self.name().trim_start_matches("ladder-"))
    }

    /// Whether its servers query PostgreSQL (every ladder rung is handed the database; only this one reads it).
    pub fn queries_postgres(self) -> bool {
        matches!(self, Workload::NotesRead | Workload::NotesWrite | Workload::LadderPostgres)
    }

    /// Whether its servers read the generated metadata dataset (the ladder's SQLite rung reads it too).
    pub fn needs_metadata_dataset(self) -> bool {
        matches!(self.service(), Service::Metadata | Service::Ladder)
    }

    /// Whether it serves the built SPA.
    pub fn needs_site(self) -> bool {
        self == Workload::Static
    }

    /// Whether every response under load is one body, so loadgen can check each byte for byte against the
    /// reference's (the static mix has two, metadata many, notes-write a new id each).
    pub fn one_body_under_load(self) -> bool {
        matches!(self, Workload::HelloBare | Workload::HelloDefault | Workload::HelloProduction | Workload::NotesRead)
            || self.service() == Service::Ladder
    }

    /// The report's "same work" line: the layers each runtime runs per request on a workload, where the
    /// runtimes' stacks differ in form. The hello workloads' layers are listed per runtime in
    /// crates/compare/README.md.
    pub fn same_work(self) -> Option<&'static str> {
        Some(match self {
            Workload::HelloBare => {
                "every runtime answers from its route table with no middleware (koa: Koa 3 + @koa/router)."
            }
            Workload::HelloDefault => {
                "rust, bun and node run security headers, CORS and compression (bun and node as Flight's Bun build \
                 does: an onion of layers, gzip only; rust also speaks br and zstd, and a 32-byte body is under \
                 every threshold, so nothing is compressed). flight-node runs what Flight 2.0.2 runs in front of a \
                 backend route: koa-logger (to /dev/null), koa-session (Redis store; the route never touches it), \
                 @koa/cors and koa-bodyparser; it has no security headers."
            }
            Workload::HelloProduction => {
                "rust, bun and node: hello-default's layers plus a fixed-window rate limit, sessions and a response \
                 cache, all in Redis (each runtime on its own database), so after the first request the answer is \
                 a cache hit: two Redis round trips per request. flight-node: as in hello-default, because Flight \
                 mounts backend routes in front of its production middleware (compression, rate limit, koa-cash, \
                 static files), which never sees /api/hello."
            }
            Workload::Json2k => {
                "rust, bun and node run hello-default's layers on a 2,005-byte JSON body (GET /api/items), which \
                 they gzip (the load takes gzip only, so rust does not pick br). flight-node is not measured: \
                 Flight 2.0.2 mounts backend routes in front of koa-compress, so it cannot compress a backend's \
                 answer."
            }
            Workload::Static => {
                "every runtime serves a built SPA from one folder: a hashed 100 KB script through its \
                 precompressed .gz sibling, and a deep link answered with index.html, mixed at random. rust, bun \
                 and node run the production layers in front (rate limit, sessions and response cache in Redis, \
                 so a file comes from the cache). flight-node serves it through its production SPA pipeline \
                 (koa-static, then the index.html fallback, before compression, rate limit and koa-cash, so \
                 neither answer reaches Redis)."
            }
            _ => return None,
        })
    }
}

/// The names, for messages.
fn names() -> String {
    Workload::ALL.map(Workload::name).join(", ")
}

/// A comma list of workload names (`all` for every one), in the order given.
pub fn parse_list(text: &str) -> anyhow::Result<Vec<Workload>> {
    if text.trim() == "all" {
        return Ok(Workload::ALL.to_vec());
    }
    let mut out: Vec<Workload> = Vec::new();
    for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let Some(w) = Workload::parse(name) else { bail!("unknown workload {name:?}; choose from {}", names()) };
        if !out.contains(&w) {
            out.push(w);
        }
    }
    if out.is_empty() {
        bail!("no workload given; choose from {}", names());
    }
    Ok(out)
}

/// What a probe got back: the parts the runtimes must agree on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub content_type: Option<String>,
    /// Content-Encoding as sent; `body` is decoded.
    pub encoding: Option<String>,
    pub body: Vec<u8>,
}

impl Answer {
    /// An unencoded answer.
    pub fn new(status: u16, content_type: &str, body: &[u8]) -> Answer {
        Answer { status, content_type: Some(content_type.into()), encoding: None, body: body.to_vec() }
    }
}

/// An answer, or why there was none.
pub type Outcome = Result<Answer, String>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub label: String,
    pub method: &'static str,
    pub target: String,
    /// JSON request body.
    pub body: Option<Vec<u8>>,
    /// Request headers besides Host and Connection (Accept-Encoding: the answer is decoded before it is
    /// compared, since gzip bytes differ between libraries; the encoding itself is compared).
    pub headers: &'static [(&'static str, &'static str)],
    /// False where bodies legitimately differ (validation messages); status and content type still count.
    pub compare_body: bool,
    /// Only the status counts: error pages whose form is each framework's own (Koa's text/plain 404).
    pub status_only: bool,
    /// What the contract itself says, checked for every runtime (the reference included).
    pub contract: Option<Answer>,
}

impl Probe {
    pub fn get(label: impl Into<String>, target: impl Into<String>) -> Probe {
        Probe {
            label: label.into(),
            method: "GET",
            target: target.into(),
            body: None,
            headers: &[],
            compare_body: true,
            status_only: false,
            contract: None,
        }
    }

    /// The same probe with these request headers.
    pub fn with_headers(self, headers: &'static [(&'static str, &'static str)]) -> Probe {
        Probe { headers, ..self }
    }

    pub fn request_line(&self) -> String {
        format!("{} {}", self.method, self.target)
    }

    /// Sends the probe on a fresh connection; a gzip answer is decoded.
    pub fn ask(&self, port: u16) -> Outcome {
        let body = self.body.as_deref().map(|b| ("application/json", b));
        let r = http::request(port, self.method, &self.target, body, self.headers, Duration::from_secs(10))
            .map_err(|e| format!("request failed: {e}"))?;
        let encoding = r.header("content-encoding").map(str::to_ascii_lowercase);
        let content_type = r.header("content-type").map(str::to_string);
        let body = match encoding.as_deref() {
            None | Some("identity") => r.body,
            Some("gzip") => {
                let mut out = Vec::new();
                std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(r.body.as_slice()), &mut out)
                    .map_err(|e| format!("the gzip body does not decode: {e}"))?;
                out
            }
            // Nothing compare loads takes other encodings; an answer in one is a difference, not a decode.
            Some(_) => r.body,
        };
        Ok(Answer { status: r.status, content_type, encoding, body })
    }
}

/// How `got` differs from `want` for this probe, or `None` when they agree.
pub fn difference(probe: &Probe, got: &Outcome, want: &Outcome, content_type_essence: bool) -> Option<String> {
    let (got, want) = match (got, want) {
        (Err(e), _) => return Some(e.clone()),
        (Ok(_), Err(e)) => return Some(format!("the reference has no answer ({e})")),
        (Ok(g), Ok(w)) => (g, w),
    };
    let mut parts = Vec::new();
    if got.status != want.status {
        parts.push(format!("status {} (want {})", got.status, want.status));
    }
    if probe.status_only {
        return if parts.is_empty() { None } else { Some(parts.join("; ")) };
    }
    // RFC 9239: application/javascript is an obsolete alias of text/javascript (koa-send still sends it).
    let essence = |ct: &Option<String>| {
        ct.as_deref().map(|c| match c.split(';').next().unwrap_or("").trim().to_ascii_lowercase() {
            js if js == "application/javascript" => "text/javascript".to_string(),
            other => other,
        })
    };
    let ct_differs = if content_type_essence {
        essence(&got.content_type) != essence(&want.content_type)
    } else {
        got.content_type != want.content_type
    };
    if ct_differs {
        parts.push(format!("content-type {:?} (want {:?})", got.content_type, want.content_type));
    }
    if got.encoding != want.encoding {
        parts.push(format!("content-encoding {:?} (want {:?})", got.encoding, want.encoding));
    }
    if probe.compare_body && got.body != want.body {
        parts.push(first_difference(&got.body, &want.body));
    }
    if parts.is_empty() { None } else { Some(parts.join("; ")) }
}

/// Where two bodies part, with a little context from each.
pub fn first_difference(got: &[u8], want: &[u8]) -> String {
    let at = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()));
    let around = |b: &[u8]| {
        let lo = at.saturating_sub(30);
        let hi = (at + 40).min(b.len());
        String::from_utf8_lossy(&b[lo.min(hi)..hi]).into_owned()
    };
    format!(
        "body differs at byte {at} (got {} bytes, want {}): got …{:?}… want …{:?}…",
        got.len(),
        want.len(),
        around(got),
        around(want)
    )
}

/// How loadgen loads a workload: the request source and the per-response assertions.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadSpec {
    pub method: String,
    /// The URL's path, or with `vars` a `{var}` template.
    pub path: String,
    pub vars: Vec<String>,
    pub body_file: Option<PathBuf>,
    pub headers: Vec<String>,
    pub connections: u32,
    /// Statuses every response must have (`--expect-status`): 200, plus `also_ok`.
    pub expect_status: Vec<u16>,
    pub expect_body_file: Option<PathBuf>,
    pub expect_contains: Option<String>,
    /// Headers every response must carry (`--expect-header`, `Name: value`).
    pub expect_headers: Vec<String>,
}

impl LoadSpec {
    pub fn get(path: &str, connections: u32) -> LoadSpec {
        LoadSpec {
            method: "GET".into(),
            path: path.into(),
            vars: Vec::new(),
            body_file: None,
            headers: Vec::new(),
            connections,
            expect_status: vec![200],
            expect_body_file: None,
            expect_contains: None,
            expect_headers: Vec::new(),
        }
    }

    /// loadgen's request-source and assertion arguments, ending with the URL.
    pub fn loadgen_args(&self, port: u16) -> Vec<String> {
        let mut a: Vec<String> = Vec::new();
        let mut push = |xs: &[&str]| a.extend(xs.iter().map(|x| x.to_string()));
        if self.method != "GET" {
            push(&["-m", &self.method]);
        }
        let url = if self.vars.is_empty() {
            format!("http://127.0.0.1:{port}{}", self.path)
        } else {
            push(&["--path", &self.path, "--pick", "random", "--seed", "1"]);
            for v in &self.vars {
                push(&["--var", v]);
            }
            format!("http://127.0.0.1:{port}/")
        };
        if let Some(f) = &self.body_file {
            push(&["--body-file", &f.to_string_lossy()]);
        }
        for h in &self.headers {
            push(&["-H", h]);
        }
        let statuses = self.expect_status.iter().map(u16::to_string).collect::<Vec<_>>().join(",");
        push(&["--expect-status", &statuses]);
        if let Some(f) = &self.expect_body_file {
            push(&["--expect-body-file", &f.to_string_lossy()]);
        }
        if let Some(c) = &self.expect_contains {
            push(&["--expect-contains", c]);
        }
        for h in &self.expect_headers {
            push(&["--expect-header", h]);
        }
        push(&[&url]);
        a
    }
}

/// A workload ready to run: its data prepared, its probes and load known.
#[derive(Debug, Clone)]
pub struct Plan {
    pub workload: Workload,
    /// exec→first 200 is timed on this path; servers are ready when it answers 200.
    pub ready_path: String,
    pub probes: Vec<Probe>,
    /// The probe the floor is checked on and whose reference answer it serves.
    pub primary: usize,
    /// Sent once after the server is ready and before any load (creates notes-write's table outside the
    /// window); must answer 2xx.
    pub prime: Option<Probe>,
    pub load: LoadSpec,
}

pub const HELLO_BODY: &[u8] = br#"{"message":"Hello from Flight!"}"#;

/// The notes-write body: valid against the envelope and notes.schema.json.
pub const WRITE_BODY: &str = r#"{"data":{"title":"Load note","body":"Written under load by compare.","tags":["load"],"meta":{"words":6,"pinned":false}},"date_created":"2024-03-04T05:06:07.089Z","date_modified":"2024-03-04T05:06:07.089Z","created_by":7,"modified_by":7}"#;

/// Fails the envelope three ways: created_by missing, an extra property, data not an object.
const INVALID_BODY: &str =
    r#"{"data":[1],"date_created":"2024-01-01T00:00:00Z","date_modified":"yesterday","modified_by":1,"extra":true}"#;

const HEALTHZ: &str = "/healthz";

/// What the plans are built from besides the workload: the data compare prepared for this run.
#[derive(Debug, Clone, Copy)]
pub struct PlanInputs<'a> {
    /// The static workload's built SPA.
    pub site: Option<&'a Site>,
    /// The generated metadata dataset (metadata and the ladder).
    pub metadata: Option<&'a MetadataData>,
    /// Notes seeded for notes-read.
    pub seed_notes: u32,
    /// Where body files go.
    pub dir: &'a Path,
}

impl Plan {
    /// The plan for `workload`, from the data prepared for it.
    pub fn new(workload: Workload, inputs: &PlanInputs<'_>) -> anyhow::Result<Plan> {
        let metadata = || inputs.metadata.context("the metadata dataset");
        Ok(match workload {
            Workload::Json2k => Plan::json_2k(workload),
            Workload::Static => Plan::static_site(workload, inputs.site.context("the static site")?),
            Workload::HelloBare | Workload::HelloDefault | Workload::HelloProduction => Plan::hello(workload),
            Workload::NotesRead => Plan::notes_read(workload, inputs.seed_notes),
            Workload::NotesWrite => Plan::notes_write(workload, inputs.dir)?,
            Workload::Metadata => Plan::metadata(workload, metadata()?),
            Workload::LadderEmpty | Workload::LadderValidate | Workload::LadderSqlite | Workload::LadderPostgres => {
                Plan::ladder(workload, metadata()?, inputs.dir)?
            }
        })
    }

    pub fn hello(workload: Workload) -> Plan {
        let mut probe = Probe::get("hello", "/api/hello");
        probe.contract = Some(Answer::new(200, "application/json", HELLO_BODY));
        let mut load = LoadSpec::get("/api/hello", workload.connections());
        if workload.flight_profile() != Some(FlightProfile::Bare) {
            // What a browser sends: a cross-origin request, so CORS answers it, and the encodings it takes, so
            // compression decides (the hello body is under every runtime's 1,024-byte threshold).
            load.headers = vec!["Origin: http://app.example".into(), "Accept-Encoding: gzip, br".into()];
        }
        Plan { load, workload, ready_path: "/api/hello".into(), probes: vec![probe], primary: 0, prime: None }
    }

    /// GET /api/items (2,005 bytes of JSON) as a browser asks for it, so the answer is gzipped: the probes
    /// decode it and compare the encoding too.
    pub fn json_2k(workload: Workload) -> Plan {
        const GZIP: &[(&str, &str)] = &[("Origin", "http://app.example"), ("Accept-Encoding", "gzip")];
        let probes = vec![
            Probe::get("items, gzip", "/api/items").with_headers(GZIP),
            Probe::get("items, no Accept-Encoding", "/api/items"),
            // Under every threshold: no runtime compresses it.
            Probe::get("hello, gzip", "/api/hello").with_headers(GZIP),
        ];
        let mut load = LoadSpec::get("/api/items", workload.connections());
        load.headers = header_lines(GZIP);
        load.expect_headers = vec!["content-encoding: gzip".into()];
        Plan { load, workload, ready_path: "/api/items".into(), probes, primary: 0, prime: None }
    }

    /// A built SPA (`site`): its hashed script through the `.gz` sibling and a deep link answered with
    /// index.html, mixed at random under load.
    pub fn static_site(workload: Workload, site: &Site) -> Plan {
        const BROWSER: &[(&str, &str)] = &[("Accept", "text/html,*/*;q=0.8"), ("Accept-Encoding", "gzip, br")];
        let js = "text/javascript; charset=utf-8";
        let html = "text/html; charset=utf-8";
        let script = Answer { encoding: Some("gzip".into()), ..Answer::new(200, js, &site.script) };
        let mut probes = vec![
            Probe { contract: Some(script), ..Probe::get("script, gzip", &site.script_path).with_headers(BROWSER) },
            Probe {
                contract: Some(Answer::new(200, js, &site.script)),
                ..Probe::get("script, no Accept-Encoding", &site.script_path)
            },
            Probe {
                contract: Some(Answer::new(200, html, &site.index_html)),
                ..Probe::get("deep link", DEEP_LINK).with_headers(BROWSER)
            },
            Probe { contract: Some(Answer::new(200, html, &site.index_html)), ..Probe::get("root", "/") },
        ];
        // 404s whose bodies are each framework's own: a missing asset is no page, and /api is never the SPA.
        for (label, target) in [("missing script", "/assets/app-missing.js"), ("unknown API path", "/api/nope")] {
            probes.push(Probe { status_only: true, ..Probe::get(label, target).with_headers(BROWSER) });
        }
        // loadgen's templates must start with `/`; the values are the paths without theirs.
        let mut load = LoadSpec::get("/{page}", workload.connections());
        load.vars = vec![format!("page={},{}", &site.script_path[1..], &DEEP_LINK[1..])];
        load.headers = header_lines(BROWSER);
        Plan { load, workload, ready_path: "/".into(), probes, primary: 0, prime: None }
    }

    /// One rung of the ladder: its route with the same valid body every time (the empty rung takes none),
    /// the rung's failure answers, and the shared routes. `data`: the metadata dataset the SQLite rung reads
    /// (its first present id is the body's id); `dir` holds the body file.
    pub fn ladder(workload: Workload, data: &MetadataData, dir: &Path) -> anyhow::Result<Plan> {
        let rung = workload.rung().context("a ladder workload")?;
        let path = format!("/ladder/{rung}");
        let body = ladder_body(&data.first_present);
        let post =
            |label: &str, body: &[u8]| Probe { method: "POST", body: Some(body.to_vec()), ..Probe::get(label, &path) };
        let mut probes = Vec::new();
        let mut load = if workload == Workload::LadderEmpty {
            let mut probe = Probe::get("empty", &path);
            probe.contract = Some(Answer::new(200, "application/json", b"{\"ok\":true}"));
            probes.push(probe);
            probes.push(Probe { method: "POST", ..Probe::get("POST empty", &path) });
            LoadSpec::get(&path, workload.connections())
        } else {
            probes.push(post(rung, body.as_bytes()));
            let invalid = |label: &str, body: &str| Probe { compare_body: false, ..post(label, body.as_bytes()) };
            probes.push(invalid("not JSON", "{\"id\":"));
            probes.push(invalid("extra property", r#"{"id":"a","region":"en","tags":[],"x":1}"#));
            probes.push(invalid("bad id", r#"{"id":"no spaces allowed","region":"en","tags":[]}"#));
            probes.push(invalid("tags not strings", r#"{"id":"a","region":"en","tags":[1]}"#));
            if workload != Workload::LadderValidate {
                probes.push(post("absent id", ladder_body(&data.absent).as_bytes()));
            }
            probes.push(Probe::get(format!("GET {rung}"), &path));
            let body_file = dir.join(format!("{}-body.json", workload.name()));
            std::fs::write(&body_file, &body).with_context(|| format!("writing {}", body_file.display()))?;
            let mut load = LoadSpec::get(&path, workload.connections());
            load.method = "POST".into();
            load.body_file = Some(body_file);
            load.headers = vec!["Content-Type: application/json".into()];
            load
        };
        probes.extend([Probe::get("healthz", HEALTHZ), Probe::get("unknown path", "/nope")]);
        // One answer under load: loadgen checks every body against the reference's (run.rs writes the file).
        load.expect_status = vec![200];
        Ok(Plan { load, workload, ready_path: HEALTHZ.into(), probes, primary: 0, prime: None })
    }

    /// Reads of a database seeded with `seeded` notes (ids 1..=seeded).
    pub fn notes_read(workload: Workload, seeded: u32) -> Plan {
        let mut probes = vec![
            Probe::get("note 1", "/notes/1"),
            Probe::get("note 2", "/notes/2"),
            Probe::get(format!("note {seeded}"), format!("/notes/{seeded}")),
            Probe::get("absent note", format!("/notes/{}", u64::from(seeded) + 1000)),
            Probe::get("no such table", "/nosuchcomponent/1"),
            Probe::get("healthz", HEALTHZ),
        ];
        probes.dedup_by(|a, b| a.target == b.target);
        Plan {
            load: LoadSpec::get("/notes/1", workload.connections()),
            workload,
            ready_path: HEALTHZ.into(),
            probes,
            primary: 0,
            prime: None,
        }
    }

    /// Writes to a fresh database per server; `dir` holds the body file loadgen sends.
    pub fn notes_write(workload: Workload, dir: &Path) -> anyhow::Result<Plan> {
        let body_file = dir.join("notes-write-body.json");
        std::fs::write(&body_file, WRITE_BODY).with_context(|| format!("writing {}", body_file.display()))?;
        let post = |label: &str, body: &str| Probe {
            method: "POST",
            body: Some(body.as_bytes().to_vec()),
            ..Probe::get(label, "/notes")
        };
        let probes = vec![
            post("first POST", WRITE_BODY),
            Probe::get("GET the new note", "/notes/1"),
            Probe { compare_body: false, ..post("invalid POST", INVALID_BODY) },
            post("second POST", WRITE_BODY),
            Probe::get("healthz", HEALTHZ),
        ];
        let mut load = LoadSpec::get("/notes", workload.connections());
        load.method = "POST".into();
        load.body_file = Some(body_file);
        load.headers = vec!["Content-Type: application/json".into()];
        load.expect_contains = Some(r#"[{"id":"#.into());
        Ok(Plan {
            prime: Some(post("prime POST", WRITE_BODY)),
            workload,
            ready_path: HEALTHZ.into(),
            probes,
            primary: 0,
            load,
        })
    }

    pub fn metadata(workload: Workload, data: &MetadataData) -> Plan {
        let regions = metadata_dataset::REGIONS;
        let mut probes = Vec::new();
        for id in &data.first_ids {
            for region in regions {
                probes.push(Probe::get(format!("{id} {region}"), format!("/v1/metadata/{id}?region={region}")));
            }
        }
        let first = &data.first_present;
        probes.insert(0, Probe::get(format!("{first} en"), format!("/v1/metadata/{first}?region=en")));
        probes.extend([
            Probe::get(format!("{first} no region"), format!("/v1/metadata/{first}")),
            Probe::get("absent id", format!("/v1/metadata/{}?region=en", data.absent)),
            Probe::get("region=xx", format!("/v1/metadata/{first}?region=xx")),
            Probe::get("region=bad!value", format!("/v1/metadata/{first}?region=bad!value")),
            Probe::get("malformed id", "/v1/metadata/%E0%A4%A"),
            Probe::get("healthz", HEALTHZ),
            Probe { method: "POST", ..Probe::get("POST metadata", format!("/v1/metadata/{first}")) },
            Probe::get("unknown path", "/nope"),
        ]);
        let mut load = LoadSpec::get("/v1/metadata/{id}?region={region}", workload.connections());
        load.vars = vec![format!("id=@{}", data.ids.display()), format!("region={}", regions.join(","))];
        load.expect_status.extend_from_slice(workload.also_ok());
        Plan { load, workload, ready_path: format!("/v1/metadata/{first}?region=en"), probes, primary: 0, prime: None }
    }
}

/// A probe's request headers as loadgen's `-H` lines, so the load asks exactly as the probes did.
fn header_lines(headers: &[(&str, &str)]) -> Vec<String> {
    headers.iter().map(|(name, value)| format!("{name}: {value}")).collect()
}

/// The ladder's request body: valid against its schema, with a note so parsing and validation have some
/// text to walk.
pub fn ladder_body(id: &str) -> String {
    format!(
        r#"{{"id":"{id}","region":"ja-JP","tags":["ladder","compare","rung"],"note":"The same body for every rung that takes one, so the only thing that changes is the work."}}"#
    )
}

/// The generated metadata dataset and the sample ids the probes use.
#[derive(Debug, Clone)]
pub struct MetadataData {
    pub db: PathBuf,
    pub ids: PathBuf,
    /// The first 20 sample ids (present or not: every runtime must answer them alike).
    pub first_ids: Vec<String>,
    /// The first sample id in the table: the ready path and the floor's body.
    pub first_present: String,
    /// An id not in the table.
    pub absent: String,
}

impl MetadataData {
    pub fn load(db: &Path, ids: &Path) -> anyhow::Result<MetadataData> {
        let text = std::fs::read_to_string(ids).with_context(|| format!("reading {}", ids.display()))?;
        let sample: Vec<String> = text.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_string).collect();
        let conn = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .with_context(|| format!("opening {}", db.display()))?;
        let mut stmt = conn.prepare("SELECT 1 FROM videos WHERE id = ?1")?;
        let mut first_present = None;
        let mut absent = None;
        for id in sample.iter().take(1000) {
            let present = stmt.exists([id])?;
            if present && first_present.is_none() {
                first_present = Some(id.clone());
            }
            if !present && absent.is_none() {
                absent = Some(id.clone());
            }
            if first_present.is_some() && absent.is_some() {
                break;
            }
        }
        let Some(first_present) = first_present else {
            bail!("none of the first sample ids in {} is in {}", ids.display(), db.display())
        };
        // Generated ids are 11 characters; this one cannot be among them.
        let absent = absent.unwrap_or_else(|| "absent-id-not-in-db".into());
        Ok(MetadataData {
            db: db.to_path_buf(),
            ids: ids.to_path_buf(),
            first_ids: sample.into_iter().take(20).collect(),
            first_present,
            absent,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists() {
        let all = parse_list("all").expect("all");
        assert_eq!(all, Workload::ALL);
        let two = parse_list("metadata, hello-bare,metadata").expect("two");
        assert_eq!(two, [Workload::Metadata, Workload::HelloBare]);
        assert!(parse_list("hello").is_err());
        assert!(parse_list("").is_err());
    }

    #[test]
    fn differences() {
        let probe = Probe::get("p", "/p");
        let a = |status, ct: &str, body: &str| -> Outcome { Ok(Answer::new(status, ct, body.as_bytes())) };
        assert_eq!(
            difference(&probe, &a(200, "application/json", "{}"), &a(200, "application/json", "{}"), false),
            None
        );
        let d = difference(
            &probe,
            &a(200, "application/json", r#"{"a":2}"#),
            &a(200, "application/json", r#"{"a":1}"#),
            false,
        );
        assert!(d.is_some_and(|d| d.contains("byte 5")));
        let charset = a(200, "application/json; charset=utf-8", "{}");
        assert!(difference(&probe, &charset, &a(200, "application/json", "{}"), false).is_some());
        assert_eq!(difference(&probe, &charset, &a(200, "application/json", "{}"), true), None);
        assert!(
            difference(&probe, &a(500, "application/json", "{}"), &a(200, "application/json", "{}"), true)
                .is_some_and(|d| d.contains("status 500 (want 200)"))
        );
        assert!(difference(&probe, &Err("refused".into()), &a(200, "x", ""), false).is_some());
    }

    #[test]
    fn json_and_static_plans_ask_as_browsers_do() {
        let json = Plan::json_2k(Workload::Json2k);
        let args = json.load.loadgen_args(1);
        assert!(args.windows(2).any(|w| w[0] == "-H" && w[1] == "Accept-Encoding: gzip"), "{args:?}");
        assert!(args.windows(2).any(|w| w[0] == "--expect-header" && w[1] == "content-encoding: gzip"));
        assert_eq!(json.probes[0].headers, [("Origin", "http://app.example"), ("Accept-Encoding", "gzip")]);

        let dir = tempfile::tempdir().expect("temp dir");
        let site = crate::plan::site::build(dir.path()).expect("site");
        let plan = Plan::static_site(Workload::Static, &site);
        let args = plan.load.loadgen_args(1);
        assert!(args.windows(2).any(|w| w[0] == "--path" && w[1] == "/{page}"), "{args:?}");
        let page = format!("page={},app/settings/profile", &site.script_path[1..]);
        assert!(args.windows(2).any(|w| w[0] == "--var" && w[1] == page), "{args:?}");
        let gz = plan.probes[0].contract.as_ref().expect("contract");
        assert_eq!((gz.encoding.as_deref(), gz.body.len()), (Some("gzip"), site.script.len()));
        assert!(plan.probes.iter().filter(|p| p.status_only).all(|p| p.contract.is_none()));

        // A gzip answer where identity was wanted is a difference even when the decoded bytes agree.
        let plain = Answer::new(200, "text/javascript", b"x");
        let gzip = Answer { encoding: Some("gzip".into()), ..plain.clone() };
        assert!(difference(&plan.probes[1], &Ok(gzip), &Ok(plain.clone()), true).is_some());
        let old_js = Answer::new(200, "application/javascript; charset=utf-8", b"x");
        assert_eq!(difference(&plan.probes[1], &Ok(old_js), &Ok(plain), true), None, "RFC 9239 alias");
    }

    #[test]
    fn loadgen_arguments() {
        let mut spec = LoadSpec::get("/v1/metadata/{id}?region={region}", 128);
        spec.vars = vec!["id=@ids.txt".into(), "region=ja,en".into()];
        spec.expect_status.push(404);
        let args = spec.loadgen_args(4000);
        assert_eq!(args.last().map(String::as_str), Some("http://127.0.0.1:4000/"));
        assert!(args.windows(2).any(|w| w[0] == "--expect-status" && w[1] == "200,404"));
        assert!(args.windows(2).any(|w| w[0] == "--path" && w[1] == "/v1/metadata/{id}?region={region}"));
        let hello = LoadSpec::get("/api/hello", 100).loadgen_args(1);
        assert_eq!(hello, ["--expect-status", "200", "http://127.0.0.1:1/api/hello"]);
    }
}
