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
}
