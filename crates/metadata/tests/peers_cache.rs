//! The Bun and Node metadata peers (bench/peers/metadata) against metadata-rs with the Redis cache on, on a
//! real redis-server: compare's cached metadata workload is a fair comparison only if every runtime sends Redis
//! the same commands for the same requests (the lead voids a cell whose hit ratio, from Redis's INFO, strays
//! from rust's), answers the same bytes from the cache as from SQLite, and rides out a Redis outage the same way.
//!
//! The runtimes run as the harness runs them: metadata-rs the built binary, the peers under the pinned Bun and
//! Node from bench/peers/node_modules (scripts/install-test-deps.sh installs them); when those are absent the
//! tests fail naming what is missing, as the other peer tests do. The framework peers (metadata/fastify.mjs and
//! express.mjs, each on Node and on Bun, under compare's runtime names) take the same sequences.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Dataset, Response, request};
use testkit::Redis;
use testkit::peers::{self, RUNTIMES, start_all};
use testkit::process::{Guard, wait_for_exit};
use testkit::wait::{eventually, until};

/// Fails the test, naming what is missing and how to install it, unless both runtimes and node-redis are there.
fn require_peers() {
    peers::require(&["redis"]);
}

/// The command that runs `name` (one of [`RUNTIMES`]) with the metadata-rs variables in `env` and nothing
/// else from this process's environment: the peers as compare runs them (the framework peers with
/// NODE_ENV=production).
fn command(name: &str, env: &[(&str, &str)]) -> Command {
    let mut cmd = if name == "rust" {
        Command::new(testkit::workspace::binary("metadata-rs"))
    } else {
        peers::command("metadata", name)
    };
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("RUST_LOG", "error")
        .env("METADATA_WORKERS", "1")
        .stdin(Stdio::null())
        .envs(peers::node_env(name))
        .envs(env.iter().copied());
    cmd
}

struct Runtime {
    name: &'static str,
    addr: SocketAddr,
    child: Guard,
}

/// Starts `name` on `db` with the cache on `redis_url` (none when empty) and a Redis deadline of `timeout_ms`,
/// and waits until its /healthz answers 200.
fn start(name: &'static str, db: &Path, redis_url: &str, timeout_ms: u64) -> Runtime {
    let port = testkit::free_port();
    let (port_text, timeout_text) = (port.to_string(), timeout_ms.to_string());
    let mut env = vec![
        ("METADATA_PORT", port_text.as_str()),
        ("METADATA_HOSTNAME", "127.0.0.1"),
        ("METADATA_DB", db.to_str().expect("UTF-8 path")),
    ];
    if !redis_url.is_empty() {
        env.extend([("METADATA_REDIS_URL", redis_url), ("METADATA_REDIS_TIMEOUT_MS", timeout_text.as_str())]);
    }
    let child = command(name, &env).stdout(Stdio::null()).stderr(Stdio::null()).spawn();
    let mut child = Guard(child.unwrap_or_else(|e| panic!("could not start {name}: {e}")));
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    let ready = until(Duration::from_secs(20), || {
        if let Ok(Some(status)) = child.0.try_wait() {
            panic!("{name} exited before answering: {status}");
        }
        testkit::http::try_request(addr, "GET", "/healthz", &[], None).is_ok_and(|r| r.status == 200)
    });
    assert!(ready.is_some(), "{name} never answered /healthz on {addr}");
    Runtime { name, addr, child }
}

impl Runtime {
    fn send(&self, method: &str, target: &str) -> Response {
        request(self.addr, method, target, &[], None)
    }

    fn assert_running(&mut self) {
        assert!(matches!(self.child.0.try_wait(), Ok(None)), "{} exited", self.name);
    }

    /// SIGTERM, and it exits promptly.
    fn stop(mut self) {
        let pid = self.child.0.id().to_string();
        assert!(Command::new("kill").args(["-TERM", &pid]).status().is_ok_and(|s| s.success()));
        assert!(wait_for_exit(&mut self.child.0, Duration::from_secs(5)).is_some(), "{} ignored SIGTERM", self.name);
    }
}

fn redis_conn(redis: &Redis) -> redis::Connection {
    redis::Client::open(redis.url()).expect("client").get_connection().expect("connect to redis-server")
}

/// `keyspace_hits` and `keyspace_misses` from INFO stats: what the lead's hit ratio is computed from.
fn hits_and_misses(conn: &mut redis::Connection) -> (u64, u64) {
    let info: String = redis::cmd("INFO").arg("stats").query(conn).expect("INFO stats");
    let field = |name: &str| -> u64 {
        let line = info.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':'));
        line.and_then(|v| v.trim().parse().ok()).unwrap_or_else(|| panic!("no {name} in INFO stats: {info}"))
    };
    (field("keyspace_hits"), field("keyspace_misses"))
}

/// Keys in the database. DBSIZE touches no key, so polling it leaves the hit and miss counts alone (EXISTS,
/// GET and TTL would count).
fn dbsize(conn: &mut redis::Connection) -> u64 {
    redis::cmd("DBSIZE").query(conn).expect("DBSIZE")
}

/// Every cached key with its value and TTL. Reads keys, so it runs after the counts were taken.
fn cached_entries(conn: &mut redis::Connection) -> BTreeMap<String, (Vec<u8>, i64)> {
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(conn).expect("KEYS");
    keys.into_iter()
        .map(|key| {
            let value: Vec<u8> = redis::cmd("GET").arg(&key).query(conn).expect("GET");
            let ttl: i64 = redis::cmd("TTL").arg(&key).query(conn).expect("TTL");
            (key, (value, ttl))
        })
        .collect()
}

fn present_ids(data: &Dataset, n: usize) -> Vec<String> {
    let conn = data.open_rw();
    let mut stmt = conn.prepare("SELECT id FROM videos ORDER BY id LIMIT ?1").expect("prepare");
    let ids: Vec<String> =
        stmt.query_map([n as i64], |r| r.get(0)).expect("query").collect::<Result<_, _>>().expect("ids");
    assert_eq!(ids.len(), n, "the dataset has {n} rows");
    ids
}

/// What one step of the sequence should do to Redis.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Touch {
    /// A GET that finds the key.
    Hit,
    /// A GET that does not, and a SET of the 200 body after it.
    MissFilled,
    /// A GET that does not, and nothing stored (a 404).
    MissOnly,
    /// No key read at all (400, 405, /healthz's PING).
    Nothing,
}

/// What must be equal across runtimes for one response: status, the headers that carry meaning, the body.
type View = (u16, Option<String>, Option<String>, Option<String>, Option<String>, Vec<u8>);

fn view(res: &Response) -> View {
    let header = |name: &str| res.header(name).map(str::to_string);
    (
        res.status,
        header("content-type"),
        header("content-length"),
        header("allow"),
        header("retry-after"),
        res.body.clone(),
    )
}

/// Every header but Date, which is the clock's.
fn headers_but_date(res: &Response) -> Vec<(String, String)> {
    res.headers.iter().filter(|(name, _)| name != "date").cloned().collect()
}

struct Observed {
    views: Vec<View>,
    hits: u64,
    misses: u64,
    entries: BTreeMap<String, (Vec<u8>, i64)>,
}

/// Runs the sequence on `rt` against a flushed Redis with reset counters, waiting after each fill until the key
/// is there (the SET runs after the response), and returns what it saw. Every hit in the sequence reads the key
/// the latest fill wrote, so a GET hit is checked against that fill's response.
fn run_sequence(rt: &Runtime, conn: &mut redis::Connection, steps: &[(&str, String, Touch)]) -> Observed {
    let _: () = redis::cmd("FLUSHALL").query(conn).expect("FLUSHALL");
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(conn).expect("CONFIG RESETSTAT");
    let mut views = Vec::with_capacity(steps.len());
    let mut last_fill: Option<Response> = None;
    let mut keys = 0;
    for (method, target, touch) in steps {
        let res = rt.send(method, target);
        match touch {
            // A hit carries exactly the headers and bytes of the miss that filled it.
            Touch::Hit if *method == "GET" => {
                let miss = last_fill.as_ref().expect("a hit follows its fill in the sequence");
                let what = format!("{}: {method} {target}, hit vs the miss that filled it", rt.name);
                assert_eq!(headers_but_date(&res), headers_but_date(miss), "{what}");
                assert_eq!(res.body, miss.body, "{what}");
            }
            Touch::MissFilled => {
                keys += 1;
                let stored = until(Duration::from_secs(5), || dbsize(conn) == keys);
                assert!(stored.is_some(), "{}: {method} {target} left {} keys, not {keys}", rt.name, dbsize(conn));
                last_fill = Some(res.clone());
            }
            _ => {}
        }
        views.push(view(&res));
    }
    let (hits, misses) = hits_and_misses(conn);
    Observed { views, hits, misses, entries: cached_entries(conn) }
}

#[test]
fn peers_send_redis_what_metadata_rs_sends_and_answer_the_same_bytes() {
    require_peers();
    let redis = Redis::start();
    let data = Dataset::generate(50, 5, 11);
    let ids = present_ids(&data, 2);
    let (a, b) = (&ids[0], &ids[1]);
    // A generous deadline: this test counts commands, and a command timed out on a busy machine would go
    // uncounted. The outage test below runs with the default 50 ms.
    let runtimes = start_all(&RUNTIMES, |n| start(n, &data.db(), &redis.url(), 2000));

    use Touch::*;
    let steps: Vec<(&str, String, Touch)> = vec![
        ("GET", format!("/v1/metadata/{a}?region=ja"), MissFilled),
        ("GET", format!("/v1/metadata/{a}?region=ja"), Hit),
        ("HEAD", format!("/v1/metadata/{a}?region=ja"), Hit),
        // No region and an empty one are both en: one key.
        ("GET", format!("/v1/metadata/{a}"), MissFilled),
        ("GET", format!("/v1/metadata/{a}?region="), Hit),
        ("GET", format!("/v1/metadata/{a}?x=1&region=en"), Hit),
        // The key holds the decoded id.
        ("GET", format!("/v1/metadata/{}?region=zh-TW", testkit::http::enc(b)), MissFilled),
        ("GET", format!("/v1/metadata/{b}?region=zh-TW"), Hit),
        // An absent id costs a GET each time and stores nothing.
        ("GET", "/v1/metadata/no-such-video?region=ja".to_string(), MissOnly),
        ("GET", "/v1/metadata/no-such-video?region=ja".to_string(), MissOnly),
        // Refused before the cache.
        ("GET", format!("/v1/metadata/{a}?region=x;y"), Nothing),
        ("GET", "/v1/metadata/%zz?region=ja".to_string(), Nothing),
        ("DELETE", format!("/v1/metadata/{a}?region=ja"), Nothing),
        ("GET", "/healthz".to_string(), Nothing),
        ("GET", "/nope".to_string(), Nothing),
    ];
    let mut conn = redis_conn(&redis);
    let observed: Vec<Observed> = runtimes.iter().map(|rt| run_sequence(rt, &mut conn, &steps)).collect();

    // The reference does what the sequence says, so the comparison below compares something.
    let rust = &observed[0];
    let count = |t: &[Touch]| steps.iter().filter(|s| t.contains(&s.2)).count() as u64;
    assert_eq!((rust.hits, rust.misses), (count(&[Hit]), count(&[MissFilled, MissOnly])), "rust's hits and misses");
    let expected_keys: Vec<String> =
        [format!("metadata:v1:en:{a}"), format!("metadata:v1:ja:{a}"), format!("metadata:v1:zh-TW:{b}")].into();
    assert_eq!(rust.entries.keys().cloned().collect::<Vec<_>>(), expected_keys, "rust's keys");
    assert_eq!(rust.views[14].0, 404);
    assert_eq!(rust.views[13].5, br#"{"status":"ok","sqlite":"ok","redis":"ok"}"#);

    for (rt, got) in runtimes.iter().zip(&observed).skip(1) {
        for (i, (step, (want, have))) in steps.iter().zip(rust.views.iter().zip(&got.views)).enumerate() {
            assert_eq!(have, want, "{}: step {i} {} {} differs from rust", rt.name, step.0, step.1);
        }
        assert_eq!((got.hits, got.misses), (rust.hits, rust.misses), "{}: keyspace hits and misses", rt.name);
        let values = |o: &Observed| o.entries.iter().map(|(k, (v, _))| (k.clone(), v.clone())).collect::<Vec<_>>();
        assert_eq!(values(got), values(rust), "{}: the keys and bodies cached", rt.name);
    }
    for (rt, got) in runtimes.iter().zip(&observed) {
        for (key, (_, ttl)) in &got.entries {
            assert!((1..=60).contains(ttl), "{}: {key} has TTL {ttl}, not the default 60 s", rt.name);
        }
    }
    for rt in runtimes {
        rt.stop();
    }
}

/// Redis killed, restarted, frozen and thawed under one peer: every answer a 200 with the right bytes, none
/// later than the deadline plus slack, /healthz saying down while it is, and the cache in use again soon after
/// Redis returns.
fn rides_out_redis_outages(name: &'static str) {
    require_peers();
    let mut redis = Redis::start();
    let data = Dataset::generate(50, 5, 12);
    let id = &present_ids(&data, 1)[0];
    let timeout = Duration::from_millis(50);
    let mut rt = start(name, &data.db(), &redis.url(), timeout.as_millis() as u64);
    let path = format!("/v1/metadata/{id}?region=en");
    let body = rt.send("GET", &path).body;
    let mut conn = redis_conn(&redis);
    assert!(until(Duration::from_secs(5), || dbsize(&mut conn) == 1).is_some(), "{name}: the first miss fills");

    // The deadline plus slack for a loaded machine; while Redis is down a request costs at most one deadline.
    let bound = timeout + Duration::from_millis(450);
    let answers_from_sqlite = |rt: &Runtime, what: &str| {
        for _ in 0..10 {
            let started = Instant::now();
            let res = rt.send("GET", &path);
            let took = started.elapsed();
            assert_eq!((res.status, &res.body), (200, &body), "{name}, {what}: SQLite answers");
            assert!(took < bound, "{name}, {what}: answered after {took:?}");
        }
    };
    let health = |rt: &Runtime| rt.send("GET", "/healthz");
    let health_says = |res: &Response, redis: &str| {
        assert_eq!(res.status, 200, "{name}: /healthz status");
        assert_eq!(res.text(), format!(r#"{{"status":"ok","sqlite":"ok","redis":"{redis}"}}"#), "{name}: /healthz");
    };

    redis.kill();
    answers_from_sqlite(&rt, "Redis killed");
    health_says(&health(&rt), "down");

    redis.restart();
    let mut conn = redis_conn(&redis);
    let started = Instant::now();
    let refilled = until(Duration::from_secs(10), || {
        rt.send("GET", &path);
        dbsize(&mut conn) == 1
    });
    assert!(refilled.is_some(), "{name}: no caching 10 s after Redis came back");
    assert!(started.elapsed() < Duration::from_secs(5), "{name}: caching resumed only after {:?}", started.elapsed());
    let hits_before = hits_and_misses(&mut conn).0;
    assert_eq!(rt.send("GET", &path).body, body);
    assert_eq!(hits_and_misses(&mut conn).0, hits_before + 1, "{name}: the next request is a hit");
    health_says(&health(&rt), "ok");

    redis.freeze();
    answers_from_sqlite(&rt, "Redis frozen");
    let started = Instant::now();
    let res = health(&rt);
    assert!(started.elapsed() < bound, "{name}: /healthz took {:?} with Redis frozen", started.elapsed());
    health_says(&res, "down");
    redis.thaw();
    let back = eventually(Duration::from_secs(10), || health(&rt).text().contains(r#""redis":"ok""#).then_some(()));
    assert!(back.is_some(), "{name}: /healthz never saw Redis again after the thaw");

    rt.assert_running();
    rt.stop();
}

#[test]
fn bun_rides_out_redis_outages() {
    rides_out_redis_outages("bun");
}

#[test]
fn node_rides_out_redis_outages() {
    rides_out_redis_outages("node");
}

#[test]
fn fastify_node_rides_out_redis_outages() {
    rides_out_redis_outages("fastify-node");
}

#[test]
fn fastify_bun_rides_out_redis_outages() {
    rides_out_redis_outages("fastify-bun");
}

#[test]
fn express_node_rides_out_redis_outages() {
    rides_out_redis_outages("express-node");
}

#[test]
fn express_bun_rides_out_redis_outages() {
    rides_out_redis_outages("express-bun");
}

/// Runs `name` to its exit (within 20 s): (exit code, stderr).
fn run_to_exit(name: &str, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let child = command(name, env).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("spawn");
    let mut child = Guard(child);
    let status = wait_for_exit(&mut child.0, Duration::from_secs(20));
    let status = status.unwrap_or_else(|| panic!("{name} with {env:?} still running after 20 s"));
    let mut stderr = String::new();
    if let Some(pipe) = child.0.stderr.as_mut() {
        let _ = std::io::Read::read_to_string(pipe, &mut stderr);
    }
    (status.code(), stderr)
}

#[test]
fn bad_redis_settings_exit_64_with_one_line_like_metadata_rs() {
    require_peers();
    let port = testkit::free_port().to_string();
    let url = "redis://127.0.0.1:1/0";
    let cases: [&[(&str, &str)]; 5] = [
        &[("METADATA_REDIS_URL", "http://127.0.0.1:6379")],
        &[("METADATA_REDIS_URL", "not a url")],
        &[("METADATA_REDIS_URL", "redis://127.0.0.1:6379/abc")],
        &[("METADATA_REDIS_URL", url), ("METADATA_REDIS_TTL", "0")],
        &[("METADATA_REDIS_URL", url), ("METADATA_REDIS_TIMEOUT_MS", "soon")],
    ];
    for case in cases {
        let mut env = vec![("METADATA_PORT", port.as_str()), ("METADATA_HOSTNAME", "127.0.0.1")];
        env.extend_from_slice(case);
        for name in RUNTIMES {
            let (code, stderr) = run_to_exit(name, &env);
            assert_eq!(code, Some(64), "{name} {case:?}: {stderr:?}");
            assert_eq!(stderr.lines().count(), 1, "{name} {case:?}: one line, got {stderr:?}");
            if name != "rust" {
                let variable = case.last().expect("a case").0;
                assert!(stderr.contains(variable), "{name} {case:?}: the line names {variable}: {stderr:?}");
            }
        }
    }
}

#[test]
fn peers_serve_from_sqlite_when_redis_is_not_there_at_start() {
    require_peers();
    let data = Dataset::generate(20, 5, 13);
    let id = &present_ids(&data, 1)[0];
    // A port nothing listens on: every connection attempt is refused.
    let url = format!("redis://127.0.0.1:{}/0", testkit::free_port());
    let runtimes = start_all(&RUNTIMES, |n| start(n, &data.db(), &url, 50));
    let path = format!("/v1/metadata/{id}?region=ko");
    let want = view(&runtimes[0].send("GET", &path));
    assert_eq!(want.0, 200);
    for rt in &runtimes {
        assert_eq!(view(&rt.send("GET", &path)), want, "{}: SQLite answers", rt.name);
        let health = rt.send("GET", "/healthz");
        assert_eq!(
            (health.status, health.text()),
            (200, r#"{"status":"ok","sqlite":"ok","redis":"down"}"#.to_string()),
            "{}: /healthz",
            rt.name
        );
    }
    for mut rt in runtimes {
        rt.assert_running();
        rt.stop();
    }
}

/// Without a cache (the plain metadata workload), every runtime answers the routing edges the framework peers
/// decide with their own routers (parameters, trailing slashes, case, encoded slashes, long ids, repeated
/// regions, other methods) as metadata-rs does: status, content type and length, Allow, Retry-After, bytes.
#[test]
fn every_peer_routes_like_metadata_rs_without_a_cache() {
    require_peers();
    let data = Dataset::generate(20, 5, 14);
    let ids = present_ids(&data, 2);
    let (a, b) = (&ids[0], &ids[1]);
    let runtimes = start_all(&RUNTIMES, |n| start(n, &data.db(), "", 50));
    let long = "x".repeat(300);
    let probes: Vec<(&str, String)> = vec![
        ("GET", format!("/v1/metadata/{a}?region=ja")),
        ("HEAD", format!("/v1/metadata/{a}?region=ja")),
        ("GET", format!("/v1/metadata/{a}")),
        ("GET", format!("/v1/metadata/{a}?region=")),
        ("GET", format!("/v1/metadata/{a}?region=ko&region=x;y")),
        ("GET", format!("/v1/metadata/{a}?region=x;y&region=ko")),
        ("GET", format!("/v1/metadata/{}?region=zh-TW", testkit::http::enc(b))),
        ("GET", format!("/v1/metadata/{a}/")),
        ("GET", format!("/V1/metadata/{a}")),
        ("GET", "/v1/metadata/".to_string()),
        ("GET", "/v1/metadata".to_string()),
        ("GET", "/v1/metadata/a/b".to_string()),
        ("GET", "/v1/metadata/a%2Fb".to_string()),
        ("GET", "/v1/metadata/%zz?region=ja".to_string()),
        ("GET", format!("/v1/metadata/{long}")),
        ("GET", "/v1/metadata/no-such-video".to_string()),
        ("DELETE", format!("/v1/metadata/{a}")),
        ("POST", format!("/v1/metadata/{a}")),
        ("PUT", "/healthz".to_string()),
        ("GET", "/healthz".to_string()),
        ("HEAD", "/healthz".to_string()),
        ("GET", "/healthz/".to_string()),
        ("GET", "/nope".to_string()),
        ("GET", "/x/%zz".to_string()),
    ];
    let rust: Vec<View> = probes.iter().map(|(m, t)| view(&runtimes[0].send(m, t))).collect();
    let statuses: Vec<u16> = rust.iter().map(|v| v.0).collect();
    assert_eq!(
        statuses,
        [
            200, 200, 200, 200, 200, 400, 200, 404, 404, 404, 404, 404, 404, 400, 404, 404, 405, 405, 405, 200, 200,
            404, 404, 404
        ],
        "rust's statuses"
    );
    for rt in &runtimes[1..] {
        for ((method, target), want) in probes.iter().zip(&rust) {
            assert_eq!(&view(&rt.send(method, target)), want, "{}: {method} {target} differs from rust", rt.name);
        }
    }
    for rt in runtimes {
        rt.stop();
    }
}
