//! What a framework runtime runs per request beyond the workload's "same work" line: the pieces its framework
//! puts around the peers' shared handlers, and every way its answers differ from rust's bytes. The report
//! prints these under the same-work line for the runtimes a workload measured.

use crate::plan::runtimes::{Framework, Runtime};
use crate::plan::workloads::{Service, Workload};

/// The note for `runtime` on `workload`, where its stack differs from the hand-written peers'.
pub fn stack(runtime: Runtime, workload: Workload) -> Option<&'static str> {
    if let Some(fw) = runtime.framework() {
        return Some(framework(fw, workload.service()));
    }
    Some(match runtime {
        Runtime::KoaBun => {
            "koa's app (Koa 3 + @koa/router) unchanged, on Bun's node:http compatibility; one process, as koa."
        }
        Runtime::FlightBun => {
            "the real Flight 2.0.2 unchanged, on Bun: flight-node's stack (koa-logger to /dev/null, koa-session \
             in Redis, @koa/cors, koa-bodyparser) in Bun's node:cluster workers, the TypeScript backend run by \
             Bun itself (flight-node loads it through tsx)."
        }
        Runtime::BunCompiled | Runtime::BunBytecode => {
            "bun's peer, bundled with its dependencies into one executable by `bun build --compile` (bun-bytecode \
             adds `--bytecode --format=esm`: the JavaScript is parsed at build time): the same code and answers \
             as bun."
        }
        Runtime::Php => {
            "metadata.php in a php-fpm 8.2 worker (pm = static, one per server core, OPcache on without \
             timestamp checks) behind nginx over a unix socket. PHP keeps nothing between requests, so every \
             request opens the SQLite file, sets the pragmas and prepares the lookup, where the other runtimes \
             do that once (most of its cost per response: the timings are in metadata.php's header). Every answer's status and body are rust's; nginx adds `Server: nginx` and \
             `Connection: keep-alive` and capitalises header names."
        }
        _ => return None,
    })
}

fn framework(fw: Framework, service: Service) -> &'static str {
    match (fw, service) {
        (Framework::Fastify, Service::Ladder) => {
            "Fastify 5 routes: the POST body read raw by a content-type parser and decoded as ladder-rs does \
             (invalid UTF-8 and a BOM refused), validated by Fastify's own Ajv against the route's schema (extra \
             properties rejected, nothing coerced: rust's verdicts), every 200 serialized by fast-json-stringify \
             from the route's response schema in rust's key order; the SQLite and PostgreSQL reads are the peers' \
             shared code. An onSend hook per request sets rust's `application/json` (Fastify appends `; \
             charset=utf-8`). Headers beyond rust's: `Connection: keep-alive` and Fastify's `Keep-Alive: \
             timeout=72`."
        }
        (Framework::Fastify, Service::Metadata) => {
            "Fastify 5 routes (the id a route parameter, the region from Fastify's query parser) around the peers' \
             lookup; the 200 body is the peers' own answer builder (the bytes its cache stores), not Fastify's \
             serializer. An onSend hook sets `application/json`; `Connection: keep-alive` and `Keep-Alive: \
             timeout=72` added."
        }
        (Framework::Fastify, _) => {
            "Fastify 5 routes, 200s serialized by fast-json-stringify from the route's response schema; an onSend \
             hook sets `application/json`; `Connection: keep-alive` and `Keep-Alive: timeout=72` added."
        }
        (Framework::Express, Service::Ladder) => {
            "Express 5 routes (strict, case-sensitive): the POST body read by express.raw() under 64 KiB, not \
             express.json(), whose iconv decoding would let invalid UTF-8 and a BOM through where rust refuses \
             them, then checked by the same compiled ajv validator as node's peer; the answer sent as a Buffer \
             with the content-type set directly (res.json() adds a charset). x-powered-by and ETag off, so no hash \
             of the body per answer (on ladder-empty under Node the defaults cost about 7% of req/s). \
             `Connection: keep-alive` and `Keep-Alive: timeout=5` added."
        }
        (Framework::Express, _) => {
            "Express 5 routes (strict, case-sensitive) around the peers' shared handler, the answer sent as a \
             Buffer with the content-type set directly; x-powered-by and ETag off, so no hash of the body per \
             answer. `Connection: keep-alive` and `Keep-Alive: timeout=5` added."
        }
    }
}
