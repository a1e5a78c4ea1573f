//! The workloads, as a type: each one's name, service, Flight profile, connections, databases and whether one
//! body is served under load. The rest of compare asks the type and never compares names; what each workload
//! loads and probes is built in `workload_plan.rs`.

use anyhow::bail;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Flight,
    Scribe,
    Metadata,
    /// ladder-rs and its peers: one server, one route per rung.
    Ladder,
}

impl Service {
    /// The rust server's binary: flight-rs, scribe-rs, metadata-rs or ladder-rs.
    pub fn rust_server(self) -> &'static str {
        match self {
            Service::Flight => "flight-rs",
            Service::Scribe => "scribe-rs",
            Service::Metadata => "metadata-rs",
            Service::Ladder => "ladder-rs",
        }
    }
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
    /// The SQLite rung behind TLS 1.3, keep-alive: the published ladder's step D.
    LadderTls,
    /// A 1 KiB JSON document serialized per request, over TLS 1.3 keep-alive (HttpArena's json-tls).
    JsonTls,
    /// The same route in cleartext: the harness post's ladder step A, an empty handler returning 1 KB of JSON.
    LadderJson,
    /// hello-bare with one full TLS 1.3 handshake per request: what a new connection costs.
    HelloHandshake,
    /// The same with the session resumed from a ticket.
    HelloResume,
    /// Plaintext hello-bare, each connection closed after 10 requests (HttpArena's limited-conn).
    HelloChurn,
    /// metadata with its Redis cache-aside on, on every runtime.
    MetadataCached,
    /// A ladder route that GETs compare's upstream service (answering at once) and returns a field of it.
    Upstream,
    /// The same with the upstream answering after 10 ms.
    UpstreamSlow,
    /// hello-bare over HTTP/2 with TLS (ALPN h2), 16 connections of 16 streams each.
    HelloH2,
    /// The same in cleartext (h2c by prior knowledge).
    HelloH2c,
    /// json-tls's 1 KiB JSON route over HTTP/2 with TLS, 16 × 16 streams.
    JsonH2,
    /// The ladder's validate rung over HTTP/2 with TLS: POST bodies on 16 × 16 streams.
    LadderH2,
}

/// How a workload's load connects: cleartext or TLS, and how long a connection lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Connecting {
    /// TLS 1.3 with the pinned parameters (plan/tls.rs).
    pub tls: bool,
    /// New connections resume a session (TLS only).
    pub resume: bool,
    /// Close and reconnect after this many requests; None: keep-alive for the whole run.
    pub requests_per_conn: Option<u32>,
    /// HTTP/2 with this many concurrent streams per connection (h2 over TLS, h2c without); None: HTTP/1.1.
    pub http2_streams: Option<u32>,
}

impl Connecting {
    const KEEP_ALIVE: Connecting =
        Connecting { tls: false, resume: false, requests_per_conn: None, http2_streams: None };
}

/// The HTTP/2 workloads' streams per connection, and their connections: 256 requests in flight, as h2load's
/// `-c16 -m16` (what the figures were measured with).
const H2_STREAMS: u32 = 16;
const H2_CONNECTIONS: u32 = 16;

impl Workload {
    /// Every workload, in the order `all` gives and the report lists them.
    pub const ALL: [Workload; 25] = [
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
        Workload::LadderTls,
        Workload::JsonTls,
        Workload::LadderJson,
        Workload::HelloHandshake,
        Workload::HelloResume,
        Workload::HelloChurn,
        Workload::MetadataCached,
        Workload::Upstream,
        Workload::UpstreamSlow,
        Workload::HelloH2,
        Workload::HelloH2c,
        Workload::JsonH2,
        Workload::LadderH2,
    ];

    /// The HTTP/2 workloads (`--workloads h2`). Not in the default run yet: with them it would take longer
    /// than the two hours the default is held to (run/estimate.rs).
    pub const HTTP2: [Workload; 4] = [Workload::HelloH2, Workload::HelloH2c, Workload::JsonH2, Workload::LadderH2];

    /// The default run's workloads: every one but [`Workload::HTTP2`].
    pub fn default_run() -> Vec<Workload> {
        Workload::ALL.into_iter().filter(|w| !Workload::HTTP2.contains(w)).collect()
    }

    /// The ladder's rungs in the order its table and chart draw them: each of the first four adds per-request
    /// work to the one before (the published ladder's steps A to D); the Postgres rung reads PostgreSQL
    /// where the SQLite rung reads SQLite.
    pub const LADDER: [Workload; 5] = [
        Workload::LadderEmpty,
        Workload::LadderValidate,
        Workload::LadderSqlite,
        Workload::LadderTls,
        Workload::LadderPostgres,
    ];

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
            Workload::LadderTls => "ladder-tls",
            Workload::JsonTls => "json-tls",
            Workload::LadderJson => "ladder-json",
            Workload::HelloHandshake => "hello-handshake",
            Workload::HelloResume => "hello-resume",
            Workload::HelloChurn => "hello-churn",
            Workload::MetadataCached => "metadata-cached",
            Workload::Upstream => "upstream",
            Workload::UpstreamSlow => "upstream-10ms",
            Workload::HelloH2 => "hello-h2",
            Workload::HelloH2c => "hello-h2c",
            Workload::JsonH2 => "json-h2",
            Workload::LadderH2 => "ladder-h2",
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
            | Workload::Static
            | Workload::HelloHandshake
            | Workload::HelloResume
            | Workload::HelloChurn
            | Workload::HelloH2
            | Workload::HelloH2c => Service::Flight,
            Workload::NotesRead | Workload::NotesWrite => Service::Scribe,
            Workload::Metadata | Workload::MetadataCached => Service::Metadata,
            Workload::Upstream | Workload::UpstreamSlow => Service::Ladder,
            Workload::LadderEmpty
            | Workload::LadderValidate
            | Workload::LadderSqlite
            | Workload::LadderPostgres
            | Workload::LadderTls
            | Workload::JsonTls
            | Workload::LadderJson
            | Workload::JsonH2
            | Workload::LadderH2 => Service::Ladder,
        }
    }

    /// flight-rs's middleware profile on a Flight workload; the peers run the same layers.
    pub fn flight_profile(self) -> Option<FlightProfile> {
        match self {
            Workload::HelloBare
            | Workload::HelloHandshake
            | Workload::HelloResume
            | Workload::HelloChurn
            | Workload::HelloH2
            | Workload::HelloH2c => Some(FlightProfile::Bare),
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
            Workload::Metadata | Workload::MetadataCached => 128,
            w if w.connecting().http2_streams.is_some() => H2_CONNECTIONS,
            _ => 100,
        }
    }

    /// The count among `given` (`--connections`) that stands for this workload in its tables, checks and
    /// capacity searches: its own count when `given` is empty or holds it, else the nearest given one (the
    /// lower of two as near), so a sweep's headline stays comparable with a run at the workload's defaults.
    pub fn headline_connections(self, given: &[u32]) -> u32 {
        let own = self.connections();
        given.iter().copied().min_by_key(|&c| (c.abs_diff(own), c)).unwrap_or(own)
    }

    /// How its load connects. The handshake workloads make one request per connection, so their CPU per
    /// response is CPU per connection: a TCP accept, a handshake and one answer.
    pub fn connecting(self) -> Connecting {
        let tls = Connecting { tls: true, ..Connecting::KEEP_ALIVE };
        match self {
            Workload::LadderTls | Workload::JsonTls => tls,
            Workload::HelloHandshake => Connecting { requests_per_conn: Some(1), ..tls },
            Workload::HelloResume => Connecting { resume: true, requests_per_conn: Some(1), ..tls },
            Workload::HelloChurn => Connecting { requests_per_conn: Some(10), ..Connecting::KEEP_ALIVE },
            Workload::HelloH2 | Workload::JsonH2 | Workload::LadderH2 => {
                Connecting { http2_streams: Some(H2_STREAMS), ..tls }
            }
            Workload::HelloH2c => Connecting { http2_streams: Some(H2_STREAMS), ..Connecting::KEEP_ALIVE },
            _ => Connecting::KEEP_ALIVE,
        }
    }

    /// Whether its servers speak HTTPS.
    pub fn tls(self) -> bool {
        self.connecting().tls
    }

    /// Statuses outside 2xx that are answers, not failures (metadata's absent sample ids).
    pub fn also_ok(self) -> &'static [u16] {
        if self.service() == Service::Metadata { &[404] } else { &[] }
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

    /// The ladder server's route it loads (`/ladder/<route>`): its rung's, or `json` for json-tls.
    pub fn ladder_route(self) -> Option<&'static str> {
        match self {
            Workload::LadderTls => Some("sqlite"),
            Workload::JsonTls | Workload::LadderJson | Workload::JsonH2 => Some("json"),
            Workload::LadderH2 => Some("validate"),
            Workload::Upstream | Workload::UpstreamSlow => Some("upstream"),
            _ => self.rung(),
        }
    }

    /// The ladder's step name, as its table and chart label it (`empty`, `validate`, `sqlite`, `sqlite+tls`,
    /// `postgres`), on a rung of the ladder.
    pub fn rung(self) -> Option<&'static str> {
        match self {
            Workload::LadderTls => Some("sqlite+tls"),
            w if Workload::LADDER.contains(&w) => Some(w.name().trim_start_matches("ladder-")),
            _ => None,
        }
    }

    /// Whether its servers query PostgreSQL (every ladder rung is handed the database; only this one reads it).
    pub fn queries_postgres(self) -> bool {
        matches!(self, Workload::NotesRead | Workload::NotesWrite | Workload::LadderPostgres)
    }

    /// Whether `--db-rtt` applies: its servers wait on a database round trip per request (PostgreSQL, and the
    /// Redis those servers use beside it; metadata-cached's Redis).
    pub fn waits_on_database(self) -> bool {
        self.queries_postgres() || self.caches_metadata()
    }

    /// Database round trips per request on every runtime, where they are the same (a read by key, a cache
    /// hit); `None` where runtimes differ (notes-write: scribe-rs writes in a transaction, the peers in two
    /// statements) or no database is waited on.
    pub fn database_round_trips(self) -> Option<u32> {
        matches!(self, Workload::LadderPostgres | Workload::NotesRead | Workload::MetadataCached).then_some(1)
    }

    /// Whether its servers read the generated metadata dataset (the ladder's SQLite rung reads it too).
    pub fn needs_metadata_dataset(self) -> bool {
        matches!(self.service(), Service::Metadata | Service::Ladder)
    }

    /// How long compare's upstream service waits before it answers, on the workloads whose handler calls it.
    pub fn upstream_delay(self) -> Option<std::time::Duration> {
        match self {
            Workload::Upstream => Some(std::time::Duration::ZERO),
            Workload::UpstreamSlow => Some(std::time::Duration::from_millis(10)),
            _ => None,
        }
    }

    /// Whether the metadata servers run their Redis cache-aside (each runtime on a Redis database of its own,
    /// emptied before every server start, so every run starts cold and fills its own cache).
    pub fn caches_metadata(self) -> bool {
        self == Workload::MetadataCached
    }

    /// Whether it serves the built SPA.
    pub fn needs_site(self) -> bool {
        self == Workload::Static
    }

    /// Whether every response under load is one body, so loadgen can check each byte for byte against the
    /// reference's (the static mix has two, metadata many, notes-write a new id each).
    pub fn one_body_under_load(self) -> bool {
        self.flight_profile().is_some_and(|_| self != Workload::Json2k && self != Workload::Static)
            || self == Workload::NotesRead
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
            Workload::LadderTls => {
                "every runtime runs the SQLite rung (parse, validate, one SQLite read) behind TLS 1.3 with the \
                 run's ECDSA P-256 certificate, X25519 and TLS_AES_128_GCM_SHA256: rust on rustls (aws-lc-rs), \
                 bun on Bun.serve's tls (BoringSSL), node on node:https (OpenSSL 3). Connections stay open, so \
                 this is the cost of encrypting the traffic, not of handshakes."
            }
            Workload::JsonTls => {
                "every runtime builds and serializes the same 1 KiB JSON document per request (rust: serde_json; \
                 bun and node: JSON.stringify) and sends it over TLS 1.3 as in ladder-tls, keep-alive."
            }
            Workload::LadderJson => {
                "every runtime builds and serializes the same 1 KiB JSON document per request (rust: serde_json; \
                 bun and node: JSON.stringify), in cleartext on keep-alive connections: json-tls's route without \
                 TLS, the harness post's ladder step A."
            }
            Workload::HelloHandshake | Workload::HelloResume => {
                "hello-bare's route, one request per connection over TLS 1.3 with the run's ECDSA P-256 \
                 certificate, X25519 and TLS_AES_128_GCM_SHA256, so CPU per response is CPU per connection: \
                 accept, handshake, one answer, close. hello-handshake: the client offers no session, so every \
                 handshake is full (a P-256 signature and an X25519 exchange); hello-resume: the client resumes \
                 from a ticket (the table below says how many handshakes each runtime resumed). Every server \
                 keeps its default session tickets on, so it may issue tickets a client never uses, as a \
                 default deployment does. rust: rustls (aws-lc-rs), bun: Bun.serve (BoringSSL), node and koa: \
                 node:https (OpenSSL 3). The floor has no TLS."
            }
            Workload::HelloChurn => {
                "hello-bare's route in cleartext, each connection closed by the client after 10 requests: a TCP \
                 accept and close every tenth answer on every runtime."
            }
            Workload::MetadataCached => {
                "every runtime runs metadata's lookup behind the same cache-aside in Redis: GET \
                 metadata:v1:<region>:<id> first, a hit answers the stored bytes, a miss reads SQLite, answers and \
                 stores a 200 body with SET EX 60 without the answer waiting (rust: redis-rs through \
                 bounded-redis; bun and node: node-redis 6.3.1), every command under a 50 ms deadline. The \
                 servers use Redis database 4, emptied before each server starts, so every run fills its own \
                 cache in its warmup (a working set of 500 keys walked in order); the table says each runtime's hit ratio in the window, and a run whose \
                 ratio is more than 5 points from rust's in the same round is void."
            }
            Workload::HelloH2 | Workload::HelloH2c => {
                "hello-bare's route over HTTP/2, 16 connections of 16 concurrent streams (h2load's -c16 -m16): \
                 hello-h2 over TLS 1.3 (ALPN h2, the run's certificate and parameters as in ladder-tls), hello-h2c \
                 in cleartext by prior knowledge. rust: hyper's HTTP/2 (the h2 crate) under serve; bun: Bun.serve \
                 with http2: true; node: node:http2's core stream API (createSecureServer with allowHTTP1, \
                 createServer for h2c)."
            }
            Workload::JsonH2 => {
                "json-tls's 1 KiB JSON document, built and serialized per request, over HTTP/2 with TLS 1.3, 16 \
                 connections of 16 streams; servers as in hello-h2."
            }
            Workload::LadderH2 => {
                "the ladder's validate rung (parse the POSTed JSON, validate it against the schema) with its body \
                 on HTTP/2 streams over TLS 1.3, 16 connections of 16 streams; servers as in hello-h2."
            }
            Workload::Upstream | Workload::UpstreamSlow => {
                "every runtime's handler GETs compare's upstream service (a 1,024-byte JSON document, answered \
                 at once on upstream, after 10 ms on upstream-10ms) with its platform's pooled keep-alive client \
                 (rust: hyper-util's legacy Client; bun: fetch; node: fetch, undici), parses it and answers \
                 {\"ok\":true,\"token\":…}. The upstream runs on the database cores; its CPU is reported per \
                 response and charged to no runtime."
            }
            _ => return None,
        })
    }
}

/// The names, for messages.
fn names() -> String {
    Workload::ALL.map(Workload::name).join(", ")
}

/// `--workloads`'s help, built from [`Workload::ALL`] and the groups [`parse_list`] takes, so `compare --help`
/// lists every workload there is.
pub fn list_help() -> String {
    format!(
        "Comma list of workloads: {}; or groups: `default` (every workload but the HTTP/2 ones), `all`, `h2` ({})",
        names(),
        Workload::HTTP2.map(Workload::name).join(", ")
    )
}

/// A comma list of workload names and groups (`default`: the default run; `all`: every workload; `h2`: the
/// HTTP/2 ones), in the order given, each once.
pub fn parse_list(text: &str) -> anyhow::Result<Vec<Workload>> {
    let mut out: Vec<Workload> = Vec::new();
    for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let group = match name {
            "default" => Workload::default_run(),
            "all" => Workload::ALL.to_vec(),
            "h2" => Workload::HTTP2.to_vec(),
            _ => match Workload::parse(name) {
                Some(w) => vec![w],
                None => bail!("unknown workload {name:?}; choose from {} (or default, all, h2)", names()),
            },
        };
        for w in group {
            if !out.contains(&w) {
                out.push(w);
            }
        }
    }
    if out.is_empty() {
        bail!("no workload given; choose from {}", names());
    }
    Ok(out)
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workload_lists_take_names_and_the_default_all_and_h2_groups() {
        let all = parse_list("all").expect("all");
        assert_eq!(all, Workload::ALL);
        let default = parse_list("default").expect("default");
        assert_eq!(default.len(), 21);
        assert!(default.iter().all(|w| w.connecting().http2_streams.is_none()));
        assert_eq!(parse_list("h2,hello-h2").expect("h2"), Workload::HTTP2);
        let two = parse_list("metadata, hello-bare,metadata").expect("two");
        assert_eq!(two, [Workload::Metadata, Workload::HelloBare]);
        assert!(parse_list("hello").is_err());
        assert!(parse_list("").is_err());
    }

    #[test]
    fn the_headline_count_is_the_workloads_own_or_the_sweeps_nearest() {
        assert_eq!(Workload::HelloBare.headline_connections(&[]), 100);
        assert_eq!(Workload::HelloBare.headline_connections(&[32]), 32);
        assert_eq!(Workload::HelloBare.headline_connections(&[16, 64, 256, 512, 1024]), 64);
        assert_eq!(Workload::NotesWrite.headline_connections(&[16, 64, 256]), 64);
        assert_eq!(Workload::Metadata.headline_connections(&[64, 192, 1024]), 64);
        assert_eq!(Workload::Metadata.headline_connections(&[16, 128, 1024]), 128);
    }

    #[test]
    fn connections_and_routes() {
        let handshake = Workload::HelloHandshake.connecting();
        assert!(handshake.tls && !handshake.resume && handshake.requests_per_conn == Some(1));
        assert!(Workload::HelloResume.connecting().resume);
        let churn = Workload::HelloChurn.connecting();
        assert!(!churn.tls && churn.requests_per_conn == Some(10));
        assert!(Workload::LadderTls.tls() && !Workload::LadderSqlite.tls());
        assert_eq!(Workload::LadderTls.ladder_route(), Some("sqlite"));
        assert_eq!(Workload::LadderTls.rung(), Some("sqlite+tls"));
        assert_eq!((Workload::JsonTls.ladder_route(), Workload::JsonTls.rung()), (Some("json"), None));
        assert_eq!(Workload::HelloChurn.flight_profile(), Some(FlightProfile::Bare));
        assert!(Workload::ALL.iter().all(|w| w.one_body_under_load()
            != matches!(
                w,
                Workload::Json2k
                    | Workload::Static
                    | Workload::NotesWrite
                    | Workload::Metadata
                    | Workload::MetadataCached
            )));
        assert_eq!(Workload::Upstream.ladder_route(), Some("upstream"));
        assert_eq!(Workload::UpstreamSlow.upstream_delay(), Some(std::time::Duration::from_millis(10)));
        assert!(Workload::MetadataCached.caches_metadata() && Workload::MetadataCached.also_ok() == [404]);
    }
}
