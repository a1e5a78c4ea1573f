//! The report as text, wrk-like: the first lines read like wrk's so people (and scripts) used to wrk find
//! their numbers; what wrk does not say (open loop, errors by kind, connections, loader CPU) follows.
//!
//! Units are human: latencies in us/ms/s, sizes in KB/MB/GB (1024-based, as wrk).

use std::fmt::Write as _;

use std::collections::BTreeMap;

use crate::report::{Latency, Report, SATURATED_PCT, Tls, decode_histogram};
use crate::stats::Http2Counts;
use textfmt::thousands;

/// The quantiles of the `--latency` distribution table, with their labels.
const DISTRIBUTION: [(&str, f64); 7] =
    [("50%", 0.50), ("75%", 0.75), ("90%", 0.90), ("99%", 0.99), ("99.9%", 0.999), ("99.99%", 0.9999), ("100%", 1.0)];

/// Threads listed one by one in the CPU line; past this, a summary (busiest, least busy).
const THREADS_LISTED: usize = 8;

/// The report as wrk-like text. `latency` adds the latency distribution table (`--latency`), read from the
/// decoded histogram(s).
pub fn text(report: &Report, latency: bool) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = write_text(&mut out, report, latency);
    out
}

fn write_text(out: &mut String, r: &Report, latency: bool) -> std::fmt::Result {
    write_title(out, r)?;
    write_latency(out, r, latency)?;
    write_responses(out, r)?;
    write_accounting(out, r)?;
    if let Some(tls) = &r.tls {
        write_tls(out, tls)?;
    }
    if let Some(h2) = &r.http2 {
        write_http2(out, h2, r.config.pipeline)?;
    }
    write_cpu(out, r)
}

/// What HTTP/2 did: the protocol each connection spoke, the streams, what the server allowed and whether it
/// capped `--streams`, then anything that went wrong at the protocol's level (refusals, resets, GOAWAYs,
/// connection errors), each by code.
fn write_http2(out: &mut String, h: &Http2Counts, streams: u32) -> std::fmt::Result {
    let spoke = if h.negotiated.is_empty() { "nothing".to_string() } else { agreed(&h.negotiated) };
    let mut line = format!("  HTTP/2: {spoke}; {} streams opened, {streams} per connection", h.streams_opened);
    if let Some(cap) = h.capped_at {
        let _ = write!(line, " asked, {cap} allowed by the server");
    }
    if let Some(s) = &h.server_settings {
        let max = s.max_concurrent_streams.map_or("unlimited".to_string(), |m| m.to_string());
        let _ = write!(line, "; server SETTINGS: {max} streams, window {}", s.initial_window_size);
    }
    writeln!(out, "{line}")?;
    let mut trouble = Vec::new();
    for (what, n) in [("refused", h.refused), ("our stream errors", h.stream_errors)]
        .into_iter()
        .chain([("cancelled at the timeout", h.cancelled), ("unprocessed after GOAWAY", h.unprocessed)])
    {
        if n > 0 {
            trouble.push(format!("{n} {what}"));
        }
    }
    for (what, map) in [("RST_STREAM", &h.resets), ("GOAWAY", &h.goaways), ("connection errors", &h.connection_errors)]
    {
        if !map.is_empty() {
            trouble.push(format!("{what} {}", counted(map)));
        }
    }
    if !trouble.is_empty() {
        writeln!(out, "  HTTP/2 events: {}", trouble.join("; "))?;
    }
    Ok(())
}

/// What ran: `Running 10s test @ URL`, then the threads, connections and how latency was measured.
fn write_title(out: &mut String, r: &Report) -> std::fmt::Result {
    let c = &r.config;
    if r.merged_from > 1 {
        writeln!(out, "Merged {} reports, {} window @ {}", r.merged_from, run_length(r.duration_s), r.target)?;
    } else {
        writeln!(out, "Running {} test @ {}", run_length(c.duration_s), r.target)?;
    }

    let mut shape = format!("  {} threads and {} connections", c.threads, c.connections);
    if c.pipeline > 1 {
        let _ = write!(shape, ", pipeline {}", c.pipeline);
    }
    match &r.open_loop {
        Some(ol) => {
            match (c.rate_start, c.rate, c.ramp_s) {
                (Some(start), Some(end), Some(over)) => {
                    let _ = write!(shape, " (open loop ramping {} → {} req/s over {over}s", rate(start), rate(end));
                }
                _ => {
                    let _ = write!(shape, " (open loop at {} req/s", rate(ol.target_rate));
                }
            }
            if let Some(schedule) = &c.schedule {
                let _ = write!(shape, ", {schedule}");
            }
            shape.push_str("; latency from intended send time)");
        }
        None if r.latency.corrected => shape.push_str(" (latency from intended send time)"),
        None => shape.push_str(" (closed loop; latency uncorrected)"),
    }
    writeln!(out, "{shape}")
}

/// The latency summary lines, and with `--latency` the distribution tables.
fn write_latency(out: &mut String, r: &Report, distribution: bool) -> std::fmt::Result {
    writeln!(out, "  Latency  {}", latency_summary(&r.latency))?;
    if let Some(fw) = &r.latency_from_write {
        writeln!(out, "  From write  {}", latency_summary(fw))?;
    }
    if distribution {
        write_distribution(out, "Latency Distribution", &r.latency)?;
        if let Some(fw) = &r.latency_from_write {
            write_distribution(out, "Latency Distribution, from the actual write (uncorrected)", fw)?;
        }
    }
    Ok(())
}

/// wrk's throughput lines, then what came back: statuses, errors by kind, responses outside 2xx/3xx.
fn write_responses(out: &mut String, r: &Report) -> std::fmt::Result {
    writeln!(out, "  {} responses in {:.2}s, {} read", r.responses, r.duration_s, bytes(r.bytes_read as f64))?;
    let window = r.duration_s.max(1e-9);
    writeln!(out, "Requests/sec: {:.2}", r.req_per_s)?;
    writeln!(out, "Transfer/sec: {:>8}", bytes(r.bytes_read as f64 / window))?;

    if !r.status.is_empty() {
        let codes: Vec<String> = r.status.iter().map(|(code, n)| format!("{code} × {n}")).collect();
        writeln!(out, "  Status: {}", codes.join(", "))?;
    }
    let e = &r.errors;
    if e.total() > 0 {
        let nonzero: Vec<String> =
            e.by_kind().iter().filter(|(_, n)| *n > 0).map(|(k, n)| format!("{k} {n}")).collect();
        writeln!(out, "  Errors: {}", nonzero.join(", "))?;
    }
    if r.non_2xx_3xx > 0 {
        writeln!(out, "  Non-2xx or 3xx responses: {}", r.non_2xx_3xx)?;
    }
    Ok(())
}

/// What wrk does not say: connections, the open loop's sends, assertions.
fn write_accounting(out: &mut String, r: &Report) -> std::fmt::Result {
    let conn = &r.connections;
    let mut line = format!("  Connections: {} asked, {} established", conn.asked, conn.established);
    if conn.failed > 0 {
        let _ = write!(line, ", {} failed", conn.failed);
    }
    if r.config.requests_per_conn.is_some() || r.tls.is_some() {
        let _ = write!(line, ", {} opened", conn.opened);
    }
    if let Some(n) = r.config.requests_per_conn {
        let _ = write!(line, " ({n} requests each)");
    }
    let _ = write!(line, ", {} reconnects; {} in flight at end", r.reconnects, r.in_flight_at_end);
    writeln!(out, "{line}")?;

    if let Some(ol) = &r.open_loop {
        let mut line = format!(
            "  Open loop: target {} req/s, achieved {:.1}; {} of {} sends late (>1 ms)",
            rate(ol.target_rate),
            ol.achieved_rate,
            ol.late_sends,
            ol.scheduled
        );
        if ol.missed_sends > 0 {
            let _ = write!(
                line,
                ", {} never sent (still waiting for a connection at the end; latency counts their waits)",
                ol.missed_sends
            );
        }
        writeln!(out, "{line}")?;
    }
    if r.assertions.checked > 0 {
        writeln!(out, "  Assertions: {} checked, {} failed", r.assertions.checked, r.assertions.failed)?;
    }
    Ok(())
}

/// What the handshakes negotiated (each value, or each with its count when connections differed), full
/// against resumed, their latency, and the failures by reason.
fn write_tls(out: &mut String, t: &Tls) -> std::fmt::Result {
    let c = &t.counts;
    let h = &c.handshakes;
    if c.finished() > 0 {
        let values = [&c.versions, &c.cipher_suites, &c.groups].map(agreed);
        let mut line = format!("  TLS: {}, ALPN {}; {} full", values.join(", "), agreed(&c.alpn), h.full);
        if h.full_with_hello_retry > 0 {
            let _ = write!(line, " (+{} after a HelloRetryRequest)", h.full_with_hello_retry);
        }
        let _ = write!(line, ", {} resumed handshakes", h.resumed);
        writeln!(out, "{line}")?;
        writeln!(out, "  Handshake  {}  (connect to handshake done)", latency_summary(&t.handshake_latency))?;
    }
    if !c.failures.is_empty() {
        writeln!(out, "  TLS failures: {}", counted(&c.failures))?;
    }
    Ok(())
}

/// The one value every connection agreed on, or each with its count: `TLSv1.3 × 90, TLSv1.2 × 10`.
fn agreed(values: &BTreeMap<String, u64>) -> String {
    match values.keys().collect::<Vec<_>>().as_slice() {
        [one] => one.to_string(),
        _ => counted(values),
    }
}

fn counted(values: &BTreeMap<String, u64>) -> String {
    values.iter().map(|(k, n)| format!("{k} × {n}")).collect::<Vec<_>>().join(", ")
}

/// `p50 170us  p99 669us  p99.9 1.20ms  max 3.10ms  (mean 180us ± 50us)`.
fn latency_summary(l: &Latency) -> String {
    if l.count == 0 {
        return "no samples".to_string();
    }
    format!(
        "p50 {}  p99 {}  p99.9 {}  max {}  (mean {} ± {})",
        micros(l.p50_us as f64),
        micros(l.p99_us as f64),
        micros(l.p99_9_us as f64),
        micros(l.max_us as f64),
        micros(l.mean_us),
        micros(l.stdev_us)
    )
}

/// The wrk `--latency` table, from the decoded histogram (so any quantile is exact to the histogram's
/// precision). A histogram that does not decode falls back to the stored percentiles and says so.
fn write_distribution(out: &mut String, title: &str, l: &Latency) -> std::fmt::Result {
    writeln!(out, "  {title}")?;
    if l.count == 0 {
        return writeln!(out, "     no samples");
    }
    let values: Vec<f64> = match decode_histogram(&l.histogram) {
        Ok(h) if !h.is_empty() => DISTRIBUTION.iter().map(|(_, q)| h.value_at_quantile(*q) as f64).collect(),
        Ok(_) => return writeln!(out, "     (histogram is empty although {} samples were counted)", l.count),
        Err(e) => {
            writeln!(out, "     ({e}; stored percentiles shown)")?;
            [l.p50_us, l.p75_us, l.p90_us, l.p99_us, l.p99_9_us, l.p99_99_us, l.max_us].map(|v| v as f64).to_vec()
        }
    };
    for ((label, _), v) in DISTRIBUTION.iter().zip(values) {
        writeln!(out, "  {label:>8}  {:>9}", micros(v))?;
    }
    Ok(())
}

fn write_cpu(out: &mut String, r: &Report) -> std::fmt::Result {
    let cpu = &r.cpu;
    let mut line = format!(
        "  Loader CPU: {:.2} us/response, {} responses per CPU-second",
        cpu.us_per_response,
        thousands(cpu.responses_per_cpu_s.round() as u64)
    );
    if cpu.threads.len() <= THREADS_LISTED {
        for (i, t) in cpu.threads.iter().enumerate() {
            let _ = write!(line, "; thread {i}");
            if let Some(id) = t.cpu {
                let _ = write!(line, " on cpu {id}");
            }
            let _ = write!(line, " busy {:.0}%", t.busy_pct);
        }
    } else {
        let busiest = cpu.threads.iter().map(|t| t.busy_pct).fold(f64::MIN, f64::max);
        let idlest = cpu.threads.iter().map(|t| t.busy_pct).fold(f64::MAX, f64::min);
        let _ = write!(line, "; {} threads busy {:.0}%–{:.0}%", cpu.threads.len(), idlest, busiest);
    }
    writeln!(out, "{line}")?;
    if cpu.saturated {
        writeln!(
            out,
            "  WARNING: a loader thread was >{SATURATED_PCT:.0}% busy; the loader may be the bottleneck \
             (add threads or machines)"
        )?;
    }
    Ok(())
}

/// Latency, from microseconds: `170us`, `1.25ms`, `2.50s`.
pub fn micros(us: f64) -> String {
    if us < 1_000.0 {
        format!("{us:.0}us")
    } else if us < 1_000_000.0 {
        format!("{:.2}ms", us / 1e3)
    } else {
        format!("{:.2}s", us / 1e6)
    }
}

/// Sizes, 1024-based as in wrk: `512B`, `1.50KB`, `235.10MB`, `2.00GB`.
pub fn bytes(n: f64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if n < 1024.0 {
        return format!("{n:.0}B");
    }
    let mut value = n / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.2}{}", UNITS[unit])
}

/// The run's length for the title line: `10s`, `2.5s`, `500ms`, `2m`, `1m30s`.
fn run_length(seconds: f64) -> String {
    if seconds < 1.0 {
        return format!("{:.0}ms", seconds * 1e3);
    }
    if seconds.fract().abs() > 1e-9 {
        return format!("{}s", trim_float(seconds, 2));
    }
    let s = seconds as u64;
    match (s / 60, s % 60) {
        (0, s) => format!("{s}s"),
        (m, 0) => format!("{m}m"),
        (m, s) => format!("{m}m{s}s"),
    }
}

/// A rate without noise: `20000`, `1500.5`.
fn rate(r: f64) -> String {
    trim_float(r, 1)
}

fn trim_float(v: f64, decimals: usize) -> String {
    let s = format!("{v:.decimals$}");
    if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{RunConfig, RunMeta};
    use crate::stats::WorkerStats;

    /// A run as `loadgen -c64 [-R RATE] URL` would record it, its one thread pinned to CPU 1.
    fn meta(rate: Option<f64>) -> RunMeta {
        let url = "http://127.0.0.1:3000/api/hello";
        let mut command = vec!["loadgen".to_string(), "-c64".into()];
        command.extend(rate.map(|r| format!("-R{r}")));
        command.push(url.into());
        let mut settings = crate::cli::run_settings_of(&command);
        settings.pins = Some(vec![1]);
        RunMeta {
            config: RunConfig::new(&settings, 1, "url".into(), "epoll"),
            command,
            target: url.into(),
            started_unix_ms: 1_700_000_000_000,
            duration_s: 10.0,
        }
    }

    fn worker(open_loop: bool) -> WorkerStats {
        let mut w = WorkerStats::new(open_loop);
        for v in 1..=1000u64 {
            w.latency.record(100 + v).unwrap_or_else(|e| panic!("record: {e}"));
            if let Some(h) = &mut w.latency_from_write {
                h.record(50 + v).unwrap_or_else(|e| panic!("record: {e}"));
            }
        }
        w.responses = 1000;
        w.status.insert(200, 990);
        w.status.insert(503, 10);
        w.bytes_read = 1000 * 133;
        w.bytes_written = 1000 * 40;
        w.connections_asked = 64;
        w.connections_established = 64;
        w.in_flight_at_end = 3;
        w.cpu_user_us = 6_000_000;
        w.cpu_sys_us = 3_800_000;
        w.pinned_cpu = Some(1);
        w
    }

    #[test]
    fn closed_loop_reads_like_wrk() {
        let report = Report::from_workers(meta(None), &[worker(false)]).unwrap_or_else(|e| panic!("{e}"));
        let out = text(&report, false);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "Running 10s test @ http://127.0.0.1:3000/api/hello");
        assert_eq!(lines[1], "  1 threads and 64 connections (closed loop; latency uncorrected)");
        assert!(lines[2].starts_with("  Latency  p50 6"), "{out}");
        assert!(lines[2].contains("max 1.10ms"), "{out}");
        assert!(out.contains("  1000 responses in 10.00s, 129.88KB read\n"), "{out}");
        assert!(out.contains("Requests/sec: 100.00\n"), "{out}");
        assert!(out.contains("Transfer/sec:  12.99KB\n"), "{out}");
        assert!(out.contains("  Status: 200 × 990, 503 × 10\n"), "{out}");
        assert!(out.contains("  Non-2xx or 3xx responses: 10\n"), "{out}");
        assert!(out.contains("  Connections: 64 asked, 64 established, 0 reconnects; 3 in flight at end\n"), "{out}");
        assert!(
            out.contains(
                "  Loader CPU: 9800.00 us/response, 102 responses per CPU-second; thread 0 on cpu 1 busy 98%\n"
            ),
            "{out}"
        );
        assert!(out.contains("WARNING: a loader thread was >90% busy"), "{out}");
        // Only what happened is shown.
        assert!(!out.contains("Errors:"), "{out}");
        assert!(!out.contains("Open loop"), "{out}");
        assert!(!out.contains("Assertions"), "{out}");
        assert!(!out.contains("Distribution"), "{out}");
        assert!(!out.contains("From write"), "{out}");
    }

    #[test]
    fn distribution_comes_from_the_histogram() {
        let report = Report::from_workers(meta(None), &[worker(false)]).unwrap_or_else(|e| panic!("{e}"));
        let out = text(&report, true);
        assert!(out.contains("  Latency Distribution\n"), "{out}");
        // 101..=1100 us: the median is ~600 us and the maximum 1.10 ms (HDR precision, 3 digits).
        assert!(out.contains("       50%      600us\n"), "{out}");
        assert!(out.contains("      100%     1.10ms\n"), "{out}");
        for label in ["75%", "90%", "99%", "99.9%", "99.99%"] {
            assert!(out.contains(&format!("  {label:>8}  ")), "{label} missing: {out}");
        }

        // A histogram that does not decode still prints, from the stored percentiles.
        let mut broken = report.clone();
        broken.latency.histogram = "not base64!".into();
        let out = text(&broken, true);
        assert!(out.contains("stored percentiles shown"), "{out}");
        assert!(out.contains("      100%     1.10ms\n"), "{out}");
    }

    #[test]
    fn open_loop_errors_and_assertions_are_shown() {
        let mut w = worker(true);
        w.scheduled = 200_000;
        w.late_sends = 12;
        w.errors.timeout = 3;
        w.errors.read = 1;
        w.errors.assertion = 2;
        w.assertions_checked = 1000;
        w.reconnects = 4;
        w.cpu_user_us = 1_000_000;
        w.cpu_sys_us = 0;
        w.pinned_cpu = None;
        let report = Report::from_workers(meta(Some(20_000.0)), &[w]).unwrap_or_else(|e| panic!("{e}"));
        let out = text(&report, true);
        assert!(
            out.contains(
                "  1 threads and 64 connections (open loop at 20000 req/s, uniform; latency from intended send time)\n"
            ),
            "{out}"
        );
        assert!(out.contains("  From write  p50 "), "{out}");
        assert!(out.contains("  Latency Distribution, from the actual write (uncorrected)\n"), "{out}");
        assert!(out.contains("  Errors: read 1, timeout 3, assertion 2\n"), "{out}");
        assert!(out.contains(", 4 reconnects; 3 in flight at end\n"), "{out}");
        assert!(
            out.contains("  Open loop: target 20000 req/s, achieved 100.0; 12 of 200000 sends late (>1 ms)\n"),
            "{out}"
        );
        let mut missed = report.clone();
        if let Some(ol) = &mut missed.open_loop {
            ol.missed_sends = 7;
        }
        assert!(text(&missed, false).contains(
            "sends late (>1 ms), 7 never sent (still waiting for a connection at the end; latency counts their waits)\n"
        ));
        assert!(out.contains("  Assertions: 1000 checked, 2 failed\n"), "{out}");
        assert!(out.contains("; thread 0 busy 10%\n"), "{out}");
        assert!(!out.contains("WARNING"), "{out}");
    }

    #[test]
    fn empty_run_and_merged_title() {
        let mut w = WorkerStats::new(false);
        w.connections_asked = 4;
        let mut report = Report::from_workers(meta(None), &[w]).unwrap_or_else(|e| panic!("{e}"));
        let out = text(&report, true);
        assert!(out.contains("  Latency  no samples\n"), "{out}");
        assert!(out.contains("  Connections: 4 asked, 0 established, 4 failed, 0 reconnects"), "{out}");
        assert!(!out.contains("Status:"), "{out}");
        report.merged_from = 3;
        report.duration_s = 10.2;
        assert!(text(&report, false).starts_with("Merged 3 reports, 10.2s window @ http://"));
    }

    #[test]
    fn tls_says_what_was_negotiated_and_how_often() {
        use crate::handshake::{Handshake, Kind};
        let mut w = worker(false);
        let mut tls = crate::stats::TlsStats::default();
        let h13 = Handshake {
            version: "TLSv1.3",
            cipher_suite: "TLS13_AES_128_GCM_SHA256",
            group: "X25519",
            alpn: "http/1.1",
            kind: Kind::Full,
        };
        tls.record(&h13, 900);
        for _ in 0..3 {
            tls.record(&Handshake { kind: Kind::Resumed, ..h13 }, 400);
        }
        w.tls = Some(tls.clone());
        let report = Report::from_workers(meta(None), &[w.clone()]).unwrap_or_else(|e| panic!("{e}"));
        let out = text(&report, false);
        assert!(
            out.contains(
                "  TLS: TLSv1.3, TLS13_AES_128_GCM_SHA256, X25519, ALPN http/1.1; 1 full, 3 resumed handshakes\n"
            ),
            "{out}"
        );
        assert!(out.contains("  Handshake  p50 400us  p99 900us"), "{out}");
        assert!(out.contains("(connect to handshake done)\n"), "{out}");
        assert!(!out.contains("TLS failures"), "{out}");

        tls.record(&Handshake { version: "TLSv1.2", group: "none", ..h13 }, 1000);
        tls.failed("invalid certificate: UnknownIssuer");
        w.tls = Some(tls);
        let out = text(&Report::from_workers(meta(None), &[w]).unwrap_or_else(|e| panic!("{e}")), false);
        assert!(
            out.contains("  TLS: TLSv1.2 × 1, TLSv1.3 × 4, TLS13_AES_128_GCM_SHA256, X25519 × 4, none × 1, "),
            "{out}"
        );
        assert!(out.contains("  TLS failures: invalid certificate: UnknownIssuer × 1\n"), "{out}");
    }

    #[test]
    fn units_are_human() {
        assert_eq!(micros(170.0), "170us");
        assert_eq!(micros(1_250.0), "1.25ms");
        assert_eq!(micros(2_500_000.0), "2.50s");
        assert_eq!(bytes(512.0), "512B");
        assert_eq!(bytes(1536.0), "1.50KB");
        assert_eq!(bytes(235.1 * 1024.0 * 1024.0), "235.10MB");
        assert_eq!(bytes(3.0 * 1024.0 * 1024.0 * 1024.0), "3.00GB");
        assert_eq!(run_length(10.0), "10s");
        assert_eq!(run_length(0.5), "500ms");
        assert_eq!(run_length(120.0), "2m");
        assert_eq!(run_length(90.0), "1m30s");
        assert_eq!(run_length(2.5), "2.5s");
        assert_eq!(rate(20_000.0), "20000");
        assert_eq!(rate(1500.5), "1500.5");
    }
}
