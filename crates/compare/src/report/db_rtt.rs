//! `--db-rtt`: per workload that waits on a database, each runtime at each round trip the delay proxies
//! added, with its database connections beside it. A server that runs one query at a time per connection
//! cannot answer more than connections ÷ (round trip × round trips per request) per second however fast its
//! runtime is: the table gives that ceiling and marks the runs that reached it, so a reader sees where the pool,
//! not the runtime, set the figure.

use std::fmt::Write as _;

use crate::format::{fmt_median, fmt_spread, num};
use crate::plan::workloads::Workload;
use crate::records::{DbPool, Kind, Record, ordered};
use crate::reference;
use crate::report::posts_pair::{self, Condition};
use crate::report::sweep::rtt_key;
use crate::stats::spread;
use crate::table::Table;
use crate::verdict::Metric;

/// A run at or above this share of its pool's ceiling is marked pool-bound.
const POOL_BOUND_SHARE: f64 = 0.8;

/// The req/s `pool` allows at `rtt_ms` and `trips` round trips per request; `None` when it pipelines.
pub fn pool_ceiling(pool: DbPool, rtt_ms: f64, trips: u32) -> Option<f64> {
    (!pool.pipelined && rtt_ms > 0.0).then(|| f64::from(pool.connections) * 1e3 / (rtt_ms * f64::from(trips)))
}

fn pool_text(pool: Option<DbPool>) -> String {
    match pool {
        Some(p) if p.pipelined => format!("{}, pipelined", p.connections),
        Some(p) => format!("{}, one query each", p.connections),
        None => "—".to_string(),
    }
}

/// `w`'s section, when its runs went through the delay proxies.
pub fn section(out: &mut String, records: &[Record], w: &str, reference: &str) {
    let mine: Vec<&Record> =
        records.iter().filter(|r| r.workload == w && r.kind == Kind::Closed && r.db_rtt_ms.is_some()).collect();
    if mine.is_empty() {
        return;
    }
    let trips = Workload::parse(w).and_then(Workload::database_round_trips);
    let _ = writeln!(
        out,
        "\n### {w}: the database round trip\n\nClosed loop through delay proxies adding each round trip (half each way) \
         between the server and its PostgreSQL and Redis; medians, ratios per round. The ceiling is what the \
         server's database connections allow at {} round trip{} per request when each carries one query at a \
         time (connections ÷ round trip ÷ round trips); runs at {:.0}% of it or more are pool-bound: the pool, \
         not the runtime, set them.\n",
        trips.map_or("its".to_string(), |t| t.to_string()),
        if trips == Some(1) { "" } else { "s" },
        POOL_BOUND_SHARE * 100.0
    );
    let mut keys: Vec<(Option<u64>, Option<u32>)> = mine.iter().map(|r| (rtt_key(r), r.connections)).collect();
    keys.sort_unstable();
    keys.dedup();
    let runtimes = ordered(mine.iter().map(|r| r.runtime.as_str()));
    let ratio_head = format!("req/s ÷ {reference}");
    let mut table = Table::new([
        "round trip ms",
        "connections",
        "runtime",
        "req/s",
        "CPU-µs/resp",
        "p99 ms",
        "database connections",
        "ceiling req/s",
        ratio_head.as_str(),
        "proxies CPU-µs/resp",
        "valid runs",
    ]);
    let mut conditions = Vec::new();
    for (rtt, connections) in keys {
        let at: Vec<Record> =
            mine.iter().filter(|r| rtt_key(r) == rtt && r.connections == connections).map(|r| (*r).clone()).collect();
        let label =
            vec![num(at[0].db_rtt_ms.unwrap_or(0.0), 1), connections.map_or("—".to_string(), |c| c.to_string())];
        for rt in &runtimes {
            let of: Vec<&Record> = at.iter().filter(|r| &r.runtime == rt).collect();
            if of.is_empty() {
                continue;
            }
            let ok: Vec<&&Record> = of.iter().filter(|r| !r.void).collect();
            let rps = spread(ok.iter().filter_map(|r| r.req_per_s));
            let rtt_ms = of[0].db_rtt_ms.unwrap_or(0.0);
            let pool = of.iter().find_map(|r| r.db_pool);
            let ceiling = pool.zip(trips).and_then(|(p, t)| pool_ceiling(p, rtt_ms, t));
            let mut rps_text = fmt_spread(rps, 0, 1.0);
            if let (Some(c), Some(r)) = (ceiling, rps)
                && r.median >= POOL_BOUND_SHARE * c
            {
                rps_text.push_str(" pool-bound");
            }
            let ratio = reference::ratio_cell(&at, w, Kind::Closed, rt, reference, |r| r.req_per_s);
            table.row([
                &num(rtt_ms, 1),
                &connections.map_or("—".to_string(), |c| c.to_string()),
                rt.as_str(),
                &rps_text,
                &fmt_median(spread(ok.iter().filter_map(|r| r.server_cpu_us_per_resp)), 2, 1.0),
                &fmt_median(spread(ok.iter().filter_map(|r| r.latency_us.map(|l| l.p99 as f64))), 3, 1e-3),
                &pool_text(pool),
                &ceiling.map_or("—".to_string(), |c| num(c, 0)),
                &ratio,
                &fmt_median(spread(ok.iter().filter_map(|r| r.db_proxy_cpu_us_per_resp)), 2, 1.0),
                &format!("{}/{}", ok.len(), of.len()),
            ]);
        }
        conditions.push(Condition { label, records: at });
    }
    out.push_str(&table.finish());
    let metrics = [Metric::ReqPerS, Metric::CpuUsPerResp, Metric::P99Ms];
    posts_pair::table(out, w, &["round trip ms", "connections"], &conditions, &metrics);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::test_record;

    #[test]
    fn the_pool_sets_the_ceiling_where_it_runs_one_query_at_a_time() {
        let peers = DbPool { connections: 10, pipelined: false };
        assert_eq!(pool_ceiling(peers, 10.0, 1), Some(1000.0));
        assert_eq!(pool_ceiling(peers, 40.0, 2), Some(125.0));
        assert_eq!(pool_ceiling(DbPool { connections: 1, pipelined: true }, 10.0, 1), None);

        let run = |rt: &str, rtt: f64, rps: f64, pool: DbPool| {
            let mut r = test_record("ladder-postgres", rt, Kind::Closed, 1);
            (r.db_rtt_ms, r.req_per_s, r.connections, r.db_pool) = (Some(rtt), Some(rps), Some(256), Some(pool));
            r
        };
        let pipelined = DbPool { connections: 1, pipelined: true };
        let records = vec![
            run("rust", 10.0, 20_000.0, pipelined),
            run("bun", 10.0, 990.0, peers),
            run("rust", 1.0, 30_000.0, pipelined),
        ];
        let mut out = String::new();
        section(&mut out, &records, "ladder-postgres", "rust");
        assert!(out.contains("### ladder-postgres: the database round trip"), "{out}");
        assert!(out.contains("| 10.0 | 256 | bun | 990 pool-bound |"), "{out}");
        assert!(out.contains("| 10, one query each | 1,000 | 0.05 |"), "{out}");
        assert!(out.contains("| 1.0 | 256 | rust | 30,000 |"), "{out}");
        assert!(out.contains("| 1, pipelined | — | — |"), "{out}");
        let mut none = String::new();
        section(&mut none, &records[..0], "ladder-postgres", "rust");
        assert!(none.is_empty());
    }
}
