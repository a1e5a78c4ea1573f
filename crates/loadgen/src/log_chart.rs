//! `loadgen log-chart LOG --svg OUT`: a `--log-requests` file drawn as latency over time. Responses are
//! grouped by their intended send time into buckets (`--bucket`, 100 ms by default); each bucket's p50, p99
//! and max are drawn on a log scale, so a pause shows as a spike at the moment the requests it delayed were
//! due, not when they finally completed.

use std::fmt::Write as _;
use std::time::Duration;

use textfmt::xml::escape_text;

use crate::request_log::Record;

const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 400.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;

/// One time bucket's latencies, µs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    /// Its start, seconds after the window's start.
    pub start_s: f64,
    pub count: usize,
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

/// Groups records by intended send time into buckets of `width` (empty buckets are left out).
pub fn buckets(records: &[Record], width: Duration) -> Vec<Bucket> {
    let width_us = (width.as_micros() as u64).max(1);
    let mut groups: std::collections::BTreeMap<u64, Vec<u64>> = std::collections::BTreeMap::new();
    for r in records {
        groups.entry(r.intended_us / width_us).or_default().push(r.latency_us);
    }
    groups
        .into_iter()
        .map(|(index, mut latencies)| {
            latencies.sort_unstable();
            // Nearest rank: the smallest value with at least q of the bucket at or below it.
            let rank = |q: f64| latencies[((q * latencies.len() as f64).ceil() as usize).clamp(1, latencies.len()) - 1];
            Bucket {
                start_s: (index * width_us) as f64 / 1e6,
                count: latencies.len(),
                p50_us: rank(0.50),
                p99_us: rank(0.99),
                max_us: latencies[latencies.len() - 1],
            }
        })
        .collect()
}

/// The SVG.
pub fn svg(records: &[Record], width: Duration, title: &str) -> String {
    let buckets = buckets(records, width);
    let end_s = buckets.last().map_or(1.0, |b| b.start_s + width.as_secs_f64()).max(1e-3);
    let lowest = buckets.iter().map(|b| b.p50_us).min().unwrap_or(1).max(1);
    let highest = buckets.iter().map(|b| b.max_us).max().unwrap_or(10).max(lowest * 10);
    let (lo_exp, hi_exp) = ((lowest as f64).log10().floor() as i32, (highest as f64).log10().ceil() as i32);
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let x = |s: f64| LEFT + s / end_s * plot_w;
    let y = |us: u64| {
        let v = (us.max(1) as f64).log10();
        TOP + plot_h - (v - f64::from(lo_exp)) / f64::from(hi_exp - lo_exp) * plot_h
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(out, r#"<text x="{LEFT}" y="22" font-size="14">{}</text>"#, escape_text(title));
    for exp in lo_exp..=hi_exp {
        let us = 10u64.pow(exp.max(0) as u32);
        let yy = y(us);
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            WIDTH - RIGHT,
            LEFT - 6.0,
            yy + 4.0,
            crate::render::micros(us as f64)
        );
    }
    let ticks = 10;
    for i in 0..=ticks {
        let s = end_s * f64::from(i) / f64::from(ticks);
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{s:.1}s</text>"#,
            x(s),
            HEIGHT - BOTTOM + 18.0
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">intended send time (bucket {})</text>"#,
        LEFT + plot_w / 2.0,
        HEIGHT - 12.0,
        crate::render::micros(width.as_micros() as f64)
    );
    for (name, color, pick) in [
        ("max", "#999999", (|b: &Bucket| b.max_us) as fn(&Bucket) -> u64),
        ("p99", "#d95f02", |b: &Bucket| b.p99_us),
        ("p50", "#1b9e77", |b: &Bucket| b.p50_us),
    ] {
        let points: Vec<String> = buckets
            .iter()
            .map(|b| format!("{:.1},{:.1}", x(b.start_s + width.as_secs_f64() / 2.0), y(pick(b))))
            .collect();
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{}"/>"#,
            points.join(" ")
        );
        let legend_x = match name {
            "p50" => WIDTH - RIGHT - 210.0,
            "p99" => WIDTH - RIGHT - 140.0,
            _ => WIDTH - RIGHT - 70.0,
        };
        let _ = writeln!(
            out,
            r#"<rect x="{legend_x}" y="12" width="12" height="3" fill="{color}"/><text x="{:.1}" y="18">{name}</text>"#,
            legend_x + 16.0
        );
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(intended_us: u64, latency_us: u64) -> Record {
        Record { intended_us, sent_us: intended_us, latency_us, status: 200, body_bytes: 0, conn: 0 }
    }

    #[test]
    fn buckets_take_nearest_rank_percentiles_by_intended_time() {
        let mut records: Vec<Record> = (1..=100).map(|i| rec(i * 10, i)).collect();
        records.push(rec(250_000, 5_000));
        let b = buckets(&records, Duration::from_millis(100));
        assert_eq!(b.len(), 2);
        assert_eq!((b[0].count, b[0].p50_us, b[0].p99_us, b[0].max_us), (100, 50, 99, 100));
        assert_eq!((b[1].start_s, b[1].count, b[1].max_us), (0.2, 1, 5_000));
        let svg = svg(&records, Duration::from_millis(100), "a <run>");
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n") && svg.contains("a &lt;run&gt;"));
        assert_eq!(svg.matches("<polyline").count(), 3);
    }
}
