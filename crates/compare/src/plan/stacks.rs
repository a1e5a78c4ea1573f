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
             do that once. nginx adds `Server: nginx`; the bytes of every answer are rust's."
        }
        _ => return None,
    })
}

fn framework(fw: Framework, service: Service) -> &'static str {
    match (fw, service) {
        (Framework::Fastify, Service::Ladder) => {
            "Fastify 5 routes: the POST body parsed by Fastify's JSON parser and validated by its Ajv against the \
             route's schema (extra properties rejected, nothing coerced: rust's verdicts), 200 answers \
             serialized by fast-json-stringify from the route's response schema; the SQLite and PostgreSQL \
             reads are the peers' shared code. content-type is set to rust's `application/json` (Fastify's \
             default adds `; charset=utf-8`)."
        }
        (Framework::Fastify, _) => {
            "a Fastify 5 route around the peers' shared handler, its answer serialized by fast-json-stringify \
             from the route's response schema where it has one; content-type set to rust's `application/json`."
        }
        (Framework::Express, Service::Ladder) => {
            "Express 5 routes: the POST body read by express.json() (64 KiB limit) and checked by the same \
             compiled ajv validator as node's peer; x-powered-by and ETag off, so the bytes are rust's and no \
             hash of the body is computed per answer (what Express's defaults cost is in bench/results)."
        }
        (Framework::Express, _) => {
            "an Express 5 route around the peers' shared handler; x-powered-by and ETag off, so the bytes are \
             rust's and no hash of the body is computed per answer."
        }
    }
}
