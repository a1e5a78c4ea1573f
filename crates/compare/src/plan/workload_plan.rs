//! A workload ready to run ([`Plan`]): its probes, its load, the path that says a server is ready, and the
//! request that primes it, built from the workload and the data prepared for it.

use std::path::Path;

use anyhow::Context;

use crate::plan::dataset::MetadataData;
use crate::plan::load_spec::LoadSpec;
use crate::plan::probe::{Answer, Probe};
use crate::plan::site::{DEEP_LINK, Site};
use crate::plan::tls::ClientTls;
use crate::plan::workloads::{FlightProfile, Workload};

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
    /// The certificate, key and CA the servers serve HTTPS with; None: cleartext.
    pub tls: Option<certs::Files>,
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
    /// This run's certificate (the TLS workloads).
    pub certs: Option<&'a certs::Files>,
}

impl Plan {
    /// The plan for `workload`, from the data prepared for it.
    pub fn new(workload: Workload, inputs: &PlanInputs<'_>) -> anyhow::Result<Plan> {
        let metadata = || inputs.metadata.context("the metadata dataset");
        let mut plan = match workload {
            Workload::Json2k => Plan::json_2k(workload),
            Workload::Static => Plan::static_site(workload, inputs.site.context("the static site")?),
            Workload::HelloBare
            | Workload::HelloDefault
            | Workload::HelloProduction
            | Workload::HelloHandshake
            | Workload::HelloResume
            | Workload::HelloChurn
            | Workload::HelloH2
            | Workload::HelloH2c => Plan::hello(workload),
            Workload::NotesRead => Plan::notes_read(workload, inputs.seed_notes),
            Workload::NotesWrite => Plan::notes_write(workload, inputs.dir)?,
            Workload::Metadata => Plan::metadata(workload, metadata()?),
            Workload::MetadataCached => Plan::metadata_cached(workload, metadata()?, inputs.dir)?,
            Workload::LadderEmpty
            | Workload::LadderValidate
            | Workload::LadderSqlite
            | Workload::LadderPostgres
            | Workload::LadderTls
            | Workload::LadderH2 => Plan::ladder(workload, metadata()?, inputs.dir)?,
            Workload::JsonTls | Workload::LadderJson | Workload::JsonH2 => Plan::json(workload),
            Workload::Upstream | Workload::UpstreamSlow => Plan::upstream(workload),
        };
        let connecting = workload.connecting();
        plan.load.requests_per_conn = connecting.requests_per_conn;
        plan.load.http2_streams = connecting.http2_streams;
        if connecting.tls {
            let files = inputs.certs.context("this run's certificate")?;
            plan.load.tls = Some(ClientTls::new(files.ca.clone(), connecting.resume));
            plan.tls = Some(files.clone());
        }
        Ok(plan)
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
        Plan {
            load,
            workload,
            ready_path: "/api/hello".into(),
            probes: vec![probe],
            primary: 0,
            prime: None,
            tls: None,
        }
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
        Plan { load, workload, ready_path: "/api/items".into(), probes, primary: 0, prime: None, tls: None }
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
        Plan { load, workload, ready_path: "/".into(), probes, primary: 0, prime: None, tls: None }
    }

    /// One rung of the ladder: its route with the same valid body every time (the empty rung takes none),
    /// the rung's failure answers, and the shared routes. `data`: the metadata dataset the SQLite rung reads
    /// (its first present id is the body's id); `dir` holds the body file.
    pub fn ladder(workload: Workload, data: &MetadataData, dir: &Path) -> anyhow::Result<Plan> {
        let rung = workload.ladder_route().context("a ladder workload")?;
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
            if rung != "validate" {
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
        Ok(Plan { load, workload, ready_path: HEALTHZ.into(), probes, primary: 0, prime: None, tls: None })
    }

    /// GET /ladder/json (json-tls over TLS, ladder-json in cleartext): a 1 KiB JSON document every runtime
    /// serializes per request, the same bytes as rust's (the probes compare them; loadgen holds every answer
    /// under load to them).
    pub fn json(workload: Workload) -> Plan {
        let path = "/ladder/json";
        let probes = vec![
            Probe::get("json", path),
            Probe { method: "POST", ..Probe::get("POST json", path) },
            Probe::get("healthz", HEALTHZ),
        ];
        let load = LoadSpec::get(path, workload.connections());
        Plan { load, workload, ready_path: HEALTHZ.into(), probes, primary: 0, prime: None, tls: None }
    }

    /// GET /ladder/upstream: the handler fetches compare's upstream service and answers its token; every
    /// answer is rust's bytes (the token is the run's).
    pub fn upstream(workload: Workload) -> Plan {
        let path = "/ladder/upstream";
        let probes = vec![
            Probe::get("upstream", path),
            Probe { method: "POST", ..Probe::get("POST upstream", path) },
            Probe::get("healthz", HEALTHZ),
        ];
        let mut load = LoadSpec::get(path, workload.connections());
        load.expect_status = vec![200];
        Plan { load, workload, ready_path: HEALTHZ.into(), probes, primary: 0, prime: None, tls: None }
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
            tls: None,
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
            tls: None,
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
        let ready_path = format!("/v1/metadata/{first}?region=en");
        Plan { load, workload, ready_path, probes, primary: 0, prime: None, tls: None }
    }
}

/// metadata-cached's working set: the first this many sample ids, each with one region.
pub const CACHED_IDS: usize = 500;

impl Plan {
    /// metadata's probes with its cache on, and a load that walks a working set of [`CACHED_IDS`] sample ids
    /// in order (id i with region i mod 5: as many keys as ids), so any warmup of that many requests leaves
    /// every key cached and the window's hit ratio is the share of present ids on every runtime, however fast.
    /// At random over metadata's 50,000 keys the share still unseen after the warmup would depend on the
    /// runtime's speed, and so would its hit ratio.
    pub fn metadata_cached(workload: Workload, data: &MetadataData, dir: &Path) -> anyhow::Result<Plan> {
        let mut plan = Plan::metadata(workload, data);
        let ids = std::fs::read_to_string(&data.ids).with_context(|| format!("reading {}", data.ids.display()))?;
        let hot: Vec<&str> = ids.lines().filter(|l| !l.trim().is_empty()).take(CACHED_IDS).collect();
        let file = dir.join("metadata-cached-ids.txt");
        std::fs::write(&file, hot.join("\n") + "\n").with_context(|| format!("writing {}", file.display()))?;
        let regions = metadata_dataset::REGIONS.join(",");
        plan.load.vars = vec![format!("id=@{}", file.display()), format!("region={regions}")];
        plan.load.round_robin = true;
        Ok(plan)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::probe::difference;

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
}
