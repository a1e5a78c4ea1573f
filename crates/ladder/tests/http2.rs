//! ladder-rs answers the same bytes over HTTP/2 (h2c by prior knowledge, on the port that serves HTTP/1.1) as
//! over HTTP/1.1: every rung (empty, the 1 KiB JSON, validate, SQLite, Postgres, upstream) with good and bad
//! bodies, and the 404, 405 and 413 answers; and over TLS it selects h2 by ALPN and answers the same there.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{ABSENT_ID, Dataset, EDGE_ROWS, MALFORMED_ID, Response, TestServer, UpstreamServer, body, settings};
use serve::TlsSettings;
use testkit::h2::{Req, same_over_h2, send_tls};

/// Every body goes with the Content-Type testkit's HTTP/1.1 client adds on its own, so both protocols carry
/// the same request.
const JSON: &[(&str, &str)] = &[("content-type", "application/json")];

fn post<'a>(target: &'a str, body: &'a [u8]) -> Req<'a> {
    Req { method: "POST", target, headers: JSON, body: Some(body) }
}

fn req<'a>(method: &'a str, target: &'a str) -> Req<'a> {
    Req { method, target, headers: &[], body: None }
}

/// A request and the status HTTP/1.1 answers it with (as tests/contract.rs establishes).
type Case<'a> = (Req<'a>, u16);

/// Checks each status over HTTP/1.1 first (so a wrong fixture fails as such), then compares both protocols.
fn check(addr: std::net::SocketAddr, cases: &[Case<'_>]) {
    for (r, status) in cases {
        let res = testkit::http::request(addr, r.method, r.target, r.headers, r.body);
        assert_eq!(res.status, *status, "{} {} over HTTP/1.1: {:?}", r.method, r.target, res.text());
    }
    let requests: Vec<Req<'_>> = cases.iter().map(|(r, _)| *r).collect();
    same_over_h2(addr, &requests, &[])
        .unwrap_or_else(|differences| panic!("HTTP/2 answers differ from HTTP/1.1:\n{differences}"));
}

struct Fixture {
    server: TestServer,
    data: Dataset,
    _upstream: UpstreamServer,
    _pg: Arc<testkit::Postgres>,
}

/// ladder-rs over a generated SQLite file, a seeded Postgres database and the upstream service in process.
fn fixture(database: &str) -> Fixture {
    let pg = common::shared_postgres();
    let url = pg.create_database(database);
    assert_eq!(common::seed(&url, 1000), 1000);
    let data = Dataset::generate(300);
    let upstream = UpstreamServer::start(Duration::ZERO);
    let mut settings = settings(&data.db(), Some(&url));
    settings.upstream = Some(ladder::upstream::parse_upstream_url(&upstream.url()).expect("an http URL"));
    let server = TestServer::start(settings);
    Fixture { server, data, _upstream: upstream, _pg: pg }
}

#[test]
fn every_rung_answers_the_same_over_http2() {
    let Fixture { server, data, _upstream, _pg } = fixture("t_h2_rungs");
    let id = data.sample_ids().remove(0);
    let valid = body(&id);
    let edge = body(EDGE_ROWS[1].0); // escapes and non-ASCII in the answer
    let absent = body(ABSENT_ID);
    let malformed = body(MALFORMED_ID);
    let invalid = br#"{"id":"x","region":"en_US","tags":[]}"#; // the schema refuses the region
    let not_json = b"not json";
    let cases = [
        (req("GET", "/ladder/empty"), 200),
        (req("GET", "/ladder/empty?cache=bust"), 200),
        (req("GET", "/ladder/json"), 200),
        (req("GET", "/healthz"), 200),
        (req("GET", "/ladder/upstream"), 200),
        // HEAD: the GET's headers and no body over both (serve drops the body over HTTP/2).
        (req("HEAD", "/ladder/empty"), 200),
        (req("HEAD", "/ladder/json"), 200),
        (post("/ladder/validate", valid.as_bytes()), 200),
        (post("/ladder/validate", absent.as_bytes()), 200),
        (post("/ladder/validate", invalid), 400),
        (post("/ladder/validate", not_json), 400),
        (post("/ladder/validate", b""), 400),
        (post("/ladder/sqlite", valid.as_bytes()), 200),
        (post("/ladder/sqlite", edge.as_bytes()), 200),
        (post("/ladder/sqlite", absent.as_bytes()), 404),
        (post("/ladder/sqlite", malformed.as_bytes()), 500),
        (post("/ladder/sqlite", not_json), 400),
        (post("/ladder/postgres", valid.as_bytes()), 200),
        (post("/ladder/postgres", edge.as_bytes()), 200),
        (post("/ladder/postgres", absent.as_bytes()), 404),
        (post("/ladder/postgres", malformed.as_bytes()), 500),
        (post("/ladder/postgres", invalid), 400),
    ];
    check(server.addr, &cases);
}

#[test]
fn errors_answer_the_same_over_http2() {
    let dir = tempfile::tempdir().expect("dir");
    // No database and no upstream: the routes and the body limit need neither.
    let server = TestServer::start(settings(&dir.path().join("missing.db"), None));
    let mut at_limit = body("abc").into_bytes();
    at_limit.resize(ladder::BODY_LIMIT as usize, b' ');
    let mut over = at_limit.clone();
    over.push(b' ');
    let cases = [
        (req("GET", "/"), 404),
        (req("GET", "/nope"), 404),
        (req("GET", "/ladder/"), 404),
        (req("GET", "/ladder/EMPTY"), 404),
        (req("GET", "/ladder/upstream/"), 404),
        (post("/nope", b"{}"), 404),
        (req("POST", "/ladder/empty"), 405),
        (req("PUT", "/ladder/json"), 405),
        (req("DELETE", "/healthz"), 405),
        (req("GET", "/ladder/validate"), 405),
        (req("PUT", "/ladder/sqlite"), 405),
        (req("POST", "/ladder/upstream"), 405),
        // Without an upstream URL the rung is a 503.
        (req("GET", "/ladder/upstream"), 503),
        // Exactly the limit is read; one byte more is refused.
        (post("/ladder/validate", &at_limit), 200),
        (post("/ladder/validate", &over), 413),
        (post("/ladder/sqlite", &over), 413),
    ];
    check(server.addr, &cases);
}

/// Over TLS ladder-rs selects h2 when the client offers it (and http/1.1 to a client offering only that),
/// and the answers there are the HTTP/1.1-over-TLS ones.
#[test]
fn tls_selects_h2_by_alpn_and_answers_the_same() {
    let dir = tempfile::tempdir().expect("dir");
    let bundle = certs::Bundle::generate(certs::LOOPBACK_NAMES).expect("certs");
    let files = bundle.write(dir.path()).expect("write the certificate files");
    let client = testkit::tls::Client::new(&bundle.ca_pem);
    let data = Dataset::generate(50);
    let limits = serve::Limits {
        workers: 1,
        body_limit: ladder::BODY_LIMIT,
        shutdown_timeout: Duration::from_secs(1),
        tls: Some(TlsSettings { cert: files.chain, key: files.key, tickets: true, session_cache: true }),
        ..Default::default()
    };
    let server = TestServer::start_with_limits(settings(&data.db(), None), limits);
    let id = data.sample_ids().remove(0);
    let valid = body(&id);
    let requests = [
        req("GET", "/ladder/empty"),
        req("GET", "/ladder/json"),
        post("/ladder/validate", valid.as_bytes()),
        post("/ladder/sqlite", valid.as_bytes()),
        post("/ladder/sqlite", b"not json"),
        req("GET", "/nope"),
        req("POST", "/ladder/json"),
    ];
    let exchange = send_tls(server.addr, &client, &requests).expect("h2 over TLS");
    assert_eq!(exchange.alpn.as_deref(), Some(&b"h2"[..]));
    for (r, over_h2) in requests.iter().zip(&exchange.responses) {
        let mut conn = testkit::http::Conn::open_tls(server.addr, &client).expect("an http/1.1-only client");
        assert_eq!(conn.tls().and_then(|t| t.alpn_protocol()), Some(&b"http/1.1"[..]));
        let headers: Vec<(&str, &[u8])> = r.headers.iter().map(|(n, v)| (*n, v.as_bytes())).collect();
        let over_h1 = conn.request(testkit::http::request_bytes(r.method, r.target.as_bytes(), &headers, r.body));
        assert_no_differences(&format!("{} {} over TLS", r.method, r.target), &over_h1, over_h2);
    }
    let statuses: Vec<u16> = exchange.responses.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [200, 200, 200, 200, 400, 404, 405]);
}

/// same_over_h2's rule (testkit::h2::differences), for answers it cannot fetch itself (it speaks cleartext
/// only).
fn assert_no_differences(what: &str, over_h1: &Response, over_h2: &Response) {
    let found = testkit::h2::differences(what, over_h1, over_h2, &[]);
    assert!(found.is_empty(), "{}", found.join("\n"));
}
