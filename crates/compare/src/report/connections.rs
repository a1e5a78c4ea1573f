//! What each connection cost and carried, on the workloads that speak TLS or reconnect: per runtime, the
//! responses each connection served, the server's CPU per connection, the handshakes (full and resumed,
//! and how long connect plus handshake took) and what was negotiated. A runtime that resumed fewer
//! sessions than another did more full handshakes for the same load, and this is where that shows.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::format::fmt_median;
use crate::plan::workloads::Workload;
use crate::records::{Kind, Record, ordered};
use crate::stats::spread;
use crate::table::Table;

fn responses_per_conn(r: &Record) -> Option<f64> {
    let opened = r.connections_opened.filter(|&n| n > 0)?;
    Some(r.requests? as f64 / opened as f64)
}

fn cpu_per_conn(r: &Record) -> Option<f64> {
    Some(r.server_cpu_us_per_resp? * responses_per_conn(r)?)
}

fn resumed_pct(r: &Record) -> Option<f64> {
    let tls = r.tls.as_ref()?;
    let all = tls.full_handshakes + tls.resumed_handshakes;
    (all > 0).then(|| 100.0 * tls.resumed_handshakes as f64 / all as f64)
}

/// The keys of a negotiated-parameter map, joined (one when every handshake agreed).
fn names(map: &BTreeMap<String, u64>) -> String {
    let keys: Vec<&str> = map.iter().filter(|(_, n)| **n > 0).map(|(k, _)| k.as_str()).collect();
    if keys.is_empty() { "—".to_string() } else { keys.join(" + ") }
}

/// The table of one workload's closed-loop runs, when its load reconnects or speaks TLS.
pub fn table(out: &mut String, records: &[Record], workload: &str) {
    let ok: Vec<&Record> =
        records.iter().filter(|r| r.workload == workload && r.kind == Kind::Closed && !r.void).collect();
    // Per connection only where the load reconnects: on keep-alive it would divide by however many
    // connections the window happened to open.
    let reconnects = Workload::parse(workload).is_some_and(|w| w.connecting().requests_per_conn.is_some());
    let tls = ok.iter().any(|r| r.tls.is_some());
    if !reconnects && !tls {
        return;
    }
    let _ = writeln!(
        out,
        "\nConnections (closed loop, medians): {}.\n",
        [
            reconnects.then_some(
                "responses each connection served and the server's CPU-µs per connection (per response × \
                 responses per connection)",
            ),
            tls.then_some(
                "the handshakes (resumed share; connect() to handshake done, as the loader saw it) and what every \
                 handshake negotiated",
            ),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join("; ")
    );
    let mut head = vec!["runtime"];
    if reconnects {
        head.extend(["responses/conn", "CPU-µs/conn"]);
    }
    if tls {
        head.extend(["resumed", "handshake p50 ms", "handshake p99 ms", "negotiated"]);
    }
    let mut table = Table::new(head);
    for rt in ordered(ok.iter().map(|r| r.runtime.as_str())) {
        let of: Vec<&&Record> = ok.iter().filter(|r| r.runtime == rt).collect();
        let median = |f: &dyn Fn(&Record) -> Option<f64>, digits: usize, scale: f64| {
            fmt_median(spread(of.iter().filter_map(|r| f(r))), digits, scale)
        };
        let mut row = vec![rt.clone()];
        if reconnects {
            row.extend([median(&responses_per_conn, 1, 1.0), median(&cpu_per_conn, 1, 1.0)]);
        }
        if tls {
            let handshake = |pick: fn(&crate::records::LatencyUs) -> u64| {
                move |r: &Record| r.tls.as_ref().map(|t| pick(&t.handshake_latency_us) as f64)
            };
            let negotiated = of.iter().find_map(|r| r.tls.as_ref()).map_or("—".to_string(), |t| {
                format!(
                    "{}, {}, {}, ALPN {}",
                    names(&t.versions),
                    names(&t.cipher_suites),
                    names(&t.groups),
                    names(&t.alpn)
                )
            });
            row.extend([
                format!("{}%", median(&resumed_pct, 0, 1.0)),
                median(&handshake(|l| l.p50), 2, 1e-3),
                median(&handshake(|l| l.p99), 2, 1e-3),
                negotiated,
            ]);
        }
        table.row(&row);
    }
    out.push_str(&table.finish());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{LatencyUs, TlsSeen, test_record};

    fn run(rt: &str, requests: u64, opened: u64, resumed: u64, tls: bool) -> Record {
        let mut r = test_record("hello-resume", rt, Kind::Closed, 1);
        r.requests = Some(requests);
        r.connections_opened = Some(opened);
        r.server_cpu_us_per_resp = Some(200.0);
        let one = |k: &str| [(k.to_string(), opened)].into_iter().collect();
        r.tls = tls.then(|| TlsSeen {
            versions: one("TLSv1.3"),
            cipher_suites: one("TLS13_AES_128_GCM_SHA256"),
            groups: one("X25519"),
            alpn: one("http/1.1"),
            full_handshakes: opened - resumed,
            resumed_handshakes: resumed,
            handshake_latency_us: LatencyUs { p50: 1500, p95: None, p99: 4000, p999: 5000, max: 9000 },
            failures: Default::default(),
        });
        r
    }

    #[test]
    fn per_connection_costs_and_handshakes() {
        let records = [run("rust", 1000, 1000, 990, true), run("node", 1000, 1000, 580, true)];
        let mut out = String::new();
        table(&mut out, &records, "hello-resume");
        assert!(
            out.contains(
                "| rust | 1.0 | 200.0 | 99% | 1.50 | 4.00 | TLSv1.3, TLS13_AES_128_GCM_SHA256, X25519, ALPN http/1.1 |"
            ),
            "{out}"
        );
        assert!(out.contains("| node | 1.0 | 200.0 | 58% |"), "{out}");

        // Cleartext churn: no TLS columns; keep-alive: no table at all.
        let mut out = String::new();
        table(&mut out, &[run("rust", 1000, 100, 0, false)], "hello-resume");
        assert!(out.contains("| rust | 10.0 | 2,000.0 |") && !out.contains("resumed"), "{out}");
        let mut out = String::new();
        let mut keep_alive = run("rust", 1000, 100, 0, false);
        keep_alive.workload = "hello-bare".into();
        table(&mut out, &[keep_alive], "hello-bare");
        assert!(out.is_empty(), "{out}");
        // Keep-alive over TLS: the handshakes, not a cost per connection.
        let mut out = String::new();
        let mut json = run("rust", 1000, 100, 0, true);
        json.workload = "json-tls".into();
        table(&mut out, &[json], "json-tls");
        assert!(out.contains("| runtime | resumed |") && !out.contains("CPU-µs/conn"), "{out}");
    }
}
